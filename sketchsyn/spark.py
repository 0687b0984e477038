"""Summaries of Spark DataFrames: one summary per partition, a tree of merges, one release.

Needs the ``spark`` extra (``pip install "sketchsyn[spark]"``, pyspark on a Java 17 or newer) and
sketchsyn installed where the executors run Python. Each partition of a Spark DataFrame is read
as Arrow record batches (:meth:`pyspark.sql.DataFrame.mapInArrow`, no row-by-row Python) and
summarised by a fresh summary from ``make()``; each partition's summary leaves its executor as
its ``to_bytes()`` (a few hundred kilobytes whatever the partition's size), the bytes are merged
pairwise up a tree (:meth:`pyspark.RDD.treeAggregate`, about ``split_every`` summaries per task,
so the driver receives a few of them, not one per partition) and the caller releases the merged
summary once.

The two modes are those of :mod:`sketchsyn.dask`, with the same guarantees and refusals:

``mode="trusted"`` (trusted aggregator)
    ``make()`` builds a **raw** summary (``PrivHP(..., raw=True)``, a sketch with
    ``epsilon=None``, PMM/PSMM/grid). The bytes that cross the cluster hold exact counts and are
    **not private** (their header says ``trusted``): executors, shuffle files, network and
    driver must be trusted. The merged state equals, bit for bit, the state one machine would
    have after reading all the rows; the noise is drawn once, at ``release()`` on the driver.

``mode="untrusted"`` (untrusted executors and aggregator)
    ``make()`` builds a summary that is private from construction (``PrivHP(...)`` without
    ``raw``, a sketch with ``epsilon``), so each partition's bytes are ε-DP before they leave
    the executor (their header says ``private``). Every row is in one partition, so the merged
    summary is ε-DP for the whole DataFrame (parallel composition); its noise is the sum of one
    independent draw per partition, empty ones included (variance ``P`` times one summary's for
    ``P`` partitions: ``coalesce`` many small partitions first). Each
    executor draws its noise from its own OS CSPRNG (``rng=None``): PrivHP factories with a
    seeded ``rng`` are refused up front, sketches sharing one seeded draw when they merge
    (:class:`~sketchsyn.errors.IncompatibleError`).

Privacy unit in both modes: one row of the DataFrame.

The per-partition step is :func:`summarize_arrow`, which any engine that hands out Arrow
record batches can call; here it summarises two batches of one "partition" and the bytes merge:

>>> import functools, numpy as np, pyarrow as pa
>>> from sketchsyn import Box, PrivHP
>>> make = functools.partial(PrivHP, Box.unit(2), 1.0, 16, 256, depth=10, raw=True)
>>> X = np.random.default_rng(0).random((3_000, 2))
>>> batch = lambda A: pa.RecordBatch.from_arrays([pa.array(A[:, 0]), pa.array(A[:, 1])], ["x", "y"])
>>> blob = summarize_arrow([batch(X[:1_000]), batch(X[1_000:2_000])], make)
>>> merged = PrivHP.from_bytes(blob)
>>> merged.merge(PrivHP.from_bytes(summarize_arrow([batch(X[2_000:])], make)))
>>> one = make()
>>> one.update_many(X)
>>> bool((merged._tree == one._tree).all() and (merged._bank == one._bank).all())
True

On a cluster, ``fit(df, make, columns=["x", "y"])`` does the same for every partition of ``df``
(see the Spark page of the documentation for a complete, runnable example).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from .dask import _MODES, _check_call, _check_summary, _roomy_malloc
from .errors import ParameterError, check_choice, check_int

__all__ = ["fit", "release", "summarize", "summarize_arrow"]

_WHERE = "sketchsyn.spark"
_COLUMN = "summary"  # the one binary column of summarize()'s DataFrame


def _batch_block(batch: Any) -> np.ndarray:
    """An Arrow record batch as rows × columns (a 1-D array of keys for one column)."""
    columns = [batch.column(i).to_numpy(zero_copy_only=False) for i in range(batch.num_columns)]
    return columns[0] if len(columns) == 1 else np.column_stack(columns)


def summarize_arrow(
    batches: Iterable[Any],
    make: Callable[[], Any],
    *,
    mode: str = "trusted",
    batch_size: int = 65536,
) -> bytes:
    """The ``to_bytes()`` of one summary fed with every row of ``batches`` (one partition).

    Parameters
    ----------
    batches : iterable of pyarrow.RecordBatch
        The partition's rows; the batches' columns are the domain's coordinates in order (one
        column of keys for a sketch).
    make : callable
        Builds one empty summary with the public parameters (see :func:`summarize`).
    mode : {"trusted", "untrusted"}
        The guarantee the summary must keep; a summary that breaks it is refused.
    batch_size : int, default 65536
        Rows per ``update_many`` call: small Arrow batches are gathered up to this many rows.

    Returns
    -------
    bytes
        The summary's bytes; their header says ``trusted`` (raw) or ``private``.
    """
    mode = check_choice(mode, "mode", _WHERE, _MODES)
    batch_size = check_int(batch_size, "batch_size", _WHERE, minimum=1)
    summary = make()
    _check_summary(summary, mode, _WHERE)
    keys = not hasattr(summary, "consume")  # a sketch: one column of keys
    pending: list[np.ndarray] = []
    rows = 0

    def flush() -> None:
        block = pending[0] if len(pending) == 1 else np.concatenate(pending)
        if keys:
            if block.ndim != 1:
                raise ParameterError(
                    f"A sketch in {_WHERE} summarises one column of keys; the data has "
                    f"{block.shape[1]} columns. Select one with 'columns'."
                )
            summary.update_many(block)
        else:
            summary.consume([block if block.ndim == 2 else block[:, None]], batch_size)
        pending.clear()

    with _roomy_malloc():
        for batch in batches:
            if batch.num_rows == 0:
                continue
            pending.append(_batch_block(batch))
            rows += batch.num_rows
            if rows >= batch_size:
                flush()
                rows = 0
        if pending:
            flush()
    return summary.to_bytes()


class _PartitionStep:
    """``mapInArrow`` function: one partition's batches in, one row with its summary's bytes out."""

    def __init__(self, make: Callable[[], Any], mode: str, batch_size: int) -> None:
        self.make, self.mode, self.batch_size = make, mode, batch_size

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        blob = summarize_arrow(batches, self.make, mode=self.mode, batch_size=self.batch_size)
        yield pa.RecordBatch.from_arrays([pa.array([blob], type=pa.binary())], names=[_COLUMN])


class _MergeBytes:
    """Tree step: merge two summaries' bytes (None is the empty start of an aggregation)."""

    def __init__(self, cls: type) -> None:
        self.cls = cls

    def __call__(self, left: Any, right: Any) -> Any:
        if left is None or right is None:
            return right if left is None else left
        merged = self.cls.from_bytes(bytes(left))
        merged.merge(self.cls.from_bytes(bytes(right)))
        return merged.to_bytes()


