"""sketchsyn: differentially private synthetic data from streams, in small fixed memory.

The public names are re-exported here and loaded on first use, so ``import sketchsyn`` stays cheap.

>>> import sketchsyn
>>> sketchsyn.__version__
'0.1.0'
"""

from __future__ import annotations

import importlib

from .attributes import lazy_exports as _lazy_exports

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
    "UtilityWarning": "errors",
    "Lineage": "privacy.lineage",
    # randomness and noise
    "as_source": "privacy.rng",
    "RandomSource": "privacy.rng",
    "discrete_laplace": "privacy.noise",
    "discrete_gaussian": "privacy.noise",
    # hashing and sketches
    "murmur3_32": "sketches.hashing",
    "HashFamily": "sketches.hashing",
    "CountMinSketch": "sketches.sketch",
    "CountSketch": "sketches.sketch",
    # continual counters
    "BinaryMechanism": "counters.tree",
    "CounterBank": "counters.tree",
    "SparseCounter": "counters.sparse",
    "SqrtFactorizationCounter": "counters.factorization",
    "KaryTreeBank": "counters.karybank",
    "KaryTreeCounter": "counters.karytree",
    "InhomogeneousSparseCounter": "counters.inhomogeneous",
    "InhomogeneousSparseBank": "counters.sparsebank",
    "online_budgets": "counters.inhomogeneous",
    # accounting
    "PureDPBudget": "privacy.accounting",
    "ZCDPBudget": "privacy.accounting",
    "privhp_allocation": "privacy.accounting",
    "pmm_scales": "privacy.accounting",
    # privacy units (user-level privacy)
    "ContributionBounder": "units.bounder",
    # domains, tree, release
    "Box": "domains.box",
    "Domain": "domains.base",
    "BitDomain": "domains.bitdomain",
    "Schema": "domains.schema",
    "PrivateDistribution": "synth.distribution",
    "Leaves": "synth.distribution",
    "PartitionTree": "synth.tree",
    # algorithms
    "PrivHP": "synth.privhp",
    "ContinualPrivHP": "synth.continual",
    "PMM": "synth.offline.pmm",
    "PSMM": "synth.offline.psmm",
    "GridHistogram": "baselines.grid",
    "LowDimSynthesizer": "synth.lowdim",
    "MarginalSynthesizer": "synth.marginal",
    "MarginalDistribution": "synth.marginal",
    "OnlineSynthesizer": "synth.online",
    "StreamingPrivTree": "synth.continual",
    "AdaptiveGrid": "baselines.grid",
    "PrivTree": "baselines.grid",
    "FixedWindowSynthesizer": "synth.longitudinal",
    "CumulativeSynthesizer": "synth.longitudinal",
    # evaluation
    "wasserstein1": "evaluate.metrics",
    "w1_floor": "evaluate.metrics",
    "W1Result": "evaluate.metrics",
    # readers
    "CSVReader": "io.readers",
    "JSONLinesReader": "io.readers",
    "AccessLogReader": "io.readers",
    "open_reader": "io.readers",
    "follow": "io.readers",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


_SUMMARY_PACKAGES = ("sketches", "counters", "units", "synth", "baselines")


def _import_summaries() -> None:
    """Import every package that defines a Summary, so the registry holds every kind
    (:func:`sketchsyn.io.summary.registry` calls it; importing ``sketchsyn`` stays cheap)."""
    for package in _SUMMARY_PACKAGES:
        module = importlib.import_module(f".{package}", __name__)
        load_all = getattr(module, "_import_all", None)  # a package that loads names lazily
        if load_all is not None:
            load_all()


__getattr__ = _lazy_exports(globals(), _EXPORTS)


def __dir__() -> list[str]:
    return __all__
