"""Summaries of tables beyond one machine: Dask DataFrames and Spark DataFrames whose summary's
domain is a Schema reach the summary as tables (columns by name), and the trusted merge equals
one machine's state."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from sketchsyn import PrivHP, Schema

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")

SCHEMA = Schema.from_dict(
    {
        "columns": [
            {"name": "carrier", "kind": "categorical", "categories": ["9E", "AA", "AS"]},
            {"name": "month", "kind": "integer", "low": 1, "high": 12},
            {"name": "delay", "kind": "numeric", "low": -120, "high": 1440},
        ]
    }
)
RAW = functools.partial(PrivHP, SCHEMA, 1.0, 16, 128, depth=12, raw=True)
PRIVATE = functools.partial(PrivHP, SCHEMA, 1.0, 16, 128, depth=12)


def _table(n: int = 6_000) -> pd.DataFrame:
    rng = np.random.default_rng(2)
    return pd.DataFrame(
        {
            "month": rng.integers(1, 13, n),  # another column order than the schema's
            "carrier": rng.choice(np.array(["9E", "AA", "AS"], dtype=object), n),
            "delay": rng.uniform(-120, 1440, n),
            "tail": rng.integers(0, 9, n),  # a column the schema does not have
        }
    )


def _one_machine(df: pd.DataFrame) -> PrivHP:
    one = RAW()
    one.update_many(df[list(SCHEMA.names)])
    return one


def test_dask_frames_of_a_table(client) -> None:
    dd = pytest.importorskip("dask.dataframe")
    from sketchsyn import dask as sdask

    df = _table()
    ddf = dd.from_pandas(df, npartitions=4)
    merged = sdask.fit(ddf, RAW, columns=["carrier", "month", "delay"], split_every=2)
    one = _one_machine(df)
    assert (merged._tree == one._tree).all() and (merged._bank == one._bank).all()
    assert merged.n_seen == len(df)
    private = sdask.fit(ddf, PRIVATE, mode="untrusted", columns=list(SCHEMA.names))
    out = private.release().sample(50, rng=1)
    assert list(out.columns) == list(SCHEMA.names) and str(out["carrier"].dtype) == "category"


def test_spark_frames_of_a_table(spark) -> None:
    from sketchsyn import spark as sspark

    df = _table()
    sdf = spark.createDataFrame(df).repartition(3)
    merged = sspark.fit(sdf, RAW, columns=["carrier", "month", "delay"], split_every=2)
    one = _one_machine(df)
    assert (merged._tree == one._tree).all() and (merged._bank == one._bank).all()
    assert merged.release().sample(5, rng=1)["month"].between(1, 12).all()


def _files(tmp_path, df: pd.DataFrame) -> list[str]:
    """The table in three files: two Parquet, one CSV (each task reads its own)."""
    parts = np.array_split(np.arange(len(df)), 3)
    paths = []
    for i, idx in enumerate(parts[:2]):
        path = tmp_path / f"part{i}.parquet"
        df.iloc[idx].to_parquet(path)
        paths.append(str(path))
    path = tmp_path / "part2.csv"
    df.iloc[parts[2]].to_csv(path, index=False)
    return [*paths, str(path)]


def test_dask_files_of_a_table(client, tmp_path) -> None:
    from sketchsyn import dask as sdask
    from sketchsyn.errors import ParameterError

    df = _table()
    paths = _files(tmp_path, df)
    lazy = sdask.summarize_files(paths, RAW, columns=["month", "carrier", "delay"])
    merged = lazy.compute()
    one = _one_machine(df)
    assert (merged._tree == one._tree).all() and (merged._bank == one._bank).all()
    assert merged.n_seen == len(df)
    with pytest.raises(ParameterError, match="schema's columns"):
        sdask.summarize_files(paths, RAW, columns=["month", "carrier"]).compute()


def test_spark_files_of_a_table(spark, tmp_path) -> None:
    from sketchsyn import spark as sspark

    df = _table()
    paths = _files(tmp_path, df)
    merged = sspark.fit_files(spark, paths, RAW, columns=list(SCHEMA.names))
    one = _one_machine(df)
    assert (merged._tree == one._tree).all() and (merged._bank == one._bank).all()
