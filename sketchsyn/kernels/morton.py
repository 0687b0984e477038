"""A :class:`~sketchsyn.domains.Box`'s Morton codes by the compiled passes of
:mod:`~sketchsyn.kernels._privhp`: one per axis (each read as a column, in place: a
column-major batch, as the file readers give, is not copied) and one for the interleave.

>>> import numpy as np
>>> from sketchsyn import Box
>>> from sketchsyn import kernels
>>> X = np.random.default_rng(0).random((5000, 2))
>>> codes = encode_box(Box.unit(2), X, 16) if kernels.enabled() else Box.unit(2).encode(X, 16)
>>> bool((codes == Box.unit(2).encode(X, 16)).all())
True
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from . import privhp

__all__ = ["MIN_ROWS", "encode_box"]

#: Batches with fewer rows take the numpy path (the calls would cost more than they save).
MIN_ROWS = 4096
_TINY = float(np.finfo(np.float64).tiny)


def _fresh(name: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    return np.empty(shape, dtype=dtype)


def encode_box(
    domain: Any,
    X: Any,
    depth: int,
    scratch: Callable[[str, tuple[int, ...], Any], np.ndarray] | None = None,
) -> np.ndarray | None:
    """``domain.encode(X, depth)`` of a :class:`~sketchsyn.domains.Box` in compiled passes,
    or None where they do not apply: a row outside the box or not finite (the domain's policy
    then decides), d > 3, or more bits per axis than the spreading takes. The rows are read by
    the domain's own checks first (numeric, ``(n, d)``). ``scratch(name, shape, dtype)``, when
    given, supplies the working arrays and the codes (reused memory)."""
    arr = domain._points(X)  # any layout: each axis is read as one column (strided or not)
    n, d = arr.shape
    # The levels 1 … depth that cut each axis (level l cuts axis (l − 1) mod d), as
    # sketchsyn.domains.morton's _bits_per_axis.
    bits = [max((depth - i + d - 1) // d, 0) for i in range(d)]
    if d > 3 or (d == 3 and bits[0] > 21) or (d == 1 and bits[0] > 53):
        return None
    if arr.dtype != np.float64:
        arr = arr.astype(np.float64)
    lower = np.asarray(domain.lower, dtype=np.float64)
    upper = np.asarray(domain.upper, dtype=np.float64)
    with np.errstate(over="ignore"):
        span = upper - lower
    divide, scale = np.ones(d), np.ones(d)
    top, shift = np.zeros(d), np.zeros(d, dtype=np.uint64)
    for i, b in enumerate(bits):
        if b == 0:
            continue
        step = math.ldexp(float(span[i]), -b)
        divide[i] = step if step >= _TINY else 0.0
        scale[i] = math.ldexp(1.0, b)
        top[i] = math.ldexp(1.0, b) - 1.0
        shift[i] = depth - i - 1 - d * (b - 1) if d > 1 else 0
    get = scratch or _fresh
    codes = get("codes", (n,), np.uint64)
    q = get("q", (d, n), np.int32 if max(bits) <= 31 else np.int64)
    bad = 0
    for i in range(d):
        col = arr[:, i]
        bad += privhp.quantise(col, lower[i], upper[i], span[i], divide[i], scale[i], top[i], q[i])
        if bad:
            return None
    privhp.morton(q, shift, codes)
    return codes
