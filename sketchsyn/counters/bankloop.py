"""An :class:`~sketchsyn.counters.sparsebank.InhomogeneousSparseBank`'s rounds in one compiled
loop: the driver of :func:`sketchsyn.kernels._counters.rounds`.

The loop draws the noise of the closing segments and the words of the checks itself: a seeded
bank's from its bit generators (:meth:`~sketchsyn.privacy.rng.RandomSource.word_source`), the
words the Python rounds would draw, in their order, so the bank's state is the same on both
paths; a private bank's from this thread's buffer of the OS CSPRNG's words
(:func:`sketchsyn.kernels.oswords.word_source`), with the law of its Python rounds (one
uniform per counter and round, ``Events.shared``). It returns to Python for what it does not
do: a check the float margin leaves (settled exactly by the bank, given the round's earlier
checks when they share a uniform), tree rows to grow, and a draw it cannot finish (a tie with
a threshold, a geometric beyond a table it was not given), finished from the words already
drawn by :func:`~sketchsyn.privacy.noise.laplace_replay`. Without an OS CSPRNG the loop can
call, a private bank keeps the Python rounds. The bank's sources are its own (spawned from the
caller's when it is made), so the loop takes no generator lock.

>>> from sketchsyn.counters import InhomogeneousSparseBank, online_budgets
>>> mt = np.random.Generator(np.random.MT19937(1))   # its words are 32-bit: Python rounds
>>> word_sources(InhomogeneousSparseBank(2, 1.0, online_budgets(1.0, 2, 0), rng=mt)) is None
True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..kernels import counters as kernels
from ..kernels import oswords
from ..privacy.noise import LOOKUP_SHIFT, PLAN_NONE, laplace_plan, laplace_replay
from . import checks
from .levels import _Level
from .settle import settle

__all__ = ["run_rounds", "update_sorted", "word_sources"]


def word_sources(bank: Any) -> tuple[Any, Any, Any] | None:
    """The word sources of a bank's (an ``InhomogeneousSparseBank``'s, which imports this
    module) check, sub-mechanism and threshold sources: their seeded bit generators
    (:meth:`~sketchsyn.privacy.rng.RandomSource.word_source`), or, when all three are the OS
    CSPRNG, this thread's buffer of its words (:func:`sketchsyn.kernels.oswords.word_source`);
    None when there are none (a generator without them, or no OS CSPRNG the loop can call)."""
    srcs = (bank._check_src, bank._sub_src, bank._theta_src)
    if all(s.secure for s in srcs):
        words = oswords.word_source()
        return None if words is None else (words, words, words)
    found = tuple(s.word_source() for s in srcs)
    return None if any(f is None for f in found) else found


def run_rounds(
    bank: Any,
    ev: checks.Events,
    lv: _Level,
    sources: tuple[Any, Any, Any],
    extra: np.ndarray,
    forced_extra: np.ndarray,
    xf: float,
    window: int,
) -> None:
    """The rounds of ``bank``'s ``_records`` by :func:`sketchsyn.kernels._counters.rounds`,
    which draws from the word ``sources`` itself (a seeded bank's: the same
    words in the same order as the Python rounds, the same state), and what it hands back:
    the checks the float margin left (:func:`~sketchsyn.counters.settle.settle`), tree rows to
    grow, and draws it could not finish (finished by
    :func:`~sketchsyn.privacy.noise.laplace_replay` from the words it drew). A scale whose
    draw once needed the geometric beyond its table gets that table's arrays from then on
    (``_geometric``; the draws are the same either way)."""
    check_words, sub_words, theta_words = sources
    if bank._plans[0] is not lv:  # the level's two noise plans, made once per level
        bank._plans = (
            lv,
            *(laplace_plan(s, s in bank._geometric) for s in (lv.sub_param, lv.xs)),
        )
    plans = list(bank._plans[1:])
    groups = ev.starts.size
    width = groups * max(lv.sub_levels, 1)
    slots = np.empty((2, groups), dtype=np.int64)
    res = np.empty((4, groups), dtype=np.int64)
    tripped = np.empty((3, groups), dtype=np.int64)
    words = np.empty(4 * width + 64, dtype=np.uint32)
    scratch = np.empty((4, width), dtype=np.int64)
    sub_noise = np.empty(width, dtype=np.int64)
    thresholds = np.empty(groups, dtype=np.int64)
    info = np.zeros(7, dtype=np.int64)
    rest = ev.rest.view(np.uint8)
    info[kernels.I_ROWS] = bank._rows
    stage = kernels.START
    uniforms: dict = {}  # with shared uniforms: those settled in the round (info[I_ROUND])
    settled_round = 0
    while True:
        code = kernels.rounds(
            stage, info, ev.cells, ev.times, ev.values, ev.ends, ev.cursor, rest,
            ev.gap_row, ev.gap_words, ev.own_words, ev.forced_gap, ev.forced_own,
            ev.group_cell, extra, forced_extra, bank._n, bank._theta, bank._pos, bank._row,
            bank._segs, bank._acc, bank._done, bank._sub, xf, ev.span, ev.own_span, window,
            lv.t0, check_words, ev.shared, ev.bits, sub_words, plans[0], theta_words, plans[1],
            LOOKUP_SHIFT, slots, res, tripped, words, scratch, sub_noise, thresholds,
        )  # fmt: skip
        if code == kernels.DONE:
            break
        if code == kernels.UNSURE:
            na = int(info[kernels.I_ACTIVE])
            status, at, nb = res[0, :na], res[1, :na], res[3, :na]
            unsure = np.flatnonzero(status >= checks.GAP_UNSURE)
            if info[kernels.I_ROUND] != settled_round:  # a new round: new uniforms
                uniforms.clear()
                settled_round = int(info[kernels.I_ROUND])
            settle(ev, slots[0, :na], unsure, status, at, nb, extra, forced_extra, uniforms, lv.x,
                   bank._theta, bank._n, bank._pos, bank._check_src)  # fmt: skip
            stage = kernels.SCAN
        elif code == kernels.GROW:
            bank._rows = int(info[kernels.I_ROWS])
            bank._grow(int(info[kernels.I_NEW]))
            stage = kernels.TALLY
        else:  # a draw to finish from its words: the sub-mechanism's, or the thresholds'
            sub = code == kernels.BAIL_SUB
            scale, src = (lv.sub_param, bank._sub_src) if sub else (lv.xs, bank._theta_src)
            count = int(info[kernels.I_OPENED] if sub else info[kernels.I_TRIPPED])
            drawn = words[: int(info[kernels.I_WORDS])]
            values = laplace_replay(scale, count, drawn, src)
            (sub_noise if sub else thresholds)[:count] = values
            i = 0 if sub else 1
            m, kind = plans[i][2], plans[i][3]
            if kind == PLAN_NONE and np.abs(values).max() >= m:  # it went beyond its table
                bank._geometric.add(scale)  # its geometric tables from now on
                plans[i] = laplace_plan(scale, True)
                bank._plans = (lv, *plans)
            stage = kernels.THETA if sub else kernels.CLOSE
    bank._rows = int(info[kernels.I_ROWS])


def update_sorted(bank: Any, until: int, cells: np.ndarray, times: np.ndarray, first: int) -> None:
    """``bank._update_steps(until, cells, times)`` for records sorted by (cell, step) instead
    of by step, the first at step ``first``, the last at ``until``: when they lie in one time
    level (the bank's, or the next one, which it enters first), that level takes them as
    :meth:`~sketchsyn.counters.sparsebank.InhomogeneousSparseBank._events` would give them
    (its sort by cell is theirs), so the draws are the same; otherwise they are put back in
    step order for ``_update_steps``."""
    lv = bank._lv
    nxt = lv if first <= lv.end else bank._first_level(lv.r + 1)
    if not (lv.first <= first and nxt.first <= first and until <= nxt.end) or 4 * until >= 2**60:
        order = np.argsort(times, kind="stable")
        bank._update_steps(until, cells[order], times[order])
        return
    bank._check_writable()
    bank._check_levels(lv.r + 1, until)
    if nxt is not lv:  # the level ends before these records: as _events closes it
        bank._close_level(nxt)
    bank._prepare()
    bank._records(cells, times, checks.constant(1, cells.size))
    bank._advance_clock(until)
