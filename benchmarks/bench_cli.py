"""``sketchsyn fit`` against pandas, pyarrow and polars reading the same CSV and Parquet file.

Generates ``--rows`` rows (lon, lat, fare; default 10**7, 266 MB of CSV) once, in ``--data DIR``
(kept, reused by later runs) or a temporary directory, writes the same table as Parquet, reads
each file once (so that every command finds it in the page cache), then runs each of these in a
fresh Python process, in paired rounds (``--repeat``: each round runs every command once):

- the plain streaming readers of the CSV, bounded memory like fit: ``pyarrow.csv.open_csv``
  batch by batch, ``pandas.read_csv(chunksize=262144)`` (the C engine) and polars'
  ``scan_csv(...).collect_batches()``, each iterating over the columns lon, lat and doing
  nothing with them;
- the whole-table readers (``--whole``, on by default): ``pandas.read_csv`` /
  ``pandas.read_parquet``, ``pyarrow.csv.read_csv`` / ``pyarrow.parquet.read_table``,
  ``polars.read_csv`` / ``polars.read_parquet``: the two columns into memory (a missing library
  is skipped; ``polars.read_parquet`` always runs, it is the Parquet goal's yardstick);
- the sketchsyn reader alone (``open_reader``, batch by batch, no summary), so that the cost of
  reading and the cost of PrivHP show separately;
- ``sketchsyn fit FILE --columns lon,lat --bounds … --epsilon 1 --memory 256KB -o MODEL``:
  reading the file in bounded memory, PrivHP's updates and the release (and the same with
  ``--batch-size 524288``, or the sizes given with ``--fit-batch-sizes``).

It prints wall time, CPU time (user + system, all threads) and peak resident memory of each
(the median of the rounds), then the ratios the speed goals name, each the median of its
per-round ratios: fit's CPU and wall time on the CSV over the cheapest plain streaming reader's,
on Parquet over ``polars.read_parquet``'s. Interpreter start-up and imports are inside every
timing. On a shared machine wall times are noisy (the CPU ratio is the steadier figure).

    python benchmarks/bench_cli.py                                  # 10**7 rows
    python benchmarks/bench_cli.py --rows 1e8 --data /tmp/rides8 --repeat 2 --fit-batch-sizes ""
    python benchmarks/bench_cli.py --rows 1e6                       # a quick run
    python benchmarks/bench_cli.py --small                          # 1,000 rows beside polars

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
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BOUNDS = "-74.05:-73.75,40.6:40.9"


def make_data(csv_path: Path, parquet_path: Path, rows: int, chunk: int = 1_000_000) -> None:
    """Simulated ride pickups (two Gaussian hot spots, clipped to the box) plus a fare column."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    writer = None
    with open(csv_path, "wb") as fh:
        fh.write(b"lon,lat,fare\n")
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
            fh.write(_lines(cols, (6, 6, 2)))
            table = pa.table({"lon": cols[0], "lat": cols[1], "fare": cols[2]})
            if writer is None:
                writer = pq.ParquetWriter(parquet_path, table.schema)
            writer.write_table(table, row_group_size=1 << 20)
    if writer is not None:
        writer.close()


