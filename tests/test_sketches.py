"""Count-Min and Count Sketch: accuracy against Apache DataSketches, noise, errors, sizing."""

from __future__ import annotations

import numpy as np
import pytest

from sketchsyn import CountMinSketch, CountSketch
from sketchsyn.errors import IncompatibleError, InputError, ParameterError, ReleasedError
from sketchsyn.noise import discrete_laplace_variance


@pytest.fixture(scope="module")
def zipf_stream():
    rng = np.random.default_rng(2024)
    items = rng.zipf(1.1, size=10**6).astype(np.uint64)
    keys, freq = np.unique(items, return_counts=True)
    return items, keys, freq


def test_count_min_matches_datasketches(zipf_stream):
    datasketches = pytest.importorskip("datasketches")
    items, keys, freq = zipf_stream
    ours = CountMinSketch(1024, 3, seed=1)
    ours.update_many(items)
    theirs = datasketches.count_min_sketch(3, 1024, 9001)
    for k, f in zip(
        keys.tolist(), freq.tolist(), strict=False
    ):  # one weighted update per distinct key
        theirs.update(int(k), int(f))
    est_ours = ours.query_many(keys)
    est_theirs = np.array([theirs.get_estimate(int(k)) for k in keys.tolist()])
    over_ours, over_theirs = est_ours - freq, est_theirs - freq
    assert over_ours.min() >= 0 and over_theirs.min() >= 0  # never underestimate
    ratio = over_ours.mean() / over_theirs.mean()
    assert 0.75 < ratio < 1.25, (over_ours.mean(), over_theirs.mean())


def test_count_sketch_is_unbiased(zipf_stream):
    items, keys, freq = zipf_stream
    errs = []
    for seed in range(5):
        cs = CountSketch(1024, 3, seed=seed)
        cs.update_many(items)
        errs.append(cs.query_many(keys) - freq)
    err = np.concatenate(errs)
    # Mean signed error within 4 standard errors of zero (errors of one seed are correlated
    # through shared heavy hitters, so use the spread of the per-seed means).
    per_seed = np.array([e.mean() for e in errs])
    se = max(per_seed.std(ddof=1) / np.sqrt(per_seed.size), err.std() / np.sqrt(err.size))
    assert abs(err.mean()) < 4 * se + 1.0


@pytest.mark.parametrize("cls", [CountMinSketch, CountSketch])
@pytest.mark.parametrize("epsilon, depth", [(0.5, 5), (2.0, 3)])
def test_private_cells_carry_laplace_noise(cls, epsilon, depth):
    s = cls(4096, depth, epsilon=epsilon, rng=17)
    cells = s.table.astype(np.float64).ravel()
    var = discrete_laplace_variance(depth / epsilon)
    # Relative sd of the sample variance of m Laplace draws is about sqrt(5/m) < 2%.
    assert abs(cells.var() / var - 1) < 0.08
    assert abs(cells.mean()) < 5 * np.sqrt(var / cells.size)
    assert s.epsilon == epsilon


def test_update_forms_and_queries():
    s = CountMinSketch(64, 3)
    s.update(5)
    s.update(5, 3)
    s.update("ten.0.0.1", 2)
    s.update_many(np.array([7, 7, 8]), np.array([1.0, 2.0, 3.0]))
    assert s.query(5) >= 4 and s.query("ten.0.0.1") >= 2 and s.query(7) >= 3
    assert s.query_many([5, 7]).dtype == np.int64
    assert CountMinSketch.suggest_width(0.01) == 272 and CountMinSketch.suggest_depth(0.99) == 5
    assert CountSketch.suggest_depth(0.95) % 2 == 1


@pytest.mark.parametrize(
    "kwargs, word",
    [
        (dict(width=0, depth=3), "'width'"),
        (dict(width=8, depth=0), "'depth'"),
        (dict(width=8, depth=3, epsilon=0.0), "'epsilon'"),
        (dict(width=8, depth=3, epsilon=-1.0), "'epsilon'"),
        (dict(width=8, depth=3, epsilon=float("inf")), "'epsilon'"),
        (dict(width=8, depth=3, epsilon=float("nan")), "'epsilon'"),
    ],
)
def test_bad_parameters(kwargs, word):
    with pytest.raises(ParameterError, match=word):
        CountMinSketch(**kwargs)


@pytest.mark.parametrize(
    "keys, counts, word",
    [
        ([1, -1], None, r"keys\[1\]"),
        ([1.5], None, r"keys\[0\]"),
        ([np.nan], None, r"keys\[0\]"),
        ([1, 2], [1, np.inf], r"counts\[1\]"),
        ([1, 2], [1, 0.5], r"counts\[1\]"),
    ],
)
def test_bad_input_is_refused_whole(keys, counts, word):
    s = CountMinSketch(32, 2, epsilon=1.0, rng=1)
    before = s.table.copy()
    with pytest.raises(InputError, match=word):
        s.update_many(np.array(keys), None if counts is None else np.array(counts))
    assert np.array_equal(s.table, before)


def test_merge_rules():
    a, b = CountMinSketch(32, 2, seed=1), CountMinSketch(32, 2, seed=1)
    a.update_many([1, 2, 3])
    b.update_many([3, 4])
    a.merge(b)
    assert a.query(3) >= 2
    for other, word in [
        (CountMinSketch(16, 2, seed=1), "width"),
        (CountMinSketch(32, 3, seed=1), "depth"),
        (CountMinSketch(32, 2, seed=2), "seed"),
        (CountSketch(32, 2, seed=1), "CountSketch"),
    ]:
        with pytest.raises(IncompatibleError, match=word):
            a.merge(other)
    with pytest.raises(IncompatibleError, match="itself"):
        a.merge(a)
    p = CountMinSketch(32, 2, epsilon=1.0, seed=1, rng=0)
    p.merge(b)
    assert p.epsilon == 1.0


def test_snapshot_is_read_only_and_nbytes():
    s = CountSketch(128, 3, epsilon=1.0, rng=2)
    snap = s.snapshot()
    with pytest.raises(ReleasedError):
        snap.update(1)
    s.update(1)
    assert snap != s
    assert s.nbytes == 128 * 3 * 8 + 64
