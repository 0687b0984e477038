"""Resumable ``sketchsyn fit`` runs: killed with SIGKILL at random points, resumed, and the release
is byte for byte the one of an uninterrupted run (``--noise-seed``); stdin needs ``--skip-rows``."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cli_run import cli_env as _env  # tests/ is on sys.path (no __init__)
from cli_run import kill_after_writes as _kill_after_writes
from cli_run import run

from sketchsyn import PrivHP
from sketchsyn.cli.common import _load_run

ROOT = Path(__file__).resolve().parents[1]
BOUNDS = "--bounds=-74.05:-73.75,40.6:40.9"
PARAMS = ("--columns", "lon,lat", BOUNDS, "--epsilon", "1", "--noise-seed", "5")
PARAMS += ("--k", "16", "--width", "64", "--depth", "12")
SLOW = ("--batch-size", "500", "--checkpoint-every", "1000", "-q")

pytestmark = pytest.mark.skipif(os.name != "posix", reason="SIGKILL and fork are POSIX")


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    rng = np.random.default_rng(3)
    n = 20_000
    X = np.column_stack([rng.normal(-73.9, 0.03, n), rng.normal(40.75, 0.04, n)])
    X = np.clip(X, [-74.05, 40.6], [-73.75, 40.9])
    path = tmp_path_factory.mktemp("resume") / "rides.csv"
    with open(path, "w") as fh:
        fh.write("lon,fare,lat\n")
        for i, (a, b) in enumerate(X.tolist()):
            fh.write(f"{a:.6f},{i % 13}.25,{b:.6f}\n")
            if i % 997 == 0:
                fh.write("\n")  # blank lines are input rows too (not records)
    return path


@pytest.fixture(scope="module")
def uninterrupted(data, tmp_path_factory) -> bytes:
    model = tmp_path_factory.mktemp("one") / "one.model"
    proc = run("fit", data, *PARAMS, "-o", model, "-q")
    assert proc.returncode == 0, proc.err
    return model.read_bytes()


@pytest.mark.parametrize("seed", [0, 1])
def test_sigkill_then_resume_gives_the_uninterrupted_release(data, uninterrupted, tmp_path, seed):
    rnd = random.Random(seed)
    state = tmp_path / "s.bin"
    fit = [sys.executable, "-m", "sketchsyn", "fit", str(data), *PARAMS, "--state", str(state)]
    _kill_after_writes([*fit, *SLOW], state, rnd.randint(1, 12), rnd.uniform(0, 0.02))
    assert state.exists()
    first = _load_run(str(state))
    assert first is not None and 0 < first["rows"] <= 20_000 + 21
    if seed == 1:  # killed twice: the resumed run is interrupted as well
        again = [sys.executable, "-m", "sketchsyn", "fit", str(data), "--resume", str(state)]
        _kill_after_writes([*again, *SLOW], state, rnd.randint(2, 6), rnd.uniform(0, 0.02))
        assert _load_run(str(state))["rows"] >= first["rows"]
    model = tmp_path / "resumed.model"
    proc = run("fit", data, "--resume", state, "-o", model)
    assert proc.returncode == 0, proc.err
    assert "continuing after the" in proc.err
    assert model.read_bytes() == uninterrupted
    assert type(PrivHP.load(state)) is PrivHP  # the library reads the summary inside
    final = _load_run(str(state))
    assert final["complete"] and final["rows"] == 20_000 + 21 and final["n_rows"] == 20_000
    assert not list(tmp_path.glob(".sketchsyn-*"))


def test_stdin_resume_needs_skip_rows_and_a_file_is_checked(data, uninterrupted, tmp_path):
    state = tmp_path / "s.bin"
    cmd = [sys.executable, "-m", "sketchsyn", "fit", "-", *PARAMS, "--state", str(state)]
    with open(data, "rb") as fh:
        _kill_after_writes([*cmd, *SLOW], state, 3, 0.0, stdin=fh)
    rows = _load_run(str(state))["rows"]
    info = subprocess.run(
        [sys.executable, "-m", "sketchsyn", "info", str(state)], capture_output=True, env=_env()
    ).stdout.decode()
    assert f"--skip-rows {rows}" in info and "trusted" in info
    # On stdin the position cannot be checked: refused unless --skip-rows says where to start.
    refused = run("fit", "-", "--resume", state, "-o", tmp_path / "x", input=data.read_bytes())
    assert refused.returncode == 2 and f"--skip-rows {rows}" in refused.err
    # Another file does not begin with the rows the run read: refused, not double counted.
    other = tmp_path / "other.csv"
    other.write_text("lon,fare,lat\n-73.9,1,40.7\n")
    proc = run("fit", other, "--resume", state, "-o", tmp_path / "x")
    assert proc.returncode == 2 and "does not begin with the" in proc.err
    assert "--skip-rows 0" in proc.err
    # The run read stdin; the same rows in a file are checked by their bytes and continued.
    copy = tmp_path / "copy.bin"
    copy.write_bytes(state.read_bytes())
    from_file = tmp_path / "f.model"
    proc = run("fit", data, "--resume", copy, "-o", from_file)
    assert proc.returncode == 0 and f"continuing after the {rows:,} input rows" in proc.err
    assert from_file.read_bytes() == uninterrupted
    model = tmp_path / "m.model"
    proc = run(
        "fit", "-", "--resume", state, "--skip-rows", rows, "-o", model, input=data.read_bytes()
    )
    assert proc.returncode == 0, proc.err
    assert model.read_bytes() == uninterrupted
