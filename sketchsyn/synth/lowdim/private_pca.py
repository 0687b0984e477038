"""Private centred covariance and private mean on a public grid (He's dissertation §4.2, Algorithms
6–7).

Records live in the unit box ``[0, 1]^d`` (a ``Box`` is normalised first). Each coordinate is
quantised to a multiple of ``1/QUANT`` (a fixed per-record map, so it costs no privacy), which
makes the sums ``S1 = Σ x`` and ``S2 = Σ x xᵀ`` exact integers: one float64 matrix product per
chunk of at most ``CHUNK_ROWS`` rows is exact (every partial sum is an integer below 2**53), then
the chunk's result is added to int64 accumulators.

Noise (replace-one neighbours, ``n`` public, as in the chapter):

* covariance ``M = (n·S2 − S1 S1ᵀ)/(n(n−1))`` (the centred covariance (4.1)) is rounded to the
  grid ``g = 2**-k`` and gets ``Lap_Z(σ/g)`` on each entry ``i < j`` (mirrored) and
  ``Lap_Z(2σ/g)`` on the diagonal. The chapter's proof gives ``Σ_ij |M_ij − M'_ij| ≤ 6d²/n``;
  rounding moves each entry by at most one more grid unit, which adds ``g·d²/(2σ)`` to the
  privacy loss, so ``σ = (3d²/n + g·d²/2)/ε`` (the chapter's ``3d²/(εn)`` plus the rounding term);
* mean ``X̄`` is rounded to the grid ``h = 2**-k'`` and gets ``Lap_Z(μ/h)`` per coordinate with
  ``μ = (d/n + d·h)/ε`` (the chapter's ``d/(εn)`` plus one grid unit per coordinate).

The grids are public (functions of d, n, ε): the step is at most ``2**-20`` times the
per-entry sensitivity (``6/n`` for the covariance, ``1/n`` for the mean), so the rounding term
adds at most a fraction ``2**-20`` to the scale, unless that would put the noise above ``2**27``
grid units (tiny ε), where the step is coarsened to keep the integer sampler in range (the
rounding term is then still below a fraction ``d²·2**-27/ε`` of ``σ``).

>>> import numpy as np
>>> U = quantize(np.random.default_rng(0).random((1000, 3)))
>>> s1, s2 = moment_sums(U)
>>> M = covariance_exact(s1, s2, 1000)
>>> bool(np.allclose(M, np.cov(U.T / QUANT)))
True
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ...privacy.noise import discrete_laplace, discrete_laplace_variance
from ...privacy.rng import RandomSource

__all__ = [
    "CHUNK_ROWS",
    "QUANT",
    "GridNoise",
    "choose_target_dim",
    "covariance_exact",
    "covariance_noise",
    "mean_noise",
    "moment_sums",
    "private_covariance",
    "private_mean",
    "projection_box",
    "quantize",
]

#: Coordinates in the unit box are quantised to multiples of ``1/QUANT``.
QUANT = 65535
#: Rows per exact float64 matrix product: ``QUANT**2 · CHUNK_ROWS < 2**53``.
CHUNK_ROWS = 1 << 20
#: Noise scale in grid units is at least ``2**_GRID_BITS``.
_GRID_BITS = 20


def quantize(U: np.ndarray) -> np.ndarray:
    """Unit-box points (already in ``[0, 1]``) → float64 integers ``round(x·QUANT)``."""
    Q = U * QUANT
    return np.rint(Q, out=Q)


def moment_sums(Q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact int64 ``(Σ q, Σ q qᵀ)`` of quantised rows ``Q`` (units ``1/QUANT``, ``1/QUANT²``)."""
    d = Q.shape[1]
    s1 = np.zeros(d, dtype=np.int64)
    s2 = np.zeros((d, d), dtype=np.int64)
    for start in range(0, Q.shape[0], CHUNK_ROWS):
        chunk = Q[start : start + CHUNK_ROWS]
        s1 += chunk.sum(axis=0).astype(np.int64)
        s2 += (chunk.T @ chunk).astype(np.int64)
    return s1, s2


