"""Lazy readers that turn files, stdin and growing logs into numpy batches (bounded memory).

Every reader iterates over ``float64`` arrays of shape ``(rows, len(columns))`` (IPv4 keys for
:class:`AccessLogReader`: ``uint64`` of shape ``(rows,)``), at most ``batch_size`` rows each,
holding one batch at a time whatever the length of the input.

- :class:`CSVReader`: a header line naming the columns, then one record per line (a record
  spanning lines inside quotes is not supported). Batches are checked with numpy (field count of
  every line) and parsed by pandas' C parser when pandas is installed (``numpy.loadtxt``
  otherwise); any batch that fails the fast path is re-read line by line to name the bad line.
- :class:`JSONLinesReader`: one JSON object per line; the columns are keys.
- :class:`AccessLogReader`: web-server access logs (Common/Combined Log Format, or any line whose
  first field is the client address) → IPv4 keys for ``BitDomain.ipv4()``.
- :func:`pandas_chunks`: ``pandas.read_csv(chunksize=…)`` for any CSV dialect pandas reads.
- :func:`follow`: the lines of a growing file (``tail -f``), until a stop condition.

Sources: a path (``.gz`` read through gzip), ``"-"`` for stdin, a binary file object, or an
iterable of lines (``str`` or ``bytes``, e.g. :func:`follow`). Blank lines are not records and
are passed over. A bad line (wrong number of fields, a value that is not a finite number, bad
JSON, a missing key, a malformed address) is refused with its line number by default
(``on_bad="raise"``: :class:`~sketchsyn.errors.InputError`), or counted in ``n_bad`` and skipped
with ``on_bad="skip"`` (the first line numbers are kept in ``bad_lines``); never silently dropped.

>>> import io
>>> data = io.BytesIO(b"lon,lat,id\\n0.5,0.25,a\\n\\n1.0,0.75,b\\n")
>>> reader = CSVReader(data, ["lat", "lon"], batch_size=10)
>>> [batch.tolist() for batch in reader]
[[[0.25, 0.5], [0.75, 1.0]]]
>>> reader.n_rows, reader.lines.tolist()
(2, [2, 4])
"""

from __future__ import annotations

import abc
import csv
import gzip
import io
import itertools
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any

import numpy as np

from ..errors import InputError, ParameterError, check_choice, check_int

__all__ = [
    "AccessLogReader",
    "CSVReader",
    "JSONLinesReader",
    "BatchReader",
    "follow",
    "format_of",
    "open_reader",
    "pandas_chunks",
]

_BAD_KEPT = 10
_PANDAS_MIN_BYTES = 1 << 20
_FORMATS = ("csv", "jsonl", "accesslog")


def format_of(path: str) -> str | None:
    """The format a file name implies (``.gz`` stripped), or None when it says nothing.

    >>> format_of("rides.csv.gz"), format_of("ev.jsonl"), format_of("access.log"), format_of("-")
    ('csv', 'jsonl', 'accesslog', None)
    """
    name = os.fspath(path).lower()
    if name.endswith(".gz"):
        name = name[:-3]
    for ext, fmt in (
        (".csv", "csv"),
        (".tsv", "csv"),
        (".jsonl", "jsonl"),
        (".ndjson", "jsonl"),
        (".json", "jsonl"),
        (".log", "accesslog"),
    ):
        if name.endswith(ext):
            return fmt
    return None


def _open_binary(source: Any) -> tuple[Any, Callable[[], None], str]:
    """(iterable of bytes lines, close function, display name) for any accepted source."""
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if path == "-":
            return sys.stdin.buffer, lambda: None, "<stdin>"
        try:
            fh: IO[bytes] = gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")
        except OSError as exc:
            raise InputError(f"cannot open {path!r}: {exc.strerror or exc}") from None
        return fh, fh.close, path
    if hasattr(source, "read"):
        if isinstance(source, io.TextIOBase):
            return (line.encode() for line in source), lambda: None, getattr(source, "name", "")
        return source, lambda: None, str(getattr(source, "name", "<stream>"))
    return (
        (
            (None if line is None else line.encode() if isinstance(line, str) else line)
            for line in source
        ),
        lambda: None,
        "<lines>",
    )


