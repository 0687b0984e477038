"""Domains: Morton encoding against a bit-by-bit reference, geometry, policies, errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sketchsyn import BitDomain, Box
from sketchsyn.domains import domain_from_dict
from sketchsyn.errors import InputError, ParameterError


def _reference_code(x, lower, upper, depth):
    """Morton code of one point with Python ints, one level (one bit) at a time."""
    d = len(x)
    bits = [sum(1 for lv in range(1, depth + 1) if (lv - 1) % d == i) for i in range(d)]
    q = [
        min(int((x[i] - lower[i]) / (upper[i] - lower[i]) * 2 ** bits[i]), 2 ** bits[i] - 1)
        for i in range(d)
    ]
    code, used = 0, [0] * d
    for lv in range(1, depth + 1):
        i = (lv - 1) % d
        used[i] += 1
        code = (code << 1) | ((q[i] >> (bits[i] - used[i])) & 1)
    return code


@pytest.mark.parametrize(
    "d, depth", [(1, 20), (2, 24), (2, 13), (3, 24), (3, 31), (5, 40), (2, 64)]
)
def test_morton_matches_reference(d, depth):
    rng = np.random.default_rng(d * 100 + depth)
    lower, upper = -rng.random(d) * 10, rng.random(d) * 10 + 0.5
    X = lower + rng.random((300, d)) * (upper - lower)
    X[0] = upper  # the upper bound joins the last cell
    X[1] = lower
    codes = Box(lower, upper).encode(X, depth)
    assert codes.dtype == np.uint64
    assert codes.tolist() == [_reference_code(x, lower, upper, depth) for x in X]


@settings(max_examples=50, deadline=None)
@given(
    pts=st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=1, max_size=20),
    depth=st.integers(1, 30),
)
def test_points_lie_in_their_cells_and_prefixes_nest(pts, depth):
    box = Box([0.0, 0.0], [1.0, 1.0])
    X = np.array(pts)
    codes = box.encode(X, depth)
    for level in range(depth + 1):
        prefix = codes >> np.uint64(depth - level)
        assert np.array_equal(prefix, box.encode(X, level))
        lo, hi = box.cell_bounds(level, prefix)
        assert ((X >= lo) & (X <= hi)).all()


def test_policies():
    X = np.array([[0.5, 0.5], [1.5, 0.2], [-0.1, 0.3]])
    with pytest.raises(InputError, match="row 1"):
        Box.unit(2).encode(X, 4)
    clip = Box.unit(2, out_of_bounds="clip").encode(X, 4)
    assert clip.tolist() == Box.unit(2).encode(np.clip(X, 0, 1), 4).tolist()
    codes, dropped = Box.unit(2, out_of_bounds="drop").encode(X, 4, return_dropped=True)
    assert dropped == 2 and codes.tolist() == Box.unit(2).encode(X[:1], 4).tolist()


@pytest.mark.parametrize(
    "X, match",
    [
        (np.array([[0.1, 0.2], [np.nan, 0.1]]), "row 1"),
        (np.array([[0.1, np.inf]]), "row 0"),
        (np.array([[0.1, 0.2, 0.3]]), "shape"),
        (np.array([["a", "b"]], dtype=object), "row 0"),
    ],
)
def test_bad_rows_name_the_row_and_leave_input_alone(X, match):
    copy = X.copy()
    with pytest.raises(InputError, match=match):
        Box.unit(2).encode(X, 8)
    assert X.dtype == object or np.array_equal(X, copy, equal_nan=True)


@pytest.mark.parametrize(
    "lower, upper, word",
    [([0, 0], [1, 0], "lower"), ([0, np.nan], [1, 1], "finite"), ([0, 0], [1], "same length")],
)
def test_bad_bounds(lower, upper, word):
    with pytest.raises(ParameterError, match=word):
        Box(lower, upper)
    with pytest.raises(ParameterError, match="out_of_bounds"):
        Box([0], [1], out_of_bounds="wrap")


def test_gamma_and_Gamma():
    box = Box.unit(2)
    assert [box.gamma(lv) for lv in range(5)] == [1.0, 1.0, 0.5, 0.5, 0.25]
    assert box.Gamma(4) == 16 * 0.25 and box.Gamma(-1) == box.Gamma(0) == 1.0
    bd = BitDomain(16)
    assert bd.gamma(3) == 0.125 and bd.Gamma(7) == 1.0


def test_sample_cells_uniform_inside():
    box = Box([0.0, 10.0], [4.0, 20.0])
    lv = np.full(40_000, 3)
    px = np.full(40_000, 5, dtype=np.uint64)
    pts = box.sample_cells(lv, px, rng=0)
    lo, hi = box.cell_bounds(3, [5])
    assert ((pts >= lo) & (pts <= hi)).all()
    # Each quarter of the cell along x gets a quarter of the points.
    q = np.floor((pts[:, 0] - lo[0, 0]) / (hi[0, 0] - lo[0, 0]) * 4).astype(int)
    counts = np.bincount(q, minlength=4)
    assert np.abs(counts - 10_000).max() < 400  # 4 standard deviations


def test_bit_domain_ipv4_and_round_trip():
    dom = BitDomain.ipv4()
    assert dom.encode(["10.0.0.1", "192.168.1.1"], 8).tolist() == [10, 192]
    with pytest.raises(InputError, match="row 1"):
        dom.encode(["10.0.0.1", "300.1.1.1"], 8)
    keys = dom.sample_cells(24, [(10 << 16)], rng=1)
    assert keys.dtype == np.int64 and (keys >> 8) == (10 << 16)
    with pytest.raises(InputError, match="row 0"):
        BitDomain(8).encode([256], 8)
    assert BitDomain(8, out_of_bounds="drop").encode([3, 256], 8, return_dropped=True)[1] == 1
    for dom in (Box([0, -1], [2, 1]), BitDomain(12)):
        assert domain_from_dict(dom.to_dict()) == dom
    with pytest.raises(ParameterError, match="bits"):
        BitDomain(0)
    assert BitDomain(8).volume_fraction(1, [0], 0, 63).tolist() == [0.5]
