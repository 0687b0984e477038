"""FixedWindowSynthesizer (seed 004, Algorithm 1): accuracy, noise, consistency, state."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from limits import cpu_limit  # tests/ is on sys.path (no __init__)

from sketchsyn.errors import InputError, ParameterError, ReleasedError, SerializationError
from sketchsyn.privacy.rng import as_source
from sketchsyn.synth.longitudinal import FixedWindowSynthesizer
from sketchsyn.synth.longitudinal.assign import assign_within_groups

N, T, K, RHO = 25_000, 12, 3, 0.005


def _true_hist(window_codes: np.ndarray, q: int, k: int) -> np.ndarray:
    return np.bincount(window_codes, minlength=q**k).reshape((q,) * k)


def _run(panel: np.ndarray, q: int, k: int, seed: int, **kw) -> tuple[list, list, object]:
    """Run one synthesizer over ``panel`` (T, n); per period t ≥ k return (debiased ℓ∞ error
    in people, raw synthetic-proportion ℓ∞ error)."""
    n = panel.shape[1]
    synth = FixedWindowSynthesizer(n, panel.shape[0], k, RHO, alphabet=q, rng=seed, **kw)
    code = np.zeros(n, dtype=np.int64)
    debiased, raw = [], []
    for t, column in enumerate(panel, start=1):
        synth.update(column)
        code = (code * q + column) % q**k
        if t >= k:
            truth = _true_hist(code, q, k)
            debiased.append(np.abs(synth.histogram() - truth).max())
            raw.append(np.abs(synth.histogram(debias=False) / synth.n_synthetic - truth / n).max())
    return debiased, raw, synth


def _persistent_panel(rng: np.random.Generator, n: int, periods: int, q: int) -> np.ndarray:
    """Each person keeps last period's value with probability 0.8, else draws a fresh one."""
    probs = np.linspace(3, 1, q) / np.linspace(3, 1, q).sum()
    x = rng.choice(q, size=n, p=probs)
    cols = [x]
    for _ in range(periods - 1):
        keep = rng.random(n) < 0.8
        x = np.where(keep, x, rng.choice(q, size=n, p=probs))
        cols.append(x)
    return np.array(cols)


def _check_flat_and_bounded(errors: np.ndarray, bound: float) -> None:
    median = np.median(errors, axis=0)
    upper = np.percentile(errors, 97.5, axis=0)
    assert (upper <= bound).all(), (upper, bound)
    # Flat in t (Theorem 3.2's time-uniform variance): an error that accumulated over periods
    # would make the last periods' medians ~sqrt(periods) times the first ones.
    half = median.size // 2
    assert abs(median[-half:].mean() - median[:half].mean()) <= 0.2 * median.mean(), median


def test_appendix_c1_all_ones_debiased_flat_and_under_bound() -> None:
    panel = np.ones((T, N), dtype=np.int64)
    runs = [_run(panel, 2, K, seed) for seed in range(50)]
    debiased = np.array([r[0] for r in runs], dtype=float)
    synth = runs[0][2]
    assert synth.n_pad == 124  # ceil((sqrt(10/0.005) + 1/sqrt(2))·sqrt(ln(8·10/0.05)))
    _check_flat_and_bounded(debiased, synth.error_bound())
    # Figure 4: without debiasing the error is the padding's bias, far above the noise.
    raw = np.array([r[1] for r in runs])
    n_star = N + 8 * synth.n_pad
    bias = max(abs((N + synth.n_pad) / n_star - 1.0), synth.n_pad / n_star)
    assert abs(np.median(raw) - bias) <= 0.1 * bias
    assert np.median(raw) > 5 * np.median(debiased) / N


def test_random_persistent_panel_flat_and_under_bound() -> None:
    rng = np.random.default_rng(4)
    errors = []
    for seed in range(50):
        panel = _persistent_panel(rng, N, T, 2)
        errors.append(_run(panel, 2, K, 100 + seed)[0])
    bound = FixedWindowSynthesizer(N, T, K, RHO).error_bound()
    _check_flat_and_bounded(np.array(errors, dtype=float), bound)


