"""The argument parser of the ``sketchsyn`` command: one subcommand per job, each with --help
and an example.

>>> _parser().parse_args(["info", "rides.model"]).model
'rides.model'
"""

from __future__ import annotations

import argparse

from .. import __version__
from .compare import _evaluate, _plot_cmd
from .demo import _demo_cmd
from .fit import _fit
from .release import _info, _sample

_DESCRIPTION = "The ``sketchsyn`` command: fit, sample, evaluate, plot, info and demo."

_FMT = argparse.RawDescriptionHelpFormatter


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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sketchsyn",
        description=_DESCRIPTION,
        epilog="Run 'sketchsyn COMMAND --help' for each command's options and an example.",
    )
    parser.add_argument("--version", action="version", version=f"sketchsyn {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    fit = sub.add_parser(
        "fit",
        formatter_class=_FMT,
        help="stream DATA through PrivHP (or PMM) and write the private release",
        description=(
            "Stream DATA (CSV with a header, JSON lines, an access log, Parquet, Arrow IPC, or\n"
            "- for stdin; gzip and zstd recognised by their first bytes) in bounded memory and\n"
            "write the differentially private release to MODEL. The bounds are public\n"
            "parameters and are never derived from the data. Rows are read in batches of\n"
            "--batch-size lines (the memory bound). With pyarrow installed (the cli extra) CSV\n"
            "is parsed by pyarrow on a reader thread while PrivHP counts the previous batch.\n\n"
            "Resuming: --state FILE saves the noisy state with the input position it has\n"
            "consumed (rows after the header, bytes, a digest of the bytes before that point),\n"
            "every --checkpoint-every rows and at the end. FILE is a trusted local checkpoint\n"
            "(the position is an exact count of your rows): keep it with the data. After a\n"
            "crash, `fit --resume FILE DATA` continues after exactly those rows when DATA\n"
            "begins with them (checked by the digest); a state whose input was read to its end\n"
            "continues with DATA as new rows. On stdin, a crashed run's position cannot be\n"
            "checked: give --skip-rows N (N is printed by `sketchsyn info FILE`).\n\n"
            "Memory planning (--memory): PrivHP.for_memory when the library has it (and --k,\n"
            "--sketch-depth are not given); otherwise the plain rule: depth from --expected-n\n"
            "(ceil(log2(epsilon*n)), as in Holland et al.), k=64 (or --k), sketch_depth=3\n"
            "(or --sketch-depth) and the largest power-of-two width w with\n"
            "PrivHP.memory_bytes(k, w, 3, depth) <= the budget. For PMM, --memory caps the\n"
            "depth: 8*2**depth + 64 bytes. For marginal, --memory (default 1MiB) bounds the\n"
            "pair and column grids together and --expected-n caps them.\n"
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
            "  sketchsyn fit --resume s.bin day2.csv -o model.bin\n"
            "  sketchsyn fit trips.parquet --columns lon,lat --bounds=-74.05:-73.75,40.6:40.9 \\\n"
            "      --epsilon 1 -o trips.model"
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
    fit.add_argument(
        "--mechanism",
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
        default="raise",
        help="rows outside --bounds: stop naming the line (default), clip or drop them",
    )
    _common_input(fit)
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
    fit.add_argument("--noise-seed", type=int, help="seed the noise: for tests only, NOT private")
    fit.add_argument("-q", "--quiet", action="store_true", help="no progress bar, no summary")
    fit.set_defaults(func=_fit)

    sample = sub.add_parser(
        "sample",
        formatter_class=_FMT,
        help="draw synthetic rows from a release",
        description=(
            "Draw N synthetic rows from the release MODEL as CSV or JSON lines, with the\n"
            "original column names, to stdout or to the file -o (format by its extension or\n"
            "--format). Values print with 17 significant digits (exact floats) unless\n"
            "--decimals N rounds them to N digits after the point (kept inside the release's\n"
            "bounds). Sampling is post-processing: it costs no privacy, and --seed only makes\n"
            "the output reproducible (same MODEL, -n, --seed and --batch-size: same rows)."
        ),
        epilog=(
            "example:\n  sketchsyn sample rides.model -n 100000 -o synthetic.csv --seed 7\n"
            "  sketchsyn sample flights.model -n 10 --decimals 0 | head"
        ),
    )
    sample.add_argument("model", metavar="MODEL")
    sample.add_argument("-n", type=int, required=True, help="number of rows")
    sample.add_argument("-o", "--output", default="-", help="output file (default: - for stdout)")
    sample.add_argument("--format", choices=("csv", "jsonl"))
    sample.add_argument(
        "--decimals",
        type=int,
        metavar="N",
        help="round values to N digits after the point (e.g. 0 for whole minutes)",
    )
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
            "transport (POT, extra [eval]) by default, the tree bound without POT, exact in 1-D.\n"
            "--format is the format of DATA; SYNTHETIC's comes from its extension (CSV else).\n\n"
            "An access log (DATA ending in .log, or --format accesslog) needs no --bounds: W1 is\n"
            "taken on the 32-bit prefix tree of the addresses (the tree bound; --method exact:\n"
            "on the line |x - y| / 2**32), SYNTHETIC's addresses are its column ip (or\n"
            "--columns NAME), and the busiest /16 networks of DATA are listed with their share\n"
            "in DATA and in SYNTHETIC. These figures describe the real data: not for publication."
        ),
        epilog=(
            "example:\n  sketchsyn evaluate rides.csv synthetic.csv --columns lon,lat "
            "--bounds=-74.05:-73.75,40.6:40.9\n"
            "  sketchsyn evaluate access.log synthetic_ips.csv"
        ),
    )
    ev.add_argument("data", metavar="DATA")
    ev.add_argument("synthetic", metavar="SYNTHETIC")
    ev.add_argument("--columns", help="default: the header of SYNTHETIC")
    ev.add_argument("--bounds", help="public LOW:HIGH per column (as for fit)")
    ev.add_argument("--method", choices=("auto", "ot", "tree", "exact"), default="auto")
    ev.add_argument(
        "--max-points",
        type=int,
        help="rows sampled per file (default 2000; 20000 for an access log: its tree W1 is cheap)",
    )
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
            "histograms; more: pairwise marginals (real below the diagonal, synthetic above).\n"
            "An IPv4 release (fitted on an access log): the IPv4 space real beside synthetic,\n"
            "one pixel per /16 network along a Hilbert curve (each /8 a numbered square); all\n"
            "of DATA is counted (an access log by default, or a CSV of addresses)."
        ),
        epilog=(
            "example:\n  sketchsyn plot rides.csv rides.model -o rides.png\n"
            "  sketchsyn plot access.log ip.model -o ip.png"
        ),
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
    demo.set_defaults(func=_demo_cmd)
    return parser
