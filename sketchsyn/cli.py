"""The ``sketchsyn`` command: fit, sample, evaluate, plot, info and demo.

``sketchsyn fit`` streams a CSV / JSON-lines file, stdin or an access log through PrivHP (or PMM)
in bounded memory and writes the release; ``sample`` turns a release into a synthetic CSV or
JSON-lines file; ``evaluate`` measures W1 against the data beside the data-vs-data floor;
``plot`` draws real vs synthetic points and the released cells; ``info`` describes a release or
a state. Every command has ``--help`` with an example. Exit status: 0 ok, 2 for a usage error or
bad input (a message on stderr naming the argument or the line; no traceback).

``sketchsyn demo`` streams a realistic data set (simulated city ride pickups, 10**6 rows by
default, or any CSV file with ``--csv``) through PrivHP in fixed memory, releases it once and
prints the privacy budget, the memory, the throughput and the W1 distance between the data and a
synthetic sample. With matplotlib installed it also writes a PNG of real vs synthetic points.

>>> main(["demo", "--n", "20000", "--k", "16", "--width", "128", "--no-plot", "--quiet"])
0
"""

from __future__ import annotations

import argparse
import csv
import inspect
import io
import itertools
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from . import __version__
from .domains.domain import Box
from .errors import ReleasedError
from .evaluate.datasets import TAXI_BOX, taxi_pickups
from .synth.privhp import PrivHP

__all__ = ["main"]

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


class _Reservoir:
    """Uniform reservoir sample of a stream (for the evaluation only; never released)."""

    def __init__(self, size: int, d: int, seed: int) -> None:
        self.size = size
        self.items = np.empty((size, d))
        self.seen = 0
        self.rng = np.random.default_rng(seed)

    def add(self, X: np.ndarray) -> None:
        X = np.asarray(X, dtype=np.float64).reshape(-1, self.items.shape[1])
        fill = max(0, min(self.size - self.seen, X.shape[0]))
        self.items[self.seen : self.seen + fill] = X[:fill]
        self.seen += fill
        rest = X[fill:]
        if rest.shape[0]:
            # Algorithm R, vectorised: the t-th item (1-based) takes slot u < size w.p. size/t.
            t = self.seen + np.arange(1, rest.shape[0] + 1)
            slots = (self.rng.random(rest.shape[0]) * t).astype(np.int64)
            keep = slots < self.size
            self.items[slots[keep]] = rest[keep]
            self.seen += rest.shape[0]

    def sample(self) -> np.ndarray:
        return self.items[: min(self.seen, self.size)]


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
    from .evaluate.metrics import wasserstein1

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


# ---------------------------------------------------------------------------------- errors
class UsageError(Exception):
    """A bad argument or bad input met by a command (exit status 2, no traceback)."""


_BOUNDS_HELP = (
    "--bounds is required and must be public: write LOW:HIGH per column, comma-separated, "
    "in the order of --columns (e.g. --bounds=-74.05:-73.75,40.6:40.9 for lon,lat). Choose "
    "them from knowledge that does not depend on this data set: the valid range of the "
    "measurement, a map's bounding box of the area, a sensor's specified range (-180:180,"
    "-90:90 for any lon,lat). Never use the data's own min/max: they are exact values of the "
    "most extreme rows and would leak them. Rows outside follow --out-of-bounds "
    "(raise, clip or drop)."
)


def _fail(message: str) -> UsageError:
    return UsageError(message)


def _parse_columns(text: str | None) -> list[str] | None:
    if text is None:
        return None
    names = [c.strip() for c in text.split(",")]
    if not all(names) or len(set(names)) != len(names):
        raise _fail(f"--columns must be distinct comma-separated names; got {text!r}")
    return names


def _parse_bounds(text: str | None, columns: list[str]) -> tuple[list[float], list[float]]:
    if not text:
        raise _fail(_BOUNDS_HELP)
    lower, upper = [], []
    parts = text.split(",")
    if len(parts) != len(columns):
        raise _fail(
            f"--bounds has {len(parts)} LOW:HIGH pair(s) but --columns names {len(columns)} "
            f"column(s) {columns}; give one pair per column, in the same order"
        )
    for name, part in zip(columns, parts, strict=True):
        try:
            lo_text, hi_text = part.split(":")
            lo, hi = float(lo_text), float(hi_text)
        except ValueError:
            raise _fail(
                f"--bounds pair {part!r} (column {name!r}) is not LOW:HIGH with two numbers"
            ) from None
        if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
            raise _fail(f"--bounds pair {part!r} (column {name!r}) needs finite LOW < HIGH")
        lower.append(lo)
        upper.append(hi)
    return lower, upper


_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KIB": 2**10, "MIB": 2**20}
_UNITS["GIB"] = 2**30


def _parse_bytes(text: str) -> int:
    """``"256KB"`` → 256000, ``"1MiB"`` → 1048576 (KB, MB, GB are powers of ten)."""
    t = text.strip().upper().replace(" ", "")
    number = t.rstrip("KMGIB")
    unit = t[len(number) :]
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if unit not in _UNITS or not value > 0:
        raise _fail(f"--memory {text!r} is not a size like 256KB, 4MB or 1MiB")
    return int(value * _UNITS[unit])


