"""Lazy readers that turn files, stdin and growing logs into numpy batches (bounded memory).

Every reader iterates over ``float64`` arrays of shape ``(rows, len(columns))`` (IPv4 keys for
:class:`AccessLogReader`: ``uint64`` of shape ``(rows,)``), at most ``batch_size`` rows each,
holding about one batch at a time whatever the length of the input.

- :class:`CSVReader`: a header line naming the columns, then one record per line (a record
  spanning lines inside quotes is not supported). With pyarrow installed (the ``cli`` extra)
  each block of lines is parsed by ``pyarrow.csv.open_csv`` and its text is looked at only where
  its pattern breaks (:mod:`sketchsyn.io.csvarrow`); without it, blocks are checked with numpy
  and parsed by pandas' C parser or ``numpy.loadtxt``. ``delimiter`` for TSV and others.
- :class:`JSONLinesReader`: one JSON object per line; the columns are keys.
- :class:`AccessLogReader`: web-server access logs → IPv4 keys for ``BitDomain.ipv4()``
  (:mod:`sketchsyn.io.logread`; IPv6 clients skipped and counted).
- :class:`ParquetReader`, :class:`ArrowReader`: Parquet files and Arrow IPC files or streams,
  read a row group / record batch at a time, columns selected by name
  (:mod:`sketchsyn.io.arrowread`).
- :func:`pandas_chunks`: ``pandas.read_csv(chunksize=…)`` for any CSV dialect pandas reads.
- :func:`follow`: the lines of a growing file (``tail -f``), until a stop condition.

Sources: a path, ``"-"`` for stdin, a binary file object (gzip and zstd recognised by their
first bytes: :mod:`sketchsyn.io.compress`), or an iterable of lines (``str`` or ``bytes``, e.g.
:func:`follow`). Blank lines are not records and are passed over. A bad line (wrong number of
fields, a value that is not a finite number, bad JSON, a missing key, a malformed address) is
refused with its line number by default (``on_bad="raise"``:
:class:`~sketchsyn.errors.InputError`), or counted in ``n_bad`` and skipped with
``on_bad="skip"`` (the first line numbers are kept in ``bad_lines``); never silently dropped.
Each reader records how far it has read (``position``) so that a run can resume after exactly
those rows (:mod:`sketchsyn.io.batchreader`).

>>> import io
>>> data = io.BytesIO(b"lon,lat,id\\n0.5,0.25,a\\n\\n1.0,0.75,b\\n")
>>> reader = CSVReader(data, ["lat", "lon"], batch_size=10)
>>> [batch.tolist() for batch in reader]
[[[0.25, 0.5], [0.75, 1.0]]]
>>> reader.n_rows, reader.lines.tolist()
(2, [2, 4])
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from ..errors import InputError, ParameterError, check_choice, check_int
from . import csvarrow
from .arrowread import ArrowReader, ParquetReader, columnar_format
from .batchreader import BatchReader, Position
from .logread import AccessLogReader

__all__ = [
    "AccessLogReader",
    "ArrowReader",
    "CSVReader",
    "JSONLinesReader",
    "BatchReader",
    "ParquetReader",
    "Position",
    "follow",
    "format_of",
    "open_reader",
    "pandas_chunks",
]

_PANDAS_MIN_BYTES = 1 << 20
_FORMATS = ("csv", "jsonl", "accesslog", "parquet", "arrow")


def format_of(path: str) -> str | None:
    """The format a file name implies (``.gz`` / ``.zst`` stripped), or None when it says nothing.

    >>> format_of("rides.csv.gz"), format_of("ev.jsonl"), format_of("access.log"), format_of("-")
    ('csv', 'jsonl', 'accesslog', None)
    >>> format_of("trips.parquet"), format_of("trips.arrow"), format_of("x.log.zst")
    ('parquet', 'arrow', 'accesslog')
    """
    name = os.fspath(path).lower()
    for suffix in (".gz", ".zst", ".zstd"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    for ext, fmt in (
        (".csv", "csv"),
        (".tsv", "csv"),
        (".jsonl", "jsonl"),
        (".ndjson", "jsonl"),
        (".json", "jsonl"),
        (".log", "accesslog"),
        (".parquet", "parquet"),
        (".pq", "parquet"),
        (".arrow", "arrow"),
        (".arrows", "arrow"),
        (".feather", "arrow"),
        (".ipc", "arrow"),
    ):
        if name.endswith(ext):
            return fmt
    return None


def _float_or_none(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


class CSVReader(BatchReader):
    """Numeric ``columns`` of a CSV with a header line, as ``float64`` batches.

    Parameters
    ----------
    source : path, ``"-"``, binary file object or iterable of lines
        gzip and zstd are recognised by their first bytes.
    columns : sequence of str
        Header names of the columns to read, in the order wanted.
    batch_size : int
        Lines per batch (the memory bound).
    on_bad : {"raise", "skip"}
    delimiter : str
        One character; ``","`` (default) or ``"\\t"`` for TSV.
    skip_rows : int
        Data lines (after the header) to pass over first, e.g. those a crashed run counted.
    resume : Position, optional
        Continue after a position saved by an earlier run on the same input (checked).
    threads : bool, optional
        Parse on a reader thread, one block ahead (default: for files and pipes).
    engine : {"auto", "pyarrow", "numpy"}
        ``"auto"``: pyarrow when it is installed.

    Examples
    --------
    >>> import io
    >>> reader = CSVReader(io.BytesIO(b"x,y\\n1,2\\n3,oops\\n5,6\\n"), ["x", "y"], on_bad="skip")
    >>> [b.tolist() for b in reader], reader.n_bad, reader.bad_lines
    ([[[1.0, 2.0], [5.0, 6.0]]], 1, [3])
    """

    def __init__(
        self,
        source: Any,
        columns: Sequence[str],
        *,
        batch_size: int = 65536,
        on_bad: str = "raise",
        delimiter: str = ",",
        skip_rows: int = 0,
        resume: Position | None = None,
        threads: bool | None = None,
        engine: str = "auto",
    ) -> None:
        super().__init__(
            source,
            columns,
            batch_size=batch_size,
            on_bad=on_bad,
            skip_rows=skip_rows,
            resume=resume,
            threads=threads,
        )
        engine = check_choice(engine, "engine", "CSVReader", ("auto", "pyarrow", "numpy"))
        if not isinstance(delimiter, str) or len(delimiter) != 1 or delimiter in '"\r\n':
            self.close()
            raise ParameterError(
                f"The 'delimiter' parameter of CSVReader must be one character other than a "
                f"quote or a newline. Got {delimiter!r} instead."
            )
        if engine == "pyarrow" and not csvarrow.available():
            self.close()
            raise ParameterError("CSVReader(engine='pyarrow') needs pyarrow (pip install pyarrow)")
        self._arrow = engine != "numpy" and csvarrow.available()
        self.delimiter = delimiter
        self._delim_byte = ord(delimiter)
        header = None
        while True:
            line = self._read_line()
            if line is None:
                break
            self.line += 1
            if line.strip():
                header = line
                break
        if header is None:
            self.close()
            raise InputError(f"{self.name} is empty: a CSV needs a header line naming columns")
        self.header_lines = self.line
        self.header = next(
            csv.reader([header.decode("utf-8-sig").rstrip("\r\n")], delimiter=delimiter)
        )
        self.header = [h.strip() for h in self.header]
        missing = [c for c in self.columns or [] if c not in self.header]
        if missing:
            self.close()
            hint = ""
            if len(self.header) == 1 and delimiter == ",":
                hint = " (one column read: is the delimiter another character? --delimiter)"
            raise InputError(
                f"{self.name}: column {missing[0]!r} is not in the header (line {self.line}); "
                f"the columns are {self.header}{hint}"
            )
        twice = [c for c in self.columns or [] if self.header.count(c) > 1]
        if twice:
            self.close()
            where = [i + 1 for i, h in enumerate(self.header) if h == twice[0]]
            raise InputError(
                f"{self.name} line {self.line}: the header names column {twice[0]!r} "
                f"{len(where)} times (fields {', '.join(map(str, where))}): which one to read "
                "is ambiguous; rename the others"
            )
        self._idx = [self.header.index(c) for c in self.columns or []]
        self._ncols = len(self.header)

    _views = True  # pyarrow reads the block in place; the numpy engine copies it to bytes

    def _parse(self, buf: Any, first: int, count: int | None) -> tuple[np.ndarray, Any, int]:
        if self._arrow:
            return csvarrow.parse_block(
                buf,
                first,
                self._ncols,
                self._idx,
                self.delimiter,
                self._slow,
                compiled=self._compiled,
            )
        buf = bytes(buf)
        fast = self._fast(buf, first)
        if fast is not None:
            n_lines = count if count is not None else buf.count(b"\n")
            return fast[0], fast[1], n_lines
        lines = buf.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        rows, numbers = self._slow(lines, first)
        return rows, numbers, len(lines)

    def _fast(self, buf: bytes, first: int) -> tuple[np.ndarray, np.ndarray] | None:
        """All lines well formed and numeric: parse the block at once; otherwise None."""
        if not buf.endswith(b"\n"):
            buf += b"\n"
        if b'"' in buf:  # quotes: leave them to the csv module
            return None
        raw = np.frombuffer(buf, dtype=np.uint8)
        if buf.startswith((b"\n", b"\r\n")) or b"\n\n" in buf or b"\n\r\n" in buf:
            numbers = self._numbers_around_blanks(raw, first)
            if numbers is None:
                return None
        else:
            # No blank line: the delimiters and newlines must alternate as d, d, …, d, newline.
            seps = raw[np.flatnonzero((raw == self._delim_byte) | (raw == 10))]
            if seps.size % self._ncols:
                return None
            kinds = seps.reshape(-1, self._ncols)
            if not ((kinds[:, -1] == 10).all() and (kinds[:, :-1] == self._delim_byte).all()):
                return None
            numbers = first + np.arange(kinds.shape[0], dtype=np.int64)
        if numbers.size == 0:
            return np.zeros((0, len(self._idx))), numbers
        try:
            rows = _parse_block(buf, self._idx, self._ncols, self.delimiter)
        except (ValueError, TypeError, IndexError):
            return None
        if rows.shape != (numbers.size, len(self._idx)) or not np.isfinite(rows).all():
            return None
        return rows, numbers

    def _numbers_around_blanks(self, raw: np.ndarray, first: int) -> np.ndarray | None:
        """Line numbers of the non-blank lines if each has the header's field count, else None."""
        ends = np.flatnonzero(raw == 10)
        delims = np.searchsorted(np.flatnonzero(raw == self._delim_byte), ends)
        per_line = np.diff(delims, prepend=0)
        starts = np.concatenate(([0], ends[:-1] + 1))
        length = ends - starts
        blank = (length == 0) | ((length == 1) & (raw[np.maximum(ends - 1, 0)] == 13))
        if bool((per_line[blank] != 0).any()):
            return None
        if bool((per_line[~blank] != self._ncols - 1).any()):
            return None
        return first + np.flatnonzero(~blank)

    def _slow(self, lines: list[bytes], first: int) -> tuple[np.ndarray, np.ndarray]:
        """Line by line with the csv module: names (or counts) every bad line."""
        rows: list[list[float]] = []
        numbers: list[int] = []
        for offset, line in enumerate(lines):
            lineno = first + offset
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError:
                self._bad(lineno, "is not UTF-8 text")
                continue
            if not text.strip():
                continue
            text = text.rstrip("\r\n")
            if '"' not in text and "\r" not in text:  # as csv does, without its size limit
                fields = text.split(self.delimiter)
            else:
                try:
                    fields = next(csv.reader([text], delimiter=self.delimiter), [])
                except csv.Error as exc:
                    self._bad(lineno, f"cannot be split into fields ({exc})")
                    continue
            if len(fields) != self._ncols:
                self._bad(lineno, f"has {len(fields)} fields, the header has {self._ncols}")
                continue
            values = [_float_or_none(fields[i]) for i in self._idx]
            if None in values:
                j = values.index(None)
                self._bad(
                    lineno,
                    f"column {self.columns[j]!r} = {fields[self._idx[j]]!r} is not a finite number",
                )
                continue
            rows.append(values)  # type: ignore[arg-type]
            numbers.append(lineno)
        arr = np.array(rows, dtype=np.float64).reshape(-1, len(self._idx))
        return arr, np.array(numbers, dtype=np.int64)


