"""Versioned, checksummed binary container for every serialisable object (never pickle).

Layout (all integers little-endian)::

    b"SKSY"                     magic
    u16  container version      (CONTAINER_VERSION)
    u8   byte order of arrays   (ord("<"): arrays are always stored little-endian)
    u8   length of kind, then kind (ASCII, e.g. b"CountMinSketch")
    u16  object format version  (the object's own schema version)
    u32  length of header, then header (UTF-8 JSON: metadata and array descriptors)
    ...  array payloads, concatenated, in header order
    32 bytes BLAKE2b digest of everything before it

>>> import numpy as np
>>> blob = pack("Demo", 1, {"width": 4}, {"table": np.arange(4, dtype=np.int64)})
>>> kind, version, meta, arrays = unpack(blob, "Demo")
>>> meta["width"], arrays["table"].tolist()
(4, [0, 1, 2, 3])
>>> unpack(blob[:-1], "Demo")
Traceback (most recent call last):
...
sketchsyn.errors.SerializationError: Demo blob is corrupt: checksum mismatch (truncated or altered).
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Mapping

import numpy as np

from .errors import SerializationError

__all__ = ["CONTAINER_VERSION", "pack", "unpack"]

MAGIC = b"SKSY"
CONTAINER_VERSION = 1
_DIGEST = 32
_ALLOWED_DTYPES = {"<i8", "<u8", "<f8", "<i4", "<u4", "<i1", "<u1", "|i1", "|u1", "|b1"}


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=_DIGEST).digest()


def pack(
    kind: str, version: int, meta: Mapping[str, object], arrays: Mapping[str, np.ndarray]
) -> bytes:
    """Serialise JSON-able ``meta`` and numeric ``arrays`` under ``kind`` and ``version``."""
    kind_b = kind.encode("ascii")
    descriptors = []
    payloads = []
    for name, arr in arrays.items():
        a = np.ascontiguousarray(arr)
        le = a.astype(a.dtype.newbyteorder("<"), copy=False) if a.dtype.byteorder == ">" else a
        dt = le.dtype.str
        if dt not in _ALLOWED_DTYPES:
            raise SerializationError(f"cannot serialise array {name!r} of dtype {a.dtype}")
        descriptors.append({"name": name, "dtype": dt, "shape": list(le.shape)})
        payloads.append(le.tobytes())
    header = json.dumps({"meta": dict(meta), "arrays": descriptors}, sort_keys=True).encode()
    body = b"".join(
        [
            MAGIC,
            struct.pack("<HB", CONTAINER_VERSION, ord("<")),
            struct.pack("<B", len(kind_b)),
            kind_b,
            struct.pack("<HI", int(version), len(header)),
            header,
            *payloads,
        ]
    )
    return body + _digest(body)


def unpack(
    blob: bytes, expected_kind: str | tuple[str, ...]
) -> tuple[str, int, dict, dict[str, np.ndarray]]:
    """Check and decode a blob made by :func:`pack`; return ``(kind, version, meta, arrays)``.

    Raises :class:`SerializationError` for a blob that is not bytes, too short, altered, of
    another kind, or of a container version this release cannot read.
    """
    kinds = (expected_kind,) if isinstance(expected_kind, str) else tuple(expected_kind)
    label = kinds[0]
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise SerializationError(f"{label} blob must be bytes, got {type(blob).__name__}")
    blob = bytes(blob)
    if len(blob) < len(MAGIC) + 4 + _DIGEST or blob[:4] != MAGIC:
        raise SerializationError(f"{label} blob is not a sketchsyn blob (bad magic or too short)")
    body, digest = blob[:-_DIGEST], blob[-_DIGEST:]
    if _digest(body) != digest:
        raise SerializationError(
            f"{label} blob is corrupt: checksum mismatch (truncated or altered)."
        )
    try:
        container, order = struct.unpack_from("<HB", body, 4)
        if container > CONTAINER_VERSION:
            raise SerializationError(
                f"{label} blob has container version {container}; this sketchsyn reads up to "
                f"{CONTAINER_VERSION}. Upgrade sketchsyn."
            )
        if order != ord("<"):
            raise SerializationError(f"{label} blob has unknown byte order {order!r}")
        pos = 7
        (klen,) = struct.unpack_from("<B", body, pos)
        pos += 1
        kind = body[pos : pos + klen].decode("ascii")
        pos += klen
        if kind not in kinds:
            raise SerializationError(f"blob holds a {kind}, expected {' or '.join(kinds)}")
        version, hlen = struct.unpack_from("<HI", body, pos)
        pos += 6
        header = json.loads(body[pos : pos + hlen].decode("utf-8"))
        pos += hlen
        arrays: dict[str, np.ndarray] = {}
        for desc in header["arrays"]:
            if desc["dtype"] not in _ALLOWED_DTYPES:
                raise SerializationError(f"{label} blob has unsupported dtype {desc['dtype']!r}")
            dt = np.dtype(desc["dtype"])
            shape = tuple(int(s) for s in desc["shape"])
            nbytes = dt.itemsize * int(np.prod(shape, dtype=np.int64))
            if pos + nbytes > len(body):
                raise SerializationError(f"{label} blob is truncated in array {desc['name']!r}")
            arr = np.frombuffer(body, dtype=dt, count=nbytes // dt.itemsize, offset=pos)
            arrays[desc["name"]] = arr.reshape(shape).astype(dt.newbyteorder("="), copy=True)
            pos += nbytes
        if pos != len(body):
            raise SerializationError(
                f"{label} blob has {len(body) - pos} unexpected trailing bytes"
            )
    except SerializationError:
        raise
    except (struct.error, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise SerializationError(f"{label} blob is malformed: {exc}") from exc
    return kind, int(version), header["meta"], arrays
