"""The pyarrow path of :class:`~sketchsyn.io.readers.CSVReader`: one block of CSV lines parsed by
``pyarrow.csv.open_csv`` (C++, the GIL released), its text checked only where its pattern breaks.

A clean block (every line with the header's field count and plain decimal numbers in the
wanted fields, no quote: the common case) is parsed first by the compiled pass of
:func:`sketchsyn.kernels._text.parse_csv`, which gives pyarrow's doubles bit for bit in less
CPU; a block it does not take goes to pyarrow as below.

A block is parsed by pyarrow's streaming reader in internal blocks (``block_size``: 1 MiB, and
256 KiB after the block's first break in the pattern: the larger costs less per row, the smaller
less per break), with ``ignore_empty_lines=False`` so that every line of the block is either a row
or an invalid row reported to a handler with its line number: the line numbers of the rows follow
without scanning the text. Where the pattern breaks, and only there, the reader looks at lines:

- a line with the wrong number of fields: reported by pyarrow's ``invalid_row_handler`` (its text
  and number), so it costs O(1);
- a value that is not a number: pyarrow stops with the line's number; the rows of the pyarrow
  blocks before it are kept, the lines between the last kept row and the bad line (at most one
  internal block) are parsed again, the bad line goes to the line-by-line checker, and parsing
  resumes after it: one internal block at most per bad line, never a re-parse of the whole batch;
- a blank line, an empty field, ``nan`` or ``inf``: a row that is not all finite numbers, found
  with numpy on the parsed values and handed line by line to the checker.

The newline index of a block is computed once, the first time a break needs a line's bytes.

>>> rows, numbers, n = parse_block(b"1,2\\n3,4\\n", 10, 2, [1, 0], ",", None)
>>> rows.tolist(), numbers, n
([[2.0, 1.0], [4.0, 3.0]], None, 2)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import kernels

__all__ = ["available", "parse_block"]

_ROW = re.compile(r"Row #(\d+)")
_MAX_BREAKS = 64  # conversion breaks in one block before the rest goes line by line
_AFTER_BREAK = 1 << 18  # pyarrow's internal block size once a block has had a break

# (rows, numbers or None) of a list of lines whose first is line ``first``
Slow = Callable[[list[bytes], int], tuple[np.ndarray, np.ndarray]]


def available() -> bool:
    """Whether pyarrow (with its CSV module) can be imported.

    >>> isinstance(available(), bool)
    True
    """
    try:
        import pyarrow.csv  # noqa: F401
    except ImportError:
        return False
    return True


def float64_values(col: Any) -> np.ndarray:
    """The values of a pyarrow float64 array without nulls, as a numpy view of its buffer.

    (``Array.to_numpy`` imports pandas, which costs more than parsing a small file.)
    """
    data = col.buffers()[1]
    return np.frombuffer(data, dtype=np.float64, count=len(col), offset=col.offset * 8)


class _Lines:
    """Byte offsets of the lines of a block, computed on first use (only where a break needs it)."""

    def __init__(self, buf: bytes | memoryview) -> None:
        self.buf = buf
        self._ends: np.ndarray | None = None

    def ends(self) -> np.ndarray:
        if self._ends is None:
            self._ends = np.flatnonzero(np.frombuffer(self.buf, dtype=np.uint8) == 10)
        return self._ends

    def start(self, k: int) -> int:
        """Byte offset of line ``k`` (0-based in the block)."""
        return 0 if k == 0 else int(self.ends()[k - 1]) + 1

    def line(self, k: int) -> bytes:
        ends = self.ends()
        stop = int(ends[k]) if k < ends.size else len(self.buf)
        return bytes(self.buf[self.start(k) : stop])


def _longest_line(buf: bytes | memoryview, start: int) -> int:
    """Bytes of the longest line of ``buf`` from ``start`` (newline included)."""
    ends = np.flatnonzero(np.frombuffer(buf, dtype=np.uint8)[start:] == 10)
    if ends.size == 0:
        return len(buf) - start
    return int(max(ends[0] + 1, np.diff(ends).max(initial=0), len(buf) - start - ends[-1] - 1))


def parse_block(
    buf: bytes | memoryview,
    first: int,
    ncols: int,
    idx: list[int],
    delimiter: str,
    slow: Slow | None,
    block_size: int = 1 << 20,
    compiled: bool | None = None,
) -> tuple[np.ndarray, np.ndarray | None, int]:
    """``(rows, line numbers, lines)`` of a block of complete CSV lines (ending in a newline).

    ``rows`` holds columns ``idx`` as ``float64``; ``line numbers`` is None when the rows are the
    consecutive lines ``first, first + 1, …`` (the clean case, nothing built); ``lines`` is the
    number of lines in the block. ``slow(lines, first)`` checks lines one by one (it names or
    counts the bad ones) and is called only where the block's pattern breaks. ``compiled``:
    whether a clean block may go to the compiled pass (None: ``kernels.enabled()`` on this
    thread; a reader parsing on a thread of its own passes its caller's).
    """
    if compiled is None:
        compiled = kernels.enabled()
    if compiled and kernels.INSTALLED:
        # a clean block in one compiled pass: the same doubles
        rows = kernels.text.parse_csv(buf, ncols, idx, delimiter)
        if rows is not None:
            return rows, None, rows.shape[0]
    import pyarrow as pa
    import pyarrow.csv as pacsv

    names = [f"c{i}" for i in range(ncols)]
    keep = [names[i] for i in idx]
    read = pacsv.ReadOptions(column_names=names, use_threads=False, block_size=block_size)
    convert = pacsv.ConvertOptions(
        include_columns=keep, column_types=dict.fromkeys(keep, pa.float64())
    )
    whole = pa.py_buffer(buf)
    lines = _Lines(buf)
    pieces: list[np.ndarray] = []
    numbers: list[np.ndarray] = []
    clean = True
    breaks = 0
    # Work list of (first byte, line index in the block) of the parts still to parse.
    start_byte, start_line = 0, 0
    end_line: int | None = None  # the block's line count once known
    while start_byte < len(buf):
        invalid: list[tuple[int, str]] = []

        def handler(row: Any, invalid: list = invalid) -> str:
            invalid.append((row.number, row.text))
            return "skip"

        parse = pacsv.ParseOptions(
            delimiter=delimiter, invalid_row_handler=handler, ignore_empty_lines=False
        )
        batches: list[Any] = []
        failed_at = None
        try:
            reader = pacsv.open_csv(pa.BufferReader(whole.slice(start_byte)), read, parse, convert)
            for batch in reader:
                batches.append(batch)
        except pa.ArrowInvalid as exc:
            m = _ROW.search(str(exc))
            if m is None and "straddl" in str(exc):
                longest = _longest_line(buf, start_byte)
                if longest >= read.block_size:  # a line longer than pyarrow's block
                    read = pacsv.ReadOptions(
                        column_names=names, use_threads=False, block_size=1 << longest.bit_length()
                    )
                    continue
            if m is None or slow is None:
                raise
            failed_at = int(m.group(1))  # 1-based line of this part
        got = sum(b.num_rows for b in batches)
        bad_rel = sorted(n for n, _ in invalid if n is not None)
        if failed_at is None:
            covered = got + len(invalid)
        else:
            covered = got
            for n in bad_rel:  # invalid lines inside the kept batches (or at their edge)
                if n <= covered + 1 and n < failed_at:
                    covered += 1
        if len(bad_rel) != len(invalid):  # a number pyarrow could not give: check by hand
            raise RuntimeError("pyarrow gave an invalid row without its number")
        bad_here = [n for n in bad_rel if n <= covered]
        if batches:
            k = len(idx)
            # Column-major: each column of each batch is one contiguous copy.
            arr = np.empty((k, got), dtype=np.float64).T
            row = 0
            for batch in batches:
                m_rows = batch.num_rows
                for j, name in enumerate(keep):
                    col = batch.column(name)
                    if col.null_count:  # blank lines, empty fields: NaN, checked below
                        col = col.fill_null(float("nan"))
                    arr[row : row + m_rows, j] = float64_values(col)
                row += m_rows
            if bad_here:
                nums = np.delete(np.arange(1, covered + 1), np.asarray(bad_here) - 1)
                nums = nums + (first + start_line - 1)
            else:
                nums = None
            # One flat sum is the fast check: NaN and inf survive it (an overflow to inf only
            # sends the block to the exact check).
            finite = bool(np.isfinite(np.add.reduce(arr, axis=None)))
            ok = None if finite else np.isfinite(arr).all(axis=1)
            if ok is not None and not ok.all():
                if nums is None:
                    nums = np.arange(first + start_line, first + start_line + got)
                arr, nums = _recheck(arr, nums, ok, first, lines, slow)
            if nums is not None:
                clean = False
            elif not clean or pieces:
                nums = np.arange(first + start_line, first + start_line + arr.shape[0])
            pieces.append(arr)
            numbers.append(nums)  # type: ignore[arg-type]
        for n, text in invalid:
            if n <= covered and slow is not None:
                clean = False
                _take(slow(*_one(text, first + start_line + n - 1)), pieces, numbers)
            elif slow is None:
                raise ValueError(f"line {first + start_line + n - 1} has the wrong field count")
        if failed_at is None:
            end_line = start_line + covered
            break
        clean = False
        breaks += 1
        read = pacsv.ReadOptions(
            column_names=names, use_threads=False, block_size=min(block_size, _AFTER_BREAK)
        )
        # Lines after the kept batches and before the bad line: parse them again (one internal
        # block at most), then the bad line alone, then go on after it.
        gap_first = start_line + covered  # 0-based line in the block
        bad_line = start_line + failed_at - 1
        if bad_line > gap_first:
            sub = buf[lines.start(gap_first) : lines.start(bad_line)]
            r, nums_sub, _ = parse_block(
                sub, first + gap_first, ncols, idx, delimiter, slow, _AFTER_BREAK, compiled
            )
            if nums_sub is None:
                nums_sub = np.arange(first + gap_first, first + gap_first + r.shape[0])
            _take((r, nums_sub), pieces, numbers)
        _take(slow([lines.line(bad_line)], first + bad_line), pieces, numbers)
        start_line = bad_line + 1
        start_byte = lines.start(start_line) if start_line < lines.ends().size else len(buf)
        if start_line >= lines.ends().size and start_byte >= len(buf):
            end_line = start_line
            break
        if breaks >= _MAX_BREAKS:  # a block full of odd values: the rest line by line
            rest = bytes(buf[start_byte:]).split(b"\n")
            if rest and rest[-1] == b"":
                rest.pop()
            _take(slow(rest, first + start_line), pieces, numbers)
            end_line = start_line + len(rest)
            break
    if end_line is None:
        end_line = start_line
    k = len(idx)
    if not pieces:
        return np.zeros((0, k)), np.zeros(0, dtype=np.int64), end_line
    rows = pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
    if clean and len(pieces) == 1 and numbers[0] is None:
        return rows, None, end_line
    nums_all = np.concatenate(
        [
            n if n is not None else np.arange(first, first + p.shape[0])
            for p, n in zip(pieces, numbers, strict=True)
        ]
    ).astype(np.int64)
    order = np.argsort(nums_all, kind="stable")
    if not bool((order == np.arange(order.size)).all()):
        rows, nums_all = rows[order], nums_all[order]
    return rows, nums_all, end_line


def _one(text: str, lineno: int) -> tuple[list[bytes], int]:
    return [text.encode("utf-8", "surrogateescape")], lineno


def _take(result: tuple[np.ndarray, np.ndarray], pieces: list, numbers: list) -> None:
    rows, nums = result
    if rows.shape[0]:
        pieces.append(rows)
        numbers.append(np.asarray(nums, dtype=np.int64))


def _recheck(
    arr: np.ndarray, nums: np.ndarray, ok: np.ndarray, first: int, lines: _Lines, slow: Slow | None
) -> tuple[np.ndarray, np.ndarray]:
    """Rows with an empty, nan or inf value: blank lines are dropped, the others checked alone."""
    if slow is None:
        raise ValueError("a value is not a finite number")
    keep_rows = [arr[ok]]
    keep_nums = [nums[ok]]
    for lineno in nums[~ok].tolist():
        text = lines.line(lineno - first)
        if not text.strip():
            continue  # a blank line is not a record
        r, n = slow([text], lineno)
        keep_rows.append(r.reshape(-1, arr.shape[1]))
        keep_nums.append(np.asarray(n, dtype=np.int64))
    rows = np.concatenate(keep_rows)
    nums_out = np.concatenate(keep_nums)
    order = np.argsort(nums_out, kind="stable")
    return rows[order], nums_out[order]
