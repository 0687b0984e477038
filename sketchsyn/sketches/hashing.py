"""Vectorised MurmurHash3 (x86, 32-bit) over uint64 keys, bit-identical to ``mmh3``.

A key is hashed as its 8 little-endian bytes: ``murmur3_32(k, seed) ==
mmh3.hash(int(k).to_bytes(8, "little"), seed, signed=False)``. The mixing of the two 4-byte blocks
does not depend on the seed, so it is done once per key and shared by every seed when ``seed`` is
an array (one call hashes many sketch rows, or many levels × rows).

>>> import mmh3
>>> int(murmur3_32(12345, 7)) == mmh3.hash((12345).to_bytes(8, "little"), 7, signed=False)
True
>>> keys = np.arange(5, dtype=np.uint64)
>>> murmur3_32(keys[None, :], np.array([[1], [2], [3]], dtype=np.uint32)).shape
(3, 5)
>>> fam = HashFamily(width=16, depth=3, seed=1)
>>> fam.buckets([1, 2, 3]).shape
(3, 3)
"""

from __future__ import annotations

import numbers

import mmh3
import numpy as np

from ..attributes import ReadOnly
from ..errors import InputError, ParameterError, check_int

__all__ = ["HashFamily", "as_keys", "murmur3_32"]

_U32 = np.uint32
_C1K, _C2K = _U32(0xCC9E2D51), _U32(0x1B873593)  # block constants
_M1, _M2 = _U32(0x85EBCA6B), _U32(0xC2B2AE35)  # finalisation constants
_N = _U32(0xE6546B64)
# Large outputs are hashed in blocks of _BLOCK elements of one row: a block and its scratch
# array (2 × 256 KiB) stay in the L2 cache through the ~18 in-place passes of the mixing, which
# measured 2-3x faster than whole-array passes for outputs of millions of elements (e.g. 18
# levels × 3 rows × 65 536 keys). Outputs up to _BLOCK elements are hashed in whole-array
# passes.
_BLOCK = 1 << 16


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << _U32(r)) | (x >> _U32(32 - r))


def _rotl_inplace(x: np.ndarray, r: int, tmp: np.ndarray) -> None:
    """``x = rotl(x, r)`` in place (``tmp``: scratch of the same shape)."""
    np.left_shift(x, _U32(r), out=tmp)
    x >>= _U32(32 - r)
    x |= tmp


def _mix_block(k: np.ndarray) -> np.ndarray:
    """Seed-independent mixing of one 4-byte block, then the rotation by 13 of the round.

    ``h = rotl(h ^ mix(k), 13)`` and rotation distributes over XOR, so the key's share
    ``rotl(mix(k), 13)`` is computed once per key, whatever the number of seeds. ``k`` is a
    fresh uint32 array: it is overwritten and returned.
    """
    tmp = np.empty_like(k)
    k *= _C1K
    _rotl_inplace(k, 15, tmp)
    k *= _C2K
    _rotl_inplace(k, 13, tmp)
    return k


def _finish(h: np.ndarray, tmp: np.ndarray, k2: np.ndarray | None) -> None:
    """The rest of MurmurHash3 in place on ``h = rotl(seed ^ mix(k1), 13)`` (``tmp``: scratch)."""
    h *= _U32(5)
    h += _N
    # Second block: h = rotl(h ^ mix(k2), 13) = rotl(h, 13) ^ rotl(mix(k2), 13).
    np.left_shift(h, _U32(13), out=tmp)
    np.right_shift(h, _U32(19), out=h)
    h |= tmp
    if k2 is not None:  # a zero high block mixes to zero: nothing to XOR
        h ^= k2
    h *= _U32(5)
    h += _N
    h ^= _U32(8)  # length in bytes
    np.right_shift(h, _U32(16), out=tmp)  # fmix32
    h ^= tmp
    h *= _M1
    np.right_shift(h, _U32(13), out=tmp)
    h ^= tmp
    h *= _M2
    np.right_shift(h, _U32(16), out=tmp)
    h ^= tmp


def _bad_key(name: str, index: int, value: object) -> InputError:
    return InputError(f"{name} must be integers in [0, 2**64); {name}[{index}] = {value!r}")


