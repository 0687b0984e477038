# cython: language_level=3, boundscheck=False, wraparound=False
"""Words for the compiled loops: a seeded numpy bit generator's, or the OS CSPRNG's.

A loop draws its words through C functions of a state. A seeded source's are its numpy bit
generator's (found through the generator's ``capsule``, checked by name: the same words, in
the same order, as the generator's own calls give). :class:`OSWords` is a thread's buffer of
the OS CSPRNG's words (``getrandom`` on Linux, ``getentropy`` on macOS and the BSDs): each call
takes the buffer's next unread word, refilling its :data:`WORDS` words when it is empty; if
the system call fails (it does not, but for an interrupted call, which is retried), the
process is aborted rather than given words that are not random.

>>> words = OSWords()
>>> words.taken(), len(set(words.draw(64).tolist())) > 60, words.taken()
(0, True, 64)
"""

from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_IsValid
from libc.stdint cimport uint32_t, uint64_t
from libc.stdlib cimport abort, calloc, free

import numpy as np


cdef extern from "_osrandom.h" nogil:
    int SS_HAVE_OSRANDOM
    int ss_os_fill(void *buf, size_t n)

# numpy's bitgen_t (numpy/random/bitgen.h, the documented interface of its bit generators'
# capsules; its layout has not changed since numpy 1.17): declared here, so that the build
# needs no numpy headers.
cdef extern from *:
    """
    typedef struct ss_bitgen {
        void *state;
        uint64_t (*next_uint64)(void *st);
        uint32_t (*next_uint32)(void *st);
        double (*next_double)(void *st);
        uint64_t (*next_raw)(void *st);
    } ss_bitgen_t;
    """
    ctypedef struct bitgen_t "ss_bitgen_t":
        void *state
        uint64_t (*next_uint64)(void *st) noexcept nogil
        uint32_t (*next_uint32)(void *st) noexcept nogil


#: The words of a buffer (which holds two more: the index of the next unread one, and the
#: number of times it was filled).
WORDS = 4096
cdef enum:
    _WORDS = 4096
    _END = _WORDS + 2
#: True when this platform has an OS CSPRNG the loops can call (else the callers keep their
#: Python paths, with ``os.urandom``).
HAVE_OS = bool(SS_HAVE_OSRANDOM)


cdef void _fill(uint32_t *buf) noexcept nogil:
    if ss_os_fill(&buf[2], 4 * _WORDS) != 0:
        abort()
    buf[0] = 2
    buf[1] += 1


cdef uint32_t _os_next32(void *state) noexcept nogil:
    cdef uint32_t *buf = <uint32_t *>state
    cdef uint32_t i = buf[0]
    if i < 2 or i >= _END:
        _fill(buf)
        i = 2
    buf[0] = i + 1
    return buf[i]


cdef uint64_t _os_next64(void *state) noexcept nogil:
    cdef uint32_t *buf = <uint32_t *>state
    cdef uint32_t i = buf[0]
    if i < 2 or i + 1 >= _END:
        _fill(buf)
        i = 2
    buf[0] = i + 2
    return <uint64_t>buf[i] | (<uint64_t>buf[i + 1] << 32)


