"""Messy real files (issue 50, item 8): "Each of these should fail with one clear line naming the
file and line, exit code 2, and no traceback, or be skipped under `--on-bad skip`": a truncated
`.gz`, a quoted CSV field holding a newline, a very long line, a duplicate header name, and `NA`
as R writes missing values."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import pyarrow as pa
import pytest
import zstandard
from cli_run import run, user_error

from sketchsyn.domains import Schema
from sketchsyn.errors import InputError
from sketchsyn.io.readers import CSVReader
from sketchsyn.io.tables_reader import open_table_reader

SCHEMA = {
    "columns": [
        {"name": "a", "kind": "integer", "low": 0, "high": 99, "policy": "drop"},
        {"name": "b", "kind": "categorical", "categories": ["x", "y"], "policy": "other"},
    ]
}
_RNG = random.Random(5)  # rows that do not compress to nothing: the cut falls mid-stream
ROWS = "a,b\n" + "".join(f"{_RNG.randrange(100)},{_RNG.choice('xy')}\n" for _ in range(100_000))
LONG = 3 << 20  # longer than pyarrow's internal blocks (1 MiB, 256 KiB)


@pytest.fixture(scope="module")
def messy(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("messy")
    packed = gzip.compress(ROWS.encode())
    zst = zstandard.ZstdCompressor().compress(ROWS.encode())
    files = {
        "trunc.csv.gz": packed[: len(packed) // 2],
        "trunc.csv.zst": zst[: len(zst) // 2],
        "quoted.csv": b'a,b\n1,x\n2,"y\nz"\n3,x\n',
        "long.csv": b"a,b\n1,x\n2," + b"y" * LONG + b"\n3,x\n",
        "longbad.csv": b"a,b\n1,x\n" + b"z" * LONG + b",y\n3,x\n",
        "dup.csv": b"a,b,a\n1,x,5\n2,y,6\n",
        "na.csv": b'a,b\n1,x\nNA,y\n3,NA\n4,"NA"\n',
    }
    for name, data in files.items():
        (tmp / name).write_bytes(data)
    schema = tmp / "s.json"
    Schema.from_dict(SCHEMA).dump(schema)
    return {name: tmp / name for name in files} | {"schema": schema, "dir": tmp}


def _read(path: Path, on_bad: str = "raise") -> tuple[pa.Table, object]:
    reader = open_table_reader(str(path), Schema.from_dict(SCHEMA), on_bad=on_bad)
    return pa.concat_tables(list(reader)), reader


def _complete_lines(path: Path, opener) -> int:
    """Data lines a decompressor gives before the damage (the last one, cut, not counted)."""
    text = b""
    with opener(path) as fh:
        try:
            while piece := fh.read1(1 << 14):
                text += piece
        except (EOFError, zstandard.ZstdError):
            pass
    return text.count(b"\n") - 1


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("trunc.csv.gz", "the gzip data ends early or is damaged"),
        (
            "quoted.csv",
            "line 3: a quoted field holds a line break (the record runs over lines 3 to 4)",
        ),
        ("longbad.csv", "line 3: column 'a'"),
        ("dup.csv", "line 1: the header names column 'a' 2 times (fields 1, 3)"),
    ],
)
def test_a_messy_file_fails_with_one_line_naming_file_and_line(messy, name, needle) -> None:
    proc = run("fit", messy[name], "--schema", messy["schema"], "--epsilon", "1", "-o",
               messy["dir"] / "m.model", "--depth", "6")  # fmt: skip
    user_error(proc, f"{messy[name]}", needle)
    assert len(proc.err.strip().splitlines()) <= 2, proc.err  # the plan's line and the error


def test_a_truncated_compressed_file_names_the_cut_line_and_is_skipped(messy) -> None:
    for name, opener in (("trunc.csv.gz", gzip.open), ("trunc.csv.zst", _zstd_open)):
        kept = _complete_lines(messy[name], opener)
        with pytest.raises(InputError, match=rf"line {kept + 2}: the \w+ data ends early"):
            _read(messy[name])
        table, reader = _read(messy[name], "skip")
        assert table.num_rows == kept and reader.n_bad == 1 and reader.bad_lines == [kept + 2]
        numeric = CSVReader(str(messy[name]), ["a"], on_bad="skip")
        assert sum(len(b) for b in numeric) == kept and numeric.bad_lines == [kept + 2]


def _zstd_open(path: Path):
    return zstandard.ZstdDecompressor().stream_reader(open(path, "rb"), read_across_frames=True)


def test_a_quoted_line_break_is_a_bad_record_on_the_table_path(messy) -> None:
    table, reader = _read(messy["quoted.csv"], "skip")
    assert table.column("a").to_pylist() == [1.0, 3.0] and reader.bad_lines == [3]


def test_a_line_longer_than_pyarrows_blocks_is_read_or_named(messy) -> None:
    """A 3 MiB value is a value like any other: read (here it becomes 'other'), or, not a
    number, a bad line with its number, skipped under on_bad='skip'; on both paths."""
    table, _ = _read(messy["long.csv"])
    assert table.column("a").to_pylist() == [1.0, 2.0, 3.0]
    assert len(table.column("b")[1].as_py()) == LONG
    with pytest.raises(InputError, match="longbad.csv line 3: column 'a': not double"):
        _read(messy["longbad.csv"])
    table, reader = _read(messy["longbad.csv"], "skip")
    assert table.column("a").to_pylist() == [1.0, 3.0] and reader.bad_lines == [3]
    numeric = CSVReader(str(messy["long.csv"]), ["a"])
    assert [r for batch in numeric for r in batch.ravel().tolist()] == [1.0, 2.0, 3.0]
    bad = CSVReader(str(messy["long.csv"]), ["a", "b"], on_bad="skip")
    assert [r[0] for batch in bad for r in batch.tolist()] == [] and bad.n_bad == 3


def test_a_duplicate_header_name_is_refused_by_the_api_too(messy) -> None:
    with pytest.raises(InputError, match="names column 'a' 2 times"):
        _read(messy["dup.csv"])
    with pytest.raises(InputError, match="names column 'a' 2 times"):
        CSVReader(str(messy["dup.csv"]), ["a", "b"])
    only_b = Schema.from_dict({"columns": [SCHEMA["columns"][1]]})
    read = open_table_reader(str(messy["dup.csv"]), only_b)  # 'a' not asked for: no harm
    assert pa.concat_tables(list(read)).column("b").to_pylist() == ["x", "y"]


def test_na_as_r_writes_it_is_a_missing_value(messy) -> None:
    """An unquoted NA is missing (the column's policy decides); a quoted "NA" is text."""
    table, reader = _read(messy["na.csv"])
    assert reader.n_bad == 0
    assert table.column("a").to_pylist() == [1.0, None, 3.0, 4.0]
    assert table.column("b").to_pylist() == ["x", "y", None, "NA"]
    proc = run("fit", messy["na.csv"], "--schema", messy["schema"], "--epsilon", "1", "-o",
               messy["dir"] / "na.model", "--depth", "6")  # fmt: skip
    assert proc.returncode == 0, proc.err
    assert "a:dropped 1" in proc.err and "b:other 2" in proc.err, proc.err
