# cython: language_level=3, boundscheck=True, wraparound=False, cdivision=True
"""The sparse counters' batched checks and rounds (compiled at install; the numpy reference is
:func:`sketchsyn.counters.checks.scan` and the bank's Python rounds).

:func:`scan` decides each active counter's events from its cursor, one check at a time, and
stops at its first trip (or an undecided check, or its window). The float decisions are the
reference's (:func:`sketchsyn.counters.sparse.trip_decisions`), made with the same margin, so
both give the same outcomes for the same words: an outcome the margin proves is the exact one,
and a check either path leaves undecided is settled exactly by the bank. Every index a loop
takes is checked (an index outside its array raises ``IndexError``), and every array's dtype
and layout is checked on entry.
"""

from libc.math cimport ceil, exp, fabs, INFINITY, isfinite, log, log1p
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t

import numpy as np

from ._noise cimport BAD_TABLE, c_lap_draw, plan_of, plan_t
from ._words cimport words_of, words_t

ctypedef const int64_t[::1] ci64
ctypedef int64_t[::1] i64
ctypedef const uint64_t[::1] cu64

# Events per block of the cheap "no trip" test's bound (_p_bound: one exp a block).
cdef Py_ssize_t _BLOCK = 64
cdef double _REL = 2.0 ** -30, _ABS = 2.0 ** -50, _TWO64 = 2.0 ** -64, _FAST_REL = 2.0 ** -20
cdef enum:
    _CALM = 0
    _GAP_TRIP = 1
    _OWN_TRIP = 2
    _GAP_UNSURE = 3
    _OWN_UNSURE = 4

# rounds(): what it returns, the stage a call starts at, and the slots of its ``info`` array.
cdef enum:
    _DONE, _UNSURE, _GROW, _BAIL_SUB, _BAIL_THETA
cdef enum:
    _START, _SCAN, _TALLY, _THETA, _CLOSE
cdef enum:
    _I_ACTIVE, _I_TRIPPED, _I_NEW, _I_OPENED, _I_ROWS, _I_WORDS, _I_ROUND
DONE, UNSURE, GROW, BAIL_SUB, BAIL_THETA = _DONE, _UNSURE, _GROW, _BAIL_SUB, _BAIL_THETA
START, SCAN, TALLY, THETA, CLOSE = _START, _SCAN, _TALLY, _THETA, _CLOSE
I_ACTIVE, I_TRIPPED, I_NEW, I_OPENED, I_ROWS, I_WORDS, I_ROUND = (
    _I_ACTIVE, _I_TRIPPED, _I_NEW, _I_OPENED, _I_ROWS, _I_WORDS, _I_ROUND)


ctypedef struct decision:
    int64_t g
    bint unsure


cdef inline double _log_stay(double xf, double lq1, int64_t a) noexcept nogil:
    """``ln(1 − p)``, ``p = P(λ > a)`` (:func:`sketchsyn.counters.sparse._log_stay`)."""
    if a >= 0:
        return log1p(-exp(-(<double>a + 1.0) * xf - lq1))
    return <double>a * xf - lq1


# A shared round's checks take ln(1 − p) at every a = θ − N a counter passes near its
# threshold, and the counters of one call share ε and so these values: _scan keeps those of
# 0 ≤ a < _MEMO, each computed once by _log_stay (the same doubles, so the same decisions).
cdef enum:
    _MEMO = 4096


cdef inline double _stay(double *memo, double xf, double lq1, int64_t a) noexcept nogil:
    """``_log_stay(xf, lq1, a)``, kept in ``memo`` (``+1``: not computed yet) for small ``a``."""
    cdef double v
    if a < 0 or a >= _MEMO:
        return _log_stay(xf, lq1, a)
    v = memo[a]
    if v > 0.0:
        v = _log_stay(xf, lq1, a)
        memo[a] = v
    return v


cdef inline void _log_bounds(uint64_t k, double span, double *lo, double *hi) noexcept nogil:
    """``ln`` of the ends of ``U``'s interval ``[k, k + span)·2^-64``, widened by the margin
    of :func:`~sketchsyn.counters.sparse.trip_decisions`."""
    cdef double kf = <double>k
    cdef double ln_lo = log(kf * _TWO64) if kf > 0.0 else -INFINITY
    cdef double ln_hi = log((kf + span) * _TWO64)
    lo[0] = ln_lo - (fabs(ln_lo) * _REL + _ABS)
    hi[0] = ln_hi + (fabs(ln_hi) * _REL + _ABS)


