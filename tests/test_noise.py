"""Exact noise samplers: goodness of fit against the exact pmf, moments, determinism, errors."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from sketchsyn.errors import ParameterError
from sketchsyn.privacy.noise import (
    discrete_gaussian,
    discrete_gaussian_pmf,
    discrete_gaussian_variance,
    discrete_laplace,
    discrete_laplace_pmf,
    discrete_laplace_variance,
    exact_rational,
)

N = 100_000


def _chi2_pvalue(draws: np.ndarray, pmf) -> float:
    """Chi-square p-value of integer draws against a pmf, tails pooled so every bin expects >= 5."""
    lo, hi = int(draws.min()), int(draws.max())
    support = np.arange(lo - 1, hi + 2)
    probs = pmf(support)
    # Pool the two tails into the end bins so that the probabilities sum to one.
    probs[0] += max(0.0, (1.0 - probs.sum()) / 2)
    probs[-1] = max(0.0, 1.0 - probs[:-1].sum())
    counts = np.bincount(draws - support[0], minlength=support.size)[: support.size]
    expected = probs * draws.size
    # Merge bins from the outside in until each expects at least 5.
    obs, exp = [], []
    acc_o = acc_e = 0.0
    for o, e in zip(counts, expected, strict=False):
        acc_o += o
        acc_e += e
        if acc_e >= 5:
            obs.append(acc_o)
            exp.append(acc_e)
            acc_o = acc_e = 0.0
    obs[-1] += acc_o
    exp[-1] += acc_e
    exp = np.array(exp) * (sum(obs) / sum(exp))
    return float(stats.chisquare(obs, exp).pvalue)


@pytest.mark.parametrize(
    "scale, seed", [(0.5, 1), (1, 2), (3, 3), (50, 4), (0.7, 9), (300, 10), (1000, 11)]
)
def test_discrete_laplace_fits_exact_pmf(scale, seed):
    z = discrete_laplace(scale, N, rng=seed)
    assert z.dtype == np.int64 and z.shape == (N,)
    assert _chi2_pvalue(z, lambda s: discrete_laplace_pmf(s, scale)) > 1e-4
    var = discrete_laplace_variance(scale)
    # Mean within 5 standard errors; variance within 5% (its relative sd here is < 1.5%).
    assert abs(z.mean()) < 5 * np.sqrt(var / N)
    assert abs(z.var() / var - 1) < 0.05


@pytest.mark.parametrize("sigma2, seed", [(0.5, 5), (4, 6), (100, 7), (2.3, 12), (12345.678, 13)])
def test_discrete_gaussian_fits_exact_pmf(sigma2, seed):
    z = discrete_gaussian(sigma2, N, rng=seed)
    assert z.dtype == np.int64
    assert _chi2_pvalue(z, lambda s: discrete_gaussian_pmf(s, sigma2)) > 1e-4
    var = discrete_gaussian_variance(sigma2)
    assert abs(z.mean()) < 5 * np.sqrt(var / N)
    assert abs(z.var() / var - 1) < 0.03


def test_wrong_scale_is_detected():
    """The goodness-of-fit check has power: draws at scale 1.1 do not fit the pmf of scale 1."""
    z = discrete_laplace(1.1, N, rng=8)
    assert _chi2_pvalue(z, lambda s: discrete_laplace_pmf(s, 1.0)) < 1e-6


def test_os_csprng_path():
    z = discrete_laplace(2.0, 20_000)  # rng=None: operating-system CSPRNG
    g = discrete_gaussian(9.0, 20_000)
    assert abs(z.var() / discrete_laplace_variance(2.0) - 1) < 0.1
    assert abs(g.var() / discrete_gaussian_variance(9.0) - 1) < 0.1
    assert not np.array_equal(z, discrete_laplace(2.0, 20_000))


def test_os_csprng_coins_are_eight_a_byte_fair_and_independent(monkeypatch):
    """The OS CSPRNG's coins (a private run's Laplace signs) take one byte for eight coins;
    they are fair, and their bits are not repeated or tied across a byte (adjacent coins agree
    half of the time); Laplace draws from it fit their pmf and their signs are independent."""
    from sketchsyn.privacy import rng

    read = []
    real = rng.os.urandom
    monkeypatch.setattr(rng.os, "urandom", lambda n: read.append(n) or real(n))
    c = rng.as_source(None).coins(80_001)
    assert read == [10_001] and c.dtype == np.uint8 and set(np.unique(c).tolist()) == {0, 1}
    assert abs(c.mean() - 0.5) < 5 * 0.5 / np.sqrt(c.size)
    assert abs((c[1:] == c[:-1]).mean() - 0.5) < 5 * 0.5 / np.sqrt(c.size)
    monkeypatch.setattr(rng.os, "urandom", real)
    z = discrete_laplace(2.0, N)
    assert _chi2_pvalue(z, lambda s: discrete_laplace_pmf(s, 2.0)) > 1e-4
    s = np.sign(z[z != 0])
    assert abs((s[1:] == s[:-1]).mean() - 0.5) < 5 * 0.5 / np.sqrt(s.size)


@pytest.mark.parametrize("scale, n", [(3, 500), (1000, 200)])
def test_private_draws_of_a_few_hundred_values_read_the_word_buffer(monkeypatch, scale, n):
    """A private draw of a few hundred values (the OS CSPRNG, the compiled extension) reads
    this thread's buffer of the CSPRNG's words, not ``os.urandom``; its values fit the exact
    pmf, and the test tells them from a draw at half the scale (a 2× under-noised path); a
    wide table's (scale 1000) magnitudes go beyond it and are finished in numpy from the
    loop's words, with the same law."""
    from sketchsyn import kernels
    from sketchsyn.kernels import oswords
    from sketchsyn.privacy import noise, rng

    if oswords.word_source() is None:
        pytest.skip(f"no compiled extension with an OS CSPRNG: {kernels.why()}")
    src = rng.as_source(None)
    frac = Fraction(scale)
    noise._laplace_core(frac, n, src)  # the tables built
    read = []
    real = rng.os.urandom
    monkeypatch.setattr(rng.os, "urandom", lambda k: read.append(k) or real(k))
    taken = oswords.words_taken()
    z = np.concatenate([noise._laplace_core(frac, n, src) for _ in range(N // n)])
    monkeypatch.setattr(rng.os, "urandom", real)
    assert oswords.words_taken() - taken >= z.size  # a word a magnitude, at least
    if scale == 3:  # a table of 32 magnitudes: no value goes beyond it often enough to read
        assert sum(read) < 4 * z.size / 100  # os.urandom: only a rare replay's further words
    assert _chi2_pvalue(z, lambda s: discrete_laplace_pmf(s, scale)) > 1e-4
    assert _chi2_pvalue(z, lambda s: discrete_laplace_pmf(s, scale / 2)) < 1e-6
    s = np.sign(z[z != 0])  # the signs are fair and independent
    assert abs((s > 0).mean() - 0.5) < 5 * 0.5 / np.sqrt(s.size)
    assert abs((s[1:] == s[:-1]).mean() - 0.5) < 5 * 0.5 / np.sqrt(s.size)


def test_seeded_draws_are_reproducible_and_shaped():
    a = discrete_laplace(3.0, (4, 5), rng=11)
    b = discrete_laplace(3.0, (4, 5), rng=11)
    assert a.shape == (4, 5) and np.array_equal(a, b)
    assert discrete_gaussian(2.0, 0, rng=1).shape == (0,)
    assert not np.array_equal(discrete_laplace(3.0, 50, rng=1), discrete_laplace(3.0, 50, rng=2))


@pytest.mark.parametrize(
    "bits", [np.random.PCG64, np.random.PCG64DXSM, np.random.SFC64, np.random.Philox,
             np.random.MT19937],
)  # fmt: skip
def test_64_bit_words_are_numpys_whatever_the_bit_generator(bits):
    """``uint64`` reads a 64-bit bit generator's raw outputs directly: the same words, in the
    same stream, as ``integers(0, 2**64)``, between other draws (MT19937 keeps ``integers``)."""
    from sketchsyn.privacy.rng import RandomSource

    src = RandomSource(np.random.Generator(bits(9)))
    ref = np.random.Generator(bits(9))
    for n in (0, 1, 5, 1000):
        got = [src.uint64(n), src.uint32(3), src.uint64(n), src.bits(5)]
        want = [
            ref.integers(0, 2**64, size=n, dtype=np.uint64),
            ref.integers(0, 2**32, size=3, dtype=np.uint32),
            ref.integers(0, 2**64, size=n, dtype=np.uint64),
            ref.integers(0, 256, size=5, dtype=np.uint8) & 1 == 1,
        ]
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and np.array_equal(g, w)


def test_spawned_streams_are_independent():
    from sketchsyn.privacy.rng import as_source

    s1, s2 = as_source(5).spawn(2)
    a = discrete_laplace(10.0, 20_000, rng=s1).astype(float)
    b = discrete_laplace(10.0, 20_000, rng=s2).astype(float)
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.03


def test_float_parameter_is_its_exact_rational():
    """A float is its exact rational, not rounded: it draws like that Fraction (and its 2**-20
    rounding, which once widened the noise, is a different parameter)."""
    for value in (0.1, 2.3, 12345.678):
        assert exact_rational(value, "scale", "t") == Fraction(value)
    assert np.array_equal(
        discrete_laplace(0.7, 1000, rng=3), discrete_laplace(Fraction(0.7), 1000, rng=3)
    )
    assert np.array_equal(
        discrete_gaussian(2.3, 1000, rng=3), discrete_gaussian(Fraction(2.3), 1000, rng=3)
    )
    assert np.array_equal(
        discrete_laplace(2.5, 1000, rng=3), discrete_laplace(Fraction(5, 2), 1000, rng=3)
    )


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "3", None, True])
def test_bad_parameters(bad):
    with pytest.raises(ParameterError, match="'scale'"):
        discrete_laplace(bad, 3, rng=0)
    with pytest.raises(ParameterError, match="'sigma2'"):
        discrete_gaussian(bad, 3, rng=0)


def test_bad_size():
    with pytest.raises(ParameterError, match="'size'"):
        discrete_laplace(1.0, -1, rng=0)
    with pytest.raises(ParameterError, match="'size'"):
        discrete_laplace(1.0, 2.5, rng=0)


@pytest.mark.parametrize("sigma2, n, seed", [(4, N, 14), (12345.678, 20_000, 15)])
def test_discrete_gaussian_with_one_step_table(monkeypatch, sigma2, n, seed):
    """With one table step per unit of γ the table factor is e^{-floor γ} and the CKS loop carries
    the whole fractional part e^{-δ}, δ < 1: its errors then show in the fit (small integer
    denominators for sigma2 = 4, denominators past 2**100 for the float 12345.678)."""
    import sketchsyn.privacy.noise as noise_mod

    monkeypatch.setattr(noise_mod, "_STEPS", 1)
    z = discrete_gaussian(sigma2, n, rng=seed)
    assert _chi2_pvalue(z, lambda s: discrete_gaussian_pmf(s, sigma2)) > 1e-4
    var = discrete_gaussian_variance(sigma2)
    assert abs(z.var() / var - 1) < 5 * math.sqrt(2 / n)


@pytest.mark.parametrize("tiny", [2**-20, 1e-9, 5e-324])
def test_tiny_parameters_give_zero_quickly(tiny):
    """Scales far below 1 put all but e^{-1/scale} of the mass at 0; the exact thresholds are
    then decided without evaluating e^{-x} to x/2 digits (which once took minutes)."""
    assert not discrete_laplace(tiny, 10_000, rng=1).any()
    assert not discrete_gaussian(tiny, 10_000, rng=1).any()


def test_table_size_is_the_least_power_of_two_covering_the_tail():
    """The closed form of the table size equals its definition: the least power of two m ≤ 1024
    with x·m ≥ 8 (else 1024), for x across the range, and at the exact boundaries x = 8/2^k."""
    from sketchsyn.privacy import noise

    def definition(x):
        m = 1
        while m < 1024 and x * m < 8:
            m *= 2
        return m

    rng = np.random.default_rng(5)
    xs = [Fraction(int(a), int(b)) for a, b in rng.integers(1, 10**9, (3000, 2))]
    xs += [Fraction(8, 2**k) for k in range(14)] + [
        Fraction(8, 2**k) * (1 + Fraction(1, 10**20)) for k in range(14)
    ]
    xs += [Fraction(1, 2**30), Fraction(2**10), Fraction(7), Fraction(9)]
    for x in xs:
        assert noise._table_size.__wrapped__(x) == definition(x), x


def test_cached_scales_keep_their_checks_and_types() -> None:
    """The exact scales are worked out once per parameter set (sketchsyn.privacy.memo), and the
    cache changes no answer: an unhashable scale is still refused by name, True is not 1, and a
    cached scale equals a fresh one."""
    from sketchsyn.privacy import accounting
    from sketchsyn.privacy.noise import exact_rational

    with pytest.raises(ParameterError, match="'scale'"):
        discrete_laplace(np.array(1.0), 3, rng=0)
    with pytest.raises(ParameterError, match="'scale'"):
        exact_rational(True, "scale", "f")
    assert exact_rational(1, "scale", "f") == 1
    with pytest.raises(ParameterError, match="'scale'"):
        exact_rational(True, "scale", "f")  # after 1 was cached
    fresh = accounting.laplace_scale.__wrapped__(3, 0.7, "X")
    assert accounting.laplace_scale(3, 0.7, "X") == accounting.laplace_scale(3, 0.7, "X") == fresh
    with pytest.raises(ParameterError, match="'epsilon' parameter of X"):
        accounting.laplace_scale(1, 1e-12, "X")


# ------------------------------------------------------------------ the pool of drawn-ahead noise
def test_a_pool_hands_out_each_drawn_value_once_in_order() -> None:
    """The values a pool hands out are its blocks' draws, in order, none twice."""
    from sketchsyn.privacy.noise import _laplace_core
    from sketchsyn.privacy.pool import LaplacePool
    from sketchsyn.privacy.rng import as_source

    pool = LaplacePool(3.0, block=50, rng=7)
    sizes = [0, 7, 43, 1, 120, 9, 50, 3]
    got = np.concatenate([pool.take(k) for k in sizes])
    # The same source's blocks: 50 (7 + 43), then 50 (1), 121 (120 after the 49 left), ...
    src = as_source(7)
    blocks, left = [], 0
    for k in sizes:
        if k > left:
            block = max(k - left, 50)
            blocks.append(_laplace_core(Fraction(3), block, src))
            left += block
        left -= k
    drawn = np.concatenate(blocks)
    assert pool.drawn == drawn.size
    assert np.array_equal(got, drawn[: got.size])


def test_a_pool_has_the_law_of_the_sampler() -> None:
    """Requests of mixed sizes from a pool: their values are Lap_Z(scale) (chi-square against
    the exact pmf), as the split decisions of StreamingPrivTree need."""
    from sketchsyn.privacy.pool import LaplacePool

    pool = LaplacePool(2.5, block=257, rng=3)
    sizes = np.random.default_rng(0).integers(0, 300, size=400)
    z = np.concatenate([pool.take(int(k)) for k in sizes])
    edges = np.arange(-12, 13)
    observed = np.array(
        [np.count_nonzero(z == v) for v in edges] + [np.count_nonzero(np.abs(z) > 12)]
    )
    p = discrete_laplace_pmf(edges, 2.5)
    expected = np.append(p, 1.0 - p.sum()) * z.size
    assert stats.chisquare(observed, expected).pvalue > 1e-4


def test_a_pool_checks_its_arguments() -> None:
    from sketchsyn.privacy.pool import LaplacePool

    with pytest.raises(ParameterError):
        LaplacePool(0.0, block=8)
    with pytest.raises(ParameterError):
        LaplacePool(1.0, block=0)
    with pytest.raises(ParameterError):
        LaplacePool(1.0, block=8).take(-1)
