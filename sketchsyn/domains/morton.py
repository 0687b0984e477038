"""Bit interleaving (Morton order) of per-axis cell indices, in place on uint64 arrays.

Level ``l`` of a :class:`~sketchsyn.domains.Box` cuts coordinate ``(l − 1) mod d``, so a cell's
prefix is the top bits of the interleaved code. For d = 2 and 3 the bits are spread and gathered
with the classic magic-number stages; other dimensions go bit by bit.

>>> import numpy as np
>>> _bits_per_axis(5, 2)
[3, 2]
>>> x = np.array([0b111], dtype=np.uint64)
>>> int(_spread(x, 3, 2, np.empty_like(x))[0]) == 0b10101
True
>>> int(_compact(np.array([0b10101], dtype=np.uint64), 2)[0]) == 0b111
True
"""

from __future__ import annotations

import numpy as np

__all__: list[str] = []

_U64 = np.uint64
_ALL64 = _U64(0xFFFFFFFFFFFFFFFF)

# Magic-number bit spreading stages (shift, mask, needed when the input has more bits than
# this): 2-way for up to 32 bits, 3-way for up to 21.
_SPREAD2 = (
    (16, 0x0000FFFF0000FFFF, 16),
    (8, 0x00FF00FF00FF00FF, 8),
    (4, 0x0F0F0F0F0F0F0F0F, 4),
    (2, 0x3333333333333333, 2),
    (1, 0x5555555555555555, 1),
)
_SPREAD3 = (
    (32, 0x001F00000000FFFF, 16),
    (16, 0x001F0000FF0000FF, 8),
    (8, 0x100F00F00F00F00F, 4),
    (4, 0x10C30C30C30C30C3, 2),
    (2, 0x1249249249249249, 1),
)
# Inverse (compaction) stages, applied after masking with the first mask.
_COMPACT2 = (
    0x5555555555555555,
    (1, 0x3333333333333333),
    (2, 0x0F0F0F0F0F0F0F0F),
    (4, 0x00FF00FF00FF00FF),
    (8, 0x0000FFFF0000FFFF),
    (16, 0x00000000FFFFFFFF),
)
_COMPACT3 = (
    0x1249249249249249,
    (2, 0x10C30C30C30C30C3),
    (4, 0x100F00F00F00F00F),
    (8, 0x001F0000FF0000FF),
    (16, 0x001F00000000FFFF),
    (32, 0x00000000001FFFFF),
)


def _bits_per_axis(depth: int, d: int) -> list[int]:
    """Number of levels ``1 … depth`` that cut each coordinate (level l cuts (l − 1) mod d)."""
    return [max((depth - i + d - 1) // d, 0) for i in range(d)]


def _spread(x: np.ndarray, nbits: int, d: int, tmp: np.ndarray) -> np.ndarray:
    """Spread the low ``nbits`` bits of ``x`` in place so bit j moves to bit d·j (d = 2 or 3).

    ``tmp`` is a scratch array of the same shape and dtype (uint64).
    """
    stages = _SPREAD2 if d == 2 else _SPREAD3
    for shift, mask, needed_above in stages:
        if nbits > needed_above:
            np.left_shift(x, _U64(shift), out=tmp)
            np.bitwise_or(x, tmp, out=x)
            np.bitwise_and(x, _U64(mask), out=x)
    return x


# Axes of at most _TABLE_BITS bits are spread by a table lookup (one pass instead of up to
# 15): 2**12 uint64 entries, 32 KiB, stay in the L1 cache.
_TABLE_BITS = 12
_TABLES: dict[tuple[int, int, int], np.ndarray] = {}


def _spread_table(nbits: int, d: int, shift: int) -> np.ndarray:
    """Read-only table of ``_spread(q, nbits, d) << shift`` for ``q = 0 … 2**nbits − 1``.

    >>> t = _spread_table(3, 2, 1)
    >>> int(t[0b111]) == 0b10101 << 1
    True
    """
    key = (nbits, d, shift)
    table = _TABLES.get(key)
    if table is None:
        q = np.arange(1 << nbits, dtype=_U64)
        table = _spread(q, nbits, d, np.empty_like(q))
        if shift:
            np.left_shift(table, _U64(shift), out=table)
        table.setflags(write=False)
        _TABLES[key] = table
    return table


def _compact(x: np.ndarray, d: int) -> np.ndarray:
    """Gather bits 0, d, 2d, … of ``x`` (a fresh array is returned) into bits 0, 1, 2, …."""
    stages = _COMPACT2 if d == 2 else _COMPACT3
    out = np.bitwise_and(x, _U64(stages[0]))
    tmp = np.empty_like(out)
    for shift, mask in stages[1:]:
        np.right_shift(out, _U64(shift), out=tmp)
        np.bitwise_or(out, tmp, out=out)
        np.bitwise_and(out, _U64(mask), out=out)
    return out


def _axis_indices64(aligned: np.ndarray, d: int) -> list[np.ndarray]:
    """Per-axis indices, at depth 64, of left-aligned Morton codes (``prefix << (64 − level)``)."""
    if d == 1:
        return [aligned]
    bits = _bits_per_axis(64, d)
    if d in (2, 3):
        out = []
        for i in range(d):
            low = 63 - i - d * (bits[i] - 1)  # position of axis i's last (depth-64) bit
            idx = _compact(aligned >> _U64(low) if low else aligned, d)
            if d == 3 and bits[i] == 22:  # the 3-way masks hold 21 bits; add the 22nd (bit 63)
                idx |= (aligned >> _U64(63)) << _U64(21)
            out.append(idx)
        return out
    out = []
    tmp = np.empty_like(aligned)
    for i in range(d):
        idx = np.zeros_like(aligned)
        for j in range(bits[i]):
            np.right_shift(aligned, _U64(63 - i - d * j), out=tmp)
            np.bitwise_and(tmp, _U64(1), out=tmp)
            np.left_shift(tmp, _U64(bits[i] - 1 - j), out=tmp)
            np.bitwise_or(idx, tmp, out=idx)
        out.append(idx)
    return out
