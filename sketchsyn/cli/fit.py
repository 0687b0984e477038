"""``sketchsyn fit``: stream a file through PrivHP (or PMM, or the marginal synthesizer) in
bounded memory, write the release and/or a resumable state. Numeric columns come from
``--columns/--bounds``; a table's typed columns from ``--schema`` (:mod:`sketchsyn.cli.tables`).

>>> import argparse
>>> args = argparse.Namespace(bounds="0:1,0:2", columns="x,y", out_of_bounds="clip", schema=None)
>>> _build_domain(args, "csv")[0]
Box(lower=[0.0, 0.0], upper=[1.0, 2.0], out_of_bounds='clip', columns=['x', 'y'])
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import os
import time
import warnings
from typing import Any

import numpy as np

from ..domains import Box
from ..errors import UtilityWarning
from ..synth.privhp.summary import PrivHP
from .common import (
    _check_output,
    _fail,
    _is_released,
    _load,
    _load_run,
    _parse_bounds,
    _parse_bytes,
    _parse_columns,
    _say,
    _write_atomic,
)


def _build_domain(args: argparse.Namespace, fmt: str) -> tuple[Any, list[str]]:
    from ..domains import BitDomain

    unit = getattr(args, "privacy_unit", None)
    if getattr(args, "max_rows", None) is not None and not unit:
        raise _fail("--max-rows is the cap of --privacy-unit: give --privacy-unit COLUMN too")
    if args.schema:
        from .tables import _load_schema, _refuse_numeric_flags

        _refuse_numeric_flags(args)
        schema = _load_schema(args, fmt)
        if unit:
            schema = _unit_schema(args, schema, unit)
        return schema, list(schema.names)
    if unit:
        raise _fail(
            "--privacy-unit needs --schema: the unit is a column read beside a table's columns "
            "(--schema FILE, or --schema default for an access log), never synthesized"
        )
    given = [f"--{f}" for f in ("since", "until", "paths") if getattr(args, f, None)]
    if given or getattr(args, "bytes_cap", None) is not None:
        raise _fail(
            f"{', '.join(given or ['--bytes-cap'])} build the default access-log schema: add "
            "--schema default (with --format accesslog)"
        )
    if fmt == "accesslog":
        if args.bounds:
            raise _fail("--bounds is not used with --format accesslog (the IPv4 space is public)")
        return BitDomain.ipv4(out_of_bounds="raise", columns=["ip"]), ["ip"]
    columns = _parse_columns(args.columns)
    if columns is None:
        raise _fail("--columns is required: the comma-separated numeric columns to read")
    lower, upper = _parse_bounds(args.bounds, columns)
    policy = args.out_of_bounds or "raise"
    return Box(lower, upper, out_of_bounds=policy, columns=columns), columns


def _unit_schema(args: argparse.Namespace, schema: Any, unit: str) -> Any:
    """The schema without the privacy unit's column: the default access-log schema gives it
    up (with a note); a schema file that holds it is refused."""
    if args.max_rows is None:
        raise _fail(
            f"--privacy-unit {unit} needs --max-rows L: the public cap on the rows kept of "
            "each unit (the noise grows with 2L; too small a cap cuts the heaviest units)"
        )
    if unit not in schema.names:
        return schema
    if args.schema != "default":
        raise _fail(
            f"--privacy-unit {unit}: the schema has a column {unit!r}; a privacy unit is not "
            "synthesized, so take it out of the schema"
        )
    if schema.d < 3:
        raise _fail(f"--privacy-unit {unit} leaves fewer than 2 columns in the schema")
    from ..domains import Schema

    spec = schema.to_dict()
    spec["columns"] = [c for c in spec["columns"] if c["name"] != unit]
    _note(args, f"--privacy-unit {unit}: {unit!r} is the unit, not a column of the release")
    return Schema.from_dict(spec)


def _unit_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The constructor's privacy-unit arguments (none without --privacy-unit)."""
    if not getattr(args, "privacy_unit", None):
        if getattr(args, "expected_units", None) is not None:
            raise _fail("--expected-units sizes the bounder of --privacy-unit: give it too")
        return {}
    return {
        "unit": args.privacy_unit,
        "max_rows": args.max_rows,
        "expected_units": args.expected_units,
    }


