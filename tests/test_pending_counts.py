"""A run of batches counted per cell and added once (``PendingCounts``: ``sketchsyn fit`` and
``PrivHP.consume``) gives the state of ``update_many`` of each batch, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from sketchsyn import Box, PrivHP, kernels
from sketchsyn.errors import InputError, ReleasedError
from sketchsyn.kernels.morton import MIN_ROWS
from sketchsyn.synth.privhp.pending import PendingCounts

needs_ext = pytest.mark.skipif(not kernels.enabled(), reason=kernels.why())


def _pair(domain=None, **kw) -> tuple[PrivHP, PrivHP]:
    make = dict(epsilon=1.0, k=8, width=64, sketch_depth=3, depth=14, rng=7) | kw
    domain = domain or Box.unit(2)
    a, b = PrivHP(domain, **make), PrivHP(domain, **make)
    b._lineage = a._lineage  # one identity: the saved bytes compare the counts alone
    return a, b


def _batches(seed: int, sizes) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for n in sizes:
        hot = np.clip(rng.normal(0.3, 0.01, (n // 2, 2)), 0, 1)
        X = np.concatenate([hot, rng.random((n - n // 2, 2))])
        out.append(np.asfortranarray(X) if n % 2 else X)  # both layouts the readers give
    return out


def _same(a: PrivHP, b: PrivHP) -> None:
    assert np.array_equal(a._tree, b._tree)
    assert np.array_equal(a._bank, b._bank)
    assert (a.n_seen, a.n_dropped) == (b.n_seen, b.n_dropped)
    assert a.to_bytes(include_diagnostics=True) == b.to_bytes(include_diagnostics=True)


@pytest.mark.parametrize("sketch", ["count-min", "count-sketch"])
@pytest.mark.parametrize(
    "depth, batch_rows",
    [
        (14, 20_000),  # every sketch level counted per cell
        (16, MIN_ROWS),  # the deepest levels hashed per item, their increments held too
    ],
)
@pytest.mark.parametrize("raw", [False, True])
def test_a_run_gives_the_state_of_its_batches(sketch, depth, batch_rows, raw):
    a, b = _pair(sketch=sketch, depth=depth, raw=raw)
    batches = _batches(1, [batch_rows, 20_000, 5_000, MIN_ROWS - 1, 30_001, 7])
    with PendingCounts(a, batch_rows) as sink:
        for X in batches:
            sink.add(X)
    for X in batches:
        b.update_many(X)
    _same(a, b)


@needs_ext
def test_rows_are_held_until_the_run_ends_then_added_once():
    a, b = _pair()
    batches = _batches(2, [20_000, 20_000])
    before = a._tree.copy()
    sink = PendingCounts(a, 20_000)
    for X in batches:
        sink.add(X)
    assert sink.rows == 40_000 and np.array_equal(a._tree, before) and a.n_seen == 0
    sink.flush()
    assert sink.rows == 0 and a.n_seen == 40_000
    sink.flush()  # nothing pending: nothing added twice
    for X in batches:
        b.update_many(X)
    _same(a, b)


def test_the_numpy_path_and_other_batches_go_through_update_many():
    a, b = _pair(Box.unit(2, out_of_bounds="drop"))
    outside = _batches(3, [20_000])[0] * 1.5  # rows outside the box: the domain's policy
    batches = [*_batches(4, [20_000]), outside, *_batches(5, [20_000])]
    with kernels.numpy_only(), PendingCounts(a, 20_000) as sink:
        sink.add(batches[0])
        assert sink.rows == 0  # the numpy path: counted at once
    with PendingCounts(a, 20_000) as sink:
        for X in batches[1:]:
            sink.add(X)
    for X in batches:
        b.update_many(X)
    assert a.n_dropped > 0
    _same(a, b)


def test_a_refused_batch_leaves_the_run_counted_and_itself_out():
    a, b = _pair()
    good = _batches(6, [20_000, 20_000])
    bad = good[0].copy()
    bad[123, 1] = np.nan
    with pytest.raises(InputError), PendingCounts(a, 20_000) as sink:
        sink.add(good[0])
        sink.add(bad)
        sink.add(good[1])  # (not reached)
    b.update_many(good[0])
    with pytest.raises(InputError):
        b.update_many(bad)
    _same(a, b)


def test_consume_gives_the_state_of_update_many():
    a, b = _pair()
    X = np.concatenate(_batches(7, [50_000, 30_000]))
    assert a.consume([X[:33_000], X[33_000:]], batch_size=16_384) == 80_000
    for s in range(0, 33_000, 16_384):
        b.update_many(X[s : min(s + 16_384, 33_000)])
    for s in range(33_000, 80_000, 16_384):
        b.update_many(X[s : s + 16_384])
    _same(a, b)


def test_a_released_summary_refuses_the_pending_rows():
    a, _ = _pair()
    sink = PendingCounts(a, 20_000)
    sink.add(_batches(8, [20_000])[0])
    a.release()
    with pytest.raises(ReleasedError):
        sink.flush()


def test_a_privacy_unit_takes_each_batch_at_once():
    pa = pytest.importorskip("pyarrow")
    box = Box([0, 0], [1, 1], columns=["x", "y"])
    a = PrivHP(
        box,
        1.0,
        k=8,
        width=64,
        depth=14,
        unit="user",
        max_rows=2,
        expected_units=100,
        rng=7,
    )
    X = _batches(9, [20_000])[0]
    with PendingCounts(a, 20_000) as sink:
        sink.add(pa.table({"x": X[:, 0], "y": X[:, 1], "user": np.arange(20_000) % 50}))
        assert sink.rows == 0
    assert a.n_seen == 100


def test_batch_rows_is_checked():
    a, _ = _pair()
    with pytest.raises(Exception, match="batch_rows"):
        PendingCounts(a, 0)


def test_fit_checkpoints_hold_every_row_read(tmp_path, monkeypatch):
    """``sketchsyn fit`` adds the run's pending rows before each checkpoint: a state saved
    mid-file holds every row read up to its input position."""
    from sketchsyn.cli import fit as fit_cli
    from sketchsyn.cli import main

    X = np.concatenate(_batches(10, [6_000, 6_000, 6_000]))
    data = tmp_path / "rows.csv"
    np.savetxt(data, X, delimiter=",", header="x,y", comments="", fmt="%.6f")
    saved: list[tuple[int, int]] = []
    real = fit_cli._save_run

    def save(path, summary, reader, *args, **kw):
        saved.append((summary.n_seen, reader.n_rows))
        real(path, summary, reader, *args, **kw)

    monkeypatch.setattr(fit_cli, "_save_run", save)
    args = ["fit", str(data), "--columns", "x,y", "--bounds=0:1,0:1", "--epsilon", "1"]
    args += ["--depth", "12", "--batch-size", "6000", "--checkpoint-every", "6000", "-q"]
    assert main([*args, "--state", str(tmp_path / "s.bin")]) == 0
    assert len(saved) >= 3 and all(seen == read for seen, read in saved)
    assert saved[-1] == (18_000, 18_000)
