"""Privacy of saved and shipped state, release-once across copies, untrusted bytes and input.

Each test here failed on the code before the hardening (issue 9) and names the item it covers.
"""

from __future__ import annotations

import copy
import json
import pickle
import threading
import tracemalloc
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from limits import cpu_limit  # tests/ is on sys.path (no __init__)

from sketchsyn import (
    PMM,
    PSMM,
    BitDomain,
    Box,
    CountMinSketch,
    CountSketch,
    GridHistogram,
    PrivHP,
)
from sketchsyn.errors import (
    ConcurrentUseError,
    IncompatibleError,
    InputError,
    ParameterError,
    ReleasedError,
    SerializationError,
)
from sketchsyn.io.serial import pack, unpack

BOX = Box.unit(2)


def _points(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).beta(2, 5, size=(n, 2))


def _php(**kw) -> PrivHP:
    args = {"epsilon": 1.0, "k": 8, "width": 32, "depth": 10} | kw
    return PrivHP(BOX, **args)


def _offline() -> list:
    return [
        PMM(BOX, 1.0, depth=6),
        PSMM(BOX, 1.0, depth=4),
        GridHistogram(BOX, 1.0, level=6),
    ]


def _forge(blob: bytes, kind: str, edit) -> bytes:
    """Re-pack a blob after ``edit(meta, arrays)``: the (unkeyed) checksum is valid again."""
    _, version, meta, arrays = unpack(blob, kind)
    edit(meta, arrays)
    return pack(kind, version, meta, arrays, state="trusted")


# ------------------------------------------------------------------ 1. no exact data shipped
def test_shipped_privhp_bytes_hold_no_exact_count():
    blobs = []
    for n in (999, 1000):
        php = _php()
        php.update_many(_points(n))
        blobs.append(php.to_bytes())
        _, _, meta, arrays = unpack(blobs[-1], "PrivHP")
        assert not {"n_seen", "n_dropped", "released_at", "diagnostics"} & set(meta)
        assert set(arrays) == {"tree", "bank", "sigmas"}
        assert "n_seen" not in repr(php) and str(n) not in repr(php)
        back = pickle.loads(pickle.dumps(php))
        assert back.n_seen == 0  # the exact count stayed with the data holder
        assert copy.deepcopy(php).n_seen == n  # an in-process copy keeps the diagnostics
    # The two headers differ only in their random lineage.
    metas = [unpack(b, "PrivHP")[2] for b in blobs]
    for m in metas:
        m.pop("lineage")
    assert metas[0] == metas[1]


def test_diagnostics_only_when_asked_by_name():
    php = _php(raw=True)
    php.update_many(_points(321))
    back = PrivHP.from_bytes(php.to_bytes(include_diagnostics=True))
    assert back.n_seen == 321
    with pytest.raises(ParameterError, match="include_diagnostics"):
        php.to_bytes(include_diagnostics="yes")
    for obj in _offline():
        obj.update_many(_points(50))
        assert "diagnostics" not in unpack(obj.to_bytes(), obj.kind)[2]
        assert type(obj).from_bytes(obj.to_bytes(include_diagnostics=True)).n_seen == 50


# ------------------------------------------------------------------ 2. copies share one guard
@pytest.mark.parametrize(
    "make_copy",
    [
        copy.deepcopy,
        lambda p: pickle.loads(pickle.dumps(p)),
        lambda p: PrivHP.from_bytes(p.to_bytes()),
        lambda p: PrivHP.from_bytes(p.snapshot().to_bytes()),
        lambda p: p.snapshot(),
    ],
    ids=["deepcopy", "pickle", "bytes", "snapshot-bytes", "snapshot"],
)
def test_copies_cannot_release_one_noise_draw_twice(make_copy):
    php = _php()
    php.update_many(_points(500))
    twin = make_copy(php)
    # 7 rows more on one side (the copy, or the original when the copy is a read-only snapshot)
    (php if twin._frozen else twin).update_many(_points(7, seed=1))
    first = php.release()
    with pytest.raises(ReleasedError):
        twin.release()  # would reveal the 7 rows exactly
    with pytest.raises(ReleasedError):
        twin.update_many(_points(3))
    # A copy of the released state itself gets the same release back.
    assert make_copy(php).release() == first


