"""The failures a new user and a fuzzer found in version 0.1, each reproduced.

Written against the public names of ``import sketchsyn`` and the blob container, so the same
file runs on the 0.1 layout too (where every test here fails) and on the new one (where each
passes): the module paths that moved are looked up in both places.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import textwrap
from typing import Any

import numpy as np
import pytest
from limits import cpu_limit, run_limited  # tests/ is on sys.path (no __init__)

import sketchsyn
from sketchsyn import Box, SerializationError


def _module(*names: str) -> Any:
    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ImportError(names)


serial = _module("sketchsyn.io.serial", "sketchsyn.serial")
checkpoint = _module("sketchsyn.io.checkpoint", "sketchsyn.checkpoint")


def _forge(blob: bytes, kind: str, version: int | None = None, **fields: Any) -> bytes:
    """``blob`` with header fields replaced and its (public, unkeyed) digest recomputed."""
    got_kind, got_version, meta, arrays = serial.unpack(blob, kind)
    meta = dict(meta) | fields
    version = got_version if version is None else version
    if hasattr(serial, "header_of"):
        state = serial.header_of(blob).state
        return serial.pack(got_kind, version, meta, arrays, state=state)
    return serial.pack(got_kind, version, meta, arrays)


def _refused_quickly(cls: Any, blob: bytes, field: str) -> None:
    with cpu_limit(0.1, f"refusing {cls.__name__}'s forged {field!r}"):
        with pytest.raises(SerializationError, match=field):
            cls.from_bytes(blob)


def _box2() -> Box:
    return Box.unit(2)


def _points(n: int = 200, d: int = 2) -> np.ndarray:
    return np.random.default_rng(0).random((n, d))


# ------------------------------------------------------------------ checkpoint.load of every kind
def _saved_summaries() -> dict[str, Any]:
    s = sketchsyn
    online = s.OnlineSynthesizer(_box2(), 1.0, rng=1)
    online.update_many(_points())
    continual = s.ContinualPrivHP(_box2(), 1.0, k=4, width=16, horizon=64, depth=5, rng=1)
    continual.update_many(_points(50))
    window = s.FixedWindowSynthesizer(8, 16, 2, 1.0, rng=1)
    window.update_many(np.zeros((2, 8), dtype=np.int64))
    cumulative = s.CumulativeSynthesizer(8, 16, 1.0, rng=1)
    cumulative.update_many(np.zeros((2, 8), dtype=np.int64))
    counter = s.BinaryMechanism(1.0, 16, rng=1)
    counter.update_many(np.ones(5, dtype=np.int64))
    lowdim = s.LowDimSynthesizer(Box.unit(3), 1.0, target_dim=2, rng=1)
    lowdim.update_many(_points(50, 3))
    return {
        "OnlineSynthesizer": online,
        "ContinualPrivHP": continual,
        "FixedWindowSynthesizer": window,
        "CumulativeSynthesizer": cumulative,
        "BinaryMechanism": counter,
        "LowDimSynthesizer": lowdim,
    }


@pytest.mark.parametrize("kind", sorted(_saved_summaries()))
def test_checkpoint_load_reads_what_save_wrote(kind: str, tmp_path: Any) -> None:
    obj = _saved_summaries()[kind]
    path = tmp_path / f"{kind}.sksy"
    obj.save(path)
    loaded = checkpoint.load(path)
    assert type(loaded) is type(obj)
    assert loaded.to_bytes() == obj.to_bytes()


# ------------------------------------------------------------------ forged headers
def test_online_synthesizer_refuses_an_epsilon_it_cannot_realise() -> None:
    online = sketchsyn.OnlineSynthesizer(_box2(), 1.0, rng=1)
    online.update_many(_points())
    _refused_quickly(
        sketchsyn.OnlineSynthesizer,
        _forge(online.to_bytes(), "OnlineSynthesizer", epsilon=2**62),
        "epsilon",
    )


_RUN_LIMITED = textwrap.dedent(
    """
    import resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    import sketchsyn
    blob = open(sys.argv[1], "rb").read()
    try:
        getattr(sketchsyn, sys.argv[2]).from_bytes(blob)
        print("loaded")
    except BaseException as exc:
        print(type(exc).__name__)
    """
)


def _load_under_1_gib(kind: str, blob: bytes, tmp_path: Any) -> str:
    path = tmp_path / "forged.bin"
    path.write_bytes(blob)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    out = run_limited(
        [sys.executable, "-c", _RUN_LIMITED, str(path), kind],
        60,
        capture_output=True,
        text=True,
        env=env,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(sketchsyn.__file__))),
    )
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr[-300:]


@pytest.mark.parametrize("size", [2**31])
def test_sparse_bank_size_is_checked_before_allocating(size: int, tmp_path: Any) -> None:
    bank = sketchsyn.InhomogeneousSparseBank(3, 0.5, sketchsyn.online_budgets(0.5, 2, 1), 1)
    forged = _forge(bank.to_bytes(), "InhomogeneousSparseBank", size=size)
    assert _load_under_1_gib("InhomogeneousSparseBank", forged, tmp_path) == "SerializationError"


@pytest.mark.parametrize("n", [2**31, 2**40])
def test_cumulative_n_is_checked_before_allocating(n: int, tmp_path: Any) -> None:
    syn = sketchsyn.CumulativeSynthesizer(8, 16, 1.0, rng=1)
    forged = _forge(syn.to_bytes(), "CumulativeSynthesizer", n=n)
    assert _load_under_1_gib("CumulativeSynthesizer", forged, tmp_path) == "SerializationError"


def _float_cases() -> list[tuple[str, Any, str]]:
    s = sketchsyn
    tree = s.PrivTree(_box2(), 1.0, level=4, rng=1)
    tree.update_many(_points())
    php = s.PrivHP(_box2(), 1.0, k=4, width=16, depth=5, rng=1)
    php.update_many(_points())
    return [
        ("BinaryMechanism", s.BinaryMechanism(1.0, 16, rng=1), "epsilon"),
        ("KaryTreeCounter", s.KaryTreeCounter(1.0, 64, k=5, rng=1), "epsilon"),
        ("SparseCounter", s.SparseCounter(2.0, 64, rng=1), "epsilon"),
        ("PrivTree", tree, "epsilon"),
        (
            "ContinualPrivHP",
            s.ContinualPrivHP(_box2(), 1.0, k=4, width=16, horizon=64, depth=5, rng=1),
            "epsilon",
        ),  # noqa: E501
        ("PrivHP", php, "epsilon"),
        ("FixedWindowSynthesizer", s.FixedWindowSynthesizer(8, 16, 2, 1.0, rng=1), "rho"),
    ]


@pytest.mark.parametrize("value", [1e-320, 1.5e308])
@pytest.mark.parametrize("case", range(7))
def test_forged_floats_are_refused_by_name(case: int, value: float) -> None:
    kind, obj, field = _float_cases()[case]
    blob = obj.to_bytes()
    _, _, meta, _ = serial.unpack(blob, kind)
    assert field in meta, f"{kind} header has no {field!r}: {sorted(meta)}"
    cls = getattr(sketchsyn, kind)
    _refused_quickly(cls, _forge(blob, kind, **{field: value}), field)


def test_fixed_window_refuses_a_tiny_beta() -> None:
    syn = sketchsyn.FixedWindowSynthesizer(8, 16, 2, 1.0, rng=1)
    _refused_quickly(
        sketchsyn.FixedWindowSynthesizer,
        _forge(syn.to_bytes(), "FixedWindowSynthesizer", beta=1e-320),
        "beta",
    )


def test_lowdim_refuses_a_forged_split() -> None:
    syn = sketchsyn.LowDimSynthesizer(Box.unit(3), 1.0, rng=1)
    _refused_quickly(
        sketchsyn.LowDimSynthesizer,
        _forge(syn.to_bytes(), "LowDimSynthesizer", split="abc"),
        "split",
    )


@pytest.mark.parametrize("kind", ["ContinualPrivHP", "LowDimSynthesizer"])
def test_a_newer_format_version_is_refused(kind: str) -> None:
    obj = _saved_summaries()[kind]
    blob = obj.to_bytes()
    version = serial.unpack(blob, kind)[1]
    _refused_quickly(type(obj), _forge(blob, kind, version=version + 1), "version")


def _flag_and_nan_cases() -> dict[str, Any]:
    s = sketchsyn
    counter = s.BinaryMechanism(1.0, 16, rng=1)
    counter.update_many(np.ones(3, dtype=np.int64))
    online = s.OnlineSynthesizer(_box2(), 1.0, rng=1)
    online.update_many(_points(50))
    lowdim = s.LowDimSynthesizer(Box.unit(3), 1.0, rng=1)
    lowdim.update_many(_points(50, 3))
    return {
        "BinaryMechanism": counter,
        "SparseCounter": s.SparseCounter(2.0, 64, rng=1),
        "KaryTreeCounter": s.KaryTreeCounter(1.0, 64, k=5, rng=1),
        "OnlineSynthesizer": online,
        "FixedWindowSynthesizer": s.FixedWindowSynthesizer(8, 16, 2, 1.0, rng=1),
        "CumulativeSynthesizer": s.CumulativeSynthesizer(8, 16, 1.0, rng=1),
        "LowDimSynthesizer": lowdim,
    }


def _repack(blob: bytes, kind: str, meta: dict, arrays: dict) -> bytes:
    version = serial.unpack(blob, kind)[1]
    if hasattr(serial, "header_of"):
        return serial.pack(kind, version, meta, arrays, state=serial.header_of(blob).state)
    return serial.pack(kind, version, meta, arrays)


@pytest.mark.parametrize(
    "kind",
    ["BinaryMechanism", "SparseCounter", "KaryTreeCounter", "OnlineSynthesizer"]
    + ["FixedWindowSynthesizer", "CumulativeSynthesizer"],
)
@pytest.mark.parametrize("value", [1, "yes", None, [True]])
def test_frozen_flags_are_real_bools(kind: str, value: Any) -> None:
    obj = _flag_and_nan_cases()[kind]
    blob = obj.to_bytes()
    _refused_quickly(type(obj), _forge(blob, kind, frozen=value), "frozen")


@pytest.mark.parametrize(
    ("kind", "array"),
    [("BinaryMechanism", "open"), ("SparseCounter", "sub.open")]
    + [("LowDimSynthesizer", "s1"), ("LowDimSynthesizer", "s2")],
)
def test_nan_is_not_cast_into_an_integer_array(kind: str, array: str) -> None:
    obj = _flag_and_nan_cases()[kind]
    blob = obj.to_bytes()
    _, _, meta, arrays = serial.unpack(blob, kind)
    assert array in arrays, sorted(arrays)
    bad = arrays[array].astype(np.float64)
    bad.flat[0] = np.nan
    forged = _repack(blob, kind, meta, dict(arrays) | {array: bad})
    with pytest.raises(SerializationError):
        type(obj).from_bytes(forged)


# ------------------------------------------------------------------ shapes, privacy, budgets
def test_lowdim_fit_refuses_a_wrong_width_instead_of_reshaping() -> None:
    X = np.random.default_rng(0).random((2000, 5))
    with pytest.raises(sketchsyn.InputError, match=r"\(2000, 4\)"):
        sketchsyn.LowDimSynthesizer(Box.unit(5), 1.0).fit(X[:, :4])


@pytest.mark.parametrize("kind", ["BinaryMechanism", "KaryTreeCounter"])
def test_a_counter_state_holding_open_sums_is_declared_trusted(kind: str) -> None:
    """A blob shipped at t0 and a later release differ by an exact count: the state is a
    curator's, and the blob must say so."""
    counter = getattr(sketchsyn, kind)(1.0, 16, rng=1)
    counter.update_many(np.array([1, 0, 1], dtype=np.int64))
    blob = counter.to_bytes()
    if hasattr(serial, "header_of"):
        assert serial.header_of(blob).state == "trusted"
        assert counter.state_privacy == "trusted"
    else:  # 0.1 wrote "exact_state": false
        assert serial.unpack(blob, kind)[2].get("exact_state") is True


