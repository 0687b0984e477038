"""A flat DP grid histogram: the baseline a user would otherwise pick.

The domain is cut into the ``2**level`` cells of one Morton level (for a d-dimensional Box with
``level = d·b``, a regular grid of ``2**b`` cells per axis); each cell gets ``Lap_Z(1/ε)``,
negative counts are clamped to 0, and the release samples cells in proportion to the rest
(renormalised). Pure ε-DP, add/remove one item; noise drawn once at ``release()``.

``memory_bytes`` picks the finest grid whose int64 counters fit in that budget, so the baseline
can be compared with a PrivHP of the same memory.

>>> from sketchsyn import Box
>>> g = GridHistogram(Box.unit(2), epsilon=1.0, memory_bytes=40_000, rng=0)
>>> g.level, g.nbytes <= 40_000
(12, True)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .accounting import laplace_scale
from .distribution import PrivateDistribution
from .errors import ParameterError, check_epsilon, check_int
from .histogram import LevelCounts, check_domain
from .noise import discrete_laplace
from .rng import RNGLike

__all__ = ["GridHistogram"]


class GridHistogram(LevelCounts):
    """Flat DP histogram on a grid (Laplace per cell, clamped, renormalised).

    Give exactly one of ``level`` (Morton level), ``cells_per_axis`` (a power of two, Box only)
    or ``memory_bytes`` (finest level whose state fits).
    """

    _kind = "GridHistogram"

    def __init__(
        self,
        domain: Any,
        epsilon: float,
        level: int | None = None,
        cells_per_axis: int | None = None,
        memory_bytes: int | None = None,
        rng: RNGLike = None,
    ) -> None:
        self._epsilon = check_epsilon(epsilon, "GridHistogram")
        self._scale = laplace_scale(1, self._epsilon, "GridHistogram")
        check_domain(domain, "GridHistogram")
        limit = min(int(domain.max_depth), 30)
        level_name = "level"
        given = [a is not None for a in (level, cells_per_axis, memory_bytes)]
        if sum(given) != 1:
            raise ParameterError(
                "GridHistogram needs exactly one of 'level', 'cells_per_axis', 'memory_bytes'."
            )
        if cells_per_axis is not None:
            c = check_int(cells_per_axis, "cells_per_axis", "GridHistogram", minimum=2)
            if c & (c - 1):
                raise ParameterError(
                    f"The 'cells_per_axis' parameter of GridHistogram must be a "
                    f"power of two. Got {c} instead."
                )
            level = domain.d * (c.bit_length() - 1)
            level_name = "cells_per_axis"
            if level > limit:
                raise ParameterError(
                    f"The 'cells_per_axis' parameter of GridHistogram gives {c}**{domain.d} "
                    f"= 2**{level} cells, more than the 2**{limit} a grid may have. Got {c} "
                    "instead."
                )
        elif memory_bytes is not None:
            mem = check_int(memory_bytes, "memory_bytes", "GridHistogram", minimum=8 * 2 + 64)
            level = min(int(np.floor(np.log2((mem - 64) / 8))), limit)
            level_name = "memory_bytes"
        super().__init__(domain, level, rng, "GridHistogram", level_name=level_name)

    @property
    def epsilon(self) -> float:
        return self._epsilon

    @property
    def level(self) -> int:
        return self._level

    def _params(self) -> dict[str, Any]:
        return super()._params() | {"epsilon": self._epsilon}

    @classmethod
    def _from_params(cls, meta: dict[str, Any]) -> GridHistogram:
        from .domains import domain_from_dict

        return cls(domain_from_dict(meta["domain"]), meta["epsilon"], level=meta["depth"])

    def _release_now(self) -> tuple[PrivateDistribution, dict[str, np.ndarray]]:
        """Add the noise once, clamp at zero, return the private distribution."""
        noisy = self._counts + discrete_laplace(self._scale, self._counts.size, rng=self._source)
        counts = np.maximum(noisy, 0).astype(np.float64)
        cells = np.flatnonzero(counts)
        if cells.size == 0:  # nothing survived the noise: all-zero grid, sampled uniformly
            cells = np.arange(counts.size)
        dist = PrivateDistribution(
            self._domain,
            np.full(cells.size, self._level),
            cells.astype(np.uint64),
            counts[cells],
            epsilon=self._epsilon,
            mechanism="GridHistogram",
            params={k: v for k, v in self._params().items() if k != "domain"},
        )
        return dist, {}
