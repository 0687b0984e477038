"""A table release that chooses what it measures (issue 51): the private selection, its
budget, the planner's bins, the groups, and the release's bytes.

* report-noisy-max with exponential noise: exact, ε-DP on neighbouring score vectors (an audit
  that also catches half the noise);
* the selection's scores read the data only through exact tables of sensitivity one: with the
  released one-way tables held fixed, one row moves every score by at most one, and every
  grouping and candidate list is unchanged;
* the selection stage of the release, audited with its released one-way tables held fixed:
  ε̂ ≤ the selection's budget, and a build whose selection noise is halved is caught;
* the budget's parts sum to at most ε as exact rationals, and the API states the split;
* the planner: no planned one-way bin of an ordered column below its noise scale at a uniform
  spread (nor a pair cell of two ordered columns), every schema accepted at 256 KiB and up;
* the release's bytes: every field checked (groups, pairs that connect, the budget).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import sketchsyn.privacy.selection as selection
import sketchsyn.synth.marginal.select as select
from sketchsyn import MarginalDistribution, MarginalSynthesizer, Schema
from sketchsyn.errors import ParameterError, SerializationError
from sketchsyn.io.serial import pack, read
from sketchsyn.privacy.rng import as_source
from sketchsyn.privacy.selection import report_noisy_max
from sketchsyn.synth.marginal.budget import ReleasePlan
from sketchsyn.synth.marginal.groups import group_table
from sketchsyn.synth.marginal.layout import Layout, pair_grid
from sketchsyn.synth.marginal.planner import ONE_WAY_NOISE, PAIR_NOISE, plan_table

TRIALS = 2000
CONFIDENCE = 1e-3


def _lower_ratio(k_num: int, k_den: int, trials: int) -> float:
    """A lower confidence bound of ``P_num / P_den`` from counts (Clopper–Pearson)."""
    lo = stats.beta.ppf(CONFIDENCE, k_num, trials - k_num + 1) if k_num else 0.0
    hi = stats.beta.ppf(1 - CONFIDENCE, k_den + 1, trials - k_den) if k_den < trials else 1.0
    return lo / hi


# ------------------------------------------------------------------ report-noisy-max
def test_report_noisy_max_is_exact_and_takes_the_lowest_tie() -> None:
    assert report_noisy_max(np.array([7]), 1.0) == 0
    # huge margins: the argmax whatever the noise; equal scores, no noise possible: lowest index
    assert all(report_noisy_max([0, 10**6, 5], 1.0, rng=s) == 1 for s in range(20))
    with pytest.raises(ParameterError, match="'scores'"):
        report_noisy_max(np.array([0.5, 1.0]), 1.0)
    with pytest.raises(ParameterError, match="'sensitivity'"):
        report_noisy_max([1, 2], 1.0, sensitivity=0)
    # the law of one draw: P(index 1 wins) = p²/(1 + p) for scores (0, 2), p = e^{−ε/2}
    p = math.exp(-0.5)
    wins = sum(report_noisy_max([0, 2], 1.0, rng=s) for s in range(4000)) / 4000
    assert abs(wins - (1 - p**2 / (1 + p))) < 0.03


def _rnm_audit(epsilon: float) -> float:
    """ε̂ of the event "index 0 wins" on scores (0, 0) against (−1, +1) (each score moved by
    one: the worst case, whose true ratio is e^ε)."""
    a = sum(report_noisy_max([0, 0], epsilon, rng=s) == 0 for s in range(TRIALS))
    b = sum(report_noisy_max([-1, 1], epsilon, rng=TRIALS + s) == 0 for s in range(TRIALS))
    return math.log(_lower_ratio(a, b, TRIALS))


def test_report_noisy_max_audit_and_its_power(monkeypatch) -> None:
    assert _rnm_audit(1.0) <= 1.0
    real = selection.selection_scale
    monkeypatch.setattr(selection, "selection_scale", lambda e, s=1: real(e, s) / 2)
    assert _rnm_audit(1.0) > 1.0  # half the noise: a 2ε mechanism, seen


# ------------------------------------------------------------------ sensitivity of the scores
SMALL = Schema(
    [
        {"name": "a", "kind": "categorical", "categories": ["x", "y", "z"]},
        {"name": "b", "kind": "integer", "low": 0, "high": 7},
        {"name": "c", "kind": "numeric", "low": 0, "high": 1},
        {"name": "d", "kind": "boolean"},
    ]
)
BITS = [(2, 2), (3, 3), (2, 4), (1, 1)]


def _exact(rows: dict) -> MarginalSynthesizer:
    syn = MarginalSynthesizer(SMALL, 1.0, column_bits=BITS, rng=0)
    syn.update_many(rows)
    return syn


def _tables(syn: MarginalSynthesizer) -> dict:
    lay = syn._layout
    return {
        p: t[pair_grid(lay.coarse[p[0]], lay.coarse[p[1]])]
        for p, t in zip(lay.pairs, syn._pair_tables(), strict=True)
    }


def _rows(draw_ints: list[int], n: int) -> dict:
    rng = np.random.default_rng(draw_ints)
    a = rng.integers(0, 3, n)
    b = np.clip(a * 2 + rng.integers(0, 3, n), 0, 7)
    c = np.clip(rng.normal(0.2 + 0.25 * a, 0.1, n), 0, 1)
    return {"a": np.array(["x", "y", "z"])[a], "b": b, "c": c, "d": c > 0.4}


@settings(max_examples=25, deadline=None)
@given(
    seed=st.lists(st.integers(0, 2**16), min_size=1, max_size=3),
    n=st.integers(50, 400),
    extra=st.integers(0, 10**6),
)
def test_one_row_moves_every_score_by_at_most_one(seed, n, extra) -> None:
    """Given the released one-way tables (held fixed), the groups, candidates and the model
    are the same for two neighbouring tables, and every score moves by at most one."""
    rows = _rows(seed, n)
    one = _rows([extra], 1)
    both = {k: np.concatenate([rows[k], one[k]]) for k in rows}
    syn, syn2 = _exact(rows), _exact(both)
    lay = syn._layout
    plan = ReleasePlan.make(4, 2.0, 0.35, 0.1, 1)
    released = select.measure(lay, _tables(syn), syn._single_tables(), plan, as_source(seed[0]))
    singles = released.singles  # the released one-way tables, the same for both
    marg = select._coarse_marginals(lay, select.fine_probabilities(lay, singles, plan.single_scale))
    n_hat = float(sum(s[lay.valid_fine(j)].sum() for j, s in enumerate(singles)) / 4)
    cells = n_hat / (select.CELL_NOISE * plan.pair_scale)
    groups = select.candidate_groups(lay, marg, cells)  # every pair at each resolution
    scored = []
    for s in (syn, syn2):
        tables = _tables(s)
        grouped = {
            key: group_table(tables[key[0]], gi, gj, int(gi.max()) + 1, int(gj.max()) + 1)
            for key, (gi, gj) in groups.items()
        }
        indep = select.independence_scores(grouped, groups, marg, n_hat)
        model = select.fit_release(lay, singles, released.measured[:3], 1.0, 1.0)
        cands = [key for key in groups if key[0] not in {m[0] for m in released.measured[:3]}]
        rounds = select.model_scores(cands, grouped, groups, model, plan.pair_scale)
        scored.append(np.array([indep[key] for key in groups] + list(rounds)))
    assert np.abs(scored[0] - scored[1]).max() <= 1


def _candidates(epsilon: float, n: int = 40_000):
    """A table (x; y, x plus a little noise; an independent z; booleans b, c), its layout, a
    plan at ``epsilon``, its released one-way marginals and its candidates' exact tables."""
    rng = np.random.default_rng(0)
    x, z = rng.random(n), rng.random(n)
    num = {"kind": "numeric", "low": 0, "high": 1}
    schema = Schema(
        [{"name": c, **num} for c in "xyz"] + [{"name": c, "kind": "boolean"} for c in "bc"]
    )
    syn = MarginalSynthesizer(schema, epsilon, column_bits=[(6, 8)] * 3 + [(1, 1)] * 2, rng=0)
    y = np.clip(x + rng.normal(0, 0.01, n), 0, 1)
    syn.update_many({"x": x, "y": y, "z": z, "b": x > 0.5, "c": rng.random(n) < 0.3})
    lay, tables = syn._layout, _tables(syn)
    plan = ReleasePlan.make(5, epsilon, 0.35, 0.1, 4)
    released = select.measure(lay, tables, syn._single_tables(), plan, as_source(1))
    fine = select.fine_probabilities(lay, released.singles, plan.single_scale)
    marg = select._coarse_marginals(lay, fine)
    groups = select.candidate_groups(lay, marg, n / (select.CELL_NOISE * plan.pair_scale))
    grouped = {
        key: group_table(tables[key[0]], gi, gj, int(gi.max()) + 1, int(gj.max()) + 1)
        for key, (gi, gj) in groups.items()
    }
    return syn, plan, marg, groups, grouped


