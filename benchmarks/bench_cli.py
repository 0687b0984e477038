"""``sketchsyn fit`` against pandas, pyarrow and polars reading the same CSV and Parquet file.

Generates ``--rows`` rows (lon, lat, fare; default 10**7, about 0.3 GB of CSV) in a temporary
directory, writes the same table as Parquet, then runs each of these in a fresh Python process,
side by side in one run:

- ``pandas.read_csv`` / ``pandas.read_parquet``, ``pyarrow.csv.read_csv`` /
  ``pyarrow.parquet.read_table``, ``polars.read_csv`` / ``polars.read_parquet``: just reading
  the two columns lon, lat into memory (the plain readers; a missing library is skipped);
- the sketchsyn reader alone (``open_reader``, batch by batch, no summary), so that the cost of
  reading and the cost of PrivHP show separately;
- ``sketchsyn fit FILE --columns lon,lat --bounds … --epsilon 1 --memory 256KB -o MODEL``:
  reading the file in bounded memory, PrivHP's updates and the release (and the same with
  ``--batch-size`` 524,288, or the sizes given with ``--fit-batch-sizes``).

It prints wall time, CPU time (user + system, all threads) and peak resident memory of each,
then fit's ratios to every plain reader and to the fastest one: wall and CPU ratios (below 1:
fit is faster) and the peak-memory ratio. Interpreter start-up and imports are inside every
timing. On a shared machine wall times are noisy (the CPU ratio is the steadier figure): run it
more than once, or with ``--repeat``, before trusting a digit.

    python benchmarks/bench_cli.py              # 10**7 rows
    python benchmarks/bench_cli.py --rows 1e6   # a quick run
    python benchmarks/bench_cli.py --small      # 1,000 rows: fit's fixed cost beside polars

``--small`` times only a 1,000-row file (CSV and Parquet): ``sketchsyn fit`` and
``polars.read_csv`` / ``polars.read_parquet`` on it, each in a fresh process, interleaved
``--repeat`` times (default 9 in this mode), and prints the median and the best CPU seconds of
each and fit's ratio to polars: at this size the whole cost is start-up and imports.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BOUNDS = "-74.05:-73.75,40.6:40.9"


def make_data(csv_path: Path, parquet_path: Path, rows: int, chunk: int = 1_000_000) -> None:
    """Simulated ride pickups (two Gaussian hot spots, clipped to the box) plus a fare column."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    writer = None
    with open(csv_path, "w", newline="") as fh:
        fh.write("lon,lat,fare\n")
        for start in range(0, rows, chunk):
            m = min(chunk, rows - start)
            hot = rng.random(m) < 0.6
            lon = np.where(hot, rng.normal(-73.98, 0.02, m), rng.normal(-73.88, 0.05, m))
            lat = np.where(hot, rng.normal(40.75, 0.02, m), rng.normal(40.70, 0.06, m))
            cols = [
                np.round(np.clip(lon, -74.05, -73.75), 6),
                np.round(np.clip(lat, 40.6, 40.9), 6),
                np.round(rng.gamma(2.0, 7.0, m), 2),
            ]
            np.savetxt(fh, np.column_stack(cols), fmt=["%.6f", "%.6f", "%.2f"], delimiter=",")
            table = pa.table({"lon": cols[0], "lat": cols[1], "fare": cols[2]})
            if writer is None:
                writer = pq.ParquetWriter(parquet_path, table.schema)
            writer.write_table(table, row_group_size=1 << 20)
    if writer is not None:
        writer.close()


def child_env() -> dict[str, str]:
    """The children's environment: this checkout first on the path, and Python's bytecode cache
    on (an installed package has its ``.pyc`` files; ``PYTHONDONTWRITEBYTECODE=1`` would make
    every run compile sketchsyn's sources again, a cost no user pays), unless ``--compile``."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if not COMPILE_EACH_RUN:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


COMPILE_EACH_RUN = False


def timed(cmd: list[str]) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS in MB) of a child process; raises if it fails."""
    env = child_env()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - t0
    err = proc.stderr.read().decode() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd[:4]} failed:\n{err}")
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0


