"""InhomogeneousSparseBank: exact trip draws, the scalar counter's law, exact bookkeeping, bytes,
bad input, and a privacy audit of its releases and noisy state on neighbouring streams."""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import sketchsyn.counters.base as counters
import sketchsyn.counters.sparse as sparse
import sketchsyn.counters.sparsebank as sb
from sketchsyn import kernels
from sketchsyn.counters import InhomogeneousSparseCounter, checks, online_budgets, settle
from sketchsyn.counters.sparsebank import InhomogeneousSparseBank, first_trips
from sketchsyn.errors import InputError, ParameterError, SerializationError
from sketchsyn.io.serial import header_of, pack, unpack
from sketchsyn.privacy.rng import as_source


# ------------------------------------------------------------------ exact trip draws
def test_first_trips_equal_the_exact_routine_on_the_same_bits(monkeypatch):
    """With the float margin made useless every draw goes to the exact big-rational routine with
    the same words of U: the outcomes must be identical to the fast path's, draw by draw."""
    rng = np.random.default_rng(0)
    x = Fraction(1, 40)
    a = np.concatenate([rng.integers(-300, 3000, 1500), [0, -1, 10**6, -(10**6)]])
    s = np.concatenate([rng.integers(1, 10**7, 1500), [1, 1, 2**40, 5]])
    fast = first_trips(x, a, s, as_source(5))
    assert 0.05 < (fast > 0).mean() < 0.95  # both outcomes are well represented
    monkeypatch.setattr(sparse, "_REL", 1e30)
    exact = first_trips(x, a, s, as_source(5))
    np.testing.assert_array_equal(fast, exact)


def test_a_32_bit_word_decides_as_its_whole_uniform():
    """A check's first 32 bits, ``k = P·2**32``, decide it on the interval ``[k, k + 2**32)``:
    where the float decision takes one (``span = 2**32``), it is the exact outcome of every
    uniform in the interval (both ends checked); where it leaves the check, the exact routine
    with ``bits=32`` draws the further bits from the source and matches the whole 64-bit word."""
    rng = np.random.default_rng(1)
    x, xf = Fraction(1, 40), 1 / 40
    n = 400
    a = rng.integers(-300, 300, n)
    s = rng.integers(1, 10**5, n)
    # Prefixes near each check's thresholds, so that some intervals straddle one.
    p_stay = np.exp(s * sparse._log_stay(xf, a))
    near = np.clip(p_stay + rng.normal(0, 1e-9, n), 0, 1 - 2**-32)
    prefix = (near * 2**32).astype(np.uint64)
    k = prefix << np.uint64(32)
    g, unsure = sparse.trip_decisions(xf, a, s, k, 2.0**32)
    assert 0 < unsure.sum() < n  # both kinds occur
    for i in range(n):
        low = int(rng.integers(0, 2**32))
        whole = int(k[i]) | low
        want = sparse.exact_trip(x, int(a[i]), int(s[i]), whole, as_source(9))
        if not unsure[i]:  # the interval's decision is every uniform's in it
            for end in (int(k[i]), int(k[i]) + 2**32 - 1):
                assert sparse.exact_trip(x, int(a[i]), int(s[i]), end, as_source(9)) == g[i]
            assert want == g[i]
        src = as_source(np.random.Generator(np.random.PCG64(3)))
        # The source's next 32-bit word is the uniform's second: the same U as ``whole``.
        src_words = np.random.Generator(np.random.PCG64(3)).integers(0, 2**32, 1, np.uint32)
        whole_src = int(k[i]) | int(src_words[0])
        got = sparse.exact_trip(x, int(a[i]), int(s[i]), int(k[i]), src, bits=32)
        assert got == sparse.exact_trip(x, int(a[i]), int(s[i]), whole_src, as_source(11))


@pytest.mark.parametrize(("bits", "own_bits"), [(64, 64), (32, 32), (32, 16), (8, 8)])
def test_settled_checks_know_how_many_bits_their_word_holds(monkeypatch, bits, own_bits):
    """The bank settles a check the float decision left with the exact routine, told whether
    the event's word holds 64 or 32 bits of its uniform (a resumed counter's fresh words are
    always whole): every check is left to it here (the float margin made useless)."""
    monkeypatch.setattr(checks, "SEEDED_BITS", bits)
    monkeypatch.setattr(checks, "SEEDED_OWN_BITS", own_bits)
    monkeypatch.setattr(sparse, "_REL", 1e30)
    seen = []
    real = settle.exact_trip

    def recording(x, a, s, k, src, word_bits=64):
        seen.append(word_bits)
        return real(x, a, s, k, src, word_bits)

    monkeypatch.setattr(settle, "exact_trip", recording)
    bank = InhomogeneousSparseBank(3, 4.0, lambda r: 3.0, rng=1)
    with kernels.numpy_only():
        bank.update_events(50, [0, 1, 2, 0], [3, 9, 20, 40])
    assert seen and set(seen) <= {bits, own_bits, 64}
    assert seen.count(own_bits) >= 2 and seen.count(bits) >= 2  # own checks' and gaps' words


@pytest.mark.parametrize(
    ("a", "x"), [(3, Fraction(1, 2)), (-2, Fraction(1, 3)), (40, Fraction(1, 8))]
)
def test_first_trips_are_geometric(a, x):
    """G has P(G > g) = (1 − p)^g with p = P(Lap_Z(1/x) > a): a chi-square over 40 000 draws
    (g = 1 … 12 and the tail, then 'no trip in s')."""
    q = math.exp(-float(x))
    p = q ** (a + 1) / (1 + q) if a >= 0 else 1 - q ** (-a) / (1 + q)
    s = max(12, int(3 / p))
    n = 40_000
    g = first_trips(x, np.full(n, a), np.full(n, s), as_source(11))
    edges = list(range(1, 13))
    probs = [(1 - p) ** (k - 1) * p for k in edges]
    probs.append((1 - p) ** 12 - (1 - p) ** s)  # 13 … s
    probs.append((1 - p) ** s)  # no trip
    counts = [int((g == k).sum()) for k in edges]
    counts.append(int(((g > 12) & (g <= s)).sum()))
    counts.append(int((g == 0).sum()))
    obs, exp = np.array(counts, float), n * np.array(probs)
    keep = exp >= 5
    obs = np.append(obs[keep], obs[~keep].sum())
    exp = np.append(exp[keep], exp[~keep].sum())
    if exp[-1] < 5:
        obs, exp = obs[:-1], exp[:-1]
    chi2 = float(((obs - exp) ** 2 / exp).sum())
    assert stats.chi2.sf(chi2, obs.size - 1) > 1e-4, (chi2, obs, exp)


