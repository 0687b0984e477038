"""Optional compiled kernels of PrivHP's ingest (the ``fast`` extra: numba).

:class:`~sketchsyn.synth.privhp.bank.LevelBank` turns a batch into the exact increments of
PrivHP's counters and sketch tables. Its numpy path (the reference) works in whole-array
passes: about a dozen to encode a Box's rows, a ``bincount`` per level, a mask and a gather of
the non-empty cells, about eighteen passes of MurmurHash3 and a ``bincount`` per sketch row.
The kernels do the same arithmetic in a few loops:

* :func:`encode_box`: a Box's Morton codes in a pass per axis (each read as a column, in
  place: a column-major batch, as the file readers give, is not copied) and one for the
  interleave, for batches that lie inside the box (any other batch is left to the domain's
  ``encode``);
* :func:`histogram` and :func:`nonzero`: the counts per cell of the deepest level counted per
  cell, and its non-empty cells in order; :func:`tree_counts`: the counters' increments;
* :func:`hash_levels`: each per-cell sketch level's non-empty cells (the list above, merged
  into parents level by level) hashed once each and added to their buckets weighted by their
  counts; :func:`hash_items`: every item's prefix on the deeper levels.

The hashes are computed in blocks of 2,048 keys in 32-bit lanes, in loops LLVM vectorises (a
key's hash costs under a nanosecond), and added to the buckets in a loop of their own. Every
increment is an integer sum, so the state is the numpy path's bit for bit whatever the order of
the additions (``tests/test_privhp_kernels.py`` compares both paths). The kernels release the
GIL: PrivHP's two worker threads run them as they run the numpy jobs.

Install with ``pip install "sketchsyn[fast]"`` (numba). Without numba, with the environment
variable ``SKETCHSYN_KERNELS=numpy``, or inside :func:`numpy_only`, PrivHP uses the numpy path.
:mod:`sketchsyn.accel` starts the kernels (this module's ``ready``, ``enabled``, ``numpy_only``,
``AVAILABLE`` and ``START_ROWS`` are its): numba is not imported with sketchsyn, and the
kernels start once a process has counted ``START_ROWS`` rows (2**24) in batches of
``MIN_ROWS`` rows or more, while PrivHP goes on counting with the numpy path; smaller batches
and shorter jobs never start them (the start would cost more than they save);
``SKETCHSYN_KERNELS=eager`` starts them at the first large batch.

>>> import numpy as np
>>> from sketchsyn import Box
>>> X = np.random.default_rng(0).random((5000, 2))
>>> codes = encode_box(Box.unit(2), X, 16) if ready(wait=True) else Box.unit(2).encode(X, 16)
>>> bool((codes == Box.unit(2).encode(X, 16)).all())
True
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...accel import AVAILABLE, START_ROWS, enabled, numpy_only, ready, register, thread_flag
from ...domains.morton import _SPREAD2, _SPREAD3

__all__ = [
    "AVAILABLE",
    "MIN_ROWS",
    "START_ROWS",
    "encode_box",
    "enabled",
    "hash_items",
    "hash_levels",
    "histogram",
    "nonzero",
    "numpy_only",
    "ready",
    "thread_flag",
    "tree_counts",
]

#: Batches with fewer rows take the numpy path and never start the kernels.
MIN_ROWS = 4096
_TINY = float(np.finfo(np.float64).tiny)

_U32 = np.uint32
# Constants typed uint32 so that numba keeps the hash in 32-bit lanes (a Python int beside them
# would widen it), which LLVM turns into SIMD code: one hash costs well under a nanosecond.
_C1, _C2 = _U32(0xCC9E2D51), _U32(0x1B873593)
_N, _F1, _F2 = _U32(0xE6546B64), _U32(0x85EBCA6B), _U32(0xC2B2AE35)
_R = {v: _U32(v) for v in (1, 5, 8, 13, 15, 16, 17, 19)}
_R1, _R5, _R8, _R13, _R15, _R16, _R17, _R19 = _R.values()
_LOW, _HIGH = np.uint64(0xFFFFFFFF), np.uint64(32)
# Keys hashed per block: the block's keys, weights and buckets stay in the L1 cache.
_BLOCK = 2048


# The kernels in the order they are compiled (callees first).
_KERNELS = (
    "_rotl13", "_mix", "_hashes", "_flush", "_scratch", "histogram", "nonzero", "_parents",
    "tree_counts", "hash_levels", "hash_items", "_spread2", "_spread3", "_quantise", "morton",
)  # fmt: skip


def _warm_up() -> None:
    """One call of each public kernel with the argument types of PrivHP's calls."""
    from ...domains import Box

    codes = np.arange(64, dtype=np.uint64)
    counts = np.zeros(64, dtype=np.int64)
    histogram(codes, np.uint64(0), counts)
    keys, weights = np.empty(65, dtype=np.uint32), np.empty(65, dtype=np.int64)
    m = nonzero(counts, keys, weights)
    tree_counts(keys, weights, m, 1, 5, np.empty(63, dtype=np.int64))
    seeds, signs = np.ones((2, 3), dtype=np.uint32), np.ones((2, 3), dtype=np.uint32)
    out = np.empty((2, 3, 5), dtype=np.int64)
    width, shift = np.uint64(5), np.uint32(0)
    hash_levels(keys, weights, m, 2, seeds, signs, width, shift, out)
    hash_items(codes, np.uint64(0), False, seeds[0], signs[0], width, shift, out[0])
    for depth in (4, 64):  # axis indices in int32 and int64
        for order in "CF":  # a batch of rows, or of columns (the file readers' batches)
            for writeable in (True, False):  # a caller's read-only batch is read in place
                batch = np.full((3, 2), 0.5, order=order)
                batch.flags.writeable = writeable
                encode_box(Box.unit(2), batch, depth)