def test_each_pair_is_a_candidate_at_each_resolution_that_cuts_other_groups() -> None:
    """Three resolutions of a pair of two wide numeric columns, finer and finer; two booleans
    one (every resolution cuts the same groups, and no pair counts twice); and the score
    ``‖M − n̂·p pᵀ‖₁ − b·cells`` of two independent columns is highest on the coarsest
    groups: finer cells add noise and no dependence."""
    _, plan, marg, groups, grouped = _candidates(1.0)
    sizes = [grouped[key].size for key in groups if key[0] == (0, 2)]
    assert len(sizes) == len(select.RESOLUTIONS) and sizes == sorted(sizes) and sizes[0] < sizes[-1]
    assert [key for key in groups if key[0] == (3, 4)] == [((3, 4), select.RESOLUTIONS[0])]
    indep = select.independence_scores(grouped, groups, marg, 40_000.0)
    scores = {
        key[1]: indep[key] - select._noise_cost(grouped[key], plan.pair_scale)
        for key in groups
        if key[0] == (1, 2)  # y and z: independent
    }
    assert max(scores, key=scores.get) == min(select.RESOLUTIONS), scores


def test_the_tree_measures_a_pair_at_the_resolution_it_picked(monkeypatch) -> None:
    """Where a pair's finer groups score highest (here by a patched distance), the release
    measures that pair on those groups, and says so in its groups (the shape of its table)."""
    syn, plan, marg, groups, grouped = _candidates(1.0)
    real = select.independence_scores

    def favour_fine_xy(grouped_, groups_, marg_, n_hat):
        out = real(grouped_, groups_, marg_, n_hat)
        return {
            k: v + (10**9 if k == ((0, 1), max(select.RESOLUTIONS)) else 0) for k, v in out.items()
        }

    monkeypatch.setattr(select, "independence_scores", favour_fine_xy)
    got = select.measure(syn._layout, _tables(syn), syn._single_tables(), plan, as_source(1))
    assert got.tree[0] == (0, 1)
    pair, gi, gj, table = got.measured[0]
    want_i, want_j = groups[((0, 1), max(select.RESOLUTIONS))]
    assert pair == (0, 1) and table.shape == (want_i.max() + 1, want_j.max() + 1)
    assert table.size > min(grouped[k].size for k in groups if k[0] == (0, 1))


