"""The synthesizers of the papers: PrivHP with its tree and release, continual PrivHP, the online
synthesizer, the longitudinal (fixed-window and cumulative) synthesizers, low-dimensional
synthesis with private PCA, and PMM / PSMM with their exact level counts.

The names below are loaded on first use (``import sketchsyn.synth`` does not import every
synthesizer), as ``import sketchsyn`` does.

>>> from sketchsyn.synth import PMM
>>> PMM.__name__
'PMM'
"""

from __future__ import annotations

import importlib
from typing import Any

# Every public name and the module of this package that defines it.
_EXPORTS = {
    "assign_within_groups": "assign",
    "choose_in_groups": "assign",
    "ContinualPrivHP": "continual",
    "binary_levels": "continual",
    "CumulativeSynthesizer": "cumulative",
    "available_counters": "cumulative",
    "counter_budgets": "cumulative",
    "monotonize": "cumulative",
    "Leaves": "distribution",
    "PrivateDistribution": "distribution",
    "LevelCounts": "histogram",
    "FixedWindowSynthesizer": "longitudinal",
    "as_column": "longitudinal",
    "LowDimDistribution": "lowdim",
    "LowDimSynthesizer": "lowdim",
    "MarginalSynthesizer": "marginal",
    "MarginalDistribution": "marginal_model",
    "OnlineSynthesizer": "online",
    "depth_at": "online",
    "level_start": "online",
    "PMM": "pmm",
    "CHUNK_ROWS": "private_pca",
    "QUANT": "private_pca",
    "GridNoise": "private_pca",
    "choose_target_dim": "private_pca",
    "covariance_exact": "private_pca",
    "covariance_noise": "private_pca",
    "mean_noise": "private_pca",
    "moment_sums": "private_pca",
    "private_covariance": "private_pca",
    "private_mean": "private_pca",
    "projection_box": "private_pca",
    "quantize": "private_pca",
    "PrivHP": "privhp",
    "MAX_CELLS": "psmm",
    "PSMM": "psmm",
    "StreamingPrivTree": "streaming_privtree",
    "closest_probability_measure": "psmm",
    "PartitionTree": "tree",
    "check_consistency": "tree",
    "consistent_levels": "tree",
    "consistent_levels_integer": "tree",
    "even_split": "tree",
    "grow_partition": "tree",
    "integer_split": "tree",
}

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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def _import_all() -> None:
    """Import every module of the package (the summary registry needs every class defined)."""
    for module in sorted(set(_EXPORTS.values())):
        importlib.import_module(f".{module}", __name__)
