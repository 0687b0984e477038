"""``sketchsyn evaluate`` (W1 between DATA and SYNTHETIC beside the data-vs-data floor) and
``sketchsyn plot`` (real vs synthetic points and the released cells).

>>> _ot_or_tree() in ("ot", "tree")
True
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from ..domains import Box
from .common import _fail, _load_release, _parse_bounds, _parse_columns, _Reservoir, _say
from .release import _is_ipv4


def _reservoir_of(path: str, columns: list[str], args: argparse.Namespace, seed: int) -> Any:
    from ..io.readers import format_of, open_reader

    fmt = args.format or (None if path == "-" else format_of(path)) or "csv"
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
