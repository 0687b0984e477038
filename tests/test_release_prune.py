"""PrivHP.release(prune=...): pruning below the noise is post-processing of the noisy state.

The pruning code is shared with ContinualPrivHP (sketchsyn.synth.privhp.release); these tests check
that the one-pass release depends only on the noisy state, keeps its total, equals Holland et
al.'s release exactly with ``prune=0``, refuses bad values, and lowers W1 on a skewed stream
grown deep (where empty cells would otherwise keep a share of the noise).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sketchsyn import Box, PrivHP, wasserstein1
from sketchsyn.errors import ParameterError, ReleasedError
from sketchsyn.privacy.noise import discrete_laplace_variance
from sketchsyn.synth import release as rel
from sketchsyn.synth import tree


def skewed(n: int, seed: int, d: int = 2) -> np.ndarray:
    """97% of the rows on 12 atoms in [0, 0.05]^d, 3% uniform in [0, 0.3]^d."""
    rng = np.random.default_rng(seed)
    atoms = rng.random((12, d)) * 0.05
    X = atoms[rng.integers(0, 12, n)]
    tail = rng.random(n) < 0.03
    X[tail] = rng.random((int(tail.sum()), d)) * 0.3
    return X


def build(seed: int, n: int = 2**14, **kw) -> tuple[PrivHP, np.ndarray]:
    args = dict(k=64, width=256, depth=24, rng=seed) | kw
    php = PrivHP(Box.unit(2), 1.0, **args)
    X = skewed(n, seed)
    php.update_many(X)
    return php, X


def leaves(dist) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    L = dist.leaves()
    return np.asarray(L.level), np.asarray(L.prefix), np.asarray(L.count, dtype=np.float64)


def old_release(php: PrivHP) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Holland et al.'s release as it was before pruning (least squares, even split, growth)."""
    counts, sketches = rel.noisy_state(php)
    L = php.counter_depth
    levels = [counts[2**j - 1 : 2 ** (j + 1) - 1].astype(np.float64) for j in range(L + 1)]
    variances = [discrete_laplace_variance(1 / e) for e in php._level_eps[: L + 1]]
    top = tree.consistent_levels(rel.least_squares_levels(levels, variances))

    def query(level, prefixes):
        return np.asarray(sketches[level - L - 1].query_many(prefixes), dtype=np.float64)

    grown = tree.grow_partition(top, query, php.release_k, php.depth, prune_top=True)
    return grown.leaves()


@pytest.mark.parametrize("sketch", ["count-min", "count-sketch"])
def test_prune_zero_is_the_old_release_exactly(sketch):
    php, _ = build(3, n=4000, sketch=sketch)
    php.release(prune=0)
    got = php.partition_tree.leaves()
    want = old_release(php)
    for a, b in zip(got, want, strict=True):
        assert np.array_equal(a, b)


def test_release_depends_only_on_the_noisy_state():
    # Two summaries with the same seed, fed the same rows in a different order and batching,
    # hold the same noisy state: their pruned releases are equal.
    a, X = build(5, n=6000)
    b = PrivHP(Box.unit(2), 1.0, k=64, width=256, depth=24, rng=5)
    order = np.random.default_rng(1).permutation(X.shape[0])
    for part in np.array_split(X[order], 7):
        b.update_many(part)
    for x, y in zip(leaves(a.release(prune=0.2)), leaves(b.release(prune=0.2)), strict=True):
        assert np.array_equal(x, y)
    # A copy loaded from the private bytes releases the same distribution.
    c, _ = build(6, n=6000)
    blob = c.to_bytes()
    first = leaves(c.release(prune=0.2))
    again = leaves(PrivHP.from_bytes(blob).release(prune=0.2))
    for x, y in zip(first, again, strict=True):
        assert np.array_equal(x, y)


@pytest.mark.parametrize("prune", [0.05, 0.2, 1.0])
def test_pruning_keeps_the_total_and_the_tree_consistent(prune):
    php, _ = build(7, n=5000)
    plain = php.release(prune=0)
    pruned = php.release(prune=prune)  # regrown from the same noise (post-processing)
    assert math.isclose(pruned.total, plain.total, rel_tol=1e-9)
    assert leaves(pruned)[2].min() >= 0
    assert php.partition_tree.check_consistency(atol=1e-6)
    assert pruned.params["prune"] == prune and plain.params["prune"] == 0.0
    # Pruning moves mass into fewer cells: no more non-empty leaves than without it.
    assert (leaves(pruned)[2] > 0).sum() <= (leaves(plain)[2] > 0).sum()


def test_pruning_lowers_w1_on_a_skewed_stream():
    # Deep tree (24 levels) on a skewed stream: without pruning the empty children of the
    # grown cells keep a share of the noise. Measured mean W1 (tree bound, 6 seeds): 16.1e-3
    # without pruning, 12.8e-3 with prune = 0.2.
    plain, pruned = [], []
    for seed in range(6):
        php, X = build(seed)
        plain.append(wasserstein1(X, php.release(prune=0), Box.unit(2), method="tree").value)
        pruned.append(wasserstein1(X, php.release(prune=0.2), Box.unit(2), method="tree").value)
    assert np.mean(pruned) < 0.9 * np.mean(plain), (np.mean(pruned), np.mean(plain))


@pytest.mark.parametrize("bad", [-0.1, float("nan"), float("inf"), "0.2", True])
def test_bad_prune_is_refused(bad):
    php, _ = build(1, n=500, depth=12)
    with pytest.raises(ParameterError, match=r"'prune' parameter of PrivHP\.release"):
        php.release(prune=bad)
    assert not php.released  # a refused call releases nothing


def test_raw_summary_refuses_another_prune_after_release():
    php, _ = build(2, n=2000, raw=True)
    first = php.release(prune=0.2)
    assert php.release(prune=0.2) is first
    with pytest.raises(ReleasedError, match="prune"):
        php.release(prune=0)


def test_default_prune_is_0_2_in_every_dimension():
    php2, _ = build(3, n=4000)
    assert php2.release().params["prune"] == rel.PRUNE == 0.2
    php3 = PrivHP(Box.unit(3), 1.0, k=16, width=64, depth=12, rng=5)
    php3.update_many(skewed(4000, 6, d=3))
    assert php3.release().params["prune"] == rel.PRUNE


def test_default_returns_an_earlier_release_whatever_its_prune():
    # A raw state released with another prune (an earlier version's default, say) is returned
    # as it was by release() without a prune, not refused.
    php, _ = build(7, n=2000, raw=True)
    first = php.release(prune=0.5)
    assert php.release() is first
    with pytest.raises(ReleasedError, match="prune"):
        php.release(prune=0)
