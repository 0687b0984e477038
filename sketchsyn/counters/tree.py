"""Continual counters: a private running count released at every step of a stream.

API summary (every counter speaks the same protocol)::

    BinaryMechanism(epsilon=None, horizon=None, *, rho=None, sensitivity=1,
                    estimator="tree", rng=None)        # estimator="honaker": finite horizon
    CounterBank(size, epsilon=None, horizon=None, *, rho=None, sensitivity=1,
                estimator="tree", rng=None)            # size binary mechanisms stepped together
    SparseCounter(epsilon, horizon, *, sensitivity=1, rng=None)
    InhomogeneousSparseCounter(epsilon, budgets, start_level=0, *, sensitivity=1, rng=None)
    online_budgets(epsilon, d, j) -> OnlineBudgets      # callable r -> epsilon_r, (4.1) / (5.1)
    SqrtFactorizationCounter(rho, horizon, *, sensitivity=1, rng=None)   # T <= 2**20, O(T) state

    c.update(x) -> int              one step of value x (a non-negative integer), its release
    c.update_many(xs) -> ndarray    len(xs) steps, the release of every step (int64)
    c.skip(s, releases=False)       s steps of value 0 in O(log s) (releases=True: their values)
    c.query() -> int                the latest release (0 before the first step)
    c.t                             steps taken (the inhomogeneous counter: global time)
    c.epsilon / c.rho, c.sensitivity, c.horizon, c.nbytes, c.variance(t) (tree, factorization)
    c.snapshot(), c.to_bytes(), Cls.from_bytes(blob, rng=None), pickle via to_bytes
    bank.update(x[size]) -> [size]; bank.update_many(xs[n, size]) -> [n, size]; bank.query()
    BinaryMechanism / CounterBank .merge(other)   # same parameters and t; shared noise refused

Releases are int64, except Honaker's estimator and the factorization (float64 estimates,
post-processing of integer noisy values).

**Privacy unit.** Neighbouring streams differ by at most ``sensitivity`` (default 1) in ℓ1 over
all steps: one event, or one person whose events the caller has bounded. Exactly one of
``epsilon`` (pure ε-DP, integer Laplace noise) or ``rho`` (ρ-zCDP, discrete Gaussian noise) is
given; the guarantee covers the releases of *all* steps together (continual observation).

**Step values** are non-negative integers of any size below ``2**62`` (a step may carry many
events); Python ints, numpy integer arrays, integral floats and booleans (as 0/1, for Boolean
streams) are accepted. Negative values, NaN, non-integral floats and strings are refused with
:class:`~sketchsyn.errors.InputError`, and a refused batch leaves the counter unchanged.

**State and copies.** Every step is a release by design, so there is no release-once guard. But
a copy (snapshot, pickle, ``to_bytes``) holds the same noise as its original: a loaded copy must
not continue a stream that its original also continues, or both would release the same noise at
different positions and reveal the exact counts in between. The binary mechanism's state holds
only noisy values (each p-sum's noise is drawn when the p-sum opens and the data accumulate into
it). Sparse counting inherently needs exact running values (the current segment's count ``N``
compared with a noisy threshold): its state is a trusted curator's state, and its bytes say so
(``"exact_state": true``).

**Exactness.** Noise is exact integer noise (:mod:`sketchsyn.privacy.noise`); sparse counting's
thresholds are compared in integers (``floor(T0)`` is computed exactly), and ``skip`` draws the
number of steps until the noisy threshold trips by exact inversion of a geometric law whose
parameter is a function of ``e^{−ε/2}`` (:mod:`sketchsyn.privacy.exactexp`): no floating-point decision
changes an outcome's probability.

>>> c = BinaryMechanism(epsilon=1.0, horizon=8, rng=0)
>>> out = c.update_many([1, 0, 1, 1, 0, 0, 1, 1])
>>> out.shape, c.t
((8,), 8)
>>> s = SparseCounter(1.0, 1000, rng=0)
>>> s.skip(999)
>>> s.t
999
"""

from __future__ import annotations

import abc
import math
import numbers
from collections.abc import Callable
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, localcontext
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np

from ..errors import (
    IncompatibleError,
    InputError,
    ParameterError,
    ReleasedError,
    SerializationError,
    check_choice,
    check_int,
)
from ..io.serial import bad_contents, check_version, pack, unpack
from ..privacy.exactexp import Real, exp_neg_bracket
from ..privacy.lineage import Lineage
from ..privacy.noise import (
    _laplace_core,
    discrete_gaussian,
    discrete_gaussian_variance,
    discrete_laplace_variance,
    laplace_sum,
)
from ..privacy.rng import RandomSource, RNGLike, as_source

__all__ = [
    "BinaryMechanism",
    "CounterBank",
    "InhomogeneousSparseCounter",
    "OnlineBudgets",
    "SparseCounter",
    "SqrtFactorizationCounter",
    "first_trips",
    "online_budgets",
    "sqrt_coefficients",
]

_VERSION = 1
_LIMIT = 2**62  # no step value, batch total or state value may reach this magnitude
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


def _budget(epsilon: object, rho: object, owner: str, allow_rho: bool = True) -> tuple[str, float]:
    """(``"epsilon"`` or ``"rho"``, value): exactly one must be given."""
    if (epsilon is None) == (rho is None):
        raise ParameterError(
            f"The 'epsilon' and 'rho' parameters of {owner}: give exactly one of them. "
            f"Got epsilon={epsilon!r}, rho={rho!r} instead."
        )
    name, value = ("epsilon", epsilon) if epsilon is not None else ("rho", rho)
    if (
        isinstance(value, bool)
        or not isinstance(value, (numbers.Real, Fraction))
        or not math.isfinite(float(value))
        or float(value) <= 0
    ):
        raise ParameterError(
            f"The {name!r} parameter of {owner} must be a finite real number > 0. "
            f"Got {value!r} instead."
        )
    return name, float(value)


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


# ------------------------------------------------------------------ tree aggregation engine
class _Tree:
    """The binary mechanism over local steps ``u = 1 … 2**levels − 1`` (Chan–Shi–Song).

    Level ``j`` holds the p-sums of the dyadic blocks ``((k−1)·2^j, k·2^j]`` with ``k`` odd (the
    only ones a release uses: ``t``'s release sums, for each set bit ``j`` of ``t``, the block
    ``k = t >> j``). A block's noise is drawn when it opens, at the end of step ``(k−1)·2^j``
    (at construction for ``k = 1``), and the data accumulate into it: ``open_[j]`` is the noisy
    partial sum of level ``j``'s open block (0 when the level is idle), ``closed[j]`` the noisy
    value of its latest closed block. Draws happen in time order (one step's openings by
    increasing level), so batching does not change which noise goes where.
    """

    __slots__ = ("closed", "levels", "m", "open_", "u")

    def __init__(
        self, levels: int, kind: str, param: Fraction, src: RandomSource | None, m: int = 1
    ) -> None:
        self.levels = levels
        self.m = m  # counters stepped together (a bank); arrays are (levels, m)
        self.u = 0
        self.closed = np.zeros((levels, m), dtype=np.int64)
        self.open_ = (
            _draw(kind, param, levels * m, src).reshape(levels, m)
            if src is not None
            else np.zeros((levels, m), np.int64)
        )

    def mass(self) -> int:
        return int(np.abs(self.closed).sum(axis=0).max() + np.abs(self.open_).sum(axis=0).max())

    def release(self) -> np.ndarray:
        """The release at the current step from the closed p-sums, ``(m,)``."""
        rows = [j for j in range(self.levels) if self.u >> j & 1]
        return self.closed[rows].sum(axis=0)

    def advance(self, cum: np.ndarray, kind: str, param: Fraction, src: RandomSource) -> np.ndarray:
        """Take ``len(cum)`` steps (``cum``: ``(n, m)`` inclusive cumulative sums of their
        values) and return each step's releases ``(n, m)``: ``P[t] + Σ_{j ∈ bits(t)}
        base(j, t >> j)``, where the batch's partial sums telescope to ``P[t]`` and ``base`` is
        the stored value of a block that opened before the batch or the fresh noise of one that
        opened inside it."""
        n, m = cum.shape
        t0, t1 = self.u + 1, self.u + n
        first = _nu_sum(t0 - 1)
        eta = _draw(kind, param, (_nu_sum(t1) - first) * m, src).reshape(-1, m)
        g = np.zeros((1, m), dtype=np.int64)
        for j in range(self.levels - 1, -1, -1):
            lo, hi = t0 >> j, t1 >> j
            # Level j's blocks k = lo … hi: each parent block (k >> 1) covers two of them.
            off = lo - ((t0 >> (j + 1)) << 1)
            g = np.repeat(g, 2, axis=0)[off : off + hi - lo + 1]
            start = 1 - (lo & 1)  # position of the first odd k
            ks = np.arange(lo + start, hi + 1, 2, dtype=np.int64)
            if ks.size == 0:
                continue
            a = (ks - 1) << j
            if eta.shape[0]:  # fresh blocks (a ≥ t0); the first index is clipped, see below
                idx = _nu_sum(np.maximum(a - 1, 0)) - first + j
                vals = eta[np.clip(idx, 0, eta.shape[0] - 1)]
            else:
                vals = np.empty((ks.size, m), dtype=np.int64)
            if a[0] < t0:  # only the first block can have opened before the batch
                vals[0] = self.closed[j] if (int(ks[0]) << j) <= t0 - 1 else self.open_[j]
            g[start::2] += vals
        releases = cum + g
        # New state, level by level (closed first: it may take the old open block).
        zero = np.zeros(m, dtype=np.int64)
        for j in range(self.levels):
            top = t1 >> j
            kc = top if top & 1 else top - 1
            if kc >= 1 and (kc << j) >= t0:
                a0 = (kc - 1) << j
                b0 = kc << j
                if a0 <= t0 - 1:
                    self.closed[j] = self.open_[j] + cum[b0 - t0]
                else:
                    self.closed[j] = eta[_nu_sum(a0 - 1) - first + j] + cum[b0 - t0] - cum[a0 - t0]
            ko = top + 1
            if ko & 1:
                a0 = (ko - 1) << j
                if a0 <= t0 - 1:
                    self.open_[j] += cum[-1]
                else:
                    self.open_[j] = eta[_nu_sum(a0 - 1) - first + j] + cum[-1] - cum[a0 - t0]
            else:
                self.open_[j] = zero
        self.u = t1
        return releases

    def skip(self, s: int, kind: str, param: Fraction, src: RandomSource) -> None:
        """``s`` steps of value 0: only the blocks that close or open are touched (O(levels))."""
        t0, t1 = self.u + 1, self.u + s
        plan: list[tuple[int, str]] = []
        for j in range(self.levels):
            top = t1 >> j
            kc = top if top & 1 else top - 1
            if kc >= 1 and (kc << j) >= t0:
                plan.append((j, "closed-open" if ((kc - 1) << j) <= t0 - 1 else "closed-fresh"))
            ko = top + 1
            if ko & 1:
                if ((ko - 1) << j) > t0 - 1:
                    plan.append((j, "open-fresh"))
            else:
                plan.append((j, "open-idle"))
        count = sum(1 for _, w in plan if w.endswith("fresh"))
        fresh = _draw(kind, param, count * self.m, src).reshape(-1, self.m)
        i = 0
        for j, what in plan:
            if what == "closed-open":
                self.closed[j] = self.open_[j]
            elif what == "closed-fresh":
                self.closed[j] = fresh[i]
                i += 1
        for j, what in plan:
            if what == "open-fresh":
                self.open_[j] = fresh[i]
                i += 1
            elif what == "open-idle":
                self.open_[j] = 0
        self.u = t1


