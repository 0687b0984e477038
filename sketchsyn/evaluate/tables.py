"""Scores of a synthetic table against the real one, on a schema's public bins (numpy only).

A schema here is :class:`~sketchsyn.domains.Schema` or its dict form (``{"columns": [{"name",
"kind", ...}]}``): the metrics read only its public bounds and category lists, never the data's
range. A table is anything indexable by column name whose columns numpy can read (a pandas
DataFrame, a dict of arrays or lists).

Bins per column (:func:`codes`):

* ``categorical``: one bin per category, plus one for ``"other"`` (or the column's
  ``other_label``) when the policy is ``"other"``; a value outside the list falls in that bin
  (policy ``"other"``) or is refused (any other policy);
* ``integer``: one bin per value ``low … high`` when there are at most 16 values, otherwise
  16 equal bins over ``[low, high + 1)`` (month: 12 bins of one value; hour 0…23: 16 bins of
  1.5 hours);
* ``numeric``: 16 equal bins over ``[low, high]`` (``high`` in the last bin); with
  ``"scale": "log"``, 16 equal bins of ``log(1 + x − low)``;
* ``datetime``: 16 equal bins over ``[low, high]`` (ISO text, ``datetime64`` or pandas times);
* ``ipv4``: 16 equal bins over the address space (the /4 networks);
* ``boolean``: two bins.

Values outside the bounds of an integer, numeric or datetime column are clipped into the first
or last bin. To score a table as a fit read it, apply the schema's policies first
(:func:`apply_policies`: clip, other, and the rows a ``"drop"`` policy drops removed).

Scores:

* :func:`marginal_tvd`: the total variation distance ``½ Σ |p − q|`` of the k-way marginal
  histograms, for every set of k columns;
* :func:`w1`: the exact 1-D Wasserstein-1 distance of one numeric column, in the column's
  units (the area between the two empirical CDFs);
* :func:`table_scores`: both, per column and per pair; :func:`mean_scores` averages them.

Baselines a synthesizer must beat (:func:`baseline_scores`):

* **independent columns** (:func:`independent_sample`): every column drawn on its own from a
  DP histogram of its bins (integer Laplace noise of scale ``d/ε`` on each column's counts,
  clamped at zero: ``ε/d`` per column, ε-DP in all); its 2-way TVD is what a synthesizer
  scores with no correlation at all, and its 1-way TVD what ``ε/d`` per column buys;
* **the sampling floor**: ``n`` rows drawn with replacement from the data itself, the error of
  any sample of ``n`` independent rows from the true table.

>>> schema = {"columns": [
...     {"name": "c", "kind": "categorical", "categories": ["a", "b"], "policy": "other"},
...     {"name": "x", "kind": "numeric", "low": 0.0, "high": 16.0}]}
>>> real = {"c": ["a", "b", "a", "z"], "x": [0.5, 1.5, 2.5, 16.0]}
>>> fake = {"c": ["a", "b", "b", "other"], "x": [0.5, 0.5, 2.5, 15.5]}
>>> scores = table_scores(real, fake, schema)
>>> scores["tvd1"], scores["tvd2"], scores["w1"]
({'c': 0.25, 'x': 0.25}, {('c', 'x'): 0.5}, {'x': 0.375})
>>> mean_scores(scores)
{'tvd1': 0.25, 'tvd2': 0.5, 'w1': 0.375}
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "BINS",
    "apply_policies",
    "baseline_scores",
    "codes",
    "independent_sample",
    "marginal_tvd",
    "mean_scores",
    "noisy_histograms",
    "table_scores",
    "w1",
]

BINS = 16  # bins of a numeric or datetime column, and of an integer column of more than 16 values


def _equal_bins(x: np.ndarray, low: float, high: float, bins: int) -> np.ndarray:
    idx = np.floor((x - low) / (high - low) * bins)
    return np.clip(np.nan_to_num(idx, nan=0.0), 0, bins - 1).astype(np.int64)


def _columns(schema: Any) -> list[dict[str, Any]]:
    """The column entries of a schema or of its dict form."""
    return list((schema.to_dict() if hasattr(schema, "to_dict") else schema)["columns"])


def _micros(values: Any) -> np.ndarray:
    """Microseconds since 1970 of dates or times (ISO text, datetime64, pandas times)."""
    arr = np.asarray(values)
    if arr.dtype.kind != "M":
        arr = np.array([np.datetime64(str(v).replace("Z", ""), "us") for v in arr.tolist()])
    return arr.astype("datetime64[us]").astype(np.int64).astype(np.float64)


def _addresses(values: Any) -> np.ndarray:
    """IPv4 addresses (dotted text or integers) as float64 numbers."""
    arr = np.asarray(values)
    if arr.dtype.kind in "iuf":
        return arr.astype(np.float64)
    out = np.empty(arr.shape[0])
    for i, v in enumerate(arr.tolist()):
        if isinstance(v, (int, float)):
            out[i] = float(v)
            continue
        a, b, c, d = (int(o) for o in str(v).split("."))
        out[i] = float((a << 24) | (b << 16) | (c << 8) | d)
    return out


def apply_policies(table: Any, schema: Any, offset: int = 0) -> dict[str, np.ndarray]:
    """The table as a fit on ``schema`` reads it: each column's policy applied (``"clip"``
    clips, ``"other"`` names the other category) and the rows a ``"drop"`` policy drops (a
    missing value, an address that is not IPv4) removed; a value a ``"raise"`` policy refuses
    raises :class:`~sketchsyn.errors.InputError` naming its row (``offset`` + its index).
    Returns ``{name: numpy array}`` of the schema's types (:meth:`Schema.to_frame`, numpy).

    >>> s = {"columns": [{"name": "x", "kind": "integer", "low": 0, "high": 9, "policy": "clip"},
    ...                  {"name": "c", "kind": "categorical", "categories": ["a"],
    ...                   "policy": "drop"}]}
    >>> got = apply_policies({"x": [3, 12, 5], "c": ["a", "a", None]}, s)
    >>> got["x"].tolist(), got["c"].tolist()
    ([3, 9], ['a', 'a'])
    """
    from ..domains.schema import Schema

    schema = schema if isinstance(schema, Schema) else Schema.from_dict(schema)
    return schema.to_frame(schema.units(table, offset=offset), "numpy")


def codes(frame: Any, schema: Any) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Each column's bin indices and bin count: ``({name: int64 array}, {name: bins})``.

    >>> s = {"columns": [{"name": "h", "kind": "integer", "low": 0, "high": 23},
    ...                  {"name": "m", "kind": "integer", "low": 1, "high": 12}]}
    >>> got, sizes = codes({"h": [0, 1, 2, 23], "m": [1, 2, 12, 12]}, s)
    >>> got["h"].tolist(), got["m"].tolist(), sizes
    ([0, 0, 1, 15], [0, 1, 11, 11], {'h': 16, 'm': 12})
    """
    out: dict[str, np.ndarray] = {}
    sizes: dict[str, int] = {}
    for col in _columns(schema):
        name, kind = col["name"], col["kind"]
        values = frame[name]
        if kind == "categorical":
            cats = [str(c) for c in col["categories"]]
            other = col.get("policy") == "other"
            labels = cats + ([col.get("other_label", "other")] if other else [])
            index = {c: i for i, c in enumerate(labels)}
            text = np.asarray(values, dtype=object).astype(str)
            uniq, inverse = np.unique(text, return_inverse=True)
            missing = [u for u in uniq if u not in index]
            if missing and not other:
                raise ValueError(f"column {name!r}: values {missing[:5]} are not categories")
            lut = np.array([index.get(u, len(cats)) for u in uniq], dtype=np.int64)
            out[name], sizes[name] = lut[inverse.ravel()], len(labels)
        elif kind == "integer":
            low, high = int(col["low"]), int(col["high"])
            x = np.asarray(values, dtype=np.float64)
            if high - low + 1 <= BINS:
                out[name] = np.clip(np.rint(x) - low, 0, high - low).astype(np.int64)
                sizes[name] = high - low + 1
            else:
                out[name], sizes[name] = _equal_bins(x, low, high + 1.0, BINS), BINS
        elif kind == "numeric":
            x = np.asarray(values, dtype=np.float64)
            low, high = float(col["low"]), float(col["high"])
            if col.get("scale", "linear") == "log":  # equal bins in log(1 + x − low)
                x, low, high = np.log1p(np.maximum(x - low, 0.0)), 0.0, np.log1p(high - low)
            out[name] = _equal_bins(x, low, high, BINS)
            sizes[name] = BINS
        elif kind == "datetime":
            low, high = _micros([col["low"], col["high"]])
            out[name], sizes[name] = _equal_bins(_micros(values), low, high, BINS), BINS
        elif kind == "ipv4":
            out[name], sizes[name] = _equal_bins(_addresses(values), 0.0, 2.0**32, BINS), BINS
        elif kind == "boolean":
            out[name], sizes[name] = np.asarray(values, dtype=bool).astype(np.int64), 2
        else:
            raise ValueError(f"column {name!r}: kind {kind!r} has no bins here")
    return out, sizes


