"""ContinualPrivHP's release: least squares over the counter levels, then the tree grown through
the sketches, pruning the children whose count is below their level's noise.

Post-processing of the released noisy cells only (no budget, no randomness):

1. **Least squares** over the counter levels ``0 … L_k`` (Hay, Rastogi, Miklau and Suciu,
   *Boosting the accuracy of differentially private histograms through consistency*;
   :func:`~sketchsyn.synth.release.least_squares_levels`), each level weighted by the public
   variance of its released cells (``ContinualPrivHP.cell_variance``).
2. **Consistency, top-down** (:func:`~sketchsyn.synth.tree.even_split`, Holland et al.,
   Algorithm 4): the root is ``max(root, 0)``, each pair of children is made non-negative and
   summing to its parent.
3. **Pruning** (:func:`prune_pairs`). A continual counter's noise is much larger than one-pass
   PrivHP's (it carries the counter's ``h`` levels and blocks), and most cells of a skewed
   stream are empty: after the split, an empty child keeps a share of the noise, so mass leaks
   into cells (often far away) that hold no data. So a child whose consistent count is below
   ``a`` noise standard deviations of its level gives its count to its sibling when the
   sibling's is not below it (both below: the split is kept). The threshold ``a`` comes from
   the released values themselves (:func:`noise_threshold`, a false-discovery test with share
   ``prune``): one for all counter levels (their least-squares estimates from below, by
   :func:`~sketchsyn.synth.online_release.combine_levels`, with that estimate's standard
   deviation), one per sketch level (the median over the rows of the queried children, with
   one released cell's standard deviation). ``prune = 0`` turns pruning off: the release is
   then exactly that of ``tree.grow_partition``.
4. **Growth** (Holland et al., Algorithm 3, as :func:`~sketchsyn.synth.tree.grow_partition`):
   from all ``2**L_k`` cells of level ``L_k``, level by level, the children of the ``k`` cells
   with the largest consistent counts are queried in the level sketch (Count-Min: the minimum
   over the ``j`` rows; Count Sketch: the median of the signed rows), split and pruned as above.

Pruning moves mass only between siblings, so the released total is the consistent root's.

>>> import numpy as np
>>> c0, c1 = prune_pairs(np.array([10.0, 10.0, 10.0]), np.array([1.0, 5.0, 2.0]),
...                      np.array([9.0, 5.0, 8.0]), 3.0)
>>> c0.tolist(), c1.tolist()     # 1 < 3 ≤ 9: all to the sibling; 5, 5 kept; 2 < 3 ≤ 8
([0.0, 5.0, 0.0], [10.0, 5.0, 10.0])
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from ..errors import ParameterError
from . import tree
from .online_release import combine_levels
from .release import least_squares_levels

__all__ = [
    "MAX_SD",
    "PRUNE",
    "STEP",
    "check_prune",
    "grow",
    "noise_threshold",
    "prune_pairs",
    "top_levels",
]

PRUNE = 0.2
"""Default ``prune``: the noise test keeps the estimated share of empty cells among the kept
ones at most 20% (:func:`noise_threshold`)."""
MAX_SD = 4.0
"""Largest threshold, in noise standard deviations (where the test finds no smaller one)."""
STEP = 0.25
"""The thresholds tried: ``0, STEP, 2·STEP, …, MAX_SD``."""

_U64 = np.uint64


def prune_pairs(
    parent: np.ndarray, c0: np.ndarray, c1: np.ndarray, threshold: float
) -> tuple[np.ndarray, np.ndarray]:
    """Give a child's count to its sibling when it is below ``threshold`` and the sibling is not.

    ``c0 + c1 = parent`` on entry (a consistent split); so it is on exit. Pairs with both
    children below the threshold, or both at or above it, are unchanged; ``threshold ≤ 0``
    changes nothing (consistent counts are non-negative).

    >>> c0, c1 = prune_pairs(np.array([4.0]), np.array([0.5]), np.array([3.5]), 1.0)
    >>> c0.tolist(), c1.tolist()
    ([0.0], [4.0])
    """
    low0, low1 = c0 < threshold, c1 < threshold
    to1, to0 = low0 & ~low1, low1 & ~low0
    return (
        np.where(to1, 0.0, np.where(to0, parent, c0)),
        np.where(to0, 0.0, np.where(to1, parent, c1)),
    )


def check_prune(value: object, name: str) -> float:
    """``value`` as a finite float ``≥ 0``, or :class:`ParameterError` naming ``name``.

    >>> check_prune(0.2, "prune")
    0.2
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        ok = False
    else:
        ok = math.isfinite(float(value)) and float(value) >= 0
    if not ok:
        raise ParameterError(
            f"The {name!r} parameter of ContinualPrivHP.release must be a finite real number "
            f">= 0 (a share of empty cells; 0 turns pruning off). Got {value!r} instead."
        )
    return float(value)


