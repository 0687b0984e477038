"""Vectorised MurmurHash3 (x86, 32-bit) over uint64 keys, bit-identical to ``mmh3``.

A key is hashed as its 8 little-endian bytes: ``murmur3_32(k, seed) ==
mmh3.hash(int(k).to_bytes(8, "little"), seed, signed=False)``. The mixing of the two 4-byte blocks
does not depend on the seed, so it is done once and shared by every seed when ``seed`` is an array
(one call hashes many sketch rows or levels).

>>> import mmh3
>>> int(murmur3_32(12345, 7)) == mmh3.hash((12345).to_bytes(8, "little"), 7, signed=False)
True
>>> fam = HashFamily(width=16, depth=3, seed=1)
>>> fam.buckets([1, 2, 3]).shape
(3, 3)
"""

from __future__ import annotations

import numbers

import mmh3
import numpy as np

from .errors import InputError, check_int

__all__ = ["HashFamily", "as_keys", "murmur3_32"]

_U32 = np.uint32
_C1, _C2 = _U32(0xCC9E2D51), _U32(0x85EBCA6B)
_M1, _M2 = _U32(0x85EBCA6B), _U32(0xC2B2AE35)
_N = _U32(0xE6546B64)
_C1K, _C2K = _U32(0xCC9E2D51), _U32(0x1B873593)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << _U32(r)) | (x >> _U32(32 - r))


def _mix_block(k: np.ndarray) -> np.ndarray:
    k = k * _C1K
    k = _rotl(k, 15)
    return k * _C2K


def as_keys(keys: object, name: str = "keys") -> np.ndarray:
    """Validate keys and return them as a uint64 array (any shape).

    Accepts unsigned/signed integer arrays (non-negative), Python ints below 2**64 and floats that
    are exact non-negative integers; refuses anything else with an :class:`InputError` that names
    the argument, the first bad index and its value.
    """
    arr = np.asarray(keys)
    if arr.dtype == np.uint64:
        return arr
    if arr.dtype.kind == "u":
        return arr.astype(np.uint64)
    flat = arr.reshape(-1)
    if arr.dtype.kind == "i":
        bad = np.flatnonzero(flat < 0)
        if bad.size:
            i = int(bad[0])
            raise InputError(f"{name} must be non-negative integers; {name}[{i}] = {flat[i]!r}")
        return arr.astype(np.uint64)
    if arr.dtype.kind == "f":
        ok = np.isfinite(flat) & (flat >= 0) & (flat == np.floor(flat)) & (flat < 2.0**64)
        bad = np.flatnonzero(~ok)
        if bad.size:
            i = int(bad[0])
            raise InputError(
                f"{name} must be non-negative integers (floats only when integral); "
                f"{name}[{i}] = {flat[i]!r}"
            )
        return arr.astype(np.uint64)
    if arr.dtype.kind == "b":
        return arr.astype(np.uint64)
    if arr.dtype.kind == "O":
        out = np.empty(flat.size, dtype=np.uint64)
        for i, v in enumerate(flat.tolist()):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or not 0 <= v < 2**64:
                if isinstance(v, float) and v.is_integer() and 0 <= v < 2.0**64:
                    out[i] = int(v)
                    continue
                raise InputError(f"{name} must be integers in [0, 2**64); {name}[{i}] = {v!r}")
            out[i] = int(v)
        return out.reshape(arr.shape)
    raise InputError(f"{name} must be non-negative integers; got an array of dtype {arr.dtype}")


