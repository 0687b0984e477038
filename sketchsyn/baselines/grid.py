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

from fractions import Fraction
from typing import Any

import numpy as np

from ..attributes import ReadOnly
from ..errors import ParameterError, check_domain, check_epsilon, check_int
from ..io.serial import MetaReader
from ..privacy.accounting import fit_to_budget, laplace_scale
from ..privacy.noise import discrete_laplace, discrete_laplace_variance
from ..privacy.rng import RNGLike
from ..synth.distribution import PrivateDistribution
from ..synth.offline.histogram import LevelCounts

__all__ = ["AdaptiveGrid", "GridHistogram", "PrivTree"]


def _level_for_memory(memory_bytes: int, owner: str) -> int:
    """The finest Morton level whose int64 counters (plus 64 bytes) fit in ``memory_bytes``."""
    mem = check_int(memory_bytes, "memory_bytes", owner, minimum=8 * 2 + 64)
    return int(np.floor(np.log2((mem - 64) / 8)))


def _one_level(level, memory_bytes, owner: str) -> int:
    if (level is None) == (memory_bytes is None):
        raise ParameterError(f"{owner} needs exactly one of 'level', 'memory_bytes'.")
    return int(level) if level is not None else _level_for_memory(memory_bytes, owner)


def _distribution(obj: Any, levels, prefixes, counts, mechanism: str) -> PrivateDistribution:
    """Clamp at zero, drop empty leaves (all-zero: the root, sampled uniformly)."""
    counts = np.maximum(np.asarray(counts, dtype=np.float64), 0.0)
    keep = np.flatnonzero(counts)
    levels, prefixes = np.asarray(levels, dtype=np.int64), np.asarray(prefixes, dtype=np.uint64)
    if keep.size == 0:
        levels, prefixes, counts = np.array([0]), np.array([0], dtype=np.uint64), np.ones(1)
    else:
        levels, prefixes, counts = levels[keep], prefixes[keep], counts[keep]
    return obj._distribution(levels, prefixes, counts, mechanism)


class GridHistogram(LevelCounts):
    """Flat DP histogram on a grid (Laplace per cell, clamped, renormalised).

    Saved state: **trusted**: exact counts until ``release()`` (see :class:`LevelCounts`).

    Give exactly one of ``level`` (Morton level), ``cells_per_axis`` (a power of two, Box only)
    or ``memory_bytes`` (finest level whose state fits).
    """

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
            level = min(_level_for_memory(memory_bytes, "GridHistogram"), limit)
            level_name = "memory_bytes"
        super().__init__(domain, level, rng, "GridHistogram", level_name=level_name)

    _PARAMS = ("epsilon",)
    epsilon = ReadOnly[float]("Privacy budget ε of the release.")
    level = ReadOnly[int]("Morton level of the grid's cells (``2**level`` cells).")

    def _release_now(self) -> tuple[PrivateDistribution, dict[str, np.ndarray]]:
        """Add the noise once, clamp at zero, return the private distribution."""
        noisy = self._counts + discrete_laplace(self._scale, self._counts.size, rng=self._source)
        counts = np.maximum(noisy, 0).astype(np.float64)
        cells = np.flatnonzero(counts)
        if cells.size == 0:  # nothing survived the noise: all-zero grid, sampled uniformly
            cells = np.arange(counts.size)
        levels = np.full(cells.size, self._level)
        dist = self._distribution(levels, cells.astype(np.uint64), counts[cells], "GridHistogram")
        return dist, {}


