"""Exact-count random assignment of values to people in groups, in O(n) numpy work.

The longitudinal synthesizers extend every synthetic person by one value per period: among the
people of group ``g`` (for instance those whose last ``k − 1`` values are ``z``), exactly
``targets[g, c]`` must get value ``c``, and which people get which value is chosen uniformly at
random. Sorting random keys would do it in O(n log n) (0.13 s per million people); instead:

1. each candidate of group ``g`` is selected for value ``c`` by an independent coin with
   probability ``targets[g, c] / remaining[g]``. Given the number ``K_g`` selected, the selected
   set is a uniform ``K_g``-subset (the coins are exchangeable);
2. the count is then made exact: if ``K_g`` exceeds the target, a uniform subset of the surplus
   is unselected; if it falls short, a uniform subset of the shortfall is added from the
   unselected. A uniform subset of a uniform subset is uniform, so the final set is a uniform
   subset of exactly ``targets[g, c]`` people.
3. the selected people take value ``c`` and leave; the next value is assigned among the rest.

The fix-up chooses ``|K_g − target|`` (about ``sqrt(n)``) distinct ranks by rejection and maps
them to people through a stable sort of small integer group ids (numpy's radix sort), so a
period costs a few passes over the people. This is post-processing of released counts: the
coins need not be exact, only the counts, and they are.

>>> import numpy as np
>>> from sketchsyn.privacy.rng import as_source
>>> groups = np.array([0, 0, 0, 1, 1, 0])
>>> values = assign_within_groups(groups, np.array([[1, 3], [2, 0]]), as_source(3))
>>> sorted(values[groups == 0].tolist()), values[groups == 1].tolist()
([0, 1, 1, 1], [0, 0])
"""

from __future__ import annotations

import numpy as np

from ...privacy.rng import RandomSource

__all__ = ["assign_within_groups", "choose_in_groups"]


def _group_dtype(n_groups: int) -> type:
    # uint8/uint16 keys make numpy's stable argsort a radix sort (linear time).
    if n_groups <= 256:
        return np.uint8
    if n_groups <= 65536:
        return np.uint16
    return np.uint32


def _distinct_ranks(
    sizes: np.ndarray, need: np.ndarray, src: RandomSource
) -> tuple[np.ndarray, np.ndarray]:
    """``need[g]`` distinct ranks in ``[0, sizes[g])`` for every group, a uniform subset each.

    Returns ``(group, rank)`` arrays. Draws with replacement and keeps the distinct values until
    each group has enough (the law of the result is invariant under relabelling the ranks, so
    the subset is uniform); groups that need more than half of their members choose the
    complement instead, so the rejection stays cheap.
    """
    sizes = sizes.astype(np.int64)
    need = need.astype(np.int64)
    flip = 2 * need > sizes
    want = np.where(flip, sizes - need, need)
    base = int(sizes.max(initial=0)) + 1
    keys = np.empty(0, dtype=np.int64)
    missing = want.copy()
    groups = np.arange(sizes.size, dtype=np.int64)
    while missing.any():
        g = np.repeat(groups, missing)
        r = src.integers(sizes[g])
        keys = np.unique(np.concatenate([keys, g * base + r]))
        missing = want - np.bincount(keys // base, minlength=sizes.size)
    if flip.any():
        fg = np.flatnonzero(flip)
        g_all = np.repeat(fg, sizes[fg])
        offsets = np.repeat(np.cumsum(sizes[fg]) - sizes[fg], sizes[fg])
        every = g_all * base + (np.arange(g_all.size, dtype=np.int64) - offsets)
        flipped_keys = keys[flip[keys // base]]
        keys = np.concatenate(
            [keys[~flip[keys // base]], np.setdiff1d(every, flipped_keys, assume_unique=True)]
        )
    return keys // base, keys % base


def choose_in_groups(
    groups: np.ndarray, need: np.ndarray, n_groups: int, src: RandomSource
) -> np.ndarray:
    """Boolean mask choosing ``need[g]`` members of each group ``g`` uniformly at random.

    ``groups`` holds each candidate's group id in ``[0, n_groups)``; ``need[g]`` must not exceed
    the group's size.

    >>> from sketchsyn.privacy.rng import as_source
    >>> mask = choose_in_groups(np.array([1, 0, 1, 1]), np.array([1, 2]), 2, as_source(0))
    >>> int(mask[[0, 2, 3]].sum()), bool(mask[1])
    (2, True)
    """
    mask = np.zeros(groups.size, dtype=bool)
    if not need.any():
        return mask
    sizes = np.bincount(groups, minlength=n_groups)
    order = np.argsort(groups.astype(_group_dtype(n_groups)), kind="stable")
    starts = np.cumsum(sizes) - sizes
    g, rank = _distinct_ranks(sizes, need, src)
    mask[order[starts[g] + rank]] = True
    return mask


def assign_within_groups(groups: np.ndarray, targets: np.ndarray, src: RandomSource) -> np.ndarray:
    """Values in ``[0, q)`` for each person: exactly ``targets[g, c]`` of group ``g`` get ``c``.

    ``targets`` is an int array ``(n_groups, q)`` whose row ``g`` sums to the number of people in
    group ``g``. Which people get which value is uniformly random given the counts.
    """
    n_groups, q = targets.shape
    out_dtype = np.uint8 if q <= 256 else np.uint16
    values = np.full(groups.size, q - 1, dtype=out_dtype)
    idx: np.ndarray | None = None  # people still without a value (None: everyone)
    g = np.asarray(groups)
    remaining = targets.sum(axis=1).astype(np.int64)
    for c in range(q - 1):
        if g.size == 0:
            break
        want = targets[:, c].astype(np.int64)
        # Coins with probability want/remaining at 32-bit resolution: a coin's exact law does
        # not matter, the fix-up below makes the counts exact and the subsets uniform.
        with np.errstate(invalid="ignore", divide="ignore"):
            prob = np.where(remaining > 0, want / np.maximum(remaining, 1), 0.0)
        threshold = np.minimum(np.floor(prob * 2.0**32), 2**32 - 1).astype(np.uint32)
        sel = src.uint32(g.size) < threshold[g]
        surplus = np.bincount(g[sel], minlength=n_groups) - want
        if (surplus > 0).any():
            drop = choose_in_groups(g[sel], np.maximum(surplus, 0), n_groups, src)
            sel[np.flatnonzero(sel)[drop]] = False
        if (surplus < 0).any():
            unsel = np.flatnonzero(~sel)
            add = choose_in_groups(g[unsel], np.maximum(-surplus, 0), n_groups, src)
            sel[unsel[add]] = True
        if idx is None:
            values[sel] = c
            if c < q - 2:
                idx = np.flatnonzero(~sel)
                g = g[idx]
        else:
            values[idx[sel]] = c
            if c < q - 2:
                idx = idx[~sel]
                g = g[~sel]
        remaining = remaining - want
    return values
