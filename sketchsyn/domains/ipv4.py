"""Vectorised parsing of IPv4 dotted quads into integer keys (for ``BitDomain.ipv4()``).

>>> import numpy as np
>>> _parse_ipv4(np.array(["10.0.0.1", "255.255.255.255"])).tolist()
[167772161, 4294967295]
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from .base import _row_text
from .morton import _U64

__all__: list[str] = []


def _parse_ipv4(arr: np.ndarray, what: str = "X") -> np.ndarray:
    """Dotted-quad strings (a 1-D str/bytes array) → uint64 keys, column by column.

    Accepts exactly what :class:`ipaddress.IPv4Address` accepts: four decimal octets 0…255 of
    1–3 ASCII digits without leading zeros, separated by dots. Raises InputError naming the
    first row that is not such an address.
    """
    n = arr.shape[0]
    if n == 0:
        return np.zeros(0, dtype=_U64)
    unit = np.uint32 if arr.dtype.kind == "U" else np.uint8  # UCS-4 code points or bytes
    width = arr.dtype.itemsize // np.dtype(unit).itemsize
    if width == 0:
        raise InputError(f"{what} row 0 = {_row_text(arr[0])} is not an IPv4 address")
    M = np.ascontiguousarray(arr).view(unit).reshape(n, width)[:, :15]
    length = np.char.str_len(arr)  # characters before the trailing NUL padding
    bad = length > 15  # "255.255.255.255" is the longest address
    # One row per character position (plus a final NUL), so each step reads contiguous memory.
    chars = np.zeros((M.shape[1] + 1, n), dtype=np.uint8)
    chars[:-1] = np.minimum(M.T, 255)  # any non-ASCII character stays invalid
    digit = chars.astype(np.int16) - 48
    is_digit = (digit >= 0) & (digit <= 9)
    is_dot = chars == 46
    key = np.zeros(n, dtype=np.int64)
    acc = np.zeros(n, dtype=np.int16)
    ndig = np.zeros(n, dtype=np.int16)
    fields = np.zeros(n, dtype=np.int16)
    for c in range(chars.shape[0]):
        inside = length > c
        dig = is_digit[c]
        bad |= inside & ~(dig | is_dot[c])  # only digits and dots (a NUL inside is bad)
        bad |= dig & (ndig == 1) & (acc == 0)  # a leading zero
        np.copyto(acc, np.minimum(acc, 999) * 10 + digit[c], where=dig)
        ndig += dig
        cl = (is_dot[c] & inside) | (length == c)  # a dot or the end closes an octet
        bad |= cl & ((ndig == 0) | (ndig > 3) | (acc > 255))
        np.copyto(key, key * 256 + np.minimum(acc, 255), where=cl)
        fields += cl
        acc[cl] = 0
        ndig[cl] = 0
    bad |= fields != 4
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"{what} row {i} = {_row_text(arr[i])} is not an IPv4 address")
    return key.astype(_U64)