def test_categorical_alphabet_three_within_bound() -> None:
    rng = np.random.default_rng(5)
    errors = []
    for seed in range(30):
        panel = _persistent_panel(rng, 20_000, 10, 3)
        errors.append(_run(panel, 3, K, 200 + seed)[0])
    bound = FixedWindowSynthesizer(20_000, 10, K, RHO, alphabet=3).error_bound()
    _check_flat_and_bounded(np.array(errors, dtype=float), bound)


def test_noise_variance_on_built_object() -> None:
    """At period k the synthetic counts are C + n_pad + N_Z(0, σ²) with σ² = (T−k+1)/(2ρ);
    at later periods the error keeps variance σ² (plus at most ½ from the rounding)."""
    n = 300
    first, last = [], []
    panel = _persistent_panel(np.random.default_rng(6), n, T, 2)
    for seed in range(200):
        synth = FixedWindowSynthesizer(n, T, K, RHO, rng=1000 + seed)
        code = np.zeros(n, dtype=np.int64)
        for t, column in enumerate(panel, start=1):
            synth.update(column)
            code = (code * 2 + column) % 8
            if t in (K, T):
                err = (synth.histogram() - _true_hist(code, 2, K)).ravel()
                (first if t == K else last).extend(err.tolist())
    sigma2 = synth.sigma2
    assert sigma2 == (T - K + 1) / (2 * RHO)
    # 1600 draws each: the sample variance's relative standard error is ~3.5%.
    assert abs(np.var(first) / sigma2 - 1) < 0.12
    assert abs(np.mean(first)) < 4
    assert abs(np.var(last) / sigma2 - 1) < 0.15
    assert abs(np.mean(last)) < 4


def test_history_is_consistent_with_histogram_and_columns() -> None:
    rng = np.random.default_rng(7)
    for q, k in ((2, 3), (3, 2), (2, 1), (2, 6)):
        panel = _persistent_panel(rng, 2000, 6, q)
        synth = FixedWindowSynthesizer(2000, 6, k, 0.5, alphabet=q, rng=8, keep_history=True)
        outputs = [synth.update(c) for c in panel]
        assert outputs[: k - 1] == [None] * (k - 1)
        assert outputs[k - 1].shape == (synth.n_synthetic, k)
        hist = synth.history()
        assert hist.shape == (synth.n_synthetic, 6)
        assert np.array_equal(hist[:, :k], outputs[k - 1])
        for j, out in enumerate(outputs[k:]):
            assert np.array_equal(hist[:, k + j], out)
        codes = np.zeros(synth.n_synthetic, dtype=np.int64)
        for j in range(6 - k, 6):
            codes = codes * q + hist[:, j]
        assert np.array_equal(_true_hist(codes, q, k), synth.histogram(debias=False))


def test_query_marginals_wildcards_and_debias() -> None:
    panel = _persistent_panel(np.random.default_rng(9), 3000, 5, 2)
    synth = FixedWindowSynthesizer(3000, 5, 3, 1.0, rng=3)
    synth.update_many(panel)
    h = synth.histogram(debias=False)
    pad = synth.n_pad
    assert synth.query((1, 0, 1), debias=False) == h[1, 0, 1]
    assert synth.query((1, 0, 1)) == h[1, 0, 1] - pad
    assert synth.query((0, 1)) == h[:, 0, 1].sum() - 2 * pad
    assert synth.query((1,)) == h[:, :, 1].sum() - 4 * pad
    assert synth.query((1, None, 1)) == h[1, :, 1].sum() - 2 * pad
    assert synth.query((None, None, None), debias=False) == synth.n_synthetic
    assert synth.query((None, None, None)) == 3000 + (synth.n_synthetic - 3000 - 8 * pad)
    assert synth.query((1,), proportion=True) == synth.query((1,)) / 3000
    assert synth.query((1,), debias=False, proportion=True) == h[:, :, 1].sum() / (
        synth.n_synthetic
    )
    truth = int((panel[-1] == 1).sum())
    assert abs(synth.query((1,)) - truth) < 4 * synth.error_bound()
    for bad in ((2,), (0, 0, 0, 0), (), "01", (0, 1.5), (True,)):
        with pytest.raises(ParameterError):
            synth.query(bad)


