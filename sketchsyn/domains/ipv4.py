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

__all__ = ["dotted_quads", "parse_ipv4"]


_WIDTH = 16  # "255.255.255.255" has 15 characters, and the end of a row closes an octet


def dotted_quads(cols: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(keys, bad)``: int64 addresses and a refusal mask of dotted quads given one row per
    character position (``(16, n)`` uint8; characters at or past ``length`` are ignored).

    Four decimal octets 0…255 of 1–3 ASCII digits without leading zeros, separated by dots:
    what :class:`ipaddress.IPv4Address` accepts. Shared by the parsing of text columns here and
    of access-log lines (:mod:`sketchsyn.io.logread`).

    >>> cols = np.zeros((16, 1), dtype=np.uint8)
    >>> cols[:8, 0] = np.frombuffer(b"10.0.0.1", dtype=np.uint8)
    >>> key, bad = dotted_quads(cols, np.array([8]))
    >>> key.tolist(), bad.tolist()
    ([167772161], [False])
    """
    n = cols.shape[1]
    digit = cols.astype(np.int16) - 48
    is_digit = (digit >= 0) & (digit <= 9)
    is_dot = cols == 46
    bad = length > 15
    key = np.zeros(n, dtype=np.int64)
    acc = np.zeros(n, dtype=np.int16)
    ndig = np.zeros(n, dtype=np.int16)
    fields = np.zeros(n, dtype=np.int16)
    for c in range(_WIDTH):
        inside = length > c
        dig = is_digit[c] & inside
        bad |= inside & ~(is_digit[c] | is_dot[c])
        bad |= dig & (ndig == 1) & (acc == 0)  # a leading zero
        np.copyto(acc, np.minimum(acc, 999) * 10 + digit[c], where=dig)
        ndig += dig
        close = (is_dot[c] & inside) | (length == c)  # a dot or the end closes an octet
        bad |= close & ((ndig == 0) | (ndig > 3) | (acc > 255))
        np.copyto(key, key * 256 + np.minimum(acc, 255), where=close)
        fields += close
        acc[close] = 0
        ndig[close] = 0
    bad |= fields != 4
    return key, bad


def parse_ipv4(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(keys, bad)`` of dotted-quad strings (a 1-D str/bytes array): uint64 keys (0 where
    bad) and the mask of the rows that are not IPv4 addresses, every row at once (an IPv6
    address or junk in a column costs no more than a valid one).

    >>> keys, bad = parse_ipv4(np.array(["10.0.0.1", "2001:db8::1", ""]))
    >>> keys.tolist(), bad.tolist()
    ([167772161, 0, 0], [False, True, True])
    """
    n = arr.shape[0]
    unit = np.uint32 if arr.dtype.kind == "U" else np.uint8  # UCS-4 code points or bytes
    width = arr.dtype.itemsize // np.dtype(unit).itemsize
    if n == 0 or width == 0:
        return np.zeros(n, dtype=_U64), np.ones(n, dtype=bool)
    M = np.ascontiguousarray(arr).view(unit).reshape(n, width)[:, :15]
    length = np.char.str_len(arr)  # characters before the trailing NUL padding
    cols = np.zeros((_WIDTH, n), dtype=np.uint8)  # one row per character position
    cols[: M.shape[1]] = np.minimum(M.T, 255)  # any non-ASCII character stays invalid
    key, bad = dotted_quads(cols, length)
    return np.where(bad, 0, key).astype(_U64), bad


def _parse_ipv4(arr: np.ndarray, what: str = "X") -> np.ndarray:
    """Dotted-quad strings (a 1-D str/bytes array) → uint64 keys, column by column.

    Accepts exactly what :class:`ipaddress.IPv4Address` accepts: four decimal octets 0…255 of
    1–3 ASCII digits without leading zeros, separated by dots. Raises InputError naming the
    first row that is not such an address.
    """
    if arr.shape[0] == 0:
        return np.zeros(0, dtype=_U64)
    key, bad = parse_ipv4(arr)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"{what} row {i} = {_row_text(arr[i])} is not an IPv4 address")
    return key.astype(_U64)
