"""MarginalSynthesizer on a table: each column kind's bins, valid typed rows out (pandas, polars,
pyarrow), cells without a value, a category never seen, range counts with conditions, the
planner's memory bound and refusal, and the summary protocol (merge, snapshot, save/load,
diagnostics, refused batches) on a Schema."""

from __future__ import annotations

import hashlib
import ipaddress

import numpy as np
import pytest

from sketchsyn import (
    Box,
    InputError,
    MarginalDistribution,
    MarginalSynthesizer,
    ParameterError,
    ReleasedError,
    Schema,
)
from sketchsyn.synth.marginal.layout import Layout, pair_grid
from sketchsyn.synth.marginal.noise import THRESHOLD

pd = pytest.importorskip("pandas")

CARRIERS = ["9E", "AA", "AS", "B6", "DL"]
SCHEMA = {
    "columns": [
        {"name": "carrier", "kind": "categorical", "categories": CARRIERS},
        {"name": "month", "kind": "integer", "low": 1, "high": 12},
        {"name": "delay", "kind": "numeric", "low": -120, "high": 1440},
        {"name": "when", "kind": "datetime", "low": "2013-01-01", "high": "2014-01-01"},
        {"name": "client", "kind": "ipv4"},
        {"name": "ok", "kind": "boolean"},
        {"name": "dest", "kind": "categorical", "categories": [f"D{k:03d}" for k in range(600)]},
    ]
}


def _flights(n: int, seed: int = 0, carriers: tuple[str, ...] = ("9E", "AA", "AS", "B6")):
    """Rows of :data:`SCHEMA`: the delay depends on the month, ``ok`` on the delay, the
    destination on the carrier (every carrier flies to its own 10 of the 600)."""
    rng = np.random.default_rng(seed)
    p = np.array([0.4, 0.3, 0.2, 0.1][: len(carriers)])
    carrier = rng.choice(np.array(carriers, dtype=object), n, p=p / p.sum())
    month = rng.integers(1, 13, n)
    delay = np.clip(rng.normal(30 * month, 40, n), -120, 1440)
    when = np.datetime64("2013-01-01") + rng.integers(0, 364 * 86400, n).astype("timedelta64[s]")
    home = np.array([CARRIERS.index(c) for c in carrier]) * 97
    dest = np.array([f"D{k:03d}" for k in (home + 7 * rng.integers(0, 10, n)) % 600], dtype=object)
    return pd.DataFrame(
        {
            "carrier": carrier,
            "month": month,
            "delay": delay,
            "when": when,
            "client": rng.integers(0, 2**32, n),
            "ok": delay < 150,
            "dest": dest,
        }
    )


def _syn(seed: int = 1, **kw) -> MarginalSynthesizer:
    kw = {"bits": 4, "fine_bits": 8} | kw
    return MarginalSynthesizer(Schema.from_dict(SCHEMA), 1.0, rng=seed, **kw)


@pytest.fixture(scope="module")
def fitted() -> tuple[pd.DataFrame, MarginalDistribution]:
    df = _flights(60_000)
    syn = _syn()
    syn.update_many(df)
    return df, syn.release()


def test_each_kind_is_binned_as_documented() -> None:
    schema = Schema.from_dict(SCHEMA)
    lay = Layout(schema, bits=4, fine_bits=8, exact_bits=8)
    # carrier (3 bits), month (4), boolean (1): exact; numeric, datetime, ipv4: bits/fine_bits;
    # dest (600 categories, 10 bits): 2**exact_bits groups, every category a fine bin
    assert list(zip(lay.coarse, lay.fine, strict=True)) == [
        (3, 3),
        (4, 4),
        (4, 8),
        (4, 8),
        (4, 8),
        (1, 1),
        (8, 10),
    ]
    assert lay.valid_fine(0).tolist() == [True] * 5 + [False] * 3
    assert lay.valid_fine(1).sum() == 12 and lay.valid_fine(6).sum() == 600
    assert lay.valid_coarse(6).sum() == (600 + 3) // 4  # groups of 4 categories
    # a wide integer is binned like a numeric column, on the top bits of its code
    wide = Schema([{"name": "k", "kind": "integer", "low": 0, "high": 99_999}, *SCHEMA["columns"]])
    assert Layout(wide, 4, 8).coarse[0] == 4 and Layout(wide, 4, 8).fine[0] == 8
    # a pair table is the Morton order of a 2-column schema of integers (uneven bits too)
    grid = pair_grid(3, 1)
    two = Schema(
        [
            {"name": "a", "kind": "integer", "low": 0, "high": 7},
            {"name": "b", "kind": "integer", "low": 0, "high": 1},
        ]
    )
    a, b = np.meshgrid(np.arange(8), np.arange(2), indexing="ij")
    codes = two.encode({"a": a.ravel(), "b": b.ravel()}, 4).reshape(8, 2)
    assert (grid == codes.astype(np.int64)).all()


