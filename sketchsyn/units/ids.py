"""Privacy-unit ids to 64-bit keys, vectorised: integers as themselves, text by MurmurHash3.

A unit id is an integer (any numpy integer dtype, Python ints, integral floats) or a text (str,
bytes, a pyarrow or pandas string column, a categorical of strings). :func:`unit_keys` turns a
batch of them into one ``uint64`` key per row without a Python loop per row:

* an integer id is its own key (a negative int64 as its two's complement);
* a text id is the first 64-bit half of MurmurHash3 x64_128 of its UTF-8 bytes with the 32-bit
  ``seed`` (bit for bit ``mmh3.hash64(text, seed, signed=False)[0]``), computed over all rows at
  once in numpy (:func:`text_keys`): a block of 16 bytes of every row per round, the tails
  masked, so a batch of short ids (an aircraft's tail number, an address) costs a few array
  passes. A categorical (pandas) or dictionary (Arrow) column hashes its categories once.

The integer 5 and the text ``"5"`` are different units: give one column one type. A missing id
(``None``, NaN, an Arrow null) is refused, naming the row: every row must belong to a unit.

>>> import mmh3
>>> unit_keys(np.array([7, -1])).tolist() == [7, 2**64 - 1]
True
>>> int(unit_keys(["N14228"], seed=9)[0]) == mmh3.hash64("N14228", 9, signed=False)[0]
True
>>> unit_keys(["a", None])
Traceback (most recent call last):
...
sketchsyn.units.ids.UnitIdError: units[1] is missing (None): every row must name its privacy unit
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from ..errors import InputError

__all__ = ["UnitIdError", "text_keys", "unit_keys", "utf8_rows"]

_U64 = np.uint64
_C1 = _U64(0x87C37B91114253D5)
_C2 = _U64(0x4CF5AD432745937F)
_F1 = _U64(0xFF51AFD7ED558CCD)
_F2 = _U64(0xC4CEB9FE1A85EC53)
_N1 = _U64(0x52DCE729)
_N2 = _U64(0x38495AB5)
# _MASKS[m]: the low m bytes of a word (m = 0 … 8).
_MASKS = np.array([(1 << (8 * m)) - 1 for m in range(9)], dtype=_U64)
# Text columns longer than this are dictionary-encoded first when they repeat their ids (a
# unit's rows): each distinct id is hashed once.
_ENCODE_MIN = 4096


def _rotl(x: np.ndarray, r: int, tmp: np.ndarray) -> None:
    """``x = rotl64(x, r)`` in place (``tmp``: scratch of the same shape)."""
    np.left_shift(x, _U64(r), out=tmp)
    x >>= _U64(64 - r)
    x |= tmp


def _fmix(k: np.ndarray, tmp: np.ndarray) -> None:
    """MurmurHash3's 64-bit finaliser, in place."""
    for mult in (_F1, _F2, None):
        np.right_shift(k, _U64(33), out=tmp)
        k ^= tmp
        if mult is not None:
            k *= mult


def _mix(k: np.ndarray, first: np.uint64, r: int, second: np.uint64, tmp: np.ndarray) -> None:
    """A block word's mixing, in place: ``k·first``, rotated by ``r``, times ``second`` (a
    zero word mixes to zero, which is what lets a masked-out tail word change nothing)."""
    k *= first
    _rotl(k, r, tmp)
    k *= second


