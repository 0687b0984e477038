"""CumulativeSynthesizer (seed 004, Algorithm 2): Lemma 4.2, budgets, consistency, state."""

from __future__ import annotations

import math
import pickle
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from limits import cpu_limit  # tests/ is on sys.path (no __init__)

from sketchsyn.errors import InputError, ParameterError, ReleasedError, SerializationError
from sketchsyn.synth.longitudinal.cumulative import (
    CumulativeSynthesizer,
    available_counters,
    counter_budgets,
    monotonize,
)

COUNTERS = available_counters()


def _true_counts(panel: np.ndarray) -> np.ndarray:
    """S_b^t for t = 1 … T (rows) and b = 0 … T (columns)."""
    periods, n = panel.shape
    weights = np.zeros(n, dtype=np.int64)
    out = np.zeros((periods, periods + 1), dtype=np.int64)
    for t, col in enumerate(panel):
        weights += col
        hist = np.bincount(weights, minlength=periods + 1)
        out[t] = hist[::-1].cumsum()[::-1]
    return out


@st.composite
def _panel_and_noise(draw):
    n = draw(st.integers(1, 12))
    periods = draw(st.integers(1, 8))
    bits = draw(st.lists(st.integers(0, 1), min_size=n * periods, max_size=n * periods))
    panel = np.array(bits, dtype=np.int64).reshape(periods, n)
    noise = draw(
        st.lists(
            st.integers(-15, 15),
            min_size=periods * periods,
            max_size=periods * periods,
        )
    )
    return panel, np.array(noise).reshape(periods, periods)


@settings(max_examples=300, deadline=None)
@given(_panel_and_noise())
def test_lemma_4_2_monotonisation_never_increases_linf_error(case) -> None:
    panel, noise = case
    periods, n = panel.shape
    truth = _true_counts(panel)
    previous = np.array([n])
    worst_noisy = 0
    for t in range(1, periods + 1):
        noisy = truth[t - 1, 1 : t + 1] + noise[t - 1, :t]
        s_hat = monotonize(noisy, previous)
        worst_noisy = max(worst_noisy, int(np.abs(noise[t - 1, :t]).max()))
        err = np.abs(s_hat - truth[t - 1, : t + 1])
        # Equation (10) per (b, t), and the ℓ∞ statement over everything so far.
        prev_err = np.abs(previous - (truth[t - 2, :t] if t > 1 else np.array([n])))
        prev_err_b = np.append(prev_err[1:], 0)
        for b in range(1, t + 1):
            assert err[b] <= max(abs(noise[t - 1, b - 1]), prev_err_b[b - 1], prev_err[b - 1])
        assert err.max() <= worst_noisy
        # Consistency: non-increasing in b, never decreasing in t, at most one step per period.
        assert (np.diff(s_hat) <= 0).all()
        assert (s_hat[:-1] >= np.append(previous[1:], 0)).all()
        assert (s_hat[1:] <= previous).all()
        previous = s_hat


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 30),
    st.integers(1, 10),
    st.sampled_from(COUNTERS),
    st.integers(0, 2**32),
    st.floats(1e-3, 10.0),
)
def test_synthetic_weights_and_queries_are_monotone(n, periods, counter, seed, rho) -> None:
    rng = np.random.default_rng(seed)
    synth = CumulativeSynthesizer(n, periods, rho, counter=counter, rng=seed, keep_history=True)
    previous_weights = np.zeros(n, dtype=np.int64)
    previous_answers = [synth.query(b) for b in range(periods + 2)]
    for _ in range(periods):
        column = synth.update(rng.integers(0, 2, n))
        assert set(np.unique(column).tolist()) <= {0, 1}
        weights = synth.weights()
        step = weights - previous_weights
        assert ((step == 0) | (step == 1)).all()  # never decrease, at most one per period
        assert np.array_equal(step, column)
        answers = [synth.query(b) for b in range(periods + 2)]
        assert answers[0] == n
        assert all(a >= b for a, b in zip(answers[:-1], answers[1:], strict=True))  # monotone in b
        assert all(a >= b for a, b in zip(answers, previous_answers, strict=True))  # monotone in t
        # The answers are exactly the synthetic panel's counts.
        hist = np.bincount(weights, minlength=periods + 2)[::-1].cumsum()[::-1]
        assert answers == hist[: periods + 2].tolist()
        previous_weights, previous_answers = weights, answers
    assert np.array_equal(synth.history().sum(axis=1), synth.weights())


