"""sketchsyn: differentially private synthetic data from streams, in small fixed memory.

The public names are re-exported here and loaded on first use, so ``import sketchsyn`` stays cheap.

>>> import sketchsyn
>>> sketchsyn.__version__
'0.1.0'
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    # errors
    "ParameterError": "errors",
    "InputError": "errors",
    "IncompatibleError": "errors",
    "SerializationError": "errors",
    "BudgetExceededError": "errors",
    "ReleasedError": "errors",
    "ConcurrentUseError": "errors",
    "Lineage": "lineage",
    # randomness and noise
    "as_source": "rng",
    "RandomSource": "rng",
    "discrete_laplace": "noise",
    "discrete_gaussian": "noise",
    # hashing and sketches
    "murmur3_32": "hashing",
    "HashFamily": "hashing",
    "CountMinSketch": "sketches",
    "CountSketch": "sketches",
    # continual counters
    "BinaryMechanism": "counters",
    "CounterBank": "counters",
    "SparseCounter": "counters",
    "SqrtFactorizationCounter": "counters",
    "KaryTreeCounter": "karytree",
    "InhomogeneousSparseCounter": "counters",
    "InhomogeneousSparseBank": "sparsebank",
    "online_budgets": "counters",
    # accounting
    "PureDPBudget": "accounting",
    "ZCDPBudget": "accounting",
    "privhp_allocation": "accounting",
    "pmm_scales": "accounting",
    # domains, tree, release
    "Box": "domains",
    "Domain": "domains",
    "BitDomain": "domains",
    "PrivateDistribution": "distribution",
    "Leaves": "distribution",
    "PartitionTree": "tree",
    # algorithms
    "PrivHP": "privhp",
    "ContinualPrivHP": "continual",
    "PMM": "pmm",
    "PSMM": "psmm",
    "GridHistogram": "baseline",
    "LowDimSynthesizer": "lowdim",
    "OnlineSynthesizer": "online",
    "AdaptiveGrid": "baseline",
    "PrivTree": "baseline",
    "FixedWindowSynthesizer": "longitudinal",
    "CumulativeSynthesizer": "cumulative",
    # evaluation
    "wasserstein1": "metrics",
    "w1_floor": "metrics",
    "W1Result": "metrics",
    # readers
    "CSVReader": "readers",
    "JSONLinesReader": "readers",
    "AccessLogReader": "readers",
    "open_reader": "readers",
    "follow": "readers",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'sketchsyn' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
