"""The binary mechanism (tree aggregation) and a bank of them stepped together.

:class:`BinaryMechanism` releases a private running count at every step of a stream (Chan, Shi
and Song, *Private and Continual Release of Statistics*; Dwork, Naor, Pitassi and Rothblum,
*Differential Privacy under Continual Observation*), with the textbook estimator or Honaker's
(*Efficient Use of Differentially Private Binary Trees*); :class:`CounterBank` steps ``size``
of them together in one Python call per batch.

Each p-sum's noise is drawn when its block opens and the data accumulate into it, so the
state holds *noise plus the data so far* of every open block: a **trusted** state (a blob
shipped at step ``t0`` and the release at the block's end differ by the exact count of the
steps in between), declared so in every blob's header.

>>> c = BinaryMechanism(epsilon=1.0, horizon=8, rng=0)
>>> out = c.update_many([1, 0, 1, 1, 0, 0, 1, 1])
>>> out.shape, c.t
((8,), 8)
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ..attributes import ReadOnly
from ..errors import (
    IncompatibleError,
    InputError,
    ParameterError,
    SerializationError,
    check_choice,
    check_int,
    check_memory,
)
from ..io.serial import Arrays, MetaReader
from ..privacy.lineage import Lineage
from ..privacy.rng import RNGLike, as_source
from . import base as core
from .base import (
    _CAPACITY,
    _FLIMIT,
    _as_steps,
    _bank_steps,
    _budget,
    _check_param,
    _check_s,
    _check_total,
    _Counter,
    _cumsum,
    _int_array,
    _noise_variance,
    _read_budget,
    _read_sensitivity,
)
from .engines import _HonakerTree, _Tree

__all__ = ["BinaryMechanism", "CounterBank"]


def _tree_arrays(tree: _Tree, prefix: str) -> dict[str, np.ndarray]:
    return {f"{prefix}closed": tree.closed.copy(), f"{prefix}open": tree.open_.copy()}


def _load_tree(levels: int, u: int, m: int, fields: MetaReader, arrays: dict, prefix: str) -> _Tree:
    """A tree of ``levels`` levels at local step ``u`` from checked ``(levels, m)`` arrays."""
    closed = _int_array(fields, arrays, f"{prefix}closed", (levels, m))
    open_ = _int_array(fields, arrays, f"{prefix}open", (levels, m))
    tree = _Tree(levels, "laplace", Fraction(1), None, m)
    tree.closed[:] = closed
    tree.open_[:] = open_
    tree.u = u
    return tree


# ------------------------------------------------------------------ the binary mechanism
class BinaryMechanism(_Counter):
    """The binary mechanism (tree aggregation; Chan, Shi and Song 2011; Dwork et al. 2010).

    Saved state: **trusted** (``STATE_PRIVACY = "trusted"``): every open block's noise plus
    the data so far (see the notes below).

    Parameters
    ----------
    epsilon : float, optional
        Pure ε-DP with integer Laplace noise. Exactly one of ``epsilon`` and ``rho``.
    horizon : int, optional
        ``T``: the finite-horizon mechanism over steps ``1 … T`` with ``L = floor(log2 T) + 1``
        levels; each p-sum gets ``Lap_Z(sensitivity·L/ε)`` or ``N_Z(0, L·sensitivity²/(2ρ))``
        (Bun et al., Algorithm 3, with the exact level count ``L`` for ``log T``). ``None``:
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

    State: ``closed`` and ``open`` int64 arrays of ``L`` p-sums (``L`` = 64 reserved for the
    unbounded form). **Trusted state**: an open block holds its noise *plus the data so far*,
    and the release at the block's end holds the same noise plus the block's full data, so a
    blob shipped at step ``t0`` and a later release differ by an exact count. The blobs say
    ``state == "trusted"`` in their header; keep them with the curator.
    ``nbytes = 16·L + 48`` (finite) or ``16·64 + 64`` (unbounded: the segment's tree plus the
    noisy base and segment total).

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
            self._seg_open = core._draw(self._kindn, self._seg_param, m, self._src)
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

    horizon = ReadOnly[int | None](
        "``T`` for the finite form, ``None`` for the unbounded (hybrid) form."
    )

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
        self._seg_open = core._draw(self._kindn, self._seg_param, self._m, self._src)
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
                core._draw(self._kindn, self._seg_param, whole * m, self._src)
                .reshape(whole, m)
                .sum(axis=0)
            )
            self._segment = k + whole
            self._seg_open = core._draw(self._kindn, self._seg_param, m, self._src)
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
    def _state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Public parameters, lineage and the p-sums (noise plus the data so far of every open
        block: **trusted**, see the class notes).

        >>> c = BinaryMechanism(epsilon=1.0, horizon=8, rng=1); _ = c.update_many([1, 0, 1])
        >>> BinaryMechanism.from_bytes(c.to_bytes()).query() == c.query()
        True
        """
        meta: dict[str, Any] = {
            **self._params(),
            "t": self._t,
            "size": self._m,
            **self._common_meta(last=False),
        }
        if self._estimator == "honaker":
            arrays = {"open": self._tree.open_.copy(), "est": self._tree.est.copy()}
        else:
            arrays = _tree_arrays(self._tree, "")
        arrays["lasts"] = self._lasts.copy()
        if self._horizon is None:
            meta.update(segment=self._segment, tree_u=self._tree.u)
            arrays.update(base=self._base.copy(), seg_open=self._seg_open.copy())
        return meta, arrays

    @classmethod
    def _read_size(cls, fields: MetaReader) -> int:
        return fields.int("size", 1, 1)

    @classmethod
    def _load_state(
        cls, fields: MetaReader, arrays: Arrays, version: int, blob: bytes, rng: Any
    ) -> BinaryMechanism:
        kind = cls._kind
        m = cls._read_size(fields)
        eps, rho = _read_budget(fields, kind)
        horizon = fields.optional_int("horizon", 1, 2**62 - 1, present=True)
        estimator = fields.str("estimator", ("tree", "honaker"))
        if estimator == "honaker" and horizon is None:
            raise SerializationError(
                f"{kind} blob header fields 'estimator' = 'honaker' and 'horizon' = None "
                "disagree: Honaker's estimator needs a finite horizon"
            )
        sensitivity = _read_sensitivity(fields)
        t = fields.int("t", 0, 2**62 if horizon is None else horizon)
        honaker = estimator == "honaker"
        if honaker:
            lasts = fields.bounded(arrays, "lasts", np.float64, (m,), -_FLIMIT, _FLIMIT).copy()
        else:
            lasts = _int_array(fields, arrays, "lasts", (m,))
        # Every array is now known to match the size; the parameters are checked, so the
        # constructor allocates no more than the blob holds.
        obj = cls._blank(
            m, eps, horizon, rho=rho, sensitivity=sensitivity, estimator=estimator, rng=rng
        )
        obj._restore_common(fields, last=None)
        obj._t = t
        obj._lasts = lasts
        if horizon is not None:
            levels = obj._levels
            if honaker:
                tree = obj._tree
                tree.open_[...] = _int_array(fields, arrays, "open", (levels, m))
                tree.est[...] = fields.bounded(
                    arrays, "est", np.float64, (levels, m), -_FLIMIT, _FLIMIT
                )
                tree.u = t
            else:
                obj._tree = _load_tree(levels, t, m, fields, arrays, "")
        else:
            obj._segment = fields.int("segment", 0, 61)
            u = fields.int("tree_u", 0, (1 << obj._segment) - 1)
            if t != (1 << obj._segment) - 1 + u:
                raise SerializationError(
                    f"{kind} blob header fields 't' = {t}, 'segment' = {obj._segment} and "
                    f"'tree_u' = {u} disagree"
                )
            obj._base = _int_array(fields, arrays, "base", (m,))
            obj._seg_open = _int_array(fields, arrays, "seg_open", (m,))
            obj._tree = _load_tree(obj._segment + 1, u, m, fields, arrays, "")
        return obj

    @classmethod
    def _blank(cls, m: int, *args: Any, **kwargs: Any) -> Any:
        """A new counter from the constructor's arguments (a bank takes its size ``m`` first)."""
        return cls(*args, **kwargs)

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
    cells). All counters share ``t``. Saved state: **trusted**, as :class:`BinaryMechanism`'s:
    ``(L, size)`` arrays of p-sums, noise plus the data so far of the open blocks.

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
        finite = isinstance(horizon, int) and not isinstance(horizon, bool) and horizon > 0
        levels = horizon.bit_length() if finite else _CAPACITY  # type: ignore[union-attr]
        check_memory(self._m * (16 * levels + 24) + 40, "CounterBank", f"size={self._m}")
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
    def _read_size(cls, fields: MetaReader) -> int:
        return fields.int("size", 1, 2**28)

    @classmethod
    def _blank(cls, m: int, *args: Any, **kwargs: Any) -> Any:
        return cls(m, *args, **kwargs)

    def __repr__(self) -> str:
        return (
            f"CounterBank(size={self._m}, {self._budget_name}={self._budget_value}, "
            f"horizon={self._horizon}, t={self._t})"
        )
