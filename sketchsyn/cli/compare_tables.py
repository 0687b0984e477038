"""``sketchsyn evaluate`` and ``sketchsyn plot`` for tables: per-column and pairwise marginals,
real beside synthetic, on the schema's public bins (:mod:`sketchsyn.evaluate.tables`).

Both read DATA (and SYNTHETIC) with the schema's typed readers into a uniform reservoir sample
of rows (bounded memory); the figures describe the real data and are for its holder.

>>> res = _TableReservoir(2, {"c": "categorical", "x": "numeric"}, seed=0)
>>> res.add({"c": np.array(["a", "b", "c"], dtype=object), "x": np.array([1.0, 2.0, 3.0])})
>>> res.seen, sorted(res.sample()["c"].tolist()) in (["a", "b"], ["a", "c"], ["b", "c"])
(3, True)
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from .common import _fail, _say

_PAIRS_DRAWN = 3  # pairwise heatmaps in a table's plot


def _empty_column(kind: str, size: int) -> np.ndarray:
    if kind in ("numeric", "integer"):
        return np.full(size, np.nan)
    if kind == "datetime":
        return np.full(size, np.datetime64("NaT"), dtype="datetime64[us]")
    if kind == "boolean":
        return np.zeros(size, dtype=bool)
    return np.empty(size, dtype=object)


class _TableReservoir:
    """Uniform reservoir sample of a table's rows, column by column (for evaluation only)."""

    def __init__(self, size: int, kinds: dict[str, str], seed: int) -> None:
        self.size = size
        self.items = {name: _empty_column(kind, size) for name, kind in kinds.items()}
        self.seen = 0
        self.rng = np.random.default_rng(seed)

    def add(self, columns: dict[str, np.ndarray]) -> None:
        """Offer a batch of rows given as ``{name: 1-D array}``."""
        n = len(next(iter(columns.values())))
        fill = max(0, min(self.size - self.seen, n))
        for name, values in columns.items():
            self.items[name][self.seen : self.seen + fill] = values[:fill]
        rest = n - fill
        self.seen += fill
        if rest:
            # Algorithm R, vectorised: the t-th row (1-based) takes slot u < size w.p. size/t.
            t = self.seen + np.arange(1, rest + 1)
            slots = (self.rng.random(rest) * t).astype(np.int64)
            keep = np.flatnonzero(slots < self.size)
            for name, values in columns.items():
                self.items[name][slots[keep]] = values[fill + keep]
            self.seen += rest

    def sample(self) -> dict[str, np.ndarray]:
        m = min(self.seen, self.size)
        return {name: values[:m] for name, values in self.items.items()}


def _numpy_columns(table: Any, schema: Any) -> dict[str, np.ndarray]:
    """An Arrow table's columns as numpy arrays the metrics read (text as objects)."""
    import pyarrow as pa

    out = {}
    for name in schema.names:
        col = table.column(name).combine_chunks()
        if pa.types.is_dictionary(col.type):
            col = col.cast(pa.string())
        kind = schema.column(name).kind
        if kind in ("numeric", "integer"):
            out[name] = col.cast(pa.float64()).fill_null(float("nan")).to_numpy()
        elif kind == "datetime":
            out[name] = np.asarray(col.cast(pa.int64()).fill_null(-(2**62)).to_numpy()).view(
                "datetime64[us]"
            )
        elif kind == "boolean":
            out[name] = np.asarray(col.fill_null(False).to_numpy(zero_copy_only=False), bool)
        elif kind == "ipv4" and pa.types.is_integer(col.type):
            out[name] = col.cast(pa.float64()).fill_null(float("nan")).to_numpy()
        else:
            out[name] = np.asarray(col.to_numpy(zero_copy_only=False), dtype=object)
    return out


def _table_sample(path: str, schema: Any, args: argparse.Namespace, seed: int, fmt: Any) -> Any:
    """A uniform reservoir sample of ``--max-points`` rows of a file, read with the schema and
    its policies applied as the fit applied them (rows a ``drop`` policy drops left out)."""
    from ..errors import InputError
    from ..evaluate.tables import apply_policies
    from ..io.tables_reader import open_table_reader
    from .tables import _named_row

    reader = open_table_reader(path, schema, fmt=fmt, on_bad=args.on_bad)
    kinds = {n: schema.column(n).kind for n in schema.names}
    res = _TableReservoir(args.max_points, kinds, seed)
    for table in reader:
        try:
            columns = apply_policies(table, schema)
        except InputError as exc:
            raise _fail(str(_named_row(exc, reader))) from None
        if len(next(iter(columns.values()))):
            res.add(columns)
    if res.seen < 2:
        raise _fail(f"{reader.name} has {res.seen} row(s) of the schema's columns; 2 are needed")
    return res.sample(), reader