def _add_row(merge: _MergeBytes) -> Callable[[Any, Any], Any]:
    """``seqOp`` of the aggregation: a row of :func:`summarize`'s DataFrame into the bytes."""

    def add(acc: Any, row: Any) -> Any:
        return merge(acc, row[0])

    return add


def summarize(
    data: Any,
    make: Callable[[], Any],
    *,
    mode: str = "trusted",
    columns: Sequence[str] | None = None,
    batch_size: int = 65536,
) -> Any:
    """The partition summaries of ``data`` as a lazy Spark DataFrame (one row per partition).

    Nothing runs until an action: :func:`fit` merges the rows up a tree. The DataFrame has one
    binary column, ``summary``, holding each partition's ``to_bytes()``.

    Parameters
    ----------
    data : pyspark.sql.DataFrame
        Rows of the domain; the ``columns`` are its coordinates, in the domain's order.
    make : callable
        Builds one empty summary with the public parameters, e.g.
        ``functools.partial(PrivHP, domain, 1.0, 64, 1024, depth=20, raw=True)``. It is called
        once per partition on the executors (and once here, to check the mode), so it must be
        picklable and must not carry a seed in ``mode="untrusted"``.
    mode : {"trusted", "untrusted"}
        Trusted aggregator (raw summaries, noise once at the release) or untrusted executors
        (summaries private before they leave the executor). See the module docstring.
    columns : sequence of str, optional
        DataFrame columns to use, in the domain's order (default: all columns).
    batch_size : int, default 65536
        Rows per ``update_many`` call inside a partition.
    """
    mode, _, batch_size = _check_call(_WHERE, make, mode, None, batch_size)
    probe = make()
    _check_summary(probe, mode, _WHERE)
    if not (hasattr(data, "mapInArrow") and hasattr(data, "columns")):
        raise ParameterError(
            f"The 'data' parameter of {_WHERE} must be a Spark DataFrame. "
            f"Got a {type(data).__name__} instead."
        )
    cols = list(data.columns) if columns is None else list(columns)
    missing = [c for c in cols if c not in data.columns]
    if missing:
        raise ParameterError(
            f"The 'columns' parameter of {_WHERE} names columns the data lacks: {missing}. "
            f"Columns: {list(data.columns)}."
        )
    if not hasattr(probe, "consume") and len(cols) != 1:
        raise ParameterError(
            f"A sketch in {_WHERE} summarises one column of keys; got columns {cols}. "
            f"Choose one with 'columns'."
        )
    step = _PartitionStep(make, mode, batch_size)
    return data.select(*cols).mapInArrow(step, f"{_COLUMN} binary")


