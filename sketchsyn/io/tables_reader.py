"""A table's columns read by name, typed by its :class:`~sketchsyn.domains.Schema`, as Arrow tables
in bounded memory (pyarrow, the ``cli`` extra).

Each reader yields ``pyarrow.Table`` batches holding exactly the schema's columns, in its order
and under its names, at most ``batch_size`` rows each, ready for ``update_many`` of a summary on
that schema (which applies each column's policy). The readers are the numeric readers' typed
twins and share their machinery: blocks of lines, line numbers, ``on_bad``, ``skip_rows``,
``resume`` and ``position`` (:mod:`sketchsyn.io.batchreader`), Parquet row groups and Arrow
record batches (:mod:`sketchsyn.io.arrowread`).

- :class:`CSVTableReader`: a CSV with a header line; each block of lines parsed by pyarrow's
  streaming CSV reader with one Arrow type per column kind (numbers as ``float64``, booleans as
  ``bool``, text for categories, addresses and datetimes). A line with the wrong number of fields
  or a value that does not read as its column's kind is bad (named, or counted and skipped with
  ``on_bad="skip"``); pyarrow names its line, and only the lines since its last internal block
  are parsed again. Blank lines are not records. CSV on stdin: ``"-"``.
- :class:`JSONLinesTableReader`: one JSON object per line, the columns as keys.
- :class:`ParquetTableReader`, :class:`ArrowTableReader`: ``ParquetFile.iter_batches(columns=…)``
  and Arrow IPC record batches, each column checked against its kind when the file is opened.

A missing value (an empty CSV field or an unquoted ``NA``, as R writes one; a JSON ``null`` or
missing key; an Arrow null) is not a bad line: it reaches the schema, whose column policy
decides (``raise`` names the row). Datetimes are read from ISO 8601 text (a date, a time with
``T`` or a space, fractions; a zone offset or ``Z`` is converted to UTC) or from Arrow dates
and timestamps, as microseconds (``timestamp[us]``).

>>> import io
>>> from sketchsyn.domains import Schema
>>> schema = Schema.from_dict({"columns": [
...     {"name": "carrier", "kind": "categorical", "categories": ["AA", "UA"]},
...     {"name": "delay", "kind": "numeric", "low": -60, "high": 600}]})
>>> data = io.BytesIO(b"delay,carrier,tail\\n5,AA,N1\\n\\nlate,UA,N2\\n-3.5,UA,N3\\n")
>>> reader = CSVTableReader(data, schema, on_bad="skip", threads=False)
>>> [t.to_pydict() for t in reader]
[{'carrier': ['AA', 'UA'], 'delay': [5.0, -3.5]}]
>>> reader.lines.tolist(), reader.bad_lines, reader.position.rows
([2, 5], [4], 4)
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ..errors import InputError, ParameterError
from .arrowread import ArrowReader, ParquetReader, _pyarrow
from .batchreader import BatchReader
from .csvarrow import _longest_line
from .readers import CSVReader, format_of

__all__ = [
    "ArrowTableReader",
    "CSVTableReader",
    "JSONLinesTableReader",
    "ParquetTableReader",
    "arrow_cast",
    "open_table_reader",
    "to_timestamps",
]

_ROW = re.compile(r"In CSV column #(\d+): Row #(\d+): (.*)", re.DOTALL)
# Unquoted fields that are missing values: empty, and NA as R writes a missing value
# (write.csv quotes text, so a quoted "NA" stays the text NA).
NULL_VALUES = ("", "NA")
_BLOCK = 1 << 18  # bytes of pyarrow's internal CSV blocks: the most parsed again per bad line


def _arrow_type(kind: str) -> Any:
    """The Arrow type a column of ``kind`` is parsed as from text."""
    import pyarrow as pa

    return {"numeric": pa.float64(), "integer": pa.float64(), "boolean": pa.bool_()}.get(
        kind, pa.string()
    )


def _output_type(kind: str) -> Any:
    """The Arrow type of a column of ``kind`` in the batches a reader yields."""
    import pyarrow as pa

    return pa.timestamp("us") if kind == "datetime" else _arrow_type(kind)


def _empty(schema: Any, unit: str | None = None) -> Any:
    import pyarrow as pa

    cols = {c.name: pa.array([], _output_type(c.kind)) for c in schema._cols}
    if unit is not None:
        cols[unit] = pa.array([], pa.string())
    return pa.table(cols)


def _unit_column(schema: Any, unit: str | None) -> list[str]:
    """The privacy unit's column, read beside the schema's (refused if the schema has it)."""
    if unit is None:
        return []
    if not isinstance(unit, str) or not unit:
        raise ParameterError(
            f"The 'unit' parameter of a table reader must be a column name. Got {unit!r} instead."
        )
    if unit in schema.names:
        raise ParameterError(
            f"The privacy unit's column {unit!r} is in the schema: a unit is neither in the "
            "schema nor synthesized; take it out of the schema"
        )
    return [unit]


def _iso_us(text: str) -> _dt.datetime:
    """One ISO 8601 date or time as a naive UTC datetime (``Z`` and offsets converted)."""
    text = text.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    value = _dt.datetime.fromisoformat(text)
    if value.tzinfo is not None:
        value = value.astimezone(_dt.timezone.utc).replace(tzinfo=None)
    return value


def arrow_cast(col: Any, target: Any) -> Any:
    """``pyarrow.compute.cast(col, target)``, or None where Arrow cannot make that cast: a value
    it cannot read as ``target`` (``ArrowInvalid``) or no cast between the two types at all
    (``ArrowNotImplementedError``). Callers then read the values another way or rule the type
    out; every other Arrow error propagates.

    >>> import pyarrow as pa
    >>> arrow_cast(pa.array(["1", "2"]), pa.int64()).to_pylist()
    [1, 2]
    >>> arrow_cast(pa.array(["x"]), pa.int64()) is None
    True
    >>> arrow_cast(pa.array([[1]]), pa.int64()) is None   # no cast from a list to an integer
    True
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        return pc.cast(col, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def to_timestamps(col: Any) -> tuple[Any, list[int]]:
    """``(timestamp[us] array, indices of the values that are not ISO dates or times)`` of an
    Arrow array of text (nulls stay null; a bad value becomes null and is listed).

    >>> import pyarrow as pa
    >>> ts, bad = to_timestamps(pa.array(["2013-01-01", "2013-01-01T05:00:00Z", "soon", None]))
    >>> [str(t) for t in ts.to_pylist()], bad
    (['2013-01-01 00:00:00', '2013-01-01 05:00:00', 'None', 'None'], [2])
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    us = pa.timestamp("us")
    if pa.types.is_timestamp(col.type) or pa.types.is_date(col.type):
        return pc.cast(col, us), []
    for target in (us, pa.timestamp("us", "UTC")):
        stamps = arrow_cast(col, target)
        if stamps is not None:
            return pc.cast(stamps, us), []
    out: list[Any] = []
    bad: list[int] = []
    for i, v in enumerate(col.to_pylist()):
        if v is None:
            out.append(None)
            continue
        try:
            out.append(_iso_us(str(v)))
        except (ValueError, TypeError, OverflowError):
            out.append(None)
            bad.append(i)
    return pa.array(out, us), bad


def _drop_rows(table: Any, numbers: np.ndarray, rows: Sequence[int]) -> tuple[Any, np.ndarray]:
    """The table and its line numbers without ``rows`` (0-based indices)."""
    import pyarrow as pa

    if not len(rows):
        return table, numbers
    keep = np.ones(table.num_rows, dtype=bool)
    keep[np.asarray(rows, dtype=np.int64)] = False
    return table.filter(pa.array(keep)), numbers[keep]


def _datetimes(table: Any, schema: Any, numbers: np.ndarray) -> tuple[Any, list[tuple[int, str]]]:
    """Datetime columns of text turned into timestamps; ``(table, [(line, why)])`` of the rows
    whose text is not a date or time (they are left out of the table)."""
    bad: dict[int, str] = {}
    for c in schema._cols:
        if c.kind != "datetime":
            continue
        col = table.column(c.name).combine_chunks()
        ts, rows = to_timestamps(col)
        table = table.set_column(table.schema.get_field_index(c.name), c.name, ts)
        for i in rows:
            value = col[i].as_py()
            bad.setdefault(i, f"column {c.name!r} = {value!r} is not an ISO 8601 date or time")
    rows = sorted(bad)
    table, _ = _drop_rows(table, numbers, rows)
    return table, [(int(numbers[i]), bad[i]) for i in rows]


class CSVTableReader(CSVReader):
    """The ``schema``'s columns of a CSV with a header line, typed, as Arrow tables.

    Parameters
    ----------
    source : path, ``"-"``, binary file object or iterable of lines
        As for :class:`~sketchsyn.io.readers.CSVReader` (gzip and zstd by their first bytes).
    schema : Schema
        Its column names are looked up in the header (other columns are not read).
    unit : str, optional
        A privacy unit's column, read as text after the schema's (not in the schema).
    **kwargs
        ``batch_size``, ``on_bad``, ``delimiter``, ``skip_rows``, ``resume``, ``threads``: as
        for :class:`~sketchsyn.io.readers.CSVReader`.
    """

    # The typed tables may keep slices of the block (strings): it gets its own bytes, never a
    # view of the reader's reused buffer.
    _views = False

    def __init__(self, source: Any, schema: Any, unit: str | None = None, **kwargs: Any) -> None:
        _pyarrow("a table (CSV with a schema)")
        self.table_schema = schema
        self.unit = unit
        self._out = list(schema.names) + _unit_column(schema, unit)
        kwargs.pop("engine", None)
        super().__init__(source, self._out, **kwargs)
        import pyarrow as pa
        import pyarrow.csv as pacsv

        self._names = [f"c{i}" for i in range(self._ncols)]
        keep = [self._names[i] for i in self._idx]
        self._read_options = pacsv.ReadOptions(
            column_names=self._names, use_threads=False, block_size=_BLOCK
        )
        kinds = [c.kind for c in schema._cols] + (["unit"] if unit else [])
        types = {n: _arrow_type(k) for n, k in zip(keep, kinds, strict=True)}
        self._convert_options = pacsv.ConvertOptions(
            include_columns=keep,
            column_types=types,
            strings_can_be_null=True,
            null_values=list(NULL_VALUES),
            quoted_strings_can_be_null=False,
        )
        self._pa, self._pacsv = pa, pacsv

    def _parse(self, buf: bytes, first: int, count: int | None) -> tuple[Any, Any, int]:
        n_lines = buf.count(b"\n")
        pieces: list[Any] = []
        numbers: list[np.ndarray] = []
        bad: list[tuple[int, str]] = []
        try:
            self._parse_part(buf, first, pieces, numbers, bad)
        except _Misaligned:  # a quoted field holds a line break: one record on several lines
            buf, spans = _blank_multiline_records(buf, first, self.delimiter)
            pieces, numbers, bad = [], [], spans
            self._parse_part(buf, first, pieces, numbers, bad)
        if not pieces:
            for line, why in sorted(bad):
                self._bad(line, why)
            return _empty(self.table_schema, self.unit), np.zeros(0, dtype=np.int64), n_lines
        pa = self._pa
        table = pa.Table.from_batches(pieces)
        table = pa.Table.from_arrays(table.columns, names=self._out)
        nums = np.concatenate(numbers).astype(np.int64)
        blank = _blank_lines(buf, first)
        if blank.size:  # blank lines parse as rows of nulls: they are not records
            table, nums = _drop_rows(table, nums, np.flatnonzero(np.isin(nums, blank)).tolist())
        table, more = _datetimes(table, self.table_schema, nums)
        if more:
            nums = np.setdiff1d(nums, [b[0] for b in more], assume_unique=True)
        for line, why in sorted(bad + more):  # in line order: "raise" names the first
            self._bad(line, why)
        return table.combine_chunks(), nums, n_lines

    def _parse_part(
        self, buf: bytes, first: int, pieces: list, numbers: list, bad: list[tuple[int, str]]
    ) -> None:
        """Parse the complete lines ``buf`` (the first is line ``first``) into ``pieces``
        (record batches) and ``numbers`` (their line numbers); bad lines go to ``bad``."""
        pa, pacsv = self._pa, self._pacsv
        whole = pa.py_buffer(buf)
        total = buf.count(b"\n")
        ends: np.ndarray | None = None
        start_line = start_byte = 0
        options = self._read_options
        while start_byte < len(buf):
            invalid: list[tuple[int, str]] = []

            def handler(row: Any, invalid: list = invalid) -> str:
                invalid.append((row.number, row.text))
                return "skip"

            parse = pacsv.ParseOptions(
                delimiter=self.delimiter, invalid_row_handler=handler, ignore_empty_lines=False
            )
            batches: list[Any] = []
            failed = None
            try:
                reader = pacsv.open_csv(
                    pa.BufferReader(whole.slice(start_byte)),
                    options,
                    parse,
                    self._convert_options,
                )
                for batch in reader:
                    batches.append(batch)
            except pa.ArrowInvalid as exc:
                failed = _ROW.search(str(exc))
                longest = _longest_line(buf, start_byte)
                if failed is None and "straddl" in str(exc) and longest >= options.block_size:
                    # A line longer than pyarrow's block: read this block in one piece.
                    options = pacsv.ReadOptions(
                        column_names=self._names,
                        use_threads=False,
                        block_size=1 << longest.bit_length(),
                    )
                    continue
                if failed is None:
                    raise InputError(
                        f"{self.name}: pyarrow could not read the CSV: {exc}"
                    ) from None
            got = sum(b.num_rows for b in batches)
            bad_rel = sorted(n for n, _ in invalid if n is not None)
            if failed is None:
                covered = total - start_line
            else:
                covered = got  # the lines of the batches read before the failure
                for n in bad_rel:
                    if n <= covered + 1 and n < int(failed.group(2)):
                        covered += 1
            here = set(n for n in bad_rel if n <= covered)
            for n, text in sorted(invalid, key=lambda item: item[0]):
                if n in here and text.strip():
                    fields = len(next(csv.reader([text], delimiter=self.delimiter), []))
                    why = f"has {fields} fields, the header has {self._ncols}"
                    bad.append((first + start_line + n - 1, why))
            rel = np.delete(np.arange(1, covered + 1), np.array(sorted(here), dtype=np.int64) - 1)
            if rel.size != got:  # a record over several lines (a quoted line break)
                raise _Misaligned
            if got:
                pieces.extend(batches)
                numbers.append(rel + (first + start_line - 1))
            if failed is None:
                return
            if ends is None:
                ends = np.flatnonzero(np.frombuffer(buf, dtype=np.uint8) == 10)
            bad_line = start_line + int(failed.group(2)) - 1  # 0-based in buf
            gap = start_line + covered
            if bad_line > gap:  # lines between the kept batches and the bad line: again
                sub = buf[_start(ends, gap) : _start(ends, bad_line)]
                self._parse_part(sub, first + gap, pieces, numbers, bad)
            column = int(failed.group(1))
            name = self.header[column] if column < len(self.header) else f"#{column}"
            detail = failed.group(3).strip().replace("CSV conversion error to ", "not ")
            bad.append((first + bad_line, f"column {name!r}: {detail}"))
            start_line = bad_line + 1
            start_byte = _start(ends, start_line) if start_line < total else len(buf)


class _Misaligned(Exception):
    """pyarrow's rows are not the block's lines: some record spans several lines."""


def _blank_multiline_records(buf: bytes, first: int, delimiter: str) -> tuple[bytes, list]:
    """The block with every record that spans lines (a quoted field holding a line break, or
    a quote left open to the end of the block) emptied line by line, newlines kept (an empty
    line is not a record), and ``[(line, why)]`` naming the first line of each.

    >>> blank, bad = _blank_multiline_records(b'1,x\\n2,"y\\nz"\\n3,x\\n', 5, ",")
    >>> blank, bad[0][0]
    (b'1,x\\n\\n\\n3,x\\n', 6)
    """
    text = buf.decode("utf-8", errors="surrogateescape")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    reader = csv.reader(iter(line + "\n" for line in lines), delimiter=delimiter, strict=False)
    spans: list[tuple[int, int]] = []
    done = 0
    while True:
        try:
            next(reader)
        except StopIteration:
            break
        except csv.Error:  # a quote still open where the block ends
            spans.append((done, len(lines)))
            break
        if reader.line_num - done > 1:
            spans.append((done, reader.line_num))
        done = reader.line_num
    bad = []
    for start, end in spans:
        for k in range(start, end):
            lines[k] = ""
        why = (
            f"a quoted field holds a line break (the record runs over lines {first + start} to "
            f"{first + end - 1}); sketchsyn reads one record per line"
        )
        bad.append((first + start, why))
    out = "".join(line + "\n" for line in lines)
    return out.encode("utf-8", errors="surrogateescape"), bad


def _start(ends: np.ndarray, k: int) -> int:
    """Byte offset of line ``k`` (0-based) of a block whose newlines are at ``ends``."""
    return 0 if k == 0 else int(ends[k - 1]) + 1


def _blank_lines(buf: bytes, first: int) -> np.ndarray:
    """Numbers of the empty lines (``\\n`` or ``\\r\\n`` alone) of a block of lines."""
    if not (buf.startswith((b"\n", b"\r\n")) or b"\n\n" in buf or b"\n\r\n" in buf):
        return np.zeros(0, dtype=np.int64)
    raw = np.frombuffer(buf, dtype=np.uint8)
    ends = np.flatnonzero(raw == 10)
    starts = np.concatenate(([0], ends[:-1] + 1))
    length = ends - starts
    blank = (length == 0) | ((length == 1) & (raw[np.maximum(ends - 1, 0)] == 13))
    return first + np.flatnonzero(blank)


def _json_value(kind: str, value: Any) -> tuple[Any, bool]:
    """``(value for the column's Arrow array, ok)`` of one JSON value of a column of ``kind``."""
    if value is None:
        return None, True
    if kind in ("numeric", "integer"):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return (float(value) if ok else None), ok
    if kind == "boolean":
        if isinstance(value, bool):
            return value, True
        ok = isinstance(value, int) and value in (0, 1)
        return (bool(value) if ok else None), ok
    if kind == "ipv4" and isinstance(value, int) and not isinstance(value, bool):
        if 0 <= value < 2**32:
            return ".".join(str((value >> s) & 255) for s in (24, 16, 8, 0)), True
        return None, False
    if kind in ("categorical", "unit") and isinstance(value, int) and not isinstance(value, bool):
        return str(value), True
    return (value, True) if isinstance(value, str) else (None, False)


def _json_objects(
    buf: bytes, first: int, bad: list[tuple[int, str]]
) -> Iterator[tuple[int, dict[str, Any] | None]]:
    """``(line number, object)`` of each JSON-lines line of a block (None for a blank or bad
    line; a bad one is listed in ``bad`` with why)."""
    lines = buf.split(b"\n")
    for offset, line in enumerate(lines[:-1] if lines[-1] == b"" else lines):
        lineno = first + offset
        obj = None
        if line.strip():
            try:
                obj = json.loads(line)
            except (ValueError, UnicodeDecodeError) as exc:
                bad.append((lineno, f"is not valid JSON ({exc})"))
            else:
                if not isinstance(obj, dict):
                    bad.append((lineno, f"is not a JSON object (got {type(obj).__name__})"))
                    obj = None
        yield lineno, obj


class JSONLinesTableReader(BatchReader):
    """The ``schema``'s columns (keys) of a JSON-lines source, typed, as Arrow tables.

    A line that is not a JSON object, or a value of the wrong JSON type for its column (text in
    a numeric column, a number in a datetime column), is bad; a missing key or ``null`` is a
    missing value for the schema's policy. Takes the keyword arguments of
    :class:`CSVTableReader` but ``delimiter``.

    >>> from sketchsyn.domains import Schema
    >>> s = Schema.from_dict({"columns": [{"name": "n", "kind": "integer", "low": 0, "high": 9}]})
    >>> [t.to_pydict() for t in JSONLinesTableReader(['{"n": 3}', '{"n": 4, "x": 1}'], s)]
    [{'n': [3.0, 4.0]}]
    """

    def __init__(self, source: Any, schema: Any, unit: str | None = None, **kwargs: Any) -> None:
        _pyarrow("a table (JSON lines with a schema)")
        self.table_schema = schema
        self.unit = unit
        super().__init__(source, list(schema.names) + _unit_column(schema, unit), **kwargs)

    def _parse(self, buf: bytes, first: int, count: int | None) -> tuple[Any, Any, int]:
        import pyarrow as pa

        cols = [(c.name, c.kind) for c in self.table_schema._cols]
        cols += [(self.unit, "unit")] if self.unit else []
        values: list[list[Any]] = [[] for _ in cols]
        numbers: list[int] = []
        bad: list[tuple[int, str]] = []
        for lineno, obj in _json_objects(buf, first, bad):
            if obj is None:
                continue
            row = []
            for name, kind in cols:
                value, ok = _json_value(kind, obj.get(name))
                if not ok:
                    shown = obj.get(name)
                    what = "unit id (text or an integer)" if kind == "unit" else f"{kind} value"
                    bad.append((lineno, f"key {name!r} = {shown!r} is not a {what}"))
                    break
                row.append(value)
            else:
                for j, value in enumerate(row):
                    values[j].append(value)
                numbers.append(lineno)
        table = pa.table(
            {
                name: pa.array(v, _arrow_type(kind))
                for (name, kind), v in zip(cols, values, strict=True)
            }
        )
        nums = np.array(numbers, dtype=np.int64)
        table, more = _datetimes(table, self.table_schema, nums)
        if more:
            nums = np.setdiff1d(nums, [b[0] for b in more], assume_unique=True)
        for lineno, why in sorted(bad + more):
            self._bad(lineno, why)
        return table.combine_chunks(), nums, buf.count(b"\n")


class _Typed:
    """The typed part of the Parquet and Arrow table readers: each column checked against its
    kind when the file is opened, and converted to the reader's output types."""

    name: str
    table_schema: Any
    unit: str | None = None

    def _check_type(self, name: str, t: Any, pa: Any) -> None:
        if name == self.unit:
            t = t.value_type if pa.types.is_dictionary(t) else t
            if not (pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)):
                raise InputError(
                    f"{self.name}: the privacy unit's column {name!r} has type {t}: unit ids "
                    "are integers or text"
                )
            return
        kind = self.table_schema.column(name).kind
        if not _compatible(kind, t.value_type if pa.types.is_dictionary(t) else t, pa):
            raise InputError(
                f"{self.name}: column {name!r} has type {t}, which does not hold {kind} values "
                "(the schema's kind)"
            )

    def _convert(self, batch: Any, first_row: int) -> tuple[Any, np.ndarray, list]:
        import pyarrow as pa

        arrays = []
        for c in self.table_schema._cols:
            col = batch.column(batch.schema.get_field_index(c.name))
            t = col.type.value_type if pa.types.is_dictionary(col.type) else col.type
            if c.kind in ("numeric", "integer") and not pa.types.is_floating(t):
                col = col.cast(pa.float64())
            elif c.kind == "categorical" and not (
                pa.types.is_string(t) or pa.types.is_large_string(t)
            ):
                col = col.cast(pa.string())
            elif c.kind == "boolean" and not pa.types.is_boolean(t):
                col = col.cast(pa.bool_())
            arrays.append(col)
        names = list(self.table_schema.names)
        if self.unit is not None:  # the unit's ids as they are (integers or text)
            arrays.append(batch.column(batch.schema.get_field_index(self.unit)))
            names.append(self.unit)
        table = pa.Table.from_arrays(arrays, names=names)
        numbers = np.arange(first_row, first_row + batch.num_rows, dtype=np.int64)
        table, bad = _datetimes(table, self.table_schema, numbers)
        if bad:
            numbers = np.setdiff1d(numbers, [b[0] for b in bad], assume_unique=True)
        return table, numbers, bad


def _compatible(kind: str, t: Any, pa: Any) -> bool:
    """Whether an Arrow column of type ``t`` holds values of a schema column of ``kind``."""
    number = pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
    text = pa.types.is_string(t) or pa.types.is_large_string(t)
    return {
        "numeric": number,
        "integer": number,
        "datetime": pa.types.is_timestamp(t) or pa.types.is_date(t) or text,
        "categorical": text or pa.types.is_integer(t),
        "boolean": pa.types.is_boolean(t) or pa.types.is_integer(t),
        "ipv4": text or pa.types.is_integer(t),
    }.get(kind, False)


class ParquetTableReader(_Typed, ParquetReader):
    """The ``schema``'s columns of a Parquet file, a record batch at a time, typed; other
    parameters as for :class:`~sketchsyn.io.arrowread.ParquetReader`."""

    def __init__(self, source: Any, schema: Any, unit: str | None = None, **kwargs: Any) -> None:
        self.table_schema = schema
        self.unit = unit
        super().__init__(source, list(schema.names) + _unit_column(schema, unit), **kwargs)


class ArrowTableReader(_Typed, ArrowReader):
    """The ``schema``'s columns of an Arrow IPC file or stream, typed; other parameters as for
    :class:`~sketchsyn.io.arrowread.ArrowReader`."""

    def __init__(self, source: Any, schema: Any, unit: str | None = None, **kwargs: Any) -> None:
        self.table_schema = schema
        self.unit = unit
        super().__init__(source, list(schema.names) + _unit_column(schema, unit), **kwargs)


def open_table_reader(source: Any, schema: Any, fmt: str | None = None, **kwargs: Any) -> Any:
    """The typed reader of ``source`` for ``schema``: ``fmt`` (``"csv"``, ``"jsonl"``,
    ``"parquet"``, ``"arrow"`` or ``"accesslog"``), else by the name or a file's first bytes as
    :func:`~sketchsyn.io.readers.open_reader` does. Keyword arguments go to the reader
    (``unit="client"``: a privacy unit's column, read after the schema's).

    >>> import io
    >>> from sketchsyn.domains import Schema
    >>> s = Schema.from_dict({"columns": [{"name": "ok", "kind": "boolean"}]})
    >>> [t.to_pydict() for t in open_table_reader(io.BytesIO(b"ok\\ntrue\\n0\\n"), s, "csv")]
    [{'ok': [True, False]}]
    """
    from .arrowread import columnar_format
    from .readers import _FORMATS

    named = isinstance(source, str) and source != "-"
    fmt = fmt or (named and (format_of(source) or columnar_format(source))) or "csv"
    if fmt not in _FORMATS:
        raise ParameterError(
            f"The 'fmt' parameter of open_table_reader must be one of {list(_FORMATS)}. Got "
            f"{fmt!r} instead."
        )
    delimiter = kwargs.pop("delimiter", None)
    if fmt == "csv":
        tsv = named and source.lower().split(".gz")[0].endswith(".tsv")
        kwargs["delimiter"] = delimiter or ("\t" if tsv else ",")
    if fmt == "accesslog":
        from .accesslog_table import AccessLogTableReader as reader
    else:
        reader = {
            "csv": CSVTableReader,
            "jsonl": JSONLinesTableReader,
            "parquet": ParquetTableReader,
            "arrow": ArrowTableReader,
        }[fmt]
    return reader(source, schema, **kwargs)
