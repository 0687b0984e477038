# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The exact noise samplers' table lookups and draws (compiled at install; the numpy path in
:mod:`sketchsyn.privacy.exactexp` and :mod:`sketchsyn.privacy.noise` is the reference).

:meth:`~sketchsyn.privacy.exactexp.ThresholdTable.sample` turns each uniform word into
``#{v : T_v < word}``; :func:`table_sample` does the same lookup in one loop. Both give the
same index for every word, and the words equal to a threshold (ties, probability about
``2**-32`` each) are settled afterwards by the same exact routine, so a draw is the same on
both paths. Every entry point checks its arrays (dtypes, contiguity, sizes, and that a table's
guide indexes inside its thresholds) and raises on a wrong call.

>>> import numpy as np
>>> guide = np.array([0, 1, 2], dtype=np.int32)       # 1-bit guide: T_1 < 2**31 ≤ T_2
>>> padded = np.array([5, 2**31 + 7, 2**32], dtype=np.int64)
>>> out = np.empty(3, dtype=np.int64)
>>> table_sample(guide, padded, np.array([4, 6, 2**31 + 7], dtype=np.uint32), 31, out), out.tolist()
(1, [0, 1, 1])
"""

from libc.math cimport ceil, exp, expm1, floor
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t

import numpy as np

from ._words cimport words_of, words_t

#: ``table_floors``' codes of the three tables of :mod:`sketchsyn.privacy.exactexp`.
GEOMETRIC, TRUNCATED, LAPLACE = 0, 1, 2
#: The kinds of a plan (:func:`sketchsyn.privacy.noise.laplace_plan`).
PLAN_NONE, PLAN_PLAIN, PLAN_WIDE, PLAN_DEEP = 0, 1, 2, 3
cdef int64_t _TWO32 = 4294967296


cdef int _check_table(const int32_t[::1] guide, const int64_t[::1] padded, int shift,
                      str name) except -1:
    """A table's lookup arrays are safe to walk: ``guide`` covers every word's top bits, and
    ``padded`` ends with ``2**32``, which stops every word. (Each guide entry is checked where
    a lookup reads it: one comparison a word, not a pass over the guide a call.)"""
    if not 0 <= shift <= 31:
        raise ValueError(f"shift must be in [0, 31], got {shift}")
    if padded.shape[0] < 1 or padded[padded.shape[0] - 1] != _TWO32:
        raise ValueError(f"{name}: padded must end with 2**32")
    if guide.shape[0] <= (0xFFFFFFFF >> shift):
        raise ValueError(f"{name}: guide has {guide.shape[0]} entries, fewer than the "
                         f"{(0xFFFFFFFF >> shift) + 1} of shift {shift}")
    return 0


cdef inline Py_ssize_t _lookup(const int32_t *guide, const int64_t *padded, Py_ssize_t n,
                               int shift, int64_t w) noexcept nogil:
    """``#{T_v < w}`` of a threshold table's lookup arrays (``ThresholdTable.lookup``; ``n``
    thresholds and ``2**32``), or -1 when the guide points outside them."""
    cdef Py_ssize_t idx = guide[w >> shift]
    if <size_t>idx >= <size_t>n:
        return -1
    while padded[idx] < w:  # padded[n - 1] = 2**32 stops every word
        idx += 1
    return idx


def table_sample(const int32_t[::1] guide not None, const int64_t[::1] padded not None,
                 const uint32_t[::1] words not None, int shift, int64_t[::1] out not None):
    """``out[i] = #{v : T_v < words[i]}`` for the sorted thresholds ``padded`` (``2**32``
    last, which stops every word) with ``guide[b] = #{T_v < b·2**shift}``; returns the number
    of words equal to a threshold (ties, left to the caller)."""
    _check_table(guide, padded, shift, "table_sample")
    if out.shape[0] != words.shape[0]:
        raise ValueError(f"out has {out.shape[0]} entries for {words.shape[0]} words")
    cdef Py_ssize_t i = 0, idx = 0, ties = 0, n = padded.shape[0]
    cdef int64_t w
    with nogil:
        for i in range(words.shape[0]):
            w = words[i]
            idx = _lookup(&guide[0], &padded[0], n, shift, w)
            if idx < 0:
                break
            out[i] = idx
            ties += padded[idx] == w
    if idx < 0:
        raise ValueError(f"table_sample: guide[{words[i] >> shift}] is outside padded")
    return ties


def table_floors(int kind, double x, double m, double rel, double absolute, double y_max,
                 int64_t[::1] out not None):
    """:func:`sketchsyn.privacy.exactexp._fast_thresholds`' float stage, one entry at a time:
    ``out[o − 1]`` = the floor of ``2**32·c_o`` where the margin proves it, −1 where it does
    not (or where ``x·o > y_max``); returns the number of −1. The same float forms as
    :func:`~sketchsyn.privacy.exactexp._float_estimates` (the C library's ``exp`` and
    ``expm1``, within the error the margin assumes), so a floor kept here is the exact one;
    once an entry takes the tail form, the later ones keep it (their ``c_o`` only grows), so
    the direct form's ``expm1`` is not computed for them.

    >>> out = np.empty(4, dtype=np.int64)
    >>> table_floors(GEOMETRIC, 1 / 3, 4, 2.0**-40, 2.0**-30, 32.0, out), out.tolist()
    (0, [1217488750, 2089857560, 2714937127, 3162826208])
    """
    if kind not in (GEOMETRIC, TRUNCATED, LAPLACE):
        raise ValueError(f"kind must be 0, 1 or 2, got {kind}")
    cdef double two32 = 4294967296.0, mask = 4294967295.0
    cdef double p = exp(-x), den = -expm1(-(x * m))
    cdef double o, y, direct, rest = 0.0, v, lo, hi, f_lo, f_hi, em1, em1_prev = expm1(-(x * 0.0))
    cdef bint tail = False
    cdef Py_ssize_t i, undecided = 0
    with nogil:
        for i in range(out.shape[0]):
            o = <double>(i + 1)
            y = x * o
            # Once an entry takes the tail form (c_o > 1/2), the later ones (c_o increasing)
            # keep it without computing the direct form (its expm1). Either form proves the
            # floor it keeps (the margin holds for every form), so the choice changes only
            # which entries are left to the exact routines.
            if not tail:
                # expm1(−x·(o − 1)) is the entry before's expm1(−y): the same float argument
                # (x·(o − 1) computed as then), so the same value; e^{−y} only where it is read.
                em1 = expm1(-y)
                if kind == 0:
                    direct = -em1
                elif kind == 1:
                    direct = -em1 / den
                else:
                    direct = (-em1 - p * em1_prev) / (1.0 + p)
                em1_prev = em1
                tail = direct > 0.5
            if tail:
                if kind == 0:
                    rest = exp(-y)
                elif kind == 1:
                    rest = exp(-y) * -expm1(-(x * (m - o))) / den
                else:
                    rest = 2.0 * exp(-y) / (1.0 + p)
            v = (rest if tail else direct) * two32
            lo = v * (1.0 - rel) - absolute
            hi = v * (1.0 + rel) + absolute
            if tail:
                f_lo = two32 - ceil(hi if hi < two32 else two32)
                f_hi = two32 - ceil(lo if lo > 0.5 else 0.5)
            else:
                f_lo = floor(lo if lo > 0.0 else 0.0)
                f_hi = floor(hi if hi < mask else mask)
            if f_lo != f_hi or not y <= y_max:
                out[i] = -1
                undecided += 1
            else:
                out[i] = <int64_t>f_lo
    return undecided


def table_guide(const uint32_t[::1] t not None, int shift, int32_t[::1] guide not None,
                int64_t[::1] padded not None):
    """``ThresholdTable``'s lookup arrays in one pass over the thresholds ``t``:
    ``guide[b] = #{T_v < b·2**shift}`` and ``padded`` = ``t`` then ``2**32``; False when
    ``t`` is not sorted (the arrays are then incomplete).

    >>> guide, padded = np.empty(3, dtype=np.int32), np.empty(3, dtype=np.int64)
    >>> t = np.array([5, 2**31 + 7], dtype=np.uint32)
    >>> table_guide(t, 31, guide, padded), guide.tolist(), padded.tolist()
    (True, [0, 1, 2], [5, 2147483655, 4294967296])
    """
    if not 0 <= shift <= 31:
        raise ValueError(f"shift must be in [0, 31], got {shift}")
    if guide.shape[0] < (0xFFFFFFFF >> shift) + 2:
        raise ValueError(f"guide needs {(0xFFFFFFFF >> shift) + 2} entries, got {guide.shape[0]}")
    if padded.shape[0] != t.shape[0] + 1:
        raise ValueError(f"padded needs {t.shape[0] + 1} entries, got {padded.shape[0]}")
    if t.shape[0] > 0x7FFFFFFF:
        raise ValueError("more thresholds than int32 counts")
    cdef Py_ssize_t b, i
    cdef int64_t v
    cdef bint ok = True
    with nogil:
        for b in range(guide.shape[0]):
            guide[b] = 0
        for i in range(t.shape[0]):
            v = t[i]
            if i and v < padded[i - 1]:
                ok = False
                break
            padded[i] = v
            guide[(v >> shift) + 1] += 1
        if ok:
            padded[t.shape[0]] = _TWO32
            for b in range(1, guide.shape[0]):
                guide[b] += guide[b - 1]
    return ok


def table_signs(int64_t[::1] z not None, const uint8_t[::1] raw not None):
    """``z[i] = −z[i]`` where the random byte ``raw[i]`` is odd: the fair signs of
    :func:`sketchsyn.privacy.noise._laplace_core` (its numpy path: ``np.negative(z, out=z,
    where=raw & 1 == 1)``), in one loop.

    >>> z = np.array([3, 0, 5], dtype=np.int64)
    >>> table_signs(z, np.array([1, 3, 2], dtype=np.uint8)); z.tolist()
    [-3, 0, 5]
    """
    if z.shape[0] != raw.shape[0]:
        raise ValueError(f"z has {z.shape[0]} entries for {raw.shape[0]} bytes")
    cdef Py_ssize_t i
    with nogil:
        for i in range(z.shape[0]):
            if raw[i] & 1:
                z[i] = -z[i]


cdef int plan_of(object plan, int shift, plan_t *out) except -1:
    """``out``: the pointers of ``plan`` (``noise.laplace_plan``'s tuple ``(guide, padded, m,
    kind, guide_a, padded_a, guide_b, padded_b, m_b)``), whose tables are checked; the caller
    keeps ``plan`` alive while ``out`` is used."""
    if not isinstance(plan, tuple) or len(plan) != 9:
        raise TypeError("plan must be noise.laplace_plan's tuple of 9")
    cdef const int32_t[::1] g = plan[0]
    cdef const int64_t[::1] p = plan[1]
    cdef const int32_t[::1] ga = plan[4]
    cdef const int64_t[::1] pa = plan[5]
    cdef const int32_t[::1] gb = plan[6]
    cdef const int64_t[::1] pb = plan[7]
    cdef int64_t m = plan[2], kind = plan[3], m_b = plan[8]
    _check_table(g, p, shift, "plan")
    if not 0 <= kind <= 3 or m < 1:
        raise ValueError(f"plan: kind {kind} or m {m} out of range")
    if kind in (1, 2):
        _check_table(ga, pa, shift, "plan's table a")
    if kind == 2:
        _check_table(gb, pb, shift, "plan's table b")
        if m_b < 1:
            raise ValueError(f"plan: m_b {m_b} out of range")
    out.guide, out.padded, out.n, out.m, out.kind = &g[0], &p[0], p.shape[0], m, kind
    out.guide_a, out.padded_a, out.n_a = &ga[0], &pa[0], pa.shape[0]
    out.guide_b, out.padded_b, out.n_b, out.m_b = &gb[0], &pb[0], pb.shape[0], m_b
    return 0


cdef Py_ssize_t _geo_plain(words_t *src, Py_ssize_t k, const int32_t *guide,
                           const int64_t *padded, Py_ssize_t n, int64_t mg, int shift,
                           uint32_t *words,
                           Py_ssize_t nwords, Py_ssize_t drawn, int64_t *todo,
                           int64_t *out) noexcept nogil:
    """``k`` geometric draws into ``out`` from a table of ``mg`` values (an outcome ``mg``
    draws again), in numpy's order (``noise._geometric_q``): one call's words for every draw
    still going, then the next; each word goes to ``words[drawn:]``. Returns the words drawn
    so far, or ``-(drawn + 1)`` after a call's words when one of them ties (or before a call
    whose words would not fit in ``words``)."""
    cdef Py_ssize_t j, i, left = k, keep, o
    cdef int64_t w
    cdef bint tie
    for j in range(k):
        out[j] = 0
        todo[j] = j
    while left:
        if drawn + left > nwords:
            return -(drawn + 1)
        tie = False
        keep = 0
        for i in range(left):
            w = src.next32(src.state)
            words[drawn] = <uint32_t>w
            drawn += 1
            o = _lookup(guide, padded, n, shift, w)
            if o < 0:
                return BAD_TABLE
            if padded[o] == w:
                tie = True
            j = todo[i]
            out[j] += o
            if o == mg:
                todo[keep] = j
                keep += 1
        if tie:
            return -(drawn + 1)
        left = keep
    return drawn


cdef Py_ssize_t c_lap_draw(words_t *src, Py_ssize_t count, const plan_t *plan, int shift,
                           uint32_t *words, Py_ssize_t nwords, int64_t *z, int64_t *scratch,
                           Py_ssize_t scols) noexcept nogil:
    """:func:`lap_draw` on checked pointers (``count ≤ nwords``; ``scratch`` four rows of
    ``scols``)."""
    cdef Py_ssize_t drawn = 0, i, j, k = 0, low
    cdef int64_t w, word
    cdef int64_t m = plan.m
    cdef bint tie = False
    cdef int64_t *s0 = scratch
    cdef int64_t *s1 = scratch + scols
    cdef int64_t *s2 = scratch + 2 * scols
    cdef int64_t *s3 = scratch + 3 * scols
    for i in range(count):
        w = src.next32(src.state)
        words[drawn] = <uint32_t>w
        drawn += 1
        z[i] = _lookup(plan.guide, plan.padded, plan.n, shift, w)
        if z[i] < 0:
            return BAD_TABLE
        if plan.padded[z[i]] == w:
            tie = True
    if tie:
        return -(drawn + 1)
    for i in range(count):
        if z[i] == m:
            if k < scols:
                s0[k] = i
            k += 1
    if k:
        if k > scols:
            return -(drawn + 1)  # more than the scratch rows hold: handed back
        if plan.kind == 1:  # PLAN_PLAIN
            drawn = _geo_plain(src, k, plan.guide_a, plan.padded_a, plan.n_a, m, shift, words,
                               nwords, drawn, s3, s2)
            if drawn < 0:
                return drawn
            for j in range(k):
                z[s0[j]] += s2[j]
        elif plan.kind == 2:  # PLAN_WIDE: Y = R + m·Z, R truncated, Z geometric of x·m
            if drawn + k > nwords:
                return -(drawn + 1)
            for j in range(k):
                w = src.next32(src.state)
                words[drawn] = <uint32_t>w
                drawn += 1
                low = _lookup(plan.guide_a, plan.padded_a, plan.n_a, shift, w)
                if low < 0:
                    return BAD_TABLE
                s1[j] = low
                if plan.padded_a[low] == w:
                    tie = True
            if tie:
                return -(drawn + 1)
            drawn = _geo_plain(src, k, plan.guide_b, plan.padded_b, plan.n_b, plan.m_b, shift,
                               words, nwords, drawn, s3, s2)
            if drawn < 0:
                return drawn
            for j in range(k):
                z[s0[j]] += s2[j] * m + s1[j]
        else:  # no table for the geometric here
            return -(drawn + 1)
    word = 0
    for i in range(count):
        if i % 4 == 0:
            word = src.next32(src.state)
        if (word >> (8 * (i % 4))) & 1:
            z[i] = -z[i]
    return drawn


def lap_draw(source, Py_ssize_t count, plan, int shift, uint32_t[::1] words not None,
             int64_t[::1] z not None, int64_t[:, ::1] scratch not None):
    """``count`` exact ``Lap_Z`` draws into ``z``, the words ``noise._laplace_core`` draws, in
    its order, from ``source`` (a numpy bit generator, or an ``OSWords``): the magnitudes'
    words, the geometric beyond the table for those that reach it (``plan``:
    ``noise.laplace_plan``), the signs (the low bits of the next ``ceil(count/4)`` words'
    bytes, low byte first). Every word but the signs' goes to ``words``. Returns the number
    of words so, or ``-(drawn + 1)`` when the draw stops after a call's words (a tie; a
    geometric without its table; ``words`` full): ``noise.laplace_replay`` finishes it from
    them. The caller holds the generator alone while it draws."""
    cdef words_t src
    cdef plan_t p
    words_of(source, &src)
    plan_of(plan, shift, &p)
    if count < 0 or count > z.shape[0] or count > words.shape[0]:
        raise ValueError(f"count {count} does not fit z ({z.shape[0]}) and words "
                         f"({words.shape[0]})")
    if scratch.shape[0] != 4:
        raise ValueError("scratch must have 4 rows")
    cdef Py_ssize_t got
    with nogil:
        got = c_lap_draw(&src, count, &p, shift, &words[0] if words.shape[0] else NULL, 
                         words.shape[0], &z[0] if z.shape[0] else NULL,
                         &scratch[0, 0] if scratch.shape[1] else NULL, scratch.shape[1])
    if got == BAD_TABLE:
        raise ValueError("lap_draw: a table's guide points outside its thresholds")
    return got
