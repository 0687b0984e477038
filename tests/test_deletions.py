"""Deletions in one-pass PrivHP: ``remove_many`` / ``remove`` (updates of weight −1).

Checks: inserting a set then removing it gives back the state before (noise included), so the
release's total is 0 in expectation; after moving every object the release follows the new
positions; neighbouring streams that differ in one removal pass the privacy audit (and a 2×
under-noised build is caught); a refused batch leaves the state unchanged; merge, snapshot,
bytes and the release cope with removals and with negative cells.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_privacy_audit import Mechanism, audit, under_noised  # noqa: F401 (a fixture)

from sketchsyn import Box, PrivHP
from sketchsyn.errors import InputError, ReleasedError
from sketchsyn.io.serial import unpack
from sketchsyn.privacy.noise import discrete_laplace_variance
from sketchsyn.synth.privhp.release import least_squares_levels

SKETCHES = ("count-min", "count-sketch")


def _php(sketch: str = "count-min", rng: int | None = 0, raw: bool = False, **kw) -> PrivHP:
    params = dict(k=16, width=64, depth=10) | kw
    return PrivHP(Box.unit(2), 1.0, sketch=sketch, rng=rng, raw=raw, **params)


def _blob(php: PrivHP) -> bytes:
    return php.to_bytes(include_diagnostics=True)


@pytest.mark.parametrize("sketch", SKETCHES)
def test_insert_then_remove_gives_back_the_noisy_state(sketch):
    X = np.random.default_rng(1).beta(2, 5, size=(3000, 2))
    php, empty = _php(sketch, rng=5), _php(sketch, rng=5)
    php.update_many(X)
    php.remove_many(X[::-1])  # any order
    assert np.array_equal(php._tree, empty._tree)
    assert np.array_equal(php._bank, empty._bank)
    assert (php.n_seen, php.n_removed) == (3000, 3000)
    for x in X[:5]:  # one row at a time too
        php.update(x)
        php.remove(x)
    assert np.array_equal(php._bank, empty._bank)


def _root_estimate(php: PrivHP) -> float:
    """The least-squares root of the counter levels (before the clamp at zero)."""
    levels = [php._tree[2**lv - 1 : 2 ** (lv + 1) - 1] for lv in range(php.counter_depth + 1)]
    var = [discrete_laplace_variance(1 / e) for e in php._level_eps[: php.counter_depth + 1]]
    return float(least_squares_levels(levels, var)[0][0])


def test_release_total_is_zero_in_expectation():
    X = np.random.default_rng(2).random((2000, 2))
    roots, kept, totals, empty_totals = [], [], [], []
    for seed in range(150):
        php = _php(rng=seed, k=4, width=16, depth=6)
        php.update_many(X)
        kept.append(_root_estimate(php))
        php.remove_many(X)
        roots.append(_root_estimate(php))
        totals.append(php.release().total)
        empty = _php(rng=seed, k=4, width=16, depth=6)
        empty_totals.append(empty.release().total)
    roots = np.array(roots)
    # Unbiased: the mean root is 0 within 4 standard errors ...
    assert abs(roots.mean()) < 4 * roots.std(ddof=1) / math.sqrt(roots.size)
    # ... and the test has the power to see a removal that did not happen (mean 2000).
    assert abs(np.mean(kept) - 2000) < 4 * np.std(kept, ddof=1) / math.sqrt(len(kept))
    # The release is the release of an empty stream with the same noise (clamped at zero).
    assert totals == empty_totals
    assert max(totals) < 100


@pytest.mark.parametrize("sketch", SKETCHES)
def test_release_follows_moved_objects(sketch):
    rng = np.random.default_rng(3)
    old = np.clip(rng.normal(0.2, 0.05, size=(20_000, 2)), 0, 1)
    new = np.clip(old + 0.6, 0, 1)
    php = _php(sketch, rng=4, depth=12)
    php.update_many(old)
    php.remove_many(old)  # every object moves: delete the old point, insert the new one
    php.update_many(new)
    release = php.release()
    assert release.count([0.0, 0.0], [0.5, 0.5]) < 0.02 * release.total
    assert release.count([0.5, 0.5], [1.0, 1.0]) > 0.95 * release.total
    assert abs(release.total - 20_000) < 500


def _removal_mechanism(sketch: str) -> Mechanism:
    box = Box.unit(1)

    def build(data, seed):
        inserts, removes = data
        php = PrivHP(box, 1.0, k=2, width=8, sketch_depth=1, depth=3, sketch=sketch,
                     rng=seed, raw=seed is None)  # fmt: skip
        php.update_many(inserts)
        if len(removes):
            php.remove_many(removes)
        return php

    def state(php):
        arrays = unpack(php.to_bytes(), "PrivHP")[3]
        return np.concatenate([arrays["tree"], arrays["bank"].ravel()])

    def scales(php):
        s = php.noise_scales
        tree = np.concatenate([np.full(2**lvl, s[lvl]) for lvl in range(php.counter_depth + 1)])
        bank = np.repeat(s[php.counter_depth + 1 :], php.sketch_depth * php.width)
        return np.concatenate([tree, bank])

    S = np.array([[0.1], [0.12], [0.3], [0.35], [0.8]])
    none = np.zeros((0, 1))
    # D removes one earlier row, D' does not: the streams differ in one removal event.
    return Mechanism(f"PrivHP-removal-{sketch}", 1.0, build, state, scales,
                     ((S, S[1:2]), (S, none)), trials=1200)  # fmt: skip


REMOVALS = [_removal_mechanism(s) for s in SKETCHES]


@pytest.mark.parametrize("mech", REMOVALS, ids=[m.name for m in REMOVALS])
def test_audit_of_one_removal(mech):
    eps_hat, top, _, _ = audit(mech)
    assert math.isfinite(eps_hat)
    assert top == pytest.approx(mech.epsilon, rel=1e-6)  # one event moves ε of loss
    assert eps_hat <= mech.epsilon


@pytest.mark.usefixtures("under_noised")
@pytest.mark.parametrize("mech", REMOVALS, ids=[m.name for m in REMOVALS])
def test_audit_of_one_removal_catches_half_the_noise(mech):
    eps_hat, _, _, _ = audit(mech)
    assert eps_hat > mech.epsilon, f"the audit missed a 2× error (ε̂ {eps_hat:.3f})"


def test_raw_refuses_rows_never_inserted_and_keeps_its_state():
    X = np.random.default_rng(5).random((50, 2))
    php = _php(rng=None, raw=True)
    php.update_many(X)
    before = _blob(php)
    never = np.vstack([X[:10], [[0.999, 0.999]]])
    with pytest.raises(InputError, match="never inserted"):
        php.remove_many(never)
    with pytest.raises(InputError, match="never inserted"):
        php.remove([0.999, 0.999])
    assert _blob(php) == before
    php.remove_many(X[:10])  # rows that were inserted are fine
    assert (int(php._tree[0]), php.n_removed) == (40, 10)


def test_bad_rows_refuse_the_whole_removal():
    php = _php(rng=1)
    php.update_many(np.full((5, 2), 0.5))
    before = _blob(php)
    with pytest.raises(InputError):
        php.remove_many(np.array([[0.5, 0.5], [np.nan, 0.1]]))
    with pytest.raises(InputError, match="remove_many"):
        php.remove(np.full((2, 2), 0.5))
    assert _blob(php) == before


def test_private_summary_cannot_know_and_release_copes_with_negative_cells():
    php = _php(rng=2)
    php.update_many(np.full((1000, 2), 0.2))
    php.remove_many(np.full((300, 2), 0.9))  # never inserted: applied as weight −1
    assert php.n_removed == 300
    release = php.release()
    assert php.partition_tree.check_consistency()
    # The negative quadrant is clamped to zero; the root keeps the net count 700.
    assert release.count([0.5, 0.5], [1.0, 1.0]) == 0
    assert abs(release.total - 700) < 50
    gone = _php(rng=3)
    gone.update_many(np.full((100, 2), 0.2))
    gone.remove_many(np.full((300, 2), 0.9))  # a negative net total: an empty release
    assert gone.release().total == 0 and gone.partition_tree.check_consistency()


def test_count_min_keeps_its_one_sided_error_under_strict_turnstile():
    rng = np.random.default_rng(6)
    X = rng.beta(2, 5, size=(4000, 2))
    php = _php(rng=None, raw=True, k=2, width=16, depth=8, counter_depth=1)
    php.update_many(X)
    php.remove_many(X[:2500])
    codes = Box.unit(2).encode(X[2500:], php.depth)
    for i, sk in enumerate(php.sketches):
        level = php.counter_depth + 1 + i
        keys, truth = np.unique(codes >> np.uint64(php.depth - level), return_counts=True)
        assert (sk.query_many(keys) >= truth).all()


def test_merge_snapshot_and_bytes_keep_removals():
    X = np.random.default_rng(7).random((400, 2))
    a, b = _php(rng=None, raw=True), _php(rng=None, raw=True)
    a.update_many(X[:200])
    b.update_many(X[200:])
    b.remove_many(X[200:205])
    a.merge(b)
    a.remove_many(X[:3])  # rows the other collector counted are known after the merge
    assert (int(a._tree[0]), a.n_seen, a.n_removed) == (392, 400, 8)
    loaded = PrivHP.from_bytes(_blob(a))
    assert loaded.n_removed == 8 and loaded == a
    snap = a.snapshot()
    with pytest.raises(ReleasedError):
        snap.remove_many(X[:1])
    # A flushed collector no longer holds its stream: removals of shipped rows are taken.
    shipped = a.flush(rng=1)
    assert shipped.n_removed == 8 and a.n_removed == 0
    a.remove_many(X[5:7])
    assert int(a._tree[0]) == -2
    again = PrivHP.from_bytes(a.to_bytes())
    again.remove_many(X[7:8])  # the flag travels with the bytes
    # A released summary refuses removals like updates.
    private = _php(rng=3)
    private.update_many(X)
    private.release()
    with pytest.raises(ReleasedError):
        private.remove(X[0])
