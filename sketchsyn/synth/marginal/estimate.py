"""The sampling model of a table release, fitted from what it measured (post-processing only).

Inputs: the noisy one-way tables of every column and the noisy tables of the measured pairs,
each on its groups of coarse bins (:mod:`~sketchsyn.synth.marginal.groups`).

1. **Marginals**: each column's fine bins from its one-way table, and its coarse marginal and
   the row count ``n̂`` from every table holding them (:mod:`~.marginals`).
2. **Measured tables**: each noisy pair table projected onto the non-negative tables of total
   ``n̂`` (the Euclidean projection onto a scaled simplex, which subtracts one common amount and
   clamps: noise in empty cells does not become mass), then fitted to the consensus marginals
   of its two columns' groups by iterative proportional fitting.
3. **Tree**: a maximum spanning tree over the measured pairs, weighted by the mutual information
   of their fitted tables (Chow and Liu); the measured pairs connect every column (the release
   measures a spanning tree first).
4. **Conditionals**: each tree edge's table spread from groups to coarse bins in proportion to
   the consensus marginals inside each group, divided by the parent's rows; each column's fine
   bins given its coarse bin from its one-way table.

:func:`tree_joints` gives the two-way tables the tree implies, which the release's later
selection rounds compare with the data.

>>> table = np.array([[0.5, 0.0], [0.0, 0.5]])
>>> round(mutual_information(table), 4)  # one bit of dependence: ln 2
0.6931
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .fit import _IPF_ROUNDS, _PRIOR, information_of, maximum_spanning_tree
from .groups import group_sums
from .layout import Layout
from .marginals import as_ordered, consensus, fine_given_coarse, one_way

__all__ = [
    "Measured",
    "fine_probabilities",
    "fit_release",
    "mutual_information",
    "simplex_projection",
    "tree_joints",
]


# One measured pair: ((i, j), groups of i's coarse bins, groups of j's, noisy table K_i × K_j).
Measured = tuple[tuple[int, int], np.ndarray, np.ndarray, np.ndarray]


def fine_probabilities(layout: Layout, singles: list[np.ndarray], scale: float) -> list[np.ndarray]:
    """Each column's fine-bin probabilities from its noisy one-way table
    (:func:`~sketchsyn.synth.marginal.marginals.one_way`)."""
    return [
        one_way(s, layout.valid_fine(j), scale, as_ordered(layout.schema._cols[j].kind))
        for j, s in enumerate(singles)
    ]


def mutual_information(table: np.ndarray) -> float:
    """Mutual information (nats) of a joint table (normalised here)."""
    t = np.asarray(table, dtype=np.float64)
    total = t.sum()
    if not total > 0:
        return 0.0
    return information_of(t / total)


def simplex_projection(y: np.ndarray, total: float) -> np.ndarray:
    """The closest array to ``y`` (Euclidean) with non-negative entries summing to ``total``:
    ``max(y − τ, 0)`` for the one ``τ`` that gives that sum.

    >>> simplex_projection(np.array([5.0, 1.0, -2.0]), 4.0).tolist()
    [4.0, 0.0, 0.0]
    """
    v = np.asarray(y, dtype=np.float64).ravel()
    if not total > 0 or v.size == 0:
        return np.zeros_like(np.asarray(y, dtype=np.float64))
    u = np.sort(v)[::-1]
    cum = np.cumsum(u) - total
    idx = np.arange(1, v.size + 1)
    rho = idx[u - cum / idx > 0][-1]
    tau = cum[rho - 1] / rho
    return np.maximum(v - tau, 0.0).reshape(np.shape(y))


def _ipf(t: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    for _ in range(_IPF_ROUNDS):
        r = t.sum(axis=1)
        t *= np.where(r > 0, rows / np.where(r > 0, r, 1.0), 0.0)[:, None]
        c = t.sum(axis=0)
        t *= np.where(c > 0, cols / np.where(c > 0, c, 1.0), 0.0)[None, :]
    return t


def _within(marg: np.ndarray, g: np.ndarray, k: int) -> np.ndarray:
    """Each coarse bin's share of its group's mass."""
    mass = group_sums(marg, g, k)[g]
    return np.where(mass > 0, marg / np.where(mass > 0, mass, 1.0), 0.0)


def expand(fitted: np.ndarray, gi: np.ndarray, gj: np.ndarray, mi: np.ndarray, mj: np.ndarray):
    """A fitted group table spread over coarse bins in proportion to the marginals ``mi``,
    ``mj`` inside each group (independence inside a cell of the measured table)."""
    ki, kj = fitted.shape
    return fitted[gi][:, gj] * _within(mi, gi, ki)[:, None] * _within(mj, gj, kj)[None, :]


def _conditional(joint: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    rows = joint.sum(axis=1, keepdims=True)
    return np.where(rows > 0, joint / np.where(rows > 0, rows, 1.0), fallback[None, :])


def _orient(edges: list[tuple[int, int]], d: int) -> list[tuple[int, int]]:
    """Undirected tree edges as ``(parent, child)`` from column 0, parents first."""
    adj: dict[int, list[int]] = {}
    for a, b in edges:
        adj.setdefault(a, []).append(b)
        adj.setdefault(b, []).append(a)
    seen, queue, out = {0}, [0], []
    while queue:
        x = queue.pop(0)
        for y in sorted(adj.get(x, [])):
            if y not in seen:
                seen.add(y)
                queue.append(y)
                out.append((x, y))
    return out


def fit_release(
    layout: Layout,
    singles: list[np.ndarray],
    measured: list[Measured],
    single_scale: float,
    pair_scale: float,
    one_ways: list[np.ndarray] | None = None,
) -> dict[str, Any]:
    """The model (module docstring): ``total``, coarse ``marg`` per column, ``fine`` (fine bins
    given coarse, per column), ``fitted`` and ``mi`` per measured pair, tree ``edges`` with
    their coarse-bin ``conds``, and ``measured`` (the pairs with their groups) for refinement.
    ``one_ways``: each column's fine probabilities (:func:`fine_probabilities`), when known."""
    d = layout.d
    valid = [layout.valid_fine(j) for j in range(d)]
    if one_ways is None:
        one_ways = fine_probabilities(layout, singles, single_scale)
    fine = [fine_given_coarse(one_ways[j], valid[j], layout.coarse[j]) for j in range(d)]
    marg, total = consensus(
        singles, valid, layout.coarse, single_scale, measured, pair_scale, one_ways
    )
    fitted: dict[tuple[int, int], np.ndarray] = {}
    groups: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
    mi: dict[tuple[int, int], float] = {}
    for (i, j), gi, gj, noisy in measured:
        ki, kj = noisy.shape
        rows, cols = group_sums(marg[i], gi, ki), group_sums(marg[j], gj, kj)
        t = simplex_projection(noisy.astype(np.float64), total)
        s = t.sum()
        t = t / s if s > 0 else np.outer(rows, cols)
        t = (1.0 - _PRIOR) * t + _PRIOR * np.outer(rows, cols)
        fitted[(i, j)] = _ipf(t, rows, cols)
        groups[(i, j)] = (gi, gj)
        mi[(i, j)] = mutual_information(fitted[(i, j)])
    weights = np.array([mi.get(p, -np.inf) for p in layout.pairs])
    edges = _orient(maximum_spanning_tree(d, weights), d)
    conds = []
    for parent, child in edges:
        pair = (min(parent, child), max(parent, child))
        gi, gj = groups[pair]
        joint = expand(fitted[pair], gi, gj, marg[pair[0]], marg[pair[1]])
        conds.append(_conditional(joint if parent < child else joint.T, marg[child]))
    return {
        "total": total,
        "marg": marg,
        "fine": fine,
        "fitted": fitted,
        "groups": groups,
        "mi": mi,
        "edges": edges,
        "conds": conds,
    }


def tree_joints(model: dict[str, Any], u: int) -> dict[int, np.ndarray]:
    """The joint probability tables ``P(x_u, x_w)`` (coarse bins) the tree implies for every
    column ``w ≠ u``: products of the edges' conditionals along the path from ``u``."""
    marg = model["marg"]
    steps: dict[int, list[tuple[int, np.ndarray]]] = {}
    for (parent, child), cond in zip(model["edges"], model["conds"], strict=True):
        steps.setdefault(parent, []).append((child, cond))
        joint = marg[parent][:, None] * cond  # P(parent, child)
        back = _conditional(joint.T, marg[parent])  # P(parent | child)
        steps.setdefault(child, []).append((parent, back))
    out = {u: np.diag(marg[u])}
    queue = [u]
    while queue:
        x = queue.pop(0)
        for y, cond in steps.get(x, []):
            if y not in out:
                out[y] = out[x] @ cond
                queue.append(y)
    del out[u]
    return out
