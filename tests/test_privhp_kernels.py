"""PrivHP's compiled kernels (the ``fast`` extra) give the numpy path's state bit for bit.

Every test here compares the two paths of one computation: the counts of ``update_many`` and
``remove_many`` (``_level_counts`` by the kernels, or by the numpy reference inside
``kernels.numpy_only()``) and the Morton codes of a Box (``kernels.encode_box`` against
``Box.encode``). They are skipped where numba is not installed; CI installs the ``fast`` extra
with the test dependencies, so they run there.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from sketchsyn import BitDomain, Box, PrivHP, accel
from sketchsyn.synth.privhp import bank as bank_mod
from sketchsyn.synth.privhp import kernels

needs_numba = pytest.mark.skipif(not kernels.AVAILABLE, reason="numba (the fast extra) missing")


@pytest.fixture(autouse=True, scope="module")
def _compiled():
    """The kernels compiled before the tests (PrivHP uses the numpy path until they are)."""
    if kernels.AVAILABLE:
        assert kernels.ready(wait=True), accel._FAILED
        # tests/test_aot.py runs this module in a process of its own, on the kernels compiled
        # ahead of time, and says so here.
        expected = os.environ.get("SKETCHSYN_TEST_KERNELS")
        assert expected in (None, accel.compiled_by()), (accel.compiled_by(), accel._AOT_FAILED)
        yield
        # No call fell back to the other kind.
        assert expected in (None, accel.compiled_by()), accel._AOT_MISSES
    else:
        yield


def _pair(domain, **kw) -> tuple[PrivHP, PrivHP]:
    make = dict(epsilon=1.0, k=8, sketch_depth=3, rng=7) | kw
    a, b = PrivHP(domain, **make), PrivHP(domain, **make)
    b._lineage = a._lineage  # one identity: the saved bytes compare the counts alone
    return a, b


def _batch(rng: np.random.Generator, n: int, d: int = 2) -> np.ndarray:
    # Half clustered (many rows per deep cell), half uniform (mostly distinct deep cells).
    hot = np.clip(rng.normal(0.3, 0.01, (n // 2, d)), 0, 1)
    return np.concatenate([hot, rng.random((n - n // 2, d))])


def _feed_both(fast: PrivHP, ref: PrivHP, batches, removals=()) -> None:
    for X in batches:
        fast.update_many(X)
        with kernels.numpy_only():
            ref.update_many(X)
    for X in removals:
        fast.remove_many(X)
        with kernels.numpy_only():
            ref.remove_many(X)


def _same(fast: PrivHP, ref: PrivHP) -> None:
    assert np.array_equal(fast._tree, ref._tree)
    assert np.array_equal(fast._bank, ref._bank)
    assert fast.to_bytes() == ref.to_bytes()


def test_numpy_only_switches_the_kernels_off():
    with kernels.numpy_only():
        assert not kernels.enabled() and not kernels.ready()
        with kernels.numpy_only():
            assert not kernels.enabled()
        assert not kernels.enabled()
    assert kernels.enabled() == kernels.ready() == kernels.AVAILABLE


def test_sketchsyn_does_not_import_numba():
    """numba is imported only when a large batch first asks for the kernels."""
    import subprocess
    import sys

    code = "import sys, sketchsyn; print('numba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@needs_numba
@pytest.mark.parametrize(
    ("switch", "expected"), [("jit", "False False True"), ("eager,jit", "True")]
)
def test_the_jit_kernels_start_only_after_start_rows(switch, expected):
    """A fresh process starts numba's kernels (imports numba) once it has counted START_ROWS
    rows, not at its first large batch: a short job never pays numba's import; ``eager`` starts
    them at the first large batch. (Kernels already compiled ahead of time start at the first
    large batch: tests/test_aot.py.)"""
    import os
    import subprocess
    import sys

    code = """
import sys
import numpy as np
from sketchsyn import Box, PrivHP
from sketchsyn.synth.privhp import kernels
from sketchsyn import accel
accel.START_ROWS = 100_000
X = np.random.default_rng(1).random((60_000, 2))
a = PrivHP(Box.unit(2), 1.0, k=8, width=300, depth=20, rng=3)
a.update_many(X)
if accel._STARTED:
    print(True)
    raise SystemExit
