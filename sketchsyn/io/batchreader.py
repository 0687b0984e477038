"""The common part of the text readers: blocks of whole lines, line numbers, the bad-line policy,
the input position a resumable run records, and the reader thread that parses ahead.

A reader turns its input into *blocks* of complete lines (files and pipes are read in large
pieces into one buffer that is reused, and cut at the last newline: no line objects, no new
memory per block), parses each block into a numpy batch and yields it in pieces of at most
``batch_size`` rows. Where a core is free the parsing runs on a
reader thread one block ahead of the caller (``threads=True``, the default for files and pipes):
pyarrow and numpy release the GIL, so parsing overlaps with the caller's own work.

After the last piece of each block, :attr:`BatchReader.position` says how far the input has been
consumed (a :class:`Position`: data lines after the header, bytes of the decompressed input, and
a digest of the bytes just before that point); between the pieces of a block it is None. A run
that saves its state with the position can continue after exactly those lines: pass it back as
``resume=`` (the bytes before it are checked against the digest, so a different input is refused)
or, for a pipe whose beginning cannot be checked, ``skip_rows=``.

>>> import io
>>> from sketchsyn.io.readers import CSVReader
>>> reader = CSVReader(io.BytesIO(b"x\\n1\\n2\\n3\\n"), ["x"], batch_size=2, threads=False)
>>> [b.ravel().tolist() for b in reader], reader.position.rows
([[1.0, 2.0], [3.0]], 3)
>>> later = CSVReader(io.BytesIO(b"x\\n1\\n2\\n3\\n"), ["x"], skip_rows=2, threads=False)
>>> [b.ravel().tolist() for b in later], later.lines.tolist()
([[3.0]], [4])
"""

from __future__ import annotations

import abc
import hashlib
import os
import queue
import threading
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

from .. import kernels
from ..errors import InputError, ParameterError, check_choice, check_int
from .compress import DamagedInput, open_bytes

__all__ = ["BatchReader", "NumberedBatches", "Position", "starts_with"]

_BAD_KEPT = 10
_WINDOW = 4096  # bytes before a position whose digest identifies the input
_PIECE = 1 << 23  # bytes read at a time when skipping
_MAX_BLOCK = 1 << 26  # bytes of a block at most (one longer line is read whole)


def check_options(reader: Any, batch_size: int, on_bad: str, skip_rows: int) -> None:
    """Check and set the options every reader takes (its class names it in the messages)."""
    owner = type(reader).__name__
    reader.batch_size = check_int(batch_size, "batch_size", owner, minimum=1)
    reader.on_bad = check_choice(on_bad, "on_bad", owner, ("raise", "skip"))
    reader.skip_rows = check_int(skip_rows, "skip_rows", owner, minimum=0)


def check_columns(columns: Sequence[str] | str, owner: str) -> list[str]:
    """The column names as a list (one name may be given as a string): non-empty strings."""
    columns = [columns] if isinstance(columns, str) else list(columns)
    if not columns or not all(isinstance(c, str) and c for c in columns):
        raise ParameterError(
            f"The 'columns' parameter of {owner} must be non-empty strings. "
            f"Got {columns!r} instead."
        )
    return columns


def record_bad(reader: Any, unit: str, number: int, why: str) -> None:
    """One bad ``unit`` (``"line"`` or ``"row"``) of ``reader``: refused with an
    :class:`InputError` under ``on_bad="raise"``, else counted in ``n_bad`` and its number kept
    in ``bad_lines`` (the first few)."""
    if reader.on_bad == "raise":
        raise InputError(
            f"{reader.name} {unit} {number}: {why} (pass on_bad='skip' / --on-bad skip to "
            f"count and skip bad {unit}s)"
        )
    reader.n_bad += 1
    if len(reader.bad_lines) < _BAD_KEPT:
        reader.bad_lines.append(number)


class Position(NamedTuple):
    """How much of an input a reader has consumed (after a whole block).

    Attributes
    ----------
    rows : int
        Input rows consumed: data lines after the header, blank and bad lines included (table
        rows for Parquet and Arrow).
    offset : int
        Bytes of the decompressed input consumed, header included (-1: not known).
    digest : str
        BLAKE2b digest (hex) of the up to 4096 bytes before ``offset`` (for Parquet and Arrow: of
        the schema and row count), which identifies the input at that point.
    """

    rows: int
    offset: int
    digest: str


