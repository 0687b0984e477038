"""Domains: Morton encoding against a bit-by-bit reference, geometry, policies, errors."""

from __future__ import annotations

import ipaddress
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from sketchsyn import BitDomain, Box
from sketchsyn.domains import Domain, domain_from_dict
from sketchsyn.errors import InputError, ParameterError


# ------------------------------------------------------------------------------ reference
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
    "d, depth",
    [(1, 1), (1, 20), (1, 53), (1, 60), (1, 64), (2, 1), (2, 5), (2, 13), (2, 18), (2, 24)]
    + [(2, 34), (2, 64), (3, 2), (3, 6), (3, 9), (3, 15), (3, 24), (3, 27), (3, 31), (3, 49)]
    + [(3, 63), (3, 64), (5, 3), (5, 40), (5, 64)],
)
def test_morton_matches_bit_by_bit_reference(d, depth):
    rng = np.random.default_rng(d * 100 + depth)
    lower, upper = -rng.random(d) * 10, rng.random(d) * 10 + 0.5
    X = lower + rng.random((300, d)) * (upper - lower)
    X[0] = upper  # the upper bound joins the last cell
    X[1] = lower
    X[2, 0] = np.nextafter(upper[0], -np.inf)
    codes = Box(lower, upper).encode(X, depth)
    assert codes.dtype == np.uint64 and codes.shape == (300,)
    assert codes.tolist() == [_reference_code(x, lower, upper, depth) for x in X]


def test_bounds_go_to_first_and_last_cells():
    box = Box([-2.0, 3.0], [5.0, 4.0])
    codes = box.encode([[-2.0, 3.0], [5.0, 4.0], [5.0, 3.0]], 24)
    assert codes.tolist() == [0, 2**24 - 1, int("10" * 12, 2)]
    line = Box(0.0, 1.0)
    assert line.encode([1.0, 0.0], 64).tolist() == [2**64 - 1, 0]
    assert line.encode([np.nextafter(1.0, 0)], 64).tolist() == [2**64 - 2**11]
    assert line.encode_one(0.5, 1) == 1 and line.encode_one([0.25], 2) == 1


