"""A table's public description, :class:`Schema`, as one more domain.

Each column maps its values to a code of public length (:mod:`sketchsyn.domains.columns`); a
record's cell code interleaves the columns' bits, a level at a time, round robin over the
columns that still have bits (a categorical of 3 values has 2 bits, a numeric column 32), so
PrivHP's tree, sketches, consistency and sampler work on tables unchanged. A cell names a code
range per column; a cell holding no value of some column (a categorical's unused codes) gets no
mass in a release.

The dict form (``to_dict``, ``from_dict``, and the YAML or JSON file of :meth:`Schema.load`) is
a contract::

    {"columns": [
      {"name": "carrier",   "kind": "categorical", "categories": ["9E", "AA", "AS"]},
      {"name": "month",     "kind": "integer",     "low": 1,    "high": 12},
      {"name": "dep_delay", "kind": "numeric",     "low": -120, "high": 1440},
      {"name": "when",      "kind": "datetime",    "low": "2013-01-01", "high": "2014-01-01"},
      {"name": "client",    "kind": "ipv4"},
      {"name": "ok",        "kind": "boolean"}]}

A column may add ``"policy"``: what a value outside the schema does (``"raise"``, the default,
refuses the batch naming the row; ``"clip"`` clips a numeric, integer or datetime value to
``[low, high]``; ``"other"`` maps a categorical value to one more category, ``"other_label"``
(default ``"other"``); ``"drop"`` drops the row). Changed and dropped values are counted.

>>> schema = Schema.from_dict({"columns": [
...     {"name": "carrier", "kind": "categorical", "categories": ["9E", "AA", "AS"]},
...     {"name": "month", "kind": "integer", "low": 1, "high": 12}]})
>>> schema.d, schema.max_depth, schema.names
(2, 6, ('carrier', 'month'))
>>> schema.encode({"carrier": ["AA", "AS"], "month": [1, 12]}, depth=6).tolist()
[8, 51]
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import InputError, ParameterError
from ..privacy.rng import RNGLike, as_source
from .base import Domain, _row_text
from .columns import Adjusted, CategoricalColumn, Column, column_from_dict
from .tables import build_frame, table_columns
from .where import Condition, parse_where

__all__ = ["Schema"]

_U64 = np.uint64
MAX_COLUMNS = 64
_CHUNK = 8  # bits spread per table lookup


class Schema(Domain):
    """Public metadata of a table: one entry per column (name, kind, bounds or categories,
    policy), usable wherever a domain is (:class:`~sketchsyn.PrivHP`,
    :class:`~sketchsyn.MarginalSynthesizer`).

    Everything in a schema is public and given by the user, never read from the data: bounds
    and category lists must come from public knowledge (a code list, a data dictionary).

    Parameters
    ----------
    columns : sequence of Column or dict
        The columns in order (1 to 64), each a column object of
        :mod:`sketchsyn.domains.columns` or its dict form.

    Examples
    --------
    >>> s = Schema([{"name": "ok", "kind": "boolean"},
    ...             {"name": "bytes", "kind": "integer", "low": 0, "high": 1023}])
    >>> s.bits, s.max_depth
    ((1, 10), 11)
    >>> Schema.from_dict(s.to_dict()) == s
    True
    """

    _owner = "Schema"

    def __init__(self, columns: Sequence[Column | Mapping[str, Any]]) -> None:
        if isinstance(columns, (str, bytes, Mapping)) or not isinstance(columns, Sequence):
            raise ParameterError(
                "The 'columns' parameter of Schema must be a list of columns. Got "
                f"{_row_text(columns)} instead."
            )
        cols = [
            c if isinstance(c, Column) else column_from_dict(c, i) for i, c in enumerate(columns)
        ]
        if not 1 <= len(cols) <= MAX_COLUMNS:
            raise ParameterError(
                f"The 'columns' parameter of Schema must hold 1 to {MAX_COLUMNS} columns. Got "
                f"{len(cols)} instead."
            )
        names = [c.name for c in cols]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise ParameterError(
                f"The schema has two columns named {dup!r}: names must be distinct."
            )
        self._cols = tuple(cols)
        self._columns = tuple(names)
        self._out_of_bounds = "raise"
        bits = [c.bits for c in cols]
        # Level l (1-based) cuts column _cut[l - 1] at its bit _bit[l - 1] (0 = the top bit).
        cut, bit, used = [], [], [0] * len(cols)
        while len(cut) < 64 and any(u < b for u, b in zip(used, bits, strict=True)):
            for i, b in enumerate(bits):
                if used[i] < b and len(cut) < 64:
                    cut.append(i)
                    bit.append(used[i])
                    used[i] += 1
        self._cut = np.array(cut, dtype=np.int64)
        self._bit = np.array(bit, dtype=np.int64)

    # ------------------------------------------------------------------ description
    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Schema:  # type: ignore[override]
        """A schema from its dict form ``{"columns": [...]}`` (keys checked). A draft (a dict
        with the ``"draft"`` key that :func:`sketchsyn.io.schema_draft.draft_schema` and
        ``sketchsyn schema FILE`` write) is refused until a person deletes the key."""
        if isinstance(data, Mapping) and "draft" in data:
            raise ParameterError(
                "This schema is a draft read from the data (it has a 'draft' key): it is NOT "
                "PRIVATE. Its bounds are the exact values of the most extreme rows and its "
                "categories were seen in the rows, so a release fitted with it would leak them. "
                "Replace each by public knowledge (a data dictionary, a code list, the valid "
                "range of the measurement), then delete the 'draft' key."
            )
        if not isinstance(data, Mapping) or set(data) - {"type"} != {"columns"}:
            got = sorted(data, key=str) if isinstance(data, Mapping) else _row_text(data)
            raise ParameterError(
                f"A schema's dict form must be {{'columns': [...]}}. Got keys {got} instead."
            )
        if data.get("type", "Schema") != "Schema":
            raise ParameterError(f"A schema's 'type' must be 'Schema'. Got {data['type']!r}.")
        columns = data["columns"]
        if not isinstance(columns, list) or not 1 <= len(columns) <= MAX_COLUMNS:
            got = f"{len(columns)} columns" if isinstance(columns, list) else _row_text(columns)
            raise ParameterError(
                f"A schema's 'columns' must be a list of 1 to {MAX_COLUMNS} columns. Got {got} "
                "instead."
            )
        return cls(columns)

    @classmethod
    def _from_fields(cls, data: dict[str, Any]) -> Schema:
        return cls.from_dict(data)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Schema:
        """A schema from a JSON or YAML file (by its extension: ``.json``, ``.yaml``, ``.yml``;
        YAML needs PyYAML: ``pip install "sketchsyn[cli]"``)."""
        name = os.fspath(path)
        with open(name, encoding="utf-8") as fh:
            text = fh.read()
        if name.lower().endswith((".yaml", ".yml")):
            try:
                import yaml
            except ImportError:
                raise ParameterError(
                    f"{name!r} is YAML: reading it needs PyYAML (pip install pyyaml, or "
                    '"sketchsyn[cli]"), or write the schema as JSON'
                ) from None
            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise ParameterError(f"{name!r} is not valid YAML: {exc}") from None
        else:
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ParameterError(f"{name!r} is not valid JSON: {exc}") from None
        try:
            return cls.from_dict(data)
        except ParameterError as exc:
            raise ParameterError(f"{name!r}: {exc}") from None

    def dump(self, path: str | os.PathLike[str]) -> None:
        """Write the dict form to a JSON or YAML file (by its extension)."""
        name = os.fspath(path)
        if name.lower().endswith((".yaml", ".yml")):
            import yaml

            text = yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True)
        else:
            text = json.dumps(self.to_dict(), indent=2) + "\n"
        with open(name, "w", encoding="utf-8") as fh:
            fh.write(text)

    def to_dict(self) -> dict[str, Any]:
        """The dict form: ``{"columns": [{"name", "kind", ...}, ...]}`` (defaults left out, so
        ``from_dict(d).to_dict() == d``)."""
        return {"columns": [c.to_dict() for c in self._cols]}

    def __repr__(self) -> str:
        return "Schema(" + ", ".join(f"{c.name}: {c.kind}" for c in self._cols) + ")"

    @property
    def names(self) -> tuple[str, ...]:
        """The column names, in order."""
        return self._columns

    def column(self, name: str) -> Column:
        """The column called ``name``."""
        for c in self._cols:
            if c.name == name:
                return c
        raise ParameterError(f"The schema has no column {name!r} (columns: {list(self._columns)}).")

    @property
    def kinds(self) -> tuple[str, ...]:
        """Each column's kind."""
        return tuple(c.kind for c in self._cols)

    @property
    def bits(self) -> tuple[int, ...]:
        """Each column's code bits."""
        return tuple(c.bits for c in self._cols)

    @property
    def d(self) -> int:
        """Number of columns."""
        return len(self._cols)

    @property
    def max_depth(self) -> int:
        """``min(64, total bits)``: the deepest level a cell code can name."""
        return int(self._cut.size)

    @property
    def out_of_bounds(self) -> str:
        """``"per column"``: each column has its own policy (:meth:`column`)."""
        return "per column"

    # ------------------------------------------------------------------ reading a table
    def units(self, X: Any, adjusted: Adjusted | None = None, offset: int = 0) -> np.ndarray:
        """The table's values as float64 units ``(n, d)`` (see :mod:`sketchsyn.domains.columns`),
        every column checked and its policy applied; rows a ``"drop"`` policy dropped are
        removed. ``adjusted`` (a dict) counts the changed and dropped values per column."""
        cols, n = table_columns(X, self._columns)
        report = Adjusted() if adjusted is None else adjusted
        out = np.empty((n, self.d))
        for j, (col, raw) in enumerate(zip(self._cols, cols, strict=True)):
            out[:, j] = col.units(raw, report, offset)
        keep = ~np.isnan(out).any(axis=1)
        return out if keep.all() else out[keep]

    def kept(self, X: Any) -> np.ndarray:
        """Rows of a valid table that no column's ``"drop"`` policy removes (the rows
        :meth:`units` and :meth:`encode` keep), one bool a row."""
        cols, n = table_columns(X, self._columns)
        keep = np.ones(n, dtype=bool)
        for col, raw in zip(self._cols, cols, strict=True):
            keep &= ~np.isnan(col.units(raw, Adjusted(), 0))
        return keep

    def _column_codes(self, units: np.ndarray) -> list[np.ndarray]:
        return [c.codes(units[:, j]) for j, c in enumerate(self._cols)]

    def encode(
        self, X: Any, depth: int, return_dropped: bool = False, adjusted: Adjusted | None = None
    ) -> Any:
        """Cell codes (uint64) of the table's rows at level ``depth``.

        ``X`` is a table (:func:`~sketchsyn.domains.tables.table_columns`: a pandas or polars
        DataFrame, a pyarrow Table or RecordBatch, a dict of columns, or rows of ``d`` values);
        columns are matched by name. ``return_dropped`` also returns the rows a ``"drop"``
        policy removed; ``adjusted`` counts every policy's work per column.
        """
        depth = self._check_depth(depth, "encode")
        report = Adjusted() if adjusted is None else adjusted
        before = sum(v for k, v in report.items() if k.endswith(":dropped"))
        units = self.units(X, report)
        codes = self._interleave(self._column_codes(units), depth)
        dropped = sum(v for k, v in report.items() if k.endswith(":dropped")) - before
        return (codes, int(dropped)) if return_dropped else codes

    def _interleave(self, codes: list[np.ndarray], depth: int) -> np.ndarray:
        """Each column's top bits spread to the positions of its levels (table lookups of
        ``_CHUNK`` bits at a time), OR-ed into one code per row."""
        n = codes[0].shape[0] if codes else 0
        out = np.zeros(n, dtype=_U64)
        for j, c in enumerate(self._cols):
            levels = np.flatnonzero(self._cut[:depth] == j)  # 0-based levels that cut column j
            m = levels.size
            if m == 0:
                continue
            top = codes[j] >> _U64(c.bits - m)  # the column's first m bits
            positions = depth - 1 - levels  # bit position of each of them in the code
            for start in range(0, m, _CHUNK):
                width = min(_CHUNK, m - start)
                table = _spread_table(positions[start : start + width])
                chunk = (top >> _U64(m - start - width)) & _U64((1 << width) - 1)
                out |= table[chunk.astype(np.intp)]
        return out

    # ------------------------------------------------------------------ cells
    def cell_ranges(self, levels: Any, prefixes: Any) -> tuple[np.ndarray, np.ndarray]:
        """Each cell's code range per column, ``[lo, hi)`` as two uint64 ``(n, d)`` arrays."""
        lv, px = self._cells(levels, prefixes, "cell_ranges")
        n, d = lv.size, self.d
        prefix = np.zeros((d, n), dtype=_U64)
        used = np.zeros((d, n), dtype=np.int64)
        for level in range(1, int(lv.max(initial=0)) + 1):
            inside = lv >= level
            j = int(self._cut[level - 1])
            shift = np.where(inside, lv - level, 0).astype(_U64)
            b = (px >> shift) & _U64(1)
            prefix[j] = np.where(inside, (prefix[j] << _U64(1)) | b, prefix[j])
            used[j] += inside
        lo = np.empty((n, d), dtype=_U64)
        hi = np.empty((n, d), dtype=_U64)
        for j, c in enumerate(self._cols):
            free = (c.bits - used[j]).astype(_U64)
            lo[:, j] = prefix[j] << free
            hi[:, j] = (prefix[j] + _U64(1)) << free
        return lo, hi

    def valid(self, levels: Any, prefixes: Any) -> np.ndarray:
        """True for the cells holding at least one value of every column."""
        lo, hi = self.cell_ranges(levels, prefixes)
        ok = np.ones(lo.shape[0], dtype=bool)
        for j, c in enumerate(self._cols):
            ok &= c.valid_count(lo[:, j], hi[:, j]) > 0
        return ok

    def cell_bounds(self, levels: Any, prefixes: Any) -> tuple[np.ndarray, np.ndarray]:
        """First and last value of each cell, per column, in units ``(n, d)`` (a categorical's
        index; a numeric cell's edges)."""
        lo, hi = self.cell_ranges(levels, prefixes)
        first = np.empty(lo.shape)
        last = np.empty(lo.shape)
        for j, c in enumerate(self._cols):
            first[:, j], last[:, j] = c.range_units(lo[:, j], hi[:, j])
        return first, last

    def sample_ranges(self, lo: np.ndarray, hi: np.ndarray, rng: RNGLike = None) -> np.ndarray:
        """One record uniform over the values of each code range: units ``(n, d)``."""
        src = as_source(rng)
        u = src.random(lo.shape)
        out = np.empty(lo.shape)
        for j, c in enumerate(self._cols):
            out[:, j] = c.sample(lo[:, j], hi[:, j], u[:, j])
        return out

    def sample_cells(self, levels: Any, prefixes: Any, rng: RNGLike = None) -> np.ndarray:
        """One record uniform over the values of each given cell: units ``(n, d)``
        (:meth:`to_frame` turns them into a table)."""
        lo, hi = self.cell_ranges(levels, prefixes)
        return self.sample_ranges(lo, hi, rng)

    def where_fraction(self, levels: Any, prefixes: Any, where: Any) -> np.ndarray:
        """Share of each cell's values that satisfy ``where`` (values uniform in a cell):
        the product over the columns of the share of the column's values in the condition."""
        conditions = parse_where(where, self)
        lo, hi = self.cell_ranges(levels, prefixes)
        frac = np.ones(lo.shape[0])
        for j, cond in conditions.items():
            frac *= self._cols[j].fraction(lo[:, j], hi[:, j], cond)
        return frac

    def volume_fraction(self, levels: Any, prefixes: Any, lower: Any, upper: Any) -> np.ndarray:
        """Share of each cell inside the box ``[lower, upper]`` of units (each column between
        its two values, both included)."""
        lo_q = np.broadcast_to(np.asarray(lower, dtype=np.float64), (self.d,))
        hi_q = np.broadcast_to(np.asarray(upper, dtype=np.float64), (self.d,))
        lo, hi = self.cell_ranges(levels, prefixes)
        frac = np.ones(lo.shape[0])
        for j, c in enumerate(self._cols):
            cond = Condition([(float(lo_q[j]), float(hi_q[j]), False, False)])
            frac *= c.fraction(lo[:, j], hi[:, j], cond)
        return frac

    def gamma(self, level: int) -> float:
        """Diameter of a level-``l`` cell on the unit cube of code positions (ℓ∞): the widest
        column's share of its codes, ``2**−(its bits cut so far)`` (a column cut to single codes
        keeps the width of one code). ``gamma(−1) = gamma(0) = 1``.

        >>> s = Schema([{"name": "ok", "kind": "boolean"},
        ...             {"name": "x", "kind": "numeric", "low": 0, "high": 1}])
        >>> [s.gamma(l) for l in (0, 1, 2, 3)]
        [1.0, 1.0, 0.5, 0.5]
        """
        level = max(self._check_level(level, "gamma"), 0)
        cuts = np.bincount(self._cut[:level], minlength=self.d)
        return max(math.ldexp(1.0, -int(m)) for m in cuts)

    def normalize(self, X: Any) -> np.ndarray:
        """A table (or units ``(n, d)``) on the unit cube: each column's position in its codes."""
        units = (
            X
            if isinstance(X, np.ndarray) and X.dtype.kind == "f" and X.ndim == 2
            else self.units(X)
        )
        out = np.empty(units.shape)
        for j, c in enumerate(self._cols):
            out[:, j] = c.normalize(units[:, j])
        return out

    # ------------------------------------------------------------------ tables out
    def to_frame(self, units: np.ndarray, library: str = "pandas") -> Any:
        """Units ``(n, d)`` as a table of the schema's names and types: ``"pandas"`` (default),
        ``"polars"``, ``"pyarrow"`` or ``"numpy"`` (a dict of arrays). Categorical columns
        become categories (pandas ``category``, polars ``Enum``, Arrow dictionary), integers
        int64, numerics float64, datetimes ``datetime64[us]``, IPv4 addresses text, booleans
        bool.

        >>> s = Schema([{"name": "c", "kind": "categorical", "categories": ["a", "b"]},
        ...             {"name": "n", "kind": "integer", "low": 0, "high": 9}])
        >>> s.to_frame(np.array([[1.0, 7.0]]), "numpy")
        {'c': array(['b'], dtype=object), 'n': array([7])}
        """
        units = np.asarray(units, dtype=np.float64).reshape(-1, self.d)
        data = {}
        for j, c in enumerate(self._cols):
            cats = c.labels if isinstance(c, CategoricalColumn) else None
            data[c.name] = (c.kind, c.output(units[:, j], library), cats)
        return build_frame(data, library)

    def _check_units(self, units: Any) -> np.ndarray:
        arr = np.asarray(units, dtype=np.float64)
        if arr.ndim != 2 or arr.shape[1] != self.d:
            raise InputError(f"units must have shape (n, {self.d}); got {arr.shape}")
        return arr

    def encode_units(self, units: Any, depth: int) -> np.ndarray:
        """Cell codes of records already in units ``(n, d)`` (checked against the schema)."""
        depth = self._check_depth(depth, "encode_units")
        arr = self._check_units(units)
        frame = {c.name: c.output(arr[:, j], "numpy") for j, c in enumerate(self._cols)}
        for c in self._cols:
            if isinstance(c, CategoricalColumn):
                frame[c.name] = np.asarray(c.labels, dtype=object)[frame[c.name]]
        return self.encode(frame, depth)


def _spread_table(positions: np.ndarray) -> np.ndarray:
    """``table[v]``: the bits of ``v`` (``len(positions)`` bits, the first one on top) placed
    at ``positions`` of a uint64 (read-only, kept per distinct ``positions``)."""
    return _spread_cached(tuple(int(p) for p in positions))


@functools.lru_cache(maxsize=1024)
def _spread_cached(positions: tuple[int, ...]) -> np.ndarray:
    width = len(positions)
    v = np.arange(1 << width, dtype=_U64)
    table = np.zeros(1 << width, dtype=_U64)
    for k, pos in enumerate(positions):
        table |= ((v >> _U64(width - 1 - k)) & _U64(1)) << _U64(pos)
    table.setflags(write=False)
    return table
