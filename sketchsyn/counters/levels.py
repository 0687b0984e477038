"""The public parameters of one time level of an
:class:`~sketchsyn.counters.sparsebank.InhomogeneousSparseBank` (He, Vershynin and Zhu,
Algorithm 3): its steps, the scales of its noises and its sparse-counting threshold ``T0``,
the same for every counter of a bank and shared by the banks of one synthesizer.

>>> lv = _level(3, 0.5, Fraction(1), 1, "bank")
>>> (lv.first, lv.end, lv.length, lv.sub_levels)
(8, 15, 8, 4)
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

from .base import _check_param
from .inhomogeneous import _level_start
from .sparse import _floor_t0

__all__ = ["_Level", "_level"]


class _Level:
    """Public parameters of one time level ``r`` (the same for every counter of the bank)."""

    __slots__ = (
        "end",
        "eps",
        "first",
        "length",
        "r",
        "scale",
        "sub_levels",
        "sub_param",
        "t0",
        "x",
        "xs",
    )

    def __init__(self, r: int, eps_r: float, eps_frac: Fraction, sensitivity: int, owner: str):
        self.r = r
        self.eps = eps_r
        self.first = _level_start(r, eps_frac)
        self.end = _level_start(r + 1, eps_frac) - 1
        self.length = self.end - self.first + 1
        sens = Fraction(sensitivity)
        # The level's total: Lap_Z(2·sensitivity/ε_r).
        self.scale = _check_param(2 * sens / Fraction(eps_r), "scale", owner)
        # Sparse counting at ε_r/2 (the same float arithmetic as InhomogeneousSparseCounter).
        eps_s = eps_r / 2
        self.xs = _check_param(2 * sens / Fraction(eps_s), "scale", owner)
        self.x = 1 / self.xs
        self.t0 = _floor_t0(self.length, Fraction(eps_s), sensitivity)
        # Closed segments: a binary mechanism at ε_r/4, horizon = the level's length.
        self.sub_levels = self.length.bit_length()
        self.sub_param = _check_param(sens * self.sub_levels / Fraction(eps_s / 2), "scale", "tree")


@lru_cache(maxsize=1024)
def _level(r: int, eps_r: float, eps_frac: Fraction, sensitivity: int, owner: str) -> _Level:
    """:class:`_Level`, shared by the banks of one synthesizer (its fields are read-only)."""
    return _Level(r, eps_r, eps_frac, sensitivity, owner)
