"""Consistency of noisy hierarchical counts and top-``k`` growth of the partition tree.

Everything here is post-processing of already private counts: it costs no privacy budget and
draws no randomness. All functions work on whole levels at once (numpy arrays), never on one
node at a time.

Conventions. Level ``l`` of the binary hierarchy has the cells named by ``l``-bit prefixes
``θ``; the children of ``θ`` are ``2θ`` (``θ0``) and ``2θ + 1`` (``θ1``). A *complete* level
``l`` is an array of length ``2**l`` indexed by prefix. A grown tree stores, per level, the
sorted ``uint64`` prefixes of the nodes present and their ``float64`` counts.

Two consistency rules are provided:

* :func:`even_split` (Holland et al., Algorithm 4): float counts, the surplus or deficit of a
  sibling
  pair is shared evenly, with the paper's two corrections.
* :func:`integer_split` (He's dissertation, Algorithm 3): integer counts, the pair is replaced by a
  *comparable* non-negative integer pair on the line ``x + y = parent``, either the closest one
  (``"uniform"``) or the one closest to the input's direction (``"proportional"``).

and one least-squares rule, :func:`combine_levels` (Hay, Rastogi, Miklau and Suciu): each cell's
own estimate and its children's sum combined bottom-up by inverse variances (PrivHP's and the
online synthesizer's releases).

>>> top = consistent_levels([np.array([10.0]), np.array([7.0, 1.0])])
>>> [t.tolist() for t in top]
[[10.0], [8.0, 2.0]]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from ..errors import ParameterError, check_choice, check_int

__all__ = [
    "PartitionTree",
    "check_consistency",
    "combine_levels",
    "consistent_levels",
    "consistent_levels_integer",
    "even_split",
    "grow_partition",
    "integer_split",
]

_U64 = np.uint64
_TRANSFORMS = ("uniform", "proportional")


# --------------------------------------------------------------------------- float: Algorithm 4
def even_split(
    parent: np.ndarray | float, c0: np.ndarray | float, c1: np.ndarray | float
) -> tuple[np.ndarray, np.ndarray]:
    """Make sibling counts consistent with their parent (Holland et al., Algorithm 4).

    For each pair: negative children are set to 0 (correction 1); ``Λ = c0 + c1 − parent``;
    if ``c0 − Λ/2 < 0`` the pair becomes ``(0, parent)``, elif ``c1 − Λ/2 < 0`` it becomes
    ``(parent, 0)`` (correction 2); otherwise both children lose ``Λ/2``. The output is
    non-negative, sums to ``parent`` (up to float rounding) and is *comparable* with the
    clamped input: both children move in the same direction (both down on a surplus, both up on
    a deficit).

    Parameters
    ----------
    parent : array_like
        Consistent parent counts, assumed ``≥ 0``.
    c0, c1 : array_like
        Noisy counts of the children ``θ0`` and ``θ1`` (same shape as ``parent``).

    Returns
    -------
    (c0, c1) : tuple of float64 ndarrays
        New arrays; the inputs are not modified.

    Examples
    --------
    >>> c0, c1 = even_split([10.0, 10.0, 10.0], [7.0, -3.0, 1.0], [1.0, 4.0, 15.0])
    >>> c0.tolist(), c1.tolist()
    ([8.0, 3.0, 0.0], [2.0, 7.0, 10.0])
    """
    p = np.asarray(parent, dtype=np.float64)
    a = np.maximum(np.asarray(c0, dtype=np.float64), 0.0)
    b = np.maximum(np.asarray(c1, dtype=np.float64), 0.0)
    p, a, b = np.broadcast_arrays(p, a, b)
    half = (a + b - p) / 2.0
    a_new = a - half
    b_new = b - half
    left_empty = a_new < 0
    right_empty = ~left_empty & (b_new < 0)
    out0 = np.where(left_empty, 0.0, np.where(right_empty, p, a_new))
    out1 = np.where(left_empty, p, np.where(right_empty, 0.0, b_new))
    return out0, out1


# A test of which cells of a level name a value: ``valid(level, prefixes) -> bool array``.
Valid = Callable[[int, np.ndarray], np.ndarray]


def settle_empty(
    parent: np.ndarray, c0: np.ndarray, c1: np.ndarray, ok0: np.ndarray, ok1: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """A consistent split where a child is known to hold nothing (a table's cell naming no
    value, public knowledge of the schema): that child gets 0 and its sibling the whole
    parent, so no mass leaves the cells that name values (post-processing).

    >>> c0, c1 = settle_empty(np.array([10.0]), np.array([6.0]), np.array([4.0]),
    ...                       np.array([True]), np.array([False]))
    >>> c0.tolist(), c1.tolist()
    ([10.0], [0.0])
    """
    p = np.asarray(parent, dtype=np.float64)
    a = np.where(ok0, np.where(ok1, c0, p), 0.0)
    b = np.where(ok1, np.where(ok0, c1, p), 0.0)
    return a, b


def _children_valid(valid: Valid | None, level: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Which children of ``n // 2`` consecutive parents name a value (all, without ``valid``)."""
    if valid is None:
        ok = np.ones(n, dtype=bool)
    else:
        ok = np.asarray(valid(level, np.arange(n, dtype=_U64)), dtype=bool)
    return ok[0::2], ok[1::2]


