"""The argument parser of the ``sketchsyn`` command: one subcommand per job, each with --help
and an example. A subcommand's module is imported only when that subcommand runs (``--help``
imports none of them), so each command pays for what it uses.

>>> _parser().parse_args(["info", "rides.model"]).model
'rides.model'
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from .. import __version__, kernels

_DESCRIPTION = "The ``sketchsyn`` command: fit, sample, evaluate, plot, info, schema and demo."

_FMT = argparse.RawDescriptionHelpFormatter


def _command(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    """The function ``name`` of ``sketchsyn.cli.<module>``, imported when it is called."""

    def run(args: argparse.Namespace) -> int:
        return int(getattr(importlib.import_module(f"sketchsyn.cli.{module}"), name)(args))

    run.__name__ = name
    return run


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose "expected one argument" names the fix for a negative value
    (``--bounds -120:1440`` reads ``-120:1440`` as an option: write ``--bounds=-120:1440``)."""

    argv: Sequence[str] | None = None

    def error(self, message: str) -> NoReturn:
        if "expected one argument" in message:
            message += _attached_hint(message, self.argv if self.argv is not None else sys.argv)
        super().error(message)


def _attached_hint(message: str, argv: Sequence[str]) -> str:
    """The hint for an option whose value starts with ``-`` and was read as an option.

    >>> _attached_hint("argument --bounds: expected one argument", ["fit", "--bounds", "-1:1"])
    '; a value that starts with - must be attached with =: --bounds=-1:1'
    """
    words = message.split()
    flag = words[1].rstrip(":") if len(words) > 1 else ""
    for flag_name in flag.split("/"):
        argv = list(argv)
        if flag_name in argv:
            i = argv.index(flag_name)
            if i + 1 < len(argv) and argv[i + 1].startswith("-") and len(argv[i + 1]) > 1:
                return (
                    "; a value that starts with - must be attached with =: "
                    f"{flag_name}={argv[i + 1]}"
                )
    return ""


def _common_input(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--format",
        choices=("csv", "jsonl", "accesslog", "parquet", "arrow"),
        help="input format (default: from the extension, .gz/.zst stripped, or a file's first "
        "bytes for Parquet and Arrow; CSV for - and others). gzip and zstd are recognised by "
        "their first bytes, on stdin too",
    )
    p.add_argument(
        "--on-bad",
        choices=("raise", "skip"),
        default="raise",
        help="a malformed line: stop with its line number (default) or count and skip it",
    )


def _accesslog_options(p: argparse.ArgumentParser) -> None:
    """The public parts of the default access-log schema (``--schema default``)."""
    p.add_argument(
        "--since",
        help="with --schema default: the start of the time range the log covers (ISO date or "
        "time, public: e.g. the day you rotate the log); lines before are dropped and counted",
    )
    p.add_argument("--until", help="with --schema default: the end of that time range")
    p.add_argument(
        "--paths",
        help="with --schema default: comma-separated public path prefixes to keep apart "
        "(default /,/index.html,/favicon.ico,/robots.txt,/api,/static,/assets,/images,/css,/js,"
        "/login,/admin,/wp-admin,/wp-login.php); other paths become 'other'",
    )
    p.add_argument(
        "--bytes-cap",
        type=int,
        help="with --schema default: the public cap of the bytes column (default 10**9; larger "
        "responses are clipped to it)",
    )


