"""Inhomogeneous sparse counting and the online synthesizer's budgets.

Time level ``r`` of the stream is ``[t_r, t_{r+1})`` with ``t_r = ceil(2^r/ε)``; each level runs
its own :class:`~sketchsyn.counters.sparse.SparseCounter` at budget ``ε_r/2`` and adds a noisy
total at its end, so a record costs only its own level's ``ε_r`` (the inhomogeneous sparse
counting of the online synthesizer's paper, Algorithm 3, built on Dwork, Naor, Reingold and
Rothblum's sparse counting). A budget function that exceeds ``ε`` at a level it reaches is
refused. The state holds exact segment counts: a **trusted** state.

>>> c = InhomogeneousSparseCounter(1.0, online_budgets(1.0, 2, 0), rng=0)
>>> c.skip(100); c.t
100
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextvars import ContextVar
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np

from ..attributes import ReadOnly
from ..errors import ParameterError, SerializationError, check_int
from ..io.serial import Arrays, MetaReader
from ..privacy.lineage import Lineage
from ..privacy.noise import laplace_sum
from ..privacy.rng import RNGLike, as_source
from . import base as core
from .base import (
    _CAPACITY,
    _LIMIT,
    _as_steps,
    _budget,
    _check_param,
    _check_s,
    _check_total,
    _Counter,
    _read_sensitivity,
)
from .sparse import SparseCounter

__all__ = ["InhomogeneousSparseCounter", "OnlineBudgets", "online_budgets"]

# The budgets callable handed to from_bytes, read by _from_state (a callable is not in the bytes).
_GIVEN_BUDGETS: ContextVar[Callable[[int], float] | None] = ContextVar(
    "sketchsyn_counters_given_budgets", default=None
)


# ------------------------------------------------------------------ online synthesizer budgets
class OnlineBudgets:
    """``r ↦ ε_{j,r}`` for a cell of level ``j`` of the online synthesizer (He, Vershynin and Zhu).

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
        exponent = (self.j - r) * e
        if exponent > 1000:  # 2**exponent overflows a float: far beyond any budget
            return math.inf
        return c1 * self.epsilon * 2.0 ** max(exponent, -1100.0)

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
    (He, Vershynin and Zhu, (4.2)); for ``d = 1`` the sum over ``j`` is at most ``ε/2`` (``Σ
    1/(j+1)² =
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


class _InhomogeneousParams:
    """The public parameters of inhomogeneous sparse counting, shared by
    :class:`InhomogeneousSparseCounter` and the bank of :mod:`sketchsyn.counters.sparsebank`."""

    _epsilon: float
    _budgets: Callable[[int], float]
    _start: int
    _sensitivity: int
    _max_budget: float
    _eps_frac: Fraction

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
        self._eps_frac = Fraction(self._epsilon)
        # The levels known up front: the first one (entered now). An online_budgets function
        # is largest there (it decreases with r for d >= 2, is constant for d = 1), so that one
        # check covers every level; another callable is checked as each level is reached.
        self._check_levels(self._start, _level_start(self._start, self._eps_frac))

    def _budget_meta(self) -> dict:
        b = self._budgets
        return {
            "epsilon": self._epsilon,
            "start_level": self._start,
            "sensitivity": self._sensitivity,
            "budgets": b.to_meta() if isinstance(b, OnlineBudgets) else None,
        }

    @classmethod
    def from_bytes(
        cls,
        blob: bytes,
        rng: RNGLike = None,
        budgets: Callable[[int], float] | None = None,
        *,
        key: bytes | str | None = None,
    ) -> Any:
        """Load bytes written by :meth:`to_bytes`; ``rng`` draws the noise of later steps and
        ``budgets`` is the callable when it was not :func:`online_budgets` (not serialisable).
        """
        token = _GIVEN_BUDGETS.set(budgets)
        try:
            return super().from_bytes(blob, rng, key=key)  # type: ignore[misc]
        finally:
            _GIVEN_BUDGETS.reset(token)

    def snapshot(self) -> Any:
        """A read-only copy (its updates raise :class:`~sketchsyn.errors.ReleasedError`)."""
        snap = type(self).from_bytes(self.to_bytes(), budgets=self._budgets)  # type: ignore[attr-defined]
        snap._freeze()
        return snap

    @staticmethod
    def _stored_budgets(fields: MetaReader, kind: str) -> Callable[[int], float]:
        """The ``budgets`` given to ``from_bytes``, else the :func:`online_budgets` stored in
        the blob's header (its fields checked)."""
        stored_field = fields.value("budgets")  # read either way: the header must hold it
        given = _GIVEN_BUDGETS.get()
        if given is not None:
            return given
        if stored_field is None:
            raise SerializationError(
                f"{kind} blob header field 'budgets' is empty: the counter was built with a "
                "custom budgets callable; pass it again as from_bytes(blob, budgets=...)"
            )
        stored = MetaReader(fields.dict("budgets"), f"{kind} budgets")
        eps = stored.epsilon("epsilon")
        budgets = OnlineBudgets(eps, stored.int("d", 1, 64), stored.int("j", 0, 2**31))
        stored.done({})
        try:  # the level budgets must be realisable (a huge j gives none)
            for r in range(4):
                _budget(budgets(r), None, f"{kind} budgets({r})")
        except ParameterError as exc:
            raise SerializationError(
                f"{kind} blob header field 'budgets' gives no usable budget: {exc}"
            ) from exc
        return budgets

    def budget(self, r: int) -> float:
        """``ε_r``, checked: a finite real number in ``EPSILON_RANGE`` and at most ``ε``.

        A level whose budget passes ``ε`` is refused with
        :class:`~sketchsyn.errors.ParameterError` naming the level: one record there would cost
        more than the whole budget the time levels are built for.

        >>> c = InhomogeneousSparseCounter(1.0, lambda r: 0.5 * 2**r, rng=0)
        >>> c.skip(2); c.level
        1
        >>> c.skip(10)
        Traceback (most recent call last):
        ...
        sketchsyn.errors.ParameterError: The 'budgets' parameter of InhomogeneousSparseCounter gives epsilon_2 = 2.0 > epsilon = 1.0 at time level 2: a record at that level would cost more than the whole budget.
        """  # noqa: E501
        name = type(self).__name__
        raw = self._budgets(r)
        _, value = _budget(raw, None, f"{name} budgets({r})")
        if value > self._epsilon:
            raise ParameterError(
                f"The 'budgets' parameter of {name} gives epsilon_{r} = {raw!r} > epsilon = "
                f"{self._epsilon} at time level {r}: a record at that level would cost more "
                "than the whole budget."
            )
        return value

    def _check_levels(self, r: int, t_end: int) -> None:
        """Check ``ε_r ≤ ε`` for every non-empty level from ``r`` on that starts by ``t_end``
        (before a batch changes anything: a refused batch leaves the state unchanged)."""
        eps = self._eps_frac
        start = _level_start(r, eps)
        while start <= t_end:
            nxt = _level_start(r + 1, eps)
            if nxt != start:
                self.budget(r)
            r, start = r + 1, nxt

    max_budget = ReadOnly[float](
        "The largest ``ε_r`` of the levels entered so far: what one record can cost."
    )

    @property
    def start_level(self) -> int:
        """``r_0``: steps before ``t_{r_0}`` are not counted."""
        return self._start

    budgets = ReadOnly[Callable[[int], float]]("``r ↦ ε_r``.")


class InhomogeneousSparseCounter(_InhomogeneousParams, _Counter):
    """Inhomogeneous sparse counting (He, Vershynin and Zhu, Algorithm 3).

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

    Saved state: **trusted** (``STATE_PRIVACY = "trusted"``): the exact count of the current
    segment, as in :class:`SparseCounter` (see the notes below).

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
    in the state and its bytes (whose header says ``state == "trusted"``).
    ``nbytes = 56 + 40 + 16·64 + 48`` (scalars, the level's sparse counter with 64 levels
    reserved).

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
        self._level_open = int(core._draw("laplace", scale, 1, self._level_src)[0])
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

    level = ReadOnly[int]("The current time level ``r``.")
    t = ReadOnly[int]("Global time of the latest step (``t_{start_level} − 1`` before the first).")

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
        self._check_levels(self._level + 1, self._t + steps.size)
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
        self._check_levels(self._level + 1, self._t + s)
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
    def _state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """**Trusted-curator state**: the current segment's exact count is inside. ``budgets``
        is stored when it comes from :func:`online_budgets`; otherwise pass it again to
        :meth:`from_bytes`."""
        assert self._sparse is not None
        meta = {
            **self._params(),
            "t": self._t,
            "level": self._level,
            "base": self._base,
            "level_open": self._level_open,
            "max_budget": self._max_budget,
            "sparse": self._sparse.to_bytes().hex(),
            **self._common_meta(),
        }
        return meta, {}

    @classmethod
    def _load_state(
        cls, fields: MetaReader, arrays: Arrays, version: int, blob: bytes, rng: Any
    ) -> InhomogeneousSparseCounter:
        kind = cls._kind
        eps = fields.epsilon("epsilon")
        start = fields.int("start_level", 0, 60)
        sensitivity = _read_sensitivity(fields)
        budgets = cls._stored_budgets(fields, kind)
        level = fields.int("level", start, 62)
        eps_frac = Fraction(eps)
        first, nxt = _level_start(level, eps_frac), _level_start(level + 1, eps_frac)
        if nxt == first:
            raise SerializationError(f"{kind} blob header field 'level' = {level} is empty")
        t = fields.int("t", first - 1, nxt - 2)
        base = fields.int("base", -_LIMIT + 1, _LIMIT - 1)
        level_open = fields.int("level_open", -_LIMIT + 1, _LIMIT - 1)
        max_budget = fields.float("max_budget", minimum=0.0, maximum=eps)
        try:
            raw = bytes.fromhex(fields.str("sparse"))
        except ValueError:
            raise SerializationError(f"{kind} blob header field 'sparse' is not hex") from None
        src = as_source(rng)
        obj = cls(eps, budgets, start, sensitivity=sensitivity, rng=src)
        obj._restore_common(fields)
        obj._check_levels(start, first)  # every level reached so far, the stored one included
        eps_r = obj.budget(level)
        with fields.inside("sparse"):
            sparse = SparseCounter.from_bytes(raw, rng=src)
        if (
            sparse.epsilon != eps_r / 2
            or sparse.horizon != nxt - first
            or sparse.sensitivity != sensitivity
            or sparse.t != t - first + 1
        ):
            raise SerializationError(
                f"{kind} blob header field 'sparse' holds a counter that does not match level "
                f"{level} (epsilon_r = {eps_r}) and t = {t}"
            )
        obj._t, obj._level, obj._base, obj._level_open = t, level, base, level_open
        obj._max_budget = max_budget
        obj._level_end = nxt - 1
        obj._sparse = sparse
        return obj

    def __repr__(self) -> str:
        return (
            f"InhomogeneousSparseCounter(epsilon={self._epsilon}, budgets={self._budgets!r}, "
            f"start_level={self._start}, t={self._t})"
        )