def _rotl13(x: Any) -> Any:
    return _U32((x << _R13) | (x >> _R19))


def _mix(k: Any) -> Any:
    """``rotl(mix(k), 13)``: a 4-byte block's share of its round (independent of the seed)."""
    k = _U32(k * _C1)
    k = _U32((k << _R15) | (k >> _R17))
    return _rotl13(_U32(k * _C2))


def _hashes(low: Any, high: Any, m: Any, seed: Any, out: Any) -> None:
    """``out[i]`` = MurmurHash3 x86_32 of the 8-byte key whose 4-byte halves, mixed by
    :func:`_mix` (the same for every seed), are ``low[i]`` and ``high[i]`` (``high`` empty:
    keys below 2**32, whose high half mixes to 0), ``i < m``:
    :func:`sketchsyn.sketches.hashing.murmur3_32`, in a loop LLVM vectorises."""
    rs = _rotl13(_U32(seed))
    if high.size:
        for i in range(m):
            h = _U32(_U32(_U32(rs ^ low[i]) * _R5) + _N)
            out[i] = _U32(_U32(_U32(_rotl13(h) ^ high[i]) * _R5) + _N)
    else:
        for i in range(m):
            h = _U32(_U32(_U32(rs ^ low[i]) * _R5) + _N)
            out[i] = _U32(_U32(_rotl13(h) * _R5) + _N)
    for i in range(m):
        h = _U32(out[i] ^ _R8)
        h = _U32(h ^ (h >> _R16))
        h = _U32(h * _F1)
        h = _U32(h ^ (h >> _R13))
        h = _U32(h * _F2)
        out[i] = _U32(h ^ (h >> _R16))


def _flush(low: Any, high: Any, weights: Any, m: Any, seeds: Any, signs: Any, width: Any,
           shift: Any, out: Any, buckets: Any, flips: Any, mixed: Any) -> None:  # fmt: skip
    """Add ``weights[i]`` (negated where a Count Sketch's sign hash is odd) to the bucket of
    key ``i`` (halves ``low[i]``, ``high[i]``) in every row of ``out``, for ``i < m``: the
    halves mixed once into ``mixed`` (``(2, block)`` scratch; the mixing does not depend on
    the seed), then each row's hashes and buckets in loops of their own (SIMD), then the
    additions."""
    mlow, mhigh = mixed[0], mixed[1, : high.size]
    for i in range(m):
        mlow[i] = _mix(low[i])
    for i in range(min(m, high.size)):
        mhigh[i] = _mix(high[i])
    for row in range(seeds.size):
        _hashes(mlow, mhigh, m, seeds[row], buckets)
        if shift:
            for i in range(m):
                buckets[i] = buckets[i] >> shift
        else:
            for i in range(m):
                buckets[i] = _U32((np.uint64(buckets[i]) * width) >> _HIGH)
        if signs.size:
            _hashes(mlow, mhigh, m, signs[row], flips)
            for i in range(m):
                if flips[i] & _R1:
                    out[row, buckets[i]] -= weights[i]
                else:
                    out[row, buckets[i]] += weights[i]
        else:
            for i in range(m):
                out[row, buckets[i]] += weights[i]


def _scratch(wide: Any) -> Any:
    """One block's keys (low and, for ``wide`` keys of 2**32 or more, high halves), weights,
    buckets, sign hashes and mixed halves."""
    low = np.empty(_BLOCK, dtype=np.uint32)
    high = np.empty(_BLOCK if wide else 0, dtype=np.uint32)
    weights = np.ones(_BLOCK, dtype=np.int64)
    buckets, flips = np.empty(_BLOCK, dtype=np.uint32), np.empty(_BLOCK, np.uint32)
    return low, high, weights, buckets, flips, np.empty((2, _BLOCK), dtype=np.uint32)


