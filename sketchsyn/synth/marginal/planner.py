"""How many bins a marginal synthesizer gives its columns within a memory bound: :func:`plan`.

The state is ``8·cells + 64`` bytes, ``cells`` the counts of every pair table and single table
(:mod:`~sketchsyn.synth.marginal.layout`): on a Box ``P·4**bits + d·2**fine_bits``; on a
Schema ``Σ_{i<j} 2**(c_i + c_j) + Σ_j 2**f_j`` with each column's coarse and fine bits ``c_j``,
``f_j``. A schema's discrete columns of at most ``exact_bits`` code bits have fixed sizes
(their exact values); the planner chooses ``bits`` and ``fine_bits`` of the others.

>>> plan(4, 1.0, 1 << 20)[:2]
(7, 12)
"""

from __future__ import annotations

import math
from typing import Any

from ...domains import Schema
from ...errors import ParameterError
from ...privacy import accounting
from .layout import EXACT_BITS, MAX_BITS, OVERHEAD, column_bits, table_cells

__all__ = ["DEFAULT_MEMORY", "plan", "state_bytes"]

DEFAULT_MEMORY = 1 << 20
_MAX_FINE_PLAN = 12  # finer single-column grids than 4096 bins buy nothing at W1 ≈ 10⁻³
_OWNER = "MarginalSynthesizer"


def state_bytes(d: int, bits: int, fine_bits: int) -> int:
    """Bytes of a :class:`MarginalSynthesizer` state on a Box:
    ``8·(P·4**bits + d·2**fine_bits) + 64``.

    >>> state_bytes(4, 7, 12)
    917568
    """
    n_pairs = d * (d - 1) // 2
    return 8 * (n_pairs * 4**bits + d * 2**fine_bits) + OVERHEAD


def layout_bytes(domain: Any, bits: int, fine_bits: int, exact_bits: int = EXACT_BITS) -> int:
    """Bytes of a state on ``domain`` (a Box, a Schema, or ``d`` for a Box of ``d`` columns).

    >>> layout_bytes(4, 7, 12) == state_bytes(4, 7, 12)
    True
    """
    if isinstance(domain, int):
        return state_bytes(domain, bits, fine_bits)
    return 8 * table_cells(*column_bits(domain, bits, fine_bits, exact_bits)) + OVERHEAD


def _fixed_text(domain: Schema, exact_bits: int) -> str:
    """The discrete columns whose exact values are their bins, and their bins."""
    coarse, _ = column_bits(domain, 1, 1, exact_bits)
    parts = [
        f"{c.name}: {2**b} bins"
        for c, b in zip(domain._cols, coarse, strict=True)
        if c.kind == "categorical" or (c.kind in ("integer", "boolean") and c.bits <= exact_bits)
    ]
    return ", ".join(parts)


def plan(
    domain: Any,
    epsilon: float,
    memory_bytes: int = DEFAULT_MEMORY,
    expected_n: int | None = None,
    singles_share: float = 0.25,
    exact_bits: int = EXACT_BITS,
) -> tuple[int, int, str]:
    """``(bits, fine_bits, why)`` for ``domain`` (a Box, a Schema, or ``d`` columns of a Box)
    within ``memory_bytes``.

    ``bits`` is the largest with room for the pair grids and single grids of at least as many
    bits; with ``expected_n`` it is also at most ``ceil(log2(ε_pair·n)/2) − 2`` on a Box (PMM
    trees) and ``floor(log2(ε_pair·n/16)/2)`` on a Schema (flat histograms), i.e. a pair cell
    of two continuous columns holds about ``16/ε_pair`` rows on average or more (finer pair
    cells hold mostly noise, and their conditionals scatter the sampled rows; the constant was
    chosen by trying one bit more and one bit fewer on nycflights13 in 4, 6 and 8 columns, and
    on its 9-column table).
    ``fine_bits`` then takes what memory is left, up to 12 bits, and at most PMM's 1-D depth
    ``ceil(log2(ε_single·n)) − 1`` with ``expected_n``. On a Schema the fixed tables of its
    discrete columns come first: a schema whose tables do not fit with one bit per continuous
    column is refused, naming the bytes they need.

    >>> plan(4, 1.0, 1 << 20, expected_n=327_346)[:2]
    (6, 12)
    """
    d = domain if isinstance(domain, int) else domain.d
    n_pairs = d * (d - 1) // 2
    eps_pair = (1 - singles_share) * epsilon / n_pairs
    eps_single = singles_share * epsilon / d
    sized = domain if isinstance(domain, Schema) else d

    def need(bits: int, fine: int) -> int:
        return layout_bytes(sized, bits, fine, exact_bits)

    bits = 0
    while bits < MAX_BITS and need(bits + 1, bits + 1) <= memory_bytes:
        bits += 1
    if bits == 0:
        _refuse(domain, d, need(1, 1), memory_bytes, exact_bits)
    why = f"bits={bits}: the finest pair grid within {memory_bytes:,} bytes"
    cap_fine = _MAX_FINE_PLAN
    if expected_n is not None:
        if isinstance(domain, Schema):
            # 4**bits ≤ ε_pair·n/16: bits = floor(log2(ε_pair·n/16)/2).
            rows = eps_pair * expected_n / 16
            cap, rule = max(1, int(math.log2(max(rows, 1.0)) // 2)), "floor(log2(ε_pair·n/16)/2)"
        else:
            # 4**bits ≤ ε_pair·n/16, rounded up: bits = ceil(log2(ε_pair·n)/2) − 2.
            cap = max(1, (accounting.pmm_depth(eps_pair, expected_n, 2) + 1) // 2 - 2)
            rule = "ceil(log2(ε_pair·n)/2) − 2"
        if cap < bits:
            bits = cap
            why = (
                f"bits={bits}: about 16·(1/ε_pair) rows per pair cell or more "
                f"({rule}, n={expected_n:,})"
            )
        cap_fine = min(cap_fine, accounting.pmm_depth(eps_single, expected_n, 1))
    fine = bits
    while fine < max(cap_fine, bits) and need(bits, fine + 1) <= memory_bytes:
        fine += 1
    why += f"; fine_bits={fine} (memory, at most {max(cap_fine, bits)})"
    return bits, fine, why


def _refuse(domain: Any, d: int, least: int, memory_bytes: int, exact_bits: int) -> None:
    if isinstance(domain, Schema):
        raise ParameterError(
            f"The 'memory_bytes' parameter of {_OWNER} must be at least {least:,} for this "
            f"schema: the pair and column tables of its discrete columns, kept exact up to "
            f"{exact_bits} code bits ({_fixed_text(domain, exact_bits)}), need that much with "
            f"one bit per continuous column. Group rare categories, lower 'exact_bits' or give "
            f"more memory. Got {memory_bytes!r} instead."
        )
    raise ParameterError(
        f"The 'memory_bytes' parameter of {_OWNER} must be at least "
        f"{least:,} for {d} columns (4 cells per pair, 2 per column). "
        f"Got {memory_bytes!r} instead."
    )