class _HonakerTree:
    """The binary tree with every node released and Honaker's estimator (finite horizon).

    Every dyadic block ``((k−1)·2^j, k·2^j]`` of every level gets its own noise (drawn when it
    opens, the data accumulating into it): each step still changes one node per level, so the
    noise scale and the privacy are those of the textbook tree, but right children are no
    longer thrown away. A closed node's estimate is the variance-optimal combination of its own
    noisy sum and its children's estimates (Honaker 2015, bottom-up pass):
    ``est = w_j·y + (1 − w_j)·(est_left + est_right)``, ``w_j = 2V_{j−1}/(v + 2V_{j−1})``,
    ``V_j = w_j·v`` (``V_0 = v``, the noise variance). Only nodes inside ``(0, t]`` are used;
    the release at ``t`` sums the estimates of ``t``'s dyadic decomposition, with variance
    ``Σ_{j ∈ bits(t)} V_j`` (about half the textbook tree's at large ``t``).

    State: ``open_`` (noisy partial sums, int64) and ``est`` (the latest closed node's
    estimate per level, float64: post-processing of noisy values).
    """

    __slots__ = ("est", "levels", "m", "open_", "u", "weights", "vj")

    def __init__(
        self,
        levels: int,
        kind: str,
        param: Fraction,
        src: RandomSource | None,
        m: int = 1,
    ) -> None:
        self.levels = levels
        self.m = m
        self.u = 0
        self.est = np.zeros((levels, m), dtype=np.float64)
        self.open_ = (
            _draw(kind, param, levels * m, src).reshape(levels, m)
            if src is not None
            else np.zeros((levels, m), np.int64)
        )
        v = _noise_variance(kind, param)
        self.weights = [1.0]
        self.vj = [v]
        for _ in range(1, levels):
            w = 2 * self.vj[-1] / (v + 2 * self.vj[-1])
            self.weights.append(w)
            self.vj.append(w * v)

    def mass(self) -> int:
        return int(np.abs(self.open_).sum(axis=0).max() + np.abs(self.est).sum(axis=0).max()) + 1

    def release(self) -> np.ndarray:
        rows = [j for j in range(self.levels) if self.u >> j & 1]
        return self.est[rows].sum(axis=0)

    @staticmethod
    def _opened(a: Any) -> Any:
        """Nodes opened by the end of step ``a`` (after construction): ``Σ_{s ≤ a} (ν(s)+1)``."""
        return _nu_sum(a) + a

    def advance(self, cum: np.ndarray, kind: str, param: Fraction, src: RandomSource) -> np.ndarray:
        n, m = cum.shape
        t0, t1 = self.u + 1, self.u + n
        first = self._opened(t0 - 1)
        eta = _draw(kind, param, (self._opened(t1) - first) * m, src).reshape(-1, m)
        zero = np.zeros((1, m), dtype=np.int64)
        levels: list[tuple[int, np.ndarray]] = []
        for j in range(self.levels):
            k_lo, k_hi = ((t0 - 1) >> j) + 1, t1 >> j
            if k_hi < k_lo:
                break
            ks = np.arange(k_lo, k_hi + 1, dtype=np.int64)
            a = (ks - 1) << j
            fresh = a >= t0
            start_sum = np.where(fresh[:, None], cum[np.maximum(a - t0, 0)], zero)
            noisy = cum[(ks << j) - t0] - start_sum
            base = np.empty((ks.size, m), dtype=np.int64)
            base[fresh] = eta[self._opened(a[fresh] - 1) - first + j]
            if not fresh[0]:
                base[0] = self.open_[j]
            noisy = (noisy + base).astype(np.float64)
            if j == 0:
                est = noisy
            else:
                lo_prev, prev = levels[j - 1]
                ext = np.vstack([self.est[j - 1][None, :], prev])
                left = ext[2 * ks - 1 - (lo_prev - 1)]
                right = ext[2 * ks - (lo_prev - 1)]
                w = self.weights[j]
                est = w * noisy + (1.0 - w) * (left + right)
            levels.append((k_lo, est))
        g = np.zeros((1, m), dtype=np.float64)
        for j in range(self.levels - 1, -1, -1):
            lo, hi = t0 >> j, t1 >> j
            ks = np.arange(lo, hi + 1, dtype=np.int64)
            g = g[(ks >> 1) - (t0 >> (j + 1))]
            odd = (ks & 1) == 1
            if not odd.any():
                continue
            k_odd = ks[odd]
            vals = np.empty((k_odd.size, m), dtype=np.float64)
            if j < len(levels):
                k_lo, est = levels[j]
                inside = k_odd >= k_lo
                vals[inside] = est[k_odd[inside] - k_lo]
                vals[~inside] = self.est[j]
            else:
                vals[:] = self.est[j]
            g[odd] += vals
        releases = g  # the estimates hold their blocks' data: no telescoped partial sums here
        for j in range(self.levels):
            if j < len(levels):
                self.est[j] = levels[j][1][-1]
            a0 = (t1 >> j) << j  # the open node at level j after step t1 opened at a0
            if a0 <= t0 - 1:
                self.open_[j] += cum[-1]
            else:
                self.open_[j] = eta[self._opened(a0 - 1) - first + j] + cum[-1] - cum[a0 - t0]
        self.u = t1
        return releases

    def skip(self, s: int, kind: str, param: Fraction, src: RandomSource) -> None:
        """``s`` zero steps, in ``O(s)``: a closed node's estimate depends on its whole subtree,
        whose noise must be drawn (done in chunks of ``2**16`` steps to bound memory)."""
        while s:
            take = min(s, 1 << 16)
            self.advance(np.zeros((take, self.m), dtype=np.int64), kind, param, src)
            s -= take


# ------------------------------------------------------------------ shared protocol
class _Counter(abc.ABC):
    """Shared machinery: bytes, pickling, snapshots, the step protocol."""

    _kind = "Counter"

    _frozen: bool
    _last: int
    _lineage: Lineage
    _sensitivity: int
    _t: int

    def _check_writable(self) -> None:
        if self._frozen:
            raise ReleasedError(f"this {type(self).__name__} is a snapshot; it is read-only")

    @property
    def sensitivity(self) -> int:
        """ℓ1 bound on what neighbouring streams differ by."""
        return self._sensitivity

    @property
    def t(self) -> int:
        """Steps taken."""
        return self._t

    def update(self, x: object) -> int:
        """Advance one step of value ``x`` and return that step's released count.

        Examples
        --------
        >>> c = BinaryMechanism(epsilon=1.0, horizon=4, rng=1)
        >>> isinstance(c.update(1), int)
        True
        """
        v = _as_step(x, type(self).__name__)
        return self.update_many(np.array([v], dtype=np.int64))[0].item()

    @abc.abstractmethod
    def update_many(self, xs: object) -> np.ndarray:
        """Advance ``len(xs)`` steps; the released count of every step."""

    def query(self) -> int:
        """The latest released count (0 before the first step).

        >>> BinaryMechanism(epsilon=1.0, horizon=4, rng=1).query()
        0
        """
        return self._last

    @property
    def lineage(self) -> Lineage:
        """The identity of this counter's noise (shared by its copies)."""
        return self._lineage

    def snapshot(self) -> Any:
        """An independent, read-only copy (its updates raise :class:`ReleasedError`)."""
        snap = type(self).from_bytes(self.to_bytes())
        snap._frozen = True
        return snap

    @abc.abstractmethod
    def to_bytes(self) -> bytes:
        """Versioned, checksummed bytes of the counter's state."""

    @classmethod
    @abc.abstractmethod
    def from_bytes(cls, blob: bytes, rng: RNGLike = None) -> Any:
        """Load a counter written by :meth:`to_bytes`."""

    def __reduce__(self) -> tuple:
        return (type(self).from_bytes, (self.to_bytes(),))

    def _pack(self, meta: dict, arrays: dict[str, np.ndarray]) -> bytes:
        meta = dict(meta, frozen=self._frozen, lineage=self._lineage.to_meta())
        if "lasts" not in arrays:
            meta["last"] = self._last
        return pack(self._kind, _VERSION, meta, arrays, state="trusted")

    @classmethod
    def _unpack(cls, blob: bytes) -> tuple[dict, dict[str, np.ndarray]]:
        _, version, meta, arrays = unpack(blob, cls._kind)
        check_version(cls._kind, version, _VERSION)
        return meta, arrays

    def _restore_common(self, meta: dict) -> None:
        self._lineage = Lineage.from_meta(meta.get("lineage"), self._kind)
        self._frozen = bool(meta.get("frozen", False))
        if "last" in meta:
            last = meta["last"]
            self._last = float(last) if isinstance(last, float) else int(last)


class _PureFinite:
    """``epsilon``, ``rho`` and ``horizon`` of a pure-ε counter with a finite horizon."""

    _epsilon: float
    _horizon: int

    @property
    def epsilon(self) -> float:
        """Pure-DP budget over all steps."""
        return self._epsilon

    @property
    def rho(self) -> None:
        """``None``: this counter is pure ε-DP."""
        return None

    @property
    def horizon(self) -> int:
        """``T``, the number of steps."""
        return self._horizon


def _tree_arrays(tree: _Tree, prefix: str) -> dict[str, np.ndarray]:
    return {f"{prefix}closed": tree.closed.copy(), f"{prefix}open": tree.open_.copy()}


def _row(values: np.ndarray, m: int, label: str, dtype: Any = np.int64) -> np.ndarray:
    if values.shape != (m,) or values.dtype != dtype:
        raise SerializationError(f"{label} blob arrays do not match its parameters")
    return values.copy()


def _load_tree(levels: int, u: int, m: int, arrays: dict, prefix: str, label: str) -> _Tree:
    tree = _Tree(levels, "laplace", Fraction(1), None, m)
    closed, open_ = arrays[f"{prefix}closed"], arrays[f"{prefix}open"]
    shape = (levels, m)
    if closed.shape != shape or open_.shape != shape or closed.dtype != np.int64:
        raise SerializationError(f"{label} blob arrays do not match its parameters")
    tree.closed[:] = closed
    tree.open_[:] = open_
    tree.u = u
    return tree


