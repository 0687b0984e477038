"""PrivHP's memory planner (issue 23): PrivHP.plan, the Plan record and PrivHP.for_memory."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sketchsyn import BitDomain, Box, PrivHP
from sketchsyn.errors import ParameterError
from sketchsyn.synth import planner
from sketchsyn.synth.privhp.planner import Plan

SMALLEST = PrivHP.memory_bytes(64, 1, 3, 1)


@settings(max_examples=300, deadline=None)
@given(
    d=st.integers(1, 12),
    eps=st.floats(1e-3, 100.0),
    n=st.integers(1, 2**40),
    budget=st.integers(SMALLEST, 2**28),
)
def test_the_plan_fits_the_bytes(d, eps, n, budget):
    p = PrivHP.plan(Box.unit(d), eps, budget, n)
    assert 1 <= p.depth <= 64
    assert p.nbytes <= budget
    assert p.nbytes == PrivHP.memory_bytes(
        p.k, p.width, p.sketch_depth, p.depth, counter_depth=p.counter_depth
    )
    assert p.nbytes <= p.useful_bytes or p.width == 1
    assert p.counter_depth == PrivHP.auto_counter_depth(p.k, p.width, p.sketch_depth, p.depth)
    assert p.depth <= p.target_depth


@pytest.mark.parametrize(
    "d, eps, n, budget",
    [(1, 1.0, 1000, 2_500), (2, 1.0, 2**18, 40_000), (3, 0.1, 327_346, 262_144),
     (4, 10.0, 2**20, 1 << 20), (8, 1.0, 2**16, 100_000)],
)  # fmt: skip
def test_for_memory_builds_the_plan(d, eps, n, budget):
    p = PrivHP.plan(Box.unit(d), eps, budget, n)
    php = PrivHP.for_memory(Box.unit(d), eps, budget, expected_n=n, rng=0)
    assert php.nbytes == p.nbytes <= budget
    got = (php.k, php.width, php.sketch_depth, php.depth, php.counter_depth, php.release_k)
    assert got == (p.k, p.width, p.sketch_depth, p.depth, p.counter_depth, p.release_k)


def test_the_depth_grows_with_d_and_with_epsilon():
    """The documented directions: more coordinates or more budget, a deeper tree."""
    n, budget = 327_346, 1 << 20
    by_d = [PrivHP.plan(Box.unit(d), 1.0, budget, n).depth for d in range(1, 9)]
    assert by_d == sorted(by_d) and by_d[-1] > by_d[2] > by_d[0], by_d
    by_eps = [PrivHP.plan(Box.unit(3), e, budget, n).depth for e in (1e-3, 1e-2, 0.1, 1, 10)]
    assert by_eps == sorted(by_eps) and by_eps[-1] > by_eps[0], by_eps
    # and with n, like ε (only ε·n enters the noise term)
    by_n = [PrivHP.plan(Box.unit(3), 1.0, budget, m).depth for m in (100, 10**4, 10**6)]
    assert by_n == sorted(by_n) and by_n[-1] > by_n[0], by_n


def test_the_depth_is_the_target_when_the_bytes_allow_it():
    p = PrivHP.plan(Box.unit(3), 1.0, 4 << 20, 327_346)
    assert p.depth == p.target_depth == planner.target_depth(3, 1.0, 327_346, 64)
    small = PrivHP.plan(Box.unit(3), 1.0, 20_000, 327_346)
    assert small.depth < p.depth and "lowered" in small.explain()


@pytest.mark.parametrize("d", [2, 3, 4, 6, 8])
@pytest.mark.parametrize("eps", [0.1, 1.0, 10.0])
def test_the_target_depth_follows_the_fitted_rule(d, eps):
    """The rule fitted on generated data (d = 2 ... 8, ε = 0.1, 1, 10), written out."""
    n = 327_346
    base = math.ceil(math.log2(eps * n))
    want = min(d * planner.BITS_PER_COORDINATE, base + planner.LEVELS_PER_EXTRA_DIMENSION * (d - 1))
    assert planner.target_depth(d, eps, n, 64) == want
    # with bytes to spare the plan takes it, and says so in explain()
    p = PrivHP.plan(Box.unit(d), eps, 64 << 20, n)
    assert p.depth == p.target_depth == want
    assert f"target {want} = min({d}·{planner.BITS_PER_COORDINATE} bits" in p.explain()


FIT_FILES = [
    "planner_fit.txt", "planner_fit_tight_d8.txt", "planner_fit_mixed.txt",
    "planner_fit_tight_release1.txt", "planner_fit_tight_release4.txt",
    "planner_fit_mixed_release1.txt", "planner_fit_mixed_release4.txt",
]  # fmt: skip


def test_the_constants_are_the_fit_of_the_saved_generated_curves(monkeypatch, capsys):
    """The refit from the curves kept in benchmarks/results gives the planner's constants."""
    import importlib
    from pathlib import Path

    bench = Path(__file__).resolve().parents[1] / "benchmarks"
    monkeypatch.syspath_prepend(str(bench))
    bp = importlib.import_module("bench_planner")
    curves = {}
    for name in FIT_FILES:
        family, factor = bp.read_header(str(bench / "results" / name))
        for (d, eps), curve in bp.read_curves(str(bench / "results" / name)).items():
            curves.setdefault((family, factor, d, eps), {}).update(curve)
    assert {d for _, _, d, _ in curves} == {2, 3, 4, 6, 8}
    bp.fit_rule(curves, 2**18)
    fitted = [line for line in capsys.readouterr().out.splitlines() if "fitted" in line]
    assert len(fitted) == 1
    want = (
        f"BITS_PER_COORDINATE = {planner.BITS_PER_COORDINATE}, "
        f"LEVELS_PER_EXTRA_DIMENSION = {planner.LEVELS_PER_EXTRA_DIMENSION}, "
        f"RELEASE_FACTOR = {planner.RELEASE_FACTOR:g} "
    )
    assert want in fitted[0], fitted[0]
    # and at d = 8, ε = 1, n = 327,346 that is depth 54 in a generous budget
    assert PrivHP.plan(Box.unit(8), 1.0, 64 << 20, 327_346).depth == 54


