"""The sparse counters' compiled scan and the noise tables' compiled lookup
(:mod:`sketchsyn.kernels`) make the numpy references' decisions, draw for draw.

Each test runs one computation on both paths (the kernels, and the numpy reference inside
``kernels.numpy_only()``) from the same seed and compares every array of the state. The law of
the batched checks is tested in ``tests/test_sparsebank.py`` on both paths.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import sketchsyn.counters.sparse as sparse
from sketchsyn import Box, OnlineSynthesizer, kernels
from sketchsyn.counters import InhomogeneousSparseBank, checks, online_budgets
from sketchsyn.privacy import exactexp
from sketchsyn.privacy.noise import discrete_laplace

pytestmark = pytest.mark.skipif(not kernels.enabled(), reason=kernels.why())

_ARRAYS = ("base", "open", "n", "theta", "pos", "segs", "sub", "row", "acc", "done")


def _feed(bank, batches, numpy):
    for until, cells, times, values in batches:
        if numpy:
            with kernels.numpy_only():
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


@pytest.fixture(params=[(64, 64), (32, 32), (32, 16), (32, 4), (8, 8)], ids=str)
def bits(request, monkeypatch):
    """The bits of each gap's and own check's uniform a batch draws at the start: a seeded
    bank's 64, a private run's 32 and 16, or 8 (whose intervals leave about one check in 256 to
    the exact routine; own checks of 4 bits leave one in 16, so that the compiled path's cheap
    "no trip" bound for an own check is put to the test), forced on the seeded banks here so
    that both paths can be compared."""
    monkeypatch.setattr(checks, "SEEDED_BITS", request.param[0])
    monkeypatch.setattr(checks, "SEEDED_OWN_BITS", request.param[1])
    return request.param


@pytest.mark.parametrize(
    ("eps", "budget", "window"), [(4.0, 3.0, 4096), (4.0, 3.0, 5), (1.0, None, 4096)]
)
@pytest.mark.parametrize("loop", ["seeded loop", "python rounds", "shared rounds", "shared loop"])
def test_compiled_scan_gives_the_numpy_state(monkeypatch, eps, budget, window, bits, loop):
    """Many trips (large budgets: small thresholds), rounds cut by a small window, values > 1,
    level ends inside batches, 64- and 32-bit words; the states agree array for array. The
    compiled rounds run in the seeded bank's one loop, or in Python rounds of compiled scans
    (a check left open is settled and the round scanned again, after chained calm rounds in
    which some counters finished), or as a private bank runs them: one uniform per counter and
    round (``Events.shared``, of the gaps' bits), the compiled sums added only once the cheap
    bound fails, the numpy sums by rows of a matrix, open checks settled given the round's
    earlier checks."""
    import sketchsyn.counters.sparsebank as sb
    from sketchsyn.counters import bankloop
    from sketchsyn.kernels import checks as kernel_checks

    monkeypatch.setattr(sb, "_SHARED_SEEDED", loop.startswith("shared"))
    if loop.endswith("rounds"):
        monkeypatch.setattr(bankloop, "word_sources", lambda bank: None)
        real_run = kernel_checks.run

        def checked_run(ev, active, *args, **kwargs):
            status, at, step, nb = real_run(ev, active, *args, **kwargs)
            assert ((status >= 0) & (status <= 4)).all(), status  # every counter's outcome
            assert ((at >= 0) & (at < ev.cells.size)).all(), at
            return status, at, step, nb

        monkeypatch.setattr(kernel_checks, "run", checked_run)
    monkeypatch.setattr(sb, "_WINDOW", window)
    budgets = online_budgets(eps, 2, 0) if budget is None else (lambda r: budget)
    batches = _batches(1, 40, 500, 2000)
    fast = InhomogeneousSparseBank(40, eps, budgets, rng=5)
    ref = InhomogeneousSparseBank(40, eps, budgets, rng=5)
    assert fast._shared is loop.startswith("shared")
    _feed(fast, batches, numpy=False)
    _feed(ref, batches, numpy=True)
    if budget is not None:
        assert ref._segs.max() > 3  # segments did close, several times per counter
    _same(fast, ref)


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("bits", [64, 32])  # (with fewer, a settled check draws the rest of
# its first 32-bit word, and here every check of the numpy path is settled: other draws)
def test_compiled_scan_matches_the_exact_routine(monkeypatch, bits, shared):
    """With the numpy path's float margin made useless, every check there is settled by the
    exact big-rational routine; the kernel (its own margin and its cheaper "no trip" bound)
    must give the same outcome for every check, on 64- and on 32-bit words (whose further bits
    the exact routine draws only where their interval leaves the check open). ``shared``: one
    uniform per counter and round, each check settled given the exact product of the round's
    earlier checks' stay probabilities."""
    import sketchsyn.counters.sparsebank as sb

    monkeypatch.setattr(sb, "_SHARED_SEEDED", shared)
    monkeypatch.setattr(checks, "SEEDED_BITS", bits)
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
        with kernels.numpy_only():
            ref.update_many(part)
    with kernels.numpy_only():
        want = ref.noisy_levels()
    got = fast.noisy_levels()
    assert len(got) == len(want) > 10
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("scale", [Fraction(1, 3), Fraction(2), Fraction(100), Fraction(5000)])
def test_compiled_table_lookup_and_signs_give_the_numpy_draws(scale):
    fast = discrete_laplace(scale, 200_000, rng=11)
    with kernels.numpy_only():
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
    with kernels.numpy_only():
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
            with kernels.numpy_only():
                ref = exactexp._fast_thresholds(kind, x, m)
            np.testing.assert_array_equal(fast, ref, err_msg=f"{kind} {x}")
            if x.denominator < 10**6:
                np.testing.assert_array_equal(fast, exactexp._exact_thresholds(kind, x, m))


def test_compiled_table_floors_keep_the_tail_form_once_taken():
    """The compiled float stage skips the direct form (its ``expm1``) once an entry takes the
    tail form (``c_o > 1/2``): wide tables, whose entries cross 1/2 far from their start, are
    still the exact thresholds entry for entry."""
    for x in (Fraction(1, 97), Fraction(3, 1000), Fraction(7, 6000), Fraction(1, 9001)):
        for kind in ("geometric", "truncated", "laplace"):
            np.testing.assert_array_equal(
                exactexp._fast_thresholds(kind, x, 1024),
                exactexp._exact_thresholds(kind, x, 1024),
                err_msg=f"{kind} {x}",
            )


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
            with kernels.numpy_only():
                ref = exactexp.ThresholdTable(t, None)
            np.testing.assert_array_equal(fast._guide, ref._guide)
            np.testing.assert_array_equal(fast._padded, ref._padded)
    unsorted = np.array([7, 3], dtype=np.uint32)
    with pytest.raises(ValueError, match="sorted"):
        exactexp.ThresholdTable(unsorted, None)
    with kernels.numpy_only(), pytest.raises(ValueError, match="sorted"):
        exactexp.ThresholdTable(unsorted, None)


_SCALES = [Fraction(3), Fraction(77, 5), Fraction(300), Fraction(5000), Fraction(10**6)]


@pytest.mark.parametrize("geometric", [False, True])
@pytest.mark.parametrize("scale", _SCALES)
def test_compiled_laplace_draws_take_the_python_draws_words(scale, geometric):
    """``lap_draw`` (a seeded bank's noise, drawn in the compiled rounds from the generator
    itself) gives the values of ``_laplace_core`` and leaves the generator where it does; a draw
    it hands back is finished by ``laplace_replay`` from its words. Scales: plain, wide (the
    truncated table and a second geometric), deeper (handed back) beyond the table."""
    from sketchsyn.privacy.noise import PLAN_DEEP, _laplace_core, laplace_plan, laplace_replay
    from sketchsyn.privacy.rng import as_source

    plan = laplace_plan(scale, geometric)
    finished = handed_back = 0
    for seed, n in enumerate([1, 2, 3, 5, 64, 1000] * 4):
        ref, src = as_source(seed), as_source(seed)
        want = _laplace_core(scale, n, ref)
        words, z = np.empty(4 * n + 64, np.uint32), np.empty(n, np.int64)
        scratch = np.empty((4, n), np.int64)
        got = kernels.noise.lap_draw(src.word_source(), n, plan, 20, words, z, scratch)
        if got < 0:
            handed_back += 1
            z = laplace_replay(scale, n, words[: -got - 1], src)
        else:
            finished += 1
            beyond = np.abs(z) >= plan[2]
            assert not beyond.any() or geometric  # the geometric in the loop only with its tables
        np.testing.assert_array_equal(z, want, err_msg=f"n={n}")
        assert src._raw64.state == ref._raw64.state
    kind = laplace_plan(scale, True)[3]
    if kind == PLAN_DEEP or (not geometric and scale >= 300):
        assert handed_back  # beyond a wide table without its geometric: handed back
    if geometric and kind != PLAN_DEEP:
        assert finished >= 20  # the geometric beyond the table in the loop (ties aside)


@pytest.mark.parametrize(
    ("scale", "stage"), [(Fraction(3), 1), (Fraction(3), 5), (Fraction(300), 5), (Fraction(300), 7)]
)
def test_compiled_laplace_draw_hands_a_tie_back(scale, stage):
    """A word equal to a threshold (probability about 2**-32 a word) of the magnitude table
    (``stage`` 1: the plan's padded array), of the geometric's (5) or of the second geometric's
    (7) stops the compiled draw after its call's words; the replay settles it with the exact
    routine, as numpy's path does."""
    from sketchsyn.privacy.noise import _laplace_core, _Replay, laplace_plan, laplace_replay
    from sketchsyn.privacy.rng import as_source

    plan = laplace_plan(scale, True)
    tie = int(plan[stage][2])  # the third threshold of that table
    top = 2**32 - 1  # beyond the magnitude table (and the truncated table's words: any)
    words = {1: [tie], 5: [top, tie], 7: [top, 5, tie]}[stage]
    given = kernels.words.GivenWords(words)
    drawn = np.empty(64, np.uint32)
    got = kernels.noise.lap_draw(
        given, 1, plan, 20, drawn, np.empty(1, np.int64), np.empty((4, 1), np.int64)
    )
    assert given.taken() == len(words)
    assert got == -(len(words) + 1)  # handed back after the call with the tie
    drawn = drawn[: len(words)].copy()
    want = _laplace_core(scale, 1, _Replay(as_source(4), drawn))
    np.testing.assert_array_equal(laplace_replay(scale, 1, drawn, as_source(4)), want)


class _Words:
    """A source of given 32-bit words, numpy's way: ``uint32(n)`` the next ``n``, ``bytes(n)``
    those of the next ``ceil(n/4)`` words (low byte first)."""

    def __init__(self, words):
        self.words, self.at = list(words), 0

    def next(self, _state=None):
        self.at += 1
        return self.words[self.at - 1]

    def uint32(self, n):
        return np.array([self.next() for _ in range(n)], dtype=np.uint32)

    def bytes(self, n):
        return self.uint32(-(-n // 4)).view(np.uint8)[:n].copy()

    def coins(self, n):
        return self.bytes(n)

    def bits(self, n):
        return (self.bytes(n) & 1).astype(bool)


@pytest.mark.parametrize("scale", [Fraction(3), Fraction(300)])
def test_compiled_laplace_draw_redraws_beyond_the_geometric_table(scale):
    """Words chosen to go beyond the magnitude table and then beyond the geometric's (a redraw,
    rare with random words): the compiled draw's loop
    reads the words the Python draw reads, in the same order, and gives the same values
    (``GivenWords``: the loop's source of the given words)."""
    from sketchsyn.privacy.noise import _laplace_core, laplace_plan

    top, low = 2**32 - 1, 3
    plan = laplace_plan(scale, True)
    redraws = 0
    for words in ([top, top, top, low, 1], [top, low, top, top, low, low, 0, 1, 1, 1],
                  [low, top, top, low, top, low, low, low, 1, 1]):  # fmt: skip
        words = words + [low] * 12  # enough for the draws of two values
        for n in (1, 2):
            ref = _Words(words)
            want = _laplace_core(scale, n, ref)
            fake = kernels.words.GivenWords(words)
            out = np.empty(n, np.int64)
            got = kernels.noise.lap_draw(fake, n, plan, 20, np.empty(64, np.uint32), out,
                                         np.empty((4, n), np.int64))  # fmt: skip
            assert got >= 0
            np.testing.assert_array_equal(out, want, err_msg=f"{words} n={n}")
            assert fake.taken() == ref.at, (words, n)
            redraws += int(np.abs(want).max() >= 2 * plan[2])
    assert redraws >= 3  # beyond the magnitude table and a redraw of the geometric


def test_compiled_laplace_draw_takes_the_generators_lock():
    """A caller's generator may be shared between threads (numpy's calls take its lock): the
    compiled draw waits for the lock as they do."""
    import threading

    from sketchsyn.privacy.noise import _laplace_core
    from sketchsyn.privacy.rng import as_source

    src = as_source(np.random.default_rng(3))
    done = threading.Event()
    with src.lock:
        worker = threading.Thread(
            target=lambda: (_laplace_core(Fraction(3), 100, src), done.set()), daemon=True
        )
        worker.start()
        assert not done.wait(0.3)  # blocked on the lock
    assert done.wait(30)


@pytest.mark.parametrize("bits", ["PCG64", "PCG64DXSM", "SFC64", "Philox"])
def test_compiled_draws_are_numpys_whatever_the_bit_generator(bits):
    """The compiled loop calls the generator's ``next_uint32`` once a word: numpy's
    ``integers(0, 2**32)`` and its bytes come from the same calls, for every bit generator
    whose 64-bit words are raw (the draws are equal, and the generators go on alike)."""
    from sketchsyn.privacy.noise import _laplace_core
    from sketchsyn.privacy.rng import as_source

    def source():
        return as_source(np.random.Generator(getattr(np.random, bits)(21)))

    fast, ref = source(), source()
    for scale, n in [(Fraction(3), 100), (Fraction(300), 300), (Fraction(5, 2), 1500)] * 3:
        got = _laplace_core(scale, n, fast)
        with kernels.numpy_only():
            want = _laplace_core(scale, n, ref)
        np.testing.assert_array_equal(got, want)
        ref.uint32(1)  # an odd number of words between draws: numpy's half-word buffer
        fast.uint32(1)
    assert fast.uint32(9).tolist() == ref.uint32(9).tolist()  # the generators went as far
