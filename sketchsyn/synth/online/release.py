"""The online synthesizer's release: inverse-variance combination of the levels, then integer
proportional splits down to the depth where a cell's count is above its noise.

Post-processing of the released counter outputs only (no budget). Three steps:

1. **Windows.** A level-``j`` cell counts the records since its counter's first step (``t_j`` for
   ``d ≥ 2``: the paper ignores the earlier records; ``t_0`` for ``d = 1``, which replays the
   history). Its count is scaled by ``f_j = t / (t − t_start + 1)`` to estimate the cell's share
   of all ``t`` records (unbiased when the cell's share does not drift), and its noise variance by
   ``f_j²``: a level that has just started carries little weight.
2. **Least squares, bottom-up** (:func:`combine_levels`; Hay, Rastogi, Miklau and Suciu, "Boosting
   the accuracy of differentially private histograms through consistency"). From the deepest
   level up, each cell's estimate combines its own scaled count with the sum of its two
   children's estimates by inverse variances. Both are unbiased, so the combination is, and its
   variance ``v·v_s/(v + v_s)`` is below each. The variances are public: the noise scales of the
   counters' closed time levels (``Var Lap_Z(2/ε_{j,r})`` each) plus the current time level's
   sparse counting (threshold lag and binary-tree noise).
3. **Integer splits, adaptive depth** (:func:`adaptive_leaves`). Top-down from the root's exact
   ``t``, a cell's integer count is split between its children in proportion to their
   non-negative combined estimates (rounded, so the children sum to the parent exactly: the
   integer consistency step of He's dissertation with its proportional transform). A cell is
   split only while its count is at least ``τ`` times the noise standard deviation of its
   children's level (the released depth adapts: dense cells go deep, sparse ones stop where
   their children would be noise); a cell that stops is a leaf, its points uniform in it.
   The leaves' counts are non-negative integers summing to ``t``: exactly ``t`` points.

Hay et al.'s top-down step adds each parent's residual evenly to its children; here the split is
proportional instead, because the counters' errors are not symmetric (sparse counting holds back
up to a threshold of a dense cell's records), and an even split of a large residual puts mass
into empty cells.

>>> import numpy as np
>>> est, var = combine_levels(
...     [np.array([8.0]), np.array([5.0, 1.0]), np.array([4.0, 0.0, 2.0, 0.0])],
...     [0.0, 4.0, 1.0])
>>> est[1].tolist(), round(var[1], 3)   # (5·2 + 4·4)/6 and (1·2 + 2·4)/6; 4·2/6
([4.333333333333333, 1.6666666666666667], 1.333)
>>> lv, px, ct = adaptive_leaves(8, est, [0.0, 1.0, 1.0], tau=1.0)
>>> lv.tolist(), px.tolist(), ct.tolist(), int(ct.sum())
([2, 2], [0, 2], [6, 2], 8)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np

from ..tree import combine_levels

__all__ = ["adaptive_leaves", "combine_levels", "level_noise"]

_U64 = np.uint64


def _lap_var(scale: float) -> float:
    """Variance of ``Lap_Z(scale)`` (``2p/(1−p)²``, ``p = e^{−1/scale}``; ``≈ 2 scale²``)."""
    if scale > 1e4:
        return 2.0 * scale * scale
    p = math.exp(-1.0 / scale)
    return 2.0 * p / (1.0 - p) ** 2


def _start(r: int, eps: Fraction) -> int:
    return -((-(2**r) * eps.denominator) // eps.numerator)


def level_noise(
    budget: Callable[[int], float], epsilon: Fraction, start_level: int, t: int
) -> tuple[float, float]:
    """``(closed, current)``: public noise variances of a cell's counter output at step ``t``.

    ``closed`` sums ``Var Lap_Z(2/ε_r)`` over the counter's non-empty time levels that have
    ended (the noise of a cell with few records); ``current`` adds the open time level's sparse
    counting: a threshold lag (up to ``T0 = 9 ln(len)/(ε_R/2)`` records held back, variance
    ``T0²/12``) and its binary tree (``L/2`` nodes of ``Lap_Z(4L/ε_R)``, ``L`` the tree's levels).
    A budget that is not positive and finite (a test double's) gives ``(1, 1)``: equal weights.

    >>> from sketchsyn.synth.online.budget import full_budgets
    >>> closed, current = level_noise(full_budgets(1.0, 2, 3, 60), Fraction(1), 3, 100)
    >>> round(closed), current > closed
    (1503, True)
    """
    big_r = max((t * epsilon.numerator // epsilon.denominator).bit_length() - 1, 0)
    closed = 0.0
    for r in range(start_level, big_r):
        if _start(r + 1, epsilon) > _start(r, epsilon):
            e = float(budget(r))
            if not (e > 0 and math.isfinite(e)):
                return 1.0, 1.0
            closed += _lap_var(2.0 / e)
    e = float(budget(big_r))
    if not (e > 0 and math.isfinite(e)):
        return 1.0, 1.0
    length = max(_start(big_r + 1, epsilon) - _start(big_r, epsilon), 2)
    depth = length.bit_length()
    t0 = 9.0 * math.log(length) / (e / 2.0)
    current = closed + t0 * t0 / 12.0 + depth / 2.0 * _lap_var(4.0 * depth / e)
    return closed, current


def _parity(x: np.ndarray) -> np.ndarray:
    """``popcount(x) mod 2`` (a public tie rule that alternates between neighbouring cells)."""
    x = x.astype(_U64)
    p = np.zeros(x.shape, dtype=_U64)
    while np.any(x):
        p ^= x & _U64(1)
        x = x >> _U64(1)
    return p.astype(bool)


def adaptive_leaves(
    total: int, estimates: Sequence[np.ndarray], stop_sd: Sequence[float], tau: float = 1.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Integer proportional splits from the root's ``total`` down to an adaptive depth.

    A cell of level ``j − 1`` with integer count ``p > 0`` is split when ``j`` is a level of
    ``estimates`` and ``p ≥ tau · stop_sd[j]``: child 0 gets ``round(p·a/(a + b))`` with
    ``a, b`` the children's estimates clamped at 0 (``p/2`` when both are 0; an exact half, and
    the odd unit of an even split, go to child ``popcount(θ) mod 2``), child 1 the rest. Cells
    that are not split are leaves. Returns ``(levels, prefixes, counts)`` of the leaves with a
    positive count (the root, with count 0, when ``total`` is 0): non-negative int64 counts that
    sum to ``total`` exactly.

    >>> lv, px, ct = adaptive_leaves(10, [np.array([10.0]), np.array([9.0, 1.0])], [0.0, 0.0])
    >>> lv.tolist(), px.tolist(), ct.tolist()
    ([1, 1], [0, 1], [9, 1])
    """
    total = int(total)
    out_l: list[np.ndarray] = []
    out_p: list[np.ndarray] = []
    out_c: list[np.ndarray] = []
    px = np.zeros(1, dtype=_U64)
    ct = np.array([total], dtype=np.int64)
    depth = len(estimates) - 1
    for j in range(1, depth + 1):
        go = ct >= tau * float(stop_sd[j])
        if not go.all():
            out_l.append(np.full(int((~go).sum()), j - 1, dtype=np.int64))
            out_p.append(px[~go])
            out_c.append(ct[~go])
            px, ct = px[go], ct[go]
        if px.size == 0:
            break
        z = estimates[j]
        idx = (2 * px).astype(np.int64)
        a = np.maximum(z[idx], 0.0)
        b = np.maximum(z[idx + 1], 0.0)
        s = a + b
        tie = _parity(px)
        share = np.where(s > 0, a / np.where(s > 0, s, 1.0), 0.5)
        raw = ct.astype(np.float64) * share
        lo = np.floor(raw)
        frac = raw - lo
        up = (frac > 0.5) | ((frac == 0.5) & ~tie)
        x = np.clip(lo.astype(np.int64) + up.astype(np.int64), 0, ct)
        kids = np.empty(2 * px.size, dtype=np.int64)
        kids[0::2], kids[1::2] = x, ct - x
        kid_px = np.empty(2 * px.size, dtype=_U64)
        kid_px[0::2], kid_px[1::2] = 2 * px, 2 * px + _U64(1)
        keep = kids > 0
        px, ct = kid_px[keep], kids[keep]
    out_l.append(np.full(px.size, depth if px.size else 0, dtype=np.int64))
    out_p.append(px)
    out_c.append(ct)
    levels = np.concatenate(out_l)
    prefixes = np.concatenate(out_p).astype(_U64)
    counts = np.concatenate(out_c)
    if counts.size == 0:
        return np.zeros(1, dtype=np.int64), np.zeros(1, dtype=_U64), np.zeros(1, dtype=np.int64)
    return levels, prefixes, counts
