"""Checkpoints: save a summary or a release to a file atomically, load it back by its kind.

:func:`save` writes ``obj.to_bytes()`` (the versioned, checksummed container of
:mod:`sketchsyn.io.serial`) to a temporary file in the target's directory, flushes it, ``fsync``\\ s
it, renames it over the target with :func:`os.replace` (atomic on POSIX and Windows) and
``fsync``\\ s the directory so that the rename itself is durable. A crash or power cut at any
moment therefore leaves either the old file or the new one under ``path``, never a torn mix (for
a killed process this is tested; for a power cut it rests on the file system honouring
``fsync``); a killed writer may leave a stray ``.<name>.<pid>.*.tmp`` beside it, which
:func:`load` never reads and the next :func:`save` of the same path removes (once that process
is gone); every other error path removes its temporary file at once. Options of ``save`` go to
``to_bytes``: ``key=`` (a shared secret; the digest becomes a keyed MAC, load with the same
``key``) and, for PrivHP, ``include_diagnostics=True``
(keeps the exact ``n_seen`` / ``n_dropped`` a resuming collector needs).

:func:`load` reads the kind stored in the blob (``"PrivHP"``, ``"CountMinSketch"``, …) and hands
the bytes to that class's ``from_bytes``, which checks the checksum and the format version.
Every summary and release derives from :class:`~sketchsyn.io.summary.Summary`, so
``obj.save(path)`` and ``Class.load(path)`` work on each of them, and :func:`load` finds every
kind through :func:`sketchsyn.io.registry.registry`.

What a file holds is what ``to_bytes`` holds: a PrivHP state with its noise (load it as one
lineage: releasing two loaded copies at different stream positions spends the budget twice),
the exact counts of a raw summary or of an offline mechanism (PMM, PSMM, grid: a trusted
curator's state, keep it with the data holder), or a release (public).

>>> import os, tempfile
>>> from sketchsyn import CountMinSketch
>>> cms = CountMinSketch(64, 2)
>>> cms.update(7, 3)
>>> path = os.path.join(tempfile.mkdtemp(), "cms.sksy")
>>> cms.save(path)
>>> CountMinSketch.load(path).query(7)
3
>>> type(load(path)).__name__
'CountMinSketch'

A *resumable run* (``sketchsyn fit --state``) saves :func:`pack_run`: the summary's bytes and the
input position the run had consumed when they were written (rows after the header, bytes, and a
digest of the bytes before that point), atomically in one file, so that ``--resume`` continues
after exactly those rows. The position is an exact count of the input, so such a file is a
**trusted** local checkpoint (its header says so): keep it with the data holder. :func:`load`
returns the summary inside; :func:`unpack_run` gives both.

>>> blob = pack_run(cms.to_bytes(), {"rows": 10, "offset": 42, "digest": "ab" * 16})
>>> inner, run = unpack_run(blob)
>>> CountMinSketch.from_bytes(inner).query(7), run["rows"], run["complete"]
(3, 10, False)
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Any

import numpy as np

from ..errors import SerializationError
from .registry import registry
from .serial import MetaReader, header_of, pack, read

__all__ = ["RUN_KIND", "kind_of", "load", "pack_run", "save", "unpack_run"]

RUN_KIND = "ResumableRun"
_RUN_VERSION = 1
_RUN_INTS = ("rows", "offset", "n_rows", "n_bad", "n_ipv6")
_RUN_STRS = ("digest", "format", "source")


def pack_run(state: bytes, run: dict[str, Any], *, key: bytes | str | None = None) -> bytes:
    """A resumable run's file: the bytes of its summary and how much input they hold.

    ``run`` holds ``rows`` (input rows consumed: data lines after the header, blank and bad
    ones included), ``offset`` (bytes consumed, -1 if unknown), ``digest`` (of the bytes before
    ``offset``), and optionally ``complete`` (the whole input was read), ``format``,
    ``source``, ``n_rows``, ``n_bad`` and ``n_ipv6``. The file is declared *trusted*: the
    position is an exact count of the input.
    """
    meta: dict[str, Any] = {"complete": bool(run.get("complete", False))}
    for name in _RUN_INTS:
        if name in run:
            meta[name] = int(run[name])
    for name in _RUN_STRS:
        if name in run:
            meta[name] = str(run[name])
    arrays = {"state": np.frombuffer(bytes(state), dtype=np.uint8)}
    return pack(RUN_KIND, _RUN_VERSION, meta, arrays, state="trusted", key=key)


def unpack_run(blob: bytes, *, key: bytes | str | None = None) -> tuple[bytes, dict[str, Any]]:
    """``(summary bytes, run)`` of a file written with :func:`pack_run` (every field checked).

    Raises :class:`~sketchsyn.errors.SerializationError` naming the field that is wrong.
    """
    got = read(blob, RUN_KIND, key=key)
    if got.version != _RUN_VERSION:
        raise SerializationError(
            f"{RUN_KIND} format version {got.version} is not supported (this release reads "
            f"version {_RUN_VERSION})"
        )
    fields = MetaReader(got.meta, RUN_KIND)
    run: dict[str, Any] = {"complete": fields.bool("complete")}
    for name in _RUN_INTS:
        if fields.has(name):
            run[name] = fields.int(name, minimum=-1 if name == "offset" else 0, maximum=2**62)
    for name in _RUN_STRS:
        if fields.has(name):
            run[name] = fields.str(name)
    for name in ("rows", "offset", "digest"):
        if name not in run:
            raise SerializationError(f"{RUN_KIND} blob has no field {name!r}")
    state = got.arrays.get("state")
    if state is None or state.dtype != np.uint8 or state.ndim != 1:
        raise SerializationError(f"{RUN_KIND} blob: field 'state' must be a 1-D uint8 array")
    return state.tobytes(), run


def kind_of(blob: bytes) -> str:
    """The kind named in a sketchsyn blob's header (not yet checked against its checksum).

    :func:`sketchsyn.io.serial.header_of` gives the declared state privacy and versions too.

    >>> from sketchsyn.io.serial import pack
    >>> kind_of(pack("PrivHP", 1, {}, {}, state="private"))
    'PrivHP'
    """
    return header_of(blob).kind


def _fsync_directory(directory: str) -> None:
    """Make a rename inside ``directory`` durable (POSIX; a no-op where directories can't open)."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
    try:
        fd = os.open(directory, flags)
    except OSError:  # Windows cannot open a directory; its rename is durable by itself
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists, owned by someone else
        return True
    return True


def _sweep(directory: str, name: str) -> None:
    """Remove the temporary files that killed writers of ``name`` left behind.

    A writer names its temporary file ``.<name>.<pid>.<random>.tmp``; one whose process no
    longer runs can never finish it, so the next :func:`save` of the same target deletes it.
    Files of running writers are left alone. (Not on Windows, where probing a pid with
    ``os.kill`` would end the process.)
    """
    if os.name == "nt":
        return
    prefix = f".{name}."
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        for entry in entries:
            if not (entry.name.startswith(prefix) and entry.name.endswith(".tmp")):
                continue
            pid = entry.name[len(prefix) :].split(".", 1)[0]
            if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


def save(obj: Any, path: str | os.PathLike[str], **options: Any) -> None:
    """Write ``obj.to_bytes(**options)`` to ``path`` atomically (old or new file, never torn).

    The file gets the permissions the process's umask gives a new file (``0o666 & ~umask``), as
    other tools' files do; a *trusted* state (exact counts: ``obj.state_privacy`` is
    ``"trusted"``, or ``include_diagnostics=True``) is readable by its owner only (``0o600``).

    Parameters
    ----------
    obj : any sketchsyn summary or release
        Anything with ``to_bytes()``.
    path : str or path-like
        Target file; its directory must exist. An existing file is replaced only once the new
        bytes are on disk.
    **options
        Passed to ``obj.to_bytes``: ``key=`` (a shared secret: the digest becomes a keyed MAC)
        where the class takes one, and for PrivHP ``include_diagnostics=True``, which keeps the
        exact ``n_seen`` / ``n_dropped`` in the file. A collector that resumes from its
        checkpoint needs them; such a file must stay with the data holder.
    """
    trusted = getattr(obj, "state_privacy", "private") != "private"
    _write_atomic(
        path,
        obj.to_bytes(**options),
        owner_only=trusted or bool(options.get("include_diagnostics")),
    )


def file_mode(owner_only: bool = False) -> int:
    """The permission bits of a new file: ``0o666`` less the process's umask, or ``0o600``
    (readable and writable by its owner only) for a file that holds exact counts.

    >>> file_mode(owner_only=True) == 0o600
    True
    """
    if owner_only:
        return 0o600
    mask = os.umask(0o077)  # the only portable way to read it: set it and put it back at once
    os.umask(mask)
    return 0o666 & ~mask


def _write_atomic(
    path: str | os.PathLike[str], data: bytes, prefix: str = "", owner_only: bool = False
) -> None:
    """Write ``data`` to ``path`` so that a crash leaves the old file or the new one, never a
    torn mix: a temporary ``.<prefix><name>.<pid>.<random>.tmp`` in the same directory is
    written, flushed and fsync'ed, renamed over ``path`` (:func:`os.replace`, atomic on POSIX
    and Windows), and the directory is fsync'ed. The temporary files that killed writers of the
    same ``path`` left behind are removed first (:func:`_sweep`). The file's mode is
    :func:`file_mode` (the umask's, or ``0o600`` with ``owner_only``)."""
    target = os.path.abspath(os.fspath(path))
    directory, name = os.path.split(target)
    stem = prefix + name
    _sweep(directory, stem)
    fd, tmp = tempfile.mkstemp(prefix=f".{stem}.{os.getpid()}.", suffix=".tmp", dir=directory)
    try:
        os.fchmod(fd, file_mode(owner_only))  # mkstemp makes 0o600 whatever the umask
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_directory(directory)


def load(path: str | os.PathLike[str], *, key: bytes | str | None = None) -> Any:
    """Read a file written by :func:`save` and rebuild the object of the kind it holds.

    ``key`` is the shared secret the file was saved with, if any. Raises
    :class:`~sketchsyn.errors.SerializationError` for a file that is not a sketchsyn blob, is
    truncated or altered (checksum or MAC), or holds a kind this version cannot read.
    """
    with open(os.fspath(path), "rb") as f:
        blob = f.read()
    kind = kind_of(blob)
    if kind == RUN_KIND:  # a resumable run: the summary inside (its position: unpack_run)
        blob = unpack_run(blob, key=key)[0]
        kind = kind_of(blob)
    known = registry()
    cls = known.get(kind)
    if cls is None:
        raise SerializationError(
            f"{os.fspath(path)!r} holds a {kind!r}, which no sketchsyn class reads "
            f"(known kinds: {', '.join(sorted(known))})"
        )
    return cls.from_bytes(blob, key=key)
