"""Summaries of Spark DataFrames and files: a summary per partition, a tree of merges, one release.

Needs the ``spark`` extra (``pip install "sketchsyn[spark]"``, pyspark on a Java 17 or newer) and
sketchsyn installed where the executors run Python. Two paths, both with DataFrame operations
only (no RDD, which Spark Connect and serverless Spark do not offer):

* :func:`fit` on a Spark DataFrame: each partition is read as Arrow record batches
  (:meth:`pyspark.sql.DataFrame.mapInArrow`, no row-by-row Python) and summarised by a fresh
  summary from ``make()``; every row crosses from the JVM to a Python worker once.
* :func:`fit_files` on Parquet (or Arrow IPC, CSV, JSON lines) files: only the list of paths
  goes to the executors, and each task reads its files itself with sketchsyn's readers, as
  :func:`sketchsyn.dask.summarize_files` does; no row passes through the JVM.

Each partition's summary leaves its executor as bytes (a few hundred kilobytes whatever the
partition's size); the bytes are merged up a tree of ``repartition`` + ``mapInArrow`` stages (at
most ``split_every`` summaries into one per step, so the driver receives a few of them, not one
per partition) and the caller releases the merged summary once. On a local master with
``PYSPARK_PYTHON`` unset the Python workers run the driver's interpreter (``sys.executable``),
not whichever ``python3`` comes first on the ``PATH``.

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

Privacy unit in both modes: one row of the DataFrame (or of the files), or, with ``unit=``
and summaries built with that unit (``PrivHP(..., unit="client", max_rows=16)``), all rows of
one unit, at most ``max_rows`` kept. Every row of a unit must then reach one summary's
contribution bounder: :func:`fit` repartitions the DataFrame by a keyed hash of the unit
(Spark's ``xxhash64`` of a secret 64-bit salt the driver draws from the OS and the unit) before
summarising, so a unit is bounded once, the partition summaries merge with the ``2L`` bound,
and nobody can choose ids that pile into one partition. :func:`fit_files` cannot move rows
between files: it takes a unit only when the caller states that the files are partitioned by
it (``partitioned_by_unit=True``: all rows of a unit in one file).

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
and ``fit_files(spark, "rides/", make, columns=["x", "y"])`` for every file (see the Spark page
of the documentation for a complete, runnable example).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from ..errors import ParameterError, check_choice, check_int
from .protocol import (
    MODES,
    FileTask,
    check_call,
    check_file_call,
    check_unit,
    check_units_in_files,
    from_wire,
    missing_columns,
    summarize_arrow_batches,
    to_wire,
)

__all__ = ["fit", "fit_files", "release", "summarize", "summarize_arrow"]

_WHERE = "sketchsyn.spark"
_PART, _COLUMN = "part", "summary"  # a partition's number and its summary's bytes
_SCHEMA = f"{_PART} long, {_COLUMN} binary"
_SPARK_DEFAULT_PYTHON = "python3"  # what pyspark runs when PYSPARK_PYTHON is unset


def summarize_arrow(
    batches: Iterable[Any],
    make: Callable[[], Any],
    *,
    mode: str = "trusted",
    batch_size: int = 65536,
) -> bytes:
    """The bytes of one summary fed with every row of ``batches`` (one partition).

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
        The summary's ``to_bytes()``; their header says ``trusted`` (raw) or ``private``. In
        trusted mode they also hold the exact diagnostics (``n_seen``) where the class has them.
    """
    mode = check_choice(mode, "mode", _WHERE, MODES)
    batch_size = check_int(batch_size, "batch_size", _WHERE, minimum=1)
    summary = summarize_arrow_batches(make, mode, batches, batch_size, _WHERE)
    return to_wire(summary, mode)


def _row(part: int, blob: bytes) -> Any:
    """One row of the summaries' DataFrames: a partition's number and its summary's bytes."""
    import pyarrow as pa

    return pa.RecordBatch.from_arrays(
        [pa.array([part], type=pa.int64()), pa.array([blob], type=pa.binary())],
        names=[_PART, _COLUMN],
    )


def _partition_id() -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    return 0 if context is None else int(context.partitionId())


class _PartitionStep:
    """``mapInArrow`` function: one partition's batches in, one row with its summary out."""

    def __init__(self, make: Callable[[], Any], mode: str, batch_size: int) -> None:
        self.make, self.mode, self.batch_size = make, mode, batch_size

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        blob = summarize_arrow(batches, self.make, mode=self.mode, batch_size=self.batch_size)
        yield _row(_partition_id(), blob)


