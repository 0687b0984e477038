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

from typing import Any

import numpy as np

from .. import accel

__all__ = ["KERNELS", "table_sample"]

#: The kernels in the order they are compiled.
KERNELS = ("table_sample",)


def table_sample(guide: Any, padded: Any, words: Any, shift: Any, out: Any) -> int:
    """``out[i] = #{v : T_v < words[i]}`` for the sorted thresholds ``padded`` (``2**32`` last,
    which stops every word) with ``guide[b] = #{T_v < b·2**shift}``; returns the number of
    words equal to a threshold (ties, left to the caller)."""
    ties = 0
    for i in range(words.size):
        w = np.int64(words[i])
        idx = np.int64(guide[w >> shift])
        while padded[idx] < w:
            idx += 1
        out[i] = idx
        if padded[idx] == w:
            ties += 1
    return ties


def _warm_up() -> None:
    """One call with the argument types of ``ThresholdTable.sample``."""
    out = np.empty(1, dtype=np.int64)
    guide = np.zeros(4097, dtype=np.int32)
    table_sample(guide, np.array([2**32], dtype=np.int64), np.zeros(1, np.uint32), 20, out)


accel.register(globals(), KERNELS, _warm_up)
