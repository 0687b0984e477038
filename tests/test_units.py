"""Privacy units: the contribution bounder, unit ids, the 2L bound and the unit-level summaries.

The statistical audits of the unit-level summaries are in tests/test_privacy_audit.py; the
command line's --privacy-unit in tests/test_cli_units.py.
"""

from __future__ import annotations

import math
import tracemalloc

import mmh3
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sketchsyn
from sketchsyn import Box, ContributionBounder, MarginalSynthesizer, PrivHP, Schema
from sketchsyn.errors import (
    IncompatibleError,
    InputError,
    ParameterError,
    SerializationError,
)
from sketchsyn.io.serial import MetaReader, header_of, pack, read
from sketchsyn.io.summary import registry
from sketchsyn.units import admit as admission
from sketchsyn.units import sizing
from sketchsyn.units.ids import unit_keys

SCHEMA = Schema(
    [
        {"name": "c", "kind": "categorical", "categories": ["a", "b", "c"]},
        {"name": "ok", "kind": "boolean"},
    ]
)


# ------------------------------------------------------------------ a row at a time
def one_at_a_time(fps, counts, buckets, fingerprints, L):
    """The bounder's rule applied row by row (the reference the vectorised admission equals)."""
    keep = []
    for b, g in zip(buckets.tolist(), fingerprints.tolist(), strict=True):
        held = [k for k in range(fps.shape[1]) if fps[b, k] == g and counts[b, k] > 0]
        if held:
            k = held[0]
            keep.append(bool(counts[b, k] < L))
            counts[b, k] = counts[b, k] + 1 if counts[b, k] < L else L + 1
            continue
        free = [k for k in range(fps.shape[1]) if counts[b, k] == 0]
        if free:
            fps[b, free[0]], counts[b, free[0]] = g, 1
        keep.append(bool(free))
    return np.array(keep, dtype=bool)


