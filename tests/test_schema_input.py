"""Schemas as people write them and the messages a bad value gets (issue 50, items 4, 5, 11):
spans that overflow, YAML's own types, time zones, and values named as a person reads them."""

from __future__ import annotations

import datetime as dt
import warnings
from pathlib import Path

import numpy as np
import pytest
from cli_run import run, user_error

from sketchsyn import PrivHP, Schema
from sketchsyn.errors import InputError, ParameterError

pytest.importorskip("yaml")


def test_bounds_whose_span_overflows_are_refused() -> None:
    """Item 4: "A numeric column with `low: -1e308, high: 1e308` is accepted; its span
    overflows, and the samples are NaN [...] Refuse a non-finite `high − low`."""
    huge = {"name": "x", "kind": "numeric", "low": -1e308, "high": 1e308}
    with pytest.raises(ParameterError, match=r"'x'.*finite span high − low.*low=-1e\+308"):
        Schema.from_dict({"columns": [huge]})
    ok = Schema.from_dict({"columns": [dict(huge, low=-1e307, high=1e307)]})
    php = PrivHP(ok, 1.0, 8, 64, depth=6, rng=0)
    php.update_many({"x": np.array([-1e306, 0.0, 5e306])})
    assert np.isfinite(php.release().sample(200, as_frame="numpy", rng=1)["x"]).all()


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_yaml_dates_unquoted_load_and_fit(tmp_path: Path) -> None:
    """Item 5: "An unquoted date (`low: 2013-01-01`) loads as a date object and crashes `fit`
    with a TypeError traceback." YAML's dates and times are taken as the ISO text they were."""
    schema = _write(
        tmp_path / "s.yaml",
        "columns:\n"
        "- {name: when, kind: datetime, low: 2013-01-01, high: 2014-01-01 00:00:00Z}\n"
        "- {name: n, kind: integer, low: 0, high: 9}\n",
    )
    loaded = Schema.load(schema)
    assert loaded.to_dict()["columns"][0] == {
        "name": "when",
        "kind": "datetime",
        "low": "2013-01-01",
        "high": "2014-01-01T00:00:00",
    }
    data = _write(tmp_path / "d.csv", "when,n\n2013-05-01T10:00:00Z,3\n2013-06-01,4\n")
    proc = run("fit", data, "--schema", schema, "--epsilon", "1", "--depth", "6", "-o",
               tmp_path / "m.model")  # fmt: skip
    assert proc.returncode == 0, proc.err
    assert "Traceback" not in proc.err and "Warning" not in proc.err
    info = run("info", tmp_path / "m.model")
    assert "[2013-01-01, 2014-01-01T00:00:00]" in info.out, info.out


@pytest.mark.parametrize(
    ("entry", "needle"),
    [
        ("{name: x, kind: [numeric], low: 0, high: 1}", "kind ['numeric']; the kind is one of"),
        ("{name: x, kind: numeric, low: 0, high: 1, 7: seven}", "unknown [7]"),
        ("{name: x, kind: boolean, ~: b}", "unknown [None]"),
    ],
    ids=["list-kind", "int-key", "null-key"],
)
def test_yaml_shapes_a_person_may_write_get_a_clear_error(
    tmp_path: Path, entry: str, needle: str
) -> None:
    """Item 5: "So does a list-valued `kind` or a non-string key": a ParameterError naming the
    column, and from the command line one line and exit 2."""
    schema = _write(tmp_path / "s.yaml", f"columns:\n- {entry}\n")
    try:
        Schema.load(schema)
    except ParameterError as exc:
        assert needle in str(exc) and "'x'" in str(exc), exc
    except Exception as exc:  # noqa: BLE001 (the defect: any other exception)
        raise AssertionError(f"{type(exc).__name__}: {exc}") from None
    else:
        raise AssertionError("accepted")
    data = _write(tmp_path / "d.csv", "x\n1\n")
    user_error(run("fit", data, "--schema", schema, "--epsilon", "1", "-o", tmp_path / "m"),
               "--schema", needle)  # fmt: skip


def test_a_top_level_key_that_is_not_text_gets_a_clear_error(tmp_path: Path) -> None:
    schema = _write(tmp_path / "s.yaml", "1: 2\ncolumns:\n- {name: x, kind: boolean}\n")
    with pytest.raises(ParameterError, match=r"Got keys \[1, 'columns'\]"):
        Schema.load(schema)


DATES = Schema.from_dict(
    {
        "columns": [
            {"name": "when", "kind": "datetime", "low": "2013-01-01", "high": "2013-01-10"},
            {"name": "month", "kind": "integer", "low": 1, "high": 12},
        ]
    }
)


def test_times_with_a_utc_offset_are_read_without_a_warning() -> None:
    """Item 11: "A numpy `UserWarning` about time zones leaks with its source line whenever
    datetimes carry `Z` or an offset." Offsets are applied (the time is taken in UTC)."""
    stamps = [
        "2013-01-02T10:00:00+02:00",
        "2013-01-02T08:00:00Z",
        "2013-01-02 08:00",
        "2013-01-02T03:30:00-0430",
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        units = DATES.units({"when": np.array(stamps, dtype=object), "month": [1, 2, 3, 4]})
        bounds = Schema.from_dict(
            {
                "columns": [
                    {
                        "name": "t",
                        "kind": "datetime",
                        "low": "2013-01-01T00:00Z",
                        "high": "2013-01-02T00:00:00+01:00",
                    }
                ]
            }  # fmt: skip
        )
    assert len(set(units[:, 0].tolist())) == 1
    assert units[0, 0] == (np.datetime64("2013-01-02T08:00", "us") - np.datetime64(0, "us")).astype(
        np.int64
    )
    assert bounds.column("t").high - bounds.column("t").low == 23 * 3600e6


@pytest.mark.parametrize(
    ("when", "month", "message"),
    [
        (
            dt.datetime(2013, 1, 20, 10),
            3,
            "'when' = '2013-01-20T10:00:00' is outside [2013-01-01, 2013-01-10]",
        ),
        (np.datetime64("2013-01-05"), 2.5, "'month' = 2.5 is not a whole number"),
        ("2013-01-05", None, "'month' is missing"),
        ("not a time", 3, "'when' = 'not a time' is not a datetime value"),
    ],
    ids=["datetime-outside", "fraction", "missing", "unreadable"],
)
def test_a_refused_value_is_named_as_a_person_reads_it(when, month, message) -> None:
    """Item 11: "Month 2.5 is 'outside [1, 12] or missing'. Datetimes are shown as
    `datetime.datetime(...)`." """
    frame = {"when": np.array([when], dtype=object), "month": np.array([month], dtype=object)}
    with pytest.raises(InputError) as caught:
        DATES.units(frame)
    assert message in str(caught.value), str(caught.value)
    assert "datetime.datetime" not in str(caught.value) and "or missing" not in str(caught.value)


def test_an_empty_column_list_is_named_as_the_schemas(tmp_path: Path) -> None:
    """Item 11: "Empty `columns: []` is reported as a `--columns` problem." """
    schema = _write(tmp_path / "s.yaml", "columns: []\n")
    data = _write(tmp_path / "d.csv", "x\n1\n")
    proc = run("fit", data, "--schema", schema, "--epsilon", "1", "-o", tmp_path / "m")
    user_error(proc, "A schema's 'columns' must be a list of 1 to 64 columns. Got 0 columns")
    assert "--columns" not in proc.err