def _py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def plain_readers(path: Path, kind: str) -> dict[str, list[str]]:
    """The plain readers of ``path`` (``kind``: "csv" or "parquet") that are installed."""
    p = str(path)
    have = {m: importlib.util.find_spec(m) is not None for m in ("pandas", "pyarrow", "polars")}
    out: dict[str, list[str]] = {}
    if kind == "csv":
        if have["pandas"]:
            out["pandas.read_csv"] = _py(
                f"import pandas; pandas.read_csv({p!r}, usecols=['lon', 'lat'])"
            )
        if have["pyarrow"]:
            out["pyarrow.csv.read_csv"] = _py(
                "import pyarrow.csv as c; c.read_csv("
                f"{p!r}, convert_options=c.ConvertOptions(include_columns=['lon', 'lat']))"
            )
        if have["polars"]:
            out["polars.read_csv"] = _py(
                f"import polars; polars.read_csv({p!r}, columns=['lon', 'lat'])"
            )
    else:
        if have["pandas"] and have["pyarrow"]:
            out["pandas.read_parquet"] = _py(
                f"import pandas; pandas.read_parquet({p!r}, columns=['lon', 'lat'])"
            )
        if have["pyarrow"]:
            out["pyarrow.parquet.read_table"] = _py(
                f"import pyarrow.parquet as q; q.read_table({p!r}, columns=['lon', 'lat'])"
            )
        if have["polars"]:
            out["polars.read_parquet"] = _py(
                f"import polars; polars.read_parquet({p!r}, columns=['lon', 'lat'])"
            )
    return out


def ours(
    path: Path, rows: int, memory: str, model: Path, batch_sizes: list[int]
) -> dict[str, list[str]]:
    reader = _py(
        "from sketchsyn.io.readers import open_reader\n"
        f"for _ in open_reader({str(path)!r}, ['lon', 'lat'], batch_size=262144): pass"
    )
    fit = [sys.executable, "-m", "sketchsyn", "fit", str(path), "--columns", "lon,lat"]
    fit += [f"--bounds={BOUNDS}", "--epsilon", "1", "--memory", memory, "--expected-n", str(rows)]
    fit += ["-o", str(model), "--quiet"]
    out = {"sketchsyn reader alone": reader, "sketchsyn fit": fit}
    for size in batch_sizes:
        out[f"sketchsyn fit --batch {size}"] = [*fit, "--batch-size", str(size)]
    return out


def report(title: str, results: dict[str, tuple[float, float, float]], rows: int) -> None:
    print(f"\n{title}")
    print(f"{'':28}{'wall s':>8}{'rows/s (wall)':>15}{'CPU s':>8}{'peak RSS MB':>13}")
    for name, (secs, cpu, rss) in results.items():
        print(f"{name:28}{secs:>8.2f}{rows / secs:>15,.0f}{cpu:>8.2f}{rss:>13,.0f}")
    fit = results["sketchsyn fit"]
    plain = {k: v for k, v in results.items() if not k.startswith("sketchsyn")}
    print(f"{'fit / reader':28}{'wall':>8}{'CPU':>8}{'peak memory':>13}")
    for name, (secs, cpu, rss) in plain.items():
        print(f"  {name:26}{fit[0] / secs:>8.2f}{fit[1] / cpu:>8.2f}{fit[2] / rss:>13.2f}")
    if plain:
        name, best = min(plain.items(), key=lambda kv: kv[1][0])
        for label, run in results.items():
            if not label.startswith("sketchsyn fit"):
                continue
            print(
                f"  fastest plain reader ({name}): {label[10:]} takes {run[0] / best[0]:.2f}x its "
                f"wall time, {run[1] / best[1]:.2f}x its CPU time, {run[2] / best[2]:.2f}x its "
                "peak memory"
            )


def make_logs(clean: Path, mixed: Path, lines: int) -> None:
    """Two access logs of ``lines`` lines, the second with an IPv6 client every 10,000 lines."""
    rng = np.random.default_rng(1)
    ips = rng.integers(1 << 24, 223 << 24, lines)
    tail = ' - - [10/Oct/2000:13:55:36 -0700] "GET /index.html HTTP/1.1" 200 2326 "-" "curl"\n'
    text = [f"{a >> 24}.{(a >> 16) & 255}.{(a >> 8) & 255}.{a & 255}{tail}" for a in ips.tolist()]
    clean.write_text("".join(text))
    for i in range(0, lines, 10_000):
        text[i] = f"2001:db8::{i % 65536:x}{tail}"
    mixed.write_text("".join(text))


