"""ContinualPrivHP's counter choices, release schedules and deletions; the k-ary tree bank.

Each counter: unbiased cell noise with its closed-form variance, blocks drawn once (the privacy
audits are in tests/test_continual_audit.py); schedules: a release between epochs, noise scaling
with log m; deletions; bytes for every option.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from sketchsyn import Box, ContinualPrivHP, KaryTreeBank
from sketchsyn.counters.karytree import balanced_digits
from sketchsyn.errors import InputError, ParameterError, ReleasedError, SerializationError
from sketchsyn.io.serial import header_of, pack, read
from sketchsyn.privacy.noise import discrete_laplace_variance
from sketchsyn.synth.continual import binary_levels


# ------------------------------------------------------------------ the bank
def test_bank_is_unbiased_with_the_counters_variance() -> None:
    # 40 counters × 250 seeds = 10 000 releases per step; relative s.e. of a variance ≈ 2 %.
    outs = []
    for seed in range(250):
        bank = KaryTreeBank(40, 1.0, 200, k=5, rng=seed)
        outs.append(bank.update_many(np.ones((13, 40), dtype=np.int64))[[6, 12]])
    x = np.stack(outs).astype(float)  # (seeds, 2, 40)
    for i, t in enumerate((7, 13)):
        v = x[:, i].ravel() - t
        want = bank.variance(t)
        assert abs(v.mean()) < 5 * math.sqrt(want / v.size)
        assert v.var() == pytest.approx(want, rel=0.08), (t, v.var(), want)


def test_bank_skip_has_the_law_of_stepping() -> None:
    a, b = [], []
    for seed in range(150):
        skipped = KaryTreeBank(40, 1.0, 500, k=5, rng=seed)
        skipped.update_many(np.ones((3, 40), dtype=np.int64))
        skipped.skip(57)
        a.append(skipped.update(np.ones(40, dtype=np.int64)))
        stepped = KaryTreeBank(40, 1.0, 500, k=5, rng=10_000 + seed)
        stepped.update_many(np.ones((3, 40), dtype=np.int64))
        stepped.update_many(np.zeros((57, 40), dtype=np.int64))
        b.append(stepped.update(np.ones(40, dtype=np.int64)))
    a, b = np.concatenate(a), np.concatenate(b)
    assert stats.ks_2samp(a, b).pvalue > 1e-3
    assert np.var(a - 4) == pytest.approx(skipped.variance(61), rel=0.1)


def test_bank_bytes_round_trip_and_bad_input() -> None:
    bank = KaryTreeBank(3, 1.0, 100, k=5, rng=1)
    bank.update_many([[1, 0, 2], [0, 1, 0]])
    loaded = KaryTreeBank.from_bytes(bank.to_bytes(), rng=7)
    np.testing.assert_array_equal(loaded.query(), bank.query())
    again = KaryTreeBank.from_bytes(bank.to_bytes(), rng=7)
    np.testing.assert_array_equal(loaded.update([1, 1, 1]), again.update([1, 1, 1]))
    assert header_of(bank.to_bytes()).state == "trusted"
    before = bank.to_bytes()
    with pytest.raises(InputError):
        bank.update_many([[1, -1, 0]])
    with pytest.raises(InputError):
        bank.update_many([[1, 0]])
    assert bank.to_bytes() == before
    with pytest.raises(ParameterError, match="size"):
        KaryTreeBank(0, 1.0, 10)
    assert bank.nbytes == 8 * 4 * karylevels(100, 5) * 3 + 8 * 3 + 48


def karylevels(horizon: int, k: int) -> int:
    from sketchsyn.counters.karytree import karytree_levels

    return karytree_levels(horizon, k)


# ------------------------------------------------------------------ the cells' noise
def tiny(seed: int | None, **kw) -> ContinualPrivHP:
    args = dict(k=2, width=16, sketch_depth=2, depth=4, horizon=40, rng=seed)
    return ContinualPrivHP(Box.unit(1), 1.0, **(args | kw))


DATA = np.random.default_rng(5).random((40, 1))


def exact_values(c: ContinualPrivHP, level: int) -> np.ndarray:
    lo, hi = c._offsets[level], c._offsets[level + 1]
    counts = c._closed if c._scheduled else c._counts()
    return counts[lo:hi]


@pytest.mark.parametrize(
    "kw, t",
    [
        (dict(counter="kary", arity=3), 5),
        (dict(counter="kary", arity=3), 13),
        (dict(counter="kary", arity=5), 23),
        (dict(counter="honaker", releases=8), 35),
        (dict(counter="binary", release_every=5), 40),
    ],
)
def test_cell_noise_is_unbiased_with_the_closed_form_variance(kw: dict, t: int) -> None:
    # Levels 3 and 4 pool 32 cells × 200 runs (relative s.e. of the variance below 3 %); the
    # root pools 200 values (about 16 %).
    noise: dict[int, list] = {0: [], 3: [], 4: []}
    for seed in range(200):
        c = tiny(seed, **kw)
        c.update_many(DATA[:t])
        for level in noise:
            noise[level].append(c.cell_values(level).ravel() - exact_values(c, level).ravel())
    for level, draws in noise.items():
        x = np.concatenate(draws).astype(np.float64)
        want = c.cell_variance(level, t)
        assert abs(x.mean()) < 5 * math.sqrt(want / x.size)
        rel = 0.6 if level == 0 else 0.12
        assert x.var() == pytest.approx(want, rel=rel), (level, x.var(), want)


def test_kary_closed_form_is_the_balanced_digits() -> None:
    c = tiny(0, counter="kary", arity=3)
    scale = c.counter_levels * c.sketch_depth / c.sigmas[3]
    for t in (1, 5, 13, 40):
        blocks = int(np.abs(balanced_digits(t, 3, c.counter_levels)).sum())
        assert c.cell_variance(3, t) == pytest.approx(blocks * discrete_laplace_variance(scale))


def test_kary_blocks_are_drawn_once_and_reused() -> None:
    # k = 3: 12 = 9 + 3 and 13 = 9 + 3 + 1: the two releases differ by one level-0 block.
    diffs = []
    for seed in range(300):
        c = tiny(seed, counter="kary", arity=3)
        c.update_many(DATA[:12])
        a = c.cell_values(3).ravel() - exact_values(c, 3)
        c.update(DATA[12])
        b = c.cell_values(3).ravel() - exact_values(c, 3)
        diffs.append(b - a)
    x = np.concatenate(diffs).astype(float)
    scale = c.counter_levels * c.sketch_depth / c.sigmas[3]
    assert x.var() == pytest.approx(discrete_laplace_variance(scale), rel=0.1)


@pytest.mark.parametrize(
    "kw",
    [
        dict(counter="kary", arity=3),
        dict(counter="binary"),
        dict(counter="honaker", release_every=3),
    ],
)
def test_skip_has_the_law_of_empty_steps_one_by_one(kw: dict) -> None:
    # skip(21) against 21 × skip(1) (Honaker: several epochs closed in one eager step against
    # one by one), after 7 rows: pooled sketch-cell noise, two-sample test and closed form.
    a, b = [], []
    for seed in range(120):
        one, many = tiny(seed, **kw), tiny(10_000 + seed, **kw)
        one.update_many(DATA[:7])
        many.update_many(DATA[:7])
        one.skip(21)
        for _ in range(21):
            many.skip(1)
        a.append(one.cell_values(3).ravel() - exact_values(one, 3))
        b.append(many.cell_values(3).ravel() - exact_values(many, 3))
    x, y = np.concatenate(a).astype(float), np.concatenate(b).astype(float)
    assert stats.ks_2samp(x, y).pvalue > 1e-3
    want = one.cell_variance(3, 28)
    assert x.var() == pytest.approx(want, rel=0.15) and y.var() == pytest.approx(want, rel=0.15)


def test_kary_before_and_after_blocks_are_independent() -> None:
    # k = 3: 2 = 3 − 1, 3 = 3, 4 = 3 + 1. r3 − r2 is the before-block (2, 3], r4 − r3 the
    # after-block (3, 4]: independent draws of one block each (a table that kept the before
    # value for the after phase would make them equal).
    d1, d2 = [], []
    for seed in range(300):
        c = tiny(seed, counter="kary", arity=3)
        r = []
        for step in range(4):
            c.update_many(DATA[step : step + 1])
            r.append(c.cell_values(3).ravel() - exact_values(c, 3))
        d1.append(r[2] - r[1])
        d2.append(r[3] - r[2])
    x, y = np.concatenate(d1).astype(float), np.concatenate(d2).astype(float)
    v = discrete_laplace_variance(c.counter_levels * c.sketch_depth / c.sigmas[3])
    assert x.var() == pytest.approx(v, rel=0.1) and y.var() == pytest.approx(v, rel=0.1)
    assert abs(np.corrcoef(x, y)[0, 1]) < 0.05


# ------------------------------------------------------------------ schedules
def test_a_release_between_epochs_is_the_last_closed_epochs() -> None:
    c = tiny(3, releases=4)  # epochs end at steps 10, 20, 30, 40
    c.update_many(DATA[:10])
    first = c.release()
    assert c.epoch == 1 and first.params["t"] == 10
    c.update_many(DATA[10:17])
    assert c.epoch == 1 and c.release() is first
    np.testing.assert_array_equal(exact_values(c, 0), [10])
    c.update_many(DATA[17:23])
    assert c.epoch == 2 and c.release() is not first and c.release().params["t"] == 20


@pytest.mark.parametrize("kw", [dict(releases=4), dict(release_every=10)])
def test_a_release_before_the_first_epoch_closes_is_refused_naming_its_row(kw: dict) -> None:
    # Issue 34: it was an empty release (total 0, uniform samples), silently.
    c = tiny(3, **kw)  # the first epoch closes at row 10
    assert c.release().leaves().count.sum() == 0  # t = 0: the empty stream, described exactly
    c.update_many(DATA[:9])
    with pytest.raises(ReleasedError, match=r"closes at row 10 .* t >= 10"):
        c.release()
    c.skip(1)
    assert c.release().params["t"] == 10


@pytest.mark.parametrize("counter", ["binary", "kary", "honaker"])
def test_noise_scales_with_log_m_not_log_n(counter: str) -> None:
    n = 2**16
    per_row = None if counter == "honaker" else tiny(0, horizon=n, counter=counter)
    for m in (8, 64):
        c = tiny(0, horizon=n, releases=m, counter=counter)
        h = binary_levels(m)
        if counter == "kary":
            assert c.counter_levels == karylevels(m, c.arity)
        else:
            assert c.counter_levels == h
        np.testing.assert_allclose(
            c.noise_scales * c.sigmas / np.where(np.arange(c.depth + 1) <= c.L_k, 1, 2),
            c.counter_levels,
            rtol=1e-9,
        )
        if per_row is not None:
            assert c.cell_variance(0, n) < per_row.cell_variance(0, n) / 2


def test_schedule_parameters_are_checked() -> None:
    with pytest.raises(ParameterError, match="release_every"):
        tiny(0, releases=4, release_every=10)
    with pytest.raises(ParameterError, match="honaker"):
        tiny(0, counter="honaker")
    with pytest.raises(ParameterError, match="arity"):
        tiny(0, counter="binary", arity=5)
    with pytest.raises(ParameterError, match="arity"):
        tiny(0, arity=4)
    with pytest.raises(ParameterError, match="releases"):
        tiny(0, releases=41)
    with pytest.raises(ParameterError, match="counter"):
        tiny(0, counter="factorization")


# ------------------------------------------------------------------ deletions
def test_inserting_then_deleting_a_set_leaves_a_zero_total_in_expectation() -> None:
    totals = []
    for seed in range(200):
        c = tiny(seed, horizon=64)
        c.update_many(DATA[:30])
        c.remove_many(DATA[:30])
        assert c._exact._tree[0] == 0 and not c._exact._bank.any()
        totals.append(c.top_levels()[0][0])
    x = np.array(totals)
    want = c.cell_variance(0, 60)
    assert abs(x.mean()) < 5 * math.sqrt(want / x.size)


@pytest.mark.parametrize("kw", [dict(), dict(counter="binary"), dict(releases=4)])
def test_the_release_follows_moving_objects(kw: dict) -> None:
    rng = np.random.default_rng(1)
    old = np.clip(0.15 + 0.02 * rng.standard_normal((3000, 2)), 0, 0.999)
    new = np.clip(0.85 + 0.02 * rng.standard_normal((3000, 2)), 0, 0.999)
    c = ContinualPrivHP(Box.unit(2), 1.0, k=16, width=64, horizon=12_000, depth=10, rng=2, **kw)
    c.update_many(old)
    for i in range(0, 3000, 500):  # each object moves: delete its old point, insert the new
        c.remove_many(old[i : i + 500])
        c.update_many(new[i : i + 500])
    c.skip(12_000 - c.t)
    sample = c.release().sample(2000, rng=3)
    # Measured 0.85 (k-ary), 0.75 (binary), 0.98 (4 releases) near the new positions, and no
    # point near the old ones; before the moves every point was near the old ones.
    assert (np.abs(sample - 0.85) < 0.1).all(axis=1).mean() > 0.7
    assert (np.abs(sample - 0.15) < 0.1).all(axis=1).mean() < 0.02


def test_the_issue_34_deletion_is_applied_after_an_empty_step() -> None:
    def make() -> ContinualPrivHP:
        return ContinualPrivHP(
            Box.unit(1), 1.0, k=4, width=16, horizon=10, depth=6, releases=2, rng=1
        )

    x, y = make(), make()
    x.update([0.3])
    x.remove([0.3])
    y.skip(1)
    y.remove([0.3])  # raised InputError and left t at 1 before issue 34
    assert (x.t, x.epoch) == (y.t, y.epoch) == (2, 0)
    assert y._exact._tree[0] == -1 and x._exact._tree[0] == 0


def _public_trace(c: ContinualPrivHP, calls: list) -> list:
    """What each call shows without the noise: raised or not (and what), ``t``, the epoch."""
    out = []
    for name, arg in calls:
        try:
            getattr(c, name)(arg)
            outcome = None
        except ValueError as exc:
            outcome = type(exc).__name__
        out.append((outcome, c.t, c.epoch))
    return out


@pytest.mark.parametrize("kw", [dict(), dict(releases=4), dict(sketch="count-sketch")])
def test_a_deletion_call_does_not_depend_on_the_counts(kw: dict) -> None:
    # Streams that differ in their counts (rows inserted, or empty steps instead) take the
    # same calls: every call must raise or not, and leave t and the epoch, alike.
    rng = np.random.default_rng(7)
    for trial in range(30):
        calls = []
        for _ in range(12):
            op = rng.choice(["update_many", "remove_many", "skip"])
            n = int(rng.integers(0 if op == "skip" else 1, 4))
            rows = rng.random((n, 1))
            if op == "remove_many" and rng.random() < 0.2:
                rows[0, 0] = 1.5  # outside the domain: refused for what the row is
            calls.append((str(op), n if op == "skip" else rows))
        deleting = [c for c in calls if c[0] != "update_many"]
        histories = [
            calls,  # the insertions made
            [("skip", len(a)) if n == "update_many" else (n, a) for n, a in calls],  # none
            [(n, (a + 0.5) % 1 if n == "update_many" else a) for n, a in calls],  # others
        ]
        traces = [_public_trace(tiny(trial, **kw), h) for h in histories]
        assert traces[0] == traces[1] == traces[2], (trial, traces)
        # The deletions alone, on an empty summary: applied, one step each.
        c = tiny(trial, **kw)
        got = _public_trace(c, deleting)
        steps = [0 if o else (len(a) if n == "remove_many" else a) for (o, _, _), (n, a) in
                 zip(got, deleting, strict=True)]  # fmt: skip
        assert c.t == sum(steps)
        loaded = ContinualPrivHP.from_bytes(c.to_bytes())  # negative counts load back
        np.testing.assert_array_equal(loaded.cell_values(0), c.cell_values(0))


# ------------------------------------------------------------------ bytes
OPTIONS = [
    dict(counter="kary"),
    dict(counter="kary", arity=7, release_every=6),
    dict(counter="binary", releases=5),
    dict(counter="honaker", releases=8),
    dict(counter="honaker", release_every=3, sketch="count-sketch"),
]


@pytest.mark.parametrize("kw", OPTIONS, ids=[str(sorted(o.items())) for o in OPTIONS])
def test_bytes_round_trip_for_every_option(kw: dict) -> None:
    c = tiny(4, **kw)
    c.update_many(DATA[:17])
    c.remove_many(DATA[:3])
    first = c.release()
    blob = c.to_bytes()
    got = read(blob, "ContinualPrivHP")
    assert got.version == 2 and got.meta["counter"] == kw["counter"]
    loaded = ContinualPrivHP.from_bytes(blob)
    assert (loaded.counter, loaded.arity, loaded.epoch, loaded.t) == (
        c.counter,
        c.arity,
        c.epoch,
        c.t,
    )
    for level in range(c.depth + 1):
        np.testing.assert_array_equal(loaded.cell_values(level), c.cell_values(level))
    np.testing.assert_array_equal(loaded.release().leaves().count, first.leaves().count)
    assert (
        loaded.nbytes
        == c.nbytes
        == ContinualPrivHP.memory_bytes(
            2, 16, 2, 4, 40, **{k: v for k, v in kw.items() if k != "sketch"}
        )
    )


def _forge(blob: bytes, version: int | None = None, drop=(), **changes: object) -> bytes:
    got = read(blob, "ContinualPrivHP")
    meta = {k: v for k, v in (dict(got.meta) | changes).items() if k not in drop}
    return pack("ContinualPrivHP", version or got.version, meta, got.arrays, state="trusted")


@pytest.mark.parametrize(
    "field, value",
    [("counter", "bogus"), ("arity", 4), ("arity", 2**70), ("releases", 0), ("releases", 99)],
)
def test_forged_schedule_fields_are_refused_naming_them(field: str, value: object) -> None:
    c = tiny(0, releases=4)
    c.update_many(DATA[:12])
    with pytest.raises(SerializationError, match=field):
        ContinualPrivHP.from_bytes(_forge(c.to_bytes(), **{field: value}))


def test_a_version_1_blob_still_loads_as_the_binary_counter() -> None:
    c = tiny(2, counter="binary")
    c.update_many(DATA[:11])
    old = _forge(c.to_bytes(), version=1, drop=("counter", "arity", "releases", "release_every"))
    loaded = ContinualPrivHP.from_bytes(old)
    assert loaded.counter == "binary" and loaded.releases is None and loaded.t == 11
    np.testing.assert_array_equal(loaded.cell_values(3), c.cell_values(3))
