"""Private (or raw) Count-Min and Count Sketch (seed 002 §4, Algorithm 1).

A sketch is a ``depth × width`` table of int64 counters (``j × w`` in the paper). With ``epsilon``
every cell starts at ``Lap_Z(depth/epsilon)``: one item changes one cell per row, so the L1
sensitivity is ``depth`` and the table is ``epsilon``-DP (add/remove one item) at every moment
from construction on. Without ``epsilon`` the sketch is raw (exact, not private), for merging
before noise.

Objects are single-threaded: do not update one sketch from two threads at once.

>>> cms = CountMinSketch(width=256, depth=3, epsilon=1.0, rng=0)
>>> cms.update_many([1, 2, 2, 3, 3, 3])
>>> cms.query(3) >= 3 - 30  # noisy, but close
True
>>> raw = CountMinSketch(256, 3)
>>> raw.update(42, 5); raw.query(42)
5
>>> CountMinSketch.from_bytes(cms.to_bytes()) == cms
True
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .errors import IncompatibleError, InputError, ParameterError, ReleasedError, check_int
from .hashing import HashFamily, as_keys
from .noise import discrete_laplace
from .rng import RNGLike, as_source
from .serial import pack, unpack

__all__ = ["CountMinSketch", "CountSketch"]

_VERSION = 1
_OVERHEAD = 64  # bytes counted in nbytes for the row/sign seeds and scalars


def _as_counts(counts: object, n: int) -> np.ndarray:
    """Counts as int64 of length n: finite integers only (integral floats accepted)."""
    arr = np.asarray(counts)
    if arr.ndim == 0:
        arr = np.full(n, arr)
    if arr.shape != (n,):
        raise InputError(f"counts must have one entry per key ({n}); got shape {arr.shape}")
    if arr.dtype.kind in "iub":
        return arr.astype(np.int64)
    if arr.dtype.kind == "f":
        ok = np.isfinite(arr) & (arr == np.floor(arr)) & (np.abs(arr) < 2.0**62)
        bad = np.flatnonzero(~ok)
        if bad.size:
            i = int(bad[0])
            raise InputError(f"counts must be finite integers; counts[{i}] = {arr[i]!r}")
        return arr.astype(np.int64)
    raise InputError(f"counts must be finite integers; got an array of dtype {arr.dtype}")


def _prepare_keys(keys: object) -> np.ndarray:
    if isinstance(keys, (str, bytes)):
        return np.array([HashFamily.key_of(keys)], dtype=np.uint64)
    if isinstance(keys, (list, tuple)) and keys and isinstance(keys[0], (str, bytes)):
        return np.array([HashFamily.key_of(k) for k in keys], dtype=np.uint64)
    return as_keys(keys).reshape(-1)


def _check_unit_interval(value: float, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise ParameterError(f"The {name!r} parameter must be in (0, 1). Got {value!r} instead.")


class _Sketch:
    """Shared machinery of Count-Min and Count Sketch."""

    _kind = "Sketch"
    _signed = False

    def __init__(
        self,
        width: int,
        depth: int,
        epsilon: float | None = None,
        seed: int = 0,
        rng: RNGLike = None,
    ) -> None:
        name = type(self).__name__
        self._width = check_int(width, "width", name, minimum=1, maximum=2**31)
        self._depth = check_int(depth, "depth", name, minimum=1, maximum=1024)
        self._seed = check_int(seed, "seed", name, minimum=0, maximum=2**32 - 1)
        if epsilon is not None:
            if (
                isinstance(epsilon, bool)
                or not isinstance(epsilon, (int, float, np.number))
                or (not math.isfinite(float(epsilon)) or float(epsilon) <= 0)
            ):
                raise ParameterError(
                    f"The 'epsilon' parameter of {name} must be None (raw) or a finite real "
                    f"number > 0. Got {epsilon!r} instead."
                )
            epsilon = float(epsilon)
        self._epsilon = epsilon
        self._family = HashFamily(self._width, self._depth, self._seed)
        self._table = np.zeros((self._depth, self._width), dtype=np.int64)
        if epsilon is not None:
            self._table += discrete_laplace(
                self._depth / epsilon, (self._depth, self._width), rng=as_source(rng)
            )
        self._frozen = False

    # -------------------------------------------------------------- parameters and state
    @property
    def width(self) -> int:
        """Columns per row (``w``)."""
        return self._width

    @property
    def depth(self) -> int:
        """Rows (``j``)."""
        return self._depth

    @property
    def seed(self) -> int:
        """Public hash seed."""
        return self._seed

    @property
    def epsilon(self) -> float | None:
        """Budget spent by the construction noise (``None`` for a raw sketch)."""
        return self._epsilon

    @property
    def table(self) -> np.ndarray:
        """A read-only view of the ``(depth, width)`` int64 counters."""
        view = self._table.view()
        view.setflags(write=False)
        return view

    @property
    def nbytes(self) -> int:
        """State size in bytes: ``8·width·depth`` counters plus a fixed 64-byte overhead."""
        return int(self._table.nbytes) + _OVERHEAD

    # -------------------------------------------------------------- updates
    def _check_writable(self) -> None:
        if self._frozen:
            raise ReleasedError(f"this {type(self).__name__} is a snapshot; it is read-only")

    def update(self, key: object, count: int = 1) -> None:
        """Add ``count`` occurrences of ``key`` (a non-negative integer, str or bytes)."""
        self.update_many(key if isinstance(key, (str, bytes)) else [key], [count])

    def update_many(self, keys: object, counts: object = None) -> None:
        """Add a batch (vectorised). The batch is checked whole before the table changes.

        Negative counts are allowed (turnstile updates); Count-Min's "never underestimates"
        guarantee needs the true totals to be non-negative.
        """
        self._check_writable()
        k = _prepare_keys(keys)
        c = None if counts is None else _as_counts(counts, k.size)
        if k.size == 0:
            return
        flat = self._family.flat_indices(k)
        if self._signed:
            weights = self._family.signs(k).astype(np.int64)
            if c is not None:
                weights = weights * c[None, :]
        else:
            weights = None if c is None else np.broadcast_to(c, flat.shape)
        self._table += self._accumulate(flat.ravel(), None if weights is None else weights.ravel())

    def _accumulate(self, flat: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
        size = self._depth * self._width
        if weights is None:
            return np.bincount(flat, minlength=size).reshape(self._depth, self._width)
        if float(np.abs(weights).sum(dtype=np.float64)) < 2.0**52:
            # Every partial sum is an integer below 2**53, so float64 accumulation is exact.
            acc = np.bincount(flat, weights=weights.astype(np.float64), minlength=size)
            return np.rint(acc).astype(np.int64).reshape(self._depth, self._width)
        out = np.zeros(size, dtype=np.int64)
        np.add.at(out, flat, weights)  # exact int64 for huge weights
        return out.reshape(self._depth, self._width)

    # -------------------------------------------------------------- queries
    def _row_values(self, keys: object) -> np.ndarray:
        k = _prepare_keys(keys)
        buckets = self._family.buckets(k)
        rows = np.arange(self._depth)[:, None]
        values = self._table[rows, buckets]
        if self._signed:
            values = values * self._family.signs(k)
        return values

    def query(self, key: object) -> Any:
        """Estimated count of ``key``."""
        return self.query_many(key if isinstance(key, (str, bytes)) else [key])[0].item()

    def query_many(self, keys: object) -> np.ndarray:  # pragma: no cover - overridden
        raise TypeError("use CountMinSketch or CountSketch")

    # -------------------------------------------------------------- combine, copy, save
    def merge(self, other: _Sketch) -> None:
        """Add ``other``'s counters (in place). Same class, width, depth and seed required.

        Privacy of the sum: if both are ε-private and built over disjoint streams, every item is
        in one of them, so the sum is ε-DP for the union (parallel composition); noise variances
        add. Raw + private is private with the private side's ε (its noise covers the union).
        Merging a sketch into itself is refused: it would double its noise and its counts.
        """
        self._check_writable()
        if type(other) is not type(self):
            raise IncompatibleError(
                f"cannot merge a {type(other).__name__} into a {type(self).__name__}"
            )
        if other is self:
            raise IncompatibleError("cannot merge a sketch with itself")
        for name in ("width", "depth", "seed"):
            if getattr(self, name) != getattr(other, name):
                raise IncompatibleError(
                    f"cannot merge sketches with different {name!r}: "
                    f"{getattr(self, name)} != {getattr(other, name)}"
                )
        self._table += other._table
        if self._epsilon is None:
            self._epsilon = other._epsilon
        elif other._epsilon is not None:
            self._epsilon = max(self._epsilon, other._epsilon)

    def snapshot(self) -> _Sketch:
        """An independent, read-only copy."""
        snap = type(self).from_bytes(self.to_bytes())
        snap._frozen = True
        return snap

    def to_bytes(self) -> bytes:
        """Versioned, checksummed bytes (see :mod:`sketchsyn.serial`); never pickle."""
        meta = {
            "width": self._width,
            "depth": self._depth,
            "seed": self._seed,
            "epsilon": self._epsilon,
        }
        return pack(self._kind, _VERSION, meta, {"table": self._table})

    @classmethod
    def from_bytes(cls, blob: bytes) -> _Sketch:
        """Load a sketch written by :meth:`to_bytes` (raises SerializationError if corrupt)."""
        from .errors import SerializationError

        _, version, meta, arrays = unpack(blob, cls._kind)
        if version > _VERSION:
            raise SerializationError(
                f"{cls._kind} format version {version} is newer than "
                f"this sketchsyn reads ({_VERSION})"
            )
        obj = cls(meta["width"], meta["depth"], None, meta["seed"])
        table = arrays["table"]
        if table.shape != obj._table.shape or table.dtype != np.int64:
            raise SerializationError(f"{cls._kind} blob table does not match its parameters")
        obj._table[...] = table
        obj._epsilon = meta["epsilon"]
        return obj

    def __reduce__(self) -> tuple:
        return (type(self).from_bytes, (self.to_bytes(),))

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is type(self)
            and self._family == other._family  # type: ignore[attr-defined]
            and self._epsilon == other._epsilon  # type: ignore[attr-defined]
            and np.array_equal(self._table, other._table)  # type: ignore[attr-defined]
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(width={self._width}, depth={self._depth}, "
            f"epsilon={self._epsilon}, seed={self._seed})"
        )


class CountMinSketch(_Sketch):
    """Count-Min sketch: ``query = min`` over rows of the key's cell.

    Parameters
    ----------
    width, depth : int
        Table shape (``w`` columns, ``j`` rows).
    epsilon : float, optional
        With it, every cell starts at ``Lap_Z(depth/epsilon)`` (ε-DP from construction on,
        add/remove one item). Without it the sketch is raw.
    seed : int
        Public hash seed; sketches merge only with the same seed.
    rng : None, int, SeedSequence or Generator
        Noise randomness (``None``: OS CSPRNG; a seed is not private against whoever knows it).
        Give each sketch its own stream (e.g. ``RandomSource.spawn``).

    Examples
    --------
    >>> s = CountMinSketch(64, 2)
    >>> s.update_many([5, 5, 6], [2, 1, 4])
    >>> s.query_many([5, 6]).tolist()
    [3, 4]
    """

    _kind = "CountMinSketch"

    def query_many(self, keys: object) -> np.ndarray:
        """Estimated counts (int64): raw Count-Min never underestimates non-negative totals."""
        return self._row_values(keys).min(axis=0)

    @staticmethod
    def suggest_width(relative_error: float) -> int:
        """``ceil(e/relative_error)``: error ≤ relative_error·N with probability 1 − e^−depth.

        >>> CountMinSketch.suggest_width(0.01)
        272
        """
        _check_unit_interval(relative_error, "relative_error")
        return math.ceil(math.e / relative_error)

    @staticmethod
    def suggest_depth(confidence: float) -> int:
        """``ceil(ln(1/(1 − confidence)))`` rows for the Count-Min bound to hold w.p. confidence.

        >>> CountMinSketch.suggest_depth(0.95)
        3
        """
        _check_unit_interval(confidence, "confidence")
        return max(1, math.ceil(math.log(1.0 / (1.0 - confidence))))


class CountSketch(_Sketch):
    """Count Sketch: ``query = median`` over rows of ``sign·cell`` (unbiased).

    Same parameters as :class:`CountMinSketch`. With an even ``depth`` the median is the mean of
    the two middle values (a float); with an odd depth it is an integer.

    Examples
    --------
    >>> s = CountSketch(64, 3)
    >>> s.update_many([5, 5, 6])
    >>> s.query_many([5, 6]).tolist()
    [2.0, 1.0]
    """

    _kind = "CountSketch"
    _signed = True

    def query_many(self, keys: object) -> np.ndarray:
        """Median estimates (float64), unbiased for each key."""
        return np.median(self._row_values(keys), axis=0).astype(np.float64)

    @staticmethod
    def suggest_width(relative_error: float) -> int:
        """``ceil(3/relative_error²)``: error ≤ relative_error·‖f‖₂ per row w.p. ≥ 2/3.

        >>> CountSketch.suggest_width(0.1)
        300
        """
        _check_unit_interval(relative_error, "relative_error")
        return math.ceil(3.0 / relative_error**2 - 1e-9)

    @staticmethod
    def suggest_depth(confidence: float) -> int:
        """``ceil(ln(1/(1 − confidence)))`` rows (median trick), rounded up to an odd number.

        >>> CountSketch.suggest_depth(0.95)
        3
        """
        _check_unit_interval(confidence, "confidence")
        j = max(1, math.ceil(math.log(1.0 / (1.0 - confidence))))
        return j if j % 2 else j + 1
