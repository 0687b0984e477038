"""Web-server access logs → IPv4 keys, a whole block of lines parsed at once with numpy.

The client address is the first whitespace-separated field of each line (Common and Combined Log
Format, nginx's default). A block is parsed in one vectorised pass: line ends, the end of each
first field, its characters as a small matrix, the four octets. Every line gets its own verdict
in that pass, so a bad line costs O(1): it is never a reason to parse its block again.

- an IPv6 client (a first field with a ``:``) is skipped and counted in ``n_ipv6``, whatever
  ``on_bad`` says: IPv6 addresses are not in the IPv4 domain, they are not malformed;
- any other first field that is not a dotted-quad IPv4 address (a torn line, garbage) is bad;
- blank lines are passed over.

>>> log = [
...     '10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.0" 200 2326',
...     '::1 - - [10/Oct/2000:13:55:37 -0700] "GET / HTTP/1.0" 200 2326',
...     'garbage',
...     '192.168.1.7 - - [10/Oct/2000:13:55:38 -0700] "GET /a HTTP/1.0" 404 0',
... ]
>>> reader = AccessLogReader(log, on_bad="skip")
>>> [b.tolist() for b in reader], reader.n_ipv6, reader.bad_lines, reader.lines.tolist()
([[167772161, 3232235783]], 1, [3], [1, 4])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..domains.ipv4 import dotted_quads
from .batchreader import BatchReader, Position

__all__ = ["AccessLogReader", "ipv4_keys"]

_WIDTH = 16  # "255.255.255.255" has 15 characters


def ipv4_keys(chars: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(keys, ok)`` of dotted quads given as a ``(n, 16)`` uint8 matrix and their lengths.

    Accepts what :class:`ipaddress.IPv4Address` accepts: four decimal octets 0…255 of 1–3 ASCII
    digits without leading zeros, separated by dots; ``ok`` is False for every other row.

    >>> m = np.zeros((2, 16), dtype=np.uint8)
    >>> m[0, :8] = np.frombuffer(b"10.0.0.1", dtype=np.uint8)
    >>> m[1, :5] = np.frombuffer(b"1.2.3", dtype=np.uint8)
    >>> keys, ok = ipv4_keys(m, np.array([8, 5]))
    >>> keys[ok].tolist(), ok.tolist()
    ([167772161], [True, False])
    """
    cols = np.ascontiguousarray(chars[:, :_WIDTH].T)
    key, bad = dotted_quads(cols, length)
    return key.astype(np.uint64), ~bad


class AccessLogReader(BatchReader):
    """Client IPv4 addresses of an access log as ``uint64`` keys for ``BitDomain.ipv4()``.

    Parameters
    ----------
    source : path, ``"-"``, binary file object or iterable of lines
        gzip and zstd are recognised by their first bytes.
    batch_size : int
        Lines per batch (the memory bound).
    on_bad : {"raise", "skip"}
        A line whose first field is not an IPv4 address (IPv6 lines excepted: they are skipped
        and counted in ``n_ipv6``).
    skip_rows, resume, threads
        See :class:`~sketchsyn.io.batchreader.BatchReader`.

    Attributes
    ----------
    n_ipv6 : int
        IPv6 client lines skipped so far.
    n_blocks : int
        Blocks parsed so far (each once, whatever its bad lines).
    """

    def __init__(
        self,
        source: Any,
        *,
        batch_size: int = 65536,
        on_bad: str = "raise",
        skip_rows: int = 0,
        resume: Position | None = None,
        threads: bool | None = None,
    ) -> None:
        super().__init__(
            source,
            None,
            batch_size=batch_size,
            on_bad=on_bad,
            skip_rows=skip_rows,
            resume=resume,
            threads=threads,
        )
        self.n_ipv6 = 0
        self.n_blocks = 0

    def _parse(self, buf: bytes, first: int, count: int | None) -> tuple[np.ndarray, Any, int]:
        self.n_blocks += 1
        raw = np.frombuffer(buf, dtype=np.uint8)
        ends = np.flatnonzero(raw == 10)
        n = ends.size
        starts = np.empty(n, dtype=np.int64)
        starts[0] = 0
        starts[1:] = ends[:-1] + 1
        space = np.flatnonzero((raw == 32) | (raw == 9) | (raw == 13))
        j = np.searchsorted(space, starts)
        nxt = np.where(j < space.size, space[np.minimum(j, max(space.size - 1, 0))], ends)
        stop = np.minimum(nxt, ends) if space.size else ends
        length = stop - starts
        idx = np.minimum(starts[:, None] + np.arange(_WIDTH), len(buf) - 1)
        chars = raw[idx]
        chars[np.arange(_WIDTH)[None, :] >= length[:, None]] = 0
        keys, ok = ipv4_keys(chars, length)
        ok &= length > 0
        if ok.all():
            return keys, None, n
        colon = np.flatnonzero(raw == 58)
        jc = np.searchsorted(colon, starts)
        has_colon = (jc < colon.size) & (colon[np.minimum(jc, max(colon.size - 1, 0))] < stop)
        ipv6 = ~ok & has_colon & (length > 0)
        self.n_ipv6 += int(ipv6.sum())
        keep_keys = [keys[ok]]
        keep_nums = [first + np.flatnonzero(ok)]
        for i in np.flatnonzero(~ok & ~ipv6).tolist():  # O(1) each: look at that line alone
            line = buf[int(starts[i]) : int(ends[i])]
            token = line.split(None, 1)[0] if line.strip() else b""
            if not token:
                continue  # a blank line
            key = self._one(token)
            if key is None:
                if b":" in token:
                    self.n_ipv6 += 1
                    continue
                shown = token.decode(errors="replace")
                self._bad(first + i, f"first field {shown!r} is not an IPv4 address")
                continue
            keep_keys.append(np.array([key], dtype=np.uint64))
            keep_nums.append(np.array([first + i]))
        keys_out = np.concatenate(keep_keys)
        nums = np.concatenate(keep_nums).astype(np.int64)
        order = np.argsort(nums, kind="stable")
        return keys_out[order], nums[order], n

    @staticmethod
    def _one(token: bytes) -> int | None:
        """The key of one first field (an address after leading blanks), or None."""
        if len(token) > 15:
            return None
        m = np.zeros((1, _WIDTH), dtype=np.uint8)
        m[0, : len(token)] = np.frombuffer(token, dtype=np.uint8)
        keys, ok = ipv4_keys(m, np.array([len(token)]))
        return int(keys[0]) if ok[0] else None
