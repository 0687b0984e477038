"""Measuring utility: Wasserstein-1 (exact 1-D, exact optimal transport, tree bound) and seeded
data sets.
"""

from __future__ import annotations

from .datasets import TAXI_BOX, multifractal, taxi_pickups
from .metrics import OT_LIMIT, W1Result, w1_floor, wasserstein1

__all__ = [
    "OT_LIMIT",
    "TAXI_BOX",
    "W1Result",
    "multifractal",
    "taxi_pickups",
    "w1_floor",
    "wasserstein1",
]
