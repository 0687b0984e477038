"""Kernels compiled ahead of time: the ``fast`` extra without numba in the process.

numba's just-in-time kernels (:mod:`sketchsyn.accel`) cost a process a fixed amount of memory
whatever the job: the import of numba and LLVM, and LLVM's loading of the cached machine code
(``benchmarks/bench_cli.py`` prints ``sketchsyn fit``'s peak with and without them). A kernel
set that takes only arrays, numbers, tuples of them and C function pointers (PrivHP's ingest,
the exact noise tables) can instead be compiled once into an ordinary extension module by
numba's ahead-of-time compiler (``numba.pycc``, which needs a C compiler), in a separate
process; later processes import that module (under 1 MB) and never import numba. The module is
built from the same Python source as the just-in-time kernels, for this machine's CPU, and kept
in a cache keyed by everything it depends on (the kernels' source and module-level constants,
this module's source, numba's, numpy's and Python's versions, the CPU): a changed key builds
anew.

The extension module does not check its arguments' types (a wrong dtype would be read as the
declared one), so every call goes through :class:`Guard`, which passes it on only when the
arguments have exactly the types numba would have compiled for (those of the kernels'
warm-up calls); any other call is handed back (:class:`Mismatch`) and the caller runs the
just-in-time kernels instead, so a result never depends on which compilation ran.

The cache is ``$SKETCHSYN_CACHE_DIR`` when set, else the kernels' ``__pycache__`` folder when
it is writable (as numba's own cache), else ``~/.cache/sketchsyn``. A module in it is loaded
as code: keep the folder writable only by its owner, as for ``.pyc`` files.

>>> guard = Guard("demo", [(len, [("a", "<f8", 1, "C", "w")])])
>>> import numpy as np
>>> guard(np.zeros(3))
3
>>> try:
...     guard(np.zeros(3, dtype=np.float32))
... except Mismatch:
...     print("handed back")
handed back
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib
import importlib.machinery
import importlib.util
import json
import os
import platform
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "BUILD_TIMEOUT",
    "Guard",
    "Mismatch",
    "address",
    "build",
    "built",
    "cache_dir",
    "load",
    "spec",
]

#: Seconds a build (a process of its own) may take before it is given up.
BUILD_TIMEOUT = 600.0
_CFUNC = ctypes._CFuncPtr  # the base of every ctypes function pointer type


class Mismatch(TypeError):
    """A call whose argument types were not compiled ahead of time."""


def address(fn: Any) -> int:
    """The machine address of a ctypes function (``fn``): how the compiled modules read a C
    function pointer argument (numba's own reader of them would import numba).

    >>> address(ctypes.CFUNCTYPE(ctypes.c_int)(lambda: 1)) > 0
    True
    """
    return ctypes.cast(fn, ctypes.c_void_p).value or 0


def spec(value: Any) -> tuple[Any, ...]:
    """The type numba gives ``value`` as an argument, in a plain form: ``("a", dtype, ndim,
    layout, access)`` for an array (layout ``C``, ``F`` or ``A``; access ``w`` writeable or ``r``
    read-only), ``("s", dtype)`` for a number,
    ``("t", specs)`` for a tuple, ``("f", bits, arity)`` for a C function pointer (the width
    of its result, its number of arguments).

    >>> spec(np.zeros((2, 3), order="F")), spec(7), spec(True)
    (('a', '<f8', 2, 'F', 'w'), ('s', '<i8'), ('s', '|b1'))
    """
    if isinstance(value, np.ndarray):
        flags = value.flags
        layout = "C" if flags.c_contiguous else "F" if flags.f_contiguous else "A"
        return ("a", value.dtype.str, value.ndim, layout, "w" if flags.writeable else "r")
    if isinstance(value, (bool, np.bool_)):
        return ("s", "|b1")
    if isinstance(value, int):
        return ("s", "<i8" if -(2**63) <= value < 2**63 else "<u8")
    if isinstance(value, float):
        return ("s", "<f8")
    if isinstance(value, np.generic):
        return ("s", value.dtype.str)
    if isinstance(value, tuple):
        return ("t", tuple(spec(v) for v in value))
    if isinstance(value, _CFUNC):
        result = value.restype
        return ("f", 8 * ctypes.sizeof(result) if result else 0, len(value.argtypes or ()))
    return ("?", type(value).__name__)


def _fits(want: Any, got: tuple[Any, ...]) -> bool:
    """Whether an argument of type ``got`` may be passed where ``want`` was compiled (``A``
    takes any layout; a read-only array only where the kernel was compiled for one, as numba
    would: a kernel that writes to an argument is compiled for a writeable one)."""
    if want[0] == "a" and got[0] == "a":
        return (
            tuple(want[1:3]) == got[1:3] and want[3] in ("A", got[3]) and want[4] in ("r", got[4])
        )
    if want[0] == "t" and got[0] == "t":
        return len(want[1]) == len(got[1]) and all(map(_fits, want[1], got[1]))
    return tuple(want) == got


#: What a :class:`Guard` does with a call no form takes: ``otherwise(name, why, args)``.
Otherwise = Callable[[str, str, tuple[Any, ...]], Any]


class Guard:
    """A kernel's compiled forms (``forms``: ``(function, argument specs)`` pairs), called
    with the one the call's argument types fit most closely (an array's own layout before a
    form for any layout, as numba chooses). When none fits: ``otherwise(name, why, args)``'s
    result, or :class:`Mismatch` without it (see :func:`spec`)."""

    def __init__(
        self,
        name: str,
        forms: Sequence[tuple[Callable[..., Any], Sequence[Any]]],
        otherwise: Otherwise | None = None,
    ):
        self.__name__ = name
        self._forms = [(fn, [_as_tuple(s) for s in specs]) for fn, specs in forms]
        self._known: dict[tuple[Any, ...], Callable[..., Any]] = {}
        self._otherwise = otherwise

    def __call__(self, *args: Any) -> Any:
        got = tuple(map(spec, args))
        fn = self._known.get(got)
        if fn is None:
            fits = [
                (sum(map(_loose, specs, got)), i)  # numba's choice: the fewest loose fits
                for i, (_, specs) in enumerate(self._forms)
                if len(specs) == len(got) and all(map(_fits, specs, got))
            ]
            if not fits:
                why = f"{self.__name__}: no compiled form takes {got}"
                if self._otherwise is not None:
                    return self._otherwise(self.__name__, why, args)
                raise Mismatch(why)
            fn = self._known[got] = self._forms[min(fits)[1]][0]
        return fn(*args)


def _loose(want: Any, got: tuple[Any, ...]) -> int:
    """How loosely ``got`` fits ``want`` (0: exactly): an array of a known layout taken by a
    form compiled for any (``A``, slower: its loops are not vectorised) or a writeable one by a
    form compiled for a read-only one."""
    if want[0] == "a" and got[0] == "a":
        return int(want[3] != got[3]) + int(want[4] != got[4])
    if want[0] == "t" and got[0] == "t":
        return sum(map(_loose, want[1], got[1]))
    return 0


def _as_tuple(s: Any) -> Any:
    """A spec read back from JSON (lists) as tuples."""
    return tuple(_as_tuple(x) for x in s) if isinstance(s, list) else s


def cache_dir(module: Any) -> Path:
    """Where ``module``'s compiled kernels are kept (see the module's docstring)."""
    env = os.environ.get("SKETCHSYN_CACHE_DIR")
    if env:
        return Path(env)
    here = Path(module.__file__).parent / "__pycache__"
    try:
        here.mkdir(exist_ok=True)
        if os.access(here, os.W_OK):
            return here
    except OSError:
        pass
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "sketchsyn"


def _cpu() -> str:
    """What identifies this machine's CPU for the compiled code (its model and instruction
    sets on Linux)."""
    text = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(("model name", "flags", "Features", "CPU part")):
                    text += line
                if line.strip() == "":
                    break  # the first processor is enough
    except OSError:
        pass
    return platform.machine() + platform.processor() + text


def _constants(module: Any) -> bytes:
    """``module``'s data (numbers, strings, tuples, arrays at module level): the kernels read
    them as compile-time constants, and some come from other modules (a change there changes
    the compiled code without changing the kernels' source)."""
    parts = []
    for name, value in sorted(vars(module).items()):
        if name.startswith("__"):
            continue
        if isinstance(value, np.ndarray):
            parts.append(f"{name}={value.dtype}{value.shape}{value.tobytes().hex()}")
        elif isinstance(value, (int, float, str, tuple, np.generic)):
            parts.append(f"{name}={value!r}")
    return "\n".join(parts).encode()


def _key(module: Any) -> str:
    """The cache key of ``module``'s compiled kernels."""
    from importlib.metadata import version

    h = hashlib.sha256()
    for part in (
        Path(module.__file__).read_bytes(),
        _constants(module),
        Path(__file__).read_bytes(),
        version("numba").encode(),
        np.__version__.encode(),  # the module is built against numpy's C interface
        sys.version.encode(),
        str(sysconfig.get_config_var("EXT_SUFFIX")).encode(),
        _cpu().encode(),
    ):
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()[:20]


def _paths(module: Any) -> tuple[Path, Path, str]:
    """The extension module's file, its JSON index of forms, and its import name."""
    name = module.__name__.replace(".", "_") + "_aot"
    stem = f"{name}.{_key(module)}"
    folder = cache_dir(module)
    return folder / f"{stem}.so", folder / f"{stem}.json", name


def built(module: Any) -> bool:
    """Whether ``module``'s kernels are in the cache, compiled ahead of time for this key.

    >>> from sketchsyn.synth.privhp import kernels
    >>> built(kernels) in (True, False)
    True
    """
    so, index, _ = _paths(module)
    return so.exists() and index.exists()


def load(module: Any, otherwise: Otherwise | None = None) -> dict[str, Guard]:
    """``module``'s kernels compiled ahead of time, each behind its :class:`Guard` (with
    ``otherwise`` for the calls no form takes): from the
    cache, or built first by :func:`build` in a process of its own (``python -m
    sketchsyn.aot_build``, which imports numba, so that this one does not; if this process
    ends first, the build goes on to completion for the next one). Raises
    ``RuntimeError`` when the build fails (no C compiler, no ``numba.pycc``), and from then on
    for the same key without building again (the error is kept beside the cache's modules as
    ``….failed``: delete it to try again)."""
    so, index, name = _paths(module)
    failed = so.parent / (so.name[: -len(".so")] + ".failed")
    if failed.exists():  # built and failed before, with these sources: not tried again
        raise RuntimeError(f"building {name} failed: {failed.read_text(encoding='utf-8')}")
    if not (so.exists() and index.exists()):
        so.parent.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "sketchsyn.aot_build", module.__name__, str(so)]
        root = str(Path(__file__).resolve().parents[1])  # this sketchsyn, installed or not
        path = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
        env = dict(os.environ, PYTHONPATH=path)
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT, env=env)
        if done.returncode != 0 or not so.exists():
            why = done.stderr.strip()[-2000:] or f"exit status {done.returncode}"
            failed.write_text(why, encoding="utf-8")
            raise RuntimeError(f"building {name} failed: {why}")
    forms = json.loads(index.read_text(encoding="utf-8"))
    loader = importlib.machinery.ExtensionFileLoader(name, str(so))
    spec_ = importlib.util.spec_from_file_location(name, so, loader=loader)
    assert spec_ is not None
    ext = importlib.util.module_from_spec(spec_)
    loader.exec_module(ext)
    return {
        kernel: Guard(
            kernel, [(getattr(ext, export), specs) for export, specs in entries], otherwise
        )
        for kernel, entries in forms.items()
    }


