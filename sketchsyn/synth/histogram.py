"""Exact counts of the cells of one Morton level: the state shared by PMM, PSMM and the grid.

Offline mechanisms keep exact (not yet private) counts while the data streams in and draw their
noise once, at ``release()``; after that, updates raise. The state before the release is **not
private**: keep it with the data holder.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..errors import (
    IncompatibleError,
    InputError,
    ParameterError,
    ReleasedError,
    SerializationError,
    check_bool,
    check_domain,
    check_int,
    check_memory,
)
from ..io.checkpoint import Checkpointable
from ..io.serial import MetaReader, pack, unpack
from ..io.stream import consume
from ..privacy.lineage import Lineage, UsageGuard, state_digest
from ..privacy.rng import RNGLike, as_source
from ..synth.distribution import PrivateDistribution

__all__ = ["LevelCounts"]

_MAX_LEVEL = 30  # 2**30 int64 counters = 8 GiB: beyond that no machine here holds the state
_VERSION = 2  # 2: lineage, released flag and the release in the blob; diagnostics on request
_STATE_FIELDS = ("frozen", "lineage", "released", "diagnostics")


class LevelCounts(Checkpointable, abc.ABC):
    """Base class: exact counts of the ``2**level`` cells of one level of ``domain``.

    Subclasses give :meth:`_release_now` (draw the noise, return the release) and
    :meth:`_from_params` (rebuild from a blob's header). The base class owns the state, the
    protocol and the release guard: a summary is released once; every copy of it (snapshot,
    deepcopy, pickle, bytes) shares its lineage, so in one process a copy of the released state
    returns the same release and any other copy refuses; a released blob carries the release.
    """

    _kind = "LevelCounts"

    def __init__(
        self, domain: Any, level: int, rng: RNGLike, owner: str, level_name: str = "depth"
    ) -> None:
        self._domain = check_domain(domain, owner)
        limit = min(int(domain.max_depth), _MAX_LEVEL)
        self._level = check_int(level, level_name, owner, minimum=1, maximum=limit)
        check_memory(
            16 * 2**self._level,
            owner,
            f"2**{self._level} exact int64 counters and their noisy copy at release",
        )
        self._counts = np.zeros(2**self._level, dtype=np.int64)
        self._source = as_source(rng)
        self._n_seen = 0
        self._n_dropped = 0
        self._frozen = False
        # Exact counts hold no noise yet: the identity is random (the release draws it).
        self._lineage = Lineage.new(as_source(None), self._kind, {})
        self._usage = UsageGuard()

    # ---------------------------------------------------------------- protocol
    @property
    def domain(self) -> Any:
        return self._domain

    @property
    def n_seen(self) -> int:
        """Rows counted (exact; not private; kept in memory, not in the bytes)."""
        return self._n_seen

    @property
    def n_dropped(self) -> int:
        """Rows dropped by the domain's ``"drop"`` policy (exact; not private)."""
        return self._n_dropped

    @property
    def nbytes(self) -> int:
        """State size in bytes: ``8·2**depth`` counters plus a fixed 64 bytes."""
        return int(self._counts.nbytes) + 64

    @property
    def released(self) -> bool:
        """True once this summary, or a copy of it, was released."""
        return self._lineage.released

    @property
    def lineage(self) -> Lineage:
        """The identity shared by this summary's copies (one release guard)."""
        return self._lineage

    def _check_open(self) -> None:
        if self._frozen:
            raise ReleasedError(f"this {type(self).__name__} is a snapshot; it is read-only")
        self._lineage.check_open(type(self).__name__)

    def update(self, x: Any) -> None:
        """Add one item."""
        arr = np.asarray(x)
        self.update_many(arr.reshape(1, -1) if self._domain.d > 1 or arr.ndim else arr.reshape(1))

    def update_many(self, X: Any) -> None:
        """Add a batch (checked whole before the counts change)."""
        self._check_open()
        with self._usage.enter(type(self).__name__):
            codes, dropped = self._domain.encode(X, self._level, return_dropped=True)
            add = np.bincount(
                np.asarray(codes, dtype=np.uint64).astype(np.intp), minlength=self._counts.size
            )
            self._counts += add
            self._n_seen += int(np.asarray(codes).size)
            self._n_dropped += int(dropped)

    def consume(self, iterable: Iterable[Any], batch_size: int = 65536) -> int:
        """Stream any iterable of rows or arrays in bounded memory; returns the rows read."""
        self._check_open()
        return consume(self.update_many, iterable, batch_size, self._domain.d)

    def _params(self) -> dict[str, Any]:
        return {"domain": self._domain.to_dict(), "depth": self._level}

    def merge(self, other: LevelCounts) -> None:
        """Add the exact counts of another summary with the same parameters (before release).

        Refused: another class or other parameters, the summary itself, and a released operand.
        A copy of this summary may merge (its counts are exact, no noise is shared yet): merge
        only copies whose rows are disjoint from this summary's since the copy was made.
        """
        self._check_open()
        if type(other) is not type(self):
            raise IncompatibleError(
                f"cannot merge a {type(other).__name__} into a {type(self).__name__}"
            )
        mine, theirs = self._params(), other._params()
        for key in mine:
            if mine[key] != theirs[key]:
                raise IncompatibleError(
                    f"cannot merge with different {key!r}: {mine[key]!r} != {theirs[key]!r}"
                )
        if other is self:
            raise IncompatibleError("cannot merge a summary with itself")
        if other.released:
            raise ReleasedError(
                f"cannot merge a released {type(other).__name__}: its noise was drawn and published"
            )
        with self._usage.enter(type(self).__name__):
            # Exact counts hold no noise: a copy (e.g. a worker started from this state) may
            # merge; the noise is drawn once, at release, under the united lineage.
            lineage = self._lineage.union(other._lineage, type(self).__name__, allow_shared=True)
            self._counts += other._counts
            self._n_seen += other._n_seen
            self._n_dropped += other._n_dropped
            self._lineage = lineage

    def snapshot(self) -> LevelCounts:
        """A read-only copy of the (exact) state, sharing this summary's lineage."""
        snap = self._copy()
        snap._frozen = True
        return snap

    def _copy(self) -> LevelCounts:
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new._counts = self._counts.copy()
        new._usage = UsageGuard()
        return new

    def __deepcopy__(self, memo: dict) -> LevelCounts:
        """A copy in this process: same lineage (one release guard), diagnostics kept."""
        return self._copy()

    # ---------------------------------------------------------------- release
    def _digest(self) -> bytes:
        return state_digest(self._counts)

    def _stored(self) -> tuple[PrivateDistribution, dict[str, np.ndarray]] | None:
        try:
            return self._lineage.lookup(self._digest(), type(self).__name__)
        except ReleasedError:
            return None

    def release(self) -> PrivateDistribution:
        """Draw the noise once and return the private distribution.

        Afterwards this summary and its copies refuse updates and merges; ``release()`` on the
        released state (or a copy of it, or a summary loaded from its bytes) returns the same
        distribution without drawing noise again.
        """
        digest = self._digest()
        stored = self._lineage.lookup(digest, type(self).__name__)
        if stored is not None:
            return stored[0]
        dist, extra = self._release_now()
        self._lineage.record(digest, (dist, extra))
        return dist

    def _release_extra(self, name: str) -> np.ndarray:
        """An array stored with the release (e.g. PMM's synthetic counts); releases first."""
        self.release()
        stored = self._stored()
        assert stored is not None  # release() just recorded it
        return stored[1][name]

    @abc.abstractmethod
    def _release_now(self) -> tuple[PrivateDistribution, dict[str, np.ndarray]]:
        """Draw the noise and build the release; extra arrays are kept (and saved) with it."""

    # ---------------------------------------------------------------- bytes
    def to_bytes(
        self, *, key: bytes | str | None = None, include_diagnostics: bool = False
    ) -> bytes:
        """Versioned, checksummed bytes (never pickle).

        Before the release the counts are **exact** (a trusted curator's state: keep it with
        the data holder). The blob records the lineage and, once released, the release and
        its extra arrays, so a reloaded released summary returns its release instead of
        drawing new noise. ``n_seen``/``n_dropped`` only with ``include_diagnostics=True``;
        ``key`` makes the digest a keyed MAC.
        """
        check_bool(include_diagnostics, "include_diagnostics", f"{self._kind}.to_bytes")
        meta = self._params() | {
            "frozen": self._frozen,
            "lineage": self._lineage.to_meta(),
            "released": self.released,
        }
        if include_diagnostics:
            meta["diagnostics"] = {"n_seen": self._n_seen, "n_dropped": self._n_dropped}
        arrays = {"counts": self._counts}
        stored = self._stored() if self.released else None
        if stored is not None:
            arrays["release"] = np.frombuffer(stored[0].to_bytes(), dtype=np.uint8)
            arrays |= {f"extra.{k}": v for k, v in stored[1].items()}
        return pack(self._kind, _VERSION, meta, arrays, key=key, state="trusted")

    @classmethod
    @abc.abstractmethod
    def _from_params(cls, meta: dict[str, Any]) -> LevelCounts:
        """Rebuild an empty summary from a blob's (validated) header."""

    @classmethod
    def from_bytes(cls, blob: bytes, *, key: bytes | str | None = None) -> LevelCounts:
        """Load a summary written by :meth:`to_bytes` (format versions 1 and 2).

        The header and the counts' dtype and shape are validated before anything is built.
        """
        _, version, meta, arrays = unpack(blob, cls._kind, key=key)
        if version not in (1, _VERSION):
            raise SerializationError(
                f"{cls._kind} blob has format version {version}; this sketchsyn reads 1 to "
                f"{_VERSION}"
            )
        meta = dict(meta)
        if version == 1:
            meta["diagnostics"] = {"n_seen": meta.pop("n_seen"), "n_dropped": meta.pop("n_dropped")}
            meta |= {"frozen": False, "released": False}
            meta["lineage"] = Lineage.of_legacy_blob(blob).to_meta()
        r = MetaReader(meta, cls._kind)
        depth = r.int("depth", minimum=1, maximum=_MAX_LEVEL)
        counts = r.array(arrays, "counts", np.int64, (2**depth,))
        frozen, released = r.bool("frozen"), r.bool("released")
        lineage = Lineage.from_meta(meta.get("lineage"), cls._kind)
        r.dict("domain")
        try:
            obj = cls._from_params({k: v for k, v in meta.items() if k not in _STATE_FIELDS})
        except SerializationError:
            raise
        except (ParameterError, TypeError, KeyError, ValueError) as exc:
            raise SerializationError(f"{cls._kind} blob has bad parameters: {exc}") from exc
        if obj._level != depth:
            raise SerializationError(f"{cls._kind} blob counts do not match its depth")
        obj._counts[...] = counts
        obj._frozen = frozen
        obj._lineage = lineage
        if r.has("diagnostics"):
            diag = MetaReader(r.dict("diagnostics"), cls._kind)
            obj._n_seen = diag.int("n_seen", minimum=0)
            obj._n_dropped = diag.int("n_dropped", minimum=0)
        if released and not lineage.released:
            if "release" in arrays:
                dist = PrivateDistribution.from_bytes(arrays["release"].tobytes())
                extra = {k[6:]: v for k, v in arrays.items() if k.startswith("extra.")}
                lineage.record(obj._digest(), (dist, extra))
            else:  # released at another state: this copy may never be released
                lineage.record(b"", (None, {}))
        return obj

    def __reduce__(self) -> tuple:
        return (type(self).from_bytes, (self.to_bytes(),))

    def _complete_levels(self) -> list[np.ndarray]:
        """Exact counts of every level 0…depth (each parent is the sum of its two children)."""
        levels = [self._counts]
        for _ in range(self._level):
            levels.append(levels[-1].reshape(-1, 2).sum(axis=1))
        return levels[::-1]

    def _refuse_bad(self, message: str) -> None:
        raise InputError(message)
