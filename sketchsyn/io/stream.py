"""Feeding any iterable to a summary's ``update_many`` in bounded memory, and one point as a
batch of one row for ``update(x)`` / ``remove(x)``.

>>> one_row([0.1, 0.2], 2, "update").shape
(1, 2)
>>> seen = []
>>> consume(lambda rows: seen.append(len(rows)), iter([[0.1, 0.2]] * 5), batch_size=2, d=2)
5
>>> seen
[2, 2, 1]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from ..domains.tables import is_table, table_rows, table_slice
from ..errors import InputError, check_int

__all__ = ["consume", "one_row"]


def consume(
    update_many: Callable[[Any], None],
    iterable: Iterable[Any],
    batch_size: int,
    d: int,
    progress: bool | None = None,
) -> int:
    """Send rows (or 2-D arrays of rows) from ``iterable`` to ``update_many`` in batches.

    Single rows are gathered into batches of ``batch_size``; 2-D arrays and tables (DataFrames,
    Arrow tables and record batches: whole batches of a table's rows) are cut into batches of
    at most ``batch_size`` rows. Memory stays bounded by one batch whatever the iterable's length.
    Each batch is atomic: a bad row refuses its batch (earlier batches stay counted) and the
    error names the batch's first row in the stream. If the source itself raises, the rows it
    gave so far are counted first and the exception carries a note saying how many (so none is
    lost silently). Returns the number of rows read.

    ``progress``: a tqdm bar with rows/s on stderr (optional dependency); None (default) shows
    it only when stderr is a terminal, False never (see :mod:`sketchsyn.io.progress`).
    """
    from .progress import progress as with_bar

    batch_size = check_int(batch_size, "batch_size", "consume", minimum=1)
    pending: list[Any] = []
    position = 0

    def flush(rows: Any, start: int) -> None:
        try:
            update_many(rows)
        except InputError as exc:
            raise InputError(f"in the batch starting at stream row {start}: {exc}") from exc

    iterator = iter(with_bar(iterable, enabled=progress, desc="consume"))
    while True:
        try:
            item = next(iterator)
        except StopIteration:
            break
        except Exception as exc:
            # The source failed: count the rows it gave so far, then say so in the error.
            counted = position - len(pending)
            if pending:
                try:
                    flush(pending, counted)
                    counted = position
                except InputError as bad:
                    _note(exc, f"the {len(pending)} rows gathered last were refused: {bad}")
            _note(
                exc,
                f"sketchsyn consume: the source raised after {position} rows; {counted} of "
                "them were counted (resume the source after them)",
            )
            raise
        block = isinstance(item, np.ndarray) and item.ndim == 2 and (d > 1 or item.shape[1] == 1)
        if block or is_table(item):
            if pending:
                flush(pending, position - len(pending))
                pending = []
            rows = item.shape[0] if block else table_rows(item)
            for s in range(0, rows, batch_size):
                chunk = item[s : s + batch_size] if block else table_slice(item, s, batch_size)
                flush(chunk, position)
                position += min(batch_size, rows - s)
            continue
        pending.append(item)
        position += 1
        if len(pending) >= batch_size:
            flush(pending, position - len(pending))
            pending = []
    if pending:
        flush(pending, position - len(pending))
    return position


def _note(exc: BaseException, text: str) -> None:
    """Attach ``text`` to ``exc`` (shown under its traceback; Python ≥ 3.11)."""
    if hasattr(exc, "add_note"):
        exc.add_note(text)


def one_row(x: Any, d: int, method: str) -> Any:
    """One point ``x`` of dimension ``d`` as a batch of one row (``(1,)`` when ``d = 1``,
    else ``(1, d)``; a table's row given as a dict stays a dict, in a list of one); any other
    shape is refused, naming ``method`` and its batch form (an input's shape is never
    reinterpreted).

    >>> one_row({"carrier": "AA", "month": 3}, 2, "update")
    [{'carrier': 'AA', 'month': 3}]
    >>> one_row(["AA", 3], 2, "update").tolist()
    [['AA', 3]]
    """
    if isinstance(x, Mapping):
        return [dict(x)]
    arr = np.asarray(x)
    if arr.dtype.kind in "US":  # text among the values (a table's row): keep each value's type
        arr = np.asarray(x, dtype=object)
    if d == 1 and arr.ndim == 0:
        return arr.reshape(1)
    if arr.ndim == 1 and d > 1:
        return arr.reshape(1, -1)
    if arr.ndim == 1 and arr.shape[0] == 1:
        return arr
    raise InputError(
        f"{method}(x) takes one point of dimension {d}; got an array of shape "
        f"{arr.shape}. Use {method}_many for batches."
    )
