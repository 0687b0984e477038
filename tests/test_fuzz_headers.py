"""Forged headers: every field of every kind's blob, set to hostile values, is refused quickly.

For each kind of ``conformance_examples``, and each of its variants (``"ContinualPrivHP/hybrid"``:
the same class built another way, with other arrays), a valid blob is decoded with
:func:`sketchsyn.io.serial.read` and forged, case by case, in three groups:

* ``values``: every header field (recursively into nested records and lists, bounded) set to a
  wrong type, a negative, zero, huge, non-finite or subnormal value, or removed when nested;
  every array truncated, extended by one along each axis, retyped, flattened, its first
  element set to NaN, inf, 2**62 or -1; the format version moved by ±1.
* ``extremes``: every header field set to the int64 minimum and maximum and to ±2**53; the
  first and last element of every array set to the extremes of its dtype and to ±2**53 (float
  arrays: ±2**53, ±2**63, 1.7e308).
* ``structure``: every top-level header field removed or renamed, an unknown field added;
  every array removed or renamed, an unknown array added.

Each forged blob is re-packed with :func:`sketchsyn.io.serial.pack` (same kind and state, digest
recomputed; NaN and ±inf written by a JSON encoder that allows them) and loaded. A case passes
when it ends in :class:`~sketchsyn.errors.SerializationError` naming a field, or loads into an
object that passes a sanity check (some forgeries are valid, e.g. another seed), except that
these must be refused: a ``structure`` case (the blob is not what the class writes), and an
int64 array holding the int64 minimum or maximum (no count, noise, step or index of any class
comes near 2**63; the value that ``np.abs`` cannot negate).

Limits are on what the code controls, not the wall clock (``tests/limits.py``): a case may use
at most 0.1 s of CPU (more is reported as "slow"; one retry) and is stopped at 1 s of CPU
(``ITIMER_PROF``); the cases run in one subprocess under a 1 GiB address-space limit (set before
numpy is imported, with single-threaded BLAS) and a CPU-time limit, which reports the failures
as JSON; each (kind, group) is then its own test here. A defect found in a class is marked
in :data:`KNOWN` as a strict xfail naming the class, so it fails the suite the day it is fixed
(and the mark must go). Run it by hand: ``python tests/test_fuzz_headers.py [Kind ...]``.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

HERE = Path(__file__).resolve().parent
LIMIT_BYTES = 1 << 30
CASE_CPU_SECONDS = 0.1  # CPU time one case may take (more is reported as slow)
CASE_CPU_STOP = 1.0  # CPU time after which a case is stopped
WORKER_CPU_SECONDS = 600  # RLIMIT_CPU of the worker process
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
EXTREME_VALUES: list[tuple[str, Any]] = [
    ("-2**63", -(2**63)),
    ("2**63-1", 2**63 - 1),
    ("2**53", 2**53),
    ("-2**53", -(2**53)),
]
GROUPS = ("values", "extremes", "structure")
MAX_DEPTH = 4  # how deep into nested records and lists the fields are forged
MAX_ITEMS = 3  # list items forged per list: the first, the middle, the last

# Defects the fuzz finds, each a strict xfail naming the class and what loads: a line
# ``(class, group): "what loads"``. None today (issue 34 fixed the last ones); a strict xfail
# xpasses, failing the suite, the day its class is fixed: then delete its line.
KNOWN: dict[tuple[str, str], str] = {}


class Case(NamedTuple):
    group: str  # one of GROUPS
    field: str  # the forged header field path, "<arrays>" or "<version>"
    label: str  # what was done to it
    make: Callable[[], bytes]  # the forged blob
    refuse: bool  # True: loading must raise SerializationError


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


def _renamed(mapping: dict, name: str) -> dict:
    """``mapping`` with the key ``name`` renamed ``name + "_x"`` (same value, same order)."""
    return {(f"{k}_x" if k == name else k): v for k, v in mapping.items()}


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


def _array_cases(arrays: dict) -> list[tuple[str, str, dict, bool]]:
    """``(group, label, arrays, must be refused)`` for every array forgery."""
    import numpy as np

    out = []
    for name, arr in arrays.items():
        for axis in range(arr.ndim):
            if arr.shape[axis] > 0:
                cut = dict(arrays)
                cut[name] = np.take(arr, range(arr.shape[axis] - 1), axis=axis)
                out.append(("values", f"{name}: axis {axis} -1", cut, False))
            grown = dict(arrays)
            extra = (
                np.take(arr, [arr.shape[axis] - 1], axis=axis)
                if arr.shape[axis]
                else (np.zeros(arr.shape[:axis] + (1,) + arr.shape[axis + 1 :], dtype=arr.dtype))
            )
            grown[name] = np.concatenate([arr, extra], axis=axis)
            out.append(("values", f"{name}: axis {axis} +1", grown, False))
        other = np.float64 if arr.dtype.kind in "iub" else np.int64
        retyped = dict(arrays)
        retyped[name] = arr.astype(other)
        out.append(("values", f"{name}: as {np.dtype(other)}", retyped, False))
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
                out.append(("values", f"{name}[0] = {label}", poked, False))
            for label, value, refuse in _extremes(arr.dtype):
                for where in sorted({0, arr.size - 1}):
                    poked = dict(arrays)
                    poked[name] = arr.copy()
                    poked[name].flat[where] = value
                    out.append(("extremes", f"{name}[{where}] = {label}", poked, refuse))
        if arr.ndim == 0 or arr.size:
            flat = dict(arrays)
            flat[name] = arr.ravel()[:-1] if arr.ndim else arr.reshape(1)
            out.append(("values", f"{name}: flattened", flat, False))
        missing = {k: v for k, v in arrays.items() if k != name}
        out.append(("structure", f"{name}: missing", missing, True))
        out.append(("structure", f"{name}: renamed", _renamed(arrays, name), True))
    extra = dict(arrays)
    extra["extra_array"] = np.zeros(1, dtype=np.int64)
    out.append(("structure", "extra_array: added", extra, True))
    return out


def _extremes(dtype: Any) -> list[tuple[str, Any, bool]]:
    """``(label, value, must be refused)`` of the extreme values of an array's ``dtype``."""
    import numpy as np

    if dtype.kind == "f":
        return [(s, float(v), False) for s, v in (("2**53", 2.0**53), ("-2**53", -(2.0**53)),
                ("2**63", 2.0**63), ("-2**63", -(2.0**63)), ("1.7e308", 1.7e308))]  # fmt: skip
    if dtype.kind not in "iu":
        return []
    info = np.iinfo(dtype)
    int64 = dtype == np.dtype(np.int64)
    out = [(f"{dtype.name} min", int(info.min), int64), (f"{dtype.name} max", int(info.max), int64)]
    if dtype.itemsize == 8:
        out += [("2**53", 2**53, False)] + ([("-2**53", -(2**53), False)] if int64 else [])
    return [c for c in out if not (c[0].endswith(" min") and c[1] == 0)]


