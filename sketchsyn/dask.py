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
summary was built with ``neighbours="replace"``).

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

import contextlib
import ctypes
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from .errors import InputError, ParameterError, check_choice, check_int

__all__ = ["fit", "release", "summarize", "summarize_files"]

_MODES = ("trusted", "untrusted")


def _is_raw(summary: Any) -> bool | None:
    """True for an exact (not yet private) summary, False for a private one, None if unknown."""
    from .sketches.sketch import CountMinSketch, CountSketch
    from .synth.offline.histogram import LevelCounts
    from .synth.privhp.summary import PrivHP

    if isinstance(summary, PrivHP):
        return bool(summary._raw)
    if isinstance(summary, (CountMinSketch, CountSketch)):
        return summary.epsilon is None
    if isinstance(summary, LevelCounts):
        return True
    return None


def _check_summary(summary: Any, mode: str, where: str = "sketchsyn.dask") -> None:
    """Refuse a summary that does not keep the stated mode's guarantee (``where`` names the
    caller in the messages: ``sketchsyn.dask`` or ``sketchsyn.spark``)."""
    name = type(summary).__name__
    if not (hasattr(summary, "merge") and hasattr(summary, "update_many")):
        raise ParameterError(
            f"The 'make' parameter of {where} must build a sketchsyn summary (with "
            f"update_many and merge). Got a {name} instead."
        )
    raw = _is_raw(summary)
    if raw is None:
        raise ParameterError(f"{where} cannot tell whether a {name} is private")
    if mode == "trusted" and not raw:
        raise ParameterError(
            f"mode='trusted' needs raw partition summaries (e.g. PrivHP(..., raw=True) or a "
            f"sketch with epsilon=None): with noise in every partition the merged noise grows "
            f"with the number of partitions. Got a private {name}; use mode='untrusted' for it."
        )
    if mode == "untrusted":
        if raw:
            raise ParameterError(
                f"mode='untrusted' needs summaries that are private before they leave the "
                f"worker; a {name} built this way holds exact counts. Build it with noise "
                f"(PrivHP without raw=True, a sketch with epsilon) or use mode='trusted'."
            )
        source = getattr(summary, "_source", None)
        if source is not None and not source.secure:
            raise ParameterError(
                f"mode='untrusted' needs each worker to draw its own noise from the OS CSPRNG "
                f"(rng=None); this {name} was built with a seeded rng, so every partition "
                f"would share one noise draw."
            )


# glibc's mallopt parameters (malloc.h) and the values its environment variables override.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_GLIBC_MMAP_THRESHOLD = 128 * 1024  # glibc's default, fixed once a threshold variable is set
_ROOMY_MMAP, _ROOMY_TRIM = 32 * 2**20, 2**30
_malloc_lock = threading.Lock()
_malloc_users = 0