def test_copy_released_first_blocks_the_original():
    php = _php()
    php.update_many(_points(400))
    twin = PrivHP.from_bytes(php.to_bytes())
    twin.release()
    with pytest.raises(ReleasedError):
        php.update_many(_points(7))
    assert php.release() == twin.release()


def test_merge_refuses_two_operands_of_one_lineage():
    php = _php()
    php.update_many(_points(100))
    for twin in (copy.deepcopy(php), PrivHP.from_bytes(php.to_bytes()), php.snapshot()):
        with pytest.raises(IncompatibleError, match="share a noise draw"):
            php.merge(twin)
    sk = CountMinSketch(64, 3, epsilon=1.0)
    with pytest.raises(IncompatibleError, match="share a noise draw"):
        sk.merge(CountMinSketch.from_bytes(sk.to_bytes()))
    # After a merge the result holds both draws: neither operand's copy may join it again.
    a, b = _php(), _php()
    b_copy = copy.deepcopy(b)
    a.merge(b)
    with pytest.raises(IncompatibleError):
        a.merge(b_copy)


# ------------------------------------------------------------------ 3. released summaries
def test_released_operands_refused_by_merge():
    done, fresh = _php(), _php()
    done.release()
    with pytest.raises(ReleasedError):
        fresh.merge(done)
    with pytest.raises(ReleasedError):
        done.merge(fresh)
    for a, b in zip(_offline(), _offline(), strict=True):
        b.update_many(_points(30))
        b.release()
        with pytest.raises(ReleasedError):
            a.merge(b)


@pytest.mark.parametrize("index", [0, 1, 2], ids=["PMM", "PSMM", "GridHistogram"])
def test_offline_release_survives_bytes_and_pickle(index):
    obj = _offline()[index]
    obj.update_many(_points(300))
    first = obj.release()
    blob = obj.to_bytes()
    for loaded in (type(obj).from_bytes(blob), pickle.loads(pickle.dumps(obj))):
        assert loaded.release() == first  # the stored release, no fresh noise
        with pytest.raises(ReleasedError):
            loaded.update_many(_points(2))
        fresh = _offline()[index]
        with pytest.raises(ReleasedError):
            loaded.merge(fresh)


def test_grid_reloaded_many_times_does_not_average_the_noise_away():
    g = GridHistogram(BOX, 1.0, level=4, rng=3)
    g.update_many(_points(2000))
    release = g.release()
    blob = g.to_bytes()
    counts = {GridHistogram.from_bytes(blob).release().leaves().count.tobytes() for _ in range(50)}
    assert counts == {release.leaves().count.tobytes()}


def test_released_privhp_blob_returns_its_release():
    php = _php()
    php.update_many(_points(800))
    first = php.release()
    blob = php.to_bytes()
    assert unpack(blob, "PrivHP")[2]["released"] is True
    loaded = PrivHP.from_bytes(blob)
    assert loaded.released and loaded.release() == first
    with pytest.raises(ReleasedError):
        loaded.update_many(_points(1))


def test_raw_blob_loaded_three_times_gives_one_release():
    php = _php(raw=True)
    php.update_many(_points(800))
    blob = php.to_bytes()
    releases = [PrivHP.from_bytes(blob).release() for _ in range(3)]
    assert releases[0] == releases[1] == releases[2]
    # Released: the raw blob now records that its noise was drawn.
    assert unpack(PrivHP.from_bytes(blob).to_bytes(), "PrivHP")[2]["released"] is True


