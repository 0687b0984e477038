"""StreamingPrivTree: schedule, memory, deletions, refusals, loading and privacy audits.

The two audits read the mechanism's two noise sources on neighbouring streams one insertion
apart: the split decision at the root (its outcome probabilities differ by at most ``e^{1/λ}``,
the per-test bound of PrivTree's proof) and the leaf counts of a fixed partition (integer
Laplace at ``leaf_scale``, audited with tests/test_privacy_audit.py's statistic). Each must
stay within its bound, and a build with every noise scale halved must be seen above it.
Measured (1 500 runs per stream): split ε̂ 1.73 ≤ 1/λ = 2 and 3.58 > 2 with half the noise;
leaf counts ε̂ 0.32 ≤ ε_leaf = 0.5 and 0.81 > 0.5 with half the noise.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_privacy_audit import Mechanism, _cp_bounds, audit  # tests/ is on sys.path

import sketchsyn.privacy.accounting as accounting
from sketchsyn import Box, StreamingPrivTree
from sketchsyn.errors import InputError, ParameterError, ReleasedError, SerializationError
from sketchsyn.io.serial import pack, read

TRIALS = 1000


def _blob_points(n: int, seed: int, centre: float = 0.5, sd: float = 0.1) -> np.ndarray:
    return np.random.default_rng(seed).normal(centre, sd, size=(n, 2)).clip(0, 1)


# ------------------------------------------------------------------ schedule and memory
def test_steps_close_at_the_scheduled_events() -> None:
    s = StreamingPrivTree(Box.unit(2), 1.0, horizon=100, releases=4, steps_per_release=2, rng=0)
    ends = [s._end(k) for k in range(1, 9)]
    assert ends == [12, 25, 37, 50, 62, 75, 87, 100]
    X = _blob_points(100, 1)
    seen = []
    for lo, hi in [(0, 11), (11, 12), (12, 40), (40, 100)]:
        s.update_many(X[lo:hi])
        seen.append(s.steps_closed)
    assert seen == [0, 1, 3, 8]
    with pytest.raises(InputError, match="horizon 100"):
        s.update_many(X[:1])


def test_a_batch_cut_anywhere_gives_the_same_state() -> None:
    X = _blob_points(3000, 2)
    kw = dict(horizon=3000, releases=3, steps_per_release=2, memory_bytes=8192)
    whole = StreamingPrivTree(Box.unit(2), 2.0, rng=5, **kw)
    whole.update_many(X)
    parts = StreamingPrivTree(Box.unit(2), 2.0, rng=5, **kw)
    for lo, hi in [(0, 1), (1, 499), (499, 500), (500, 2222), (2222, 3000)]:
        parts.update_many(X[lo:hi])
    assert whole == parts  # state and parameters (the lineages differ: two objects)


def test_memory_is_fixed_and_the_leaves_capped() -> None:
    s = StreamingPrivTree(
        Box.unit(2), 1000.0, horizon=40_000, releases=8, memory_bytes=4096, refine=2, rng=1
    )
    size = s.nbytes
    assert size <= 4096 and s.max_leaves == s.cells >> 2
    rng = np.random.default_rng(3)
    for _ in range(8):  # distinct points everywhere: PrivTree would split without end
        s.update_many(rng.random((5000, 2)))
        assert s.n_leaves <= s.max_leaves
        assert s.nbytes == size
    assert s.n_leaves == s.max_leaves  # the cap is what stopped it, and it is filled
    with pytest.raises(ParameterError, match="'memory_bytes'"):
        StreamingPrivTree(Box.unit(2), 1.0, horizon=10, releases=1, memory_bytes=64, refine=4)


def test_release_follows_the_data() -> None:
    X = _blob_points(20_000, 4, centre=0.3, sd=0.05)
    s = StreamingPrivTree(Box.unit(2), 2.0, horizon=20_000, releases=4, rng=2)
    assert s.release().total == 0  # no step closed yet: empty
    s.update_many(X)
    dist = s.release()
    assert abs(dist.total - 20_000) < 400
    assert dist.count([0.2, 0.2], [0.4, 0.4]) > 0.9 * 20_000
    assert dist.params["step"] == s.steps_closed == 8 and dist.params["t"] == 20_000


def test_a_refined_leaf_carries_its_count_to_where_the_stream_is() -> None:
    # One point, 1 000 times per step: the first step stops at a coarse leaf (few atoms); the
    # later steps refine it, and its earlier count follows the new records (weight 0.7 by
    # |noisy change|) instead of spreading over the leaf (the even share reads 0.0138).
    w1 = []
    for seed in range(10):
        s = StreamingPrivTree(
            Box.unit(2), 1.0, horizon=4000, releases=4, steps_per_release=1,
            memory_bytes=2000, rng=seed,
        )  # fmt: skip
        s.update_many(np.full((4000, 2), 0.3))
        points = s.release().sample(20_000, rng=seed)
        w1.append(np.abs(points - 0.3).max(axis=1).mean())  # W1 (l-inf) to the point mass
    assert np.mean(w1) < 0.01, np.mean(w1)  # measured 0.0062


def test_the_carried_counts_add_up(monkeypatch) -> None:
    # With the noise switched off, every step's counts total the records so far exactly: the
    # previous count of a refined leaf is shared out, none of it lost or made up.
    import sketchsyn.synth.continual.streaming_privtree as module

    monkeypatch.setattr(module, "discrete_laplace", lambda scale, n, rng: np.zeros(n, np.int64))
    X = _blob_points(8000, 12, centre=0.4, sd=0.05)
    s = StreamingPrivTree(Box.unit(2), 1.0, horizon=8000, releases=8, memory_bytes=4000, rng=0)
    for i in range(0, 8000, 1000):
        s.update_many(X[i : i + 1000])
        assert s._count.sum() == pytest.approx(i + 1000, rel=1e-12)
        assert (s._count >= -1e-9).all()
    assert s.steps_closed == 8


def test_a_fanout_of_four_splits_whole_quadrants() -> None:
    s = StreamingPrivTree(Box.unit(2), 2.0, horizon=20_000, releases=2, fanout=4, rng=0)
    assert s.max_depth == 32 and s.lam == pytest.approx(7 / 3 / 0.6)  # (2β−1)/((β−1)·ε_tree)
    s.update_many(_blob_points(20_000, 8))
    assert (s._level % 2 == 0).all() and s.n_leaves > 50
    assert StreamingPrivTree.from_bytes(s.to_bytes()) == s
    assert abs(s.release().total - 20_000) < 400


def test_a_release_between_steps_is_the_last_closed_step() -> None:
    s = StreamingPrivTree(Box.unit(2), 1.0, horizon=4000, releases=4, rng=1)
    s.update_many(_blob_points(1000, 9))  # the first step closes at event 1000
    first = s.release()
    s.update_many(_blob_points(999, 10))  # the open step: not in any release yet
    again = s.release()
    assert again.params["t"] == first.params["t"] == 1000
    assert np.array_equal(again.leaves().count, first.leaves().count)
    s.update_many(_blob_points(1, 11))
    assert s.release().params["t"] == 2000


# ------------------------------------------------------------------ deletions
def test_insert_then_delete_everything_totals_zero_in_expectation() -> None:
    X = _blob_points(2000, 5)
    totals = []
    for seed in range(40):
        s = StreamingPrivTree(Box.unit(2), 1.0, horizon=4000, releases=2, rng=seed)
        s.update_many(X)
        s.remove_many(X)
        totals.append(float(s._count.sum()))  # the released counts before clamping at 0
    # Each leaf count is an exact net count plus zero-mean noise; 40 runs: mean within 4 se.
    se = np.std(totals) / math.sqrt(len(totals))
    assert abs(np.mean(totals)) < 4 * se + 1e-9, (np.mean(totals), se)
    assert s.release().total < 200  # and what is released is the noise's positive part only


def test_objects_that_move_are_released_where_they_are() -> None:
    old = _blob_points(5000, 6, centre=0.25, sd=0.05)
    new = _blob_points(5000, 7, centre=0.75, sd=0.05)
    s = StreamingPrivTree(Box.unit(2), 2.0, horizon=15_000, releases=3, rng=3)
    s.update_many(old)
    for i in range(0, 5000, 1000):  # move them, a fifth at a time
        s.update_many(new[i : i + 1000])
        s.remove_many(old[i : i + 1000])
    dist = s.release()
    assert dist.count([0.5, 0.5], [1.0, 1.0]) > 0.9 * 5000
    assert dist.count([0.0, 0.0], [0.5, 0.5]) < 0.05 * 5000


# ------------------------------------------------------------------ refusals
def test_refused_batches_leave_the_state_as_it_was() -> None:
    s = StreamingPrivTree(Box.unit(2), 1.0, horizon=50, releases=2, rng=0)
    s.update_many(_blob_points(20, 1))
    before = s.to_bytes()
    bad = _blob_points(10, 2)
    bad[4, 1] = np.nan
    with pytest.raises(InputError, match="row 4"):
        s.update_many(bad)
    with pytest.raises(InputError):
        s.update_many(np.zeros((3, 3)))
    with pytest.raises(InputError, match="horizon"):
        s.update_many(_blob_points(31, 3))
    with pytest.raises(InputError, match="update_many"):
        s.update(np.zeros((2, 2)))
    assert s.to_bytes() == before
    snap = s.snapshot()
    with pytest.raises(ReleasedError):
        snap.remove_many(_blob_points(1, 1))


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        (dict(tree_fraction=1.0), "tree_fraction"),
        (dict(tree_fraction="0.3"), "tree_fraction"),
        (dict(releases=0), "releases"),
        (dict(releases=11), "releases"),
        (dict(steps_per_release=0), "steps_per_release"),
        (dict(max_depth=63), "max_depth"),
        (dict(refine=0), "refine"),
        (dict(fanout=3), "fanout"),
        (dict(fanout=8, refine=2), "fanout"),
        (dict(fanout=4, max_depth=7), "max_depth"),
    ],
)
def test_bad_parameters_are_named(kwargs: dict, name: str) -> None:
    args = dict(horizon=10, releases=2) | kwargs
    with pytest.raises(ParameterError, match=f"'{name}'"):
        StreamingPrivTree(Box.unit(2), 1.0, **args)


def _forged(s: StreamingPrivTree, **arrays: np.ndarray) -> bytes:
    got = read(s.to_bytes(), "StreamingPrivTree")
    return pack("StreamingPrivTree", 1, got.meta, got.arrays | arrays, state="trusted")


def test_loading_refuses_a_state_that_is_not_a_partition_or_overcounts() -> None:
    s = StreamingPrivTree(Box.unit(2), 1.0, horizon=100, releases=2, rng=0)
    s.update_many(_blob_points(60, 1))  # one step closed at 50, ten events open
    back = StreamingPrivTree.from_bytes(s.to_bytes())
    assert back == s and back.n_leaves == s.n_leaves
    lv = s._level.copy()
    lv[-1] = min(int(lv[-1]) + 1, s.max_depth)
    cases = {
        "'level' and 'prefix' are not a partition": dict(level=lv),
        "'atoms' counts more": dict(atoms=s._open_atoms() + 1),
        "array 'count'": dict(count=np.full(s.n_leaves, np.inf)),
    }
    for message, arrays in cases.items():
        with pytest.raises(SerializationError, match=message):
            StreamingPrivTree.from_bytes(_forged(s, **arrays))


# ------------------------------------------------------------------ privacy audits
def _split_rate(one: bool, seeds: range) -> int:
    """Runs (of ``seeds``) in which the root splits at the one step: D empty, D' one row."""
    hits = 0
    for seed in seeds:
        s = StreamingPrivTree(
            Box.unit(1), 12.0, horizon=1, releases=1, tree_fraction=0.5, max_depth=1,
            memory_bytes=256, refine=1, rng=seed,
        )  # fmt: skip
        if one:
            s.update_many(np.array([0.3]))
        else:
            s.skip(1)
        hits += s.n_leaves == 2
    return hits


