"""Rows per second of one process, Dask (1 and 2 workers) and Spark's two paths (local[1],
local[2]) on the same Parquet files.

    pip install ".[dask,spark]" && python benchmarks/bench_distributed.py [--rows 10000000]
    python benchmarks/bench_distributed.py --quick      # 2·10^6 rows, a smoke run

The script writes ``--rows`` rows of two float64 columns in ``--files`` Parquet files to a
temporary directory, then times, for each setup, reading those files **and** summarising them with
one trusted-mode PrivHP (``k=64, w=1024, r=20, raw=True``), the merges and the transfer of the
merged summary back (it checks that the merged root counter is the number of rows):

* one process: ``pyarrow.parquet`` batches of 65,536 rows into ``update_many`` (PrivHP counts
  large batches on two threads); the same with its second thread off (one core's worth);
* one process reading with sketchsyn's ``ParquetReader`` (a reader thread, 262,144-row
  batches), as ``sketchsyn fit`` does;
* Dask on a ``LocalCluster`` of 1 or 2 worker processes (one thread each), so every worker reads
  its own files and only summaries cross processes: ``summarize`` on
  ``dask.dataframe.read_parquet`` (pandas partitions) and ``summarize_files`` (each task reads
  its file with sketchsyn's reader, no DataFrame);
* Spark on ``local[1]`` and ``local[2]``: ``sketchsyn.spark.fit`` on ``spark.read.parquet``
  (the JVM decodes Parquet and hands every row to a Python worker as Arrow batches) and
  ``sketchsyn.spark.fit_files`` (only the paths go to the executors; each task reads its file
  with sketchsyn's reader, no row passes through the JVM).

Cluster start-up and a warm-up run (which imports sketchsyn in every worker) are not timed.
Next to rows/s it prints the cores the setup kept busy, the CPU time of all its processes per
10^6 rows (what the setup costs, which other jobs on the machine change little) and the
one-minute load average: on a machine shared with other jobs, figures taken while fewer cores
than workers were free say little about scaling. It also prints the cost of ``update_many``
under Dask's worker setting ``MALLOC_TRIM_THRESHOLD_=65536``, without and with the partition
step of ``sketchsyn.dask`` (see ``docs/dask.md``).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sketchsyn import Box, PrivHP  # noqa: E402

MAKE = functools.partial(PrivHP, Box.unit(2), 1.0, 64, 1024, depth=20, raw=True)
COLUMNS = ["x", "y"]
LOADS: list[float] = []  # the load average after each timed setup


def write_files(directory: Path, rows: int, files: int) -> None:
    """``rows`` rows of (x, y) in [0, 1)² in ``files`` Parquet files."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    for i, part in enumerate(np.array_split(np.arange(rows), files)):
        X = rng.beta(2, 5, size=(part.size, 2))
        table = pa.table({"x": X[:, 0], "y": X[:, 1], "id": part})
        pq.write_table(table, directory / f"part-{i:03d}.parquet", row_group_size=1 << 20)


def one_process(directory: Path, threads: bool) -> PrivHP:
    import pyarrow.parquet as pq

    from sketchsyn.synth import bank

    saved = bank._PARALLEL_MIN_ROWS
    if not threads:  # PrivHP's second thread off: every batch is counted on one thread
        bank._PARALLEL_MIN_ROWS = 1 << 62
    try:
        summary = MAKE()
        for path in sorted(directory.glob("*.parquet")):
            for batch in pq.ParquetFile(path).iter_batches(batch_size=65536, columns=COLUMNS):
                summary.update_many(np.column_stack([batch.column(i).to_numpy() for i in range(2)]))
        return summary
    finally:
        bank._PARALLEL_MIN_ROWS = saved


def one_process_lean(directory: Path, batch_size: int = 262144) -> PrivHP:
    """sketchsyn's ParquetReader (its reader thread) into update_many, 262,144-row batches."""
    from sketchsyn.io.readers import open_reader

    summary = MAKE()
    for path in sorted(directory.glob("*.parquet")):
        for batch in open_reader(path, COLUMNS, batch_size=batch_size):
            summary.update_many(batch)
    return summary