cdef decision _decide_at(double ln_lo, double ln_hi, double l1p, int64_t s,
                         double base) noexcept nogil:
    """``(G, unsure)`` of ``s`` checks of ``ln(1 − p) = l1p`` after checks that stayed with
    probability ``e^base``, for ``ln U`` in ``[ln_lo, ln_hi]``: the decision of
    :func:`~sketchsyn.counters.sparse.trip_decisions`, the same margins."""
    cdef decision d
    cdef double sf = <double>s, target = base + sf * l1p, tol = fabs(target) * _REL + _ABS
    cdef double guess, q
    cdef bint at_g, before
    d.g = 0
    d.unsure = False
    if ln_hi < target - tol:
        return d  # no check of the s trips
    if not ln_lo > target + tol:
        d.unsure = True
        return d
    q = ceil((0.5 * (ln_lo + ln_hi) - base) / l1p) if l1p != 0.0 else INFINITY
    guess = q if isfinite(q) else sf
    guess = min(max(guess, 1.0), max(sf, 1.0))
    target = base + guess * l1p
    tol = fabs(target) * _REL + _ABS
    at_g = ln_lo > target + tol
    before = guess == 1.0
    if not before:
        target = base + (guess - 1.0) * l1p
        tol = fabs(target) * _REL + _ABS
        before = ln_hi < target - tol
    if at_g and before:
        d.g = <int64_t>guess
    else:
        d.unsure = True
    return d


cdef decision _decide(double xf, double lq1, int64_t a, int64_t s, uint64_t k,
                      double span) noexcept nogil:
    """``(G, unsure)`` of one entry of :func:`~sketchsyn.counters.sparse.trip_decisions`
    (``U`` in ``[k, k + span)·2^-64``), after a cheaper sufficient test of "no trip" for
    ``a ≥ 0`` in the uniform's own scale (Bernoulli's inequality: ``(1 − p)^s ≥ 1 − s·p``;
    the slack covers the float rounding of ``k``, of ``p`` and of the sums). Where it proves
    nothing the reference's decision follows, unchanged."""
    cdef decision d
    cdef double kf = <double>k, sp, ln_lo, ln_hi
    if a >= 0:
        sp = <double>s * exp(-(<double>a + 1.0) * xf - lq1)
        if (kf + span + 4095.0) * _TWO64 < 1.0 - sp * (1.0 + _FAST_REL) - _ABS:
            d.g = 0
            d.unsure = False
            return d
    _log_bounds(k, span, &ln_lo, &ln_hi)
    return _decide_at(ln_lo, ln_hi, _log_stay(xf, lq1, a), s, 0.0)


cdef inline double _p_bound(ci64 values, Py_ssize_t e, Py_ssize_t stop, int64_t a,
                            double xf, double lq1) except? -2.0:
    """A bound on the trip probability of every check of events ``e … stop − 1`` (``a`` is
    ``θ − N`` at event ``e``; ``a`` only falls as ``N`` grows, so the last own check's is the
    largest): ``P(λ > a_min)·(1 + 2^-20)``, or −1 where ``a_min < 0`` (no bound)."""
    cdef Py_ssize_t j
    for j in range(e, stop):
        a -= values[j]
    if a < 0:
        return -1.0
    return exp(-(<double>a + 1.0) * xf - lq1) * (1.0 + _FAST_REL)


cdef double _sum_before(ci64 cells, ci64 times, ci64 values, ci64 pos, ci64 theta,
                        int64_t count, double xf, double lq1, Py_ssize_t c0, Py_ssize_t e,
                        bint gap_e, double *memo) except? -1.0:
    """The sum of the ``g·ln(1 − p)`` terms of a shared round's checks before event ``e``'s
    gap (its gap's too with ``gap_e``), added in check order from zero, as
    :func:`sketchsyn.counters.checks._round_sums` adds them; ``count``: ``N`` at ``c0``."""
    cdef int64_t cell = cells[c0], th = theta[cell], prev, gap, a
    cdef double total = 0.0
    cdef Py_ssize_t j
    for j in range(c0, e + 1):
        prev = pos[cell] if j == c0 else times[j - 1]
        gap = times[j] - prev - 1
        a = th - count
        if j == e and not gap_e:
            break
        if gap > 0:
            total += <double>gap * _stay(memo, xf, lq1, a)
        if j == e:
            break
        total += _stay(memo, xf, lq1, a - values[j])
        count += values[j]
    return total


ctypedef struct outcome:
    int64_t status
    int64_t at
    int64_t step
    int64_t nb


