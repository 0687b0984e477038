# cython: language_level=3, boundscheck=True, wraparound=False, cdivision=False
"""One level of a :class:`~sketchsyn.synth.continual.streaming_privtree.StreamingPrivTree`
step in one loop (compiled at install; the numpy reference is the step's own level loop).

:func:`tree_level` takes a level's tested nodes (their atoms ``[a0, a1)`` and each node's noise
value, handed out by the step's :class:`~sketchsyn.privacy.pool.LaplacePool`) and makes the
split decisions with the reference's float operations (the score a difference of two running
sums, the bias, one float addition of the integer noise, a comparison with ``θ``), so the
decisions are the same bit for bit. Where they fit under the leaves' cap it also writes the
nodes that stay (the level's new leaves) and the children of those that split, with their
atoms (a parent's bounds are its children's outer bounds; the inner ones are searched in the
layout, as :meth:`_Layout.before` does). Where the cap acts it writes only the decisions and
leaves the level to the reference's cap path. Every array's dtype, length and every index a
loop takes are checked (``IndexError``, ``ValueError``).
"""

cimport cython
from libc.stdint cimport int64_t, uint8_t, uint64_t

ctypedef const int64_t[::1] ci64
ctypedef int64_t[::1] i64
ctypedef const uint64_t[::1] cu64


