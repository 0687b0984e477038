"""Exact integer noise: the discrete Laplace and the discrete Gaussian, vectorised.

The discrete Laplace draws its magnitude by inversion: one uniform 32-bit word is compared with
the binary expansions of ``P(|Z| < o) = 1 − 2p^o/(1 + p)``, ``p = e^{−1/scale}``
(:mod:`sketchsyn.privacy.exactexp` computes those digits, proven by float64 error bounds or by
certified integer brackets, and settles the rare word that equals a threshold by drawing more
words), then takes a fair sign. Wide magnitudes are
drawn digit by digit in base ``m ≤ 1024``: a geometric's law factorises over its digits. The
discrete Gaussian is Canonne, Kamath and Steinke's rejection from a discrete Laplace (*The
Discrete Gaussian for Differential Privacy*, NeurIPS 2020, Algorithm 3); its acceptance
``e^{−γ}`` is split as ``e^{−(k + j/256)}`` (one word against a table) times ``e^{−δ}``,
``δ < 1/256``, by their Bernoulli(exp(−γ)) loop in integers. No floating-point step decides an
output value: every decision is an exact comparison of uniform integers with integers derived
from the exact rational parameter. All draws are processed together as numpy arrays; Python
loops run over rejection rounds and over the (probability ``2**-32``) ties only.

A float parameter is taken as its exact rational value (``Fraction(0.1)`` is
``3602879701896397/36028797018963968``), with no rounding: thresholds are the exact floors for that
rational (floats only estimate them, and a floor is kept only where a proven error bound settles
it; Python integers of whatever size the rational needs settle the rest), and the discrete
Gaussian's ``Bernoulli(r/den)`` steps compare a uniform word with the first 32-bit digit of
``r/den`` (later digits on a tie), so denominators of any size stay on the vectorised path.

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
from functools import lru_cache
from typing import Any

import numpy as np

from .. import kernels
from ..errors import ParameterError
from ..kernels import oswords
from .exactexp import (
    Real,
    ThresholdTable,
    _geometric_table,
    _laplace_table,
    exp_table,
    resolve_ties,
)
from .memo import cached
from .rng import RandomSource, RNGLike, as_source, low_bits

__all__ = [
    "discrete_gaussian",
    "discrete_gaussian_pmf",
    "discrete_gaussian_variance",
    "discrete_laplace",
    "discrete_laplace_pmf",
    "discrete_laplace_variance",
    "exact_rational",
]

_MAX_SCALE = 2**30  # wider noise would carry no information; keeps the geometric digits few


@cached  # a noise scale is converted once, not at every draw
def exact_rational(value: object, name: str, owner: str) -> Fraction:
    """``value`` (a finite real in ``(0, 2**30]``) as its exact Fraction, with no rounding.

    >>> exact_rational(0.5, "scale", "f"), exact_rational(3, "scale", "f")
    (Fraction(1, 2), Fraction(3, 1))
    >>> exact_rational(0.1, "scale", "f") == Fraction(3602879701896397, 36028797018963968)
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


# ----------------------------------------------------------------------------- geometric
# Inversion tables have at most _M_MAX entries; a table covers m values of the geometric with
# x·m ≥ _TAIL when it can (the rest, probability e^{−x·m}, is drawn again: memorylessness).
_M_MAX = 1024
_WORD = 32
_TAIL = 8
# Gaussian acceptance: e^{−γ} = e^{−(k + j/_STEPS)} (one table lookup) · e^{−δ}, δ < 1/_STEPS.
_STEPS = 256
_K_MAX = 23  # e^{−23} < 2**-32: rows k ≥ 23 of the table are all zero thresholds


@lru_cache(maxsize=4096)
def _table_size(x: Fraction) -> int:
    """The least power of two ``m ≤ _M_MAX`` with ``x·m ≥ _TAIL`` (else ``_M_MAX``), in
    integers: ``x·m ≥ 8`` is ``m·num ≥ 8·den``, i.e. ``m ≥ ceil(8·den/num)``.

    >>> _table_size(Fraction(1, 3)), _table_size(Fraction(8)), _table_size(Fraction(1, 10**6))
    (32, 1, 1024)
    """
    return _size_for(x.numerator, x.denominator)