cdef outcome _shared_round(ci64 cells, ci64 times, ci64 values, Py_ssize_t c0, Py_ssize_t end,
                           bint resumed, ci64 forced_gap, ci64 forced_own, int64_t forced_first,
                           uint64_t k, double span, int64_t count, int64_t th, ci64 pos,
                           ci64 theta, double xf, double lq1, double *memo) except *:
    """One counter's round with one shared uniform (first bits ``k``, ``span``): its checks
    in order until the first whose ``ln U`` reaches the running sum of the terms (the
    reference: :func:`sketchsyn.counters.checks.scan` with ``Events.shared``). The running sum
    is added only once a check needs it: before that, ``m`` checks with trip probabilities at
    most ``p_max`` stay with probability at least ``1 − m·p_max`` (Bernoulli's inequality),
    so ``(k + span + 4095)·2^-64 < 1 − m·p_max − 2^-50`` proves they all stay. ``p_max`` is
    the bound of the checks up to the end of the current block of ``_BLOCK`` events
    (:func:`_p_bound`; every earlier check's probability is below it too)."""
    cdef outcome r
    cdef int64_t cell = cells[c0], n0 = count, prev, gap, a, f, a_own = th + 1, g
    cdef double u_hi = (<double>k + span + 4095.0) * _TWO64, ln_lo, ln_hi, base = 0.0, m = 0.0
    cdef double l1p, l1p_own = 0.0, p_max = -1.0
    cdef bint summed = False
    cdef decision d
    cdef Py_ssize_t e = c0, block_end = c0
    _log_bounds(k, span, &ln_lo, &ln_hi)
    while e < end:
        if not summed and e >= block_end:
            block_end = min(end, e + _BLOCK)
            p_max = _p_bound(values, e, block_end, th - count, xf, lq1)
        prev = pos[cell] if e == c0 else times[e - 1]
        gap = times[e] - prev - 1
        a = th - count
        if gap > 0:
            f = forced_first if e == c0 and resumed else forced_gap[e]
            m += <double>gap
            if not summed and (f >= 0 or (p_max >= 0.0 and u_hi < 1.0 - m * p_max - _ABS)):
                d.g, d.unsure = max(f, 0), False
            else:
                if not summed:
                    base = _sum_before(cells, times, values, pos, theta, n0, xf, lq1, c0, e,
                                       False, memo)
                    summed = True
                l1p = l1p_own if a == a_own else _stay(memo, xf, lq1, a)
                if f >= 0:
                    d.g, d.unsure = f, False
                else:
                    d = _decide_at(ln_lo, ln_hi, l1p, gap, base)
                base += <double>gap * l1p
            if d.unsure:
                r.status, r.at, r.step, r.nb = _GAP_UNSURE, e, prev, count
                return r
            if d.g > 0:
                r.status, r.at, r.step, r.nb = _GAP_TRIP, e, prev + d.g, count
                return r
        f = forced_own[e]
        m += 1.0
        if not summed and (f >= 0 or (p_max >= 0.0 and u_hi < 1.0 - m * p_max - _ABS)):
            d.g, d.unsure = max(f, 0), False
        else:
            if not summed:
                base = _sum_before(cells, times, values, pos, theta, n0, xf, lq1, c0, e, True,
                                   memo)
                summed = True
            a_own = a - values[e]
            l1p_own = _stay(memo, xf, lq1, a_own)
            if f >= 0:
                d.g, d.unsure = f, False
            else:
                d = _decide_at(ln_lo, ln_hi, l1p_own, 1, base)
            base += l1p_own
        if d.unsure:
            r.status, r.at, r.step, r.nb = _OWN_UNSURE, e, times[e], count
            return r
        if d.g > 0:
            r.status, r.at, r.step, r.nb = _OWN_TRIP, e, times[e], count
            return r
        count += values[e]
        e += 1
    r.status, r.at, r.step, r.nb = _CALM, end - 1, times[end - 1], count
    return r