cdef class OSWords:
    """A buffer of the OS CSPRNG's words, for one thread (its words are read once: never
    share one between threads, copy it, or use it in a forked child)."""

    def __cinit__(self):
        if not SS_HAVE_OSRANDOM:
            raise RuntimeError("no OS CSPRNG the compiled loops can call on this platform")
        self.buf = <uint32_t *>calloc(_END, sizeof(uint32_t))
        if self.buf == NULL:
            raise MemoryError()
        self.buf[0] = _END  # no word to read: the first call fills it

    def __dealloc__(self):
        free(self.buf)

    def __reduce__(self):
        raise TypeError("OSWords holds words to be read once: it is not copied")

    def taken(self):
        """The 32-bit words this buffer has passed since it was made (a word a 64-bit call
        leaves at a buffer's end included): what its loops have read, for accounting."""
        if self.buf[1] == 0:
            return 0
        return (int(self.buf[1]) - 1) * _WORDS + int(self.buf[0]) - 2

    def draw(self, Py_ssize_t n):
        """``n`` words from the buffer (uint32), as a loop would take them."""
        out = np.empty(max(n, 0), dtype=np.uint32)
        cdef uint32_t[::1] o = out
        cdef Py_ssize_t i
        for i in range(o.shape[0]):
            o[i] = _os_next32(self.buf)
        return out

    def draw64(self, Py_ssize_t n):
        """``n`` 64-bit words from the buffer (two 32-bit words each, the first low)."""
        out = np.empty(max(n, 0), dtype=np.uint64)
        cdef uint64_t[::1] o = out
        cdef Py_ssize_t i
        for i in range(o.shape[0]):
            o[i] = _os_next64(self.buf)
        return out


ctypedef struct _given_t:
    const uint32_t *words
    Py_ssize_t size
    Py_ssize_t at


cdef uint32_t _given_next32(void *state) noexcept nogil:
    cdef _given_t *g = <_given_t *>state
    cdef uint32_t w = g.words[g.at] if g.at < g.size else 0
    g.at += 1
    return w


cdef uint64_t _given_next64(void *state) noexcept nogil:
    cdef uint64_t lo = _given_next32(state)
    return lo | (<uint64_t>_given_next32(state) << 32)


cdef class GivenWords:
    """A word source that gives the words it was made with, in order (0 past them), and
    counts the words taken: for tests that need a given sequence of words (ties with a
    threshold, redraws beyond a table).

    >>> g = GivenWords([7, 8])
    >>> draw32(g, 3).tolist(), g.taken()
    ([7, 8, 0], 3)
    """

    cdef object _keep
    cdef _given_t g

    def __cinit__(self, words):
        arr = np.ascontiguousarray(words, dtype=np.uint32)
        cdef const uint32_t[::1] view = arr
        self._keep = arr
        self.g.words = &view[0] if view.shape[0] else NULL
        self.g.size = view.shape[0]
        self.g.at = 0

    def taken(self):
        """The words taken so far (past the given ones included)."""
        return self.g.at


cdef int words_of(object source, words_t *out) except -1:
    """``out``: the word functions of ``source``, an :class:`OSWords`, a :class:`GivenWords`
    or a numpy bit generator (its ``capsule``, checked by name)."""
    cdef bitgen_t *bg
    if isinstance(source, OSWords):
        out.state = (<OSWords>source).buf
        out.next32 = _os_next32
        out.next64 = _os_next64
        return 0
    if isinstance(source, GivenWords):
        out.state = &(<GivenWords>source).g
        out.next32 = _given_next32
        out.next64 = _given_next64
        return 0
    capsule = getattr(source, "capsule", None)
    if capsule is None or not PyCapsule_IsValid(capsule, "BitGenerator"):
        raise TypeError(f"a word source must be OSWords, GivenWords or a numpy "
                        f"BitGenerator, got {type(source).__name__}")
    bg = <bitgen_t *>PyCapsule_GetPointer(capsule, "BitGenerator")
    out.state = bg.state
    out.next32 = bg.next_uint32
    out.next64 = bg.next_uint64
    return 0


def draw32(source, Py_ssize_t n):
    """``n`` 32-bit words of ``source`` (an :class:`OSWords` or a numpy bit generator) by its
    C functions, as the compiled loops draw them (for tests).

    >>> import numpy as np
    >>> a, b = np.random.PCG64(5), np.random.PCG64(5)
    >>> draw32(a, 3).tolist() == np.random.Generator(b).integers(0, 2**32, 3, np.uint32).tolist()
    True
    """
    cdef words_t w
    words_of(source, &w)
    out = np.empty(max(n, 0), dtype=np.uint32)
    cdef uint32_t[::1] o = out
    cdef Py_ssize_t i
    for i in range(o.shape[0]):
        o[i] = w.next32(w.state)
    return out