# ------------------------------------------------------------------ the binary mechanism
class BinaryMechanism(_Counter):
    """The binary mechanism (tree aggregation; Chan, Shi and Song 2011; Dwork et al. 2010).

    Parameters
    ----------
    epsilon : float, optional
        Pure ε-DP with integer Laplace noise. Exactly one of ``epsilon`` and ``rho``.
    horizon : int, optional
        ``T``: the finite-horizon mechanism over steps ``1 … T`` with ``L = floor(log2 T) + 1``
        levels; each p-sum gets ``Lap_Z(sensitivity·L/ε)`` or ``N_Z(0, L·sensitivity²/(2ρ))``
        (seed 004, Algorithm 3, with the exact level count ``L`` for ``log T``). ``None``:
        unbounded, Chan–Shi–Song's **hybrid mechanism**: steps ``[2^k, 2^{k+1})`` form segment
        ``k``, run by a finite binary mechanism of horizon ``2^k`` at half the budget, and each
        segment's total gets ``Lap_Z(2·sensitivity/ε)`` (or ``N_Z(0, sensitivity²/ρ)``) and is
        added to the running base at the segment's end (the other half: each step lies in one
        segment, so the budget holds for every ``t``). Error ``O(log^1.5 t)``.
    rho : float, optional
        ρ-zCDP with discrete Gaussian noise.
    sensitivity : int
        Neighbouring streams differ by at most this much in ℓ1 over all steps (default 1).
    rng : None, int, SeedSequence, Generator or RandomSource
        ``None`` (default): the OS CSPRNG. A seed is for tests only and not private against
        whoever knows it.

    Notes
    -----
    The release at step ``t`` is the sum of the p-sums of ``t``'s binary expansion: unbiased,
    with variance ``popcount(t)·v`` (finite; ``v`` the noise variance of one p-sum), or
    ``k·v_seg + popcount(t − 2^k + 1)·v_k`` in segment ``k`` (unbounded); see
    :meth:`variance`. One noise value is drawn per step on average.

    State: ``closed`` and ``open`` int64 arrays of ``L`` noisy p-sums (``L`` = 64 reserved for
    the unbounded form), noisy only. ``nbytes = 16·L + 48`` (finite) or ``16·64 + 64``
    (unbounded: the segment's tree plus the noisy base and segment total).

    Examples
    --------
    >>> c = BinaryMechanism(epsilon=1.0, horizon=1024, rng=3)
    >>> out = c.update_many(np.ones(1000, dtype=np.int64))
    >>> bool(abs(int(out[-1]) - 1000) < 200)
    True
    >>> u = BinaryMechanism(rho=0.5, rng=3)
    >>> u.skip(10**9); u.t
    1000000000
    """

    _kind = "BinaryMechanism"

    def __init__(
        self,
        epsilon: float | None = None,
        horizon: int | None = None,
        *,
        rho: float | None = None,
        sensitivity: int = 1,
        estimator: str = "tree",
        rng: RNGLike = None,
    ) -> None:
        name = type(self).__name__
        self._budget_name, self._budget_value = _budget(epsilon, rho, name)
        self._estimator = check_choice(estimator, "estimator", name, ("tree", "honaker"))
        if estimator == "honaker" and horizon is None:
            raise ParameterError(
                f"The 'estimator' parameter of {name} can be 'honaker' only with a finite "
                f"horizon. Got {estimator!r} instead."
            )
        self._horizon = (
            None if horizon is None else check_int(horizon, "horizon", name, 1, 2**62 - 1)
        )
        self._sensitivity = check_int(sensitivity, "sensitivity", name, minimum=1, maximum=2**30)
        self._kindn = "laplace" if self._budget_name == "epsilon" else "gaussian"
        self._src = as_source(rng)
        self._lineage = Lineage.new(self._src, self._kind, self._params())
        self._frozen = False
        m = self._m
        honaker = self._estimator == "honaker"
        self._lasts = np.zeros(m, dtype=np.float64 if honaker else np.int64)
        self._t = 0
        if self._horizon is not None:
            self._levels = self._horizon.bit_length()
            self._param = self._tree_param(self._levels, 1)
            engine = _HonakerTree if honaker else _Tree
            self._tree = engine(self._levels, self._kindn, self._param, self._src, m)
        else:
            self._levels = _CAPACITY
            self._segment = 0
            self._base = np.zeros(m, dtype=np.int64)
            self._seg_param = self._seg_noise_param()
            self._seg_open = _draw(self._kindn, self._seg_param, m, self._src)
            self._tree = _Tree(1, self._kindn, self._tree_param(1, 2), self._src, m)

    # -------------------------------------------------------------- parameters
    _m = 1  # counters stepped together (CounterBank sets its size)

    def _params(self) -> dict:
        return {
            self._budget_name: self._budget_value,
            "horizon": self._horizon,
            "sensitivity": self._sensitivity,
            "estimator": self._estimator,
        }

    @property
    def _last(self) -> Any:
        return self._lasts[0].item()

    @_last.setter
    def _last(self, value: int) -> None:
        self._lasts[0] = value

    def _tree_param(self, levels: int, share: int) -> Fraction:
        """Noise parameter of a tree with ``levels`` levels holding ``1/share`` of the budget."""
        d = Fraction(self._sensitivity)
        b = Fraction(self._budget_value) / share
        if self._kindn == "laplace":
            param = d * levels / b
        else:
            param = levels * d * d / (2 * b)
        return _check_param(param, "scale" if self._kindn == "laplace" else "variance", "tree")

    def _seg_noise_param(self) -> Fraction:
        d = Fraction(self._sensitivity)
        b = Fraction(self._budget_value) / 2
        param = d / b if self._kindn == "laplace" else d * d / (2 * b)
        return _check_param(param, "scale", type(self).__name__)

    @property
    def epsilon(self) -> float | None:
        """Pure-DP budget over all steps (``None`` under ρ-zCDP)."""
        return self._budget_value if self._budget_name == "epsilon" else None

    @property
    def rho(self) -> float | None:
        """ρ-zCDP budget over all steps (``None`` under pure DP)."""
        return self._budget_value if self._budget_name == "rho" else None

    @property
    def horizon(self) -> int | None:
        """``T`` for the finite form, ``None`` for the unbounded (hybrid) form."""
        return self._horizon

    @property
    def nbytes(self) -> int:
        """``16·L + 48`` bytes (finite, ``L = floor(log2 T) + 1``), ``16·64 + 64`` (unbounded);
        a bank of ``m`` counters: ``m·(16·L + 8) + 40`` and ``m·(16·64 + 24) + 40``."""
        if self._horizon is not None:
            return self._m * (16 * self._levels + 8) + 40
        return self._m * (16 * _CAPACITY + 24) + 40

    def variance(self, t: int) -> float:
        """Exact variance of the release at step ``t`` (it is unbiased).

        >>> c = BinaryMechanism(epsilon=1.0, horizon=7, rng=0)   # L = 3: Lap_Z(3) per p-sum
        >>> round(c.variance(7) / c.variance(4), 6)
        3.0
        """
        t = check_int(t, "t", "BinaryMechanism.variance", minimum=1)
        if self._horizon is not None:
            if t > self._horizon:
                raise ParameterError(
                    f"The 't' parameter of BinaryMechanism.variance must be <= horizon "
                    f"{self._horizon}. Got {t!r} instead."
                )
            if self._estimator == "honaker":
                return float(sum(v for j, v in enumerate(self._tree.vj) if t >> j & 1))
            return t.bit_count() * _noise_variance(self._kindn, self._param)
        k = t.bit_length() - 1
        inner = _noise_variance(self._kindn, self._tree_param(k + 1, 2))
        return k * _noise_variance(self._kindn, self._seg_param) + (
            (t - (1 << k) + 1).bit_count() * inner
        )

    # -------------------------------------------------------------- steps
    def _mass(self) -> int:
        extra = 0
        if self._horizon is None:
            extra = int(np.abs(self._base).max() + np.abs(self._seg_open).max())
        return self._tree.mass() + extra + int(np.abs(self._lasts).max())

    def _room(self, n: int) -> None:
        if self._horizon is not None and self._t + n > self._horizon:
            raise InputError(
                f"xs: {n} more steps would pass the horizon {self._horizon} "
                f"(t = {self._t}) (BinaryMechanism)"
            )

    def update_many(self, xs: object) -> np.ndarray:
        """Advance ``len(xs)`` steps and return every step's released count (int64).

        Examples
        --------
        >>> c = BinaryMechanism(epsilon=2.0, horizon=16, rng=5)
        >>> c.update_many([1, 1, 0]).shape
        (3,)
        """
        self._check_writable()
        steps = _as_steps(xs, type(self).__name__)
        return self._advance(steps.reshape(-1, 1))[:, 0]

    def _advance(self, steps: np.ndarray) -> np.ndarray:
        """``steps``: checked ``(n, m)`` int64 values; returns the ``(n, m)`` releases."""
        n = steps.shape[0]
        self._room(n)
        per_counter = steps.sum(axis=0).max() if n else 0
        _check_total(np.array([per_counter]), self._mass(), type(self).__name__)
        if n == 0:
            return np.zeros((0, self._m), dtype=np.int64)
        if self._horizon is not None:
            out = self._tree.advance(_cumsum(steps), self._kindn, self._param, self._src)
        else:
            out = np.empty(steps.shape, dtype=np.int64)
            done = 0
            while done < n:
                k = self._segment
                left = (1 << k) - self._tree.u  # steps left in segment k
                take = min(left, n - done)
                cum = _cumsum(steps[done : done + take])
                param = self._tree_param(k + 1, 2)
                out[done : done + take] = self._base + self._tree.advance(
                    cum, self._kindn, param, self._src
                )
                self._seg_open += cum[-1]
                done += take
                if take == left:
                    self._next_segment()
        self._t += n
        self._lasts = out[-1].copy()
        return out

    def _next_segment(self) -> None:
        self._base += self._seg_open
        self._segment += 1
        self._seg_open = _draw(self._kindn, self._seg_param, self._m, self._src)
        k = self._segment
        self._tree = _Tree(k + 1, self._kindn, self._tree_param(k + 1, 2), self._src, self._m)

    def skip(self, s: int, releases: bool = False) -> np.ndarray | None:
        """Advance ``s`` steps of value 0 in ``O(log s)`` time and draws.

        Only the p-sums that close (and the blocks that open) during the skipped steps are
        touched; each gets the same noise law as stepping would give it, so every later
        release has the same distribution as after ``s`` calls of ``update(0)``. The releases
        of the skipped steps involve p-sums nobody reads afterwards; ``releases=True`` draws
        them too and returns the ``s`` values (``O(s)``: it is ``update_many(zeros(s))``).

        Examples
        --------
        >>> c = BinaryMechanism(epsilon=1.0, horizon=2**40, rng=0)
        >>> c.skip(10**12); c.t
        1000000000000
        """
        self._check_writable()
        s = _check_s(s, type(self).__name__)
        if releases:
            out = self._advance(np.zeros((s, self._m), dtype=np.int64))
            return out[:, 0] if self._m == 1 and type(self) is BinaryMechanism else out
        self._room(s)
        if s == 0:
            return None
        if self._horizon is not None:
            self._tree.skip(s, self._kindn, self._param, self._src)
            self._lasts = self._tree.release()
        else:
            self._skip_unbounded(s)
        self._t += s
        return None

    def _skip_unbounded(self, rest: int) -> None:
        while rest:
            k = self._segment
            left = (1 << k) - self._tree.u
            param = self._tree_param(k + 1, 2)
            if rest <= left:  # the skip ends inside (or at the end of) this segment
                self._tree.skip(rest, self._kindn, param, self._src)
                self._lasts = self._base + self._tree.release()
                if rest == left:
                    self._next_segment()
                return
            # This segment ends strictly inside the skip; then whole segments that also end
            # before its last step need only their totals' noise.
            self._base += self._seg_open
            rest -= left
            k += 1
            whole = 0
            while rest > 1 << (k + whole):
                rest -= 1 << (k + whole)
                whole += 1
            m = self._m
            self._base += (
                _draw(self._kindn, self._seg_param, whole * m, self._src)
                .reshape(whole, m)
                .sum(axis=0)
            )
            self._segment = k + whole
            self._seg_open = _draw(self._kindn, self._seg_param, m, self._src)
            levels = self._segment + 1
            self._tree = _Tree(levels, self._kindn, self._tree_param(levels, 2), self._src, m)

    def merge(self, other: BinaryMechanism) -> None:
        """Add ``other``'s state into this one (the tree is linear): afterwards the releases are
        those of the summed streams, with both noises (variances add).

        Both must have the same class, parameters and ``t``; counters that share a noise draw
        (same lineage: a copy, or the same seed) are refused with
        :class:`~sketchsyn.errors.IncompatibleError`. Privacy of the sum: over disjoint streams
        (each event in one of them) the merged counter keeps the budget (parallel composition);
        over overlapping streams the caller accounts for both.

        >>> a, b = BinaryMechanism(1.0, 8, rng=1), BinaryMechanism(1.0, 8, rng=2)
        >>> _ = a.update_many([1, 0, 1]); _ = b.update_many([0, 1, 1])
        >>> a.merge(b); a.t
        3
        """
        self._check_writable()
        name = type(self).__name__
        if type(other) is not type(self):
            raise IncompatibleError(f"cannot merge a {type(other).__name__} into a {name}")
        for attr in ("_params", "_t"):
            mine = getattr(self, attr)() if attr == "_params" else getattr(self, attr)
            theirs = getattr(other, attr)() if attr == "_params" else getattr(other, attr)
            if mine != theirs:
                raise IncompatibleError(
                    f"cannot merge two {name} objects with different {attr.strip('_')}: "
                    f"{mine} != {theirs}"
                )
        lineage = self._lineage.union(other._lineage, name)
        if self._mass() + other._mass() >= 2**61:
            raise IncompatibleError(f"the merged {name} could overflow int64")
        self._tree.open_ += other._tree.open_
        if self._estimator == "honaker":
            self._tree.est += other._tree.est
        else:
            self._tree.closed += other._tree.closed
        if self._horizon is None:
            self._base += other._base
            self._seg_open += other._seg_open
        self._lasts += other._lasts
        self._lineage = lineage

    # -------------------------------------------------------------- bytes
    def to_bytes(self) -> bytes:
        """Versioned, checksummed bytes: public parameters, lineage, the noisy p-sums.

        Holds only noisy values (no exact count). A loaded copy must not continue a stream its
        original continues too (both would release the same noise at different steps).

        >>> c = BinaryMechanism(epsilon=1.0, horizon=8, rng=1); _ = c.update_many([1, 0, 1])
        >>> BinaryMechanism.from_bytes(c.to_bytes()).query() == c.query()
        True
        """
        meta: dict[str, Any] = {
            **self._params(),
            "t": self._t,
            "size": self._m,
            "exact_state": False,
        }
        if self._estimator == "honaker":
            arrays = {"open": self._tree.open_.copy(), "est": self._tree.est.copy()}
        else:
            arrays = _tree_arrays(self._tree, "")
        arrays["lasts"] = self._lasts.copy()
        if self._horizon is None:
            meta.update(segment=self._segment, tree_u=self._tree.u)
            arrays.update(base=self._base.copy(), seg_open=self._seg_open.copy())
        return self._pack(meta, arrays)

    @classmethod
    def from_bytes(cls, blob: bytes, rng: RNGLike = None) -> BinaryMechanism:
        """Load bytes written by :meth:`to_bytes`; ``rng`` draws the noise of later steps."""
        meta, arrays = cls._unpack(blob)
        with bad_contents(cls._kind):
            obj = cls._blank(meta, rng)
            m = obj._m
            obj._restore_common(meta)
            obj._t = check_int(meta["t"], "t", cls._kind, minimum=0)
            obj._lasts = _row(arrays["lasts"], m, cls._kind, obj._lasts.dtype)
            if obj._horizon is not None:
                if obj._t > obj._horizon:
                    raise ValueError("t beyond the horizon")
                if obj._estimator == "honaker":
                    tree = obj._tree
                    if arrays["open"].shape != tree.open_.shape or arrays["est"].shape != (
                        tree.est.shape
                    ):
                        raise ValueError("arrays do not match the parameters")
                    tree.open_[...] = arrays["open"]
                    tree.est[...] = arrays["est"]
                    tree.u = obj._t
                else:
                    obj._tree = _load_tree(obj._levels, obj._t, m, arrays, "", cls._kind)
            else:
                obj._segment = check_int(meta["segment"], "segment", cls._kind, 0, 61)
                obj._base = _row(arrays["base"], m, cls._kind)
                obj._seg_open = _row(arrays["seg_open"], m, cls._kind)
                u = check_int(meta["tree_u"], "tree_u", cls._kind, 0, (1 << obj._segment) - 1)
                if obj._t != (1 << obj._segment) - 1 + u:
                    raise ValueError("t does not match the segment")
                obj._tree = _load_tree(obj._segment + 1, u, m, arrays, "", cls._kind)
        return obj

    @classmethod
    def _blank(cls, meta: dict, rng: RNGLike) -> Any:
        if meta.get("size", 1) != 1:
            raise ValueError("a bank's bytes: load them with CounterBank.from_bytes")
        return cls(
            meta.get("epsilon"),
            meta["horizon"],
            rho=meta.get("rho"),
            sensitivity=meta["sensitivity"],
            estimator=meta.get("estimator", "tree"),
            rng=rng,
        )

    def __repr__(self) -> str:
        return (
            f"BinaryMechanism({self._budget_name}={self._budget_value}, "
            f"horizon={self._horizon}, sensitivity={self._sensitivity}, t={self._t})"
        )


