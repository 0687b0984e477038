"""Words of the operating system's CSPRNG for compiled loops (the ``fast`` extra).

A compiled loop draws its words through C functions of a state: a seeded generator's are
numpy's (:meth:`~sketchsyn.privacy.rng.RandomSource.word_functions`). This module gives the
OS CSPRNG's: :func:`word_functions` returns ``(state, next_uint32, next_uint64)``, where
``state`` is the calling thread's buffer of 32-bit words and each call of a function takes
the buffer's next unread word(s), refilling the buffer's :data:`WORDS` words from the kernel's
``getrandom`` (the source of :func:`os.urandom` on Linux) when it is empty.
:func:`words_taken` counts the words a thread has taken.

Every word is read once: the buffer is the thread's own (the compiled loops run without the
GIL), a forked child starts with empty buffers (it must not use its parent's words), and a
buffer is never saved or copied with a summary. If ``getrandom`` fails (it does not, once a
first call has worked, but for an interrupted call, which is retried), the process is
aborted rather than given words that are not random. Where ``getrandom`` is missing (not
Linux), :func:`word_functions` returns None and the callers keep their Python paths
(:func:`os.urandom`).

Compiled with the other kernels by :mod:`sketchsyn.accel`; until its C functions are made,
:func:`word_functions` returns None.

>>> words = word_functions()   # None until the kernels are ready, or without getrandom
>>> words is None or len(words) == 3
True
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

import numpy as np

from .. import accel

__all__ = ["KERNELS", "WORDS", "word_functions", "words_taken"]

#: The kernels in the order they are compiled (the C functions are made from
#: ``_next_u32`` and ``_next_u64`` afterwards, in the warm-up).
KERNELS = ("_fill",)

#: The random words of a buffer. A buffer is ``WORDS + 2`` 32-bit words: the index of the
#: next unread one (``_END``: none), the number of times it was filled, then the words.
WORDS = 4096
_END = WORDS + 2

# getrandom(buf, count, flags), declared when the kernels compile (numba's external function).
_getrandom: Any = None
_abort: Any = None
_carray: Any = None
# The C functions (numba cfuncs, next_uint32 and next_uint64) once compiled, or None (not
# yet, or no getrandom).
_CFUNCS: tuple[Any, Any] | None = None
_LOCAL = threading.local()


def _fill(buf: Any) -> None:
    """Fill ``buf[2:]`` from ``getrandom`` (retrying a short or interrupted read; aborting
    after a million failures in a row), set the next word to read to 2 and count the fill."""
    want = 4 * (buf.size - 2)
    done = 0
    failed = 0
    start = buf.ctypes.data + 8
    while done < want:
        got = _getrandom(start + done, want - done, 0)
        if got > 0:
            done += got
            failed = 0
        else:
            failed += 1
            if failed > 1_000_000:
                _abort()
    buf[0] = 2
    buf[1] += 1


def _next_u32(state: Any) -> Any:
    """The next unread 32-bit word of the buffer at ``state`` (refilled when empty)."""
    buf = _carray(state, (_END,), dtype=np.uint32)
    i = buf[0]
    if i < 2 or i >= _END:
        _fill(buf)
        i = 2
    buf[0] = i + 1
    return buf[i]


def _next_u64(state: Any) -> Any:
    """Two unread 32-bit words of the buffer at ``state`` as one 64-bit word (the first low)."""
    buf = _carray(state, (_END,), dtype=np.uint32)
    i = buf[0]
    if i < 2 or i + 1 >= _END:
        _fill(buf)
        i = 2
    buf[0] = i + 2
    return np.uint64(buf[i]) | (np.uint64(buf[i + 1]) << np.uint64(32))


def word_functions() -> tuple[int, Any, Any] | None:
    """``(state_address, next_uint32, next_uint64)`` over this thread's buffer of OS CSPRNG
    words, in the form of :meth:`~sketchsyn.privacy.rng.RandomSource.word_functions` (made
    once per thread); None until the compiled kernels have made the C functions
    (:func:`sketchsyn.accel.ready`) or where there is no ``getrandom``. The address stays
    valid while the thread lives (and until a fork: a child makes new buffers)."""
    fns = getattr(_LOCAL, "fns", None)
    if fns is None:
        if _CFUNCS is None:  # (set once the kernels are compiled)
            return None
        buf = _LOCAL.buf = _empty()
        fns = _LOCAL.fns = (buf.ctypes.data, _CFUNCS[0].ctypes, _CFUNCS[1].ctypes)
    return fns


def words_taken() -> int:
    """The 32-bit words this thread's buffer has passed since the thread's first
    :func:`word_functions` (a word a 64-bit call leaves at a buffer's end included): what the
    compiled loops of this thread have read from the OS CSPRNG, for accounting.

    >>> words_taken() >= 0
    True
    """
    buf = getattr(_LOCAL, "buf", None)
    if buf is None or buf[1] == 0:
        return 0
    return (int(buf[1]) - 1) * WORDS + int(buf[0]) - 2


def _empty() -> np.ndarray:
    """A buffer with no word to read (its first call fills it)."""
    buf = np.zeros(_END, dtype=np.uint32)
    buf[0] = _END
    return buf


def _forget() -> None:
    """In a forked child: new, empty buffers for every thread (none of the parent's words)."""
    global _LOCAL
    _LOCAL = threading.local()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)


def _has_getrandom() -> bool:
    """True when the C library has ``getrandom`` and a call fills 16 bytes."""
    try:
        fn = ctypes.CDLL(None).getrandom
    except (AttributeError, OSError, TypeError):  # no getrandom; no C library by name
        return False
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
    fn.restype = ctypes.c_ssize_t
    buf = ctypes.create_string_buffer(16)
    return fn(buf, 16, 0) == 16


def _warm_up() -> None:
    """Make the C functions (when ``getrandom`` works) and draw a word of each."""
    global _CFUNCS
    if not _has_getrandom():
        return
    _declare()
    import numba
    from numba import types

    u32 = numba.cfunc(types.uint32(types.voidptr), cache=True)(_next_u32)
    u64 = numba.cfunc(types.uint64(types.voidptr), cache=True)(_next_u64)
    buf = _empty()
    u32.ctypes(buf.ctypes.data), u64.ctypes(buf.ctypes.data)
    _CFUNCS = (u32, u64)


def _declare() -> None:
    """numba's declarations of ``getrandom`` and ``abort`` (before ``_fill`` compiles)."""
    global _getrandom, _abort, _carray
    import numba
    from numba import types

    _carray = numba.carray

    # (the buffer's address passed as an unsigned integer of a pointer's width: the same
    # argument in the C calling convention as the ``void *`` getrandom takes)
    _getrandom = types.ExternalFunction(
        "getrandom", types.intp(types.uintp, types.uintp, types.uint32)
    )
    _abort = types.ExternalFunction("abort", types.void())


# Its words come from numba cfuncs made at run time: just in time only.
accel.register(globals(), KERNELS, _warm_up, aot=False)
