"""The contribution bounder: at most ``L`` rows of each privacy unit, in one pass and fixed memory.

A user, a device or a client is many rows of a stream. :class:`ContributionBounder` sits in
front of a summary whose state is linear in its rows and passes on at most ``max_rows`` (``L``)
rows of each unit, the first ones, in a table of fixed size: ``buckets`` (``B``) buckets of
``slots`` (``s``) slots, a slot holding a 16-bit keyed fingerprint of a unit and its count.

A row of unit ``u``: ``u`` is hashed with the secret key to a bucket and a fingerprint
(:meth:`keys`). If a slot of the bucket holds the fingerprint, the row is kept while its
count is below ``L`` (and counted); otherwise, if the bucket has a free slot, the row claims it
and is kept; otherwise it is dropped. Slots are never freed. Before that, a unit may be
pre-sampled by a keyed hash at a public rate (``sample_rate``), all its rows in or out.

**The bound** (proof in the privacy page of the documentation). Two streams that differ by all
rows of one unit (any number of them, anywhere) keep row multisets that differ by at most
``2L`` rows (:attr:`sensitivity`): only the unit's bucket behaves differently, in it the unit's
fingerprint may take a slot (its first ``L`` rows, shared with any unit of the same fingerprint)
and push one other fingerprint out of the slots (its ``L`` rows), or, when its fingerprint
already holds a slot, it replaces at most as many of that slot's rows as it adds. So a summary
behind the bounder is ε-DP with one unit as the neighbouring relation when its noise is sized
for ``2L`` times what one row moves. Collisions, full buckets and sampling cost utility only,
never privacy; ``B``, ``s``, ``L``, the sample rate and the hash family (MurmurHash3, see
:mod:`sketchsyn.units.ids`) are public. The key (128 bits from the OS CSPRNG unless ``rng`` is a
seed) is kept secret so that nobody can craft ids that collide with a unit and starve it of a
slot; the guarantee does not rest on it.

Saved state: **trusted**. The table holds keyed fingerprints of the units seen and their exact
row counts, and the bytes hold the key: keep them with the data, like a raw summary. The
counts of rows kept and dropped (:attr:`diagnostics`) are exact, for the data holder.

>>> b = ContributionBounder(max_rows=2, buckets=64, rng=7)
>>> b.update_many(["ann", "bob", "ann", "ann", "bob"]).tolist()
[True, True, True, False, True]
>>> b.query("ann"), b.query("cy"), b.units_admitted, b.sensitivity
(2, 0, 2, 4)
>>> b.diagnostics["rows_capped"], b.nbytes
(1, 1664)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..attributes import ReadOnly
from ..errors import ParameterError, ReleasedError, SerializationError, check_int, check_memory
from ..io.serial import Arrays, MetaReader, check_range
from ..io.summary import Summary
from ..privacy.lineage import UsageGuard
from ..privacy.rng import RNGLike, as_source
from ..sketches.hashing import murmur3_32
from . import sizing
from .admit import Outcome, admit
from .ids import unit_keys

__all__ = ["ContributionBounder"]

_OWNER = "ContributionBounder"
_FP_BITS = 16
_DIAGNOSTICS = ("rows_seen", "rows_kept", "rows_capped", "rows_refused", "rows_sampled_out")


class ContributionBounder(Summary):
    """At most ``max_rows`` rows of each privacy unit, first come, in a fixed table.

    Saved state: **trusted** (keyed fingerprints of the units, exact counts and the key).

    Parameters
    ----------
    max_rows : int
        ``L``: rows kept of each unit, ``1 ≤ L ≤ 2**31 − 2`` (public).
    buckets : int
        ``B``: buckets of the table (public), ``1 … 2**28``. :meth:`for_units` chooses it from a
        public number of units.
    slots : int, default 8
        ``s``: slots a bucket (public), ``1 … 64``.
    fingerprint_bits : int, default 16
        Bits of a fingerprint (public), ``1 … 16``; a fingerprint is in ``1 … 2**f − 1`` (0 marks
        a free slot). Fewer bits only make units share slots (for tests of collisions).
    sample_rate : float, default 1.0
        Share of units admitted at all, by keyed hash (public), in ``(0, 1]``.
    rng : None, int, SeedSequence, Generator or RandomSource
        Where the 128-bit key comes from: ``None`` (default) is the OS CSPRNG; a seed makes the
        key reproducible (tests) and known to whoever knows the seed.

    Examples
    --------
    >>> b = ContributionBounder.for_units(max_rows=16, expected_units=10_000, rng=0)
    >>> b.buckets, b.slots, b.nbytes
    (1667, 8, 41739)
    >>> keep = b.update_many(np.repeat(np.arange(100), 30))   # 100 units of 30 rows
    >>> int(keep.sum()), b.diagnostics["rows_capped"]
    (1600, 1400)
    """

    STATE_PRIVACY = "trusted"
    FORMAT_VERSION = 1
    TAKES_UNIT = True  # its max_rows is its own parameter

    def __init__(
        self,
        max_rows: int,
        buckets: int,
        slots: int = sizing.SLOTS,
        fingerprint_bits: int = _FP_BITS,
        sample_rate: float = 1.0,
        rng: RNGLike = None,
    ) -> None:
        self._max_rows = check_int(max_rows, "max_rows", _OWNER, minimum=1, maximum=sizing.MAX_ROWS)
        self._buckets = check_int(buckets, "buckets", _OWNER, minimum=1, maximum=sizing.MAX_BUCKETS)
        self._slots = check_int(slots, "slots", _OWNER, minimum=1, maximum=sizing.MAX_SLOTS)
        self._fp_bits = check_int(
            fingerprint_bits, "fingerprint_bits", _OWNER, minimum=1, maximum=_FP_BITS
        )
        rate = sample_rate
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 < rate <= 1:
            raise ParameterError(
                f"The 'sample_rate' parameter of {_OWNER} must be a number in (0, 1]. "
                f"Got {sample_rate!r} instead."
            )
        self._rate = float(rate)
        # A unit is in the sample when its sample hash is below this (2**32: every unit).
        self._threshold = max(1, int(self._rate * 2**32))
        check_memory(
            sizing.table_bytes(self._buckets, self._slots, self._max_rows),
            _OWNER,
            f"buckets={self._buckets} × slots={self._slots}",
        )
        words = as_source(rng).uint64(2)
        self._key = words.view(np.uint32).copy()  # text seed, bucket, fingerprint, sample
        self._fps = np.zeros((self._buckets, self._slots), dtype=np.uint16)
        self._counts = np.zeros((self._buckets, self._slots), dtype=sizing.count_dtype(max_rows))
        self._occupancy = np.zeros(self._buckets, dtype=np.uint8)
        self._diag = dict.fromkeys(_DIAGNOSTICS, 0)
        self._frozen = False
        self._usage = UsageGuard()

    @classmethod
    def for_units(
        cls,
        max_rows: int,
        expected_units: int | None = None,
        memory_bytes: int | None = None,
        *,
        slots: int = sizing.SLOTS,
        rng: RNGLike = None,
    ) -> ContributionBounder:
        """A bounder sized for a public ``expected_units`` (and within ``memory_bytes``, units
        pre-sampled when they do not fit: :func:`sketchsyn.units.sizing.plan`).

        >>> b = ContributionBounder.for_units(16, 1_000_000, memory_bytes=100_000, rng=0)
        >>> b.nbytes <= 100_000, round(b.sample_rate, 3)
        (True, 0.024)
        """
        buckets, rate = sizing.plan(max_rows, expected_units, memory_bytes, slots)
        return cls(max_rows, buckets, slots=slots, sample_rate=rate, rng=rng)

    # ------------------------------------------------------------------ parameters
    max_rows = ReadOnly[int]("``L``: rows kept of each unit (public).")
    buckets = ReadOnly[int]("``B``: buckets of the table (public).")
    slots = ReadOnly[int]("``s``: slots a bucket (public).")

    @property
    def fingerprint_bits(self) -> int:
        """Bits of a fingerprint (public)."""
        return self._fp_bits

    @property
    def sample_rate(self) -> float:
        """Share of units admitted at all, by keyed hash (public; 1.0: every unit)."""
        return self._rate

    @property
    def sensitivity(self) -> int:
        """``2L``: the most rows by which the kept rows of two streams that differ by one unit
        can differ (module docstring). Every noise scale behind the bounder is multiplied by
        it."""
        return 2 * self._max_rows

    @property
    def capacity(self) -> int:
        """Slots of the table, ``B·s``: the most units (fingerprints) it can admit."""
        return self._buckets * self._slots

    @property
    def units_admitted(self) -> int:
        """Slots claimed so far (units admitted; units sharing a fingerprint share one)."""
        return int(self._occupancy.sum(dtype=np.int64))

    @property
    def units_capped(self) -> int:
        """Admitted units that have had rows dropped past ``L`` (exact)."""
        return int(np.count_nonzero(self._counts == self._max_rows + 1))

    @property
    def diagnostics(self) -> dict[str, int]:
        """Exact counts for the data holder (not private): rows seen, kept, dropped past the
        cap (``rows_capped``), dropped for want of a slot (``rows_refused``), left out by the
        pre-sample (``rows_sampled_out``); units admitted and capped. A copy."""
        return dict(self._diag) | {
            "units_admitted": self.units_admitted,
            "units_capped": self.units_capped,
        }

    @property
    def nbytes(self) -> int:
        """``B·s·(2 + count bytes) + B + 64``: fixed at construction."""
        return int(
            self._fps.nbytes + self._counts.nbytes + self._occupancy.nbytes + sizing.HEADER_BYTES
        )

    def describe(self) -> str:
        """One line: the public parameters and the bound.

        >>> ContributionBounder(16, 1024, rng=0).describe()
        'at most 16 rows a unit (first come); 1,024 buckets × 8 slots, 16-bit keyed fingerprints; sensitivity 2L = 32 rows'
        """  # noqa: E501
        sample = "" if self._rate == 1.0 else f"; units pre-sampled at rate {self._rate:.4g}"
        return (
            f"at most {self._max_rows} rows a unit (first come); {self._buckets:,} buckets × "
            f"{self._slots} slots, {self._fp_bits}-bit keyed fingerprints{sample}; sensitivity "
            f"2L = {self.sensitivity} rows"
        )

    # ------------------------------------------------------------------ rows
    def _check_open(self) -> None:
        if self._frozen:
            raise ReleasedError(f"this {_OWNER} is a snapshot; it is read-only")

    def keys(self, units: Any, name: str = "units") -> np.ndarray:
        """The ``uint64`` keys of a batch of unit ids, checked (no state changes): a bad id
        raises :class:`~sketchsyn.errors.InputError` naming ``name`` and the row
        (:func:`sketchsyn.units.ids.unit_keys`; texts are hashed with a part of the key)."""
        return unit_keys(units, int(self._key[0]), name)

    def _hash(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Each key's bucket and fingerprint (of the rows in the pre-sample), and the mask of
        the pre-sample (None: every row is in it)."""
        sampling = self._threshold < 2**32
        seeds = self._key[1:4] if sampling else self._key[1:3]
        h = murmur3_32(keys[None, :], seeds[:, None])
        sampled = None
        if sampling:
            sampled = h[2] < np.uint32(self._threshold)
            h = h[:2, sampled]
        bucket = (h[0].astype(np.uint64) * np.uint64(self._buckets)) >> np.uint64(32)
        # A fingerprint in 1 … 2**f − 1 (multiply-shift onto 2**f − 1 values, plus one).
        top = np.uint64((1 << self._fp_bits) - 1)
        fingerprint = ((h[1].astype(np.uint64) * top) >> np.uint64(32)) + np.uint64(1)
        return bucket.astype(np.int64), fingerprint.astype(np.uint16), sampled

    def admit_keys(self, keys: np.ndarray) -> np.ndarray:
        """Admit rows given by their keys (:meth:`keys`), in stream order: the mask of rows
        kept. The state changes."""
        self._check_open()
        bucket, fingerprint, sampled = self._hash(keys)
        outcome = Outcome()
        with self._usage.enter(_OWNER):  # one thread at a time (else ConcurrentUseError)
            kept = admit(
                self._fps,
                self._counts,
                bucket,
                fingerprint,
                self._max_rows,
                self._occupancy,
                outcome,
            )
        if sampled is not None:
            keep = np.zeros(keys.size, dtype=bool)
            keep[sampled] = kept
            kept = keep
        d = self._diag
        d["rows_seen"] += int(keys.size)
        d["rows_kept"] += outcome.kept
        d["rows_capped"] += outcome.capped
        d["rows_refused"] += outcome.full
        d["rows_sampled_out"] += int(keys.size - bucket.size)
        return kept

    def update_many(self, units: Any) -> np.ndarray:
        """Admit a batch of unit ids (one a row, in stream order): the mask of rows kept. Equal
        to :meth:`update` row by row. A refused batch leaves the table as it was."""
        self._check_open()
        return self.admit_keys(self.keys(units))

    def update(self, unit: Any) -> bool:
        """Admit one row of ``unit``: True when it is kept."""
        return bool(self.update_many(np.array([unit], dtype=object))[0])

    def query(self, unit: Any) -> int:
        """Rows kept so far under ``unit``'s fingerprint (0: no slot, or sampled out)."""
        bucket, fingerprint, _ = self._hash(self.keys(np.array([unit], dtype=object), "unit"))
        if bucket.size == 0:  # sampled out
            return 0
        hit = np.flatnonzero(self._fps[bucket[0]] == fingerprint[0])
        if hit.size == 0:
            return 0
        return min(int(self._counts[bucket[0], hit[0]]), self._max_rows)

    # ------------------------------------------------------------------ bytes
    def _params(self) -> dict[str, Any]:
        return {
            "max_rows": self._max_rows,
            "buckets": self._buckets,
            "slots": self._slots,
            "fingerprint_bits": self._fp_bits,
            "sample_rate": self._rate,
        }

    def _state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        meta = self._params() | {"frozen": self._frozen, "diagnostics": dict(self._diag)}
        arrays = {
            "key": self._key,
            "fingerprints": _bytes(self._fps),
            "counts": _bytes(self._counts),
        }
        return meta, arrays

    @classmethod
    def _from_state(
        cls, fields: MetaReader, arrays: Arrays, version: int, blob: bytes, rng: Any
    ) -> ContributionBounder:
        """Every field is checked for type and range, the table's size against the memory cap,
        and the table itself: fingerprints below ``2**f``, counts at most ``L + 1``, a slot's
        count zero exactly when its fingerprint is, a bucket's occupied slots first, no
        fingerprint twice in a bucket."""
        L = fields.int("max_rows", minimum=1, maximum=sizing.MAX_ROWS)
        B = fields.int("buckets", minimum=1, maximum=sizing.MAX_BUCKETS)
        s = fields.int("slots", minimum=1, maximum=sizing.MAX_SLOTS)
        f = fields.int("fingerprint_bits", minimum=1, maximum=_FP_BITS)
        rate = fields.float("sample_rate", positive=True, minimum=0.0, maximum=1.0)
        frozen = fields.bool("frozen")
        diag = MetaReader(fields.dict("diagnostics"), cls.kind)
        counts_of = {k: diag.int(k, minimum=0, maximum=2**63 - 1) for k in _DIAGNOSTICS}
        diag.done({})
        check_memory(sizing.table_bytes(B, s, L), cls.kind, f"buckets={B} × slots={s}")
        key = fields.array(arrays, "key", np.uint32, (4,))
        fps = _table(fields, arrays, "fingerprints", np.dtype(np.uint16), B, s, (1 << f) - 1)
        counts = _table(fields, arrays, "counts", sizing.count_dtype(L), B, s, L + 1)
        fields.done(arrays)
        used = fps != 0
        if not np.array_equal(used, counts != 0):
            raise SerializationError(
                f"{cls.kind} blob array 'counts' is zero where a slot holds a fingerprint, or "
                "the reverse"
            )
        if s > 1 and (used[:, 1:] & ~used[:, :-1]).any():
            raise SerializationError(
                f"{cls.kind} blob array 'fingerprints' has a free slot before an occupied one"
            )
        ordered = np.sort(fps, axis=1)
        if s > 1 and ((ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] != 0)).any():
            raise SerializationError(
                f"{cls.kind} blob array 'fingerprints' holds a fingerprint twice in a bucket"
            )
        obj = cls(L, B, slots=s, fingerprint_bits=f, sample_rate=rate, rng=0)
        if obj._rate != rate:
            raise SerializationError(f"{cls.kind} blob header field 'sample_rate' is not exact")
        obj._key[...] = key
        obj._fps[...] = fps
        obj._counts[...] = counts
        obj._occupancy[...] = used.sum(axis=1)
        obj._diag = counts_of
        obj._frozen = frozen
        return obj

    def __repr__(self) -> str:
        return (
            f"ContributionBounder(max_rows={self._max_rows}, buckets={self._buckets}, "
            f"slots={self._slots}, fingerprint_bits={self._fp_bits}, "
            f"sample_rate={self._rate!r}, nbytes={self.nbytes})"
        )


def _bytes(table: np.ndarray) -> np.ndarray:
    """A table of 16-bit values as its little-endian bytes (the container stores no 16-bit
    arrays); other tables as they are."""
    if table.dtype.itemsize != 2:
        return table
    return table.astype("<u2").view(np.uint8).reshape(table.shape[0], -1)


def _table(
    fields: MetaReader, arrays: Arrays, name: str, dtype: np.dtype, B: int, s: int, high: int
) -> np.ndarray:
    """The ``(B, s)`` table ``name`` of ``dtype`` (16-bit ones stored as bytes), its values in
    ``[0, high]``."""
    if dtype.itemsize != 2:
        return fields.bounded(arrays, name, dtype, (B, s), 0, high)
    raw = fields.array(arrays, name, np.uint8, (B, 2 * s))
    table = raw.view("<u2").reshape(B, s).astype(dtype)
    check_range(table, 0, high, f"{fields._label} blob array {name!r}")
    return table