@settings(max_examples=200, deadline=None)
@given(
    buckets=st.integers(1, 4),
    slots=st.integers(1, 4),
    L=st.integers(1, 5),
    bits=st.integers(1, 3),
    chunk=st.sampled_from([1, 2, 3, 7, 1 << 20]),
    batches=st.lists(
        st.lists(st.tuples(st.integers(0, 3), st.integers(1, 7)), max_size=40), max_size=4
    ),
)
def test_admission_equals_row_by_row(buckets, slots, L, bits, chunk, batches):
    """First rows of a unit claim first: a batch decided at once (and in chunks) keeps the rows
    and leaves the table that one row at a time does."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(admission, "CHUNK", chunk)
        _admit_batches(buckets, slots, L, bits, batches)


def _admit_batches(buckets, slots, L, bits, batches):
    fps = np.zeros((buckets, slots), dtype=np.uint16)
    counts = np.zeros((buckets, slots), dtype=np.uint8)
    ref_fps, ref_counts = fps.copy(), counts.copy()
    occupancy = np.zeros(buckets, dtype=np.uint8)
    for batch in batches:
        b = np.array([x % buckets for x, _ in batch], dtype=np.int64)
        g = np.array([1 + (y % (2**bits - 1) if bits > 1 else 0) for _, y in batch], np.uint16)
        got = admission.admit(fps, counts, b, g, L, occupancy)
        want = one_at_a_time(ref_fps, ref_counts, b, g, L)
        assert got.tolist() == want.tolist()
        assert (fps == ref_fps).all() and (counts == ref_counts).all()
        assert (occupancy == np.count_nonzero(fps, axis=1)).all()


@settings(max_examples=100, deadline=None)
@given(
    ids=st.lists(st.integers(0, 12), min_size=1, max_size=60),
    split=st.integers(0, 60),
    rate=st.sampled_from([1.0, 0.5]),
    text=st.booleans(),
)
def test_bounder_batch_equals_items(ids, split, rate, text):
    """update_many of a batch, of two pieces of it, and update row by row agree (mask and
    table), with and without pre-sampling, for integer and text ids."""
    values = [f"unit-{i}" for i in ids] if text else ids

    def make():
        return ContributionBounder(2, 2, slots=2, fingerprint_bits=2, sample_rate=rate, rng=5)

    a, b, c = make(), make(), make()
    whole = a.update_many(values)
    rows = [b.update(v) for v in values]
    parts = np.concatenate([c.update_many(values[:split]), c.update_many(values[split:])])
    assert whole.tolist() == rows == parts.tolist()
    assert a == b == c
    assert a.diagnostics["rows_kept"] == int(whole.sum())


def test_vectorised_batch_equals_rows_at_scale():
    """300,000 rows of 10**5 Zipf units through the vectorised path (a chunk of 2**16 rows at a
    time) and in 1,000-row pieces: the same rows kept, the same table."""
    rng = np.random.default_rng(0)
    ids = rng.zipf(1.3, 300_000) % 100_000
    a = ContributionBounder.for_units(16, 100_000, memory_bytes=200_000, rng=1)
    b = ContributionBounder.for_units(16, 100_000, memory_bytes=200_000, rng=1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(admission, "CHUNK", 1 << 16)
        whole = a.update_many(ids)
    pieces = np.concatenate([b.update_many(ids[i : i + 1000]) for i in range(0, ids.size, 1000)])
    assert (whole == pieces).all() and a == b
    d = a.diagnostics
    assert d["rows_kept"] + d["rows_capped"] + d["rows_refused"] + d["rows_sampled_out"] == 300_000


# ------------------------------------------------------------------ unit ids
@settings(max_examples=200, deadline=None)
@given(
    texts=st.lists(st.text(max_size=40), min_size=1, max_size=20), seed=st.integers(0, 2**32 - 1)
)
def test_text_ids_hash_as_mmh3(texts, seed):
    """Text ids are MurmurHash3 x64_128 (first half) of their UTF-8 bytes, vectorised, whatever
    the container: a list, numpy strings, pyarrow, pandas."""
    texts = [t.rstrip("\x00") for t in texts if not any(0xD800 <= ord(ch) < 0xE000 for ch in t)]
    if not texts:
        return
    want = [mmh3.hash64(t.encode(), seed, signed=False)[0] for t in texts]
    for form in (texts, np.array(texts), pa.array(texts), pd.Series(texts)):
        assert unit_keys(form, seed).tolist() == want


def test_repeated_text_ids_are_hashed_once_each_the_same():
    """A long column that repeats its ids goes through Arrow's dictionary (each distinct id
    hashed once): the keys are the same."""
    ids = [f"N{i % 997}X" for i in range(20_000)]
    want = {t: mmh3.hash64(t.encode(), 9, signed=False)[0] for t in set(ids)}
    for form in (pa.array(ids), pd.Series(ids), np.array(ids)):
        assert unit_keys(form, 9).tolist() == [want[t] for t in ids]


def test_integer_ids_are_themselves():
    assert unit_keys(np.array([5, -1], dtype=np.int64)).tolist() == [5, 2**64 - 1]
    assert unit_keys(np.array([5], dtype=np.uint8)).tolist() == [5]
    assert unit_keys([5, 2**64 - 1]).tolist() == [5, 2**64 - 1]
    assert unit_keys(pd.Series([3.0, 4.0])).tolist() == [3, 4]
    cats = pd.Series(["x", "y", "x"], dtype="category")
    assert unit_keys(cats, 3).tolist() == unit_keys(["x", "y", "x"], 3).tolist()
    assert (
        unit_keys(pa.array(["x", "y"]).dictionary_encode(), 3).tolist()
        == unit_keys(["x", "y"], 3).tolist()
    )


@pytest.mark.parametrize(
    ("ids", "says"),
    [
        ([1, None], "units[1] is missing"),
        (np.array([1.0, np.nan]), "units[1] is missing"),
        (pa.array(["a", None]), "units[1] is missing"),
        (pd.Series(["a", None, "b"]), "units[1] is missing"),
        (np.array([True]), "is not a unit id"),
        (np.array([0.5]), "units[0] = 0.5 is not a unit id"),
        (["a", 3], "units[1] = 3 is not a unit id"),
        (np.ones((2, 2)), "one id a row"),
        ([2**64], "is not a unit id"),
    ],
)
def test_bad_ids_are_refused_naming_the_row(ids, says):
    with pytest.raises(InputError, match=re_escape(says)):
        unit_keys(ids)


def re_escape(text):
    import re

    return re.escape(text)


# ------------------------------------------------------------------ the bound
def _cells(summary):
    """The exact state of a raw summary, flat."""
    if isinstance(summary, MarginalSynthesizer):
        return summary._counts.copy()
    return np.concatenate([summary._tree, summary._bank.ravel()])


def _touched(summary):
    """Cells one row moves: one in each table, or one a counter level and j a sketch level."""
    if isinstance(summary, MarginalSynthesizer):
        return len(summary.pairs) + summary.domain.d
    return (
        summary.counter_depth + 1 + summary.sketch_depth * (summary.depth - summary.counter_depth)
    )


def _summary(kind, bounder):
    if kind == "marginal":
        return MarginalSynthesizer(
            SCHEMA, 1.0, bits=1, fine_bits=1, unit="user", max_rows=bounder.max_rows,
            bounder=bounder, rng=0,
        )  # fmt: skip
    return PrivHP(
        Box.unit(1), 1.0, k=2, width=4, sketch_depth=2, depth=4, counter_depth=1, raw=True,
        unit="user", max_rows=bounder.max_rows, bounder=bounder,
    )  # fmt: skip


def _feed(summary, rows):
    if not rows:
        return
    ids = np.array([u for u, _ in rows])
    if isinstance(summary, MarginalSynthesizer):
        cells = [("a", True), ("a", False), ("b", True), ("c", False), ("c", True)]
        table = {
            "c": [cells[x][0] for _, x in rows],
            "ok": [cells[x][1] for _, x in rows],
            "user": ids,
        }
        summary.update_many(table)
    else:
        summary.update_many(np.array([[0.1 + 0.2 * x] for _, x in rows]), units=ids)


@settings(max_examples=150, deadline=None)
@given(
    kind=st.sampled_from(["marginal", "privhp"]),
    buckets=st.integers(1, 2),
    slots=st.integers(1, 3),
    bits=st.integers(1, 2),
    L=st.integers(1, 4),
    key=st.integers(0, 3),
    others=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 4)), max_size=30),
    extra=st.integers(1, 8),
    cell=st.integers(0, 4),
    where=st.sampled_from(["first", "last", "interleaved"]),
    order=st.randoms(use_true_random=False),
    cut=st.integers(0, 40),
)  # fmt: skip
def test_one_unit_moves_at_most_2L_rows(
    kind, buckets, slots, bits, L, key, others, extra, cell, where, order, cut
):
    """Streams that differ by all rows of one unit (more than L of them, first, last or
    interleaved, in a table of 1-2 buckets and 1-2 bit fingerprints, so collisions and full
    buckets are forced) leave raw states at most 2L rows apart: L1 distance ≤ 2L times the
    cells a row moves. The stream goes in two batches, cut anywhere."""
    unit = [(100, cell)] * (L + extra)
    if where == "first":
        stream = unit + others
    elif where == "last":
        stream = others + unit
    else:
        stream = list(others)
        for row in unit:
            stream.insert(order.randint(0, len(stream)), row)

    def state(rows):
        bounder = ContributionBounder(L, buckets, slots=slots, fingerprint_bits=bits, rng=key)
        summary = _summary(kind, bounder)
        _feed(summary, rows[:cut])
        _feed(summary, rows[cut:])
        return _cells(summary), summary

    with_unit, summary = state(stream)
    without, _ = state([r for r in stream if r[0] != 100])
    moved = int(np.abs(with_unit - without).sum())
    assert moved <= 2 * L * _touched(summary), (moved, L, _touched(summary))


def test_the_2L_bound_is_reached():
    """A full bucket, the unit first: its L rows come in and the L rows of the unit it pushes
    out go (cells apart): exactly 2L rows in every table (so 2L is the bound, not less)."""
    L = 3
    others = [(1, 3)] * L  # cell (c, False): apart from the unit's (a, True) in every table

    def state(rows):
        summary = _summary("marginal", ContributionBounder(L, 1, slots=1, rng=0))
        _feed(summary, rows)
        return _cells(summary), summary

    with_unit, summary = state([(100, 0)] * (L + 5) + others)
    without, _ = state(others)
    assert int(np.abs(with_unit - without).sum()) == 2 * L * _touched(summary)


# ------------------------------------------------------------------ the summaries
def _frame(n=2_000, units=300, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "c": rng.choice(["a", "b", "c"], n),
            "ok": rng.random(n) < 0.5,
            "user": rng.choice([f"u{i}" for i in range(units)], n),
        }
    )


def test_noise_scales_grow_by_2L():
    event = MarginalSynthesizer(SCHEMA, 1.0, bits=1, fine_bits=1, rng=0)
    user = MarginalSynthesizer(
        SCHEMA, 1.0, bits=1, fine_bits=1, rng=0, unit="user", max_rows=5, expected_units=100
    )
    assert user._sensitivity == 10 and event._sensitivity == 1
    for kind in ("pair", "single", "select"):  # a table's release: one scale of each kind
        assert np.allclose(user.noise_scales[kind], 10 * event.noise_scales[kind])
    box_event = MarginalSynthesizer(Box.unit(2), 1.0, bits=1, fine_bits=1, rng=0)
    box_user = MarginalSynthesizer(
        Box.unit(2), 1.0, bits=1, fine_bits=1, rng=0, unit="user", max_rows=5, expected_units=100
    )
    for kind in ("pair", "single"):
        assert np.allclose(box_user.noise_scales[kind], 10 * box_event.noise_scales[kind])
    e = PrivHP(Box.unit(2), 1.0, k=4, width=16, depth=6, rng=0)
    u = PrivHP(Box.unit(2), 1.0, k=4, width=16, depth=6, rng=0, unit="d", max_rows=5,
               expected_units=100)  # fmt: skip
    r = PrivHP(Box.unit(2), 1.0, k=4, width=16, depth=6, rng=0, unit="d", max_rows=5,
               expected_units=100, neighbours="replace")  # fmt: skip
    assert np.allclose(u.noise_scales, 10 * e.noise_scales)
    assert np.allclose(r.noise_scales, 20 * e.noise_scales)
    assert [s.epsilon for s in u.sketches] == pytest.approx(list(u.sigmas[-len(u.sketches) :] / 10))


@pytest.mark.parametrize("cls", ["PrivHP", "MarginalSynthesizer"])
def test_the_statement_is_everywhere(cls):
    text = "user-level: all rows of one unit, at most 4 kept (unit 'user')"
    if cls == "PrivHP":
        s = PrivHP(SCHEMA, 1.0, k=4, width=16, depth=3, rng=0, unit="user", max_rows=4,
                   expected_units=300)  # fmt: skip
    else:
        s = MarginalSynthesizer(SCHEMA, 1.0, rng=0, unit="user", max_rows=4, expected_units=300)
        assert text in s.explain()
    assert s.privacy_unit == text
    s.update_many(_frame())
    blob = s.to_bytes()
    assert read(blob, cls).meta["privacy"] == text and header_of(blob).state == "trusted"
    params = s.release().params
    assert params["unit"] == "user" and params["max_rows"] == 4


def test_rows_of_a_unit_are_capped_and_counted():
    syn = MarginalSynthesizer(SCHEMA, 1.0, rng=0, unit="user", max_rows=2, expected_units=10**4)
    df = _frame()
    syn.update_many(df)
    assert syn.bounder.diagnostics["rows_refused"] == 0  # a roomy table: every unit has a slot
    per_unit = df.groupby("user").size().clip(upper=2).sum()
    assert syn.n_seen == per_unit == syn.bounder.diagnostics["rows_kept"]
    assert int(syn._counts[: syn._layout.pair_cells].sum()) == per_unit


def test_ids_beside_an_array_and_their_errors():
    php = PrivHP(Box.unit(2), 1.0, k=4, width=16, depth=4, raw=True, unit="dev", max_rows=1,
                 expected_units=10)  # fmt: skip
    X = np.full((6, 2), 0.5)
    php.update_many(X, units=[1, 1, 2, 2, 3, 3])
    assert php.n_seen == 3
    before = php.to_bytes()
    for bad, says in [
        ((X, None), "give the privacy unit's ids as units="),
        ((X, [1, 2]), "units has 2 ids for the 6 rows"),
        ((X, [1, 2, 3, 4, 5, None]), "units[5] is missing"),
    ]:
        with pytest.raises(InputError, match=re_escape(says)):
            php.update_many(bad[0], units=bad[1])
    bad_rows = X.copy()
    bad_rows[2, 0] = np.nan
    with pytest.raises(InputError):
        php.update_many(bad_rows, units=np.arange(6))
    assert php.to_bytes() == before  # refused batches leave the bounder and counts as they were
    with pytest.raises(ParameterError, match="'units' parameter"):
        PrivHP(Box.unit(2), 1.0, k=4, width=16, depth=4).update_many(X, units=np.arange(6))
    table = pd.DataFrame({"x": [0.1], "y": [0.2], "dev": [1]})
    with pytest.raises(InputError, match="give the ids once"):
        php.update_many(table, units=[1])


def test_domain_drops_do_not_take_a_units_rows():
    box = Box.unit(1, out_of_bounds="drop")
    php = PrivHP(box, 1.0, k=2, width=8, depth=3, raw=True, unit="u", max_rows=1,
                 expected_units=10)  # fmt: skip
    php.update_many(np.array([[2.0], [0.2], [0.3]]), units=[7, 7, 8])
    assert php.n_seen == 2 and php.n_dropped == 1  # unit 7's first in-bounds row is kept
    assert php.bounder.diagnostics["rows_seen"] == 2


def test_every_other_summary_refuses_a_unit():
    takes = {k for k, c in registry().items() if c.TAKES_UNIT}
    assert takes == {"PrivHP", "MarginalSynthesizer", "ContributionBounder"}
    for kind, cls in registry().items():
        if kind in takes:
            continue
        for name in ("unit", "max_rows"):
            with pytest.raises(ParameterError, match=f"The '{name}' parameter of {kind}"):
                cls(**{name: "client" if name == "unit" else 4})


def test_unit_arguments_are_checked():
    for kwargs, says in [
        ({"max_rows": 4}, "give unit='<column>' too"),
        ({"unit": "u"}, "needs 'max_rows'"),
        ({"unit": "u", "max_rows": 4}, "needs 'expected_units'"),
        ({"unit": "", "max_rows": 4, "expected_units": 9}, "non-empty str"),
        ({"unit": "u", "max_rows": 0, "expected_units": 9}, "'max_rows' parameter"),
        ({"unit": "u", "max_rows": 4, "bounder": ContributionBounder(3, 4)}, "must equal"),
    ]:
        with pytest.raises(ParameterError, match=re_escape(says)):
            PrivHP(Box.unit(1), 1.0, k=2, width=8, depth=3, **kwargs)
    used = ContributionBounder(3, 4)
    used.update_many([1])
    with pytest.raises(ParameterError, match="fresh"):
        MarginalSynthesizer(SCHEMA, 1.0, unit="u", max_rows=3, bounder=used)


def test_merge_drops_the_bounder_and_stops_taking_rows():
    def make(seed):
        return MarginalSynthesizer(
            SCHEMA, 1.0, bits=1, fine_bits=1, rng=seed, unit="user", max_rows=3,
            expected_units=10**4,
        )  # fmt: skip

    df = _frame()
    users = df["user"].str[1:].astype(int)
    a, b = make(1), make(2)
    a.update_many(df[users % 2 == 0])  # the data partitioned by unit
    b.update_many(df[users % 2 == 1])
    whole = make(3)
    whole.update_many(df)
    a.merge(b)
    assert a.bounder is None and (a._counts == whole._counts).all()
    assert a.nbytes < whole.nbytes
    with pytest.raises(ParameterError, match="no contribution bounder"):
        a.update_many(df)
    event = MarginalSynthesizer(SCHEMA, 1.0, bits=1, fine_bits=1, rng=4)
    with pytest.raises(IncompatibleError):
        event.merge(make(5))


def test_privhp_ships_its_private_part_and_flushes_at_the_user_level():
    raw = PrivHP(SCHEMA, 1.0, k=4, width=16, depth=3, raw=True, unit="user", max_rows=2,
                 expected_units=10**4, rng=0)  # fmt: skip
    raw.update_many(_frame(seed=1))
    hourly = raw.flush(rng=1)
    assert hourly.bounder is None and hourly.state_privacy == "private"
    assert header_of(hourly.to_bytes()).state == "private"
    assert raw.bounder.diagnostics["rows_seen"] == 2_000  # the slots stay: at most L in all
    raw.update_many(_frame(seed=1))
    c = _frame(seed=1).groupby("user").size()
    # The same rows again: a unit's rows past its first two (over both flushes) are dropped.
    assert raw.n_seen == int(np.minimum(2, 2 * c).sum() - np.minimum(2, c).sum())
    php = PrivHP(SCHEMA, 1.0, k=4, width=16, depth=3, unit="user", max_rows=2,
                 expected_units=300, rng=0)  # fmt: skip
    php.update_many(_frame())
    assert header_of(php.to_bytes()).state == "trusted"
    shipped = PrivHP.from_bytes(php.to_bytes(include_bounder=False))
    assert shipped.state_privacy == "private" and shipped.bounder is None
    assert shipped.unit == "user" and shipped.max_rows == 2
    with pytest.raises(ParameterError, match="no contribution bounder"):
        shipped.update_many(_frame())
    for method in (php.remove_many, php.consume):
        with pytest.raises(ParameterError, match="privacy unit|bounder"):
            method(_frame())


# ------------------------------------------------------------------ bytes
def _bounder_blob():
    b = ContributionBounder(3, 4, slots=2, rng=2)
    b.update_many(np.arange(10))
    return b.to_bytes()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_rows", 0),
        ("max_rows", "3"),
        ("buckets", 2**40),
        ("slots", 0),
        ("fingerprint_bits", 17),
        ("sample_rate", 1.5),
        ("sample_rate", True),
        ("frozen", 1),
        ("diagnostics", {"rows_seen": -1}),
    ],
)
def test_bounder_header_fields_are_checked(field, value):
    got = read(_bounder_blob(), "ContributionBounder")
    meta = dict(got.meta) | {field: value}
    blob = pack("ContributionBounder", 1, meta, got.arrays, state="trusted")
    with pytest.raises(SerializationError, match=field if field != "diagnostics" else "rows"):
        ContributionBounder.from_bytes(blob)


@pytest.mark.parametrize("damage", ["free-before-used", "twice", "count-without-fp", "over-cap"])
def test_bounder_tables_are_checked(damage):
    got = read(_bounder_blob(), "ContributionBounder")
    fps = got.arrays["fingerprints"].view("<u2").reshape(4, 2).copy()
    counts = got.arrays["counts"].copy()
    if damage == "free-before-used":
        fps[:, 0], counts[:, 0] = 0, 0
        fps[:, 1], counts[:, 1] = 5, 1
    elif damage == "twice":
        fps[0], counts[0] = 7, 1
    elif damage == "count-without-fp":
        fps[0, 1], counts[0, 1] = 0, 2
    else:
        counts[0, 0] = 5
    arrays = dict(got.arrays) | {"fingerprints": fps.view(np.uint8), "counts": counts}
    blob = pack("ContributionBounder", 1, got.meta, arrays, state="trusted")
    with pytest.raises(SerializationError):
        ContributionBounder.from_bytes(blob)


@pytest.mark.parametrize("cls", [PrivHP, MarginalSynthesizer])
def test_a_summarys_unit_fields_are_checked(cls):
    if cls is PrivHP:
        s = cls(SCHEMA, 1.0, k=4, width=16, depth=3, raw=True, unit="user", max_rows=4,
                expected_units=300)  # fmt: skip
    else:
        s = cls(SCHEMA, 1.0, bits=1, fine_bits=1, unit="user", max_rows=4, expected_units=300)
    got = read(s.to_bytes(), cls.__name__)
    for field, value in [("privacy", "event-level: one row added or removed"),
                         ("max_rows", 5), ("unit", 3)]:  # fmt: skip
        blob = pack(cls.__name__, got.version, got.meta | {field: value}, got.arrays,
                    state="trusted")  # fmt: skip
        with pytest.raises(SerializationError, match=f"{field}|privacy"):
            cls.from_bytes(blob)
    other = ContributionBounder(5, 4).to_bytes()
    arrays = got.arrays | {"bounder": np.frombuffer(other, dtype=np.uint8)}
    blob = pack(cls.__name__, got.version, got.meta, arrays, state="trusted")
    with pytest.raises(SerializationError, match="bounder"):
        cls.from_bytes(blob)


def test_the_key_comes_from_the_os_unless_seeded():
    assert not (ContributionBounder(2, 4)._key == ContributionBounder(2, 4)._key).all()
    assert (ContributionBounder(2, 4, rng=3)._key == ContributionBounder(2, 4, rng=3)._key).all()
    a = PrivHP(Box.unit(1), 1.0, k=2, width=8, depth=3, rng=1, unit="u", max_rows=2,
               expected_units=10)  # fmt: skip
    words = a._source.spawn(1)[0].uint64(2)  # the key is no part of the noise's own words
    assert not np.isin(a.bounder._key.view(np.uint64), words).any()


# ------------------------------------------------------------------ sizing, sampling, memory
def test_presampling_follows_the_public_rate():
    b = ContributionBounder.for_units(8, 200_000, memory_bytes=60_000, rng=0)
    assert b.nbytes <= 60_000 and 0 < b.sample_rate < 1
    assert math.isclose(b.sample_rate, b.capacity * sizing.LOAD / 200_000)
    kept = b.update_many(np.arange(200_000))
    share = 1 - b.diagnostics["rows_sampled_out"] / 200_000
    sd = math.sqrt(b.sample_rate * (1 - b.sample_rate) / 200_000)
    assert abs(share - b.sample_rate) < 6 * sd
    assert int(kept.sum()) <= b.capacity
    sampled_units = 200_000 - b.diagnostics["rows_sampled_out"]  # one row a unit here
    refused = 1 - b.units_admitted / sampled_units
    assert refused < 0.08  # about 5% (a Poisson(6) bucket of 8 slots): the rest fit


def test_memory_is_fixed_over_a_million_units():
    tracemalloc.start()
    b = ContributionBounder.for_units(16, 10**6, memory_bytes=1 << 20, rng=0)
    size = b.nbytes
    for start in range(0, 10**6, 250_000):
        b.update_many(np.arange(start, start + 250_000))
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert b.nbytes == size <= 1 << 20 and held <= 1.25 * size


def test_marginal_memory_bytes_holds_the_bounder():
    syn = MarginalSynthesizer(SCHEMA, 1.0, memory_bytes=400_000, unit="user", max_rows=4,
                              expected_units=10**6)  # fmt: skip
    assert syn.nbytes <= 400_000 and syn.bounder.nbytes <= 200_000
    assert syn.bounder.sample_rate < 1


def test_the_top_level_exports_the_bounder():
    assert sketchsyn.ContributionBounder is ContributionBounder
    assert MetaReader  # the reader the loaders use (imported for the field checks above)
