"""Loading a saved :class:`~sketchsyn.synth.continual.ContinualPrivHP`: every header field and
array checked against the parameters before anything is built (untrusted bytes raise
:class:`~sketchsyn.errors.SerializationError` naming the field).

>>> from sketchsyn import Box, ContinualPrivHP
>>> c = ContinualPrivHP(Box.unit(1), 1.0, k=2, width=8, horizon=16, depth=4, releases=4, rng=0)
>>> ContinualPrivHP.from_bytes(c.to_bytes()).releases
4
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import IncompatibleError, ParameterError, SerializationError
from ...io.serial import MetaReader, check_range
from ..offline.histogram import check_same_params

__all__: list[str] = []

_KIND = "ContinualPrivHP"
_COUNTERS = ("kary", "binary", "honaker", "hybrid")


def load_state(cls: Any, fields: MetaReader, arrays: dict[str, np.ndarray], version: int) -> Any:
    """A ContinualPrivHP from checked fields and arrays (version 1: binary, no schedule)."""
    domain = fields.domain()
    epsilon = fields.epsilon("epsilon")
    k = fields.int("k", minimum=1, maximum=2**62)
    width = fields.int("width", minimum=1, maximum=2**40)
    sketch_depth = fields.int("sketch_depth", minimum=1, maximum=2**20)
    depth = fields.int("depth", minimum=1, maximum=int(domain.max_depth))
    seed = fields.int("seed", minimum=0, maximum=2**32 - 1)
    horizon = fields.int("horizon", minimum=1, maximum=2**62)
    t = fields.int("t", minimum=0, maximum=horizon)
    sketch = fields.str("sketch", ("count-min", "count-sketch"))
    frozen = fields.bool("frozen")
    lineage = fields.lineage()
    counter, arity, releases, every = "binary", None, None, None
    if version >= 2:
        counter = fields.str("counter", _COUNTERS)
        arity = fields.optional_int("arity", minimum=3, present=True)
        releases = fields.optional_int("releases", minimum=1, present=True)
        every = fields.optional_int("release_every", minimum=1, present=True)
    try:
        obj = cls(
            domain,
            epsilon,
            k,
            width,
            horizon=horizon,
            sketch_depth=sketch_depth,
            depth=depth,
            sketch=sketch,
            seed=seed,
            counter=counter,
            arity=arity,
            releases=releases,
            release_every=every,
            rng=None,
        )
    except ParameterError as exc:
        raise SerializationError(f"{_KIND} blob header fields are inconsistent: {exc}") from None
    # Every other field is derived (counter_depth, release_k, the default arity): it must be
    # what the object rebuilt from the fields above writes (version 1: no counter fields).
    params = obj._params()
    if version < 2:
        for name in ("counter", "arity", "releases", "release_every"):
            params.pop(name)
    fields.matches(params)
    L, n_cells = obj.L_k, int(obj._offsets[-1])
    try:
        tree_a = fields.array(arrays, "tree", np.int64, (obj._n_tree,))
        bank_a = fields.array(arrays, "bank", np.int64, (depth - L, sketch_depth, width))
        closed = fields.array(arrays, "closed", np.int64, (n_cells,)) if obj._scheduled else None
        obj._table.load(fields, arrays, obj._epoch_of(t))
    except SerializationError as exc:
        raise SerializationError(
            f"{exc} (header fields k={k}, width={width}, sketch_depth={sketch_depth}, "
            f"depth={depth}, horizon={horizon})"
        ) from None
    fields.done(arrays)
    n_seen = _check_counts(tree_a, bank_a, L, t, sketch, "tree", "bank")
    if closed is not None:
        n_tree, shape, end = obj._n_tree, bank_a.shape, obj._end(obj._epoch_of(t))
        _check_counts(
            closed[:n_tree], closed[n_tree:].reshape(shape), L, end, sketch, "closed", "closed"
        )
    ex = obj._exact
    ex._tree[...] = tree_a
    ex._bank[...] = bank_a
    if closed is not None:
        obj._closed[...] = closed
    obj._t = t
    # The inner exact state counts the rows; only differences of n_seen are used.
    ex._n_seen = n_seen
    obj._frozen = frozen
    obj._lineage = lineage
    return obj


def _check_counts(
    tree_a: np.ndarray, bank_a: np.ndarray, L: int, t: int, sketch: str, tname: str, bname: str
) -> int:
    """The net count of a hierarchy of exact counts of at most ``t`` events, insertions and
    deletions (else SerializationError naming the array). Each event moves one cell of every
    counter level and one bucket of every sketch row by ±1 (deletions are all applied, so
    counts may be negative): every level and row moves at most ``t`` in all (``Σ|c| ≤ t``),
    the counter levels sum to the root, and so do the Count-Min rows.

    >>> _check_counts(np.array([1, 2, -1]), np.zeros((0, 1, 4), np.int64), 1, 3, "count-min",
    ...               "tree", "bank")
    1
    """
    where = f"{_KIND} blob array {tname!r}"
    check_range(tree_a, -t, t, where)  # no |x| below may wrap: every value is within ±t
    check_range(bank_a, -t, t, f"{_KIND} blob array {bname!r}")
    n_seen = int(tree_a[0])
    for level in range(L + 1):
        cells = tree_a[2**level - 1 : 2 ** (level + 1) - 1]
        if float(np.abs(cells).sum(dtype=np.float64)) > t or int(cells.sum()) != n_seen:
            raise SerializationError(
                f"{where} is not a hierarchy of exact counts of at most t={t} events (level "
                f"{level})"
            )
    if bank_a.size:
        moved = np.abs(bank_a).sum(axis=2, dtype=np.float64)
        if (moved > t).any() or (sketch == "count-min" and (bank_a.sum(axis=2) != n_seen).any()):
            raise SerializationError(
                f"{_KIND} blob array {bname!r} is not a {sketch} bank of at most t={t} events "
                f"netting {n_seen} rows"
            )
    return n_seen


def save_state(me: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Header fields and arrays of ``me`` (every noise slot its last epoch reads drawn first)."""
    if not me._frozen:
        me._fill()
    me._flush()
    ex = me._exact
    meta = me._params() | {
        "t": me._t,
        "frozen": me._frozen,
        "lineage": me._lineage.to_meta(),
    }
    arrays = {"tree": ex._tree, "bank": ex._bank, **me._table.arrays()}
    if me._scheduled:
        arrays["closed"] = me._closed
    return meta, arrays


def check_mergeable(me: Any, other: Any) -> None:
    """Refuse a merge that would not be the counters on the concatenated stream."""
    if not isinstance(other, type(me)):
        raise IncompatibleError(f"can only merge a ContinualPrivHP, got {type(other)!r}")
    if other is me:
        raise IncompatibleError("cannot merge a ContinualPrivHP with itself")
    check_same_params(me._params(), other._params(), "ContinualPrivHP summaries")
    if me._scheduled:
        raise IncompatibleError(
            "cannot merge ContinualPrivHP summaries with a release schedule: the epochs of "
            "the appended stream would not line up"
        )
    if other._frozen or other._absorbed or not other._table.untouched():
        raise IncompatibleError(
            "cannot merge a ContinualPrivHP that has released, been snapshotted or merged: "
            "its rows were already released under its own noise"
        )
