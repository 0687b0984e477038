"""MarginalSynthesizer: budget split, memory, the tree of pairs, consistency, bytes, the privacy
audit on neighbouring inputs (with a 2× under-noised build it must catch) and the CLI."""

from __future__ import annotations

import math
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
from test_privacy_audit import (  # noqa: F401  (under_noised is a fixture)
    Mechanism,
    _cp_bounds,
    _fit,
    audit,
    under_noised,
)

from sketchsyn import Box, MarginalDistribution, MarginalSynthesizer
from sketchsyn.errors import InputError, ParameterError, ReleasedError, SerializationError
from sketchsyn.privacy.rng import as_source
from sketchsyn.synth.marginal.model import maximum_spanning_tree, morton_grid, pair_list
from sketchsyn.synth.marginal.synthesizer import plan, state_bytes


def _chain(n: int, seed: int = 0) -> np.ndarray:
    """Four columns: x0 uniform, x2 = x0² (+ a little noise), x1 and x3 independent."""
    rng = np.random.default_rng(seed)
    t = rng.random(n)
    return np.column_stack(
        [t, rng.random(n), np.clip(t**2 + 0.01 * rng.standard_normal(n), 0, 1), rng.random(n)]
    )


def test_memory_is_stated_and_respected():
    for d, mem in ((2, 10_000), (4, 1 << 20), (12, 1 << 20), (20, 300_000)):
        syn = MarginalSynthesizer(Box.unit(d), 1.0, memory_bytes=mem)
        assert syn.nbytes == state_bytes(d, syn.bits, syn.fine_bits) <= mem
        assert syn.fine_bits >= syn.bits
        assert f"{syn.nbytes:,}" in syn.explain()
    with pytest.raises(ParameterError, match="memory_bytes"):
        MarginalSynthesizer(Box.unit(12), 1.0, memory_bytes=1000)
    with pytest.raises(ParameterError, match="memory_bytes"):
        MarginalSynthesizer(Box.unit(3), 1.0, memory_bytes=1000, bits=6, fine_bits=6)
    # expected_n caps the grids where finer cells would hold mostly noise
    assert plan(4, 0.1, 1 << 20, expected_n=1000)[0] < plan(4, 0.1, 1 << 20)[0]


def test_bad_parameters_are_refused_by_name():
    with pytest.raises(ParameterError, match="'domain'"):
        MarginalSynthesizer(Box.unit(1), 1.0)
    with pytest.raises(ParameterError, match="'singles_share'"):
        MarginalSynthesizer(Box.unit(2), 1.0, singles_share=1.0)
    with pytest.raises(ParameterError, match="'singles_share'.*column table"):
        MarginalSynthesizer(Box.unit(3), 1.0, bits=2, fine_bits=4, singles_share=1e-300)
    with pytest.raises(ParameterError, match="'fine_bits'"):
        MarginalSynthesizer(Box.unit(2), 1.0, bits=5, fine_bits=3)
    with pytest.raises(ParameterError, match="'epsilon'"):
        MarginalSynthesizer(Box.unit(2), -1.0)


def test_budget_split_sums_to_epsilon_exactly():
    for d, eps, share in ((2, 1.0, 0.25), (5, 0.1, 0.5), (12, 3.0, 0.1)):
        syn = MarginalSynthesizer(Box.unit(d), eps, bits=2, fine_bits=4, singles_share=share)
        P = d * (d - 1) // 2
        scales = syn.noise_scales
        per_pair = sum(Fraction(1) / Fraction(float(s)) for s in scales["pair"])
        per_single = sum(Fraction(1) / Fraction(float(s)) for s in scales["single"])
        assert P * per_pair + d * per_single <= Fraction(eps)
        assert math.isclose(P * per_pair + d * per_single, eps, rel_tol=1e-9)
        parts = syn.epsilon_parts
        assert math.isclose(parts["singles"], share * eps, rel_tol=1e-9)


def test_helpers():
    assert pair_list(4) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    g = morton_grid(3)
    assert sorted(g.ravel().tolist()) == list(range(64))
    box = Box.unit(2)
    pts = (np.array([[1, 6], [7, 2]]) + 0.5) / 8
    assert box.encode(pts, 6).tolist() == [g[1, 6], g[7, 2]]
    # a chain 0-1-2-3 with a strong 0-3 link
    w = np.array([5.0, 0.0, 9.0, 4.0, 0.0, 1.0])
    assert maximum_spanning_tree(4, w) == [(0, 3), (0, 1), (1, 2)]


