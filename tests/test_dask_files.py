"""sketchsyn.dask.summarize_files on a LocalCluster: each task reads its own files."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import numpy as np
import pytest

from sketchsyn import Box, CountMinSketch, InputError, ParameterError, PrivHP

pytest.importorskip("dask")
pytest.importorskip("distributed")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from sketchsyn import dask as sdask  # noqa: E402

DOMAIN = Box.unit(2)
RAW = functools.partial(PrivHP, DOMAIN, 1.0, 16, 256, depth=12, raw=True)
NOISY = functools.partial(PrivHP, DOMAIN, 1.0, 16, 256, depth=12)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> tuple[Path, np.ndarray]:
    """Five Parquet files (one of them empty, with an extra column), a CSV and a file to skip."""
    path = tmp_path_factory.mktemp("files")
    X = np.random.default_rng(0).beta(2, 5, size=(60_000, 2))
    cuts = [0, 10_000, 10_000, 31_000, 50_000, 60_000]
    for i, (a, b) in enumerate(zip(cuts[:-1], cuts[1:], strict=True)):
        table = pa.table({"id": np.arange(a, b), "x": X[a:b, 0], "y": X[a:b, 1]})
        pq.write_table(table, path / f"part-{i}.parquet", row_group_size=7_000)
    (path / "_SUCCESS").write_text("")
    return path, X


def _exact(X: np.ndarray, make=RAW) -> PrivHP:
    one = make()
    one.update_many(X)
    return one


def _same(merged: PrivHP, one: PrivHP) -> None:
    assert merged.raw and merged._tree[0] == one.n_seen
    np.testing.assert_array_equal(merged._tree, one._tree)
    np.testing.assert_array_equal(merged._bank, one._bank)


def test_trusted_files_merge_equals_one_machine_exactly(client, folder) -> None:
    path, X = folder
    exact = _exact(X)
    merged = sdask.summarize_files(path, RAW, columns=["x", "y"], split_every=2).compute()
    _same(merged, exact)
    # A glob, a list, two files per task, small batches, the reader and PrivHP threads on.
    files = sorted(str(p) for p in path.glob("*.parquet"))
    for kwargs in (
        {"paths": str(path / "part-*.parquet"), "batch_size": 4_096},
        {"paths": files, "files_per_task": 2, "threads": True},
    ):
        paths = kwargs.pop("paths")
        _same(sdask.summarize_files(paths, RAW, columns=["x", "y"], **kwargs).compute(), exact)
    assert abs(merged.release().total - len(X)) < 2_000


def test_csv_files_and_a_sketch_of_keys(client, tmp_path) -> None:
    X = np.random.default_rng(2).random((9_000, 2))
    for i in range(3):
        part = X[i * 3_000 : (i + 1) * 3_000]
        np.savetxt(tmp_path / f"p{i}.csv", part, delimiter=",", header="x,y", comments="")
    merged = sdask.summarize_files(tmp_path, RAW, columns=["x", "y"]).compute()
    assert merged._tree[0] == len(X)
    # The CSV text rounds the values: compare with the same file contents read here.
    back = np.concatenate(
        [np.loadtxt(tmp_path / f"p{i}.csv", delimiter=",", skiprows=1) for i in range(3)]
    )
    _same(merged, _exact(back))
    keys = np.random.default_rng(3).integers(0, 500, 8_000)
    kdir = tmp_path / "keys"
    kdir.mkdir()
    for i in range(2):
        pq.write_table(pa.table({"k": keys[i * 4_000 : (i + 1) * 4_000]}), kdir / f"{i}.parquet")
    cms = functools.partial(CountMinSketch, 128, 3)
    one = cms()
    one.update_many(keys)
    got = sdask.summarize_files(kdir, cms, columns=["k"]).compute()
    np.testing.assert_array_equal(got._table, one._table)


def _lap_var(scale: float) -> float:
    q = math.exp(-1.0 / scale)
    return 2 * q / (1 - q) ** 2


def test_untrusted_files_each_add_their_own_noise(client, folder) -> None:
    """Four non-empty files: merged − exact has variance 4·Var per cell (one draw per task,
    the empty file's summary included: P = 5 summaries)."""
    path, X = folder
    merged = sdask.summarize_files(path, NOISY, columns=["x", "y"], mode="untrusted").compute()
    exact = _exact(X)
    assert not merged.raw
    P = 5  # every task draws its summary's noise, the empty file's too
    scales, L = merged.noise_scales, merged.counter_depth
    ratios = []
    for i in range(merged._bank.shape[0]):
        diff = (merged._bank[i] - exact._bank[i]).astype(float).ravel()
        ratios.append(diff**2 / (P * _lap_var(scales[L + 1 + i])))
    ratio = float(np.concatenate(ratios).mean())
    assert 0.8 < ratio < 1.25, ratio


def test_refusals_and_bad_arguments(folder, tmp_path) -> None:
    path, _ = folder
    cols = ["x", "y"]
    with pytest.raises(ParameterError, match="mode='trusted' needs raw"):
        sdask.summarize_files(path, NOISY, columns=cols)
    with pytest.raises(ParameterError, match="private before they leave"):
        sdask.summarize_files(path, RAW, columns=cols, mode="untrusted")
    seeded = functools.partial(PrivHP, DOMAIN, 1.0, 16, 256, depth=12, rng=5)
    with pytest.raises(ParameterError, match="share one noise draw"):
        sdask.summarize_files(path, seeded, columns=cols, mode="untrusted")
    with pytest.raises(ParameterError, match="'mode' parameter"):
        sdask.summarize_files(path, RAW, columns=cols, mode="trusting")
    with pytest.raises(ParameterError, match="'columns' parameter"):
        sdask.summarize_files(path, RAW, columns=[])
    with pytest.raises(ParameterError, match="'files_per_task' parameter"):
        sdask.summarize_files(path, RAW, columns=cols, files_per_task=0)
    with pytest.raises(ParameterError, match=r"unexpected keyword argument\(s\) \['skip'\]"):
        sdask.summarize_files(path, RAW, columns=cols, skip=3)
    with pytest.raises(InputError, match="no files"):
        sdask.summarize_files(str(tmp_path / "none-*.parquet"), RAW, columns=cols)
    with pytest.raises(InputError, match="column 'z' is not in"):
        sdask.summarize_files(path, RAW, columns=["x", "z"]).compute(scheduler="sync")


def test_bad_rows_raise_or_are_skipped(tmp_path) -> None:
    table = pa.table({"x": [0.1, None, 0.3], "y": [0.2, 0.5, float("nan")]})
    pq.write_table(table, tmp_path / "bad.parquet")
    with pytest.raises(InputError, match="row 2"):
        sdask.summarize_files(tmp_path, RAW, columns=["x", "y"]).compute(scheduler="sync")
    got = sdask.summarize_files(tmp_path, RAW, columns=["x", "y"], on_bad="skip")
    merged = got.compute(scheduler="sync")
    _same(merged, _exact(np.array([[0.1, 0.2]])))
