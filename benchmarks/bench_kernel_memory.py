"""What the compiled kernels (the ``fast`` extra) add to a process's resident memory.

    python benchmarks/bench_kernel_memory.py

In a fresh Python process, prints the resident set (``/proc/self/statm``, MB) after each step
that ``sketchsyn fit`` on a Parquet file takes before its first row: numpy, pyarrow's Parquet
reader, sketchsyn's kernel modules, then (when numba is installed) the kernels ready, in two
processes: one with ``fit``'s kernel sets (PrivHP's and the noise tables'), which loads them
compiled ahead of time (``sketchsyn.aot``: numba is not imported), and one that also imports
the sparse counters' kernels (numba's just-in-time kernels only), which prints what numba's
start loads in order: scipy (numba imports it when it is installed), llvmlite, numba, and the
kernels loaded from numba's cache. ``accel.ready(wait=True)`` waits for them; a first run
compiles them, so run twice. Then the time ``python -m sketchsyn.aot_build`` takes to build
every set ahead of time into an empty cache. Linux only (``/proc``).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

CHILD = r"""
import importlib.util, time

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

import os
print(f"{'python':32}{rss():8.0f}")
import numpy
print(f"{'numpy':32}{rss():8.0f}")
import pyarrow.parquet
print(f"{'pyarrow.parquet':32}{rss():8.0f}")
import sys
import sketchsyn.privacy.kernels, sketchsyn.synth.privhp.kernels
if sys.argv[1] == "jit":
    import sketchsyn.counters.sparsebank
from sketchsyn import accel
print(f"{'sketchsyn and its kernel modules':32}{rss():8.0f}")
if accel.AVAILABLE and sys.argv[1] == "aot":
    c = time.process_time()
    accel.ready(wait=True)
    c = time.process_time() - c
    print(f"{'kernels ready':32}{rss():8.0f}   ({c:.2f} CPU-s, {accel.compiled_by()}, "
          f"numba imported: {'numba' in sys.modules})")
elif accel.AVAILABLE:
    if importlib.util.find_spec("scipy") is not None:
        import scipy.linalg
        print(f"{'scipy.linalg':32}{rss():8.0f}")
    import llvmlite.binding
    print(f"{'llvmlite':32}{rss():8.0f}")
    import numba
    print(f"{'numba':32}{rss():8.0f}")
    c = time.process_time()
    accel.ready(wait=True)
    c = time.process_time() - c
    print(f"{'kernels ready':32}{rss():8.0f}   ({c:.2f} CPU-s, {accel.compiled_by()})")
"""


def build_time() -> None:
    """``python -m sketchsyn.aot_build`` into an empty cache: what a machine's first large job
    spends, once, building the kernels ahead of time (in processes of their own)."""
    import resource
    import tempfile
    import time

    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, SKETCHSYN_CACHE_DIR=cache)
        r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        subprocess.run([sys.executable, "-m", "sketchsyn.aot_build"], check=True, env=env,
                       stdout=subprocess.DEVNULL)  # fmt: skip
        wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    print(
        f"\nbuilding every set ahead of time, into an empty cache: wall {wall:.1f} s, "
        f"CPU {cpu:.1f} s (once per machine and source)"
    )


def main() -> None:
    if not os.path.exists("/proc/self/statm"):
        sys.exit("needs Linux (/proc/self/statm)")
    for mode, what in (("aot", "fit's kernel sets"), ("jit", "with the sparse counters' too")):
        print(f"\n{what}:\n{'after':32}{'RSS MB':>8}", flush=True)
        subprocess.run([sys.executable, "-c", CHILD, mode], check=True)
    if importlib.util.find_spec("numba") is None:
        print("(numba is not installed: no kernels)")
    else:
        build_time()


if __name__ == "__main__":
    main()
