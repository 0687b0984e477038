"""PrivHP speed: update_many against a plain per-item Python reference, release and sample times.

    python benchmarks/bench_privhp.py [--batches 20] [--reference-items 20000]

Configuration of the issue: d = 2, depth = 24, k = 64, width = 1024, sketch_depth = 3, uniform
float64 batches of 65 536 points. The per-item reference below is the update of Algorithm 2
written line by line (Morton code bit by bit, one counter or one sketch row at a time, hashing
with ``mmh3``); the script checks that it produces exactly the state that ``update_many`` does,
so the speed-up is measured on the same computation.

It then prints the CPU time per 10**6 rows of each stage of ``update_many`` (encoding, exact
level counts with one and two threads, the whole update) at the plan of ``sketchsyn fit
--memory 256KB`` for 10**7 rows, for batches of 65,536 to 1,048,576 rows. To compare with
another version of the library, run the script with that version first on ``PYTHONPATH``
(e.g. ``git archive HEAD sketchsyn | tar -x -C /tmp/head`` and ``PYTHONPATH=/tmp/head``).

Last, ``update_many``'s points per CPU-second and per wall-second on the plan of
``benchmarks/bench_cli.py --rows 1e8`` (``PrivHP.for_memory(box, 1, 256 KB, 10**8)``, 262,144-row
batches of its rides, rows already in memory), the numpy path (the reference, what
``update_many`` does without the compiled kernels), the numpy path hashing every cell (without
its bucket tables: ``sketchsyn.synth.privhp.buckets``) and the compiled kernels
(``sketchsyn.kernels``)
side by side in one run, with their ratios (``--cli-rows 0`` skips it; ``--reference`` runs the
numpy path everywhere above, as without the extra). All paths are checked to give the same
state.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import time
from collections.abc import Callable, Iterator

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


def rides(n: int, seed: int = 0) -> np.ndarray:
    """``n`` simulated ride pickups (lon, lat): the data of ``benchmarks/bench_cli.py``."""
    rng = np.random.default_rng(seed)
    hot = rng.random(n) < 0.6
    lon = np.where(hot, rng.normal(-73.98, 0.02, n), rng.normal(-73.88, 0.05, n))
    lat = np.where(hot, rng.normal(40.75, 0.02, n), rng.normal(40.70, 0.06, n))
    return np.column_stack([np.clip(lon, -74.05, -73.75), np.clip(lat, 40.6, 40.9)])


def _cpu(step: Callable[[int], object], count: int, rows: int) -> float:
    """CPU seconds per 10**6 rows of ``step(0) … step(count − 1)`` (best of 2)."""
    best = float("inf")
    for _ in range(2):
        t0 = time.process_time()
        for i in range(count):
            step(i)
        best = min(best, time.process_time() - t0)
    return best * 1e6 / rows


def _stage_row(php: PrivHP, box: Box, parts: list[np.ndarray]) -> tuple[float, ...]:
    """(encode, level counts, level counts on one thread, update_many) for these batches."""
    from sketchsyn.synth.privhp import bank

    rows = sum(p.shape[0] for p in parts)
    codes = [np.asarray(box.encode(p, php.depth), dtype=np.uint64) for p in parts]
    enc = _cpu(lambda i: box.encode(parts[i], php.depth), len(parts), rows)
    level = _cpu(lambda i: php._level_counts(codes[i]), len(parts), rows)
    saved = bank._PARALLEL_MIN_ROWS
    bank._PARALLEL_MIN_ROWS = 1 << 62
    try:
        level1 = _cpu(lambda i: php._level_counts(codes[i]), len(parts), rows)
    finally:
        bank._PARALLEL_MIN_ROWS = saved
    upd = _cpu(lambda i: php.update_many(parts[i]), len(parts), rows)
    return enc, level, level1, upd


def stages(rows: int) -> None:
    """CPU seconds per 10**6 rows of each stage of update_many, at ``sketchsyn fit``'s plan.

    The PrivHP that ``sketchsyn fit --memory 256KB --expected-n 10000000`` builds for the
    rides of ``bench_cli.py``; batches of several sizes; CPU time of every thread (steady under
    load, unlike wall time). ``level counts`` is the exact counting of one encoded batch (the
    bank's per-cell part, hashing and bincounts), with PrivHP's second thread and without.
    """
    box = Box([-74.05, 40.6], [-73.75, 40.9])
    X = rides(rows)
    print(f"\nstages, CPU-s per 10^6 rows ({rows:,} rows of bench_cli.py's rides, best of 2):")
    for sketch in ("count-min", "count-sketch"):
        php = PrivHP.for_memory(box, 1.0, 256 * 1024, 10**7, rng=1, sketch=sketch)
        print(
            f"{sketch}: depth {php.depth}, counter_depth {php.counter_depth}, width {php.width}, "
            f"sketch_depth {php.sketch_depth}"
        )
        print(f"  {'batch':>9}{'encode':>9}{'level counts':>14}{'1 thread':>10}{'update_many':>13}")
        for size in (65536, 262144, 524288, 1048576):
            parts = [X[s : s + size] for s in range(0, rows - size + 1, size)]
            enc, level, level1, upd = _stage_row(php, box, parts)
            print(f"  {size:>9}{enc:>9.4f}{level:>14.4f}{level1:>10.4f}{upd:>13.4f}")


@contextlib.contextmanager
def _no_tables() -> Iterator[None]:
    """The numpy path hashing every per-cell level's cells (no bucket tables: their speed-up
    measured beside it)."""
    from sketchsyn import kernels
    from sketchsyn.synth.privhp import buckets

    saved = buckets.MAX_LEVEL
    buckets.MAX_LEVEL = -1
    try:
        with kernels.numpy_only():
            yield
    finally:
        buckets.MAX_LEVEL = saved


def cli_plan(rows: int, repeats: int, batch: int = 262144) -> None:
    """update_many on bench_cli.py's plan for 10**8 rows: numpy path vs kernels, side by side.

    Each path gets one warm-up batch, then ``repeats`` passes over the rows alternating with
    the other path; the best pass of each is kept (CPU time of every thread of the process, and
    wall time).
    """
    from sketchsyn import kernels

    box = Box([-74.05, 40.6], [-73.75, 40.9])
    X = rides(rows)
    print(
        f"\nupdate_many on bench_cli.py's plan for 10^8 rows (PrivHP.for_memory(box, 1, 256 KB, "
        f"10^8)), {rows:,} rows in {batch:,}-row batches, best of {repeats}:"
    )
    if not kernels.enabled():
        print(f"  the numpy path only: {kernels.why()}")
    paths = {"numpy (reference)": kernels.numpy_only, "numpy, no bucket tables": _no_tables}
    if kernels.enabled():
        paths["compiled kernels"] = contextlib.nullcontext
    for sketch in ("count-min", "count-sketch"):
        best: dict[str, tuple[float, float]] = {}
        states = {}
        for name, path in paths.items():
            php = PrivHP.for_memory(box, 1.0, 256 * 1024, 10**8, rng=1, sketch=sketch)
            with path():
                php.update_many(X[:batch])
            states[name] = php
        for _ in range(repeats):
            for name, path in paths.items():
                php = states[name]
                c0, t0 = time.process_time(), time.perf_counter()
                with path():
                    for i in range(0, rows, batch):
                        php.update_many(X[i : i + batch])
                cpu, wall = time.process_time() - c0, time.perf_counter() - t0
                old = best.get(name, (float("inf"), float("inf")))
                best[name] = (min(old[0], cpu), min(old[1], wall))
        same = len({p._tree.tobytes() + p._bank.tobytes() for p in states.values()}) == 1
        php = next(iter(states.values()))
        print(
            f"  {sketch} (depth {php.depth}, counter_depth {php.counter_depth}, width "
            f"{php.width}, sketch_depth {php.sketch_depth}); same state: {same}"
        )
        print(f"    {'path':24}{'CPU s':>8}{'wall s':>8}{'M points/CPU-s':>16}{'M points/s':>12}")
        for name, (cpu, wall) in best.items():
            rates = f"{rows / cpu / 1e6:>16.1f}{rows / wall / 1e6:>12.1f}"
            print(f"    {name:24}{cpu:>8.3f}{wall:>8.3f}{rates}")
        (c0, w0), (c1, w1) = best["numpy (reference)"], best["numpy, no bucket tables"]
        print(f"    {'numpy: tables / none':24}{'':16}{c1 / c0:>16.2f}x{w1 / w0:>11.2f}x")
        if "compiled kernels" in best:
            c2, w2 = best["compiled kernels"]
            print(f"    {'kernels / numpy':24}{'':16}{c0 / c2:>16.2f}x{w0 / w2:>11.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--reference-items", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--stages", type=float, default=2**21, help="rows for the per-stage CPU table (0: skip)"
    )
    parser.add_argument(
        "--cli-rows", type=float, default=2**22, help="rows for the bench_cli plan table (0: skip)"
    )
    parser.add_argument(
        "--reference", action="store_true", help="the numpy path throughout (no kernels)"
    )
    args = parser.parse_args()
    if args.reference:
        from sketchsyn import kernels

        kernels._OFF = True

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
    if args.stages:
        stages(int(args.stages))
    if args.cli_rows and not args.reference:
        cli_plan(int(args.cli_rows), args.repeats)


if __name__ == "__main__":
    main()
