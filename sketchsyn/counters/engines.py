"""The engines of the tree counters: the binary mechanism's p-sums over one horizon, plain
(Chan, Shi and Song) or with every node released and Honaker's estimator (*Efficient Use of
Differentially Private Binary Trees*). :mod:`sketchsyn.counters.tree` wraps them in counters.

>>> from sketchsyn.privacy.rng import as_source
>>> import numpy as np
>>> tree = _Tree(3, "laplace", Fraction(3), as_source(0))
>>> tree.advance(np.cumsum([1, 0, 1]).reshape(-1, 1), "laplace", Fraction(3), as_source(1)).shape
(3, 1)
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ..privacy.rng import RandomSource
from . import base as core
from .base import _noise_variance, _nu_sum

__all__: list[str] = []


# ------------------------------------------------------------------ what both engines share
def _abs_sum(values: np.ndarray) -> float:
    """The largest column sum of ``|values|`` (``(levels, m)``), summed in float64: an int64
    sum of values near ``2**62`` would wrap.

    >>> _abs_sum(np.array([[2**62 - 1], [-(2**62) + 1]], dtype=np.int64)) == 2.0**63
    True
    """
    if not values.size:
        return 0.0
    return float(np.abs(values).sum(axis=0, dtype=np.float64).max())


class _Engine:
    """``levels`` levels of ``m`` counters (a bank steps several together; arrays are
    ``(levels, m)``) at local step ``u``, with ``open_``, the noisy partial sum of each level's
    open block: its noise is drawn at construction (zeros when ``src`` is None, for an engine
    whose state is about to be loaded)."""

    __slots__ = ("levels", "m", "open_", "u")

    def __init__(
        self, levels: int, kind: str, param: Fraction, src: RandomSource | None, m: int = 1
    ) -> None:
        self.levels = levels
        self.m = m
        self.u = 0
        self.open_ = (
            core._draw(kind, param, levels * m, src).reshape(levels, m)
            if src is not None
            else np.zeros((levels, m), np.int64)
        )

    def _at_bits(self, values: np.ndarray) -> np.ndarray:
        """The rows of ``values`` at the set bits of ``u``, summed: ``(m,)``."""
        rows = [j for j in range(self.levels) if self.u >> j & 1]
        return values[rows].sum(axis=0)


# ------------------------------------------------------------------ tree aggregation engine
class _Tree(_Engine):
    """The binary mechanism over local steps ``u = 1 … 2**levels − 1`` (Chan–Shi–Song).

    Level ``j`` holds the p-sums of the dyadic blocks ``((k−1)·2^j, k·2^j]`` with ``k`` odd (the
    only ones a release uses: ``t``'s release sums, for each set bit ``j`` of ``t``, the block
    ``k = t >> j``). A block's noise is drawn when it opens, at the end of step ``(k−1)·2^j``
    (at construction for ``k = 1``), and the data accumulate into it: ``open_[j]`` is the noisy
    partial sum of level ``j``'s open block (0 when the level is idle), ``closed[j]`` the noisy
    value of its latest closed block. Draws happen in time order (one step's openings by
    increasing level), so batching does not change which noise goes where.
    """

    __slots__ = ("closed",)

    def __init__(
        self, levels: int, kind: str, param: Fraction, src: RandomSource | None, m: int = 1
    ) -> None:
        self.closed = np.zeros((levels, m), dtype=np.int64)
        super().__init__(levels, kind, param, src, m)

    def mass(self) -> int:
        """A bound on any release's magnitude (float sums: a level sum of int64 may wrap)."""
        return int(_abs_sum(self.closed) + _abs_sum(self.open_))

    def release(self) -> np.ndarray:
        """The release at the current step from the closed p-sums, ``(m,)``."""
        return self._at_bits(self.closed)

    def advance(self, cum: np.ndarray, kind: str, param: Fraction, src: RandomSource) -> np.ndarray:
        """Take ``len(cum)`` steps (``cum``: ``(n, m)`` inclusive cumulative sums of their
        values) and return each step's releases ``(n, m)``: ``P[t] + Σ_{j ∈ bits(t)}
        base(j, t >> j)``, where the batch's partial sums telescope to ``P[t]`` and ``base`` is
        the stored value of a block that opened before the batch or the fresh noise of one that
        opened inside it."""
        n, m = cum.shape
        t0, t1 = self.u + 1, self.u + n
        first = _nu_sum(t0 - 1)
        eta = core._draw(kind, param, (_nu_sum(t1) - first) * m, src).reshape(-1, m)
        g = np.zeros((1, m), dtype=np.int64)
        for j in range(self.levels - 1, -1, -1):
            lo, hi = t0 >> j, t1 >> j
            # Level j's blocks k = lo … hi: each parent block (k >> 1) covers two of them.
            off = lo - ((t0 >> (j + 1)) << 1)
            g = np.repeat(g, 2, axis=0)[off : off + hi - lo + 1]
            start = 1 - (lo & 1)  # position of the first odd k
            ks = np.arange(lo + start, hi + 1, 2, dtype=np.int64)
            if ks.size == 0:
                continue
            a = (ks - 1) << j
            if eta.shape[0]:  # fresh blocks (a ≥ t0); the first index is clipped, see below
                idx = _nu_sum(np.maximum(a - 1, 0)) - first + j
                vals = eta[np.clip(idx, 0, eta.shape[0] - 1)]
            else:
                vals = np.empty((ks.size, m), dtype=np.int64)
            if a[0] < t0:  # only the first block can have opened before the batch
                vals[0] = self.closed[j] if (int(ks[0]) << j) <= t0 - 1 else self.open_[j]
            g[start::2] += vals
        releases = cum + g
        # New state, level by level (closed first: it may take the old open block).
        zero = np.zeros(m, dtype=np.int64)
        for j in range(self.levels):
            top = t1 >> j
            kc = top if top & 1 else top - 1
            if kc >= 1 and (kc << j) >= t0:
                a0 = (kc - 1) << j
                b0 = kc << j
                if a0 <= t0 - 1:
                    self.closed[j] = self.open_[j] + cum[b0 - t0]
                else:
                    self.closed[j] = eta[_nu_sum(a0 - 1) - first + j] + cum[b0 - t0] - cum[a0 - t0]
            ko = top + 1
            if ko & 1:
                a0 = (ko - 1) << j
                if a0 <= t0 - 1:
                    self.open_[j] += cum[-1]
                else:
                    self.open_[j] = eta[_nu_sum(a0 - 1) - first + j] + cum[-1] - cum[a0 - t0]
            else:
                self.open_[j] = zero
        self.u = t1
        return releases

    def skip(self, s: int, kind: str, param: Fraction, src: RandomSource) -> None:
        """``s`` steps of value 0: only the blocks that close or open are touched (O(levels))."""
        t0, t1 = self.u + 1, self.u + s
        plan: list[tuple[int, str]] = []
        for j in range(self.levels):
            top = t1 >> j
            kc = top if top & 1 else top - 1
            if kc >= 1 and (kc << j) >= t0:
                plan.append((j, "closed-open" if ((kc - 1) << j) <= t0 - 1 else "closed-fresh"))
            ko = top + 1
            if ko & 1:
                if ((ko - 1) << j) > t0 - 1:
                    plan.append((j, "open-fresh"))
            else:
                plan.append((j, "open-idle"))
        count = sum(1 for _, w in plan if w.endswith("fresh"))
        fresh = core._draw(kind, param, count * self.m, src).reshape(-1, self.m)
        i = 0
        for j, what in plan:
            if what == "closed-open":
                self.closed[j] = self.open_[j]
            elif what == "closed-fresh":
                self.closed[j] = fresh[i]
                i += 1
        for j, what in plan:
            if what == "open-fresh":
                self.open_[j] = fresh[i]
                i += 1
            elif what == "open-idle":
                self.open_[j] = 0
        self.u = t1


