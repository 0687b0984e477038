"""Tests for sketchsyn.synth.tree: consistency (float and integer) and top-k growth."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sketchsyn.errors import ParameterError
from sketchsyn.synth.tree import (
    PartitionTree,
    check_consistency,
    consistent_levels,
    consistent_levels_integer,
    even_split,
    grow_partition,
    integer_split,
)

finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)
nonneg = st.floats(0, 1e6, allow_nan=False, allow_infinity=False)


def _scalar_even_split(p: float, a: float, b: float) -> tuple[float, float]:
    """Algorithm 4 of seed 002 written line by line, one node at a time (reference)."""
    a, b = max(a, 0.0), max(b, 0.0)
    lam = a + b - p
    if a - lam / 2 < 0:
        return 0.0, p
    if b - lam / 2 < 0:
        return p, 0.0
    return a - lam / 2, b - lam / 2


# ----------------------------------------------------------------------------- even split
@given(st.lists(st.tuples(nonneg, finite, finite), min_size=1, max_size=50))
def test_even_split_invariants(rows):
    p, a, b = (np.array(col) for col in zip(*rows, strict=True))
    c0, c1 = even_split(p, a, b)
    assert (c0 >= 0).all() and (c1 >= 0).all()
    np.testing.assert_allclose(c0 + c1, p, rtol=1e-12, atol=1e-6)
    # Comparable with the clamped input: both children move the same way (or stay).
    d0, d1 = c0 - np.maximum(a, 0), c1 - np.maximum(b, 0)
    assert not np.any((d0 > 1e-6) & (d1 < -1e-6)) and not np.any((d0 < -1e-6) & (d1 > 1e-6))
    # Equal to the line-by-line scalar reading of Algorithm 4.
    ref = np.array([_scalar_even_split(*r) for r in rows]).reshape(-1, 2)
    np.testing.assert_array_equal(np.column_stack([c0, c1]), ref)


def test_even_split_cases_and_inputs_untouched():
    p = np.array([10.0, 10.0, 10.0, 10.0])
    a = np.array([7.0, -3.0, 1.0, 20.0])
    b = np.array([1.0, 4.0, 15.0, 1.0])
    a0, b0 = a.copy(), b.copy()
    c0, c1 = even_split(p, a, b)
    assert c0.tolist() == [8.0, 3.0, 0.0, 10.0]
    assert c1.tolist() == [2.0, 7.0, 10.0, 0.0]
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)


def _random_levels(rng: np.random.Generator, depth: int, scale: float = 5.0) -> list[np.ndarray]:
    return [
        rng.integers(0, 40, 2**level) + rng.normal(0, scale, 2**level) for level in range(depth + 1)
    ]


@settings(max_examples=40, deadline=None)
@given(depth=st.integers(0, 8), seed=st.integers(0, 2**32 - 1))
def test_consistent_levels_invariants_and_idempotence(depth, seed):
    levels = _random_levels(np.random.default_rng(seed), depth)
    before = [lv.copy() for lv in levels]
    out = consistent_levels(levels)
    for lv, b in zip(levels, before, strict=True):
        np.testing.assert_array_equal(lv, b)  # inputs untouched
    assert out[0][0] == max(levels[0][0], 0.0)
    for level, arr in enumerate(out):
        assert arr.dtype == np.float64 and arr.shape == (2**level,)
        assert (arr >= 0).all()
        if level:
            np.testing.assert_allclose(arr[0::2] + arr[1::2], out[level - 1], atol=1e-9)
    assert PartitionTree.from_complete_levels(out).check_consistency()
    again = consistent_levels(out)
    for x, y in zip(out, again, strict=True):
        np.testing.assert_allclose(x, y, atol=1e-9)


def test_consistent_levels_rejects_bad_shapes():
    with pytest.raises(ParameterError, match="levels"):
        consistent_levels([np.array([1.0]), np.array([1.0, 2.0, 3.0])])
    with pytest.raises(ParameterError, match="levels"):
        consistent_levels([])
    with pytest.raises(ParameterError, match="levels"):
        consistent_levels([np.array([np.nan])])


# ------------------------------------------------------------------------ integer consistency
ints = st.integers(-50, 200)


@settings(max_examples=200, deadline=None)
@given(p=st.integers(0, 200), a=ints, b=ints, tie=st.integers(0, 1))
def test_integer_split_uniform_is_closest_comparable_point(p, a, b, tie):
    x, y = integer_split(p, a, b, "uniform", tie)
    x, y = int(x), int(y)
    assert x >= 0 and y >= 0 and x + y == p
    a0, b0 = max(a, 0), max(b, 0)
    assert (x - a0) * (y - b0) >= 0  # comparable
    # Brute force: no point of the discrete segment is closer in the Euclidean metric.
    xs = np.arange(p + 1)
    dist = (xs - a0) ** 2 + (p - xs - b0) ** 2
    assert (x - a0) ** 2 + (y - b0) ** 2 == dist.min()
    if dist.tolist().count(dist.min()) == 2:  # exact tie: the larger input, else child `tie`
        winner = 0 if a0 > b0 else 1 if b0 > a0 else tie
        x_star = a0 - (a0 + b0 - p) / 2
        assert x - x_star == (0.5 if winner == 0 else -0.5)


@settings(max_examples=200, deadline=None)
@given(p=st.integers(0, 200), a=ints, b=ints)
def test_integer_split_proportional_is_closest_to_the_ray(p, a, b):
    x, y = integer_split(p, a, b, "proportional")
    x, y = int(x), int(y)
    assert x >= 0 and y >= 0 and x + y == p
    a0, b0 = max(a, 0), max(b, 0)
    assert (x - a0) * (y - b0) >= 0
    xs = np.arange(p + 1)
    if a0 + b0 == 0:
        assert abs(x - y) <= 1  # even split of the parent
    else:
        # Distance to the line through 0 and (a0, b0) is ∝ |x·b0 − y·a0|.
        dist = np.abs(xs * b0 - (p - xs) * a0)
        assert abs(x * b0 - y * a0) == dist.min()


def test_integer_split_large_counts_exact():
    p, a, b = 2**40, 2**40 - 7, 2**39
    x, y = integer_split(p, a, b, "proportional")
    assert int(x) + int(y) == p
    assert int(x) == (2 * p * a + (a + b)) // (2 * (a + b))


def test_integer_split_rejects_bad_input():
    with pytest.raises(ParameterError, match="transform"):
        integer_split(3, 1, 1, "closest")
    with pytest.raises(ParameterError, match="c0"):
        integer_split(3, 1.5, 1)
    with pytest.raises(ParameterError, match="parent"):
        integer_split(-1, 1, 1)


@settings(max_examples=30, deadline=None)
@given(
    depth=st.integers(0, 8),
    seed=st.integers(0, 2**32 - 1),
    transform=st.sampled_from(["uniform", "proportional"]),
)
def test_consistent_levels_integer(depth, seed, transform):
    rng = np.random.default_rng(seed)
    levels = [rng.integers(-20, 60, 2**level) for level in range(depth + 1)]
    out = consistent_levels_integer(levels, transform)
    assert out[0][0] == max(levels[0][0], 0)
    for level, arr in enumerate(out):
        assert arr.dtype == np.int64 and (arr >= 0).all()
        if level:
            np.testing.assert_array_equal(arr[0::2] + arr[1::2], out[level - 1])
            a, b = np.maximum(levels[level][0::2], 0), np.maximum(levels[level][1::2], 0)
            assert ((arr[0::2] - a) * (arr[1::2] - b) >= 0).all()
    # Idempotent on consistent input.
    for x, y in zip(out, consistent_levels_integer(out, transform), strict=True):
        np.testing.assert_array_equal(x, y)


def test_integer_ties_alternate_between_parents():
    # Four parents of count 1, each with children (0, 0): the odd unit alternates sides.
    out = consistent_levels_integer([[4], [2, 2], [1, 1, 1, 1], [0] * 8])
    assert out[3].tolist() == [1, 0, 0, 1, 0, 1, 1, 0]


# ------------------------------------------------------------------------------- growth
def _reference_grow(top, table, k, depth):
    """Algorithm 3 of seed 002 (our reading) with dicts and scalar loops (reference)."""
    nodes = {(lv, p): float(c) for lv, arr in enumerate(top) for p, c in enumerate(arr)}
    L = len(top) - 1
    hot = list(range(2**L))
    for level in range(L + 1, depth + 1):
        new = []
        for theta in hot:
            c0, c1 = _scalar_even_split(
                nodes[(level - 1, theta)], table[level][2 * theta], table[level][2 * theta + 1]
            )
            nodes[(level, 2 * theta)], nodes[(level, 2 * theta + 1)] = c0, c1
            new += [2 * theta, 2 * theta + 1]
        hot = sorted(new, key=lambda p, lv=level: (-nodes[(lv, p)], p))[:k]
    return nodes


def _table_query(table, calls=None):
    def query(level, prefixes):
        assert prefixes.dtype == np.uint64
        if calls is not None:
            calls.append((level, prefixes.tolist()))
        return np.asarray(table[level], dtype=np.float64)[prefixes.astype(np.int64)]

    return query


def test_grow_partition_hand_example():
    # k = 2 → L = 1, depth = 3. Worked by hand from Algorithms 3 and 4:
    # level 1 raw (6, 3) under root 10: Λ = −1 → (6.5, 3.5).
    # level 2: (4, 1) under 6.5 → Λ = −1.5 → (4.75, 1.75); (5, −2→0) under 3.5 → Λ = 1.5,
    #   0 − 0.75 < 0 → (3.5, 0). Top 2 of level 2: prefixes 0 (4.75) and 2 (3.5).
    # level 3: (2, 2) under 4.75 → (2.375, 2.375); (0, 7) under 3.5 → Λ = 3.5 → (0, 3.5).
    top = consistent_levels([np.array([10.0]), np.array([6.0, 3.0])])
    assert top[1].tolist() == [6.5, 3.5]
    table = {2: [4.0, 1.0, 5.0, -2.0], 3: [2.0, 2.0, 100.0, 100.0, 0.0, 7.0, 100.0, 100.0]}
    calls: list = []
    tree = grow_partition(top, _table_query(table, calls), k=2, depth=3)
    assert calls == [(2, [0, 1, 2, 3]), (3, [0, 1, 4, 5])]
    got = {lv: (p.tolist(), c.tolist()) for lv, (p, c) in tree.levels.items()}
    assert got == {
        0: ([0], [10.0]),
        1: ([0, 1], [6.5, 3.5]),
        2: ([0, 1, 2, 3], [4.75, 1.75, 3.5, 0.0]),
        3: ([0, 1, 4, 5], [2.375, 2.375, 0.0, 3.5]),
    }
    levels, prefixes, counts = tree.leaves()
    assert levels.tolist() == [2, 2, 3, 3, 3, 3]
    assert prefixes.tolist() == [1, 3, 0, 1, 4, 5]
    assert counts.tolist() == [1.75, 0.0, 2.375, 2.375, 0.0, 3.5]
    assert tree.n_nodes == 11 and tree.max_level == 3
    assert check_consistency(tree) and tree.max_violation() == 0.0


def test_grow_partition_ties_go_to_smaller_prefix():
    top = [np.array([4.0])]
    table = {1: [2.0, 2.0], 2: [1.0, 1.0, 1.0, 1.0]}
    tree = grow_partition(top, _table_query(table), k=1, depth=2)
    assert tree.levels[2][0].tolist() == [0, 1]


def test_grow_partition_no_growth_when_depth_is_L():
    top = consistent_levels([[3.0], [1.0, 2.0]])
    tree = grow_partition(top, _table_query({}), k=2, depth=1)
    assert tree.n_nodes == 3
    assert tree.leaves()[1].tolist() == [0, 1]


def test_grow_partition_rejects_bad_query_and_depth():
    top = [np.array([4.0])]
    with pytest.raises(ParameterError, match="query"):
        grow_partition(top, lambda level, p: np.ones(p.size + 1), k=1, depth=2)
    with pytest.raises(ParameterError, match="query"):
        grow_partition(top, lambda level, p: np.full(p.size, np.nan), k=1, depth=2)
    with pytest.raises(ParameterError, match="depth"):
        grow_partition([np.array([1.0]), np.array([1.0, 0.0])], _table_query({}), k=2, depth=0)
    with pytest.raises(ParameterError, match="'k'"):
        grow_partition(top, _table_query({}), k=0, depth=2)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(k=st.integers(1, 20), extra=st.integers(0, 6), seed=st.integers(0, 2**32 - 1))
def test_grow_partition_properties(k, extra, seed):
    rng = np.random.default_rng(seed)
    L = k.bit_length() - 1
    depth = L + extra
    raw = _random_levels(rng, depth, scale=8.0)
    # Ties are common in real releases (many zero counts): round some levels to integers.
    raw = [np.round(r) if i % 2 else r for i, r in enumerate(raw)]
    top = consistent_levels(raw[: L + 1])
    table = {level: raw[level] for level in range(L + 1, depth + 1)}
    tree = grow_partition(top, _table_query(table), k, depth)

    assert tree.n_nodes <= 2 ** (L + 1) - 1 + 2 * k * (depth - L)
    assert tree.check_consistency(atol=1e-9)
    levels, prefixes, counts = tree.leaves()
    assert np.isclose(np.sum(2.0 ** -levels.astype(float)), 1.0)  # leaves partition the domain
    np.testing.assert_allclose(counts.sum(), top[0][0], rtol=1e-9, atol=1e-9)
    for level in range(L, depth):
        p, c = tree.levels[level]
        child_parents = tree.levels[level + 1][0] >> np.uint64(1)
        expanded = np.isin(p, child_parents)
        if level == L:
            assert expanded.all()
            continue
        assert expanded.sum() == min(k, p.size)
        if (~expanded).any():
            assert c[expanded].min() >= c[~expanded].max()  # the top k of the level
    # Equal to a node-by-node reference implementation.
    ref = _reference_grow(top, table, k, depth)
    got = {
        (lv, int(q)): float(v)
        for lv, (p, c) in tree.levels.items()
        for q, v in zip(p, c, strict=True)
    }
    assert got.keys() == ref.keys()
    for key, value in ref.items():
        assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-9)


def test_partition_tree_validation_and_checks():
    with pytest.raises(ParameterError, match="level 0"):
        PartitionTree({1: (np.array([0, 1]), np.array([1.0, 1.0]))})
    with pytest.raises(ParameterError, match="increasing"):
        PartitionTree({0: ([0], [2.0]), 1: ([1, 0], [1.0, 1.0])})
    with pytest.raises(ParameterError, match="2\\*\\*level"):
        PartitionTree({0: ([0], [2.0]), 1: ([0, 2], [1.0, 1.0])})
    with pytest.raises(ParameterError, match="gaps"):
        PartitionTree({0: ([0], [2.0]), 2: ([0, 1], [1.0, 1.0])})
    # A lone child, a negative count and an orphan are all caught.
    assert not PartitionTree({0: ([0], [2.0]), 1: ([0], [2.0])}).check_consistency()
    assert not PartitionTree({0: ([0], [0.0]), 1: ([0, 1], [1.0, -1.0])}).check_consistency()
    orphan = PartitionTree(
        {0: ([0], [2.0]), 1: ([0, 1], [1.0, 1.0]), 2: ([0, 1], [0.5] * 2), 3: ([4, 5], [1.0] * 2)}
    )
    assert not orphan.check_consistency()
    assert PartitionTree.from_complete_levels([[2.0], [1.0, 1.0]]).check_consistency()
