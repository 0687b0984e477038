"""The columns of a table :class:`~sketchsyn.domains.schema.Schema`, one class per kind.

Each column maps its values to **units** (one float64 per value: the number itself for a
numeric or integer column, microseconds since 1970 for a datetime, the category's index for a
categorical, 0/1 for a boolean, the 32-bit address for an IPv4 column) and its units to a
**code** of ``bits`` bits, the column's share of a record's cell code. Codes
``0 … n_codes − 1`` name values; a code at or above ``n_codes`` (a categorical's or an integer's
unused tail up to the next power of two) names none, and a release gives such cells no mass.

Everything here is public metadata given by the user: nothing is read from the data.

>>> col = CategoricalColumn("carrier", ["9E", "AA", "AS"])
>>> col.bits, col.n_codes
(2, 3)
>>> col.units(np.array(["AA", "9E"], dtype=object), Adjusted()).tolist()
[1.0, 0.0]
>>> IntegerColumn("month", 1, 12).codes(np.array([1.0, 12.0])).tolist()
[0, 11]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import InputError, ParameterError
from .base import _row_text
from .column import (
    _U64,
    CONTINUOUS_BITS,
    MAX_INTEGER_SPAN,
    Adjusted,
    Column,
    _bits_for,
    _float_values,
    tally,
)
from .ipv4 import _parse_ipv4, parse_ipv4
from .tables import item, to_numpy_1d
from .values import _EPOCH, _datetime_us, _iso_text, _time_text, is_missing, value_text
from .where import Condition

__all__ = [
    "Adjusted",
    "BooleanColumn",
    "CategoricalColumn",
    "Column",
    "DatetimeColumn",
    "IPv4Column",
    "IntegerColumn",
    "NumericColumn",
    "column_from_dict",
    "ipv4_text",
    "is_missing",
    "tally",
    "value_text",
]


class _Ordered(Column):
    """Numeric, integer and datetime columns: ``[low, high]`` with a clip policy."""

    POLICIES = ("raise", "clip", "drop")

    def _check_bounds(self, low: float, high: float, raw: tuple[Any, Any]) -> None:
        finite = math.isfinite(low) and math.isfinite(high) and math.isfinite(high - low)
        if not finite or not low < high:
            raise ParameterError(
                f"The 'low' and 'high' of column {self.name!r} ({self.kind}) must be finite "
                f"with low < high and a finite span high − low. Got low={raw[0]!r}, "
                f"high={raw[1]!r} instead."
            )
        self.low, self.high = low, high

    def _bounded(self, units: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with np.errstate(invalid="ignore"):
            outside = ~((units >= self.low) & (units <= self.high))
        return units, outside

    def _apply_policy(
        self, raw: Any, units: np.ndarray, outside: np.ndarray, adjusted: Adjusted, offset: int
    ) -> np.ndarray:
        if self.policy == "clip":
            nan = np.isnan(units)
            if nan.any():
                i = int(np.flatnonzero(nan)[0])
                raise InputError(
                    f"row {offset + i}: column {self.name!r} = {value_text(item(raw, i))} is not a "
                    f"{self.kind} value (missing or unreadable; the 'clip' policy clips only "
                    "values outside [low, high])"
                )
            tally(adjusted, self.name, "clipped", int(outside.sum()))
            return np.clip(units, self.low, self.high)
        return super()._apply_policy(raw, units, outside, adjusted, offset)

    def _outside_text(self, value: Any, unit: float) -> str:
        if is_missing(value):
            return "is missing"
        if math.isnan(unit):
            return f"is not a {self.kind} value"
        return f"is outside [{self._show(self.low)}, {self._show(self.high)}]"

    def _show(self, u: float) -> str:
        return repr(u)


class NumericColumn(_Ordered):
    """Real numbers in ``[low, high]``; the code is the value's position on ``2**32`` cells.

    ``scale="log"`` places the cells evenly in ``log(1 + x − low)`` instead of ``x``: a
    heavy-tailed column (bytes, durations, weights) gets as many cells per factor of ten as
    its bulk, instead of most of its rows in the first cell. Bins cut on the code (a
    synthesizer's, :mod:`sketchsyn.evaluate.tables`') follow the scale, and a value drawn
    inside a cell is uniform on the scale.

    >>> c = NumericColumn("dep_delay", -120, 1440)
    >>> c.codes(np.array([-120.0, 1440.0])).tolist() == [0, 2**32 - 1]
    True
    >>> b = NumericColumn("bytes", 0, 1e9, scale="log")
    >>> (b.codes(np.array([0.0, 999.0, 1e9])) >> np.uint64(28)).tolist()  # 16 cells
    [0, 5, 15]
    """

    kind = "numeric"
    SCALES = ("linear", "log")

    def __init__(
        self, name: str, low: float, high: float, policy: str = "raise", scale: str = "linear"
    ) -> None:
        super().__init__(name, policy)
        self._raw = (low, high)
        try:
            lo, hi = float(low), float(high)
        except (TypeError, ValueError):
            lo = hi = math.nan
        if isinstance(low, bool) or isinstance(high, bool):
            lo = math.nan
        self._check_bounds(lo, hi, (low, high))
        self._span = hi - lo
        if scale not in self.SCALES:
            raise ParameterError(
                f"The 'scale' of column {name!r} (numeric) must be one of {list(self.SCALES)}. "
                f"Got {scale!r} instead."
            )
        self.scale = scale
        self._log_span = math.log1p(self._span) if scale == "log" else math.nan

    bits = property(lambda self: CONTINUOUS_BITS, doc="32: the value's position on 2**32 cells.")
    n_codes = property(lambda self: 2**CONTINUOUS_BITS, doc="Every code names values.")

    @property
    def discrete(self) -> bool:
        return False

    def _to_units(self, values: Any) -> tuple[np.ndarray, np.ndarray]:
        return self._bounded(_float_values(to_numpy_1d(values)))

    def position(self, units: np.ndarray) -> np.ndarray:
        """Units → ``[0, 1]`` on the column's scale (``(x − low)/(high − low)``, or
        ``log(1 + x − low)/log(1 + high − low)``)."""
        offset = np.asarray(units, dtype=np.float64) - self.low
        if self.scale == "log":
            return np.log1p(np.maximum(offset, 0.0)) / self._log_span
        return offset / self._span

    def at(self, position: np.ndarray) -> np.ndarray:
        """The inverse of :meth:`position`: units at positions in ``[0, 1]``."""
        t = np.asarray(position, dtype=np.float64)
        if self.scale == "log":
            return np.minimum(self.low + np.expm1(t * self._log_span), self.high)
        return np.minimum(self.low + t * self._span, self.high)

    def codes(self, units: np.ndarray) -> np.ndarray:
        t = self.position(units) * 2.0**self.bits
        return np.clip(t, 0.0, 2.0**self.bits - 1).astype(_U64)

    def _edge(self, code: np.ndarray) -> np.ndarray:
        return self.at(np.ldexp(code.astype(np.float64), -self.bits))

    def sample(self, lo: np.ndarray, hi: np.ndarray, u: np.ndarray) -> np.ndarray:
        a = np.ldexp(lo.astype(np.float64), -self.bits)
        b = np.ldexp(hi.astype(np.float64), -self.bits)
        return np.minimum(self.at(a + u * (b - a)), self._edge(hi))

    def fraction(self, lo: np.ndarray, hi: np.ndarray, cond: Condition) -> np.ndarray:
        a = np.ldexp(lo.astype(np.float64), -self.bits)  # positions: values are uniform there
        b = np.ldexp(hi.astype(np.float64), -self.bits)
        width = b - a
        hit = np.zeros(lo.shape, dtype=np.float64)
        for low, high, _low_open, _high_open in cond.intervals:
            p_low = self.position(np.clip(low, self.low, self.high)) if low > -np.inf else -1.0
            p_high = self.position(np.clip(high, self.low, self.high)) if high < np.inf else 2.0
            overlap = np.minimum(b, p_high) - np.maximum(a, p_low)
            point = (width == 0) & (a >= p_low) & (a <= p_high)
            hit += np.where(
                width > 0, np.clip(overlap, 0.0, None) / np.where(width > 0, width, 1), point
            )
        return np.minimum(hit, 1.0)

    def range_units(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self._edge(lo), self._edge(hi)

    def normalize(self, units: np.ndarray) -> np.ndarray:
        return self.position(units)

    def output(self, units: np.ndarray, library: str) -> Any:
        return units.astype(np.float64, copy=False)

    def value_units(self, value: Any) -> float:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
            raise ParameterError(
                f"column {self.name!r} is numeric: compare it with a number, not {value!r}"
            )
        return float(value)

    def to_dict(self) -> dict[str, Any]:
        extra = {"scale": self.scale} if self.scale != "linear" else {}
        return self._dict(low=self._raw[0], high=self._raw[1], **extra)


class IntegerColumn(_Ordered):
    """Whole numbers ``low … high`` (inclusive); the code is ``value − low``.

    >>> IntegerColumn("hour", 0, 23).bits
    5
    """

    kind = "integer"

    def __init__(self, name: str, low: int, high: int, policy: str = "raise") -> None:
        super().__init__(name, policy)
        ok = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in (low, high))
        if not ok or not low < high or high - low >= MAX_INTEGER_SPAN:
            raise ParameterError(
                f"The 'low' and 'high' of column {name!r} (integer) must be ints with low < high "
                f"and high − low < 2**53. Got low={low!r}, high={high!r} instead."
            )
        self.low, self.high = int(low), int(high)
        self._n = self.high - self.low + 1

    bits = property(lambda self: _bits_for(self._n), doc="``ceil(log2(high − low + 1))``.")
    n_codes = property(lambda self: self._n, doc="``high − low + 1``.")

    def _to_units(self, values: Any) -> tuple[np.ndarray, np.ndarray]:
        units, outside = self._bounded(_float_values(to_numpy_1d(values)))
        with np.errstate(invalid="ignore"):
            fractional = units != np.floor(units)
        return units, outside | fractional

    def _apply_policy(
        self, raw: Any, units: np.ndarray, outside: np.ndarray, adjusted: Adjusted, offset: int
    ) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            fractional = ~np.isnan(units) & (units != np.floor(units))
        if self.policy == "clip" and fractional.any():
            i = int(np.flatnonzero(fractional)[0])
            raise InputError(
                f"row {offset + i}: column {self.name!r} = {value_text(item(raw, i))} is not a "
                "whole number (the 'clip' policy clips only whole numbers outside [low, high])"
            )
        return super()._apply_policy(raw, units, outside, adjusted, offset)

    def _outside_text(self, value: Any, unit: float) -> str:
        if math.isfinite(unit) and unit != math.floor(unit):
            return "is not a whole number"
        return super()._outside_text(value, unit)

    def _show(self, u: float) -> str:
        return str(int(u))

    def codes(self, units: np.ndarray) -> np.ndarray:
        return (units - self.low).astype(np.int64).view(_U64)

    def _code_units(self, code: np.ndarray) -> np.ndarray:
        return code.astype(np.float64) + self.low

    def output(self, units: np.ndarray, library: str) -> Any:
        return units.astype(np.int64)

    def value_units(self, value: Any) -> float:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
            raise ParameterError(
                f"column {self.name!r} is integer: compare it with a number, not {value!r}"
            )
        return float(value)

    def normalize(self, units: np.ndarray) -> np.ndarray:
        return (units - self.low) / (self.high - self.low)

    def to_dict(self) -> dict[str, Any]:
        return self._dict(low=self.low, high=self.high)


class DatetimeColumn(NumericColumn):
    """Dates and times in ``[low, high]`` (ISO text in the schema), to the microsecond; the
    code is the time's position on ``2**32`` cells (7.3 ms over a year).

    >>> c = DatetimeColumn("when", "2013-01-01", "2014-01-01")
    >>> c.output(c.units(np.array(["2013-07-02T12:00"], dtype=object), Adjusted()), "numpy")
    array(['2013-07-02T12:00:00.000000'], dtype='datetime64[us]')
    """

    kind = "datetime"

    def __init__(self, name: str, low: Any, high: Any, policy: str = "raise") -> None:
        Column.__init__(self, name, policy)
        # A date or time object (what YAML makes of an unquoted 2013-01-01) is kept as ISO text:
        # the dict form, and the header of every file fitted on it, hold text.
        low, high = _iso_text(low), _iso_text(high)
        self._raw = (low, high)
        try:
            lo, hi = _datetime_us(low), _datetime_us(high)
        except (TypeError, ValueError, OverflowError):
            lo = hi = math.nan
        self._check_bounds(lo, hi, (low, high))
        self._span = hi - lo
        self.scale, self._log_span = "linear", math.nan

    def _to_units(self, values: Any) -> tuple[np.ndarray, np.ndarray]:
        values = to_numpy_1d(values)
        if values.dtype.kind == "M":
            stamps = values.astype("datetime64[us]")
            units = (stamps - _EPOCH).astype(np.int64).astype(np.float64)
            units[np.isnat(stamps)] = np.nan
        else:
            units = np.full(values.shape[0], np.nan)
            for i, v in enumerate(values):
                try:
                    units[i] = _datetime_us(v) if v is not None else np.nan
                except (TypeError, ValueError, OverflowError):
                    continue
        return self._bounded(units)

    def sample(self, lo: np.ndarray, hi: np.ndarray, u: np.ndarray) -> np.ndarray:
        return np.clip(np.floor(super().sample(lo, hi, u)), self.low, self.high)

    def _show(self, u: float) -> str:
        return _time_text(_EPOCH + np.timedelta64(int(u), "us"))

    def output(self, units: np.ndarray, library: str) -> Any:
        return _EPOCH + units.astype(np.int64).astype("timedelta64[us]")

    def value_units(self, value: Any) -> float:
        try:
            return _datetime_us(value)
        except (TypeError, ValueError, OverflowError):
            raise ParameterError(
                f"column {self.name!r} is a datetime: compare it with a date or time such as "
                f"'2013-06-01', not {value!r}"
            ) from None


class CategoricalColumn(Column):
    """One of a public list of categories (text); the code is the category's index.

    With ``policy="other"`` a value outside the list becomes one more category, ``other_label``
    (default ``"other"``), the last code.

    >>> c = CategoricalColumn("origin", ["EWR", "JFK", "LGA"], policy="other")
    >>> c.units(np.array(["JFK", "BOS"], dtype=object), Adjusted()).tolist(), c.labels
    ([1.0, 3.0], ['EWR', 'JFK', 'LGA', 'other'])
    """

    kind = "categorical"
    POLICIES = ("raise", "other", "drop")

    def __init__(
        self,
        name: str,
        categories: Sequence[Any],
        policy: str = "raise",
        other_label: str | None = None,
    ) -> None:
        super().__init__(name, policy)
        if isinstance(categories, (str, bytes)) or not isinstance(categories, Sequence):
            raise ParameterError(
                f"The 'categories' of column {name!r} must be a list of str. Got "
                f"{_row_text(categories)} instead."
            )
        cats = list(categories)
        # C-level passes only: a schema of a million categories (a blob's header) loads fast.
        if not cats or not set(map(type, cats)) <= {str}:
            bad = next((c for c in cats if not isinstance(c, str)), None)
            what = "an empty list" if not cats else f"{bad!r} (a {type(bad).__name__})"
            raise ParameterError(
                f"The 'categories' of column {name!r} must be a non-empty list of str. Got "
                f"{what} instead."
            )
        index = dict(zip(cats, range(len(cats)), strict=True))
        if len(index) != len(cats):
            seen: set[str] = set()
            dup = next(c for c in cats if c in seen or seen.add(c))  # type: ignore[func-returns-value]
            raise ParameterError(
                f"The 'categories' of column {name!r} must be distinct. Got {dup!r} twice."
            )
        if other_label is not None and policy != "other":
            raise ParameterError(
                f"Column {name!r} has an 'other_label' but its policy is {policy!r}, not 'other'."
            )
        label = "other" if other_label is None else other_label
        if policy == "other" and (not isinstance(label, str) or label in cats):
            raise ParameterError(
                f"The 'other_label' of column {name!r} must be a str that is not a category. "
                f"Got {label!r} instead (name another with 'other_label')."
            )
        self.categories = cats
        self._other_label = other_label
        self.labels = cats + ([label] if policy == "other" else [])
        self._index = index

    bits = property(lambda self: _bits_for(len(self.labels)), doc="``ceil(log2(codes))``.")
    n_codes = property(lambda self: len(self.labels), doc="The categories (and 'other').")

    def _to_units(self, values: Any) -> tuple[np.ndarray, np.ndarray]:
        idx = _category_index(values, self.categories, self._index)
        outside = idx < 0
        return idx.astype(np.float64), outside

    def _apply_policy(
        self, raw: Any, units: np.ndarray, outside: np.ndarray, adjusted: Adjusted, offset: int
    ) -> np.ndarray:
        if self.policy == "other":
            tally(adjusted, self.name, "other", int(outside.sum()))
            return np.where(outside, float(len(self.categories)), units)
        return super()._apply_policy(raw, units, outside, adjusted, offset)

    def _outside_text(self, value: Any, unit: float) -> str:
        shown = self.categories[:5] + (["..."] if len(self.categories) > 5 else [])
        if is_missing(value):
            return f"is missing (not one of the column's categories {shown})"
        return f"is not one of the column's categories {shown}"

    def codes(self, units: np.ndarray) -> np.ndarray:
        return units.astype(np.int64).view(_U64)

    def output(self, units: np.ndarray, library: str) -> Any:
        return units.astype(np.int64)  # the frame builder turns codes into categories

    def value_units(self, value: Any) -> float:
        if value in self._index:
            return float(self._index[value])
        if self.policy == "other" and value == self.labels[-1]:
            return float(len(self.categories))
        raise ParameterError(
            f"column {self.name!r} has no category {value!r} (categories: {self.labels[:8]}"
            f"{'...' if len(self.labels) > 8 else ''})"
        )

    def to_dict(self) -> dict[str, Any]:
        out = self._dict(categories=list(self.categories))
        if self._other_label is not None:
            out["other_label"] = self._other_label
        return out


def _category_index(values: Any, categories: list[str], index: dict[str, int]) -> np.ndarray:
    """Index of each value in ``categories`` (−1 where absent or missing): Arrow's
    ``index_in`` for Arrow and polars columns, pandas' hash table for the others when pandas is
    there (``Index.get_indexer``), else a sort of the distinct values."""
    module = type(values).__module__.split(".", 1)[0]
    if module in ("pyarrow", "polars"):
        import pyarrow as pa
        import pyarrow.compute as pc

        col = values.to_arrow() if module == "polars" else values
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        if pa.types.is_dictionary(col.type):
            col = col.dictionary_decode()
        if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
            col = col.cast(pa.string())
        found = pc.index_in(col, value_set=pa.array(categories, pa.string()))
        return found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    arr = to_numpy_1d(values)
    if arr.dtype.kind not in "OUS":
        arr = arr.astype(str).astype(object)
    try:
        import pandas as pd
    except ImportError:
        pd = None
    if pd is not None:
        return np.asarray(pd.Index(categories).get_indexer(arr), dtype=np.int64)
    present = np.array([v is not None and v == v for v in arr.tolist()], dtype=bool)
    uniq, inverse = np.unique(np.where(present, arr, "").astype(str), return_inverse=True)
    mapped = np.array([index.get(u, -1) for u in uniq.tolist()], dtype=np.int64)
    return np.where(present, mapped[inverse], -1)


class BooleanColumn(Column):
    """True or false (``True``/``False``, 0/1, or the text ``true``/``false``); code 0/1.

    >>> BooleanColumn("ok").units(np.array(["true", 0], dtype=object), Adjusted()).tolist()
    [1.0, 0.0]
    """

    kind = "boolean"

    bits = property(lambda self: 1, doc="One bit.")
    n_codes = property(lambda self: 2, doc="False and true.")

    def _to_units(self, values: Any) -> tuple[np.ndarray, np.ndarray]:
        values = to_numpy_1d(values)
        if values.dtype.kind == "b":
            return values.astype(np.float64), np.zeros(values.shape, dtype=bool)
        units = np.full(values.shape[0], np.nan)
        names = {"true": 1.0, "false": 0.0, "1": 1.0, "0": 0.0}
        for i, v in enumerate(values):
            if isinstance(v, (bool, np.bool_)) or (
                isinstance(v, (int, np.integer)) and v in (0, 1)
            ):
                units[i] = float(v)
            elif isinstance(v, float) and v in (0.0, 1.0):
                units[i] = v
            elif isinstance(v, str):
                units[i] = names.get(v.strip().lower(), np.nan)
        return units, np.isnan(units)

    def codes(self, units: np.ndarray) -> np.ndarray:
        return units.astype(_U64)

    def output(self, units: np.ndarray, library: str) -> Any:
        return units > 0.5

    def value_units(self, value: Any) -> float:
        if not isinstance(value, (bool, np.bool_)):
            raise ParameterError(f"column {self.name!r} is boolean: compare it with True or False")
        return float(value)

    def to_dict(self) -> dict[str, Any]:
        return self._dict()


class IPv4Column(Column):
    """An IPv4 address (dotted text or its 32-bit integer); the code is the address.

    >>> c = IPv4Column("client")
    >>> c.output(c.units(np.array(["10.0.0.1"], dtype=object), Adjusted()), "numpy").tolist()
    ['10.0.0.1']
    """

    kind = "ipv4"

    bits = property(lambda self: 32, doc="32 bits.")
    n_codes = property(lambda self: 2**32, doc="Every address.")

    def _to_units(self, values: Any) -> tuple[np.ndarray, np.ndarray]:
        values = to_numpy_1d(values)
        if values.dtype.kind in "iu":
            units = values.astype(np.float64)
            return units, (units < 0) | (units >= 2.0**32)
        if values.dtype.kind not in "US":
            values = np.array([v if isinstance(v, str) else "" for v in values.tolist()], str)
        keys, outside = parse_ipv4(values)  # every bad row at once, for the policy
        return keys.astype(np.float64), outside

    def codes(self, units: np.ndarray) -> np.ndarray:
        return units.astype(_U64)

    def output(self, units: np.ndarray, library: str) -> Any:
        return ipv4_text(units)

    def value_units(self, value: Any) -> float:
        if isinstance(value, str):
            try:
                return float(_parse_ipv4(np.array([value]))[0])
            except InputError:
                pass
        raise ParameterError(
            f"column {self.name!r} is ipv4: compare it with an address such as '10.0.0.1', "
            f"not {value!r}"
        )

    def to_dict(self) -> dict[str, Any]:
        return self._dict()


def ipv4_text(units: np.ndarray) -> np.ndarray:
    """Dotted quads (an object array of str) of 32-bit addresses.

    >>> ipv4_text(np.array([167772161.0])).tolist()
    ['10.0.0.1']
    """
    k = units.astype(np.int64)
    octets = [np.char.mod("%d", (k >> s) & 255) for s in (24, 16, 8, 0)]
    out = octets[0]
    for octet in octets[1:]:
        out = np.char.add(np.char.add(out, "."), octet)
    return out.astype(object)


_KINDS: dict[str, type[Column]] = {
    c.kind: c
    for c in (
        NumericColumn,
        IntegerColumn,
        DatetimeColumn,
        CategoricalColumn,
        BooleanColumn,
        IPv4Column,
    )
}
_KEYS = {
    "numeric": ({"low", "high"}, {"scale"}),
    "integer": ({"low", "high"}, set()),
    "datetime": ({"low", "high"}, set()),
    "categorical": ({"categories"}, {"other_label"}),
    "boolean": (set(), set()),
    "ipv4": (set(), set()),
}


def column_from_dict(entry: Any, position: int) -> Column:
    """One column from its dict form (``{"name", "kind", ...}``), every key checked.

    >>> column_from_dict({"name": "ok", "kind": "boolean"}, 0).to_dict()
    {'name': 'ok', 'kind': 'boolean'}
    """
    if not isinstance(entry, dict):
        raise ParameterError(
            f"Column {position} of the schema must be a dict with 'name' and 'kind'. Got "
            f"{_row_text(entry)} instead."
        )
    name = entry.get("name", f"#{position}")
    kind = entry.get("kind")
    if not isinstance(kind, str) or kind not in _KINDS:
        raise ParameterError(
            f"Column {name!r} has kind {_row_text(kind)}; the kind is one of {sorted(_KINDS)}."
        )
    required, optional = _KEYS[kind]
    allowed = required | optional | {"name", "kind", "policy"}
    missing = sorted(required - set(entry))
    extra = sorted(set(entry) - allowed, key=str)
    if missing or extra or "name" not in entry:
        what = (
            f"missing {missing or ['name']}"
            if missing or "name" not in entry
            else f"unknown {extra}"
        )
        raise ParameterError(
            f"Column {name!r} ({kind}) has keys {sorted(entry, key=str)}: {what} (a {kind} "
            f"column takes {sorted(allowed)})."
        )
    fields = {k: v for k, v in entry.items() if k not in ("name", "kind")}
    return _KINDS[kind](entry["name"], **fields)