def _fixed(values: np.ndarray, decimals: int) -> Any:
    """``"%.{decimals}f" % v`` of each value (already rounded to ``decimals``), as a pyarrow
    string array: vectorised, many times faster than ``numpy.savetxt`` (the same bytes)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    q = np.rint(values * 10.0**decimals).astype(np.int64)
    scale = 10**decimals
    whole = pc.cast(pa.array(np.abs(q) // scale), pa.string())
    frac = pc.utf8_lpad(pc.cast(pa.array(np.abs(q) % scale), pa.string()), decimals, padding="0")
    text = pc.binary_join_element_wise(whole, frac, ".")
    if (q < 0).any():
        text = pc.if_else(pa.array(q < 0), pc.binary_join_element_wise("-", text, ""), text)
    return text


def _lines(cols: list[np.ndarray], decimals: tuple[int, ...]) -> bytes:
    """The CSV lines of the columns, each value written with its number of decimals."""
    import pyarrow.compute as pc

    fields = [_fixed(c, d) for c, d in zip(cols, decimals, strict=True)]
    lines = pc.binary_join_element_wise(pc.binary_join_element_wise(*fields, ","), "", "\n")
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32)[lines.offset :]
    return memoryview(lines.buffers()[2])[offsets[0] : offsets[len(lines)]].tobytes()


def child_env() -> dict[str, str]:
    """The children's environment: this checkout first on the path, and Python's bytecode cache
    on (an installed package has its ``.pyc`` files; ``PYTHONDONTWRITEBYTECODE=1`` would make
    every run compile sketchsyn's sources again, a cost no user pays), unless ``--compile``."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if not COMPILE_EACH_RUN:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


COMPILE_EACH_RUN = False


def timed(cmd: list[str]) -> tuple[float, float, float, float]:
    """(wall seconds, CPU seconds, peak RSS in MB, system CPU seconds) of a child process;
    raises if it fails. The system time (page faults of fresh memory, mostly) is part of the CPU
    time; it is printed apart because it moves most from machine to machine."""
    env = child_env()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - t0
    err = proc.stderr.read().decode() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd[:4]} failed:\n{err}")
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0, usage.ru_stime


def _py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def streaming_readers(path: Path) -> dict[str, list[str]]:
    """The plain streaming readers of the CSV ``path`` that are installed (bounded memory)."""
    p = str(path)
    have = {m: importlib.util.find_spec(m) is not None for m in ("pandas", "pyarrow", "polars")}
    out: dict[str, list[str]] = {}
    if have["pyarrow"]:
        out["pyarrow open_csv stream"] = _py(
            "import pyarrow.csv as c\n"
            f"for b in c.open_csv({p!r}, convert_options=c.ConvertOptions("
            "include_columns=['lon', 'lat'])): pass"
        )
    if have["pandas"]:
        out["pandas read_csv chunks"] = _py(
            "import pandas\n"
            f"for f in pandas.read_csv({p!r}, usecols=['lon', 'lat'], chunksize=262144): pass"
        )
    if have["polars"]:
        out["polars scan_csv batches"] = _py(
            "import polars\n"
            f"for f in polars.scan_csv({p!r}).select('lon', 'lat').collect_batches(): pass"
        )
    return out


def whole_readers(path: Path, kind: str, whole: bool) -> dict[str, list[str]]:
    """The whole-table readers of ``path`` (``kind``: "csv" or "parquet") that are installed;
    with ``whole`` False only ``polars.read_parquet`` (the Parquet goal's yardstick)."""
    p = str(path)
    have = {m: importlib.util.find_spec(m) is not None for m in ("pandas", "pyarrow", "polars")}
    out: dict[str, list[str]] = {}
    if kind == "csv" and whole:
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
    elif kind == "parquet":
        if have["pandas"] and have["pyarrow"] and whole:
            out["pandas.read_parquet"] = _py(
                f"import pandas; pandas.read_parquet({p!r}, columns=['lon', 'lat'])"
            )
        if have["pyarrow"] and whole:
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
    if _extension():  # the compiled kernels are installed: also fit without them
        out["sketchsyn fit, numpy path"] = ["env", "SKETCHSYN_KERNELS=numpy", *fit]
    for size in batch_sizes:
        out[f"sketchsyn fit --batch {size}"] = [*fit, "--batch-size", str(size)]
    return out


# name -> (wall s, CPU s, peak MB, system CPU s) per round
Runs = dict[str, list[tuple[float, float, float, float]]]


def rounds(cmds: dict[str, list[str]], repeat: int) -> Runs:
    """Every command once per round, ``repeat`` rounds: the load a round meets is shared by all
    its commands, and the ratios are taken within a round."""
    out: Runs = {name: [] for name in cmds}
    for _ in range(repeat):
        for name, cmd in cmds.items():
            out[name].append(timed(cmd))
    return out


