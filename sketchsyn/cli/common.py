"""Shared pieces of the command line: the usage error, argument parsing (columns, bounds,
sizes), output paths checked before any work, atomic files, loading what ``sketchsyn fit``
wrote (a damaged file named as such), and the evaluation reservoir.

>>> _parse_bounds("0:1,-5:5", ["x", "y"])
([0.0, -5.0], [1.0, 5.0])
>>> _parse_bytes("256KB"), _parse_bytes("1MiB")
(256000, 1048576)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Collection, Iterator
from typing import Any

import numpy as np

from ..errors import InputError


class UsageError(Exception):
    """A bad argument or bad input met by a command (exit status 2, no traceback)."""


_BOUNDS_HELP = (
    "--bounds is required and must be public: write LOW:HIGH per column, comma-separated, "
    "in the order of --columns (e.g. --bounds=-74.05:-73.75,40.6:40.9 for lon,lat). Choose "
    "them from knowledge that does not depend on this data set: the valid range of the "
    "measurement, a map's bounding box of the area, a sensor's specified range (-180:180,"
    "-90:90 for any lon,lat). Never use the data's own min/max: they are exact values of the "
    "most extreme rows and would leak them. Rows outside follow --out-of-bounds "
    "(raise, clip or drop)."
)


def _fail(message: str) -> UsageError:
    return UsageError(message)


_KEYWORD = re.compile(r"\b([a-z][a-z0-9_]*)=(['\"])([^'\"]*)\2")
_PARAMETER = re.compile(r"The '([a-z][a-z0-9_]*)' parameter of ([A-Za-z_][\w.]*)")


def _cli_message(message: str, flags: Collection[str]) -> str:
    """An error message from the library with the command's flags in place of Python keywords.

    Only keywords that are flags of the command (``flags``, e.g. ``{"--on-bad"}``) change.

    >>> flags = {"--on-bad", "--epsilon", "--out-of-bounds"}
    >>> _cli_message("a.csv line 3: bad (pass on_bad='skip' / --on-bad skip to skip)", flags)
    'a.csv line 3: bad (pass --on-bad skip to skip)'
    >>> _cli_message("The 'epsilon' parameter of PrivHP must be > 0. Got -1.0 instead.", flags)
    '--epsilon (PrivHP) must be > 0. Got -1.0 instead.'
    >>> _cli_message("row 0 is outside (out_of_bounds='raise'); bits=7", flags)
    'row 0 is outside (--out-of-bounds raise); bits=7'
    """

    def keyword(m: re.Match) -> str:
        flag = "--" + m.group(1).replace("_", "-")
        return f"{flag} {m.group(3)}" if flag in flags else m.group(0)

    def parameter(m: re.Match) -> str:
        flag = "--" + m.group(1).replace("_", "-")
        return f"{flag} ({m.group(2)})" if flag in flags else m.group(0)

    text = _PARAMETER.sub(parameter, _KEYWORD.sub(keyword, message))
    # "pass --on-bad skip / --on-bad skip": the library named both spellings.
    return re.sub(r"(--[a-z][a-z0-9-]* [^\s/()]+) / \1", r"\1", text)


def _flags(parser: argparse.ArgumentParser, command: str) -> set[str]:
    """The long options of ``command`` (a subcommand of ``parser``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            sub = action.choices[command]
            return {s for a in sub._actions for s in a.option_strings if s.startswith("--")}
    return set()


def _parse_columns(text: str | None) -> list[str] | None:
    if text is None:
        return None
    names = [c.strip() for c in text.split(",")]
    if not all(names) or len(set(names)) != len(names):
        raise _fail(f"--columns must be distinct comma-separated names; got {text!r}")
    return names


def _parse_bounds(text: str | None, columns: list[str]) -> tuple[list[float], list[float]]:
    if not text:
        raise _fail(_BOUNDS_HELP)
    lower, upper = [], []
    parts = text.split(",")
    if len(parts) != len(columns):
        raise _fail(
            f"--bounds has {len(parts)} LOW:HIGH pair(s) but --columns names {len(columns)} "
            f"column(s) {columns}; give one pair per column, in the same order"
        )
    for name, part in zip(columns, parts, strict=True):
        try:
            lo_text, hi_text = part.split(":")
            lo, hi = float(lo_text), float(hi_text)
        except ValueError:
            raise _fail(
                f"--bounds pair {part!r} (column {name!r}) is not LOW:HIGH with two numbers"
            ) from None
        if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
            raise _fail(f"--bounds pair {part!r} (column {name!r}) needs finite LOW < HIGH")
        lower.append(lo)
        upper.append(hi)
    return lower, upper


_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
_UNITS |= {"KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
_UNITS |= {"K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}


def _parse_bytes(text: str) -> int:
    """``"256KB"`` → 256000, ``"1MiB"`` → 1048576, ``"1TB"`` → 10**12 (KB, MB, GB, TB are
    powers of ten; KiB, MiB, GiB, TiB powers of two).

    >>> _parse_bytes("1TB"), _parse_bytes("1.5 GiB"), _parse_bytes("10GB")
    (1000000000000, 1610612736, 10000000000)
    """
    t = text.strip().upper().replace(" ", "")
    number = t.rstrip("KMGTIB")
    unit = t[len(number) :]
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if unit not in _UNITS or not value > 0 or not np.isfinite(value) or value * _UNITS[unit] < 1:
        raise _fail(f"--memory {text!r} is not a size like 256KB, 4MB, 1MiB or 10GB")
    return int(value * _UNITS[unit])


@contextlib.contextmanager
def _output(path: str, binary: bool = False) -> Iterator[Any]:
    """A file object for ``path`` (``-``: stdout) that replaces ``path`` atomically when the
    block ends without an error (a temporary file in the same directory, fsync'ed, renamed);
    on an error the temporary file is removed and ``path`` is left as it was."""
    if path == "-":
        yield sys.stdout.buffer if binary else sys.stdout
        return
    from ..io.checkpoint import file_mode

    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".sketchsyn-", suffix=".tmp", dir=directory)
    os.fchmod(fd, file_mode())  # the umask's permissions, not mkstemp's 0o600
    out = os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"newline": ""}))
    try:
        yield out
        out.flush()
        os.fsync(out.fileno())
        out.close()
        os.replace(tmp, path)
    except BaseException:
        out.close()
        os.unlink(tmp)
        raise