_FIT_DESCRIPTION = """\
Stream DATA (CSV with a header, JSON lines, an access log, Parquet, Arrow IPC, or
- for stdin; gzip and zstd recognised by their first bytes) in bounded memory and
write the differentially private release to MODEL. Rows are read in batches of
--batch-size lines (the memory bound). With pyarrow installed (the cli extra) CSV
is parsed by pyarrow on a reader thread while the summary counts the previous batch.

Tables (--schema FILE, JSON or YAML): the schema names the columns, their kinds
(categorical, integer, numeric, datetime, ipv4, boolean), their public bounds or
category lists and what a value outside does (its policy); the columns are read by
name and typed (other columns are not read). --schema default with --format
accesslog reads an access log as a table (client, time, method, status, bytes, path
prefix; --since/--until give its public time range); `sketchsyn schema --accesslog`
prints that schema to edit. Without a schema, --columns and --bounds give numeric
columns. The bounds and categories are public parameters, never derived from the data.

Resuming: --state FILE saves the noisy state with the input position it has
consumed (rows after the header, bytes, a digest of the bytes before that point),
every --checkpoint-every rows and at the end. FILE is a trusted local checkpoint
(the position is an exact count of your rows): keep it with the data. After a
crash, `fit --resume FILE DATA` continues after exactly those rows when DATA
begins with them (checked by the digest); a state whose input was read to its end
continues with DATA as new rows. On stdin, a crashed run's position cannot be
checked: give --skip-rows N (N is printed by `sketchsyn info FILE`).

Privacy unit (--privacy-unit COLUMN --max-rows L): protect people, not lines.
COLUMN names the unit (a client, a user, a device) in each row; it is read beside
the schema's columns, is not synthesized, and must not be in the schema (with
--schema default on an access log, --privacy-unit client takes client out of it).
A contribution bounder keeps the first L rows of each unit in fixed memory and
every noise scale is multiplied by 2L: the release is epsilon-DP for all rows of
one unit (user level). L is public: too small cuts the heavy units' rows, too
large adds noise (see the privacy page). --expected-units N (public) sizes the
bounder; units are sampled by keyed hash if N do not fit. Needs --schema.

Memory planning (--memory): PrivHP.for_memory when the library has it (and --k,
--sketch-depth are not given); otherwise the plain rule: depth from --expected-n
(ceil(log2(epsilon*n)), as in Holland et al.), k=64 (or --k), sketch_depth=3
(or --sketch-depth) and the largest power-of-two width w with
PrivHP.memory_bytes(k, w, 3, depth) <= the budget. For PMM, --memory caps the
depth: 8*2**depth + 64 bytes. For marginal, --memory (default 1MiB) bounds the
pair and column grids together and --expected-n caps them.
--memory bounds the streaming state; the released model (a tree grown from it)
may be larger: `sketchsyn info MODEL` shows its size."""

_FIT_EXAMPLES = """\
example:
  sketchsyn fit rides.csv.gz --columns lon,lat --bounds=-74.05:-73.75,40.6:40.9 \\
      --epsilon 1 --memory 256KB -o rides.model
  sketchsyn fit flights.csv --schema flights.yaml --epsilon 1 -o flights.model
  sketchsyn fit flights.parquet --schema flights.yaml --synth marginal --epsilon 1 -o f.model
  sketchsyn fit access.log --format accesslog --schema default --since 2024-05-01 \\
      --until 2024-05-02 --on-bad skip --epsilon 1 -o log.model
  sketchsyn fit access.log --schema default --since 2024-05-01 --until 2024-05-02 \\
      --privacy-unit client --max-rows 16 --synth marginal --epsilon 1 -o log.model
  tail -n +1 access.log | sketchsyn fit - --format accesslog --epsilon 1 -o ip.model
  sketchsyn fit day1.csv --columns x,y --bounds 0:1,0:1 --epsilon 1 --state s.bin
  sketchsyn fit --resume s.bin day2.csv -o model.bin"""


_SAMPLE_TEXT = (
    "Draw N synthetic rows from the release MODEL as CSV, JSON lines or Parquet, with\n"
    "the original column names, to stdout or to the file -o (format by its extension\n"
    "or --format; Parquet needs a file). A table's release (fitted with --schema)\n"
    "keeps the schema's types: in Parquet categories as dictionaries, datetimes as\n"
    "timestamps, integers as int64; in CSV and JSON lines ISO datetimes and category\n"
    "text. Rows are drawn and written in chunks of --batch-size (bounded memory).\n"
    "Numbers print with 17 significant digits (exact floats) unless --decimals N\n"
    "rounds them to N digits after the point (kept inside the release's bounds).\n"
    "Sampling is post-processing: it costs no privacy, and --seed only makes the output\n"
    "reproducible (same MODEL, -n, --seed and --batch-size: same rows)."
)

_SAMPLE_EXAMPLES = (
    "example:\n  sketchsyn sample rides.model -n 100000 -o synthetic.csv --seed 7\n"
    "  sketchsyn sample flights.model -n 100000 -o synthetic.parquet\n"
    "  sketchsyn sample flights.model -n 10 --decimals 0 | head"
)