def _median(values: list[float]) -> float:
    return float(np.median(values))


def table(title: str, runs: Runs, rows: int) -> None:
    """Median wall, CPU (also per row; and its system part) and the largest peak memory of each
    command."""
    print(f"\n{title}")
    print(
        f"{'':34}{'wall s':>8}{'rows/s (wall)':>15}{'CPU s':>8}{'of it sys':>10}{'CPU ns/row':>11}"
        f"{'peak MB':>9}"
    )
    for name, got in runs.items():
        secs, cpu = _median([g[0] for g in got]), _median([g[1] for g in got])
        sys_cpu = _median([g[3] for g in got])
        print(
            f"{name:34}{secs:>8.2f}{rows / secs:>15,.0f}{cpu:>8.2f}{sys_cpu:>10.2f}"
            f"{cpu / rows * 1e9:>11.0f}{max(g[2] for g in got):>9,.0f}"
        )


def ratio(runs: Runs, num: str, den: str) -> tuple[float, float, float]:
    """Median over the rounds of ``num`` / ``den``: (CPU, wall, peak memory)."""
    pairs = list(zip(runs[num], runs[den], strict=True))
    return (
        _median([a[1] / b[1] for a, b in pairs]),
        _median([a[0] / b[0] for a, b in pairs]),
        _median([a[2] / b[2] for a, b in pairs]),
    )


def cheapest(runs: Runs, names: list[str]) -> str | None:
    """The one of ``names`` with the smallest median CPU time."""
    names = [n for n in names if n in runs]
    return min(names, key=lambda n: _median([g[1] for g in runs[n]])) if names else None


def goals(csv_runs: Runs, parquet_runs: Runs, rows: int = 10**8) -> None:
    """The ratios of the speed goals (CPU-seconds of whole processes): ``fit`` of a Parquet
    file ≤ 1.0× ``polars.read_parquet`` at 10**8 rows (1.2× below that), of a CSV file ≤ 0.9×
    the cheapest streaming reader, each at no more peak memory than the numpy path."""
    parquet_goal = 1.0 if rows >= 10**8 else 1.2
    print("\ngoals (median of the per-round ratios; CPU is the goal's measure):")
    print(f"{'':68}{'CPU':>6}{'wall':>6}{'peak':>6}  goal")

    def line(label: str, runs: Runs, num: str, den: str | None, goal: float | None) -> None:
        if den is None:
            return
        c, w, m = ratio(runs, num, den)
        verdict = "" if goal is None else f"<= {goal}: {'met' if c <= goal else 'missed'}"
        print(f"  {label:66}{c:>6.2f}{w:>6.2f}{m:>6.2f}  {verdict}")

    streaming = list(streaming_names(csv_runs))
    named = [n for n in streaming if not n.startswith("polars")]
    best_named, best_any = cheapest(csv_runs, named), cheapest(csv_runs, streaming)
    fit, bare = "sketchsyn fit", "sketchsyn fit, numpy path"
    line(f"CSV fit / cheapest streaming reader ({best_any})", csv_runs, fit, best_any, 0.9)
    if best_any != best_named:
        label = f"CSV fit / cheapest of pyarrow, pandas ({best_named})"
        line(label, csv_runs, fit, best_named, None)
    if bare in csv_runs:  # the same install without its compiled kernels
        line(f"CSV fit, numpy path / {best_any}", csv_runs, bare, best_any, None)
        line("CSV fit / fit, numpy path (peak: no more than 1.0)", csv_runs, fit, bare, None)
    for name in streaming:
        line(f"CSV fit / {name}", csv_runs, fit, name, None)
    line(f"CSV reader alone / {best_any}", csv_runs, "sketchsyn reader alone", best_any, None)
    if "polars.read_parquet" in parquet_runs:
        line("Parquet fit / polars.read_parquet", parquet_runs, fit, "polars.read_parquet",
             parquet_goal)  # fmt: skip
        if bare in parquet_runs:
            line("Parquet fit, numpy path / polars.read_parquet", parquet_runs, bare,
                 "polars.read_parquet", None)  # fmt: skip
            line("Parquet fit / fit, numpy path (peak: no more than 1.0)", parquet_runs, fit,
                 bare, None)  # fmt: skip
        line(
            "Parquet reader alone / polars.read_parquet",
            parquet_runs,
            "sketchsyn reader alone",
            "polars.read_parquet",
            None,
        )


