"""Loading a PrivHP state from untrusted bytes: every header field read with its type and range,
the arrays' shapes derived from the checked parameters (and checked against the memory limit)
before anything is allocated, then the summary rebuilt (:meth:`PrivHP._from_state
<sketchsyn.synth.privhp.summary.PrivHP._from_state>` calls :func:`load_state`).

>>> from sketchsyn.io.serial import MetaReader
>>> state_shape({"depth": 8, "width": 64, "sketch_depth": 3, "counter_depth": 4}, None)
(31, (4, 3, 64))
>>> read_params(MetaReader({"depth": 99}, "PrivHP"))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
sketchsyn.errors.SerializationError: PrivHP blob header field 'depth' must be an int in [1, 64]...
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...errors import SerializationError, check_memory
from ...io.serial import Arrays, MetaReader
from ...privacy.lineage import Lineage
from ...privacy.rng import as_source
from ...units.level import UnitLevel
from ..distribution import PrivateDistribution

__all__ = ["load_state", "read_params", "state_shape"]

KIND = "PrivHP"
#: Header fields of the state beside the constructor parameters.
STATE_FIELDS = (
    "raw", "frozen", "lineage", "released", "diagnostics", "flushed", "privacy", "with_bounder",
)  # fmt: skip
SKETCHES = ("count-min", "count-sketch")
ALLOCATIONS = ("optimal", "uniform")
NEIGHBOURS = ("add-remove", "replace")
MAX_K = 2**62  # k and release_k: any larger value behaves like 2**depth anyway
#: |loaded count|: rows (< 4.5e15) + noise (scale ≤ 2**30); sums < 2**63.
STATE_LIMIT = 2**52


def read_params(fields: MetaReader) -> dict[str, Any]:
    """The constructor parameters in a blob's header, each checked for type and range."""
    known = {
        "domain", "epsilon", "k", "width", "sketch_depth", "depth", "sketch", "allocation",
        "seed", "neighbours", "counter_depth", "release_k", "unit", "max_rows",
    }  # fmt: skip
    unknown = fields.names() - known - set(STATE_FIELDS)
    if unknown:
        raise SerializationError(f"{KIND} blob header has unknown fields {sorted(unknown)}")
    depth = fields.int("depth", minimum=1, maximum=64)
    unit = UnitLevel._read_unit(fields)  # a privacy unit's fields (user level), checked
    return unit | {
        "domain": fields.domain().to_dict(),  # checked here, rebuilt by the constructor
        "epsilon": fields.epsilon("epsilon"),
        "k": fields.int("k", minimum=1, maximum=MAX_K),
        "width": fields.int("width", minimum=1, maximum=2**31),
        "sketch_depth": fields.int("sketch_depth", minimum=1, maximum=1024),
        "depth": depth,
        "sketch": fields.str("sketch", SKETCHES),
        "allocation": fields.str("allocation", ALLOCATIONS),
        "seed": fields.int("seed", minimum=0, maximum=2**32 - 1),
        "neighbours": fields.str("neighbours", NEIGHBOURS),
        "counter_depth": fields.int("counter_depth", minimum=0, maximum=depth),
        "release_k": fields.int("release_k", minimum=1, maximum=MAX_K),
    }


def state_shape(
    params: dict[str, Any], auto_counter_depth: Callable[..., int] | None
) -> tuple[int, tuple[int, int, int]]:
    """Shapes of the counter array and the sketch bank that ``params`` imply (checked against
    the memory limit); ``auto_counter_depth(k, width, sketch_depth, depth)`` chooses the
    counter depth when the header has none."""
    depth, width, j = (int(params[n]) for n in ("depth", "width", "sketch_depth"))
    L_c = params.get("counter_depth")
    if L_c is None:
        L_c = auto_counter_depth(int(params["k"]), width, j, depth)
    L_c = int(L_c)
    check_memory(
        8 * (2 ** (L_c + 1) - 1),
        "PrivHP",
        f"2**{L_c + 1} counters (header field 'counter_depth')",
    )
    check_memory(
        16 * width * j * (depth - L_c),
        "PrivHP",
        f"its sketch bank (header fields 'width' = {width}, 'sketch_depth' = {j}, 'depth' = "
        f"{depth}, 'counter_depth' = {L_c})",
    )
    return 2 ** (L_c + 1) - 1, (depth - L_c, j, width)


def load_state(
    cls: Any, fields: MetaReader, arrays: Arrays, version: int, blob: bytes, rng: Any
) -> Any:
    """The ``cls`` summary (PrivHP or a subclass) of a blob's checked header and arrays."""
    if version == 1:  # exact diagnostics and the release position in the header
        meta = fields.as_dict()
        meta["diagnostics"] = {
            "n_seen": meta.pop("n_seen", None),
            "n_dropped": meta.pop("n_dropped", None),
        }
        meta["released"] = meta.pop("released_at", None) is not None
        meta["lineage"] = Lineage.of_legacy_blob(blob).to_meta()
        fields = MetaReader(meta, KIND)
        # Version 1 blobs have the paper's layout: counters down to L_k, release_k = k.
        k, depth = fields.int("k", 1, MAX_K), fields.int("depth", 1, 64)
        meta["counter_depth"] = min(k.bit_length() - 1, depth)
        meta["release_k"] = k
    params = read_params(fields)
    raw = fields.bool("raw")
    frozen = fields.bool("frozen")
    released = fields.bool("released")
    lineage = fields.lineage()
    flushed = fields.bool("flushed", default=False)
    n_seen = n_removed = n_dropped = 0
    adjusted: dict[str, int] = {}
    if fields.has("diagnostics"):
        diag = MetaReader(fields.dict("diagnostics"), KIND)
        n_seen = diag.int("n_seen", minimum=0, maximum=2**63 - 1)
        n_removed = diag.int("n_removed", minimum=0, maximum=2**63 - 1, default=0)
        n_dropped = diag.int("n_dropped", minimum=0, maximum=2**63 - 1)
        adjusted = diag.counts("adjusted")
    # Sizes are checked against the blob before anything large is allocated.
    n_tree, bank_shape = cls._state_shape(params)
    lim = STATE_LIMIT
    tree_arr = fields.bounded(arrays, "tree", np.int64, (n_tree,), -lim, lim)
    bank_arr = fields.bounded(arrays, "bank", np.int64, bank_shape, -lim, lim)
    fields.array(arrays, "sigmas", np.float64, (params["depth"] + 1,))
    release = None
    if released and "release" in arrays:
        release = fields.nested(arrays, "release", PrivateDistribution)
    unit = {k: params[k] for k in ("unit", "max_rows") if k in params}
    bounder = UnitLevel._read_bounder(fields, arrays, unit)
    fields.done(arrays)  # no header field or array the class does not write
    obj = cls._from_params(params, rng=None, raw=True, bounder=bounder)
    obj._tree[...] = tree_arr
    obj._bank[...] = bank_arr
    obj._raw = raw
    obj._frozen = frozen
    obj._lineage = lineage
    obj._n_seen, obj._n_removed, obj._n_dropped = n_seen, n_removed, n_dropped
    obj._adjusted = adjusted
    obj._flushed = flushed
    # A loaded object draws any later noise (raw release) from rng (default: the OS CSPRNG).
    obj._release_stream = as_source(rng)
    if released and not lineage.released:
        lineage.record(obj._digest() if release is not None else b"", (release, None))
    return obj
