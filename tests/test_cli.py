"""The ``sketchsyn`` command end to end through subprocess (small files, so that it stays fast)."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import numpy as np
import pytest
from cli_run import run, user_error  # tests/ is on sys.path (no __init__)

from sketchsyn import PrivHP, cli
from sketchsyn.cli.common import _Reservoir, _write_atomic
from sketchsyn.errors import InputError
from sketchsyn.io.progress import progress

ROOT = Path(__file__).resolve().parents[1]
BOUNDS = "--bounds=-74.05:-73.75,40.6:40.9"
LO, HI = np.array([-74.05, 40.6]), np.array([-73.75, 40.9])


def rides(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.normal(-73.9, 0.03, n), rng.normal(40.75, 0.04, n)])
    return np.clip(X, LO, HI)


def write_csv(path: Path, X: np.ndarray) -> Path:
    lines = ["lon,fare,lat"] + [f"{a!r},{i % 7}.5,{b!r}" for i, (a, b) in enumerate(X.tolist())]
    text = "\n".join(lines) + "\n"
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_csv(tmp_path_factory.mktemp("cli") / "rides.csv", rides(3000))


def fit(data: Path, out: Path, *extra: str):
    return run("fit", data, "--columns", "lon,lat", BOUNDS, "--epsilon", "1", "-o", out, *extra)


# --------------------------------------------------------------------------- help, usage
def test_help_of_every_command_has_an_example(capsys):
    for command in ("fit", "sample", "evaluate", "plot", "info", "demo"):
        with pytest.raises(SystemExit) as exc:
            cli.main([command, "--help"])
        assert exc.value.code == 0
        assert "example:" in capsys.readouterr().out, command
    proc = run("fit", "--help")
    assert proc.returncode == 0
    assert "plain rule" in proc.out and "PrivHP.for_memory" in proc.out


def test_usage_errors_exit_2():
    user_error(run("fit"), "required: DATA")
    user_error(run("frobnicate"), "invalid choice")
    user_error(run("sample", "x.model"), "-n")


# --------------------------------------------------------------------------- the main path
def test_fit_info_sample_evaluate_plot(data, tmp_path):
    model = tmp_path / "rides.model"
    proc = fit(data, model, "--memory", "64KB", "--noise-seed", "1")
    assert proc.returncode == 0, proc.err
    assert "read 3,000 rows" in proc.err and "bytes of state" in proc.err
    assert model.read_bytes()[:4] == b"SKSY"

    info = run("info", model)
    assert info.returncode == 0, info.err
    for needle in (
        "release of PrivHP",
        "epsilon: 1.0",
        "privacy unit: one row added or removed",
        '"k": 64',
        "leaves:",
        "bytes:",
        "columns: ['lon', 'lat']",
    ):
        assert needle in info.out, (needle, info.out)
    params = json.loads(info.out.split("parameters: ")[1].splitlines()[0])
    sizes = [params["k"], params["width"], params["sketch_depth"], params["depth"]]
    assert PrivHP.memory_bytes(*sizes) <= 64_000  # the memory rule kept the budget
    if not hasattr(PrivHP, "for_memory"):  # the plain rule: the largest power-of-two width
        sizes[1] *= 2
        assert PrivHP.memory_bytes(*sizes) > 64_000

    out = tmp_path / "syn.csv"
    proc = run("sample", model, "-n", "700", "-o", out, "--seed", "5")
    assert proc.returncode == 0, proc.err
    lines = out.read_text().splitlines()
    assert lines[0] == "lon,lat" and len(lines) == 701
    Y = np.loadtxt(out, delimiter=",", skiprows=1)
    assert Y.shape == (700, 2) and (Y >= LO).all() and (Y <= HI).all()
    again = tmp_path / "again.csv"
    assert run("sample", model, "-n", "700", "-o", again, "--seed", "5").returncode == 0
    assert again.read_bytes() == out.read_bytes()  # --seed: reproducible post-processing

    jl = run("sample", model, "-n", "3", "-o", "-", "--format", "jsonl", "--seed", "1")
    assert jl.returncode == 0
    rows = [json.loads(line) for line in jl.out.splitlines()]
    assert len(rows) == 3 and set(rows[0]) == {"lon", "lat"}

    ev = run("evaluate", data, out, BOUNDS, "--max-points", "600")
    assert ev.returncode == 0, ev.err
    w1 = float(ev.out.split("W1(data, synthetic) = ")[1].split()[0])
    floor = float(ev.out.split("data-vs-data floor  = ")[1].split()[0])
    assert "method: ot" in ev.out and 0 < floor < 0.2 and 0 < w1 < 0.2

    png = tmp_path / "fig.png"
    pl = run("plot", data, model, "-o", png, "--max-points", "800")
    assert pl.returncode == 0, pl.err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_stdin_gzip_and_json_lines(tmp_path):
    X = rides(400, seed=3)
    text = tmp_path / "r.csv"
    write_csv(text, X)
    proc = run(
        "fit",
        "-",
        "--columns",
        "lon,lat",
        BOUNDS,
        "--epsilon",
        "1",
        "-o",
        tmp_path / "a.model",
        "--noise-seed",
        "2",
        input=text.read_bytes(),
    )
    assert proc.returncode == 0, proc.err
    assert "from <stdin>" in proc.err
    gz = write_csv(tmp_path / "r.csv.gz", X)
    assert fit(gz, tmp_path / "b.model", "--noise-seed", "2").returncode == 0
    jsonl = tmp_path / "r.jsonl"
    jsonl.write_text("".join(json.dumps({"lat": b, "lon": a}) + "\n" for a, b in X.tolist()))
    assert fit(jsonl, tmp_path / "c.model", "--noise-seed", "2").returncode == 0
    # Same rows, same noise seed: the same release whatever the format.
    blobs = {(tmp_path / f"{n}.model").read_bytes() for n in "abc"}
    assert len(blobs) == 1


def test_pmm_and_explicit_parameters(data, tmp_path):
    proc = fit(data, tmp_path / "p.model", "--mechanism", "pmm", "--depth", "8", "-q")
    assert proc.returncode == 0 and proc.err == ""
    assert "release of PMM" in run("info", tmp_path / "p.model").out
    proc = fit(data, tmp_path / "q.model", "--k", "16", "--width", "128", "--depth", "12")
    assert proc.returncode == 0, proc.err
    assert '"width": 128' in run("info", tmp_path / "q.model").out


def test_access_log_from_stdin(tmp_path):
    log = "".join(
        f'10.{i % 4}.0.{i % 250} - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.0" 200 5\n'
        for i in range(300)
    )
    model = tmp_path / "ip.model"
    proc = run(
        "fit",
        "-",
        "--format",
        "accesslog",
        "--epsilon",
        "1",
        "--depth",
        "16",
        "-o",
        model,
        input=log.encode(),
    )
    assert proc.returncode == 0, proc.err
    out = run("sample", model, "-n", "50", "-o", "-", "--seed", "0")
    lines = out.out.splitlines()
    assert lines[0] == "ip" and len(lines) == 51
    assert all(len(x.split(".")) == 4 for x in lines[1:])
    bad = run(
        "fit",
        "-",
        "--format",
        "accesslog",
        "--epsilon",
        "1",
        "-o",
        model,
        input=log.encode() + b"999.1.1.1 - - x\n",
    )
    user_error(bad, "<stdin> line 301", "is not an IPv4 address")


# --------------------------------------------------------------------------- bad input
def test_missing_bounds_says_how_to_choose_them(data, tmp_path):
    proc = run("fit", data, "--columns", "lon,lat", "--epsilon", "1", "-o", tmp_path / "m")
    user_error(proc, "--bounds is required and must be public", "Never use the data's own")
    proc = run("fit", data, "--columns", "lon,lat", "--bounds=0:1", "--epsilon", "1", "-o", "m")
    user_error(proc, "--bounds has 1 LOW:HIGH pair(s)")
    proc = run("fit", data, "--columns", "lon,lat", "--bounds=1:0,0:1", "--epsilon", "1", "-o", "m")
    user_error(proc, "--bounds pair '1:0' (column 'lon') needs finite LOW < HIGH")


def test_bad_arguments_are_named(data, tmp_path):
    m = tmp_path / "m"
    user_error(run("fit", data, "--columns", "lon,lat", BOUNDS, "-o", m), "--epsilon is required")
    user_error(fit(data, m, "--epsilon", "0"), "--epsilon (PrivHP) must be")
    user_error(fit(data, m, "--memory", "lots"), "--memory 'lots' is not a size")
    user_error(fit(data, m, "--memory", "100B"), "memory_bytes")  # PrivHP.for_memory refuses
    user_error(fit(data, m, "--memory", "1KB", "--k", "64"), "--memory 1KB is too small")
    user_error(fit(data, m, "--memory", "1MB", "--width", "8"), "give --memory or --width")
    user_error(fit(tmp_path / "missing.csv", m), "cannot open", "missing.csv")
    user_error(run("sample", data, "-n", "5", "-o", tmp_path / "x.csv"), "not a file written")
    user_error(run("info", tmp_path / "nothing"), "cannot read MODEL")


def test_unknown_column(data, tmp_path):
    proc = run(
        "fit",
        data,
        "--columns",
        "lon,height",
        "--bounds=0:1,0:1",
        "--epsilon",
        "1",
        "-o",
        tmp_path / "m",
    )
    user_error(proc, "column 'height' is not in the header", "['lon', 'fare', 'lat']")


def test_malformed_line_refused_with_its_number_or_skipped(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("lon,fare,lat\n-73.9,1,40.7\n-73.91,1,40.71\n-73.9,1\n-73.92,1,north\n")
    user_error(fit(path, tmp_path / "m"), "bad.csv line 4: has 2 fields, the header has 3")
    proc = fit(path, tmp_path / "m", "--on-bad", "skip")
    assert proc.returncode == 0, proc.err
    assert "skipped 2 bad line(s)" in proc.err and "[4, 5]" in proc.err
    jl = tmp_path / "bad.jsonl"
    jl.write_text('{"lon": -73.9, "lat": 40.7}\n{"lon": -73.9}\n')
    user_error(fit(jl, tmp_path / "m"), "bad.jsonl line 2: has no key 'lat'")


def test_out_of_bounds_row_with_each_policy(tmp_path):
    path = tmp_path / "oob.csv"
    path.write_text("lon,fare,lat\n-73.9,1,40.7\n-73.9,1,40.8\n-70.5,1,40.7\n")
    proc = fit(path, tmp_path / "m")
    user_error(
        proc,
        "oob.csv line 4: lon = -70.5 is outside the public bounds [-74.05, -73.75]",
        "--out-of-bounds clip",
    )
    clip = fit(path, tmp_path / "c", "--out-of-bounds", "clip")
    assert clip.returncode == 0 and "read 3 rows" in clip.err and "dropped" not in clip.err
    drop = fit(path, tmp_path / "d", "--out-of-bounds", "drop")
    assert drop.returncode == 0 and "1 rows outside --bounds were dropped" in drop.err


# --------------------------------------------------------------------------- state, resume
def test_state_and_resume_equal_one_uninterrupted_run(tmp_path):
    X = rides(1200, seed=4)
    part1 = write_csv(tmp_path / "p1.csv", X[:500])
    part2 = write_csv(tmp_path / "p2.csv", X[500:900])
    part3 = write_csv(tmp_path / "p3.csv", X[900:])
    whole = write_csv(tmp_path / "all.csv", X)
    common = ("--columns", "lon,lat", BOUNDS, "--epsilon", "1", "--noise-seed", "9")
    state = tmp_path / "state.bin"
    proc = run(
        "fit", part1, *common, "--state", state, "--checkpoint-every", "100", "--batch-size", "100"
    )
    assert proc.returncode == 0, proc.err
    assert "resumable PrivHP state" in run("info", state).out
    user_error(run("sample", state, "-n", "5", "-o", "-"), "resumable PrivHP state, not a release")
    user_error(
        run("fit", part2, "--resume", state, "--epsilon", "2", "-o", "x"),
        "--resume takes every parameter from the state; drop --epsilon",
    )
    user_error(
        run("fit", part2, "--resume", state, "--state", tmp_path / "other.bin"),
        "--resume continues its FILE in place",
    )
    # Continue in place without a release, then continue again and release.
    assert run("fit", part2, "--resume", state).returncode == 0
    resumed = tmp_path / "resumed.model"
    proc = run("fit", part3, "--resume", state, "-o", resumed)
    assert proc.returncode == 0, proc.err
    one = tmp_path / "one.model"
    assert run("fit", whole, *common, "-o", one).returncode == 0
    assert resumed.read_bytes() == one.read_bytes()
    # The state was saved after its release: continuing it would release the noise twice.
    user_error(run("fit", part2, "--resume", state, "-o", tmp_path / "z"), "already released")
    assert not list(tmp_path.glob(".sketchsyn-*"))  # no temporary file left behind
    user_error(
        run("fit", part1, *common, "--mechanism", "pmm", "--depth", "8", "--state", state),
        "--state is for PrivHP",
    )


def test_evaluate_refuses_keys_read_as_rows_of_two_columns(tmp_path, capsys):
    """An access log gives one key per line: two --columns must not pair the keys into rows."""
    log = tmp_path / "access.log"
    log.write_text("".join(f"10.0.0.{i} - - x\n" for i in range(8)))
    args = ["evaluate", log, log, "--columns", "a,b", "--method", "tree"]
    assert cli.main([str(a) for a in args]) == 2
    assert "an access log has one column" in capsys.readouterr().err
    res = _Reservoir(10, 2, seed=0)
    with pytest.raises(InputError, match=r"must have shape \(n, 2\).*got shape \(8,\)"):
        res.add(np.arange(8.0), str(log))


def test_reservoir_refuses_a_batch_of_the_wrong_width():
    res = _Reservoir(10, 2, seed=0)
    for bad in (np.arange(6.0), np.zeros((3, 4)), np.zeros((2, 3, 2))):
        with pytest.raises(InputError, match=r"shape \(n, 2\)"):
            res.add(bad)
    assert res.seen == 0
    one = _Reservoir(10, 1, seed=0)
    one.add(np.arange(3.0))  # (n,) is (n, 1) for one column
    assert one.sample().tolist() == [[0.0], [1.0], [2.0]]


def test_write_atomic_replaces_whole_files(tmp_path):
    target = tmp_path / "f.bin"
    target.write_bytes(b"old")
    _write_atomic(str(target), b"new" * 1000)
    assert target.read_bytes() == b"new" * 1000
    assert [p.name for p in tmp_path.iterdir()] == ["f.bin"]


# --------------------------------------------------------------------------- progress
def test_progress_bar_only_on_request_or_terminal():
    batches = [np.zeros((5, 2)), np.zeros((7, 2))]
    assert progress(batches, enabled=None, stream=io.StringIO()) is batches  # not a terminal
    pytest.importorskip("tqdm")
    sink = io.StringIO()
    assert [b.shape[0] for b in progress(batches, enabled=True, stream=sink)] == [5, 7]
    assert "12" in sink.getvalue() and "rows" in sink.getvalue()


def test_demo_still_works():
    proc = run(
        "demo", "--n", "20000", "--k", "16", "--width", "128", "--no-plot", "--samples", "2000"
    )
    assert proc.returncode == 0, proc.err
    assert "W1" in proc.out and "released once" in proc.out


def test_plot_pairwise_marginals_for_three_columns(tmp_path):
    X = np.random.default_rng(5).beta(2, 5, size=(800, 3))
    path = tmp_path / "d3.csv"
    np.savetxt(path, X, delimiter=",", header="a,b,c", comments="")
    model = tmp_path / "d3.model"
    assert (
        run(
            "fit",
            path,
            "--columns",
            "a,b,c",
            "--bounds",
            "0:1,0:1,0:1",
            "--epsilon",
            "1",
            "-o",
            model,
            "--depth",
            "12",
        ).returncode
        == 0
    )
    png = tmp_path / "d3.png"
    proc = run("plot", path, model, "-o", png, "--dpi", "40")
    assert proc.returncode == 0, proc.err
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_memory_uses_privhp_for_memory_when_the_library_has_it(monkeypatch, tmp_path, data):
    calls = []

    def for_memory(domain, epsilon, memory_bytes, expected_n, *, sketch="count-min", rng=None):
        calls.append((domain.columns, epsilon, memory_bytes, expected_n, sketch, rng))
        return PrivHP(domain, epsilon, k=8, width=32, depth=10, sketch=sketch, rng=rng)

    monkeypatch.setattr(PrivHP, "for_memory", staticmethod(for_memory), raising=False)
    model = tmp_path / "m.model"
    args = [
        "fit",
        str(data),
        "--columns",
        "lon,lat",
        BOUNDS,
        "--epsilon",
        "1",
        "--memory",
        "1MiB",
        "--expected-n",
        "5000",
        "--noise-seed",
        "3",
        "-o",
        str(model),
        "-q",
    ]
    assert cli.main(args) == 0
    assert calls == [(("lon", "lat"), 1.0, 2**20, 5000, "count-min", 3)]
    # --k given: the plain rule (the planner chooses k itself).
    assert cli.main([*args, "--k", "16"]) == 0 and len(calls) == 1
