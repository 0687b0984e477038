"""What a marginal synthesizer or its release accepts from a caller or a blob: counts in a range
whose sums cannot overflow, the release's parameters field by field, and ε against its split.

Every check raises through ``fail(message)``, so a constructor refuses with a
:class:`~sketchsyn.errors.ParameterError` and a loader with a
:class:`~sketchsyn.errors.SerializationError`, naming the same field.

>>> from sketchsyn.errors import ParameterError
>>> check_split(1.0, 0.25, 0.125, pairs=3, columns=2, fail=ParameterError)
>>> check_split(0.5, 0.25, 0.125, pairs=3, columns=2, fail=ParameterError)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
sketchsyn.errors.ParameterError: 'epsilon' = 0.5 is not the budget its split spends: 3 pair ...
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

import numpy as np

from ...domains import Schema
from ...errors import (
    EPSILON_RANGE,
    IncompatibleError,
    InputError,
    ParameterError,
    check_int,
    check_memory,
)
from .budget import RULE_PARTS, is_rule
from .layout import MAX_BITS, MAX_EXACT_BITS, MAX_FINE_BITS

__all__ = [
    "MAX_COUNT",
    "TABLE_PARAMS",
    "check_column_bits",
    "check_counts",
    "check_given_bits",
    "check_params",
    "check_room",
    "check_share",
    "check_size",
    "check_split",
    "exact_sum",
]

MAX_COUNT = 2**52  # rows of a table: far above any real stream, and level sums stay exact
_LOW_BITS = 26
_OWNER = "MarginalSynthesizer"
_SPLIT_TOLERANCE = 1e-9  # the split is ε nudged down by a few ulps, never by more

Fail = Callable[[str], Exception]


def exact_sum(table: np.ndarray) -> int:
    """The exact sum of non-negative int64 counts, each at most :data:`MAX_COUNT` (two int64
    sums of ≤ 26-bit halves, which cannot overflow for tables of fewer than ``2**37`` cells).

    >>> exact_sum(np.array([2**52, 2**52, 3], dtype=np.int64)) == 2**53 + 3
    True
    """
    high = int((table >> _LOW_BITS).sum(dtype=np.int64))
    low = int((table & ((1 << _LOW_BITS) - 1)).sum(dtype=np.int64))
    return (high << _LOW_BITS) + low


def check_room(held: int, more: int, merging: bool = False) -> None:
    """Refuse ``more`` rows on top of ``held`` when together they pass :data:`MAX_COUNT`
    (an update: :class:`InputError`; a merge: :class:`IncompatibleError`).

    >>> check_room(2**52 - 1, 2)
    Traceback (most recent call last):
    ...
    sketchsyn.errors.InputError: X: 2 more rows would take the state past 2**52 rows (its most)
    """
    if held + more > MAX_COUNT:
        if merging:
            raise IncompatibleError(
                "cannot merge: the two states hold more than 2**52 rows together"
            )
        raise InputError(f"X: {more} more rows would take the state past 2**52 rows (its most)")


def check_size(cells: int) -> None:
    """Refuse, before allocating, a state of ``cells`` counts whose counts and noisy copy would
    pass :data:`sketchsyn.errors.MAX_STATE_BYTES`."""
    check_memory(16 * cells, "MarginalSynthesizer", f"{cells:,} exact int64 counts and their noise")


def check_counts(tables: list[np.ndarray], names: list[str], fail: Fail) -> None:
    """Refuse a table with a negative count, a count above :data:`MAX_COUNT`, or counts summing
    above it (``names[t]`` says which table)."""
    for table, name in zip(tables, names, strict=True):
        if not table.size:
            continue
        low, high = int(table.min()), int(table.max())
        if low < 0:
            raise fail(f"{name} holds a negative count ({low})")
        if high > MAX_COUNT:
            raise fail(f"{name} holds a count of {high}, above the largest 2**52")
        total = exact_sum(table)
        if total > MAX_COUNT:
            raise fail(f"{name} counts {total} rows, above the largest 2**52")


def check_split(
    epsilon: float,
    pair_epsilon: float,
    single_epsilon: float,
    *,
    pairs: int,
    columns: int,
    fail: Fail,
    share: float | None = None,
) -> None:
    """Refuse an ``epsilon`` that is not what ``pairs`` pair tables of ``pair_epsilon`` and
    ``columns`` column tables of ``single_epsilon`` spend: their exact rational sum must be at
    most ``epsilon`` (the release may not claim less than it spent) and within ``1e-9`` of it
    (the split the synthesizer makes); with ``share``, the column tables spend that share."""
    spent = pairs * Fraction(pair_epsilon) + columns * Fraction(single_epsilon)
    eps = Fraction(epsilon)
    if spent > eps or spent < eps * (1 - Fraction(_SPLIT_TOLERANCE)):
        raise fail(
            f"'epsilon' = {epsilon!r} is not the budget its split spends: {pairs} pair tables × "
            f"{pair_epsilon!r} + {columns} column tables × {single_epsilon!r} = {float(spent)!r}"
        )
    if share is not None:
        singles = columns * single_epsilon
        if not math.isclose(singles, share * epsilon, rel_tol=_SPLIT_TOLERANCE):
            raise fail(
                f"'singles_share' = {share!r} is not the share of 'epsilon' = {epsilon!r} its "
                f"{columns} column tables spend ({singles!r})"
            )


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# A table synthesizer's parameters, in its header and in its release's ``params``.
TABLE_PARAMS = ("column_bits", "singles_share", "select_share", "rounds", "rule")


def check_params(params: Any, expected: Mapping[str, Any], fail: Fail) -> dict[str, Any]:
    """A release's ``params`` record, checked field by field: only the keys of ``expected``
    (the values the release's own fields fix; ``singles_share`` and ``consistency`` are free),
    each of its type and range, and equal to the release's own value where it has one.

    >>> check_params({"bits": 3}, {"bits": 3, "singles_share": None}, ValueError)
    {'bits': 3}
    >>> check_params({"bits": 3, "seed": 1}, {"bits": 3}, ValueError)
    Traceback (most recent call last):
    ...
    ValueError: 'params' has unknown fields ['seed'] (known: ['bits'])
    """
    if params is None:
        return {}
    if not isinstance(params, Mapping):
        raise fail(f"'params' must be a record, got {type(params).__name__}")
    # A privacy unit's column and cap, stated by a user-level release (free values).
    unit = {"unit": None, "max_rows": None}
    unknown = sorted(str(k) for k in set(params) - set(expected) - set(unit))
    if unknown:
        raise fail(f"'params' has unknown fields {unknown} (known: {sorted(expected)})")
    expected = {**unit, **expected}
    low, high = EPSILON_RANGE
    rules: dict[str, tuple[Callable[[Any], bool], str]] = {
        "epsilon": (lambda v: _number(v) and low <= v <= high, f"a number in [{low}, {high}]"),
        "bits": (lambda v: _int(v, 1, MAX_BITS), f"an int in [1, {MAX_BITS}]"),
        "fine_bits": (lambda v: _int(v, 1, MAX_FINE_BITS), f"an int in [1, {MAX_FINE_BITS}]"),
        "exact_bits": (lambda v: _int(v, 1, MAX_EXACT_BITS), f"an int in [1, {MAX_EXACT_BITS}]"),
        "singles_share": (lambda v: _number(v) and 0 < v < 1, "a number in (0, 1)"),
        "consistency": (lambda v: v in ("uniform", "proportional"), "'uniform' or 'proportional'"),
        "select_share": (lambda v: _number(v) and 0 <= v < 1, "a number in [0, 1)"),
        "rounds": (lambda v: _int(v, 0, 2016), "an int in [0, 2016]"),
        "column_bits": (_bit_pairs, "a list of [coarse, fine] ints"),
        "rule": (is_rule, f"a list of names from {list(RULE_PARTS)}, in that order"),
        "unit": (lambda v: isinstance(v, str) and bool(v), "a non-empty str"),
        "max_rows": (lambda v: _int(v, 1, 2**31 - 2), f"an int in [1, {2**31 - 2}]"),
    }
    out = {}
    for key, value in params.items():
        ok, what = rules[key]
        if not ok(value):
            raise fail(f"'params' field {key!r} must be {what}, got {value!r}")
        if expected[key] is not None and value != expected[key]:
            raise fail(
                f"'params' field {key!r} = {value!r} differs from the release's {expected[key]!r}"
            )
        out[key] = value
    return out


def _bit_pairs(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) <= 64
        and all(
            isinstance(v, list) and len(v) == 2 and all(_int(b, 1, MAX_FINE_BITS) for b in v)
            for v in value
        )
    )


def _int(value: Any, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def check_share(value: Any, name: str, open_low: bool) -> float:
    """A share of ε in (0, 1) (``open_low``) or [0, 1).

    >>> check_share(0.25, "singles_share", open_low=True)
    0.25
    """
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    ok = ok and (0 < value < 1 if open_low else 0 <= value < 1)
    if not ok:
        interval = "(0, 1)" if open_low else "[0, 1)"
        raise ParameterError(
            f"The {name!r} parameter of {_OWNER} must be a number in {interval}. "
            f"Got {value!r} instead."
        )
    return float(value)


def check_given_bits(bits: Any, fine_bits: Any) -> tuple[int, int, str]:
    """``bits`` and ``fine_bits`` given by hand (``fine_bits`` defaults to ``bits``)."""
    if bits is None:
        raise ParameterError(f"{_OWNER} needs 'bits' when 'fine_bits' is given.")
    bits = check_int(bits, "bits", _OWNER, minimum=1, maximum=MAX_BITS)
    fine_bits = bits if fine_bits is None else fine_bits
    fine_bits = check_int(fine_bits, "fine_bits", _OWNER, minimum=bits, maximum=MAX_FINE_BITS)
    return bits, fine_bits, f"bits={bits}, fine_bits={fine_bits} as given"


def check_column_bits(value: Any, schema: Schema) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``[(coarse, fine), …]``, one per column: ints with ``1 ≤ coarse ≤ fine ≤`` the column's
    code bits (and ``coarse ≤ 12``, ``fine ≤ 24``)."""
    items = list(value) if isinstance(value, (list, tuple)) else None
    if items is None or len(items) != schema.d:
        raise ParameterError(
            f"The 'column_bits' parameter of {_OWNER} must list {schema.d} (coarse, fine) "
            f"pairs. Got {value!r} instead."
        )
    coarse, fine = [], []
    for col, item in zip(schema._cols, items, strict=True):
        pair = list(item) if isinstance(item, (list, tuple)) else []
        top = min(col.bits, MAX_FINE_BITS)
        ints = len(pair) == 2 and all(
            isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in pair
        )
        if not ints or not 1 <= pair[0] <= min(pair[1], MAX_BITS) or pair[1] > top:
            raise ParameterError(
                f"The 'column_bits' parameter of {_OWNER}: column {col.name!r} needs "
                f"(coarse, fine) ints with 1 <= coarse <= fine <= {top} and coarse <= "
                f"{MAX_BITS}. Got {item!r} instead."
            )
        coarse.append(int(pair[0]))
        fine.append(int(pair[1]))
    return tuple(coarse), tuple(fine)
