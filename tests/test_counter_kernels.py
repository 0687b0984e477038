"""The sparse counters' compiled scan and the noise tables' compiled lookup (the ``fast`` extra)
make the numpy references' decisions, draw for draw.

Each test runs one computation on both paths (the kernels, and the numpy reference inside
``accel.numpy_only()``) from the same seed and compares every array of the state. The law of
the batched checks is tested in ``tests/test_sparsebank.py`` on both paths.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import sketchsyn.counters.sparse as sparse
from sketchsyn import Box, OnlineSynthesizer, accel
from sketchsyn.counters import InhomogeneousSparseBank, online_budgets
from sketchsyn.privacy import exactexp
from sketchsyn.privacy.noise import discrete_laplace

pytestmark = pytest.mark.skipif(not accel.AVAILABLE, reason="numba (the fast extra) missing")

_ARRAYS = ("base", "open", "n", "theta", "pos", "segs", "sub", "row", "acc", "done")


@pytest.fixture(autouse=True, scope="module")
def _compiled():
    from sketchsyn.counters import sparsebank  # noqa: F401 - registers the counters' kernels

    assert accel.ready(wait=True), accel._FAILED


def _feed(bank, batches, numpy):
    for until, cells, times, values in batches:
        if numpy:
            with accel.numpy_only():
                bank.update_events(until, cells, times, values)
        else:
            bank.update_events(until, cells, times, values)


def _batches(seed, size, steps, per, hot=0.5, max_value=3):
    """Random event batches: ``per`` events a batch over ``steps`` steps, half of them on a few
    hot counters (long runs, many trips), values 1 … max_value."""
    rng = np.random.default_rng(seed)
    out, t = [], 0
    for _ in range(8):
        times = np.sort(rng.integers(t + 1, t + steps + 1, per))
        hot_cells = rng.integers(0, 3, per)
        cells = np.where(rng.random(per) < hot, hot_cells, rng.integers(0, size, per))
        values = rng.integers(1, max_value + 1, per)
        out.append((t + steps, cells, times, values))
        t += steps
    return out


def _same(a, b):
    for key in _ARRAYS:
        x, y = getattr(a, "_" + key), getattr(b, "_" + key)
        if key in ("acc", "done"):
            x, y = x[: a._rows], y[: b._rows]
        np.testing.assert_array_equal(x, y, err_msg=key)
    np.testing.assert_array_equal(a.query(), b.query())


@pytest.mark.parametrize(
    ("eps", "budget", "window"), [(4.0, 3.0, 4096), (4.0, 3.0, 5), (1.0, None, 4096)]
)
def test_compiled_scan_gives_the_numpy_state(monkeypatch, eps, budget, window):
    """Many trips (large budgets: small thresholds), rounds cut by a small window, values > 1,
    level ends inside batches; the states agree array for array."""
    import sketchsyn.counters.sparsebank as sb

    monkeypatch.setattr(sb, "_WINDOW", window)
    budgets = online_budgets(eps, 2, 0) if budget is None else (lambda r: budget)
    batches = _batches(1, 40, 500, 2000)
    fast = InhomogeneousSparseBank(40, eps, budgets, rng=5)
    ref = InhomogeneousSparseBank(40, eps, budgets, rng=5)
    _feed(fast, batches, numpy=False)
    _feed(ref, batches, numpy=True)
    if budget is not None:
        assert ref._segs.max() > 3  # segments did close, several times per counter
    _same(fast, ref)


def test_compiled_scan_matches_the_exact_routine(monkeypatch):
    """With the numpy path's float margin made useless, every check there is settled by the
    exact big-rational routine; the kernel (its own margin and its cheaper "no trip" bound)
    must give the same outcome for every check."""
    budgets = lambda r: 3.0  # noqa: E731
    batches = _batches(2, 12, 60, 150)
    fast = InhomogeneousSparseBank(12, 4.0, budgets, rng=9)
    ref = InhomogeneousSparseBank(12, 4.0, budgets, rng=9)
    _feed(fast, batches, numpy=False)
    monkeypatch.setattr(sparse, "_REL", 1e30)
    _feed(ref, batches, numpy=True)
    assert ref._segs.max() > 0
    _same(fast, ref)


def test_online_synthesizer_releases_the_same_on_both_paths():
    X = np.random.default_rng(3).random((40_000, 2)) ** 2
    fast = OnlineSynthesizer(Box.unit(2), 1.0, rng=4)
    ref = OnlineSynthesizer(Box.unit(2), 1.0, rng=4)
    for part in np.array_split(X, 3):
        fast.update_many(part)
        with accel.numpy_only():
            ref.update_many(part)
    with accel.numpy_only():
        want = ref.noisy_levels()
    got = fast.noisy_levels()
    assert len(got) == len(want) > 10
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("scale", [Fraction(1, 3), Fraction(2), Fraction(100), Fraction(5000)])
def test_compiled_table_lookup_and_signs_give_the_numpy_draws(scale):
    fast = discrete_laplace(scale, 200_000, rng=11)
    with accel.numpy_only():
        ref = discrete_laplace(scale, 200_000, rng=11)
    np.testing.assert_array_equal(fast, ref)


def test_compiled_table_lookup_leaves_ties_to_the_exact_routine():
    """Words equal to a threshold (and its neighbours) give the same outcome on both paths."""
    from sketchsyn.privacy.rng import as_source

    table = exactexp.laplace_magnitude_table(Fraction(1, 7), 64)
    t = table._thresholds.astype(np.int64)
    words = np.concatenate([t, t - 1, t + 1, [0, 2**32 - 1]]).clip(0, 2**32 - 1)
    words = words.astype(np.uint32)
    fast = table.sample(words, as_source(1))
    with accel.numpy_only():
        ref = table.sample(words, as_source(1))
    np.testing.assert_array_equal(fast, ref)
    # The lookup itself: #{T_v < word}, whatever path.
    np.testing.assert_array_equal(ref[t.size : 2 * t.size], np.searchsorted(t, t - 1, "left"))


def test_compiled_table_floors_give_the_numpy_floors():
    """The compiled float stage of the table builders keeps the same floors as numpy's and hands
    the same kind of entries on; both end in the exact thresholds."""
    from sketchsyn.privacy.noise import _table_size

    rng = np.random.default_rng(8)
    xs = [Fraction(float(e)) / 4 for e in rng.uniform(1e-4, 4, 150)]
    xs += [Fraction(int(a), int(b)) for a, b in rng.integers(1, 10**9, (150, 2))]
    xs += [Fraction(1, 2**k) for k in range(0, 30, 3)] + [Fraction(8), Fraction(31)]
    for x in xs:
        m = _table_size(x)
        for kind in ("geometric", "truncated", "laplace"):
            if kind == "truncated" and m < 2:
                continue
            fast = exactexp._fast_thresholds(kind, x, m)
            with accel.numpy_only():
                ref = exactexp._fast_thresholds(kind, x, m)
            np.testing.assert_array_equal(fast, ref, err_msg=f"{kind} {x}")
            if x.denominator < 10**6:
                np.testing.assert_array_equal(fast, exactexp._exact_thresholds(kind, x, m))


def test_compiled_table_floors_leave_the_undecidable_pairs_to_the_integers():
    """The pairs of rationals one float64 apart whose first thresholds differ (see
    ``tests/test_exactexp.py``): the compiled float stage must not decide them either."""
    from test_exactexp import _PAIRS  # tests/ is on sys.path (no __init__)

    for kind, x, m in _PAIRS:
        np.testing.assert_array_equal(
            exactexp._fast_thresholds(kind, x, m), exactexp._exact_thresholds(kind, x, m)
        )


def test_compiled_table_guide_gives_the_numpy_arrays():
    """The lookup arrays of a table built in one compiled pass are numpy's (random, repeated and
    empty thresholds), and an unsorted table is refused on both paths."""
    rng = np.random.default_rng(2)
    for n in (0, 1, 5, 300, 1024):
        for repeated in (False, True):
            t = np.sort(rng.integers(0, 2**32, n).astype(np.uint32))
            if repeated and n:
                t[: n // 2] = t[n // 2]
            fast = exactexp.ThresholdTable(t, None)
            with accel.numpy_only():
                ref = exactexp.ThresholdTable(t, None)
            np.testing.assert_array_equal(fast._guide, ref._guide)
            np.testing.assert_array_equal(fast._padded, ref._padded)
    unsorted = np.array([7, 3], dtype=np.uint32)
    with pytest.raises(ValueError, match="sorted"):
        exactexp.ThresholdTable(unsorted, None)
    with accel.numpy_only(), pytest.raises(ValueError, match="sorted"):
        exactexp.ThresholdTable(unsorted, None)


def test_unseeded_draws_take_the_warmed_up_kernels():
    """The OS CSPRNG's words and bytes are writable arrays, as the warm-up's are: an unseeded
    draw compiles no new specialisation (a read-only array would, on the hot path)."""
    from sketchsyn.privacy import kernels

    discrete_laplace(Fraction(7, 3), 5_000, rng=1)
    before = {name: len(getattr(kernels, name).signatures) for name in kernels.KERNELS}
    discrete_laplace(Fraction(7, 3), 5_000)  # rng=None: os.urandom
    after = {name: len(getattr(kernels, name).signatures) for name in kernels.KERNELS}
    assert after == before