cdef Py_ssize_t _scan(ci64 cells, ci64 times, ci64 values, ci64 ends, i64 cursor,
                      uint8_t[::1] rest, ci64 gap_row, cu64 gap_words, cu64 own_words,
                      ci64 forced_gap, ci64 forced_own, ci64 active, cu64 extra,
                      ci64 forced_extra, i64 n, ci64 theta, i64 pos, double xf, double span,
                      double own_span, int64_t window, bint chain, bint shared, i64 status,
                      i64 at, i64 step, i64 nb) except -1:
    cdef double lq1 = log1p(exp(-xf)), p_max = -1.0, own_lim = 0.0, wide
    cdef Py_ssize_t rounds = 0, i, e, c0, end, stop_step, block_end
    cdef int64_t grp, cell, count, th, prev, gap, a, f, st
    cdef uint64_t k
    cdef bint stop, left
    cdef decision d
    cdef outcome o
    cdef double memo[_MEMO]
    if shared:
        for i in range(_MEMO):
            memo[i] = 1.0
    while True:
        stop = False
        for i in range(active.shape[0]):
            grp = active[i]
            if cursor[grp] >= ends[grp]:
                # Done in an earlier chained round, of this call or of the call before a
                # settle: its calm results again (that round applied them).
                e = ends[grp] - 1
                status[i], at[i], step[i], nb[i] = _CALM, e, times[e], n[cells[e]]
                continue
            c0 = cursor[grp]
            end = min(ends[grp], c0 + window)
            cell = cells[c0]
            count = n[cell]
            th = theta[cell]
            if shared:
                o = _shared_round(cells, times, values, c0, end, rest[grp], forced_gap,
                                  forced_own, forced_extra[grp], extra[grp], span, count, th,
                                  pos, theta, xf, lq1, memo)
                status[i], at[i], step[i], nb[i] = o.status, o.at, o.step, o.nb
                stop = stop or o.status != _CALM
                continue
            st = _CALM
            e = c0
            stop_step = 0
            block_end = c0
            while e < end:
                if e >= block_end:
                    # The block's largest trip probability (a only falls as N grows): one
                    # bound for the cheap "no trip" test of its checks, -1 where it proves
                    # nothing.
                    block_end = min(end, e + _BLOCK)
                    p_max = _p_bound(values, e, block_end, th - count, xf, lq1)
                    own_lim = (1.0 - p_max - _ABS) / _TWO64 - own_span - 4095.0
                prev = pos[cell] if e == c0 else times[e - 1]
                gap = times[e] - prev - 1
                a = th - count
                if gap > 0:
                    if e == c0 and rest[grp]:
                        f, k, wide = forced_extra[grp], extra[grp], 1.0
                    else:
                        f, k, wide = forced_gap[e], gap_words[gap_row[e]], span
                    if f >= 0:
                        d.g, d.unsure = f, False
                    elif (p_max >= 0.0
                          and (<double>k + wide + 4095.0) * _TWO64 < 1.0 - gap * p_max - _ABS):
                        d.g, d.unsure = 0, False
                    else:
                        d = _decide(xf, lq1, a, gap, k, wide)
                    if d.unsure:
                        st, stop_step = _GAP_UNSURE, prev
                        break
                    if d.g > 0:
                        st, stop_step = _GAP_TRIP, prev + d.g
                        break
                f = forced_own[e]
                if f >= 0:
                    d.g, d.unsure = f, False
                elif p_max >= 0.0 and <double>own_words[e] < own_lim:
                    d.g, d.unsure = 0, False
                else:
                    d = _decide(xf, lq1, a - values[e], 1, own_words[e], own_span)
                if d.unsure:
                    st, stop_step = _OWN_UNSURE, times[e]
                    break
                if d.g > 0:
                    st, stop_step = _OWN_TRIP, times[e]
                    break
                count += values[e]
                e += 1
            if st == _CALM:
                e = end - 1
                stop_step = times[e]
            status[i] = st
            at[i] = e
            step[i] = stop_step
            nb[i] = count
            if st != _CALM:
                stop = True
        rounds += 1
        if stop or not chain or shared:
            return rounds
        left = False
        for i in range(active.shape[0]):
            grp = active[i]
            if cursor[grp] >= ends[grp]:
                continue
            e = at[i]
            n[cells[e]] = nb[i]
            pos[cells[e]] = times[e]
            cursor[grp] = e + 1
            rest[grp] = False
            left = left or e + 1 < ends[grp]
        if not left:
            return rounds


cdef int _same_length(str what, Py_ssize_t want, Py_ssize_t got) except -1:
    if got != want:
        raise ValueError(f"{what} has {got} entries, {want} expected")
    return 0


def scan(ci64 cells not None, ci64 times not None, ci64 values not None, ci64 ends not None,
         i64 cursor not None, uint8_t[::1] rest not None, ci64 gap_row not None,
         cu64 gap_words not None, cu64 own_words not None, ci64 forced_gap not None,
         ci64 forced_own not None, ci64 active not None, cu64 extra not None,
         ci64 forced_extra not None, i64 n not None, ci64 theta not None, i64 pos not None,
         double xf, double span, double own_span, int64_t window, bint chain, bint shared,
         i64 status not None, i64 at not None, i64 step not None, i64 nb not None):
    """:func:`sketchsyn.counters.checks.scan` into ``status``, ``at``, ``step``, ``nb``
    (``rest`` as uint8; ``span``, ``own_span``: the events' words'
    :attr:`~sketchsyn.counters.checks.Events.span` and ``own_span``).

    With ``chain``, a round in which no counter trips (or leaves a check undecided) is applied
    here (each counter's ``N``, last step and cursor move to its window's end, and ``rest``
    clears, as the bank does after a calm round) and the next round follows, until a round
    has a trip or no events are left. A round without a trip draws nothing, so the rounds and
    their draws are the numpy path's. Returns the number of rounds made. With ``shared``, each
    counter's checks share the uniform whose first bits are ``extra[group]``."""
    for what, arr in (("times", times), ("values", values), ("forced_own", forced_own),
                      ("forced_gap", forced_gap), ("gap_row", gap_row)):
        _same_length(what, cells.shape[0], arr.shape[0])
    if not shared:
        _same_length("own_words", cells.shape[0], own_words.shape[0])
    for what, arr in (("status", status), ("at", at), ("step", step), ("nb", nb)):
        _same_length(what, active.shape[0], arr.shape[0])
    if window < 1:
        raise ValueError(f"window must be at least 1, got {window}")
    return _scan(cells, times, values, ends, cursor, rest, gap_row, gap_words, own_words,
                 forced_gap, forced_own, active, extra, forced_extra, n, theta, pos, xf, span,
                 own_span, window, chain, shared, status, at, step, nb)