@pytest.mark.parametrize("library", ["pandas", "polars", "pyarrow"])
def test_samples_are_valid_values_of_the_right_types(fitted, library) -> None:
    if library != "pandas":
        pytest.importorskip(library)
    _, dist = fitted
    out = dist.sample(20_000, rng=2, as_frame=library)
    frame = out if library == "pandas" else out.to_pandas()
    types = {c: str(t) for c, t in frame.dtypes.items()}
    # pandas' own dtype for a column of Python str: object, or "str" from pandas 3 on
    text = str(pd.DataFrame({"x": np.array(["10.0.0.1"], dtype=object)})["x"].dtype)
    assert types == {
        "carrier": "category",
        "month": "int64",
        "delay": "float64",
        "when": "datetime64[us]" if library != "polars" else types["when"],
        "client": text,
        "ok": "bool",
        "dest": "category",
    }
    if library == "polars":
        import polars as pl

        assert out.schema["when"] == pl.Datetime("us") and out.schema["month"] == pl.Int64
        assert isinstance(out.schema["carrier"], pl.Enum)
    if library == "pyarrow":
        import pyarrow as pa

        assert out.schema.field("month").type == pa.int64()
        assert pa.types.is_dictionary(out.schema.field("dest").type)
        assert out.schema.field("when").type == pa.timestamp("us")
    assert set(frame["carrier"].astype(str)) <= set(CARRIERS)
    assert set(frame["dest"].astype(str)) <= {f"D{k:03d}" for k in range(600)}
    assert frame["month"].between(1, 12).all()
    assert frame["delay"].between(-120, 1440).all()
    low, high = pd.Timestamp("2013-01-01"), pd.Timestamp("2014-01-01")
    assert frame["when"].between(low, high).all()
    for address in frame["client"].head(200):
        ipaddress.IPv4Address(address)  # raises on anything that is not an address


def test_units_stay_on_valid_codes(fitted) -> None:
    _, dist = fitted
    units = dist.sample(20_000, rng=3, as_frame=False)
    assert units.shape == (20_000, 7) and units.dtype == np.float64
    for j in (0, 1, 6):  # categories and integers: whole numbers naming a value
        assert (units[:, j] == np.floor(units[:, j])).all()
    assert units[:, 0].max() < 5 and units[:, 6].max() < 600
    assert units[:, 1].min() >= 1 and units[:, 1].max() <= 12
    assert set(np.unique(units[:, 5])) <= {0.0, 1.0}


def test_the_release_keeps_the_data_s_marginals_and_dependences(fitted) -> None:
    df, dist = fitted
    out = dist.sample(60_000, rng=4)
    real = df["carrier"].value_counts(normalize=True)
    synth = out["carrier"].value_counts(normalize=True)
    for c in ("9E", "AA", "AS", "B6"):
        assert abs(real[c] - synth[c]) < 0.02, (c, real[c], synth[c])
    # month → delay (correlation 0.93 in the data; 0 if the columns were sampled apart)
    assert np.corrcoef(df["month"], df["delay"])[0, 1] > 0.9
    assert np.corrcoef(out["month"], out["delay"])[0, 1] > 0.7  # 0.80–0.87 over seeds 1–5
    # carrier → dest: each carrier flies to its own 10 destinations (exact categories in the
    # fine bins, groups of 4 in the pair tables)
    home = {c: set(df.loc[df.carrier == c, "dest"]) for c in ("9E", "AA", "AS", "B6")}
    pairs = zip(out["carrier"], out["dest"], strict=True)
    hits = np.mean([d in home.get(c, ()) for c, d in pairs])
    assert hits > 0.8, hits
    # destinations the data never had: noise above the threshold only (1.9% here)
    assert (~out["dest"].astype(str).isin(set(df["dest"]))).mean() < 0.03