def _parse_block(buf: bytes, idx: list[int], ncols: int, delimiter: str) -> np.ndarray:
    """Selected columns of well-formed numeric CSV lines (pandas' C parser, else numpy).

    Small blocks go to ``numpy.loadtxt`` (also C) so that short inputs do not pay pandas' import.
    """
    try:
        if len(buf) < _PANDAS_MIN_BYTES:
            raise ImportError
        import pandas as pd
    except ImportError:
        return np.loadtxt(
            io.BytesIO(buf), delimiter=delimiter, usecols=idx, dtype=np.float64, ndmin=2
        )
    frame = pd.read_csv(
        io.BytesIO(buf),
        header=None,
        names=list(range(ncols)),
        usecols=idx,
        dtype=np.float64,
        sep=delimiter,
        engine="c",
        skip_blank_lines=True,
        na_filter=True,
    )
    return frame[idx].to_numpy(dtype=np.float64)


class JSONLinesReader(BatchReader):
    """Numeric ``columns`` (keys) of a JSON-lines source, one object per line.

    Takes the keyword arguments of :class:`CSVReader` but ``delimiter`` and ``engine``.

    Examples
    --------
    >>> reader = JSONLinesReader(['{"a": 1, "b": 2.5}', '{"b": 4, "a": 3}'], ["a", "b"])
    >>> [b.tolist() for b in reader]
    [[[1.0, 2.5], [3.0, 4.0]]]
    """

    def __init__(self, source: Any, columns: Sequence[str], **kwargs: Any) -> None:
        super().__init__(source, columns, **kwargs)
        if self.columns is None:
            self.close()
            raise ParameterError("JSONLinesReader needs 'columns' (the keys to read).")

    def _parse(self, buf: bytes, first: int, count: int | None) -> tuple[np.ndarray, Any, int]:
        lines = buf.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        columns = self.columns or []
        rows: list[list[float]] = []
        numbers: list[int] = []
        for offset, line in enumerate(lines):
            lineno = first + offset
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except (ValueError, UnicodeDecodeError) as exc:
                self._bad(lineno, f"is not valid JSON ({exc})")
                continue
            if not isinstance(obj, dict):
                self._bad(lineno, f"is not a JSON object (got {type(obj).__name__})")
                continue
            values = []
            for c in columns:
                v = obj.get(c)
                if c not in obj:
                    self._bad(lineno, f"has no key {c!r}")
                    break
                if (
                    isinstance(v, bool)
                    or not isinstance(v, (int, float))
                    or not math.isfinite(float(v))
                ):
                    self._bad(lineno, f"key {c!r} = {v!r} is not a finite number")
                    break
                values.append(float(v))
            else:
                rows.append(values)
                numbers.append(lineno)
        arr = np.array(rows, dtype=np.float64).reshape(-1, len(columns))
        return arr, np.array(numbers, dtype=np.int64), len(lines)


