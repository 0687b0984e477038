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
            lines.append('10.1.3 - - [22/Nov/2026:10:00:0')  # a torn line, as a crash leaves
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
