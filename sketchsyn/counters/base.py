"""The shared machinery of the continual counters: exact noise, step checks, the counter base.

API summary (every counter speaks the same protocol)::

    BinaryMechanism(epsilon=None, horizon=None, *, rho=None, sensitivity=1,
                    estimator="tree", rng=None)        # estimator="honaker": finite horizon
    CounterBank(size, epsilon=None, horizon=None, *, rho=None, sensitivity=1,
                estimator="tree", rng=None)            # size binary mechanisms stepped together
    SparseCounter(epsilon, horizon, *, sensitivity=1, rng=None)
    InhomogeneousSparseCounter(epsilon, budgets, start_level=0, *, sensitivity=1, rng=None)
    online_budgets(epsilon, d, j) -> OnlineBudgets      # callable r -> epsilon_r, (4.1) / (5.1)
    SqrtFactorizationCounter(rho, horizon, *, sensitivity=1, rng=None)   # T <= 2**20, O(T) state
    KaryTreeCounter(epsilon, horizon, *, k=19, sensitivity=1, rng=None)

    c.update(x) -> int              one step of value x (a non-negative integer), its release
    c.update_many(xs) -> ndarray    len(xs) steps, the release of every step (int64)
    c.skip(s, releases=False)       s steps of value 0 in O(log s) (releases=True: their values)
    c.query() -> int                the latest release (0 before the first step)
    c.t                             steps taken (the inhomogeneous counter: global time)
    c.epsilon / c.rho, c.sensitivity, c.horizon, c.nbytes, c.variance(t) (tree, factorization)
    c.snapshot(), c.to_bytes(), Cls.from_bytes(blob, rng=None), pickle via to_bytes
    bank.update(x[size]) -> [size]; bank.update_many(xs[n, size]) -> [n, size]; bank.query()
    BinaryMechanism / CounterBank .merge(other)   # same parameters and t; shared noise refused

**Privacy unit.** Neighbouring streams differ by at most ``sensitivity`` (default 1) in ℓ1 over
all steps. Exactly one of ``epsilon`` (pure ε-DP, integer Laplace noise) or ``rho`` (ρ-zCDP,
discrete Gaussian noise) is given, inside :data:`sketchsyn.errors.EPSILON_RANGE`; the guarantee
covers the releases of *all* steps together (continual observation).

**Step values** are non-negative integers below ``2**62``; Python ints, numpy integer arrays,
integral floats and booleans are accepted. Anything else is refused with
:class:`~sketchsyn.errors.InputError`, and a refused batch leaves the counter unchanged.

**State: trusted, for every counter.** The releases are private; the state is not. Every
counter's state holds values that, next to a later release, reveal exact counts: the tree
counters keep each open block as *its noise plus the data so far*, and the release at the
block's end is that noise plus the block's full data, so the two differ by the exact count of
the steps in between; sparse counting keeps the current segment's exact count, the
factorization the stream itself. So every counter declares ``STATE_PRIVACY = "trusted"`` and
its blobs say ``state == "trusted"`` in their container header
(:func:`sketchsyn.io.serial.header_of`): keep a counter's bytes with the curator, like the raw
data. A loaded copy must not continue a stream its original also continues (both would release
the same noise at different positions).

>>> from sketchsyn.counters import BinaryMechanism
>>> from sketchsyn.io.serial import header_of
>>> header_of(BinaryMechanism(1.0, 8, rng=0).to_bytes()).state
'trusted'
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
    EPSILON_RANGE,
    InputError,
    ParameterError,
    ReleasedError,
    SerializationError,
    check_epsilon,
    check_int,
)
from ..io.serial import Arrays, MetaReader
from ..io.summary import Summary
from ..privacy.lineage import Lineage
from ..privacy.noise import (
    _laplace_core,
    discrete_gaussian,
    discrete_gaussian_variance,
    discrete_laplace_variance,
)
from ..privacy.rng import RandomSource

__all__: list[str] = []

_VERSION = 1
_LIMIT = 2**62  # no step value, batch total or state value may reach this magnitude
_FLIMIT = float(_LIMIT)  # the same bound on a float state (Honaker's estimates)
_CAPACITY = 64  # levels reserved for trees whose depth grows with t (t < 2**62)


# ------------------------------------------------------------------ noise
def _draw(kind: str, param: Fraction, n: int, src: RandomSource) -> np.ndarray:
    """``n`` exact draws: ``Lap_Z(param)`` (kind "laplace") or ``N_Z(0, param)`` ("gaussian")."""
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if kind == "laplace":
        return _laplace_core(param, n, src)  # param: an exact Fraction, checked by _check_param
    return discrete_gaussian(param, n, src)


def _noise_variance(kind: str, param: Fraction) -> float:
    if kind == "laplace":
        return discrete_laplace_variance(float(param))
    return discrete_gaussian_variance(float(param))


def _check_param(param: Fraction, what: str, owner: str) -> Fraction:
    if param > 2**30:
        raise ParameterError(
            f"The noise {what} of {owner} would be {float(param):.4g} > 2**30: the budget is too "
            "small for this horizon and sensitivity."
        )
    return param


# ------------------------------------------------------------------ input checks
def _as_step(x: object, owner: str) -> int:
    """One step value: a non-negative integer below 2**62 (bools are 0/1)."""
    if isinstance(x, (bool, np.bool_)):
        return int(x)
    if isinstance(x, numbers.Integral):
        v = int(x)
    elif isinstance(x, (float, np.floating)) and math.isfinite(float(x)) and float(x).is_integer():
        v = int(float(x))
    else:
        raise InputError(f"x must be a non-negative integer step value; got {x!r} ({owner})")
    if v < 0 or v >= _LIMIT:
        raise InputError(f"x must be a non-negative integer below 2**62; got {x!r} ({owner})")
    return v


def _as_steps(xs: object, owner: str) -> np.ndarray:
    """A 1-D int64 array of step values, checked whole before anything changes."""
    if isinstance(xs, (str, bytes)):
        raise InputError(f"xs must be an array of non-negative integers; got {xs!r} ({owner})")
    arr = np.asarray(xs)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise InputError(f"xs must be one-dimensional; got shape {arr.shape} ({owner})")
    kind = arr.dtype.kind
    if kind == "b":
        return arr.astype(np.int64)
    if kind == "i":
        bad = np.flatnonzero((arr < 0) | (arr >= _LIMIT))
    elif kind == "u":
        bad = np.flatnonzero(arr >= _LIMIT)
    elif kind == "f":
        with np.errstate(invalid="ignore"):
            ok = np.isfinite(arr) & (arr == np.floor(arr)) & (arr >= 0) & (arr < _LIMIT)
        bad = np.flatnonzero(~ok)
    elif kind == "O":
        out = np.empty(arr.size, dtype=np.int64)
        for i, v in enumerate(arr.tolist()):
            try:
                out[i] = _as_step(v, owner)
            except InputError:
                raise InputError(
                    f"xs must be non-negative integers below 2**62; xs[{i}] = {v!r} ({owner})"
                ) from None
        return out
    else:
        if arr.size == 0:
            return np.zeros(0, dtype=np.int64)
        raise InputError(f"xs must be non-negative integers; xs[0] = {arr[0].item()!r} ({owner})")
    if bad.size:
        i = int(bad[0])
        raise InputError(
            f"xs must be non-negative integers below 2**62; xs[{i}] = {arr[i].item()!r} ({owner})"
        )
    return arr.astype(np.int64)


def _check_total(xs: np.ndarray, state_mass: int, owner: str) -> None:
    """Refuse a batch that could take a running value to 2**62 (int64 headroom)."""
    if xs.size == 0:
        return
    total = float(xs.sum(dtype=np.float64))
    if total + state_mass >= 2.0**61:
        raise InputError(
            f"xs: this batch (total {total:.4g}) could overflow the int64 state (limit 2**62) "
            f"({owner})"
        )


def _check_s(s: object, owner: str) -> int:
    return check_int(s, "s", f"{owner}.skip", minimum=0, maximum=2**62)


def _budget(epsilon: object, rho: object, owner: str) -> tuple[str, float]:
    """(``"epsilon"`` or ``"rho"``, value): exactly one must be given, inside
    :data:`~sketchsyn.errors.EPSILON_RANGE` (the budgets whose noise the samplers can draw)."""
    if (epsilon is None) == (rho is None):
        raise ParameterError(
            f"The 'epsilon' and 'rho' parameters of {owner}: give exactly one of them. "
            f"Got epsilon={epsilon!r}, rho={rho!r} instead."
        )
    name, value = ("epsilon", epsilon) if epsilon is not None else ("rho", rho)
    return name, check_epsilon(value, owner, name)


def _popcount(values: np.ndarray) -> np.ndarray:
    """Set bits of non-negative int64 values (uint8)."""
    return np.bitwise_count(values)


def _cumsum(steps: np.ndarray) -> np.ndarray:
    """Cumulative sums down the steps of an ``(n, m)`` array (1-D fast path for ``m = 1``)."""
    if steps.shape[1] == 1:
        return np.cumsum(steps[:, 0]).reshape(-1, 1)
    return np.cumsum(steps, axis=0)


def _nu_sum(m: Any) -> Any:
    """``Σ_{s=1}^{m} ν(s) = m − popcount(m)`` (ν = trailing zeros; Legendre), for m ≥ 0."""
    if isinstance(m, np.ndarray):
        return m - _popcount(m)
    return int(m) - int(m).bit_count()


def _bank_steps(xs: object, ndim: int, size: int, owner: str) -> np.ndarray:
    """Checked ``(n, size)`` step values of a bank (``ndim = 1``: one step of ``(size,)``)."""
    arr = np.asarray(xs) if not isinstance(xs, (str, bytes)) else xs
    shape = (size,) if ndim == 1 else (-1, size)
    if not isinstance(arr, np.ndarray) or arr.ndim != ndim or arr.shape[-1] != size:
        got = getattr(arr, "shape", type(arr).__name__)
        raise InputError(f"xs must have shape {shape} (one value per counter); got {got} ({owner})")
    return _as_steps(arr.reshape(-1), owner).reshape(-1, size)


# ------------------------------------------------------------------ shared protocol
class _Counter(Summary):
    """Shared machinery of every counter: the step protocol and the common header fields.

    Bytes, pickling, snapshots and equality come from :class:`~sketchsyn.io.summary.Summary`;
    a counter supplies ``_state`` and ``_load_state`` (``_from_state`` calls it, then refuses
    a header field or an array it never read: :meth:`~sketchsyn.io.serial.MetaReader.done`).
    Every counter's state is **trusted** (see the module notes): it holds values that reveal
    exact counts next to later releases.
    """

    STATE_PRIVACY = "trusted"
    FORMAT_VERSION = _VERSION
    TAKES_RNG = True
    _kind = "Counter"

    _frozen: bool
    _last: Any
    _lineage: Lineage
    _sensitivity: int
    _t: int

    def _check_writable(self) -> None:
        if self._frozen:
            raise ReleasedError(f"this {type(self).__name__} is a snapshot; it is read-only")

    # Budgets and horizon as stored by a subclass; the ones it does not have stay None.
    _epsilon: float | None = None
    _rho: float | None = None
    _horizon: int | None = None

    epsilon = ReadOnly[float | None](
        "Pure-DP budget over all steps (``None`` for a ρ-zCDP counter)."
    )
    rho = ReadOnly[float | None]("ρ-zCDP budget over all steps (``None`` for a pure-DP counter).")
    horizon = ReadOnly[int | None](
        "``T``, the number of steps (``None`` for an unbounded counter)."
    )
    sensitivity = ReadOnly[int]("ℓ1 bound on what neighbouring streams differ by.")
    t = ReadOnly[int]("Steps taken.")

    def update(self, x: object) -> int:
        """Advance one step of value ``x`` and return that step's released count.

        Examples
        --------
        >>> from sketchsyn.counters import BinaryMechanism
        >>> c = BinaryMechanism(epsilon=1.0, horizon=4, rng=1)
        >>> isinstance(c.update(1), int)
        True
        """
        v = _as_step(x, type(self).__name__)
        return self.update_many(np.array([v], dtype=np.int64))[0].item()

    @abc.abstractmethod
    def update_many(self, xs: object) -> np.ndarray:
        """Advance ``len(xs)`` steps; the released count of every step."""

    def query(self) -> Any:
        """The latest released count (0 before the first step).

        >>> from sketchsyn.counters import BinaryMechanism
        >>> BinaryMechanism(epsilon=1.0, horizon=4, rng=1).query()
        0
        """
        return self._last

    lineage = ReadOnly[Lineage]("The identity of this counter's noise (shared by its copies).")

    # -------------------------------------------------------------- bytes
    @classmethod
    def _from_state(
        cls, fields: MetaReader, arrays: Arrays, version: int, blob: bytes, rng: Any
    ) -> Any:
        """:meth:`_load_state`, then no header field or array may be left unread."""
        obj = cls._load_state(fields, arrays, version, blob, rng)
        fields.done(arrays)
        return obj

    @classmethod
    @abc.abstractmethod
    def _load_state(
        cls, fields: MetaReader, arrays: Arrays, version: int, blob: bytes, rng: Any
    ) -> Any:
        """The counter from checked header ``fields`` and ``arrays`` (every one read)."""

    def _common_meta(self, last: bool = True) -> dict[str, Any]:
        """The header fields every counter writes: read-only flag, lineage, latest release."""
        meta: dict[str, Any] = {"frozen": self._frozen, "lineage": self._lineage.to_meta()}
        if last:
            meta["last"] = self._last
        return meta

    def _restore_common(self, fields: MetaReader, last: str | None = "int") -> None:
        """Read the common fields (``last``: ``"int"``, ``"float"`` or ``None`` when the
        latest releases are an array)."""
        self._lineage = fields.lineage()
        self._frozen = fields.bool("frozen")
        if fields.has("exact_state"):  # written by earlier releases; the header says it now
            fields.bool("exact_state")
        if last == "int":
            self._last = fields.int("last", -_LIMIT + 1, _LIMIT - 1)
        elif last == "float":
            self._last = fields.float("last", minimum=-(2.0**63), maximum=2.0**63)


def _read_sensitivity(fields: MetaReader) -> int:
    return fields.int("sensitivity", 1, 2**30)


def _read_budget(fields: MetaReader, label: str, rho: bool = True) -> tuple[Any, Any]:
    """``(epsilon, rho)`` of a blob: exactly one present, inside ``EPSILON_RANGE``."""
    eps = fields.epsilon("epsilon", optional=True)
    r = fields.epsilon("rho", optional=True) if rho else None
    if (eps is None) == (r is None):
        low, high = EPSILON_RANGE
        raise SerializationError(
            f"{label} blob header must hold exactly one of the fields 'epsilon' and 'rho' "
            f"(in [{low:.4g}, {high:.4g}]), got epsilon={fields.get('epsilon', None)!r}, "
            f"rho={fields.get('rho', None)!r}"
        )
    return eps, r


def _int_array(
    fields: MetaReader, arrays: dict[str, np.ndarray], name: str, shape: tuple[int, ...]
) -> np.ndarray:
    """An int64 array of exactly ``shape`` whose values stay below ``2**62`` in magnitude."""
    return fields.bounded(arrays, name, np.int64, shape, -_LIMIT + 1, _LIMIT - 1).copy()
