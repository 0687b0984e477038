"""Every example of the docs that starts processes runs as a script saved from the page.

Issue 34: "The docs/dask.md example, saved as a script, crashes (`BrokenProcessPool`: spawned
workers re-run the module)." and "A venv that is not activated breaks Spark workers ("No module
named 'mmh3'" inside a Java trace)". Each such example (any page: it imports Dask, Spark,
multiprocessing or concurrent.futures) must guard its work with ``if __name__ == "__main__":``
and runs here as a file, by this interpreter's path, with ``PYSPARK_PYTHON`` unset and a
``python3`` first on the ``PATH`` that is not this Python (as in a virtual environment that is
not activated).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
PROCESSES = re.compile(
    r"^\s*(from|import)\s+(sketchsyn\.dask|sketchsyn\.spark|dask|distributed|pyspark|"
    r"multiprocessing|concurrent\.futures)\b|^\s*from sketchsyn import .*\b(dask|spark)\b",
    re.M,
)
GUARD = re.compile(r'^if __name__ == "__main__":', re.M)
# A LocalCluster's worker may log a heartbeat that failed while the cluster was closing
# (dask/distributed#7105, open): distributed's own record and traceback, after the example's work.
HEARTBEAT = " - distributed.worker - ERROR - Failed to communicate with scheduler during heartbeat."
HEARTBEAT_END = "distributed.comm.core.CommClosedError: "


def _without_heartbeat_records(log: str) -> str:
    r"""``log`` less distributed's failed-heartbeat records, each from its line to its last
    (the ``CommClosedError`` line); a record without that last line is kept whole, so that
    nothing after it is hidden.

    >>> log = "a\nt - distributed.worker - ERROR - Failed to communicate with scheduler during "
    >>> log += "heartbeat.\nTraceback (most recent call last):\n  x\n"
    >>> _without_heartbeat_records(log + HEARTBEAT_END + "in <TCP>\nb")
    'a\nb'
    >>> "Traceback" in _without_heartbeat_records(log + "OSError: other\nb")
    True
    """
    lines = log.splitlines()
    out, i = [], 0
    while i < len(lines):
        if HEARTBEAT in lines[i]:
            end = next(
                (j for j in range(i + 1, len(lines)) if lines[j].startswith(HEARTBEAT_END)), None
            )
            if end is not None:
                i = end + 1
                continue
        out.append(lines[i])
        i += 1
    return "\n".join(out)


def _examples() -> list[tuple[str, int, str]]:
    found = []
    for page in PAGES:
        for i, code in enumerate(BLOCK.findall(page.read_text())):
            if PROCESSES.search(code):
                found.append((str(page.relative_to(ROOT)), i, code))
    return found


EXAMPLES = _examples()


def test_the_distributed_pages_have_runnable_examples() -> None:
    pages = {page for page, _, _ in EXAMPLES}
    assert {"docs/dask.md", "docs/spark.md"} <= pages, pages


@pytest.mark.parametrize(
    "page,index,code", EXAMPLES, ids=[f"{page}#{i}" for page, i, _ in EXAMPLES]
)
def test_example_runs_as_a_saved_script(page: str, index: int, code: str, tmp_path) -> None:
    assert GUARD.search(code), f"{page} example {index} starts processes without the guard"
    if "pyspark" in code or "sketchsyn import spark" in code:
        pytest.importorskip("pyspark")
        if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
            pytest.skip("pyspark needs a Java runtime (java on PATH or JAVA_HOME)")
    if "dask" in code:
        pytest.importorskip("distributed")
    pytest.importorskip("pyarrow")
    script = tmp_path / "example.py"
    script.write_text(code)
    # A python3 on the PATH that is not this interpreter (an environment not activated).
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python3").write_text("#!/bin/sh\necho 'not the driver python' >&2\nexit 3\n")
    (fake / "python3").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join([str(fake), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    if "pyspark" in code:  # a short-lived JVM, as the Spark fixtures start theirs: quick start-up
        env.setdefault("JDK_JAVA_OPTIONS", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
    out = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    log = out.stdout + out.stderr
    assert out.returncode == 0, log[-4000:]
    assert "Traceback" not in _without_heartbeat_records(log), log[-4000:]
    counts = re.search(r"^n_seen (\d+) (\d+)$", out.stdout, re.M)
    if counts:  # the examples print the merged summaries' row counts, as their comment says
        said = re.search(r"counted once: (\d+)", code)
        assert said and counts.group(1) == counts.group(2) == said.group(1), out.stdout