def _histogram(cols: Sequence[np.ndarray], sizes: Sequence[int]) -> np.ndarray:
    flat = np.zeros(cols[0].shape[0], dtype=np.int64)
    for c, k in zip(cols, sizes, strict=True):
        flat = flat * k + c
    hist = np.bincount(flat, minlength=int(np.prod(sizes))).astype(np.float64)
    return hist / max(hist.sum(), 1.0)


def marginal_tvd(
    real: Mapping[str, np.ndarray],
    fake: Mapping[str, np.ndarray],
    sizes: Mapping[str, int],
    k: int,
) -> dict[tuple[str, ...], float]:
    """TVD of every k-way marginal: ``{(names...): ½ Σ |p − q|}`` (k = 1 keys are 1-tuples).

    >>> real = {"a": np.array([0, 0, 1, 1]), "b": np.array([0, 1, 0, 1])}
    >>> fake = {"a": np.array([0, 0, 1, 1]), "b": np.array([0, 0, 1, 1])}
    >>> marginal_tvd(real, fake, {"a": 2, "b": 2}, 1), marginal_tvd(real, fake, {"a": 2, "b": 2}, 2)
    ({('a',): 0.0, ('b',): 0.0}, {('a', 'b'): 0.5})
    """
    out = {}
    for names in itertools.combinations(list(sizes), k):
        ks = [sizes[n] for n in names]
        p = _histogram([real[n] for n in names], ks)
        q = _histogram([fake[n] for n in names], ks)
        out[names] = float(0.5 * np.abs(p - q).sum())
    return out