# ------------------------------------------------------------------ 4. periodic shipping
def test_flush_ships_disjoint_private_deltas_that_merge():
    local = _php(raw=True)
    server = None
    exact = _php(raw=True)
    shipped = []
    for hour in range(3):
        rows = _points(400, seed=hour)
        local.update_many(rows)
        exact.update_many(rows)
        delta = PrivHP.from_bytes(local.flush().to_bytes())  # what travels
        assert not delta.raw and local._tree.sum() == 0 and local._bank.sum() == 0
        shipped.append(delta)
        if server is None:
            server = delta
        else:
            server.merge(delta)
    assert len({s.lineage for s in shipped}) == 3  # fresh noise each time
    # The merged state is the exact state plus three independent noise draws.
    noise = server._tree - exact._tree
    assert noise.std() > 0
    assert server.release().total > 0
    with pytest.raises(ParameterError, match="raw=True"):
        _php().flush()


@pytest.mark.parametrize("cls", [CountMinSketch, CountSketch])
def test_sketch_flush(cls):
    local = cls(64, 3)
    local.update_many([1, 2, 2, 3])
    private = local.flush(epsilon=0.5, rng=1)
    assert private.epsilon == 0.5 and not local.table.any()
    later = local.flush(epsilon=0.5)
    private.merge(later)  # two flushes of disjoint items merge
    with pytest.raises(ParameterError, match="raw"):
        private.flush(epsilon=0.5)


# ------------------------------------------------------------------ 5. same-seed noise
def test_same_seed_summaries_refuse_to_merge():
    a, b = _php(rng=5), _php(rng=5)
    a.update_many(_points(10))
    with pytest.raises(IncompatibleError, match="share a noise draw"):
        a.merge(b)
    s, t = CountSketch(32, 3, epsilon=1.0, rng=9), CountSketch(32, 3, epsilon=1.0, rng=9)
    with pytest.raises(IncompatibleError, match="share a noise draw"):
        s.merge(t)
    # Raw summaries hold no noise: built alike, they merge (the trusted aggregator).
    _php(raw=True, rng=5).merge(_php(raw=True, rng=5))


# ------------------------------------------------------------------ 6. raw is a real bool
@pytest.mark.parametrize("bad", ["false", float("nan"), [1], 1, None])
def test_raw_must_be_a_bool(bad):
    with pytest.raises(ParameterError, match="'raw'"):
        _php(raw=bad)


# ------------------------------------------------------------------ 7. realised epsilon
@settings(max_examples=60, deadline=None)
@given(
    epsilon=st.floats(1e-3, 50.0),
    k=st.integers(1, 64),
    depth=st.integers(1, 18),
    neighbours=st.sampled_from(["add-remove", "replace"]),
    j=st.integers(1, 5),
)
def test_realised_epsilon_never_exceeds_nominal(epsilon, k, depth, neighbours, j):
    php = PrivHP(
        BOX, epsilon, k=k, width=8, sketch_depth=j, depth=depth, neighbours=neighbours, raw=True
    )
    factor = 2 if neighbours == "replace" else 1
    sens = [factor * (1 if lvl <= php.counter_depth else j) for lvl in range(depth + 1)]
    realised = sum(
        Fraction(s) / Fraction(float(c)) for s, c in zip(sens, php.noise_scales, strict=True)
    )
    assert realised <= Fraction(epsilon)
    pmm = PMM(BOX, epsilon, depth=min(depth, 8))
    assert sum(1 / Fraction(float(s)) for s in pmm.scales) <= Fraction(epsilon)
    sk = CountMinSketch(8, j, epsilon=epsilon)
    assert Fraction(j) / Fraction(sk.noise_scale) <= Fraction(epsilon)


def test_scale_rounding_matters():
    """0.7 has no exact float inverse: the naive scale 1/0.7 realises more than 0.7."""
    naive = 1 / 0.7
    assert Fraction(1) / Fraction(naive) > Fraction(0.7)
    sk = CountMinSketch(8, 1, epsilon=0.7)
    assert Fraction(1) / Fraction(sk.noise_scale) <= Fraction(0.7)