def _digest(window: bytes) -> str:
    return hashlib.blake2b(window[-_WINDOW:], digest_size=16).hexdigest()


def starts_with(source: Any, position: Position) -> bool:
    """Whether the input ``source`` (a path) holds at least ``position.offset`` bytes and the
    bytes just before that point have ``position.digest``: it is the input a position was
    taken from, or that input grown at its end. Compressed files are decompressed up to there.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "d.csv")
    >>> with open(path, "wb") as fh:
    ...     _ = fh.write(b"x\\n1\\n2\\n")
    >>> good = Position(1, 4, _digest(b"x\\n1\\n"))
    >>> starts_with(path, good), starts_with(path, Position(1, 4, "0"))
    (True, False)
    """
    if position.offset < 0:
        return False
    opened = open_bytes(source)
    try:
        if opened.compression is None and opened.path is not None:
            if os.path.getsize(opened.path) < position.offset:
                return False
            start = max(position.offset - _WINDOW, 0)
            opened.stream.seek(start)
            window = opened.stream.read(position.offset - start)
        else:
            need, window = position.offset, b""
            while need > 0:
                piece = opened.stream.read(min(need, _PIECE))
                if not piece:
                    return False
                need -= len(piece)
                window = (window + piece[-_WINDOW:])[-_WINDOW:]
        return len(window) == min(position.offset, _WINDOW) and _digest(window) == position.digest
    finally:
        opened.close()


class NumberedBatches:
    """The readers' ``lines``: the number of each row of the last batch (its line in a text
    file, its row from 1 in a table file), kept as ``(first, count)`` while the rows are
    consecutive and made an array only when read."""

    _lines_of_batch: tuple[int, int] | np.ndarray

    @property
    def lines(self) -> np.ndarray:
        """Number of each row of the last batch (its line, or its row in a table file)."""
        if isinstance(self._lines_of_batch, tuple):
            start, count = self._lines_of_batch
            self._lines_of_batch = np.arange(start, start + count, dtype=np.int64)
        return self._lines_of_batch


