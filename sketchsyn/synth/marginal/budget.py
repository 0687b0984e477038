"""How a table release spends its budget: :class:`ReleasePlan`.

A release of :class:`~sketchsyn.synth.marginal.MarginalSynthesizer` on a table measures, in this
order (the method of McKenna, Miklau and Sheldon's MST and of McKenna, Mullins, Sheldon and
Miklau's AIM, "AIM: An Adaptive and Iterative Mechanism for Differentially Private Synthetic
Data", in pure ε-DP):

0. when the table has an ordered column whose one-way bins the release may merge, the row
   count, with ``count_epsilon``: the release fits those bins to this noisy count, not to the
   ``expected_n`` guessed before any row arrived (:func:`~sketchsyn.synth.marginal.planner.
   release_bits`);
1. every column's one-way table: ``d`` flat histograms of ``singles_epsilon`` each;
2. ``d − 1`` pairs forming a spanning tree, each picked by a private selection of
   ``select_epsilon`` (:func:`~sketchsyn.privacy.selection.report_noisy_max`) and measured with
   ``pair_epsilon``;
3. ``rounds`` more pairs, each picked by a private selection of ``select_epsilon`` and measured
   with ``pair_epsilon``.

When those ``d − 1 + rounds`` pairs are all ``P = d(d − 1)/2`` pairs, every pair is measured and
nothing is selected. The count's part, ``count_share · ε`` (:data:`COUNT_SHARE`), comes out
of the pairs' share. The parts add up to at most ``ε`` as exact rationals. Every noise scale and
selection scale is multiplied by ``sensitivity``: how many rows two neighbouring inputs can
differ by in each table (1 for one row added or removed).

>>> plan = ReleasePlan.make(d=4, epsilon=1.0, singles_share=0.4, select_share=0.1, rounds=1)
>>> plan.measured, plan.selections, round(plan.single_scale, 6), round(plan.pair_scale, 6)
(4, 4, 10.0, 8.0)
>>> counted = ReleasePlan.make(4, 1.0, 0.4, 0.1, rounds=1, count_share=0.01)
>>> round(counted.count_scale, 6), round(counted.pair_scale, 6), counted.parts()["count"]
(100.0, 8.163265, 0.01)
>>> plan.total_fraction() <= 1
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from ...errors import EPSILON_RANGE, ParameterError
from ...privacy import accounting

__all__ = [
    "COUNT_SHARE",
    "SCARCE",
    "SCARCE_SHARE",
    "SELECT_SHARE",
    "SINGLES_SHARE",
    "RULE_PARTS",
    "ReleasePlan",
    "default_release",
    "is_rule",
    "rule_plan",
]

_OWNER = "MarginalSynthesizer"
SINGLES_SHARE = 0.35  # a table release's default share of ε for the one-way tables
SELECT_SHARE = 0.1  # ... and for its private selections
COUNT_SHARE = 0.01  # ... and for the row count that fits the one-way bins to the data
SCARCE = 1000.0  # rows × ε per column below which a release keeps to the spanning tree
SCARCE_SHARE = 0.5  # ... and its share for the one-way tables there


@dataclass(frozen=True)
class ReleasePlan:
    """The budget of each measurement and selection of a table release (module docstring)."""

    epsilon: float
    d: int
    singles_epsilon: float  # each column's one-way table
    select_epsilon: float  # each selection (0.0 when every pair is measured)
    pair_epsilon: float  # each measured pair table
    rounds: int  # selections after the spanning tree
    sensitivity: int = 1
    count_epsilon: float = 0.0  # the row count (0.0: not measured)

    @classmethod
    def make(
        cls,
        d: int,
        epsilon: float,
        singles_share: float,
        select_share: float,
        rounds: int,
        sensitivity: int = 1,
        count_share: float = 0.0,
    ) -> ReleasePlan:
        """Split ``epsilon``: ``count_share`` to the row count (0: none), ``singles_share``
        over the ``d`` one-way tables, ``select_share`` over the selections, the rest over the
        measured pairs; each part nudged down a few ulps where needed so that the exact sum is
        at most ``epsilon``."""
        pairs = d * (d - 1) // 2
        rounds = max(0, min(int(rounds), pairs - (d - 1)))
        measured = d - 1 + rounds
        selections = 0 if measured >= pairs else measured
        if selections == 0:
            select_share = 0.0
        singles = singles_share * epsilon / d
        select = select_share * epsilon / selections if selections else 0.0
        pair = (1.0 - singles_share - select_share - count_share) * epsilon / measured
        parts = [singles] * d + [pair] * measured + ([select] * selections if selections else [])
        count = count_share * epsilon  # fixed first: a release re-plans the rest around it
        fitted = accounting.fit_to_budget(parts, epsilon, spent=count)
        singles = float(fitted[:d].min())
        pair = float(fitted[d : d + measured].min())
        select = float(fitted[d + measured :].min()) if selections else 0.0
        low = EPSILON_RANGE[0]
        checks = [
            ("singles_share", "column", singles, singles_share),
            ("epsilon", "pair", pair, epsilon),
        ]
        if selections:
            checks.append(("select_share", "selection", select, select_share))
        if count_share:
            checks.append(("epsilon", "row count", count, epsilon))
        for name, what, value, given in checks:
            if not value >= low:
                raise ParameterError(
                    f"The {name!r} parameter of {_OWNER} leaves each {what} ε = {value:.3g}, "
                    f"below the smallest budget {low:.3g} (epsilon={epsilon!r}, {d} columns). "
                    f"Got {given!r} instead."
                )
        return cls(float(epsilon), int(d), singles, select, pair, rounds, int(sensitivity), count)

    # ------------------------------------------------------------------ counts
    @property
    def pairs(self) -> int:
        """``P``: every pair of columns."""
        return self.d * (self.d - 1) // 2

    @property
    def measured(self) -> int:
        """Pairs measured: the spanning tree's ``d − 1`` and the rounds'."""
        return self.d - 1 + self.rounds

    @property
    def selections(self) -> int:
        """Private selections (0 when every pair is measured)."""
        return 0 if self.measured >= self.pairs else self.measured

    # ------------------------------------------------------------------ scales
    @property
    def single_scale(self) -> float:
        """Integer Laplace scale of every cell of a one-way table."""
        return accounting.laplace_scale(self.sensitivity, self.singles_epsilon, _OWNER)

    @property
    def pair_scale(self) -> float:
        """Integer Laplace scale of every cell of a measured pair table."""
        return accounting.laplace_scale(self.sensitivity, self.pair_epsilon, _OWNER)

    @property
    def count_scale(self) -> float:
        """Integer Laplace scale of the row count (0.0 when it is not measured)."""
        if not self.count_epsilon:
            return 0.0
        return accounting.laplace_scale(self.sensitivity, self.count_epsilon, _OWNER)

    def total_fraction(self) -> Fraction:
        """``Σ parts / ε`` as an exact rational (at most 1)."""
        total = (
            self.d * Fraction(self.singles_epsilon)
            + self.measured * Fraction(self.pair_epsilon)
            + self.selections * Fraction(self.select_epsilon)
            + Fraction(self.count_epsilon)
        )
        return total / Fraction(self.epsilon)

    def describe(self, fitted: Sequence[str] = ()) -> str:
        """The split in words; ``fitted``: what the release fits to its row count."""
        d, P = self.d, self.pairs
        if self.selections:
            how = (
                f"{d} one-way tables × {self.singles_epsilon:.4g}, {self.selections} private "
                f"choices of a pair × {self.select_epsilon:.4g} (a spanning tree of {d - 1}, "
                f"then {self.rounds} adaptive rounds), {self.measured} of the {P} pair tables "
                f"measured × {self.pair_epsilon:.4g}"
            )
        else:
            how = (
                f"{d} one-way tables × {self.singles_epsilon:.4g} and all {P} pair tables × "
                f"{self.pair_epsilon:.4g}"
            )
        if self.count_epsilon:
            how = (
                f"a row count × {self.count_epsilon:.4g} (the release fits "
                f"{' and '.join(fitted)} to it), {how}"
            )
        return how

    def parts(self) -> dict[str, float]:
        """Budget spent on the row count, the one-way tables, the selections and the pair
        tables, each together."""
        return {
            "count": self.count_epsilon,
            "singles": self.d * self.singles_epsilon,
            "select": self.selections * self.select_epsilon,
            "pairs": self.measured * self.pair_epsilon,
        }


RULE_PARTS = ("singles_share", "rounds")  # the parts a release may choose for its row count


def is_rule(value: object) -> bool:
    """True for a release rule: a list of distinct names from :data:`RULE_PARTS`, in that order.

    >>> is_rule(["singles_share", "rounds"]), is_rule(["rounds", "singles_share"]), is_rule([])
    (True, False, True)
    """
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return False
    return [v for v in RULE_PARTS if v in value] == value


def rule_plan(
    d: int,
    epsilon: float,
    parts: tuple[float, float, int],
    sensitivity: int,
    rule: tuple[str, ...],
    counted: bool,
    n_hat: float | None = None,
) -> ReleasePlan:
    """The plan of a table release from ``parts = (singles_share, select_share, rounds)``,
    with a row count (:data:`COUNT_SHARE`) when the release fits bins to it (``counted``) or
    chooses the parts named in ``rule`` (``"singles_share"``, ``"rounds"``) for it: with the
    noisy count ``n_hat``, those parts by :func:`default_release` (``None``: as given, the plan
    shown before the release). The count's part is the same whatever ``n_hat`` is.

    >>> before = rule_plan(6, 1.0, (0.35, 0.1, 5), 1, ("rounds",), True)
    >>> after = rule_plan(6, 1.0, (0.35, 0.1, 5), 1, ("rounds",), True, n_hat=3_000)
    >>> before.rounds, after.rounds, before.count_epsilon == after.count_epsilon == 0.01
    (5, 0, True)
    """
    singles_share, select_share, rounds = parts
    if n_hat is not None:
        share, chosen = default_release(d, epsilon, max(int(n_hat), 1))
        singles_share = share if "singles_share" in rule else singles_share
        rounds = chosen if "rounds" in rule else rounds
    count = COUNT_SHARE if counted or rule else 0.0
    top = max(singles_share, SCARCE_SHARE) if "singles_share" in rule else singles_share
    if not count + top + select_share < 1:
        raise ParameterError(
            f"The 'singles_share' and 'select_share' parameters of {_OWNER} must leave a "
            f"share for the pair tables{' and the row count' if count else ''}. Got "
            f"{singles_share!r} and {select_share!r} instead."
        )
    return ReleasePlan.make(
        d, epsilon, singles_share, select_share, rounds, sensitivity, count_share=count
    )


def default_release(d: int, epsilon: float, n: int | None) -> tuple[float, int]:
    """``(singles_share, rounds)`` of a table release, a public rule of ``d``, ``ε`` and
    ``expected_n`` through the rows per unit of budget and column, ``u = n·ε/d``:

    * ``u`` below :data:`SCARCE` (1,000): the budget is scarce for every column: half of ε for
      the one-way tables and only the spanning tree's pairs;
    * else :data:`SINGLES_SHARE` and ``(d − 1)·k`` adaptive rounds, ``k`` = 1 below 10⁴, 2
      below 3·10⁴, 3 above (every pair when there are no more);
    * without ``expected_n``: as for ``u`` between 10³ and 10⁴.

    (Chosen on four public tables at ε = 0.1, 1 and 10, ``benchmarks/bench_tables.py``: more
    rounds spread the budget over more pair tables, which pays when each keeps enough rows
    per unit of noise.) A release that draws its row count (:data:`COUNT_SHARE`) applies this
    rule to the noisy count for the parts the user did not give.

    >>> [default_release(12, e, 25_000) for e in (0.1, 1.0, 10.0)]
    [(0.5, 0), (0.35, 11), (0.35, 22)]
    """
    pairs = d * (d - 1) // 2
    if n is None:
        return SINGLES_SHARE, min(d - 1, pairs - (d - 1))
    u = n * epsilon / d
    if u < SCARCE:
        return SCARCE_SHARE, 0
    k = 1 if u < 1e4 else 2 if u < 3e4 else 3
    return SINGLES_SHARE, min(k * (d - 1), pairs - (d - 1))
