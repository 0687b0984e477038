"""The sampler that looks each leaf's cell up in a table built once gives the same points as the
sampler that rebuilt the cell of every drawn point (``domain.sample_cells``): the same values for
the same seed, and the same distribution by a two-sample test for different seeds. Its speed
against numpy's floor is measured in ``benchmarks/bench_sample.py``, not here."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from sketchsyn.domains import BitDomain, Box
from sketchsyn.privacy.rng import as_source
from sketchsyn.synth.distribution import _SAMPLE_CHUNK, PrivateDistribution
from sketchsyn.synth.tree import consistent_levels, grow_partition


def _old_sample(dist: PrivateDistribution, m: int, rng: int, shift: int = 0) -> np.ndarray:
    """The sampler before the cell table: each drawn leaf's cell rebuilt by sample_cells.

    ``shift`` moves every drawn leaf index (a deliberately broken sampler for the test's own
    sensitivity check)."""
    src = as_source(rng)
    count = dist.leaves().count
    cum = np.cumsum(count)
    lv, px = dist.leaves().level, dist.leaves().prefix
    out = []
    for start in range(0, m, _SAMPLE_CHUNK):
        n = min(_SAMPLE_CHUNK, m - start)
        idx = np.searchsorted(cum, src.random(n) * dist.total, side="right")
        np.minimum(idx, int(np.flatnonzero(count > 0)[-1]), out=idx)
        idx = np.clip(idx + shift, 0, count.size - 1)
        out.append(dist.domain.sample_cells(lv[idx], px[idx], rng=src))
    return np.concatenate(out)


def _grown(seed: int, d_domain, depth: int = 9) -> PrivateDistribution:
    rng = np.random.default_rng(seed)
    raw = [rng.integers(0, 50, 2**lv) + rng.normal(0, 6.0, 2**lv) for lv in range(depth + 1)]
    top = consistent_levels(raw[:3])
    tree = grow_partition(top, lambda lv, p: raw[lv][p.astype(np.int64)], 4, depth)
    levels, prefixes, counts = tree.leaves()
    return PrivateDistribution(d_domain, levels, prefixes, counts, epsilon=1.0, mechanism="x")


DOMAINS = {
    "box2": Box([-74.05, 40.6], [-73.75, 40.9]),
    "box1": Box([0.0], [1440.0]),
    "box3": Box.unit(3),
    "ipv4": BitDomain.ipv4(),
    "bits64": BitDomain(64),
}


@pytest.mark.parametrize("name", sorted(DOMAINS))
def test_same_points_as_the_per_point_sampler(name):
    dist = _grown(1, DOMAINS[name])
    m = _SAMPLE_CHUNK + 1234  # two chunks
    new = dist.sample(m, rng=5)
    old = _old_sample(dist, m, rng=5)
    assert new.dtype == old.dtype and new.shape == old.shape
    assert np.array_equal(new, old)


def test_total_zero_is_uniform_on_the_domain():
    dom = Box([0.0, 10.0], [2.0, 30.0])
    dist = PrivateDistribution(dom, [1, 1], [0, 1], [0.0, 0.0], epsilon=1.0, mechanism="x")
    pts = dist.sample(20_000, rng=3)
    assert np.array_equal(pts, dom.sample_cells(np.zeros(20_000, int), np.zeros(20_000, int), 3))
    assert stats.kstest((pts[:, 1] - 10.0) / 20.0, "uniform").pvalue > 1e-4


def _two_sample_p(a: np.ndarray, b: np.ndarray) -> float:
    """Smallest p-value of KS tests per coordinate and of a chi-square on 64 quantile bins."""
    a = a.reshape(a.shape[0], -1).astype(np.float64)
    b = b.reshape(b.shape[0], -1).astype(np.float64)
    ps = [stats.ks_2samp(a[:, j], b[:, j]).pvalue for j in range(a.shape[1])]
    edges = np.unique(np.quantile(np.concatenate([a[:, 0], b[:, 0]]), np.linspace(0, 1, 65)))
    ca, _ = np.histogram(a[:, 0], edges)
    cb, _ = np.histogram(b[:, 0], edges)
    keep = (ca + cb) > 0
    ps.append(stats.chi2_contingency(np.stack([ca[keep], cb[keep]]))[1])
    return float(min(ps))


@pytest.mark.parametrize("name", ["box2", "ipv4"])
def test_same_distribution_as_the_per_point_sampler(name):
    dist = _grown(2, DOMAINS[name])
    m = 60_000
    new = dist.sample(m, rng=11)
    assert _two_sample_p(new, _old_sample(dist, m, rng=12)) > 1e-4
    # The test sees a sampler that draws each point from a neighbouring leaf.
    assert _two_sample_p(new, _old_sample(dist, m, rng=12, shift=1)) < 1e-6


def test_cell_table_built_once_and_read_only():
    dist = _grown(3, DOMAINS["box2"])
    dist.sample(10, rng=0)
    tables = dist._sampling_tables()
    assert dist._sampling_tables() is tables
    assert all(not arr.flags.writeable for arr in tables[2:])
    assert PrivateDistribution.from_bytes(dist.to_bytes()) == dist  # the table is not state
