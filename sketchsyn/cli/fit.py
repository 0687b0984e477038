"""``sketchsyn fit``: stream a file through PrivHP (or PMM) in bounded memory, write the release
and/or a resumable state.

>>> import argparse
>>> args = argparse.Namespace(bounds="0:1,0:2", columns="x,y", out_of_bounds="clip")
>>> _build_domain(args, "csv")[0]
Box(lower=[0.0, 0.0], upper=[1.0, 2.0], out_of_bounds='clip', columns=['x', 'y'])
"""

from __future__ import annotations

import argparse
import inspect
import os
import time
from typing import Any

import numpy as np

from ..domains import Box
from ..synth.privhp import PrivHP
from .common import (
    _fail,
    _is_released,
    _load,
    _parse_bounds,
    _parse_bytes,
    _parse_columns,
    _say,
    _write_atomic,
)


def _build_domain(args: argparse.Namespace, fmt: str) -> tuple[Any, list[str]]:
    from ..domains import BitDomain

    if fmt == "accesslog":
        if args.bounds:
            raise _fail("--bounds is not used with --format accesslog (the IPv4 space is public)")
        return BitDomain.ipv4(out_of_bounds="raise", columns=["ip"]), ["ip"]
    columns = _parse_columns(args.columns)
    if columns is None:
        raise _fail("--columns is required: the comma-separated numeric columns to read")
    lower, upper = _parse_bounds(args.bounds, columns)
    return Box(lower, upper, out_of_bounds=args.out_of_bounds, columns=columns), columns


def _privhp_plan(args: argparse.Namespace, domain: Any) -> tuple[PrivHP, str]:
    """A PrivHP for the arguments, and one line saying how its parameters were chosen."""
    from ..privacy import accounting

    n = args.expected_n
    if args.memory is None:
        k = 64 if args.k is None else args.k
        width = 1024 if args.width is None else args.width
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
        )
        return php, "parameters as given (defaults k=64, width=1024, sketch_depth=3)"
    if args.width is not None or args.depth is not None:
        raise _fail("--memory chooses --width and --depth: give --memory or --width/--depth")
    budget = _parse_bytes(args.memory)
    planner = getattr(PrivHP, "for_memory", None)
    if planner is not None and args.k is None and args.sketch_depth is None:
        kwargs: dict[str, Any] = {"sketch": args.sketch}
        params = inspect.signature(planner).parameters
        if "rng" in params or any(p.kind is p.VAR_KEYWORD for p in params.values()):
            kwargs["rng"] = args.noise_seed
        php = planner(domain, args.epsilon, budget, n, **kwargs)
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


def _pmm_plan(args: argparse.Namespace, domain: Any) -> tuple[Any, str]:
    from ..privacy import accounting
    from ..synth.pmm import PMM

    if args.state:
        raise _fail(
            "--state is for PrivHP: PMM draws its noise at the release, so its state is exact "
            "counts (not private) and is not saved by the command line"
        )
    if args.width is not None or args.k is not None or args.sketch_depth is not None:
        raise _fail("--k, --width and --sketch-depth are PrivHP parameters; PMM has only --depth")
    depth = args.depth
    if depth is None:
        depth = min(accounting.pmm_depth(args.epsilon, args.expected_n, domain.d), 30)
        depth = min(depth, domain.max_depth)
    how = "depth as given" if args.depth else f"depth from expected_n={args.expected_n:,}"
    if args.memory is not None:
        budget = _parse_bytes(args.memory)
        cap = int(np.floor(np.log2(max((budget - 64) / 8, 1))))
        if cap < 1:
            raise _fail(f"--memory {args.memory} is too small for PMM (needs at least 80 bytes)")
        if cap < depth:
            depth, how = cap, f"depth capped by --memory {budget:,} bytes (8·2**depth + 64)"
    return PMM(domain, epsilon=args.epsilon, depth=depth, rng=args.noise_seed), how


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
    """Under --out-of-bounds raise: name the first line outside the public bounds."""
    lo, hi = domain.lower, domain.upper
    bad = ~((batch >= lo) & (batch <= hi))
    if bad.any():
        i, c = (int(v[0]) for v in np.nonzero(bad))
        raise _fail(
            f"{reader.name} line {int(reader.lines[i])}: {columns[c]} = {float(batch[i, c])!r} is "
            f"outside the public bounds [{float(lo[c])!r}, {float(hi[c])!r}] (--bounds); pass "
            "--out-of-bounds clip (move it onto the boundary) or drop (leave it out)"
        )


def _fit(args: argparse.Namespace) -> int:
    from ..io.progress import progress
    from ..io.readers import format_of, open_reader

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
    fmt = args.format or (None if args.data == "-" else format_of(args.data)) or "csv"
    if args.resume:
        summary = _resume(args)
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
        plan = _privhp_plan if mechanism == "privhp" else _pmm_plan
        summary, how = plan(args, domain)
    say = _say(args)
    say(f"sketchsyn fit: {type(summary).__name__}, {summary.nbytes:,} bytes of state ({how})")
    reader = open_reader(
        args.data,
        None if fmt == "accesslog" else columns,
        fmt=fmt,
        batch_size=args.batch_size,
        on_bad=args.on_bad,
    )
    check = fmt != "accesslog" and domain.out_of_bounds == "raise"
    every = args.checkpoint_every
    since = 0
    t0 = time.perf_counter()
    bar = progress(reader, enabled=False if args.quiet else None, desc="fit", batched=True)
    for batch in bar:
        if check:
            _check_inside(batch, domain, reader, columns)
        summary.update_many(batch)
        since += batch.shape[0]
        if args.state and every and since >= every:
            _write_atomic(args.state, summary.to_bytes())
            since = 0
    elapsed = time.perf_counter() - t0
    say(
        f"  read {reader.n_rows:,} rows from {reader.name} in {elapsed:.2f} s "
        f"({reader.n_rows / max(elapsed, 1e-9):,.0f} rows/s)"
    )
    if reader.n_bad:
        say(f"  skipped {reader.n_bad:,} bad line(s) (--on-bad skip), first: {reader.bad_lines}")
    if summary.n_dropped:
        say(
            f"  {summary.n_dropped:,} rows outside --bounds were dropped (exact count for you, "
            "the data holder; it is not part of the release)"
        )
    if args.output:
        release = summary.release()
        _write_atomic(args.output, release.to_bytes())
        say(
            f"  wrote {args.output}: {release.mechanism} release, epsilon={release.epsilon}, "
            f"{release.n_leaves} leaves, noisy total {release.total:,.0f}"
        )
    if args.state:
        _write_atomic(args.state, summary.to_bytes())
        note = " (already released: it accepts no more rows)" if args.output else ""
        say(f"  wrote the state {args.state}{note}")
    return 0
