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
``#{v : c_v ≤ U}`` (inversion). Every decision of a draw is an exact integer comparison.

The floors are exact. A table's floors are first estimated in float64 (vectorised over the table)
with an error interval far wider than the float error can be; a floor is taken from the floats only
where the whole interval has the same floor, which proves it. The other entries (of the order of
one per table of 1024) come from certified brackets of ``e^{−x}`` in integers: :mod:`decimal`
evaluates ``exp`` correctly rounded (Python documentation of ``Decimal.exp``), the input ``x`` is
bracketed by rounding its division down and up, and one unit in the last place is added on each
side. A floor is returned only when both ends of the bracket agree; otherwise the precision is
raised. The integer-only construction of a whole table is kept as the reference; the two give the
same thresholds bit for bit.

>>> from fractions import Fraction
>>> r = Real.exp_neg(Fraction(1))
>>> r.floor(32) == int(2**32 * 0.36787944117144233)
True
>>> Real.one_minus_exp_neg(Fraction(1, 3)).floor(8)  # floor(256·(1 − e^(−1/3)))
72
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal, localcontext
from fractions import Fraction
from functools import lru_cache

import numpy as np

from .. import kernels
from .rng import RandomSource

__all__ = ["Real", "ThresholdTable", "exp_neg_bracket", "resolve_ties"]

_WORD = 32
_MASK = (1 << _WORD) - 1


