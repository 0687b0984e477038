"""Online synthetic data over an endless stream (He, Vershynin and Zhu, Algorithm 1).

One record arrives per time step, forever. At every step ``t`` the synthesizer can release
synthetic data of exactly ``t`` points, and the ε guarantee covers **all** releases of the whole
infinite stream together.

The dynamic partition (Algorithm 1). Level ``j`` of the domain's binary hierarchy (the Morton
prefixes of :meth:`Domain.encode`) exists from step ``t_j = ceil(2^j/ε)``; the depth at step
``t`` is ``r(t) = floor(log2(ε t))`` (0 while ``ε t < 2``), at most ``domain.max_depth`` and
60. Every cell ``θ`` of level ``j ≥ 1`` runs an inhomogeneous sparse counter
(:class:`sketchsyn.counters.inhomogeneous.InhomogeneousSparseCounter`, Algorithm 3) over the Boolean
stream ``1{x_t ∈ Ω_θ}`` with budgets ``ε_{j,r}`` (start level ``j`` for ``d ≥ 2``: records before
``t_j`` are ignored; start level 0 for ``d = 1``: the history is replayed into each new cell). The
root's count is ``t`` (public: one record per step), so it needs no noise.

Budgets (beyond the paper, same guarantee). The paper's budgets, (4.1) for ``d ≥ 2`` and (5.1)
for ``d = 1``, leave part of a path's ``ε/2`` unspent (in ``d = 1`` about 61%: the sum (5.1) runs
over ``3ε/(π²(j+1)²)`` where the proof intends ``3ε/(π² j²)``). The default ``budgets="full"``
keeps their shapes and spends exactly ``ε/2`` per path (:mod:`sketchsyn.synth.online.budget`
states the budgets and proves the bound); ``budgets="paper"`` runs (4.1) / (5.1) as printed.

Release (beyond the paper, post-processing only: :mod:`sketchsyn.synth.online.release`). Every
cell's counter is read at step ``t``; each level's counts are scaled to the whole stream (a level
that started late has seen fewer records) and combined bottom-up with the sum of their children by
inverse variances (Hay, Rastogi, Miklau and Suciu's least squares, the variances from the public
noise scales); the root's ``t`` is then split top-down in integers, in proportion to the combined
children, down to the depth where a cell's count is at least its children's noise (a cell
stops there and its points are uniform in it). The release has total ``t``: exactly ``t``
synthetic points (``docs/online.md`` compares it with the paper's release on a real stream).

Cost (beyond the paper, which steps every counter at every step: ``O(ε t log t)`` per record).
The ``2**j`` cells of level ``j`` are one
:class:`~sketchsyn.counters.sparsebank.InhomogeneousSparseBank` (their counters share ε,
budgets and start level): a batch costs one vectorised call per level. A record at step ``t``
lies in one cell per level, so only the ``r(t)`` counters whose stream
holds a 1 do work; every other counter stays behind on its own clock and catches up in ``O(log)``
draws (the number of idle checks before its noisy threshold trips is geometric) when it is next
touched or read by a release, a save or a copy. A time level that ends closes every counter of a
bank at once (one vectorised noise draw per cell). ``update_many`` encodes the batch once and
hands each level its records' cells. State: ``O(ε t)`` cells for ``d ≥ 2`` (the paper's; 64
bytes per cell, ``nbytes`` reports it). For ``d = 1`` the history must be replayed into the cells
of each new level, so the synthesizer also keeps one ``uint64`` code per record (``8 t`` bytes)
and, when level ``j`` starts, replays the ``t_j`` past records into its bank (``O(t_j)``
vectorised work, ``O(log t)`` per record amortised).

Privacy: pure ε-DP for the whole sequence of releases, event level, **replace one record**
(neighbouring streams differ in the record of one step; ``t`` is public). A record at step ``t``
is charged ``ε_{j, r(t)}`` by the one cell of each level ``j`` that counts it (Lemma 3.3);
:meth:`OnlineSynthesizer.path_budget` returns that sum along the record's path, at most ``ε/2``
(exactly ``ε/2`` with the full budgets once the path has all its levels); a replaced record
changes two paths, hence ε. The release reads only the counters' outputs. With the domain's
``"drop"`` policy a dropped row is not a step (the guarantee covers the stream of accepted
records and treats the number of dropped rows as public); use ``"clip"`` to keep one step per
input row. Public: the domain, ε, ``t`` and the partition schedule.

Trusted curator's state: the counters hold **exact running counts** (the segment and level counts
of sparse counting) and, for ``d = 1``, the exact history. The object, its snapshots and its bytes
must be kept like the raw data; only releases (``release()``, ``synthetic()``, ``query()``) are
private. Every step is a release by design, so there is no release-once guard; a saved or copied
state must not be continued next to its original (two continuations would draw two independent
noise sequences for the same stream). Copies are caught up to the current step before they are
made, so a copy released at the same step gives the same release as its original.

>>> import numpy as np
>>> from sketchsyn import Box, OnlineSynthesizer
>>> syn = OnlineSynthesizer(Box.unit(2), epsilon=1.0, rng=0)
>>> syn.update_many(np.random.default_rng(1).random((300, 2)))
>>> syn.t, syn.depth
(300, 8)
>>> syn.synthetic(rng=2).shape
(300, 2)
>>> syn.path_budget() <= syn.epsilon / 2
True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from fractions import Fraction
from typing import Any

import numpy as np

from ... import kernels
from ...attributes import ReadOnly
from ...errors import (
    InputError,
    ParameterError,
    ReleasedError,
    SerializationError,
    check_choice,
    check_domain,
    check_epsilon,
)
from ...io.serial import Arrays, MetaReader
from ...io.stream import consume
from ...io.summary import Summary
from ...privacy.lineage import Lineage, UsageGuard
from ...privacy.rng import RandomSource, RNGLike, as_source
from ..distribution import PrivateDistribution
from .budget import BUDGET_SCHEMES, full_budgets
from .release import adaptive_leaves, combine_levels, level_noise

__all__ = ["OnlineSynthesizer", "depth_at", "level_start"]

_KIND = "OnlineSynthesizer"
_U64 = np.uint64
_HEADER_BYTES = 64
# Deepest level of the partition: the counters take start levels up to 60; the depth reaches it
# only when ε t ≥ 2^60 (and a domain with fewer levels stops at its max_depth).
_MAX_LEVEL = 60
# The largest step a saved state may claim (int64 clocks and codes stay exact below it).
_MAX_T = 2**62


def level_start(epsilon: float | Fraction, j: int) -> int:
    """``t_j = ceil(2^j / ε)``: the step at which level ``j`` of the partition appears.

    Computed with the exact rational value of ``epsilon`` (no float rounding).

    >>> level_start(1.0, 10), level_start(0.5, 0), level_start(3.0, 2)
    (1024, 2, 2)
    """
    e = Fraction(epsilon)
    return -((-(2**j) * e.denominator) // e.numerator)


def depth_at(epsilon: float | Fraction, t: int) -> int:
    """``r(t) = floor(log2(ε t))``, the depth of the partition at step ``t`` (0 while ``ε t < 2``).

    The largest ``j`` with ``t_j ≤ t``, exact in rationals.

    >>> depth_at(1.0, 1023), depth_at(1.0, 1024), depth_at(0.1, 5)
    (9, 10, 0)
    """
    e = Fraction(epsilon)
    q = (int(t) * e.numerator) // e.denominator  # floor(ε t); 2^j <= ε t  <=>  2^j <= floor(ε t)
    return max(q.bit_length() - 1, 0)


_COUNTERS: Any = None
_SPARSEBANK: Any = None


def _counters_module() -> Any:
    global _COUNTERS
    if _COUNTERS is None:
        from ... import counters

        _COUNTERS = counters
    return _COUNTERS


def _sparsebank_module() -> Any:
    global _SPARSEBANK
    if _SPARSEBANK is None:
        from ... import counters

        _SPARSEBANK = counters
    return _SPARSEBANK


class _LevelSources:
    """``source.spawn(count)``, each child made when first asked for (a level's bank is made
    when the level starts): the same streams, without ``count`` generators held from the start
    (a numpy generator costs about 0.9 KB; a synthesizer has up to 61 levels).

    A seeded child ``j`` is numpy's ``j``-th spawned child: a generator of the parent's bit
    generator type on ``SeedSequence(entropy, spawn_key=parent_key + (first + j,))``, which is
    how ``Generator.spawn`` makes it; the parent's own count of spawned children moves on by
    ``count`` as with ``spawn``. The OS CSPRNG's children hold no state and are made at once.

    >>> from sketchsyn.privacy.rng import as_source
    >>> lazy, eager = _LevelSources(as_source(5), 4), as_source(5).spawn(4)
    >>> bool((lazy[3].uint64(4) == eager[3].uint64(4)).all())
    True
    """

    __slots__ = ("_bits", "_children", "_first", "_seq")

    def __init__(self, source: RandomSource, count: int) -> None:
        gen = source._gen
        seq = None if gen is None else gen.bit_generator.seed_seq
        self._children: list[RandomSource] | None = None
        if not isinstance(seq, np.random.SeedSequence):
            self._children = source.spawn(count)  # the OS CSPRNG (or numpy's own error)
            return
        self._seq, self._bits, self._first = seq, type(gen.bit_generator), seq.n_children_spawned
        seq.spawn(count)  # the parent's count moves on as with source.spawn(count)

    def __getitem__(self, j: int) -> RandomSource:
        if self._children is not None:
            return self._children[j]
        seq = self._seq
        child = np.random.SeedSequence(
            seq.entropy, spawn_key=(*seq.spawn_key, self._first + j), pool_size=seq.pool_size
        )
        return RandomSource(np.random.Generator(self._bits(child)))


class OnlineSynthesizer(Summary):
    """Private synthetic data at every step of an endless stream (He, Vershynin and Zhu, Algorithm
    1).

    Saved state: **trusted** (``STATE_PRIVACY = "trusted"``): the counters' exact running
    counts (and, for ``d = 1``, every record's code); only releases are private.

    Parameters
    ----------
    domain : Box or BitDomain
        Public domain; its ``encode`` gives each record its Morton code, its out-of-bounds
        policy (``"raise"``, ``"clip"``, ``"drop"``) applies as for PrivHP.
    epsilon : float
        Total budget ε > 0 of the whole infinite sequence of releases (pure ε-DP, replace one
        record). It also sets the partition schedule ``t_j = ceil(2^j/ε)``.
    budgets : {"full", "paper"}
        The cells' budgets ``ε_{j,r}``: ``"full"`` (default) spends exactly ``ε/2`` along every
        record's path (:func:`~sketchsyn.synth.online.budget.full_budgets`); ``"paper"`` is He,
        Vershynin and Zhu's (4.1) / (5.1), which leave part of it unspent. Both are ε-DP.
    rng : None, int, SeedSequence or Generator
        Noise randomness; ``None`` (default) is the OS CSPRNG. A seed makes every cell's noise
        reproducible (the cells of one level draw from one stream, in the order they are made:
        the same seed, data and batches give the same releases) and is **not private against
        anyone who knows it**.

    Attributes
    ----------
    t : int
        Records seen (the current step).
    depth : int
        ``r(t)``, the depth of the partition (and of the releases) at step ``t``.
    """

    #: The bank class each level runs; its constructor takes
    #: ``(size, epsilon, budgets, start_level, rng=...)``, and it takes a level's records with
    #: ``_update_steps(until, cells, times)`` (None:
    #: :class:`sketchsyn.counters.sparsebank.InhomogeneousSparseBank`).
    _bank_class: Any = None

    #: The release's adaptive depth: a cell is split while its count is at least ``_TAU`` times
    #: its children's noise standard deviation (0: always split, down to ``r(t)``).
    _TAU = 1.0

    STATE_PRIVACY = "trusted"
    FORMAT_VERSION = 3
    READS = (2, 3)
    VERSION_NOTE = (
        "version 1 held one counter per cell, before the banks; version 2 (read as "
        "budgets='paper') had no budgets field"
    )

    def __init__(
        self, domain: Any, epsilon: float, *, budgets: str = "full", rng: RNGLike = None
    ) -> None:
        check_domain(domain, _KIND)
        self._domain = domain
        self._epsilon = check_epsilon(epsilon, _KIND)
        self._scheme = check_choice(budgets, "budgets", _KIND, BUDGET_SCHEMES)
        self._eps = Fraction(self._epsilon)
        self._d = int(domain.d)
        self._H = min(int(domain.max_depth), _MAX_LEVEL)
        self._starts = [level_start(self._eps, j) for j in range(self._H + 2)]
        self._source = as_source(rng)
        self._lineage = Lineage.new(self._source, _KIND, self._params())
        self._init_state()
        # One stream per level; the cells of a level draw from it in the order they are made.
        self._level_sources = _LevelSources(self._source, self._H + 1)

    def _init_state(self) -> None:
        self._t = 0
        self._n_dropped = 0
        self._banks: list[Any] = [None] * (self._H + 1)
        self._budgets: dict[int, Callable[[int], float]] = {}
        self._made = 0  # deepest level whose start (d = 1: history replay) has been handled
        self._history = np.empty(0, dtype=_U64)
        self._n_history = 0
        self._frozen = False
        self._release: tuple[int, PrivateDistribution, np.ndarray] | None = None
        self._usage = UsageGuard()

    # ------------------------------------------------------------------ read-only parameters
    domain = ReadOnly[Any]("The public domain.")
    epsilon = ReadOnly[float](
        "Budget ε of the whole sequence of releases (replace-one neighbours)."
    )
    t = ReadOnly[int]("The current step: the number of records taken so far.")

    @property
    def depth(self) -> int:
        """``r(t)``: depth of the partition at the current step."""
        return self._depth_at(self._t)

    @property
    def n_cells(self) -> int:
        """Cells with a counter: the ``2**j`` cells of every level ``j`` that has started."""
        return sum(b.size for b in self._banks if b is not None)

    n_dropped = ReadOnly[int](
        """Rows removed by the domain's ``"drop"`` policy (exact; not private)."""
    )

    @property
    def budgets(self) -> str:
        """The budget scheme: ``"full"`` or ``"paper"`` (see the ``budgets`` parameter)."""
        return self._scheme

    lineage = ReadOnly[Lineage](
        "Identity of this object's noise (shared by its snapshots and loaded bytes)."
    )

    @property
    def nbytes(self) -> int:
        """State size: ``Σ bank.nbytes + 8·t (d = 1 history) + 64``.

        A bank holds 64 bytes per cell (see
        :class:`~sketchsyn.counters.sparsebank.InhomogeneousSparseBank`) and the level ``j``
        bank has ``2**j`` cells, so the state grows like ``ε t`` cells
        (``d ≥ 2``, the paper's partition); for ``d = 1`` the replayed history adds 8 bytes per
        record.
        """
        total = _HEADER_BYTES + 8 * self._n_history
        return total + sum(int(b.nbytes) for b in self._banks if b is not None)

    def _depth_at(self, t: int) -> int:
        return min(depth_at(self._eps, t), self._H)

    @staticmethod
    def level_start(epsilon: float, j: int) -> int:
        """``t_j = ceil(2^j/ε)`` (see :func:`level_start`)."""
        return level_start(epsilon, j)

    # ------------------------------------------------------------------ privacy accounting
    def _budget(self, j: int) -> Callable[[int], float]:
        fn = self._budgets.get(j)
        if fn is None:
            if self._scheme == "full":
                fn = full_budgets(self._epsilon, self._d, j, self._H)
            else:
                fn = _counters_module().online_budgets(self._epsilon, self._d, j)
            self._budgets[j] = fn
        return fn

    def path_budget(self, t: int | None = None) -> float:
        """The budget charged to the record of step ``t`` along its path of cells (default: now).

        A record at step ``t`` (time level ``r = r(t)``) is counted by one cell per level and
        costs ``ε_{j,r}`` in the level-``j`` cell (Lemma 3.3): the sum runs over ``j = 1 … r``
        for ``d ≥ 2`` (deeper cells start later and ignore it) and over every level the domain
        has for ``d = 1`` (new cells replay it). Records before ``t_0 = ceil(1/ε)`` reach no
        counter. Algorithm 1 is ε-DP for replace-one neighbours because this is at most ``ε/2``
        for every ``t`` (two paths change). With ``budgets="full"`` it is ``ε/2`` (rounded
        down) from ``t_0`` on (``d = 1``) or from ``t_1`` on (``d ≥ 2``); the paper's budgets
        give ``ε(1/2 − 3/π²) ≈ 0.196 ε`` for ``d = 1``.

        >>> from sketchsyn import Box
        >>> syn = OnlineSynthesizer(Box.unit(2), 1.0, rng=0)
        >>> 0 < syn.path_budget(10**6) <= 0.5
        True
        """
        t = self._t if t is None else int(t)
        if t < 0:
            raise ParameterError(
                f"The 't' parameter of {_KIND}.path_budget must be an int >= 0. Got {t} instead."
            )
        if t < self._starts[0]:
            return 0.0
        r = depth_at(self._eps, t)
        top = min(r, self._H) if self._d >= 2 else self._H
        return float(math.fsum(self._budget(j)(r) for j in range(1, top + 1)))

    # ------------------------------------------------------------------ the banks of cells
    def _bank(self, j: int) -> Any:
        """The bank of level ``j``'s ``2**j`` cells, made when level ``j`` starts."""
        bank = self._banks[j]
        if bank is None:
            cls = self._bank_class or _sparsebank_module().InhomogeneousSparseBank
            start = j if self._d >= 2 else 0
            bank = cls(2**j, self._epsilon, self._budget(j), start, rng=self._level_sources[j])
            self._banks[j] = bank
        return bank

    def _touch(self, j: int, until: int, times: np.ndarray, prefixes: np.ndarray) -> None:
        """Level ``j``'s cells to step ``until``: record at step ``times[i]`` is in cell
        ``prefixes[i]`` (one 1 per record; idle cells only move the bank's clock)."""
        # The bank's path for one record per step with cells in range (unchecked).
        self._bank(j)._update_steps(until, prefixes.view(np.int64), times)

    def _start_levels(self, r: int) -> None:
        """Handle the start of levels ``made+1 … r``: for d = 1 replay the history into them."""
        while self._made < r:
            j = self._made + 1
            bank = self._bank(j)
            if self._d == 1 and self._n_history:
                # Steps before t_0 are ignored by every counter (Algorithm 3's first time level).
                first = self._starts[0]
                hist = self._history[first - 1 : self._n_history]
                times = np.arange(first, self._n_history + 1, dtype=np.int64)
                self._touch(j, self._n_history, times, hist >> _U64(self._H - j))
            elif self._t > bank.t:
                bank.skip(self._t - bank.t)
            self._made = j

    def _catch_up(self) -> None:
        """Bring every level 1 … r(t) to the current step (the banks draw their idle checks)."""
        self._start_levels(self.depth)
        for j in range(1, self.depth + 1):
            bank = self._bank(j)
            if self._t > bank.t:
                bank.skip(self._t - bank.t)

    # ------------------------------------------------------------------ updates
    def _check_open(self) -> None:
        if self._frozen:
            raise ReleasedError(f"this {_KIND} is a snapshot; snapshots are read-only")

    def update(self, x: Any) -> None:
        """Take one record (one time step)."""
        arr = np.asarray(x)
        if self._d == 1 and arr.ndim == 0:
            arr = arr.reshape(1, 1)
        elif arr.ndim == 1 and (self._d > 1 or arr.shape[0] == 1):
            arr = arr.reshape(1, -1)
        else:
            raise InputError(
                f"update(x) takes one point of dimension {self._d}; got an array of shape "
                f"{arr.shape}. Use update_many for batches."
            )
        self.update_many(arr)

    def update_many(self, X: Any) -> None:
        """Take a batch of records, one step per row, in order.

        The batch is checked whole first (a bad row refuses it, state unchanged) and encoded
        once; its records are then grouped per cell, level by level, and each touched counter
        takes its steps in order (skipping the idle steps in one call). Work: ``O(r · log t)``
        per record.
        """
        self._check_open()
        with self._usage.enter(_KIND):
            codes, dropped = self._domain.encode(X, self._H, return_dropped=True)
            codes = np.asarray(codes, dtype=_U64)
            self._advance(codes)
            self._n_dropped += int(dropped)

    def _advance(self, codes: np.ndarray) -> None:
        """The batch time level by time level (the levels that start inside it are started
        first, :meth:`_start_levels`): each level ``j``'s bank takes the time level's records
        in one call. With the compiled kernels (and the default banks), level ``j``'s records
        sorted by (cell, step) are level ``j − 1``'s, each cell's split in two
        (:func:`sketchsyn.kernels._partition.by_next_bit`: sequential passes, no sort by cell
        in the banks), and each bank takes them in the order its own sort by cell would give
        them; otherwise each bank takes them in step order (:meth:`_touch`). The draws are the
        same either way."""
        if codes.size == 0:
            return
        compiled = self._bank_class is None and kernels.enabled()
        t0 = self._t
        cur, end_all = t0 + 1, t0 + codes.size
        while cur <= end_all:
            r = self._depth_at(cur)
            end = min(end_all, self._starts[r + 1] - 1) if r < self._H else end_all
            self._start_levels(r)
            seg = codes[cur - t0 - 1 : end - t0]
            now, times = seg, np.arange(cur, end + 1, dtype=np.int64)
            for j in range(1, r + 1):
                if not compiled:
                    self._touch(j, end, times, seg >> _U64(self._H - j))
                    continue
                out = np.empty_like(now), np.empty_like(times), np.empty(now.size, np.int64)
                kernels.partition.by_next_bit(now, times, self._H - j, *out)
                now, times, cells = out
                self._bank(j)._update_sorted(end, cells, times, cur)
            self._t = end
            if self._d == 1:
                self._append_history(seg)
            cur = end + 1
        self._release = None

    def _append_history(self, seg: np.ndarray) -> None:
        need = self._n_history + seg.size
        if need > self._history.size:
            grown = np.empty(max(need, 2 * self._history.size, 1024), dtype=_U64)
            grown[: self._n_history] = self._history[: self._n_history]
            self._history = grown
        self._history[self._n_history : need] = seg
        self._n_history = need

    def consume(self, iterable: Iterable[Any], batch_size: int = 65536) -> int:
        """Stream any iterable of rows (or of 2-D arrays) through ``update_many`` in batches.

        Each batch is atomic; returns the number of rows read.
        """
        self._check_open()
        return consume(self.update_many, iterable, batch_size, self._d)

    # ------------------------------------------------------------------ release
    def noisy_levels(self) -> list[np.ndarray]:
        """The released counts before consistency: ``[t]`` then each level's noisy counts.

        Level ``j``'s array (length ``2**j``) holds every cell's counter output at step ``t``.
        Post-processing of the counters' outputs (no further budget).
        """
        with self._usage.enter(_KIND):
            self._catch_up()
            levels = [np.array([self._t], dtype=np.int64)]
            for j in range(1, self.depth + 1):
                levels.append(np.asarray(self._bank(j).query(), dtype=np.int64))
        return levels

    def _leaf_counts(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The release's leaves ``(levels, prefixes, counts)``: post-processing of
        :meth:`noisy_levels` (see :mod:`sketchsyn.synth.online.release`)."""
        noisy = self.noisy_levels()
        t, r = self._t, len(noisy) - 1
        estimates, variances, stop_sd = [np.array([float(t)])], [0.0], [0.0]
        for j in range(1, r + 1):
            start = j if self._d >= 2 else 0
            seen = t - self._starts[start] + 1  # steps this level's counters have counted
            scale = t / seen
            closed, current = level_noise(self._budget(j), self._eps, start, t)
            estimates.append(noisy[j].astype(np.float64) * scale)
            variances.append(current * scale * scale)
            stop_sd.append(scale * math.sqrt(closed))
        combined, _ = combine_levels(estimates, variances)
        return adaptive_leaves(t, combined, stop_sd, self._TAU)

    def _released(self) -> tuple[PrivateDistribution, tuple[np.ndarray, ...]]:
        cached = self._release
        if cached is not None and cached[0] == self._t:
            return cached[1], cached[2]
        leaves = self._leaf_counts()
        lv, px, ct = leaves
        dist = PrivateDistribution(
            self._domain,
            lv,
            px,
            ct.astype(np.float64),
            epsilon=self._epsilon,
            mechanism=_KIND,
            params={
                "epsilon": self._epsilon,
                "t": self._t,
                "depth": self.depth,
                "budgets": self._scheme,
            },
        )
        self._release = (self._t, dist, leaves)
        return dist, leaves

    def release(self) -> PrivateDistribution:
        """The release at the current step: a :class:`PrivateDistribution` of total ``t``.

        Every cell's counter is read at step ``t``; each level's counts are scaled to the whole
        stream and combined with their children's by inverse variances (least squares); the
        root's ``t`` is split top-down in integers, in proportion to the combined children,
        while a cell's count is at least its children's noise (adaptive depth, at most
        ``r(t)``). Post-processing only. Callable at every step, any number of times, with no
        further budget (each step's release is part of the guaranteed sequence; calling again
        at the same step returns the same object).
        """
        return self._released()[0]

    def synthetic(self, rng: RNGLike = None) -> np.ndarray:
        """Exactly ``t`` synthetic points (He, Vershynin and Zhu's output ``Y_t``), in the domain's
        units.

        The shape is the domain's ``sample_cells`` shape: ``(t, d)`` for a Box, ``(t,)`` integer
        keys for a BitDomain. Each leaf of the release gets its integer count of points, uniform
        in the cell; ``rng`` only places the points (it is not privacy noise).
        """
        _, (lv, px, ct) = self._released()
        prefixes = np.repeat(px, ct)
        levels = np.repeat(lv, ct)
        return self._domain.sample_cells(levels, prefixes, rng=as_source(rng))

    def query(self, lower: Any, upper: Any) -> float:
        """Private count of the records so far in the box ``[lower, upper]`` (from the release)."""
        return self.release().count(lower, upper)

    # ------------------------------------------------------------------ copies and bytes
    def _params(self) -> dict[str, Any]:
        return {
            "domain": self._domain.to_dict(),
            "epsilon": self._epsilon,
            "budgets": self._scheme,
        }

    def _state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The banks' bytes (caught up to the current step first), the d = 1 history and the
        counts: **exact running counts** (keep them like the raw data). Do not continue a
        loaded copy next to its original."""
        with self._usage.enter(_KIND):
            self._catch_up()
        levels, offsets, blobs = [], [0], []
        for j in range(1, self._H + 1):
            bank = self._banks[j]
            if bank is not None:
                blob = bank.to_bytes()
                levels.append(j)
                blobs.append(blob)
                offsets.append(offsets[-1] + len(blob))
        meta = self._params() | {
            "t": self._t,
            "n_dropped": self._n_dropped,
            "made": self._made,
            "frozen": self._frozen,
            "lineage": self._lineage.to_meta(),
            "bank": None if self._bank_class is None else self._bank_class.__name__,
        }
        arrays = {
            "levels": np.asarray(levels, dtype=np.int64),
            "offsets": np.asarray(offsets, dtype=np.int64),
            "blob": np.frombuffer(b"".join(blobs), dtype=np.uint8),
            "history": self._history[: self._n_history],
        }
        return meta, arrays

    @classmethod
    def _from_state(
        cls, fields: MetaReader, arrays: Arrays, version: int, blob: bytes, rng: Any
    ) -> OnlineSynthesizer:
        """Check the header and arrays, then load the banks (later noise: the OS CSPRNG).

        The levels saved must be exactly ``1 … r(t)`` (a save catches every level up), so the
        state a release reads is the one in the blob: a header cannot make it grow.
        """

        domain = fields.domain()
        epsilon = fields.epsilon("epsilon")
        t = fields.int("t", minimum=0, maximum=_MAX_T)
        n_dropped = fields.int("n_dropped", minimum=0, maximum=_MAX_T)
        frozen = fields.bool("frozen")
        # The bank class is the loading class's (a subclass may swap it); the field must say so.
        bank_name = fields.get("bank", None) if version == 2 else fields.value("bank")
        expected = None if cls._bank_class is None else cls._bank_class.__name__
        if version != 2 and bank_name != expected:
            raise SerializationError(
                f"{_KIND} blob header field 'bank' must be {expected!r} for "
                f"{cls.__name__}, got {bank_name!r}"
            )
        # Version 2 had no budgets field: its banks ran the paper's budgets.
        scheme = "paper" if version == 2 else fields.str("budgets", BUDGET_SCHEMES)
        lineage = fields.lineage()
        obj = object.__new__(cls)
        obj._scheme = scheme
        obj._domain = domain
        obj._epsilon = check_epsilon(epsilon, _KIND)
        obj._eps = Fraction(obj._epsilon)
        obj._d = int(domain.d)
        obj._H = min(int(domain.max_depth), _MAX_LEVEL)
        made = fields.int("made", minimum=0, maximum=obj._H)
        depth = min(depth_at(obj._eps, t), obj._H)
        if made != depth:
            raise SerializationError(
                f"{_KIND} blob header field 'made' must be the depth r(t) = {depth} at step "
                f"t={t} (a save catches every level up), got {made!r}"
            )
        levels = fields.array(arrays, "levels", np.int64, (made,))
        offsets = fields.array(arrays, "offsets", np.int64, (made + 1,))
        data = arrays.get("blob")
        if data is None or data.dtype != np.uint8 or data.ndim != 1:
            raise SerializationError(f"{_KIND} blob array 'blob' must be 1-D uint8 bytes")
        data = fields.array(arrays, "blob", np.uint8, data.shape)
        history = fields.array(arrays, "history", _U64, (t if obj._d == 1 else 0,))
        fields.done(arrays)
        if not np.array_equal(levels, np.arange(1, made + 1)):
            raise SerializationError(
                f"{_KIND} blob array 'levels' must be 1 … {made}, got {levels.tolist()[:8]}"
            )
        if (
            int(offsets[0]) != 0
            or int(offsets[-1]) != data.size
            or not bool(np.all(np.diff(offsets) > 0))
        ):
            raise SerializationError(f"{_KIND} blob array 'offsets' does not cut 'blob'")
        if history.size and obj._H < 64 and int(history.max()) >> obj._H:
            raise SerializationError(f"{_KIND} blob array 'history' holds codes past depth")
        obj._starts = [level_start(obj._eps, j) for j in range(obj._H + 2)]
        obj._source = as_source(None)
        obj._level_sources = _LevelSources(obj._source, obj._H + 1)
        obj._lineage = lineage
        obj._init_state()
        obj._t = t
        obj._n_dropped = n_dropped
        obj._made = made
        obj._frozen = frozen
        bank_cls = cls._bank_class or _sparsebank_module().InhomogeneousSparseBank
        raw = data.tobytes()
        for i, j in enumerate(levels.tolist()):
            with fields.inside("blob"):
                # The budgets are the synthesizer's (its scheme), not whatever a bank claims.
                bank = bank_cls.from_bytes(
                    raw[int(offsets[i]) : int(offsets[i + 1])], budgets=obj._budget(j)
                )
            start = j if obj._d >= 2 else 0
            if bank.size != 2**j or bank.start_level != start or bank.t != t:
                raise SerializationError(f"{_KIND} blob has a bad bank at level {j}")
            obj._banks[j] = bank
        obj._history = history.copy()
        obj._n_history = int(history.size)
        return obj

    def __repr__(self) -> str:
        return (
            f"OnlineSynthesizer(epsilon={self._epsilon}, d={self._d}, t={self._t}, "
            f"depth={self.depth}, cells={self.n_cells}, nbytes={self.nbytes})"
        )
