"""Typed table readers (CSV, JSON lines, Parquet, Arrow, access logs), the schema draft, and the
table metrics: rows and line numbers against a hand-made expectation, bad lines named or counted,
positions that resume exactly, and the metrics' definitions."""

from __future__ import annotations

import io
import json
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sketchsyn.domains import Schema
from sketchsyn.errors import InputError, ParameterError
from sketchsyn.evaluate.tables import codes, marginal_tvd, mean_scores, table_scores, w1
from sketchsyn.io.accesslog_table import AccessLogTableReader, accesslog_schema
from sketchsyn.io.schema_draft import WARNING, draft_schema
from sketchsyn.io.tables_reader import (
    CSVTableReader,
    JSONLinesTableReader,
    ParquetTableReader,
    open_table_reader,
    to_timestamps,
)

SCHEMA = Schema.from_dict(
    {
        "columns": [
            {"name": "c", "kind": "categorical", "categories": ["a", "b", "c"], "policy": "other"},
            {"name": "x", "kind": "numeric", "low": 0, "high": 100},
            {"name": "t", "kind": "datetime", "low": "2020-01-01", "high": "2021-01-01"},
            {"name": "ok", "kind": "boolean"},
        ]
    }
)


def messy_csv(n: int, seed: int) -> tuple[bytes, list[tuple[int, float]], list[int]]:
    """A CSV with blank lines and bad lines of each kind; the good (line, x) and bad lines."""
    rnd = random.Random(seed)
    lines = ["x,c,ok,t,junk"]
    good, bad = [], []
    for i in range(n):
        line = i + 2
        r = rnd.random()
        if r < 0.002:
            lines.append("")
        elif r < 0.004:
            lines.append("1,a,true")  # too few fields
            bad.append(line)
        elif r < 0.006:
            lines.append("zz,a,true,2020-01-01,j")  # not a number
            bad.append(line)
        elif r < 0.008:
            lines.append("5,a,maybe,2020-01-01,j")  # not a boolean
            bad.append(line)
        elif r < 0.010:
            lines.append("5,a,true,soon,j")  # not a date
            bad.append(line)
        else:
            x = round(rnd.random() * 100, 3)
            day = f"2020-0{rnd.randint(1, 9)}-1{rnd.randint(0, 9)}"
            stamp = rnd.choice([day, day + "T05:00:00", day + " 06:30", day + "T07:00:00Z"])
            lines.append(f"{x},{rnd.choice('abcd')},{rnd.choice(['true', 'False'])},{stamp},j")
            good.append((line, x))
    return ("\n".join(lines) + "\n").encode(), good, bad


@pytest.mark.parametrize("batch_size, threads", [(700, False), (65536, True)])
def test_csv_rows_line_numbers_and_bad_lines_match_the_expectation(batch_size, threads):
    data, good, bad = messy_csv(60_000, seed=1)
    reader = CSVTableReader(
        io.BytesIO(data), SCHEMA, batch_size=batch_size, on_bad="skip", threads=threads
    )
    xs, lines = [], []
    for table in reader:
        assert table.num_rows <= batch_size
        assert table.schema.names == list(SCHEMA.names)
        assert str(table.schema.field("t").type) == "timestamp[us]"
        xs += table.column("x").to_pylist()
        lines += reader.lines.tolist()
    assert lines == [g[0] for g in good] and xs == [g[1] for g in good]
    assert reader.n_bad == len(bad) and reader.bad_lines == bad[:10]
    assert reader.position.rows == 60_000


def test_csv_raise_names_the_first_bad_line_and_why():
    data, _, bad = messy_csv(5000, seed=2)
    with pytest.raises(InputError, match=f"line {bad[0]}: "):
        list(CSVTableReader(io.BytesIO(data), SCHEMA, threads=False))
    text = b"x,c,ok,t\n1,a,true,2020-01-01\n2,b,true,2020-13-45\n"
    with pytest.raises(InputError, match="line 3: column 't' = '2020-13-45' is not an ISO"):
        list(CSVTableReader(io.BytesIO(text), SCHEMA))
    with pytest.raises(InputError, match=r"line 2: column 'x': not double: invalid value 'n/a'"):
        list(CSVTableReader(io.BytesIO(b"x,c,ok,t\nn/a,a,true,2020-01-01\n"), SCHEMA))
    with pytest.raises(InputError, match="column 'ok' is not in the header"):
        CSVTableReader(io.BytesIO(b"x,c,t\n1,a,2020-01-01\n"), SCHEMA)


