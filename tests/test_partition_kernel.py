"""The compiled level of a StreamingPrivTree step (``sketchsyn.kernels._partition``) against
the numpy reference: the same seed gives the same partition, counts and atoms on both paths
(``kernels.numpy_only()``), and the kernel refuses wrong arguments."""

from __future__ import annotations

import numpy as np
import pytest

from sketchsyn import BitDomain, Box, StreamingPrivTree, kernels

pytestmark = pytest.mark.skipif(not kernels.enabled(), reason=kernels.why())


def _state(tree: StreamingPrivTree) -> dict:
    atoms = tree._open_atoms()
    return {
        "level": tree._level.copy(),
        "prefix": tree._prefix.copy(),
        "count": tree._count.copy(),
        "atoms": atoms.copy(),
    }


def _run(make, feed, numpy: bool) -> list[dict]:
    def go() -> list[dict]:
        tree = make()
        states = []
        for kind, X in feed:
            if kind == "+":
                tree.update_many(X)
            elif kind == "-":
                tree.remove_many(X)
            else:
                tree.skip(X)
            states.append(_state(tree))
        return states

    if numpy:
        with kernels.numpy_only():
            return go()
    return go()


def _points(n: int, seed: int, d: int = 2) -> np.ndarray:
    g = np.random.default_rng(seed)
    centres = g.random((4, d))
    X = centres[g.integers(0, 4, n)] + g.normal(0, 0.05, (n, d))
    return X.clip(0, 1)


CASES = {
    "binary": (lambda: StreamingPrivTree(Box.unit(2), 1.0, horizon=60_000, releases=16, rng=3)),
    "fanout 4": (
        lambda: StreamingPrivTree(
            Box.unit(2), 2.0, horizon=60_000, releases=8, fanout=4, refine=2, rng=4
        )
    ),
    # a small memory: the leaves' cap acts (the reference's cap path from the kernel's
    # decisions)
    "capped": (
        lambda: StreamingPrivTree(
            Box.unit(2), 50.0, horizon=60_000, releases=8, memory_bytes=600, refine=1, rng=5
        )
    ),
    "shallow": (
        lambda: StreamingPrivTree(
            Box.unit(3), 4.0, horizon=60_000, releases=12, max_depth=9, steps_per_release=2, rng=6
        )
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_compiled_level_gives_the_reference_state(case: str) -> None:
    make = CASES[case]
    d = make().domain.d
    feed = [
        ("+", _points(20_000, 1, d)),
        ("-", _points(3_000, 1, d)),
        (1, 777),
        ("+", _points(25_000, 2, d)),
        (1, 5_000),
    ]
    fast, ref = _run(make, feed, False), _run(make, feed, True)
    for a, b in zip(fast, ref, strict=True):
        for key in a:
            assert a[key].dtype == b[key].dtype and np.array_equal(a[key], b[key]), (case, key)


def test_the_compiled_level_on_a_bit_domain_with_deletions() -> None:
    def make() -> StreamingPrivTree:
        return StreamingPrivTree(BitDomain(16), 1.0, horizon=40_000, releases=10, rng=9)

    keys = np.random.default_rng(2).zipf(1.3, 30_000) % 2**16
    feed = [("+", keys[:20_000].reshape(-1, 1)), ("-", keys[:5_000].reshape(-1, 1)), (1, 100)]
    fast, ref = _run(make, feed, False), _run(make, feed, True)
    for a, b in zip(fast, ref, strict=True):
        for key in a:
            assert np.array_equal(a[key], b[key]), key


def _args(n: int = 3) -> dict:
    """A valid call: one leaf of 4 atoms at level 0 (depth 4, two atom levels)."""
    return dict(
        start=np.zeros(1, np.uint64),
        first=np.zeros(1, np.int64),
        shift=np.full(1, 2, np.uint64),
        mask=np.full(1, 3, np.uint64),
        r=np.full(1, 2, np.int64),
        leaf_level=np.zeros(1, np.int64),
        cum_score=np.arange(5, dtype=np.float64),
        active=np.zeros(n, np.uint64),
        a0=np.zeros(n, np.int64),
        a1=np.full(n, 4, np.int64),
        noise=np.zeros(n, np.int64),
        level=0,
        depth=4,
        k=1,
        beta=2,
        bias=0.0,
        floor=-1.0,
        theta=0.0,
        room_left=100,
        split=np.zeros(n, np.uint8),
        stay=np.zeros(n, np.uint64),
        stay_a0=np.zeros(n, np.int64),
        stay_a1=np.zeros(n, np.int64),
        kids=np.zeros(2 * n, np.uint64),
        kids_a0=np.zeros(2 * n, np.int64),
        kids_a1=np.zeros(2 * n, np.int64),
    )


def test_the_kernel_splits_and_finds_the_children_atoms() -> None:
    args = _args(1)
    got = kernels.partition.tree_level(*args.values())
    assert got == (1, 0, 2)  # score 4 > 0: the root splits into two nodes of 2 atoms each
    assert args["kids"].tolist() == [0, 1]
    assert args["kids_a0"].tolist() == [0, 2] and args["kids_a1"].tolist() == [2, 4]
    args = _args(1) | {"room_left": 0}
    assert kernels.partition.tree_level(*args.values()) == (1, -1, -1)  # the cap acts


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"a0": np.zeros(2, np.int64)}, ValueError),  # one length short
        ({"a1": np.full(3, 9, np.int64)}, IndexError),  # atoms past the running sums
        ({"a0": np.full(3, -1, np.int64)}, IndexError),
        ({"first": np.zeros(2, np.int64)}, ValueError),  # the layout's arrays disagree
        ({"a0": np.zeros(3, np.int32)}, ValueError),  # a wrong dtype
        ({"active": np.zeros(3, np.int64)}, ValueError),
        ({"beta": 4}, ValueError),
        ({"level": 5}, ValueError),
        ({"kids": np.zeros(1, np.uint64)}, ValueError),  # no room for the children
        ({"stay": np.zeros(0, np.uint64), "noise": np.full(3, -100, np.int64)}, ValueError),
        ({"cum_score": np.zeros(0)}, ValueError),
    ],
)
def test_the_kernel_checks_its_arguments(change: dict, error: type) -> None:
    args = _args() | change
    with pytest.raises(error):
        kernels.partition.tree_level(*args.values())