def as_keys(keys: object, name: str = "keys") -> np.ndarray:
    """Validate keys and return them as a uint64 array of the same shape.

    Parameters
    ----------
    keys : array_like
        Non-negative integers below 2**64: unsigned or signed integer arrays, Python ints, or
        floats that are exact integers. Booleans, strings, NaN, ±inf, negative values, values
        ≥ 2**64 and non-integral floats are refused (map strings with :meth:`HashFamily.key_of`).
    name : str
        The argument's name, used in the error message.

    Returns
    -------
    numpy.ndarray
        ``uint64`` keys (the input itself when it already is a uint64 array).

    Raises
    ------
    InputError
        Naming ``name``, the first bad (flat) index and its value.

    Examples
    --------
    >>> as_keys([3, 2.0]).tolist()
    [3, 2]
    >>> as_keys([1, -2])
    Traceback (most recent call last):
    ...
    sketchsyn.errors.InputError: keys must be integers in [0, 2**64); keys[1] = -2
    """
    arr = np.asarray(keys)
    if arr.dtype.kind == "f" and not isinstance(keys, np.ndarray):
        # numpy turns a list mixing ints >= 2**63 with smaller ints into float64, which loses
        # the low bits of big keys: read such lists element by element instead.
        arr = np.asarray(keys, dtype=object)
    kind = arr.dtype.kind
    if arr.dtype == np.uint64:
        return arr
    if kind == "u":
        return arr.astype(np.uint64)
    flat = arr.reshape(-1)
    if kind == "i":
        bad = np.flatnonzero(flat < 0)
        if bad.size:
            raise _bad_key(name, int(bad[0]), flat[bad[0]].item())
        return arr.astype(np.uint64)
    if kind == "f":
        with np.errstate(invalid="ignore"):
            ok = np.isfinite(flat) & (flat >= 0) & (flat == np.floor(flat)) & (flat < 2.0**64)
        bad = np.flatnonzero(~ok)
        if bad.size:
            raise _bad_key(name, int(bad[0]), flat[bad[0]].item())
        return arr.astype(np.uint64)
    if kind == "O":
        out = np.empty(flat.size, dtype=np.uint64)
        for i, v in enumerate(flat.tolist()):
            if isinstance(v, float) and v.is_integer() and 0 <= v < 2.0**64:
                out[i] = int(v)
            elif isinstance(v, bool) or not isinstance(v, numbers.Integral) or not 0 <= v < 2**64:
                raise _bad_key(name, i, v)
            else:
                out[i] = int(v)
        return out.reshape(arr.shape)
    if flat.size == 0:
        return np.zeros(arr.shape, dtype=np.uint64)
    raise _bad_key(name, 0, flat[0].item())


def murmur3_32(keys: object, seed: object = 0, *, out: np.ndarray | None = None) -> np.ndarray:
    """MurmurHash3 x86_32 of each uint64 key's 8 little-endian bytes, as uint32.

    Parameters
    ----------
    keys : array_like
        Keys accepted by :func:`as_keys` (any shape).
    seed : int or array_like
        An int in ``[0, 2**32)`` or an integer array of such seeds, broadcastable against
        ``keys``: keys of shape ``(L, 1, n)`` with seeds ``(L, j, 1)`` hash ``L`` levels × ``j``
        rows in one call. The seed-independent half of the work is done once per key.
    out : numpy.ndarray, optional
        A C-contiguous ``uint32`` array of the broadcast shape to write the hashes to (a
        caller's reused scratch array: no fresh memory for the result).

    Returns
    -------
    numpy.ndarray
        ``uint32`` of the broadcast shape, equal bit for bit to
        ``mmh3.hash(int(k).to_bytes(8, "little"), s, signed=False)``.

    Examples
    --------
    >>> murmur3_32([0, 2**64 - 1], 42).tolist() == [
    ...     mmh3.hash(k.to_bytes(8, "little"), 42, signed=False) for k in (0, 2**64 - 1)]
    True
    """
    k = as_keys(keys)
    s = np.asarray(seed)
    if (
        s.dtype.kind not in "ui"
        or (s.size and (int(s.min()) < 0 or int(s.max()) >= 2**32))
        or isinstance(seed, bool)
    ):
        raise ParameterError(
            "The 'seed' parameter of murmur3_32 must be an int in [0, 2**32) or an array of "
            f"them. Got {seed!r} instead."
        )
    s = s.astype(_U32)
    shape = np.broadcast_shapes(k.shape, s.shape)
    if out is None:
        out = np.empty(shape, dtype=_U32)
    elif out.shape != shape or out.dtype != _U32 or not out.flags.c_contiguous:
        raise ParameterError(
            f"The 'out' parameter of murmur3_32 must be a C-contiguous uint32 array of shape "
            f"{shape}. Got {out.dtype} of shape {out.shape} instead."
        )
    if out.size == 0:
        return out
    with np.errstate(over="ignore"):
        if int(k.max()) < 2**32:
            # Every high 4-byte block is zero, and the mixed value of a zero block is zero.
            k1, k2 = _mix_block(k.astype(_U32)), None
        else:
            halves = np.ascontiguousarray(k, dtype="<u8").view("<u4").reshape(*k.shape, 2)
            k1 = _mix_block(halves[..., 0].astype(_U32))  # low 4 bytes
            k2 = _mix_block(halves[..., 1].astype(_U32))  # high 4 bytes
        rs = _rotl(s, 13)
        n = shape[-1] if shape else 1
        if out.size <= _BLOCK or n < 4096:
            np.bitwise_xor(rs, k1, out=out)
            _finish(out, np.empty_like(out), k2)
            return out
        # Blocks of the last axis, one leading index at a time (cache-sized passes, and one
        # small scratch array: no fresh memory the size of the output).
        rs_b, k1_b = np.broadcast_to(rs, shape), np.broadcast_to(k1, shape)
        k2_b = None if k2 is None else np.broadcast_to(k2, shape)
        tmp = np.empty(min(_BLOCK, n), dtype=_U32)
        for idx in np.ndindex(shape[:-1]):
            row, rs_row, k1_row = out[idx], rs_b[idx], k1_b[idx]
            k2_row = None if k2_b is None else k2_b[idx]
            for a in range(0, n, _BLOCK):
                b = min(a + _BLOCK, n)
                h = row[a:b]
                np.bitwise_xor(rs_row[a:b], k1_row[a:b], out=h)
                _finish(h, tmp[: b - a], None if k2_row is None else k2_row[a:b])
    return out


