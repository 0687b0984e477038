"""The CSV reader's block parser: the compiled pass against pyarrow's path, in one process.

Writes ``--rows`` rows of ``bench_cli.py``'s simulated rides (lon, lat, fare: about 26 bytes a
line) to a temporary CSV, takes its lines as one block, and times
``sketchsyn.io.csvarrow.parse_block`` on it reading lon and lat: with the extension (a clean
block goes to the compiled pass, ``sketchsyn.kernels._text.parse_csv``) and inside
``kernels.numpy_only()`` (the same block through ``pyarrow.csv.open_csv``). Both give the same
doubles (checked). Prints the best of ``--repeat`` runs in CPU nanoseconds a row.

    python benchmarks/bench_csv_parse.py                 # 1,000,000 rows, best of 15
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_cli import make_data  # noqa: E402

from sketchsyn import kernels  # noqa: E402
from sketchsyn.io.csvarrow import parse_block  # noqa: E402


def best(fn, repeat: int) -> float:
    out = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        fn()
        out = min(out, time.process_time() - t)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=float, default=1e6)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    if not kernels.enabled():
        sys.exit(f"the compiled extension is off: {kernels.why()}")
    with tempfile.TemporaryDirectory(prefix="bench_csv_parse_") as tmp:
        csv_path, parquet_path = Path(tmp) / "rides.csv", Path(tmp) / "rides.parquet"
        make_data(csv_path, parquet_path, int(args.rows))
        data = csv_path.read_bytes()
    block = data[data.index(b"\n") + 1 :]  # the lines after the header
    rows = block.count(b"\n")

    def compiled() -> tuple:
        return parse_block(block, 2, 3, [0, 1], ",", None)

    def arrow() -> tuple:
        with kernels.numpy_only():
            return parse_block(block, 2, 3, [0, 1], ",", None)

    a, b = compiled()[0], arrow()[0]
    assert a.shape == b.shape == (rows, 2) and np.array_equal(a.view(np.int64), b.view(np.int64))
    fast, slow = best(compiled, args.repeat), best(arrow, args.repeat)
    print(f"{rows:,} rows of rides ({len(block) / rows:.1f} bytes a line), columns lon, lat")
    print(f"  compiled pass        {fast * 1e9 / rows:6.1f} CPU ns a row (best of {args.repeat})")
    print(f"  pyarrow's path       {slow * 1e9 / rows:6.1f} CPU ns a row")
    print(f"  compiled / pyarrow   {fast / slow:6.2f}")


if __name__ == "__main__":
    main()
