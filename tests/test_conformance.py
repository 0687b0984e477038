"""One conformance suite that enrols every registered :class:`~sketchsyn.io.summary.Summary`.

Every kind in :func:`sketchsyn.io.summary.registry` (and every kind with an example in
``conformance_examples``) is checked against every check below; each (kind, check) pair is its
own test id, as in river's ``check_estimator``. A class joins by being defined; a registered
class without an example, or a public stateful class of the package that is not a registered
:class:`Summary`, fails the suite.

The checks: batch equals item by item; bytes, pickle and save/load round trips give an equal
object; the header's state privacy is the object's and is ``"private"`` or ``"trusted"``;
``nbytes`` is a positive int; a refused bad batch raises a ``ValueError`` and leaves the bytes
unchanged; copies follow the release-once rules; the declared state privacy is what the bytes
hold ("private": a summary of one record and of none differ only through noise, audited with
tests/test_privacy_audit.py where it has a mechanism; "trusted": the bytes hold the exact
count).
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import inspect
import json
import math
import pickle
import pkgutil
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conformance_examples import EXAMPLES, Example
from test_privacy_audit import MECHANISMS  # tests/ is on sys.path (no __init__)

import sketchsyn
from sketchsyn.errors import ReleasedError, SerializationError
from sketchsyn.io import checkpoint
from sketchsyn.io.serial import header_of, read
from sketchsyn.io.summary import Summary, registry

SEEDS = range(8)  # independent builds for the state-privacy checks


def _kinds() -> list[str]:
    try:
        kinds = set(registry())
    except Exception:  # a broken registry fails test_registry_is_consistent, not collection
        kinds = set()
    return sorted(kinds | set(EXAMPLES))


def _example(kind: str) -> Example:
    if kind not in EXAMPLES:
        pytest.fail(f"{kind} is registered but has no example in tests/conformance_examples.py")
    return EXAMPLES[kind]


def _flat(obj: Any) -> dict[str, Any]:
    """Every value of an object's bytes, by path (header leaves and array cells), lineage and
    the copy flag left out; nested blobs (hex strings) decoded."""
    got = read(obj.to_bytes(), header_of(obj.to_bytes()).kind)
    return _flat_blob(got.meta, got.arrays)


def _flat_blob(meta: dict, arrays: dict[str, np.ndarray], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}

    def walk(value: Any, path: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                if k not in ("lineage", "frozen"):
                    walk(v, f"{path}.{k}")
        elif isinstance(value, list):
            out[f"{path}#len"] = len(value)
            for i, v in enumerate(value):
                walk(v, f"{path}[{i}]")
        elif isinstance(value, str) and value.startswith(b"SKSY".hex()):
            blob = bytes.fromhex(value)
            got = read(blob, header_of(blob).kind)
            out.update(_flat_blob(got.meta, got.arrays, path + "/"))
        else:
            out[path] = value

    walk(meta, prefix + "meta")
    for name, arr in arrays.items():
        raw = arr.tobytes()
        if arr.dtype == np.uint8 and arr.ndim == 1 and raw[:4] == b"SKSY":
            try:
                blobs = _split_blobs(raw)
            except (ValueError, KeyError, IndexError):  # not blobs after all: compare the bytes
                pass
            else:
                for i, one in enumerate(blobs):
                    got = read(one, header_of(one).kind)
                    out.update(_flat_blob(got.meta, got.arrays, f"{prefix}{name}/{i}/"))
                continue
        out[f"{prefix}{name}#shape"] = arr.shape
        for i, v in enumerate(arr.ravel().tolist()):
            out[f"{prefix}{name}[{i}]"] = v
    return out


def _split_blobs(raw: bytes) -> list[bytes]:
    """Blobs written one after another (a container of summaries), each parsed by its length
    fields (the layout of :mod:`sketchsyn.io.serial`, container version 3)."""
    import struct

    out = []
    while raw:
        if raw[:4] != b"SKSY" or struct.unpack_from("<H", raw, 4)[0] != 3:
            raise ValueError("not a container-3 blob")
        pos = 9 + raw[9] + 1
        hlen = struct.unpack_from("<I", raw, pos + 2)[0]
        pos += 6
        header = json.loads(raw[pos : pos + hlen])
        pos += hlen
        for desc in header["arrays"]:
            pos += np.dtype(desc["dtype"]).itemsize * math.prod(desc["shape"])
        out.append(raw[: pos + 32])
        raw = raw[pos + 32 :]
    return out


def _deterministic_differences(ex: Example) -> list[str]:
    """Entries of the bytes that are the same in every build of the empty input and the same in
    every build of the one-record input, but differ between the two: exact information about
    the record, whatever the noise seed."""
    empty = [_flat(ex.build(s, "empty")) for s in SEEDS]
    one = [_flat(ex.build(s, "one")) for s in SEEDS]
    found = []
    for key in set(empty[0]) | set(one[0]):
        a = {repr(f.get(key)) for f in empty}
        b = {repr(f.get(key)) for f in one}
        if len(a) == 1 and len(b) == 1 and a != b:
            found.append(f"{key}: {a.pop()} -> {b.pop()}")
    return sorted(found)


# ------------------------------------------------------------------ the checks
def check_batch_equals_items(cls: type, ex: Example, monkeypatch: Any) -> None:
    if ex.items is None or not (hasattr(cls, "update") and hasattr(cls, "update_many")):
        pytest.skip(f"{cls.__name__} has no update/update_many pair")
    if ex.taped:
        tape: dict = {}

        def draw(kind: str, param: Any, n: int, src: Any) -> np.ndarray:
            start = tape.get(id(src), (0, src))[0]
            tape[id(src)] = (start + n, src)
            return (np.arange(start, start + n, dtype=np.int64) * 7919 + 13) % 41 - 20

        for name, module in list(sys.modules.items()):
            if name.startswith("sketchsyn.counters") and callable(getattr(module, "_draw", None)):
                monkeypatch.setattr(module, "_draw", draw)
    data = ex.data()
    for variant, make in ex.makers().items():
        a, b, c = make(3), make(3), make(3)
        a.update_many(data)
        for item in ex.items(data):
            b.update(item)
        half = len(data) // 3  # a batch split anywhere gives the same state
        c.update_many(data[:half])
        c.update_many(data[half:])
        # Independent builds have their own lineages (nested ones too): compare the state.
        assert _flat(a) == _flat(b), f"{cls.__name__} {variant}: update_many != item by item"
        assert _flat(a) == _flat(c), f"{cls.__name__} {variant}: a split batch != the whole"
        assert _flat(a) != _flat(make(3)), f"{cls.__name__} {variant}: the batch changed nothing"


def check_bytes_round_trip(cls: type, ex: Example, monkeypatch: Any) -> None:
    objs = [ex.build(3)]
    for make in ex.variants.values():
        obj = make(3)
        ex.feed(obj, ex.data())
        objs.append(obj)
    for obj in objs:
        back = cls.from_bytes(obj.to_bytes())
        assert type(back) is type(obj) and back == obj
        assert back.to_bytes() == cls.from_bytes(back.to_bytes()).to_bytes()


def check_damaged_bytes_refused(cls: type, ex: Example, monkeypatch: Any) -> None:
    blob = ex.build(3).to_bytes()
    flipped = bytearray(blob)
    flipped[len(blob) // 3] ^= 0x10
    for bad in (bytes(flipped), blob[:-5], b""):
        with pytest.raises(SerializationError):
            cls.from_bytes(bad)


def check_pickle_round_trip(cls: type, ex: Example, monkeypatch: Any) -> None:
    obj = ex.build(3)
    back = pickle.loads(pickle.dumps(obj))
    assert type(back) is type(obj) and back == obj


def check_snapshot_is_a_frozen_copy(cls: type, ex: Example, monkeypatch: Any) -> None:
    if ex.built is not None:
        pytest.skip(f"{cls.__name__} is a release: no stream to snapshot")
    obj = ex.build(3)
    snap = obj.snapshot()
    assert type(snap) is type(obj) and snap == obj
    with pytest.raises(ReleasedError):
        ex.feed(snap, ex.one())
    ex.feed(obj, ex.one())
    assert snap != obj, f"{cls.__name__}: the snapshot is a view, not a copy"


def check_merge_equals_concatenation(cls: type, ex: Example, monkeypatch: Any) -> None:
    if not ex.merge_exact:
        pytest.skip(f"{cls.__name__} has no exactly mergeable construction")
    data = ex.data()
    half = len(data) // 2
    for variant in ex.merge_exact:
        make = ex.makers()[variant]
        a, b, whole = make(3), make(4), make(5)
        ex.feed(a, data[:half])
        ex.feed(b, data[half:])
        ex.feed(whole, data)
        a.merge(b)
        assert a == whole, f"{cls.__name__} {variant}: merge differs from the whole stream"


def check_save_load(cls: type, ex: Example, monkeypatch: Any) -> None:
    import tempfile
    from pathlib import Path

    obj = ex.build(3)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "state.sksy"
        obj.save(path)
        back = checkpoint.load(path)
        assert type(back) is type(obj) and back == obj
        assert type(cls.load(path)) is type(obj)


def check_header_state(cls: type, ex: Example, monkeypatch: Any) -> None:
    for which in ("empty", "data"):
        obj = ex.build(3, which)
        state = header_of(obj.to_bytes()).state
        assert state in ("private", "trusted"), f"{cls.__name__} header state {state!r}"
        assert state == obj.state_privacy
    assert issubclass(cls, Summary) and registry().get(cls.kind) is cls


def check_nbytes(cls: type, ex: Example, monkeypatch: Any) -> None:
    sizes = []
    for which in ("empty", "data"):
        size = ex.build(3, which).nbytes
        assert isinstance(size, int) and not isinstance(size, bool) and size > 0, size
        sizes.append(size)
    if ex.built is None and ex.fixed_nbytes:
        assert sizes[0] == sizes[1], f"{cls.__name__}: nbytes changed with the data: {sizes}"


def check_bad_batch_refused(cls: type, ex: Example, monkeypatch: Any) -> None:
    bad = ex.bad()
    if not bad:
        pytest.skip(f"{cls.__name__} takes no batches")
    for label, batch in bad:
        obj = ex.build(3)
        before = obj.to_bytes()
        with pytest.raises(ValueError):
            ex.feed(obj, batch)
        assert obj.to_bytes() == before, f"{cls.__name__}: refused {label} batch changed it"
        ex.feed(obj, ex.one())  # and it is still usable afterwards
        assert obj.to_bytes() != before


def _lineage(obj: Any) -> Any:
    return getattr(obj, "lineage", None)


def check_release_once(cls: type, ex: Example, monkeypatch: Any) -> None:
    if not hasattr(cls, "release") or ex.built is not None:
        pytest.skip(f"{cls.__name__} has no release()")
    if ex.continual:
        pytest.skip(f"{cls.__name__} releases continually (its noise is per step)")
    copies: dict[str, Callable[[Any], Any]] = {
        "snapshot": lambda o: o.snapshot(),
        "pickle": lambda o: pickle.loads(pickle.dumps(o)),
        "from_bytes": lambda o: cls.from_bytes(o.to_bytes()),
        "deepcopy": copy.deepcopy,
    }
    for how, make_copy in copies.items():
        obj = ex.build(3)
        if ex.ready is not None:
            ex.ready(obj)
        dup = make_copy(obj)
        assert _lineage(dup) is not None and _lineage(dup) == _lineage(obj), (
            f"{cls.__name__}: a {how} copy does not share the lineage"
        )
        dup.release()
        before = obj.to_bytes()
        with pytest.raises(ReleasedError):
            ex.feed(obj, ex.one())
        assert obj.to_bytes() == before, f"{cls.__name__}: a refused update changed the state"


def _difference(ex: Example, seed: int) -> dict[str, tuple[Any, Any]]:
    """The entries in which the one-record and the empty build of ``seed`` differ."""
    empty, one = _flat(ex.build(seed, "empty")), _flat(ex.build(seed, "one"))
    return {
        key: (empty.get(key), one.get(key))
        for key in set(empty) | set(one)
        if empty.get(key) != one.get(key)
    }


def _offsets(diff: dict[str, tuple[Any, Any]]) -> dict[str, Any]:
    """What the record changed: numeric entries by their change, the others as they are."""
    out = {}
    for key, (a, b) in diff.items():
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b))
        out[key] = b - a if numeric else (a, b)
    return out


def check_state_privacy_truthful(cls: type, ex: Example, monkeypatch: Any) -> None:
    declared = ex.build(0, "empty").state_privacy
    if declared == "trusted":
        # The bytes hold the exact count: with one seed, the record changes them the same way
        # on every build, and by the same amount whatever the seed.
        assert _flat(ex.build(5, "one")) == _flat(ex.build(5, "one")), (
            f"{cls.__name__}: a seeded build is not deterministic"
        )
        changes = [_offsets(_difference(ex, seed)) for seed in SEEDS[:3]]
        exact = {k: v for k, v in changes[0].items() if all(c.get(k) == v for c in changes)}
        assert exact, (
            f"{cls.__name__} declares trusted state, but the record enters its bytes only through "
            "noise (every change depends on the seed): declare it private"
        )
        return
    assert declared == "private", declared
    leaks = _deterministic_differences(ex)
    assert not leaks, (
        f"{cls.__name__} declares private state, but its bytes tell one record from none "
        f"exactly: {leaks[:5]}"
    )
    # The audits of the shipped state (tests/test_privacy_audit.py's mechanisms of this kind)
    # run there at their full trials, each beside its 2× under-noised build; a second, smaller
    # run of the same audits here added about 25 CPU-s and no check.


CHECKS = [
    check_batch_equals_items,
    check_bytes_round_trip,
    check_damaged_bytes_refused,
    check_pickle_round_trip,
    check_snapshot_is_a_frozen_copy,
    check_merge_equals_concatenation,
    check_save_load,
    check_header_state,
    check_nbytes,
    check_bad_batch_refused,
    check_release_once,
    check_state_privacy_truthful,
]
PAIRS = [(kind, check) for kind in _kinds() for check in CHECKS]


@pytest.mark.parametrize(("kind", "check"), PAIRS, ids=[f"{k}-{c.__name__[6:]}" for k, c in PAIRS])
def test_conformance(kind: str, check: Callable[..., None], monkeypatch: Any) -> None:
    ex = _example(kind)
    cls = registry().get(kind)
    if cls is None:
        cls = type(ex.build(0, "empty"))
    check(cls, ex, monkeypatch)


# ------------------------------------------------------------------ enrolment
@pytest.mark.parametrize("kind", sorted(registry()))
def test_docstring_states_the_saved_state(kind: str) -> None:
    """Each class tells its users, in its docs, what its saved state reveals."""
    cls = registry()[kind]
    said = set(re.findall(r"Saved state: \*\*(private|trusted)\*\*", cls.__doc__ or ""))
    said |= set(re.findall(r"\*\*(private|trusted)\*\* when", cls.__doc__ or ""))
    assert said, f"{kind}'s docstring does not say 'Saved state: **private**' or '**trusted**'"
    if cls.STATE_PRIVACY is not None:
        assert cls.STATE_PRIVACY in said, (kind, cls.STATE_PRIVACY, said)


def test_registry_is_consistent() -> None:
    reg = registry()
    for kind, cls in reg.items():
        assert cls.kind == kind and issubclass(cls, Summary)
        assert cls.STATE_PRIVACY in ("private", "trusted") or isinstance(
            inspect.getattr_static(cls, "state_privacy"), property
        )


@pytest.mark.parametrize("kind", sorted(set(_kinds())))
def test_every_registered_class_has_an_example(kind: str) -> None:
    assert kind in EXAMPLES, f"{kind} is registered but has no example"
    # "PrivHP[schema]": more examples of a registered kind, on another domain
    base = kind.split("[", 1)[0]
    assert base in registry(), f"{kind} has an example but is not a registered Summary"


def _public_stateful_classes() -> dict[str, type]:
    found: dict[str, type] = {}
    for info in pkgutil.walk_packages(sketchsyn.__path__, "sketchsyn."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and value.__module__ == module.__name__
                and not name.startswith("_")
                and value is not Summary
                and not inspect.isabstract(value)
                and any(hasattr(value, a) for a in ("to_bytes", "update_many", "snapshot"))
            ):
                found[f"{module.__name__}.{name}"] = value
    return found


def test_every_public_stateful_class_is_registered() -> None:
    reg = registry()
    missing = [
        path
        for path, cls in _public_stateful_classes().items()
        if not issubclass(cls, Summary) or reg.get(cls.kind) is not cls
    ]
    assert not missing, f"public stateful classes that are not registered Summaries: {missing}"


def test_audit_helpers_cover_the_private_sketches() -> None:
    names = {m.name.split("-")[0] for m in MECHANISMS}
    assert names >= {"CountMinSketch", "CountSketch", "PrivHP", "MarginalSynthesizer"}


# ------------------------------------------------------------------ format version 1 stays readable
# The blobs and their answers were written once by tests/data/make_reference_blobs.py; they pin
# what format version 1 decodes to, whatever later releases change in the samplers.
DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("name", ["CountMinSketch", "CountSketch"])
def test_reference_sketch_blobs_still_load(name: str) -> None:
    cls = getattr(sketchsyn, name)
    answers = json.loads((DATA / "reference_answers_v1.json").read_text())
    s = cls.from_bytes((DATA / f"{name}_v1.bin").read_bytes())
    want = answers[name]
    assert np.asarray(s.query_many(want["keys"])).tolist() == want["answers"]
    assert int(s.table.sum()) == want["table_sum"]
    assert s.epsilon == 1.0 and s.width == 64 and s.depth == 3 and s.seed == 5


def test_reference_privhp_and_release_blobs_still_load() -> None:
    answers = json.loads((DATA / "reference_answers_v1.json").read_text())
    php = sketchsyn.PrivHP.from_bytes((DATA / "PrivHP_v1.bin").read_bytes())
    want = answers["PrivHP"]
    assert php.n_seen == want["n_seen"] and php._tree.tolist() == want["tree"]
    assert int(php._bank.sum()) == want["bank_sum"]
    assert (php.k, php.width, php.depth, php.epsilon) == (8, 32, 8, 1.0)
    blob = (DATA / "PrivateDistribution_v1.bin").read_bytes()
    dist = sketchsyn.PrivateDistribution.from_bytes(blob)
    want = answers["PrivateDistribution"]
    assert dist.total == want["total"] and dist.leaves().count.size == want["n_leaves"]
    assert dist.count([0, 0], [0.5, 1.0]) == pytest.approx(want["count_half"])


def test_state_audit_sees_exact_counts() -> None:
    """The deterministic-difference audit has the power to see a state that holds an exact
    count (a raw sketch), and sees none in the same sketch with its noise."""
    ex = EXAMPLES["CountMinSketch"]
    raw = dataclasses.replace(ex, make=ex.variants["raw"])
    assert _deterministic_differences(raw)
    assert not _deterministic_differences(ex)


# ------------------------------------------------------------------ nbytes is the memory held
# tracemalloc counts the memory freed when an object built by its example is dropped: the
# memory the object alone holds (process-wide caches, such as the exact sampler's tables, stay
# and are not counted). A release is measured as a copy loaded from its bytes, which nothing
# else refers to (the release guard keeps the original alive). Tolerance: ``nbytes`` may leave
# out the Python objects around the arrays, a fixed cost whatever the stream (instance dicts,
# the domain, the lineage, locks, about 0.9 KiB per numpy generator kept for a noise stream):
# measured between 1 and 37 KiB on these examples (OnlineSynthesizer held 89 KiB more than its
# nbytes before its 61 level generators were made lazily), allowed up to NBYTES_ALLOWANCE; and
# an eighth of ``nbytes`` more (arrays grown by doubling, rounded allocations). Larger states
# are checked at scale by their own tests (tests/test_online.py, tests/test_streaming_privtree.py).
NBYTES_ALLOWANCE = 64 * 1024


def _held(make: Callable[[], Any], trials: int = 3) -> tuple[int, int]:
    """(nbytes, bytes freed when the object is dropped) of ``make()``: the least of ``trials``
    measurements. tracemalloc counts every thread, so a thread an earlier test left working
    (a reader thread ending) can free its own memory inside
    one window; it cannot make every window larger, and the object holds the same each time."""
    import gc
    import tracemalloc

    make()  # caches and lazy imports first
    gc.collect()
    # Every object alive now (the test process's modules, pyspark's, pandas') is moved out of
    # the collector's reach: each collection below walks only what make() built (a full one
    # walked the whole heap, about a quarter of a second each, 1.8 s a test).
    gc.freeze()
    results = []
    try:
        for _ in range(trials):
            tracemalloc.start()
            try:
                obj = make()
                gc.collect()
                with_obj = tracemalloc.get_traced_memory()[0]
                nbytes = int(obj.nbytes)
                del obj
                gc.collect()
                results.append((nbytes, with_obj - tracemalloc.get_traced_memory()[0]))
            finally:
                tracemalloc.stop()
    finally:
        gc.unfreeze()
    return min(results, key=lambda r: r[1])


@pytest.mark.parametrize("kind", _kinds())
def test_nbytes_is_the_memory_held(kind: str) -> None:
    ex = _example(kind)
    if ex.built is not None:
        blob = ex.build(3, "data").to_bytes()
        cls = type(ex.build(3, "data"))
        nbytes, held = _held(lambda: cls.from_bytes(blob))
    else:
        nbytes, held = _held(lambda: ex.build(3, "data"))
    assert held <= nbytes + nbytes // 8 + NBYTES_ALLOWANCE, (
        f"{kind} holds {held:,} bytes; its nbytes says {nbytes:,}"
    )
