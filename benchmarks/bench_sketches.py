"""Sketch speed: CountMinSketch.update_many against a per-key loop over DataSketches.

    python benchmarks/bench_sketches.py [--batches 30] [--loop-keys 200000] [--repeats 5]

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
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    import datasketches

    rng = np.random.default_rng(0)
    batches = rng.zipf(1.1, size=(args.batches, 65_536)).astype(np.uint64)
    times = []
    for _ in range(args.repeats):
        cms = CountMinSketch(1024, 3, seed=1)
        t0 = time.perf_counter()
        for b in batches:
            cms.update_many(b)
        times.append(time.perf_counter() - t0)
    ours = batches.size / min(times)
    median = batches.size / float(np.median(times))
    print(
        f"sketchsyn CountMinSketch.update_many: {ours:,.0f} keys/s best, {median:,.0f} median "
        f"({args.repeats} repeats of {args.batches} batches of 65,536 uint64 keys)"
    )

    keys = batches.ravel()[: args.loop_keys].tolist()
    loop_times = []
    for _ in range(args.repeats):
        ds = datasketches.count_min_sketch(3, 1024)
        update = ds.update
        t0 = time.perf_counter()
        for k in keys:
            update(k)
        loop_times.append(time.perf_counter() - t0)
    theirs = len(keys) / min(loop_times)
    theirs_median = len(keys) / float(np.median(loop_times))
    print(
        f"DataSketches count_min_sketch.update, per-key Python loop: {theirs:,.0f} keys/s best, "
        f"{theirs_median:,.0f} median ({args.repeats} repeats of {len(keys):,} keys)"
    )
    print(
        f"ratio (best / best): {ours / theirs:.1f}x; "
        f"(median / median): {median / theirs_median:.1f}x"
    )

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
