"""The one base of every stateful sketchsyn class.

A :class:`Summary` writes its bytes, checks a blob, saves, loads, copies, pickles and compares
itself in one place. A subclass supplies four things:

* ``STATE_PRIVACY`` (or a ``state_privacy`` property): ``"private"`` when the saved state holds
  only public parameters and noisy values (it is ε-DP on its own), ``"trusted"`` when it holds
  exact counts (a curator's checkpoint, to be kept like the raw data). The value is written into
  the blob's container header (:func:`sketchsyn.io.serial.header_of` reads it) and checked
  against the loaded object;
* ``FORMAT_VERSION`` (and ``READS`` when older versions stay readable);
* ``_state(**options)``: the header fields and arrays of its bytes;
* ``_from_state(fields, arrays, version, blob, rng)``: the object back from them, every field
  read through :class:`~sketchsyn.io.serial.MetaReader` (type and range checked) and every
  array checked against the parameters before anything is allocated.

A concrete public subclass joins the registry (:mod:`sketchsyn.io.registry`) by being defined,
so :func:`sketchsyn.io.checkpoint.load` reads any kind and the
conformance suite enrols every class without a list to forget.

>>> import numpy as np
>>> class Tally(Summary):
...     STATE_PRIVACY = "trusted"
...     def __init__(self, n=0):
...         self.n = n
...     @property
...     def nbytes(self):
...         return 8
...     def _state(self):
...         return {}, {"n": np.array([self.n], dtype=np.int64)}
...     @classmethod
...     def _from_state(cls, fields, arrays, version, blob, rng):
...         return cls(int(fields.array(arrays, "n", np.int64, (1,))[0]))
>>> blob = Tally(3).to_bytes()
>>> Tally.from_bytes(blob) == Tally(3), Tally.from_bytes(blob).n
(True, 3)
>>> from sketchsyn.io.serial import header_of
>>> header_of(blob).state
'trusted'
>>> from sketchsyn.io.registry import _forget
>>> registry()["Tally"] is Tally
True
>>> _forget("Tally")
"""

from __future__ import annotations

import abc
import os
from typing import Any, ClassVar

import numpy as np

from ..errors import ParameterError, SerializationError
from .checkpoint import load, save
from .registry import add_discovery, register, registry
from .serial import STATES, Arrays, MetaReader, check_version, pack, read

__all__ = ["STATES", "Summary", "add_discovery", "registry"]

# Header fields that name a copy, not its contents: equality ignores them.
_COPY_FIELDS = frozenset({"lineage", "frozen"})


def _restore(cls: type[Summary], blob: bytes) -> Summary:
    """Unpickle: rebuild through the class's own checked reader."""
    return cls.from_bytes(blob)


