"""Sketch speed: CountMinSketch.update_many against a per-key loop over DataSketches.

    python benchmarks/bench_sketches.py [--batches 30]

Both use w = 1024, j = 3. sketchsyn gets batches of 65 536 uint64 keys; DataSketches'
``count_min_sketch.update`` is called once per key from Python (its Python API has no batch
update), which is how a user would feed it a stream. Also prints the accuracy of both on the
same Zipf(1.1) stream.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from sketchsyn import CountMinSketch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--loop-keys", type=int, default=200_000)
    args = parser.parse_args()
    import datasketches

    rng = np.random.default_rng(0)
    batches = rng.zipf(1.1, size=(args.batches, 65_536)).astype(np.uint64)
    times = []
    for _ in range(3):
        cms = CountMinSketch(1024, 3, seed=1)
        t0 = time.perf_counter()
        for b in batches:
            cms.update_many(b)
        times.append(time.perf_counter() - t0)
    ours = batches.size / min(times)
    print(
        f"sketchsyn CountMinSketch.update_many: {ours:,.0f} keys/s "
        f"(best of 3, {args.batches} batches of 65,536)"
    )

    keys = batches.ravel()[: args.loop_keys].tolist()
    ds = datasketches.count_min_sketch(3, 1024)
    t0 = time.perf_counter()
    for k in keys:
        ds.update(k)
    theirs = len(keys) / (time.perf_counter() - t0)
    print(
        f"DataSketches count_min_sketch.update, per-key Python loop: {theirs:,.0f} keys/s "
        f"({len(keys):,} keys)"
    )
    print(f"ratio: {ours / theirs:.1f}x")

    distinct, freq = np.unique(batches, return_counts=True)
    ds_all = datasketches.count_min_sketch(3, 1024)
    for k, f in zip(distinct.tolist(), freq.tolist(), strict=False):
        ds_all.update(k, f)
    over_ours = (cms.query_many(distinct) - freq).mean()
    over_ds = np.mean([ds_all.get_estimate(k) for k in distinct.tolist()] - freq)
    print(
        f"mean overestimate over {distinct.size:,} distinct keys: sketchsyn {over_ours:,.1f}, "
        f"DataSketches {over_ds:,.1f}"
    )


if __name__ == "__main__":
    main()
