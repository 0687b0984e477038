"""What the compiled kernels (``sketchsyn.kernels``) add to a process's resident memory and
start-up.

    python benchmarks/bench_kernel_memory.py

In a fresh Python process per path (the compiled extension, and the numpy path with
``SKETCHSYN_KERNELS=numpy``), prints the resident set (``/proc/self/statm``, MB) and the CPU
seconds after each step that ``sketchsyn fit`` on a Parquet file takes before its first row
(numpy, pyarrow's Parquet reader, sketchsyn with its kernels and the modules that call them),
then after PrivHP's first batch of 262,144 rows and after an online synthesizer's first
65,536 records: nothing is compiled or loaded at run time, so the first batch costs what a
later one does. Linux only (``/proc``).
"""

from __future__ import annotations

import os
import subprocess
import sys

CHILD = r"""
import os, time

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

def row(what):
    print(f"{what:40}{rss():8.0f}{time.process_time():10.3f}", flush=True)

row("python")
import numpy as np
row("numpy")
import pyarrow.parquet
row("pyarrow.parquet")
import sys
from sketchsyn import Box, OnlineSynthesizer, PrivHP, kernels
import sketchsyn.counters.sparsebank, sketchsyn.privacy.noise, sketchsyn.synth.privhp.bank
row(f"sketchsyn, kernels: {kernels.active()}")
X = np.random.default_rng(0).random((262_144, 2))
php = PrivHP.for_memory(Box.unit(2), 1.0, 256 * 1024, 10**8, rng=1)
php.update_many(X)
row("PrivHP's first batch")
php.update_many(X)
row("PrivHP's second batch")
online = OnlineSynthesizer(Box.unit(2), 1.0)
online.update_many(X[:65_536])
row("OnlineSynthesizer's first 65,536")
print("numba imported:", "numba" in sys.modules, "; llvmlite imported:", "llvmlite" in sys.modules)
"""


def main() -> None:
    if not os.path.exists("/proc/self/statm"):
        sys.exit("needs Linux (/proc/self/statm)")
    for switch in ("extension", "numpy"):
        env = dict(os.environ, SKETCHSYN_KERNELS=switch)
        print(f"\nSKETCHSYN_KERNELS={switch}:\n{'after':40}{'RSS MB':>8}{'CPU s':>10}", flush=True)
        subprocess.run([sys.executable, "-c", CHILD], check=True, env=env)


if __name__ == "__main__":
    main()
