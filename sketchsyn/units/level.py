"""What a summary needs to take a privacy unit: its arguments, its bounder, its statement, its
bytes.

:class:`UnitLevel` is a mixin of the summaries that take ``unit=`` and ``max_rows=``
(:class:`~sketchsyn.synth.privhp.PrivHP`, :class:`~sketchsyn.synth.marginal.
MarginalSynthesizer`). Such a summary keeps a :class:`~sketchsyn.units.ContributionBounder` in
front of its counts and multiplies every noise scale by the bound, ``2L``; its privacy statement
(:func:`privacy_text`) reads ``"user-level: all rows of one unit, at most L kept"``. Every other
summary refuses ``unit=`` and ``max_rows=`` (:class:`~sketchsyn.io.summary.Summary` checks
``TAKES_UNIT`` before a constructor runs).

The bounder is part of the state and of its bytes (which makes them trusted: the table holds
fingerprints of the units). A summary merged with another one, or loaded from bytes saved
without the bounder, has none: it can be released or merged, but takes no more rows (a unit's
rows past that point could be counted again, up to ``L`` more).

>>> privacy_text("client", 16)
"user-level: all rows of one unit, at most 16 kept (unit 'client')"
>>> privacy_text(None, None)
'event-level: one row added or removed'
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputError, ParameterError, SerializationError, check_int
from ..io.serial import Arrays, MetaReader
from ..privacy.rng import RandomSource
from . import sizing
from .bounder import ContributionBounder
from .frames import rows_of, split_unit
from .ids import UnitIdError

__all__ = ["EVENT_LEVEL", "UNIT_FIELDS", "UnitLevel", "privacy_text"]

EVENT_LEVEL = "event-level: one row added or removed"
# Header fields of a unit-level summary (the first two are constructor parameters).
UNIT_FIELDS = ("unit", "max_rows", "privacy", "with_bounder")


def privacy_text(unit: str | None, max_rows: int | None) -> str:
    """The privacy statement of a summary: event level, or user level with its unit and ``L``."""
    if unit is None:
        return EVENT_LEVEL
    return f"user-level: all rows of one unit, at most {max_rows} kept (unit {unit!r})"


class UnitLevel:
    """The privacy unit of a summary (mixin): arguments, bounder, statement and bytes."""

    TAKES_UNIT = True
    _unit: str | None = None
    _max_rows: int | None = None
    _bounder: ContributionBounder | None = None

    def _take_unit(
        self,
        owner: str,
        unit: Any,
        max_rows: Any,
        expected_units: Any,
        bounder: Any,
        memory_bytes: int | None,
        source: RandomSource,
        memory_name: str | None = None,
    ) -> None:
        """Check the unit's arguments and build the bounder (its key from a child stream of
        ``source``, never from the noise's own words); ``memory_bytes`` bounds its table when no
        ``bounder`` is given (``memory_name``: the caller's argument it comes from, when the
        caller took it for the bounder alone)."""
        if memory_name is not None and memory_bytes is not None:
            memory_bytes = check_int(memory_bytes, memory_name, owner, minimum=1)
        if unit is None:
            given = [("max_rows", max_rows), ("expected_units", expected_units)]
            given.append(("bounder", bounder))
            if memory_name is not None:
                given.append((memory_name, memory_bytes))
            for name, value in given:
                if value is not None:
                    raise ParameterError(
                        f"The {name!r} parameter of {owner} is for a privacy unit: give "
                        f"unit='<column>' too. Got {value!r} instead."
                    )
            self._unit = self._max_rows = self._bounder = None
            return
        if not isinstance(unit, str) or not unit:
            raise ParameterError(
                f"The 'unit' parameter of {owner} must be the name of the privacy unit's column "
                f"(a non-empty str). Got {unit!r} instead."
            )
        if bounder is not None:
            if not isinstance(bounder, ContributionBounder):
                raise ParameterError(
                    f"The 'bounder' parameter of {owner} must be a ContributionBounder. Got "
                    f"{bounder!r} instead."
                )
            if bounder.diagnostics["rows_seen"] or bounder.units_admitted or bounder._frozen:
                raise ParameterError(
                    f"The 'bounder' parameter of {owner} must be a fresh ContributionBounder "
                    "(no rows admitted, not a snapshot)."
                )
            if expected_units is not None:
                raise ParameterError(
                    f"The 'expected_units' parameter of {owner} sizes a bounder: give it or "
                    f"'bounder', not both. Got {expected_units!r} instead."
                )
            if max_rows is None:
                max_rows = bounder.max_rows
            if max_rows != bounder.max_rows:
                raise ParameterError(
                    f"The 'max_rows' parameter of {owner} must equal the bounder's max_rows "
                    f"({bounder.max_rows}). Got {max_rows!r} instead."
                )
        if max_rows is None:
            raise ParameterError(
                f"{owner} with unit={unit!r} needs 'max_rows': the public cap L on the rows "
                "kept of each unit (the noise grows with 2L; see the privacy page)."
            )
        L = check_int(max_rows, "max_rows", owner, minimum=1, maximum=sizing.MAX_ROWS)
        if bounder is None:
            if expected_units is None and memory_bytes is None:
                raise ParameterError(
                    f"{owner} with unit={unit!r} needs 'expected_units': a public guess of the "
                    "number of units, to size the contribution bounder (or pass bounder=)."
                )
            bounder = ContributionBounder.for_units(
                L, expected_units, memory_bytes, rng=source.spawn(1)[0]
            )
        self._unit, self._max_rows, self._bounder = unit, L, bounder

    # ------------------------------------------------------------------ public face
    @property
    def unit(self) -> str | None:
        """The privacy unit's column (None: event level, one row)."""
        return self._unit

    @property
    def max_rows(self) -> int | None:
        """``L``: rows kept of each unit (None at event level)."""
        return self._max_rows

    @property
    def bounder(self) -> ContributionBounder | None:
        """The contribution bounder in front of the counts (None at event level, and after a
        merge or a load without it: such a summary takes no more rows)."""
        return self._bounder

    @property
    def privacy_unit(self) -> str:
        """The privacy statement: ``"event-level: one row added or removed"`` or
        ``"user-level: all rows of one unit, at most L kept (unit '<column>')"``."""
        return privacy_text(self._unit, self._max_rows)

    @property
    def sensitivity(self) -> int:
        """Rows by which neighbouring inputs' counted rows can differ: 1 (event level) or
        ``2L`` (user level; the proof is on the privacy page)."""
        return 1 if self._max_rows is None else 2 * self._max_rows

    def _unit_bytes(self) -> int:
        return 0 if self._bounder is None else self._bounder.nbytes

    # ------------------------------------------------------------------ rows
    def _unit_split(self, X: Any, units: Any, owner: str) -> tuple[Any, Any]:
        """``(X without the unit's column, unit keys or None)``: the ids checked (nothing
        changes yet). Event level: ``units=`` is refused."""
        if self._unit is None:
            if units is not None:
                raise ParameterError(
                    f"The 'units' parameter of {owner}.update_many is for a summary built with "
                    f"a privacy unit (unit=..., max_rows=...). Got {type(units).__name__} instead."
                )
            return X, None
        if self._bounder is None:
            raise ParameterError(
                f"this {owner} has no contribution bounder (it was merged, or loaded without "
                "it): it takes no more rows at the user level; release or merge it"
            )
        self._bounder._check_open()
        rest, ids = split_unit(X, self._unit, units)
        try:
            keys = self._bounder.keys(ids)
        except UnitIdError as exc:
            if units is not None:
                raise
            # The unit's column of a table: named like a schema column's refusal of a row.
            raise InputError(f"row {exc.row}: column {self._unit!r} {exc.problem}") from None
        n = rows_of(rest)
        if n is not None and n != keys.size:
            raise InputError(f"units has {keys.size} ids for the {n} rows of X: give one id a row")
        return rest, keys

    def _unit_admit(self, keys: np.ndarray, kept: np.ndarray | None) -> np.ndarray:
        """Admit the rows (``kept``: the rows the domain kept, None: all): the mask of them
        that the bounder keeps, one a row that reached it. The bounder's state changes."""
        assert self._bounder is not None
        if kept is not None:
            keys = keys[kept]
        return self._bounder.admit_keys(keys)

    # ------------------------------------------------------------------ bytes
    def _unit_params(self) -> dict[str, Any]:
        """The constructor's unit fields (none at event level)."""
        if self._unit is None:
            return {}
        return {"unit": self._unit, "max_rows": self._max_rows}

    def _unit_state(self, include_bounder: bool) -> tuple[dict[str, Any], Arrays]:
        """The header field stating the privacy unit, and the bounder's bytes."""
        if self._unit is None:
            return {}, {}
        arrays: Arrays = {}
        if include_bounder and self._bounder is not None:
            arrays["bounder"] = np.frombuffer(self._bounder.to_bytes(), dtype=np.uint8)
        return {"privacy": self.privacy_unit, "with_bounder": "bounder" in arrays}, arrays

    @staticmethod
    def _read_unit(fields: MetaReader) -> dict[str, Any]:
        """The constructor's unit fields of a header (``{}`` at event level), checked."""
        unit = fields.get("unit")
        if unit is None:
            for name in UNIT_FIELDS[1:]:
                if fields.has(name):
                    raise SerializationError(
                        f"{fields._label} blob header field {name!r} needs the field 'unit'"
                    )
            return {}
        unit = fields.str("unit")
        if not unit:
            raise SerializationError(f"{fields._label} blob header field 'unit' is empty")
        L = fields.int("max_rows", minimum=1, maximum=sizing.MAX_ROWS)
        fields.matches({"privacy": privacy_text(unit, L)})
        return {"unit": unit, "max_rows": L}

    @staticmethod
    def _read_bounder(
        fields: MetaReader, arrays: Arrays, unit: dict[str, Any]
    ) -> ContributionBounder | None:
        """The bounder stored with a unit-level state (None: saved without it), checked
        against ``max_rows``."""
        if not unit:
            if "bounder" in arrays:
                raise SerializationError(f"{fields._label} blob holds a bounder but no 'unit'")
            return None
        if fields.bool("with_bounder") != ("bounder" in arrays):
            raise SerializationError(
                f"{fields._label} blob header field 'with_bounder' says "
                f"{fields.get('with_bounder')!r}, but the array 'bounder' is "
                f"{'there' if 'bounder' in arrays else 'missing'}"
            )
        if "bounder" not in arrays:
            return None
        bounder = fields.nested(arrays, "bounder", ContributionBounder)
        if bounder.max_rows != unit["max_rows"]:
            raise SerializationError(
                f"{fields._label} blob array 'bounder' keeps {bounder.max_rows} rows a unit, "
                f"the header says max_rows={unit['max_rows']}"
            )
        return bounder