def layout(ci64 cells not None, ci64 times not None, ci64 pos not None, i64 starts not None,
           i64 gap not None, i64 gap_row not None):
    """:meth:`sketchsyn.counters.checks.Events.of`'s runs and gaps in one pass: ``starts``
    (the first event of each counter's run), ``gap`` (idle steps before each event) and
    ``gap_row`` (the event's row among those with a gap, −1 without); returns ``(runs, events
    with a gap)``.

    >>> i = np.int64
    >>> starts, gap, row = np.empty(3, i), np.empty(3, i), np.empty(3, i)
    >>> layout(np.array([0, 0, 1]), np.array([2, 3, 5]), np.zeros(2, i), starts, gap, row)
    (2, 2)
    >>> gap.tolist(), row.tolist()
    ([1, 0, 4], [0, -1, 1])
    """
    for what, arr in (("times", times), ("starts", starts), ("gap", gap), ("gap_row", gap_row)):
        _same_length(what, cells.shape[0], arr.shape[0])
    cdef Py_ssize_t runs = 0, idle = 0, i
    cdef int64_t prev = 0, g
    for i in range(cells.shape[0]):
        if i == 0 or cells[i] != cells[i - 1]:
            starts[runs] = i
            runs += 1
            prev = pos[cells[i]]
        else:
            prev = times[i - 1]
        g = times[i] - prev - 1
        gap[i] = g
        if g > 0:
            gap_row[i] = idle
            idle += 1
        else:
            gap_row[i] = -1
    return runs, idle


def by_cell(ci64 cells not None, ci64 times not None, ci64 values not None,
            i64 counts not None, i64 c not None, i64 t not None, i64 v not None):
    """The events sorted by cell, in their order within a cell (a stable counting sort; the
    order of ``np.argsort(cells, kind="stable")``): ``c``, ``t``, ``v`` get ``cells``,
    ``times``, ``values`` in that order. ``counts`` (zeros, one more than the cells) is used
    for the counts.

    >>> out, counts = np.empty((3, 3), np.int64), np.zeros(4, np.int64)
    >>> by_cell(np.array([2, 0, 2]), np.array([1, 2, 3]), np.ones(3, np.int64), counts, *out)
    >>> out[0].tolist(), out[1].tolist()
    ([0, 2, 2], [2, 1, 3])
    """
    for what, arr in (("times", times), ("values", values), ("c", c), ("t", t), ("v", v)):
        _same_length(what, cells.shape[0], arr.shape[0])
    cdef Py_ssize_t i, b
    cdef int64_t at
    for i in range(cells.shape[0]):
        counts[cells[i] + 1] += 1
    for b in range(1, counts.shape[0]):
        counts[b] += counts[b - 1]
    for i in range(cells.shape[0]):
        at = counts[cells[i]]
        counts[cells[i]] = at + 1
        c[at] = cells[i]
        t[at] = times[i]
        v[at] = values[i]


cdef inline bint _opens(int64_t mm, Py_ssize_t j) noexcept nogil:
    """Segment ``mm + 1`` (``mm`` segments closed before it) opens a block of level ``j`` of
    its binary mechanism: ``mm mod 2**(j+1) == 0``."""
    return (mm & ((<int64_t>1 << j) - 1)) == 0 and ((mm >> j) & 1) == 0


cdef (Py_ssize_t, Py_ssize_t) _tally(ci64 cells, ci64 row, ci64 segs, Py_ssize_t levels) except *:
    cdef Py_ssize_t new = 0, count = 0, i, j
    cdef int64_t c
    for i in range(cells.shape[0]):
        c = cells[i]
        if row[c] < 0:
            new += 1
        for j in range(levels):
            if _opens(segs[c], j):
                count += 1
    return new, count


def tally(ci64 cells not None, ci64 row not None, ci64 segs not None, Py_ssize_t levels):
    """For counters ``cells`` (distinct) about to close a segment: ``(new, opened)``, the
    number without a tree row yet, and the number of p-sums their segments ``m = segs + 1``
    open in binary mechanisms of ``levels`` levels: the numbers of rows and of noise draws
    :func:`close` takes.

    >>> tally(np.array([0, 1]), np.array([-1, 0]), np.array([0, 1]), 3)
    (1, 3)
    """
    if not 0 <= levels <= 62:
        raise ValueError(f"levels must be in [0, 62], got {levels}")
    return _tally(cells, row, segs, levels)


