"""PrivHP: privacy accounting, consistency invariants, memory contract, bad input, utility trend."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sketchsyn import BitDomain, Box, PrivHP
from sketchsyn.errors import InputError, ParameterError, ReleasedError, SerializationError
from sketchsyn.evaluate.datasets import multifractal
from sketchsyn.privacy.noise import discrete_laplace_variance


def _php(**kw):
    args = dict(domain=Box.unit(2), epsilon=1.0, k=8, width=64, depth=10, rng=0)
    args.update(kw)
    return PrivHP(**args)


# ---------------------------------------------------------------- privacy accounting
@pytest.mark.parametrize("allocation", ["optimal", "uniform"])
@pytest.mark.parametrize("epsilon", [0.1, 1.0, 3.7])
def test_level_budgets_sum_to_epsilon(allocation, epsilon):
    php = _php(epsilon=epsilon, allocation=allocation, k=16, depth=20)
    assert php.sigmas.shape == (21,)
    assert abs(php.sigmas.sum() - epsilon) <= 1e-12 * epsilon
    assert (php.sigmas > 0).all()
    # Counter levels use Lap_Z(1/σ_l); sketch levels Lap_Z(j/σ_l), and each sketch says so.
    scales = php.noise_scales
    L = php.counter_depth  # the counter/sketch boundary L_c (≥ the paper's L_k)
    assert L == max(php.L_k, (64 * 3).bit_length() - 1)
    np.testing.assert_allclose(scales[: L + 1], 1.0 / php.sigmas[: L + 1])
    np.testing.assert_allclose(scales[L + 1 :], 3.0 / php.sigmas[L + 1 :])
    for i, sk in enumerate(php.sketches):
        assert sk.epsilon == pytest.approx(php.sigmas[L + 1 + i], rel=1e-15)
        assert sk.depth == 3 and sk.width == 64


def test_replace_neighbours_double_every_scale():
    a = _php(k=16, depth=12)
    b = _php(k=16, depth=12, neighbours="replace")
    np.testing.assert_allclose(b.noise_scales, 2 * a.noise_scales)
    assert a.epsilon == b.epsilon == 1.0


def test_sketch_cells_carry_the_level_noise():
    """Empirical variance of every level's sketch cells matches Var Lap_Z(j/σ_l) before updates."""
    j, w = 3, 20000
    php = PrivHP(
        Box.unit(2), epsilon=2.0, k=4, width=w, sketch_depth=j, depth=8, rng=11, counter_depth=2
    )
    for i, sk in enumerate(php.sketches):
        sigma = php.sigmas[php.counter_depth + 1 + i]
        cells = sk.table.astype(np.float64).ravel()
        expected = discrete_laplace_variance(j / sigma)
        # The sample variance of 60000 Laplace-like cells has relative sd ≈ sqrt(5/60000) ≈ 0.9%.
        assert abs(cells.var() / expected - 1) < 0.06, (i, cells.var(), expected)
    # k = 4 and w·j = 60000 ≥ 2**8: every level is a counter level under the automatic rule,
    # so this test pins the paper's boundary counter_depth = L_k = 2 explicitly.
    assert php.L_k == php.counter_depth == 2


def test_counters_carry_the_level_noise():
    php = PrivHP(Box.unit(2), epsilon=1.0, k=2**12, width=4, depth=12, rng=5)
    assert php.sketches == []  # k >= 2**depth: the full tree, exact counters only
    level = 12
    cells = php._tree[2**level - 1 : 2 ** (level + 1) - 1].astype(np.float64)
    expected = discrete_laplace_variance(1.0 / php.sigmas[level])
    assert abs(cells.var() / expected - 1) < 0.15