class _HonakerTree(_Engine):
    """The binary tree with every node released and Honaker's estimator (finite horizon).

    Every dyadic block ``((k−1)·2^j, k·2^j]`` of every level gets its own noise (drawn when it
    opens, the data accumulating into it): each step still changes one node per level, so the
    noise scale and the privacy are those of the textbook tree, but right children are no
    longer thrown away. A closed node's estimate is the variance-optimal combination of its own
    noisy sum and its children's estimates (Honaker 2015, bottom-up pass):
    ``est = w_j·y + (1 − w_j)·(est_left + est_right)``, ``w_j = 2V_{j−1}/(v + 2V_{j−1})``,
    ``V_j = w_j·v`` (``V_0 = v``, the noise variance). Only nodes inside ``(0, t]`` are used;
    the release at ``t`` sums the estimates of ``t``'s dyadic decomposition, with variance
    ``Σ_{j ∈ bits(t)} V_j`` (about half the textbook tree's at large ``t``).

    State: ``open_`` (noisy partial sums, int64) and ``est`` (the latest closed node's
    estimate per level, float64: post-processing of noisy values).
    """

    __slots__ = ("est", "weights", "vj")

    def __init__(
        self, levels: int, kind: str, param: Fraction, src: RandomSource | None, m: int = 1
    ) -> None:
        self.est = np.zeros((levels, m), dtype=np.float64)
        super().__init__(levels, kind, param, src, m)
        v = _noise_variance(kind, param)
        self.weights = [1.0]
        self.vj = [v]
        for _ in range(1, levels):
            w = 2 * self.vj[-1] / (v + 2 * self.vj[-1])
            self.weights.append(w)
            self.vj.append(w * v)

    def mass(self) -> int:
        """A bound on any release's magnitude (float sums: a level sum of int64 may wrap)."""
        return int(_abs_sum(self.open_) + _abs_sum(self.est)) + 1

    def release(self) -> np.ndarray:
        return self._at_bits(self.est)

    @staticmethod
    def _opened(a: Any) -> Any:
        """Nodes opened by the end of step ``a`` (after construction): ``Σ_{s ≤ a} (ν(s)+1)``."""
        return _nu_sum(a) + a

    def advance(self, cum: np.ndarray, kind: str, param: Fraction, src: RandomSource) -> np.ndarray:
        n, m = cum.shape
        t0, t1 = self.u + 1, self.u + n
        first = self._opened(t0 - 1)
        eta = core._draw(kind, param, (self._opened(t1) - first) * m, src).reshape(-1, m)
        zero = np.zeros((1, m), dtype=np.int64)
        levels: list[tuple[int, np.ndarray]] = []
        for j in range(self.levels):
            k_lo, k_hi = ((t0 - 1) >> j) + 1, t1 >> j
            if k_hi < k_lo:
                break
            ks = np.arange(k_lo, k_hi + 1, dtype=np.int64)
            a = (ks - 1) << j
            fresh = a >= t0
            start_sum = np.where(fresh[:, None], cum[np.maximum(a - t0, 0)], zero)
            noisy = cum[(ks << j) - t0] - start_sum
            base = np.empty((ks.size, m), dtype=np.int64)
            base[fresh] = eta[self._opened(a[fresh] - 1) - first + j]
            if not fresh[0]:
                base[0] = self.open_[j]
            noisy = (noisy + base).astype(np.float64)
            if j == 0:
                est = noisy
            else:
                lo_prev, prev = levels[j - 1]
                ext = np.vstack([self.est[j - 1][None, :], prev])
                left = ext[2 * ks - 1 - (lo_prev - 1)]
                right = ext[2 * ks - (lo_prev - 1)]
                w = self.weights[j]
                est = w * noisy + (1.0 - w) * (left + right)
            levels.append((k_lo, est))
        g = np.zeros((1, m), dtype=np.float64)
        for j in range(self.levels - 1, -1, -1):
            lo, hi = t0 >> j, t1 >> j
            ks = np.arange(lo, hi + 1, dtype=np.int64)
            g = g[(ks >> 1) - (t0 >> (j + 1))]
            odd = (ks & 1) == 1
            if not odd.any():
                continue
            k_odd = ks[odd]
            vals = np.empty((k_odd.size, m), dtype=np.float64)
            if j < len(levels):
                k_lo, est = levels[j]
                inside = k_odd >= k_lo
                vals[inside] = est[k_odd[inside] - k_lo]
                vals[~inside] = self.est[j]
            else:
                vals[:] = self.est[j]
            g[odd] += vals
        releases = g  # the estimates hold their blocks' data: no telescoped partial sums here
        for j in range(self.levels):
            if j < len(levels):
                self.est[j] = levels[j][1][-1]
            a0 = (t1 >> j) << j  # the open node at level j after step t1 opened at a0
            if a0 <= t0 - 1:
                self.open_[j] += cum[-1]
            else:
                self.open_[j] = eta[self._opened(a0 - 1) - first + j] + cum[-1] - cum[a0 - t0]
        self.u = t1
        return releases

    def skip(self, s: int, kind: str, param: Fraction, src: RandomSource) -> None:
        """``s`` zero steps, in ``O(s)``: a closed node's estimate depends on its whole subtree,
        whose noise must be drawn (done in chunks of ``2**16`` steps to bound memory)."""
        while s:
            take = min(s, 1 << 16)
            self.advance(np.zeros((take, self.m), dtype=np.int64), kind, param, src)
            s -= take
