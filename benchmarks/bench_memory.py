"""PrivHP memory contract: the state does not grow, and consume() peaks within a few batches.

    python benchmarks/bench_memory.py [--rows 10000000] [--batch-size 65536] [--held-rows 327346]

Streams a generator of ``--rows`` 2-D rows (produced lazily, one batch at a time) through
``PrivHP.consume`` and prints ``nbytes`` before and after, the peak of Python/numpy allocations
during the stream (``tracemalloc``, which numpy reports to) and the process's peak RSS growth.

Then, for PrivHP (numpy path and, the compiled kernels),
StreamingPrivTree (256 KB) and OnlineSynthesizer fed ``--held-rows`` clustered 2-D rows in
batches of ``--batch-size``: ``nbytes``, the memory the object holds (what tracemalloc sees
freed when it is dropped), the largest allocation of one update above what was there before it
(a step included; process-wide caches, such as the exact sampler's tables, warmed by a first
run) and the working arrays PrivHP keeps per thread for the next batch.
"""

from __future__ import annotations

import argparse
import resource
import time
import tracemalloc

import numpy as np

from sketchsyn import Box, PrivHP


def rows(n: int, batch: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    done = 0
    while done < n:
        m = min(batch, n - done)
        yield rng.beta(2.0, 5.0, size=(m, 2))
        done += m


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--batch-size", type=int, default=65_536)
    parser.add_argument("--held-rows", type=int, default=327_346, help="0: skip that part")
    args = parser.parse_args()

    php = PrivHP(Box.unit(2), epsilon=1.0, k=64, width=1024, sketch_depth=3, depth=24)
    formula = PrivHP.memory_bytes(64, 1024, 3, 24)
    batch_bytes = args.batch_size * 2 * 8
    print(
        f"state before: {php.nbytes:,} bytes (formula 8·(w·j·(r−L_c) + 2^(L_c+1) − 1) + "
        f"8·(r+1) + 64 = {formula:,})"
    )
    rss0 = rss_mib()
    tracemalloc.start()
    t0 = time.perf_counter()
    n = php.consume(rows(args.rows, args.batch_size), batch_size=args.batch_size)
    elapsed = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"streamed {n:,} rows in {elapsed:.1f} s ({n / elapsed:,.0f} rows/s)")
    print(f"state after:  {php.nbytes:,} bytes (unchanged: {php.nbytes == formula})")
    print(
        f"peak traced allocations during consume: {peak / 2**20:.1f} MiB "
        f"= {peak / batch_bytes:.1f} input batches of {batch_bytes / 2**20:.2f} MiB"
    )
    print(f"peak RSS growth: {rss_mib() - rss0:.1f} MiB")
    if args.held_rows:
        held_and_peaks(args.held_rows, args.batch_size)


def held_and_peaks(rows_n: int, batch: int) -> None:
    """nbytes, memory held and the peak of one update, for the summaries of this library."""
    import contextlib
    import gc

    from sketchsyn import OnlineSynthesizer, StreamingPrivTree, kernels
    from sketchsyn.synth.privhp import bank, buckets

    X = np.clip(np.random.default_rng(1).normal(0.3, 0.1, size=(rows_n, 2)), 0, 1)
    makers = {
        "PrivHP, numpy path": (
            lambda: PrivHP.for_memory(Box.unit(2), 1.0, 256 * 1024, rows_n, rng=1),
            kernels.numpy_only,
        ),
        "StreamingPrivTree (256 KB, eps 4)": (
            lambda: StreamingPrivTree(Box.unit(2), 4.0, horizon=rows_n, releases=8, rng=1),
            contextlib.nullcontext,
        ),
        "OnlineSynthesizer (eps 1)": (
            lambda: OnlineSynthesizer(Box.unit(2), 1.0, rng=1),
            contextlib.nullcontext,
        ),
    }
    if kernels.enabled():
        makers["PrivHP, kernels"] = (makers["PrivHP, numpy path"][0], contextlib.nullcontext)

    def run(make, path, measure: bool) -> tuple[int, int, int]:
        obj, worst = make(), 0
        with path():
            for i in range(0, rows_n, batch):
                if measure:
                    gc.collect()
                    before = tracemalloc.get_traced_memory()[0]
                    tracemalloc.reset_peak()
                obj.update_many(X[i : i + batch])
                if measure:
                    worst = max(worst, tracemalloc.get_traced_memory()[1] - before)
        gc.collect()
        held, nbytes = tracemalloc.get_traced_memory()[0], obj.nbytes
        del obj
        gc.collect()
        return nbytes, held - tracemalloc.get_traced_memory()[0], worst

    print(f"\n{rows_n:,} clustered rows in batches of {batch:,} (tracemalloc):")
    print(
        f"  {'':36}{'nbytes':>12}{'held':>12}{'held/nbytes':>13}{'update peak':>13}{'/nbytes':>9}"
    )
    tracemalloc.start()
    for name, (make, path) in makers.items():
        run(make, path, False)
        nbytes, held, worst = run(make, path, True)
        print(
            f"  {name:36}{nbytes:>12,}{held:>12,}{held / nbytes:>13.2f}{worst:>13,}"
            f"{worst / nbytes:>9.1f}"
        )
    tracemalloc.stop()
    print(
        "  PrivHP's bucket tables, the process's (built by the untimed first run, shared by "
        f"every summary of the same seeds; not state): {buckets.table_bytes():,} bytes"
    )
    kept = sum(b.nbytes for b in bank._scratch()._bufs.values())
    print(f"  PrivHP's working arrays kept on this thread for the next batch: {kept:,} bytes")


if __name__ == "__main__":
    main()