class Summary(abc.ABC):
    """Base of every stateful class: bytes, checkpoints, copies, equality and size, once.

    Class attributes a subclass sets: ``STATE_PRIVACY`` (``"private"`` or ``"trusted"``;
    override the :attr:`state_privacy` property instead when it depends on the instance, e.g. a
    raw sketch), ``FORMAT_VERSION`` (the schema this release writes), ``READS`` (the versions it
    reads; default: only ``FORMAT_VERSION``), ``TAKES_RNG`` (``from_bytes`` accepts ``rng=`` for
    the noise the loaded object will still draw), ``TRUSTED_FIELDS`` (header fields holding
    exact counts, refused in a blob that says it is private), ``STATE_DECLARED`` (the kind came
    after container version 3: a blob without the state privacy byte is refused) and optionally
    ``kind`` (default: the class name).
    """

    kind: ClassVar[str]
    STATE_PRIVACY: ClassVar[str | None] = None
    FORMAT_VERSION: ClassVar[int] = 1
    READS: ClassVar[tuple[int, ...]] = ()
    VERSION_NOTE: ClassVar[str] = ""
    TAKES_RNG: ClassVar[bool] = False
    # Header fields that hold exact counts: a blob declared private must not carry them.
    TRUSTED_FIELDS: ClassVar[tuple[str, ...]] = ("diagnostics",)
    # True for a kind first written after container version 3, which declares state privacy:
    # a blob of it without the state byte (container 1 or 2) was never written by sketchsyn.
    STATE_DECLARED: ClassVar[bool] = False

    # Takes a privacy unit (``unit=``, ``max_rows=``): a summary with a contribution bounder.
    TAKES_UNIT: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" not in cls.__dict__:
            cls.kind = cls.__name__
        register(cls)

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        """Refuse a privacy unit for a class that has none, before its constructor runs."""
        if not cls.TAKES_UNIT:
            for name in ("unit", "max_rows"):
                if name in kwargs:
                    raise ParameterError(
                        f"The {name!r} parameter of {cls.__name__} is not supported: "
                        f"{cls.__name__} protects one row (event level). User-level privacy "
                        "(all rows of one unit, at most max_rows kept) is offered by PrivHP "
                        f"and MarginalSynthesizer. Got {kwargs[name]!r} instead."
                    )
        return super().__new__(cls)

    # ------------------------------------------------------------------ what a class supplies
    @property
    @abc.abstractmethod
    def nbytes(self) -> int:
        """Bytes of state this object holds (its arrays and fixed fields)."""

    @abc.abstractmethod
    def _state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The header fields (JSON values) and arrays of this object's bytes."""

    @classmethod
    @abc.abstractmethod
    def _from_state(
        cls, fields: MetaReader, arrays: Arrays, version: int, blob: bytes, rng: Any
    ) -> Summary:
        """Rebuild an object from checked ``fields`` and ``arrays`` of a ``version`` blob.

        Check every field's type and range and every array against the parameters before
        allocating; a ``ParameterError``, ``KeyError``, ``TypeError``, ``ValueError`` or
        ``ArithmeticError`` raised here becomes a ``SerializationError``.
        """

    # ------------------------------------------------------------------ privacy of the state
    @property
    def state_privacy(self) -> str:
        """``"private"``: the saved state holds public parameters and noisy values only;
        ``"trusted"``: it holds exact counts (a curator's checkpoint)."""
        if self.STATE_PRIVACY not in STATES:
            raise TypeError(f"{type(self).__name__} does not declare STATE_PRIVACY")
        return self.STATE_PRIVACY  # type: ignore[return-value]

    def _saved_privacy(self, **options: Any) -> str:
        """The state privacy of ``to_bytes(**options)`` (a class whose options add exact fields
        overrides this)."""
        return self.state_privacy

    # ------------------------------------------------------------------ bytes
    def to_bytes(self, *, key: bytes | str | None = None, **options: Any) -> bytes:
        """Versioned, checksummed bytes (never pickle), with the state privacy in the header.

        ``key`` (1 to 64 bytes shared with the reader) makes the digest a keyed BLAKE2b MAC.
        """
        meta, arrays = self._state(**options)
        return pack(
            self.kind,
            self.FORMAT_VERSION,
            meta,
            arrays,
            state=self._saved_privacy(**options),
            key=key,
        )

    @classmethod
    def from_bytes(cls, blob: bytes, rng: Any = None, *, key: bytes | str | None = None) -> Any:
        """Load an object written by :meth:`to_bytes`.

        Every header field is checked for type and range and every array against the
        parameters before anything is allocated. ``rng`` (classes that still draw noise after
        loading) seeds that noise; ``key`` is the shared secret the blob was signed with.

        Raises
        ------
        SerializationError
            For a blob that is truncated, altered, of another kind or version, whose fields are
            out of range, or whose declared state privacy is not what it holds.
        """
        if rng is not None and not cls.TAKES_RNG:
            raise ParameterError(
                f"The 'rng' parameter of {cls.__name__}.from_bytes must be None: a loaded "
                f"{cls.__name__} draws no further noise. Got {rng!r} instead."
            )
        got = read(blob, cls.kind, key=key)
        if got.state is None and cls.STATE_DECLARED:
            raise SerializationError(
                f"{cls.kind} blob has container version 1 or 2 (no state privacy byte), which "
                f"sketchsyn never wrote for a {cls.kind}: refused as forged"
            )
        check_version(cls.kind, got.version, cls.READS or cls.FORMAT_VERSION, cls.VERSION_NOTE)
        if got.state == "private":
            for name in cls.TRUSTED_FIELDS:
                if name in got.meta:
                    raise SerializationError(
                        f"{cls.kind} blob header field {name!r} holds exact counts, but the "
                        "blob says its state is 'private'"
                    )
        fields = MetaReader(got.meta, cls.kind)
        try:
            obj = cls._from_state(fields, got.arrays, got.version, bytes(blob), rng)
        except SerializationError:
            raise
        except (ParameterError, KeyError, TypeError, ValueError, ArithmeticError) as exc:
            raise SerializationError(f"{cls.kind} blob has bad contents: {exc}") from exc
        if got.state is not None and got.state != obj.state_privacy:
            if not (got.state == "trusted" and obj.state_privacy == "private"):
                raise SerializationError(
                    f"{cls.kind} blob header field 'state' says {got.state!r}, but a "
                    f"{cls.kind} with these contents holds {obj.state_privacy!r} state"
                )
        return obj

    # ------------------------------------------------------------------ files
    def save(self, path: str | os.PathLike[str], **options: Any) -> None:
        """Write this object's bytes to ``path`` atomically (:func:`sketchsyn.io.checkpoint.save`;
        ``options`` go to :meth:`to_bytes`)."""
        save(self, path, **options)

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, key: bytes | str | None = None) -> Any:
        """Load an object of this class (or a subclass) saved with :meth:`save`."""
        obj = load(path, key=key)
        if not isinstance(obj, cls):
            raise SerializationError(
                f"{os.fspath(path)!r} holds a {type(obj).__name__}, not a {cls.__name__}; "
                f"use sketchsyn.io.checkpoint.load to load any kind"
            )
        return obj

    # ------------------------------------------------------------------ copies
    def _copy_options(self) -> dict[str, Any]:
        """Options of ``to_bytes`` for a copy in this process (pickle, deepcopy, snapshot)."""
        return {}

    def _freeze(self) -> None:
        """Make this copy read-only (a snapshot); the default sets ``_frozen``."""
        self._frozen = True

    def snapshot(self) -> Any:
        """A read-only copy that shares this object's lineage (its one noise draw): its
        updates and merges raise :class:`~sketchsyn.errors.ReleasedError`."""
        snap = type(self).from_bytes(self.to_bytes(**self._copy_options()))
        snap._freeze()
        return snap

    def __reduce__(self) -> tuple:
        # pickle, deepcopy, multiprocessing and Dask transport only our own checked format.
        return (_restore, (type(self), self.to_bytes(**self._copy_options())))

    def __eq__(self, other: object) -> bool:
        """Same class, same parameters and same state (the lineage and the read-only flag,
        which name a copy rather than its contents, are not compared)."""
        if type(other) is not type(self):
            return NotImplemented
        mine, theirs = self._state(), other._state()  # type: ignore[attr-defined]
        meta = {k: v for k, v in mine[0].items() if k not in _COPY_FIELDS}
        other_meta = {k: v for k, v in theirs[0].items() if k not in _COPY_FIELDS}
        if meta != other_meta or mine[1].keys() != theirs[1].keys():
            return False
        return all(
            a.dtype == theirs[1][name].dtype and np.array_equal(a, theirs[1][name])
            for name, a in mine[1].items()
        )

    __hash__ = None  # type: ignore[assignment]
