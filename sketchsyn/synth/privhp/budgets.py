"""PrivHP's per-level budgets, computed once per set of public parameters.

They are a function of public parameters only (ε, the release's ``k``, the depth, the domain's
cell diameters, the allocation, the counter depth, the sketch rows and the neighbours' factor),
worked out in exact rationals: a process that builds many summaries alike (one per partition,
per shard, per trial of an audit) pays for that arithmetic once.

>>> sigmas, level_eps = level_budgets(1.0, 2, 2, (1.0, 1.0, 0.5, 0.25), "optimal", 1, 1, 2.0)
>>> round(sum(sigmas), 12), [e <= s / 2 for e, s in zip(level_eps, sigmas)]
(1.0, [True, True, True])
"""

from __future__ import annotations

import functools

import numpy as np

from ...errors import ParameterError
from ...privacy import accounting

__all__ = ["level_budgets", "realisable"]


@functools.lru_cache(maxsize=256)
def level_budgets(
    epsilon: float,
    release_k: int,
    depth: int,
    gammas: tuple[float, ...],
    allocation: str,
    counter_depth: int,
    sketch_depth: int,
    factor: float,
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """``(σ_0…σ_r, each level's structure budget σ_l / factor rounded down)`` (Holland et al.,
    Lemma 5; see :func:`~sketchsyn.privacy.accounting.privhp_allocation`), as tuples: the
    caller makes its own arrays. (Each level's noise scale is the caller's to work out.)"""
    sigmas = np.asarray(
        accounting.privhp_allocation(
            epsilon,
            release_k,
            depth,
            gammas=np.array(gammas),
            allocation=allocation,
            counter_depth=counter_depth,
        ),
        dtype=np.float64,
    )
    sigmas = realisable(sigmas, epsilon, depth, counter_depth, sketch_depth, factor)
    level_eps = tuple(accounting.share_of(s, factor) for s in sigmas)
    return tuple(sigmas.tolist()), level_eps


def realisable(
    sigmas: np.ndarray,
    epsilon: float,
    depth: int,
    counter_depth: int,
    sketch_depth: int,
    factor: float,
) -> np.ndarray:
    """Raise tiny level shares to the least the exact sampler realises (scale ≤ 2**30).

    Lemma 5 gives very deep levels (e.g. ``depth = 56`` in d = 1) shares so small that their
    noise scale would exceed ``MAX_LAPLACE_SCALE``; such a level carries no information
    anyway. Each share is raised to ``sensitivity·factor/2**30`` (one ulp more) and the
    other levels are scaled down so that the total stays ε. Refused only when ε cannot
    cover even those floors.
    """
    sens = np.where(np.arange(depth + 1) <= counter_depth, 1.0, float(sketch_depth))
    floor = np.nextafter(sens * factor / accounting.MAX_LAPLACE_SCALE, np.inf) * (1 + 1e-12)
    low = sigmas < floor
    if not low.any():
        return sigmas
    rest = epsilon - floor[low].sum()
    if rest <= 0 or not (~low).any():
        raise ParameterError(
            f"The 'epsilon' parameter of PrivHP is too small for depth={depth}: its "
            f"levels would need integer Laplace noise above the largest supported scale "
            f"2**30. Got {epsilon!r} instead."
        )
    out = sigmas.copy()
    out[low] = floor[low]
    out[~low] *= rest / sigmas[~low].sum()
    return accounting.fit_to_budget(out, epsilon)