def test_resume_continues_after_exactly_the_rows_read():
    data, good, _ = messy_csv(30_000, seed=3)
    first = CSVTableReader(io.BytesIO(data), SCHEMA, batch_size=2000, on_bad="skip", threads=False)
    seen, position = [], None
    for table in first:
        seen += table.column("x").to_pylist()
        if first.position is not None and len(seen) > 10_000:
            position = first.position
            break
    rest = CSVTableReader(
        io.BytesIO(data), SCHEMA, batch_size=2000, on_bad="skip", resume=position, threads=False
    )
    for table in rest:
        seen += table.column("x").to_pylist()
    assert seen == [g[1] for g in good]


def test_json_lines_parquet_arrow_and_csv_give_the_same_tables(tmp_path):
    rows = [
        {"c": "a", "x": 1.5, "t": "2020-02-01T10:00:00", "ok": True},
        {"c": "zz", "x": 99, "t": "2020-03-01", "ok": False},
        {"c": None, "x": None, "t": None, "ok": None},
    ]
    jl = tmp_path / "t.jsonl"
    jl.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"x": "oops"}\n[1]\n')
    reader = JSONLinesTableReader(str(jl), SCHEMA, on_bad="skip")
    got = pa.concat_tables(list(reader))
    assert reader.bad_lines == [4, 5] and got.num_rows == 3
    table = pa.table(
        {
            "c": pa.array(["a", "zz", None]).dictionary_encode(),
            "x": pa.array([1.5, 99, None]),
            "t": pa.array(np.array(["2020-02-01T10:00", "2020-03-01", "NaT"], "datetime64[us]")),
            "ok": pa.array([True, False, None]),
            "extra": [1, 2, 3],
        }
    )
    path = tmp_path / "t.parquet"
    pq.write_table(table, path)
    from_parquet = pa.concat_tables(list(ParquetTableReader(str(path), SCHEMA)))
    assert from_parquet.to_pylist() == got.to_pylist()
    csv = tmp_path / "t.csv"
    csv.write_text("c,x,t,ok\na,1.5,2020-02-01T10:00:00,true\nzz,99,2020-03-01,false\n,,,\n")
    from_csv = pa.concat_tables(list(open_table_reader(str(csv), SCHEMA)))
    assert from_csv.to_pylist() == got.to_pylist()
    bad = pa.table({"c": ["a"], "x": ["text"], "t": [1], "ok": [True]})
    pq.write_table(bad, tmp_path / "bad.parquet")
    with pytest.raises(InputError, match="column 'x' has type string"):
        ParquetTableReader(str(tmp_path / "bad.parquet"), SCHEMA)


def test_timestamps_from_iso_text_with_zones():
    ts, bad = to_timestamps(pa.array(["2020-01-01T01:00:00+01:00", "2020-01-01Z", "x", "2020"]))
    assert [str(v) for v in ts.to_pylist()[:2]] == ["2020-01-01 00:00:00", "2020-01-01 00:00:00"]
    assert bad == [2, 3]


def test_access_log_table_columns_ipv6_and_junk():
    schema = accesslog_schema("2000-10-10", "2000-10-12", paths=["/", "/api", "/static/"])
    log = [
        '10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET /api/x?id=3 HTTP/1.0" 200 2326 "-" "ua"',
        "",
        '::1 - - [10/Oct/2000:13:55:37 -0700] "GET / HTTP/1.0" 200 5',
        "garbage",
        '300.0.0.1 - - [10/Oct/2000:13:55:37 -0700] "GET / HTTP/1.0" 200 5',
        '10.0.0.2 - - [11/Oct/2000:01:00:00 +0200] "POST /static/a.js HTTP/1.1" 404 -',
        '10.0.0.3 - - [31/Feb/2000:01:00:00 +0200] "GET / HTTP/1.1" 200 1',
        '10.0.0.4 - bob [11/Oct/2000:01:00:00 +0000] "GET /?q=1 HTTP/1.1" 500 7',
        '10.0.0.5 - - [11/Oct/2000:01:00:00 +0000] "-" 408 0',
    ]
    reader = AccessLogTableReader(log, schema, on_bad="skip")
    rows = pa.concat_tables(list(reader)).to_pylist()
    assert reader.n_ipv6 == 1 and reader.bad_lines == [4, 5, 7]
    assert reader.lines.tolist() == [1, 6, 8, 9]
    assert [r["path"] for r in rows] == ["/api", "/static/", "/", "-"]
    assert [r["method"] for r in rows] == ["GET", "POST", "GET", "-"]
    assert [r["bytes"] for r in rows] == [2326, 0, 7, 0]
    assert [str(r["time"]) for r in rows[:2]] == ["2000-10-10 20:55:36", "2000-10-10 23:00:00"]
    sub = Schema.from_dict({"columns": schema.to_dict()["columns"][:1]})
    assert AccessLogTableReader(log[:1], sub).table_schema.names == ("client",)
    wrong = Schema.from_dict({"columns": [{"name": "client", "kind": "boolean"}]})
    with pytest.raises(ParameterError, match="its column 'client' is boolean"):
        AccessLogTableReader(log, wrong)
    with pytest.raises(ParameterError, match="path prefixes starting with '/'"):
        accesslog_schema("2000-10-10", "2000-10-12", paths=["api"])