def _sane(obj: Any, cls: type) -> None:
    """A loaded forgery must be a usable object of its class, of a size it could hold."""
    assert isinstance(obj, cls), type(obj)
    size = obj.nbytes
    assert isinstance(size, int) and 0 < size <= LIMIT_BYTES, size
    blob = obj.to_bytes()
    assert type(obj).from_bytes(blob).to_bytes() == blob


def _forgeries(
    kind: str, version: int, meta: dict, arrays: dict, state: str, prefix: str = "", depth: int = 0
) -> list[Case]:
    """Every forgery of one blob; a nested blob (a ``uint8`` array holding a sketchsyn blob) is
    forged inside too, the first one of each kind only (a synthesizer nests several counters of
    one kind, which one loader reads)."""
    import numpy as np

    from sketchsyn.io.serial import header_of, read

    def blob(meta: dict = meta, arrays: dict = arrays, version: int = version) -> Callable:
        return lambda: _pack(kind, version, meta, arrays, state)

    out: list[Case] = []
    for path in _paths(meta):
        field = prefix + ".".join(map(str, path))
        for label, value in BAD_VALUES:
            out.append(Case("values", field, label, blob(meta=_forged(meta, path, value)), False))
        for label, value in EXTREME_VALUES:
            forged = blob(meta=_forged(meta, path, value))
            out.append(Case("extremes", field, label, forged, False))
        top = len(path) == 1
        gone = blob(meta=_forged(meta, path, _DELETE))
        out.append(Case("structure" if top else "values", field, "deleted", gone, top))
        if top:
            renamed = blob(meta=_renamed(meta, path[0]))
            out.append(Case("structure", field, "renamed", renamed, True))
    extra = dict(meta, extra_field=0)
    out.append(Case("structure", prefix + "extra_field", "added", blob(meta=extra), True))
    for group, label, changed, refuse in _array_cases(arrays):
        out.append(Case(group, prefix + "<arrays>", label, blob(arrays=changed), refuse))
    for dv in (-1, 1):
        if 0 <= version + dv < 2**16:
            moved = blob(version=version + dv)
            out.append(Case("values", prefix + "<version>", str(version + dv), moved, False))
    nested_kinds = set()
    for name, arr in arrays.items():
        raw = arr.tobytes()
        if depth or arr.dtype != np.uint8 or arr.ndim != 1 or raw[:4] != b"SKSY":
            continue
        try:
            inner = read(raw, header_of(raw).kind)
        except ValueError:  # several blobs concatenated, not one: forged as an array only
            continue
        if inner.kind in nested_kinds:
            continue
        nested_kinds.add(inner.kind)
        for case in _forgeries(
            header_of(raw).kind,
            inner.version,
            inner.meta,
            inner.arrays,
            inner.state or "trusted",
            f"{prefix}{name}/",
            depth + 1,
        ):

            def nested(make: Callable[[], bytes] = case.make, name: str = name) -> bytes:
                changed = dict(arrays)
                changed[name] = np.frombuffer(make(), dtype=np.uint8)
                return _pack(kind, version, meta, changed, state)

            out.append(case._replace(make=nested))
    return out


