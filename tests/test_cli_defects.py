"""The command line's defects of issue 34 (items 11-14, 19) and its lean start (issue 35, item 3),
each through subprocess or at its cause: output paths checked before the stream, a budget too
small or an empty input warned with the figure, the checkpoint spacing kept after a resume, a
damaged model named as such, the hint for a negative option value, and subcommands that import
only what they use."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from cli_run import run, user_error  # tests/ is on sys.path (no __init__)

from sketchsyn.io.batchreader import Position
from sketchsyn.io.readers import CSVReader

ROOT = Path(__file__).resolve().parents[1]
BOUNDS = "--bounds=0:1,0:1"
COMMON = ("--columns", "x,y", BOUNDS, "--epsilon", "1")


def short_csv(path: Path, n: int, seed: int = 0) -> Path:
    """``n`` rows of two short numbers (about 12 bytes a line)."""
    X = np.random.default_rng(seed).random((n, 2)).round(3)
    with open(path, "w") as fh:
        fh.write("x,y\n")
        np.savetxt(fh, X, fmt="%.3f", delimiter=",")
    return path


# ------------------------------------------------------------------ item 11: outputs checked first
def test_a_missing_output_directory_is_refused_before_the_stream(tmp_path):
    data = short_csv(tmp_path / "d.csv", 400_000)
    t0 = time.perf_counter()
    proc = run("fit", data, *COMMON, "-o", tmp_path / "missing" / "x.model")
    user_error(proc, "-o", "does not exist")
    assert "read" not in proc.err  # nothing was streamed: no summary line
    proc = run("fit", data, *COMMON, "--state", tmp_path / "nope" / "s.bin")
    user_error(proc, "--state", "does not exist")
    assert time.perf_counter() - t0 < 60
    model = tmp_path / "m.model"
    assert run("fit", data, *COMMON, "-o", model, "-q").returncode == 0
    user_error(run("sample", model, "-n", "5", "-o", tmp_path / "no" / "s.csv"), "does not exist")
    user_error(run("plot", data, model, "-o", tmp_path / "no" / "p.png"), "does not exist")
    user_error(run("fit", data, *COMMON, "-o", tmp_path), "is a directory")


# ------------------------------------------------------------------ item 12: warnings with figures
def test_a_budget_below_what_epsilon_n_supports_is_warned_with_the_figures(tmp_path):
    data = short_csv(tmp_path / "d.csv", 2000)
    proc = run("fit", data, *COMMON, "--memory", "1KB", "-o", tmp_path / "m.model")
    assert proc.returncode == 0, proc.err
    assert "warning: --memory 1KB (1,000 bytes) holds a tree of depth" in proc.err
    assert "reach depth" in proc.err and "--memory " in proc.err.split("reach depth")[0]
    plenty = run("fit", data, *COMMON, "--memory", "4MB", "-o", tmp_path / "n.model")
    assert plenty.returncode == 0 and "holds a tree of depth" not in plenty.err


def test_a_header_only_file_is_warned(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("x,y\n")
    proc = run("fit", empty, *COMMON, "-o", tmp_path / "m.model")
    assert proc.returncode == 0, proc.err
    assert "warning: 0 rows were read from" in proc.err and "noise only" in proc.err


# ------------------------------------------------------------------ item 13: checkpoint spacing
def test_the_first_block_after_a_resume_has_the_usual_size(tmp_path):
    """The cause: after a resume the reader sized its first block at 64 bytes a line, so on
    short lines the first position (hence the first checkpoint) came several blocks later."""
    data = short_csv(tmp_path / "d.csv", 300_000)
    first = CSVReader(str(data), ["x", "y"], batch_size=20_000, threads=False)
    positions = []
    for _ in first:
        if first.position is not None:
            positions.append(first.position)
    start = positions[2]
    later = CSVReader(str(data), ["x", "y"], batch_size=20_000, threads=False, resume=start)
    for _ in later:
        if later.position is not None:
            break
    assert later.position.rows - start.rows <= 1.2 * 20_000, later.position.rows - start.rows
    assert isinstance(start, Position)


def test_checkpoints_after_a_resume_keep_their_spacing(tmp_path):
    data = short_csv(tmp_path / "d.csv", 240_000)
    state = tmp_path / "s.bin"
    part = tmp_path / "part.csv"
    part.write_bytes(b"".join(data.read_bytes().splitlines(keepends=True)[:60_001]))
    assert run("fit", part, *COMMON, "--state", state, "-q").returncode == 0
    with open(part, "ab") as fh:  # the file grows: the state continues after its 60,000 rows
        fh.write(b"".join(data.read_bytes().splitlines(keepends=True)[60_001:]))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    code = (
        "import sys\n"
        "from sketchsyn.cli import fit, main\n"
        "rows = []\n"
        "save = fit._save_run\n"
        "def spy(path, summary, reader, *a, **k):\n"
        "    rows.append(reader.position.rows)\n"
        "    return save(path, summary, reader, *a, **k)\n"
        "fit._save_run = spy\n"
        f"main(['fit', {str(part)!r}, '--resume', {str(state)!r}, '--checkpoint-every', "
        "'20000', '--batch-size', '20000', '-q'])\n"
        "print(rows)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr.decode()
    rows = eval(out.stdout.decode().strip().splitlines()[-1])  # noqa: S307 - our own list
    gaps = np.diff([60_000, *rows[:-2]])  # the last two saves: at the end of the input
    assert rows[-1] == 240_000 and gaps.size >= 2, rows
    # The first checkpoint after the resume comes as many rows later as the next ones (before
    # the fix it came after a first block sized at 64 bytes a line: 5 times too many rows).
    assert gaps[0] <= 1.05 * np.median(gaps[1:]), rows


# ------------------------------------------------------------------ item 14: damaged files
def test_a_damaged_model_is_named_damaged_with_the_file(tmp_path):
    data = short_csv(tmp_path / "d.csv", 2000)
    model = tmp_path / "m.model"
    assert run("fit", data, *COMMON, "-o", model, "-q").returncode == 0
    blob = bytearray(model.read_bytes())
    cases = {}
    flipped_magic = bytearray(blob)
    flipped_magic[2] ^= 1
    cases["magic.model"] = flipped_magic
    flipped_kind = bytearray(blob)
    flipped_kind[20] ^= 4
    cases["kind.model"] = flipped_kind
    flipped_body = bytearray(blob)
    flipped_body[-40] ^= 1
    cases["body.model"] = flipped_body
    cases["half.model"] = blob[: len(blob) // 2]
    cases["stub.model"] = blob[:10]
    for name, content in cases.items():
        path = tmp_path / name
        path.write_bytes(bytes(content))
        for command in (("info", path), ("sample", path, "-n", "3")):
            proc = run(*command)
            user_error(proc, f"'{path}' is damaged")
            assert "not a file written" not in proc.err
    other = tmp_path / "notes.txt"
    other.write_text("hello, not a model\n")
    user_error(run("info", other), "is not a file written by sketchsyn fit")


# ------------------------------------------------------------------ item 19: negative values
def test_a_negative_value_after_a_space_gets_the_attached_spelling():
    proc = run("fit", "d.csv", "--columns", "x", "--bounds", "-120:1440", "--epsilon", "1")
    user_error(proc, "expected one argument", "--bounds=-120:1440")


# ------------------------------------------------------------------ issue 35 item 3: lean start
def _imported(code: str) -> set[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    probe = code + "\nimport sys\nprint(' '.join(sorted(sys.modules)), file=sys.stderr)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr.decode()
    return set(out.stderr.decode().splitlines()[-1].split())


@pytest.mark.parametrize(
    "command, unused",
    [
        ("fit", {"compare", "compare_tables", "demo", "release", "schemacmd", "tablesample"}),
        ("sample", {"compare", "compare_tables", "demo", "fit", "schemacmd"}),
        ("info", {"compare", "compare_tables", "demo", "fit", "schemacmd", "tablesample"}),
    ],
)
def test_a_subcommand_imports_only_what_it_uses(tmp_path, command, unused):
    data = short_csv(tmp_path / "d.csv", 1000)
    model = tmp_path / "m.model"
    assert run("fit", data, *COMMON, "-o", model, "-q").returncode == 0
    argv = {
        "fit": ["fit", str(data), *COMMON, "-o", str(tmp_path / "n.model"), "-q"],
        "sample": ["sample", str(model), "-n", "5", "-o", str(tmp_path / "s.csv"), "-q"],
        "info": ["info", str(model)],
    }[command]
    mods = _imported(f"from sketchsyn.cli import main\nassert main({argv!r}) == 0")
    assert f"sketchsyn.cli.{'fit' if command == 'fit' else 'release'}" in mods
    loaded = {m.rsplit(".", 1)[1] for m in mods if m.startswith("sketchsyn.cli.")}
    assert not loaded & unused, loaded & unused
    assert "sketchsyn.evaluate" not in mods and "matplotlib" not in mods
    if command == "fit":  # a small plain CSV is parsed by numpy: pyarrow is not imported
        assert "pyarrow" not in mods and "pandas" not in mods


def test_a_small_csv_parsed_by_numpy_gives_the_release_of_pyarrows_rows(tmp_path):
    data = short_csv(tmp_path / "d.csv", 3000)
    seeded = (*COMMON, "--noise-seed", "4", "-q")
    assert run("fit", data, *seeded, "-o", tmp_path / "a.model").returncode == 0
    piped = run("fit", "-", *seeded, "-o", tmp_path / "b.model", input=data.read_bytes())
    assert piped.returncode == 0, piped.err  # stdin: pyarrow's parser
    assert (tmp_path / "a.model").read_bytes() == (tmp_path / "b.model").read_bytes()


def test_help_imports_no_subcommand_and_import_sketchsyn_stays_lazy():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-X", "importtime", "-m", "sketchsyn", "fit", "--help"]
    proc = subprocess.run(cmd, capture_output=True, env=env, timeout=120)
    assert proc.returncode == 0 and b"--schema" in proc.stdout
    names = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.decode().splitlines()}
    cli = {n for n in names if n.startswith("sketchsyn.cli.")}
    assert cli == {"sketchsyn.cli.parser", "sketchsyn.cli.common"}, cli
    assert not {n for n in names if n.startswith(("sketchsyn.synth", "sketchsyn.io"))}
    mods = _imported("import sketchsyn")
    assert "numpy" not in mods and not {m for m in mods if m.startswith("sketchsyn.")} - {
        "sketchsyn.attributes"
    }


@pytest.mark.parametrize(("given", "expected"), [(None, "1"), ("2", "2")])
def test_the_command_keeps_openblas_to_one_thread_unless_the_environment_says(given, expected):
    """The command's own process sets OPENBLAS_NUM_THREADS=1 before numpy's import (its thread
    pool cost a small fit a fifth of its CPU for no linear algebra); a user's value is kept."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("OPENBLAS_NUM_THREADS", None)
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    code = (
        "import os, sys\n"
        "sys.argv = ['sketchsyn', 'schema', '--accesslog']\n"
        "from sketchsyn.__main__ import command\n"
        "status = command()\n"
        "import numpy\n"
        "print(status, os.environ['OPENBLAS_NUM_THREADS'], file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stderr.decode().split()[-2:] == ["0", expected]


def test_the_command_ends_its_process_after_pythons_exit_work_only() -> None:
    """The command's process ends by ``os._exit`` once the ``atexit`` handlers ran and the
    streams are flushed: Arrow's thread pool is never torn down under a read-ahead task that a
    damaged input left running (the process aborted with exit -6 about one run in 30 under
    load: apache/arrow#34314). Both entry points take that path."""
    assert 'sketchsyn = "sketchsyn.__main__:run"' in (ROOT / "pyproject.toml").read_text()
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('handler', file=sys.stderr))\n"
        "sys.argv = ['sketchsyn', 'schema', '--accesslog']\n"
        "from sketchsyn.__main__ import run\n"
        "sys.stdout.write('unflushed ')\n"
        "run()\n"
        "print('never reached', file=sys.stderr)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode().startswith("unflushed ") and "columns" in proc.stdout.decode()
    assert proc.stderr.decode().strip() == "handler"
    bad = [sys.executable, "-m", "sketchsyn", "fit", "missing.csv", "--columns", "a",
           "--bounds", "0:1", "--epsilon", "1", "-o", "m.model"]  # fmt: skip
    proc = subprocess.run(bad, capture_output=True, env=env, timeout=120)
    assert proc.returncode == 2 and "error:" in proc.stderr.decode()