@settings(max_examples=300, deadline=None)
@given(
    cells=st.lists(st.integers(0, 10**6), min_size=1, max_size=12),
    expected=st.lists(st.floats(0, 10**6, allow_nan=False), min_size=12, max_size=12),
    at=st.integers(0, 11),
)
def test_a_score_distance_moves_by_at_most_one_exactly(cells, expected, at) -> None:
    """``l1_floor`` sums exactly: one count moved by one moves it by at most one. (Summed in
    floating point, the first hypothesis run found a pair table whose distance came to
    31.999999999999996 and 33.0 on two neighbouring tables: a score moved by two.)"""
    t = np.array(cells, dtype=np.float64)
    e = np.array(expected[: t.size])
    moved = t.copy()
    moved[at % t.size] += 1
    assert abs(select.l1_floor(moved, e) - select.l1_floor(t, e)) <= 1
    # that pair table: its expected cells (released values) and the moved count, 22 -> 23
    e = np.array([[11.21830985915493, 18.28169014084507]] * 2)
    before, after = np.array([[19.0, 6.0], [3.0, 22.0]]), np.array([[19.0, 6.0], [3.0, 23.0]])
    assert select.l1_floor(before, e) == 32 and select.l1_floor(after, e) == 33


# ------------------------------------------------------------------ the selection, audited
def _pinned_measure(monkeypatch, singles: list[np.ndarray]) -> dict:
    """Make ``select.measure`` release ``singles`` as its one-way tables (held fixed, as the
    selection sees them once released; reset ``calls["k"] = 0`` before each release); its
    selections and pair tables draw noise as usual."""
    real = select._noisy
    calls = {"k": 0}

    def noisy(exact, scale, source):
        k = calls["k"]
        calls["k"] += 1
        if k < len(singles):
            return singles[k].copy()
        return real(exact, scale, source)

    monkeypatch.setattr(select, "_noisy", noisy)
    return calls