def test_tree_keeps_the_dependent_pair_and_sampling_keeps_it():
    X = _chain(50_000)
    syn = MarginalSynthesizer(Box.unit(4), 1.0, memory_bytes=200_000, rng=3)
    syn.update_many(X)
    dist = syn.release()
    edges = {frozenset(e) for e in dist.tree}
    assert frozenset((0, 2)) in edges
    mi = dist.mutual_information
    assert mi[pair_list(4).index((0, 2))] > 5 * max(mi[pair_list(4).index((0, 1))], 1e-3)
    Y = dist.sample(20_000, rng=4)
    assert Y.shape == (20_000, 4) and ((Y >= 0) & (Y <= 1)).all()
    r = np.corrcoef(Y[:, 0], Y[:, 2])[0, 1]
    assert r > 0.9  # the data's correlation is 0.97; an independent model gives 0
    assert abs(np.corrcoef(Y[:, 1], Y[:, 3])[0, 1]) < 0.05
    # marginals agree with the data
    for i in range(4):
        assert abs(np.mean(Y[:, i]) - np.mean(X[:, i])) < 0.02


def test_count_matches_the_data_and_the_samples():
    X = _chain(40_000, seed=5)
    syn = MarginalSynthesizer(Box.unit(4), 2.0, bits=5, fine_bits=8, rng=6)
    syn.update_many(X)
    lo, hi = np.array([0.0, 0.0, 0.0, 0.0]), np.array([0.5, 1.0, 0.3, 0.5])
    exact = float(((X >= lo) & (X <= hi)).all(axis=1).sum())
    est = syn.count(lo, hi)
    assert abs(est - exact) < 0.05 * exact
    assert abs(syn.count(np.zeros(4), np.ones(4)) - X.shape[0]) < 0.01 * X.shape[0]
    Y = syn.sample(40_000, rng=7)
    got = float(((Y >= lo) & (Y <= hi)).all(axis=1).sum())
    assert abs(got - est) < 0.05 * est
    with pytest.raises(ParameterError, match="'lower'"):
        syn.count([0.0], [1.0])


def test_user_units_domain_and_twelve_columns():
    d = 12
    rng = np.random.default_rng(8)
    base = rng.random((20_000, 1))
    X = np.clip(base + 0.05 * rng.standard_normal((20_000, d)), 0, 1) * 100.0 - 50.0
    box = Box(np.full(d, -50.0), np.full(d, 50.0))
    syn = MarginalSynthesizer(box, 1.0, memory_bytes=1 << 20, expected_n=20_000, rng=9)
    syn.update_many(X[:7000])
    syn.update_many(X[7000:])
    Y = syn.sample(5000, rng=10)
    assert Y.shape == (5000, d)
    assert ((Y >= -50.0) & (Y <= 50.0)).all()
    assert len(syn.release().tree) == d - 1
    c = np.corrcoef(Y.T)
    assert np.median(c[np.triu_indices(d, 1)]) > 0.5  # the data's is 0.97


def test_bad_batch_leaves_state_unchanged_and_release_once():
    syn = MarginalSynthesizer(Box.unit(3), 1.0, bits=2, fine_bits=3, rng=0)
    syn.update_many(np.full((4, 3), 0.5))
    before = syn.to_bytes()
    bad = np.full((4, 3), 0.5)
    bad[2, 1] = 1.5
    with pytest.raises(InputError, match="outside"):
        syn.update_many(bad)
    assert syn.to_bytes() == before
    dist = syn.release()
    assert syn.release() is dist
    with pytest.raises(ReleasedError):
        syn.update_many(np.full((1, 3), 0.5))
    # the released blob carries its release; the release alone is private
    loaded = MarginalSynthesizer.from_bytes(syn.to_bytes())
    assert loaded.release() == dist
    assert MarginalDistribution.from_bytes(dist.to_bytes()).state_privacy == "private"
    assert syn.state_privacy == "trusted"


def test_merge_equals_one_pass():
    X = _chain(3000, seed=11)
    a = MarginalSynthesizer(Box.unit(4), 1.0, bits=3, fine_bits=5, rng=1)
    b = MarginalSynthesizer(Box.unit(4), 1.0, bits=3, fine_bits=5, rng=2)
    whole = MarginalSynthesizer(Box.unit(4), 1.0, bits=3, fine_bits=5, rng=1)
    a.update_many(X[:1000])
    b.update_many(X[1000:])
    whole.update_many(X)
    a.merge(b)
    assert np.array_equal(a._counts, whole._counts)


def test_corrupt_blob_is_refused_naming_the_field():
    syn = MarginalSynthesizer(Box.unit(2), 1.0, bits=2, fine_bits=3, rng=0)
    dist = syn.release()
    from sketchsyn.io.serial import pack, read

    got = read(dist.to_bytes(), "MarginalDistribution")
    meta = dict(got.meta)
    meta["bits"] = 40
    blob = pack("MarginalDistribution", 1, meta, got.arrays, state="private")
    with pytest.raises(SerializationError, match="'bits'"):
        MarginalDistribution.from_bytes(blob)


