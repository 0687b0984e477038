"""Continual counters: exact p-sum layout, unbiasedness and variance, exact skip, sparse vs binary,
inhomogeneous budgets, bytes, bad values."""

from __future__ import annotations

import math
import pickle
from fractions import Fraction
from functools import lru_cache

import numpy as np
import pytest
from scipy import stats

from sketchsyn.counters import (
    BinaryMechanism,
    CounterBank,
    InhomogeneousSparseCounter,
    SparseCounter,
    SqrtFactorizationCounter,
    online_budgets,
    sparse,
    sparsebank,
    sqrt_coefficients,
)
from sketchsyn.counters import base as counters
from sketchsyn.counters.karytree import KaryTreeCounter
from sketchsyn.counters.sparsebank import InhomogeneousSparseBank
from sketchsyn.errors import IncompatibleError, InputError, ParameterError, SerializationError
from sketchsyn.io.serial import header_of, pack, unpack
from sketchsyn.privacy.rng import as_source


class Tape:
    """Replaces the noise sampler: draw i (over the whole test) is ``scale_tag + i``."""

    def __init__(self, step: int = 1000) -> None:
        self.i = 0
        self.step = step

    def __call__(self, kind, param, n, src):
        out = self.step * np.arange(self.i + 1, self.i + 1 + n, dtype=np.int64)
        self.i += n
        return out


# ------------------------------------------------------------------ exact layout
def _hand_layout(xs: list[int]) -> list[int]:
    """Horizon 7 (3 levels), noise draw i = 1000·i in time order (construction: levels 0, 1, 2
    open blocks (0,1], (0,2], (0,4]; step 2 opens (2,3]; step 4 opens (4,5], (4,6]; step 6
    opens (6,7])."""
    n = [None] + [1000 * i for i in range(1, 8)]
    s = np.cumsum(xs).tolist()
    x = [None, *xs]
    return [
        n[1] + x[1],
        n[2] + s[1],
        n[2] + s[1] + n[4] + x[3],
        n[3] + s[3],
        n[3] + s[3] + n[5] + x[5],
        n[3] + s[3] + n[6] + x[5] + x[6],
        n[3] + s[3] + n[6] + x[5] + x[6] + n[7] + x[7],
    ]


@pytest.mark.parametrize("split", [[7], [1] * 7, [3, 4], [2, 2, 3], [5, 2]])
def test_binary_mechanism_matches_hand_layout(monkeypatch, split):
    monkeypatch.setattr(counters, "_draw", Tape())
    xs = [1, 0, 1, 1, 0, 0, 1]
    c = BinaryMechanism(epsilon=1.0, horizon=7, rng=0)
    out, pos = [], 0
    for size in split:
        out += c.update_many(xs[pos : pos + size]).tolist()
        pos += size
    assert out == _hand_layout(xs)
    assert c.query() == out[-1]


def test_binary_mechanism_skip_matches_hand_layout(monkeypatch):
    monkeypatch.setattr(counters, "_draw", Tape())
    c = BinaryMechanism(epsilon=1.0, horizon=7, rng=0)
    c.update_many([1])
    c.skip(2)  # steps 2, 3: closes (0,2] (opened at construction) and (2,3] (fresh: draw 4)
    assert c.query() == 2000 + 1 + 4000
    c.update_many([5])  # step 4 closes (0,4]: construction noise 3000
    assert c.query() == 3000 + 6


def test_skip_cost_does_not_grow_with_s():
    c = BinaryMechanism(epsilon=1.0, horizon=2**61, rng=1)
    c.skip(2**60)
    assert c.t == 2**60
    u = BinaryMechanism(rho=1.0, rng=1)
    u.skip(2**50 + 12345)
    assert u.t == 2**50 + 12345
    s = SparseCounter(1.0, 2**61, rng=1)
    s.skip(2**60)
    assert s.t == 2**60


# ------------------------------------------------------------------ unbiased, variance = formula
def _errors(make, xs, runs):
    truth = np.cumsum(xs)
    return np.array([make(i).update_many(xs) - truth for i in range(runs)])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"epsilon": 1.0, "horizon": 40},
        {"rho": 0.5, "horizon": 40},
        {"epsilon": 2.0},
        {"rho": 2.0, "sensitivity": 2},
    ],
    ids=["finite-laplace", "finite-gaussian", "unbounded-laplace", "unbounded-gaussian"],
)
def test_bank_of_10k_releases_is_unbiased_with_formula_variance(kwargs):
    runs = 10_000  # counters of one bank: independent replicates of the same engine
    xs = np.random.default_rng(0).integers(0, 3, size=40)
    bank = CounterBank(runs, rng=1, **kwargs)
    err = bank.update_many(np.repeat(xs[:, None], runs, axis=1)) - np.cumsum(xs)[:, None]
    var = np.array([bank.variance(t) for t in range(1, 41)])
    assert np.all(np.abs(err.mean(axis=1)) < 4.5 * np.sqrt(var / runs))
    rel = err.var(axis=1) / var - 1
    assert np.all(np.abs(rel) < 4.5 * math.sqrt(5 / runs)), rel


def test_bank_of_one_is_the_scalar_mechanism():
    xs = np.random.default_rng(4).integers(0, 4, size=100)
    for kwargs in ({"epsilon": 1.0, "horizon": 300}, {"rho": 1.0}):
        c, bank = BinaryMechanism(rng=9, **kwargs), CounterBank(1, rng=9, **kwargs)
        assert np.array_equal(c.update_many(xs), bank.update_many(xs[:, None])[:, 0])
        c.skip(50)
        bank.skip(50)
        assert c.query() == int(bank.query()[0])