# ------------------------------------------------------------------ 8. untrusted bytes
def _privhp_blob() -> bytes:
    php = _php()
    php.update_many(_points(100))
    return php.to_bytes()


@pytest.mark.parametrize(
    "edit",
    [
        lambda m, a: m.update(frozen="false"),
        lambda m, a: m.update(raw=1),
        lambda m, a: m.update(k="8"),
        lambda m, a: m.pop("width"),
        lambda m, a: m.pop("lineage"),
        lambda m, a: m.update(lineage=["zz"]),
        lambda m, a: m.update(diagnostics={"n_seen": -5, "n_dropped": 0}),
        lambda m, a: m.update(depth=11),
        lambda m, a: m.update(domain={"kind": "Nope"}),
        lambda m, a: m.update(unknown=3),
        lambda m, a: a.update(tree=a["tree"].astype(np.float64) * np.nan),
        lambda m, a: a.pop("bank"),
    ],
    ids=[
        "frozen-str",
        "raw-int",
        "k-str",
        "no-width",
        "no-lineage",
        "bad-lineage",
        "negative-n_seen",
        "depth-mismatch",
        "bad-domain",
        "unknown-field",
        "nan-tree",
        "no-bank",
    ],
)
def test_forged_privhp_blobs_refused(edit):
    with pytest.raises(SerializationError):
        PrivHP.from_bytes(_forge(_privhp_blob(), "PrivHP", edit))


def test_container_version_and_nesting_refused():
    blob = bytearray(_privhp_blob())
    blob[4:6] = (999).to_bytes(2, "little")
    with pytest.raises(SerializationError, match="container version"):
        PrivHP.from_bytes(bytes(blob))
    deep: object = 0
    for _ in range(100_000):
        deep = [deep]
    nested = pack("PrivHP", 2, {"x": 0}, {}, state="trusted")
    # A header nested 100 000 deep (json.dumps itself cannot write it: build the bytes).
    _, _, _, _ = unpack(nested, "PrivHP")
    raw = b"SKSY" + (2).to_bytes(2, "little") + b"<\x00" + bytes([6]) + b"PrivHP"
    header = b'{"arrays": [], "meta": {"x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}"
    raw += (2).to_bytes(2, "little") + len(header).to_bytes(4, "little") + header
    import hashlib

    raw += hashlib.blake2b(raw, digest_size=32).digest()
    with pytest.raises(SerializationError, match="nested"):
        PrivHP.from_bytes(raw)


def test_huge_declared_sizes_refused_fast_without_allocating():
    small = CountMinSketch(8, 2).to_bytes()
    forged = _forge(small, "CountMinSketch", lambda m, a: m.update(width=2**25, depth=12))
    assert len(forged) < 1000
    tracemalloc.start()
    with cpu_limit(1.0, "refusing a CountMinSketch that declares 2**25 × 12 counters"):
        with pytest.raises(SerializationError):
            CountMinSketch.from_bytes(forged)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 10 * 2**20
    # The same for PrivHP: a blob declaring a big width is refused before the build.
    forged = _forge(_privhp_blob(), "PrivHP", lambda m, a: m.update(width=2**27))
    tracemalloc.start()
    with pytest.raises(SerializationError):
        PrivHP.from_bytes(forged)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 10 * 2**20


def test_keyed_blobs_authenticate():
    key = b"collector-42 shared secret"
    php = _php()
    php.update_many(_points(50))
    blob = php.to_bytes(key=key)
    assert PrivHP.from_bytes(blob, key=key).lineage == php.lineage
    with pytest.raises(SerializationError, match="pass key"):
        PrivHP.from_bytes(blob)
    with pytest.raises(SerializationError, match="authentication"):
        PrivHP.from_bytes(blob, key=b"another key")
    with pytest.raises(SerializationError, match="not authenticated"):
        PrivHP.from_bytes(_forge(_privhp_blob(), "PrivHP", lambda m, a: None), key=key)
    tampered = bytearray(blob)
    tampered[40] ^= 1
    with pytest.raises(SerializationError):
        PrivHP.from_bytes(bytes(tampered), key=key)
    sk = CountSketch(16, 3, epsilon=1.0)
    assert CountSketch.from_bytes(sk.to_bytes(key=key), key=key) == sk


