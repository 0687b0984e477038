"""What the Dask and Spark faces share: mode checks, partition summaries, their bytes and merges.

:mod:`sketchsyn.dask` and :mod:`sketchsyn.spark` run the same protocol on different engines:
each partition is summarised where it lives by a fresh summary from ``make()``, the summary
leaves its worker as bytes, the bytes are merged up a tree, and the caller releases the merged
summary once. This module holds that protocol; the two faces only map it onto their engine.

- :func:`check_call`, :func:`check_summary`, :func:`check_file_call`: the argument checks and
  the refusals of the two modes (``"trusted"``: raw summaries, noise once at the release;
  ``"untrusted"``: summaries private before they leave the worker, each drawing its own noise).
- :func:`summarize_items`, :func:`summarize_arrow_batches`, :func:`summarize_paths`: one
  partition's summary from rows or arrays, from Arrow record batches, or from files read with
  sketchsyn's readers (:class:`FileTask`: a task of files, as bytes).
- :func:`to_wire`, :func:`merge_wire`, :func:`from_wire`: a summary's bytes across processes.
  In trusted mode they keep the exact diagnostics (``n_seen``, ``n_dropped``; the state holds
  exact counts already), so the merged summary's ``n_seen`` is the sum of the partitions'; in
  untrusted mode they hold only what is private.
- :func:`roomy_malloc`: glibc settings while a partition is summarised in a Dask worker.
- :func:`check_unit`, :func:`unit_partition`: a privacy unit (summaries built with ``unit=``):
  every row of a unit must reach one summary's contribution bounder, so the faces partition
  the data by a keyed hash of the unit (a secret seed drawn per call) before summarising.

>>> import functools, numpy as np
>>> from sketchsyn import Box, PrivHP
>>> make = functools.partial(PrivHP, Box.unit(2), 1.0, 16, 256, depth=10, raw=True)
>>> X = np.random.default_rng(0).random((3_000, 2))
>>> parts = [summarize_items(make, "trusted", [X[i::3]], 1_000, "here") for i in range(3)]
>>> merged = from_wire(merge_wire([to_wire(p, "trusted") for p in parts], PrivHP, "trusted"))
>>> one = make()
>>> one.update_many(X)
>>> bool((merged._tree == one._tree).all()), merged.n_seen
(True, 3000)
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import glob
import inspect
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from ..errors import InputError, ParameterError, check_choice, check_int

__all__ = [
    "MODES",
    "FileTask",
    "check_call",
    "check_file_call",
    "check_summary",
    "file_list",
    "from_wire",
    "is_raw",
    "merge_wire",
    "check_unit",
    "check_units_in_files",
    "unit_partition",
    "missing_columns",
    "reads_tables",
    "roomy_malloc",
    "summarize_arrow_batches",
    "summarize_items",
    "summarize_paths",
    "to_wire",
]

MODES = ("trusted", "untrusted")
_READER_OPTIONS = ("on_bad", "fmt", "delimiter")


# ---------------------------------------------------------------------------- modes and arguments
def is_raw(summary: Any) -> bool | None:
    """True for an exact (not yet private) summary, False for a private one, None if unknown."""
    from ..sketches.sketch import CountMinSketch, CountSketch
    from ..synth.offline.histogram import LevelCounts
    from ..synth.privhp.summary import PrivHP

    if isinstance(summary, PrivHP):
        return bool(summary.raw)
    if isinstance(summary, (CountMinSketch, CountSketch)):
        return summary.epsilon is None
    if isinstance(summary, LevelCounts):
        return True
    return None


def check_summary(summary: Any, mode: str, where: str) -> None:
    """Refuse a summary that does not keep the stated mode's guarantee (``where`` names the
    caller in the messages: ``sketchsyn.dask`` or ``sketchsyn.spark``)."""
    name = type(summary).__name__
    if not (hasattr(summary, "merge") and hasattr(summary, "update_many")):
        raise ParameterError(
            f"The 'make' parameter of {where} must build a sketchsyn summary (with "
            f"update_many and merge). Got a {name} instead."
        )
    raw = is_raw(summary)
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


def check_call(
    where: str, make: Any, mode: Any, split_every: Any, batch_size: Any
) -> tuple[str, int | None, int, Any]:
    """The arguments every entry point shares, checked in this order and named after ``where``
    (``split_every=None``: an entry point without a tree of merges). Returns them checked, with
    one summary from ``make()`` that keeps the mode's guarantee (a probe of the class)."""
    mode = check_choice(mode, "mode", where, MODES)
    if split_every is not None:
        split_every = check_int(split_every, "split_every", where, minimum=2)
    batch_size = check_int(batch_size, "batch_size", where, minimum=1)
    if not callable(make):
        raise ParameterError(
            f"The 'make' parameter of {where} must be a callable that builds a summary. "
            f"Got {make!r} instead."
        )
    probe = make()
    check_summary(probe, mode, where)
    return mode, split_every, batch_size, probe