def open_reader(
    source: Any,
    columns: Sequence[str] | None = None,
    fmt: str | None = None,
    **kwargs: Any,
) -> Any:
    """The reader for ``source``: ``fmt`` if given, else by extension (``.gz`` / ``.zst``
    stripped) or, for a file, by its first bytes (Parquet, Arrow).

    ``"-"`` (stdin) and other sources without a telling name default to CSV (gzip and zstd are
    recognised whatever the format); a ``.tsv`` name sets ``delimiter="\\t"`` unless one is
    given. Keyword arguments go to the reader (``batch_size``, ``on_bad``, ``delimiter``,
    ``skip_rows``, ``resume``, ``threads``).

    >>> import io
    >>> [b.tolist() for b in open_reader(io.BytesIO(b"v\\n3\\n"), ["v"], fmt="csv")]
    [[[3.0]]]
    """
    named = isinstance(source, (str, os.PathLike)) and os.fspath(source) != "-"
    if fmt is None:
        fmt = format_of(source) if named else None
        if fmt is None and named:
            fmt = columnar_format(source)
        fmt = fmt or "csv"
    fmt = check_choice(fmt, "fmt", "open_reader", _FORMATS)
    delimiter = kwargs.pop("delimiter", None)
    if fmt == "accesslog":
        return AccessLogReader(source, **kwargs)
    if columns is None:
        raise ParameterError(f"open_reader needs 'columns' for format {fmt!r}.")
    if fmt == "parquet":
        return ParquetReader(source, columns, **kwargs)
    if fmt == "arrow":
        return ArrowReader(source, columns, **kwargs)
    if fmt == "jsonl":
        return JSONLinesReader(source, columns, **kwargs)
    if delimiter is None:
        tsv = named and os.fspath(source).lower().split(".gz")[0].endswith(".tsv")
        delimiter = "\t" if tsv else ","
    return CSVReader(source, columns, delimiter=delimiter, **kwargs)


