"""OnlineSynthesizer: update speed against t, release and synthetic time, state size, W1 against t.

    python benchmarks/bench_online.py [--max-t 1000000] [--w1-max-log2 20] [--probe 16384]

Part 1 (d = 2, ε = 1, uniform records, OS CSPRNG noise): the stream is grown in batches of
(at most) 65 536 to t = 10^4, 10^5, 10^6 (up to ``--max-t``); the rate of the growth from t/2
to t is printed (it includes every time-level crossing on the way: the amortised rate), then one
more ``update_many`` of ``--probe`` records is timed (records/s), and ``nbytes`` and the number
of cells are printed.
At the last t, ``release()`` and ``synthetic()`` are timed.

Part 2 (ε = 1): W1 between the data so far and the release, at t = 2^10, 2^12, … 2^``w1-max-log2``
on a clustered stream (the simulated city pickups of ``sketchsyn.evaluate.datasets``) for d = 2
(tree
bound, and exact OT on 2 000 points beside the data-vs-data floor) and on a three-cluster stream
for d = 1 (exact 1-D W1), then on uniform streams in the unit box (d = 2 and 1). At the last t
the one-pass PrivHP (k = 256, width = 1024, depth from the final t) and PMM (depth from the
final t), both at the same ε on the same data, are measured beside it: they release once, the
online synthesizer released at every step. Theorem 1.1's rate is printed for comparison.
Writes ``benchmarks/results/online.csv`` and ``docs/online.png``.

Timings are wall-clock on a shared machine: noisy, read them as orders of magnitude.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import platform
import time
from pathlib import Path

import numpy as np

from sketchsyn import PMM, Box, OnlineSynthesizer, PrivHP
from sketchsyn.evaluate.datasets import TAXI_BOX, taxi_pickups
from sketchsyn.evaluate.metrics import w1_floor, wasserstein1

ROOT = Path(__file__).resolve().parent.parent
BATCH = 65536


def speed(max_t: int, probe: int) -> None:
    print("## update_many speed (d = 2, eps = 1, uniform records, OS CSPRNG)")
    print(f"probe batch {probe} records; stream grown in batches of {BATCH}")
    print("| t | records/s (probe) | records/s (t/2 to t) | cells | nbytes |")
    print("| --- | --- | --- | --- | --- |")
    rng = np.random.default_rng(0)
    syn = OnlineSynthesizer(Box.unit(2), 1.0)
    grow = 0.0
    for target in [t for t in (10**4, 10**5, 10**6) if t <= max_t]:
        half, spent = target // 2, 0.0
        while syn.t < target:
            take = min(BATCH, target - syn.t)
            if syn.t < half:
                take = min(take, half - syn.t)
            X = rng.random((take, 2))
            t0 = time.perf_counter()
            syn.update_many(X)
            dt = time.perf_counter() - t0
            grow += dt
            if syn.t > half:
                spent += dt
        X = rng.random((probe, 2))
        t0 = time.perf_counter()
        syn.update_many(X)
        dt = time.perf_counter() - t0
        print(
            f"| {target:,} | {probe / dt:,.0f} | {(target - half) / spent:,.0f} | "
            f"{syn.n_cells:,} | {syn.nbytes:,} |"
        )
    print(f"(growing the stream took {grow:.1f} s in all)")
    t0 = time.perf_counter()
    syn.release()
    t_rel = time.perf_counter() - t0
    t0 = time.perf_counter()
    Y = syn.synthetic()
    t_syn = time.perf_counter() - t0
    print(
        f"at t = {syn.t:,}: release() {t_rel:.2f} s (reads and catches up {syn.n_cells:,} "
        f"cells), synthetic() {t_syn:.2f} s for {Y.shape[0]:,} points; nbytes {syn.nbytes:,}"
    )


def _three_clusters(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = np.array([0.15, 0.5, 0.8])
    x = centres[rng.integers(0, 3, n)] + 0.04 * rng.standard_normal(n)
    return np.clip(x, 0.0, 1.0 - 1e-12)[:, None]


def bound(t: int, d: int, eps: float = 1.0) -> float:
    """Theorem 1.1's rate without its constant."""
    if d >= 2:
        return math.log2(t) * (eps * t) ** (-1 / d)
    return math.log2(eps * t) ** 3 * math.log2(t) ** 1.5 / (eps * t)