def _schema_of(path: str) -> Any:
    """The schema of ``--schema``: a schema file, or a release or state fitted on one."""
    return _schema_and_epsilon(path)[0]


def _schema_and_epsilon(path: str) -> tuple[Any, float | None]:
    """The schema of ``--schema`` and the budget of the release or state it is (``None`` for a
    schema file)."""
    from ..domains import Schema
    from ..errors import ParameterError
    from .common import _load, _looks_like_ours

    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
    except OSError as exc:
        raise _fail(f"cannot read --schema {path!r}: {exc.strerror or exc}") from None
    if _looks_like_ours(head):
        obj = _load(path, "--schema")
        domain = obj.domain
        if type(domain).__name__ != "Schema":
            raise _fail(f"--schema {path!r} is a release of numeric columns, not of a table")
        return domain, getattr(obj, "epsilon", None)
    try:
        return Schema.load(path), None
    except ParameterError as exc:
        from .tables import _schema_error

        raise _fail(_schema_error(path, exc)) from None


def _split_rows(rows: dict[str, np.ndarray], half: int, seed: int) -> tuple[dict, dict]:
    n = len(next(iter(rows.values())))
    perm = np.random.default_rng(seed).permutation(n)
    a, b = perm[:half], perm[half : 2 * half]
    return {k: v[a] for k, v in rows.items()}, {k: v[b] for k, v in rows.items()}


