"""Private (or raw) Count-Min and Count Sketch (Holland et al. §4, Algorithm 1).

A sketch is a ``depth × width`` table of int64 counters (``j × w`` in the paper), hashed by a
public :class:`~sketchsyn.sketches.hashing.HashFamily`. With ``epsilon`` every cell starts at
``Lap_Z(depth/epsilon)`` (exact integer Laplace,
:func:`sketchsyn.privacy.noise.discrete_laplace`): one item changes one cell per row by one, so
the L1 sensitivity of the table is ``depth`` and the table is ``epsilon``-DP (event level,
add/remove one item) at every moment from construction on; every later read of it is
post-processing. Without ``epsilon`` the sketch is raw (exact, not private),
for a trusted collector who merges before adding noise.

Keys are non-negative integers below 2**64 (see :func:`~sketchsyn.sketches.hashing.as_keys`),
or ``str`` / ``bytes`` objects, which are mapped to a uint64 by :meth:`HashFamily.key_of
<sketchsyn.sketches.hashing.HashFamily.key_of>`.

Objects are single-threaded: an update or merge that finds another thread inside one raises
:class:`~sketchsyn.errors.ConcurrentUseError` (reading from several threads while nobody writes is
fine).

A private sketch's bytes (``to_bytes``, pickle) hold its public parameters, its noisy table and its
lineage (the identity of its noise draw, :mod:`sketchsyn.privacy.lineage`): ``merge`` refuses
two sketches that share a noise draw (a copy of one, or two built with the same seed). To
report a stream periodically, keep a raw sketch and ship ``flush(epsilon)``: a private sketch
of the items since the last flush with fresh noise (disjoint items, so the shipped sketches
compose in parallel).

>>> cms = CountMinSketch(width=256, depth=3, epsilon=1.0, rng=0)
>>> cms.update_many([1, 2, 2, 3, 3, 3])
>>> abs(cms.query(3) - 3) < 40  # noisy: Lap_Z(3) per cell
True
>>> raw = CountMinSketch(256, 3)
>>> raw.update(42, 5)
>>> raw.query(42)
5
>>> CountMinSketch.from_bytes(cms.to_bytes()) == cms
True
"""

from __future__ import annotations

import abc
import math
import numbers
from fractions import Fraction
from typing import Any

import numpy as np

from ..attributes import ReadOnly
from ..errors import (
    IncompatibleError,
    InputError,
    ParameterError,
    ReleasedError,
    check_int,
    check_memory,
)
from ..io.serial import Arrays, MetaReader
from ..io.summary import Summary
from ..privacy.accounting import laplace_scale
from ..privacy.lineage import Lineage, UsageGuard
from ..privacy.noise import discrete_laplace
from ..privacy.rng import RNGLike, as_source
from .hashing import HashFamily, as_keys

__all__ = ["CountMinSketch", "CountSketch", "row_median"]

_SCALARS_BYTES = 32  # width, depth, seed, epsilon: four 8-byte scalars
_LIMIT = 2**62  # no counter may reach this magnitude (int64 headroom, checked per batch)
_STR_TYPES = (str, bytes, bytearray, memoryview)


