"""Every cell's sketch buckets of a level, kept once they cost no more than hashing did.

A sketch level counted per cell (:class:`~sketchsyn.synth.privhp.bank.LevelBank`: levels
with at most about two cells per batch row) hashes each batch's non-empty cells, one
MurmurHash3 per cell and sketch row: about eighteen whole-array passes. The buckets (and, for a
Count Sketch, the signs) of a cell are a fixed function of the cell, the width and the level's
public hash seeds, so the numpy path can look them up instead: a table of every cell of the
level, ``sketch_depth × 2**level`` entries, built by hashing each cell once
(``python benchmarks/bench_privhp.py`` prints ``update_many`` with and without the tables:
1.19–1.31 times the points per CPU-second with them on the plan of ``sketchsyn fit --memory
256KB`` for 10**8 rows).

The tables are the process's, found by the level's hash family and level: the summaries of
one job (its partitions, copies, snapshots and merges, which share their seeds) share them. A
table is built once the cells hashed for its key reach the level's number of cells (so the
hashing done with the tables, building included, is at most twice the least possible whatever
the stream: the rule of renting until the price of buying has been paid), only for levels of
at most ``2**MAX_LEVEL`` cells, and the tables of the process take at most ``MAX_BYTES``
(16-bit entries while the width allows: 3 MiB for three rows of levels up to 18), the least
recently used going first. They hold nothing of the data and are not part of any summary's
state or ``nbytes``. The increments are the hashing path's bit for bit: the same buckets, the
same integer sums.

>>> import numpy as np
>>> from sketchsyn.sketches.hashing import HashFamily
>>> family = HashFamily(width=16, depth=2, seed=7)  # one level's two sketch rows
>>> keys, weights = np.array([1, 3]), np.array([3, 2])
>>> level_counts(family, False, 2, keys, weights) is None  # 2 of the level's 4 cells hashed
True
>>> out = level_counts(family, False, 2, keys, weights)  # 4 of 4: built and used
>>> b = family.buckets(keys)
>>> bool((out[0] == np.bincount(b[0], weights=weights, minlength=16)).all())
True
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict

import numpy as np

from ...sketches.hashing import HashFamily

__all__ = ["MAX_BYTES", "MAX_LEVEL", "clear", "level_counts", "table_bytes"]

#: Levels with more cells than ``2**MAX_LEVEL`` keep hashing their cells.
MAX_LEVEL = 18
#: The tables of the process take at most this many bytes.
MAX_BYTES = 8 << 20
# Keys whose hashed cells are counted, at most (the oldest forgotten first).
_MAX_COUNTED = 4096

_Table = tuple[np.ndarray, "np.ndarray | None"]
_LOCK = threading.Lock()
_TABLES: OrderedDict[tuple, _Table] = OrderedDict()
_HASHED: OrderedDict[tuple, int] = OrderedDict()
_BYTES = 0  # of the tables in _TABLES


def _new_lock() -> None:
    """A fresh lock in a forked child (the parent's may have been held by another thread)."""
    global _LOCK
    _LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock)


def table_bytes() -> int:
    """Bytes of the process's bucket tables (no summary's state)."""
    return _BYTES


def clear() -> None:
    """Forget every table and every count of hashed cells."""
    global _BYTES
    with _LOCK:
        _TABLES.clear()
        _HASHED.clear()
        _BYTES = 0


def level_counts(
    family: HashFamily, signed: bool, level: int, keys: np.ndarray, weights: np.ndarray
) -> np.ndarray | None:
    """A sketch level's increments, shape ``(sketch_depth, width)`` int64, for its non-empty
    cells ``keys`` (ascending, below ``2**level``) counted ``weights`` times each, from the
    level's table; None while it has none: the caller hashes the cells, as before.

    ``family``: the level's hashes (:class:`~sketchsyn.sketches.hashing.HashFamily`: its
    buckets, and with ``signed`` (a Count Sketch) its signs)."""
    if level > MAX_LEVEL:
        return None
    key = (family, bool(signed), int(level))
    with _LOCK:
        table = _TABLES.get(key)
        if table is not None:
            _TABLES.move_to_end(key)
    if table is None:
        table = _build(key, family, bool(signed), int(level), int(keys.size))
        if table is None:
            return None
    buckets, negative = table
    width = family.width
    wf = np.asarray(weights, dtype=np.float64)
    idx = np.asarray(keys, dtype=np.intp)
    out = np.empty((buckets.shape[0], width), dtype=np.int64)
    for row in range(buckets.shape[0]):
        rw = wf if negative is None else np.where(negative[row].take(idx), -wf, wf)
        # Weighted sums of at most a batch of counts: integers below 2**53, exact.
        out[row] = np.rint(np.bincount(buckets[row].take(idx), weights=rw, minlength=width))
    return out


# Cells hashed per call while a table is built: the temporaries stay near a MiB.
_BUILD_BLOCK = 1 << 16


def _build(key: tuple, family: HashFamily, signed: bool, level: int, m: int) -> _Table | None:
    """The table of ``key`` once its cells hashed (with the ``m`` of this batch) reach the
    level's cells and it fits; else count the cells hashed and return None."""
    global _BYTES
    cells = 1 << level
    dtype = np.uint16 if family.width <= 1 << 16 else np.uint32
    size = family.depth * cells * (np.dtype(dtype).itemsize + signed)
    with _LOCK:
        hashed = _HASHED.pop(key, 0) + m
        if hashed < cells or size > MAX_BYTES:
            _HASHED[key] = hashed
            while len(_HASHED) > _MAX_COUNTED:
                _HASHED.popitem(last=False)
            return None
    # The family's own buckets and signs, a block of cells at a time.
    buckets = np.empty((family.depth, cells), dtype=dtype)
    negative = np.empty((family.depth, cells), dtype=bool) if signed else None
    for lo in range(0, cells, _BUILD_BLOCK):
        block = np.arange(lo, min(lo + _BUILD_BLOCK, cells), dtype=np.uint64)
        buckets[:, lo : lo + block.size] = family.buckets(block)
        if negative is not None:
            negative[:, lo : lo + block.size] = family.signs(block) < 0
    with _LOCK:
        if key in _TABLES:  # another thread built it meanwhile
            return _TABLES[key]
        while _TABLES and _BYTES + size > MAX_BYTES:  # the least recently used go first
            _, (b, s) = _TABLES.popitem(last=False)
            _BYTES -= b.nbytes + (0 if s is None else s.nbytes)
        _TABLES[key] = (buckets, negative)
        _BYTES += size
    return buckets, negative