def w1(x: Any, y: Any) -> float:
    """Exact Wasserstein-1 distance of two 1-D samples: ``∫ |F_x − F_y|`` over the line.

    >>> w1([0.0, 1.0], [0.5, 1.5]), round(w1([0.0, 0.0, 3.0], [1.0]), 12)
    (0.5, 1.333333333333)
    """
    a = np.sort(np.asarray(x, dtype=np.float64))
    b = np.sort(np.asarray(y, dtype=np.float64))
    grid = np.concatenate([a, b])
    grid.sort(kind="mergesort")
    fa = np.searchsorted(a, grid[:-1], side="right") / a.size
    fb = np.searchsorted(b, grid[:-1], side="right") / b.size
    return float(np.sum(np.abs(fa - fb) * np.diff(grid)))


def table_scores(real: Any, fake: Any, schema: Any, real_codes: Any = None) -> dict[str, Any]:
    """1-way TVD per column, 2-way TVD per pair, W1 per numeric column (column units).

    ``real_codes`` may pass ``codes(real, schema)`` computed once for many fakes. Returns
    ``{"tvd1": {name: tvd}, "tvd2": {(a, b): tvd}, "w1": {name: w1}}``.
    """
    rc, sizes = real_codes if real_codes is not None else codes(real, schema)
    fc, _ = codes(fake, schema)
    tvd1 = {n[0]: v for n, v in marginal_tvd(rc, fc, sizes, 1).items()}
    tvd2 = marginal_tvd(rc, fc, sizes, 2)
    dist = {
        c["name"]: w1(real[c["name"]], fake[c["name"]])
        for c in _columns(schema)
        if c["kind"] == "numeric"
    }
    return {"tvd1": tvd1, "tvd2": tvd2, "w1": dist}


def mean_scores(scores: Mapping[str, Mapping[Any, float]]) -> dict[str, float]:
    """The mean of each score of :func:`table_scores` over its columns or pairs (NaN when there
    is none, e.g. no pair in a one-column table)."""
    return {k: float(np.mean(list(v.values()))) if v else float("nan") for k, v in scores.items()}


