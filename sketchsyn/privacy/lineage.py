"""Lineage of a noise draw: what every copy of a private summary shares.

A private summary's state is one noise draw plus data. Releasing that one draw at two stream
positions reveals the exact count of the rows in between, whatever object each release came from:
the summary itself, a snapshot, a ``copy.deepcopy``, a pickled or ``to_bytes`` copy. So every
summary carries a :class:`Lineage`: a set of random 128-bit identities, one per noise draw it
contains, carried in its bytes.

* Copies in one process (snapshot, deepcopy, pickle, ``from_bytes``) share one release guard per
  identity, kept in a process-wide registry: once any copy is released, every copy refuses
  updates, and a second ``release()`` returns the stored release only when the state is the one
  that was released (same digest of the noisy arrays), else raises :class:`ReleasedError`.
* ``merge`` unites two lineages and refuses operands that share an identity (their common noise
  would be counted twice, e.g. ``counts + 2·noise``).
* An identity is 16 bytes: 8 that name the noise and 8 that name the object it was drawn for.
  With the OS CSPRNG (the default) all 16 are fresh random bytes. A seeded summary's noise half
  is derived from its seed, kind and public parameters, so two summaries built with the same
  seed (hence the same noise) refuse to merge; its object half is random, so independent
  seeded experiments in one process do not share a release guard (a seed is not private anyway).

Across processes no code can stop a user from releasing two copies of one saved state: the safe
way to report periodically is a raw local summary whose ``flush()`` returns a private summary of
the rows since the last flush, with fresh noise and a fresh lineage.

>>> from sketchsyn.privacy.rng import as_source
>>> a = Lineage.new(as_source(None), "Demo", {"width": 4})
>>> b = Lineage.new(as_source(None), "Demo", {"width": 4})
>>> len(a.union(b, "Demo").ids)
2
>>> a.union(a, "Demo")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
sketchsyn.errors.IncompatibleError: cannot merge two Demo summaries that share a noise draw ...
>>> seeded = Lineage.new(as_source(7), "Demo", {"w": 1})
>>> seeded.union(Lineage.new(as_source(7), "Demo", {"w": 1}), "Demo")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
sketchsyn.errors.IncompatibleError: cannot merge two Demo summaries that share a noise draw ...
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..attributes import ReadOnly
from ..errors import ConcurrentUseError, IncompatibleError, ReleasedError, SerializationError

__all__ = ["Lineage", "UsageGuard", "state_digest"]

_ID_BYTES = 16
_NOISE_BYTES = 8  # the first half of an identity names the noise, the second the object
_LOCK = threading.Lock()
# Guards of identities no copy has released yet die with their last holder; released ones are kept
# for the life of the process (a few hundred bytes each), so a reloaded copy still refuses.
_LIVE: weakref.WeakValueDictionary[str, _Guard] = weakref.WeakValueDictionary()
_RELEASED: dict[str, _Guard] = {}


class _Guard:
    """The release record of one identity: the digest of the released state and the release."""

    __slots__ = ("digest", "release", "__weakref__")

    def __init__(self) -> None:
        self.digest: bytes | None = None
        self.release: Any = None


def _guard(identity: str) -> _Guard:
    with _LOCK:
        guard = _RELEASED.get(identity) or _LIVE.get(identity)
        if guard is None:
            guard = _Guard()
            _LIVE[identity] = guard
        return guard


def state_digest(*arrays: np.ndarray) -> bytes:
    """BLAKE2b digest of the arrays' dtypes, shapes and bytes (identifies one released state)."""
    h = hashlib.blake2b(digest_size=32)
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.digest()


