"""The sketch bank of PrivHP: every level sketch's table in one array, counted in one pass.

PrivHP keeps the tables of its level sketches (levels ``L_c+1 … r``) in one contiguous
``(levels, j, w)`` int64 bank, and the exact counters of levels ``0 … L_c`` in one heap-ordered
array. :class:`LevelBank` turns a batch of Morton codes into the exact increments of both:
per cell where the level has few cells, hashing every item's prefix below that, with the levels
shared between two worker threads for large batches.

>>> import numpy as np
>>> from sketchsyn import Box, PrivHP
>>> php = PrivHP(Box.unit(2), 1.0, k=4, width=16, depth=8, raw=True, counter_depth=2)
>>> tree, bank = php._level_counts(np.arange(256, dtype=np.uint64))
>>> tree[:3].tolist(), bank.shape, int(bank[0].sum()) == 256 * php.sketch_depth
([256, 128, 128], (6, 3, 16), True)
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import numpy as np

from ..errors import InputError
from ..sketches.hashing import murmur3_32

__all__ = ["LevelBank"]

# Batches with at least this many rows are split over two threads.
_PARALLEL_MIN_ROWS = 16384
_POOL: ThreadPoolExecutor | None = None


def _call(job: Callable[[], None]) -> None:
    job()


def _pool() -> ThreadPoolExecutor:
    """A shared two-thread pool (created on first use; numpy releases the GIL in its loops)."""
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="sketchsyn")
    return _POOL


class LevelBank:
    """Mixin of :class:`~sketchsyn.synth.privhp.PrivHP`: the bank layout and exact counting.

    The host sets ``_sketches``, ``_sketch``, ``_width``, ``_sketch_depth``, ``_depth``,
    ``_L_c`` and ``_tree`` before calling :meth:`_bind_bank`, and ``_domain``, ``_raw``,
    ``_flushed``, ``_usage``, the diagnostics ``_n_seen``, ``_n_removed``, ``_n_dropped`` and a
    ``_check_open()`` method before counting rows (:meth:`_count_rows`).
    """

    _sketches: list
    _sketch: str
    _width: int
    _sketch_depth: int
    _depth: int
    _L_c: int
    _tree: np.ndarray
    _bank: np.ndarray
    _row_seeds: np.ndarray
    _sign_seeds: np.ndarray | None

    _domain: Any
    _raw: bool
    _flushed: bool
    _usage: Any
    _n_seen: int
    _n_removed: int
    _n_dropped: int
    _check_open: Callable[[], None]

    def _one_row(self, x: Any, method: str) -> np.ndarray:
        """One point ``x`` as a batch of one row, for ``update(x)`` and ``remove(x)``."""
        arr = np.asarray(x)
        d = self._domain.d
        if d == 1 and arr.ndim == 0:
            return arr.reshape(1)
        if arr.ndim == 1 and d > 1:
            return arr.reshape(1, -1)
        if arr.ndim == 1 and arr.shape[0] == 1:
            return arr
        raise InputError(
            f"{method}(x) takes one point of dimension {d}; got an array of shape "
            f"{arr.shape}. Use {method}_many for batches."
        )

    def _count_rows(self, X: Any, sign: int) -> None:
        """Add (``sign = 1``) or remove (``sign = −1``) the rows of ``X``, all or none.

        The batch is encoded and counted before any change, so a refused batch (a bad row, or a
        removal that a raw summary knows to be impossible) leaves the state as it was.
        """
        self._check_open()
        with self._usage.enter("PrivHP"):
            codes, dropped = self._domain.encode(X, self._depth, return_dropped=True)
            codes = np.asarray(codes, dtype=np.uint64)
            tree_counts, bank_counts = self._level_counts(codes)
            if sign > 0:
                self._tree += tree_counts
                self._bank += bank_counts
                self._n_seen += int(codes.size)
            else:
                if self._raw and not self._flushed:
                    self._check_removable(tree_counts)
                self._tree -= tree_counts
                self._bank -= bank_counts
                self._n_removed += int(codes.size)
            self._n_dropped += int(dropped)

    def _check_removable(self, tree_counts: np.ndarray) -> None:
        """Refuse a removal that would take an exact counter cell below zero.

        Only on a raw summary that holds its whole stream (never flushed): its counters are the
        exact counts, so a cell going negative proves that the batch removes rows never
        inserted. The check reads exact counts only (no noise), and it never fires on a valid
        stream, so on valid neighbouring streams the mechanism is unchanged.
        """
        bad = np.flatnonzero(self._tree < tree_counts)
        if bad.size:
            i = int(bad[0])
            level = (i + 1).bit_length() - 1
            raise InputError(
                f"X: {int(tree_counts[i])} rows of this removal fall in cell {i - 2**level + 1} "
                f"of level {level}, which holds {int(self._tree[i])}: rows never inserted "
                "cannot be removed (this raw summary knows its exact counts). The batch was "
                "refused; the state is unchanged."
            )

    def _bind_bank(self) -> None:
        """Put every sketch table in one contiguous (levels, j, w) bank for one-call updates."""
        n_levels = len(self._sketches)
        self._bank = np.zeros((n_levels, self._sketch_depth, self._width), dtype=np.int64)
        for i, sk in enumerate(self._sketches):
            self._bank[i] = sk._table
            sk._table = self._bank[i]
        fams = [sk._family for sk in self._sketches]
        shape = (n_levels, self._sketch_depth, 1)
        self._row_seeds = np.array([f.row_seeds for f in fams], dtype=np.uint32).reshape(shape)
        self._sign_seeds = (
            np.array([f.sign_seeds for f in fams], dtype=np.uint32).reshape(shape)
            if self._sketch == "count-sketch"
            else None
        )

    @property
    def _pow2_width(self) -> bool:
        """True when the width is a power of two ≥ 2 (buckets are then a shift of the hash)."""
        w = self._width
        return w > 1 and w & (w - 1) == 0

    def _level_counts(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Exact per-cell increments of the counters and of every sketch cell for ``codes``.

        Levels with at most ``n/2`` cells (``n`` = batch size) are counted per cell: one
        ``bincount`` at the deepest such level, every shallower level as sums of two children
        (the counters, heap layout, level ``l`` at offset ``2**l − 1``, and the sketch levels
        whose distinct prefixes are then hashed once each, weighted by their counts). Deeper
        sketch levels hash every item's prefix.
        """
        r, L, n = self._depth, self._L_c, codes.size
        n_sketch = len(self._sketches)
        # Deepest level counted per cell: at least L_c, at most r, and 2**level ≤ n/2.
        dense = max(L, min(r, max(n // 2, 1).bit_length() - 1))
        n_dense = dense - L  # sketch levels L_c+1 … dense are counted per cell
        bank_counts = np.empty_like(self._bank)
        tree_counts = np.empty_like(self._tree)

        def dense_part() -> None:
            cells = np.bincount((codes >> np.uint64(r - dense)).astype(np.intp), minlength=2**dense)
            for level in range(dense, -1, -1):
                if level <= L:
                    tree_counts[2**level - 1 : 2 ** (level + 1) - 1] = cells
                else:
                    keys = np.flatnonzero(cells)
                    bank_counts[level - L - 1] = self._sketch_cells(
                        level - L - 1, keys.astype(np.uint64), cells[keys]
                    )
                if level:
                    cells = cells.reshape(-1, 2).sum(axis=1)

        def sparse_level(i: int) -> None:
            prefix = codes >> np.uint64(r - (L + 1 + i))
            bank_counts[i] = self._sketch_cells(i, prefix, None)

        jobs = [dense_part] + [partial(sparse_level, i) for i in range(n_dense, n_sketch)]
        if n < _PARALLEL_MIN_ROWS or len(jobs) < 3:
            for job in jobs:
                job()
        else:
            # Two worker threads take the jobs in turn (the per-cell part, the longest, first);
            # each writes its own slices of the increments, so the result does not depend on
            # the order in which they finish.
            for _ in _pool().map(_call, jobs):
                pass
        return tree_counts, bank_counts

    def _sketch_cells(self, i: int, keys: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
        """Increments of sketch ``i`` (level ``L_c + 1 + i``) for ``keys`` (uint64 prefixes), each
        counted ``weights`` times (once when None); int64 of shape ``(j, w)``."""
        j, w = self._sketch_depth, self._width
        h = murmur3_32(keys[None, :], self._row_seeds[i])  # (j, keys)
        if self._pow2_width:
            # w = 2**b: the bucket (h·w) >> 32 is h >> (32 − b), in place on the uint32 hashes.
            h >>= np.uint32(32 - (w.bit_length() - 1))
            buckets = h
        else:
            buckets = ((h.astype(np.uint64) * np.uint64(w)) >> np.uint64(32)).astype(np.intp)
        if self._sign_seeds is not None:
            s = murmur3_32(keys[None, :], self._sign_seeds[i])
            signs = 1.0 - 2.0 * (s & np.uint32(1)).astype(np.float64)
            weights = signs if weights is None else signs * weights[None, :]
        elif weights is not None:
            weights = np.broadcast_to(weights.astype(np.float64), (j, keys.size))
        out = np.empty((j, w), dtype=np.int64)
        # One bincount per row keeps the working arrays at one row of the batch.
        for row in range(j):
            if weights is None:
                out[row] = np.bincount(buckets[row], minlength=w)
            else:
                # Weighted sums of at most n = batch-size items: integers below 2**53, exact.
                out[row] = np.rint(np.bincount(buckets[row], weights=weights[row], minlength=w))
        return out