def test_first_trips_fail_when_off_by_one(monkeypatch):
    """The law test above has the power to see a geometric shifted by one."""
    x, a, n = Fraction(1, 2), 3, 40_000
    q = math.exp(-0.5)
    p = q ** (a + 1) / (1 + q)
    g = first_trips(x, np.full(n, a), np.full(n, 10**6), as_source(3)) + 1
    probs = np.array([(1 - p) ** (k - 1) * p for k in range(1, 13)])
    obs = np.array([(g == k).sum() for k in range(1, 13)], float)
    chi2 = float(((obs - n * probs) ** 2 / (n * probs)).sum())
    assert stats.chi2.sf(chi2, 11) < 1e-10


# ------------------------------------------------------------------ the scalar counter's law
def _stream(n, seed, density=0.6):
    rng = np.random.default_rng(seed)
    xs = (rng.random(n) < density).astype(np.int64) * rng.integers(1, 4, n)
    return xs


def _bank_events(bank, xs, t_from, t_to):
    """Give every counter of the bank the steps t_from+1 … t_to of xs (xs[t-1] at step t)."""
    steps = np.arange(t_from + 1, t_to + 1)
    hot = steps[xs[steps - 1] > 0]
    m = bank.size
    bank.update_events(
        t_to, np.tile(np.arange(m), hot.size), np.repeat(hot, m), np.repeat(xs[hot - 1], m)
    )


@functools.lru_cache(maxsize=1)
def _scalar_reference(eps, runs):
    """Releases at steps 200 and 300 of ``runs`` seeded scalar counters on ``_stream(300, 1)``
    (budget 3 at every level), computed once for the law tests below."""
    xs = _stream(300, 1)
    out = []
    for i in range(runs):
        c = InhomogeneousSparseCounter(eps, lambda r: 3.0, 0, rng=10_000 + i)
        row = []
        for lo, hi in ((0, 200), (200, 300)):
            c.update_many(xs[lo:hi])
            row += [c.query(), c._sparse._sub.t, c._sparse._n]
        out.append(row)
    return np.array(out, float).T  # release, closed segments, N: at step 200, then at 300


@pytest.fixture(params=["numpy", "compiled"])
def path(request):
    """The bank's checks by the numpy reference, or by the compiled kernels (the extension)."""
    if request.param == "numpy":
        with kernels.numpy_only():
            yield request.param
        return
    if not kernels.enabled():
        pytest.skip(kernels.why())
    yield request.param


@pytest.mark.xdist_group("sparsebank_scalar_reference")  # one worker computes it once
@pytest.mark.parametrize(
    ("window", "bits", "shared"),
    [
        (4096, (64, 64), False),
        (7, (64, 64), False),
        (4096, (32, 16), False),
        (4096, (32, 32), True),
        (7, (8, 8), True),
    ],
)
def test_bank_has_the_law_of_scalar_counters(monkeypatch, window, bits, shared, path):
    """Counter by counter the bank has the law of InhomogeneousSparseCounter: 1 200 counters of a
    bank against 1 200 seeded scalar counters on one stream with many segment closings (large
    budgets, small thresholds), read inside a time level and after level ends; two-sample KS.
    ``window`` = 7 forces many rounds of the batched checks; both paths of the checks; ``bits``
    = (32, 16): words of 32 bits for each gap's uniform, 16 for each own check's. ``shared``:
    a private bank's checks, one uniform per counter and round (of 32 bits; of 8, whose
    intervals leave about one check in 256 to the exact routine, given the round's earlier
    checks)."""
    monkeypatch.setattr(sb, "_WINDOW", window)
    monkeypatch.setattr(sb, "_SHARED_SEEDED", shared)
    monkeypatch.setattr(checks, "SEEDED_BITS", bits[0])
    monkeypatch.setattr(checks, "SEEDED_OWN_BITS", bits[1])
    # ε = 4 gives the time levels of ε = 1 shifted by two (levels 0 and 1 are empty) and
    # allows the large budget (a budget above ε is refused).
    eps, budgets, runs = 4.0, (lambda r: 3.0), 1200
    xs = _stream(300, 1)
    bank = InhomogeneousSparseBank(runs, eps, budgets, rng=2)
    assert bank._shared is shared
    got = []
    for lo, hi in ((0, 200), (200, 300)):
        _bank_events(bank, xs, lo, hi)
        got += [bank.query(), bank._segs.copy(), bank._n.copy()]
    assert bank._segs.max() > 0  # segments did close inside the level
    # The releases, and the trusted state the checks decide: segments closed and N.
    for g, want in zip(np.array(got, float), _scalar_reference(eps, runs), strict=True):
        assert stats.ks_2samp(g, want).pvalue > 1e-4
        assert abs(g.mean() - want.mean()) <= 5 * math.sqrt(2 * want.var() / runs)


