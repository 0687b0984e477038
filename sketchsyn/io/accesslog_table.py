"""Web-server access logs read as a table: client, time, method, status, bytes and path prefix.

:class:`AccessLogTableReader` reads Common and Combined Log Format lines (Apache's and nginx's
defaults)::

    10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET /api/v1/items?id=3 HTTP/1.1" 200 2326 ...

into Arrow tables with the columns of a schema, chosen among

=========  ===========  ======================================================================
column     kind         value
=========  ===========  ======================================================================
client     ipv4         the first field (an IPv6 client is skipped and counted in ``n_ipv6``)
time       datetime     the bracketed time, converted to UTC
method     categorical  the request's first word (``GET``, ``POST``, …)
status     categorical  the status code as text (``-``: missing), or integer as a number
bytes      numeric      the response size (``-``: 0), or integer
path       categorical  the longest of the schema's path prefixes the request's path starts
                        with, else the path itself (the column's policy ``other`` groups those)
=========  ===========  ======================================================================

A path prefix ``/api`` matches ``/api``, ``/api/…`` and ``/api?…``; ``/`` matches the root
only. A line that does not have this shape (a torn line, garbage) is bad: named, or counted and
skipped with ``on_bad="skip"``. Blank lines are passed over.

:func:`accesslog_schema` is the default schema (``sketchsyn fit --format accesslog --schema
default``), built from public knowledge only: the time range of the log (given by the user), the
standard HTTP methods, the registered HTTP status codes (:data:`STATUS_CODES`, any other code
``"other"``), a public cap on the bytes, on a log scale (sizes span from a few bytes to
gigabytes: its bins are equal in ``log(1 + bytes)``), and a list of path prefixes (given by the
user, or :data:`DEFAULT_PATHS`).

>>> schema = accesslog_schema("2000-10-10", "2000-10-11")
>>> log = ['10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET /api/x?id=3 HTTP/1.0" 200 2326',
...        '::1 - - [10/Oct/2000:13:55:37 -0700] "GET / HTTP/1.0" 200 5',
...        '10.0.0.2 - - [10/Oct/2000:13:55:38 -0700] "POST /upload HTTP/1.1" 404 -']
>>> reader = AccessLogTableReader(log, schema)
>>> rows = [t.to_pylist() for t in reader][0]
>>> rows[0]["client"], str(rows[0]["time"]), rows[0]["method"], rows[0]["path"]
(167772161, '2000-10-10 20:55:36', 'GET', '/api')
>>> rows[1]["status"], rows[1]["bytes"], rows[1]["path"], reader.n_ipv6
('404', 0, '/upload', 1)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..domains.schema import Schema
from ..errors import ParameterError
from .batchreader import BatchReader
from .logread import _WIDTH, ipv4_keys

__all__ = [
    "DEFAULT_BYTES_CAP",
    "DEFAULT_PATHS",
    "FIELDS",
    "METHODS",
    "STATUS_CODES",
    "AccessLogTableReader",
    "accesslog_schema",
]

METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"]
DEFAULT_PATHS = [
    "/",
    "/index.html",
    "/favicon.ico",
    "/robots.txt",
    "/api",
    "/static",
    "/assets",
    "/images",
    "/css",
    "/js",
    "/login",
    "/admin",
    "/wp-admin",
    "/wp-login.php",
]
DEFAULT_BYTES_CAP = 10**9
#: The HTTP status codes of IANA's registry (RFC 9110 and its companions), as text.
STATUS_CODES = [
    str(c)
    for c in (
        [100, 101, 102, 103, *range(200, 209), 226, *range(300, 309), *range(400, 419)]
        + [421, 422, 423, 424, 425, 426, 428, 429, 431, 451, *range(500, 509), 510, 511]
    )
    if c != 306  # unused
]
#: Each column a log gives and the kinds it may have (the first is the default schema's).
FIELDS = {
    "client": ("ipv4",),
    "time": ("datetime",),
    "method": ("categorical",),
    "status": ("categorical", "integer"),
    "bytes": ("numeric", "integer"),
    "path": ("categorical",),
}

_LINE = re.compile(
    rb"(\S+) \S+ \S+ \[(\d\d)/([A-Za-z]{3})/(\d{4}):(\d\d):(\d\d):(\d\d) ([+-])(\d\d)(\d\d)\] "
    rb'"((?:[^"\\]|\\.)*)" (\d{3}|-) (\d+|-)'
)
_MONTHS = {
    m.encode(): f"{i:02d}".encode()
    for i, m in enumerate(
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"], 1
    )
}
_US = 1_000_000


def accesslog_schema(
    since: str,
    until: str,
    paths: Sequence[str] | None = None,
    bytes_cap: int = DEFAULT_BYTES_CAP,
) -> Schema:
    """The default schema of an access log, from public knowledge only.

    ``since`` and ``until`` are the time range the log covers (ISO dates or times, given by
    you: a line outside is dropped and counted); ``paths`` the path prefixes to keep apart (a
    public list of your site's sections; default :data:`DEFAULT_PATHS`), other paths become
    ``"other"``; ``bytes_cap`` clips the response sizes.

    >>> accesslog_schema("2024-01-01", "2024-01-02").names
    ('client', 'time', 'method', 'status', 'bytes', 'path')
    """
    paths = list(DEFAULT_PATHS if paths is None else paths)
    bad = [p for p in paths if not (isinstance(p, str) and p.startswith("/"))]
    if bad or not paths:
        raise ParameterError(
            f"The 'paths' of an access-log schema must be path prefixes starting with '/'. "
            f"Got {bad[0] if bad else 'none'!r} instead."
        )
    return Schema.from_dict(
        {
            "columns": [
                {"name": "client", "kind": "ipv4"},
                {"name": "time", "kind": "datetime", "low": since, "high": until, "policy": "drop"},
                {"name": "method", "kind": "categorical", "categories": METHODS, "policy": "other"},
                {
                    "name": "status",
                    "kind": "categorical",
                    "categories": STATUS_CODES,
                    "policy": "other",
                },
                {
                    "name": "bytes",
                    "kind": "numeric",
                    "low": 0,
                    "high": int(bytes_cap),
                    "scale": "log",
                    "policy": "clip",
                },
                {"name": "path", "kind": "categorical", "categories": paths, "policy": "other"},
            ]
        }
    )


class _Prefixes:
    """The longest listed path prefix of a request path (``/`` matches the root only)."""

    def __init__(self, categories: Sequence[str]) -> None:
        self._exact = {}
        for c in categories:
            key = c if c == "/" else c.rstrip("/")
            self._exact.setdefault(key, c)
        self._depth = max((k.count("/") for k in self._exact), default=1)

    def __call__(self, path: str) -> str:
        path = path.split("?", 1)[0].split("#", 1)[0]
        if path in ("", "/"):
            return self._exact.get("/", path or "/")
        parts = path.split("/")
        for k in range(min(self._depth, len(parts) - 1), 0, -1):
            found = self._exact.get("/".join(parts[: k + 1]))
            if found is not None:
                return found
        return path


class AccessLogTableReader(BatchReader):
    """An access log's lines as Arrow tables of the ``schema``'s columns (see the module).

    Parameters
    ----------
    source : path, ``"-"``, binary file object or iterable of lines
        gzip and zstd are recognised by their first bytes.
    schema : Schema
        Columns among :data:`FIELDS`, each of the kind listed there.
    unit : str, optional
        A privacy unit's column among :data:`FIELDS` that is not in the schema (``"client"``:
        each address's rows are one unit), read after the schema's.
    **kwargs
        ``batch_size``, ``on_bad``, ``skip_rows``, ``resume``, ``threads``: as for
        :class:`~sketchsyn.io.logread.AccessLogReader`.

    Attributes
    ----------
    n_ipv6 : int
        IPv6 client lines skipped so far (not in the IPv4 domain; not bad lines).
    """

    def __init__(self, source: Any, schema: Any, unit: str | None = None, **kwargs: Any) -> None:
        if unit is not None and (unit not in FIELDS or unit in schema.names):
            raise ParameterError(
                f"The privacy unit of an access log is one of its fields {list(FIELDS)} that "
                f"is not in the schema (usually 'client'). Got {unit!r} instead."
            )
        self.unit = unit
        for c in schema._cols:
            want = FIELDS.get(c.name)
            if not want or c.kind not in want:
                raise ParameterError(
                    f"An access-log schema's columns are among {list(FIELDS)} with the kinds "
                    f"{ {k: list(v) for k, v in FIELDS.items()} }; its column {c.name!r} is "
                    f"{c.kind}"
                    + ("" if want else " and not one of them")
                    + " (`sketchsyn schema --accesslog` prints the default)"
                )
        self.table_schema = schema
        self._prefix = _Prefixes(schema.column("path").categories if "path" in schema.names else [])
        super().__init__(source, None, **kwargs)
        self.n_ipv6 = 0

    def _status(self, raw: Sequence[bytes]) -> Any:
        """The status codes as text for a categorical column, else as numbers (``-``: null)."""
        import pyarrow as pa

        names = self.table_schema.names
        if "status" in names and self.table_schema.column("status").kind == "categorical":
            return pa.array([None if s == b"-" else s.decode() for s in raw], pa.string())
        return pa.array([None if s == b"-" else float(s) for s in raw], pa.float64())

    def _parse(self, buf: bytes, first: int, count: int | None) -> tuple[Any, Any, int]:
        import pyarrow as pa

        lines = buf.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        fields: list[tuple[bytes, ...]] = []
        numbers: list[int] = []
        bad: list[tuple[int, str]] = []
        for offset, line in enumerate(lines):
            m = _LINE.match(line)
            if m is not None and b":" not in m.group(1):
                fields.append(m.groups())
                numbers.append(first + offset)
                continue
            token = line.split(None, 1)[0] if line.strip() else b""
            if not token:
                continue  # a blank line
            if b":" in token:
                self.n_ipv6 += 1  # an IPv6 client, not a bad line
                continue
            bad.append((first + offset, _why(line)))
        nums = np.array(numbers, dtype=np.int64)
        cols = list(zip(*fields, strict=True)) if fields else [()] * 13
        keys, ok = _client_keys(cols[0])
        for i in np.flatnonzero(~ok).tolist():
            shown = cols[0][i].decode(errors="replace")
            bad.append((int(nums[i]), f"first field {shown!r} is not an IPv4 address"))
        micros, good_time = _times(cols[1:10])
        for i in np.flatnonzero(ok & ~good_time).tolist():
            bad.append((int(nums[i]), "its time is not a date (day, month or year out of range)"))
        ok &= good_time
        for lineno, why in sorted(bad):  # in line order: "raise" names the first
            self._bad(lineno, why)
        requests = [r.decode("utf-8", "replace").split(" ") for r in cols[10]]
        out = {
            "client": pa.array(keys, pa.int64()),
            "time": pa.array(micros.astype("datetime64[us]"), pa.timestamp("us")),
            "method": pa.array([r[0] if len(r) > 1 else "-" for r in requests], pa.string()),
            "status": self._status(cols[11]),
            "bytes": pa.array([0 if b == b"-" else int(b) for b in cols[12]], pa.int64()),
            "path": pa.array([self._prefix(r[1]) if len(r) > 1 else "-" for r in requests]),
        }
        names = list(self.table_schema.names) + ([self.unit] if self.unit else [])
        table = pa.table({name: out[name] for name in names})
        if not ok.all():
            table, nums = table.filter(pa.array(ok)), nums[ok]
        return table, nums, len(lines)


def _why(line: bytes) -> str:
    shown = line[:80].decode(errors="replace") + ("…" if len(line) > 80 else "")
    return (
        f"{shown!r} is not a Common or Combined Log Format line "
        '(client - user [dd/Mon/yyyy:HH:MM:SS +zzzz] "request" status bytes)'
    )


def _client_keys(tokens: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """IPv4 keys (int64) of first fields and a mask of the ones that are dotted quads."""
    n = len(tokens)
    length = np.array([len(t) for t in tokens], dtype=np.int64)
    padded = b"".join(t[:_WIDTH].ljust(_WIDTH, b"\0") for t in tokens)
    chars = np.frombuffer(padded, dtype=np.uint8).reshape(n, _WIDTH).copy()
    keys, ok = ipv4_keys(chars, length)
    return keys.astype(np.int64), ok


def _times(parts: Sequence[Sequence[bytes]]) -> tuple[np.ndarray, np.ndarray]:
    """Microseconds since 1970 (UTC) of the bracketed times' parts (day, month, year, hours,
    minutes, seconds, offset sign, offset hours, offset minutes), and a mask of the real dates
    (not month 13 nor 30 February)."""
    day, mon, year, hh, mm, ss, sign, oh, om = parts
    n = len(day)
    months = [_MONTHS.get(m.capitalize(), b"13") for m in mon]
    dates = [y + b"-" + m + b"-" + d for y, m, d in zip(year, months, day, strict=True)]
    ok = np.ones(n, dtype=bool)
    try:
        days = np.array(dates, dtype="S10").astype("datetime64[D]").astype(np.int64)
    except ValueError:  # an impossible date: that line alone is flagged
        days = np.zeros(n, dtype=np.int64)
        for i, d in enumerate(dates):
            try:
                days[i] = np.datetime64(d.decode(), "D").astype(np.int64)
            except ValueError:
                ok[i] = False
    hms = zip(hh, mm, ss, strict=True)
    secs = np.array([int(h) * 3600 + int(m) * 60 + int(s) for h, m, s in hms], dtype=np.int64)
    offs = zip(sign, oh, om, strict=True)
    offset = np.array(
        [(1 if s == b"+" else -1) * (int(h) * 60 + int(m)) * 60 for s, h, m in offs],
        dtype=np.int64,
    )
    return (days * 86400 + secs - offset) * _US, ok
