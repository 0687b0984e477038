"""Exact integer noise: the discrete Laplace and the discrete Gaussian, vectorised.

Both samplers follow Canonne, Kamath and Steinke, *The Discrete Gaussian for Differential Privacy*
(NeurIPS 2020): Bernoulli(exp(−γ)) for rational γ by integer comparisons only, the discrete
Laplace by geometric rejection (their Algorithm 2) and the discrete Gaussian by rejection from a
discrete Laplace (their Algorithm 3). No floating-point step decides an output value: every
decision is a comparison of uniform integers with integers derived from the exact rational
parameter. All pending draws are processed together as numpy arrays; Python loops run only over
rejection rounds.

A float parameter is taken as its exact rational value (``Fraction(0.1)`` is
``3602879701896397/36028797018963968``). When that rational has a denominator above ``2**20``
(most binary floats do), it is first rounded **up** to the nearest multiple of ``2**-20``: the
noise gets very slightly wider (at most ``2**-20`` in absolute terms), which can only strengthen
privacy, and every integer in the computation then provably fits in 64 bits.

Randomness: ``rng=None`` (default) uses the operating system's CSPRNG. A seed or a numpy
``Generator`` makes the draws reproducible and **not private against whoever knows the seed**.

>>> z = discrete_laplace(2.0, 100_000, rng=1)
>>> z.dtype, abs(float(z.mean())) < 0.05
(dtype('int64'), True)
>>> g = discrete_gaussian(4, (2, 3), rng=1)
>>> g.shape, g.dtype
((2, 3), dtype('int64'))
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .errors import ParameterError
from .rng import RandomSource, RNGLike, as_source

__all__ = [
    "discrete_gaussian",
    "discrete_gaussian_pmf",
    "discrete_gaussian_variance",
    "discrete_laplace",
    "discrete_laplace_pmf",
    "discrete_laplace_variance",
    "exact_rational",
]

_DEN_BITS = 20
_MAX_SCALE = 2**30  # keeps t = scale·2**20 below 2**50


def exact_rational(value: object, name: str, owner: str) -> Fraction:
    """``value`` (> 0, finite) as an exact Fraction, rounded up to a multiple of ``2**-20`` when
    its denominator exceeds ``2**20``.

    >>> exact_rational(0.5, "scale", "f"), exact_rational(3, "scale", "f")
    (Fraction(1, 2), Fraction(3, 1))
    >>> exact_rational(0.1, "scale", "f") >= Fraction(1, 10)
    True
    """
    if isinstance(value, bool) or not isinstance(
        value, (int, float, Fraction, np.integer, np.floating)
    ):
        raise ParameterError(
            f"The {name!r} parameter of {owner} must be a finite real number > 0. "
            f"Got {value!r} instead."
        )
    if not isinstance(value, Fraction) and not math.isfinite(float(value)):
        raise ParameterError(
            f"The {name!r} parameter of {owner} must be a finite real number > 0. "
            f"Got {value!r} instead."
        )
    frac = (
        Fraction(value)
        if not isinstance(value, (np.integer, np.floating))
        else Fraction(value.item())
    )
    if frac <= 0 or frac > _MAX_SCALE:
        raise ParameterError(
            f"The {name!r} parameter of {owner} must be a finite real number in (0, 2**30]. "
            f"Got {value!r} instead."
        )
    if frac.denominator > 2**_DEN_BITS:
        frac = Fraction(-((-frac.numerator * 2**_DEN_BITS) // frac.denominator), 2**_DEN_BITS)
    return frac


def _shape(size: int | tuple[int, ...], owner: str) -> tuple[int, ...]:
    if isinstance(size, (int, np.integer)) and not isinstance(size, bool):
        shape = (int(size),)
    elif isinstance(size, tuple) and all(
        isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in size
    ):
        shape = tuple(int(s) for s in size)
    else:
        raise ParameterError(
            f"The 'size' parameter of {owner} must be an int or a tuple of ints. "
            f"Got {size!r} instead."
        )
    if any(s < 0 for s in shape):
        raise ParameterError(
            f"The 'size' parameter of {owner} must not be negative. Got {size!r} instead."
        )
    return shape


# ----------------------------------------------------------------------------- Bernoulli blocks
def _bernoulli_ratio(num: np.ndarray, den: np.ndarray | int, src: RandomSource) -> np.ndarray:
    """Bernoulli(num/den) exactly: a uniform integer in [0, den) is below num (0 ≤ num ≤ den)."""
    if num.size == 0:
        return np.zeros(0, dtype=bool)
    den_arr = np.broadcast_to(np.asarray(den, dtype=np.int64), num.shape)
    return src.integers(den_arr, size=None) < num


def _bernoulli_exp_frac(num: np.ndarray, den: np.ndarray | int, src: RandomSource) -> np.ndarray:
    """Bernoulli(exp(−num/den)) for 0 ≤ num ≤ den ≤ 2**52 (CKS: K = 1; while Bern(γ/K): K += 1;
    return K odd).

    Bern(γ/K) = Bern(num/(den·K)) is one uniform integer of [0, den·K) compared with num; a round
    whose outcome is certain (num = den and K = 1) draws nothing.
    """
    n = num.size
    den_arr = np.broadcast_to(np.asarray(den, dtype=np.int64), num.shape)
    K = np.ones(n, dtype=np.int64)
    # Round K = 1: Bern(num/den); certain where num == den, impossible where num == 0.
    success = num >= den_arr
    uncertain = np.flatnonzero((num > 0) & ~success)
    if uncertain.size:
        success[uncertain] = src.integers(den_arr[uncertain], size=None) < num[uncertain]
    alive = np.flatnonzero(success)
    K[alive] = 2
    while alive.size:
        high = den_arr[alive] * K[alive]  # ≤ 2**52 · K: below 2**62 while K < 2**10
        if int(high.max()) > 2**62:  # K ≥ 1024 has probability < 1/1023!; stay exact anyway
            a = _bernoulli_ratio(num[alive], den_arr[alive], src)
            a &= src.integers(K[alive], size=None) == 0
        else:
            a = src.integers(high, size=None) < num[alive]
        alive = alive[a]
        K[alive] += 1
    return (K % 2) == 1


def _bernoulli_exp_minus_one(n: int, src: RandomSource) -> np.ndarray:
    """``n`` independent Bernoulli(exp(−1)) draws."""
    return _bernoulli_exp_frac(np.ones(n, dtype=np.int64), 1, src)


def _bernoulli_exp(num: np.ndarray, den: np.ndarray, src: RandomSource) -> np.ndarray:
    """Bernoulli(exp(−num/den)) for any num ≥ 0, den ≥ 1 (int64 arrays).

    exp(−γ) = exp(−1)^floor(γ) · exp(−(γ − floor γ)): all floor(γ) draws of Bernoulli(exp(−1)) and
    one of the fractional part must succeed.
    """
    whole = num // den
    frac = num - whole * den
    ok = _bernoulli_exp_frac(frac, den, src)
    left = whole.copy()
    pending = np.flatnonzero(ok & (left > 0))
    while pending.size:
        b = _bernoulli_exp_minus_one(pending.size, src)
        ok[pending[~b]] = False
        left[pending] -= 1
        pending = pending[b & (left[pending] > 0)]
    return ok


def _geometric_exp_minus_one(n: int, src: RandomSource) -> np.ndarray:
    """Number of successes of Bernoulli(exp(−1)) before the first failure (``n`` draws)."""
    v = np.zeros(n, dtype=np.int64)
    alive = np.arange(n)
    while alive.size:
        b = _bernoulli_exp_minus_one(alive.size, src)
        v[alive[b]] += 1
        alive = alive[b]
    return v


# ----------------------------------------------------------------------------- samplers
def _laplace_core(scale: Fraction, n: int, src: RandomSource) -> np.ndarray:
    """CKS Algorithm 2 with scale t/s, vectorised over ``n`` outputs."""
    t, s = scale.numerator, scale.denominator
    out = np.empty(n, dtype=np.int64)
    todo = np.arange(n)
    while todo.size:
        m = todo.size
        u = src.integers(t, size=m)
        d = _bernoulli_exp_frac(u, t, src)  # accept U with probability exp(−U/t)
        idx, u = todo[d], u[d]
        v = _geometric_exp_minus_one(idx.size, src)
        x = u + t * v  # geometric with parameter exp(−1/t)
        y = x // s  # geometric with parameter exp(−s/t) = exp(−1/scale)
        b = src.bits(idx.size)
        keep = ~(b & (y == 0))  # −0 is rejected so that 0 is not counted twice
        out[idx[keep]] = np.where(b[keep], -y[keep], y[keep])
        done = np.zeros(m, dtype=bool)
        done[np.flatnonzero(d)[keep]] = True
        todo = todo[~done]
    return out


def discrete_laplace(scale: float, size: int | tuple[int, ...], rng: RNGLike = None) -> np.ndarray:
    """Integer Laplace ``Lap_Z(scale)``: ``P(z) ∝ exp(−|z|/scale)`` on ℤ, exactly.

    Parameters
    ----------
    scale : float, int or Fraction
        ``> 0``; taken as its exact rational value (rounded up to a multiple of ``2**-20`` when its
        denominator is larger, see the module docstring).
    size : int or tuple of ints
        Shape of the output.
    rng : None, int, SeedSequence, Generator or RandomSource
        ``None`` is the OS CSPRNG. Seeded output is not private against whoever knows the seed.

    Returns
    -------
    ndarray of int64

    Examples
    --------
    >>> z = discrete_laplace(1, 10, rng=0)
    >>> z.shape, z.dtype
    ((10,), dtype('int64'))
    """
    frac = exact_rational(scale, "scale", "discrete_laplace")
    shape = _shape(size, "discrete_laplace")
    n = int(np.prod(shape, dtype=np.int64))
    return _laplace_core(frac, n, as_source(rng)).reshape(shape)


def discrete_gaussian(
    sigma2: float, size: int | tuple[int, ...], rng: RNGLike = None
) -> np.ndarray:
    """Discrete Gaussian ``N_Z(0, sigma2)``: ``P(z) ∝ exp(−z²/(2·sigma2))`` on ℤ, exactly.

    CKS Algorithm 3: with ``t = floor(sigma) + 1``, draw ``Y ~ Lap_Z(t)`` and accept it with
    probability ``exp(−(|Y| − sigma2/t)² / (2·sigma2))``, decided by integer comparisons.

    Parameters
    ----------
    sigma2 : float, int or Fraction
        The variance parameter ``> 0`` (taken exactly, rounded up to a multiple of ``2**-20`` when
        its denominator is larger).
    size : int or tuple of ints
    rng : None, int, SeedSequence, Generator or RandomSource

    Examples
    --------
    >>> discrete_gaussian(0.5, 4, rng=3).dtype
    dtype('int64')
    """
    s2 = exact_rational(sigma2, "sigma2", "discrete_gaussian")
    shape = _shape(size, "discrete_gaussian")
    n = int(np.prod(shape, dtype=np.int64))
    src = as_source(rng)
    a, b = s2.numerator, s2.denominator  # sigma2 = a/b, b ≤ 2**20
    t = math.isqrt(a // b) + 1  # floor(sqrt(x)) == isqrt(floor(x)): floor(sigma) + 1, exactly
    q = b * t
    den = 2 * a * b * t * t
    exact_int64 = den < 2**62
    out = np.empty(n, dtype=np.int64)
    todo = np.arange(n)
    while todo.size:
        y = _laplace_core(Fraction(t), todo.size, src)
        absy = np.abs(y)
        if exact_int64 and int(absy.max(initial=0)) * q + a < 2**31:
            diff = absy * q - a
            num = diff * diff  # < 2**62
            ok = _bernoulli_exp(num, np.full(todo.size, den, dtype=np.int64), src)
        else:
            ok = _bernoulli_exp_big(absy, a, b, t, src)
        out[todo[ok]] = y[ok]
        todo = todo[~ok]
    return out.reshape(shape)


def _bernoulli_exp_big(absy: np.ndarray, a: int, b: int, t: int, src: RandomSource) -> np.ndarray:
    """Bernoulli(exp(−(|y|bt − a)²/(2abt²))) in Python integers (parameters beyond int64).

    exp(−γ) = exp(−1)^floor(γ) · exp(−frac(γ)); frac(γ) = R/D with D possibly > 2**62 is drawn as
    a uniform integer of [0, D) built from 62-bit limbs (exact rejection on the top limb).
    """
    q, den = b * t, 2 * a * b * t * t
    ok = np.zeros(absy.size, dtype=bool)
    for i, ay in enumerate(absy.tolist()):
        num = (ay * q - a) ** 2
        whole, rem = divmod(num, den)
        accept = True
        for _ in range(whole):
            if not _bernoulli_exp_minus_one(1, src)[0]:
                accept = False
                break
        if accept:
            k = 1
            while _uniform_below(den * k, src) < rem:
                k += 1
            accept = k % 2 == 1
        ok[i] = accept
    return ok


def _uniform_below(high: int, src: RandomSource) -> int:
    """An exactly uniform Python int in [0, high) for any high ≥ 1 (rejection on 64-bit words)."""
    words = (high.bit_length() + 63) // 64
    span = 1 << (64 * words)
    limit = span - span % high
    while True:
        value = 0
        for w in src.uint64(words).tolist():
            value = (value << 64) | int(w)
        if value < limit:
            return value % high


# ----------------------------------------------------------------------------- exact moments
def discrete_laplace_variance(scale: float) -> float:
    """Variance of ``Lap_Z(scale)``: ``2p/(1−p)²`` with ``p = exp(−1/scale)``.

    >>> round(discrete_laplace_variance(1.0), 6)
    1.841347
    """
    p = math.exp(-1.0 / float(scale))
    return 2.0 * p / (1.0 - p) ** 2


def discrete_laplace_pmf(z: np.ndarray, scale: float) -> np.ndarray:
    """Exact pmf of ``Lap_Z(scale)``: ``(1−p)/(1+p)·p^|z|``, ``p = exp(−1/scale)``."""
    p = math.exp(-1.0 / float(scale))
    return (1.0 - p) / (1.0 + p) * p ** np.abs(np.asarray(z, dtype=np.float64))


def discrete_gaussian_pmf(z: np.ndarray, sigma2: float, tail: int | None = None) -> np.ndarray:
    """Pmf of ``N_Z(0, sigma2)``, normalised by summing the kernel over ``|z| ≤ tail``."""
    s2 = float(sigma2)
    tail = tail if tail is not None else int(50 * math.sqrt(s2) + 50)
    grid = np.arange(-tail, tail + 1, dtype=np.float64)
    norm = np.exp(-(grid**2) / (2 * s2)).sum()
    zz = np.asarray(z, dtype=np.float64)
    return np.exp(-(zz**2) / (2 * s2)) / norm


def discrete_gaussian_variance(sigma2: float) -> float:
    """Exact variance of ``N_Z(0, sigma2)`` (slightly below sigma2 for small sigma2)."""
    s2 = float(sigma2)
    tail = int(50 * math.sqrt(s2) + 50)
    grid = np.arange(-tail, tail + 1, dtype=np.float64)
    return float((grid**2 * discrete_gaussian_pmf(grid, s2, tail)).sum())