# ------------------------------------------------------------------ a bank of binary mechanisms
class CounterBank(BinaryMechanism):
    """``size`` binary-mechanism counters stepped together: one Python call per batch.

    Same parameters, noise and privacy as :class:`BinaryMechanism` (per counter: each counter
    is a binary mechanism over its own stream; a record that touches several counters must be
    accounted for by the caller, e.g. by ``sensitivity`` or parallel composition over disjoint
    cells). All counters share ``t``. The state is ``(L, size)`` arrays of noisy p-sums.

    ``update(x)`` takes one step with one non-negative integer per counter (shape
    ``(size,)``) and returns the ``size`` releases; ``update_many(xs)`` takes ``(n, size)`` and
    returns ``(n, size)``; ``skip(s)`` advances every counter ``s`` steps of 0 in ``O(log s)``
    vectorised draws; ``query()`` returns all current releases. ``nbytes = size·(16·L + 8) + 40``
    (finite) or ``size·(16·64 + 24) + 40`` (unbounded).

    Examples
    --------
    >>> bank = CounterBank(1000, epsilon=1.0, horizon=2**10, rng=0)
    >>> bank.update(np.ones(1000, dtype=np.int64)).shape
    (1000,)
    >>> bank.update_many(np.zeros((5, 1000), dtype=np.int64)).shape
    (5, 1000)
    >>> bank.skip(100); bank.t, bank.query().shape
    (106, (1000,))
    """

    _kind = "CounterBank"

    def __init__(
        self,
        size: int,
        epsilon: float | None = None,
        horizon: int | None = None,
        *,
        rho: float | None = None,
        sensitivity: int = 1,
        estimator: str = "tree",
        rng: RNGLike = None,
    ) -> None:
        self._m = check_int(size, "size", "CounterBank", minimum=1, maximum=2**28)
        super().__init__(
            epsilon, horizon, rho=rho, sensitivity=sensitivity, estimator=estimator, rng=rng
        )

    def _params(self) -> dict:
        return {**super()._params(), "size": self._m}

    @property
    def size(self) -> int:
        """Number of counters."""
        return self._m

    def _steps(self, xs: object, ndim: int) -> np.ndarray:
        return _bank_steps(xs, ndim, self._m, "CounterBank")

    def update(self, x: object) -> np.ndarray:  # type: ignore[override]
        """One step: ``x`` has one non-negative integer per counter; returns the releases."""
        self._check_writable()
        return self._advance(self._steps(x, 1))[0]

    def update_many(self, xs: object) -> np.ndarray:
        """``n`` steps: ``xs`` is ``(n, size)``; returns the ``(n, size)`` releases."""
        self._check_writable()
        return self._advance(self._steps(xs, 2))

    def query(self) -> np.ndarray:  # type: ignore[override]
        """Every counter's latest release, ``(size,)`` int64."""
        return self._lasts.copy()

    @classmethod
    def _blank(cls, meta: dict, rng: RNGLike) -> Any:
        return cls(
            meta["size"],
            meta.get("epsilon"),
            meta["horizon"],
            rho=meta.get("rho"),
            sensitivity=meta["sensitivity"],
            estimator=meta.get("estimator", "tree"),
            rng=rng,
        )

    def __repr__(self) -> str:
        return (
            f"CounterBank(size={self._m}, {self._budget_name}={self._budget_value}, "
            f"horizon={self._horizon}, t={self._t})"
        )


# ------------------------------------------------------------------ square-root factorization
def sqrt_coefficients(horizon: int) -> np.ndarray:
    """``c_k = C(2k, k)/4^k`` for ``k < horizon``: the Toeplitz square root of the prefix-sum
    matrix (``(1 − z)^{−1/2}``; Fichtenberger, Henzinger and Upadhyay 2023).

    >>> sqrt_coefficients(4).tolist()
    [1.0, 0.5, 0.375, 0.3125]
    """
    k = np.arange(1, horizon, dtype=np.float64)
    return np.concatenate([[1.0], np.cumprod((2 * k - 1) / (2 * k))])


