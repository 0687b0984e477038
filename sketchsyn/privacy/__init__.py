"""Privacy machinery: the OS CSPRNG and seeded sources, exact integer noise (discrete Laplace and
Gaussian, exact Bernoulli tables), budgets and accounting, and the lineage of a noise draw with
its release guard.
"""

from __future__ import annotations

from .accounting import (
    MAX_LAPLACE_SCALE,
    PureDPBudget,
    ZCDPBudget,
    fit_to_budget,
    laplace_scale,
    pmm_depth,
    pmm_scales,
    privhp_allocation,
    privhp_depth,
    pure_to_zcdp,
    zcdp_to_approx_dp,
)
from .exactexp import Real, ThresholdTable, exp_neg_bracket, resolve_ties
from .lineage import Lineage, UsageGuard, state_digest
from .noise import (
    discrete_gaussian,
    discrete_gaussian_pmf,
    discrete_gaussian_variance,
    discrete_laplace,
    discrete_laplace_pmf,
    discrete_laplace_variance,
    exact_rational,
)
from .rng import RandomSource, RNGLike, as_source

__all__ = [
    "Lineage",
    "MAX_LAPLACE_SCALE",
    "PureDPBudget",
    "RNGLike",
    "RandomSource",
    "Real",
    "ThresholdTable",
    "UsageGuard",
    "ZCDPBudget",
    "as_source",
    "discrete_gaussian",
    "discrete_gaussian_pmf",
    "discrete_gaussian_variance",
    "discrete_laplace",
    "discrete_laplace_pmf",
    "discrete_laplace_variance",
    "exact_rational",
    "exp_neg_bracket",
    "fit_to_budget",
    "laplace_scale",
    "pmm_depth",
    "pmm_scales",
    "privhp_allocation",
    "privhp_depth",
    "pure_to_zcdp",
    "resolve_ties",
    "state_digest",
    "zcdp_to_approx_dp",
]
