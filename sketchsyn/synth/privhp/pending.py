"""A run of batches counted per cell, and added to a PrivHP's state once, when the run ends.

:meth:`PrivHP.update_many <sketchsyn.synth.privhp.PrivHP.update_many>` turns each batch into
its exact increments: the rows' codes counted per cell at the deepest per-cell level, then a
pass over that level's cells that lists the non-empty ones, each hashed once per sketch row at
every per-cell level. For a file read in batches of 262,144 rows the listing and the hashing
cost more than encoding and counting the rows. Their result is linear in the counts, so a run
of batches can be counted into one table of cells and listed and hashed once, at the end of
the run: :class:`PendingCounts`. The state after :meth:`~PendingCounts.flush` is that of
``update_many`` of every batch, bit for bit (integer sums; the noise was drawn at
construction and is not touched).

The pending counts are exact counts of rows already read (like the batch in the reader's
memory): they live in this object only, are never saved, and the summary's state holds them
only once flushed. Their memory is fixed by public parameters, as the batch's own working
arrays are: one int64 per cell of the per-cell level (``2**level`` cells, at most two per
batch row: 2 MiB for batches of 262,144 rows on a depth-18 plan), plus a copy of the sketch
bank when its deepest levels are hashed per item. The object is for loops that read the
summary only after the run: ``sketchsyn fit`` (it flushes before each checkpoint; another
summary than a PrivHP takes each batch at once) and :meth:`PrivHP.consume
<sketchsyn.synth.privhp.PrivHP.consume>`. Batches the compiled path does not take (fewer than
``MIN_ROWS`` rows, rows outside the box, a privacy unit, the numpy path, another domain) flush
the run and go through ``update_many`` itself, so the order of the rows is kept.

>>> import numpy as np
>>> from sketchsyn import Box, PrivHP
>>> a = PrivHP(Box.unit(2), 1.0, k=4, width=64, depth=12, rng=1)
>>> b = PrivHP(Box.unit(2), 1.0, k=4, width=64, depth=12, rng=1)
>>> X = np.random.default_rng(0).random((30_000, 2))
>>> with PendingCounts(a, 10_000) as sink:
...     for s in range(0, 30_000, 10_000):
...         sink.add(X[s : s + 10_000])
>>> for s in range(0, 30_000, 10_000):
...     b.update_many(X[s : s + 10_000])
>>> bool((a._tree == b._tree).all() and (a._bank == b._bank).all()), a.n_seen
(True, 30000)
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

import numpy as np

from ... import kernels
from ...errors import ParameterError
from .bank import _run

__all__ = ["PendingCounts"]


class PendingCounts:
    """Counts a PrivHP ``summary``'s batches per cell (batches of about ``batch_rows`` rows fix
    the level; any other summary takes each batch at once) and adds them to its state at
    :meth:`flush` (and when a ``with`` block ends, an exception included: the batches taken
    were accepted, as ``update_many`` would have kept them). Between flushes the summary does
    not hold the pending rows: read it only after."""

    def __init__(self, summary: Any, batch_rows: int) -> None:
        if not isinstance(batch_rows, int) or batch_rows < 1:
            raise ParameterError(f"batch_rows must be a positive int, got {batch_rows!r}")
        self._summary = summary
        # Any other summary takes each batch as it comes (``add`` is its ``update_many``).
        self._privhp = type(summary).__name__ == "PrivHP" and summary._unit is None
        self._dense = summary._kernel_dense(batch_rows) if self._privhp else 0
        self._hashing = summary._kernel_seeds() if self._privhp else None
        self._cells: np.ndarray | None = None  # per cell of level _dense, allocated on first use
        self._items: np.ndarray | None = None  # the per-item sketch levels' increments
        self.rows = 0  # taken and not yet flushed

    def __enter__(self) -> PendingCounts:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.flush()

    def add(self, X: Any) -> None:
        """Count a batch (all or none, as :meth:`PrivHP.update_many`: a batch the run does
        not take goes there, after the run so far is flushed)."""
        s = self._summary
        if self._privhp and kernels.enabled():
            s._check_open()
            with s._usage.enter("PrivHP"):
                codes = s._encode_box(X)
                if codes is not None:
                    self._count(codes)
                    return
        self.flush()
        s.update_many(X)

    def _count(self, codes: np.ndarray) -> None:
        s, dense = self._summary, self._dense
        if self._cells is None:
            self._cells = np.zeros(1 << dense, dtype=np.int64)
        increments = None
        if dense - s._L_c < len(s._sketches):  # sketch levels below `dense`: per item
            increments = np.zeros_like(s._bank)
            _run(s._item_jobs(codes, dense, increments, self._hashing), codes.size)
        kernels.privhp.histogram(codes, np.uint64(s._depth - dense), self._cells)
        if increments is not None:
            if self._items is None:
                self._items = increments
            else:
                self._items += increments
        self.rows += int(codes.size)

    def flush(self) -> None:
        """Add the pending rows to the summary's state (nothing when none are pending)."""
        if not self.rows:
            return
        s = self._summary
        s._check_open()
        with s._usage.enter("PrivHP"):
            assert self._cells is not None
            bank_counts = np.zeros_like(s._bank) if self._items is None else self._items
            tree_counts, job = s._cell_counts(
                self._cells, self._dense, self.rows, bank_counts, self._hashing
            )
            if job is not None:  # overwrites the per-cell levels' rows of bank_counts
                job()
            s._tree += tree_counts
            s._bank += bank_counts
            s._n_seen += self.rows
            self.rows, self._items = 0, None  # (the listing left every cell at zero)
