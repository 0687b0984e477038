"""Loading a :class:`~sketchsyn.synth.marginal.synthesizer.MarginalSynthesizer` from its bytes:
the header's parameters (:func:`from_params`) and the whole state (:func:`from_state`), every
field checked before anything is allocated; a refusal is a ``SerializationError`` naming it.

>>> import numpy as np
>>> from sketchsyn import Box, MarginalSynthesizer
>>> syn = MarginalSynthesizer(Box.unit(2), epsilon=1.0, bits=2, fine_bits=3, rng=0)
>>> syn.update_many(np.random.default_rng(0).random((100, 2)))
>>> MarginalSynthesizer.from_bytes(syn.to_bytes(), rng=1).nbytes == syn.nbytes
True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...domains import Box, Schema
from ...errors import ParameterError, SerializationError
from ...io.serial import Arrays, MetaReader
from ...privacy.rng import RNGLike
from ...units.bounder import ContributionBounder
from ...units.level import UNIT_FIELDS
from . import layout
from .budget import RULE_PARTS, is_rule
from .checks import TABLE_PARAMS, check_counts
from .model import MarginalDistribution

__all__ = ["from_params", "from_state", "read_domain"]

_STATE_FIELDS = ("frozen", "lineage", "released", "diagnostics")
_PARAM_FIELDS = {"domain", "epsilon", "bits", "fine_bits", "singles_share", "consistency"}
_TABLE_FIELDS = {"domain", "epsilon", *TABLE_PARAMS}
_DIAGNOSTICS = {"n_seen", "n_dropped", "adjusted"}


def read_domain(fields: MetaReader, kind: str) -> Box | Schema:
    """The header's domain: a Box or a Schema of 2 to 64 columns."""
    domain = fields.domain()
    if not isinstance(domain, (Box, Schema)) or not 2 <= domain.d <= layout.MAX_COLUMNS:
        raise SerializationError(
            f"{kind} blob header field 'domain' must be a Box or a Schema of 2 to "
            f"{layout.MAX_COLUMNS} columns"
        )
    return domain


def read_rule(fields: MetaReader, fail: Any, required: bool) -> tuple[str, ...]:
    """The header's ``rule`` (written since format version 3, absent before: none): the release
    parts chosen for the noisy row count (:func:`~sketchsyn.synth.marginal.budget.is_rule`)."""
    if not fields.has("rule"):
        if required:
            raise fail("header field 'rule' is missing")
        return ()
    raw = fields.as_dict()["rule"]
    if not is_rule(raw):
        raise fail(f"header field 'rule' must list names from {list(RULE_PARTS)} in that order")
    return tuple(raw)


def from_params(cls: Any, fields: MetaReader, rng: RNGLike, version: int | None = None) -> Any:
    """A summary of class ``cls`` built from the header's parameters (an empty state);
    ``version``: the blob's format version, when read from one."""
    domain = read_domain(fields, cls.kind)
    unit: dict[str, Any] = cls._read_unit(fields)
    if unit:  # a placeholder: the loader puts the saved bounder (or none) in its place
        unit = unit | {"bounder": ContributionBounder(unit["max_rows"], 1, rng=0)}
    try:
        if isinstance(domain, Schema) and fields.has("column_bits"):
            pairs = domain.d * (domain.d - 1) // 2
            rule = read_rule(
                fields,
                lambda text: SerializationError(f"{cls.kind} blob {text}"),
                required=version is not None and version >= 3,
            )
            obj = cls(
                domain,
                fields.epsilon("epsilon"),
                column_bits=fields.as_dict()["column_bits"],
                singles_share=fields.float("singles_share", minimum=0.0, maximum=1.0),
                select_share=fields.float("select_share", minimum=0.0, maximum=1.0),
                rounds=fields.int("rounds", minimum=0, maximum=pairs - (domain.d - 1)),
                rng=rng,
                **unit,
            )
            if rule:  # the parts its release chooses for its noisy row count
                obj._set_rule(rule)
            return obj
        bits = fields.int("bits", minimum=1, maximum=layout.MAX_BITS)
        more = {}
        if isinstance(domain, Schema):  # version 1: bits, fine_bits and exact_bits
            more["exact_bits"] = fields.int("exact_bits", minimum=1, maximum=layout.MAX_EXACT_BITS)
        else:
            more["consistency"] = fields.str("consistency", ("uniform", "proportional"))
        return cls(
            domain,
            fields.epsilon("epsilon"),
            bits=bits,
            fine_bits=fields.int("fine_bits", minimum=bits, maximum=layout.MAX_FINE_BITS),
            singles_share=fields.float("singles_share", positive=True, minimum=0.0, maximum=1.0),
            rng=rng,
            **more,
            **unit,
        )
    except ParameterError as exc:
        raise SerializationError(f"{cls.kind} blob header field: {exc}") from exc


def from_state(cls: Any, fields: MetaReader, arrays: Arrays, rng: Any, version: int = 3) -> Any:
    """Every field is checked, the counts' dtype and shape are validated against the domain
    and the bits before anything is built, and every count must lie in ``[0, 2**52]`` with
    each table summing to at most ``2**52``; ``rng`` seeds the noise of a later release."""
    domain = read_domain(fields, cls.kind)
    known = set(_STATE_FIELDS) | _PARAM_FIELDS | set(UNIT_FIELDS)
    if isinstance(domain, Schema):
        known = (
            set(_STATE_FIELDS)
            | set(UNIT_FIELDS)
            | (_TABLE_FIELDS if fields.has("column_bits") else _PARAM_FIELDS | {"exact_bits"})
        )
    unknown = fields.names() - known
    if unknown:
        raise SerializationError(f"{cls.kind} blob header has unknown fields {sorted(unknown)}")
    bounder = cls._read_bounder(fields, arrays, cls._read_unit(fields))
    obj = from_params(cls, fields, rng, version)  # every parameter checked, the size refused
    lay = obj._layout
    counts = fields.array(arrays, "counts", np.int64, (lay.cells,))
    for name in arrays:
        if name not in ("counts", "release", "bounder"):
            raise SerializationError(f"{cls.kind} blob has an unexpected array {name!r}")
    adjusted: dict[str, int] = {}
    if fields.has("diagnostics"):
        diag = MetaReader(fields.dict("diagnostics"), cls.kind)
        extra = diag.names() - _DIAGNOSTICS
        if extra:
            raise SerializationError(
                f"{cls.kind} blob header field 'diagnostics' has unknown fields {sorted(extra)}"
            )
        adjusted = diag.counts("adjusted")
    check_counts(
        lay.pair_tables(counts[: lay.pair_cells]) + lay.single_tables(counts[lay.pair_cells :]),
        [f"pair table {p}" for p in lay.pairs] + [f"column {j}'s table" for j in range(lay.d)],
        lambda text: SerializationError(f"{cls.kind} blob array 'counts': {text}"),
    )
    copy = cls._read_copy(fields, arrays, MarginalDistribution)
    obj._load_copy(counts, copy, {})
    obj._adjusted = adjusted
    if obj._unit is not None:
        obj._bounder = bounder
    return obj
