"""Kernels compiled ahead of time (:mod:`sketchsyn.aot`) give the numpy path's results, and a
process whose kernel sets all allow it never imports numba.

The guard's type rules are tested on their own. The rest needs numba's ``pycc`` and a C
compiler (CI has both): the module's fixture builds the modules (about 17 CPU-s, in
processes of their own) into the kernels' ``__pycache__``, where the tests' processes find them.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from sketchsyn import accel, aot

ROOT = Path(__file__).resolve().parents[1]
needs_pycc = pytest.mark.skipif(
    not accel.AVAILABLE or importlib.util.find_spec("numba.pycc") is None,
    reason="numba's ahead-of-time compiler (the fast extra) missing",
)


@pytest.fixture(scope="module", autouse=True)
def _built() -> None:
    """The modules built once, before the tests (about 17 CPU-s on a clean checkout); a
    module-scoped fixture also keeps these tests on one worker (tests/conftest.py), which
    builds them alone."""
    if accel.AVAILABLE and importlib.util.find_spec("numba.pycc") is not None:
        from sketchsyn import aot_build

        for name in aot_build.MODULES:
            aot.load(importlib.import_module(name))


def _run(code: str, **env: str) -> list[str]:
    """``code`` run by a fresh interpreter (this checkout first on the path); its output."""
    full = dict(os.environ, PYTHONPATH=str(ROOT), **env)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=full, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.split()


def test_spec_follows_numbas_types():
    a = np.zeros((4, 3))
    assert aot.spec(a) == ("a", "<f8", 2, "C", "w")
    assert aot.spec(np.asfortranarray(a)) == ("a", "<f8", 2, "F", "w")
    assert aot.spec(a[:, 1]) == ("a", "<f8", 1, "A", "w")
    assert aot.spec(np.zeros(1)[:1]) == ("a", "<f8", 1, "C", "w")
    a.flags.writeable = False
    assert aot.spec(a) == ("a", "<f8", 2, "C", "r")
    assert aot.spec(np.uint64(3)) == ("s", "<u8")
    assert aot.spec(2**63) == ("s", "<u8") and aot.spec(-1) == ("s", "<i8")
    assert aot.spec(np.bool_(True)) == aot.spec(False) == ("s", "|b1")
    assert aot.spec((np.zeros(2, np.int32), 5)) == ("t", (("a", "<i4", 1, "C", "w"), ("s", "<i8")))
    fn = ctypes.CFUNCTYPE(ctypes.c_uint32, ctypes.c_void_p)(lambda p: 0)
    assert aot.spec(fn) == ("f", 32, 1)
    assert aot.spec("text")[0] == "?"


def test_guard_takes_only_the_compiled_types():
    """The form that fits most closely takes the call (an array's own layout before ``A``,
    which takes any); anything else (dtype, dimensions, layout, a number's type, the count of
    arguments, a read-only array where the kernel writes) is handed back."""
    calls = []
    c_form = (lambda x, k: calls.append("C"), [("a", "<i8", 1, "C", "w"), ("s", "<u8")])
    a_form = (lambda x, k: calls.append("A"), [("a", "<i8", 1, "A", "r"), ("s", "<u8")])
    guard = aot.Guard("kernel", [a_form, c_form])  # the closest form first, in any order
    x = np.arange(10)
    frozen = x.copy()
    frozen.flags.writeable = False
    guard(x, np.uint64(1))
    guard(x[::2], np.uint64(1))
    guard(x, np.uint64(1))  # the remembered choice
    guard(frozen, np.uint64(1))  # read-only: only the form compiled for one takes it
    assert calls == ["C", "A", "C", "A"]
    writes = aot.Guard("kernel", [c_form])
    for g, args in [
        (guard, (x.astype(np.int32), np.uint64(1))),
        (guard, (x.reshape(2, 5), np.uint64(1))),
        (guard, (x, 1)),  # an int is numba's int64, not uint64
        (guard, (x, np.uint64(1), 0)),
        (writes, (frozen, np.uint64(1))),  # a kernel compiled to write: not a read-only array
    ]:
        with pytest.raises(aot.Mismatch, match="kernel"):
            g(*args)
    assert calls == ["C", "A", "C", "A"]


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    from sketchsyn.synth.privhp import kernels

    monkeypatch.setenv("SKETCHSYN_CACHE_DIR", str(tmp_path))
    assert aot.cache_dir(kernels) == tmp_path
    so, index, name = aot._paths(kernels)
    assert so.parent == tmp_path and so.name.startswith(name + ".") and so.suffix == ".so"
    monkeypatch.delenv("SKETCHSYN_CACHE_DIR")
    assert aot.cache_dir(kernels) == Path(kernels.__file__).parent / "__pycache__"


@needs_pycc
def test_privhp_kernel_tests_pass_ahead_of_time():
    """tests/test_privhp_kernels.py (both paths' states equal, bit for bit) in a process whose
    kernels are compiled ahead of time: its fixture checks that they are, and that no call fell
    back to numba's."""
    full = dict(os.environ, PYTHONPATH=str(ROOT), SKETCHSYN_TEST_KERNELS="aot")
    cmd = [sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider",
           str(ROOT / "tests" / "test_privhp_kernels.py")]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, env=full, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert " passed" in out.stdout and "skipped" not in out.stdout


_FIT = """
import sys
import numpy as np
from sketchsyn import Box, PrivHP, accel
from sketchsyn.synth.privhp import kernels
rng = np.random.default_rng(5)
X = np.concatenate([np.clip(rng.normal(0.3, 0.02, (40_000, 3)), 0, 1), rng.random((40_000, 3))])
make = dict(epsilon=1.0, k=16, width=500, depth=24, sketch="count-sketch", rng=9)
fast, ref = PrivHP(Box.unit(3), **make), PrivHP(Box.unit(3), **make)
ref._lineage = fast._lineage
assert kernels.ready(wait=True)
frozen = X[40_000:].copy()
frozen.flags.writeable = False  # a caller's read-only batch, read in place
for batch in (X, np.asfortranarray(X[:30_000]), frozen):
    fast.update_many(batch)
    with kernels.numpy_only():
        ref.update_many(batch)
same_counts = fast.to_bytes() == ref.to_bytes()
a = fast.release()
with kernels.numpy_only():
    b = ref.release()
same_release = np.array_equal(a.sample(500, rng=1), b.sample(500, rng=1))
print(accel.compiled_by(), same_counts, same_release, "numba" in sys.modules,
      "llvmlite" in sys.modules, len(accel._AOT_MISSES))
"""


@needs_pycc
def test_a_privhp_process_never_imports_numba():
    """Counting (rows and columns), releasing (the noise tables' kernels) and sampling on the
    kernels compiled ahead of time: the numpy path's counts and release, without numba."""
    out = _run(_FIT, SKETCHSYN_KERNELS="eager")
    assert out == ["aot", "True", "True", "False", "False", "0"]


@needs_pycc
def test_the_jit_switch_and_a_failed_build_leave_numbas_kernels(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")  # the cache cannot be made: the build fails
    for env in ({"SKETCHSYN_KERNELS": "jit"}, {"SKETCHSYN_CACHE_DIR": str(blocked / "x")}):
        out = _run(_FIT, **({"SKETCHSYN_KERNELS": "eager"} | env))
        assert out == ["jit", "True", "True", "True", "True", "0"], env


@needs_pycc
def test_a_call_of_other_types_runs_on_numbas_kernels():
    """A call whose argument types were not compiled ahead of time is not passed to the module
    (which would read the arrays as the compiled types): the process switches to numba's
    kernels, which compile it, and the result is the numpy one."""
    code = """
import sys
import numpy as np
from sketchsyn import accel
from sketchsyn.synth.privhp import kernels
assert kernels.ready(wait=True) and accel.compiled_by() == "aot"
codes = np.random.default_rng(0).integers(0, 1000, 5000).astype(np.uint64)
counts = np.zeros(1000, dtype=np.int32)  # the warm-up's counts are int64
kernels.histogram(codes, np.uint64(0), counts)
print(accel.compiled_by(), np.array_equal(counts, np.bincount(codes, minlength=1000)),
      len(accel._AOT_MISSES), "numba" in sys.modules)
"""
    assert _run(code, SKETCHSYN_KERNELS="eager") == ["jit", "True", "1", "True"]


@needs_pycc
def test_noise_kernels_ahead_of_time_give_the_numpy_draws(monkeypatch):
    """The exact noise tables' kernels (lookups, float stage, guide arrays, signs and the
    seeded Laplace loop) compiled ahead of time, bound in place of numba's in this process."""
    from sketchsyn.privacy import exactexp, kernels
    from sketchsyn.privacy.noise import _laplace_core, discrete_laplace, laplace_plan
    from sketchsyn.privacy.rng import as_source

    assert accel.ready(wait=True)
    guards = aot.load(kernels)
    assert set(kernels.KERNELS) >= set(guards) >= {"table_sample", "lap_draw", "table_floors"}
    for name, guard in guards.items():
        monkeypatch.setattr(kernels, name, guard)
    for scale in (Fraction(1, 3), Fraction(100), Fraction(5000)):
        fast = discrete_laplace(scale, 50_000, rng=11)
        with accel.numpy_only():
            np.testing.assert_array_equal(fast, discrete_laplace(scale, 50_000, rng=11))
        t = np.sort(np.random.default_rng(2).integers(0, 2**32, 300).astype(np.uint32))
        built = exactexp.ThresholdTable(t, None)
        with accel.numpy_only():
            np.testing.assert_array_equal(built._guide, exactexp.ThresholdTable(t, None)._guide)
        for kind in ("geometric", "laplace"):
            got = exactexp._fast_thresholds(kind, 1 / scale, 40)
            with accel.numpy_only():
                np.testing.assert_array_equal(got, exactexp._fast_thresholds(kind, 1 / scale, 40))
        for n in (64, 1000):
            ref, src = as_source(n), as_source(n)
            want = _laplace_core(scale, n, ref)
            state, next_u32, _ = src.word_functions()
            words, z = np.empty(4 * n + 64, np.uint32), np.empty(n, np.int64)
            scratch, plan = np.empty((4, n), np.int64), laplace_plan(scale, True)
            got = kernels.lap_draw(next_u32, state, n, plan, 20, words, z, scratch)
            if got >= 0:
                np.testing.assert_array_equal(z, want)
                assert src._raw64.state == ref._raw64.state


def test_a_failed_build_is_not_tried_again(monkeypatch, tmp_path):
    """A build that failed (here: a module that registered no kernels) is remembered for its key:
    the next process does not spend a build on it again."""
    import sketchsyn.errors

    monkeypatch.setenv("SKETCHSYN_CACHE_DIR", str(tmp_path))
    runs = []
    real = subprocess.run

    def counting(*args, **kwargs):
        runs.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(aot.subprocess, "run", counting)
    for _ in range(2):
        with pytest.raises(RuntimeError, match="registered no kernels"):
            aot.load(sketchsyn.errors)
    assert len(runs) == 1
    assert [p.suffix for p in tmp_path.iterdir()] == [".failed"]


@needs_pycc
def test_built_kernels_start_at_the_first_large_batch():
    """Kernels already compiled ahead of time load in milliseconds, so a process starts them at
    its first large batch (not after START_ROWS rows, numba's rule), which waits for them; the
    state is the numpy path's."""
    code = """
import sys
import numpy as np
from sketchsyn import Box, PrivHP, accel
from sketchsyn.synth.privhp import kernels
X = np.random.default_rng(1).random((60_000, 2))
a = PrivHP(Box.unit(2), 1.0, k=8, width=300, depth=20, rng=3)
b = PrivHP(Box.unit(2), 1.0, k=8, width=300, depth=20, rng=3)
b._lineage = a._lineage
a.update_many(X[:1000])  # a small batch starts nothing
small = accel._STARTED
a.update_many(X)
with kernels.numpy_only():
    b.update_many(X[:1000])
    b.update_many(X)
print(small, accel.compiled_by(), a.to_bytes() == b.to_bytes(), "numba" in sys.modules)
"""
    assert _run(code) == ["False", "aot", "True", "False"]


def test_the_key_follows_the_kernels_constants(monkeypatch):
    """The compiled code holds the kernels' module-level constants (some made from other
    modules' values) and is built against numpy's C interface: changing either changes the key,
    so a stale build is never loaded."""
    from sketchsyn.synth.privhp import kernels

    key = aot._key(kernels)
    assert aot._key(kernels) == key
    monkeypatch.setattr(kernels, "_BLOCK", kernels._BLOCK * 2)
    assert aot._key(kernels) != key
    monkeypatch.undo()
    monkeypatch.setattr(kernels, "_S2", ((np.uint64(1), np.uint64(3)),))
    assert aot._key(kernels) != key
    monkeypatch.undo()
    monkeypatch.setattr(np, "__version__", "0.0")  # built against another numpy's C interface
    assert aot._key(kernels) != key


def test_the_build_command_knows_every_set_that_can_be_compiled_ahead():
    import sketchsyn.counters.kernels  # noqa: F401 - every kernel module registered
    import sketchsyn.privacy.oswords  # noqa: F401
    import sketchsyn.synth.privhp.kernels  # noqa: F401
    from sketchsyn import aot_build

    can = {s.namespace["__name__"] for s in accel._SETS if s.aot}
    assert can == set(aot_build.MODULES)
    with pytest.raises(SystemExit, match="usage"):
        aot_build.main(["one"])