def utility(max_log2: int, rows: list[dict]) -> None:
    eps = 1.0
    checkpoints = [2**k for k in range(10, max_log2 + 1, 2)]
    n = checkpoints[-1]
    for d, data in ((2, "clustered"), (1, "clustered"), (2, "uniform"), (1, "uniform")):
        if data == "uniform":
            domain = Box.unit(d)
            X = np.random.default_rng(d).random((n, d))
        elif d == 2:
            domain = Box(TAXI_BOX[0], TAXI_BOX[1])
            X = np.concatenate(list(taxi_pickups(n, batch_size=BATCH, seed=0)))
        else:
            domain = Box.unit(1)
            X = _three_clusters(n, 0)
        print(f"\n## W1 against t (d = {d}, eps = 1, {data} stream)")
        print("| t | online W1 | method | OT 2000 pts | OT floor | rate of Thm 1.1 | W1 / rate |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        syn = OnlineSynthesizer(domain, eps)
        done = 0
        for t in checkpoints:
            syn.update_many(X[done:t])
            done = t
            rel = syn.release()
            w = wasserstein1(X[:t], rel, domain)
            row = {"d": d, "data": data, "t": t, "mechanism": "online", "w1": w.value}
            row["method"] = w.method
            ot = floor = ""
            if d == 2:
                sub = X[:t][np.random.default_rng(t).permutation(t)[:2000]]
                ot_v = wasserstein1(sub, rel, domain, method="ot", rng=1, n_samples=2000).value
                fl_v = w1_floor(X[:t][np.random.default_rng(t).permutation(t)[:4000]], domain).value
                ot, floor = f"{ot_v:.4f}", f"{fl_v:.4f}"
                row |= {"ot": ot_v, "floor": fl_v}
            b = bound(t, d, eps)
            print(
                f"| {t:,} | {w.value:.5f} | {w.method} | {ot} | {floor} | {b:.4f} | "
                f"{w.value / b:.4f} |"
            )
            rows.append(row | {"rate": b, "nbytes": syn.nbytes})
        # The one-pass mechanisms on the same final data, same epsilon.
        others = {
            "PrivHP k=256 w=1024": PrivHP(domain, eps, k=256, width=1024, expected_n=n, rng=None),
            "PMM": PMM(domain, eps, expected_n=n),
        }
        for name, mech in others.items():
            mech.update_many(X)
            rel = mech.release()
            w = wasserstein1(X, rel, domain)
            extra = ""
            row = {"d": d, "data": data, "t": n, "mechanism": name, "w1": w.value}
            row["method"] = w.method
            if d == 2:
                sub = X[np.random.default_rng(n).permutation(n)[:2000]]
                ot_v = wasserstein1(sub, rel, domain, method="ot", rng=1, n_samples=2000).value
                extra = f", OT 2000 pts {ot_v:.4f}"
                row["ot"] = ot_v
            print(f"{name} at t = {n:,} (released once): W1 {w.value:.5f} ({w.method}){extra}")
            rows.append(row | {"nbytes": mech.nbytes})


def plot(rows: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(10, 8))
    panels = [(2, "clustered"), (1, "clustered"), (2, "uniform"), (1, "uniform")]
    for ax, (d, data) in zip(axes.ravel(), panels, strict=True):
        mine = [r for r in rows if r["d"] == d and r["data"] == data]
        on = [r for r in mine if r["mechanism"] == "online"]
        if not on:
            continue
        ts = np.array([r["t"] for r in on], dtype=float)
        ws = np.array([r["w1"] for r in on])
        ax.loglog(ts, ws, "o-", label=f"online ({on[0]['method']})")
        rate = np.array([r["rate"] for r in on])
        ax.loglog(ts, rate * ws[0] / rate[0], "k--", label="Theorem 1.1 rate (scaled)")
        for r, m in zip([r for r in mine if r["mechanism"] != "online"], "sD", strict=False):
            ax.loglog([r["t"]], [r["w1"]], m, label=f"{r['mechanism']} (one release)")
        ax.set_xlabel("t (records so far)")
        ax.set_ylabel("W1(data, release)")
        ax.set_title(f"d = {d}, eps = 1, {data}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(ROOT / "docs" / "online.png", dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-t", type=int, default=10**6)
    parser.add_argument("--w1-max-log2", type=int, default=20)
    parser.add_argument("--probe", type=int, default=16384)
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--skip-w1", action="store_true")
    args = parser.parse_args()
    print(f"# bench_online ({platform.python_version()}, {os.cpu_count()} cpus, shared machine)")
    if not args.skip_speed:
        speed(args.max_t, args.probe)
    if args.skip_w1:
        return
    rows: list[dict] = []
    utility(args.w1_max_log2, rows)
    out = ROOT / "benchmarks" / "results" / "online.csv"
    keys = sorted({k for r in rows for k in r})
    with open(out, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)
    plot(rows)
    print(f"\nwrote {out.relative_to(ROOT)} and docs/online.png")


if __name__ == "__main__":
    main()