def histogram(codes: Any, shift: Any, counts: Any) -> None:
    """``counts[codes[i] >> shift] += 1`` for every item (``shift`` a uint64; ``counts`` int64,
    zeros on entry)."""
    for i in range(codes.size):
        counts[np.intp(codes[i] >> shift)] += 1


def nonzero(counts: Any, keys: Any, weights: Any) -> Any:
    """The non-empty cells of ``counts`` in order: their indices (uint32, below 2**32) in
    ``keys`` and counts in ``weights`` (each of at least ``min(counts.size, Σ counts)``
    entries, plus one); returns how many. ``counts`` is left all zero (reused as it is)."""
    m = 0
    for c in range(counts.size):
        # Branch-free (a cell is empty about as often as not, a branch on it would be
        # mispredicted that often): every cell is written, only a non-empty one is kept.
        n = counts[c]
        counts[c] = 0
        keys[m] = _U32(c)
        weights[m] = n
        m += np.intp(n != 0)
    return m


def _parents(keys: Any, weights: Any, m: Any) -> Any:
    """The cells one level up of the ``m ≥ 1`` sorted cells ``keys`` (in place, counts summed);
    returns how many. Branch-free: whether a cell starts a new parent is unpredictable."""
    prev, acc, w = keys[0] >> _R1, weights[0], 0
    for i in range(1, m):
        p = keys[i] >> _R1
        keys[w] = prev  # entries below i only: i is read before anything is written there
        weights[w] = acc
        new = np.intp(p != prev)
        w += new
        acc = weights[i] + acc * (1 - new)
        prev = p
    keys[w] = prev
    weights[w] = acc
    return w + 1


def tree_counts(keys: Any, weights: Any, m: Any, up: Any, level: Any, tree: Any) -> None:
    """Exact counters' increments of levels ``0 … level`` (heap order, ``tree`` overwritten)
    from the ``m`` sorted cells ``keys`` of level ``level + up`` and their counts."""
    tree[:] = 0
    base = (1 << level) - 1
    for i in range(m):
        tree[base + np.intp(keys[i] >> _U32(up))] += weights[i]
    for lv in range(level - 1, -1, -1):
        lo, child = (1 << lv) - 1, (1 << (lv + 1)) - 1
        for c in range(1 << lv):
            tree[lo + c] = tree[child + 2 * c] + tree[child + 2 * c + 1]


def hash_levels(keys: Any, weights: Any, m: Any, levels: Any, seeds: Any, signs: Any,
                width: Any, shift: Any, out: Any) -> None:  # fmt: skip
    """Sketch increments of the ``levels`` per-cell levels: ``keys`` (uint32, sorted) and
    ``weights`` are the ``m`` non-empty cells of the deepest of them, sketch ``levels − 1``,
    with their counts; each sketch ``i`` is filled (``out[i]``, ``(j, width)`` int64) from its
    cells (those above, merged into parents level by level, in place: ``keys`` and ``weights``
    are left holding the shallowest level's) hashed once each, weighted by their counts
    (``seeds[i]``, ``signs[i]`` and the rest as in :func:`hash_items`)."""
    _, _, _, buckets, flips, mixed = _scratch(False)
    empty = np.empty(0, dtype=np.uint32)
    for i in range(levels - 1, -1, -1):
        if i < levels - 1 and m:
            m = _parents(keys, weights, m)
        out[i][:] = 0
        for a in range(0, m, _BLOCK):
            b = min(a + _BLOCK, m)
            _flush(keys[a:b], empty, weights[a:b], b - a, seeds[i], signs[i], width, shift,
                   out[i], buckets, flips, mixed)  # fmt: skip


def hash_items(codes: Any, shift: Any, wide: Any, seeds: Any, signs: Any, width: Any,
               bshift: Any, out: Any) -> None:  # fmt: skip
    """Add every item's prefix ``codes >> shift`` (``shift`` a uint64; ``wide``: prefixes may
    reach 2**32) to its bucket in every row of ``out`` (``(j, width)`` int64, overwritten).
    ``seeds``: the rows' uint32 seeds; ``signs``: the Count Sketch's sign seeds (empty for
    Count-Min); ``width`` a uint64 and ``bshift`` a uint32: ``32 − log2 width`` when the width
    is a power of two, else 0 (the bucket is then ``(h · width) >> 32``)."""
    out[:] = 0
    low, high, weights, buckets, flips, mixed = _scratch(wide)
    for a in range(0, codes.size, _BLOCK):
        m = min(_BLOCK, codes.size - a)
        for i in range(m):
            key = codes[a + i] >> shift
            low[i] = _U32(key & _LOW)
        if wide:
            for i in range(m):
                high[i] = _U32((codes[a + i] >> shift) >> _HIGH)
        _flush(low, high, weights, m, seeds, signs, width, bshift, out, buckets, flips, mixed)


