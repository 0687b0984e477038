"""Readers: formats, line numbers of bad lines, skip counts, follow, memory bounded by a batch."""

from __future__ import annotations

import csv
import gzip
import io
import threading
import time
import tracemalloc

import numpy as np
import pytest

from sketchsyn.errors import InputError, ParameterError
from sketchsyn.io import csvarrow
from sketchsyn.io.readers import (
    AccessLogReader,
    CSVReader,
    JSONLinesReader,
    follow,
    format_of,
    open_reader,
    pandas_chunks,
)


def _rows(reader) -> np.ndarray:
    batches = list(reader)
    if not batches:
        return np.zeros((0, 0))
    return np.concatenate(batches)


def _write_csv(path, X: np.ndarray, names=("x", "y", "label")) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(names)
        for i, row in enumerate(X.tolist()):
            w.writerow([repr(v) for v in row] + [f"r{i}"])


# ----------------------------------------------------------------------------------- CSV
def test_csv_columns_by_name_in_the_requested_order_across_batches(tmp_path):
    X = np.random.default_rng(0).random((1001, 2))
    path = tmp_path / "d.csv"
    _write_csv(path, X)
    reader = CSVReader(path, ["y", "x"], batch_size=100)
    batches = list(reader)
    assert all(b.shape[0] <= 100 for b in batches) and len(batches) >= 11
    np.testing.assert_array_equal(np.concatenate(batches), X[:, ::-1])
    assert reader.n_rows == 1001 and reader.n_bad == 0
    assert reader.lines.tolist()[-1] == 1002  # header is line 1


def test_csv_fast_and_slow_paths_agree_on_quoted_fields_and_crlf():
    text = 'a,b,c\r\n1.5,"x, y",2\r\n\r\n3,"q",4e-3\r\n'
    reader = CSVReader(io.BytesIO(text.encode()), ["c", "a"])
    assert _rows(reader).tolist() == [[2.0, 1.5], [0.004, 3.0]]
    assert reader.lines.tolist() == [2, 4]
    plain = "a,b,c\r\n1.5,x,2\r\n\r\n3,q,4e-3\r\n"
    assert _rows(CSVReader(io.BytesIO(plain.encode()), ["c", "a"])).tolist() == [
        [2.0, 1.5],
        [0.004, 3.0],
    ]


def test_csv_pandas_block_path_matches_the_csv_module(tmp_path):
    # More than 1 MiB per batch: the pandas parser; compare with Python's csv + float.
    X = np.random.default_rng(1).normal(size=(40_000, 2)) * 1e3
    path = tmp_path / "big.csv"
    _write_csv(path, X)
    got = _rows(CSVReader(path, ["x", "y"], batch_size=40_000))
    np.testing.assert_array_equal(got, X)
    # Bad lines inside a pandas-sized block are still found and numbered.
    lines = path.read_text().splitlines()
    for bad, why in (
        ("1,2,3,4", "has 4 fields"),
        ("1,,a", "column 'y' = ''"),
        ("1,2,3,4\n5,6", "has 4 fields"),  # the total count of delimiters is right
    ):
        broken = tmp_path / "broken.csv"
        broken.write_text("\n".join([*lines[:30_000], bad, *lines[30_000:]]) + "\n")
        with pytest.raises(InputError, match=f"line 30001: {why}"):
            _rows(CSVReader(broken, ["x", "y"], batch_size=40_000))


def test_csv_gzip_by_extension_and_tsv(tmp_path):
    path = tmp_path / "d.csv.gz"
    with gzip.open(path, "wt") as fh:
        fh.write("x,y\n1,2\n3,4\n")
    assert _rows(open_reader(str(path), ["x", "y"])).tolist() == [[1, 2], [3, 4]]
    tsv = io.BytesIO(b"x\ty\n1\t2\n")
    assert _rows(CSVReader(tsv, ["y"], delimiter="\t")).tolist() == [[2.0]]


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("1,2,3,4", "has 4 fields, the header has 3"),
        ("1,2", "has 2 fields, the header has 3"),
        ("1,abc,z", "column 'y' = 'abc' is not a finite number"),
        ("1,nan,z", "column 'y' = 'nan' is not a finite number"),
        ("inf,1,z", "column 'x' = 'inf' is not a finite number"),
        ("1,,z", "column 'y' = '' is not a finite number"),
    ],
)
def test_csv_bad_line_is_refused_with_its_line_number(line, why):
    text = f"x,y,label\n1,2,a\n\n3,4,b\n{line}\n5,6,c\n"
    with pytest.raises(InputError, match=rf"line 5: {why}"):
        _rows(CSVReader(io.BytesIO(text.encode()), ["x", "y"]))