def row_median(values: Any) -> np.ndarray:
    """``np.median(values, axis=0)`` of a NaN-free 2-D array, the same numbers, without the
    import of ``numpy.ma`` that ``np.median`` makes for its NaN check (a process that
    releases a sketch need not load it).

    >>> row_median(np.array([[3.0, 1.0], [1.0, 2.0], [2.0, 9.0]])).tolist()
    [2.0, 2.0]
    >>> row_median(np.array([[1.0], [4.0]])).tolist()
    [2.5]
    """
    v = np.sort(np.asarray(values, dtype=np.float64), axis=0)  # (np.median's mean: float64)
    j = v.shape[0]
    if j % 2:
        return v[j // 2]
    return (v[j // 2 - 1] + v[j // 2]) / 2


# ------------------------------------------------------------------ input checks
def _keys_from_strings(items: list, name: str) -> np.ndarray:
    out = np.empty(len(items), dtype=np.uint64)
    for i, v in enumerate(items):
        if not isinstance(v, _STR_TYPES):
            raise InputError(
                f"{name} must be all integers or all str/bytes; {name}[{i}] = {v!r} among strings"
            )
        out[i] = HashFamily.key_of(v)
    return out


def _prepare_keys(keys: object, name: str = "keys") -> np.ndarray:
    """Flat uint64 keys from integers (checked by ``as_keys``) or str/bytes objects."""
    if isinstance(keys, _STR_TYPES):
        return np.array([HashFamily.key_of(keys)], dtype=np.uint64)
    if isinstance(keys, (list, tuple)):
        if any(isinstance(v, _STR_TYPES) for v in keys):
            return _keys_from_strings(list(keys), name)
    elif isinstance(keys, np.ndarray) and keys.dtype.kind in "USO":
        items = keys.reshape(-1).tolist()
        if keys.dtype.kind in "US" or any(isinstance(v, _STR_TYPES) for v in items):
            return _keys_from_strings(items, name)
    return as_keys(keys, name).reshape(-1)


def _as_counts(counts: object, n: int) -> np.ndarray:
    """Counts as an int64 vector of length ``n``: finite integers only (integral floats too)."""
    arr = np.asarray(counts)
    if arr.dtype.kind == "f" and not isinstance(counts, np.ndarray):
        arr = np.asarray(counts, dtype=object)  # exact big ints mixed with small ones
    if arr.ndim == 0:
        arr = np.full(n, arr)  # keeps the dtype, so the checks below still apply
    if arr.size != n:
        raise InputError(f"counts must have one entry per key ({n}); got shape {arr.shape}")
    flat = arr.reshape(-1)
    kind = flat.dtype.kind
    if kind == "i":
        bad = np.flatnonzero((flat >= _LIMIT) | (flat <= -_LIMIT))
    elif kind == "u":
        bad = np.flatnonzero(flat >= _LIMIT)
    elif kind == "f":
        with np.errstate(invalid="ignore"):
            ok = np.isfinite(flat) & (flat == np.floor(flat)) & (np.abs(flat) < _LIMIT)
        bad = np.flatnonzero(~ok)
    elif kind == "O":
        items = flat.tolist()
        for i, v in enumerate(items):
            integral = isinstance(v, numbers.Integral) or (
                isinstance(v, float) and math.isfinite(v) and v.is_integer()
            )
            if isinstance(v, bool) or not integral or abs(v) >= _LIMIT:
                raise InputError(f"counts must be finite integers; counts[{i}] = {v!r}")
        return np.array([int(v) for v in items], dtype=np.int64)
    else:  # bool, str, complex, ...
        if flat.size == 0:
            return np.zeros(0, dtype=np.int64)
        raise InputError(f"counts must be finite integers; counts[0] = {flat[0].item()!r}")
    if bad.size:
        i = int(bad[0])
        raise InputError(f"counts must be finite integers; counts[{i}] = {flat[i].item()!r}")
    return flat.astype(np.int64)


def _check_unit_interval(value: object, name: str, owner: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not 0 < float(value) < 1  # also refuses NaN
    ):
        raise ParameterError(
            f"The {name!r} parameter of {owner} must be a real number in (0, 1). "
            f"Got {value!r} instead."
        )
    return float(value)


# ------------------------------------------------------------------ shared machinery
class _Sketch(Summary):
    """Shared machinery of :class:`CountMinSketch` and :class:`CountSketch`."""

    FORMAT_VERSION = 2  # 2: lineage in the header; version 1 blobs (no lineage) still load
    READS = (1, 2)
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
        check_memory(
            8 * self._width * self._depth,
            name,
            f"a table of width={self._width} × depth={self._depth} int64 counters",
        )
        if epsilon is not None:
            if (
                isinstance(epsilon, bool)
                or not isinstance(epsilon, numbers.Real)
                or not math.isfinite(float(epsilon))
                or float(epsilon) <= 0
            ):
                raise ParameterError(
                    f"The 'epsilon' parameter of {name} must be None (raw) or a finite real "
                    f"number > 0. Got {epsilon!r} instead."
                )
            epsilon = float(epsilon)
            laplace_scale(self._depth, epsilon, name)  # refuse a budget too small, up front
        self._epsilon = epsilon
        self._family = HashFamily(self._width, self._depth, self._seed)
        # PrivHP rebinds _table to a view into its bank; it must stay a C-contiguous int64
        # (depth, width) array.
        self._table = np.zeros((self._depth, self._width), dtype=np.int64)
        source = as_source(rng)
        if epsilon is not None:
            self._table += discrete_laplace(
                self.noise_scale, (self._depth, self._width), rng=source
            )
        # A raw table holds no noise: its identity is random even with a seed.
        self._lineage = Lineage.new(
            source if epsilon is not None else as_source(None), self.kind, self._public_params()
        )
        self._usage = UsageGuard()
        self._frozen = False
        self._bound = self._abs_max()

    def _public_params(self) -> dict[str, Any]:
        return {
            "width": self._width,
            "depth": self._depth,
            "seed": self._seed,
            "epsilon": self._epsilon,
        }

    def _abs_max(self) -> int:
        """Largest counter magnitude (exact): the extremes compared as Python ints, never
        ``np.abs`` (which leaves the int64 minimum negative)."""
        return max(-int(self._table.min()), int(self._table.max()))

    # -------------------------------------------------------------- parameters and state
    width = ReadOnly[int]("Columns per row (``w``).")
    depth = ReadOnly[int]("Rows (``j``).")
    seed = ReadOnly[int]("Public hash seed (see :class:`~sketchsyn.sketches.hashing.HashFamily`).")
    epsilon = ReadOnly[float | None]("Privacy budget of the state (``None`` for a raw sketch).")

    @property
    def noise_scale(self) -> float | None:
        """Scale of the integer Laplace noise in every cell: ``depth/epsilon`` rounded up to a
        float so that the realised budget ``depth/scale`` is at most ``epsilon`` exactly."""
        if self._epsilon is None:
            return None
        return laplace_scale(self._depth, self._epsilon, type(self).__name__)

    lineage = ReadOnly[Lineage](
        "The identity of the noise draw(s) in this table (shared by its copies)."
    )
    family = ReadOnly[HashFamily]("The public hash family (row buckets and signs).")

    @property
    def table(self) -> np.ndarray:
        """A read-only view of the ``(depth, width)`` int64 counters."""
        view = self._table.view()
        view.setflags(write=False)
        return view

    @property
    def nbytes(self) -> int:
        """State size in bytes, fixed at construction.

        ``8·width·depth`` for the counters, ``8·depth`` for the row and sign seeds (uint32 each)
        and 32 for the scalars (width, depth, seed, epsilon).
        """
        return int(self._table.nbytes) + 8 * self._depth + _SCALARS_BYTES

    # -------------------------------------------------------------- updates
    def _check_writable(self) -> None:
        if self._frozen:
            raise ReleasedError(f"this {type(self).__name__} is a snapshot; it is read-only")

    def update(self, key: object, count: int = 1) -> None:
        """Add ``count`` occurrences of one ``key``.

        Parameters
        ----------
        key : int, str or bytes
            One key (an int in ``[0, 2**64)``, an integral float, a str or bytes).
        count : int
            A finite integer (negative counts are turnstile deletions).

        Examples
        --------
        >>> s = CountMinSketch(16, 2)
        >>> s.update("10.0.0.1", 3)
        >>> s.query("10.0.0.1")
        3
        """
        if not isinstance(key, _STR_TYPES) and np.ndim(key) != 0:
            raise InputError(f"key must be a single key (use update_many for batches); got {key!r}")
        self.update_many([key], [count])

    def update_many(self, keys: object, counts: object = None) -> None:
        """Add a batch (vectorised); the whole batch is checked before the table changes.

        Parameters
        ----------
        keys : array_like
            Integer keys (any shape, flattened) or a list / array of str or bytes.
        counts : array_like, optional
            One finite integer per key (int arrays, or floats that are integral), or a scalar
            for all; default 1 each. Negative counts are allowed (turnstile updates); Count-Min's
            "never underestimates" guarantee needs every key's true total to be non-negative.
            A batch that could take a counter's magnitude to 2**62 is refused.

        Raises
        ------
        InputError
            For a bad key or count, naming its index and value; the table is left unchanged.
        ReleasedError
            On a snapshot.

        Examples
        --------
        >>> s = CountMinSketch(64, 2)
        >>> s.update_many([5, 5, 6], counts=[2, 1, 4])
        >>> s.query_many([5, 6]).tolist()
        [3, 4]
        """
        self._check_writable()
        with self._usage.enter(type(self).__name__):
            self._update_many(keys, counts)

    def _update_many(self, keys: object, counts: object) -> None:
        k = _prepare_keys(keys)
        c = None if counts is None else _as_counts(counts, k.size)
        if k.size == 0:
            return
        total = k.size if c is None else int(np.abs(c).sum(dtype=np.float64))
        # ``_bound`` is an upper bound on every counter's magnitude, kept up to date by updates
        # and merges; when it gets near the limit the exact maximum is taken before refusing.
        if self._bound + total >= _LIMIT:
            self._bound = self._abs_max()
            if self._bound + total >= _LIMIT:
                raise InputError(
                    f"counts: this batch (total |count| = {total:.4g}) could overflow the int64 "
                    "counters (limit 2**62)"
                )
        flat = self._family.flat_indices(k).ravel()
        if self._signed:
            signs = self._family.signs(k)
            w = signs.astype(np.float64) if c is None else signs * c[None, :]  # int64: exact
            weights: np.ndarray | None = w.ravel()
        else:
            weights = None if c is None else np.tile(c, self._depth)
        self._table += self._accumulate(flat, weights, total)
        self._bound += total

    def _accumulate(self, flat: np.ndarray, weights: np.ndarray | None, total: int) -> np.ndarray:
        """Sum ``weights`` (default 1) into cells ``flat``: an int64 ``(depth, width)`` array."""
        shape = (self._depth, self._width)
        size = self._depth * self._width
        if weights is None:
            return np.bincount(flat, minlength=size).reshape(shape)
        if total < 2.0**52:
            # Every partial sum is an integer of magnitude below 2**53: float64 sums are exact.
            acc = np.bincount(flat, weights=weights.astype(np.float64, copy=False), minlength=size)
            return np.rint(acc).astype(np.int64).reshape(shape)
        out = np.zeros(size, dtype=np.int64)
        np.add.at(out, flat, weights.astype(np.int64))  # exact int64 for huge weights
        return out.reshape(shape)

    # -------------------------------------------------------------- queries
    def _row_values(self, keys: object) -> np.ndarray:
        """``(depth, n)`` cell values of each key (times its sign for Count Sketch)."""
        k = _prepare_keys(keys)
        values = self._table.reshape(-1)[self._family.flat_indices(k)]
        if self._signed:
            values *= self._family.signs(k)
        return values

    def query(self, key: object) -> Any:
        """Estimated count of one ``key`` (a Python int, or float for :class:`CountSketch`).

        Examples
        --------
        >>> s = CountSketch(64, 3)
        >>> s.update(7, 4)
        >>> s.query(7)
        4.0
        """
        if not isinstance(key, _STR_TYPES) and np.ndim(key) != 0:
            raise InputError(f"key must be a single key (use query_many for batches); got {key!r}")
        return self.query_many([key])[0].item()

    @abc.abstractmethod
    def query_many(self, keys: object) -> np.ndarray:
        """Estimated counts of a batch of keys (Count-Min: min of rows; Count Sketch: median)."""

    # -------------------------------------------------------------- combine, copy, save
    def merge(self, other: _Sketch) -> None:
        """Add ``other``'s counters into this sketch (in place).

        Both must be of the same class with the same ``width``, ``depth`` and ``seed``
        (the same hash family), else :class:`IncompatibleError` names the differing parameter.

        Privacy of the sum. Sketches are linear, so the merged table is the table of the
        concatenated streams plus the sum of the two noise draws (variances add).

        * Two private sketches over **disjoint** streams (each item is in one of them): the
          merged state is post-processing of two mechanisms on disjoint data, so it is
          ``max(ε_a, ε_b)``-DP for the union (parallel composition); ``epsilon`` becomes that
          maximum (equal budgets: it stays ``ε``). If the streams overlap, the caller must
          account ``ε_a + ε_b`` for the items in both; the sketch cannot know.
        * Raw + private: ``count(union) + noise`` is ``ε``-DP for the union with the private
          side's ``ε`` (the noise covers every item's contribution); the result is private.
        * Raw + raw stays raw.
        * Two sketches that share a noise draw (the same object, a snapshot, deepcopy, pickle
          or ``from_bytes`` copy of it, or two sketches built with the same seed) are refused:
          the sum would hold the same noise twice (``counts + 2·noise``), whose parity gives
          away the exact counts. The merged sketch's lineage holds both operands' draws.

        Examples
        --------
        >>> a, b = CountMinSketch(64, 3, seed=1), CountMinSketch(64, 3, seed=1)
        >>> a.update_many([1, 1]); b.update_many([1, 2])
        >>> a.merge(b)
        >>> a.query_many([1, 2]).tolist()
        [3, 1]
        """
        self._check_writable()
        with self._usage.enter(type(self).__name__):
            self._merge(other)

    def _merge(self, other: _Sketch) -> None:
        if type(other) is not type(self):
            raise IncompatibleError(
                f"cannot merge a {type(other).__name__} into a {type(self).__name__}"
            )
        if other is self:
            raise IncompatibleError(
                f"cannot merge a {type(self).__name__} with itself (it would double its counts)"
            )
        for name in ("width", "depth", "seed"):
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine != theirs:
                raise IncompatibleError(
                    f"cannot merge two {type(self).__name__} objects with different {name!r}: "
                    f"{mine} != {theirs}"
                )
        lineage = self._lineage.union(other._lineage, type(self).__name__)
        bound = self._abs_max() + other._abs_max()
        if bound >= _LIMIT:
            raise IncompatibleError("the merged counters could overflow int64 (limit 2**62)")
        self._table += other._table
        self._bound = bound
        self._lineage = lineage
        if self._epsilon is None:
            self._epsilon = other._epsilon
        elif other._epsilon is not None:
            self._epsilon = max(self._epsilon, other._epsilon)

    def flush(self, epsilon: float, rng: RNGLike = None) -> _Sketch:
        """Ship the items since the last flush: a private sketch of them, with fresh noise.

        Only for a raw sketch (a trusted local collector). The returned sketch holds this
        sketch's counts plus ``Lap_Z(depth/epsilon)`` per cell drawn now, under a new lineage;
        this sketch is then reset to zero. Each item is in exactly one flushed sketch, so the
        flushed sketches are ``epsilon``-DP together (parallel composition) and a server may
        merge them. Their noise adds up: after ``m`` flushes merged together, each cell carries
        ``m`` independent draws (variance ``m`` times one draw's).

        Examples
        --------
        >>> local = CountMinSketch(64, 2)
        >>> local.update_many([1, 2, 2])
        >>> shipped = local.flush(epsilon=1.0, rng=3)
        >>> shipped.epsilon, local.query(2)
        (1.0, 0)
        """
        self._check_writable()
        if self._epsilon is not None:
            raise ParameterError(
                f"flush() needs a raw {type(self).__name__} (built without epsilon): this one "
                "is already noisy, and shipping its state twice would release one noise draw "
                "at two stream positions"
            )
        with self._usage.enter(type(self).__name__):
            private = type(self)(self._width, self._depth, epsilon, self._seed, rng)
            private._table += self._table
            private._bound = private._abs_max()
            self._table[...] = 0
            self._bound = 0
        return private

    # -------------------------------------------------------------- bytes (Summary hooks)
    @property
    def state_privacy(self) -> str:
        """``"private"`` for a sketch built with ``epsilon`` (a noisy table), ``"trusted"`` for a
        raw one (exact counts: a curator's state).

        The bytes (``to_bytes``, schema version 2) hold ``width``, ``depth``, ``seed``,
        ``epsilon``, the lineage (identity of the noise draw), whether the object is a read-only
        snapshot, and the table: nothing else. Every copy loaded from them holds the same noise
        draw: merging two of them is refused in any process, but nothing can stop two processes
        from publishing two copies at different stream positions (their difference is exact).
        To ship a stream periodically, use :meth:`flush` on a raw sketch.

        Examples
        --------
        >>> CountSketch(8, 3).state_privacy, CountSketch(8, 3, epsilon=1.0, rng=0).state_privacy
        ('trusted', 'private')
        >>> s = CountSketch(8, 3, seed=2)
        >>> CountSketch.from_bytes(s.to_bytes()) == s
        True
        >>> CountMinSketch.from_bytes(CountMinSketch(8, 2).to_bytes()[:-3])
        Traceback (most recent call last):
        ...
        sketchsyn.errors.SerializationError: CountMinSketch blob is corrupt: checksum mismatch (truncated or altered).
        """  # noqa: E501
        return "trusted" if self._epsilon is None else "private"

    def _state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        meta = self._public_params() | {
            "frozen": self._frozen,
            "lineage": self._lineage.to_meta(),
        }
        return meta, {"table": self._table}

    @classmethod
    def _from_state(
        cls, fields: MetaReader, arrays: Arrays, version: int, blob: bytes, rng: Any
    ) -> _Sketch:
        """Schema versions 1 and 2; a version 1 blob (no lineage) gets a lineage derived from
        its bytes. Every field and the table are checked before anything is allocated; the
        table's counters lie within ±(2**62 − 1), the bound updates and merges keep, and no
        field or array the class does not write is accepted."""
        width = fields.int("width", minimum=1, maximum=2**31)
        depth = fields.int("depth", minimum=1, maximum=1024)
        seed = fields.int("seed", minimum=0, maximum=2**32 - 1)
        fields.value("epsilon")  # always written (null for a raw sketch): never defaulted
        epsilon = fields.epsilon("epsilon", optional=True)
        # Version 2 always writes 'frozen'; version 1 wrote it from late in its life only.
        frozen = fields.bool("frozen", default=False if version == 1 else None)
        table = fields.bounded(arrays, "table", np.int64, (depth, width), 1 - _LIMIT, _LIMIT - 1)
        if version >= 2:
            lineage = fields.lineage()
        else:
            lineage = Lineage.of_legacy_blob(blob)
        if epsilon is not None:
            laplace_scale(depth, epsilon, cls.kind)
        fields.done(arrays)
        obj = cls(width, depth, None, seed)
        obj._table[...] = table
        obj._bound = obj._abs_max()
        obj._epsilon = epsilon
        obj._frozen = frozen
        obj._lineage = lineage
        return obj

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(width={self._width}, depth={self._depth}, "
            f"epsilon={self._epsilon}, seed={self._seed})"
        )


class CountMinSketch(_Sketch):
    """Count-Min sketch: ``query`` is the minimum over rows of the key's cell.

    Saved state: **private** when built with ``epsilon`` (the noise is in the table from
    construction: public parameters and noisy counters only), **trusted** when raw (exact
    counts); ``state_privacy`` and the blob header say which.

    Parameters
    ----------
    width, depth : int
        Table shape (``w`` columns in ``[1, 2**31]``, ``j`` rows in ``[1, 1024]``).
    epsilon : float, optional
        With it, every cell starts at ``Lap_Z(depth/epsilon)``: the state is ε-DP from
        construction on (event level, add/remove one item). Without it the sketch is raw.
    seed : int
        Public hash seed in ``[0, 2**32)``; sketches merge only with equal seeds.
    rng : None, int, SeedSequence, Generator or RandomSource
        Source of the construction noise, via :func:`sketchsyn.privacy.rng.as_source`
        (``None``: the OS CSPRNG; a seed is for tests only and is not private against whoever
        knows it). When building many sketches, give each its own stream, e.g.
        ``as_source(rng).spawn(n)``, so that no two share noise.

    Notes
    -----
    On a raw sketch with non-negative totals the estimate never underestimates, and with
    ``width = ceil(e/ε')``, ``depth = ceil(ln(1/δ))`` it exceeds the truth by more than ``ε'·N``
    (``N`` the stream's total count) with probability at most ``δ`` (Cormode & Muthukrishnan).
    A private sketch adds ``Lap_Z(depth/epsilon)`` to every cell, so its minimum can also
    underestimate; the noise does not grow with ``N``.

    Examples
    --------
    >>> s = CountMinSketch(64, 2)
    >>> s.update_many([5, 5, 6], [2, 1, 4])
    >>> s.query_many([5, 6]).tolist()
    [3, 4]
    >>> CountMinSketch(64, 2, epsilon=0.5, rng=1).epsilon
    0.5
    """

    def query_many(self, keys: object) -> np.ndarray:
        """Estimated counts (int64): the minimum over rows.

        Examples
        --------
        >>> s = CountMinSketch(64, 3)
        >>> s.update_many([1, 2, 2])
        >>> s.query_many([1, 2, 3]).tolist()
        [1, 2, 0]
        """
        return self._row_values(keys).min(axis=0)

    @staticmethod
    def suggest_width(relative_error: float) -> int:
        """``ceil(e / relative_error)`` columns.

        Then each row overestimates by more than ``relative_error · N`` with probability at
        most ``1/e`` (Markov's inequality on the expected collision mass ``N/width``).

        Examples
        --------
        >>> CountMinSketch.suggest_width(0.01)
        272
        """
        eps = _check_unit_interval(relative_error, "relative_error", "CountMinSketch")
        return math.ceil(math.e / eps)

    @staticmethod
    def suggest_depth(confidence: float) -> int:
        """``ceil(ln(1 / (1 − confidence)))`` rows (at least 1).

        With :meth:`suggest_width`'s width, all rows fail together with probability at most
        ``e**-depth ≤ 1 − confidence``.

        Examples
        --------
        >>> CountMinSketch.suggest_depth(0.95)
        3
        """
        conf = _check_unit_interval(confidence, "confidence", "CountMinSketch")
        return max(1, math.ceil(math.log(1.0 / (1.0 - conf))))


# A Count Sketch row of width 8/ε'² errs by more than ε'·‖f‖₂ with probability at most 1/8
# (Chebyshev: the row's error has variance at most ‖f‖₂² / width under pairwise independence).
_CS_ROW_FAILURE = Fraction(1, 8)


def _median_failure(depth: int) -> float:
    """P[Binomial(depth, 1/8) ≥ (depth + 1)/2]: the median of ``depth`` (odd) rows fails."""
    p = _CS_ROW_FAILURE
    total = sum(
        math.comb(depth, i) * p**i * (1 - p) ** (depth - i)
        for i in range((depth + 1) // 2, depth + 1)
    )
    return float(total)


class CountSketch(_Sketch):
    """Count Sketch: ``query`` is the median over rows of ``sign · cell`` (unbiased).

    Same parameters as :class:`CountMinSketch`. Queries return float64: with an odd ``depth``
    the median is one row's value (an integer); with an even ``depth`` it is the mean of the two
    middle values (so it may end in ``.5``). The estimate is unbiased for every key, raw or
    private (the noise has mean zero).

    Saved state: **private** when built with ``epsilon`` (the noise is in the table from
    construction: public parameters and noisy counters only), **trusted** when raw (exact
    counts); ``state_privacy`` and the blob header say which.

    Examples
    --------
    >>> s = CountSketch(64, 3)
    >>> s.update_many([5, 5, 6])
    >>> s.query_many([5, 6]).tolist()
    [2.0, 1.0]
    >>> p = CountSketch(64, 3, epsilon=1.0, rng=3)
    >>> p.query_many([5]).dtype
    dtype('float64')
    """

    _signed = True

    def query_many(self, keys: object) -> np.ndarray:
        """Median estimates (float64).

        Examples
        --------
        >>> s = CountSketch(64, 4)
        >>> s.update_many([9, 9])
        >>> s.query_many([9]).tolist()
        [2.0]
        """
        return row_median(self._row_values(keys)).astype(np.float64)

    @staticmethod
    def suggest_width(relative_error: float) -> int:
        """``ceil(8 / relative_error²)`` columns.

        Then each row's estimate is off by more than ``relative_error · ‖f‖₂`` (``f`` the
        frequency vector) with probability at most 1/8 (Chebyshev).

        Examples
        --------
        >>> CountSketch.suggest_width(0.1)
        800
        """
        eps = _check_unit_interval(relative_error, "relative_error", "CountSketch")
        return math.ceil(Fraction(8) / Fraction(eps) ** 2)

    @staticmethod
    def suggest_depth(confidence: float) -> int:
        """The smallest odd number of rows whose median fails with probability ≤ 1 − confidence.

        With :meth:`suggest_width`'s width each row fails independently with probability at
        most 1/8, and the median fails only if at least half of the rows do: the exact binomial
        tail ``P[Bin(depth, 1/8) ≥ (depth+1)/2]`` is used (e.g. 3 rows for 0.95, 7 for 0.99).

        Examples
        --------
        >>> CountSketch.suggest_depth(0.95), CountSketch.suggest_depth(0.99)
        (3, 7)
        """
        conf = _check_unit_interval(confidence, "confidence", "CountSketch")
        for depth in range(1, 1024, 2):
            if _median_failure(depth) <= 1.0 - conf:
                return depth
        raise ParameterError(
            f"The 'confidence' parameter of CountSketch needs more than 1023 rows. "
            f"Got {confidence!r} instead."
        )
