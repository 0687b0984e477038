"""Throughput of ``sketchsyn fit`` on a big CSV against ``pandas.read_csv`` alone on that file.

Generates a CSV of ``--rows`` rows (lon, lat, fare; default 10**7) in a temporary directory, then
runs, each in a fresh Python process:

1. ``pandas.read_csv(FILE, usecols=["lon", "lat"])``: just reading the file into memory;
2. ``sketchsyn.io.readers.CSVReader`` alone: our bounded-memory reading, batch by batch, no summary
   (so that the cost of reading and the cost of PrivHP show separately);
3. ``sketchsyn fit FILE --columns lon,lat --bounds … --epsilon 1 --memory 256KB -o MODEL``:
   reading the same file in bounded memory, PrivHP updates and the release.

It prints wall time, rows/s, CPU time and peak resident memory of both, and the ratios (our
overhead over just reading the file). Interpreter start-up and imports are inside both timings.
Timings on a shared machine are noisy (the CPU ratio is the steadier figure): run it more than
once before trusting a digit.

    python benchmarks/bench_cli.py              # 10**7 rows (about 0.3 GB of CSV)
    python benchmarks/bench_cli.py --rows 1e6   # a quick run
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BOUNDS = "-74.05:-73.75,40.6:40.9"


def make_csv(path: Path, rows: int, chunk: int = 1_000_000) -> None:
    """Simulated ride pickups (two Gaussian hot spots, clipped to the box) plus a fare column."""
    import pandas as pd

    rng = np.random.default_rng(0)
    with open(path, "w", newline="") as fh:
        fh.write("lon,lat,fare\n")
        for start in range(0, rows, chunk):
            m = min(chunk, rows - start)
            hot = rng.random(m) < 0.6
            lon = np.where(hot, rng.normal(-73.98, 0.02, m), rng.normal(-73.88, 0.05, m))
            lat = np.where(hot, rng.normal(40.75, 0.02, m), rng.normal(40.70, 0.06, m))
            frame = pd.DataFrame(
                {
                    "lon": np.clip(lon, -74.05, -73.75),
                    "lat": np.clip(lat, 40.6, 40.9),
                    "fare": np.round(rng.gamma(2.0, 7.0, m), 2),
                }
            )
            frame.to_csv(fh, header=False, index=False, float_format="%.6f")


def timed(cmd: list[str]) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS in MB) of a child process; raises if it fails."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - t0
    err = proc.stderr.read().decode() if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[:4]} failed ({proc.returncode}):\n{err}")
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=float, default=1e7, help="CSV rows (default 1e7)")
    parser.add_argument("--memory", default="256KB", help="sketchsyn fit --memory")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each; the best is kept")
    parser.add_argument("--make-csv", metavar="PATH", help=argparse.SUPPRESS)
    args = parser.parse_args()
    rows = int(args.rows)
    if args.make_csv:
        make_csv(Path(args.make_csv), rows)
        return
    with tempfile.TemporaryDirectory(prefix="bench_cli_") as tmp:
        path = Path(tmp) / "rides.csv"
        t0 = time.perf_counter()
        # In a child process: Linux keeps a process's peak RSS across fork and exec, so the parent
        # stays small for the children's peak memory figures to be their own.
        subprocess.run(
            [sys.executable, __file__, "--rows", str(rows), "--make-csv", str(path)], check=True
        )
        size = path.stat().st_size
        print(f"generated {rows:,} rows, {size / 1e6:,.0f} MB in {time.perf_counter() - t0:.1f} s")
        pandas_cmd = [
            sys.executable,
            "-c",
            f"import pandas; pandas.read_csv({str(path)!r}, usecols=['lon', 'lat'])",
        ]
        fit_cmd = [
            sys.executable,
            "-m",
            "sketchsyn",
            "fit",
            str(path),
            "--columns",
            "lon,lat",
            f"--bounds={BOUNDS}",
            "--epsilon",
            "1",
            "--memory",
            args.memory,
            "--expected-n",
            str(rows),
            "-o",
            str(Path(tmp) / "rides.model"),
            "--quiet",
        ]
        reader_cmd = [
            sys.executable,
            "-c",
            "from sketchsyn.io.readers import CSVReader\n"
            f"for _ in CSVReader({str(path)!r}, ['lon', 'lat']): pass",
        ]
        results = {}
        for name, cmd in (
            ("pandas.read_csv alone", pandas_cmd),
            ("CSVReader alone", reader_cmd),
            ("sketchsyn fit", fit_cmd),
        ):
            runs = [timed(cmd) for _ in range(args.repeat)]
            results[name] = min(runs)
        print(f"{'':24}{'wall s':>9}{'rows/s (wall)':>15}{'CPU s':>9}{'peak RSS MB':>13}")
        for name, (secs, cpu, rss) in results.items():
            print(f"{name:24}{secs:>9.2f}{rows / secs:>15,.0f}{cpu:>9.2f}{rss:>13,.0f}")
        pandas = results["pandas.read_csv alone"]
        for name in ("CSVReader alone", "sketchsyn fit"):
            ours = results[name]
            print(
                f"ratio {name} / read_csv: wall {ours[0] / pandas[0]:.2f}, "
                f"CPU {ours[1] / pandas[1]:.2f}"
            )
        print("(interpreter start and imports included; CPU counts both PrivHP threads)")
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores (shared: timings noisy)")


if __name__ == "__main__":
    main()