def test_bank_bytes_and_shapes():
    bank = CounterBank(7, rho=1.0, rng=2)
    bank.update_many(np.ones((20, 7), dtype=np.int64))
    back = CounterBank.from_bytes(bank.to_bytes())
    assert np.array_equal(back.query(), bank.query()) and back.size == 7 and back.t == 20
    assert bank.nbytes == 7 * (16 * 64 + 24) + 40
    assert CounterBank(5, 1.0, 1000, rng=0).nbytes == 5 * (16 * 10 + 8) + 40
    with pytest.raises(InputError):
        bank.update(np.ones(6, dtype=np.int64))
    with pytest.raises(InputError):
        bank.update_many(np.ones((3, 7)) * -1)
    with pytest.raises(SerializationError):
        BinaryMechanism.from_bytes(bank.to_bytes())
    assert bank.t == 20


@pytest.mark.parametrize("split", [[63], [10, 30, 23], [1] * 63, [32, 31]])
def test_honaker_estimates_are_exact_without_noise(monkeypatch, split):
    monkeypatch.setattr(counters, "_draw", lambda kind, param, n, src: np.zeros(n, np.int64))
    xs = np.arange(1, 64) % 3
    c = BinaryMechanism(epsilon=1.0, horizon=64, estimator="honaker", rng=0)
    out, pos = [], 0
    for size in split:
        out += c.update_many(xs[pos : pos + size]).tolist()
        pos += size
    assert np.allclose(out, np.cumsum(xs), rtol=0, atol=1e-9)


@pytest.mark.parametrize("kwargs", [{"epsilon": 1.0}, {"rho": 0.5}], ids=["laplace", "gaussian"])
def test_honaker_bank_is_unbiased_with_formula_variance(kwargs):
    runs = 10_000
    xs = np.random.default_rng(0).integers(0, 3, size=63)
    bank = CounterBank(runs, horizon=64, estimator="honaker", rng=3, **kwargs)
    steps = np.repeat(xs[:, None], runs, axis=1)
    out = np.vstack([bank.update_many(steps[:20]), bank.update_many(steps[20:])])
    err = out - np.cumsum(xs)[:, None]
    var = np.array([bank.variance(t) for t in range(1, 64)])
    assert np.all(np.abs(err.mean(axis=1)) < 4.5 * np.sqrt(var / runs))
    rel = err.var(axis=1) / var - 1
    assert np.all(np.abs(rel) < 4.5 * math.sqrt(5 / runs)), rel
    tree = BinaryMechanism(horizon=64, rng=0, **kwargs)
    assert var[62] < 0.75 * tree.variance(63)  # same noise, lower variance


def test_honaker_max_variance_at_two_to_the_twenty():
    # The reference figures (units 1/ε²): about 9 500 against 17 640 for the tree.
    t = 2**20
    honaker = BinaryMechanism(epsilon=1.0, horizon=t, estimator="honaker", rng=0)
    tree = BinaryMechanism(epsilon=1.0, horizon=t, rng=0)
    worst = honaker.variance(t - 1)
    assert 9400 < worst < 9600 and 17600 < tree.variance(t - 1) < 17700
    assert tree.variance(t - 1) / worst > 1.7


def test_variance_formula_against_known_values():
    # Finite, horizon 2**20 - 1: 20 levels, p-sum noise Lap_Z(20/ε); t = 2**20 - 1 has 20 bits.
    c = BinaryMechanism(epsilon=1.0, horizon=2**20 - 1, rng=0)
    p = math.exp(-1 / 20)
    assert c.variance(2**20 - 1) == pytest.approx(20 * 2 * p / (1 - p) ** 2)
    assert c.variance(2**19) == pytest.approx(2 * p / (1 - p) ** 2)
    # Gaussian: σ² = L·Δ²/(2ρ) per p-sum (nearly exact for large σ²).
    g = BinaryMechanism(rho=0.5, horizon=1023, rng=0)
    assert g.variance(1023) == pytest.approx(10 * 10, rel=1e-9)


# ------------------------------------------------------------------ skip has the law of stepping
# The check: skip(s) and s calls of update(0) give the same law of every released value
# (a chi-square over >= 10^4 seeded runs per side, for each counter kind). Each test sets up a
# state in which the skipped span changes something with a large probability (p-sums close, a
# threshold trips, a time level ends) and checks that it does, so that a wrong skip is seen.
RUNS = 10_000  # seeded runs per side
P_MIN = 1e-4  # per statistic (fixed seeds: a pass is reproducible; a real flake is rare)


def _chi2_same(a, b, max_bins=20):
    """Two-sample chi-square (homogeneity) p-value of two integer samples. The pooled values,
    in order, are cut into at most ``max_bins`` bins of consecutive values, sparse ones pooled
    so that every expected count (of either sample) is at least 5."""
    a, b = np.asarray(a).ravel(), np.asarray(b).ravel()
    pooled = np.concatenate([a, b])
    values, counts = np.unique(pooled, return_counts=True)
    need = max(pooled.size / max_bins, 5 * pooled.size / min(a.size, b.size))
    cuts, acc = [], 0
    for v, c in zip(values.tolist(), counts.tolist(), strict=True):
        acc += c
        if acc >= need:
            cuts.append(v)
            acc = 0
    # Bins (cuts[i-1], cuts[i]]; the values after the last cut join the last bin.
    assert len(cuts) >= 2, "a constant statistic: this comparison could not fail"
    edges = np.array(cuts)
    table = np.vstack(
        [
            np.bincount(np.minimum(np.searchsorted(edges, x), edges.size - 1), minlength=edges.size)
            for x in (a, b)
        ]
    )
    assert (table.sum(axis=0) * min(a.size, b.size) / pooled.size >= 5).all()
    return stats.chi2_contingency(table, correction=False)[1]


def _same_law(skip: dict, step: dict) -> dict:
    """Every statistic of ``skip`` has the law of the same statistic of ``step``."""
    assert skip.keys() <= step.keys()
    pvalues = {k: _chi2_same(skip[k], step[k]) for k in skip}
    assert min(pvalues.values()) > P_MIN, pvalues
    return pvalues


