"""Summaries of Dask collections: one summary per partition, a tree of merges, one release.

Needs the ``dask`` extra (``pip install "sketchsyn[dask]"``). Each partition of a Dask
DataFrame, Bag or Array is summarised where it lives by a fresh summary from ``make()``, the
partition summaries are merged pairwise-up-a-tree (:meth:`dask.bag.Bag.reduction` with
``split_every``, so no task holds more than ``split_every`` summaries and no machine receives
all of them), and the caller releases the merged summary once. A summary's state is a few
hundred kilobytes whatever the partition's size, so only those bytes cross the network.

Two modes, with different guarantees:

``mode="trusted"`` (trusted aggregator)
    ``make()`` builds a **raw** summary: ``PrivHP(..., raw=True)``, a raw sketch
    (``epsilon=None``) or an offline mechanism (PMM, PSMM, grid, exact until release). Partition
    summaries hold exact counts and are **not private**: the workers, the network and the
    scheduler must be trusted. The merged state equals, bit for bit, the state one machine
    would have after reading all the rows; the noise is drawn once, at ``release()`` on the
    root, so the release is ε-DP with the accuracy of one machine.

``mode="untrusted"`` (untrusted workers and aggregator)
    ``make()`` builds a summary that is private from construction (``PrivHP(...)`` without
    ``raw``, a sketch with ``epsilon``), so each partition's summary is ε-DP before it leaves
    its worker. Every row is in one partition, so the merged summary is ε-DP for the whole
    collection (parallel composition), but its noise is the sum of all partitions' draws: with
    ``P`` non-empty partitions the noise variance is ``P`` times one summary's. Each worker must
    draw its own noise from its operating system's CSPRNG (``rng=None``): a seed shared by the
    partitions would give every partition the same noise (variance ``P²`` times, and noise
    that anyone with the seed can subtract). PrivHP factories with a seeded ``rng`` are refused
    up front; sketches with one shared seed are refused when their partitions merge (they share
    a noise draw: :class:`~sketchsyn.errors.IncompatibleError`).

Privacy unit in both modes: one row of the collection (add/remove, or replace when the
summary was built with ``neighbours="replace"``), or, with ``unit=`` and summaries built with
that unit (``PrivHP(..., unit="client", max_rows=16)``), all rows of one unit, at most
``max_rows`` kept. A Dask DataFrame is then shuffled by a keyed hash of the unit
(:func:`sketchsyn.distributed.unit_partition`, its seed drawn from the OS for each call) so
that all rows of a unit reach one partition's bounder; the merged summary keeps the ``2L``
bound. :func:`summarize_files` cannot move rows between files: it takes a unit only with
``partitioned_by_unit=True``, the caller's statement that all rows of a unit are in one file.

>>> import functools, numpy as np, dask.array as da
>>> from sketchsyn import Box, PrivHP
>>> X = np.random.default_rng(0).random((4_000, 2))
>>> make = functools.partial(PrivHP, Box.unit(2), 1.0, 16, 256, depth=10, raw=True)
>>> merged = fit(da.from_array(X, chunks=(1_000, 2)), make, scheduler="sync")
>>> one = make()
>>> one.update_many(X)
>>> bool((merged._tree == one._tree).all() and (merged._bank == one._bank).all())
True
>>> release = merged.release()  # the one noise draw, on the caller's machine
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from ..errors import InputError, ParameterError
from .protocol import (
    FileTask,
    check_call,
    check_file_call,
    check_unit,
    check_units_in_files,
    from_wire,
    merge_wire,
    missing_columns,
    partition_seed,
    reads_tables,
    summarize_items,
    to_wire,
    unit_partition,
)

__all__ = ["fit", "release", "summarize", "summarize_files"]

_WHERE = "sketchsyn.dask"


class _Summarize:
    """Per-partition step: a fresh summary from ``make()`` fed with the partition's rows, as
    bytes (:func:`~sketchsyn.distributed.to_wire`)."""

    def __init__(self, make: Callable[[], Any], mode: str, batch_size: int) -> None:
        self.make, self.mode, self.batch_size = make, mode, batch_size

    def __call__(self, partition: Iterable[Any]) -> bytes:
        summary = summarize_items(self.make, self.mode, partition, self.batch_size, _WHERE)
        return to_wire(summary, self.mode)


class _Merge:
    """Tree step: the bytes of the merge of a group of summaries' bytes."""

    def __init__(self, cls: type, mode: str) -> None:
        self.cls, self.mode = cls, mode

    def __call__(self, blobs: Iterable[Any]) -> bytes | None:
        return merge_wire(blobs, self.cls, self.mode)