# ------------------------------------------------------------------ privacy audit
def _marginal_mechanism(epsilon: float) -> Mechanism:
    box = Box.unit(2)

    built: dict[int, MarginalSynthesizer] = {}

    def build(X, seed):  # one exact state per data set; each seed draws its noise afresh
        if id(X) not in built:
            syn = MarginalSynthesizer(box, epsilon, bits=1, fine_bits=1, rng=0)
            syn.update_many(X)
            built[id(X)] = syn
        return built[id(X)], seed

    def state(obj):
        syn, seed = obj
        if seed is None:
            trees = syn._exact_levels()
        else:
            trees = syn._noisy_levels(as_source(seed))
        return np.concatenate([level for tree in trees for level in tree]).astype(np.int64)

    def scales(obj):
        syn, _ = obj
        return np.concatenate(
            [
                np.full(level.size, s)
                for tree, sc in zip(syn._exact_levels(), syn._tree_scales(), strict=True)
                for level, s in zip(tree, sc, strict=True)
            ]
        )

    D = np.array([[0.1, 0.2], [0.3, 0.9], [0.8, 0.4], [0.6, 0.6]])
    D2 = np.vstack([D, [[0.2, 0.7]]])
    return Mechanism("MarginalSynthesizer", epsilon, build, state, scales, (D, D2))


def test_audit_finds_no_violation_and_noise_fits():
    mech = _marginal_mechanism(1.0)
    eps_hat, top, noise, scales = audit(mech)
    assert math.isclose(top, 1.0, rel_tol=1e-6)  # one cell per level per tree: Σ 1/s = ε
    assert math.isfinite(eps_hat) and eps_hat <= mech.epsilon
    _fit(noise, scales)


def test_audit_detects_twice_the_budget(under_noised):  # noqa: F811
    eps_hat, top, _, _ = audit(_marginal_mechanism(1.0))
    assert eps_hat > top / 2 and eps_hat > 1.0


def test_release_event_bound():
    """The release is post-processing of the audited noisy counts: a count on it is bounded."""
    box = Box.unit(2)
    D = np.repeat([[0.1, 0.2], [0.7, 0.8]], 40, axis=0)
    D2 = np.vstack([D, [[0.1, 0.2]]])

    def corner(X, seed):
        syn = MarginalSynthesizer(box, 1.0, bits=1, fine_bits=1, rng=seed)
        syn.update_many(X)
        return MarginalSynthesizer.from_bytes(syn.to_bytes()).release().count([0, 0], [0.5, 0.5])

    trials = 400
    a = np.array([corner(D, s) for s in range(trials)])
    b = np.array([corner(D2, s) for s in range(trials, 2 * trials)])
    tau = 41.0
    k, k2 = int((a >= tau).sum()), int((b >= tau).sum())
    assert 0 < k < trials and 0 < k2 < trials  # the event is neither sure nor impossible
    lo2 = _cp_bounds(k2, trials, 1e-3)[0]
    hi = _cp_bounds(k, trials, 1e-3)[1]
    assert lo2 == 0 or math.log(lo2 / hi) <= 1.0


# ------------------------------------------------------------------ command line
def test_cli_fit_marginal_then_sample(tmp_path):
    X = _chain(3000, seed=12)
    data = tmp_path / "rows.csv"
    np.savetxt(data, X, delimiter=",", header="a,b,c,e", comments="", fmt="%.6f")
    model = tmp_path / "model.bin"
    out = tmp_path / "synthetic.csv"
    cli = [sys.executable, "-m", "sketchsyn"]
    fit = subprocess.run(
        [
            *cli,
            "fit",
            str(data),
            "--columns",
            "a,b,c,e",
            "--bounds",
            "0:1,0:1,0:1,0:1",
            "--epsilon",
            "1",
            "--mechanism",
            "marginal",
            "--memory",
            "64KB",
            "--expected-n",
            "3000",
            "--noise-seed",
            "1",
            "-o",
            str(model),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert fit.returncode == 0, fit.stderr
    assert "MarginalSynthesizer" in fit.stderr
    loaded = MarginalDistribution.load(model)
    assert loaded.domain.columns == ("a", "b", "c", "e") or list(loaded.domain.columns) == [
        "a",
        "b",
        "c",
        "e",
    ]
    sample = subprocess.run(
        [*cli, "sample", str(model), "-n", "500", "-o", str(out), "--seed", "2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert sample.returncode == 0, sample.stderr
    Y = np.loadtxt(out, delimiter=",", skiprows=1)
    assert Y.shape == (500, 4)
    assert open(out).readline().strip() == "a,b,c,e"
    info = subprocess.run([*cli, "info", str(model)], capture_output=True, text=True, timeout=120)
    assert info.returncode == 0, info.stderr
    assert "release of MarginalSynthesizer" in info.stdout and "tree of column pairs" in info.stdout
