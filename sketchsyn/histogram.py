"""Exact counts of the cells of one Morton level: the state shared by PMM, PSMM and the grid.

Offline mechanisms keep exact (not yet private) counts while the data streams in and draw their
noise once, at ``release()``; after that, updates raise. The state before the release is **not
private**: keep it with the data holder.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from .checkpoint import Checkpointable
from .errors import IncompatibleError, InputError, ReleasedError, SerializationError, check_int
from .rng import RNGLike, as_source
from .serial import pack, unpack
from .stream import consume

__all__ = ["LevelCounts"]

_MAX_LEVEL = 30  # 2**30 int64 counters = 8 GiB: beyond that no machine here holds the state


class LevelCounts(Checkpointable):
    """Base class: exact counts of the ``2**level`` cells of one level of ``domain``."""

    _kind = "LevelCounts"

    def __init__(self, domain: Any, level: int, rng: RNGLike, owner: str) -> None:
        if not hasattr(domain, "encode") or not hasattr(domain, "max_depth"):
            raise ValueError(
                f"The 'domain' parameter of {owner} must be a sketchsyn domain. "
                f"Got {domain!r} instead."
            )
        self._domain = domain
        limit = min(int(domain.max_depth), _MAX_LEVEL)
        self._level = check_int(level, "depth", owner, minimum=1, maximum=limit)
        self._counts = np.zeros(2**self._level, dtype=np.int64)
        self._source = as_source(rng)
        self._n_seen = 0
        self._n_dropped = 0
        self._released: Any = None
        self._frozen = False

    # ---------------------------------------------------------------- protocol
    @property
    def domain(self) -> Any:
        return self._domain

    @property
    def n_seen(self) -> int:
        """Rows counted (exact; not private)."""
        return self._n_seen

    @property
    def n_dropped(self) -> int:
        """Rows dropped by the domain's ``"drop"`` policy (exact; not private)."""
        return self._n_dropped

    @property
    def nbytes(self) -> int:
        """State size in bytes: ``8·2**depth`` counters plus a fixed 64 bytes."""
        return int(self._counts.nbytes) + 64

    def _check_open(self) -> None:
        if self._frozen:
            raise ReleasedError(f"this {type(self).__name__} is a snapshot; it is read-only")
        if self._released is not None:
            raise ReleasedError(f"this {type(self).__name__} was released; it accepts no updates")

    def update(self, x: Any) -> None:
        """Add one item."""
        arr = np.asarray(x)
        self.update_many(arr.reshape(1, -1) if self._domain.d > 1 or arr.ndim else arr.reshape(1))

    def update_many(self, X: Any) -> None:
        """Add a batch (checked whole before the counts change)."""
        self._check_open()
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
        """Add the exact counts of another summary with the same parameters (before release)."""
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
        self._counts += other._counts
        self._n_seen += other._n_seen
        self._n_dropped += other._n_dropped

    def snapshot(self) -> LevelCounts:
        """An independent, read-only copy of the (exact) state."""
        snap = type(self).from_bytes(self.to_bytes())
        snap._frozen = True
        return snap

    def to_bytes(self) -> bytes:
        """Versioned, checksummed bytes of the exact state (never pickle)."""
        meta = self._params() | {"n_seen": self._n_seen, "n_dropped": self._n_dropped}
        return pack(self._kind, 1, meta, {"counts": self._counts})

    @classmethod
    def _from_params(cls, meta: dict[str, Any]) -> LevelCounts:  # pragma: no cover
        raise TypeError("subclasses rebuild themselves")

    @classmethod
    def from_bytes(cls, blob: bytes) -> LevelCounts:
        _, _, meta, arrays = unpack(blob, cls._kind)
        obj = cls._from_params(meta)
        if arrays["counts"].shape != obj._counts.shape:
            raise SerializationError(f"{cls._kind} blob counts do not match its depth")
        obj._counts[...] = arrays["counts"]
        obj._n_seen, obj._n_dropped = int(meta["n_seen"]), int(meta["n_dropped"])
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