@pytest.mark.parametrize("horizon", [1, 2, 3, 12, 64, 1000])
def test_counter_budgets_sum_to_rho(horizon: int) -> None:
    budgets = counter_budgets(0.005, horizon)
    assert len(budgets) == horizon
    assert sum(budgets) == Fraction(0.005)
    assert math.isclose(math.fsum(float(r) for r in budgets), 0.005, rel_tol=1e-12)
    levels = [max(math.ceil(math.log2(horizon - b + 1)), 1) for b in range(1, horizon + 1)]
    ratios = {r / level**3 for r, level in zip(budgets, levels, strict=True)}
    assert len(ratios) == 1  # ρ_b / L_b³ equal for all b (Corollary B.1)
    synth = CumulativeSynthesizer(10, horizon, 0.005)
    assert math.isclose(math.fsum(synth.rhos), 0.005, rel_tol=1e-12)


@pytest.mark.parametrize("counter", COUNTERS)
def test_error_within_theorem_4_4_bound(counter: str) -> None:
    n, horizon, rho = 5000, 12, 0.005
    worst = []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        x = (rng.random(n) < 0.3).astype(np.int64)
        panel = []
        for _ in range(horizon):
            panel.append(x)
            x = np.where(rng.random(n) < 0.8, x, (rng.random(n) < 0.3).astype(np.int64))
        panel = np.array(panel)
        truth = _true_counts(panel)
        synth = CumulativeSynthesizer(n, horizon, rho, counter=counter, rng=seed)
        err = 0
        for t, col in enumerate(panel, start=1):
            synth.update(col)
            err = max(err, int(np.abs(synth.counts() - truth[t - 1, : t + 1]).max()))
        worst.append(err)
    bound = synth.error_bound(0.05)
    assert np.percentile(worst, 95) <= bound
    assert np.median(worst) > 0.05 * bound  # noise is really there


def test_bad_input_refused_with_state_unchanged() -> None:
    synth = CumulativeSynthesizer(6, 3, 1.0, rng=1)
    synth.update([0, 1, 1, 0, 0, 1])
    before = synth.to_bytes()
    for bad in ([0, 1, 2, 0, 0, 1], [0, 1, np.nan, 0, 0, 1], [0, 1], [0, -1, 0, 0, 0, 0]):
        with pytest.raises(InputError):
            synth.update(bad)
        assert synth.to_bytes() == before
    with pytest.raises(InputError, match="horizon"):
        synth.update_many([[0] * 6] * 3)
    assert synth.to_bytes() == before
    synth.update_many([[1] * 6] * 2)
    with pytest.raises(InputError, match="past the horizon"):
        synth.update([0] * 6)
    for kwargs in ({"counter": "laplace"}, {"rho": 0}, {"keep_history": "yes"}):
        args = {"n": 5, "horizon": 3, "rho": 1.0, **kwargs}
        with pytest.raises(ParameterError):
            CumulativeSynthesizer(args.pop("n"), args.pop("horizon"), args.pop("rho"), **args)
    with pytest.raises(ParameterError):
        synth.query(-1)


