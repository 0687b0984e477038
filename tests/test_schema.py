"""The table schema: every kind and policy, bad schemas refused naming the column, the dict,
JSON and YAML forms, tables of every library in, typed tables out, and range conditions."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sketchsyn import InputError, ParameterError, Schema
from sketchsyn.domains import Domain
from sketchsyn.domains.columns import Adjusted
from sketchsyn.domains.where import parse_where

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")

CONTRACT = {
    "columns": [
        {"name": "carrier", "kind": "categorical", "categories": ["9E", "AA", "AS"]},
        {"name": "month", "kind": "integer", "low": 1, "high": 12},
        {"name": "dep_delay", "kind": "numeric", "low": -120, "high": 1440},
        {"name": "when", "kind": "datetime", "low": "2013-01-01", "high": "2014-01-01"},
        {"name": "client", "kind": "ipv4"},
        {"name": "ok", "kind": "boolean"},
    ]
}


def _frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "carrier": ["AA", "9E", "AS", "AA"],
            "month": [1, 5, 12, 7],
            "dep_delay": [-3.0, 60.0, 1440.0, -120.0],
            "when": pd.to_datetime(
                ["2013-01-01", "2013-06-15T12:30", "2013-12-31", "2014-01-01"], format="ISO8601"
            ),
            "client": ["10.0.0.1", "192.168.1.1", "8.8.8.8", "255.255.255.255"],
            "ok": [True, False, True, False],
        }
    )


def test_the_contract_dict_round_trips_exactly() -> None:
    schema = Schema.from_dict(CONTRACT)
    assert schema.to_dict() == CONTRACT
    assert Schema.from_dict(schema.to_dict()) == schema
    assert Domain.from_dict(CONTRACT) == schema  # a saved summary rebuilds its domain
    assert schema.names == ("carrier", "month", "dep_delay", "when", "client", "ok")
    assert schema.kinds == ("categorical", "integer", "numeric", "datetime", "ipv4", "boolean")
    with_policies = {
        "columns": [
            {"name": "c", "kind": "categorical", "categories": ["a"], "policy": "other"},
            {
                "name": "d",
                "kind": "categorical",
                "categories": ["a"],
                "policy": "other",
                "other_label": "rest",
            },
            {"name": "n", "kind": "numeric", "low": 0.5, "high": 2, "policy": "clip"},
            {"name": "i", "kind": "integer", "low": 0, "high": 9, "policy": "drop"},
        ]
    }
    assert Schema.from_dict(with_policies).to_dict() == with_policies


def test_json_and_yaml_files_round_trip(tmp_path) -> None:
    schema = Schema.from_dict(CONTRACT)
    (tmp_path / "s.json").write_text(json.dumps(CONTRACT))
    assert Schema.load(tmp_path / "s.json") == schema
    yaml = pytest.importorskip("yaml")
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(CONTRACT, sort_keys=False))
    assert Schema.load(tmp_path / "s.yaml").to_dict() == CONTRACT
    for name in ("out.yaml", "out.json"):
        schema.dump(tmp_path / name)
        assert Schema.load(tmp_path / name).to_dict() == CONTRACT


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ([{"name": "x", "kind": "decimal"}], "Column 'x' has kind 'decimal'"),
        ([{"name": "m", "kind": "integer", "low": 5, "high": 5}], "column 'm' (integer)"),
        ([{"name": "m", "kind": "integer", "low": 1.5, "high": 5}], "column 'm' (integer)"),
        ([{"name": "d", "kind": "numeric", "low": 3, "high": -1}], "column 'd' (numeric)"),
        (
            [{"name": "t", "kind": "datetime", "low": "2014-01-01", "high": "2013-01-01"}],
            "column 't' (datetime)",
        ),
        (
            [{"name": "t", "kind": "datetime", "low": "soon", "high": "2013-01-01"}],
            "column 't' (datetime)",
        ),
        (
            [{"name": "c", "kind": "categorical", "categories": []}],
            "column 'c' must be a non-empty",
        ),
        (
            [{"name": "c", "kind": "categorical", "categories": ["a", "a"]}],
            "column 'c' must be distinct",
        ),
        ([{"name": "c", "kind": "categorical", "categories": ["a", 1]}], "column 'c'"),
        (
            [{"name": "c", "kind": "categorical", "categories": ["other"], "policy": "other"}],
            "'other_label' of column 'c'",
        ),
        ([{"name": "c", "kind": "categorical"}], "Column 'c' (categorical) has keys"),
        ([{"name": "b", "kind": "boolean", "low": 0}], "Column 'b' (boolean) has keys"),
        ([{"name": "b", "kind": "boolean", "policy": "clip"}], "'policy' of column 'b'"),
        (
            [{"name": "x", "kind": "ipv4"}, {"name": "x", "kind": "boolean"}],
            "two columns named 'x'",
        ),
        ([], "1 to 64 columns"),
    ],
)
def test_bad_schemas_are_refused_naming_the_column(columns, message) -> None:
    with pytest.raises(ParameterError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Schema(columns)


def test_tables_of_every_library_give_the_same_codes() -> None:
    pl = pytest.importorskip("polars")
    schema = Schema.from_dict(CONTRACT)
    df = _frame()
    codes = schema.encode(df, depth=64)
    assert codes.dtype == np.uint64 and codes.shape == (4,)
    tables = [
        pl.from_pandas(df),
        pa.Table.from_pandas(df, preserve_index=False),
        pa.RecordBatch.from_pandas(df, preserve_index=False),
        {c: df[c].tolist() for c in df},
        df[list(schema.names)].to_numpy(dtype=object),
        [dict(zip(df.columns, row, strict=True)) for row in df.itertuples(index=False)],
    ]
    for table in tables:
        assert (schema.encode(table, depth=64) == codes).all(), type(table)
    # columns are matched by name, not position
    assert (schema.encode(df[list(reversed(df.columns))], depth=64) == codes).all()


def test_missing_and_extra_columns_are_named() -> None:
    schema = Schema.from_dict(CONTRACT)
    df = _frame()
    with pytest.raises(InputError, match="has no column 'ok'"):
        schema.encode(df.drop(columns="ok"), depth=8)
    with pytest.raises(InputError, match="has column 'extra', which the schema does not have"):
        schema.encode(df.assign(extra=1), depth=8)
    with pytest.raises(InputError, match="6 values a row"):
        schema.encode(np.zeros((2, 5)), depth=8)


def test_values_outside_follow_each_policy_and_are_counted() -> None:
    schema = Schema(
        [
            {"name": "c", "kind": "categorical", "categories": ["a", "b"], "policy": "other"},
            {"name": "n", "kind": "numeric", "low": 0, "high": 10, "policy": "clip"},
            {"name": "i", "kind": "integer", "low": 0, "high": 3, "policy": "drop"},
            {
                "name": "t",
                "kind": "datetime",
                "low": "2020-01-01",
                "high": "2021-01-01",
                "policy": "clip",
            },
        ]
    )
    table = {
        "c": ["a", "z", None, "b"],
        "n": [-5.0, 3.0, 11.0, 10.0],
        "i": [0, 1, 9, 3],
        "t": ["2019-06-01", "2020-06-01", "2020-07-01", "2022-01-01"],
    }
    adjusted = Adjusted()
    units = schema.units(table, adjusted)
    assert units.shape == (3, 4)  # the row with i = 9 is dropped
    assert units[:, 0].tolist() == [0.0, 2.0, 1.0]  # "z" is the other category, index 2
    assert units[:, 1].tolist() == [0.0, 3.0, 10.0]
    assert dict(adjusted) == {
        "c:other": 2,
        "n:clipped": 2,
        "i:dropped": 1,
        "t:clipped": 2,
    }
    frame = schema.to_frame(schema.sample_cells([0] * 5, [0] * 5, rng=1))
    assert set(frame["c"].cat.categories) == {"a", "b", "other"}


def test_refused_rows_are_named() -> None:
    schema = Schema.from_dict(CONTRACT)
    df = _frame()
    for column, value, text in [
        ("carrier", "ZZ", "row 2: column 'carrier' = 'ZZ' is not one of the column's categories"),
        ("month", 13, "row 2: column 'month' = 13"),
        ("month", 2.5, "row 2: column 'month' = 2.5"),
        ("dep_delay", float("nan"), "row 2: column 'dep_delay' is missing"),
        ("client", "10.0.0.300", "row 2: column 'client' = '10.0.0.300'"),
        ("ok", "maybe", "row 2: column 'ok' = 'maybe'"),
    ]:
        bad = df.copy()
        bad[column] = bad[column].astype(object)
        bad.loc[2, column] = value
        with pytest.raises(InputError, match=text.replace("(", r"\(")):
            schema.encode(bad, depth=8)


@pytest.mark.parametrize("library", ["pandas", "polars", "pyarrow"])
def test_samples_have_valid_values_and_the_declared_types(library) -> None:
    if library == "polars":
        pytest.importorskip("polars")
    schema = Schema(
        [
            {"name": "carrier", "kind": "categorical", "categories": ["9E", "AA", "AS"]},
            {"name": "month", "kind": "integer", "low": 1, "high": 12},
            {"name": "delay", "kind": "numeric", "low": -120, "high": 1440},
            {"name": "when", "kind": "datetime", "low": "2013-01-01", "high": "2014-01-01"},
            {"name": "client", "kind": "ipv4"},
            {"name": "ok", "kind": "boolean"},
        ]
    )
    # every cell of level 6 (codes of the categorical and the integer have unused tails)
    prefixes = np.arange(64)
    units = schema.sample_cells(np.full(64, 6), prefixes, rng=3)
    frame = schema.to_frame(units, library)
    df = frame if library == "pandas" else frame.to_pandas()
    if library == "polars":
        df = frame.to_pandas()
    assert set(df["carrier"].astype(str)) <= {"9E", "AA", "AS"}
    assert df["month"].between(1, 12).all() and (df["month"] == df["month"].round()).all()
    assert df["delay"].between(-120, 1440).all()
    assert (df["when"] >= pd.Timestamp("2013-01-01")).all()
    assert (df["when"] <= pd.Timestamp("2014-01-01")).all()
    assert df["client"].str.count(r"\.").eq(3).all()
    if library == "pandas":
        assert str(frame["carrier"].dtype) == "category"
        assert str(frame["month"].dtype) == "int64" and str(frame["delay"].dtype) == "float64"
        assert str(frame["when"].dtype).startswith("datetime64") and frame["ok"].dtype == bool
    elif library == "pyarrow":
        assert str(frame.schema.field("carrier").type).startswith("dictionary")
        assert str(frame.schema.field("when").type) == "timestamp[us]"
    else:
        import polars as pl

        assert frame.schema["carrier"] == pl.Enum(["9E", "AA", "AS"])
        assert frame.schema["month"] == pl.Int64


def test_cells_without_a_value_are_not_valid() -> None:
    schema = Schema([{"name": "c", "kind": "categorical", "categories": ["a", "b", "c"]}])
    assert schema.valid([2, 2, 2, 2], [0, 1, 2, 3]).tolist() == [True, True, True, False]
    assert schema.valid([1, 1], [0, 1]).tolist() == [True, True]


def test_where_conditions_text_and_dict() -> None:
    schema = Schema.from_dict(CONTRACT)
    frac = schema.where_fraction([0], [0], 'carrier == "AA" and dep_delay > 60')
    assert frac[0] == pytest.approx((1 / 3) * (1440 - 60) / 1560)
    same = schema.where_fraction([0], [0], {"carrier": "AA", "dep_delay": (60, None)})
    assert same[0] == pytest.approx(frac[0])
    assert schema.where_fraction([0], [0], "month in [1, 2, 3]")[0] == pytest.approx(0.25)
    assert schema.where_fraction([0], [0], "3 < month <= 6")[0] == pytest.approx(0.25)
    assert schema.where_fraction([0], [0], "month != 1")[0] == pytest.approx(11 / 12)
    assert schema.where_fraction([0], [0], "ok == True")[0] == pytest.approx(0.5)
    assert schema.where_fraction([0], [0], 'when < "2013-02-01"')[0] == pytest.approx(31 / 365)
    for bad, text in [
        ("carrier == 'AA' or month == 1", "uses 'or'"),
        ("carrier == 'ZZ'", "no category 'ZZ'"),
        ("plane == 1", "names no column 'plane'"),
        ("month == month", "compare one column with values"),
        ("__import__('os')", "not a comparison"),
        ("dep_delay > 'x'", "is numeric"),
    ]:
        with pytest.raises(ParameterError, match=text):
            parse_where(bad, schema)


def test_encoding_a_batch_of_a_million_rows_is_vectorised() -> None:
    """A plain functional check on a larger batch (speed is measured in benchmarks/)."""
    rng = np.random.default_rng(0)
    n = 200_000
    schema = Schema.from_dict(CONTRACT)
    table = pa.table(
        {
            "carrier": pa.array(rng.choice(["9E", "AA", "AS"], n)),
            "month": pa.array(rng.integers(1, 13, n)),
            "dep_delay": pa.array(rng.uniform(-120, 1440, n)),
            "when": pa.array(
                np.datetime64("2013-01-01")
                + rng.integers(0, 364 * 86400, n).astype("timedelta64[s]")
            ),
            "client": pa.array(rng.integers(0, 2**32, n)),
            "ok": pa.array(rng.random(n) < 0.5),
        }
    )
    codes = schema.encode(table, depth=24)
    lo, hi = schema.cell_ranges(np.full(n, 24), codes)
    units = schema.units(table)
    for j, col in enumerate(schema._cols):
        c = col.codes(units[:, j])
        assert ((c >= lo[:, j]) & (c < hi[:, j])).all()


def test_an_ipv6_value_in_an_ipv4_column_is_refused_with_the_batch_parsed_once(monkeypatch):
    """Issue 50, item 9: "One IPv6 value in an ipv4 column with policy `drop` sends the whole
    file to row-by-row parsing. 200k rows took 118 s, against 1.5 s without the value." The
    batch's addresses are parsed in one vectorised pass whatever its bad rows
    (``python benchmarks/bench_messy_files.py`` times both files)."""
    from sketchsyn.domains import ipv4
    from sketchsyn.domains.columns import Adjusted, column_from_dict

    calls = []
    real = ipv4.dotted_quads
    monkeypatch.setattr(ipv4, "dotted_quads", lambda *a: calls.append(1) or real(*a))
    col = column_from_dict({"name": "client", "kind": "ipv4", "policy": "drop"}, 0)
    values = np.array([f"10.0.{i // 256}.{i % 256}" for i in range(5_000)], dtype=object)
    values[17], values[4_000] = "2001:db8::1", None
    adjusted = Adjusted()
    units = col.units(values, adjusted)
    assert len(calls) == 1
    assert np.isnan(units[[17, 4_000]]).all() and adjusted == {"client:dropped": 2}
    assert units[18] == float((10 << 24) + 18)
