"""The CSV reader's compiled fast path (:mod:`sketchsyn.kernels._text`) gives pyarrow's doubles
bit for bit on the blocks it takes, and leaves every other block to pyarrow's reader."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sketchsyn import kernels
from sketchsyn.io.readers import CSVReader

pa = pytest.importorskip("pyarrow")
pacsv = pytest.importorskip("pyarrow.csv")
needs_ext = pytest.mark.skipif(not kernels.enabled(), reason=kernels.why())


def _arrow(buf: bytes, ncols: int, idx: list[int]) -> np.ndarray:
    names = [f"c{i}" for i in range(ncols)]
    keep = [names[i] for i in idx]
    table = pacsv.read_csv(
        pa.py_buffer(buf),
        pacsv.ReadOptions(column_names=names),
        convert_options=pacsv.ConvertOptions(
            include_columns=keep, column_types=dict.fromkeys(keep, pa.float64())
        ),
    )
    return np.column_stack([table[k].to_numpy() for k in keep])


_FORMATS = ["{:.6f}", "{!r}", "{:.3e}", "{:.15g}", "{:.17g}", "{:.0f}", "{:E}", "{:.2f}"]


@needs_ext
@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(
        st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=1, max_size=40
    ),
    form=st.sampled_from(_FORMATS),
    ncols=st.integers(1, 4),
    data=st.data(),
    newline=st.sampled_from(["\n", "\r\n"]),
    last=st.booleans(),
)
def test_taken_blocks_give_pyarrows_doubles(values, form, ncols, data, newline, last):
    idx = data.draw(st.permutations(range(ncols)))[: data.draw(st.integers(1, ncols))]
    lines = [
        ",".join(form.format(v * (c + 1)) if c in idx else "x y" for c in range(ncols))
        for v in values
    ]
    buf = (newline.join(lines) + (newline if last else "")).encode()
    got = kernels.text.parse_csv(buf, ncols, idx, ",")
    if got is None:
        return  # not a plain number here: pyarrow's reader takes the block
    ref = _arrow(buf, ncols, idx)
    assert got.shape == ref.shape
    assert np.array_equal(got.view(np.int64), ref.view(np.int64))


@needs_ext
def test_plain_fixed_decimals_are_taken():
    rng = np.random.default_rng(0)
    X = rng.normal([-73.9, 40.7], 0.05, (1000, 2))
    buf = "".join(f"{a:.6f},{i % 7}.25,{b:.6f}\n" for i, (a, b) in enumerate(X)).encode()
    got = kernels.text.parse_csv(buf, 3, [0, 2], ",")
    assert got is not None and got.strides[0] == 8  # each column contiguous
    assert np.array_equal(got, _arrow(buf, 3, [0, 2]))


@needs_ext
@pytest.mark.parametrize(
    "token",
    [b"-0.0", b"-0", b"0e5", b"-0e-30", b"1e-22", b"9007199254740992", b"1E22", b"0", b"-0.000001",
     b"2.5e+3", b"0.3000000000000000", b"1234567890123456e-20"],
)  # fmt: skip
def test_edge_numbers_give_pyarrows_double(token):
    got = kernels.text.parse_csv(token + b"\n", 1, [0], ",")
    assert got is not None
    assert np.array_equal(got.view(np.int64), _arrow(token + b"\n", 1, [0]).view(np.int64))


@needs_ext
@pytest.mark.parametrize(
    "block",
    [
        b'1,"2"\n',  # a quote: pyarrow's quoting rules
        b"1,2\n\n3,4\n",  # a blank line
        b"1,2\n3\n",  # a short line
        b"1,2,3\n",  # a long line
        b"1,2\r3,4\n",  # a carriage return that is not a line end
        b"1,2\n3,\xc3\xa94\n",  # not ASCII
        b"01,2\n",  # a leading zero
        b"+1,2\n",  # a plus sign
        b"1.,2\n",  # a point without digits after it
        b".5,2\n",  # ... or before it
        b"1,nan\n",  # not finite
        b"1,inf\n",
        b"1, 2\n",  # a space
        b"12345678901234567890,1\n",  # 20 significant digits
        b"9007199254740993,1\n",  # a mantissa past 2**53
        b"1e23,1\n",  # an exponent past 22
        b"1,2x\n",  # a number followed by another character
        b"1,\n",  # an empty field
        b"1,NA\n",
    ],
)
def test_other_blocks_are_left_to_pyarrow(block):
    assert kernels.text.parse_csv(block, 2, [0, 1], ",") is None


@needs_ext
def test_a_block_with_more_lines_than_its_start_suggests():
    """The room for the lines is guessed from the block's first 64 KiB: long lines there, then
    short ones, make the parser count the lines and start again."""
    long = "".join(f"{i}.5,{'x' * 200}\n" for i in range(400))
    short = "".join(f"{i},y\n" for i in range(50_000))
    buf = (long + short).encode()
    got = kernels.text.parse_csv(buf, 2, [0], ",")
    assert got is not None and got.shape == (50_400, 1)
    assert np.array_equal(got, _arrow(buf, 2, [0]))


@needs_ext
def test_wrong_calls_are_refused():
    t = kernels.text
    with pytest.raises(ValueError, match="delimiter"):
        t.parse_csv(b"1\n", 1, [0], ",,")
    with pytest.raises(ValueError, match="idx"):
        t.parse_csv(b"1\n", 1, [1], ",")
    with pytest.raises(ValueError, match="twice"):
        t.parse_csv(b"1,2\n", 2, [0, 0], ",")
    with pytest.raises(ValueError, match="at least one"):
        t.parse_csv(b"1\n", 1, [], ",")
    with pytest.raises(TypeError):
        t.parse_csv(None, 1, [0], ",")
    assert t.parse_csv(b"1.5\n", 1, [0], ".") is None  # a delimiter that numbers hold
    assert t.parse_csv(b"", 1, [0], ",").shape == (0, 1)


def _read(data: bytes, **kw) -> tuple[list, list, int, list]:
    reader = CSVReader(io.BytesIO(data), ["lat", "lon"], batch_size=700, **kw)
    batches = [b.copy() for b in reader]
    return batches, reader.lines.tolist(), reader.n_bad, reader.bad_lines


@pytest.mark.parametrize("on_bad", ["raise", "skip"])
def test_the_reader_gives_the_same_batches_with_and_without_it(on_bad):
    rng = np.random.default_rng(1)
    rows = [f"{a:.5f},{i},{b:.5f}" for i, (a, b) in enumerate(rng.random((3000, 2)))]
    if on_bad == "skip":  # breaks in a few blocks: those go to pyarrow, the rest not
        rows[10], rows[1500] = "0.5,x,oops", '"0.25",1,0.5'
        rows.insert(2000, "")
    data = ("lat,n,lon\n" + "\n".join(rows) + "\n").encode()
    fast = _read(data, on_bad=on_bad)
    with kernels.numpy_only():
        ref = _read(data, on_bad=on_bad)
    assert len(fast[0]) == len(ref[0]) and fast[1:] == ref[1:]
    for a, b in zip(fast[0], ref[0], strict=True):
        assert np.array_equal(a, b)
    if on_bad == "skip":
        assert fast[2] == 1 and fast[3] == [12]


_CLEAN = st.tuples(
    st.floats(-1e6, 1e6, allow_nan=False), st.floats(-1e6, 1e6, allow_nan=False)
).map(lambda v: f"{v[0]:.6f},x,{v[1]:.3f}")
_ODD = st.sampled_from(
    [
        "1.5,x,2",
        "1e3,x,-0",
        "007,x,1",  # a leading zero: pyarrow's path
        "+1,x,2",
        "1,x,NA",
        "1,x,",  # an empty field
        ",x,1",
        "",  # a blank line
        '"1.5",x,2',  # quoted
        "1,x",  # short
        "1,x,2,3",  # long
        "1,\u00e9,2",  # not ASCII in a field not read
        "1,x,2\r",  # CRLF
        "nan,x,1",
        "1,x,0.30000000000000004",  # a mantissa past 2**53: pyarrow's path
    ]
)


@st.composite
def _messy(draw: st.DrawFn) -> list[str]:
    """Clean lines with a few odd ones among them (so that most blocks are clean)."""
    lines = draw(st.lists(_CLEAN, min_size=1, max_size=300))
    for _ in range(draw(st.integers(0, 6))):
        lines.insert(draw(st.integers(0, len(lines))), draw(_ODD))
    return lines


@needs_ext
@settings(max_examples=80, deadline=None)
@given(lines=_messy(), batch=st.integers(1, 60))
def test_messy_files_read_the_same_with_and_without_it(lines, batch):
    data = ("lat,n,lon\n" + "\n".join(lines) + "\n").encode()

    def read() -> tuple:
        reader = CSVReader(io.BytesIO(data), ["lat", "lon"], batch_size=batch, on_bad="skip")
        rows = [(b.copy(), reader.lines.tolist()) for b in reader]
        return rows, reader.n_bad, reader.bad_lines, reader.n_rows

    fast = read()
    with kernels.numpy_only():
        ref = read()
    assert fast[1:] == ref[1:]
    assert len(fast[0]) == len(ref[0])
    for (a, la), (b, lb) in zip(fast[0], ref[0], strict=True):
        assert la == lb and np.array_equal(a.view(np.int64), b.view(np.int64))


@needs_ext
def test_numpy_only_on_the_reading_thread_holds_for_the_parsing_thread(monkeypatch):
    calls: list[int] = []
    real = kernels.text.parse_csv

    def counted(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(kernels.text, "parse_csv", counted)
    data = b"x,y\n" + b"".join(b"%d.5,%d\n" % (i, i) for i in range(5000))
    with kernels.numpy_only():
        reader = CSVReader(io.BytesIO(data), ["x", "y"], batch_size=1000, threads=True)
        assert sum(b.shape[0] for b in reader) == 5000
    assert calls == []  # the reader thread parsed with pyarrow, as its caller asked
    reader = CSVReader(io.BytesIO(data), ["x", "y"], batch_size=1000, threads=True)
    assert sum(b.shape[0] for b in reader) == 5000 and calls
