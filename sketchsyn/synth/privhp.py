"""PrivHP: one-pass private synthetic data in bounded memory (seed 002, Algorithms 2–4).

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
A PrivHP object is single-threaded: an update from a second thread while one is running raises
:class:`~sketchsyn.errors.ConcurrentUseError` (it uses two worker threads of its own inside
``update_many`` for large batches). Use ``merge`` to combine summaries built in parallel
(processes, machines, Dask tasks: objects pickle through ``to_bytes``).

Public parameters (not protected): the domain bounds, ``k``, ``width``, ``sketch_depth``, ``depth``,
the hash ``seed`` and the allocation. The number of rows dropped by an out-of-bounds policy of
``"drop"`` (``n_dropped``) and ``n_seen`` are exact, non-private diagnostics for the data holder:
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

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import numpy as np

from ..errors import (
    IncompatibleError,
    InputError,
    ParameterError,
    ReleasedError,
    SerializationError,
    check_bool,
    check_choice,
    check_domain,
    check_epsilon,
    check_int,
    check_memory,
)
from ..io.checkpoint import Checkpointable
from ..io.serial import MetaReader, pack, unpack
from ..io.stream import consume
from ..privacy import accounting
from ..privacy.lineage import Lineage, UsageGuard, state_digest
from ..privacy.noise import discrete_laplace, discrete_laplace_variance
from ..privacy.rng import RNGLike, as_source
from ..sketches.hashing import murmur3_32
from ..sketches.sketch import CountMinSketch, CountSketch
from ..synth import tree
from ..synth.distribution import PrivateDistribution

__all__ = ["PrivHP"]

_KIND = "PrivHP"
_VERSION = 2  # 2: no exact diagnostics, lineage, released flag and release in the blob
_STATE_FIELDS = ("raw", "frozen", "lineage", "released", "diagnostics")
_SKETCHES = {"count-min": CountMinSketch, "count-sketch": CountSketch}
# Fixed per-object overhead counted in nbytes: the σ array and small scalars.
_HEADER_BYTES = 64
# Batches with at least this many rows are split over two threads.
_PARALLEL_MIN_ROWS = 16384
# for_memory: most sketch levels below the counters (fitted in docs/utility.md).
_SKETCH_LEVELS = 2
_POOL: ThreadPoolExecutor | None = None


def _call(job: Callable[[], None]) -> None:
    job()


def _pool() -> ThreadPoolExecutor:
    """A shared two-thread pool (created on first use; numpy releases the GIL in its loops)."""
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="sketchsyn")
    return _POOL


def _least_squares_levels(levels: list[np.ndarray], variances: list[float]) -> list[np.ndarray]:
    """Hay et al.'s constrained inference on a complete tree, levels of unequal variance.

    Bottom-up, each node's estimate combines its own noisy count with the sum of its children's
    estimates by inverse variances; top-down, each parent's residual is split evenly between its
    two children (siblings have equal variances). The result is the least-squares consistent
    tree (not clamped: :func:`tree.consistent_levels` makes it non-negative afterwards).
    """
    L = len(levels) - 1
    z, var = [None] * (L + 1), [0.0] * (L + 1)
    z[L], var[L] = np.asarray(levels[L], dtype=np.float64), float(variances[L])
    for level in range(L - 1, -1, -1):
        s = z[level + 1][0::2] + z[level + 1][1::2]
        vs = 2.0 * var[level + 1]
        v = float(variances[level])
        z[level] = (np.asarray(levels[level], dtype=np.float64) * vs + s * v) / (v + vs)
        var[level] = v * vs / (v + vs)
    out = [z[0]]
    for level in range(1, L + 1):
        child = z[level]
        resid = out[-1] - (child[0::2] + child[1::2])
        x = child.copy()
        x[0::2] += resid / 2.0
        x[1::2] += resid / 2.0
        out.append(x)
    return out


class PrivHP(Checkpointable):
    """One-pass PrivHP summary (pure ε-DP synthetic data generator in bounded memory).

    Parameters
    ----------
    domain : Box or BitDomain
        Public domain; its ``encode`` turns points into Morton codes.
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
        ``expected_n`` when not given (SPEC §3: ``r = ceil(log2(ε n))``, minus one for d = 1).
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
    ) -> None:
        check_domain(domain, "PrivHP")
        self._domain = domain
        self._epsilon = check_epsilon(epsilon, "PrivHP")
        self._k = check_int(k, "k", "PrivHP", minimum=1)
        self._width = check_int(width, "width", "PrivHP", minimum=1)
        self._sketch_depth = check_int(sketch_depth, "sketch_depth", "PrivHP", minimum=1)
        self._sketch = check_choice(sketch, "sketch", "PrivHP", tuple(_SKETCHES))
        self._allocation = check_choice(allocation, "allocation", "PrivHP", ("optimal", "uniform"))
        self._neighbours = check_choice(
            neighbours, "neighbours", "PrivHP", ("add-remove", "replace")
        )
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
        # mechanism, seed 002's sanity statement), so the counter levels stop at the depth.
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

        gammas = np.array([domain.gamma(level) for level in range(-1, self._depth + 1)])
        self._sigmas = np.asarray(
            accounting.privhp_allocation(
                self._epsilon,
                self._release_k,
                self._depth,
                gammas=gammas,
                allocation=self._allocation,
                counter_depth=self._L_c,
            ),
            dtype=np.float64,
        )
        factor = 2.0 if self._neighbours == "replace" else 1.0
        self._sigmas = self._realisable(self._sigmas, factor)
        # The budget each structure is built with; with "replace" each structure gets σ_l / 2.
        self._level_eps = self._sigmas / factor
        # Each level's integer Laplace scale, rounded up so that the realised budget
        # (sensitivity / scale) is at most the level's share exactly; a budget too small for
        # the sampler is refused here, naming PrivHP's epsilon.
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

        self._source = as_source(rng)
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
        self._n_seen = 0
        self._n_dropped = 0
        self._frozen = False
        # A raw state holds no noise yet: its identity is random even with a seed, so raw
        # summaries built alike merge (the trusted-aggregator case).
        self._lineage = Lineage.new(
            as_source(None) if self._raw else self._source, _KIND, self._params()
        )
        self._usage = UsageGuard()

    def _realisable(self, sigmas: np.ndarray, factor: float) -> np.ndarray:
        """Raise tiny level shares to the least the exact sampler realises (scale ≤ 2**30).

        Lemma 5 gives very deep levels (e.g. ``depth = 56`` in d = 1) shares so small that their
        noise scale would exceed ``MAX_LAPLACE_SCALE``; such a level carries no information
        anyway. Each share is raised to ``sensitivity·factor/2**30`` (one ulp more) and the
        other levels are scaled down so that the total stays ε. Refused only when ε cannot
        cover even those floors.
        """
        sens = np.where(np.arange(self._depth + 1) <= self._L_c, 1.0, float(self._sketch_depth))
        floor = np.nextafter(sens * factor / accounting.MAX_LAPLACE_SCALE, np.inf) * (1 + 1e-12)
        low = sigmas < floor
        if not low.any():
            return sigmas
        rest = self._epsilon - floor[low].sum()
        if rest <= 0 or not (~low).any():
            raise ParameterError(
                f"The 'epsilon' parameter of PrivHP is too small for depth={self._depth}: its "
                f"levels would need integer Laplace noise above the largest supported scale "
                f"2**30. Got {self._epsilon!r} instead."
            )
        out = sigmas.copy()
        out[low] = floor[low]
        out[~low] *= rest / sigmas[~low].sum()
        return accounting.fit_to_budget(out, self._epsilon)

    # ------------------------------------------------------------------ state layout
    def _bind_bank(self) -> None:
        """Put every sketch table in one contiguous (levels, j, w) bank for one-call updates."""
        n_levels = len(self._sketches)
        self._bank = np.zeros((n_levels, self._sketch_depth, self._width), dtype=np.int64)
        for i, sk in enumerate(self._sketches):
            self._bank[i] = sk._table
            sk._table = self._bank[i]
        fams = [sk._family for sk in self._sketches]
        shape = (n_levels, self._sketch_depth, 1)
        self._row_seeds = np.array([f.row_seeds for f in fams], dtype=np.uint32).reshape(shape)
        self._sign_seeds = (
            np.array([f.sign_seeds for f in fams], dtype=np.uint32).reshape(shape)
            if self._sketch == "count-sketch"
            else None
        )

    @property
    def _pow2_width(self) -> bool:
        """True when the width is a power of two ≥ 2 (buckets are then a shift of the hash)."""
        w = self._width
        return w > 1 and w & (w - 1) == 0

    @classmethod
    def _memory_rule(
        cls, domain: Any, eps: float, budget: int, n: int, sketch_levels: int
    ) -> tuple[int, int, int, int]:
        """``(k, width, sketch_depth, depth)`` of :meth:`for_memory`'s rule."""
        k, j = 64, 3
        r_n = max(min(int(accounting.privhp_depth(eps, n, domain.d, k)), int(domain.max_depth)), 1)

        def widest(depth: int) -> int:
            # From w = ceil(2^r / j) on every level is a counter level (the full tree).
            w_full = -(-(2**depth) // j)
            lo, hi = 1, 2
            while hi <= w_full and cls.memory_bytes(k, hi, j, depth) <= budget:
                lo, hi = hi, 2 * hi
            while hi - lo > 1:  # largest w with memory_bytes(k, w, j, depth) <= budget
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if cls.memory_bytes(k, mid, j, depth) <= budget else (lo, mid)
            return min(lo, w_full)

        for depth in range(r_n, 0, -1):
            if cls.memory_bytes(k, 1, j, depth) > budget:
                continue
            w = widest(depth)
            if depth - cls.auto_counter_depth(k, w, j, depth) <= sketch_levels or depth == 1:
                return k, w, j, depth
        raise ParameterError(
            f"The 'memory_bytes' parameter of PrivHP.for_memory must allow a depth-1 summary "
            f"({cls.memory_bytes(k, 1, j, 1)} bytes). Got {budget!r} instead."
        )

    @classmethod
    def for_memory(
        cls,
        domain: Any,
        epsilon: float,
        memory_bytes: int,
        expected_n: int,
        *,
        sketch: str = "count-min",
        seed: int = 0,
        rng: RNGLike = None,
        neighbours: str = "add-remove",
    ) -> PrivHP:
        """A PrivHP whose ``nbytes`` is at most ``memory_bytes``, its parameters chosen for it.

        The rule (fitted to ``benchmarks/utility.py``, d = 2, ε = 1, n = 2^18 and 2^20, budgets
        of 2% of PMM's bytes; figures in docs/utility.md):

        - ``k = 64``, ``sketch_depth j = 3``; the counters go down to the automatic
          ``L_c = max(L_k, floor(log2(w·j)))``, so ``k`` only bounds ``L_c`` from below;
        - for a depth ``r``, ``width w`` is the largest integer with
          ``memory_bytes(k, w, j, r) ≤ memory_bytes`` (the memory grows with ``w``), at most
          ``ceil(2^r / j)``, where every level is a counter level (the full tree);
        - ``depth r`` is the largest depth, at most the constructor's ``ceil(log2(ε·n))``
          (minus one for d = 1) and ``domain.max_depth``, that leaves at most **two** sketch
          levels below the counters (``r − L_c ≤ 2``). A shallower tree gives each level more
          budget and the counters more width; measured at n = 2^18 with 42 KB: 0, 1, 2, 3 and
          5 sketch levels gave 1.33×, 1.33×, 0.93×, 0.99×, 1.07× PMM's W1 on mf0.9;
        - ``release_k = max(k, w // 4)`` (:meth:`auto_release_k`).

        Raises :class:`ParameterError` when no depth ``≥ 1`` fits.

        >>> from sketchsyn import Box
        >>> php = PrivHP.for_memory(Box.unit(2), 1.0, 40_000, expected_n=2**18, rng=0)
        >>> php.nbytes <= 40_000, php.depth, php.width, php.counter_depth
        (True, 12, 488, 10)
        """
        eps = check_epsilon(epsilon, "PrivHP.for_memory")
        budget = check_int(memory_bytes, "memory_bytes", "PrivHP.for_memory", minimum=1)
        n = check_int(expected_n, "expected_n", "PrivHP.for_memory", minimum=1)
        k, width, j, depth = cls._memory_rule(domain, eps, budget, n, _SKETCH_LEVELS)
        return cls(
            domain,
            eps,
            k=k,
            width=width,
            sketch_depth=j,
            depth=depth,
            expected_n=n,
            sketch=sketch,
            seed=seed,
            rng=rng,
            neighbours=neighbours,
        )

    # ------------------------------------------------------------------ read-only parameters
    @property
    def domain(self) -> Any:
        """The public domain."""
        return self._domain

    @property
    def epsilon(self) -> float:
        """The total privacy budget ε this summary spends (for the stated neighbours)."""
        return self._epsilon

    @property
    def k(self) -> int:
        """Pruning parameter."""
        return self._k

    @property
    def width(self) -> int:
        """Sketch width ``w``."""
        return self._width

    @property
    def sketch_depth(self) -> int:
        """Sketch rows ``j``."""
        return self._sketch_depth

    @property
    def depth(self) -> int:
        """Depth ``r`` of the hierarchy."""
        return self._depth

    @property
    def L_k(self) -> int:  # noqa: N802 (the paper's name)
        """The paper's ``L_k = min(floor(log2 k), r)``; the counters stop at ``counter_depth``."""
        return self._L_k

    @property
    def counter_depth(self) -> int:
        """Deepest level with exact counters, ``L_c`` (``L_k ≤ L_c ≤ r`` by default)."""
        return self._L_c

    @property
    def release_k(self) -> int:
        """Cells expanded per level when ``release()`` grows the tree below ``L_c``."""
        return self._release_k

    @staticmethod
    def auto_counter_depth(k: int, width: int, sketch_depth: int, depth: int) -> int:
        """The default ``counter_depth``: ``L_c = min(max(L_k, floor(log2(w·j))), r)``.

        A level of ``2^l ≤ w·j`` cells takes no more memory as exact counters than as a
        ``w × j`` sketch, and its counters have no collisions and noise ``1/σ_l`` instead of
        ``j/σ_l``; so every such level keeps counters.

        >>> PrivHP.auto_counter_depth(k=64, width=256, sketch_depth=3, depth=18)
        9
        """
        L_k = int(k).bit_length() - 1
        return int(min(max(L_k, (int(width) * int(sketch_depth)).bit_length() - 1), depth))

    @staticmethod
    def auto_release_k(k: int, width: int) -> int:
        """The default ``release_k``: ``max(k, w // 4)``.

        Growing more cells than ``k`` pays on skewed data once the sketches are wide enough to
        tell the children of many cells apart (n = 2^20, w = 1024, mf0.9: 1.51× → 1.02× PMM's
        W1 with 256 cells instead of 64); on spread-out data every extra cell adds a noisy split
        where an even one was right (uniform at w = 256: 0.78× → 1.14× PMM with 256 cells), so
        the rule stays at ``k`` for narrow sketches. Figures in docs/utility.md.

        >>> PrivHP.auto_release_k(64, 1024), PrivHP.auto_release_k(64, 256)
        (256, 64)
        """
        return int(max(int(k), int(width) // 4))

    @property
    def sigmas(self) -> np.ndarray:
        """Per-level budgets ``σ_0 … σ_r`` (a copy); they sum to ``epsilon``."""
        return self._sigmas.copy()

    @property
    def noise_scales(self) -> np.ndarray:
        """Integer Laplace scale used on each level (``1/σ_l`` or ``j/σ_l``, ×2 for replace).

        Each is rounded up to a float so that the realised budget ``sensitivity/scale`` is at
        most the level's share exactly, and the shares sum to at most ``epsilon`` exactly.
        """
        return self._scales.copy()

    @property
    def sketches(self) -> list:
        """The level sketches ``L_c+1 … r`` (read them, do not update them directly)."""
        return list(self._sketches)

    @property
    def n_seen(self) -> int:
        """Rows counted so far (exact; a diagnostic for the data holder, not private)."""
        return self._n_seen

    @property
    def n_dropped(self) -> int:
        """Rows dropped by the domain's ``"drop"`` policy (exact; not private)."""
        return self._n_dropped

    @property
    def released(self) -> bool:
        """True once this summary, or a copy sharing its noise draw, has been released."""
        return self._lineage.released

    @property
    def lineage(self) -> Lineage:
        """The identity of the noise draw(s) this state holds (shared by its copies)."""
        return self._lineage

    @property
    def partition_tree(self) -> Any:
        """The grown, consistent tree of the release (all nodes, not only leaves).

        Raises :class:`ReleasedError` before ``release()``; it is post-processing of the release.
        A summary loaded from a released blob regrows it from the stored release's leaves.
        """
        stored = self._lineage.lookup(self._digest(), _KIND) if self.released else None
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

        ``L_c`` is ``counter_depth``. It is fixed at construction and does not grow with the
        stream. ``release()`` builds a tree of at most ``2^{L_c+1} − 1 + 2·k_rel·(r − L_c)``
        nodes on top of it (``k_rel = release_k``; see :meth:`release_nodes_bound`), and the
        released distribution reports its own ``nbytes``.
        """
        return int(self._bank.nbytes + self._tree.nbytes + self._sigmas.nbytes + _HEADER_BYTES)

    def release_nodes_bound(self) -> int:
        """Most nodes the released tree can have: ``2^{L_c+1} − 1 + 2·k_rel·(r − L_c)``."""
        L, r = self._L_c, self._depth
        return int(2 ** (L + 1) - 1 + 2 * self._release_k * (r - L))

    @staticmethod
    def memory_bytes(
        k: int, width: int, sketch_depth: int, depth: int, counter_depth: int | None = None
    ) -> int:
        """The ``nbytes`` a PrivHP with these parameters has, without building it.

        ``counter_depth=None`` is the automatic rule (:meth:`auto_counter_depth`).

        >>> PrivHP.memory_bytes(k=64, width=1024, sketch_depth=3, depth=24, counter_depth=6)
        443648
        >>> PrivHP.memory_bytes(k=64, width=1024, sketch_depth=3, depth=24)
        352512
        """
        if counter_depth is None:
            counter_depth = PrivHP.auto_counter_depth(k, width, sketch_depth, depth)
        L_c = min(int(counter_depth), depth)
        cells = width * sketch_depth * (depth - L_c) + 2 ** (L_c + 1) - 1
        return 8 * cells + 8 * (depth + 1) + _HEADER_BYTES

    # ------------------------------------------------------------------ updates
    def _check_open(self) -> None:
        if self._frozen:
            raise ReleasedError("this PrivHP is a snapshot; snapshots are read-only")
        self._lineage.check_open(_KIND)

    def update(self, x: Any) -> None:
        """Add one item (a point of the domain)."""
        arr = np.asarray(x)
        if self._domain.d == 1 and arr.ndim == 0:
            arr = arr.reshape(1)
        elif arr.ndim == 1 and self._domain.d > 1:
            arr = arr.reshape(1, -1)
        elif arr.ndim == 1 and arr.shape[0] == 1:
            pass
        else:
            raise InputError(
                f"update(x) takes one point of dimension {self._domain.d}; got an array of shape "
                f"{arr.shape}. Use update_many for batches."
            )
        self.update_many(arr)

    def update_many(self, X: Any) -> None:
        """Add a batch of items (the fast path). The batch is checked whole before any change.

        The batch is encoded once; for batches of at least ``_PARALLEL_MIN_ROWS`` rows the levels
        are then shared between two threads (numpy releases the GIL in its array loops), each
        thread writing the increments of its own levels, so the result is the same exact state.
        """
        self._check_open()
        with self._usage.enter(_KIND):
            codes, dropped = self._domain.encode(X, self._depth, return_dropped=True)
            codes = np.asarray(codes, dtype=np.uint64)
            tree_counts, bank_counts = self._level_counts(codes)
            self._tree += tree_counts
            self._bank += bank_counts
            self._n_seen += int(codes.size)
            self._n_dropped += int(dropped)

    def _level_counts(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Exact per-cell increments of the counters and of every sketch cell for ``codes``.

        Levels with at most ``n/2`` cells (``n`` = batch size) are counted per cell: one
        ``bincount`` at the deepest such level, every shallower level as sums of two children
        (the counters, heap layout, level ``l`` at offset ``2**l − 1``, and the sketch levels
        whose distinct prefixes are then hashed once each, weighted by their counts). Deeper
        sketch levels hash every item's prefix.
        """
        r, L, n = self._depth, self._L_c, codes.size
        n_sketch = len(self._sketches)
        # Deepest level counted per cell: at least L_c, at most r, and 2**level ≤ n/2.
        dense = max(L, min(r, max(n // 2, 1).bit_length() - 1))
        n_dense = dense - L  # sketch levels L_c+1 … dense are counted per cell
        bank_counts = np.empty_like(self._bank)
        tree_counts = np.empty_like(self._tree)

        def dense_part() -> None:
            cells = np.bincount((codes >> np.uint64(r - dense)).astype(np.intp), minlength=2**dense)
            for level in range(dense, -1, -1):
                if level <= L:
                    tree_counts[2**level - 1 : 2 ** (level + 1) - 1] = cells
                else:
                    keys = np.flatnonzero(cells)
                    bank_counts[level - L - 1] = self._sketch_cells(
                        level - L - 1, keys.astype(np.uint64), cells[keys]
                    )
                if level:
                    cells = cells.reshape(-1, 2).sum(axis=1)

        def sparse_level(i: int) -> None:
            prefix = codes >> np.uint64(r - (L + 1 + i))
            bank_counts[i] = self._sketch_cells(i, prefix, None)

        jobs = [dense_part] + [partial(sparse_level, i) for i in range(n_dense, n_sketch)]
        if n < _PARALLEL_MIN_ROWS or len(jobs) < 3:
            for job in jobs:
                job()
        else:
            # Two worker threads take the jobs in turn (the per-cell part, the longest, first);
            # each writes its own slices of the increments, so the result does not depend on
            # the order in which they finish.
            for _ in _pool().map(_call, jobs):
                pass
        return tree_counts, bank_counts

    def _sketch_cells(self, i: int, keys: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
        """Increments of sketch ``i`` (level ``L_c + 1 + i``) for ``keys`` (uint64 prefixes), each
        counted ``weights`` times (once when None); int64 of shape ``(j, w)``."""
        j, w = self._sketch_depth, self._width
        h = murmur3_32(keys[None, :], self._row_seeds[i])  # (j, keys)
        if self._pow2_width:
            # w = 2**b: the bucket (h·w) >> 32 is h >> (32 − b), in place on the uint32 hashes.
            h >>= np.uint32(32 - (w.bit_length() - 1))
            buckets = h
        else:
            buckets = ((h.astype(np.uint64) * np.uint64(w)) >> np.uint64(32)).astype(np.intp)
        if self._sign_seeds is not None:
            s = murmur3_32(keys[None, :], self._sign_seeds[i])
            signs = 1.0 - 2.0 * (s & np.uint32(1)).astype(np.float64)
            weights = signs if weights is None else signs * weights[None, :]
        elif weights is not None:
            weights = np.broadcast_to(weights.astype(np.float64), (j, keys.size))
        out = np.empty((j, w), dtype=np.int64)
        # One bincount per row keeps the working arrays at one row of the batch.
        for row in range(j):
            if weights is None:
                out[row] = np.bincount(buckets[row], minlength=w)
            else:
                # Weighted sums of at most n = batch-size items: integers below 2**53, exact.
                out[row] = np.rint(np.bincount(buckets[row], weights=weights[row], minlength=w))
        return out

    def consume(self, iterable: Iterable[Any], batch_size: int = 65536) -> int:
        """Stream any iterable of rows (or of 2-D arrays) through ``update_many`` in batches.

        Memory stays bounded by one batch whatever the iterable's length. Each batch is atomic: a
        bad row refuses its whole batch (earlier batches stay counted) and the error names the
        row's position in the stream. Returns the number of rows read.
        """
        self._check_open()
        return consume(self.update_many, iterable, batch_size, self._domain.d)

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
        }

    def merge(self, other: PrivHP) -> None:
        """Add another PrivHP built with the same parameters and seed (in place).

        Counters and sketches are linear, so the merged state is the state of the concatenated
        streams **plus both noise draws**. Privacy of the sum: each item is in one of the two
        streams, so the merged summary is still ε-DP for the union (parallel composition); its
        noise variance is the sum of both. Raw + raw stays raw (exact, merge before noise);
        raw + noisy is noisy with the noisy side's single draw.

        Refused (:class:`IncompatibleError` / :class:`ReleasedError`): different parameters,
        operands that share a noise draw (a copy of the other, or both built with the same seed:
        the sum would hold ``2·noise``), and a released operand (its noise was already published
        with its state, so adding rows to it would release that draw at a second position).
        """
        self._check_open()
        if not isinstance(other, PrivHP):
            raise IncompatibleError(f"can only merge a PrivHP into a PrivHP, got {type(other)!r}")
        mine, theirs = self._params(), other._params()
        for key in mine:
            if mine[key] != theirs[key]:
                raise IncompatibleError(
                    f"cannot merge PrivHP summaries with different {key!r}: "
                    f"{mine[key]!r} != {theirs[key]!r}"
                )
        if other is self:
            raise IncompatibleError("cannot merge a PrivHP with itself (its noise would double)")
        if other.released:
            raise ReleasedError(
                "cannot merge a released PrivHP: its noise draw was published with its state"
            )
        with self._usage.enter(_KIND):
            lineage = self._lineage.union(other._lineage, _KIND)
            self._tree += other._tree
            self._bank += other._bank
            self._n_seen += other._n_seen
            self._n_dropped += other._n_dropped
            self._raw = self._raw and other._raw
            self._lineage = lineage

    def flush(self, rng: RNGLike = None) -> PrivHP:
        """Ship the rows since the last flush as a private summary with fresh noise.

        Only for a ``raw=True`` summary, kept by a trusted local collector. Returns a new,
        private PrivHP (same parameters, noise drawn now from ``rng``, a new lineage) holding
        this summary's counts, then resets this summary to zero. Each row is in exactly one
        flushed summary, so all flushed summaries together are ε-DP (parallel composition)
        and a server may merge them. The cost is noise growth: the merge of ``m`` flushes
        carries ``m`` independent draws per counter (variance ``m`` times one draw's), so flush
        as rarely as the reporting needs.

        >>> import numpy as np
        >>> from sketchsyn import Box
        >>> local = PrivHP(Box.unit(2), 1.0, k=4, width=32, depth=6, raw=True)
        >>> local.update_many(np.full((10, 2), 0.3))
        >>> hourly = local.flush(rng=1)   # ship hourly.to_bytes() to the server
        >>> hourly.raw, local.n_seen
        (False, 0)
        """
        self._check_open()
        if not self._raw:
            raise ParameterError(
                "flush() needs a PrivHP built with raw=True (a local collector): this one is "
                "already noisy, and shipping its state twice would release one noise draw at "
                "two stream positions"
            )
        with self._usage.enter(_KIND):
            private = self._from_params(self._params(), rng=rng, raw=False)
            private._tree += self._tree
            private._bank += self._bank
            private._n_seen = self._n_seen
            private._n_dropped = self._n_dropped
            self._tree[...] = 0
            self._bank[...] = 0
            self._n_seen = 0
            self._n_dropped = 0
        return private

    @property
    def raw(self) -> bool:
        """True when the state holds exact counts (noise deferred to ``release()``)."""
        return self._raw

    def snapshot(self) -> PrivHP:
        """An immutable copy of the (already noisy) state.

        The snapshot shares this object's lineage and so its release guard: whichever copy is
        released first fixes the one state at which this noise draw may be released.
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
        return new

    def __deepcopy__(self, memo: dict) -> PrivHP:
        """A copy in this process: same lineage (one release guard), diagnostics kept."""
        return self._copy()

    def _digest(self) -> bytes:
        """Identifies the state released: the noisy arrays and whether noise is still due."""
        return state_digest(self._tree, self._bank, np.array([self._raw]))

    def to_bytes(
        self, *, key: bytes | str | None = None, include_diagnostics: bool = False
    ) -> bytes:
        """Serialise the state (versioned, checksummed; never pickle).

        The bytes hold the public parameters, the counters and sketch tables (noisy unless
        ``raw``), the lineage, whether the summary is a snapshot, whether its noise draw was
        released, and the release itself when this state is the released one. No exact count:
        ``n_seen`` and ``n_dropped`` are added only with ``include_diagnostics=True`` (a local
        checkpoint that never leaves the data holder). ``key`` (bytes shared with the reader)
        makes the digest a keyed MAC, so a server refuses states altered in transit.

        A loaded copy holds the same noise draw. In one process all copies share one release
        guard, but two processes can each release a copy at a different stream position, and
        the difference of the two releases is the exact count of the rows in between: never
        publish two states of one lineage. To report periodically, keep a ``raw=True``
        summary and ship :meth:`flush`.
        """
        check_bool(include_diagnostics, "include_diagnostics", "PrivHP.to_bytes")
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
            meta["diagnostics"] = {"n_seen": self._n_seen, "n_dropped": self._n_dropped}
        state = "trusted" if self._raw or include_diagnostics else "private"
        return pack(_KIND, _VERSION, meta, arrays, key=key, state=state)

    def _stored_release(self) -> tuple[PrivateDistribution, Any] | None:
        """The stored release of this exact state, ``None`` if it is not the released one."""
        try:
            return self._lineage.lookup(self._digest(), _KIND)
        except ReleasedError:
            return None

    @classmethod
    def _from_params(cls, params: dict[str, Any], rng: RNGLike, raw: bool) -> PrivHP:
        from ..domains.domain import domain_from_dict

        rest = {k: v for k, v in params.items() if k not in ("domain", "epsilon")}
        return cls(domain_from_dict(params["domain"]), params["epsilon"], **rest, rng=rng, raw=raw)

    @classmethod
    def from_bytes(cls, blob: bytes, *, key: bytes | str | None = None) -> PrivHP:
        """Load a state written by :meth:`to_bytes` (its noise is the saved one; no new draw).

        Every header field, the domain and every array's dtype and shape are validated against
        the parameters before the summary is built. A released blob loads as a released
        summary: it refuses updates and merges, and ``release()`` returns the stored release.
        Loading the same blob twice in one process gives two copies sharing one release guard.
        """
        _, version, meta, arrays = unpack(blob, _KIND, key=key)
        if version not in (1, _VERSION):
            raise SerializationError(
                f"PrivHP blob has format version {version}; this sketchsyn reads 1 to {_VERSION}"
            )
        if version == 1:  # exact diagnostics and the release position in the header
            meta = dict(meta)
            meta["diagnostics"] = {"n_seen": meta.pop("n_seen"), "n_dropped": meta.pop("n_dropped")}
            meta["released"] = meta.pop("released_at") is not None
            meta["lineage"] = Lineage.of_legacy_blob(blob).to_meta()
            # Version 1 blobs have the paper's layout: counters down to L_k, release_k = k.
            meta["counter_depth"] = min(int(meta["k"]).bit_length() - 1, int(meta["depth"]))
            meta["release_k"] = meta["k"]
        r = MetaReader(meta, _KIND)
        # Every header field that is not state bookkeeping is a constructor parameter; an
        # unknown or missing one makes the constructor refuse (SerializationError below).
        params = {k: v for k, v in meta.items() if k not in _STATE_FIELDS}
        raw = r.bool("raw")
        frozen = r.bool("frozen")
        released = r.bool("released")
        lineage = Lineage.from_meta(meta.get("lineage"), _KIND)
        r.dict("domain")
        for name in ("k", "width", "sketch_depth", "depth", "seed"):
            r.int(name, minimum=0)
        try:
            # Sizes are checked against the blob before anything large is allocated.
            expected = cls._state_shape(params)
            r.array(arrays, "tree", np.int64, (expected[0],))
            r.array(arrays, "bank", np.int64, expected[1])
            obj = cls._from_params(params, rng=None, raw=True)
        except (ParameterError, TypeError, KeyError, ValueError) as exc:
            if isinstance(exc, SerializationError):
                raise
            raise SerializationError(f"PrivHP blob has bad parameters: {exc}") from exc
        obj._tree[...] = arrays["tree"]
        obj._bank[...] = arrays["bank"]
        obj._raw = raw
        obj._frozen = frozen
        obj._lineage = lineage
        if r.has("diagnostics"):
            diag = MetaReader(r.dict("diagnostics"), _KIND)
            obj._n_seen = diag.int("n_seen", minimum=0)
            obj._n_dropped = diag.int("n_dropped", minimum=0)
        # A loaded object draws any later noise (raw release) from the OS CSPRNG.
        obj._release_stream = as_source(None)
        if released:
            release = None
            if "release" in arrays:
                release = PrivateDistribution.from_bytes(arrays["release"].tobytes())
            if not lineage.released:
                lineage.record(obj._digest() if release is not None else b"", (release, None))
        return obj

    @staticmethod
    def _state_shape(params: dict[str, Any]) -> tuple[int, tuple[int, int, int]]:
        """Shapes of the counter array and the sketch bank that ``params`` imply."""
        k, depth, width, j = (int(params[n]) for n in ("k", "depth", "width", "sketch_depth"))
        if not (1 <= depth <= 64 and k >= 1 and width >= 1 and j >= 1):
            raise ParameterError(f"k={k}, depth={depth}, width={width}, sketch_depth={j}")
        L_c = params.get("counter_depth")
        if L_c is None:
            L_c = PrivHP.auto_counter_depth(k, width, j, depth)
        L_c = int(L_c)
        if not 0 <= L_c <= depth:
            raise ParameterError(f"counter_depth={L_c} outside [0, depth={depth}]")
        check_memory(8 * (2 ** (L_c + 1) - 1), "PrivHP", f"2**{L_c + 1} counters")
        check_memory(8 * width * j * (depth - L_c), "PrivHP", "its sketch bank")
        return 2 ** (L_c + 1) - 1, (depth - L_c, j, width)

    def __reduce__(self) -> tuple:
        return (PrivHP.from_bytes, (self.to_bytes(),))

    # ------------------------------------------------------------------ release
    def _noisy_state(self) -> tuple[np.ndarray, list]:
        """Counter levels and level queries with noise (drawn now for a raw summary)."""
        tree_counts = self._tree.copy()
        sketches = self._sketches
        if self._raw:
            streams = self._release_stream.spawn(self._depth + 1)
            for level in range(self._L_c + 1):
                lo, hi = 2**level - 1, 2 ** (level + 1) - 1
                tree_counts[lo:hi] += discrete_laplace(
                    self._scales[level], hi - lo, rng=streams[level]
                )
            noisy = []
            for i, sk in enumerate(self._sketches):
                level = self._L_c + 1 + i
                twin = type(sk)(
                    self._width,
                    self._sketch_depth,
                    epsilon=float(self._level_eps[level]),
                    seed=sk.seed,
                    rng=streams[level],
                )
                twin.merge(sk)
                noisy.append(twin)
            sketches = noisy
        return tree_counts, sketches

    def release(self) -> PrivateDistribution:
        """Grow the pruned tree (post-processing only) and return the private distribution.

        After a release this object and every copy sharing its noise draw (snapshots, deepcopies,
        pickled or loaded copies in this process) refuse updates and merges. Calling
        ``release()`` again on a copy of the released state returns the same distribution; on a
        copy at another stream position it raises :class:`ReleasedError`.
        """
        digest = self._digest()
        stored = self._lineage.lookup(digest, _KIND)
        if stored is not None:
            return stored[0]
        tree_counts, sketches = self._noisy_state()
        levels = [
            tree_counts[2**level - 1 : 2 ** (level + 1) - 1].astype(np.float64)
            for level in range(self._L_c + 1)
        ]
        # Hay et al.'s least squares on the counter levels (measured 3–5% lower W1 than the
        # top-down even split alone; docs/utility.md), then the even split for non-negativity.
        eps_c = self._level_eps[: self._L_c + 1]
        levels = _least_squares_levels(levels, [discrete_laplace_variance(1 / e) for e in eps_c])
        top = tree.consistent_levels(levels)
        L = self._L_c

        def query(level: int, prefixes: np.ndarray) -> np.ndarray:
            return np.asarray(sketches[level - L - 1].query_many(prefixes), dtype=np.float64)

        grown = tree.grow_partition(top, query, self._release_k, self._depth, prune_top=True)
        leaf_levels, leaf_prefixes, leaf_counts = grown.leaves()
        params = self._params()
        params.pop("domain")
        dist = PrivateDistribution(
            self._domain,
            leaf_levels,
            leaf_prefixes,
            leaf_counts,
            epsilon=self._epsilon,
            mechanism="PrivHP",
            params=params,
        )
        self._lineage.record(digest, (dist, grown))
        return dist

    def __repr__(self) -> str:
        return (
            f"PrivHP(epsilon={self._epsilon}, k={self._k}, width={self._width}, "
            f"sketch_depth={self._sketch_depth}, depth={self._depth}, sketch={self._sketch!r}, "
            f"raw={self._raw}, nbytes={self.nbytes})"
        )
