"""The synthesizers of the papers, one subpackage per family, and the machinery they share.

Shared by the families (the modules at the top of this package):

* ``tree``: consistency of noisy hierarchical counts (even and integer splits, least squares over
  levels) and top-``k`` growth of the partition tree;
* ``distribution``: :class:`PrivateDistribution`, the release over the leaves of a private tree.

The families, lowest first (a family imports only the shared modules and the families before it):

* ``offline``: PMM and PSMM over exact level counts;
* ``privhp``: PrivHP, its sketch bank, sizing, planner and release;
* ``continual``: continual PrivHP and StreamingPrivTree (a release per step or epoch);
* ``online``: the online synthesizer of an endless stream;
* ``longitudinal``: the fixed-window and cumulative panel synthesizers;
* ``lowdim``: private PCA, then PMM or PSMM in the projected space;
* ``marginal``: the one-pass marginal synthesizer and its model.

The names below are loaded on first use (``import sketchsyn.synth`` does not import every
synthesizer), as ``import sketchsyn`` does. The flat module paths of earlier versions
(``sketchsyn.synth.pmm``, ``sketchsyn.synth.release``, ...) still import: see
:mod:`sketchsyn.synth.moved`.

>>> from sketchsyn.synth import PMM
>>> PMM.__name__
'PMM'
"""

from __future__ import annotations

import importlib

from ..attributes import lazy_exports as _lazy_exports
from .moved import install as _install_moved

_install_moved()

# Every public name and the module of this package that defines it.
_EXPORTS = {
    "assign_within_groups": "longitudinal.assign",
    "choose_in_groups": "longitudinal.assign",
    "ContinualPrivHP": "continual",
    "binary_levels": "continual",
    "CumulativeSynthesizer": "longitudinal.cumulative",
    "available_counters": "longitudinal.cumulative",
    "counter_budgets": "longitudinal.cumulative",
    "monotonize": "longitudinal.cumulative",
    "Leaves": "distribution",
    "PrivateDistribution": "distribution",
    "LevelCounts": "offline.histogram",
    "FixedWindowSynthesizer": "longitudinal.fixed_window",
    "as_column": "longitudinal.fixed_window",
    "LowDimDistribution": "lowdim.synthesizer",
    "LowDimSynthesizer": "lowdim.synthesizer",
    "MarginalSynthesizer": "marginal.synthesizer",
    "MarginalDistribution": "marginal.model",
    "OnlineSynthesizer": "online.synthesizer",
    "depth_at": "online.synthesizer",
    "level_start": "online.synthesizer",
    "PMM": "offline.pmm",
    "CHUNK_ROWS": "lowdim.private_pca",
    "QUANT": "lowdim.private_pca",
    "GridNoise": "lowdim.private_pca",
    "choose_target_dim": "lowdim.private_pca",
    "covariance_exact": "lowdim.private_pca",
    "covariance_noise": "lowdim.private_pca",
    "mean_noise": "lowdim.private_pca",
    "moment_sums": "lowdim.private_pca",
    "private_covariance": "lowdim.private_pca",
    "private_mean": "lowdim.private_pca",
    "projection_box": "lowdim.private_pca",
    "quantize": "lowdim.private_pca",
    "PrivHP": "privhp.summary",
    "MAX_CELLS": "offline.psmm",
    "PSMM": "offline.psmm",
    "StreamingPrivTree": "continual.streaming_privtree",
    "closest_probability_measure": "offline.psmm",
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


__getattr__ = _lazy_exports(globals(), _EXPORTS)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def _import_all() -> None:
    """Import every module of the package (the summary registry needs every class defined)."""
    for module in sorted(set(_EXPORTS.values())):
        importlib.import_module(f".{module}", __name__)
