"""PrivHP's release: consistent counter levels, then the tree grown through the sketches.

Hay, Rastogi, Miklau and Suciu ("Boosting the accuracy of differentially private histograms
through consistency") give the least-squares consistent tree for levels of unequal noise
(:func:`least_squares_levels`); the even split then makes it non-negative, and
:func:`grow_release` expands the top ``release_k`` cells of each sketch level (Holland et al.,
Algorithms 3 and 4). Everything here is post-processing of a noisy state.

Pruning (``prune > 0``, shared with ``ContinualPrivHP.release``): after each consistent split, a
child whose count is below ``a`` noise standard deviations of its level gives its count to its
sibling when the sibling's is not below it (:func:`prune_pairs`), so that cells holding no data
do not keep a share of the noise and the growth stops where the noisy counts stop carrying
signal. The threshold ``a`` comes from the released values themselves
(:func:`noise_threshold`, a false-discovery test after Benjamini and Hochberg, *Controlling the
false discovery rate*, with share ``prune``): one for all counter levels
(:func:`pruned_top`), one per sketch level (:func:`grow_pruned`). It reads only the noisy state,
so it costs no privacy budget; it moves mass only between siblings, so the total is unchanged.

>>> import numpy as np
>>> fixed = least_squares_levels([np.array([10.0]), np.array([3.0, 5.0])], [2.0, 1.0])
>>> [level.tolist() for level in fixed]  # root 10 (variance 2) and children 3 + 5 (1 each)
[[9.0], [3.5, 5.5]]
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from ...errors import ParameterError, ReleasedError
from ...privacy.noise import discrete_laplace, discrete_laplace_variance
from ...sketches.sketch import row_median
from .. import tree
from ..distribution import PrivateDistribution
from ..tree import combine_levels

__all__ = [
    "MAX_SD",
    "PRUNE",
    "STEP",
    "check_prune",
    "grow_pruned",
    "grow_release",
    "least_squares_levels",
    "noise_threshold",
    "noisy_state",
    "prune_pairs",
    "pruned_top",
    "release_once",
]

PRUNE = 0.2
"""Default ``prune``: the noise test keeps the estimated share of empty cells among the kept
ones at most 20% (:func:`noise_threshold`)."""
MAX_SD = 4.0
"""Largest threshold, in noise standard deviations (where the test finds no smaller one)."""
STEP = 0.25
"""The thresholds tried: ``0, STEP, 2·STEP, …, MAX_SD``."""

_U64 = np.uint64


def least_squares_levels(levels: list[np.ndarray], variances: list[float]) -> list[np.ndarray]:
    """Hay et al.'s constrained inference on a complete tree, levels of unequal variance.

    Bottom-up, each node's estimate combines its own noisy count with the sum of its children's
    estimates by inverse variances; top-down, each parent's residual is split evenly between its
    two children (siblings have equal variances). The result is the least-squares consistent
    tree (not clamped: :func:`tree.consistent_levels` makes it non-negative afterwards).
    """
    L = len(levels) - 1
    z, var = [None] * (L + 1), [0.0] * (L + 1)
    z[L], var[L] = np.asarray(levels[L], dtype=np.float64), float(variances[L])
    for level in range(L - 1, -1, -1):
        s = z[level + 1][0::2] + z[level + 1][1::2]
        vs = 2.0 * var[level + 1]
        v = float(variances[level])
        z[level] = (np.asarray(levels[level], dtype=np.float64) * vs + s * v) / (v + vs)
        var[level] = v * vs / (v + vs)
    out = [z[0]]
    for level in range(1, L + 1):
        child = z[level]
        resid = out[-1] - (child[0::2] + child[1::2])
        x = child.copy()
        x[0::2] += resid / 2.0
        x[1::2] += resid / 2.0
        out.append(x)
    return out


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


def check_prune(value: object, name: str, owner: str = "ContinualPrivHP.release") -> float:
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
            f"The {name!r} parameter of {owner} must be a finite real number "
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


def pruned_top(
    raw: list[np.ndarray], variances: list[float], q: float, valid: tree.Valid | None = None
) -> list[np.ndarray]:
    """Consistent, pruned counter levels from their noisy counts and cells' variances.

    Least squares (:func:`least_squares_levels`), then top-down the even split
    (:func:`tree.even_split`; the root is ``max(root, 0)``) and :func:`prune_pairs` with one
    threshold ``a·sd_l`` for all levels: ``sd_l`` is the standard deviation of level ``l``'s
    least-squares estimate from below, ``a`` the :func:`noise_threshold` of those estimates
    over their ``sd_l`` (``q = 0``: no pruning).
    """
    noisy = len(raw) > 1 and min(variances) > 0
    levels = least_squares_levels(raw, variances) if noisy else raw
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
        if valid is not None:
            ok = np.asarray(valid(level, np.arange(2**level, dtype=_U64)), dtype=bool)
            c0, c1 = tree.settle_empty(top[-1], c0, c1, ok[0::2], ok[1::2])
        top.append(_interleave(c0, c1))
    return top


def grow_pruned(
    top: list[np.ndarray],
    values: Callable[[int, np.ndarray], tuple[np.ndarray, np.ndarray]],
    level_sd: Callable[[int], float],
    k: int,
    depth: int,
    q: float,
    *,
    prune_top: bool = False,
    valid: tree.Valid | None = None,
) -> tree.PartitionTree:
    """Holland et al.'s Algorithm 3 below the consistent ``top``, pruning each split.

    ``values(level, children)`` gives the children's sketch estimates and the median over the
    sketch rows (the noise test's statistic), ``level_sd(level)`` one released sketch cell's
    noise standard deviation. Each level: the even split, then :func:`prune_pairs` at
    ``b·level_sd`` with ``b`` the :func:`noise_threshold` of the medians (``q = 0``: no
    pruning, the growth of :func:`tree.grow_partition`); the ``k`` largest children grow on.
    """
    nodes = {level: (np.arange(2**level, dtype=_U64), x) for level, x in enumerate(top)}
    v_prefixes, v_counts = nodes[len(top) - 1]
    if prune_top:
        keep = tree._top_k(v_prefixes, v_counts, k)
        v_prefixes, v_counts = v_prefixes[keep], v_counts[keep]
    for level in range(len(top), depth + 1):
        children = np.empty(2 * v_prefixes.size, dtype=_U64)
        children[0::2] = v_prefixes << _U64(1)
        children[1::2] = children[0::2] | _U64(1)
        estimates, median = values(level, children)
        c0, c1 = tree.even_split(v_counts, estimates[0::2], estimates[1::2])
        sd = level_sd(level)
        if q > 0 and sd > 0:
            b = noise_threshold(median / sd, q, MAX_SD)
            c0, c1 = prune_pairs(v_counts, c0, c1, b * sd)
        if valid is not None:
            ok = np.asarray(valid(level, children), dtype=bool)
            c0, c1 = tree.settle_empty(v_counts, c0, c1, ok[0::2], ok[1::2])
        counts = _interleave(c0, c1)
        nodes[level] = (children, counts)
        keep = tree._top_k(children, counts, k)
        v_prefixes, v_counts = children[keep], counts[keep]
    return tree.PartitionTree(nodes)


def noisy_state(php: Any) -> tuple[np.ndarray, list]:
    """``php``'s counter levels and level sketches with noise (drawn now for a raw summary)."""
    tree_counts = php._tree.copy()
    sketches = php._sketches
    if php._raw:
        streams = php._release_stream.spawn(php._depth + 1)
        for level in range(php._L_c + 1):
            lo, hi = 2**level - 1, 2 ** (level + 1) - 1
            tree_counts[lo:hi] += discrete_laplace(php._scales[level], hi - lo, rng=streams[level])
        noisy = []
        for i, sk in enumerate(php._sketches):
            level = php._L_c + 1 + i
            twin = type(sk)(
                php._width,
                php._sketch_depth,
                epsilon=float(php._level_eps[level]),
                seed=sk.seed,
                rng=streams[level],
            )
            twin.merge(sk)
            noisy.append(twin)
        sketches = noisy
    return tree_counts, sketches


def _masked(domain: Any, level: int, counts: Any, prefixes: np.ndarray | None = None) -> np.ndarray:
    """``counts`` (float64) with 0 for the cells that hold no value of a table's column (their
    true count is 0: public knowledge of the schema, so post-processing); ``prefixes`` default
    to the whole level."""
    out = np.asarray(counts, dtype=np.float64)
    valid = getattr(domain, "valid", None)
    if valid is None:
        return out
    if prefixes is None:
        prefixes = np.arange(out.size, dtype=_U64)
    return np.where(valid(np.full(prefixes.size, level), prefixes), out, 0.0)


def grow_release(php: Any, prune: float = 0.0) -> tuple[PrivateDistribution, tree.PartitionTree]:
    """Algorithms 3–4 on ``php``'s noisy state: the consistent top, grown through the sketches.

    Post-processing only (the noise is in the state, or drawn once here for a raw summary).
    ``prune > 0`` prunes each split below the noise (:func:`pruned_top`, :func:`grow_pruned`);
    ``prune = 0`` is Holland et al.'s release exactly.
    """
    tree_counts, sketches = noisy_state(php)
    levels = [
        _masked(php._domain, level, tree_counts[2**level - 1 : 2 ** (level + 1) - 1])
        for level in range(php._L_c + 1)
    ]
    # Hay et al.'s least squares on the counter levels (measured 3–5% lower W1 than the
    # top-down even split alone; docs/utility.md), then the even split for non-negativity.
    eps_c = php._level_eps[: php._L_c + 1]
    check = getattr(php._domain, "valid", None)
    valid = None  # a table's cells naming no value take no mass from their siblings
    if check is not None:

        def valid(level: int, prefixes: np.ndarray) -> np.ndarray:
            return check(np.full(prefixes.size, level), prefixes)

    variances = [discrete_laplace_variance(1 / e) for e in eps_c]
    L = php._L_c
    if prune > 0:

        def values(level: int, prefixes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            rows = sketches[level - L - 1]._row_values(prefixes).astype(np.float64)
            median = row_median(rows)
            estimate = median if sketches[level - L - 1]._signed else rows.min(axis=0)
            return _masked(php._domain, level, estimate, prefixes), median

        def level_sd(level: int) -> float:
            return float(discrete_laplace_variance(float(php._scales[level]))) ** 0.5

        top = pruned_top(levels, variances, prune, valid)
        grown = grow_pruned(
            top, values, level_sd, php._release_k, php._depth, prune, prune_top=True, valid=valid
        )
    else:
        top = tree.consistent_levels(least_squares_levels(levels, variances), valid)

        def query(level: int, prefixes: np.ndarray) -> np.ndarray:
            estimate = sketches[level - L - 1].query_many(prefixes)
            return _masked(php._domain, level, estimate, prefixes)

        grown = tree.grow_partition(
            top, query, php._release_k, php._depth, prune_top=True, valid=valid
        )
    leaf_levels, leaf_prefixes, leaf_counts = grown.leaves()
    params = php._params() | {"prune": float(prune)}
    params.pop("domain")
    dist = PrivateDistribution(
        php._domain,
        leaf_levels,
        leaf_prefixes,
        leaf_counts,
        epsilon=php._epsilon,
        mechanism="PrivHP",
        params=params,
    )
    return dist, grown


def release_once(php: Any, prune: object, owner: str = "PrivHP") -> PrivateDistribution:
    """``PrivHP.release(prune=...)``: the stored release of this state, or a new one recorded.

    ``prune=None`` is the stored release's ``prune`` when this state was released before (so a
    state, or a blob, released by an earlier version is returned as it was), else :data:`PRUNE`. The
    same state released again with the same ``prune`` returns the stored distribution; with another
    ``prune`` a state holding its noise is regrown (post-processing of the same noisy counts), while
    a raw state, whose noise was drawn at its release, is refused.
    """
    q = None if prune is None else check_prune(prune, "prune", f"{owner}.release")
    digest = php._digest()
    stored = php._lineage.lookup(digest, owner)
    if q is None:
        q = float(stored[0].params.get("prune", 0.0)) if stored is not None else PRUNE
    if stored is not None:
        before = float(stored[0].params.get("prune", 0.0))
        if before == q:
            return stored[0]
        if php._raw:
            raise ReleasedError(
                f"this raw {owner} was released with prune={before:g}: its noise was drawn at "
                f"that release, so no other prune can be grown from it (got prune={q:g}); "
                f"release(prune={before:g}) returns it again"
            )
    dist, grown = grow_release(php, q)
    php._lineage.record(digest, (dist, grown))
    return dist
