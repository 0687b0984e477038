# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""PrivHP's ingest kernels (compiled at install; the numpy path is the reference).

Every entry point checks its arguments (dtypes, contiguity, shapes and the ranges its loops
index with) and raises ``ValueError`` or ``TypeError`` on a wrong call; the loops run without
the GIL, so PrivHP's two worker threads run them at once.
"""

from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc

import numpy as np


cdef extern from "_privhp.h" nogil:
    enum: SS_BLOCK
    ctypedef struct ss_scratch:
        pass
    void ss_flush(const uint32_t *low, const uint32_t *high, const int64_t *weights,
                  Py_ssize_t m, Py_ssize_t rows, const uint32_t *seeds, const uint32_t *signs,
                  uint64_t width, uint32_t shift, int64_t *out, Py_ssize_t stride,
                  ss_scratch *s)
    void ss_hash_items(const uint64_t *codes, Py_ssize_t n, uint64_t shift, int wide,
                       Py_ssize_t rows, const uint32_t *seeds, const uint32_t *signs,
                       uint64_t width, uint32_t bshift, int64_t *out, Py_ssize_t stride,
                       ss_scratch *s, uint32_t *low, uint32_t *high)
    Py_ssize_t ss_histogram(const uint64_t *codes, Py_ssize_t n, uint64_t shift,
                            int64_t *counts, uint64_t ncells)
    Py_ssize_t ss_nonzero(int64_t *counts, Py_ssize_t ncells, uint32_t *keys,
                          int64_t *weights, Py_ssize_t room)
    Py_ssize_t ss_parents(uint32_t *keys, int64_t *weights, Py_ssize_t m)
    uint64_t ss_spread2(uint64_t x)
    uint64_t ss_spread3(uint64_t x)
    Py_ssize_t ss_quantise_int32(const double *col, Py_ssize_t step, Py_ssize_t n, double lower,
                                 double upper, double span, double divide, double scale,
                                 double top, int32_t *q)
    Py_ssize_t ss_quantise_int64(const double *col, Py_ssize_t step, Py_ssize_t n, double lower,
                                 double upper, double span, double divide, double scale,
                                 double top, int64_t *q)
    void ss_morton_int32(const int32_t *q, Py_ssize_t qs, int d, Py_ssize_t n,
                         const uint64_t *shift, uint64_t *codes)
    void ss_morton_int64(const int64_t *q, Py_ssize_t qs, int d, Py_ssize_t n,
                         const uint64_t *shift, uint64_t *codes)


#: Keys hashed per block (their keys, weights and buckets stay in the L1 cache).
BLOCK = SS_BLOCK


cdef int _check_width(uint64_t width, uint32_t shift, Py_ssize_t cols) except -1:
    """The buckets a hash can reach lie inside a row of ``cols`` entries."""
    if width < 1 or width > 0xFFFFFFFF:
        raise ValueError(f"width must be in [1, 2**32 - 1], got {width}")
    if shift > 31:
        raise ValueError(f"shift must be in [0, 31], got {shift}")
    if shift and (<uint64_t>1 << (32 - shift)) > width:
        raise ValueError(f"shift {shift} reaches past width {width}")
    if <uint64_t>cols < width:
        raise ValueError(f"out has {cols} columns, fewer than the width {width}")
    return 0


def histogram(const uint64_t[::1] codes not None, uint64_t shift, int64_t[::1] counts not None):
    """``counts[codes[i] >> shift] += 1`` for every item (``counts`` int64: zeros on entry).

    >>> counts = np.zeros(4, dtype=np.int64)
    >>> histogram(np.array([0, 5, 7], dtype=np.uint64), 1, counts); counts.tolist()
    [1, 0, 1, 1]
    """
    if shift > 63:
        raise ValueError(f"shift must be in [0, 63], got {shift}")
    cdef Py_ssize_t bad
    with nogil:
        bad = ss_histogram(&codes[0] if codes.shape[0] else NULL, codes.shape[0], shift,
                           &counts[0] if counts.shape[0] else NULL, counts.shape[0])
    if bad < codes.shape[0]:
        raise ValueError(f"codes[{bad}] >> {shift} = {codes[bad] >> shift} is past counts "
                         f"({counts.shape[0]} cells)")


def nonzero(int64_t[::1] counts not None, uint32_t[::1] keys not None,
            int64_t[::1] weights not None):
    """The non-empty cells of ``counts`` in order: their indices in ``keys`` and counts in
    ``weights`` (each with room for every non-empty cell plus one); returns how many.
    ``counts`` is left all zero (reused as it is).

    >>> keys, weights = np.empty(3, np.uint32), np.empty(3, np.int64)
    >>> nonzero(np.array([0, 2, 0, 1]), keys, weights), keys[:2].tolist(), weights[:2].tolist()
    (2, [1, 3], [2, 1])
    """
    if counts.shape[0] > 1 + <Py_ssize_t>0xFFFFFFFF:
        raise ValueError("counts has more than 2**32 cells")
    if keys.shape[0] != weights.shape[0] or keys.shape[0] < 1:
        raise ValueError("keys and weights must have the same length, at least 1")
    cdef Py_ssize_t m
    with nogil:
        m = ss_nonzero(&counts[0] if counts.shape[0] else NULL, counts.shape[0], &keys[0],
                       &weights[0], keys.shape[0] - 1)
    if m < 0:
        raise ValueError(f"more non-empty cells than keys ({keys.shape[0]}) holds")
    return m


def tree_counts(const uint32_t[::1] keys not None, const int64_t[::1] weights not None,
                Py_ssize_t m, uint32_t up, int level, int64_t[::1] tree not None):
    """Exact counters' increments of levels ``0 … level`` (heap order, ``tree`` overwritten)
    from the ``m`` sorted cells ``keys`` of level ``level + up`` and their counts.

    >>> tree = np.empty(3, np.int64)
    >>> tree_counts(np.array([0, 3], np.uint32), np.array([2, 5]), 2, 1, 1, tree); tree.tolist()
    [7, 2, 5]
    """
    if not 0 <= level <= 40 or up > 31:
        raise ValueError(f"level must be in [0, 40] and up in [0, 31], got {level}, {up}")
    if m < 0 or m > keys.shape[0] or m > weights.shape[0]:
        raise ValueError(f"m = {m} is not within keys and weights")
    cdef Py_ssize_t size = (<Py_ssize_t>2 << level) - 1
    if tree.shape[0] != size:
        raise ValueError(f"tree must have {size} entries for level {level}, got {tree.shape[0]}")
    cdef Py_ssize_t base = (<Py_ssize_t>1 << level) - 1, i, c, lo, child, cell, lv
    cdef Py_ssize_t bad = -1
    with nogil:
        for i in range(size):
            tree[i] = 0
        for i in range(m):
            cell = keys[i] >> up
            if cell > base:
                bad = i
                break
            tree[base + cell] += weights[i]
        if bad < 0:
            for lv in range(level - 1, -1, -1):
                lo = (<Py_ssize_t>1 << lv) - 1
                child = (<Py_ssize_t>1 << (lv + 1)) - 1
                for c in range(<Py_ssize_t>1 << lv):
                    tree[lo + c] = tree[child + 2 * c] + tree[child + 2 * c + 1]
    if bad >= 0:
        raise ValueError(f"keys[{bad}] >> {up} is past level {level}")


def hash_levels(uint32_t[::1] keys not None, int64_t[::1] weights not None, Py_ssize_t m,
                int levels, const uint32_t[:, ::1] seeds not None,
                const uint32_t[:, ::1] signs not None, uint64_t width, uint32_t shift,
                int64_t[:, :, ::1] out not None):
    """Sketch increments of the ``levels`` per-cell levels: ``keys`` (sorted) and ``weights``
    are the ``m`` non-empty cells of the deepest of them, sketch ``levels − 1``, with their
    counts; each sketch ``i`` is filled (``out[i]``, ``(j, width)``, overwritten) from its
    cells (those above merged into parents level by level, in place: ``keys`` and ``weights``
    are left holding the shallowest level's) hashed once each, weighted by their counts.
    ``seeds[i]``, ``signs[i]`` (no columns: Count-Min), ``width`` and ``shift`` as in
    :func:`hash_items`."""
    if m < 0 or m > keys.shape[0] or m > weights.shape[0]:
        raise ValueError(f"m = {m} is not within keys and weights")
    if levels < 0 or levels > out.shape[0] or levels > seeds.shape[0]:
        raise ValueError(f"levels = {levels} is not within out and seeds")
    if seeds.shape[1] != out.shape[1]:
        raise ValueError("seeds must have a column per row of out")
    if signs.shape[1] and (signs.shape[0] < levels or signs.shape[1] != seeds.shape[1]):
        raise ValueError("signs must be empty or the shape of seeds")
    _check_width(width, shift, out.shape[2])
    if not out.shape[1] or not out.shape[2]:
        return
    cdef ss_scratch *s = <ss_scratch *>malloc(sizeof(ss_scratch))
    if s == NULL:
        raise MemoryError()
    cdef Py_ssize_t i, a, b, r, c, rows = out.shape[1], stride = out.shape[2]
    cdef bint signed = signs.shape[1] != 0
    try:
        with nogil:
            for i in range(levels - 1, -1, -1):
                if i < levels - 1 and m:
                    m = ss_parents(&keys[0], &weights[0], m)
                for r in range(rows):
                    for c in range(stride):
                        out[i, r, c] = 0
                a = 0
                while a < m:
                    b = a + SS_BLOCK if a + SS_BLOCK < m else m
                    ss_flush(&keys[a], NULL, &weights[a], b - a, rows, &seeds[i, 0],
                             &signs[i, 0] if signed else NULL, width, shift, &out[i, 0, 0],
                             stride, s)
                    a = b
    finally:
        free(s)


def hash_items(const uint64_t[::1] codes not None, uint64_t shift, bint wide,
               const uint32_t[::1] seeds not None, const uint32_t[::1] signs not None,
               uint64_t width, uint32_t bshift, int64_t[:, ::1] out not None):
    """Add every item's prefix ``codes >> shift`` (``wide``: prefixes may reach 2**32) to its
    bucket in every row of ``out`` (``(j, width)`` int64, overwritten; without ``wide`` a
    prefix's bits past the 32nd are not hashed). ``seeds``: the rows'
    seeds; ``signs``: the Count Sketch's sign seeds (empty for Count-Min); ``bshift``:
    ``32 − log2 width`` when the width is a power of two, else 0 (the bucket is then
    ``(h · width) >> 32``).

    >>> out = np.empty((1, 4), np.int64)
    >>> hash_items(np.arange(100, dtype=np.uint64), 0, False, np.array([7], np.uint32),
    ...            np.empty(0, np.uint32), 4, 30, out); int(out.sum())
    100
    """
    if shift > 63:
        raise ValueError(f"shift must be in [0, 63], got {shift}")
    if seeds.shape[0] != out.shape[0]:
        raise ValueError(f"seeds has {seeds.shape[0]} entries for {out.shape[0]} rows")
    if signs.shape[0] and signs.shape[0] != seeds.shape[0]:
        raise ValueError("signs must be empty or the length of seeds")
    _check_width(width, bshift, out.shape[1])
    if not out.shape[0] or not out.shape[1]:
        return
    cdef ss_scratch *s = <ss_scratch *>malloc(sizeof(ss_scratch))
    cdef uint32_t *low = <uint32_t *>malloc(2 * SS_BLOCK * sizeof(uint32_t))
    if s == NULL or low == NULL:
        free(s)
        free(low)
        raise MemoryError()
    cdef Py_ssize_t r, c
    try:
        with nogil:
            for r in range(out.shape[0]):
                for c in range(out.shape[1]):
                    out[r, c] = 0
            ss_hash_items(&codes[0] if codes.shape[0] else NULL, codes.shape[0], shift, wide,
                          out.shape[0], &seeds[0], &signs[0] if signs.shape[0] else NULL,
                          width, bshift, &out[0, 0], out.shape[1], s, low, low + SS_BLOCK)
    finally:
        free(s)
        free(low)


def quantise(const double[:] col not None, double lower, double upper, double span,
             double divide, double scale, double top, q not None):
    """One axis' cell indices (``col``: that axis of every row, any stride) into ``q`` (int32
    or int64, contiguous, as long); returns the rows outside the box (or not finite): the test
    of :meth:`~sketchsyn.domains.Box.encode`. ``divide``: the cell's width, or 0 to scale by
    ``scale / span`` instead.

    >>> q = np.empty(3, np.int32)
    >>> quantise(np.array([0.0, 0.5, 2.0]), 0.0, 1.0, 1.0, 0.25, 4.0, 3.0, q), q[:2].tolist()
    (1, [0, 2])
    """
    cdef int32_t[::1] q32
    cdef int64_t[::1] q64
    cdef Py_ssize_t n = col.shape[0], bad, step = col.strides[0] // <Py_ssize_t>sizeof(double)
    if col.strides[0] % <Py_ssize_t>sizeof(double):
        raise ValueError("col's stride must be a multiple of 8 bytes")
    if not top >= 0.0 or top >= 2.0**63:
        raise ValueError(f"top must be in [0, 2**63), got {top}")
    if q.dtype == np.int32:
        q32 = q
        if q32.shape[0] != n:
            raise ValueError(f"q has {q32.shape[0]} entries for {n} rows")
        if top >= 2.0**31:
            raise ValueError(f"top {top} does not fit int32")
        with nogil:
            bad = ss_quantise_int32(&col[0] if n else NULL, step, n, lower, upper, span, divide,
                                    scale, top, &q32[0] if n else NULL)
    else:
        q64 = q
        if q64.shape[0] != n:
            raise ValueError(f"q has {q64.shape[0]} entries for {n} rows")
        with nogil:
            bad = ss_quantise_int64(&col[0] if n else NULL, step, n, lower, upper, span, divide,
                                    scale, top, &q64[0] if n else NULL)
    return bad


def morton(q not None, const uint64_t[::1] shift not None, uint64_t[::1] codes not None):
    """``codes[r]``: the axes' cell indices ``q[:, r]`` (``(d, n)`` int32 or int64, d ≤ 3)
    spread (d ≥ 2) and shifted left by ``shift[i]``, or'ed together: the Morton code of
    :meth:`sketchsyn.domains.Box.encode`.

    >>> codes = np.empty(1, np.uint64)
    >>> morton(np.array([[1], [1]], np.int32), np.array([1, 0], np.uint64), codes); int(codes[0])
    3
    """
    cdef const int32_t[:, ::1] q32
    cdef const int64_t[:, ::1] q64
    cdef Py_ssize_t d, n, r
    cdef bint wide = q.dtype != np.int32
    if wide:
        q64 = q
        d, n = q64.shape[0], q64.shape[1]
    else:
        q32 = q
        d, n = q32.shape[0], q32.shape[1]
    if not 1 <= d <= 3 or shift.shape[0] != d or codes.shape[0] != n:
        raise ValueError(f"q must be (d, n) with d in 1..3, shift (d,) and codes (n,); got "
                         f"d = {d}, {shift.shape[0]} shifts, {codes.shape[0]} codes for {n} rows")
    for r in range(d):
        if shift[r] > 63:
            raise ValueError(f"shift[{r}] = {shift[r]} is past 63")
    if n == 0:
        return
    with nogil:
        if wide:
            ss_morton_int64(&q64[0, 0], q64.shape[1], <int>d, n, &shift[0], &codes[0])
        else:
            ss_morton_int32(&q32[0, 0], q32.shape[1], <int>d, n, &shift[0], &codes[0])