def _evaluate_table(args: argparse.Namespace) -> int:
    from ..evaluate.tables import codes, independent_sample, mean_scores, table_scores
    from ..io.readers import format_of

    schema, fitted_epsilon = _schema_and_epsilon(args.schema)
    epsilon = getattr(args, "epsilon", None) or fitted_epsilon
    if epsilon is not None and not (epsilon > 0 and np.isfinite(epsilon)):
        raise _fail(f"--epsilon must be a positive number; got {epsilon}")
    if args.columns or args.bounds:
        raise _fail("--schema names the columns and their bounds; drop --columns and --bounds")
    if args.max_points is None:
        args.max_points = 20_000
    if args.max_points < 4:
        raise _fail(f"--max-points must be >= 4; got {args.max_points}")
    real, _ = _table_sample(args.data, schema, args, args.seed, args.format)
    synth_fmt = None if args.synthetic == "-" else format_of(args.synthetic)
    synth, _ = _table_sample(args.synthetic, schema, args, args.seed + 1, synth_fmt)
    n_real = len(next(iter(real.values())))
    n_synth = len(next(iter(synth.values())))
    half = min(n_real // 2, n_synth)
    a, b = _split_rows(real, half, args.seed)
    s = {k: v[:half] for k, v in synth.items()}
    try:
        ca = codes(a, schema)
        got, floor = table_scores(a, s, schema, ca), table_scores(a, b, schema, ca)
        indep = None
        if epsilon is not None:
            fake = independent_sample(b, schema, epsilon, half, rng=args.seed + 2)
            indep = table_scores(a, fake, schema, ca)
    except ValueError as exc:
        raise _fail(f"{exc} (evaluate on the schema of the fit)") from None
    mg, mf = mean_scores(got), mean_scores(floor)
    mi = None if indep is None else mean_scores(indep)
    d = schema.d
    base = (
        ", independent columns at ε={:g} {:.4f}"
        if mi is not None
        else ", independent columns: give --epsilon"
    )
    print(
        f"mean TVD of the 1-way marginals ({d} columns): data vs synthetic {mg['tvd1']:.4f}"
        + (base.format(epsilon, mi["tvd1"]) if mi is not None else "")
        + f", data vs data floor {mf['tvd1']:.4f}"
    )
    if d > 1:
        print(
            f"mean TVD of the 2-way marginals ({d * (d - 1) // 2} pairs): data vs synthetic "
            f"{mg['tvd2']:.4f}"
            + (base.format(epsilon, mi["tvd2"]) if mi is not None else base)
            + f", data vs data floor {mf['tvd2']:.4f}"
        )
        if mi is not None:
            kept = mg["tvd2"] < mi["tvd2"]
            print(
                "correlations: "
                + (
                    f"kept (2-way TVD {mg['tvd2'] / mi['tvd2']:.2f}× the independent columns')"
                    if kept
                    else f"NOT kept: the synthetic pairs are no closer than independent columns "
                    f"drawn at ε={epsilon:g} ({mg['tvd2']:.4f} against {mi['tvd2']:.4f})"
                )
            )
    for name, value in got["w1"].items():
        print(f"W1 of {name} (its units): {value:.6g} (floor {floor['w1'][name]:.6g})")
    print(
        "TVD of each column: "
        + ", ".join(
            f"{n} {got['tvd1'][n]:.4f} (floor {floor['tvd1'][n]:.4f})" for n in schema.names
        )
    )
    if d > 1:
        worst = sorted(got["tvd2"].items(), key=lambda kv: -kv[1])[:_PAIRS_DRAWN]
        print(
            "pairs that differ most: "
            + ", ".join(
                f"{a_}×{b_} {v:.4f} (floor {floor['tvd2'][(a_, b_)]:.4f})" for (a_, b_), v in worst
            )
        )
    print(
        f"method: uniform reservoir samples, {half} data vs {half} synthetic rows (the floor: two "
        "disjoint samples of data rows; the independent columns: each column drawn on its own "
        "from a DP histogram of its bins, ε/d per column, fitted on the second sample); bins: "
        "numeric and datetime columns 16 equal bins of their public bounds (on the log scale "
        "for a column with scale: log; integers of at most 16 values one bin each), "
        "categorical ones by category, IPv4 by /4 network; TVD = half the L1 distance of the "
        "histograms"
    )
    return 0


def _bin_labels(col: dict[str, Any], size: int) -> list[str]:
    if col["kind"] == "categorical":
        labels = [str(c) for c in col["categories"]]
        return labels + [col.get("other_label", "other")] if size > len(labels) else labels
    if col["kind"] == "boolean":
        return ["false", "true"]
    if col["kind"] == "integer" and size == int(col["high"]) - int(col["low"]) + 1:
        return [str(int(col["low"]) + i) for i in range(size)]
    return [str(i + 1) for i in range(size)]


def _plot_table(args: argparse.Namespace, release: Any, plt: Any) -> int:
    from ..evaluate.tables import codes, marginal_tvd

    schema = release.domain
    real, _ = _table_sample(args.data, schema, args, args.seed, args.format)
    n = len(next(iter(real.values())))
    from .tablesample import _frame

    synth = _numpy_columns(_frame(release, n, args.seed), schema)
    rc, sizes = codes(real, schema)
    sc, _ = codes(synth, schema)
    entries = schema.to_dict()["columns"]
    d = schema.d
    pairs = sorted(marginal_tvd(rc, sc, sizes, 2).items(), key=lambda kv: -kv[1])[:_PAIRS_DRAWN]
    per_row = 3
    rows = -(-d // per_row) + len(pairs)
    fig, axes = plt.subplots(rows, per_row, figsize=(5 * per_row, 3.4 * rows), squeeze=False)
    for ax in axes.ravel():
        ax.set_visible(False)
    for j, col in enumerate(entries):
        ax = axes[j // per_row, j % per_row]
        ax.set_visible(True)
        k = sizes[col["name"]]
        p = np.bincount(rc[col["name"]], minlength=k) / n
        q = np.bincount(sc[col["name"]], minlength=k) / n
        x = np.arange(k)
        ax.bar(x - 0.2, p, width=0.4, label="real (sample)")
        ax.bar(x + 0.2, q, width=0.4, label="synthetic")
        labels = _bin_labels(col, k)
        ax.set_xticks(x, labels, rotation=60 if max(map(len, labels)) > 3 else 0, fontsize=7)
        what = "bins of its bounds" if col["kind"] in ("numeric", "datetime", "ipv4") else ""
        ax.set_title(f"{col['name']} ({col['kind']}{', ' + what if what else ''})", fontsize=9)
        if j == 0:
            ax.legend(fontsize="small")
    start = -(-d // per_row)
    for i, ((a, b), tvd) in enumerate(pairs):
        grids = []
        for codes_of in (rc, sc):
            grid = np.zeros((sizes[a], sizes[b]))
            np.add.at(grid, (codes_of[a], codes_of[b]), 1.0 / n)
            grids.append(grid)
        top = max(g.max() for g in grids)
        for k, (grid, title) in enumerate(zip(grids, ("real", "synthetic"), strict=True)):
            ax = axes[start + i, k]
            ax.set_visible(True)
            art = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis", vmin=0, vmax=top)
            by_name = {e["name"]: e for e in entries}
            ax.set_xticks(range(sizes[b]), _bin_labels(by_name[b], sizes[b]), fontsize=6)
            ax.set_yticks(range(sizes[a]), _bin_labels(by_name[a], sizes[a]), fontsize=6)
            if k == 1:
                fig.colorbar(art, ax=ax, label="share of rows")
            ax.set_xlabel(b, fontsize=8)
            ax.set_ylabel(a, fontsize=8)
            ax.set_title(f"{title}: {a} × {b} (TVD {tvd:.3f})", fontsize=9)
    fig.suptitle(
        f"{release.mechanism}, epsilon={release.epsilon}: each column's marginal, real vs "
        f"synthetic ({n:,} rows each), and the {len(pairs)} pairs that differ most"
    )
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(args.output, dpi=args.dpi)
    plt.close(fig)
    _say(args)(f"sketchsyn plot: wrote {args.output}")
    return 0