class SqrtFactorizationCounter(_Counter):
    """Continual counting by the square-root factorization ``A = C·C`` of the prefix-sum matrix
    (ρ-zCDP; Fichtenberger, Henzinger and Upadhyay, ICML 2023).

    The mechanism releases ``y = C'x + z`` with ``C'`` the lower-triangular Toeplitz matrix of
    ``c'_k = round(2^b·c_k)`` (integers; ``c_k = C(2k,k)/4^k``) and ``z`` discrete Gaussian
    with ``σ² = sensitivity²·Σ_k c'_k²/(2ρ)``: the ℓ2 sensitivity of ``C'x`` to an ℓ1 change of
    ``sensitivity`` is at most ``sensitivity`` times ``C'``'s largest column norm (its first
    column), computed exactly in integers. The prefix sums are recovered by floating-point
    post-processing, ``Ŝ = A·C'^{-1}·y``: unbiased, with variance ``σ_Z²·Σ_{i<t} b_i²`` at step
    ``t`` (``b`` the coefficients of ``A·C'^{-1}``, ``σ_Z²`` the exact discrete Gaussian
    variance). ``b`` is the largest number of bits in ``[4, 32]`` that keeps ``σ² ≤ 2**30``.
    Max variance in units of ``1/(2ρ)``: 10.7 at ``T = 2^10`` against 110 for the tree.

    **Memory O(T)**, acceptable for longitudinal horizons (``T ≤ 10^4``): the state keeps the
    stream so far (``C'x`` needs all of it) and the noisy releases; it is a trusted curator's
    state (``"exact_state": true``). ``nbytes = 16·T + 48``. Batches are streamed with one
    integer convolution each; ``skip(s)`` is ``O(s)`` here (every step gets fresh noise).

    Parameters
    ----------
    rho : float
        ρ-zCDP over all steps.
    horizon : int
        ``T`` (at most ``2**20``).
    sensitivity : int
        ℓ1 bound on what neighbouring streams differ by (default 1).
    rng : None, int, SeedSequence, Generator or RandomSource

    Examples
    --------
    >>> c = SqrtFactorizationCounter(1.0, 1024, rng=0)
    >>> est = c.update_many(np.ones(1000, dtype=np.int64))
    >>> bool(abs(est[-1] - 1000) < 30), round(c.variance(1024) * 2, 1)  # ρ = 1: units 1/(2ρ)
    (True, 10.7)
    """

    _kind = "SqrtFactorizationCounter"

    def __init__(
        self, rho: float, horizon: int, *, sensitivity: int = 1, rng: RNGLike = None
    ) -> None:
        name = type(self).__name__
        _, self._rho = _budget(None, rho, name)
        self._horizon = check_int(horizon, "horizon", name, 1, 2**20)
        self._sensitivity = check_int(sensitivity, "sensitivity", name, minimum=1, maximum=2**30)
        self._src = as_source(rng)
        self._lineage = Lineage.new(self._src, self._kind, self._params())
        c = sqrt_coefficients(self._horizon)
        for bits in range(32, 3, -1):
            coef = np.rint(c * 2.0**bits).astype(np.int64)
            norm2 = sum(int(v) * int(v) for v in coef.tolist())
            sigma2 = Fraction(self._sensitivity**2 * norm2) / (2 * Fraction(self._rho))
            if sigma2 <= 2**30:
                break
        else:
            raise ParameterError(
                f"The 'rho' parameter of {name} is too small for this horizon and sensitivity "
                f"(the noise variance would pass 2**30). Got {rho!r} instead."
            )
        self._bits = bits
        self._coef = coef
        self._sigma2 = sigma2
        inv = np.zeros(self._horizon, dtype=np.float64)
        cf = coef.astype(np.float64)
        inv[0] = 1.0 / cf[0]
        for n in range(1, self._horizon):  # 1/C'(z) as a power series
            inv[n] = -np.dot(cf[1 : n + 1], inv[n - 1 :: -1]) / cf[0]
        self._b = np.cumsum(inv)  # A·C'^{-1}: prefix sums of the inverse's coefficients
        self._x = np.zeros(self._horizon, dtype=np.int64)
        self._y = np.zeros(self._horizon, dtype=np.int64)
        self._t = 0
        self._total = 0
        self._frozen = False
        self._lastf = 0.0
        self._zvar: float | None = None

    def _params(self) -> dict:
        return {"rho": self._rho, "horizon": self._horizon, "sensitivity": self._sensitivity}

    @property
    def _last(self) -> Any:
        return self._lastf

    @_last.setter
    def _last(self, value: Any) -> None:
        self._lastf = float(value)

    @property
    def rho(self) -> float:
        return self._rho

    @property
    def epsilon(self) -> None:
        return None

    @property
    def horizon(self) -> int:
        return self._horizon

    @property
    def bits(self) -> int:
        """``b``: the factor is scaled by ``2^b`` before rounding to integers."""
        return self._bits

    @property
    def sigma2(self) -> Fraction:
        """The discrete Gaussian's ``σ²`` (exact), in units of the scaled factor."""
        return self._sigma2

    @property
    def releases(self) -> np.ndarray:
        """The mechanism's integer outputs ``y_1 … y_t`` (the estimates post-process them)."""
        return self._y[: self._t].copy()

    @property
    def nbytes(self) -> int:
        """``16·T + 48`` bytes: the stream and the noisy outputs, plus scalars."""
        return 16 * self._horizon + 48

    def variance(self, t: int) -> float:
        """Exact variance of the estimate at step ``t``: ``σ_Z²·Σ_{i<t} b_i²``."""
        t = check_int(t, "t", f"{self._kind}.variance", 1, self._horizon)
        if self._zvar is None:
            self._zvar = discrete_gaussian_variance(float(self._sigma2))
        return self._zvar * float(np.dot(self._b[:t], self._b[:t]))

    def update_many(self, xs: object) -> np.ndarray:
        """Advance ``len(xs)`` steps; return every step's prefix-sum estimate (float64).

        >>> SqrtFactorizationCounter(2.0, 16, rng=0).update_many([1, 0, 1]).dtype
        dtype('float64')
        """
        self._check_writable()
        steps = _as_steps(xs, self._kind)
        n = steps.size
        if self._t + n > self._horizon:
            raise InputError(
                f"xs: {n} more steps would pass the horizon {self._horizon} "
                f"(t = {self._t}) ({self._kind})"
            )
        total = self._total + float(steps.sum(dtype=np.float64))
        if total * 2.0**self._bits * 2 >= 2.0**62:
            raise InputError(
                f"xs: the stream's total would overflow the integer factor ({self._kind})"
            )
        if n == 0:
            return np.zeros(0, dtype=np.float64)
        t0, t1 = self._t, self._t + n
        self._x[t0:t1] = steps
        z = _draw("gaussian", self._sigma2, n, self._src)
        cx = np.convolve(self._x[:t1], self._coef[:t1])[t0:t1]
        self._y[t0:t1] = cx + z
        est = np.convolve(self._y[:t1].astype(np.float64), self._b[:t1])[t0:t1]
        self._t = t1
        self._total = int(total)
        self._lastf = float(est[-1])
        return est

    def skip(self, s: int, releases: bool = False) -> np.ndarray | None:
        """``s`` steps of 0 (``O(s)``: each step's output gets its own noise)."""
        s = _check_s(s, self._kind)
        out = self.update_many(np.zeros(s, dtype=np.int64))
        return out if releases else None

    def to_bytes(self) -> bytes:
        """Versioned, checksummed bytes. **Trusted-curator state** (``"exact_state": true``):
        the stream so far is inside (the factor needs all of it), with the noisy outputs."""
        meta = {**self._params(), "t": self._t, "exact_state": True}
        return self._pack(meta, {"x": self._x[: self._t].copy(), "y": self._y[: self._t].copy()})

    @classmethod
    def from_bytes(cls, blob: bytes, rng: RNGLike = None) -> SqrtFactorizationCounter:
        """Load bytes written by :meth:`to_bytes`."""
        meta, arrays = cls._unpack(blob)
        with bad_contents(cls._kind):
            obj = cls(meta["rho"], meta["horizon"], sensitivity=meta["sensitivity"], rng=rng)
            obj._restore_common(meta)
            t = check_int(meta["t"], "t", cls._kind, 0, obj._horizon)
            x, y = arrays["x"], arrays["y"]
            if x.shape != (t,) or y.shape != (t,) or x.dtype != np.int64 or (x < 0).any():
                raise ValueError("arrays do not match t")
            obj._x[:t], obj._y[:t], obj._t = x, y, t
            obj._total = int(x.sum())
        return obj

    def __repr__(self) -> str:
        return f"SqrtFactorizationCounter(rho={self._rho}, horizon={self._horizon}, t={self._t})"


# ------------------------------------------------------------------ exact trip times
@lru_cache(maxsize=256)
def _floor_t0(horizon: int, epsilon: Fraction, sensitivity: int) -> int:
    """``floor(9·ln(T)·sensitivity/ε)``, exactly (ln T is irrational for T ≥ 2)."""
    if horizon == 1:
        return 0
    prec = 40
    while True:
        with localcontext() as ctx:
            ctx.prec = prec
            ctx.rounding = ROUND_FLOOR
            lo = Decimal(horizon).ln()
            ctx.rounding = ROUND_CEILING
            hi = Decimal(horizon).ln()
        ulp = Fraction(1, 10 ** (prec - 3))
        f_lo = Fraction(lo) * (1 - ulp) * 9 * sensitivity / epsilon
        f_hi = Fraction(hi) * (1 + ulp) * 9 * sensitivity / epsilon
        if math.floor(f_lo) == math.floor(f_hi):
            return math.floor(f_lo)
        prec *= 2


