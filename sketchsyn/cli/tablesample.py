"""``sketchsyn sample`` for a table's release: chunks of typed rows written as Parquet, CSV or JSON
lines with the schema's names and types, in bounded memory.

Parquet keeps the types (categories as dictionaries, datetimes as ``timestamp[us]``, integers as
int64, numbers as float64, booleans, addresses as text); CSV and JSON lines write category text,
ISO 8601 datetimes in UTC with their ``Z`` (``2013-01-01T05:17:00.000000Z``: a time read with an
offset was converted to UTC, one without was taken as UTC), whole numbers, exact floats
(shortest round-trip form) and ``true``/``false``.

>>> import numpy as np, pyarrow as pa
>>> t = pa.table({"when": pa.array(np.array(["2013-01-01T05:17"], "datetime64[us]"))})
>>> _text_columns(t).column("when").to_pylist()
['2013-01-01T05:17:00.000000Z']
"""

from __future__ import annotations

import argparse
import csv
import io
import json
from typing import Any

import numpy as np

from .common import _fail, _output


def _frame(release: Any, m: int, src: Any) -> Any:
    """``m`` rows of a table's release as a pyarrow Table of the schema's types."""
    out = release.sample(m, rng=src, as_frame="pyarrow")
    if isinstance(out, np.ndarray):  # a release that samples units: the schema builds the table
        out = release.domain.to_frame(out, "pyarrow")
    return out


def _rounder(schema: Any, decimals: int | None) -> Any:
    """A function rounding the numeric columns of a chunk to ``decimals`` digits, kept inside
    each column's bounds (None: no rounding)."""
    if decimals is None:
        return None
    if not 0 <= decimals <= 15:
        raise _fail(f"--decimals must be between 0 and 15 (digits after the point); got {decimals}")
    numeric = [c for c in (schema.column(n) for n in schema.names) if c.kind == "numeric"]
    if not numeric:
        raise _fail("--decimals rounds numeric columns; this schema has none")
    scale = 10.0**decimals
    grid = {}
    for c in numeric:
        lo, hi = np.ceil(c.low * scale) / scale, np.floor(c.high * scale) / scale
        if lo > hi:
            raise _fail(
                f"--decimals {decimals}: no number with {decimals} decimal(s) lies inside the "
                f"bounds [{c.low!r}, {c.high!r}] of column {c.name!r}; ask for more decimals"
            )
        grid[c.name] = (lo, hi)

    def rnd(table: Any) -> Any:
        import pyarrow as pa

        for name, (lo, hi) in grid.items():
            i = table.schema.get_field_index(name)
            values = np.clip(np.round(table.column(i).to_numpy(), decimals), lo, hi) + 0.0
            table = table.set_column(i, name, pa.array(values))
        return table

    return rnd


def _text_columns(table: Any) -> Any:
    """The table with categories as text and datetimes as ISO 8601 text in UTC, ``Z`` at the
    end (for CSV and JSON)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for i, field in enumerate(table.schema):
        col = table.column(i)
        if pa.types.is_dictionary(field.type):
            table = table.set_column(i, field.name, col.cast(pa.string()))
        elif pa.types.is_timestamp(field.type):
            text = pc.strftime(col, format="%Y-%m-%dT%H:%M:%SZ")
            table = table.set_column(i, field.name, text)
    return table


def _csv_options(schema: Any) -> Any:
    """Arrow's CSV writer options: values quoted only when some text could need it."""
    import pyarrow.csv as pacsv

    texts = list(schema.names)
    for name in schema.names:
        col = schema.column(name)
        texts += list(getattr(col, "labels", []))
    plain = not any(ch in t for t in texts for ch in ',"\r\n')
    return pacsv.WriteOptions(include_header=False, quoting_style="none" if plain else "needed")


def _csv_header(names: Any) -> bytes:
    """The header line, each name quoted only if it must be.

    >>> _csv_header(["a", "b,c"])
    b'a,"b,c"\\n'
    """
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(list(names))
    return buf.getvalue().encode()


def _json_lines(table: Any) -> bytes:
    rows = _text_columns(table).to_pylist()
    return "".join(json.dumps(r, allow_nan=False) + "\n" for r in rows).encode()


def _write_table_sample(args: argparse.Namespace, release: Any, fmt: str, src: Any) -> None:
    """Write ``args.n`` rows of a table's release to ``args.output`` in chunks."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    schema = release.domain
    rnd = _rounder(schema, args.decimals)
    if fmt == "parquet" and args.output == "-":
        raise _fail("sample -o -: Parquet needs a file (its index is at its end); give -o FILE")
    with _output(args.output, binary=True) as out:
        writer = None
        try:
            left, first = args.n, True
            while left > 0 or first:
                m = min(left, args.batch_size)
                chunk = _frame(release, m, src)
                if rnd is not None:
                    chunk = rnd(chunk)
                if fmt == "parquet":
                    if writer is None:
                        writer = pq.ParquetWriter(out, chunk.schema)
                    writer.write_table(chunk)
                elif fmt == "csv":
                    text = _text_columns(chunk)
                    if writer is None:
                        out.write(_csv_header(schema.names))
                        options = _csv_options(schema)
                        writer = pacsv.CSVWriter(out, text.schema, write_options=options)
                    writer.write_table(text)
                else:
                    out.write(_json_lines(chunk))
                left -= m
                first = False
        finally:
            if writer is not None:
                writer.close()
