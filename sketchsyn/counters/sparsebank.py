"""A vectorised bank of inhomogeneous sparse counters (He, Vershynin and Zhu, Algorithm 3, many at
once).

:class:`InhomogeneousSparseBank` runs ``size`` counters with the same ``epsilon``, budgets and
start level: the same law, counter by counter, as ``size`` independent
:class:`~sketchsyn.counters.inhomogeneous.InhomogeneousSparseCounter` objects, with one
Python call per batch instead of one per counter. The online synthesizer keeps one bank per
level of its partition (thousands to millions of cells, each seeing a 1 rarely).

Lazy clocks. The bank has one clock ``t`` (the global step it has reached), and each counter
remembers how far its sparse checks have been drawn (``pos``). A counter that sees no value
stays behind; it is brought to ``t`` in ``O(log)`` draws (the number of idle checks until the
noisy threshold trips is geometric) when it is next touched or read. A time level that ends
closes every counter at once (the level's count plus its noise join ``S̃``); the idle checks of
its last steps are never drawn, because no release depends on them. Nor is a level's total
noise drawn before the level ends: a release holds ``S̃`` (the closed levels) and the
sub-mechanism's output, never the open level's total, so its noise is drawn when the level
closes (a level still open at the last step draws none: the largest draw of a bank that was
just opened, one value per counter).

Exact trip draws (:func:`first_trips`). Each check compares ``N + λ`` with the threshold ``θ``,
``λ ~ Lap_Z(s)``; with ``a = θ − N`` it trips with ``p = P(λ > a)``, and ``g`` idle checks in a
row all stay with ``(1 − p)^g``. A uniform ``U`` in ``[0, 1)`` decides the first trip by
inversion, ``G = min{g : U ≥ (1 − p)^g}``. We draw the first 64 bits of ``U`` for every counter
at once (for the batched checks of a private run, the first 32 bits of one ``U`` per counter
and round, shared by the round's checks: :data:`~sketchsyn.counters.checks.SECURE_BITS`,
:mod:`sketchsyn.counters.checks`), compare
``ln U`` with ``g·ln(1 − p)`` in floating point **with a proven error margin** over the
whole interval those bits leave, and hand each draw it cannot decide (about one in 10⁹ for 64
bits) to the exact big-rational routine of :mod:`sketchsyn.counters.sparse`, with the same bits
of ``U`` (its further bits, when needed, from the same source). Every outcome is therefore
exactly the one the exact inversion gives: no floating-point decision changes a probability.

>>> import numpy as np
>>> from sketchsyn.counters import online_budgets
>>> bank = InhomogeneousSparseBank(4, 1.0, online_budgets(1.0, 2, 1), start_level=1, rng=0)
>>> bank.t          # level 1 starts at t_1 = 2; the clock stands just before it
1
>>> bank.update_events(100, cells=[0, 0, 3], times=[2, 5, 70])
>>> bank.t, bank.query().shape
(100, (4,))
>>> bank.skip(10**9); bank.t
1000000100
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from .. import kernels
from ..attributes import ReadOnly
from ..errors import InputError, check_int, check_memory
from ..io.serial import Arrays, MetaReader
from ..kernels import checks as kernel_checks
from ..privacy.lineage import Lineage
from ..privacy.noise import laplace_sum
from ..privacy.rng import RNGLike, as_source
from . import bankloop, bankstate, checks
from . import base as core
from .base import (
    _LIMIT,
    _as_steps,
    _bank_steps,
    _check_s,
    _Counter,
)
from .inhomogeneous import _InhomogeneousParams, _level_start
from .levels import _Level, _level
from .settle import settle
from .sparse import first_trips
from .thresholdpool import ThresholdPool

__all__ = ["InhomogeneousSparseBank", "first_trips"]

# Events of one counter considered per round of the batched sparse checks (a segment lasts about
# T0 ones on a dense stream; a round costs O(events), so a window bounds the redone work).
_WINDOW = 4096
# Seeded banks draw every counter's first threshold when the level is first used, so that their
# state does not depend on how the stream is batched; tests set this to run them lazily too.
_LAZY_SEEDED = False
# A private bank's compiled rounds share one uniform per counter (checks.Events.shared); its
# numpy rounds (without the compiled extension) keep a word per check, cheaper for
# a scan that decides a whole window in array passes; a seeded bank keeps a word per check (its
# outputs those of earlier versions). Both have one law; tests set this to share on both paths.
_SHARED_SEEDED = False


def _scanner() -> Callable[..., Any]:
    """The round's scan: the compiled loop (:func:`sketchsyn.kernels.checks.run`) where the
    extension runs, else :func:`sketchsyn.counters.checks.scan`. Both make the same
    decisions."""
    return kernel_checks.run if kernels.enabled() else checks.scan


class InhomogeneousSparseBank(_InhomogeneousParams, _Counter):
    """``size`` inhomogeneous sparse counters (He, Vershynin and Zhu, Algorithm 3) stepped together.

    Every counter has the law of an
    :class:`~sketchsyn.counters.inhomogeneous.InhomogeneousSparseCounter` with the same ``epsilon``,
    ``budgets``, ``start_level`` and ``sensitivity``, run on its own stream; the counters draw
    independent noise. Time level ``r`` is the global steps ``[t_r, t_{r+1})``,
    ``t_r = ceil(2^r/ε)``; inside it each counter runs sparse counting at ``ε_r/2`` (threshold
    ``T0 + Lap_Z(2·sensitivity/(ε_r/2))``, one check per step, closed segments fed to a binary
    mechanism at ``ε_r/4``), and at the level's end ``S̃`` gains the level's count plus
    ``Lap_Z(2·sensitivity/ε_r)``. The release of a counter is ``S̃`` plus its sub-mechanism's
    latest output.

    Privacy is per counter (each is ε_r-DP for a change at a step of level ``r``, Lemma 3.3); a
    record that reaches several counters of one bank must be accounted for by the caller. The
    online synthesizer gives each record to one counter per bank (its cell of that level).

    Saved state: **trusted** (``STATE_PRIVACY = "trusted"``): each counter's exact count of its
    current segment, as in the single counter.

    Parameters
    ----------
    size : int
        Number of counters.
    epsilon : float
        The ε that defines the time levels.
    budgets : callable
        ``budgets(r) = ε_r``, at most ``epsilon`` at every level reached;
        :func:`~sketchsyn.counters.inhomogeneous.online_budgets` is serialisable.
    start_level : int
        ``r_0``: steps before ``t_{r_0}`` are not counted.
    sensitivity : int
        ℓ1 bound on what neighbouring streams of one counter differ by (default 1).
    rng : None, int, SeedSequence, Generator or RandomSource

    Protocol
    --------
    ``update(x[size])`` → releases ``[size]``; ``update_many(xs[n, size])`` → ``[n, size]``;
    ``update_events(until, cells, times, values=None)``: advance the clock to ``until`` with
    the given step values at (cell, global step) pairs and 0 elsewhere, in
    ``O(events + log)`` vectorised work (the synthesizer's path); ``skip(s)``; ``query()`` →
    every counter's release now; ``t``; ``to_bytes`` / ``from_bytes``; ``snapshot()``.

    **Trusted-curator state** (as sparse counting's): the current segment counts ``N`` and the
    level counts are exact and in the bytes (whose header says ``state == "trusted"``).
    ``nbytes = 64·size + 16·L·rows + 8·pooled + 64``: eight int64 per counter (``S̃``, level
    total, ``N``, ``θ``, ``pos``, segments, sub release, tree row), one tree of
    ``L = floor(log2 length) + 1`` levels (open and closed p-sums) per counter that closed a
    segment in the current level, and, in a private bank, the level's first thresholds drawn
    ahead for counters not yet checked (``pooled``, never more than those counters; none in a
    saved state, whose read checks every counter).

    Thresholds. A private bank (the OS CSPRNG) draws a counter's first threshold of a level when
    the level first checks it: a level that never checks a counter (no value in it, no read)
    draws none for it. A seeded bank draws every counter's when the level is first used, so
    that its state is the same however the stream is batched.

    Examples
    --------
    >>> from sketchsyn.counters import online_budgets
    >>> bank = InhomogeneousSparseBank(3, 1.0, online_budgets(1.0, 1, 0), rng=1)
    >>> out = bank.update_many(np.eye(3, dtype=np.int64)); out.shape, bank.t
    ((3, 3), 3)
    """

    _kind = "InhomogeneousSparseBank"
    # 2: 'open' is the level's exact count (its noise is drawn at the close); a version 1 blob
    # drew it when the level opened, and 'open' holds it
    FORMAT_VERSION = 2
    READS = (1, 2)

    def __init__(
        self,
        size: int,
        epsilon: float,
        budgets: Callable[[int], float],
        start_level: int = 0,
        *,
        sensitivity: int = 1,
        rng: RNGLike = None,
    ) -> None:
        self._setup(size, epsilon, budgets, start_level, sensitivity, rng)
        self._clean = True  # the sparse arrays as _setup made them: _prepare need not reset
        self._enter(self._first_level(self._start))

    def _setup(
        self,
        size: int,
        epsilon: float,
        budgets: Callable[[int], float],
        start_level: int,
        sensitivity: int,
        rng: RNGLike,
    ) -> None:
        """Parameters, noise streams and empty arrays (no level entered yet)."""
        name = type(self).__name__
        self._size = check_int(size, "size", name, minimum=1, maximum=2**31)
        check_memory(64 * self._size + 64, name, f"size={self._size} counters")
        self._set_params(epsilon, budgets, start_level, sensitivity, name)
        self._eps_frac = Fraction(self._epsilon)
        src = as_source(rng)
        self._lineage = Lineage.new(src, self._kind, self._params())
        self._level_src, self._theta_src, self._check_src, self._sub_src = src.spawn(4)
        self._lazy = src.secure or _LAZY_SEEDED  # first thresholds drawn lazily (_thresholds)
        self._shared = src.secure or _SHARED_SEEDED  # compiled: a uniform per round (_records)
        self._frozen = False
        # The eight per-counter arrays are rows of one zeroed block: a large bank is one
        # allocation, which numpy asks the kernel to back with huge pages (from 4 MiB on
        # Linux), so touching it first costs a few faults instead of one per 4 KiB page.
        (
            self._base,  # S̃: the closed levels' noisy totals
            self._open,  # the current level's count (its noise: at close)
            self._n,  # N: the current segment's exact count
            self._theta,  # the segment's noisy threshold
            self._pos,  # last step whose check has been drawn
            self._segs,  # closed segments in this level
            self._sub,  # the sub-mechanism's latest release
            self._row,  # tree row of a counter with segments (-1: none)
        ) = np.zeros((len(self._ARRAYS), self._size), dtype=np.int64)
        self._row[:] = -1
        self._open_noisy = False  # _open holds its noise too (a loaded version 1 blob)
        self._acc = np.zeros((0, 1), dtype=np.int64)  # open p-sums (noisy), one row per tree
        self._done = np.zeros((0, 1), dtype=np.int64)  # latest closed p-sum of every level
        self._rows = 0
        self._ready = False  # the current level's sparse state reset (thresholds: _thresholds)
        self._clean = False  # (a loaded bank's arrays are its blob's)
        self._firsts = ThresholdPool()  # a private bank's first thresholds, drawn ahead
        # Noise scales whose draws once went beyond their magnitude table: the compiled rounds
        # get their geometric tables too (a cache; the draws are the same without it).
        self._geometric: set[Fraction] = set()
        self._plans: tuple[Any, ...] = (None,)  # (level, sub-mechanism's plan, thresholds')
        self._t = _level_start(self._start, self._eps_frac) - 1
        self._lv: _Level | None = None

    # -------------------------------------------------------------- parameters
    def _params(self) -> dict:
        return {"size": self._size, **self._budget_meta()}

    size = ReadOnly[int]("Number of counters.")

    @property
    def level(self) -> int:
        """The current time level ``r``."""
        assert self._lv is not None
        return self._lv.r

    t = ReadOnly[int](
        "Global step the bank has reached (``t_{start_level} − 1`` before the first)."
    )

    @property
    def nbytes(self) -> int:
        """``64·size + 16·L·rows + 8·pooled + 64`` (see the class notes)."""
        return 64 * self._size + 2 * self._acc.shape[1] * 8 * self._rows + self._firsts.nbytes + 64

    # -------------------------------------------------------------- time levels
    def _first_level(self, r: int) -> _Level:
        """Level ``r`` or the first non-empty level after it."""
        while _level_start(r + 1, self._eps_frac) == _level_start(r, self._eps_frac):
            r += 1
        eps_r = self.budget(r)
        self._max_budget = max(self._max_budget, eps_r)
        return _level(r, eps_r, self._eps_frac, self._sensitivity, type(self).__name__)

    def _enter(self, lv: _Level) -> None:
        """Open level ``lv``: its counts start at 0 (their noise is drawn when it closes,
        :meth:`_add_closed_total`); thresholds come lazily."""
        self._lv = lv
        if not self._clean:  # (a new bank's is still zero)
            self._open[:] = 0
        self._open_noisy = False
        self._pos[:] = lv.first - 1
        self._ready = False

    def _add_closed_total(self) -> None:
        """``S̃ +=`` the current level's noisy totals as it closes: its counts plus every
        counter's ``Lap_Z(2·sensitivity/ε_r)``, drawn now (no release holds the open level's
        total, so the draw waits until the level ends; the level source draws the levels' noise
        in the order of the levels either way). A bank saved by an earlier release drew it on
        entry, into ``open``."""
        lv = self._lv
        assert lv is not None
        self._base += self._open
        if not self._open_noisy:
            self._base += core._draw("laplace", lv.scale, self._size, self._level_src)

    def _prepare(self) -> None:
        """The sparse state of the current level (drawn when the level is first used)."""
        if self._ready:
            return
        lv = self._lv
        assert lv is not None
        # A new bank's arrays are already reset: writing them again would only touch (and
        # fault in) every page of a large bank at once.
        clean, self._clean = self._clean, False
        if self._lazy:  # drawn counter by counter (_thresholds)
            if not clean:
                self._theta[:] = 0
            self._firsts = ThresholdPool(np.count_nonzero(self._pos == lv.first - 1))
        else:
            # (in place: the block of the bank's arrays keeps its rows)
            drawn = core._draw("laplace", lv.xs, self._size, self._theta_src)
            np.add(drawn, lv.t0, out=self._theta)
            self._firsts = ThresholdPool()
        if not clean:
            self._n[:] = 0
            self._segs[:] = 0
            self._sub[:] = 0
            self._row[:] = -1
        self._acc = np.zeros((0, lv.sub_levels), dtype=np.int64)
        self._done = np.zeros((0, lv.sub_levels), dtype=np.int64)
        self._rows = 0
        self._ready = True

    def _thresholds(self, cells: np.ndarray) -> None:
        """A private bank's first thresholds of the level (a seeded one drew them all in
        ``_prepare``): each of ``cells`` (ascending, distinct) whose checks have not started in
        this level (``pos`` the step before its first) takes ``T0 +`` the next value of the
        level's :class:`~sketchsyn.counters.thresholdpool.ThresholdPool`.

        >>> from sketchsyn.counters import online_budgets
        >>> bank = InhomogeneousSparseBank(10**5, 1.0, online_budgets(1.0, 2, 0))  # the OS CSPRNG
        >>> bank.update_events(300, [7, 70], [290, 299])
        >>> int((bank._pos == bank._lv.first - 1).sum()), bank._firsts.drawn
        (99998, 64)
        """
        lv = self._lv
        assert lv is not None
        if self._lazy:
            fresh = cells[self._pos[cells] == lv.first - 1]
            if fresh.size:
                self._theta[fresh] = lv.t0 + self._firsts.take(fresh.size, lv.xs, self._theta_src)

    def _close_level(self, nxt: _Level | None = None) -> None:
        """End the current level: ``S̃ += level total`` (its last idle checks are not needed);
        enter the next (``nxt``: already found by the caller)."""
        assert self._lv is not None
        self._add_closed_total()
        self._t = self._lv.end
        self._enter(self._first_level(self._lv.r + 1) if nxt is None else nxt)

    def _advance_clock(self, until: int) -> None:
        """Move the clock to ``until`` (no values): close the levels that end on the way.

        A level entered and closed within the move adds only its total's noise to ``S̃`` (its
        count is 0 and no release inside it is read): for a small bank those draws, one per
        level at its own scale, are made together (:func:`~sketchsyn.privacy.noise.laplace_sum`)."""
        lv = self._lv
        assert lv is not None
        if until <= lv.end:
            self._t = max(self._t, until)
            return
        self._add_closed_total()  # the current level ends
        passed = []
        lv = self._first_level(lv.r + 1)
        while until > lv.end:
            passed.append(lv)
            lv = self._first_level(lv.r + 1)
        self._base += laplace_sum([p.scale for p in passed], self._size, self._level_src)
        self._enter(lv)
        self._t = until

    # -------------------------------------------------------------- sparse checks
    def _grow(self, new: int) -> None:
        """Room in the tree arrays for ``new`` more rows (doubling; rows are never freed within
        a level)."""
        need = self._rows + new
        if need > self._acc.shape[0]:
            grow = max(need, 2 * self._acc.shape[0], 16)
            for name in ("_acc", "_done"):
                old = getattr(self, name)
                arr = np.zeros((grow, old.shape[1]), dtype=np.int64)
                arr[: self._rows] = old[: self._rows]
                setattr(self, name, arr)

    def _close_segments(self, cells: np.ndarray, values: np.ndarray, steps: np.ndarray) -> None:
        """Counters ``cells`` close their segment (count ``values``) at ``steps``: one step of
        their binary mechanism each, new thresholds, ``N = 0``."""
        lv = self._lv
        assert lv is not None
        k = cells.size
        if k == 0:
            return
        if kernels.enabled():  # the same draws, then one compiled loop (kernels._counters)
            new, opened = kernels.counters.tally(cells, self._row, self._segs, lv.sub_levels)
            self._grow(new)
            noise = core._draw("laplace", lv.sub_param, opened, self._sub_src)
            thresholds = core._draw("laplace", lv.xs, k, self._theta_src)
            kernels.counters.close(
                cells, values, steps, self._row, self._rows, self._segs, self._acc, self._done,
                self._sub, self._n, self._theta, self._pos, noise, thresholds, lv.t0,
            )  # fmt: skip
            self._rows += new
            return
        new = cells[self._row[cells] < 0]
        if new.size:
            self._grow(new.size)
            self._row[new] = np.arange(self._rows, self._rows + new.size)
            self._rows += new.size
        rows = self._row[cells]
        m = self._segs[cells] + 1
        self._segs[cells] = m
        mm = m - 1
        levels = np.arange(lv.sub_levels, dtype=np.int64)
        # Block of level j containing segment m: index mm >> j (0-based); it opens at its first
        # segment and only even indices (odd 1-based) are ever part of a release.
        opens = ((mm[:, None] & ((1 << levels) - 1)) == 0) & (((mm[:, None] >> levels) & 1) == 0)
        oi, oj = np.nonzero(opens)
        self._acc[rows[oi], oj] = core._draw("laplace", lv.sub_param, oi.size, self._sub_src)
        self._acc[rows] += values[:, None]
        closes = ((m[:, None] & ((1 << levels) - 1)) == 0) & (((m[:, None] >> levels) & 1) == 1)
        ci, cj = np.nonzero(closes)
        self._done[rows[ci], cj] = self._acc[rows[ci], cj]
        bits = ((m[:, None] >> levels) & 1).astype(bool)
        self._sub[cells] = np.where(bits, self._done[rows], 0).sum(axis=1)
        self._n[cells] = 0
        self._theta[cells] = lv.t0 + core._draw("laplace", lv.xs, k, self._theta_src)
        self._pos[cells] = steps

    def _idle(self, cells: np.ndarray, until: int) -> None:
        """Draw the idle checks of ``cells`` (distinct) up to step ``until``."""
        lv = self._lv
        assert lv is not None
        cells = cells[self._pos[cells] < until]
        self._thresholds(cells)
        while cells.size:
            g = first_trips(
                lv.x, self._theta[cells] - self._n[cells], until - self._pos[cells], self._check_src
            )
            hit = g > 0
            self._pos[cells[~hit]] = until
            cells = cells[hit]
            if cells.size:
                self._close_segments(cells, self._n[cells].copy(), self._pos[cells] + g[hit])
                cells = cells[self._pos[cells] < until]

    def _records(self, cells: np.ndarray, times: np.ndarray, values: np.ndarray) -> None:
        """Steps with values > 0: sorted by (cell, time), distinct pairs, all in this level and
        after each counter's ``pos``. The uniforms of every check are assigned to the events
        first; each round then takes every counter from its cursor to its first trip (at most
        ``_WINDOW`` events) and closes the tripped segments (:mod:`sketchsyn.counters.checks`
        explains why this is each counter's law)."""
        lv = self._lv
        assert lv is not None
        run = _scanner()
        compiled = run is not checks.scan
        shared = self._shared and (compiled or _SHARED_SEEDED)  # (see _SHARED_SEEDED)
        ev = checks.Events.of(
            cells, times, values, self._pos, self._check_src,
            kernels.counters.layout if compiled else None, shared=shared,
        )  # fmt: skip
        self._thresholds(ev.group_cell)
        if ev.starts.size:  # the level's count (its noise is already in), counter by counter
            self._open[ev.group_cell] += np.add.reduceat(ev.values, ev.starts)
        xf = float(lv.x)
        groups = ev.starts.size
        # A resumed counter's fresh words and their exact outcomes (read only for the counters
        # that resume inside a tripped gap, and set anew for them in each round); with shared
        # uniforms, every active counter's uniform of the round (and `uniforms`: the further
        # bits of those that settled a check).
        extra = np.zeros(groups, dtype=np.uint64)
        forced_extra = np.full(groups, -1, dtype=np.int64)
        uniforms: dict = {}
        sources = bankloop.word_sources(self) if compiled else None
        if sources is not None:  # the rounds and their draws in one compiled loop
            bankloop.run_rounds(self, ev, lv, sources, extra, forced_extra, xf, _WINDOW)
            return
        if compiled:  # the rounds' bookkeeping in compiled loops, into these buffers
            slots = np.empty((2, groups), dtype=np.int64)
            tripped = np.empty((3, groups), dtype=np.int64)
        while True:
            if compiled:
                na, nf = kernels.counters.next_round(
                    ev.cursor, ev.ends, ev.group_cell, ev.times, self._pos, ev.rest.view(np.uint8),
                    slots[0], slots[1],
                )  # fmt: skip
                if not na:
                    return
                active, fresh = slots[0, :na], slots[1, :nf]
            else:
                active = np.flatnonzero(ev.cursor < ev.ends)
                if not active.size:
                    return
                # Counters resuming inside a tripped gap with idle steps left take fresh words.
                cell = ev.group_cell[active]
                left = ev.times[ev.cursor[active]] - self._pos[cell] - 1
                ev.rest[active[left <= 0]] = False
                fresh = active[ev.rest[active]]
            if ev.shared:  # each round's checks of a counter take a fresh uniform
                fresh = active
                extra[fresh] = checks.first_bits(self._check_src, fresh.size, ev.bits)
                uniforms.clear()
            elif fresh.size:
                extra[fresh] = self._check_src.uint64(fresh.size)
            forced_extra[fresh] = -1
            while True:
                status, at, step, nb = run(
                    ev, active, extra, forced_extra, n=self._n, theta=self._theta,
                    pos=self._pos, xf=xf, window=_WINDOW,
                )  # fmt: skip
                unsure = np.flatnonzero(status >= checks.GAP_UNSURE)
                if not unsure.size:
                    break
                settle(ev, active, unsure, status, at, nb, extra, forced_extra, uniforms, lv.x,
                       self._theta, self._n, self._pos, self._check_src)  # fmt: skip
            if compiled:
                k = kernels.counters.finish(
                    ev.cells, ev.times, ev.values, ev.cursor, ev.rest.view(np.uint8), active,
                    status, at, step, nb, self._n, self._pos, *tripped,
                )  # fmt: skip
                self._close_segments(*tripped[:, :k])
            else:
                ends = checks.end_round(ev, active, status, at, step, nb, self._n, self._pos)
                self._close_segments(*ends)

    # -------------------------------------------------------------- the protocol
    def update_events(
        self,
        until: int,
        cells: Any = (),
        times: Any = (),
        values: Any = None,
    ) -> None:
        """Advance the clock to global step ``until``; counter ``cells[i]`` takes value
        ``values[i]`` (default 1) at global step ``times[i]`` and 0 at every other step.

        ``times`` must lie in ``(t, until]`` in non-decreasing order (an unsorted batch is
        refused with :class:`~sketchsyn.errors.InputError`); repeated (cell, time) pairs add
        up. The batch is checked whole first, budgets of the levels it reaches included (the
        bank is unchanged when it is refused). Work:
        ``O(events + levels crossed·size)`` vectorised, plus ``O(log)`` per counter touched.

        >>> from sketchsyn.counters import online_budgets
        >>> bank = InhomogeneousSparseBank(2, 1.0, online_budgets(1.0, 2, 0), rng=3)
        >>> bank.update_events(10, [1, 1], [4, 9]); bank.t
        10
        """
        self._check_writable()
        name = type(self).__name__
        until = check_int(until, "until", f"{name}.update_events", minimum=self._t, maximum=_LIMIT)
        c = np.asarray(cells)
        tm = np.asarray(times)
        if (
            c.ndim != 1
            or tm.shape != c.shape
            or (c.size and (c.dtype.kind not in "iu" or tm.dtype.kind not in "iu"))
        ):
            raise InputError(
                f"cells and times must be 1-D integer arrays of one length; got shapes "
                f"{c.shape} and {tm.shape} ({name})"
            )
        c = c.astype(np.int64)
        tm = tm.astype(np.int64)
        v = np.ones(c.size, dtype=np.int64) if values is None else _as_steps(values, name)
        if v.shape != c.shape:
            raise InputError(f"values must have one entry per cell; got {v.shape} ({name})")
        if c.size:
            bad = np.flatnonzero((c < 0) | (c >= self._size))
            if bad.size:
                i = int(bad[0])
                raise InputError(f"cells[{i}] = {int(c[i])} is not in [0, {self._size}) ({name})")
            bad = np.flatnonzero((tm <= self._t) | (tm > until))
            if bad.size:
                i = int(bad[0])
                raise InputError(
                    f"times[{i}] = {int(tm[i])} is not in (t, until] = ({self._t}, {until}] "
                    f"({name})"
                )
            total = float(v.sum(dtype=np.float64))
            mass = float(np.abs(self._base).max() + np.abs(self._open).max()) + 4 * self._t
            if total + mass >= 2.0**61:
                raise InputError(f"values: this batch could overflow the int64 state ({name})")
        if c.size > 1:
            bad = np.flatnonzero(tm[1:] < tm[:-1])
            if bad.size:
                i = int(bad[0]) + 1
                raise InputError(
                    f"times must be in non-decreasing order; times[{i}] = {int(tm[i])} < "
                    f"times[{i - 1}] = {int(tm[i - 1])} ({name})"
                )
        assert self._lv is not None
        self._check_levels(self._lv.r + 1, until)
        self._events(until, c, tm, v, sorted_times=True)

    def _update_steps(self, until: int, cells: np.ndarray, times: np.ndarray) -> None:
        """:meth:`update_events` with value 1 at each ``(cells[i], times[i])``, for a caller that
        guarantees its input (the online synthesizer: one record per step): ``cells`` int64 in
        ``[0, size)``, ``times`` strictly increasing in ``(t, until]``. Only the budgets of the
        levels reached are checked (and the whole input when the clock nears the int64 limit)."""
        self._check_writable()
        if 4 * until >= 2**60:
            self.update_events(until, cells, times)
            return
        assert self._lv is not None
        self._check_levels(self._lv.r + 1, until)
        ones = checks.constant(1, cells.size)
        self._events(until, cells, times, ones, sorted_times=True, distinct=True)

    def _update_sorted(self, until: int, cells: np.ndarray, times: np.ndarray, first: int) -> None:
        """:meth:`_update_steps` of records sorted by (cell, step), the first at step
        ``first`` (the online synthesizer's compiled path: one time level's records each call):
        the same draws (:func:`~sketchsyn.counters.bankloop.update_sorted`)."""
        bankloop.update_sorted(self, until, cells, times, first)

    def _events(
        self,
        until: int,
        c: np.ndarray,
        tm: np.ndarray,
        v: np.ndarray,
        sorted_times: bool = False,
        distinct: bool = False,
    ) -> None:
        """Unchecked :meth:`update_events` (``sorted_times``: ``tm`` is already ascending;
        ``distinct``: the values are positive and no (cell, step) pair repeats)."""
        if not distinct:
            nz = v > 0
            if not nz.all():
                c, tm, v = c[nz], tm[nz], v[nz]
        lv = self._lv
        assert lv is not None
        if c.size and sorted_times:
            self._by_level(c, tm, v, distinct)
        elif c.size:
            order = np.lexsort((tm, c))
            c, tm, v = checks.merge_repeats(c[order], tm[order], v[order], distinct)
            while c.size:
                # Steps before the counters' first level are not counted.
                if int(tm.min()) < lv.first:
                    keep = tm >= lv.first
                    c, tm, v = c[keep], tm[keep], v[keep]
                    continue
                inside = tm <= lv.end
                if inside.all():
                    self._prepare()
                    self._records(c, tm, v)
                    break
                if inside.any():
                    self._prepare()
                    self._records(c[inside], tm[inside], v[inside])
                c, tm, v = c[~inside], tm[~inside], v[~inside]
                self._close_level()
                lv = self._lv
                assert lv is not None
        self._advance_clock(until)

    def _by_level(self, c: np.ndarray, tm: np.ndarray, v: np.ndarray, distinct: bool) -> None:
        """:meth:`_events` of steps in ascending order: cut at the time levels first (a search
        a level, not a pass over the batch), then each level's events sorted by cell (the
        order and the draws of sorting the batch first and cutting it after)."""
        lv = self._lv
        assert lv is not None
        n = c.size
        lo = int(np.searchsorted(tm, lv.first))  # steps before the first level: not counted
        sort = kernels.counters.by_cell if kernels.enabled() else None
        while lo < n:
            hi = n if int(tm[-1]) <= lv.end else int(np.searchsorted(tm, lv.end, side="right"))
            if hi > lo:
                cc, tt, vv = checks.by_cell(c[lo:hi], tm[lo:hi], v[lo:hi], self._size, sort)
                self._prepare()
                self._records(*checks.merge_repeats(cc, tt, vv, distinct))
            if hi >= n:
                return
            self._close_level()
            lv = self._lv
            assert lv is not None
            lo = hi

    def _catch_up(self) -> None:
        """Draw every counter's idle checks up to ``t`` (before a read)."""
        lv = self._lv
        assert lv is not None
        if self._t < lv.first:
            return
        self._prepare()
        behind = np.flatnonzero(self._pos < self._t)
        if behind.size:
            self._idle(behind, self._t)

    def query(self) -> np.ndarray:  # type: ignore[override]
        """Every counter's release at step ``t`` (``S̃ +`` the sub-mechanism's output), int64."""
        self._catch_up()
        return self._base + self._sub

    def skip(self, s: int, releases: bool = False) -> np.ndarray | None:
        """Advance every counter ``s`` steps of value 0 (``O(levels)`` vectorised draws).

        ``releases=True`` returns the ``(s, size)`` releases of the skipped steps (``O(s·size)``:
        it is ``update_many`` of zeros).

        >>> from sketchsyn.counters import online_budgets
        >>> bank = InhomogeneousSparseBank(5, 0.5, online_budgets(0.5, 2, 1), start_level=1, rng=2)
        >>> bank.skip(1000); bank.t
        1003
        """
        self._check_writable()
        s = _check_s(s, type(self).__name__)
        assert self._lv is not None
        self._check_levels(self._lv.r + 1, self._t + s)
        if releases:
            return self.update_many(np.zeros((s, self._size), dtype=np.int64))
        self._advance_clock(self._t + s)
        return None

    def _steps(self, xs: object, ndim: int) -> np.ndarray:
        return _bank_steps(xs, ndim, self._size, type(self).__name__)

    def update(self, x: object) -> np.ndarray:  # type: ignore[override]
        """One step: one non-negative integer per counter; returns the ``size`` releases."""
        self._check_writable()
        return self._dense(self._steps(x, 1))[0]

    def update_many(self, xs: object) -> np.ndarray:
        """``n`` steps: ``xs`` is ``(n, size)``; returns the ``(n, size)`` releases.

        Every step of every counter is checked, so a release is known at each step: the work is
        ``O(n·size)``; use :meth:`update_events` when values are sparse.
        """
        self._check_writable()
        return self._dense(self._steps(xs, 2))

    def _dense(self, steps: np.ndarray) -> np.ndarray:
        n = steps.shape[0]
        assert self._lv is not None
        self._check_levels(self._lv.r + 1, self._t + n)
        total = float(steps.sum(dtype=np.float64))
        mass = float(np.abs(self._base).max() + np.abs(self._open).max()) + 4 * self._t
        if total + mass >= 2.0**61:
            raise InputError(f"xs: this batch could overflow the int64 state ({self._kind})")
        out = np.empty((n, self._size), dtype=np.int64)
        everyone = np.arange(self._size)
        done = 0
        while done < n:
            lv = self._lv
            assert lv is not None
            t0 = self._t
            take = min(lv.end - t0, n - done)
            self._prepare()
            self._catch_up()
            block = steps[done : done + take]
            # Step by step inside the block: each step's checks need every earlier outcome.
            for i in range(take):
                row = block[i]
                hit = np.flatnonzero(row)
                step = t0 + 1 + i
                if hit.size:
                    self._records(hit, np.full(hit.size, step, dtype=np.int64), row[hit])
                self._idle(everyone, step)
                self._t = step
                out[done + i] = self._base + self._sub
            done += take
            if self._t == lv.end:
                self._close_level()
        return out

    # -------------------------------------------------------------- bytes
    _ARRAYS = ("base", "open", "n", "theta", "pos", "segs", "sub", "row")

    def _state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """**Trusted-curator state**: the segment and level counts are exact. ``budgets`` is
        stored when it comes from :func:`~sketchsyn.counters.inhomogeneous.online_budgets`;
        otherwise pass it to :meth:`from_bytes`.

        >>> from sketchsyn.counters import online_budgets
        >>> b = InhomogeneousSparseBank(3, 1.0, online_budgets(1.0, 2, 0), rng=0)
        >>> b.update_events(40, [0, 2], [5, 6])
        >>> InhomogeneousSparseBank.from_bytes(b.to_bytes()).query().tolist() == b.query().tolist()
        True
        """
        assert self._lv is not None
        self._catch_up()  # a copy releases what its original releases at this step
        meta = {
            **self._params(),
            **self._common_meta(last=False),
            "t": self._t,
            "level": self._lv.r,
            "ready": self._ready,
            "rows": self._rows,
            "max_budget": self._max_budget,
        }
        arrays = {key: getattr(self, "_" + key) for key in self._ARRAYS}
        arrays["acc"] = self._acc[: self._rows]
        arrays["done"] = self._done[: self._rows]
        return meta, {k: np.ascontiguousarray(a).copy() for k, a in arrays.items()}

    @classmethod
    def _load_state(
        cls, fields: MetaReader, arrays: Arrays, version: int, blob: bytes, rng: Any
    ) -> InhomogeneousSparseBank:
        return bankstate.load_bank(cls, fields, arrays, rng, version)

    def __repr__(self) -> str:
        return (
            f"InhomogeneousSparseBank(size={self._size}, epsilon={self._epsilon}, "
            f"budgets={self._budgets!r}, start_level={self._start}, t={self._t})"
        )
