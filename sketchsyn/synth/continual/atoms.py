"""The atoms of a :class:`~sketchsyn.synth.continual.streaming_privtree.StreamingPrivTree`'s
partition: where each leaf's atoms are (:class:`_Layout`, a function of the public partition,
computed when needed rather than held) and the running sums over the atoms a step reads,
built in blocks (:func:`_running`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["_BLOCK", "_Layout", "_running"]

_BLOCK = 8192  # atoms per block of the running sums of a step


def _running(n: int, values: Any) -> np.ndarray:
    """``[0, v_0, v_0 + v_1, …]`` over ``n`` values given by block (``values(a, b)``: the
    float64 values ``a … b−1``), each sum added to the one before as ``np.cumsum`` adds them
    (every block's cumsum starts from the previous total), so the sums are the same numbers."""
    out = np.empty(n + 1)
    out[0] = 0.0
    for a in range(0, n, _BLOCK):
        b = min(a + _BLOCK, n)
        out[a + 1 : b + 1] = np.cumsum(np.concatenate([out[a : a + 1], values(a, b)]))[1:]
    return out


class _Layout:
    """Where each leaf's atoms are (a function of the public partition, computed when needed
    rather than held): ``r`` levels below the leaf, ``sizes = 2**r`` atoms from ``first``, the
    leaf's first code at depth ``D`` (``start``) and the code bits below an atom (``shift``;
    ``mask = 2**shift − 1``)."""

    __slots__ = ("first", "level", "mask", "r", "shift", "sizes", "start")

    def __init__(self, tree: Any) -> None:
        self.r = tree._atom_levels()
        self.level = tree._level.astype(np.int64)
        depth = tree._D - self.level
        self.sizes = np.left_shift(1, self.r)
        self.first = np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(np.int64)
        self.start = tree._prefix << depth.astype(np.uint64)
        self.shift = (depth - self.r).astype(np.uint64)
        self.mask = (np.uint64(1) << self.shift) - np.uint64(1)  # an atom's width less one

    def atom_of(self, codes: np.ndarray) -> np.ndarray:
        """The atom (index into the counters) of every level-``D`` code."""
        leaf = np.searchsorted(self.start, codes, side="right") - 1
        mask = (np.uint64(1) << self.r[leaf].astype(np.uint64)) - np.uint64(1)
        return self.first[leaf] + ((codes >> self.shift[leaf]) & mask).astype(np.int64)

    def before(self, x: np.ndarray) -> np.ndarray:
        """The atoms that start before each level-``D`` code ``x`` (the index of the first
        atom at or after it): those of the leaves before ``x``'s and ``ceil(offset / atom
        width)`` of its own (at most all of them: the leaves partition the codes)."""
        leaf = np.maximum(np.searchsorted(self.start, x, side="left") - 1, 0)  # x = 0: leaf 0
        ahead = (x - self.start[leaf] + self.mask[leaf]) >> self.shift[leaf]
        return self.first[leaf] + ahead.astype(np.int64)

    def leaf_of(self, a: np.ndarray) -> np.ndarray:
        """The leaf holding each atom ``a``."""
        return np.searchsorted(self.first, a, side="right") - 1

    def per_atom(self, values: np.ndarray) -> np.ndarray:
        """A value per leaf repeated at each of its atoms."""
        return np.repeat(values, self.sizes)

    def atom_level(self, a: np.ndarray) -> np.ndarray:
        """The level of atom ``a`` (the last atom's past the end)."""
        leaf = self.leaf_of(np.minimum(a, self.first[-1] + self.sizes[-1] - 1))
        return self.level[leaf] + self.r[leaf]
