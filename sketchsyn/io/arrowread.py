"""Parquet files and Arrow IPC files or streams as ``float64`` batches (pyarrow, the ``cli`` extra).

- :class:`ParquetReader`: ``pyarrow.parquet.ParquetFile.iter_batches``, a record batch at a time,
  only the named columns decoded; resuming skips whole row groups without reading them.
- :class:`ArrowReader`: the Arrow IPC file format (``.arrow``, ``.feather`` v2) or stream format
  (``.arrows``, and stdin: ``"-"``), a record batch at a time.

Both take the keyword arguments of the text readers (``batch_size``, ``on_bad``, ``skip_rows``,
``resume``) and give the same attributes (``n_rows``, ``n_bad``, ``bad_lines``, ``lines``,
``position``, ``name``). "Lines" are 1-based row numbers of the table. A row with a null or a
value that is not a finite number is bad. Integer and decimal columns are read as ``float64``; a
column of another type (strings, dates) is refused by name.

>>> import os, tempfile
>>> import pyarrow as pa, pyarrow.parquet as pq
>>> path = os.path.join(tempfile.mkdtemp(), "t.parquet")
>>> pq.write_table(pa.table({"x": [1.0, 2.0, None], "y": [3, 4, 5], "s": ["a", "b", "c"]}), path)
>>> reader = ParquetReader(path, ["y", "x"], on_bad="skip")
>>> [b.tolist() for b in reader], reader.bad_lines, reader.position.rows
([[[3.0, 1.0], [4.0, 2.0]]], [3], 3)
"""

from __future__ import annotations

import abc
import hashlib
import os
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ..errors import InputError
from .batchreader import (
    NumberedBatches,
    Position,
    check_columns,
    check_options,
    read_ahead,
    record_bad,
)
from .csvarrow import float64_values

__all__ = ["ArrowReader", "ParquetReader", "columnar_format"]


def columnar_format(path: Any) -> str | None:
    """``"parquet"`` or ``"arrow"`` from a file's first bytes, None for anything else.

    >>> columnar_format(os.devnull) is None
    True
    """
    try:
        with open(os.fspath(path), "rb") as fh:
            head = fh.read(6)
    except OSError:
        return None
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.startswith(b"ARROW1") or head.startswith(b"\xff\xff\xff\xff"):
        return "arrow"
    return None


def _pyarrow(what: str) -> Any:
    try:
        import pyarrow
    except ImportError:
        raise InputError(
            f"reading {what} needs pyarrow: pip install 'sketchsyn[cli]' (or pyarrow)"
        ) from None
    return pyarrow


# A batch's row numbers: an array, or (first, count) when they are consecutive.
Numbers = tuple[int, int] | np.ndarray