def test_a_category_never_seen_gets_noise_level_mass_only(fitted) -> None:
    df, dist = fitted  # the data has no "DL"
    never = dist.count('carrier == "DL"')
    seen = dist.count('carrier == "B6"')
    scale = 1 / (0.25 / 7)  # one column table's noise scale
    assert 0 <= never < THRESHOLD * scale and never < 0.05 * seen, (never, seen)
    assert (dist.sample(20_000, rng=5)["carrier"] == "DL").mean() < 0.01


def test_cells_without_a_value_carry_no_mass(fitted) -> None:
    _, dist = fitted
    lay, model = dist._layout, dist._fitted()
    for j in range(lay.d):
        ok = lay.valid_coarse(j)
        assert not model["marg"][j][~ok].any()
        fine_ok = lay.valid_fine(j).reshape(ok.size, -1)
        assert not model["fine"][j][ok][~fine_ok[ok]].any()
    for (_, child), cond in zip(model["edges"], model["conds"], strict=True):
        assert not cond[:, ~lay.valid_coarse(child)].any()


def test_count_with_conditions_matches_the_data(fitted) -> None:
    df, dist = fitted
    n = len(df)
    assert dist.total == pytest.approx(n, rel=0.02)
    cases = [
        ('carrier == "AA"', df.carrier == "AA"),
        ("month >= 10", df.month >= 10),
        ('carrier == "AA" and delay > 60', (df.carrier == "AA") & (df.delay > 60)),
        ({"month": (3, 5), "ok": True}, df.month.between(3, 5) & df.ok),
        ({"carrier": ["9E", "AS"]}, df.carrier.isin(["9E", "AS"])),
    ]
    for where, mask in cases:
        assert dist.count(where) == pytest.approx(mask.sum(), rel=0.1, abs=0.01 * n), where
    assert dist.count(where="when < '2013-07-01'") == pytest.approx(n / 2, rel=0.1)
    # lower/upper in units (a category's index, µs since 1970, ...)
    low = [0, 1, -120, -np.inf, 0, 0, 0]
    high = [1, 12, 1440, np.inf, 2**32, 1, 599]
    assert dist.count(low, high) == pytest.approx(df.carrier.isin(["9E", "AA"]).sum(), rel=0.1)
    with pytest.raises(ParameterError, match="column 'nope'"):
        dist.count("nope > 3")
    with pytest.raises(ParameterError, match="'where'"):
        dist.count([0] * 7, [1] * 7, where="month > 3")


def test_memory_bound_and_planner() -> None:
    schema = Schema.from_dict(SCHEMA)
    for memory in (300_000, 1 << 20, 4 << 20):
        for n in (None, 5_000, 300_000):
            syn = MarginalSynthesizer(schema, 1.0, memory_bytes=memory, expected_n=n)
            lay = syn._layout
            assert syn.nbytes == 8 * lay.cells + 64 <= memory
            assert f"{syn.nbytes:,}" in syn.explain() and "dest " in syn.explain()
    # more rows, finer bins for the ordered columns (delay, when, client)
    small = MarginalSynthesizer(schema, 1.0, memory_bytes=4 << 20, expected_n=5_000)
    big = MarginalSynthesizer(schema, 1.0, memory_bytes=4 << 20, expected_n=5_000_000)
    for j in (2, 3, 4):
        assert small.column_bits[j] < big.column_bits[j]
    # categoricals keep a bin per category in their one-way tables
    assert small.column_bits[0][1] == 3 and small.column_bits[6][1] == 10
    # wide categoricals no longer refused: coarsened to fit the default 1 MiB
    wide = Schema(
        [
            {"name": f"c{k}", "kind": "categorical", "categories": [str(v) for v in range(200)]}
            for k in range(6)
        ]
    )
    assert MarginalSynthesizer(wide, 1.0).nbytes <= 1 << 20
    assert MarginalSynthesizer(wide, 1.0, exact_bits=6).nbytes <= 1 << 20
    with pytest.raises(ParameterError, match="'memory_bytes'"):
        _syn(memory_bytes=10_000)


