"""The release of :class:`~sketchsyn.synth.marginal.MarginalSynthesizer`:
:class:`MarginalDistribution`.

It holds only private values: the consistent noisy counts of every pair of columns (a
``2**bits × 2**bits`` grid, the leaves of one PMM tree per pair) and of every single column (a
``2**fine_bits`` grid, the leaves of one PMM tree per column), with the public parameters.
Everything else is computed from them when first needed, and is post-processing:

1. **Shared columns agree.** Each column's coarse marginal (``2**bits`` bins) is estimated by
   every table that holds it (its ``d − 1`` pairs and its single); the estimates are averaged
   with weights ``ε_t²`` (a tree's noise variance falls as ``1/ε_t²``) into one consensus
   marginal, and every pair table is fitted to the consensus of both its columns by iterative
   proportional fitting (a tiny independent prior fills rows the noise emptied).
2. **A tree of pairs.** The mutual information of every fitted pair table gives the weights of
   a maximum spanning tree over the columns (Prim's algorithm, ties to the lower index): the
   ``d − 1`` pairs that keep the most dependence, as in Chow and Liu's tree approximation.
3. **Sampling along the tree.** The root column's coarse bin is drawn from its consensus
   marginal, each other column's bin from the conditional row of its edge's table given its
   parent's bin; then a fine bin inside the coarse one from the column's single-column counts,
   and a uniform point inside the fine bin.

Range counts (:meth:`MarginalDistribution.count`) are exact for that tree model (belief
propagation over the coarse bins, fine bins cut by the query's edges).

>>> import numpy as np
>>> from sketchsyn import Box
>>> from sketchsyn.synth.marginal import MarginalSynthesizer
>>> X = np.random.default_rng(0).random((2000, 3))
>>> syn = MarginalSynthesizer(Box.unit(3), epsilon=1.0, bits=3, fine_bits=5, rng=1)
>>> syn.update_many(X)
>>> dist = syn.release()
>>> MarginalDistribution.from_bytes(dist.to_bytes()) == dist
True
>>> dist.sample(4, rng=2).shape
(4, 3)
"""

from __future__ import annotations

import math
from itertools import combinations
from typing import Any

import numpy as np

from ...attributes import ReadOnly
from ...domains import Box
from ...errors import ParameterError, SerializationError, check_int
from ...io.serial import Arrays, MetaReader
from ...io.summary import Summary
from ...privacy.rng import RNGLike, as_source

__all__ = [
    "MAX_BITS",
    "MAX_COLUMNS",
    "MAX_FINE_BITS",
    "MarginalDistribution",
    "maximum_spanning_tree",
    "morton_grid",
    "pair_list",
    "spread_bits",
]

_KIND = "MarginalDistribution"
MAX_COLUMNS = 64
MAX_BITS = 12  # 4**12 = 16.8 M cells per pair
MAX_FINE_BITS = 24
_IPF_ROUNDS = 40
_PRIOR = 1e-6  # share of an independent table mixed in before fitting (fills emptied rows)
_SAMPLE_CHUNK = 1 << 16
_MI_BITS = 4  # mutual information on at most 16 × 16 bins


def pair_list(d: int) -> list[tuple[int, int]]:
    """The ``d(d − 1)/2`` pairs ``(i, j)``, ``i < j``, in lexicographic order.

    >>> pair_list(3)
    [(0, 1), (0, 2), (1, 2)]
    """
    return list(combinations(range(d), 2))


def spread_bits(q: np.ndarray) -> np.ndarray:
    """Bit ``k`` of each value (below ``2**32``) moved to bit ``2k`` (uint64).

    >>> spread_bits(np.array([0b111], dtype=np.uint64)).tolist() == [0b10101]
    True
    """
    x = np.asarray(q, dtype=np.uint64) & np.uint64(0xFFFFFFFF)
    for shift, mask in (
        (16, 0x0000FFFF0000FFFF),
        (8, 0x00FF00FF00FF00FF),
        (4, 0x0F0F0F0F0F0F0F0F),
        (2, 0x3333333333333333),
        (1, 0x5555555555555555),
    ):
        x = (x | (x << np.uint64(shift))) & np.uint64(mask)
    return x