def _split_audit() -> float:
    """ε̂, the lower confidence bound of the split's log-ratio ln(P_D'(split)/P_D(split))."""
    k = _split_rate(False, range(TRIALS))
    k2 = _split_rate(True, range(TRIALS, 2 * TRIALS))
    lo2 = _cp_bounds(k2, TRIALS, 1e-3)[0]
    hi = _cp_bounds(k, TRIALS, 1e-3)[1]
    return math.log(lo2 / hi)


# ε = 12, tree_fraction 0.5: ε_tree = 6 = 3/λ, so λ = 0.5 and one test's bound is 1/λ = 2.
SPLIT_BOUND = 2.0


def test_audit_of_the_split_decision() -> None:
    lam = StreamingPrivTree(Box.unit(1), 12.0, horizon=1, releases=1, tree_fraction=0.5).lam
    assert 1.0 / lam == pytest.approx(SPLIT_BOUND)
    eps_hat = _split_audit()
    assert 0.0 < eps_hat <= SPLIT_BOUND, eps_hat


def test_audit_of_the_split_decision_catches_half_the_noise(monkeypatch) -> None:
    real = accounting.laplace_scale
    monkeypatch.setattr(accounting, "laplace_scale", lambda *a, **k: real(*a, **k) / 2)
    eps_hat = _split_audit()
    assert eps_hat > SPLIT_BOUND, eps_hat