def fit(
    data: Any,
    make: Callable[[], Any],
    *,
    mode: str = "trusted",
    columns: Sequence[str] | None = None,
    split_every: int = 8,
    batch_size: int = 65536,
) -> Any:
    """Summarise every partition of ``data`` and merge the summaries; return the merged
    summary (not yet released), on the driver.

    The merges run on the executors up a tree (:meth:`pyspark.RDD.treeAggregate` with a depth
    chosen so that each task merges about ``split_every`` summaries); the driver merges the last
    few. Summaries cross processes as ``to_bytes()``, which leaves out the exact diagnostics:
    the merged summary's ``n_seen`` counts only rows it was fed locally (none). Needs the
    classic Spark API (an RDD behind the DataFrame); Spark Connect sessions are refused.

    Parameters
    ----------
    data, make, mode, columns, batch_size
        As in :func:`summarize`.
    split_every : int, default 8
        About how many summaries one task of the tree merges (``≥ 2``).
    """
    split_every = check_int(split_every, "split_every", _WHERE, minimum=2)
    frame = summarize(data, make, mode=mode, columns=columns, batch_size=batch_size)
    try:
        rdd = frame.rdd
    except Exception as exc:  # Spark Connect DataFrames have no RDD behind them
        raise ParameterError(
            f"{_WHERE} needs a classic Spark session (its tree of merges runs on the RDD "
            f"behind the DataFrame); this DataFrame has none ({type(exc).__name__})."
        ) from exc
    parts = rdd.getNumPartitions()
    depth = max(1, math.ceil(math.log(max(parts, 2)) / math.log(split_every)))
    cls = type(make())
    merge = _MergeBytes(cls)
    blob = rdd.treeAggregate(None, _add_row(merge), merge, depth=depth)
    return make() if blob is None else cls.from_bytes(bytes(blob))


def release(data: Any, make: Callable[[], Any], **kwargs: Any) -> Any:
    """:func:`fit`, then release the merged summary once (on the driver).

    In ``mode="trusted"`` this is where the one noise draw happens, from the driver's OS
    CSPRNG; the returned release is ε-DP and public. ``kwargs`` go to :func:`fit`.
    """
    return fit(data, make, **kwargs).release()
