"""The sketch bank of PrivHP: every level sketch's table in one array, counted in one pass.

PrivHP keeps the tables of its level sketches (levels ``L_c+1 … r``) in one contiguous
``(levels, j, w)`` int64 bank, and the exact counters of levels ``0 … L_c`` in one heap-ordered
array. :class:`LevelBank` turns a batch of Morton codes into the exact increments of both:
per cell where the level has at most about two cells per row of the batch (then each distinct
prefix is hashed once, weighted by its count, or on the numpy path looked up in the level's
bucket table: :mod:`~sketchsyn.synth.privhp.buckets`), hashing every item's prefix below that,
with the levels shared between two worker threads for large batches. The working arrays are
reused from batch to batch (fresh memory costs page faults that take longer than the
arithmetic).

Two paths compute the same increments: numpy's whole-array passes (the reference, always
there) and the compiled loops built with the package (:mod:`sketchsyn.kernels`) for batches of
at least ``MIN_ROWS`` rows, which also encode a Box's rows. Every increment is an integer sum,
so the state is the same bit for bit.

>>> import numpy as np
>>> from sketchsyn import Box, PrivHP
>>> php = PrivHP(Box.unit(2), 1.0, k=4, width=16, depth=8, raw=True, counter_depth=2)
>>> tree, bank = php._level_counts(np.arange(256, dtype=np.uint64))
>>> tree[:3].tolist(), bank.shape, int(bank[0].sum()) == 256 * php.sketch_depth
([256, 128, 128], (6, 3, 16), True)
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import numpy as np

from ... import kernels
from ...domains import Box
from ...errors import InputError
from ...io.stream import one_row
from ...kernels.morton import MIN_ROWS, encode_box
from ...sketches.hashing import murmur3_32
from . import buckets

__all__ = ["LevelBank", "one_thread"]

_U32 = np.uint32
# Batches with at least this many rows are split over two threads (when _THREADS is true).
_PARALLEL_MIN_ROWS = 16384
_THREADS = True
# Levels with at most this many cells per batch row are counted per cell, then hashed once per
# distinct prefix (bincount passes over 2**level cells cost far less than hashing a row).
_DENSE_CELLS_PER_ROW = 2
# ... and at most 2**_DENSE_MAX_LEVEL cells (64 MiB of int64 counts) whatever the batch size.
_DENSE_MAX_LEVEL = 23
# Scratch arrays above this size are not kept between calls (at most three are kept per
# thread by the numpy path: 15 MiB for 262,144-row batches and 3 sketch rows; five by the
# kernels: the codes, axis indices, per-cell counts and the non-empty cells, 9 MiB then).
_SCRATCH_MAX_BYTES = 16 << 20
# The compiled kernels count levels per cell up to this level at most (a heap of 2**(level+1)
# int64 counts: 64 MiB), and where the level has at most _KERNEL_CELLS_PER_ROW cells per row.
_KERNEL_MAX_LEVEL = 22
_KERNEL_CELLS_PER_ROW = 2
_POOL: ThreadPoolExecutor | None = None
_LOCAL = threading.local()


class _Scratch:
    """Per-thread scratch arrays reused from batch to batch.

    Fresh memory of a few MB costs page faults on first touch that take longer than the
    arithmetic done on it; the working arrays of :meth:`LevelBank._sketch_cells` are therefore
    kept (per thread, up to ``_SCRATCH_MAX_BYTES`` each) and never leave the method.
    """

    def __init__(self) -> None:
        self._bufs: dict[str, np.ndarray] = {}
        self._zero: set[str] = set()  # names whose whole buffer is known to hold zeros

    def get(self, name: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        size = int(np.prod(shape))
        buf = self._bufs.get(name)
        if buf is None or buf.dtype != dtype or buf.size < size:
            buf = np.empty(size, dtype=dtype)
            if buf.nbytes <= _SCRATCH_MAX_BYTES:
                self._bufs[name] = buf
        self._zero.discard(name)
        return buf[:size].reshape(shape)

    def zeros(self, name: str, size: int) -> np.ndarray:
        """An int64 buffer of ``size`` zeros: a kept one that its last user left all zero
        (:meth:`cleared`) is not written again; otherwise the whole kept buffer is zeroed, so
        that a later, larger request finds zeros past this one's end too."""
        old = self._bufs.get(name)
        clean = name in self._zero and old is not None and old.size >= size
        buf = self.get(name, (size,), np.int64)
        if not clean:
            buf[...] = 0
            kept = self._bufs.get(name)
            if kept is not None:
                kept[...] = 0
        return buf

    def cleared(self, name: str) -> None:
        """The user of :meth:`zeros` ``name`` put every cell it wrote back to zero."""
        if name in self._bufs:
            self._zero.add(name)


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Count every batch of this thread on this thread alone (no second worker thread) while
    the block runs: for processes that already keep every core busy (Dask workers, one per
    core). The counts are the same either way.

    >>> with one_thread():
    ...     pass
    """
    with kernels.thread_flag(_LOCAL, "one_thread"):
        yield


def _scratch() -> _Scratch:
    scratch = getattr(_LOCAL, "scratch", None)
    if scratch is None:
        scratch = _LOCAL.scratch = _Scratch()
    return scratch


def _call(job: Callable[[], None]) -> None:
    job()


def _single_thread() -> bool:
    return not _THREADS or getattr(_LOCAL, "one_thread", False)


def _run(jobs: list[Callable[[], None]], n: int) -> None:
    """Run the jobs of one batch of ``n`` rows: on two worker threads for large batches (each
    job writes its own level of the increments, so the result does not depend on the order in
    which they finish), else in turn on this thread."""
    if _single_thread() or n < _PARALLEL_MIN_ROWS or len(jobs) < 2:
        for job in jobs:
            job()
    else:
        for _ in _pool().map(_call, jobs):
            pass


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
    ``_flushed``, ``_usage``, the diagnostics ``_n_seen``, ``_n_removed``, ``_n_dropped``,
    ``_adjusted`` (a table's values changed or dropped by a policy, per column) and a
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
    _adjusted: dict[str, int]
    _check_open: Callable[[], None]
    _unit_split: Callable[..., tuple[Any, Any]]
    _unit_admit: Callable[..., np.ndarray]

    def _one_row(self, x: Any, method: str) -> np.ndarray:
        """One point ``x`` as a batch of one row, for ``update(x)`` and ``remove(x)``."""
        return one_row(x, self._domain.d, method)

    def _count_rows(self, X: Any, sign: int, units: Any = None) -> None:
        """Add (``sign = 1``) or remove (``sign = −1``) the rows of ``X``, all or none.

        The batch is encoded and counted before any change, so a refused batch (a bad row, or a
        removal that a raw summary knows to be impossible) leaves the state as it was. With a
        privacy unit (the host's ``_unit_split`` and ``_unit_admit``), the unit ids are checked
        with the rows, then the contribution bounder keeps at most ``max_rows`` rows of each
        unit: only those are counted.
        """
        self._check_open()
        with self._usage.enter("PrivHP"):
            adjusted: dict[str, int] = {}
            X, keys = self._unit_split(X, units, "PrivHP")
            codes, dropped = self._encode(X, adjusted)
            if keys is not None:  # everything is checked: the bounder's state may change
                kept = self._domain.kept(X) if dropped else None
                if (keys.size if kept is None else int(kept.sum())) != codes.size or (
                    kept is not None and kept.size != keys.size
                ):
                    raise InputError(f"units has {keys.size} ids for the rows of X")
                codes = codes[self._unit_admit(keys, kept)]
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
            for key, n in adjusted.items():
                self._adjusted[key] = self._adjusted.get(key, 0) + n

    def _encode(self, X: Any, adjusted: dict[str, int]) -> tuple[np.ndarray, int]:
        """The batch's Morton codes and the number of rows dropped: the domain's ``encode``,
        or for a large batch inside a :class:`~sketchsyn.domains.Box` the same codes from one
        compiled loop (:func:`~sketchsyn.kernels.morton.encode_box`)."""
        codes = self._encode_box(X)
        if codes is not None:
            return codes, 0
        codes, dropped = self._domain.encode(X, self._depth, return_dropped=True, adjusted=adjusted)
        return np.asarray(codes, dtype=np.uint64), int(dropped)

    def _encode_box(self, X: Any) -> np.ndarray | None:
        """The codes of a large batch of rows inside a :class:`~sketchsyn.domains.Box` from one
        compiled loop (in this thread's scratch memory: valid until its next batch), or None
        where that path does not apply (then the domain's ``encode`` decides)."""
        if self._box_batch(X):
            return encode_box(self._domain, X, self._depth, _scratch().get)
        return None

    def _box_batch(self, X: Any) -> bool:
        """A batch the compiled Box passes take: an array of at least ``MIN_ROWS`` rows of a
        :class:`~sketchsyn.domains.Box`, with the extension on."""
        return (
            type(self._domain) is Box
            and isinstance(X, np.ndarray)
            and X.ndim == 2
            and X.shape[0] >= MIN_ROWS
            and kernels.enabled()
        )

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

        Levels with at most ``_DENSE_CELLS_PER_ROW · n`` cells (``n`` = batch size) are counted
        per cell: one ``bincount`` at the deepest such level, every shallower level as sums of
        two children (the counters, heap layout, level ``l`` at offset ``2**l − 1``, and the
        sketch levels whose distinct prefixes are then hashed once each, weighted by their
        counts). Deeper sketch levels hash every item's prefix.
        """
        r, L, n = self._depth, self._L_c, codes.size
        if n >= MIN_ROWS and kernels.enabled():
            return self._kernel_counts(codes)
        n_sketch = len(self._sketches)
        # Deepest level counted per cell: at least L_c, at most r, and 2**level ≤ n·ratio (and
        # ≤ 2**_DENSE_MAX_LEVEL, whatever the batch).
        reach = max(min(int(n * _DENSE_CELLS_PER_ROW), 1 << _DENSE_MAX_LEVEL), 1).bit_length() - 1
        dense = max(L, min(r, reach))
        n_dense = dense - L  # sketch levels L_c+1 … dense are counted per cell
        bank_counts = np.empty_like(self._bank)
        tree_counts = np.empty_like(self._tree)
        # Per-cell counts of the dense levels, deepest first: (level, keys, weights) of the
        # sketch levels, hashed afterwards (by one or two threads).
        dense_jobs: list[Callable[[], None]] = []

        def dense_part() -> None:
            shift = r - dense
            # Prefixes < 2**dense ≤ 2**62: their int64 view is the same numbers (no cast).
            top = (codes >> np.uint64(shift)) if shift else codes
            cells = np.bincount(top.view(np.int64), minlength=1 << dense)
            for level in range(dense, -1, -1):
                if level <= L:
                    tree_counts[2**level - 1 : 2 ** (level + 1) - 1] = cells
                else:
                    # nonzero of a boolean mask: several times faster than of the int64 cells
                    keys = np.nonzero(cells != 0)[0]
                    job = partial(self._dense_level, bank_counts, level - L - 1, keys, cells[keys])
                    dense_jobs.append(job)
                if level:
                    cells = np.add(cells[0::2], cells[1::2])

        def sparse_level(i: int) -> None:
            prefix = codes >> np.uint64(r - (L + 1 + i))
            bank_counts[i] = self._sketch_cells(i, prefix, None)

        dense_part()
        # The biggest jobs first: the per-row levels (deepest first), then the per-cell ones.
        sparse = [partial(sparse_level, i) for i in range(n_sketch - 1, n_dense - 1, -1)]
        jobs = sparse + dense_jobs
        _run(jobs, n)
        return tree_counts, bank_counts

    def _kernel_counts(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_level_counts` by the compiled kernels (:mod:`sketchsyn.kernels._privhp`):
        the same increments, integer sums in another order.

        One loop counts the codes per cell at the deepest per-cell level and one more lists its
        non-empty cells; the counters' increments come from that list, and each per-cell sketch
        level hashes its own non-empty cells (the list, merged into parents level by level)
        once each, weighted by their counts. Below the per-cell levels every item's prefix is
        hashed. The per-item levels are a job each, the per-cell ones one job.
        """
        n = codes.size
        codes = np.ascontiguousarray(codes)  # the layout the kernels were compiled for
        dense = self._kernel_dense(n)
        scratch = _scratch()
        counts = scratch.zeros("cells", 1 << dense)
        kernels.privhp.histogram(codes, np.uint64(self._depth - dense), counts)
        bank_counts = np.empty_like(self._bank)
        hashing = self._kernel_seeds()
        jobs = self._item_jobs(codes, dense, bank_counts, hashing)
        tree_counts, cell_job = self._cell_counts(counts, dense, n, bank_counts, hashing)
        scratch.cleared("cells")  # (the listing put every cell back to zero)
        if cell_job is not None:
            jobs.append(cell_job)
        _run(jobs, n)
        return tree_counts, bank_counts

    def _kernel_dense(self, n: int) -> int:
        """The deepest level the compiled path counts per cell for a batch of ``n`` rows: at
        least ``L_c``, at most ``r``, with at most ``_KERNEL_CELLS_PER_ROW`` cells per row."""
        reach = max(min(int(n * _KERNEL_CELLS_PER_ROW), 1 << _KERNEL_MAX_LEVEL), 1).bit_length() - 1
        return max(self._L_c, min(self._depth, reach))

    def _kernel_seeds(self) -> tuple[np.ndarray, np.ndarray, np.uint64, np.uint32]:
        """The sketches' hash seeds, sign seeds (no columns: Count-Min), width and bucket
        shift as the compiled kernels take them."""
        seeds = np.ascontiguousarray(self._row_seeds.reshape(self._row_seeds.shape[:2]))
        signs = (
            np.zeros((seeds.shape[0], 0), dtype=np.uint32)
            if self._sign_seeds is None
            else np.ascontiguousarray(self._sign_seeds.reshape(seeds.shape))
        )
        w = self._width
        return seeds, signs, np.uint64(w), np.uint32(33 - w.bit_length() if self._pow2_width else 0)

    def _item_jobs(
        self, codes: np.ndarray, dense: int, bank_counts: np.ndarray, hashing: tuple
    ) -> list[Callable[[], None]]:
        """Jobs that hash every item's prefix into ``bank_counts`` at the sketch levels below
        ``dense`` (deepest first: the biggest jobs first); ``hashing``: :meth:`_kernel_seeds`."""
        r, L = self._depth, self._L_c
        seeds, signs, width, bshift = hashing
        jobs: list[Callable[[], None]] = []
        for i in range(len(self._sketches) - 1, dense - L - 1, -1):
            level = L + 1 + i
            args = (codes, np.uint64(r - level), level > 32, seeds[i], signs[i], width, bshift)
            jobs.append(partial(kernels.privhp.hash_items, *args, bank_counts[i]))
        return jobs

    def _cell_counts(
        self,
        counts: np.ndarray,
        dense: int,
        rows: int,
        bank_counts: np.ndarray,
        hashing: tuple,
    ) -> tuple[np.ndarray, Callable[[], None] | None]:
        """The counters' increments from ``counts`` (per cell of level ``dense``, from
        ``rows`` rows; left all zero), and the job that writes the per-cell sketch levels'
        increments into ``bank_counts`` (None when no sketch level is counted per cell);
        ``hashing``: :meth:`_kernel_seeds`."""
        L = self._L_c
        scratch = _scratch()
        size = min(counts.size, rows) + 1
        keys = scratch.get("keys", (size,), np.uint32)
        weights = scratch.get("weights", (size,), np.int64)
        m = kernels.privhp.nonzero(counts, keys, weights)  # and puts the counts back to zero
        tree_counts = np.empty_like(self._tree)
        kernels.privhp.tree_counts(keys, weights, m, dense - L, L, tree_counts)
        n_dense = dense - L
        if not n_dense:
            return tree_counts, None
        # The per-cell levels (sketches 0 … n_dense − 1) in one job, which merges the cells
        # into parents in place (split over two threads, both jobs merged every level: more
        # CPU than the second thread saved).
        seeds, signs, width, bshift = hashing
        args = (keys, weights, m, n_dense, seeds, signs, width, bshift, bank_counts)
        return tree_counts, partial(kernels.privhp.hash_levels, *args)

    def _dense_level(
        self, bank_counts: np.ndarray, i: int, keys: np.ndarray, weights: np.ndarray
    ) -> None:
        """Sketch ``i``'s increments from its distinct prefixes ``keys`` and their counts: looked
        up in the level's bucket table once it has one (:mod:`~sketchsyn.synth.privhp.buckets`),
        else hashed."""
        family, signed = self._sketches[i]._family, self._sign_seeds is not None
        out = buckets.level_counts(family, signed, self._L_c + 1 + i, keys, weights)
        bank_counts[i] = (
            out if out is not None else self._sketch_cells(i, keys.view(np.uint64), weights)
        )

    def _sketch_cells(self, i: int, keys: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
        """Increments of sketch ``i`` (level ``L_c + 1 + i``) for ``keys`` (uint64 prefixes), each
        counted ``weights`` times (once when None); int64 of shape ``(j, w)``."""
        j, w = self._sketch_depth, self._width
        m = keys.size
        out = np.empty((j, w), dtype=np.int64)
        if m == 0:
            out[...] = 0
            return out
        scratch = _scratch()
        h = murmur3_32(keys[None, :], self._row_seeds[i], out=scratch.get("h", (j, m), _U32))
        # Buckets as int64 (what bincount counts, no cast inside it), in one pass from the hashes.
        b = scratch.get("b", (j, m), np.int64)
        if self._pow2_width:
            # w = 2**b: the bucket (h·w) >> 32 is h >> (32 − b).
            np.right_shift(h, _U32(32 - (w.bit_length() - 1)), out=b)
        else:
            # h·w < 2**32 · 2**31: exact in int64.
            np.multiply(h, np.int64(w), out=b)
            b >>= np.int64(32)
        row_weights: Any = None
        if self._sign_seeds is not None:
            s = murmur3_32(keys[None, :], self._sign_seeds[i], out=h)  # h is no longer needed
            s &= _U32(1)
            sw = scratch.get("sw", (j, m), np.float64)
            np.multiply(s, -2.0, out=sw)
            sw += 1.0  # the sign, ±1
            if weights is not None:
                sw *= weights
            row_weights = sw
        elif weights is not None:
            wf = weights.astype(np.float64)
            row_weights = [wf] * j
        # One bincount per row keeps the working arrays at one row of the batch.
        for row in range(j):
            if row_weights is None:
                out[row] = np.bincount(b[row], minlength=w)
            else:
                # Weighted sums of at most n = batch-size items: integers below 2**53, exact.
                out[row] = np.rint(np.bincount(b[row], weights=row_weights[row], minlength=w))
        return out