# ------------------------------------------------------------------ 9. sizes refused up front
@pytest.mark.parametrize(
    "build",
    [
        lambda: CountMinSketch(2**31, 1024),
        lambda: PrivHP(BOX, 1.0, k=2**40, width=8, depth=64),
        lambda: PrivHP(BOX, 1.0, k=8, width=2**31, depth=40),
        lambda: PMM(BOX, 1.0, expected_n=10**12),
        lambda: PSMM(BOX, 1.0, depth=10**12),
    ],
    ids=["cms", "privhp-k", "privhp-width", "pmm", "psmm"],
)
def test_oversized_structures_refused_up_front(build):
    with cpu_limit(1.0, "refusing an oversized structure"):
        with pytest.raises(ParameterError) as info:
            build()
    assert any(w in str(info.value) for w in ("memory", "limited", "cells"))


def test_memory_message_states_the_need():
    with pytest.raises(ParameterError, match=r"would need 16 GiB"):
        CountMinSketch(2**31, 1)


def test_sample_works_in_chunks():
    php = _php()
    php.update_many(_points(2000))
    dist = php.release()
    m = 3_000_000
    tracemalloc.start()
    pts = dist.sample(m, rng=1)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert pts.shape == (m, 2)
    assert peak < 2.5 * pts.nbytes  # the result plus a few chunks, not ten copies of it
    assert np.isfinite(pts).all()


# ------------------------------------------------------------------ 10. input
def test_masked_matrix_dataframe_bool_datetime_inputs():
    php = _php(raw=True)
    before = php._tree.copy()
    masked = np.ma.array(_points(4), mask=False)
    masked[2, 0] = np.ma.masked
    with pytest.raises(InputError, match="masked"):
        php.update_many(masked)
    with pytest.raises(InputError, match="masked"):
        Box([0.0], [1.0], out_of_bounds="clip").encode(np.ma.array([np.nan, 0.5], mask=[1, 0]), 8)
    php.update_many(np.matrix(_points(3)))  # a matrix is read as its plain array
    assert php.n_seen == 3
    with pytest.raises(InputError, match="not numeric"):
        php.update_many(np.array([[True, False]]))
    with pytest.raises(InputError, match="not numeric"):
        php.update_many([[True, 0.5]])
    with pytest.raises(InputError, match="not numeric"):
        php.update_many(np.array([["2020-01-01", "2020-01-02"]], dtype="datetime64[D]"))
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"x": [0.1, 0.2, "oops"], "y": [0.1, 0.2, 0.3]})
    with pytest.raises(InputError, match=r"row 2 = \['oops', 0.3\]"):
        php.update_many(frame)
    assert php.n_seen == 3
    assert not np.array_equal(php._tree, before)


def test_ipv4_with_nul_refused():
    dom = BitDomain.ipv4()
    with pytest.raises(InputError, match="row 1"):
        dom.encode(["10.0.0.2", "10.0.0.1\x00"], 8)
    assert dom.encode(["10.0.0.1"], 8).tolist() == [10]


def test_consume_counts_rows_of_a_failing_source():
    php = _php(raw=True)

    def source():
        yield from _points(5)
        raise OSError("disk gone")

    with pytest.raises(OSError, match="disk gone") as info:
        php.consume(source(), batch_size=3)
    assert php.n_seen == 5
    notes = getattr(info.value, "__notes__", None)
    if notes is not None:
        assert "5 of them were counted" in notes[-1]