class Lineage:
    """The noise draws a summary holds, each with its process-wide release guard."""

    __slots__ = ("_ids", "_guards")

    def __init__(self, ids: Sequence[str]) -> None:
        for identity in ids:
            if not isinstance(identity, str):
                raise SerializationError(
                    f"a lineage identity must be a string of {2 * _ID_BYTES} hex digits, got "
                    f"{type(identity).__name__}"
                )
        clean = tuple(sorted(set(ids)))
        if not clean:
            raise SerializationError("a lineage needs at least one identity")
        for identity in clean:
            if (
                not isinstance(identity, str)
                or len(identity) != 2 * _ID_BYTES
                or any(c not in "0123456789abcdef" for c in identity)
            ):
                raise SerializationError(
                    f"a lineage identity must be {2 * _ID_BYTES} lowercase hex digits, "
                    f"got {identity!r}"
                )
        self._ids = clean
        self._guards = tuple(_guard(i) for i in clean)

    @classmethod
    def new(cls, source: Any, kind: str, params: Mapping[str, Any]) -> Lineage:
        """A fresh identity for one noise draw made from ``source`` (a ``RandomSource``).

        Secure source: 16 random bytes from the OS. Seeded source: the noise half is a digest of
        words drawn from a child stream of the source (so the noise drawn from the source is
        unchanged), the kind and the public parameters; the object half is random.
        """
        if source.secure:
            return cls([os.urandom(_ID_BYTES).hex()])
        words = source.spawn(1)[0].uint64(2)
        h = hashlib.blake2b(digest_size=_NOISE_BYTES)
        h.update(words.astype("<u8").tobytes())
        h.update(kind.encode())
        h.update(json.dumps(params, sort_keys=True, default=str).encode())
        return cls([h.hexdigest() + os.urandom(_ID_BYTES - _NOISE_BYTES).hex()])

    @classmethod
    def of_legacy_blob(cls, blob: bytes) -> Lineage:
        """The lineage of a blob written before lineages existed: a digest of its bytes, so
        every copy of that blob loads with the same identity."""
        return cls([hashlib.blake2b(bytes(blob), digest_size=_ID_BYTES).hexdigest()])

    @classmethod
    def from_meta(cls, value: object, label: str) -> Lineage:
        """Read the ``lineage`` field of a blob's header (a non-empty list of hex strings)."""
        if not isinstance(value, list) or not value or len(value) > 1_000_000:
            raise SerializationError(f"{label} blob has an invalid 'lineage' field")
        try:
            return cls(value)
        except SerializationError as exc:
            raise SerializationError(
                f"{label} blob header field 'lineage' is invalid: {exc}"
            ) from exc

    def to_meta(self) -> list[str]:
        """The identities, for a blob's header."""
        return list(self._ids)

    ids = ReadOnly[tuple[str, ...]]("The identities (sorted hex strings).")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Lineage) and other._ids == self._ids

    def __hash__(self) -> int:
        return hash(self._ids)

    def __repr__(self) -> str:
        return f"Lineage({', '.join(i[:8] for i in self._ids)})"

    def union(self, other: Lineage, owner: str, allow_shared: bool = False) -> Lineage:
        """The lineage of a merge; refuses two lineages that share a noise draw.

        ``allow_shared`` is for states that hold no noise yet (exact counts of a trusted
        curator): their copies may merge, and the result keeps every identity.
        """
        if allow_shared:
            return Lineage(self._ids + other._ids)
        noise = {i[: 2 * _NOISE_BYTES] for i in self._ids}
        if noise & {i[: 2 * _NOISE_BYTES] for i in other._ids}:
            raise IncompatibleError(
                f"cannot merge two {owner} summaries that share a noise draw (same lineage): "
                "their common noise would be added twice. Merge summaries built with "
                "independent noise."
            )
        return Lineage(self._ids + other._ids)

    # ------------------------------------------------------------------ release guard
    @property
    def released(self) -> bool:
        """True once a copy holding any of these noise draws was released in this process."""
        return any(g.digest is not None for g in self._guards)

    def check_open(self, owner: str) -> None:
        """Raise :class:`ReleasedError` if any of these noise draws was released."""
        if self.released:
            raise ReleasedError(
                f"this {owner} (or a copy sharing its noise: a snapshot, deepcopy, pickle or "
                "loaded bytes) was released; its noise was drawn once, so it accepts no more "
                "updates or merges"
            )

    def lookup(self, digest: bytes, owner: str) -> Any:
        """The stored release of this state, ``None`` if never released.

        Raises :class:`ReleasedError` when a copy was released at another state: releasing this
        noise again would reveal the exact difference between the two states.
        """
        digests = {g.digest for g in self._guards}
        if digests == {None}:
            return None
        if digests == {digest}:
            return self._guards[0].release
        raise ReleasedError(
            f"a copy of this {owner} sharing its noise was already released at another stream "
            "position; releasing this state too would reveal the exact rows in between"
        )

    def record(self, digest: bytes, release: Any) -> None:
        """Mark every noise draw of this lineage as released in ``release`` at ``digest``."""
        with _LOCK:
            for identity, guard in zip(self._ids, self._guards, strict=True):
                guard.digest = digest
                guard.release = release
                _RELEASED[identity] = guard


class UsageGuard:
    """A cheap non-blocking guard: refuses a second thread entering an update.

    Updating one summary from two threads at once would lose counts silently; the guard turns
    that into a :class:`ConcurrentUseError` instead (it never blocks or waits).

    >>> g = UsageGuard()
    >>> with g.enter("Demo"):
    ...     pass
    """

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()

    @contextmanager
    def enter(self, owner: str) -> Iterator[None]:
        if not self._lock.acquire(blocking=False):
            raise ConcurrentUseError(
                f"this {owner} is being updated by another thread; a summary is not "
                "thread-safe. Build one summary per thread and merge them."
            )
        try:
            yield
        finally:
            self._lock.release()