_EVALUATE_TEXT = (
    "Print the 1-Wasserstein distance between DATA and SYNTHETIC (uniform reservoir\n"
    "samples of --max-points rows of each, read in bounded memory) and the floor: W1\n"
    "between two disjoint samples of DATA of the same size. Distances use the l-inf\n"
    "metric after scaling each column of --bounds to [0, 1]. Method: exact optimal\n"
    "transport (POT, extra [eval]) by default, the tree bound without POT, exact in 1-D.\n"
    "--format is the format of DATA; SYNTHETIC's comes from its extension (CSV else).\n\n"
    "Tables (--schema FILE, or --schema MODEL to take it from a release): the mean total\n"
    "variation distance of the 1-way and of the 2-way marginals (numeric and datetime\n"
    "columns in 16 equal bins of their public bounds, categorical ones by category) and\n"
    "W1 per numeric column, each beside the same figure between two disjoint halves of\n"
    "DATA (the floor), and per column.\n\n"
    "An access log (DATA ending in .log, or --format accesslog) needs no --bounds: W1 is\n"
    "taken on the 32-bit prefix tree of the addresses (the tree bound; --method exact:\n"
    "on the line |x - y| / 2**32), SYNTHETIC's addresses are its column ip (or\n"
    "--columns NAME), and the busiest /16 networks of DATA are listed with their share\n"
    "in DATA and in SYNTHETIC. These figures describe the real data: not for publication."
)

_EVALUATE_EXAMPLES = (
    "example:\n  sketchsyn evaluate rides.csv synthetic.csv --columns lon,lat "
    "--bounds=-74.05:-73.75,40.6:40.9\n"
    "  sketchsyn evaluate flights.csv synthetic.parquet --schema flights.yaml\n"
    "  sketchsyn evaluate access.log synthetic_ips.csv"
)

_PLOT_TEXT = (
    "Draw a sample of DATA beside synthetic rows from MODEL (matplotlib, extra [plot]).\n"
    "2 columns: real, synthetic and the released cells coloured by density; 1 column:\n"
    "histograms; more: pairwise marginals (real below the diagonal, synthetic above).\n"
    "A table's release (fitted with --schema): each column's marginal as bars, real\n"
    "beside synthetic (16 equal bins of its public bounds, or its categories), and\n"
    "heatmaps of the three pairs of columns whose 2-way marginals differ most.\n"
    "An IPv4 release (fitted on an access log): the IPv4 space real beside synthetic,\n"
    "one pixel per /16 network along a Hilbert curve (each /8 a numbered square); all\n"
    "of DATA is counted (an access log by default, or a CSV of addresses)."
)

_PLOT_EXAMPLES = (
    "example:\n  sketchsyn plot rides.csv rides.model -o rides.png\n"
    "  sketchsyn plot flights.csv flights.model -o flights.png\n"
    "  sketchsyn plot access.log ip.model -o ip.png"
)

_INFO_TEXT = (
    "Describe a release or a resumable state written by sketchsyn fit: mechanism,\n"
    "epsilon, privacy unit, parameters, size; a table's schema (names, kinds, bounds or\n"
    "category counts, policies); for a state, the values its columns' policies changed\n"
    "or dropped and the input position (exact counts: for you, not for publication)."
)

_INFO_EXAMPLES = "example:\n  sketchsyn info rides.model"

_SCHEMA_TEXT = (
    "--accesslog: print the default schema of an access log as YAML, to edit and pass\n"
    "to fit --schema (--since, --until, --paths, --bytes-cap fill in its public parts).\n\n"
    "FILE (CSV, JSON lines or Parquet): draft a schema from the data, read in bounded\n"
    "memory: each column's kind guessed, its bounds and categories READ FROM THE DATA.\n"
    "Such values are exact facts about your rows (the extremes, the rare categories):\n"
    "they are NOT private, and a release fitted with them leaks them. The draft says so\n"
    "on stderr and at the top of the YAML; replace every bound and category list by\n"
    "public knowledge (a data dictionary, a code list, the valid range of the\n"
    "measurement) before fitting."
)

_SCHEMA_EXAMPLES = (
    "example:\n  sketchsyn schema --accesslog --since 2024-05-01 --until 2024-05-02 "
    "-o log.yaml\n  sketchsyn schema flights.csv -o draft.yaml   # then edit it"
)

