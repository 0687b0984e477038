"""The baselines a synthetic table is read against (issue 51): independent columns from DP
one-way histograms, and the sampling floor; log-scale bins.

* a value drawn for a bin falls back into that bin, for every kind (an integer of more than 16
  values included);
* independent columns lose a dependence and keep the one-way marginals; the floor keeps both;
* the noisy histograms are audited on neighbouring tables (ε̂ ≤ ε, and half the noise caught).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import sketchsyn.evaluate.tables as evaluate
from sketchsyn.evaluate.tables import (
    baseline_scores,
    codes,
    independent_sample,
    noisy_histograms,
)
from sketchsyn.privacy.rng import as_source

SCHEMA = {
    "columns": [
        {"name": "c", "kind": "categorical", "categories": ["a", "b", "c"], "policy": "other"},
        {"name": "day", "kind": "integer", "low": 1, "high": 31},
        {"name": "m", "kind": "integer", "low": 1, "high": 12},
        {"name": "x", "kind": "numeric", "low": -5.0, "high": 5.0},
        {"name": "b", "kind": "numeric", "low": 0.0, "high": 1e9, "scale": "log"},
        {"name": "t", "kind": "datetime", "low": "2020-01-01", "high": "2021-01-01"},
        {"name": "ip", "kind": "ipv4"},
        {"name": "ok", "kind": "boolean"},
    ]
}


def _table(n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    day = rng.integers(1, 32, n)
    return {
        "c": rng.choice(["a", "b", "c", "zz"], n),
        "day": day,
        "m": (day % 12) + 1,  # a function of the day: a dependence the baseline must lose
        "x": rng.normal(0, 1.5, n).clip(-5, 5),
        "b": 10 ** rng.uniform(0, 9, n),
        "t": np.datetime64("2020-01-01") + rng.integers(0, 365, n).astype("timedelta64[D]"),
        "ip": rng.integers(0, 2**32, n),
        "ok": rng.random(n) < 0.3,
    }


def test_every_drawn_value_falls_in_its_bin() -> None:
    _, sizes = codes(_table(10), SCHEMA)
    rng = np.random.default_rng(1)
    for col in SCHEMA["columns"]:
        k = sizes[col["name"]]
        code = np.repeat(np.arange(k), 200)
        values = evaluate._values(col, code, rng.random(code.size))
        back, _ = codes({col["name"]: values}, {"columns": [col]})
        assert (back[col["name"]] == code).all(), col["name"]


def test_log_scale_bins_are_even_in_log() -> None:
    got, _ = codes({"b": [0.0, 9.0, 99.0, 1e4, 1e9]}, {"columns": [SCHEMA["columns"][4]]})
    assert got["b"].tolist() == [0, 1, 3, 7, 15]


def test_independent_columns_keep_marginals_and_lose_dependence() -> None:
    real = _table(40_000)
    got = baseline_scores(real, SCHEMA, epsilon=20.0, rng=3)
    ind, floor = got["independent"], got["floor"]
    assert ind["tvd1"] < 0.02 and floor["tvd1"] < 0.02
    assert floor["tvd2"] < 0.03 < ind["tvd2"]
    fake = independent_sample(real, SCHEMA, 20.0, m=5000, rng=4)
    assert len(fake["day"]) == 5000 and set(fake["c"]) <= {"a", "b", "c", "other"}


TRIALS = 2000


def _loss(h: dict, c: dict, c2: dict, scale: float) -> float:
    return float(sum(((np.abs(h[k] - c[k]) - np.abs(h[k] - c2[k])) / scale).sum() for k in c))


def _audit(epsilon: float, draw=noisy_histograms) -> float:
    """ε̂ (Clopper–Pearson lower bound) of the event ``loss ≥ top/2`` on neighbouring tables,
    the loss computed for the claimed noise (scale ``d/ε``)."""
    sizes = {"a": 3, "b": 2}
    D = {"a": np.array([0, 1, 2] * 30), "b": np.array([0, 1] * 45)}
    D2 = {k: np.r_[v, [1]] for k, v in D.items()}
    c = {k: np.bincount(D[k], minlength=n) for k, n in sizes.items()}
    c2 = {k: np.bincount(D2[k], minlength=n) for k, n in sizes.items()}
    scale = len(sizes) / epsilon
    top = sum(np.abs(c[k] - c2[k]).sum() for k in c) / scale
    hits = []
    for data, seed in ((D, 0), (D2, 1)):
        src = as_source(seed)  # one stream for all trials, independent draws
        got = [draw(data, sizes, epsilon, src) for _ in range(TRIALS)]
        hits.append(sum(_loss(h, c, c2, scale) >= top / 2 for h in got))
    k, k2 = hits
    lo2 = stats.beta.ppf(1e-3, k2, TRIALS - k2 + 1)
    hi = stats.beta.ppf(1 - 1e-3, k + 1, TRIALS - k)
    return math.log(lo2 / hi)


def test_the_baseline_histograms_are_audited() -> None:
    assert _audit(1.0) <= 1.0

    def half_the_noise(got, sizes, epsilon, rng):
        return noisy_histograms(got, sizes, 2 * epsilon, rng)

    assert _audit(1.0, half_the_noise) > 1.0


@pytest.mark.parametrize("kind", ["numeric", "datetime"])
def test_bins_ignore_the_data_range(kind: str) -> None:
    col = SCHEMA["columns"][3 if kind == "numeric" else 5]
    _, sizes = codes(_table(50), {"columns": [col]})
    assert sizes[col["name"]] == evaluate.BINS