def _first_change(before, span):
    """1-based index of the first release of ``span`` (runs × s) that differs from ``before``,
    0 if none: the step of the span's first segment closing."""
    moved = span != np.asarray(before)[:, None]
    return np.where(moved.any(axis=1), moved.argmax(axis=1) + 1, 0)


@pytest.mark.parametrize(
    ("kwargs", "ones", "s"),
    [
        ({"epsilon": 1.0, "horizon": 64}, 5, 37),
        ({"epsilon": 1.0}, 35, 20),
        ({"rho": 1.0}, 1, 15),
    ],
    ids=["finite", "unbounded", "unbounded-gaussian"],
)
def test_bank_skip_has_the_law_of_stepping_over_10k_runs(kwargs, ones, s):
    """A CounterBank of 10^4 counters (independent replicates, one vectorised call per side):
    ``ones`` steps of 1, then skip(s) against s steps of 0, then 8 steps of 1. Finite, t = 5 to
    42: the tree closes (0, 32] (opened with the data of steps 1-5) and opens fresh blocks.
    Unbounded (segments [2^k, 2^(k+1)), each its own tree), t = 35 to 55 inside [32, 63]: the
    segment's tree closes its block of steps 32-47 (opened with the data of 32-35). Gaussian,
    t = 1 to 16: the skip ends segment [2, 3], passes [4, 7] and [8, 15] whole (their totals'
    noise only) and stops at 16, where the segments' totals carry 4/9 of the release's
    variance. Compared: the release after the skip, the next 8 releases and their increments
    (which see which p-sums two releases share); and the release after the skip is unbiased
    with the variance of the formula, within its sampling error."""
    t0 = ones + s
    more = np.ones((8, RUNS), dtype=np.int64)
    sides = {}
    for method, seed in (("skip", 1), ("step", 2)):
        bank = CounterBank(RUNS, rng=seed, **kwargs)
        bank.update_many(np.ones((ones, RUNS), dtype=np.int64))
        if method == "skip":
            bank.skip(s)
        else:
            bank.update_many(np.zeros((s, RUNS), dtype=np.int64))
        assert bank.t == t0
        rel = np.vstack([bank.query(), bank.update_many(more)])
        sides[method] = {
            **{f"t={t0 + k}": rel[k] for k in range(9)},
            **{f"t={t0 + k + 1} - t={t0 + k}": rel[k + 1] - rel[k] for k in range(8)},
        }
    _same_law(sides["skip"], sides["step"])
    var = CounterBank(1, rng=0, **kwargs).variance(t0)
    for method, side in sides.items():
        err = side[f"t={t0}"] - ones
        assert abs(err.mean()) < 4.5 * math.sqrt(var / RUNS), method
        rel_se = math.sqrt(((err.astype(float) ** 4).mean() / var**2 - 1) / RUNS)
        assert abs(err.var() / var - 1) < 4.5 * rel_se, (method, err.var(), var, rel_se)


# Seeded scalar SparseCounter runs per side: 5,000 still reject, at p < 1e-18 each, a skip's
# trips one step late or one step early and the skipped checks' noise halved (checked).
SPARSE_RUNS = 2_500


def test_sparse_skip_has_the_law_of_stepping():
    """SparseCounter(4, 60): T0 = 9, checks and thresholds Lap_Z(1/2). A step of 9 puts the
    segment count at the threshold, so each idle check trips with p ≈ 0.12 and the first trip
    falls anywhere in the 20 skipped steps (a geometric off by one step is far outside the
    margin). ``SPARSE_RUNS`` runs of update(9), skip(20, releases=True) (the same draws as
    skip(20), the values recorded), update(1), against as many runs stepping the same stream in
    one batch. Compared: every released value, the step of the span's first closing, the
    segments."""
    s = 20
    sides = {}
    for method in ("skip", "step"):
        rows = []
        for i in range(SPARSE_RUNS):
            c = SparseCounter(4.0, 60, rng=2 * i + (method == "step"))
            if method == "skip":
                first = c.update(9)
                span = c.skip(s, releases=True)
                assert c.t == s + 1 and span[-1] == c.query()
                rows.append([first, *span.tolist(), c.update(1), c.segments])
            else:
                out = c.update_many(np.r_[9, np.zeros(s, dtype=np.int64), 1])
                rows.append([*out.tolist(), c.segments])
        r = np.array(rows)
        sides[method] = {
            **{f"t={t}": r[:, t - 1] for t in range(1, s + 3)},
            "first closing in the span": _first_change(r[:, 0], r[:, 1 : s + 1]),
            "segments": r[:, s + 2],
        }
    _same_law(sides["skip"], sides["step"])
    first = sides["skip"]["first closing in the span"]
    assert 0.5 < (first > 0).mean() < 0.99  # the threshold does trip inside the skip, often,
    assert np.unique(first).size == s + 1  # at every step of it


def _trip_pmf(x: float, a: int, s: int) -> np.ndarray:
    """P(first trip = g) for g = 1..s and P(no trip) at index 0."""
    q = math.exp(-x)
    p = q ** (a + 1) / (1 + q) if a >= 0 else 1 - q ** (-a) / (1 + q)
    pmf = np.array([(1 - p) ** s] + [(1 - p) ** (g - 1) * p for g in range(1, s + 1)])
    return pmf


