"""One round of an :class:`~sketchsyn.counters.sparsebank.InhomogeneousSparseBank`'s batched
sparse checks: for every counter, its steps from where it stands to its first trip.

A counter's steps with a value (its *events*, sorted by counter then step) each bring up to two
kinds of checks of the noisy threshold: the idle steps since the counter's previous step (a
*gap*: ``s`` checks at one ``a = θ − N``, whose first trip is geometric) and the event's own
step (one check at ``a − v``). Every check is decided by exact inversion of a uniform ``U``
(:func:`~sketchsyn.counters.sparse.first_trips`), and the uniforms are **assigned to the events
before any is decided**: in a seeded bank, the gap of event ``i`` (when it has idle steps) and
its own step each have the first bits of their ``U`` drawn at the start of the batch (64, one
``uint64`` each; any of 1 … 32 works too: :data:`SEEDED_BITS`, :data:`SEEDED_OWN_BITS`; a
private bank's numpy rounds draw 32, :data:`SECURE_BITS` and :data:`SECURE_OWN_BITS`); a
private bank's compiled rounds share one ``U`` per counter and round (below). A check whose interval
``[k, k + 2^(64 − bits))·2^-64`` the float decision cannot settle (about one in 2**32 for 32
bits) draws the uniform's further bits from the same source when it is settled exactly. A
round decides each counter's events in order, from its cursor, up to its first trip (or
``window`` events); the bank then closes the tripped counters' segments (new thresholds) and
starts the next round.

Why this is the counters' law. A check's uniform is used for one decision that counts: the
decision of the step it belongs to, at the threshold and count the counter has when it gets
there. A round may also look at the events after a counter's first trip (the numpy path
decides a whole window at once), but it throws those decisions away, and which ones it throws
away depends only on earlier uniforms: the events' uniforms are still independent of everything
used when the next round decides them again at the new threshold. The one uniform that is
spent is the one of a gap that trips: the rest of that gap, at the new threshold, takes fresh
words (``extra``), drawn at the start of the next round for the counters that need them, in
counter order.

A private bank's compiled rounds (``Events.shared``) draw fewer uniforms: **one per counter
and round**, shared by the round's checks, of :data:`SECURE_BITS` first bits (its numpy rounds,
which decide a whole window in array passes, keep a word per check). Checks ``1, 2, …`` of a round
(each idle step of a gap, each own step) stay with probabilities ``1 − p_i``, independently,
so the round's first trip ``J`` has ``P(J > j) = S_j = ∏_{i ≤ j} (1 − p_i)``, and one uniform
decides it by inversion, ``J = min{j : U ≥ S_j}``, exactly as one uniform decides the first
trip within a gap. The float decision compares ``ln U`` with the running sum of the checks'
``g·ln(1 − p)`` (``trip_decisions``' ``base``). The round ends at ``J``: the threshold
changes, and ``U`` is spent (it is known to lie in ``[S_J, S_{J−1})``), so the bank gives every
active counter a fresh uniform each round (a round cut by its window included). A check the
interval leaves open is settled given the round's earlier checks
(:mod:`sketchsyn.counters.settle`). This reads about one uniform per counter and batch instead
of one per check: a private run's bytes fell sevenfold.

Two implementations make the same decisions: :func:`scan` in numpy (the reference) and the
compiled loop of :mod:`sketchsyn.kernels._counters` (built at install). Both return, per
active counter, how its round ended (:data:`CALM`, :data:`GAP_TRIP`, :data:`OWN_TRIP`, or a
check the float margin cannot decide: :data:`GAP_UNSURE`, :data:`OWN_UNSURE`); the bank
settles an undecided check with the exact routine and the same words, records the outcome
(``forced_*``) and scans again. The float decisions are
:func:`~sketchsyn.counters.sparse.trip_decisions`'.

>>> import numpy as np
>>> from sketchsyn.privacy.rng import as_source
>>> ev = Events.of(cells=np.array([0, 0, 1]), times=np.array([3, 9, 4]), values=np.ones(3, int),
...                pos=np.zeros(2, int), src=as_source(0))
>>> ev.gap.tolist(), ev.gap_row.tolist()
([2, 5, 3], [0, 1, 2])
>>> status, at, step, nb = scan(ev, np.arange(2), np.zeros(2, np.uint64), np.full(2, -1),
...     n=np.zeros(2, int), theta=np.full(2, 10**6), pos=np.zeros(2, int), xf=0.5, window=4096)
>>> status.tolist(), at.tolist(), nb.tolist()   # no trip: each counter ends calm, N = its ones
([0, 0], [1, 2], [2, 1])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..privacy.rng import RandomSource
from .sparse import _log_stay, trip_decisions

__all__ = [
    "CALM",
    "GAP_TRIP",
    "GAP_UNSURE",
    "OWN_TRIP",
    "OWN_UNSURE",
    "SECURE_BITS",
    "SECURE_OWN_BITS",
    "SEEDED_BITS",
    "SEEDED_OWN_BITS",
    "Events",
    "by_cell",
    "constant",
    "end_round",
    "merge_repeats",
    "scan",
    "stable_order",
]

#: How a counter's round ended: no trip within its window (``at`` = its last event decided).
CALM = 0
#: A check of the gap before event ``at`` tripped (at step ``step``).
GAP_TRIP = 1
#: Event ``at``'s own check tripped.
OWN_TRIP = 2
#: The float margin could not decide the gap before event ``at``: settle it exactly.
GAP_UNSURE = 3
#: The float margin could not decide event ``at``'s own check: settle it exactly.
OWN_UNSURE = 4

_NONE = np.iinfo(np.int64).max
#: Bits of each check's uniform that :meth:`Events.of` draws at the start from the operating
#: system's CSPRNG: the first 32 (the rest, from the same source, only for a check they leave
#: undecided), and from a seeded generator: the first 64 (its outputs stay those of earlier
#: versions). The law of every check is the same either way; any of 1 … 32 or 64 works (the
#: tests use 8, whose intervals leave many checks undecided).
SECURE_BITS = 32
SEEDED_BITS = 64
#: The bits an own check's word holds, from the OS CSPRNG and from a seeded generator (with a
#: word per check: a private bank shares one uniform per round instead). Any of 1 … 32 or 64
#: works (an own check is one comparison: 16 bits leave it open about once in 65,536).
SECURE_OWN_BITS = 32
SEEDED_OWN_BITS = 64


def stable_order(cells: np.ndarray, size: int) -> np.ndarray:
    """``np.argsort(cells, kind="stable")`` for cells in ``[0, size)``: numpy sorts 16-bit keys
    by radix (several times faster than its merge sort of int64 keys), so cells below ``2**32``
    are sorted as two 16-bit digits, the low one first (a stable sort by the high digit keeps
    the order of the low one).

    >>> stable_order(np.array([70000, 3, 70000, 2, 3]), 2**17).tolist()
    [3, 1, 4, 0, 2]
    """
    if size <= 1 << 16:
        return np.argsort(cells.astype(np.uint16), kind="stable")
    if size > 1 << 32:
        return np.argsort(cells, kind="stable")
    order = np.argsort(cells.astype(np.uint16), kind="stable")  # the low digit (cells mod 2**16)
    high = (cells[order] >> 16).astype(np.uint16)
    return order[np.argsort(high, kind="stable")]


def by_cell(
    cells: np.ndarray,
    times: np.ndarray,
    values: np.ndarray,
    size: int,
    counting_sort: Callable[..., None] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The events sorted by cell (``cells`` in ``[0, size)``), each cell's in their order
    (steps ascending when ``times`` is): :func:`stable_order`, or ``counting_sort``
    (:func:`sketchsyn.kernels._counters.by_cell`, the same order in one pass) when the cells
    are few enough for its table of counts.

    >>> c, t, v = by_cell(np.array([2, 0, 2]), np.array([1, 2, 3]), np.ones(3, int), 3)
    >>> c.tolist(), t.tolist()
    ([0, 2, 2], [2, 1, 3])
    """
    if counting_sort is not None and size <= 4 * cells.size:
        out = np.empty((3, cells.size), dtype=np.int64)
        counting_sort(cells, times, values, np.zeros(size + 1, dtype=np.int64), *out)
        return out[0], out[1], out[2]
    order = stable_order(cells, size)
    return cells[order], times[order], values[order]


