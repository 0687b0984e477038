"""Optional compiled kernels of the sparse counters' batched checks (the ``fast`` extra: numba).

:func:`scan` is :func:`sketchsyn.counters.checks.scan` as one loop: each active counter decides
its events from its cursor, one check at a time, and stops at its first trip (or an undecided
check, or its window). The numpy reference decides a whole window in about forty array passes,
and throws away what follows each counter's first trip; the loop decides each check once. The
float decisions are the reference's (:func:`sketchsyn.counters.sparse.trip_decisions`), made
with the same margin, so both give the same outcomes for the same words: an outcome the margin
proves is the exact one, and a check either path leaves undecided is settled exactly by the
bank (``tests/test_sparsebank.py`` compares both paths).

The kernels are compiled with PrivHP's, by :mod:`sketchsyn.accel` (numba's cached machine code,
started on a thread of its own once a process has counted enough rows; see
:func:`sketchsyn.accel.ready`).

>>> import numpy as np
>>> from sketchsyn.counters import checks
>>> from sketchsyn.privacy.rng import as_source
>>> def events():
...     return checks.Events.of(np.array([0, 0]), np.array([3, 9]), np.ones(2, int),
...                             np.zeros(1, int), as_source(0))
>>> rest = (np.arange(1), np.zeros(1, np.uint64), np.full(1, -1))
>>> def state():
...     return dict(n=np.zeros(1, int), theta=np.full(1, 10**6), pos=np.zeros(1, int), xf=0.5,
...                 window=4096)
>>> got = run(events(), *rest, **state())  # (the compiled loop once the kernels are ready)
>>> [a.tolist() for a in got] == [a.tolist() for a in checks.scan(events(), *rest, **state())]
True
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import accel
from ..privacy import kernels as draws  # lap_draw: compiled before this module's kernels
from . import checks
from .sparse import _ABS, _REL, _TWO64

__all__ = [
    "KERNELS",
    "by_cell",
    "close",
    "finish",
    "layout",
    "next_round",
    "rounds",
    "run",
    "scan",
    "tally",
]

_FAST_REL = 2.0**-20

_CALM, _GAP_TRIP, _OWN_TRIP = checks.CALM, checks.GAP_TRIP, checks.OWN_TRIP
_GAP_UNSURE, _OWN_UNSURE = checks.GAP_UNSURE, checks.OWN_UNSURE

#: The kernels in the order they are compiled (callees first).
KERNELS = (
    "_log_bounds",
    "_log_stay",
    "_decide_at",
    "_decide",
    "_sum_before",
    "_shared_round",
    "_opens",
    "_first_bits",
    "scan",
    "layout",
    "tally",
    "close",
    "next_round",
    "finish",
    "by_cell",
    "rounds",
)


def _decide(xf: Any, lq1: Any, a: Any, s: Any, k: Any, span: Any) -> tuple[int, bool]:
    """``(G, unsure)`` of one entry of :func:`~sketchsyn.counters.sparse.trip_decisions`
    (``U`` in ``[k, k + span)·2^-64``: ``span`` 1, or ``2^(64 − b)`` when ``k`` holds only the
    uniform's first ``b`` bits).

    First a cheaper sufficient test of "no trip" for ``a ≥ 0``, in the uniform's own scale:
    ``U < (k + 1)/2^64`` and ``(1 − p)^s ≥ 1 − s·p`` (Bernoulli's inequality), so
    ``(k + span + 4095)·2^-64 < 1 − s·p·(1 + 2^-20) − 2^-50`` proves ``U < (1 − p)^s``. The slack
    covers the float rounding of ``k`` (``2^11``), of ``p = e^{−(a+1)x − ln(1+e^{−x})}`` (a
    relative error of a few ulps plus ``(a+1)·x·2^-52`` from the argument: below ``2^-40``
    wherever ``(a+1)·x < 800``, and beyond that ``p < e^{−799}``, so ``s·p`` is far below the
    absolute ``2^-50``) and of the sums (``2^-53`` each).
    Where it proves nothing the reference's decision follows, unchanged."""
    kf = float(k)
    if a >= 0:
        sp = float(s) * math.exp(-(float(a) + 1.0) * xf - lq1)
        if (kf + span + 4095.0) * _TWO64 < 1.0 - sp * (1.0 + _FAST_REL) - _ABS:
            return 0, False
    ln_lo, ln_hi = _log_bounds(k, span)
    return _decide_at(ln_lo, ln_hi, _log_stay(xf, lq1, a), s, 0.0)


def _log_bounds(k: Any, span: Any) -> tuple[float, float]:
    """``ln`` of the ends of ``U``'s interval ``[k, k + span)·2^-64``, widened by the margin
    of :func:`~sketchsyn.counters.sparse.trip_decisions`."""
    kf = float(k)
    ln_lo = math.log(kf * _TWO64) if kf > 0.0 else -math.inf
    ln_hi = math.log((kf + span) * _TWO64)
    return ln_lo - (abs(ln_lo) * _REL + _ABS), ln_hi + (abs(ln_hi) * _REL + _ABS)


def _log_stay(xf: Any, lq1: Any, a: Any) -> float:
    """``ln(1 − p)``, ``p = P(λ > a)`` (:func:`sketchsyn.counters.sparse._log_stay`)."""
    af = float(a)
    if a >= 0:
        return math.log1p(-math.exp(-(af + 1.0) * xf - lq1))
    return af * xf - lq1


def _decide_at(ln_lo: Any, ln_hi: Any, l1p: Any, s: Any, base: Any) -> tuple[int, bool]:
    """``(G, unsure)`` of ``s`` checks of ``ln(1 − p) = l1p`` after checks that stayed with
    probability ``e^base``, for ``ln U`` in ``[ln_lo, ln_hi]``: the decision of
    :func:`~sketchsyn.counters.sparse.trip_decisions` (``base`` its argument), the same
    margins."""
    sf = float(s)
    target = base + sf * l1p
    tol = abs(target) * _REL + _ABS
    if ln_hi < target - tol:
        return 0, False  # no check of the s trips
    if not ln_lo > target + tol:
        return 0, True
    guess = sf
    if l1p != 0.0:
        q = math.ceil((0.5 * (ln_lo + ln_hi) - base) / l1p)
        if math.isfinite(q):
            guess = q
    guess = min(max(guess, 1.0), max(sf, 1.0))
    target = base + guess * l1p
    tol = abs(target) * _REL + _ABS
    at_g = ln_lo > target + tol
    before = guess == 1.0
    if not before:
        target = base + (guess - 1.0) * l1p
        tol = abs(target) * _REL + _ABS
        before = ln_hi < target - tol
    if at_g and before:
        return int(guess), False
    return 0, True


def _sum_before(cells: Any, times: Any, values: Any, pos: Any, theta: Any, count: Any, xf: Any,
                lq1: Any, c0: Any, e: Any, gap_e: Any) -> float:  # fmt: skip
    """The sum of the ``g·ln(1 − p)`` terms of a shared round's checks before event ``e``'s
    gap (its gap's too with ``gap_e``), added in check order from zero, as
    :func:`sketchsyn.counters.checks._round_sums` adds them; ``count``: ``N`` at ``c0``."""
    cell = cells[c0]
    th = theta[cell]
    total = 0.0
    for j in range(c0, e + 1):
        prev = pos[cell] if j == c0 else times[j - 1]
        gap = times[j] - prev - 1
        a = th - count
        if j == e and not gap_e:
            break
        if gap > 0:
            total += float(gap) * _log_stay(xf, lq1, a)
        if j == e:
            break
        total += _log_stay(xf, lq1, a - values[j])
        count += values[j]
    return total


def _shared_round(cells: Any, times: Any, values: Any, c0: Any, end: Any, resumed: Any,
                  forced_gap: Any, forced_own: Any, forced_first: Any, k: Any, span: Any,
                  count: Any, th: Any, pos: Any, theta: Any, xf: Any, lq1: Any,
                  p_max: Any) -> tuple[int, int, int, int]:  # fmt: skip
    """One counter's round with one shared uniform (first bits ``k``, ``span``): its checks
    in order until the first whose ``ln U`` reaches the running sum of the terms (the
    reference: :func:`sketchsyn.counters.checks.scan` with ``Events.shared``). Returns
    ``(status, at, step, N)`` as :func:`scan` writes them.

    The running sum is added only once a check needs it: before that, ``m`` checks with trip
    probabilities at most ``p_max`` (the window's bound, as in :func:`scan`) stay with
    probability at least ``1 − m·p_max`` (Bernoulli's inequality again), so
    ``(k + span + 4095)·2^-64 < 1 − m·p_max − 2^-50`` proves they all stay; the first check it
    cannot prove adds the sum of the ones before it (:func:`_sum_before`) and decides exactly as
    the reference does."""
    cell = cells[c0]
    n0 = count
    u_hi = (float(k) + span + 4095.0) * _TWO64
    ln_lo, ln_hi = _log_bounds(k, span)
    summed = p_max < 0.0  # the running sum `base` is kept (else the bound decides)
    base = 0.0
    m = 0.0  # checks so far
    # ln(1 − p) of the last own check, at a = a_own: the next gap's, when no value came between
    a_own, l1p_own = th + 1, 0.0
    e = c0
    while e < end:
        prev = pos[cell] if e == c0 else times[e - 1]
        gap = times[e] - prev - 1
        a = th - count
        if gap > 0:
            f = forced_first if e == c0 and resumed else forced_gap[e]
            m += float(gap)
            if not summed and (f >= 0 or u_hi < 1.0 - m * p_max - _ABS):
                g, unsure = max(f, 0), False
            else:
                if not summed:
                    base = _sum_before(cells, times, values, pos, theta, n0, xf, lq1, c0, e,
                                       False)  # fmt: skip
                    summed = True
                l1p = l1p_own if a == a_own else _log_stay(xf, lq1, a)
                g, unsure = (f, False) if f >= 0 else _decide_at(ln_lo, ln_hi, l1p, gap, base)
                base += float(gap) * l1p
            if unsure:
                return _GAP_UNSURE, e, prev, count
            if g > 0:
                return _GAP_TRIP, e, prev + g, count
        f = forced_own[e]
        m += 1.0
        if not summed and (f >= 0 or u_hi < 1.0 - m * p_max - _ABS):
            o, unsure = max(f, 0), False
        else:
            if not summed:
                base = _sum_before(cells, times, values, pos, theta, n0, xf, lq1, c0, e, True)
                summed = True
            a_own = a - values[e]
            l1p_own = _log_stay(xf, lq1, a_own)
            o, unsure = (f, False) if f >= 0 else _decide_at(ln_lo, ln_hi, l1p_own, 1, base)
            base += l1p_own
        if unsure:
            return _OWN_UNSURE, e, times[e], count
        if o > 0:
            return _OWN_TRIP, e, times[e], count
        count += values[e]
        e += 1
    return _CALM, end - 1, times[end - 1], count


def scan(cells: Any, times: Any, values: Any, ends: Any, cursor: Any, rest: Any, gap_row: Any,
         gap_words: Any, own_words: Any, forced_gap: Any, forced_own: Any, active: Any,
         extra: Any, forced_extra: Any, n: Any, theta: Any, pos: Any, xf: Any, span: Any,
         own_span: Any, window: Any, chain: Any, shared: Any, status: Any, at: Any,
         step: Any, nb: Any) -> int:  # fmt: skip
    """:func:`sketchsyn.counters.checks.scan` into ``status``, ``at``, ``step``, ``nb``
    (``span``, ``own_span``: the events' words'
    :attr:`~sketchsyn.counters.checks.Events.span` and ``own_span``; a resumed counter's fresh
    words are whole 64-bit words).

    With ``chain``, a round in which no counter trips (or leaves a check undecided) is applied
    here (each counter's ``N``, last step and cursor move to its window's end, and ``rest``
    clears, as the bank does after a calm round) and the next round follows, until a round
    has a trip or no events are left. A round without a trip draws nothing, so the rounds and
    their draws are the numpy path's. The outputs are the last round's; a counter done in an
    earlier chained round (of this call, or of the call the bank made before settling a check
    and scanning again) gets its calm results. Returns the number of rounds made.

    With ``shared`` (:attr:`~sketchsyn.counters.checks.Events.shared`), each counter's checks
    share the uniform whose first bits are ``extra[group]`` (``span``): :func:`_shared_round`.
    A counter takes a fresh uniform each round, so such rounds are not chained."""
    lq1 = math.log1p(math.exp(-xf))
    rounds = 0
    while True:
        stop = False
        for i in range(active.size):
            grp = active[i]
            if cursor[grp] >= ends[grp]:
                # Done in an earlier chained round, of this call or of the call before a settle:
                # its calm results again (that round applied them: N, last step, cursor).
                e = ends[grp] - 1
                status[i], at[i], step[i], nb[i] = _CALM, e, times[e], n[cells[e]]
                continue
            c0 = cursor[grp]
            end = min(ends[grp], c0 + window)
            cell = cells[c0]
            count = n[cell]
            th = theta[cell]
            # The window's largest trip probability (a only falls as N grows): one bound for the
            # cheap "no trip" test of every check below (see _decide), -1 where it proves nothing.
            p_max = -1.0
            a_min = th - count
            for e in range(c0, end):
                a_min -= values[e]
            if a_min >= 0:
                p_max = math.exp(-(float(a_min) + 1.0) * xf - lq1) * (1.0 + _FAST_REL)
            if shared:
                status[i], at[i], step[i], nb[i] = _shared_round(
                    cells, times, values, c0, end, rest[grp], forced_gap, forced_own,
                    forced_extra[grp], extra[grp], span, count, th, pos, theta, xf, lq1,
                    p_max,
                )  # fmt: skip
                stop = stop or status[i] != _CALM
                continue
            own_lim = (1.0 - p_max - _ABS) / _TWO64 - own_span - 4095.0
            st = _CALM
            e = c0
            stop_step = 0
            while e < end:
                prev = pos[cell] if e == c0 else times[e - 1]
                gap = times[e] - prev - 1
                a = th - count
                if gap > 0:
                    if e == c0 and rest[grp]:
                        f, k, wide = forced_extra[grp], extra[grp], 1.0
                    else:
                        f, k, wide = forced_gap[e], gap_words[gap_row[e]], span
                    if f >= 0:
                        g, unsure = f, False
                    elif (
                        p_max >= 0.0
                        and (float(k) + wide + 4095.0) * _TWO64 < 1.0 - gap * p_max - _ABS
                    ):
                        g, unsure = 0, False
                    else:
                        g, unsure = _decide(xf, lq1, a, gap, k, wide)
                    if unsure:
                        st, stop_step = _GAP_UNSURE, prev
                        break
                    if g > 0:
                        st, stop_step = _GAP_TRIP, prev + g
                        break
                f = forced_own[e]
                if f >= 0:
                    o, unsure = f, False
                elif p_max >= 0.0 and float(own_words[e]) < own_lim:
                    o, unsure = 0, False
                else:
                    o, unsure = _decide(xf, lq1, a - values[e], 1, own_words[e], own_span)
                if unsure:
                    st, stop_step = _OWN_UNSURE, times[e]
                    break
                if o > 0:
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
        for i in range(active.size):
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


def layout(
    cells: Any, times: Any, pos: Any, starts: Any, gap: Any, gap_row: Any
) -> tuple[int, int]:
    """:meth:`sketchsyn.counters.checks.Events.of`'s runs and gaps in one pass: ``starts`` (the
    first event of each counter's run), ``gap`` (idle steps before each event) and ``gap_row``
    (the event's row among those with a gap, −1 without); returns ``(runs, events with a
    gap)``."""
    runs = 0
    idle = 0
    for i in range(cells.size):
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


def by_cell(cells: Any, times: Any, values: Any, counts: Any, c: Any, t: Any, v: Any) -> None:
    """The events sorted by cell, in their order within a cell (a stable counting sort; the
    order of ``np.argsort(cells, kind="stable")``): ``c``, ``t``, ``v`` get ``cells``,
    ``times``, ``values`` in that order. ``counts`` (zeros, one more than the cells) is used
    for the counts."""
    for i in range(cells.size):
        counts[cells[i] + 1] += 1
    for b in range(1, counts.size):
        counts[b] += counts[b - 1]
    for i in range(cells.size):
        at = counts[cells[i]]
        counts[cells[i]] = at + 1
        c[at] = cells[i]
        t[at] = times[i]
        v[at] = values[i]


def _opens(mm: Any, j: Any) -> bool:
    """Segment ``mm + 1`` (``mm`` segments closed before it) opens a block of level ``j`` of its
    binary mechanism: ``mm mod 2**(j+1) == 0`` (only the blocks at even 0-based indices are
    ever part of a release)."""
    return (mm & ((1 << j) - 1)) == 0 and ((mm >> j) & 1) == 0


def tally(cells: Any, row: Any, segs: Any, levels: Any) -> tuple[int, int]:
    """For counters ``cells`` (distinct) about to close a segment: ``(new, opened)``, the number
    without a tree row yet, and the number of p-sums their segments ``m = segs + 1`` open in
    binary mechanisms of ``levels`` levels (level ``j`` opens a block at segment ``m`` when
    ``(m − 1) mod 2**(j+1) == 0``): the numbers of rows and of noise draws :func:`close` takes.
    """
    new = 0
    count = 0
    for i in range(cells.size):
        c = cells[i]
        if row[c] < 0:
            new += 1
        for j in range(levels):
            if _opens(segs[c], j):
                count += 1
    return new, count


def close(cells: Any, values: Any, steps: Any, row: Any, first_row: Any, segs: Any, acc: Any,
          done: Any, sub: Any, n: Any, theta: Any, pos: Any, noise: Any, thresholds: Any,
          t0: Any) -> None:  # fmt: skip
    """:meth:`InhomogeneousSparseBank._close_segments` after its draws, one closing counter at a
    time: a counter without a tree row takes the next (from ``first_row``, in order), its
    segment is ``m = segs + 1``, each opened p-sum takes the next of ``noise`` (counters in
    order, levels upwards, as the numpy path's ``nonzero`` orders them), every level adds the
    segment's count, the blocks that end copy to ``done``, the release sums ``done`` over the
    bits of ``m``, and ``N``, ``θ`` (``t0`` + the next of ``thresholds``), the last step and
    the segment count are set."""
    levels = acc.shape[1]
    k = 0
    for i in range(cells.size):
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
            if (m & ((1 << j) - 1)) == 0 and ((m >> j) & 1) == 1:
                done[r, j] = acc[r, j]
            if (m >> j) & 1:
                total += done[r, j]
        sub[c] = total
        n[c] = 0
        theta[c] = t0 + thresholds[i]
        pos[c] = steps[i]
        segs[c] = m


def next_round(cursor: Any, ends: Any, group_cell: Any, times: Any, pos: Any, rest: Any,
               active: Any, fresh: Any) -> tuple[int, int]:  # fmt: skip
    """The start of a round of :meth:`InhomogeneousSparseBank._records`: ``active`` gets the
    counters with events left (in order), ``rest`` clears for those whose next event follows
    their last step (no idle step left to draw), and ``fresh`` gets the active counters that
    still resume inside a tripped gap; returns ``(active, fresh)`` counts."""
    na = 0
    nf = 0
    for g in range(cursor.size):
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


def finish(cells: Any, times: Any, values: Any, cursor: Any, rest: Any, active: Any, status: Any,
           at: Any, step: Any, nb: Any, n: Any, pos: Any, t_cells: Any, t_values: Any,
           t_steps: Any) -> int:  # fmt: skip
    """:meth:`InhomogeneousSparseBank._end_round` before its closes: a calm counter keeps its
    count and last step and moves past its window; one that tripped on its own event moves
    past it, one that tripped in a gap resumes at that event inside the gap (``rest``); the
    tripped ones (in order) go to ``t_cells``, ``t_values`` (the segment's count, the own
    event's value included) and ``t_steps``; returns how many tripped."""
    k = 0
    for i in range(active.size):
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


def _first_bits(u32: Any, u64: Any, state: Any, bits: Any, i: Any, w: Any) -> tuple[Any, Any]:
    """The ``i``-th of a round's uniforms' first ``bits`` bits, at the top of a 64-bit word,
    from the words :func:`sketchsyn.counters.checks.first_bits` draws: a 64-bit word each
    (``bits`` 64), a 32-bit word (17 to 32), or two bytes (at most 16: the low half of a fresh
    32-bit word for even ``i``, the high half of ``w``, the word before, for odd ``i``, as
    the source's bytes are the words' bytes, low first). Returns the uniform's word and the
    32-bit word of the pair."""
    if bits == 64:
        return u64(state), w
    if bits > 16:
        return (np.uint64(u32(state)) >> np.uint64(32 - bits)) << np.uint64(64 - bits), w
    if i % 2 == 0:
        w = u32(state)
        half = np.uint64(w & np.uint32(0xFFFF))
    else:
        half = np.uint64(w >> np.uint32(16))
    return (half >> np.uint64(16 - bits)) << np.uint64(64 - bits), w


# rounds(): what it returns, the stage a call starts at, and the slots of its ``info`` array.
DONE, UNSURE, GROW, BAIL_SUB, BAIL_THETA = 0, 1, 2, 3, 4
START, SCAN, TALLY, THETA, CLOSE = 0, 1, 2, 3, 4
I_ACTIVE, I_TRIPPED, I_NEW, I_OPENED, I_ROWS, I_WORDS, I_ROUND = 0, 1, 2, 3, 4, 5, 6


def rounds(stage: Any, info: Any, cells: Any, times: Any, values: Any, ends: Any, cursor: Any,
           rest: Any, gap_row: Any, gap_words: Any, own_words: Any, forced_gap: Any,
           forced_own: Any, group_cell: Any, extra: Any, forced_extra: Any, n: Any, theta: Any,
           pos: Any, row: Any, segs: Any, acc: Any, done: Any, sub: Any, xf: Any, span: Any,
           own_span: Any, window: Any, t0: Any, check_state: Any, check_u32: Any,
           check_u64: Any, shared: Any, bits: Any, sub_state: Any, sub_u32: Any, sub_plan: Any,
           theta_state: Any, theta_u32: Any, theta_plan: Any, shift: Any, slots: Any, res: Any,
           tripped: Any, words: Any, scratch: Any, sub_noise: Any,
           thresholds: Any) -> int:  # fmt: skip
    """:meth:`InhomogeneousSparseBank._records`' rounds in one loop, their draws included, for
    a bank whose sources the loop calls itself (``*_state``, ``*_u32``, ``*_u64``: a seeded
    generator's :meth:`~sketchsyn.privacy.rng.RandomSource.word_functions`, or the OS CSPRNG's
    :func:`sketchsyn.privacy.oswords.word_functions`): each round's start
    (:func:`next_round`, the fresh words of the counters resuming in a tripped gap; with
    ``shared``, every active counter's uniform of the round: :func:`_first_bits`), its checks
    (:func:`scan`), its end (:func:`finish`), the closes' noise (the sub-mechanism's draws,
    then the new thresholds, each the words :func:`~sketchsyn.privacy.noise._laplace_core`
    would draw) and :func:`close`, until no event is left (returns ``DONE``). It returns
    earlier for what Python does, at a stage it resumes from: a check the float margin left
    (``UNSURE``: settle it, resume at ``SCAN``), tree rows to grow (``GROW``: resume at
    ``TALLY``), a draw :func:`lap_draw` could not finish (``BAIL_SUB`` / ``BAIL_THETA``:
    finish it from its ``info[I_WORDS]`` words into ``sub_noise`` / ``thresholds``, resume at
    ``THETA`` / ``CLOSE``). ``info`` holds the counts between calls (``I_*``; ``I_ROUND``
    counts the rounds started, so that the caller knows which round an open check is of)."""
    levels = acc.shape[1]
    w = np.uint32(0)
    while True:
        if stage == START:
            na, nf = next_round(cursor, ends, group_cell, times, pos, rest, slots[0], slots[1])
            if na == 0:
                return DONE
            info[I_ROUND] += 1
            if shared:
                for i in range(na):
                    g = slots[0, i]
                    extra[g], w = _first_bits(check_u32, check_u64, check_state, bits, i, w)
                    forced_extra[g] = -1
            else:
                for i in range(nf):
                    g = slots[1, i]
                    extra[g] = check_u64(check_state)
                    forced_extra[g] = -1
            info[I_ACTIVE] = na
            stage = SCAN
        na = info[I_ACTIVE]
        if stage == SCAN:
            active = slots[0, :na]
            status, at, step, nb = res[0, :na], res[1, :na], res[2, :na], res[3, :na]
            scan(cells, times, values, ends, cursor, rest, gap_row, gap_words, own_words,
                 forced_gap, forced_own, active, extra, forced_extra, n, theta, pos, xf, span,
                 own_span, window, True, shared, status, at, step, nb)  # fmt: skip
            for i in range(na):
                if status[i] >= _GAP_UNSURE:
                    return UNSURE
            k = finish(cells, times, values, cursor, rest, active, status, at, step, nb, n, pos,
                       tripped[0], tripped[1], tripped[2])  # fmt: skip
            if k == 0:
                stage = START
                continue
            info[I_TRIPPED] = k
            stage = TALLY
        k = info[I_TRIPPED]
        if stage == TALLY:
            new, opened = tally(tripped[0, :k], row, segs, levels)
            info[I_NEW] = new
            info[I_OPENED] = opened
            if info[I_ROWS] + new > acc.shape[0]:
                return GROW
            if opened:
                got = draws.lap_draw(sub_u32, sub_state, opened, sub_plan, shift, words,
                                     sub_noise, scratch)  # fmt: skip
                if got < 0:
                    info[I_WORDS] = -got - 1
                    return BAIL_SUB
            stage = THETA
        if stage == THETA:
            got = draws.lap_draw(theta_u32, theta_state, k, theta_plan, shift, words,
                                 thresholds, scratch)  # fmt: skip
            if got < 0:
                info[I_WORDS] = -got - 1
                return BAIL_THETA
        close(tripped[0, :k], tripped[1, :k], tripped[2, :k], row, info[I_ROWS], segs, acc, done,
              sub, n, theta, pos, sub_noise[: info[I_OPENED]], thresholds[:k], t0)  # fmt: skip
        info[I_ROWS] += info[I_NEW]
        stage = START


def run(
    ev: checks.Events, active: np.ndarray, extra: np.ndarray, forced_extra: np.ndarray, **state: Any
) -> tuple[np.ndarray, ...]:
    """:func:`sketchsyn.counters.checks.scan`'s call (``state``: its keywords ``n``, ``theta``,
    ``pos``, ``xf``, ``window``) and results, by the compiled :func:`scan`, rounds without a
    trip chained (the bank's state moves on through them; what it applies after the call then
    changes nothing for them)."""
    out = np.empty((4, active.size), dtype=np.int64)  # status, at, step, nb
    scan(ev.cells, ev.times, ev.values, ev.ends, ev.cursor, ev.rest, ev.gap_row, ev.gap_words,
         ev.own_words, ev.forced_gap, ev.forced_own, active, extra, forced_extra, state["n"],
         state["theta"], state["pos"], float(state["xf"]), float(ev.span), float(ev.own_span),
         int(state["window"]), True, bool(ev.shared), *out)  # fmt: skip
    return tuple(out)


def _warm_up_rounds(ev: checks.Events) -> None:
    """One call of :func:`rounds` with the bank's argument types (a PCG64's word functions)."""
    from fractions import Fraction

    from ..privacy.noise import laplace_plan
    from ..privacy.rng import as_source

    src = as_source(0)  # held while its generator's state is drawn from
    fns = src.word_functions()
    assert fns is not None
    state, u32, u64 = fns
    plan = laplace_plan(Fraction(3))
    g = ev.starts.size
    i64 = np.int64
    rounds(START, np.zeros(7, i64), ev.cells, ev.times, ev.values, ev.ends, ev.cursor.copy(),
           ev.rest.copy(), ev.gap_row, ev.gap_words, ev.own_words, ev.forced_gap.copy(),
           ev.forced_own.copy(), ev.group_cell, np.zeros(g, np.uint64), np.full(g, -1, i64),
           np.zeros(1, i64), np.full(1, 10**6, i64), np.zeros(1, i64), np.full(1, -1, i64),
           np.zeros(1, i64), np.zeros((1, 3), i64), np.zeros((1, 3), i64), np.zeros(1, i64),
           0.5, 1.0, 1.0, 4096, 0, state, u32, u64, False, 64, state, u32, plan, state, u32,
           plan, 20,
           np.empty((2, g), i64), np.empty((4, g), i64), np.empty((3, g), i64),
           np.empty(8 * g, np.uint32), np.empty((4, 3 * g), i64), np.empty(3 * g, i64),
           np.empty(g, i64))  # fmt: skip
    del src


def _warm_up() -> None:
    """One call with the argument types of the bank's."""
    from ..privacy.rng import as_source

    ev = checks.Events.of(
        np.array([0, 0]), np.array([3, 9]), np.ones(2, dtype=np.int64), np.zeros(1, np.int64),
        as_source(0), layout=layout,
    )  # fmt: skip
    one, acc = np.ones(1, dtype=np.int64), np.zeros((1, 3), dtype=np.int64)
    by_cell(one - 1, one, one, np.zeros(2, dtype=np.int64), one.copy(), one.copy(), one.copy())
    tally(one - 1, np.full(1, -1, np.int64), one - 1, 3)
    close(one - 1, one, one, np.full(1, -1, np.int64), 0, one - 1, acc, acc.copy(), one.copy(),
          one.copy(), one.copy(), one.copy(), one.copy(), one.copy(), 0)  # fmt: skip
    flag = np.zeros(1, dtype=np.bool_)
    next_round(one - 1, one, one - 1, one, one - 1, flag, one.copy(), one.copy())
    finish(one - 1, one, one, one - 1, flag, one - 1, one - 1, one - 1, one.copy(), one.copy(),
           one.copy(), one.copy(), one.copy(), one.copy(), one.copy())  # fmt: skip
    _warm_up_rounds(ev)
    run(ev, np.arange(1), np.zeros(1, np.uint64), np.full(1, -1, np.int64),
        n=np.zeros(1, np.int64), theta=np.zeros(1, np.int64), pos=np.zeros(1, np.int64),
        xf=0.5, window=4096)  # fmt: skip


# Just in time only: a private bank's rounds read the OS words of numba cfuncs made at run
# time (sketchsyn.privacy.oswords).
accel.register(globals(), KERNELS, _warm_up, aot=False)
