"""Continual counters, one module per family: the shared base (:mod:`.base`), the tree engines
(:mod:`.engines`), the binary mechanism and its bank (:mod:`.tree`), the square-root
factorization (:mod:`.factorization`), sparse counting (:mod:`.sparse`), inhomogeneous sparse
counting (:mod:`.inhomogeneous`), its vectorised bank (:mod:`.sparsebank`), the k-ary tree
(:mod:`.karytree`) and its bank (:mod:`.karybank`).

Every counter's saved state is **trusted** (it reveals exact counts next to later releases):
see :mod:`sketchsyn.counters.base`.
"""

from __future__ import annotations

from .factorization import SqrtFactorizationCounter, sqrt_coefficients
from .inhomogeneous import InhomogeneousSparseCounter, OnlineBudgets, online_budgets
from .karybank import KaryTreeBank
from .karytree import KaryTreeCounter, balanced_digits, karytree_levels
from .sparse import SparseCounter, first_trips
from .sparsebank import InhomogeneousSparseBank
from .tree import BinaryMechanism, CounterBank

__all__ = [
    "BinaryMechanism",
    "CounterBank",
    "InhomogeneousSparseBank",
    "InhomogeneousSparseCounter",
    "KaryTreeBank",
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
