"""The hybrid counter (``counter="hybrid"``) of :class:`~sketchsyn.synth.continual.ContinualPrivHP`.

Chan, Shi and Song (*Private and Continual Release of Statistics*) cut an unbounded stream into
segments of growing length and count inside each with a tree sized for that segment only, so a
release at step ``t`` carries noise of order ``log t``, not ``log T``. Here the counter steps
(rows, or epochs with a schedule) ``1 … E`` are cut into segments of growing length ``k^g``
(:func:`~sketchsyn.synth.continual.noise.hybrid_segments`): segment ``g`` covers the epochs
``S_g + 1 … S_g + k^g``, ``S_g = (k^g − 1)/(k − 1)`` (the last one cut at ``E``). Inside segment
``g`` runs the k-ary tree with negative digits (Andersson, Pagh and Torkamani, *Improved
Counting under Continual Observation with Pure Differential Privacy*) on the levels
``0 … H_g`` (``H_g = g``; the last segment: the smallest ``H`` with ``k^H`` at least its
length); its level-``H_g`` block is the whole segment, the segment's total.

**A release at epoch e** in segment ``G`` (``S_G < e ≤ S_G + n_G``, offset ``e' = e − S_G``)
reads the total of every closed segment ``g < G`` (one block each) and the signed blocks of the
balanced base-``k`` digits of ``e'`` in segment ``G`` (``e' ≤ k^{H_G}``, so the top digit is 0
or 1 and every block lies inside the segment). The signs sum to the indicator of the epochs
``1 … e``: the release is the exact count plus the signed sum of those blocks' noise.

**Privacy** (pure ε-DP, the same per-level sensitivities as the other counters). An event lies
in one epoch, hence in exactly one segment ``g``, and there in one block per level ``0 … H_g``:
it changes ``λ_g = H_g + 1`` blocks of each cell it touches by 1 (``j`` cells per sketch level,
one per counter level), and no block of any other segment. Each block of segment ``g`` gets
``Lap_Z(λ_g·c_l/σ_l)``, ``c_l = 1`` on a counter level and ``j`` on a sketch level, rounded up
so that the realised budget is at most ``σ_l``: the ℓ1 change of level ``l``'s blocks is
``λ_g·c_l`` at scale ``λ_g·c_l/σ_l``, a loss of at most ``σ_l`` whatever the segment, and the
levels compose to ``Σ σ_l = ε``. Every release is a fixed linear function of the noisy blocks
(post-processing), whichever steps are released and how often. (``noise_scales`` and
``counter_levels`` of the summary report the largest segment's.)

**Variance** of a released cell of level ``l`` at epoch ``e`` in segment ``G``::

    Σ_{g<G} Var Lap_Z(λ_g·c_l/σ_l)  +  (Σ_j |b_j(e')|) · Var Lap_Z(λ_G·c_l/σ_l),

``b_j(e')`` the balanced digits of the offset (``Var Lap_Z(s) = 2p/(1 − p)²``, ``p = e^{−1/s}``).

**Lazy noise.** As in :class:`~sketchsyn.synth.continual.noise._KaryTable` (which holds the
open segment's blocks here): a block's noise is drawn the first time a release reads it and
reused after. When a release first reads a later segment, each cell's total of the segment just
closed, if drawn, moves into the cell's closed-segment sum ``base``; ``upto`` counts the closed
totals in ``base``, and totals never read are drawn when a release first needs them.

>>> import numpy as np
>>> from sketchsyn.privacy.rng import as_source
>>> t = _HybridTable(2, k=3, epochs=40, scales=np.full((4, 1), 2.0))
>>> noise = t.noise(np.arange(2), 7, np.array([0, 2]), None, [as_source(0)])
>>> t.blocks(7)   # 7 = 1 + 3 + 3: two closed segments and the first level-1 block of the third
3
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import SerializationError
from ...privacy import accounting
from ...privacy.noise import discrete_laplace, discrete_laplace_variance
from .noise import NOISE_LIMIT, _by_level, _KaryTable, cell_bytes, hybrid_segments

__all__ = ["hybrid_scales"]


def hybrid_scales(
    epochs: int, k: int, sensitivities: list[int], sigmas: Any, owner: str
) -> np.ndarray:
    """``(segments, levels)``: the block scale ``λ_g·c_l/σ_l`` of each segment and level,
    rounded up so that each level's realised budget is at most ``σ_l``.

    >>> hybrid_scales(40, 3, [1, 2], [0.5, 0.5], "Demo").tolist()
    [[2.0, 4.0], [4.0, 8.0], [6.0, 12.0], [8.0, 16.0]]
    """
    heights = hybrid_segments(epochs, k)[2]
    return np.array(
        [
            [
                accounting.laplace_scale(int(h + 1) * c, float(s), owner)
                for c, s in zip(sensitivities, sigmas, strict=True)
            ]
            for h in heights.tolist()
        ],
        dtype=np.float64,
    ).reshape(len(heights), len(sensitivities))


class _HybridTable:
    """Lazy hybrid-counter noise: the open segment's k-ary slots (``inner``), every cell's sum
    of closed-segment totals (``base``, holding the totals of the segments ``< upto``) and the
    segment the slots belong to (``seg``, −1 before the first read)."""

    kind = "hybrid"

    def __init__(self, n_cells: int, k: int, epochs: int, scales: np.ndarray) -> None:
        self.k = k
        self.starts, self.lengths, self.heights = hybrid_segments(epochs, k)
        self.h = int(self.heights.max()) + 1
        self.scales = np.asarray(scales, dtype=np.float64)
        if self.scales.shape[0] != self.starts.size:
            raise ValueError("one row of scales per segment")
        self.inner = _KaryTable(n_cells, k, self.h)
        self.base = np.zeros(n_cells, dtype=np.int64)
        self.upto = np.zeros(n_cells, dtype=np.uint8)
        self.seg = np.full(1, -1, dtype=np.int64)

    @classmethod
    def build(cls, n_cells: int, k: int, epochs: int, exact: Any) -> _HybridTable:
        """The table of a ContinualPrivHP whose exact state is ``exact`` (a raw PrivHP): block
        scales ``λ_g/σ_l`` on its counter levels, ``j·λ_g/σ_l`` on its sketch levels."""
        mults = [
            1 if level <= exact.L_k else exact.sketch_depth for level in range(exact.depth + 1)
        ]
        scales = hybrid_scales(epochs, k, mults, exact.sigmas, "ContinualPrivHP")
        return cls(n_cells, k, epochs, scales)

    @staticmethod
    def bytes_per_cell(h: int, k: int) -> int:
        return cell_bytes("hybrid", h, k)

    @property
    def nbytes(self) -> int:
        return int(
            self.inner.nbytes
            + self.base.nbytes
            + self.upto.nbytes
            + self.seg.nbytes
            + self.scales.nbytes
        )

    def locate(self, e: int) -> tuple[int, int]:
        """``(G, e')``: the segment of epoch ``e ≥ 1`` and the offset in it (``1 … n_G``)."""
        g = int(np.searchsorted(self.starts, int(e), side="left")) - 1
        return g, int(e) - int(self.starts[g])

    def blocks(self, e: int) -> int:
        """Blocks a release at epoch ``e`` sums: the closed totals and the offset's digits."""
        if int(e) == 0:
            return 0
        g, off = self.locate(e)
        return g + self.inner.blocks(off)

    def variance(self, level: int, e: int, scales: Any = None) -> float:
        """Exact noise variance of a released cell of ``level`` at epoch ``e`` (module notes;
        ``scales`` unused: the table holds its scales per segment)."""
        if int(e) == 0:
            return 0.0
        g, off = self.locate(e)
        closed = sum(discrete_laplace_variance(float(s)) for s in self.scales[:g, level])
        return closed + self.inner.blocks(off) * discrete_laplace_variance(
            float(self.scales[g, level])
        )

    def untouched(self) -> bool:
        return int(self.seg[0]) == -1

    def noise(
        self, cells: np.ndarray, e: int, offsets: np.ndarray, scales: Any, streams: list
    ) -> np.ndarray:
        """Noise of the released ``cells`` at epoch ``e`` (``scales`` unused: per segment)."""
        if int(e) == 0:
            return np.zeros(cells.size, dtype=np.int64)
        g, off = self.locate(e)
        if int(self.seg[0]) != g:
            self._enter(g)
        late = self.upto[cells] < g
        if late.any():
            self._draw_totals(cells[late], g, offsets, streams)
        inner = self.inner.noise(cells, off, offsets, self.scales[g], streams)
        return self.base[cells] + inner

    def _enter(self, g: int) -> None:
        """The slots move to segment ``g``: each cell's drawn total of the segment just left
        joins its ``base`` (the cells that drew it have ``upto`` at that segment already: a
        read in a segment first draws the totals before it)."""
        old = int(self.seg[0])
        if old >= 0:
            top = int(self.heights[old])
            if int(self.inner.phase[top]) == 1:  # the after-phase of the whole-segment block
                rows = np.flatnonzero(self.inner.count[:, top] > 0)
                self.base[rows] += self.inner.noise_[rows, top, 0]
                self.upto[rows] = old + 1
        self.inner.phase[:] = -1
        self.inner.count[:] = 0
        self.seg[0] = g

    def _draw_totals(self, rows: np.ndarray, g: int, offsets: np.ndarray, streams: list) -> None:
        """Draw the closed totals ``upto[row] … g − 1`` of each row (one block each, at its
        segment's scale): one sampler call per (segment, PrivHP level)."""
        level_of = _by_level(rows, offsets)
        order = np.argsort(level_of, kind="stable")
        rows, level_of = rows[order], level_of[order]
        bounds = np.searchsorted(level_of, np.arange(len(offsets)))
        for level in range(len(offsets) - 1):
            lo, hi = int(bounds[level]), int(bounds[level + 1])
            if hi == lo:
                continue
            part = rows[lo:hi]
            first = self.upto[part].astype(np.int64)
            for seg in range(int(first.min()), g):
                sel = part[first <= seg]
                self.base[sel] += discrete_laplace(
                    float(self.scales[seg, level]), int(sel.size), rng=streams[level]
                )
        self.upto[rows] = g

    def arrays(self) -> dict[str, np.ndarray]:
        return {
            **self.inner.arrays(),
            "ybase": self.base,
            "yupto": self.upto,
            "yseg": self.seg,
        }

    def load(self, fields: Any, arrays: dict[str, np.ndarray], e: int) -> None:
        n = self.base.size
        base = fields.bounded(arrays, "ybase", np.int64, (n,), -NOISE_LIMIT, NOISE_LIMIT)
        upto = fields.array(arrays, "yupto", np.uint8, (n,))
        seg = fields.array(arrays, "yseg", np.int64, (1,))
        now = self.locate(e)[0] if int(e) > 0 else -1
        s = int(seg[0])
        if not -1 <= s <= now:
            raise SerializationError(
                f"ContinualPrivHP blob array 'yseg' names segment {s}, not one of -1 … {now} "
                f"(epoch {e})"
            )
        if upto.size and int(upto.max()) > max(s, 0):
            raise SerializationError(
                f"ContinualPrivHP blob array 'yupto' counts closed segments past segment {s}"
            )
        if ((upto == 0) & (base != 0)).any():
            raise SerializationError(
                "ContinualPrivHP blob array 'ybase' holds noise of cells with no closed segment"
            )
        # The open segment's slots, checked against the offset in it (its end if it is behind).
        off = 0 if s < 0 else (e - int(self.starts[s]) if s == now else int(self.lengths[s]))
        self.inner.load(fields, arrays, off)
        drawn = self.inner.count.any(axis=1)
        if s < 0 and (drawn.any() or (self.inner.phase != -1).any()):
            raise SerializationError(
                "ContinualPrivHP blob array 'kcount' holds noise drawn before any read"
            )
        if s >= 0 and (drawn & (upto != s)).any():
            raise SerializationError(
                f"ContinualPrivHP blob array 'yupto' misses closed segments of cells read in "
                f"segment {s}"
            )
        self.base[...], self.upto[...], self.seg[...] = base, upto, seg
