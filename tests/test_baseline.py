"""The equal-memory grid baseline, and PrivHP beating it on skewed data at <= 5% of PMM memory."""

from __future__ import annotations

import numpy as np
import pytest

from sketchsyn import PMM, Box, GridHistogram, PrivHP
from sketchsyn.errors import ParameterError
from sketchsyn.evaluate.datasets import multifractal
from sketchsyn.evaluate.metrics import wasserstein1


def test_memory_sizing_and_non_negative_release():
    g = GridHistogram(Box.unit(2), 1.0, memory_bytes=100_000, rng=0)
    assert (
        g.nbytes <= 100_000 and GridHistogram(Box.unit(2), 1.0, level=g.level + 1).nbytes > 100_000
    )
    g.update_many(np.random.default_rng(0).random((1000, 2)))
    dist = g.release()
    assert (dist.leaves().count >= 0).all()
    assert GridHistogram(Box.unit(2), 1.0, cells_per_axis=16).level == 8
    with pytest.raises(ParameterError, match="power of two"):
        GridHistogram(Box.unit(2), 1.0, cells_per_axis=10)
    with pytest.raises(ParameterError, match="exactly one"):
        GridHistogram(Box.unit(2), 1.0, level=4, memory_bytes=1000)


def test_grid_improves_with_n():
    dom = Box.unit(2)
    w = []
    for n in (2**10, 2**16):
        X = np.random.default_rng(1).beta(2, 5, size=(n, 2))
        g = GridHistogram(dom, 1.0, level=8, rng=2)
        g.update_many(X)
        w.append(wasserstein1(X, g.release(), dom, method="tree").value)
    assert w[1] < 0.7 * w[0]


def test_privhp_beats_equal_memory_grid_on_skewed_data():
    dom, n = Box.unit(2), 2**18
    X = multifractal(n, 2, 0.9, 24, seed=10)
    pmm = PMM(dom, 1.0, depth=18, rng=0)
    pmm.update_many(X)
    php = PrivHP(dom, 1.0, k=64, width=256, depth=18, rng=0)
    php.update_many(X)
    assert php.nbytes <= 0.05 * pmm.nbytes
    grid = GridHistogram(dom, 1.0, memory_bytes=php.nbytes, rng=0)
    grid.update_many(X)
    assert grid.nbytes <= php.nbytes
    w_php = wasserstein1(X, php.release(), dom, method="tree").value
    w_grid = wasserstein1(X, grid.release(), dom, method="tree").value
    w_pmm = wasserstein1(X, pmm.release(), dom, method="tree").value
    assert w_php < 0.8 * w_grid, (w_php, w_grid)
    assert w_php < 2.0 * w_pmm  # the price of small memory (measured about 1.15x)


# ---------------------------------------------------------------- AG and PrivTree (issue 14)
def _spy(monkeypatch):
    """Record every (scale, size) the baselines draw integer Laplace noise with."""
    import sketchsyn.baselines.grid as baseline

    calls = []
    real = baseline.discrete_laplace

    def spy(scale, size, rng=None):
        out = real(scale, size, rng=rng)
        calls.append((float(scale), int(np.size(out))))
        return out

    monkeypatch.setattr(baseline, "discrete_laplace", spy)
    return calls


def _volume(dist):
    lv = dist.leaves().level
    return float(np.sum(2.0 ** -np.asarray(lv, dtype=float)))


@pytest.mark.parametrize("epsilon,alpha", [(1.0, 0.5), (0.3, 0.25)])
def test_adaptive_grid_noise_scales_compose_to_epsilon(monkeypatch, epsilon, alpha):
    from sketchsyn import AdaptiveGrid

    X = multifractal(20_000, 2, 0.8, 16, seed=3)
    ag = AdaptiveGrid(Box.unit(2), epsilon, 20_000, level=12, alpha=alpha, rng=1)
    ag.update_many(X)
    calls = _spy(monkeypatch)
    dist = ag.release()
    s1, s2 = ag.noise_scales
    assert s1 == pytest.approx(1 / (alpha * epsilon)) and s2 == pytest.approx(
        1 / ((1 - alpha) * epsilon)
    )
    assert 1 / s1 + 1 / s2 == pytest.approx(epsilon)
    # One draw at scale s1 for each first-level cell, one at s2 for each second-level cell.
    assert calls[0] == (pytest.approx(s1), 2**ag.level1)
    assert all(c[0] == pytest.approx(s2) for c in calls[1:])
    n_second = sum(c[1] for c in calls[1:])
    assert n_second >= dist.leaves().level.size  # empty cells are dropped from the release
    assert _volume(dist) <= 1.0 + 1e-12 and ag.epsilon == epsilon


def test_privtree_scales_and_one_draw_per_visited_node(monkeypatch):
    from sketchsyn import PrivTree

    X = multifractal(20_000, 2, 0.9, 16, seed=4)
    pt = PrivTree(Box.unit(2), 1.0, level=14, rng=2)
    pt.update_many(X)
    calls = _spy(monkeypatch)
    pt.release()
    beta, lam = 4, (2 * 4 - 1) / ((4 - 1) * 0.5)
    assert (pt.beta, pt.lam, pt.delta) == (beta, pytest.approx(lam), pytest.approx(lam * np.log(4)))
    assert pt.leaf_scale == pytest.approx(2.0)
    # ε_tree + ε_leaf = (2β − 1)/((β − 1)λ) + 1/leaf_scale = ε.
    assert (2 * beta - 1) / ((beta - 1) * pt.lam) + 1 / pt.leaf_scale == pytest.approx(1.0)
    tree_calls, leaf_call = calls[:-1], calls[-1]
    assert all(c[0] == pytest.approx(lam) for c in tree_calls) and tree_calls[0][1] == 1
    # Every split node has β children, each visited once: visited = 1 + β·(splits).
    visited = sum(c[1] for c in tree_calls)
    n_leaves = leaf_call[1]
    assert leaf_call[0] == pytest.approx(2.0)
    assert (visited - 1) % beta == 0 and n_leaves == visited - (visited - 1) // beta
    assert n_leaves > 50  # the skewed data is split deep


def test_privtree_root_split_rate_matches_the_scale(monkeypatch):
    """With c = 3 rows the root splits iff 3 + Lap_Z(λ) > 0: P = 1 − p³/(1 + p), p = e^(−1/λ).

    (At λ·2 the rate would be 0.62 instead of 0.71: the test fails on a wrong scale.)
    """
    from sketchsyn import PrivTree

    calls = _spy(monkeypatch)
    rng = np.random.default_rng(5)
    trials, splits = 3000, 0
    for _ in range(trials):
        pt = PrivTree(Box.unit(2), 1.0, level=2, rng=int(rng.integers(2**31)))
        pt.update_many(np.full((3, 2), 0.3))
        calls.clear()
        pt.release()
        splits += len(calls) == 3  # root decision, the 4 children's decisions, the leaf noise
    p = np.exp(-1 / pt.lam)
    want = 1 - p**3 / (1 + p)
    assert abs(splits / trials - want) < 4 * np.sqrt(want * (1 - want) / trials), (splits, want)
