"""Optional compiled kernel of the exact noise samplers' table lookup (the ``fast`` extra).

:meth:`sketchsyn.privacy.exactexp.ThresholdTable.sample` turns each uniform word into
``#{v : T_v < word}`` with a guide table and a few vectorised steps (about a dozen array passes
and a binary search for crowded buckets); :func:`table_sample` does the same lookup in one loop.
Both give the same index for every word, and the words equal to a threshold (ties, probability
about ``2**-32`` each) are settled afterwards by the same exact routine, so a draw is the same
on both paths. Compiled with the other kernels by :mod:`sketchsyn.accel`.

>>> import numpy as np
>>> guide = np.array([0, 1, 2], dtype=np.int32)       # 1-bit guide: T_1 < 2**31 ≤ T_2
>>> padded = np.array([5, 2**31 + 7, 2**32], dtype=np.int64)
>>> out = np.empty(3, dtype=np.int64)
>>> table_sample(guide, padded, np.array([4, 6, 2**31 + 7], dtype=np.uint32), 31, out), out.tolist()
(1, [0, 1, 1])
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import accel

__all__ = [
    "KERNELS",
    "lap_draw",
    "table_floors",
    "table_guide",
    "table_sample",
    "table_signs",
]

#: The kernels in the order they are compiled.
KERNELS = (
    "_lookup",
    "table_sample",
    "table_floors",
    "table_guide",
    "table_signs",
    "_geo_plain",
    "lap_draw",
)

#: ``table_floors``' codes of the three tables of :mod:`sketchsyn.privacy.exactexp`.
GEOMETRIC, TRUNCATED, LAPLACE = 0, 1, 2


def table_sample(guide: Any, padded: Any, words: Any, shift: Any, out: Any) -> int:
    """``out[i] = #{v : T_v < words[i]}`` for the sorted thresholds ``padded`` (``2**32`` last,
    which stops every word) with ``guide[b] = #{T_v < b·2**shift}``; returns the number of
    words equal to a threshold (ties, left to the caller)."""
    ties = 0
    for i in range(words.size):
        w = np.int64(words[i])
        idx = _lookup(guide, padded, shift, w)
        out[i] = idx
        if padded[idx] == w:
            ties += 1
    return ties


def table_floors(kind: Any, x: Any, m: Any, rel: Any, absolute: Any, y_max: Any, out: Any) -> int:
    """:func:`sketchsyn.privacy.exactexp._fast_thresholds`' float stage, one entry at a time:
    ``out[o − 1]`` = the floor of ``2**32·c_o`` where the margin proves it, −1 where it does not
    (or where ``x·o > y_max``); returns the number of −1. The same float forms as
    :func:`~sketchsyn.privacy.exactexp._float_estimates` (the C library's ``exp`` and ``expm1``,
    within the error the margin assumes), so a floor kept here is the exact one.

    >>> out = np.empty(4, dtype=np.int64)
    >>> table_floors(GEOMETRIC, 1 / 3, 4, 2.0**-40, 2.0**-30, 32.0, out), out.tolist()
    (0, [1217488750, 2089857560, 2714937127, 3162826208])
    """
    two32 = 4294967296.0
    mask = 4294967295.0
    undecided = 0
    p = math.exp(-x)
    den = -math.expm1(-(x * m))
    for i in range(out.size):
        o = float(i + 1)
        y = x * o
        if kind == GEOMETRIC:
            direct = -math.expm1(-y)
            rest = math.exp(-y)
        elif kind == TRUNCATED:
            direct = -math.expm1(-y) / den
            rest = math.exp(-y) * -math.expm1(-(x * (m - o))) / den
        else:
            direct = (-math.expm1(-y) - p * math.expm1(-(x * (o - 1.0)))) / (1.0 + p)
            rest = 2.0 * math.exp(-y) / (1.0 + p)
        tail = direct > 0.5
        v = (rest if tail else direct) * two32
        lo = v * (1.0 - rel) - absolute
        hi = v * (1.0 + rel) + absolute
        if tail:
            f_lo = two32 - math.ceil(min(hi, two32))
            f_hi = two32 - math.ceil(max(lo, 0.5))
        else:
            f_lo = math.floor(max(lo, 0.0))
            f_hi = math.floor(min(hi, mask))
        if f_lo != f_hi or not y <= y_max:
            out[i] = -1
            undecided += 1
        else:
            out[i] = np.int64(f_lo)
    return undecided


def table_guide(t: Any, shift: Any, guide: Any, padded: Any) -> bool:
    """``ThresholdTable``'s lookup arrays in one pass over the thresholds ``t`` (uint32):
    ``guide[b] = #{T_v < b·2**shift}`` and ``padded`` = ``t`` then ``2**32``; False when ``t``
    is not sorted (the arrays are then incomplete).

    >>> guide, padded = np.empty(3, dtype=np.int32), np.empty(3, dtype=np.int64)
    >>> t = np.array([5, 2**31 + 7], dtype=np.uint32)
    >>> table_guide(t, 31, guide, padded), guide.tolist(), padded.tolist()
    (True, [0, 1, 2], [5, 2147483655, 4294967296])
    """
    for b in range(guide.size):
        guide[b] = 0
    for i in range(t.size):
        v = np.int64(t[i])
        if i and v < padded[i - 1]:
            return False
        padded[i] = v
        guide[(v >> shift) + 1] += 1
    padded[t.size] = np.int64(4294967296)
    for b in range(1, guide.size):
        guide[b] += guide[b - 1]
    return True


def table_signs(z: Any, raw: Any) -> None:
    """``z[i] = −z[i]`` where the random byte ``raw[i]`` is odd: the fair signs of
    :func:`sketchsyn.privacy.noise._laplace_core` (its numpy path: ``np.negative(z, out=z,
    where=raw & 1 == 1)``), in one loop.

    >>> z = np.array([3, 0, 5], dtype=np.int64)
    >>> table_signs(z, np.array([1, 3, 2], dtype=np.uint8)); z.tolist()
    [-3, 0, 5]
    """
    for i in range(z.size):
        if raw[i] & 1:
            z[i] = -z[i]


def _lookup(guide: Any, padded: Any, shift: Any, w: Any) -> int:
    """``#{T_v < w}`` of a threshold table's lookup arrays (``ThresholdTable.lookup``)."""
    idx = np.int64(guide[w >> shift])
    while padded[idx] < w:
        idx += 1
    return idx


