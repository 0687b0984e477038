"""Noise speed: seconds for 10**6 exact draws, OS CSPRNG and seeded.

    python benchmarks/bench_noise.py
    python benchmarks/bench_noise.py --compiled-draws

Each line is the best of 3 calls; the tables a new parameter needs are built on its first call
(cached afterwards), so "first call" lines time a parameter never used before in the process.

``--compiled-draws`` (the compiled kernels): CPU nanoseconds per value of seeded
``Lap_Z(scale)`` draws of ``n`` values, drawn by the compiled loop that calls the generator
once a word (``sketchsyn.kernels._noise.lap_draw``) and by the numpy path, side by side (the
same values either way); the library takes the loop for the sizes where it is cheaper. Then
the same for private draws (the OS CSPRNG): the compiled loop reading this thread's buffer of
the CSPRNG's words against the numpy path reading ``os.urandom`` (fresh values either way).
"""

from __future__ import annotations

import sys
import time
from fractions import Fraction

from sketchsyn.privacy.noise import discrete_gaussian, discrete_laplace


def best_of(fn, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


_SCALES = (Fraction(601, 100), Fraction(1443, 100), Fraction(40), Fraction(1000))


def _loop_against_numpy(name: str, loop: tuple, numpy: tuple, sizes: tuple, seed: int | None,
                        budget: int) -> None:  # fmt: skip
    """One table: CPU ns a value of ``_laplace_core`` with ``noise.<name>`` set to ``loop``
    (every size by the compiled loop) and to ``numpy`` (none), ``seed`` its source (None: the
    OS CSPRNG), about ``budget`` values a cell."""
    from sketchsyn.privacy import noise
    from sketchsyn.privacy.rng import as_source

    chosen = getattr(noise, name)
    print(f"{'scale':>8}{'n':>11}{'loop ns/value':>15}{'numpy ns/value':>16}")
    for scale in _SCALES:
        for n in sizes:
            cost = []
            for setting in (loop, numpy):
                setattr(noise, name, setting)
                src = as_source(seed)
                noise._laplace_core(scale, n, src)  # tables built
                calls = max(3, budget // n)
                t = time.process_time()
                for _ in range(calls):
                    noise._laplace_core(scale, n, src)
                cost.append((time.process_time() - t) / calls / n * 1e9)
            print(f"{float(scale):8.2f}{n:11,}{cost[0]:15.1f}{cost[1]:16.1f}")
    setattr(noise, name, chosen)


def compiled_draws() -> None:
    """Seeded draws, then private draws (the OS CSPRNG: the compiled loop reading this
    thread's buffer of the CSPRNG's words, ``sketchsyn.kernels.oswords``, against the numpy
    path reading ``os.urandom``; the values differ, fresh words, their law is the same)."""
    from sketchsyn import kernels
    from sketchsyn.privacy import noise

    if not kernels.enabled():
        sys.exit(f"needs the compiled kernels: {kernels.why()}")
    chosen = noise._COMPILED_DRAWS
    print(f"the library's choice: the loop for {chosen[0]} <= n < {chosen[1]} values "
          f"({chosen[2]} for a wide table, whose magnitudes often go beyond it)")  # fmt: skip
    _loop_against_numpy("_COMPILED_DRAWS", (1, 2**62, 2**62), (2**62,) * 3,
                        (64, 256, 1024, 2048, 4096, 65536, 2**20), 1, 2**21)  # fmt: skip
    chosen = noise._PRIVATE_DRAWS
    print(f"\nprivate draws (the OS CSPRNG); the library's choice: the loop for {chosen[0]} <= n "
          f"< {chosen[1]} values ({chosen[2]} for a wide table)")  # fmt: skip
    _loop_against_numpy("_PRIVATE_DRAWS", (2, 2**62, 2**62), (2**62,) * 3,
                        (2, 8, 64, 256, 1024, 4096, 65536, 2**20), None, 2**20)  # fmt: skip


def main() -> None:
    if "--compiled-draws" in sys.argv[1:]:
        compiled_draws()
        return
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
