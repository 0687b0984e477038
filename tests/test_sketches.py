"""Count-Min and Count Sketch: accuracy against Apache DataSketches, bias, noise, errors, sizing."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

from sketchsyn.errors import (
    IncompatibleError,
    InputError,
    ParameterError,
    ReleasedError,
    SerializationError,
)
from sketchsyn.io.serial import pack
from sketchsyn.privacy.rng import as_source
from sketchsyn.sketches.sketch import CountMinSketch, CountSketch

CLASSES = [CountMinSketch, CountSketch]


@pytest.fixture(scope="module")
def zipf_stream():
    """10**6 Zipf(1.1) keys (uint64), their distinct values and frequencies."""
    rng = np.random.default_rng(2024)
    items = rng.zipf(1.1, size=10**6).astype(np.uint64)
    keys, freq = np.unique(items, return_counts=True)
    return items, keys, freq


# ------------------------------------------------------------------ accuracy
def test_count_min_matches_datasketches(zipf_stream):
    datasketches = pytest.importorskip("datasketches")
    items, keys, freq = zipf_stream
    ours = CountMinSketch(1024, 3, seed=1)
    ours.update_many(items)
    theirs = datasketches.count_min_sketch(num_hashes=3, num_buckets=1024, seed=9001)
    for k, f in zip(keys.tolist(), freq.tolist(), strict=True):  # one weighted update per key
        theirs.update(k, f)
    est_ours = ours.query_many(keys)
    est_theirs = np.array([theirs.get_estimate(k) for k in keys.tolist()])
    over_ours, over_theirs = est_ours - freq, est_theirs - freq
    assert over_ours.min() >= 0 and over_theirs.min() >= 0  # never underestimate
    ratio = over_ours.mean() / over_theirs.mean()
    assert 0.75 < ratio < 1.25, (over_ours.mean(), over_theirs.mean())
    # And both are within the expected collision mass per row, N/w (Lemma 4 of seed 002).
    assert over_ours.mean() <= items.size / 1024


def test_count_min_never_underestimates_with_heavy_collisions():
    rng = np.random.default_rng(5)
    for seed in range(5):
        keys = rng.integers(0, 2**64, size=2000, dtype=np.uint64)
        counts = rng.integers(0, 50, size=keys.size)
        s = CountMinSketch(16, 3, seed=seed)  # 2000 keys in 16 buckets: collisions everywhere
        s.update_many(keys, counts)
        truth = np.bincount(np.unique(keys, return_inverse=True)[1], weights=counts)
        est = s.query_many(np.unique(keys))
        assert (est >= truth).all() and (est > truth).any()


def test_count_sketch_is_unbiased():
    """Mean signed error over keys, averaged over 40 independent hash seeds, is zero.

    For one seed the errors of different keys are correlated (shared heavy hitters), so the
    replicates are the seeds: the per-seed mean errors are i.i.d. with mean 0, and their average
    is compared with 4 standard errors from their own spread (t with 39 df: p ≈ 3e-4).
    """
    rng = np.random.default_rng(11)
    items = rng.zipf(1.1, size=10**5).astype(np.uint64)
    keys, freq = np.unique(items, return_counts=True)
    per_seed = []
    for seed in range(40):
        cs = CountSketch(256, 3, seed=seed)
        cs.update_many(items)
        per_seed.append((cs.query_many(keys) - freq).mean())
    per_seed = np.array(per_seed)
    se = per_seed.std(ddof=1) / math.sqrt(per_seed.size)
    assert se > 0
    assert abs(per_seed.mean()) < 4 * se, (per_seed.mean(), se)


def test_sizing_helpers_deliver_their_guarantees(zipf_stream):
    items, keys, freq = zipf_stream
    n = items.size
    # Count-Min: P[overestimate > rel·N] <= 1 - confidence.
    w, j = CountMinSketch.suggest_width(0.002), CountMinSketch.suggest_depth(0.9)
    assert (w, j) == (1360, 3)
    cms = CountMinSketch(w, j, seed=4)
    cms.update_many(items)
    assert np.mean(cms.query_many(keys) - freq > 0.002 * n) <= 0.1
    # Count Sketch: P[|error| > rel·||f||_2] <= 1 - confidence.
    w, j = CountSketch.suggest_width(0.05), CountSketch.suggest_depth(0.95)
    assert (w, j) == (3200, 3)
    cs = CountSketch(w, j, seed=4)
    cs.update_many(items)
    l2 = float(np.sqrt((freq.astype(np.float64) ** 2).sum()))
    assert np.mean(np.abs(cs.query_many(keys) - freq) > 0.05 * l2) <= 0.05


def test_sizing_values_and_bad_arguments():
    assert CountMinSketch.suggest_width(0.01) == 272 and CountMinSketch.suggest_depth(0.99) == 5
    assert CountSketch.suggest_width(0.1) == 800
    assert [CountSketch.suggest_depth(c) for c in (0.5, 0.95, 0.99, 0.999)] == [1, 3, 7, 13]
    for cls in CLASSES:
        for bad in (0, 1, 1.5, -0.1, float("nan"), True, "0.1"):
            with pytest.raises(ParameterError, match="relative_error"):
                cls.suggest_width(bad)
            with pytest.raises(ParameterError, match="confidence"):
                cls.suggest_depth(bad)


# ------------------------------------------------------------------ privacy noise
@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("epsilon, depth", [(0.5, 5), (2.0, 3)])
def test_private_cells_carry_laplace_noise(cls, epsilon, depth):
    s = cls(4096, depth, epsilon=epsilon, rng=17)
    cells = s.table.astype(np.float64).ravel()
    m = cells.size
    p = math.exp(-epsilon / depth)
    var = 2 * p / (1 - p) ** 2  # variance of Lap_Z(depth/epsilon)
    centred = cells - cells.mean()
    var_hat = (centred**2).mean()
    # Standard error of the sample variance from the sample's fourth moment.
    se_var = math.sqrt(((centred**4).mean() - var_hat**2) / m)
    assert abs(var_hat - var) < 5 * se_var, (var_hat, var, se_var)
    assert abs(cells.mean()) < 5 * math.sqrt(var / m)
    assert s.epsilon == epsilon


def test_noise_streams():
    a = CountMinSketch(256, 3, epsilon=1.0)  # OS CSPRNG
    b = CountMinSketch(256, 3, epsilon=1.0)
    assert not np.array_equal(a.table, b.table)
    c1, c2 = as_source(3).spawn(2)
    x, y = CountSketch(256, 3, epsilon=1.0, rng=c1), CountSketch(256, 3, epsilon=1.0, rng=c2)
    assert not np.array_equal(x.table, y.table)
    assert CountSketch(256, 3, epsilon=1.0, rng=8) == CountSketch(256, 3, epsilon=1.0, rng=8)


# ------------------------------------------------------------------ updates and queries
def test_update_forms_and_queries():
    s = CountMinSketch(64, 3)
    s.update(5)
    s.update(5, 3)
    s.update("ten.0.0.1", 2)
    s.update(b"raw", 1)
    s.update_many(np.array([7, 7, 8]), np.array([1.0, 2.0, 3.0]))
    s.update_many(["a", "b", "a"], 2)
    s.update_many(np.array(["c"]))
    assert s.query(5) >= 4 and s.query("ten.0.0.1") >= 2 and s.query(7) >= 3
    assert s.query("a") >= 4 and s.query("c") >= 1 and s.query(b"raw") >= 1
    assert isinstance(s.query(5), int)
    assert s.query_many([5, 7]).dtype == np.int64
    assert s.query_many(["a", "ten.0.0.1"]).tolist() == [s.query("a"), s.query("ten.0.0.1")]
    cs = CountSketch(64, 4)  # even depth: mean of the two middle rows
    cs.update_many([1, 1, 2])
    assert isinstance(cs.query(1), float) and cs.query_many([1]).dtype == np.float64
    with pytest.raises(InputError, match="single key"):
        s.update([1, 2])
    with pytest.raises(InputError, match="single key"):
        s.query([1, 2])


def test_turnstile_updates():
    s = CountMinSketch(128, 3)
    s.update_many([1, 2, 3], [5, 5, 5])
    s.update_many([2], [-5])
    assert s.query_many([1, 2, 3]).tolist() == [5, 0, 5]
    cs = CountSketch(128, 3)
    cs.update_many([9, 9], [3, -3])
    assert not cs.table.any()


def test_count_min_keeps_its_one_sided_error_under_strict_turnstile():
    """Deletions of inserted keys keep every net count >= 0: no key is underestimated."""
    rng = np.random.default_rng(11)
    keys = rng.zipf(1.3, size=20_000) % 5000
    s = CountMinSketch(64, 3, seed=4)
    s.update_many(keys)
    gone = rng.permutation(keys)[:12_000]
    s.update_many(gone, -1)
    uniq = np.unique(keys)
    net = np.bincount(keys, minlength=5000) - np.bincount(gone, minlength=5000)
    assert (net >= 0).all() and (net[uniq] == 0).any()  # some keys were deleted entirely
    assert (s.query_many(uniq) >= net[uniq]).all()


def test_large_weights_are_exact():
    s = CountSketch(8, 3)
    s.update_many([1, 2], [2**55 + 1, -(2**55) - 3])  # float64 would round these
    rows = s.table.astype(object)
    fam = s.family
    expected = np.zeros((3, 8), dtype=object)
    for key, count in ((1, 2**55 + 1), (2, -(2**55) - 3)):
        b, g = fam.buckets([key])[:, 0], fam.signs([key])[:, 0]
        for r in range(3):
            expected[r, b[r]] += int(g[r]) * count
    assert (rows == expected).all()


@pytest.mark.parametrize(
    "kwargs, word",
    [
        (dict(width=0, depth=3), "'width' .* Got 0 instead"),
        (dict(width=2.5, depth=3), "'width' .* Got 2.5 instead"),
        (dict(width=8, depth=0), "'depth' .* Got 0 instead"),
        (dict(width=8, depth=3, seed=-1), "'seed'"),
        (dict(width=8, depth=3, epsilon=0.0), "'epsilon' .* Got 0.0 instead"),
        (dict(width=8, depth=3, epsilon=-1.0), "'epsilon' .* Got -1.0 instead"),
        (dict(width=8, depth=3, epsilon=float("inf")), "'epsilon' .* Got inf instead"),
        (dict(width=8, depth=3, epsilon=float("nan")), "'epsilon' .* Got nan instead"),
        (dict(width=8, depth=3, epsilon="1"), "'epsilon'"),
        (dict(width=8, depth=3, epsilon=True), "'epsilon'"),
    ],
)
@pytest.mark.parametrize("cls", CLASSES)
def test_bad_parameters(cls, kwargs, word):
    with pytest.raises(ParameterError, match=word):
        cls(**kwargs)


@pytest.mark.parametrize(
    "keys, counts, word",
    [
        ([1, -1, 2], None, r"keys\[1\] = -1"),
        (np.array([1.0, 1.5]), None, r"keys\[1\] = 1.5"),
        (np.array([0.0, np.nan]), None, r"keys\[1\] = nan"),
        (np.array([2, np.inf]), None, r"keys\[1\] = inf"),
        (["a", 3], None, r"keys\[1\] = 3"),
        ([1, 2, 3], [1, np.inf, 1], r"counts\[1\] = inf"),
        ([1, 2, 3], np.array([1, 2, np.nan]), r"counts\[2\] = nan"),
        ([1, 2, 3], [1, 0.5, 1], r"counts\[1\] = 0.5"),
        ([1, 2, 3], [1, 2], r"counts must have one entry per key \(3\)"),
        ([1, 2, 3], np.array([True, False, True]), r"counts\[0\] = True"),
        ([1, 2, 3], [1, 2**62, 1], r"counts\[1\] = 4611686018427387904"),
        ([1, 2, 3], [2**61, 2**61, 0], r"overflow"),
    ],
)
@pytest.mark.parametrize("cls", CLASSES)
def test_bad_input_is_refused_whole(cls, keys, counts, word):
    s = cls(32, 2, epsilon=1.0, rng=1)
    s.update_many([4, 5, 6])
    before = s.table.copy()
    with pytest.raises(InputError, match=word):
        s.update_many(keys, counts)
    assert np.array_equal(s.table, before)


# ------------------------------------------------------------------ merge, copies, bytes
def test_merge_is_exact_and_checks_parameters():
    a, b = CountMinSketch(32, 2, seed=1), CountMinSketch(32, 2, seed=1)
    a.update_many([1, 2, 3])
    b.update_many([3, 4])
    expected = a.table + b.table
    a.merge(b)
    assert np.array_equal(a.table, expected) and a.epsilon is None
    for other, word in [
        (CountMinSketch(16, 2, seed=1), "'width': 32 != 16"),
        (CountMinSketch(32, 3, seed=1), "'depth': 2 != 3"),
        (CountMinSketch(32, 2, seed=2), "'seed': 1 != 2"),
        (CountSketch(32, 2, seed=1), "CountSketch"),
        (None, "NoneType"),
    ]:
        with pytest.raises(IncompatibleError, match=word):
            a.merge(other)
    with pytest.raises(IncompatibleError, match="itself"):
        a.merge(a)
    assert np.array_equal(a.table, expected)  # refused merges changed nothing


def test_merge_privacy_bookkeeping():
    raw = CountSketch(32, 2, seed=1)
    p1 = CountSketch(32, 2, epsilon=1.0, seed=1, rng=0)
    p2 = CountSketch(32, 2, epsilon=0.5, seed=1, rng=1)
    raw.merge(p1)
    assert raw.epsilon == 1.0  # raw + private is private
    p1.merge(CountSketch(32, 2, seed=1))
    assert p1.epsilon == 1.0
    p2.merge(p1)
    assert p2.epsilon == 1.0  # disjoint streams: the larger of the two budgets
    snap = p2.snapshot()
    with pytest.raises(ReleasedError):
        snap.merge(p1)


def test_snapshot_table_and_properties_are_read_only():
    s = CountSketch(128, 3, epsilon=1.0, rng=2)
    snap = s.snapshot()
    assert snap == s
    with pytest.raises(ReleasedError):
        snap.update(1)
    with pytest.raises(ReleasedError):
        snap.update_many([1, 2])
    s.update(1)
    assert snap != s
    with pytest.raises(ValueError):
        s.table[0, 0] = 7
    for name in ("width", "depth", "seed", "epsilon"):
        with pytest.raises(AttributeError):
            setattr(s, name, 1)
    assert (s.width, s.depth, s.seed, s.epsilon) == (128, 3, 0, 1.0)
    assert s.nbytes == 128 * 3 * 8 + 8 * 3 + 32
    # A snapshot stays read-only after travelling through pickle.
    with pytest.raises(ReleasedError):
        pickle.loads(pickle.dumps(snap)).update(1)


def test_bytes_refuse_damage_and_other_kinds():
    s = CountMinSketch(16, 2, epsilon=1.0, rng=3)
    blob = s.to_bytes()
    assert CountMinSketch.from_bytes(blob) == s
    for broken in (blob[:-1], blob[:20], blob[:-40] + blob[-39:], b"", b"SKSY" + blob[4:-1]):
        with pytest.raises(SerializationError):
            CountMinSketch.from_bytes(broken)
    with pytest.raises(SerializationError, match="CountSketch"):
        CountSketch.from_bytes(blob)
    meta = {"width": 16, "depth": 2, "seed": 0, "epsilon": 1.0}
    table = np.zeros((2, 16), dtype=np.int64)
    for kind_meta, arrays, version in [
        ({**meta, "width": 0}, {"table": table}, 1),
        ({**meta, "epsilon": -1.0}, {"table": table}, 1),
        ({k: v for k, v in meta.items() if k != "seed"}, {"table": table}, 1),
        (meta, {"table": table[:, :8]}, 1),
        (meta, {"table": table.astype(np.int32)}, 1),
        (meta, {}, 1),
        (meta, {"table": table}, 2),
    ]:
        with pytest.raises(SerializationError):
            CountMinSketch.from_bytes(
                pack("CountMinSketch", version, kind_meta, arrays, state="trusted")
            )
