"""Sampling speed: ``PrivateDistribution.sample(m)`` against numpy's floor for the same output.

    python benchmarks/bench_sample.py [--m 1000000] [--repeats 7]

The release is PrivHP (epsilon = 1, k = 64, width = 1024, depth 20) fitted on 10**6 points of a
2-D Gaussian mixture in the unit square, and PrivHP on an IPv4 ``BitDomain`` (depth 24) fitted
on 10**6 addresses of three busy /16 networks and a uniform background. numpy's floor is the
least numpy work that gives the same output from the same leaves, with everything that does not
depend on m computed beforehand: ``rng.choice`` of a leaf by mass, then a uniform point in its
precomputed box (``lower + u * width``; for keys, ``first + (word & (size - 1))``). Both use a
seeded PCG64 generator; the ratio is sketchsyn's best time over the floor's best time, the two
timed alternately in the same run (the machine is shared, so only the ratio means anything).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from sketchsyn import BitDomain, Box, PrivHP


def _box_release():
    rng = np.random.default_rng(0)
    centres = np.array([[0.3, 0.3], [0.7, 0.6], [0.5, 0.8]])
    X = centres[rng.integers(0, 3, 1_000_000)] + rng.normal(0, 0.05, (1_000_000, 2))
    php = PrivHP(Box.unit(2, out_of_bounds="clip"), 1.0, k=64, width=1024, depth=20, rng=1)
    php.update_many(X)
    return php.release()


def _ip_release():
    rng = np.random.default_rng(2)
    busy = np.array([(10 << 24) | (1 << 16), (172 << 24) | (16 << 16), (192 << 24) | (168 << 16)])
    keys = busy[rng.integers(0, 3, 800_000)] + rng.integers(0, 1 << 16, 800_000)
    keys = np.concatenate([keys, rng.integers(0, 1 << 32, 200_000)])
    php = PrivHP(BitDomain.ipv4(), 1.0, k=64, width=1024, depth=24, rng=3)
    php.update_many(keys)
    return php.release()


def _floor_box(lower, width, mass, m, rng):
    idx = rng.choice(mass.size, size=m, p=mass)
    return lower[idx] + rng.random((m, lower.shape[1])) * width[idx]


def _floor_keys(first, minus_one, mass, m, rng):
    idx = rng.choice(mass.size, size=m, p=mass)
    words = rng.integers(0, 2**64, size=m, dtype=np.uint64, endpoint=False)
    return (first[idx] + (words & minus_one[idx])).astype(np.int64)


def _best(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--m", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    m = args.m
    for name, release in (("Box d=2", _box_release()), ("IPv4 BitDomain", _ip_release())):
        lv = release.leaves()
        mass = lv.mass / lv.mass.sum()
        if name.startswith("Box"):
            lower, width = lv.lower, lv.upper - lv.lower

            def floor(seed, lower=lower, width=width, mass=mass):
                return _floor_box(lower, width, mass, m, np.random.default_rng(seed))

        else:
            first = lv.lower[:, 0].astype(np.uint64)
            minus_one = lv.upper[:, 0].astype(np.uint64) - first

            def floor(seed, first=first, minus_one=minus_one, mass=mass):
                return _floor_keys(first, minus_one, mass, m, np.random.default_rng(seed))

        release.sample(1000, rng=0)  # warm-up (and any one-off per-release work)
        ours_t, floor_t = [], []
        for r in range(args.repeats):
            ours_t.append(_best(lambda r=r, rel=release: rel.sample(m, rng=r), 1))
            floor_t.append(_best(lambda r=r, f=floor: f(r), 1))
        ours, base = min(ours_t), min(floor_t)
        secure = _best(lambda rel=release: rel.sample(m), 3)
        print(
            f"{name}: {release.n_leaves:,} leaves; sample({m:,}) {ours * 1e3:.1f} ms, numpy floor "
            f"{base * 1e3:.1f} ms: ratio {ours / base:.2f}x (best of {args.repeats}, seeded "
            f"PCG64); with the OS CSPRNG (rng=None) {secure * 1e3:.1f} ms"
        )


if __name__ == "__main__":
    main()
