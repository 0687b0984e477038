"""Access logs end to end: fit an access log, sample synthetic addresses, ``evaluate`` them
(W1 on the 32-bit prefix tree) and ``plot`` them (the IPv4 space on a Hilbert curve), through
subprocess; and the pieces of the picture."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cli_run import run  # tests/ is on sys.path (no __init__)

from sketchsyn.domains import BitDomain
from sketchsyn.errors import ParameterError
from sketchsyn.evaluate.ipv4plot import hilbert_image, hilbert_xy, prefix_counts
from sketchsyn.evaluate.metrics import wasserstein1

ROOT = Path(__file__).resolve().parents[1]
BUSY = [(10, 1), (172, 16), (192, 168)]


def dotted(keys: np.ndarray) -> list[str]:
    return [f"{k >> 24}.{(k >> 16) & 255}.{(k >> 8) & 255}.{k & 255}" for k in keys.tolist()]


@pytest.fixture(scope="module")
def log_and_model(tmp_path_factory) -> tuple[Path, Path]:
    """8,000 requests: 80% from three busy /16 networks, the rest spread over 1.0.0.0–223/8."""
    tmp = tmp_path_factory.mktemp("log")
    rng = np.random.default_rng(0)
    n = 8000
    busy = np.array([(a << 24) | (b << 16) for a, b in BUSY])
    keys = busy[rng.integers(0, 3, n)] + rng.integers(0, 1 << 16, n)
    keys[: n // 5] = rng.integers(1 << 24, 224 << 24, n // 5)
    log = tmp / "access.log"
    log.write_text(
        "".join(
            f'{ip} - - [10/Oct/2000:13:55:36 -0700] "GET /x HTTP/1.1" 200 512\n'
            for ip in dotted(keys)
        )
    )
    model = tmp / "ip.model"
    proc = run("fit", log, "--epsilon", "1", "--depth", "20", "--noise-seed", "2", "-o", model)
    assert proc.returncode == 0, proc.err
    return log, model


def _figures(out: str) -> tuple[float, float, dict[str, tuple[float, float]]]:
    w1 = float(out.split("W1(data, synthetic) = ")[1].split()[0])
    floor = float(out.split("data-vs-data floor  = ")[1].split()[0])
    shares = {}
    for line in out.split("share in SYNTHETIC")[1].splitlines()[1:]:
        parts = line.split()
        shares[parts[0]] = (float(parts[2].rstrip("%")), float(parts[4].rstrip("%")))
    return w1, floor, shares


def test_evaluate_an_access_log_release(log_and_model, tmp_path):
    log, model = log_and_model
    syn = tmp_path / "syn.csv"
    assert run("sample", model, "-n", "8000", "-o", syn, "--seed", "1").returncode == 0
    ev = run("evaluate", log, syn, "--max-points", "4000")
    assert ev.returncode == 0, ev.err
    assert "32-bit prefix tree" in ev.out and "method: tree" in ev.out
    w1, floor, shares = _figures(ev.out)
    assert 0 < floor < 0.1 and 0 < w1 < 0.1, ev.out
    for a, b in BUSY:  # each busy network: about 26.7% of the data, and a large synthetic share
        real, synth = shares[f"{a}.{b}.0.0/16"]
        assert abs(real - 80 / 3) < 2.5 and real / 2 < synth < real + 4, ev.out
    # The metric tells a useless synthetic file apart: uniform addresses are far.
    rng = np.random.default_rng(5)
    bad = tmp_path / "uniform.csv"
    bad.write_text("ip\n" + "\n".join(dotted(rng.integers(0, 1 << 32, 8000))) + "\n")
    far = run("evaluate", log, bad, "--max-points", "4000")
    assert far.returncode == 0, far.err
    assert _figures(far.out)[0] > 3 * w1, (far.out, ev.out)
    # Exact W1 on the line |x - y| / 2**32 as well; JSON lines synthetic, the format by extension.
    jl = tmp_path / "syn.jsonl"
    assert run("sample", model, "-n", "3000", "-o", jl, "--seed", "1").returncode == 0
    assert json.loads(jl.read_text().splitlines()[0]).keys() == {"ip"}
    exact = run("evaluate", log, jl, "--method", "exact", "--max-points", "3000")
    assert exact.returncode == 0 and "method: exact" in exact.out, exact.err
    assert 0 < _figures(exact.out)[0] < 0.1


def test_evaluate_access_log_refusals(log_and_model, tmp_path):
    log, _ = log_and_model
    syn = tmp_path / "s.csv"
    syn.write_text("ip\n10.1.0.1\n10.1.0.2\nnot-an-ip\n10.1.0.3\n")
    bounds = run("evaluate", log, syn, "--bounds", "0:1")
    assert bounds.returncode == 2 and "--bounds is not used with an access log" in bounds.err
    two = run("evaluate", log, syn, "--columns", "a,b")
    assert two.returncode == 2 and "an access log has one column" in two.err
    bad = run("evaluate", log, syn)
    assert bad.returncode == 2 and f"{syn} line 4" in bad.err and "--on-bad skip" in bad.err
    skip = run("evaluate", log, syn, "--on-bad", "skip")
    assert skip.returncode == 0, skip.err
    assert "skipped 1 bad line(s)" in skip.err
    other = tmp_path / "o.csv"
    other.write_text("when,addr\n1,10.1.0.1\n2,10.1.0.9\n")
    named = run("evaluate", log, other, "--columns", "addr")
    assert named.returncode == 0, named.err
    unnamed = run("evaluate", log, other)
    assert unnamed.returncode == 2 and "name it with --columns" in unnamed.err


def test_plot_an_access_log_release(log_and_model, tmp_path):
    pytest.importorskip("matplotlib")
    log, model = log_and_model
    png = tmp_path / "ip.png"
    proc = run("plot", log, model, "-o", png, "--dpi", "40")
    assert proc.returncode == 0, proc.err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # DATA may also be a CSV of addresses (e.g. another synthetic file): by its extension.
    syn = tmp_path / "syn.csv"
    assert run("sample", model, "-n", "500", "-o", syn, "--seed", "2").returncode == 0
    again = run("plot", syn, model, "-o", tmp_path / "b.png", "--dpi", "30")
    assert again.returncode == 0 and (tmp_path / "b.png").stat().st_size > 0, again.err


# ------------------------------------------------------------------------------ the pieces
def test_hilbert_layout():
    x, y = hilbert_xy(8, np.arange(1 << 16))
    assert len(set(zip(x.tolist(), y.tolist(), strict=True))) == 1 << 16  # a bijection
    assert (np.abs(np.diff(x)) + np.abs(np.diff(y))).max() == 1  # neighbours stay neighbours
    bx, by = hilbert_xy(4, np.arange(256))
    for a in (0, 10, 127, 192, 255):  # each /8 fills its aligned 16 x 16 square
        xs, ys = x[a * 256 : (a + 1) * 256], y[a * 256 : (a + 1) * 256]
        assert set((xs // 16).tolist()) == {bx[a]} and set((ys // 16).tolist()) == {by[a]}
    with pytest.raises(ParameterError, match="order"):
        hilbert_xy(17, [0])
    with pytest.raises(ParameterError, match="index"):
        hilbert_xy(2, [16])


def test_prefix_counts_and_image():
    keys = np.array([(192 << 24) | (168 << 16) | 7, (192 << 24) | (168 << 16), 5], dtype=np.uint64)
    counts = prefix_counts(keys)
    assert counts[(192 << 8) | 168] == 2 and counts[0] == 1 and counts.sum() == 3
    assert prefix_counts(keys, counts) is counts and counts.sum() == 6
    img = hilbert_image(counts)
    x, y = hilbert_xy(8, [(192 << 8) | 168])
    assert img[y[0], x[0]] == 4 and img.sum() == 6
    with pytest.raises(ParameterError, match="IPv4 keys"):
        prefix_counts(np.array([-1]))
    with pytest.raises(ParameterError, match="65536"):
        hilbert_image(np.zeros(10))


def test_tree_w1_on_the_ipv4_prefix_tree():
    dom = BitDomain.ipv4()
    rng = np.random.default_rng(1)
    x = rng.integers(10 << 24, 11 << 24, 500).astype(np.float64)
    same = wasserstein1(x, x, dom, method="tree", depth=32).value
    assert same == pytest.approx(2.0**-32)  # only the residual inside a /32
    near = wasserstein1(x, x + 1, dom, method="tree", depth=32).value
    far = wasserstein1(x, x + (100 << 24), dom, method="tree", depth=32).value
    assert same < near < far
