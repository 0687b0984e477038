"""Many k-ary tree counters stepped together: one Python call per batch (a bank).

:class:`KaryTreeBank` is ``size`` independent :class:`~sketchsyn.counters.karytree.KaryTreeCounter`
counters (Andersson, Pagh and Torkamani, *Improved Counting under Continual Observation with Pure
Differential Privacy*) that share the step count: ``update_many`` takes an ``(n, size)`` array
and returns the ``(n, size)`` releases, ``skip(s)`` advances them all by ``s`` zero steps with
``O(levels·size)`` draws. It is to the k-ary tree what
:class:`~sketchsyn.counters.tree.CounterBank` is to the binary mechanism.

>>> bank = KaryTreeBank(4, 1.0, 1000, k=5, rng=0)
>>> bank.update_many(np.ones((10, 4), dtype=np.int64)).shape
(10, 4)
>>> bank.skip(500); bank.t, bank.query().shape
(510, (4,))
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import check_int, check_memory
from ..io.serial import Arrays, MetaReader
from ..privacy.rng import RNGLike
from .base import _bank_steps, _check_s, _check_total, _int_array
from .karytree import (
    _CHUNK,
    _MAX_HORIZON,
    _MAX_K,
    KaryTreeCounter,
    _check_windows,
    _read_tree_fields,
    karytree_levels,
)

__all__ = ["KaryTreeBank"]

_MAX_SIZE = 2**28


class KaryTreeBank(KaryTreeCounter):
    """``size`` k-ary tree counters with negative digits, stepped together (pure ε-DP each).

    Same parameters, noise and privacy as :class:`~sketchsyn.counters.karytree.KaryTreeCounter`,
    per counter: each counter is a k-ary tree counter over its own stream, with
    ``Lap_Z(sensitivity·h/ε)`` on every block. A record that touches several counters must be
    accounted for by the caller (``sensitivity``, or parallel composition over disjoint
    counters). All counters share ``t`` and the draws are made level by level for all of them
    at once (``size`` values per block position), so a batch costs one Python call.

    Saved state: **trusted**, per counter as the single counter's: the blocks in use, each its
    noise plus its data so far.

    Parameters
    ----------
    size : int
        Number of counters (``1 … 2**28``).
    epsilon, horizon, k, sensitivity, rng
        As :class:`~sketchsyn.counters.karytree.KaryTreeCounter`.

    Notes
    -----
    ``update(x)`` takes one step with one non-negative integer per counter (shape
    ``(size,)``), ``update_many(xs)`` takes ``(n, size)``; both return the releases.
    ``skip(s)`` is exact and lazy: only the windows in use at the end are drawn, so every
    later release has the law it would have after ``s`` steps of zeros (``O(h·size)`` draws).
    ``nbytes = 8·(k − 1)·h·size + 8·size + 48``.

    Examples
    --------
    >>> bank = KaryTreeBank(3, 1.0, 2**20, rng=1)
    >>> out = bank.update_many(np.ones((1000, 3), dtype=np.int64))
    >>> bool((np.abs(out[-1] - 1000) < 400).all())
    True
    >>> bank.nbytes
    2232
    """

    _kind = "KaryTreeBank"

    def __init__(
        self,
        size: int,
        epsilon: float,
        horizon: int,
        *,
        k: int = 19,
        sensitivity: int = 1,
        rng: RNGLike = None,
    ) -> None:
        self._m = check_int(size, "size", "KaryTreeBank", minimum=1, maximum=_MAX_SIZE)
        if isinstance(k, int) and isinstance(horizon, int) and 3 <= k <= _MAX_K and horizon >= 1:
            levels = karytree_levels(min(horizon, _MAX_HORIZON), k)
            check_memory(8 * (k - 1) * levels * self._m, "KaryTreeBank", f"size={self._m}")
        super().__init__(epsilon, horizon, k=k, sensitivity=sensitivity, rng=rng)
        self._last = np.zeros(self._m, dtype=np.int64)

    def _size(self) -> int:
        return self._m

    def _params(self) -> dict:
        return {**super()._params(), "size": self._m}

    @property
    def size(self) -> int:
        """Number of counters."""
        return self._m

    @property
    def nbytes(self) -> int:
        """``8·(k − 1)·h·size + 8·size + 48`` bytes (blocks, latest releases, scalars)."""
        return 8 * (self._k - 1) * self._levels * self._m + 8 * self._m + 48

    def variance(self, t: int) -> float:
        """Exact variance of each counter's release at step ``t`` (as the single counter's).

        >>> KaryTreeBank(2, 1.0, 40, k=3, rng=0).variance(5) > 0
        True
        """
        return super().variance(t)

    def update(self, x: object) -> np.ndarray:  # type: ignore[override]
        """One step: ``x`` has one non-negative integer per counter; returns the releases."""
        self._check_writable()
        return self._advance(_bank_steps(x, 1, self._m, self._kind))[0]

    def update_many(self, xs: object) -> np.ndarray:
        """``n`` steps: ``xs`` is ``(n, size)``; returns the ``(n, size)`` releases (int64).

        >>> KaryTreeBank(2, 2.0, 100, k=5, rng=5).update_many([[1, 0], [0, 1]]).shape
        (2, 2)
        """
        self._check_writable()
        return self._advance(_bank_steps(xs, 2, self._m, self._kind))

    def _advance(self, steps: np.ndarray) -> np.ndarray:
        n = steps.shape[0]
        self._room(n)
        _check_total(steps, self._engine.mass() + int(np.abs(self._last).max()), self._kind)
        out = np.empty((n, self._m), dtype=np.int64)
        if n == 0:
            return out
        chunk = max(1, _CHUNK // self._m)
        for lo in range(0, n, chunk):  # bounded memory; the draws do not depend on the cuts
            cum = np.cumsum(steps[lo : lo + chunk], axis=0)
            out[lo : lo + cum.shape[0]] = self._engine.advance(cum, self._param, self._src)
        self._last = out[-1].copy()
        return out

    def skip(self, s: int, releases: bool = False) -> np.ndarray | None:
        """Advance every counter ``s`` steps of value 0 with ``O(h·size)`` draws.

        ``releases=True`` returns the ``(s, size)`` skipped releases instead (``O(s·size)``).

        >>> b = KaryTreeBank(2, 1.0, 2**40, rng=0); b.skip(10**12); b.t
        1000000000000
        """
        self._check_writable()
        s = _check_s(s, self._kind)
        if releases:
            return self.update_many(np.zeros((s, self._m), dtype=np.int64))
        self._room(s)
        if s == 0:
            return None
        self._engine.skip(s, self._param, self._src)
        self._last = self._engine.release()
        return None

    def query(self) -> np.ndarray:
        """Every counter's latest release, ``(size,)`` int64."""
        return np.asarray(self._last, dtype=np.int64).copy()

    # -------------------------------------------------------------- bytes
    def _state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Parameters, lineage, the blocks ``(h, k − 1, size)`` and the latest releases.

        >>> b = KaryTreeBank(2, 1.0, 100, k=5, rng=1); _ = b.update_many([[1, 0], [0, 1]])
        >>> bool((KaryTreeBank.from_bytes(b.to_bytes()).query() == b.query()).all())
        True
        """
        meta: dict[str, Any] = {
            **self._params(),
            "t": self._engine.u,
            **self._common_meta(last=False),
        }
        return meta, {"blocks": self._engine.win.copy(), "last": self.query()}

    @classmethod
    def _load_state(
        cls, fields: MetaReader, arrays: Arrays, version: int, blob: bytes, rng: Any
    ) -> KaryTreeBank:
        size = fields.int("size", 1, _MAX_SIZE)
        eps, horizon, k, sensitivity, t, levels = _read_tree_fields(fields, cls._kind)
        blocks = _int_array(fields, arrays, "blocks", (levels, k - 1, size))
        last = _int_array(fields, arrays, "last", (size,))
        obj = cls(size, eps, horizon, k=k, sensitivity=sensitivity, rng=rng)
        obj._restore_common(fields, last=None)
        obj._engine.win[...] = blocks
        obj._engine.u = t
        _check_windows(obj._engine, last, cls._kind, "array 'last'")
        obj._last = last
        return obj

    def __repr__(self) -> str:
        return (
            f"KaryTreeBank(size={self._m}, epsilon={self._epsilon}, horizon={self._horizon}, "
            f"k={self._k}, sensitivity={self._sensitivity}, t={self._engine.u})"
        )