def dask_runs(directory: Path, warm: Path, workers: int, files: bool) -> Callable[[], PrivHP]:
    """Start a LocalCluster (kept open by the returned closure's owner) and warm it up.

    ``files``: ``sketchsyn.dask.summarize_files`` (each task reads its Parquet file with
    sketchsyn's reader, 262,144-row batches, one thread) instead of ``summarize`` on
    ``dask.dataframe.read_parquet`` (pandas partitions, 65,536-row batches)."""
    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    from sketchsyn import dask as sdask

    cluster = LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
    )
    client = Client(cluster)
    if files:
        sdask.summarize_files(str(warm), MAKE, columns=COLUMNS).compute()
    else:
        sdask.fit(dd.read_parquet(str(warm)), MAKE, columns=COLUMNS)

    def run() -> PrivHP:
        if files:
            return sdask.summarize_files(str(directory), MAKE, columns=COLUMNS).compute()
        return sdask.fit(dd.read_parquet(str(directory), columns=COLUMNS), MAKE, columns=COLUMNS)

    run.close = lambda: (client.close(), cluster.close())  # type: ignore[attr-defined]
    return run


def spark_runs(directory: Path, warm: Path, cores: int, files: bool) -> Callable[[], PrivHP]:
    """Start a local Spark session of ``cores`` cores and warm it up; ``files``:
    ``sketchsyn.spark.fit_files`` instead of ``fit`` on ``spark.read.parquet``."""
    from pyspark.sql import SparkSession

    from sketchsyn import spark as sspark

    spark = (
        SparkSession.builder.master(f"local[{cores}]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(cores))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")

    def run(where: Path = directory) -> PrivHP:
        if files:
            return sspark.fit_files(spark, str(where), MAKE, columns=COLUMNS)
        return sspark.fit(spark.read.parquet(str(where)), MAKE, columns=COLUMNS)

    run(warm)
    run.close = spark.stop  # type: ignore[attr-defined]
    return run


def cpu_seconds() -> float:
    """CPU time of this process and every process it started (workers, JVM, Python daemons)."""
    import psutil

    me = psutil.Process()
    total = 0.0
    for proc in [me, *me.children(recursive=True)]:
        try:
            times = proc.cpu_times()
        except psutil.Error:  # it exited meanwhile
            continue
        total += times.user + times.system
    return total


def malloc_effect(rows: int) -> None:
    """update_many under Dask's worker setting MALLOC_TRIM_THRESHOLD_=65536, in a child process
    (glibc reads the variable at start-up), without and with sketchsyn.dask's partition step."""
    import subprocess

    code = (
        "import functools, resource, sys, time\n"
        "import numpy as np\n"
        "from sketchsyn import Box, PrivHP\n"
        "from sketchsyn.distributed import roomy_malloc\n"
        "make = functools.partial(PrivHP, Box.unit(2), 1.0, 64, 1024, depth=20, raw=True)\n"
        "X = np.random.default_rng(0).random((int(sys.argv[1]), 2))\n"
        "def run():\n"
        "    php = make()\n"
        "    f, c = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.process_time()\n"
        "    for s in range(0, len(X), 65536):\n"
        "        php.update_many(X[s : s + 65536])\n"
        "    f = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f\n"
        "    return time.process_time() - c, f\n"
        "run()\n"
        "plain = run()\n"
        "with roomy_malloc():\n"
        "    roomy = run()\n"
        "print(*plain, *roomy)\n"
    )
    env = {**os.environ, "MALLOC_TRIM_THRESHOLD_": "65536"}
    out = subprocess.run(
        [sys.executable, "-c", code, str(rows)], env=env, capture_output=True, text=True
    )
    if out.returncode:
        print("malloc check failed:", out.stderr.strip().splitlines()[-1:])
        return
    cpu, faults, cpu_roomy, faults_roomy = (float(v) for v in out.stdout.split())
    print(
        f"update_many with Dask's MALLOC_TRIM_THRESHOLD_=65536: {cpu * 1e6 / rows:.3f} CPU-s per "
        f"10^6 rows, {faults:,.0f} page faults; inside sketchsyn.dask's partition step: "
        f"{cpu_roomy * 1e6 / rows:.3f} CPU-s, {faults_roomy:,.0f} page faults ({rows:,} rows)"
    )


def timed(label: str, run: Callable[[], PrivHP], rows: int, repeat: int) -> float:
    best, cpu = float("inf"), float("inf")
    for _ in range(repeat):
        t, c = time.perf_counter(), cpu_seconds()
        merged = run()
        wall = time.perf_counter() - t
        if wall < best:
            best, cpu = wall, cpu_seconds() - c
        assert int(merged._tree[0]) == rows, (label, int(merged._tree[0]))  # every row, once
    rate = rows / best
    LOADS.append(os.getloadavg()[0])
    print(
        f"{label:<40} {rate:>12,.0f} rows/s  {cpu / best:4.2f} cores busy  "
        f"{cpu * 1e6 / rows:5.3f} CPU-s per 10^6 rows  load {os.getloadavg()[0]:5.2f}",
        flush=True,
    )
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=2, help="best of this many timed runs")
    parser.add_argument("--quick", action="store_true", help="2·10^6 rows, one timed run")
    parser.add_argument("--skip", nargs="*", default=[], choices=["dask", "spark"])
    args = parser.parse_args()
    if args.quick:
        args.rows, args.repeat = 2_000_000, 1
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.getenv("PYTHONPATH")]))
    print(
        f"rows={args.rows:,} in {args.files} Parquet files, cores={os.cpu_count()}, "
        f"load average at start {os.getloadavg()[0]:.2f}"
    )
    print("PrivHP k=64 width=1024 depth=20 raw (trusted mode); time = read + summarise + merge")
    with tempfile.TemporaryDirectory() as tmp:
        data, warm = Path(tmp, "data"), Path(tmp, "warm")
        data.mkdir()
        warm.mkdir()
        write_files(data, args.rows, args.files)
        write_files(warm, 20_000, 2)
        rates = {}
        one = timed(
            "one process (PrivHP's two threads)",
            lambda: one_process(data, True),
            args.rows,
            args.repeat,
        )
        single = timed(
            "one process, one thread", lambda: one_process(data, False), args.rows, args.repeat
        )
        lean = timed(
            "one process, sketchsyn reader, 262144",
            lambda: one_process_lean(data),
            args.rows,
            args.repeat,
        )
        malloc_effect(min(args.rows, 4_000_000))
        setups = []
        if "dask" not in args.skip:
            for w in (1, 2):
                start = functools.partial(dask_runs, files=False)
                setups.append((f"Dask {w} worker(s), read_parquet frame", start, w))
                start = functools.partial(dask_runs, files=True)
                setups.append((f"Dask {w} worker(s), summarize_files", start, w))
        if "spark" not in args.skip:
            for c in (1, 2):
                start = functools.partial(spark_runs, files=False)
                setups.append((f"Spark local[{c}], fit(read.parquet)", start, c))
                start = functools.partial(spark_runs, files=True)
                setups.append((f"Spark local[{c}], fit_files", start, c))
        for label, start, n in setups:
            run = start(data, warm, n)
            try:
                rates[label] = timed(label, run, args.rows, args.repeat)
            finally:
                run.close()  # type: ignore[attr-defined]
        best = max(one, single, lean)
        print(
            "\nratios (x one process with PrivHP's two threads / with one thread / with "
            "sketchsyn's reader / the fastest of the three):"
        )
        for label, rate in rates.items():
            print(
                f"{label:<40} {rate / one:5.2f}x {rate / single:5.2f}x {rate / lean:5.2f}x "
                f"{rate / best:5.2f}x"
            )
    if max(LOADS) >= (os.cpu_count() or 1):
        print(
            f"note: the load average reached {max(LOADS):.1f} on {os.cpu_count()} cores during "
            "the run: the cores were not free, so these rows/s say little about scaling"
        )


if __name__ == "__main__":
    main()
