"""PHDStream, a benchmark baseline (not part of sketchsyn).

Reimplemented from Kumar, Strohmer and Vershynin, "An Algorithm for Streaming Differentially
Private Data" (2024, arXiv:2401.14577), and from the authors' reference code
(github.com/k-girish/phdstream, ``src/algo/phdstream.py`` with ``counter_type`` set: the method
the paper calls PHDStream). The stream is a sequence of time steps; each step brings a batch of
changes, ``+1`` for an insertion and ``−1`` for a deletion. The public domain is cut in halves
level by level (here the Morton halving of a :class:`~sketchsyn.Box`, alternating the
coordinates, as the reference code's binary split does) down to ``max_depth``. Every node keeps
a private counter (its own changes while it was a leaf) and two derived sums: the *ancestor
count* (its share of its ancestors' counters, split evenly among children) and the *descendant
count* (the sum of its children's counters and descendant counts); its noisy count is the sum
of the three. At each time step, from the root down (PrivTree's rule, Zhang, Xiao and Xie,
"PrivTree: A Differentially Private Algorithm for Hierarchical Decompositions"):

- ``c = (the batch's changes in the node) + (the node's noisy count)``; the biased count is
  ``b = max(c − depth·δ, θ − δ)`` and the node splits if ``depth < max_depth`` and
  ``b + Lap(λ) > θ``; a split node (re)creates its two children if needed, gives each half of
  its own counter plus ancestor count as ancestor count, recurses, then sets its descendant count
  to its children's counters plus descendant counts (consistency);
- otherwise the node is a leaf of this step: its counter counts the batch's changes in it with
  fresh noise (the *simple* counter: ``value += changes + Lap(2/ε)``; or the reference code's
  *block* counter of block size ``B``: the noisy running sum is refreshed every ``B`` counts,
  and a simple counter at half the budget covers the counts in between).

The parameters are the paper's: ``λ = (2β − 1)/(β − 1) · 2/ε`` (fanout ``β = 2``: ``6/ε``),
``δ = λ·ln β``, ``θ = 0``, ``max_depth = 20``, counters at ``ε/2``, no sensitivity scaling (one
change is one event: each change enters the counts of one time step only, so every step is one
PrivTree on that step's changes plus public noisy counts, and the steps compose in parallel:
ε-DP event level, the privacy unit of sketchsyn's deletions). Synthetic data at a step: every
leaf of that step's partition holds ``max(round(noisy count), 0)`` points uniform in its cell;
``release()`` returns that as a :class:`~sketchsyn.synth.distribution.PrivateDistribution`.

What is assumed (stated because the choices are ours): no initialisation on a first slice of the
data (the paper optionally starts from an offline PrivTree; its reference code allows an empty
start, which we use, so every record is streamed); the noise is sketchsyn's exact integer Laplace
(:func:`sketchsyn.privacy.noise.discrete_laplace`) at the same scales instead of float Laplace;
the split alternates coordinates in Morton order; the even (not proportional) ancestor split of
the reference code's default. State bytes count five 8-byte fields per node ever created (prefix,
counter, ancestor and descendant counts, counter time), plus three more for the block counter.

>>> import numpy as np
>>> from sketchsyn import Box
>>> phd = PHDStream(Box.unit(2), epsilon=1.0, rng=0)
>>> phd.step(np.random.default_rng(1).random((5000, 2)))
>>> round(phd.release().total, -3)
5000.0
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sketchsyn.privacy.noise import discrete_laplace
from sketchsyn.privacy.rng import as_source
from sketchsyn.synth.distribution import PrivateDistribution

__all__ = ["PHDStream"]

_FIELDS = ("cv", "ac", "dc", "ct", "blk", "last", "simp")


class _Level:
    """The nodes of one level, sorted by prefix, with their counters and derived counts."""

    def __init__(self) -> None:
        self.prefix = np.zeros(0, dtype=np.uint64)
        for name in _FIELDS:
            setattr(self, name, np.zeros(0, dtype=np.float64))

    def ensure(self, prefixes: np.ndarray) -> np.ndarray:
        """Create the missing nodes among ``prefixes``; their indices after the insertion."""
        new = np.setdiff1d(prefixes, self.prefix, assume_unique=False)
        if new.size:
            order = np.argsort(np.concatenate([self.prefix, new]), kind="stable")
            self.prefix = np.concatenate([self.prefix, new])[order]
            for name in _FIELDS:
                old = getattr(self, name)
                setattr(self, name, np.concatenate([old, np.zeros(new.size)])[order])
        return np.searchsorted(self.prefix, prefixes)

    def metric(self, idx: np.ndarray) -> np.ndarray:
        return self.ac[idx] + self.cv[idx] + self.dc[idx]


class PHDStream:
    """PHDStream on a :class:`~sketchsyn.Box` (see the module docstring).

    Parameters
    ----------
    domain : Box
        Public bounds.
    epsilon : float
        Event-level budget of the whole stream (one change is one event).
    max_depth : int, default 20
        Deepest level of the hierarchy (the paper's value).
    counter : {"simple", "block"}
        The leaves' counter: fresh noise at every count, or the block counter (``block`` counts
        per block).
    block : int, default 8
        Block size of the block counter (the reference code's ``block_8``).
    theta : float, default 0
        Threshold θ of the split rule (the paper's value).
    rng : seed or Generator for the noise.
    """

    def __init__(
        self,
        domain: Any,
        epsilon: float,
        max_depth: int = 20,
        counter: str = "simple",
        block: int = 8,
        theta: float = 0.0,
        rng: Any = None,
    ) -> None:
        if counter not in ("simple", "block"):
            raise ValueError(f"counter must be 'simple' or 'block'; got {counter!r}")
        self.domain, self.epsilon, self.counter, self.block = domain, float(epsilon), counter, block
        self.max_depth = min(int(max_depth), int(domain.max_depth))
        beta = 2.0
        self.lam = (2 * beta - 1) / (beta - 1) / (self.epsilon / 2.0)  # partition noise scale
        self.count_scale = 2.0 / self.epsilon  # the counters get ε/2
        self.delta = self.lam * math.log(beta)
        self.theta = float(theta)
        self._rng = as_source(rng)
        self._levels = [_Level() for _ in range(self.max_depth + 1)]
        self._levels[0].ensure(np.zeros(1, dtype=np.uint64))
        self._leaves: list[tuple[int, np.ndarray]] = [(0, np.zeros(1, dtype=np.uint64))]
        self.t = 0

    # ------------------------------------------------------------------ noise
    def _lap(self, scale: float, n: int) -> np.ndarray:
        if n == 0:
            return np.zeros(0)
        return discrete_laplace(scale, n, rng=self._rng).astype(np.float64)

    def _count(self, lev: _Level, idx: np.ndarray, changes: np.ndarray) -> None:
        """The leaves ``idx`` count this step's ``changes`` (each its own counter)."""
        if self.counter == "simple":
            lev.cv[idx] += changes + self._lap(self.count_scale, idx.size)
            return
        # Block counter (reference code's BlockDPCounter at the counters' ε/2): the block sum is
        # released with noise every ``block`` counts; a simple counter at half that budget
        # covers the counts in between.
        scale = 2.0 * self.count_scale
        lev.ct[idx] += 1
        lev.blk[idx] += changes
        edge = lev.ct[idx] % self.block == 0
        e, m = idx[edge], idx[~edge]
        lev.blk[e] += self._lap(scale, e.size)
        lev.last[e] = lev.blk[e]
        lev.simp[e] = 0.0
        lev.cv[e] = lev.last[e]
        lev.simp[m] += changes[~edge] + self._lap(scale, m.size)
        lev.cv[m] = lev.last[m] + lev.simp[m]

    # ------------------------------------------------------------------ one time step
    def step(self, inserted: Any = None, deleted: Any = None) -> None:
        """One time step with the batch of insertions and deletions (arrays of points)."""
        parts, weights = [], []
        for X, w in ((inserted, 1.0), (deleted, -1.0)):
            if X is not None and len(X):
                codes = np.asarray(self.domain.encode(X, self.max_depth), dtype=np.uint64)
                parts.append(codes)
                weights.append(np.full(codes.size, w))
        codes = np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint64)
        w = np.concatenate(weights) if weights else np.zeros(0)
        order = np.argsort(codes, kind="stable")
        codes, w = codes[order], w[order]
        D = self.max_depth
        active = np.zeros(1, dtype=np.int64)
        splits: list[tuple[int, np.ndarray]] = []
        leaves: list[tuple[int, np.ndarray]] = []
        for level in range(D + 1):
            lev = self._levels[level]
            pref = lev.prefix[active]
            changes = np.zeros(active.size)
            if codes.size:
                keys, starts = np.unique(codes >> np.uint64(D - level), return_index=True)
                sums = np.add.reduceat(w, starts)
                pos = np.minimum(np.searchsorted(keys, pref), keys.size - 1)
                hit = keys[pos] == pref
                changes[hit] = sums[pos[hit]]
            c = changes + lev.metric(active)
            biased = np.maximum(c - level * self.delta, self.theta - self.delta)
            noisy = biased + self._lap(self.lam, active.size)
            split = (noisy > self.theta) if level < D else np.zeros(active.size, dtype=bool)
            leaf = active[~split]
            self._count(lev, leaf, changes[~split])
            leaves.append((level, lev.prefix[leaf].copy()))
            if not split.any():
                break
            parents = active[split]
            share = (lev.cv[parents] + lev.ac[parents]) / 2.0  # the even split of the paper
            kids = np.stack([pref[split] << np.uint64(1), (pref[split] << np.uint64(1)) + 1], 1)
            child = self._levels[level + 1]
            idx = child.ensure(kids.ravel())
            child.ac[idx] = np.repeat(share, 2)
            splits.append((level, pref[split]))
            active = idx
        for level, ppref in reversed(splits):  # consistency: descendant counts, bottom-up
            lev, child = self._levels[level], self._levels[level + 1]
            pidx = np.searchsorted(lev.prefix, ppref)
            kids = np.searchsorted(
                child.prefix, np.stack([ppref << np.uint64(1), (ppref << np.uint64(1)) + 1], 1)
            )
            lev.dc[pidx] = (child.cv[kids] + child.dc[kids]).sum(axis=1)
        self._leaves = leaves
        self.t += 1

    # ------------------------------------------------------------------ release
    def release(self) -> PrivateDistribution:
        """This step's synthetic data: ``max(round(count), 0)`` points per leaf, uniform."""
        lv, px, ct = [], [], []
        for level, pref in self._leaves:
            lev = self._levels[level]
            idx = np.searchsorted(lev.prefix, pref)
            lv.append(np.full(pref.size, level, dtype=np.int64))
            px.append(pref)
            ct.append(np.maximum(np.rint(lev.metric(idx)), 0.0))
        counts = np.concatenate(ct)
        if counts.sum() <= 0:  # an empty synthetic data set: one empty root cell
            return PrivateDistribution(self.domain, [0], [0], [0.0], epsilon=self.epsilon,
                                       mechanism="PHDStream")  # fmt: skip
        return PrivateDistribution(
            self.domain, np.concatenate(lv), np.concatenate(px), counts,
            epsilon=self.epsilon, mechanism="PHDStream",
        )  # fmt: skip

    @property
    def n_nodes(self) -> int:
        """Nodes created so far (they are never freed: a leaf keeps its old children)."""
        return int(sum(lev.prefix.size for lev in self._levels))

    @property
    def nbytes(self) -> int:
        """State bytes: 8 bytes per field per node (see the module docstring)."""
        fields = 5 if self.counter == "simple" else 8
        return 8 * fields * self.n_nodes
