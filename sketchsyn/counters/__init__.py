"""Continual counters, one module per family: the tree (binary, Honaker) and its banks, sparse and
inhomogeneous sparse counting, the vectorised sparse bank, the k-ary tree and the square-root
factorization.
"""

from __future__ import annotations

from .karytree import KaryTreeCounter, balanced_digits, karytree_levels
from .sparsebank import InhomogeneousSparseBank
from .tree import (
    BinaryMechanism,
    CounterBank,
    InhomogeneousSparseCounter,
    OnlineBudgets,
    SparseCounter,
    SqrtFactorizationCounter,
    first_trips,
    online_budgets,
    sqrt_coefficients,
)

__all__ = [
    "BinaryMechanism",
    "CounterBank",
    "InhomogeneousSparseBank",
    "InhomogeneousSparseCounter",
    "KaryTreeCounter",
    "OnlineBudgets",
    "SparseCounter",
    "SqrtFactorizationCounter",
    "balanced_digits",
    "first_trips",
    "karytree_levels",
    "online_budgets",
    "sqrt_coefficients",
]