_DEMO_EXAMPLES = "example:\n  sketchsyn demo --n 200000 --no-plot"


def _sub(sub: Any, name: str, help: str, **texts: str) -> argparse.ArgumentParser:
    """A subcommand with its one-line help, its description and its examples."""
    return sub.add_parser(name, formatter_class=_FMT, help=help, **texts)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="sketchsyn",
        description=_DESCRIPTION,
        epilog="Run 'sketchsyn COMMAND --help' for each command's options and an example.",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"sketchsyn {__version__} (kernels: {kernels.active()})",
        help="show the version and which kernels run: the compiled extension, or the numpy "
        "path (without the extension, or with SKETCHSYN_KERNELS=numpy)",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    fit = _sub(
        sub,
        "fit",
        "stream DATA through PrivHP (or PMM, or the marginal synthesizer) and write the "
        "private release",
        description=_FIT_DESCRIPTION,
        epilog=_FIT_EXAMPLES,
    )
    fit.add_argument("data", metavar="DATA", help="input file, or - for stdin")
    fit.add_argument("-o", "--output", metavar="MODEL", help="write the release here")
    fit.add_argument(
        "--schema",
        metavar="FILE",
        help="a table's schema (JSON or YAML), or 'default' for an access log (--format "
        "accesslog); replaces --columns and --bounds",
    )
    fit.add_argument("--columns", help="comma-separated numeric columns (header names / keys)")
    fit.add_argument(
        "--bounds",
        help="public LOW:HIGH per column, comma-separated (use --bounds=-1:1,... for negatives)",
    )
    fit.add_argument(
        "--epsilon",
        type=float,
        help="privacy budget (pure DP, one row added or removed; with --privacy-unit, all rows "
        "of one unit)",
    )
    fit.add_argument(
        "--mechanism",
        "--synth",
        dest="mechanism",
        choices=("privhp", "pmm", "marginal"),
        help="default privhp; marginal (MarginalSynthesizer: every 1- and 2-way marginal, "
        "sampled along a tree of pairs) for tables of 3 or more columns",
    )
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
        default=None,
        help="rows outside --bounds: stop naming the line (default), clip or drop them (with "
        "--schema, each column's policy decides)",
    )
    _common_input(fit)
    _accesslog_options(fit)
    fit.add_argument(
        "--delimiter",
        help="CSV field separator, one character (default ',', or tab for .tsv; \\t for tab)",
    )
    fit.add_argument(
        "--batch-size",
        type=int,
        default=262144,
        help="lines per batch: the memory bound (default 262144, a few MB of CSV)",
    )
    fit.add_argument(
        "--skip-rows",
        type=int,
        metavar="N",
        help="pass over the first N input rows (data lines after the header, blank and bad "
        "ones included); with --resume on stdin, the rows the crashed run consumed",
    )
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
    fit.add_argument(
        "--privacy-unit",
        metavar="COLUMN",
        help="protect all rows of one unit (the column naming a client, user or device), at "
        "most --max-rows of them kept: user-level privacy (needs --schema)",
    )
    fit.add_argument(
        "--max-rows",
        type=int,
        metavar="L",
        help="with --privacy-unit: the public cap on the rows kept of each unit",
    )
    fit.add_argument(
        "--expected-units",
        type=int,
        metavar="N",
        help="with --privacy-unit: a public guess of the number of units, to size the bounder "
        "(default: half of --memory, first come; without --memory, --expected-n units)",
    )
    fit.add_argument("--noise-seed", type=int, help="seed the noise: for tests only, NOT private")
    fit.add_argument("-q", "--quiet", action="store_true", help="no progress bar, no summary")
    fit.set_defaults(func=_command("fit", "_fit"))

    sample = _sub(
        sub,
        "sample",
        "draw synthetic rows from a release",
        description=_SAMPLE_TEXT,
        epilog=_SAMPLE_EXAMPLES,
    )
    sample.add_argument("model", metavar="MODEL")
    sample.add_argument("-n", type=int, required=True, help="number of rows")
    sample.add_argument("-o", "--output", default="-", help="output file (default: - for stdout)")
    sample.add_argument("--format", choices=("csv", "jsonl", "parquet"))
    sample.add_argument(
        "--decimals",
        type=int,
        metavar="N",
        help="round values to N digits after the point (e.g. 0 for whole minutes)",
    )
    sample.add_argument("--seed", type=int, help="reproducible sampling (post-processing only)")
    sample.add_argument("--batch-size", type=int, default=65536)
    sample.add_argument("-q", "--quiet", action="store_true")
    sample.set_defaults(func=_command("release", "_sample"))

    ev = _sub(
        sub,
        "evaluate",
        "W1 (or marginal distances, for tables) between DATA and SYNTHETIC",
        description=_EVALUATE_TEXT,
        epilog=_EVALUATE_EXAMPLES,
    )
    ev.add_argument("data", metavar="DATA")
    ev.add_argument("synthetic", metavar="SYNTHETIC")
    ev.add_argument("--schema", metavar="FILE", help="a table's schema, or a release fitted on one")
    ev.add_argument("--columns", help="default: the header of SYNTHETIC")
    ev.add_argument("--bounds", help="public LOW:HIGH per column (as for fit)")
    ev.add_argument("--method", choices=("auto", "ot", "tree", "exact"), default="auto")
    ev.add_argument(
        "--max-points",
        type=int,
        help="rows sampled per file (default 2000; 20000 for an access log or a table)",
    )
    ev.add_argument("--seed", type=int, default=0, help="seed of the evaluation samples")
    ev.add_argument(
        "--epsilon",
        type=float,
        help="a table's budget for the independent-columns baseline (default: the epsilon of "
        "the release given as --schema)",
    )
    _common_input(ev)
    ev.set_defaults(func=_command("compare", "_evaluate"))

    pl = _sub(
        sub,
        "plot",
        "picture of real vs synthetic points and the released cells",
        description=_PLOT_TEXT,
        epilog=_PLOT_EXAMPLES,
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
    pl.set_defaults(func=_command("compare", "_plot_cmd"))

    info = _sub(
        sub,
        "info",
        "mechanism, epsilon and privacy unit, parameters, schema, leaves, bytes of a file",
        description=_INFO_TEXT,
        epilog=_INFO_EXAMPLES,
    )
    info.add_argument("model", metavar="MODEL")
    info.set_defaults(func=_command("release", "_info"))

    sc = _sub(
        sub,
        "schema",
        "print the default access-log schema, or draft one from a file (NOT private)",
        description=_SCHEMA_TEXT,
        epilog=_SCHEMA_EXAMPLES,
    )
    sc.add_argument("data", metavar="FILE", nargs="?", help="a file to draft a schema from")
    sc.add_argument("--accesslog", action="store_true", help="print the access-log schema")
    sc.add_argument("-o", "--output", default="-", help="YAML file (default: - for stdout)")
    sc.add_argument("--format", choices=("csv", "jsonl", "parquet"), help="FILE's format")
    sc.add_argument(
        "--max-categories",
        type=int,
        default=1000,
        help="a text column with more distinct values is not drafted as categorical",
    )
    sc.add_argument("--delimiter", help="CSV field separator (as for fit)")
    _accesslog_options(sc)
    sc.set_defaults(func=_command("schemacmd", "_schema_cmd"))

    demo = _sub(
        sub,
        "demo",
        "stream a data set through PrivHP and print the release",
        epilog=_DEMO_EXAMPLES,
    )
    demo.add_argument("--n", type=int, default=1_000_000, help="rows to stream (default 10**6)")
    demo.add_argument("--epsilon", type=float, default=1.0)
    demo.add_argument("--k", type=int, default=64)
    demo.add_argument("--width", type=int, default=1024)
    demo.add_argument("--sketch-depth", type=int, default=3)
    demo.add_argument(
        "--depth", type=int, default=None, help="default: ceil(log2(epsilon*n)) from --n"
    )
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
    demo.set_defaults(func=_command("demo", "_demo_cmd"))
    return parser


def _parse(argv: Sequence[str] | None) -> tuple[argparse.ArgumentParser, Any]:
    """The parser and the parsed arguments (``argv`` None: ``sys.argv[1:]``)."""
    parser = _parser()
    _Parser.argv = list(sys.argv[1:] if argv is None else argv)
    return parser, parser.parse_args(argv)