def build(kernels: Any, so_path: str) -> None:
    """Compile a kernel set (``kernels``: a :class:`sketchsyn.accel.KernelSet`) ahead of time
    into ``so_path``, with the JSON index of its forms beside it: numba compiles the
    set just in time and runs its warm-up (the argument types of its callers), then compiles
    each kernel once per form the warm-up gave, releasing the GIL as the just-in-time kernels
    do. Both files are written under temporary names and renamed, so a reader never sees half
    a module."""
    import warnings

    warnings.simplefilter("ignore")  # numba.pycc's pending deprecation
    import numba
    import numba.pycc.compiler as pycc_compiler
    from numba import types
    from numba.np.numpy_support import as_dtype
    from numba.pycc import CC

    namespace, names = kernels.namespace, kernels.names
    for name in names:
        namespace[name] = numba.njit(nogil=True, cache=True)(kernels.plain[name])
    kernels.warm_up()

    def spec_of(ty: Any) -> Any:
        if isinstance(ty, types.Array):
            return ("a", as_dtype(ty.dtype).str, ty.ndim, ty.layout, "w" if ty.mutable else "r")
        if isinstance(ty, types.BaseTuple):
            return ("t", tuple(spec_of(t) for t in ty.types))
        if isinstance(ty, types.ExternalFunctionPointer):
            result = ty.sig.return_type
            return ("f", getattr(result, "bitwidth", 0), len(ty.sig.args))
        return ("s", as_dtype(ty).str)

    def portable(ty: Any) -> Any:  # function pointers read by address() (no numba import)
        if isinstance(ty, types.ExternalFunctionPointer):
            return types.ExternalFunctionPointer(ty.sig, cconv=ty.cconv, get_pointer=address)
        if isinstance(ty, types.BaseTuple):
            return types.Tuple(tuple(portable(t) for t in ty.types))
        return ty

    class GilFree(pycc_compiler.Flags):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.release_gil = True

    pycc_compiler.Flags = GilFree
    so = Path(so_path)
    cc = CC(so.stem.split(".")[0])
    cc.target_cpu = "host"
    index: dict[str, list[Any]] = {}
    for name in names:
        disp = namespace[name]
        for i, sig in enumerate(disp.signatures):
            ret = disp.overloads[sig].signature.return_type
            export = f"{name}__{i}"
            cc.export(export, ret(*map(portable, sig)))(disp.py_func)
            index.setdefault(name, []).append([export, [spec_of(t) for t in sig]])
    with tempfile.TemporaryDirectory(dir=so.parent) as tmp:
        cc.output_dir = tmp
        cc.compile()
        built = next(Path(tmp).glob(f"{cc.name}*"))
        json_tmp = Path(tmp) / "index.json"
        json_tmp.write_text(json.dumps(index), encoding="utf-8")
        # The index first: a reader takes the pair once the module is there (two builders
        # of one key write the same files).
        os.replace(json_tmp, so.parent / (so.name[: -len(".so")] + ".json"))
        os.replace(built, so)
    for old in so.parent.glob(f"{cc.name}.*"):  # builds of other keys (older sources)
        if not old.name.startswith(so.name[: -len(".so")]):
            old.unlink(missing_ok=True)