# ---------------------------------------------------------------- consistency invariants
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    k=st.integers(1, 40),
    depth=st.integers(1, 12),
    n=st.integers(0, 3000),
    B=st.sampled_from([0.5, 0.7, 0.9]),
    sketch=st.sampled_from(["count-min", "count-sketch"]),
    seed=st.integers(0, 2**16),
    epsilon=st.sampled_from([0.1, 1.0, 10.0]),
)
def test_release_invariants(k, depth, n, B, sketch, seed, epsilon):
    X = multifractal(n, d=2, B=B, depth=16, seed=seed)
    php = PrivHP(Box.unit(2), epsilon=epsilon, k=k, width=32, depth=depth, sketch=sketch, rng=seed)
    php.update_many(X)
    release = php.release()
    grown = php.partition_tree
    L = php.counter_depth
    # Node bound of the issue: 2^{L_c+1} − 1 + 2k(r − L_c), with k the release_k (default
    # max(k, w // 4)).
    assert php.release_k == max(k, 32 // 4)
    k = php.release_k
    assert grown.n_nodes <= 2 ** (L + 1) - 1 + 2 * k * (depth - L) == php.release_nodes_bound()
    levels = grown.levels
    for level in range(depth + 1):
        prefixes, counts = levels.get(level, (np.zeros(0, np.uint64), np.zeros(0)))
        assert (counts >= 0).all()
        if level == depth or level + 1 not in levels:
            continue
        child_p, child_c = levels[level + 1]
        parents = child_p >> np.uint64(1)
        has_children = np.isin(prefixes, parents)
        sums = np.zeros(prefixes.size)
        idx = np.searchsorted(prefixes, parents)
        np.add.at(sums, idx, child_c)
        np.testing.assert_allclose(sums[has_children], counts[has_children], atol=1e-6)
        if level >= L:
            # Every expanded node from L_c down was among its level's k largest consistent counts.
            expanded = counts[has_children]
            assert has_children.sum() <= k
            if expanded.size:
                kth = np.sort(counts)[::-1][min(k, counts.size) - 1]
                assert (expanded >= kth - 1e-9).all()
    assert release.total == pytest.approx(float(levels[0][1][0]))


# ---------------------------------------------------------------- protocol and memory
def test_update_equals_update_many_and_consume():
    X = multifractal(500, d=2, B=0.7, depth=12, seed=1)
    a, b, c = _php(), _php(), _php()
    for row in X:
        a.update(row)
    b.update_many(X)
    assert c.consume(iter(X), batch_size=37) == 500
    for other in (b, c):
        np.testing.assert_array_equal(a._tree, other._tree)
        np.testing.assert_array_equal(a._bank, other._bank)
    assert a.n_seen == b.n_seen == c.n_seen == 500


def test_consume_mixed_arrays_and_rows():
    X = multifractal(1000, d=2, B=0.7, depth=12, seed=2)
    a, b = _php(), _php()
    a.update_many(X)
    b.consume([X[:300], *X[300:310], X[310:]], batch_size=128)
    np.testing.assert_array_equal(a._bank, b._bank)


def test_memory_is_fixed_and_follows_formula():
    php = PrivHP(Box.unit(2), epsilon=1.0, k=64, width=1024, sketch_depth=3, depth=24, rng=0)
    # Counter levels 0…L_c with L_c = floor(log2(1024·3)) = 11 > L_k = 6.
    expected = 8 * (1024 * 3 * (24 - 11) + 2**12 - 1) + 8 * 25 + 64
    assert php.counter_depth == 11
    assert php.nbytes == expected == PrivHP.memory_bytes(64, 1024, 3, 24)
    paper = PrivHP(Box.unit(2), 1.0, k=64, width=1024, depth=24, rng=0, counter_depth=6)
    assert paper.nbytes == 8 * (1024 * 3 * (24 - 6) + 2**7 - 1) + 8 * 25 + 64
    assert paper.nbytes == PrivHP.memory_bytes(64, 1024, 3, 24, counter_depth=6)
    before = php.nbytes
    php.consume(multifractal(50_000, d=2, B=0.8, depth=20, seed=s) for s in range(4))
    assert php.nbytes == before


def test_merge_raw_equals_concatenated_stream():
    X = multifractal(2000, d=2, B=0.8, depth=14, seed=3)
    a, b, whole = _php(raw=True), _php(raw=True), _php(raw=True)
    a.update_many(X[:700])
    b.update_many(X[700:])
    whole.update_many(X)
    a.merge(b)
    np.testing.assert_array_equal(a._tree, whole._tree)
    np.testing.assert_array_equal(a._bank, whole._bank)
    with pytest.raises(ValueError, match="width"):
        a.merge(_php(width=32, raw=True))
    with pytest.raises(ValueError, match="seed"):
        a.merge(_php(seed=9, raw=True))


def test_roundtrip_bytes_snapshot_and_pickle():
    X = multifractal(3000, d=2, B=0.8, depth=14, seed=4)
    php = _php()
    php.update_many(X)
    blob = php.to_bytes()
    back = PrivHP.from_bytes(blob)
    np.testing.assert_array_equal(back._tree, php._tree)
    np.testing.assert_array_equal(back._bank, php._bank)
    assert back.to_bytes() == blob
    again = pickle.loads(pickle.dumps(php))
    assert again.to_bytes() == blob
    snap = php.snapshot()
    with pytest.raises(ReleasedError):
        snap.update_many(X[:1])
    php.update_many(X[:10])
    assert snap.n_seen == 3000 and php.n_seen == 3010
    with pytest.raises(SerializationError):
        PrivHP.from_bytes(blob[:-3])
    altered = bytearray(blob)
    altered[len(blob) // 2] ^= 1
    with pytest.raises(SerializationError):
        PrivHP.from_bytes(bytes(altered))


def test_release_once():
    php = _php()
    php.update_many(multifractal(1000, d=2, B=0.8, depth=14, seed=5))
    snap = php.snapshot()
    first = php.release()
    assert php.release() is first
    assert snap.release() is first  # same noise, same stream position: same release
    with pytest.raises(ReleasedError):
        php.update(np.array([0.5, 0.5]))
    with pytest.raises(ReleasedError):
        php.update_many(np.zeros((3, 2)))
    with pytest.raises(ReleasedError):
        php.consume([np.zeros((3, 2))])


def test_snapshot_released_first_blocks_the_live_object():
    php = _php()
    php.update_many(multifractal(100, d=2, B=0.8, depth=14, seed=6))
    php.snapshot().release()
    with pytest.raises(ReleasedError):
        php.update_many(np.zeros((1, 2)))


@pytest.mark.parametrize(
    "kw",
    [
        dict(sketch="count-min", width=1024),
        dict(sketch="count-min", width=1000),  # not a power of two: the multiply-shift bucket
        dict(sketch="count-sketch", width=64),
    ],
)
def test_large_batch_paths_equal_small_batches(kw):
    """A batch above the two-thread threshold, with per-cell counting down to level 14, gives
    exactly the state of the same rows fed in small serial batches (per-cell down to level 10)."""
    rows = np.random.default_rng(5).beta(0.5, 2.0, size=(40_000, 2))
    big = _php(raw=True, k=16, depth=22, **kw)
    small = _php(raw=True, k=16, depth=22, **kw)
    big.update_many(rows)
    for chunk in np.array_split(rows, 10):
        small.update_many(chunk)
    np.testing.assert_array_equal(big._tree, small._tree)
    np.testing.assert_array_equal(big._bank, small._bank)
    assert big.n_seen == small.n_seen == 40_000
    # And one row of each chunk agrees with the one-item path (update).
    single = _php(raw=True, k=16, depth=22, **kw)
    batch = _php(raw=True, k=16, depth=22, **kw)
    for x in rows[:200]:
        single.update(x)
    batch.update_many(rows[:200])
    np.testing.assert_array_equal(single._bank, batch._bank)
    # Removals take the same paths with weight −1: the big batch undoes the small ones.
    for chunk in np.array_split(rows, 10):
        big.remove_many(chunk)
    assert not big._tree.any() and not big._bank.any()
    small.remove_many(rows)
    assert not small._tree.any() and not small._bank.any()
    assert (big.n_seen, big.n_removed) == (40_000, 40_000)


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "kwargs, word",
    [
        (dict(k=0), "'k'"),
        (dict(width=0), "'width'"),
        (dict(epsilon=0.0), "'epsilon'"),
        (dict(epsilon=-1.0), "'epsilon'"),
        (dict(epsilon=float("nan")), "'epsilon'"),
        (dict(epsilon=float("inf")), "'epsilon'"),
        (dict(depth=0), "'depth'"),
        (dict(depth=65), "'depth'"),
        (dict(depth=None, expected_n=0), "'expected_n'"),
        (dict(sketch="bloom"), "'sketch'"),
        (dict(allocation="greedy"), "'allocation'"),
        (dict(sketch_depth=0), "'sketch_depth'"),
    ],
)
def test_bad_parameters(kwargs, word):
    with pytest.raises(ParameterError, match=word):
        _php(**kwargs)


def test_depth_from_expected_n():
    php = PrivHP(Box.unit(2), epsilon=1.0, k=8, width=16, expected_n=2**18, rng=0)
    assert php.depth == 18
    php1 = PrivHP(Box.unit(1), epsilon=1.0, k=8, width=16, expected_n=2**18, rng=0)
    assert php1.depth == 17
    with pytest.raises(ParameterError, match="depth"):
        PrivHP(Box.unit(2), epsilon=1.0, k=8, width=16, rng=0)


@pytest.mark.parametrize(
    "bad, row",
    [
        ([[0.1, 0.2], [np.nan, 0.5], [0.3, 0.3]], "1"),
        ([[0.1, 0.2], [0.2, 0.5], [0.3, np.inf]], "2"),
        ([[0.1, 0.2, 0.3]], None),
        ([["a", "b"]], "0"),
    ],
)
def test_bad_rows_refuse_the_whole_batch(bad, row):
    php = _php()
    php.update_many(multifractal(200, d=2, B=0.8, depth=14, seed=7))
    tree_before, bank_before = php._tree.copy(), php._bank.copy()
    with pytest.raises(InputError) as info:
        php.update_many(np.array(bad, dtype=object))
    if row is not None:
        assert "row" in str(info.value) and row in str(info.value)
    np.testing.assert_array_equal(php._tree, tree_before)
    np.testing.assert_array_equal(php._bank, bank_before)
    assert php.n_seen == 200


def test_consume_names_the_stream_row():
    php = _php()
    rows = [[0.1, 0.1]] * 10 + [[0.5, float("nan")]] + [[0.2, 0.2]] * 5
    with pytest.raises(InputError, match="stream row 8"):
        php.consume(rows, batch_size=8)
    assert php.n_seen == 8  # the first full batch was counted; the bad batch was refused whole


def test_bitdomain_ipv4_stream():
    dom = BitDomain(32)
    keys = np.random.default_rng(0).integers(0, 2**32, size=5000, dtype=np.uint64)
    keys[:3000] = (10 << 24) + (keys[:3000] % 256)  # a hot /24
    php = PrivHP(dom, epsilon=1.0, k=16, width=256, expected_n=5000, rng=0)
    assert php.depth == 12  # ceil(log2(εn)) − 1 for d = 1
    php.update_many(keys)
    release = php.release()
    # 3000 keys in 10.0.0.0/24 plus ~8 of the 2000 uniform keys fall in 10.0.0.0/8.
    inside = release.count(10 << 24, (11 << 24) - 1)
    assert 2700 < inside < 3300, inside
    assert release.sample(100, rng=1).dtype == np.int64


# ---------------------------------------------------------------- utility trend
def _w1_tree(X, release, domain):
    from sketchsyn.evaluate.metrics import wasserstein1

    return wasserstein1(X, release, domain, method="tree").value


@pytest.fixture(scope="module")
def utility_grid():
    """Mean tree-bound W1 over 3 seeds, n = 2^18 multifractal B = 0.8, d = 2, ε = 1 (the
    trends below hold by factors of 1.5–2.4 against the 1.1 asked; 5 seeds moved no ratio by
    more than 0.01)."""
    n, dom = 2**18, Box.unit(2)
    data = [multifractal(n, d=2, B=0.8, depth=24, seed=100 + s) for s in range(3)]
    configs = {
        "k4": dict(k=4, width=1024),
        "k16": dict(k=16, width=1024),
        "k64": dict(k=64, width=1024),
        "w16": dict(k=64, width=16),
        "w128": dict(k=64, width=128),
        "full": dict(k=2**18, width=1),
    }
    out = {}
    for name, cfg in configs.items():
        values = []
        for s, X in enumerate(data):
            # The paper's layout (counters down to L_k, k cells grown): these tests check its k
            # and w trends; tests/test_privhp_accuracy.py compares the new defaults with it.
            L_k = min(cfg["k"].bit_length() - 1, 18)
            php = PrivHP(
                dom, 1.0, depth=18, rng=1000 + s, counter_depth=L_k, release_k=cfg["k"], **cfg
            )
            php.update_many(X)
            values.append(_w1_tree(X, php.release(), dom))
        out[name] = float(np.mean(values))
    return out


def test_utility_improves_with_k(utility_grid):
    g = utility_grid
    assert g["k4"] > 1.1 * g["k16"] > 1.1 * 1.1 * g["k64"], g


def test_utility_improves_with_width(utility_grid):
    g = utility_grid
    assert g["w16"] > 1.1 * g["w128"] and g["w128"] > g["k64"], g


def test_full_tree_is_at_least_as_good_as_k64(utility_grid):
    g = utility_grid
    assert g["full"] <= g["k64"], g


def test_consume_peak_memory_is_a_few_batches():
    import tracemalloc

    batch = 16384

    def rows():
        rng = np.random.default_rng(0)
        for _ in range(40):  # 655,360 rows, generated lazily
            yield rng.random((batch, 2))

    php = PrivHP(Box.unit(2), epsilon=1.0, k=64, width=1024, depth=24, rng=0)
    php.consume(rows(), batch_size=batch)  # warm-up: pools, caches
    tracemalloc.start()
    php2 = PrivHP(Box.unit(2), epsilon=1.0, k=64, width=1024, depth=24, rng=0)
    php2.consume(rows(), batch_size=batch)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    batch_bytes = batch * 2 * 8
    # The state (~0.44 MB) plus the working arrays of a couple of batches, never the stream.
    assert peak < php2.nbytes + 12 * batch_bytes, peak
    assert php2.n_seen == 40 * batch


def test_diagnostics_make_a_trusted_blob_whatever_the_flag_type():
    """include_diagnostics=np.True_ writes exact counts: the header must say trusted, and a
    blob that says private while carrying them is refused."""
    from sketchsyn.errors import SerializationError
    from sketchsyn.io.serial import header_of, pack, read

    php = PrivHP(Box.unit(2), 1.0, k=4, width=32, depth=6, rng=1)
    php.update_many(np.random.default_rng(0).random((123, 2)))
    for flag in (True, np.True_):
        assert header_of(php.to_bytes(include_diagnostics=flag)).state == "trusted"
    assert header_of(php.to_bytes()).state == "private"
    got = read(php.to_bytes(include_diagnostics=True), "PrivHP")
    forged = pack(got.kind, got.version, got.meta, got.arrays, state="private")
    with pytest.raises(SerializationError, match="'diagnostics' holds exact counts"):
        PrivHP.from_bytes(forged)