# ------------------------------------------------------------------ 11. threads
def test_second_thread_refused_not_lost():
    php = _php(raw=True)
    with php._usage.enter("PrivHP"), pytest.raises(ConcurrentUseError):
        php.update_many(_points(10))  # another update is in progress
    assert php.n_seen == 0
    sk = CountMinSketch(64, 3)
    with sk._usage.enter("CountMinSketch"), pytest.raises(ConcurrentUseError):
        sk.update_many([1, 2])
    pmm = PMM(BOX, 1.0, depth=4)
    with pmm._usage.enter("PMM"), pytest.raises(ConcurrentUseError):
        pmm.update_many(_points(2))


def test_threads_either_count_or_are_refused():
    php = _php(raw=True)
    batch = _points(20_000)
    accepted = []
    refused = []

    def work():
        for _ in range(20):
            try:
                php.update_many(batch)
                accepted.append(1)
            except ConcurrentUseError:
                refused.append(1)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(accepted) + len(refused) == 40
    assert php.n_seen == 20_000 * len(accepted)
    assert int(php._tree[0]) == 20_000 * len(accepted)  # nothing lost silently


# ------------------------------------------------------------------ 12. messages
@pytest.mark.parametrize(
    "build, owner",
    [
        (lambda: PrivHP(BOX, 1e-12, k=8, width=32, depth=10), "PrivHP"),
        (lambda: PMM(BOX, 1e-12, depth=6), "PMM"),
        (lambda: PSMM(BOX, 1e-12, depth=3), "PSMM"),
        (lambda: GridHistogram(BOX, 1e-12, level=4), "GridHistogram"),
        (lambda: CountMinSketch(8, 2, epsilon=1e-12), "CountMinSketch"),
    ],
)
def test_tiny_epsilon_refused_at_construction(build, owner):
    with pytest.raises(ParameterError, match=f"'epsilon' parameter of {owner}"):
        build()


def test_deep_one_dimensional_privhp_accepted_and_counts_finite():
    PrivHP(Box.unit(1), 1.0, k=8, width=64, depth=56)
    php = PrivHP(Box([0.0], [1000.0]), 1.0, k=8, width=64, depth=60, rng=1)
    php.update_many(np.random.default_rng(0).random((1000, 1)) * 1000)
    dist = php.release()
    assert np.isfinite(dist.count([100.0], [200.0]))
    assert dist.count([0.0], [1000.0]) == pytest.approx(dist.total)


def test_grid_and_pmm_messages_name_the_right_argument():
    with pytest.raises(ParameterError, match="'cells_per_axis'"):
        GridHistogram(BOX, 1.0, cells_per_axis=2**16)
    with pytest.raises(ParameterError, match="'expected_n'"):
        PMM(BOX, 1.0)
    with pytest.raises(ParameterError, match="'domain'"):
        PMM(None, 1.0, expected_n=10)
    with pytest.raises(ParameterError, match="'domain'"):
        GridHistogram(None, 1.0, level=3)


def test_blob_header_is_plain_json_of_public_fields():
    php = _php()
    _, _, meta, _ = unpack(php.to_bytes(), "PrivHP")
    json.dumps(meta)  # nothing but JSON
    assert set(meta) == {
        "domain",
        "epsilon",
        "k",
        "width",
        "sketch_depth",
        "depth",
        "sketch",
        "allocation",
        "seed",
        "neighbours",
        "counter_depth",
        "release_k",
        "raw",
        "frozen",
        "lineage",
        "released",
    }


