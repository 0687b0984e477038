"""Sources of randomness.

Privacy noise must come from a cryptographically secure generator: the default everywhere in
sketchsyn (``rng=None``) is the operating system's CSPRNG (``os.urandom``). For tests and
reproducible experiments a caller may pass an int seed, a :class:`numpy.random.SeedSequence` or a
:class:`numpy.random.Generator`; such noise is **not private against anyone who knows the seed**
(or the generator's state).

All samplers in the package draw through :class:`RandomSource`, which offers exactly what they need:
uniform 64-bit words, uniform integers below a bound (exact, by rejection), uniform floats (for
placing synthetic points, never for noise) and independent child streams.

>>> src = as_source(7)
>>> src.secure
False
>>> bool((src.integers(10, size=1000) < 10).all())
True
>>> as_source(None).secure
True
"""

from __future__ import annotations

import contextlib
import math
import os
from typing import Any, Union

import numpy as np

from ..errors import ParameterError

__all__ = ["RNGLike", "RandomSource", "as_source", "low_bits"]

RNGLike = Union[None, int, np.integer, np.random.SeedSequence, np.random.Generator, "RandomSource"]

_U64 = np.uint64
# Bit generators whose raw output is one uniform 64-bit word: the words numpy's
# ``integers(0, 2**64, dtype=uint64)`` returns, one per draw (tests/test_noise.py checks it).
_RAW64 = (np.random.PCG64, np.random.PCG64DXSM, np.random.SFC64, np.random.Philox)


def low_bits(raw: np.ndarray) -> np.ndarray:
    """The low bit of each random byte, as bool: :meth:`RandomSource.bits` of those bytes.

    >>> low_bits(np.array([1, 2, 255], dtype=np.uint8)).tolist()
    [True, False, True]
    """
    return (raw & np.uint8(1)).astype(bool)