def streaming_names(runs: Runs) -> list[str]:
    """The plain streaming readers among the commands."""
    return [n for n in runs if n.endswith(("stream", "chunks", "batches"))]


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
        secs, cpu, rss, _ = timed(ours(path, rows, memory, tmp / "h.model", [])["sketchsyn fit"])
        print(f"  {path.name:26}wall {secs:6.2f} s  CPU {cpu:6.2f} s  peak RSS {rss:6,.0f} MB")


UPDATE_ALONE = """
import resource, sys, time
import pyarrow.parquet as pq
from sketchsyn import Box, PrivHP
from sketchsyn.cli.common import _parse_bytes
path, rows, memory, lo0, hi0, lo1, hi1, passes = sys.argv[1:]
t = pq.read_table(path, columns=["lon", "lat"])
X = t.to_pandas().to_numpy(dtype="float64")
del t
dom = Box([float(lo0), float(lo1)], [float(hi0), float(hi1)])
p = PrivHP.for_memory(dom, 1.0, _parse_bytes(memory), int(rows) * int(passes), rng=1)
r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
for i in list(range(0, len(X), 262144)) * int(passes):
    p.update_many(X[i : i + 262144])
wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
print(f"{wall:.3f} {cpu:.3f}")
"""


def update_alone(
    parquet_path: Path, rows: int, memory: str, passes: int = 1, kernels: str | None = None
) -> tuple[float, float]:
    """PrivHP's updates alone: the same plan as ``fit``, the rows already in memory (read before
    the clock starts), 262,144-row batches, fed ``passes`` times, in a fresh process, with
    ``SKETCHSYN_KERNELS=kernels`` when given. (wall s, CPU s)."""
    (lo0, lo1), (hi0, hi1) = zip(*(b.split(":") for b in BOUNDS.split(",")), strict=True)
    cmd = [sys.executable, "-c", UPDATE_ALONE, str(parquet_path), str(rows), memory]
    env = child_env()
    if kernels is not None:
        env["SKETCHSYN_KERNELS"] = kernels
    out = subprocess.run([*cmd, lo0, hi0, lo1, hi1, str(passes)], check=True, capture_output=True,
                         text=True, env=env)  # fmt: skip
    wall, cpu = (float(v) for v in out.stdout.split())
    return wall, cpu


def _extension() -> bool:
    """Whether this Python's sketchsyn has its compiled kernels (asked in a fresh process, as
    the runs below are)."""
    code = "from sketchsyn import kernels; print(kernels.active())"
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return got.stdout.strip() == "extension"


def kernel_start(parquet_path: Path, rows: int, memory: str, repeat: int) -> None:
    """PrivHP's updates alone on the file's rows fed once and ten times, in interleaved fresh
    processes: the numpy path (``SKETCHSYN_KERNELS=numpy``) and the compiled kernels, which run
    from the first batch (nothing to start or load)."""
    import statistics

    print(f"\nPrivHP's updates alone, CPU s (median of {repeat} interleaved runs; rows in memory):")
    print(f"  {'rows':>14}{'numpy':>10}{'extension':>10}{'ratio':>10}")
    for passes in (1, 10):
        got: dict[str, list[float]] = {"numpy": [], "extension": []}
        for _ in range(repeat):
            for switch in got:
                got[switch].append(update_alone(parquet_path, rows, memory, passes, switch)[1])
        med = [statistics.median(got[k]) for k in got]
        cells = "".join(f"{v:>10.2f}" for v in med) + f"{med[0] / med[1]:>9.2f}x"
        print(f"  {rows * passes:>14,}" + cells)


