"""Package surface: every public name resolves, the CLI demo runs, the bad-parameter table."""

from __future__ import annotations

import numpy as np
import pytest

import sketchsyn
from sketchsyn.cli import main


def test_every_public_name_resolves():
    for name in sketchsyn.__all__:
        assert getattr(sketchsyn, name) is not None
    with pytest.raises(AttributeError):
        sketchsyn.NoSuchThing  # noqa: B018


def test_demo_runs_on_a_small_stream(capsys, tmp_path):
    assert (
        main(
            [
                "demo",
                "--n",
                "30000",
                "--k",
                "16",
                "--width",
                "128",
                "--noise-seed",
                "1",
                "--plot",
                str(tmp_path / "demo.png"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "epsilon=1.0" in out and "bytes" in out and "W1(data, synthetic)" in out


def test_demo_reads_a_csv(tmp_path, capsys):
    path = tmp_path / "rows.csv"
    rows = np.random.default_rng(0).random((500, 2)) * 10
    path.write_text("a,b\n" + "\n".join(f"{x:.4f},{y:.4f}" for x, y in rows) + "\n99,99\n")
    code = main(
        [
            "demo",
            "--csv",
            str(path),
            "--columns",
            "a,b",
            "--lower",
            "0,0",
            "--upper",
            "10,10",
            "--n",
            "500",
            "--no-plot",
            "--k",
            "4",
            "--width",
            "32",
        ]
    )
    assert code == 0
    assert "dropped 1 rows" in capsys.readouterr().out


def test_readme_example_runs():
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102
    assert namespace["synthetic"].shape == (100_000, 2)


def test_import_stays_cheap():
    """``import sketchsyn`` loads no submodule but the small ``attributes`` module (its lazy
    ``__getattr__``; names load on first use), so no numpy either; the first public name loads
    its own module, and the registry finds every kind."""
    import subprocess
    import sys

    code = (
        "import sys, sketchsyn; print(sorted(m for m in sys.modules if m.startswith('sketchsyn')),"
        " 'numpy' in sys.modules); from sketchsyn.io.summary import registry;"
        " print(len(registry()) >= 22)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    first, second = out.stdout.strip().splitlines()
    assert first == "['sketchsyn', 'sketchsyn.attributes'] False", first
    assert second == "True"


def test_the_cli_extra_reads_yaml_schemas():
    """Issue 50, item 6: "The `cli` extra lacks PyYAML. The documented `schema … -o log.yaml` →
    `fit --schema log.yaml` flow fails after `pip install "sketchsyn[cli]"`."""
    tomllib = pytest.importorskip("tomllib")
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    extras = tomllib.loads(text)["project"]["optional-dependencies"]
    names = {req.split(">")[0].split("=")[0].split("[")[0].strip().lower() for req in extras["cli"]}
    assert "pyyaml" in names, extras["cli"]