def _values(col: dict[str, Any], code: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Values of a column's bins ``code`` (the inverse of :func:`codes`): a category, an
    integer, or a number uniform inside its bin (``u`` uniform in [0, 1))."""
    kind = col["kind"]
    if kind == "categorical":
        labels = [str(c) for c in col["categories"]]
        if col.get("policy") == "other":
            labels.append(col.get("other_label", "other"))
        return np.asarray(labels, dtype=object)[code]
    if kind == "boolean":
        return code.astype(bool)
    if kind == "integer":
        low, high = int(col["low"]), int(col["high"])
        if high - low + 1 <= BINS:
            return low + code
        width = (high + 1.0 - low) / BINS
        first = np.ceil(low + code * width)  # the integers whose bin is ``code``
        last = np.minimum(np.ceil(low + (code + 1) * width) - 1, high)
        return (first + np.floor(u * (last - first + 1))).astype(np.int64)
    if kind == "numeric":
        low, high = float(col["low"]), float(col["high"])
        if col.get("scale", "linear") == "log":
            t = (code + u) / BINS * np.log1p(high - low)
            return np.minimum(low + np.expm1(t), high)
        return np.minimum(low + (code + u) * (high - low) / BINS, high)
    if kind == "datetime":
        low, high = _micros([col["low"], col["high"]])
        micros = np.minimum(low + (code + u) * (high - low) / BINS, high)
        return micros.astype(np.int64).astype("datetime64[us]")
    if kind == "ipv4":
        return np.minimum((code + u) * 2.0**32 / BINS, 2.0**32 - 1).astype(np.int64)
    raise ValueError(f"column {col['name']!r}: kind {kind!r} has no bins here")


def noisy_histograms(
    got: Mapping[str, np.ndarray], sizes: Mapping[str, int], epsilon: float, rng: Any = None
) -> dict[str, np.ndarray]:
    """Each column's histogram of bins ``got`` plus integer Laplace noise of scale ``d/ε`` per
    bin (one row is in one bin of each of the ``d`` histograms: ε-DP together).

    >>> h = noisy_histograms({"a": np.array([0, 1, 1])}, {"a": 2}, epsilon=1e6, rng=0)
    >>> h["a"].tolist()
    [1, 2]
    """
    from ..privacy.noise import discrete_laplace
    from ..privacy.rng import as_source

    src = as_source(rng)
    scale = len(sizes) / float(epsilon)
    return {
        name: np.bincount(got[name], minlength=k) + discrete_laplace(scale, k, rng=src)
        for name, k in sizes.items()
    }


def independent_sample(
    real: Any, schema: Any, epsilon: float, m: int | None = None, rng: Any = None
) -> dict[str, np.ndarray]:
    """``m`` rows (default: as many as ``real``) of **independent columns**, each drawn from a
    DP histogram of its bins: ``ε/d`` per column (integer Laplace noise of scale ``d/ε`` on the
    column's counts, add or remove one row), clamped at zero; values uniform inside a bin.

    The release is ε-DP (sequential composition over the ``d`` histograms); everything after
    the noise is post-processing. ``rng``: ``None`` for the OS CSPRNG, a seed for tests.

    >>> schema = {"columns": [{"name": "c", "kind": "categorical", "categories": ["a", "b"]},
    ...                       {"name": "x", "kind": "numeric", "low": 0.0, "high": 1.0}]}
    >>> real = {"c": ["a"] * 900 + ["b"] * 100, "x": [0.1] * 500 + [0.9] * 500}
    >>> fake = independent_sample(real, schema, epsilon=10.0, rng=0)
    >>> sorted(fake), len(fake["c"]), bool(0.85 < np.mean(fake["c"] == "a") < 0.95)
    (['c', 'x'], 1000, True)
    """
    from ..privacy.rng import as_source

    cols = _columns(schema)
    got, sizes = codes(real, schema)
    n = len(next(iter(got.values()))) if got else 0
    m = n if m is None else int(m)
    src = as_source(rng)
    noisy = noisy_histograms(got, sizes, epsilon, src)
    out: dict[str, np.ndarray] = {}
    for col in cols:
        name, k = col["name"], sizes[col["name"]]
        counts = np.maximum(noisy[name], 0).astype(np.float64)
        p = counts / counts.sum() if counts.sum() > 0 else np.full(k, 1.0 / k)
        cum = np.cumsum(p)
        code = np.minimum(np.searchsorted(cum, src.random(m) * cum[-1], side="right"), k - 1)
        out[name] = _values(col, code.astype(np.int64), src.random(m))
    return out


def baseline_scores(
    real: Any, schema: Any, epsilon: float, rng: Any = None, real_codes: Any = None
) -> dict[str, dict[str, float]]:
    """Mean scores (:func:`mean_scores`) of the two baselines a synthetic table should be read
    against: ``"independent"`` (:func:`independent_sample` at ``epsilon``) and ``"floor"``
    (as many rows as ``real`` drawn with replacement from it: the sampling error alone).

    >>> schema = {"columns": [{"name": "a", "kind": "boolean"}, {"name": "b", "kind": "boolean"}]}
    >>> real = {"a": [True, False] * 500, "b": [True, False] * 500}  # b equals a
    >>> got = baseline_scores(real, schema, epsilon=10.0, rng=0)
    >>> round(got["independent"]["tvd2"], 1), got["floor"]["tvd2"] < 0.1
    (0.5, True)
    """
    from ..privacy.rng import as_source

    src = as_source(rng)
    rc = real_codes if real_codes is not None else codes(real, schema)
    n = len(next(iter(rc[0].values())))
    take = src.integers(n, n) if n else np.zeros(0, dtype=np.int64)
    floor = {name: np.asarray(real[name])[take] for name in rc[0]}
    return {
        "independent": mean_scores(
            table_scores(real, independent_sample(real, schema, epsilon, rng=src), schema, rc)
        ),
        "floor": mean_scores(table_scores(real, floor, schema, rc)),
    }