class _ColumnarReader(NumberedBatches, abc.ABC):
    """The common part: the constructor, column checks, conversion, skipping, bad rows,
    positions. A reader opens its ``source`` in :meth:`_open`."""

    kind = "table"
    _THREADS = False  # the default of ``threads``

    def __init__(
        self,
        source: Any,
        columns: Sequence[str],
        *,
        batch_size: int = 65536,
        on_bad: str = "raise",
        skip_rows: int = 0,
        resume: Position | None = None,
        threads: bool | None = None,
    ) -> None:
        check_options(self, batch_size, on_bad, skip_rows)
        self.columns = check_columns([] if columns is None else columns, type(self).__name__)
        self.resume = Position(*resume) if resume is not None else None
        self.n_rows = 0
        self.n_bad = 0
        self.bad_lines: list[int] = []
        # the last batch's row numbers: an array, or (first, count) of consecutive ones
        self._lines_of_batch: tuple[int, int] | np.ndarray = np.zeros(0, dtype=np.int64)
        self.position: Position | None = None
        self.header_lines = 0
        self.line = 0
        self.fingerprint = ""  # digest of the schema and size: identifies the input
        self._total = 0  # rows met by _batches, skipped ones included
        self._threads = self._THREADS if threads is None else bool(threads)
        self._check_schema(self._open(source))

    @property
    def threads(self) -> bool:
        """True when the batches are decoded on a reader thread ahead of the caller."""
        return self._threads

    @abc.abstractmethod
    def _open(self, source: Any) -> Any:
        """Open ``source`` (setting ``name``) and return its schema."""

    def _check_schema(self, schema: Any) -> None:
        pa = _pyarrow(self.kind)
        names = list(schema.names)
        missing = [c for c in self.columns if c not in names]
        if missing:
            raise InputError(
                f"{self.name}: column {missing[0]!r} is not in the {self.kind}; the columns "
                f"are {names}"
            )
        for c in self.columns:
            self._check_type(c, schema.field(c).type, pa)
        text = f"{schema}|{self._identity()}"
        self.fingerprint = hashlib.blake2b(text.encode(), digest_size=16).hexdigest()

    def _check_type(self, name: str, t: Any, pa: Any) -> None:
        """Refuse a column whose Arrow type ``t`` holds no numbers (the typed table readers
        of :mod:`sketchsyn.io.tables_reader` check their columns' kinds instead)."""
        if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)):
            raise InputError(
                f"{self.name}: column {name!r} has type {t}, not a number (integer, float or "
                "decimal)"
            )

    def _identity(self) -> str:
        return ""

    def _start(self) -> int:
        """Rows to pass over first (a resume position, checked, plus ``skip_rows``)."""
        start = self.skip_rows
        if self.resume is not None:
            if self.resume.digest != self.fingerprint:
                raise InputError(
                    f"{self.name} is not the input the state was saved from (its schema or "
                    "size differs)"
                )
            start += self.resume.rows
        return start

    def _convert(self, batch: Any, first_row: int) -> tuple[np.ndarray, Numbers, list]:
        """``(rows, their numbers, bad rows)`` of a record batch: the columns as float64 rows;
        rows with a null or non-finite value are left out and listed as ``(number, why)``."""
        from pyarrow.types import is_float64

        m = batch.num_rows
        # Column-major rows: each column is one contiguous copy (the rows are the same numbers
        # as in row-major order; consumers index them as (rows, columns) either way).
        arr = np.empty((len(self.columns), m), dtype=np.float64).T
        for j, c in enumerate(self.columns):
            col = batch.column(batch.schema.get_field_index(c))
            if not is_float64(col.type):  # (a cast imports pyarrow.compute: 40 ms)
                col = col.cast("float64")
            if col.null_count:
                col = col.fill_null(float("nan"))
            arr[:, j] = float64_values(col)
        # One flat sum is the fast check: NaN and inf survive it (an overflow to inf only sends
        # the batch to the exact check, row by row). The rows' numbers are then consecutive:
        # (first, count), made an array only if asked for (``lines``).
        if m == 0 or np.isfinite(np.add.reduce(arr, axis=None)):
            return arr, (first_row, m), []
        numbers = np.arange(first_row, first_row + m, dtype=np.int64)
        ok = np.isfinite(arr).all(axis=1)
        bad: list[tuple[int, str]] = []
        if not ok.all():
            for i in np.flatnonzero(~ok).tolist():  # O(1) per bad row
                j = int(np.flatnonzero(~np.isfinite(arr[i]))[0])
                bad.append((int(numbers[i]), f"column {self.columns[j]!r} is null or not finite"))
            arr, numbers = arr[ok], numbers[ok]
        return arr, numbers, bad

    def _bad(self, row: int, why: str) -> None:
        record_bad(self, "row", row, why)

    @abc.abstractmethod
    def _batches(self, start: int) -> Iterator[tuple[Any, int]]:
        """(record batch, number of its first row, 0-based) from row ``start`` on (at most)."""

    def _pieces(self, start: int) -> Iterator[tuple[np.ndarray, Numbers, list, int]]:
        """``(rows, numbers, bad rows, rows consumed)`` of each batch from row ``start`` on."""
        consumed = None
        for batch, row0 in self._batches(start):
            if row0 < start:  # the first batch begins before the rows to pass over
                batch = batch.slice(start - row0)
                row0 = start
            if consumed is None and row0 > start:
                raise InputError(f"{self.name}: rows missing before row {row0}")
            for s in range(0, batch.num_rows, self.batch_size):
                piece = batch.slice(s, self.batch_size)
                arr, numbers, bad = self._convert(piece, row0 + s + 1)
                consumed = row0 + s + piece.num_rows
                yield arr, numbers, bad, consumed

    def _ahead(self, start: int) -> Iterator[tuple[np.ndarray, Numbers, list, int]]:
        """:meth:`_pieces`, decoded on a reader thread one batch ahead of the caller when
        ``threads`` is on (pyarrow releases the GIL while it decodes and converts)."""
        if not self._threads:
            yield from self._pieces(start)
            return
        yield from read_ahead(self._pieces(start), 1)

    def __iter__(self) -> Iterator[np.ndarray]:
        try:
            start = self._start()
            consumed = None
            for arr, numbers, bad, consumed in self._ahead(start):
                for row, why in bad:
                    self._bad(row, why)
                self._lines_of_batch = numbers
                self.line = consumed
                self.position = Position(consumed, -1, self.fingerprint)
                if arr.shape[0]:
                    self.n_rows += arr.shape[0]
                    yield arr
            if consumed is None:
                if self._total < start:
                    raise InputError(
                        f"{self.name} has {self._total:,} rows, fewer than the {start:,} to "
                        "pass over"
                    )
                self.position = Position(start, -1, self.fingerprint)
        finally:
            self.close()

    @abc.abstractmethod
    def close(self) -> None:
        """Close the file (not stdin)."""

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ParquetReader(_ColumnarReader):
    """Numeric ``columns`` of a Parquet file, a record batch at a time (``iter_batches``).

    Parameters
    ----------
    source : path or seekable binary file object
        Parquet keeps its index at the end of the file, so it cannot come from a pipe.
    columns : sequence of str
        Column names, in the order wanted; only these are decoded.
    batch_size, on_bad, skip_rows, resume
        As for :class:`~sketchsyn.io.readers.CSVReader` (rows of the table).
    threads : bool, optional
        Decode on a reader thread one batch ahead of the caller (default: on). pyarrow's own
        decoding threads are not used: on two columns of 10**8 rows they cost more CPU than they
        saved wall time beside the reader thread. The batches, their order and every attribute
        are the same either way.
    """

    kind = "Parquet file"
    _THREADS = True

    def _open(self, source: Any) -> Any:
        _pyarrow(self.kind)
        import pyarrow.parquet as pq

        if isinstance(source, (str, os.PathLike)) and os.fspath(source) == "-":
            raise InputError(
                "Parquet cannot be read from stdin (its index is at the end of the file): give "
                "the file, or pipe Arrow IPC with --format arrow"
            )
        self.name = os.fspath(source) if isinstance(source, (str, os.PathLike)) else "<stream>"
        try:
            # No pre-buffering: it would hold every row group's pages in memory at once.
            self._file = pq.ParquetFile(source, pre_buffer=False)
        except OSError as exc:
            raise InputError(f"cannot open {self.name!r}: {exc}") from None
        except Exception as exc:  # pyarrow's own errors for a file that is not Parquet
            raise InputError(f"{self.name} is not a Parquet file: {exc}") from None
        return self._file.schema_arrow

    def _identity(self) -> str:
        meta = self._file.metadata
        return f"{meta.num_rows}:{meta.num_row_groups}"

    @property
    def rows_in_file(self) -> int:
        """The number of rows the file holds (its metadata's count; bad rows included)."""
        return int(self._file.metadata.num_rows)

    def _batches(self, start: int) -> Iterator[tuple[Any, int]]:
        meta = self._file.metadata
        row0, group = 0, 0
        while group < meta.num_row_groups and row0 + meta.row_group(group).num_rows <= start:
            row0 += meta.row_group(group).num_rows
            group += 1
        self._total = row0
        if group >= meta.num_row_groups:
            return
        for batch in self._file.iter_batches(
            batch_size=self.batch_size,
            row_groups=range(group, meta.num_row_groups),
            columns=self.columns,
            use_threads=False,  # the read-ahead thread overlaps (see ``threads``)
        ):
            yield batch, row0
            row0 += batch.num_rows
            self._total = row0

    def close(self) -> None:
        """Close the file."""
        self._file.close()


