"""Budgets, composition, conversion and the per-level allocations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sketchsyn.errors import BudgetExceededError, ParameterError
from sketchsyn.privacy.accounting import (
    PureDPBudget,
    ZCDPBudget,
    pmm_depth,
    pmm_scales,
    privhp_allocation,
    privhp_depth,
    pure_to_zcdp,
    zcdp_to_approx_dp,
)


def test_budget_composes_exactly_and_refuses_overspend():
    b = PureDPBudget(1.0)
    for i in range(3):
        b.spend(1 / 3, f"third {i}")
    assert b.remaining == pytest.approx(0.0, abs=1e-15)
    assert [label for label, _ in b.ledger] == ["third 0", "third 1", "third 2"]
    with pytest.raises(BudgetExceededError, match="epsilon=0.001"):
        b.spend(0.001, "extra")
    assert len(b.ledger) == 3


def test_zcdp_budget_and_conversion():
    z = ZCDPBudget(0.5)
    z.spend(0.2)
    z.spend(0.3)
    with pytest.raises(BudgetExceededError):
        z.spend(0.01)
    assert z.to_approx_dp(1e-6) == pytest.approx(0.5 + 2 * math.sqrt(0.5 * math.log(1e6)))
    assert zcdp_to_approx_dp(0.005, 1e-5) == pytest.approx(
        0.005 + 2 * math.sqrt(0.005 * math.log(1e5))
    )
    assert pure_to_zcdp(1.0) == 0.5
    with pytest.raises(ParameterError, match="delta"):
        zcdp_to_approx_dp(1.0, 1.5)


@given(
    epsilon=st.floats(0.01, 50),
    k=st.integers(1, 5000),
    depth=st.integers(1, 40),
    d=st.integers(1, 5),
    allocation=st.sampled_from(["optimal", "uniform"]),
)
def test_privhp_allocation_sums_to_epsilon(epsilon, k, depth, d, allocation):
    s = privhp_allocation(epsilon, k, depth, d=d, allocation=allocation)
    assert s.shape == (depth + 1,)
    assert (s > 0).all()
    assert abs(s.sum() - epsilon) <= 1e-12 * epsilon


def test_privhp_allocation_follows_lemma_5():
    eps, k, depth, d = 2.0, 8, 12, 2
    s = privhp_allocation(eps, k, depth, d=d)
    L = 3

    def gamma(level):
        return 2.0 ** -(max(level, 0) // d)

    def Gamma(level):  # noqa: N802 (the paper's name)
        return 2.0 ** max(level, 0) * gamma(level)

    w = [
        math.sqrt(Gamma(lv - 1)) if lv <= L else math.sqrt(k * gamma(lv - 1))
        for lv in range(depth + 1)
    ]
    np.testing.assert_allclose(s, eps * np.array(w) / sum(w), rtol=1e-12)
    u = privhp_allocation(eps, k, depth, d=d, allocation="uniform")
    np.testing.assert_allclose(u, eps / (depth + 1))


def test_allocation_with_explicit_gammas_matches_unit_cube():
    g = [2.0 ** -(max(lv, 0) // 3) for lv in range(-1, 11)]
    np.testing.assert_allclose(
        privhp_allocation(1.0, 4, 10, gammas=g), privhp_allocation(1.0, 4, 10, d=3)
    )
    with pytest.raises(ParameterError, match="gammas"):
        privhp_allocation(1.0, 4, 10, gammas=[1.0, 2.0])


def test_pmm_scales_and_depths():
    s = pmm_scales(1.5, depth=10, d=2)
    assert (1.0 / s).sum() == pytest.approx(1.5, rel=1e-12)
    assert pmm_depth(1.0, 2**16, 1) == 15 and pmm_depth(1.0, 2**16, 2) == 16
    assert privhp_depth(1.0, 2**16, 2, k=2**20) == 21  # clamped to L_k + 1
    with pytest.raises(ParameterError, match="'n'"):
        pmm_depth(1.0, 0, 2)
