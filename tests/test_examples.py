"""The example scripts run on real-world input: a server's log with junk and IPv6 lines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ip_log_example_reads_a_real_log_with_junk_lines(tmp_path) -> None:
    lines = []
    for i in range(3000):
        lines.append(
            f'10.1.{i % 7}.{i % 250} - - [22/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 5'
        )
        if i % 500 == 0:
            lines.append('2001:db8::1 - - [22/Nov/2026:10:00:01 +0000] "GET / HTTP/1.1" 200 5')
            lines.append("10.1.3 - - [22/Nov/2026:10:00:0")  # a torn line, as a crash leaves
            lines.append("")  # and blank lines
    log = tmp_path / "access.log"
    log.write_text("\n".join(lines) + "\n")
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "ip_log.py"), str(log)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "3,000 requests" in out.stdout and "(6 IPv6 and 6 junk lines skipped)" in out.stdout
    assert "10.1." in out.stdout  # the busy network is found
    # Issue 50, item 16: "`examples/ip_log.py` prints '~2,088 requests' for a /24 that has 247:
    # print counts with their noise scale."
    counts = [line for line in out.stdout.splitlines() if line.startswith("  10.")]
    assert counts and all("(noise scale " in line and "~" not in line for line in counts), counts


def test_the_log_reader_storys_code_reads_ipv6_lines(tmp_path, monkeypatch) -> None:
    """Issue 50, item 16: "The log-reader story's `client_ips` raises a ValueError on the first
    IPv6 line, where the story says InputError." The story's code runs on a log with IPv6 and
    gives InputError, naming the line, for a torn one."""
    import re

    from sketchsyn.errors import InputError

    page = (ROOT / "docs" / "stories" / "log-reader.md").read_text()
    code = re.findall(r"```python\n(.*?)```", page, re.S)[0]
    line = '{} - - [22/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 5\n'
    log = [line.format(f"10.1.{i % 7}.{i % 250}") for i in range(500)]
    log.insert(100, line.format("2001:db8::1"))
    (tmp_path / "access.log").write_text("".join(log))
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "log-reader.md", "exec"), {})
    (tmp_path / "access.log").write_text("".join(log) + "10.1.3 - - [22/Nov/2026:10:00:0\n")
    with pytest.raises(InputError, match="access.log line 502"):
        exec(compile(code, "log-reader.md", "exec"), {})


def test_ipv4_map_colour_scale_and_labels_stay_readable() -> None:
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sketchsyn.evaluate.ipv4plot import DECADES, draw_ipv4_map

    shares = np.zeros(1 << 16)
    shares[(10 << 8) | 1] = 0.9
    shares[(11 << 8) | 2] = 1e-24  # one near-empty cell of a release
    fig, ax = plt.subplots()
    art = draw_ipv4_map(ax, shares, "t", vmin=1e-24, vmax=0.9)
    assert art.norm.vmin == pytest.approx(0.9 * 10.0**-DECADES)
    labels = [t for t in ax.texts if t.get_text() == "10"]
    assert labels and labels[0].get_color() == "white" and labels[0].get_path_effects()
    plt.close(fig)
