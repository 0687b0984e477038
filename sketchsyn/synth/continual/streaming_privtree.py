"""An adaptive partition released on a schedule, in fixed memory: :class:`StreamingPrivTree`.

The mechanism is PHDStream's (Kumar, Strohmer and Vershynin, *An Algorithm for Streaming
Differentially Private Data*) with three changes that make its memory fixed and its noise grow
with the number of releases instead of the number of time steps:

- the partition steps on a public schedule (``steps_per_release`` steps in each of the
  ``releases`` epochs of a ``horizon`` of events), not once per time step;
- between two steps the changes are counted exactly, but only at a bounded resolution: every
  leaf of the current (public) partition gets ``2**r`` sub-cells ("atoms"), the same ``r`` for
  all, the largest for which they fit in ``cells`` counters; a step can refine a leaf by at most
  ``r`` levels, and the partition never has more than ``max_leaves`` leaves;
- the split test reads a score that is a count of live records (see *Privacy*), so that
  PrivTree's proof (Zhang, Xiao and Xie, *PrivTree: A Differentially Private Algorithm for
  Hierarchical Decompositions*) applies to streams with deletions.

At each step, from the root down (a split cuts a cell into its ``β = fanout`` Morton
descendants ``log2 β`` levels down; default ``β = 2``, a halving), a node ``v`` at tree depth
``t`` (``t`` splits below the root) has the score ``s(v)``, the biased score
``b(v) = max(s(v) − t·δ, θ − δ)`` and is split when ``b(v) + Lap_Z(λ) > θ`` (``θ = 0``), unless
it is an atom or is at ``max_depth``. When the splits decided on a level would pass
``max_leaves``, only as many go through as fit, those of the nodes with the most public mass
(the previous release's), their children become leaves untested, and the step ends. The nodes
not split are the new leaves; each gets the step's exact net change ``Δ(v)`` plus
``Lap_Z(leaf_scale)``, the noisy change ``Δ̃(v)``, plus its share of the previous release: the
previous counts of the cells it covers, or, when ``v`` lies inside a previous leaf ``u`` that
was refined, ``N(u)·(w(v) + 0.7·g(u)·(Δ̃⁺(v)/ΣΔ̃⁺ − w(v)))`` with ``w(v) = vol(v)/vol(u)``,
the sums over the new leaves inside ``u`` and ``g(u) = max(ΣΔ̃, 0)/Σ|Δ̃|``. Where ``u`` only
grew (``g = 1``), 0.7 of its earlier count goes where the new records are (a stream whose
distribution holds still puts its new records where its earlier ones are) and 0.3 by volume;
where it churned (as many deletions as insertions, ``g = 0``: moving objects), all of it goes by
volume, as with no change or ``N(u) ≤ 0``. The shares add up to ``N(u)``, and every input is
public (the previous release and the noisy changes), so they are post-processing.

>>> import numpy as np
>>> from sketchsyn import Box
>>> X = np.random.default_rng(0).normal(0.5, 0.1, size=(20_000, 2)).clip(0, 1)
>>> s = StreamingPrivTree(Box.unit(2), 1.0, horizon=20_000, releases=4, rng=0)
>>> s.update_many(X)
>>> s.t, s.steps_closed, s.nbytes <= 256 * 1024
(20000, 4, True)
>>> round(s.release().total, -3)
20000.0
"""

from __future__ import annotations

import math
from collections.abc import Iterable
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
    check_domain,
    check_epsilon,
    check_int,
)
from ...io.serial import Arrays, MetaReader
from ...io.stream import consume, one_row
from ...io.summary import Summary
from ...privacy import accounting
from ...privacy.lineage import Lineage, UsageGuard
from ...privacy.noise import discrete_laplace
from ...privacy.pool import LaplacePool
from ...privacy.rng import RNGLike, as_source
from ..distribution import PrivateDistribution
from .atoms import _Layout, _running
from .noise import announced_end, announced_epochs

__all__ = ["StreamingPrivTree"]

_KIND = "StreamingPrivTree"
LEAF_BYTES = 17  # per leaf slot: prefix (uint64), level (uint8), released count (float64)
MAX_DEPTH = 62  # the end of a cell, (prefix + 1) << (max_depth − level), must fit in uint64
DEFAULT_DEPTH = 32
_THETA = 0.0
_BY_VOLUME = 0.3  # least share of a refined leaf's previous count shared out by volume