cdef Py_ssize_t _right(ci64 a, int64_t x) except -2:
    """``np.searchsorted(a, x, side="right")``."""
    cdef Py_ssize_t lo = 0, hi = a.shape[0], mid
    while lo < hi:
        mid = (lo + hi) // 2
        if a[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef Py_ssize_t _left(cu64 a, uint64_t x) except -2:
    """``np.searchsorted(a, x, side="left")``."""
    cdef Py_ssize_t lo = 0, hi = a.shape[0], mid
    while lo < hi:
        mid = (lo + hi) // 2
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef int _same(str what, Py_ssize_t want, Py_ssize_t got) except -1:
    if got != want:
        raise ValueError(f"{what} has {got} entries, {want} expected")
    return 0


def tree_level(cu64 start not None, ci64 first not None, cu64 shift not None,
               cu64 mask not None, ci64 r not None, ci64 leaf_level not None,
               const double[::1] cum_score not None, cu64 active not None, ci64 a0 not None,
               ci64 a1 not None, ci64 noise not None, int64_t level, int64_t depth, int k,
               int64_t beta, double bias, double floor, double theta, int64_t room_left,
               uint8_t[::1] split not None, uint64_t[::1] stay not None, i64 stay_a0 not None,
               i64 stay_a1 not None, uint64_t[::1] kids not None, i64 kids_a0 not None,
               i64 kids_a1 not None):
    """The split decisions of ``level``'s nodes ``active`` (atoms ``[a0, a1)``, noise
    ``noise``) into ``split``, as the step's numpy loop makes them: a node splits when
    ``max(s − bias, floor) + noise > theta`` (``s`` its score from ``cum_score``), unless it is
    one atom (its layout's level) or ``level ≥ depth``. ``room_left`` is ``cap − kept −
    len(active)``; when the splits pass ``room_left // (beta − 1)`` (the cap) returns
    ``(splits, -1, -1)`` with only ``split`` written. Else the nodes that stay go to ``stay``
    (their atoms to ``stay_a0``, ``stay_a1``) and the ``beta`` children of each split node to
    ``kids`` (in order, with their atoms); returns ``(splits, stays, children)``. The layout
    (``start``, ``first``, ``shift``, ``mask``, ``r``, ``leaf_level``: one entry a leaf) is
    :class:`~sketchsyn.synth.continual.streaming_privtree._Layout`'s."""
    cdef Py_ssize_t n = active.shape[0], leaves = start.shape[0], i, j, leaf, ns = 0, nk = 0
    cdef Py_ssize_t nst = 0, atoms
    cdef int64_t lo, hi, a, last
    cdef uint64_t node, code
    cdef double s, b, noisy
    cdef bint atom
    for what, arr in (("first", first), ("shift", shift), ("mask", mask), ("r", r),
                      ("leaf_level", leaf_level)):
        _same(what, leaves, arr.shape[0])
    for what, arr in (("a0", a0), ("a1", a1), ("noise", noise), ("split", split)):
        _same(what, n, arr.shape[0])
    if leaves < 1 or cum_score.shape[0] < 1:
        raise ValueError("the layout needs a leaf and cum_score an entry")
    if not 1 <= k <= 8 or beta != (1 << k) or not 0 <= level <= depth <= 62:
        raise ValueError(f"k {k}, beta {beta}, level {level} or depth {depth} out of range")
    atoms = cum_score.shape[0] - 1
    last = first[leaves - 1] + (<int64_t>1 << r[leaves - 1]) - 1
    for i in range(n):
        lo, hi = a0[i], a1[i]
        if not 0 <= lo <= hi <= atoms:
            raise IndexError(f"atoms [{lo}, {hi}) of node {i} are outside [0, {atoms}]")
        atom = hi - lo == 1
        if atom:
            a = lo if lo < last else last
            leaf = _right(first, a) - 1
            atom = leaf_level[leaf] + r[leaf] == level
        s = cum_score[hi] - cum_score[lo]
        b = s - bias
        if not b >= floor:  # np.maximum(b, floor)
            b = floor if b == b else b
        noisy = b + <double>noise[i]
        split[i] = noisy > theta and not atom and level < depth
        ns += split[i]
    # room = room_left // (beta − 1), floor division (cdivision=False: Python's semantics)
    if ns > room_left // (beta - 1):
        return ns, -1, -1
    if stay.shape[0] < n - ns or stay_a0.shape[0] < n - ns or stay_a1.shape[0] < n - ns:
        raise ValueError("stay, stay_a0 and stay_a1 need room for every node")
    if kids.shape[0] < ns * beta or kids_a0.shape[0] < ns * beta or kids_a1.shape[0] < ns * beta:
        raise ValueError("kids, kids_a0 and kids_a1 need beta entries a split node")
    for i in range(n):
        if not split[i]:
            stay[nst], stay_a0[nst], stay_a1[nst] = active[i], a0[i], a1[i]
            nst += 1
            continue
        node = active[i] << <uint64_t>k
        for j in range(beta):
            kids[nk + j] = node + <uint64_t>j
            kids_a0[nk + j] = a0[i] if j == 0 else kids_a1[nk + j - 1]
            if j == beta - 1:
                kids_a1[nk + j] = a1[i]
            else:  # _Layout.before of the next child's first code at depth D
                code = (node + <uint64_t>(j + 1)) << <uint64_t>(depth - level - k)
                leaf = _left(start, code) - 1
                if leaf < 0:
                    leaf = 0
                kids_a1[nk + j] = first[leaf] + <int64_t>(
                    (code - start[leaf] + mask[leaf]) >> shift[leaf])
        nk += beta
    return ns, nst, nk


@cython.boundscheck(False)  # every index below is inside [0, n): the lengths are checked
def by_next_bit(cu64 codes not None, ci64 times not None, int shift,
                uint64_t[::1] out_codes not None, i64 out_times not None,
                i64 out_cells not None):
    """Records sorted by ``codes >> (shift + 1)`` (each run of one value in their order) sorted
    by ``codes >> shift`` instead, each run split into its records whose bit ``shift`` is 0,
    then those whose bit is 1, in their order (a stable partition: the order of
    ``np.argsort(codes >> shift, kind="stable")`` from the one by ``codes >> (shift + 1)``):
    ``out_codes``, ``out_times`` (``times`` moved with them) and ``out_cells`` (``codes >>
    shift``). The runs must ascend (``ValueError`` otherwise).

    >>> import numpy as np
    >>> c, t = np.array([5, 4, 7, 6, 9, 8], np.uint64), np.arange(6)  # runs of c >> 1: 2, 3, 4
    >>> out = np.empty(6, np.uint64), np.empty(6, np.int64), np.empty(6, np.int64)
    >>> by_next_bit(c, t, 0, *out); out[0].tolist(), out[1].tolist()
    ([4, 5, 6, 7, 8, 9], [1, 0, 3, 2, 5, 4])
    """
    cdef Py_ssize_t n = codes.shape[0], i = 0, j, e, z, o, zeros
    cdef uint64_t g, prev = 0, c
    for what, arr in (("times", times), ("out_codes", out_codes), ("out_times", out_times),
                      ("out_cells", out_cells)):
        _same(what, n, arr.shape[0])
    if not 0 <= shift <= 62:
        raise ValueError(f"shift must be in [0, 62], got {shift}")
    while i < n:
        g = codes[i] >> (shift + 1)
        if i and g <= prev:
            raise ValueError(f"codes are not sorted by codes >> {shift + 1} at {i}")
        prev = g
        j = i
        zeros = 0
        while j < n and codes[j] >> (shift + 1) == g:
            zeros += ((codes[j] >> shift) & 1) == 0
            j += 1
        z, o = i, i + zeros
        for e in range(i, j):
            c = codes[e]
            if (c >> shift) & 1:
                out_codes[o], out_times[o], out_cells[o] = c, times[e], <int64_t>(c >> shift)
                o += 1
            else:
                out_codes[z], out_times[z], out_cells[z] = c, times[e], <int64_t>(c >> shift)
                z += 1
        i = j
