"""LowDimSynthesizer: accumulating-pass speed, release time, W1 against n on a plane in d = 20.

    python benchmarks/bench_lowdim.py [--max-exp 6] [--seeds 2] [--plot docs/lowdim.png]
    python benchmarks/bench_lowdim.py --splits     # budget splits, the table in docs/lowdim.md

Data: a random 2-D affine plane in [0.05, 0.95]^20 plus N(0, 0.01²) per coordinate (clipped),
the same generator as tests/test_lowdim.py. ε = 1, default split (4, 1, 1). W1 is exact optimal
transport (POT) between 2000 data points and 2000 synthetic points (ℓ∞ on the unit box), averaged
over the seeds, next to the data-vs-data floor at the same sample size. PMM runs directly in
d = 20 at the same ε (add/remove, so 2ε for replace-one) with its default depth ceil(log2(εn)).
The principal angle is the largest one between the private d'-dimensional subspace (first two
directions when d' > 2) and the true plane. Timings are noisy on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from sketchsyn import PMM, Box
from sketchsyn.evaluate.metrics import wasserstein1
from sketchsyn.synth.lowdim.synthesizer import LowDimSynthesizer


def plane(n: int, d: int = 20, seed: int = 0, noise: float = 0.01):
    """Points on a random 2-D affine plane in [0.05, 0.95]^d plus N(0, noise²), clipped."""
    G = np.random.default_rng(1000 + d).standard_normal((2, d))
    r = np.random.default_rng(seed)
    lo, hi = np.minimum(G, 0).sum(axis=0), np.maximum(G, 0).sum(axis=0)
    basis = G * (0.9 / (hi - lo))
    X = 0.05 + 0.9 * (r.random((n, 2)) @ G - lo) / (hi - lo)
    X += noise * r.standard_normal(X.shape)
    return np.clip(X, 0.0, 1.0), basis


def largest_principal_angle(basis: np.ndarray, components: np.ndarray) -> float:
    Q, _ = np.linalg.qr(basis.T)
    s = np.linalg.svd(Q.T @ components[:, :2], compute_uv=False)
    return float(np.degrees(np.arccos(np.clip(s.min(), 0.0, 1.0))))


def ot(x: np.ndarray, y: np.ndarray, box: Box, seed: int, m: int = 2000) -> float:
    r = np.random.default_rng(seed)
    a = x[r.choice(len(x), min(m, len(x)), replace=False)]
    b = y[r.choice(len(y), min(m, len(y)), replace=False)]
    return wasserstein1(a, b, box, method="ot").value


def throughput(d: int = 20, batches: int = 32, batch: int = 65536) -> None:
    X = np.random.default_rng(0).random((batch, d))
    syn = LowDimSynthesizer(Box.unit(d), 1.0, target_dim=2, rng=0)
    syn.update_many(X)  # warm-up
    t0 = time.perf_counter()
    for _ in range(batches):
        syn.update_many(X)
    dt = time.perf_counter() - t0
    n = batches * batch
    print(f"accumulating pass, d = {d}, batches of {batch}: {n / dt:,.0f} records/s ({n} rows)")
    t0 = time.perf_counter()
    syn.fix_subspace()
    t_fix = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(batches + 1):
        syn.update_many(X)
    t_second = time.perf_counter() - t0
    t0 = time.perf_counter()
    dist = syn.release()
    t_rel = time.perf_counter() - t0
    t0 = time.perf_counter()
    dist.sample(10**5, rng=1)
    t_sample = time.perf_counter() - t0
    print(
        f"fix_subspace (noise, eigh, d' choice): {t_fix * 1e3:.1f} ms; second pass "
        f"(project + PMM count): {(batches + 1) * batch / t_second:,.0f} records/s; "
        f"release (PMM depth {syn._depth}): {t_rel * 1e3:.1f} ms; sample 1e5: "
        f"{t_sample * 1e3:.1f} ms"
    )


def accuracy(max_exp: int, seeds: int, plot: str | None) -> None:
    d, eps = 20, 1.0
    box = Box.unit(d)
    ns = [int(round(10**e)) for e in np.arange(3.0, max_exp + 0.01, 0.5)]
    rows = []
    print(
        "\n      n   W1 LowDim(d'=2)   W1 PMM(d=20)   floor   chosen d'   angle(d'=2)  "
        "angle(auto)   seconds"
    )
    for n in ns:
        w_low, w_pmm, w_floor, dims, ang2, ang_auto = [], [], [], [], [], []
        t0 = time.perf_counter()
        for s in range(seeds):
            X, basis = plane(n, d, seed=s)
            syn = LowDimSynthesizer(box, eps, target_dim=2, rng=100 + s)
            dist = syn.fit(X)
            w_low.append(ot(X, dist.sample(2000, rng=s), box, 10 + s))
            ang2.append(largest_principal_angle(basis, dist.components))
            auto = LowDimSynthesizer(box, eps, rng=200 + s).fit(X)
            dims.append(auto.target_dim)
            ang_auto.append(largest_principal_angle(basis, auto.components))
            pmm = PMM(box, eps, expected_n=n, rng=300 + s)
            pmm.update_many(X)
            w_pmm.append(ot(X, pmm.release().sample(2000, rng=s), box, 10 + s))
            w_floor.append(ot(X, plane(2000, d, seed=1000 + s)[0], box, 10 + s))
        row = (n, np.mean(w_low), np.mean(w_pmm), np.mean(w_floor), dims, np.mean(ang2))
        rows.append(row)
        print(
            f"{n:>8}   {row[1]:13.4f}   {row[2]:12.4f}   {row[3]:.4f}   {str(dims):>9}   "
            f"{row[5]:9.1f}°  {np.mean(ang_auto):9.1f}°   {time.perf_counter() - t0:7.1f}"
        )
    logn = np.log([r[0] for r in rows])
    for name, col in (("LowDim", 1), ("PMM d=20", 2)):
        slope = np.polyfit(logn, np.log([r[col] for r in rows]), 1)[0]
        print(f"slope of log W1 against log n, {name}: {slope:.3f} (all n)")
    big = [i for i, r in enumerate(rows) if r[0] >= 10**5]
    if len(big) >= 2:
        for name, col in (("LowDim", 1), ("PMM d=20", 2)):
            slope = np.polyfit(logn[big], np.log([rows[i][col] for i in big]), 1)[0]
            print(f"slope of log W1 against log n, {name}: {slope:.3f} (n >= 1e5)")
    excess = [(r[0], r[1] - r[3]) for r in rows]
    print("LowDim W1 above the floor:", ", ".join(f"n={n}: {e:.4f}" for n, e in excess))
    if plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(1, 2, figsize=(10, 4))
        nn = [r[0] for r in rows]
        ax[0].loglog(nn, [r[1] for r in rows], "o-", label="LowDim + PMM (d' = 2)")
        ax[0].loglog(nn, [r[2] for r in rows], "s-", label="PMM in d = 20")
        ax[0].loglog(nn, [r[3] for r in rows], ":", color="grey", label="data-vs-data floor")
        ax[0].set_xlabel("n")
        ax[0].set_ylabel("W1 (exact OT, 2000 points, ℓ∞)")
        ax[0].set_title("Plane in d = 20, ε = 1")
        ax[0].legend()
        ax[1].semilogx(nn, [r[5] for r in rows], "o-")
        ax[1].set_xlabel("n")
        ax[1].set_ylabel("largest principal angle (degrees)")
        ax[1].set_title("private subspace vs true plane (d' = 2)")
        fig.tight_layout()
        fig.savefig(plot, dpi=110)
        print(f"wrote {plot}")


def splits(seeds: int = 3) -> None:
    """W1 and angle for several budget splits (d' = 2, plane in d = 20, ε = 1)."""
    box = Box.unit(20)
    for n in (10**5, 10**6):
        X, basis = plane(n)
        for split in [(1, 1, 1), (2, 1, 1), (4, 1, 1), (4, 1, 2), (8, 1, 2)]:
            ws, angs = [], []
            for s in range(seeds):
                dist = LowDimSynthesizer(box, 1.0, target_dim=2, split=split, rng=100 + s).fit(X)
                ws.append(ot(X, dist.sample(2000, rng=11 + s), box, 10 + s))
                angs.append(largest_principal_angle(basis, dist.components))
            print(
                f"n = {n}, split {split}: W1 {np.mean(ws):.3f} {np.round(ws, 3).tolist()}, "
                f"angles {np.round(angs, 1).tolist()}",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-exp", type=float, default=6.0, help="largest n = 10**max_exp")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--plot", default=None, help="write the figure here (docs/lowdim.png)")
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--splits", action="store_true", help="only compare budget splits")
    args = parser.parse_args()
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores (shared)")
    if args.splits:
        splits()
        return
    if not args.skip_speed:
        throughput()
    accuracy(args.max_exp, args.seeds, args.plot)


if __name__ == "__main__":
    main()
