"""sketchsyn.spark on a Spark Connect session (issue 50, item 14): "Both `sketchsyn.spark.fit` and
`fit_files` work on a local Spark Connect session: `SparkSession.builder.remote("local[2]")` with
pyspark 4.x, which ships the Connect server jar. Add that session to the Spark tests."

The session is conftest.py's ``spark_connect`` (the ``connect`` extra of pyspark). A Connect
DataFrame has no RDD API and no SparkContext: the merges run on DataFrame operations only, and
the trusted merge equals one machine's state exactly, as on a classic session.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from sketchsyn import Box, PrivHP

pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pd = pytest.importorskip("pandas")

from sketchsyn import spark as sspark  # noqa: E402

RAW = functools.partial(PrivHP, Box.unit(2), 1.0, 16, 256, depth=12, raw=True)
NOISY = functools.partial(PrivHP, Box.unit(2), 1.0, 16, 256, depth=12)


def _exact(X: np.ndarray, make=RAW) -> PrivHP:
    one = make()
    one.update_many(X)
    return one


def _same(merged: PrivHP, one: PrivHP) -> None:
    assert merged.raw and merged.n_seen == one.n_seen
    np.testing.assert_array_equal(merged._tree, one._tree)
    np.testing.assert_array_equal(merged._bank, one._bank)


def test_fit_on_a_connect_dataframe_equals_one_machine(spark_connect) -> None:
    from pyspark.sql.connect.dataframe import DataFrame as ConnectFrame

    X = np.random.default_rng(0).beta(2, 5, size=(20_000, 2))
    sdf = spark_connect.createDataFrame(pd.DataFrame({"x": X[:, 0], "y": X[:, 1]})).repartition(4)
    assert isinstance(sdf, ConnectFrame)
    merged = sspark.fit(sdf, RAW, split_every=2)
    _same(merged, _exact(X))
    private = sspark.fit(sdf, NOISY, mode="untrusted")
    assert not private.raw and private.n_seen == 0
    assert private.release().sample(10, rng=1).shape == (10, 2)


def test_fit_files_on_a_connect_session(spark_connect, tmp_path) -> None:
    X = np.random.default_rng(1).random((30_000, 2))
    for i, (a, b) in enumerate([(0, 9_000), (9_000, 9_000), (9_000, 30_000)]):
        table = pa.table({"x": X[a:b, 0], "y": X[a:b, 1]})
        pq.write_table(table, tmp_path / f"part-{i}.parquet", row_group_size=4_000)
    merged = sspark.fit_files(spark_connect, tmp_path, RAW, columns=["x", "y"], split_every=2)
    _same(merged, _exact(X))


def test_a_table_on_a_connect_session(spark_connect, tmp_path) -> None:
    """A Spark DataFrame of a table (the docs' example): columns by name, the schema's types."""
    from test_tables_distributed import RAW as TABLE
    from test_tables_distributed import SCHEMA, _files, _one_machine, _table

    df = _table()
    sdf = spark_connect.createDataFrame(df).repartition(3)
    merged = sspark.fit(sdf, TABLE, columns=list(SCHEMA.names), split_every=2)
    one = _one_machine(df)
    assert (merged._tree == one._tree).all() and (merged._bank == one._bank).all()
    out = merged.release().sample(20, rng=1)
    assert list(out.columns) == list(SCHEMA.names) and out["month"].between(1, 12).all()
    files = sspark.fit_files(spark_connect, _files(tmp_path, df), TABLE, columns=list(SCHEMA.names))
    assert (files._tree == one._tree).all() and (files._bank == one._bank).all()
