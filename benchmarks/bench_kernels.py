"""The compiled kernels (``sketchsyn.kernels``) against the C anchor, in fresh processes.

    python benchmarks/bench_kernels.py [--rows 16777216] [--rounds 3]
    python benchmarks/bench_kernels.py --streams [--eps 1]
    python benchmarks/bench_kernels.py --runtime-check [--check-rows 33554432]

**The C anchor** is PrivHP's update written as a plain C loop, the way a C programmer would write
Algorithm 2 without our batching: for each row, its cell's Morton code (magic-number bit
spreading), then every
level's counter or, for each sketch level, every sketch row's MurmurHash3 of the prefix and one
addition (the hash computed for every row and level: no per-cell counting, no blocks). This
script writes it to a temporary folder, compiles it with the machine's C compiler (``cc -O3``:
a benchmark may run a compiler; sketchsyn never does at run time), feeds it the rows of
``benchmarks/bench_cli.py`` (its rides, read from memory) on the plan ``sketchsyn fit`` makes
for 10**8 rows (``PrivHP.for_memory(box, 1, 256 KB, 10**8)``, both sketches), checks that its
counters and sketch tables equal ``update_many``'s, and times its loop (CPU time, the reading
of the rows excluded).

**Fresh processes.** Then, in a fresh Python process per path (the compiled extension, and the
numpy path with ``SKETCHSYN_KERNELS=numpy``), ``update_many`` counts ``--rows`` rows in
262,144-row batches, ``--rounds`` times; the CPU seconds of every round (the first included:
nothing is compiled or loaded before it) are printed as points per CPU-second and as a ratio
to the C anchor, side by side in one run.

``--streams``: the streaming synthesizers' first instance in a fresh process (one process per
method, path and source), fed the flights stream of ``benchmarks/bench_streams.py`` (327,346
records, read before the clock starts) in 65,536-row batches: ``OnlineSynthesizer`` and
``StreamingPrivTree`` with 64 releases over the stream, seeded and private (the OS CSPRNG),
the extension and the numpy path; records per CPU-second (the process's CPU while it feeds).

``--runtime-check`` runs the issue's check at full size instead: a fresh process in an empty
working directory holding a planted ``numba.py``, with an empty ``SKETCHSYN_CACHE_DIR``, ingests
2**25 rows and fits a file with the CLI; it prints whether numba or llvmlite was imported,
whether the planted module ran, the processes started and the files opened for writing (the
test ``tests/test_kernels_safety.py`` runs it with 2**22 rows).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_privhp import rides  # noqa: E402

from sketchsyn import Box, PrivHP  # noqa: E402

BOX = ([-74.05, 40.6], [-73.75, 40.9])

_ANCHOR_C = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint32_t rotl(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

/* MurmurHash3 x86_32 of an 8-byte little-endian key. */
static uint32_t murmur(uint64_t key, uint32_t seed) {
    uint32_t h = seed;
    for (int b = 0; b < 2; b++) {
        uint32_t k = (uint32_t)(key >> (32 * b));
        k *= 0xCC9E2D51u; k = rotl(k, 15); k *= 0x1B873593u;
        h ^= k; h = rotl(h, 13); h = h * 5u + 0xE6546B64u;
    }
    h ^= 8u; h ^= h >> 16; h *= 0x85EBCA6Bu; h ^= h >> 13; h *= 0xC2B2AE35u; h ^= h >> 16;
    return h;
}

/* Bit j of x to bit 2j (the Morton interleave of two axes). */
static uint64_t spread(uint64_t x) {
    x = (x | (x << 16)) & 0x0000FFFF0000FFFFull;
    x = (x | (x << 8)) & 0x00FF00FF00FF00FFull;
    x = (x | (x << 4)) & 0x0F0F0F0F0F0F0F0Full;
    x = (x | (x << 2)) & 0x3333333333333333ull;
    return (x | (x << 1)) & 0x5555555555555555ull;
}

int main(int argc, char **argv) {
    /* argv: points file, n, depth r, counter depth L, width w, sketch rows j, signed,
       seeds file (levels*j row seeds then levels*j sign seeds), lower0 lower1 div0 div1
       top0 top1, output file */
    FILE *f = fopen(argv[1], "rb");
    long n = atol(argv[2]);
    int r = atoi(argv[3]), L = atoi(argv[4]), j = atoi(argv[6]), sgn = atoi(argv[7]);
    uint64_t w = strtoull(argv[5], NULL, 10);
    double lower[2] = {atof(argv[9]), atof(argv[10])}, div[2] = {atof(argv[11]), atof(argv[12])};
    double top[2] = {atof(argv[13]), atof(argv[14])};
    double *x = malloc(sizeof(double) * 2 * n);
    if (fread(x, sizeof(double), 2 * n, f) != (size_t)(2 * n)) return 1;
    fclose(f);
    int levels = r - L;
    uint32_t *seeds = malloc(sizeof(uint32_t) * 2 * levels * j);
    f = fopen(argv[8], "rb");
    if (fread(seeds, sizeof(uint32_t), 2 * levels * j, f) != (size_t)(2 * levels * j)) return 1;
    fclose(f);
    int64_t *tree = calloc(((size_t)2 << L) - 1, sizeof(int64_t));
    int64_t *bank = calloc((size_t)levels * j * w, sizeof(int64_t));
    int bits[2] = {(r + 1) / 2, r / 2};
    struct timespec t0, t1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
    for (long i = 0; i < n; i++) {
        uint64_t q[2];
        for (int a = 0; a < 2; a++) {
            double v = (x[2 * i + a] - lower[a]) / div[a];
            q[a] = (uint64_t)(v < top[a] ? v : top[a]);
        }
        uint64_t code = (spread(q[0]) << (r - 2 * bits[0] + 1)) |
                        (spread(q[1]) << (r - 2 * bits[1]));
        for (int level = 0; level <= L; level++)
            tree[((int64_t)1 << level) - 1 + (int64_t)(code >> (r - level))] += 1;
        for (int s = 0; s < levels; s++) {
            uint64_t prefix = code >> (r - (L + 1 + s));
            for (int row = 0; row < j; row++) {
                uint32_t h = murmur(prefix, seeds[s * j + row]);
                uint64_t b = ((uint64_t)h * w) >> 32;
                int64_t one = 1;
                if (sgn && (murmur(prefix, seeds[levels * j + s * j + row]) & 1)) one = -1;
                bank[((size_t)s * j + row) * w + b] += one;
            }
        }
    }
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
    printf("%.6f\n", (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec));
    f = fopen(argv[15], "wb");
    fwrite(tree, sizeof(int64_t), ((size_t)2 << L) - 1, f);
    fwrite(bank, sizeof(int64_t), (size_t)levels * j * w, f);
    fclose(f);
    return 0;
}
"""


