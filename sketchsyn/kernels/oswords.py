"""Each thread's buffer of the operating system's CSPRNG words for the compiled loops.

A private sparse bank's rounds run in one compiled loop that draws its words itself
(:func:`sketchsyn.kernels._counters.rounds`), and so does the exact Laplace sampler's private
draw of a few hundred values (:func:`sketchsyn.kernels._noise.lap_draw`). Their words come from
this thread's :class:`~sketchsyn.kernels._words.OSWords`, a buffer of the OS CSPRNG's words
(the source of :func:`os.urandom`), refilled in blocks. Every word is read once: the buffer is
the thread's own (two threads' loops never share one), a forked child starts with empty buffers
(it must not use its parent's words), and a buffer is never saved, pickled or copied.
:func:`words_taken` counts the words a thread's loops have read, for accounting.

>>> src = word_source()   # None without the extension or an OS CSPRNG the loops can call
>>> src is None or words_taken() >= 0
True
"""

from __future__ import annotations

import os
import threading
from typing import Any

from . import INSTALLED, words

__all__ = ["WORDS", "word_source", "words_taken"]

#: The random words of a buffer (refilled when all are read).
WORDS = 4096
_LOCAL = threading.local()


def word_source() -> Any:
    """This thread's buffer of OS CSPRNG words (made at its first call), or None where the
    extension or an OS CSPRNG it can call is missing (the callers then keep their Python
    paths and :func:`os.urandom`)."""
    buf = getattr(_LOCAL, "buf", None)
    if buf is None:
        if not (INSTALLED and words.HAVE_OS):
            return None
        buf = _LOCAL.buf = words.OSWords()
    return buf


def words_taken() -> int:
    """The 32-bit words this thread's buffer has passed since its first :func:`word_source`
    (a word a 64-bit call leaves at a buffer's end included).

    >>> words_taken() >= 0
    True
    """
    buf = getattr(_LOCAL, "buf", None)
    return 0 if buf is None else int(buf.taken())


def _forget() -> None:
    """In a forked child: new, empty buffers for every thread (none of the parent's words)."""
    global _LOCAL
    _LOCAL = threading.local()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)
