"""PrivHP's bucket tables (:mod:`sketchsyn.synth.privhp.buckets`) give the hashing path's state.

The numpy path looks up the buckets (and Count Sketch signs) of a per-cell sketch level's
cells in a table (the process's, found by the level's seeds, the width and the level) once
the level has hashed as many cells as it has. The state test compares a summary that uses the
tables with one that never builds them (``MAX_LEVEL`` below every level), both on the numpy
path, for both sketches and power-of-two and other widths.
"""

from __future__ import annotations

import copy
import os
import signal

import numpy as np
import pytest

from sketchsyn import Box, PrivHP, kernels
from sketchsyn.sketches.hashing import HashFamily
from sketchsyn.synth.privhp import buckets


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


@pytest.fixture(autouse=True)
def _no_tables():
    """Every test starts and ends without tables (they are the process's)."""
    buckets.clear()
    yield
    buckets.clear()


@pytest.mark.parametrize("sketch", ["count-min", "count-sketch"])
@pytest.mark.parametrize("width", [64, 100, 1364])
def test_the_tables_give_the_hashing_state(sketch: str, width: int, monkeypatch) -> None:
    with_tables, hashing = _make(sketch, width), _make(sketch, width)
    batches = _batches(width)
    with kernels.numpy_only():
        with monkeypatch.context() as m:
            m.setattr(buckets, "MAX_LEVEL", -1)
            for X in batches:
                hashing.update_many(X)
            hashing.remove_many(batches[1][:5000])
        assert buckets.table_bytes() == 0
        for X in batches:
            with_tables.update_many(X)
        with_tables.remove_many(batches[1][:5000])
    assert buckets.table_bytes() > 0  # levels were looked up, not only hashed
    assert np.array_equal(with_tables._tree, hashing._tree)
    assert np.array_equal(with_tables._bank, hashing._bank)
    assert with_tables.nbytes == hashing.nbytes  # the tables are not state


def _family(width: int = 16, seed: int = 0) -> HashFamily:
    """A level's hashes: three sketch rows."""
    return HashFamily(width=width, depth=3, seed=seed)


def test_a_level_gets_its_table_once_it_has_hashed_as_many_cells() -> None:
    keys, weights = np.arange(5), np.ones(5, dtype=np.int64)
    for _ in range(3):  # 5, 10, 15 cells hashed of level 4's 16
        assert buckets.level_counts(_family(), False, 4, keys, weights) is None
    assert buckets.table_bytes() == 0
    out = buckets.level_counts(_family(), False, 4, keys, weights)
    assert out is not None and out.shape == (3, 16) and (out.sum(axis=1) == 5).all()
    assert buckets.table_bytes() == 3 * 16 * 2  # 16-bit buckets, three rows
    # Another seed, another width or another level count their own cells: still hashing.
    assert buckets.level_counts(_family(seed=9), False, 4, keys, weights) is None
    assert buckets.level_counts(_family(17), False, 4, keys, weights) is None
    assert buckets.level_counts(_family(), False, 3, keys, weights) is None


def test_the_tables_stay_within_their_bytes(monkeypatch) -> None:
    monkeypatch.setattr(buckets, "MAX_BYTES", 3 * 32 * 2)  # one level-5 table, or two of level 4
    for first in (0, 10):  # two level-4 tables: 96 bytes each
        buckets.level_counts(_family(seed=first), False, 4, np.arange(16), np.ones(16))
    assert buckets.table_bytes() == 192
    # A level-5 table (192 bytes) evicts both; a level-6 one (384) is never built.
    assert buckets.level_counts(_family(), False, 5, np.arange(32), np.ones(32)) is not None
    assert buckets.table_bytes() == 192
    assert buckets.level_counts(_family(), False, 6, np.arange(64), np.ones(64)) is None
    assert buckets.table_bytes() == 192
    # The evicted ones count their cells again from nothing.
    assert buckets.level_counts(_family(), False, 4, np.arange(8), np.ones(8)) is None


def test_copies_and_loaded_summaries_share_the_tables(monkeypatch) -> None:
    php, extra = _make("count-sketch", 100), _batches(2)[3]
    with kernels.numpy_only():
        for X in _batches(1):
            php.update_many(X)
        built = buckets.table_bytes()
        assert built > 0
        copies = [copy.deepcopy(php), PrivHP.from_bytes(php.to_bytes())]
        for other in copies:
            other.update_many(extra)
        assert buckets.table_bytes() == built  # no table built twice
        with monkeypatch.context() as m:
            m.setattr(buckets, "MAX_LEVEL", -1)
            php.update_many(extra)  # hashed
    for other in copies:
        assert np.array_equal(other._bank, php._bank)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork only")
def test_a_forked_child_does_not_inherit_a_held_lock() -> None:
    """A fork while another thread holds the tables' lock leaves the child a lock of its own."""
    keys, weights = np.arange(16), np.ones(16)
    with buckets._LOCK:  # as if another thread were inside level_counts at the fork
        pid = os.fork()
        if pid == 0:  # the child: a lookup must not wait for the parent's lock
            signal.alarm(20)  # a child stuck on the lock dies (and the test fails)
            got = buckets.level_counts(_family(), False, 4, keys, weights)
            os._exit(0 if got is not None else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
