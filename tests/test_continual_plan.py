"""ContinualPrivHP's memory planner (sketchsyn.synth.continual.plan)."""

from __future__ import annotations

import numpy as np
import pytest

from sketchsyn import Box, ContinualPrivHP, PrivHP
from sketchsyn.errors import ParameterError
from sketchsyn.evaluate.metrics import wasserstein1
from sketchsyn.synth import continual_plan as cp

DOM = Box.unit(2)


@pytest.mark.parametrize("budget", [20_000, 60_000, 256 * 1024, 2**20])
@pytest.mark.parametrize("eps,n", [(0.5, 4096), (1.0, 16_384), (4.0, 327_346)])
def test_plan_fits_its_budget(budget: int, eps: float, n: int) -> None:
    T = max(n, 2**18)
    p = ContinualPrivHP.plan(DOM, eps, budget, T, expected_n=n, releases=8)
    assert p.nbytes <= budget
    expect = ContinualPrivHP.memory_bytes(
        p.k, p.width, p.sketch_depth, p.depth, T, counter="kary", releases=8
    )
    assert p.nbytes == expect
    if budget <= 256 * 1024:  # build it (the larger ones cost time, not information)
        c = ContinualPrivHP.for_memory(DOM, eps, budget, T, expected_n=n, releases=8, rng=0)
        assert c.nbytes == p.nbytes <= budget
        assert (c.depth, c.k, c.width, c.releases) == (p.depth, p.k, p.width, 8)


def test_plan_without_schedule_and_release_every() -> None:
    for kw in ({}, {"release_every": 1000}):
        p = cp.plan(DOM, 1.0, 2**20, 2**16, expected_n=2**14, **kw)
        assert p.nbytes <= 2**20
        assert ContinualPrivHP(DOM, 1.0, **p.kwargs(), rng=0).nbytes == p.nbytes


@pytest.mark.parametrize(
    "args,kwargs,name",
    [
        ((DOM, 0.0, 2**18, 2**18), {}, "epsilon"),
        ((DOM, 1.0, 0, 2**18), {}, "memory_bytes"),
        ((DOM, 1.0, 100, 2**18), {}, "memory_bytes"),
        ((DOM, 1.0, 2**18, 0), {}, "horizon"),
        ((DOM, 1.0, 2**18, 2**18), {"expected_n": 0}, "expected_n"),
        ((DOM, 1.0, 2**18, 2**18), {"releases": 0}, "releases"),
        ((DOM, 1.0, 2**18, 2**18), {"releases": 8, "release_every": 10}, "release_every"),
        (("not a domain", 1.0, 2**18, 2**18), {}, "domain"),
    ],
)
def test_plan_refuses_bad_arguments(args: tuple, kwargs: dict, name: str) -> None:
    with pytest.raises((ParameterError, TypeError, ValueError), match=name):
        ContinualPrivHP.plan(*args, **kwargs)


def test_plan_is_deterministic() -> None:
    a = cp.plan(DOM, 1.0, 256 * 1024, 2**18, expected_n=16_384, releases=8)
    b = cp.plan(DOM, 1.0, 256 * 1024, 2**18, expected_n=16_384, releases=8)
    assert a == b and a.explain() == b.explain() and a.kwargs() == b.kwargs()


def test_full_counters_at_small_eps_n_and_sketches_at_large() -> None:
    small = cp.plan(DOM, 0.5, 256 * 1024, 2**18, expected_n=4096, releases=8)
    assert small.sketch_levels == 0 and small.k == 2**small.depth
    large = cp.plan(DOM, 4.0, 256 * 1024, 327_346, expected_n=327_346, releases=8)
    assert large.sketch_levels > 0 and large.width >= cp.MIN_WIDTH
    assert large.depth > large.full_depth
    # The depth grows with ε·n.
    depths = [
        cp.plan(DOM, eps, 2**22, 2**20, expected_n=n, releases=8).target_depth
        for eps, n in [(0.5, 2**12), (1.0, 2**14), (4.0, 2**16), (4.0, 2**20)]
    ]
    assert depths == sorted(depths) and depths[0] < depths[-1]


def test_explain_names_the_values() -> None:
    for n in (16_384, 327_346):
        p = cp.plan(DOM, 4.0, 256 * 1024, 327_346, expected_n=n, releases=8)
        text = p.explain()
        for value in (f"depth = {p.depth}", f"k = {p.k}", f"{p.nbytes:,} bytes", "releases = 8"):
            assert value in text, (value, text)
        if p.sketch_levels:
            assert f"width = {p.width}" in text


def _old_rule(eps: float, budget: int, T: int) -> dict:
    """The benchmark's hand rule before this planner: k = 64, PrivHP.plan's depth for the
    stream's events, the widest width ≤ 256 that fits."""
    depth = PrivHP.plan(DOM, eps, budget, T).depth
    width = max(
        w
        for w in range(1, 257)
        if ContinualPrivHP.memory_bytes(64, w, 3, depth, T, counter="kary", releases=8) <= budget
    )
    return dict(k=64, width=width, sketch_depth=3, depth=depth, horizon=T, releases=8)


def _mean_w1(kwargs: dict, X: np.ndarray, eps: float, seeds: range) -> float:
    """Mean W1 over releases 1, 4, 8 and ``seeds``: ``X`` inserted in the first epoch, empty
    steps after (paired data draws across rules)."""
    T = kwargs["horizon"]
    out = []
    for seed in seeds:
        c = ContinualPrivHP(DOM, eps, **kwargs, rng=seed)
        c.update_many(X)
        for e in range(1, 9):
            c.skip(e * T // 8 - c.t)
            if e in (1, 4, 8):
                rng = np.random.default_rng(1000 * seed + e)
                sub = X[rng.choice(len(X), 600, replace=False)]
                w = wasserstein1(sub, c.release(), DOM, method="ot", n_samples=600, rng=e)
                out.append(w.value)
    return float(np.mean(out))


def test_planned_beats_the_old_rule_on_a_generated_mixture() -> None:
    """A seeded accuracy check: on a three-component Gaussian mixture (not a benchmark stream)
    of 8 192 live records, the plan's W1 is clearly below the old hand rule's."""
    rng = np.random.default_rng(7)
    n, eps, budget = 8192, 1.0, 256 * 1024
    centres = np.array([[0.3, 0.3], [0.7, 0.4], [0.5, 0.75]])
    X = np.clip(centres[rng.integers(0, 3, n)] + 0.06 * rng.standard_normal((n, 2)), 0, 0.999)
    T = 16 * n  # events of a stream that moves its records (deletions and insertions)
    planned = ContinualPrivHP.plan(DOM, eps, budget, T, expected_n=n, releases=8).kwargs()
    new = _mean_w1(planned, X, eps, range(3))
    old = _mean_w1(_old_rule(eps, budget, T), X, eps, range(3))
    assert new < 0.9 * old, (new, old)