def test_bad_input_refused_with_state_unchanged() -> None:
    synth = FixedWindowSynthesizer(10, 4, 2, 1.0, rng=1)
    synth.update(np.zeros(10, dtype=int))
    before = synth.to_bytes()
    bad_columns = [
        np.zeros(9),
        np.array([0, 1, 0, 1, np.nan, 0, 0, 0, 0, 0]),
        np.array([0, 1, 0, 2, 0, 0, 0, 0, 0, 0]),
        np.array([0, 1, 0, -1, 0, 0, 0, 0, 0, 0]),
        np.array([0, 0.5, 0, 0, 0, 0, 0, 0, 0, 0]),
        np.array(["a"] * 10),
        np.zeros((2, 10)),
    ]
    for col in bad_columns:
        with pytest.raises(InputError):
            synth.update(col)
        assert synth.to_bytes() == before
    with pytest.raises(InputError, match="row 4"):
        synth.update(bad_columns[1])
    with pytest.raises(InputError, match="column 1"):
        synth.update_many([np.zeros(10), bad_columns[2]])
    assert synth.to_bytes() == before
    with pytest.raises(InputError, match="horizon"):
        synth.update_many(np.zeros((4, 10)))
    assert synth.to_bytes() == before
    synth.update_many(np.ones((3, 10)))
    with pytest.raises(InputError, match="past the horizon"):
        synth.update(np.zeros(10))
    fresh = FixedWindowSynthesizer(10, 4, 2, 1.0)
    with pytest.raises(InputError, match="no synthetic data yet"):
        fresh.query((1,))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n": 0},
        {"horizon": 0},
        {"window": 5},
        {"window": 0},
        {"rho": 0},
        {"rho": float("nan")},
        {"beta": 1.0},
        {"beta": 0},
        {"alphabet": 1},
        {"alphabet": 2, "window": 4, "max_synthetic": 100},  # padding needs > 100 people
        {"rho": 1e-12},  # noise variance past the sampler's range
        {"keep_history": 1},
    ],
)
def test_bad_parameters_refused(kwargs: dict) -> None:
    args = {"n": 10, "horizon": 4, "window": 2, "rho": 1.0}
    args.update(kwargs)
    with pytest.raises(ParameterError):
        FixedWindowSynthesizer(
            args.pop("n"), args.pop("horizon"), args.pop("window"), args.pop("rho"), **args
        )


def test_bytes_pickle_snapshot_and_memory_bounded_in_t() -> None:
    panel = _persistent_panel(np.random.default_rng(10), 500, 12, 2)
    synth = FixedWindowSynthesizer(500, 12, 3, 0.5, rng=2)
    synth.update_many(panel[:5])
    blob = synth.to_bytes()
    loaded = FixedWindowSynthesizer.from_bytes(blob, rng=4)
    assert loaded == synth and loaded.lineage == synth.lineage
    assert pickle.loads(pickle.dumps(synth)) == synth
    assert loaded.update(panel[5]).shape == (synth.n_synthetic,)
    snap = synth.snapshot()
    with pytest.raises(ReleasedError):
        snap.update(panel[5])
    assert snap.query((1, 1)) == synth.query((1, 1))
    with pytest.raises(SerializationError):
        FixedWindowSynthesizer.from_bytes(blob[:-2])
    with pytest.raises(SerializationError):
        FixedWindowSynthesizer.from_bytes(blob[:40] + bytes([blob[40] ^ 1]) + blob[41:])
    # nbytes does not grow with T (no history kept), and is the same for T = 12 and 1200.
    long = FixedWindowSynthesizer(500, 1200, 3, 0.5, rng=2)
    sizes = []
    for t, col in enumerate(np.concatenate([panel, panel]), start=1):
        long.update(col)
        if t >= 3:
            sizes.append(long.nbytes)
    assert max(sizes) - min(sizes) <= 8 * 8  # only n* may move, by the noise
    assert long.nbytes <= 500 + 2 * long.n_synthetic + 8 * 8 + 64


