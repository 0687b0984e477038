"""Exact thresholds: binary digits of e^{-x}-based probabilities, tie resolution, table lookups."""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sketchsyn.privacy import noise
from sketchsyn.privacy.exactexp import (
    Real,
    ThresholdTable,
    exp_neg_bracket,
    exp_table,
    geometric_table,
    laplace_magnitude_table,
    resolve_ties,
)
from sketchsyn.privacy.rng import as_source


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


@pytest.mark.parametrize("r, den", [(9, 10), (3, 2**32), (2**100 + 7, 3 * 2**99 + 1), (1, 3)])
def test_gaussian_delta_bernoulli_is_exact(r, den):
    """With steps = 1 the first factor is certain and the loop is Bernoulli(e^{-r/den}); r/den
    has 32-bit digits that tie often for (3, 2**32) (first digit 0) and a 100-bit denominator."""
    trials = 40_000
    rests = [r, 0]
    which = np.zeros(trials, dtype=np.int64)
    acc = noise._bernoulli_exp_delta(which, rests, den, as_source(15), steps=1)
    p = math.exp(-r / den)
    assert abs(acc.mean() - p) < 5 * math.sqrt(p * (1 - p) / trials) + 1e-9
    # r = 0: δ = 0, always accepted.
    assert noise._bernoulli_exp_delta(np.ones(100, dtype=np.int64), rests, den, as_source(1)).all()


def test_ratio_bernoulli_ties_are_exact():
    """r/den = 1/3 · 2**-32 has first digit 0: a first word 0 is a tie, settled by the later
    digits, so given the tie the event is Bernoulli(r·2**32/den) = Bernoulli(1/3)."""
    den, rests, thresholds = 3 * 2**32, [1], np.array([0], dtype=np.int64)
    inner = as_source(22)

    class FirstWordZero:  # the first word drawn is 0 (a tie), the rest come from `inner`
        def __init__(self) -> None:
            self.first = True

        def uint32(self, n: int) -> np.ndarray:
            out = inner.uint32(n)
            if self.first:
                out[:] = 0
                self.first = False
            return out

    which, trials = np.zeros(1, dtype=np.int64), 30_000
    wins = sum(
        bool(noise._bernoulli_ratio(which, rests, thresholds, den, FirstWordZero())[0])
        for _ in range(trials)
    )
    assert abs(wins / trials - 1 / 3) < 5 * math.sqrt(2 / 9 / trials)
    # Without the tie, a word ≥ 1 is above r/den: never a success.
    assert not noise._bernoulli_ratio(
        np.zeros(5000, dtype=np.int64), rests, thresholds, den, as_source(3)
    ).any()


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


def test_bracket_of_a_huge_exponent_is_zero_one():
    """x ≥ bits: 2**bits·e^{-x} < 1, so [0, 1] brackets it and every floor is decided."""
    assert exp_neg_bracket(Fraction(10**9), 64) == (0, 1)
    assert exp_neg_bracket(Fraction(64), 64) == (0, 1)
    lo, hi = exp_neg_bracket(Fraction(63), 64)  # below the cut: the real bracket, still valid
    assert lo <= math.exp(-63) * 2**64 <= hi and hi - lo <= 4
    assert Real.exp_neg(Fraction(10**9)).floor(96) == 0
    assert Real.one_minus_exp_neg(Fraction(10**9)).floor(32) == 2**32 - 1
