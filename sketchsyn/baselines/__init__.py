"""Equal-memory comparison mechanisms: the flat DP grid, the adaptive grid (AG) and PrivTree."""

from __future__ import annotations

from .grid import AdaptiveGrid, GridHistogram, PrivTree

__all__ = [
    "AdaptiveGrid",
    "GridHistogram",
    "PrivTree",
]