class BatchReader(abc.ABC):
    """Common part of the readers: batching of lines, line numbers, the bad-line policy.

    Attributes
    ----------
    n_rows : int
        Rows yielded so far.
    n_bad : int
        Bad lines skipped so far (``on_bad="skip"``).
    bad_lines : list of int
        Line numbers (1-based) of the first ten bad lines.
    lines : ndarray of int64
        Line number of each row of the last batch (one batch of memory).
    name : str
        The source's name for messages.
    """

    def __init__(
        self,
        source: Any,
        columns: Sequence[str] | None,
        *,
        batch_size: int = 65536,
        on_bad: str = "raise",
    ) -> None:
        owner = type(self).__name__
        self.batch_size = check_int(batch_size, "batch_size", owner, minimum=1)
        self.on_bad = check_choice(on_bad, "on_bad", owner, ("raise", "skip"))
        if columns is not None:
            columns = [columns] if isinstance(columns, str) else list(columns)
            if not columns or not all(isinstance(c, str) and c for c in columns):
                raise ParameterError(
                    f"The 'columns' parameter of {owner} must be non-empty strings. "
                    f"Got {columns!r} instead."
                )
        self.columns = columns
        self._lines, self._close, self.name = _open_binary(source)
        self._it = iter(self._lines)
        self._plain = hasattr(self._lines, "read")
        self.line = 0  # lines consumed so far (the number of the last line read)
        self.n_rows = 0
        self.n_bad = 0
        self.bad_lines: list[int] = []
        self.lines = np.zeros(0, dtype=np.int64)

    # ------------------------------------------------------------------ shared machinery
    def _next_lines(self) -> list[bytes]:
        """Up to ``batch_size`` lines; fewer at the end or at a ``None`` (caught up) marker."""
        if self._plain:  # a file: no None markers, let islice gather the lines in C
            return list(itertools.islice(self._it, self.batch_size))
        out: list[bytes] = []
        for line in self._it:
            if line is None:
                if out:
                    break
                continue
            out.append(line)
            if len(out) >= self.batch_size:
                break
        return out

    def _bad(self, lineno: int, why: str) -> None:
        if self.on_bad == "raise":
            raise InputError(
                f"{self.name} line {lineno}: {why} (pass on_bad='skip' / --on-bad skip to "
                "count and skip bad lines)"
            )
        self.n_bad += 1
        if len(self.bad_lines) < _BAD_KEPT:
            self.bad_lines.append(lineno)

    def _next_chunk(self) -> tuple[Any, int]:
        """The next block of lines in the form ``_parse`` takes, and its number of lines."""
        lines = self._next_lines()
        return lines, len(lines)

    @abc.abstractmethod
    def _parse(self, chunk: Any, first: int) -> tuple[np.ndarray, np.ndarray]:
        """(rows, line numbers) of a block of lines whose first line is line ``first``."""

    def __iter__(self) -> Iterator[np.ndarray]:
        try:
            while True:
                chunk, count = self._next_chunk()
                if not count:
                    return
                first = self.line + 1
                self.line += count
                rows, numbers = self._parse(chunk, first)
                if rows.shape[0] == 0:
                    continue
                self.lines = numbers
                self.n_rows += rows.shape[0]
                yield rows
        finally:
            self.close()

    def close(self) -> None:
        """Close the underlying file (not stdin, not a caller's file object)."""
        self._close()

    def __enter__(self) -> BatchReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
    columns : sequence of str
        Header names of the columns to read, in the order wanted.
    batch_size : int
        Lines per batch (the memory bound).
    on_bad : {"raise", "skip"}
    delimiter : str
        One character; ``","`` (default) or ``"\\t"`` for TSV.

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
    ) -> None:
        super().__init__(source, columns, batch_size=batch_size, on_bad=on_bad)
        if not isinstance(delimiter, str) or len(delimiter) != 1 or delimiter in '"\r\n':
            raise ParameterError(
                f"The 'delimiter' parameter of CSVReader must be one character. "
                f"Got {delimiter!r} instead."
            )
        self.delimiter = delimiter
        self._delim_byte = ord(delimiter)
        header = None
        for line in self._it:
            if line is None:
                continue
            self.line += 1
            if line.strip():
                header = line
                break
        if header is None:
            self.close()
            raise InputError(f"{self.name} is empty: a CSV needs a header line naming columns")
        self.header = next(
            csv.reader([header.decode("utf-8-sig").rstrip("\r\n")], delimiter=delimiter)
        )
        self.header = [h.strip() for h in self.header]
        missing = [c for c in self.columns or [] if c not in self.header]
        if missing:
            self.close()
            raise InputError(
                f"{self.name}: column {missing[0]!r} is not in the header (line {self.line}); "
                f"the columns are {self.header}"
            )
        self._idx = [self.header.index(c) for c in self.columns or []]
        self._ncols = len(self.header)
        self._pending = b""
        self._bytes_per_line = 64.0

    def _next_chunk(self) -> tuple[bytes, int]:
        """Up to ``batch_size`` complete lines as one buffer (files: read in blocks, no line
        objects), and their number."""
        if not self._plain:
            lines = self._next_lines()
            return b"".join(lines), len(lines)
        need = self.batch_size
        buf = self._pending
        have = buf.count(b"\n")
        while have < need:
            want = int((need - have) * self._bytes_per_line * 1.1) + 4096
            piece = self._lines.read(want)
            if not piece:
                break
            have += piece.count(b"\n")
            buf += piece
        if have >= need:
            cut = int(np.flatnonzero(np.frombuffer(buf, dtype=np.uint8) == 10)[need - 1]) + 1
            buf, self._pending = buf[:cut], buf[cut:]
            have = need
        else:  # the end of the input: a last line may lack its newline
            self._pending = b""
            have += 0 if not buf or buf.endswith(b"\n") else 1
        if have:
            self._bytes_per_line = max(len(buf) / have, 1.0)
        return buf, have

    def _parse(self, buf: bytes, first: int) -> tuple[np.ndarray, np.ndarray]:
        fast = self._fast(buf, first)
        if fast is not None:
            return fast
        lines = buf.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        return self._slow(lines, first)

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
            fields = next(csv.reader([text.rstrip("\r\n")], delimiter=self.delimiter), [])
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

    Examples
    --------
    >>> reader = JSONLinesReader(['{"a": 1, "b": 2.5}', '{"b": 4, "a": 3}'], ["a", "b"])
    >>> [b.tolist() for b in reader]
    [[[1.0, 2.5], [3.0, 4.0]]]
    """

    def __init__(
        self,
        source: Any,
        columns: Sequence[str],
        *,
        batch_size: int = 65536,
        on_bad: str = "raise",
    ) -> None:
        super().__init__(source, columns, batch_size=batch_size, on_bad=on_bad)
        if self.columns is None:
            raise ParameterError("JSONLinesReader needs 'columns' (the keys to read).")

    def _parse(self, lines: list[bytes], first: int) -> tuple[np.ndarray, np.ndarray]:
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
        return arr, np.array(numbers, dtype=np.int64)


class AccessLogReader(BatchReader):
    """Client IPv4 addresses of an access log as ``uint64`` keys for ``BitDomain.ipv4()``.

    The address is the first whitespace-separated field of each line (Common and Combined Log
    Format, nginx's default). A line whose first field is not a dotted-quad IPv4 address (an
    IPv6 client, a torn line) is bad.

    Examples
    --------
    >>> log = [
    ...     '10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.0" 200 2326',
    ...     '::1 - - [10/Oct/2000:13:55:37 -0700] "GET / HTTP/1.0" 200 2326',
    ...     '192.168.1.7 - - [10/Oct/2000:13:55:38 -0700] "GET /a HTTP/1.0" 404 0',
    ... ]
    >>> reader = AccessLogReader(log, on_bad="skip")
    >>> [b.tolist() for b in reader], reader.bad_lines
    ([[167772161, 3232235783]], [2])
    """

    def __init__(self, source: Any, *, batch_size: int = 65536, on_bad: str = "raise") -> None:
        super().__init__(source, None, batch_size=batch_size, on_bad=on_bad)

    def _parse(self, lines: list[bytes], first: int) -> tuple[np.ndarray, np.ndarray]:
        from ..domains.ipv4 import _parse_ipv4

        tokens = [line.split(None, 1)[0] if line.strip() else b"" for line in lines]
        keep = np.array([bool(t) for t in tokens], dtype=bool)
        numbers = first + np.flatnonzero(keep)
        toks = np.array([t for t in tokens if t], dtype=bytes)
        if toks.size == 0:
            return np.zeros(0, dtype=np.uint64), numbers
        try:
            return _parse_ipv4(toks, "address"), numbers
        except InputError:
            pass
        keys: list[int] = []
        good: list[int] = []
        for tok, lineno in zip(toks.tolist(), numbers.tolist(), strict=True):
            try:
                keys.append(int(_parse_ipv4(np.array([tok]), "address")[0]))
            except InputError:
                self._bad(
                    lineno, f"first field {tok.decode(errors='replace')!r} is not an IPv4 address"
                )
                continue
            good.append(lineno)
        return np.array(keys, dtype=np.uint64), np.array(good, dtype=np.int64)


def open_reader(
    source: Any,
    columns: Sequence[str] | None = None,
    fmt: str | None = None,
    **kwargs: Any,
) -> BatchReader:
    """The reader for ``source``: ``fmt`` if given, else by extension (``.gz`` stripped).

    ``"-"`` (stdin) and other sources without a telling name default to CSV.

    >>> import io
    >>> [b.tolist() for b in open_reader(io.BytesIO(b"v\\n3\\n"), ["v"], fmt="csv")]
    [[[3.0]]]
    """
    if fmt is None:
        fmt = format_of(source) if isinstance(source, (str, os.PathLike)) else None
        fmt = fmt or "csv"
    fmt = check_choice(fmt, "fmt", "open_reader", _FORMATS)
    if fmt == "accesslog":
        return AccessLogReader(source, **kwargs)
    if columns is None:
        raise ParameterError(f"open_reader needs 'columns' for format {fmt!r}.")
    if fmt == "jsonl":
        return JSONLinesReader(source, columns, **kwargs)
    return CSVReader(source, columns, **kwargs)


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
    path : the file to follow.
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