_CONSTANTS: dict[int, np.ndarray] = {}


def constant(value: int, n: int) -> np.ndarray:
    """A read-only int64 array of ``n`` entries ``value``: a view of one buffer per value,
    grown when a longer one is asked for (the events' default values and outcomes are the
    same every batch: no array filled per batch).

    >>> constant(-1, 3).tolist(), constant(-1, 3).flags.writeable
    ([-1, -1, -1], False)
    """
    buf = _CONSTANTS.get(value)
    if buf is None or buf.size < n:
        buf = np.full(max(n, 2 * (0 if buf is None else buf.size), 1024), value, dtype=np.int64)
        buf.flags.writeable = False
        _CONSTANTS[value] = buf
    return buf[:n]


def merge_repeats(
    c: np.ndarray, tm: np.ndarray, v: np.ndarray, distinct: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Events sorted by (cell, step) with each repeated pair's values added up (``distinct``:
    no pair repeats, nothing to do).

    >>> a = np.array
    >>> c, t, v = merge_repeats(a([0, 0, 1]), a([2, 2, 2]), a([1, 4, 1]), False)
    >>> c.tolist(), t.tolist(), v.tolist()
    ([0, 1], [2, 2], [5, 1])
    """
    if distinct or c.size < 2:
        return c, tm, v
    dup = (c[1:] == c[:-1]) & (tm[1:] == tm[:-1])
    if not dup.any():
        return c, tm, v
    idx = np.flatnonzero(np.concatenate(([True], ~dup)))
    return c[idx], tm[idx], np.add.reduceat(v, idx)


@dataclass
class Events:
    """One batch of a bank's events and the uniforms assigned to them.

    ``cells``, ``times``, ``values``: the events, sorted by cell then step; ``starts``/``ends``:
    each counter's run of events (``group_cell`` its cell); ``gap``: the idle steps before each
    event when the batch starts; ``gap_row``: the row of ``gap_words`` of an event with a gap
    (−1 without); ``own_words``: each event's own check (``bits``, ``own_bits``: how many of
    the uniform's first bits a gap's and an own check's word hold, at its top: 64 from a seeded
    generator, :data:`SECURE_BITS` and :data:`SECURE_OWN_BITS` from the OS CSPRNG);
    ``cursor``: each counter's next event;
    ``rest``: the counter resumes inside a gap that tripped (its next gap takes ``extra``
    words); ``forced_gap``/``forced_own``: exact outcomes of checks the float margin left
    (−1: none).
    """

    cells: np.ndarray
    times: np.ndarray
    values: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    group_cell: np.ndarray
    gap: np.ndarray
    gap_row: np.ndarray
    gap_words: np.ndarray
    own_words: np.ndarray
    cursor: np.ndarray
    rest: np.ndarray
    forced_gap: np.ndarray
    forced_own: np.ndarray
    bits: int = 64
    own_bits: int = 64
    shared: bool = False

    @property
    def span(self) -> float:
        """``2^(64 − bits)``: each gap word ``k`` says its uniform lies in
        ``[k, k + span)·2^-64``."""
        return 2.0 ** (64 - self.bits)

    @property
    def own_span(self) -> float:
        """``2^(64 − own_bits)``: the same for the own checks' words."""
        return 2.0 ** (64 - self.own_bits)

    @classmethod
    def of(
        cls,
        cells: np.ndarray,
        times: np.ndarray,
        values: np.ndarray,
        pos: np.ndarray,
        src: RandomSource,
        layout: Callable[..., tuple[int, int]] | None = None,
        shared: bool = False,
    ) -> Events:
        """The batch's runs and gaps, and its uniforms: the gaps' words first (events in order),
        then the own checks'. ``layout``: the compiled pass of
        :func:`sketchsyn.kernels._counters.layout` (the same arrays). ``shared``: no word per
        event; each round's checks of a counter share one uniform, drawn by the bank when the
        round starts (:func:`scan`), of ``bits`` bits."""
        cells = np.asarray(cells, dtype=np.int64)
        times = np.asarray(times, dtype=np.int64)
        values = np.asarray(values, dtype=np.int64)
        n = cells.size
        if layout is not None:
            starts = np.empty(n, dtype=np.int64)
            gap = np.empty(n, dtype=np.int64)
            gap_row = np.empty(n, dtype=np.int64)
            runs, n_idle = layout(cells, times, pos, starts, gap, gap_row)
            starts = starts[:runs]
        else:
            starts = np.flatnonzero(np.concatenate(([True], cells[1:] != cells[:-1])))
            prev = np.empty_like(times)
            prev[1:] = times[:-1]
            prev[starts] = pos[cells[starts]]
            gap = times - prev - 1
            idle = gap > 0
            gap_row = np.full(n, -1, dtype=np.int64)
            n_idle = int(np.count_nonzero(idle))
            gap_row[idle] = np.arange(n_idle)
        ends = np.append(starts[1:], n)
        group_cell = cells[starts]
        bits = SECURE_BITS if src.secure else SEEDED_BITS
        own_bits = bits if shared else SECURE_OWN_BITS if src.secure else SEEDED_OWN_BITS
        if shared:
            gap_words = own_words = np.zeros(0, dtype=np.uint64)
        else:
            gap_words, own_words = first_bits(src, n_idle, bits), first_bits(src, n, own_bits)
        return cls(
            cells, times, values, starts, ends, group_cell, gap, gap_row, gap_words, own_words,
            cursor=starts.copy(),
            rest=np.zeros(starts.size, dtype=bool),
            forced_gap=constant(-1, n),  # read-only: settle copies them before it writes
            forced_own=constant(-1, n),
            bits=bits,
            own_bits=own_bits,
            shared=shared,
        )  # fmt: skip