def test_update_many_equals_updates_and_seeds_reproduce() -> None:
    panel = _persistent_panel(np.random.default_rng(11), 400, 6, 2)
    a = FixedWindowSynthesizer(400, 6, 2, 1.0, rng=5)
    b = FixedWindowSynthesizer(400, 6, 2, 1.0, rng=5)
    outs_a = a.update_many(panel)
    outs_b = [b.update(c) for c in panel]
    assert a == b
    for x, y in zip(outs_a[1:], outs_b[1:], strict=True):
        assert np.array_equal(x, y)


def test_epsilon_delta_and_public_parameters() -> None:
    synth = FixedWindowSynthesizer(100, 12, 3, 0.005)
    assert synth.epsilon_delta(1e-6) == pytest.approx(0.005 + 2 * np.sqrt(0.005 * np.log(1e6)))
    assert (synth.n, synth.horizon, synth.window, synth.rho, synth.alphabet) == (
        100,
        12,
        3,
        0.005,
        2,
    )
    assert synth.n_synthetic is None and synth.t == 0 and synth.repairs == 0
    assert synth.error_bound(0.5) < synth.error_bound()
    with pytest.raises(ParameterError):
        synth.history()


def test_assignment_counts_exact_and_uniform() -> None:
    src = as_source(12)
    groups = np.array([0, 0, 0, 0, 1, 1, 1, 2])
    targets = np.array([[1, 1, 2], [0, 2, 1], [0, 0, 1]])
    tally = np.zeros((8, 3))
    for _ in range(3000):
        values = assign_within_groups(groups, targets, src)
        for g in range(3):
            assert np.array_equal(np.bincount(values[groups == g], minlength=3), targets[g])
        tally[np.arange(8), values] += 1
    expected = targets[groups] / np.bincount(groups)[groups][:, None]
    assert np.abs(tally / 3000 - expected).max() < 0.04


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
        ("rho", 1e-320),
        ("rho", 1.5e308),
        ("beta", 1e-320),
        ("beta", 1.0),
        ("n", 2**40),
        ("window", 2**31),
        ("horizon", 2**31 + 1),
        ("keep_history", 1),
        ("frozen", "no"),
        ("t", 2**62),
    ],
)
def test_forged_header_refused_fast_naming_the_field(field: str, value: object) -> None:
    synth = FixedWindowSynthesizer(20, horizon=6, window=2, rho=1.0, rng=0)
    synth.update(np.ones(20, dtype=int))
    synth.update(np.zeros(20, dtype=int))
    blob = _forge(synth.to_bytes(), "FixedWindowSynthesizer", **{field: value})
    with cpu_limit(1.0, f"refusing a forged {field!r}"):
        with pytest.raises(SerializationError) as info:
            FixedWindowSynthesizer.from_bytes(blob)
    text = str(info.value)
    assert field in text or (field == "window" and "real" in text), text


def test_tiny_beta_and_huge_window_refused_at_construction() -> None:
    with pytest.raises(ParameterError, match="beta"):
        FixedWindowSynthesizer(10, 4, 2, 1.0, beta=1e-320)
    with cpu_limit(1.0, "refusing a window of 2**30 periods"):
        with pytest.raises(ParameterError, match="window"):
            FixedWindowSynthesizer(10, 2**31, 2**30, 1.0, alphabet=65536)


def test_newer_version_refused_and_state_trusted() -> None:
    from sketchsyn.io.serial import header_of

    synth = FixedWindowSynthesizer(10, 4, 2, 1.0, rng=0)
    assert header_of(synth.to_bytes()).state == "trusted"
    with pytest.raises(SerializationError, match="version 2"):
        FixedWindowSynthesizer.from_bytes(
            _forge(synth.to_bytes(), "FixedWindowSynthesizer", version=2)
        )