def test_inhomogeneous_budgets_above_epsilon_are_refused() -> None:
    with pytest.raises(sketchsyn.ParameterError):
        sketchsyn.InhomogeneousSparseCounter(0.5, lambda level: 0.9, 0)


def test_sparse_bank_refuses_unsorted_event_times() -> None:
    bank = sketchsyn.InhomogeneousSparseBank(3, 0.5, sketchsyn.online_budgets(0.5, 2, 1), 1)
    before = bank.to_bytes()
    with pytest.raises(sketchsyn.InputError):
        bank.update_events(8, np.array([0, 1]), np.array([7, 6]))
    assert bank.to_bytes() == before


def test_save_leaves_no_temporary_of_a_killed_writer(tmp_path: Any) -> None:
    target = tmp_path / "state.sksy"
    cms = sketchsyn.CountMinSketch(8, 2, 1.0, rng=1)
    script = textwrap.dedent(
        f"""
        import os, signal, sketchsyn
        os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)
        sketchsyn.CountMinSketch(8, 2, 1.0, rng=1).save({str(target)!r})
        """
    )
    run_limited([sys.executable, "-c", script], 60)
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # the killed one
    cms.save(target)
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert json.dumps(sorted(p.name for p in tmp_path.iterdir())) == '["state.sksy"]'