def logs(tmp: Path, lines: int) -> None:
    """``sketchsyn fit`` on a clean access log and on the same log with IPv6 lines."""
    clean, mixed = tmp / "clean.log", tmp / "ipv6.log"
    make_logs(clean, mixed, lines)
    base = [sys.executable, "-m", "sketchsyn", "fit", "--epsilon", "1", "-o", str(tmp / "ip.m")]
    out = {}
    for name, path in (("clean log", clean), ("log with IPv6 lines", mixed)):
        out[name] = timed([*base[:4], str(path), *base[4:], "--quiet"])
    print(f"\naccess logs of {lines:,} lines (one IPv6 client per 10,000 lines in the second):")
    for name, (secs, cpu, rss, _) in out.items():
        print(f"  {name:26}wall {secs:6.2f} s  CPU {cpu:6.2f} s  peak RSS {rss:6,.0f} MB")
    a, b = out["clean log"], out["log with IPv6 lines"]
    print(f"  speed with IPv6 lines / clean: wall {a[0] / b[0]:.2f}, CPU {a[1] / b[1]:.2f}")


OVERLAP = """
import resource, sys, time
from sketchsyn import Box, PrivHP
from sketchsyn.cli.common import _parse_bytes
from sketchsyn.io.readers import CSVReader
path, rows, memory, threads, lo0, hi0, lo1, hi1 = sys.argv[1:]
dom = Box([float(lo0), float(lo1)], [float(hi0), float(hi1)])
p = PrivHP.for_memory(dom, 1.0, _parse_bytes(memory), int(rows), rng=1)
r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
for batch in CSVReader(path, ["lon", "lat"], batch_size=262144, threads=threads == "1"):
    p.update_many(batch)
wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
print(f"{wall:.3f} {cpu:.3f}")
"""


