"""OnlineSynthesizer beyond the paper: the full path budgets (exact rationals), the least-squares
combination of the levels (unbiased, lower variance, and the test sees wrong weights), the
adaptive release depth (exactly t points), a privacy audit of the new budgets on neighbouring
streams, and save / load across the format versions."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

import sketchsyn.synth.online.budget as ob
from sketchsyn import Box
from sketchsyn.domains import BitDomain
from sketchsyn.errors import ParameterError, SerializationError
from sketchsyn.privacy.noise import discrete_laplace_variance
from sketchsyn.synth.online.budget import full_budgets
from sketchsyn.synth.online.release import adaptive_leaves, combine_levels, level_noise
from sketchsyn.synth.online.synthesizer import OnlineSynthesizer, depth_at, level_start


# ------------------------------------------------------------------ the full path budgets
@pytest.mark.parametrize("eps", [0.1, 1.0, 4.0, 1 / 3, 7.25])
@pytest.mark.parametrize("levels", [1, 2, 7, 60, 64])
def test_d1_path_budget_is_at_most_half_epsilon_exactly(eps, levels):
    """d = 1: every level counts every record, at ε_j whatever the time level, so a path costs
    Σ_{j ≤ H} ε_j: at most ε/2 as exact rationals, and more than 0.9·ε/2 (the paper's (5.1)
    spends ε(1/2 − 3/π²) ≈ 0.39·ε/2)."""
    fns = [full_budgets(eps, 1, j, levels) for j in range(1, levels + 1)]
    half = Fraction(eps) / 2
    for r in (0, 1, 5, 59, 200):
        exact = sum(Fraction(f(r)) for f in fns)
        assert exact <= half
        assert exact > Fraction(9, 10) * half
        assert float(exact) == pytest.approx(eps / 2, rel=1e-12)
    paper = sum(3 * eps / (math.pi**2 * (j + 1) ** 2) for j in range(1, 10**5))
    assert paper < 0.4 * eps


def test_d1_limit_and_level_one_noise_falls_about_fourfold():
    """In the limit of many levels the budgets are 3ε/(π² j²) (the sum the proof intends), and
    the level-1 budget is about 4× the paper's 3ε/(4π²): its noise scale falls about 4×."""
    for j in (1, 2, 10):
        assert full_budgets(1.0, 1, j, 64)(0) == pytest.approx(3 / (math.pi**2 * j * j), rel=0.02)
    ratio = full_budgets(1.0, 1, 1, 60)(0) / (3 / (4 * math.pi**2))
    assert 3.9 < ratio < 4.1
    syn = OnlineSynthesizer(Box.unit(1), 1.0, rng=0)
    assert syn.path_budget(10**5) > 0.9 * 0.5
    assert OnlineSynthesizer(Box.unit(1), 1.0, budgets="paper", rng=0).path_budget(10**5) < 0.2


@pytest.mark.parametrize("d", [2, 3, 6, 64])
@pytest.mark.parametrize("eps", [0.1, 1.0, 5.5])
def test_d2_budgets_spend_half_epsilon_in_every_time_level(d, eps):
    """d >= 2: the levels 1 … min(r, H) that exist in time level r share exactly ε/2 (rounded
    down, exact rationals), keep the paper's shape (deeper cells get more), and each is ≤ ε.
    The paper's (4.1) leaves (ε/2)·2^(−r(1−1/d)/2) unspent: half at r = 4 for d = 2."""
    H = 60
    half = Fraction(eps) / 2
    for r in list(range(1, 70)) + [500]:
        m = min(r, H)
        vals = [full_budgets(eps, d, j, H)(r) for j in range(1, m + 1)]
        exact = sum(Fraction(v) for v in vals)
        assert exact <= half and float(exact) >= eps / 2 * (1 - 1e-9)
        assert all(a <= b for a, b in zip(vals, vals[1:], strict=False))
        assert max(vals) <= eps
    e = (1 - 1 / 2) / 2
    paper4 = sum((1 - 2**-e) / 2 * 2 ** ((j - 4) * e) for j in range(1, 5))
    assert paper4 == pytest.approx(0.25)


def test_full_budgets_refuse_bad_arguments():
    for args in ((0.0, 1, 1, 5), (1.0, 0, 1, 5), (1.0, 2, 0, 5), (1.0, 2, 6, 5), (1.0, 2, 1, 65)):
        with pytest.raises(ParameterError):
            full_budgets(*args)
    with pytest.raises(ParameterError, match="budgets"):
        OnlineSynthesizer(Box.unit(2), 1.0, budgets="half")