def _geo_plain(next_u32: Any, state: Any, k: Any, guide: Any, padded: Any, mg: Any, shift: Any,
               words: Any, drawn: Any, todo: Any, out: Any) -> int:  # fmt: skip
    """``k`` geometric draws into ``out`` from a table of ``mg`` values (an outcome ``mg``
    draws again), in numpy's order (``noise._geometric_q``): one call's words for every draw
    still going, then the next; each word goes to ``words[drawn:]``. Returns the words drawn
    so far, or ``-(drawn + 1)`` after a call's words when one of them ties (or before a call
    whose words would not fit in ``words``)."""
    for j in range(k):
        out[j] = 0
        todo[j] = j
    left = k
    while left:
        if drawn + left > words.size:
            return -(drawn + 1)
        tie = False
        keep = 0
        for i in range(left):
            w = np.int64(next_u32(state))
            words[drawn] = w
            drawn += 1
            o = _lookup(guide, padded, shift, w)
            if padded[o] == w:
                tie = True
            j = todo[i]
            out[j] += o
            if o == mg:
                todo[keep] = j
                keep += 1
        if tie:
            return -(drawn + 1)
        left = keep
    return drawn


def lap_draw(next_u32: Any, state: Any, count: Any, plan: Any, shift: Any, words: Any,
             z: Any, scratch: Any) -> int:  # fmt: skip
    """``count`` exact ``Lap_Z`` draws into ``z``, the words ``noise._laplace_core`` draws, in
    its order, from the source's generator (``next_u32``): the magnitudes' words, the
    geometric beyond the table for those that reach it (``plan``: ``noise.laplace_plan``), the
    signs (the low bits of the next ``ceil(count/4)`` words' bytes, low byte first). Every
    word but the signs' goes to ``words``. Returns the number of words so, or ``-(drawn + 1)``
    when the draw stops after a call's words (a tie; a geometric without its table; ``words``
    full): ``noise.laplace_replay`` finishes it from them."""
    guide, padded, m, kind, guide_a, padded_a, guide_b, padded_b, m_b = plan
    drawn = 0
    tie = False
    for i in range(count):
        w = np.int64(next_u32(state))
        words[drawn] = w
        drawn += 1
        idx = _lookup(guide, padded, shift, w)
        z[i] = idx
        if padded[idx] == w:
            tie = True
    if tie:
        return -(drawn + 1)
    k = 0
    for i in range(count):
        if z[i] == m:
            if k < scratch.shape[1]:
                scratch[0, k] = i
            k += 1
    if k:
        if k > scratch.shape[1]:
            return -(drawn + 1)  # more than the scratch rows hold: handed back
        if kind == 1:  # PLAN_PLAIN
            drawn = _geo_plain(next_u32, state, k, guide_a, padded_a, m, shift, words, drawn,
                               scratch[3], scratch[2])  # fmt: skip
            if drawn < 0:
                return drawn
            for j in range(k):
                z[scratch[0, j]] += scratch[2, j]
        elif kind == 2:  # PLAN_WIDE: Y = R + m·Z, R truncated, Z geometric of parameter x·m
            if drawn + k > words.size:
                return -(drawn + 1)
            for j in range(k):
                w = np.int64(next_u32(state))
                words[drawn] = w
                drawn += 1
                low = _lookup(guide_a, padded_a, shift, w)
                scratch[1, j] = low
                if padded_a[low] == w:
                    tie = True
            if tie:
                return -(drawn + 1)
            drawn = _geo_plain(next_u32, state, k, guide_b, padded_b, m_b, shift, words, drawn,
                               scratch[3], scratch[2])  # fmt: skip
            if drawn < 0:
                return drawn
            for j in range(k):
                z[scratch[0, j]] += scratch[2, j] * m + scratch[1, j]
        else:  # no table for the geometric here
            return -(drawn + 1)
    word = np.int64(0)
    for i in range(count):
        if i % 4 == 0:
            word = np.int64(next_u32(state))
        if (word >> (8 * (i % 4))) & 1:
            z[i] = -z[i]
    return drawn