def test_csv_lines_with_one_field_too_many_and_one_too_few_are_both_bad():
    text = b"x,y,label\n1,2,a\n3,4,b,extra\n5,6\n7,8,c\n"
    with pytest.raises(InputError, match="line 3: has 4 fields"):
        _rows(CSVReader(io.BytesIO(text), ["x", "y"]))
    reader = CSVReader(io.BytesIO(text), ["x", "y"], on_bad="skip")
    assert _rows(reader).tolist() == [[1, 2], [7, 8]] and reader.bad_lines == [3, 4]


def test_csv_bad_lines_counted_and_skipped_never_silently():
    good = [f"{i},{i},a" for i in range(30)]
    lines = good[:10] + ["oops"] + good[10:20] + ["1,2"] + good[20:]
    text = "x,y,label\n" + "\n".join(lines) + "\n"
    reader = CSVReader(io.BytesIO(text.encode()), ["x", "y"], batch_size=7, on_bad="skip")
    got = _rows(reader)
    assert got[:, 0].tolist() == list(range(30))
    assert reader.n_bad == 2 and reader.bad_lines == [12, 23]
    assert reader.n_rows == 30


def test_csv_refuses_unknown_column_and_empty_input():
    with pytest.raises(InputError, match=r"column 'z' is not in the header.*\['x', 'y'\]"):
        CSVReader(io.BytesIO(b"x,y\n1,2\n"), ["x", "z"])
    with pytest.raises(InputError, match="empty"):
        CSVReader(io.BytesIO(b"\n\n"), ["x"])
    with pytest.raises(InputError, match="cannot open"):
        CSVReader("/nonexistent/file.csv", ["x"])
    with pytest.raises(ParameterError, match="on_bad"):
        CSVReader(io.BytesIO(b"x\n1\n"), ["x"], on_bad="ignore")


def test_csv_memory_is_bounded_by_one_batch(tmp_path):
    X = np.random.default_rng(2).random((60_000, 2))
    small, big = tmp_path / "s.csv", tmp_path / "b.csv"
    _write_csv(small, X[:15_000])
    _write_csv(big, X)

    def peak(path) -> int:
        tracemalloc.start()
        n = 0
        for batch in CSVReader(path, ["x", "y"], batch_size=1000):
            n += batch.shape[0]
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return top

    p_small, p_big = peak(small), peak(big)
    size_big = big.stat().st_size
    # One batch is ~1000 lines of ~45 bytes plus a (1000, 2) array: far below the file.
    assert p_big < size_big / 5, (p_big, size_big)
    # Four times the rows, about the same peak (not proportional to the input).
    assert p_big < 1.5 * p_small + 200_000, (p_small, p_big)


# -------------------------------------------------------------------------------- JSON lines
def test_jsonl_reads_keys_and_names_bad_lines():
    lines = ['{"a": 1, "b": 2}', "", '{"a": 3.5, "b": -1, "c": "x"}']
    reader = JSONLinesReader(lines, ["b", "a"])
    assert _rows(reader).tolist() == [[2.0, 1.0], [-1.0, 3.5]]
    assert reader.lines.tolist() == [1, 3]
    for bad, why in [
        ("{not json", "is not valid JSON"),
        ('{"a": 1}', "has no key 'b'"),
        ('{"a": 1, "b": "2"}', "key 'b' = '2' is not a finite number"),
        ('{"a": true, "b": 2}', "key 'a' = True is not a finite number"),
        ("[1, 2]", "is not a JSON object"),
    ]:
        with pytest.raises(InputError, match=rf"line 2: {why}"):
            _rows(JSONLinesReader(['{"a": 0, "b": 0}', bad], ["a", "b"]))
    skip = JSONLinesReader(
        ['{"a": 0, "b": 0}', "{bad", '{"a": 1, "b": 1}'], ["a", "b"], on_bad="skip"
    )
    assert _rows(skip).tolist() == [[0, 0], [1, 1]] and skip.bad_lines == [2]


