"""Sparse counting (Dwork, Naor, Reingold and Rothblum, *Pure Differential Privacy for
Rectangle Queries via Private Partitions*, Algorithm 2) and its exact trip-time routines.

The number of idle steps until a noisy threshold trips is geometric; it is drawn by exact
inversion with a lazily drawn uniform (:func:`first_trips`, :func:`_first_trip`), so ``skip``
costs ``O(log s)`` per trip and no floating-point decision changes an outcome's probability
(:mod:`sketchsyn.privacy.exactexp`). The state holds the current segment's exact count: a
**trusted** state.

>>> s = SparseCounter(1.0, 1000, rng=0)
>>> s.skip(999)
>>> s.t
999
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, localcontext
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np

from ..errors import InputError, check_int
from ..io.serial import Arrays, MetaReader
from ..privacy.exactexp import Real, exp_neg_bracket
from ..privacy.lineage import Lineage
from ..privacy.rng import RandomSource, RNGLike, as_source
from . import base as core
from .base import (
    _LIMIT,
    _as_steps,
    _budget,
    _check_param,
    _check_s,
    _check_total,
    _Counter,
    _read_sensitivity,
)
from .tree import BinaryMechanism, _load_tree, _tree_arrays

__all__ = ["SparseCounter", "first_trips"]


# ------------------------------------------------------------------ exact trip times
# Relative margin of the float estimate of T0 (its error is below 2**-48).
_T0_MARGIN = 2.0**-40


@lru_cache(maxsize=256)
def _floor_t0(horizon: int, epsilon: Fraction, sensitivity: int) -> int:
    """``floor(9·ln(T)·sensitivity/ε)``, exactly (ln T is irrational for T ≥ 2).

    First in float64: ``log`` of ``float(T)`` (``T ≤ 2**62``: one rounding), the product and
    the quotient by ``float(ε)`` each add a rounding or two, so the estimate is within a
    relative ``2**-48`` of the value; its floor is kept when the interval of relative width
    ``2**-40`` around it holds no integer. Otherwise :func:`_floor_t0_exact` decides.

    >>> _floor_t0(1000, Fraction(1, 2), 1), _floor_t0_exact(1000, Fraction(1, 2), 1)
    (124, 124)
    """
    if horizon == 1:
        return 0
    if Fraction(1, 2**900) < epsilon < 2**40:
        v = 9.0 * math.log(float(horizon)) * sensitivity / float(epsilon)
        lo, hi = math.floor(v * (1 - _T0_MARGIN)), math.floor(v * (1 + _T0_MARGIN))
        if lo == hi and math.isfinite(v):
            return lo
    return _floor_t0_exact(horizon, epsilon, sensitivity)


def _floor_t0_exact(horizon: int, epsilon: Fraction, sensitivity: int) -> int:
    """:func:`_floor_t0` from :mod:`decimal` brackets of ``ln T``, raised in precision until
    the floor is decided."""
    if horizon == 1:
        return 0
    prec = 40
    while True:
        with localcontext() as ctx:
            ctx.prec = prec
            ctx.rounding = ROUND_FLOOR
            lo = Decimal(horizon).ln()
            ctx.rounding = ROUND_CEILING
            hi = Decimal(horizon).ln()
        ulp = Fraction(1, 10 ** (prec - 3))
        f_lo = Fraction(lo) * (1 - ulp) * 9 * sensitivity / epsilon
        f_hi = Fraction(hi) * (1 + ulp) * 9 * sensitivity / epsilon
        if math.floor(f_lo) == math.floor(f_hi):
            return math.floor(f_lo)
        prec *= 2


@lru_cache(maxsize=4096)
def _stay_real(x: Fraction, a: int, g: int) -> Real:
    """``(1 − p)^g`` with ``p = P(λ > a)``, ``λ ~ Lap_Z(1/x)``: the probability that ``g``
    checks in a row do not trip. ``P(λ > a) = q^{a+1}/(1+q)`` for ``a ≥ 0`` and
    ``1 − q^{−a}/(1+q)`` for ``a < 0``, ``q = e^{−x}``."""

    def bracket(bits: int) -> tuple[int, int]:
        prec = bits + 64 + 2 * g.bit_length()
        one = 1 << prec
        m = a + 1 if a >= 0 else -a
        e_lo, e_hi = exp_neg_bracket(x * m, prec)
        q_lo, q_hi = exp_neg_bracket(x, prec)
        f_lo = (e_lo << prec) // (one + q_hi)  # q^m / (1 + q), bracketed
        f_hi = -((-(e_hi << prec)) // (one + q_lo))
        lo, hi = (one - f_hi, one - f_lo) if a >= 0 else (f_lo, f_hi)
        lo, hi = max(lo, 0), min(hi, one)
        p_lo, p_hi = one, one  # (lo/one)^g and (hi/one)^g, rounded outwards
        b_lo, b_hi, e = lo, hi, g
        while e:
            if e & 1:
                p_lo = (p_lo * b_lo) >> prec
                p_hi = -((-(p_hi * b_hi)) >> prec)
            e >>= 1
            if e:
                b_lo = (b_lo * b_lo) >> prec
                b_hi = -((-(b_hi * b_hi)) >> prec)
        shift = prec - bits
        return p_lo >> shift, -((-p_hi) >> shift)

    return Real(bracket)


class _LazyUniform:
    """A uniform real ``U`` in ``[0, 1)`` whose 32-bit words are drawn as comparisons need."""

    __slots__ = ("_src", "_words")

    def __init__(self, src: RandomSource, words: list[int] | None = None) -> None:
        self._src = src
        self._words: list[int] = [] if words is None else list(words)

    def below(self, c: Real) -> bool:
        """``U < c``, exactly (``c`` irrational, so the comparison ends with probability 1)."""
        prefix = 0
        k = 0
        while True:
            if len(self._words) <= k:
                self._words.append(int(self._src.uint32(1)[0]))
            prefix = (prefix << 32) | self._words[k]
            k += 1
            digits = c.floor(32 * k)
            if prefix != digits:
                return prefix < digits


def _first_trip(
    x: Fraction,
    a: int,
    s: int,
    src: RandomSource,
    words: list[int] | None = None,
    u: _LazyUniform | None = None,
    before: Real | None = None,
) -> int:
    """The first of ``s`` checks that trips (1-based), or 0 if none does, exactly.

    Each check trips independently with probability ``p = P(λ > a)``; the first trip ``G`` is
    geometric, ``P(G > g) = (1 − p)^g``. One uniform ``U`` decides it by inversion:
    ``G = min{g : U ≥ (1 − p)^g}``; ``U < (1 − p)^s`` means no trip within ``s`` checks.
    ``words``: the first 32-bit words of ``U`` when they were already drawn (the vectorised
    path of :mod:`sketchsyn.counters.sparsebank` hands over the draws it could not decide);
    or ``u``, the uniform itself (its later words drawn as needed and kept).

    ``before``: these checks follow others decided by the same ``U`` (a private bank's round,
    :mod:`sketchsyn.counters.checks`), none of which tripped, with probability ``before`` of
    that (``U < before``): then ``G = min{g : U ≥ before·(1 − p)^g}``, the first trip given
    ``U < before``, which has the same law.
    """
    if u is None:
        u = _LazyUniform(src, words)

    def stay(g: int) -> Real:
        real = _stay_real(x, a, g)
        return real if before is None else Real.product([before, real])

    if u.below(stay(s)):
        return 0
    lo, hi = 1, s  # U ≥ (1 − p)^hi
    while lo < hi:
        mid = (lo + hi) // 2
        if u.below(stay(mid)):
            lo = mid + 1
        else:
            hi = mid
    return lo


# Error margins of the floating-point trip decisions (see first_trips): a relative margin far
# wider than the few ulps numpy's exp/log/log1p lose, and an absolute one for values near 0.
_REL = 2.0**-30
_ABS = 2.0**-50
_TWO64 = 2.0**-64


def _log_stay(xf: float, a: np.ndarray) -> np.ndarray:
    """``ln(1 − p)`` with ``p = P(λ > a)``, ``λ ~ Lap_Z(1/x)`` (float, both branches free of
    cancellation): ``p = q^{a+1}/(1+q)`` for ``a ≥ 0``, ``1 − p = q^{−a}/(1+q)`` for ``a < 0``."""
    af = a.astype(np.float64)
    lq1 = math.log1p(math.exp(-xf))
    out = np.empty(a.shape, dtype=np.float64)
    pos = a >= 0
    with np.errstate(under="ignore"):
        out[pos] = np.log1p(-np.exp(-(af[pos] + 1.0) * xf - lq1))
    out[~pos] = af[~pos] * xf - lq1
    return out


def first_trips(x: Fraction, a: np.ndarray, s: np.ndarray, src: RandomSource) -> np.ndarray:
    """For each ``i``, the first of ``s[i]`` checks that trips (1-based), or 0: exactly.

    Check ``k`` trips when ``λ_k > a[i]``, ``λ_k ~ Lap_Z(1/x)`` independent. This is the
    vectorised form of :func:`sketchsyn.counters.sparse._first_trip`, with the same law: one uniform
    ``U`` per entry (its first 64 bits drawn here, two ``uint32`` words), ``G = min{g : U ≥
    (1 − p)^g}``. The float decisions are :func:`trip_decisions`; the ones it leaves go to the
    exact routine with the same words of ``U``.

    >>> from sketchsyn.privacy.rng import as_source
    >>> g = first_trips(Fraction(1, 4), np.array([10**6, -5]), np.array([10**9, 3]), as_source(0))
    >>> g.tolist()   # a huge threshold never trips; a negative one trips at once
    [0, 1]
    """
    a = np.asarray(a, dtype=np.int64)
    s = np.asarray(s, dtype=np.int64)
    n = a.size
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    k = uniform_words(src, n)
    out, unsure = trip_decisions(float(x), a, s, k)
    for i in np.flatnonzero(unsure).tolist():
        out[i] = exact_trip(x, int(a[i]), int(s[i]), int(k[i]), src)
    return out


def uniform_words(src: RandomSource, n: int) -> np.ndarray:
    """The first 64 bits of ``n`` uniforms ``U``: two ``uint32`` words each, the first one high.

    >>> from sketchsyn.privacy.rng import as_source
    >>> uniform_words(as_source(0), 3).dtype
    dtype('uint64')
    """
    words = src.uint32(2 * n).astype(np.uint64).reshape(n, 2)
    return (words[:, 0] << np.uint64(32)) | words[:, 1]


def exact_trip(x: Fraction, a: int, s: int, k: int, src: RandomSource, bits: int = 64) -> int:
    """:func:`_first_trip` of the uniform whose first 64 bits are ``k`` (later words, rarely
    needed, come from ``src``). With ``bits`` in 1 … 32 only the top ``bits`` bits of ``k`` are
    the uniform's (the rest are zero): below 32, the rest of its first 32-bit word is drawn from
    ``src`` first; the later bits come from ``src``."""
    return _first_trip(x, a, s, src, u=lazy_uniform(k, src, bits))


def lazy_uniform(k: int, src: RandomSource, bits: int = 64) -> _LazyUniform:
    """The uniform whose first ``bits`` bits (64, or 1 … 32) are the top of the 64-bit word
    ``k``: below 32, the rest of its first 32-bit word is drawn from ``src`` now; its later
    words come from ``src`` when a comparison needs them.

    >>> from sketchsyn.privacy.rng import as_source
    >>> lazy_uniform(3 << 62, as_source(0), bits=2).below(Real.ratio(1, 2))   # U ≥ 3/4
    False
    """
    if bits == 64:
        return _LazyUniform(src, [k >> 32, k & 0xFFFFFFFF])
    if not 1 <= bits <= 32:
        raise ValueError(f"bits must be 64 or in [1, 32]; got {bits}")
    first = k >> 32
    if bits < 32:
        first |= int(src.uint32(1)[0]) >> bits
    return _LazyUniform(src, [first])


def trip_decisions(
    xf: float,
    a: np.ndarray,
    s: np.ndarray,
    k: np.ndarray,
    span: float | np.ndarray = 1.0,
    base: float | np.ndarray = 0.0,
    l1p: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The float part of :func:`first_trips`: ``(G, unsure)`` for uniforms with first 64 bits
    ``k`` (uint64). ``G[i]`` is the exact first trip wherever ``unsure[i]`` is false.

    ``span``: ``U`` lies in ``[k, k + span)·2^-64``: 1 when ``k`` holds the uniform's first 64
    bits, ``2^(64 − b)`` when it holds only its first ``b`` (the rest zero). A decision is taken
    only when the whole interval agrees, so it is the exact one for every ``U`` in it; the rest
    are ``unsure``.

    ``l1p``: ``ln(1 − p)`` at ``a`` when the caller has it (``_log_stay(xf, a)``).

    ``base``: the checks follow others decided by the same ``U`` that did not trip, ``ln`` of
    the probability of that (a sum of at most a few thousand ``g·ln(1 − p)`` terms, all
    ``≤ 0``): the first trip is then ``min{g : ln U ≥ base + g·ln(1 − p)}``.

    Decisions are made on ``ln U`` against ``base + g·ln(1 − p)`` in float64, accepted only
    when they clear a margin (relative ``2^-30``, absolute ``2^-50``) far wider than the float
    error (a few ulps a term, summed: below ``2^-38`` relative for up to ``2^14`` terms). The
    compiled kernels of :mod:`sketchsyn.kernels._counters` make the same decisions, one check at a
    time.

    >>> k = np.array([7], dtype=np.uint64)
    >>> G, unsure = trip_decisions(0.25, np.array([10**6]), np.array([10**9]), k)
    >>> G.tolist(), unsure.tolist()
    ([0], [False])
    """
    out = np.zeros(a.size, dtype=np.int64)
    kf = k.astype(np.float64)
    with np.errstate(divide="ignore"):
        ln_lo = np.log(kf * _TWO64)
        ln_hi = np.log((kf + span) * _TWO64)
    ln_lo = ln_lo - (np.abs(ln_lo) * _REL + _ABS)
    ln_hi = ln_hi + (np.abs(ln_hi) * _REL + _ABS)
    if l1p is None:
        l1p = _log_stay(xf, a)
    sf = s.astype(np.float64)

    def below(g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(certainly U < e^base·(1−p)^g, certainly U ≥ e^base·(1−p)^g)."""
        target = base + g * l1p
        tol = np.abs(target) * _REL + _ABS
        return ln_hi < target - tol, ln_lo > target + tol

    stay, trip = below(sf)
    unsure = ~(stay | trip)
    # G = ceil((ln U − base) / ln(1 − p)), checked on both sides: U ≥ e^base·(1−p)^G and
    # U < e^base·(1−p)^(G−1) (for G = 1, U < e^base: the earlier checks' decision).
    mid = 0.5 * (ln_lo + ln_hi)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        guess = np.ceil((mid - base) / l1p)
    guess = np.where(np.isfinite(guess), guess, sf)
    guess = np.clip(guess, 1.0, np.maximum(sf, 1.0))
    _, at_g = below(guess)
    before, _ = below(guess - 1.0)
    before |= guess == 1.0
    ok = trip & at_g & before
    out[ok] = guess[ok].astype(np.int64)
    unsure |= trip & ~ok
    return out, unsure


# ------------------------------------------------------------------ sparse counting
class SparseCounter(_Counter):
    """Sparse counting with a finite horizon (He, Vershynin and Zhu, Algorithm 2; Dwork et al.
    2015).

    The timeline is cut into segments: a segment closes at the first step where its count
    ``N`` plus fresh ``Lap_Z(2·sensitivity/ε)`` exceeds its threshold
    ``T0 + Lap_Z(2·sensitivity/ε)``, ``T0 = 9·ln(T)·sensitivity/ε``; each closed segment's
    count is one step of a :class:`BinaryMechanism` with budget ``ε/2`` and horizon ``T`` (at
    most ``T`` segments), and the release is that mechanism's latest output. Releases change
    only when a segment closes, so on a sparse stream the error is
    ``O((log T + log^1.5 n)/ε)`` (Lemma 3.2) instead of ``O(log^1.5 T/ε)``.

    One check per step: at step ``t`` the value joins ``N`` and the check is made; a segment
    that closes at ``t`` is in ``t``'s release (the paper shows it from ``t + 1``: the same
    observable events, one step earlier).

    Saved state: **trusted** (``STATE_PRIVACY = "trusted"``). The algorithm compares the exact
    running count ``N`` of the current segment with the noisy threshold, so ``N`` is part of
    the state (and of its bytes, whose container header says ``state == "trusted"``). Keep the
    state with the curator.

    Parameters
    ----------
    epsilon : float
        Pure ε-DP over all steps.
    horizon : int
        ``T``, the number of steps.
    sensitivity : int
        ℓ1 bound on what neighbouring streams differ by (default 1); all noise scales with it.
    rng : None, int, SeedSequence, Generator or RandomSource

    Notes
    -----
    ``skip(s)``: while ``N`` is constant each check trips with the same probability ``p``, so the
    number of steps to the next trip is geometric and is drawn in one go by exact inversion
    (:func:`first_trips`: float decisions with a proven margin, :func:`_first_trip` for the
    rare undecided ones); the cost is ``O(log s)`` per trip, and trips are rare on an idle
    stream (``p ≈ T^{-4.5}`` once ``N = 0``). The skipped releases are the current release up
    to the trip step and the sub-mechanism's new output from it on: ``skip(s, releases=True)``
    returns them.

    ``nbytes = 40 + (16·L + 48)`` with ``L = floor(log2 T) + 1`` (scalars ``t, N, threshold``,
    the latest release and ``T0``, plus the sub-mechanism).

    Examples
    --------
    >>> c = SparseCounter(1.0, 10_000, rng=2)
    >>> out = c.update_many(np.zeros(5000, dtype=np.int64))
    >>> c.t, int(out[0])
    (5000, 0)
    """

    _kind = "SparseCounter"

    def __init__(
        self,
        epsilon: float,
        horizon: int,
        *,
        sensitivity: int = 1,
        rng: RNGLike = None,
    ) -> None:
        name = type(self).__name__
        _, self._epsilon = _budget(epsilon, None, name)
        self._horizon = check_int(horizon, "horizon", name, 1, 2**62 - 1)
        self._sensitivity = check_int(sensitivity, "sensitivity", name, minimum=1, maximum=2**30)
        src = as_source(rng)
        self._lineage = Lineage.new(src, self._kind, self._params())
        self._check_src, self._threshold_src, sub_src = src.spawn(3)
        self._scale = _check_param(
            2 * Fraction(self._sensitivity) / Fraction(self._epsilon), "scale", name
        )
        self._t0 = _floor_t0(self._horizon, Fraction(self._epsilon), self._sensitivity)
        self._sub = BinaryMechanism(
            self._epsilon / 2, self._horizon, sensitivity=self._sensitivity, rng=sub_src
        )
        self._frozen = False
        self._last = 0
        self._t = 0
        self._n = 0
        self._theta = self._new_threshold()

    def _params(self) -> dict:
        return {
            "epsilon": self._epsilon,
            "horizon": self._horizon,
            "sensitivity": self._sensitivity,
        }

    def _new_threshold(self) -> int:
        return self._t0 + int(core._draw("laplace", self._scale, 1, self._threshold_src)[0])

    @property
    def segments(self) -> int:
        """Closed segments so far (public: every closing changes the release)."""
        return self._sub.t

    @property
    def nbytes(self) -> int:
        """``40 + 16·L + 48`` bytes (``L = floor(log2 T) + 1``)."""
        return 40 + self._sub.nbytes

    def _room(self, n: int) -> None:
        if self._t + n > self._horizon:
            raise InputError(
                f"xs: {n} more steps would pass the horizon {self._horizon} "
                f"(t = {self._t}) ({type(self).__name__})"
            )

    def update_many(self, xs: object) -> np.ndarray:
        """Advance ``len(xs)`` steps; return every step's release (int64).

        All checks' noise is drawn first, in step order, from its own stream; thresholds and
        the sub-mechanism draw from theirs, so batching does not change which noise goes where.

        >>> c = SparseCounter(1.0, 100, rng=0)
        >>> c.update_many([0, 0, 0]).tolist()
        [0, 0, 0]
        """
        self._check_writable()
        steps = _as_steps(xs, type(self).__name__)
        self._room(steps.size)
        _check_total(steps, self._sub._mass() + abs(self._n) + abs(self._theta), self._kind)
        n = steps.size
        out = np.empty(n, dtype=np.int64)
        if n == 0:
            return out
        noise = core._draw("laplace", self._scale, n, self._check_src)
        cum = np.cumsum(steps)
        pos = 0
        while pos < n:
            # First trip at or after pos: N + cum[i] − cum[pos−1] + λ'_i > θ, searched in
            # growing windows (segments last about T0 steps on a dense stream).
            offset = self._n - (int(cum[pos - 1]) if pos else 0)
            width = 256
            trip = -1
            lo = pos
            while lo < n:
                hi = min(n, lo + width)
                hit = np.flatnonzero(cum[lo:hi] + noise[lo:hi] + offset > self._theta)
                if hit.size:
                    trip = lo + int(hit[0])
                    break
                lo, width = hi, width * 2
            if trip < 0:
                out[pos:] = self._last
                self._n = offset + int(cum[-1])
                break
            out[pos:trip] = self._last
            self._last = int(self._sub.update(offset + int(cum[trip])))
            out[trip] = self._last
            self._n = 0
            self._theta = self._new_threshold()
            pos = trip + 1
        self._t += n
        return out

    def skip(self, s: int, releases: bool = False) -> np.ndarray | None:
        """Advance ``s`` steps of value 0 in ``O(log s)`` per segment closing, exactly.

        While ``N`` is constant, each step's check trips with probability
        ``p = P(λ' > θ − N)``; the first trip is drawn by exact inversion of its geometric law
        (the same law as ``s`` calls of ``update(0)``). ``releases=True`` also returns the
        ``s`` released values (the current release until a trip, then the new one).

        >>> c = SparseCounter(1.0, 10**12, rng=0)
        >>> c.skip(10**11); c.t
        100000000000
        """
        self._check_writable()
        s = _check_s(s, type(self).__name__)
        self._room(s)
        x = 1 / self._scale
        out = np.empty(s, dtype=np.int64) if releases else None
        done = 0
        while done < s:
            g = int(
                first_trips(
                    x, np.array([self._theta - self._n]), np.array([s - done]), self._check_src
                )[0]
            )
            if g == 0:
                if out is not None:
                    out[done:] = self._last
                break
            if out is not None:
                out[done : done + g - 1] = self._last
            self._last = int(self._sub.update(self._n))
            if out is not None:
                out[done + g - 1] = self._last
            self._n = 0
            self._theta = self._new_threshold()
            done += g
        self._t += s
        return out

    # -------------------------------------------------------------- bytes
    def _state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """**Trusted-curator state**: besides public parameters and noisy values, it holds the
        exact count ``N`` of the current segment (and the sub-mechanism's open p-sums).

        >>> c = SparseCounter(1.0, 64, rng=1); _ = c.update_many([1, 1, 0])
        >>> SparseCounter.from_bytes(c.to_bytes()).t
        3
        """
        meta = {
            **self._params(),
            "t": self._t,
            "n": self._n,
            "theta": self._theta,
            "sub_t": self._sub.t,
            "sub_last": self._sub._last,
            **self._common_meta(),
        }
        return meta, _tree_arrays(self._sub._tree, "sub.")

    @classmethod
    def _load_state(
        cls, fields: MetaReader, arrays: Arrays, version: int, blob: bytes, rng: Any
    ) -> SparseCounter:
        eps = fields.epsilon("epsilon")
        horizon = fields.int("horizon", 1, 2**62 - 1)
        sensitivity = _read_sensitivity(fields)
        t = fields.int("t", 0, horizon)
        n = fields.int("n", 0, _LIMIT - 1)
        theta = fields.int("theta", -_LIMIT + 1, _LIMIT - 1)
        sub_t = fields.int("sub_t", 0, t)
        sub_last = fields.int("sub_last", -_LIMIT + 1, _LIMIT - 1)
        obj = cls(eps, horizon, sensitivity=sensitivity, rng=rng)
        obj._restore_common(fields)
        obj._t, obj._n, obj._theta = t, n, theta
        obj._sub._t = sub_t
        obj._sub._last = sub_last
        obj._sub._tree = _load_tree(obj._sub._levels, sub_t, 1, fields, arrays, "sub.")
        return obj

    def __repr__(self) -> str:
        return (
            f"SparseCounter(epsilon={self._epsilon}, horizon={self._horizon}, "
            f"sensitivity={self._sensitivity}, t={self._t})"
        )