cdef int _close(ci64 cells, ci64 values, ci64 steps, i64 row, int64_t first_row, i64 segs,
                int64_t[:, ::1] acc, int64_t[:, ::1] done, i64 sub, i64 n, i64 theta, i64 pos,
                ci64 noise, ci64 thresholds, int64_t t0) except -1:
    cdef Py_ssize_t levels = acc.shape[1], k = 0, i, j
    cdef int64_t c, r, m, total
    if done.shape[1] != levels or done.shape[0] != acc.shape[0]:
        raise ValueError("done must have the shape of acc")
    if values.shape[0] < cells.shape[0] or steps.shape[0] < cells.shape[0] or (
            thresholds.shape[0] < cells.shape[0]):
        raise ValueError("values, steps and thresholds need an entry per cell")
    for i in range(cells.shape[0]):
        c = cells[i]
        if row[c] < 0:
            row[c] = first_row
            first_row += 1
        r = row[c]
        m = segs[c] + 1
        for j in range(levels):
            if _opens(m - 1, j):
                acc[r, j] = noise[k]
                k += 1
        total = 0
        for j in range(levels):
            acc[r, j] += values[i]
            if (m & ((<int64_t>1 << j) - 1)) == 0 and ((m >> j) & 1) == 1:
                done[r, j] = acc[r, j]
            if (m >> j) & 1:
                total += done[r, j]
        sub[c] = total
        n[c] = 0
        theta[c] = t0 + thresholds[i]
        pos[c] = steps[i]
        segs[c] = m
    return 0


def close(ci64 cells not None, ci64 values not None, ci64 steps not None, i64 row not None,
          int64_t first_row, i64 segs not None, int64_t[:, ::1] acc not None,
          int64_t[:, ::1] done not None, i64 sub not None, i64 n not None, i64 theta not None,
          i64 pos not None, ci64 noise not None, ci64 thresholds not None, int64_t t0):
    """:meth:`InhomogeneousSparseBank._close_segments` after its draws, one closing counter at
    a time: a counter without a tree row takes the next (from ``first_row``, in order), its
    segment is ``m = segs + 1``, each opened p-sum takes the next of ``noise`` (counters in
    order, levels upwards), every level adds the segment's count, the blocks that end copy to
    ``done``, the release sums ``done`` over the bits of ``m``, and ``N``, ``θ`` (``t0`` + the
    next of ``thresholds``), the last step and the segment count are set."""
    if acc.shape[1] > 62:
        raise ValueError("acc has more than 62 levels")
    _close(cells, values, steps, row, first_row, segs, acc, done, sub, n, theta, pos, noise,
           thresholds, t0)


cdef (Py_ssize_t, Py_ssize_t) _next_round(ci64 cursor, ci64 ends, ci64 group_cell, ci64 times,
                                          ci64 pos, uint8_t[::1] rest, i64 active,
                                          i64 fresh) except *:
    cdef Py_ssize_t na = 0, nf = 0, g
    for g in range(cursor.shape[0]):
        if cursor[g] >= ends[g]:
            continue
        active[na] = g
        na += 1
        if times[cursor[g]] - pos[group_cell[g]] - 1 <= 0:
            rest[g] = False
        if rest[g]:
            fresh[nf] = g
            nf += 1
    return na, nf


def next_round(ci64 cursor not None, ci64 ends not None, ci64 group_cell not None,
               ci64 times not None, ci64 pos not None, uint8_t[::1] rest not None,
               i64 active not None, i64 fresh not None):
    """The start of a round of :meth:`InhomogeneousSparseBank._records`: ``active`` gets the
    counters with events left (in order), ``rest`` (uint8) clears for those whose next event
    follows their last step, and ``fresh`` gets the active counters that still resume inside
    a tripped gap; returns ``(active, fresh)`` counts."""
    return _next_round(cursor, ends, group_cell, times, pos, rest, active, fresh)


cdef Py_ssize_t _finish(ci64 cells, ci64 times, ci64 values, i64 cursor, uint8_t[::1] rest,
                        ci64 active, ci64 status, ci64 at, ci64 step, ci64 nb, i64 n, i64 pos,
                        i64 t_cells, i64 t_values, i64 t_steps) except -1:
    cdef Py_ssize_t k = 0, i
    cdef int64_t grp, e, st, c
    for i in range(active.shape[0]):
        grp = active[i]
        e = at[i]
        st = status[i]
        if st == _CALM:
            c = cells[e]
            n[c] = nb[i]
            pos[c] = times[e]
            cursor[grp] = e + 1
            rest[grp] = False
            continue
        if st == _OWN_TRIP:
            cursor[grp] = e + 1
            rest[grp] = False
            t_values[k] = nb[i] + values[e]
        else:
            cursor[grp] = e
            rest[grp] = True
            t_values[k] = nb[i]
        t_cells[k] = cells[e]
        t_steps[k] = step[i]
        k += 1
    return k


