"""``sketchsyn evaluate`` (W1 between DATA and SYNTHETIC beside the data-vs-data floor) and
``sketchsyn plot`` (real vs synthetic points and the released cells); tables go to
:mod:`sketchsyn.cli.compare_tables`.

>>> _ot_or_tree() in ("ot", "tree")
True
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

from ..domains import Box
from .common import (
    _check_output,
    _fail,
    _load_release,
    _parse_bounds,
    _parse_columns,
    _Reservoir,
    _say,
)
from .release import _is_ipv4


def _data_format(args: argparse.Namespace, path: str, default: str = "csv") -> str:
    """The format of DATA: --format, else its extension, else ``default``."""
    from ..io.readers import format_of

    return args.format or (None if path == "-" else format_of(path)) or default


def _synthetic_format(args: argparse.Namespace, path: str) -> str:
    """The format of SYNTHETIC: its extension, else --format (never an access log), else CSV."""
    from ..io.readers import format_of

    fmt = None if path == "-" else format_of(path)
    if fmt not in (None, "accesslog"):
        return fmt
    return args.format if args.format not in (None, "accesslog") else "csv"


def _reservoir_of(
    path: str, columns: list[str], args: argparse.Namespace, seed: int, fmt: str | None = None
) -> Any:
    from ..io.readers import open_reader

    fmt = fmt or _data_format(args, path)
    reader = open_reader(path, None if fmt == "accesslog" else columns, fmt=fmt, on_bad=args.on_bad)
    res = _Reservoir(args.max_points, len(columns), seed=seed)
    what = f"{reader.name} ({fmt}, --columns {','.join(columns)})"
    for batch in reader:
        res.add(batch, what)
    if res.seen < 2:
        raise _fail(f"{reader.name} has {res.seen} row(s) of {columns}; at least 2 are needed")
    return res.sample()


def _csv_header(path: str) -> list[str] | None:
    from ..io.readers import CSVReader, format_of

    if path == "-" or (format_of(path) or "csv") != "csv":
        return None
    reader = CSVReader(path, None)
    reader.close()
    return reader.header


def _evaluate(args: argparse.Namespace) -> int:
    from ..evaluate.metrics import OT_LIMIT, wasserstein1

    if args.schema:
        from .compare_tables import _evaluate_table

        return _evaluate_table(args)

    ipv4 = _data_format(args, args.data) == "accesslog"
    if args.max_points is None:
        args.max_points = 20_000 if ipv4 and args.method != "ot" else 2000
    if args.max_points < 2:
        raise _fail(f"--max-points must be >= 2; got {args.max_points}")
    if ipv4:
        return _evaluate_ipv4(args)
    columns = _parse_columns(args.columns) or _csv_header(args.synthetic)
    if not columns:
        raise _fail("--columns is required to name the columns compared in DATA and SYNTHETIC")
    lower, upper = _parse_bounds(args.bounds, columns)
    domain = Box(lower, upper, columns=columns)
    if args.max_points > OT_LIMIT and args.method == "ot":
        raise _fail(f"--max-points {args.max_points} exceeds the OT limit {OT_LIMIT}")
    real = _reservoir_of(args.data, columns, args, seed=args.seed)
    synth_fmt = _synthetic_format(args, args.synthetic)
    synth = _reservoir_of(args.synthetic, columns, args, seed=args.seed + 1, fmt=synth_fmt)
    method = args.method
    if method == "auto":
        method = "exact" if len(columns) == 1 else _ot_or_tree()
    half = min(real.shape[0] // 2, synth.shape[0])
    a, b = _split(real, half, args.seed)
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


def _split(real: np.ndarray, half: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two disjoint uniform samples of ``half`` rows: a reservoir keeps its first rows in file
    order, so its two halves are not exchangeable (a sorted file would make the floor huge).

    >>> a, b = _split(np.arange(10.0), 5, seed=0)
    >>> sorted(np.concatenate([a, b]).tolist()) == list(range(10))
    True
    """
    perm = np.random.default_rng(seed).permutation(real.shape[0])
    return real[perm[:half]], real[perm[half : 2 * half]]


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
    _check_output(args.output, "-o")
    release = _load_release(args.model)
    domain = release.domain
    if _is_ipv4(domain):
        return _plot_ipv4(args, release, plt)
    if type(domain).__name__ == "Schema":
        from .compare_tables import _plot_table

        return _plot_table(args, release, plt)
    if type(domain).__name__ != "Box":
        raise _fail(f"plot draws numeric (Box) and IPv4 releases; this one's domain is {domain!r}")
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


# ------------------------------------------------------------------------------- IPv4 releases
_TOP_NETWORKS = 5  # busiest /16 networks listed by evaluate


