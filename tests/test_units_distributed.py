"""A privacy unit across partitions: sketchsyn.dask and sketchsyn.spark bring every row of a
unit to one bounder (a keyed hash of the unit), so the merged summary keeps at most L rows of
each unit; the file paths take a unit only when the caller states the files are partitioned by
it."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from sketchsyn import Box, MarginalSynthesizer, PrivHP, Schema
from sketchsyn.errors import ParameterError
from sketchsyn.io.serial import header_of

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")

SCHEMA = Schema(
    [
        {"name": "c", "kind": "categorical", "categories": ["a", "b", "c"]},
        {"name": "ok", "kind": "boolean"},
    ]
)
L = 4
TABLE = functools.partial(
    MarginalSynthesizer, SCHEMA, 1.0, bits=1, fine_bits=1, unit="user", max_rows=L,
    expected_units=20_000, rng=0,
)  # fmt: skip
POINTS = functools.partial(
    PrivHP, Box.unit(2), 1.0, 16, 64, depth=8, raw=True, unit="user", max_rows=L,
    expected_units=20_000, rng=0,
)  # fmt: skip
PRIVATE = functools.partial(
    PrivHP, Box.unit(2), 1.0, 16, 64, depth=8, unit="user", max_rows=L, expected_units=20_000
)


@pytest.fixture(scope="module")
def rows():
    """Zipf users (a few with hundreds of rows), each user's rows in one cell of the table,
    the rows in random order (a user's rows spread over every partition)."""
    rng = np.random.default_rng(0)
    n = 20_000
    users = rng.zipf(1.3, n) % 3_000
    cell = users % 6
    return pd.DataFrame(
        {
            "c": np.array(["a", "b", "c"])[cell % 3],
            "ok": cell < 3,
            "user": [f"u{u}" for u in users],
            "x": rng.random(n),
            "y": rng.random(n),
        }
    )


def _kept(frame):
    return int(frame.groupby("user").size().clip(upper=L).sum())


def test_dask_brings_a_units_rows_to_one_bounder(rows):
    dd = pytest.importorskip("dask.dataframe")
    from sketchsyn import dask as sdask

    frame = dd.from_pandas(rows, npartitions=5)
    merged = sdask.fit(frame, TABLE, unit="user", columns=["c", "ok"], scheduler="sync")
    one = TABLE()
    one.update_many(rows[["c", "ok", "user"]])
    # Every user's rows in one cell: the merge is the one-machine state, bit for bit.
    assert merged.n_seen == _kept(rows) and (merged._counts == one._counts).all()
    assert merged.bounder is None  # merged: it takes no more rows
    points = sdask.fit(frame, POINTS, unit="user", columns=["x", "y"], scheduler="sync")
    assert points.n_seen == _kept(rows)
    private = sdask.fit(frame, PRIVATE, unit="user", columns=["x", "y"], mode="untrusted",
                        scheduler="sync")  # fmt: skip
    assert private.state_privacy == "private" and private.unit == "user"


def test_dask_refusals(rows, tmp_path):
    dd = pytest.importorskip("dask.dataframe")
    import dask.array as da

    from sketchsyn import dask as sdask

    frame = dd.from_pandas(rows, npartitions=2)
    with pytest.raises(ParameterError, match="pass unit='user' too"):
        sdask.fit(frame, TABLE, columns=["c", "ok", "user"], scheduler="sync")
    with pytest.raises(ParameterError, match="the privacy unit of the summaries"):
        sdask.fit(frame, TABLE, unit="c", scheduler="sync")
    with pytest.raises(ParameterError, match="needs a Dask DataFrame"):
        sdask.fit(da.ones((10, 2)), POINTS, unit="user", scheduler="sync")
    path = tmp_path / "part.parquet"
    rows[["c", "ok", "user"]].to_parquet(path)
    with pytest.raises(ParameterError, match="partitioned_by_unit=True"):
        sdask.summarize_files(path, TABLE, columns=["c", "ok"])
    event = functools.partial(MarginalSynthesizer, SCHEMA, 1.0, bits=1, fine_bits=1)
    with pytest.raises(ParameterError, match="is for summaries built with a privacy unit"):
        sdask.summarize_files(path, event, columns=["c", "ok"], partitioned_by_unit=True)


def test_dask_files_partitioned_by_unit(rows, tmp_path):
    pytest.importorskip("dask")
    from sketchsyn import dask as sdask

    users = rows["user"].str[1:].astype(int)
    for part in range(3):  # each user's rows in one file: the caller's statement holds
        rows[users % 3 == part][["c", "ok", "user"]].to_parquet(tmp_path / f"p{part}.parquet")
    merged = sdask.summarize_files(
        tmp_path, TABLE, columns=["c", "ok"], partitioned_by_unit=True
    ).compute(scheduler="sync")
    assert merged.n_seen == _kept(rows)


def test_spark_repartitions_by_a_keyed_hash_of_the_unit(spark, rows, tmp_path):
    from sketchsyn import spark as sspark

    frame = spark.createDataFrame(rows).repartition(4)
    merged = sspark.fit(frame, TABLE, unit="user", columns=["c", "ok"])
    one = TABLE()
    one.update_many(rows[["c", "ok", "user"]])
    assert merged.n_seen == _kept(rows) and (merged._counts == one._counts).all()
    points = sspark.fit(frame, POINTS, unit="user", columns=["x", "y"], unit_partitions=3)
    assert points.n_seen == _kept(rows)
    lazy = sspark.summarize(frame, PRIVATE, unit="user", columns=["x", "y"], mode="untrusted")
    for row in lazy.collect():  # each partition's bytes: the private part, no bounder
        assert header_of(bytes(row[0])).state == "private"
    with pytest.raises(ParameterError, match="pass unit='user' too"):
        sspark.fit(frame, TABLE, columns=["c", "ok", "user"])
    path = tmp_path / "part.parquet"
    rows[["c", "ok", "user"]].to_parquet(path)
    with pytest.raises(ParameterError, match="partitioned_by_unit=True"):
        sspark.fit_files(spark, path, TABLE, columns=["c", "ok"])
    merged = sspark.fit_files(spark, path, TABLE, columns=["c", "ok"], partitioned_by_unit=True)
    assert merged.n_seen == _kept(rows)
