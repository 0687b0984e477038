"""The compiled kernels (:mod:`sketchsyn.kernels`): what a wrong call does, what they never do
at run time, and that the numpy path stands alone when the extension is absent.

* Every entry point checks its arguments: a wrong dtype, layout or shape, or an index its loop
  would take outside an array, raises ``ValueError``, ``TypeError`` or ``IndexError``; nothing
  is read or written out of bounds.
* A fresh process, in an empty working directory that holds a planted ``numba.py`` and with an
  empty ``SKETCHSYN_CACHE_DIR``: PrivHP ingests 2**22 rows (``benchmarks/bench_kernels.py
  --runtime-check`` runs the issue's 2**25) and the CLI fits a file. Neither numba nor llvmlite
  is imported, nothing runs from the working directory, no process is started, and no file is
  opened for writing but the fit's model.
* With the extension hidden (its modules cannot be imported), sketchsyn says so without a
  warning and the equality tests pass again on the numpy path, against the recorded states.
"""

from __future__ import annotations

import doctest
import os
import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from sketchsyn import kernels

ROOT = Path(__file__).resolve().parent.parent
needs_ext = pytest.mark.skipif(not kernels.INSTALLED, reason=kernels.why())


@needs_ext
@pytest.mark.parametrize("name", ["words", "noise", "privhp", "counters", "partition", "text"])
def test_the_extension_modules_doctests(name):
    """The examples in the extension modules' docstrings (pytest collects only ``.py``)."""
    mod = getattr(kernels, name)
    result = doctest.testmod(mod, extraglobs={"np": np}, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


@needs_ext
def test_privhp_kernels_refuse_wrong_calls():
    p = kernels.privhp
    codes = np.arange(100, dtype=np.uint64)
    with pytest.raises(ValueError, match="past counts"):
        p.histogram(codes, 0, np.zeros(10, np.int64))  # codes ≥ 10 would write past the end
    with pytest.raises(ValueError, match="dtype mismatch"):
        p.histogram(codes.astype(np.int64), 0, np.zeros(100, np.int64))
    with pytest.raises(ValueError, match="contiguous"):
        p.histogram(codes[::2], 0, np.zeros(100, np.int64))
    with pytest.raises(TypeError):
        p.histogram(None, 0, np.zeros(100, np.int64))
    with pytest.raises(ValueError, match="more non-empty cells"):
        keys, weights = np.empty(3, np.uint32), np.empty(3, np.int64)
        p.nonzero(np.ones(10, np.int64), keys, weights)
    with pytest.raises(ValueError, match="past level"):
        p.tree_counts(
            np.array([9], np.uint32), np.ones(1, np.int64), 1, 0, 2, np.empty(7, np.int64)
        )
    with pytest.raises(ValueError, match="entries for level"):
        p.tree_counts(
            np.array([0], np.uint32), np.ones(1, np.int64), 1, 0, 2, np.empty(6, np.int64)
        )
    with pytest.raises(ValueError, match="not within"):
        p.tree_counts(
            np.array([0], np.uint32), np.ones(1, np.int64), 5, 0, 2, np.empty(7, np.int64)
        )
    seeds, none = np.ones(3, np.uint32), np.empty(0, np.uint32)
    with pytest.raises(ValueError, match="fewer than the width"):
        p.hash_items(codes, 0, False, seeds, none, 64, 0, np.empty((3, 32), np.int64))
    with pytest.raises(ValueError, match="reaches past width"):
        p.hash_items(codes, 0, False, seeds, none, 64, 20, np.empty((3, 64), np.int64))
    with pytest.raises(ValueError, match="entries for"):
        p.hash_items(codes, 0, False, seeds, none, 64, 26, np.empty((2, 64), np.int64))
    out = np.empty((2, 3, 64), np.int64)
    keys, weights = np.arange(4, dtype=np.uint32), np.ones(4, np.int64)
    with pytest.raises(ValueError, match="levels"):
        p.hash_levels(keys, weights, 4, 3, np.ones((2, 3), np.uint32), np.empty((2, 0), np.uint32),
                      64, 26, out)  # fmt: skip
    with pytest.raises(ValueError, match="shape of seeds"):
        p.hash_levels(keys, weights, 4, 2, np.ones((2, 3), np.uint32), np.ones((2, 2), np.uint32),
                      64, 26, out)  # fmt: skip
    with pytest.raises(ValueError, match="entries for"):
        p.quantise(np.zeros(5), 0.0, 1.0, 1.0, 0.5, 2.0, 1.0, np.empty(4, np.int32))
    with pytest.raises(ValueError, match="d in 1..3"):
        p.morton(np.zeros((4, 3), np.int32), np.zeros(4, np.uint64), np.empty(3, np.uint64))
    with pytest.raises(ValueError):
        p.morton(np.zeros((2, 3), np.float64), np.zeros(2, np.uint64), np.empty(3, np.uint64))


@needs_ext
def test_noise_kernels_refuse_wrong_calls():
    from sketchsyn.privacy.noise import laplace_plan

    n = kernels.noise
    guide, padded = np.zeros(4097, np.int32), np.array([5, 2**32], np.int64)
    words, out = np.zeros(3, np.uint32), np.empty(3, np.int64)
    assert n.table_sample(guide, padded, words, 20, out) == 0
    bad = guide.copy()
    bad[7] = 2  # past padded's last index: a lookup would read out of bounds
    assert n.table_sample(bad, padded, words, 20, out) == 0  # (no word's top bits are 7)
    with pytest.raises(ValueError, match="outside padded"):
        n.table_sample(bad, padded, np.array([0, 7 << 20, 0], np.uint32), 20, out)
    bad[8] = -1
    with pytest.raises(ValueError, match="outside padded"):
        n.table_sample(bad, padded, np.array([8 << 20], np.uint32), 20, out[:1])
    with pytest.raises(ValueError, match="end with 2"):
        n.table_sample(guide, np.array([5, 6], np.int64), words, 20, out)
    with pytest.raises(ValueError, match="fewer than"):
        n.table_sample(guide[:100], padded, words, 20, out)  # the top bits index past it
    with pytest.raises(ValueError, match="entries for"):
        n.table_sample(guide, padded, words, 20, out[:2])
    with pytest.raises(ValueError, match="guide needs"):
        n.table_guide(np.zeros(2, np.uint32), 20, np.empty(10, np.int32), np.empty(3, np.int64))
    with pytest.raises(ValueError, match="kind"):
        n.table_floors(7, 0.5, 4, 1e-9, 1e-9, 32.0, np.empty(4, np.int64))
    plan = laplace_plan(Fraction(3), True)
    z, scratch = np.empty(8, np.int64), np.empty((4, 8), np.int64)
    bits = np.random.PCG64(1)
    assert n.lap_draw(bits, 8, plan, 20, np.empty(16, np.uint32), z, scratch) >= 0
    with pytest.raises(ValueError, match="does not fit"):
        n.lap_draw(bits, 9, plan, 20, np.empty(16, np.uint32), z, scratch)
    with pytest.raises(TypeError, match="word source"):
        n.lap_draw(object(), 8, plan, 20, np.empty(16, np.uint32), z, scratch)
    with pytest.raises(TypeError, match="word source"):  # a generator, not its bit generator
        n.lap_draw(np.random.default_rng(1), 8, plan, 20, np.empty(16, np.uint32), z, scratch)
    with pytest.raises(TypeError, match="tuple of 9"):
        n.lap_draw(bits, 8, plan[:8], 20, np.empty(16, np.uint32), z, scratch)
    broken = (plan[0], plan[1][:-1], *plan[2:])
    with pytest.raises(ValueError, match="end with 2"):
        n.lap_draw(bits, 8, broken, 20, np.empty(16, np.uint32), z, scratch)
    past = np.full_like(plan[0], plan[1].size)  # every guide entry past the thresholds
    with pytest.raises(ValueError, match="outside its thresholds"):
        n.lap_draw(bits, 8, (past, *plan[1:]), 20, np.empty(16, np.uint32), z, scratch)
    with pytest.raises(ValueError, match="4 rows"):
        n.lap_draw(bits, 8, plan, 20, np.empty(16, np.uint32), z, scratch[:3])


@needs_ext
def test_counter_kernels_refuse_wrong_calls():
    c = kernels.counters
    i = np.int64
    cells, times = np.array([0, 5]), np.array([2, 3])  # cell 5 of a bank of 2 counters
    starts, gap, row = np.empty(2, i), np.empty(2, i), np.empty(2, i)
    with pytest.raises(IndexError):
        c.layout(cells, times, np.zeros(2, i), starts, gap, row)
    with pytest.raises(ValueError, match="entries"):
        c.layout(cells, times[:1], np.zeros(2, i), starts, gap, row)
    with pytest.raises(ValueError, match="dtype mismatch"):
        c.layout(cells.astype(np.int32), times, np.zeros(2, i), starts, gap, row)
    with pytest.raises(IndexError):
        c.by_cell(cells, times, np.ones(2, i), np.zeros(3, i), *np.empty((3, 2), i))
    with pytest.raises(IndexError):
        c.tally(cells, np.full(2, -1, i), np.zeros(2, i), 3)
    with pytest.raises(ValueError, match="levels"):
        c.tally(cells, np.full(2, -1, i), np.zeros(2, i), 99)


def _fresh(
    code: str, cwd: Path, env_extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the installed sketchsyn
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env, capture_output=True,
        text=True, timeout=600,
    )  # fmt: skip


_RUNTIME_CHECK = """
import os, sys
sys.path.insert(0, os.getcwd())  # as `python -m` and `python script.py` in cwd would do
events = []
writes = []
out_dir = os.environ["OUT_DIR"]


def audit(event, args):
    if event in ("subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.exec",
                 "os.system", "os.spawn"):
        events.append((event, str(args)[:200]))
    if event == "open" and args[0] is not None and not isinstance(args[0], int):
        mode, flags = args[1] or "", args[2] or 0
        if any(c in mode for c in "wax+") or flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            path = os.path.realpath(os.fsdecode(args[0]))
            if not path.startswith(out_dir) and not path.startswith("/dev/"):
                writes.append(path)


sys.addaudithook(audit)
import numpy as np
from sketchsyn import Box, PrivHP, kernels
from sketchsyn.cli import main
rows = int(os.environ["ROWS"])
php = PrivHP(Box.unit(2), 1.0, k=8, width=1024, depth=24, rng=1)
rng = np.random.default_rng(0)
for _ in range(rows // 2**20):
    php.update_many(rng.random((2**20, 2)))
assert php.n_seen == rows
status = main(["fit", os.environ["DATA"], "--columns", "x,y", "--bounds", "0:1,0:1",
               "--epsilon", "1", "--expected-n", "100000", "-o",
               os.path.join(out_dir, "m.model"), "--quiet"])
print("status", status)
print("active", kernels.active())
print("numba", "numba" in sys.modules, "llvmlite" in sys.modules)
print("planted", "PLANTED" in os.environ or os.path.exists(os.path.join(out_dir, "ran")))
print("events", events)
print("writes", writes)
"""


def _snapshot(folder: Path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime for p in folder.rglob("*") if "__pycache__" not in p.parts}


def test_nothing_compiles_starts_or_writes_at_run_time(tmp_path):
    """The issue's check, scaled to 2**22 rows (``benchmarks/bench_kernels.py --runtime-check``
    runs it with 2**25): in a fresh process whose working directory holds only a planted
    ``numba.py`` (and ``llvmlite.py``), with an empty ``SKETCHSYN_CACHE_DIR``, PrivHP ingests
    the rows and the CLI fits a CSV file. Neither is imported, nothing runs from the working
    directory, no process is started (the audit events of every way to start one), nothing is
    opened for writing outside the output folder, and the package and the cache are as they
    were."""
    import sketchsyn

    cwd, cache, out = tmp_path / "cwd", tmp_path / "cache", tmp_path / "out"
    for d in (cwd, cache, out):
        d.mkdir()
    planted = f"open({str(out / 'ran')!r}, 'w').write('x')\nraise SystemExit('planted')\n"
    (cwd / "numba.py").write_text(planted)
    (cwd / "llvmlite.py").write_text(planted)
    data = tmp_path / "data.csv"
    xy = np.random.default_rng(1).random((20_000, 2))
    np.savetxt(data, xy, fmt="%.6f", delimiter=",", header="x,y", comments="")
    package = Path(sketchsyn.__file__).parent
    before = _snapshot(package)
    env = {"SKETCHSYN_CACHE_DIR": str(cache), "OUT_DIR": str(out), "DATA": str(data),
           "ROWS": str(2**22), "NUMBA_CACHE_DIR": str(cache),
           "PYTHONDONTWRITEBYTECODE": "1"}  # (the interpreter's own caches aside)  # fmt: skip
    got = _fresh(_RUNTIME_CHECK, cwd, env)
    assert got.returncode == 0, got.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in got.stdout.strip().splitlines())
    assert lines["status"] == "0"
    assert lines["numba"] == "False False"
    assert lines["planted"] == "False"
    assert lines["events"] == "[]"
    assert lines["writes"] == "[]"
    assert sorted(os.listdir(cwd)) == ["llvmlite.py", "numba.py"]
    assert os.listdir(cache) == []
    assert sorted(os.listdir(out)) == ["m.model"]
    assert _snapshot(package) == before
    assert lines["active"] == kernels.active()


