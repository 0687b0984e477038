"""``sketchsyn sample`` to stdout, ``--decimals``, and error messages that name the command's
flags (not Python keywords), end to end through subprocess."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cli_run import run  # tests/ is on sys.path (no __init__)

from sketchsyn.cli.common import _cli_message, _flags
from sketchsyn.cli.parser import _parser

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def minutes(tmp_path_factory) -> tuple[Path, Path]:
    """Departure and arrival times in whole minutes of the day (0…1439) and their release."""
    tmp = tmp_path_factory.mktemp("minutes")
    rng = np.random.default_rng(0)
    dep = rng.integers(300, 1300, 4000)
    arr = (dep + rng.integers(30, 130, 4000)) % 1440
    data = tmp / "flights.csv"
    data.write_text("dep,arr\n" + "".join(f"{a},{b}\n" for a, b in zip(dep, arr, strict=True)))
    model = tmp / "flights.model"
    proc = run(
        "fit", data, "--columns", "dep,arr", "--bounds", "0:1439,0:1439", "--epsilon", "1",
        "--depth", "12", "--noise-seed", "3", "-o", model, "-q",
    )  # fmt: skip
    assert proc.returncode == 0, proc.err
    return data, model


def test_sample_writes_to_stdout_without_o(minutes):
    _, model = minutes
    proc = run("sample", model, "-n", "50", "--seed", "4")
    assert proc.returncode == 0 and proc.err == "", proc.err
    lines = proc.out.splitlines()
    assert lines[0] == "dep,arr" and len(lines) == 51
    dash = run("sample", model, "-n", "50", "--seed", "4", "-o", "-")
    assert dash.out == proc.out  # the same as -o -
    jl = run("sample", model, "-n", "4", "--format", "jsonl", "--seed", "4")
    assert [sorted(json.loads(x)) for x in jl.out.splitlines()] == [["arr", "dep"]] * 4


def test_decimals_rounds_inside_the_bounds(minutes, tmp_path):
    _, model = minutes
    full = run("sample", model, "-n", "400", "--seed", "9")
    whole = run("sample", model, "-n", "400", "--seed", "9", "--decimals", "0")
    assert whole.returncode == 0, whole.err
    rows = [line.split(",") for line in whole.out.splitlines()[1:]]
    assert len(rows) == 400 and all(x.lstrip("-").isdigit() for r in rows for x in r)
    exact = np.loadtxt(full.out.splitlines()[1:], delimiter=",")
    rounded = np.array(rows, dtype=float)
    # The same draws, rounded (ties and the top edge may go either way by one unit).
    assert np.abs(rounded - exact).max() <= 0.5 + 1e-9
    assert rounded.min() >= 0 and rounded.max() <= 1439
    # Digits: 17 significant by default, never more than asked with --decimals.
    assert max(len(x.split(".")[1]) for x in full.out.split()[1].split(",")) > 6
    run("sample", model, "-n", "50", "--seed", "9", "--decimals", "2", "-o", tmp_path / "a.csv")
    vals = (tmp_path / "a.csv").read_text().split()[1:]
    assert all(len(v.split(".")[1]) == 2 for line in vals for v in line.split(","))
    jl = run("sample", model, "-n", "5", "--seed", "9", "--decimals", "1", "--format", "jsonl")
    for line in jl.out.splitlines():
        assert all(len(repr(v).split(".")[1]) == 1 for v in json.loads(line).values())


def test_decimals_refusals(minutes, tmp_path):
    _, model = minutes
    bad = run("sample", model, "-n", "5", "--decimals", "-1")
    assert bad.returncode == 2 and "--decimals must be between 0 and 15" in bad.err
    log = tmp_path / "a.log"
    log.write_text("".join(f"10.0.{i % 3}.{i % 200} - - x\n" for i in range(400)))
    ip = tmp_path / "ip.model"
    assert run("fit", log, "--epsilon", "1", "--depth", "12", "-o", ip, "-q").returncode == 0
    keys = run("sample", ip, "-n", "5", "--decimals", "0")
    assert keys.returncode == 2 and "--decimals rounds numeric columns" in keys.err


def test_errors_name_cli_flags_not_python_keywords(tmp_path):
    data = tmp_path / "a.csv"
    data.write_text("x,y\n0.1,0.2\n0.5,abc\n0.3,0.3\n")
    common = ["fit", data, "--columns", "x,y", "--bounds", "0:1,0:1", "-o", tmp_path / "m", "-q"]
    cases = [
        ([*common, "--epsilon", "1"], "(pass --on-bad skip to count and skip bad lines)"),
        ([*common, "--epsilon", "-1"], "--epsilon (PrivHP) must be"),
        ([*common, "--epsilon", "1", "--batch-size", "0"], "--batch-size (CSVReader) must be"),
        ([*common, "--epsilon", "1", "--k", "0"], "--k (PrivHP) must be"),
    ]
    for args, needle in cases:
        proc = run(*args)
        assert proc.returncode == 2 and "Traceback" not in proc.err, proc.err
        assert needle in proc.err, (needle, proc.err)
        for keyword in ("on_bad=", "'epsilon' parameter", "'batch_size'", "'k' parameter"):
            assert keyword not in proc.err, proc.err


def test_cli_message_keeps_what_is_not_a_flag():
    flags = _flags(_parser(), "fit")
    assert {"--on-bad", "--out-of-bounds", "--epsilon", "--sketch-depth"} <= flags
    text = "The 'bits' parameter of BitDomain must be <= 64; use method='ot' (out_of_bounds='drop')"
    assert _cli_message(text, flags) == (
        "The 'bits' parameter of BitDomain must be <= 64; use method='ot' (--out-of-bounds drop)"
    )
    assert _cli_message("use method='ot'", _flags(_parser(), "evaluate")) == "use --method ot"
    assert _flags(_parser(), "nonexistent") == set()
