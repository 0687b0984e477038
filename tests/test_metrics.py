"""W1: exact 1-D against scipy, OT against POT with an independent cost, tree bound >= exact."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import wasserstein_distance

from sketchsyn import Box, PrivHP
from sketchsyn.errors import ParameterError
from sketchsyn.evaluate.metrics import OT_LIMIT, w1_floor, wasserstein1
from sketchsyn.synth.distribution import PrivateDistribution

ot = pytest.importorskip("ot")


@pytest.mark.parametrize("seed", range(5))
def test_exact_1d_matches_scipy(seed):
    rng = np.random.default_rng(seed)
    box = Box([-2.0], [3.0])
    x = rng.uniform(-2, 3, size=(int(rng.integers(5, 400)), 1))
    y = rng.beta(2, 5, size=(int(rng.integers(5, 400)), 1)) * 5 - 2
    res = wasserstein1(x, y, box)
    assert res.method == "exact"
    assert res.value == pytest.approx(wasserstein_distance(x[:, 0], y[:, 0]) / 5.0, rel=1e-9)


def test_exact_1d_against_a_distribution_needs_no_sampling():
    dist = PrivateDistribution(
        Box.unit(1), [1, 2, 2], [0, 2, 3], [2.0, 1.0, 3.0], epsilon=1.0, mechanism="hand"
    )
    x = np.random.default_rng(0).random((300, 1))
    exact = wasserstein1(x, dist, Box.unit(1)).value
    big = dist.sample(400_000, rng=1)
    approx = wasserstein_distance(x[:, 0], big[:, 0])
    assert exact == pytest.approx(approx, abs=3e-3)


@pytest.mark.parametrize("seed", range(4))
def test_ot_matches_pot_with_independent_cost(seed):
    rng = np.random.default_rng(seed)
    box = Box([0.0, 0.0, -1.0], [2.0, 1.0, 1.0])
    x = box.lower + rng.random((60, 3)) * (box.upper - box.lower)
    y = box.lower + rng.random((45, 3)) ** 2 * (box.upper - box.lower)
    a, b = (x - box.lower) / (box.upper - box.lower), (y - box.lower) / (box.upper - box.lower)
    cost = np.max(np.abs(a[:, None, :] - b[None, :, :]), axis=-1)
    want = ot.emd2(np.full(60, 1 / 60), np.full(45, 1 / 45), cost)
    got = wasserstein1(x, y, box, method="ot")
    assert got.method == "ot" and got.value == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_tree_bound_dominates_exact_value(seed):
    rng = np.random.default_rng(seed)
    box = Box.unit(2)
    x = rng.beta(2, 5, size=(120, 2))
    y = rng.random((90, 2))
    assert (
        wasserstein1(x, y, box, method="tree").value >= wasserstein1(x, y, box, method="ot").value
    )
    # Against a release: the bound needs no sampling; compare with OT on a large sample.
    php = PrivHP(box, epsilon=2.0, k=8, width=64, depth=10, rng=seed)
    php.update_many(x)
    rel = php.release()
    tree = wasserstein1(x, rel, box, method="tree").value
    ot_value = wasserstein1(x, rel, box, method="ot", n_samples=3000, rng=seed).value
    assert tree >= ot_value - 0.01  # minus the sampling error of the OT estimate


def test_tree_bound_orders_mechanisms():
    """Closer distributions get a smaller bound (its use: trends and comparisons)."""
    rng = np.random.default_rng(9)
    box = Box.unit(2)
    x = rng.beta(2, 5, size=(4000, 2))
    near = x + rng.normal(0, 0.002, size=x.shape)
    far = rng.random((4000, 2))
    t_near = wasserstein1(x, np.clip(near, 0, 1), box, method="tree").value
    t_far = wasserstein1(x, far, box, method="tree").value
    assert t_near < t_far


def test_floor_errors_and_limits():
    x = np.random.default_rng(1).random((400, 2))
    f = w1_floor(x, Box.unit(2), rng=2)
    assert f.method == "ot" and 0 < f.value < 0.2
    with pytest.raises(ParameterError, match="OT_LIMIT"):
        wasserstein1(np.zeros((OT_LIMIT + 1, 1)), np.zeros((3, 1)), Box.unit(1), method="ot")
    with pytest.raises(ParameterError, match="1-D"):
        wasserstein1(x, x, Box.unit(2), method="exact")
    with pytest.raises(ParameterError, match="method"):
        wasserstein1(x, x, Box.unit(2), method="sinkhorn")


@pytest.mark.parametrize("seed", range(4))
def test_halved_tree_bound_still_dominates_ot_across_cell_boundaries(seed):
    """Edge weight γ(parent)/2 (issue 14): points either side of a dyadic boundary are the worst
    case (their lowest common ancestor is coarse while they are close); still an upper bound."""
    rng = np.random.default_rng(seed)
    box = Box.unit(2)
    for cut in (0.5, 0.25, 0.375):
        gap = 10.0 ** -rng.uniform(1, 4)
        x = np.column_stack([np.full(50, cut - gap), rng.random(50)])
        y = np.column_stack([np.full(50, cut + gap), x[:, 1]])
        tree = wasserstein1(x, y, box, method="tree").value
        assert tree >= wasserstein1(x, y, box, method="ot").value - 1e-12
    x, y = rng.beta(2, 5, size=(200, 2)), rng.beta(5, 2, size=(150, 2))
    assert wasserstein1(x, y, box, method="tree").value >= wasserstein1(x, y, box, "ot").value
