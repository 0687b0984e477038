"""Exact counts of the cells of one Morton level: the state shared by PMM, PSMM and the grid.

Offline mechanisms keep exact (not yet private) counts while the data streams in and draw their
noise once, at ``release()``; after that, updates raise. The state before the release is **not
private**: keep it with the data holder.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ...attributes import ReadOnly
from ...errors import (
    IncompatibleError,
    InputError,
    ReleasedError,
    SerializationError,
    check_bool,
    check_domain,
    check_int,
    check_memory,
)
from ...io.serial import Arrays, MetaReader
from ...io.stream import consume
from ...io.summary import Summary
from ...privacy.lineage import Lineage, UsageGuard, state_digest
from ...privacy.rng import RNGLike, as_source
from ..distribution import PrivateDistribution

__all__ = ["COUNT_LIMIT", "LevelCounts", "check_same_params", "counts_array"]

_MAX_LEVEL = 30  # 2**30 int64 counters = 8 GiB: beyond that no machine here holds the state
# Most rows a loaded state may count, in all and so in any cell (no real state comes near
# 4.5e15 rows): every sum the class takes of them, up to the root of _complete_levels, stays
# below 2**52, and noise of scale at most 2**30 added to it cannot reach 2**63.
COUNT_LIMIT = 2**52


def counts_array(fields: MetaReader, arrays: Arrays, name: str, size: int, kind: str) -> np.ndarray:
    """The array ``name`` of ``size`` int64 counts of a ``kind`` blob, each and their total in
    ``[0, COUNT_LIMIT]`` (else :class:`SerializationError` naming it). The total is summed in
    float64: counts of at most 2**52 cannot overflow it, as an int64 sum of 2**30 of them could.

    >>> r = MetaReader({}, "Demo")
    >>> counts_array(r, {"c": np.array([2**51, 2**51, 1])}, "c", 3, "Demo")
    Traceback (most recent call last):
    ...
    sketchsyn.errors.SerializationError: Demo blob array 'c' sums to 4503599627370497.0, above 2**52
    """  # noqa: E501
    counts = fields.bounded(arrays, name, np.int64, (size,), 0, COUNT_LIMIT)
    total = float(counts.sum(dtype=np.float64))
    if total > COUNT_LIMIT:
        raise SerializationError(f"{kind} blob array {name!r} sums to {total!r}, above 2**52")
    return counts


def check_same_params(mine: Mapping[str, Any], theirs: Mapping[str, Any], what: str = "") -> None:
    """Refuse a merge of two summaries whose public parameters differ, naming the first one.

    ``what`` names the summaries in the message (``"PrivHP summaries"``; default: nothing).

    >>> check_same_params({"depth": 4}, {"depth": 5}, "PMM summaries")
    Traceback (most recent call last):
    ...
    sketchsyn.errors.IncompatibleError: cannot merge PMM summaries with different 'depth': 4 != 5
    """
    for key in [*mine, *(k for k in theirs if k not in mine)]:  # a field one of them lacks too
        if mine.get(key) != theirs.get(key):
            raise IncompatibleError(
                f"cannot merge {what + ' ' if what else ''}with different {key!r}: "
                f"{mine.get(key)!r} != {theirs.get(key)!r}"
            )


@dataclass(frozen=True)
class _Copy:
    """What a blob says about the copy it holds besides its counts: read-only flag, lineage,
    diagnostics and, once released, the release."""

    frozen: bool
    released: bool
    lineage: Lineage
    n_seen: int
    n_dropped: int
    release: Any


class LevelCounts(Summary):
    """Base class: exact counts of the ``2**level`` cells of one level of ``domain``.

    Subclasses give :meth:`_release_now` (draw the noise, return the release), ``_PARAMS``
    (the header fields they add, each kept as ``self._<name>``; ε as ``self._epsilon``) and,
    when their constructor does not take ``(domain, epsilon, depth)`` first,
    :meth:`_from_params`. The base class owns the state, the protocol and the release guard: a
    summary is released once; every copy of it (snapshot, deepcopy, pickle, bytes) shares its
    lineage, so in one process a copy of the released state returns the same release and any
    other copy refuses; a released blob carries the release.

    Saved state: **trusted** (``STATE_PRIVACY = "trusted"``): the exact counts of one level
    until ``release()`` draws the noise; keep the bytes with the data holder. Once released,
    the bytes also hold the release (public).
    """

    STATE_PRIVACY = "trusted"  # exact counts until the release (and after it)
    FORMAT_VERSION = 2  # 2: lineage, released flag and the release in the blob
    READS = (1, 2)
    TAKES_RNG = True
    # The header fields a subclass adds to domain and depth, each kept as ``self._<name>``.
    _PARAMS: ClassVar[tuple[str, ...]] = ()
    _epsilon: float

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
        self._start(2**self._level, rng)

    def _start(self, size: int, rng: RNGLike) -> None:
        """``size`` zero counts, the noise source, an open copy of its own."""
        self._counts = np.zeros(size, dtype=np.int64)
        self._source = as_source(rng)
        self._n_seen = 0
        self._n_dropped = 0
        self._frozen = False
        # Exact counts hold no noise yet: the identity is random (the release draws it).
        self._lineage = Lineage.new(as_source(None), self.kind, {})
        self._usage = UsageGuard()

    # ---------------------------------------------------------------- protocol
    domain = ReadOnly[Any]("The public domain of the counts.")
    n_seen = ReadOnly[int]("Rows counted (exact; not private; kept in memory, not in the bytes).")
    n_dropped = ReadOnly[int](
        """Rows dropped by the domain's ``"drop"`` policy (exact; not private)."""
    )

    @property
    def nbytes(self) -> int:
        """State size in bytes: ``8·2**depth`` counters plus a fixed 64 bytes."""
        return int(self._counts.nbytes) + 64

    @property
    def released(self) -> bool:
        """True once this summary, or a copy of it, was released."""
        return self._lineage.released

    lineage = ReadOnly[Lineage]("The identity shared by this summary's copies (one release guard).")

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
        params = {"domain": self._domain.to_dict(), "depth": self._level}
        return params | {name: getattr(self, f"_{name}") for name in self._PARAMS}

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
        check_same_params(self._params(), other._params())
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

    def _copy_options(self) -> dict[str, Any]:
        """A copy in this process (deepcopy, pickle, snapshot) keeps the diagnostics: the state
        is a curator's already."""
        return {"include_diagnostics": True}

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

    def _release_params(self) -> dict[str, Any]:
        """The parameters a release states (all but the domain, which it holds)."""
        return {k: v for k, v in self._params().items() if k != "domain"}

    def _distribution(
        self, levels: Any, prefixes: Any, counts: Any, mechanism: str
    ) -> PrivateDistribution:
        """The release over these leaves, with this summary's ε and parameters."""
        return PrivateDistribution(
            self._domain,
            levels,
            prefixes,
            counts,
            epsilon=self._epsilon,
            mechanism=mechanism,
            params=self._release_params(),
        )

    # ---------------------------------------------------------------- bytes (Summary hooks)
    def _state(
        self, include_diagnostics: bool = False
    ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Header and arrays of the bytes (format version 2; version 1 still loads).

        Before the release the counts are **exact** (a trusted curator's state: keep it with
        the data holder). The blob records the lineage and, once released, the release and
        its extra arrays, so a reloaded released summary returns its release instead of
        drawing new noise. ``n_seen``/``n_dropped`` only with ``include_diagnostics=True``.
        """
        check_bool(include_diagnostics, "include_diagnostics", f"{self.kind}.to_bytes")
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
        return meta, arrays

    @classmethod
    def _from_params(cls, fields: MetaReader, rng: RNGLike) -> LevelCounts:
        """Rebuild an empty summary from a blob's header, every field read through ``fields``:
        ``cls(domain, epsilon, depth, rng=rng)`` unless a subclass reads more."""
        return cls(
            fields.domain(), fields.epsilon("epsilon"), fields.int("depth", minimum=1), rng=rng
        )

    @classmethod
    def _from_state(
        cls, fields: MetaReader, arrays: Arrays, version: int, blob: bytes, rng: Any
    ) -> LevelCounts:
        """The header and the counts' dtype, shape and range (:func:`counts_array`) are
        validated before anything is built, and a field or array the class does not write is
        refused; ``rng`` seeds the noise of a later release (default: the OS CSPRNG)."""
        if version == 1:
            meta = fields.as_dict()
            meta["diagnostics"] = {
                "n_seen": meta.pop("n_seen", None),
                "n_dropped": meta.pop("n_dropped", None),
            }
            meta |= {"frozen": False, "released": False}
            meta["lineage"] = Lineage.of_legacy_blob(blob).to_meta()
            fields = MetaReader(meta, cls.kind)
        depth = fields.int("depth", minimum=1, maximum=_MAX_LEVEL)
        counts = counts_array(fields, arrays, "counts", 2**depth, cls.kind)
        copy = cls._read_copy(fields, arrays, PrivateDistribution)
        obj = cls._from_params(fields, rng)
        if obj._level != depth:
            raise SerializationError(f"{cls.kind} blob counts do not match its depth")
        extra = {}
        shapes = obj._extra_shapes() if copy.release is not None else {}
        for name in arrays:
            if name.startswith("extra."):
                if name[6:] not in shapes:
                    raise SerializationError(f"{cls.kind} blob has an unexpected array {name!r}")
                extra[name[6:]] = counts_array(fields, arrays, name, shapes[name[6:]], cls.kind)
        fields.done(arrays)  # no header field or array the class does not write
        obj._load_copy(counts, copy, extra)
        return obj

    @classmethod
    def _read_copy(cls, fields: MetaReader, arrays: Arrays, release_class: type) -> _Copy:
        """A blob's copy fields and its release (a ``release_class`` blob), checked."""
        frozen, released = fields.bool("frozen"), fields.bool("released")
        lineage = fields.lineage()
        n_seen = n_dropped = 0
        if fields.has("diagnostics"):
            diag = MetaReader(fields.dict("diagnostics"), cls.kind)
            n_seen = diag.int("n_seen", minimum=0, maximum=2**63 - 1)
            n_dropped = diag.int("n_dropped", minimum=0, maximum=2**63 - 1)
        release = None
        if released and "release" in arrays:
            release = fields.nested(arrays, "release", release_class)
        return _Copy(frozen, released, lineage, n_seen, n_dropped, release)

    def _load_copy(self, counts: np.ndarray, copy: _Copy, extra: dict[str, np.ndarray]) -> None:
        """Take a loaded blob's checked counts and copy fields (and its release, if any)."""
        self._counts[...] = counts
        self._frozen = copy.frozen
        self._lineage = lineage = copy.lineage
        self._n_seen, self._n_dropped = copy.n_seen, copy.n_dropped
        if copy.released and not lineage.released:
            if copy.release is not None:
                lineage.record(self._digest(), (copy.release, extra))
            else:  # released at another state: this copy may never be released
                lineage.record(b"", (None, {}))

    def _extra_shapes(self) -> dict[str, int]:
        """Size of each extra array of int64 counts the release keeps (checked on load)."""
        return {}

    def _complete_levels(self) -> list[np.ndarray]:
        """Exact counts of every level 0…depth (each parent is the sum of its two children)."""
        levels = [self._counts]
        for _ in range(self._level):
            levels.append(levels[-1].reshape(-1, 2).sum(axis=1))
        return levels[::-1]

    def _refuse_bad(self, message: str) -> None:
        raise InputError(message)