# ------------------------------------------------------------------ least squares
def _tree_truth(depth: int, seed: int) -> list[np.ndarray]:
    leaves = np.random.default_rng(seed).integers(0, 50, 2**depth).astype(float)
    levels = [leaves]
    while levels[0].size > 1:
        levels.insert(0, levels[0][0::2] + levels[0][1::2])
    return levels


def _noisy(truth, variances, reps, seed):
    """``reps`` noisy copies of every level (cells on axis 0, copies on axis 1): Laplace noise
    of the given variance (scale sqrt(var/2))."""
    rng = np.random.default_rng(seed)
    out = []
    for level, v in zip(truth, variances, strict=True):
        noise = rng.laplace(0.0, math.sqrt(v / 2), (level.size, reps)) if v > 0 else 0.0
        out.append(level[:, None] + noise)
    return out


def test_least_squares_is_unbiased_and_lowers_the_variance():
    """Levels of very unequal variance: the combination is unbiased at every level, its variance
    is the closed form v_j (within 6%) and below both the level's own variance and the
    children-sum's. The same test on weights swapped (the wrong inverse variances) or equal
    sees a variance far above v_j: it fails when the weights are wrong."""
    truth = _tree_truth(4, 0)
    variances = [400.0, 300.0, 20.0, 60.0, 2.0]
    reps = 20_000
    obs = _noisy(truth, variances, reps, 1)
    est, v = combine_levels(obs, variances)
    for j in range(5):
        mean = est[j].mean(axis=1)
        se = np.sqrt(v[j] / reps)
        assert np.abs((mean - truth[j]) / se).max() < 4.5, j
        emp = est[j].var(axis=1).mean()
        assert emp == pytest.approx(v[j], rel=0.06), (j, emp, v[j])
        if j < 4:  # below its own variance and the children-sum's
            assert v[j] < variances[j] and v[j] < 2 * v[j + 1]

    def combine_with(weights):
        z = obs[4]
        for j in range(3, -1, -1):
            kids = z[0::2] + z[1::2]
            w = weights(j)
            z = w * obs[j] + (1 - w) * kids
        return z

    # Right weights reproduce the closed form; swapped or equal weights do not pass the check.
    def right(j):
        return 2 * v[j + 1] / (variances[j] + 2 * v[j + 1])

    def swapped(j):
        return 1 - right(j)

    for weights, ok in ((right, True), (swapped, False), (lambda j: 0.5, False)):
        emp = combine_with(weights).var(axis=1).mean()
        assert bool(emp == pytest.approx(v[0], rel=0.06)) is ok, (emp, v[0])


def test_least_squares_handles_exact_and_infinite_variances():
    est, v = combine_levels([np.array([10.0]), np.array([3.0, 4.0])], [0.0, 5.0])
    assert est[0].tolist() == [10.0] and v[0] == 0.0
    est, v = combine_levels([np.array([10.0]), np.array([3.0, 4.0])], [5.0, 0.0])
    assert est[0].tolist() == [7.0] and v[0] == 0.0


def test_level_noise_matches_the_counters_variance():
    """The closed part is Σ Var Lap_Z(2/ε_r) over the ended time levels: the same formula the
    counter bank's own test checks against its draws."""
    fn = full_budgets(1.0, 2, 3, 60)
    closed, current = level_noise(fn, Fraction(1), 3, 100)
    want = sum(discrete_laplace_variance(2 / fn(r)) for r in range(3, depth_at(1.0, 100)))
    assert closed == pytest.approx(want, rel=1e-9)
    assert current > closed
    assert level_noise(lambda r: 0.0, Fraction(1), 0, 100) == (1.0, 1.0)


