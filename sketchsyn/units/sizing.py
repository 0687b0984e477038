"""Sizing rules of the contribution bounder: bytes per slot, buckets for a public number of units,
and the public rate at which units are pre-sampled when the table cannot hold them all.

A slot is a 16-bit fingerprint and a count of ``max_rows + 1`` values (one byte for ``L ≤ 254``),
so the table of ``B`` buckets of ``s`` slots holds ``B·s·(2 + count bytes)`` bytes plus one byte
of occupancy per bucket. Sized for ``expected_units`` (a public guess, never read from the data)
the table gets ``B = ceil(U / (s·LOAD))`` buckets; a bucket then receives ``s·LOAD`` units on
average and, units landing at random, a share of them finds their bucket full (with ``s = 8``
and ``LOAD = 0.75`` about 5%, the later comers of a crowded bucket: a Poisson(6) bucket of 8
slots). When a memory bound leaves fewer buckets, units are pre-sampled by keyed hash at the
rate ``q = min(1, B·s·LOAD / U)``: the admitted units are then a uniform sample of all units
rather than the first to arrive (which would bias the release toward the start of the stream).
Sampling never costs privacy (a unit is in or out with all its rows) and never buys any either:
no amplification is claimed, because the guarantee does not rest on the key being secret.

>>> plan(max_rows=16, expected_units=100_000)
(16667, 1.0)
>>> buckets, rate = plan(max_rows=16, expected_units=1_000_000, memory_bytes=200_000)
>>> buckets, round(rate, 4)
(7997, 0.048)
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ParameterError, check_int

__all__ = [
    "HEADER_BYTES",
    "LOAD",
    "MAX_BUCKETS",
    "MAX_ROWS",
    "SLOTS",
    "count_dtype",
    "plan",
    "table_bytes",
]

SLOTS = 8  # slots a bucket (the default)
LOAD = 0.75  # units a slot when sized for a public number of units
MAX_BUCKETS = 2**28  # the admission packs (bucket, fingerprint) into 44 bits of a sort word
MAX_SLOTS = 64
MAX_ROWS = 2**31 - 2  # L + 1 must fit a uint32 count
HEADER_BYTES = 64  # the key (16 bytes) and the small fields, counted in nbytes


def count_dtype(max_rows: int) -> np.dtype:
    """The narrowest unsigned type holding a slot's count ``0 … max_rows + 1``.

    >>> count_dtype(16), count_dtype(254), count_dtype(255)
    (dtype('uint8'), dtype('uint8'), dtype('uint16'))
    """
    for dt in (np.uint8, np.uint16, np.uint32):
        if max_rows + 1 <= np.iinfo(dt).max:
            return np.dtype(dt)
    raise ParameterError(f"max_rows={max_rows} is above the largest supported {MAX_ROWS}")


def table_bytes(buckets: int, slots: int, max_rows: int) -> int:
    """``nbytes`` of a bounder: fingerprints, counts, occupancy and the fixed header.

    >>> table_bytes(1024, 8, 16)
    25664
    """
    per_slot = 2 + count_dtype(max_rows).itemsize
    return buckets * slots * per_slot + buckets + HEADER_BYTES


def plan(
    max_rows: int,
    expected_units: int | None = None,
    memory_bytes: int | None = None,
    slots: int = SLOTS,
    owner: str = "ContributionBounder",
) -> tuple[int, float]:
    """``(buckets, sample_rate)`` of a bounder for a public ``expected_units``, within
    ``memory_bytes`` when given (module docstring). With ``memory_bytes`` alone the table takes
    all of it and no unit is sampled out. Refused: neither given, or a memory bound too small
    for one bucket.
    """
    L = check_int(max_rows, "max_rows", owner, minimum=1, maximum=MAX_ROWS)
    s = check_int(slots, "slots", owner, minimum=1, maximum=MAX_SLOTS)
    if expected_units is None and memory_bytes is None:
        raise ParameterError(
            f"{owner} needs 'expected_units' (a public guess of the number of privacy units) "
            "or a memory bound to size its table. Got neither."
        )
    fit = None
    if memory_bytes is not None:
        memory = check_int(memory_bytes, "memory_bytes", owner, minimum=1)
        fit = (memory - HEADER_BYTES) // (s * (2 + count_dtype(L).itemsize) + 1)
        if fit < 1:
            raise ParameterError(
                f"The 'memory_bytes' parameter of {owner} must leave room for one bucket of "
                f"{s} slots ({table_bytes(1, s, L)} bytes). Got {memory_bytes!r} instead."
            )
    if expected_units is None:
        assert fit is not None
        return int(min(fit, MAX_BUCKETS)), 1.0
    units = check_int(expected_units, "expected_units", owner, minimum=1)
    want = math.ceil(units / (s * LOAD))
    buckets = int(min(want, MAX_BUCKETS) if fit is None else min(want, fit, MAX_BUCKETS))
    rate = min(1.0, buckets * s * LOAD / units)
    return buckets, rate
