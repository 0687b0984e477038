"""The synthesizers of the papers: PrivHP with its tree and release, continual PrivHP, the online
synthesizer, the longitudinal (fixed-window and cumulative) synthesizers, low-dimensional
synthesis with private PCA, and PMM / PSMM with their exact level counts.
"""

from __future__ import annotations

from .assign import assign_within_groups, choose_in_groups
from .continual import ContinualPrivHP, binary_levels
from .cumulative import CumulativeSynthesizer, available_counters, counter_budgets, monotonize
from .distribution import Leaves, PrivateDistribution
from .histogram import LevelCounts
from .longitudinal import FixedWindowSynthesizer, as_column
from .lowdim import LowDimDistribution, LowDimSynthesizer
from .marginal import MarginalSynthesizer
from .marginal_model import MarginalDistribution
from .online import OnlineSynthesizer, depth_at, level_start
from .pmm import PMM
from .private_pca import (
    CHUNK_ROWS,
    QUANT,
    GridNoise,
    choose_target_dim,
    covariance_exact,
    covariance_noise,
    mean_noise,
    moment_sums,
    private_covariance,
    private_mean,
    projection_box,
    quantize,
)
from .privhp import PrivHP
from .psmm import MAX_CELLS, PSMM, closest_probability_measure
from .tree import (
    PartitionTree,
    check_consistency,
    consistent_levels,
    consistent_levels_integer,
    even_split,
    grow_partition,
    integer_split,
)

__all__ = [
    "CHUNK_ROWS",
    "ContinualPrivHP",
    "CumulativeSynthesizer",
    "FixedWindowSynthesizer",
    "GridNoise",
    "Leaves",
    "LevelCounts",
    "LowDimDistribution",
    "LowDimSynthesizer",
    "MAX_CELLS",
    "MarginalDistribution",
    "MarginalSynthesizer",
    "OnlineSynthesizer",
    "PMM",
    "PSMM",
    "PartitionTree",
    "PrivHP",
    "PrivateDistribution",
    "QUANT",
    "as_column",
    "assign_within_groups",
    "available_counters",
    "binary_levels",
    "check_consistency",
    "choose_in_groups",
    "choose_target_dim",
    "closest_probability_measure",
    "consistent_levels",
    "consistent_levels_integer",
    "counter_budgets",
    "covariance_exact",
    "covariance_noise",
    "depth_at",
    "even_split",
    "grow_partition",
    "integer_split",
    "level_start",
    "mean_noise",
    "moment_sums",
    "monotonize",
    "private_covariance",
    "private_mean",
    "projection_box",
    "quantize",
]