def check_unit(where: str, probe: Any, unit: Any) -> str | None:
    """The ``unit`` of an entry point, checked against the summaries ``make()`` builds: they
    must take that unit (``unit=..., max_rows=...``), and summaries with a unit need it, so
    that the data is partitioned by unit before a bounder sees it."""
    has = getattr(probe, "unit", None)
    if unit is None and has is not None:
        raise ParameterError(
            f"{where}: make() builds summaries with the privacy unit {has!r}: pass "
            f"unit={has!r} too, so that all rows of a unit reach one of them"
        )
    if unit is not None and has != unit:
        raise ParameterError(
            f"The 'unit' parameter of {where} must be the privacy unit of the summaries make() "
            f"builds ({has!r}: build them with unit={unit!r}, max_rows=...). Got {unit!r} "
            "instead."
        )
    return unit


def check_units_in_files(where: str, probe: Any, partitioned_by_unit: Any) -> None:
    """The file entry points' rule for a privacy unit: the caller states that the files are
    partitioned by it (all rows of a unit in one file), or summaries with a unit are refused;
    without a unit the statement is refused as meaningless."""
    from ..errors import check_bool

    stated = check_bool(partitioned_by_unit, "partitioned_by_unit", where)
    unit = getattr(probe, "unit", None)
    if unit is not None and not stated:
        raise ParameterError(
            f"{where} reads each file where it is and cannot bring a unit's rows together: "
            f"with the privacy unit {unit!r}, pass partitioned_by_unit=True to state that all "
            "rows of each unit are in one file (else a unit in k files moves 2kL rows, not 2L), "
            "or read the files into a DataFrame and use fit(..., unit=...)"
        )
    if unit is None and stated:
        raise ParameterError(
            f"The 'partitioned_by_unit' parameter of {where} is for summaries built with a "
            "privacy unit (unit=..., max_rows=...). Got True instead."
        )


def partition_seed() -> int:
    """A secret 32-bit seed for one call's partitioning by unit (the OS CSPRNG)."""
    return int.from_bytes(os.urandom(4), "little")


def unit_partition(ids: Any, seed: int, parts: int) -> np.ndarray:
    """The partition (``0 … parts − 1``) of each row: a keyed hash of its unit id
    (:func:`sketchsyn.units.ids.unit_keys`, then MurmurHash3 with the secret ``seed``), so that
    all rows of a unit go to one partition and no one can pick ids that crowd one of them.

    >>> p = unit_partition(np.array(["a", "b", "a"]), 7, 4)
    >>> bool(p[0] == p[2]), bool(((p >= 0) & (p < 4)).all())
    (True, True)
    """
    from ..sketches.hashing import murmur3_32
    from ..units.ids import unit_keys

    h = murmur3_32(unit_keys(ids, seed), seed).astype(np.uint64)
    return ((h * np.uint64(parts)) >> np.uint64(32)).astype(np.int64)


