"""What every column of a table :class:`~sketchsyn.domains.schema.Schema` is:
:class:`Column`, the abstract interface of the kinds (:mod:`~sketchsyn.domains.columns`), and
:class:`Adjusted`, the counts of what the columns' policies changed in a batch.

A column maps its values to **units** (one float64 per value) and its units to a **code** of
``bits`` bits; codes ``0 … n_codes − 1`` name values. Everything here is public metadata given
by the user: nothing is read from the data.

>>> counts = Adjusted()
>>> tally(counts, "month", "clipped", 3)
>>> dict(counts)
{'month:clipped': 3}
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar

import numpy as np

from ..errors import InputError, ParameterError
from .tables import item
from .values import is_missing, value_text
from .where import Condition

__all__ = ["CONTINUOUS_BITS", "MAX_INTEGER_SPAN", "Adjusted", "Column", "tally"]

_U64 = np.uint64
CONTINUOUS_BITS = 32  # code bits of a numeric or datetime column
MAX_INTEGER_SPAN = 2**53  # integers stay exact in float64 units


class Adjusted(dict):
    """Per-column counts of values a policy changed or dropped in one batch (exact, not private).

    Keys are ``"<column>:<action>"`` (``clipped``, ``other``, ``dropped``).

    >>> a = Adjusted(); a.add("hour", "clipped", 2); dict(a)
    {'hour:clipped': 2}
    """

    def add(self, column: str, action: str, n: int) -> None:
        tally(self, column, action, n)


def tally(counts: dict[str, int], column: str, action: str, n: int) -> None:
    """Add ``n`` to ``counts["<column>:<action>"]`` (nothing when ``n`` is 0)."""
    if n:
        key = f"{column}:{action}"
        counts[key] = counts.get(key, 0) + int(n)


class Column(abc.ABC):
    """One column of a schema: its name, kind, out-of-schema policy, units and codes."""

    kind: ClassVar[str]
    POLICIES: ClassVar[tuple[str, ...]] = ("raise", "drop")

    def __init__(self, name: str, policy: str = "raise") -> None:
        if not isinstance(name, str) or not name:
            raise ParameterError(
                f"The 'name' of a {self.kind} column must be a non-empty str. Got {name!r} instead."
            )
        self.name = name
        if policy not in self.POLICIES:
            raise ParameterError(
                f"The 'policy' of column {name!r} ({self.kind}) must be one of "
                f"{list(self.POLICIES)}. Got {policy!r} instead."
            )
        self.policy = policy

    # ------------------------------------------------------------------ what a kind supplies
    @property
    @abc.abstractmethod
    def bits(self) -> int:
        """Bits of the column's code."""

    @property
    @abc.abstractmethod
    def n_codes(self) -> int:
        """Codes ``0 … n_codes − 1`` name values; higher codes name none."""

    @abc.abstractmethod
    def _to_units(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Units of a 1-D array of raw values, and a mask of values outside the column (NaN
        units for values that could not be read at all)."""

    @abc.abstractmethod
    def codes(self, units: np.ndarray) -> np.ndarray:
        """Codes (uint64) of valid units."""

    @abc.abstractmethod
    def output(self, units: np.ndarray, library: str) -> Any:
        """The units as a column of the right type for ``library`` (``numpy``, ``pandas``,
        ``polars``, ``pyarrow``)."""

    @abc.abstractmethod
    def value_units(self, value: Any) -> float:
        """The units of one value written in a condition (``"AA"``, ``60``, ``"2013-06-01"``)."""

    @abc.abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """The column's entry of the schema's dict form."""

    # ------------------------------------------------------------------ shared behaviour
    @property
    def discrete(self) -> bool:
        """True when every code names one value (all kinds but numeric and datetime)."""
        return True

    def units(self, values: Any, adjusted: Adjusted, offset: int = 0) -> np.ndarray:
        """Checked units of a batch of raw values (a column of any library; NaN where the
        ``"drop"`` policy drops a row); the policy applied to out-of-schema values, counted in
        ``adjusted``. ``offset`` is the batch's first row, for error messages."""
        units, outside = self._to_units(values)
        if outside.any():
            units = self._apply_policy(values, units, outside, adjusted, offset)
        return units

    def _apply_policy(
        self, raw: Any, units: np.ndarray, outside: np.ndarray, adjusted: Adjusted, offset: int
    ) -> np.ndarray:
        if self.policy == "drop":
            units = units.copy()
            units[outside] = np.nan
            tally(adjusted, self.name, "dropped", int(outside.sum()))
            return units
        i = int(np.flatnonzero(outside)[0])
        value = item(raw, i)
        shown = "" if is_missing(value) else f" = {value_text(value)}"
        raise InputError(
            f"row {offset + i}: column {self.name!r}{shown} "
            f"{self._outside_text(value, float(units[i]))} "
            f"(policy {self.policy!r}; set the column's policy to "
            f"{' or '.join(repr(p) for p in self.POLICIES if p != 'raise')} to accept such values)"
        )

    def _outside_text(self, value: Any, unit: float) -> str:
        """Why ``value`` (its units ``unit``, NaN when unreadable) is outside the column."""
        if is_missing(value):
            return "is missing"
        return f"is not a {self.kind} value of the schema"

    def valid_range(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The codes of ``[lo, hi)`` that name values: ``[lo, min(hi, n_codes))`` (uint64;
        empty where ``lo ≥ n_codes``)."""
        return lo, np.minimum(hi, _U64(self.n_codes))

    def sample(self, lo: np.ndarray, hi: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Units uniform over the valid codes of ``[lo, hi)`` (``u`` uniform in [0, 1)); a range
        with no valid code gives the last valid code."""
        lo, hi = self.valid_range(lo, hi)
        hi = np.maximum(hi, np.minimum(lo, _U64(self.n_codes - 1)) + _U64(1))
        lo = np.minimum(lo, hi - _U64(1))
        span = (hi - lo).astype(np.float64)
        code = lo + np.minimum(np.floor(u * span), span - 1).astype(_U64)
        return self._code_units(code)

    def _code_units(self, code: np.ndarray) -> np.ndarray:
        return code.astype(np.float64)

    def valid_count(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """How many codes of ``[lo, hi)`` name values (float64)."""
        lo, hi = self.valid_range(lo, hi)
        return np.where(hi > lo, (hi - lo).astype(np.float64), 0.0)

    def fraction(self, lo: np.ndarray, hi: np.ndarray, cond: Condition) -> np.ndarray:
        """Share of the valid values of code range ``[lo, hi)`` inside ``cond`` (uniform)."""
        vlo, vhi = self.valid_range(lo, hi)
        a = self._code_units(vlo)
        b = self._code_units(np.maximum(vhi, vlo + _U64(1)) - _U64(1))  # last valid value
        total = np.maximum(vhi.astype(np.float64) - vlo.astype(np.float64), 0.0)
        hit = np.zeros(lo.shape, dtype=np.float64)
        for low, high, low_open, high_open in cond.intervals:
            first = np.floor(low) + 1 if low_open and low == np.floor(low) else np.ceil(low)
            last = np.ceil(high) - 1 if high_open and high == np.ceil(high) else np.floor(high)
            hit += np.clip(np.minimum(b, last) - np.maximum(a, first) + 1, 0.0, None)
        return np.where(total > 0, np.minimum(hit, total) / np.where(total > 0, total, 1), 0.0)

    def range_units(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """First and last value (units) of the valid codes of ``[lo, hi)``."""
        vlo, vhi = self.valid_range(lo, hi)
        last = np.maximum(vhi, vlo + _U64(1)) - _U64(1)
        return self._code_units(vlo), self._code_units(last)

    def normalize(self, units: np.ndarray) -> np.ndarray:
        """Units → ``[0, 1]`` (code position), for distances between records."""
        return self.codes(units).astype(np.float64) / max(self.n_codes - 1, 1)

    def _dict(self, **fields: Any) -> dict[str, Any]:
        out = {"name": self.name, "kind": self.kind, **fields}
        if self.policy != "raise":
            out["policy"] = self.policy
        return out


def _bits_for(n: int) -> int:
    return max(1, (n - 1).bit_length())


def _float_values(values: np.ndarray) -> np.ndarray:
    """A float64 view of numbers (numbers written as text too); NaN where unreadable."""
    if values.dtype.kind in "fiu":
        return values.astype(np.float64, copy=False)
    out = np.full(values.shape[0], np.nan)
    if values.dtype.kind == "b":
        return out
    for i, v in enumerate(values):
        if isinstance(v, (bool, np.bool_)) or v is None:
            continue
        try:
            out[i] = float(v)
        except (TypeError, ValueError):
            continue
    return out
