"""``sketchsyn fit --privacy-unit COLUMN --max-rows L`` through a subprocess: a CSV with a schema,
an access log whose client is the unit, a resumable PrivHP state, and the refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest
from cli_run import run, user_error

from sketchsyn.io.checkpoint import load

USER_LEVEL = "user-level: all rows of one unit, at most 4 kept (unit 'tail')"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A flights table with a tail number (the unit: a few aircraft fly most flights), its
    schema (without the tail), and an access log of Zipf clients."""
    root = tmp_path_factory.mktemp("units")
    rng = np.random.default_rng(0)
    tails = [f"N{i:03d}" for i in range(200)]
    lines = ["carrier,month,delay,tail"]
    for _ in range(3000):
        tail = tails[min(int(rng.zipf(1.5)), 199)]
        carrier = rng.choice(["AA", "UA", "DL"])
        lines.append(f"{carrier},{rng.integers(1, 13)},{rng.uniform(-30, 300):.1f},{tail}")
    (root / "flights.csv").write_text("\n".join(lines) + "\n")
    schema = {
        "columns": [
            {"name": "carrier", "kind": "categorical", "categories": ["AA", "UA", "DL"]},
            {"name": "month", "kind": "integer", "low": 1, "high": 12},
            {"name": "delay", "kind": "numeric", "low": -60, "high": 600},
        ]
    }
    (root / "flights.json").write_text(json.dumps(schema))
    with_tail = {"columns": [*schema["columns"], {"name": "tail", "kind": "categorical",
                                                  "categories": tails}]}  # fmt: skip
    (root / "with_tail.json").write_text(json.dumps(with_tail))
    log = []
    for _ in range(2000):
        client = f"10.0.{int(rng.zipf(1.4)) % 50}.{rng.integers(1, 5)}"
        hour = int(rng.integers(0, 24))
        log.append(
            f'{client} - - [10/Oct/2000:{hour:02d}:55:36 -0000] "GET /api/x HTTP/1.0" 200 '
            f"{rng.integers(100, 5000)}"
        )
    (root / "access.log").write_text("\n".join(log) + "\n")
    bad = lines[:10] + ["AA,3,12.5,"] + lines[10:20]  # line 11: no tail
    (root / "no_tail.csv").write_text("\n".join(bad) + "\n")
    return root


def _fit(files, *args):
    return run("fit", files / "flights.csv", "--schema", files / "flights.json",
               "--epsilon", "1", "--noise-seed", "3", *args)  # fmt: skip


def test_marginal_on_a_csv_names_the_unit(files, tmp_path):
    model = tmp_path / "m.model"
    proc = _fit(files, "--privacy-unit", "tail", "--max-rows", "4", "--synth", "marginal",
                "-o", model)  # fmt: skip
    assert proc.returncode == 0, proc.err
    assert USER_LEVEL in proc.err
    kept = proc.err.split("rows kept ")[1].split(",")[0]
    assert "dropped past the cap" in proc.err and int(kept.replace(",", "")) < 3000
    info = run("info", model)
    assert info.returncode == 0 and USER_LEVEL in info.out, info.out
    release = load(model)
    assert release.params["unit"] == "tail" and release.params["max_rows"] == 4
    sample = run("sample", model, "-n", "5")
    assert sample.out.splitlines()[0] == "carrier,month,delay"  # the unit is not synthesized


def test_privhp_state_resumes_with_its_bounder(files, tmp_path):
    state = tmp_path / "s.bin"
    proc = _fit(files, "--privacy-unit", "tail", "--max-rows", "4", "--memory", "200KB",
                "--expected-units", "1000", "--state", state)  # fmt: skip
    assert proc.returncode == 0, proc.err
    summary = load(state)
    assert summary.unit == "tail" and summary.bounder is not None
    assert summary.nbytes <= 200_000
    info = run("info", state)
    assert USER_LEVEL in info.out and "units admitted" in info.out, info.out
    kept = summary.n_seen
    again = run("fit", "--resume", state, files / "flights.csv", "-o", tmp_path / "p.model")
    assert again.returncode == 0, again.err
    assert load(state).n_seen == kept  # the same aircraft again: each had its 4 rows already
    assert USER_LEVEL in run("info", tmp_path / "p.model").out


def test_an_access_log_protects_clients(files, tmp_path):
    model = tmp_path / "log.model"
    proc = run("fit", files / "access.log", "--schema", "default", "--since", "2000-10-10",
               "--until", "2000-10-12", "--privacy-unit", "client", "--max-rows", "8",
               "--synth", "marginal", "--epsilon", "1", "-o", model)  # fmt: skip
    assert proc.returncode == 0, proc.err
    assert "'client' is the unit, not a column of the release" in proc.err
    info = run("info", model)
    assert "user-level: all rows of one unit, at most 8 kept (unit 'client')" in info.out
    assert "client" not in load(model).domain.names
    state = tmp_path / "log.bin"
    proc = run("fit", files / "access.log", "--schema", "default", "--since", "2000-10-10",
               "--until", "2000-10-12", "--privacy-unit", "client", "--max-rows", "8",
               "--epsilon", "1", "--memory", "300KB", "--state", state)  # fmt: skip
    assert proc.returncode == 0, proc.err
    assert load(state).bounder.diagnostics["rows_seen"] == 2000


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--privacy-unit", "tail"], "needs --max-rows L"),
        (["--max-rows", "4"], "give --privacy-unit COLUMN too"),
        (["--privacy-unit", "tail", "--max-rows", "4", "--mechanism", "pmm"], "PMM protects"),
        (["--privacy-unit", "plane", "--max-rows", "4"], "column 'plane' is not in the header"),
        (["--privacy-unit", "tail", "--max-rows", "0"], "--max-rows (PrivHP) must be an int"),
        (["--expected-units", "9"], "give it too"),
    ],
)  # fmt: skip
def test_refusals(files, tmp_path, args, says):
    user_error(_fit(files, *args, "-o", tmp_path / "x.model"), says)


def test_more_refusals(files, tmp_path):
    out = tmp_path / "x.model"
    user_error(
        run("fit", files / "flights.csv", "--columns", "delay", "--bounds=-60:600",
            "--privacy-unit", "tail", "--max-rows", "4", "--epsilon", "1", "-o", out),
        "--privacy-unit needs --schema",
    )  # fmt: skip
    user_error(
        run("fit", files / "flights.csv", "--schema", files / "with_tail.json", "--epsilon",
            "1", "--privacy-unit", "tail", "--max-rows", "4", "-o", out),
        "take it out of the schema",
    )  # fmt: skip
    user_error(
        run("fit", files / "no_tail.csv", "--schema", files / "flights.json", "--epsilon", "1",
            "--privacy-unit", "tail", "--max-rows", "4", "--synth", "marginal", "-o", out),
        "no_tail.csv line 11: column 'tail' is missing",
    )  # fmt: skip