def check_file_call(
    where: str, paths: Any, columns: Any, files_per_task: Any, reader: dict[str, Any]
) -> tuple[list[str], list[list[str]]]:
    """The arguments of the file entry points: non-empty column names, ``files_per_task ≥ 1``,
    only the reader options ``on_bad``, ``fmt`` and ``delimiter``, and at least one file.
    Returns the columns and the files in groups of ``files_per_task`` (one group per task)."""
    files_per_task = check_int(files_per_task, "files_per_task", where, minimum=1)
    cols = [columns] if isinstance(columns, str) else list(columns or [])
    if not cols or not all(isinstance(c, str) and c for c in cols):
        raise ParameterError(
            f"The 'columns' parameter of {where} must be non-empty column names. "
            f"Got {columns!r} instead."
        )
    unknown = sorted(set(reader) - set(_READER_OPTIONS))
    if unknown:
        raise ParameterError(
            f"{where} got unexpected keyword argument(s) {unknown}; the reader options are "
            "on_bad, fmt and delimiter"
        )
    files = file_list(paths, where)
    return cols, [files[i : i + files_per_task] for i in range(0, len(files), files_per_task)]


def missing_columns(columns: Sequence[str], available: Sequence[str], where: str) -> None:
    """Refuse ``columns`` that are not all among the data's ``available`` columns."""
    missing = [c for c in columns if c not in available]
    if missing:
        raise ParameterError(
            f"The 'columns' parameter of {where} names columns the data lacks: {missing}. "
            f"Columns: {list(available)}."
        )


def file_list(paths: Any, where: str) -> list[str]:
    """A directory (its files, sorted, hidden ones and ``_``-prefixed ones left out), a glob
    pattern, one file, or a sequence of files."""
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
                f"The 'paths' parameter of {where} must be a path, a glob pattern or a "
                f"sequence of paths. Got {paths!r} instead."
            ) from None
    if not found:
        raise InputError(f"{where}: no files in {paths!r}")
    return found


# ---------------------------------------------------------------------------- one partition
def summarize_items(
    make: Callable[[], Any], mode: str, items: Iterable[Any], batch_size: int, where: str
) -> Any:
    """A fresh summary from ``make()`` fed with ``items``: rows or 2-D arrays of rows (a
    summary of a domain), keys or arrays of keys (a sketch); with a privacy unit, frames
    holding the unit's column or ``(rows, ids)`` pairs."""
    summary = make()
    check_summary(summary, mode, where)
    with roomy_malloc():
        if getattr(summary, "unit", None) is not None:
            for item in items:
                _feed_unit(summary, item)
        else:
            _feed(summary, items, batch_size)
    return summary


def _feed_unit(summary: Any, item: Any) -> None:
    """One block of a summary with a privacy unit: a frame or table holding the unit's column
    (a summary of a table reads it by name; another one gets the other columns as rows and the
    ids beside them), or a ``(rows, ids)`` pair."""
    if isinstance(item, tuple):
        summary.update_many(item[0], units=item[1])
    elif reads_tables(summary):
        summary.update_many(item)
    else:
        unit = summary.unit
        names = list(item.schema.names) if hasattr(item, "schema") else list(item.columns)
        rest = [c for c in names if c != unit]
        ids = item.column(unit) if hasattr(item, "schema") else item[unit]
        cols = [np.asarray(item.column(c)) if hasattr(item, "schema") else item[c].to_numpy()
                for c in rest]  # fmt: skip
        summary.update_many(np.column_stack(cols), units=ids)


def _feed(summary: Any, items: Iterable[Any], batch_size: int) -> None:
    if hasattr(summary, "consume"):
        summary.consume(items, batch_size=batch_size)
    else:  # a sketch: the items are keys, or arrays of keys
        _feed_keys(summary, items, batch_size)


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


def _arrow_block(batch: Any) -> np.ndarray:
    """An Arrow record batch as rows × columns (a 1-D array of keys for one column)."""
    columns = [batch.column(i).to_numpy(zero_copy_only=False) for i in range(batch.num_columns)]
    return columns[0] if len(columns) == 1 else np.column_stack(columns)


def reads_tables(summary: Any) -> bool:
    """True for a summary of a table (its domain a :class:`~sketchsyn.domains.Schema`): it is
    fed whole tables, its columns matched by name, not numeric row blocks."""
    return hasattr(getattr(summary, "domain", None), "to_frame")


