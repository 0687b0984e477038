"""Forged headers: every field of every kind's blob, set to hostile values, is refused quickly.

For each kind of ``conformance_examples`` a valid blob is decoded with
:func:`sketchsyn.io.serial.read`; every header field (recursively into nested records and lists,
bounded) is set to a wrong type, a negative, zero, huge, non-finite or subnormal value, or
removed; every array is truncated and extended by one along each axis; the format version is
moved by ±1. Each forged blob is re-packed with :func:`sketchsyn.io.serial.pack` (same kind and
state, digest recomputed; NaN and ±inf written by a JSON encoder that allows them) and loaded.
Each case must end in :class:`~sketchsyn.errors.SerializationError`, or load into an object that
passes a sanity check (some forgeries are valid, e.g. another seed), within 0.1 s.

The cases run in one subprocess under a 1 GiB address-space limit (set before numpy is
imported, with single-threaded BLAS), which reports the failures as JSON; each kind is then its
own test here. Run it by hand: ``python tests/test_fuzz_headers.py [Kind ...]``.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
LIMIT_BYTES = 1 << 30
CASE_SECONDS = 0.1
BAD_VALUES: list[tuple[str, Any]] = [
    ("str", "x"),
    ("list", [1]),
    ("dict", {"a": 1}),
    ("None", None),
    ("True", True),
    ("False", False),
    ("-1", -1),
    ("0", 0),
    ("2**62", 2**62),
    ("2**31", 2**31),
    ("2**40", 2**40),
    ("-2**62", -(2**62)),
    ("nan", float("nan")),
    ("inf", float("inf")),
    ("-inf", float("-inf")),
    ("1e-320", 1e-320),
    ("1.5e308", 1.5e308),
]
MAX_DEPTH = 4  # how deep into nested records and lists the fields are forged
MAX_ITEMS = 3  # list items forged per list: the first, the middle, the last


# ------------------------------------------------------------------ the worker (subprocess)
def _paths(value: Any, path: tuple = (), depth: int = 0) -> list[tuple]:
    """Every field path of a header, nested records and lists included (bounded)."""
    out = []
    if isinstance(value, dict):
        for k in sorted(value):
            out.append((*path, k))
            if depth < MAX_DEPTH:
                out.extend(_paths(value[k], (*path, k), depth + 1))
    elif isinstance(value, list) and depth < MAX_DEPTH and value:
        picks = sorted({0, len(value) // 2, len(value) - 1})[:MAX_ITEMS]
        for i in picks:
            out.append((*path, i))
            out.extend(_paths(value[i], (*path, i), depth + 1))
    return out


_DELETE = object()


def _forged(meta: dict, path: tuple, value: Any) -> dict:
    import copy

    meta = copy.deepcopy(meta)
    node = meta
    for step in path[:-1]:
        node = node[step]
    if value is _DELETE:
        if isinstance(node, dict):
            del node[path[-1]]
        else:
            node.pop(path[-1])
    else:
        node[path[-1]] = value
    return meta


def _pack(kind: str, version: int, meta: dict, arrays: dict, state: str) -> bytes:
    """:func:`sketchsyn.io.serial.pack`, with a JSON encoder that writes NaN and ±inf."""
    import json as real_json
    import types

    from sketchsyn.io import serial

    def dumps(*args: Any, **kwargs: Any) -> str:
        kwargs["allow_nan"] = True
        return real_json.dumps(*args, **kwargs)

    shim = types.SimpleNamespace(dumps=dumps, loads=real_json.loads)
    saved = serial.json
    serial.json = shim  # type: ignore[assignment]
    try:
        return serial.pack(kind, version, meta, arrays, state=state)
    finally:
        serial.json = saved


def _array_cases(arrays: dict) -> list[tuple[str, dict]]:
    import numpy as np

    out = []
    for name, arr in arrays.items():
        for axis in range(arr.ndim):
            if arr.shape[axis] > 0:
                cut = dict(arrays)
                cut[name] = np.take(arr, range(arr.shape[axis] - 1), axis=axis)
                out.append((f"{name}: axis {axis} -1", cut))
            grown = dict(arrays)
            extra = (
                np.take(arr, [arr.shape[axis] - 1], axis=axis)
                if arr.shape[axis]
                else (np.zeros(arr.shape[:axis] + (1,) + arr.shape[axis + 1 :], dtype=arr.dtype))
            )
            grown[name] = np.concatenate([arr, extra], axis=axis)
            out.append((f"{name}: axis {axis} +1", grown))
        other = np.float64 if arr.dtype.kind in "iub" else np.int64
        retyped = dict(arrays)
        retyped[name] = arr.astype(other)
        out.append((f"{name}: as {np.dtype(other)}", retyped))
        if arr.size:
            for label, value in (("nan", np.nan), ("inf", np.inf), ("huge", 2**62), ("-1", -1)):
                if arr.dtype.kind in "iu" and label in ("nan", "inf"):
                    continue
                if arr.dtype.kind == "u" and label == "-1":
                    continue
                if arr.dtype.kind == "b" or (arr.dtype.itemsize < 8 and label == "huge"):
                    continue
                poked = dict(arrays)
                poked[name] = arr.copy()
                poked[name].flat[0] = value
                out.append((f"{name}[0] = {label}", poked))
        if arr.ndim == 0 or arr.size:
            flat = dict(arrays)
            flat[name] = arr.ravel()[:-1] if arr.ndim else arr.reshape(1)
            out.append((f"{name}: flattened", flat))
    return out


def _sane(obj: Any, cls: type) -> None:
    """A loaded forgery must be a usable object of its class, of a size it could hold."""
    assert isinstance(obj, cls), type(obj)
    size = obj.nbytes
    assert isinstance(size, int) and 0 < size <= LIMIT_BYTES, size
    blob = obj.to_bytes()
    assert type(obj).from_bytes(blob).to_bytes() == blob


def _forgeries(
    kind: str, version: int, meta: dict, arrays: dict, state: str, prefix: str = "", depth: int = 0
) -> list[tuple[str, str, Callable[[], bytes]]]:
    """``(field, value label, forged blob)`` for every forgery of one blob; a nested blob (a
    ``uint8`` array holding a sketchsyn blob) is forged inside too, once."""
    import numpy as np

    from sketchsyn.io.serial import header_of, read

    def blob(meta: dict = meta, arrays: dict = arrays, version: int = version) -> Callable:
        return lambda: _pack(kind, version, meta, arrays, state)

    out: list[tuple[str, str, Callable[[], bytes]]] = []
    for path in _paths(meta):
        field = prefix + ".".join(map(str, path))
        for label, value in [*BAD_VALUES, ("deleted", _DELETE)]:
            out.append((field, label, blob(meta=_forged(meta, path, value))))
    for label, changed in _array_cases(arrays):
        out.append((prefix + "<arrays>", label, blob(arrays=changed)))
    for dv in (-1, 1):
        if 0 <= version + dv < 2**16:
            out.append((prefix + "<version>", str(version + dv), blob(version=version + dv)))
    for name, arr in arrays.items():
        raw = arr.tobytes()
        if depth or arr.dtype != np.uint8 or arr.ndim != 1 or raw[:4] != b"SKSY":
            continue
        try:
            inner = read(raw, header_of(raw).kind)
        except ValueError:  # several blobs concatenated, not one: forged as an array only
            continue
        for field, label, make in _forgeries(
            header_of(raw).kind,
            inner.version,
            inner.meta,
            inner.arrays,
            inner.state or "trusted",
            f"{prefix}{name}/",
            depth + 1,
        ):

            def nested(make: Callable[[], bytes] = make, name: str = name) -> bytes:
                changed = dict(arrays)
                changed[name] = np.frombuffer(make(), dtype=np.uint8)
                return _pack(kind, version, meta, changed, state)

            out.append((field, label, nested))
    return out


def fuzz_kind(kind: str) -> tuple[list[dict], dict[str, int]]:
    """Forge every field of ``kind``'s example blob; ``(failures, counts of outcomes)``."""
    import signal
    import time

    from conformance_examples import EXAMPLES

    from sketchsyn.errors import SerializationError
    from sketchsyn.io.serial import header_of, read

    obj = _unchecked_example() if kind == SELFTEST else EXAMPLES[kind].build(3)
    cls = type(obj)
    blob = obj.to_bytes()
    head = header_of(blob)
    got = read(blob, head.kind)
    cases = _forgeries(head.kind, got.version, got.meta, got.arrays, got.state or "trusted")

    def alarm(signum: int, frame: Any) -> None:
        raise TimeoutError("case took over 1 s")

    signal.signal(signal.SIGALRM, alarm)
    failures = []
    counts = {"cases": len(cases), "refused": 0, "loaded": 0}
    for field, label, make in cases:
        try:
            forged = make()
        except Exception as exc:  # the forgery cannot be written: a bug of this test
            failures.append(_failure(kind, field, label, exc, "could not pack the forgery"))
            continue
        best = math.inf
        for _attempt in range(2):  # a busy machine gets one retry of a slow case
            start = time.perf_counter()
            outcome: Any = None
            refused = False
            signal.setitimer(signal.ITIMER_REAL, 1.0)
            try:
                loaded = cls.from_bytes(forged)
            except SerializationError as exc:
                refused = True
                if not _names_a_field(str(exc), field, label):
                    outcome = AssertionError(f"refused without naming a field: {exc}")
            except BaseException as exc:  # noqa: BLE001 -- any other escape is the bug
                outcome = exc
            else:
                try:
                    _sane(loaded, cls)
                except BaseException as exc:  # noqa: BLE001
                    outcome = AssertionError(f"loaded, but not sane: {type(exc).__name__} {exc}")
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            best = min(best, time.perf_counter() - start)
            if outcome is not None or best <= CASE_SECONDS:
                break
        if outcome is not None:
            failures.append(_failure(kind, field, label, outcome))
        elif best > CASE_SECONDS:
            failures.append(_failure(kind, field, label, None, f"took {best:.3f} s"))
        else:
            counts["refused" if refused else "loaded"] += 1
    return failures, counts