# ------------------------------------------------------------------ adaptive depth
@pytest.mark.parametrize("seed", range(30))
def test_adaptive_leaves_release_exactly_total_points(seed):
    rng = np.random.default_rng(seed)
    depth = int(rng.integers(0, 9))
    total = int(rng.integers(0, 10**6)) if seed else 0
    ests = [np.array([float(total)])] + [
        rng.normal(0, 50, 2**j) + rng.integers(0, 3) * rng.random(2**j) * total / 2**j
        for j in range(1, depth + 1)
    ]
    sds = [0.0] + list(rng.choice([0.0, 10.0, 1e3, 1e9], depth))
    lv, px, ct = adaptive_leaves(total, ests, sds, tau=float(rng.choice([0.0, 1.0, 3.0])))
    assert ct.dtype == np.int64 and (ct >= 0).all() and int(ct.sum()) == total
    assert lv.min() >= 0 and lv.max() <= depth
    assert np.all(px < (np.uint64(1) << lv.astype(np.uint64)))
    # Leaves are disjoint cells: no leaf is an ancestor of another.
    deepest = depth
    spans = [
        (int(p) << (deepest - int(level)), (int(p) + 1) << (deepest - int(level)))
        for level, p in zip(lv.tolist(), px.tolist(), strict=True)
    ]
    spans.sort()
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))


def test_adaptive_depth_stops_where_a_count_is_below_its_noise():
    """A dense cell goes to the full depth, a sparse one stops where its count falls under
    τ·sd; with τ = 0 every leaf is at the full depth; a huge sd keeps the root."""
    ests = [np.array([1000.0]), np.array([990.0, 10.0]), np.array([900.0, 90.0, 6.0, 4.0])]
    lv, px, ct = adaptive_leaves(1000, ests, [0.0, 5.0, 20.0], tau=1.0)
    assert dict(zip(zip(lv.tolist(), px.tolist(), strict=True), ct.tolist(), strict=True)) == {
        (2, 0): 900,
        (2, 1): 90,
        (1, 1): 10,
    }
    lv, _, ct = adaptive_leaves(1000, ests, [0.0, 5.0, 20.0], tau=0.0)
    assert set(lv.tolist()) == {2} and ct.sum() == 1000
    lv, px, ct = adaptive_leaves(1000, ests, [0.0, 1e9, 1e9], tau=1.0)
    assert lv.tolist() == [0] and ct.tolist() == [1000]


@pytest.mark.parametrize("d", [1, 2])
def test_synthesizer_releases_exactly_t_points_at_every_step(d):
    eps = 1.0
    syn = OnlineSynthesizer(Box.unit(d), eps, rng=3)
    X = np.random.default_rng(4).random((600, d)) ** 3
    assert syn.synthetic(rng=0).shape[0] == 0 and syn.release().total == 0
    done = 0
    for t in (1, 2, 3, 7, 64, 65, 200, 600):
        syn.update_many(X[done:t])
        done = t
        rel = syn.release()
        assert rel.total == t and syn.synthetic(rng=t).shape == (t, d)
        leaves = rel.leaves()
        assert np.all(np.asarray(leaves.count) == np.round(leaves.count))
        assert int(np.max(leaves.level)) <= syn.depth


def test_adaptive_depth_releases_shallow_leaves_on_sparse_regions():
    """Records packed in one corner: the release is deep there (most of the mass in leaves at
    the full depth, inside the corner) and shallow elsewhere."""
    syn = OnlineSynthesizer(Box.unit(2), 1.0, rng=5)
    syn.update_many(np.random.default_rng(6).random((4096, 2)) * 0.05)
    leaves = syn.release().leaves()
    levels, counts = np.asarray(leaves.level), np.asarray(leaves.count)
    assert levels.min() < levels.max() == syn.depth
    assert counts[levels == syn.depth].sum() > 0.8 * 4096
    assert syn.release().count([0.0, 0.0], [0.0625, 0.0625]) > 0.8 * 4096


# ------------------------------------------------------------------ privacy audit
class _Replicas:
    """The bank protocol around one real bank of ``reps`` independent copies of every cell:
    each event goes to every copy, the synthesizer reads copy 0, the audit reads them all (one
    build gives ``reps`` independent draws of the synthesizer's counter outputs)."""

    reps = 4000
    made: list = []

    def __init__(self, size, epsilon, budgets, start_level=0, *, rng=None):
        from sketchsyn.counters.sparsebank import InhomogeneousSparseBank

        self.size, self.start_level = size, start_level
        self.real = InhomogeneousSparseBank(
            size * self.reps, epsilon, budgets, start_level, rng=rng
        )
        self.budgets = budgets
        _Replicas.made.append(self)

    @property
    def t(self):
        return self.real.t

    @property
    def nbytes(self):
        return self.real.nbytes

    def update_events(self, until, cells, times, values=None):
        cells = np.asarray(cells, dtype=np.int64)
        copies = (cells[:, None] + self.size * np.arange(self.reps)[None, :]).ravel()
        self.real.update_events(until, copies, np.repeat(np.asarray(times), self.reps))

    _update_steps = update_events  # the synthesizer's path: one record per step

    def skip(self, s):
        self.real.skip(s)

    def query(self):
        return self.real.query()[: self.size]

    def every_copy(self):
        return self.real.query().reshape(self.reps, self.size)


