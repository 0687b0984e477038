"""The contribution bounder's admission of a batch of rows, vectorised and equal to row by row.

The table is ``B`` buckets of ``s`` slots. A slot holds a fingerprint (``1 … 2**f − 1``; 0 marks
a free slot) and a count: ``1 … L`` rows kept, or ``L + 1``: ``L`` rows kept and at least one
dropped since (the unit was capped). Slots are claimed in order and never freed, so a bucket's
occupied slots are its first ones.

A row of bucket ``b`` and fingerprint ``g``, taken one at a time in stream order:

* a slot of ``b`` holds ``g``: the row is kept if the slot's count is below ``L`` (and counted),
  else dropped (the count becomes ``L + 1``);
* else, if ``b`` has a free slot, the row claims it (fingerprint ``g``, count 1) and is kept;
* else the row is dropped.

:func:`admit` decides a whole batch at once with the same outcome. Rows whose slot is already
full (count ``≥ L``) or whose bucket is full without their fingerprint are decided on sight; the
others are grouped by ``(b, g)`` with one sort of packed ``(b, g, position)`` words, so each row
knows its rank among the batch's earlier rows of its group. A group with a slot keeps its first
``L − count`` rows. A group without one claims a free slot when it is among the first
``free(b)`` new groups of its bucket in the order of their first rows (the order in which row
by row would meet them), then keeps its first ``L`` rows. Batches longer than ``CHUNK`` rows
are decided a chunk after another, which is the same as row by row.

>>> fps = np.zeros((1, 2), dtype=np.uint16)
>>> counts = np.zeros((1, 2), dtype=np.uint8)
>>> b = np.zeros(6, dtype=np.int64)
>>> g = np.array([5, 5, 7, 9, 5, 7], dtype=np.uint16)   # unit 9 finds the bucket full
>>> admit(fps, counts, b, g, max_rows=2).tolist()
[True, True, True, False, False, True]
>>> fps.tolist(), counts.tolist()
([[5, 7]], [[3, 2]])
"""

from __future__ import annotations

import numpy as np

__all__ = ["CHUNK", "Outcome", "admit"]

CHUNK = 1 << 20  # rows decided together: their positions fit the low 20 bits of a sort word
_POS_BITS = 20
_POS_MASK = np.uint64((1 << _POS_BITS) - 1)


class Outcome:
    """Rows kept and dropped by one call of :func:`admit`, by reason (exact counts)."""

    __slots__ = ("kept", "capped", "full")

    def __init__(self) -> None:
        self.kept = 0  # rows kept
        self.capped = 0  # rows of a unit that had kept L rows already
        self.full = 0  # rows of a unit whose bucket had no slot for it


def admit(
    fps: np.ndarray,
    counts: np.ndarray,
    bucket: np.ndarray,
    fingerprint: np.ndarray,
    max_rows: int,
    occupancy: np.ndarray | None = None,
    outcome: Outcome | None = None,
) -> np.ndarray:
    """Admit a batch: the mask of rows kept; ``fps``, ``counts`` (and ``occupancy``, the
    occupied slots of each bucket, when the caller keeps it) are updated in place.

    ``fps`` (``uint16 (B, s)``, 0 = free) and ``counts`` (``(B, s)``, room for ``max_rows + 1``)
    are the table; ``bucket`` (``int64``, in ``[0, B)``) and ``fingerprint`` (``uint16``,
    non-zero) describe the rows in stream order. ``outcome`` collects the counts of rows kept
    and dropped.
    """
    n = bucket.size
    keep = np.zeros(n, dtype=bool)
    if occupancy is None:
        occupancy = np.count_nonzero(fps, axis=1).astype(np.uint8)
    out = Outcome() if outcome is None else outcome
    for start in range(0, n, CHUNK):
        stop = min(start + CHUNK, n)
        keep[start:stop] = _chunk(
            fps, counts, occupancy, bucket[start:stop], fingerprint[start:stop], max_rows, out
        )
    return keep


