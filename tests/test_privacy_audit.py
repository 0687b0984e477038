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

import numpy as np
import pytest
from scipy import stats

import sketchsyn.baselines.grid as baseline
import sketchsyn.privacy.accounting as accounting
import sketchsyn.sketches.sketch as sketches
from sketchsyn import (
    PMM,
    Box,
    CountMinSketch,
    CountSketch,
    GridHistogram,
    MarginalDistribution,
    MarginalSynthesizer,
    PrivHP,
    Schema,
)
from sketchsyn.io.serial import unpack
from sketchsyn.synth.marginal.layout import pair_grid
from sketchsyn.privacy.noise import discrete_laplace_pmf

TRIALS = 1500
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
    categories themselves (every category holds 400 rows; the unused code joins the last)."""
    schema = Schema(
        [
            {"name": "c", "kind": "categorical", "categories": ["a", "b", "c"]},
            {"name": "ok", "kind": "boolean"},
        ]
    )
    groups = (np.array([0, 1, 2, 2]), np.array([0, 1]))

    def build(table, seed):
        syn = MarginalSynthesizer(schema, epsilon, column_bits=[(2, 2), (1, 1)], rng=seed)
        syn.update_many(table)
        if seed is None:
            return syn
        blob = MarginalSynthesizer.from_bytes(syn.to_bytes(), rng=seed).release().to_bytes()
        return MarginalDistribution.from_bytes(blob)  # the release, as shipped

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
        return np.concatenate([singles[0][:3], singles[1], table.ravel()])

    def scales(syn):
        return np.array([syn.noise_scales["single"]] * 5 + [syn.noise_scales["pair"]] * 6)

    D = {"c": ["a", "b", "c"] * 400, "ok": [True] * 600 + [False] * 600}
    D2 = {"c": D["c"] + ["c"], "ok": D["ok"] + [False]}
    return Mechanism("MarginalSynthesizer-table", epsilon, build, state, scales, (D, D2))


MECHANISMS = [
    _sketch(CountMinSketch, 1.0),
    _sketch(CountSketch, 1.0),
    _privhp("add-remove", 1.0),
    _privhp("replace", 1.0),
    _privhp_table(1.0),
    _grid(1.0),
    _marginal_table(1.0),
]


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


@pytest.mark.parametrize("mech", MECHANISMS, ids=[m.name for m in MECHANISMS])
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
