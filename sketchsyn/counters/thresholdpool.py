"""A private sparse bank's first thresholds of a time level, drawn ahead in blocks.

A private :class:`~sketchsyn.counters.sparsebank.InhomogeneousSparseBank` (the OS CSPRNG) gives
a counter its first threshold of a level just before the level first checks it, so a level that
never checks a counter draws none for it (no release depends on it). The values are independent
``Lap_Z(xs)`` draws taken in order from a :class:`ThresholdPool`, which draws them in blocks: at
least :data:`BLOCK` values, then as many as the level has drawn so far, never more than the
counters left unchecked. Which counter takes which value does not depend on the values, so each
threshold has the law of its own draw, and a level draws at most twice its checked counters
plus :data:`BLOCK` values, in ``O(log)`` calls.

>>> from fractions import Fraction
>>> from sketchsyn.privacy.rng import as_source
>>> pool = ThresholdPool(unchecked=1000)
>>> pool.take(3, Fraction(4), as_source(None)).shape, pool.drawn, pool.nbytes
((3,), 64, 512)
>>> _ = pool.take(997, Fraction(4), as_source(None)); pool.drawn, pool.nbytes
(1000, 0)
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..privacy.rng import RandomSource
from .base import _draw

__all__ = ["BLOCK", "ThresholdPool"]

#: The first block's values; each later block is as large as the values drawn before it.
BLOCK = 64


class ThresholdPool:
    """One level's ``Lap_Z(xs)`` values drawn ahead for its ``unchecked`` counters.

    ``drawn``: the values the level has drawn; ``nbytes``: the memory the pool holds (its
    array, whole, until every value in it is taken).
    """

    __slots__ = ("_values", "_taken", "drawn", "unchecked")

    def __init__(self, unchecked: int = 0) -> None:
        self._values = np.zeros(0, dtype=np.int64)
        self._taken = 0  # values already taken: the rest are the next ones
        self.drawn = 0
        self.unchecked = int(unchecked)

    @property
    def nbytes(self) -> int:
        return 8 * int(self._values.size)

    def take(self, k: int, xs: Fraction, src: RandomSource) -> np.ndarray:
        """The next ``k`` values (``k`` at most the counters left unchecked), for ``k`` counters
        checked for the first time; a new block is drawn from ``src`` when the pool runs out."""
        if k > self.unchecked:
            raise ValueError(f"k = {k} is more than the {self.unchecked} counters left unchecked")
        left = self._values.size - self._taken
        if left < k:
            block = min(max(k - left, self.drawn, BLOCK), self.unchecked - left)
            more = _draw("laplace", xs, block, src)
            self._values = np.concatenate((self._values[self._taken :], more))
            self._taken = 0
            self.drawn += block
        out = self._values[self._taken : self._taken + k]
        self._taken += k
        self.unchecked -= k
        if self._taken == self._values.size:  # all taken: the memory goes back
            self._values, self._taken = np.zeros(0, dtype=np.int64), 0
        return out