class RandomSource:
    """Uniform randomness from either the OS CSPRNG or a numpy :class:`~numpy.random.Generator`.

    Build one with :func:`as_source`. ``secure`` is True only for the OS CSPRNG.
    """

    __slots__ = ("_gen", "_raw64")

    def __init__(self, generator: np.random.Generator | None = None) -> None:
        self._gen = generator
        # A bit generator whose raw outputs are its 64-bit words (not MT19937's 32-bit ones):
        # ``random_raw`` gives the words of ``integers(0, 2**64, dtype=uint64)`` without its
        # fixed cost of several microseconds a call.
        bits = None if generator is None else generator.bit_generator
        self._raw64 = bits if type(bits) in _RAW64 else None

    @property
    def secure(self) -> bool:
        """True when the words come from the operating system's CSPRNG."""
        return self._gen is None

    def uint64(self, size: int) -> np.ndarray:
        """``size`` independent uniform 64-bit words."""
        size = int(size)
        if self._gen is None:
            return np.frombuffer(os.urandom(8 * size), dtype="<u8").astype(_U64, copy=True)
        if self._raw64 is not None:
            return self._raw64.random_raw(size)
        return self._gen.integers(0, 2**64, size=size, dtype=_U64, endpoint=False)

    def word_source(self) -> Any:
        """The seeded bit generator, for a compiled loop (:mod:`sketchsyn.kernels`) that draws
        through its C functions the words :meth:`uint32`, :meth:`bytes` (four bytes a 32-bit
        word, low byte first) and :meth:`uint64` would return, in the same order; None for the
        OS CSPRNG and for bit generators whose :meth:`uint64` is not one raw word a draw
        (MT19937). The caller must hold the source alone while it draws (numpy's lock is not
        taken: hold :attr:`lock`, as numpy's own calls do, when the generator may be shared).

        >>> as_source(None).word_source() is None, as_source(1).word_source() is not None
        (True, True)
        """
        return self._raw64

    @property
    def lock(self) -> Any:
        """The seeded bit generator's lock (the one numpy's calls take), or a context that does
        nothing for the OS CSPRNG.

        >>> with as_source(1).lock:
        ...     pass
        """
        if self._gen is None:
            return contextlib.nullcontext()
        return self._gen.bit_generator.lock

    def uint32(self, size: int) -> np.ndarray:
        """``size`` independent uniform 32-bit words."""
        size = int(size)
        if self._gen is None:
            return np.frombuffer(os.urandom(4 * size), dtype="<u4").astype(np.uint32, copy=True)
        return self._gen.integers(0, 2**32, size=size, dtype=np.uint32, endpoint=False)

    def bits(self, size: int) -> np.ndarray:
        """``size`` independent fair bits (bool): the low bits of :meth:`coins`."""
        return low_bits(self.coins(size))

    def coins(self, size: int) -> np.ndarray:
        """``size`` independent fair coins, as uint8 whose low bits are the coins (a writable
        array of its own): from a seeded generator, :meth:`bytes` (a byte a coin, as earlier
        releases drew them, so seeded outputs stay the same); from the OS CSPRNG, eight coins
        a byte (its bytes are the cost of a private run).

        >>> c = as_source(None).coins(10)
        >>> c.shape, c.dtype.name, bool((c <= 1).all())
        ((10,), 'uint8', True)
        """
        size = int(size)
        if self._gen is None:
            packed = np.frombuffer(os.urandom((size + 7) // 8), dtype=np.uint8)
            return np.unpackbits(packed, count=size)
        return self.bytes(size)

    def bytes(self, size: int) -> np.ndarray:
        """``size`` independent uniform bytes (uint8, a writable array of its own)."""
        size = int(size)
        if self._gen is None:
            return np.frombuffer(os.urandom(size), dtype=np.uint8).copy()
        return self._gen.integers(0, 256, size=size, dtype=np.uint8)

    def integers(self, high: int | np.ndarray, size: int | None = None) -> np.ndarray:
        """Exactly uniform integers in ``[0, high)`` as int64 (``high`` ≤ 2**62, scalar or array).

        Uses rejection on 64-bit words (Lemire-free, plain modulo with a rejection zone), so the
        result is exactly uniform, not approximately.
        """
        high_arr = np.asarray(high, dtype=np.int64)
        if high_arr.size and (high_arr.min() < 1 or high_arr.max() > 2**62):
            raise ParameterError(
                f"The 'high' parameter of RandomSource.integers must be in [1, 2**62]. "
                f"Got {high!r} instead."
            )
        if size is None:
            shape = high_arr.shape
        else:
            shape = (int(size),)
        if high_arr.size and high_arr.max() <= 2**32:
            return self._integers32(high_arr, shape)
        h = np.broadcast_to(high_arr.astype(_U64), shape).ravel()
        n = h.size
        # Words w <= limit = 2**64 − 1 − (2**64 mod h) are accepted, so w % h is exactly uniform.
        top = _U64(np.iinfo(_U64).max)
        limit = top - (top % h + _U64(1)) % h
        words = self.uint64(n)
        out = words % h
        bad = np.flatnonzero(words > limit)
        while bad.size:  # rare: probability < h / 2**64 per draw
            w = self.uint64(bad.size)
            ok = w <= limit[bad]
            out[bad[ok]] = w[ok] % h[bad[ok]]
            bad = bad[~ok]
        return out.astype(np.int64).reshape(shape)

    def _integers32(self, high_arr: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        """``integers`` for bounds ≤ 2**32 on 32-bit words, by Lemire's multiply-shift method.

        ``m = w·h`` for a uniform 32-bit ``w``; ``m >> 32`` is the result unless the low half of
        ``m`` is below ``(2**32 − h) mod h``, in which case ``w`` is redrawn. This is exactly
        uniform (Lemire 2019, "Fast random integer generation in an interval").
        """
        n = math.prod(shape)
        scalar = high_arr.size == 1  # one bound for every draw
        h = (
            _U64(int(high_arr.reshape(-1)[0]))
            if scalar
            else (np.broadcast_to(high_arr.astype(_U64), shape).ravel())
        )
        mask = _U64(0xFFFFFFFF)
        m = self.uint32(n).astype(_U64) * h
        low = m & mask
        out = m >> _U64(32)
        cand = np.flatnonzero(low < h)  # the rejection zone lies below h
        while cand.size:
            hc = h if scalar else h[cand]
            threshold = (_U64(2**32) - hc) % hc
            bad = cand[low[cand] < threshold]
            if not bad.size:
                break
            hb = h if scalar else h[bad]
            m2 = self.uint32(bad.size).astype(_U64) * hb
            low[bad] = m2 & mask
            out[bad] = m2 >> _U64(32)
            cand = bad[low[bad] < hb]
        return out.astype(np.int64).reshape(shape)

    def random(self, size: int | tuple[int, ...]) -> np.ndarray:
        """Uniform float64 in ``[0, 1)`` with 53 random bits (for placing points, not for noise)."""
        shape = (size,) if isinstance(size, (int, np.integer)) else tuple(size)
        n = math.prod(shape)
        words = self.uint64(n) >> _U64(11)
        return (words.astype(np.float64) * (1.0 / 2**53)).reshape(shape)

    def spawn(self, n: int) -> list[RandomSource]:
        """``n`` independent child sources (so two noise sources never share a stream)."""
        if self._gen is None:
            return [RandomSource(None) for _ in range(n)]
        return [RandomSource(g) for g in self._gen.spawn(n)]

    def __repr__(self) -> str:
        return "RandomSource(os.urandom)" if self._gen is None else f"RandomSource({self._gen!r})"


def as_source(rng: RNGLike = None) -> RandomSource:
    """Turn an ``rng=`` argument into a :class:`RandomSource`.

    ``None`` → OS CSPRNG (private); an int or ``SeedSequence`` → a fresh PCG64 generator;
    a ``Generator`` → used as it is (shared, so its state advances); a ``RandomSource`` → itself.
    Seeded sources are for tests and reproducible experiments only: whoever knows the seed can
    subtract the noise.
    """
    if rng is None:
        return RandomSource(None)
    if isinstance(rng, RandomSource):
        return rng
    if isinstance(rng, np.random.Generator):
        return RandomSource(rng)
    if isinstance(rng, np.random.SeedSequence):
        return RandomSource(np.random.Generator(np.random.PCG64(rng)))
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool) and int(rng) >= 0:
        return RandomSource(np.random.Generator(np.random.PCG64(int(rng))))
    raise ParameterError(
        "The 'rng' parameter must be None (OS CSPRNG), a non-negative int seed, a "
        f"numpy SeedSequence or a numpy Generator. Got {rng!r} instead."
    )