def _privhp_plan(args: argparse.Namespace, domain: Any) -> tuple[PrivHP, str]:
    """A PrivHP for the arguments, and one line saying how its parameters were chosen."""
    from ..privacy import accounting

    n = args.expected_n
    unit = _unit_kwargs(args)
    if args.memory is None:
        k = 64 if args.k is None else args.k
        width = 1024 if args.width is None else args.width
        if unit and unit["expected_units"] is None:
            unit["expected_units"] = n  # a public worst case: a unit a row
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
            **unit,
        )
        return php, "parameters as given (defaults k=64, width=1024, sketch_depth=3)"
    if args.width is not None or args.depth is not None:
        raise _fail("--memory chooses --width and --depth: give --memory or --width/--depth")
    budget = _memory_budget(args)
    planner = getattr(PrivHP, "for_memory", None)
    if unit and (args.k is not None or args.sketch_depth is not None):
        raise _fail("--privacy-unit with --memory plans --k and --sketch-depth: drop them")
    if planner is not None and args.k is None and args.sketch_depth is None:
        kwargs: dict[str, Any] = {"sketch": args.sketch, **unit}
        params = inspect.signature(planner).parameters
        if "rng" in params or any(p.kind is p.VAR_KEYWORD for p in params.values()):
            kwargs["rng"] = args.noise_seed
        plan = getattr(PrivHP, "plan", None)
        said = False
        if plan is not None:
            for warning in [] if unit else plan(domain, args.epsilon, budget, n).warnings:
                said |= "more than helps" in warning
                _note(args, warning.replace("memory_bytes = ", f"--memory {args.memory} = "))
        with warnings.catch_warnings():  # the plan's warnings were said above, as notes
            warnings.simplefilter("ignore", UtilityWarning)
            php = planner(domain, args.epsilon, budget, n, **kwargs)
        if plan is not None and not unit:
            _coarse_note(args, plan, domain, budget, n)
        if not said and php.nbytes < budget // 2:
            _note(
                args,
                f"--memory {args.memory}: the state takes {php.nbytes:,} of the {budget:,} "
                f"bytes; more would not help at expected_n={n:,}, epsilon={args.epsilon:g} "
                "(the depth follows epsilon*n; give --expected-n if you expect more rows)",
            )
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