def _size_for(num: int, den: int) -> int:
    """:func:`_table_size` of ``x = num/den`` in integers: ``x·m ≥ 8`` is ``m·num ≥ 8·den``,
    i.e. ``m ≥ ceil(8·den/num)``."""
    need = -((-_TAIL * den) // num)  # ceil(8/x)
    return min(1 << max(need - 1, 0).bit_length(), _M_MAX)


def _geometric(x: Fraction, n: int, src: RandomSource) -> np.ndarray:
    """``n`` exact draws of ``Y ≥ 0`` with ``P(Y ≥ y) = e^{−x·y}`` (``x > 0`` rational).

    With a table of ``m`` values: if ``x·m ≥ 8``, one word gives ``Y`` when ``Y < m`` and the
    event ``Y ≥ m`` otherwise, after which ``Y − m`` has the same law and is drawn again. Else
    (small ``x``, wide geometric) ``Y = R + m·Z`` with ``R`` the geometric truncated to
    ``[0, m)`` and ``Z`` geometric with parameter ``x·m``, independent: the law of ``Y``
    factorises over its base-``m`` digits.
    """
    return _geometric_q(x.numerator, x.denominator, n, src)


def _times(num: int, den: int, m: int) -> tuple[int, int]:
    """``(num/den)·m`` in lowest terms (``num/den`` in lowest terms, ``m`` a power of two).

    >>> _times(3, 8, 4)
    (3, 2)
    """
    g = math.gcd(m, den)
    return num * (m // g), den // g


def _geometric_q(num: int, den: int, n: int, src: RandomSource) -> np.ndarray:
    """:func:`_geometric` of ``x = num/den`` (lowest terms), in integers (no Fraction
    arithmetic or hashing: a draw of a few values costs microseconds, not tens)."""
    if n == 1:
        return np.array([_geometric_one_q(num, den, src)], dtype=np.int64)
    out = np.zeros(n, dtype=np.int64)
    if n == 0:
        return out
    m = _size_for(num, den)
    if num * m >= _TAIL * den:  # x·m ≥ 8
        table = _geometric_table(num, den, m, False)
        todo = np.arange(n)
        while todo.size:
            o = table.sample(src.uint32(todo.size), src)
            out[todo] += o
            todo = todo[o == m]
        return out
    low = _geometric_table(num, den, m, True).sample(src.uint32(n), src)
    out = _geometric_q(*_times(num, den, m), n, src)
    out *= m
    out += low
    return out


def _geometric_one(x: Fraction, src: RandomSource) -> int:
    """One draw of :func:`_geometric`: the same words in the same order, in plain Python."""
    return _geometric_one_q(x.numerator, x.denominator, src)


def _geometric_one_q(num: int, den: int, src: RandomSource) -> int:
    """:func:`_geometric_one` of ``x = num/den`` (lowest terms), in integers."""
    m = _size_for(num, den)
    if num * m >= _TAIL * den:
        table = _geometric_table(num, den, m, False)
        total = 0
        while True:
            o = table.sample_one(int(src.uint32(1)[0]), src)
            total += o
            if o != m:
                return total
    low = _geometric_table(num, den, m, True).sample_one(int(src.uint32(1)[0]), src)
    return _geometric_one_q(*_times(num, den, m), src) * m + low


# ----------------------------------------------------------------------------- samplers
def _laplace_core(scale: Fraction, n: int, src: RandomSource) -> np.ndarray:
    """``Lap_Z(scale)``: the magnitude by inversion of ``P(|Z| < o) = 1 − 2p^o/(1 + p)``
    (``p = e^{−1/scale}``; beyond the table, ``|Z| − m`` is geometric), then a fair sign (0 has
    no sign: its probability ``(1 − p)/(1 + p)`` is already the whole mass at 0)."""
    # x = 1/scale = den/num in lowest terms; the table is found by integers (no Fraction
    # arithmetic or hashing on this path: microseconds a call, for draws of a few values).
    num, den = scale.numerator, scale.denominator
    m = _size_for(den, num)
    table = _laplace_table(den, num, m)
    if n == 1:  # the same draws in the same order, without the vectorised overhead
        one = table.sample_one(int(src.uint32(1)[0]), src)
        if one == m:
            one += _geometric_one_q(den, num, src)
        return np.array([-one if src.bits(1)[0] else one], dtype=np.int64)
    wide = den * m < _TAIL * num  # x·m < 8: magnitudes often beyond the table
    if kernels.enabled():
        if getattr(src, "secure", False):  # the OS CSPRNG: its words from this thread's buffer
            if _PRIVATE_DRAWS[0] <= n < _PRIVATE_DRAWS[2 if wide else 1]:
                os_words = oswords.word_source()  # (None without a CSPRNG the loop can call)
                if os_words is not None:  # the same loop, the law of the numpy path
                    return _laplace_compiled(scale, n, src, os_words, wide)
        elif _COMPILED_DRAWS[0] <= n < _COMPILED_DRAWS[2 if wide else 1]:
            bits = src.word_source()
            if bits is not None:  # a seeded source: the same words, drawn in one compiled loop
                return _laplace_compiled(scale, n, src, bits, wide)
    return _laplace_rest(table, m, den, num, src.uint32(n), src)


# Seeded draws of at least [0] and fewer than [1] values ([2] for a wide table) take the
# compiled loop (kernels.noise.lap_draw; with the geometric's tables when the magnitude table is
# wide): it calls the generator once a word, which costs less than numpy's calls for a few
# thousand values, and more beyond (`python benchmarks/bench_noise.py --compiled-draws`).
_COMPILED_DRAWS = (64, 2048, 512)
# Private draws (the OS CSPRNG) of at least [0] and fewer than [1] values ([2] for a wide table)
# take the same loop, reading this thread's buffer of the CSPRNG's words instead of calling
# os.urandom twice: cheaper for a few hundred values, dearer for thousands
# (`python benchmarks/bench_noise.py --compiled-draws`, its second table).
_PRIVATE_DRAWS = (2, 1024, 512)
#: The exact samplers' tables look a word up by its top bits: ``word >> LOOKUP_SHIFT``
#: (``ThresholdTable.lookup``), for every table.
LOOKUP_SHIFT = 32 - ThresholdTable._GUIDE_BITS


def _laplace_compiled(
    scale: Fraction, n: int, src: RandomSource, bits: Any, geometric: bool
) -> np.ndarray:
    """:func:`_laplace_core`'s draws by :func:`sketchsyn.kernels._noise.lap_draw`, which draws
    the same words from ``src``'s bit generator ``bits`` in the same order (for the OS CSPRNG,
    ``bits`` is this thread's buffer of its words, :func:`sketchsyn.kernels.oswords.word_source`);
    a draw it hands back is finished from its words by :func:`laplace_replay` (its further words
    from ``src``)."""
    words = np.empty(n + n // 2 + 64, dtype=np.uint32)
    z = np.empty(n, dtype=np.int64)
    scratch = np.empty((4, n // 4 + 64), dtype=np.int64)
    plan = laplace_plan(scale, geometric)
    with src.lock:  # a caller's generator may be shared between threads, as numpy allows
        got = kernels.noise.lap_draw(bits, n, plan, LOOKUP_SHIFT, words, z, scratch)
    if got >= 0:
        return z
    return laplace_replay(scale, n, words[: -got - 1], src)


def _laplace_rest(
    table: ThresholdTable, m: int, x_num: int, x_den: int, words: np.ndarray, src: RandomSource
) -> np.ndarray:
    """:func:`_laplace_core` after its magnitude words ``words`` (``x = x_num/x_den``): the
    lookup, the geometric beyond the table, the signs."""
    n = words.size
    z = table.sample(words, src)
    over = np.flatnonzero(z == m)
    if over.size:
        z[over] += _geometric_q(x_num, x_den, over.size, src)
    raw = src.coins(n)  # the signs: their low bits (RandomSource.bits)
    if kernels.enabled():
        kernels.noise.table_signs(z, raw)
    else:
        np.negative(z, out=z, where=low_bits(raw))
    return z


# The kinds of laplace_plan: no geometric tables given; beyond the table, a geometric of one
# table (x·m ≥ 8); of a truncated table and a second geometric (x·m < 8 ≤ x·m·m₂); deeper.
PLAN_NONE, PLAN_PLAIN, PLAN_WIDE, PLAN_DEEP = 0, 1, 2, 3
_NO_GUIDE = np.zeros(1, dtype=np.int32)
_NO_PADDED = np.full(1, 2**32, dtype=np.int64)


def laplace_plan(scale: Fraction, geometric: bool = False) -> tuple[Any, ...]:
    """The lookup arrays of ``Lap_Z(scale)``'s exact sampler, for a compiled loop that draws the
    words itself (:func:`sketchsyn.kernels._noise.lap_draw`): ``(guide, padded, m, kind,
    guide_a, padded_a, guide_b, padded_b, m_b)``. The magnitude table's arrays
    (:meth:`~sketchsyn.privacy.exactexp.ThresholdTable.lookup`, the same ``shift`` for every
    table); with ``geometric``, those of the geometric beyond it: ``kind`` ``PLAN_PLAIN`` (table
    ``a``, ``m`` values), ``PLAN_WIDE`` (``a`` the truncated table, ``b`` the geometric of
    parameter ``x·m``, ``m_b`` values), ``PLAN_DEEP`` (deeper: not given); ``PLAN_NONE``
    without. A draw the loop cannot finish is finished by :func:`laplace_replay`.

    >>> plan = laplace_plan(Fraction(3), geometric=True)
    >>> plan[2], plan[3] == PLAN_PLAIN, int(plan[1][plan[2]])
    (32, True, 4294967296)
    """
    num, den = scale.numerator, scale.denominator  # x = den/num
    m = _size_for(den, num)
    guide, padded, _ = _laplace_table(den, num, m).lookup()
    none = (_NO_GUIDE, _NO_PADDED)
    if not geometric:
        return (guide, padded, m, PLAN_NONE, *none, *none, 0)
    if den * m >= _TAIL * num:  # x·m ≥ 8
        plain = _geometric_table(den, num, m, False).lookup()[:2]
        return (guide, padded, m, PLAN_PLAIN, *plain, *none, 0)
    a = _geometric_table(den, num, m, True).lookup()[:2]
    n2, d2 = _times(den, num, m)
    m2 = _size_for(n2, d2)
    if n2 * m2 < _TAIL * d2:
        return (guide, padded, m, PLAN_DEEP, *a, *none, 0)
    return (guide, padded, m, PLAN_WIDE, *a, *_geometric_table(n2, d2, m2, False).lookup()[:2], m2)


class _Replay:
    """A :class:`~sketchsyn.privacy.rng.RandomSource` whose next 32-bit words are ``words``
    (already drawn from ``src``, in whole calls of :meth:`uint32`), then ``src`` itself."""

    def __init__(self, src: RandomSource, words: np.ndarray) -> None:
        self._src, self._words, self._at = src, words, 0

    @property
    def left(self) -> int:
        return int(self._words.size - self._at)

    def uint32(self, size: int) -> np.ndarray:
        if not self.left:
            return self._src.uint32(size)
        if size > self.left:
            raise AssertionError("a replayed draw takes its words in other calls")
        out = self._words[self._at : self._at + size].astype(np.uint32)
        self._at += size
        return out

    def bytes(self, size: int) -> np.ndarray:
        if self.left:
            raise AssertionError("a replayed draw's words were not all used")
        return self._src.bytes(size)

    def coins(self, size: int) -> np.ndarray:
        if self.left:
            raise AssertionError("a replayed draw's words were not all used")
        return self._src.coins(size)

    def bits(self, size: int) -> np.ndarray:
        return low_bits(self.coins(size))

    def word_source(self) -> None:
        """None: a replayed draw takes numpy's path (its first words are given)."""
        return None


def laplace_replay(scale: Fraction, n: int, words: np.ndarray, src: RandomSource) -> np.ndarray:
    """``n`` draws of ``Lap_Z(scale)`` (:func:`_laplace_core`) whose first 32-bit words
    ``words`` were already drawn from ``src`` (by a compiled loop that stopped after a whole
    call's words: a tie, or a geometric it has no table for): the values the draw has with
    those words, the rest drawn from ``src`` in the same order."""
    replay = _Replay(src, words)
    out = _laplace_core(scale, n, replay)  # type: ignore[arg-type]
    if replay.left:
        raise AssertionError("a replayed draw's words were not all used")
    return out


def laplace_scales(scales: list[Fraction], src: RandomSource) -> list[int]:
    """One exact ``Lap_Z(scale)`` draw for each of ``scales`` (exact rationals in
    ``(0, 2**30]``, already checked): the words of all magnitudes and signs are drawn in two
    calls, then each magnitude is read from its own table in plain Python. For many draws at
    *different* scales (a counter crossing many time levels), where one call per scale would cost
    tens of microseconds each."""
    k = len(scales)
    words = src.uint32(k).tolist()
    signs = src.bits(k).tolist()
    out = []
    for scale, word, negative in zip(scales, words, signs, strict=True):
        num, den = scale.numerator, scale.denominator  # x = 1/scale = den/num
        m = _size_for(den, num)
        one = _laplace_table(den, num, m).sample_one(word, src)
        if one == m:
            one += _geometric_one_q(den, num, src)
        out.append(-one if negative else one)
    return out


# Below this many values, laplace_sum draws one value at a time in plain Python.
_SCALAR_DRAWS = 64


def laplace_sum(scales: list[Fraction], size: int, src: RandomSource) -> np.ndarray:
    """``size`` independent sums ``Σ_i Lap_Z(scales[i])`` (exact rationals, already checked),
    as int64: the noise of many time levels passed at once, each at its own scale. Few values
    are drawn one at a time (:func:`laplace_scales`, microseconds each); many, one vectorised
    call per scale."""
    out = np.zeros(size, dtype=np.int64)
    if not scales:
        return out
    if len(scales) * size <= _SCALAR_DRAWS:
        for i in range(size):
            out[i] = sum(laplace_scales(scales, src))
    else:
        for scale in scales:
            out += _laplace_core(scale, size, src)
    return out


def discrete_laplace(scale: float, size: int | tuple[int, ...], rng: RNGLike = None) -> np.ndarray:
    """Integer Laplace ``Lap_Z(scale)``: ``P(z) ∝ exp(−|z|/scale)`` on ℤ, exactly.

    The magnitude is an exact geometric drawn by inversion against the binary expansions of
    ``1 − e^{−o/scale}`` (:mod:`sketchsyn.privacy.exactexp`: one 32-bit word per draw in most cases,
    a longer comparison only on a tie), the sign is a fair bit, and ``−0`` is rejected.

    Parameters
    ----------
    scale : float, int or Fraction
        In ``(0, 2**30]``; taken as its exact rational value (``0.1`` is ``Fraction(0.1)``).
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
    n = math.prod(shape)
    return _laplace_core(frac, n, as_source(rng)).reshape(shape)


def discrete_gaussian(
    sigma2: float, size: int | tuple[int, ...], rng: RNGLike = None
) -> np.ndarray:
    """Discrete Gaussian ``N_Z(0, sigma2)``: ``P(z) ∝ exp(−z²/(2·sigma2))`` on ℤ, exactly.

    CKS Algorithm 3: with ``t = floor(sigma) + 1``, draw ``Y ~ Lap_Z(t)`` and accept it with
    probability ``exp(−γ)``, ``γ = (|Y| − sigma2/t)² / (2·sigma2)``. The acceptance is exact:
    ``γ = k + j/256 + δ`` in integers (``δ < 1/256``), ``Bernoulli(e^{−(k + j/256)})`` is one
    word against a table of binary expansions, and ``Bernoulli(e^{−δ})`` is CKS's
    ``Bernoulli(exp(−γ))`` loop, which with ``δ`` this small rarely goes past its first step.

    Parameters
    ----------
    sigma2 : float, int or Fraction
        The variance parameter, in ``(0, 2**30]``, taken as its exact rational value.
    size : int or tuple of ints
    rng : None, int, SeedSequence, Generator or RandomSource

    Examples
    --------
    >>> discrete_gaussian(0.5, 4, rng=3).dtype
    dtype('int64')
    """
    s2 = exact_rational(sigma2, "sigma2", "discrete_gaussian")
    shape = _shape(size, "discrete_gaussian")
    n = math.prod(shape)
    src = as_source(rng)
    a, b = s2.numerator, s2.denominator  # sigma2 = a/b exactly
    t = math.isqrt(a // b) + 1  # floor(sqrt(x)) == isqrt(floor(x)): floor(sigma) + 1, exactly
    q = b * t
    den = 2 * a * b * t * t  # γ = (|y|·q − a)² / den
    table = exp_table(_STEPS, _K_MAX)
    out = np.empty(n, dtype=np.int64)
    todo = np.arange(n)
    while todo.size:
        y = _laplace_core(Fraction(t), todo.size, src)
        values, inverse = _distinct(np.abs(y))
        # Per distinct |y|, in Python integers: γ·_STEPS = (k·_STEPS + j) + r/den.
        index = np.empty(values.size, dtype=np.int64)
        rests: list[int] = []
        for i, v in enumerate(values.tolist()):
            whole, rem = divmod((v * q - a) ** 2 * _STEPS, den)
            index[i] = min(whole, _K_MAX * _STEPS)  # row _K_MAX: thresholds 0 (e^{−23} < 2**-32)
            rests.append(rem)
        words = src.uint32(todo.size)
        idx = index[inverse]
        thresholds = table[idx]
        ok = words < thresholds
        for e in np.flatnonzero(words == thresholds).tolist():
            # A tie: compare more bits of e^{−(k + j/_STEPS)} (k may exceed the table's rows).
            v = int(values[inverse[e]])
            whole = ((v * q - a) ** 2 * _STEPS) // den
            ok[e] = resolve_ties([Real.exp_neg(Fraction(whole, _STEPS))], src) == 0
        # Bernoulli(e^{−δ}), δ = r/(den·_STEPS): CKS's loop (K = 1; while Bern(δ/K): K += 1;
        # accept when K is odd). Bern(δ/K) = Bern(1/(_STEPS·K)) ∧ Bern(r/den), since r < den.
        cand = np.flatnonzero(ok)
        first = cand[src.integers(_STEPS, size=cand.size) == 0]
        if first.size:
            ok[first] = _bernoulli_exp_delta(inverse[first], rests, den, src, _STEPS)
        out[todo[ok]] = y[ok]
        todo = todo[~ok]
    return out.reshape(shape)


def _distinct(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct non-negative ints of ``values`` and each element's index among them."""
    if values.size == 0:
        return values, np.zeros(0, dtype=np.intp)
    top = int(values.max())
    if top <= 4 * values.size + 1024:
        present = np.flatnonzero(np.bincount(values, minlength=top + 1))
        lookup = np.empty(top + 1, dtype=np.intp)
        lookup[present] = np.arange(present.size)
        return present, lookup[values]
    uniq, inverse = np.unique(values, return_inverse=True)
    return uniq, inverse.ravel()


def _bernoulli_exp_delta(
    which: np.ndarray, rests: list[int], den: int, src: RandomSource, steps: int = _STEPS
) -> np.ndarray:
    """The rest of CKS's Bernoulli(e^{−δ}) loop for each ``i`` in ``which``, with
    ``δ = rests[i]/(den·steps)``, given that the first round's ``Bern(1/steps)`` factor already
    succeeded. With ``steps = 1`` that factor is certain and this is Bernoulli(e^{−r/den}).

    ``rests`` are Python integers below ``den`` of any size; ``which`` indexes them (int array).
    """
    thresholds = np.array([(r << _WORD) // den for r in rests], dtype=np.int64)
    k = np.ones(which.size, dtype=np.int64)
    alive = np.flatnonzero(_bernoulli_ratio(which, rests, thresholds, den, src))
    step = 1
    while alive.size:
        step += 1
        k[alive] = step
        alive = alive[src.integers(steps * step, size=alive.size) == 0]
        alive = alive[_bernoulli_ratio(which[alive], rests, thresholds, den, src)]
    return (k % 2) == 1


def _bernoulli_ratio(
    which: np.ndarray, rests: list[int], thresholds: np.ndarray, den: int, src: RandomSource
) -> np.ndarray:
    """Exact Bernoulli(``rests[i]/den``) for each ``i`` in ``which``: a uniform real ``U`` is
    compared with ``r/den`` one 32-bit word at a time (``thresholds[i]`` is the first digit,
    ``floor(2**32·r/den)``); only a word equal to the digit needs the next one."""
    words = src.uint32(which.size).astype(np.int64)
    digits = thresholds[which]
    out = words < digits
    for e in np.flatnonzero(words == digits).tolist():
        out[e] = resolve_ties([Real.ratio(rests[int(which[e])], den)], src) == 0
    return out


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