started, imported = accel._STARTED, "numba" in sys.modules
a.update_many(X)  # 120,000 rows counted: past START_ROWS
print(started, imported, accel._STARTED)
"""
    env = dict(os.environ, SKETCHSYN_KERNELS=switch)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.split() == expected.split()


def test_a_process_counts_with_numpy_until_the_kernels_are_ready():
    """In a fresh process the first large batch starts the compile and is counted by the numpy
    path; a later one by the kernels; the state is the one of the numpy path throughout."""
    import subprocess
    import sys

    code = """
import numpy as np
from sketchsyn import Box, PrivHP
from sketchsyn import accel
from sketchsyn.synth.privhp import kernels
X = np.random.default_rng(1).random((50_000, 2))
a = PrivHP(Box.unit(2), 1.0, k=8, width=300, depth=20, rng=3)
b = PrivHP(Box.unit(2), 1.0, k=8, width=300, depth=20, rng=3)
b._lineage = a._lineage
a.update_many(X)
first = accel._READY.is_set()
kernels.ready(wait=True)
a.update_many(X[::-1])
with kernels.numpy_only():
    b.update_many(X)
    b.update_many(X[::-1])
print(first, kernels.ready(), a.to_bytes() == b.to_bytes())
"""
    env = dict(os.environ, SKETCHSYN_KERNELS="jit")  # numba's start rule (START_ROWS rows)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.split() == ["False", "True", "True"]


@needs_numba
def test_an_announced_large_job_starts_the_kernels_at_its_first_batch():
    """``accel.expect`` of EXPECT_ROWS rows or more starts the kernels at the first large batch
    (which waits for them a bounded time); a smaller announcement leaves the START_ROWS rule;
    the state is the numpy path's either way."""
    import subprocess
    import sys

    code = """
import sys, time
import numpy as np
from sketchsyn import Box, PrivHP, accel
from sketchsyn.synth.privhp import kernels
rows = int(sys.argv[1])
accel.expect(rows)
X = np.random.default_rng(1).random((50_000, 2))
a = PrivHP(Box.unit(2), 1.0, k=8, width=300, depth=20, rng=3)
b = PrivHP(Box.unit(2), 1.0, k=8, width=300, depth=20, rng=3)
b._lineage = a._lineage
a.update_many(X[:1000])  # a small batch starts nothing
small = accel._STARTED
t0 = time.perf_counter()
a.update_many(X)
waited = time.perf_counter() - t0
started = accel._STARTED
with kernels.numpy_only():
    b.update_many(X[:1000])
    b.update_many(X)
print(small, started, waited <= accel.EXPECT_WAIT + 2, a.to_bytes() == b.to_bytes())
"""

    def run(rows):
        env = dict(os.environ, SKETCHSYN_KERNELS="jit")  # numba's start rule (START_ROWS rows)
        out = subprocess.run([sys.executable, "-c", code, str(rows)], capture_output=True,
                             text=True, check=True, env=env)  # fmt: skip
        return out.stdout.split()

    assert run(accel.EXPECT_ROWS) == ["False", "True", "True", "True"]
    assert run(accel.EXPECT_ROWS - 1) == ["False", "False", "True", "True"]


def test_environment_switch(monkeypatch):
    monkeypatch.setattr(accel, "_SWITCH", "numpy")
    assert not kernels.enabled()


@needs_numba
@pytest.mark.parametrize("sketch", ["count-min", "count-sketch"])
@pytest.mark.parametrize(
    ("depth", "width", "counter_depth"),
    [(18, 1364, 11), (18, 1024, 6), (24, 1000, 8), (30, 97, 3), (12, 64, 12)],
)
def test_update_and_remove_give_the_numpy_state(sketch, depth, width, counter_depth):
    """Batches below the kernels' size, at it, past the thread split and large; removals."""
    fast, ref = _pair(
        Box.unit(2), width=width, depth=depth, counter_depth=counter_depth, sketch=sketch
    )
    rng = np.random.default_rng(depth * 31 + width)
    sizes = (1, kernels.MIN_ROWS - 1, kernels.MIN_ROWS, 20_000, 262_144)
    batches = [_batch(rng, n) for n in sizes]
    _feed_both(fast, ref, batches, removals=[batches[-1][:70_000], batches[2]])
    _same(fast, ref)


@needs_numba
@pytest.mark.parametrize("sketch", ["count-min", "count-sketch"])
def test_keys_of_two_words_give_the_numpy_state(sketch):
    """Sketch levels deeper than 32 hash 8-byte prefixes whose high word is not zero."""
    fast, ref = _pair(BitDomain(60), width=512, depth=60, counter_depth=4, sketch=sketch)
    rng = np.random.default_rng(11)
    keys = rng.integers(0, 2**60, size=50_000, dtype=np.uint64)
    keys[:20_000] = keys[:20_000] >> np.uint64(30) << np.uint64(30)  # shared deep prefixes
    _feed_both(fast, ref, [keys, keys[:9000]], removals=[keys[:5000]])
    _same(fast, ref)


