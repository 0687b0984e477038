"""The docs site builds in strict mode (warnings fail); CI runs the README's test command."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _readme_docs_command() -> list[str]:
    """The command the README gives for a static build of the site."""
    readme = (ROOT / "README.md").read_text()
    found = re.search(r"or `(mkdocs build[^`]*)` for", readme)
    assert found is not None, "the README no longer says how to build the docs"
    return found.group(1).split()


def test_docs_build_as_the_readme_says() -> None:
    """The README's command, without -q: any WARNING or a page left out of the menu fails."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    pytest.importorskip("mkdocstrings_handlers.python")
    command = _readme_docs_command()
    assert command == ["mkdocs", "build", "--strict"]
    out = subprocess.run(
        [sys.executable, "-m", *command],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    log = out.stdout + out.stderr
    assert out.returncode == 0, log
    assert "WARNING" not in log, log
    assert 'not included in the "nav"' not in log, log
    site = ROOT / "site"
    api = (site / "api" / "privhp" / "index.html").read_text()
    assert "sketchsyn.synth.privhp.PrivHP" in api and "noise_scales" in api  # from the docstrings
    # Sphinx roles in docstrings become links or code, never raw ``:class:`` text.
    for page in (site / "api").glob("*/index.html"):
        text = page.read_text()
        assert ":class:" not in text and ":meth:" not in text, page
        assert "<blockquote>" not in text, page  # a doctest read as nested quotes
    assert 'class="autorefs autorefs-internal"' in api
    for page in (site / "api").glob("*/index.html"):
        bad = _description_in_type_column(page.read_text())
        assert not bad, f"{page}: a docstring line 'name : text' without a type: {bad}"
    assert (site / "privacy" / "index.html").exists()
    assert (site / "stories" / "edge-collector" / "index.html").exists()


def _description_in_type_column(html: str) -> list[str]:
    """Parameter rows whose Type cell holds a sentence (a numpy docstring line ``rng : noise
    randomness`` has no type: mkdocstrings shows its text as the type)."""
    bad = []
    tables = [t for t in re.findall(r"<table>.*?</table>", html, re.S) if "<th>Default</th>" in t]
    for row in re.findall(
        r"<tr[^>]*>\s*<td>\s*<code>(\w+)</code>\s*</td>\s*<td>(.*?)</td>", "\n".join(tables), re.S
    ):
        name, cell = row
        text = " ".join(re.sub(r"<[^>]+>", " ", cell).split())
        if text.endswith((".", ",", " or", " and")) or len(text.split()) > 12:
            bad.append(f"{name}: {text[:60]}")
    return bad


def test_the_type_column_check_sees_a_missing_type() -> None:
    good = "<tr><td><code>rng</code></td><td><code>int</code></td><td>seed</td></tr>"
    bad = "<tr><td><code>rng</code></td><td><code>noise randomness (None: OS CSPRNG).</code></td>"
    head = "<table><thead><tr><th>Name</th><th>Type</th><th>Default</th></tr></thead>"
    assert not _description_in_type_column(head + good + "</table>")
    assert _description_in_type_column(head + bad + "<td>x</td></tr></table>") == [
        "rng: noise randomness (None: OS CSPRNG)."
    ]


INTERNAL = re.compile(r"seed 00\d|seeds/|SPEC\.md|SPEC §|DESIGN\.md|\bSPEC\b")


def _user_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


@pytest.mark.parametrize("page", _user_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_user_text_cites_papers_not_internal_files(page: Path) -> None:
    hits = [line for line in page.read_text().splitlines() if INTERNAL.search(line)]
    assert not hits, hits


@pytest.mark.parametrize("page", _user_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_figure_table_names_its_script(page: Path) -> None:
    """A page with a table of measured figures names the script that printed them."""
    text = page.read_text()
    measured = re.search(r"^\|.*\d\.\d\d", text, re.M)
    if measured and page.name != "README.md":
        assert re.search(r"benchmarks/\w+\.py|examples/\w+\.py", text), page


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


def test_getting_started_lists_every_extra() -> None:
    """Every optional extra of pyproject.toml is named, with what it is for, on the page."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    page = (ROOT / "docs" / "getting-started.md").read_text()
    missing = [name for name in extras if f"| `{name}` |" not in page]
    assert not missing, f"docs/getting-started.md does not list the extras {missing}"


# Issue 50, item 16: "The API reference has no page for `Schema`, the column kinds, the table
# readers or `evaluate.tables`. The README says every public name below is importable from the
# top, which is false for `save`, `load`, `consume` and `Summary`."
def test_the_api_reference_has_the_table_pages() -> None:
    api = ROOT / "docs" / "api"
    pages = {p.name: p.read_text() for p in api.glob("*.md")}
    documented = set(re.findall(r"^::: ([\w.]+)$", "\n".join(pages.values()), re.M))
    for module in (
        "sketchsyn.domains.schema",
        "sketchsyn.domains.columns",
        "sketchsyn.io.tables_reader",
        "sketchsyn.io.accesslog_table",
        "sketchsyn.evaluate.tables",
    ):
        assert module in documented, module
    nav = (ROOT / "mkdocs.yml").read_text()
    assert all(f"api/{name}" in nav for name in pages), "a page of docs/api is not in the nav"


def test_every_name_the_readme_lists_imports_from_where_it_says() -> None:
    import importlib

    import sketchsyn

    readme = (ROOT / "README.md").read_text()
    table = readme.split("## What is inside", 1)[1].split("\n\n", 2)[1]
    rows = [r for r in table.splitlines() if r.startswith("| `sketchsyn")]
    assert len(rows) > 10
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        package = cells[0].strip("`")
        module = importlib.import_module(package)
        for name in re.findall(r"`(\w+)`", cells[-1]):
            assert hasattr(module, name), f"{package} has no {name} (README)"
    top_claim = rows[0]
    if "every public name below" in top_claim:  # the claim is true, or it is not made
        for row in rows[1:]:
            for name in re.findall(r"`(\w+)`", row.split("|")[-2]):
                assert name in sketchsyn.__all__, f"{name} is not importable from the top"