@lru_cache(maxsize=1024)
def exp_neg_bracket(x: Fraction, bits: int) -> tuple[int, int]:
    """Integers ``lo ≤ 2**bits · e^{−x} ≤ hi`` for a rational ``x ≥ 0`` (``hi − lo`` ≤ a few).
    The brackets of the last 1,024 arguments are kept (a check settled exactly asks for
    ``e^{−x}`` at its noise scale's ``x`` again and again).

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
    def product(cls, reals: Sequence[Real]) -> Real:
        """``∏ reals`` (at least one, each irrational in ``(0, 1)``): their brackets multiplied,
        rounded outwards, with guard bits for the roundings.

        >>> half_e = Real.exp_neg(Fraction(1, 2))
        >>> Real.product([half_e, half_e]).floor(20) == Real.exp_neg(Fraction(1)).floor(20)
        True
        """
        if not reals:
            raise ValueError("a product of no reals is 1, not a Real in (0, 1)")
        guard = 2 + len(reals).bit_length()

        def bracket(bits: int) -> tuple[int, int]:
            prec = bits + guard
            lo = hi = 1 << prec
            for r in reals:
                r_lo, r_hi = r._bracket(prec)
                lo = (lo * r_lo) >> prec
                hi = -((-(hi * r_hi)) >> prec)
            return lo >> guard, -((-hi) >> guard)

        return cls(bracket)

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
        t = np.ascontiguousarray(thresholds, dtype=np.uint32)
        self._thresholds = t
        self._real = real  # v (1-based) → the Real c_v, for ties only
        self._reals: dict[int, Real] = {}
        # guide[b] = #{T_v < b·2**20}: counts of the top 12 bits, accumulated.
        self._guide = np.empty(2**self._GUIDE_BITS + 1, dtype=np.int32)
        self._padded = np.empty(t.size + 1, dtype=np.int64)
        if kernels.enabled():  # the same arrays in one pass (sketchsyn.kernels._noise)
            if not kernels.noise.table_guide(t, 32 - self._GUIDE_BITS, self._guide, self._padded):
                raise ValueError("thresholds must be sorted")
            return
        if t.size and np.any(t[1:] < t[:-1]):
            raise ValueError("thresholds must be sorted")
        self._guide[0] = 0
        top = t >> np.uint32(32 - self._GUIDE_BITS)
        np.cumsum(np.bincount(top, minlength=2**self._GUIDE_BITS), out=self._guide[1:])
        self._padded[:-1] = t
        self._padded[-1] = 2**32

    @property
    def size(self) -> int:
        return int(self._thresholds.size)

    def lookup(self) -> tuple[np.ndarray, np.ndarray, int]:
        """``(guide, padded, shift)``: the arrays of :meth:`sample`'s lookup, for a compiled
        caller that draws its own words: ``#{T_v < word}`` starts at ``guide[word >> shift]``
        and steps up while ``padded`` is below the word (``padded[m] = 2**32`` stops every
        word); a word equal to ``padded`` at the index found is a tie, for :meth:`sample`."""
        return self._guide, self._padded, 32 - self._GUIDE_BITS

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
        if kernels.enabled():  # the same lookup in one compiled loop (sketchsyn.kernels._noise)
            idx = np.empty(words.size, dtype=np.int64)
            shift = 32 - self._GUIDE_BITS
            words = np.ascontiguousarray(words, dtype=np.uint32)
            if not kernels.noise.table_sample(self._guide, t, words, shift, idx):
                return idx
            w = words.astype(np.int64)  # a tie to settle (probability about 2**-32 a word)
        else:
            w = words.astype(np.int64)
            idx = self._guide[words >> np.uint32(32 - self._GUIDE_BITS)]
            # idx = #{T_v < bucket start}; step up while T[idx] < word: two vectorised steps,
            # then a binary search for the few words in crowded buckets. t[m] = 2**32 stops
            # every word.
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


# The three kinds of table: c_o = 1 − e^{−x·o} (o = 1 … m), the same truncated to [0, m)
# (o = 1 … m − 1), and the Laplace magnitude 1 − 2e^{−x·o}/(1 + e^{−x}) (o = 1 … m).
_GEOMETRIC, _TRUNCATED, _LAPLACE = "geometric", "truncated", "laplace"
_KERNEL_KINDS = {_GEOMETRIC: 0, _TRUNCATED: 1, _LAPLACE: 2}  # kernels.noise.table_floors' codes


def _real(kind: str, x: Fraction, m: int, o: int) -> Real:
    """The exact ``c_o`` of a table of ``kind``."""
    if kind == _GEOMETRIC:
        return Real.one_minus_exp_neg(x * o)
    if kind == _TRUNCATED:
        return Real.truncated_cdf(x, o, m)
    return _laplace_magnitude_real(x, o)


def _exact_entry(kind: str, x: Fraction, m: int, o: int) -> int:
    """``floor(2**32·c_o)`` of one entry, from :class:`Real` (the last resort)."""
    return _real(kind, x, m, o).floor(_WORD)


def _bracket_floors(
    kind: str, x: Fraction, m: int, orders: list[int], power: Callable[[int], tuple[int, int]]
) -> np.ndarray:
    """``floor(2**32·c_o)`` for ``o`` in ``orders`` from brackets ``power(k)`` of
    ``2**prec·e^{−x·k}`` (``prec = 96 + bits of x's denominator``): a floor is kept where both
    ends of the entry's bracket agree, else :func:`_exact_entry` gives it."""
    prec = 96 + int(x.denominator).bit_length()  # 1 − e^{−x} can be as small as x
    one = 1 << prec
    brackets = [power(o) for o in orders]
    lo = [b[0] for b in brackets]
    hi = [b[1] for b in brackets]

    def exact(i: int) -> int:
        return _exact_entry(kind, x, m, orders[i])

    if kind == _GEOMETRIC:
        return _floors([one - h for h in hi], [one - a for a in lo], prec - _WORD, exact)
    if kind == _TRUNCATED:
        m_lo, m_hi = power(m)
        den_lo, den_hi = one - m_hi, one - m_lo
        return _floors(
            [((one - h) << (2 * _WORD)) // den_hi for h in hi],
            [-((-((one - a) << (2 * _WORD))) // den_lo) for a in lo],
            _WORD,
            exact,
        )
    # Brackets of 2**(prec+32)·c_o, floored to 32 bits by a shift of prec.
    p_lo, p_hi = power(1)
    top, denom_lo, denom_hi = 1 << (prec + _WORD), one + p_lo, one + p_hi
    return _floors(
        [top - -((-(2 * h << (prec + _WORD))) // denom_lo) for h in hi],
        [top - (2 * a << (prec + _WORD)) // denom_hi for a in lo],
        prec,
        exact,
    )


def _orders(kind: str, m: int) -> list[int]:
    return list(range(1, m if kind == _TRUNCATED else m + 1))


def _exact_thresholds(kind: str, x: Fraction, m: int) -> np.ndarray:
    """The reference construction of a table's thresholds, in integers only: brackets of
    ``e^{−x·o}`` for every ``o`` from ``m`` successive products of one bracket of ``e^{−x}``."""
    prec = 96 + int(x.denominator).bit_length()
    lo, hi = _power_brackets(x, m, prec)
    return _bracket_floors(kind, x, m, _orders(kind, m), lambda k: (lo[k], hi[k]))


def _pow_bracket(q: tuple[int, int], k: int, prec: int) -> tuple[int, int]:
    """A bracket of ``2**prec·e^{−x·k}`` from a bracket ``q`` of ``2**prec·e^{−x}``, by repeated
    squaring (each product of lower ends rounded down, of upper ends up)."""
    lo = hi = 1 << prec
    b_lo, b_hi = q
    while k:
        if k & 1:
            lo, hi = (lo * b_lo) >> prec, -((-(hi * b_hi)) >> prec)
        k >>= 1
        if k:
            b_lo, b_hi = (b_lo * b_lo) >> prec, -((-(b_hi * b_hi)) >> prec)
    return lo, hi


# Float decisions (see _fast_thresholds): margins, and where the floats are trusted.
_REL_MARGIN = 2.0**-43
_ABS_MARGIN = 2.0**-30
_Y_MAX = 32.0  # x·o above this: the entry goes to the integer routines
_X_MIN, _X_MAX = Fraction(1, 2**960), Fraction(2**10)
_TWO32 = 2.0**32


def _float_estimates(kind: str, x: float, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For ``o`` in the table: ``(v, tail, y)``, ``v`` a float estimate of ``2**32·c_o`` when
    ``tail`` is false and of ``2**32·(1 − c_o)`` when it is true (whichever is at most about
    ``2**31``), ``y = fl(x·o)``. Every form is a sum, product or quotient of positive terms."""
    o = np.arange(1, m if kind == _TRUNCATED else m + 1, dtype=np.float64)
    y = x * o
    if kind == _GEOMETRIC:
        direct = -np.expm1(-y)  # 1 − e^{−x·o}
        rest = np.exp(-y)  # e^{−x·o}
    elif kind == _TRUNCATED:
        den = -math.expm1(-(x * m))
        direct = -np.expm1(-y) / den
        rest = np.exp(-y) * -np.expm1(-(x * (m - o))) / den  # (e^{−x·o} − e^{−x·m})/den
    else:
        p = math.exp(-x)
        # 1 − 2e^{−x·o}/(1 + p) = ((1 − e^{−x·o}) + p·(1 − e^{−x·(o−1)}))/(1 + p)
        direct = (-np.expm1(-y) - p * np.expm1(-(x * (o - 1.0)))) / (1.0 + p)
        rest = 2.0 * np.exp(-y) / (1.0 + p)
    tail = direct > 0.5
    return np.where(tail, rest, direct) * _TWO32, tail, y


def _fast_thresholds(kind: str, x: Fraction, m: int) -> np.ndarray:
    """The thresholds ``floor(2**32·c_o)`` of :func:`_exact_thresholds`, bit for bit, mostly
    from float64.

    Each entry is estimated in float64 (:func:`_float_estimates`) as ``v ≈ V``, ``V`` either
    ``Q = 2**32·c_o`` or ``t = 2**32·(1 − c_o)`` (then ``floor(Q) = 2**32 − ceil(t)``, an
    identity for any real ``t``). The interval ``[v·(1 − R) − A, v·(1 + R) + A]``,
    ``R = 2**-43``, ``A = 2**-30``, contains ``V``; its two ends are floored (``Q`` is known to
    lie in ``[0, 2**32)`` and ``t`` in ``(0, 2**32)``, which clips them) and the entry is kept
    only when they agree. The rest go to the integer brackets (one bracket of ``e^{−x}``,
    raised to each power by repeated squaring), and what those leave undecided to
    :class:`Real`. Floats are used only for ``2**-960 ≤ x ≤ 2**10`` and entries with
    ``fl(x·o) ≤ 32``; other entries take the integer routes.

    Why ``V`` is in the interval (``u = 2**-53``; relative errors of positive numbers):

    * ``float(x)`` is the correctly rounded quotient of two Python integers (CPython rounds
      ``int / int`` correctly at any size) and ``x`` is in the normal range: error ``≤ u``.
      ``fl(x_f·k)`` for an integer ``k ≤ 1024`` (exact in float64) adds one rounding, so
      ``y_f = x·k·(1 + η)``, ``|η| ≤ 2.1u``.
    * ``exp`` and ``expm1`` (numpy's, and the C library's through :mod:`math` for scalars) are
      assumed within ``ε = 2**-48`` (32 units in the last place) of the exact function of their
      float argument: C libraries are within one unit, numpy's vectorised versions document at
      most 4.
    * ``e^{−y_f} = e^{−x·k}·e^{−x·k·η}``: with ``x·k ≤ 32.01``, a relative change below
      ``2**-46`` (plus ``ε``). ``1 − e^{−y}`` has condition number ``y/(e^y − 1) ≤ 1``, so
      ``−expm1(−y_f)`` is within ``2.2u + ε < 2**-47.9`` (at any ``y``).
    * A product or quotient adds the relative errors of its operands and one ``u``; a sum of two
      positive numbers has at most the larger of their errors, plus ``u``; ``2**32`` and ``2``
      are exact. The worst form, the Laplace ``direct``, sums to below ``2**-44.5``, so
      ``|v − V| ≤ 2**-44.5·V`` and ``V ∈ [v/(1 + 2**-44.5), v/(1 − 2**-44.5)]``, which
      ``v·(1 ∓ R)`` contains with room for the two roundings of computing the ends (``≤ u``
      each): the margin is over 2.8 times the error bound (whose ``exp`` term alone assumes
      eight times numpy's documented error). No value underflows (``e^{−32}``
      and ``2**32·x ≥ 2**-928`` are normal), none overflows.

    A floor that the float interval cannot prove is never taken from floats; the result equals
    the exact construction entry for entry.

    >>> x = Fraction(1, 300)
    >>> bool((_fast_thresholds("laplace", x, 1024) == _exact_thresholds("laplace", x, 1024)).all())
    True
    """
    if not _X_MIN <= x <= _X_MAX:
        return _exact_thresholds(kind, x, m)
    if kernels.enabled():  # the same float stage, one entry at a time (sketchsyn.kernels._noise)
        out = np.empty(m - 1 if kind == _TRUNCATED else m, dtype=np.int64)
        code = _KERNEL_KINDS[kind]
        left = kernels.noise.table_floors(code, float(x), m, _REL_MARGIN, _ABS_MARGIN, _Y_MAX, out)
        undecided = np.flatnonzero(out < 0).tolist() if left else []
    else:
        v, tail, y = _float_estimates(kind, float(x), m)
        out, undecided = _margin_floors(v, tail, y)
    if undecided:
        prec = 96 + int(x.denominator).bit_length()
        q = exp_neg_bracket(x, prec)
        orders = [i + 1 for i in undecided]
        out[undecided] = _bracket_floors(kind, x, m, orders, lambda k: _pow_bracket(q, k, prec))
    return out.astype(np.uint32)


def _margin_floors(v: np.ndarray, tail: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """The floors the margin proves (see :func:`_fast_thresholds`) and the undecided indices."""
    lo = v * (1.0 - _REL_MARGIN) - _ABS_MARGIN
    hi = v * (1.0 + _REL_MARGIN) + _ABS_MARGIN
    # floor(Q) directly; or 2**32 − ceil(t), ceil(t) ∈ [ceil(max(lo, 1/2)), ceil(min(hi, 2**32))].
    f_lo = np.where(tail, _TWO32 - np.ceil(np.minimum(hi, _TWO32)), np.floor(np.maximum(lo, 0.0)))
    f_hi = np.where(tail, _TWO32 - np.ceil(np.maximum(lo, 0.5)), np.floor(np.minimum(hi, _MASK)))
    return f_lo.astype(np.int64), np.flatnonzero((f_lo != f_hi) | ~(y <= _Y_MAX)).tolist()


def geometric_table(x: Fraction, m: int, truncated: bool) -> ThresholdTable:
    """Inversion table for ``Y`` with ``P(Y ≥ y) = e^{−x·y}``.

    ``truncated=False``: ``c_o = 1 − e^{−x·o}`` (``o = 1 … m``); the outcome is ``Y`` when it is
    below ``m`` and ``m`` when ``Y ≥ m``. ``truncated=True``: ``Y`` conditioned on ``Y < m``,
    ``c_o = (1 − e^{−x·o})/(1 − e^{−x·m})`` (``o = 1 … m − 1``). The tables of the last 256
    parameters are kept (at most about 8 MiB).

    >>> geometric_table(Fraction(1, 3), 4, False)._thresholds.tolist()  # 2**32·(1 − e^{−o/3})
    [1217488750, 2089857560, 2714937127, 3162826208]
    """
    return _geometric_table(x.numerator, x.denominator, m, truncated)


@lru_cache(maxsize=256)
def _geometric_table(num: int, den: int, m: int, truncated: bool) -> ThresholdTable:
    """:func:`geometric_table` of ``x = num/den`` (lowest terms), kept by integers: a table
    lookup hashes two ints, not a :class:`~fractions.Fraction` (microseconds a draw)."""
    x = Fraction(num, den)
    kind = _TRUNCATED if truncated else _GEOMETRIC
    return ThresholdTable(_fast_thresholds(kind, x, m), lambda v: _real(kind, x, m, v))


def laplace_magnitude_table(x: Fraction, m: int) -> ThresholdTable:
    """Inversion table for ``|Z|``, ``Z ~ Lap_Z(1/x)``: ``c_o = 1 − 2e^{−x·o}/(1 + e^{−x})``
    (``o = 1 … m``); the outcome is ``|Z|`` when below ``m`` and ``m`` when ``|Z| ≥ m`` (then
    ``|Z| − m`` is geometric with parameter ``x``). The tables of the last 256 parameters are
    kept (at most about 8 MiB).

    >>> laplace_magnitude_table(Fraction(1), 2)._thresholds.tolist()
    [1984778077, 3445096177]
    """
    return _laplace_table(x.numerator, x.denominator, m)


@lru_cache(maxsize=256)
def _laplace_table(num: int, den: int, m: int) -> ThresholdTable:
    """:func:`laplace_magnitude_table` of ``x = num/den`` (lowest terms), kept by integers."""
    x = Fraction(num, den)
    return ThresholdTable(_fast_thresholds(_LAPLACE, x, m), lambda v: _laplace_magnitude_real(x, v))


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