class _Load:
    """The merged bytes as a summary (a fresh one when there was no partition)."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make

    def __call__(self, results: Sequence[bytes | None]) -> Any:
        blob = results[0]
        return self.make() if blob is None else from_wire(blob, type(self.make()))


@functools.cache
def _summary_item() -> type:
    """A :class:`dask.bag.Item` whose task value is the merged summary's bytes and whose
    ``compute()`` loads them here, on the caller: the bytes, not a pickled summary, leave the
    cluster, so the exact diagnostics of trusted mode arrive with them. (``dask.compute`` of
    it loads them wherever Dask runs its finalising step, which may be a worker.)"""
    import dask
    import dask.bag as db

    class SummaryItem(db.Item):
        def __init__(self, dsk: Any, key: Any, make: Callable[[], Any]) -> None:
            super().__init__(dsk, key)
            self.make = make

        def __dask_postcompute__(self) -> tuple[Callable[..., Any], tuple]:
            return _Load(self.make), ()

        def compute(self, **kwargs: Any) -> Any:
            """The merged summary (``kwargs`` go to :func:`dask.compute`)."""
            (blob,) = dask.compute(db.Item(self.dask, self.key), **kwargs)
            return _Load(self.make)([blob])

        def _rebuild(self, dsk: Any, *, rename: Any = None) -> Any:
            item = super()._rebuild(dsk, rename=rename)
            return type(self)(item.dask, item.key, self.make)

        def __getstate__(self) -> tuple:
            return (*self._args, self.make)

        def __setstate__(self, state: tuple) -> None:
            self.dask, self.key, self.make = state

    SummaryItem.__name__ = SummaryItem.__qualname__ = "SummaryItem"
    return SummaryItem


def _reduce(
    bag: Any, step: Any, cls: type, make: Any, mode: str, split_every: int, name: str
) -> Any:
    """The tree reduction of ``bag`` by ``step`` (one partition's bytes) and merges of bytes,
    as a lazy Dask object whose ``compute()`` gives the merged summary."""
    item = bag.reduction(step, _Merge(cls, mode), split_every=split_every, name=name)
    return _summary_item()(item.dask, item.key, make)


def _frame_rows(
    frame: Any, columns: Sequence[str] | None, table: bool = False, unit: str | None = None
) -> list[Any]:
    """A pandas partition as one 2-D array of the chosen columns (a list, for dask.bag); for
    a summary of a table (``table``), the partition's frame itself (its columns are matched
    by name, so the chosen ones are selected and nothing is converted); with a privacy unit,
    the rows and the unit's ids beside them (a table keeps the unit's column)."""
    if unit is not None:
        cols = [c for c in frame.columns if c not in (unit, _PART)]
        cols = cols if columns is None else list(columns)
        missing_columns([*cols, unit], list(frame.columns), _WHERE)
        if table:
            return [frame[[*cols, unit]]]
        return [(np.column_stack([frame[c].to_numpy() for c in cols]), frame[unit])]
    if table:
        if columns is not None:
            missing_columns(columns, list(frame.columns), _WHERE)
            frame = frame[list(columns)]
        return [frame]
    if columns is not None:
        missing_columns(columns, list(frame.columns), _WHERE)
        if list(columns) != list(frame.columns):  # one copy into rows × columns, not two
            return [np.column_stack([frame[c].to_numpy() for c in columns])]
    return _block_rows(frame.to_numpy())


def _block_rows(block: np.ndarray) -> list[np.ndarray]:
    """One block as rows × columns: a 1-D block is one column; any other shape than 1-D or 2-D
    is refused (it is never flattened into rows)."""
    arr = np.asarray(block)
    if arr.ndim == 1:
        return [arr[:, None]]
    if arr.ndim != 2:
        raise InputError(
            f"a block of the Dask array must be 1-D (one column) or 2-D (rows × columns); got "
            f"shape {arr.shape}"
        )
    return [arr]


_PART = "_sketchsyn_unit_part"  # the column of a row's partition by unit (while shuffling)


def _unit_parts(ids: Any, seed: int, parts: int) -> Any:
    """The partition of each row of a pandas partition (a Series on its index)."""
    import pandas as pd

    return pd.Series(unit_partition(ids, seed, parts), index=ids.index, name=_PART)


def _by_unit(data: Any, unit: str) -> Any:
    """A Dask DataFrame shuffled so that all rows of a unit are in one partition: by a keyed
    hash of the unit (a secret seed drawn from the OS here, never shown)."""
    if not (hasattr(data, "to_delayed") and hasattr(data, "columns")):
        raise ParameterError(
            f"The 'unit' parameter of {_WHERE} needs a Dask DataFrame holding the unit's column. "
            f"Got a {type(data).__name__} instead."
        )
    missing_columns([unit], list(data.columns), _WHERE)
    parts = data.npartitions
    seed = partition_seed()
    key = data[unit].map_partitions(_unit_parts, seed, parts, meta=(_PART, "i8"))
    # The task-based shuffle runs on every scheduler (the peer-to-peer one that a running
    # distributed Client would choose needs its workers, and fails under scheduler="sync").
    moved = data.assign(**{_PART: key})
    return moved.shuffle(on=_PART, npartitions=parts, shuffle_method="tasks")


def _as_bag(
    data: Any, columns: Sequence[str] | None, table: bool = False, unit: str | None = None
) -> Any:
    """A dask.bag.Bag whose partitions are iterables of rows or of 2-D row arrays."""
    import dask
    import dask.array as da
    import dask.bag as db

    if unit is not None:
        parts = _by_unit(data, unit).to_delayed()
        cols = None if columns is None else list(columns)
        return db.from_delayed([dask.delayed(_frame_rows)(p, cols, table, unit) for p in parts])

    if isinstance(data, db.Bag):
        if columns is not None:
            raise ParameterError("The 'columns' parameter of sketchsyn.dask applies to frames")
        return data
    if isinstance(data, da.Array):
        if columns is not None:
            raise ParameterError("The 'columns' parameter of sketchsyn.dask applies to frames")
        if data.ndim not in (1, 2):
            raise ParameterError(
                f"A Dask array for sketchsyn.dask must be 1-D or 2-D (rows, columns). "
                f"Got {data.ndim} dimensions instead."
            )
        if data.ndim == 2 and len(data.chunks[1]) > 1:
            data = data.rechunk({1: -1})  # whole rows in every block
        blocks = data.to_delayed().ravel()
        return db.from_delayed([dask.delayed(_block_rows)(b) for b in blocks])
    if hasattr(data, "to_delayed") and hasattr(data, "columns"):  # a Dask DataFrame
        parts = data.to_delayed()
        cols = None if columns is None else list(columns)
        return db.from_delayed([dask.delayed(_frame_rows)(p, cols, table) for p in parts])
    raise ParameterError(
        f"The 'data' parameter of sketchsyn.dask must be a Dask DataFrame, Bag or Array. "
        f"Got a {type(data).__name__} instead."
    )


def summarize(
    data: Any,
    make: Callable[[], Any],
    *,
    mode: str = "trusted",
    columns: Sequence[str] | None = None,
    split_every: int = 8,
    batch_size: int = 65536,
    unit: str | None = None,
) -> Any:
    """The merged summary of ``data`` as a lazy Dask object (call ``.compute()`` on it).

    The partition summaries travel as bytes and ``.compute()`` loads the merged bytes on the
    caller (in trusted mode they keep ``n_seen``: the merged summary's is the number of rows).

    Parameters
    ----------
    data : dask.dataframe.DataFrame, dask.bag.Bag or dask.array.Array
        Rows of the domain. A Bag holds rows (or 2-D arrays of rows); an Array is ``(n, d)``
        (or ``(n,)`` for ``d = 1``), chunked along rows; a DataFrame gives the ``columns``.
    make : callable
        Builds one empty summary with the public parameters, e.g.
        ``functools.partial(PrivHP, domain, 1.0, 64, 1024, depth=20, raw=True)``. It is called
        once per partition on the workers (and once here, to check the mode), so it must be
        picklable and must not carry a seed in ``mode="untrusted"``.
    mode : {"trusted", "untrusted"}
        Trusted aggregator (raw summaries, noise once at the release) or untrusted workers
        (summaries private before they leave the worker). See the module docstring.
    columns : sequence of str, optional
        DataFrame columns to use, in the domain's order (default: all columns).
    split_every : int, default 8
        Most summaries merged by one task of the tree reduction (``≥ 2``).
    batch_size : int, default 65536
        Rows per ``update_many`` call inside a partition.
    unit : str, optional
        The privacy unit's column of a DataFrame, for summaries built with that unit: the
        frame is first shuffled by a keyed hash of the unit (module docstring); ``columns``
        (default: every other column) are the summary's.
    """
    mode, split_every, batch_size, probe = check_call(_WHERE, make, mode, split_every, batch_size)
    unit = check_unit(_WHERE, probe, unit)
    bag = _as_bag(data, columns, table=reads_tables(probe), unit=unit)
    step = _Summarize(make, mode, batch_size)
    return _reduce(bag, step, type(probe), make, mode, split_every, "sketchsyn-summary")


def summarize_files(
    paths: Any,
    make: Callable[[], Any],
    *,
    columns: Sequence[str],
    mode: str = "trusted",
    split_every: int = 8,
    batch_size: int = 262144,
    files_per_task: int = 1,
    threads: bool = False,
    partitioned_by_unit: bool = False,
    **reader: Any,
) -> Any:
    """The merged summary of data files as a lazy Dask object: each task reads its files itself.

    The lean path for files: a task opens its Parquet (or Arrow IPC, CSV, JSON lines) files with
    sketchsyn's readers (:func:`sketchsyn.io.readers.open_reader`: the ``columns`` are decoded
    straight into float64 row batches, no DataFrame in between) and feeds a fresh summary from
    ``make()``; the summaries are merged up a tree as in :func:`summarize`. The modes, their
    checks and their guarantees are those of :func:`summarize`.

    Parameters
    ----------
    paths : str, path or sequence of them
        A directory (its files, sorted; names starting with ``.`` or ``_`` left out), a glob
        pattern, one file, or a sequence of files. Every worker must see them at these paths
        (a shared or local file system).
    make : callable
        Builds one empty summary, as for :func:`summarize`.
    columns : sequence of str
        Columns to read, in the domain's order; for a summary of a table (its domain a
        :class:`~sketchsyn.domains.Schema`), the schema's column names, read by name and typed
        (:func:`sketchsyn.io.tables_reader.open_table_reader`).
    mode : {"trusted", "untrusted"}
        As for :func:`summarize`.
    split_every : int, default 8
        Most summaries merged by one task of the tree reduction (``≥ 2``).
    batch_size : int, default 262144
        Rows per ``update_many`` call (PrivHP counts larger batches for less CPU per row).
    files_per_task : int, default 1
        Files read by one task.
    threads : bool, default False
        Let each task use a reader thread and PrivHP's second counting thread (for workers
        that have a spare core each); off, a task keeps to its one core, which suits the usual
        one worker thread per core.
    partitioned_by_unit : bool, default False
        For summaries built with a privacy unit: the caller's statement that all rows of each
        unit are in one file (the files cannot be shuffled; without it such summaries are
        refused, since a unit in ``k`` files would move ``2kL`` rows). The unit's column is
        read beside the schema's (summaries of a table).
    **reader
        Further keyword arguments of the readers: ``on_bad``, ``fmt``, ``delimiter``.

    Examples
    --------
    >>> import functools, os, tempfile
    >>> import numpy as np, pyarrow as pa, pyarrow.parquet as pq
    >>> from sketchsyn import Box, PrivHP
    >>> folder = tempfile.mkdtemp()
    >>> X = np.random.default_rng(0).random((3_000, 2))
    >>> for i in range(3):
    ...     part = X[i * 1000 : (i + 1) * 1000]
    ...     table = pa.table({"x": part[:, 0], "y": part[:, 1]})
    ...     pq.write_table(table, os.path.join(folder, f"part-{i}.parquet"))
    >>> make = functools.partial(PrivHP, Box.unit(2), 1.0, 16, 256, depth=10, raw=True)
    >>> merged = summarize_files(folder, make, columns=["x", "y"]).compute(scheduler="sync")
    >>> one = make()
    >>> one.update_many(X)
    >>> bool((merged._tree == one._tree).all() and (merged._bank == one._bank).all())
    True
    """
    import dask.bag as db

    where = _WHERE + ".summarize_files"
    mode, split_every, batch_size, probe = check_call(where, make, mode, split_every, batch_size)
    check_units_in_files(where, probe, partitioned_by_unit)
    cols, groups = check_file_call(where, paths, columns, files_per_task, reader)
    bag = db.from_sequence(groups, npartitions=len(groups)).flatten()
    step = FileTask(make, mode, cols, batch_size, bool(threads), dict(reader), where)
    return _reduce(bag, step, type(probe), make, mode, split_every, "sketchsyn-files")


def fit(data: Any, make: Callable[[], Any], **kwargs: Any) -> Any:
    """Compute :func:`summarize` and return the merged summary (not yet released).

    Keywords of :func:`summarize` (``mode``, ``columns``, ``split_every``, ``batch_size``,
    ``unit``) are taken from ``kwargs``; the rest go to ``compute`` (e.g.
    ``scheduler="sync"``). With a ``dask.distributed.Client`` running, the computation runs
    on its cluster; without one, a Bag computes on Dask's process pool, so a script that calls
    this needs the ``if __name__ == "__main__":`` guard (the pool's processes import the
    script again).

    Summaries cross processes as bytes. In trusted mode the bytes keep the exact diagnostics, so
    the merged summary's ``n_seen`` is the number of rows of every partition (PrivHP, PMM,
    PSMM, grid); in untrusted mode nothing exact leaves a worker and ``n_seen`` is 0.
    """
    names = ("mode", "columns", "split_every", "batch_size", "unit")
    own = {k: kwargs.pop(k) for k in names if k in kwargs}
    return summarize(data, make, **own).compute(**kwargs)


def release(data: Any, make: Callable[[], Any], **kwargs: Any) -> Any:
    """:func:`fit`, then release the merged summary once (on the caller's machine).

    In ``mode="trusted"`` this is where the one noise draw happens, from this machine's OS
    CSPRNG; the returned release is ε-DP and public.
    """
    return fit(data, make, **kwargs).release()
