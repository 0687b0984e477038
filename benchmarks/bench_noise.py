"""Noise speed: seconds for 10**6 exact draws, OS CSPRNG and seeded.

    python benchmarks/bench_noise.py

Each line is the best of 3 calls; the tables a new parameter needs are built on its first call
(cached afterwards), so "first call" lines time a parameter never used before in the process.
"""

from __future__ import annotations

import time

from sketchsyn.privacy.noise import discrete_gaussian, discrete_laplace


def best_of(fn, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    n = 10**6
    for label, fn in (
        ("discrete_laplace(scale=7.3)", lambda: discrete_laplace(7.3, n)),
        ("discrete_gaussian(sigma2=12345.678)", lambda: discrete_gaussian(12345.678, n)),
    ):
        t0 = time.perf_counter()
        fn()
        print(f"{label} 10**6 draws, os-csprng, first call: {time.perf_counter() - t0:.3f} s")
    for scale in (0.5, 1, 3, 50, 1000, 0.7, 2**20):
        for label, rng in (("os-csprng", None), ("seeded", 1)):
            t = best_of(lambda: discrete_laplace(scale, n, rng=rng))  # noqa: B023
            print(f"discrete_laplace(scale={scale}) 10**6 draws, {label}: {t:.3f} s")
    for sigma2 in (0.5, 4, 100, 10_000, 12345.678):
        for label, rng in (("os-csprng", None), ("seeded", 1)):
            t = best_of(lambda: discrete_gaussian(sigma2, n, rng=rng))  # noqa: B023
            print(f"discrete_gaussian(sigma2={sigma2}) 10**6 draws, {label}: {t:.3f} s")


if __name__ == "__main__":
    main()