# ------------------------------------------------------------------------------ access logs
LOG = [
    '10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.0" 200 2326',
    '203.0.113.9 - bob [10/Oct/2000:13:55:37 -0700] "POST /x HTTP/1.1" 201 12 "-" "curl"',
    '2001:db8::1 - - [10/Oct/2000:13:55:38 -0700] "GET / HTTP/1.0" 200 1',
    '256.1.1.1 - - [10/Oct/2000:13:55:39 -0700] "GET / HTTP/1.0" 200 1',
]


def test_access_log_reader_gives_ipv4_keys_for_bitdomain():
    from sketchsyn import BitDomain

    reader = AccessLogReader(LOG[:2], batch_size=1)
    keys = np.concatenate(list(reader))
    assert keys.dtype == np.uint64
    assert keys.tolist() == [(10 << 24) + 1, (203 << 24) + (113 << 8) + 9]
    assert BitDomain.ipv4().encode(keys, depth=8).tolist() == [10, 203]
    # An IPv6 client is not a malformed line: skipped and counted whatever on_bad says.
    with pytest.raises(InputError, match=r"line 4: first field '256.1.1.1' is not an IPv4"):
        list(AccessLogReader(LOG))
    skip = AccessLogReader(LOG, on_bad="skip")
    assert len(np.concatenate(list(skip))) == 2 and skip.bad_lines == [4]
    assert skip.n_ipv6 == 1 and skip.n_bad == 1


def test_open_reader_formats():
    assert format_of("a.JSONL.gz") == "jsonl" and format_of("x.txt") is None
    with pytest.raises(ParameterError, match="fmt"):
        open_reader(io.BytesIO(b""), ["x"], fmt="xml")
    with pytest.raises(ParameterError, match="columns"):
        open_reader(io.BytesIO(b""), None, fmt="csv")


def test_pandas_chunks_numeric_batches_and_bad_values():
    text = "a,b\n1,2\n3,x\n5,6\n"
    with pytest.raises(InputError, match="data row 2"):
        list(pandas_chunks(io.StringIO(text), ["a", "b"]))
    stats: dict = {}
    got = np.concatenate(list(pandas_chunks(io.StringIO(text), ["b"], on_bad="skip", stats=stats)))
    assert got.tolist() == [[2.0], [6.0]] and stats["n_bad"] == 1


# ----------------------------------------------------------------------------------- follow
def test_follow_reads_a_growing_file_until_the_stop_condition(tmp_path):
    path = tmp_path / "access.log"
    path.write_text(LOG[0] + "\n")
    done = threading.Event()

    def writer() -> None:
        with open(path, "a") as fh:
            for i in range(5):
                time.sleep(0.02)
                fh.write(f"10.0.0.{i + 2} - - x\n")
                fh.flush()
            fh.write("10.0.0.")  # a line still being written: held back until complete
            fh.flush()
            time.sleep(0.05)
            fh.write("9 - - x\n")
            fh.flush()
        done.set()

    t = threading.Thread(target=writer)
    t.start()
    reader = AccessLogReader(follow(path, stop=done.is_set, poll_interval=0.005), batch_size=1000)
    batches = list(reader)
    t.join()
    keys = np.concatenate(batches)
    assert (keys & 255).tolist() == [1, 2, 3, 4, 5, 6, 9]
    # Caught-up markers flush partial batches: more than one batch for a 1000-line batch size.
    assert len(batches) > 1 and reader.n_rows == 7


def test_follow_stops_after_idle_timeout_and_from_end(tmp_path):
    path = tmp_path / "f.csv"
    path.write_text("x\n1\n2\n")
    t0 = time.monotonic()
    got = [line for line in follow(path, idle_timeout=0.05, poll_interval=0.01) if line]
    assert got == [b"x\n", b"1\n", b"2\n"] and time.monotonic() - t0 < 2
    tail = [line for line in follow(path, idle_timeout=0.0, from_start=False) if line]
    assert tail == []