@pytest.mark.parametrize("kind", ["scalar", "bank"])
@pytest.mark.parametrize("a", [0, 2, -1])
def test_first_trip_is_exactly_geometric(a, kind):
    """Fails when the geometric draw is off by one: 20 000 draws of the first trip among s = 6
    checks (``sparse._first_trip``, or the bank's vectorised ``sparsebank.first_trips``)
    against the exact pmf of G in {0 (no trip), 1, ..., s}; a draw outside [0, s] fails at
    once."""
    x, s, runs = Fraction(1, 2), 6, 20_000
    src = as_source(11 + a)
    if kind == "scalar":
        draws = np.array([sparse._first_trip(x, a, s, src) for _ in range(runs)])
    else:
        draws = sparsebank.first_trips(x, np.full(runs, a), np.full(runs, s), src)
    assert draws.min() >= 0 and draws.max() <= s, np.bincount(draws - draws.min())
    pmf = _trip_pmf(float(x), a, s)
    observed = np.bincount(draws, minlength=s + 1)
    expected = pmf * runs
    assert expected.min() >= 5
    stat = ((observed - expected) ** 2 / expected).sum()
    assert stats.chi2.sf(stat, s) > P_MIN, (observed, expected.round())
    # Shifted by one step, the same draws would be rejected (the test has power).
    shifted = np.bincount(np.where(draws > 0, np.minimum(draws + 1, s), 0), minlength=s + 1)
    stat_shift = ((shifted - expected) ** 2 / expected).sum()
    assert stats.chi2.sf(stat_shift, s) < 1e-6


def test_skip_one_step_trips_with_the_exact_probability():
    x, runs = Fraction(1, 2), 20_000
    src = as_source(5)
    p = _trip_pmf(0.5, 0, 1)[1]
    hits = sum(sparse._first_trip(x, 0, 1, src) == 1 for _ in range(runs))
    assert abs(hits / runs - p) < 4.5 * math.sqrt(p * (1 - p) / runs)


# Inhomogeneous counting with large budgets (small thresholds): ε_7 ≈ 6.0, ε_8 ≈ 5.0,
# ε_9 ≈ 4.2, all at most ε = 8 (a budget above ε is refused); with ε = 8 the time levels are
# 7 = [16, 32), 8 = [32, 64), 9 = [64, 128). Level 7's sparse counter runs at ε_7/2: T0 = 8,
# checks and thresholds Lap_Z(≈ 0.67).
INH_EPS = 8.0
INH_BUDGETS = online_budgets(75.0, 2, 7)
INH_SKIPS = (6, 50)  # t = 16 -> 22 inside level 7; 22 -> 72: level 7 ends, level 8 passed whole


# The two tests that read these runs go to one pytest-xdist worker: they are computed once.
_SHARES_SCALAR_RUNS = pytest.mark.xdist_group("inhomogeneous_scalar_runs")
# Seeded scalar runs per side (a counter's construction, numpy's generator spawns, is most of
# their cost): 5,000 still reject, at p < 1e-59 each, a level passed whole with half its noise
# scale, the idle checks' noise halved, and a skip's trips one step late (checked).
INH_RUNS = 2_500


@lru_cache(maxsize=1)
def _inhomogeneous_scalar_runs() -> dict:
    """``INH_RUNS`` seeded InhomogeneousSparseCounter runs per side (shared with the bank's test):
    update(8) at t = 16 puts the segment count at the threshold (each idle check then trips
    with p ≈ 0.18), skip(6, releases=True) records t = 17 ... 22, skip(50) ends level 4, passes
    level 5 whole (one noise draw at its own scale) and stops inside level 6, update(1) at 73.
    The stepping side is one batch of the same 58 steps."""
    s1, s2 = INH_SKIPS
    sides = {}
    for method in ("skip", "step"):
        rows = []
        for i in range(INH_RUNS):
            c = InhomogeneousSparseCounter(
                INH_EPS, INH_BUDGETS, start_level=7, rng=2 * i + (method == "step")
            )
            if method == "skip":
                first = c.update(8)
                span = c.skip(s1, releases=True)
                assert span[-1] == c.query()
                c.skip(s2)
                rows.append([first, *span.tolist(), c.query(), c.update(1)])
            else:
                xs = np.zeros(s1 + s2 + 2, dtype=np.int64)
                xs[0], xs[-1] = 8, 1
                out = c.update_many(xs)
                rows.append([*out[: s1 + 1].tolist(), out[s1 + s2], out[-1]])
            assert c.t == 16 + s1 + s2 + 1 and c.level == 9
        r = np.array(rows)
        sides[method] = {
            **{f"t={16 + k}": r[:, k] for k in range(s1 + 1)},
            "first closing in the span": _first_change(r[:, 0], r[:, 1 : s1 + 1]),
            "t=72": r[:, s1 + 1],
            "t=73": r[:, s1 + 2],
        }
    return sides


@_SHARES_SCALAR_RUNS
def test_inhomogeneous_skip_has_the_law_of_stepping():
    """InhomogeneousSparseCounter: skip inside a time level (segments close in the span) and
    across level ends (a level passed whole), ``INH_RUNS`` runs per side (see the helper)."""
    sides = _inhomogeneous_scalar_runs()
    _same_law(sides["skip"], sides["step"])
    first = sides["skip"]["first closing in the span"]
    assert 0.4 < (first > 0).mean() < 0.95 and np.unique(first).size == INH_SKIPS[0] + 1
    # The two level totals' noise (scales 2/ε_7, 2/ε_8) move the release at t = 72 off 8.
    assert 0.05 < (sides["skip"]["t=72"] != 8).mean() < 0.5


@_SHARES_SCALAR_RUNS
def test_inhomogeneous_bank_skip_has_the_law_of_stepping():
    """InhomogeneousSparseBank of 10^4 counters with the scalar test's parameters: after a step
    of 8 at t = 16, skip(2), skip(4) and skip(50), each read by query() (lazy: a counter's idle
    checks since its last one are drawn at the read, one geometric draw per closing), against
    update_many of zeros, which checks every counter at every step; and against the scalar
    counters' stepping (no vectorised trip draws at all)."""
    sides = {}
    for method, seed in (("skip", 5), ("step", 6)):
        bank = InhomogeneousSparseBank(RUNS, INH_EPS, INH_BUDGETS, start_level=7, rng=seed)
        rel = {"t=16": bank.update(np.full(RUNS, 8, dtype=np.int64))}
        if method == "skip":
            for s, t in ((2, 18), (4, 22), (50, 72)):
                bank.skip(s)
                rel[f"t={t}"] = bank.query()
        else:
            out = bank.update_many(np.zeros((56, RUNS), dtype=np.int64))
            rel.update({"t=18": out[1], "t=22": out[5], "t=72": out[55]})
        assert bank.t == 72 and bank.level == 9
        rel["t=73"] = bank.update(np.ones(RUNS, dtype=np.int64))
        sides[method] = rel
    _same_law(sides["skip"], _inhomogeneous_scalar_runs()["step"])
    _same_law(sides["skip"], sides["step"])
    skip = sides["skip"]
    closed_18 = (skip["t=18"] != skip["t=16"]).mean()
    closed_22 = (skip["t=22"] != skip["t=16"]).mean()
    assert 0.1 < closed_18 < closed_22 - 0.1 < 0.9  # segments close inside both skips


