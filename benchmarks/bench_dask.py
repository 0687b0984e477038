"""Rows per second of sketchsyn.dask against the number of Dask worker processes.

    pip install ".[dask]" && python benchmarks/bench_dask.py [--rows 4000000] [--workers 1 2]

The rows are generated on the workers (``dask.array.random``), summarised per partition by a raw
PrivHP (trusted mode), merged by a tree reduction and brought back; the time covers the whole
``fit`` (generation, summaries, merges, transfers), after a warm-up run that imports sketchsyn on
every worker. The reference is one process calling ``update_many`` on the same number of rows
already in memory. PrivHP's ``update_many`` already uses two threads on batches of 16,384 rows
or more, so one worker can keep two cores busy: on a two-core machine the second worker adds
little. Timings on a shared machine are noisy; run it twice.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sketchsyn import Box, PrivHP  # noqa: E402
from sketchsyn import dask as sdask  # noqa: E402

MAKE = functools.partial(PrivHP, Box.unit(2), 1.0, 64, 1024, depth=20, raw=True)


def one_process(rows: int) -> float:
    php = MAKE()
    X = np.random.default_rng(0).random((rows, 2))
    t = time.perf_counter()
    for s in range(0, rows, 65536):
        php.update_many(X[s : s + 65536])
    return rows / (time.perf_counter() - t)


def on_cluster(rows: int, workers: int, chunk: int) -> tuple[float, int]:
    import dask.array as da
    from distributed import Client, LocalCluster

    os.environ["PYTHONPATH"] = str(ROOT)
    with (
        LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster),
    ):
        warm = da.random.default_rng(1).random((4 * chunk // 16, 2), chunks=(chunk // 16, 2))
        sdask.fit(warm, MAKE)
        X = da.random.default_rng(2).random((rows, 2), chunks=(chunk, 2))
        t = time.perf_counter()
        merged = sdask.fit(X, MAKE, split_every=4)
        elapsed = time.perf_counter() - t
    return rows / elapsed, int(merged._tree[0])  # the exact root counter of a raw summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--chunk", type=int, default=250_000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    print(f"rows={args.rows:,} chunk={args.chunk:,} cores={os.cpu_count()}")
    print("PrivHP k=64 width=1024 depth=20 raw (trusted mode)")
    print(f"one process, update_many on rows in memory: {one_process(args.rows):,.0f} rows/s")
    for w in args.workers:
        rate, n = on_cluster(args.rows, w, args.chunk)
        assert n == args.rows
        print(
            f"LocalCluster {w} worker process(es), generate + summarise + merge: {rate:,.0f} rows/s"
        )


if __name__ == "__main__":
    main()