def test_parameters_are_refused_by_name() -> None:
    schema = Schema.from_dict(SCHEMA)
    with pytest.raises(ParameterError, match="'consistency'"):
        MarginalSynthesizer(schema, 1.0, consistency="proportional")
    with pytest.raises(ParameterError, match="'exact_bits'"):
        MarginalSynthesizer(Box.unit(3), 1.0, exact_bits=4)
    with pytest.raises(ParameterError, match="'exact_bits'"):
        MarginalSynthesizer(schema, 1.0, exact_bits=13)
    one = Schema([SCHEMA["columns"][0]])
    with pytest.raises(ParameterError, match="'domain'"):
        MarginalSynthesizer(one, 1.0)
    with pytest.raises(ParameterError, match="bits"):
        MarginalDistribution(schema, 1.0, np.zeros(3, np.int64), np.zeros(3, np.int64), 0.1, 0.1)


def test_a_bad_row_is_named_and_the_state_is_unchanged() -> None:
    syn = _syn()
    syn.update_many(_flights(500))
    before = syn.to_bytes(include_diagnostics=True)
    bad = _flights(500, seed=1)
    bad.loc[7, "carrier"] = "ZZ"
    with pytest.raises(InputError, match=r"row 7: column 'carrier' = 'ZZ'"):
        syn.update_many(bad)
    late = _flights(500, seed=1)
    late.loc[3, "month"] = 13
    with pytest.raises(InputError, match=r"row 3: column 'month'"):
        syn.update_many(late)
    with pytest.raises(InputError):
        syn.update_many(late.drop(columns="ok"))
    assert syn.to_bytes(include_diagnostics=True) == before


def test_rows_of_every_library_give_the_same_state() -> None:
    pa = pytest.importorskip("pyarrow")
    pl = pytest.importorskip("polars")
    df = _flights(2_000, seed=4)
    ref = _syn()
    ref.update_many(df)
    for table in (
        pa.Table.from_pandas(df, preserve_index=False),
        pl.from_pandas(df),
        {c: df[c].to_numpy() for c in df},
    ):
        other = _syn()
        other.update_many(table)
        assert (other._counts == ref._counts).all()
    by_row = _syn()
    for row in df.to_dict("records"):
        by_row.update(row)
    assert (by_row._counts == ref._counts).all()


def test_merge_snapshot_save_load_and_diagnostics(tmp_path) -> None:
    schema = dict(SCHEMA)
    schema["columns"] = [dict(c) for c in SCHEMA["columns"]]
    schema["columns"][0]["policy"] = "other"  # "ZZ" becomes "other", counted
    schema["columns"][1]["policy"] = "clip"
    make = lambda seed: MarginalSynthesizer(  # noqa: E731
        Schema.from_dict(schema), 1.0, bits=3, fine_bits=6, rng=seed
    )
    df = _flights(3_000, seed=2)
    df.loc[:9, "carrier"] = "ZZ"
    df.loc[10:14, "month"] = 40
    a, b, whole = make(1), make(2), make(3)
    a.update_many(df[:1000])
    b.update_many(df[1000:])
    whole.update_many(df)
    a.merge(b)
    assert a == whole and (a._counts == whole._counts).all()
    assert a.adjusted == whole.adjusted == {"carrier:other": 10, "month:clipped": 5}
    # snapshot: a frozen copy
    snap = a.snapshot()
    assert snap == a and snap.adjusted == a.adjusted
    with pytest.raises(ReleasedError):
        snap.update_many(df[:5])
    # bytes: diagnostics only when asked for
    assert MarginalSynthesizer.from_bytes(a.to_bytes()).adjusted == {}
    back = MarginalSynthesizer.from_bytes(a.to_bytes(include_diagnostics=True))
    assert back.adjusted == a.adjusted and back.n_seen == 3000 and back == a
    path = tmp_path / "state.sksy"
    a.save(path)
    assert MarginalSynthesizer.load(path) == a
    # the release travels with a released state; the release alone is private
    dist = a.release()
    assert MarginalSynthesizer.from_bytes(a.to_bytes()).release() == dist
    assert MarginalDistribution.from_bytes(dist.to_bytes()) == dist
    assert dist.state_privacy == "private" and a.state_privacy == "trusted"
    assert dist.params["column_bits"] == [list(cf) for cf in a.column_bits]
    # the bins it measured: the state's, merged where 3,000 rows at ε = 1 support fewer
    assert dist.column_bits[:2] == a.column_bits[:2] and dist.column_bits[5] == (1, 1)
    assert dist.column_bits[2] < a.column_bits[2]
    assert "other" in set(dist.sample(5_000, rng=1)["carrier"].astype(str)) | {"other"}


