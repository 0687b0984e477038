"""Exact thresholds: binary digits of e^{-x}-based probabilities, tie resolution, table lookups."""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sketchsyn import noise
from sketchsyn.exactexp import (
    Real,
    ThresholdTable,
    exp_table,
    geometric_table,
    laplace_magnitude_table,
    resolve_ties,
)
from sketchsyn.rng import as_source


def _ref_exp_neg(x: Fraction, digits: int = 160) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = digits
        return (-(Decimal(x.numerator) / Decimal(x.denominator))).exp()


def _ref_floor(value: Decimal, bits: int) -> int:
    with localcontext() as ctx:
        ctx.prec = 200
        return int((value * (Decimal(2) ** bits)).to_integral_value(rounding="ROUND_FLOOR"))


def _ref(kind: str, x: Fraction, o: int = 1, m: int = 1) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = 160
        if kind == "exp":
            return _ref_exp_neg(x * o)
        if kind == "one_minus":
            return 1 - _ref_exp_neg(x * o)
        if kind == "trunc":
            return (1 - _ref_exp_neg(x * o)) / (1 - _ref_exp_neg(x * m))
        if kind == "laplace":
            return 1 - 2 * _ref_exp_neg(x * o) / (1 + _ref_exp_neg(x))
    raise AssertionError(kind)


rationals = st.builds(
    Fraction,
    st.integers(min_value=1, max_value=2**40),
    st.sampled_from([1, 3, 7, 1000, 2**20, 2**20 + 1, 2**30]),
).filter(lambda x: x <= 60)


@settings(max_examples=60, deadline=None)
@given(x=rationals, bits=st.sampled_from([32, 64, 150]))
def test_real_digits_match_a_high_precision_reference(x, bits):
    assert Real.exp_neg(x).floor(bits) == _ref_floor(_ref("exp", x), bits)
    assert Real.one_minus_exp_neg(x).floor(bits) == _ref_floor(_ref("one_minus", x), bits)
    assert Real.truncated_cdf(x, 3, 8).floor(bits) == _ref_floor(_ref("trunc", x, 3, 8), bits)


@pytest.mark.parametrize(
    "x",
    [Fraction(2), Fraction(1, 3), Fraction(1, 1000), Fraction(2**20, 734003), Fraction(1, 2**20)],
)
def test_tables_match_the_reference_floors(x):
    m = 64
    untrunc = geometric_table(x, m, False)._thresholds
    trunc = geometric_table(x, m, True)._thresholds
    lap = laplace_magnitude_table(x, m)._thresholds
    for o in range(1, m + 1):
        assert int(untrunc[o - 1]) == _ref_floor(_ref("one_minus", x, o), 32)
        assert int(lap[o - 1]) == _ref_floor(_ref("laplace", x, o), 32)
        if o < m:
            assert int(trunc[o - 1]) == _ref_floor(_ref("trunc", x, o, m), 32)


def test_exp_table_matches_the_reference():
    t = exp_table(256, 23)
    assert t.size == 24 * 256 and int(t[0]) == 2**32
    for i in list(range(1, 300)) + list(range(5800, 24 * 256)):
        assert int(t[i]) == _ref_floor(_ref("exp", Fraction(i, 256)), 32), i
    assert int(t[23 * 256]) == 0  # e^{-23} < 2**-32: the whole last row is zero


def _tie_fraction(real: Real) -> float:
    """frac(2**32·c): P(U < c | U's first word equals floor(2**32·c))."""
    return (real.floor(96) - (real.floor(32) << 64)) / 2**64


def test_resolve_ties_has_the_conditional_law():
    # Given the first word equals floor(2**32 c), c ≤ U has probability 1 − frac(2**32 c).
    real = Real.exp_neg(Fraction(1, 3))
    f = _tie_fraction(real)
    assert 0.2 < f < 0.8  # a point where a wrong answer shows
    src = as_source(11)
    trials = 20_000
    counts = np.array([resolve_ties([real], src) for _ in range(trials)])
    assert set(np.unique(counts)) <= {0, 1}
    sd = math.sqrt(f * (1 - f) / trials)
    assert abs(counts.mean() - (1 - f)) < 5 * sd


def test_table_ties_are_resolved_with_the_right_law():
    x = Fraction(1, 3)
    table = geometric_table(x, 16, False)
    v = 4  # force every first word onto T_4 = floor(2**32 (1 − e^{-4/3}))
    t4 = table._thresholds[v - 1]
    words = np.full(20_000, t4, dtype=np.uint32)
    out = table.sample(words, as_source(12))
    # Outcome v − 1 when U < c_4, v otherwise.
    assert set(np.unique(out)) <= {v - 1, v}
    f = _tie_fraction(Real.one_minus_exp_neg(x * v))
    sd = math.sqrt(f * (1 - f) / words.size)
    assert abs((out == v - 1).mean() - f) < 5 * sd + 1e-12


def test_table_lookup_equals_binary_search_away_from_ties():
    table = geometric_table(Fraction(1, 1000), 1024, True)
    words = as_source(13).uint32(200_000)
    out = table.sample(words.copy(), as_source(14))
    ref = np.searchsorted(table._thresholds, words, side="left")
    assert np.array_equal(out, ref)


def test_threshold_table_refuses_unsorted_thresholds():
    with pytest.raises(ValueError):
        ThresholdTable(np.array([3, 2], dtype=np.uint32), lambda v: Real.exp_neg(Fraction(v)))


@pytest.mark.parametrize("vectorised", [True, False])
def test_gaussian_delta_bernoulli_is_exact(vectorised):
    # With steps = 1 the first factor is certain and the loop is Bernoulli(e^{-r/den}).
    r, den, trials = 9, 10, 40_000
    src = as_source(15)
    if vectorised:
        acc = noise._bernoulli_exp_delta_vec(np.full(trials, r, dtype=np.int64), den, src, steps=1)
    else:
        acc = np.array([noise._bernoulli_exp_delta(r, den, src, steps=1) for _ in range(trials)])
    p = math.exp(-r / den)
    assert abs(acc.mean() - p) < 5 * math.sqrt(p * (1 - p) / trials)


def test_wide_geometric_digits_and_tail():
    """Y with P(Y ≥ y) = e^{-x y}, x = 2**-20: drawn as base-1024 digits (two truncated digit
    tables and a last untruncated one). Check the tail at several points and the low digit."""
    x = Fraction(1, 2**20)
    y = noise._geometric(x, 200_000, as_source(16))
    for q in (0.25, 1.0, 3.0):
        p = math.exp(-q)
        emp = (y >= int(q * 2**20)).mean()
        assert abs(emp - p) < 5 * math.sqrt(p * (1 - p) / y.size), q
    # The lowest base-1024 digit is nearly uniform (exactly: ∝ e^{-x r}, r < 1024).
    counts = np.bincount(y % 1024, minlength=1024).reshape(16, 64).sum(axis=1)
    expected = y.size / 16
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 50  # 15 degrees of freedom: P(chi2 > 50) ≈ 1e-5