def _selection_audit(monkeypatch) -> tuple[float, float]:
    """ε̂ of the first pick of the spanning tree on two neighbouring tables whose released
    one-way tables are the same, and the budget of that one selection."""
    schema = Schema([{"name": k, "kind": "boolean"} for k in "abc"])
    # a and b agree on 300 of 400 rows, a and c on 300 (other rows), b and c on 200: the first
    # two pairs' scores tie; the added row (a=b=True, c=False) raises one and lowers the other
    a = np.r_[np.ones(200, bool), np.zeros(200, bool)]
    b = a.copy()
    b[:50] = ~b[:50]
    b[200:250] = ~b[200:250]
    c = a.copy()
    c[50:101] = ~c[50:101]
    c[250:299] = ~c[250:299]
    D = {"a": a, "b": b, "c": c}
    D2 = {k: np.r_[v, [k != "c"]] for k, v in D.items()}
    bits = [(1, 1)] * 3
    eps = 6.0
    syn = MarginalSynthesizer(
        schema, eps, column_bits=bits, singles_share=0.3, select_share=0.6, rounds=0, rng=0
    )
    syn.update_many(D)
    fixed = [t.copy() for t in syn._single_tables()]  # the released one-way tables (pinned)
    calls = _pinned_measure(monkeypatch, fixed)
    picks = []
    for data, offset in ((D, 0), (D2, TRIALS)):
        s = MarginalSynthesizer(
            schema, eps, column_bits=bits, singles_share=0.3, select_share=0.6, rounds=0, rng=0
        )
        s.update_many(data)
        lay = s._layout
        got = []
        for t in range(TRIALS):
            calls["k"] = 0
            m = select.measure(
                lay, _tables_of(s), s._single_tables(), s.plan, as_source(offset + t)
            )
            got.append(m.tree[0] == (0, 2))
        picks.append(sum(got))
    k, k2 = picks
    eps_hat = max(
        math.log(_lower_ratio(k, k2, TRIALS)),
        math.log(_lower_ratio(TRIALS - k2, TRIALS - k, TRIALS)),
    )
    return eps_hat, syn.plan.select_epsilon


def _tables_of(syn: MarginalSynthesizer) -> dict:
    lay = syn._layout
    return {
        p: t[pair_grid(lay.coarse[p[0]], lay.coarse[p[1]])]
        for p, t in zip(lay.pairs, syn._pair_tables(), strict=True)
    }


def test_the_selection_stage_is_audited(monkeypatch) -> None:
    eps_hat, budget = _selection_audit(monkeypatch)
    assert eps_hat <= budget, (eps_hat, budget)


def test_the_selection_audit_catches_half_the_noise(monkeypatch) -> None:
    real = selection.selection_scale
    monkeypatch.setattr(selection, "selection_scale", lambda e, s=1: real(e, s) / 2)
    eps_hat, budget = _selection_audit(monkeypatch)
    assert eps_hat > budget, (eps_hat, budget)


# ------------------------------------------------------------------ the budget
@settings(max_examples=60, deadline=None)
@given(
    d=st.integers(2, 20),
    epsilon=st.floats(0.01, 50),
    s1=st.floats(0.05, 0.7),
    s2=st.floats(0.01, 0.25),
    rounds=st.integers(0, 200),
)
def test_the_parts_sum_to_at_most_epsilon_exactly(d, epsilon, s1, s2, rounds) -> None:
    plan = ReleasePlan.make(d, epsilon, s1, s2, rounds)
    assert plan.total_fraction() <= 1
    assert plan.total_fraction() > Fraction(1) - Fraction(1, 10**9)
    spent = (
        d * Fraction(plan.singles_epsilon)
        + plan.measured * Fraction(plan.pair_epsilon)
        + plan.selections * Fraction(plan.select_epsilon)
    )
    assert spent <= Fraction(epsilon)
    assert plan.measured <= d * (d - 1) // 2


