"""The command line's table pieces: the schema of ``--schema`` (a file, or ``default`` for an
access log), a refused row named by its line, the policies' counts, and a schema as text.

>>> from sketchsyn.domains import Schema
>>> s = Schema.from_dict({"columns": [
...     {"name": "carrier", "kind": "categorical", "categories": ["AA", "UA"], "policy": "other"},
...     {"name": "delay", "kind": "numeric", "low": -60, "high": 600, "policy": "clip"}]})
>>> print("\\n".join(_schema_lines(s)))
  schema: 2 columns
    carrier    categorical  2 categories (+ 'other')  policy other
    delay      numeric      [-60, 600]                policy clip
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from ..errors import InputError, ParameterError
from .common import _fail

_ROW = re.compile(r"row (\d+): (.*)", re.DOTALL)
_ACCESSLOG_FLAGS = ("since", "until", "paths", "bytes_cap")


def _is_schema(domain: Any) -> bool:
    return type(domain).__name__ == "Schema"


def _accesslog_schema(args: argparse.Namespace) -> Any:
    """The default access-log schema from ``--since``, ``--until``, ``--paths``, ``--bytes-cap``."""
    from ..io.accesslog_table import DEFAULT_BYTES_CAP, accesslog_schema

    if not args.since or not args.until:
        raise _fail(
            "--schema default needs --since and --until: the public time range the log covers "
            "(e.g. --since 2024-05-01 --until 2024-05-02, the day it was rotated); lines "
            "outside it are dropped and counted"
        )
    paths = [p.strip() for p in args.paths.split(",")] if args.paths else None
    cap = DEFAULT_BYTES_CAP if args.bytes_cap is None else args.bytes_cap
    try:
        return accesslog_schema(args.since, args.until, paths, cap)
    except ParameterError as exc:
        raise _fail(f"--schema default: {exc}") from None


def _load_schema(args: argparse.Namespace, fmt: str | None) -> Any:
    """The schema of ``--schema``: a JSON or YAML file, or ``default`` (access logs)."""
    from ..domains import Schema

    given = [f"--{f.replace('_', '-')}" for f in _ACCESSLOG_FLAGS if getattr(args, f, None)]
    if args.schema == "default":
        if fmt != "accesslog":
            raise _fail(
                "--schema default is the access-log schema: give an access log (.log, or "
                "--format accesslog), or a schema file (JSON or YAML)"
            )
        return _accesslog_schema(args)
    if given:
        raise _fail(f"{', '.join(given)} build the default access-log schema: add --schema default")
    try:
        return Schema.load(args.schema)
    except OSError as exc:
        raise _fail(f"cannot read --schema {args.schema!r}: {exc.strerror or exc}") from None
    except ParameterError as exc:
        raise _fail(_schema_error(args.schema, exc)) from None


def _schema_error(path: str, exc: Exception) -> str:
    """``--schema PATH: why``, naming the path once (the loader's message may start with it).

    >>> _schema_error("s.yaml", ValueError("'s.yaml': bad"))
    "--schema 's.yaml': bad"
    """
    text = str(exc)
    return f"--schema {text}" if text.startswith(f"{path!r}:") else f"--schema {path!r}: {text}"


def _refuse_numeric_flags(args: argparse.Namespace) -> None:
    """``--columns``, ``--bounds`` and ``--out-of-bounds`` are for numeric files only."""
    given = [
        flag
        for flag, value in (
            ("--columns", args.columns),
            ("--bounds", args.bounds),
            ("--out-of-bounds", getattr(args, "out_of_bounds", None)),
        )
        if value is not None
    ]
    if given:
        raise _fail(
            f"--schema names the columns, their bounds and what a value outside does (each "
            f"column's policy); drop {', '.join(given)}"
        )


def _named_row(exc: InputError, reader: Any) -> InputError:
    """A schema's refusal of ``row i`` of a batch, named by its line (or row) in the input.

    >>> import numpy as np, types
    >>> r = types.SimpleNamespace(name="f.csv", lines=np.array([2, 5, 9]))
    >>> str(_named_row(InputError("row 1: column 'x' = 7 is outside [0, 1]"), r))
    "f.csv line 5: column 'x' = 7 is outside [0, 1]"
    """
    m = _ROW.match(str(exc))
    lines = getattr(reader, "lines", None)
    if m is None or lines is None or int(m.group(1)) >= len(lines):
        return exc
    unit = "row" if hasattr(reader, "fingerprint") else "line"
    return InputError(f"{reader.name} {unit} {int(lines[int(m.group(1))])}: {m.group(2)}")


def _policy_lines(summary: Any) -> list[str]:
    """What the columns' policies did (exact counts, for the data holder)."""
    adjusted = getattr(summary, "adjusted", None) or {}
    if not adjusted:
        return []
    shown = ", ".join(f"{k} {v:,}" for k, v in sorted(adjusted.items()))
    return [
        f"column policies: {shown} (exact counts for you, the data holder; not part of the release)"
    ]


def _unit_lines(summary: Any) -> list[str]:
    """The privacy unit and what its bounder kept and dropped (exact counts, for the data
    holder)."""
    unit = getattr(summary, "unit", None)
    if unit is None:
        return []
    lines = [f"privacy: {summary.privacy_unit}"]
    bounder = getattr(summary, "bounder", None)
    if bounder is not None:
        d = bounder.diagnostics
        lines.append(
            f"privacy unit {unit!r}: {d['units_admitted']:,} units admitted ({d['units_capped']:,} "
            f"cut at {summary.max_rows} rows); rows kept {d['rows_kept']:,}, dropped past the "
            f"cap {d['rows_capped']:,}, of units without a slot {d['rows_refused']:,}, of "
            f"units sampled out {d['rows_sampled_out']:,} (exact counts for you, the data "
            "holder; not part of the release)"
        )
    return lines


def _bounds_text(col: Any) -> str:
    kind = col.kind
    if kind == "categorical":
        other = f" (+ {col.labels[-1]!r})" if col.policy == "other" else ""
        return f"{len(col.categories)} categories{other}"
    if kind in ("numeric", "integer"):
        low, high = col.to_dict()["low"], col.to_dict()["high"]
        return f"[{low}, {high}]"
    if kind == "datetime":
        return f"[{col.to_dict()['low']}, {col.to_dict()['high']}]"
    return "all addresses" if kind == "ipv4" else "true, false"


def _schema_lines(schema: Any) -> list[str]:
    """``sketchsyn info``'s lines for a schema: name, kind, bounds or categories, policy."""
    width = max(len(n) for n in schema.names)
    lines = [f"  schema: {schema.d} columns"]
    for name in schema.names:
        col = schema.column(name)
        lines.append(
            f"    {name:<{max(width, 10)}} {col.kind:<12} {_bounds_text(col):<25} "
            f"policy {col.policy}"
        )
    return lines
