"""Stream a CSV file lazily through PrivHP, release once, then sample synthetic rows on demand.

    python examples/stream_csv.py            # writes a demo CSV of 200,000 rows first
    python examples/stream_csv.py data.csv x y -- -10 -10 10 10

Memory: one batch of rows plus the PrivHP state, whatever the file's length.
"""

from __future__ import annotations

import csv
import sys
import tempfile
from pathlib import Path

import numpy as np

from sketchsyn import Box, PrivHP
from sketchsyn.evaluate.datasets import TAXI_BOX, taxi_pickups


def rows(path: Path, columns: list[str]):
    """Yield one [float, ...] per CSV row: the file is never loaded whole."""
    with path.open(newline="") as fh:
        for record in csv.DictReader(fh):
            yield [float(record[c]) for c in columns]


def write_demo_csv(path: Path, n: int) -> None:
    with path.open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["lon", "lat"])
        for batch in taxi_pickups(n, batch_size=50_000, seed=1):
            out.writerows(np.round(batch, 6).tolist())


def main(argv: list[str]) -> None:
    if argv:
        path, columns = Path(argv[0]), argv[1 : argv.index("--")]
        bounds = [float(v) for v in argv[argv.index("--") + 1 :]]
        d = len(columns)
        domain = Box(bounds[:d], bounds[d:], out_of_bounds="drop")
    else:
        path = Path(tempfile.gettempdir()) / "sketchsyn_pickups.csv"
        write_demo_csv(path, 200_000)
        columns, domain = ["lon", "lat"], Box(*TAXI_BOX, out_of_bounds="drop")
    php = PrivHP(domain, epsilon=1.0, k=32, width=512, expected_n=200_000)
    read = php.consume(rows(path, columns), batch_size=20_000)
    print(f"read {read:,} rows from {path}; state {php.nbytes:,} bytes; dropped {php.n_dropped}")
    release = php.release()
    for _ in range(3):  # sample on demand, as often as needed: post-processing is free
        print(np.round(release.sample(3), 4).tolist())
    saved = release.to_bytes()
    print(f"release saved as {len(saved):,} bytes")


if __name__ == "__main__":
    main(sys.argv[1:])
