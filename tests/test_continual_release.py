"""ContinualPrivHP's release (sketchsyn.synth.continual.release): pruning below the noise.

Post-processing only: the released noisy cells are those of the mechanism; the tests check the
release's invariants (total, determinism, ``prune=0`` is the plain growth) and that pruning
lowers W1 on a skewed stream.
"""

from __future__ import annotations

import numpy as np
import pytest

from sketchsyn import Box, ContinualPrivHP, wasserstein1
from sketchsyn.errors import ParameterError
from sketchsyn.synth import continual_release as cr
from sketchsyn.synth import tree


def skewed(n: int, seed: int) -> np.ndarray:
    """97% of the rows on 12 atoms in [0, 0.05]², 3% uniform in [0, 0.3]² (a skewed stream)."""
    cols = []
    for j in range(2):
        rng = np.random.default_rng(100 * (j + 1) + seed)
        atoms = rng.random(12) * 0.05
        x = atoms[rng.integers(0, 12, n)]
        tail = rng.random(n) < 0.03
        x[tail] = rng.random(int(tail.sum())) * 0.3
        cols.append(x)
    return np.stack(cols, axis=1)


def build(seed: int, n: int = 2**14, **kw) -> tuple[ContinualPrivHP, np.ndarray]:
    args = dict(k=16, width=64, horizon=2**14, rng=seed) | kw
    c = ContinualPrivHP(Box.unit(2), 1.0, **args)
    X = skewed(n, seed)
    c.update_many(X)
    return c, X


def test_prune_pairs_keeps_the_sums():
    rng = np.random.default_rng(0)
    p = rng.integers(0, 100, 500).astype(float)
    c0 = np.floor(p * rng.random(500))
    c1 = p - c0
    for threshold in (0.0, 5.0, 30.0):
        a, b = cr.prune_pairs(p, c0, c1, threshold)
        assert np.array_equal(a + b, p) and (a >= 0).all() and (b >= 0).all()
        # Pairs with exactly one child below the threshold give it all to the other child.
        one_low = (c0 < threshold) != (c1 < threshold)
        low0 = one_low & (c0 < threshold)
        assert (a[low0] == 0).all() and np.array_equal(b[low0], p[low0])
        low1 = one_low & ~low0
        assert (b[low1] == 0).all() and np.array_equal(a[low1], p[low1])
        assert np.array_equal(a[~one_low], c0[~one_low]) and np.array_equal(
            b[~one_low], c1[~one_low]
        )
    a, b = cr.prune_pairs(p, c0, c1, 0.0)
    assert np.array_equal(a, c0) and np.array_equal(b, c1)


def test_noise_threshold_follows_the_empty_cells():
    rng = np.random.default_rng(1)
    signal = np.full(5, 40.0)
    many_empty = np.concatenate([rng.standard_normal(200), signal])
    few_empty = np.concatenate([rng.standard_normal(3), 5.0 + rng.random(200)])
    assert cr.noise_threshold(many_empty, 0.2, 6.0) >= 2.0
    assert cr.noise_threshold(few_empty, 0.2, 6.0) <= 0.5
    assert cr.noise_threshold(-np.ones(4), 0.2, 3.0) == 3.0  # nothing above: the cap


@pytest.mark.parametrize(
    "kw",
    [{}, {"sketch": "count-sketch"}, {"releases": 4}, {"counter": "honaker", "releases": 4}],
)
def test_total_is_the_consistent_root(kw):
    c, _ = build(3, **kw)
    root = max(float(c.top_levels()[0][0]), 0.0)
    for prune in (0.0, cr.PRUNE, 0.5):
        leaves = c.release(prune=prune).leaves()
        assert (leaves.count >= 0).all()
        assert leaves.count.sum() == pytest.approx(root, rel=1e-9, abs=1e-6)


def test_prune_zero_is_the_plain_growth():
    c, _ = build(4)

    def query(level, prefixes):
        return cr._sketch_values(c, level, prefixes)[0]

    plain = tree.grow_partition(tree.consistent_levels(c.top_levels()), query, c.k, c.depth)
    c.release(prune=0)
    for a, b in zip(plain.leaves(), c.partition_tree.leaves(), strict=True):
        assert np.array_equal(a, b)


def test_deterministic_given_the_noise():
    c1, _ = build(5)
    c2, _ = build(5)
    d1 = c1.release()
    assert c1.release() is d1 and d1.params["prune"] == cr.PRUNE
    for a, b in zip(d1.leaves(), c2.release().leaves(), strict=False):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    off = c1.release(prune=0)
    assert off.params["prune"] == 0.0 and off is not d1
    again = c1.release()
    assert np.array_equal(again.leaves().count, d1.leaves().count)


def test_pruning_lowers_w1_on_a_skewed_stream():
    on, off = [], []
    for seed in range(8):
        c, X = build(seed)
        on.append(wasserstein1(X, c.release(), Box.unit(2), method="tree").value)
        off.append(wasserstein1(X, c.release(prune=0), Box.unit(2), method="tree").value)
    assert np.mean(on) < 0.85 * np.mean(off), (np.mean(on), np.mean(off))
    assert sum(a < b for a, b in zip(on, off, strict=True)) >= 6


@pytest.mark.parametrize("bad", [-0.1, float("nan"), float("inf"), True, "0.2", None])
def test_bad_prune_is_refused(bad):
    c, _ = build(6, n=100)
    with pytest.raises(ParameterError, match="'prune'"):
        c.release(prune=bad)