def _chunk(
    fps: np.ndarray,
    counts: np.ndarray,
    occupancy: np.ndarray,
    b: np.ndarray,
    g: np.ndarray,
    L: int,
    out: Outcome,
) -> np.ndarray:
    B, s = fps.shape
    m = b.size
    keep = np.zeros(m, dtype=bool)
    if m == 0:
        return keep
    flat_counts = counts.reshape(-1)
    # The row's bucket: does a slot hold its fingerprint, and how full is the bucket?
    match = np.take(fps, b, axis=0) == g[:, None]
    j = match.argmax(axis=1)
    has = match[np.arange(m), j]
    slot = b * s + j
    c0 = np.where(has, flat_counts[slot], 0).astype(np.int64)
    occ = occupancy[b].astype(np.int64)
    # Decided on sight: the unit's slot is full (capped), or its bucket is (refused).
    capped_now = has & (c0 >= L)
    full_now = ~has & (occ >= s)
    if capped_now.any():
        flat_counts[slot[capped_now]] = L + 1
    out.capped += int(capped_now.sum())
    out.full += int(full_now.sum())
    rest = np.flatnonzero(~(capped_now | full_now))
    if rest.size == 0:
        return keep
    # Group the other rows by (bucket, fingerprint), in stream order inside each group.
    key = (b[rest].astype(np.uint64) << np.uint64(16)) | g[rest].astype(np.uint64)
    packed = (key << np.uint64(_POS_BITS)) | np.arange(rest.size, dtype=np.uint64)
    packed.sort()
    rows = rest[(packed & _POS_MASK).astype(np.int64)]
    group_key = packed >> np.uint64(_POS_BITS)
    new_group = np.empty(rows.size, dtype=bool)
    new_group[0] = True
    np.not_equal(group_key[1:], group_key[:-1], out=new_group[1:])
    first = np.flatnonzero(new_group)  # each group's first position in the sorted rows
    gid = np.cumsum(new_group) - 1
    rank = np.arange(rows.size) - first[gid]
    size = np.diff(np.append(first, rows.size))
    lead = rows[first]  # each group's first row (the earliest: the sort is stable)
    g_has = has[lead]
    allowed = np.where(g_has, L - c0[lead], 0)
    # New groups: claim the bucket's free slots in the order of their first rows.
    new = np.flatnonzero(~g_has)
    if new.size:
        first_rows = lead[new]
        order = np.argsort(
            (b[first_rows].astype(np.uint64) << np.uint64(_POS_BITS)) | first_rows.astype(np.uint64)
        )
        nb = b[first_rows[order]]
        boundary = np.empty(nb.size, dtype=bool)
        boundary[0] = True
        np.not_equal(nb[1:], nb[:-1], out=boundary[1:])
        in_bucket = np.arange(nb.size) - np.flatnonzero(boundary)[np.cumsum(boundary) - 1]
        claims = new[order]
        free = s - occ[lead[claims]]
        won = in_bucket < free
        winners = claims[won]
        where = b[lead[winners]] * s + occ[lead[winners]] + in_bucket[won]
        fps.reshape(-1)[where] = g[lead[winners]]
        flat_counts[where] = np.where(size[winners] > L, L + 1, size[winners])
        np.add.at(occupancy, b[lead[winners]], 1)
        allowed[winners] = L
        out.full += int(size[claims[~won]].sum())
    # Groups that hold a slot: their count goes up by the rows kept (L + 1 past the cap).
    held = np.flatnonzero(g_has)
    if held.size:
        total = c0[lead[held]] + size[held]
        flat_counts[slot[lead[held]]] = np.where(total > L, L + 1, total)
    kept_sorted = rank < allowed[gid]
    keep[rows[kept_sorted]] = True
    n_kept = int(kept_sorted.sum())
    out.kept += n_kept
    out.capped += int((allowed[gid] > 0).sum()) - n_kept
    return keep
