"""Continual counting by the square-root factorization of the prefix-sum matrix (ρ-zCDP).

Fichtenberger, Henzinger and Upadhyay, *Constant Matters: Fine-grained Error Bound on
Differentially Private Continual Observation* (ICML 2023): the release is ``C'x + z`` with ``C'``
an integer Toeplitz square root of the prefix-sum matrix; the prefix sums are recovered by
post-processing. The state keeps the stream itself: a **trusted** state.

>>> c = SqrtFactorizationCounter(1.0, 64, rng=0)
>>> c.update_many([1, 1, 0]).dtype
dtype('float64')
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ..attributes import ReadOnly
from ..errors import InputError, ParameterError, SerializationError, check_int
from ..io.serial import Arrays, MetaReader
from ..privacy.lineage import Lineage
from ..privacy.noise import discrete_gaussian_variance
from ..privacy.rng import RNGLike, as_source
from . import base as core
from .base import (
    _as_steps,
    _budget,
    _check_s,
    _Counter,
    _int_array,
    _read_sensitivity,
)

__all__ = ["SqrtFactorizationCounter", "sqrt_coefficients"]


# ------------------------------------------------------------------ square-root factorization
def sqrt_coefficients(horizon: int) -> np.ndarray:
    """``c_k = C(2k, k)/4^k`` for ``k < horizon``: the Toeplitz square root of the prefix-sum
    matrix (``(1 − z)^{−1/2}``; Fichtenberger, Henzinger and Upadhyay 2023).

    >>> sqrt_coefficients(4).tolist()
    [1.0, 0.5, 0.375, 0.3125]
    """
    k = np.arange(1, horizon, dtype=np.float64)
    return np.concatenate([[1.0], np.cumprod((2 * k - 1) / (2 * k))])


def _exact_square_sum(values: np.ndarray) -> int:
    """``Σ v²`` exactly for non-negative int64 ``v < 2**33`` (split in 17-bit halves, so every
    partial sum stays inside int64 for up to ``2**20`` values).

    >>> _exact_square_sum(np.array([2**32, 3]))
    18446744073709551625
    """
    hi, lo = values >> 17, values & ((1 << 17) - 1)
    return (int((hi * hi).sum()) << 34) + (int((2 * hi * lo).sum()) << 17) + int((lo * lo).sum())


def _product(p: np.ndarray, q: np.ndarray, m: int) -> np.ndarray:
    """The first ``m`` coefficients of ``p(z)·q(z)`` (FFT convolution)."""
    size = 1 << (len(p) + len(q) - 1).bit_length()
    return np.fft.irfft(np.fft.rfft(p, size) * np.fft.rfft(q, size), size)[:m]


def _series_inverse(a: np.ndarray) -> np.ndarray:
    """The first ``len(a)`` coefficients of ``1/a(z)`` (``a[0] ≠ 0``) by Newton's iteration
    ``g ← g·(2 − a·g)``, doubling the precision each round: ``O(T log T)`` (post-processing
    only, so float error is harmless; it matches the ``O(T²)`` recurrence to 1e-13).

    >>> _series_inverse(np.array([1.0, -1.0, 0.0, 0.0])).round(12).tolist()
    [1.0, 1.0, 1.0, 1.0]
    """
    g = np.array([1.0 / a[0]])
    m = 1
    while m < len(a):
        m = min(2 * m, len(a))
        grown = np.concatenate([g, np.zeros(m - len(g))])
        g = 2 * grown - _product(g, _product(a[:m], g, m), m)
    return g


class SqrtFactorizationCounter(_Counter):
    """Continual counting by the square-root factorization ``A = C·C`` of the prefix-sum matrix
    (ρ-zCDP; Fichtenberger, Henzinger and Upadhyay, ICML 2023).

    The mechanism releases ``y = C'x + z`` with ``C'`` the lower-triangular Toeplitz matrix of
    ``c'_k = round(2^b·c_k)`` (integers; ``c_k = C(2k,k)/4^k``) and ``z`` discrete Gaussian
    with ``σ² = sensitivity²·Σ_k c'_k²/(2ρ)``: the ℓ2 sensitivity of ``C'x`` to an ℓ1 change of
    ``sensitivity`` is at most ``sensitivity`` times ``C'``'s largest column norm (its first
    column), computed exactly in integers. The prefix sums are recovered by floating-point
    post-processing, ``Ŝ = A·C'^{-1}·y``: unbiased, with variance ``σ_Z²·Σ_{i<t} b_i²`` at step
    ``t`` (``b`` the coefficients of ``A·C'^{-1}``, ``σ_Z²`` the exact discrete Gaussian
    variance). ``b`` is the largest number of bits in ``[4, 32]`` that keeps ``σ² ≤ 2**30``.
    Max variance in units of ``1/(2ρ)``: 10.7 at ``T = 2^10`` against 110 for the tree.

    **Memory O(T)**, acceptable for longitudinal horizons (``T ≤ 10^4``): the state keeps the
    stream so far (``C'x`` needs all of it) and the noisy releases; it is a trusted curator's
    state (its blobs say ``state == "trusted"``). ``nbytes = 16·T + 48``. Batches are streamed
    with one integer convolution each; ``skip(s)`` is ``O(s)`` here (every step gets fresh noise).

    Saved state: **trusted** (``STATE_PRIVACY = "trusted"``): the stream so far and the
    noisy releases; a curator's checkpoint.

    Parameters
    ----------
    rho : float
        ρ-zCDP over all steps.
    horizon : int
        ``T`` (at most ``2**20``).
    sensitivity : int
        ℓ1 bound on what neighbouring streams differ by (default 1).
    rng : None, int, SeedSequence, Generator or RandomSource

    Examples
    --------
    >>> c = SqrtFactorizationCounter(1.0, 1024, rng=0)
    >>> est = c.update_many(np.ones(1000, dtype=np.int64))
    >>> bool(abs(est[-1] - 1000) < 30), round(c.variance(1024) * 2, 1)  # ρ = 1: units 1/(2ρ)
    (True, 10.7)
    """

    _kind = "SqrtFactorizationCounter"

    def __init__(
        self, rho: float, horizon: int, *, sensitivity: int = 1, rng: RNGLike = None
    ) -> None:
        name = type(self).__name__
        _, self._rho = _budget(None, rho, name)
        self._horizon = check_int(horizon, "horizon", name, 1, 2**20)
        self._sensitivity = check_int(sensitivity, "sensitivity", name, minimum=1, maximum=2**30)
        self._src = as_source(rng)
        self._lineage = Lineage.new(self._src, self._kind, self._params())
        c = sqrt_coefficients(self._horizon)
        for bits in range(32, 3, -1):
            coef = np.rint(c * 2.0**bits).astype(np.int64)
            norm2 = _exact_square_sum(coef)
            sigma2 = Fraction(self._sensitivity**2 * norm2) / (2 * Fraction(self._rho))
            if sigma2 <= 2**30:
                break
        else:
            raise ParameterError(
                f"The 'rho' parameter of {name} is too small for this horizon and sensitivity "
                f"(the noise variance would pass 2**30). Got {rho!r} instead."
            )
        self._bits = bits
        self._coef = coef
        self._sigma2 = sigma2
        inv = _series_inverse(coef.astype(np.float64))  # 1/C'(z) as a power series
        self._b = np.cumsum(inv)  # A·C'^{-1}: prefix sums of the inverse's coefficients
        self._x = np.zeros(self._horizon, dtype=np.int64)
        self._y = np.zeros(self._horizon, dtype=np.int64)
        self._t = 0
        self._total = 0
        self._frozen = False
        self._lastf = 0.0
        self._zvar: float | None = None

    def _params(self) -> dict:
        return {"rho": self._rho, "horizon": self._horizon, "sensitivity": self._sensitivity}

    @property
    def _last(self) -> Any:
        return self._lastf

    @_last.setter
    def _last(self, value: Any) -> None:
        self._lastf = float(value)

    bits = ReadOnly[int]("``b``: the factor is scaled by ``2^b`` before rounding to integers.")
    sigma2 = ReadOnly[Fraction](
        "The discrete Gaussian's ``σ²`` (exact), in units of the scaled factor."
    )

    @property
    def releases(self) -> np.ndarray:
        """The mechanism's integer outputs ``y_1 … y_t`` (the estimates post-process them)."""
        return self._y[: self._t].copy()

    @property
    def nbytes(self) -> int:
        """``16·T + 48`` bytes: the stream and the noisy outputs, plus scalars."""
        return 16 * self._horizon + 48

    def variance(self, t: int) -> float:
        """Exact variance of the estimate at step ``t``: ``σ_Z²·Σ_{i<t} b_i²``."""
        t = check_int(t, "t", f"{self._kind}.variance", 1, self._horizon)
        if self._zvar is None:
            self._zvar = discrete_gaussian_variance(float(self._sigma2))
        return self._zvar * float(np.dot(self._b[:t], self._b[:t]))

    def update_many(self, xs: object) -> np.ndarray:
        """Advance ``len(xs)`` steps; return every step's prefix-sum estimate (float64).

        >>> SqrtFactorizationCounter(2.0, 16, rng=0).update_many([1, 0, 1]).dtype
        dtype('float64')
        """
        self._check_writable()
        steps = _as_steps(xs, self._kind)
        n = steps.size
        if self._t + n > self._horizon:
            raise InputError(
                f"xs: {n} more steps would pass the horizon {self._horizon} "
                f"(t = {self._t}) ({self._kind})"
            )
        total = self._total + float(steps.sum(dtype=np.float64))
        if total * 2.0**self._bits * 2 >= 2.0**62:
            raise InputError(
                f"xs: the stream's total would overflow the integer factor ({self._kind})"
            )
        if n == 0:
            return np.zeros(0, dtype=np.float64)
        t0, t1 = self._t, self._t + n
        self._x[t0:t1] = steps
        z = core._draw("gaussian", self._sigma2, n, self._src)
        cx = np.convolve(self._x[:t1], self._coef[:t1])[t0:t1]
        self._y[t0:t1] = cx + z
        est = np.convolve(self._y[:t1].astype(np.float64), self._b[:t1])[t0:t1]
        self._t = t1
        self._total = int(total)
        self._lastf = float(est[-1])
        return est

    def skip(self, s: int, releases: bool = False) -> np.ndarray | None:
        """``s`` steps of 0 (``O(s)``: each step's output gets its own noise)."""
        s = _check_s(s, self._kind)
        out = self.update_many(np.zeros(s, dtype=np.int64))
        return out if releases else None

    def _state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """**Trusted-curator state**: the stream so far is inside (the factor needs all of it),
        with the noisy outputs.

        >>> c = SqrtFactorizationCounter(1.0, 16, rng=0); _ = c.update_many([1, 0, 1])
        >>> SqrtFactorizationCounter.from_bytes(c.to_bytes()) == c
        True
        """
        meta = {**self._params(), "t": self._t, **self._common_meta()}
        return meta, {"x": self._x[: self._t].copy(), "y": self._y[: self._t].copy()}

    @classmethod
    def _load_state(
        cls, fields: MetaReader, arrays: Arrays, version: int, blob: bytes, rng: Any
    ) -> SqrtFactorizationCounter:
        rho = fields.epsilon("rho")
        horizon = fields.int("horizon", 1, 2**20)
        sensitivity = _read_sensitivity(fields)
        t = fields.int("t", 0, horizon)
        x = _int_array(fields, arrays, "x", (t,))
        y = _int_array(fields, arrays, "y", (t,))
        obj = cls(rho, horizon, sensitivity=sensitivity, rng=rng)
        if (x < 0).any() or float(x.sum(dtype=np.float64)) * 2.0**obj._bits * 2 >= 2.0**62:
            raise SerializationError(
                f"{cls._kind} blob array 'x' holds negative steps or a total beyond the factor"
            )
        obj._restore_common(fields, last="float")
        obj._x[:t], obj._y[:t], obj._t = x, y, t
        obj._total = int(x.sum())
        return obj

    def __repr__(self) -> str:
        return f"SqrtFactorizationCounter(rho={self._rho}, horizon={self._horizon}, t={self._t})"
