"""Exact integer Laplace noise drawn ahead in blocks and handed out in order, each value once.

A mechanism that needs many small draws at one scale, whose sizes it learns one at a time (a
tree grown level by level, each level's nodes tested with fresh noise), pays a call of the
sampler per draw, mostly fixed costs. :class:`LaplacePool` draws a block of values in one
vectorised call of the sampler (:func:`~sketchsyn.privacy.noise.discrete_laplace`'s) and hands
them out in order; a request larger than what is left draws a new block behind the values left.

Why this is the same noise. The block's values are independent ``Lap_Z(scale)`` draws, exact as
every draw of :mod:`sketchsyn.privacy.noise`, from the same source (the OS CSPRNG unless a seed
is given). Each value is handed out at most once (a cursor only moves forward) and values never
handed out are dropped with the pool. Which values a request gets depends only on how many
were handed out before, and the values at or after the cursor are independent of everything
handed out so far, so the values of each request are fresh independent ``Lap_Z(scale)`` draws
given all earlier outputs: the law of one call of the sampler per request. Only the words a
seeded source gives to each request differ (a seeded run is not private anyway).

>>> pool = LaplacePool(2.0, block=64, rng=1)
>>> a, b = pool.take(10), pool.take(100)
>>> a.dtype, a.size, b.size, pool.drawn
(dtype('int64'), 10, 100, 128)
"""

from __future__ import annotations

import numpy as np

from ..errors import check_int
from .noise import _laplace_core, exact_rational
from .rng import RNGLike, as_source

__all__ = ["LaplacePool"]


class LaplacePool:
    """``Lap_Z(scale)`` values drawn ``block`` at a time (more when one request needs more)
    from ``rng`` (``None``: the OS CSPRNG) and handed out in order by :meth:`take`, each once.
    """

    __slots__ = ("_at", "_block", "_drawn", "_scale", "_src", "_values")

    def __init__(self, scale: float, block: int, rng: RNGLike = None) -> None:
        self._scale = exact_rational(scale, "scale", "LaplacePool")
        self._block = check_int(block, "block", "LaplacePool", minimum=1, maximum=2**26)
        self._src = as_source(rng)
        self._values = np.zeros(0, dtype=np.int64)
        self._at = 0
        self._drawn = 0

    @property
    def drawn(self) -> int:
        """Values drawn so far (handed out or still in the pool)."""
        return self._drawn

    def take(self, n: int) -> np.ndarray:
        """The next ``n`` values (int64), never handed out before."""
        n = check_int(n, "n", "LaplacePool.take", minimum=0, maximum=2**40)
        left = self._values.size - self._at
        if n > left:
            fresh = _laplace_core(self._scale, max(n - left, self._block), self._src)
            self._values = np.concatenate((self._values[self._at :], fresh))
            self._at = 0
            self._drawn += fresh.size
        out = self._values[self._at : self._at + n]
        self._at += n
        return out