def _derive_seeds(seed: int, count: int, salt: int) -> np.ndarray:
    """Public seeds: ``murmur3_32(salt·2**32 + i, seed)`` for ``i = 0 … count−1``."""
    idx = np.arange(count, dtype=np.uint64) + np.uint64(salt << 32)
    out = murmur3_32(idx, seed)
    out.setflags(write=False)
    return out


class HashFamily:
    """Row hashes (and Count Sketch sign hashes) of a ``depth × width`` sketch.

    Everything here is public (hash seeds are not secret in the privacy model).

    * Row ``i`` hashes with the seed ``row_seeds[i] = murmur3_32(i, seed)``; its sign hash with
      ``sign_seeds[i] = murmur3_32(2**32 + i, seed)``, so the two sets are distinct seeds of the
      same hash and the signs are independent of the buckets for practical purposes.
    * A 32-bit hash ``h`` goes to bucket ``(h · width) >> 32`` (multiply-shift, exact integer
      arithmetic). Each bucket receives ``floor`` or ``ceil`` of ``2**32 / width`` of the hash
      values, so its probability is within a relative ``width / 2**32`` of ``1/width``
      (exactly uniform when ``width`` is a power of two, where it is ``h >> (32 − log2 width)``).
    * The sign is ``+1`` when the lowest bit of the sign hash is 0 and ``−1`` when it is 1.

    Parameters
    ----------
    width : int
        Buckets per row, in ``[1, 2**31]``.
    depth : int
        Rows, in ``[1, 1024]``.
    seed : int
        Master seed in ``[0, 2**32)``.

    Examples
    --------
    >>> fam = HashFamily(width=8, depth=2, seed=3)
    >>> b = fam.buckets([10, 11])
    >>> bool(((b >= 0) & (b < 8)).all()), set(fam.signs([10, 11]).ravel()) <= {-1, 1}
    (True, True)
    >>> fam == HashFamily(8, 2, 3), fam == HashFamily(8, 2, 4)
    (True, False)
    """

    __slots__ = ("_width", "_depth", "_seed", "_row_seeds", "_sign_seeds", "_shift")

    def __init__(self, width: int, depth: int, seed: int = 0) -> None:
        self._width = check_int(width, "width", "HashFamily", minimum=1, maximum=2**31)
        self._depth = check_int(depth, "depth", "HashFamily", minimum=1, maximum=1024)
        self._seed = check_int(seed, "seed", "HashFamily", minimum=0, maximum=2**32 - 1)
        self._row_seeds = _derive_seeds(self._seed, self._depth, 0)
        self._sign_seeds = _derive_seeds(self._seed, self._depth, 1)
        w = self._width
        self._shift = 32 - (w.bit_length() - 1) if w & (w - 1) == 0 else None

    width = ReadOnly[int]("Buckets per row.")
    depth = ReadOnly[int]("Rows.")
    seed = ReadOnly[int]("Master seed.")
    row_seeds = ReadOnly[np.ndarray]("Read-only ``uint32 (depth,)`` seeds of the bucket hashes.")
    sign_seeds = ReadOnly[np.ndarray]("Read-only ``uint32 (depth,)`` seeds of the sign hashes.")

    def _bucket_of(self, h: np.ndarray, offsets: np.ndarray | None = None) -> np.ndarray:
        """Buckets (int64) of the uint32 hashes ``h`` (consumed), plus ``offsets`` if given."""
        if self._shift is not None:  # width 2**b: (h · width) >> 32 == h >> (32 − b)
            if self._shift == 32:  # width 1
                h[...] = 0
            else:
                h >>= _U32(self._shift)
            b = h
        else:
            b = (h.astype(np.uint64) * np.uint64(self._width)) >> np.uint64(32)
        if offsets is None:
            return b.astype(np.int64)
        return np.add(b, offsets, dtype=np.int64)

    def buckets(self, keys: object) -> np.ndarray:
        """Bucket of each key in each row.

        Parameters
        ----------
        keys : array_like
            Keys accepted by :func:`as_keys` (flattened).

        Returns
        -------
        numpy.ndarray
            ``int64 (depth, n)`` in ``[0, width)``.

        Examples
        --------
        >>> HashFamily(4, 2).buckets([7]).shape
        (2, 1)
        """
        k = as_keys(keys).reshape(-1)
        return self._bucket_of(murmur3_32(k[None, :], self._row_seeds[:, None]))

    def flat_indices(self, keys: object) -> np.ndarray:
        """``row·width + bucket`` of each key in each row, ready for one ``np.bincount``.

        This is the fast path for callers that update many tables at once (PrivHP offsets
        each level's indices by ``level·depth·width`` and counts a whole bank in one call).

        Returns
        -------
        numpy.ndarray
            ``int64 (depth, n)`` in ``[0, depth·width)``.

        Examples
        --------
        >>> HashFamily(4, 2).flat_indices([7, 8]).shape
        (2, 2)
        """
        k = as_keys(keys).reshape(-1)
        offsets = (np.arange(self._depth, dtype=np.int64) * self._width)[:, None]
        return self._bucket_of(murmur3_32(k[None, :], self._row_seeds[:, None]), offsets)

    def signs(self, keys: object) -> np.ndarray:
        """Sign of each key in each row.

        Returns
        -------
        numpy.ndarray
            ``int8 (depth, n)`` of ±1.

        Examples
        --------
        >>> set(HashFamily(4, 3).signs(range(100)).ravel().tolist())
        {1, -1}
        """
        k = as_keys(keys).reshape(-1)
        h = murmur3_32(k[None, :], self._sign_seeds[:, None])
        low = (h & _U32(1)).astype(np.int8)
        low *= np.int8(-2)
        low += np.int8(1)
        return low

    @staticmethod
    def key_of(obj: str | bytes) -> int:
        """The uint64 key of a ``str`` (UTF-8) or bytes-like object.

        It is the first (low) 64-bit half of ``mmh3.hash64(data, 0, signed=False)``, i.e. of
        MurmurHash3 x64_128 with seed 0. Two different strings collide with probability about
        2**-64; a string key and an integer key with the same value are the same key.

        Examples
        --------
        >>> HashFamily.key_of("10.0.0.1") == HashFamily.key_of(b"10.0.0.1")
        True
        """
        if isinstance(obj, str):
            data = obj.encode("utf-8")
        elif isinstance(obj, (bytes, bytearray, memoryview)):
            data = bytes(obj)
        else:
            raise InputError(f"key_of takes str or bytes; got {type(obj).__name__} {obj!r}")
        return mmh3.hash64(data, 0, signed=False)[0]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HashFamily):
            return NotImplemented
        return (self._width, self._depth, self._seed) == (other._width, other._depth, other._seed)

    def __hash__(self) -> int:
        return hash((HashFamily, self._width, self._depth, self._seed))

    def __repr__(self) -> str:
        return f"HashFamily(width={self._width}, depth={self._depth}, seed={self._seed})"