class _ReplicatedOnline(OnlineSynthesizer):
    _bank_class = _Replicas


def _audit_states(domain, eps, stream, seed):
    """Every copy's counter outputs at the last step, levels 1 … r side by side."""
    _Replicas.made = []
    syn = _ReplicatedOnline(domain, eps, rng=seed)
    syn.update_many(stream)
    syn.noisy_levels()
    banks = sorted(_Replicas.made, key=lambda b: b.size)
    return np.hstack([b.every_copy() for b in banks]).astype(float), banks


def _cp(k, n, alpha=1e-3):
    lo = 0.0 if k == 0 else stats.beta.ppf(alpha, k, n - k + 1)
    hi = 1.0 if k == n else stats.beta.ppf(1 - alpha, k + 1, n - k)
    return float(lo), float(hi)


# d = 1 (BitDomain(2): two levels, ε_1 = 0.8, ε_2 = 0.2 at ε = 2) and d = 2 (level 1 only
# at t = 2: ε_{1,1} = ε/2). The record of step 1 moves from key 0 to key 3 (d = 1) or from the
# lower-left to the upper-right quarter (d = 2); step 2 is the same record in both streams.
AUDITS = {
    "d1": (BitDomain(2), np.array([0, 2]), np.array([3, 2])),
    "d2": (Box.unit(2), np.array([[0.1, 0.1], [0.6, 0.2]]), np.array([[0.9, 0.9], [0.6, 0.2]])),
}


def _claimed(name):
    """The budgets the synthesizer claims for the moved record's cells, ``{level: ε_j}``."""
    domain = AUDITS[name][0]
    H = min(int(domain.max_depth), 60)
    levels = (1, 2) if domain.d == 1 else (1,)  # d >= 2: step 1 only in level 1 (t_2 = 2)
    return {j: full_budgets(2.0, domain.d, j, H)(depth_at(2.0, 1)) for j in levels}


def _audit(name, claimed):
    """``(ε̂, top, noise variance / claimed)``. ε̂ is the largest Clopper–Pearson lower bound
    on ln P_D'(S)/P_D(S) over the events S = {L ≥ τ} of the loss statistic
    L = Σ (|y − c| − |y − c'|)/b over the cells the moved record's time level closed into
    (b = 2/ε_j, the claimed scale of a level total); ``top = Σ |c − c'|/b`` is the loss the
    claimed scales allow the totals: ε/2 here (the other ε/2 of the pair is the sparse
    counters', not in this statistic). The variance ratio is that of the level-1 cell the
    record leaves, whose output under D is 1 + Lap_Z(2/ε_1)."""
    domain, D, D2 = AUDITS[name]
    y, banks = _audit_states(domain, 2.0, D, 10)
    y2, _ = _audit_states(domain, 2.0, D2, 20)
    H = min(int(domain.max_depth), 60)
    codes = [int(np.asarray(domain.encode(x[:1], H), dtype=np.uint64)[0]) for x in (D, D2)]
    c, c2, b, cols, offset = [], [], [], [], 0
    for bank in banks:
        j = bank.size.bit_length() - 1
        if j in claimed:
            for code, mine, other in ((codes[0], c, c2), (codes[1], c2, c)):
                cols.append(offset + (code >> (H - j)))
                mine.append(1.0)
                other.append(0.0)
                b.append(2 / claimed[j])
        offset += bank.size
    c, c2, b, cols = np.array(c), np.array(c2), np.array(b), np.array(cols)

    def loss(states):
        v = states[:, cols]
        return ((np.abs(v - c) - np.abs(v - c2)) / b).sum(axis=1)

    top = float((np.abs(c - c2) / b).sum())
    n = y.shape[0]
    best = -math.inf
    for tau in (0.999 * top, 0.75 * top, 0.5 * top):
        k, k2 = int((loss(y) >= tau).sum()), int((loss(y2) >= tau).sum())
        lo2, hi = _cp(k2, n)[0], _cp(k, n)[1]
        if lo2 > 0:
            best = max(best, math.log(lo2 / hi))
    # The level-1 cell the record leaves holds 1 + Lap_Z(2/ε_1) under D, plus (rarely, a few
    # per cent) a trip of the open time level's sparse counter: compare P(|noise| ≤ 1), which
    # the rare trips barely move, with Lap_Z(b)'s.
    noise = y[:, cols[0]] - 1.0
    q = math.exp(-1 / b[0])
    claimed = (1 - q) / (1 + q) * (1 + 2 * q)
    ratio = float(np.mean(np.abs(noise) <= 1) / claimed)
    return best, top, ratio