def make_heads(csv_path: Path, parquet_path: Path) -> None:
    """``head.csv`` and ``head.parquet`` beside the data: its first 1,000 rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    with open(csv_path) as src, open(csv_path.with_name("head.csv"), "w") as dst:
        dst.writelines(line for _, line in zip(range(1001), src, strict=False))
    first = next(pq.ParquetFile(parquet_path).iter_batches(batch_size=1000))
    pq.write_table(pa.Table.from_batches([first]), parquet_path.with_name("head.parquet"))


def fixed_cost(tmp: Path, memory: str, rows: int) -> None:
    """``sketchsyn fit`` on the first 1,000 rows: its fixed cost (start-up, imports, the plan
    for ``--expected-n rows`` and the release), which every file pays whatever its size."""
    print("\nfixed cost: sketchsyn fit on the first 1,000 rows (same plan)")
    for path in (tmp / "head.csv", tmp / "head.parquet"):
        secs, cpu, rss = timed(ours(path, rows, memory, tmp / "h.model", [])["sketchsyn fit"])
        print(f"  {path.name:26}wall {secs:6.2f} s  CPU {cpu:6.2f} s  peak RSS {rss:6,.0f} MB")


UPDATE_ALONE = """
import resource, sys, time
import pyarrow.parquet as pq
from sketchsyn import Box, PrivHP
from sketchsyn.cli.common import _parse_bytes
path, rows, memory, lo0, hi0, lo1, hi1 = sys.argv[1:]
t = pq.read_table(path, columns=["lon", "lat"])
X = t.to_pandas().to_numpy(dtype="float64")
del t
dom = Box([float(lo0), float(lo1)], [float(hi0), float(hi1)])
p = PrivHP.for_memory(dom, 1.0, _parse_bytes(memory), int(rows), rng=1)
r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
for i in range(0, len(X), 262144):
    p.update_many(X[i : i + 262144])
wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
print(f"{wall:.3f} {cpu:.3f}")
"""


def update_alone(parquet_path: Path, rows: int, memory: str) -> tuple[float, float]:
    """PrivHP's updates alone: the same plan as ``fit``, the rows already in memory (read before
    the clock starts), 262,144-row batches, in a fresh process. (wall s, CPU s)."""
    (lo0, lo1), (hi0, hi1) = zip(*(b.split(":") for b in BOUNDS.split(",")), strict=True)
    cmd = [sys.executable, "-c", UPDATE_ALONE, str(parquet_path), str(rows), memory]
    out = subprocess.run([*cmd, lo0, hi0, lo1, hi1], check=True, capture_output=True, text=True,
                         env=child_env())  # fmt: skip
    wall, cpu = (float(v) for v in out.stdout.split())
    return wall, cpu


def logs(tmp: Path, lines: int) -> None:
    """``sketchsyn fit`` on a clean access log and on the same log with IPv6 lines."""
    clean, mixed = tmp / "clean.log", tmp / "ipv6.log"
    make_logs(clean, mixed, lines)
    base = [sys.executable, "-m", "sketchsyn", "fit", "--epsilon", "1", "-o", str(tmp / "ip.m")]
    out = {}
    for name, path in (("clean log", clean), ("log with IPv6 lines", mixed)):
        out[name] = timed([*base[:4], str(path), *base[4:], "--quiet"])
    print(f"\naccess logs of {lines:,} lines (one IPv6 client per 10,000 lines in the second):")
    for name, (secs, cpu, rss) in out.items():
        print(f"  {name:26}wall {secs:6.2f} s  CPU {cpu:6.2f} s  peak RSS {rss:6,.0f} MB")
    a, b = out["clean log"], out["log with IPv6 lines"]
    print(f"  speed with IPv6 lines / clean: wall {a[0] / b[0]:.2f}, CPU {a[1] / b[1]:.2f}")


def small(repeat: int) -> None:
    """``fit`` and polars on a 1,000-row file, interleaved, ``repeat`` times each."""
    import statistics

    with tempfile.TemporaryDirectory(prefix="bench_cli_small_") as tmp:
        csv_path, parquet_path = Path(tmp) / "rides.csv", Path(tmp) / "rides.parquet"
        cmd = [sys.executable, __file__, "--rows", "1000", "--make-data", tmp]
        subprocess.run(cmd, check=True)
        print(f"load average at the start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
        cache = "off (--compile)" if COMPILE_EACH_RUN else "on"
        print(f"1,000 rows; {repeat} interleaved runs of each, in fresh processes")
        print(f"Python's bytecode cache: {cache}")
        print(f"{'':30}{'CPU s (median)':>15}{'CPU s (best)':>14}{'wall s (median)':>17}")
        for kind, path in (("csv", csv_path), ("parquet", parquet_path)):
            polars = plain_readers(path, kind).get(f"polars.read_{kind}")
            if polars is None:
                print("polars is not installed: nothing to compare with")
                return
            fit = ours(path, 1000, "256KB", Path(tmp) / "m.model", [])["sketchsyn fit"]
            timed(fit)  # once first: Python's bytecode cache written, as an install has it
            runs: dict[str, list[tuple[float, float, float]]] = {"polars": [], "fit": []}
            for _ in range(repeat):
                runs["polars"].append(timed(polars))
                runs["fit"].append(timed(fit))
            cpu = {k: [r[1] for r in v] for k, v in runs.items()}
            for name, label in (("polars", f"polars.read_{kind}"), ("fit", "sketchsyn fit")):
                wall = statistics.median(r[0] for r in runs[name])
                print(
                    f"  {label:28}{statistics.median(cpu[name]):>15.3f}{min(cpu[name]):>14.3f}"
                    f"{wall:>17.3f}"
                )
            ratio = statistics.median(cpu["fit"]) / statistics.median(cpu["polars"])
            best = min(cpu["fit"]) / min(cpu["polars"])
            print(f"  fit / polars ({kind}): CPU {ratio:.2f}x (medians), {best:.2f}x (best runs)")
        print(f"load average at the end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=float, default=1e7, help="rows (default 1e7)")
    parser.add_argument("--memory", default="256KB", help="sketchsyn fit --memory")
    parser.add_argument(
        "--repeat", type=int, help="runs of each; the best is kept (default 1; 9 with --small)"
    )
    parser.add_argument(
        "--small", action="store_true", help="only fit and polars on a 1,000-row file"
    )
    parser.add_argument(
        "--fit-batch-sizes",
        default="524288",
        help="comma-separated --batch-size values for extra fit runs ('' for none)",
    )
    parser.add_argument(
        "--compile",
        action="store_true",
        help="keep PYTHONDONTWRITEBYTECODE from the environment (sources compiled at every run)",
    )
    parser.add_argument("--make-data", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    global COMPILE_EACH_RUN
    COMPILE_EACH_RUN = args.compile
    rows = int(args.rows)
    if args.small:
        small(args.repeat or 9)
        return
    args.repeat = args.repeat or 1
    if args.make_data:
        make_data(Path(args.make_data) / "rides.csv", Path(args.make_data) / "rides.parquet", rows)
        make_heads(Path(args.make_data) / "rides.csv", Path(args.make_data) / "rides.parquet")
        return
    with tempfile.TemporaryDirectory(prefix="bench_cli_") as tmp:
        csv_path, parquet_path = Path(tmp) / "rides.csv", Path(tmp) / "rides.parquet"
        t0 = time.perf_counter()
        # In a child process: Linux keeps a process's peak RSS across fork and exec, so the parent
        # stays small for the children's peak memory figures to be their own.
        cmd = [sys.executable, __file__, "--rows", str(rows), "--make-data", tmp]
        subprocess.run(cmd, check=True)
        print(
            f"generated {rows:,} rows: CSV {csv_path.stat().st_size / 1e6:,.0f} MB, Parquet "
            f"{parquet_path.stat().st_size / 1e6:,.0f} MB in {time.perf_counter() - t0:.1f} s"
        )
        print(f"load average at the start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
        for kind, path in (("csv", csv_path), ("parquet", parquet_path)):
            sizes = [int(v) for v in args.fit_batch_sizes.split(",") if v.strip()]
            model = Path(tmp) / "m.model"
            cmds = plain_readers(path, kind) | ours(path, rows, args.memory, model, sizes)
            results = {}
            for name, cmd in cmds.items():
                results[name] = min(timed(cmd) for _ in range(args.repeat))
            report(f"{kind.upper()} ({path.name}), columns lon, lat:", results, rows)
        fixed_cost(Path(tmp), args.memory, rows)
        wall, cpu = update_alone(parquet_path, rows, args.memory)
        print(
            f"\nPrivHP's updates alone (same plan, the {rows:,} rows already in memory, "
            f"262,144-row batches): wall {wall:.2f} s, CPU {cpu:.2f} s"
        )
        logs(Path(tmp), max(rows // 20, 10_000))
        print("\n(interpreter start and imports included; CPU counts every thread)")
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores (shared: timings noisy)")
        print(f"load average at the end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