def text_keys(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, seed: int) -> np.ndarray:
    """``mmh3.hash64(data[starts[i] : starts[i] + lengths[i]], seed, signed=False)[0]`` of
    every row ``i``, vectorised (MurmurHash3 x64_128, first half).

    ``data`` is a 1-D ``uint8`` buffer holding the rows' bytes; ``starts`` and ``lengths``
    are ``int64``. Each round reads one 16-byte block of the rows that still have one (two
    unaligned 8-byte words through a strided view of the buffer); the tail words of every row
    are read at once and masked to the row's bytes, so the bytes of the next row never enter a
    hash, and a row without a tail mixes in zero words, which change nothing.

    >>> import mmh3
    >>> raw = np.frombuffer(b"helloworld, this is longer than 16", dtype=np.uint8)
    >>> got = text_keys(raw, np.array([0, 5]), np.array([5, raw.size - 5]), 3)
    >>> got.tolist() == [mmh3.hash64(b"hello", 3, signed=False)[0],
    ...                  mmh3.hash64(bytes(raw[5:]), 3, signed=False)[0]]
    True
    """
    n = starts.size
    buf = np.zeros(data.size + 16, dtype=np.uint8)
    buf[: data.size] = data
    # Every byte offset as the start of a little-endian 64-bit word (an unaligned view).
    words = np.ndarray((data.size + 9,), dtype="<u8", buffer=buf, strides=(1,))
    starts = starts.astype(np.int64, copy=False)
    lengths = lengths.astype(np.int64, copy=False)
    h1 = np.full(n, seed, dtype=_U64)
    h2 = h1.copy()
    tmp = np.empty(n, dtype=_U64)
    rem = lengths & 15
    base = starts + (lengths - rem)
    with np.errstate(over="ignore"):
        for i in range(int(lengths.max(initial=0)) // 16):  # whole blocks (ids of 16+ bytes)
            rows = np.flatnonzero(lengths >= 16 * (i + 1))
            at = starts[rows] + 16 * i
            t = np.empty(rows.size, dtype=_U64)
            k1 = words[at].astype(_U64)
            k2 = words[at + 8].astype(_U64)
            _mix(k1, _C1, 31, _C2, t)
            _mix(k2, _C2, 33, _C1, t)
            a, b = h1[rows], h2[rows]
            a ^= k1
            _rotl(a, 27, t)
            a += b
            a *= _U64(5)
            a += _N1
            b ^= k2
            _rotl(b, 31, t)
            b += a
            b *= _U64(5)
            b += _N2
            h1[rows], h2[rows] = a, b
        # The tail: bytes 8…15 into h2, bytes 0…7 into h1 (a masked-out word mixes to zero).
        k2 = words[base + 8].astype(_U64)
        k2 &= _MASKS[np.clip(rem - 8, 0, 8)]
        _mix(k2, _C2, 33, _C1, tmp)
        h2 ^= k2
        k1 = words[base].astype(_U64)
        k1 &= _MASKS[np.minimum(rem, 8)]
        _mix(k1, _C1, 31, _C2, tmp)
        h1 ^= k1
        size = lengths.astype(_U64)
        h1 ^= size
        h2 ^= size
        h1 += h2
        h2 += h1
        _fmix(h1, tmp)
        _fmix(h2, tmp)
        h1 += h2
    return h1


def _lengths(units: np.ndarray) -> np.ndarray:
    """Characters of each row of a ``(n, w)`` array of code units: the position after its last
    non-zero one (numpy drops trailing NULs of its strings, so this is the string's length)."""
    n, w = units.shape
    if w == 0:
        return np.zeros(n, dtype=np.int64)
    nonzero = units != 0
    length = w - np.argmax(nonzero[:, ::-1], axis=1)
    last = nonzero[np.arange(n), length - 1]
    return np.where(last, length, 0).astype(np.int64)


def utf8_rows(text: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The UTF-8 bytes of a numpy array of strings (``U``) or bytes (``S``), vectorised:
    ``(buffer, starts, lengths)`` (``str.encode("utf-8")`` of each row, lone surrogates
    encoded as three bytes like any other code point of their range).

    >>> buf, starts, lengths = utf8_rows(np.array(["ab", "é€😀", ""]))
    >>> [bytes(buf[s : s + n]).decode() for s, n in zip(starts, lengths)]
    ['ab', 'é€😀', '']
    """
    arr = np.ascontiguousarray(text.reshape(-1))
    n = arr.size
    if arr.dtype.kind == "S":
        w = arr.dtype.itemsize
        raw = arr.view(np.uint8).reshape(n, w)
        return raw.reshape(-1), np.arange(n, dtype=np.int64) * w, _lengths(raw)
    w = arr.dtype.itemsize // 4
    arr = arr.astype(np.dtype(("U", w)).newbyteorder("="), copy=False)
    cp = arr.view(np.uint32).reshape(n, w)
    lengths = _lengths(cp)
    if not cp.size or int(cp.max()) < 0x80:  # ASCII: one byte a character
        return cp.astype(np.uint8).reshape(-1), np.arange(n, dtype=np.int64) * w, lengths
    inside = np.arange(w)[None, :] < lengths[:, None]
    every = 1 + (cp >= 0x80).astype(np.int64) + (cp >= 0x800) + (cp >= 0x10000)
    every[~inside] = 0
    row_bytes = every.sum(axis=1)
    flat = cp[inside].astype(np.int64)  # the rows' code points, row after row
    width = every[inside]
    at = np.cumsum(width) - width
    out = np.zeros(int(row_bytes.sum()), dtype=np.uint8)
    lead = np.array([0, 0, 0xC0, 0xE0, 0xF0], dtype=np.int64)
    out[at] = np.where(width == 1, flat, lead[width] | (flat >> (6 * (width - 1))))
    for k in (1, 2, 3):  # continuation bytes: 6 bits each, the last k·6 bits in order
        has = width > k
        shift = 6 * (width[has] - 1 - k)
        out[at[has] + k] = 0x80 | ((flat[has] >> shift) & 0x3F)
    starts = np.cumsum(row_bytes) - row_bytes
    return out, starts, row_bytes


class UnitIdError(InputError):
    """A unit id that is missing or not an id; ``row`` is its position in the batch and
    ``problem`` the sentence after it (so a caller can name the row its own way)."""

    def __init__(self, name: str, row: int, problem: str) -> None:
        super().__init__(f"{name}[{row}] {problem}")
        self.row, self.problem = row, problem


def _missing(name: str, index: int, value: Any) -> InputError:
    return UnitIdError(name, index, f"is missing ({value!r}): every row must name its privacy unit")


def _bad(name: str, index: int, value: Any) -> InputError:
    return UnitIdError(
        name,
        index,
        f"= {value!r} is not a unit id: ids are integers or text (one type per column)",
    )


def _first_bad(values: list[Any], name: str, texts: bool) -> InputError:
    """The error naming the first value that is not an id of the batch's type (an error path
    only: it walks the values)."""
    for i, v in enumerate(values):
        if v is None or (isinstance(v, float) and v != v):
            return _missing(name, i, v)
        if texts and not isinstance(v, (str, bytes)):
            return _bad(name, i, v)
        if not texts and (
            isinstance(v, bool) or not isinstance(v, numbers.Integral) or not -(2**63) <= v < 2**64
        ):
            return _bad(name, i, v)
    return InputError(f"{name} holds ids of more than one type: give one column one type")


def _int_keys(arr: np.ndarray, name: str) -> np.ndarray:
    """Keys of a numeric array: integers as themselves (int64 as two's complement), floats
    only when integral (NaN is a missing id)."""
    kind = arr.dtype.kind
    if kind == "u":
        return arr.astype(_U64)
    if kind == "i":
        return arr.astype(np.int64).view(_U64)
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(arr) & (arr == np.floor(arr)) & (np.abs(arr) < 2.0**63)
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        value = arr[i].item()
        raise _missing(name, i, value) if value != value else _bad(name, i, value)
    return arr.astype(np.int64).view(_U64)


def _arrow_keys(col: Any, seed: int, name: str, encode: bool = True) -> np.ndarray:
    """Keys of a pyarrow Array or ChunkedArray of integers, strings or a dictionary of them."""
    import pyarrow as pa

    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if col.null_count:
        i = int(np.flatnonzero(np.asarray(col.is_null()))[0])
        raise _missing(name, i, None)
    t = col.type
    if pa.types.is_dictionary(t):
        keys = _arrow_keys(col.dictionary, seed, name)
        return keys[np.asarray(col.indices, dtype=np.int64)]
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return _int_keys(np.asarray(col.to_numpy(zero_copy_only=False)), name)
    if encode and len(col) > _ENCODE_MIN:
        # A unit has many rows: hash each distinct id once (Arrow's hash table, in C).
        import pyarrow.compute as pc

        encoded = pc.dictionary_encode(col)
        if len(encoded.dictionary) < len(col) // 2:
            keys = _arrow_keys(encoded.dictionary, seed, name, encode=False)
            return keys[np.asarray(encoded.indices, dtype=np.int64)]
    if pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        offsets_type = np.int64
    elif pa.types.is_string(t) or pa.types.is_binary(t):
        offsets_type = np.int32
    else:
        raise InputError(f"{name} is a column of {t}: unit ids are integers or text")
    _, offsets_buf, data_buf = col.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=offsets_type)[col.offset : col.offset + len(col) + 1]
    data = (
        np.zeros(0, dtype=np.uint8) if data_buf is None else np.frombuffer(data_buf, dtype=np.uint8)
    )
    offsets = offsets.astype(np.int64)
    return text_keys(data, offsets[:-1], np.diff(offsets), seed)


def _object_keys(arr: np.ndarray, seed: int, name: str) -> np.ndarray:
    """Keys of an object array (Python ints or texts): read by pyarrow in C when it is
    installed, else classified by numpy (the type of each value, in one C loop)."""
    values = arr.tolist()
    try:
        import pyarrow as pa
    except ImportError:  # pragma: no cover - pyarrow is in the test extras
        pa = None
    if pa is not None:
        try:
            col = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            col = None
        t = None if col is None else col.type
        if (
            t is not None
            and not col.null_count
            and (
                pa.types.is_integer(t)
                or pa.types.is_floating(t)
                or pa.types.is_string(t)
                or pa.types.is_large_string(t)
                or pa.types.is_binary(t)
            )
        ):
            return _arrow_keys(col, seed, name)
    kinds = np.frompyfunc(type, 1, 1)(arr)
    if (kinds == str).all():  # noqa: E721 (an array of types)
        return text_keys(*utf8_rows(np.array(values, dtype=str)), seed)
    if (kinds == bytes).all():  # noqa: E721
        return text_keys(*utf8_rows(np.array(values, dtype=bytes)), seed)
    if (kinds == int).all():  # noqa: E721
        low, high = min(values), max(values)
        if low >= -(2**63) and high < 2**64 and (low >= 0 or high < 2**63):
            return np.array(values, dtype=_U64 if high >= 2**63 else np.int64).view(_U64)
    raise _first_bad(values, name, texts=isinstance(values[0], (str, bytes)))


def unit_keys(ids: Any, seed: int = 0, name: str = "units") -> np.ndarray:
    """One ``uint64`` key per row of ``ids`` (see the module): integers as themselves, texts by
    MurmurHash3 x64_128 with ``seed`` (a 32-bit int; the contribution bounder passes a part of
    its secret key). ``name`` names the argument in errors (the row and its value).

    Accepts a 1-D numpy array, a list, a pandas or polars Series, a pyarrow Array or
    ChunkedArray. Refused: a missing id, a boolean, a non-integral number, a mix of types, an
    array of more than one dimension (a shape is never reinterpreted).

    >>> unit_keys([3, 2.0]).tolist()
    [3, 2]
    >>> unit_keys(np.array([[1, 2]]))
    Traceback (most recent call last):
    ...
    sketchsyn.errors.InputError: units must be one id a row (1-D); got shape (1, 2)
    """
    module = type(ids).__module__.split(".", 1)[0]
    if module == "polars":
        ids = ids.to_arrow()
        module = "pyarrow"
    if module == "pyarrow":
        return _arrow_keys(ids, seed, name)
    if module == "pandas":
        dtype = str(ids.dtype)
        if dtype == "category":
            codes = np.asarray(ids.cat.codes, dtype=np.int64)
            if (codes < 0).any():
                i = int(np.flatnonzero(codes < 0)[0])
                raise _missing(name, i, None)
            cats = np.asarray(ids.cat.categories.to_numpy(), dtype=object)
            return _object_keys(cats, seed, name)[codes] if cats.size else np.zeros(0, _U64)
        if ids.dtype.kind in "iuf":
            return unit_keys(ids.to_numpy(), seed, name)
        try:
            import pyarrow as pa

            return _arrow_keys(pa.array(ids, from_pandas=True), seed, name)
        except ImportError:  # pragma: no cover - pandas strings without pyarrow
            ids = ids.to_numpy(dtype=object)
        except (ValueError, TypeError):
            ids = ids.to_numpy(dtype=object)
    arr = ids if isinstance(ids, np.ndarray) else np.asarray(ids, dtype=object)
    if arr.ndim != 1:
        raise InputError(f"{name} must be one id a row (1-D); got shape {arr.shape}")
    if arr.size == 0:
        return np.zeros(0, dtype=_U64)
    kind = arr.dtype.kind
    if kind in "iuf":
        return _int_keys(arr, name)
    if kind in "US":
        return text_keys(*utf8_rows(arr), seed)
    if kind == "O":
        return _object_keys(arr, seed, name)
    raise _bad(name, 0, arr[0].item())