@pytest.mark.parametrize("constant", [b"NaN      ", b"Infinity ", b"-Infinity"])
def test_a_non_finite_header_value_is_refused_by_its_field_name(constant: bytes) -> None:
    """JSON's NaN / Infinity (which the writer never emits) name the field they sit in."""
    import hashlib

    counter = sketchsyn.BinaryMechanism(1.0, 16, rng=1)
    marked = _forge(counter.to_bytes(), "BinaryMechanism", epsilon=12345.678)
    body = marked[:-32].replace(b"12345.678", constant)
    blob = body + hashlib.blake2b(body, digest_size=32).digest()
    with pytest.raises(SerializationError, match="'epsilon' must be a finite number"):
        sketchsyn.BinaryMechanism.from_bytes(blob)


# ------------------------------------------------------------------ issue 34: extreme integers
def _with_array(obj: Any, name: str, index: int, value: int) -> bytes:
    """``obj``'s blob with ``arrays[name].flat[index] = value`` (digest recomputed)."""
    kind = serial.header_of(obj.to_bytes()).kind
    blob = obj.to_bytes()
    _, _, meta, arrays = serial.unpack(blob, kind)
    changed = arrays[name].copy()
    changed.flat[index] = value
    return _repack(blob, kind, meta, dict(arrays) | {name: changed})