def _check_complete_levels(levels: Sequence[np.ndarray], owner: str) -> list[np.ndarray]:
    if len(levels) == 0:
        raise ParameterError(
            f"The 'levels' parameter of {owner} must hold at least the root level. Got [] instead."
        )
    out = []
    for level, arr in enumerate(levels):
        a = np.asarray(arr)
        if a.shape != (2**level,):
            raise ParameterError(
                f"The 'levels' parameter of {owner} must have levels[l] of shape (2**l,). "
                f"Got shape {a.shape} at level {level} instead."
            )
        if a.dtype.kind not in "iuf" or not np.all(np.isfinite(a)):
            raise ParameterError(
                f"The 'levels' parameter of {owner} must hold finite real counts. "
                f"Got non-finite or non-numeric values at level {level} instead."
            )
        out.append(a)
    return out


def consistent_levels(levels: Sequence[np.ndarray], valid: Valid | None = None) -> list[np.ndarray]:
    """Make a complete tree of noisy counts consistent, top-down with :func:`even_split`.

    Parameters
    ----------
    levels : sequence of array_like
        ``levels[l]`` holds the ``2**l`` noisy counts of level ``l``, indexed by prefix.
    valid : callable ``(level, prefixes) -> bool array``, optional
        The cells that name a value (a table's): a child that names none gets nothing and its
        sibling the whole parent (:func:`settle_empty`).

    Returns
    -------
    list of float64 ndarrays
        New arrays (the inputs are untouched): the root is ``max(root, 0)`` and every internal
        node's count equals the sum of its two children's; all counts are ``≥ 0``.

    Examples
    --------
    >>> out = consistent_levels([[5.0], [-1.0, 3.0], [1.0, 1.0, 4.0, 0.0]])
    >>> [o.tolist() for o in out]
    [[5.0], [1.0, 4.0], [0.5, 0.5, 4.0, 0.0]]
    """
    checked = _check_complete_levels(levels, "consistent_levels")
    out = [np.maximum(checked[0].astype(np.float64), 0.0)]
    for level in range(1, len(checked)):
        raw = checked[level].astype(np.float64)
        c0, c1 = even_split(out[-1], raw[0::2], raw[1::2])
        if valid is not None:
            c0, c1 = settle_empty(out[-1], c0, c1, *_children_valid(valid, level, 2**level))
        new = np.empty(2**level, dtype=np.float64)
        new[0::2] = c0
        new[1::2] = c1
        out.append(new)
    return out