def test_the_api_states_the_split() -> None:
    schema = Schema([{"name": f"x{k}", "kind": "numeric", "low": 0, "high": 1} for k in range(6)])
    syn = MarginalSynthesizer(schema, 1.0, expected_n=10_000, rounds=3, rng=0)
    parts = syn.epsilon_parts
    assert set(parts) == {"count", "singles", "select", "pairs"}
    assert parts["count"] == pytest.approx(0.01)  # numeric columns: bins fitted to the count
    assert syn.plan.total_fraction() <= 1 and sum(parts.values()) == pytest.approx(1.0)
    text = syn.explain()
    assert "8 private choices" in text and "8 of the 15 pair tables" in text
    assert "a row count × 0.01 (the release fits ordered columns' one-way bins and " in text
    assert "event-level" in text
    syn.update_many(np.random.default_rng(0).random((10_000, 6)))
    dist = syn.release()
    assert dist.epsilon_parts == parts and len(dist.measured) == 8 and len(dist.tree) == 5
    scales = syn.noise_scales
    assert scales["select"] == pytest.approx(2 / syn.plan.select_epsilon)
    # every pair measured, nothing selected: no budget on selections
    every = MarginalSynthesizer(schema, 1.0, rounds=10, rng=0)
    assert every.epsilon_parts["select"] == 0 and every.noise_scales["select"] == 0


# ------------------------------------------------------------------ the planner
KINDS = st.sampled_from(["numeric", "integer", "datetime", "categorical", "boolean", "ipv4"])


def _column(k: int, kind: str, size: int) -> dict:
    if kind == "numeric":
        return {"name": f"c{k}", "kind": kind, "low": 0, "high": size}
    if kind == "integer":
        return {"name": f"c{k}", "kind": kind, "low": 0, "high": size}
    if kind == "datetime":
        return {"name": f"c{k}", "kind": kind, "low": "2020-01-01", "high": "2021-01-01"}
    if kind == "categorical":
        return {"name": f"c{k}", "kind": kind, "categories": [str(v) for v in range(size)]}
    return {"name": f"c{k}", "kind": kind}


@settings(max_examples=60, deadline=None)
@given(
    kinds=st.lists(KINDS, min_size=2, max_size=16),
    sizes=st.lists(st.integers(2, 5000), min_size=16, max_size=16),
    epsilon=st.floats(0.05, 20),
    n=st.integers(100, 10**8),
    memory=st.sampled_from([256 * 1024, 1 << 20, 4 << 20]),
)
def test_planned_bins_hold_their_noise_and_every_schema_fits(kinds, sizes, epsilon, n, memory):
    schema = Schema([_column(k, kind, sizes[k]) for k, kind in enumerate(kinds)])
    syn = MarginalSynthesizer(schema, epsilon, memory_bytes=memory, expected_n=n)
    assert syn.nbytes <= memory
    plan = syn.plan
    ordered = [j for j, c in enumerate(schema._cols) if c.kind not in ("categorical", "boolean")]
    for j in ordered:
        coarse, fine = syn.column_bits[j]
        # a one-way bin at a uniform spread holds ≥ ONE_WAY_NOISE noise scales (one bit is the
        # least a column can have)
        assert fine == 1 or n / 2**fine >= ONE_WAY_NOISE * plan.single_scale
        assert n / 2**fine >= plan.single_scale or fine == 1
    for i in ordered:
        for j in ordered:
            if i < j:
                cells = 2 ** (syn.column_bits[i][0] + syn.column_bits[j][0])
                assert cells == 4 or n / cells >= PAIR_NOISE * plan.pair_scale


def test_plan_table_keeps_categories_and_cuts_to_fit() -> None:
    wide = Schema(
        [{"name": "k", "kind": "categorical", "categories": [str(v) for v in range(100_000)]}]
        + [{"name": f"x{j}", "kind": "numeric", "low": 0, "high": 1} for j in range(9)]
    )
    coarse, fine, why = plan_table(wide, 256 * 1024, 10**6, 30.0, 20.0)
    assert 8 * Layout(wide, columns=(coarse, fine)).cells + 64 <= 256 * 1024
    assert "cut to fit" in why and fine[0] < 17


# ------------------------------------------------------------------ the release's bytes
def _release() -> MarginalDistribution:
    rng = np.random.default_rng(4)
    x = rng.random(3000)
    rows = {
        "a": np.array(["x", "y", "z"])[(x * 3).astype(int)],
        "b": (x * 7).astype(int),
        "c": np.clip(x + rng.normal(0, 0.05, 3000), 0, 1),
        "d": rng.random(3000) < x,
    }
    syn = MarginalSynthesizer(SMALL, 2.0, column_bits=BITS, rounds=1, rng=1)
    syn.update_many(rows)
    return syn.release()