def end_round(
    ev: Events,
    active: np.ndarray,
    status: np.ndarray,
    at: np.ndarray,
    step: np.ndarray,
    nb: np.ndarray,
    n: np.ndarray,
    pos: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A numpy round's end (:func:`scan`'s results): the calm counters keep their count
    (``n``) and last step (``pos``) and move past their window, one that tripped on its own
    event moves past it, one that tripped in a gap resumes at that event inside the gap
    (``rest``); returns the tripped segments' ``(cells, values, steps)`` for the bank to
    close."""
    calm = status == CALM
    cc = ev.cells[at[calm]]
    n[cc] = nb[calm]
    pos[cc] = ev.times[at[calm]]
    ev.cursor[active[calm]] = at[calm] + 1
    ev.rest[active[calm]] = False
    own = status == OWN_TRIP
    ev.cursor[active[own]] = at[own] + 1
    ev.rest[active[own]] = False
    in_gap = status == GAP_TRIP
    ev.cursor[active[in_gap]] = at[in_gap]
    ev.rest[active[in_gap]] = True
    tripped = ~calm
    value = np.where(own, nb + ev.values[at], nb)[tripped]
    return ev.cells[at[tripped]], value, step[tripped]


def first_bits(src: RandomSource, n: int, bits: int) -> np.ndarray:
    """``n`` uniforms' first ``bits`` bits, at the top of 64-bit words: a ``uint64`` each, or a
    ``uint32`` (17 to 32 bits) or two bytes (at most 16) with the rest of its bits dropped.

    >>> from sketchsyn.privacy.rng import as_source
    >>> [hex(int(w) >> 48) for w in first_bits(as_source(1), 2, 16)]
    ['0xe4ff', '0x7922']
    """
    if bits == 64:
        return src.uint64(n)
    up = np.uint64(64 - bits)
    if bits > 16:
        return (src.uint32(n) >> np.uint32(32 - bits)).astype(np.uint64) << up
    return (src.bytes(2 * n).view("<u2") >> np.uint16(16 - bits)).astype(np.uint64) << up


def scan(
    ev: Events,
    active: np.ndarray,
    extra: np.ndarray,
    forced_extra: np.ndarray,
    *,
    n: np.ndarray,
    theta: np.ndarray,
    pos: np.ndarray,
    xf: float,
    window: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One round for the counters ``active`` (group indices with events left), in numpy.

    Each decides its events from its cursor, at most ``window`` of them, in step order: the gap
    (its own words, or ``extra[group]`` when the counter resumes inside a tripped gap), then the
    event's own check. ``n``, ``theta``, ``pos``: the bank's per-counter ``N``, ``θ`` and last
    decided step (read only); ``xf``: ``float(1/scale)`` of the checks' noise.

    With ``ev.shared`` every check of a counter's round is decided by one uniform, whose first
    ``ev.bits`` bits are ``extra[group]``: the round's first trip is
    ``min{j : U ≥ S_j}``, ``S_j`` the probability that checks 1 … j all stay, so the float
    decisions compare ``ln U`` with the running sum of the checks' ``g·ln(1 − p)``
    (``trip_decisions``' ``base``). The bank gives each counter a fresh uniform every round.

    Returns ``(status, at, step, nb)`` per active counter: how the round ended, the event it
    ended at, the step of a trip, and ``N`` before event ``at`` (for :data:`CALM`: ``N`` after
    it).
    """
    cur = ev.cursor[active]
    lens = np.minimum(ev.ends[active], cur + window) - cur
    offs = np.cumsum(lens) - lens
    total = int(lens.sum())
    local = np.arange(total, dtype=np.int64) - np.repeat(offs, lens)
    e = np.repeat(cur, lens) + local
    first = local == 0
    cell = ev.cells[e]
    tm = ev.times[e]
    prev = np.where(first, pos[cell], ev.times[np.maximum(e - 1, 0)])
    gap = tm - prev - 1
    v = ev.values[e]
    csum = np.cumsum(v)
    before = csum - v
    nb = n[cell] + before - np.repeat(before[offs], lens)
    a = theta[cell] - nb
    resumed = first & np.repeat(ev.rest[active], lens)
    owner = np.repeat(np.arange(active.size), lens)
    idle = np.flatnonzero(gap > 0)
    fresh = resumed[idle]
    # Each gap's word and span, its exact outcome if settled, and the sums before its checks
    # and before each own check (0 without a shared uniform).
    gap_l1p, own_l1p = _log_stay(xf, a[idle]), _log_stay(xf, a - v)
    if ev.shared:
        words = extra[active][owner]
        gap_words, span, own_words, own_span = words[idle], ev.span, words, ev.span
        gap_base, own_base = _round_sums(idle, gap[idle] * gap_l1p, own_l1p, lens)
    else:
        gap_words = np.where(fresh, extra[active][owner[idle]], ev.gap_words[ev.gap_row[e[idle]]])
        span = np.where(fresh, 1.0, ev.span)  # a resumed counter's fresh words are whole
        own_words, own_span = ev.own_words[e], ev.own_span
        gap_base = own_base = 0.0
    g = np.zeros(total, dtype=np.int64)
    g_unsure = np.zeros(total, dtype=bool)
    if idle.size:
        forced = np.where(fresh, forced_extra[active][owner[idle]], ev.forced_gap[e[idle]])
        gi, ui = trip_decisions(xf, a[idle], gap[idle], gap_words, span, gap_base, gap_l1p)
        g[idle] = np.where(forced >= 0, forced, gi)
        g_unsure[idle] = ui & (forced < 0)
    ones = np.ones(total, dtype=np.int64)
    own, o_unsure = trip_decisions(xf, a - v, ones, own_words, own_span, own_base, own_l1p)
    forced = ev.forced_own[e]
    own = np.where(forced >= 0, forced, own)
    o_unsure &= forced < 0
    # The first stop of each counter: its gap's check comes before its own step's.
    key = np.minimum(
        np.where((g > 0) | g_unsure, 2 * local, _NONE),
        np.where((own > 0) | o_unsure, 2 * local + 1, _NONE),
    )
    stop = np.minimum.reduceat(key, offs)
    calm = stop == _NONE
    idx = np.where(calm, offs + lens - 1, offs + np.where(calm, 0, stop) // 2)
    in_gap = (stop % 2 == 0) & ~calm
    status = np.full(active.size, CALM, dtype=np.int64)
    status[in_gap] = np.where(g_unsure[idx[in_gap]], GAP_UNSURE, GAP_TRIP)
    at_own = ~calm & ~in_gap
    status[at_own] = np.where(o_unsure[idx[at_own]], OWN_UNSURE, OWN_TRIP)
    step = np.where(in_gap, prev[idx] + g[idx], tm[idx])
    nb_out = np.where(calm, nb[idx] + v[idx], nb[idx])
    return status, e[idx], step, nb_out


def _round_sums(
    idle: np.ndarray, gap_terms: np.ndarray, own_terms: np.ndarray, lens: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """For the events of the rounds (``lens`` events per counter, in order): the sum of the
    ``g·ln(1 − p)`` terms of the counter's checks before each gap (the events ``idle``, with
    terms ``gap_terms``), and before each own check (terms ``own_terms``, one per event).

    The terms are summed in check order from zero, as the compiled loop adds them
    (:func:`sketchsyn.kernels._counters.scan`): per counter, not by one running sum of the
    batch minus a start (whose rounding would grow with the counters before it). Counters
    with about as many events share a zero-padded matrix whose rows ``np.cumsum`` adds in
    order.

    >>> l1p = _log_stay(0.5, np.array([-3]))[0]   # ln(1 − p) at a = −3
    >>> gb, ob = _round_sums(np.array([1]), np.array([3 * l1p]), np.array([l1p, l1p]),
    ...                      np.array([2]))   # one counter, 2 events, the second after 3 idle steps
    >>> bool(gb[0] == l1p and ob[0] == 0.0 and ob[1] == l1p + 3 * l1p)
    True
    """
    terms = np.zeros((own_terms.size, 2), dtype=np.float64)  # gap, own, gap, own, ...
    terms[idle, 0] = gap_terms
    terms[:, 1] = own_terms
    terms = terms.reshape(-1)
    sums = np.empty_like(terms)  # the sum before each term
    offs = 2 * (np.cumsum(lens) - lens)
    width = 2 * lens
    bucket = np.ceil(np.log2(np.maximum(width, 1))).astype(np.int64)
    for b in np.unique(bucket).tolist():
        rows = np.flatnonzero(bucket == b)
        cols = np.arange(1 << b)
        at = offs[rows, None] + cols
        inside = cols < width[rows, None]
        mat = np.zeros(at.shape, dtype=np.float64)
        mat[inside] = terms[at[inside]]
        run = np.zeros((rows.size, (1 << b) + 1), dtype=np.float64)
        np.cumsum(mat, axis=1, out=run[:, 1:])
        sums[at[inside]] = run[:, :-1][inside]
    return sums[0::2][idle], sums[1::2]