@lru_cache(maxsize=4096)
def _stay_real(x: Fraction, a: int, g: int) -> Real:
    """``(1 − p)^g`` with ``p = P(λ > a)``, ``λ ~ Lap_Z(1/x)``: the probability that ``g``
    checks in a row do not trip. ``P(λ > a) = q^{a+1}/(1+q)`` for ``a ≥ 0`` and
    ``1 − q^{−a}/(1+q)`` for ``a < 0``, ``q = e^{−x}``."""

    def bracket(bits: int) -> tuple[int, int]:
        prec = bits + 64 + 2 * g.bit_length()
        one = 1 << prec
        m = a + 1 if a >= 0 else -a
        e_lo, e_hi = exp_neg_bracket(x * m, prec)
        q_lo, q_hi = exp_neg_bracket(x, prec)
        f_lo = (e_lo << prec) // (one + q_hi)  # q^m / (1 + q), bracketed
        f_hi = -((-(e_hi << prec)) // (one + q_lo))
        lo, hi = (one - f_hi, one - f_lo) if a >= 0 else (f_lo, f_hi)
        lo, hi = max(lo, 0), min(hi, one)
        p_lo, p_hi = one, one  # (lo/one)^g and (hi/one)^g, rounded outwards
        b_lo, b_hi, e = lo, hi, g
        while e:
            if e & 1:
                p_lo = (p_lo * b_lo) >> prec
                p_hi = -((-(p_hi * b_hi)) >> prec)
            e >>= 1
            if e:
                b_lo = (b_lo * b_lo) >> prec
                b_hi = -((-(b_hi * b_hi)) >> prec)
        shift = prec - bits
        return p_lo >> shift, -((-p_hi) >> shift)

    return Real(bracket)


class _LazyUniform:
    """A uniform real ``U`` in ``[0, 1)`` whose 32-bit words are drawn as comparisons need."""

    __slots__ = ("_src", "_words")

    def __init__(self, src: RandomSource, words: list[int] | None = None) -> None:
        self._src = src
        self._words: list[int] = [] if words is None else list(words)

    def below(self, c: Real) -> bool:
        """``U < c``, exactly (``c`` irrational, so the comparison ends with probability 1)."""
        prefix = 0
        k = 0
        while True:
            if len(self._words) <= k:
                self._words.append(int(self._src.uint32(1)[0]))
            prefix = (prefix << 32) | self._words[k]
            k += 1
            digits = c.floor(32 * k)
            if prefix != digits:
                return prefix < digits


def _first_trip(
    x: Fraction, a: int, s: int, src: RandomSource, words: list[int] | None = None
) -> int:
    """The first of ``s`` checks that trips (1-based), or 0 if none does, exactly.

    Each check trips independently with probability ``p = P(λ > a)``; the first trip ``G`` is
    geometric, ``P(G > g) = (1 − p)^g``. One uniform ``U`` decides it by inversion:
    ``G = min{g : U ≥ (1 − p)^g}``; ``U < (1 − p)^s`` means no trip within ``s`` checks.
    ``words``: the first 32-bit words of ``U`` when they were already drawn (the vectorised
    path of :mod:`sketchsyn.counters.sparsebank` hands over the draws it could not decide).
    """
    u = _LazyUniform(src, words)
    if u.below(_stay_real(x, a, s)):
        return 0
    lo, hi = 1, s  # U ≥ (1 − p)^hi
    while lo < hi:
        mid = (lo + hi) // 2
        if u.below(_stay_real(x, a, mid)):
            lo = mid + 1
        else:
            hi = mid
    return lo


# Error margins of the floating-point trip decisions (see first_trips): a relative margin far
# wider than the few ulps numpy's exp/log/log1p lose, and an absolute one for values near 0.
_REL = 2.0**-30
_ABS = 2.0**-50
_TWO64 = 2.0**-64


def _log_stay(xf: float, a: np.ndarray) -> np.ndarray:
    """``ln(1 − p)`` with ``p = P(λ > a)``, ``λ ~ Lap_Z(1/x)`` (float, both branches free of
    cancellation): ``p = q^{a+1}/(1+q)`` for ``a ≥ 0``, ``1 − p = q^{−a}/(1+q)`` for ``a < 0``."""
    af = a.astype(np.float64)
    lq1 = math.log1p(math.exp(-xf))
    out = np.empty(a.shape, dtype=np.float64)
    pos = a >= 0
    with np.errstate(under="ignore"):
        out[pos] = np.log1p(-np.exp(-(af[pos] + 1.0) * xf - lq1))
    out[~pos] = af[~pos] * xf - lq1
    return out


def first_trips(x: Fraction, a: np.ndarray, s: np.ndarray, src: RandomSource) -> np.ndarray:
    """For each ``i``, the first of ``s[i]`` checks that trips (1-based), or 0: exactly.

    Check ``k`` trips when ``λ_k > a[i]``, ``λ_k ~ Lap_Z(1/x)`` independent. This is the
    vectorised form of :func:`sketchsyn.counters.tree._first_trip`, with the same law: one uniform
    ``U`` per entry (its first 64 bits drawn here, two ``uint32`` words), ``G = min{g : U ≥
    (1 − p)^g}``. Decisions are made on ``ln U`` against ``g·ln(1 − p)`` in float64, accepted only
    when they clear a margin (relative ``2^-30``, absolute ``2^-50``) far wider than the float
    error; the rest go to the exact routine with the same words of ``U``.

    >>> from sketchsyn.privacy.rng import as_source
    >>> g = first_trips(Fraction(1, 4), np.array([10**6, -5]), np.array([10**9, 3]), as_source(0))
    >>> g.tolist()   # a huge threshold never trips; a negative one trips at once
    [0, 1]
    """
    a = np.asarray(a, dtype=np.int64)
    s = np.asarray(s, dtype=np.int64)
    n = a.size
    out = np.zeros(n, dtype=np.int64)
    if n == 0:
        return out
    words = src.uint32(2 * n).astype(np.uint64).reshape(n, 2)
    k = (words[:, 0] << np.uint64(32)) | words[:, 1]
    kf = k.astype(np.float64)
    with np.errstate(divide="ignore"):
        ln_lo = np.log(kf * _TWO64)
        ln_hi = np.log((kf + 1.0) * _TWO64)
    ln_lo = ln_lo - (np.abs(ln_lo) * _REL + _ABS)
    ln_hi = ln_hi + (np.abs(ln_hi) * _REL + _ABS)
    l1p = _log_stay(float(x), a)
    sf = s.astype(np.float64)

    def below(g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(certainly U < (1−p)^g, certainly U ≥ (1−p)^g)."""
        target = g * l1p
        tol = np.abs(target) * _REL + _ABS
        return ln_hi < target - tol, ln_lo > target + tol

    stay, trip = below(sf)
    unsure = ~(stay | trip)
    # G = ceil(ln U / ln(1 − p)), checked on both sides: U ≥ (1−p)^G and U < (1−p)^(G−1).
    mid = 0.5 * (ln_lo + ln_hi)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        guess = np.ceil(mid / l1p)
    guess = np.where(np.isfinite(guess), guess, sf)
    guess = np.clip(guess, 1.0, np.maximum(sf, 1.0))
    _, at_g = below(guess)
    before, _ = below(guess - 1.0)
    before |= guess == 1.0
    ok = trip & at_g & before
    out[ok] = guess[ok].astype(np.int64)
    unsure |= trip & ~ok
    for i in np.flatnonzero(unsure).tolist():
        w = [int(words[i, 0]), int(words[i, 1])]
        out[i] = _first_trip(x, int(a[i]), int(s[i]), src, w)
    return out


# ------------------------------------------------------------------ sparse counting
class SparseCounter(_PureFinite, _Counter):
    """Sparse counting with a finite horizon (seed 000, Algorithm 2; Dwork et al. 2015).

    The timeline is cut into segments: a segment closes at the first step where its count
    ``N`` plus fresh ``Lap_Z(2·sensitivity/ε)`` exceeds its threshold
    ``T0 + Lap_Z(2·sensitivity/ε)``, ``T0 = 9·ln(T)·sensitivity/ε``; each closed segment's
    count is one step of a :class:`BinaryMechanism` with budget ``ε/2`` and horizon ``T`` (at
    most ``T`` segments), and the release is that mechanism's latest output. Releases change
    only when a segment closes, so on a sparse stream the error is
    ``O((log T + log^1.5 n)/ε)`` (Lemma 3.2) instead of ``O(log^1.5 T/ε)``.

    One check per step: at step ``t`` the value joins ``N`` and the check is made; a segment
    that closes at ``t`` is in ``t``'s release (the paper shows it from ``t + 1``: the same
    observable events, one step earlier).

    **Trusted-curator state.** The algorithm compares the exact running count ``N`` of the
    current segment with the noisy threshold, so ``N`` is part of the state (and of its bytes,
    whose header says ``"exact_state": true``). Keep the state with the curator.

    Parameters
    ----------
    epsilon : float
        Pure ε-DP over all steps.
    horizon : int
        ``T``, the number of steps.
    sensitivity : int
        ℓ1 bound on what neighbouring streams differ by (default 1); all noise scales with it.
    rng : None, int, SeedSequence, Generator or RandomSource

    Notes
    -----
    ``skip(s)``: while ``N`` is constant each check trips with the same probability ``p``, so the
    number of steps to the next trip is geometric and is drawn in one go by exact inversion
    (:func:`first_trips`: float decisions with a proven margin, :func:`_first_trip` for the
    rare undecided ones); the cost is ``O(log s)`` per trip, and trips are rare on an idle
    stream (``p ≈ T^{-4.5}`` once ``N = 0``). The skipped releases are the current release up
    to the trip step and the sub-mechanism's new output from it on: ``skip(s, releases=True)``
    returns them.

    ``nbytes = 40 + (16·L + 48)`` with ``L = floor(log2 T) + 1`` (scalars ``t, N, threshold``,
    the latest release and ``T0``, plus the sub-mechanism).

    Examples
    --------
    >>> c = SparseCounter(1.0, 10_000, rng=2)
    >>> out = c.update_many(np.zeros(5000, dtype=np.int64))
    >>> c.t, int(out[0])
    (5000, 0)
    """

    _kind = "SparseCounter"

    def __init__(
        self,
        epsilon: float,
        horizon: int,
        *,
        sensitivity: int = 1,
        rng: RNGLike = None,
    ) -> None:
        name = type(self).__name__
        _, self._epsilon = _budget(epsilon, None, name)
        self._horizon = check_int(horizon, "horizon", name, 1, 2**62 - 1)
        self._sensitivity = check_int(sensitivity, "sensitivity", name, minimum=1, maximum=2**30)
        src = as_source(rng)
        self._lineage = Lineage.new(src, self._kind, self._params())
        self._check_src, self._threshold_src, sub_src = src.spawn(3)
        self._scale = _check_param(
            2 * Fraction(self._sensitivity) / Fraction(self._epsilon), "scale", name
        )
        self._t0 = _floor_t0(self._horizon, Fraction(self._epsilon), self._sensitivity)
        self._sub = BinaryMechanism(
            self._epsilon / 2, self._horizon, sensitivity=self._sensitivity, rng=sub_src
        )
        self._frozen = False
        self._last = 0
        self._t = 0
        self._n = 0
        self._theta = self._new_threshold()

    def _params(self) -> dict:
        return {
            "epsilon": self._epsilon,
            "horizon": self._horizon,
            "sensitivity": self._sensitivity,
        }

    def _new_threshold(self) -> int:
        return self._t0 + int(_draw("laplace", self._scale, 1, self._threshold_src)[0])

    @property
    def segments(self) -> int:
        """Closed segments so far (public: every closing changes the release)."""
        return self._sub.t

    @property
    def nbytes(self) -> int:
        """``40 + 16·L + 48`` bytes (``L = floor(log2 T) + 1``)."""
        return 40 + self._sub.nbytes

    def _room(self, n: int) -> None:
        if self._t + n > self._horizon:
            raise InputError(
                f"xs: {n} more steps would pass the horizon {self._horizon} "
                f"(t = {self._t}) ({type(self).__name__})"
            )

    def update_many(self, xs: object) -> np.ndarray:
        """Advance ``len(xs)`` steps; return every step's release (int64).

        All checks' noise is drawn first, in step order, from its own stream; thresholds and
        the sub-mechanism draw from theirs, so batching does not change which noise goes where.

        >>> c = SparseCounter(1.0, 100, rng=0)
        >>> c.update_many([0, 0, 0]).tolist()
        [0, 0, 0]
        """
        self._check_writable()
        steps = _as_steps(xs, type(self).__name__)
        self._room(steps.size)
        _check_total(steps, self._sub._mass() + abs(self._n) + abs(self._theta), self._kind)
        n = steps.size
        out = np.empty(n, dtype=np.int64)
        if n == 0:
            return out
        noise = _draw("laplace", self._scale, n, self._check_src)
        cum = np.cumsum(steps)
        pos = 0
        while pos < n:
            # First trip at or after pos: N + cum[i] − cum[pos−1] + λ'_i > θ, searched in
            # growing windows (segments last about T0 steps on a dense stream).
            offset = self._n - (int(cum[pos - 1]) if pos else 0)
            width = 256
            trip = -1
            lo = pos
            while lo < n:
                hi = min(n, lo + width)
                hit = np.flatnonzero(cum[lo:hi] + noise[lo:hi] + offset > self._theta)
                if hit.size:
                    trip = lo + int(hit[0])
                    break
                lo, width = hi, width * 2
            if trip < 0:
                out[pos:] = self._last
                self._n = offset + int(cum[-1])
                break
            out[pos:trip] = self._last
            self._last = int(self._sub.update(offset + int(cum[trip])))
            out[trip] = self._last
            self._n = 0
            self._theta = self._new_threshold()
            pos = trip + 1
        self._t += n
        return out

    def skip(self, s: int, releases: bool = False) -> np.ndarray | None:
        """Advance ``s`` steps of value 0 in ``O(log s)`` per segment closing, exactly.

        While ``N`` is constant, each step's check trips with probability
        ``p = P(λ' > θ − N)``; the first trip is drawn by exact inversion of its geometric law
        (the same law as ``s`` calls of ``update(0)``). ``releases=True`` also returns the
        ``s`` released values (the current release until a trip, then the new one).

        >>> c = SparseCounter(1.0, 10**12, rng=0)
        >>> c.skip(10**11); c.t
        100000000000
        """
        self._check_writable()
        s = _check_s(s, type(self).__name__)
        self._room(s)
        x = 1 / self._scale
        out = np.empty(s, dtype=np.int64) if releases else None
        done = 0
        while done < s:
            g = int(
                first_trips(
                    x, np.array([self._theta - self._n]), np.array([s - done]), self._check_src
                )[0]
            )
            if g == 0:
                if out is not None:
                    out[done:] = self._last
                break
            if out is not None:
                out[done : done + g - 1] = self._last
            self._last = int(self._sub.update(self._n))
            if out is not None:
                out[done + g - 1] = self._last
            self._n = 0
            self._theta = self._new_threshold()
            done += g
        self._t += s
        return out

    # -------------------------------------------------------------- bytes
    def to_bytes(self) -> bytes:
        """Versioned, checksummed bytes. **Trusted-curator state**: besides public parameters
        and noisy values (the threshold, the sub-mechanism's p-sums), they hold the exact count
        ``N`` of the current segment (``"exact_state": true`` in the header). A loaded copy must
        not continue a stream its original continues too.

        >>> c = SparseCounter(1.0, 64, rng=1); _ = c.update_many([1, 1, 0])
        >>> SparseCounter.from_bytes(c.to_bytes()).t
        3
        """
        meta = {
            **self._params(),
            "t": self._t,
            "n": self._n,
            "theta": self._theta,
            "sub_t": self._sub.t,
            "sub_last": self._sub._last,
            "exact_state": True,
        }
        return self._pack(meta, _tree_arrays(self._sub._tree, "sub."))

    @classmethod
    def from_bytes(cls, blob: bytes, rng: RNGLike = None) -> SparseCounter:
        """Load bytes written by :meth:`to_bytes`; ``rng`` draws the noise of later steps."""
        meta, arrays = cls._unpack(blob)
        with bad_contents(cls._kind):
            obj = cls(meta["epsilon"], meta["horizon"], sensitivity=meta["sensitivity"], rng=rng)
            obj._restore_common(meta)
            obj._t = check_int(meta["t"], "t", cls._kind, 0, obj._horizon)
            obj._n = check_int(meta["n"], "n", cls._kind, minimum=0)
            obj._theta = int(meta["theta"])
            sub_t = check_int(meta["sub_t"], "sub_t", cls._kind, 0, obj._t)
            obj._sub._t = sub_t
            obj._sub._last = int(meta["sub_last"])
            obj._sub._tree = _load_tree(obj._sub._levels, sub_t, 1, arrays, "sub.", cls._kind)
        return obj

    def __repr__(self) -> str:
        return (
            f"SparseCounter(epsilon={self._epsilon}, horizon={self._horizon}, "
            f"sensitivity={self._sensitivity}, t={self._t})"
        )


# ------------------------------------------------------------------ online synthesizer budgets
class OnlineBudgets:
    """``r ↦ ε_{j,r}`` for a cell of level ``j`` of the online synthesizer (seed 000).

    ``d ≥ 2``: (4.1) ``ε_{j,r} = C1·ε·2^{(j−r)(1−1/d)/2}``, ``C1 = (1 − 2^{−(1−1/d)/2})/2``.
    ``d = 1``: (5.1) ``ε_{j,r} = 3ε/(π²(j+1)²)`` for every ``r``. Build it with
    :func:`online_budgets`; it is serialisable (its three parameters), unlike an arbitrary
    callable.
    """

    __slots__ = ("d", "epsilon", "j")

    def __init__(self, epsilon: float, d: int, j: int) -> None:
        self.epsilon = float(epsilon)
        self.d = int(d)
        self.j = int(j)

    def __call__(self, r: int) -> float:
        if self.d == 1:
            return 3.0 * self.epsilon / (math.pi**2 * (self.j + 1) ** 2)
        e = (1.0 - 1.0 / self.d) / 2.0
        c1 = (1.0 - 2.0 ** (-e)) / 2.0
        return c1 * self.epsilon * 2.0 ** ((self.j - r) * e)

    def to_meta(self) -> dict:
        return {"epsilon": self.epsilon, "d": self.d, "j": self.j}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OnlineBudgets) and self.to_meta() == other.to_meta()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"online_budgets(epsilon={self.epsilon}, d={self.d}, j={self.j})"


def online_budgets(epsilon: float, d: int, j: int) -> OnlineBudgets:
    """The budgets ``r ↦ ε_{j,r}`` of a level-``j`` cell: (4.1) for ``d ≥ 2``, (5.1) for ``d = 1``.

    For ``d ≥ 2`` the budgets of one time level sum over the cells' levels to at most ``ε/2``
    (seed 000, (4.2)); for ``d = 1`` the sum over ``j`` is at most ``ε/2`` (``Σ 1/(j+1)² =
    π²/6``).

    Examples
    --------
    >>> b = online_budgets(1.0, 2, 3)
    >>> round(b(3), 6), b(4) < b(3)
    (0.079552, True)
    >>> round(online_budgets(1.0, 1, 0)(5), 6)
    0.303964
    """
    _, eps = _budget(epsilon, None, "online_budgets")
    d = check_int(d, "d", "online_budgets", minimum=1, maximum=64)
    j = check_int(j, "j", "online_budgets", minimum=0, maximum=2**31)
    return OnlineBudgets(eps, d, j)


# ------------------------------------------------------------------ inhomogeneous sparse counting
@lru_cache(maxsize=1024)
def _total_scale(sensitivity: int, eps_r: float, owner: str) -> Fraction:
    """``2·sensitivity/ε_r``, exact and checked: the noise scale of a time level's total."""
    return _check_param(2 * Fraction(sensitivity) / Fraction(eps_r), "scale", owner)


def _level_start(r: int, epsilon: Fraction) -> int:
    """``t_r = ceil(2^r/ε)``, exactly."""
    num = (1 << r) * epsilon.denominator
    return -((-num) // epsilon.numerator)


def _bank_steps(xs: object, ndim: int, size: int, owner: str) -> np.ndarray:
    """Checked ``(n, size)`` step values of a bank (``ndim = 1``: one step of ``(size,)``)."""
    arr = np.asarray(xs) if not isinstance(xs, (str, bytes)) else xs
    shape = (size,) if ndim == 1 else (-1, size)
    if not isinstance(arr, np.ndarray) or arr.ndim != ndim or arr.shape[-1] != size:
        got = getattr(arr, "shape", type(arr).__name__)
        raise InputError(f"xs must have shape {shape} (one value per counter); got {got} ({owner})")
    return _as_steps(arr.reshape(-1), owner).reshape(-1, size)


class _InhomogeneousParams:
    """The public parameters of inhomogeneous sparse counting, shared by
    :class:`InhomogeneousSparseCounter` and the bank of :mod:`sketchsyn.counters.sparsebank`."""

    _epsilon: float
    _budgets: Callable[[int], float]
    _start: int
    _sensitivity: int
    _max_budget: float

    def _set_params(
        self, epsilon: float, budgets: object, start_level: int, sensitivity: int, name: str
    ) -> None:
        _, self._epsilon = _budget(epsilon, None, name)
        if not callable(budgets):
            raise ParameterError(
                f"The 'budgets' parameter of {name} must be a callable r -> epsilon_r. "
                f"Got {budgets!r} instead."
            )
        self._budgets = budgets
        self._start = check_int(start_level, "start_level", name, minimum=0, maximum=60)
        self._sensitivity = check_int(sensitivity, "sensitivity", name, minimum=1, maximum=2**30)
        self._max_budget = 0.0

    def _budget_meta(self) -> dict:
        b = self._budgets
        return {
            "epsilon": self._epsilon,
            "start_level": self._start,
            "sensitivity": self._sensitivity,
            "budgets": b.to_meta() if isinstance(b, OnlineBudgets) else None,
        }

    @staticmethod
    def _stored_budgets(
        meta: dict, budgets: Callable[[int], float] | None, kind: str
    ) -> Callable[[int], float]:
        """``budgets`` if given, else the :func:`online_budgets` stored in a blob's ``meta``."""
        if budgets is not None:
            return budgets
        stored = meta["budgets"]
        if stored is None:
            raise SerializationError(
                f"{kind} blob was built with a custom budgets callable: pass it again as "
                "from_bytes(blob, budgets=...)"
            )
        return online_budgets(stored["epsilon"], stored["d"], stored["j"])

    def budget(self, r: int) -> float:
        """``ε_r``, checked (a finite real number > 0)."""
        _, value = _budget(self._budgets(r), None, f"{type(self).__name__} budgets({r})")
        return value

    @property
    def epsilon(self) -> float:
        """The ε that defines the time levels ``t_r = ceil(2^r/ε)``."""
        return self._epsilon

    @property
    def rho(self) -> None:
        """Inhomogeneous sparse counting is pure DP: always ``None``."""
        return None

    @property
    def max_budget(self) -> float:
        """The largest ``ε_r`` of the levels entered so far: what one record can cost."""
        return self._max_budget

    @property
    def start_level(self) -> int:
        """``r_0``: steps before ``t_{r_0}`` are not counted."""
        return self._start

    @property
    def budgets(self) -> Callable[[int], float]:
        """``r ↦ ε_r``."""
        return self._budgets


class InhomogeneousSparseCounter(_InhomogeneousParams, _Counter):
    """Inhomogeneous sparse counting (seed 000, Algorithm 3).

    Time level ``r`` is ``[t_r, t_{r+1})`` with ``t_r = ceil(2^r/ε)`` (global steps, from 1).
    Inside level ``r`` a :class:`SparseCounter` with horizon ``t_{r+1} − t_r`` and budget
    ``ε_r/2`` counts the level's steps (``c_t``); at the level's end ``S̃`` gains the level's
    count plus ``Lap_Z(2·sensitivity/ε_r)``. The release at ``t`` is ``S̃ + c_t``. Steps before
    ``t_{start_level}`` are not counted (the counter's first step is global step
    ``t_{start_level}``, and :attr:`t` is the global time of the latest step). Empty levels
    (``t_{r+1} = t_r``) are passed over.

    Privacy (Lemma 3.3): a change at a step of level ``r`` costs ``ε_r`` (``ε_r/2`` in the
    sparse counter, ``ε_r/2`` in the level's total) and nothing at other levels: a record is
    charged only its own level's budget. :attr:`max_budget` reports the largest ``ε_r`` used.

    Parameters
    ----------
    epsilon : float
        The ``ε`` that defines the time levels (the synthesizer's budget).
    budgets : callable
        ``budgets(r)`` gives ``ε_r > 0`` for time level ``r``; :func:`online_budgets` builds the
        online synthesizer's (and is serialisable; another callable must be passed again to
        :meth:`from_bytes`).
    start_level : int
        ``r_0``.
    sensitivity : int
        ℓ1 bound on what neighbouring streams differ by (default 1).
    rng : None, int, SeedSequence, Generator or RandomSource

    Notes
    -----
    **Trusted-curator state** (as :class:`SparseCounter`): the current segment's exact count is
    in the state and its bytes (``"exact_state": true``). ``nbytes = 56 + 40 + 16·64 + 48``
    (scalars, the level's sparse counter with 64 levels reserved).

    Examples
    --------
    >>> c = InhomogeneousSparseCounter(1.0, online_budgets(1.0, 2, 0), rng=0)
    >>> c.t   # level 0 starts at t_0 = ceil(1/ε) = 1
    0
    >>> out = c.update_many(np.ones(10, dtype=np.int64)); c.t, c.level
    (10, 3)
    >>> c.skip(10**9); c.t
    1000000010
    """

    _kind = "InhomogeneousSparseCounter"

    def __init__(
        self,
        epsilon: float,
        budgets: Callable[[int], float],
        start_level: int = 0,
        *,
        sensitivity: int = 1,
        rng: RNGLike = None,
    ) -> None:
        self._set_params(epsilon, budgets, start_level, sensitivity, type(self).__name__)
        self._eps_frac = Fraction(self._epsilon)
        src = as_source(rng)
        self._lineage = Lineage.new(src, self._kind, self._params())
        self._level_src, self._sparse_src = src.spawn(2)
        self._frozen = False
        self._last = 0
        self._t = _level_start(self._start, self._eps_frac) - 1
        self._base = 0
        self._level = self._start - 1
        self._level_open = 0
        self._sparse: SparseCounter | None = None
        self._level_end = self._t  # last step of the current level
        self._enter_next_level()

    def _params(self) -> dict:
        return self._budget_meta()

    def _enter_next_level(self, skip_ahead: int = 0) -> None:
        """Start the next non-empty level: draw its total's noise, build its sparse counter
        (not when ``skip_ahead`` steps of zeros will pass over the whole level)."""
        r = self._level + 1
        while _level_start(r + 1, self._eps_frac) == _level_start(r, self._eps_frac):
            r += 1
        self._level = r
        eps_r = self.budget(r)
        self._max_budget = max(self._max_budget, eps_r)
        scale = _total_scale(self._sensitivity, eps_r, type(self).__name__)
        self._level_open = int(_draw("laplace", scale, 1, self._level_src)[0])
        length = _level_start(r + 1, self._eps_frac) - _level_start(r, self._eps_frac)
        self._level_end = _level_start(r + 1, self._eps_frac) - 1
        child = self._sparse_src.spawn(1)[0]
        self._sparse = (
            None
            if skip_ahead > length
            else SparseCounter(eps_r / 2, length, sensitivity=self._sensitivity, rng=child)
        )

    def _close_level(self) -> None:
        self._base += self._level_open

    @property
    def level(self) -> int:
        """The current time level ``r``."""
        return self._level

    @property
    def t(self) -> int:
        """Global time of the latest step (``t_{start_level} − 1`` before the first)."""
        return self._t

    @property
    def nbytes(self) -> int:
        """``56 + 40 + 16·64 + 48`` bytes (64 levels reserved for the level's sub-mechanism)."""
        return 56 + 40 + 16 * _CAPACITY + 48

    def update_many(self, xs: object) -> np.ndarray:
        """Advance ``len(xs)`` steps; return every step's release ``S̃ + c_t`` (int64).

        >>> c = InhomogeneousSparseCounter(2.0, online_budgets(2.0, 1, 0), rng=1)
        >>> c.update_many([0, 1, 0]).shape
        (3,)
        """
        self._check_writable()
        steps = _as_steps(xs, type(self).__name__)
        assert self._sparse is not None
        _check_total(steps, abs(self._base) + abs(self._level_open) + abs(self._last), self._kind)
        out = np.empty(steps.size, dtype=np.int64)
        done = 0
        while done < steps.size:
            take = min(self._level_end - self._t, steps.size - done)
            part = steps[done : done + take]
            out[done : done + take] = self._base + self._sparse.update_many(part)
            self._level_open += int(part.sum())
            self._t += take
            done += take
            if self._t == self._level_end:
                self._close_level()
                self._enter_next_level()
        if steps.size:
            self._last = int(out[-1])
        return out

    def skip(self, s: int, releases: bool = False) -> np.ndarray | None:
        """Advance ``s`` steps of value 0: ``O(log s)`` levels, each in ``O(log)`` draws.

        A level skipped whole adds one noise draw to ``S̃`` (its sparse counter's releases
        matter only inside the level: with ``releases=True`` they are drawn and returned).

        >>> c = InhomogeneousSparseCounter(0.5, online_budgets(0.5, 3, 2), start_level=2, rng=4)
        >>> c.skip(1000); c.t - 8   # t_2 = ceil(4/0.5) = 8 is its first step
        999
        """
        self._check_writable()
        s = _check_s(s, type(self).__name__)
        assert self._sparse is not None
        out = np.empty(s, dtype=np.int64) if releases else None
        done = 0
        while done < s:
            take = min(self._level_end - self._t, s - done)
            if self._sparse is None:  # a level skipped whole: only its total's noise matters
                self._t += take
            else:
                part = self._sparse.skip(take, releases=releases)
                if out is not None and part is not None:
                    out[done : done + take] = self._base + part
                self._t += take
                self._last = self._base + self._sparse.query()
            done += take
            if self._t == self._level_end:
                self._close_level()
                if not releases:
                    done += self._pass_levels(s - done)
                self._enter_next_level(0 if releases else s - done)
        return out

    def _pass_levels(self, rest: int) -> int:
        """Pass the levels that ``rest`` steps of zeros cross whole (more than their length):
        their totals are pure noise, one draw each at its own scale, added to ``S̃`` together
        (:func:`~sketchsyn.privacy.noise.laplace_sum`). Returns the steps passed."""
        scales, passed = [], 0
        r = self._level + 1
        while True:
            while _level_start(r + 1, self._eps_frac) == _level_start(r, self._eps_frac):
                r += 1
            length = _level_start(r + 1, self._eps_frac) - _level_start(r, self._eps_frac)
            if rest - passed <= length:
                break
            eps_r = self.budget(r)
            self._max_budget = max(self._max_budget, eps_r)
            scales.append(_total_scale(self._sensitivity, eps_r, type(self).__name__))
            passed += length
            r += 1
        if scales:
            self._base += int(laplace_sum(scales, 1, self._level_src)[0])
            self._level = r - 1
            self._t += passed
            self._level_end = self._t
        return passed

    # -------------------------------------------------------------- bytes
    def to_bytes(self) -> bytes:
        """Versioned, checksummed bytes. **Trusted-curator state** (``"exact_state": true``):
        the current segment's exact count is inside. ``budgets`` is stored when it comes from
        :func:`online_budgets`; otherwise pass it again to :meth:`from_bytes`."""
        assert self._sparse is not None
        meta = {
            **self._params(),
            "t": self._t,
            "level": self._level,
            "base": self._base,
            "level_open": self._level_open,
            "max_budget": self._max_budget,
            "sparse": self._sparse.to_bytes().hex(),
            "exact_state": True,
        }
        return self._pack(meta, {})

    @classmethod
    def from_bytes(
        cls, blob: bytes, rng: RNGLike = None, budgets: Callable[[int], float] | None = None
    ) -> InhomogeneousSparseCounter:
        """Load bytes written by :meth:`to_bytes` (``budgets`` if it was not serialisable)."""
        meta, _ = cls._unpack(blob)
        with bad_contents(cls._kind):
            budgets = cls._stored_budgets(meta, budgets, cls._kind)
            src = as_source(rng)
            obj = cls(
                meta["epsilon"],
                budgets,
                meta["start_level"],
                sensitivity=meta["sensitivity"],
                rng=src,
            )
            obj._restore_common(meta)
            obj._t = int(meta["t"])
            obj._level = check_int(meta["level"], "level", cls._kind, obj._start, 62)
            obj._base = int(meta["base"])
            obj._level_open = int(meta["level_open"])
            obj._max_budget = float(meta["max_budget"])
            obj._level_end = _level_start(obj._level + 1, obj._eps_frac) - 1
            obj._sparse = SparseCounter.from_bytes(bytes.fromhex(meta["sparse"]), rng=src)
            first = _level_start(obj._level, obj._eps_frac)
            if obj._sparse.t != obj._t - first + 1 or obj._t > obj._level_end:
                raise ValueError("the level's counter does not match t")
        return obj

    def __repr__(self) -> str:
        return (
            f"InhomogeneousSparseCounter(epsilon={self._epsilon}, budgets={self._budgets!r}, "
            f"start_level={self._start}, t={self._t})"
        )
