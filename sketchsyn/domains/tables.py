"""Tables in and out: the columns of a pandas or polars DataFrame, a pyarrow Table or
RecordBatch, a dict of columns, a 2-D array or a list of rows, matched to a schema by name; and
a frame of the schema's types built in the caller's library.

The libraries are duck-typed and imported only when a frame of theirs is asked for, so none of
them is needed to use the rest of sketchsyn.

>>> cols, n = table_columns({"a": [1, 2], "b": ["x", "y"]}, ("a", "b"))
>>> n, [list(c) for c in cols]
(2, [[1, 2], ['x', 'y']])
>>> table_columns({"a": [1]}, ("a", "b"))  # doctest: +ELLIPSIS
Traceback (most recent call last):
    ...
sketchsyn.errors.InputError: the table has no column 'b' (the schema's columns are ['a', ...
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import InputError, ParameterError
from .base import _row_text

__all__ = [
    "LIBRARIES",
    "build_frame",
    "is_table",
    "item",
    "table_columns",
    "table_rows",
    "table_slice",
    "to_numpy_1d",
]

LIBRARIES = ("pandas", "polars", "pyarrow", "numpy")


def _module(obj: Any) -> str:
    return type(obj).__module__.split(".", 1)[0]


def is_table(X: Any) -> bool:
    """True for a DataFrame, an Arrow table or batch, or a dict of columns."""
    return isinstance(X, Mapping) or (
        _module(X) in ("pandas", "polars", "pyarrow") and hasattr(X, "columns")
    )


def _names_of(X: Any) -> list[str]:
    if isinstance(X, Mapping):
        return [str(k) for k in X]
    if _module(X) == "pyarrow":
        return list(X.schema.names)
    return [str(c) for c in X.columns]


def table_rows(X: Any) -> int:
    """Number of rows of a table (:func:`is_table`)."""
    if isinstance(X, Mapping):
        return len(next(iter(X.values()))) if X else 0
    if _module(X) == "pyarrow":
        return int(X.num_rows)
    return int(X.height) if _module(X) == "polars" else int(len(X))


def table_slice(X: Any, start: int, length: int) -> Any:
    """Rows ``start … start + length − 1`` of a table, as a table of the same library.

    >>> table_slice({"a": [1, 2, 3]}, 1, 5)
    {'a': [2, 3]}
    """
    if isinstance(X, Mapping):
        return {k: v[start : start + length] for k, v in X.items()}
    if _module(X) == "pyarrow" or _module(X) == "polars":
        return X.slice(start, length)
    return X.iloc[start : start + length]


def table_columns(X: Any, names: Sequence[str], what: str = "the table") -> tuple[list[Any], int]:
    """The columns ``names`` of ``X`` in that order (each as the library's own column object)
    and the number of rows. Missing and extra columns are refused, naming them.

    A 2-D array or a list of rows is read by position (``d`` values a row); a list of dicts by
    name.
    """
    if is_table(X):
        have = _names_of(X)
        missing = [c for c in names if c not in have]
        if missing:
            raise InputError(
                f"{what} has no column {missing[0]!r} (the schema's columns are {list(names)}; "
                f"the table's are {have})"
            )
        extra = [c for c in have if c not in names]
        if extra:
            raise InputError(
                f"{what} has column {extra[0]!r}, which the schema does not have (the schema's "
                f"columns are {list(names)}; select them first, e.g. df[{list(names)!r}])"
            )
        if isinstance(X, Mapping):
            cols = [X[c] for c in names]
            lengths = {len(c) for c in cols}
            if len(lengths) > 1:
                raise InputError(f"{what}'s columns have different lengths {sorted(lengths)}")
            return cols, lengths.pop() if lengths else 0
        if _module(X) == "pyarrow":
            return [X.column(c) for c in names], int(X.num_rows)
        if _module(X) == "polars":
            return [X.get_column(c) for c in names], int(X.height)
        return [X[c] for c in names], int(len(X))
    if isinstance(X, np.ndarray) and X.dtype.names is not None:
        return table_columns({n: X[n] for n in X.dtype.names}, names, what)
    rows = X if isinstance(X, (np.ndarray, Sequence)) and not isinstance(X, (str, bytes)) else None
    if rows is None:
        raise InputError(
            f"{what} must be a DataFrame (pandas, polars), a pyarrow Table or RecordBatch, a "
            f"dict of columns, a 2-D array or a list of rows; got {type(X).__name__}"
        )
    if len(rows) and isinstance(rows[0], Mapping):
        keys = set(names)
        for i, row in enumerate(rows):
            if not isinstance(row, Mapping) or set(row) != keys:
                raise InputError(
                    f"{what} row {i} = {_row_text(row)} must be a dict with exactly the keys "
                    f"{list(names)}"
                )
        return [np.array([row[c] for row in rows], dtype=object) for c in names], len(rows)
    arr = rows if isinstance(rows, np.ndarray) else np.array(rows, dtype=object)
    d = len(names)
    if arr.ndim == 1 and arr.size == 0:
        arr = arr.reshape(0, d)
    if arr.ndim != 2 or arr.shape[1] != d:
        first = _row_text(rows[0]) if len(rows) else "nothing"
        raise InputError(
            f"{what} must have {d} values a row ({list(names)}): got shape {arr.shape} "
            f"(row 0 = {first})"
        )
    return [arr[:, j] for j in range(d)], int(arr.shape[0])


def to_numpy_1d(col: Any) -> np.ndarray:
    """A column object (numpy, list, pandas Series, pyarrow array, polars Series) as a 1-D
    numpy array; nulls become ``None`` (object columns) or NaN / NaT."""
    module = _module(col)
    if module == "polars":
        col = col.to_arrow()
        module = "pyarrow"
    if module == "pyarrow":
        import pyarrow as pa

        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        if pa.types.is_dictionary(col.type):
            col = col.dictionary_decode()
        if col.null_count and (pa.types.is_floating(col.type) or pa.types.is_integer(col.type)):
            col = col.cast(pa.float64()).fill_null(float("nan"))
        return np.asarray(col.to_numpy(zero_copy_only=False))
    if module == "pandas":
        if str(col.dtype) == "category":
            col = col.astype(object)
        return np.asarray(col.to_numpy())
    arr = col if isinstance(col, np.ndarray) else np.asarray(col, dtype=object)
    if (
        arr.dtype == object and arr.size
    ):  # a list of Python or numpy scalars: one dtype if all agree
        try:
            plain = np.array(arr.tolist())
        except (TypeError, ValueError, OverflowError):
            plain = arr
        if plain.ndim == 1 and plain.dtype.kind in "iufbM":
            return plain
    return arr.reshape(-1)


def item(col: Any, i: int) -> Any:
    """Row ``i`` of a column object, as a Python value (for error messages)."""
    value = col[i]
    return value.as_py() if hasattr(value, "as_py") else value


def build_frame(columns: dict[str, tuple[str, Any, list[str] | None]], library: str) -> Any:
    """A frame of ``library`` from ``{name: (kind, values, categories)}`` (values as numpy
    arrays; ``categories`` for categorical columns, whose values are the codes)."""
    if library not in LIBRARIES:
        raise ParameterError(
            f"The 'as_frame' parameter must be one of {list(LIBRARIES)} (or True for pandas). "
            f"Got {library!r} instead."
        )
    if library == "numpy":
        return {
            n: v if c is None else np.asarray(c, dtype=object)[v]
            for n, (_k, v, c) in columns.items()
        }
    if library == "pandas":
        import pandas as pd

        data = {
            name: pd.Categorical.from_codes(values, categories=cats) if cats is not None else values
            for name, (_kind, values, cats) in columns.items()
        }
        return pd.DataFrame(data)
    import pyarrow as pa

    arrays = []
    for _name, (kind, values, cats) in columns.items():
        if cats is not None:
            arrays.append(
                pa.DictionaryArray.from_arrays(pa.array(values, pa.int32()), pa.array(cats))
            )
        elif kind == "ipv4":
            arrays.append(pa.array(values, pa.string()))
        else:
            arrays.append(pa.array(values))
    table = pa.table(arrays, names=list(columns))
    if library == "pyarrow":
        return table
    import polars as pl

    frame = pl.from_arrow(table)
    casts = {
        name: pl.Enum(cats) for name, (_kind, _values, cats) in columns.items() if cats is not None
    }
    return (
        frame.with_columns(**{n: pl.col(n).cast(t) for n, t in casts.items()}) if casts else frame
    )