def murmur3_32(keys: object, seed: object = 0) -> np.ndarray:
    """MurmurHash3 x86_32 of each uint64 key's 8 little-endian bytes, as uint32.

    ``seed`` is an int in [0, 2**32) or a uint32 array broadcastable against ``keys``.

    >>> murmur3_32([0, 1], 0).dtype
    dtype('uint32')
    """
    k = as_keys(keys)
    s = np.asarray(seed)
    if s.dtype.kind not in "ui" or np.any(s < 0) or np.any(s >= 2**32):
        raise InputError(f"seed must be integers in [0, 2**32); got {seed!r}")
    s = s.astype(_U32)
    with np.errstate(over="ignore"):
        # Seed-independent work, once per key. Rotation distributes over XOR, so
        # rotl(seed ^ k1, 13) = rotl(seed, 13) ^ rotl(k1, 13), and likewise for the second block.
        if k.size and int(k.max()) < 2**32:
            # Every high 4-byte block is zero, and the mixed value of a zero block is zero.
            k1 = _rotl(_mix_block(k.astype(_U32)), 13)
            k2 = None
        else:
            halves = np.ascontiguousarray(k, dtype="<u8").view("<u4").reshape(*k.shape, 2)
            k1 = _rotl(_mix_block(halves[..., 0].astype(_U32, copy=False)), 13)  # low 4 bytes
            k2 = _rotl(_mix_block(halves[..., 1].astype(_U32, copy=False)), 13)  # high 4 bytes
        h = np.atleast_1d(np.bitwise_xor(_rotl(s, 13), k1))  # the one full-size allocation
        tmp = np.empty_like(h)
        h *= _U32(5)
        h += _N
        np.left_shift(h, _U32(13), out=tmp)
        np.right_shift(h, _U32(19), out=h)
        h |= tmp
        if k2 is not None:
            h ^= k2
        h *= _U32(5)
        h += _N
        h ^= _U32(8)  # length in bytes
        np.right_shift(h, _U32(16), out=tmp)
        h ^= tmp
        h *= _M1
        np.right_shift(h, _U32(13), out=tmp)
        h ^= tmp
        h *= _M2
        np.right_shift(h, _U32(16), out=tmp)
        h ^= tmp
    return h.reshape(np.broadcast_shapes(k.shape, s.shape))


def _derive_seeds(seed: int, count: int, salt: int) -> np.ndarray:
    """Public row seeds: murmur3 of (salt·2**32 + i) under ``seed``, i = 0…count−1."""
    idx = np.arange(count, dtype=np.uint64) + np.uint64(salt << 32)
    return murmur3_32(idx, seed)


class HashFamily:
    """Row hashes (and Count Sketch sign hashes) of a ``depth × width`` sketch.

    Row ``i`` hashes with the public seed ``row_seeds[i] = murmur3_32(i, seed)`` and maps the
    32-bit hash ``h`` to the bucket ``(h · width) >> 32`` (multiply-shift: exact integer
    arithmetic, within one part in 2**32/width of uniform). Sign hashes use
    ``sign_seeds[i] = murmur3_32(2**32 + i, seed)`` and the lowest bit: ``+1`` for 0, ``−1`` for 1.

    >>> fam = HashFamily(width=8, depth=2, seed=3)
    >>> b = fam.buckets([10, 11])
    >>> bool(((b >= 0) & (b < 8)).all()), set(fam.signs([10, 11]).ravel()) <= {-1, 1}
    (True, True)
    """

    def __init__(self, width: int, depth: int, seed: int = 0) -> None:
        self.width = check_int(width, "width", "HashFamily", minimum=1, maximum=2**31)
        self.depth = check_int(depth, "depth", "HashFamily", minimum=1, maximum=1024)
        self.seed = check_int(seed, "seed", "HashFamily", minimum=0, maximum=2**32 - 1)
        self.row_seeds = _derive_seeds(self.seed, self.depth, 0)
        self.sign_seeds = _derive_seeds(self.seed, self.depth, 1)

    def buckets(self, keys: object) -> np.ndarray:
        """Bucket of each key in each row: int64 array of shape ``(depth, n)``."""
        k = as_keys(keys).reshape(-1)
        h = murmur3_32(k[None, :], self.row_seeds[:, None])
        return ((h.astype(np.uint64) * np.uint64(self.width)) >> np.uint64(32)).astype(np.int64)

    def flat_indices(self, keys: object) -> np.ndarray:
        """``row·width + bucket``: int64 ``(depth, n)``, ready for one ``np.bincount``."""
        offsets = (np.arange(self.depth, dtype=np.int64) * self.width)[:, None]
        return self.buckets(keys) + offsets

    def signs(self, keys: object) -> np.ndarray:
        """Sign of each key in each row: int8 array of ±1, shape ``(depth, n)``."""
        k = as_keys(keys).reshape(-1)
        h = murmur3_32(k[None, :], self.sign_seeds[:, None])
        return (1 - 2 * (h & _U32(1)).astype(np.int8)).astype(np.int8)

    @staticmethod
    def key_of(obj: object) -> int:
        """uint64 key of a str or bytes object: the first 64-bit half of ``mmh3.hash64`` (seed 0).

        >>> HashFamily.key_of("10.0.0.1") == HashFamily.key_of(b"10.0.0.1")
        True
        """
        data = obj.encode("utf-8") if isinstance(obj, str) else bytes(obj)
        return mmh3.hash64(data, 0, signed=False)[0]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HashFamily) and (self.width, self.depth, self.seed) == (
            other.width,
            other.depth,
            other.seed,
        )

    def __repr__(self) -> str:
        return f"HashFamily(width={self.width}, depth={self.depth}, seed={self.seed})"
