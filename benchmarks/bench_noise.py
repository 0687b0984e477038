"""Noise speed: seconds for 10**6 exact draws, OS CSPRNG and seeded.

python benchmarks/bench_noise.py
"""

from __future__ import annotations

import time

from sketchsyn.noise import discrete_gaussian, discrete_laplace


def best_of(fn, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    n = 10**6
    for scale in (0.5, 1, 3, 50, 1000):
        for label, rng in (("os-csprng", None), ("seeded", 1)):
            t = best_of(lambda: discrete_laplace(scale, n, rng=rng))  # noqa: B023
            print(f"discrete_laplace(scale={scale}) 10**6 draws, {label}: {t:.3f} s")
    for sigma2 in (0.5, 4, 100, 10_000):
        for label, rng in (("os-csprng", None), ("seeded", 1)):
            t = best_of(lambda: discrete_gaussian(sigma2, n, rng=rng))  # noqa: B023
            print(f"discrete_gaussian(sigma2={sigma2}) 10**6 draws, {label}: {t:.3f} s")


if __name__ == "__main__":
    main()
