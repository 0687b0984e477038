"""The docs site builds in strict mode (warnings fail); CI runs the README's test command."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_docs_build_strict(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    pytest.importorskip("mkdocstrings_handlers.python")
    site = tmp_path / "site"
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q"]
        + ["-f", str(ROOT / "mkdocs.yml"), "-d", str(site)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    api = (site / "api" / "privhp" / "index.html").read_text()
    assert "sketchsyn.synth.privhp.PrivHP" in api and "noise_scales" in api  # from the docstrings
    assert (site / "privacy" / "index.html").exists()
    assert (site / "stories" / "edge-collector" / "index.html").exists()


def test_readme_test_command_is_what_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    block = re.search(r"whole test suite.*?```bash\n(.*?)\n```", readme, re.S)
    assert block is not None
    install, run = (part.strip() for part in block.group(1).split("&&"))
    ci_lines = [line.strip() for line in ci.splitlines()]
    ci_install = next(line for line in ci_lines if line.startswith("python3 -m pip install"))
    assert ci_install.replace("--quiet --disable-pip-version-check ", "") == install
    assert run in ci_lines
    assert '".[test,docs]"' in install