def kinds() -> list[str]:
    """Every kind of ``conformance_examples`` and every variant (``"Kind/variant"``)."""
    from conformance_examples import EXAMPLES

    out = []
    for kind in sorted(EXAMPLES):
        out.append(kind)
        out.extend(f"{kind}/{v}" for v in EXAMPLES[kind].variants)
    return out


def _example(kind: str) -> Any:
    """The fed example of ``kind`` (``"Kind/variant"``: that variant, fed the same data)."""
    from conformance_examples import EXAMPLES

    name, _, variant = kind.partition("/")
    ex = EXAMPLES[name]
    if not variant:
        return ex.build(3)
    obj = ex.variants[variant](3)
    ex.feed(obj, ex.data())
    return obj


class _CpuLimit(Exception):
    """A case used more CPU than :data:`CASE_CPU_STOP`."""


def _load(cls: type, forged: bytes, case: Case) -> tuple[Any, bool]:
    """``(problem or None, refused)`` of loading one forgery (the sanity check included)."""
    from sketchsyn.errors import SerializationError

    try:
        loaded = cls.from_bytes(forged)
    except SerializationError as exc:
        if not _names_a_field(str(exc), case.field, case.label):
            return AssertionError(f"refused without naming a field: {exc}"), True
        return None, True
    except BaseException as exc:  # noqa: BLE001 -- any other escape is the bug
        return exc, False
    if case.refuse:
        return AssertionError("loaded, but the class writes no such blob"), False
    try:
        _sane(loaded, cls)
    except BaseException as exc:  # noqa: BLE001
        return AssertionError(f"loaded, but not sane: {type(exc).__name__} {exc}"), False
    return None, False