class ArrowReader(_ColumnarReader):
    """Numeric ``columns`` of an Arrow IPC file or stream, a record batch at a time.

    ``source``: a path (the file or the stream format, told apart by their first bytes), ``"-"``
    (a stream on stdin) or a binary file object holding a stream. Other parameters as for
    :class:`ParquetReader` (``threads``: a reader thread one batch ahead, default off: the
    batches of a memory-mapped file cost little to convert).

    >>> import io, pyarrow as pa
    >>> sink = io.BytesIO()
    >>> with pa.ipc.new_stream(sink, pa.schema([("v", pa.int64())])) as w:
    ...     w.write_batch(pa.record_batch([pa.array([1, 2, 3])], names=["v"]))
    >>> [b.ravel().tolist() for b in ArrowReader(io.BytesIO(sink.getvalue()), ["v"], skip_rows=1)]
    [[2.0, 3.0]]
    """

    kind = "Arrow IPC input"

    def _open(self, source: Any) -> Any:
        pa = _pyarrow(self.kind)
        import pyarrow.ipc as ipc

        self._owned: Any = None
        try:
            if isinstance(source, (str, os.PathLike)) and os.fspath(source) != "-":
                self.name = os.fspath(source)
                self._owned = pa.memory_map(self.name, "r")
                if self._owned.read(6) == b"ARROW1":
                    self._owned.seek(0)
                    self._file: Any = ipc.open_file(self._owned)
                    self._stream = None
                else:
                    self._owned.seek(0)
                    self._file, self._stream = None, ipc.open_stream(self._owned)
            else:
                import sys

                stdin = isinstance(source, (str, os.PathLike))
                raw = sys.stdin.buffer if stdin else source
                self.name = "<stdin>" if raw is sys.stdin.buffer else "<stream>"
                self._file, self._stream = None, ipc.open_stream(raw)
        except (OSError, pa.ArrowInvalid) as exc:
            if self._owned is not None:
                self._owned.close()
            shown = getattr(self, "name", source)
            raise InputError(f"cannot read {shown!r} as Arrow IPC: {exc}") from None
        return self._file.schema if self._file is not None else self._stream.schema

    def _identity(self) -> str:
        return "" if self._file is None else str(self._file.num_record_batches)

    def _batches(self, start: int) -> Iterator[tuple[Any, int]]:
        row0 = 0
        if self._file is not None:
            for i in range(self._file.num_record_batches):
                batch = self._file.get_batch(i)
                if row0 + batch.num_rows > start:
                    yield batch, row0
                row0 += batch.num_rows
                self._total = row0
            return
        for batch in self._stream:
            if row0 + batch.num_rows > start:
                yield batch, row0
            row0 += batch.num_rows
            self._total = row0

    def close(self) -> None:
        """Close the file (not stdin)."""
        if self._owned is not None:
            self._owned.close()