def _write_atomic(path: str, data: bytes, owner_only: bool = False) -> None:
    """Write ``data`` to ``path`` so that a crash leaves the old or the new file, never a torn one
    (:func:`sketchsyn.io.checkpoint.save`'s atomic write; the temporary file is
    ``.sketchsyn-<name>.<pid>.<random>.tmp``, removed by the next write if its writer was killed).
    The file gets the umask's permissions, or ``0o600`` with ``owner_only`` (a trusted state).
    """
    from ..io.checkpoint import _write_atomic as write

    write(path, data, prefix="sketchsyn-", owner_only=owner_only)


def _blob_kind(blob: bytes) -> str | None:
    """The object kind written by ``sketchsyn.io.serial.pack`` (None: not such a file)."""
    from ..errors import SerializationError
    from ..io.checkpoint import kind_of

    try:
        return kind_of(blob)
    except SerializationError:
        return None


def _check_output(path: str | None, flag: str) -> None:
    """Refuse an output path that cannot be written, before any input is read: its directory
    must exist and be writable, and the path must not be a directory (``-`` is stdout).

    >>> _check_output("/no/such/dir/x.model", "-o")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sketchsyn.cli.common.UsageError: -o '/no/such/dir/x.model': the directory ... does not exist
    """
    if path is None or path == "-":
        return
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise _fail(f"{flag} {path!r}: the directory {directory!r} does not exist")
    if os.path.isdir(path):
        raise _fail(f"{flag} {path!r} is a directory; give a file name")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise _fail(f"{flag} {path!r}: the directory {directory!r} is not writable")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise _fail(f"{flag} {path!r} exists and is not writable")