def overlap(csv_path: Path, rows: int, memory: str, repeat: int) -> None:
    """Reading the CSV and PrivHP's updates in one process, with the reader thread parsing the
    next block while PrivHP counts the last one, and without it (``threads=False``)."""
    (lo0, lo1), (hi0, hi1) = zip(*(b.split(":") for b in BOUNDS.split(",")), strict=True)
    env = child_env()
    got: dict[str, list[tuple[float, float]]] = {"1": [], "0": []}
    for _ in range(repeat):
        for threads in ("1", "0"):
            cmd = [sys.executable, "-c", OVERLAP, str(csv_path), str(rows), memory, threads]
            out = subprocess.run([*cmd, lo0, hi0, lo1, hi1], check=True, capture_output=True,
                                 text=True, env=env)  # fmt: skip
            wall, cpu = (float(v) for v in out.stdout.split())
            got[threads].append((wall, cpu))
    print("\nreading and updating overlapped (CSV, in one process, median of the rounds):")
    for threads, label in (
        ("1", "reader thread parsing ahead"),
        ("0", "one thread (threads=False)"),
    ):
        wall = _median([g[0] for g in got[threads]])
        cpu = _median([g[1] for g in got[threads]])
        print(f"  {label:34}wall {wall:7.2f} s  CPU {cpu:7.2f} s  (CPU/wall {cpu / wall:.2f})")
    speedup = _median([b[0] / a[0] for a, b in zip(got["1"], got["0"], strict=True)])
    print(f"  wall without the thread / with it: {speedup:.2f} (1: no overlap; at most 2 cores)")


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
            polars = whole_readers(path, kind, True).get(f"polars.read_{kind}")
            if polars is None:
                print("polars is not installed: nothing to compare with")
                return
            fit = ours(path, 1000, "256KB", Path(tmp) / "m.model", [])["sketchsyn fit"]
            timed(fit)  # once first: Python's bytecode cache written, as an install has it
            runs: Runs = {"polars": [], "fit": []}
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
        "--repeat", type=int, help="paired rounds, medians printed (default 1; 9 with --small)"
    )
    parser.add_argument(
        "--small", action="store_true", help="only fit and polars on a 1,000-row file"
    )
    parser.add_argument(
        "--kernel-start",
        action="store_true",
        help="only PrivHP's updates on the rows fed once and 10 times: numpy path and compiled "
        "kernels, fresh processes",
    )
    parser.add_argument(
        "--compile",
        action="store_true",
        help="keep PYTHONDONTWRITEBYTECODE from the environment (sources compiled at every run)",
    )
    parser.add_argument(
        "--data", metavar="DIR", help="keep the generated files in DIR and reuse them"
    )
    parser.add_argument(
        "--whole",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time the whole-table readers (memory grows with the file)",
    )
    parser.add_argument(
        "--extras",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also fit's fixed cost, PrivHP alone, the overlap check and the access logs",
    )
    parser.add_argument(
        "--fit-batch-sizes",
        default="524288",
        help="comma-separated --batch-size values for extra fit runs ('' for none)",
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
        (Path(args.make_data) / "rows").write_text(str(rows))
        return
    with tempfile.TemporaryDirectory(prefix="bench_cli_") as scratch:
        tmp = Path(args.data or scratch)
        tmp.mkdir(parents=True, exist_ok=True)
        csv_path, parquet_path = tmp / "rides.csv", tmp / "rides.parquet"
        made = tmp / "rows"
        t0 = time.perf_counter()
        if not (made.exists() and made.read_text() == str(rows)):
            made.unlink(missing_ok=True)
            # In a child process: Linux keeps a process's peak RSS across fork and exec, so the
            # parent stays small for the children's peak memory figures to be their own.
            cmd = [sys.executable, __file__, "--rows", str(rows), "--make-data", str(tmp)]
            subprocess.run(cmd, check=True)
            how = f"generated in {time.perf_counter() - t0:.1f} s"
        else:
            how = f"reused from {tmp}"
        print(
            f"{rows:,} rows: CSV {csv_path.stat().st_size / 1e6:,.0f} MB, Parquet "
            f"{parquet_path.stat().st_size / 1e6:,.0f} MB ({how})"
        )
        for path in (csv_path, parquet_path):  # into the page cache before any timing
            with open(path, "rb") as fh:
                while fh.read(1 << 24):
                    pass
        print(f"load average at the start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
        if args.kernel_start:
            kernel_start(parquet_path, rows, args.memory, args.repeat)
            print(f"load average at the end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
            return
        sizes = [int(v) for v in args.fit_batch_sizes.split(",") if v.strip()]
        model = tmp / "m.model"
        csv_cmds = streaming_readers(csv_path) | whole_readers(csv_path, "csv", args.whole)
        csv_cmds |= ours(csv_path, rows, args.memory, model, sizes)
        parquet_cmds = whole_readers(parquet_path, "parquet", args.whole)
        parquet_cmds |= ours(parquet_path, rows, args.memory, model, sizes)
        csv_runs = rounds(csv_cmds, args.repeat)
        parquet_runs = rounds(parquet_cmds, args.repeat)
        print(f"\n{args.repeat} paired round(s); medians of the rounds, the largest peak")
        table(f"CSV ({csv_path.name}), columns lon, lat:", csv_runs, rows)
        table(f"Parquet ({parquet_path.name}), columns lon, lat:", parquet_runs, rows)
        goals(csv_runs, parquet_runs, rows)
        if args.extras:
            fixed_cost(tmp, args.memory, rows)
            wall, cpu = update_alone(parquet_path, rows, args.memory)
            print(
                f"\nPrivHP's updates alone (same plan, the {rows:,} rows already in memory, "
                f"262,144-row batches): wall {wall:.2f} s, CPU {cpu:.2f} s"
            )
            overlap(csv_path, rows, args.memory, args.repeat)
            logs(Path(scratch), min(max(rows // 20, 10_000), 1_000_000))
        print("\n(interpreter start and imports included; CPU counts every thread)")
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores (shared: timings noisy)")
        print(f"load average at the end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
