"""Fit and check ContinualPrivHP's planner (``sketchsyn.synth.continual.plan``) on generated data.

    python benchmarks/bench_continual_plan.py          # the plans for a few inputs
    python benchmarks/bench_continual_plan.py --fit    # the sweep that fits the constants
    python benchmarks/bench_continual_plan.py --layouts-only   # stage 2 alone
        [--cache FILE.json]                            # keep (and reuse) the sweep's W1

The data are generated Gaussian mixtures in the unit square, never the streams of
``benchmarks/bench_streams.py``: *narrow* (6 components, standard deviations 0.001 to 0.004),
*tight* (6 components, 0.005 to 0.03) and *spread* (3 components, 0.08 to 0.2), clipped to the
square, at n = 4 096, 16 384, 65 536 and 262 144 live records. Each run inserts the n records
in the first of 8 announced releases (``releases=8``, horizon 8·n) and then takes empty steps
to the end of each epoch, so every release describes the same data under the noise of more
and more counter blocks. W1: exact optimal transport between 1 500 data points and 1 500
released points (paired draws) at releases 1, 4 and 8, averaged over 2 seeds; ε = 0.5, 1, 4.

Stage 1 (depth): ContinualPrivHP with exact counters on every level (``k = 2^depth``) at
depths 5 … 16 (8 … 18 at n = 262 144). For each pair (``SIGNAL_RATIO``, ``DEPTH_OFFSET``) on a
grid the rule's depth is scored by its W1 over the best depth's in each case; the pair whose
worst family has the least mean score is printed.

Stage 2 (layout): at 256 KB, in the cases whose target tree (stage 1's pair) does not fit,
the deepest full tree that fits against the target depth with counters on a share of the
budget (1/4, 1/2, 3/4) and sketches of width at least 32 or 128 below, and against the same
layouts (shares 1/2 and 3/4, width ≥ 32) one or two levels shallower than the target (a sketch
level's noise is ``j`` times a counter level's, so it might pay to stop earlier); scored the
same way, the layout printed is (``COUNTER_SHARE``, ``MIN_WIDTH``[, levels dropped]).
``--layouts-only`` runs stage 2 alone at the module's constants.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sketchsyn import Box, ContinualPrivHP  # noqa: E402
from sketchsyn.evaluate.metrics import wasserstein1  # noqa: E402
from sketchsyn.synth import continual_plan as cp  # noqa: E402

N_EVAL = 1500
RELEASES = 8
POINTS = (1, 4, 8)
DEPTHS = {4096: range(5, 17), 16384: range(5, 17), 65536: range(5, 17), 262144: range(8, 19)}
EPS = (0.5, 1.0, 4.0)
NS = (4096, 16384, 65536, 262144)
SEEDS = (0, 1)
RATIOS = (1.0, 2.0, 4.0)
OFFSETS = (0, 1, 2, 3, 4, 5, 6)
BUDGETS = (256 * 1024,)
FAMILIES = ("tight", "spread", "narrow")
SEED_OFFSET = {"tight": 1, "spread": 0, "narrow": 2}
LAYOUTS = (
    None,
    (0.25, 32),
    (0.5, 32),
    (0.75, 32),
    (0.25, 128),
    (0.5, 128),
    (0.75, 128),
    (0.5, 32, 1),
    (0.5, 32, 2),
    (0.75, 32, 1),
    (0.75, 32, 2),
)


def mixture(family: str, n: int, seed: int) -> np.ndarray:
    """``n`` points of a Gaussian mixture in the unit square (clipped)."""
    rng = np.random.default_rng(seed)
    m, lo, hi = {"narrow": (6, 0.001, 0.004), "tight": (6, 0.005, 0.03), "spread": (3, 0.08, 0.2)}[
        family
    ]
    centres = rng.uniform(0.15, 0.85, size=(m, 2))
    sds = rng.uniform(lo, hi, size=m)
    weights = rng.dirichlet(np.full(m, 2.0))
    comp = rng.choice(m, size=n, p=weights)
    X = centres[comp] + sds[comp, None] * rng.standard_normal((n, 2))
    return np.clip(X, 0.0, 1.0 - 1e-9)


def run(X: np.ndarray, eps: float, depth: int, seed: int, k: int = 0, width: int = 1) -> float:
    """Mean W1 over ``POINTS`` of a ContinualPrivHP of ``depth`` (paired draws); by default
    exact counters on every level (``k = 2^depth``)."""
    n, dom = len(X), Box.unit(2)
    T = RELEASES * n
    c = ContinualPrivHP(dom, eps, k=k or 2**depth, width=width, depth=depth, horizon=T,
                        releases=RELEASES, rng=seed)  # fmt: skip
    c.update_many(X)
    out = []
    for e in range(1, RELEASES + 1):
        c.skip((e * T) // RELEASES - c.t)
        if e in POINTS:
            rng = np.random.default_rng(seed + 17 * e)
            sub = X[rng.choice(n, N_EVAL, replace=False)]
            out.append(wasserstein1(sub, c.release(), dom, method="ot", n_samples=N_EVAL,
                                    rng=seed + e).value)  # fmt: skip
    return float(np.mean(out))


def rule_depth(eps: float, n: int, ratio: float, offset: int) -> int:
    dom = Box.unit(2)
    T = RELEASES * n
    _, _, h = cp._schedule_plan(T, "kary", None, RELEASES, None)
    blocks = cp.mean_blocks(T, RELEASES)
    gammas = [float(dom.gamma(level)) for level in range(-1, dom.max_depth + 1)]
    return cp.target_depth(eps, n, dom.max_depth, h, blocks, gammas, ratio, offset)[0]


def fit(cache: Path | None) -> None:
    t0 = time.perf_counter()
    w1: dict[tuple[str, int, float], dict[int, float]] = {}
    saved = json.loads(cache.read_text()) if cache is not None and cache.exists() else {}
    for family, n, eps in itertools.product(FAMILIES, NS, EPS):
        key = f"{family} {n} {eps}"
        if key not in saved:
            X = mixture(family, n, seed=n + SEED_OFFSET[family])
            saved[key] = {r: float(np.mean([run(X, eps, r, s) for s in SEEDS])) for r in DEPTHS[n]}
            if cache is not None:
                cache.write_text(json.dumps(saved))
        row = {int(r): v for r, v in saved[key].items()}
        w1[(family, n, eps)] = row
        best = min(row, key=row.get)
        print(f"{family:6} n = {n:6} ε = {eps:g}: best depth {best}; W1 ×10³ by depth "
              + " ".join(f"{r}:{1e3 * v:.2f}" for r, v in row.items())
              + f"  ({time.perf_counter() - t0:.0f} s)", flush=True)  # fmt: skip
    print("\n| ratio | offset | " + " | ".join(f"{f}: mean W1 / best" for f in FAMILIES)
          + " | depths |")  # fmt: skip
    print("|---" * (3 + len(FAMILIES)) + "|")
    scores = {}
    for ratio, offset in itertools.product(RATIOS, OFFSETS):
        per: dict[str, list[float]] = {f: [] for f in FAMILIES}
        depths = []
        for (family, n, eps), row in w1.items():
            r = min(max(rule_depth(eps, n, ratio, offset), min(row)), max(row))
            depths.append(r)
            per[family].append(row[r] / min(row.values()))
        means = [float(np.mean(per[f])) for f in FAMILIES]
        scores[(ratio, offset)] = max(means)
        print(f"| {ratio:g} | {offset} | " + " | ".join(f"{m:.3f}" for m in means)
              + f" | {' '.join(map(str, depths))} |")  # fmt: skip
    least = min(scores.values())
    chosen = min((k for k, v in scores.items() if v <= least + 1e-12),
                 key=lambda k: (k[1], k[0]))  # fmt: skip
    print(f"\nchosen: SIGNAL_RATIO = {chosen[0]:g}, DEPTH_OFFSET = {chosen[1]} "
          f"(worse family {least:.3f}× the best depth); the module has "
          f"{cp.SIGNAL_RATIO:g}, {cp.DEPTH_OFFSET}")  # fmt: skip
    layouts(saved, cache, chosen)
    print(f"total {time.perf_counter() - t0:.0f} s")


def layouts(saved: dict, cache: Path | None, chosen: tuple[float, int]) -> None:
    """Stage 2: when the target depth's full tree does not fit the budget (256 KB),
    which layout: the deepest full tree that fits (``None``), or the target depth with counters
    on ``share`` of the budget and sketches of width ≥ ``min_width`` below (rule 3)?"""
    print("\nlayouts at 256 KB (the cases whose target depth exceeds the full tree)")
    print("| (share, min width) | " + " | ".join(f"{f}: mean W1 / best" for f in FAMILIES)
          + " | depth/k/width |")  # fmt: skip
    print("|---" * (2 + len(FAMILIES)) + "|")
    per: dict = {lay: {f: [] for f in FAMILIES} for lay in LAYOUTS}
    used: dict = {lay: [] for lay in LAYOUTS}
    for budget, family, n, eps in itertools.product(BUDGETS, FAMILIES, NS, EPS):
        T = RELEASES * n
        r_star = rule_depth(eps, n, *chosen)
        full = max(r for r in range(1, 30)
                   if cp._full_bytes(r, T, RELEASES, None) <= budget)  # fmt: skip
        if r_star <= full:
            continue
        X = mixture(family, n, seed=n + SEED_OFFSET[family])
        row = {}
        for lay in LAYOUTS:
            share, mw, drop = (None, 1, 0) if lay is None else (lay + (0,))[:3]
            depth, k, width, _ = cp.layout(max(r_star - drop, full), full, budget, T, RELEASES,
                                           None, share, mw)  # fmt: skip
            key = f"layout {family} {n} {eps} {depth} {k} {width}"
            if key not in saved:
                saved[key] = float(np.mean([run(X, eps, depth, s, k, width) for s in SEEDS]))
                if cache is not None:
                    cache.write_text(json.dumps(saved))
            row[lay] = saved[key]
            used[lay].append(f"{depth}/{k}/{width}")
        best = min(row.values())
        for lay in LAYOUTS:
            per[lay][family].append(row[lay] / best)
        print(f"  {budget:,} B, {family} n = {n} ε = {eps:g}: target {r_star}, full {full}: "
              + " ".join(f"{lay}:{1e3 * v:.2f}" for lay, v in row.items()), flush=True)  # fmt: skip
    scores = {}
    for lay in LAYOUTS:
        means = [float(np.mean(per[lay][f])) if per[lay][f] else float("nan") for f in FAMILIES]
        scores[lay] = np.nanmax(means)
        print(f"| {lay} | " + " | ".join(f"{m:.3f}" for m in means)
              + f" | {' '.join(used[lay])} |")  # fmt: skip
    best_lay = min(scores, key=lambda lay: scores[lay])
    print(f"\nchosen: (COUNTER_SHARE, MIN_WIDTH) = {best_lay} (None: never sketches); the "
          f"module has ({cp.COUNTER_SHARE}, {cp.MIN_WIDTH})")  # fmt: skip


def show() -> None:
    for eps, n, T in itertools.product(EPS, (16_384, 327_346), (2**18,)):
        p = cp.plan(Box.unit(2), eps, 256 * 1024, max(T, n), expected_n=n, releases=RELEASES)
        print(p.explain(), end="\n\n")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fit", action="store_true", help="the sweep that fits the constants")
    ap.add_argument("--layouts-only", action="store_true",
                    help="stage 2 only, at the module's SIGNAL_RATIO and DEPTH_OFFSET")  # fmt: skip
    ap.add_argument("--cache", type=Path, default=None,
                    help="JSON file of the sweep's W1 (re-scored, not rerun)")  # fmt: skip
    args = ap.parse_args(argv)
    if args.layouts_only:
        saved = json.loads(args.cache.read_text()) if args.cache and args.cache.exists() else {}
        layouts(saved, args.cache, (cp.SIGNAL_RATIO, cp.DEPTH_OFFSET))
    elif args.fit:
        fit(args.cache)
    else:
        show()


if __name__ == "__main__":
    main()