def _glibc() -> Any:
    """The C library's ``mallopt`` and ``malloc_trim`` (glibc on Linux), or None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt, libc.malloc_trim  # noqa: B018 (both must exist)
    except (OSError, AttributeError):
        return None
    return libc


@contextlib.contextmanager
def _roomy_malloc() -> Iterator[None]:
    """Let glibc keep the freed temporaries of ``update_many`` while a partition is summarised.

    Dask's nanny starts its workers with ``MALLOC_TRIM_THRESHOLD_=65536`` (so that they give
    memory back to the OS). Setting it also fixes glibc's mmap threshold at 128 KiB: every
    temporary array of a batch (a few hundred kilobytes to a few megabytes) is then mapped and
    unmapped, and its pages faulted in again, batch after batch; PrivHP's ``update_many`` took
    3.5–4 times the CPU time in a Dask worker that it takes in the client for that reason alone
    (``benchmarks/bench_distributed.py`` prints both). While at least one
    partition is being summarised in this process, the thresholds are raised (32 MiB, 1 GiB);
    after the last one the environment's values are put back and the free memory is returned
    to the OS (``malloc_trim``), which is what the variable asked for. Nothing is changed when
    the variable is not set (glibc's adaptive threshold is then in force) or off glibc.
    """
    global _malloc_users
    try:
        trim = int(os.environ["MALLOC_TRIM_THRESHOLD_"])
        mmap = int(os.environ.get("MALLOC_MMAP_THRESHOLD_", _GLIBC_MMAP_THRESHOLD))
    except (KeyError, ValueError):
        libc = None
    else:
        libc = _glibc()
    if libc is None:
        yield
        return
    with _malloc_lock:
        _malloc_users += 1
        if _malloc_users == 1:
            libc.mallopt(_M_MMAP_THRESHOLD, _ROOMY_MMAP)
            libc.mallopt(_M_TRIM_THRESHOLD, _ROOMY_TRIM)
    try:
        yield
    finally:
        with _malloc_lock:
            _malloc_users -= 1
            if _malloc_users == 0:
                libc.mallopt(_M_MMAP_THRESHOLD, mmap)
                libc.mallopt(_M_TRIM_THRESHOLD, trim)
                libc.malloc_trim(0)


class _Summarize:
    """Per-partition step: a fresh summary from ``make()`` fed with the partition's rows."""

    def __init__(self, make: Callable[[], Any], mode: str, batch_size: int) -> None:
        self.make, self.mode, self.batch_size = make, mode, batch_size

    def __call__(self, partition: Iterable[Any]) -> Any:
        summary = self.make()
        _check_summary(summary, self.mode)
        with _roomy_malloc():
            if hasattr(summary, "consume"):
                summary.consume(partition, batch_size=self.batch_size)
            else:  # a sketch: the items are keys, or arrays of keys
                _feed_keys(summary, partition, self.batch_size)
        return summary


def _feed_keys(sketch: Any, items: Iterable[Any], batch_size: int) -> None:
    """Send keys (or arrays of keys) to a sketch's ``update_many`` in batches."""
    pending: list[Any] = []
    for item in items:
        if isinstance(item, np.ndarray):
            for s in range(0, item.size, batch_size):
                sketch.update_many(item.ravel()[s : s + batch_size])
            continue
        pending.append(item)
        if len(pending) >= batch_size:
            sketch.update_many(pending)
            pending = []
    if pending:
        sketch.update_many(pending)


class _Merge:
    """Tree step: merge the summaries of a group into the first of them."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make

    def __call__(self, summaries: Iterable[Any]) -> Any:
        merged = None
        for summary in summaries:
            if merged is None:
                merged = summary
            else:
                merged.merge(summary)
        return self.make() if merged is None else merged  # every partition was empty


def _frame_rows(frame: Any, columns: Sequence[str] | None) -> list[np.ndarray]:
    """A pandas partition as one 2-D array of the chosen columns (a list, for dask.bag)."""
    if columns is not None:
        missing = [c for c in columns if c not in frame.columns]
        if missing:
            raise ParameterError(
                f"The 'columns' parameter of sketchsyn.dask names columns the data lacks: "
                f"{missing}. Columns: {list(frame.columns)}."
            )
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


def _as_bag(data: Any, columns: Sequence[str] | None) -> Any:
    """A dask.bag.Bag whose partitions are iterables of rows or of 2-D row arrays."""
    import dask
    import dask.array as da
    import dask.bag as db

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
        return db.from_delayed([dask.delayed(_frame_rows)(p, cols) for p in parts])
    raise ParameterError(
        f"The 'data' parameter of sketchsyn.dask must be a Dask DataFrame, Bag or Array. "
        f"Got a {type(data).__name__} instead."
    )


def _check_call(
    where: str, make: Any, mode: Any, split_every: Any, batch_size: Any
) -> tuple[str, int | None, int]:
    """The arguments every entry point shares, checked in this order and named after ``where``
    (``split_every=None``: an entry point without a tree reduction of its own)."""
    mode = check_choice(mode, "mode", where, _MODES)
    if split_every is not None:
        split_every = check_int(split_every, "split_every", where, minimum=2)
    batch_size = check_int(batch_size, "batch_size", where, minimum=1)
    if not callable(make):
        raise ParameterError(
            f"The 'make' parameter of {where} must be a callable that builds a summary. "
            f"Got {make!r} instead."
        )
    return mode, split_every, batch_size


def summarize(
    data: Any,
    make: Callable[[], Any],
    *,
    mode: str = "trusted",
    columns: Sequence[str] | None = None,
    split_every: int = 8,
    batch_size: int = 65536,
) -> Any:
    """The merged summary of ``data`` as a lazy Dask object (call ``.compute()`` on it).

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
    """
    mode, split_every, batch_size = _check_call(
        "sketchsyn.dask", make, mode, split_every, batch_size
    )
    _check_summary(make(), mode)
    bag = _as_bag(data, columns)
    return bag.reduction(
        _Summarize(make, mode, batch_size),
        _Merge(make),
        split_every=split_every,
        name="sketchsyn-summary",
    )


class _SummarizeFiles:
    """Per-partition step of :func:`summarize_files`: read the partition's files where it runs
    (sketchsyn's own readers, no DataFrame) into one fresh summary."""

    def __init__(
        self,
        make: Callable[[], Any],
        mode: str,
        columns: list[str],
        batch_size: int,
        threads: bool,
        reader: dict[str, Any],
    ) -> None:
        self.make, self.mode, self.columns = make, mode, columns
        self.batch_size, self.threads, self.reader = batch_size, threads, reader

    def __call__(self, paths: Iterable[str]) -> Any:
        from .io.readers import open_reader
        from .synth.privhp.bank import one_thread

        summary = self.make()
        _check_summary(summary, self.mode)
        rows = hasattr(summary, "consume")
        kwargs = {"batch_size": self.batch_size, "threads": self.threads, **self.reader}
        with _roomy_malloc(), contextlib.nullcontext() if self.threads else one_thread():
            for path in paths:
                for batch in open_reader(path, self.columns, **kwargs):
                    if rows:
                        summary.update_many(batch)
                    else:  # a sketch: one column of keys
                        _feed_keys(summary, [batch], self.batch_size)
        return summary


def _file_list(paths: Any) -> list[str]:
    """A directory (its files, sorted, hidden ones and ``_``-prefixed ones left out), a glob
    pattern, one file, or a sequence of files."""
    import glob

    if isinstance(paths, (str, os.PathLike)):
        one = os.fspath(paths)
        if os.path.isdir(one):
            names = sorted(n for n in os.listdir(one) if not n.startswith((".", "_")))
            found = [os.path.join(one, n) for n in names]
            found = [f for f in found if os.path.isfile(f)]
        elif glob.has_magic(one):
            found = sorted(glob.glob(one))
        else:
            found = [one]
    else:
        try:
            found = [os.fspath(p) for p in paths]
        except TypeError:
            raise ParameterError(
                f"The 'paths' parameter of sketchsyn.dask.summarize_files must be a path, a glob "
                f"pattern or a sequence of paths. Got {paths!r} instead."
            ) from None
    if not found:
        raise InputError(f"sketchsyn.dask.summarize_files: no files in {paths!r}")
    return found


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
        Columns to read, in the domain's order.
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

    where = "sketchsyn.dask.summarize_files"
    mode, split_every, batch_size = _check_call(where, make, mode, split_every, batch_size)
    files_per_task = check_int(files_per_task, "files_per_task", where, minimum=1)
    cols = [columns] if isinstance(columns, str) else list(columns or [])
    if not cols or not all(isinstance(c, str) and c for c in cols):
        raise ParameterError(
            f"The 'columns' parameter of {where} must be non-empty column names. "
            f"Got {columns!r} instead."
        )
    unknown = sorted(set(reader) - {"on_bad", "fmt", "delimiter"})
    if unknown:
        raise ParameterError(
            f"{where} got unexpected keyword argument(s) {unknown}; the reader options are "
            "on_bad, fmt and delimiter"
        )
    _check_summary(make(), mode)
    files = _file_list(paths)
    groups = [files[i : i + files_per_task] for i in range(0, len(files), files_per_task)]
    bag = db.from_sequence(groups, npartitions=len(groups)).flatten()
    return bag.reduction(
        _SummarizeFiles(make, mode, cols, batch_size, bool(threads), dict(reader)),
        _Merge(make),
        split_every=split_every,
        name="sketchsyn-files",
    )


def fit(data: Any, make: Callable[[], Any], **kwargs: Any) -> Any:
    """Compute :func:`summarize` and return the merged summary (not yet released).

    Keywords of :func:`summarize` (``mode``, ``columns``, ``split_every``, ``batch_size``) are
    taken from ``kwargs``; the rest go to ``compute`` (e.g. ``scheduler="sync"``). With a
    ``dask.distributed.Client`` running, the computation runs on its cluster. Summaries cross
    processes as ``to_bytes()``, which leaves out the exact diagnostics: the merged summary's
    ``n_seen`` then counts only rows it was fed locally (none).
    """
    own = {
        k: kwargs.pop(k) for k in ("mode", "columns", "split_every", "batch_size") if k in kwargs
    }
    return summarize(data, make, **own).compute(**kwargs)


def release(data: Any, make: Callable[[], Any], **kwargs: Any) -> Any:
    """:func:`fit`, then release the merged summary once (on the caller's machine).

    In ``mode="trusted"`` this is where the one noise draw happens, from this machine's OS
    CSPRNG; the returned release is ε-DP and public.
    """
    return fit(data, make, **kwargs).release()
