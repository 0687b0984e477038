"""A schema drafted from a file's own rows: kinds guessed, bounds and categories READ FROM THE DATA.

**What this module returns is not private.** A bound read from the data is the exact value of
its most extreme row, and a category seen once can name one person: a release fitted with such a
schema leaks them. :func:`draft_schema` exists to save typing the column names and kinds; every
bound and category list it writes must be replaced by public knowledge (a data dictionary, a
code list, the valid range of a measurement) before the schema is used. :data:`WARNING` says so,
and ``sketchsyn schema FILE`` prints it on stderr and at the top of the YAML.

The draft also says so in a form a program reads: its dict form has a ``"draft"`` key
(:data:`DRAFT_MARKER`), which :meth:`~sketchsyn.Schema.from_dict`, :meth:`~sketchsyn.Schema.load`
and ``sketchsyn fit`` refuse until a person has replaced the values and deleted the key.
Categories are listed sorted (a public order), not by how often they occur in the data.

The file is read in bounded memory (CSV and JSON lines as text, Parquet a record batch at a
time); per column the first kind that fits every value is kept, in this order: boolean
(``true``/``false``), integer, numeric, datetime (ISO 8601), ipv4, categorical (at most
``max_categories`` distinct values; a text column with more is left out, with a note).

>>> import io
>>> draft, notes = draft_schema(io.BytesIO(b"a,b,c\\n1,y,2013-01-01\\n5,x,2013-02-01\\n"), "csv")
>>> list(draft)
['draft', 'columns']
>>> [(c["name"], c["kind"]) for c in draft["columns"]]
[('a', 'integer'), ('b', 'categorical'), ('c', 'datetime')]
>>> draft["columns"][0]["low"], draft["columns"][0]["high"], draft["columns"][1]["categories"]
(1, 5, ['x', 'y'])
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import InputError
from .arrowread import _pyarrow
from .tables_reader import NULL_VALUES, arrow_cast, to_timestamps

__all__ = ["DRAFT_MARKER", "WARNING", "draft_schema"]

WARNING = (
    "this schema was DRAFTED FROM THE DATA: it is NOT PRIVATE. Every bound (low, high) and "
    "category list in it was read from the rows: the extremes are exact values of the most "
    "extreme rows and a rare category can name one person, so a release fitted with them leaks "
    "them. Replace each one by public knowledge (a data dictionary, a code list, the valid "
    "range of the measurement) before fitting; check the guessed kinds too."
)
DRAFT_MARKER = (
    "NOT PRIVATE: bounds and categories read from the data. Replace each by public knowledge, "
    "then delete this line."
)
_KINDS = ("boolean", "integer", "numeric", "datetime", "ipv4")
_IPV4 = r"^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$"


class _Guess:
    """What one column's values allow so far, and their range and categories."""

    def __init__(self, max_categories: int) -> None:
        self.kinds = set(_KINDS)
        self.low, self.high = math.inf, -math.inf
        self.first_time, self.last_time = np.iinfo(np.int64).max, np.iinfo(np.int64).min
        self.counts: dict[str, int] = {}
        self.too_many = False
        self.values = 0
        self.max_categories = max_categories

    def add(self, text: Any) -> None:
        """Offer a pyarrow array of text (nulls are missing values)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        text = text.drop_null()
        if len(text) == 0:
            return
        self.values += len(text)
        if "boolean" in self.kinds:
            lower = pc.utf8_lower(text)
            if not pc.all(pc.is_in(lower, pa.array(["true", "false"]))).as_py():
                self.kinds.discard("boolean")
        for kind, target in (("integer", pa.int64()), ("numeric", pa.float64())):
            if kind not in self.kinds:
                continue
            cast = arrow_cast(text, target)
            if cast is None:
                self.kinds.discard(kind)
                continue
            numbers = cast.to_numpy(zero_copy_only=False)
            if not np.isfinite(numbers.astype(np.float64)).all():
                self.kinds.discard(kind)
                continue
            self.low = min(self.low, float(numbers.min()))
            self.high = max(self.high, float(numbers.max()))
        if "datetime" in self.kinds:
            stamps, bad = to_timestamps(text)
            if bad:
                self.kinds.discard("datetime")
            else:
                us = stamps.cast(pa.int64()).to_numpy(zero_copy_only=False)
                self.first_time = min(self.first_time, int(us.min()))
                self.last_time = max(self.last_time, int(us.max()))
        if "ipv4" in self.kinds and not pc.all(pc.match_substring_regex(text, _IPV4)).as_py():
            self.kinds.discard("ipv4")
        if not self.too_many:
            counts = pc.value_counts(text)
            for item in counts.to_pylist():
                key = item["values"]
                self.counts[key] = self.counts.get(key, 0) + item["counts"]
            if len(self.counts) > self.max_categories:
                self.too_many, self.counts = True, {}

    def entry(self, name: str) -> tuple[dict[str, Any] | None, str | None]:
        """The column's schema entry (None: left out) and a note for the user."""
        if self.values == 0:
            return None, f"column {name!r}: every value is missing; left out"
        kind = next((k for k in _KINDS if k in self.kinds), "categorical")
        if kind == "boolean":
            return {"name": name, "kind": "boolean"}, None
        if kind in ("integer", "numeric"):
            low, high = self.low, self.high
            if kind == "integer":
                low, high = int(low), int(high)
            if not low < high:
                high = low + 1
            return {"name": name, "kind": kind, "low": low, "high": high}, None
        if kind == "datetime":
            first = np.datetime64(self.first_time, "us")
            last = np.datetime64(max(self.last_time, self.first_time + 1), "us")
            return {"name": name, "kind": kind, "low": str(first), "high": str(last)}, None
        if kind == "ipv4":
            return {"name": name, "kind": "ipv4"}, None
        if self.too_many:
            return None, (
                f"column {name!r}: text with more than {self.max_categories} distinct values; "
                "left out (no kind fits: give it a public category list with policy other, or "
                "leave it out of the schema)"
            )
        cats = sorted(self.counts)  # a public order: how often each occurs is not public
        return {"name": name, "kind": "categorical", "categories": cats}, None


