"""Build PrivHP summaries on several workers and merge them before one release.

    python examples/parallel_merge.py

Each worker (a process here; a machine or a Dask task works the same way) summarises its own
shard with the same public parameters and hash seed. Objects travel as their versioned bytes
(pickle goes through ``to_bytes``). Two ways to merge:

* ``raw=True`` on trusted collectors: exact states merge and the noise is drawn once at release,
  so the result is as accurate as one summary over all the data;
* the default (noise at construction) on untrusted collectors: every shipped state is already
  ε-DP, and the merged state is ε-DP for the union with the noise of all workers added up.

Shipped states hold no exact row count (``n_seen`` stays on the worker), so the driver counts the
rows it assigned. A worker ships its state once: to report again later, it would keep a
``raw=True`` summary and ship ``flush()`` deltas instead.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor

import numpy as np

from sketchsyn import Box, PrivHP
from sketchsyn.evaluate.datasets import TAXI_BOX, taxi_pickups
from sketchsyn.evaluate.metrics import wasserstein1

PARAMS = dict(epsilon=1.0, k=64, width=512, depth=18, seed=7)
ROWS_PER_SHARD = 100_000


def summarise(shard: int, raw: bool) -> PrivHP:
    php = PrivHP(Box(*TAXI_BOX), raw=raw, **PARAMS)
    php.consume(taxi_pickups(ROWS_PER_SHARD, seed=shard))
    return php  # pickled through to_bytes on the way back


def main() -> None:
    domain = Box(*TAXI_BOX)
    check = np.concatenate(list(taxi_pickups(2_000, seed=99)))
    for raw in (True, False):
        with ProcessPoolExecutor(max_workers=2) as pool:
            parts = list(pool.map(summarise, range(4), [raw] * 4))
        merged = parts[0]
        for part in parts[1:]:
            merged.merge(part)
        release = merged.release()
        w1 = wasserstein1(check, release, domain, method="ot", rng=1)
        mode = "raw, noise at release" if raw else "private at every worker"
        print(
            f"{mode}: {4 * ROWS_PER_SHARD:,} rows from 4 workers, state {merged.nbytes:,} bytes, "
            f"released total {release.total:,.0f}, W1 to fresh data {w1.value:.4f} ({w1.method})"
        )


if __name__ == "__main__":
    main()
