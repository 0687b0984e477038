"""The start of sketchsyn's optional compiled kernels (the ``fast`` extra: numba).

Three modules hold kernels, each with a numpy reference that gives the same results:
PrivHP's ingest (:mod:`sketchsyn.synth.privhp.kernels`), the sparse counters' batched checks
(:mod:`sketchsyn.counters.kernels`) and the exact noise tables
(:mod:`sketchsyn.privacy.kernels`). Each hands its plain-Python kernels to
:func:`register`; this module decides when they are compiled and whether they may run.

numba is not imported with sketchsyn. Once a process has counted :data:`START_ROWS` rows (2**24)
in large batches (the callers report them to :func:`ready`), a thread readies every registered
kernel, while the callers go on with their numpy paths; the kernels take over from the first
batch after they are ready. When every set the process registered takes only arrays, numbers
and C function pointers (PrivHP's ingest and the noise tables; not the sparse counters'), the
kernels are compiled ahead of time (:mod:`sketchsyn.aot`: once per machine and source, in a
process of its own) and later processes import them in milliseconds without importing numba;
otherwise numba compiles them just in time (it caches the machine code beside its module when
it can write there, and later processes load it in about 0.8 CPU-s, with numba's and LLVM's
memory). Shorter jobs never start them (the start would cost more than they save); a job that
announces a large size (:func:`expect`, as ``sketchsyn fit`` does) starts them at its first
large batch. The environment variable ``SKETCHSYN_KERNELS`` switches: ``numpy`` (never),
``eager`` (at the first large batch), ``jit`` (numba's just-in-time kernels only; ``eager,jit``
both), anything else the default. :func:`numpy_only` switches them off on one thread.

>>> ready() in (True, False)
True
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "AVAILABLE",
    "EXPECT_ROWS",
    "KernelSet",
    "EXPECT_WAIT",
    "START_ROWS",
    "compiled_by",
    "enabled",
    "expect",
    "numpy_only",
    "ready",
    "register",
    "set_of",
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


_WORDS: tuple[str, frozenset[str]] = ("", frozenset())  # _SWITCH and its words, when last split


def _says(word: str) -> bool:
    """Whether ``SKETCHSYN_KERNELS`` (words separated by commas) holds ``word`` (split once:
    every ``ready()`` asks)."""
    global _WORDS
    if _WORDS[0] is not _SWITCH:
        _WORDS = (_SWITCH, frozenset(w.strip() for w in _SWITCH.split(",")))
    return word in _WORDS[1]


_LOCAL = threading.local()

# The registered kernel sets, in the order of registration (a set's kernels may call those of a
# set registered before it).
_SETS: list[KernelSet] = []
_READY = threading.Event()
_START = threading.Lock()
_JIT = threading.Lock()  # held while the sets are compiled just in time
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


@dataclass
class KernelSet:
    """A registered kernel set: its module's namespace, its kernels' names (callees first),
    their plain functions, its warm-up, whether it can be compiled ahead of time, and how it
    has been compiled (None: not yet; ``"aot"``, ``"jit"``)."""

    namespace: dict[str, Any]
    names: tuple[str, ...]
    warm_up: Callable[[], None]
    aot: bool
    plain: dict[str, Any] = field(default_factory=dict)
    mode: str | None = None


def register(
    namespace: dict[str, Any],
    names: tuple[str, ...],
    warm_up: Callable[[], None],
    aot: bool = True,
) -> None:
    """Compile ``namespace[name]`` for each of ``names`` (callees first) with the other kernels,
    replacing the plain functions, then run ``warm_up()`` (one call of each public kernel with
    the argument types its callers pass, so that no later call compiles). A set registered after
    the others were compiled is compiled at the next :func:`ready` that may start them.

    With ``aot`` (kernels that take only arrays, numbers, tuples of them and C function
    pointers), the set may be compiled ahead of time (:mod:`sketchsyn.aot`): when every set a
    process registered may, none of them imports numba.

    >>> from sketchsyn.counters import kernels   # registers its kernels when imported
    >>> any(s.names == kernels.KERNELS for s in _SETS)
    True
    """
    global _STARTED
    with _START:
        plain = {name: namespace[name] for name in names}
        _SETS.append(KernelSet(namespace, names, warm_up, aot, plain))
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
        AVAILABLE and not _says("numpy") and _FAILED is None and not getattr(_LOCAL, "off", False)
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
    with ``wait``, ``SKETCHSYN_KERNELS=eager``, a large job announced by :func:`expect`, or
    kernels already compiled ahead of time for every registered set, which load in
    milliseconds) a thread readies the kernels (loads those compiled ahead of time, building
    them first if needed, or imports numba and compiles them just in time), while the callers
    go on with their numpy paths: a process waits for it only with ``wait`` (and the first
    batch of an announced large job or of built kernels, at most :data:`EXPECT_WAIT` seconds).
    The results are the same on both paths, so the switch is invisible in the state.

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
            built = rows > 0 and not _STARTED and _built()  # loads in milliseconds: at once
            go = wait or large or built or _says("eager") or _SEEN >= START_ROWS
            if go and not _STARTED:
                _STARTED = True
                threading.Thread(target=_compile, name="sketchsyn-kernels", daemon=True).start()
            pause = (large or built) and not wait and not _WAITED
            _WAITED |= pause
        if wait:
            _READY.wait()
        elif pause:
            _READY.wait(EXPECT_WAIT)
    return _READY.is_set() and _FAILED is None


_BUILT: tuple[int, bool] = (-1, False)  # (sets registered, all built) when last asked


def _built() -> bool:
    """Whether every registered set is already compiled ahead of time in the cache (asked
    once per number of registered sets: it hashes their sources)."""
    global _BUILT
    if _BUILT[0] != len(_SETS):
        ok = not _says("jit") and _AOT_FAILED is None and all(s.aot for s in _SETS)
        if ok:
            import sys

            from . import aot

            ok = all(aot.built(sys.modules[s.namespace["__name__"]]) for s in _SETS)
        _BUILT = (len(_SETS), ok)
    return _BUILT[1]


def _after_fork() -> None:
    """A child forked while the kernels were compiling has no compiling thread: let its first
    large batch start one."""
    global _STARTED, _START
    if not _READY.is_set():
        _STARTED, _START = False, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def set_of(module: Any) -> KernelSet:
    """The kernel set ``module`` registered (what :func:`sketchsyn.aot.build` compiles).

    >>> from sketchsyn.privacy import kernels
    >>> set_of(kernels).names == kernels.KERNELS
    True
    """
    for s in _SETS:
        if s.namespace is vars(module):
            return s
    raise LookupError(f"{module.__name__} registered no kernels")


def compiled_by() -> str:
    """How this process's kernels run: ``"aot"`` (compiled ahead of time, numba not imported),
    ``"jit"`` (numba's just-in-time kernels), or ``"numpy"`` (not started, or not available).

    >>> compiled_by() in ("aot", "jit", "numpy")
    True
    """
    if not (_READY.is_set() and _FAILED is None):
        return "numpy"
    return "aot" if all(s.mode == "aot" for s in _SETS) else "jit"


def _compile() -> None:
    """Compile every registered set not compiled yet: ahead of time when every registered set
    allows it (:mod:`sketchsyn.aot`; ``SKETCHSYN_KERNELS=jit`` never does), else just in time,
    with a warm-up. A failed ahead-of-time build falls back to the just-in-time kernels; any
    other error switches the kernels off for the process."""
    global _FAILED, _STARTED, _AOT_FAILED
    try:
        while True:
            with _START:
                sets = list(_SETS)
            if all(s.mode is not None for s in sets):
                break
            if not _says("jit") and _AOT_FAILED is None and all(s.aot for s in sets):
                try:
                    for s in sets:
                        if s.mode is None:
                            _load_aot(s)
                    continue
                except Exception as exc:  # noqa: BLE001 - the just-in-time kernels instead
                    _AOT_FAILED = exc
            _to_jit()
    except BaseException as exc:  # noqa: BLE001 - any failure leaves the numpy paths in charge
        _FAILED = exc
    finally:
        with _START:
            if _FAILED is not None or all(s.mode is not None for s in _SETS):
                _READY.set()
            else:  # a set registered while the thread finished: the next ready() starts it
                _STARTED = False


#: Why this process's kernels could not be compiled ahead of time (None: they were, or were
#: not tried).
_AOT_FAILED: BaseException | None = None
#: The calls the kernels compiled ahead of time did not take (each switched the process to the
#: just-in-time kernels).
_AOT_MISSES: list[str] = []


def _load_aot(s: KernelSet) -> None:
    """Bind ``s``'s kernels compiled ahead of time; a call they do not take (other argument
    types) switches every set to the just-in-time kernels and runs there."""
    import sys

    from . import aot

    def otherwise(name: str, why: str, args: tuple[Any, ...]) -> Any:
        _AOT_MISSES.append(why)
        _to_jit()
        return s.namespace[name](*args)

    s.namespace.update(aot.load(sys.modules[s.namespace["__name__"]], otherwise))
    s.mode = "aot"


def _to_jit() -> None:
    """Compile every set not compiled just in time yet (in the order of registration: a set's
    kernels may call an earlier set's), from its plain functions, and warm it up."""
    import numba

    with _JIT:
        for s in list(_SETS):
            if s.mode == "jit":
                continue
            for name in s.names:
                s.namespace[name] = numba.njit(nogil=True, cache=True)(s.plain[name])
            s.warm_up()
            s.mode = "jit"


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