# --------------------------------------------------------- integer: He's dissertation, Algorithm 3
def _as_integer(x: np.ndarray | int, name: str) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype.kind in "iu":
        return a.astype(np.int64)
    if a.dtype.kind == "f" and np.all(np.isfinite(a)) and np.all(a == np.round(a)):
        return a.astype(np.int64)
    raise ParameterError(
        f"The {name!r} parameter of integer_split must hold integer counts. Got {x!r} instead."
    )


def _round_half(num: np.ndarray, den: np.ndarray, up: np.ndarray) -> np.ndarray:
    """Nearest integer to ``num / den`` (``den > 0``); exact halves go up where ``up``."""
    q = np.asarray(num // den)  # floor division (also for object arrays of Python ints)
    twice = np.asarray(2 * (num - q * den))  # 0 <= twice < 2·den
    bump = np.asarray((twice > den) | ((twice == den) & up), dtype=bool)
    return q + bump.astype(q.dtype)


def integer_split(
    parent: np.ndarray | int,
    c0: np.ndarray | int,
    c1: np.ndarray | int,
    transform: str = "uniform",
    tie: np.ndarray | int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Replace sibling counts by a comparable non-negative integer pair summing to the parent.

    Our reading of He's dissertation, Algorithm 3 (PMM consistency). Negative children are first
    set to 0
    (PMM's noisy counts are already ``(n + λ)_+``). The clamped input ``(a, b)`` is then mapped
    to a point ``(x, parent − x)`` of the discrete segment ``ℤ₊² ∩ {x + y = parent}``:

    * ``"uniform"`` — the closest point in the Euclidean metric. The squared distance is a
      symmetric parabola in ``x`` centred at ``x* = a − Λ/2`` (``Λ = a + b − parent``), so the
      answer is ``x*`` rounded to the nearest integer and clipped to ``[0, parent]``: the
      surplus or deficit is shared evenly and a child that would go negative is set to 0 with
      the whole parent on its sibling (the integer twin of :func:`even_split`).
    * ``"proportional"`` — the point closest to the line through the origin and ``(a, b)``:
      ``x = round(parent · a / (a + b))`` (exact integer arithmetic). When ``a = b = 0`` the
      direction is undefined and the parent is split evenly.

    Both outputs are comparable with ``(a, b)`` (both coordinates move the same way, or stay),
    which is the paper's only requirement. When ``x*`` (resp. ``parent·a/(a+b)``) is exactly
    half-way between two integers the two candidates are equally close; the odd unit goes to the
    child with the larger input, and when ``a == b`` to child ``tie`` (0 or 1, per pair). The
    rule is deterministic and depends only on public post-processed values.

    Parameters
    ----------
    parent : array_like of int
        Consistent parent counts, ``≥ 0``.
    c0, c1 : array_like of int
        Noisy child counts (integer-valued; floats with integral values are accepted).
    transform : {"uniform", "proportional"}
    tie : array_like of {0, 1}
        The child that receives the odd unit in an exact tie with equal inputs.

    Returns
    -------
    (c0, c1) : tuple of int64 ndarrays
        Non-negative, ``c0 + c1 == parent`` exactly.

    Examples
    --------
    >>> x, y = integer_split([10, 10, 10, 7], [7, -3, 1, 0], [1, 4, 15, 0])
    >>> x.tolist(), y.tolist()
    ([8, 3, 0, 4], [2, 7, 10, 3])
    >>> x, y = integer_split([12, 10], [2, 1], [1, 15], transform="proportional")
    >>> x.tolist(), y.tolist()
    ([8, 1], [4, 9])
    """
    check_choice(transform, "transform", "integer_split", _TRANSFORMS)
    p = _as_integer(parent, "parent")
    if np.any(p < 0):
        raise ParameterError(
            "The 'parent' parameter of integer_split must hold counts >= 0. "
            f"Got {parent!r} instead."
        )
    a = np.maximum(_as_integer(c0, "c0"), 0)
    b = np.maximum(_as_integer(c1, "c1"), 0)
    t = np.asarray(tie)
    if t.dtype.kind not in "iub" or np.any((t != 0) & (t != 1)):
        raise ParameterError(
            f"The 'tie' parameter of integer_split must be 0 or 1 per pair. Got {tie!r} instead."
        )
    p, a, b, t = np.broadcast_arrays(p, a, b, t.astype(bool))
    # Exact halves round towards the child that should get the odd unit: x goes up when child 0
    # has the larger input, or on equal inputs when the tie goes to child 0.
    up = (a > b) | ((a == b) & ~t)
    if transform == "uniform":
        # x* = a − Λ/2 = (a − b + p) / 2
        x = _round_half(a - b + p, np.full_like(p, 2), up)
    else:
        s = a + b
        empty = s == 0
        den = np.where(empty, 2, s)
        num_a = np.where(empty, 1, a)
        big = p.size and int(p.max(initial=0)) * int(num_a.max(initial=0)) >= 2**62
        if big:  # exact Python integers when p·a could overflow int64
            x = _round_half(p.astype(object) * num_a.astype(object), den.astype(object), up).astype(
                np.int64
            )
        else:
            x = _round_half(p * num_a, den, up)
    x = np.clip(x, 0, p)
    return x.astype(np.int64), (p - x).astype(np.int64)


def consistent_levels_integer(
    levels: Sequence[np.ndarray], transform: str = "uniform"
) -> list[np.ndarray]:
    """Integer consistency of a complete tree, top-down (He's dissertation, Algorithm 3).

    The root becomes ``max(root, 0)``; then each level is replaced pair by pair with
    :func:`integer_split`. Exact ties with equal inputs give the odd unit to child
    ``popcount(θ) mod 2`` of parent ``θ`` (a fixed public rule that alternates between
    neighbouring parents, so no side of the domain is favoured throughout).

    Parameters
    ----------
    levels : sequence of array_like of int
        ``levels[l]`` holds the ``2**l`` noisy integer counts of level ``l``.
    transform : {"uniform", "proportional"}

    Returns
    -------
    list of int64 ndarrays
        Non-negative, exactly consistent counts.

    Examples
    --------
    >>> out = consistent_levels_integer([[5], [4, 4], [0, 3, 2, 2]])
    >>> [o.tolist() for o in out]
    [[5], [3, 2], [0, 3, 1, 1]]
    """
    check_choice(transform, "transform", "consistent_levels_integer", _TRANSFORMS)
    checked = _check_complete_levels(levels, "consistent_levels_integer")
    out = [np.maximum(_as_integer(checked[0], "levels"), 0)]
    for level in range(1, len(checked)):
        raw = _as_integer(checked[level], "levels")
        parents = np.arange(2 ** (level - 1), dtype=np.uint64)
        tie = _popcount_parity(parents)
        c0, c1 = integer_split(out[-1], raw[0::2], raw[1::2], transform, tie)
        new = np.empty(2**level, dtype=np.int64)
        new[0::2] = c0
        new[1::2] = c1
        out.append(new)
    return out


def combine_levels(
    levels: Sequence[np.ndarray], variances: Sequence[float]
) -> tuple[list[np.ndarray], list[float]]:
    """Bottom-up least squares: each cell's own count and its children's sum, by inverse variance.

    ``levels[j]`` holds the ``2**j`` unbiased estimates of level ``j`` (``levels[0]`` the root)
    and ``variances[j]`` their common noise variance. Returns the combined estimates and their
    variances: from the deepest level ``L`` up, ``z_L = y_L`` and

        ``z_j = (y_j · 2v_{j+1} + (z_{2θ} + z_{2θ+1}) · V_j) / (V_j + 2v_{j+1})``,
        ``v_j = V_j · 2v_{j+1} / (V_j + 2v_{j+1})``,

    the minimum-variance unbiased combination of the two independent estimates of cell ``θ``. A
    variance of 0 (the root's exact ``t``) keeps the level's own value.

    >>> est, var = combine_levels([np.array([3.0]), np.array([1.0, 1.0])], [1.0, 1.0])
    >>> est[0].tolist(), round(var[0], 4)    # (3·2 + 2·1)/3, 1·2/3
    ([2.6666666666666665], 0.6667)
    """
    depth = len(levels) - 1
    z: list[np.ndarray] = [np.empty(0)] * (depth + 1)
    v = [0.0] * (depth + 1)
    z[depth] = np.asarray(levels[depth], dtype=np.float64)
    v[depth] = float(variances[depth])
    for j in range(depth - 1, -1, -1):
        own = np.asarray(levels[j], dtype=np.float64)
        kids = z[j + 1][0::2] + z[j + 1][1::2]
        vs, vj = 2.0 * v[j + 1], float(variances[j])
        if vj == 0.0 or math.isinf(vs):
            z[j], v[j] = own, vj
        elif vs == 0.0 or math.isinf(vj):
            z[j], v[j] = kids, vs
        else:
            z[j] = (own * vs + kids * vj) / (vj + vs)
            v[j] = vj * vs / (vj + vs)
    return z, v


def _popcount_parity(x: np.ndarray) -> np.ndarray:
    v = x.astype(np.uint64, copy=True)
    for shift in (32, 16, 8, 4, 2, 1):
        v ^= v >> _U64(shift)
    return (v & _U64(1)).astype(np.int64)


# ------------------------------------------------------------------------------ the grown tree
class PartitionTree:
    """A binary partition tree stored level by level (arrays, no per-node objects).

    ``levels[l] = (prefixes, counts)``: the sorted ``uint64`` prefixes of the level-``l`` nodes
    present and their ``float64`` counts. Every node below the root has its parent in the tree
    and a node is either a leaf or has both children. Build one with :func:`grow_partition` or
    :meth:`from_complete_levels`.

    Examples
    --------
    >>> t = PartitionTree.from_complete_levels([[4.0], [1.0, 3.0]])
    >>> t.n_nodes, t.max_level
    (3, 1)
    >>> lv, px, ct = t.leaves()
    >>> lv.tolist(), px.tolist(), ct.tolist()
    ([1, 1], [0, 1], [1.0, 3.0])
    >>> t.check_consistency()
    True
    """

    __slots__ = ("_levels",)

    def __init__(self, levels: dict[int, tuple[np.ndarray, np.ndarray]]) -> None:
        if 0 not in levels:
            raise ParameterError("The 'levels' parameter of PartitionTree must contain level 0.")
        clean: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for level in sorted(levels):
            check_int(level, "level", "PartitionTree", minimum=0, maximum=64)
            prefixes, counts = levels[level]
            p = np.asarray(prefixes, dtype=_U64).copy()
            c = np.asarray(counts, dtype=np.float64).copy()
            if p.shape != c.shape or p.ndim != 1:
                raise ParameterError(
                    f"The 'levels' parameter of PartitionTree needs equal-length 1-D prefixes "
                    f"and counts. Got shapes {p.shape} and {c.shape} at level {level} instead."
                )
            if p.size > 1 and np.any(p[1:] <= p[:-1]):
                raise ParameterError(
                    f"The 'levels' parameter of PartitionTree needs strictly increasing "
                    f"prefixes. Got unsorted or repeated prefixes at level {level} instead."
                )
            if level < 64 and p.size and p[-1] >= _U64(1) << _U64(level):
                raise ParameterError(
                    f"The 'levels' parameter of PartitionTree needs prefixes < 2**level. "
                    f"Got {int(p[-1])} at level {level} instead."
                )
            p.setflags(write=False)
            c.setflags(write=False)
            clean[int(level)] = (p, c)
        top = max(clean)
        if sorted(clean) != list(range(top + 1)):
            raise ParameterError(
                "The 'levels' parameter of PartitionTree must hold levels 0..max without gaps. "
                f"Got levels {sorted(clean)} instead."
            )
        self._levels = clean

    @classmethod
    def from_complete_levels(cls, levels: Sequence[np.ndarray]) -> PartitionTree:
        """The complete tree of ``levels`` (``levels[l]`` of length ``2**l``), e.g. PMM's.

        Every node of the last level is a leaf; every other node has both children.

        Examples
        --------
        >>> PartitionTree.from_complete_levels([[1.0], [0.5, 0.5], [0.0, 0.5, 0.5, 0.0]]).n_nodes
        7
        """
        checked = _check_complete_levels(levels, "PartitionTree.from_complete_levels")
        return cls(
            {
                level: (np.arange(2**level, dtype=_U64), np.asarray(a, dtype=np.float64))
                for level, a in enumerate(checked)
            }
        )

    @classmethod
    def from_leaves(cls, levels: Any, prefixes: Any, counts: Any) -> PartitionTree:
        """The tree whose leaves are given; every internal node's count is its leaves' sum.

        Examples
        --------
        >>> t = PartitionTree.from_leaves([1, 2, 2], [0, 2, 3], [1.0, 0.5, 2.5])
        >>> t.n_nodes, [a.tolist() for a in t.leaves()]
        (5, [[1, 2, 2], [0, 2, 3], [1.0, 0.5, 2.5]])
        """
        lv = np.asarray(levels, dtype=np.int64)
        px = np.asarray(prefixes, dtype=_U64)
        ct = np.asarray(counts, dtype=np.float64)
        if not (lv.shape == px.shape == ct.shape) or lv.ndim != 1 or lv.size == 0:
            raise ParameterError(
                "The leaves of PartitionTree.from_leaves must be three equal-length, non-empty "
                f"1-D arrays. Got shapes {lv.shape}, {px.shape}, {ct.shape} instead."
            )
        top = int(lv.max())
        nodes: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        carry_p, carry_c = np.zeros(0, dtype=_U64), np.zeros(0)
        for level in range(top, -1, -1):
            here = lv == level
            p = np.concatenate([px[here], carry_p])
            c = np.concatenate([ct[here], carry_c])
            uniq, inverse = np.unique(p, return_inverse=True)
            sums = np.bincount(inverse.ravel(), weights=c, minlength=uniq.size)
            nodes[level] = (uniq, sums)
            carry_p, carry_c = uniq >> _U64(1), sums
        return cls(nodes)

    @property
    def levels(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """``level -> (prefixes uint64 sorted, counts float64)`` (read-only arrays)."""
        return dict(self._levels)

    @property
    def max_level(self) -> int:
        """The deepest level present."""
        return max(self._levels)

    @property
    def n_nodes(self) -> int:
        """Number of nodes (internal and leaves)."""
        return int(sum(p.size for p, _ in self._levels.values()))

    def _expanded(self, level: int) -> np.ndarray:
        """Boolean mask: which level-``level`` nodes have children in the tree."""
        prefixes, _ = self._levels[level]
        if level + 1 not in self._levels:
            return np.zeros(prefixes.size, dtype=bool)
        parents = np.sort(self._levels[level + 1][0] >> _U64(1))
        if parents.size == 0:
            return np.zeros(prefixes.size, dtype=bool)
        # np.isin's membership by a binary search (np.isin imports numpy.ma: 10 ms a process)
        at = np.minimum(np.searchsorted(parents, prefixes), parents.size - 1)
        return parents[at] == prefixes

    def leaves(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The leaves as ``(levels int64, prefixes uint64, counts float64)``, by level then prefix.

        Examples
        --------
        >>> t = grow_partition([np.array([4.0]), np.array([1.0, 3.0])],
        ...                    lambda l, p: np.ones(p.size), k=1, depth=3)
        >>> [a.tolist() for a in t.leaves()]
        [[2, 2, 2, 3, 3], [0, 1, 3, 4, 5], [0.5, 0.5, 1.5, 0.75, 0.75]]
        """
        lv, px, ct = [], [], []
        for level in sorted(self._levels):
            prefixes, counts = self._levels[level]
            leaf = ~self._expanded(level)
            lv.append(np.full(int(leaf.sum()), level, dtype=np.int64))
            px.append(prefixes[leaf])
            ct.append(counts[leaf])
        return np.concatenate(lv), np.concatenate(px).astype(_U64), np.concatenate(ct)

    def max_violation(self) -> float:
        """Largest ``|count(θ) − count(θ0) − count(θ1)|`` over internal nodes (0.0 if none).

        Examples
        --------
        >>> PartitionTree.from_complete_levels([[2.0], [1.0, 1.5]]).max_violation()
        0.5
        """
        worst = 0.0
        for _, gaps in self._gaps():
            if gaps.size:
                worst = max(worst, float(np.max(gaps)))
        return worst

    def _gaps(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Per level above the deepest: its expanded nodes' counts and their
        ``|count(θ) − count(θ0) − count(θ1)|``."""
        for level in sorted(self._levels)[:-1]:
            prefixes, counts = self._levels[level]
            child_p, child_c = self._levels[level + 1]
            idx = np.searchsorted(prefixes, child_p >> _U64(1))
            sums = np.bincount(idx, weights=child_c, minlength=prefixes.size)
            expanded = self._expanded(level)
            yield counts[expanded], np.abs(sums - counts)[expanded]

    def check_consistency(self, atol: float = 1e-6) -> bool:
        """True when the tree is a consistent, well-formed partition tree.

        Checks: all counts ``≥ 0`` and finite; every non-root node's parent is present; every
        expanded node has both children; every internal count equals its children's sum within
        ``atol`` (relative to ``max(1, count)``).

        Examples
        --------
        >>> PartitionTree.from_complete_levels([[2.0], [1.0, 1.5]]).check_consistency()
        False
        """
        for level in sorted(self._levels):
            prefixes, counts = self._levels[level]
            if not np.all(np.isfinite(counts)) or np.any(counts < 0):
                return False
            if level == 0:
                if prefixes.tolist() != [0]:
                    return False
                continue
            parents = self._levels[level - 1][0]
            if not np.all(np.isin(prefixes >> _U64(1), parents)):
                return False
            # Both children of every expanded parent: siblings come in adjacent pairs.
            if prefixes.size % 2 or np.any(prefixes[0::2] & _U64(1)):
                return False
            if np.any(prefixes[1::2] != prefixes[0::2] + _U64(1)):
                return False
        for counts, gaps in self._gaps():
            if np.any(gaps > atol * np.maximum(1.0, counts)):
                return False
        return True

    def __repr__(self) -> str:
        return f"PartitionTree(n_nodes={self.n_nodes}, max_level={self.max_level})"


def check_consistency(tree: PartitionTree, atol: float = 1e-6) -> bool:
    """Module-level alias of :meth:`PartitionTree.check_consistency`.

    Examples
    --------
    >>> check_consistency(PartitionTree.from_complete_levels([[2.0], [1.0, 1.0]]))
    True
    >>> check_consistency(PartitionTree.from_complete_levels([[2.0], [1.0, 2.0]]))
    False
    """
    return tree.check_consistency(atol)


def _top_k(prefixes: np.ndarray, counts: np.ndarray, k: int) -> np.ndarray:
    """Indices (sorted) of the ``k`` largest counts; ties at the cut go to the smaller prefix.

    ``prefixes`` is sorted, so among equal counts the smaller index is the smaller prefix.
    O(n) with :func:`numpy.partition`.
    """
    n = counts.size
    if n <= k:
        return np.arange(n)
    threshold = np.partition(counts, n - k)[n - k]  # the k-th largest value
    above = np.flatnonzero(counts > threshold)
    at = np.flatnonzero(counts == threshold)[: k - above.size]
    return np.sort(np.concatenate([above, at]))


def grow_partition(
    top_levels: Sequence[np.ndarray],
    query: Callable[[int, np.ndarray], np.ndarray],
    k: int,
    depth: int,
    *,
    prune_top: bool = False,
    valid: Valid | None = None,
) -> PartitionTree:
    """Grow the tree below a consistent complete top through the ``k`` hottest cells per level.

    Our reading of Holland et al., Algorithm 3 (its loop bounds disagree with its text): the
    complete levels ``0…L`` are given (already consistent, e.g. by :func:`consistent_levels`);
    ``V`` starts as all ``2**L`` cells of level ``L`` (with ``prune_top=True``: the ``k``
    largest of them, for a complete top deeper than ``floor(log2 k)``). For
    ``l = L+1 … depth``: the children ``2θ, 2θ+1`` of every ``θ ∈ V`` get the raw counts
    ``query(l, child_prefixes)`` and are made consistent with ``θ`` by :func:`even_split`;
    then ``V`` becomes the ``k`` level-``l`` nodes with the largest consistent counts (ties at
    the cut go to the smaller prefix). Nodes never expanded are leaves. Cost ``O(k · depth)``
    array work plus the queries (top-``k`` selection is linear with :func:`numpy.partition`).

    Parameters
    ----------
    top_levels : sequence of array_like
        Consistent complete levels ``0…L``; ``levels[l]`` has length ``2**l``. ``L ≤ depth``.
    query : callable ``(level, prefixes uint64) -> float counts``
        Noisy counts of level-``level`` cells (PrivHP passes its level sketch's query).
    k : int
        Cells expanded per level (``≥ 1``).
    depth : int
        Deepest level of the tree (``r``).
    valid : callable ``(level, prefixes) -> bool array``, optional
        As for :func:`consistent_levels`.

    Returns
    -------
    PartitionTree

    Examples
    --------
    >>> sketch = {2: [0.0, 3.0, 5.0, 2.0]}
    >>> t = grow_partition([[8.0], [3.0, 5.0]], lambda l, p: np.take(sketch[l], p), 1, 2)
    >>> {l: c.tolist() for l, (p, c) in t.levels.items()}
    {0: [8.0], 1: [3.0, 5.0], 2: [0.0, 3.0, 4.0, 1.0]}
    """
    k = check_int(k, "k", "grow_partition", minimum=1)
    top = _check_complete_levels(top_levels, "grow_partition")
    L = len(top) - 1
    depth = check_int(depth, "depth", "grow_partition", minimum=L, maximum=64)
    levels: dict[int, tuple[np.ndarray, np.ndarray]] = {
        level: (np.arange(2**level, dtype=_U64), np.asarray(a, dtype=np.float64))
        for level, a in enumerate(top)
    }
    v_prefixes, v_counts = levels[L]
    if prune_top:
        keep = _top_k(v_prefixes, v_counts, k)
        v_prefixes, v_counts = v_prefixes[keep], v_counts[keep]
    for level in range(L + 1, depth + 1):
        children = np.empty(2 * v_prefixes.size, dtype=_U64)
        children[0::2] = v_prefixes << _U64(1)
        children[1::2] = children[0::2] | _U64(1)
        raw = np.asarray(query(level, children), dtype=np.float64)
        if raw.shape != children.shape or not np.all(np.isfinite(raw)):
            raise ParameterError(
                f"The 'query' parameter of grow_partition must return {children.size} finite "
                f"counts for level {level}. Got shape {raw.shape} instead."
            )
        c0, c1 = even_split(v_counts, raw[0::2], raw[1::2])
        if valid is not None:
            ok = np.asarray(valid(level, children), dtype=bool)
            c0, c1 = settle_empty(v_counts, c0, c1, ok[0::2], ok[1::2])
        counts = np.empty(children.size, dtype=np.float64)
        counts[0::2] = c0
        counts[1::2] = c1
        levels[level] = (children, counts)
        keep = _top_k(children, counts, k)
        v_prefixes, v_counts = children[keep], counts[keep]
    return PartitionTree(levels)