# ------------------------------------------------------------------------------ round trip
finite01 = st.floats(0, 1, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(
    pts=st.lists(st.tuples(finite01, finite01, finite01), min_size=1, max_size=20),
    d=st.integers(1, 3),
    depth=st.integers(1, 64),
)
def test_unit_box_points_lie_in_their_cells_and_prefixes_nest(pts, d, depth):
    box = Box.unit(d)
    X = np.array(pts)[:, :d]
    codes = box.encode(X, depth)
    for level in range(depth + 1):
        prefix = codes >> np.uint64(depth - level)
        if level:
            assert np.array_equal(prefix, box.encode(X, level))
        lo, hi = box.cell_bounds(level, prefix)
        assert ((X >= lo) & (X <= hi)).all()  # exact on the unit box
        if -(-level // d) <= 52:  # finer cells are below float64 resolution near 1
            inner = (X >= lo) & ((X < hi) | (hi == 1.0))  # half-open except at the upper bound
            assert inner.all()
    centres = box.decode(codes, depth)
    lo, hi = box.cell_bounds(depth, codes)
    assert ((centres >= lo) & (centres <= hi)).all()
    if -(-depth // d) <= 52:
        assert ((centres > lo) & (centres < hi)).all()


@settings(max_examples=40, deadline=None)
@given(
    data=st.data(),
    lower=st.tuples(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6)),
    width=st.tuples(st.floats(1e-3, 1e6), st.floats(1e-3, 1e6)),
    depth=st.integers(1, 40),
)
def test_general_box_cells_contain_points_up_to_rounding(data, lower, width, depth):
    lower = np.array(lower)
    upper = lower + np.array(width)
    box = Box(lower, upper)
    u = np.array(data.draw(st.lists(st.tuples(finite01, finite01), min_size=1, max_size=10)))
    X = np.clip(lower + u * (upper - lower), lower, upper)
    codes = box.encode(X, depth)
    tol = 4 * np.finfo(float).eps * (np.abs(lower) + np.abs(upper))
    for level in range(depth + 1):
        lo, hi = box.cell_bounds(level, codes >> np.uint64(depth - level))
        assert ((X >= lo - tol) & (X <= hi + tol)).all()
        assert ((lo >= lower) & (hi <= upper) & (lo < hi)).all()


def test_cells_of_mixed_levels_tile_like_their_prefixes():
    box = Box([0.0, -4.0, 10.0], [8.0, 4.0, 11.0])
    levels = np.array([0, 1, 2, 3, 5, 7, 64])
    prefixes = np.array([0, 1, 2, 5, 17, 100, 2**64 - 1], dtype=np.uint64)
    lo, hi = box.cell_bounds(levels, prefixes)
    for i, (lv, px) in enumerate(zip(levels, prefixes, strict=True)):
        one_lo, one_hi = box.cell_bounds(int(lv), [int(px)])
        assert np.array_equal(lo[i], one_lo[0]) and np.array_equal(hi[i], one_hi[0])
        # The cell's centre encodes back to the prefix.
        if lv:
            assert box.encode_one((one_lo[0] + one_hi[0]) / 2, int(lv)) == int(px)
    assert lo[0].tolist() == [0.0, -4.0, 10.0] and hi[0].tolist() == [8.0, 4.0, 11.0]
    assert lo[3].tolist() == [4.0, -4.0, 10.5] and hi[3].tolist() == [8.0, 0.0, 11.0]
    assert np.allclose(hi[-1] - lo[-1], [8 * 2.0**-22, 8 * 2.0**-21, 2.0**-21])


# ------------------------------------------------------------------------------ policies
def test_policies_raise_clip_drop():
    X = np.array([[0.5, 0.5], [1.5, 0.2], [-0.1, 0.3], [1.0, 0.0]])
    before = X.copy()
    with pytest.raises(InputError, match=r"row 1 = \[1\.5, 0\.2\].*outside"):
        Box.unit(2).encode(X, 4)
    clip = Box.unit(2, out_of_bounds="clip").encode(X, 4)
    assert clip.tolist() == Box.unit(2).encode(np.clip(X, 0, 1), 4).tolist()
    drop = Box.unit(2, out_of_bounds="drop")
    codes, dropped = drop.encode(X, 4, return_dropped=True)
    assert dropped == 2 and codes.tolist() == Box.unit(2).encode(X[[0, 3]], 4).tolist()
    assert drop.encode(X, 4).tolist() == codes.tolist()
    assert Box.unit(2).encode(X[:1], 4, return_dropped=True)[1] == 0
    assert drop.encode_one([2.0, 0.0], 4) is None
    assert np.array_equal(X, before)  # never written, under any policy
    # Above the upper bound although x − lower rounds onto the span: still outside.
    box = Box([-(2.0**53)], [0.5])
    assert 0.75 - box.lower[0] == box.upper[0] - box.lower[0]
    with pytest.raises(InputError, match=r"row 1 = \[0\.75\]"):
        box.encode([[0.5], [0.75]], 8)
    assert box.encode([[0.5]], 8).tolist() == [255]


def test_nan_is_refused_under_every_policy():
    for policy in ("raise", "clip", "drop"):
        with pytest.raises(InputError, match="row 2"):
            Box.unit(2, out_of_bounds=policy).encode([[0, 0], [5, 5], [np.nan, 0]], 4)


@pytest.mark.parametrize(
    "X, match",
    [
        (np.array([[0.1, 0.2], [np.nan, 0.1]]), r"row 1 = \[nan, 0\.1\]"),
        (np.array([[0.1, 0.2], [0.1, 0.2], [0.1, -np.inf]]), r"row 2 = \[0\.1, -inf\]"),
        (np.array([[0.1, 0.2, 0.3]]), r"row 0 .*3 values"),
        (np.array([0.1, 0.2]), "encode_one"),
        (np.array([[["a"]]]), "row 0"),
        (np.array([[0.1, 0.2], ["a", "b"]], dtype=object), r"row 1 = \['a', 'b'\]"),
        (np.array([["0.1", "x"]]), "row 0"),
        ([[0.1, 0.2], [0.3]], r"row 1 = \[0\.3\] has 1 values"),
        ([[0.1, 0.2], [0.3, None]], "row 1"),
        (np.array([[0.1, 1j]]), "row 0"),
        ([[0.1, 0.2], [10**400, 0.0]], "row 1"),
    ],
)
def test_bad_rows_name_the_row_and_leave_the_input_alone(X, match):
    copy = X.copy() if isinstance(X, np.ndarray) else json.dumps(X, default=str)
    with pytest.raises(InputError, match=match):
        Box.unit(2).encode(X, 8)
    if isinstance(X, np.ndarray):
        assert X.dtype == copy.dtype and (X.dtype.kind in "OUc" or np.array_equal(X, copy, True))
    else:
        assert json.dumps(X, default=str) == copy


def test_numeric_text_and_integer_arrays_are_read():
    box = Box([0, 0], [8, 8])
    assert box.encode([["1.0", "7"]], 6).tolist() == box.encode([[1, 7]], 6).tolist()
    assert box.encode(np.array([[1, 7]], dtype=np.int16), 6).tolist() == [0b010111]
    assert box.encode(np.zeros((0, 2)), 6).tolist() == []
    assert box.encode([], 6).tolist() == []


def test_depth_is_checked():
    for bad in (0, 65, 2.5, True):
        with pytest.raises(ParameterError, match="depth"):
            Box.unit(2).encode([[0.1, 0.1]], bad)
    with pytest.raises(ParameterError, match="depth"):
        BitDomain(8).encode([1], 9)


# ------------------------------------------------------------------------------ metric
def test_gamma_and_Gamma():
    box = Box([0, 0], [10, 1])  # the metric lives on the unit box: bounds do not matter
    assert [box.gamma(lv) for lv in range(-1, 6)] == [1.0, 1.0, 1.0, 0.5, 0.5, 0.25, 0.25]
    assert box.Gamma(4) == 16 * 0.25 and box.Gamma(-1) == box.Gamma(0) == 1.0
    assert box.Gamma(5) == 32 * 0.25
    cube = Box.unit(3)
    assert [cube.gamma(lv) for lv in (2, 3, 5, 6, 64)] == [1.0, 0.5, 0.5, 0.25, 2.0**-21]
    assert Box.unit(1).gamma(64) == 2.0**-64 and Box.unit(1).Gamma(30) == 1.0
    bd = BitDomain(16)
    assert bd.gamma(3) == 0.125 and bd.gamma(-1) == bd.gamma(0) == 1.0
    assert bd.Gamma(7) == 1.0 and bd.Gamma(-1) == 1.0
    for bad in (-2, 65):
        with pytest.raises(ParameterError, match="level"):
            box.gamma(bad)
    with pytest.raises(ParameterError, match="level"):
        bd.gamma(17)


def test_normalize():
    box = Box([-1.0, 10.0], [1.0, 20.0])
    X = np.array([[-1.0, 10.0], [0.0, 15.0], [1.0, 20.0], [3.0, 20.0]])
    assert box.normalize(X).tolist() == [[0.0, 0.0], [0.5, 0.5], [1.0, 1.0], [2.0, 1.0]]
    assert Box(0, 4).normalize([1.0, 2.0]).tolist() == [[0.25], [0.5]]
    with pytest.raises(InputError, match="row 1"):
        box.normalize([[0, 15], [np.nan, 12]])
    bd = BitDomain(8)
    assert bd.normalize([0, 128, 255]).ravel().tolist() == [0.0, 0.5, 255 / 256]
    assert BitDomain.ipv4().normalize(["128.0.0.0"]).tolist() == [[0.5]]


# ------------------------------------------------------------------------------ sampling
def test_sample_cells_points_are_inside_and_uniform():
    box = Box([0.0, 10.0], [4.0, 20.0])
    n = 20_000
    pts = box.sample_cells(np.full(n, 5), np.full(n, 13, dtype=np.uint64), rng=0)
    lo, hi = box.cell_bounds(5, [13])
    assert pts.shape == (n, 2) and ((pts >= lo) & (pts <= hi)).all()
    assert (box.encode(pts, 5) == 13).all()
    # 10 × 10 grid inside the cell: chi-square with 99 degrees of freedom.
    cell = np.floor((pts - lo) / (hi - lo) * 10).astype(int)
    counts = np.bincount(cell[:, 0] * 10 + cell[:, 1], minlength=100)
    assert stats.chisquare(counts).pvalue > 1e-4
    # Mixed levels, scalars, 1-D boxes.
    lv = np.array([0, 1, 2, 7])
    px = np.array([0, 1, 3, 100], dtype=np.uint64)
    many = box.sample_cells(np.repeat(lv, 50), np.repeat(px, 50), rng=1)
    for j in range(4):
        lo_j, hi_j = box.cell_bounds(int(lv[j]), [int(px[j])])
        assert ((many[50 * j : 50 * j + 50] >= lo_j) & (many[50 * j : 50 * j + 50] <= hi_j)).all()
    assert box.sample_cells(3, 2, rng=2).shape == (1, 2)
    assert Box(0, 1).sample_cells([1, 1], [0, 1], rng=3).shape == (2, 1)
    again = box.sample_cells(np.full(n, 5), np.full(n, 13, dtype=np.uint64), rng=0)
    assert np.array_equal(pts, again)


def test_bitdomain_sample_cells_uniform_keys():
    dom = BitDomain(12)
    keys = dom.sample_cells(6, np.full(12_800, 37, dtype=np.uint64), rng=4)
    assert keys.dtype == np.int64 and keys.shape == (12_800,)
    assert ((keys >> 6) == 37).all()
    counts = np.bincount(keys - (37 << 6), minlength=64)
    assert counts.size == 64 and stats.chisquare(counts).pvalue > 1e-4
    full = BitDomain(64).sample_cells([0, 64, 63], np.array([0, 2**64 - 1, 5], np.uint64), rng=5)
    assert full.dtype == np.uint64 and full[1] == 2**64 - 1 and full[2] >> np.uint64(1) == 5


@pytest.mark.parametrize("dom", [Box.unit(2), BitDomain(8)])
def test_cell_arguments_are_checked(dom):
    with pytest.raises(ParameterError, match=r"prefix 4 at level 2 \(cell 1\)"):
        dom.cell_bounds([1, 2], [1, 4])
    with pytest.raises(ParameterError, match="levels"):
        dom.cell_bounds(-1, 0)
    with pytest.raises(ParameterError, match="levels"):
        dom.sample_cells(dom.max_depth + 1, 0, rng=0)
    with pytest.raises(ParameterError, match="prefixes"):
        dom.cell_bounds(3, -1)
    with pytest.raises(ParameterError, match="broadcastable"):
        dom.cell_bounds([1, 2, 3], [0, 1])
    with pytest.raises(ParameterError, match="levels"):
        dom.cell_bounds("a", 0)


# ------------------------------------------------------------------------------ counting
def test_volume_fraction():
    box = Box([0.0, 0.0], [2.0, 4.0])
    frac = box.volume_fraction([1, 1, 2], [0, 1, 3], [0.5, 1.0], [1.5, np.inf])
    assert frac.tolist() == [0.5 * 0.75, 0.5 * 0.75, 0.5 * 1.0]
    assert box.volume_fraction(0, 0, -np.inf, np.inf).tolist() == [1.0]
    assert box.volume_fraction(0, 0, [1.0, 1.0], [0.0, 2.0]).tolist() == [0.0]
    with pytest.raises(ParameterError, match="lower"):
        box.volume_fraction(0, 0, [np.nan, 0], [1, 1])
    bd = BitDomain(8)
    assert bd.volume_fraction(1, [0], 0, 63).tolist() == [0.5]
    assert bd.volume_fraction([2, 8, 8], [1, 100, 101], 63.5, 100).tolist() == [
        (100 - 64 + 1) / 64,
        1.0,
        0.0,
    ]
    assert bd.volume_fraction(0, 0, -np.inf, np.inf).tolist() == [1.0]
    assert bd.volume_fraction(0, 0, 300, 400).tolist() == [0.0]
    big = BitDomain(64)  # exact integer arithmetic: one key out of 2**64
    assert big.volume_fraction(0, 0, 2**64 - 1, 2**64 - 1).tolist() == [2.0**-64]
    assert big.volume_fraction(64, 2**64 - 1, 2**64 - 1, 2**64 - 1).tolist() == [1.0]


# ------------------------------------------------------------------------------ BitDomain
def test_bitdomain_encode_dtypes_and_policies():
    dom = BitDomain(16)
    keys = np.random.default_rng(0).integers(0, 2**16, 500)
    for X in (keys, keys.astype(np.uint16), keys.astype(float), keys.tolist(), keys[:, None]):
        assert dom.encode(X, 5).tolist() == (keys >> 11).tolist()
    with pytest.raises(InputError, match="row 1 = 65536"):
        dom.encode([3, 65536], 16)
    with pytest.raises(InputError, match="row 0 = -1"):
        dom.encode(np.array([-1, 3]), 16)
    with pytest.raises(InputError, match=r"row 1 = 2\.5"):
        dom.encode([1.0, 2.5], 16)
    with pytest.raises(InputError, match="row 1"):
        dom.encode(np.array([1, "x"], dtype=object), 16)
    with pytest.raises(InputError, match="bits=32"):
        dom.encode(["1.2.3.4"], 16)
    with pytest.raises(InputError, match="dtype bool"):
        dom.encode(np.array([True]), 16)
    with pytest.raises(InputError, match="shape"):
        dom.encode(np.zeros((2, 2), dtype=int), 16)
    clip = BitDomain(16, out_of_bounds="clip")
    assert clip.encode([-5, 70000, 9], 16).tolist() == [0, 65535, 9]
    codes, dropped = BitDomain(16, out_of_bounds="drop").encode(
        [-5, 70000, 9, 2**70], 16, return_dropped=True
    )
    assert codes.tolist() == [9] and dropped == 3
    full = BitDomain(64)
    big = np.array([0, 2**63, 2**64 - 1], dtype=np.uint64)
    assert full.encode(big, 64).tolist() == big.tolist()
    assert full.encode([2**64 - 1, 5], 1).tolist() == [1, 0]
    assert full.encode_one(2**64 - 1, 64) == 2**64 - 1
    lo, hi = full.cell_bounds(0, 0)
    assert lo.tolist() == [[0.0]] and hi.tolist() == [[2.0**64]]


def _random_address_like(rng):
    kind = rng.integers(0, 4)
    octets = [str(v) for v in rng.integers(0, 300, 4)]
    if kind == 0:
        return ".".join(str(v) for v in rng.integers(0, 256, 4))
    if kind == 1:  # leading zeros, extra or missing parts, junk characters
        octets[rng.integers(0, 4)] = "0" + octets[0]
    if kind == 2:
        octets = octets[: rng.integers(1, 6)] + ["1"] * int(rng.integers(0, 3))
    text = ".".join(octets)
    if kind == 3:
        pos = int(rng.integers(0, len(text) + 1))
        text = text[:pos] + rng.choice(list(" .-x/+٣\x00")) + text[pos:]
    return text


def test_ipv4_parsing_matches_ipaddress():
    rng = np.random.default_rng(11)
    texts = [_random_address_like(rng) for _ in range(1500)] + [
        "0.0.0.0",
        "255.255.255.255",
        "1.2.3.04",
        "1..2.3",
        "1.2.3.4.",
        "",
        "1.2.3.256",
        "1111.2.3.4",
        "1.2.3.4 ",
    ]
    dom = BitDomain.ipv4()
    n_valid = 0
    for text in texts:  # one at a time against the standard library
        try:
            want = int(ipaddress.IPv4Address(text))
        except ValueError:
            want = None
        try:
            got = int(dom.encode([text], 32)[0])
        except InputError as err:
            assert "row 0" in str(err)
            got = None
        assert got == want, text
        n_valid += want is not None
    assert n_valid > 400
    valid = [t for t in texts if t.count(".") == 3 and _ok(t)]
    batch = dom.encode(np.array(valid), 32)  # one vectorised call
    assert batch.tolist() == [int(ipaddress.IPv4Address(t)) for t in valid]
    as_bytes = np.array([t.encode() for t in valid])
    assert dom.encode(as_bytes, 8).tolist() == (batch >> np.uint64(24)).tolist()
    mixed = np.array(valid[:3] + [7], dtype=object)
    assert dom.encode(mixed, 32).tolist() == batch[:3].tolist() + [7]
    with pytest.raises(InputError, match=r"row 2 = '1\.2\.3\.04'"):
        dom.encode(["1.2.3.4", "5.6.7.8", "1.2.3.04"], 32)


def _ok(text):
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True


# ------------------------------------------------------------------------------ identity
def test_to_dict_round_trip_and_equality():
    domains = [
        Box([0, -1], [2, 1]),
        Box(0.1, 0.7, out_of_bounds="clip"),
        Box.unit(5, out_of_bounds="drop"),
        BitDomain(12),
        BitDomain.ipv4(out_of_bounds="drop"),
    ]
    for dom in domains:
        data = json.loads(json.dumps(dom.to_dict()))
        assert Domain.from_dict(data) == dom and domain_from_dict(data) == dom
        assert type(dom).from_dict(data) == dom and hash(Domain.from_dict(data)) == hash(dom)
        assert eval(repr(dom)) == dom  # noqa: S307 (repr is the constructor call)
    assert Box.unit(2) != Box.unit(2, out_of_bounds="clip") and Box.unit(1) != BitDomain(1)
    with pytest.raises(ParameterError, match="type"):
        Box.from_dict(BitDomain(8).to_dict())
    with pytest.raises(ParameterError, match="type"):
        Domain.from_dict({"type": "os.system"})
    with pytest.raises(ParameterError, match="keys"):
        Domain.from_dict({**BitDomain(8).to_dict(), "extra": 1})
    box = Box([0, 0], [1, 2])
    assert box.lower.tolist() == [0.0, 0.0] and box.upper.tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match="read-only"):
        box.lower[0] = 5.0
    with pytest.raises(AttributeError):
        box.lower = np.zeros(2)
    assert (box.d, box.max_depth, box.out_of_bounds) == (2, 64, "raise")
    assert (BitDomain(20).d, BitDomain(20).max_depth, BitDomain(20).upper.tolist()) == (
        1,
        20,
        [2.0**20 - 1],
    )


@pytest.mark.parametrize(
    "lower, upper, word",
    [
        ([0, 0], [1, 0], r"lower\[1\]=0\.0 >= upper\[1\]=0\.0"),
        ([0, 2], [1, 1], "lower"),
        ([0, np.nan], [1, 1], "finite"),
        ([0, 0], [1, np.inf], "finite"),
        ([0, 0], [1], "same length"),
        ([], [], "same length"),
        (["a"], [1], "finite numbers"),
        (-1e308, 1e308, "widths"),
    ],
)
def test_bad_bounds(lower, upper, word):
    with pytest.raises(ParameterError, match=word):
        Box(lower, upper)


def test_bad_parameters():
    with pytest.raises(ParameterError, match="out_of_bounds"):
        Box([0], [1], out_of_bounds="wrap")
    with pytest.raises(ParameterError, match="out_of_bounds"):
        BitDomain(8, out_of_bounds=None)
    for bits in (0, 65, 3.5, True, "8"):
        with pytest.raises(ParameterError, match="bits"):
            BitDomain(bits)
    with pytest.raises(ParameterError, match="'d'"):
        Box.unit(0)


def test_encode_speed_path_equals_the_general_path():
    """The magic-number path (d = 2, 3) and the per-bit loop (d = 3 at depth 64) agree."""
    rng = np.random.default_rng(3)
    X = rng.random((1000, 3))
    box = Box.unit(3)
    fast = box.encode(X, 63)  # magic numbers
    slow = box.encode(X, 64)  # 22 bits on axis 0: the general loop
    assert np.array_equal(slow >> np.uint64(1), fast)
    assert math.isclose(box.decode(fast, 63)[0, 0], X[0, 0], abs_tol=2.0**-20)