def noise_threshold(z: np.ndarray, q: float, cap: float) -> float:
    """The smallest ``a`` in ``0, STEP, 2·STEP, … ≤ cap`` with ``#{z < −a} ≤ q·#{z > a}`` and
    ``#{z > a} > 0``; ``cap`` if there is none.

    ``z`` are unbiased estimates of non-negative counts divided by their noise standard
    deviation, the noise symmetric: an empty cell falls below ``−a`` as often as above ``a``,
    so ``#{z < −a}`` estimates how many of the cells above ``a`` are empty (a false-discovery
    estimate, after Benjamini and Hochberg's *Controlling the false discovery rate*). Many
    empty cells (a skewed stream) raise the threshold; few (spread-out data) lower it.

    >>> z = np.array([-2.1, -0.4, 0.3, 1.1, 2.4, 9.0, 12.0])
    >>> noise_threshold(z, 0.25, 6.0)   # at 0: 2 below, 5 above; at 0.5: 1 below, 4 above
    0.5
    >>> noise_threshold(z, 0.0, 6.0)    # at 2.25: 0 below, 3 above
    2.25
    """
    grid = np.arange(0.0, float(cap) + STEP / 2, STEP)
    above = (z[None, :] > grid[:, None]).sum(axis=1)
    below = (z[None, :] < -grid[:, None]).sum(axis=1)
    ok = (above > 0) & (below <= q * above)
    return float(grid[int(np.argmax(ok))]) if ok.any() else float(cap)


def _interleave(c0: np.ndarray, c1: np.ndarray) -> np.ndarray:
    out = np.empty(2 * c0.size, dtype=np.float64)
    out[0::2], out[1::2] = c0, c1
    return out


def _raw_levels(c: Any) -> tuple[list[np.ndarray], list[float]]:
    """The released counter levels ``0 … L_k`` (float64) and their cells' variances."""
    L = c.L_k
    counts = c._noisy(np.arange(c._n_tree, dtype=np.int64)).astype(np.float64)
    levels = [counts[2**level - 1 : 2 ** (level + 1) - 1] for level in range(L + 1)]
    return levels, [float(c.cell_variance(level)) for level in range(L + 1)]


def top_levels(c: Any) -> list[np.ndarray]:
    """``ContinualPrivHP.top_levels``: the counter levels after least squares (Hay et al.)."""
    levels, variances = _raw_levels(c)
    if len(levels) == 1 or min(variances) <= 0:
        return levels
    return least_squares_levels(levels, variances)


def _sketch_values(c: Any, level: int, prefixes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(estimates, medians)`` of level-``level`` cells from the released sketch cells: the
    query (Count-Min: minimum over the rows; Count Sketch: median of the signed rows) and the
    median over the rows (the noise test's statistic)."""
    cells, signs = c._query_cells(level, prefixes)
    uniq, inverse = np.unique(cells, return_inverse=True)
    values = c._noisy(uniq)[inverse.reshape(cells.shape)].astype(np.float64)
    if signs is not None:
        values = values * signs
    median = np.median(values, axis=0)
    return (median if signs is not None else values.min(axis=0)), median


def grow(c: Any, prune: float = PRUNE) -> Any:
    """The grown, pruned partition tree of ``c`` at its last closed epoch (module steps 1–4).

    ``c`` is a :class:`~sketchsyn.synth.continual.ContinualPrivHP`; ``prune`` is the share
    ``q`` of the noise test (:func:`noise_threshold`; 0: no pruning).
    """
    q = check_prune(prune, "prune")
    raw, variances = _raw_levels(c)
    noisy = len(raw) > 1 and min(variances) > 0
    levels = least_squares_levels(raw, variances) if noisy else raw
    # Variance of each counter level's estimate from below (own count and children's).
    below = combine_levels(raw, variances)[1] if noisy else [0.0] * len(raw)
    sd = [float(v) ** 0.5 for v in below]
    a = 0.0
    if noisy and q > 0:
        z = np.concatenate([levels[j] / sd[j] for j in range(1, len(levels))])
        a = noise_threshold(z, q, MAX_SD)
    top = [np.maximum(np.asarray(levels[0], dtype=np.float64), 0.0)]
    for level in range(1, len(levels)):
        c0, c1 = tree.even_split(top[-1], levels[level][0::2], levels[level][1::2])
        c0, c1 = prune_pairs(top[-1], c0, c1, a * sd[level])
        top.append(_interleave(c0, c1))
    nodes = {level: (np.arange(2**level, dtype=_U64), x) for level, x in enumerate(top)}
    v_prefixes, v_counts = nodes[len(top) - 1]
    for level in range(len(top), c.depth + 1):
        children = np.empty(2 * v_prefixes.size, dtype=_U64)
        children[0::2] = v_prefixes << _U64(1)
        children[1::2] = children[0::2] | _U64(1)
        values, median = _sketch_values(c, level, children)
        c0, c1 = tree.even_split(v_counts, values[0::2], values[1::2])
        level_sd = max(float(c.cell_variance(level)), 0.0) ** 0.5
        if q > 0 and level_sd > 0:
            b = noise_threshold(median / level_sd, q, MAX_SD)
            c0, c1 = prune_pairs(v_counts, c0, c1, b * level_sd)
        counts = _interleave(c0, c1)
        nodes[level] = (children, counts)
        keep = tree._top_k(children, counts, c.k)
        v_prefixes, v_counts = children[keep], counts[keep]
    return tree.PartitionTree(nodes)
