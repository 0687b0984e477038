"""The k-ary tree counter with negative digits: exact layout, unbiasedness and variance, exact
noise calibration, skip in law, the gain over the binary tree, bytes and bad values."""

from __future__ import annotations

import math
import pickle
from fractions import Fraction

import numpy as np
import pytest
from test_counters import _chi2_same

from sketchsyn.counters import BinaryMechanism, karytree
from sketchsyn.counters import base as counters
from sketchsyn.counters.base import _noise_variance
from sketchsyn.counters.karytree import (
    KaryTreeCounter,
    _KaryEngine,
    balanced_digits,
    karytree_levels,
)
from sketchsyn.errors import InputError, ParameterError, ReleasedError, SerializationError
from sketchsyn.io.serial import header_of, pack, unpack
from sketchsyn.privacy.rng import as_source

RUNS = 10_000  # replicates per statistic
P_MIN = 1e-4


class Tape:
    """Replaces the noise sampler: draw i (over the whole test) is ``1000·i``."""

    def __init__(self) -> None:
        self.i = 0

    def __call__(self, kind, param, n, src):
        out = 1000 * np.arange(self.i + 1, self.i + 1 + n, dtype=np.int64)
        self.i += n
        return out


def _zero(kind, param, n, src):
    return np.zeros(n, dtype=np.int64)