def _gathered(
    batches: Iterable[Any], batch_size: int, keys: bool, where: str, table: bool = False
) -> Iterator[Any]:
    """Arrow batches as blocks of at least ``batch_size`` rows (the last one fewer): 2-D numpy
    rows for a summary of a domain, 1-D keys for a sketch, an Arrow table for a summary of a
    table (``table``)."""
    pending: list[Any] = []
    rows = 0

    def block() -> Any:
        if table:
            import pyarrow as pa

            out = pa.Table.from_batches(list(pending))
            pending.clear()
            return out
        out = pending[0] if len(pending) == 1 else np.concatenate(pending)
        pending.clear()
        if keys and out.ndim != 1:
            raise ParameterError(
                f"A sketch in {where} summarises one column of keys; the data has "
                f"{out.shape[1]} columns. Select one with 'columns'."
            )
        return out if keys or out.ndim == 2 else out[:, None]

    for batch in batches:
        if batch.num_rows == 0:
            continue
        pending.append(batch if table else _arrow_block(batch))
        rows += batch.num_rows
        if rows >= batch_size:
            yield block()
            rows = 0
    if pending:
        yield block()


def summarize_arrow_batches(
    make: Callable[[], Any], mode: str, batches: Iterable[Any], batch_size: int, where: str
) -> Any:
    """A fresh summary from ``make()`` fed with Arrow record batches (small ones gathered up to
    ``batch_size`` rows); their columns are the domain's coordinates, or one column of keys, or
    a table's columns (matched by name) for a summary of a table."""
    summary = make()
    check_summary(summary, mode, where)
    keys = not hasattr(summary, "consume")
    unit = getattr(summary, "unit", None) is not None
    blocks = _gathered(batches, batch_size, keys, where, table=reads_tables(summary) or unit)
    with roomy_malloc():
        if unit:  # Arrow tables holding the unit's column
            for block in blocks:
                _feed_unit(summary, block)
        else:
            _feed(summary, blocks, batch_size)
    return summary


def summarize_paths(
    make: Callable[[], Any],
    mode: str,
    paths: Iterable[str],
    columns: list[str],
    batch_size: int,
    threads: bool,
    reader: dict[str, Any],
    where: str,
) -> Any:
    """A fresh summary from ``make()`` fed with the ``columns`` of files read here with
    sketchsyn's readers (:func:`sketchsyn.io.readers.open_reader`: float64 row batches, no
    DataFrame; for a summary of a table, :func:`sketchsyn.io.tables_reader.open_table_reader`:
    the schema's columns by name, typed Arrow tables). ``threads=False`` keeps the work on this
    thread (no reader thread, no second PrivHP counting thread), which suits one worker thread
    per core."""
    from ..io.readers import open_reader
    from ..synth.privhp.bank import one_thread

    summary = make()
    check_summary(summary, mode, where)
    rows = hasattr(summary, "consume")
    kwargs = {"batch_size": batch_size, "threads": threads, **reader}
    if getattr(summary, "unit", None) is not None:  # files partitioned by unit (the caller's word)
        if not reads_tables(summary):
            raise ParameterError(
                f"{where} with a privacy unit needs summaries of a table (a Schema): the unit's "
                "column is read beside the schema's"
            )
        kwargs["unit"] = summary.unit
    opener = open_reader
    if reads_tables(summary):  # a table: its schema's columns read by name, typed
        from ..io.tables_reader import open_table_reader

        names = list(summary.domain.names)
        if sorted(columns) != sorted(names):
            raise ParameterError(
                f"The 'columns' parameter of {where} must name the schema's columns {names} "
                f"(a summary of a table reads them by name). Got {columns!r} instead."
            )
        opener, columns = open_table_reader, summary.domain  # type: ignore[assignment]
    with roomy_malloc(), contextlib.nullcontext() if threads else one_thread():
        for path in paths:
            for batch in opener(path, columns, **kwargs):
                if rows:
                    summary.update_many(batch)
                else:  # a sketch: one column of keys
                    _feed_keys(summary, [batch], batch_size)
    return summary


