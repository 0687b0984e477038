"""Tests for sketchsyn.synth.distribution.PrivateDistribution."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats

from sketchsyn.domains import BitDomain, Box
from sketchsyn.errors import ParameterError, SerializationError
from sketchsyn.io.serial import pack
from sketchsyn.synth.distribution import PrivateDistribution
from sketchsyn.synth.tree import consistent_levels, grow_partition


def _grown(seed: int, k: int = 4, depth: int = 7, scale: float = 6.0):
    """A PrivHP-like grown tree from random noisy levels (leaves of levels L…depth)."""
    rng = np.random.default_rng(seed)
    raw = [rng.integers(0, 50, 2**lv) + rng.normal(0, scale, 2**lv) for lv in range(depth + 1)]
    L = k.bit_length() - 1
    top = consistent_levels(raw[: L + 1])
    return grow_partition(top, lambda lv, p: raw[lv][p.astype(np.int64)], k, depth)


def _dist(seed: int = 0, domain=None, **kw) -> PrivateDistribution:
    tree = _grown(seed, **kw)
    levels, prefixes, counts = tree.leaves()
    return PrivateDistribution(
        Box.unit(2) if domain is None else domain,
        levels,
        prefixes,
        counts,
        epsilon=1.0,
        mechanism="PrivHP",
        params={"k": 4, "depth": 7},
    )


def _membership(points: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """(n_points, n_leaves) bool: point inside the half-open cell [lower, upper)."""
    p = points[:, None, :]
    return np.all((p >= lower[None]) & (p < upper[None]), axis=2)


# ---------------------------------------------------------------------------------- sampling
def test_sample_frequencies_match_masses():
    dist = _dist(3)
    lv = dist.leaves()
    assert np.isclose(lv.mass.sum(), 1.0)
    assert (lv.count == 0).any() and lv.level.min() < lv.level.max()  # mixed levels, empty cells
    n = 40_000
    pts = dist.sample(n, rng=11)
    assert pts.shape == (n, 2)
    inside = _membership(pts, lv.lower, lv.upper)
    assert (inside.sum(axis=1) == 1).all()  # every point lies in exactly one leaf
    observed = inside.sum(axis=0)
    assert observed[lv.count == 0].sum() == 0  # never in an empty leaf
    keep = lv.mass > 0
    expected = lv.mass[keep] * n
    _, p_value = stats.chisquare(observed[keep], expected)
    assert p_value > 1e-4


def test_sample_frequencies_hand_made_uneven_masses():
    # Very different neighbouring masses (and empty leaves) expose any off-by-one leaf choice.
    levels = [2, 3, 3, 2, 3, 4, 4]
    prefixes = [0, 2, 3, 2, 6, 14, 15]
    counts = np.array([1.0, 0.0, 8.0, 1.0, 30.0, 60.0, 0.5])
    dist = PrivateDistribution(Box.unit(2), levels, prefixes, counts, epsilon=1.0, mechanism="x")
    lv = dist.leaves()
    assert lv.prefix.tolist() == prefixes  # already in Morton order
    n = 30_000
    observed = _membership(dist.sample(n, rng=21), lv.lower, lv.upper).sum(axis=0)
    assert observed[counts == 0].sum() == 0
    keep = counts > 0
    _, p_value = stats.chisquare(observed[keep], counts[keep] / counts.sum() * n)
    assert p_value > 1e-4


def test_sample_is_uniform_inside_a_leaf():
    dist = PrivateDistribution(
        Box([0.0, -1.0], [4.0, 1.0]), [2], [3], [5.0], epsilon=1.0, mechanism="hand-made"
    )
    lo, hi = dist.leaves().lower[0], dist.leaves().upper[0]
    pts = dist.sample(20_000, rng=5)
    assert ((pts >= lo) & (pts <= hi)).all()
    for axis in range(2):
        u = (pts[:, axis] - lo[axis]) / (hi[axis] - lo[axis])
        assert stats.kstest(u, "uniform").pvalue > 1e-4


def test_sample_reproducible_and_sizes():
    dist = _dist(1)
    np.testing.assert_array_equal(dist.sample(100, rng=4), dist.sample(100, rng=4))
    assert dist.sample(0, rng=1).shape == (0, 2)
    assert dist.sample(3).shape == (3, 2)  # OS CSPRNG path
    with pytest.raises(ParameterError, match="'m'"):
        dist.sample(-1)
    with pytest.raises(ParameterError, match="'m'"):
        dist.sample(2.5)


def test_total_zero_samples_uniformly_over_the_domain():
    dom = Box.unit(2)
    dist = PrivateDistribution(dom, [1, 1], [0, 1], [0.0, 0.0], epsilon=1.0, mechanism="x")
    assert dist.total == 0.0
    pts = dist.sample(20_000, rng=2)
    quadrant = (pts[:, 0] >= 0.5).astype(int) * 2 + (pts[:, 1] >= 0.5)
    _, p_value = stats.chisquare(np.bincount(quadrant, minlength=4))
    assert p_value > 1e-4
    assert dist.count([0.0, 0.0], [1.0, 1.0]) == 0.0
    np.testing.assert_allclose(dist.cell_mass(2, np.arange(4)), 0.25)
    np.testing.assert_allclose(dist.leaves().mass, [0.5, 0.5])


# ------------------------------------------------------------------------------ count / mass
def test_count_whole_domain_and_half():
    dist = _dist(5)
    assert dist.count([0.0, 0.0], [1.0, 1.0]) == pytest.approx(dist.total)
    left = dist.count([0.0, 0.0], [0.5, 1.0])
    assert left == pytest.approx(dist.cell_mass(1, [0])[0] * dist.total)
    # Independent computation: count × overlap area of each leaf with a box.
    lv = dist.leaves()
    qlo, qhi = np.array([0.1, 0.3]), np.array([0.7, 0.95])
    side = np.clip(np.minimum(lv.upper, qhi) - np.maximum(lv.lower, qlo), 0, None)
    frac = side.prod(axis=1) / (lv.upper - lv.lower).prod(axis=1)
    assert dist.count(qlo, qhi) == pytest.approx(float(lv.count @ frac))


def test_count_in_user_units():
    dom = Box([10.0, -5.0], [20.0, 5.0])
    dist = PrivateDistribution(dom, [1, 1], [0, 1], [30.0, 10.0], epsilon=1.0, mechanism="x")
    assert dist.count([10.0, -5.0], [15.0, 5.0]) == pytest.approx(30.0)
    assert dist.count([12.5, -5.0], [17.5, 5.0]) == pytest.approx(20.0)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 16), depth=st.integers(4, 9))
def test_cell_mass_matches_tree_and_sums_to_one(seed, k, depth):
    tree = _grown(seed, k=k, depth=depth)
    levels, prefixes, counts = tree.leaves()
    dist = PrivateDistribution(Box.unit(2), levels, prefixes, counts, epsilon=1.0, mechanism="x")
    total = tree.levels[0][1][0]
    for level in range(depth + 3):
        masses = dist.cell_mass(level, np.arange(2**level))
        assert (masses >= 0).all()
        assert masses.sum() == pytest.approx(1.0, abs=1e-9)
        if total > 0 and level in tree.levels:
            # Consistent tree: a node's mass is its count over the root's.
            p, c = tree.levels[level]
            np.testing.assert_allclose(masses[p.astype(np.int64)], c / total, atol=1e-9)


def test_cell_mass_spreads_shallow_leaves():
    dist = PrivateDistribution(
        Box.unit(2), [1, 2, 3, 3], [1, 1, 0, 1], [8.0, 4.0, 2.0, 2.0], epsilon=1.0, mechanism="x"
    )
    assert dist.cell_mass(1, [0, 1]).tolist() == [0.5, 0.5]
    assert dist.cell_mass(2, [0, 1, 2, 3]).tolist() == [0.25, 0.25, 0.25, 0.25]
    assert dist.cell_mass(3, np.arange(8)).tolist() == [
        0.125,
        0.125,
        0.125,
        0.125,
        0.125,
        0.125,
        0.125,
        0.125,
    ]
    with pytest.raises(ParameterError, match="prefixes"):
        dist.cell_mass(2, [4])
    with pytest.raises(ParameterError, match="level"):
        dist.cell_mass(-1, [0])


# ------------------------------------------------------------------------------ validation
def test_constructor_validation():
    dom = Box.unit(2)
    ok = {"epsilon": 1.0, "mechanism": "x"}
    with pytest.raises(ParameterError, match="disjoint"):
        PrivateDistribution(dom, [1, 2], [0, 1], [1.0, 1.0], **ok)  # level-2 cell 1 ⊂ cell 0
    with pytest.raises(ParameterError, match="disjoint"):
        PrivateDistribution(dom, [1, 1], [0, 0], [1.0, 1.0], **ok)
    with pytest.raises(ParameterError, match="counts"):
        PrivateDistribution(dom, [1, 1], [0, 1], [1.0, -1.0], **ok)
    with pytest.raises(ParameterError, match="counts"):
        PrivateDistribution(dom, [1, 1], [0, 1], [1.0, np.nan], **ok)
    with pytest.raises(ParameterError, match="prefixes"):
        PrivateDistribution(dom, [1], [2], [1.0], **ok)
    with pytest.raises(ParameterError, match="levels"):
        PrivateDistribution(dom, [-1], [0], [1.0], **ok)
    with pytest.raises(ParameterError, match="levels"):
        PrivateDistribution(dom, [], [], [], **ok)
    with pytest.raises(ParameterError, match="epsilon"):
        PrivateDistribution(dom, [0], [0], [1.0], epsilon=0.0, mechanism="x")
    with pytest.raises(ParameterError, match="params"):
        PrivateDistribution(dom, [0], [0], [1.0], **ok, params={"f": object()})
    with pytest.raises(ParameterError, match="domain"):
        PrivateDistribution("unit square", [0], [0], [1.0], **ok)


# --------------------------------------------------------------------------- serialisation
def test_roundtrip_equality_and_repr():
    dist = _dist(7)
    back = PrivateDistribution.from_bytes(dist.to_bytes())
    assert back == dist and back.params == {"k": 4, "depth": 7}
    assert back.epsilon == 1.0 and back.mechanism == "PrivHP" and back.total == dist.total
    np.testing.assert_array_equal(back.sample(50, rng=3), dist.sample(50, rng=3))
    assert pickle.loads(pickle.dumps(dist)) == dist
    assert back != _dist(8)
    assert "PrivHP" in repr(dist) and f"leaves={dist.n_leaves}" in repr(dist)
    assert dist.nbytes >= 24 * dist.n_leaves


def test_corrupt_blobs_raise():
    blob = _dist(2).to_bytes()
    with pytest.raises(SerializationError):
        PrivateDistribution.from_bytes(blob[:-3])
    flipped = bytearray(blob)
    flipped[len(blob) // 2] ^= 0x40
    with pytest.raises(SerializationError):
        PrivateDistribution.from_bytes(bytes(flipped))
    with pytest.raises(SerializationError):
        PrivateDistribution.from_bytes(pack("CountMinSketch", 1, {}, {}, state="trusted"))
    # A well-formed container whose contents are invalid (overlapping leaves).
    meta = {
        "domain_class": "Box",
        "domain": Box.unit(2).to_dict(),
        "epsilon": 1.0,
        "mechanism": "x",
        "params": {},
    }
    arrays = {
        "levels": np.array([1, 1], dtype=np.int64),
        "prefixes": np.array([0, 0], dtype=np.uint64),
        "counts": np.array([1.0, 1.0]),
    }
    with pytest.raises(SerializationError, match="disjoint"):
        PrivateDistribution.from_bytes(
            pack("PrivateDistribution", 1, meta, arrays, state="trusted")
        )
    with pytest.raises(SerializationError, match="domain_class"):
        PrivateDistribution.from_bytes(
            pack(
                "PrivateDistribution",
                1,
                {**meta, "domain_class": "os.system"},
                arrays,
                state="trusted",
            )
        )
    with pytest.raises(SerializationError, match="version"):
        PrivateDistribution.from_bytes(
            pack("PrivateDistribution", 2, meta, arrays, state="trusted")
        )


# ------------------------------------------------------------------------------ bit domain
def test_bit_domain_release():
    dom = BitDomain(8)
    # Half the mass on 0..127 (level 1, prefix 0), a quarter each on 128..191 and 192..255.
    dist = PrivateDistribution(
        dom, [1, 2, 2], [0, 2, 3], [2.0, 1.0, 1.0], epsilon=1.0, mechanism="x"
    )
    pts = dist.sample(4000, rng=9)
    assert pts.shape == (4000,) and pts.dtype == np.int64
    assert ((pts >= 0) & (pts < 256)).all()
    observed = np.bincount(pts // 64, minlength=4)
    _, p_value = stats.chisquare(observed, [1000, 1000, 1000, 1000])
    assert p_value > 1e-4
    assert dist.count(0, 255) == pytest.approx(4.0)
    assert dist.count(128, 191) == pytest.approx(1.0)
    assert PrivateDistribution.from_bytes(dist.to_bytes()) == dist
