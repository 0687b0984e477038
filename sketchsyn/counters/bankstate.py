"""Reading a saved :class:`~sketchsyn.counters.sparsebank.InhomogeneousSparseBank`: every
header field and array checked (types, ranges, shapes against ``size``, the tree rows, segment
counts and clocks consistent with the level) before the bank is built.

>>> from sketchsyn.counters import InhomogeneousSparseBank, online_budgets
>>> b = InhomogeneousSparseBank(3, 1.0, online_budgets(1.0, 2, 0), rng=0)
>>> b.update_events(40, [0, 2], [5, 6])
>>> InhomogeneousSparseBank.from_bytes(b.to_bytes()).t
40
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import SerializationError
from ..io.serial import Arrays, MetaReader
from .base import _CAPACITY, _int_array, _read_sensitivity
from .inhomogeneous import _level_start

__all__ = ["load_bank"]


def load_bank(cls: Any, fields: MetaReader, arrays: Arrays, rng: Any, version: int) -> Any:
    """The bank of class ``cls`` from its checked header ``fields`` and ``arrays`` of a
    ``version`` blob (later noise from ``rng``); a
    :class:`~sketchsyn.errors.SerializationError` names a field or array that is wrong. In a
    version 1 blob ``open`` holds the current level's noise as well as its count (drawn when
    the level opened); from version 2 the count alone (the noise is drawn at the close)."""
    kind = cls._kind
    size = fields.int("size", 1, 2**31)
    # The per-counter arrays are in the blob: checking their shapes against 'size' first
    # means nothing below allocates more than the blob holds.
    loaded = {key: _int_array(fields, arrays, key, (size,)) for key in cls._ARRAYS}
    eps = fields.epsilon("epsilon")
    start = fields.int("start_level", 0, 60)
    sensitivity = _read_sensitivity(fields)
    budgets = cls._stored_budgets(fields, kind)
    level = fields.int("level", start, _CAPACITY - 2)
    ready = fields.bool("ready")
    rows = fields.int("rows", 0, size)
    max_budget = fields.float("max_budget", minimum=0.0, maximum=eps)
    obj = object.__new__(cls)
    obj._setup(size, eps, budgets, start, sensitivity, rng)
    obj._restore_common(fields, last=None)
    obj._check_levels(start, _level_start(level, obj._eps_frac))
    lv = obj._first_level(level)
    if lv.r != level:
        raise SerializationError(f"{kind} blob header field 'level' = {level} is empty")
    obj._lv = lv
    obj._t = fields.int("t", lv.first - 1, lv.end)
    obj._ready, obj._rows, obj._max_budget = ready, rows, max_budget
    obj._open_noisy = version == 1  # its 'open' holds the level's noise, drawn on entry
    for key, a in loaded.items():
        setattr(obj, "_" + key, a)
    # A ready level's state is saved with every counter checked (its read catches them up):
    # a counter left unchecked would have no threshold.
    if ready and (obj._pos < lv.first).any():
        raise SerializationError(
            f"{kind} blob array 'pos' holds a counter the ready level {level} never checked"
        )
    obj._acc = _int_array(fields, arrays, "acc", (rows, lv.sub_levels))
    obj._done = _int_array(fields, arrays, "done", (rows, lv.sub_levels))
    if (obj._pos < lv.first - 1).any() or (obj._pos > obj._t).any():
        raise SerializationError(f"{kind} blob array 'pos' lies outside level {level}")
    used = obj._row[obj._row >= 0]
    if (
        (obj._row < -1).any()
        or used.size != obj._rows
        or (used.size and (used.max() >= obj._rows or np.unique(used).size != used.size))
        or bool(((obj._row >= 0) != (obj._segs > 0)).any())
        or (obj._segs < 0).any()
        or (obj._segs > lv.length).any()
        or (obj._n < 0).any()
    ):
        raise SerializationError(
            f"{kind} blob arrays 'row', 'segs' and 'n' are inconsistent (tree rows, segment "
            "counts or segment values)"
        )
    return obj
