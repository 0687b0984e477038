"""sketchsyn.spark.fit_files on local[2]: each task reads its own files on its executor.

Issue 34: "Give Spark a path where executors read Parquet files themselves, as
`sketchsyn.dask.summarize_files` does (read with sketchsyn's own readers, ...; only the list of
paths crosses to them)." The session is conftest.py's ``spark``.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import numpy as np
import pytest

from sketchsyn import Box, CountMinSketch, InputError, ParameterError, PrivHP

pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from sketchsyn import spark as sspark  # noqa: E402

DOMAIN = Box.unit(2)
RAW = functools.partial(PrivHP, DOMAIN, 1.0, 16, 256, depth=12, raw=True)
NOISY = functools.partial(PrivHP, DOMAIN, 1.0, 16, 256, depth=12)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> tuple[Path, np.ndarray]:
    """Five Parquet files (one of them empty, with an extra column) and a file to skip."""
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


def test_trusted_files_merge_equals_one_machine_exactly(spark, folder, no_rdds) -> None:
    path, X = folder
    exact = _exact(X)
    merged = sspark.fit_files(spark, path, RAW, columns=["x", "y"], split_every=2)
    _same(merged, exact)
    assert merged.n_seen == len(X)  # trusted bytes keep the exact diagnostics
    files = sorted(str(p) for p in path.glob("*.parquet"))
    for paths, kwargs in (
        (str(path / "part-*.parquet"), {"batch_size": 4_096}),
        (files, {"files_per_task": 2, "threads": True}),
    ):
        _same(sspark.fit_files(spark, paths, RAW, columns=["x", "y"], **kwargs), exact)


def test_a_sketch_of_keys_and_csv_files(spark, tmp_path) -> None:
    keys = np.random.default_rng(3).integers(0, 500, 8_000)
    for i in range(2):
        pq.write_table(pa.table({"k": keys[i * 4_000 : (i + 1) * 4_000]}), tmp_path / f"{i}.pq")
    cms = functools.partial(CountMinSketch, 128, 3)
    one = cms()
    one.update_many(keys)
    got = sspark.fit_files(spark, str(tmp_path / "*.pq"), cms, columns=["k"], fmt="parquet")
    np.testing.assert_array_equal(got._table, one._table)
    X = np.random.default_rng(2).random((3_000, 2))
    np.savetxt(tmp_path / "p.csv", X, delimiter=",", header="x,y", comments="")
    back = np.loadtxt(tmp_path / "p.csv", delimiter=",", skiprows=1)
    _same(sspark.fit_files(spark, tmp_path / "p.csv", RAW, columns=["x", "y"]), _exact(back))


def _lap_var(scale: float) -> float:
    q = math.exp(-1.0 / scale)
    return 2 * q / (1 - q) ** 2


def test_untrusted_tasks_each_add_their_own_noise(spark, folder) -> None:
    """Five tasks (the empty file's too): merged − exact has variance 5·Var per cell of the
    sketches, and n_seen stays 0 (nothing exact left an executor)."""
    path, X = folder
    merged = sspark.fit_files(spark, path, NOISY, columns=["x", "y"], mode="untrusted")
    exact = _exact(X)
    assert not merged.raw and merged.n_seen == 0
    scales, L = merged.noise_scales, merged.counter_depth
    ratios = []
    for i in range(merged._bank.shape[0]):
        diff = (merged._bank[i] - exact._bank[i]).astype(float).ravel()
        ratios.append(diff**2 / (5 * _lap_var(scales[L + 1 + i])))
    ratio = float(np.concatenate(ratios).mean())
    assert 0.8 < ratio < 1.25, ratio


def test_refusals_and_bad_rows(spark, folder, tmp_path) -> None:
    path, _ = folder
    cols = ["x", "y"]
    with pytest.raises(ParameterError, match="mode='trusted' needs raw"):
        sspark.fit_files(spark, path, NOISY, columns=cols)
    with pytest.raises(ParameterError, match="private before they leave"):
        sspark.fit_files(spark, path, RAW, columns=cols, mode="untrusted")
    seeded = functools.partial(PrivHP, DOMAIN, 1.0, 16, 256, depth=12, rng=5)
    with pytest.raises(ParameterError, match="share one noise draw"):
        sspark.fit_files(spark, path, seeded, columns=cols, mode="untrusted")
    with pytest.raises(ParameterError, match="'split_every' parameter"):
        sspark.fit_files(spark, path, RAW, columns=cols, split_every=1)
    with pytest.raises(ParameterError, match="'columns' parameter"):
        sspark.fit_files(spark, path, RAW, columns=[])
    with pytest.raises(ParameterError, match="'files_per_task' parameter"):
        sspark.fit_files(spark, path, RAW, columns=cols, files_per_task=0)
    with pytest.raises(ParameterError, match=r"unexpected keyword argument\(s\) \['skip'\]"):
        sspark.fit_files(spark, path, RAW, columns=cols, skip=3)
    with pytest.raises(ParameterError, match="must be a SparkSession"):
        sspark.fit_files(path, path, RAW, columns=cols)
    with pytest.raises(InputError, match="no files"):
        sspark.fit_files(spark, str(tmp_path / "none-*.parquet"), RAW, columns=cols)
    with pytest.raises(Exception, match="column 'z' is not in"):  # raised on an executor
        sspark.fit_files(spark, path, RAW, columns=["x", "z"])
    pq.write_table(pa.table({"x": [0.1, None, 0.3], "y": [0.2, 0.5, 0.7]}), tmp_path / "b.pq")
    with pytest.raises(Exception, match="row 2"):
        sspark.fit_files(spark, tmp_path / "b.pq", RAW, columns=cols)
    got = sspark.fit_files(spark, tmp_path / "b.pq", RAW, columns=cols, on_bad="skip")
    _same(got, _exact(np.array([[0.1, 0.2], [0.3, 0.7]])))