def _ipv4_file_batches(
    path: str, fmt: str, column: str | None, on_bad: str, state: dict[str, int]
) -> Any:
    """IPv4 keys (uint64 batches) of one column of a CSV or JSON-lines file (``sample``'s output:
    dotted quads; whole-number keys are read too); ``state["bad"]`` counts skipped lines."""
    import csv
    import gzip
    import json
    import sys

    from ..domains import BitDomain
    from ..errors import InputError

    dom = BitDomain.ipv4()
    name = "<stdin>" if path == "-" else path
    if fmt not in ("csv", "jsonl") or path.endswith((".zst", ".zstd")):
        raise _fail(
            f"{name}: IPv4 addresses are read from an access log, or from CSV or JSON lines "
            f"(plain or .gz) as sketchsyn sample writes them; got {fmt}"
        )
    try:
        fh = (
            sys.stdin.buffer
            if path == "-"
            else (gzip.open if path.endswith(".gz") else open)(path, "rb")
        )
    except OSError as exc:
        raise _fail(f"cannot open {path!r}: {exc.strerror or exc}") from None
    state["bad"] = 0

    def bad(lineno: int, why: str) -> None:
        if on_bad == "raise":
            raise InputError(f"{name} line {lineno}: {why} (pass --on-bad skip to skip it)")
        state["bad"] += 1

    def one(tok: Any, lineno: int) -> int | None:
        text = tok.decode(errors="replace") if isinstance(tok, bytes) else str(tok)
        if text.isdigit() and int(text) < 2**32:
            return int(text)
        try:
            return int(dom.encode([text], depth=32)[0])
        except InputError:
            bad(lineno, f"{column!r} = {text!r} is not an IPv4 address")
            return None

    try:
        lineno, col, ncols = 0, 0, 1
        if fmt == "csv":
            header = fh.readline()
            lineno = 1
            names = [n.strip() for n in next(csv.reader([header.decode(errors="replace")]), [])]
            if column is None:
                column = "ip" if "ip" in names else names[0] if len(names) == 1 else None
            if column is None or column not in names:
                raise _fail(
                    f"{name}: no column {column!r} of IPv4 addresses in the header {names}; "
                    "name it with --columns"
                )
            col, ncols = names.index(column), len(names)
        column = column or "ip"
        while True:
            lines = fh.readlines(1 << 20)
            if not lines:
                break
            first, lineno = lineno + 1, lineno + len(lines)
            if fmt == "csv" and ncols == 1:
                toks = [ln.strip().strip(b'"') for ln in lines]
            elif fmt == "csv":
                toks = []
                for i, ln in enumerate(lines):
                    fields = ln.split(b",")
                    if ln.strip() and len(fields) != ncols:
                        bad(first + i, f"{len(fields)} fields where the header has {ncols}")
                        fields = [b""] * ncols
                    toks.append(fields[col].strip().strip(b'"') if ln.strip() else b"")
            else:
                toks = []
                for i, ln in enumerate(lines):
                    if not ln.strip():
                        toks.append(b"")
                        continue
                    try:
                        obj = json.loads(ln)
                        toks.append(str(obj[column]).encode())
                    except (ValueError, KeyError, TypeError):
                        bad(first + i, f"not a JSON object with the key {column!r}")
                        toks.append(b"")
            nums = [first + i for i, t in enumerate(toks) if t]
            toks = [t for t in toks if t]
            if not toks:
                continue
            try:
                keys = dom.encode(np.array(toks, dtype=bytes), depth=32)
            except InputError:  # a bad or a whole-number key: this batch one by one
                parsed = [one(t, n) for t, n in zip(toks, nums, strict=True)]
                keys = np.array([k for k in parsed if k is not None], dtype=np.uint64)
            yield keys
    finally:
        if path != "-":
            fh.close()


def _log_batches(path: str, on_bad: str, state: dict[str, int]) -> Any:
    """Client addresses of an access log (uint64 batches); ``state["bad"]``: lines skipped."""
    from ..io.readers import open_reader

    reader = open_reader(path, None, fmt="accesslog", on_bad=on_bad)
    for batch in reader:
        state["bad"] = reader.n_bad
        yield np.asarray(batch, dtype=np.uint64)
    state["bad"] = reader.n_bad