# ------------------------------------------------------------------ digits and levels
def test_balanced_digits_and_levels():
    ts = np.arange(1, 5000)
    for k in (3, 5, 19):
        h = karytree_levels(4999, k)
        d = balanced_digits(ts, k, h)
        assert np.all(np.abs(d) <= (k - 1) // 2)
        assert np.array_equal((d * k ** np.arange(h)[:, None]).sum(axis=0), ts)
        assert (k**h - 1) // 2 >= 4999 > (k ** (h - 1) - 1) // 2
    with pytest.raises(ParameterError):
        balanced_digits(5, 3, 1)  # 5 needs two balanced ternary digits


# ------------------------------------------------------------------ exact layout
# k = 3, T = 40: h = 4 levels. Construction draws, by level, the block after centre 0:
# (0,1] = n1, (0,3] = n2, (0,9] = n3, (0,27] = n4. Level 0's window moves to centre 3 at step
# 2 (blocks (2,3] = n5 before it, (3,4] = n6 after it) and to centre 6 at step 5 ((5,6] = n7,
# (6,7] = n8); level 1's window moves to centre 9 at step 5 ((6,9] = n9, (9,12] = n10), after
# level 0's. Balanced ternary: 1 = 1, 2 = 3 − 1, 3 = 3, 4 = 3 + 1, 5 = 9 − 3 − 1,
# 6 = 9 − 3, 7 = 9 − 3 + 1.
def _hand_layout(xs: list[int]) -> list[int]:
    n = [None] + [1000 * i for i in range(1, 11)]
    s = np.cumsum(xs).tolist()
    return [
        n[1] + s[0],
        n[2] - n[5] + s[1],  # (0,3] holds x1 + x2 so far; (2,3] holds nothing yet
        n[2] + s[2],
        n[2] + n[6] + s[3],
        n[3] - n[9] - n[7] + s[4],  # (0,9] − (6,9] − (5,6]: partial sums, future cancels
        n[3] - n[9] + s[5],
        n[3] - n[9] + n[8] + s[6],
    ]


@pytest.mark.parametrize("split", [[7], [1] * 7, [3, 4], [2, 2, 3], [5, 2]])
def test_matches_hand_layout(monkeypatch, split):
    monkeypatch.setattr(counters, "_draw", Tape())
    xs = [1, 0, 2, 1, 0, 3, 1]
    c = KaryTreeCounter(1.0, 40, k=3, rng=0)
    out, pos = [], 0
    for size in split:
        out += c.update_many(xs[pos : pos + size]).tolist()
        pos += size
    assert out == _hand_layout(xs)
    assert c.query() == out[-1]


def test_update_many_in_chunks_draws_the_same_noise(monkeypatch):
    xs = np.random.default_rng(1).integers(0, 3, size=300)
    outs = []
    for chunk in (2**18, 7):
        monkeypatch.setattr(counters, "_draw", Tape())
        monkeypatch.setattr(karytree, "_CHUNK", chunk)
        c = KaryTreeCounter(1.0, 1000, k=5, rng=0)
        outs.append((c.update_many(xs), c._engine.win.copy()))
    assert np.array_equal(outs[0][0], outs[1][0]) and np.array_equal(outs[0][1], outs[1][1])


@pytest.mark.parametrize("k", [3, 5, 7, 19])
def test_releases_are_the_exact_prefix_sums_without_noise(monkeypatch, k):
    monkeypatch.setattr(counters, "_draw", _zero)
    xs = np.random.default_rng(k).integers(0, 4, size=3000)
    for split in ([3000], [1] * 150 + [2850], [7, 100, 1000, 1893]):
        c = KaryTreeCounter(1.0, 3000, k=k, rng=0)
        out, pos = [], 0
        for size in split:
            out += c.update_many(xs[pos : pos + size]).tolist()
            pos += size
        assert out == np.cumsum(xs).tolist()
    c = KaryTreeCounter(1.0, 3000, k=k, rng=0)
    c.update_many(xs[:10])
    c.skip(500)
    assert c.query() == xs[:10].sum()
    assert c.update_many(xs[510:900])[-1] == xs[:10].sum() + xs[510:900].sum()
    assert c.skip(5, releases=True).tolist() == [c.query()] * 5


# ------------------------------------------------------------------ calibration
def test_noise_scale_is_sensitivity_times_levels_over_epsilon():
    c = KaryTreeCounter(0.3, 2**20, sensitivity=3, rng=0)
    assert c.k == 19 and c.levels == 5  # (19^5 − 1)/2 = 1 238 049 ≥ 2^20 > (19^4 − 1)/2
    assert c.scale == Fraction(3 * 5) / Fraction(0.3)
    assert c.epsilon == 0.3 and c.rho is None and c.horizon == 2**20 and c.sensitivity == 3
    # h is the fewest balanced digits covering the horizon (each step is in h blocks).
    assert [karytree_levels(t, 3) for t in (1, 2, 4, 5, 13, 14, 40, 41)] == [1, 2, 2, 3, 3, 4, 4, 5]
    assert KaryTreeCounter(2.0, 40, k=3, rng=0).scale == Fraction(4, 2)


def _bank(k: int, horizon: int, epsilon: float, sensitivity: int, seed: int) -> tuple:
    """A counter and ``RUNS`` independent replicates of its engine (the same code path as
    ``update_many``, with ``RUNS`` columns instead of one)."""
    c = KaryTreeCounter(epsilon, horizon, k=k, sensitivity=sensitivity, rng=seed)
    src = as_source(seed + 1)
    return c, _KaryEngine(k, c.levels, c.scale, src, RUNS), src


@pytest.mark.parametrize(
    ("k", "horizon", "epsilon", "sensitivity"),
    [(3, 40, 1.0, 1), (5, 200, 0.5, 2), (19, 400, 1.0, 1)],
    ids=["k3", "k5-sens2", "k19"],
)
def test_releases_are_unbiased_with_formula_variance(k, horizon, epsilon, sensitivity):
    c, engine, src = _bank(k, horizon, epsilon, sensitivity, seed=11)
    xs = np.random.default_rng(0).integers(0, 3, size=horizon)
    cut = horizon // 3  # two batches: windows carried across a batch boundary
    out = np.vstack(
        [
            engine.advance(np.cumsum(np.repeat(xs[:cut, None], RUNS, 1), 0), c.scale, src),
            # The stored blocks carry the first batch's data: no offset to add.
            engine.advance(np.cumsum(np.repeat(xs[cut:, None], RUNS, 1), 0), c.scale, src),
        ]
    )
    err = out - np.cumsum(xs)[:, None]
    var = np.array([c.variance(t) for t in range(1, horizon + 1)])
    assert np.all(np.abs(err.mean(axis=1)) < 4.5 * np.sqrt(var / RUNS))
    rel = err.var(axis=1) / var - 1
    assert np.all(np.abs(rel) < 4.5 * math.sqrt(5 / RUNS)), rel
    # The formula is the block count times the exact discrete Laplace variance.
    v = _noise_variance("laplace", c.scale)
    counts = np.abs(balanced_digits(np.arange(1, horizon + 1), k, c.levels)).sum(axis=0)
    assert np.allclose(var, counts * v, rtol=1e-12)


# ------------------------------------------------------------------ skip has the law of stepping
def test_skip_has_the_law_of_stepping_over_10k_runs():
    """5 ones, then skip(37) against 37 steps of 0, then 8 ones (k = 3, T = 80, h = 5): every
    level's window moves during the span (level 0 and 1 several times, levels 2 and 3 once),
    so a skip that kept a stale window, or redrew one that did not move, is seen."""
    k, horizon, s = 3, 80, 37
    engine = _KaryEngine(k, 5, Fraction(1), None)
    moved = [engine.centre(j, 5 + s) != engine.centre(j, 5) for j in range(5)]
    assert moved == [True, True, True, True, False]
    stats = {}
    for side in ("skip", "step"):
        c, bank, src = _bank(k, horizon, 1.0, 1, seed=21 if side == "skip" else 22)
        ones = np.cumsum(np.ones((5, RUNS), dtype=np.int64), axis=0)
        bank.advance(ones, c.scale, src)
        if side == "skip":
            bank.skip(s, c.scale, src)
            first = bank.release()
        else:
            first = bank.advance(np.zeros((s, RUNS), dtype=np.int64), c.scale, src)[-1]
        after = bank.advance(np.cumsum(np.ones((8, RUNS), dtype=np.int64), axis=0), c.scale, src)
        stats[side] = {"t=42": first, **{f"t={43 + i}": after[i] for i in range(8)}}
    pvalues = {key: _chi2_same(stats["skip"][key], stats["step"][key]) for key in stats["skip"]}
    assert min(pvalues.values()) > P_MIN, pvalues
    # Means: the data (5 ones, then 8) and nothing else.
    assert abs(stats["skip"]["t=50"].mean() - 13) < 0.5


def test_scalar_skip_is_the_engine_skip():
    # The public skip is the engine's: same seed, same draws, same state.
    a, b = KaryTreeCounter(1.0, 10**6, rng=5), KaryTreeCounter(1.0, 10**6, rng=5)
    a.update_many(np.ones(100, dtype=np.int64))
    b.update_many(np.ones(100, dtype=np.int64))
    a.skip(123_456)
    b._engine.skip(123_456, b.scale, b._src)
    assert np.array_equal(a._engine.win, b._engine.win) and a.t == b.t == 123_556
    assert a.query() == int(b._engine.release()[0])


def test_skip_cost_does_not_grow_with_s():
    c = KaryTreeCounter(1.0, 2**55, rng=1)
    c.update_many([1, 1])
    c.skip(2**54)
    assert c.t == 2**54 + 2
    c.update_many([1])


# ------------------------------------------------------------------ the gain over the tree
def test_variance_against_the_binary_tree_at_two_to_the_twenty():
    """Closed forms, units 1/ε²: at T = 2^20 the k-ary tree (k = 19, h = 5, Lap_Z(5) per block)
    has max variance 2193 (binary tree 17637: 8.0× lower; Honaker 9527: 4.3×) and mean variance
    over t ≤ T 1144 (binary tree 8818: 7.7× lower)."""
    horizon = 2**20
    kary = KaryTreeCounter(1.0, horizon, rng=0)
    tree = BinaryMechanism(epsilon=1.0, horizon=horizon, rng=0)
    ts = np.arange(1, horizon + 1)
    ours = np.abs(balanced_digits(ts, 19, kary.levels)).sum(axis=0) * _noise_variance(
        "laplace", kary.scale
    )
    theirs = np.bitwise_count(ts) * tree.variance(2**19)  # popcount(t)·v
    for t in (1, 350, 2**19, 2**20 - 1, 777_777, int(np.argmax(ours)) + 1):
        assert ours[t - 1] == pytest.approx(kary.variance(t), rel=1e-12)
        assert theirs[t - 1] == pytest.approx(tree.variance(t), rel=1e-12)
    assert 2150 < ours.max() < 2250 and 17600 < theirs.max() < 17700
    assert theirs.max() / ours.max() > 7.9
    assert theirs.mean() / ours.mean() > 7.6
    honaker = BinaryMechanism(epsilon=1.0, horizon=horizon, estimator="honaker", rng=0)
    assert honaker.variance(horizon - 1) / ours.max() > 4.2


# ------------------------------------------------------------------ bytes, sizes, bad values
def test_bytes_round_trip_and_continue_identically():
    c = KaryTreeCounter(1.0, 5000, k=7, rng=1)
    c.update_many(np.ones(100, dtype=np.int64))
    blob = c.to_bytes()
    back = KaryTreeCounter.from_bytes(blob, rng=5)
    again = KaryTreeCounter.from_bytes(blob, rng=5)
    assert back.to_bytes() == blob and back.query() == c.query() and back.t == c.t
    assert header_of(blob).state == "trusted" and b"exact_state" not in blob
    assert b"pickle" not in blob
    xs = np.random.default_rng(2).integers(0, 2, size=500)
    assert np.array_equal(back.update_many(xs), again.update_many(xs))
    assert pickle.loads(pickle.dumps(c)).to_bytes() == blob
    snap = c.snapshot()
    with pytest.raises(ReleasedError):
        snap.update(1)
    for where in (len(blob) // 2, len(blob) - 3, 20):
        damaged = bytearray(blob)
        damaged[where] ^= 1
        with pytest.raises(SerializationError):
            KaryTreeCounter.from_bytes(bytes(damaged))
    with pytest.raises(SerializationError):
        KaryTreeCounter.from_bytes(blob[:-7])
    with pytest.raises(SerializationError):
        BinaryMechanism.from_bytes(blob)


def test_nbytes_formula():
    for k, horizon in ((19, 2**20), (3, 40), (7, 5000)):
        c = KaryTreeCounter(1.0, horizon, k=k, rng=0)
        assert c.nbytes == 8 * (k - 1) * c.levels + 48
        assert c._engine.win.nbytes == 8 * (k - 1) * c.levels


BAD = [[1, -1, 1], [1, float("nan")], [0.5], ["a", 1], "abc", [[1, 2]], [1, 2**62]]


def test_bad_values_are_refused_with_the_counter_unchanged():
    c = KaryTreeCounter(1.0, 1000, k=5, rng=1)
    c.update_many([1, 0, 2])
    blob, before = c.to_bytes(), c.t
    for bad in BAD:
        with pytest.raises(InputError, match="xs"):
            c.update_many(bad)
        assert c.to_bytes() == blob
    for bad in (-1, 1.5, float("nan"), "1", None):
        with pytest.raises(InputError, match=repr(bad).strip("'")):
            c.update(bad)
        assert c.to_bytes() == blob
    with pytest.raises(InputError):
        c.update_many(np.ones(998, dtype=np.int64))  # past the horizon
    with pytest.raises(InputError):
        c.skip(998)
    assert c.to_bytes() == blob
    c.update_many(np.array([True, False]))
    c.update_many([2.0, np.uint64(3)])
    assert c.t == before + 4


def test_parameters_are_checked():
    for kwargs in (
        {"epsilon": 0.0, "horizon": 10},
        {"epsilon": float("nan"), "horizon": 10},
        {"epsilon": 1.0, "horizon": 0},
        {"epsilon": 1.0, "horizon": 10, "k": 4},
        {"epsilon": 1.0, "horizon": 10, "k": 1},
        {"epsilon": 1.0, "horizon": 10, "k": 65},
        {"epsilon": 1.0, "horizon": 10, "sensitivity": 0},
        {"epsilon": 1e-12, "horizon": 10},  # noise scale past 2**30
    ):
        with pytest.raises(ParameterError):
            KaryTreeCounter(**kwargs)
    with pytest.raises(ParameterError):
        KaryTreeCounter(1.0, 10, rng=0).variance(11)
    with pytest.raises(ParameterError):
        KaryTreeCounter(1.0, 10, rng=0).skip(-1)


@pytest.mark.parametrize("secret", [0, 1])
def test_shipped_state_and_a_later_release_differ_by_an_exact_count(secret):
    """Why KaryTreeCounter's state is trusted. With k = 3, level 1's block (0, 3] is in the
    window from the start and holds its noise plus the data so far: ``η + x1`` in a blob shipped
    after step 1. The release at t = 3 (balanced digits [0, 1]) is that block's noisy sum
    ``η + x1 + x2 + x3``: the difference is ``x2 + x3`` exactly, whatever the noise."""
    c = KaryTreeCounter(1.0, 40, k=3, rng=4 + secret)
    c.update(1)
    blob = c.to_bytes()
    assert header_of(blob).state == "trusted"
    shipped = int(unpack(blob, "KaryTreeCounter")[3]["blocks"][1, 1])  # block (0, 3]
    c.update(secret)
    release = c.update(0)
    assert release - shipped == secret


@pytest.mark.parametrize("value", [1e-320, 1.5e308, 2.0**-31, "1"])
def test_forged_epsilon_is_refused_by_name(value):
    c = KaryTreeCounter(1.0, 40, rng=0)
    kind, version, meta, arrays = unpack(c.to_bytes(), "KaryTreeCounter")
    with pytest.raises(SerializationError, match="epsilon"):
        KaryTreeCounter.from_bytes(
            pack(kind, version, {**meta, "epsilon": value}, arrays, state="trusted")
        )
    with pytest.raises(ParameterError):
        KaryTreeCounter(value, 40)