# ------------------------------------------------------------------ the online synthesizer's sort
@pytest.mark.parametrize("bits", [1, 5, 17, 60])
def test_by_next_bit_gives_each_level_s_stable_sort(bits: int) -> None:
    """Level after level from the batch in step order, the records sorted by cell are those of
    ``np.argsort(prefix, kind="stable")`` (the banks' sort by cell)."""
    g = np.random.default_rng(bits)
    codes = g.integers(0, 2**bits, 20_000, dtype=np.uint64) >> np.uint64(g.integers(0, bits))
    times = np.arange(codes.size, dtype=np.int64) + 11
    now, tm = codes, times
    for j in range(1, bits + 1):
        out = np.empty_like(now), np.empty_like(tm), np.empty(now.size, np.int64)
        kernels.partition.by_next_bit(now, tm, bits - j, *out)
        prefix = codes >> np.uint64(bits - j)
        order = np.argsort(prefix, kind="stable")
        assert np.array_equal(out[1], times[order]) and np.array_equal(out[2], prefix[order])
        now, tm = out[0], out[1]


def test_by_next_bit_checks_its_arguments() -> None:
    c, t = np.array([1, 0], np.uint64), np.arange(2)
    out = np.empty(2, np.uint64), np.empty(2, np.int64), np.empty(2, np.int64)
    with pytest.raises(ValueError, match="not sorted"):  # runs of c >> 1 must ascend
        kernels.partition.by_next_bit(np.array([2, 0], np.uint64), t, 0, *out)
    with pytest.raises(ValueError):
        kernels.partition.by_next_bit(c, t[:1], 0, *out)
    with pytest.raises(ValueError):
        kernels.partition.by_next_bit(c, t, 63, *out)
    with pytest.raises(ValueError):
        kernels.partition.by_next_bit(c.astype(np.int64), t, 0, *out)
    with pytest.raises(ValueError):
        kernels.partition.by_next_bit(c, t, 0, out[0], out[1], np.empty(3, np.int64))


@pytest.mark.parametrize(
    ("domain", "eps", "sizes"),
    [
        (BitDomain(12), 1.0, [1, 3000, 50, 20_000]),  # d = 1: new levels replay the history
        (Box.unit(3), 0.3, [7_000, 1, 33_000]),
        (Box.unit(2), 4.0, [65_536, 4_000]),  # a first batch across many time levels
    ],
)
def test_online_banks_take_the_same_states_on_both_paths(domain, eps, sizes) -> None:
    """The compiled path (records sorted level by level, by_next_bit) and the numpy path
    (each bank sorts its records) give every bank the same arrays."""
    from sketchsyn import OnlineSynthesizer

    g = np.random.default_rng(5)
    fast, ref = (OnlineSynthesizer(domain, eps, rng=8) for _ in range(2))
    for n in sizes:
        X = g.integers(0, 2**12, (n, 1)) if domain.d == 1 else g.random((n, domain.d)) ** 2
        fast.update_many(X)
        with kernels.numpy_only():
            ref.update_many(X)
    with kernels.numpy_only():
        want = ref.noisy_levels()
    got = fast.noisy_levels()
    for g_, w in zip(got, want, strict=True):
        assert np.array_equal(g_, w)
    for a, b in zip(fast._banks, ref._banks, strict=True):
        if a is None:
            assert b is None
            continue
        for key in a._ARRAYS:
            assert np.array_equal(getattr(a, "_" + key), getattr(b, "_" + key)), key
