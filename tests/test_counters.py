"""Continual counters: exact p-sum layout, unbiasedness and variance, exact skip, sparse vs binary,
inhomogeneous budgets, bytes, bad values."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from sketchsyn import counters
from sketchsyn.counters import (
    BinaryMechanism,
    CounterBank,
    InhomogeneousSparseCounter,
    SparseCounter,
    SqrtFactorizationCounter,
    online_budgets,
    sqrt_coefficients,
)
from sketchsyn.errors import IncompatibleError, InputError, ParameterError, SerializationError


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


@pytest.mark.parametrize("horizon", [64, None], ids=["finite", "unbounded"])
def test_bank_skip_has_the_law_of_stepping_over_10k_runs(horizon):
    runs = 10_000
    out = []
    for method, seed in (("skip", 1), ("step", 2)):
        bank = CounterBank(runs, epsilon=1.0, horizon=horizon, rng=seed)
        bank.update_many(np.ones((5, runs), dtype=np.int64))
        if method == "skip":
            bank.skip(37)
        else:
            bank.update_many(np.zeros((37, runs), dtype=np.int64))
        out.append((bank.query(), bank.update(np.ones(runs, dtype=np.int64))))
    (a1, a2), (b1, b2) = out
    assert _chi2_same(a1, b1) > 1e-3
    assert _chi2_same(a2, b2) > 1e-3


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
def _chi2_same(a, b, bins=12):
    """Two-sample chi-square p-value on quantile bins of the pooled sample."""
    pooled = np.concatenate([a, b])
    edges = np.unique(np.quantile(pooled, np.linspace(0, 1, bins + 1)))
    ca = np.histogram(a, edges)[0]
    cb = np.histogram(b, edges)[0]
    keep = (ca + cb) > 0
    return stats.chi2_contingency(np.vstack([ca[keep], cb[keep]]))[1]


def _sparse_after(method, seed, s=30):
    c = SparseCounter(4.0, 60, rng=seed)  # T0 = floor(9·ln 60/4) = 9; λ ~ Lap_Z(1/2)
    c.update_many([9])
    if method == "skip":
        c.skip(s)
    else:
        c.update_many(np.zeros(s, dtype=np.int64))
    return c.segments, c.query(), c.update(1)


def test_sparse_skip_has_the_law_of_stepping():
    runs = 2500  # 1.6 ms per run and method: 10^4 runs would take the file past its CPU budget
    a = np.array([_sparse_after("skip", 2 * i) for i in range(runs)])
    b = np.array([_sparse_after("step", 2 * i + 1) for i in range(runs)])
    seg_a = np.bincount(a[:, 0], minlength=8)
    seg_b = np.bincount(b[:, 0], minlength=8)
    assert seg_a[1] > runs // 10  # the threshold does trip inside the skip often
    keep = (seg_a + seg_b) > 0
    assert stats.chi2_contingency(np.vstack([seg_a[keep], seg_b[keep]]))[1] > 1e-3
    assert _chi2_same(a[:, 1], b[:, 1]) > 1e-3
    assert _chi2_same(a[:, 2], b[:, 2]) > 1e-3


def test_sparse_skip_releases_match_stepping_in_law():
    runs = 600
    first_a, first_b = [], []
    for i in range(runs):
        for method, first in (("skip", first_a), ("step", first_b)):
            c = SparseCounter(4.0, 60, rng=2 * i + (method == "step"))
            c.update_many([9])
            before = c.query()
            zeros = np.zeros(20, dtype=np.int64)
            out = c.skip(20, releases=True) if method == "skip" else c.update_many(zeros)
            moved = np.flatnonzero(out != before)
            first.append(int(moved[0]) + 1 if moved.size else 0)
    ca = np.bincount(first_a, minlength=21)
    cb = np.bincount(first_b, minlength=21)
    keep = (ca + cb) > 0
    assert stats.chi2_contingency(np.vstack([ca[keep], cb[keep]]))[1] > 1e-3


def _trip_pmf(x: float, a: int, s: int) -> np.ndarray:
    """P(first trip = g) for g = 1..s and P(no trip) at index 0."""
    q = math.exp(-x)
    p = q ** (a + 1) / (1 + q) if a >= 0 else 1 - q ** (-a) / (1 + q)
    pmf = np.array([(1 - p) ** s] + [(1 - p) ** (g - 1) * p for g in range(1, s + 1)])
    return pmf


@pytest.mark.parametrize("a", [0, 2, -1])
def test_first_trip_is_exactly_geometric(a):
    """Fails when the geometric draw is off by one (the pmf would shift by one step)."""
    x, s, runs = Fraction(1, 2), 6, 20_000
    src = counters.as_source(11 + a)
    draws = np.array([counters._first_trip(x, a, s, src) for _ in range(runs)])
    pmf = _trip_pmf(float(x), a, s)
    observed = np.bincount(draws, minlength=s + 1)
    expected = pmf * runs
    stat = ((observed - expected) ** 2 / expected).sum()
    assert stats.chi2.sf(stat, s) > 1e-3, (observed, expected.round())
    # Shifted by one step, the same draws would be rejected (the test has power).
    shifted = np.bincount(np.where(draws > 0, np.minimum(draws + 1, s), 0), minlength=s + 1)
    stat_shift = ((shifted - expected) ** 2 / expected).sum()
    assert stats.chi2.sf(stat_shift, s) < 1e-6


def test_skip_one_step_trips_with_the_exact_probability():
    x, runs = Fraction(1, 2), 20_000
    src = counters.as_source(5)
    p = _trip_pmf(0.5, 0, 1)[1]
    hits = sum(counters._first_trip(x, 0, 1, src) == 1 for _ in range(runs))
    assert abs(hits / runs - p) < 4.5 * math.sqrt(p * (1 - p) / runs)


def test_inhomogeneous_skip_has_the_law_of_stepping():
    runs = 800  # each run builds ~8 sparse counters (about 5 ms per run and method)
    out = {"skip": [], "step": []}
    for i in range(runs):
        for method in out:
            c = InhomogeneousSparseCounter(
                2.0, online_budgets(2.0, 1, 0), rng=2 * i + (method == "step")
            )
            c.update_many([1, 1, 1])
            if method == "skip":
                c.skip(40)  # crosses the levels starting at t = 4, 8, 16 and 32
            else:
                c.update_many(np.zeros(40, dtype=np.int64))
            out[method].append((c.query(), c.update(1)))
    a, b = np.array(out["skip"]), np.array(out["step"])
    assert _chi2_same(a[:, 0], b[:, 0]) > 1e-3
    assert _chi2_same(a[:, 1], b[:, 1]) > 1e-3


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
    header_exact = b'"exact_state": true' in blob
    assert header_exact == isinstance(c, (SparseCounter, InhomogeneousSparseCounter))
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
    assert counters._floor_t0(1, Fraction(1), 1) == 0
    for horizon, eps in ((100, Fraction(1, 3)), (2**40, Fraction(7, 10)), (5, Fraction(2))):
        assert counters._floor_t0(horizon, eps, 1) == math.floor(9 * math.log(horizon) / eps)


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
    assert b'"exact_state": true' in blob
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
