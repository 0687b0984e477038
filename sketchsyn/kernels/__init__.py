"""sketchsyn's compiled kernels: the hot loops, built by pip when the package is installed.

Six extension modules, compiled from Cython (and a little C) by the package's build
(``setup.py``), hold the loops where numpy's whole-array passes cost most:

* :mod:`~sketchsyn.kernels._privhp`: PrivHP's ingest (a Box's Morton codes, the per-cell
  histogram, the counters' increments, MurmurHash3 of the sketch keys and the bucket flush);
* :mod:`~sketchsyn.kernels._noise`: the exact noise samplers' table lookups and Laplace draws;
* :mod:`~sketchsyn.kernels._counters`: the sparse counters' checks and rounds, draws included;
* :mod:`~sketchsyn.kernels._partition`: a level of a ``StreamingPrivTree`` step's split
  decisions and children;
* :mod:`~sketchsyn.kernels._text`: plain numeric CSV blocks parsed in one pass (the CSV
  reader's fast path; any other block goes to pyarrow's reader);
* :mod:`~sketchsyn.kernels._words`: the words those loops draw (a seeded numpy bit generator's,
  or the OS CSPRNG's: :mod:`~sketchsyn.kernels.oswords`).

(A seventh, ``_cyutility``, holds the Cython runtime code the six share, compiled once.)

Each has a numpy reference in the module that calls it, and both give the same state bit for
bit (``tests/test_privhp_kernels.py``, ``tests/test_counter_kernels.py``). The numpy path runs
where the extension is absent (a source install without a C compiler, an unsupported
platform), with the environment variable ``SKETCHSYN_KERNELS=numpy``, and on a thread inside
:func:`numpy_only`. Nothing is compiled, started or written at run time. :func:`active` (and
``sketchsyn info --version``) says which path runs.

>>> active() in ("extension", "numpy")
True
>>> with numpy_only():
...     enabled()
False
"""

from __future__ import annotations

import contextlib
import importlib
import os
import threading
from collections.abc import Iterator
from types import ModuleType
from typing import Any

__all__ = ["active", "enabled", "numpy_only", "thread_flag", "why"]

_NAMES = ("_words", "_noise", "_privhp", "_counters", "_partition", "_text")


def _load() -> tuple[dict[str, ModuleType], str]:
    """The extension modules, or none and why."""
    found: dict[str, ModuleType] = {}
    for name in _NAMES:
        try:
            found[name] = importlib.import_module(f"{__name__}.{name}")
        except ImportError as exc:  # not built (no compiler at install), or hidden
            return {}, f"the compiled extension is not installed ({exc})"
    return found, ""


_MODULES, _MISSING = _load()
#: The extension modules (None without the extension).
words: Any = _MODULES.get("_words")
noise: Any = _MODULES.get("_noise")
privhp: Any = _MODULES.get("_privhp")
counters: Any = _MODULES.get("_counters")
partition: Any = _MODULES.get("_partition")
text: Any = _MODULES.get("_text")
#: True when the extension is installed (whether or not it is switched off).
INSTALLED = bool(_MODULES)
#: ``SKETCHSYN_KERNELS=numpy`` (read at import) switches the extension off for the process.
_OFF = os.environ.get("SKETCHSYN_KERNELS", "").strip().lower() == "numpy"
_LOCAL = threading.local()


def active() -> str:
    """``"extension"`` when the compiled kernels run in this process, ``"numpy"`` when the
    numpy path does (not installed, or ``SKETCHSYN_KERNELS=numpy``)."""
    return "extension" if INSTALLED and not _OFF else "numpy"


def why() -> str:
    """Why the numpy path runs (an empty string when the extension does).

    >>> why() == "" or active() == "numpy"
    True
    """
    if not INSTALLED:
        return _MISSING
    return "switched off by SKETCHSYN_KERNELS=numpy" if _OFF else ""


def enabled() -> bool:
    """True when the compiled kernels may run on this thread: installed, not switched off by
    ``SKETCHSYN_KERNELS=numpy`` or :func:`numpy_only`. Cheap: the callers ask every batch."""
    return INSTALLED and not _OFF and not getattr(_LOCAL, "off", False)


@contextlib.contextmanager
def numpy_only() -> Iterator[None]:
    """Run the numpy paths (the references) on this thread while the block runs; PrivHP's
    worker threads follow the thread that calls ``update_many``.

    >>> with numpy_only():
    ...     pass
    """
    with thread_flag(_LOCAL, "off"):
        yield


@contextlib.contextmanager
def thread_flag(local: threading.local, name: str) -> Iterator[None]:
    """Set the flag ``name`` of ``local`` (this thread's) while the block runs, then put back
    what it was (so that blocks nest).

    >>> flags = threading.local()
    >>> with thread_flag(flags, "on"):
    ...     flags.on
    True
    """
    saved = getattr(local, name, False)
    setattr(local, name, True)
    try:
        yield
    finally:
        setattr(local, name, saved)