# ------------------------------------------------------------- pyarrow path, positions, magic
def test_pyarrow_and_numpy_engines_agree_on_bad_lines_and_numbers():
    pytest.importorskip("pyarrow")
    lines = [f"{i}.5,{i},r{i}" for i in range(3000)]
    for at, bad in ((10, "1,2"), (500, "1,x,z"), (501, ""), (900, "nan,1,z"), (2999, "1,,z")):
        lines[at] = bad
    lines[1500] = '"7.5","8",q'  # quoted fields are fine
    text = ("x,y,label\n" + "\n".join(lines) + "\n").encode()
    got = {}
    for engine in ("pyarrow", "numpy"):
        reader = CSVReader(
            io.BytesIO(text), ["y", "x"], on_bad="skip", engine=engine, batch_size=700
        )
        rows = _rows(reader)
        numbers = []
        reader = CSVReader(
            io.BytesIO(text), ["y", "x"], on_bad="skip", engine=engine, batch_size=700
        )
        for _ in reader:
            numbers.extend(reader.lines.tolist())
        got[engine] = (rows.tolist(), numbers, reader.n_bad, reader.bad_lines, reader.position.rows)
    assert got["pyarrow"] == got["numpy"]
    assert got["pyarrow"][2] == 4 and got["pyarrow"][3] == [12, 502, 902, 3001]
    assert got["pyarrow"][4] == 3000
    with pytest.raises(InputError, match="line 12: has 2 fields, the header has 3"):
        _rows(CSVReader(io.BytesIO(text), ["y", "x"], engine="pyarrow"))
    del lines[10]
    text = ("x,y,label\n" + "\n".join(lines) + "\n").encode()
    with pytest.raises(InputError, match="line 501: column 'y' = 'x' is not a finite number"):
        _rows(CSVReader(io.BytesIO(text), ["y", "x"], engine="pyarrow"))


def test_a_bad_value_costs_one_small_block_not_a_reparse_of_the_batch(monkeypatch):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.csv as pacsv

    parsed = []
    real = pacsv.open_csv

    def counting(*args, **kwargs):
        for batch in real(*args, **kwargs):
            parsed.append(batch.num_rows)
            yield batch

    monkeypatch.setattr(pacsv, "open_csv", counting)
    n = 120_000
    lines = [f"{i % 1000}.25,{i % 77}" for i in range(n)]
    for at in range(5_000, n, 10_000):  # 12 bad values in one batch
        lines[at] = "1,oops"
    text = ("a,b\n" + "\n".join(lines) + "\n").encode()
    reader = CSVReader(io.BytesIO(text), ["a", "b"], on_bad="skip", batch_size=n, threads=False)
    assert _rows(reader).shape == (n - 12, 2) and reader.n_bad == 12
    # Rows parsed by pyarrow: the clean ones once, plus at most one internal block per bad line.
    assert sum(parsed) <= n + 12 * 2 * (1 << 18) // 10, (sum(parsed), pa.__version__)
    assert sum(parsed) < 2 * n


def test_skip_rows_and_resume_continue_after_exactly_the_rows_read(tmp_path):
    from sketchsyn.io.batchreader import Position, starts_with

    path = tmp_path / "d.csv"
    path.write_bytes(b"x\n" + b"".join(f"{i}\n".encode() for i in range(1000)) + b"\n")
    first = CSVReader(path, ["x"], batch_size=300, threads=False)
    it = iter(first)
    got = [next(it)]
    while first.position is None:
        got.append(next(it))
    pos = first.position
    first.close()
    seen = int(np.concatenate(got).size)
    assert pos.rows == seen and starts_with(path, pos)
    rest = CSVReader(path, ["x"], resume=pos)
    assert _rows(rest).ravel()[0] == seen and rest.position.rows == 1001
    skipped = CSVReader(io.BytesIO(path.read_bytes()), ["x"], skip_rows=pos.rows)
    assert _rows(skipped).ravel().tolist() == list(range(seen, 1000))
    with pytest.raises(InputError, match="does not begin with"):
        _rows(CSVReader(path, ["x"], resume=Position(pos.rows, pos.offset, "00" * 16)))
    grown = tmp_path / "g.csv"
    grown.write_bytes(path.read_bytes() + b"5\n")
    assert starts_with(grown, pos) and not starts_with(io.BytesIO(b"x\n"), pos)


