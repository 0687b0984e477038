"""ContinualPrivHP layouts by hand on the streams of ``bench_streams.py``: W1 at the 8 points.

    python benchmarks/bench_stream_layouts.py STREAM EPS LAYOUT [LAYOUT ...]
        [--seeds 4] [--n-eval 1500]

A probe of what the planner's layout costs on one stream (``flights`` or ``drift``, as built by
``benchmarks/bench_streams.py``), with the schedule ``releases=8``. Each ``LAYOUT`` is ``plan``
(``ContinualPrivHP.plan`` at 256 KB, as the streams benchmark's planned row) or comma-separated
changes to it: ``depth=D``, ``k=K``, ``width=W``, ``j=J`` (sketch rows), ``sketch=cs`` (Count
Sketch levels), ``full=D`` (exact counters on every level of a depth-``D`` tree), ``fit=B`` (the
widest sketch within ``B`` bytes). For example ``plan full=10 k=512,depth=17,fit=262144``. Same
seeds, paired data draws and exact optimal-transport W1 as the streams benchmark; prints the
state bytes and W1 × 10³ at each point, averaged over the seeds. The planner is fitted on
generated data; this script is for looking at what a data-dependent choice would give on these
streams, not for choosing it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_streams.py
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # sketchsyn from this checkout

import bench_streams as bs  # noqa: E402

from sketchsyn import ContinualPrivHP  # noqa: E402
from sketchsyn.synth import continual_plan as cp  # noqa: E402


def _bytes(kw: dict[str, Any], width: int) -> int:
    return ContinualPrivHP.memory_bytes(kw["k"], width, kw["sketch_depth"], kw["depth"],
                                        kw["horizon"], counter=kw["counter"],
                                        releases=kw["releases"])  # fmt: skip


def layout_kwargs(plan: dict[str, Any], spec: str) -> dict[str, Any]:
    """The plan's keywords changed by ``spec`` (module docstring)."""
    kw = dict(plan)
    if spec == "plan":
        return kw
    budget = None
    for part in spec.split(","):
        key, _, value = part.partition("=")
        if key in ("depth", "k", "width"):
            kw[key] = int(value)
        elif key == "j":
            kw["sketch_depth"] = int(value)
        elif key == "sketch":
            kw["sketch"] = {"cm": "count-min", "cs": "count-sketch"}[value]
        elif key == "full":
            kw["depth"], kw["k"] = int(value), 2 ** int(value)
        elif key == "fit":
            budget = int(value)
        else:
            raise SystemExit(f"unknown layout item {part!r} in {spec!r}")
    if budget is not None:  # the planner's own search (3 rows), scaled to j rows
        w = cp._widest(kw["k"], kw["depth"], budget, kw["horizon"], kw["releases"],
                       kw["release_every"]) * cp.SKETCH_DEPTH // kw["sketch_depth"]  # fmt: skip
        while w > 1 and _bytes(kw, w) > budget:
            w -= 1
        kw["width"] = w
    return kw


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("stream", choices=("flights", "drift"))
    ap.add_argument("eps", type=float)
    ap.add_argument("layouts", nargs="+")
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--n-eval", type=int, default=bs.N_EVAL)
    args = ap.parse_args(argv)
    bs.N_EVAL = args.n_eval
    stream = bs.drift_stream(16384) if args.stream == "drift" else bs.flights_stream(None)
    plan = bs.continual_plan(stream, args.eps)
    blocks = list(bs._blocks(stream))
    print(f"{args.stream}, ε = {args.eps:g}, {args.seeds} seeds, W1 on {args.n_eval} points "
          f"(× 10³) at the 8 release points")  # fmt: skip
    for spec in args.layouts:
        kw = layout_kwargs(plan, spec)
        w1 = []
        for j in range(args.seeds):
            seed = 100_003 * j
            c = ContinualPrivHP(stream.domain, args.eps, **kw, rng=seed)
            row = []
            for step, ins, dele in blocks:
                bs._feed(c, ins, dele)
                row.append(bs._evaluate(stream, step, c.release(), seed + step))
            w1.append(row)
        mean = 1e3 * np.mean(w1, axis=0)
        print(f"{spec:28} depth {kw['depth']:2} k {kw['k']:5} width {kw['width']:4} "
              f"{c.nbytes:9,} B  " + " ".join(f"{v:6.2f}" for v in mean)
              + f"  mean {mean.mean():.2f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
