"""Longitudinal synthesizers: speed, memory and the paper's error figures (Bun et al.).

    python benchmarks/bench_longitudinal.py                       # timings and nbytes
    python benchmarks/bench_longitudinal.py --figure docs/longitudinal.png --runs 200

Timings: seconds per period of ``FixedWindowSynthesizer.update`` at n = 10⁶ people, k = 3,
T = 12 (the period k that builds the panel is reported apart), and of
``CumulativeSynthesizer.update`` at n = 10⁶, T = 64 with both counters; the panel (a person
keeps last period's bit with probability 0.8) is generated outside the timed region. Noise
comes from the OS CSPRNG (the private setting). ``nbytes`` after the same 12 periods with
T = 12 and T = 1200.

Figure: Appendix C.1's setting (n = 25 000, T = 12, k = 3, every report 1, ρ = 0.005) over
``--runs`` seeded runs: the debiased error per period (Figure 3: width-3 patterns, and width-2
and width-1 marginals), the error without debiasing (Figure 4), each with its bound dashed;
and the cumulative synthesizer's error per period on a persistent random panel with
Theorem 4.4's bound (both counters).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from sketchsyn import CumulativeSynthesizer, FixedWindowSynthesizer
from sketchsyn.synth.longitudinal.cumulative import available_counters


def persistent_panel(n: int, periods: int, seed: int, keep: float = 0.8) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = (rng.random(n) < 0.3).astype(np.int8)
    cols = [x]
    for _ in range(periods - 1):
        x = np.where(rng.random(n) < keep, x, (rng.random(n) < 0.3).astype(np.int8))
        cols.append(x)
    return np.array(cols)


def time_fixed(n: int) -> None:
    panel = persistent_panel(n, 12, 0)
    synth = FixedWindowSynthesizer(n, 12, 3, 0.005)
    times = []
    for col in panel:
        t0 = time.perf_counter()
        synth.update(col)
        times.append(time.perf_counter() - t0)
    steady = times[3:]
    print(
        f"FixedWindowSynthesizer n={n:,} k=3 T=12: period k (builds n*={synth.n_synthetic:,}) "
        f"{times[2]:.3f} s; later periods median {np.median(steady):.3f} s, "
        f"max {max(steady):.3f} s ({n / np.median(steady):,.0f} reports/s); "
        f"periods before k {max(times[:2]):.4f} s"
    )


def time_cumulative(n: int, counter: str) -> None:
    horizon = 64
    panel = persistent_panel(n, horizon, 1)
    synth = CumulativeSynthesizer(n, horizon, 0.005, counter=counter)
    times = []
    for col in panel:
        t0 = time.perf_counter()
        synth.update(col)
        times.append(time.perf_counter() - t0)
    print(
        f"CumulativeSynthesizer n={n:,} T={horizon} counter={counter!r}: median "
        f"{np.median(times):.3f} s per period, max {max(times):.3f} s, total {sum(times):.1f} s"
    )


def memory() -> None:
    panel = persistent_panel(100_000, 12, 2)
    for horizon in (12, 1200):
        synth = FixedWindowSynthesizer(100_000, horizon, 3, 0.005, rng=1)
        synth.update_many(panel)
        print(
            f"FixedWindowSynthesizer n=100,000 k=3 T={horizon}: nbytes after 12 periods "
            f"{synth.nbytes:,} (n* = {synth.n_synthetic:,})"
        )
    for horizon in (12, 1200):
        synth = CumulativeSynthesizer(100_000, horizon, 0.005, rng=1)
        synth.update_many(panel)
        print(
            f"CumulativeSynthesizer n=100,000 T={horizon}: nbytes after 12 periods {synth.nbytes:,}"
        )


# ---------------------------------------------------------------------- figure
def _fixed_errors(runs: int) -> dict[str, np.ndarray]:
    n, horizon, k, rho = 25_000, 12, 3, 0.005
    out: dict[str, list] = {"w3": [], "w2": [], "w1": [], "raw": []}
    for seed in range(runs):
        synth = FixedWindowSynthesizer(n, horizon, k, rho, rng=seed)
        rows = {key: [] for key in out}
        for t in range(1, horizon + 1):
            synth.update(np.ones(n, dtype=np.int8))
            if t < k:
                continue
            truth = np.zeros((2, 2, 2))
            truth[1, 1, 1] = n
            h = synth.histogram()
            rows["w3"].append(np.abs(h - truth).max() / n)
            rows["w2"].append(np.abs(h.sum(axis=0) - truth.sum(axis=0)).max() / n)
            rows["w1"].append(np.abs(h.sum(axis=(0, 1)) - truth.sum(axis=(0, 1))).max() / n)
            raw = synth.histogram(debias=False) / synth.n_synthetic
            rows["raw"].append(np.abs(raw - truth / n).max())
        for key in out:
            out[key].append(rows[key])
    result = {key: np.array(v) for key, v in out.items()}
    lam = synth.error_bound() / n
    result["bound"] = np.array([lam, 2 * lam, 4 * lam, (2 + 2 ** (k + 1)) * lam])
    return result


def _cumulative_errors(runs: int, counter: str) -> tuple[np.ndarray, float]:
    n, horizon, rho = 25_000, 12, 0.005
    errors = []
    for seed in range(runs):
        panel = persistent_panel(n, horizon, 10_000 + seed)
        synth = CumulativeSynthesizer(n, horizon, rho, counter=counter, rng=seed)
        weights = np.zeros(n, dtype=np.int64)
        row = []
        for col in panel:
            synth.update(col)
            weights += col
            truth = np.bincount(weights, minlength=synth.t + 1)[::-1].cumsum()[::-1]
            row.append(np.abs(synth.counts() - truth[: synth.t + 1]).max() / n)
        errors.append(row)
    return np.array(errors), synth.error_bound() / n


def figure(path: Path, runs: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fixed = _fixed_errors(runs)
    cumulative = {c: _cumulative_errors(runs, c) for c in available_counters()}
    periods = np.arange(3, 13)
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5), constrained_layout=True)

    def band(ax, x, errs, label, color):
        ax.plot(x, np.median(errs, axis=0), color=color, label=f"{label}: median")
        ax.plot(x, np.percentile(errs, 2.5, axis=0), ":", color=color)
        ax.plot(x, np.percentile(errs, 97.5, axis=0), ":", color=color)

    ax = axes[0, 0]
    band(ax, periods, fixed["w3"], "width-3 patterns (= k)", "C0")
    ax.axhline(fixed["bound"][0], ls="--", color="C0", label="Theorem 3.2 bound")
    ax.set_title("Figure 3 (top): debiased error, query window = k = 3")
    ax = axes[0, 1]
    band(ax, periods, fixed["w2"], "width-2 marginals", "C1")
    band(ax, periods, fixed["w1"], "width-1 marginals", "C2")
    ax.axhline(fixed["bound"][1], ls="--", color="C1", label="2 × bound (2 bins)")
    ax.axhline(fixed["bound"][2], ls="--", color="C2", label="4 × bound (4 bins)")
    ax.set_title("Figure 3 (middle): debiased error, query window < k")
    ax = axes[1, 0]
    band(ax, periods, fixed["raw"], "no debiasing", "C3")
    ax.axhline(fixed["bound"][3], ls="--", color="C3", label="Corollary 3.3 bound (C/n = 1)")
    ax.set_title("Figure 4: error of raw synthetic proportions")
    ax = axes[1, 1]
    months = np.arange(1, 13)
    for (counter, (errs, bound)), color in zip(cumulative.items(), ("C0", "C4"), strict=False):
        band(ax, months, errs, f"counter={counter!r}", color)
        ax.axhline(bound, ls="--", color=color, label=f"Theorem 4.4 bound ({counter})")
    ax.set_title("Cumulative: max_b |Ŝ_b^t − S_b^t| / n (persistent panel)")
    for ax in axes.ravel():
        ax.set_xlabel("period t")
        ax.set_ylabel("ℓ∞ error (proportion)")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    fig.suptitle(
        f"Bun et al. reproduced: n = 25 000, T = 12, ρ = 0.005; {runs} seeded runs; "
        "solid median, dotted 2.5/97.5 percentiles, dashed bound"
    )
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")
    med = np.median(fixed["w3"], axis=0)
    print(
        f"C.1 debiased width-3 error: median per period {np.round(med, 5).tolist()}; "
        f"97.5th percentile max {np.percentile(fixed['w3'], 97.5, axis=0).max():.5f} "
        f"vs bound {fixed['bound'][0]:.5f}"
    )
    print(
        f"C.1 raw (no debias) error: median {np.median(fixed['raw']):.5f} "
        f"vs bound {fixed['bound'][3]:.5f}"
    )
    for counter, (errs, bound) in cumulative.items():
        print(
            f"cumulative {counter}: median per period "
            f"{np.round(np.median(errs, axis=0), 5).tolist()}; 97.5th percentile max "
            f"{np.percentile(errs, 97.5, axis=0).max():.5f} vs bound {bound:.5f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--figure", type=Path, default=None)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    if args.figure is not None:
        figure(args.figure, args.runs)
        return
    time_fixed(args.n)
    for counter in available_counters():
        time_cumulative(args.n, counter)
    memory()


if __name__ == "__main__":
    main()