@pytest.mark.parametrize("d", [3, 6, 8, 12])
@pytest.mark.parametrize("budget", [20_000, 100_000, 262_144, 1 << 20])
def test_high_dimensional_plans_fit_and_grow_the_stated_cells(d, budget):
    for eps in (0.1, 1.0, 10.0):
        p = PrivHP.plan(Box.unit(d), eps, budget, 327_346)
        assert p.nbytes <= budget
        assert p.release_k == max(p.k, math.floor(planner.RELEASE_FACTOR * p.width))
        assert planner.RELEASE_MIN_D <= d
        assert f"release_k = {p.release_k} " in p.explain()
        php = PrivHP(Box.unit(d), eps, rng=0, **p.kwargs())
        assert php.nbytes == p.nbytes and php.release_k == p.release_k


@pytest.mark.parametrize("d", [1, 2])
def test_low_dimensional_plans_keep_the_default_release(d):
    # Below RELEASE_MIN_D the planner keeps PrivHP's default release.
    p = PrivHP.plan(Box.unit(d), 1.0, 262_144, 327_346)
    assert p.release_k == max(p.k, p.width // 4) and "width // 4" in p.explain()


def test_explain_names_every_chosen_value():
    p = PrivHP.plan(Box.unit(3), 1.0, 262_144, 327_346)
    text = p.explain()
    for name, value in [
        ("depth", p.depth), ("width", p.width), ("sketch_depth", p.sketch_depth),
        ("counter_depth", p.counter_depth), ("k", p.k), ("release_k", p.release_k),
    ]:  # fmt: skip
        assert f"{name} = {value}" in text, (name, text)
    assert f"{p.nbytes:,}" in text and f"{p.useful_bytes:,}" in text
    assert "d = 3" in text and "ε = 1" in text


def test_the_plan_is_a_frozen_record_with_constructor_keywords():
    p = PrivHP.plan(Box.unit(2), 1.0, 40_000, 2**18)
    assert isinstance(p, Plan)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.depth = 3  # type: ignore[misc]
    php = PrivHP(Box.unit(2), 1.0, rng=0, **p.kwargs())
    assert php.nbytes == p.nbytes


def test_a_budget_above_what_helps_is_stated_and_not_spent():
    big = PrivHP.plan(Box.unit(2), 0.1, 64 << 20, 10_000)
    assert big.useful_bytes < 64 << 20
    assert big.nbytes <= big.useful_bytes
    assert any("more than helps" in w for w in big.warnings)
    assert f"{big.useful_bytes:,}" in big.explain()
    fits = PrivHP.plan(Box.unit(2), 1.0, 40_000, 2**18)
    assert not any("more than helps" in w for w in fits.warnings)


def test_a_small_epsilon_n_is_warned_about():
    tiny = PrivHP.plan(Box.unit(4), 0.1, 262_144, 200)
    assert any("too small" in w for w in tiny.warnings), tiny.warnings
    assert tiny.signal_depth < 4
    ok = PrivHP.plan(Box.unit(4), 1.0, 262_144, 327_346)
    assert not any("too small" in w for w in ok.warnings), ok.warnings
    assert ok.signal_depth >= 4


def test_bit_domains_are_planned_too():
    p = PrivHP.plan(BitDomain.ipv4(), 1.0, 100_000, 10**6)
    assert 1 <= p.depth <= 32 and p.nbytes <= 100_000


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"epsilon": math.nan}, "epsilon"),
        ({"memory_bytes": 0}, "memory_bytes"),
        ({"memory_bytes": "256KB"}, "memory_bytes"),
        ({"memory_bytes": SMALLEST - 1}, "memory_bytes"),
        ({"expected_n": 0}, "expected_n"),
        ({"expected_n": 2.5}, "expected_n"),
        ({"domain": "box"}, "domain"),
    ],
)
def test_bad_arguments_raise_parameter_error_naming_them(kwargs, name):
    args = {"domain": Box.unit(2), "epsilon": 1.0, "memory_bytes": 40_000, "expected_n": 1000}
    args.update(kwargs)
    with pytest.raises(ParameterError, match=name):
        PrivHP.plan(**args)
    with pytest.raises(ParameterError, match=name):
        PrivHP.for_memory(**args)


def test_the_parameters_page_examples_run():
    """Every figure of docs/parameters.md's examples is what the code prints."""
    import doctest
    from pathlib import Path

    page = Path(__file__).resolve().parents[1] / "docs" / "parameters.md"
    result = doctest.testfile(str(page), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 6 and result.failed == 0, result


def test_for_memory_warns_python_users_of_a_near_uniform_release() -> None:
    """Issue 50, item 11: "Python users get no warning when a plan will release near-uniform
    data; only `Plan.warnings` and the CLI say so." ``for_memory`` warns with a
    ``UtilityWarning`` carrying the plan's sentence; a plan with signal stays silent."""
    import warnings

    from sketchsyn import UtilityWarning

    domain = Box.unit(4)
    assert any("close to uniform" in w for w in PrivHP.plan(domain, 0.1, 1 << 16, 200).warnings)
    with pytest.warns(UtilityWarning, match="close to uniform") as caught:
        PrivHP.for_memory(domain, 0.1, 1 << 16, 200, rng=0)
    assert caught[0].filename == __file__  # points at the caller's line
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        PrivHP.for_memory(Box.unit(2), 1.0, 40_000, 2**18, rng=0)
