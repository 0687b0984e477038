"""``sketchsyn fit`` counting on one thread (its rule beside a reader thread on a two-core
machine) against PrivHP's two counting threads, on the files of ``bench_cli.py``.

    python benchmarks/bench_fit_threads.py --data /tmp/rides8 [--repeat 3] [--files parquet csv]

``--data DIR`` holds ``rides.parquet`` and ``rides.csv`` (``bench_cli.py --rows 1e8 --data DIR``
writes them) and ``rows`` (their row count). Each round runs, in fresh processes, ``fit`` as
it is (one counting thread while the reader's thread holds the other core, on fewer than three
cores) and ``fit`` with that rule switched off (``cli.fit._counting_threads`` made a no-op, so
PrivHP splits large batches over its two worker threads), on the numpy path
(``SKETCHSYN_KERNELS=numpy``) and with the compiled kernels. It prints the medians of CPU
(user + system, all threads) and wall seconds of each, and two threads / one thread.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

BOUNDS = "--bounds=-74.05:-73.75,40.6:40.9"
CHILD = """
import sys
if sys.argv[1] == "two":
    import contextlib
    from sketchsyn.cli import fit
    fit._counting_threads = lambda reader: contextlib.nullcontext()
from sketchsyn.__main__ import command
sys.argv = ["sketchsyn", *sys.argv[2:]]
command()
"""


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(CPU s of the child, wall s)."""
    r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--files", nargs="+", default=["parquet", "csv"])
    args = parser.parse_args()
    rows = int((args.data / "rows").read_text())
    model = args.data / "threads.model"
    print(f"{rows:,} rows; {os.cpu_count()} cores; {args.repeat} paired rounds, medians\n")
    print(f"{'file':8}{'path':9}{'threads':>8}{'CPU s':>8}{'wall s':>8}")
    for kind in args.files:
        path = args.data / f"rides.{kind}"
        fit = ["fit", str(path), "--columns", "lon,lat", BOUNDS, "--epsilon", "1", "--memory",
               "256KB", "--expected-n", str(rows), "-o", str(model), "--quiet"]  # fmt: skip
        runs: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for _ in range(args.repeat):
            for kernels in ("numpy", "auto"):
                env = dict(os.environ, SKETCHSYN_KERNELS=kernels)
                for threads in ("one", "two"):
                    cmd = [sys.executable, "-c", CHILD, threads, *fit]
                    runs.setdefault((kernels, threads), []).append(timed(cmd, env))
        for kernels in ("numpy", "auto"):
            med = {}
            for threads in ("one", "two"):
                got = runs[(kernels, threads)]
                med[threads] = (statistics.median(g[0] for g in got),
                                statistics.median(g[1] for g in got))  # fmt: skip
                name = "numpy" if kernels == "numpy" else "kernels"
                print(f"{kind:8}{name:9}{threads:>8}{med[threads][0]:>8.2f}{med[threads][1]:>8.2f}")
            (c1, w1), (c2, w2) = med["one"], med["two"]
            print(f"{'':8}{'':9}{'two/one':>8}{c2 / c1:>7.2f}x{w2 / w1:>7.2f}x")
    model.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