def fuzz_kind(kind: str) -> dict[str, dict[str, Any]]:
    """Forge every field of ``kind``'s example blob: per group, the failures and the counts
    of outcomes."""
    import signal
    import time

    from sketchsyn.io.serial import header_of, read

    obj = _unchecked_example() if kind == SELFTEST else _example(kind)
    cls = type(obj)
    blob = obj.to_bytes()
    head = header_of(blob)
    got = read(blob, head.kind)
    cases = _forgeries(head.kind, got.version, got.meta, got.arrays, got.state or "trusted")

    def stop(signum: int, frame: Any) -> None:
        raise _CpuLimit(f"slow: stopped after {CASE_CPU_STOP} s of CPU")

    signal.signal(signal.SIGPROF, stop)
    report = {g: {"failures": [], "cases": 0, "refused": 0, "loaded": 0} for g in GROUPS}
    for case in cases:
        part = report[case.group]
        part["cases"] += 1
        try:
            forged = case.make()
        except Exception as exc:  # the forgery cannot be written: a bug of this test
            part["failures"].append(_failure(kind, case, exc, "could not pack the forgery"))
            continue
        best = math.inf
        for _attempt in range(2):  # a slow case gets one retry (a cold cache, a page fault)
            start = time.process_time()
            signal.setitimer(signal.ITIMER_PROF, CASE_CPU_STOP)
            try:
                problem, refused = _load(cls, forged, case)
            except _CpuLimit as exc:  # raised between the load and the timer's reset
                problem, refused = exc, False
            finally:
                signal.setitimer(signal.ITIMER_PROF, 0)
            best = min(best, time.process_time() - start)
            if problem is not None or best <= CASE_CPU_SECONDS:
                break
        if problem is not None:
            part["failures"].append(_failure(kind, case, problem))
        elif best > CASE_CPU_SECONDS:
            note = f"slow: {best:.3f} s of CPU (limit {CASE_CPU_SECONDS} s), not a refusal issue"
            part["failures"].append(_failure(kind, case, None, note))
        else:
            part["refused" if refused else "loaded"] += 1
    return report


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
    catch): a huge ``width`` escapes as MemoryError under the address-space limit, and an
    extra field or array is ignored."""
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


def _failure(kind: str, case: Case, exc: BaseException | None, note: str = "") -> dict:
    text = "" if exc is None else f"{type(exc).__name__}: {str(exc)[:200]}"
    return {
        "class": kind,
        "field": case.field,
        "value": case.label,
        "exception": text,
        "note": note,
    }


def _worker(names: list[str]) -> None:
    import resource
    import time

    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_BYTES, LIMIT_BYTES))
    sys.path.insert(0, str(HERE))
    report: dict[str, Any] = {}
    for kind in names or [*kinds(), SELFTEST]:
        start = time.process_time()
        try:
            groups = fuzz_kind(kind)
        except BaseException as exc:  # noqa: BLE001 -- report, don't die
            case = Case("values", "<example>", "", lambda: b"", False)
            fail = [_failure(kind, case, exc, "could not fuzz")]
            groups = {g: {"failures": fail, "cases": 0, "refused": 0, "loaded": 0} for g in GROUPS}
        report[kind] = {"groups": groups, "cpu_seconds": round(time.process_time() - start, 3)}
    print(json.dumps(report))


# ------------------------------------------------------------------ the tests (pytest process)
def _run_fuzz(names: list[str] | None = None) -> dict[str, Any]:
    env = dict(os.environ)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"
    env["PYTHONPATH"] = os.pathsep.join(
        [str(HERE.parent), str(HERE), env.get("PYTHONPATH", "")]
    ).rstrip(os.pathsep)
    done = run_limited(
        [sys.executable, str(Path(__file__).resolve()), *(names or [])],
        WORKER_CPU_SECONDS,
        capture_output=True,
        text=True,
        env=env,
        cwd=str(HERE.parent),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ != "__main__":
    import pytest

    sys.path.insert(0, str(HERE))
    from limits import run_limited

    @pytest.fixture(scope="module")
    def report() -> dict[str, Any]:
        return _run_fuzz()

    def _params() -> list[Any]:
        out = []
        for kind in kinds():
            for group in GROUPS:
                why = KNOWN.get((kind, group))
                marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
                out.append(pytest.param(kind, group, marks=marks, id=f"{kind}-{group}"))
        return out

    @pytest.mark.parametrize(("kind", "group"), _params())
    def test_forged_headers_are_refused(kind: str, group: str, report: dict[str, Any]) -> None:
        got = report[kind]["groups"][group]
        lines = [
            f"{f['field']} = {f['value']}: {f['exception'] or '-'} {f['note']}".strip()
            for f in got["failures"]
        ]
        assert not lines, (
            f"{kind} ({group}): {len(lines)} of {got.get('cases')} forgeries failed:\n"
            + "\n".join(lines[:40])
        )
        assert got["cases"] > 0
        if group == "values":
            assert got["refused"] > got["loaded"]  # the forgeries reached the checks

    def test_fuzz_finds_an_unchecked_header(report: dict[str, Any]) -> None:
        """The fuzz has the power to see a class that allocates from an unchecked field, loads
        an int64 extreme and ignores an unknown field or array."""
        groups = report[SELFTEST]["groups"]
        got = groups["values"]["failures"]
        assert any(f["field"] == "width" and "MemoryError" in f["exception"] for f in got), got
        extremes = {f["value"] for f in groups["extremes"]["failures"]}
        assert {"table[0] = int64 min", "table[3] = int64 max"} <= extremes, extremes
        structure = {(f["field"], f["value"]) for f in groups["structure"]["failures"]}
        assert {("extra_field", "added"), ("<arrays>", "extra_array: added")} <= structure

    def test_fuzz_is_fast(report: dict[str, Any]) -> None:
        total = sum(r["cpu_seconds"] for r in report.values())
        assert total < 120, f"slow: {total:.1f} s of CPU in all " + str(
            {k: r["cpu_seconds"] for k, r in report.items()}
        )


if __name__ == "__main__":
    _worker(sys.argv[1:])


def test_a_schema_of_many_categories_loads_and_is_refused_without_a_step_per_category():
    """Issue 50, item 13: "A blob whose schema has 10⁶ categories takes 10–14 s to refuse or
    load. Bound the schema size in the header check, or make the walk linear and cheap." The
    header checks and the schema walk run in C-level passes: the Python calls made while
    loading (or refusing) such a blob do not grow with its categories
    (``python benchmarks/bench_large_schema.py`` times 10⁶ categories)."""
    import cProfile
    import pstats

    from sketchsyn import PrivHP, Schema
    from sketchsyn.errors import SerializationError
    from sketchsyn.io import serial

    cats = [f"c{i}" for i in range(200_000)]
    schema = Schema.from_dict(
        {"columns": [{"name": "x", "kind": "categorical", "categories": cats}]}
    )
    release = PrivHP(schema, 1.0, 8, 64, depth=6, rng=0).release()
    blob = release.to_bytes()
    got = serial.read(blob, type(release).__name__)
    meta = json.loads(json.dumps(got.meta))
    meta["domain"]["columns"][0]["categories"].append(float("nan"))  # deep in the schema
    forged = _pack(got.kind, got.version, meta, got.arrays, got.state)

    def calls(fn) -> int:
        profile = cProfile.Profile()
        profile.runcall(fn)
        return pstats.Stats(profile).total_calls  # type: ignore[attr-defined]

    assert calls(lambda: type(release).from_bytes(blob)) < 5_000

    def refuse() -> None:
        with pytest.raises(SerializationError, match="must be a finite number"):
            type(release).from_bytes(forged)

    assert calls(refuse) < 5_000
