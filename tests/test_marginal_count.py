"""A table release fitted to its noisy row count: the count drawn first, ordered columns' one-way
bins merged to what it supports, and the parts the user left to the rule (``singles_share``,
``rounds``) chosen for it instead of for ``expected_n``.

* the count's budget is fixed before the rest and the release's plan keeps it, the parts sum
  to at most ε as exact rationals, and a release plans for the count, not for ``expected_n``;
* bins: a wrong ``expected_n`` (10⁶ for 20,000 rows) gives the release the bins the true count
  gives, categorical columns keep theirs, and a count that supports the state's bins keeps them;
* bytes: the count and the rule round-trip, and forged counts, rules and bins are refused.
(The count's own privacy audit, and its 2× under-noised build, are in ``test_privacy_audit``.)
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sketchsyn import MarginalDistribution, MarginalSynthesizer, Schema
from sketchsyn.errors import SerializationError
from sketchsyn.io.serial import pack, read
from sketchsyn.synth.marginal.budget import COUNT_SHARE, ReleasePlan, default_release
from sketchsyn.synth.marginal.planner import release_bits

SCHEMA = Schema(
    [
        {"name": "x", "kind": "numeric", "low": 0, "high": 100},
        {"name": "t", "kind": "integer", "low": 0, "high": 1023},
        {"name": "c", "kind": "categorical", "categories": [f"k{i}" for i in range(12)]},
        {"name": "b", "kind": "boolean"},
    ]
)


def _rows(n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    c = rng.integers(0, 12, n)
    x = np.clip(rng.normal(20 + 5 * c, 4), 0, 100)
    return {
        "x": x,
        "t": np.clip((x * 8).astype(int) + rng.integers(0, 50, n), 0, 1023),
        "c": np.array([f"k{i}" for i in range(12)])[c],
        "b": x > 50,
    }


def _released(expected_n, n=20_000, epsilon=0.1, seed=1, **kw) -> tuple:
    syn = MarginalSynthesizer(SCHEMA, epsilon, expected_n=expected_n, rng=seed, **kw)
    syn.update_many(_rows(n))
    return syn, syn.release()


# ------------------------------------------------------------------ the budget
@settings(max_examples=60, deadline=None)
@given(
    d=st.integers(2, 20),
    epsilon=st.floats(0.01, 50),
    s1=st.floats(0.05, 0.5),
    s2=st.floats(0.01, 0.25),
    rounds=st.integers(0, 200),
    other=st.integers(0, 200),
)
def test_the_count_is_fixed_first_and_the_parts_fit_exactly(d, epsilon, s1, s2, rounds, other):
    plan = ReleasePlan.make(d, epsilon, s1, s2, rounds, count_share=COUNT_SHARE)
    again = ReleasePlan.make(d, epsilon, 0.5, s2, other, count_share=COUNT_SHARE)
    assert plan.count_epsilon == again.count_epsilon == COUNT_SHARE * epsilon
    for p in (plan, again):
        assert p.total_fraction() <= 1
        spent = (
            d * Fraction(p.singles_epsilon)
            + p.measured * Fraction(p.pair_epsilon)
            + p.selections * Fraction(p.select_epsilon)
            + Fraction(p.count_epsilon)
        )
        assert spent <= Fraction(epsilon)
    assert ReleasePlan.make(d, epsilon, s1, s2, rounds).count_epsilon == 0.0


def test_the_release_plans_for_its_count_not_for_expected_n() -> None:
    syn, dist = _released(10**6)
    plan, before = dist._selected.plan, MarginalSynthesizer(SCHEMA, 0.1, expected_n=10**6).plan
    assert before.rounds > 0 and before.count_epsilon == plan.count_epsilon
    share, rounds = default_release(4, 0.1, dist._selected.count)
    assert (rounds, share) == (plan.rounds, 0.5) and plan.singles_epsilon == pytest.approx(
        share * 0.1 / 4
    )
    assert syn.plan == plan and syn.epsilon_parts == dist.epsilon_parts
    assert abs(dist._selected.count - 20_000) < 20 * plan.count_scale
    assert dist.noisy_row_count == dist._selected.count
    # given shares and rounds stay as given: the count only fits the bins
    syn2, dist2 = _released(10**6, singles_share=0.3, rounds=1)
    assert syn2._rule == () and dist2._selected.plan == syn2.plan
    assert dist2._selected.plan.rounds == 1


def test_no_count_when_nothing_is_fitted_to_it() -> None:
    cats = Schema(
        [
            {"name": "c", "kind": "categorical", "categories": ["a", "b", "c"]},
            {"name": "b", "kind": "boolean"},
            {"name": "d", "kind": "boolean"},
        ]
    )
    syn = MarginalSynthesizer(cats, 1.0, singles_share=0.4, rounds=0, rng=0)
    assert syn.plan.count_epsilon == 0 and syn.epsilon_parts["count"] == 0
    syn.update_many({"c": ["a", "b"] * 50, "b": [True] * 100, "d": [False, True] * 50})
    dist = syn.release()
    assert (
        dist._selected.count is None
        and "count" not in read(dist.to_bytes(), "MarginalDistribution").arrays
    )
    assert "row count" not in syn.explain() and dist.noisy_row_count is None


# ------------------------------------------------------------------ bins
def test_a_wrong_expected_n_gets_the_bins_of_the_count() -> None:
    syn, dist = _released(10**6)
    truth, true_dist = _released(20_000)
    state, released = syn._layout, dist._layout
    assert released.fine[0] < state.fine[0] and released.fine[1] < state.fine[1]
    assert released.fine[2:] == state.fine[2:]  # categorical and boolean: every value kept
    assert all(c <= f for c, f in zip(released.coarse, released.fine, strict=True))
    expected = release_bits(
        state.coarse,
        state.fine,
        (True, True, False, False),
        dist._selected.count,
        dist._selected.plan.single_scale,
        dist._selected.plan.pair_scale,
    )
    assert (released.coarse, released.fine) == expected
    # the true n's release measures one-way bins as coarse (within a bit: the noisy count)
    assert abs(true_dist._layout.fine[0] - released.fine[0]) <= 1
    assert len(dist.sample(1000, rng=0)) == 1000
    everything = dist.count([0, 0, 0, 0], [100, 1023, 11, 1])
    assert everything == pytest.approx(dist.total, rel=1e-6)


def test_a_count_that_supports_the_state_keeps_its_bins() -> None:
    syn, dist = _released(200_000, n=200_000, epsilon=10.0)
    assert dist._layout.fine == syn._layout.fine and dist._layout.coarse == syn._layout.coarse


# ------------------------------------------------------------------ bytes
def _forge(blob: bytes, meta=None, arrays=None, drop=()) -> bytes:
    got = read(blob, "MarginalDistribution")
    out = {k: v for k, v in dict(got.arrays).items() if k not in drop} | (arrays or {})
    return pack("MarginalDistribution", got.version, dict(got.meta) | (meta or {}), out,
                state="private")  # fmt: skip


def test_the_count_and_the_rule_round_trip_and_forgeries_are_refused() -> None:
    syn, dist = _released(10**6, n=5000)
    blob = dist.to_bytes()
    back = MarginalDistribution.from_bytes(blob)
    assert back == dist and back._selected.count == dist._selected.count
    assert back._layout.fine == dist._layout.fine
    state_blob = syn.to_bytes()
    again = MarginalSynthesizer.from_bytes(state_blob)
    assert again._rule == syn._rule == ("singles_share", "rounds")
    assert again.to_bytes() == state_blob and again.release() == dist
    meta = read(blob, "MarginalDistribution").meta
    plan, params = dict(meta["plan"]), dict(meta["params"])
    no_count = {k: v for k, v in plan.items() if k != "count_epsilon"}
    cases = [
        (None, None, ("count",), "'count'"),
        (None, {"count": np.array([2**60], np.int64)}, (), "'count'"),
        ({"plan": plan | {"count_epsilon": -1.0}}, None, (), "'count_epsilon'"),
        ({"plan": no_count}, None, (), "'plan'"),
        ({"params": params | {"column_bits": [[1, 1]] * 4}}, None, (), "'column_bits'"),
        ({"params": params | {"rule": ["rounds", "singles_share"]}}, None, (), "'rule'"),
    ]
    for forged_meta, forged_arrays, drop, named in cases:
        with pytest.raises(SerializationError, match=named):
            MarginalDistribution.from_bytes(_forge(blob, forged_meta, forged_arrays, drop))
    got = read(state_blob, "MarginalSynthesizer")
    bad = pack(
        "MarginalSynthesizer",
        got.version,
        dict(got.meta) | {"rule": ["bogus"]},
        dict(got.arrays),
        state="trusted",
    )
    with pytest.raises(SerializationError, match="'rule'"):
        MarginalSynthesizer.from_bytes(bad)
    meta = {k: v for k, v in got.meta.items() if k != "rule"}
    gone = pack("MarginalSynthesizer", got.version, meta, dict(got.arrays), state="trusted")
    with pytest.raises(SerializationError, match="'rule' is missing"):
        MarginalSynthesizer.from_bytes(gone)
    # a version-2 state has no rule: it loads, and its release keeps its shares and rounds
    old = pack("MarginalSynthesizer", 2, meta, dict(got.arrays), state="trusted")
    assert MarginalSynthesizer.from_bytes(old)._rule == ()


def test_the_count_is_scaled_for_a_privacy_unit() -> None:
    """With a privacy unit (``L`` rows kept per unit) the count moves by up to ``2L`` between
    neighbours, as every table does: its scale is ``2L`` times the event-level one."""
    event = MarginalSynthesizer(SCHEMA, 1.0, expected_n=10_000)
    user = MarginalSynthesizer(SCHEMA, 1.0, expected_n=10_000, unit="client", max_rows=4)
    assert event.noise_scales["count"] == pytest.approx(1 / (COUNT_SHARE * 1.0))
    assert user.noise_scales["count"] == pytest.approx(8 * event.noise_scales["count"])
    assert user.plan.count_epsilon == event.plan.count_epsilon == COUNT_SHARE