def test_box_path_outputs_are_unchanged() -> None:
    """Pinned from the Box-only synthesizer before tables existed: the same seeds give the same
    release bytes (but for the format version in the header, 3 since the table release's row
    count; the pins were re-taken then, the header's fields and arrays unchanged), samples and
    counts."""
    rng = np.random.default_rng(0)
    t = rng.random(5000)
    X = np.column_stack([t, t**2, rng.random(5000)])
    pinned = [
        ({"bits": 3, "fine_bits": 5}, "04feebf44878c94b", "224f1b8dec7dbe63", 2421.187768633866),
        (
            {"memory_bytes": 50_000, "expected_n": 5000, "consistency": "proportional"},
            "f9c5fe9c75b37f7f",
            "f713f854d18376f1",
            2376.163416329999,
        ),
    ]
    for kw, release, sample, count in pinned:
        syn = MarginalSynthesizer(Box.unit(3), 1.0, rng=7, **kw)
        syn.update_many(X)
        dist = syn.release()
        assert hashlib.sha256(dist.to_bytes()).hexdigest()[:16] == release
        assert hashlib.sha256(dist.sample(1000, rng=8).tobytes()).hexdigest()[:16] == sample
        assert dist.count([0, 0, 0], [0.5, 0.3, 1.0]) == count


def _pair_gap(dist: MarginalDistribution, units: np.ndarray) -> np.ndarray:
    """Per measured pair: the total variation distance between the rows' table on the pair's
    groups and the release's fitted table."""
    lay, model = dist._layout, dist._fitted()
    bins = [
        (col.codes(units[:, j]) >> np.uint64(col.bits - lay.coarse[j])).astype(np.int64)
        for j, col in enumerate(dist.domain._cols)
    ]
    gaps = []
    for pair in dist.measured:
        (i, j), (gi, gj), table = pair, model["groups"][pair], model["fitted"][pair]
        width = table.shape[1]
        got = np.bincount(gi[bins[i]] * width + gj[bins[j]], minlength=table.size) / len(units)
        gaps.append(0.5 * np.abs(got - table.ravel()).sum())
    return np.array(gaps)


def test_refined_rows_follow_every_released_pair_table(fitted) -> None:
    df, dist = fitted
    tree_only = dist.sample(40_000, rng=6, as_frame=False, refine=0)
    refined = dist.sample(40_000, rng=6, as_frame=False)  # 5 rounds on a Schema
    before, after = _pair_gap(dist, tree_only), _pair_gap(dist, refined)
    assert after.mean() < 0.75 * before.mean(), (before.mean(), after.mean())
    on_tree = {tuple(sorted(e)) for e in dist.tree}
    off = [k for k, p in enumerate(dist.measured) if p not in on_tree]
    assert off, "the release measured pairs beyond its tree"
    assert after[off].mean() < 0.75 * before[off].mean(), (before[off].mean(), after[off].mean())
    # the 1-way marginals stay close to the data's
    for k, c in enumerate(CARRIERS[:4]):
        assert abs(np.mean(refined[:, 0] == k) - np.mean(df["carrier"] == c)) < 0.03, c
    for month in range(1, 13):
        assert abs(np.mean(refined[:, 1] == month) - np.mean(df["month"] == month)) < 0.01
    # still valid values, and the same for the same seed
    assert (refined[:, 1] >= 1).all() and (refined[:, 1] <= 12).all()
    assert (
        dist.sample(1000, rng=7, as_frame=False) == dist.sample(1000, rng=7, as_frame=False)
    ).all()
    with pytest.raises(ParameterError, match="'refine'"):
        dist.sample(10, refine=-1)


def test_refine_on_a_box_is_optional() -> None:
    rng = np.random.default_rng(3)
    t = rng.random(20_000)
    X = np.column_stack([t, (t + 0.1 * rng.random(20_000)) % 1, rng.random(20_000), t**2])
    syn = MarginalSynthesizer(Box(np.zeros(4), np.full(4, 2.0)), 1.0, bits=3, fine_bits=6, rng=1)
    syn.update_many(X * 2)
    dist = syn.release()
    plain = dist.sample(5000, rng=2)
    assert (plain == dist.sample(5000, rng=2, refine=0)).all()  # a Box's default: no rounds
    refined = dist.sample(5000, rng=2, refine=3)
    assert refined.shape == (5000, 4) and ((refined >= 0) & (refined <= 2)).all()
    assert not (plain == refined).all()