class _FileStep:
    """``mapInArrow`` function over task numbers: each task reads its group of files with
    sketchsyn's readers, here on the executor, into one summary (only the paths were sent)."""

    def __init__(self, groups: list[list[str]], task: FileTask) -> None:
        self.groups, self.task = groups, task

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        tasks = [int(i) for batch in batches for i in batch.column(0).to_pylist()]
        if tasks:
            yield _row(tasks[0], self.task([p for task in tasks for p in self.groups[task]]))


class _MergeStep:
    """``mapInArrow`` function of one level of the tree: the rows of a partition that share a
    ``part`` merged into one row (at most ``split_every`` of them each)."""

    def __init__(self, cls: type, mode: str) -> None:
        self.cls, self.mode = cls, mode

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        merged: dict[int, Any] = {}
        for batch in batches:
            parts, blobs = batch.column(0).to_pylist(), batch.column(1).to_pylist()
            for part, blob in zip(parts, blobs, strict=True):
                summary = from_wire(blob, self.cls)
                if part in merged:
                    merged[part].merge(summary)
                else:
                    merged[part] = summary
        for part in sorted(merged):
            yield _row(part, to_wire(merged[part], self.mode))


def _worker_python(
    environ: Mapping[str, str], master: str, current: str, executable: str
) -> str | None:
    """The interpreter Spark's Python workers should run when sketchsyn chooses it, or None to
    leave Spark's choice.

    pyspark runs ``python3`` (from the ``PATH``) for its workers unless ``PYSPARK_PYTHON`` is
    set; with a virtual environment that is not activated, that is another Python, without
    sketchsyn or mmh3. On a local master (the workers run on this machine) the driver's own
    interpreter is then the right one; on a cluster the executors' Python is theirs to set.

    >>> _worker_python({}, "local[2]", "python3", "/venv/bin/python")
    '/venv/bin/python'
    >>> _worker_python({"PYSPARK_PYTHON": "python3"}, "local[2]", "python3", "/venv/bin/python")
    >>> _worker_python({}, "yarn", "python3", "/venv/bin/python")
    """
    if environ.get("PYSPARK_PYTHON") or not master.startswith("local"):
        return None
    if current != _SPARK_DEFAULT_PYTHON or current == executable:
        return None  # chosen by someone, or already the driver's
    return executable


def _session_of(data: Any) -> Any:
    """Use the driver's interpreter for the workers of a local classic session when nothing else
    was chosen (:func:`_worker_python`); returns the session."""
    session = getattr(data, "sparkSession", data)
    try:
        context = session.sparkContext  # a classic session (Spark Connect has none)
    except Exception:  # noqa: BLE001 (Spark Connect: the server runs the workers)
        return session
    python = _worker_python(os.environ, context.master, context.pythonExec, sys.executable)
    if python is not None:
        context.pythonExec = python  # read when each Python function is sent to the executors
    return session


def _collect(frame: Any) -> list[Any]:
    """``frame.collect()``; a worker that cannot import a module fails with one line that says
    what to set, not a Java trace."""
    try:
        return frame.collect()
    except Exception as exc:
        found = re.search(r"No module named '([^']+)'", str(exc))
        if found is None:
            raise
        raise RuntimeError(
            f"Spark's Python workers cannot import {found.group(1)!r}: install sketchsyn where "
            f"the executors run Python and set PYSPARK_PYTHON to that interpreter before the "
            f"Spark session starts (here: PYSPARK_PYTHON={sys.executable})"
        ) from None


def _partitions(data: Any) -> int:
    """How many partitions of ``data`` hold rows (a query that reads no column), to size the
    tree of merges; the merges are right whatever this says."""
    from pyspark.sql import functions as F

    top = data.select(F.spark_partition_id().alias("p")).agg(F.max("p")).first()
    return 0 if top is None or top[0] is None else int(top[0]) + 1


