"""Continual-release PrivHP: a private release at every step, in memory that does not grow.

Holland et al. (*Private Synthetic Data Generation in Small Memory*), Appendix A: every counter
of the levels ``0 … L_k`` and every cell of every level sketch ``L_k+1 … r`` becomes a continual
counter over a public ``horizon``. The counter is a choice (``counter=``): the binary mechanism
(Chan, Shi and Song), Honaker's estimator on the same tree (*Efficient Use of Differentially
Private Binary Trees*) or the k-ary tree with negative digits (Andersson, Pagh and Torkamani,
*Improved Counting under Continual Observation with Pure Differential Privacy*), the default:
it has the lowest variance of the three (``docs/continual.md``). The counters step once per
row, or once per release **epoch** when the releases are announced (``releases=m`` or
``release_every=``): the tree then spans the epochs and the noise carries ``log m``, not
``log n``. ``release()`` combines the counter levels by least squares (Hay, Rastogi, Miklau and
Suciu, *Boosting the accuracy of differentially private histograms through consistency*), so
the root and the shallow cells are estimated from every counter level, then regrows the tree
through the sketches, pruning the children whose count is below their level's noise
(post-processing: :mod:`sketchsyn.synth.continual.release`). The noise tables are in
:mod:`sketchsyn.synth.continual.noise`.

>>> import numpy as np
>>> from sketchsyn import Box, ContinualPrivHP
>>> X = np.random.default_rng(0).beta(2, 5, size=(5_000, 2))
>>> c = ContinualPrivHP(Box.unit(2), 1.0, k=8, width=64, horizon=2**13, depth=10, rng=1)
>>> c.update_many(X[:1000])
>>> c.release().sample(3, rng=2).shape
(3, 2)
>>> c.update_many(X[1000:])
>>> c.remove_many(X[:500])
>>> c.t, c.release().sample(3, rng=2).shape
(5500, (3, 2))
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

import numpy as np

from ...attributes import ReadOnly
from ...errors import (
    InputError,
    ParameterError,
    ReleasedError,
    check_choice,
    check_domain,
    check_epsilon,
    check_int,
    check_memory,
)
from ...io.serial import Arrays, MetaReader
from ...io.stream import consume, one_row
from ...io.summary import Summary
from ...privacy import accounting
from ...privacy.lineage import Lineage, UsageGuard
from ...privacy.rng import RNGLike, as_source
from ..distribution import PrivateDistribution
from ..privhp.summary import PrivHP
from . import plan as continual_plan
from . import release as continual_release
from .hybrid import _HybridTable
from .noise import (
    _BinaryTable,
    _HonakerBank,
    _KaryTable,
    _plan,
    announced_end,
    announced_epochs,
    best_arity,
    cell_bytes,
    check_schedule,
    memory_bytes,
)
from .plan import binary_levels
from .release import PRUNE
from .state import check_mergeable, load_state, save_state

__all__ = ["ContinualPrivHP", "best_arity", "binary_levels"]

_KIND = "ContinualPrivHP"
_HEADER_BYTES = 64
# Rows given one at a time (``update``) are encoded at once and counted in groups of this many.
_PENDING = 1024
_COUNTERS = ("kary", "binary", "honaker", "hybrid")
_MAX_HONAKER_EPOCHS = 2**16
T = TypeVar("T")


class _ExactReadOnly(ReadOnly[T]):
    """A read-only attribute that returns the exact PrivHP's attribute of the same name."""

    def __get__(self, obj: object | None, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        return getattr(obj._exact, self._private[1:])  # type: ignore[attr-defined]


class ContinualPrivHP(Summary):
    """PrivHP released at every step of a stream of at most ``horizon`` events (ε-DP, event level).

    Saved state: **trusted** (``STATE_PRIVACY = "trusted"``): the bytes hold the exact running
    counts (and, with a schedule, the exact counts of the open epoch) with the noise drawn so
    far; only releases are private.

    Parameters
    ----------
    domain : Box or BitDomain
        Public domain.
    epsilon : float
        Total budget ε of all releases together, split over the levels as ``sigmas``.
    k, width, sketch_depth, depth, expected_n, sketch, seed
        As in :class:`~sketchsyn.synth.privhp.PrivHP`. ``expected_n`` defaults to ``horizon``
        (it only chooses ``depth`` when ``depth`` is not given).
    horizon : int
        Public number of steps ``T`` the stream may last (one event, an insertion or a
        deletion, per step); updates past it are refused.
    counter : {"kary", "binary", "honaker", "hybrid"}
        The continual counter in every cell. Default ``"kary"``: the most accurate late in the
        horizon per byte. It does **not** meet "released total within 50 % of t at t = 1 000
        of a 2²⁰ horizon, ε = 1" (67 of 100 seeded runs; ``"hybrid"``: 94 of 100, at 39 %
        more memory and 1.1–1.3× the variance late in the horizon: ``docs/continual.md``).
        ``"honaker"`` needs a schedule of at most 65 536 epochs (its estimates are stepped
        eagerly, once per epoch, for every cell). ``"hybrid"`` (Chan, Shi and Song's hybrid
        mechanism, :mod:`~sketchsyn.synth.continual.hybrid`): noise of ``log t``, not ``log T``.
    arity : int, optional
        Odd branching factor ``3 … 63`` of the k-ary tree (``"kary"``, ``"hybrid"``). Default
        per row: 5 (the fewest blocks per release in the binary table's memory; ``"hybrid"``:
        9, the knee of its mean variance over log-spaced steps), else the ``k`` with the lowest
        mean variance over the epochs (:func:`best_arity`).
    releases : int, optional
        ``m`` announced releases, spread evenly: epoch ``e`` closes at row ``floor(e·T/m)``.
    release_every : int, optional
        An epoch every this many steps (the last one closes at ``horizon``). At most one of
        ``releases`` and ``release_every``; without either, every step is an epoch.
    rng : None, int, SeedSequence or Generator
        Noise randomness; ``None`` (default) is the OS CSPRNG. A seed is for tests only and
        **not private against anyone who knows it**.

    Attributes
    ----------
    sigmas : ndarray
        ``σ_0 … σ_r`` (Lemma 5), summing to ``epsilon``.
    noise_scales : ndarray
        Integer Laplace scale of one block on each level: ``h/σ_l`` or ``j·h/σ_l``.

    Notes
    -----
    **Steps and epochs.** ``update_many(X)`` is ``len(X)`` steps (one insertion each),
    ``remove_many(X)`` ``len(X)`` steps (one deletion each), ``skip(n)`` ``n`` empty steps. The
    counters step once per **epoch**: every step without a schedule, else ``m`` epochs
    (``releases=m``) or ``ceil(T/R)`` epochs (``release_every=R``). A ``release()`` between two
    epoch ends is **answered from the last closed epoch**: it describes the events up to that
    epoch's last step and equals the release made there (the same noise); the events of the open
    epoch wait for its end. A release after ``t = 0`` but before the first epoch closes is
    refused, naming the row at which it closes (it would describe no rows).

    **Privacy** (pure ε-DP, event level, all releases together). Neighbouring streams differ in
    one event at one step: one insertion or one deletion added or removed (the neighbour has an
    empty step there), so an insertion followed later by the deletion of the same row are two
    events. An event changes one epoch's increment of one counter per counter level and of ``j``
    cells per sketch level, by 1 each. Each counter's epoch lies in exactly one block (p-sum) per
    level of its tree, and the counter's ``h`` levels partition the epochs, so the event changes
    ``h`` blocks of each touched cell by 1: ℓ1 sensitivity ``h`` per counter level, ``j·h`` per
    sketch level. Each block gets ``Lap_Z(h/σ_l)`` (``Lap_Z(j·h/σ_l)`` on a sketch level), with
    ``σ_l`` the per-level budgets of Lemma 5 (``privhp_allocation``, ``Σ σ_l = ε``), rounded up
    so that each level's realised budget is at most ``σ_l``: each level's blocks are
    ``σ_l``-DP and the levels compose to ε. Every release (any step, any number) is a function
    of the closed epochs' noisy blocks only: for ``"binary"`` the p-sums of ``e``'s set bits;
    for ``"kary"`` the signed blocks of ``e``'s balanced digits, whose signs sum to the
    indicator of the epochs ``1 … e``; for ``"hybrid"`` those of its segments (an event lies
    in one, in ``λ_g`` blocks of scale ``λ_g/σ_l``: module ``continual_hybrid``); for
    ``"honaker"`` the least-squares estimates of closed nodes, linear in their subtrees' noisy
    blocks; then least squares over the counter levels and the tree growth: post-processing.
    The step count ``t`` and the schedule are public.

    **Deletions.** ``remove_many`` subtracts the rows' cells, and **every deletion is applied**,
    as :class:`~sketchsyn.synth.continual.StreamingPrivTree` does: whether a call is refused,
    and where ``t`` and the schedule stand after it, never depend on the counts. (Refusing a
    deletion that the exact counts prove impossible would: ``update(x); remove(x)`` is applied
    where ``skip(1); remove(x)`` would raise, so the neighbouring streams with and without the
    insertion would be told apart by the call's outcome, outside any noise.) A deletion of a
    row that was never inserted is one deletion event like any other; the exact counts may then
    go below 0 and the release describes the net counts of the stream as given, clamped at 0
    by the consistency step. Count-Min levels keep their upper-bound estimates only under strict
    turnstile streams (net counts ≥ 0); Count Sketch levels take deletions as any signed
    update.
    """

    STATE_PRIVACY = "trusted"
    FORMAT_VERSION = 2
    READS = (1, 2)
    VERSION_NOTE = "version 1 blobs (binary counter, no schedule) still load"

    def __init__(
        self,
        domain: Any,
        epsilon: float,
        k: int,
        width: int,
        *,
        horizon: int,
        sketch_depth: int = 3,
        depth: int | None = None,
        expected_n: int | None = None,
        sketch: str = "count-min",
        seed: int = 0,
        counter: str = "kary",
        arity: int | None = None,
        releases: int | None = None,
        release_every: int | None = None,
        rng: RNGLike = None,
    ) -> None:
        owner = "ContinualPrivHP"
        self._horizon = check_int(horizon, "horizon", owner, minimum=1, maximum=2**62)
        check_domain(domain, owner)
        check_epsilon(epsilon, owner)
        check_int(k, "k", owner, minimum=1)
        check_int(width, "width", owner, minimum=1)
        check_int(sketch_depth, "sketch_depth", owner, minimum=1)
        check_int(seed, "seed", owner, minimum=0, maximum=2**32 - 1)
        if depth is not None:
            check_int(depth, "depth", owner, minimum=1, maximum=int(domain.max_depth))
        if expected_n is not None:
            check_int(expected_n, "expected_n", owner, minimum=1)
        check_choice(sketch, "sketch", owner, ("count-min", "count-sketch"))
        self._counter = check_choice(counter, "counter", owner, _COUNTERS)
        check_schedule(counter, arity, releases, release_every, self._horizon)
        self._releases, self._every = releases, release_every
        self._scheduled = releases is not None or release_every is not None
        self._epochs, self._arity, self._h = _plan(
            self._horizon, counter, arity, releases, release_every
        )
        if depth is None and expected_n is None:
            expected_n = self._horizon
        # The exact state: a raw PrivHP (no noise of its own); it encodes, hashes and counts.
        self._exact = PrivHP(
            domain,
            epsilon,
            k,
            width,
            sketch_depth,
            depth=depth,
            expected_n=expected_n,
            sketch=sketch,
            seed=seed,
            rng=0,
            raw=True,
            # Appendix A's layout: exact counters down to L_k = floor(log2 k), then sketches.
            counter_depth=min(int(k).bit_length() - 1, depth if depth is not None else 64),
            release_k=k,
        )
        ex = self._exact
        self._sigmas = ex.sigmas
        r, L = ex.depth, ex.L_k
        # Global cell index: counters in heap layout, then the sketch bank (level, row, bucket).
        self._n_tree = 2 ** (L + 1) - 1
        self._cells_per_level = ex.width * ex.sketch_depth
        n_cells = self._n_tree + self._cells_per_level * (r - L)
        self._offsets = np.array(
            [2**level - 1 for level in range(L + 1)]
            + [self._n_tree + i * self._cells_per_level for i in range(r - L)]
            + [n_cells],
            dtype=np.int64,
        )
        # One block's scale h·(1 or j)/σ_l, rounded up so that the realised budget is at most
        # σ_l exactly; a budget too small for the sampler is refused, naming epsilon.
        self._scales = np.array(
            [
                accounting.laplace_scale(
                    self._h * (1 if level <= L else ex.sketch_depth), float(sigma), owner
                )
                for level, sigma in enumerate(self._sigmas)
            ]
        )
        check_memory(
            n_cells * (self._cell_bytes() + 8 * self._scheduled),
            owner,
            f"{n_cells} cells × {self._counter} noise slots (horizon={self._horizon})",
        )
        self._source = as_source(rng)
        self._streams = self._source.spawn(r + 1)
        self._table = self._new_table(n_cells, self._streams)
        # With a schedule, the exact counts at the end of the last closed epoch.
        self._closed = np.zeros(n_cells if self._scheduled else 0, dtype=np.int64)
        self._lineage = Lineage.new(self._source, _KIND, self._params())
        self._t = 0
        self._frozen = False
        self._absorbed = False
        self._last: tuple[int, PrivateDistribution, Any] | None = None
        # Not thread-safe: a second thread entering an update or a release is refused.
        self._usage = UsageGuard()
        # Codes of single rows (``update``) not yet counted; counted before any read.
        self._pending = np.zeros(_PENDING, dtype=np.uint64)
        self._n_pending = 0

    def _cell_bytes(self) -> int:
        return 8 + cell_bytes(self._counter, self._h, self._arity)

    def _new_table(self, n_cells: int, streams: list | None) -> Any:
        if self._counter == "binary":
            return _BinaryTable(n_cells, self._h)
        if self._counter == "kary":
            return _KaryTable(n_cells, int(self._arity or 3), self._h)
        if self._counter == "hybrid":
            return _HybridTable.build(n_cells, int(self._arity or 3), self._epochs, self._exact)
        if self._epochs > _MAX_HONAKER_EPOCHS or not self._scheduled:
            raise ParameterError(
                "The 'counter' parameter of ContinualPrivHP: 'honaker' needs a schedule "
                f"(releases= or release_every=) of at most {_MAX_HONAKER_EPOCHS} epochs (a "
                "node's estimate depends on every node under it, so it is stepped eagerly). "
                f"Got {self._epochs} epochs instead."
            )
        return _HonakerBank(self._offsets, self._h, self._scales, streams)

    # ------------------------------------------------------------------ parameters
    domain = _ExactReadOnly[Any]("The public domain.")
    epsilon = _ExactReadOnly[float](
        "Total ε of all releases together (event level: one insertion or deletion)."
    )
    k = _ExactReadOnly[int]("Pruning parameter.")
    width = _ExactReadOnly[int]("Sketch width ``w``.")
    sketch_depth = _ExactReadOnly[int]("Sketch rows ``j``.")
    depth = _ExactReadOnly[int]("Depth ``r`` of the hierarchy.")
    L_k = _ExactReadOnly[int]("Deepest level with counters.")  # noqa: N815 (the paper's name)
    horizon = ReadOnly[int]("Public horizon ``T`` (steps).")
    counter = ReadOnly[str]('The counter in every cell: "kary", "binary", "honaker" or "hybrid".')
    arity = ReadOnly[int | None](
        "Branching factor of the k-ary or hybrid tree (``None`` for the binary trees)."
    )
    epochs = ReadOnly[int]("``E``: the counters' steps (``horizon`` without a schedule).")
    releases = ReadOnly[int | None]("``m`` announced releases, or ``None``.")

    @property
    def release_every(self) -> int | None:
        """Steps per epoch, or ``None``."""
        return self._every

    @property
    def epoch(self) -> int:
        """Epochs closed so far (what a release describes)."""
        return self._epoch_of(self._t)

    @property
    def binary_levels(self) -> int:
        """``floor(log2 E) + 1``: the levels of a binary tree over the ``E`` counter steps."""
        return binary_levels(self._epochs)

    @property
    def counter_levels(self) -> int:
        """``h``: the levels of the counter's tree (each event touches one block per level)."""
        return self._h

    t = ReadOnly[int]("Steps taken so far (public: every release states it).")

    @property
    def sigmas(self) -> np.ndarray:
        """Per-level budgets ``σ_0 … σ_r`` (a copy); they sum to ``epsilon``."""
        return self._sigmas.copy()

    @property
    def noise_scales(self) -> np.ndarray:
        """Scale of one block's ``Lap_Z`` noise per level: ``h/σ_l`` or ``j·h/σ_l``."""
        return self._scales.copy()

    lineage = ReadOnly[Lineage](
        "Identity of this object's noise draws (shared by its copies and saved bytes)."
    )

    @property
    def nbytes(self) -> int:
        """Exact counts, noise table, closed-epoch counts and fixed parts; fixed at construction
        (:meth:`memory_bytes`). ``release()`` works in ``O(k·r·j)`` further words."""
        ex = self._exact
        return int(
            ex._tree.nbytes
            + ex._bank.nbytes
            + self._table.nbytes
            + self._closed.nbytes
            + self._pending.nbytes
            + self._sigmas.nbytes
            + _HEADER_BYTES
        )

    @staticmethod
    def memory_bytes(
        k: int,
        width: int,
        sketch_depth: int,
        depth: int,
        horizon: int,
        *,
        counter: str = "kary",
        arity: int | None = None,
        releases: int | None = None,
        release_every: int | None = None,
    ) -> int:
        """The ``nbytes`` of a ContinualPrivHP with these parameters, without building it.

        >>> ContinualPrivHP.memory_bytes(64, 256, 3, 24, 2**24, counter="binary")
        3259239
        >>> ContinualPrivHP.memory_bytes(64, 256, 3, 24, 2**24)
        2728989
        """
        return memory_bytes(
            k, width, sketch_depth, depth, horizon, counter, arity, releases, release_every
        )

    plan = staticmethod(continual_plan.plan)
    """The :class:`~sketchsyn.synth.continual.plan.ContinualPlan` that :meth:`for_memory`
    builds (:func:`sketchsyn.synth.continual.plan.plan`, same arguments): ``expected_n`` is
    the expected number of **live** records at a release, a public guess."""

    @classmethod
    def for_memory(
        cls,
        domain: Any,
        epsilon: float,
        memory_bytes: int,
        horizon: int,
        *,
        expected_n: int | None = None,
        releases: int | None = None,
        release_every: int | None = None,
        rng: RNGLike = None,
    ) -> ContinualPrivHP:
        """A ContinualPrivHP within ``memory_bytes``: the summary of :meth:`plan`."""
        p = cls.plan(domain, epsilon, memory_bytes, horizon, expected_n=expected_n,
                     releases=releases, release_every=release_every)  # fmt: skip
        return cls(domain, p.epsilon, **p.kwargs(), rng=rng)

    def _params(self) -> dict[str, Any]:
        params = self._exact._params()
        params.pop("allocation")
        params.pop("neighbours")
        return params | {
            "horizon": self._horizon,
            "counter": self._counter,
            "arity": self._arity,
            "releases": self._releases,
            "release_every": self._every,
        }

    # ------------------------------------------------------------------ epochs
    def _epoch_of(self, t: int) -> int:
        """Epochs closed after step ``t``."""
        if not self._scheduled:
            return t
        if self._releases is not None:
            return announced_epochs(t, self._releases, self._horizon)
        return self._epochs if t >= self._horizon else t // int(self._every or 1)

    def _end(self, e: int) -> int:
        """The last step of epoch ``e``."""
        if not self._scheduled:
            return e
        if self._releases is not None:
            return announced_end(e, self._releases, self._horizon)
        return min(e * int(self._every or 1), self._horizon)

    def _counts(self) -> np.ndarray:
        """Every cell's exact count now, ``(C,)``."""
        return np.concatenate([self._exact._tree, self._exact._bank.reshape(-1)])

    def _close(self, n: int) -> None:
        """``n`` epochs end at the current step (the exact counts are those at their end)."""
        counts = self._counts()
        if isinstance(self._table, _HonakerBank):
            inc = counts - self._closed
            for lo in range(0, n, 1024):
                rows = np.broadcast_to(inc, (min(1024, n - lo), inc.size))
                self._table.step(np.ascontiguousarray(rows), self._streams)
        self._closed[...] = counts

    # ------------------------------------------------------------------ updates
    def _check_open(self, rows: int) -> None:
        if self._frozen:
            raise ReleasedError("this ContinualPrivHP is a snapshot; snapshots are read-only")
        if self._absorbed:
            raise ReleasedError(
                "this ContinualPrivHP was merged into another one; its rows are counted there"
            )
        if self._t + rows > self._horizon:
            raise InputError(
                f"ContinualPrivHP: {rows} more step(s) after step {self._t} would pass the "
                f"horizon {self._horizon}; the counters cover only the first "
                f"{self._horizon} steps"
            )

    def update(self, x: Any) -> None:
        """One step with one row (a point of the domain) inserted."""
        arr = self._one_row(x, "update")
        with self._usage.enter(_KIND):
            self._check_open(1)
            # Encoded (hence checked) now; counted with the next 1 023 or before any read.
            codes, dropped = self.domain.encode(arr, self.depth, return_dropped=True)
            if np.size(codes):
                self._pending[self._n_pending] = np.asarray(codes, dtype=np.uint64)[0]
                self._n_pending += 1
            self._exact._n_dropped += int(dropped)
            self._t += 1
            if self._n_pending == _PENDING:
                self._flush()
            closed = self._epoch_of(self._t) - self._epoch_of(self._t - 1)
            if self._scheduled and closed:
                self._flush()
                self._close(closed)

    def _one_row(self, x: Any, name: str) -> np.ndarray:
        return one_row(x, self._exact.domain.d, name)

    def _flush(self) -> None:
        """Count the pending single rows into the exact state (PrivHP's per-batch counting)."""
        n = self._n_pending
        if n:
            self._add(self._pending[:n], 1)
            self._n_pending = 0

    def _add(self, codes: np.ndarray, sign: int) -> None:
        ex = self._exact
        tree_counts, bank_counts = ex._level_counts(codes)
        if sign > 0:
            ex._tree += tree_counts
            ex._bank += bank_counts
        else:
            ex._tree -= tree_counts
            ex._bank -= bank_counts
        ex._n_seen += sign * int(codes.size)

    def update_many(self, X: Any) -> None:
        """``len(X)`` consecutive steps, one row inserted each. The batch is checked whole first."""
        self._apply(X, 1)

    def remove_many(self, X: Any) -> None:
        """``len(X)`` consecutive steps, one earlier row deleted each (checked whole first).

        Every deletion is applied and is one step, whether or not the row was inserted: the
        outcome of the call and ``t`` never depend on the counts (class notes, "Deletions").
        A batch is refused whole only for what the rows themselves are (a row outside the
        domain, a wrong width) or for passing the horizon, the state unchanged.

        >>> from sketchsyn import Box
        >>> c = ContinualPrivHP(Box.unit(1), 1.0, k=4, width=16, horizon=10, depth=6, rng=1)
        >>> c.skip(1); c.remove_many([[0.3]]); c.t     # never inserted: applied all the same
        2
        """
        self._apply(X, -1)

    def remove(self, x: Any) -> None:
        """One step with one earlier row (a point of the domain) deleted."""
        self._apply(self._one_row(x, "remove"), -1)

    def _apply(self, X: Any, sign: int) -> None:
        arr = np.asarray(X)
        arr = arr.reshape(1) if arr.ndim == 0 else arr
        rows = int(arr.shape[0])
        with self._usage.enter(_KIND):
            self._check_open(rows)
            self._flush()
            ex = self._exact
            codes, dropped = self.domain.encode(arr, self.depth, return_dropped=True)
            codes = np.asarray(codes, dtype=np.uint64)
            # Every deletion is applied, whatever the counts: a refusal that depends on them
            # would tell neighbouring streams apart (class notes, "Deletions").
            t0, t1 = self._t, self._t + rows
            e0, e1 = self._epoch_of(t0), self._epoch_of(t1)
            if not self._scheduled or e1 == e0:
                self._add(codes, sign)
            else:
                # Cut at the ends of the epochs that close inside the batch (only the last one
                # matters for a lazy table: releases read the counts of the last closed epoch).
                eager = isinstance(self._table, _HonakerBank)
                ends = [self._end(e) - t0 for e in range(e0 + 1 if eager else e1, e1 + 1)]
                lo = 0
                for cut, closes in [*((c, True) for c in ends), (rows, False)]:
                    if dropped:
                        part = np.asarray(
                            self.domain.encode(arr[lo:cut], self.depth), dtype=np.uint64
                        )
                    else:
                        part = codes[lo:cut]
                    self._add(part, sign)
                    lo = cut
                    if closes:
                        self._close(1 if eager else e1 - e0)
            ex._n_dropped += int(dropped)
            self._t = t1

    def skip(self, n: int = 1) -> None:
        """``n`` empty steps (no event)."""
        n = check_int(n, "n", "ContinualPrivHP.skip", minimum=0)
        with self._usage.enter(_KIND):
            self._check_open(n)
            closed = self._epoch_of(self._t + n) - self._epoch_of(self._t)
            self._t += n
            if self._scheduled and closed:
                self._flush()
                self._close(closed)

    def consume(self, iterable: Iterable[Any], batch_size: int = 65536) -> int:
        """Stream an iterable of rows through ``update_many`` (one step per row)."""
        self._check_open(0)
        return consume(self.update_many, iterable, batch_size, self._exact.domain.d)

    # ------------------------------------------------------------------ noisy values
    def _noisy(self, cells: np.ndarray) -> np.ndarray:
        """Released values at the last closed epoch of the sorted unique global ``cells``
        (int64; float64 for Honaker's estimates)."""
        self._flush()
        e = self._epoch_of(self._t)
        if isinstance(self._table, _HonakerBank):
            return self._table.values()[cells]
        exact = self._closed[cells] if self._scheduled else self._counts()[cells]
        noise = self._table.noise(cells, e, self._offsets, self._scales, self._streams)
        return exact + noise

    def cell_values(self, level: int) -> np.ndarray:
        """The released (noisy) values of every cell of ``level`` at the last closed epoch.

        Counter levels give ``2**level`` counts, sketch levels the ``(j, w)`` table. These are
        outputs of the same mechanism as ``release()`` (covered by the same ε).
        """
        level = check_int(level, "level", "ContinualPrivHP.cell_values", 0, self.depth)
        lo, hi = self._offsets[level], self._offsets[level + 1]
        values = self._noisy(np.arange(lo, hi, dtype=np.int64))
        return values if level <= self.L_k else values.reshape(self.sketch_depth, self.width)

    def _query_cells(self, level: int, prefixes: np.ndarray) -> tuple[np.ndarray, Any]:
        """Global cells ``(j, n)`` and Count Sketch signs of ``prefixes`` in ``level``'s sketch."""
        sk = self._exact.sketches[level - self.L_k - 1]
        cells = sk.family.flat_indices(prefixes) + self._offsets[level]
        signs = sk.family.signs(prefixes) if self._exact._sketch == "count-sketch" else None
        return cells, signs

    def top_levels(self) -> list[np.ndarray]:
        """The counter levels ``0 … L_k`` after least squares (float64, not yet non-negative):
        every level's cells estimated from all counter levels (Hay et al.).

        Post-processing of the released cells; what ``release()`` grows from.
        """
        return continual_release.top_levels(self)

    def release(self, *, prune: float = PRUNE) -> PrivateDistribution:
        """The private distribution at the last closed epoch (any step, any number of times).

        Without a schedule every step closes an epoch. Releases in one epoch read the same
        noise, so they are equal; their parameters name the epoch, its last step ``t`` and
        ``prune``. With a schedule, a release after the first rows but **before the first
        epoch closes is refused** (:class:`~sketchsyn.errors.ReleasedError` naming the row at
        which it closes): it could only describe no rows, an empty distribution whose samples
        are uniform over the domain. At ``t = 0`` the release is the empty stream's.

        >>> from sketchsyn import Box
        >>> c = ContinualPrivHP(Box.unit(1), 1.0, k=4, width=16, horizon=10, depth=6,
        ...                     releases=2, rng=1)
        >>> c.update_many([[0.3]] * 3)
        >>> c.release()  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        sketchsyn.errors.ReleasedError: ... at t = 3; the first of the 2 ... closes at row 5 ...
        >>> c.update_many([[0.3]] * 2); c.release().params["t"]
        5

        Parameters
        ----------
        prune : float, default 0.2
            Post-processing (no budget): when growing the tree, a child whose consistent count
            is below a threshold gives its count to its sibling if the sibling's is not below
            it, so that empty cells do not keep a share of the noise. The threshold, in noise
            standard deviations, is the smallest at which the released values estimate at most
            this share of empty cells among those kept. 0 turns pruning off. See
            :mod:`sketchsyn.synth.continual.release`.
        """
        prune = continual_release.check_prune(prune, "prune")
        with self._usage.enter(_KIND):
            if self._t > 0 and self._epoch_of(self._t) == 0:
                first = self._end(1)
                what = (
                    f"of the {self._releases} announced epochs"
                    if self._releases is not None
                    else f"epoch (release_every={self._every})"
                )
                raise ReleasedError(
                    f"ContinualPrivHP.release: no epoch has closed yet at t = {self._t}; the "
                    f"first {what} closes at row {first} (a release now would describe no "
                    "rows: an empty distribution, its samples uniform). Release at "
                    f"t >= {first} (skip() or more rows)."
                )
            return self._release(prune)

    def _release(self, prune: float = PRUNE) -> PrivateDistribution:
        e = self._epoch_of(self._t)
        if self._last is not None and self._last[0] == e:
            if self._last[1].params.get("prune") == prune:
                return self._last[1]
        grown = continual_release.grow(self, prune)
        leaf_levels, leaf_prefixes, leaf_counts = grown.leaves()
        params = self._params()
        params.pop("domain")
        dist = PrivateDistribution(
            self.domain,
            leaf_levels,
            leaf_prefixes,
            leaf_counts,
            epsilon=self.epsilon,
            mechanism=_KIND,
            params=params | {"t": self._end(e), "epoch": e, "prune": prune},
        )
        self._last = (e, dist, grown)
        return dist

    @property
    def partition_tree(self) -> Any:
        """The grown tree of the last release (post-processing); ``ReleasedError`` before one."""
        if self._last is None:
            raise ReleasedError("partition_tree exists only after release()")
        return self._last[2]

    def _variance_at(self, level: int, e: int) -> float:
        return float(self._table.variance(level, e, self._scales))

    def cell_variance(self, level: int, t: int | None = None) -> float:
        """Variance of one released cell of ``level`` at step ``t`` (before least squares):
        the blocks of the epoch's release times ``Var Lap_Z(scale)`` (Honaker: the estimates'
        variances ``V_j``).

        >>> from sketchsyn import Box
        >>> c = ContinualPrivHP(Box.unit(1), 1.0, k=2, width=8, horizon=16, depth=4,
        ...                     counter="binary", rng=0)
        >>> c.cell_variance(3, t=16) * 3 == c.cell_variance(3, t=7)
        True
        """
        t = self._t if t is None else check_int(t, "t", "cell_variance", 0, self._horizon)
        return self._variance_at(level, self._epoch_of(t))

    # ------------------------------------------------------------------ copy, merge, save
    def _fill(self) -> None:
        """Draw (once) every noise slot the last closed epoch reads, for every cell."""
        if not isinstance(self._table, _HonakerBank):
            self._noisy(np.arange(int(self._offsets[-1]), dtype=np.int64))

    def merge(self, other: ContinualPrivHP) -> None:
        """Append the events of ``other`` as the next ``other.t`` steps of this stream.

        Sound only without a schedule, when ``other`` never released anything (it drew no
        noise: its events have spent no budget yet) and ``self.t + other.t ≤ horizon``; then
        the result is exactly the counters on this stream followed by ``other``'s, and
        ``other`` is closed. Parameters and hash seed must match.
        """
        self._check_open(0)
        check_mergeable(self, other)
        self._check_open(other._t)
        self._flush()
        other._flush()
        lineage = self._lineage.union(other._lineage, _KIND)
        self._exact.merge(other._exact)
        self._t += other._t
        self._lineage = lineage
        self._last = None
        other._absorbed = True

    def _state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The exact running counts and the noise drawn so far (a trusted curator's state).

        Every noise slot the last closed epoch reads is drawn first (once), so a loaded copy or
        a snapshot releases exactly what this object releases and never draws a second noise
        for one block. A loaded copy must not continue a stream that its original also
        continues: the two would draw different noise for the same later blocks and their
        releases together would spend the budget twice.
        """
        return save_state(self)

    @classmethod
    def _from_state(
        cls, fields: MetaReader, arrays: Arrays, version: int, blob: bytes, rng: Any
    ) -> ContinualPrivHP:
        """Check every field and every array against the parameters, then build (later noise
        comes from the OS CSPRNG). Version 1 blobs are the binary counter without a schedule."""
        return load_state(cls, fields, arrays, version)

    def __repr__(self) -> str:
        return (
            f"ContinualPrivHP(epsilon={self.epsilon}, k={self.k}, width={self.width}, "
            f"sketch_depth={self.sketch_depth}, depth={self.depth}, horizon={self._horizon}, "
            f"counter={self._counter!r}, t={self._t}, nbytes={self.nbytes})"
        )