def _names_a_field(message: str, field: str, label: str) -> bool:
    """A refusal names what it refuses: the forged field or array, or the header field, array
    or version it was checked against."""
    if field.endswith("<arrays>"):  # label: "name: how" or "name[0] = value"
        named = re.split(r"[:\[ ]", label, maxsplit=1)[0]
    else:
        parts = [p for p in re.split(r"[.\[\]/:]", field) if p and not p.isdigit()]
        named = parts[-1] if parts else field
    return f"'{named}'" in message or any(w in message for w in ("field", "array", "version"))


SELFTEST = "_Unchecked"  # a deliberately broken class: the fuzz must report it


def _unchecked_example() -> Any:
    """A summary that allocates from its header without checking it (what the fuzz must
    catch): a huge ``width`` escapes as MemoryError under the address-space limit."""
    import numpy as np

    from sketchsyn.io.summary import Summary

    class _Unchecked(Summary):
        STATE_PRIVACY = "trusted"

        def __init__(self, width: int) -> None:
            self.width = width
            self.table = np.zeros(width, dtype=np.int64)

        @property
        def nbytes(self) -> int:
            return int(self.table.nbytes)

        def _state(self) -> tuple[dict, dict]:
            return {"width": self.width}, {"table": self.table}

        @classmethod
        def _from_state(cls, fields: Any, arrays: Any, version: int, blob: Any, rng: Any) -> Any:
            obj = cls(fields._meta["width"])  # no type or range check: the bug
            obj.table[:] = arrays["table"][: obj.width]
            return obj

    obj = _Unchecked(4)
    obj.table[:] = [1, 2, 3, 4]
    return obj


