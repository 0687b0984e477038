"""``sketchsyn fit --schema`` on a clean table and on the same table with one bad value.

Issue 50 (item 9) found that one IPv6 address in an ``ipv4`` column with policy ``drop`` sent
the whole batch to row-by-row parsing: 200,000 rows took 118 s against 1.5 s without the value.
This script writes ``--rows`` rows (an IPv4 client and an integer) twice, the second copy with
one IPv6 address at row 1,000, fits each with the same schema in a fresh process, in paired
rounds (``--repeat``), and prints the median wall and CPU seconds of each and their ratio (the
goal: the file with the bad value costs about what the clean one does).

    python benchmarks/bench_messy_files.py              # 200,000 rows, 3 rounds
    python benchmarks/bench_messy_files.py --rows 1e6 --repeat 5

On a shared machine wall times are noisy; the CPU ratio is the steadier figure.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = (
    "columns:\n"
    "- {name: client, kind: ipv4, policy: drop}\n"
    "- {name: n, kind: integer, low: 0, high: 9}\n"
)


def write_tables(tmp: Path, rows: int) -> tuple[Path, Path, Path]:
    rng = np.random.default_rng(0)
    ips = rng.integers(1 << 24, 223 << 24, rows)
    lines = ["client,n"] + [
        f"{a >> 24}.{(a >> 16) & 255}.{(a >> 8) & 255}.{a & 255},{i % 10}"
        for i, a in enumerate(ips.tolist())
    ]
    clean, messy, schema = tmp / "clean.csv", tmp / "ipv6.csv", tmp / "s.yaml"
    clean.write_text("\n".join(lines) + "\n")
    lines[1_000] = "2001:db8::1,3"
    messy.write_text("\n".join(lines) + "\n")
    schema.write_text(SCHEMA)
    return clean, messy, schema


def fit_seconds(data: Path, schema: Path, out: Path) -> tuple[float, float]:
    """Wall and CPU seconds (user + system of the child) of one ``sketchsyn fit``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "sketchsyn",
            "fit",
            str(data),
            "--schema",
            str(schema),
            "--epsilon",
            "1",
            "-o",
            str(out),
            "-q",
        ],  # fmt: skip
        check=True,
        cwd=ROOT,
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=float, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = int(args.rows)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        clean, messy, schema = write_tables(tmp, rows)
        times: dict[str, list[tuple[float, float]]] = {"clean": [], "one IPv6": []}
        for _ in range(args.repeat):
            times["clean"].append(fit_seconds(clean, schema, tmp / "a.model"))
            times["one IPv6"].append(fit_seconds(messy, schema, tmp / "b.model"))
    print(f"sketchsyn fit --schema (ipv4 policy drop) on {rows:,} rows, {args.repeat} rounds")
    for name, runs in times.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(f"  {name:<9} wall {wall:6.2f} s   CPU {cpu:6.2f} s")
    ratios = [m[1] / c[1] for c, m in zip(times["clean"], times["one IPv6"], strict=True)]
    print(f"  CPU ratio, one IPv6 / clean (median of the rounds): {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
