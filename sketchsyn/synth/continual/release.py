"""ContinualPrivHP's release: least squares over the counter levels, then the tree grown through
the sketches, pruning the children whose count is below their level's noise.

Post-processing of the released noisy cells only (no budget, no randomness):

1. **Least squares** over the counter levels ``0 … L_k`` (Hay, Rastogi, Miklau and Suciu,
   *Boosting the accuracy of differentially private histograms through consistency*;
   :func:`~sketchsyn.synth.privhp.release.least_squares_levels`), each level weighted by the public
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
   :func:`~sketchsyn.synth.online.release.combine_levels`, with that estimate's standard
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

from typing import Any

import numpy as np

from ...sketches.sketch import row_median
from ..privhp.release import (
    MAX_SD,
    PRUNE,
    STEP,
    check_prune,
    grow_pruned,
    least_squares_levels,
    noise_threshold,
    prune_pairs,
    pruned_top,
)

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
    median = row_median(values)
    return (median if signs is not None else values.min(axis=0)), median


def grow(c: Any, prune: float = PRUNE) -> Any:
    """The grown, pruned partition tree of ``c`` at its last closed epoch (module steps 1–4).

    ``c`` is a :class:`~sketchsyn.synth.continual.ContinualPrivHP`; ``prune`` is the share
    ``q`` of the noise test (:func:`noise_threshold`; 0: no pruning). Steps 1–3 are
    :func:`~sketchsyn.synth.privhp.release.pruned_top`, step 4
    :func:`~sketchsyn.synth.privhp.release.grow_pruned` (shared with ``PrivHP.release``).
    """
    q = check_prune(prune, "prune")
    raw, variances = _raw_levels(c)
    top = pruned_top(raw, variances, q)

    def values(level: int, prefixes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return _sketch_values(c, level, prefixes)

    def level_sd(level: int) -> float:
        return max(float(c.cell_variance(level)), 0.0) ** 0.5

    return grow_pruned(top, values, level_sd, c.k, c.depth, q)