def finish(ci64 cells not None, ci64 times not None, ci64 values not None, i64 cursor not None,
           uint8_t[::1] rest not None, ci64 active not None, ci64 status not None,
           ci64 at not None, ci64 step not None, ci64 nb not None, i64 n not None,
           i64 pos not None, i64 t_cells not None, i64 t_values not None, i64 t_steps not None):
    """:func:`sketchsyn.counters.checks.end_round` before the closes: a calm counter keeps its
    count and last step and moves past its window; one that tripped on its own event moves
    past it, one that tripped in a gap resumes at that event inside the gap (``rest``); the
    tripped ones (in order) go to ``t_cells``, ``t_values`` and ``t_steps``; returns how many
    tripped."""
    return _finish(cells, times, values, cursor, rest, active, status, at, step, nb, n, pos,
                   t_cells, t_values, t_steps)


cdef inline uint64_t _first_bits(words_t *src, int bits, Py_ssize_t i,
                                 uint32_t *w) noexcept nogil:
    """The ``i``-th of a round's uniforms' first ``bits`` bits, at the top of a 64-bit word,
    from the words :func:`sketchsyn.counters.checks.first_bits` draws: a 64-bit word each
    (``bits`` 64), a 32-bit word (17 to 32), or two bytes (at most 16: the low half of a fresh
    32-bit word for even ``i``, the high half of ``w``, the word before, for odd ``i``)."""
    cdef uint64_t half
    if bits == 64:
        return src.next64(src.state)
    if bits > 16:
        return (<uint64_t>src.next32(src.state) >> (32 - bits)) << (64 - bits)
    if i % 2 == 0:
        w[0] = src.next32(src.state)
        half = w[0] & 0xFFFF
    else:
        half = w[0] >> 16
    return (half >> (16 - bits)) << (64 - bits)