class BatchReader(NumberedBatches, abc.ABC):
    """Common part of the readers: blocks of lines, line numbers, the bad-line policy, positions.

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
    position : Position or None
        The input consumed up to the end of the last batch, when that batch ended a block.
    name : str
        The source's name for messages.
    """

    # True in a subclass whose ``_parse`` takes the block as a memoryview of the reader's buffer
    # (valid only during the call: the buffer is reused); otherwise it gets ``bytes``.
    _views = False

    def __init__(
        self,
        source: Any,
        columns: Sequence[str] | None,
        *,
        batch_size: int = 65536,
        on_bad: str = "raise",
        skip_rows: int = 0,
        resume: Position | None = None,
        threads: bool | None = None,
    ) -> None:
        check_options(self, batch_size, on_bad, skip_rows)
        if resume is not None and not isinstance(resume, Position):
            resume = Position(*resume)
        self.resume = resume
        self.columns = None if columns is None else check_columns(columns, type(self).__name__)
        self._plain = isinstance(source, (str, os.PathLike)) or hasattr(source, "read")
        if self._plain:
            opened = open_bytes(source)
            self._stream, self._close, self.name = opened.stream, opened.close, opened.name
            self.path, self.compression = opened.path, opened.compression
            self._it: Any = None
        else:
            self._stream, self._close, self.name = None, (lambda: None), "<lines>"
            self.path, self.compression = None, None
            self._it = (
                (None if x is None else x.encode() if isinstance(x, str) else x) for x in source
            )
        self._threads = self._plain if threads is None else bool(threads)
        self.line = 0  # lines consumed so far (the number of the last line read)
        self.header_lines = 0  # lines before the data (a CSV's header and blanks before it)
        self.n_rows = 0
        self.n_bad = 0
        self.bad_lines: list[int] = []
        self.position: Position | None = None
        self.n_bad_at_position = 0  # bad lines before ``position`` (the reader thread runs ahead)
        self._lines_of_batch: tuple[int, int] | np.ndarray = np.zeros(0, dtype=np.int64)
        self._pending = b""  # bytes read past the header or a skip, before the blocks start
        self._store = bytearray()  # the blocks' buffer: bytes [_cut, _have) not yet consumed
        self._have = self._cut = 0
        self._offset = 0  # bytes consumed (decompressed), pending bytes not included
        self._window = b""
        self._bytes_per_line = 0.0  # estimated from the first bytes read, then from each block
        self._eof = False
        # A compressed input found cut or damaged while filling the buffer: (why, line number
        # of the line it cuts), reported as a bad line once the lines before it are parsed.
        self._damage: DamagedInput | None = None
        self._damaged_line: int | None = None
        self._compiled = kernels.enabled()  # set again by each iteration (__iter__)

    @property
    def threads(self) -> bool:
        """True when the blocks are parsed on a reader thread ahead of the caller."""
        return self._threads

    # ------------------------------------------------------------------ line numbers
    def _bad(self, lineno: int, why: str) -> None:
        record_bad(self, "line", lineno, why)

    # ------------------------------------------------------------------ raw input
    def _read(self, size: int) -> bytes:
        try:
            piece = self._stream.read(size)
        except DamagedInput as exc:  # the input ends here (its lines before are kept)
            self._damage, piece = exc, b""
        if not piece:
            self._eof = True
            return b""
        return piece

    def _read_line(self) -> bytes | None:
        """One whole line (with its newline) before the blocks start (a header); None at EOF."""
        if not self._plain:
            for line in self._it:
                if line is None:
                    continue
                self._offset += len(line)
                return line
            return None
        while b"\n" not in self._pending and not self._eof:
            self._pending += self._read(1 << 16)
        if self._damage is not None and b"\n" not in self._pending:
            raise InputError(
                f"{self.name} line {self.line + 1}: {str(self._damage).split(': ', 1)[-1]}"
            )
        if not self._pending:
            return None
        cut = self._pending.find(b"\n") + 1 or len(self._pending)
        line, self._pending = self._pending[:cut], self._pending[cut:]
        self._offset += len(line)
        self._window = (self._window + line)[-_WINDOW:]
        return line

    def _next_block(self) -> tuple[Any, int | None]:
        """Complete lines (about ``batch_size`` of them) and their count when already known.

        From a file or pipe: a memoryview of the reader's own buffer, valid until the next call
        (the bytes are read into that buffer, which is reused: no new memory per block)."""
        if not self._plain:
            lines: list[bytes] = []
            for line in self._it:
                if line is None:
                    if lines:
                        break
                    continue
                lines.append(line if line.endswith(b"\n") else line + b"\n")
                if len(lines) >= self.batch_size:
                    break
            buf = b"".join(lines)
            self._offset += len(buf)
            return buf, len(lines)
        if self._bytes_per_line == 0.0 and self._pending.count(b"\n") >= 16:
            self._bytes_per_line = len(self._pending) / self._pending.count(b"\n")
        want = max(int(self.batch_size * (self._bytes_per_line or 64.0) * 0.97), 1)
        want = min(want, _MAX_BLOCK)  # a few long lines must not size every later block
        self._keep_tail(want)
        self._fill(want)
        self._cut_damaged()
        store, have = self._store, self._have
        cut = store.rfind(b"\n", 0, want) + 1 if have > want else 0
        if cut == 0:
            cut = store.rfind(b"\n", 0, have) + 1
        if self._eof and cut < have and store.find(b"\n", cut, have) < 0:
            cut = have  # the last line of the input, without its newline
        elif cut == 0:  # one line longer than the block: read until its end
            seen = 0
            while self._store.find(b"\n", seen, self._have) < 0 and not self._eof:
                seen = self._have
                self._fill(self._have + (1 << 20))
            self._cut_damaged()
            store = self._store
            cut = store.rfind(b"\n", 0, self._have) + 1 if not self._eof else self._have
        self._cut = cut
        self._offset += cut
        return memoryview(store)[:cut], None

    def _keep_tail(self, want: int) -> None:
        """Move the bytes after the last block (and any bytes read before the blocks) to the
        front of the buffer, which holds at least ``want`` bytes."""
        tail = self._have - self._cut
        size = max(want, tail + len(self._pending)) + 1
        if len(self._store) < size:
            grown = bytearray(size)  # a new buffer: views of the old one stay valid
            grown[:tail] = self._store[self._cut : self._have]
            self._store = grown
        elif tail:
            self._store[:tail] = self._store[self._cut : self._have]
        if self._pending:
            self._store[tail : tail + len(self._pending)] = self._pending
            tail += len(self._pending)
            self._pending = b""
        self._have, self._cut = tail, 0

    def _fill(self, upto: int) -> None:
        """Read into the buffer until it holds ``upto`` bytes or the input ends."""
        if len(self._store) < upto:
            grown = bytearray(upto)
            grown[: self._have] = self._store[: self._have]
            self._store = grown
        view = memoryview(self._store)
        readinto = getattr(self._stream, "readinto", None)
        while self._have < upto and not self._eof:
            try:
                if readinto is not None:
                    got = readinto(view[self._have : upto]) or 0
                else:
                    piece = self._stream.read(upto - self._have) or b""
                    got = len(piece)
                    view[self._have : self._have + got] = piece
            except DamagedInput as exc:  # the input ends here: keep its complete lines
                self._damage, got = exc, 0
            if got == 0:
                self._eof = True
            self._have += got

    def _cut_damaged(self) -> None:
        """After a damaged input's last bytes: drop the line it cuts (no newline after it) and
        note its number, for a bad line once the lines before it are parsed."""
        if self._damage is None or self._damaged_line is not None:
            return
        store = self._store
        complete = store.rfind(b"\n", 0, self._have) + 1
        self._damaged_line = self.line + store.count(b"\n", 0, complete) + 1
        self._have = complete

    def _skip(self) -> None:
        """Move past ``resume`` (checking the bytes before it) or past ``skip_rows`` lines."""
        if self.resume is not None:
            target = self.resume.offset
            if target < self._offset:
                raise InputError(f"{self.name}: the resume position is inside the header")
            if self._plain and self.path and self.compression is None and not self._pending:
                # A plain file: jump there, read only the bytes that identify it.
                size = os.path.getsize(self.path)
                if size < target:
                    raise InputError(
                        f"{self.name} has {size:,} bytes: it is not the input the state was "
                        f"saved from ({target:,} bytes consumed)"
                    )
                self._stream.seek(max(target - _WINDOW, 0))
                window = self._stream.read(target - max(target - _WINDOW, 0))
                self._window, self._offset = window, target
            else:
                need = target - self._offset
                while need > 0:
                    if self._pending:
                        piece, self._pending = self._pending[:need], self._pending[need:]
                    else:
                        piece = self._read(min(need, _PIECE))
                    if not piece:
                        break
                    need -= len(piece)
                    self._offset += len(piece)
                    self._window = (self._window + piece[-_WINDOW:])[-_WINDOW:]
            if self._offset != target or _digest(self._window) != self.resume.digest:
                raise InputError(
                    f"{self.name} does not begin with the {self.resume.rows:,} rows the state "
                    "consumed (its bytes differ): it is not the same input"
                )
            self.line += self.resume.rows
            # The lines just read size the first block (else it would assume 64 bytes a line).
            if self._window.count(b"\n") >= 16:
                self._bytes_per_line = len(self._window) / self._window.count(b"\n")
        self._skipped_to()
        left = self.skip_rows
        while left > 0:
            if not self._plain:
                line = next((x for x in self._it if x is not None), None)
                if line is None:
                    break
                self._offset += len(line)
                self.line += 1
                left -= 1
                continue
            piece = self._pending or self._read(_PIECE)
            self._pending = b""
            if not piece:
                break
            count = piece.count(b"\n")
            if count >= left:
                ends = np.flatnonzero(np.frombuffer(piece, dtype=np.uint8) == 10)
                cut = int(ends[left - 1]) + 1
                piece, self._pending = piece[:cut], piece[cut:]
                count = left
            self._offset += len(piece)
            self._window = (self._window + piece[-_WINDOW:])[-_WINDOW:]
            self.line += count
            left -= count
        if left > 0:
            raise InputError(
                f"{self.name} ended after {self.skip_rows - left:,} of the {self.skip_rows:,} "
                "rows to skip (--skip-rows)"
            )
        self._skipped_to()

    def _skipped_to(self) -> None:
        """The position before the first block: where the reading starts."""
        start = Position(self.line - self.header_lines, self._offset, _digest(self._window))
        self.position = start

    # ------------------------------------------------------------------ parsing
    @abc.abstractmethod
    def _parse(self, buf: bytes, first: int, count: int | None) -> tuple[np.ndarray, Any, int]:
        """``(rows, line numbers or None, lines in the block)`` of a block whose first line is
        line ``first`` (``None``: the consecutive lines from ``first``). ``buf`` is ``bytes``,
        or a memoryview valid during the call only when the class sets ``_views``."""

    def _blocks(self) -> Iterator[tuple[np.ndarray, Any, int, Position, int]]:
        """Parsed blocks with their first line number and the position after them."""
        self._skip()
        while True:
            buf, count = self._next_block()
            if not buf:
                if self._damaged_line is not None:
                    self._report_damage()
                return
            self._window = (self._window + buf[-_WINDOW:])[-_WINDOW:]
            if buf[-1] != 10:  # the last line of the input, without its newline
                buf = bytes(buf) + b"\n"
            elif not self._views and not isinstance(buf, bytes):
                buf = bytes(buf)
            first = self.line + 1
            rows, numbers, n_lines = self._parse(buf, first, count)
            self.line += n_lines
            if self._damaged_line is not None and self._eof and self._have <= self._cut:
                self._report_damage()
            if n_lines:
                self._bytes_per_line = max(len(buf) / n_lines, 1.0)
            position = Position(self.line - self.header_lines, self._offset, _digest(self._window))
            yield rows, numbers, first, position, self.n_bad

    def _report_damage(self) -> None:
        """The line a damaged input cuts, as a bad line (named, or counted and skipped)."""
        line, self._damaged_line = self._damaged_line, -1
        if line is not None and line >= 0:
            why = str(self._damage).split(": ", 1)[-1]
            self._bad(line, f"{why}; the lines before it were read")

    def _produced(self) -> Iterator[tuple[np.ndarray, Any, int, Position, int]]:
        if not self._threads:
            yield from self._blocks()
            return
        yield from read_ahead(self._blocks(), 2)

    def __iter__(self) -> Iterator[np.ndarray]:
        # Whether the compiled parsers may run, decided on the thread that reads the batches
        # (kernels.numpy_only() there holds for the reader thread that parses ahead too).
        self._compiled = kernels.enabled()
        try:
            for rows, numbers, first, position, n_bad in self._produced():
                total = rows.shape[0]
                if total == 0:
                    self.position = position
                    self.n_bad_at_position = n_bad
                    continue
                for s in range(0, total, self.batch_size):
                    e = min(s + self.batch_size, total)
                    piece = rows if (s == 0 and e == total) else rows[s:e]
                    self._lines_of_batch = (first + s, e - s) if numbers is None else numbers[s:e]
                    self.position = position if e == total else None
                    self.n_bad_at_position = n_bad
                    self.n_rows += e - s
                    yield piece
        finally:
            self.close()

    def close(self) -> None:
        """Close the underlying file (not stdin, not a caller's file object)."""
        self._close()

    def __enter__(self) -> BatchReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_ahead(items: Iterator[Any], maxsize: int) -> Iterator[Any]:
    """The items of ``items``, produced on a reader thread up to ``maxsize`` ahead of the caller.

    An exception in the thread is raised to the caller at its place in the order. When the
    caller stops early, the thread is stopped and waited for (so a file it reads can be
    closed safely afterwards).

    >>> list(read_ahead(iter(range(5)), 2))
    [0, 1, 2, 3, 4]
    """
    q: queue.Queue = queue.Queue(maxsize=maxsize)
    stop = threading.Event()

    def work() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        q.put(("item", item), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(("end", None))
        except BaseException as exc:  # handed to the caller, in order
            q.put(("error", exc))

    thread = threading.Thread(target=work, name="sketchsyn-reader", daemon=True)
    thread.start()
    try:
        while True:
            kind, item = q.get()
            if kind == "end":
                return
            if kind == "error":
                raise item
            yield item
    finally:
        stop.set()
        while thread.is_alive():  # drain, so a blocked put returns and the thread ends
            try:
                q.get(timeout=0.1)
            except queue.Empty:
                pass