def _plan(sketch: str) -> PrivHP:
    return PrivHP.for_memory(Box(*BOX), 1.0, 256 * 1024, 10**8, rng=1, sketch=sketch)


def anchor(X: np.ndarray, sketch: str, folder: Path) -> float:
    """The C anchor's CPU seconds on ``X`` (checked: its state is ``update_many``'s)."""
    php = _plan(sketch)
    r, L, w, j = php.depth, php.counter_depth, php.width, php.sketch_depth
    levels = r - L
    src, exe = folder / "anchor.c", folder / "anchor"
    if not exe.exists():
        src.write_text(_ANCHOR_C)
        subprocess.run(["cc", "-O3", "-o", str(exe), str(src)], check=True)
    pts, seeds, out = folder / "x.bin", folder / f"seeds_{sketch}.bin", folder / "state.bin"
    if not pts.exists():
        np.ascontiguousarray(X, dtype=np.float64).tofile(pts)
    rows = php._row_seeds.reshape(levels, j)
    signs = php._sign_seeds.reshape(levels, j) if php._sign_seeds is not None else rows * 0
    np.concatenate([rows.ravel(), signs.ravel()]).astype(np.uint32).tofile(seeds)
    lower, upper = np.array(BOX[0]), np.array(BOX[1])
    bits = [(r + 1) // 2, r // 2]
    div = [float(np.ldexp(upper[a] - lower[a], -bits[a])) for a in range(2)]
    top = [2.0 ** bits[a] - 1 for a in range(2)]
    args = [str(exe), str(pts), str(X.shape[0]), str(r), str(L), str(w), str(j),
            str(int(php._sign_seeds is not None)), str(seeds),
            *(repr(float(v)) for v in [*lower, *div, *top]),
            str(out)]  # fmt: skip
    cpu = float(subprocess.run(args, check=True, capture_output=True, text=True).stdout)
    state = np.fromfile(out, dtype=np.int64)
    tree, bank = state[: php._tree.size], state[php._tree.size :]
    tree0, bank0 = php._tree.copy(), php._bank.copy()  # (the noise drawn at construction)
    for i in range(0, X.shape[0], 262_144):
        php.update_many(X[i : i + 262_144])
    same = np.array_equal(tree, php._tree - tree0)
    if not (same and np.array_equal(bank, (php._bank - bank0).ravel())):
        raise AssertionError(f"the C anchor's state is not update_many's ({sketch})")
    return cpu


_ROUNDS = """
import json, os, sys, time
sys.path.insert(0, {here!r})
from bench_privhp import rides
import numpy as np
from sketchsyn import Box, PrivHP, kernels
X = rides({rows})
out = {{"path": kernels.active(), "rounds": {{}}}}
for sketch in ("count-min", "count-sketch"):
    php = PrivHP.for_memory(Box(*{box!r}), 1.0, 256 * 1024, 10**8, rng=1, sketch=sketch)
    got = []
    for _ in range({rounds}):
        c0 = time.process_time()
        for i in range(0, X.shape[0], 262_144):
            php.update_many(X[i : i + 262_144])
        got.append(time.process_time() - c0)
    out["rounds"][sketch] = got
print(json.dumps(out))
"""


def fresh_rounds(rows: int, rounds: int, numpy: bool) -> dict:
    """Each round's CPU seconds of ``update_many`` in a fresh process (one per path)."""
    import json

    env = dict(os.environ)
    if numpy:
        env["SKETCHSYN_KERNELS"] = "numpy"
    code = _ROUNDS.format(here=str(HERE), rows=rows, rounds=rounds, box=BOX)
    got = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True,
                         text=True)  # fmt: skip
    return json.loads(got.stdout)


