"""PrivHP: one-pass private synthetic data in bounded memory (Holland et al., Algorithms 2–4).

The domain is cut in half level by level (``domain.encode`` gives each item its Morton code).
Levels ``0 … L_c`` (``counter_depth``) keep an exact counter for every cell, each started at
``Lap_Z(1/σ_l)``; every deeper level ``L_c+1 … r`` keeps one private Count-Min (or Count Sketch)
of ``width × sketch_depth`` cells, each started at ``Lap_Z(sketch_depth/σ_l)``. The paper puts
the boundary at ``L_k = floor(log2 k)``; by default ``L_c = max(L_k, floor(log2(w·j)))``
(clipped to ``r``), because a level of at most ``w·j`` cells is no larger as exact counters and
has neither collisions nor the factor ``j`` in its noise (docs/utility.md has the figures).
The state is therefore private at every moment, and ``Σ σ_l = ε`` (Theorem 2). ``release()``
makes the top of the tree consistent (Hay et al.'s least squares over the counter levels, then
the even split), grows it level by level through the top-``release_k``
cells of each level using the sketches' estimates (Algorithm 3, even-split consistency of
Algorithm 4) and returns a :class:`~sketchsyn.synth.distribution.PrivateDistribution`.

Privacy: pure ε-DP, event level, **add/remove one item** (``neighbours="add-remove"``, the
paper's Theorem 2). Under replace-one neighbours the same noise gives 2ε; pass
``neighbours="replace"`` to double every noise scale so that the object is ε-DP for replace-one.
With a privacy unit (``unit="client", max_rows=L``) the guarantee is **user level**: all rows of
one unit, at most ``L`` kept. A :class:`~sketchsyn.units.ContributionBounder` passes on at most
``L`` rows of each unit (the first ones), and every noise scale is multiplied by ``2L``, the
most by which the kept rows of two streams differing in one unit can differ (the proof is on the
privacy page); with ``"replace"`` (one unit's rows replaced by others) by ``4L``. The bounder's
table is trusted state (fingerprints of the units): a state saved with it is a curator's file,
while the noisy counters alone (``to_bytes(include_bounder=False)``, :meth:`PrivHP.flush`)
stay private at the user level.
A PrivHP object is single-threaded: an update from a second thread while one is running raises
:class:`~sketchsyn.errors.ConcurrentUseError` (it uses two worker threads of its own inside
``update_many`` for large batches). Use ``merge`` to combine summaries built in parallel
(processes, machines, Dask tasks: objects pickle through ``to_bytes``).

Deletions. ``remove_many(X)`` / ``remove(x)`` take earlier rows out as updates of weight −1 (the
levels are linear). Privacy unit: one insertion or one removal is one event; a row inserted then
removed is two. One event moves one cell per level by one, as an insertion does, so the same noise
keeps the state ε-DP for streams differing in one event. Count-Min is kept: while each removal
removes an earlier insertion (strict turnstile) every net count stays ≥ 0, so each cell still
over-counts its keys and the minimum keeps its one-sided error (Cormode and Muthukrishnan, "An
improved data stream summary: the count-min sketch and its applications"). Removing a row never
inserted makes a negative net count, under which Count-Min can underestimate the other keys of
its cells (Count Sketch stays unbiased). A ``raw=True`` summary holding its whole stream refuses
such a removal (a counter cell would go below zero: the check reads exact counts only and never
fires on a valid stream); a private one keeps no exact count, cannot know, and applies it as a
row of weight −1. The release clamps negative cells to zero (the consistency step).

Public parameters (not protected): the domain bounds, ``k``, ``width``, ``sketch_depth``, ``depth``,
the hash ``seed`` and the allocation. The number of rows dropped by an out-of-bounds policy of
``"drop"`` (``n_dropped``), a table's values changed by a column policy (``adjusted``),
``n_seen`` and ``n_removed`` are exact, non-private diagnostics:
they stay in memory, are not part of the release, and are left out of ``to_bytes`` (and pickle)
unless asked for by name (``to_bytes(include_diagnostics=True)``, a local checkpoint).

What the bytes reveal. ``to_bytes()`` of a private PrivHP holds the public parameters, the noisy
counters and sketch tables, its lineage (the identity of its noise draw) and, once released, the
release: it is ε-DP on its own. Every copy (snapshot, deepcopy, pickle, bytes) holds the same noise
draw; in one process they share one release guard, so that draw is released at one stream position
only, and ``merge`` refuses two operands sharing a draw. Nothing can stop two processes from
publishing two copies at different positions (their difference is the exact count of the rows in
between): to report periodically, keep a ``raw=True`` summary and ship :meth:`PrivHP.flush`.

>>> import numpy as np
>>> from sketchsyn import Box, PrivHP
>>> X = np.random.default_rng(0).beta(2, 5, size=(20_000, 2))
>>> php = PrivHP(Box.unit(2), epsilon=1.0, k=16, width=256, depth=12, rng=1)
>>> php.update_many(X)
>>> release = php.release()
>>> release.sample(5, rng=2).shape
(5, 2)
>>> round(float(php.sigmas.sum()), 12)
1.0
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ...attributes import ReadOnly
from ...domains import domain_from_dict
from ...errors import (
    ParameterError,
    ReleasedError,
    check_bool,
    check_choice,
    check_domain,
    check_epsilon,
    check_int,
    check_memory,
)
from ...io.serial import Arrays, MetaReader
from ...io.stream import consume
from ...io.summary import Summary
from ...privacy import accounting
from ...privacy.lineage import Lineage, UsageGuard, state_digest
from ...privacy.noise import discrete_laplace
from ...privacy.rng import RNGLike, as_source
from ...sketches.sketch import CountMinSketch, CountSketch
from ...units.bounder import ContributionBounder
from ...units.level import UnitLevel
from .. import tree
from ..distribution import PrivateDistribution
from . import loading
from .bank import LevelBank
from .budgets import level_budgets
from .combine import Combine
from .loading import ALLOCATIONS, KIND, NEIGHBOURS, SKETCHES
from .pending import PendingCounts
from .release import least_squares_levels, noisy_state, release_once
from .sizing import HEADER_BYTES, Sizing

__all__ = ["PrivHP"]

# The least-squares step lives in .release; the old private name stays.
_least_squares_levels = least_squares_levels
_SKETCHES = dict(zip(SKETCHES, (CountMinSketch, CountSketch), strict=True))  # name -> class


class PrivHP(Combine, LevelBank, Sizing, UnitLevel, Summary):
    """One-pass PrivHP summary (pure ε-DP synthetic data generator in bounded memory).

    Saved state: **private** (public parameters, noisy counters and sketches, the lineage),
    or **trusted** for a ``raw=True`` summary, for ``to_bytes(include_diagnostics=True)``,
    which adds the exact ``n_seen``, ``n_removed`` and ``n_dropped``, and for a summary with
    a privacy unit saved with its bounder (the default; ``include_bounder=False`` leaves it
    out); ``state_privacy`` and the blob header say which.

    Parameters
    ----------
    domain : Box, BitDomain or Schema
        Public domain; its ``encode`` turns points into Morton codes. On a table
        (:class:`~sketchsyn.domains.Schema`) each level of the tree halves one column's codes,
        round robin over the columns that still have bits: a categorical column is split into
        halves of its category list (by index, 2 categories of 3 on one side), an integer
        column into halves of its range, a numeric or datetime column at the middle of its
        interval, a boolean once (false, true), an IPv4 column by address prefix (a ``/l``
        network); a cell holding no value of a column (unused codes past the last category
        or integer) takes no mass from its siblings. Best for 2–3 columns read together (a cell
        holds ``depth/d`` bits of each); beyond them each column keeps only a few bits and a
        sample is uniform inside its cell: on tables of 9–12 columns at ε = 1 its 2-way TVD is
        0.26–0.57 against the :class:`~.MarginalSynthesizer`'s 0.03–0.09, the one for a wide
        table (``benchmarks/bench_tables.py``).
    epsilon : float
        Total privacy budget ε > 0; split over the levels as ``σ_0 … σ_r`` (``sigmas``).
    k : int
        Pruning parameter of the paper (``k ≥ 1``): fixes ``L_k = floor(log2 k)``, the least
        counter depth, and is the default ``release_k``. With
        ``k ≥ 2**depth`` every level keeps exact counters, no sketch is used, and PrivHP is the
        full-tree mechanism (memory ``O(2**depth)``).
    width : int
        Width ``w`` of each level's sketch.
    sketch_depth : int, default 3
        Rows ``j`` of each level's sketch.
    depth : int, optional
        Depth ``r`` of the hierarchy (``1 ≤ r ≤ domain.max_depth``). Derived from
        ``expected_n`` when not given (``r = ceil(log2(ε n))``, minus one for d = 1).
    expected_n : int, optional
        Expected stream length, used only to choose ``depth``. It is a public guess, not data.
    sketch : {"count-min", "count-sketch"}
        Sketch used on the levels below ``counter_depth``.
    allocation : {"optimal", "uniform"}
        Per-level budget split: Lemma 5 (eq. 23) or ``ε/(r+1)`` per level.
    seed : int
        Public hash seed; the level-``l`` sketch hashes with seed ``seed + l`` (mod 2**32).
        Objects that should merge must share it.
    rng : None, int, SeedSequence or Generator
        Noise randomness; ``None`` (default) is the OS CSPRNG. A seed makes the noise
        reproducible and **not private against anyone who knows it**.
    neighbours : {"add-remove", "replace"}
        Neighbouring relation the ε guarantee refers to (``"replace"`` doubles every noise scale).
    raw : bool, default False
        When True no noise is added at construction: the state is **not private** and the noise is
        drawn once at ``release()``. Use it to merge exact summaries from trusted collectors, or
        as a local collector that ships private deltas with :meth:`flush`.
    counter_depth : int, optional
        ``L_c``, the deepest level with exact counters (``0 ≤ L_c ≤ r``); ``None`` is the rule
        of :meth:`auto_counter_depth`. Pass ``L_k`` for the paper's layout.
    release_k : int, optional
        Cells expanded per level by ``release()`` below ``L_c`` (the sketches answer any query,
        so it may exceed ``k``). ``None`` is the rule of :meth:`auto_release_k`. It enters the
        budget split (Lemma 5), so it is fixed at construction.
    unit : str, optional
        The privacy unit's column (``"client"``): a column of the frames given to
        :meth:`update_many` (or ids beside an array, ``units=``), neither in the domain nor
        synthesized. With it the guarantee is user level (module docstring).
    max_rows : int, optional
        ``L``, the public cap on the rows kept of each unit (with ``unit``).
    expected_units : int, optional
        Public guess of the number of units: sizes the bounder's table
        (:meth:`ContributionBounder.for_units <sketchsyn.units.ContributionBounder.for_units>`).
    bounder_bytes : int, optional
        Most bytes of the bounder's table; units are pre-sampled by keyed hash when
        ``expected_units`` do not fit (default: no cap).
    bounder : ContributionBounder, optional
        A fresh bounder to use instead (its parameters chosen by hand).

    Attributes
    ----------
    L_k : int
        ``min(floor(log2 k), depth)``, the paper's counter boundary (the least ``counter_depth``).
    counter_depth : int
        ``L_c``, the deepest level with exact counters.
    release_k : int
        Cells grown per level by ``release()``.
    sigmas : ndarray
        ``σ_0 … σ_r``, the budget of each level; ``sigmas.sum() == epsilon``.
    noise_scales : ndarray
        Scale of the integer Laplace noise of each level: ``1/σ_l`` on counter levels and
        ``sketch_depth/σ_l`` on sketch levels (times 2 for ``neighbours="replace"``).
    """

    FORMAT_VERSION = 2  # 2: no exact diagnostics; lineage, released flag and release in the blob
    READS = (1, 2)
    TAKES_RNG = True

    def __init__(
        self,
        domain: Any,
        epsilon: float,
        k: int,
        width: int,
        sketch_depth: int = 3,
        depth: int | None = None,
        expected_n: int | None = None,
        sketch: str = "count-min",
        allocation: str = "optimal",
        seed: int = 0,
        rng: RNGLike = None,
        *,
        neighbours: str = "add-remove",
        raw: bool = False,
        counter_depth: int | None = None,
        release_k: int | None = None,
        unit: str | None = None,
        max_rows: int | None = None,
        expected_units: int | None = None,
        bounder_bytes: int | None = None,
        bounder: ContributionBounder | None = None,
    ) -> None:
        check_domain(domain, "PrivHP")
        self._domain = domain
        self._epsilon = check_epsilon(epsilon, "PrivHP")
        self._k = check_int(k, "k", "PrivHP", minimum=1)
        self._width = check_int(width, "width", "PrivHP", minimum=1)
        self._sketch_depth = check_int(sketch_depth, "sketch_depth", "PrivHP", minimum=1)
        self._sketch = check_choice(sketch, "sketch", "PrivHP", SKETCHES)
        self._allocation = check_choice(allocation, "allocation", "PrivHP", ALLOCATIONS)
        self._neighbours = check_choice(neighbours, "neighbours", "PrivHP", NEIGHBOURS)
        self._seed = check_int(seed, "seed", "PrivHP", minimum=0, maximum=2**32 - 1)
        self._raw = check_bool(raw, "raw", "PrivHP")
        self._L_k = int(self._k).bit_length() - 1
        max_depth = int(domain.max_depth)
        if depth is None:
            if expected_n is None:
                raise ParameterError(
                    "PrivHP needs either 'depth' or 'expected_n' (to derive the depth). "
                    "Got neither."
                )
            n = check_int(expected_n, "expected_n", "PrivHP", minimum=1)
            depth = accounting.privhp_depth(self._epsilon, n, domain.d, self._k)
            depth = max(min(int(depth), max_depth), 1)
        elif expected_n is not None:
            check_int(expected_n, "expected_n", "PrivHP", minimum=1)
        self._depth = check_int(depth, "depth", "PrivHP", minimum=1, maximum=max_depth)
        # k >= 2**depth: every level has exact counters and no sketch is used (the full-tree
        # mechanism, Holland et al.'s sanity statement), so the counter levels stop at the depth.
        self._L_k = min(self._L_k, self._depth)
        self._expected_n = None if expected_n is None else int(expected_n)
        if counter_depth is None:
            counter_depth = self.auto_counter_depth(
                self._k, self._width, self._sketch_depth, self._depth
            )
        self._L_c = check_int(
            counter_depth, "counter_depth", "PrivHP", minimum=0, maximum=self._depth
        )
        if release_k is None:
            release_k = self.auto_release_k(self._k, self._width)
        self._release_k = check_int(release_k, "release_k", "PrivHP", minimum=1)

        self._source = as_source(rng)
        self._take_unit(
            "PrivHP", unit, max_rows, expected_units, bounder, bounder_bytes, self._source,
            memory_name="bounder_bytes",
        )  # fmt: skip
        # Rows one neighbour moves in each cell: 1 (a row), 2 (replace), times 2L (a unit).
        factor = (2 if self._neighbours == "replace" else 1) * self.sensitivity
        sigmas, level_eps = level_budgets(
            self._epsilon,
            self._release_k,
            self._depth,
            tuple(float(domain.gamma(level)) for level in range(-1, self._depth + 1)),
            self._allocation,
            self._L_c,
            self._sketch_depth,
            float(factor),
        )
        self._sigmas = np.array(sigmas, dtype=np.float64)
        # Each structure's budget σ_l / factor (rounded down: factor times it is at most σ_l).
        self._level_eps = np.array(level_eps)
        # Each level's integer Laplace scale, rounded up (the realised budget is at most the
        # level's share exactly); a budget too small for the sampler is refused here.
        self._scales = np.array(
            [
                accounting.laplace_scale(
                    1 if level <= self._L_c else self._sketch_depth,
                    float(self._level_eps[level]),
                    "PrivHP",
                )
                for level in range(self._depth + 1)
            ]
        )
        n_tree = 2 ** (self._L_c + 1) - 1
        n_cells = self._width * self._sketch_depth * (self._depth - self._L_c)
        check_memory(
            8 * (n_tree + 2 * n_cells),
            "PrivHP",
            f"{n_tree} exact counters (k={self._k}, depth={self._depth}) and "
            f"{self._depth - self._L_c} sketch levels of width={self._width} × "
            f"sketch_depth={self._sketch_depth} (built, then banked)",
        )

        streams = self._source.spawn(self._depth + 2)
        self._release_stream = streams[-1]
        self._tree = np.zeros(n_tree, dtype=np.int64)
        if not self._raw:
            for level in range(self._L_c + 1):
                lo, hi = 2**level - 1, 2 ** (level + 1) - 1
                self._tree[lo:hi] = discrete_laplace(
                    self._scales[level], hi - lo, rng=streams[level]
                )
        self._sketches = []
        cls = _SKETCHES[self._sketch]
        for level in range(self._L_c + 1, self._depth + 1):
            self._sketches.append(
                cls(
                    self._width,
                    self._sketch_depth,
                    epsilon=None if self._raw else float(self._level_eps[level]),
                    seed=(self._seed + level) % 2**32,
                    rng=streams[level],
                )
            )
        self._bind_bank()
        self._n_seen = self._n_removed = self._n_dropped = 0
        self._adjusted: dict[str, int] = {}
        self._flushed = False  # a flushed raw summary no longer holds its whole stream
        self._frozen = False
        # A raw state's identity is random even with a seed: raw summaries built alike merge.
        self._lineage = Lineage.new(
            as_source(None) if self._raw else self._source, KIND, self._params()
        )
        self._usage = UsageGuard()

    # ------------------------------------------------------------------ read-only parameters
    domain = ReadOnly[Any]("The public domain.")
    epsilon = ReadOnly[float](
        "The total privacy budget ε this summary spends (for the stated neighbours)."
    )
    k = ReadOnly[int]("Pruning parameter.")
    width = ReadOnly[int]("Sketch width ``w``.")
    sketch_depth = ReadOnly[int]("Sketch rows ``j``.")
    depth = ReadOnly[int]("Depth ``r`` of the hierarchy.")

    L_k = ReadOnly[int](  # noqa: N815 (the paper's name)
        "The paper's ``L_k = min(floor(log2 k), r)``; the counters stop at ``counter_depth``."
    )

    @property
    def counter_depth(self) -> int:
        """Deepest level with exact counters, ``L_c`` (``L_k ≤ L_c ≤ r`` by default)."""
        return self._L_c

    release_k = ReadOnly[int](
        "Cells expanded per level when ``release()`` grows the tree below ``L_c``."
    )

    @property
    def sigmas(self) -> np.ndarray:
        """Per-level budgets ``σ_0 … σ_r`` (a copy); they sum to ``epsilon``."""
        return self._sigmas.copy()

    @property
    def noise_scales(self) -> np.ndarray:
        """Integer Laplace scale used on each level (``1/σ_l`` or ``j/σ_l``, ×2 for replace,
        ×2L with a privacy unit of at most ``L`` rows).

        Each is rounded up to a float so that the realised budget ``sensitivity/scale`` is at
        most the level's share exactly, and the shares sum to at most ``epsilon`` exactly.
        """
        return self._scales.copy()

    @property
    def sketches(self) -> list:
        """The level sketches ``L_c+1 … r`` (read them, do not update them directly)."""
        return list(self._sketches)

    n_seen = ReadOnly[int](
        "Rows inserted so far (exact; a diagnostic for the data holder, not private)."
    )
    n_removed = ReadOnly[int]("Rows removed so far by :meth:`remove_many` (exact; not private).")
    n_dropped = ReadOnly[int](
        """Rows dropped by the domain's ``"drop"`` policy (exact; not private)."""
    )

    @property
    def adjusted(self) -> dict[str, int]:
        """On a table (:class:`~sketchsyn.domains.Schema`): values a column's policy clipped,
        mapped to "other" or dropped, as ``{"<column>:<action>": count}`` (exact; not
        private; a copy)."""
        return dict(self._adjusted)

    @property
    def released(self) -> bool:
        """True once this summary, or a copy sharing its noise draw, has been released."""
        return self._lineage.released

    lineage = ReadOnly[Lineage](
        "The identity of the noise draw(s) this state holds (shared by its copies)."
    )

    @property
    def partition_tree(self) -> Any:
        """The grown, consistent tree of the release (all nodes, not only leaves).

        Raises :class:`ReleasedError` before ``release()``; it is post-processing of the release.
        A summary loaded from a released blob regrows it from the stored release's leaves.
        """
        stored = self._lineage.lookup(self._digest(), KIND) if self.released else None
        if stored is None:
            raise ReleasedError("partition_tree exists only after release()")
        dist, grown = stored
        if grown is None:
            leaves = dist.leaves()
            grown = tree.PartitionTree.from_leaves(leaves.level, leaves.prefix, leaves.count)
        return grown

    @property
    def nbytes(self) -> int:
        """State size in bytes: ``8·(w·j·(r − L_c) + 2^{L_c+1} − 1) + 8·(r + 1) + 64``.

        ``L_c`` is ``counter_depth``. With a privacy unit the contribution bounder's table is
        added (:attr:`ContributionBounder.nbytes <sketchsyn.units.ContributionBounder.nbytes>`).
        It is fixed at construction and does not grow with the stream. ``release()`` builds a
        tree of at most ``2^{L_c+1} − 1 + 2·k_rel·(r − L_c)`` nodes on top of it
        (``k_rel = release_k``; see :meth:`release_nodes_bound`), and the released distribution
        reports its own ``nbytes``.
        """
        return int(
            self._bank.nbytes
            + self._tree.nbytes
            + self._sigmas.nbytes
            + HEADER_BYTES
            + self._unit_bytes()
        )

    def release_nodes_bound(self) -> int:
        """Most nodes the released tree can have: ``2^{L_c+1} − 1 + 2·k_rel·(r − L_c)``."""
        L, r = self._L_c, self._depth
        return int(2 ** (L + 1) - 1 + 2 * self._release_k * (r - L))

    # ------------------------------------------------------------------ updates
    def _check_open(self) -> None:
        if self._frozen:
            raise ReleasedError("this PrivHP is a snapshot; snapshots are read-only")
        self._lineage.check_open(KIND)

    def update(self, x: Any, unit: Any = None) -> None:
        """Add one item (a point of the domain); with a privacy unit, a dict row holds the
        unit's key, or ``unit`` is the item's unit id."""
        self.update_many(self._one_row(x, "update"), units=None if unit is None else [unit])

    def update_many(self, X: Any, units: Any = None) -> None:
        """Add a batch of items (the fast path). The batch is checked whole before any change.

        With a privacy unit, its ids are the unit's column of a frame, or ``units`` (one a row)
        beside an array; the contribution bounder passes on at most ``max_rows`` rows of each
        unit, the first ones (the rows of one batch in their order).

        The batch is encoded once; for batches of at least ``_PARALLEL_MIN_ROWS`` rows the levels
        are then shared between two threads (numpy releases the GIL in its array loops), each
        thread writing the increments of its own levels, so the result is the same exact state.
        """
        self._count_rows(X, 1, units)

    def remove(self, x: Any) -> None:
        """Remove one earlier item (a point of the domain): :meth:`remove_many` of one row."""
        self.remove_many(self._one_row(x, "remove"))

    def remove_many(self, X: Any) -> None:
        """Remove a batch of earlier items: every cell they fall in goes down by one per row.

        Counters and sketches are linear, so a removal is the update of weight −1, and
        inserting a set then removing it gives back the state before (noise included). One
        removal is one event of the privacy unit (module docstring). A ``raw=True`` summary
        that holds its whole stream refuses a batch holding rows never inserted (a counter cell
        would go below zero; :class:`~sketchsyn.errors.InputError`, state unchanged: merge
        first to remove rows another collector counted); a private summary cannot know, and
        applies them as rows of weight −1.

        >>> import numpy as np
        >>> from sketchsyn import Box
        >>> php = PrivHP(Box.unit(2), 1.0, k=4, width=32, depth=6, raw=True)
        >>> X = np.random.default_rng(0).random((100, 2))
        >>> php.update_many(X); php.remove_many(X[:40])
        >>> int(php._tree[0]), php.n_seen, php.n_removed
        (60, 100, 40)
        """
        if self._unit is not None:
            raise ParameterError(
                "remove_many() is for event-level summaries: with a privacy unit the bounder "
                "cannot take rows back (a unit's slot is never freed)"
            )
        self._count_rows(X, -1)

    def consume(self, iterable: Iterable[Any], batch_size: int = 65536) -> int:
        """Stream any iterable of rows (or of 2-D arrays) through ``update_many`` in batches.

        Memory stays bounded by one batch whatever the iterable's length. Each batch is atomic: a
        bad row refuses its whole batch (earlier batches stay counted) and the error names the
        row's position in the stream. Returns the number of rows read.
        """
        self._check_open()
        if self._unit is not None:
            raise ParameterError(
                f"consume() reads rows without their privacy unit ({self._unit!r}): feed "
                "update_many(frame) with the unit's column, or update_many(X, units=ids)"
            )
        batch_size = check_int(batch_size, "batch_size", "consume", minimum=1)
        # Each batch counted per cell, the cells listed and hashed once at the end (the same
        # state as update_many of each batch: pending.py).
        with PendingCounts(self, batch_size) as sink:
            return consume(sink.add, iterable, batch_size, self._domain.d)

    # ------------------------------------------------------------------ combine, copy, save
    def _params(self) -> dict[str, Any]:
        return {
            "domain": self._domain.to_dict(),
            "epsilon": self._epsilon,
            "k": self._k,
            "width": self._width,
            "sketch_depth": self._sketch_depth,
            "depth": self._depth,
            "sketch": self._sketch,
            "allocation": self._allocation,
            "seed": self._seed,
            "neighbours": self._neighbours,
            "counter_depth": self._L_c,
            "release_k": self._release_k,
        } | self._unit_params()

    raw = ReadOnly[bool](
        "True when the state holds exact counts (noise deferred to ``release()``)."
    )

    def snapshot(self) -> PrivHP:
        """An immutable copy of the (already noisy) state.

        The snapshot shares this object's lineage and so its release guard: whichever copy is
        released first fixes the one state at which this noise draw may be released. Unlike a
        copy through bytes it keeps the exact diagnostics (it stays in this process).
        """
        snap = self._copy()
        snap._frozen = True
        return snap

    def _copy(self) -> PrivHP:
        new = object.__new__(PrivHP)
        new.__dict__.update(self.__dict__)
        new._tree = self._tree.copy()
        new._sketches = [type(s).from_bytes(s.to_bytes()) for s in self._sketches]
        new._bind_bank()
        new._bank[...] = self._bank
        new._usage = UsageGuard()
        if self._bounder is not None:
            new._bounder = ContributionBounder.from_bytes(self._bounder.to_bytes())
        return new

    def __deepcopy__(self, memo: dict) -> PrivHP:
        """A copy in this process: same lineage (one release guard), diagnostics kept."""
        return self._copy()

    def _digest(self) -> bytes:
        """Identifies the state released: the noisy arrays and whether noise is still due."""
        return state_digest(self._tree, self._bank, np.array([self._raw]))

    # ------------------------------------------------------------------ bytes (Summary hooks)
    @property
    def state_privacy(self) -> str:
        """``"private"`` (noisy counters and sketches), or ``"trusted"`` for a ``raw=True``
        summary (exact counts: a curator's state) and for one holding a privacy unit's
        bounder (fingerprints of the units)."""
        return "trusted" if self._raw or self._bounder is not None else "private"

    def _copy_options(self) -> dict[str, Any]:
        """A copy in this process (deepcopy, pickle, snapshot, Dask transport) of a raw summary
        keeps the exact diagnostics: its state holds exact counts already. A private summary's
        copies leave them out (they are not private)."""
        return {"include_diagnostics": True} if self._raw else {}

    def _saved_privacy(
        self, include_diagnostics: bool = False, include_bounder: bool = True
    ) -> str:
        """``to_bytes(include_diagnostics=True)`` adds exact counts, and a privacy unit's
        bounder (unless ``include_bounder=False``) fingerprints: a trusted checkpoint."""
        bounder = self._bounder is not None and bool(include_bounder)
        return "trusted" if self._raw or bool(include_diagnostics) or bounder else "private"

    def _state(
        self, include_diagnostics: bool = False, include_bounder: bool = True
    ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The bytes of ``to_bytes(key=None, include_diagnostics=False, include_bounder=True)``
        (format version 2).

        They hold the public parameters, the counters and sketch tables (noisy unless
        ``raw``), the lineage, whether the summary is a snapshot, whether its noise draw was
        released, and the release itself when this state is the released one. No exact count:
        ``n_seen``, ``n_removed``, ``n_dropped`` only with ``include_diagnostics=True`` (a local
        checkpoint that never leaves the data holder; its header says ``"trusted"``). ``key``
        (bytes shared with the reader) makes the digest a keyed MAC, so a server refuses states
        altered in transit.

        A loaded copy holds the same noise draw. In one process all copies share one release
        guard, but two processes can each release a copy at a different stream position, and
        the difference of the two releases is the exact count of the rows in between: never
        publish two states of one lineage. To report periodically, keep a ``raw=True``
        summary and ship :meth:`flush`.

        With a privacy unit the header states it (``privacy``) and the bounder's bytes are an
        array, which makes the file trusted; ``include_bounder=False`` leaves the bounder out:
        the noisy state alone is private at the user level (it takes no more rows).
        """
        check_bool(include_diagnostics, "include_diagnostics", "PrivHP.to_bytes")
        check_bool(include_bounder, "include_bounder", "PrivHP.to_bytes")
        meta = self._params() | {
            "raw": self._raw,
            "frozen": self._frozen,
            "lineage": self._lineage.to_meta(),
            "released": self.released,
        }
        arrays = {"tree": self._tree, "bank": self._bank, "sigmas": self._sigmas}
        if self.released:
            stored = self._stored_release()
            if stored is not None:
                arrays["release"] = np.frombuffer(stored[0].to_bytes(), dtype=np.uint8)
        if include_diagnostics:
            meta["diagnostics"] = {
                "n_seen": self._n_seen,
                "n_removed": self._n_removed,
                "n_dropped": self._n_dropped,
            }
            if self._adjusted:
                meta["diagnostics"]["adjusted"] = dict(self._adjusted)
        if self._flushed:
            meta["flushed"] = True
        unit_meta, unit_arrays = self._unit_state(include_bounder)
        return meta | unit_meta, arrays | unit_arrays

    def _stored_release(self) -> tuple[PrivateDistribution, Any] | None:
        """The stored release of this exact state, ``None`` if it is not the released one."""
        try:
            return self._lineage.lookup(self._digest(), KIND)
        except ReleasedError:
            return None

    @classmethod
    def _from_params(
        cls,
        params: dict[str, Any],
        rng: RNGLike,
        raw: bool,
        bounder: ContributionBounder | None = None,
    ) -> PrivHP:
        """A summary with these parameters; with a privacy unit, holding ``bounder`` (None:
        none, so it takes no more rows)."""
        rest = {k: v for k, v in params.items() if k not in ("domain", "epsilon")}
        if "unit" in rest:  # a placeholder bounder, replaced below (no table is allocated)
            rest["bounder"] = ContributionBounder(int(rest["max_rows"]), 1, rng=0)
        obj = cls(domain_from_dict(params["domain"]), params["epsilon"], **rest, rng=rng, raw=raw)
        if "unit" in rest:
            obj._bounder = bounder
        return obj

    _STATE_LIMIT = loading.STATE_LIMIT

    @classmethod
    def _from_state(
        cls, fields: MetaReader, arrays: Arrays, version: int, blob: bytes, rng: Any
    ) -> PrivHP:
        """A state written by ``to_bytes`` (format versions 1 and 2; its noise is the saved one).

        Every header field, the domain and every array's dtype, shape and range (counts within
        ±2**52) are validated before the summary is built; a field or array the class does not
        write is refused (:func:`~sketchsyn.synth.privhp.loading.load_state`). A released blob
        loads as a released summary: it refuses updates and merges, and ``release()`` returns
        the stored release. Loading the same blob twice in one process gives two copies sharing
        one release guard. ``rng`` seeds the noise a loaded ``raw=True`` summary draws at its
        release (default: the OS CSPRNG).
        """
        return loading.load_state(cls, fields, arrays, version, blob, rng)

    @staticmethod
    def _state_shape(params: dict[str, Any]) -> tuple[int, tuple[int, int, int]]:
        """Shapes of the counter array and the sketch bank that ``params`` imply."""
        return loading.state_shape(params, PrivHP.auto_counter_depth)

    # ------------------------------------------------------------------ release
    def _noisy_state(self) -> tuple[np.ndarray, list]:
        """Counter levels and level sketches with noise (drawn now for a raw summary)."""
        return noisy_state(self)

    def release(self, *, prune: float | None = None) -> PrivateDistribution:
        """Grow the pruned tree (post-processing only) and return the private distribution.

        ``prune`` (0 turns it off; default ``None``: 0.2, or, for a state released before, the
        ``prune`` of that release): after each consistent
        split a child whose count is below a threshold gives it to its sibling, so that empty
        cells keep no noise and the tree stops growing where the counts stop carrying signal.
        The threshold, in noise standard deviations, is the least at which the released values
        estimate at most this share of empty cells among those kept
        (:mod:`sketchsyn.synth.privhp.release`). It reads only the noisy state: no budget. After a
        release this object and every copy sharing its noise draw refuse updates and merges.
        Releasing the same state again returns the same distribution (another ``prune`` regrows
        it from the same noise; a raw summary refuses); a copy at another stream position raises
        :class:`ReleasedError`.

        >>> from sketchsyn import Box
        >>> php = PrivHP(Box.unit(2), 1.0, k=4, width=16, depth=8, rng=1)
        >>> php.update_many([[0.1, 0.2], [0.3, 0.4], [0.3, 0.5]])
        >>> php.release(prune=0).total == php.release(prune=0.2).total  # mass moves, sum stays
        True
        """
        return release_once(self, prune)

    def __repr__(self) -> str:
        unit = "" if self._unit is None else f", unit={self._unit!r}, max_rows={self._max_rows}"
        return (
            f"PrivHP(epsilon={self._epsilon}, k={self._k}, width={self._width}, "
            f"sketch_depth={self._sketch_depth}, depth={self._depth}, sketch={self._sketch!r}, "
            f"raw={self._raw}{unit}, nbytes={self.nbytes})"
        )