class StreamingPrivTree(Summary):
    """PHDStream's adaptive partition, stepped on a release schedule in fixed memory (ε-DP,
    event level; module docstring for the mechanism).

    Saved state: **trusted** (``STATE_PRIVACY = "trusted"``): the bytes hold the exact net
    changes of the open step (one counter per atom) besides the partition and its released
    counts; keep them with the data holder. Releases are private.

    Parameters
    ----------
    domain : Box or BitDomain
        Public domain.
    epsilon : float
        Budget of all releases together (event level).
    horizon : int
        Public number of events ``T`` (insertions and deletions) the stream may hold.
    releases : int
        ``m`` announced releases: epoch ``e`` ends after event ``floor(e·T/m)``.
    steps_per_release : int, optional
        Partition steps per epoch (the last closes the epoch). More steps follow moving data
        faster; every step adds one noise draw to every leaf count. Default:
        ``max(1, min(8, floor(0.75·epsilon + 0.5)))``, that is 1 at ε < 2, 2 at ε = 2 and 3 at ε = 4
        (the noise is small at large ε; fitted on the two streams of
        ``benchmarks/bench_streams.py`` at ε = 0.5, 1, 2 and 4 among 1, 2 and 3 steps).
    memory_bytes : int, default 262144
        State budget: ``cells`` atom counters (4 bytes each, 8 when a step may hold 2**31 or
        more events) and ``max_leaves = cells >> refine`` leaf slots of 17 bytes. ``nbytes``
        is fixed at construction and at most this.
    refine : int, default 2
        Levels every leaf can always be refined by in one step (``cells ≥ 2**refine ·
        max_leaves``).
    fanout : int, default 2
        Children of a split cell, ``β = 2**k`` (``k`` Morton levels per split; ``max_depth``
        and the atoms then come in whole splits). 2 is PHDStream's choice; 4 (PrivTree's
        quadtree in 2-D) splits more readily (a smaller bias per level) and keeps more leaves,
        each with its noise: on the streams of ``benchmarks/bench_streams.py`` it was slightly
        better on flights and worse on the drifting stream.
    tree_fraction : float, default 0.3
        Share of ε spent on the split decisions; the rest goes to the leaf counts.
    max_depth : int, optional
        Deepest level of the partition, a multiple of ``log2(fanout)`` (default
        ``min(domain.max_depth, 32)`` rounded down to one; at most 62).
    rng : None, int, SeedSequence or Generator
        Noise randomness; ``None`` (default) is the OS CSPRNG. A seed is for tests only and
        **not private against anyone who knows it**.

    Notes
    -----
    **Steps.** ``update_many(X)`` is ``len(X)`` events (insertions), ``remove_many(X)``
    ``len(X)`` events (deletions), ``skip(n)`` ``n`` empty events (a row dropped by the domain's
    ``"drop"`` policy is an empty event too); updates past ``horizon`` are refused. Step ``s``
    of ``S = releases·steps_per_release`` ends after event ``floor(s·T/S)``. ``release()`` is
    answered from the last closed step (no noise is drawn at a release: it is the partition and
    its counts); before the first step it is empty.

    **Privacy** (pure ε-DP, event level, all releases together). Neighbouring streams differ in
    one event replaced by an empty step: at one position one stream has an insertion or a
    deletion and the other an empty event (:meth:`skip`), so both have the same number of
    events, hence the same schedule and the same public ``t``. An insertion followed later by
    the deletion of the same row are two events. An event lies in exactly one step; a step
    reads only its own events and the public outputs of the earlier steps, so the steps compose
    in parallel and the total is one step's budget, ``ε_tree + ε_leaf ≤ ε``.

    Within a step, the score of a node is ``s(v) = Σ_a max(N⁺(a) + Δ(a), 0)`` over the atoms
    ``a`` it covers, with ``N⁺(a)`` the atom's even share of its leaf's released count clamped
    at 0 (public) and ``Δ(a)`` the step's exact net change. Scores are non-negative sums, so
    they do not increase from a node to its children, and an event changes ``Δ`` of one atom
    by 1, hence the scores of the nodes on one root-to-atom path all by the same amount of at
    most 1 and no other score: the two conditions of PrivTree's proof (Zhang, Xiao and Xie,
    Theorem 3.1, which holds for the integer Laplace noise as
    :class:`~sketchsyn.baselines.grid.PrivTree` states), which gives
    ``(2β − 1)/((β − 1)·λ) ≤ ε_tree`` (``3/λ`` for ``β = 2``) for the split decisions (their
    noise values are drawn ahead a block at a time, :class:`~sketchsyn.privacy.pool.LaplacePool`,
    each used by one decision only: the law of a draw per decision). The nodes tested depend
    only on the public partition and on earlier decisions (the ``max_leaves`` cap acts after a
    level's decisions: which of them go through is a function of the decisions and of the
    public previous release), and a path that stops early is a subset of the path the
    proof bounds (a decision to split that the cap holds back is still a decision of the proof;
    the path ends there). The new leaves partition the domain, so the exact
    ``Δ(v)`` have ℓ1 sensitivity 1 and ``Lap_Z(leaf_scale)`` with ``1/leaf_scale ≤ ε_leaf``
    makes them ``ε_leaf``-DP; ``N`` is public. Scales are rounded up so that each realised
    budget is at most its share exactly.

    **Deletions.** A deletion subtracts 1 from its atom. Whether the row was inserted cannot
    be known (earlier insertions are only in the noisy counts), so every deletion is applied
    and counted as an event (the privacy holds; the release then describes the net counts).
    """

    STATE_PRIVACY = "trusted"
    FORMAT_VERSION = 1

    def __init__(
        self,
        domain: Any,
        epsilon: float,
        *,
        horizon: int,
        releases: int,
        steps_per_release: int | None = None,
        memory_bytes: int = 262144,
        refine: int = 2,
        fanout: int = 2,
        tree_fraction: float = 0.3,
        max_depth: int | None = None,
        rng: RNGLike = None,
    ) -> None:
        owner = _KIND
        check_domain(domain, owner)
        self._domain = domain
        self._epsilon = check_epsilon(epsilon, owner)
        self._horizon = check_int(horizon, "horizon", owner, minimum=1, maximum=2**62)
        self._releases = check_int(releases, "releases", owner, minimum=1, maximum=self._horizon)
        if steps_per_release is None:
            steps_per_release = max(1, min(8, math.floor(0.75 * self._epsilon + 0.5)))
        self._per = check_int(steps_per_release, "steps_per_release", owner, 1, 2**20)
        self._refine = check_int(refine, "refine", owner, minimum=1, maximum=20)
        self._fanout = check_int(fanout, "fanout", owner, minimum=2, maximum=256)
        self._k = self._fanout.bit_length() - 1
        if self._fanout != 1 << self._k or self._k > self._refine:
            raise ParameterError(
                f"The 'fanout' parameter of {owner} must be a power of 2 with log2(fanout) <= "
                f"refine = {self._refine}. Got {fanout!r} instead."
            )
        tf = tree_fraction
        if isinstance(tf, bool) or not isinstance(tf, (int, float)) or not 0.0 < float(tf) < 1.0:
            raise ParameterError(
                f"The 'tree_fraction' parameter of {owner} must be in (0, 1). Got {tf!r} instead."
            )
        self._tree_fraction = float(tf)
        top = min(int(domain.max_depth), MAX_DEPTH)
        if max_depth is None:
            max_depth = min(top, DEFAULT_DEPTH) // self._k * self._k
        self._D = check_int(max_depth, "max_depth", owner, minimum=self._k, maximum=top)
        if self._D % self._k:
            raise ParameterError(
                f"The 'max_depth' parameter of {owner} must be a multiple of log2(fanout) = "
                f"{self._k}. Got {max_depth!r} instead."
            )
        self._S = self._releases * self._per
        # A step holds at most ceil(T/S) events: int32 atoms when that cannot overflow them.
        self._wide = -(-self._horizon // self._S) >= 2**31
        self._cell_bytes = 8 if self._wide else 4
        self._memory = check_int(memory_bytes, "memory_bytes", owner, minimum=64, maximum=2**32)
        per_leaf = Fraction(self._cell_bytes) + Fraction(LEAF_BYTES, 2**self._refine)
        self._cells = int(Fraction(self._memory) / per_leaf)
        self._cap = self._cells >> self._refine
        if self._cap < 1:
            raise ParameterError(
                f"The 'memory_bytes' parameter of {owner} must hold at least one leaf and its "
                f"2**refine = {2**self._refine} atoms ({math.ceil(2**self._refine * per_leaf)} "
                f"bytes). Got {memory_bytes!r} instead."
            )
        eps_tree, eps_leaf = (
            float(x)
            for x in accounting.fit_to_budget(
                [self._tree_fraction * self._epsilon, (1 - self._tree_fraction) * self._epsilon],
                self._epsilon,
            )
        )
        # β = fanout: λ = (2β − 1)/((β − 1)·ε_tree), δ = λ·ln β.
        beta = self._fanout
        self._lam = accounting.laplace_scale(Fraction(2 * beta - 1, beta - 1), eps_tree, owner)
        self._delta = self._lam * math.log(beta)
        self._leaf_scale = accounting.laplace_scale(1, eps_leaf, owner)
        self._source = as_source(rng)
        self._lineage = Lineage.new(self._source, _KIND, self._params())
        self._dtype = np.int64 if self._wide else np.int32
        # The open step's exact net changes, one per atom in use (allocated when first needed:
        # a loaded blob's header alone never allocates).
        self._atoms: np.ndarray | None = None
        self._level = np.zeros(1, dtype=np.uint8)
        self._prefix = np.zeros(1, dtype=np.uint64)
        self._count = np.zeros(1, dtype=np.float64)
        self._t = 0
        self._frozen = False
        self._usage = UsageGuard()
        self._layout()

    # ------------------------------------------------------------------ parameters
    domain = ReadOnly[Any]("The public domain.")
    epsilon = ReadOnly[float]("Budget of all releases together.")
    horizon = ReadOnly[int]("Public number of events ``T``.")
    releases = ReadOnly[int]("Announced releases ``m`` (epochs).")

    @property
    def steps_per_release(self) -> int:
        """Partition steps per epoch."""
        return self._per

    @property
    def memory_bytes(self) -> int:
        """The state budget asked for (``nbytes`` is at most this)."""
        return self._memory

    refine = ReadOnly[int]("Levels every leaf can be refined by in one step.")
    tree_fraction = ReadOnly[float]("Share of ε spent on the split decisions.")

    @property
    def max_depth(self) -> int:
        """Deepest level of the partition."""
        return self._D

    cells = ReadOnly[int]("Atom counters (exact net changes of the open step).")

    @property
    def max_leaves(self) -> int:
        """Most leaves the partition can have (``cells >> refine``)."""
        return self._cap

    lam = ReadOnly[float](
        "``λ``, the integer Laplace scale of the split decisions "
        "(``(2β − 1)/((β − 1)·λ) ≤ ε_tree``)."
    )

    delta = ReadOnly[float]("``δ = λ·ln β``, the decay of the biased score per split.")
    fanout = ReadOnly[int]("``β``, the children of a split cell.")
    leaf_scale = ReadOnly[float](
        "Integer Laplace scale of a leaf's count at a step (``1/leaf_scale ≤ ε_leaf``)."
    )
    t = ReadOnly[int]("Events so far.")

    @property
    def steps_closed(self) -> int:
        """Partition steps closed so far."""
        return self._steps_of(self._t)

    @property
    def epoch_end(self) -> int:
        """The first epoch end at or after event ``t`` (``t`` itself when an epoch has just
        closed). To release at a time announced in advance, ``skip(epoch_end - t)`` there: the
        empty events close the epoch, and the release then describes every event so far.

        >>> from sketchsyn import Box
        >>> s = StreamingPrivTree(Box.unit(1), 1.0, horizon=100, releases=4)
        >>> s.skip(30)
        >>> s.epoch_end, s.steps_closed
        (50, 1)
        >>> s.skip(s.epoch_end - s.t)
        >>> s.epoch_end, s.steps_closed
        (50, 2)
        """
        closed = self._steps_of(self._t) // self._per
        if self._end(closed * self._per) == self._t:
            return self._t
        return self._end(min(closed + 1, self._releases) * self._per)

    @property
    def n_leaves(self) -> int:
        """Leaves of the current partition."""
        return int(self._level.size)

    lineage = ReadOnly[Lineage]("The noise draws this object holds (shared by its copies).")

    @property
    def nbytes(self) -> int:
        """State bytes, fixed at construction: ``cells`` atom counters and ``max_leaves`` leaf
        slots, the most the state holds (the atoms in use and the leaves never exceed them; the
        leaves' atom layout is recomputed when used, not held).

        Working memory, beside the state: an update encodes its batch (about 24 bytes a row
        for d = 2: feed batches of a size you can afford) and reads the leaves' layout (25
        bytes a leaf); a step holds three running sums over the atoms (24 bytes an atom, 8 more
        while they are built) and arrays of the nodes tested on one level and of the new
        leaves. At the default 256 KB an update of 1,000 rows peaks at 7.5–10 times ``nbytes``
        (tracemalloc, steps included, on a 327,346-row stream at ε = 1 and 4; 15–18 times
        before the running sums; ``tests/test_streaming_privtree.py`` holds it under 12).
        """
        return self._cell_bytes * self._cells + LEAF_BYTES * self._cap

    def _params(self) -> dict[str, Any]:
        return {
            "domain": self._domain.to_dict(),
            "epsilon": self._epsilon,
            "horizon": self._horizon,
            "releases": self._releases,
            "steps_per_release": self._per,
            "memory_bytes": self._memory,
            "refine": self._refine,
            "fanout": self._fanout,
            "tree_fraction": self._tree_fraction,
            "max_depth": self._D,
        }

    # ------------------------------------------------------------------ schedule and atoms
    def _steps_of(self, t: int) -> int:
        """Steps closed after event ``t``."""
        return announced_epochs(t, self._S, self._horizon)

    def _end(self, s: int) -> int:
        """The last event of step ``s``."""
        return announced_end(s, self._S, self._horizon)

    def _layout(self) -> None:
        """Count the atoms in use for the new partition and drop the open step's counters."""
        self._used = int(np.left_shift(1, self._atom_levels()).sum())
        self._atoms = None

    def _atom_levels(self) -> np.ndarray:
        """Each leaf's atoms (public: a function of the partition): ``2**r_i`` of them with
        ``r_i = min(r, D − level)``, ``r`` the largest for which every leaf's atoms fit in
        ``cells``."""
        r = int(self._cells // self._level.size).bit_length() - 1
        r -= r % self._k  # whole splits: atoms are nodes of the tree
        return np.minimum(r, self._D - self._level.astype(np.int64))

    def _open_atoms(self) -> np.ndarray:
        """The open step's atom counters (``used`` of them, at most ``cells``)."""
        if self._atoms is None:
            self._atoms = np.zeros(self._used, dtype=self._dtype)
        return self._atoms

    # ------------------------------------------------------------------ updates
    def _check_open(self, rows: int) -> None:
        if self._frozen:
            raise ReleasedError(f"this {_KIND} is a snapshot; snapshots are read-only")
        if self._t + rows > self._horizon:
            raise InputError(
                f"{_KIND}: {rows} more event(s) after event {self._t} would pass the horizon "
                f"{self._horizon}"
            )

    def update(self, x: Any) -> None:
        """One event: one row (a point of the domain) inserted."""
        self._apply(one_row(x, self._domain.d, "update"), 1)

    def update_many(self, X: Any) -> None:
        """``len(X)`` events, one row inserted each. The batch is checked whole first."""
        self._apply(X, 1)

    def remove(self, x: Any) -> None:
        """One event: one earlier row (a point of the domain) deleted."""
        self._apply(one_row(x, self._domain.d, "remove"), -1)

    def remove_many(self, X: Any) -> None:
        """``len(X)`` events, one earlier row deleted each (checked whole first; see the class
        notes on rows that were never inserted)."""
        self._apply(X, -1)

    def skip(self, n: int = 1) -> None:
        """``n`` empty events (the steps they close are taken, with their noise)."""
        n = check_int(n, "n", f"{_KIND}.skip", minimum=0)
        with self._usage.enter(_KIND):
            self._check_open(n)
            self._advance(np.zeros(0, dtype=np.uint64), n, 1, None)

    def consume(self, iterable: Iterable[Any], batch_size: int = 65536) -> int:
        """Stream an iterable of rows through ``update_many`` (one event per row)."""
        self._check_open(0)
        return consume(self.update_many, iterable, batch_size, self._domain.d)

    def _apply(self, X: Any, sign: int) -> None:
        arr = np.asarray(X)
        arr = arr.reshape(1) if arr.ndim == 0 else arr
        rows = int(arr.shape[0])
        with self._usage.enter(_KIND):
            self._check_open(rows)
            # Encoded (hence checked) whole before anything changes.
            codes, dropped = self._domain.encode(arr, self._D, return_dropped=True)
            codes = np.asarray(codes, dtype=np.uint64)
            self._advance(codes, rows, sign, arr if dropped else None)

    def _advance(self, codes: np.ndarray, rows: int, sign: int, arr: Any) -> None:
        """Count ``rows`` events, closing the steps that end among them. ``arr``: the rows,
        when some were dropped by the domain (their codes are then found per part)."""
        t0 = self._t
        cuts = [
            self._end(s) - t0 for s in range(self._steps_of(t0) + 1, self._steps_of(t0 + rows) + 1)
        ]
        lo = 0
        for cut, closes in [*((c, True) for c in cuts), (rows, False)]:
            if cut > lo:
                part = (
                    codes[lo:cut]
                    if arr is None
                    else np.asarray(self._domain.encode(arr[lo:cut], self._D), dtype=np.uint64)
                )
                if part.size:
                    self._count_atoms(part, sign)
            lo = cut
            if closes:
                self._step()
        self._t = t0 + rows

    def _count_atoms(self, codes: np.ndarray, sign: int) -> None:
        """Add ``sign`` to the atom of every code: one ``bincount`` over the atoms for a part
        as large as an eighth of them, else additions at the parts' atoms alone (a small part
        costs its own size, not the atoms')."""
        atoms = self._open_atoms()
        idx = _Layout(self).atom_of(codes)
        if 8 * idx.size >= atoms.size:
            atoms += (sign * np.bincount(idx, minlength=atoms.size)).astype(self._dtype)
        else:
            np.add.at(atoms, idx, self._dtype(sign))

    # ------------------------------------------------------------------ one step
    def _step(self) -> None:
        """Grow the new partition from the root (module docstring) and reset the atoms.

        Working memory: three running sums over the atoms (24 bytes per atom: the scores,
        previous shares and exact changes under any node are differences of two entries; a
        fourth, of the public shares, only at a level the cap acts on), built in blocks of
        ``_BLOCK`` atoms from the atoms' shares (8 bytes per atom, dropped before the tree is
        grown), and a few arrays of the nodes tested on one level (at most
        ``fanout·max_leaves``) and of the new leaves.
        """
        D = self._D
        lay = _Layout(self)
        atoms = self._open_atoms()
        cum_score, cum_share, cum_change = self._running_sums(lay, atoms)

        def public_of(a0: np.ndarray, a1: np.ndarray) -> np.ndarray:
            """The previous release's mass under each node (public: the order in which the cap
            lets split decisions through)."""
            share = lay.per_atom(self._count / lay.sizes)
            cum = _running(atoms.size, lambda a, b: np.maximum(share[a:b], 0.0))
            return cum[a1] - cum[a0]

        def children(
            parents: np.ndarray, a0: np.ndarray, a1: np.ndarray, level: int
        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            """The children on ``level`` of ``parents`` (atoms ``[a0, a1)`` each) and their
            atoms: a parent's first and last bounds are its own, so only the ``β − 1`` inner
            bounds are searched."""
            kids = ((parents << np.uint64(k))[:, None] + np.arange(beta, dtype=np.uint64)).ravel()
            bounds = np.empty((parents.size, beta + 1), dtype=np.int64)
            bounds[:, 0], bounds[:, beta] = a0, a1
            inner = kids.reshape(-1, beta)[:, 1:] << np.uint64(D - level)
            bounds[:, 1:beta] = lay.before(inner.ravel()).reshape(-1, beta - 1)
            return kids, bounds[:, :-1].ravel(), bounds[:, 1:].ravel()

        out_level, out_prefix, out_a0, out_a1 = [], [], [], []

        def new_leaves(nodes: np.ndarray, level: int, a0: np.ndarray, a1: np.ndarray) -> None:
            out_level.append(np.full(nodes.size, level, dtype=np.uint8))
            out_prefix.append(nodes)
            out_a0.append(a0)
            out_a1.append(a1)

        # The split decisions' noise, drawn ahead a block at a time (each value used once:
        # privacy/pool.py); a block is about the nodes a step over the current partition
        # tests (public).
        pool = LaplacePool(self._lam, 2 * self._level.size + 64, self._source)
        active = np.zeros(1, dtype=np.uint64)
        a0, a1 = np.zeros(1, dtype=np.int64), np.full(1, atoms.size, dtype=np.int64)
        kept = 0
        capped = False
        k, beta = self._k, self._fanout
        compiled = kernels.enabled()
        for level in range(0, D + 1, k):
            noise = pool.take(active.size)
            if compiled:  # the same decisions, and the level's leaves and children, in one loop
                got = self._compiled_level(lay, cum_score, active, a0, a1, noise, level, kept)
                if got[0] is not None:
                    left, kids = got
                    new_leaves(left[0], level, left[1], left[2])
                    kept += left[0].size
                    if not kids[0].size:
                        break
                    active, a0, a1 = kids
                    continue
                split = got[1]
            else:
                atom = a1 - a0 == 1  # one atom under the node: is the node that atom?
                one = np.flatnonzero(atom)
                atom[one] = lay.atom_level(a0[one]) == level
                s = cum_score[a1] - cum_score[a0]
                biased = np.maximum(s - (level // k) * self._delta, _THETA - self._delta)
                noisy = biased + noise
                split = (noisy > _THETA) & ~atom & (level < D)
            room = (self._cap - kept - active.size) // (beta - 1)
            if int(split.sum()) > room:
                # The cap: only ``room`` of the splits decided on this level go through, those
                # of the nodes with the most public mass (a function of the decisions and of
                # public values), the others stay leaves; no level below is visited.
                public = public_of(a0, a1)
                chosen = np.flatnonzero(split)
                keep = chosen[np.argsort(-public[chosen], kind="stable")[: max(room, 0)]]
                split[:] = False
                split[keep] = True
                capped = True
            stay = ~split
            new_leaves(active[stay], level, a0[stay], a1[stay])
            kept += int(stay.sum())
            if not split.any():
                break
            active, a0, a1 = children(active[split], a0[split], a1[split], level + k)
            if capped:  # the children of the last splits let through are leaves, untested
                new_leaves(active, level + k, a0, a1)
                break
        level_arr = np.concatenate(out_level)
        prefix = np.concatenate(out_prefix)
        order = np.argsort(
            prefix << (D - level_arr.astype(np.int64)).astype(np.uint64), kind="stable"
        )
        level_arr, prefix = level_arr[order], prefix[order]
        a0, a1 = np.concatenate(out_a0)[order], np.concatenate(out_a1)[order]
        noise = discrete_laplace(self._leaf_scale, prefix.size, rng=self._source)
        noisy_change = cum_change[a1] - cum_change[a0] + noise.astype(np.float64)
        carried = self._carry(
            lay.leaf_of(a0), level_arr, cum_share[a1] - cum_share[a0], noisy_change
        )
        self._level, self._prefix = level_arr, prefix
        self._count = carried + noisy_change
        self._layout()

    def _compiled_level(
        self,
        lay: _Layout,
        cum_score: np.ndarray,
        active: np.ndarray,
        a0: np.ndarray,
        a1: np.ndarray,
        noise: np.ndarray,
        level: int,
        kept: int,
    ) -> tuple[Any, Any]:
        """One level of :meth:`_step` by :func:`sketchsyn.kernels._partition.tree_level` (the
        same decisions): ``(stay, children)``, each ``(nodes, a0, a1)``, or ``(None, split)``
        where the cap acts (the step's cap path goes on from the decisions)."""
        n, k, beta = active.size, self._k, self._fanout
        split = np.empty(n, dtype=np.uint8)
        stay = np.empty(n, dtype=np.uint64)
        stay_a = np.empty((2, n), dtype=np.int64)
        kids = np.empty(beta * n, dtype=np.uint64)
        kids_a = np.empty((2, beta * n), dtype=np.int64)
        ns, nst, nk = kernels.partition.tree_level(
            lay.start, lay.first, lay.shift, lay.mask, lay.r, lay.level, cum_score, active, a0,
            a1, noise, level, self._D, k, beta, (level // k) * self._delta,
            _THETA - self._delta, _THETA, self._cap - kept - n, split, stay, stay_a[0],
            stay_a[1], kids, kids_a[0], kids_a[1],
        )  # fmt: skip
        if nst < 0:
            return None, split.view(bool)
        return (stay[:nst], stay_a[0, :nst], stay_a[1, :nst]), (
            kids[:nk],
            kids_a[0, :nk],
            kids_a[1, :nk],
        )

    def _running_sums(
        self, lay: _Layout, atoms: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The running sums (leading 0, in atom order, added as one cumsum adds them) of the
        scores ``max(max(share, 0) + Δ, 0)``, of the shares (a leaf's previous count, even over
        its atoms) and of the exact changes ``Δ`` of the atoms."""
        share = lay.per_atom(self._count / lay.sizes)
        cum_score = _running(
            atoms.size, lambda a, b: np.maximum(np.maximum(share[a:b], 0.0) + atoms[a:b], 0.0)
        )
        cum_share = _running(atoms.size, lambda a, b: share[a:b])
        return cum_score, cum_share, np.concatenate([[0], np.cumsum(atoms, dtype=np.int64)])

    def _carry(
        self, owner: np.ndarray, level: np.ndarray, covered: np.ndarray, noisy_change: np.ndarray
    ) -> np.ndarray:
        """The previous release's count each new leaf carries (public: a function of the
        previous partition and counts and of the new leaves' noisy changes).

        ``owner``: the previous leaf holding each new leaf's first atom; ``covered``: the
        previous counts under each new leaf, shared evenly among atoms. A new leaf that is a
        previous leaf or a union of them carries ``covered``; the new leaves inside a refined
        previous leaf ``u`` share ``N(u)`` by volume and, as far as ``u`` grew, by their
        positive noisy changes (module docstring).
        """
        n = self._count.size
        lv = level.astype(np.int64)
        inside = np.flatnonzero(lv > self._level[owner].astype(np.int64))
        carried = covered.copy()
        if inside.size:
            u = owner[inside]
            vol = np.ldexp(1.0, -(lv[inside] - self._level[u].astype(np.int64)))
            d = noisy_change[inside]
            grown = np.maximum(d, 0.0)
            total = np.bincount(u, weights=grown, minlength=n)[u]
            where = np.divide(grown, total, out=vol.copy(), where=total > 0)
            # g(u) = max(Σ Δ̃, 0)/Σ |Δ̃|: 1 where the leaf only grew, 0 where it churned.
            moved = np.bincount(u, weights=np.abs(d), minlength=n)[u]
            net = np.bincount(u, weights=d, minlength=n)[u]
            g = np.clip(np.divide(net, moved, out=np.zeros_like(net), where=moved > 0), 0.0, 1.0)
            N = self._count[u]
            mixed = vol + g * (1.0 - _BY_VOLUME) * (where - vol)
            carried[inside] = np.where(N > 0, N * mixed, N * vol)
        return carried

    # ------------------------------------------------------------------ release
    def release(self) -> PrivateDistribution:
        """The private distribution at the last closed step: every leaf with
        ``max(round(count), 0)`` points, uniform in its cell (post-processing, no noise drawn).
        Before the first step closes it is empty."""
        counts = np.maximum(np.rint(self._count), 0.0)
        params = self._params()
        params.pop("domain")
        params |= {"t": self._end(self.steps_closed), "step": self.steps_closed}
        if counts.sum() <= 0:
            level, prefix, counts = np.zeros(1, np.int64), np.zeros(1, np.uint64), np.zeros(1)
        else:
            keep = np.flatnonzero(counts)
            level, prefix, counts = (
                self._level[keep].astype(np.int64),
                self._prefix[keep],
                counts[keep],
            )
        return PrivateDistribution(
            self._domain, level, prefix, counts, epsilon=self._epsilon, mechanism=_KIND,
            params=params,
        )  # fmt: skip

    # ------------------------------------------------------------------ bytes
    def _state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Parameters, the partition with its released counts and the exact atom counts of
        the open step (a trusted curator's state). A loaded copy must not continue a stream
        that its original also continues: their later steps would draw different noise."""
        meta = self._params() | {
            "t": self._t,
            "frozen": self._frozen,
            "lineage": self._lineage.to_meta(),
        }
        arrays = {
            "level": self._level,
            "prefix": self._prefix,
            "count": self._count,
            "atoms": self._open_atoms(),
        }
        return meta, arrays

    @classmethod
    def _from_state(
        cls, fields: MetaReader, arrays: Arrays, version: int, blob: bytes, rng: Any
    ) -> StreamingPrivTree:
        """Every field and array checked before the state is built (later noise comes from
        the OS CSPRNG)."""
        domain = fields.domain()
        horizon = fields.int("horizon", minimum=1, maximum=2**62)
        try:
            obj = cls(
                domain,
                fields.epsilon("epsilon"),
                horizon=horizon,
                releases=fields.int("releases", minimum=1, maximum=horizon),
                steps_per_release=fields.int("steps_per_release", minimum=1, maximum=2**20),
                memory_bytes=fields.int("memory_bytes", minimum=64, maximum=2**32),
                refine=fields.int("refine", minimum=1, maximum=20),
                fanout=fields.int("fanout", minimum=2, maximum=256),
                tree_fraction=fields.float("tree_fraction", minimum=1e-9, maximum=1 - 1e-9),
                max_depth=fields.int("max_depth", minimum=1, maximum=MAX_DEPTH),
                rng=None,
            )
        except ParameterError as exc:
            raise SerializationError(
                f"{_KIND} blob header fields are inconsistent: {exc}"
            ) from None
        t = fields.int("t", minimum=0, maximum=horizon)
        frozen = fields.bool("frozen")
        lineage = fields.lineage()
        if "level" not in arrays:
            raise SerializationError(f"{_KIND} blob lacks the array 'level'")
        n = int(np.asarray(arrays["level"]).size)
        if not 1 <= n <= obj._cap:
            raise SerializationError(
                f"{_KIND} blob array 'level' has {n} leaves; max_leaves is {obj._cap}"
            )
        level = fields.array(arrays, "level", np.uint8, (n,))
        prefix = fields.array(arrays, "prefix", np.uint64, (n,))
        count = fields.array(arrays, "count", np.float64, (n,))
        D = obj._D
        lv = level.astype(np.int64)
        if (lv > D).any() or (lv % obj._k).any() or (prefix >> lv.astype(np.uint64) != 0).any():
            raise SerializationError(f"{_KIND} blob array 'prefix' has a cell outside the domain")
        start = prefix << (D - lv).astype(np.uint64)
        width = np.left_shift(np.uint64(1), (D - lv).astype(np.uint64))
        if (
            start[0] != 0
            or (start[1:] != start[:-1] + width[:-1]).any()
            or int(start[-1] + width[-1] - np.uint64(1)) != 2**D - 1
        ):
            raise SerializationError(
                f"{_KIND} blob arrays 'level' and 'prefix' are not a partition of the domain "
                "in Morton order"
            )
        if not np.isfinite(count).all():
            raise SerializationError(f"{_KIND} blob array 'count' has a value that is not finite")
        obj._level, obj._prefix, obj._count = level.copy(), prefix.copy(), count.copy()
        obj._layout()  # arithmetic on the n leaves only; the atoms come from the blob
        atoms = fields.array(arrays, "atoms", obj._dtype, (obj._used,))
        fields.done(arrays)
        open_events = t - obj._end(obj._steps_of(t))
        if int(np.abs(atoms.astype(np.int64)).sum()) > open_events:
            raise SerializationError(
                f"{_KIND} blob array 'atoms' counts more than the {open_events} events of "
                "the open step"
            )
        obj._atoms = atoms.copy()
        obj._t, obj._frozen, obj._lineage = t, frozen, lineage
        return obj

    def __repr__(self) -> str:
        return (
            f"{_KIND}(epsilon={self._epsilon}, horizon={self._horizon}, "
            f"releases={self._releases}, steps_per_release={self._per}, t={self._t}, "
            f"leaves={self.n_leaves}, nbytes={self.nbytes})"
        )