@pytest.mark.parametrize("name", sorted(AUDITS))
def test_audit_of_the_full_budgets_on_neighbouring_streams(name):
    eps_hat, top, ratio = _audit(name, _claimed(name))
    assert top == pytest.approx(1.0)  # ε/2 at ε = 2: the totals' half of the pair's ε
    assert math.isfinite(eps_hat) and eps_hat <= top <= 2.0, eps_hat
    assert 0.88 < ratio < 1.06, ratio  # the noise has the claimed scale


@pytest.mark.parametrize("name", sorted(AUDITS))
def test_audit_catches_twice_the_budget(name, monkeypatch):
    """Budgets doubled inside the test (half the noise: a 2ε synthesizer) while the audit keeps
    the claimed scales: the audit sees more than the correct synthesizer could show."""
    claimed = _claimed(name)
    real = ob._vector

    def doubled(epsilon, d, levels, m):
        return tuple(2 * v for v in real(epsilon, d, levels, m))

    monkeypatch.setattr(ob, "_vector", doubled)
    eps_hat, top, ratio = _audit(name, claimed)
    assert eps_hat > top, (eps_hat, top)
    assert ratio > 1.25, ratio


# ------------------------------------------------------------------ bytes
@pytest.mark.parametrize("scheme", ["full", "paper"])
@pytest.mark.parametrize("d", [1, 2])
def test_round_trip_keeps_the_scheme_and_the_release(scheme, d):
    X = np.random.default_rng(7).random((300, d))
    syn = OnlineSynthesizer(Box.unit(d), 1.0, budgets=scheme, rng=8)
    syn.update_many(X[:200])
    back = OnlineSynthesizer.from_bytes(syn.to_bytes())
    assert back.budgets == scheme
    a, b = syn.release().leaves(), back.release().leaves()
    assert np.array_equal(a.count, b.count) and np.array_equal(a.level, b.level)
    for j in range(1, back.depth + 1):
        assert back._banks[j].budgets == syn._banks[j].budgets
    back.update_many(X[200:])
    assert back.path_budget() == syn.path_budget(300)
    assert back.synthetic(rng=1).shape == (300, d)


def test_version_2_blobs_load_with_the_paper_budgets():
    """A version-2 blob (no budgets field: its banks ran the paper's budgets) still loads and
    continues with the paper's budgets; version 1 is refused naming its version."""
    from sketchsyn.io.serial import pack, read

    syn = OnlineSynthesizer(Box.unit(2), 1.0, budgets="paper", rng=8)
    syn.update_many(np.random.default_rng(9).random((100, 2)))
    got = read(syn.to_bytes(), "OnlineSynthesizer")
    meta = {k: v for k, v in got.meta.items() if k != "budgets"}
    v2 = pack("OnlineSynthesizer", 2, meta, got.arrays, state="trusted")
    back = OnlineSynthesizer.from_bytes(v2)
    assert back.budgets == "paper" and back.t == 100
    assert np.array_equal(back.release().leaves().count, syn.release().leaves().count)
    v1 = pack("OnlineSynthesizer", 1, meta, got.arrays, state="trusted")
    with pytest.raises(SerializationError, match="version 1"):
        OnlineSynthesizer.from_bytes(v1)
    v3 = pack("OnlineSynthesizer", 3, meta, got.arrays, state="trusted")
    with pytest.raises(SerializationError, match="budgets"):
        OnlineSynthesizer.from_bytes(v3)


def test_level_start_unchanged():
    assert level_start(1.0, 10) == 1024 and depth_at(1.0, 1024) == 10