def covariance_exact(s1: np.ndarray, s2: np.ndarray, n: int) -> np.ndarray:
    """The centred covariance (4.1) of the quantised records, as float64 (for inspection)."""
    num = _covariance_numerators(s1, s2, n)
    den = n * (n - 1) * QUANT * QUANT
    return np.array([[float(Fraction(v, den)) for v in row] for row in num])


def _covariance_numerators(s1: np.ndarray, s2: np.ndarray, n: int) -> list[list[int]]:
    a = [int(v) for v in s1]
    return [[n * int(s2[i, j]) - a[i] * a[j] for j in range(len(a))] for i in range(len(a))]


def _round_div(a: int, b: int) -> int:
    """``round(a/b)`` (halves up) for integers, ``b > 0``."""
    return (2 * a + b) // (2 * b)


def _grid_exponent(unit: Fraction, scale0: Fraction) -> int:
    """Smallest ``k`` with ``2**-k ≤ max(unit·2**-20, scale0·2**-27)``.

    ``unit`` is the statistic's per-entry sensitivity, so rounding adds at most a fraction
    ``2**-20`` of it; the second term keeps the noise scale below ``2**28`` grid units (the
    sampler takes scales up to ``2**30``) when ``ε`` is tiny.
    """
    target = max(unit / 2**_GRID_BITS, scale0 / 2**27)
    k = math.ceil(-math.log2(target))
    while _pow2(-k) > target:
        k += 1
    while _pow2(-(k - 1)) <= target:
        k -= 1
    return k


def _pow2(e: int) -> Fraction:
    return Fraction(2**e) if e >= 0 else Fraction(1, 2 ** (-e))


class GridNoise:
    """Public description of one integer-Laplace release on the grid ``2**-k``.

    Attributes
    ----------
    k : int
        Grid exponent: values are released as integer multiples of ``2**-k``.
    scale : Fraction
        Laplace scale in the statistic's units (``σ`` or ``μ`` of the module docstring); the
        integer noise has scale ``scale·2**k`` grid units (twice that on a covariance diagonal).
    """

    def __init__(self, k: int, scale: Fraction) -> None:
        self.k = int(k)
        self.scale = scale

    @property
    def step(self) -> float:
        """Grid step ``2**-k``."""
        return float(_pow2(-self.k))

    @property
    def grid_scale(self) -> Fraction:
        """Laplace scale in grid units."""
        return self.scale * _pow2(self.k)

    def variance(self, factor: int = 1) -> float:
        """Variance (statistic's units²) of the noise ``step·Lap_Z(factor·grid_scale)``."""
        return discrete_laplace_variance(float(factor * self.grid_scale)) * self.step**2


def covariance_noise(d: int, n: int, epsilon: float) -> GridNoise:
    """Grid and scale ``σ = (3d²/n + g·d²/2)/ε`` of Algorithm 6 on a grid (replace-one, n public).

    >>> noise = covariance_noise(20, 10**5, 1 / 3)
    >>> round(float(noise.scale), 6), noise.grid_scale < 2**28
    (0.036, True)
    """
    eps = Fraction(epsilon)
    sigma0 = Fraction(3 * d * d, n) / eps
    k = _grid_exponent(Fraction(6, n), sigma0)
    return GridNoise(k, sigma0 + _pow2(-k) * Fraction(d * d, 2) / eps)


def mean_noise(d: int, n: int, epsilon: float) -> GridNoise:
    """Grid and scale ``μ = (d/n + d·h)/ε`` of Algorithm 7's private mean (replace-one, n public).

    >>> round(float(mean_noise(20, 10**5, 1 / 3).scale), 7)
    0.0006
    """
    eps = Fraction(epsilon)
    mu0 = Fraction(d, n) / eps
    k = _grid_exponent(Fraction(1, n), mu0)
    return GridNoise(k, mu0 + _pow2(-k) * d / eps)


