"""One-pass marginal synthesizer: every 2-way and 1-way marginal counted in fixed memory,
noised once at the release, then a tree of pairs (Chow–Liu) sampled from the consistent noisy
marginals, on a box or a table.

In one pass over the rows, :class:`MarginalSynthesizer` keeps the exact counts of

* every **pair** of columns ``(i, j)``, ``i < j``, on a grid of the two columns' **coarse**
  bins (Morton order: level 1 halves column ``i``);
* every **single** column on its **fine** bins (each inside one coarse bin).

**Bins, per column** (:mod:`~sketchsyn.synth.marginal.layout`). On a
:class:`~sketchsyn.domains.Box`: ``2**bits`` coarse and ``2**fine_bits`` fine equal cells of
the column's interval. On a :class:`~sketchsyn.domains.Schema`, bins are ranges of the column's
code (:mod:`sketchsyn.domains.columns`):

* categorical, integer and boolean columns of at most ``exact_bits`` code bits (default 8: up
  to 256 categories or values): **one bin per category or value**, coarse = fine, so a pair
  table is the exact cross-tabulation of the two columns;
* a categorical of more code bits: the first ``exact_bits`` bits of its code as coarse bins
  (neighbouring categories of its list grouped), and one fine bin per category;
* numeric and datetime columns, IPv4 addresses and integers of more than ``exact_bits`` bits:
  the first ``bits`` bits of the code as coarse bins and ``fine_bits`` as fine bins (equal
  ranges of the value, never more bits than the code has).

A bin whose codes name no value (a categorical's codes past its last category, an integer's
past ``high``) gets no mass, and sampling draws only the codes of a bin that name a value:
never a category outside the schema, an integer outside its range or a non-integer in an
integer column.

**Noise** (:mod:`~sketchsyn.synth.marginal.noise`). At ``release()`` each of these ``P + d``
tables (``P = d(d − 1)/2``) is noised once, with its own budget ``ε_t``:

* on a Box, as one PMM tree (He's dissertation, Algorithms 3–4): every cell of every level of
  the dyadic tree above the grid gets integer Laplace noise with PMM's per-level scales, is
  clamped at zero and made consistent top down (comparable integer transform);
* on a Schema, as a flat histogram: every cell gets integer Laplace noise of scale ``1/ε_t``,
  is clamped at zero and set to zero below 4 noise scales or where it names no value (on a
  table's 2-way marginals this is about 4 times closer to the exact tables than a PMM tree;
  see the noise module).

The tables then go to :class:`~sketchsyn.synth.marginal.model.MarginalDistribution`, whose
fitting (shared columns made to agree, a maximum spanning tree on the mutual information of
the noisy pairs) and sampling (along the tree, then on a Schema refined toward every released
pair table) are post-processing.

**Budget, for an auditor.** Neighbours: one row added or removed. A row falls in exactly one
cell of each level of each of the ``P + d`` tables. Table ``t`` spends ``ε_t``: its level
scales ``s_l`` satisfy ``Σ_l 1/s_l ≤ ε_t`` (a PMM tree: :func:`sketchsyn.privacy.accounting.
pmm_scales`; a flat histogram: one level, ``1/s ≤ ε_t``), so the row changes the noisy counts
of table ``t`` by a privacy loss of at most ``ε_t``. The tables use independent noise, so by
sequential composition the release is ``Σ_t ε_t``-DP, and the split is
``ε_pair = (1 − singles_share)·ε/P`` for each pair and ``ε_single = singles_share·ε/d`` for
each column, nudged down by a few ulps where needed so that the exact rational sum is ``≤ ε``
(:func:`~sketchsyn.privacy.accounting.fit_to_budget`). Everything after the noise (clamping,
consistency, thresholds, cells without a value emptied, fitting the marginals to each other,
choosing the tree of pairs from the noisy tables, sampling) reads only the noisy counts and
public parameters: post-processing. The pair selection spends no budget: it is computed from
the released noisy pair tables.

**Memory, up front.** The state is ``8·(Σ_{i<j} 2**(c_i + c_j) + Σ_j 2**f_j) + 64`` bytes
(:attr:`nbytes`; ``c_j``, ``f_j`` the coarse and fine bits of column ``j``; on a Box
``8·(P·4**bits + d·2**fine_bits) + 64``), fixed at construction; ``memory_bytes`` (default
1 MiB) bounds it and chooses ``bits`` and ``fine_bits`` (see :func:`plan`).

>>> import numpy as np
>>> from sketchsyn import Box
>>> rng = np.random.default_rng(0)
>>> t = rng.random(20000)
>>> X = np.column_stack([t, t**2, rng.random(20000)])
>>> syn = MarginalSynthesizer(Box.unit(3), epsilon=1.0, memory_bytes=64_000, rng=1)
>>> syn.nbytes <= 64_000
True
>>> syn.update_many(X)
>>> Y = syn.sample(1000, rng=2)
>>> Y.shape, syn.release().tree[0]
((1000, 3), (0, 1))

On a table (a pandas DataFrame here; polars, pyarrow, dicts of columns and rows work too):

>>> import pandas as pd
>>> from sketchsyn import Schema
>>> schema = Schema.from_dict({"columns": [
...     {"name": "carrier", "kind": "categorical", "categories": ["9E", "AA", "AS"]},
...     {"name": "month", "kind": "integer", "low": 1, "high": 12},
...     {"name": "delay", "kind": "numeric", "low": -120, "high": 1440}]})
>>> df = pd.DataFrame({"carrier": rng.choice(["9E", "AA"], 5000),
...                    "month": rng.integers(1, 13, 5000),
...                    "delay": rng.uniform(-60, 300, 5000)})
>>> syn = MarginalSynthesizer(schema, 1.0, memory_bytes=100_000, expected_n=5000, rng=3)
>>> syn.column_bits  # (pair-table, one-way) bits: carrier and month exact, delay fitted to n, ε
[(2, 2), (4, 4), (6, 7)]
>>> syn.update_many(df)
>>> out = syn.sample(1000, rng=4)
>>> out.dtypes.astype(str).tolist(), bool(out["month"].between(1, 12).all())
(['category', 'int64', 'float64'], True)
>>> bool(out["carrier"].isin(["9E", "AA", "AS"]).all())
True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...attributes import ReadOnly
from ...domains import Box, Schema
from ...domains.columns import Adjusted
from ...errors import (
    EPSILON_RANGE,
    InputError,
    ParameterError,
    check_choice,
    check_epsilon,
    check_int,
)
from ...io.serial import Arrays, MetaReader
from ...io.stream import one_row
from ...privacy import accounting
from ...privacy.rng import RNGLike, as_source
from ...privacy.selection import selection_scale
from ...units.bounder import ContributionBounder
from ...units.level import UnitLevel
from ..offline.histogram import LevelCounts
from . import layout, loading
from .budget import SELECT_SHARE, ReleasePlan, default_release, rule_plan
from .checks import (
    check_column_bits,
    check_given_bits,
    check_room,
    check_share,
    check_size,
    exact_sum,
)
from .layout import ColumnBins, Layout, column_bits, pair_grid, pair_spread, table_cells
from .model import MarginalDistribution
from .noise import exact_levels, noisy_levels, released_counts, table_scales
from .planner import (
    DEFAULT_MEMORY,
    layout_bytes,
    mergeable_columns,
    plan,
    plan_table,
    state_bytes,
)
from .select import measure
from .selected import SelectedTables

__all__ = ["DEFAULT_MEMORY", "MarginalDistribution", "MarginalSynthesizer", "plan", "state_bytes"]

_UNIT_SHARE = 2  # a privacy unit's bounder takes at most 1/2 of memory_bytes
_OWNER = "MarginalSynthesizer"


class MarginalSynthesizer(LevelCounts, ColumnBins, UnitLevel):
    """One-pass private synthesizer from every 1- and 2-way marginal of a box or a table.

    Saved state: **trusted** (``STATE_PRIVACY = "trusted"``): the exact counts of every pair and
    single-column grid until ``release()`` draws the noise; keep the bytes with the data holder.
    Once released, the bytes also hold the release (public), and the release alone
    (:class:`~sketchsyn.synth.marginal.model.MarginalDistribution`) is private.

    Parameters
    ----------
    domain : Box or Schema
        Public bounds (a Box) or description (a Schema) of the ``2 ≤ d ≤ 64`` columns.
    epsilon : float
        Total budget: pure ε-DP, one row added or removed (split: see the module docstring).
    memory_bytes : int, optional
        Bound on the state (default 1 MiB); chooses ``bits`` and ``fine_bits`` (:func:`plan`)
        unless they are given, in which case the state must fit in it when it is given.
    expected_n : int, optional
        Public guess of the number of rows, used only to choose ``bits`` and ``fine_bits``.
    bits, fine_bits : int, optional
        Bits of the coarse bins (pair grids, 1…12) and fine bins (single-column grids,
        bits…24) of a continuous column (every column of a Box).
    exact_bits : int, optional
        On a Schema: a categorical, integer or boolean column of at most this many code bits
        keeps its exact values as bins (default 8, at most 12); a wider categorical has
        ``2**exact_bits`` coarse bins.
    singles_share : float
        Share of ε spent on the ``d`` single-column tables (default 0.25), in ``(0, 1)``.
    consistency : {"uniform", "proportional"}
        PMM's comparable integer transform (a Box's trees; a Schema's flat histograms need none:
        only the default is accepted there).
    rng : None, int, SeedSequence, Generator or RandomSource, optional
        Noise randomness (``None``: OS CSPRNG; a seed is for tests only, not private); the
        bounder's key comes from a stream of its own.
    unit : str, optional
        The privacy unit's column (``"client"``): a column of the frames given to
        :meth:`update_many` (or ids beside an array, ``units=``), neither in the schema nor
        synthesized. With it the guarantee is **user level**: all rows of one unit, at most
        ``max_rows`` kept (:class:`~sketchsyn.units.ContributionBounder`, first rows first), and
        every noise scale and every selection's score sensitivity is multiplied by
        ``2·max_rows`` (:attr:`sensitivity`).
    max_rows : int, optional
        ``L``, the public cap on the rows kept of each unit (with ``unit``).
    expected_units : int, optional
        Public guess of the number of units: sizes the bounder's table (at most half of
        ``memory_bytes``; units are pre-sampled by keyed hash when they do not fit), and caps
        the rows the bins are planned for at ``expected_units · max_rows``.
    bounder : ContributionBounder, optional
        A fresh bounder to use instead (its parameters chosen by hand).

    Examples
    --------
    >>> import numpy as np
    >>> from sketchsyn import Box
    >>> syn = MarginalSynthesizer(Box.unit(2), epsilon=1.0, bits=4, fine_bits=6, rng=0)
    >>> syn.update_many(np.random.default_rng(1).random((500, 2)))
    >>> round(syn.epsilon_parts["pairs"] + syn.epsilon_parts["singles"], 12)
    1.0
    """

    STATE_PRIVACY = "trusted"
    FORMAT_VERSION = 3  # 3: a table's release rule; 2: its per-column bits and release plan
    READS = (1, 2, 3)
    STATE_DECLARED = True  # first written with container 3: every blob says its state
    TAKES_RNG = True
    TAKES_UNIT = True

    def __init__(
        self,
        domain: Any,
        epsilon: float,
        memory_bytes: int | None = None,
        expected_n: int | None = None,
        *,
        bits: int | None = None,
        fine_bits: int | None = None,
        exact_bits: int | None = None,
        singles_share: float | None = None,
        consistency: str = "uniform",
        select_share: float | None = None,
        rounds: int | None = None,
        column_bits: Any = None,
        rng: RNGLike = None,
        unit: str | None = None,
        max_rows: int | None = None,
        expected_units: int | None = None,
        bounder: ContributionBounder | None = None,
    ) -> None:
        owner = _OWNER
        self._epsilon = check_epsilon(epsilon, owner)
        if not isinstance(domain, (Box, Schema)) or not 2 <= domain.d <= layout.MAX_COLUMNS:
            raise ParameterError(
                f"The 'domain' parameter of {owner} must be a Box or a Schema of 2 to "
                f"{layout.MAX_COLUMNS} columns. Got {domain!r} instead."
            )
        table = isinstance(domain, Schema)
        if exact_bits is not None and not table:
            raise ParameterError(
                f"The 'exact_bits' parameter of {owner} is for a Schema (a Box has no discrete "
                f"columns). Got {exact_bits!r} instead."
            )
        exact = layout.EXACT_BITS if exact_bits is None else exact_bits
        exact = check_int(exact, "exact_bits", owner, minimum=1, maximum=layout.MAX_EXACT_BITS)
        self._consistency = check_choice(
            consistency, "consistency", owner, ("uniform", "proportional")
        )
        if table and self._consistency != "uniform":
            raise ParameterError(
                f"The 'consistency' parameter of {owner} is for a Box's PMM trees; a Schema's "
                f"tables are flat histograms. Got {consistency!r} instead."
            )
        memory = None
        if memory_bytes is not None:
            memory = check_int(memory_bytes, "memory_bytes", owner, minimum=1)
        n = None if expected_n is None else check_int(expected_n, "expected_n", owner, minimum=1)
        self._domain = domain
        source = as_source(rng)
        total = memory or DEFAULT_MEMORY
        self._take_unit(
            owner, unit, max_rows, expected_units, bounder, total // _UNIT_SHARE, source
        )
        # The L1 bound on how much one table's counts can change between neighbours: 1 at the
        # event level, 2L with a privacy unit. Every noise draw and score is scaled by it.
        self._sensitivity = self.sensitivity
        tables = total - self._unit_bytes()  # the bytes left for the exact tables
        if memory is not None and self._unit is not None:
            memory = tables
        if n is not None and expected_units is not None and self._max_rows is not None:
            n = min(n, expected_units * self._max_rows)  # rows a bounder can pass on
        self._adjusted: dict[str, int] = {}
        if table:
            self._init_table(
                memory,
                tables,
                n,
                (bits, fine_bits, exact_bits, column_bits),
                (singles_share, select_share, rounds),
            )
        else:
            for name, value in (
                ("select_share", select_share),
                ("rounds", rounds),
                ("column_bits", column_bits),
            ):
                if value is not None:
                    raise ParameterError(
                        f"The {name!r} parameter of {owner} is for a Schema (a Box's release "
                        f"measures every pair). Got {value!r} instead."
                    )
            self._init_box(
                memory,
                tables,
                n,
                bits,
                fine_bits,
                0.25 if singles_share is None else singles_share,
            )
        check_size(self._layout.cells)
        self._pairs = self._layout.pairs
        self._start(self._layout.cells, source)

    def _init_box(
        self,
        memory: int | None,
        tables: int,
        n: int | None,
        bits: Any,
        fine_bits: Any,
        singles_share: Any,
    ) -> None:
        """Bins and the split over all pairs of a Box (PMM trees); ``tables``: the bytes the
        planner may give the tables."""
        owner, d = _OWNER, self._domain.d
        share = check_share(singles_share, "singles_share", open_low=True)
        if bits is None and fine_bits is None:
            bits, fine_bits, why = plan(d, self._epsilon / self._sensitivity, tables, n, share)
        else:
            bits, fine_bits, why = check_given_bits(bits, fine_bits)
            need = layout_bytes(d, bits, fine_bits)
            if memory is not None and need > memory:
                raise ParameterError(
                    f"The 'memory_bytes' parameter of {owner} must be at least "
                    f"{need + self._unit_bytes():,} for bits={bits}, fine_bits={fine_bits} and "
                    f"{d} columns{' and the bounder' if self._unit else ''}. Got "
                    f"{memory + self._unit_bytes()!r} instead."
                )
        self._bits, self._fine_bits, self._why = int(bits), int(fine_bits), why
        self._exact_bits = None
        self._layout = lay = Layout(self._domain, self._bits, self._fine_bits)
        self._share = share
        P = len(lay.pairs)
        parts = accounting.fit_to_budget(
            [(1 - share) * self._epsilon / P] * P + [share * self._epsilon / d] * d,
            self._epsilon,
        )
        self._pair_eps = float(parts[:P].min())
        self._single_eps = float(parts[P:].min())
        low = EPSILON_RANGE[0]
        for what, value in (("pair", self._pair_eps), ("column", self._single_eps)):
            if not value >= low:  # a share so small or large that one table gets nothing
                raise ParameterError(
                    f"The 'singles_share' parameter of {owner} leaves each {what} table "
                    f"ε = {value:.3g}, below the smallest budget {low:.3g} (epsilon="
                    f"{self._epsilon!r}, {d} columns). Got {singles_share!r} instead."
                )
        self._scales = table_scales(
            lay, self._pair_eps, self._single_eps, sensitivity=self._sensitivity
        )
        self._plan = None

    def _init_table(
        self, memory: int | None, tables: int, n: int | None, bins: tuple, shares: tuple
    ) -> None:
        """The release plan and each column's bins on a Schema (``tables``: the bytes the
        planner may give the tables)."""
        owner, schema = _OWNER, self._domain
        d = schema.d
        bits, fine_bits, exact_bits, given = bins
        singles_share, select_share, rounds = shares
        rule_share, rule_rounds = default_release(d, self._epsilon, n)
        s1 = check_share(
            rule_share if singles_share is None else singles_share,
            "singles_share",
            open_low=True,
        )
        s2 = check_share(
            SELECT_SHARE if select_share is None else select_share, "select_share", open_low=False
        )
        P = d * (d - 1) // 2
        # The parts the release chooses for its noisy row count: those not given (rounds only
        # where there can be some: a spanning tree of every pair leaves none).
        rule = ("singles_share",) if singles_share is None else ()
        rule += ("rounds",) if rounds is None and P > d - 1 else ()
        if rounds is None:
            rounds = rule_rounds
        rounds = check_int(rounds, "rounds", owner, minimum=0, maximum=P - (d - 1))
        self._share, self._select_share, self._rounds = s1, s2, rounds
        self._set_rule(rule)
        if given is not None:
            if bits is not None or fine_bits is not None or exact_bits is not None:
                raise ParameterError(
                    f"{owner} takes 'column_bits' or 'bits'/'fine_bits'/'exact_bits', not both."
                )
            coarse, fine = check_column_bits(given, schema)
            why = "column_bits as given"
        elif bits is not None or fine_bits is not None:
            bits, fine_bits, why = check_given_bits(bits, fine_bits)
            exact = layout.EXACT_BITS if exact_bits is None else exact_bits
            coarse, fine = column_bits(schema, bits, fine_bits, exact)
        else:
            coarse, fine, why = plan_table(
                schema,
                tables,
                n,
                self._plan.single_scale,
                self._plan.pair_scale,
                exact_bits,
            )
        need = 8 * table_cells(coarse, fine) + layout.OVERHEAD
        if memory is not None and need > memory:
            raise ParameterError(
                f"The 'memory_bytes' parameter of {owner} must be at least "
                f"{need + self._unit_bytes():,} for these bins ({why})"
                f"{' and the bounder' if self._unit else ''}. Got "
                f"{memory + self._unit_bytes()!r} instead."
            )
        self._layout = Layout(schema, columns=(coarse, fine))
        self._bits, self._fine_bits = max(coarse), max(fine)
        self._exact_bits = exact_bits
        self._why = why
        self._pair_eps, self._single_eps = self._plan.pair_epsilon, self._plan.singles_epsilon

    def _set_rule(self, rule: tuple[str, ...]) -> None:
        """The plan of a table's release for ``expected_n``, with ``rule`` naming the parts the
        release chooses for its noisy row count (:func:`rule_plan`)."""
        self._rule = rule
        self._mergeable = mergeable_columns(self._domain)
        self._plan = self._release_plan(None)

    def _release_plan(self, n_hat: float | None) -> ReleasePlan:
        """The plan for a noisy row count ``n_hat`` (``None``: before it is drawn)."""
        parts = (self._share, self._select_share, self._rounds)
        counted = any(self._mergeable)
        return rule_plan(self._domain.d, self._epsilon, parts, self._sensitivity, self._rule,
                         counted, n_hat)  # fmt: skip

    # ---------------------------------------------------------------- parameters
    epsilon = ReadOnly[float](
        "Total privacy budget ε (split over the marginals: ``epsilon_parts``)."
    )

    @property
    def pairs(self) -> list[tuple[int, int]]:
        """The column pairs, in the order of the state."""
        return list(self._pairs)

    @property
    def adjusted(self) -> dict[str, int]:
        """A copy of what the columns' policies did on a table, by ``"<column>:<action>"``
        (``clipped``, ``other``, ``dropped``; exact, not private)."""
        return dict(self._adjusted)

    @property
    def epsilon_parts(self) -> dict[str, float]:
        """Budget spent on the row count (``"count"``, 0 on a Box), the one-way tables
        (``"singles"``), the private choices of pairs (``"select"``, 0 on a Box: it measures
        every pair) and the pair tables (``"pairs"``): :attr:`plan`'s parts on a Schema."""
        plan = self.plan
        if plan is not None:
            return plan.parts()
        P, d = len(self._pairs), self._domain.d
        return {
            "count": 0.0,
            "singles": d * self._single_eps,
            "select": 0.0,
            "pairs": P * self._pair_eps,
        }

    @property
    def plan(self) -> ReleasePlan | None:
        """On a Schema: the release's budget for its row count, each one-way table, selection
        and measured pair (:class:`~sketchsyn.synth.marginal.budget.ReleasePlan`); ``None`` on
        a Box. Before the release, the plan for ``expected_n``; a release whose rule chooses
        ``singles_share`` or ``rounds`` for its noisy row count may change those two, and
        once released this is the plan it measured."""
        if self._plan is not None:
            stored = self._stored()
            if stored is not None and stored[0]._selected is not None:
                return stored[0]._selected.plan
        return self._plan

    @property
    def noise_scales(self) -> dict[str, Any]:
        """Integer Laplace scale of each level of a pair tree and of a single-column tree on a
        Box; on a Schema the scale of every cell of a one-way table (``"single"``) and of a
        measured pair table (``"pair"``), and the geometric scale of a selection's noise
        (``"select"``, 0 when every pair is measured) and of the row count (``"count"``, 0
        when it is not measured)."""
        P = len(self._pairs)
        if self._plan is None:
            return {"pair": self._scales[0].copy(), "single": self._scales[P].copy()}
        plan = self.plan
        select = 0.0
        if plan.selections:
            select = selection_scale(plan.select_epsilon, plan.sensitivity)
        return {
            "single": plan.single_scale,
            "pair": plan.pair_scale,
            "select": select,
            "count": plan.count_scale,
        }

    @property
    def nbytes(self) -> int:
        """State size in bytes: the exact tables (``8`` bytes a cell plus 64) and, with a
        privacy unit, the contribution bounder's table; fixed at construction."""
        return int(self._counts.nbytes) + 64 + self._unit_bytes()

    def explain(self) -> str:
        """What was chosen and why: bins, state bytes, the budget split and the privacy unit."""
        P, d = len(self._pairs), self._domain.d
        if self._plan is None:
            return (
                f"MarginalSynthesizer: d={d} columns, {P} pairs; {self._why}; state "
                f"{self.nbytes:,} bytes; ε={self._epsilon:g} split as {P} pair trees × "
                f"{self._pair_eps:.4g} + {d} column trees × {self._single_eps:.4g} "
                f"(singles_share={self._share:g}); {self._privacy_unit()}"
            )
        plan = self.plan
        bins = ", ".join(
            f"{name} {2**c}/{2**f}"
            for name, (c, f) in zip(self._domain.names, self.column_bits, strict=True)
        )
        fits = ["ordered columns' one-way bins"] if any(self._mergeable) else []
        how = plan.describe(fits + list(self._rule))
        return (
            f"MarginalSynthesizer: d={d} columns; bins (pair-table/one-way) {bins} ({self._why}); "
            f"state {self.nbytes:,} bytes; ε={self._epsilon:g} split as {how}; "
            f"{self._privacy_unit()}"
        )

    def _privacy_unit(self) -> str:
        """The neighbouring relation the budget protects, and the bounder when there is one."""
        text = f"privacy: {self.privacy_unit}"
        return text if self._bounder is None else f"{text}; bounder: {self._bounder.describe()}"

    def _params(self) -> dict[str, Any]:
        if self._plan is None:
            params = {
                "domain": self._domain.to_dict(),
                "epsilon": self._epsilon,
                "bits": self._bits,
                "fine_bits": self._fine_bits,
                "singles_share": self._share,
                "consistency": self._consistency,
            }
        else:
            params = {
                "domain": self._domain.to_dict(),
                "epsilon": self._epsilon,
                "column_bits": [list(cf) for cf in self.column_bits],
                "singles_share": self._share,
                "select_share": self._select_share,
                "rounds": self._rounds,
            }
            params["rule"] = list(self._rule)
        return params | self._unit_params()

    @classmethod
    def _from_params(cls, fields: MetaReader, rng: RNGLike) -> MarginalSynthesizer:
        return loading.from_params(cls, fields, rng)

    # ---------------------------------------------------------------- updates
    def update(self, x: Any, unit: Any = None) -> None:
        """Add one row (on a Schema: a dict of the row's values, or its ``d`` values). With a
        privacy unit, a dict row holds the unit's key, or ``unit`` is the row's unit id."""
        row = one_row(x, self._domain.d, "update")
        self.update_many(row, units=None if unit is None else [unit])

    def _fine_codes(self, X: Any) -> tuple[list[np.ndarray], int, Adjusted]:
        """Each column's fine bin of every row of ``X`` (checked whole), the rows a ``"drop"``
        policy dropped and what the columns' policies changed."""
        lay = self._layout
        adjusted = Adjusted()
        if isinstance(self._domain, Box):
            box = self._domain
            work, dropped = box._offsets(box._points(X))
            d, n = work.shape
            fb = self._fine_bits
            fine = np.empty((d, n), dtype=np.uint64)
            for i in range(d):
                t = work[i] / box._span[i] * 2.0**fb
                np.minimum(t, 2.0**fb - 1.0, out=t)
                np.maximum(t, 0.0, out=t)
                fine[i] = t.astype(np.uint64)
            return list(fine), int(dropped), adjusted
        units = self._domain.units(X, adjusted)
        dropped = sum(v for k, v in adjusted.items() if k.endswith(":dropped"))
        codes = []
        for j, col in enumerate(self._domain._cols):
            codes.append(col.codes(units[:, j]) >> np.uint64(col.bits - lay.fine[j]))
        return codes, int(dropped), adjusted

    def update_many(self, X: Any, units: Any = None) -> None:
        """Add a batch of rows (checked whole before the counts change; on a Schema, a table
        of any library read by :meth:`~sketchsyn.domains.Schema.units`, errors naming the row
        and the column). With a privacy unit, its ids are the unit's column of a frame, or
        ``units`` (one a row) beside an array; the contribution bounder passes on at most
        ``max_rows`` rows of each unit, the first ones."""
        self._check_open()
        with self._usage.enter(type(self).__name__):
            lay = self._layout
            X, keys = self._unit_split(X, units, type(self).__name__)
            fine, dropped, adjusted = self._fine_codes(X)
            n = fine[0].shape[0]
            check_room(self._rows(), n)
            if keys is not None:  # the last step that changes nothing: all is checked now
                kept = self._domain.kept(X) if dropped else None
                if (keys.size if kept is None else int(kept.sum())) != n or (
                    kept is not None and kept.size != keys.size
                ):
                    raise InputError(f"units has {keys.size} ids for the rows of X")
                keep = self._unit_admit(keys, kept)
                fine = [f[keep] for f in fine]
            add_single = [
                np.bincount(fine[j].astype(np.intp), minlength=lay.single_sizes[j])
                for j in range(lay.d)
            ]
            coarse = [fine[j] >> np.uint64(lay.fine[j] - lay.coarse[j]) for j in range(lay.d)]
            add_pair = []
            for k, (i, j) in enumerate(self._pairs):
                to_i, to_j = pair_spread(lay.coarse[i], lay.coarse[j])
                cells = to_i[coarse[i].astype(np.intp)] | to_j[coarse[j].astype(np.intp)]
                add_pair.append(np.bincount(cells.astype(np.intp), minlength=lay.pair_sizes[k]))
            self._counts[: lay.pair_cells] += np.concatenate(add_pair).astype(np.int64)
            self._counts[lay.pair_cells :] += np.concatenate(add_single).astype(np.int64)
            self._n_seen += fine[0].shape[0]
            self._n_dropped += dropped
            for key, value in adjusted.items():
                self._adjusted[key] = self._adjusted.get(key, 0) + value

    def consume(self, iterable: Any, batch_size: int = 65536) -> int:
        """Stream any iterable of rows in bounded memory (event level only: with a privacy
        unit, feed :meth:`update_many` frames holding the unit's column, or ``units=``)."""
        if self._unit is not None:
            raise ParameterError(
                f"consume() reads rows without their privacy unit ({self._unit!r}): feed "
                "update_many(frame) with the unit's column, or update_many(X, units=ids)"
            )
        return super().consume(iterable, batch_size)

    def _rows(self) -> int:
        """Rows counted so far: the exact total of the smallest table (every table holds
        every row)."""
        lay = self._layout
        j = int(np.argmin(lay.single_sizes))
        return exact_sum(self._single_tables()[j])

    def merge(self, other: Any) -> None:
        """Add the exact counts of another synthesizer with the same parameters (before its
        release), as :meth:`sketchsyn.synth.offline.histogram.LevelCounts.merge` does; refused
        when the two hold more than ``2**52`` rows together.

        With a privacy unit, every unit's rows must have gone to one of the two (data
        partitioned by unit: :func:`sketchsyn.spark.fit` and :func:`sketchsyn.dask.fit` with
        ``unit=`` do it); the merged summary keeps the ``2L`` bound, has no bounder and takes no
        more rows."""
        if isinstance(other, MarginalSynthesizer) and other is not self:
            check_room(self._rows(), other._rows(), merging=True)
        super().merge(other)
        for key, value in other._adjusted.items():
            self._adjusted[key] = self._adjusted.get(key, 0) + value
        # Each operand bounded its own units (all of a unit's rows reach one of them): the sum
        # keeps the bound, but this bounder knows only its units, so no more rows are taken.
        self._bounder = None

    # ---------------------------------------------------------------- release
    def _pair_tables(self) -> list[np.ndarray]:
        return self._layout.pair_tables(self._counts[: self._layout.pair_cells])

    def _single_tables(self) -> list[np.ndarray]:
        return self._layout.single_tables(self._counts[self._layout.pair_cells :])

    def _exact_levels(self) -> list[list[np.ndarray]]:
        """Exact counts of every level of every table's noise (pairs first, then single
        columns; :func:`~sketchsyn.synth.marginal.noise.exact_levels`)."""
        return exact_levels(self._layout, self._pair_tables() + self._single_tables())

    def _tree_scales(self) -> list[np.ndarray]:
        return list(self._scales)

    def _noisy_levels(self, source: Any) -> list[list[np.ndarray]]:
        """Exact level counts plus integer Laplace noise of each level's scale (not clamped):
        everything the release reads about the data."""
        return noisy_levels(self._exact_levels(), self._scales, source)

    def _release_now(self) -> tuple[MarginalDistribution, dict[str, np.ndarray]]:
        """Draw the noise once and post-process it into the private release (on a Schema:
        measure what the plan chooses, :func:`~sketchsyn.synth.marginal.select.measure`)."""
        if self._plan is None:
            return self._release_from(self._noisy_levels(self._source)), {}
        lay = self._layout
        pairs = {
            p: t[pair_grid(lay.coarse[p[0]], lay.coarse[p[1]])]
            for p, t in zip(lay.pairs, self._pair_tables(), strict=True)
        }
        measurements = measure(
            lay,
            pairs,
            self._single_tables(),
            self._plan,
            self._source,
            self._mergeable,
            self._release_plan if self._rule else None,
        )
        selected = SelectedTables(measurements.layout, measurements.plan, measurements)
        return (
            MarginalDistribution.from_selected(
                self._domain, self._epsilon, selected, self._release_params()
            ),
            {},
        )

    def _release_from(self, noisy: list[list[np.ndarray]]) -> MarginalDistribution:
        """The release of these noisy levels (post-processing only)."""
        leaves = released_counts(self._layout, noisy, self._scales, self._consistency)
        P = len(self._pairs)
        if isinstance(self._domain, Box):  # (P, 4**bits) and (d, 2**fine_bits)
            pairs, singles = np.asarray(leaves[:P]), np.asarray(leaves[P:])
            sizes: dict[str, Any] = {}
        else:  # one flat array each, the tables one after another
            pairs, singles = np.concatenate(leaves[:P]), np.concatenate(leaves[P:])
            sizes = {"bits": self._bits, "fine_bits": self._fine_bits}
            sizes["exact_bits"] = self._exact_bits
        return MarginalDistribution(
            self._domain,
            self._epsilon,
            pairs.astype(np.int64, copy=False),
            singles.astype(np.int64, copy=False),
            self._pair_eps,
            self._single_eps,
            params=self._release_params(),
            **sizes,
        )

    def sample(self, m: int, rng: RNGLike = None, **options: Any) -> Any:
        """``m`` synthetic rows from the release (releases first if needed); ``options``
        (``as_frame``, ``refine``) as in :meth:`MarginalDistribution.sample`."""
        return self.release().sample(m, rng=rng, **options)

    def count(self, lower: Any = None, upper: Any = None, *, where: Any = None) -> float:
        """Noisy count of rows in ``[lower, upper]`` or satisfying ``where`` (on a Schema),
        from the release (releases first)."""
        return self.release().count(lower, upper, where=where)

    # ---------------------------------------------------------------- bytes
    def _state(
        self, include_diagnostics: bool = False, include_bounder: bool = True
    ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The bytes' header and arrays; with a privacy unit, the header states it
        (``privacy``) and the bounder's bytes are an array (``include_bounder=False`` leaves
        them out: the copy then takes no more rows)."""
        meta, arrays = super()._state(include_diagnostics)
        if include_diagnostics and self._adjusted:
            meta["diagnostics"]["adjusted"] = dict(self._adjusted)
        unit_meta, unit_arrays = self._unit_state(include_bounder)
        return meta | unit_meta, arrays | unit_arrays

    @classmethod
    def _from_state(
        cls, fields: MetaReader, arrays: Arrays, version: int, blob: bytes, rng: Any
    ) -> MarginalSynthesizer:
        """Every field is checked, the counts' dtype and shape are validated against the domain
        and the bits before anything is built, and every count must lie in ``[0, 2**52]`` with
        each table summing to at most ``2**52``; ``rng`` seeds the noise of a later release
        (:func:`~sketchsyn.synth.marginal.loading.from_state`)."""
        return loading.from_state(cls, fields, arrays, rng, version)

    def __repr__(self) -> str:
        unit = "" if self._unit is None else f", unit={self._unit!r}, max_rows={self._max_rows}"
        return (
            f"MarginalSynthesizer(d={self._domain.d}, epsilon={self._epsilon!r}, "
            f"bits={self._bits}, fine_bits={self._fine_bits}{unit}, nbytes={self.nbytes})"
        )
