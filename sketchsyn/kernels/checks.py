"""The sparse counters' batched checks by the compiled :func:`sketchsyn.kernels._counters.scan`,
called as :func:`sketchsyn.counters.checks.scan` is (its numpy reference).

>>> import numpy as np
>>> from sketchsyn import kernels
>>> from sketchsyn.counters import checks
>>> from sketchsyn.privacy.rng import as_source
>>> def events():
...     return checks.Events.of(np.array([0, 0]), np.array([3, 9]), np.ones(2, int),
...                             np.zeros(1, int), as_source(0))
>>> rest = (np.arange(1), np.zeros(1, np.uint64), np.full(1, -1))
>>> def state():
...     return dict(n=np.zeros(1, int), theta=np.full(1, 10**6), pos=np.zeros(1, int), xf=0.5,
...                 window=4096)
>>> got = run(events(), *rest, **state()) if kernels.enabled() else None
>>> got is None or [a.tolist() for a in got] == [
...     a.tolist() for a in checks.scan(events(), *rest, **state())]
True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import counters

__all__ = ["run"]


def run(
    ev: Any, active: np.ndarray, extra: np.ndarray, forced_extra: np.ndarray, **state: Any
) -> tuple[np.ndarray, ...]:
    """:func:`sketchsyn.counters.checks.scan`'s call (``ev``: its ``Events``; ``state``: its
    keywords ``n``, ``theta``, ``pos``, ``xf``, ``window``) and results, by the compiled
    ``scan``, rounds without a trip chained (the bank's state moves on through them; what it
    applies after the call then changes nothing for them)."""
    out = np.empty((4, active.size), dtype=np.int64)  # status, at, step, nb
    counters.scan(
        ev.cells, ev.times, ev.values, ev.ends, ev.cursor, ev.rest.view(np.uint8), ev.gap_row,
        ev.gap_words, ev.own_words, ev.forced_gap, ev.forced_own, active, extra, forced_extra,
        state["n"], state["theta"], state["pos"], float(state["xf"]), float(ev.span),
        float(ev.own_span), int(state["window"]), True, bool(ev.shared), *out,
    )  # fmt: skip
    return tuple(out)