@needs_numba
@pytest.mark.parametrize("threads", [True, False])
def test_per_cell_reach_and_threads_do_not_change_the_state(threads, monkeypatch):
    X = _batch(np.random.default_rng(3), 60_000)
    states = []
    for ratio, max_level in ((2, 22), (1 / 64, 22), (64, 22), (2, 6)):
        monkeypatch.setattr(bank_mod, "_THREADS", threads)
        monkeypatch.setattr(bank_mod, "_KERNEL_CELLS_PER_ROW", ratio)
        monkeypatch.setattr(bank_mod, "_KERNEL_MAX_LEVEL", max_level)
        php, _ = _pair(Box.unit(2), width=1000, depth=22, counter_depth=5, sketch="count-sketch")
        php.update_many(X)
        php.remove_many(X[: kernels.MIN_ROWS])
        states.append(php._tree.tobytes() + php._bank.tobytes())
    with kernels.numpy_only():
        ref, _ = _pair(Box.unit(2), width=1000, depth=22, counter_depth=5, sketch="count-sketch")
        ref.update_many(X)
        ref.remove_many(X[: kernels.MIN_ROWS])
    assert all(s == ref._tree.tobytes() + ref._bank.tobytes() for s in states)


@needs_numba
@pytest.mark.parametrize("d", [1, 2, 3])
def test_encode_box_equals_the_domain_encoding(d):
    rng = np.random.default_rng(d)
    lo = rng.normal(size=d) * 100
    hi = lo + 0.01 + 50 * rng.random(d)
    box = Box(lo, hi)
    X = lo + rng.random((5_000, d)) * (hi - lo)
    X[:3], X[3:6] = lo, hi  # the corners: first and last cells
    X[6:9] = np.nextafter(hi, -np.inf)
    for depth in [*range(1, 3 * 11), 40, 52, 53, 63, 64]:
        for arr in (X, np.asfortranarray(X)):
            got = kernels.encode_box(box, arr, depth)
            bits = max(-(-depth // d), 1)
            if (d == 1 and bits > 53) or (d == 3 and bits > 21):
                assert got is None  # not handled: the domain encodes
                continue
            assert got is not None and np.array_equal(got, box.encode(arr, depth)), depth


@needs_numba
def test_encode_box_leaves_rows_outside_to_the_domain():
    box = Box([0.0, -1.0], [1.0, 1.0])
    X = np.random.default_rng(0).random((100, 2))
    for bad in (np.nextafter(1.0, 2.0), -1e-300, np.nan, np.inf):
        Y = X.copy()
        Y[57, 0] = bad
        assert kernels.encode_box(box, Y, 20) is None


@needs_numba
@pytest.mark.parametrize("policy", ["clip", "drop"])
def test_out_of_bounds_policies_give_the_numpy_state(policy):
    fast, ref = _pair(Box([0, 0], [1, 1], out_of_bounds=policy), width=256, depth=16)
    X = _batch(np.random.default_rng(9), 30_000)
    X[::1000] += 2.0  # outside: the domain's policy applies to the whole batch
    inside = _batch(np.random.default_rng(10), 30_000)
    _feed_both(fast, ref, [X, inside])
    _same(fast, ref)
    assert fast.n_dropped == ref.n_dropped == (30 if policy == "drop" else 0)


@needs_numba
def test_a_refused_batch_is_refused_by_both_paths():
    fast, _ = _pair(Box.unit(2), width=256, depth=16)
    X = _batch(np.random.default_rng(4), 10_000)
    X[4321, 1] = 7.0
    before = fast.to_bytes()
    with pytest.raises(Exception, match="row 4321"):
        fast.update_many(X)
    assert fast.n_seen == 0 and fast.to_bytes() == before


def test_scratch_zeros_stay_zeros():
    """The kept per-cell counts are all zero whenever they are handed out, whatever sizes came
    before and whether the last user cleared them."""
    scratch = bank_mod._Scratch()
    a = scratch.zeros("c", 8)
    a[[1, 7]] = 5  # a user that stopped before clearing
    b = scratch.zeros("c", 4)
    assert not b.any()
    b[2] = 1
    b[2] = 0
    scratch.cleared("c")
    assert not scratch.zeros("c", 8).any()  # the part past the smaller request too