def _csv_batches(source: Any, batch_size: int, delimiter: str) -> Iterator[Any]:
    """A CSV's record batches, every column as text (the header names them)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    from .compress import open_bytes

    opened = open_bytes(source)
    try:
        header = opened.stream.readline()
        if not header.strip():
            raise InputError(f"{opened.name} is empty: a CSV needs a header line naming columns")
        text = header.decode("utf-8-sig").rstrip("\r\n")
        names = [h.strip() for h in next(csv.reader([text], delimiter=delimiter))]
        reader = pacsv.open_csv(
            opened.stream,
            pacsv.ReadOptions(column_names=names, block_size=1 << 22),
            pacsv.ParseOptions(delimiter=delimiter, invalid_row_handler=lambda row: "skip"),
            pacsv.ConvertOptions(
                column_types=dict.fromkeys(names, pa.string()),
                strings_can_be_null=True,
                null_values=list(NULL_VALUES),
                quoted_strings_can_be_null=False,
            ),
        )
        yield from reader
    finally:
        opened.close()


def _json_batches(source: Any, batch_size: int) -> Iterator[Any]:
    """JSON lines as record batches of text (numbers in their JSON form)."""
    import pyarrow as pa

    from .compress import open_bytes

    opened = open_bytes(source)
    names: list[str] = []
    rows: list[dict[str, Any]] = []

    def flush() -> Any:
        cols = {n: [_text(r.get(n)) for r in rows] for n in names}
        return pa.table({n: pa.array(v, pa.string()) for n, v in cols.items()}).to_batches()

    try:
        for line in opened.stream:
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if not isinstance(obj, dict):
                continue
            names += [k for k in obj if k not in names]
            rows.append(obj)
            if len(rows) >= batch_size:
                yield from flush()
                rows = []
        if rows:
            yield from flush()
    finally:
        opened.close()


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(value)


def _parquet_batches(source: Any, batch_size: int) -> Iterator[Any]:
    """A Parquet file's record batches, every column cast to text."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    with pq.ParquetFile(source) as pf:
        for batch in pf.iter_batches(batch_size=batch_size):
            cols = []
            for col in batch.columns:
                if pa.types.is_dictionary(col.type):
                    col = col.dictionary_decode()
                cols.append(col.cast(pa.string()))
            yield pa.RecordBatch.from_arrays(cols, names=batch.schema.names)


def draft_schema(
    source: Any,
    fmt: str,
    *,
    batch_size: int = 65536,
    max_categories: int = 1000,
    delimiter: str = ",",
) -> tuple[dict[str, Any], list[str]]:
    """A schema's dict form drafted from ``source`` (``fmt``: ``"csv"``, ``"jsonl"`` or
    ``"parquet"``), and notes on the columns left out. **Not private** (see :data:`WARNING`):
    the dict carries the ``"draft"`` marker, which a schema refuses until a person deletes it."""
    _pyarrow("a file to draft a schema from")
    if fmt == "csv":
        batches = _csv_batches(source, batch_size, delimiter)
    elif fmt == "jsonl":
        batches = _json_batches(source, batch_size)
    elif fmt == "parquet":
        batches = _parquet_batches(source, batch_size)
    else:
        raise InputError(f"a schema is drafted from CSV, JSON lines or Parquet, not {fmt}")
    guesses: dict[str, _Guess] = {}
    for batch in batches:
        for name, col in zip(batch.schema.names, batch.columns, strict=True):
            guesses.setdefault(name, _Guess(max_categories)).add(col)
    columns, notes = [], []
    for name, guess in guesses.items():
        entry, note = guess.entry(name)
        if entry is not None:
            columns.append(entry)
        if note is not None:
            notes.append(note)
    if not columns:
        raise InputError("no column to draft a schema from (the file has no values)")
    return {"draft": DRAFT_MARKER, "columns": columns}, notes
