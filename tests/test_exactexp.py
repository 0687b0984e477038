"""Exact thresholds: binary digits of e^{-x}-based probabilities, tie resolution, table lookups."""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sketchsyn.privacy import exactexp, noise
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


# ------------------------------------------------------------------ float-first table builders
_KINDS = ("geometric", "truncated", "laplace")


def _same_as_exact(x: Fraction, m: int) -> None:
    """The builders' thresholds (float-first) equal the integer-only reference, for all kinds."""
    for kind in _KINDS:
        fast = exactexp._fast_thresholds(kind, x, m)
        exact = exactexp._exact_thresholds(kind, x, m)
        assert fast.dtype == np.uint32 and exact.dtype == np.uint32
        assert np.array_equal(fast, exact), (kind, x, m)
    assert np.array_equal(
        geometric_table(x, m, False)._thresholds, exactexp._exact_thresholds("geometric", x, m)
    )
    assert np.array_equal(
        geometric_table(x, m, True)._thresholds, exactexp._exact_thresholds("truncated", x, m)
    )
    assert np.array_equal(
        laplace_magnitude_table(x, m)._thresholds, exactexp._exact_thresholds("laplace", x, m)
    )


_FIXED_XS = [
    Fraction(1, 2**30),
    Fraction(1, 2**20),
    Fraction(3, 2**25),
    Fraction(0.0123),
    Fraction(0.0123) / 4,
    1 / Fraction(2 * 7 / 0.37),
    Fraction(math.log(2)),
    Fraction(math.log(2)) / 2,
    2 * Fraction(math.log(2)),
    Fraction(math.nextafter(math.log(2), 1)),
    Fraction(1),
    Fraction(2),
    Fraction(3),
    Fraction(8),
    Fraction(20),
    Fraction(31),
    Fraction(33),
    Fraction(50),
    Fraction(700),
    Fraction(800),
    Fraction(10**9),
    Fraction(1, 3),
    Fraction(2**20, 734003),
    Fraction(10**40 + 1, 10**42 + 7),
    Fraction(3**100, 5**70 * 2**70),
    Fraction(1, 2**60),
    Fraction(7, 2**90),
    Fraction(2**2000 + 1, 2**2000),
]


@pytest.mark.parametrize("x", _FIXED_XS)
def test_fast_tables_equal_the_exact_construction(x):
    _same_as_exact(x, noise._table_size(x))


@pytest.mark.parametrize("m", [2**k for k in range(11)])
@pytest.mark.parametrize("x", [Fraction(1, 2**30), Fraction(0.0037), Fraction(0.71), Fraction(9)])
def test_fast_tables_equal_the_exact_construction_for_every_size(x, m):
    _same_as_exact(x, m)


@settings(max_examples=40, deadline=None)
@given(
    x=st.one_of(
        rationals,
        st.floats(min_value=1e-9, max_value=60.0).map(Fraction),
        st.floats(min_value=1e-4, max_value=4.0).map(lambda e: Fraction(e) / 4),
    )
)
def test_fast_tables_equal_the_exact_construction_hypothesis(x):
    _same_as_exact(x, noise._table_size(x))


def _c1(kind: str, x: Decimal, m: int) -> Decimal:
    one_minus = 1 - (-x).exp()
    if kind == "geometric":
        return one_minus
    if kind == "truncated":
        return one_minus / (1 - (-x * m).exp())
    return one_minus / (1 + (-x).exp())  # Laplace: 1 − 2e^{-x}/(1 + e^{-x})


def _straddling_pair(kind: str, n: int, m: int) -> tuple[Fraction, Fraction]:
    """Two rationals ``x_lo < x_hi`` 2·10**-70 apart (so one float64) around the ``x`` where
    ``2**32·c_1(x)`` is the integer ``n`` (``c_1`` increases with ``x``): the first entry of
    their tables is ``n − 1`` for ``x_lo`` and ``n`` for ``x_hi``."""
    with localcontext() as ctx:
        ctx.prec = 110
        target = Decimal(n) / Decimal(2**32)  # exact at this precision
        a, b = Decimal("1e-6"), Decimal(40)
        for _ in range(260):
            mid = (a + b) / 2
            if _c1(kind, mid, m) < target:
                a = mid
            else:
                b = mid
    eps = Fraction(1, 10**70)
    return Fraction(a) - eps, Fraction(b) + eps


# Integers near 2**32·r, r > 1/64 (the least c_1 of a truncated table of 64), for both the
# direct (c ≤ 1/2) and the complement (c > 1/2) forms.
_BOUNDARIES = [(kind, round(r * 2**32) + 7) for kind in _KINDS for r in (0.031, 0.3, 0.7, 0.98)]


def _pair_cases() -> list[tuple[str, Fraction, int]]:
    cases = []
    for kind, n in _BOUNDARIES:
        m = 64
        x_lo, x_hi = _straddling_pair(kind, n, m)
        if kind != "truncated":
            m = noise._table_size(x_lo)
        cases += [(kind, x_lo, m), (kind, x_hi, m)]
    return cases


_PAIRS = _pair_cases()


def test_straddling_pairs_are_what_they_claim():
    """Each pair is one float64 but its exact first thresholds are n − 1 and n."""
    for (kind, x_lo, m), (_, x_hi, _) in zip(_PAIRS[::2], _PAIRS[1::2], strict=True):
        assert float(x_lo) == float(x_hi)
        lo = int(exactexp._exact_thresholds(kind, x_lo, m)[0])
        hi = int(exactexp._exact_thresholds(kind, x_hi, m)[0])
        assert hi == lo + 1, (kind, x_lo)


@pytest.mark.parametrize("kind, x, m", _PAIRS)
def test_floors_at_a_hair_from_an_integer_go_to_the_integer_routines(kind, x, m, monkeypatch):
    """The floats cannot tell ``x_lo`` from ``x_hi``; the margin hands their first entry to the
    integer brackets, which get it right."""
    sent: list[int] = []
    inner = exactexp._bracket_floors

    def spy(kind, x, m, orders, power):
        sent.extend(orders)
        return inner(kind, x, m, orders, power)

    monkeypatch.setattr(exactexp, "_bracket_floors", spy)
    fast = exactexp._fast_thresholds(kind, x, m)
    assert 1 in sent
    assert np.array_equal(fast, exactexp._exact_thresholds(kind, x, m))


def test_without_the_margin_the_floats_misjudge_a_floor(monkeypatch):
    """With no margin every float floor is taken as is; a pair shares one float64 but not one
    floor, so at least one entry of each pair must come out wrong: the margin is necessary."""
    monkeypatch.setattr(exactexp, "_REL_MARGIN", 0.0)
    monkeypatch.setattr(exactexp, "_ABS_MARGIN", 0.0)
    for (kind, x_lo, m), (_, x_hi, _) in zip(_PAIRS[::2], _PAIRS[1::2], strict=True):
        wrong = [
            not np.array_equal(
                exactexp._fast_thresholds(kind, x, m), exactexp._exact_thresholds(kind, x, m)
            )
            for x in (x_lo, x_hi)
        ]
        assert any(wrong), (kind, x_lo)