@pytest.mark.parametrize(("window", "bits"), [(4096, 32), (7, 8)])
def test_a_private_bank_in_one_compiled_loop_has_the_law_of_a_seeded_one(monkeypatch, window, bits):
    """A private bank (the OS CSPRNG) makes its rounds in the compiled loop, drawing its
    words from this thread's buffer of the OS CSPRNG's words (:mod:`sketchsyn.kernels.oswords`):
    counter by counter (6,000 of them) it has the law of a seeded bank whose rounds share
    uniforms in the same loop (checked against scalar counters above), on the stream of the
    test above, read inside a level and after level ends. ``bits`` = 8 (each round's uniform
    of 8 bits) leaves about one check in 256 to the exact routine, given the round's earlier
    checks; ``window`` = 7 makes many rounds. A loop whose sub-mechanism noise had half its
    scale fails here (p about 1e-17)."""
    from sketchsyn.kernels import oswords

    if not kernels.enabled():
        pytest.skip(kernels.why())
    if oswords.word_source() is None:
        pytest.skip("no OS CSPRNG the loops can call: a private bank keeps its Python rounds")
    monkeypatch.setattr(sb, "_WINDOW", window)
    monkeypatch.setattr(checks, "SECURE_BITS", bits)
    calls = []
    real = kernels.counters.rounds

    def counted(*args):
        calls.append(args[0])
        return real(*args)

    monkeypatch.setattr(kernels.counters, "rounds", counted)
    eps, budgets, runs = 4.0, (lambda r: 3.0), 6000
    xs = _stream(300, 1)

    def feed(bank):
        got = []
        for lo, hi in ((0, 200), (200, 300)):
            _bank_events(bank, xs, lo, hi)
            got += [bank.query(), bank._segs.copy(), bank._n.copy()]
        assert bank._segs.max() > 0
        return np.array(got, float)

    got = feed(InhomogeneousSparseBank(runs, eps, budgets))
    assert calls and (bits == 32 or kernels.counters.SCAN in calls)  # (8 bits: checks were settled)
    monkeypatch.setattr(sb, "_SHARED_SEEDED", True)
    want = feed(InhomogeneousSparseBank(runs, eps, budgets, rng=2))
    # Unseeded, so the margins make a false alarm rare (p 1e-6 a statistic; a mean's variance
    # at least 1/runs: a statistic the reference never moved may move in a rare counter).
    for g, w in zip(got, want, strict=True):
        assert stats.ks_2samp(g, w).pvalue > 1e-6
        assert abs(g.mean() - w.mean()) <= 6 * math.sqrt(2 * max(w.var(), 1 / runs) / runs)


def test_a_tripped_gap_takes_fresh_words_for_its_rest(path):
    """A uniform decides one check that counts: when a gap's check trips, the rest of the gap
    (at the new threshold) takes fresh words, not the tripped gap's (whose uniform is then
    known to lie below (1 − p)^(g−1)). A threshold far below the count makes the first idle
    check trip for sure; the bank must draw the batch's words (one gap, one own check) and at
    least one more word for the rest of the gap."""
    bank = InhomogeneousSparseBank(1, 4.0, lambda r: 3.0, rng=1)
    bank.update_events(40, [0], [40])  # into a level with room for a gap of 20 steps
    bank._theta[:] = -(10**6)
    # The words the check source's generator gives from here (a seeded bank's compiled rounds
    # draw from it directly, not through RandomSource.uint64): counted by stepping a clone.
    bits = bank._check_src._raw64
    clone = np.random.PCG64()
    clone.state = bits.state
    bank.update_events(61, [0], [61])
    assert bank._lv.first <= 41 and bank._lv.end >= 61
    drawn = 0
    while clone.state != bits.state and drawn < 100:
        clone.random_raw()
        drawn += 1
    # the gap's word, the own check's word, and at least one more for the rest of the gap
    assert 3 <= drawn < 100, drawn


def test_a_private_bank_shares_one_uniform_per_counter_and_round(monkeypatch, path):
    """A private bank's checks (``shared``) take one uniform per counter with events in a
    round, whatever its events and idle steps, not one per check: 50 counters with 40 events
    each and no trip (thresholds far above the counts) draw 50 words in one round; a seeded
    bank draws one per event and one per gap."""
    events = np.repeat(np.arange(50), 40), np.tile(np.arange(130, 210, 2), 50)
    drawn = {}
    for shared in (True, False):
        monkeypatch.setattr(sb, "_SHARED_SEEDED", shared)
        bank = InhomogeneousSparseBank(50, 1.0, lambda r: 0.5, start_level=7, rng=4)
        bank.skip(1)
        bank._theta[:] = 10**9
        order = np.argsort(events[1], kind="stable")
        cells, times = events[0][order], events[1][order]
        drawn[shared] = _words_drawn(
            bank._check_src._raw64, lambda b=bank, c=cells, t=times: b.update_events(210, c, t)
        )
        assert (bank._segs == 0).all() and (bank._n == 40).all()
    assert drawn == {True: 50, False: 50 * 40 * 2}


def test_a_private_bank_shares_uniforms_in_compiled_rounds_only(monkeypatch, path):
    """A private bank shares one uniform per counter and round when its rounds are compiled;
    the numpy rounds (which decide a whole window in array passes) keep a word per check, and
    a seeded bank always does. The batches say which (``Events.shared``)."""
    seen = []
    real = checks.Events.of.__func__

    def recording(cls, *args, **kwargs):
        ev = real(cls, *args, **kwargs)
        seen.append(ev.shared)
        return ev

    monkeypatch.setattr(checks.Events, "of", classmethod(recording))
    for rng in (None, 0):
        bank = InhomogeneousSparseBank(3, 1.0, online_budgets(1.0, 2, 0), rng=rng)
        assert bank._shared is (rng is None)
        seen.clear()
        bank.update_events(50, [0, 1, 2, 0], [3, 9, 20, 40])  # batches in 4 time levels
        assert len(seen) == 4
        assert set(seen) == {rng is None and path == "compiled"}


