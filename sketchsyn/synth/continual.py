"""Continual-release PrivHP: a private release at every step, in memory that does not grow.

Holland et al., Appendix A. Step one: every counter of the levels ``0 … L_k`` and every cell
of every level sketch ``L_k+1 … r`` becomes a continual counter, the **binary mechanism** over a
finite public ``horizon`` ``T`` of steps. Step two (keep the partition between releases and
promote pruned nodes that become hot) was built and measured against regrowing the tree at each
release (commit c3b6405, d = 2, k = 64, w = 256): between two releases 1 024 or 65 536 rows apart
90–94 % of the sketch levels' expanded sets change (the noise reorders near-ties), and the median
release took the same time either way (22.0 ms reused against 22.5 ms regrown on uniform rows;
29.3 against 28.8 ms on Beta(2, 5) rows). So ``release()`` regrows the tree from the noisy state
(``tree.grow_partition``, post-processing), which is by construction the tree a promotion scheme
must reproduce.

**A step** is one row: ``update(x)`` is one step, ``update_many(X)`` is ``len(X)`` consecutive
steps (row ``i`` of the batch is step ``t + 1 + i``), ``skip(n)`` is ``n`` empty steps (no row).
After step ``t`` the state answers for the rows of steps ``1 … t``; ``release()`` may be called
at any step, any number of times, and all releases together are covered by the one ε.

Binary mechanism, lazily. Step ``s`` lies in the dyadic blocks ``(i, ceil(s / 2**i))``,
``i = 0 … h − 1`` with ``h = floor(log2 T) + 1``; block ``(i, m)`` covers steps
``((m − 1)·2**i, m·2**i]`` and its noisy p-sum is the exact sum of the cell's increments over
those steps plus one draw of ``Lap_Z(b)``. The value released at step ``t`` is the sum of the
noisy p-sums of the blocks ``(i, t >> i)`` for the set bits ``i`` of ``t``, that is the exact
count after step ``t`` plus the noise of those ``popcount(t)`` p-sums. A p-sum's noise is
independent of the data, so instead of drawing it when the block closes (``w·j`` draws per
sketch level per closed block: about one draw per cell per step, far too slow for 10⁵ rows/s)
it is drawn the first time a release reads that cell while the block is current, stored in the
cell's slot ``i`` with the block number, and reused by every later release in the block. Every
p-sum's noise is drawn at most once, so the released values have exactly the binary
mechanism's distribution, and cells never read draw nothing. The updates are one-pass PrivHP's
exact bincount (the exact state is a raw :class:`~sketchsyn.synth.privhp.PrivHP`).

Privacy: pure ε-DP, **event level**, neighbours differ in **one row added or removed at one
step** (the step itself stays: the neighbour has an empty step there), for **all releases
together** at any steps ``≤ T``. A row changes at most ``h`` p-sums of one counter per counter
level and of ``j`` cells per sketch level, so with the per-level budgets ``σ_l`` of Lemma 5
(``privhp_allocation``, ``Σ σ_l = ε``) the noise scale is ``h/σ_l`` on counter levels and
``j·h/σ_l`` on sketch levels: each level is ``σ_l``-DP over the whole stream and the levels
compose to ε. The step count ``t`` is public (each release states it): if rows arrive in time,
make a step a time slot and ``skip()`` empty slots, so that ``t`` is the clock and not a count.

State: this is a trusted curator's state (``STATE_PRIVACY = "trusted"``). It holds the
**exact** running counts plus the noise drawn so far; ``to_bytes`` writes both. Only releases
are private. (That is the price of the lazy noise: a binary mechanism that draws each p-sum's
noise when the p-sum opens keeps noisy values only, at one draw per cell per step.) One object
is used by one thread at a time (a second thread entering an update or a release gets
:class:`~sketchsyn.errors.ConcurrentUseError`).
Memory, fixed at construction::

    nbytes = 8·C·(1 + h) + C·h + 8·h + 8·1024 + 8·(r + 1) + 64,  C = w·j·(r − L_k) + 2^{L_k+1} − 1

bytes: per cell its exact count, ``h`` noise slots (slot ``i`` holds the noise of the level-``i``
block current at the last release) and ``h`` one-byte "drawn" flags, plus the block number of
each slot, and 1 024 codes of single rows not yet counted; ``O((w·j·(r − L_k) + 2^{L_k}) · log T)``
words.

>>> import numpy as np
>>> from sketchsyn import Box, ContinualPrivHP
>>> X = np.random.default_rng(0).beta(2, 5, size=(5_000, 2))
>>> c = ContinualPrivHP(Box.unit(2), 1.0, k=8, width=64, horizon=2**13, depth=10, rng=1)
>>> c.update_many(X[:1000])
>>> c.release().sample(3, rng=2).shape
(3, 2)
>>> c.update_many(X[1000:])
>>> c.t, c.release().sample(3, rng=2).shape
(5000, (3, 2))
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..errors import (
    IncompatibleError,
    InputError,
    ReleasedError,
    SerializationError,
    check_choice,
    check_domain,
    check_epsilon,
    check_int,
    check_memory,
)
from ..io.serial import MetaReader
from ..io.stream import consume
from ..io.summary import Summary
from ..privacy import accounting
from ..privacy.lineage import Lineage, UsageGuard
from ..privacy.noise import discrete_laplace, discrete_laplace_variance
from ..privacy.rng import RNGLike, as_source
from ..synth import tree
from ..synth.distribution import PrivateDistribution
from ..synth.privhp import PrivHP

__all__ = ["ContinualPrivHP", "binary_levels"]

_KIND = "ContinualPrivHP"
_HEADER_BYTES = 64
# Rows given one at a time (``update``) are encoded at once and counted in groups of this many.
_PENDING = 1024


def binary_levels(horizon: int) -> int:
    """``h = floor(log2 T) + 1``: the p-sum levels of the binary mechanism over ``T`` steps.

    A row lies in at most ``h`` p-sums of its cell (its sensitivity factor).

    >>> binary_levels(1), binary_levels(16), binary_levels(2**24 - 1)
    (1, 5, 24)
    """
    return int(check_int(horizon, "horizon", "binary_levels", minimum=1)).bit_length()


class ContinualPrivHP(Summary):
    """PrivHP released at every step of a stream of at most ``horizon`` rows (ε-DP, event level).

    Saved state: **trusted** (``STATE_PRIVACY = "trusted"``): the bytes hold the exact running
    counts (open partial sums) with the noise drawn so far; only releases are private.

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
        Public number of steps ``T`` the stream may last (one row per step); updates past it
        are refused.
    rng : None, int, SeedSequence or Generator
        Noise randomness; ``None`` (default) is the OS CSPRNG. A seed is for tests only and
        **not private against anyone who knows it**.

    Attributes
    ----------
    sigmas : ndarray
        ``σ_0 … σ_r`` (Lemma 5), summing to ``epsilon``.
    noise_scales : ndarray
        Integer Laplace scale of one p-sum on each level: ``h/σ_l`` or ``j·h/σ_l``.
    """

    STATE_PRIVACY = "trusted"
    FORMAT_VERSION = 1

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
        self._h = binary_levels(self._horizon)
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
        # One p-sum's scale h·(1 or j)/σ_l, rounded up so that the realised budget is at most
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
            9 * n_cells * self._h,
            owner,
            f"{n_cells} cells × h={self._h} noise slots (horizon={self._horizon})",
        )
        self._noise = np.zeros((n_cells, self._h), dtype=np.int64)
        # Slot i of every cell belongs to the level-i block _block[i] (0: none yet); _drawn marks
        # the cells whose noise for that block was drawn.
        self._drawn = np.zeros((n_cells, self._h), dtype=np.bool_)
        self._block = np.zeros(self._h, dtype=np.int64)
        self._source = as_source(rng)
        self._streams = self._source.spawn(r + 1)
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

    # ------------------------------------------------------------------ parameters
    @property
    def domain(self) -> Any:
        """The public domain."""
        return self._exact.domain

    @property
    def epsilon(self) -> float:
        """Total ε of all releases together (event level, add/remove one row)."""
        return self._exact.epsilon

    @property
    def k(self) -> int:
        """Pruning parameter."""
        return self._exact.k

    @property
    def width(self) -> int:
        """Sketch width ``w``."""
        return self._exact.width

    @property
    def sketch_depth(self) -> int:
        """Sketch rows ``j``."""
        return self._exact.sketch_depth

    @property
    def depth(self) -> int:
        """Depth ``r`` of the hierarchy."""
        return self._exact.depth

    @property
    def L_k(self) -> int:  # noqa: N802 (the paper's name)
        """Deepest level with counters."""
        return self._exact.L_k

    @property
    def horizon(self) -> int:
        """Public horizon ``T`` (steps)."""
        return self._horizon

    @property
    def binary_levels(self) -> int:
        """``h = floor(log2 T) + 1`` noise slots per cell."""
        return self._h

    @property
    def t(self) -> int:
        """Steps taken so far (public: every release states it)."""
        return self._t

    @property
    def sigmas(self) -> np.ndarray:
        """Per-level budgets ``σ_0 … σ_r`` (a copy); they sum to ``epsilon``."""
        return self._sigmas.copy()

    @property
    def noise_scales(self) -> np.ndarray:
        """Scale of one p-sum's ``Lap_Z`` noise per level: ``h/σ_l`` or ``j·h/σ_l``."""
        return self._scales.copy()

    @property
    def lineage(self) -> Lineage:
        """Identity of this object's noise draws (shared by its copies and saved bytes)."""
        return self._lineage

    @property
    def nbytes(self) -> int:
        """``8·C·(1 + h) + C·h + 8·h + 8·1024 + 8·(r + 1) + 64`` bytes (``C`` cells, module doc).

        Fixed at construction. ``release()`` works in ``O(k·r·j)`` further words.
        """
        ex = self._exact
        return int(
            ex._tree.nbytes
            + ex._bank.nbytes
            + self._noise.nbytes
            + self._drawn.nbytes
            + self._block.nbytes
            + self._pending.nbytes
            + self._sigmas.nbytes
            + _HEADER_BYTES
        )

    @staticmethod
    def memory_bytes(k: int, width: int, sketch_depth: int, depth: int, horizon: int) -> int:
        """The ``nbytes`` of a ContinualPrivHP with these parameters, without building it.

        >>> ContinualPrivHP.memory_bytes(k=64, width=256, sketch_depth=3, depth=24, horizon=2**24)
        3259239
        """
        L_k = min(int(k).bit_length() - 1, depth)
        cells = width * sketch_depth * (depth - L_k) + 2 ** (L_k + 1) - 1
        h = binary_levels(horizon)
        fixed = 8 * h + 8 * _PENDING + 8 * (depth + 1) + _HEADER_BYTES
        return 8 * cells * (1 + h) + cells * h + fixed

    def _params(self) -> dict[str, Any]:
        params = self._exact._params()
        params.pop("allocation")
        params.pop("neighbours")
        return params | {"horizon": self._horizon}

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
                f"horizon {self._horizon}; the binary mechanism covers only the first "
                f"{self._horizon} steps"
            )

    def update(self, x: Any) -> None:
        """One step with one row (a point of the domain)."""
        arr = np.asarray(x)
        d = self._exact.domain.d
        if arr.ndim == 0 or (arr.ndim == 1 and (d > 1 or arr.shape[0] == 1)):
            arr = arr.reshape(1, -1) if d > 1 else arr.reshape(1)
        else:
            raise InputError(
                f"update(x) takes one point of dimension {d}; got an array of shape "
                f"{arr.shape}. Use update_many for batches."
            )
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

    def _flush(self) -> None:
        """Count the pending single rows into the exact state (PrivHP's per-batch counting)."""
        n = self._n_pending
        if n:
            ex = self._exact
            tree_counts, bank_counts = ex._level_counts(self._pending[:n])
            ex._tree += tree_counts
            ex._bank += bank_counts
            ex._n_seen += n
            self._n_pending = 0

    def update_many(self, X: Any) -> None:
        """``len(X)`` consecutive steps, one row each. The batch is checked whole first."""
        arr = np.asarray(X)
        rows = 1 if arr.ndim == 0 else int(arr.shape[0])
        with self._usage.enter(_KIND):
            self._check_open(rows)
            self._flush()
            before = self._exact.n_seen + self._exact.n_dropped
            self._exact.update_many(arr)
            self._t += self._exact.n_seen + self._exact.n_dropped - before

    def skip(self, n: int = 1) -> None:
        """``n`` empty steps (no row)."""
        n = check_int(n, "n", "ContinualPrivHP.skip", minimum=0)
        with self._usage.enter(_KIND):
            self._check_open(n)
            self._t += n

    def consume(self, iterable: Iterable[Any], batch_size: int = 65536) -> int:
        """Stream an iterable of rows through ``update_many`` (one step per row)."""
        self._check_open(0)
        return consume(self.update_many, iterable, batch_size, self._exact.domain.d)

    # ------------------------------------------------------------------ noisy values
    def _noisy(self, cells: np.ndarray) -> np.ndarray:
        """Released values (int64) at step ``t`` of the sorted unique global ``cells``.

        Draws the noise of every p-sum of ``t``'s decomposition that a cell reads for the first
        time (one ``discrete_laplace`` call per level), stores it with its block number, and
        adds the stored noise of the others.
        """
        self._flush()
        t = self._t
        ex = self._exact
        exact = np.where(
            cells < self._n_tree,
            ex._tree[np.minimum(cells, self._n_tree - 1)],
            ex._bank.reshape(-1)[np.maximum(cells - self._n_tree, 0)],
        )
        bits = np.array([i for i in range(self._h) if (t >> i) & 1], dtype=np.intp)
        if bits.size == 0:
            return exact
        blocks = np.array([t >> int(i) for i in bits], dtype=np.int64)
        for i, m in zip(bits.tolist(), blocks.tolist(), strict=True):
            if self._block[i] != m:  # a new block at level i: no cell has its noise yet
                self._drawn[:, i] = False
                self._block[i] = m
        stale_cell, stale_bit = np.nonzero(~self._drawn[cells[:, None], bits[None, :]])
        if stale_cell.size:
            rows = cells[stale_cell]
            level_of = np.searchsorted(self._offsets, rows, side="right") - 1
            order = np.argsort(level_of, kind="stable")
            rows, cols, level_of = rows[order], bits[stale_bit[order]], level_of[order]
            bounds = np.searchsorted(level_of, np.arange(self.depth + 2))
            for level in range(self.depth + 1):
                lo, hi = bounds[level], bounds[level + 1]
                if hi > lo:
                    self._noise[rows[lo:hi], cols[lo:hi]] = discrete_laplace(
                        float(self._scales[level]), int(hi - lo), rng=self._streams[level]
                    )
            self._drawn[rows, cols] = True
        return exact + self._noise[cells[:, None], bits[None, :]].sum(axis=1)

    def cell_values(self, level: int) -> np.ndarray:
        """The released (noisy) values of every cell of ``level`` at step ``t``.

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

    def _grow(self) -> Any:
        """The grown partition tree at step ``t`` (post-processing of noisy values only)."""
        L = self.L_k
        counts = self._noisy(np.arange(self._n_tree, dtype=np.int64)).astype(np.float64)
        top = tree.consistent_levels(
            [counts[2**level - 1 : 2 ** (level + 1) - 1] for level in range(L + 1)]
        )

        def query(level: int, prefixes: np.ndarray) -> np.ndarray:
            cells, signs = self._query_cells(level, prefixes)
            uniq, inverse = np.unique(cells, return_inverse=True)
            values = self._noisy(uniq)[inverse.reshape(cells.shape)].astype(np.float64)
            if signs is None:
                return values.min(axis=0)
            return np.median(values * signs, axis=0)

        return tree.grow_partition(top, query, self.k, self.depth)

    def release(self) -> PrivateDistribution:
        """The private distribution at the current step ``t`` (any step, any number of times).

        Releases at one step read the same noise, so they are equal.
        """
        with self._usage.enter(_KIND):
            return self._release()

    def _release(self) -> PrivateDistribution:
        if self._last is not None and self._last[0] == self._t:
            return self._last[1]
        grown = self._grow()
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
            params=params | {"t": self._t},
        )
        self._last = (self._t, dist, grown)
        return dist

    @property
    def partition_tree(self) -> Any:
        """The grown tree of the last release (post-processing); ``ReleasedError`` before one."""
        if self._last is None:
            raise ReleasedError("partition_tree exists only after release()")
        return self._last[2]

    # ------------------------------------------------------------------ copy, merge, save
    def _fill(self) -> None:
        """Draw (once) every noise slot step ``t`` reads, for every cell."""
        self._noisy(np.arange(self._noise.shape[0], dtype=np.int64))

    def merge(self, other: ContinualPrivHP) -> None:
        """Append the rows of ``other`` as the next ``other.t`` steps of this stream.

        Sound only when ``other`` never released anything (it drew no noise: its rows have
        spent no budget yet) and ``self.t + other.t ≤ horizon``; then the result is exactly the
        binary mechanism on this stream followed by ``other``'s, and ``other`` is closed.
        Parameters and hash seed must match.
        """
        self._check_open(0)
        if not isinstance(other, ContinualPrivHP):
            raise IncompatibleError(f"can only merge a ContinualPrivHP, got {type(other)!r}")
        if other is self:
            raise IncompatibleError("cannot merge a ContinualPrivHP with itself")
        mine, theirs = self._params(), other._params()
        for key in mine:
            if mine[key] != theirs[key]:
                raise IncompatibleError(
                    f"cannot merge ContinualPrivHP summaries with different {key!r}: "
                    f"{mine[key]!r} != {theirs[key]!r}"
                )
        if other._frozen or other._absorbed or bool(other._block.any()):
            raise IncompatibleError(
                "cannot merge a ContinualPrivHP that has released, been snapshotted or merged: "
                "its rows were already released under its own noise"
            )
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

        Every noise slot step ``t`` reads is drawn first (once), so a loaded copy or a snapshot
        releases at step ``t`` exactly what this object releases and never draws a second
        noise for one p-sum. A loaded copy must not continue a stream that its original also
        continues: the two would draw different noise for the same later p-sums and their
        releases together would spend the budget twice.
        """
        if not self._frozen:
            self._fill()
        self._flush()
        ex = self._exact
        meta = self._params() | {
            "t": self._t,
            "frozen": self._frozen,
            "lineage": self._lineage.to_meta(),
        }
        arrays = {
            "tree": ex._tree,
            "bank": ex._bank,
            "noise": self._noise,
            "drawn": self._drawn,
            "block": self._block,
        }
        return meta, arrays

    @classmethod
    def _from_state(
        cls,
        fields: MetaReader,
        arrays: dict[str, np.ndarray],
        version: int,
        blob: bytes,
        rng: Any,
    ) -> ContinualPrivHP:
        """Check every field and every array against the parameters, then build (later noise
        comes from the OS CSPRNG)."""

        domain = fields.domain()
        epsilon = fields.epsilon("epsilon")
        k = fields.int("k", minimum=1, maximum=2**62)
        width = fields.int("width", minimum=1, maximum=2**40)
        sketch_depth = fields.int("sketch_depth", minimum=1, maximum=2**20)
        depth = fields.int("depth", minimum=1, maximum=int(domain.max_depth))
        seed = fields.int("seed", minimum=0, maximum=2**32 - 1)
        horizon = fields.int("horizon", minimum=1, maximum=2**62)
        t = fields.int("t", minimum=0, maximum=horizon)
        sketch = fields.str("sketch", ("count-min", "count-sketch"))
        frozen = fields.bool("frozen")
        lineage = fields.lineage()
        # The shapes the parameters give, checked against the arrays before anything is built.
        L = min(k.bit_length() - 1, depth)
        n_tree = 2 ** (L + 1) - 1
        n_cells = n_tree + width * sketch_depth * (depth - L)
        h = binary_levels(horizon)
        try:
            tree_a = fields.array(arrays, "tree", np.int64, (n_tree,))
            bank_a = fields.array(arrays, "bank", np.int64, (depth - L, sketch_depth, width))
            noise_a = fields.array(arrays, "noise", np.int64, (n_cells, h))
            drawn_a = fields.array(arrays, "drawn", np.bool_, (n_cells, h))
            block_a = fields.array(arrays, "block", np.int64, (h,))
        except SerializationError as exc:
            raise SerializationError(
                f"{exc} (header fields k={k}, width={width}, sketch_depth={sketch_depth}, "
                f"depth={depth}, horizon={horizon})"
            ) from None
        if set(arrays) != {"tree", "bank", "noise", "drawn", "block"}:
            raise SerializationError(f"{_KIND} blob holds unexpected arrays {sorted(arrays)}")
        n_seen = int(tree_a[0])
        levels_ok = all(
            int(tree_a[2**level - 1 : 2 ** (level + 1) - 1].sum()) == n_seen
            for level in range(L + 1)
        )
        if not (0 <= n_seen <= t) or (tree_a < 0).any() or not levels_ok:
            raise SerializationError(
                f"{_KIND} blob array 'tree' is not a hierarchy of exact counts of at most "
                f"t={t} rows"
            )
        if (
            sketch == "count-min"
            and bank_a.size
            and ((bank_a < 0).any() or (bank_a.sum(axis=2) != n_seen).any())
        ):
            raise SerializationError(
                f"{_KIND} blob array 'bank' is not a Count-Min bank of {n_seen} rows"
            )
        if sketch == "count-sketch" and bank_a.size and (np.abs(bank_a) > n_seen).any():
            raise SerializationError(f"{_KIND} blob array 'bank' has counts above {n_seen}")
        if noise_a.size and int(np.abs(noise_a).max()) >= 2**52:
            raise SerializationError(f"{_KIND} blob array 'noise' holds values out of range")
        if drawn_a.size and int(drawn_a.view(np.uint8).max()) > 1:
            raise SerializationError(f"{_KIND} blob array 'drawn' holds non-boolean bytes")
        limits = np.array([t >> i for i in range(h)], dtype=np.int64)
        if (block_a < 0).any() or (block_a > limits).any():
            raise SerializationError(
                f"{_KIND} blob array 'block' names blocks past step t={t}: {block_a.tolist()}"
            )
        obj = cls(
            domain,
            epsilon,
            k,
            width,
            horizon=horizon,
            sketch_depth=sketch_depth,
            depth=depth,
            sketch=sketch,
            seed=seed,
            rng=None,
        )
        ex = obj._exact
        ex._tree[...] = tree_a
        ex._bank[...] = bank_a
        obj._noise[...] = noise_a
        obj._drawn[...] = drawn_a
        obj._block[...] = block_a
        obj._t = t
        # The inner exact state counts the rows; only differences of n_seen are used.
        ex._n_seen = n_seen
        obj._frozen = frozen
        obj._lineage = lineage
        return obj

    def cell_variance(self, level: int, t: int | None = None) -> float:
        """Variance of one released cell of ``level`` at step ``t``: ``popcount(t)·Var Lap_Z(b)``.

        >>> from sketchsyn import Box
        >>> c = ContinualPrivHP(Box.unit(1), 1.0, k=2, width=8, horizon=16, depth=4, rng=0)
        >>> c.cell_variance(3, t=16) * 3 == c.cell_variance(3, t=7)
        True
        """
        t = self._t if t is None else check_int(t, "t", "cell_variance", 0, self._horizon)
        return bin(t).count("1") * discrete_laplace_variance(float(self._scales[level]))

    def __repr__(self) -> str:
        return (
            f"ContinualPrivHP(epsilon={self.epsilon}, k={self.k}, width={self.width}, "
            f"sketch_depth={self.sketch_depth}, depth={self.depth}, horizon={self._horizon}, "
            f"t={self._t}, nbytes={self.nbytes})"
        )
