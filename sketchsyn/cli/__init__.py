"""The ``sketchsyn`` command: fit, sample, evaluate, plot, info, schema and demo.

``sketchsyn fit`` streams a CSV / JSON-lines / Parquet file, stdin or an access log through
PrivHP (or PMM, or the marginal synthesizer) in bounded memory and writes the release: numeric
columns with ``--columns/--bounds``, or a table of typed columns with ``--schema``; ``sample``
turns a release into a synthetic CSV, JSON-lines or Parquet file; ``evaluate`` measures W1 (or,
for a table, the 1- and 2-way marginal distances) against the data beside the data-vs-data floor;
``plot`` draws real vs synthetic; ``info`` describes a release or a state; ``schema`` prints the
default access-log schema or drafts one from a file (loudly not private). Every command has
``--help`` with an example; a command imports only the modules it uses. Exit status: 0 ok, 2
for a usage error or bad input (a message on stderr naming the argument or the line; no
traceback).

``sketchsyn demo`` streams a realistic data set (simulated city ride pickups, 10**6 rows by
default, or any CSV file with ``--csv``) through PrivHP in fixed memory, releases it once and
prints the privacy budget, the memory, the throughput and the W1 distance between the data and a
synthetic sample. With matplotlib installed it also writes a PNG of real vs synthetic points.

>>> main(["demo", "--n", "20000", "--k", "16", "--width", "128", "--no-plot", "--quiet"])
0
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from ..errors import ReleasedError
from .common import UsageError, _cli_message, _flags
from .parser import _parse

__all__ = ["UsageError", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``sketchsyn`` command; returns the exit status.

    Usage errors and bad input print one message on stderr and return 2 (argparse's own usage
    errors exit with 2 as well). Set ``SKETCHSYN_DEBUG=1`` to get the traceback instead.
    """
    parser, args = _parse(argv)
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
        message = _cli_message(message, _flags(parser, args.command))
        print(f"sketchsyn {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"sketchsyn {args.command}: interrupted", file=sys.stderr)
        return 130