def morton_grid(bits: int) -> np.ndarray:
    """``grid[a, c]``: the level-``2·bits`` Morton code of the cell with column bins ``a, c``
    in a 2-D :class:`~sketchsyn.domains.Box` (level 1 halves the first column).

    >>> morton_grid(1).tolist()
    [[0, 1], [2, 3]]
    """
    idx = spread_bits(np.arange(2**bits, dtype=np.uint64))
    return ((idx[:, None] << np.uint64(1)) | idx[None, :]).astype(np.int64)


def maximum_spanning_tree(d: int, weights: np.ndarray) -> list[tuple[int, int]]:
    """Edges ``(parent, child)`` of a maximum spanning tree of ``d`` nodes (Prim from node 0).

    ``weights`` lists one weight per pair of :func:`pair_list`; the edges come in the order
    they were added, so every parent precedes its children. Ties go to the lower pair index.

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


def _mutual_information(table: np.ndarray) -> float:
    """Mutual information (nats) of a joint probability table, read on at most ``2**_MI_BITS``
    bins per column (coarser cells hold more signal than noise)."""
    nb = table.shape[0]
    g = max(nb >> _MI_BITS, 1)
    t = table.reshape(nb // g, g, nb // g, g).sum(axis=(1, 3))
    indep = np.outer(t.sum(axis=1), t.sum(axis=0))
    pos = (t > 0) & (indep > 0)
    return float((t[pos] * np.log(t[pos] / indep[pos])).sum())


def _normalise(v: np.ndarray) -> np.ndarray:
    total = v.sum(axis=-1, keepdims=True)
    size = v.shape[-1]
    return np.where(total > 0, v / np.where(total > 0, total, 1.0), 1.0 / size)


def _row_conditionals(table: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """Each row of ``table`` divided by its sum; an empty row becomes ``fallback``."""
    rows = table.sum(axis=1, keepdims=True)
    out = table / np.where(rows > 0, rows, 1.0)
    empty = rows[:, 0] <= 0
    out[empty] = fallback
    return out


def _draw_rows(cond: np.ndarray, rows: np.ndarray, u: np.ndarray) -> np.ndarray:
    """For each ``rows[t]``, an index drawn from the distribution ``cond[rows[t]]`` by ``u[t]``.

    Every row sums to one, so row ``a`` of the flattened cumulative sum covers ``[a, a + 1)``.
    """
    width = cond.shape[1]
    cum = np.cumsum(cond.ravel())
    idx = np.searchsorted(cum, rows + u, side="right") - rows * width
    return np.clip(idx, 0, width - 1)


class MarginalDistribution(Summary):
    """The release of a :class:`~sketchsyn.synth.marginal.MarginalSynthesizer`: consistent
    noisy 2-way and 1-way marginals and the tree model sampled from them.

    Saved state: **private** (``STATE_PRIVACY = "private"``): the noisy consistent counts of
    every pair and single column and the public parameters; no exact value.

    Parameters
    ----------
    domain : Box
        Public bounds (d ≥ 2 columns).
    epsilon : float
        Total budget of the release (pure ε-DP, add/remove one row).
    pair_counts : ndarray (P, 4**bits) of int64
        Consistent counts of each pair's grid in Morton order (pairs as :func:`pair_list`).
    single_counts : ndarray (d, 2**fine_bits) of int64
        Consistent counts of each column's fine grid.
    pair_epsilon, single_epsilon : float
        Budget of each pair tree and of each single-column tree.
    params : dict, optional
        Public parameters to record (JSON values).
    """

    STATE_PRIVACY = "private"
    FORMAT_VERSION = 1

    def __init__(
        self,
        domain: Box,
        epsilon: float,
        pair_counts: Any,
        single_counts: Any,
        pair_epsilon: float,
        single_epsilon: float,
        params: dict[str, Any] | None = None,
    ) -> None:
        owner = _KIND
        if not isinstance(domain, Box) or domain.d < 2:
            raise ParameterError(
                f"The 'domain' parameter of {owner} must be a Box of at least 2 columns. "
                f"Got {domain!r} instead."
            )
        d = domain.d
        pairs = np.asarray(pair_counts)
        singles = np.asarray(single_counts)
        n_pairs = d * (d - 1) // 2
        if pairs.ndim != 2 or pairs.shape[0] != n_pairs or pairs.dtype.kind not in "iu":
            raise ParameterError(
                f"The 'pair_counts' parameter of {owner} must be integer counts of shape "
                f"({n_pairs}, 4**bits). Got shape {pairs.shape} instead."
            )
        bits = int(round(math.log(max(pairs.shape[1], 1), 4)))
        if not 1 <= bits <= MAX_BITS or pairs.shape[1] != 4**bits:
            raise ParameterError(
                f"The 'pair_counts' parameter of {owner} must have 4**bits columns, 1 <= bits "
                f"<= {MAX_BITS}. Got {pairs.shape[1]} instead."
            )
        fine = int(round(math.log2(max(singles.shape[-1], 1)))) if singles.ndim == 2 else -1
        if (
            singles.ndim != 2
            or singles.shape[0] != d
            or singles.dtype.kind not in "iu"
            or not bits <= fine <= MAX_FINE_BITS
            or singles.shape[1] != 2**fine
        ):
            raise ParameterError(
                f"The 'single_counts' parameter of {owner} must be integer counts of shape "
                f"({d}, 2**fine_bits) with {bits} <= fine_bits <= {MAX_FINE_BITS}. Got shape "
                f"{singles.shape} instead."
            )
        if pairs.size and pairs.min() < 0 or singles.size and singles.min() < 0:
            raise ParameterError(f"The counts of {owner} must be non-negative.")
        self._domain = domain
        self._epsilon = float(epsilon)
        self._bits, self._fine_bits = bits, fine
        self._pairs = np.ascontiguousarray(pairs, dtype=np.int64)
        self._singles = np.ascontiguousarray(singles, dtype=np.int64)
        self._pair_epsilon = float(pair_epsilon)
        self._single_epsilon = float(single_epsilon)
        self._params = dict(params or {})
        self._model: dict[str, Any] | None = None

    # ------------------------------------------------------------------ properties
    domain = ReadOnly[Box]("The public box of the table, in user units.")
    epsilon = ReadOnly[float]("Total privacy budget ε of the release.")

    @property
    def mechanism(self) -> str:
        return "MarginalSynthesizer"

    @property
    def params(self) -> dict[str, Any]:
        return dict(self._params)

    bits = ReadOnly[int]("Bits per column of each pair grid (``2**bits`` bins per column).")
    fine_bits = ReadOnly[int]("Bits of each single-column grid.")

    @property
    def total(self) -> float:
        """The consensus noisy row count (weighted mean of the trees' consistent totals)."""
        return float(self._fitted()["total"])

    @property
    def tree(self) -> list[tuple[int, int]]:
        """The ``(parent, child)`` column pairs the model samples along."""
        return list(self._fitted()["edges"])

    @property
    def mutual_information(self) -> np.ndarray:
        """Mutual information (nats) of each fitted pair table, in :func:`pair_list` order."""
        return self._fitted()["mi"].copy()

    @property
    def nbytes(self) -> int:
        return int(self._pairs.nbytes + self._singles.nbytes) + 128

    # ------------------------------------------------------------------ post-processing
    def _fitted(self) -> dict[str, Any]:
        if self._model is None:
            self._model = self._fit()
        return self._model

    def _fit(self) -> dict[str, Any]:
        d, b, fb = self._domain.d, self._bits, self._fine_bits
        nb = 2**b
        pairs = pair_list(d)
        grid = morton_grid(b)
        tables = self._pairs[:, grid].astype(np.float64)  # (P, nb, nb): [pair, a, c]
        singles = self._singles.astype(np.float64)
        coarse_single = singles.reshape(d, nb, -1).sum(axis=2)
        w_pair, w_single = self._pair_epsilon**2, self._single_epsilon**2
        # 1. consensus marginals and total
        est = w_single * _normalise(coarse_single)
        weight = np.full(d, w_single)
        for k, (i, j) in enumerate(pairs):
            est[i] += w_pair * _normalise(tables[k].sum(axis=1))
            est[j] += w_pair * _normalise(tables[k].sum(axis=0))
            weight[i] += w_pair
            weight[j] += w_pair
        marg = _normalise(est / weight[:, None])
        totals = np.concatenate([tables.sum(axis=(1, 2)), singles.sum(axis=1)])
        tw = np.concatenate([np.full(len(pairs), w_pair), np.full(d, w_single)])
        total = float((totals * tw).sum() / tw.sum())
        # 2. fit each pair table to both consensus marginals, then its mutual information
        mi = np.zeros(len(pairs))
        fitted = np.empty_like(tables)
        for k, (i, j) in enumerate(pairs):
            indep = np.outer(marg[i], marg[j])
            t = _normalise(tables[k].ravel()).reshape(nb, nb)
            t = (1 - _PRIOR) * t + _PRIOR * indep
            for _ in range(_IPF_ROUNDS):
                r = t.sum(axis=1)
                t *= np.where(r > 0, marg[i] / np.where(r > 0, r, 1.0), 0.0)[:, None]
                c = t.sum(axis=0)
                t *= np.where(c > 0, marg[j] / np.where(c > 0, c, 1.0), 0.0)[None, :]
            fitted[k] = t
            mi[k] = _mutual_information(t)
        edges = maximum_spanning_tree(d, mi)
        index = {p: k for k, p in enumerate(pairs)}
        conds = []
        for parent, child in edges:
            k = index[(min(parent, child), max(parent, child))]
            t = fitted[k] if parent < child else fitted[k].T
            conds.append(_row_conditionals(t, marg[child]))
        fine = _row_conditionals(
            singles.reshape(d * nb, -1), np.full(2 ** (fb - b), 2.0 ** (b - fb))
        ).reshape(d, nb, -1)
        return {
            "total": max(total, 0.0),
            "marg": marg,
            "mi": mi,
            "edges": edges,
            "conds": conds,
            "fine": fine,
        }

    # ------------------------------------------------------------------ queries
    def sample(self, m: int, rng: RNGLike = None, *, as_frame: bool = False) -> Any:
        """Draw ``m`` synthetic rows along the tree of pairs (post-processing: no budget).

        Parameters
        ----------
        m : int
            Number of rows (``≥ 0``).
        rng : None, int, SeedSequence, Generator or RandomSource
            ``None`` is the OS CSPRNG; a seed here does not weaken the release's privacy.
        as_frame : bool
            Return a pandas DataFrame named by the domain's columns.

        Returns
        -------
        ndarray (m, d) of float64 in user units, or a DataFrame.
        """
        m = check_int(m, "m", f"{_KIND}.sample", minimum=0)
        src = as_source(rng)
        model = self._fitted()
        d = self._domain.d
        out = np.empty((m, d))
        for start in range(0, m, _SAMPLE_CHUNK):
            self._sample_into(out[start : start + _SAMPLE_CHUNK], model, src)
        if as_frame:
            import pandas as pd

            names = self._domain.columns or [f"x{i}" for i in range(d)]
            return pd.DataFrame(out, columns=list(names))
        return out

    def _sample_into(self, out: np.ndarray, model: dict[str, Any], src: Any) -> None:
        m, d = out.shape
        b, fb = self._bits, self._fine_bits
        bins = np.zeros((d, m), dtype=np.int64)
        root = np.zeros(m, dtype=np.int64)
        bins[0] = _draw_rows(model["marg"][0][None, :], root, src.random(m))
        for (parent, child), cond in zip(model["edges"], model["conds"], strict=True):
            bins[child] = _draw_rows(cond, bins[parent], src.random(m))
        lo, span = self._domain.lower, self._domain.upper - self._domain.lower
        for i in range(d):
            sub = _draw_rows(model["fine"][i], bins[i], src.random(m))
            cell = (bins[i] << (fb - b)) + sub
            u = np.ldexp(cell.astype(np.float64) + src.random(m), -fb)
            out[:, i] = np.minimum(lo[i] + u * span[i], self._domain.upper[i])

    def count(self, lower: Any, upper: Any) -> float:
        """Noisy number of rows in the box ``[lower, upper]`` under the tree model.

        Exact for the model: each column's coarse bins are weighted by the share of their fine
        mass inside the query (uniform inside a fine bin), then combined along the tree.
        """
        d = self._domain.d
        lo = np.asarray(lower, dtype=np.float64).reshape(-1)
        hi = np.asarray(upper, dtype=np.float64).reshape(-1)
        if lo.shape != (d,) or hi.shape != (d,):
            raise ParameterError(
                f"The 'lower' and 'upper' parameters of {_KIND}.count must have {d} values. "
                f"Got {lo.size} and {hi.size} instead."
            )
        model = self._fitted()
        b, fb = self._bits, self._fine_bits
        span = self._domain.upper - self._domain.lower
        u0 = (lo - self._domain.lower) / span
        u1 = (hi - self._domain.lower) / span
        edges_f = np.arange(2**fb + 1) / 2.0**fb
        weights = np.empty((d, 2**b))
        for i in range(d):
            inside = np.minimum(u1[i], edges_f[1:]) - np.maximum(u0[i], edges_f[:-1])
            ov = np.clip(inside * 2.0**fb, 0.0, 1.0).reshape(2**b, -1)
            weights[i] = (model["fine"][i] * ov).sum(axis=1)
        belief = weights.copy()
        steps = list(zip(model["edges"], model["conds"], strict=True))
        for (parent, child), cond in reversed(steps):
            belief[parent] *= cond @ belief[child]
        return float(model["total"] * (model["marg"][0] * belief[0]).sum())

    # ------------------------------------------------------------------ bytes
    def _freeze(self) -> None:
        """A release is read-only already."""

    def _state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        meta = {
            "domain": self._domain.to_dict(),
            "epsilon": self._epsilon,
            "pair_epsilon": self._pair_epsilon,
            "single_epsilon": self._single_epsilon,
            "bits": self._bits,
            "fine_bits": self._fine_bits,
            "params": self._params,
        }
        return meta, {"pairs": self._pairs, "singles": self._singles}

    @classmethod
    def _from_state(
        cls, fields: MetaReader, arrays: Arrays, version: int, blob: bytes, rng: Any
    ) -> MarginalDistribution:
        domain = fields.domain(kind="Box")
        d = domain.d
        if not 2 <= d <= MAX_COLUMNS:
            raise SerializationError(
                f"{_KIND} blob header field 'domain' must have 2 to 64 columns"
            )
        epsilon = fields.epsilon("epsilon")
        pair_eps = fields.epsilon("pair_epsilon")
        single_eps = fields.epsilon("single_epsilon")
        bits = fields.int("bits", minimum=1, maximum=MAX_BITS)
        fine = fields.int("fine_bits", minimum=bits, maximum=MAX_FINE_BITS)
        params = fields.dict("params")
        pairs = fields.array(arrays, "pairs", np.int64, (d * (d - 1) // 2, 4**bits))
        singles = fields.array(arrays, "singles", np.int64, (d, 2**fine))
        for name, table in (("pairs", pairs), ("singles", singles)):
            if table.size and table.min() < 0:
                raise SerializationError(
                    f"{_KIND} blob: array {name!r} holds a negative count ({int(table.min())})"
                )
        return cls(domain, epsilon, pairs, singles, pair_eps, single_eps, params)

    def __repr__(self) -> str:
        return (
            f"MarginalDistribution(epsilon={self._epsilon!r}, d={self._domain.d}, "
            f"bits={self._bits}, fine_bits={self._fine_bits})"
        )
