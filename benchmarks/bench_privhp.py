"""PrivHP speed: update_many against a plain per-item Python reference, release and sample times.

    python benchmarks/bench_privhp.py [--batches 20] [--reference-items 20000]

Configuration of the issue: d = 2, depth = 24, k = 64, width = 1024, sketch_depth = 3, uniform
float64 batches of 65 536 points. The per-item reference below is the update of Algorithm 2
written line by line (Morton code bit by bit, one counter or one sketch row at a time, hashing
with ``mmh3``); the script checks that it produces exactly the state that ``update_many`` does,
so the speed-up is measured on the same computation.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import mmh3
import numpy as np

from sketchsyn import Box, PrivHP


def reference_update(php: PrivHP, tree: np.ndarray, bank: np.ndarray, x) -> None:
    """One item, the way a reader would write Algorithm 2 (lines 12–18) by hand."""
    domain, r, L = php.domain, php.depth, php.counter_depth
    d = domain.d
    # Bits per coordinate: level l cuts coordinate (l − 1) mod d.
    bits = [sum(1 for level in range(1, r + 1) if (level - 1) % d == i) for i in range(d)]
    q = []
    for i in range(d):
        lo, hi = float(domain.lower[i]), float(domain.upper[i])
        cells = 2 ** bits[i]
        q.append(min(int((float(x[i]) - lo) / (hi - lo) * cells), cells - 1))
    code = 0
    used = [0] * d
    for level in range(1, r + 1):
        i = (level - 1) % d
        used[i] += 1
        code = (code << 1) | ((q[i] >> (bits[i] - used[i])) & 1)
    for level in range(r + 1):
        prefix = code >> (r - level)
        if level <= L:
            tree[2**level - 1 + prefix] += 1
        else:
            sketch = php.sketches[level - L - 1]
            for row, row_seed in enumerate(sketch._family.row_seeds):
                h = mmh3.hash(prefix.to_bytes(8, "little"), int(row_seed), signed=False)
                bank[level - L - 1, row, (h * php.width) >> 32] += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--reference-items", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    params = dict(epsilon=1.0, k=64, width=1024, sketch_depth=3, depth=24)
    domain = Box.unit(2)
    rng = np.random.default_rng(0)
    batch = 65_536
    data = rng.random((args.batches, batch, 2))
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, numpy {np.__version__}")
    print(f"config: d=2 {params} batch={batch}")

    best = float("inf")
    for _ in range(args.repeats):
        php = PrivHP(domain, rng=1, **params)
        t0 = time.perf_counter()
        for b in data:
            php.update_many(b)
        best = min(best, time.perf_counter() - t0)
    fast = args.batches * batch / best
    print(f"update_many: {fast:,.0f} points/s (best of {args.repeats}, {args.batches} batches)")

    items = data.reshape(-1, 2)[: args.reference_items]
    ref = PrivHP(domain, rng=1, raw=True, **params)
    tree, bank = ref._tree.copy(), ref._bank.copy()
    t0 = time.perf_counter()
    for x in items:
        reference_update(ref, tree, bank, x)
    slow = items.shape[0] / (time.perf_counter() - t0)
    print(f"per-item Python reference: {slow:,.0f} points/s ({items.shape[0]:,} points)")
    check = PrivHP(domain, rng=1, raw=True, **params)
    check.update_many(items)
    same = np.array_equal(check._tree, tree) and np.array_equal(check._bank, bank)
    print(f"reference state == update_many state: {same}")
    print(f"speed-up: {fast / slow:,.1f}x")

    t0 = time.perf_counter()
    release = php.release()
    print(
        f"release(): {time.perf_counter() - t0:.3f} s "
        f"({len(release.leaves().count)} leaves, {php.partition_tree.n_nodes} nodes)"
    )
    t0 = time.perf_counter()
    release.sample(10**6, rng=2)
    print(f"sample(10**6): {time.perf_counter() - t0:.3f} s")
    print(f"state: {php.nbytes:,} bytes")


if __name__ == "__main__":
    main()
