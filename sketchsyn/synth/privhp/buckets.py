"""Every cell's sketch buckets of a level, kept once they cost no more than hashing did.

A sketch level counted per cell (:class:`~sketchsyn.synth.privhp.bank.LevelBank`: levels
with at most about two cells per batch row) hashes each batch's non-empty cells, one
MurmurHash3 per cell and sketch row: about eighteen whole-array passes. The buckets (and, for a
Count Sketch, the signs) of a cell are a fixed function of the cell and of the level's public
hash seeds, so the numpy path can look them up instead: a table of every cell of the level,
``sketch_depth × 2**level`` entries, built by hashing each cell once. A lookup and the weighted
``bincount`` cost about a third of hashing and bucketing the same cells
(``python benchmarks/bench_privhp.py`` prints ``update_many`` with and without the tables).

A level's table is built when the cells its batches have hashed reach the level's number of
cells (so the hashing done with the tables, building included, is at most twice the least
possible whatever the stream: the rule of renting until the price of buying has been paid),
and only for levels of at most ``2**MAX_LEVEL`` cells, within ``MAX_BYTES`` for the whole
summary (16-bit entries while the width allows: 3 MiB for three rows of levels up to 18).
The tables hold no data of the stream and are not part of the summary's state or
``nbytes``; a copy or a loaded summary builds its own. The increments are the hashing path's
bit for bit: the same buckets, the same integer sums.

>>> import numpy as np
>>> from sketchsyn.sketches.hashing import murmur3_32
>>> seeds = np.array([[[7], [8]]], dtype=np.uint32)  # one level, two sketch rows
>>> tables = BucketTables(seeds, None, width=16)
>>> keys, weights = np.array([1, 3]), np.array([3, 2])
>>> tables.counts(0, 2, keys, weights) is None  # 2 cells hashed of the level's 4: not yet
True
>>> out = tables.counts(0, 2, keys, weights)  # 4 of 4: the table is built and used
>>> b = (murmur3_32(keys[None, :].astype(np.uint64), seeds[0]).astype(np.int64) * 16) >> 32
>>> bool((out[0] == np.bincount(b[0], weights=weights, minlength=16)).all())
True
"""

from __future__ import annotations

import threading

import numpy as np

from ...sketches.hashing import murmur3_32

__all__ = ["BucketTables"]

#: Levels with more cells than ``2**MAX_LEVEL`` keep hashing their cells.
MAX_LEVEL = 18
#: The tables of one summary take at most this many bytes.
MAX_BYTES = 8 << 20


class BucketTables:
    """The bucket (and sign) of every cell of each cacheable sketch level, per sketch row.

    ``row_seeds`` and ``sign_seeds`` (None for Count-Min): the bank's seeds, shape
    ``(levels, sketch_depth, 1)``; ``width``: the sketches' width. Sketch ``i`` is level
    ``level`` of the tree (``L_c + 1 + i``).
    """

    def __init__(self, row_seeds: np.ndarray, sign_seeds: np.ndarray | None, width: int) -> None:
        self._row_seeds = row_seeds
        self._sign_seeds = sign_seeds
        self._width = int(width)
        self._dtype = np.uint16 if self._width <= 1 << 16 else np.uint32
        self._hashed = [0] * row_seeds.shape[0]  # cells hashed so far, per sketch
        self._tables: dict[int, tuple[np.ndarray, np.ndarray | None]] = {}
        self._bytes = 0
        self._lock = threading.Lock()  # two worker threads may build two levels at once

    @property
    def nbytes(self) -> int:
        """Bytes of the tables built so far (not part of the summary's state)."""
        return self._bytes

    def counts(
        self, i: int, level: int, keys: np.ndarray, weights: np.ndarray
    ) -> np.ndarray | None:
        """Sketch ``i``'s increments, shape ``(sketch_depth, width)`` int64, for its non-empty
        cells ``keys`` (ascending, below ``2**level``) counted ``weights`` times each; None when
        the level has no table (yet): the caller hashes the cells, as before."""
        table = self._tables.get(i)
        if table is None:
            table = self._build(i, level, keys.size)
            if table is None:
                return None
        buckets, signs = table
        wf = np.asarray(weights, dtype=np.float64)
        idx = np.asarray(keys, dtype=np.intp)
        j = buckets.shape[0]
        out = np.empty((j, self._width), dtype=np.int64)
        for row in range(j):
            rw = wf if signs is None else np.where(signs[row].take(idx), -wf, wf)
            # Weighted sums of at most a batch of counts: integers below 2**53, exact.
            out[row] = np.rint(
                np.bincount(buckets[row].take(idx), weights=rw, minlength=self._width)
            )
        return out

    def _build(self, i: int, level: int, m: int) -> tuple[np.ndarray, np.ndarray | None] | None:
        """Sketch ``i``'s table once its cells hashed (with the ``m`` of this batch) reach the
        level's cells, if it is small enough; else count the cells hashed and return None."""
        cells = 1 << level
        with self._lock:
            return self._build_locked(i, level, m, cells)

    def _build_locked(
        self, i: int, level: int, m: int, cells: int
    ) -> tuple[np.ndarray, np.ndarray | None] | None:
        self._hashed[i] += m
        j = self._row_seeds.shape[1]
        size = j * cells * (np.dtype(self._dtype).itemsize + (self._sign_seeds is not None))
        if self._hashed[i] < cells or level > MAX_LEVEL or self._bytes + size > MAX_BYTES:
            return None
        keys = np.arange(cells, dtype=np.uint64)[None, :]
        h = murmur3_32(keys, self._row_seeds[i])
        # The bucket (h·w) >> 32, as the hashing path computes it (exact in uint64).
        buckets = ((h.astype(np.uint64) * np.uint64(self._width)) >> np.uint64(32)).astype(
            self._dtype
        )
        signs = None
        if self._sign_seeds is not None:  # True: the sign −1 (the hash's low bit set)
            signs = (murmur3_32(keys, self._sign_seeds[i]) & np.uint32(1)).astype(bool)
        self._tables[i] = (buckets, signs)
        self._bytes += size
        return buckets, signs