def _continual(**kw: Any) -> Any:
    c = sketchsyn.ContinualPrivHP(_box2(), 1.0, k=4, width=16, horizon=64, depth=5, rng=1, **kw)
    c.update_many(_points(30))
    c.cell_values(4)  # noise drawn, and the hybrid's closed totals
    return c


@pytest.mark.parametrize(
    ("kw", "array"),
    [
        (dict(), "knoise"),
        (dict(counter="binary"), "noise"),
        (dict(counter="hybrid"), "ybase"),
        (dict(counter="honaker", releases=8), "hopen"),
        (dict(sketch="count-sketch"), "bank"),
        (dict(), "tree"),
    ],
)
@pytest.mark.parametrize("value", [-(2**63), 2**63 - 1])
def test_continual_arrays_holding_int64_extremes_are_refused(
    kw: dict, array: str, value: int
) -> None:
    # np.abs(-2**63) is -2**63: a range check on abs() let the minimum through, and the loaded
    # ContinualPrivHP released -9223372036854774608.
    blob = _with_array(_continual(**kw), array, 0, value)
    _refused_quickly(sketchsyn.ContinualPrivHP, blob, repr(array))


@pytest.mark.parametrize(("field", "value"), [("release_k", 99), ("counter_depth", 0)])
def test_continual_derived_header_fields_must_be_what_the_others_give(
    field: str, value: int
) -> None:
    blob = _forge(_continual().to_bytes(), "ContinualPrivHP", **{field: value})
    _refused_quickly(sketchsyn.ContinualPrivHP, blob, field)


def test_kary_tree_bank_refuses_blocks_no_counter_at_t_holds() -> None:
    bank = sketchsyn.KaryTreeBank(3, 1.0, 64, k=5, rng=1)
    bank.update_many(np.ones((40, 3), dtype=np.int64))
    blob = bank.to_bytes()
    _refused_quickly(sketchsyn.KaryTreeBank, _forge(blob, "KaryTreeBank", t=0), "blocks")
    _refused_quickly(sketchsyn.KaryTreeBank, _forge(blob, "KaryTreeBank", t=39), "last")
    counter = sketchsyn.KaryTreeCounter(1.0, 64, k=5, rng=1)
    counter.update_many(np.ones(40, dtype=np.int64))
    forged = _forge(counter.to_bytes(), "KaryTreeCounter", last=int(counter.query()) + 1)
    _refused_quickly(sketchsyn.KaryTreeCounter, forged, "last")


@pytest.mark.parametrize("kind", ["KaryTreeBank", "KaryTreeCounter", "BinaryMechanism"])
def test_a_counter_blob_without_frozen_or_with_an_unknown_field_is_refused(kind: str) -> None:
    obj = {
        "KaryTreeBank": lambda: sketchsyn.KaryTreeBank(3, 1.0, 64, k=5, rng=1),
        "KaryTreeCounter": lambda: sketchsyn.KaryTreeCounter(1.0, 64, k=5, rng=1),
        "BinaryMechanism": lambda: sketchsyn.BinaryMechanism(1.0, 64, rng=1),
    }[kind]()
    blob = obj.to_bytes()
    _, _, meta, arrays = serial.unpack(blob, kind)
    without = {k: v for k, v in meta.items() if k != "frozen"}
    _refused_quickly(type(obj), _repack(blob, kind, without, arrays), "frozen")
    _refused_quickly(type(obj), _repack(blob, kind, meta | {"extra": 1}, arrays), "extra")
