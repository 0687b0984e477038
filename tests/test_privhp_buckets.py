"""PrivHP's bucket tables (:mod:`sketchsyn.synth.privhp.buckets`) give the hashing path's state.

The numpy path looks up the buckets (and Count Sketch signs) of a per-cell sketch level's
cells in a table once the level has hashed as many cells as it has. Each test compares a
summary that uses the tables with one that never builds them (``MAX_LEVEL`` below every
level), both on the numpy path, for both sketches and power-of-two and other widths.
"""

from __future__ import annotations

import numpy as np
import pytest

from sketchsyn import Box, PrivHP
from sketchsyn.synth.privhp import buckets, kernels


def _make(sketch: str, width: int) -> PrivHP:
    return PrivHP(
        Box.unit(2), 1.0, k=8, width=width, depth=14, sketch_depth=3, counter_depth=4,
        sketch=sketch, rng=3,
    )  # fmt: skip


def _batches(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for n in (3000, 40000, 17, 70000, 5000, 65536):
        hot = np.clip(rng.normal(0.4, 0.02, (n // 2, 2)), 0, 1)
        out.append(np.concatenate([hot, rng.random((n - n // 2, 2))]))
    return out


@pytest.mark.parametrize("sketch", ["count-min", "count-sketch"])
@pytest.mark.parametrize("width", [64, 100, 1364])
def test_the_tables_give_the_hashing_state(sketch: str, width: int, monkeypatch) -> None:
    with_tables, hashing = _make(sketch, width), _make(sketch, width)
    batches = _batches(width)
    with kernels.numpy_only():
        for X in batches:
            with_tables.update_many(X)
        with_tables.remove_many(batches[1][:5000])
        with monkeypatch.context() as m:
            m.setattr(buckets, "MAX_LEVEL", -1)
            for X in batches:
                hashing.update_many(X)
            hashing.remove_many(batches[1][:5000])
    assert with_tables._buckets.nbytes > 0  # levels were looked up, not only hashed
    assert hashing._buckets.nbytes == 0
    assert np.array_equal(with_tables._tree, hashing._tree)
    assert np.array_equal(with_tables._bank, hashing._bank)
    assert with_tables.nbytes == hashing.nbytes  # the tables are not state


def test_a_level_gets_its_table_once_it_has_hashed_as_many_cells() -> None:
    seeds = np.arange(6, dtype=np.uint32).reshape(2, 3, 1)
    tables = buckets.BucketTables(seeds, None, width=16)
    keys, weights = np.arange(5), np.ones(5, dtype=np.int64)
    for _ in range(3):  # 5, 10, 15 cells hashed of level 4's 16
        assert tables.counts(1, 4, keys, weights) is None
    assert tables.nbytes == 0
    out = tables.counts(1, 4, keys, weights)
    assert out is not None and out.shape == (3, 16) and (out.sum(axis=1) == 5).all()
    assert tables.nbytes == 3 * 16 * 2  # 16-bit buckets, three rows
    # Sketch 0 has its own count: still hashing.
    assert tables.counts(0, 4, keys, weights) is None


def test_tables_stay_within_their_bytes(monkeypatch) -> None:
    monkeypatch.setattr(buckets, "MAX_BYTES", 3 * 16 * 2 + 3 * 32 * 2 - 1)
    tables = buckets.BucketTables(np.arange(6, dtype=np.uint32).reshape(2, 3, 1), None, width=16)
    keys, weights = np.arange(16), np.ones(16, dtype=np.int64)
    assert tables.counts(0, 4, keys, weights) is not None  # 96 bytes
    assert tables.counts(1, 5, np.arange(32), np.ones(32, dtype=np.int64)) is None  # +192: over
    assert tables.nbytes == 96


def test_copies_and_loaded_summaries_build_their_own_tables() -> None:
    php = _make("count-sketch", 100)
    with kernels.numpy_only():
        for X in _batches(1):
            php.update_many(X)
    assert php._buckets.nbytes > 0
    for other in (php.snapshot(), PrivHP.from_bytes(php.to_bytes())):
        assert other._buckets.nbytes == 0
        assert np.array_equal(other._bank, php._bank)