def rounds(int64_t stage, int64_t[::1] info not None, ci64 cells not None, ci64 times not None,
           ci64 values not None, ci64 ends not None, i64 cursor not None,
           uint8_t[::1] rest not None, ci64 gap_row not None, cu64 gap_words not None,
           cu64 own_words not None, ci64 forced_gap not None, ci64 forced_own not None,
           ci64 group_cell not None, uint64_t[::1] extra not None, i64 forced_extra not None,
           i64 n not None, i64 theta not None, i64 pos not None, i64 row not None,
           i64 segs not None, int64_t[:, ::1] acc not None, int64_t[:, ::1] done not None,
           i64 sub not None, double xf, double span, double own_span, int64_t window,
           int64_t t0, check_source, bint shared, int bits, sub_source, sub_plan,
           theta_source, theta_plan, int shift, int64_t[:, ::1] slots not None,
           int64_t[:, ::1] res not None, int64_t[:, ::1] tripped not None,
           uint32_t[::1] words not None, int64_t[:, ::1] scratch not None,
           i64 sub_noise not None, i64 thresholds not None):
    """:meth:`InhomogeneousSparseBank._records`' rounds in one loop, their draws included,
    from the bank's word sources (``*_source``: a seeded generator's numpy bit generator, or
    this thread's :class:`~sketchsyn.kernels.oswords.OSWords`): each round's start
    (:func:`next_round`; the fresh words of the counters resuming in a tripped gap, or with
    ``shared`` every active counter's uniform of the round), its checks (:func:`scan`), its
    end (:func:`finish`), the closes' noise (the sub-mechanism's draws, then the new
    thresholds, each the words :func:`~sketchsyn.privacy.noise._laplace_core` would draw)
    and :func:`close`, until no event is left (returns ``DONE``). It returns earlier for what
    Python does, at a stage it resumes from: a check the float margin left (``UNSURE``:
    settle it, resume at ``SCAN``), tree rows to grow (``GROW``: resume at ``TALLY``), a draw
    it could not finish (``BAIL_SUB`` / ``BAIL_THETA``: finish it from its ``info[_I_WORDS]``
    words into ``sub_noise`` / ``thresholds``, resume at ``THETA`` / ``CLOSE``). ``info``
    holds the counts between calls (``I_*``; ``I_ROUND`` counts the rounds started)."""
    cdef words_t check_w, sub_w, theta_w
    cdef plan_t sub_p, theta_p
    words_of(check_source, &check_w)
    words_of(sub_source, &sub_w)
    words_of(theta_source, &theta_w)
    plan_of(sub_plan, shift, &sub_p)
    plan_of(theta_plan, shift, &theta_p)
    cdef Py_ssize_t groups = cursor.shape[0]
    if info.shape[0] != 7 or not 0 <= stage <= 4:
        raise ValueError("info must have 7 entries and stage be 0 … 4")
    if not (slots.shape[0] == 2 and res.shape[0] == 4 and tripped.shape[0] == 3
            and scratch.shape[0] == 4):
        raise ValueError("slots, res, tripped and scratch must have 2, 4, 3 and 4 rows")
    if min(slots.shape[1], res.shape[1], tripped.shape[1], thresholds.shape[0]) < groups:
        raise ValueError("slots, res, tripped and thresholds need a column per group")
    if not 1 <= bits <= 64 or acc.shape[1] > 62 or window < 1:
        raise ValueError(f"bits {bits}, acc's {acc.shape[1]} levels or window {window} "
                         f"out of range")
    for what, arr in (("ends", ends), ("rest", rest), ("group_cell", group_cell),
                      ("extra", extra), ("forced_extra", forced_extra)):
        _same_length(what, groups, arr.shape[0])
    for what, arr in (("times", times), ("values", values), ("forced_own", forced_own),
                      ("forced_gap", forced_gap), ("gap_row", gap_row)):
        _same_length(what, cells.shape[0], arr.shape[0])
    if not shared:
        _same_length("own_words", cells.shape[0], own_words.shape[0])
    cdef Py_ssize_t levels = acc.shape[1], na, nf, i, k, new, opened, got
    cdef int64_t g
    cdef uint32_t w = 0
    cdef uint32_t *wp
    cdef int64_t *zp
    cdef int64_t *sp = &scratch[0, 0] if scratch.shape[1] else NULL
    while True:
        if stage == _START:
            na, nf = _next_round(cursor, ends, group_cell, times, pos, rest, slots[0], slots[1])
            if na == 0:
                return _DONE
            info[_I_ROUND] += 1
            if shared:
                for i in range(na):
                    g = slots[0, i]
                    extra[g] = _first_bits(&check_w, bits, i, &w)
                    forced_extra[g] = -1
            else:
                for i in range(nf):
                    g = slots[1, i]
                    extra[g] = check_w.next64(check_w.state)
                    forced_extra[g] = -1
            info[_I_ACTIVE] = na
            stage = _SCAN
        na = info[_I_ACTIVE]
        if not 0 <= na <= groups:
            raise ValueError(f"info[_I_ACTIVE] = {na} is not a number of groups")
        if stage == _SCAN:
            _scan(cells, times, values, ends, cursor, rest, gap_row, gap_words, own_words,
                  forced_gap, forced_own, slots[0, :na], extra, forced_extra, n, theta, pos, xf,
                  span, own_span, window, True, shared, res[0, :na], res[1, :na], res[2, :na],
                  res[3, :na])
            for i in range(na):
                if res[0, i] >= _GAP_UNSURE:
                    return _UNSURE
            k = _finish(cells, times, values, cursor, rest, slots[0, :na], res[0, :na],
                        res[1, :na], res[2, :na], res[3, :na], n, pos, tripped[0], tripped[1],
                        tripped[2])
            if k == 0:
                stage = _START
                continue
            info[_I_TRIPPED] = k
            stage = _TALLY
        k = info[_I_TRIPPED]
        if not 0 <= k <= groups:
            raise ValueError(f"info[_I_TRIPPED] = {k} is not a number of groups")
        if stage == _TALLY:
            new, opened = _tally(tripped[0, :k], row, segs, levels)
            info[_I_NEW] = new
            info[_I_OPENED] = opened
            if info[_I_ROWS] + new > acc.shape[0]:
                return _GROW
            if opened:
                if opened > sub_noise.shape[0] or opened > words.shape[0]:
                    raise ValueError("sub_noise and words need room for every opened p-sum")
                wp, zp = &words[0], &sub_noise[0]
                with nogil:
                    got = c_lap_draw(&sub_w, opened, &sub_p, shift, wp, words.shape[0], zp, sp,
                                     scratch.shape[1])
                if got == BAD_TABLE:
                    raise ValueError("rounds: a table's guide points outside its thresholds")
                if got < 0:
                    info[_I_WORDS] = -got - 1
                    return _BAIL_SUB
            stage = _THETA
        if stage == _THETA:
            if k > words.shape[0]:
                raise ValueError("words needs room for every threshold")
            wp, zp = &words[0], &thresholds[0]
            with nogil:
                got = c_lap_draw(&theta_w, k, &theta_p, shift, wp, words.shape[0], zp, sp,
                                 scratch.shape[1])
            if got == BAD_TABLE:
                raise ValueError("rounds: a table's guide points outside its thresholds")
            if got < 0:
                info[_I_WORDS] = -got - 1
                return _BAIL_THETA
        if not 0 <= info[_I_OPENED] <= sub_noise.shape[0]:
            raise ValueError(f"info[_I_OPENED] = {info[_I_OPENED]} is past sub_noise")
        _close(tripped[0, :k], tripped[1, :k], tripped[2, :k], row, info[_I_ROWS], segs, acc,
               done, sub, n, theta, pos, sub_noise[: info[_I_OPENED]], thresholds[:k], t0)
        info[_I_ROWS] += info[_I_NEW]
        stage = _START