_HIDE = """
import sys
import importlib.abc


class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.startswith("sketchsyn.kernels._"):
            raise ImportError(f"{name} hidden for the test")
        return None


sys.meta_path.insert(0, Hide())
"""


def test_without_the_extension_the_numpy_path_runs_quietly(tmp_path):
    """Hidden extension: ``active`` says ``numpy`` and why, nothing is warned or printed, and
    the CLI's ``--version`` names the path."""
    code = _HIDE + textwrap.dedent("""
        import warnings
        warnings.simplefilter("error")
        import numpy as np
        from sketchsyn import Box, PrivHP, kernels
        php = PrivHP(Box.unit(2), 1.0, k=8, width=1024, depth=24, rng=1)
        php.update_many(np.random.default_rng(0).random((100_000, 2)))
        from sketchsyn.cli.parser import _parser
        try:
            _parser().parse_args(["--version"])
        except SystemExit:
            pass
        print(kernels.active(), kernels.enabled(), "hidden for the test" in kernels.why())
    """)
    got = _fresh(code, tmp_path)
    assert got.returncode == 0, got.stderr
    assert got.stderr == ""
    assert got.stdout.splitlines() == ["sketchsyn 0.1.0 (kernels: numpy)", "numpy False True"]


@needs_ext
def test_the_equality_tests_pass_with_the_extension_hidden(tmp_path):
    """tests/test_privhp_kernels.py and the numpy paths of tests/test_sparsebank.py's law
    tests in a process that cannot import the extension: the comparisons between the paths are
    skipped, the recorded states are met by the numpy path alone."""
    tests = ROOT / "tests"
    code = _HIDE + textwrap.dedent(f"""
        import pytest
        from sketchsyn import kernels
        assert kernels.active() == "numpy"
        sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-o", "addopts=", "-n", "0",
                              "-p", "no:randomly", "--rootdir", {str(ROOT)!r},
                              {str(tests / "test_privhp_kernels.py")!r},
                              {str(tests / "test_counter_kernels.py")!r},
                              {str(tests / "test_update_speedpath.py")!r}]))
    """)
    got = _fresh(code, tmp_path, {"PYTHONPATH": str(tests)})
    assert got.returncode == 0, got.stdout[-3000:] + got.stderr[-3000:]
    tail = got.stdout.strip().splitlines()[-1]
    assert "passed" in tail and "skipped" in tail, tail