# ------------------------------------------------------------------------------ files
def _write_atomic(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a crash leaves the old or the new file, never a torn one.

    A temporary file in the same directory is written, flushed and fsync'ed, then renamed over
    ``path`` (``os.replace`` is atomic on POSIX and Windows) and the directory is fsync'ed.
    """
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".sketchsyn-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    if hasattr(os, "O_DIRECTORY"):
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def _blob_kind(blob: bytes) -> str | None:
    """The object kind written by ``sketchsyn.io.serial.pack`` (None: not such a file)."""
    from .errors import SerializationError
    from .io.checkpoint import kind_of

    try:
        return kind_of(blob)
    except SerializationError:
        return None


def _load(path: str, what: str) -> Any:
    """A release or a state from a file written by ``sketchsyn fit``."""
    from .synth.distribution import PrivateDistribution
    from .synth.pmm import PMM

    try:
        with open(path, "rb") as fh:
            blob = fh.read()
    except OSError as exc:
        raise _fail(f"cannot read {what} {path!r}: {exc.strerror or exc}") from None
    kinds = {"PrivateDistribution": PrivateDistribution, "PrivHP": PrivHP, "PMM": PMM}
    kind = _blob_kind(blob)
    if kind not in kinds:
        raise _fail(f"{what} {path!r} is not a file written by sketchsyn fit")
    return kinds[kind].from_bytes(blob)


def _load_release(path: str) -> Any:
    from .synth.distribution import PrivateDistribution

    obj = _load(path, "MODEL")
    if not isinstance(obj, PrivateDistribution):
        raise _fail(
            f"MODEL {path!r} is a resumable {type(obj).__name__} state, not a release; "
            f"release it with: sketchsyn fit --resume {path} DATA -o MODEL"
        )
    return obj


# ------------------------------------------------------------------------------ fit
def _build_domain(args: argparse.Namespace, fmt: str) -> tuple[Any, list[str]]:
    from .domains.domain import BitDomain

    if fmt == "accesslog":
        if args.bounds:
            raise _fail("--bounds is not used with --format accesslog (the IPv4 space is public)")
        return BitDomain.ipv4(out_of_bounds="raise", columns=["ip"]), ["ip"]
    columns = _parse_columns(args.columns)
    if columns is None:
        raise _fail("--columns is required: the comma-separated numeric columns to read")
    lower, upper = _parse_bounds(args.bounds, columns)
    return Box(lower, upper, out_of_bounds=args.out_of_bounds, columns=columns), columns


def _privhp_plan(args: argparse.Namespace, domain: Any) -> tuple[PrivHP, str]:
    """A PrivHP for the arguments, and one line saying how its parameters were chosen."""
    from .privacy import accounting

    n = args.expected_n
    if args.memory is None:
        k = 64 if args.k is None else args.k
        width = 1024 if args.width is None else args.width
        php = PrivHP(
            domain,
            epsilon=args.epsilon,
            k=k,
            width=width,
            sketch_depth=3 if args.sketch_depth is None else args.sketch_depth,
            depth=args.depth,
            expected_n=None if args.depth else n,
            sketch=args.sketch,
            rng=args.noise_seed,
        )
        return php, "parameters as given (defaults k=64, width=1024, sketch_depth=3)"
    if args.width is not None or args.depth is not None:
        raise _fail("--memory chooses --width and --depth: give --memory or --width/--depth")
    budget = _parse_bytes(args.memory)
    planner = getattr(PrivHP, "for_memory", None)
    if planner is not None and args.k is None and args.sketch_depth is None:
        kwargs: dict[str, Any] = {"sketch": args.sketch}
        params = inspect.signature(planner).parameters
        if "rng" in params or any(p.kind is p.VAR_KEYWORD for p in params.values()):
            kwargs["rng"] = args.noise_seed
        php = planner(domain, args.epsilon, budget, n, **kwargs)
        return php, f"PrivHP.for_memory({budget:,} bytes, expected_n={n:,})"
    k = 64 if args.k is None else args.k
    j = 3 if args.sketch_depth is None else args.sketch_depth
    depth = min(accounting.privhp_depth(args.epsilon, n, domain.d, k), domain.max_depth)
    # The plain rule keeps the paper's layout (counters down to L_k = floor(log2 k)), so the
    # memory grows with the width and the search ends.
    L_k = min(k.bit_length() - 1, depth)
    width = 0
    while width < 2**31 and (
        PrivHP.memory_bytes(k, 2 * width if width else 1, j, depth, counter_depth=L_k) <= budget
    ):
        width = 2 * width if width else 1
    if width == 0:
        need = PrivHP.memory_bytes(k, 1, j, depth, counter_depth=L_k)
        raise _fail(
            f"--memory {args.memory} is too small: PrivHP with k={k}, sketch_depth={j}, "
            f"depth={depth} needs at least {need:,} bytes; give more memory or a smaller --k"
        )
    php = PrivHP(
        domain,
        epsilon=args.epsilon,
        k=k,
        width=width,
        sketch_depth=j,
        depth=depth,
        sketch=args.sketch,
        rng=args.noise_seed,
        counter_depth=L_k,
    )
    return php, (
        f"plain memory rule: depth from expected_n={n:,}, k={k}, sketch_depth={j}, largest "
        f"power-of-two width within {budget:,} bytes"
    )


def _pmm_plan(args: argparse.Namespace, domain: Any) -> tuple[Any, str]:
    from .privacy import accounting
    from .synth.pmm import PMM

    if args.state:
        raise _fail(
            "--state is for PrivHP: PMM draws its noise at the release, so its state is exact "
            "counts (not private) and is not saved by the command line"
        )
    if args.width is not None or args.k is not None or args.sketch_depth is not None:
        raise _fail("--k, --width and --sketch-depth are PrivHP parameters; PMM has only --depth")
    depth = args.depth
    if depth is None:
        depth = min(accounting.pmm_depth(args.epsilon, args.expected_n, domain.d), 30)
        depth = min(depth, domain.max_depth)
    how = "depth as given" if args.depth else f"depth from expected_n={args.expected_n:,}"
    if args.memory is not None:
        budget = _parse_bytes(args.memory)
        cap = int(np.floor(np.log2(max((budget - 64) / 8, 1))))
        if cap < 1:
            raise _fail(f"--memory {args.memory} is too small for PMM (needs at least 80 bytes)")
        if cap < depth:
            depth, how = cap, f"depth capped by --memory {budget:,} bytes (8·2**depth + 64)"
    return PMM(domain, epsilon=args.epsilon, depth=depth, rng=args.noise_seed), how


def _resume(args: argparse.Namespace) -> Any:
    given = [
        flag
        for flag, value in (
            ("--bounds", args.bounds),
            ("--k", args.k),
            ("--width", args.width),
            ("--depth", args.depth),
            ("--sketch-depth", args.sketch_depth),
            ("--memory", args.memory),
            ("--mechanism", args.mechanism),
            ("--epsilon", args.epsilon),
        )
        if value is not None
    ]
    if given:
        raise _fail(f"--resume takes every parameter from the state; drop {', '.join(given)}")
    summary = _load(args.resume, "--resume state")
    if not isinstance(summary, PrivHP):
        raise _fail(f"--resume {args.resume!r} is not a PrivHP state written by fit --state")
    if _is_released(summary):
        raise _fail(
            f"--resume {args.resume!r} was already released: its noise may be released at one "
            "stream position only, so it accepts no more rows (save states with --state and "
            "no -o to continue later)"
        )
    return summary


def _is_released(summary: Any) -> bool:
    released = getattr(summary, "released", None)
    if released is None:  # PMM keeps its release in _released
        released = getattr(summary, "_released", None) is not None
    return bool(released)


def _check_inside(batch: np.ndarray, domain: Any, reader: Any, columns: list[str]) -> None:
    """Under --out-of-bounds raise: name the first line outside the public bounds."""
    lo, hi = domain.lower, domain.upper
    bad = ~((batch >= lo) & (batch <= hi))
    if bad.any():
        i, c = (int(v[0]) for v in np.nonzero(bad))
        raise _fail(
            f"{reader.name} line {int(reader.lines[i])}: {columns[c]} = {float(batch[i, c])!r} is "
            f"outside the public bounds [{float(lo[c])!r}, {float(hi[c])!r}] (--bounds); pass "
            "--out-of-bounds clip (move it onto the boundary) or drop (leave it out)"
        )


def _fit(args: argparse.Namespace) -> int:
    from .io.progress import progress
    from .io.readers import format_of, open_reader

    if args.resume:
        if args.state and os.path.abspath(args.state) != os.path.abspath(args.resume):
            raise _fail(
                "--resume continues its FILE in place (one lineage for its noise: two "
                "continuations of one state released at different positions would reveal the "
                "rows between them); drop --state or give the same file"
            )
        args.state = args.resume
    if not args.output and not args.state:
        raise _fail("give -o MODEL (the release) and/or --state FILE (a resumable state)")
    fmt = args.format or (None if args.data == "-" else format_of(args.data)) or "csv"
    if args.resume:
        summary = _resume(args)
        how = f"resumed from {args.resume}"
        domain = summary.domain
        columns = list(domain.columns) if domain.columns else _parse_columns(args.columns)
        if args.columns and _parse_columns(args.columns) != columns:
            raise _fail(f"--columns {args.columns!r} differs from the state's columns {columns}")
        if columns is None:
            raise _fail("--columns is required (the state has no column names)")
    else:
        if args.epsilon is None:
            raise _fail("--epsilon is required: the privacy budget, e.g. --epsilon 1")
        domain, columns = _build_domain(args, fmt)
        mechanism = args.mechanism or "privhp"
        plan = _privhp_plan if mechanism == "privhp" else _pmm_plan
        summary, how = plan(args, domain)
    say = _say(args)
    say(f"sketchsyn fit: {type(summary).__name__}, {summary.nbytes:,} bytes of state ({how})")
    reader = open_reader(
        args.data,
        None if fmt == "accesslog" else columns,
        fmt=fmt,
        batch_size=args.batch_size,
        on_bad=args.on_bad,
    )
    check = fmt != "accesslog" and domain.out_of_bounds == "raise"
    every = args.checkpoint_every
    since = 0
    t0 = time.perf_counter()
    bar = progress(reader, enabled=False if args.quiet else None, desc="fit", batched=True)
    for batch in bar:
        if check:
            _check_inside(batch, domain, reader, columns)
        summary.update_many(batch)
        since += batch.shape[0]
        if args.state and every and since >= every:
            _write_atomic(args.state, summary.to_bytes())
            since = 0
    elapsed = time.perf_counter() - t0
    say(
        f"  read {reader.n_rows:,} rows from {reader.name} in {elapsed:.2f} s "
        f"({reader.n_rows / max(elapsed, 1e-9):,.0f} rows/s)"
    )
    if reader.n_bad:
        say(f"  skipped {reader.n_bad:,} bad line(s) (--on-bad skip), first: {reader.bad_lines}")
    if summary.n_dropped:
        say(
            f"  {summary.n_dropped:,} rows outside --bounds were dropped (exact count for you, "
            "the data holder; it is not part of the release)"
        )
    if args.output:
        release = summary.release()
        _write_atomic(args.output, release.to_bytes())
        say(
            f"  wrote {args.output}: {release.mechanism} release, epsilon={release.epsilon}, "
            f"{release.n_leaves} leaves, noisy total {release.total:,.0f}"
        )
    if args.state:
        _write_atomic(args.state, summary.to_bytes())
        note = " (already released: it accepts no more rows)" if args.output else ""
        say(f"  wrote the state {args.state}{note}")
    return 0


def _say(args: argparse.Namespace) -> Any:
    if args.quiet:
        return lambda *a: None
    return lambda *a: print(*a, file=sys.stderr)


# ------------------------------------------------------------------------------ sample
def _frame_names(domain: Any) -> list[str]:
    if domain.columns:
        return list(domain.columns)
    if type(domain).__name__ == "BitDomain":
        return ["key"]
    return [f"x{i}" for i in range(domain.d)]


def _is_ipv4(domain: Any) -> bool:
    return type(domain).__name__ == "BitDomain" and domain.bits == 32


def _ipv4_text(keys: np.ndarray) -> list[str]:
    k = keys.astype(np.int64)
    parts = [(k >> s) & 255 for s in (24, 16, 8, 0)]
    return [f"{a}.{b}.{c}.{d}" for a, b, c, d in zip(*(p.tolist() for p in parts), strict=True)]


def _write_rows(fh: Any, points: np.ndarray, names: list[str], fmt: str, ipv4: bool) -> None:
    if ipv4:
        texts = _ipv4_text(points)
        if fmt == "csv":
            fh.write("".join(t + "\n" for t in texts))
        else:
            key = json.dumps(names[0])
            fh.write("".join(f'{{{key}: "{t}"}}\n' for t in texts))
        return
    pts = points.reshape(points.shape[0], -1)
    if fmt == "csv":
        np.savetxt(fh, pts, fmt="%.17g", delimiter=",")
    else:
        template = ", ".join(json.dumps(n).replace("%", "%%") + ": %.17g" for n in names)
        np.savetxt(fh, pts, fmt="{" + template + "}")


def _sample(args: argparse.Namespace) -> int:
    from .io.readers import format_of
    from .privacy.rng import as_source

    if args.n < 0:
        raise _fail(f"-n must be >= 0; got {args.n}")
    release = _load_release(args.model)
    domain = release.domain
    names = _frame_names(domain)
    fmt = args.format or (None if args.output == "-" else format_of(args.output)) or "csv"
    if fmt not in ("csv", "jsonl"):
        raise _fail(f"-o {args.output!r}: sample writes CSV or JSON lines (--format csv|jsonl)")
    src = as_source(args.seed)
    ipv4 = _is_ipv4(domain)
    out = sys.stdout if args.output == "-" else None
    tmp = None
    if out is None:
        directory = os.path.dirname(os.path.abspath(args.output))
        fd, tmp = tempfile.mkstemp(prefix=".sketchsyn-", suffix=".tmp", dir=directory)
        out = os.fdopen(fd, "w", newline="")
    try:
        if fmt == "csv":
            out.write(",".join(_csv_field(n) for n in names) + "\n")
        left = args.n
        while left > 0:
            m = min(left, args.batch_size)
            _write_rows(out, release.sample(m, rng=src), names, fmt, ipv4)
            left -= m
        if tmp is not None:
            out.flush()
            os.fsync(out.fileno())
            out.close()
            os.replace(tmp, args.output)
            tmp = None
    finally:
        if tmp is not None:
            out.close()
            os.unlink(tmp)
    if args.output != "-":
        _say(args)(f"sketchsyn sample: wrote {args.n:,} synthetic rows {names} to {args.output}")
    return 0


def _csv_field(name: str) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow([name])
    return buf.getvalue()


# ---------------------------------------------------------------------- evaluate, plot
def _reservoir_of(path: str, columns: list[str], args: argparse.Namespace, seed: int) -> Any:
    from .io.readers import format_of, open_reader

    fmt = args.format or (None if path == "-" else format_of(path)) or "csv"
    reader = open_reader(path, None if fmt == "accesslog" else columns, fmt=fmt, on_bad=args.on_bad)
    res = _Reservoir(args.max_points, len(columns), seed=seed)
    for batch in reader:
        res.add(batch)
    if res.seen < 2:
        raise _fail(f"{reader.name} has {res.seen} row(s) of {columns}; at least 2 are needed")
    return res.sample()


def _csv_header(path: str) -> list[str] | None:
    from .io.readers import CSVReader, format_of

    if path == "-" or (format_of(path) or "csv") != "csv":
        return None
    reader = CSVReader(path, None)
    reader.close()
    return reader.header


def _evaluate(args: argparse.Namespace) -> int:
    from .evaluate.metrics import OT_LIMIT, wasserstein1

    columns = _parse_columns(args.columns) or _csv_header(args.synthetic)
    if not columns:
        raise _fail("--columns is required to name the columns compared in DATA and SYNTHETIC")
    lower, upper = _parse_bounds(args.bounds, columns)
    domain = Box(lower, upper, columns=columns)
    if args.max_points > OT_LIMIT and args.method == "ot":
        raise _fail(f"--max-points {args.max_points} exceeds the OT limit {OT_LIMIT}")
    real = _reservoir_of(args.data, columns, args, seed=args.seed)
    synth = _reservoir_of(args.synthetic, columns, args, seed=args.seed + 1)
    method = args.method
    if method == "auto":
        method = "exact" if len(columns) == 1 else _ot_or_tree()
    half = min(real.shape[0] // 2, synth.shape[0])
    a, b = real[:half], real[half : 2 * half]
    w = wasserstein1(a, synth[:half], domain, method=method)
    floor = wasserstein1(a, b, domain, method=method)
    print(f"W1(data, synthetic) = {w.value:.6g}")
    print(f"data-vs-data floor  = {floor.value:.6g}")
    print(
        f"method: {w.method} on uniform reservoir samples, {half} data vs {half} synthetic rows "
        f"(the floor: two disjoint samples of {half} data rows); metric: l-inf after scaling "
        f"each column of --bounds to [0, 1]; columns {columns}"
    )
    return 0


def _ot_or_tree() -> str:
    try:
        import ot  # noqa: F401
    except ImportError:
        return "tree"
    return "ot"


def _plot_cmd(args: argparse.Namespace) -> int:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise _fail("plot needs matplotlib: pip install 'sketchsyn[plot]'") from None
    release = _load_release(args.model)
    domain = release.domain
    if _is_ipv4(domain) or type(domain).__name__ != "Box":
        raise _fail("plot draws Box releases (numeric columns); this one is a key domain")
    columns = list(domain.columns) if domain.columns else _parse_columns(args.columns)
    if not columns:
        raise _fail("--columns is required (the release has no column names)")
    real = _reservoir_of(args.data, columns, args, seed=args.seed)
    synth = release.sample(real.shape[0], rng=args.seed)
    lo, hi = domain.lower, domain.upper
    d = domain.d
    if d == 1:
        fig, ax = plt.subplots(figsize=(7, 4))
        bins = np.linspace(lo[0], hi[0], 60)
        ax.hist(real[:, 0], bins=bins, alpha=0.5, density=True, label="real (sample)")
        ax.hist(synth[:, 0], bins=bins, alpha=0.5, density=True, label="synthetic")
        ax.set_xlabel(columns[0])
        ax.legend()
    elif d == 2:
        fig, axes = plt.subplots(1, 3, figsize=(15, 5), sharex=True, sharey=True)
        for ax, pts, title in ((axes[0], real, "real (sample)"), (axes[1], synth, "synthetic")):
            ax.scatter(pts[:, 0], pts[:, 1], s=2, alpha=0.4)
            ax.set_title(f"{title}, {pts.shape[0]:,} points")
        _draw_cells(axes[2], release, plt)
        axes[2].set_title(f"released cells ({release.n_leaves}), density")
        for ax in axes:
            ax.set_xlim(lo[0], hi[0])
            ax.set_ylim(lo[1], hi[1])
            ax.set_xlabel(columns[0])
        axes[0].set_ylabel(columns[1])
    else:
        fig, axes = plt.subplots(d, d, figsize=(2.6 * d, 2.6 * d))
        for i in range(d):
            for j in range(d):
                ax = axes[i, j]
                if i == j:
                    bins = np.linspace(lo[i], hi[i], 40)
                    ax.hist(real[:, i], bins=bins, alpha=0.5, density=True, label="real")
                    ax.hist(synth[:, i], bins=bins, alpha=0.5, density=True, label="synthetic")
                else:
                    pts = real if i > j else synth
                    ax.scatter(pts[:, j], pts[:, i], s=1, alpha=0.3, color="C0" if i > j else "C1")
                    ax.set_xlim(lo[j], hi[j])
                    ax.set_ylim(lo[i], hi[i])
                if i == d - 1:
                    ax.set_xlabel(columns[j])
                if j == 0:
                    ax.set_ylabel(columns[i])
        axes[0, 0].legend(fontsize="small")
    fig.suptitle(
        f"{release.mechanism}, epsilon={release.epsilon}: real vs synthetic"
        + (" (pairwise: real below the diagonal, synthetic above)" if d > 2 else "")
    )
    fig.tight_layout()
    fig.savefig(args.output, dpi=args.dpi)
    plt.close(fig)
    _say(args)(f"sketchsyn plot: wrote {args.output}")
    return 0


def _draw_cells(ax: Any, release: Any, plt: Any) -> None:
    from matplotlib.collections import PatchCollection
    from matplotlib.colors import LogNorm
    from matplotlib.patches import Rectangle

    leaves = release.leaves()
    area = np.prod(leaves.upper - leaves.lower, axis=1)
    density = leaves.mass / np.where(area > 0, area, 1.0)
    keep = density > 0
    rects = [
        Rectangle((lw[0], lw[1]), up[0] - lw[0], up[1] - lw[1])
        for lw, up in zip(leaves.lower[keep], leaves.upper[keep], strict=True)
    ]
    if not rects:
        return
    coll = PatchCollection(rects, cmap="viridis", norm=LogNorm(), edgecolor="white", lw=0.2)
    coll.set_array(density[keep])
    ax.add_collection(coll)
    plt.colorbar(coll, ax=ax, label="released mass / area (log)")


# ------------------------------------------------------------------------------ info
def _info(args: argparse.Namespace) -> int:
    obj = _load(args.model, "MODEL")
    domain = obj.domain
    kind = type(obj).__name__
    if kind == "PrivateDistribution":
        params = obj.params
        print(f"release of {obj.mechanism} ({args.model})")
        print(f"  epsilon: {obj.epsilon} (pure differential privacy)")
        print(f"  privacy unit: {_unit(params.get('neighbours', 'add-remove'))}")
        print(f"  parameters: {json.dumps(params, sort_keys=True)}")
        print(f"  leaves: {obj.n_leaves:,}; noisy total: {obj.total:,.1f}")
        print(f"  bytes: {obj.nbytes:,} in memory, {os.path.getsize(args.model):,} on disk")
    else:
        params = obj._params()
        params.pop("domain", None)
        released = _is_released(obj)
        print(f"resumable {kind} state ({args.model}); released: {released}")
        print(f"  epsilon: {obj.epsilon} (pure differential privacy)")
        print(f"  privacy unit: {_unit(params.get('neighbours', 'add-remove'))}")
        print(f"  parameters: {json.dumps(params, sort_keys=True)}")
        if kind == "PMM":
            print("  note: a PMM state holds EXACT counts (not private) until its release")
        print(f"  bytes: {obj.nbytes:,} in memory, {os.path.getsize(args.model):,} on disk")
    print(f"  domain: {domain!r}")
    print(f"  columns: {list(domain.columns) if domain.columns else 'none'}")
    return 0


def _unit(neighbours: str) -> str:
    if neighbours == "replace":
        return "one row replaced by another (event level)"
    return "one row added or removed (event level: a person with m rows is protected at m·epsilon)"


# ------------------------------------------------------------------------------ parser
_FMT = argparse.RawDescriptionHelpFormatter


def _common_input(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--format",
        choices=("csv", "jsonl", "accesslog"),
        help="input format (default: from the extension, .gz stripped; CSV for - and others)",
    )
    p.add_argument(
        "--on-bad",
        choices=("raise", "skip"),
        default="raise",
        help="a malformed line: stop with its line number (default) or count and skip it",
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sketchsyn",
        description=__doc__.split("\n\n")[0],
        epilog="Run 'sketchsyn COMMAND --help' for each command's options and an example.",
    )
    parser.add_argument("--version", action="version", version=f"sketchsyn {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    fit = sub.add_parser(
        "fit",
        formatter_class=_FMT,
        help="stream DATA through PrivHP (or PMM) and write the private release",
        description=(
            "Stream DATA (CSV with a header, JSON lines, an access log, or - for stdin; gzip\n"
            "by the .gz extension) in bounded memory and write the differentially private\n"
            "release to MODEL. The bounds are public parameters and are never derived from the\n"
            "data. Rows are read in batches of --batch-size lines (the memory bound).\n\n"
            "Memory planning (--memory): PrivHP.for_memory when the library has it (and --k,\n"
            "--sketch-depth are not given); otherwise the plain rule: depth from --expected-n\n"
            "(ceil(log2(epsilon*n)), SPEC 3), k=64 (or --k), sketch_depth=3 (or --sketch-depth)\n"
            "and the largest power-of-two width w with PrivHP.memory_bytes(k, w, 3, depth) <=\n"
            "the budget. For PMM, --memory caps the depth: 8*2**depth + 64 bytes.\n"
            "--memory bounds the streaming state; the released model (a tree grown from it)\n"
            "may be larger: `sketchsyn info MODEL` shows its size."
        ),
        epilog=(
            "example:\n"
            "  sketchsyn fit rides.csv.gz --columns lon,lat "
            "--bounds=-74.05:-73.75,40.6:40.9 \\\n"
            "      --epsilon 1 --memory 256KB -o rides.model\n"
            "  tail -n +1 access.log | sketchsyn fit - --format accesslog --epsilon 1 -o ip.model\n"
            "  sketchsyn fit day1.csv --columns x,y --bounds 0:1,0:1 --epsilon 1 --state s.bin\n"
            "  sketchsyn fit --resume s.bin day2.csv -o model.bin"
        ),
    )
    fit.add_argument("data", metavar="DATA", help="input file, or - for stdin")
    fit.add_argument("-o", "--output", metavar="MODEL", help="write the release here")
    fit.add_argument("--columns", help="comma-separated numeric columns (header names / keys)")
    fit.add_argument(
        "--bounds",
        help="public LOW:HIGH per column, comma-separated (use --bounds=-1:1,... for negatives)",
    )
    fit.add_argument("--epsilon", type=float, help="privacy budget (pure DP, one row add/remove)")
    fit.add_argument("--mechanism", choices=("privhp", "pmm"), help="default privhp")
    fit.add_argument("--memory", help="state budget, e.g. 256KB, 4MB, 1MiB (see above)")
    fit.add_argument("--k", type=int, help="PrivHP pruning parameter (default 64)")
    fit.add_argument("--width", type=int, help="sketch width (default 1024)")
    fit.add_argument("--sketch-depth", type=int, help="sketch rows (default 3)")
    fit.add_argument("--depth", type=int, help="tree depth (default: from --expected-n)")
    fit.add_argument(
        "--expected-n",
        type=int,
        default=1_000_000,
        help="public guess of the row count, used only for the depth (default 10**6)",
    )
    fit.add_argument("--sketch", choices=("count-min", "count-sketch"), default="count-min")
    fit.add_argument(
        "--out-of-bounds",
        choices=("raise", "clip", "drop"),
        default="raise",
        help="rows outside --bounds: stop naming the line (default), clip or drop them",
    )
    _common_input(fit)
    fit.add_argument("--batch-size", type=int, default=65536, help="lines per batch")
    fit.add_argument(
        "--state",
        metavar="FILE",
        help="also write the resumable noisy PrivHP state (atomically); without -o, continue "
        "it later with --resume (with -o it is saved released and closed)",
    )
    fit.add_argument(
        "--resume",
        metavar="FILE",
        help="continue a state written by --state; FILE is updated in place (one lineage)",
    )
    fit.add_argument(
        "--checkpoint-every",
        type=int,
        metavar="ROWS",
        help="with --state, also write the state after every ROWS rows",
    )
    fit.add_argument("--noise-seed", type=int, help="seed the noise: for tests only, NOT private")
    fit.add_argument("-q", "--quiet", action="store_true", help="no progress bar, no summary")
    fit.set_defaults(func=_fit)

    sample = sub.add_parser(
        "sample",
        formatter_class=_FMT,
        help="draw synthetic rows from a release",
        description=(
            "Draw N synthetic rows from the release MODEL into a CSV or JSON-lines file (by\n"
            "the extension or --format; - for stdout) with the original column names.\n"
            "Sampling is post-processing: it costs no privacy, and --seed only makes the file\n"
            "reproducible (same MODEL, -n, --seed and --batch-size: same rows)."
        ),
        epilog="example:\n  sketchsyn sample rides.model -n 100000 -o synthetic.csv --seed 7",
    )
    sample.add_argument("model", metavar="MODEL")
    sample.add_argument("-n", type=int, required=True, help="number of rows")
    sample.add_argument("-o", "--output", required=True, help="output file, or - for stdout")
    sample.add_argument("--format", choices=("csv", "jsonl"))
    sample.add_argument("--seed", type=int, help="reproducible sampling (post-processing only)")
    sample.add_argument("--batch-size", type=int, default=65536)
    sample.add_argument("-q", "--quiet", action="store_true")
    sample.set_defaults(func=_sample)

    ev = sub.add_parser(
        "evaluate",
        formatter_class=_FMT,
        help="W1 distance between DATA and SYNTHETIC, beside the data-vs-data floor",
        description=(
            "Print the 1-Wasserstein distance between DATA and SYNTHETIC (uniform reservoir\n"
            "samples of --max-points rows of each, read in bounded memory) and the floor: W1\n"
            "between two disjoint samples of DATA of the same size. Distances use the l-inf\n"
            "metric after scaling each column of --bounds to [0, 1]. Method: exact optimal\n"
            "transport (POT, extra [eval]) by default, the tree bound without POT, exact in 1-D."
        ),
        epilog=(
            "example:\n  sketchsyn evaluate rides.csv synthetic.csv --columns lon,lat "
            "--bounds=-74.05:-73.75,40.6:40.9"
        ),
    )
    ev.add_argument("data", metavar="DATA")
    ev.add_argument("synthetic", metavar="SYNTHETIC")
    ev.add_argument("--columns", help="default: the header of SYNTHETIC")
    ev.add_argument("--bounds", help="public LOW:HIGH per column (as for fit)")
    ev.add_argument("--method", choices=("auto", "ot", "tree", "exact"), default="auto")
    ev.add_argument("--max-points", type=int, default=2000, help="rows sampled per file")
    ev.add_argument("--seed", type=int, default=0, help="seed of the evaluation samples")
    _common_input(ev)
    ev.set_defaults(func=_evaluate)

    pl = sub.add_parser(
        "plot",
        formatter_class=_FMT,
        help="picture of real vs synthetic points and the released cells",
        description=(
            "Draw a sample of DATA beside synthetic rows from MODEL (matplotlib, extra [plot]).\n"
            "2 columns: real, synthetic and the released cells coloured by density; 1 column:\n"
            "histograms; more: pairwise marginals (real below the diagonal, synthetic above)."
        ),
        epilog="example:\n  sketchsyn plot rides.csv rides.model -o rides.png",
    )
    pl.add_argument("data", metavar="DATA")
    pl.add_argument("model", metavar="MODEL")
    pl.add_argument("-o", "--output", required=True, help="PNG (or any matplotlib format)")
    pl.add_argument("--columns", help="default: the release's column names")
    pl.add_argument("--max-points", type=int, default=5000)
    pl.add_argument("--seed", type=int, default=0)
    pl.add_argument("--dpi", type=int, default=90)
    pl.add_argument("-q", "--quiet", action="store_true")
    _common_input(pl)
    pl.set_defaults(func=_plot_cmd)

    info = sub.add_parser(
        "info",
        formatter_class=_FMT,
        help="mechanism, epsilon and privacy unit, parameters, leaves, bytes of a file",
        description="Describe a release or a resumable state written by sketchsyn fit.",
        epilog="example:\n  sketchsyn info rides.model",
    )
    info.add_argument("model", metavar="MODEL")
    info.set_defaults(func=_info)

    demo = sub.add_parser(
        "demo",
        formatter_class=_FMT,
        help="stream a data set through PrivHP and print the release",
        epilog="example:\n  sketchsyn demo --n 200000 --no-plot",
    )
    demo.add_argument("--n", type=int, default=1_000_000, help="rows to stream (default 10**6)")
    demo.add_argument("--epsilon", type=float, default=1.0)
    demo.add_argument("--k", type=int, default=64)
    demo.add_argument("--width", type=int, default=1024)
    demo.add_argument("--sketch-depth", type=int, default=3)
    demo.add_argument("--depth", type=int, default=None, help="default: from --n (SPEC §3)")
    demo.add_argument("--sketch", choices=("count-min", "count-sketch"), default="count-min")
    demo.add_argument("--batch-size", type=int, default=65536)
    demo.add_argument("--samples", type=int, default=100_000, help="synthetic rows to draw")
    demo.add_argument("--data-seed", type=int, default=0, help="seed of the simulated data")
    demo.add_argument(
        "--noise-seed",
        type=int,
        default=None,
        help="seed the noise (NOT private; default: OS CSPRNG)",
    )
    demo.add_argument("--csv", help="stream this CSV file instead (lazily)")
    demo.add_argument("--columns", help="comma-separated numeric columns of --csv")
    demo.add_argument("--lower", help="comma-separated public lower bounds for --csv")
    demo.add_argument("--upper", help="comma-separated public upper bounds for --csv")
    demo.add_argument("--plot", default="sketchsyn-demo.png", help="PNG path")
    demo.add_argument("--no-plot", action="store_true")
    demo.add_argument("-q", "--quiet", action="store_true")
    demo.set_defaults(func=_demo_cmd)
    return parser


def _demo_cmd(args: argparse.Namespace) -> int:
    if args.csv and not (args.columns and args.lower and args.upper):
        raise _fail("--csv needs --columns, --lower and --upper")
    return _demo(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``sketchsyn`` command; returns the exit status.

    Usage errors and bad input print one message on stderr and return 2 (argparse's own usage
    errors exit with 2 as well). Set ``SKETCHSYN_DEBUG=1`` to get the traceback instead.
    """
    args = _parser().parse_args(argv)
    try:
        return int(args.func(args))
    except BrokenPipeError:  # e.g. `sketchsyn sample … -o - | head`: the reader has enough
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except (UsageError, ValueError, ReleasedError, OSError) as exc:
        if os.environ.get("SKETCHSYN_DEBUG"):
            raise
        message = str(exc) if str(exc) else type(exc).__name__
        print(f"sketchsyn {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"sketchsyn {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