def private_covariance(
    s1: np.ndarray, s2: np.ndarray, n: int, noise: GridNoise, rng: RandomSource
) -> np.ndarray:
    """Integer grid values (int64, symmetric) of ``M`` rounded to ``2**-noise.k`` plus noise.

    Off-diagonal ``Lap_Z(σ/g)`` once per pair ``i < j``, diagonal ``Lap_Z(2σ/g)``; the released
    matrix is ``result · 2**-k``.
    """
    d = s1.size
    num = _covariance_numerators(s1, s2, n)
    den = n * (n - 1) * QUANT * QUANT
    if noise.k >= 0:
        grid = [[_round_div(v * 2**noise.k, den) for v in row] for row in num]
    else:
        grid = [[_round_div(v, den * 2 ** (-noise.k)) for v in row] for row in num]
    iu = np.triu_indices(d, 1)
    off = discrete_laplace(noise.grid_scale, iu[0].size, rng=rng)
    diag = discrete_laplace(2 * noise.grid_scale, d, rng=rng)
    out = np.array(grid, dtype=np.int64)
    out[iu] += off
    out[(iu[1], iu[0])] = out[iu]
    out[np.diag_indices(d)] += diag
    return out


def private_mean(s1: np.ndarray, n: int, noise: GridNoise, rng: RandomSource) -> np.ndarray:
    """Integer grid values (int64) of ``X̄`` rounded to ``2**-noise.k`` plus ``Lap_Z(μ/h)``."""
    den = n * QUANT
    if noise.k >= 0:
        grid = [_round_div(int(v) * 2**noise.k, den) for v in s1]
    else:
        grid = [_round_div(int(v), den * 2 ** (-noise.k)) for v in s1]
    return np.array(grid, dtype=np.int64) + discrete_laplace(noise.grid_scale, s1.size, rng=rng)


def choose_target_dim(
    spectrum: np.ndarray, epsilon: float, n: int, smallest: int, largest: int
) -> int:
    """The chapter's private choice of d' (§4.5) from the noisy eigenvalues (decreasing).

    ``argmin_k sqrt(max(Σ_{i>k} σ_i, 0)) + sqrt(d/k)·(εn)^(−1/k)`` over ``smallest ≤ k ≤
    largest``; post-processing of the private covariance, so it costs no budget.

    >>> choose_target_dim(np.array([2.0, 1.5, 0.001, 0.0, -0.001]), 1.0, 10**6, 1, 5)
    2
    """
    d = spectrum.size
    best, best_k = math.inf, smallest
    for k in range(smallest, largest + 1):
        tail = max(float(spectrum[k:].sum()), 0.0)
        value = math.sqrt(tail) + math.sqrt(d / k) * (epsilon * n) ** (-1.0 / k)
        if value < best:
            best, best_k = value, k
    return best_k


def projection_box(components: np.ndarray, mean: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact bounds of ``(x − mean)·V`` over ``x ∈ [0, 1]^d``: the public box of the projected data.

    Coordinate j ranges over ``Σ_k min(V_kj·(0 − m_k), V_kj·(1 − m_k))`` to the same with max,
    a box inside the chapter's ``[−R, R]^{d'}`` (``R = sqrt(d) + ‖mean‖``) and usually much
    smaller.

    >>> lo, hi = projection_box(np.eye(2)[:, :1], np.array([0.5, 0.5]))
    >>> lo.tolist(), hi.tolist()
    ([-0.5], [0.5])
    """
    at0 = -mean[:, None] * components
    at1 = (1.0 - mean)[:, None] * components
    lower = np.minimum(at0, at1).sum(axis=0)
    upper = np.maximum(at0, at1).sum(axis=0)
    return lower, upper