def pandas_chunks(
    source: Any,
    columns: Sequence[str],
    *,
    batch_size: int = 65536,
    on_bad: str = "raise",
    stats: dict | None = None,
    **read_csv_kwargs: Any,
) -> Iterator[np.ndarray]:
    """``pandas.read_csv(source, chunksize=batch_size, usecols=columns)`` as ``float64`` batches.

    For CSV dialects :class:`CSVReader` does not read (multi-line quoted fields, comments,
    other encodings: pass pandas' own keyword arguments). Lines with the wrong number of fields
    are refused by pandas with its line number; a value that is not a finite number is refused
    as ``data row i`` (1-based, header and blank lines not counted). With ``on_bad="skip"``
    both kinds are skipped; the rows with bad values are counted in ``stats["n_bad"]`` (pass a
    dict), lines with a wrong field count are skipped by pandas without a count.

    >>> import io
    >>> [b.tolist() for b in pandas_chunks(io.StringIO("a,b\\n1,2\\n3,4\\n"), ["b"])]
    [[[2.0], [4.0]]]
    """
    import pandas as pd

    on_bad = check_choice(on_bad, "on_bad", "pandas_chunks", ("raise", "skip"))
    batch_size = check_int(batch_size, "batch_size", "pandas_chunks", minimum=1)
    stats = {} if stats is None else stats
    stats.setdefault("n_bad", 0)
    columns = list(columns)
    try:
        chunks = pd.read_csv(
            source,
            usecols=columns,
            chunksize=batch_size,
            on_bad_lines="skip" if on_bad == "skip" else "error",
            **read_csv_kwargs,
        )
        seen = 0
        for chunk in chunks:
            frame = chunk[columns].apply(pd.to_numeric, errors="coerce")
            values = frame.to_numpy(dtype=np.float64)
            ok = np.isfinite(values).all(axis=1)
            if not ok.all():
                if on_bad == "raise":
                    i = int(np.flatnonzero(~ok)[0])
                    raise InputError(
                        f"data row {seen + i + 1}: {chunk.iloc[i][columns].tolist()} is not all "
                        "finite numbers"
                    )
                stats["n_bad"] += int((~ok).sum())
                values = values[ok]
            seen += len(chunk)
            yield values
    except pd.errors.ParserError as exc:
        raise InputError(f"pandas could not parse the CSV: {exc}") from None
    except ValueError as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(f"pandas could not read the CSV: {exc}") from None


