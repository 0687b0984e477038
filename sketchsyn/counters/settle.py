"""Exact outcomes of the batched sparse checks that the float margin left open.

A round of an :class:`~sketchsyn.counters.sparsebank.InhomogeneousSparseBank`'s checks
(:mod:`sketchsyn.counters.checks`) stops at a check whose uniform's known bits cannot decide it
(:data:`~sketchsyn.counters.checks.GAP_UNSURE`, ``OWN_UNSURE``). :func:`settle` decides each such
check exactly, with the exact inversion of :mod:`sketchsyn.counters.sparse` and the same uniform
(its further bits from the check source), and records the outcome in the events' ``forced_*``
arrays, so that the round's next scan takes it as decided.

With a word per check (a seeded bank), a check's uniform is its own. With one uniform per
counter and round (``Events.shared``, a private bank), a check is settled given the checks of
the round before it, which all stayed: it trips at the first ``g`` with
``U ≥ S·(1 − p)^g``, ``S`` the exact product of their stay probabilities; the uniform's further
bits are kept for a later open check of the same round (``uniforms``).

>>> import numpy as np
>>> from sketchsyn.privacy.rng import as_source
>>> from sketchsyn.counters import checks
>>> ev = checks.Events.of(np.array([0, 0]), np.array([3, 9]), np.ones(2, int),
...                       np.zeros(1, int), as_source(0), shared=True)
>>> extra, forced_extra = np.array([1 << 63], dtype=np.uint64), np.full(1, -1)
>>> settle(ev, np.arange(1), np.array([0]), np.array([checks.GAP_UNSURE]), np.array([0]),
...        np.zeros(1, int), extra, forced_extra, {}, Fraction(1, 2), np.full(1, -10**6),
...        np.zeros(1, int), np.zeros(1, int), as_source(1))
>>> int(ev.forced_gap[0])   # a threshold far below N: the gap's first idle check trips
1
"""

from __future__ import annotations

import collections
from fractions import Fraction

import numpy as np

from ..privacy.exactexp import Real
from ..privacy.rng import RandomSource
from . import checks
from .sparse import _first_trip, _LazyUniform, _stay_real, exact_trip, lazy_uniform

__all__ = ["settle"]


def settle(
    ev: checks.Events,
    active: np.ndarray,
    unsure: np.ndarray,
    status: np.ndarray,
    at: np.ndarray,
    nb: np.ndarray,
    extra: np.ndarray,
    forced_extra: np.ndarray,
    uniforms: dict[int, _LazyUniform],
    x: Fraction,
    theta: np.ndarray,
    n: np.ndarray,
    pos: np.ndarray,
    src: RandomSource,
) -> None:
    """Settle the open checks ``unsure`` (indices into ``active`` and the scan's outputs),
    in counter order. ``x``: ``1/scale`` of the checks' noise; ``theta``, ``n``, ``pos``: the
    bank's per-counter arrays at the round's start; ``uniforms``: the round's shared uniforms
    settled so far (by group)."""
    if not ev.forced_gap.flags.writeable:  # the shared read-only defaults (checks.constant)
        ev.forced_gap, ev.forced_own = ev.forced_gap.copy(), ev.forced_own.copy()
    for i in unsure.tolist():
        grp, e = int(active[i]), int(at[i])
        a = int(theta[ev.cells[e]] - nb[i])
        resumed = bool(ev.rest[grp]) and e == ev.cursor[grp]
        # the idle steps before event e (for a resumed counter, the rest of its tripped gap)
        s = int(ev.times[e] - (pos[ev.cells[e]] if e == ev.cursor[grp] else ev.times[e - 1]) - 1)
        own = status[i] == checks.OWN_UNSURE
        if ev.shared:
            u = uniforms.get(grp)
            if u is None:
                u = uniforms[grp] = lazy_uniform(int(extra[grp]), src, ev.bits)
            before = _stays_before(ev, grp, e, own, x, theta, n, pos)
            if own:
                ev.forced_own[e] = _first_trip(x, a - int(ev.values[e]), 1, src, u=u, before=before)
            elif resumed:
                forced_extra[grp] = _first_trip(x, a, s, src, u=u, before=before)
            else:
                ev.forced_gap[e] = _first_trip(x, a, s, src, u=u, before=before)
        elif own:
            k = int(ev.own_words[e])
            ev.forced_own[e] = exact_trip(x, a - int(ev.values[e]), 1, k, src, ev.own_bits)
        elif resumed:  # fresh words are whole
            forced_extra[grp] = exact_trip(x, a, s, int(extra[grp]), src)
        else:
            k = int(ev.gap_words[ev.gap_row[e]])
            ev.forced_gap[e] = exact_trip(x, a, s, k, src, ev.bits)


def _stays_before(
    ev: checks.Events,
    grp: int,
    e: int,
    own: bool,
    x: Fraction,
    theta: np.ndarray,
    n: np.ndarray,
    pos: np.ndarray,
) -> Real | None:
    """The exact probability that the checks of ``grp``'s round before event ``e``'s gap (its
    own check, with ``own``: the gap's too) all stay, as one :class:`Real` (None: no check
    before it). Checks at one ``a = θ − N`` are one factor ``(1 − p)^g``."""
    c0 = int(ev.cursor[grp])
    cell = int(ev.cells[c0])
    th, count, prev = int(theta[cell]), int(n[cell]), int(pos[cell])
    power: collections.Counter[int] = collections.Counter()  # a -> checks at it
    for j in range(c0, e + 1):
        t = int(ev.times[j])
        if t - prev - 1 > 0 and (j < e or own):
            power[th - count] += t - prev - 1
        if j == e:
            break
        power[th - count - int(ev.values[j])] += 1
        count += int(ev.values[j])
        prev = t
    if not power:
        return None
    return Real.product([_stay_real(x, a, g) for a, g in sorted(power.items())])
