"""A privacy audit of every private summary, on its noisy state read as shipped (``to_bytes``).

For each mechanism: two neighbouring inputs ``D`` and ``D'`` (one item added, or for
``neighbours="replace"`` one item moved); many independent builds of each, with fresh noise; the
state each build ships is read back from its bytes. Under the claimed noise law (integer Laplace
of the stated scale in every cell) the privacy-loss statistic of a state ``y`` is

    L(y) = Σ_cells (|y − c| − |y − c'|) / b_cell        (c, c' the exact counts under D, D')

and for a pure ε-DP mechanism every event ``S = {L ≥ τ}`` satisfies ``P_D'(S) ≤ e^ε P_D(S)``.
The audit estimates both probabilities with Clopper–Pearson bounds and takes the lower confidence
bound ``ε̂ = ln(lower(P_D'(S)) / upper(P_D(S)))``: it asserts ``ε̂ ≤ ε``. The same audit run on a
deliberately under-noised build (every scale halved inside the test, so the mechanism is 2ε-DP)
must find ``ε̂ > ε``: the audit has the power to see a 2× error. A goodness-of-fit test checks that
the state's noise (state − exact counts) follows the stated law. The offline mechanisms (grid,
PMM) release once; their audited output is the release's cell counts.

A larger run of the same audit: ``python benchmarks/bench_privacy_audit.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from unittest import mock

import numpy as np
import pytest
from scipy import stats

import sketchsyn.baselines.grid as baseline
import sketchsyn.privacy.accounting as accounting
import sketchsyn.sketches.sketch as sketches
import sketchsyn.synth.marginal.select as select
from sketchsyn import (
    PMM,
    Box,
    ContributionBounder,
    CountMinSketch,
    CountSketch,
    GridHistogram,
    MarginalDistribution,
    MarginalSynthesizer,
    PrivHP,
    Schema,
)
from sketchsyn.io.serial import unpack
from sketchsyn.privacy.noise import discrete_laplace_pmf
from sketchsyn.synth.marginal.budget import COUNT_SHARE
from sketchsyn.synth.marginal.layout import pair_grid

TRIALS = 1000
CONFIDENCE = 1e-3  # each Clopper–Pearson bound holds with probability ≥ 1 − 1e-3


@dataclass
class Mechanism:
    """How to build one private summary on ``data`` and read its shipped state."""

    name: str
    epsilon: float
    build: Callable[[object, int | None], object]  # (data, seed or None for raw) -> summary
    state: Callable[[object], np.ndarray]  # summary -> flat int64 state, read from its bytes
    scales: Callable[[object], np.ndarray]  # summary -> noise scale of every state entry
    data: tuple[object, object]  # (D, D')
    trials: int = TRIALS


def _cp_bounds(k: int, n: int, alpha: float) -> tuple[float, float]:
    lo = 0.0 if k == 0 else stats.beta.ppf(alpha, k, n - k + 1)
    hi = 1.0 if k == n else stats.beta.ppf(1 - alpha, k + 1, n - k)
    return float(lo), float(hi)


def _states(mech: Mechanism, data: object, seeds: range) -> np.ndarray:
    return np.stack([mech.state(mech.build(data, s)) for s in seeds])


def audit(mech: Mechanism) -> tuple[float, float, np.ndarray, np.ndarray]:
    """``(ε̂ lower bound, the pair's largest loss, noise of the D states, their scales)``.

    The largest loss ``Σ |c − c'| / b`` is what the claimed noise allows on this pair: ``ε``
    for add/remove pairs; for a replace pair the root's share is not used (n is unchanged).
    """
    trials = mech.trials
    D, D2 = mech.data
    exact, exact2 = mech.state(mech.build(D, None)), mech.state(mech.build(D2, None))
    cells = np.flatnonzero(exact != exact2)
    assert cells.size, "the neighbours must differ in the state"
    scales = mech.scales(mech.build(D, None))
    b = scales[cells]
    c, c2 = exact[cells], exact2[cells]
    y = _states(mech, D, range(trials))
    y2 = _states(mech, D2, range(trials, 2 * trials))

    def loss(states: np.ndarray) -> np.ndarray:
        v = states[:, cells]
        return ((np.abs(v - c) - np.abs(v - c2)) / b).sum(axis=1)

    top = float((np.abs(c - c2) / b).sum())  # the largest value L can take
    eps_hat = -math.inf
    for tau in (0.999 * top, 0.75 * top, 0.5 * top):  # three events fixed in advance
        k, k2 = int((loss(y) >= tau).sum()), int((loss(y2) >= tau).sum())
        lo2 = _cp_bounds(k2, trials, CONFIDENCE)[0]
        hi = _cp_bounds(k, trials, CONFIDENCE)[1]
        if lo2 > 0:
            eps_hat = max(eps_hat, math.log(lo2 / hi))
    return eps_hat, top, y - exact, scales


def _fit(noise: np.ndarray, scales: np.ndarray) -> None:
    """Chi-square of the pooled noise of each scale against the integer Laplace pmf."""
    for scale in np.unique(scales):
        z = noise[:, scales == scale].ravel()
        z = z[:20_000]
        support = np.arange(-int(6 * scale) - 1, int(6 * scale) + 2)
        expected = discrete_laplace_pmf(support, scale) * z.size
        keep = support[expected > 5]
        if keep.size < 5:  # too few draws of this scale to bin (the marginal table's row
            continue  # count: its law is fitted on its own mechanism, at scale 1)
        obs = np.array([(z == v).sum() for v in keep], dtype=float)
        exp = discrete_laplace_pmf(keep, scale) * z.size
        obs = np.append(obs, z.size - obs.sum())  # every other value in one bin
        exp = np.append(exp, z.size - exp.sum())
        p = stats.chisquare(obs, exp).pvalue
        assert p > 1e-4, f"noise of scale {scale} does not follow Lap_Z({scale}): p = {p:.2g}"


# ------------------------------------------------------------------ mechanisms
def _table(blob_kind: str) -> Callable[[object], np.ndarray]:
    return lambda s: unpack(s.to_bytes(), blob_kind)[3]["table"].ravel()


def _sketch(cls: type, epsilon: float) -> Mechanism:
    def build(keys, seed):
        s = cls(16, 2, epsilon=None if seed is None else epsilon, seed=7, rng=seed)
        s.update_many(keys)
        return s

    def scales(s):
        return np.full(32, cls(16, 2, epsilon=epsilon).noise_scale)

    keys = np.array([3, 3, 5, 9, 11], dtype=np.uint64)
    return Mechanism(
        cls.__name__, epsilon, build, _table(cls.__name__), scales, (keys, np.append(keys, 4))
    )


def _privhp(neighbours: str, epsilon: float) -> Mechanism:
    box = Box.unit(1)

    def build(X, seed):
        php = PrivHP(
            box,
            epsilon,
            k=2,
            width=8,
            sketch_depth=1,
            depth=3 if neighbours == "add-remove" else 2,
            rng=seed,
            neighbours=neighbours,
            raw=seed is None,
        )
        php.update_many(X)
        return php

    def state(php):
        arrays = unpack(php.to_bytes(), "PrivHP")[3]
        return np.concatenate([arrays["tree"], arrays["bank"].ravel()])

    def scales(php):
        s = php.noise_scales
        tree = np.concatenate([np.full(2**lvl, s[lvl]) for lvl in range(php.counter_depth + 1)])
        bank = np.repeat(s[php.counter_depth + 1 :], php.sketch_depth * php.width)
        return np.concatenate([tree, bank])

    D = np.array([[0.1], [0.3], [0.35], [0.8]])
    if neighbours == "add-remove":
        D2 = np.vstack([D, [[0.12]]])
    else:  # one item moved across the first cut: it changes two cells on every level below
        D2 = D.copy()
        D2[0, 0] = 0.9
    trials = TRIALS if neighbours == "add-remove" else 4000  # more cells move: rarer events
    return Mechanism(f"PrivHP-{neighbours}", epsilon, build, state, scales, (D, D2), trials)


def _privhp_table(epsilon: float) -> Mechanism:
    """PrivHP on a table (a categorical of 3 values and a boolean): neighbouring tables differ
    in one row; the shipped state is audited as on a box."""
    schema = Schema(
        [
            {"name": "c", "kind": "categorical", "categories": ["a", "b", "c"]},
            {"name": "ok", "kind": "boolean"},
        ]
    )

    def build(table, seed):
        php = PrivHP(
            schema, epsilon, k=2, width=8, sketch_depth=1, depth=3, rng=seed, raw=seed is None
        )
        php.update_many(table)
        return php

    base = _privhp("add-remove", epsilon)
    D = {"c": ["a", "b", "b", "c"], "ok": [True, False, True, True]}
    D2 = {"c": D["c"] + ["c"], "ok": D["ok"] + [False]}
    return Mechanism("PrivHP-table", epsilon, build, base.state, base.scales, (D, D2))


def _grid(epsilon: float) -> Mechanism:
    box = Box.unit(1)

    def build(X, seed):
        g = GridHistogram(box, epsilon, level=2, rng=seed)
        g.update_many(X)
        if seed is None:
            return g
        dist = GridHistogram.from_bytes(g.to_bytes()).release()  # the release, as shipped
        return dist

    def state(obj):
        if isinstance(obj, GridHistogram):
            return obj._counts.copy()
        out = np.zeros(4, dtype=np.int64)  # cells the release dropped (count 0) stay 0
        leaves = obj.leaves()
        assert (leaves.level == 2).all()
        out[leaves.prefix.astype(np.int64)] = np.rint(leaves.count).astype(np.int64)
        return out

    def scales(_):
        return np.full(4, accounting.laplace_scale(1, epsilon, "audit"))

    # Every cell well above zero, so the release's clamp at 0 is not reached in the events.
    D = np.repeat([[0.1], [0.3], [0.6], [0.9]], 30, axis=0)
    return Mechanism("GridHistogram", epsilon, build, state, scales, (D, np.vstack([D, [[0.1]]])))


def _marginal_table(epsilon: float) -> Mechanism:
    """MarginalSynthesizer on a table (a categorical of 3 values and a boolean): its audited
    output is the release's noisy counts, read back from the release's bytes: both columns'
    one-way tables and the one pair table (two columns: every pair is measured, nothing is
    selected), on the groups the release cut from its noisy one-way counts, which here are the
    categories themselves (every category holds 400 rows; the unused code joins the last),
    and the row count it drew first (its one-way share is chosen for that count: 1,200 rows
    at ε = 1 choose the same share whatever the count's noise, so every trial has one plan)."""
    schema = Schema(
        [
            {"name": "c", "kind": "categorical", "categories": ["a", "b", "c"]},
            {"name": "ok", "kind": "boolean"},
        ]
    )
    groups = (np.array([0, 1, 2, 2]), np.array([0, 1]))
    plan = MarginalSynthesizer(schema, epsilon, column_bits=[(2, 2), (1, 1)])._release_plan(1200)

    def build(table, seed):
        syn = MarginalSynthesizer(schema, epsilon, column_bits=[(2, 2), (1, 1)], rng=seed)
        syn.update_many(table)
        if seed is None:
            return syn
        release = syn.release()
        if seed in (0, TRIALS):  # the release, as shipped, holds the same noisy counts
            shipped = MarginalDistribution.from_bytes(release.to_bytes())
            assert np.array_equal(state(shipped), state(release))
        return release

    def state(obj):
        if isinstance(obj, MarginalSynthesizer):
            singles = obj._single_tables()
            pair = obj._pair_tables()[0][pair_grid(2, 1)]
            table = np.zeros((3, 2), dtype=np.int64)
            np.add.at(table, (groups[0][:, None], groups[1][None, :]), pair)
        else:
            sel = obj._selected
            singles = sel.singles
            (_, gi, gj, table) = sel.measured[0]
            assert (gi == groups[0]).all() and (gj == groups[1]).all()
            assert sel.plan == plan  # the count's noise chose the same plan
        count = int(np.sum(singles[1])) if isinstance(obj, MarginalSynthesizer) else sel.count
        return np.concatenate([singles[0][:3], singles[1], table.ravel(), [count]])

    def scales(syn):
        return np.array(
            [plan.single_scale] * 5 + [plan.pair_scale] * 6 + [plan.count_scale], dtype=float
        )

    D = {"c": ["a", "b", "c"] * 400, "ok": [True] * 600 + [False] * 600}
    D2 = {"c": D["c"] + ["c"], "ok": D["ok"] + [False]}
    return Mechanism("MarginalSynthesizer-table", epsilon, build, state, scales, (D, D2))


def _marginal_count(epsilon: float) -> Mechanism:
    """The row count a MarginalSynthesizer's table release draws first (it fits the numeric
    column's one-way bins to it; the release's bytes hold the same count): the synthesizer is
    given ``epsilon / COUNT_SHARE``, so that the count's own part is ``epsilon``."""
    schema = Schema([{"name": "x", "kind": "numeric", "low": 0, "high": 1},
                     {"name": "ok", "kind": "boolean"}])  # fmt: skip
    total = epsilon / COUNT_SHARE

    def build(table, seed):
        syn = MarginalSynthesizer(schema, total, column_bits=[(2, 4), (1, 1)], rng=seed)
        syn.update_many(table)
        if seed is None:
            return syn
        release = syn.release()
        assert release._selected.plan.count_epsilon == epsilon
        if seed in (0, TRIALS):  # the release, as shipped, holds the same count
            shipped = MarginalDistribution.from_bytes(release.to_bytes())
            assert shipped._selected.count == release._selected.count
        return release

    def state(obj):
        if isinstance(obj, MarginalSynthesizer):
            return np.array([obj.n_seen], dtype=np.int64)
        return np.array([obj._selected.count], dtype=np.int64)

    def scales(syn):
        return np.array([syn.noise_scales["count"]])

    D = {"x": np.linspace(0, 1, 300), "ok": [True, False] * 150}
    D2 = {"x": np.append(D["x"], 0.5), "ok": D["ok"] + [True]}
    return Mechanism("MarginalSynthesizer-count", epsilon, build, state, scales, (D, D2))


# ------------------------------------------------------------------ user level (privacy units)
# Neighbours differ by one unit: all of its rows (here 60 rows in cell (a, True)). The bounder's
# key is fixed (the guarantee holds for every key); only the noise varies from build to build.
# Two cases each. Roomy: a table with room for every unit, so the unit's first L rows are the
# whole difference (L rows: half the bound). Forced collision: one bucket of one slot and 1-bit
# fingerprints, so every unit shares the slot; the unit comes first, takes the slot's L rows and
# pushes out the L rows of cell (c, False) that held it (2L rows: the bound itself).
UNIT_L = 4
_UNIT_SCHEMA = [
    {"name": "c", "kind": "categorical", "categories": ["a", "b", "c"]},
    {"name": "ok", "kind": "boolean"},
]


def _unit_rows(blocks: list[tuple[str, bool, int, int]]) -> dict[str, np.ndarray]:
    """A table of ``(c, ok, unit id, rows)`` blocks."""
    table: dict[str, list] = {"c": [], "ok": [], "user": []}
    for c, ok, uid, rows in blocks:
        table["c"] += [c] * rows
        table["ok"] += [ok] * rows
        table["user"] += [uid] * rows
    return {k: np.array(v) for k, v in table.items()}


def _unit_data(collide: bool) -> tuple[dict, dict]:
    """``(D, D')``: D' adds unit 99 and its 60 rows; first (collide) or last (roomy)."""
    base = [("c", False, 1, UNIT_L), ("b", True, 2, 2), ("b", False, 3, 3), ("c", True, 4, 9)]
    heavy = [("a", True, 99, 60)]
    return _unit_rows(base), _unit_rows(heavy + base if collide else base + heavy)


def _unit_bounder(collide: bool) -> ContributionBounder:
    if collide:
        return ContributionBounder(UNIT_L, 1, slots=1, fingerprint_bits=1, rng=11)
    return ContributionBounder(UNIT_L, 64, slots=8, rng=11)


def _privhp_unit(epsilon: float, collide: bool) -> Mechanism:
    """PrivHP with a privacy unit of at most L rows, on [0, 1] with the ids beside the points:
    its shipped private state (the noisy counters and sketches, without the bounder). The
    table's cells (a, True) and (c, False) become the points 0.1 and 0.9."""
    place = {("a", True): 0.1, ("b", True): 0.3, ("b", False): 0.6, ("c", True): 0.7}
    place[("c", False)] = 0.9

    def points(table):
        X = np.array([place[(c, bool(ok))] for c, ok in zip(table["c"], table["ok"], strict=True)])
        return X[:, None], table["user"]

    def build(table, seed):
        php = PrivHP(
            Box.unit(1), epsilon, k=2, width=8, sketch_depth=1, depth=3, rng=seed,
            raw=seed is None, unit="user", max_rows=UNIT_L, bounder=_unit_bounder(collide),
        )  # fmt: skip
        X, ids = points(table)
        php.update_many(X, units=ids)
        return php

    def state(php):
        arrays = unpack(php.to_bytes(include_bounder=False), "PrivHP")[3]
        return np.concatenate([arrays["tree"], arrays["bank"].ravel()])

    name = f"PrivHP-unit{'-collide' if collide else ''}"
    scales = _privhp("add-remove", epsilon).scales
    return Mechanism(name, epsilon, build, state, scales, _unit_data(collide), trials=1000)


def _every_bin(layout, marg, pair, cells):
    """Every coarse bin of both columns its own group."""
    return tuple(np.arange(2 ** layout.coarse[c], dtype=np.int64) for c in pair)


def _marginal_unit(epsilon: float, collide: bool) -> Mechanism:
    """MarginalSynthesizer with a privacy unit, on two booleans (``a``: the category is "a";
    ``ok``): the noisy counts its release reads, read back from the release's bytes (both
    one-way tables and the one pair table: two columns, every pair measured, each boolean its
    own group). One-way tables get a fifth of ε, so the pair table carries the audit's power."""
    schema = Schema([{"name": "a", "kind": "boolean"}, {"name": "ok", "kind": "boolean"}])

    def rows(table):
        return {"a": table["c"] == "a", "ok": table["ok"], "user": table["user"]}

    def build(table, seed):
        syn = MarginalSynthesizer(
            schema, epsilon, column_bits=[(1, 1), (1, 1)], singles_share=0.2, unit="user",
            max_rows=UNIT_L, bounder=_unit_bounder(collide), rng=seed,
        )  # fmt: skip
        syn.update_many(rows(table))
        if seed is None:
            return syn
        # The groups are cut from the noisy one-way counts (post-processing, audited on the
        # event-level table above); here every bin keeps its own group, so that the audited
        # vector has one length, whatever the few rows' noisy counts.
        with mock.patch.object(select, "pair_groups", _every_bin):
            return syn.release()

    def state(obj):
        if isinstance(obj, MarginalSynthesizer):
            singles, table = obj._single_tables(), obj._pair_tables()[0][pair_grid(1, 1)]
        else:
            sel = obj._selected
            singles, (_, gi, gj, table) = sel.singles, sel.measured[0]
            assert gi.tolist() == gj.tolist() == [0, 1]
        return np.concatenate([singles[0], singles[1], np.asarray(table).ravel()])

    def scales(syn):
        return np.array([syn.noise_scales["single"]] * 4 + [syn.noise_scales["pair"]] * 4)

    name = f"MarginalSynthesizer-unit{'-collide' if collide else ''}"
    return Mechanism(name, epsilon, build, state, scales, _unit_data(collide))


UNIT_MECHANISMS = [
    _privhp_unit(1.0, collide=False),
    _privhp_unit(1.0, collide=True),
    _marginal_unit(1.0, collide=False),
    _marginal_unit(1.0, collide=True),
]


MECHANISMS = [
    _sketch(CountMinSketch, 1.0),
    _sketch(CountSketch, 1.0),
    _privhp("add-remove", 1.0),
    _privhp("replace", 1.0),
    _privhp_table(1.0),
    _grid(1.0),
    _marginal_table(1.0),
    _marginal_count(1.0),
]
# Halving the noise of a unit-level pair that is L rows apart (half the bound) breaks nothing:
# the unit-level mechanisms have their own checks of too little noise (the end of this file).
EVENT_MECHANISMS = list(MECHANISMS)
MECHANISMS += UNIT_MECHANISMS


@pytest.fixture
def under_noised(monkeypatch):
    """Halve every integer Laplace scale the summaries compute: a 2ε mechanism."""
    real = accounting.laplace_scale

    def half(sensitivity, epsilon, owner, name="epsilon"):
        return real(sensitivity, epsilon, owner, name) / 2

    for module in (accounting, sketches, baseline):
        monkeypatch.setattr(module, "laplace_scale", half)


@pytest.mark.parametrize("mech", MECHANISMS, ids=[m.name for m in MECHANISMS])
def test_audit_finds_no_violation_and_noise_fits(mech):
    eps_hat, _, noise, scales = audit(mech)
    assert math.isfinite(eps_hat), f"{mech.name}: the audit's events never occurred"
    assert eps_hat <= mech.epsilon, f"{mech.name}: audited ε ≥ {eps_hat:.3f} > {mech.epsilon}"
    if mech.name != "GridHistogram":  # the grid's release is clamped, its state is exact
        _fit(noise, scales)


@pytest.mark.parametrize("mech", EVENT_MECHANISMS, ids=[m.name for m in EVENT_MECHANISMS])
def test_audit_detects_twice_the_budget(mech, under_noised):
    eps_hat, top, _, _ = audit(mech)
    # Halved scales double the loss the pair can realise: the audit must see more than the
    # correct mechanism could ever show on this pair (ε for add/remove pairs).
    assert eps_hat > top / 2, f"{mech.name}: the audit missed a 2× error (ε̂ {eps_hat:.3f})"
    if mech.name != "PrivHP-replace":
        assert eps_hat > mech.epsilon


def test_pmm_release_event_bound():
    """PMM's release is post-processed (integer consistency): any event on it is bounded."""
    box = Box.unit(1)
    D = np.repeat([[0.1], [0.6]], 40, axis=0)
    D2 = np.vstack([D, [[0.1]]])

    def left_mass(X, seed):
        p = PMM(box, 1.0, depth=2, rng=seed)
        p.update_many(X)
        return PMM.from_bytes(p.to_bytes()).release().count([0.0], [0.5])

    a = np.array([left_mass(D, s) for s in range(TRIALS)])
    b = np.array([left_mass(D2, s) for s in range(TRIALS, 2 * TRIALS)])
    tau = 41.0
    k, k2 = int((a >= tau).sum()), int((b >= tau).sum())
    lo2 = _cp_bounds(k2, TRIALS, CONFIDENCE)[0]
    hi = _cp_bounds(k, TRIALS, CONFIDENCE)[1]
    assert lo2 == 0 or math.log(lo2 / hi) <= 1.0


def _sensitivity_of(monkeypatch, rule) -> None:
    """Builds whose noise is sized for ``rule(L)`` rows of a unit instead of 2L."""
    from sketchsyn.units.level import UnitLevel

    monkeypatch.setattr(
        UnitLevel,
        "sensitivity",
        property(lambda self: 1 if self._max_rows is None else rule(self._max_rows)),
    )


@pytest.mark.parametrize(
    "mech", [m for m in UNIT_MECHANISMS if "collide" not in m.name], ids=lambda m: m.name
)
def test_unit_audit_flags_event_level_noise(mech, monkeypatch):
    """Noise for one row, behind a bounder that lets L rows of a unit through: the audit sees
    the unit's L rows (L·ε on this pair)."""
    _sensitivity_of(monkeypatch, lambda L: 1)
    eps_hat, top, _, _ = audit(mech)
    assert top > 2 * mech.epsilon
    assert eps_hat > mech.epsilon, f"{mech.name}: event-level noise not flagged ({eps_hat:.3f})"


def test_unit_audit_flags_noise_sized_for_L(monkeypatch):
    """Under a forced collision the unit's L rows come in and another unit's L rows go out: noise
    sized for L rows (not 2L) spends 2ε on this pair, and the audit sees more than ε."""
    mech = next(m for m in UNIT_MECHANISMS if m.name == "MarginalSynthesizer-unit-collide")
    _sensitivity_of(monkeypatch, lambda L: L)
    eps_hat, top, _, _ = audit(mech)
    assert math.isclose(top, 2 * mech.epsilon, rel_tol=1e-9)
    assert eps_hat > mech.epsilon, f"{mech.name}: noise sized for L not flagged ({eps_hat:.3f})"


@pytest.mark.parametrize("mech", UNIT_MECHANISMS, ids=lambda m: m.name)
def test_unit_pairs_differ_by_L_or_2L(mech):
    """The audited pairs are what they claim: L rows apart (half the loss the noise allows) in
    the roomy table, 2L under the forced collision: the whole budget of the marginal
    synthesizer, and of PrivHP's levels below the root (whose count does not change when one
    unit's rows replace another's)."""
    D, D2 = mech.data
    exact = mech.build(D, None)
    a, b = mech.state(exact), mech.state(mech.build(D2, None))
    top = float((np.abs(a - b) / mech.scales(exact)).sum())
    if "collide" not in mech.name:
        want = 0.5 * mech.epsilon
    elif mech.name.startswith("PrivHP"):
        want = mech.epsilon - exact.sigmas[0]
    else:
        want = mech.epsilon
    assert math.isclose(top, want, rel_tol=1e-6), (mech.name, top, want)