def _failure(kind: str, field: str, value: str, exc: BaseException | None, note: str = "") -> dict:
    text = "" if exc is None else f"{type(exc).__name__}: {str(exc)[:200]}"
    return {"class": kind, "field": field, "value": value, "exception": text, "note": note}


def _worker(kinds: list[str]) -> None:
    import resource
    import time

    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_BYTES, LIMIT_BYTES))
    sys.path.insert(0, str(HERE))
    report: dict[str, Any] = {}
    from conformance_examples import EXAMPLES

    for kind in kinds or [*sorted(EXAMPLES), SELFTEST]:
        start = time.perf_counter()
        try:
            failures, counts = fuzz_kind(kind)
        except BaseException as exc:  # noqa: BLE001 -- report, don't die
            failures, counts = [_failure(kind, "<example>", "", exc, "could not fuzz")], {}
        report[kind] = {
            "failures": failures,
            **counts,
            "seconds": round(time.perf_counter() - start, 3),
        }
    print(json.dumps(report))


# ------------------------------------------------------------------ the tests (pytest process)
def _run_fuzz(kinds: list[str] | None = None, timeout: float = 240) -> dict[str, Any]:
    env = dict(os.environ)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"
    env["PYTHONPATH"] = os.pathsep.join(
        [str(HERE.parent), str(HERE), env.get("PYTHONPATH", "")]
    ).rstrip(os.pathsep)
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), *(kinds or [])],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=str(HERE.parent),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ != "__main__":
    import pytest

    sys.path.insert(0, str(HERE))
    from conformance_examples import EXAMPLES

    @pytest.fixture(scope="module")
    def report() -> dict[str, Any]:
        return _run_fuzz()

    @pytest.mark.parametrize("kind", sorted(EXAMPLES))
    def test_forged_headers_are_refused(kind: str, report: dict[str, Any]) -> None:
        got = report[kind]
        lines = [
            f"{f['field']} = {f['value']}: {f['exception'] or '-'} {f['note']}".strip()
            for f in got["failures"]
        ]
        assert not lines, f"{kind}: {len(lines)} of {got.get('cases')} forgeries not refused:\n" + (
            "\n".join(lines[:40])
        )
        assert got["refused"] > got["loaded"]  # the forgeries reached the checks

    def test_fuzz_finds_an_unchecked_header(report: dict[str, Any]) -> None:
        """The fuzz has the power to see a class that allocates from an unchecked field."""
        got = report[SELFTEST]["failures"]
        assert any(f["field"] == "width" and "MemoryError" in f["exception"] for f in got), got

    def test_fuzz_is_fast(report: dict[str, Any]) -> None:
        total = sum(r["seconds"] for r in report.values())
        assert total < 60, {k: r["seconds"] for k, r in report.items()}


if __name__ == "__main__":
    _worker(sys.argv[1:])