def _looks_like_ours(blob: bytes) -> bool:
    """A sketchsyn container by its first bytes: the magic, or the magic with one byte changed
    (a flipped bit there is damage, not another kind of file)."""
    from ..io.serial import MAGIC

    head = blob[: len(MAGIC)]
    if len(blob) <= len(MAGIC):
        return head == MAGIC[: len(head)] and len(head) > 0
    return sum(a != b for a, b in zip(head, MAGIC, strict=True)) <= 1


def _damaged(what: str, path: str, why: str) -> UsageError:
    return _fail(
        f"{what} {path!r} is damaged: {why}. It was written by sketchsyn and has changed "
        "since; write it again with sketchsyn fit, or restore a copy"
    )


def _load(path: str, what: str) -> Any:
    """A release or a state from a file written by ``sketchsyn fit``; a damaged one (a
    truncated file, a flipped bit) is named as damaged, with the file."""
    from ..errors import SerializationError
    from ..synth.distribution import PrivateDistribution
    from ..synth.marginal.model import MarginalDistribution
    from ..synth.marginal.synthesizer import MarginalSynthesizer
    from ..synth.offline.pmm import PMM
    from ..synth.privhp.summary import PrivHP

    try:
        with open(path, "rb") as fh:
            blob = fh.read()
    except OSError as exc:
        raise _fail(f"cannot read {what} {path!r}: {exc.strerror or exc}") from None
    kinds = {
        "PrivateDistribution": PrivateDistribution,
        "MarginalDistribution": MarginalDistribution,
        "PrivHP": PrivHP,
        "PMM": PMM,
        "MarginalSynthesizer": MarginalSynthesizer,
    }
    kind = _blob_kind(blob)
    if kind is None and _looks_like_ours(blob):
        from ..io.serial import MAGIC, header_of

        if blob[: len(MAGIC)] != MAGIC:
            raise _damaged(what, path, f"its first bytes are not sketchsyn's mark {MAGIC!r}")
        try:
            header_of(blob)
        except SerializationError as exc:
            raise _not_read(what, path, exc) from None
        raise _damaged(what, path, "its header cannot be read")
    if kind == "ResumableRun":  # a state saved with the input position it consumed
        blob = _unpack_run(blob, path)[0]
        kind = _blob_kind(blob)
    if kind not in kinds:
        if kind is not None:  # a sketchsyn container of another kind, or a damaged one
            from ..io.serial import read

            try:
                read(blob, kind)
            except SerializationError as exc:
                raise _not_read(what, path, exc) from None
            raise _fail(
                f"{what} {path!r} is not a file written by sketchsyn fit (it holds a {kind})"
            )
        raise _fail(f"{what} {path!r} is not a file written by sketchsyn fit")
    try:
        return kinds[kind].from_bytes(blob)
    except SerializationError as exc:
        raise _not_read(what, path, exc) from None


def _not_read(what: str, path: str, exc: Exception) -> UsageError:
    """A file of ours that does not read: written by a newer sketchsyn, or damaged."""
    text = str(exc).rstrip(".")
    if "Upgrade sketchsyn" in text:
        return _fail(f"{what} {path!r}: {text}")
    return _damaged(what, path, text)


def _unpack_run(blob: bytes, path: str) -> tuple[bytes, dict[str, Any]]:
    from ..errors import SerializationError
    from ..io.checkpoint import unpack_run

    try:
        return unpack_run(blob)
    except SerializationError as exc:
        raise _not_read("the resumable state", path, exc) from None


