"""The start of sketchsyn's optional compiled kernels (the ``fast`` extra: numba).

Three modules hold kernels, each with a numpy reference that gives the same results:
PrivHP's ingest (:mod:`sketchsyn.synth.privhp.kernels`), the sparse counters' batched checks
(:mod:`sketchsyn.counters.kernels`) and the exact noise tables
(:mod:`sketchsyn.privacy.kernels`). Each hands its plain-Python kernels to
:func:`register`; this module decides when they are compiled and whether they may run.

numba is not imported with sketchsyn. Once a process has counted :data:`START_ROWS` rows (2**24)
in large batches (the callers report them to :func:`ready`), a thread imports numba and
compiles every registered kernel (seconds; numba caches the machine code beside its module when
it can write there, and later processes load it in about 0.8 CPU-s), while the callers go on
with their numpy paths; the kernels take over from the first batch after they are ready. Shorter
jobs never start them (the start would cost more than they save); a job that announces a large
size (:func:`expect`, as ``sketchsyn fit`` does) starts them at its first large batch. The
environment variable ``SKETCHSYN_KERNELS`` switches: ``numpy`` (never), ``eager`` (at the first
large batch), anything else the default. :func:`numpy_only` switches them off on one thread.

>>> ready() in (True, False)
True
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "AVAILABLE",
    "EXPECT_ROWS",
    "EXPECT_WAIT",
    "START_ROWS",
    "enabled",
    "expect",
    "numpy_only",
    "ready",
    "register",
    "thread_flag",
]

#: True when numba (the optional extra) is installed. It is imported only when the kernels
#: start, on a thread of their own (:func:`ready`).
AVAILABLE = importlib.util.find_spec("numba") is not None
#: Rows a process counts with the numpy paths before it starts the kernels: importing numba and
#: loading the cached kernels costs about 0.8 CPU-s, which the kernels win back only after a
#: few times 10**7 rows, so a shorter job never pays it. ``SKETCHSYN_KERNELS=eager`` starts
#: them at the first large batch.
START_ROWS = 1 << 24
_SWITCH = os.environ.get("SKETCHSYN_KERNELS", "numba").strip().lower()
_LOCAL = threading.local()

# The registered kernel sets: (namespace, names in compile order, warm-up), and how many of them
# the compile thread has done.
_SETS: list[tuple[dict[str, Any], tuple[str, ...], Callable[[], None]]] = []
_DONE = 0
_READY = threading.Event()
_START = threading.Lock()
_STARTED = False
_SEEN = 0  # rows counted with the numpy paths before the start (at most START_ROWS matter)
_EXPECTED = 0  # rows a caller said its job will count (expect)
#: A job announced (:func:`expect`) to count at least this many rows starts the kernels at its
#: first large batch: the numpy path's START_ROWS rows would cost more than the start.
EXPECT_ROWS = 2 * START_ROWS
#: The longest a large announced job's first batch waits for the kernels, in seconds.
EXPECT_WAIT = 3.0
_WAITED = False
_FAILED: BaseException | None = None


def register(
    namespace: dict[str, Any], names: tuple[str, ...], warm_up: Callable[[], None]
) -> None:
    """Compile ``namespace[name]`` for each of ``names`` (callees first) with the other kernels,
    replacing the plain functions, then run ``warm_up()`` (one call of each public kernel with
    the argument types its callers pass, so that no later call compiles). A set registered after
    the others were compiled is compiled at the next :func:`ready` that may start them.

    >>> from sketchsyn.counters import kernels   # registers its kernels when imported
    >>> any(names == kernels.KERNELS for _, names, _ in _SETS)
    True
    """
    global _STARTED
    with _START:
        _SETS.append((namespace, names, warm_up))
        if _STARTED:  # the thread has run (or is running): a new thread takes the new set
            _STARTED = False
            _READY.clear()


def enabled() -> bool:
    """True when the kernels may run on this thread (numba installed, not switched off by
    ``SKETCHSYN_KERNELS=numpy`` or :func:`numpy_only`, compiled without error).

    >>> with numpy_only():
    ...     enabled()
    False
    """
    return (
        AVAILABLE and _SWITCH != "numpy" and _FAILED is None and not getattr(_LOCAL, "off", False)
    )


def expect(rows: int) -> None:
    """Announce that this process is about to count about ``rows`` rows (a file's row count,
    a plan's expected size). From :data:`EXPECT_ROWS` rows (2**25) on, the first large batch
    starts the kernels and waits for them (at most :data:`EXPECT_WAIT` seconds: loading
    numba's cached machine code takes about one; a first compilation takes longer, and the
    numpy path goes on meanwhile). A job that large gains on both counts: the numpy path costs
    about 40 ns more per row than the kernels, and run beside the loading thread it competes
    with it for the cores. Smaller announcements change nothing; the results are the same
    either way.

    >>> expect(0)   # nothing to announce: the default rule stands
    """
    global _EXPECTED
    with _START:
        _EXPECTED = max(_EXPECTED, int(rows))


def ready(wait: bool = False, rows: int = 0) -> bool:
    """True once the kernels can run without compiling. A batch of ``rows`` rows about to be
    counted adds them to the process's count; once it reaches :data:`START_ROWS` (or at once
    with ``wait``, ``SKETCHSYN_KERNELS=eager`` or a large job announced by :func:`expect`) a
    thread imports numba and compiles the kernels (or loads numba's cached machine code), while
    the callers go on with their numpy paths: a process waits for it only with ``wait`` (and
    an announced large job's first batch, at most :data:`EXPECT_WAIT` seconds). The results are
    the same on both paths, so the switch is invisible in the state.

    >>> ready() in (True, False)
    True
    """
    global _STARTED, _SEEN, _WAITED
    if not enabled():
        return False
    if not _READY.is_set():
        with _START:
            _SEEN = min(_SEEN + rows, START_ROWS)
            large = rows > 0 and _EXPECTED >= EXPECT_ROWS  # an announced large job (expect)
            go = wait or large or _SWITCH == "eager" or _SEEN >= START_ROWS
            if go and not _STARTED:
                _STARTED = True
                threading.Thread(target=_compile, name="sketchsyn-kernels", daemon=True).start()
            pause = large and not wait and not _WAITED
            _WAITED |= pause
        if wait:
            _READY.wait()
        elif pause:
            _READY.wait(EXPECT_WAIT)
    return _READY.is_set() and _FAILED is None


def _after_fork() -> None:
    """A child forked while the kernels were compiling has no compiling thread: let its first
    large batch start one."""
    global _STARTED, _START
    if not _READY.is_set():
        _STARTED, _START = False, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def _compile() -> None:
    """Jit every registered kernel not compiled yet and warm it up. Any error switches the
    kernels off for the process."""
    global _FAILED, _DONE, _STARTED
    try:
        import numba

        while True:
            with _START:
                todo = _SETS[_DONE:]
            if not todo:
                break
            for namespace, names, warm_up in todo:
                for name in names:
                    namespace[name] = numba.njit(nogil=True, cache=True)(namespace[name])
                warm_up()
            _DONE += len(todo)
    except BaseException as exc:  # noqa: BLE001 - any failure leaves the numpy paths in charge
        _FAILED = exc
    finally:
        with _START:
            if _FAILED is not None or _DONE == len(_SETS):
                _READY.set()
            else:  # a set registered while the thread finished: the next ready() starts it
                _STARTED = False


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
