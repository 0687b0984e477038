"""PMM, the Private Measure Mechanism (He's dissertation §3.2, Algorithms 3–4, Corollary 3.11).

A full binary tree of depth ``r`` over the domain: every cell of every level gets its exact count
plus ``Lap_Z(s_l)`` with the optimal per-level scales ``s_l = S/(ε·sqrt(Δ_{l−1}))`` (so that
``Σ_l 1/s_l = ε``), clamped at 0; then integer consistency top down (each pair of children
replaced by a comparable non-negative integer pair summing to the parent). PMM is PrivHP without
pruning, at ``O(2**depth)`` memory.

Privacy: pure ε-DP, add/remove one item (one item changes one cell per level). PMM is offline:
the noise is drawn once, at ``release()``, so the exact counts held before that are **not
private**; after the release, updates raise.

>>> import numpy as np
>>> from sketchsyn import Box
>>> pmm = PMM(Box.unit(2), epsilon=1.0, depth=8, rng=0)
>>> pmm.update_many(np.random.default_rng(1).random((5000, 2)))
>>> dist = pmm.release()
>>> Y = pmm.synthetic(rng=2)
>>> Y.shape[0] == round(dist.total)
True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...attributes import ReadOnly
from ...errors import ParameterError, check_choice, check_domain, check_epsilon, check_int
from ...io.serial import MetaReader
from ...privacy import accounting
from ...privacy.noise import discrete_laplace
from ...privacy.rng import RNGLike, as_source
from ..distribution import PrivateDistribution
from ..tree import PartitionTree, consistent_levels_integer
from .histogram import LevelCounts

__all__ = ["PMM"]


class PMM(LevelCounts):
    """Private Measure Mechanism: full tree, optimal per-level integer Laplace noise.

    Saved state: **trusted**: exact counts until ``release()`` (see :class:`LevelCounts`).

    Parameters
    ----------
    domain : Box or BitDomain
    epsilon : float
        Privacy budget (pure ε-DP, add/remove one item).
    depth : int, optional
        Tree depth ``r`` (at most 30). Derived from ``expected_n`` when not given:
        ``ceil(log2(ε n))``, minus one for d = 1 (Corollary 3.11).
    expected_n : int, optional
        Public guess of the number of items, used only to choose the depth.
    consistency : {"uniform", "proportional"}
        Comparable integer transform used for consistency.
    rng : None, int, SeedSequence, Generator or RandomSource, optional
        Noise randomness (``None``: OS CSPRNG; a seed is for tests only, not private).
    """

    def __init__(
        self,
        domain: Any,
        epsilon: float,
        depth: int | None = None,
        expected_n: int | None = None,
        consistency: str = "uniform",
        rng: RNGLike = None,
    ) -> None:
        self._epsilon = check_epsilon(epsilon, "PMM")
        self._consistency = check_choice(
            consistency, "consistency", "PMM", ("uniform", "proportional")
        )
        check_domain(domain, "PMM")
        if depth is None:
            if expected_n is None:
                raise ParameterError(
                    "PMM needs either 'depth' or 'expected_n' (to derive the depth). Got neither."
                )
            n = check_int(expected_n, "expected_n", "PMM", minimum=1)
            depth = accounting.pmm_depth(self._epsilon, n, domain.d)
            if depth > min(30, int(domain.max_depth)):
                raise ParameterError(
                    f"The 'expected_n' parameter of PMM gives depth {depth} "
                    f"(2**{depth} cells, {2 ** (depth + 4):.3g} bytes); PMM's full tree is "
                    "limited to depth 30 and to the memory limit. Give a smaller 'depth' or "
                    f"use PrivHP. Got {expected_n!r} instead."
                )
        super().__init__(domain, depth, rng, "PMM")
        self._scales = self.scales  # refuses a budget too small for the sampler, up front

    _PARAMS = ("epsilon", "consistency")
    epsilon = ReadOnly[float]("Privacy budget ε of the release.")

    @property
    def depth(self) -> int:
        return self._level

    @property
    def scales(self) -> np.ndarray:
        """Integer Laplace scale ``s_l`` of each level (``Σ 1/s_l = ε``)."""
        gammas = [self._domain.gamma(level) for level in range(-1, self._level + 1)]
        return accounting.pmm_scales(self._epsilon, self._level, gammas=gammas)

    @classmethod
    def _from_params(cls, fields: MetaReader, rng: RNGLike) -> PMM:
        return cls(
            fields.domain(),
            fields.epsilon("epsilon"),
            depth=fields.int("depth", minimum=1),
            consistency=fields.str("consistency", ("uniform", "proportional")),
            rng=rng,
        )

    def _extra_shapes(self) -> dict[str, tuple[Any, tuple[int, ...]]]:
        return {"synthetic_counts": (np.int64, (2**self._level,))}

    def _release_now(self) -> tuple[PrivateDistribution, dict[str, np.ndarray]]:
        """Draw the noise once, make the tree consistent, return the private distribution."""
        streams = self._source.spawn(self._level + 1)
        noisy = []
        for level, (exact, scale) in enumerate(
            zip(self._complete_levels(), self._scales, strict=False)
        ):
            lam = discrete_laplace(float(scale), exact.size, rng=streams[level])
            noisy.append(np.maximum(exact + lam, 0))
        consistent = consistent_levels_integer(noisy, self._consistency)
        tree = PartitionTree.from_complete_levels([c.astype(np.float64) for c in consistent])
        levels, prefixes, counts = tree.leaves()
        keep = counts > 0
        if not keep.any():  # nothing survived the noise: release the (all-zero) full level,
            keep[:] = True  # which PrivateDistribution treats as "no information" (uniform)
        synthetic_counts = np.asarray(consistent[-1], dtype=np.int64)
        dist = self._distribution(levels[keep], prefixes[keep], counts[keep], "PMM")
        return dist, {"synthetic_counts": synthetic_counts}

    @property
    def synthetic_counts(self) -> np.ndarray:
        """Consistent integer count of every depth-``r`` cell (releases first if needed)."""
        return self._release_extra("synthetic_counts").copy()

    def synthetic(self, rng: RNGLike = None) -> np.ndarray:
        """A synthetic dataset of exactly the consistent root count of points.

        Each depth-``r`` cell gets its consistent integer count of points, uniform in the cell.
        Calls :meth:`release` first if needed (post-processing: no further budget).
        """
        counts = self._release_extra("synthetic_counts")
        cells = np.flatnonzero(counts)
        prefixes = np.repeat(cells.astype(np.uint64), counts[cells])
        return self._domain.sample_cells(self._level, prefixes, rng=as_source(rng))