def _words_drawn(bitgen: np.random.PCG64, act) -> int:
    """How many 64-bit words ``act()`` takes from ``bitgen`` (counted by stepping a clone; at
    most 10⁶)."""
    clone = np.random.PCG64()
    clone.state = bitgen.state
    act()
    drawn = 0
    while clone.state["state"] != bitgen.state["state"] and drawn < 10**6:
        clone.random_raw()
        drawn += 1
    return drawn


def test_lazy_first_thresholds_have_the_law_of_eager_ones(monkeypatch, path):
    """A private bank's lazily drawn first thresholds (taken when a counter is first checked, in
    the order counters are first checked, from blocks) against a seeded bank's drawn at once:
    1 500 counters each with its own sparse stream, so counters are first checked in different
    batches, a third of them only by the reads in the later levels; the releases, closed
    segments and ``N`` of both banks agree in law (KS) at a read inside a level and after it,
    with segments closing."""
    eps, budgets, m = 4.0, (lambda r: 3.0), 1500
    gen = np.random.default_rng(3)
    hot = gen.random((300, m)) < gen.uniform(0.0, 0.6, m)  # step t (row t-1), counter c
    vals = gen.integers(1, 4, (300, m))
    hot[127:, : m // 3] = False  # checked only by the reads in the levels from step 128
    hot[127:170, m // 3 : 2 * m // 3] = False  # first checked in a later batch
    banks = {}
    for lazy, seed in ((False, 21), (True, 22)):
        monkeypatch.setattr(sb, "_LAZY_SEEDED", lazy)
        bank = InhomogeneousSparseBank(m, eps, budgets, rng=seed)
        assert bank._lazy is lazy
        got = []
        for lo, hi in ((0, 70), (70, 130), (130, 200), (200, 300)):
            t, c = np.nonzero(hot[lo:hi])
            order = np.argsort(t + lo, kind="stable")
            bank.update_events(hi, c[order], (t + lo + 1)[order], vals[lo:hi][t, c][order])
            if hi in (200, 300):
                got += [bank.query(), bank._segs.copy(), bank._n.copy()]
        banks[lazy] = np.array(got, float)
    assert banks[True][1].mean() > 0.2  # segments closed
    for a, b in zip(banks[False], banks[True], strict=True):
        assert stats.ks_2samp(a, b).pvalue > 1e-4


def test_a_private_bank_draws_thresholds_lazily_and_a_seeded_one_at_once():
    assert InhomogeneousSparseBank(3, 1.0, online_budgets(1.0, 2, 0))._lazy
    assert not InhomogeneousSparseBank(3, 1.0, online_budgets(1.0, 2, 0), rng=0)._lazy


def test_a_counter_draws_its_threshold_only_when_first_checked(path, monkeypatch):
    """A level's first thresholds are taken counter by counter, just before a counter's first
    check, from values drawn in blocks: events in 3 of 4,096 counters draw a block of 64 (plus
    the trips' new thresholds), not 4,096; a read (which draws every counter's idle checks)
    then draws the rest, the pool never holding more than the counters left, and a saved state
    has every threshold drawn."""
    monkeypatch.setattr(sb, "_LAZY_SEEDED", True)  # a private bank's draws, from a seeded source
    m = 4096
    bank = InhomogeneousSparseBank(m, 1.0, online_budgets(1.0, 2, 0), rng=3)
    theta_words = bank._theta_src._raw64

    def two_batches() -> None:
        bank.update_events(257, [7], [257])  # into the level of steps 256 to 511
        bank.update_events(260, [1, 9], [258, 259])

    drawn = _words_drawn(theta_words, two_batches)
    lv = bank._lv
    assert lv.first <= 257 and lv.end >= 300
    checked = np.flatnonzero(bank._pos >= lv.first)
    assert checked.tolist() == [1, 7, 9]
    assert 1 <= drawn < 64, drawn  # a block of 64 thresholds (half a word and a sign each)
    assert bank._firsts.drawn == 64 and bank._firsts.unchecked == m - 3  # 7, 1 and 9 took theirs
    assert (bank._theta[bank._pos == lv.first - 1] == 0).all()
    rows_bytes = 16 * bank._acc.shape[1] * bank._rows
    assert bank.nbytes == 64 * m + rows_bytes + 8 * 64 + 64  # the pool is held whole
    drawn = _words_drawn(theta_words, bank.query)
    assert drawn >= (m - 64) // 2 and (bank._pos >= lv.first).all()  # a 32-bit word a value
    assert bank._firsts.nbytes == 0 and bank._firsts.drawn == m  # never more than the unchecked
    # The thresholds drawn lazily have the law of the ones drawn at once: t0 + Lap(xs) each.
    rest = np.delete(bank._theta, [1, 7, 9]).astype(float) - lv.t0
    want = counters._draw("laplace", lv.xs, m, as_source(11)).astype(float)
    assert stats.ks_2samp(rest, want).pvalue > 1e-4
    kind, version, meta, arrays = unpack(bank.to_bytes(), "InhomogeneousSparseBank")
    assert meta["ready"] and (arrays["pos"] >= lv.first).all()
    arrays["pos"][5] = lv.first - 1  # a forged ready level with a counter it never checked
    with pytest.raises(SerializationError, match="'pos'"):
        InhomogeneousSparseBank.from_bytes(pack(kind, version, meta, arrays, state="trusted"))


def test_events_and_dense_steps_have_one_law():
    """update_events (idle steps skipped) and update_many (every step checked) agree in law at
    every step read: 2 000 counters each, KS at four steps."""
    eps, budgets, m = 1.0, online_budgets(1.0, 2, 0), 2000
    xs = _stream(150, 4, density=0.3)
    dense = InhomogeneousSparseBank(m, eps, budgets, rng=5)
    out = dense.update_many(np.repeat(xs[:, None], m, axis=1))
    for t in (20, 64, 100, 150):
        lazy = InhomogeneousSparseBank(m, eps, budgets, rng=100 + t)
        _bank_events(lazy, xs, 0, t)
        assert stats.ks_2samp(lazy.query(), out[t - 1]).pvalue > 1e-4, t


def test_skip_equals_steps_of_zero_in_law():
    eps, budgets, m = 0.5, online_budgets(0.5, 2, 1), 4000
    a = InhomogeneousSparseBank(m, eps, budgets, start_level=1, rng=7)
    b = InhomogeneousSparseBank(m, eps, budgets, start_level=1, rng=8)
    a.skip(300)
    b.update_many(np.zeros((300, m), dtype=np.int64))
    assert a.t == b.t == 303
    assert stats.ks_2samp(a.query(), b.query()).pvalue > 1e-4


# ------------------------------------------------------------------ exact bookkeeping
def test_huge_budgets_release_the_exact_counts():
    """With ε_r = 10^6 every noise is 0 with overwhelming probability (Lap_Z(2·10^-6)) and a
    segment closes at each value > 0: the release is the exact count of the steps from
    t_{start_level} on, at every step, across level ends, in both paths."""
    eps = 2.0**20  # t_r = 2^(r−20): levels end at 15, 31, 63 … (budgets may not pass ε)
    m, n = 5, 90
    rng = np.random.default_rng(9)
    xs = rng.integers(0, 3, (n, m)) * (rng.random((n, m)) < 0.4)
    start = 23  # t_23 = 8: steps 1 … 7 are not counted
    want = np.cumsum(np.where(np.arange(1, n + 1)[:, None] >= 8, xs, 0), axis=0)
    dense = InhomogeneousSparseBank(m, eps, lambda r: 1e6, start_level=start, rng=1)
    assert dense.t == 7
    out = dense.update_many(xs[7:])
    np.testing.assert_array_equal(out, want[7:])
    lazy = InhomogeneousSparseBank(m, eps, lambda r: 1e6, start_level=start, rng=2)
    for lo, hi in ((7, 20), (20, 21), (21, 64), (64, 90)):
        cells, steps = np.nonzero(xs[lo:hi].T)
        # events sorted by time, cells in arbitrary order, one pair split in two (repeated
        # pairs add up)
        order = np.random.default_rng(lo).permutation(cells.size)
        order = order[np.argsort(steps[order], kind="stable")]
        c, tm = cells[order], steps[order] + lo + 1
        v = xs[tm - 1, c]
        if c.size:
            c = np.append(c, c[-1])
            tm = np.append(tm, tm[-1])
            v = np.append(v, 0)
        lazy.update_events(hi, c, tm, v)
        np.testing.assert_array_equal(lazy.query(), want[hi - 1])


def test_level_totals_carry_their_noise_into_later_releases():
    """After a level ends its total's noise stays in every later release; the sparse part
    restarts at 0. Noise only at the level totals (huge sparse budgets are impossible to split
    from the totals' ones, so the check is on the variance): 20 000 counters, idle, read after
    levels 0 … 4 ended: variance = Σ_r Var Lap_Z(2/ε_r)."""
    from sketchsyn.privacy.noise import discrete_laplace_variance

    eps, m = 1.0, 20_000
    budgets = online_budgets(eps, 1, 0)  # (5.1): ε_r constant in r
    bank = InhomogeneousSparseBank(m, eps, budgets, rng=3)
    bank.skip(16)  # t = 16 = t_4: levels 0 … 3 ended (their totals are in), level 4 open
    var = sum(discrete_laplace_variance(2 / budgets(r)) for r in range(4))
    got = bank.query().astype(float)
    assert abs(got.mean()) < 5 * math.sqrt(var / m)
    assert abs(got.var() / var - 1) < 0.06  # sd of the ratio ≈ sqrt(2/m)·kurtosis term ≈ 0.015


def test_max_budget_is_the_largest_level_budget_used():
    b = online_budgets(1.0, 2, 3)
    bank = InhomogeneousSparseBank(4, 1.0, b, start_level=3, rng=0)
    bank.skip(100)
    assert bank.max_budget == pytest.approx(max(b(r) for r in range(3, bank.level + 1)))
    assert bank.max_budget <= 1.0


# ------------------------------------------------------------------ bytes, size, bad input
def test_bytes_round_trip_and_loaded_copies_continue_alike():
    b = InhomogeneousSparseBank(6, 1.0, online_budgets(1.0, 2, 1), start_level=1, rng=4)
    b.update_events(50, [0, 0, 5, 3], [2, 9, 9, 40])
    blob = b.to_bytes()
    kind, _, meta, _ = unpack(blob, "InhomogeneousSparseBank")
    assert "exact_state" not in meta and "lineage" in meta
    assert header_of(blob).state == "trusted"
    x, y = (InhomogeneousSparseBank.from_bytes(blob, rng=9) for _ in range(2))
    np.testing.assert_array_equal(x.query(), b.query())
    assert x.lineage == b.lineage and x.t == b.t == 50
    for c in (x, y):
        c.update_events(400, [1, 2], [60, 300])
    np.testing.assert_array_equal(x.query(), y.query())
    assert x.to_bytes() == y.to_bytes()
    bad = bytearray(blob)
    bad[len(bad) // 2] ^= 4
    with pytest.raises(SerializationError):
        InhomogeneousSparseBank.from_bytes(bytes(bad))
    # A blob with a valid checksum but inconsistent contents is refused, not half loaded.
    kind, version, meta, arrays = unpack(blob, "InhomogeneousSparseBank")
    for key, value in (("row", 3), ("segs", -1), ("pos", 10**6), ("n", -2)):
        bad_arrays = {k: a.copy() for k, a in arrays.items()}
        bad_arrays[key][0] = value
        with pytest.raises(SerializationError):
            InhomogeneousSparseBank.from_bytes(
                pack(kind, version, meta, bad_arrays, state="trusted")
            )
    custom = InhomogeneousSparseBank(2, 1.0, lambda r: 0.5, rng=1)
    with pytest.raises(SerializationError, match="budgets"):
        InhomogeneousSparseBank.from_bytes(custom.to_bytes())
    back = InhomogeneousSparseBank.from_bytes(custom.to_bytes(), budgets=lambda r: 0.5)
    assert back.size == 2


def test_nbytes_formula_and_trees_only_for_closing_counters():
    b = InhomogeneousSparseBank(100, 4.0, lambda r: 3.0, rng=0)  # the levels of ε = 1, shifted
    assert b.nbytes == 64 * 100 + 64
    _bank_events(b, np.ones(200, dtype=np.int64), 0, 120)
    b.query()
    levels = b._acc.shape[1]
    assert b._rows == int((b._segs > 0).sum()) > 0
    assert b.nbytes == 64 * 100 + 16 * levels * b._rows + 64


def test_bad_input_refused_with_the_bank_unchanged():
    b = InhomogeneousSparseBank(4, 1.0, online_budgets(1.0, 2, 0), rng=0)
    b.update_events(10, [1, 2], [3, 4])
    before = b.to_bytes()
    bad_calls = [
        lambda: b.update_events(20, [1, 4], [11, 12]),  # cell out of range
        lambda: b.update_events(20, [1, 2], [11, 25]),  # time after until
        lambda: b.update_events(20, [1, 2], [10, 12]),  # time not after t
        lambda: b.update_events(5, [], []),  # until before t
        lambda: b.update_events(20, [1, 2], [11, 12], [1, -1]),  # negative value
        lambda: b.update_events(20, [1, 2], [11, 12], [1, 0.5]),  # not an integer
        lambda: b.update_events(20, [1.0, 2.0], [11, 12]),  # float cells
        lambda: b.update_events(20, [1, 2], [11]),  # lengths differ
        lambda: b.update_many(np.array([[0, 1, 0, -1]])),
        lambda: b.update_many(np.zeros((3, 5), dtype=np.int64)),  # wrong width
        lambda: b.update(["a", 0, 0, 0]),
    ]
    for call in bad_calls:
        with pytest.raises((InputError, ParameterError)):
            call()
        assert b.to_bytes() == before
    with pytest.raises(ParameterError):
        b.skip(-1)
    with pytest.raises(ParameterError):
        InhomogeneousSparseBank(0, 1.0, online_budgets(1.0, 2, 0))
    with pytest.raises(ParameterError):
        InhomogeneousSparseBank(3, 1.0, 0.5)
    with pytest.raises(ParameterError):
        InhomogeneousSparseBank(3, 1.0, lambda r: -1.0)


# ------------------------------------------------------------------ privacy audit
def _cp(k: int, n: int, alpha: float = 1e-3) -> tuple[float, float]:
    lo = 0.0 if k == 0 else stats.beta.ppf(alpha, k, n - k + 1)
    hi = 1.0 if k == n else stats.beta.ppf(1 - alpha, k + 1, n - k)
    return float(lo), float(hi)


def _eps_hat(y: np.ndarray, y2: np.ndarray) -> float:
    """Lower confidence bound on the privacy loss of events {y ≥ τ} and {y ≤ τ} between two
    samples (D' has one more event than D, so its outputs lean up)."""
    best = -np.inf
    n = y.size
    for tau in np.unique(np.quantile(np.concatenate([y, y2]), np.linspace(0.02, 0.98, 25))):
        for ev, ev2 in ((y >= tau, y2 >= tau), (y <= tau, y2 <= tau)):
            k, k2 = int(ev.sum()), int(ev2.sum())
            for num, den in ((k2, k), (k, k2)):
                lo, _ = _cp(num, n)
                _, hi = _cp(den, n)
                if lo > 0:
                    best = max(best, math.log(lo / hi))
    return best


def _audit_runs(eps_r: float, m: int, seed: int) -> tuple[np.ndarray, ...]:
    """Neighbours D (an idle stream) and D' (one event at step 5, time level 2 of t_r = 2^r;
    the counters start at level 2). Returned: releases at step 8 (level 2 ended: S̃ is its
    noisy total) and the noisy total of level 2 read from the bytes at step 8 (``base``), under
    D and D'. At step 7 the trusted bytes hold the level's exact count (``open``): its noise is
    drawn when the level closes, and no release before that holds the level's total."""
    out = []
    for k, with_event in enumerate((False, True)):
        b = InhomogeneousSparseBank(m, 1.0, lambda r: eps_r, start_level=2, rng=seed + k)
        if with_event:
            b.update_events(7, np.arange(m), np.full(m, 5))
        else:
            b.skip(4)
        _, _, _, arrays = unpack(b.to_bytes(), "InhomogeneousSparseBank")
        assert (arrays["open"] == int(with_event)).all()  # the exact count, no noise yet
        b.skip(1)
        _, _, _, arrays = unpack(b.to_bytes(), "InhomogeneousSparseBank")
        out += [b.query().astype(float), arrays["base"].astype(float)]
    rel, closed, rel2, closed2 = out
    return rel, rel2, closed, closed2


def test_privacy_audit_on_neighbouring_streams(monkeypatch):
    """A record at a step of level r costs ε_r/2 in the level's total (Lemma 3.3's other half is
    the sparse counter's): events on the release after the level and on the level's noisy total
    in the saved state have ε̂ ≤ ε_r/2 (Clopper–Pearson lower bounds, 30 000 counters per side).
    With the totals' noise halved (2× the budget) the same audit finds ε̂ > ε_r/2: it has the
    power to see it."""
    eps_r, m = 1.0, 30_000
    rel, rel2, op, op2 = _audit_runs(eps_r, m, 100)
    for a, b in ((rel, rel2), (op, op2)):
        got = _eps_hat(a, b)
        assert got <= eps_r / 2, got
        assert got > 0.35  # the pair does leak (up to 0.5): the audit is not blind
    real = sb._Level.__init__

    def halved(self, *args, **kwargs):
        real(self, *args, **kwargs)
        self.scale = self.scale / 2

    monkeypatch.setattr(sb._Level, "__init__", halved)
    sb._level.cache_clear()
    try:
        rel, rel2, op, op2 = _audit_runs(eps_r, m, 200)
        assert _eps_hat(rel, rel2) > 0.75 * eps_r
        assert _eps_hat(op, op2) > 0.75 * eps_r
    finally:
        sb._level.cache_clear()


def test_draws_use_the_counters_exact_samplers():
    """The bank's noise is the exact integer Laplace of sketchsyn.privacy.noise (through
    sketchsyn.counters.base._draw), never a float sampler: its level totals fit Lap_Z(2/ε_r) by
    a chi-square (the first level's, drawn as it closes: ``S̃`` one step after its end)."""
    from sketchsyn.privacy.noise import discrete_laplace_pmf

    m = 40_000
    b = InhomogeneousSparseBank(m, 1.0, lambda r: 0.8, rng=6)
    b.skip(b._lv.end - b.t + 1)
    assert b._lv.r == 1 and b.t == b._lv.first  # level 0 closed, no other passed whole
    _, _, _, arrays = unpack(b.to_bytes(), "InhomogeneousSparseBank")
    z = arrays["base"]
    ks = np.arange(-12, 13)
    probs = discrete_laplace_pmf(ks, 2 / 0.8)
    obs = np.array([(z == k).sum() for k in ks] + [(np.abs(z) > 12).sum()], float)
    exp = m * np.append(probs, 1 - probs.sum())
    chi2 = float(((obs - exp) ** 2 / exp).sum())
    assert stats.chi2.sf(chi2, ks.size) > 1e-4
    assert sb.core is counters  # every draw goes through sketchsyn.counters.base._draw


def test_small_banks_pass_whole_levels_with_the_same_law():
    """noise.laplace_sum draws the totals of the levels a move passes whole: one value at a
    time for a small bank (noise.laplace_scales, one scale per level), level by level in
    vectorised calls for a large one. Both have the law of the noise sum: 3 000 one-counter
    banks against one bank of 3 000 (KS), and the variance formula Σ_r Var Lap_Z(2/ε_r) over
    the levels passed."""
    from sketchsyn.privacy.noise import discrete_laplace_variance

    eps, budgets, m = 1.0, online_budgets(1.0, 2, 0), 3000
    small = []
    for i in range(m):
        b = InhomogeneousSparseBank(1, eps, budgets, rng=50_000 + i)
        b.skip(2**12 - 1)  # t = 4095: levels 0 … 10 closed, level 11 open
        small.append(int(b.query()[0]))
    big = InhomogeneousSparseBank(m, eps, budgets, rng=9)
    big.skip(2**12 - 1)
    small_arr = np.array(small, dtype=float)
    assert stats.ks_2samp(small_arr, big.query()).pvalue > 1e-4
    var = sum(discrete_laplace_variance(2 / budgets(r)) for r in range(11))
    assert abs(small_arr.var() / var - 1) < 0.2
    assert abs(small_arr.mean()) < 5 * math.sqrt(var / m)


def test_laplace_scales_follow_each_scale_law():
    """noise.laplace_scales: each draw is Lap_Z(its scale), for a small scale (magnitude table)
    and a large one (the geometric tail path), by chi-square over 30 000 draws each."""
    from sketchsyn.privacy.noise import discrete_laplace_pmf, laplace_scales

    n = 30_000
    for scale, edges in ((Fraction(3, 2), np.arange(-6, 7)), (Fraction(5000), None)):
        z = np.array(laplace_scales([scale] * n, as_source(int(scale) + 1)), dtype=np.int64)
        if edges is None:  # wide law: compare |z| deciles with the exact tail e^{-|z|/b}
            q = math.exp(-1 / float(scale))
            cut = np.array([500, 1500, 3000, 6000, 12000])
            tail = 2 * q ** (cut + 1) / (1 + q)  # P(|Z| > c)
            probs = -np.diff(np.concatenate(([1.0], tail, [0.0])))
            obs = np.histogram(np.abs(z), bins=np.concatenate(([-1], cut, [np.inf])))[0]
        else:
            probs = discrete_laplace_pmf(edges, float(scale))
            probs = np.append(probs, 1 - probs.sum())
            obs = np.append([(z == k).sum() for k in edges], (np.abs(z) > edges[-1]).sum())
        exp = n * probs
        chi2 = float(((obs - exp) ** 2 / exp).sum())
        assert stats.chi2.sf(chi2, obs.size - 1) > 1e-4, (scale, obs, exp)


def test_unsorted_event_times_are_refused_with_the_bank_unchanged():
    """update_events used to sort a batch silently; times out of order are now a caller's bug
    (the events of one call are one stretch of the stream, in time order)."""
    b = InhomogeneousSparseBank(3, 1.0, online_budgets(1.0, 2, 0), rng=0)
    b.update_events(4, [0], [2])
    before = b.to_bytes()
    with pytest.raises(InputError, match=r"times\[1\] = 5 < times\[0\] = 9"):
        b.update_events(20, [1, 2], [9, 5])
    assert b.to_bytes() == before and b.t == 4
    b.update_events(20, [2, 1, 0], [5, 5, 9])  # equal times in any cell order are fine
    assert b.t == 20


def test_forged_size_is_refused_before_allocating():
    """size = 2**31 in the header with arrays for 3 counters: a SerializationError naming the
    array, not a 128 GiB allocation (MemoryError)."""
    import resource

    b = InhomogeneousSparseBank(3, 1.0, online_budgets(1.0, 2, 0), rng=0)
    kind, version, meta, arrays = unpack(b.to_bytes(), "InhomogeneousSparseBank")
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = 4 * 2**30  # far below the 128 GiB the forged size would ask for
    resource.setrlimit(resource.RLIMIT_AS, (limit if hard < 0 else min(limit, hard), hard))
    try:
        for size in (2**31, 2**26, 4):
            forged = pack(kind, version, {**meta, "size": size}, arrays, state="trusted")
            with pytest.raises(SerializationError, match="base"):
                InhomogeneousSparseBank.from_bytes(forged)
        with pytest.raises(SerializationError, match="size"):
            InhomogeneousSparseBank.from_bytes(
                pack(kind, version, {**meta, "size": 2**62}, arrays, state="trusted")
            )
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    with pytest.raises(ParameterError, match="memory"):
        InhomogeneousSparseBank(2**31, 1.0, online_budgets(1.0, 2, 0))


@pytest.mark.parametrize("field", ["ready", "frozen"])
def test_bank_flags_must_be_bools(field):
    b = InhomogeneousSparseBank(2, 1.0, online_budgets(1.0, 2, 0), rng=0)
    kind, version, meta, arrays = unpack(b.to_bytes(), "InhomogeneousSparseBank")
    for value in (0, 1, "true"):
        forged = pack(kind, version, {**meta, field: value}, arrays, state="trusted")
        with pytest.raises(SerializationError, match=field):
            InhomogeneousSparseBank.from_bytes(forged)


def test_sparse_bank_refuses_budgets_above_epsilon():
    with pytest.raises(ParameterError, match="level 0"):
        InhomogeneousSparseBank(2, 1.0, online_budgets(1.0, 2, 60))


# ------------------------------------------------------------------ the threshold T0
@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 2**62),
    st.fractions(min_value=Fraction(1, 10**6), max_value=Fraction(64), max_denominator=10**12),
    st.integers(1, 8),
)
def test_float_t0_equals_the_decimal_brackets(horizon, epsilon, sensitivity):
    """T0 = floor(9·ln T·sensitivity/ε) from floats (kept only away from an integer) is the
    Decimal brackets' value."""
    got = sparse._floor_t0.__wrapped__(horizon, epsilon, sensitivity)
    assert got == sparse._floor_t0_exact(horizon, epsilon, sensitivity)


def test_t0_near_an_integer_goes_to_the_decimal_brackets(monkeypatch):
    """ε chosen so that 9·ln T/ε is within 10⁻³⁰ of an integer: no float can tell its floor, so
    the float path must hand it over (with its margin taken away it returns the wrong one)."""
    from decimal import Decimal, localcontext

    horizon, target = 1000, 200
    with localcontext() as ctx:
        ctx.prec = 80
        ln = Decimal(horizon).ln()
    # ε slightly above 9·ln T/200: the value is just below 200, so its floor is 199.
    epsilon = Fraction(9 * ln / target) * (1 + Fraction(1, 10**30))
    assert sparse._floor_t0_exact(horizon, epsilon, 1) == target - 1
    assert sparse._floor_t0.__wrapped__(horizon, epsilon, 1) == target - 1
    monkeypatch.setattr(sparse, "_T0_MARGIN", 0.0)
    assert sparse._floor_t0.__wrapped__(horizon, epsilon, 1) == target  # floats alone: wrong


def test_a_level_total_is_noised_when_the_level_closes_and_version_1_blobs_still_load():
    """A level's total noise is drawn as the level closes (the saved ``open`` is the exact
    count until then; the closed total in ``S̃`` is noisy). A version 1 blob drew it when the
    level opened and saved it in ``open``: loaded, its close adds no second draw."""
    m = 200
    b = InhomogeneousSparseBank(m, 1.0, online_budgets(1.0, 2, 0), rng=3)
    b.update_events(b._lv.first + 1, np.arange(m) % 7, np.full(m, b._lv.first + 1))
    assert b._lv.end > b.t  # inside the level
    meta, arrays = b._state()
    np.testing.assert_array_equal(arrays["open"], np.bincount(np.arange(m) % 7, minlength=m))
    before = arrays["base"].copy()
    close = b._lv.end - b.t + 1  # one step past the level: no other level passed whole

    fresh = InhomogeneousSparseBank.from_bytes(b.to_bytes(), rng=4)
    fresh.skip(close)
    noise = fresh._base - before - arrays["open"]
    assert np.count_nonzero(noise) > m // 2  # the close drew the level's noise

    z = np.arange(m, dtype=np.int64) % 11 - 5  # the noise a version 1 bank drew on entry
    old = dict(arrays, open=arrays["open"] + z)
    v1 = pack("InhomogeneousSparseBank", 1, meta, old, state="trusted")
    loaded = InhomogeneousSparseBank.from_bytes(v1, rng=4)
    np.testing.assert_array_equal(loaded.query(), b.query())
    loaded.skip(close)
    np.testing.assert_array_equal(loaded._base, before + arrays["open"] + z)  # no second draw
    assert not loaded._open_noisy  # the next level waits for its close
    assert header_of(loaded.to_bytes()).version == 2


@pytest.mark.parametrize("seed", [3, None])
def test_a_banks_per_counter_arrays_stay_rows_of_one_block(seed):
    """The eight per-counter arrays are rows of one allocation, and stay so across time levels
    (a seeded bank's thresholds, a level's count: written in place), so the bank holds the
    64 bytes per counter that ``nbytes`` reports and no more."""
    bank = InhomogeneousSparseBank(4096, 1.0, online_budgets(1.0, 2, 0), rng=seed)
    block = bank._base.base
    assert block is not None and block.shape == (8, 4096)
    cells = np.arange(0, 4096, 7)
    for until in (50, 400, 3000):  # three updates across several time levels
        bank.update_events(until, cells[: until // 10], np.linspace(bank.t + 1, until,
                           until // 10).astype(np.int64))  # fmt: skip
    bank.query()
    for key in InhomogeneousSparseBank._ARRAYS:
        assert getattr(bank, "_" + key).base is block, key
    assert bank.nbytes == 64 * 4096 + 2 * bank._acc.shape[1] * 8 * bank._rows + 64 + (
        bank._firsts.nbytes
    )
