"""PSMM: a probability measure, the LP is the d_BL-closest one, large partitions are refused."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linprog

from sketchsyn import PSMM, Box
from sketchsyn.errors import ParameterError
from sketchsyn.synth.offline.psmm import MAX_CELLS, closest_probability_measure


def d_bl(nu: np.ndarray, tau: np.ndarray, dist: np.ndarray) -> float:
    """Primal d_BL = sup { Σ f (ν − τ) : |f| ≤ 1, f_i − f_j ≤ d_ij } by its own LP."""
    m = nu.size
    rows, rhs = [], []
    for i in range(m):
        for j in range(m):
            if i != j:
                r = np.zeros(m)
                r[i], r[j] = 1.0, -1.0
                rows.append(r)
                rhs.append(dist[i, j])
    res = linprog(
        -(nu - tau), A_ub=np.array(rows), b_ub=np.array(rhs), bounds=(-1, 1), method="highs"
    )
    return -res.fun


@pytest.mark.parametrize("seed", range(4))
def test_lp_finds_the_closest_probability_measure(seed):
    rng = np.random.default_rng(seed)
    m = 6
    y = rng.random((m, 2))
    dist = np.abs(y[:, None, :] - y[None, :, :]).max(-1)
    nu = rng.normal(1 / m, 0.15, size=m)
    tau = closest_probability_measure(nu, dist)
    assert tau.min() >= 0 and tau.sum() == pytest.approx(1.0)
    best = d_bl(nu, tau, dist)
    clamped = np.maximum(nu, 0) / np.maximum(nu, 0).sum()
    assert best <= d_bl(nu, clamped, dist) + 1e-9
    for _ in range(20):  # no random probability vector does better
        other = rng.dirichlet(np.ones(m))
        assert best <= d_bl(nu, other, dist) + 1e-9


def test_release_is_a_probability_measure_and_refuses_large_partitions():
    m = PSMM(Box.unit(2), 1.0, depth=5, rng=0)
    m.update_many(np.random.default_rng(0).beta(2, 5, size=(3000, 2)))
    dist = m.release()
    assert dist.leaves().mass.sum() == pytest.approx(1.0) and (dist.leaves().count >= 0).all()
    with pytest.raises(ParameterError, match=f"MAX_CELLS = {MAX_CELLS}"):
        PSMM(Box.unit(2), 1.0, depth=9)
