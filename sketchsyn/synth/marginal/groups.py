"""How a release groups a column's coarse bins before it measures a pair: cells fitted to the
rows and the noise.

A pair table of the state has ``2**c_i × 2**c_j`` cells, fixed before any row arrives. The
release measures it on **groups** of those bins instead, chosen from the noisy one-way counts
already released (post-processing: no budget), so that a cell of the measured table holds, at
the noisy marginals' spread, about ``CELL_NOISE`` noise scales of rows or more:

* an ordered column (numeric, datetime, integer, IPv4) is cut into ``K`` runs of neighbouring
  bins of about equal noisy mass (:func:`ordered_groups`): where the data are, the groups are
  narrow; bins holding nothing join their neighbours;
* a categorical (or boolean) keeps its ``K − 1`` heaviest bins by noisy mass as groups of their
  own and pools the others into one (:func:`categorical_groups`), as MST compresses a domain
  (McKenna, Miklau and Sheldon, "Winning the NIST Contest: A scalable and general approach to
  differentially private synthetic data").

:func:`pair_shape` splits a pair's cell budget ``n̂ / (CELL_NOISE · b)`` between its two
columns. :func:`group_table` sums a table's cells into groups, :func:`group_sums` a marginal.

>>> ordered_groups(np.array([0.1, 0.2, 0.2, 0.2, 0.2, 0.1]), 3).tolist()
[0, 0, 1, 1, 2, 2]
>>> categorical_groups(np.array([0.5, 0.0, 0.3, 0.2]), 2).tolist()  # the heaviest, the rest
[0, 1, 1, 1]
>>> categorical_groups(np.array([0.5, 0.0, 0.3, 0.2]), 3).tolist()  # the empty bin joins one
[0, 0, 1, 2]
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "CELL_NOISE",
    "categorical_groups",
    "group_sums",
    "group_table",
    "ordered_groups",
    "pair_shape",
]

CELL_NOISE = 2.0  # a measured cell holds this many noise scales of rows at the noisy spread


def _relabel(g: np.ndarray) -> np.ndarray:
    """Group labels renumbered 0, 1, … in the order of each group's first bin."""
    _, first, inverse = np.unique(g, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return rank[inverse.ravel()].reshape(g.shape)


def ordered_groups(p: np.ndarray, k: int) -> np.ndarray:
    """At most ``k`` runs of neighbouring bins of about equal mass ``p`` (a bin goes to the run
    holding the middle of its mass; bins without mass follow their left neighbour)."""
    p = np.asarray(p, dtype=np.float64)
    if k >= p.size:
        return np.arange(p.size, dtype=np.int64)
    total = p.sum()
    if not total > 0:
        return (np.arange(p.size) * k // p.size).astype(np.int64)
    cum = np.cumsum(p) / total
    middle = cum - p / (2.0 * total)
    return _relabel(np.minimum((middle * k).astype(np.int64), k - 1))


def categorical_groups(p: np.ndarray, k: int) -> np.ndarray:
    """Groups of a categorical's bins by their mass ``p``: when ``k`` is at least the number of
    bins holding mass, each of those its own group and the empty bins one more group (or, with
    no group to spare, each with the holding bin before it); else the ``k − 1`` heaviest bins
    (ties to the lower bin) one group each and every other bin one more. Groups are numbered
    in the order of their first bin."""
    p = np.asarray(p, dtype=np.float64)
    held = p > 0
    n_held = int(held.sum())
    if n_held == 0:
        return np.zeros(p.size, dtype=np.int64)
    if k >= n_held:
        g = np.cumsum(held) - 1  # a holding bin's own group; an empty one joins the one before
        g = np.maximum(g, 0)
        if k > n_held and n_held < p.size:
            g = np.where(held, g, n_held)
        return _relabel(g)
    order = np.argsort(-p, kind="stable")
    keep = max(k - 1, 0)
    g = np.full(p.size, keep, dtype=np.int64)
    g[order[:keep]] = np.arange(keep)
    return _relabel(g)


def pair_shape(bins_i: int, bins_j: int, cells: float) -> tuple[int, int]:
    """``(K_i, K_j)``: groups of two columns with ``bins_i``, ``bins_j`` usable bins, about
    ``cells`` cells in all, at least 2 per column that has 2 bins, the rest shared evenly (a
    narrow column leaves its share to the other).

    >>> pair_shape(64, 64, 100.0), pair_shape(2, 64, 100.0), pair_shape(64, 64, 1.0)
    ((10, 10), (2, 50), (2, 2))
    """
    cells = max(float(cells), 4.0)
    ki = min(bins_i, max(2, int(math.sqrt(cells))))
    kj = min(bins_j, max(2, int(cells // ki)))
    ki = min(bins_i, max(2, int(cells // kj)))
    return max(ki, 1), max(kj, 1)


def group_table(table: np.ndarray, gi: np.ndarray, gj: np.ndarray, ki: int, kj: int) -> np.ndarray:
    """``table[a, c]`` summed into groups: ``out[gi[a], gj[c]]`` (float64).

    >>> group_table(np.arange(6.0).reshape(2, 3), np.array([0, 0]), np.array([0, 1, 1]), 1, 2)
    array([[ 3., 12.]])
    """
    rows = np.zeros((ki, table.shape[1]))
    np.add.at(rows, gi, table)
    out = np.zeros((ki, kj))
    np.add.at(out.T, gj, rows.T)
    return out


def group_sums(p: np.ndarray, g: np.ndarray, k: int) -> np.ndarray:
    """A marginal ``p`` summed into its ``k`` groups ``g``."""
    return np.bincount(g, weights=np.asarray(p, dtype=np.float64), minlength=k)