def _leaf_mech() -> Mechanism:
    """Leaf counts of a partition fixed by 300 rows (the root splits with probability
    1 − e^{−300/λ}/2): D the 300 rows, D' one more, in cell 0."""
    base = np.full(300, 0.25)

    def build(extra: bool, seed: int | None) -> np.ndarray:
        X = np.append(base, 0.25) if extra else base
        if seed is None:
            return np.array([X.size, 0], dtype=np.int64)
        s = StreamingPrivTree(
            Box.unit(1), 1.0, horizon=301, releases=1, tree_fraction=0.5, max_depth=1,
            memory_bytes=256, refine=1, rng=seed,
        )  # fmt: skip
        s.update_many(X)
        s.skip(301 - X.size)
        assert s.n_leaves == 2
        return s._count.astype(np.int64)  # integers: exact counts plus integer noise

    scale = StreamingPrivTree(Box.unit(1), 1.0, horizon=1, releases=1, tree_fraction=0.5)
    return Mechanism(
        name="StreamingPrivTree-leaves",
        epsilon=1.0 / scale.leaf_scale,
        build=build,
        state=lambda y: y,
        scales=lambda y: np.full(y.size, scale.leaf_scale),
        data=(False, True),
        trials=TRIALS,
    )


def test_audit_of_the_leaf_counts() -> None:
    mech = _leaf_mech()
    eps_hat, top, _, _ = audit(mech)
    assert math.isfinite(eps_hat) and eps_hat <= mech.epsilon, (eps_hat, mech.epsilon)
    assert top == pytest.approx(mech.epsilon)