class FileTask:
    """One task's step of the file paths (picklable): its files read here into one fresh
    summary (:func:`summarize_paths`), returned as bytes (:func:`to_wire`)."""

    def __init__(
        self,
        make: Callable[[], Any],
        mode: str,
        columns: list[str],
        batch_size: int,
        threads: bool,
        reader: dict[str, Any],
        where: str,
    ) -> None:
        self.make, self.mode, self.columns, self.where = make, mode, columns, where
        self.batch_size, self.threads, self.reader = batch_size, threads, reader

    def __call__(self, paths: Iterable[str]) -> bytes:
        summary = summarize_paths(
            self.make,
            self.mode,
            paths,
            self.columns,
            self.batch_size,
            self.threads,
            self.reader,
            self.where,
        )
        return to_wire(summary, self.mode)


# ---------------------------------------------------------------------------- bytes and merges
def to_wire(summary: Any, mode: str) -> bytes:
    """A partition summary's bytes for the trip to the merges.

    In trusted mode they keep the exact diagnostics where the class has them (``n_seen``,
    ``n_dropped``: the state already holds exact counts, and the header says ``trusted``), so
    that the merged summary counts every row it was fed; in untrusted mode only what is private
    leaves the worker (the merged ``n_seen`` is then 0: an exact count is not private)."""
    if mode == "trusted" and "include_diagnostics" in inspect.signature(summary._state).parameters:
        return summary.to_bytes(include_diagnostics=True)
    if getattr(summary, "bounder", None) is not None:  # untrusted: the private part only
        return summary.to_bytes(include_bounder=False)
    return summary.to_bytes()


def from_wire(blob: Any, cls: type | None = None) -> Any:
    """The summary in ``blob`` (bytes of :func:`to_wire`), checked field by field; ``cls``
    (optional) is the class it must be."""
    from ..io.checkpoint import kind_of
    from ..io.registry import registry

    data = bytes(blob)
    if cls is None:
        cls = registry()[kind_of(data)]
    return cls.from_bytes(data)


def merge_wire(blobs: Iterable[Any], cls: type, mode: str) -> bytes | None:
    """The bytes (:func:`to_wire` in ``mode``) of the merge of every summary in ``blobs``
    (None when there is none: no partition, or only None)."""
    merged = None
    for blob in blobs:
        if blob is None:
            continue
        summary = from_wire(blob, cls)
        if merged is None:
            merged = summary
        else:
            merged.merge(summary)
    return None if merged is None else to_wire(merged, mode)


# ---------------------------------------------------------------------------- glibc in workers
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


@functools.lru_cache(maxsize=1)
def _startup_environ() -> dict[str, str]:
    """The glibc variables of the environment this process started with (``/proc/self/environ``:
    what glibc read, untouched by later ``os.environ`` changes); empty off Linux."""
    try:
        with open("/proc/self/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return {}
    found = {}
    for entry in raw.split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if sep and name.startswith(b"MALLOC_"):
            found[name.decode("ascii", "replace")] = value.decode("ascii", "replace")
    return found


@contextlib.contextmanager
def roomy_malloc() -> Iterator[None]:
    """Let glibc keep the freed temporaries of ``update_many`` while a partition is summarised.

    Dask's nanny starts its workers with ``MALLOC_TRIM_THRESHOLD_=65536`` (so that they give
    memory back to the OS). Setting it also fixes glibc's mmap threshold at 128 KiB: every
    temporary array of a batch (a few hundred kilobytes to a few megabytes) is then mapped and
    unmapped, and its pages faulted in again, batch after batch; PrivHP's ``update_many`` took
    3.5–4 times the CPU time in a Dask worker that it takes in the client for that reason alone
    (``benchmarks/bench_distributed.py`` prints both). While at least one partition is being
    summarised in this process, the thresholds are raised (32 MiB, 1 GiB); after the last one
    the environment's values are put back and the free memory is returned to the OS
    (``malloc_trim``), which is what the variable asked for. Nothing is changed when the
    variable is not set (glibc's adaptive threshold is then in force) or off glibc.

    The variable counts as set only in the environment the process started with (glibc reads
    it then): a Dask client process, where the nanny sets it later for the workers it spawns,
    keeps glibc's adaptive threshold and is never trimmed while its other threads allocate.
    """
    global _malloc_users
    start = _startup_environ()
    try:
        trim = int(start["MALLOC_TRIM_THRESHOLD_"])
        mmap = int(start.get("MALLOC_MMAP_THRESHOLD_", _GLIBC_MMAP_THRESHOLD))
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