def follow(
    path: str | os.PathLike,
    *,
    stop: Callable[[], bool] | None = None,
    poll_interval: float = 0.2,
    idle_timeout: float | None = None,
    from_start: bool = True,
) -> Iterator[bytes | None]:
    """Lines of a growing file as they are appended (``tail -f``), until a stop condition.

    Yields each complete line (``bytes``, with its newline) and ``None`` whenever it has caught
    up with the end of the file, so that a reader flushes its partial batch instead of waiting
    for a full one (the readers above accept these ``None`` markers). A line still being written
    (no newline yet) is held back until it is complete. A file truncated in place
    (``copytruncate`` rotation) is read again from its start.

    Parameters
    ----------
    path : str or path-like
        The file to follow.
    stop : callable, optional
        Checked each time the follower has caught up; ``True`` ends the iteration.
    poll_interval : float
        Seconds to sleep between looks at a file that has not grown.
    idle_timeout : float, optional
        End after this many seconds without a new line.
    from_start : bool
        Start at the beginning of the file (default) or at its current end.

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "access.log")
    >>> with open(path, "w") as fh:
    ...     _ = fh.write("10.0.0.1 - - x\\n10.0.0.2 - - x\\n")
    >>> reader = AccessLogReader(follow(path, idle_timeout=0.0, poll_interval=0.01))
    >>> [b.tolist() for b in reader]
    [[167772161, 167772162]]
    """
    if poll_interval < 0:
        raise ParameterError(
            f"The 'poll_interval' parameter of follow must be >= 0. Got {poll_interval!r} instead."
        )
    with open(path, "rb") as fh:
        if not from_start:
            fh.seek(0, os.SEEK_END)
        partial = b""
        last_line = time.monotonic()
        while True:
            line = fh.readline()
            if line:
                if line.endswith(b"\n"):
                    yield partial + line
                    partial = b""
                    last_line = time.monotonic()
                else:
                    partial += line
                continue
            yield None
            if stop is not None and stop():
                break
            if idle_timeout is not None and time.monotonic() - last_line >= idle_timeout:
                break
            try:
                if os.stat(path).st_size < fh.tell():
                    fh.seek(0)
                    partial = b""
            except OSError:
                pass
            time.sleep(poll_interval)
        if partial:
            yield partial
