"""PrivHP's compiled kernels (:mod:`sketchsyn.kernels`) give the numpy path's state bit for bit.

Every test here compares the two paths of one computation: the counts of ``update_many`` and
``remove_many`` (``_level_counts`` by the kernels, or by the numpy reference inside
``kernels.numpy_only()``) and the Morton codes of a Box (``encode_box`` against
``Box.encode``), and both against digests of the numpy path's states recorded when the
kernels were numba's (so that the tests mean something with the extension hidden too:
``tests/test_kernels_safety.py`` runs this module again in a process that cannot import it).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import numpy as np
import pytest

from sketchsyn import BitDomain, Box, PrivHP, kernels
from sketchsyn.kernels.morton import MIN_ROWS, encode_box
from sketchsyn.synth.privhp import bank as bank_mod

needs_ext = pytest.mark.skipif(not kernels.enabled(), reason=kernels.why())


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
    on = kernels.enabled()
    with kernels.numpy_only():
        assert not kernels.enabled()
        with kernels.numpy_only():
            assert not kernels.enabled()
        assert not kernels.enabled()
    assert kernels.enabled() == on == (kernels.active() == "extension")


def test_sketchsyn_does_not_import_numba():
    code = "import sys, sketchsyn; print('numba' in sys.modules, 'llvmlite' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"


def test_the_switch_forces_the_numpy_path():
    """``SKETCHSYN_KERNELS=numpy`` (read at import) switches the extension off; ``active``
    and ``why`` say so."""
    code = "from sketchsyn import kernels as k; print(k.active(), k.enabled(), k.why())"
    env = {**os.environ, "SKETCHSYN_KERNELS": "numpy"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[:2] == ["numpy", "False"]
    assert len(out.stdout.split()) > 2  # why: switched off, or not installed


@needs_ext
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
    sizes = (1, MIN_ROWS - 1, MIN_ROWS, 20_000, 262_144)
    batches = [_batch(rng, n) for n in sizes]
    _feed_both(fast, ref, batches, removals=[batches[-1][:70_000], batches[2]])
    _same(fast, ref)


@needs_ext
@pytest.mark.parametrize("sketch", ["count-min", "count-sketch"])
def test_keys_of_two_words_give_the_numpy_state(sketch):
    """Sketch levels deeper than 32 hash 8-byte prefixes whose high word is not zero."""
    fast, ref = _pair(BitDomain(60), width=512, depth=60, counter_depth=4, sketch=sketch)
    rng = np.random.default_rng(11)
    keys = rng.integers(0, 2**60, size=50_000, dtype=np.uint64)
    keys[:20_000] = keys[:20_000] >> np.uint64(30) << np.uint64(30)  # shared deep prefixes
    _feed_both(fast, ref, [keys, keys[:9000]], removals=[keys[:5000]])
    _same(fast, ref)


@needs_ext
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
        php.remove_many(X[:MIN_ROWS])
        states.append(php._tree.tobytes() + php._bank.tobytes())
    with kernels.numpy_only():
        ref, _ = _pair(Box.unit(2), width=1000, depth=22, counter_depth=5, sketch="count-sketch")
        ref.update_many(X)
        ref.remove_many(X[:MIN_ROWS])
    assert all(s == ref._tree.tobytes() + ref._bank.tobytes() for s in states)


@needs_ext
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
            got = encode_box(box, arr, depth)
            bits = max(-(-depth // d), 1)
            if (d == 1 and bits > 53) or (d == 3 and bits > 21):
                assert got is None  # not handled: the domain encodes
                continue
            assert got is not None and np.array_equal(got, box.encode(arr, depth)), depth


@needs_ext
def test_encode_box_leaves_rows_outside_to_the_domain():
    box = Box([0.0, -1.0], [1.0, 1.0])
    X = np.random.default_rng(0).random((100, 2))
    for bad in (np.nextafter(1.0, 2.0), -1e-300, np.nan, np.inf):
        Y = X.copy()
        Y[57, 0] = bad
        assert encode_box(box, Y, 20) is None


@needs_ext
@pytest.mark.parametrize("policy", ["clip", "drop"])
def test_out_of_bounds_policies_give_the_numpy_state(policy):
    fast, ref = _pair(Box([0, 0], [1, 1], out_of_bounds=policy), width=256, depth=16)
    X = _batch(np.random.default_rng(9), 30_000)
    X[::1000] += 2.0  # outside: the domain's policy applies to the whole batch
    inside = _batch(np.random.default_rng(10), 30_000)
    _feed_both(fast, ref, [X, inside])
    _same(fast, ref)
    assert fast.n_dropped == ref.n_dropped == (30 if policy == "drop" else 0)


@needs_ext
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


def _digest_run(case: str) -> str:
    """The SHA-256 of a PrivHP's counters and sketch bank after a fixed stream (batches below
    the kernels' size, at it and large; a removal)."""
    if case == "bits":
        php, _ = _pair(BitDomain(60), width=512, depth=60, counter_depth=4, sketch="count-sketch")
        rng = np.random.default_rng(11)
        keys = rng.integers(0, 2**60, size=50_000, dtype=np.uint64)
        keys[:20_000] = keys[:20_000] >> np.uint64(30) << np.uint64(30)
        batches, removal = [keys, keys[:9000]], keys[:5000]
    else:
        php, _ = _pair(Box.unit(2), width=1000, depth=22, counter_depth=6, sketch=case)
        rng = np.random.default_rng(5)
        batches = [_batch(rng, n) for n in (1, MIN_ROWS, 20_000, 140_000)]
        removal = batches[-1][:30_000]
    for X in batches:
        php.update_many(X)
    php.remove_many(removal)
    return hashlib.sha256(php._tree.tobytes() + php._bank.tobytes()).hexdigest()[:16]


# The numpy path's states of _digest_run (little-endian machines).
_DIGESTS = {
    "count-min": "ba2371593680346a",
    "count-sketch": "0ca4de102f067131",
    "bits": "95399ba18d119b08",
}


@pytest.mark.parametrize("case", sorted(_DIGESTS))
@pytest.mark.parametrize("path", ["active", "numpy"])
def test_states_equal_the_recorded_digests(case, path):
    """The state of a fixed stream on either path (the extension, or the numpy path forced or
    with the extension hidden) is the one recorded: both paths are checked against one fixed
    reference, not only against each other."""
    if path == "numpy":
        with kernels.numpy_only():
            got = _digest_run(case)
    else:
        got = _digest_run(case)
    assert got == _DIGESTS[case]