def compare(rows: int, rounds: int) -> None:
    X = rides(rows)
    print(f"update_many against the C anchor: {rows:,} rows of bench_cli.py's rides, plan "
          f"PrivHP.for_memory(box, 1, 256 KB, 10^8), 262,144-row batches")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        anchors = {s: anchor(X, s, Path(tmp)) for s in ("count-min", "count-sketch")}
    runs = [fresh_rounds(rows, rounds, numpy) for numpy in (False, True)]
    for sketch, cpu in anchors.items():
        php = _plan(sketch)
        a_rate = rows / cpu
        print(f"\n{sketch} (depth {php.depth}, counter_depth {php.counter_depth}, width "
              f"{php.width}, sketch_depth {php.sketch_depth}); the C anchor's state equals "
              f"update_many's")  # fmt: skip
        print(f"  {'':30}{'CPU s':>8}{'M points/CPU-s':>16}{'x C anchor':>12}")
        print(f"  {'C anchor (cc -O3)':30}{cpu:>8.3f}{a_rate / 1e6:>16.1f}{1.0:>12.2f}")
        for run in runs:
            for k, c in enumerate(run["rounds"][sketch]):
                name = f"{run['path']}, fresh process, round {k + 1}"
                print(f"  {name:30}{c:>8.3f}{rows / c / 1e6:>16.1f}{rows / c / a_rate:>12.2f}")


_STREAMS = """
import json, sys, time
sys.path.insert(0, {here!r})
import bench_streams as bs
from sketchsyn import OnlineSynthesizer, StreamingPrivTree, kernels
stream = bs.flights_stream(None)
blocks = list(bs._blocks(stream))
rng = {rng}
if {method!r} == "OnlineSynthesizer":
    obj = OnlineSynthesizer(stream.domain, {eps}, rng=rng)
else:
    obj = StreamingPrivTree(stream.domain, {eps}, horizon=stream.events, releases=64,
                            memory_bytes=bs.BUDGET, rng=rng)
c0, t0 = time.process_time(), time.perf_counter()
for _, ins, dele in blocks:
    bs._feed(obj, ins, dele, 65536)
cpu, wall = time.process_time() - c0, time.perf_counter() - t0
print(json.dumps(dict(path=kernels.active(), events=stream.events, cpu=cpu, wall=wall)))
"""


