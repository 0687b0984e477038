"""PrivHP memory contract: the state does not grow, and consume() peaks within a few batches.

    python benchmarks/bench_memory.py [--rows 10000000] [--batch-size 65536]

Streams a generator of ``--rows`` 2-D rows (produced lazily, one batch at a time) through
``PrivHP.consume`` and prints ``nbytes`` before and after, the peak of Python/numpy allocations
during the stream (``tracemalloc``, which numpy reports to) and the process's peak RSS growth.
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


if __name__ == "__main__":
    main()