# ------------------------------------------------------------------ forged floats and integers
def _forgeable():
    from sketchsyn import AdaptiveGrid, PrivTree

    php = _php(rng=1)
    php.update_many(_points(300))
    pt = PrivTree(BOX, 1.0, level=6)
    pt.update_many(_points(300))
    pmm = PMM(BOX, 1.0, depth=4)
    pmm.update_many(_points(300))
    pmm.release()
    return {
        "PrivHP": php,
        "PrivTree": pt,
        "AdaptiveGrid": AdaptiveGrid(BOX, 1.0, 1000, level=6),
        "PMM": pmm,
        "CountMinSketch": CountMinSketch(16, 2, epsilon=1.0, rng=0),
        "PrivateDistribution": php.snapshot().release(),
    }


def _re_pack(obj, meta_edit=None, array_edit=None, **options) -> bytes:
    from sketchsyn.io.serial import read

    got = read(obj.to_bytes(**options), obj.kind)
    meta, arrays = dict(got.meta), dict(got.arrays)
    if meta_edit:
        meta.update(meta_edit)
    if array_edit:
        arrays.update(array_edit(arrays))
    return pack(obj.kind, got.version, meta, arrays, state=got.state)


@pytest.mark.parametrize(
    ("kind", "field", "value"),
    [
        ("PrivHP", "epsilon", 1e-320),
        ("PrivHP", "epsilon", 1.5e308),
        ("PrivHP", "k", 2**70),
        ("PrivHP", "release_k", 2**70),
        ("PrivTree", "tree_fraction", 1e-320),
        ("PrivTree", "tree_fraction", 5e-324),
        ("PrivTree", "epsilon", 1.5e308),
        ("AdaptiveGrid", "c", 1e-320),
        ("AdaptiveGrid", "c", 1.5e308),
        ("AdaptiveGrid", "alpha", 1e-320),
        ("CountMinSketch", "epsilon", 1e-320),
        ("CountMinSketch", "epsilon", 1.5e308),
        ("PrivateDistribution", "epsilon", 1e-320),
    ],
)
def test_forged_header_numbers_refused_naming_the_field(kind, field, value):
    """Issue 9: tiny or huge floats and huge integers in a header raise SerializationError
    naming the field (they raised OverflowError, or loaded silently, before)."""
    obj = _forgeable()[kind]
    with pytest.raises(SerializationError, match=repr(field)):
        type(obj).from_bytes(_re_pack(obj, {field: value}))


def test_forged_diagnostics_beyond_int64_refused():
    obj = _forgeable()["PrivHP"]
    forged = _re_pack(
        obj, {"diagnostics": {"n_seen": 2**70, "n_dropped": 0}}, include_diagnostics=True
    )  # a trusted blob, as diagnostics make it
    with pytest.raises(SerializationError, match="n_seen"):
        PrivHP.from_bytes(forged)


@pytest.mark.parametrize(
    ("kind", "name", "make"),
    [
        ("PrivHP", "sigmas", lambda a: np.full(a["sigmas"].shape, np.nan)),
        ("PMM", "extra.synthetic_counts", lambda a: np.full(16, np.nan)),
        ("PMM", "extra.synthetic_counts", lambda a: np.zeros(3, dtype=np.int64)),
        ("PrivateDistribution", "counts", lambda a: np.full(a["counts"].shape, 1.5e308)),
    ],
    ids=["privhp-nan-sigmas", "pmm-nan-extra", "pmm-short-extra", "dist-infinite-total"],
)
def test_forged_arrays_refused_naming_the_array(kind, name, make):
    """Issue 9: NaN or mis-shaped arrays are refused (they loaded silently before)."""
    obj = _forgeable()[kind]
    with pytest.raises(SerializationError, match=repr(name)):
        type(obj).from_bytes(_re_pack(obj, array_edit=lambda a: {name: make(a)}))


@pytest.mark.parametrize("flag", ["frozen", "released"])
@pytest.mark.parametrize("kind", ["PrivHP", "PrivTree", "PMM"])
def test_flags_must_be_real_bools(kind, flag):
    obj = _forgeable()[kind]
    for value in (0, 1, "true"):
        with pytest.raises(SerializationError, match=flag):
            type(obj).from_bytes(_re_pack(obj, {flag: value}))
