"""Versioned, checksummed binary container for every serialisable object (never pickle).

Layout (all integers little-endian)::

    b"SKSY"                     magic
    u16  container version      (CONTAINER_VERSION)
    u8   byte order of arrays   (ord("<"): arrays are always stored little-endian)
    u8   flags                  (container version >= 2; bit 0: keyed digest)
    u8   state privacy          (container version >= 3; 1: private, 2: trusted)
    u8   length of kind, then kind (ASCII, e.g. b"CountMinSketch")
    u16  object format version  (the object's own schema version)
    u32  length of header, then header (UTF-8 JSON: metadata and array descriptors)
    ...  array payloads, concatenated, in header order
    32 bytes BLAKE2b digest of everything before it (keyed with ``key`` when one is given)

The state-privacy byte says what the saved state is: *private* (public parameters and noisy
values only: ε-DP on its own) or *trusted* (holds exact counts: a curator's checkpoint that must
be kept like the raw data). :func:`header_of` reads it, with the kind and versions, without
loading the blob.

An unkeyed digest detects accidents (truncation, bit rot), not forgery: anyone can recompute it.
A server that loads states sent by collectors should share a secret ``key`` with them
(``to_bytes(key=...)`` / ``from_bytes(..., key=...)``): the digest is then a keyed BLAKE2b MAC,
and a blob altered by anyone without the key is refused. Either way every header field and every
array's dtype and shape is validated before anything is allocated, so a hostile blob raises
:class:`SerializationError` quickly.

>>> import numpy as np
>>> blob = pack("Demo", 1, {"width": 4}, {"table": np.arange(4, dtype=np.int64)}, state="private")
>>> kind, version, meta, arrays = unpack(blob, "Demo")
>>> meta["width"], arrays["table"].tolist()
(4, [0, 1, 2, 3])
>>> unpack(blob[:-1], "Demo")
Traceback (most recent call last):
...
sketchsyn.errors.SerializationError: Demo blob is corrupt: checksum mismatch (truncated or altered).
>>> signed = pack("Demo", 1, {}, {}, key=b"shared secret", state="trusted")
>>> unpack(signed, "Demo", key=b"shared secret")[0]
'Demo'
>>> unpack(signed, "Demo")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
sketchsyn.errors.SerializationError: Demo blob is authenticated with a shared key: pass key=...
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, NamedTuple

import numpy as np

from ..errors import EPSILON_RANGE, SerializationError

__all__ = [
    "Arrays",
    "Blob",
    "CONTAINER_VERSION",
    "STATES",
    "BlobHeader",
    "MetaReader",
    "bad_contents",
    "check_range",
    "check_version",
    "header_of",
    "pack",
    "read",
    "unpack",
]

# The named arrays of a blob, as ``Summary._state`` returns them and ``_from_state`` reads them.
Arrays = dict[str, np.ndarray]

MAGIC = b"SKSY"
CONTAINER_VERSION = 3
STATES = ("private", "trusted")
_STATE_CODES = {"private": 1, "trusted": 2}
_DIGEST = 32
_FLAG_KEYED = 1
_ALLOWED_DTYPES = {"<i8", "<u8", "<f8", "<i4", "<u4", "<i1", "<u1", "|i1", "|u1", "|b1"}
_MAX_HEADER = 1 << 24  # 16 MiB of JSON is far more than any summary's parameters
_MAX_NDIM = 8
_MAX_NESTING = 32


def _digest(data: bytes, key: bytes | None) -> bytes:
    if key is None:
        return hashlib.blake2b(data, digest_size=_DIGEST).digest()
    return hashlib.blake2b(data, digest_size=_DIGEST, key=key).digest()


def _check_key(key: object) -> bytes | None:
    if key is None:
        return None
    if isinstance(key, str):
        key = key.encode("utf-8")
    if not isinstance(key, (bytes, bytearray)) or not 1 <= len(key) <= 64:
        raise SerializationError(
            "The 'key' parameter must be None or 1 to 64 bytes (or a str) shared by the writer "
            f"and the reader. Got {type(key).__name__} of that size instead."
        )
    return bytes(key)


def pack(
    kind: str,
    version: int,
    meta: Mapping[str, object],
    arrays: Mapping[str, np.ndarray],
    *,
    state: str,
    key: bytes | str | None = None,
) -> bytes:
    """Serialise JSON-able ``meta`` and numeric ``arrays`` under ``kind`` and ``version``.

    ``state`` is ``"private"`` or ``"trusted"``: what the saved state reveals, written into the
    container header. With ``key`` (1 to 64 bytes, shared with the reader) the digest is a keyed
    BLAKE2b MAC.
    """
    key = _check_key(key)
    if state not in _STATE_CODES:
        raise SerializationError(f"state must be one of {STATES}, got {state!r}")
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
    header = json.dumps(
        {"meta": dict(meta), "arrays": descriptors}, sort_keys=True, allow_nan=False
    ).encode()
    flags = _FLAG_KEYED if key is not None else 0
    body = b"".join(
        [
            MAGIC,
            struct.pack("<HBBB", CONTAINER_VERSION, ord("<"), flags, _STATE_CODES[state]),
            struct.pack("<B", len(kind_b)),
            kind_b,
            struct.pack("<HI", int(version), len(header)),
            header,
            *payloads,
        ]
    )
    return body + _digest(body, key)


def _depth(value: Any, limit: int) -> int:
    """Nesting depth of a JSON value, stopping at ``limit``. Only containers are walked: a long
    list of numbers or text (a schema's categories) costs one C-level filter, not a step each.

    >>> _depth({"a": [1, [2, {"b": 3}]], "c": "x" * 3}, 32)
    4
    """
    containers = (dict, list)
    stack = [(value, 1)] if isinstance(value, containers) else []
    deepest = 1 if stack else 0
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if deepest > limit:
            return deepest
        values = list(item.values()) if isinstance(item, dict) else item
        kinds = set(map(type, values))
        inner = (
            [v for v in values if type(v) in (dict, list)]
            if (dict in kinds or list in kinds)
            else []
        )
        if inner:
            stack.extend(zip(inner, [level + 1] * len(inner), strict=True))
        else:
            deepest = max(deepest, level)
    return deepest


class _NonFinite:
    """Marks a NaN or ±Infinity in a header, so the refusal can name the field holding it."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _non_finite_field(value: Any, target: Any, path: str = "") -> str | None:
    """The path of the field that holds ``target`` (a :class:`_NonFinite` the parser made).
    Lists are searched by C-level passes (identity, then the types of their items), so a long
    list of numbers or text costs no step per item."""
    stack = [(value, path)]
    while stack:
        item, where = stack.pop()
        if item is target:
            return where
        if isinstance(item, dict):
            stack.extend((v, f"{where}.{k}" if where else str(k)) for k, v in item.items())
        elif isinstance(item, list):
            if target in item:  # identity first: a C-level pass
                return f"{where}[{item.index(target)}]"
            kinds = set(map(type, item))
            if dict in kinds or list in kinds:
                stack.extend(
                    (v, f"{where}[{i}]") for i, v in enumerate(item) if type(v) in (dict, list)
                )
    return None


class BlobHeader(NamedTuple):
    """What a blob's fixed header says (read by :func:`header_of` before any checksum)."""

    container: int
    kind: str
    version: int
    state: str | None  # "private", "trusted", or None for a container older than version 3


def header_of(blob: bytes) -> BlobHeader:
    """The container version, kind, object format version and state privacy a blob declares.

    Nothing is verified (not even the checksum): this is for routing a blob to its reader and
    for a server deciding whether to accept a trusted state at all.

    >>> header_of(pack("Demo", 4, {}, {}, state="trusted"))
    BlobHeader(container=3, kind='Demo', version=4, state='trusted')
    """
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise SerializationError(f"a sketchsyn blob must be bytes, got {type(blob).__name__}")
    blob = bytes(blob)
    if len(blob) < len(MAGIC) + 4 + _DIGEST or blob[:4] != MAGIC:
        raise SerializationError("not a sketchsyn blob (bad magic or too short)")
    try:
        container, _order = struct.unpack_from("<HB", blob, 4)
        if container > CONTAINER_VERSION or container < 1:
            raise SerializationError(
                f"blob has container version {container}; this sketchsyn reads 1 to "
                f"{CONTAINER_VERSION}. Upgrade sketchsyn."
            )
        pos = 7 + (container >= 2)
        state = None
        if container >= 3:
            code = blob[pos]
            states = {v: k for k, v in _STATE_CODES.items()}
            if code not in states:
                raise SerializationError(f"blob header field 'state' has an unknown code {code}")
            state = states[code]
            pos += 1
        klen = blob[pos]
        kind = blob[pos + 1 : pos + 1 + klen].decode("ascii")
        (version,) = struct.unpack_from("<H", blob, pos + 1 + klen)
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise SerializationError(f"blob has a malformed header: {exc}") from exc
    return BlobHeader(container, kind, version, state)


class Blob(NamedTuple):
    """A decoded blob: kind, object format version, declared state privacy, header, arrays."""

    kind: str
    version: int
    state: str | None
    meta: dict
    arrays: dict[str, np.ndarray]


def unpack(
    blob: bytes,
    expected_kind: str | tuple[str, ...],
    *,
    key: bytes | str | None = None,
) -> tuple[str, int, dict, dict[str, np.ndarray]]:
    """Check and decode a blob made by :func:`pack`; return ``(kind, version, meta, arrays)``.

    :func:`read` returns the same with the declared state privacy.
    """
    got = read(blob, expected_kind, key=key)
    return got.kind, got.version, got.meta, got.arrays


def read(
    blob: bytes,
    expected_kind: str | tuple[str, ...],
    *,
    key: bytes | str | None = None,
) -> Blob:
    """Check and decode a blob made by :func:`pack`.

    Raises :class:`SerializationError` for a blob that is not bytes, too short, altered, of
    another kind, of a container version this release cannot read, keyed when no ``key`` is
    given (or the reverse), or whose header or array descriptors are malformed. Array sizes are
    checked against the blob's length before any array is copied.
    """
    key = _check_key(key)
    kinds = (expected_kind,) if isinstance(expected_kind, str) else tuple(expected_kind)
    label = kinds[0]
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise SerializationError(f"{label} blob must be bytes, got {type(blob).__name__}")
    blob = bytes(blob)
    if len(blob) < len(MAGIC) + 4 + _DIGEST or blob[:4] != MAGIC:
        raise SerializationError(f"{label} blob is not a sketchsyn blob (bad magic or too short)")
    body, digest = blob[:-_DIGEST], blob[-_DIGEST:]
    container, order = struct.unpack_from("<HB", body, 4)
    if container > CONTAINER_VERSION or container < 1:
        raise SerializationError(
            f"{label} blob has container version {container}; this sketchsyn reads 1 to "
            f"{CONTAINER_VERSION}. Upgrade sketchsyn."
        )
    pos = 7
    flags = 0
    if container >= 2:
        flags = body[pos]
        pos += 1
        if flags & ~_FLAG_KEYED:
            raise SerializationError(f"{label} blob has unknown flags {flags:#x}")
    state = None
    if container >= 3:
        code = body[pos] if pos < len(body) else -1
        pos += 1
        for name, value in _STATE_CODES.items():
            if value == code:
                state = name
        if state is None:
            raise SerializationError(
                f"{label} blob header field 'state' has an unknown code {code}"
            )
    keyed = bool(flags & _FLAG_KEYED)
    if keyed and key is None:
        raise SerializationError(
            f"{label} blob is authenticated with a shared key: pass key= to load it"
        )
    if key is not None and not keyed:
        raise SerializationError(
            f"{label} blob is not authenticated, but a key was given: refusing an unsigned blob"
        )
    if _digest(body, key) != digest:
        if keyed:
            raise SerializationError(
                f"{label} blob failed authentication: altered, or signed with another key."
            )
        raise SerializationError(
            f"{label} blob is corrupt: checksum mismatch (truncated or altered)."
        )
    try:
        if order != ord("<"):
            raise SerializationError(f"{label} blob has unknown byte order {order!r}")
        (klen,) = struct.unpack_from("<B", body, pos)
        pos += 1
        kind = body[pos : pos + klen].decode("ascii")
        pos += klen
        if kind not in kinds:
            raise SerializationError(f"blob holds a {kind}, expected {' or '.join(kinds)}")
        version, hlen = struct.unpack_from("<HI", body, pos)
        pos += 6
        if hlen > min(_MAX_HEADER, len(body) - pos):
            raise SerializationError(f"{label} blob declares a header of {hlen} bytes")
        constants: list[_NonFinite] = []

        def constant(text: str) -> _NonFinite:
            constants.append(_NonFinite(text))
            return constants[-1]

        header = json.loads(body[pos : pos + hlen].decode("utf-8"), parse_constant=constant)
        bad = None
        if constants:  # walk the header for the field's name only when there is one to name
            meta = header.get("meta") if isinstance(header, dict) else header
            bad = (_non_finite_field(meta, constants[0]) or "header", constants[0].text)
        if bad is not None:
            raise SerializationError(
                f"{label} blob header field {bad[0]!r} must be a finite number, got {bad[1]}"
            )
        pos += hlen
        if (
            not isinstance(header, dict)
            or not isinstance(header.get("meta"), dict)
            or not isinstance(header.get("arrays"), list)
        ):
            raise SerializationError(f"{label} blob header is not a meta/arrays record")
        if _depth(header["meta"], _MAX_NESTING) > _MAX_NESTING:
            raise SerializationError(f"{label} blob header is nested too deeply")
        arrays: dict[str, np.ndarray] = {}
        for desc in header["arrays"]:
            name, dt, shape = _descriptor(desc, label)
            if name in arrays:
                raise SerializationError(f"{label} blob repeats array {name!r}")
            count = math.prod(shape)
            nbytes = dt.itemsize * count
            if nbytes > len(body) - pos:
                raise SerializationError(f"{label} blob is truncated in array {name!r}")
            arr = np.frombuffer(body, dtype=dt, count=count, offset=pos)
            arrays[name] = arr.reshape(shape).astype(dt.newbyteorder("="), copy=True)
            pos += nbytes
        if pos != len(body):
            raise SerializationError(
                f"{label} blob has {len(body) - pos} unexpected trailing bytes"
            )
    except SerializationError:
        raise
    except (struct.error, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise SerializationError(f"{label} blob is malformed: {exc}") from exc
    except RecursionError as exc:
        raise SerializationError(f"{label} blob header is nested too deeply") from exc
    return Blob(kind, int(version), state, header["meta"], arrays)


def check_version(kind: str, version: int, reads: int | tuple[int, ...], note: str = "") -> None:
    """Refuse a schema ``version`` of ``kind`` that this release cannot read (``reads``: the one
    version it writes, or all it reads); ``note`` says what changed.

    >>> check_version("Thing", 2, 2)
    >>> check_version("Thing", 1, 2, "version 1 held one counter per cell")
    Traceback (most recent call last):
    ...
    sketchsyn.errors.SerializationError: Thing format version 1 is not readable by this sketchsyn (it reads version 2; version 1 held one counter per cell)
    """  # noqa: E501
    versions = (reads,) if isinstance(reads, int) else tuple(reads)
    if version in versions:
        return
    said = (
        f"version {versions[0]}"
        if len(versions) == 1
        else f"versions {min(versions)} to {max(versions)}"
    )
    raise SerializationError(
        f"{kind} format version {version} is not readable by this sketchsyn (it reads {said}"
        + (f"; {note})" if note else ")")
    )


@contextmanager
def bad_contents(kind: str) -> Iterator[None]:
    """Read a blob's contents inside this block: a ``KeyError``, ``TypeError`` or
    ``ValueError`` (a missing field, a wrong type, a value out of range) becomes a
    :class:`SerializationError` naming ``kind``; a :class:`SerializationError` passes as is.

    >>> with bad_contents("Thing"):
    ...     {}["t"]
    Traceback (most recent call last):
    ...
    sketchsyn.errors.SerializationError: Thing blob has bad contents: 't'
    """
    try:
        yield
    except SerializationError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise SerializationError(f"{kind} blob has bad contents: {exc}") from exc


def _descriptor(desc: object, label: str) -> tuple[str, np.dtype, tuple[int, ...]]:
    """Validate one array descriptor: a name, an allowed dtype and a small non-negative shape."""
    if not isinstance(desc, dict):
        raise SerializationError(f"{label} blob has a malformed array descriptor")
    name, dtype, shape = desc.get("name"), desc.get("dtype"), desc.get("shape")
    if not isinstance(name, str) or not isinstance(dtype, str) or dtype not in _ALLOWED_DTYPES:
        raise SerializationError(f"{label} blob has unsupported array {name!r} of dtype {dtype!r}")
    if (
        not isinstance(shape, list)
        or len(shape) > _MAX_NDIM
        or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in shape)
    ):
        raise SerializationError(f"{label} blob array {name!r} has an invalid shape {shape!r}")
    return name, np.dtype(dtype), tuple(shape)


class MetaReader:
    """Typed access to a blob's header fields; every failure is a :class:`SerializationError`.

    >>> r = MetaReader({"width": 4, "frozen": False}, "Demo")
    >>> r.int("width", minimum=1), r.bool("frozen")
    (4, False)
    >>> r.int("depth")
    Traceback (most recent call last):
    ...
    sketchsyn.errors.SerializationError: Demo blob header lacks the field 'depth'
    """

    def __init__(self, meta: Mapping[str, Any], label: str) -> None:
        self._meta = meta
        self._label = label
        self._ints: dict[str, int] = {}  # integer fields read so far: what arrays are sized by
        self._read: set[str] = set()  # fields asked for (read or matched) so far: see done()
        self._arrays_read: set[str] = set()  # arrays asked for so far

    def _fail(self, name: str, what: str) -> SerializationError:
        value = self._meta.get(name)
        text = repr(value)
        if len(text) > 60:
            text = text[:57] + "..."
        return SerializationError(
            f"{self._label} blob header field {name!r} must be {what}, got {text}"
        )

    def _get(self, name: str, default: Any) -> Any:
        self._read.add(name)
        if name not in self._meta:
            if default is _MISSING:
                raise SerializationError(f"{self._label} blob header lacks the field {name!r}")
            return default
        return self._meta[name]

    def value(self, name: str) -> Any:
        """The field as stored (for a value its own reader checks); missing: refused."""
        return self._get(name, _MISSING)

    def get(self, name: str, default: Any = None) -> Any:
        """The field as stored, or ``default`` when the header lacks it."""
        return self._get(name, default)

    def domain(self, name: str = "domain", kind: str | None = None) -> Any:
        """The field as a :class:`~sketchsyn.domains.Domain` (``kind``: only that class, e.g.
        ``"Box"``); a malformed record is refused naming the field."""
        from .. import domains
        from ..errors import ParameterError

        data = self.dict(name)
        try:
            if kind is None:
                return domains.domain_from_dict(data)
            return getattr(domains, kind).from_dict(data)
        except (ParameterError, KeyError, TypeError, ValueError) as exc:
            raise SerializationError(
                f"{self._label} blob header field {name!r} is not a valid domain: {exc}"
            ) from exc

    @contextmanager
    def inside(self, name: str) -> Iterator[None]:
        """Load a summary stored inside array ``name`` in this block: its refusal names the
        array (``"Outer blob array 'inner' holds a bad blob: ..."``)."""
        try:
            yield
        except SerializationError as exc:
            raise SerializationError(
                f"{self._label} blob array {name!r} holds a bad blob: {exc}"
            ) from exc

    def nested(self, arrays: Mapping[str, np.ndarray], name: str, cls: Any, **kwargs: Any) -> Any:
        """The summary of class ``cls`` stored as the 1-D byte array ``name`` (``kwargs`` go to
        ``cls.from_bytes``); every refusal names the array."""
        self._arrays_read.add(name)
        raw = arrays.get(name)
        if raw is None or raw.dtype != np.uint8 or raw.ndim != 1:
            raise SerializationError(f"{self._label} blob array {name!r} must be 1-D bytes")
        with self.inside(name):
            return cls.from_bytes(raw.tobytes(), **kwargs)

    def lineage(self) -> Any:
        """The ``lineage`` field as a :class:`~sketchsyn.privacy.lineage.Lineage` (checked)."""
        from ..privacy.lineage import Lineage

        self._read.add("lineage")
        return Lineage.from_meta(self._meta.get("lineage"), self._label)

    def names(self) -> set[str]:
        """The header's field names (to refuse unknown ones)."""
        return set(self._meta)

    def as_dict(self) -> dict[str, Any]:
        """A copy of the header (to rewrite an older format's fields before reading them)."""
        return dict(self._meta)

    def has(self, name: str) -> bool:
        return name in self._meta

    def int(
        self,
        name: str,
        minimum: int | None = None,
        maximum: int | None = None,
        default: Any = None,
    ) -> int:
        value = self._get(name, _MISSING if default is None else default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._fail(name, "an int")
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            raise self._fail(name, f"an int in [{minimum}, {maximum}]")
        self._ints[name] = value
        return value

    def optional_int(
        self,
        name: str,
        minimum: int | None = None,
        maximum: int | None = None,
        *,
        present: bool = False,
    ) -> int | None:
        """An int or ``None`` (null); ``present``: the field must be in the header even when
        null (a field the writer always writes), else a missing field is ``None``."""
        if self._get(name, _MISSING if present else None) is None:
            return None
        return self.int(name, minimum=minimum, maximum=maximum)

    def float(
        self,
        name: str,
        positive: bool = False,
        optional: bool = False,
        minimum: float | None = None,
        maximum: float | None = None,
    ) -> float | None:
        """A finite number (``positive``: > 0), inside ``[minimum, maximum]`` when given."""
        value = self._get(name, None if optional else _MISSING)
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._fail(name, "a number")
        if isinstance(value, int) and abs(value) > 2**1000:
            raise self._fail(name, "a finite number")
        value = float(value)
        if not math.isfinite(value) or (positive and value <= 0):
            raise self._fail(name, "a finite number" + (" > 0" if positive else ""))
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            raise self._fail(name, f"a number in [{minimum:g}, {maximum:g}]")
        return value

    def epsilon(self, name: str = "epsilon", optional: bool = False) -> float | None:
        """A privacy budget inside the range every mechanism can realise
        (:data:`sketchsyn.errors.EPSILON_RANGE`)."""
        low, high = EPSILON_RANGE
        return self.float(name, positive=True, optional=optional, minimum=low, maximum=high)

    def bool(self, name: str, default: Any = None) -> bool:
        value = self._get(name, _MISSING if default is None else default)
        if not isinstance(value, bool):
            raise self._fail(name, "true or false")
        return value

    def str(self, name: str, choices: tuple[str, ...] | None = None) -> str:
        value = self._get(name, _MISSING)
        if not isinstance(value, str) or (choices is not None and value not in choices):
            raise self._fail(name, "a string" if choices is None else f"one of {choices}")
        return value

    def dict(self, name: str) -> dict:
        value = self._get(name, _MISSING)
        if not isinstance(value, dict):
            raise self._fail(name, "a record")
        return value

    def counts(self, name: str, max_keys: int = 256) -> dict[str, int]:
        """An optional record of named exact counts (``{"hour:clipped": 3}``): at most
        ``max_keys`` string keys, each an int in ``[0, 2**63)``; absent gives ``{}``."""
        value = self._get(name, {})
        if not isinstance(value, dict) or len(value) > max_keys:
            raise self._fail(name, f"a record of at most {max_keys} counts")
        for key, n in value.items():
            if not isinstance(key, str) or isinstance(n, bool) or not isinstance(n, int):
                raise self._fail(name, "a record of str keys and int counts")
            if not 0 <= n < 2**63:
                raise self._fail(name, "a record of counts in [0, 2**63)")
        return dict(value)

    def array(
        self,
        arrays: Mapping[str, np.ndarray],
        name: str,
        dtype: Any,
        shape: tuple[int, ...],
    ) -> np.ndarray:
        """The array ``name`` with exactly ``dtype`` and ``shape`` (else SerializationError)."""
        self._arrays_read.add(name)
        arr = arrays.get(name)
        if arr is None:
            raise SerializationError(f"{self._label} blob lacks the array {name!r}")
        if arr.dtype != np.dtype(dtype) or arr.shape != tuple(shape):
            fields = ", ".join(f"{k}={v}" for k, v in list(self._ints.items())[-6:])
            raise SerializationError(
                f"{self._label} blob array {name!r} is {arr.dtype}{list(arr.shape)}, "
                f"expected {np.dtype(dtype)}{list(shape)} from its parameters"
                + (f" (header fields {fields})" if fields else "")
            )
        if arr.dtype.kind == "f" and arr.size and not np.isfinite(arr).all():
            raise SerializationError(f"{self._label} blob array {name!r} holds NaN or infinity")
        return arr

    def bounded(
        self,
        arrays: Mapping[str, np.ndarray],
        name: str,
        dtype: Any,
        shape: tuple[int, ...],
        low: float,
        high: float,
    ) -> np.ndarray:
        """:meth:`array`, whose values all lie in ``[low, high]`` (:func:`check_range`).

        >>> r = MetaReader({}, "Demo")
        >>> r.bounded({"x": np.array([-2**63], dtype=np.int64)}, "x", np.int64, (1,), -9, 9)
        Traceback (most recent call last):
        ...
        sketchsyn.errors.SerializationError: Demo blob array 'x' holds -9223372036854775808, outside [-9, 9]
        """  # noqa: E501
        arr = self.array(arrays, name, dtype, shape)
        check_range(arr, low, high, f"{self._label} blob array {name!r}")
        return arr

    def matches(self, params: Mapping[str, Any]) -> None:
        """Each of ``params`` (the fields an object rebuilt from this header writes) is in the
        header with exactly that value: a field the loader derives from others (or rebuilds)
        cannot hold anything else.

        >>> MetaReader({"k": 4, "release_k": 9}, "Demo").matches({"k": 4, "release_k": 4})
        Traceback (most recent call last):
        ...
        sketchsyn.errors.SerializationError: Demo blob header field 'release_k' must be 4 (what the other fields give), got 9
        """  # noqa: E501
        for name, want in params.items():
            got = self._get(name, _MISSING)
            if got != want or isinstance(got, bool) != isinstance(want, bool):
                raise self._fail(name, f"{want!r} (what the other fields give)")

    def done(self, arrays: Mapping[str, np.ndarray]) -> None:
        """Refuse a header field or an array that the loader never asked for: the blob holds
        something its class does not write (call it last, after every field and array is read).

        >>> r = MetaReader({"width": 4, "extra": 1}, "Demo")
        >>> r.int("width")
        4
        >>> r.done({})
        Traceback (most recent call last):
        ...
        sketchsyn.errors.SerializationError: Demo blob header holds the unknown field(s) ['extra']
        """
        unknown = sorted(set(self._meta) - self._read)
        if unknown:
            raise SerializationError(
                f"{self._label} blob header holds the unknown field(s) {unknown}"
            )
        extra = sorted(set(arrays) - self._arrays_read)
        if extra:
            raise SerializationError(f"{self._label} blob holds the unknown array(s) {extra}")


def check_range(arr: np.ndarray, low: float, high: float, what: str) -> None:
    """Refuse (:class:`SerializationError` naming ``what``) an array with a value outside
    ``[low, high]``. The extremes are compared, never negated: ``np.abs`` of the int64 minimum
    is itself (negative), so a check on ``abs(x)`` lets ``-2**63`` through.

    >>> check_range(np.array([3, -2**63], dtype=np.int64), -(2**52), 2**52, "array 'noise'")
    Traceback (most recent call last):
    ...
    sketchsyn.errors.SerializationError: array 'noise' holds -9223372036854775808, outside [-4503599627370496, 4503599627370496]
    """  # noqa: E501
    if not arr.size:
        return
    lo, hi = arr.min().item(), arr.max().item()
    for value in (lo, hi):
        if not low <= value <= high:
            raise SerializationError(f"{what} holds {value!r}, outside [{low!r}, {high!r}]")


_MISSING: Any = object()