def _ipv4_summary(batches: Any, size: int, seed: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(uniform reservoir sample of ``size`` keys, counts per /16 network, rows)."""
    from ..evaluate.ipv4plot import prefix_counts

    res = _Reservoir(size, 1, seed=seed)
    counts = np.zeros(1 << 16, dtype=np.int64)
    for keys in batches:
        res.add(keys.astype(np.float64))
        prefix_counts(keys, counts)
    return res.sample()[:, 0], counts, res.seen


def _ipv4_text16(p: int) -> str:
    return f"{p >> 8}.{p & 255}.0.0/16"


def _evaluate_ipv4(args: argparse.Namespace) -> int:
    from ..domains import BitDomain
    from ..evaluate.metrics import OT_LIMIT, wasserstein1

    if args.bounds:
        raise _fail("--bounds is not used with an access log: the IPv4 address space is public")
    columns = _parse_columns(args.columns)
    if columns is not None and len(columns) != 1:
        raise _fail(
            f"--columns {args.columns!r}: an access log has one column, the client address; "
            "name the column of SYNTHETIC that holds the addresses (default: ip)"
        )
    if args.max_points > OT_LIMIT and args.method == "ot":
        raise _fail(f"--max-points {args.max_points} exceeds the OT limit {OT_LIMIT}")
    column = columns[0] if columns else None
    rstate: dict[str, int] = {"bad": 0}
    sstate: dict[str, int] = {"bad": 0}
    real, rc, rn = _ipv4_summary(
        _log_batches(args.data, args.on_bad, rstate), args.max_points, args.seed
    )
    synth_fmt = _synthetic_format(args, args.synthetic)
    synth, sc, sn = _ipv4_summary(
        _ipv4_file_batches(args.synthetic, synth_fmt, column, args.on_bad, sstate),
        args.max_points,
        args.seed + 1,
    )
    for path, n in ((args.data, rn), (args.synthetic, sn)):
        if n < 2:
            raise _fail(f"{path} has {n} IPv4 address(es); at least 2 are needed")
    method = "tree" if args.method == "auto" else args.method
    dom = BitDomain.ipv4()
    half = min(real.shape[0] // 2, synth.shape[0])
    a, b = _split(real, half, args.seed)
    depth = {"depth": 32} if method == "tree" else {}
    w = wasserstein1(a, synth[:half], dom, method=method, **depth)
    floor = wasserstein1(a, b, dom, method=method, **depth)
    print(f"W1(data, synthetic) = {w.value:.6g}")
    print(f"data-vs-data floor  = {floor.value:.6g}")
    if w.method == "tree":
        how = (
            "tree: on the 32-bit prefix tree (the /1 ... /32 networks), the sum over networks "
            "of 2**-(l-1)/2 times the difference of the two shares of a /l network, cut at the "
            "tightest level (an upper bound on W1 in the metric |x - y| / 2**32)"
        )
    else:
        how = f"{w.method} in the metric |x - y| / 2**32 (addresses as 32-bit numbers)"
    print(
        f"method: {how}; on uniform reservoir samples, {half} data vs {half} synthetic rows "
        f"(the floor: two disjoint samples of {half} data rows)"
    )
    top = np.argsort(-rc, kind="stable")[:_TOP_NETWORKS]
    top = top[rc[top] > 0]
    print(f"busiest /16 networks of DATA ({rn:,} rows) and their share in SYNTHETIC ({sn:,} rows):")
    for p in top.tolist():
        print(f"  {_ipv4_text16(p):<18} data {rc[p] / rn:<10.4%} synthetic {sc[p] / sn:.4%}")
    for path, nbad in ((args.data, rstate["bad"]), (args.synthetic, sstate["bad"])):
        if nbad:
            print(
                f"sketchsyn evaluate: skipped {nbad:,} bad line(s) of {path} (--on-bad skip)",
                file=sys.stderr,
            )
    return 0


def _plot_ipv4(args: argparse.Namespace, release: Any, plt: Any) -> int:
    from ..evaluate.ipv4plot import draw_ipv4_map, prefix_counts

    fmt = _data_format(args, args.data, default="accesslog")
    if fmt == "accesslog":
        batches = _log_batches(args.data, args.on_bad, {"bad": 0})
    else:
        column = (_parse_columns(args.columns) or [None])[0]
        batches = _ipv4_file_batches(args.data, fmt, column, args.on_bad, {"bad": 0})
    rc = np.zeros(1 << 16, dtype=np.int64)
    rn = 0
    for keys in batches:
        prefix_counts(keys, rc)
        rn += keys.size
    if rn == 0:
        raise _fail(f"{args.data} has no IPv4 address to draw")
    sn = min(rn, _PLOT_SYNTHETIC_MAX)
    sc = np.zeros(1 << 16, dtype=np.int64)
    for start in range(0, sn, 1 << 18):
        prefix_counts(release.sample(min(1 << 18, sn - start), rng=args.seed + start), sc)
    real, synth = rc / rn, sc / sn
    both = np.concatenate([real, synth])
    vmin, vmax = both[both > 0].min(), both.max()
    top = np.argsort(-rc, kind="stable")[:_TOP_NETWORKS]
    top = top[rc[top] >= 0.005 * rn]  # circle the networks with at least 0.5% of the rows
    fig, axes = plt.subplots(1, 2, figsize=(14, 7.2), layout="constrained")
    draw_ipv4_map(axes[0], real, f"real: {rn:,} requests", vmin, vmax, mark=top)
    art = draw_ipv4_map(axes[1], synth, f"synthetic: {sn:,} rows", vmin, vmax, mark=top)
    fig.colorbar(art, ax=axes, shrink=0.8, label="share of rows per /16 network (log)")
    fig.suptitle(
        f"{release.mechanism}, epsilon={release.epsilon}: client addresses, one pixel per /16 "
        "network along a Hilbert curve\n(each numbered square is a /8; circled: the busiest "
        "/16 networks of the data, at most 5 with 0.5% of the rows or more)",
        fontsize=11,
    )
    fig.savefig(args.output, dpi=args.dpi)
    plt.close(fig)
    _say(args)(f"sketchsyn plot: wrote {args.output}")
    return 0


_PLOT_SYNTHETIC_MAX = 1_000_000  # synthetic rows drawn by plot for an IPv4 release
