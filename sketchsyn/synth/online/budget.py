"""The online synthesizer's per-cell budgets that spend the whole ``ε/2`` of a record's path.

He, Vershynin and Zhu ("Online Differentially Private Synthetic Data Generation") give the cell of
level ``j`` the budget ``ε_{j,r}`` while the stream is in time level ``r`` (global steps
``[t_r, t_{r+1})``, ``t_r = ceil(2^r/ε)``). A record at a step of time level ``r`` is counted by
one cell per level and costs that cell ``ε_{j,r}`` (their Lemma 3.3); the mechanism is ε-DP for
replace-one neighbours when every record's path costs at most ``ε/2`` (a replaced record changes
two paths). Their budgets leave part of that ``ε/2`` unspent:

* ``d = 1``, (5.1): ``ε_j = 3ε/(π²(j+1)²)``, whose sum over ``j ≥ 1`` is ``ε(1/2 − 3/π²)``,
  about ``0.196·ε``: 39% of ``ε/2``. The proof intends ``Σ_{j≥1} 3ε/(π² j²) = ε/2``; the index
  is off by one.
* ``d ≥ 2``, (4.1): ``ε_{j,r} = C1·ε·2^{(j−r)(1−1/d)/2}`` with ``C1 = (1 − 2^{−(1−1/d)/2})/2``,
  whose sum over the ``r`` levels of a path is ``(ε/2)(1 − 2^{−r(1−1/d)/2})``: short of ``ε/2``
  by a factor that matters at small ``r`` (at ``r = 4``, ``d = 2``: half the budget is unspent)
  and at every ``r`` when the domain has fewer than ``r`` levels.

:func:`full_budgets` (the synthesizer's default, ``budgets="full"``) keeps the papers' shapes and
spends the whole ``ε/2``. With ``H`` the deepest level of the partition (the domain's, at most 60)
and ``m = min(r, H)`` the levels that exist in time level ``r``:

* ``d = 1``: ``ε_j = (ε/2) / (S_H · j²)``, ``S_H = Σ_{i=1}^{H} 1/i²`` (for ``H → ∞``:
  ``3ε/(π² j²)``, the sum the proof intends); the same at every time level.
* ``d ≥ 2``: ``ε_{j,r} = (ε/2) · 2^{(j−m)e} / Σ_{k=0}^{m−1} 2^{−ke}``, ``e = (1 − 1/d)/2``
  (the paper's ``2^{(j−r)e}`` shape, normalised over the ``m`` levels of the path).

**Claim.** For every step ``t`` the budgets charged to the record of step ``t`` along its path sum
to at most ``ε/2``, exactly (the floating-point values the counters use, read as rationals).

*Proof.* ``d = 1``: every level ``j = 1 … H`` eventually counts the record (a new level replays
the history), at the budget ``ε_j`` whatever the time level, so the path costs
``Σ_{j=1}^{H} ε_j``. The rationals ``(ε/2)/(S_H j²)`` sum to ``(ε/2)·S_H/S_H = ε/2`` exactly,
and each float used is the largest float not above its rational (rounded down), so the floats sum
to at most ``ε/2``. ``d ≥ 2``: a record of time level ``r`` is counted only by the levels
``1 … m`` that have started (a level starts at ``t_j`` and ignores earlier records, so later
levels never see it), at ``ε_{j,r}``; the real numbers ``2^{(j−m)e}/Σ_{k<m} 2^{−ke}`` over
``j = 1 … m`` sum to 1. The floats are computed, summed as exact rationals, and scaled down by
``1 − 2^{−40}`` until that exact sum is at most ``ε/2`` (one step suffices in practice); each
value is also at most ``ε``, as the counters require. ∎

Two paths change under replace-one, so the whole infinite sequence of releases is ε-DP, as for
the paper's budgets (which remain available as ``budgets="paper"``).

>>> b = full_budgets(1.0, 1, 1, 60)
>>> round(b(0), 4), round(b(30), 4)   # 4.04× the paper's 3/(4π²) = 0.0760
(0.307, 0.307)
>>> from fractions import Fraction
>>> sum(Fraction(full_budgets(1.0, 2, j, 60)(7)) for j in range(1, 8)) <= Fraction(1, 2)
True
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

from ...errors import ParameterError, check_int

__all__ = ["BUDGET_SCHEMES", "FullBudgets", "full_budgets"]

#: The budget schemes of :class:`~sketchsyn.synth.online.OnlineSynthesizer`: ``"full"``
#: (:func:`full_budgets`, the default) and ``"paper"`` (He, Vershynin and Zhu's (4.1) / (5.1)).
BUDGET_SCHEMES = ("full", "paper")

_SHRINK = Fraction(2**40 - 1, 2**40)


def _round_down(x: Fraction) -> float:
    """The largest float not above ``x`` (``x > 0``)."""
    f = float(x)
    if Fraction(f) > x:
        f = math.nextafter(f, 0.0)
    return f


@lru_cache(maxsize=4096)
def _vector(epsilon: float, d: int, levels: int, m: int) -> tuple[float, ...]:
    """``(ε_{1,r}, …, ε_{m,r})`` for a path of ``m`` levels (``d = 1``: ``m = levels``), their
    exact rational sum at most ``ε/2``."""
    half = Fraction(epsilon) / 2
    if d == 1:
        s = sum(Fraction(1, i * i) for i in range(1, levels + 1))
        return tuple(_round_down(half / (s * j * j)) for j in range(1, levels + 1))
    e = (1.0 - 1.0 / d) / 2.0
    z = math.fsum(2.0 ** (-k * e) for k in range(m))
    out = [float(epsilon) / 2.0 * 2.0 ** ((j - m) * e) / z for j in range(1, m + 1)]
    vals = [Fraction(v) for v in out]
    while sum(vals) > half:
        vals = [Fraction(_round_down(v * _SHRINK)) for v in vals]
    return tuple(float(v) for v in vals)


class FullBudgets:
    """``r ↦ ε_{j,r}`` of a level-``j`` cell under :func:`full_budgets` (a callable the counters
    take; its parameters are public and saved by the synthesizer, not by the counters).

    >>> FullBudgets(1.0, 2, 3, 60)(3) > FullBudgets(1.0, 2, 2, 60)(3)
    True
    """

    __slots__ = ("d", "epsilon", "j", "levels")

    def __init__(self, epsilon: float, d: int, j: int, levels: int) -> None:
        self.epsilon = float(epsilon)
        self.d = int(d)
        self.j = int(j)
        self.levels = int(levels)

    def __call__(self, r: int) -> float:
        if self.d == 1:
            return _vector(self.epsilon, 1, self.levels, self.levels)[self.j - 1]
        # Time level r: levels 1 … min(r, H) exist; a cell is only charged from its own start
        # (r ≥ j), and earlier r are given the value at r = j.
        m = min(max(int(r), self.j), self.levels)
        return _vector(self.epsilon, self.d, self.levels, m)[self.j - 1]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FullBudgets) and (
            (self.epsilon, self.d, self.j, self.levels)
            == (other.epsilon, other.d, other.j, other.levels)
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"full_budgets(epsilon={self.epsilon}, d={self.d}, j={self.j}, levels={self.levels})"


def full_budgets(epsilon: float, d: int, j: int, levels: int) -> FullBudgets:
    """The budgets ``r ↦ ε_{j,r}`` of a level-``j`` cell that spend the whole ``ε/2`` of a path.

    Parameters
    ----------
    epsilon : float
        The synthesizer's ε.
    d : int
        Dimension of the domain (``d = 1``: the history is replayed into every level).
    j : int
        Level of the cell, ``1 ≤ j ≤ levels``.
    levels : int
        ``H``, the deepest level of the partition.

    Examples
    --------
    >>> [round(full_budgets(1.0, 2, j, 60)(2), 4) for j in (1, 2)]
    [0.2284, 0.2716]
    """
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
        raise ParameterError(
            f"The 'epsilon' parameter of full_budgets must be a finite float > 0. "
            f"Got {epsilon!r} instead."
        )
    d = check_int(d, "d", "full_budgets", minimum=1, maximum=64)
    levels = check_int(levels, "levels", "full_budgets", minimum=1, maximum=64)
    j = check_int(j, "j", "full_budgets", minimum=1, maximum=levels)
    return FullBudgets(float(epsilon), d, j, levels)
