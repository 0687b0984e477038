"""``sketchsyn schema``: print the default access-log schema, or draft a schema from a file with a
loud warning that what it read from the data is not private.

>>> print(_yaml({"columns": [{"name": "ok", "kind": "boolean"}]}, ["a note"]))
# a note
columns:
- {name: ok, kind: boolean}
<BLANKLINE>
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from typing import Any

from .common import _check_output, _fail, _write_atomic

_ACCESSLOG_HEADER = """\
The default schema of an access log, for:
  sketchsyn fit access.log --format accesslog --schema THIS_FILE --epsilon 1 -o log.model
Every value below is public knowledge, none was read from a log: edit them to yours.
time: low and high are the period the log covers (lines outside it are dropped and counted);
  replace them (or pass --since and --until to sketchsyn schema --accesslog).
method: the standard HTTP methods; any other becomes "other".
status: 100-599; a line with another status is dropped and counted.
bytes: response sizes clipped at a public cap (--bytes-cap).
path: public path prefixes of your site (--paths); other paths become "other".
client: the IPv4 address (IPv6 clients are skipped and counted). Drop a column you do not
  need: fewer columns give each one more of the budget."""


def _yaml(data: dict[str, Any], header: list[str]) -> str:
    """The schema as YAML (JSON if PyYAML is missing), under a comment block; a draft's
    ``draft`` marker first, on one line of its own (a person deletes that line)."""
    try:
        import yaml

        rest = {k: v for k, v in data.items() if k != "draft"}
        body = yaml.safe_dump(rest, sort_keys=False, default_flow_style=None, allow_unicode=True)
        if "draft" in data:
            body = f"draft: {json.dumps(data['draft'])}\n" + body
    except ImportError:
        body = json.dumps(data, indent=2) + "\n"
    lines = [f"# {line}" if line else "#" for line in header]
    return "\n".join(lines) + "\n" + body


def _write(args: argparse.Namespace, text: str) -> None:
    if args.output == "-":
        sys.stdout.write(text)
        return
    _write_atomic(args.output, text.encode())


def _schema_cmd(args: argparse.Namespace) -> int:
    _check_output(args.output, "-o")
    if args.accesslog:
        if args.data:
            raise _fail("give FILE (to draft a schema) or --accesslog, not both")
        from .tables import _accesslog_schema

        placeholder = not (args.since and args.until)
        if placeholder:
            if args.since or args.until:
                raise _fail("give both --since and --until (the log's public time range)")
            args.since, args.until = "2024-01-01", "2024-01-02"
        schema = _accesslog_schema(args)
        header = _ACCESSLOG_HEADER.splitlines()
        if placeholder:
            header += ["", "PLACEHOLDER: the time range below is an example; put your log's."]
        _write(args, _yaml(schema.to_dict(), header))
        return 0
    if not args.data:
        raise _fail("give FILE (CSV, JSON lines or Parquet) to draft a schema from, or --accesslog")
    given = [f for f in ("since", "until", "paths", "bytes_cap") if getattr(args, f) is not None]
    if given:
        raise _fail(f"--{given[0].replace('_', '-')} is for --accesslog")
    return _draft(args)


def _draft(args: argparse.Namespace) -> int:
    from ..errors import InputError
    from ..io.arrowread import columnar_format
    from ..io.readers import format_of
    from ..io.schema_draft import WARNING, draft_schema

    fmt = args.format or (None if args.data == "-" else format_of(args.data))
    if fmt is None and args.data != "-":
        fmt = columnar_format(args.data)
    fmt = fmt or "csv"
    if fmt not in ("csv", "jsonl", "parquet"):
        raise _fail(f"{args.data}: a schema is drafted from CSV, JSON lines or Parquet, not {fmt}")
    if args.max_categories < 1:
        raise _fail(f"--max-categories must be >= 1; got {args.max_categories}")
    delimiter = {"\\t": "\t", "tab": "\t"}.get(args.delimiter or ",", args.delimiter or ",")
    loud = f"WARNING: {WARNING}"
    print(f"sketchsyn schema: {loud}", file=sys.stderr)
    try:
        data, notes = draft_schema(
            args.data, fmt, max_categories=args.max_categories, delimiter=delimiter
        )
    except OSError as exc:
        raise _fail(f"cannot read {args.data!r}: {exc.strerror or exc}") from None
    except InputError as exc:
        raise _fail(str(exc)) from None
    header = textwrap.wrap(loud, 96) + [f"(drafted by sketchsyn schema from {args.data})"]
    header += [line for n in notes for line in textwrap.wrap(f"note: {n}", 96)]
    _write(args, _yaml(data, header))
    for note in notes:
        print(f"sketchsyn schema: note: {note}", file=sys.stderr)
    if args.output != "-":
        print(
            f"sketchsyn schema: wrote the DRAFT {args.output}: replace its bounds and categories "
            "by public knowledge, then delete its 'draft' line (fit refuses it until then)",
            file=sys.stderr,
        )
    return 0