# Morton spreading of an axis' cell index (bit j to bit d·j), as sketchsyn.domains.morton.
_S2 = tuple((np.uint64(a), np.uint64(b)) for a, b, _ in _SPREAD2)
_S3 = tuple((np.uint64(a), np.uint64(b)) for a, b, _ in _SPREAD3)


def _spread2(x: Any) -> Any:
    for shift, mask in _S2:
        x = (x | (x << shift)) & mask
    return x


def _spread3(x: Any) -> Any:
    for shift, mask in _S3:
        x = (x | (x << shift)) & mask
    return x


def _quantise(col: Any, lower: Any, upper: Any, span: Any, divide: Any, scale: Any, top: Any,
              q: Any) -> Any:  # fmt: skip
    """One axis' cell indices (``col``: that axis of every row) into ``q``; returns the rows
    outside the box (or not finite).

    A row is inside when ``0 ≤ x − lower ≤ span`` and not ``x − lower == span < x − upper``,
    the test of :meth:`~sketchsyn.domains.Box.encode` (there on a column's minimum and
    maximum). Branch-free, so that LLVM vectorises it (``q`` of int32 converts four floats at
    once); fastest when ``col`` is contiguous (a column-major batch, as the file readers give)."""
    bad = 0
    if divide:
        for r in range(col.size):
            x = col[r]
            t = x - lower
            bad += np.intp(not (t >= 0.0 and t <= span)) + np.intp(t == span and x > upper)
            q[r] = min(t / divide, top)
    else:
        for r in range(col.size):
            x = col[r]
            t = x - lower
            bad += np.intp(not (t >= 0.0 and t <= span)) + np.intp(t == span and x > upper)
            q[r] = min((t / span) * scale, top)
    return bad


def morton(q: Any, shift: Any, codes: Any) -> None:
    """``codes[r]``: the axes' cell indices ``q[:, r]`` (``(d, n)``, d ≤ 3) spread (d ≥ 2) and
    shifted left by ``shift[i]``, or'ed together: the Morton code of
    :meth:`sketchsyn.domains.Box.encode`."""
    d, n = q.shape
    if d == 1:
        for r in range(n):
            codes[r] = np.uint64(q[0, r])
    elif d == 2:
        for r in range(n):
            a, b = _spread2(np.uint64(q[0, r])), _spread2(np.uint64(q[1, r]))
            codes[r] = (a << shift[0]) | (b << shift[1])
    else:
        for r in range(n):
            a, b = _spread3(np.uint64(q[0, r])), _spread3(np.uint64(q[1, r]))
            c = _spread3(np.uint64(q[2, r]))
            codes[r] = (a << shift[0]) | (b << shift[1]) | (c << shift[2])


def encode_box(domain: Any, X: Any, depth: int, scratch: Any = None) -> np.ndarray | None:
    """``domain.encode(X, depth)`` of a :class:`~sketchsyn.domains.Box` in compiled passes
    (one per axis, then the Morton interleave), or None where they do not apply: a row outside
    the box or not finite (the domain's policy then decides), d > 3, or more bits per axis than
    the spreading takes. The rows are read by the domain's own checks first (numeric,
    ``(n, d)``). ``scratch(name, shape, dtype)``, when given, supplies the working arrays and
    the codes (reused memory).
    """
    from ...domains.morton import _bits_per_axis

    arr = domain._points(X)  # any layout: each axis is read as one column (strided or not)
    n, d = arr.shape
    bits = _bits_per_axis(depth, d)
    if d > 3 or (d == 3 and bits[0] > 21) or (d == 1 and bits[0] > 53):
        return None
    lower = np.asarray(domain.lower, dtype=np.float64)
    upper = np.asarray(domain.upper, dtype=np.float64)
    with np.errstate(over="ignore"):
        span = upper - lower
    divide, scale = np.ones(d), np.ones(d)
    top, shift = np.zeros(d), np.zeros(d, dtype=np.uint64)
    for i, b in enumerate(bits):
        if b == 0:
            continue
        step = math.ldexp(float(span[i]), -b)
        divide[i] = step if step >= _TINY else 0.0
        scale[i] = math.ldexp(1.0, b)
        top[i] = math.ldexp(1.0, b) - 1.0
        shift[i] = depth - i - 1 - d * (b - 1) if d > 1 else 0

    def fresh(name: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        return np.empty(shape, dtype=dtype)

    get = scratch or fresh
    codes = get("codes", (n,), np.uint64)
    q = get("q", (d, n), np.int32 if max(bits) <= 31 else np.int64)
    bad = 0
    for i in range(d):
        bad += _quantise(arr[:, i], lower[i], upper[i], span[i], divide[i], scale[i], top[i], q[i])
    if bad:
        return None
    morton(q, shift, codes)
    return codes


register(globals(), _KERNELS, _warm_up)