def _merge_tree(frame: Any, parts: int, cls: type, mode: str, split_every: int) -> bytes | None:
    """The bytes of the merge of every summary in ``frame`` (rows of ``part`` and ``summary``,
    ``part`` from 0 to about ``parts``), merged up a tree of DataFrame stages: at each level the
    rows whose ``part // split_every`` agree meet in one partition (``repartition``) and merge
    there (``mapInArrow``); the driver merges the last few. No RDD API is used."""
    from pyspark.sql import functions as F

    merge = _MergeStep(cls, mode)
    n = parts
    while n > split_every:
        n = -(-n // split_every)
        key = F.floor(F.col(_PART) / split_every).cast("long").alias(_PART)
        frame = frame.select(key, _COLUMN).repartition(n, _PART).mapInArrow(merge, _SCHEMA)
    merged = None
    for row in _collect(frame):
        summary = from_wire(row[1], cls)
        if merged is None:
            merged = summary
        else:
            merged.merge(summary)
    return None if merged is None else to_wire(merged, mode)


def _by_unit(data: Any, unit: str, parts: int | None) -> Any:
    """``data`` repartitioned so that all rows of a unit are in one partition: by Spark's
    ``xxhash64`` of a secret salt (drawn here from the OS, never shown) and the unit."""
    from pyspark.sql import functions as F

    salt = int.from_bytes(os.urandom(8), "little", signed=True)
    n = parts if parts is not None else max(_partitions(data), 1)
    key = F.xxhash64(F.lit(salt), F.col(unit))
    return data.repartition(n, key)


def _summaries(
    data: Any,
    make: Callable[[], Any],
    mode: str,
    columns: Any,
    batch_size: int,
    probe: Any,
    unit: str | None = None,
    partitions: int | None = None,
) -> Any:
    """The DataFrame of partition summaries (``part``, ``summary``) of ``data``, checked; with
    a privacy unit, of ``data`` repartitioned by a keyed hash of the unit."""
    if not (hasattr(data, "mapInArrow") and hasattr(data, "columns")):
        raise ParameterError(
            f"The 'data' parameter of {_WHERE} must be a Spark DataFrame. "
            f"Got a {type(data).__name__} instead."
        )
    unit = check_unit(_WHERE, probe, unit)
    cols = [c for c in data.columns if c != unit] if columns is None else list(columns)
    if unit is not None:
        missing_columns([unit], list(data.columns), _WHERE)
        if unit in cols:
            raise ParameterError(
                f"The 'columns' parameter of {_WHERE} names the privacy unit {unit!r}: it is "
                f"not a column of the summary. Got {cols!r} instead."
            )
        data = _by_unit(data, unit, partitions)
        cols = [*cols, unit]
    missing_columns(cols, list(data.columns), _WHERE)
    if not hasattr(probe, "consume") and len(cols) != 1 + (unit is not None):
        raise ParameterError(
            f"A sketch in {_WHERE} summarises one column of keys; got columns {cols}. "
            f"Choose one with 'columns'."
        )
    _session_of(data)
    step = _PartitionStep(make, mode, batch_size)
    return data.select(*cols).mapInArrow(step, _SCHEMA)


def summarize(
    data: Any,
    make: Callable[[], Any],
    *,
    mode: str = "trusted",
    columns: Sequence[str] | None = None,
    batch_size: int = 65536,
    unit: str | None = None,
    unit_partitions: int | None = None,
) -> Any:
    """The partition summaries of ``data`` as a lazy Spark DataFrame (one row per partition).

    Nothing runs until an action: :func:`fit` merges the rows up a tree. The DataFrame has one
    binary column, ``summary``, holding each partition's bytes (:func:`summarize_arrow`).

    Parameters
    ----------
    data : pyspark.sql.DataFrame
        Rows of the domain; the ``columns`` are its coordinates, in the domain's order.
    make : callable
        The factory of one empty summary, e.g. ``functools.partial(PrivHP, domain, 1.0, 64,
        1024, depth=20, raw=True)``: each executor calls it once per partition, the driver
        once to check the mode. Picklable, and seedless in ``mode="untrusted"``.
    mode : {"trusted", "untrusted"}
        A trusted aggregator (raw summaries, noise once at the release) or untrusted executors
        (summaries private before they leave the executor); see the module docstring.
    columns : sequence of str, optional
        The coordinates' columns, in the domain's order (default: every column but ``unit``).
    batch_size : int, default 65536
        Rows per ``update_many`` call in a partition.
    unit : str, optional
        The privacy unit's column, for summaries built with that unit: ``data`` is first
        repartitioned by a keyed hash of it (module docstring), into ``unit_partitions``
        partitions (default: as many as hold rows).
    """
    mode, _, batch_size, probe = check_call(_WHERE, make, mode, None, batch_size)
    frame = _summaries(data, make, mode, columns, batch_size, probe, unit, unit_partitions)
    return frame.select(_COLUMN)


def fit(
    data: Any,
    make: Callable[[], Any],
    *,
    mode: str = "trusted",
    columns: Sequence[str] | None = None,
    split_every: int = 8,
    batch_size: int = 65536,
    unit: str | None = None,
    unit_partitions: int | None = None,
) -> Any:
    """Summarise every partition of ``data`` and merge the summaries; return the merged
    summary (not yet released), on the driver.

    DataFrame operations only (no RDD, which Spark Connect and serverless Spark lack): a
    query that reads no column first counts the partitions that hold rows, to size the tree;
    then one ``mapInArrow`` stage summarises the partitions, and each level of the tree brings
    up to ``split_every`` summaries together (``repartition``) and merges them
    (``mapInArrow``), until the driver merges the last ``split_every`` or fewer. In trusted
    mode the merged summary's ``n_seen`` is the number of rows; in untrusted mode it is 0
    (nothing exact leaves an executor).

    With ``unit=`` (summaries built with that privacy unit) the DataFrame is repartitioned by a
    keyed hash of the unit first, so that each unit is bounded by one summary; the merged
    summary is ε-DP for all rows of one unit (user level) and has no bounder of its own.

    Parameters
    ----------
    data, make, mode, columns, batch_size, unit, unit_partitions
        As in :func:`summarize`.
    split_every : int, default 8
        Most summaries merged into one by a step of the tree (``≥ 2``).
    """
    mode, split_every, batch_size, probe = check_call(_WHERE, make, mode, split_every, batch_size)
    if unit_partitions is not None:
        check_int(unit_partitions, "unit_partitions", _WHERE, minimum=1)
    parts = _partitions(data)
    if unit is not None:
        parts = unit_partitions or max(parts, 1)
    frame = _summaries(data, make, mode, columns, batch_size, probe, unit, parts)
    blob = _merge_tree(frame, parts, type(probe), mode, split_every)
    return make() if blob is None else from_wire(blob, type(probe))


def fit_files(
    spark: Any,
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
    """The merged summary of data files, each task reading its own files on its executor.

    The lean path for files, as :func:`sketchsyn.dask.summarize_files`: only the list of paths
    goes to the executors (with ``spark.range`` numbering the tasks, one per group of
    ``files_per_task`` files); a task opens its Parquet (or Arrow IPC, CSV, JSON lines) files
    with sketchsyn's readers (:func:`sketchsyn.io.readers.open_reader`: the ``columns`` decoded
    straight into float64 row batches, no Spark rows and no transfer from the JVM to Python)
    and feeds a fresh summary from ``make()``; the summaries are merged up the tree of
    :func:`fit`. The modes, their checks and their guarantees are those of :func:`fit`.

    Parameters
    ----------
    spark : pyspark.sql.SparkSession
        The session whose executors read the files.
    paths, columns, batch_size, files_per_task, threads, **reader
        As in :func:`sketchsyn.dask.summarize_files`: a directory, a glob pattern, a file or a
        sequence of files, which every executor must see at these paths; the columns to read,
        in the domain's order (for a summary of a table, the schema's names, read by name and
        typed); rows per ``update_many`` call (default 262,144); files per task
        (default 1); a reader thread and PrivHP's second counting thread per task (default
        off: a task keeps to its core); the reader options ``on_bad``, ``fmt``, ``delimiter``.
    make, mode, split_every
        As in :func:`fit`.
    partitioned_by_unit : bool, default False
        For summaries built with a privacy unit: the caller's statement that all rows of each
        unit are in one file. Files cannot be repartitioned here (the tasks read them where
        they are), so without it a summary with a unit is refused: a unit in ``k`` files would
        be bounded ``k`` times and move ``2kL`` rows, not ``2L``. The unit's column is read
        beside the schema's (summaries of a table).
    """
    where = f"{_WHERE}.fit_files"
    if not (hasattr(spark, "range") and hasattr(spark, "createDataFrame")):
        raise ParameterError(
            f"The 'spark' parameter of {where} must be a SparkSession. "
            f"Got a {type(spark).__name__} instead."
        )
    mode, split_every, batch_size, probe = check_call(where, make, mode, split_every, batch_size)
    check_units_in_files(where, probe, partitioned_by_unit)
    cols, groups = check_file_call(where, paths, columns, files_per_task, reader)
    _session_of(spark)
    task = FileTask(make, mode, cols, batch_size, bool(threads), dict(reader), where)
    tasks = spark.range(len(groups), numPartitions=len(groups))  # one task number each
    frame = tasks.mapInArrow(_FileStep(groups, task), _SCHEMA)
    blob = _merge_tree(frame, len(groups), type(probe), mode, split_every)
    return make() if blob is None else from_wire(blob, type(probe))


def release(data: Any, make: Callable[[], Any], **kwargs: Any) -> Any:
    """:func:`fit`, then release the merged summary once (on the driver).

    In ``mode="trusted"`` this is where the one noise draw happens, from the driver's OS
    CSPRNG; the returned release is ε-DP and public. ``kwargs`` go to :func:`fit`.
    """
    return fit(data, make, **kwargs).release()
