"""The k-ary tree counter with negative digits (pure ε-DP continual counting).

Andersson, Pagh and Torkamani (*Improved Counting under Continual Observation with Pure
Differential Privacy*, arXiv 2408.07021; FORC 2025 as *Count on Your Elders*, with Steiner)
generalise the binary tree mechanism to a ``k``-ary tree (``k`` odd) whose prefix sums are
read off the **balanced** base-``k`` representation of ``t``, with digits in ``{−m, …, m}``,
``m = (k−1)/2``: a digit ``b_j > 0`` adds ``b_j`` blocks of level ``j``, a digit ``b_j < 0``
subtracts ``|b_j|`` of them: about ``k/4`` blocks per level instead of ``(k−1)/2``. At
``T = 2^20`` (k = 19, 5 levels) the mean and max variance over ``t ≤ T`` are 1144 and 2193 in
units of 1/ε², against 8818 and 17637 for the binary tree (``benchmarks/bench_karytree.py``).

The online evaluation used here (a negative digit may need blocks that reach past ``t``: they
enter with their partial sums, whose future parts cancel exactly) and its privacy argument are
written out in :class:`KaryTreeCounter`'s notes.

>>> c = KaryTreeCounter(1.0, 1000, rng=0)
>>> out = c.update_many([1] * 500)
>>> out.dtype, c.t, c.levels
(dtype('int64'), 500, 3)
>>> c.variance(350) / c.variance(19)   # 350 = 361 − 19 + 8: 1 + 1 + 8 blocks against 1
10.0
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ..attributes import ReadOnly
from ..errors import InputError, ParameterError, SerializationError, check_int
from ..io.serial import Arrays, MetaReader
from ..privacy.lineage import Lineage
from ..privacy.rng import RandomSource, RNGLike, as_source
from . import base as core
from .base import (
    _as_steps,
    _budget,
    _check_param,
    _check_s,
    _check_total,
    _Counter,
    _int_array,
    _noise_variance,
    _read_sensitivity,
)

__all__ = ["KaryTreeCounter", "balanced_digits", "karytree_levels"]

_MAX_K = 63
_MAX_HORIZON = 2**55  # k**levels < k·(2T + 1) < 2**62: block positions stay in int64
_CHUNK = 2**18  # steps per engine call in update_many


def karytree_levels(horizon: int, k: int) -> int:
    """``h``: the fewest balanced base-``k`` digits that represent every ``t ≤ horizon``
    (the smallest ``h ≥ 1`` with ``(k^h − 1)/2 ≥ horizon``).

    >>> karytree_levels(2**20, 19), karytree_levels(4, 3), karytree_levels(5, 3)
    (5, 2, 3)
    """
    h = 1
    while (k**h - 1) // 2 < horizon:
        h += 1
    return h


def _read_tree_fields(fields: MetaReader, kind: str) -> tuple[float, int, int, int, int, int]:
    """``(epsilon, horizon, k, sensitivity, t, levels)`` from a k-ary tree blob's header, each
    checked for type and range (``k`` odd) before anything is allocated."""
    eps = fields.epsilon("epsilon")
    horizon = fields.int("horizon", 1, _MAX_HORIZON)
    k = fields.int("k", 3, _MAX_K)
    if k % 2 == 0:
        raise SerializationError(f"{kind} blob header field 'k' must be odd, got {k}")
    sensitivity = _read_sensitivity(fields)
    t = fields.int("t", 0, horizon)
    return eps, horizon, k, sensitivity, t, karytree_levels(horizon, k)


def balanced_digits(t: Any, k: int, levels: int) -> np.ndarray:
    """Balanced base-``k`` digits of ``t`` (int or int64 array), shape ``(levels, *t.shape)``:
    ``t = Σ_j b_j·k^j``, ``b_j ∈ {−m, …, m}``. Digit ``j`` is ``t_j/k^j − k·t_{j+1}/k^{j+1}``,
    ``t_j`` the multiple of ``k^j`` nearest to ``t`` (no ties: ``k^j`` is odd).

    >>> balanced_digits(2, 3, 2).tolist(), balanced_digits(350, 19, 3).tolist()
    ([-1, 1], [8, -1, 1])
    """
    t = np.asarray(t, dtype=np.int64)
    out = np.empty((levels, *t.shape), dtype=np.int64)
    rest = t.copy()
    m = (k - 1) // 2
    for j in range(levels):
        r = (rest + m) % k - m
        out[j] = r
        rest = (rest - r) // k
    if np.any(rest != 0):
        raise ParameterError(f"t does not fit {levels} balanced base-{k} digits")
    return out


class _KaryEngine:
    """Noisy blocks of the k-ary tree, kept per level as one *window* of ``2m`` blocks.

    Level ``j``'s blocks are the aligned intervals ``(a, a + k^j]``. The release at ``t`` uses,
    at level ``j``, the blocks between ``t_{j+1}`` (the multiple of ``k^{j+1}`` nearest to
    ``t``: the window's *centre* ``M``) and ``t_j``: the ``b_j`` blocks after ``M`` or the
    ``|b_j|`` blocks before it. So each level needs only the ``m`` blocks on either side of its
    current centre: ``win[j, i]`` (``i < m``) is the block ``(M − (i+1)k^j, M − i·k^j]`` and
    ``win[j, m + i]`` the block ``(M + i·k^j, M + (i+1)k^j]``; the middle block of each parent
    is never used. A window's noise is drawn when the centre moves to it, at step
    ``M − (k^{j+1} − 1)/2`` (its blocks hold no data yet), the construction's windows (centre 0)
    at construction (blocks at positions ≤ 0 hold nothing and get no noise). Draws happen in
    time order, one step's windows by increasing level, each window's ``2m`` values in the
    order of ``win``: batching does not change which noise goes where. ``win`` holds each
    block's noise plus its data so far: not a release (see :class:`KaryTreeCounter`'s state).
    """

    __slots__ = ("h", "k", "m", "mc", "u", "win")

    def __init__(
        self, k: int, h: int, param: Fraction, src: RandomSource | None, mc: int = 1
    ) -> None:
        self.k, self.h, self.m, self.mc = k, h, (k - 1) // 2, mc
        self.u = 0
        self.win = np.zeros((h, 2 * self.m, mc), dtype=np.int64)
        if src is not None:
            fresh = core._draw("laplace", param, h * self.m * mc, src).reshape(h, self.m, mc)
            self.win[:, self.m :] = fresh

    def centre(self, j: int, t: Any) -> Any:
        """Index ``q`` of the window (centre ``q·k^{j+1}``) in use at step ``t``."""
        big = self.k ** (j + 1)
        return (t + (big - 1) // 2) // big

    def mass(self) -> int:
        """A bound on any release's magnitude (summed in float64: an int64 sum may wrap)."""
        return int(np.abs(self.win).sum(axis=(0, 1), dtype=np.float64).max())

    def release(self) -> np.ndarray:
        """The release at step ``u`` from the stored windows, ``(mc,)``."""
        digits = balanced_digits(self.u, self.k, self.h)
        out = np.zeros(self.mc, dtype=np.int64)
        m = self.m
        for j in range(self.h):
            b = int(digits[j])
            if b > 0:
                out += self.win[j, m : m + b].sum(axis=0)
            elif b < 0:
                out -= self.win[j, :-b].sum(axis=0)
        return out

    def _new_windows(self, t0: int, t1: int) -> tuple[list[np.ndarray], int]:
        """Per level, the row in the batch's draws of each window created at steps ``t0…t1``
        (windows ``q0+1 … q1``), ordered by (creation step, level); and the window count."""
        created, levels, counts = [], [], []
        for j in range(self.h):
            q0, q1 = self.centre(j, t0 - 1), self.centre(j, t1)
            big = self.k ** (j + 1)
            qs = np.arange(q0 + 1, q1 + 1, dtype=np.int64)
            created.append(qs * big - (big - 1) // 2)
            levels.append(np.full(qs.size, j, dtype=np.int64))
            counts.append(qs.size)
        when = np.concatenate(created) if created else np.zeros(0, np.int64)
        lev = np.concatenate(levels) if levels else np.zeros(0, np.int64)
        order = np.lexsort((lev, when))
        rank = np.empty(order.size, dtype=np.int64)
        rank[order] = np.arange(order.size, dtype=np.int64)
        rows, start = [], 0
        for c in counts:
            rows.append(rank[start : start + c])
            start += c
        return rows, int(order.size)

    def advance(self, cum: np.ndarray, param: Fraction, src: RandomSource) -> np.ndarray:
        """Take ``len(cum)`` steps (``cum``: ``(n, mc)`` inclusive cumulative sums of their
        values) and return every step's releases ``(n, mc)``.

        The release at ``t`` is ``Σ_B c_B·(base_B + data of B in (u, t])`` over the blocks
        ``B`` it uses (``c_B = ±1``), with ``base_B`` the stored value of a block of a window
        open before the batch (noise plus data up to ``u``) or the fresh noise of one created
        in it. The signed blocks sum to the indicator of ``(0, t]``, so the data terms add up
        to ``cum[t]``: release = ``cum[t] + Σ_B c_B·base_B``.
        """
        n, mc = cum.shape
        m, k = self.m, self.k
        t0, t1 = self.u + 1, self.u + n
        rows, count = self._new_windows(t0, t1)
        eta = core._draw("laplace", param, count * 2 * m * mc, src).reshape(count, 2 * m, mc)
        ts = np.arange(t0, t1 + 1, dtype=np.int64)
        digits = balanced_digits(ts, k, self.h)
        g = np.zeros((n, mc), dtype=np.int64)
        zero = np.zeros((1, m + 1, mc), dtype=np.int64)
        for j in range(self.h):
            bases = np.concatenate([self.win[j][None], eta[rows[j]]], axis=0)
            # Cumulative sums outward from the centre: after[:, b] = Σ_{i<b} win[m+i],
            # before[:, b] = Σ_{i<b} win[i].
            after = np.concatenate([zero[:, :1].repeat(bases.shape[0], 0), bases[:, m:]], 1)
            before = np.concatenate([zero[:, :1].repeat(bases.shape[0], 0), bases[:, :m]], 1)
            after = np.cumsum(after, axis=1)
            before = np.cumsum(before, axis=1)
            w = self.centre(j, ts) - self.centre(j, t0 - 1)
            b = digits[j]
            g += np.where((b > 0)[:, None], after[w, np.maximum(b, 0)], 0)
            g -= np.where((b < 0)[:, None], before[w, np.maximum(-b, 0)], 0)
        releases = cum + g
        # New state: each level's window at t1, with the batch's data added to its blocks.
        ext = np.concatenate([np.zeros((1, mc), dtype=np.int64), cum], axis=0)
        for j in range(self.h):
            q0, q1 = self.centre(j, t0 - 1), self.centre(j, t1)
            if q1 != q0:
                self.win[j] = eta[rows[j][-1]]
            size = k**j
            centre = q1 * k ** (j + 1)
            i = np.arange(m, dtype=np.int64)
            lo = np.concatenate([centre - (i + 1) * size, centre + i * size])
            hi = lo + size
            a = np.clip(lo, t0 - 1, t1) - (t0 - 1)
            z = np.clip(hi, t0 - 1, t1) - (t0 - 1)
            self.win[j] += ext[z] - ext[a]
        self.u = t1
        return releases

    def skip(self, s: int, param: Fraction, src: RandomSource) -> None:
        """``s`` zero steps: only the windows in use at the end are touched (O(levels) draws)."""
        t1 = self.u + s
        moved = [j for j in range(self.h) if self.centre(j, t1) != self.centre(j, self.u)]
        fresh = core._draw("laplace", param, len(moved) * 2 * self.m * self.mc, src)
        fresh = fresh.reshape(len(moved), 2 * self.m, self.mc)
        for row, j in enumerate(moved):
            self.win[j] = fresh[row]
        self.u = t1


def _check_windows(engine: _KaryEngine, last: np.ndarray, kind: str, what: str) -> None:
    """Refuse loaded blocks that no counter at step ``u`` holds: a window still centred on 0
    has nothing before its centre (those blocks lie at positions ≤ 0: no data, no noise), and
    the latest release (``what``) is the signed sum of the blocks in use at ``u``."""
    for j in range(engine.h):
        if engine.centre(j, engine.u) == 0 and engine.win[j, : engine.m].any():
            raise SerializationError(
                f"{kind} blob array 'blocks' holds level-{j} blocks before step 1, which no "
                f"counter at header field 't' = {engine.u} has"
            )
    if not np.array_equal(engine.release(), last):
        raise SerializationError(
            f"{kind} blob {what} is not the release of the stored blocks at step {engine.u}"
        )


class KaryTreeCounter(_Counter):
    """Continual counter on the ``k``-ary tree with negative digits (pure ε-DP; Andersson,
    Pagh and Torkamani, arXiv 2408.07021).

    Saved state: **trusted** (``STATE_PRIVACY = "trusted"``): the blocks in use, each its noise
    plus its data so far (see **State** below).

    Parameters
    ----------
    epsilon : float
        Pure ε-DP over all steps (integer Laplace noise).
    horizon : int
        ``T``: steps ``1 … T`` (at most ``2**55``). The tree has ``h`` levels, the fewest with
        ``(k^h − 1)/2 ≥ T`` (:func:`karytree_levels`).
    k : int
        Branching factor, odd, ``3 ≤ k ≤ 63`` (balanced digits need an odd base). Default 19:
        the paper's choice; it also minimises the asymptotic mean variance
        ``(1 − 1/k²)·k/(2 ln³k)·ln³T/ε²`` over odd ``k``.
    sensitivity, rng
        As for :class:`~sketchsyn.counters.tree.BinaryMechanism` (default 1 and the OS CSPRNG).

    Notes
    -----
    **Mechanism.** Level ``j`` of the tree partitions the steps into aligned blocks
    ``(a, a + k^j]``; each block gets ``Lap_Z(sensitivity·h/ε)``. Write ``t = Σ_j b_j k^j``
    in balanced base ``k`` and let ``t_j`` be the multiple of ``k^j`` nearest to ``t``: the
    release is ``Σ_j ±`` (the noisy sums of the ``|b_j|`` level-``j`` blocks between ``t_{j+1}``
    and ``t_j``), added when ``b_j > 0``, subtracted when ``b_j < 0``. These signed blocks sum
    to the indicator of ``(0, t]`` on *every* position, so the release is unbiased. A block
    that reaches past ``t`` enters with its partial sum (its noise, drawn when its window
    opens, plus its data so far): its future part cancels exactly in the signed sum, so the
    release equals the same signed sum of the **complete** noisy blocks.

    **Privacy.** Every step lies in exactly one block per level, so the vector of all block
    sums changes by at most ``sensitivity·h`` in ℓ1 between neighbouring streams; with
    ``Lap_Z(sensitivity·h/ε)`` on each block that vector is ε-DP, and all releases (every
    ``t``) are a post-processing of it (previous paragraph): ε-DP for the whole stream.

    **Variance** at ``t``: ``Σ_j |b_j(t)|·v`` with ``v`` the variance of
    ``Lap_Z(sensitivity·h/ε)`` (:meth:`variance`). At most ``h·m`` blocks, ``m = (k−1)/2``;
    ``(k² − 1)/(4k)`` per level on average.

    **State.** Per level, the ``2m`` blocks around the current centre (the middle block of
    each parent is never used): ``(h, 2m)`` int64 partial sums, each a block's noise plus its
    data so far. That is a **trusted** state: a blob shipped at step ``t0`` and the release
    that later uses the completed block differ by the exact count of the steps in between, so
    the blobs say ``state == "trusted"`` in their header; keep them with the curator.
    ``nbytes = 8·(k − 1)·h + 48`` (the blocks, the last release, ``t`` and parameters).
    About one noise draw per step (``2m`` per window, a level-``j`` window every ``k^{j+1}``
    steps).

    **skip(s)** costs ``O(h)`` draws: only the windows in use at the end of the skip are
    touched (a window that opens and closes inside the skip holds noise no later release
    reads), so every later release has the law it would have after ``s`` calls of
    ``update(0)``.

    Releases are int64 (sums of integer noisy values). A loaded copy must not continue a
    stream its original continues too (both would release the same noise at different steps).

    Examples
    --------
    >>> c = KaryTreeCounter(1.0, 2**20, rng=3)
    >>> out = c.update_many(np.ones(1000, dtype=np.int64))
    >>> bool(abs(int(out[-1]) - 1000) < 300)
    True
    >>> c.skip(10**6); c.t
    1001000
    >>> c.levels, c.nbytes
    (5, 768)
    """

    _kind = "KaryTreeCounter"

    def __init__(
        self,
        epsilon: float,
        horizon: int,
        *,
        k: int = 19,
        sensitivity: int = 1,
        rng: RNGLike = None,
    ) -> None:
        name = type(self).__name__
        _, self._epsilon = _budget(epsilon, None, name)
        self._horizon = check_int(horizon, "horizon", name, 1, _MAX_HORIZON)
        self._k = check_int(k, "k", name, 3, _MAX_K)
        if self._k % 2 == 0:
            raise ParameterError(
                f"The 'k' parameter of {name} must be odd (balanced digits). Got {k!r} instead."
            )
        self._sensitivity = check_int(sensitivity, "sensitivity", name, minimum=1, maximum=2**30)
        self._levels = karytree_levels(self._horizon, self._k)
        param = Fraction(self._sensitivity) * self._levels / Fraction(self._epsilon)
        self._param = _check_param(param, "scale", name)
        self._src = as_source(rng)
        self._lineage = Lineage.new(self._src, self._kind, self._params())
        self._frozen = False
        self._last: Any = 0
        self._engine = _KaryEngine(self._k, self._levels, self._param, self._src, self._size())

    def _size(self) -> int:
        """Counters stepped together (1; :class:`~sketchsyn.counters.karybank.KaryTreeBank`
        sets more)."""
        return 1

    # -------------------------------------------------------------- parameters
    def _params(self) -> dict:
        return {
            "epsilon": self._epsilon,
            "horizon": self._horizon,
            "k": self._k,
            "sensitivity": self._sensitivity,
        }

    k = ReadOnly[int]("Branching factor (odd).")
    levels = ReadOnly[int](
        "``h``: levels of the tree; each block's noise is ``Lap_Z(sensitivity·h/ε)``."
    )

    @property
    def scale(self) -> Fraction:
        """The exact noise scale ``sensitivity·h/ε`` of every block."""
        return self._param

    @property
    def t(self) -> int:
        """Steps taken."""
        return self._engine.u

    @property
    def nbytes(self) -> int:
        """``8·(k − 1)·h + 48`` bytes: ``(h, k − 1)`` int64 noisy blocks plus scalars."""
        return 8 * (self._k - 1) * self._levels + 48

    def variance(self, t: int) -> float:
        """Exact variance of the release at step ``t`` (it is unbiased):
        ``Σ_j |b_j(t)|·Var(Lap_Z(sensitivity·h/ε))``, ``b`` the balanced digits of ``t``.

        >>> c = KaryTreeCounter(1.0, 40, k=3, rng=0)   # 4 levels: Lap_Z(4) per block
        >>> round(c.variance(5) / c.variance(1), 6)     # 5 = 9 − 3 − 1: three blocks
        3.0
        """
        t = check_int(t, "t", f"{self._kind}.variance", 1, self._horizon)
        blocks = int(np.abs(balanced_digits(t, self._k, self._levels)).sum())
        return blocks * _noise_variance("laplace", self._param)

    # -------------------------------------------------------------- steps
    def update_many(self, xs: object) -> np.ndarray:
        """Advance ``len(xs)`` steps and return every step's released count (int64).

        >>> KaryTreeCounter(2.0, 100, k=5, rng=5).update_many([1, 1, 0]).shape
        (3,)
        """
        self._check_writable()
        name = type(self).__name__
        steps = _as_steps(xs, name)
        n = steps.size
        self._room(n)
        _check_total(steps, self._engine.mass() + abs(self._last), name)
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        out = np.empty(n, dtype=np.int64)
        for lo in range(0, n, _CHUNK):  # bounded memory; the draws do not depend on the cuts
            part = steps[lo : lo + _CHUNK]
            cum = np.cumsum(part).reshape(-1, 1)
            out[lo : lo + part.size] = self._engine.advance(cum, self._param, self._src)[:, 0]
        self._last = int(out[-1])
        return out

    def _room(self, n: int) -> None:
        if self._engine.u + n > self._horizon:
            raise InputError(
                f"xs: {n} more steps would pass the horizon {self._horizon} "
                f"(t = {self._engine.u}) ({type(self).__name__})"
            )

    def skip(self, s: int, releases: bool = False) -> np.ndarray | None:
        """Advance ``s`` steps of value 0 with ``O(h)`` draws (``h`` = :attr:`levels`).

        Only each level's window in use at the end is touched; it gets fresh noise if the
        window moved. ``releases=True`` returns the ``s`` skipped releases instead (``O(s)``:
        it is ``update_many(zeros(s))``).

        >>> c = KaryTreeCounter(1.0, 2**40, rng=0)
        >>> c.skip(10**12); c.t
        1000000000000
        """
        self._check_writable()
        s = _check_s(s, type(self).__name__)
        if releases:
            return self.update_many(np.zeros(s, dtype=np.int64))
        self._room(s)
        if s == 0:
            return None
        self._engine.skip(s, self._param, self._src)
        self._last = int(self._engine.release()[0])
        return None

    # -------------------------------------------------------------- bytes
    def _state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Parameters, lineage and the blocks (noise plus data so far: **trusted**).

        >>> c = KaryTreeCounter(1.0, 100, k=5, rng=1); _ = c.update_many([1, 0, 1])
        >>> KaryTreeCounter.from_bytes(c.to_bytes()).query() == c.query()
        True
        """
        meta: dict[str, Any] = {**self._params(), "t": self._engine.u, **self._common_meta()}
        return meta, {"blocks": self._engine.win[:, :, 0].copy()}

    @classmethod
    def _load_state(
        cls, fields: MetaReader, arrays: Arrays, version: int, blob: bytes, rng: Any
    ) -> KaryTreeCounter:
        eps, horizon, k, sensitivity, t, levels = _read_tree_fields(fields, cls._kind)
        blocks = _int_array(fields, arrays, "blocks", (levels, k - 1))
        obj = cls(eps, horizon, k=k, sensitivity=sensitivity, rng=rng)
        obj._restore_common(fields)
        obj._engine.win[:, :, 0] = blocks
        obj._engine.u = t
        _check_windows(obj._engine, np.array([obj._last]), cls._kind, "header field 'last'")
        return obj

    def __repr__(self) -> str:
        return (
            f"KaryTreeCounter(epsilon={self._epsilon}, horizon={self._horizon}, k={self._k}, "
            f"sensitivity={self._sensitivity}, t={self._engine.u})"
        )
