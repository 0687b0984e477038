"""smartnoise-synth's MST and AIM on a table of a public schema, for ``bench_tables.py``.

Each column gets the transformer smartnoise documents for its "cube" synthesizers, built from
the schema's public values only (never fitted on the data, so no budget is spent on
preprocessing and the peers know the same domain as sketchsyn):

* numeric: ``BinTransformer(bins=16, lower=low, upper=high)`` (the grid the TVD is scored on);
* datetime: the same on the time in seconds since 1970, converted back after sampling;
* integer and categorical: ``LabelTransformer(nullable=False)`` over every public value
  (``low … high``; the categories plus ``"other"`` under policy ``"other"``).

A sampled numeric or datetime value (smartnoise returns its bin's midpoint) is redrawn uniformly
in its bin. Both peers draw their selection randomness from numpy's global state (seeded per
run) and their Gaussian noise from OpenDP (OS randomness: not seedable).

>>> s = {"columns": [{"name": "o", "kind": "categorical", "categories": ["a", "b", "c"]},
...                  {"name": "m", "kind": "integer", "low": 1, "high": 2},
...                  {"name": "x", "kind": "numeric", "low": 0.0, "high": 5.0}]}
>>> public_frame(s).to_dict("list")
{'o': ['a', 'b', 'c'], 'm': [1, 2, 1], 'x': [0.0, 0.0, 0.0]}
"""

from __future__ import annotations

import contextlib
import io
import pickle
import warnings

import numpy as np

__all__ = ["fit_peer", "pickled_bytes", "policy_frame", "public_frame"]

DELTA = 1e-9
_BINNED = ("numeric", "datetime")


def _labels(col: dict) -> list:
    """The public values of a labelled column (categories plus "other"; integers)."""
    if col["kind"] == "categorical":
        extra = [col.get("other_label", "other")] if col.get("policy") == "other" else []
        return list(col["categories"]) + extra
    if col["kind"] == "integer":
        return list(range(int(col["low"]), int(col["high"]) + 1))
    if col["kind"] == "boolean":
        return [False, True]
    raise ValueError(f"column {col['name']!r}: kind {col['kind']!r} not handled for the peers")


def _seconds(values) -> np.ndarray:
    """Seconds since 1970 of datetimes (datetime64 or ISO text)."""
    arr = np.asarray(values)
    if arr.dtype.kind != "M":
        arr = np.array([np.datetime64(str(v).replace("Z", ""), "us") for v in arr.tolist()])
    return arr.astype("datetime64[us]").astype(np.int64) / 1e6


def _bounds(col: dict) -> tuple[float, float]:
    if col["kind"] == "datetime":
        lo, hi = _seconds([col["low"], col["high"]])
        return float(lo), float(hi)
    return float(col["low"]), float(col["high"])


def public_frame(schema: dict):
    """A frame of public values only: every label of each column, cycled to a common length
    (numeric and datetime columns: their lower bound, as seconds for a datetime)."""
    import pandas as pd

    cols = schema["columns"]
    size = max([len(_labels(c)) for c in cols if c["kind"] not in _BINNED] or [1])
    data = {}
    for c in cols:
        if c["kind"] in _BINNED:
            data[c["name"]] = [_bounds(c)[0]] * size
        else:
            labels = _labels(c)
            data[c["name"]] = [labels[i % len(labels)] for i in range(size)]
    return pd.DataFrame(data)


def policy_frame(frame, schema: dict):
    """``frame`` with each policy-"other" categorical's values outside its list set to "other"
    and datetimes as seconds since 1970 (what the peers read).

    >>> import pandas as pd
    >>> s = {"columns": [{"name": "d", "kind": "categorical", "categories": ["a"],
    ...                   "policy": "other"}]}
    >>> policy_frame(pd.DataFrame({"d": ["a", "SJU"]}), s)["d"].tolist()
    ['a', 'other']
    """
    out = frame.copy()
    for c in schema["columns"]:
        if c["kind"] == "categorical" and c.get("policy") == "other":
            inside = out[c["name"]].isin(c["categories"])
            out[c["name"]] = out[c["name"]].where(inside, c.get("other_label", "other"))
        elif c["kind"] == "datetime":
            out[c["name"]] = _seconds(out[c["name"]].to_numpy())
    return out


def pickled_bytes(obj) -> int:
    """Bytes of ``obj``'s attributes pickled one by one, those that do not pickle left out (MST's
    decompress closure; what it holds, the kept values per column, is tiny)."""
    total = 0
    for value in vars(obj).values():
        try:
            total += len(pickle.dumps(value))
        except Exception:  # noqa: BLE001 (a closure or a module: not state)
            continue
    return total


def fit_peer(method: str, frame, schema: dict, eps: float, seed: int, bins: int, rounds=None):
    """Fit MST or AIM on ``frame``; returns ``(sample, state_bytes)`` with ``sample(m, seed)``
    a frame of the schema's columns (datetimes back as ``datetime64[us]``)."""
    from snsynth import Synthesizer
    from snsynth.transform import BinTransformer, LabelTransformer, TableTransformer

    warnings.filterwarnings("ignore")
    cols = schema["columns"]
    parts = [
        BinTransformer(bins=bins, lower=_bounds(c)[0], upper=_bounds(c)[1])
        if c["kind"] in _BINNED
        else LabelTransformer(nullable=False)
        for c in cols
    ]
    tt = TableTransformer(parts)
    tt.fit(public_frame(schema))  # public values only: no data read, no budget spent
    np.random.seed(seed)  # noqa: NPY002 (the peers draw their choices from numpy's global state)
    if method == "mst":
        syn = Synthesizer.create("mst", epsilon=eps, delta=DELTA)
    elif method == "aim":
        cards = sorted(c for t in parts for c in t.cardinality)
        syn = Synthesizer.create(
            "aim", epsilon=eps, delta=DELTA, max_cells=cards[-1] * cards[-2], rounds=rounds
        )
    else:
        raise ValueError(method)
    with contextlib.redirect_stdout(io.StringIO()):  # AIM prints its progress
        syn.fit(policy_frame(frame, schema), transformer=tt, preprocessor_eps=0.0)
    state = pickled_bytes(syn)

    def sample(m: int, s: int):
        np.random.seed(s)  # noqa: NPY002
        out = syn.sample(m)
        u = np.random.default_rng(s)
        for c in cols:
            if c["kind"] in _BINNED:
                lo, hi = _bounds(c)
                width = (hi - lo) / bins
                b = np.clip(np.floor((out[c["name"]].to_numpy(float) - lo) / width), 0, None)
                b = np.minimum(b, bins - 1)
                values = lo + (b + u.random(m)) * width
                if c["kind"] == "datetime":
                    values = (values * 1e6).astype(np.int64).astype("datetime64[us]")
                out[c["name"]] = values
        return out

    return sample, state
