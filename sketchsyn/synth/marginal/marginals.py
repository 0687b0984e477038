"""Each column's distribution from the released noisy counts (post-processing only).

* :func:`one_way`: a column's fine bins from its noisy one-way table. An ordered column
  (numeric, datetime, integer, IPv4) is denoised top down, as a Haar wavelet with hard
  thresholds (Donoho and Johnstone, "Ideal spatial adaptation by wavelet shrinkage"): each
  block's mass is split between its two halves in proportion to their sizes unless the noisy
  halves differ by more than ``HAAR_T`` standard deviations of their noise, in which case the
  noisy split is kept; a flat stretch is spread evenly, a step or a spike keeps its shape, and
  the noise of the many empty bins of a wide public range does not become mass. A categorical
  (or boolean) keeps each category whose noisy count reaches ``HAAR_T`` noise scales, and the
  others share their summed noisy count (clamped at zero) evenly, as MST's compression does
  (McKenna, Miklau and Sheldon, "Winning the NIST Contest").
* :func:`consensus`: each column's coarse marginal and the row count from every table that
  holds them, the one-way table and every measured pair, by weighted least squares (weights:
  the inverse noise variance of each estimate) under non-negativity, solved by projected
  gradient descent: a measured pair is a second, cheaper estimate of both its columns.

>>> v = np.array([-2, 101, 98, 3, -4, 1, 5, -2])  # two heavy bins in noise of scale 3
>>> (one_way(v, np.ones(8, bool), scale=3.0, ordered=True) * 200).round(1).tolist()
[0.0, 100.0, 97.5, 2.5, 0.0, 0.0, 0.0, 0.0]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...privacy.noise import discrete_laplace_variance

__all__ = ["HAAR_T", "consensus", "haar", "one_way"]

HAAR_T = 2.5  # a split (or a category) is kept when it exceeds 2.5 noise standard deviations
_STEPS = 300  # projected gradient steps of the least squares


def haar(values: np.ndarray, units: np.ndarray, scale: float, t: float = HAAR_T) -> np.ndarray:
    """Counts ``values`` denoised top down (module docstring); ``units[k]`` is the number of
    noisy cells bin ``k`` sums (0: a bin that names no value, which gets nothing). The total
    is the clamped noisy total; each split keeps the noisy shares only when significant. The
    bins are padded to a power of two; the splits run a level at a time.

    >>> haar(np.array([10.0, 12.0, 9.0, 11.0]), np.ones(4), scale=2.0).tolist()
    [10.5, 10.5, 10.5, 10.5]
    """
    units = np.asarray(units, dtype=np.float64)
    size = units.size
    width = 1 << max(size - 1, 0).bit_length()
    u = np.zeros(width)
    u[:size] = units
    v = np.zeros(width)
    v[:size] = np.where(units > 0, values, 0.0)
    # sums and noise units of every block, level by level (level 0: the whole range)
    sums, counts = [v], [u]
    while sums[-1].size > 1:
        sums.append(sums[-1].reshape(-1, 2).sum(axis=1))
        counts.append(counts[-1].reshape(-1, 2).sum(axis=1))
    sums, counts = sums[::-1], counts[::-1]
    total = np.array([max(float(sums[0][0]), 0.0)])
    for level in range(1, len(sums)):
        s, n = sums[level], counts[level]
        s_left, s_right, n_left, n_right = s[0::2], s[1::2], n[0::2], n[1::2]
        both = (n_left > 0) & (n_right > 0)
        n_all = np.where(both, n_left + n_right, 1.0)
        excess = np.where(both, (s_left * n_right - s_right * n_left) / n_all, 0.0)
        sd = scale * np.sqrt(np.where(both, 2.0 * n_left * n_right / n_all, 0.0))
        excess = np.where(np.abs(excess) < t * sd, 0.0, excess)
        share = np.where(both, n_left / n_all, (n_left > 0).astype(np.float64))
        parent = total
        left = np.minimum(np.maximum(parent * share + excess, 0.0), parent)
        total = np.empty(s.size)
        total[0::2], total[1::2] = left, parent - left
    return np.where(u > 0, total, 0.0)[:size]


def _pooled(values: np.ndarray, valid: np.ndarray, scale: float, t: float) -> np.ndarray:
    """Categories at or above ``t`` noise scales kept, the others sharing their clamped sum."""
    v = values.astype(np.float64)
    kept = valid & (v >= t * scale)
    out = np.where(kept, v, 0.0)
    rest = valid & ~kept
    if rest.any():
        out[rest] = max(float(v[rest].sum()), 0.0) / int(rest.sum())
    return out


def one_way(
    values: np.ndarray, valid: np.ndarray, scale: float, ordered: bool, t: float = HAAR_T
) -> np.ndarray:
    """A column's fine-bin probabilities from its noisy one-way counts (module docstring);
    uniform over the valid bins when nothing survives."""
    valid = np.asarray(valid, dtype=bool)
    if ordered:
        out = haar(values, valid.astype(np.float64), scale, t)
    else:
        out = _pooled(np.asarray(values), valid, scale, t)
    if not out.sum() > 0:
        out = valid.astype(np.float64)
    return out / out.sum()


def _variance(scale: float) -> float:
    return discrete_laplace_variance(scale)


def consensus(
    singles: list[np.ndarray],
    valid: list[np.ndarray],
    coarse: tuple[int, ...],
    single_scale: float,
    measured: list[tuple[tuple[int, int], np.ndarray, np.ndarray, np.ndarray]],
    pair_scale: float,
    denoised: list[np.ndarray] | None = None,
) -> tuple[list[np.ndarray], float]:
    """``(marginals, n̂)``: each column's coarse marginal (probabilities) and the row count
    from the noisy one-way tables ``singles`` (fine bins, ``valid`` masks) and the measured
    pairs ``(pair, gi, gj, noisy table)`` (module docstring). With ``denoised`` (each column's
    fine probabilities from :func:`one_way`), a column's one-way estimate is those times n̂
    instead of its raw noisy counts, so that the noise of a wide range's empty bins does not
    become mass.

    >>> one = [np.array([52, 48]), np.array([70, 30])]
    >>> ok = [np.ones(2, bool)] * 2
    >>> pair = ((0, 1), np.array([0, 1]), np.array([0, 1]), np.array([[40, 10], [30, 20]]))
    >>> marg, n = consensus(one, ok, (1, 1), 1.0, [pair], 1.0)
    >>> [m.round(3).tolist() for m in marg], round(n, 1)
    ([[0.513, 0.487], [0.7, 0.3]], 100.0)
    """
    v1, v2 = _variance(single_scale), _variance(pair_scale)
    totals, weights = [], []
    for s, ok in zip(singles, valid, strict=True):
        totals.append(float(np.where(ok, s, 0).sum()))
        weights.append(1.0 / (v1 * max(int(ok.sum()), 1)))
    for _, _, _, table in measured:
        totals.append(float(table.sum()))
        weights.append(1.0 / (v2 * table.size))
    w = np.asarray(weights)
    n_hat = max(float((np.asarray(totals) * w).sum() / w.sum()), 1.0)
    marginals = []
    for j, (s, ok) in enumerate(zip(singles, valid, strict=True)):
        k = 2 ** coarse[j]
        raw = np.where(ok, s, 0).astype(np.float64) if denoised is None else denoised[j] * n_hat
        y0 = raw.reshape(k, -1).sum(axis=1)
        units = ok.reshape(k, -1).sum(axis=1)
        held = units > 0
        w0 = np.where(held, 1.0 / (v1 * np.maximum(units, 1)), 0.0)
        lipschitz = float(w0.max())
        observed = []
        for (a, b), gi, gj, table in measured:
            if j not in (a, b):
                continue
            g, y = (gi, table.sum(axis=1)) if j == a else (gj, table.sum(axis=0))
            wm = 1.0 / (v2 * (table.shape[1] if j == a else table.shape[0]))
            observed.append((g, y.astype(np.float64), wm))
            lipschitz += wm * float(np.bincount(g).max())
        x = np.maximum(y0, 0.0) * held
        step = 1.0 / lipschitz if lipschitz > 0 else 0.0
        for _ in range(_STEPS if observed else 0):
            grad = w0 * (x - y0)
            for g, y, wm in observed:
                grad += wm * (np.bincount(g, weights=x, minlength=y.size) - y)[g]
            new = np.maximum(x - step * grad, 0.0) * held
            moved = float(np.abs(new - x).sum())
            x = new
            if moved <= 1e-9 * max(float(x.sum()), 1.0):  # converged
                break
        if not x.sum() > 0:
            x = held.astype(np.float64)
        marginals.append(x / x.sum())
    return marginals, n_hat


def fine_given_coarse(fine: np.ndarray, valid: np.ndarray, coarse_bits: int) -> np.ndarray:
    """Rows: each coarse bin's distribution over its fine bins (from the fine probabilities;
    uniform over the bin's valid fine bins where it holds nothing).

    >>> fine_given_coarse(np.array([0.2, 0.2, 0.6, 0.0]), np.ones(4, bool), 1).tolist()
    [[0.5, 0.5], [1.0, 0.0]]
    """
    rows = fine.reshape(2**coarse_bits, -1)
    ok = np.asarray(valid, dtype=np.float64).reshape(rows.shape)
    sums = rows.sum(axis=1, keepdims=True)
    backs = ok / np.maximum(ok.sum(axis=1, keepdims=True), 1.0)
    return np.where(sums > 0, rows / np.where(sums > 0, sums, 1.0), backs)


def as_ordered(kind: Any) -> bool:
    """True for a column whose bins have an order (everything but categories and booleans)."""
    return kind not in ("categorical", "boolean")