def streams(eps: float, repeat: int) -> None:
    """The streaming synthesizers' first instance in fresh processes (see the module doc)."""
    import json

    goals = {"OnlineSynthesizer": 2.0, "StreamingPrivTree (releases=64)": 1.5}
    print(f"first instance in a fresh process, flights stream, eps {eps:g}, 65,536-row "
          f"batches, best of {repeat}; M records per CPU-second (per second)")  # fmt: skip
    print(f"  {'method':34}{'source':9}{'extension':>20}{'numpy path':>20}{'ratio':>8}  goal")
    for method, goal in goals.items():
        for source, rng in (("seeded", "1"), ("private", "None")):
            best = {}
            for switch in ("extension", "numpy"):
                env = dict(os.environ, SKETCHSYN_KERNELS=switch)
                code = _STREAMS.format(here=str(HERE), rng=rng, method=method.split(" ")[0],
                                       eps=eps)  # fmt: skip
                runs = []
                for _ in range(repeat):
                    out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                                         capture_output=True, text=True)  # fmt: skip
                    runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
                cpu, wall = min(r["cpu"] for r in runs), min(r["wall"] for r in runs)
                best[switch] = (runs[0]["events"] / cpu / 1e6, runs[0]["events"] / wall / 1e6)
            (e, ew), (n, nw) = best["extension"], best["numpy"]
            met = "met" if e >= goal else "missed"
            print(f"  {method:34}{source:9}{e:>11.2f} ({ew:5.2f}){n:>12.2f} ({nw:5.2f})"
                  f"{e / n:>7.2f}x  >= {goal}: {met}")  # fmt: skip


def runtime_check(rows: int) -> None:
    """The issue's check at full size (see tests/test_kernels_safety.py)."""
    sys.path.insert(0, str(HERE.parent / "tests"))
    from test_kernels_safety import _RUNTIME_CHECK, _fresh

    import sketchsyn

    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        cwd, cache, out = tmp_path / "cwd", tmp_path / "cache", tmp_path / "out"
        for d in (cwd, cache, out):
            d.mkdir()
        planted = f"open({str(out / 'ran')!r}, 'w').write('x')\nraise SystemExit('planted')\n"
        (cwd / "numba.py").write_text(planted)
        (cwd / "llvmlite.py").write_text(planted)
        data = tmp_path / "data.csv"
        xy = np.random.default_rng(1).random((20_000, 2))
        np.savetxt(data, xy, fmt="%.6f", delimiter=",", header="x,y", comments="")
        package = Path(sketchsyn.__file__).parent
        before = sorted(str(p) for p in package.rglob("*") if "__pycache__" not in p.parts)
        env = {"SKETCHSYN_CACHE_DIR": str(cache), "OUT_DIR": str(out), "DATA": str(data),
               "ROWS": str(rows), "PYTHONDONTWRITEBYTECODE": "1"}  # fmt: skip
        got = _fresh(_RUNTIME_CHECK, cwd, env)
        print(textwrap.indent(got.stdout + got.stderr[-2000:], "  "))
        after = sorted(str(p) for p in package.rglob("*") if "__pycache__" not in p.parts)
        print(f"  rows {rows:,}; exit {got.returncode}; working dir {sorted(os.listdir(cwd))}; "
              f"cache {os.listdir(cache)}; outputs {sorted(os.listdir(out))}; package files "
              f"unchanged: {before == after}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1 << 24)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runtime-check", action="store_true")
    parser.add_argument("--streams", action="store_true")
    parser.add_argument("--eps", type=float, default=1.0)
    parser.add_argument("--check-rows", type=int, default=1 << 25)
    args = parser.parse_args()
    if args.runtime_check:
        runtime_check(args.check_rows)
    elif args.streams:
        streams(args.eps, args.rounds)
    else:
        compare(args.rows, args.rounds)


if __name__ == "__main__":
    main()