def test_schema_draft_reads_the_data_and_says_it_is_not_private(tmp_path):
    assert "NOT PRIVATE" in WARNING and "public knowledge" in WARNING
    text = b"n,v,t,ip,ok,tag\n3,1.5,2020-01-01,10.0.0.1,true,a\n7,-2,2020-02-01,10.0.0.9,false,b\n"
    draft, notes = draft_schema(io.BytesIO(text), "csv", max_categories=1)
    kinds = {c["name"]: c["kind"] for c in draft["columns"]}
    assert kinds == {"n": "integer", "v": "numeric", "t": "datetime", "ip": "ipv4", "ok": "boolean"}
    assert draft["columns"][1]["low"] == -2.0 and draft["columns"][1]["high"] == 1.5
    assert notes and "'tag'" in notes[0]
    with pytest.raises(ParameterError, match="'draft' key"):
        Schema.from_dict(draft)  # refused while it says it is a draft
    body = {k: v for k, v in draft.items() if k != "draft"}
    Schema.from_dict(body)  # a valid schema (once its values are replaced by public ones)


def test_table_metrics_definitions():
    schema = {
        "columns": [
            {"name": "c", "kind": "categorical", "categories": ["a", "b"], "policy": "other"},
            {"name": "x", "kind": "numeric", "low": 0.0, "high": 16.0},
            {"name": "h", "kind": "integer", "low": 0, "high": 23},
            {"name": "t", "kind": "datetime", "low": "2020-01-01", "high": "2020-01-17"},
        ]
    }
    real = {
        "c": ["a", "b", "a", "z"],
        "x": [0.5, 1.5, 2.5, 16.0],
        "h": [0, 1, 2, 23],
        "t": np.array(
            ["2020-01-01", "2020-01-02", "2020-01-16T12", "2021-01-01"], "datetime64[us]"
        ),
    }
    fake = {
        "c": ["a", "b", "b", "other"],
        "x": [0.5, 0.5, 2.5, 15.5],
        "h": [0, 0, 2, 23],
        "t": np.array(["2020-01-01"] * 4, "datetime64[us]"),
    }
    got, sizes = codes(real, schema)
    assert got["t"].tolist() == [0, 1, 15, 15] and sizes == {"c": 3, "x": 16, "h": 16, "t": 16}
    scores = table_scores(real, fake, Schema.from_dict(schema))
    assert scores["tvd1"] == {"c": 0.25, "x": 0.25, "h": 0.0, "t": 0.75}
    assert scores["w1"] == {"x": 0.375}
    assert mean_scores(scores)["tvd1"] == pytest.approx(0.3125)
    assert marginal_tvd(got, got, sizes, 2)[("c", "x")] == 0.0
    assert w1([0.0, 1.0], [0.5, 1.5]) == 0.5
    with pytest.raises(ValueError, match="not categories"):
        codes(
            {"c": ["q"]}, {"columns": [{"name": "c", "kind": "categorical", "categories": ["a"]}]}
        )


def test_the_library_metrics_are_the_benchmarks_definitions():
    """``benchmarks/table_metrics.py`` (bench_tables.py's scores) and
    ``sketchsyn.evaluate.tables`` give the same scores on the kinds both bin."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "table_metrics.py"
    spec = importlib.util.spec_from_file_location("bench_table_metrics", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    schema = {
        "columns": [
            {"name": "c", "kind": "categorical", "categories": ["a", "b", "c"], "policy": "other"},
            {"name": "m", "kind": "integer", "low": 1, "high": 12},
            {"name": "h", "kind": "integer", "low": 0, "high": 23},
            {"name": "x", "kind": "numeric", "low": -60.0, "high": 600.0},
            {"name": "ok", "kind": "boolean"},
        ]
    }
    rng = np.random.default_rng(5)

    def frame(n: int) -> dict:
        return {
            "c": rng.choice(["a", "b", "c", "zz"], n),
            "m": rng.integers(1, 13, n),
            "h": rng.integers(-2, 26, n),
            "x": rng.normal(20, 80, n),
            "ok": rng.random(n) < 0.7,
        }

    real, fake = frame(3000), frame(2000)
    ours, theirs = table_scores(real, fake, schema), bench.table_scores(real, fake, schema)
    assert ours == theirs
    assert codes(real, schema)[1] == bench.codes(real, schema)[1]