# ------------------------------------------------------------------ sparse vs binary (Lemma 3.2)
def _rmse(make, xs, runs):
    return float(np.sqrt((_errors(make, xs, runs) ** 2).mean()))


def test_sparse_beats_binary_on_sparse_streams_and_not_on_dense_ones():
    horizon, runs = 4096, 30
    rng = np.random.default_rng(3)
    sparse = np.zeros(horizon, dtype=np.int64)
    sparse[rng.choice(horizon, 20, replace=False)] = 1
    dense = np.ones(horizon, dtype=np.int64)
    rmse = {
        (kind, name): _rmse(make, xs, runs)
        for kind, make in (
            ("sparse", lambda i: SparseCounter(1.0, horizon, rng=i)),
            ("binary", lambda i: BinaryMechanism(1.0, horizon, rng=i)),
        )
        for name, xs in (("sparse", sparse), ("dense", dense))
    }
    assert rmse[("sparse", "sparse")] < 0.5 * rmse[("binary", "sparse")], rmse
    assert rmse[("binary", "dense")] < rmse[("sparse", "dense")], rmse


# ------------------------------------------------------------------ inhomogeneous budgets
def test_online_budgets_match_the_paper():
    for d in (2, 3, 5):
        e = (1 - 1 / d) / 2
        c1 = (1 - 2**-e) / 2
        for j in range(5):
            b = online_budgets(0.7, d, j)
            for r in range(j, j + 6):
                assert b(r) == pytest.approx(c1 * 0.7 * 2 ** ((j - r) * e))
        # (4.2): at each time level, the budgets of the cells' levels sum to at most ε/2.
        for s in range(1, 30):
            assert sum(online_budgets(0.7, d, j)(s) for j in range(1, s + 1)) <= 0.35
    assert online_budgets(1.0, 1, 2)(9) == pytest.approx(3 / (math.pi**2 * 9))
    assert sum(online_budgets(1.0, 1, j)(0) for j in range(10_000)) <= 0.5


def test_inhomogeneous_counter_charges_only_the_records_level():
    budgets = online_budgets(1.0, 2, 1)
    c = InhomogeneousSparseCounter(1.0, budgets, start_level=1, rng=0)
    assert c.t == 1  # t_1 = 2 is the first step
    c.update_many(np.ones(200, dtype=np.int64))
    used = [budgets(r) for r in range(1, c.level + 1)]
    assert c.max_budget == pytest.approx(max(used)) and c.max_budget <= c.epsilon
    # Level r's sparse counter runs at ε_r/2 and its total gets Lap_Z(2/ε_r).
    assert c._sparse.epsilon == pytest.approx(budgets(c.level) / 2)
    # Two streams that differ at one step of level r: releases before it are equal and, once
    # level r has ended, differ by exactly that step's value (the later levels see nothing else).
    xs = np.random.default_rng(1).integers(0, 2, size=120)
    ys = xs.copy()
    ys[20] += 1  # global step 22, in level 4 = [16, 32)
    a = InhomogeneousSparseCounter(1.0, budgets, start_level=1, rng=7).update_many(xs)
    b = InhomogeneousSparseCounter(1.0, budgets, start_level=1, rng=7).update_many(ys)
    assert np.array_equal(a[:20], b[:20])
    assert np.all(b[31 - 1 :] - a[31 - 1 :] == 1)  # global step 32 (level 5) on


def test_inhomogeneous_custom_budgets_need_passing_back():
    c = InhomogeneousSparseCounter(1.0, lambda r: 0.1, rng=0)
    c.update_many([1, 0, 1])
    with pytest.raises(SerializationError, match="custom budgets"):
        InhomogeneousSparseCounter.from_bytes(c.to_bytes())
    back = InhomogeneousSparseCounter.from_bytes(c.to_bytes(), budgets=lambda r: 0.1)
    assert back.query() == c.query() and back.t == c.t
    with pytest.raises(ParameterError):
        InhomogeneousSparseCounter(1.0, lambda r: -1.0, rng=0)


# ------------------------------------------------------------------ bytes, sizes, bad values
ALL = [
    lambda: BinaryMechanism(epsilon=1.0, horizon=1000, rng=1),
    lambda: BinaryMechanism(rho=1.0, rng=1),
    lambda: SparseCounter(1.0, 1000, rng=1),
    lambda: InhomogeneousSparseCounter(1.0, online_budgets(1.0, 2, 0), rng=1),
]
NAMES = ["binary-finite", "binary-unbounded", "sparse", "inhomogeneous"]