def _coarse_note(args: argparse.Namespace, plan: Any, domain: Any, budget: int, n: int) -> None:
    """A warning when ``--memory`` holds a shallower tree than epsilon*n supports, with the
    depth it holds and the budget that would hold the planner's target depth."""
    p = plan(domain, args.epsilon, budget, n)
    if p.depth >= p.target_depth:
        return
    lo, hi = budget, 1 << 40
    if plan(domain, args.epsilon, hi, n).depth < p.target_depth:
        return
    while hi - lo > max(lo // 100, 1):  # the smallest budget reaching the target, within 1%
        mid = (lo + hi) // 2
        lo, hi = (
            (mid, hi) if plan(domain, args.epsilon, mid, n).depth < p.target_depth else (lo, mid)
        )
    _note(
        args,
        f"warning: --memory {args.memory} ({budget:,} bytes) holds a tree of depth {p.depth} "
        f"only ({p.nbytes:,} bytes of state), where epsilon*n = {args.epsilon:g} x {n:,} "
        f"supports depth {p.target_depth}: the release will be coarse (cells of 2^-"
        f"{p.depth // domain.d} of each column's range or wider). About {hi:,} bytes "
        f"(--memory {_size_text(hi)}) reach depth {p.target_depth}.",
    )


def _size_text(n: int) -> str:
    """A byte count as a --memory value, rounded up: ``"12KB"``, ``"3MB"``.

    >>> _size_text(11_500), _size_text(2_000_001)
    ('12KB', '3MB')
    """
    for unit, size in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if n >= size:
            return f"{-(-n // size)}{unit}"
    return f"{n}B"


def _note(args: argparse.Namespace, text: str) -> None:
    """A sentence for the user about the plan, printed with the summary's line."""
    notes = getattr(args, "plan_notes", None)
    if notes is None:
        notes = args.plan_notes = []
    notes.append(text)


def _ram_bytes() -> int | None:
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


def _memory_budget(args: argparse.Namespace) -> int:
    """``--memory`` in bytes, capped at half this machine's memory (with a note saying so)."""
    budget = _parse_bytes(args.memory)
    ram = _ram_bytes()
    if ram and budget > ram // 2:
        _note(
            args,
            f"--memory {args.memory} is more than half this machine's memory "
            f"({ram / 1e9:,.1f} GB): capped at {ram // 2:,} bytes",
        )
        budget = ram // 2
    return budget


def _pmm_plan(args: argparse.Namespace, domain: Any) -> tuple[Any, str]:
    from ..privacy import accounting
    from ..synth.offline.pmm import PMM

    if args.state:
        raise _fail(
            "--state is for PrivHP: PMM draws its noise at the release, so its state is exact "
            "counts (not private) and is not saved by the command line"
        )
    if args.width is not None or args.k is not None or args.sketch_depth is not None:
        raise _fail("--k, --width and --sketch-depth are PrivHP parameters; PMM has only --depth")
    if getattr(args, "privacy_unit", None):
        raise _fail(
            "--privacy-unit: PMM protects one row (event level); user-level privacy is offered "
            "by --mechanism privhp and marginal"
        )
    depth = args.depth
    if depth is None:
        depth = min(accounting.pmm_depth(args.epsilon, args.expected_n, domain.d), 30)
        depth = min(depth, domain.max_depth)
    how = "depth as given" if args.depth else f"depth from expected_n={args.expected_n:,}"
    if args.memory is not None:
        budget = _memory_budget(args)
        cap = int(np.floor(np.log2(max((budget - 64) / 8, 1))))
        if cap < 1:
            raise _fail(f"--memory {args.memory} is too small for PMM (needs at least 80 bytes)")
        if cap < depth:
            depth, how = cap, f"depth capped by --memory {budget:,} bytes (8·2**depth + 64)"
    return PMM(domain, epsilon=args.epsilon, depth=depth, rng=args.noise_seed), how


def _marginal_plan(args: argparse.Namespace, domain: Any) -> tuple[Any, str]:
    from ..synth.marginal.synthesizer import MarginalSynthesizer

    if args.state:
        raise _fail(
            "--state is for PrivHP: the marginal synthesizer draws its noise at the release, so "
            "its state is exact counts (not private) and is not saved by the command line"
        )
    if any(v is not None for v in (args.width, args.k, args.sketch_depth, args.depth)):
        raise _fail(
            "--k, --width, --sketch-depth and --depth are PrivHP/PMM parameters; the marginal "
            "synthesizer takes --memory and --expected-n"
        )
    if domain.d < 2:
        raise _fail("--mechanism marginal needs at least 2 columns")
    memory = None if args.memory is None else _parse_bytes(args.memory)
    syn = MarginalSynthesizer(
        domain,
        args.epsilon,
        memory_bytes=memory,
        expected_n=args.expected_n,
        rng=args.noise_seed,
        **_unit_kwargs(args),
    )
    return syn, syn.explain()


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
            ("--schema", args.schema),
            ("--since", args.since),
            ("--until", args.until),
            ("--paths", args.paths),
            ("--bytes-cap", args.bytes_cap),
            ("--privacy-unit", getattr(args, "privacy_unit", None)),
            ("--max-rows", getattr(args, "max_rows", None)),
            ("--expected-units", getattr(args, "expected_units", None)),
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


def _check_inside(batch: np.ndarray, domain: Any, reader: Any, columns: list[str]) -> None:
    """Under --out-of-bounds raise, once the domain has refused a batch: name the first line
    outside the public bounds (the domain's own error names a row of the batch)."""
    lo, hi = domain.lower, domain.upper
    bad = ~((batch >= lo) & (batch <= hi))  # no row outside: the refusal was for another reason
    if bad.any():
        i, c = (int(v[0]) for v in np.nonzero(bad))
        raise _fail(
            f"{reader.name} line {int(reader.lines[i])}: {columns[c]} = {float(batch[i, c])!r} is "
            f"outside the public bounds [{float(lo[c])!r}, {float(hi[c])!r}] (--bounds); pass "
            "--out-of-bounds clip (move it onto the boundary) or drop (leave it out)"
        )


def _input_format(args: argparse.Namespace) -> str:
    from ..io.arrowread import columnar_format
    from ..io.readers import format_of

    if args.format:
        return args.format
    if args.data == "-":
        return "csv"
    return format_of(args.data) or columnar_format(args.data) or "csv"


def _open(data: str, domain: Any, columns: list[str] | None, fmt: str, **kwargs: Any) -> Any:
    """The reader of DATA: typed Arrow tables for a schema, numeric batches otherwise."""
    if type(domain).__name__ == "Schema":
        from ..io.tables_reader import open_table_reader

        return open_table_reader(data, domain, fmt=fmt, **kwargs)
    from ..io.readers import open_reader

    return open_reader(data, None if fmt == "accesslog" else columns, fmt=fmt, **kwargs)


_SMALL_FILE = 1 << 18  # bytes: below, a plain CSV is parsed by numpy (it is read in one block)


def _small_plain_file(path: str) -> bool:
    """An uncompressed file of less than 256 KiB (not stdin): numpy parses it sooner than
    pyarrow can be imported, and the rows are the same."""
    from ..io.compress import compression_of

    if path == "-":
        return False
    try:
        if os.path.getsize(path) >= _SMALL_FILE:
            return False
        with open(path, "rb") as fh:
            return compression_of(fh.read(4)) is None
    except OSError:
        return False


def _start(
    args: argparse.Namespace,
    fmt: str,
    run: dict[str, Any] | None,
    domain: Any,
    columns: list[str] | None,
) -> tuple[dict[str, Any], str | None]:
    """Reader keywords that start where a resumed run stopped, and a line saying so."""
    from ..io.batchreader import Position, starts_with

    skip = args.skip_rows
    if skip is not None and skip < 0:
        raise _fail(f"--skip-rows must be >= 0; got {skip}")
    if not args.resume or run is None:
        if skip:
            return {"skip_rows": skip}, f"passing over the first {skip:,} input rows"
        return {}, None
    if skip is not None:
        return {"skip_rows": skip}, f"--skip-rows {skip}: the state had read {run['rows']:,}"
    if run.get("format", fmt) != fmt:
        raise _fail(
            f"--resume {args.resume!r} was reading {run.get('format')} input, not {fmt} (--format)"
        )
    if args.data == "-":
        how = "read to its end" if run["complete"] else "interrupted"
        raise _fail(
            f"--resume on stdin: the state read {run['rows']:,} input rows of "
            f"{run.get('source', 'its input')} ({how}) and a pipe cannot be checked against "
            f"them; pass --skip-rows {run['rows']} if the pipe repeats that input from its "
            "start, or --skip-rows 0 if it holds only new rows"
        )
    position = Position(run["rows"], run["offset"], run["digest"])
    if fmt in ("parquet", "arrow"):
        probe = _open(args.data, domain, columns, fmt)
        same = probe.fingerprint == position.digest
        probe.close()
    else:
        same = starts_with(args.data, position)
    if same:
        return {"resume": position}, f"continuing after the {run['rows']:,} input rows read"
    if run["complete"]:
        return {}, f"{args.data} is new input (the state's input was read to its end)"
    raise _fail(
        f"{args.data} does not begin with the {run['rows']:,} input rows the interrupted run "
        f"read from {run.get('source', 'its input')} (the bytes differ); give that input, or "
        "--skip-rows N to pass over N rows of this one (--skip-rows 0: all of it is new)"
    )


def _save_run(
    path: str,
    summary: Any,
    reader: Any,
    fmt: str,
    before: dict[str, Any] | None,
    complete: bool,
) -> None:
    """The state and the input position it holds, in one atomic file (trusted: exact counts)."""
    from ..io.checkpoint import pack_run

    pos = reader.position
    prior = before or {}
    run = {
        "rows": pos.rows,
        "offset": pos.offset,
        "digest": pos.digest,
        "complete": complete,
        "format": fmt,
        "source": reader.name,
        "n_rows": prior.get("n_rows", 0) + reader.n_rows,
        "n_bad": prior.get("n_bad", 0) + getattr(reader, "n_bad_at_position", reader.n_bad),
    }
    # A trusted local file (exact counts): readable by its owner only, whatever the umask.
    _write_atomic(path, pack_run(summary.to_bytes(include_diagnostics=True), run), owner_only=True)


def public_guess(n: int) -> int:
    """``n`` rounded to one significant figure: a guess of the row count fit to publish (the
    exact count read must not set a published parameter).

    >>> [public_guess(n) for n in (7, 1024, 1025, 1500, 2_600_000)]
    [7, 1000, 1000, 2000, 3000000]
    """
    if n < 10:
        return max(int(n), 1)
    step = 10 ** (len(str(int(n))) - 1)
    return max(step, int(round(n / step)) * step)


def _too_deep(signal: int, depth: int, d: int) -> bool:
    return signal < depth / 2 or signal < min(d, depth)


def _signal_warning(summary: Any, n: int, args: argparse.Namespace | None = None) -> str | None:
    """A warning when epsilon*n is too small for the tree's depth: below the level where the
    noise exceeds a typical cell's count (``PrivHP.plan``'s signal depth at the rows read),
    the release is close to uniform; warned when that is most of the tree.

    The advice never quotes the count read: a depth set from it would publish it (at ε = 0.5,
    1,024 rows give depth 9 and 1,025 depth 10). It offers ``--expected-n`` rounded to one
    significant figure, and only when that depth would end the warning."""
    from ..privacy import accounting

    plan = getattr(PrivHP, "plan", None)
    if plan is None or not isinstance(summary, PrivHP) or n < 1:
        return None
    eps, said = summary.epsilon, "epsilon"
    if summary.unit is not None:  # the noise of 2L rows, on the rows the bounder kept
        eps, said = eps / summary.sensitivity, f"epsilon/{summary.sensitivity} (2L)"
        n = max(summary.n_seen, 1)
    try:
        p = plan(summary.domain, eps, max(summary.nbytes, 1 << 16), n)
    except (ValueError, TypeError):
        return None
    depth, signal, d = summary.depth, p.signal_depth, summary.domain.d
    if not _too_deep(signal, depth, d):
        return None
    guess = public_guess(n)
    advice = "More rows (a longer period) or a larger --epsilon would help"
    if args is not None and getattr(args, "depth", None) is None:
        try:
            if getattr(args, "memory", None) is not None:
                fits = plan(summary.domain, eps, _parse_bytes(args.memory), guess).depth
            else:
                fits = accounting.privhp_depth(eps, guess, d, summary.k)
            fits = min(fits, summary.domain.max_depth)
        except (ValueError, TypeError):
            fits = depth
        if fits < depth and not _too_deep(signal, fits, d):
            advice = (
                f"{advice}, or --expected-n {guess} (a depth that fits): a public guess "
                "of the rows, rounded, never the count read here, since the depth is "
                "published and would reveal it"
            )
        else:
            advice = f"{advice}; so would a shallower tree (a smaller --depth)"
    return (
        f"{said}*n = {eps:g} x {n:,} = {eps * n:,.0f} is small for depth {depth}: the noise "
        f"exceeds the count of a typical cell from level {signal + 1} on, so below that the "
        f"release is close to uniform ({signal} of {depth} levels carry signal). {advice}."
    )


def _counting_threads(reader: Any, fmt: str) -> contextlib.AbstractContextManager:
    """PrivHP counts each batch on the calling thread alone while a Parquet or Arrow reader
    decodes on a thread of its own and the process has fewer than three cores: decoding is
    cheaper than counting there, and a second counting thread would only contend for the two
    cores. A text parser is the slower side, so the counting thread waits for it anyway, and
    the second one costs nothing there (``python benchmarks/bench_fit_threads.py`` measures
    both rules on both files)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    columnar = fmt in ("parquet", "arrow")
    if columnar and getattr(reader, "threads", False) and (cores or 1) < 3:
        from ..synth.privhp.bank import one_thread

        return one_thread()
    return contextlib.nullcontext()


def _fit(args: argparse.Namespace) -> int:
    from ..errors import InputError
    from ..io.progress import progress

    run = None
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
    _check_output(args.output, "-o")  # before any input is read
    _check_output(args.state, "--state")
    fmt = _input_format(args)
    if args.delimiter is not None and fmt != "csv":
        raise _fail(f"--delimiter is for CSV input, not {fmt}")
    delimiter = args.delimiter
    if delimiter in ("\\t", "tab", "TAB"):
        delimiter = "\t"
    if delimiter is not None and (len(delimiter) != 1 or delimiter in '"\r\n'):
        raise _fail(f"--delimiter must be one character (\\t for tab); got {args.delimiter!r}")
    if args.resume:
        summary = _resume(args)
        run = _load_run(args.resume)
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
        plans = {"privhp": _privhp_plan, "pmm": _pmm_plan, "marginal": _marginal_plan}
        plan = plans[mechanism]
        summary, how = plan(args, domain)
        if args.mechanism is None and type(domain).__name__ == "Schema" and domain.d >= 3:
            notes = list(getattr(args, "plan_notes", None) or [])
            notes.append(
                f"a table of {domain.d} columns: --synth marginal keeps its 2-way marginals "
                "far closer to the data's than PrivHP's tree can"
            )
            args.plan_notes = notes
    say = _say(args)
    say(f"sketchsyn fit: {type(summary).__name__}, {summary.nbytes:,} bytes of state ({how})")
    for note in getattr(args, "plan_notes", None) or []:
        say(f"  {note}" if note.startswith("warning:") else f"  note: {note}")
    start, start_note = _start(args, fmt, run, domain, columns)
    kwargs: dict[str, Any] = {"batch_size": args.batch_size, "on_bad": args.on_bad, **start}
    if delimiter is not None:
        kwargs["delimiter"] = delimiter
    if fmt == "csv" and type(domain).__name__ != "Schema" and _small_plain_file(args.data):
        kwargs["engine"] = "numpy"  # numpy's parser: a small file does not pay pyarrow's import
    if getattr(summary, "unit", None) is not None:
        kwargs["unit"] = summary.unit  # read beside the schema's columns
    reader = _open(args.data, domain, columns, fmt, **kwargs)
    if start_note:
        say(f"  {start_note}")
    check = isinstance(domain, Box) and domain.out_of_bounds == "raise"
    table = type(domain).__name__ == "Schema"
    every = args.checkpoint_every
    since = 0
    t0 = time.perf_counter()
    bar = progress(reader, enabled=False if args.quiet else None, desc="fit", batched=True)
    # A PrivHP counts the run per cell and adds it to its state when the run ends and before
    # each checkpoint (the same state as batch by batch); other summaries take each batch.
    from ..synth.privhp.pending import PendingCounts

    with _counting_threads(reader, fmt), PendingCounts(summary, args.batch_size) as sink:
        for batch in bar:
            try:
                sink.add(batch)
            except InputError as exc:
                if check:  # the domain refused a row outside the bounds: name its line
                    _check_inside(batch, domain, reader, columns)
                if not table:
                    raise
                from .tables import _named_row

                raise _named_row(exc, reader) from None
            since += batch.shape[0]
            if args.state and every and since >= every and reader.position is not None:
                sink.flush()
                _save_run(args.state, summary, reader, fmt, run, complete=False)
                since = 0
    elapsed = time.perf_counter() - t0
    say(
        f"  read {reader.n_rows:,} rows from {reader.name} in {elapsed:.2f} s "
        f"({reader.n_rows / max(elapsed, 1e-9):,.0f} rows/s)"
    )
    if reader.n_bad:
        say(f"  skipped {reader.n_bad:,} bad line(s) (--on-bad skip), first: {reader.bad_lines}")
    if getattr(reader, "n_ipv6", 0):
        say(
            f"  skipped {reader.n_ipv6:,} IPv6 client line(s): the IPv4 domain does not hold "
            "them (they are not in the release)"
        )
    if table:
        from .tables import _policy_lines, _unit_lines

        for line in _policy_lines(summary) + _unit_lines(summary):
            say(f"  {line}")
    elif summary.n_dropped:
        say(
            f"  {summary.n_dropped:,} rows outside --bounds were dropped (exact count for you, "
            "the data holder; it is not part of the release)"
        )
    total = (run or {}).get("n_rows", 0) + reader.n_rows
    warning = _signal_warning(summary, total, args)
    if total == 0:
        warning = (
            f"0 rows were read from {reader.name}: the release holds noise only and "
            "describes no data"
        )
    if warning:
        say(f"  warning: {warning}")
    if args.output:
        release = summary.release()
        _write_atomic(args.output, release.to_bytes())
        shape = (
            f"{release.n_leaves} leaves"
            if hasattr(release, "n_leaves")
            else f"tree of column pairs {release.tree}"
        )
        say(
            f"  wrote {args.output}: {release.mechanism} release, epsilon={release.epsilon}, "
            f"{shape}, noisy total {release.total:,.0f}"
        )
    if args.state:
        _save_run(args.state, summary, reader, fmt, run, complete=True)
        note = " (already released: it accepts no more rows)" if args.output else ""
        say(
            f"  wrote the state {args.state}{note}, with the input position "
            f"({reader.position.rows:,} input rows): a trusted local file, keep it with the data"
        )
    return 0