class AdaptiveGrid(LevelCounts):
    """AG, the adaptive grid of Qardaji, Yang and Li (ICDE 2013), pure ε-DP.

    A coarse grid of ``m1`` cells per axis gets ``Lap_Z(1/(α·ε))`` per cell; each cell with
    noisy count ``N'`` is then cut into ``m2 = ceil(sqrt(N'·(1 − α)·ε / c2))`` cells per axis
    (``c2 = c/2``), each with ``Lap_Z(1/((1 − α)·ε))``; the cell's two estimates are combined
    by their inverse variances and the difference spread evenly over its sub-cells (the
    paper's weighted-average consistency); negative counts are clamped at 0. The paper's
    ``m1 = max(10, ceil(sqrt(N·ε/c)/4))`` uses the public ``expected_n`` for ``N``. Cells here
    are Morton cells, so ``m1`` and ``m2`` are rounded to the nearest power of two (in log
    scale), and no grid is finer than the state's ``level``.

    Privacy: pure ε-DP, add/remove one item. Each level is a partition of the domain, so one
    item changes one count per level by 1: ``Lap_Z(1/(α·ε))`` makes the first level
    ``α·ε``-DP and ``Lap_Z(1/((1 − α)·ε))`` the second ``(1 − α)·ε``-DP (the second partition
    depends on the first level's noisy counts only: adaptive sequential composition); the rest
    is post-processing. The exact counts are kept until ``release()`` (a trusted curator's
    state, as for every offline baseline here; see
    :class:`~sketchsyn.synth.offline.histogram.LevelCounts`).

    Saved state: **trusted**: exact counts until ``release()`` (see :class:`LevelCounts`).

    Parameters
    ----------
    domain, epsilon
        As for :class:`GridHistogram`.
    expected_n : int
        Public guess of the data size, used only for ``m1``.
    level, memory_bytes
        Exactly one: the finest Morton level the state counts (``8·2**level`` bytes), or the
        finest that fits in ``memory_bytes``.
    alpha : float, default 0.5
        Share of ε spent on the first grid (the paper's α = 0.5).
    c : float, default 10
        The paper's constant (``c2 = c/2``).

    Examples
    --------
    >>> from sketchsyn import Box
    >>> ag = AdaptiveGrid(Box.unit(2), 1.0, expected_n=2**16, memory_bytes=40_000, rng=0)
    >>> ag.level, ag.level1, ag.noise_scales
    (12, 8, (2.0, 2.0))
    """

    def __init__(
        self,
        domain: Any,
        epsilon: float,
        expected_n: int,
        level: int | None = None,
        memory_bytes: int | None = None,
        alpha: float = 0.5,
        c: float = 10.0,
        rng: RNGLike = None,
    ) -> None:
        owner = "AdaptiveGrid"
        self._epsilon = check_epsilon(epsilon, owner)
        self._expected_n = check_int(expected_n, "expected_n", owner, minimum=1)
        if not (isinstance(alpha, (int, float)) and 0.0 < float(alpha) < 1.0):
            raise ParameterError(
                f"The 'alpha' parameter of {owner} must be in (0, 1). Got {alpha!r} instead."
            )
        if not (isinstance(c, (int, float)) and np.isfinite(c) and float(c) > 0):
            raise ParameterError(f"The 'c' parameter of {owner} must be > 0. Got {c!r} instead.")
        self._alpha, self._c = float(alpha), float(c)
        super().__init__(domain, _one_level(level, memory_bytes, owner), rng, owner)
        d = int(domain.d)
        m1 = max(10.0, np.ceil(np.sqrt(self._expected_n * self._epsilon / self._c) / 4.0))
        b1 = int(np.clip(np.round(np.log2(m1)), 1, self._level // d))
        self._level1 = d * b1

    _PARAMS = ("epsilon", "expected_n", "alpha", "c")
    epsilon = ReadOnly[float]("Privacy budget ε of the release (both levels together).")
    level = ReadOnly[int]("Morton level of the finest cells.")
    level1 = ReadOnly[int]("Morton level of the first grid (``d·log2 m1``).")

    @property
    def noise_scales(self) -> tuple[float, float]:
        """``(1/(α·ε), 1/((1 − α)·ε))``: the integer Laplace scales of the two levels."""
        parts = fit_to_budget(
            [self._alpha * self._epsilon, (1 - self._alpha) * self._epsilon], self._epsilon
        )
        return (
            laplace_scale(1, float(parts[0]), "AdaptiveGrid"),
            laplace_scale(1, float(parts[1]), "AdaptiveGrid"),
        )

    @classmethod
    def _from_params(cls, fields: MetaReader, rng: RNGLike) -> AdaptiveGrid:
        return cls(
            fields.domain(),
            fields.epsilon("epsilon"),
            fields.int("expected_n", minimum=1, maximum=2**62),
            level=fields.int("depth", minimum=1),
            alpha=fields.float("alpha", minimum=1e-9, maximum=1 - 1e-9),
            c=fields.float("c", minimum=1e-12, maximum=1e12),
            rng=rng,
        )

    def _release_now(self) -> tuple[PrivateDistribution, dict[str, np.ndarray]]:
        """Draw both levels' noise once, make them consistent, return the distribution."""
        d, l1 = int(self._domain.d), self._level1
        exact = self._complete_levels()
        s1, s2 = self.noise_scales
        v1 = exact[l1] + discrete_laplace(s1, exact[l1].size, rng=self._source)
        m2 = np.ceil(
            np.sqrt(np.maximum(v1, 0) * (1.0 - self._alpha) * self._epsilon / (self._c / 2))
        )
        b2 = np.clip(np.round(np.log2(np.maximum(m2, 1.0))), 0, (self._level - l1) // d)
        b2 = b2.astype(np.int64)
        var1, var_cell = discrete_laplace_variance(s1), discrete_laplace_variance(s2)
        out_lv, out_px, out_ct = [], [], []
        for b in np.unique(b2):
            cells = np.flatnonzero(b2 == b).astype(np.uint64)
            sub = 2 ** int(d * b)
            lv = l1 + int(d * b)
            px = (cells[:, None] << np.uint64(d * b)) + np.arange(sub, dtype=np.uint64)[None, :]
            u = exact[lv][px.astype(np.intp)]
            u = u + discrete_laplace(s2, u.shape, rng=self._source)
            total = u.sum(axis=1).astype(np.float64)
            var2 = sub * var_cell
            best = (var2 * v1[cells.astype(np.intp)] + var1 * total) / (var1 + var2)
            counts = u + ((best - total) / sub)[:, None]
            out_lv.append(np.full(px.size, lv))
            out_px.append(px.ravel())
            out_ct.append(counts.ravel())
        dist = _distribution(
            self,
            np.concatenate(out_lv),
            np.concatenate(out_px),
            np.concatenate(out_ct),
            "AdaptiveGrid",
        )
        return dist, {}


class PrivTree(LevelCounts):
    """PrivTree (Zhang, Xiao and Xie, SIGMOD 2016): a quadtree with private split decisions.

    Each visited node ``v`` at tree depth ``t`` (its cell is split into ``β = 2^d`` children,
    ``d`` Morton levels) has the biased count ``b(v) = max(c(v) − t·δ, θ − δ)``; it is split
    when ``b(v) + Lap_Z(λ) > θ``. With ``ε_tree = tree_fraction·ε`` the paper's scales are
    ``λ = (2β − 1)/((β − 1)·ε_tree)``, ``δ = λ·ln β``, ``θ = 0``. No depth parameter: splitting
    stops by itself, or at the state's ``level`` (a public bound: a cell of that level is a
    leaf whatever its count). The leaves, a partition of the domain, get
    ``Lap_Z(1/((1 − tree_fraction)·ε))`` each (the paper spends half of ε on each part),
    clamped at 0.

    Privacy: pure ε-DP, add/remove one item. The paper's proof of ``ε_tree`` for the tree
    (Theorem 3.1) uses the noise only through the log-ratio
    ``ρ(x) = ln(P[x + Z > θ] / P[x − 1 + Z > θ])``, bounded by ``1/λ`` for ``x < θ + 1`` and
    by ``(1/λ)·e^{(θ + 1 − x)/λ}`` otherwise (and the same for the no-split side, by the
    symmetry of ``Z``). For the integer ``Z ~ Lap_Z(λ)`` (``P(z) ∝ p^{|z|}``, ``p = e^{−1/λ}``)
    the same bounds hold for every real ``x``: with ``m = floor(θ − x) + 1``,
    ``e^{ρ(x)} = 1 + P[Z = m]/P[Z > m]``, which is ``1/p = e^{1/λ}`` for ``m ≥ 0`` and, for
    ``m < 0``, at most ``1 + (1 − p)·p^{|m|} ≤ 1 + (1/λ)·e^{−|m|/λ}`` since
    ``P[Z > m] ≥ P[Z ≥ 0] = 1/(1 + p)``; ``|m| ≥ x − θ − 1`` and ``ln(1 + y) ≤ y`` give the
    bound. The leaf counts are a partition with sensitivity 1, so ``Lap_Z`` at scale
    ``1/ε_leaf`` is ``ε_leaf``-DP; the total is ``ε_tree + ε_leaf = ε``. The exact counts are
    kept until ``release()`` (a trusted curator's state).

    >>> from sketchsyn import Box
    >>> pt = PrivTree(Box.unit(2), 1.0, memory_bytes=40_000, rng=0)
    >>> pt.level, pt.beta, round(pt.lam, 6), round(pt.delta, 6), pt.leaf_scale
    (12, 4, 4.666667, 6.469374, 2.0)

    Saved state: **trusted**: exact counts until ``release()`` (see :class:`LevelCounts`).
    """

    def __init__(
        self,
        domain: Any,
        epsilon: float,
        level: int | None = None,
        memory_bytes: int | None = None,
        tree_fraction: float = 0.5,
        rng: RNGLike = None,
    ) -> None:
        owner = "PrivTree"
        self._epsilon = check_epsilon(epsilon, owner)
        if not (isinstance(tree_fraction, (int, float)) and 0.0 < float(tree_fraction) < 1.0):
            raise ParameterError(
                f"The 'tree_fraction' parameter of {owner} must be in (0, 1). "
                f"Got {tree_fraction!r} instead."
            )
        self._tree_fraction = float(tree_fraction)
        super().__init__(domain, _one_level(level, memory_bytes, owner), rng, owner)
        d = int(domain.d)
        self._beta = 2**d
        eps_tree = self._tree_fraction * self._epsilon
        self._lam = laplace_scale(
            Fraction(2 * self._beta - 1, self._beta - 1), eps_tree, "PrivTree"
        )
        self._delta = self._lam * float(np.log(self._beta))

    _PARAMS = ("epsilon", "tree_fraction")
    epsilon = ReadOnly[float]("Privacy budget ε of the release (splits and leaf counts together).")
    level = ReadOnly[int]("Deepest Morton level a split may reach.")
    beta = ReadOnly[int]("Fan-out ``β = 2^d``.")
    lam = ReadOnly[float]("``λ``, the integer Laplace scale of the split decisions.")
    delta = ReadOnly[float]("``δ = λ·ln β``, the decay of the biased count per tree level.")

    @property
    def leaf_scale(self) -> float:
        """Integer Laplace scale of the leaf counts, ``1/((1 − tree_fraction)·ε)``."""
        return laplace_scale(1, (1.0 - self._tree_fraction) * self._epsilon, "PrivTree")

    @classmethod
    def _from_params(cls, fields: MetaReader, rng: RNGLike) -> PrivTree:
        return cls(
            fields.domain(),
            fields.epsilon("epsilon"),
            level=fields.int("depth", minimum=1),
            tree_fraction=fields.float("tree_fraction", minimum=1e-9, maximum=1 - 1e-9),
            rng=rng,
        )

    def _release_now(self) -> tuple[PrivateDistribution, dict[str, np.ndarray]]:
        """Grow the tree with noisy split decisions, add the leaf noise, return the release."""
        d, theta = int(self._domain.d), 0.0
        exact = self._complete_levels()
        prefixes, t = np.zeros(1, dtype=np.uint64), 0
        out_lv, out_px, out_ct = [], [], []
        while prefixes.size:
            lv = d * t
            c = exact[lv][prefixes.astype(np.intp)].astype(np.float64)
            b = np.maximum(c - t * self._delta, theta - self._delta)
            noisy = b + discrete_laplace(self._lam, prefixes.size, rng=self._source)
            split = noisy > theta
            if lv + d > self._level:
                split[:] = False
            out_lv.append(np.full(int((~split).sum()), lv))
            out_px.append(prefixes[~split])
            out_ct.append(c[~split])
            kids = prefixes[split]
            prefixes = (
                (kids[:, None] << np.uint64(d)) + np.arange(self._beta, dtype=np.uint64)
            ).ravel()
            t += 1
        lv = np.concatenate(out_lv)
        px = np.concatenate(out_px)
        exact_leaves = np.concatenate(out_ct)
        noise = discrete_laplace(self.leaf_scale, exact_leaves.size, rng=self._source)
        counts = exact_leaves + noise
        dist = _distribution(self, lv, px, counts, "PrivTree")
        return dist, {}
