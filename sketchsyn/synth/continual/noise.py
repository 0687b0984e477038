"""The noise of :class:`~sketchsyn.synth.continual.ContinualPrivHP`, one table per counter.

Every cell (a counter of the levels ``0 … L_k`` or a cell of a level sketch) is a continual
counter over ``E`` steps (rows, or release epochs with a schedule). Four counters:

* ``"binary"`` (Chan, Shi and Song, *Private and Continual Release of Statistics*): the release
  at step ``e`` reads the p-sums ``(i, e >> i)`` of the set bits ``i`` of ``e``;
  ``h = floor(log2 E) + 1`` levels. Lazy table :class:`_BinaryTable`.
* ``"kary"`` (Andersson, Pagh and Torkamani, *Improved Counting under Continual Observation with
  Pure Differential Privacy*): the balanced base-``k`` digits ``b_j`` of ``e`` add ``b_j``
  blocks of level ``j`` (or subtract ``|b_j|``); ``h = karytree_levels(E, k)`` levels. Lazy table
  :class:`_KaryTable`.
* ``"hybrid"`` (Chan, Shi and Song's hybrid mechanism): segments of growing length ``k^g``,
  a k-ary tree with negative digits sized for each segment, each closed segment's total one
  block; the noise at step ``t`` carries ``log t``, not ``log T``. Lazy table
  :class:`~sketchsyn.synth.continual.hybrid._HybridTable` (its segments:
  :func:`hybrid_segments`).
* ``"honaker"`` (Honaker, *Efficient Use of Differentially Private Binary Trees*): every node of
  the binary tree is noised and a closed node's estimate combines it with its children's. The
  estimate of a node depends on every node under it, so it cannot be drawn lazily: the
  :class:`_HonakerBank` steps the counters eagerly, once per epoch (a schedule is required).

A lazy table keeps the exact counts elsewhere and only the noise here: a block's noise does not
depend on the data, so it is drawn the first time a release reads the cell while the block is in
use and reused by every later release that uses the block. Each block's noise is drawn at most
once, so the released values have exactly the counter's distribution, and cells no release
reads draw nothing.

>>> import numpy as np
>>> from sketchsyn.privacy.rng import as_source
>>> t = _KaryTable(4, k=5, h=3)
>>> offsets = np.array([0, 4])
>>> noise = t.noise(np.arange(4), 7, offsets, [2.0], [as_source(0)])
>>> noise.shape, t.blocks(7)   # 7 = 1·5 + 2: three blocks
((4,), 3)
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ...counters.engines import _HonakerTree
from ...counters.karytree import balanced_digits, karytree_levels
from ...errors import ParameterError, SerializationError, check_int
from ...privacy.noise import discrete_laplace, discrete_laplace_variance

__all__ = [
    "announced_end",
    "announced_epochs",
    "best_arity",
    "cell_bytes",
    "check_schedule",
    "hybrid_levels",
    "hybrid_segments",
    "memory_bytes",
]

# The largest magnitude a loaded noise value may have (a sum of a few integer Laplace draws is
# far below it; float64 holds every integer up to it exactly).
NOISE_LIMIT = 2**52 - 1
_HONAKER_LIMIT = 2**60 - 1  # Honaker's partial sums and estimates (noise plus data)
_ROW_ARITY = 5  # per-row steps: k = 5 has the lowest variance at today's memory (docs)
# The hybrid per row: k = 9 is the knee of its mean variance over log-spaced steps (docs)
_HYBRID_ROW_ARITY = 9


def _by_level(cells: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """PrivHP level of each global cell index."""
    return np.searchsorted(offsets, cells, side="right") - 1


class _BinaryTable:
    """Lazy binary-mechanism noise: slot ``i`` of a cell holds the noise of the level-``i``
    block ``block[i]`` (``drawn`` marks the cells whose noise for it was drawn)."""

    kind = "binary"

    def __init__(self, n_cells: int, h: int) -> None:
        self.h = h
        self.noise_ = np.zeros((n_cells, h), dtype=np.int64)
        self.drawn = np.zeros((n_cells, h), dtype=np.bool_)
        self.block = np.zeros(h, dtype=np.int64)

    @staticmethod
    def bytes_per_cell(h: int) -> int:
        return 9 * h

    @property
    def nbytes(self) -> int:
        return int(self.noise_.nbytes + self.drawn.nbytes + self.block.nbytes)

    def blocks(self, e: int) -> int:
        return bin(int(e)).count("1")

    def variance(self, level: int, e: int, scales: Any) -> float:
        return self.blocks(e) * discrete_laplace_variance(float(scales[level]))

    def untouched(self) -> bool:
        return not bool(self.block.any())

    def noise(
        self, cells: np.ndarray, e: int, offsets: np.ndarray, scales: Any, streams: list
    ) -> np.ndarray:
        bits = np.array([i for i in range(self.h) if (e >> i) & 1], dtype=np.intp)
        if bits.size == 0:
            return np.zeros(cells.size, dtype=np.int64)
        for i in bits.tolist():
            m = e >> i
            if self.block[i] != m:  # a new block at level i: no cell has its noise yet
                self.drawn[:, i] = False
                self.block[i] = m
        stale_cell, stale_bit = np.nonzero(~self.drawn[cells[:, None], bits[None, :]])
        if stale_cell.size:
            rows = cells[stale_cell]
            level_of = _by_level(rows, offsets)
            order = np.argsort(level_of, kind="stable")
            rows, cols, level_of = rows[order], bits[stale_bit[order]], level_of[order]
            bounds = np.searchsorted(level_of, np.arange(len(offsets)))
            for level in range(len(offsets) - 1):
                lo, hi = bounds[level], bounds[level + 1]
                if hi > lo:
                    self.noise_[rows[lo:hi], cols[lo:hi]] = discrete_laplace(
                        float(scales[level]), int(hi - lo), rng=streams[level]
                    )
            self.drawn[rows, cols] = True
        return self.noise_[cells[:, None], bits[None, :]].sum(axis=1)

    def arrays(self) -> dict[str, np.ndarray]:
        return {"noise": self.noise_, "drawn": self.drawn, "block": self.block}

    def load(self, fields: Any, arrays: dict[str, np.ndarray], e: int) -> None:
        n, h = self.noise_.shape
        noise = fields.bounded(arrays, "noise", np.int64, (n, h), -NOISE_LIMIT, NOISE_LIMIT)
        drawn = fields.array(arrays, "drawn", np.bool_, (n, h))
        block = fields.array(arrays, "block", np.int64, (h,))
        if drawn.size and int(drawn.view(np.uint8).max()) > 1:
            raise SerializationError("ContinualPrivHP blob array 'drawn' holds non-boolean bytes")
        limits = np.array([e >> i for i in range(h)], dtype=np.int64)
        if (block < 0).any() or (block > limits).any():
            raise SerializationError(
                f"ContinualPrivHP blob array 'block' names blocks past step {e}: {block.tolist()}"
            )
        self.noise_[...], self.drawn[...], self.block[...] = noise, drawn, block


class _KaryTable:
    """Lazy k-ary-tree noise with negative digits, ``m = (k − 1)/2`` slots per level and cell.

    Level ``j``'s window (centre ``q·k^{j+1}``) has ``m`` blocks before its centre and ``m``
    after; within a window the digit ``b_j`` only grows with ``e``. While ``b_j < 0`` (the
    *before* phase) a release subtracts the nearest ``|b_j|`` before-blocks, fewer and fewer:
    the first read draws the ``|b_j|`` it needs into slots ``0 … |b_j| − 1`` and later reads use
    a prefix of them. While ``b_j > 0`` (the *after* phase) a release adds the after-blocks
    ``1 … b_j``, more and more: slot 0 holds the sum of the first ``count`` of them and a read
    draws the missing ones into it. ``phase[j] = 2·q + (b_j > 0)`` names the window and phase
    the slots belong to (a change resets every cell's ``count`` of that level). So
    ``h·m`` slots per cell suffice where a full window has ``2m`` blocks.
    """

    kind = "kary"

    def __init__(self, n_cells: int, k: int, h: int) -> None:
        self.k, self.h, self.m = k, h, (k - 1) // 2
        self.noise_ = np.zeros((n_cells, h, self.m), dtype=np.int64)
        self.count = np.zeros((n_cells, h), dtype=np.uint8)
        self.phase = np.full(h, -1, dtype=np.int64)

    @staticmethod
    def bytes_per_cell(h: int, k: int) -> int:
        return h * (8 * ((k - 1) // 2) + 1)

    @property
    def nbytes(self) -> int:
        return int(self.noise_.nbytes + self.count.nbytes + self.phase.nbytes)

    def blocks(self, e: int) -> int:
        return int(np.abs(balanced_digits(int(e), self.k, self.h)).sum())

    def variance(self, level: int, e: int, scales: Any) -> float:
        return self.blocks(e) * discrete_laplace_variance(float(scales[level]))

    def untouched(self) -> bool:
        return bool((self.phase == -1).all())

    def noise(
        self, cells: np.ndarray, e: int, offsets: np.ndarray, scales: Any, streams: list
    ) -> np.ndarray:
        digits = balanced_digits(int(e), self.k, self.h).tolist()
        # Which (cell, level j) pairs miss blocks, and how many: drawn below with one sampler
        # call per PrivHP level for all j together.
        plan: list[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]] = []
        for j, b in enumerate(digits):
            if b == 0:
                continue
            big = self.k ** (j + 1)
            phase = 2 * ((int(e) + (big - 1) // 2) // big) + (1 if b > 0 else 0)
            if self.phase[j] != phase:  # a new window or phase: no cell has its noise yet
                self.count[:, j] = 0
                self.phase[j] = phase
            cnt = self.count[cells, j].astype(np.int64)
            need = np.where(cnt == 0, -b, 0) if b < 0 else b - cnt
            stale = np.flatnonzero(need > 0)
            if stale.size:
                plan.append((j, b, stale, need[stale], cnt[stale]))
        if plan:
            self._draw(cells, plan, _by_level(cells, offsets), scales, streams)
        total = np.zeros(cells.size, dtype=np.int64)
        for j, b in enumerate(digits):
            if b < 0:
                total -= self.noise_[cells, j, :-b].sum(axis=1)
            elif b > 0:
                total += self.noise_[cells, j, 0]
        return total

    def _draw(
        self,
        cells: np.ndarray,
        plan: list[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]],
        level_of: np.ndarray,
        scales: Any,
        streams: list,
    ) -> None:
        """Draw the missing blocks of every planned level ``j`` for its stale cells, ``need``
        values per cell: one sampler call per PrivHP level, cut in order of (level, j, cell)."""
        per_level: list[list[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]]]
        per_level = [[] for _ in range(len(scales))]
        for j, b, stale, need, cnt in plan:
            lv = level_of[stale]
            order = np.argsort(lv, kind="stable")
            bounds = np.searchsorted(lv[order], np.arange(len(scales) + 1))
            for level in range(len(scales)):
                lo, hi = int(bounds[level]), int(bounds[level + 1])
                if hi > lo:
                    sel = order[lo:hi]
                    per_level[level].append((j, b, cells[stale[sel]], need[sel], cnt[sel]))
        for level, parts in enumerate(per_level):
            if not parts:
                continue
            total = int(sum(int(p[3].sum()) for p in parts))
            draws = discrete_laplace(float(scales[level]), total, rng=streams[level])
            start = 0
            for j, b, rows, nd, cnt in parts:
                chunk = draws[start : start + int(nd.sum())]
                start += chunk.size
                if b < 0:  # each stale cell draws exactly |b| before-blocks
                    self.noise_[rows, j, :-b] = chunk.reshape(rows.size, -b)
                else:  # add the missing after-blocks to the running sum in slot 0
                    starts = np.concatenate([[0], np.cumsum(nd)[:-1]])
                    seg = np.add.reduceat(chunk, starts)
                    base = np.where(cnt == 0, 0, self.noise_[rows, j, 0])
                    self.noise_[rows, j, 0] = base + seg
                self.count[rows, j] = abs(b)

    def arrays(self) -> dict[str, np.ndarray]:
        return {"knoise": self.noise_, "kcount": self.count, "kphase": self.phase}

    def load(self, fields: Any, arrays: dict[str, np.ndarray], e: int) -> None:
        n, h, m = self.noise_.shape
        noise = fields.bounded(arrays, "knoise", np.int64, (n, h, m), -NOISE_LIMIT, NOISE_LIMIT)
        count = fields.array(arrays, "kcount", np.uint8, (n, h))
        phase = fields.array(arrays, "kphase", np.int64, (h,))
        if count.size and int(count.max()) > m:
            raise SerializationError(f"ContinualPrivHP blob array 'kcount' holds counts above {m}")
        limits = np.array([2 * (e + self.k ** (j + 1)) for j in range(h)], dtype=np.int64)
        if (phase < -1).any() or (phase > limits).any():
            raise SerializationError(
                f"ContinualPrivHP blob array 'kphase' names windows past step {e}"
            )
        self.noise_[...], self.count[...], self.phase[...] = noise, count, phase


class _HonakerBank:
    """Honaker's estimator on every cell, stepped eagerly once per epoch: one
    :class:`~sketchsyn.counters.engines._HonakerTree` per PrivHP level (its own noise scale),
    each a bank over that level's cells. ``values`` are the estimates (noise and data)."""

    kind = "honaker"

    def __init__(self, offsets: np.ndarray, h: int, scales: Any, streams: list | None) -> None:
        self.h = h
        self.offsets = offsets
        self.engines = [
            _HonakerTree(
                h,
                "laplace",
                Fraction(float(scales[level])),
                streams[level] if streams is not None else None,
                m=int(offsets[level + 1] - offsets[level]),
            )
            for level in range(len(offsets) - 1)
        ]
        self.scales = [Fraction(float(s)) for s in scales]

    @staticmethod
    def bytes_per_cell(h: int) -> int:
        return 16 * h

    @property
    def nbytes(self) -> int:
        return int(sum(e.est.nbytes + e.open_.nbytes for e in self.engines))

    def blocks(self, e: int) -> float:
        """Variance of a release at epoch ``e`` in units of one node's noise variance."""
        ratio, out = 1.0, 0.0
        for j in range(self.h):
            if j:
                ratio = 2 * ratio / (1 + 2 * ratio)
            if (int(e) >> j) & 1:
                out += ratio
        return out

    def variance(self, level: int, e: int, scales: Any) -> float:
        return self.blocks(e) * discrete_laplace_variance(float(scales[level]))

    def untouched(self) -> bool:
        return all(e.u == 0 for e in self.engines)

    def step(self, cum: np.ndarray, streams: list) -> None:
        """Close ``len(cum)`` epochs; ``cum`` is ``(n, C)``: each closed epoch's counts minus
        the counts at the last epoch closed before (inclusive cumulative increments)."""
        for level, engine in enumerate(self.engines):
            lo, hi = self.offsets[level], self.offsets[level + 1]
            engine.advance(
                np.ascontiguousarray(cum[:, lo:hi]), "laplace", self.scales[level], streams[level]
            )

    def values(self) -> np.ndarray:
        """Every cell's release at the last closed epoch (float64 estimates)."""
        if not self.engines:
            return np.zeros(0)
        return np.concatenate([e.release().astype(np.float64) for e in self.engines])

    def arrays(self) -> dict[str, np.ndarray]:
        return {
            "hest": np.concatenate([e.est for e in self.engines], axis=1),
            "hopen": np.concatenate([e.open_ for e in self.engines], axis=1),
        }

    def load(self, fields: Any, arrays: dict[str, np.ndarray], e: int) -> None:
        n = int(self.offsets[-1])
        lim = _HONAKER_LIMIT
        est = fields.bounded(arrays, "hest", np.float64, (self.h, n), -lim, lim)
        opened = fields.bounded(arrays, "hopen", np.int64, (self.h, n), -lim, lim)
        for level, engine in enumerate(self.engines):
            lo, hi = self.offsets[level], self.offsets[level + 1]
            engine.est[...] = est[:, lo:hi]
            engine.open_[...] = opened[:, lo:hi]
            engine.u = e


# ------------------------------------------------------------------ the plan
def _mean_blocks(epochs: int, k: int, h: int) -> float:
    """Mean over the epochs ``1 … E`` (up to 4 096 evenly spaced) of the blocks a release uses."""
    es = np.unique(np.linspace(1, epochs, min(epochs, 4096)).astype(np.int64))
    return float(np.abs(balanced_digits(es, k, h)).sum(axis=0).mean())


def best_arity(epochs: int) -> int:
    """The odd ``k ≤ 63`` with the lowest mean release variance ``blocks·h²`` over ``E`` epochs.

    >>> best_arity(8), best_arity(128)
    (17, 17)
    """
    cost = {}
    for k in range(3, 64, 2):
        h = karytree_levels(epochs, k)
        cost[k] = _mean_blocks(epochs, k, h) * h * h
    return min(cost, key=lambda k: (cost[k], k))


def hybrid_segments(epochs: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The hybrid counter's segments of the epochs ``1 … E``: ``(starts, lengths, heights)``.

    Segment ``g`` holds the epochs ``S_g + 1 … S_g + k^g`` (``S_g = (k^g − 1)/(k − 1)``), its
    k-ary tree has the levels ``0 … g`` (``g + 1`` blocks per epoch, the top one the segment's
    total); the last segment is cut at ``E`` and its height is the smallest ``H`` with
    ``k^H ≥`` its length.

    >>> [a.tolist() for a in hybrid_segments(40, 3)]
    [[0, 1, 4, 13], [1, 3, 9, 27], [0, 1, 2, 3]]
    >>> [a.tolist() for a in hybrid_segments(20, 3)]
    [[0, 1, 4, 13], [1, 3, 9, 7], [0, 1, 2, 2]]
    """
    starts, lengths, heights = [], [], []
    start, g = 0, 0
    while start < epochs:
        n, h = k**g, g
        if start + n > epochs:
            n, h = epochs - start, 0
            while k**h < n:
                h += 1
        starts.append(start)
        lengths.append(n)
        heights.append(h)
        start, g = start + n, g + 1
    return (
        np.array(starts, dtype=np.int64),
        np.array(lengths, dtype=np.int64),
        np.array(heights, dtype=np.int64),
    )


def hybrid_levels(epochs: int, k: int) -> int:
    """``h``: the most blocks one epoch lies in, over the hybrid counter's segments.

    >>> hybrid_levels(2**20, 5), hybrid_levels(40, 3)
    (10, 4)
    """
    return int(hybrid_segments(epochs, k)[2].max()) + 1


def _plan(
    horizon: int, counter: str, arity: int | None, releases: int | None, every: int | None
) -> tuple[int, int | None, int]:
    """``(E, k, h)``: counter steps (rows or epochs), the k-ary arity (``None`` otherwise) and
    the counter's levels (hybrid: those of its largest segment)."""
    epochs = horizon
    if releases is not None:
        epochs = releases
    elif every is not None:
        epochs = -(-horizon // every)
    if counter not in ("kary", "hybrid"):
        return epochs, None, int(epochs).bit_length()
    if arity is None:
        row = _HYBRID_ROW_ARITY if counter == "hybrid" else _ROW_ARITY
        arity = row if releases is None and every is None else best_arity(epochs)
    if counter == "hybrid":
        return epochs, arity, hybrid_levels(epochs, arity)
    return epochs, arity, karytree_levels(epochs, arity)


def announced_epochs(t: int, m: int, horizon: int) -> int:
    """Epochs of ``m`` announced ones over ``horizon`` events closed after event ``t``: epoch
    ``e`` ends after event ``floor(e·horizon/m)`` (:func:`announced_end`).

    >>> [announced_epochs(t, 4, 10) for t in (1, 2, 4, 5, 9, 10)]
    [0, 1, 1, 2, 3, 4]
    """
    return ((t + 1) * m - 1) // horizon


def announced_end(e: int, m: int, horizon: int) -> int:
    """The last event of epoch ``e`` of ``m`` announced ones over ``horizon`` events.

    >>> [announced_end(e, 4, 10) for e in range(1, 5)]
    [2, 5, 7, 10]
    """
    return (e * horizon) // m


def check_schedule(
    counter: str, arity: int | None, releases: int | None, every: int | None, horizon: int
) -> None:
    owner = "ContinualPrivHP"
    if releases is not None and every is not None:
        raise ParameterError(
            f"The 'releases' and 'release_every' parameters of {owner}: give at most one. "
            f"Got releases={releases!r}, release_every={every!r} instead."
        )
    if releases is not None:
        check_int(releases, "releases", owner, minimum=1, maximum=horizon)
    if every is not None:
        check_int(every, "release_every", owner, minimum=1, maximum=2**62)
    if arity is not None:
        if counter not in ("kary", "hybrid"):
            raise ParameterError(
                f"The 'arity' parameter of {owner} applies to counter='kary' or 'hybrid' only. "
                f"Got arity={arity!r} with counter={counter!r} instead."
            )
        check_int(arity, "arity", owner, minimum=3, maximum=63)
        if arity % 2 == 0:
            raise ParameterError(
                f"The 'arity' parameter of {owner} must be odd (balanced digits). "
                f"Got {arity!r} instead."
            )


# The hybrid counter's bytes per cell besides its open segment's k-ary slots: the closed
# segments' noise sum (int64) and how many totals it holds (uint8).
HYBRID_CELL_BYTES = 9


def cell_bytes(counter: str, h: int, arity: int | None) -> int:
    """Noise bytes per cell of ``counter`` with ``h`` levels (the hybrid: its closed-segment
    noise and count besides the open segment's k-ary slots)."""
    if counter == "binary":
        return _BinaryTable.bytes_per_cell(h)
    if counter == "honaker":
        return _HonakerBank.bytes_per_cell(h)
    kary = _KaryTable.bytes_per_cell(h, int(arity or 3))
    return kary + HYBRID_CELL_BYTES if counter == "hybrid" else kary


def memory_bytes(
    k: int,
    width: int,
    sketch_depth: int,
    depth: int,
    horizon: int,
    counter: str,
    arity: int | None,
    releases: int | None,
    release_every: int | None,
) -> int:
    """``ContinualPrivHP.memory_bytes``: cells × (exact count, noise slots, closed count) plus
    the fixed parts."""
    L_k = min(int(k).bit_length() - 1, depth)
    cells = width * sketch_depth * (depth - L_k) + 2 ** (L_k + 1) - 1
    epochs, ar, h = _plan(horizon, counter, arity, releases, release_every)
    per, fixed = cell_bytes(counter, h, ar), (0 if counter == "honaker" else 8 * h)
    if counter == "hybrid":  # the open segment's number and the block scales per segment
        fixed += 8 + 8 * len(hybrid_segments(epochs, int(ar or 3))[0]) * (depth + 1)
    scheduled = releases is not None or release_every is not None
    fixed += 8 * 1024 + 8 * (depth + 1) + 64
    return cells * (8 + per + 8 * scheduled) + fixed
