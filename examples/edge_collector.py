"""An edge collector that checkpoints its PrivHP state, is killed, resumes, and loses nothing.

    python examples/edge_collector.py                 # the whole demonstration
    python examples/edge_collector.py --rows 300000 --every 50000

The collector reads a replayable feed (here seeded simulated pickups; on a device, a log file it
can reopen at a row offset), adds rows to a PrivHP summary and saves the state atomically every
``--every`` rows (``php.save``: temporary file, fsync, rename), with its exact row count
(``include_diagnostics=True``: such a file stays on the device). After a crash it loads the last
checkpoint and re-reads the feed from the checkpoint's row count (``n_seen``), so the rows read
after the checkpoint but before the crash are counted exactly once.

The demonstration runs the collector three times:

1. uninterrupted, start to end, in this process;
2. in a child process that kills itself with SIGKILL part-way between two checkpoints;
3. in a child process that resumes from the checkpoint the killed one left, to the end;

and checks that runs 1 and 3 end with the same state (counters, sketch tables, row count) and
the same release. PrivHP draws its noise when it is built, so the checkpoint carries that noise
and a resumed run equals an uninterrupted run with the same noise. To show it exactly the demo
seeds the noise (``--noise-seed``); a seeded noise is
**not private** against anyone who knows the seed. A real collector uses ``rng=None`` (the OS
CSPRNG) and gets the same guarantee: the noise it resumes with is the one it saved.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from sketchsyn import Box, PrivHP
from sketchsyn.evaluate.datasets import TAXI_BOX, taxi_pickups

PARAMS = dict(epsilon=1.0, k=64, width=512, depth=16, seed=3)
FEED_SEED = 11


def feed(n: int, start: int) -> Iterator[np.ndarray]:
    """Rows ``start … n-1`` of the replayable feed, in batches."""
    done = 0
    for batch in taxi_pickups(n, batch_size=10_000, seed=FEED_SEED):
        lo = max(start - done, 0)
        if lo < batch.shape[0]:
            yield batch[lo:]
        done += batch.shape[0]


def collect(
    state: Path, n: int, every: int, noise_seed: int | None, kill_at: int | None = None
) -> PrivHP:
    """Run the collector until row ``n`` (or SIGKILL itself once ``kill_at`` rows are in)."""
    if state.exists():
        php = PrivHP.load(state)
        print(f"resumed from {state.name} at row {php.n_seen}")
    else:
        php = PrivHP(Box(*TAXI_BOX), rng=noise_seed, **PARAMS)
    next_checkpoint = (php.n_seen // every + 1) * every
    for batch in feed(n, php.n_seen):
        while batch.shape[0]:
            take = min(batch.shape[0], next_checkpoint - php.n_seen)
            if kill_at is not None and php.n_seen + take > kill_at:
                take = kill_at - php.n_seen
            php.update_many(batch[:take])
            batch = batch[take:]
            if kill_at is not None and php.n_seen == kill_at:
                print(f"killed at row {kill_at} (last checkpoint at row {next_checkpoint - every})")
                sys.stdout.flush()
                os.kill(os.getpid(), signal.SIGKILL)
            if php.n_seen == next_checkpoint:
                php.save(state, include_diagnostics=True)
                next_checkpoint += every
    php.save(state, include_diagnostics=True)
    return php


def child(args: argparse.Namespace, state: Path, kill_at: int | None) -> int:
    cmd = [sys.executable, __file__, "--child", str(state), "--rows", str(args.rows)]
    cmd += ["--every", str(args.every), "--noise-seed", str(args.noise_seed)]
    if kill_at is not None:
        cmd += ["--kill-at", str(kill_at)]
    return subprocess.run(cmd, check=False).returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--every", type=int, default=100_000)
    parser.add_argument("--noise-seed", type=int, default=2026)
    parser.add_argument("--kill-at", type=int, default=None)
    parser.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        collect(args.child, args.rows, args.every, args.noise_seed, args.kill_at)
        return 0

    kill_at = args.every * (args.rows // args.every // 2) + args.every // 3
    with tempfile.TemporaryDirectory() as tmp:
        whole = collect(Path(tmp) / "whole.sksy", args.rows, args.every, args.noise_seed)
        state = Path(tmp) / "edge.sksy"
        code = child(args, state, kill_at)
        print(f"child 1 exit status {code} (-9 is SIGKILL)")
        saved = PrivHP.load(state)
        print(f"checkpoint on disk after the kill: row {saved.n_seen}")
        code = child(args, state, None)
        print(f"child 2 exit status {code}")
        resumed = PrivHP.load(state)
    same = (
        whole.n_seen == resumed.n_seen
        and np.array_equal(whole._tree, resumed._tree)
        and np.array_equal(whole._bank, resumed._bank)
    )
    print(f"uninterrupted run: {whole.n_seen} rows; killed and resumed run: {resumed.n_seen} rows")
    print(f"states identical (tree, sketches, counts): {same}")
    a, b = whole.release(), resumed.release()
    same_release = a.to_bytes() == b.to_bytes()
    print(f"releases identical: {same_release} ({len(a.leaves().count)} leaves)")
    return 0 if same and same_release and saved.n_seen < kill_at else 1


if __name__ == "__main__":
    sys.exit(main())