def _load_run(path: str) -> dict[str, Any] | None:
    """The input position saved with a state by ``fit --state`` (None: a file without one)."""
    try:
        with open(path, "rb") as fh:
            blob = fh.read()
    except OSError as exc:
        raise _fail(f"cannot read {path!r}: {exc.strerror or exc}") from None
    if _blob_kind(blob) != "ResumableRun":
        return None
    return _unpack_run(blob, path)[1]


def _run_lines(run: dict[str, Any] | None) -> list[str]:
    """What ``sketchsyn info`` says about a state's input position."""
    if run is None:
        return []
    where = run.get("source", "?")
    state = "read to its end" if run["complete"] else "interrupted (not read to its end)"
    return [
        f"  input consumed: {run['rows']:,} input rows of {where} ({run.get('format', 'csv')}), "
        f"{state}; resume with --skip-rows {run['rows']} if the input comes from stdin",
        "  trusted file: it holds the exact number of rows read, with the state: keep it with "
        "the data (it is a local checkpoint, not something to publish)",
    ]


def _load_release(path: str) -> Any:
    from ..synth.distribution import PrivateDistribution
    from ..synth.marginal.model import MarginalDistribution

    obj = _load(path, "MODEL")
    if not isinstance(obj, (PrivateDistribution, MarginalDistribution)):
        raise _fail(
            f"MODEL {path!r} is a resumable {type(obj).__name__} state, not a release; "
            f"release it with: sketchsyn fit --resume {path} DATA -o MODEL"
        )
    return obj


def _is_released(summary: Any) -> bool:
    released = getattr(summary, "released", None)
    if released is None:  # PMM keeps its release in _released
        released = getattr(summary, "_released", None) is not None
    return bool(released)


def _say(args: argparse.Namespace) -> Any:
    if args.quiet:
        return lambda *a: None
    return lambda *a: print(*a, file=sys.stderr)


class _Reservoir:
    """Uniform reservoir sample of a stream (for the evaluation only; never released).

    Batches must have shape ``(n, d)`` (``(n,)`` is taken as ``(n, 1)`` only when d = 1): a
    batch of another width is refused, never re-cut into rows of ``d`` values.

    >>> res = _Reservoir(3, 2, seed=0)
    >>> res.add([[0.0, 1.0], [2.0, 3.0]])
    >>> res.sample().tolist()
    [[0.0, 1.0], [2.0, 3.0]]
    >>> res.add(np.arange(4.0))
    Traceback (most recent call last):
    ...
    sketchsyn.errors.InputError: rows must have shape (n, 2), one value per column; got shape (4,)
    """

    def __init__(self, size: int, d: int, seed: int) -> None:
        self.size = size
        self.items = np.empty((size, d))
        self.seen = 0
        self.rng = np.random.default_rng(seed)

    def add(self, X: Any, what: str = "rows") -> None:
        """Offer a batch ``(n, d)``; ``what`` names it in the error for a bad shape."""
        X = np.asarray(X, dtype=np.float64)
        d = self.items.shape[1]
        if X.ndim == 1 and d == 1:
            X = X[:, None]
        if X.ndim != 2 or X.shape[1] != d:
            raise InputError(
                f"{what} must have shape (n, {d}), one value per column; got shape {X.shape}"
            )
        fill = max(0, min(self.size - self.seen, X.shape[0]))
        self.items[self.seen : self.seen + fill] = X[:fill]
        self.seen += fill
        rest = X[fill:]
        if rest.shape[0]:
            # Algorithm R, vectorised: the t-th item (1-based) takes slot u < size w.p. size/t.
            t = self.seen + np.arange(1, rest.shape[0] + 1)
            slots = (self.rng.random(rest.shape[0]) * t).astype(np.int64)
            keep = slots < self.size
            self.items[slots[keep]] = rest[keep]
            self.seen += rest.shape[0]

    def sample(self) -> np.ndarray:
        return self.items[: min(self.seen, self.size)]