def _forge(blob: bytes, meta=None, arrays=None) -> bytes:
    got = read(blob, "MarginalDistribution")
    return pack(
        "MarginalDistribution",
        got.version,
        dict(got.meta) | (meta or {}),
        dict(got.arrays) | (arrays or {}),
        state="private",
    )


def test_the_release_round_trips_and_refuses_forgeries() -> None:
    dist = _release()
    blob = dist.to_bytes()
    back = MarginalDistribution.from_bytes(blob)
    assert back == dist and back.measured == dist.measured and back.tree == dist.tree
    assert (back.sample(500, rng=3) == dist.sample(500, rng=3)).all().all()
    arrays = read(blob, "MarginalDistribution").arrays
    meta = read(blob, "MarginalDistribution").meta
    groups = arrays["groups"].copy()
    groups[0] = 99
    pairs = arrays["pairs"].copy()
    pairs[:] = [[0, 1], [0, 1], [2, 3], [2, 3]][: len(pairs)]
    plan = dict(meta["plan"])
    cases = [
        ({"seed": 1}, None, "unknown fields"),
        ({"plan": plan | {"pair_epsilon": plan["pair_epsilon"] * 2}}, None, "'plan'"),
        ({"plan": plan | {"bogus": 1}}, None, "'plan'"),
        ({"column_bits": [[2, 2]] * 4}, None, "'column_bits'"),
        (None, {"groups": groups}, "'groups'"),
        (None, {"pairs": pairs}, "'pairs'"),
        (None, {"tables": arrays["tables"][:-1]}, "'tables'"),
        (None, {"tables": arrays["tables"] * 0 + 2**60}, "'tables'"),
        (None, {"junk": np.zeros(2, np.int64)}, "'junk'"),
        ({"params": dict(meta["params"]) | {"rounds": "x"}}, None, "'rounds'"),
    ]
    for forged_meta, forged_arrays, named in cases:
        with pytest.raises(SerializationError, match=named):
            MarginalDistribution.from_bytes(_forge(blob, forged_meta, forged_arrays))


def test_a_version_1_table_release_still_samples() -> None:
    """The release that measured every pair (a table's before issue 51) still loads and
    samples, built here through its constructor."""
    lay = Layout(SMALL, columns=((2, 3, 2, 1), (2, 3, 4, 1)))
    pairs = np.zeros(lay.pair_cells, dtype=np.int64)
    singles = np.zeros(lay.cells - lay.pair_cells, dtype=np.int64)
    for t, ok in zip(lay.pair_tables(pairs), lay.valid_tables(), strict=False):
        t[ok] = 10
    for j, t in enumerate(lay.single_tables(singles)):
        t[lay.valid_fine(j)] = 30
    dist = MarginalDistribution(
        SMALL, 1.0, pairs, singles, 0.75 / 6, 0.25 / 4, bits=2, fine_bits=4, exact_bits=3
    )
    back = MarginalDistribution.from_bytes(dist.to_bytes())
    assert back == dist and len(back.sample(100, rng=0)) == 100 and back.measured == lay.pairs


def test_consensus_reads_the_denoised_one_way_table_not_its_noise():
    """A column whose rows fill 4 of its 64 fine bins (a public range far wider than the data):
    its raw noisy counts put the noise of the 60 empty bins into the coarse marginal; read
    through the denoised one-way table (as the release's model does), that mass is gone."""
    from sketchsyn.synth.marginal.marginals import consensus, one_way

    rng = np.random.default_rng(5)
    scale = 20.0
    exact = np.zeros(64)
    exact[:4] = [900, 1200, 700, 200]
    outside = {"raw": [], "denoised": []}
    for _ in range(20):
        noisy = exact + rng.laplace(0, scale, 64).round()
        valid = np.ones(64, bool)
        fine = one_way(noisy, valid, scale, ordered=True)
        for how, den in (("raw", None), ("denoised", [fine])):
            (marg,), _ = consensus([noisy], [valid], (4,), scale, [], scale, den)
            outside[how].append(marg[1:].sum())  # coarse bins 1-15 hold no row
    assert np.mean(outside["denoised"]) < 0.045 < 0.07 < np.mean(outside["raw"])