def test_compression_by_magic_bytes_and_columnar_readers(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from sketchsyn.io.readers import ArrowReader, ParquetReader

    raw = b"x,y\n1,2\n3,4\n"
    assert _rows(CSVReader(io.BytesIO(gzip.compress(raw)), ["y"])).ravel().tolist() == [2, 4]
    zstd = pytest.importorskip("zstandard")
    data = zstd.ZstdCompressor().compress(raw)
    assert _rows(CSVReader(io.BytesIO(data), ["x"])).ravel().tolist() == [1, 3]
    table = pa.table({"a": pa.array([1, 2, None, 4], pa.int32()), "s": ["p", "q", "r", "t"]})
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=1)
    reader = ParquetReader(tmp_path / "t.parquet", ["a"], on_bad="skip", skip_rows=1)
    assert _rows(reader).ravel().tolist() == [2.0, 4.0] and reader.bad_lines == [3]
    assert reader.position.rows == 4 and reader.rows_in_file == 4  # the metadata's count
    again = ParquetReader(tmp_path / "t.parquet", ["a"], on_bad="skip", resume=reader.position)
    assert _rows(again).size == 0
    with pytest.raises(InputError, match="column 's' has type string"):
        ParquetReader(tmp_path / "t.parquet", ["s"])
    with pytest.raises(InputError, match="column 'z' is not in the Parquet file"):
        ParquetReader(tmp_path / "t.parquet", ["z"])
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    with pytest.raises(InputError, match="row 3: column 'a' is null"):
        _rows(ArrowReader(io.BytesIO(sink.getvalue()), ["a"]))


def test_columnar_readers_number_the_rows_of_each_batch(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from sketchsyn.io.readers import ParquetReader

    table = pa.table({"a": pa.array([0.5, 1.5, 2.5, None, 4.5, 5.5, 6.5])})
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=5)
    reader = ParquetReader(tmp_path / "t.parquet", ["a"], batch_size=3, on_bad="skip")
    seen = [(b.ravel().tolist(), reader.lines.tolist()) for b in reader]
    assert seen == [
        ([0.5, 1.5, 2.5], [1, 2, 3]),  # consecutive rows (numbered when asked)
        ([4.5, 5.5], [5, 6]),  # row 4 is null
        ([6.5], [7]),
    ]


class _Trickle:
    """A pipe-like stream: ``read`` only (no ``readinto``), a few bytes at a time."""

    def __init__(self, data: bytes, step: int) -> None:
        self._data, self._at, self._step = data, 0, step

    def read(self, size: int = -1) -> bytes:
        size = self._step if size is None or size < 0 else min(size, self._step)
        out = self._data[self._at : self._at + size]
        self._at += len(out)
        return out


def test_blocks_read_into_one_reused_buffer_give_the_same_rows_lines_and_positions(tmp_path):
    # Short lines, one line far longer than a block, a blank and bad lines, no final newline;
    # from a file, a BytesIO and a pipe-like stream with short reads and no readinto.
    rng = np.random.default_rng(5)
    lines = [f"{v:.6f},{w:.3f},r{i}" for i, (v, w) in enumerate(rng.random((5000, 2)).tolist())]
    lines[40] = "1.5,2.5," + "x" * 300_000
    lines[41], lines[977], lines[978] = "", "1,2", "3,oops,z"
    text = ("x,y,label\n" + "\n".join(lines)).encode()
    path = tmp_path / "d.csv"
    path.write_bytes(text)
    sources = (lambda: path, lambda: io.BytesIO(text), lambda: _Trickle(text, 4093))
    engines = ("pyarrow", "numpy") if csvarrow.available() else ("numpy",)
    results = []
    for source in sources:
        for engine in engines:
            reader = CSVReader(source(), ["y", "x"], batch_size=64, on_bad="skip", engine=engine)
            batches, numbers, positions = [], [], []
            for batch in reader:
                batches.append(batch)  # kept: later blocks must not overwrite them
                numbers.extend(reader.lines.tolist())
                if reader.position is not None:
                    positions.append(tuple(reader.position))
            results.append((np.concatenate(batches).tolist(), numbers, positions, reader.bad_lines))
    assert all(r == results[0] for r in results[1:])
    rows, numbers, positions, bad = results[0]
    good = [i for i, s in enumerate(lines) if s and i not in (977, 978)]
    assert rows == [[float(lines[i].split(",")[1]), float(lines[i].split(",")[0])] for i in good]
    assert numbers == [i + 2 for i in good] and bad == [979, 980]
    assert positions[-1][:2] == (5000, len(text))
    assert [p[0] for p in positions] == sorted({p[0] for p in positions})
