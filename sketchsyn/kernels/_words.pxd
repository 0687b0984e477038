# The word sources of the compiled loops: a seeded numpy bit generator's C functions, or a
# thread's buffer of the OS CSPRNG's words (OSWords).
from libc.stdint cimport uint32_t, uint64_t

ctypedef uint32_t (*next32_t)(void *) noexcept nogil
ctypedef uint64_t (*next64_t)(void *) noexcept nogil

ctypedef struct words_t:
    void *state
    next32_t next32
    next64_t next64

cdef int words_of(object source, words_t *out) except -1

cdef class OSWords:
    cdef uint32_t *buf