@pytest.mark.parametrize("counter", COUNTERS)
def test_bytes_pickle_snapshot(counter: str) -> None:
    rng = np.random.default_rng(3)
    synth = CumulativeSynthesizer(50, 6, 0.5, counter=counter, rng=2)
    synth.update_many(rng.integers(0, 2, (3, 50)))
    blob = synth.to_bytes()
    loaded = CumulativeSynthesizer.from_bytes(blob)
    assert loaded == synth and loaded.lineage == synth.lineage
    assert pickle.loads(pickle.dumps(synth)) == synth
    loaded.update(rng.integers(0, 2, 50))
    assert loaded.t == 4
    snap = synth.snapshot()
    with pytest.raises(ReleasedError):
        snap.update(np.zeros(50))
    with pytest.raises(SerializationError):
        CumulativeSynthesizer.from_bytes(blob[:-1])
    assert synth.epsilon_delta(1e-6) == pytest.approx(0.5 + 2 * math.sqrt(0.5 * math.log(1e6)))


def test_built_counters_have_corollary_b1_budgets_and_horizons() -> None:
    horizon, rho = 12, 0.005
    synth = CumulativeSynthesizer(100, horizon, rho, counter="tree", rng=4)
    synth.update_many(np.random.default_rng(4).integers(0, 2, (horizon, 100)))
    counters = synth._counters
    assert len(counters) == horizon
    budgets = counter_budgets(rho, horizon)
    for b, c in enumerate(counters, start=1):
        assert c.horizon == horizon - b + 1
        assert c.rho == float(budgets[b - 1])
        assert c.t == horizon - b + 1  # counter b started at period b
    assert math.isclose(math.fsum(c.rho for c in counters), rho, rel_tol=1e-12)
    # Theorem 4.4's bound from the tree's noise, computed independently: counter b has
    # floor(log2(T−b+1)) + 1 levels, N_Z(0, levels/(2ρ_b)) per node, popcount(s) nodes at s.
    worst = max(
        max(bin(s).count("1") for s in range(1, horizon - b + 2))
        * (horizon - b + 1).bit_length()
        / (2 * float(budgets[b - 1]))
        for b in range(1, horizon + 1)
    )
    expected = math.sqrt(2 * worst * math.log(horizon * (horizon + 1) / 0.05))
    assert synth.error_bound(0.05) == pytest.approx(expected, rel=1e-6)


# ------------------------------------------------------------- forged headers (issue regression)
def _forge(blob: bytes, kind: str, version: int | None = None, **changes: object) -> bytes:
    """``blob`` with header fields changed and the (unkeyed) digest recomputed."""
    from sketchsyn.io.serial import pack, read

    got = read(blob, kind)
    meta = dict(got.meta) | changes
    return pack(
        kind, got.version if version is None else version, meta, got.arrays, state="trusted"
    )


@pytest.mark.parametrize(
    "field, value",
    [
        ("n", 2**31),
        ("n", 2**40),
        ("rho", 1e-320),
        ("rho", 1.5e308),
        ("keep_history", 1),
        ("frozen", 0),
        ("t", 2**40),
    ],
)
def test_forged_header_refused_before_allocating(field: str, value: object) -> None:
    synth = CumulativeSynthesizer(10, 4, 1.0, rng=1)
    synth.update([0, 1] * 5)
    blob = _forge(synth.to_bytes(), "CumulativeSynthesizer", **{field: value})
    with cpu_limit(1.0, f"refusing a forged {field!r}"):
        with pytest.raises(SerializationError) as info:
            CumulativeSynthesizer.from_bytes(blob)
    text = str(info.value)
    assert field in text or (field == "n" and "real" in text), text


def test_newer_version_refused_and_state_trusted() -> None:
    from sketchsyn.io.serial import header_of

    synth = CumulativeSynthesizer(10, 4, 1.0, rng=1)
    assert header_of(synth.to_bytes()).state == "trusted"
    with pytest.raises(SerializationError, match="version 2"):
        CumulativeSynthesizer.from_bytes(
            _forge(synth.to_bytes(), "CumulativeSynthesizer", version=2)
        )