def test_audit_of_the_leaf_counts_catches_half_the_noise(monkeypatch) -> None:
    real = accounting.laplace_scale
    monkeypatch.setattr(accounting, "laplace_scale", lambda *a, **k: real(*a, **k) / 2)
    mech = _leaf_mech()
    eps_hat, top, _, _ = audit(mech)
    assert eps_hat > top / 2, (eps_hat, top)


# ------------------------------------------------------------------ the example
def test_the_moving_fleet_example_runs_and_follows_the_fleet() -> None:
    script = Path(__file__).resolve().parents[1] / "examples" / "moving_fleet.py"
    args = ["--vehicles", "4000", "--hours", "8", "--releases", "4"]
    out = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stdout + out.stderr
    rows = [line.split("|")[1:-1] for line in out.stdout.splitlines()[2:]]
    assert [int(r[0]) for r in rows] == [2, 4, 6, 8]
    for row in rows:
        data, synthetic = (float(v) for v in row[2].split("/"))
        assert abs(data - synthetic) < 0.02, row  # the centre's share, data against release
        assert row[4].strip() == "262,131"  # the state does not grow


def test_nbytes_is_held_and_a_step_works_in_bounded_memory():
    """tracemalloc: a fed StreamingPrivTree holds at most its nbytes (plus the Python objects
    around the arrays), and an update of 1,000 rows, a step included, peaks under 12 times it
    (the exact sampler's tables, process-wide caches, are warmed by a first run)."""
    import gc
    import tracemalloc

    n = 120_000
    X = np.clip(np.random.default_rng(0).normal(0.3, 0.1, size=(n, 2)), 0, 1)

    def run(measure: bool) -> tuple[int, int, int]:
        s = StreamingPrivTree(Box.unit(2), 4.0, horizon=n, releases=8, rng=0)
        worst = 0
        for i in range(0, n, 1000):
            if measure:
                gc.collect()
                before = tracemalloc.get_traced_memory()[0]
                tracemalloc.reset_peak()
            s.update_many(X[i : i + 1000])
            if measure:
                worst = max(worst, tracemalloc.get_traced_memory()[1] - before)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
        nbytes = s.nbytes
        assert s.n_leaves > s.max_leaves // 4  # a partition of some size
        del s
        gc.collect()
        return nbytes, held - tracemalloc.get_traced_memory()[0], worst

    run(False)  # untraced: warms the caches at full speed
    gc.freeze()  # the objects of earlier tests: left out of the many collections below
    tracemalloc.start()
    try:
        nbytes, held, worst = run(True)
    finally:
        tracemalloc.stop()
        gc.unfreeze()
    assert held <= nbytes + 64 * 1024, (held, nbytes)
    assert worst <= 12 * nbytes, (worst, nbytes)
