"""``sketchsyn sample`` (synthetic rows from a release: CSV or JSON lines; a table's release also
Parquet, :mod:`sketchsyn.cli.tablesample`) and ``sketchsyn info`` (what a file written by
``sketchsyn fit`` holds, a table's schema included).

>>> import numpy as np
>>> _ipv4_text(np.array([167772161], dtype=np.uint64))
['10.0.0.1']
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
from typing import Any

import numpy as np

from .common import _check_output, _fail, _is_released, _load, _load_release, _output, _say


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


def _rounding(domain: Any, decimals: int | None) -> tuple[str, Any]:
    """The number format and a function rounding a batch for ``--decimals`` (None: as is).

    Rounded values are kept on the grid of N-decimal numbers inside the release's bounds, so a
    value never rounds out of the public domain (with bounds 0.05:1 and --decimals 1, 0.05
    prints as 0.1, never 0.0).

    >>> from sketchsyn.domains import Box
    >>> fmt, rnd = _rounding(Box([0.05], [1.0]), 1)
    >>> fmt, rnd(np.array([[0.05], [0.4449], [0.96]])).ravel().tolist()
    ('%.1f', [0.1, 0.4, 1.0])
    """
    if decimals is None:
        return "%.17g", None
    if not 0 <= decimals <= 15:
        raise _fail(f"--decimals must be between 0 and 15 (digits after the point); got {decimals}")
    if type(domain).__name__ != "Box":
        raise _fail(
            f"--decimals rounds numeric columns; this release's domain is {domain!r} "
            "(keys print as whole numbers or IPv4 addresses already)"
        )
    scale = 10.0**decimals
    lo = np.ceil(np.asarray(domain.lower, dtype=np.float64) * scale) / scale
    hi = np.floor(np.asarray(domain.upper, dtype=np.float64) * scale) / scale
    if np.any(lo > hi):
        j = int(np.flatnonzero(lo > hi)[0])
        raise _fail(
            f"--decimals {decimals}: no number with {decimals} decimal(s) lies inside the bounds "
            f"[{domain.lower[j]!r}, {domain.upper[j]!r}] of column {j}; ask for more decimals"
        )

    def rnd(points: np.ndarray) -> np.ndarray:
        out = np.round(points, decimals)
        np.clip(out, lo, hi, out=out)
        return out + 0.0  # -0.0 prints as "-0": make it 0.0

    return f"%.{decimals}f", rnd


def _write_rows(
    fh: Any, points: np.ndarray, names: list[str], fmt: str, ipv4: bool, num: str = "%.17g"
) -> None:
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
        np.savetxt(fh, pts, fmt=num, delimiter=",")
    else:
        template = ", ".join(json.dumps(n).replace("%", "%%") + ": " + num for n in names)
        np.savetxt(fh, pts, fmt="{" + template + "}")


def _sample(args: argparse.Namespace) -> int:
    from ..io.readers import format_of
    from ..privacy.rng import as_source

    if args.n < 0:
        raise _fail(f"-n must be >= 0; got {args.n}")
    _check_output(args.output, "-o")
    release = _load_release(args.model)
    domain = release.domain
    names = _frame_names(domain)
    fmt = args.format or (None if args.output == "-" else format_of(args.output)) or "csv"
    if type(domain).__name__ == "Schema":
        if fmt not in ("csv", "jsonl", "parquet"):
            raise _fail(
                f"-o {args.output!r}: sample writes CSV, JSON lines or Parquet "
                "(--format csv|jsonl|parquet)"
            )
        from .tablesample import _write_table_sample

        _write_table_sample(args, release, fmt, as_source(args.seed))
        if args.output != "-":
            _say(args)(
                f"sketchsyn sample: wrote {args.n:,} synthetic rows {names} to {args.output}"
            )
        return 0
    if fmt not in ("csv", "jsonl"):
        raise _fail(
            f"-o {args.output!r}: sample writes CSV or JSON lines (--format csv|jsonl); Parquet "
            "is for a table's release (fitted with --schema)"
        )
    num, rnd = _rounding(domain, args.decimals)
    src = as_source(args.seed)
    ipv4 = _is_ipv4(domain)
    with _output(args.output) as out:
        if fmt == "csv":
            out.write(",".join(_csv_field(n) for n in names) + "\n")
        left = args.n
        while left > 0:
            m = min(left, args.batch_size)
            points = release.sample(m, rng=src)
            _write_rows(out, points if rnd is None else rnd(points), names, fmt, ipv4, num)
            left -= m
    if args.output != "-":
        _say(args)(f"sketchsyn sample: wrote {args.n:,} synthetic rows {names} to {args.output}")
    return 0


def _csv_field(name: str) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow([name])
    return buf.getvalue()


def _info(args: argparse.Namespace) -> int:
    obj = _load(args.model, "MODEL")
    domain = obj.domain
    kind = type(obj).__name__
    if kind in ("PrivateDistribution", "MarginalDistribution"):
        print(f"release of {obj.mechanism} ({args.model})")
        if kind == "PrivateDistribution":
            _budget_lines(obj, obj.params)
            print(f"  leaves: {obj.n_leaves:,}; noisy total: {obj.total:,.1f}")
        else:
            _budget_lines(obj, obj.params, default=str)
            print(f"  tree of column pairs: {obj.tree}; noisy total: {obj.total:,.1f}")
            if obj.noisy_row_count is not None:
                bins = ", ".join(
                    f"{name} {2**c}/{2**f}"
                    for name, (c, f) in zip(domain.names, obj.column_bits, strict=True)
                )
                print(
                    f"  noisy row count: {obj.noisy_row_count:,} (ε "
                    f"{obj.epsilon_parts['count']:.4g}); bins measured for it "
                    f"(pair-table/one-way): {bins}"
                )
        _bytes_line(obj, args.model)
    else:
        params = obj._params()
        params.pop("domain", None)
        released = _is_released(obj)
        print(f"resumable {kind} state ({args.model}); released: {released}")
        _budget_lines(obj, params)
        if kind in ("PMM", "MarginalSynthesizer"):
            print(f"  note: a {kind} state holds EXACT counts (not private) until its release")
        _bytes_line(obj, args.model)
        from .common import _load_run, _run_lines

        for line in _run_lines(_load_run(args.model)):
            print(line)
    if type(domain).__name__ == "Schema":
        from .tables import _policy_lines, _schema_lines, _unit_lines

        for line in _schema_lines(domain):
            print(line)
        if kind not in ("PrivateDistribution", "MarginalDistribution"):
            for line in _diagnostic_lines(obj) + _policy_lines(obj) + _unit_lines(obj):
                print(f"  {line}")
        return 0
    print(f"  domain: {domain!r}")
    print(f"  columns: {list(domain.columns) if domain.columns else 'none'}")
    return 0


def _diagnostic_lines(state: Any) -> list[str]:
    """A state's exact row counts, when it holds them (``fit --state`` keeps them)."""
    seen = getattr(state, "n_seen", 0) or 0
    dropped = getattr(state, "n_dropped", 0) or 0
    if not seen and not dropped:
        return []
    return [
        f"rows counted: {seen:,}; rows dropped by the columns' policies: {dropped:,} (exact "
        "counts for you, not part of the release)"
    ]


def _budget_lines(obj: Any, params: dict[str, Any], default: Any = None) -> None:
    """The epsilon, privacy unit and parameters lines of ``sketchsyn info``."""
    print(f"  epsilon: {obj.epsilon} (pure differential privacy)")
    print(f"  privacy unit: {_unit(params)}")
    print(f"  parameters: {json.dumps(params, sort_keys=True, default=default)}")


def _bytes_line(obj: Any, path: str) -> None:
    print(f"  bytes: {obj.nbytes:,} in memory, {os.path.getsize(path):,} on disk")


def _unit(params: dict[str, Any]) -> str:
    """The neighbouring relation a release or state states in its parameters."""
    replace = params.get("neighbours") == "replace"
    if params.get("unit") is not None:
        text = (
            f"user-level: all rows of one unit, at most {params.get('max_rows')} kept (unit "
            f"{params['unit']!r}); noise sized for {2 * int(params.get('max_rows', 0))} rows"
        )
        return text + (" (a unit's rows replaced by others)" if replace else "")
    if replace:
        return "one row replaced by another (event level)"
    return "one row added or removed (event level: a person with m rows is protected at m·epsilon)"
