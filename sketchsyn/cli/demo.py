"""``sketchsyn demo``: stream simulated city ride pickups (or a CSV) through PrivHP in fixed
memory, release once, and print the budget, the memory, the throughput and W1.

>>> import argparse
>>> _demo_cmd(argparse.Namespace(csv="rides.csv", columns=None, lower=None, upper=None))
Traceback (most recent call last):
...
sketchsyn.cli.common.UsageError: --csv needs --columns, --lower and --upper
"""

from __future__ import annotations

import argparse
import csv
import itertools
import time
from collections.abc import Iterator, Sequence

import numpy as np

from .. import __version__
from ..domains import Box
from ..evaluate.datasets import TAXI_BOX, taxi_pickups
from ..synth.privhp.summary import PrivHP
from .common import UsageError, _fail, _Reservoir

_EVAL_POINTS = 4000


def _csv_rows(path: str, columns: Sequence[str]) -> Iterator[list[float]]:
    """Read ``columns`` of a CSV lazily, one row at a time (memory: one row)."""
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in columns if reader.fieldnames is None or c not in reader.fieldnames]
        if missing:
            raise UsageError(f"--columns {missing} not in the header of {path}")
        for row in reader:
            yield [float(row[c]) for c in columns]


def _demo(args: argparse.Namespace) -> int:
    say = (lambda *a: None) if args.quiet else print
    if args.csv:
        columns = args.columns.split(",")
        lower = np.array([float(v) for v in args.lower.split(",")])
        upper = np.array([float(v) for v in args.upper.split(",")])
        domain = Box(lower, upper, out_of_bounds="drop")
        source: Iterator = _csv_rows(args.csv, columns)
        name = f"{args.csv} columns {columns}"
        expected_n = args.n
    else:
        domain = Box(TAXI_BOX[0], TAXI_BOX[1])
        source = taxi_pickups(args.n, batch_size=args.batch_size, seed=args.data_seed)
        name = f"simulated city ride pickups (lon, lat), {args.n:,} rows"
        expected_n = args.n
    php = PrivHP(
        domain,
        epsilon=args.epsilon,
        k=args.k,
        width=args.width,
        sketch_depth=args.sketch_depth,
        depth=args.depth,
        expected_n=None if args.depth else expected_n,
        sketch=args.sketch,
        rng=args.noise_seed,
    )
    say(f"sketchsyn {__version__} demo: PrivHP on {name}")
    say(
        f"  parameters: epsilon={php.epsilon} (pure DP, add/remove one row), k={php.k}, "
        f"width={php.width}, sketch_depth={php.sketch_depth}, depth={php.depth}, "
        f"sketch={args.sketch}"
    )
    say(f"  state: {php.nbytes:,} bytes, fixed before the first row")
    reservoir = _Reservoir(_EVAL_POINTS, domain.d, seed=args.data_seed + 1)
    t0 = time.perf_counter()
    if args.csv:
        while True:
            rows = list(itertools.islice(source, args.batch_size))
            if not rows:
                break
            batch = np.asarray(rows)
            php.update_many(batch)
            inside = ((batch >= lower) & (batch <= upper)).all(axis=1)
            reservoir.add(batch[inside])
    else:
        for batch in source:
            php.update_many(batch)
            reservoir.add(batch)
    elapsed = time.perf_counter() - t0
    say(
        f"  streamed {php.n_seen:,} rows in {elapsed:.2f} s: "
        f"{php.n_seen / max(elapsed, 1e-9):,.0f} "
        f"rows/s (reading or generating the rows included); state still {php.nbytes:,} bytes"
    )
    if php.n_dropped:
        say(f"  dropped {php.n_dropped:,} rows outside the public bounds (exact, not private)")
    t0 = time.perf_counter()
    release = php.release()
    t_release = time.perf_counter() - t0
    say(
        f"  released once: {len(release.leaves().count)} leaf cells, noisy total "
        f"{release.total:,.0f}, in {t_release:.3f} s ({release.nbytes:,} bytes)"
    )
    synthetic = release.sample(args.samples, rng=args.noise_seed)
    say(f"  sampled {synthetic.shape[0]:,} synthetic rows; first: {np.round(synthetic[0], 5)}")
    real = reservoir.sample()
    _report_w1(real, release, domain, args, say)
    if not args.no_plot:
        _plot(real, synthetic[: real.shape[0]], domain, args.plot, say)
    return 0


def _report_w1(real, release, domain, args, say) -> None:
    from ..evaluate.metrics import wasserstein1

    half = real.shape[0] // 2
    a, b = real[:half], real[half : 2 * half]
    try:
        w = wasserstein1(a, release.sample(half, rng=args.noise_seed), domain, method="ot")
        floor = wasserstein1(a, b, domain, method="ot")
        say(
            f"  W1(data, synthetic) = {w.value:.4f} [{w.method}: {half} real vs {half} synthetic "
            f"points, unit-box l-inf metric]; data-vs-data floor (two real samples of {half}): "
            f"{floor.value:.4f}"
        )
    except ImportError:
        w = wasserstein1(real, release, domain, method="tree")
        say(
            f"  W1 tree bound (data sample vs release) = {w.value:.4f} [{w.method}]; "
            "install sketchsyn[eval] for exact OT"
        )


def _plot(real, synthetic, domain, path, say) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        say("  (matplotlib not installed: no picture; pip install sketchsyn[plot])")
        return
    fig, axes = plt.subplots(1, 2, figsize=(10, 5), sharex=True, sharey=True)
    for ax, pts, title in ((axes[0], real, "real (sample)"), (axes[1], synthetic, "synthetic")):
        ax.scatter(pts[:, 0], pts[:, 1], s=2, alpha=0.5)
        ax.set_title(f"{title}, {pts.shape[0]} points")
        ax.set_xlim(domain.lower[0], domain.upper[0])
        ax.set_ylim(domain.lower[1], domain.upper[1])
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    say(f"  wrote {path}")


def _demo_cmd(args: argparse.Namespace) -> int:
    if args.csv and not (args.columns and args.lower and args.upper):
        raise _fail("--csv needs --columns, --lower and --upper")
    return _demo(args)
