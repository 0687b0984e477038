"""The privacy unit's column taken out of a batch: the rest goes to the domain, the ids to the
contribution bounder.

The unit is a column of the frames a summary is fed (a pandas or polars DataFrame, a pyarrow
Table or RecordBatch, a dict of columns, a list of dict rows), named when the summary is built
(``unit="client"``); it is neither in the schema nor synthesized. An array has no names: its
ids come in ``units=`` beside it.

>>> rest, ids = split_unit({"x": [1, 2], "client": ["a", "b"]}, "client", None)
>>> rest, list(ids)
({'x': [1, 2]}, ['a', 'b'])
>>> split_unit([[0.5, 0.2]], "client", None)
Traceback (most recent call last):
...
sketchsyn.errors.InputError: X has no column names: give the privacy unit's ids as units= (one a row), or a frame with the column 'client'
"""  # noqa: E501

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..domains.tables import is_table, table_rows
from ..errors import InputError

__all__ = ["split_unit"]


def _module(obj: Any) -> str:
    return type(obj).__module__.split(".", 1)[0]


def _names(X: Any) -> list[str]:
    if isinstance(X, Mapping):
        return [str(k) for k in X]
    if _module(X) == "pyarrow":
        return list(X.schema.names)
    return [str(c) for c in X.columns]


def _without(X: Any, name: str) -> tuple[Any, Any]:
    """A table without its column ``name`` (in its own library, no copy of the other columns
    where the library allows it) and that column."""
    if isinstance(X, Mapping):
        return {k: v for k, v in X.items() if str(k) != name}, X[name]
    module = _module(X)
    if module == "pyarrow":
        i = X.schema.get_field_index(name)
        return X.remove_column(i), X.column(i)
    if module == "polars":
        return X.drop(name), X.get_column(name)
    return X.drop(columns=[name]), X[name]


def split_unit(X: Any, unit: str, units: Any, what: str = "X") -> tuple[Any, Any]:
    """``(X without the unit's column, the unit ids)``.

    ``units`` (ids given beside ``X``, one a row) is for arrays and frames without the unit's
    column; a frame holding the column and ``units=`` as well is refused (two sources of ids).
    A list of dict rows gives each row's ``unit`` key.
    """
    if is_table(X):
        names = _names(X)
        if unit in names:
            if units is not None:
                raise InputError(
                    f"{what} has the privacy unit's column {unit!r} and units= was given too: "
                    "give the ids once"
                )
            return _without(X, unit)
        if units is None:
            raise InputError(
                f"{what} has no column {unit!r} (the privacy unit; the table's columns are "
                f"{names}): add it, or give the ids as units="
            )
        return X, units
    if (
        isinstance(X, Sequence)
        and not isinstance(X, (str, bytes))
        and len(X)
        and isinstance(X[0], Mapping)
    ):
        if units is not None:
            raise InputError(f"{what} holds dict rows: their {unit!r} keys are the units")
        ids = []
        rest = []
        for i, row in enumerate(X):
            if not isinstance(row, Mapping) or unit not in row:
                raise InputError(
                    f"{what} row {i} must be a dict with the privacy unit's key {unit!r}"
                )
            ids.append(row[unit])
            rest.append({k: v for k, v in row.items() if k != unit})
        return rest, np.array(ids, dtype=object)
    if isinstance(X, np.ndarray) and X.dtype.names is not None:
        return split_unit({n: X[n] for n in X.dtype.names}, unit, units, what)
    if units is None:
        raise InputError(
            f"{what} has no column names: give the privacy unit's ids as units= (one a row), "
            f"or a frame with the column {unit!r}"
        )
    return X, units


def rows_of(X: Any) -> int | None:
    """The number of rows of a batch when it says (a table, an array, a list), else None."""
    if is_table(X):
        return table_rows(X)
    if isinstance(X, np.ndarray):
        return int(X.shape[0]) if X.ndim else None
    if isinstance(X, Sequence) and not isinstance(X, (str, bytes)):
        return len(X)
    return None