def _warm_up() -> None:
    """One call of each with the argument types of ``ThresholdTable.sample`` and
    ``_fast_thresholds``."""
    out = np.empty(1, dtype=np.int64)
    guide = np.zeros(4097, dtype=np.int32)
    table_sample(guide, np.array([2**32], dtype=np.int64), np.zeros(1, np.uint32), 20, out)
    table_floors(LAPLACE, 0.5, 4, 2.0**-40, 2.0**-30, 32.0, np.empty(4, dtype=np.int64))
    guide, padded = np.empty(4097, dtype=np.int32), np.empty(2, dtype=np.int64)
    table_guide(np.zeros(1, dtype=np.uint32), 20, guide, padded)
    table_signs(out, np.zeros(1, dtype=np.uint8))
    from .rng import as_source

    src = as_source(0)  # held while its generator's state is drawn from
    state, u32, _ = src.word_functions()  # type: ignore[misc]
    words, z = np.empty(8, np.uint32), np.empty(2, np.int64)

    # A plan (noise.laplace_plan's tuple) of a wide table, looked up by the top 2 bits: 4
    # magnitudes, 3 truncated values, a second geometric of 2.
    def guide(t: list[int]) -> np.ndarray:
        return np.searchsorted(np.array(t), np.arange(5) << 30).astype(np.int32)

    mags, low, geo = [2**30, 2**31, 3 * 2**30, 2**32 - 5], [2**31, 3 * 2**30, 2**32 - 1], [2**31]
    plan = tuple(x for t in (mags, low, geo) for x in (guide(t), np.array([*t, 2**32])))
    plan = (*plan[:2], 4, 2, *plan[2:], 1)
    lap_draw(u32, state, 2, plan, 30, words, z, np.empty((4, 2), np.int64))
    del src


accel.register(globals(), KERNELS, _warm_up)
