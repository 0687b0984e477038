from libc.stdint cimport int32_t, int64_t, uint32_t

from ._words cimport words_t

# A plan of noise.laplace_plan, as pointers into its (checked) arrays.
ctypedef struct plan_t:
    const int32_t *guide
    const int64_t *padded
    Py_ssize_t n
    int64_t m
    int64_t kind
    const int32_t *guide_a
    const int64_t *padded_a
    Py_ssize_t n_a
    const int32_t *guide_b
    const int64_t *padded_b
    Py_ssize_t n_b
    int64_t m_b

# c_lap_draw's result when a table's guide points outside its thresholds (a wrong plan).
cdef extern from *:
    """
    #define SS_BAD_TABLE (-((Py_ssize_t)1 << 62))
    """
    Py_ssize_t BAD_TABLE "SS_BAD_TABLE"

cdef int plan_of(object plan, int shift, plan_t *out) except -1

cdef Py_ssize_t c_lap_draw(words_t *src, Py_ssize_t count, const plan_t *plan, int shift,
                           uint32_t *words, Py_ssize_t nwords, int64_t *z, int64_t *scratch,
                           Py_ssize_t scols) noexcept nogil