@pytest.mark.parametrize("make", ALL, ids=NAMES)
def test_bytes_round_trip_and_continue_identically(make):
    c = make()
    c.update_many(np.ones(100, dtype=np.int64))
    blob = c.to_bytes()
    back = type(c).from_bytes(blob, rng=5)
    again = type(c).from_bytes(blob, rng=5)
    assert back.to_bytes() == blob and back.query() == c.query() and back.t == c.t
    xs = np.random.default_rng(2).integers(0, 2, size=50)
    assert np.array_equal(back.update_many(xs), again.update_many(xs))
    # Every counter's state is trusted, and its container header says so.
    assert header_of(blob).state == "trusted" and b"exact_state" not in blob
    damaged = bytearray(blob)
    damaged[len(blob) // 2] ^= 1
    with pytest.raises(SerializationError):
        type(c).from_bytes(bytes(damaged))


def test_nbytes_formulas():
    assert BinaryMechanism(1.0, 1000, rng=0).nbytes == 16 * 10 + 48
    assert BinaryMechanism(1.0, rng=0).nbytes == 16 * 64 + 64
    assert SparseCounter(1.0, 1000, rng=0).nbytes == 40 + 16 * 10 + 48
    assert InhomogeneousSparseCounter(1.0, lambda r: 0.1, rng=0).nbytes == 56 + 40 + 1024 + 48


BAD = [[1, -1, 1], [1, float("nan")], [0.5], ["a", 1], "abc", [[1, 2]], [1, 2**62]]


@pytest.mark.parametrize("make", ALL, ids=NAMES)
def test_bad_values_are_refused_with_the_counter_unchanged(make):
    c = make()
    c.update_many([1, 0, 2])
    blob, before = c.to_bytes(), c.t
    for bad in BAD:
        with pytest.raises(InputError):
            c.update_many(bad)
        assert c.to_bytes() == blob
    for bad in (-1, 1.5, float("nan"), "1", None):
        with pytest.raises(InputError):
            c.update(bad)
        assert c.to_bytes() == blob
    # Booleans are Boolean-stream values 0/1; integral floats and big numpy ints are fine.
    c.update_many(np.array([True, False]))
    c.update_many([2.0, np.uint64(3)])
    assert c.t == before + 4


def test_parameters_are_checked():
    with pytest.raises(ParameterError):
        BinaryMechanism(horizon=10)  # no budget
    with pytest.raises(ParameterError):
        BinaryMechanism(1.0, 10, rho=1.0)  # both
    with pytest.raises(ParameterError):
        BinaryMechanism(0.0, 10)
    with pytest.raises(ParameterError):
        BinaryMechanism(1.0, 0)
    with pytest.raises(ParameterError):
        SparseCounter(1.0, 10, sensitivity=0)
    with pytest.raises(ParameterError):
        online_budgets(1.0, 0, 1)
    with pytest.raises(InputError):
        BinaryMechanism(1.0, 3, rng=0).update_many([1, 1, 1, 1])  # past the horizon
    with pytest.raises(ParameterError):
        BinaryMechanism(1.0, 3, rng=0).skip(-1)


def test_floor_t0_is_exact():
    assert sparse._floor_t0(1, Fraction(1), 1) == 0
    for horizon, eps in ((100, Fraction(1, 3)), (2**40, Fraction(7, 10)), (5, Fraction(2))):
        assert sparse._floor_t0(horizon, eps, 1) == math.floor(9 * math.log(horizon) / eps)


# ------------------------------------------------------------------ square-root factorization
def test_sqrt_coefficients_square_to_the_prefix_sum_matrix():
    c = sqrt_coefficients(200)
    assert np.allclose(np.convolve(c, c)[:200], 1.0, atol=1e-12)  # (1 − z)^{-1/2} squared
    assert c[3] == 0.3125


def test_sqrt_factorization_noise_is_calibrated_exactly():
    c = SqrtFactorizationCounter(0.5, 1000, sensitivity=3, rng=0)
    coef = np.rint(sqrt_coefficients(1000) * 2.0**c.bits).astype(np.int64)
    norm2 = sum(int(v) ** 2 for v in coef.tolist())  # the first column: the largest norm
    assert c.sigma2 == Fraction(9 * norm2, 1)  # Δ²·‖C'e_1‖²/(2ρ) with 2ρ = 1
    assert c.sigma2 <= 2**30 and c.bits >= 8


@pytest.mark.parametrize("split", [[40], [1] * 40, [13, 27]])
def test_sqrt_factorization_is_exact_without_noise(monkeypatch, split):
    monkeypatch.setattr(counters, "_draw", lambda kind, param, n, src: np.zeros(n, np.int64))
    xs = np.arange(40) % 4
    c = SqrtFactorizationCounter(1.0, 40, rng=0)
    out, pos = [], 0
    for size in split:
        out += c.update_many(xs[pos : pos + size]).tolist()
        pos += size
    assert np.allclose(out, np.cumsum(xs), rtol=0, atol=1e-6)


def test_sqrt_factorization_is_unbiased_with_formula_variance_and_beats_the_tree():
    runs, horizon = 400, 32
    xs = np.random.default_rng(0).integers(0, 3, size=horizon)
    err = np.array(
        [SqrtFactorizationCounter(0.5, horizon, rng=i).update_many(xs) for i in range(runs)]
    ) - np.cumsum(xs)
    c = SqrtFactorizationCounter(0.5, horizon, rng=0)
    var = np.array([c.variance(t) for t in range(1, horizon + 1)])
    assert np.all(np.abs(err.mean(axis=0)) < 4.5 * np.sqrt(var / runs))
    rel = err.var(axis=0) / var - 1
    assert np.all(np.abs(rel) < 4.5 * math.sqrt(2 / runs)), rel
    # The reference figures, units 1/(2ρ): 10.7 at T = 2^10 against 110 for the tree.
    big = SqrtFactorizationCounter(1.0, 1024, rng=0)
    assert 10.5 < 2 * big.variance(1024) < 11.5
    assert 2 * BinaryMechanism(rho=1.0, horizon=1024, rng=0).variance(1023) == pytest.approx(110)


def test_sqrt_factorization_bytes_and_bad_values():
    c = SqrtFactorizationCounter(1.0, 100, rng=0)
    c.update_many([1, 2, 0])
    blob = c.to_bytes()
    assert header_of(blob).state == "trusted" and b"exact_state" not in blob
    back = SqrtFactorizationCounter.from_bytes(blob)
    assert back.t == 3 and np.array_equal(back.releases, c.releases)
    assert back.query() == c.query() and c.nbytes == 16 * 100 + 48
    with pytest.raises(InputError):
        c.update_many([1, -1])
    assert c.to_bytes() == blob


# ------------------------------------------------------------------ merge (binary mechanism)
@pytest.mark.parametrize(
    "kwargs",
    [
        {"epsilon": 1.0, "horizon": 100},
        {"rho": 1.0},
        {"epsilon": 1.0, "horizon": 100, "estimator": "honaker"},
    ],
    ids=["finite", "unbounded", "honaker"],
)
def test_merge_adds_states_and_refuses_shared_noise(monkeypatch, kwargs):
    monkeypatch.setattr(counters, "_draw", lambda kind, param, n, src: np.zeros(n, np.int64))
    xs, ys = np.arange(30) % 2, np.arange(30) % 3
    a, b = BinaryMechanism(rng=1, **kwargs), BinaryMechanism(rng=2, **kwargs)
    a.update_many(xs)
    b.update_many(ys)
    a.merge(b)
    assert a.query() == pytest.approx(float((xs + ys).sum()))  # noise-free: exact sums
    more = np.ones(20, dtype=np.int64)
    assert np.allclose(a.update_many(more), (xs + ys).sum() + np.cumsum(more))
    with pytest.raises(IncompatibleError):
        a.merge(BinaryMechanism.from_bytes(a.to_bytes()))  # same lineage
    with pytest.raises(IncompatibleError):
        a.merge(BinaryMechanism(rng=3, **kwargs))  # different t


# ------------------------------------------------------------------ trusted state, forged blobs
def _every_counter() -> list:
    return [
        BinaryMechanism(1.0, 64, rng=0),
        BinaryMechanism(rho=0.5, rng=0),
        BinaryMechanism(1.0, 64, estimator="honaker", rng=0),
        CounterBank(3, 1.0, 64, rng=0),
        SqrtFactorizationCounter(1.0, 64, rng=0),
        SparseCounter(1.0, 64, rng=0),
        InhomogeneousSparseCounter(1.0, online_budgets(1.0, 2, 0), rng=0),
        InhomogeneousSparseBank(3, 1.0, online_budgets(1.0, 2, 0), rng=0),
        KaryTreeCounter(1.0, 64, rng=0),
    ]


@pytest.mark.parametrize("secret", [0, 1])
def test_shipped_tree_state_plus_a_later_release_reveals_an_exact_count(secret):
    """Why every counter declares a trusted state. The binary mechanism's open p-sum holds its
    noise plus the data so far: a blob shipped after step 1 holds ``η + x1`` for the block
    (0, 2]; the release at step 2 is that block's noisy sum ``η + x1 + x2``. Their difference
    is ``x2`` exactly, whatever the noise: the old header's ``"exact_state": false`` was false.
    """
    c = BinaryMechanism(1.0, 4, rng=secret + 17)
    c.update(1)
    blob = c.to_bytes()
    assert header_of(blob).state == "trusted"
    _, _, _, arrays = unpack(blob, "BinaryMechanism")
    shipped = int(arrays["open"][1, 0])  # level 1: the open block (0, 2]
    release = c.update(secret)  # step 2 = 0b10: the release is the closed block (0, 2]
    assert release - shipped == secret


def test_every_counter_declares_a_trusted_state():
    for c in _every_counter():
        c.update_many(np.ones((2, c.size), dtype=np.int64)) if hasattr(c, "size") else c.update(1)
        blob = c.to_bytes()
        assert type(c).STATE_PRIVACY == "trusted" and c.state_privacy == "trusted"
        assert header_of(blob).state == "trusted" and b"exact_state" not in blob
        assert "trusted" in (type(c).__doc__ or "").lower()
        back = type(c).from_bytes(blob, rng=1)
        assert back == c and pickle.loads(pickle.dumps(c)) == c


def _forge(c, **changes) -> bytes:
    kind, version, meta, arrays = unpack(c.to_bytes(), type(c).__name__)
    meta = dict(meta)
    for key, value in changes.items():
        if value is _DROP:
            meta.pop(key, None)
        else:
            meta[key] = value
    return _pack_unsafe(kind, version, meta, arrays)


_DROP = object()


def _pack_unsafe(kind, version, meta, arrays) -> bytes:
    """``pack`` that lets NaN and infinity through (a forger's JSON writer)."""
    import json

    real = json.dumps

    def loose(obj, **kw):
        kw["allow_nan"] = True
        return real(obj, **kw)

    json.dumps = loose
    try:
        return pack(kind, version, meta, arrays, state="trusted")
    finally:
        json.dumps = real


FORGED_FLOATS = [1e-320, 1.5e308, 2.0**-31, 2.0**21, float("nan"), float("inf"), -1.0, 0, "1"]


@pytest.mark.parametrize("value", FORGED_FLOATS, ids=repr)
@pytest.mark.parametrize(
    "make, field",
    [
        (lambda: BinaryMechanism(1.0, 64, rng=0), "epsilon"),
        (lambda: BinaryMechanism(rho=1.0, rng=0), "rho"),
        (lambda: CounterBank(2, 1.0, 64, rng=0), "epsilon"),
        (lambda: KaryTreeCounter(1.0, 64, rng=0), "epsilon"),
        (lambda: SparseCounter(1.0, 64, rng=0), "epsilon"),
        (lambda: SqrtFactorizationCounter(1.0, 64, rng=0), "rho"),
        (lambda: InhomogeneousSparseCounter(1.0, online_budgets(1.0, 2, 0), rng=0), "epsilon"),
        (lambda: InhomogeneousSparseCounter(1.0, online_budgets(1.0, 2, 0), rng=0), "max_budget"),
        (lambda: InhomogeneousSparseBank(2, 1.0, online_budgets(1.0, 2, 0), rng=0), "epsilon"),
        (lambda: InhomogeneousSparseBank(2, 1.0, online_budgets(1.0, 2, 0), rng=0), "max_budget"),
    ],
)
def test_forged_float_fields_are_refused_by_name(make, field, value):
    c = make()
    if field == "max_budget" and value in (0, 2.0**-31, 1e-320):
        return  # a budget of 0 (or tiny) used so far is a valid value
    # NaN and infinity are refused by the container before any field is read.
    named = isinstance(value, str) or math.isfinite(value)
    with pytest.raises(SerializationError, match=field if named else None):
        type(c).from_bytes(_forge(c, **{field: value}))


@pytest.mark.parametrize("value", [1e-320, 1.5e308, float("nan"), 2.0**-31, 2.0**21])
def test_constructors_refuse_the_same_budgets(value):
    for make in (
        lambda: BinaryMechanism(value, 64),
        lambda: BinaryMechanism(rho=value),
        lambda: KaryTreeCounter(value, 64),
        lambda: SparseCounter(value, 64),
        lambda: SqrtFactorizationCounter(value, 64),
        lambda: online_budgets(value, 2, 0),
    ):
        with pytest.raises(ParameterError):
            make()


@pytest.mark.parametrize(
    "budgets",
    [
        {"epsilon": 1.0, "d": 2, "j": 2**31},
        {"epsilon": 1e-320, "d": 2, "j": 0},
        {"epsilon": 1.0, "d": 0, "j": 0},
    ],
)
def test_forged_stored_budgets_are_refused(budgets):
    c = InhomogeneousSparseCounter(1.0, online_budgets(1.0, 2, 0), rng=0)
    with pytest.raises(SerializationError):
        InhomogeneousSparseCounter.from_bytes(_forge(c, budgets=budgets))


@pytest.mark.parametrize("value", [1, 0, "yes", None, 1.0])
def test_flags_must_be_real_bools(value):
    for c in (BinaryMechanism(1.0, 8, rng=0), KaryTreeCounter(1.0, 8, rng=0)):
        with pytest.raises(SerializationError, match="frozen"):
            type(c).from_bytes(_forge(c, frozen=value))
    b = InhomogeneousSparseBank(2, 1.0, online_budgets(1.0, 2, 0), rng=0)
    with pytest.raises(SerializationError, match="ready"):
        InhomogeneousSparseBank.from_bytes(_forge(b, ready=value))


@pytest.mark.parametrize("field", ["t", "horizon", "sensitivity", "last", "segment", "size"])
@pytest.mark.parametrize("value", [2**62, -1, 1.5, float("nan"), "3", None])
def test_forged_integer_fields_are_refused(field, value):
    makes = [
        lambda: BinaryMechanism(1.0, 64, rng=0),
        lambda: BinaryMechanism(1.0, rng=0),
        lambda: KaryTreeCounter(1.0, 64, rng=0),
        lambda: SparseCounter(1.0, 64, rng=0),
        lambda: SqrtFactorizationCounter(1.0, 64, rng=0),
        lambda: CounterBank(2, 1.0, 64, rng=0),
    ]
    for make in makes:
        c = make()
        c.skip(3)
        kind, _, meta, _ = unpack(c.to_bytes(), type(c).__name__)
        if field not in meta or (
            field == "horizon" and value is None and kind == "BinaryMechanism"
        ):
            continue
        if field == "last" and (kind == "SqrtFactorizationCounter" or value == -1):
            continue  # a float estimate there; a release may be negative
        with pytest.raises(SerializationError):
            type(c).from_bytes(_forge(c, **{field: value}))


def test_nan_never_enters_an_integer_array():
    c = BinaryMechanism(1.0, 16, estimator="honaker", rng=0)
    c.update_many([1, 1, 0])
    kind, version, meta, arrays = unpack(c.to_bytes(), "BinaryMechanism")
    for name in ("lasts", "est"):
        bad = {k: a.copy() for k, a in arrays.items()}
        bad[name][0] = np.nan
        with pytest.raises(SerializationError, match=name):
            BinaryMechanism.from_bytes(pack(kind, version, meta, bad, state="trusted"))
    # a float array where an integer one belongs is refused, never cast
    bad = {k: a.copy() for k, a in arrays.items()}
    bad["open"] = bad["open"].astype(np.float64)
    with pytest.raises(SerializationError, match="open"):
        BinaryMechanism.from_bytes(pack(kind, version, meta, bad, state="trusted"))


def test_budgets_above_epsilon_are_refused_at_the_level_they_reach():
    # Known up front: online_budgets is largest at the first level.
    with pytest.raises(ParameterError, match="level 0"):
        InhomogeneousSparseCounter(1.0, online_budgets(1.0, 2, 60), rng=0)
    with pytest.raises(ParameterError, match="level 0"):
        InhomogeneousSparseBank(2, 1.0, lambda r: 2.0, rng=0)
    # A callable is checked as each level is reached; the refused batch changes nothing.
    grows = lambda r: 0.5 * 2**r  # noqa: E731  (ε_2 = 2 > ε = 1)
    c = InhomogeneousSparseCounter(1.0, grows, rng=0)
    c.update_many([1, 0])
    before = c.to_bytes()
    with pytest.raises(ParameterError, match=r"epsilon_2 = 2\.0 .* level 2"):
        c.update_many(np.ones(10, dtype=np.int64))
    with pytest.raises(ParameterError, match="level 2"):
        c.skip(10)
    assert c.to_bytes() == before and c.t == 2
    b = InhomogeneousSparseBank(2, 1.0, grows, rng=0)
    b.update_events(2, [0], [1])
    before = b.to_bytes()
    for call in (
        lambda: b.update_events(10, [1], [5]),
        lambda: b.skip(10),
        lambda: b.update_many(np.ones((10, 2), dtype=np.int64)),
    ):
        with pytest.raises(ParameterError, match="level 2"):
            call()
        assert b.to_bytes() == before
