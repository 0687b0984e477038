"""Exact Bernoulli decisions and table lookups for probabilities made of ``e^{−x}``.

The noise samplers need events of probability ``c`` where ``c`` is ``e^{−x}``, ``1 − e^{−x}`` or
a ratio of such numbers, ``x`` a positive rational. Such a ``c`` is irrational, so it cannot be
compared with a uniform integer; instead a uniform real ``U = 0.W₁W₂W₃…`` (in base ``2**32``) is
compared with the binary expansion of ``c``, one 32-bit word at a time:

* with ``T = floor(2**32·c)``, ``W₁ < T`` proves ``U < c`` and ``W₁ > T`` proves ``U > c``,
  whatever the later words are;
* only ``W₁ == T`` (probability ``2**-32``) needs the next 32 bits of ``c`` and the next word
  ``W₂``, and so on. As ``c`` is irrational the comparison ends with probability 1.

The decision is therefore exactly ``U < c``, i.e. exactly Bernoulli(``c``), and a sorted table of
``floor(2**32·c_v)`` for increasing ``c_1 ≤ … ≤ c_m`` turns one word into an exact draw of
``#{v : c_v ≤ U}`` (inversion). No float is involved.

The floors are computed from certified brackets of ``e^{−x}``: :mod:`decimal` evaluates ``exp``
correctly rounded (Python documentation of ``Decimal.exp``), the input ``x`` is bracketed by
rounding its division down and up, and one unit in the last place is added on each side. A floor
is returned only when both ends of the bracket agree; otherwise the precision is raised.

>>> from fractions import Fraction
>>> r = Real.exp_neg(Fraction(1))
>>> r.floor(32) == int(2**32 * 0.36787944117144233)
True
>>> Real.one_minus_exp_neg(Fraction(1, 3)).floor(8)  # floor(256·(1 − e^(−1/3)))
72
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal, localcontext
from fractions import Fraction
from functools import lru_cache

import numpy as np

from .rng import RandomSource

__all__ = ["Real", "ThresholdTable", "exp_neg_bracket", "resolve_ties"]

_WORD = 32
_MASK = (1 << _WORD) - 1


def exp_neg_bracket(x: Fraction, bits: int) -> tuple[int, int]:
    """Integers ``lo ≤ 2**bits · e^{−x} ≤ hi`` for a rational ``x ≥ 0`` (``hi − lo`` ≤ a few).

    >>> lo, hi = exp_neg_bracket(Fraction(1, 2), 40)
    >>> lo <= 0.6065306597126334 * 2**40 <= hi and hi - lo <= 4
    True
    """
    if x == 0:
        return 1 << bits, 1 << bits
    if x >= bits:
        # e^{−x} ≤ e^{−bits} < 2**-bits: the bracket [0, 1] is exact and spares Decimal a
        # computation with about x/2 digits (tiny noise scales give x in the millions).
        return 0, 1
    # Digits: enough for 2**-bits relative precision after the value's own magnitude
    # (e^{−x} ≥ 10**(−x/ln 10)), plus a margin.
    digits = int(bits * 0.30103) + int(x / 2) + 12
    with localcontext() as ctx:
        ctx.prec = digits
        ctx.rounding = ROUND_FLOOR
        x_lo = Decimal(x.numerator) / Decimal(x.denominator)
        ctx.rounding = ROUND_CEILING
        x_hi = Decimal(x.numerator) / Decimal(x.denominator)
        ctx.rounding = ROUND_HALF_EVEN  # Decimal.exp is correctly rounded in this mode
        e_lo = (-x_hi).exp()  # e^{−x_hi} ≤ e^{−x}, up to half an ulp
        e_hi = (-x_lo).exp()
    ulp = Fraction(1, 10 ** (digits - 1))  # relative size of one unit in the last place
    lo_frac = Fraction(e_lo) * (1 - ulp) * (1 << bits)
    hi_frac = Fraction(e_hi) * (1 + ulp) * (1 << bits)
    return lo_frac.numerator // lo_frac.denominator, -((-hi_frac.numerator) // hi_frac.denominator)


class Real:
    """An irrational number in ``(0, 1)`` given by a bracketing function ``bits → (lo, hi)``
    (``lo ≤ 2**bits · c ≤ hi``); ``floor(bits)`` is ``floor(2**bits · c)``, exactly."""

    __slots__ = ("_bracket", "_cache")

    def __init__(self, bracket: Callable[[int], tuple[int, int]]) -> None:
        self._bracket = bracket
        self._cache: dict[int, int] = {}

    def floor(self, bits: int) -> int:
        """``floor(2**bits · c)`` (the first ``bits`` binary digits of ``c``)."""
        if bits in self._cache:
            return self._cache[bits]
        guard = 32
        top = (1 << bits) - 1  # c < 1
        while True:
            lo, hi = self._bracket(bits + guard)
            if lo >> guard == min(hi >> guard, top):
                self._cache[bits] = lo >> guard
                return lo >> guard
            guard *= 2  # c is irrational: some precision decides its floor

    @classmethod
    def ratio(cls, r: int, den: int) -> Real:
        """The rational ``r/den`` in ``[0, 1)`` (its digits are exact floors; a comparison with
        ``U`` still ends with probability 1, after the expansion's trailing zeros if need be)."""
        return cls(lambda bits: ((r << bits) // den,) * 2)

    @classmethod
    def exp_neg(cls, x: Fraction) -> Real:
        """``e^{−x}`` for a rational ``x > 0``."""
        return cls(lambda bits: exp_neg_bracket(x, bits))

    @classmethod
    def one_minus_exp_neg(cls, x: Fraction) -> Real:
        """``1 − e^{−x}`` for a rational ``x > 0``."""

        def bracket(bits: int) -> tuple[int, int]:
            lo, hi = exp_neg_bracket(x, bits)
            return (1 << bits) - hi, (1 << bits) - lo

        return cls(bracket)

    @classmethod
    def truncated_cdf(cls, x: Fraction, o: int, m: int) -> Real:
        """``(1 − e^{−x·o})/(1 − e^{−x·m})`` (``0 < o < m``): the CDF at ``o`` of a geometric
        truncated to ``[0, m)``."""

        def bracket(bits: int) -> tuple[int, int]:
            one = 1 << (bits + 4)
            a_lo, a_hi = exp_neg_bracket(x * o, bits + 4)
            b_lo, b_hi = exp_neg_bracket(x * m, bits + 4)
            num_lo, num_hi = one - a_hi, one - a_lo
            den_lo, den_hi = one - b_hi, one - b_lo
            return (num_lo << bits) // den_hi, -((-(num_hi << bits)) // den_lo)

        return cls(bracket)


def resolve_ties(reals: list[Real], src: RandomSource) -> int:
    """For reals ``c_1 ≤ … ≤ c_q`` whose first 32 bits all equal the first word of ``U``, draw
    the next words of ``U`` and return ``#{v : c_v ≤ U}`` (exactly; see the module docstring).
    """
    count, alive, k = 0, list(range(len(reals))), 1
    while alive:
        k += 1
        word = int(src.uint32(1)[0])
        still = []
        for v in alive:
            digit = reals[v].floor(_WORD * k) & _MASK
            if digit < word:
                count += 1  # c_v < U
            elif digit == word:
                still.append(v)
        alive = still
    return count


class ThresholdTable:
    """Exact inversion over ``m`` increasing probabilities ``c_1 ≤ … ≤ c_m``.

    ``sample(words, src)`` returns ``#{v : c_v ≤ U}`` for each uniform ``U`` whose first word is
    given: thresholds ``T_v = floor(2**32·c_v)`` decide it unless the word equals some ``T_v``,
    which is then settled by :func:`resolve_ties`. A guide table on the top 12 bits of the word
    makes the lookup a few vectorised steps. A table of ``m`` entries takes about ``16·m + 16 KiB``;
    the table builders below keep the tables of the last 256 parameters.
    """

    __slots__ = ("_guide", "_padded", "_real", "_reals", "_thresholds")

    _GUIDE_BITS = 12

    def __init__(self, thresholds: np.ndarray, real: Callable[[int], Real]) -> None:
        t = np.asarray(thresholds, dtype=np.uint32)
        if t.size and np.any(t[1:] < t[:-1]):
            raise ValueError("thresholds must be sorted")
        self._thresholds = t
        self._real = real  # v (1-based) → the Real c_v, for ties only
        self._reals: dict[int, Real] = {}
        starts = np.arange(2**self._GUIDE_BITS + 1, dtype=np.int64) << (32 - self._GUIDE_BITS)
        self._guide = np.searchsorted(t.astype(np.int64), starts, side="left").astype(np.int32)
        self._padded = np.append(t.astype(np.int64), np.int64(2**32))

    @property
    def size(self) -> int:
        return int(self._thresholds.size)

    def _real_of(self, v: int) -> Real:
        if v not in self._reals:
            self._reals[v] = self._real(v)
        return self._reals[v]

    def sample_one(self, word: int, src: RandomSource) -> int:
        """:meth:`sample` of one uniform (plain Python: one draw costs microseconds, not the
        dozen numpy calls of the vectorised path); the same outcome for the same word."""
        t = self._padded
        idx = int(self._guide[word >> (32 - self._GUIDE_BITS)])
        while t[idx] < word:
            idx += 1
        if t[idx] == word:  # a tie: settled exactly, as in the vectorised path
            return int(self.sample(np.array([word], dtype=np.uint32), src)[0])
        return idx

    def sample(self, words: np.ndarray, src: RandomSource) -> np.ndarray:
        """``#{v : c_v ≤ U}`` (int64) for uniform ``U`` with first words ``words`` (uint32)."""
        t = self._padded
        w = words.astype(np.int64)
        idx = self._guide[words >> np.uint32(32 - self._GUIDE_BITS)]
        # idx = #{T_v < bucket start}; step up while T[idx] < word: two vectorised steps, then a
        # binary search for the few words in crowded buckets. t[m] = 2**32 stops every word.
        for _ in range(2):
            idx += t[idx] < w
        late = np.flatnonzero(t[idx] < w)
        if late.size:
            idx[late] = np.searchsorted(self._thresholds, words[late], side="left")
        # idx = #{T_v < word}: exact unless the word equals T_{idx+1} (a tie, probability ~2**-32).
        for e in np.flatnonzero(t[idx] == w).tolist():
            lo = int(idx[e])
            hi = int(np.searchsorted(self._thresholds, words[e], side="right"))
            reals = [self._real_of(v) for v in range(lo + 1, hi + 1)]
            idx[e] = lo + resolve_ties(reals, src)
        return idx.astype(np.int64)


def _power_brackets(x: Fraction, count: int, prec: int) -> tuple[list[int], list[int]]:
    """Brackets of ``2**prec · e^{−x·o}`` for ``o = 0 … count`` from one bracket of ``e^{−x}``."""
    q_lo, q_hi = exp_neg_bracket(x, prec)
    lo, hi = [1 << prec], [1 << prec]
    for _ in range(count):
        lo.append((lo[-1] * q_lo) >> prec)
        hi.append(-((-(hi[-1] * q_hi)) >> prec))
    return lo, hi


def _floors(lo: list[int], hi: list[int], shift: int, exact: Callable[[int], int]) -> np.ndarray:
    """``floor`` of each bracket ``[lo, hi] / 2**shift`` of a number in ``(0, 1)`` (so the floor
    is at most ``2**32 − 1``); ``exact(o)`` where the ends disagree."""
    out = np.empty(len(lo), dtype=np.uint32)
    for o, (a, b) in enumerate(zip(lo, hi, strict=True)):
        f_lo, f_hi = a >> shift, min(b >> shift, _MASK)
        out[o] = f_lo if f_lo == f_hi else exact(o)
    return out


@lru_cache(maxsize=256)
def geometric_table(x: Fraction, m: int, truncated: bool) -> ThresholdTable:
    """Inversion table for ``Y`` with ``P(Y ≥ y) = e^{−x·y}``.

    ``truncated=False``: ``c_o = 1 − e^{−x·o}`` (``o = 1 … m``); the outcome is ``Y`` when it is
    below ``m`` and ``m`` when ``Y ≥ m``. ``truncated=True``: ``Y`` conditioned on ``Y < m``,
    ``c_o = (1 − e^{−x·o})/(1 − e^{−x·m})`` (``o = 1 … m − 1``).
    """
    prec = 96 + int(x.denominator).bit_length()  # 1 − e^{−x} can be as small as x
    lo, hi = _power_brackets(x, m, prec)
    one = 1 << prec
    shift = prec - _WORD
    if not truncated:
        t = _floors(
            [one - h for h in hi[1:]],
            [one - a for a in lo[1:]],
            shift,
            lambda i: Real.one_minus_exp_neg(x * (i + 1)).floor(_WORD),
        )
        return ThresholdTable(t, lambda v: Real.one_minus_exp_neg(x * v))
    den_lo, den_hi = one - hi[m], one - lo[m]
    t = _floors(
        [((one - h) << (2 * _WORD)) // den_hi for h in hi[1:m]],
        [-((-((one - a) << (2 * _WORD))) // den_lo) for a in lo[1:m]],
        _WORD,
        lambda i: Real.truncated_cdf(x, i + 1, m).floor(_WORD),
    )
    return ThresholdTable(t, lambda v: Real.truncated_cdf(x, v, m))


def _laplace_magnitude_real(x: Fraction, o: int) -> Real:
    """``P(|Z| < o) = 1 − 2·e^{−x·o}/(1 + e^{−x})`` for ``Z ~ Lap_Z(1/x)`` (``o ≥ 1``)."""

    def bracket(bits: int) -> tuple[int, int]:
        one = 1 << (bits + 4)
        a_lo, a_hi = exp_neg_bracket(x * o, bits + 4)
        p_lo, p_hi = exp_neg_bracket(x, bits + 4)
        tail_hi = -((-(2 * a_hi << bits)) // (one + p_lo))
        tail_lo = (2 * a_lo << bits) // (one + p_hi)
        return (1 << bits) - tail_hi, (1 << bits) - tail_lo

    return Real(bracket)


@lru_cache(maxsize=256)
def laplace_magnitude_table(x: Fraction, m: int) -> ThresholdTable:
    """Inversion table for ``|Z|``, ``Z ~ Lap_Z(1/x)``: ``c_o = 1 − 2e^{−x·o}/(1 + e^{−x})``
    (``o = 1 … m``); the outcome is ``|Z|`` when below ``m`` and ``m`` when ``|Z| ≥ m`` (then
    ``|Z| − m`` is geometric with parameter ``x``)."""
    prec = 96 + int(x.denominator).bit_length()
    lo, hi = _power_brackets(x, m, prec)
    # Brackets of 2**(prec+32)·c_o, floored to 32 bits by a shift of prec.
    top, denom_lo, denom_hi = 1 << (prec + _WORD), (1 << prec) + lo[1], (1 << prec) + hi[1]
    t = _floors(
        [top - -((-(2 * h << (prec + _WORD))) // denom_lo) for h in hi[1:]],
        [top - (2 * a << (prec + _WORD)) // denom_hi for a in lo[1:]],
        prec,
        lambda i: _laplace_magnitude_real(x, i + 1).floor(_WORD),
    )
    return ThresholdTable(t, lambda v: _laplace_magnitude_real(x, v))


@lru_cache(maxsize=4)
def exp_table(steps: int, k_max: int) -> np.ndarray:
    """``floor(2**32 · e^{−i/steps})`` for ``i = 0 … (k_max + 1)·steps − 1``, as uint64.

    Entry 0 is ``2**32`` (``c = 1``: every word is below it, and no tie can occur).
    """
    prec = 128
    n = (k_max + 1) * steps
    lo, hi = _power_brackets(Fraction(1, steps), n - 1, prec)
    t = np.empty(n, dtype=np.uint64)
    t[0] = 1 << _WORD
    t[1:] = _floors(
        lo[1:], hi[1:], prec - _WORD, lambda i: Real.exp_neg(Fraction(i + 1, steps)).floor(_WORD)
    )
    return t
