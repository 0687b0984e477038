# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Text kernels: plain numeric CSV blocks parsed in one compiled pass (the GIL released).

:func:`parse_csv` takes a block of CSV lines only when it is clean (every line with the
header's field count, every wanted field a plain decimal number that Clinger's fast path turns
into the correctly rounded double, no quote, no stray carriage return, ASCII only) and returns
None otherwise; the reader then parses the block the general way (pyarrow's CSV reader, with
its checks of every bad line). On a clean block both give the same doubles, bit for bit.
"""

from libc.stdint cimport int32_t

import numpy as np

cdef extern from "_text.h" nogil:
    Py_ssize_t ss_count_lines(const unsigned char *buf, Py_ssize_t len)
    Py_ssize_t ss_parse_csv(const unsigned char *buf, Py_ssize_t len, int ncols,
                            const int32_t *want, unsigned char delim, double *out,
                            Py_ssize_t room)

# Characters a delimiter may not be (they belong to numbers, quotes or line ends).
_NOT_DELIMITERS = frozenset(b'0123456789.-+eE"\r\n')


def parse_csv(const unsigned char[::1] buf not None, int ncols, idx, delimiter):
    """The columns ``idx`` (field indices, in the order wanted) of the CSV lines in ``buf``
    (``ncols`` fields each, every line ending in a newline) as float64 rows, column-major, or
    None when the block is not clean (see the module docstring) or its last line has no
    newline.

    >>> parse_csv(b"1,x,2.5\\n-3,y,4e1\\n", 3, [2, 0], ",").tolist()
    [[2.5, 1.0], [40.0, -3.0]]
    >>> parse_csv(b"1,x,2.5\\n3,y\\n", 3, [2, 0], ",") is None  # a short line
    True
    """
    if not isinstance(delimiter, str) or len(delimiter) != 1 or ord(delimiter) > 127:
        raise ValueError(f"delimiter must be one ASCII character, got {delimiter!r}")
    cdef unsigned char delim = ord(delimiter)
    if delim in _NOT_DELIMITERS:
        return None
    if ncols < 1:
        raise ValueError(f"ncols must be at least 1, got {ncols}")
    cdef Py_ssize_t k = len(idx), j
    if k < 1:
        raise ValueError("idx must name at least one field")
    want_arr = np.full(ncols, -1, dtype=np.int32)
    for j in range(k):
        f = idx[j]
        if not isinstance(f, (int, np.integer)) or not 0 <= f < ncols:
            raise ValueError(f"idx[{j}] = {f!r} is not a field index below {ncols}")
        if want_arr[f] >= 0:
            raise ValueError(f"idx names field {f} twice")
        want_arr[f] = j
    cdef const int32_t[::1] want = want_arr
    cdef Py_ssize_t n = buf.shape[0], room, got, sample = min(n, 1 << 16)
    if n == 0:
        return np.zeros((k, 0)).T
    # Room for the lines guessed from the first 64 KiB (no pass over the block to count them);
    # a block that holds more is counted and parsed again.
    with nogil:
        room = ss_count_lines(&buf[0], sample)
    room = min(n, room * n // sample + room * n // sample // 8 + 1024)
    cdef double[:, ::1] o
    while True:
        out = np.empty((k, room), dtype=np.float64)
        o = out
        with nogil:
            got = ss_parse_csv(&buf[0], n, ncols, &want[0], delim, &o[0, 0], room)
            if got == -2:
                room = ss_count_lines(&buf[0], n)
        if got != -2:
            break
    if got < 0:
        return None
    return out[:, :got].T
