"""Continual counters: throughput, skip time, banks, and error against t.

Run:  PYTHONPATH=. python3 benchmarks/bench_counters.py [--quick] [--full-bank] [--no-figure]
          [--parts throughput,skip,bank,sparse-bank,error]

Prints (timings are wall clock on a shared machine: noisy, read them as orders of magnitude):
* steps/s of ``BinaryMechanism.update_many`` on a dense Boolean stream of 10^7 steps, beside the
  exact sampler's own draws/s at the same noise scale (one draw per step is the ceiling);
* the time of ``skip(10^9)`` for each counter kind (cold: first noise scale; warm: repeated);
* a ``CounterBank`` of 10^4 counters taking one batch (10^3 steps by default; ``--full-bank``
  runs the issue's 10^5 steps, i.e. 10^9 exact draws);
* an ``InhomogeneousSparseBank`` of 10^4 counters taking one batch of 10^5 steps through
  ``update_events`` (each counter sees a 1 with probability 10^-3 per step: the online
  synthesizer's sparse cells), then ``query()`` (every idle counter caught up);
* RMSE of the released prefix sum against t (pure ε = 1: binary tree, Honaker, sparse; ρ = 1/2:
  tree, square-root factorization) on a dense and a sparse stream, with the closed-form
  curves, written to docs/counters.png and printed as a table (docs/counters.md quotes it).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from sketchsyn.counters import (
    BinaryMechanism,
    CounterBank,
    InhomogeneousSparseCounter,
    SparseCounter,
    SqrtFactorizationCounter,
    online_budgets,
    sqrt_coefficients,
)
from sketchsyn.counters.sparsebank import InhomogeneousSparseBank
from sketchsyn.privacy.noise import discrete_laplace

DOCS = Path(__file__).resolve().parent.parent / "docs"


def throughput(n: int) -> None:
    xs = np.ones(n, dtype=np.int64)
    c = BinaryMechanism(epsilon=1.0, horizon=n, rng=1)
    start = time.perf_counter()
    c.update_many(xs)
    rate = n / (time.perf_counter() - start)
    scale = n.bit_length()  # the p-sums' Lap_Z(L/ε), L = floor(log2 T) + 1
    start = time.perf_counter()
    discrete_laplace(scale, n, rng=1)
    draws = n / (time.perf_counter() - start)
    print(f"update_many, dense Boolean stream of {n:.0e} steps: {rate:,.0f} steps/s")
    print(f"  exact sampler Lap_Z({scale}) alone: {draws:,.0f} draws/s")
    h = BinaryMechanism(epsilon=1.0, horizon=n, estimator="honaker", rng=1)
    start = time.perf_counter()
    h.update_many(xs)
    print(f"  Honaker estimator: {n / (time.perf_counter() - start):,.0f} steps/s")
    m = min(n, 10**6)  # a segment closes every ~T0 steps: one Python round per segment
    s = SparseCounter(1.0, n, rng=1)
    start = time.perf_counter()
    s.update_many(xs[:m])
    print(
        f"  SparseCounter (dense, {m:.0e} steps): {m / (time.perf_counter() - start):,.0f} steps/s"
    )
    sp = SparseCounter(1.0, n, rng=2)
    ys = (np.random.default_rng(0).random(m) < 1e-3).astype(np.int64)
    start = time.perf_counter()
    sp.update_many(ys)
    print(
        f"  SparseCounter (density 1e-3, {m:.0e} steps): "
        f"{m / (time.perf_counter() - start):,.0f} steps/s"
    )


def skip_times(s: int = 10**9, repeats: int = 5) -> None:
    makers = {
        "BinaryMechanism(horizon=2**40)": lambda i: BinaryMechanism(1.0, 2**40, rng=i),
        "BinaryMechanism(unbounded)": lambda i: BinaryMechanism(1.0, rng=i),
        "SparseCounter(horizon=2**40)": lambda i: SparseCounter(1.0, 2**40, rng=i),
        "InhomogeneousSparseCounter(d=2, j=0)": lambda i: InhomogeneousSparseCounter(
            1.0, online_budgets(1.0, 2, 0), rng=i
        ),
        "InhomogeneousSparseBank(size=1, d=2, j=0)": lambda i: InhomogeneousSparseBank(
            1, 1.0, online_budgets(1.0, 2, 0), rng=i
        ),
    }
    print(
        f"skip({s:.0e}) from t = 10 (cold = the first call; warm = median of the next {repeats},"
        " once the exact sampler's tables for these scales are built)"
    )
    for name, make in makers.items():
        times = []
        for i in range(repeats + 1):
            c = make(i)
            ones = np.ones(10, dtype=np.int64)
            c.update_many(ones if not isinstance(c, InhomogeneousSparseBank) else ones[:, None])
            start = time.perf_counter()
            c.skip(s)
            times.append(time.perf_counter() - start)
        warm = 1e3 * np.median(times[1:])
        print(f"  {name:40s} cold {1e3 * times[0]:8.3f} ms   warm {warm:8.3f} ms")


def bank(size: int, steps: int) -> None:
    b = CounterBank(size, epsilon=1.0, horizon=2**17, rng=1)
    rng = np.random.default_rng(0)
    chunk = max(1, min(steps, 10**7 // size))
    start = time.perf_counter()
    done = 0
    while done < steps:
        take = min(chunk, steps - done)
        b.update_many((rng.random((take, size)) < 0.01).astype(np.int64))
        done += take
    elapsed = time.perf_counter() - start
    print(
        f"CounterBank of {size} counters x {steps} steps: {elapsed:.2f} s "
        f"({size * steps / elapsed:,.0f} counter-steps/s; one noise draw per counter-step)"
    )
    start = time.perf_counter()
    b.skip(10**4)
    b.query()
    print(f"  bank.skip(10^4) + query(): {1e3 * (time.perf_counter() - start):.2f} ms")


def sparse_bank(size: int, steps: int, density: float = 1e-3) -> None:
    b = InhomogeneousSparseBank(size, 1.0, online_budgets(1.0, 2, 4), start_level=4, rng=1)
    rng = np.random.default_rng(0)
    n = rng.binomial(size * steps, density)
    flat = np.sort(rng.choice(size * steps, size=n, replace=False))  # events in time order
    times = b.t + 1 + flat // size
    cells = flat % size
    start = time.perf_counter()
    b.update_events(b.t + steps, cells, times)
    mid = time.perf_counter()
    b.query()
    end = time.perf_counter()
    print(
        f"InhomogeneousSparseBank of {size} counters x {steps} steps ({n:,} ones, density "
        f"{density:g}): update_events {mid - start:.2f} s ({size * steps / (mid - start):,.0f} "
        f"counter-steps/s), then query() {1e3 * (end - mid):.0f} ms; nbytes {b.nbytes:,}"
    )


# ------------------------------------------------------------------ error against t
def _streams(n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {
        "dense": np.ones(n, dtype=np.int64),
        "sparse": (rng.random(n) < 1e-3).astype(np.int64),
    }


def _buckets(n: int) -> list[tuple[int, int]]:
    """t in [2^(k-1), 2^k), k = 1 … K for n = 2^K − 1 (1-based steps)."""
    return [(1 << (k - 1), 1 << k) for k in range(1, (n + 1).bit_length())]


def _bucket_rmse(sq: np.ndarray, n: int) -> np.ndarray:
    return np.array([np.sqrt(sq[lo - 1 : hi - 1].mean()) for lo, hi in _buckets(n)])


def _bank_sq_error(bank: CounterBank, xs: np.ndarray, chunk: int = 2**15) -> np.ndarray:
    runs = bank.size
    truth = np.cumsum(xs)
    out = np.empty(xs.size)
    for lo in range(0, xs.size, chunk):
        part = xs[lo : lo + chunk]
        rel = bank.update_many(np.repeat(part[:, None], runs, axis=1))
        out[lo : lo + part.size] = ((rel - truth[lo : lo + part.size, None]) ** 2).mean(axis=1)
    return out


def error_curves(n: int, runs: int, n_rho: int, runs_rho: int) -> dict:
    results: dict = {}
    for stream, xs in _streams(n).items():
        for name, est in (("tree", "tree"), ("honaker", "honaker")):
            b = CounterBank(runs, epsilon=1.0, horizon=n, estimator=est, rng=11)
            results[("eps", name, stream)] = _bucket_rmse(_bank_sq_error(b, xs), n)
        sq = np.zeros(n)
        for i in range(runs):
            rel = SparseCounter(1.0, n, rng=100 + i).update_many(xs)
            sq += (rel - np.cumsum(xs)) ** 2 / runs
        results[("eps", "sparse", stream)] = _bucket_rmse(sq, n)
    for stream, xs in _streams(n_rho).items():
        b = CounterBank(runs_rho, rho=0.5, horizon=n_rho, rng=12)
        results[("rho", "tree", stream)] = _bucket_rmse(_bank_sq_error(b, xs), n_rho)
        sq = np.zeros(n_rho)
        for i in range(runs_rho):
            rel = SqrtFactorizationCounter(0.5, n_rho, rng=200 + i).update_many(xs)
            sq += (rel - np.cumsum(xs)) ** 2 / runs_rho
        results[("rho", "sqrt", stream)] = _bucket_rmse(sq, n_rho)
    # Closed forms (exact variances; the factorization's with the exact real factor c_k).
    t = np.arange(1, n + 1)
    tree = BinaryMechanism(epsilon=1.0, horizon=n, rng=0)
    hon = BinaryMechanism(epsilon=1.0, horizon=n, estimator="honaker", rng=0)
    v_tree = tree.variance(1) * np.bitwise_count(t.astype(np.uint64)).astype(float)
    vj = np.array(hon._tree.vj)
    bits = (t[:, None] >> np.arange(vj.size)) & 1
    v_hon = bits @ vj
    results[("eps", "tree", "formula")] = _bucket_rmse(v_tree, n)
    results[("eps", "honaker", "formula")] = _bucket_rmse(v_hon, n)
    t_r = np.arange(1, n_rho + 1)
    g_tree = BinaryMechanism(rho=0.5, horizon=n_rho, rng=0)
    vg = g_tree.variance(1) * np.bitwise_count(t_r.astype(np.uint64)).astype(float)
    c = sqrt_coefficients(n_rho)
    sigma2 = float((c**2).sum())  # Δ = 1, 2ρ = 1
    results[("rho", "tree", "formula")] = _bucket_rmse(vg, n_rho)
    results[("rho", "sqrt", "formula")] = _bucket_rmse(sigma2 * np.cumsum(c**2), n_rho)
    results["n"], results["n_rho"] = n, n_rho
    return results


def print_table(results: dict) -> None:
    for budget, n, names in (
        ("eps", results["n"], ("tree", "honaker", "sparse")),
        ("rho", results["n_rho"], ("tree", "sqrt")),
    ):
        label = "pure ε = 1" if budget == "eps" else "ρ = 1/2 (units 1/(2ρ) = 1)"
        print(f"\nRMSE of the release, bucket t in [2^(k-1), 2^k), {label}:")
        cols = [
            (name, stream)
            for name in names
            for stream in ("dense", "sparse", "formula")
            if (budget, name, stream) in results
        ]
        print("| k | " + " | ".join(f"{a} {b}" for a, b in cols) + " |")
        print("|---" * (len(cols) + 1) + "|")
        for i, _ in enumerate(_buckets(n)):
            row = " | ".join(f"{results[(budget, a, b)][i]:.1f}" for a, b in cols)
            print(f"| {i + 1} | {row} |")
        last = len(_buckets(n)) - 1
        base = results[(budget, "tree", "dense")][last]
        for name in names[1:]:
            for stream in ("dense", "sparse"):
                ratio = base / results[(budget, name, stream)][last]
                print(
                    f"  measured RMSE ratio tree(dense) / {name}({stream}) at k={last + 1}: "
                    f"{ratio:.2f}"
                )


def figure(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    styles = {"dense": "-", "sparse": "--"}
    for ax, budget, names, title in (
        (axes[0], "eps", ("tree", "honaker", "sparse"), "pure ε = 1"),
        (axes[1], "rho", ("tree", "sqrt"), "ρ = 1/2"),
    ):
        n = results["n" if budget == "eps" else "n_rho"]
        tmid = np.array([np.sqrt(lo * (hi - 1)) for lo, hi in _buckets(n)])
        for color, name in zip(("C0", "C1", "C2"), names, strict=False):
            for stream in ("dense", "sparse"):
                ax.plot(
                    tmid,
                    results[(budget, name, stream)],
                    styles[stream],
                    color=color,
                    label=f"{name} ({stream})",
                )
            if (budget, name, "formula") in results:
                ax.plot(tmid, results[(budget, name, "formula")], ":", color="k", lw=1)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("t")
        ax.set_ylabel("RMSE of the released count")
        ax.set_title(f"{title} (dotted: closed form)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"\nwrote {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--full-bank", action="store_true", help="bank batch of 10^5 steps")
    parser.add_argument("--no-figure", action="store_true")
    parser.add_argument(
        "--parts",
        default="throughput,skip,bank,sparse-bank,error",
        help="comma-separated parts to run (default: all)",
    )
    args = parser.parse_args()
    quick = args.quick
    parts = set(args.parts.split(","))
    if "throughput" in parts:
        throughput(10**5 if quick else 10**7)
    if "skip" in parts:
        skip_times(repeats=2 if quick else 25)
    if "bank" in parts:
        bank(10**4, 10**5 if args.full_bank else (10 if quick else 10**3))
    if "sparse-bank" in parts:
        sparse_bank(10**4, 10**3 if quick else 10**5)
    if "error" not in parts:
        return
    results = error_curves(
        n=2**12 - 1 if quick else 2**20 - 1,
        runs=4 if quick else 16,
        n_rho=2**10 - 1 if quick else 2**13 - 1,
        runs_rho=4 if quick else 16,
    )
    print_table(results)
    if not args.no_figure:
        figure(results, DOCS / ("counters_quick.png" if quick else "counters.png"))


if __name__ == "__main__":
    main()
