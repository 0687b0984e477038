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
from .layout import EXACT_BITS, MAX_BITS, MAX_FINE_BITS, OVERHEAD, column_bits, table_cells

__all__ = [
    "DEFAULT_MEMORY",
    "ONE_WAY_NOISE",
    "mergeable_columns",
    "plan",
    "plan_table",
    "release_bits",
    "state_bytes",
    "table_rule",
]

DEFAULT_MEMORY = 1 << 20
_MAX_FINE_PLAN = 12  # finer single-column grids than 4096 bins buy nothing at W1 ≈ 10⁻³
_OWNER = "MarginalSynthesizer"
ONE_WAY_NOISE = 4.0  # a planned one-way bin holds this many noise scales at a uniform spread
PAIR_NOISE = 0.25  # a pair-table cell of two ordered columns holds this many at a uniform spread
_ORDERED_FINE = 12  # at most 4096 fine bins for an ordered column


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


def table_rule(n: float, single_scale: float, pair_scale: float) -> tuple[int, int]:
    """``(fine, coarse)``: the most bits of an ordered column's one-way bins and pair-table bins
    that ``n`` rows support, at a uniform spread over the column's public range:

    * a one-way bin holds at least :data:`ONE_WAY_NOISE` noise scales of its table,
      ``n / 2**fine ≥ 4·b₁``;
    * a cell of a pair table of two ordered columns holds at least :data:`PAIR_NOISE` (a
      quarter) of a noise scale of a measured pair, ``n / 4**coarse ≥ b/4``: the release
      groups these cells further, on the noisy marginals, until each holds a few
      (:mod:`~sketchsyn.synth.marginal.groups`), so the state keeps finer bins for columns
      whose data fill a small part of their public range.

    >>> table_rule(50_000, 50.0, 25.0)
    (7, 6)
    """
    fine = int(math.floor(math.log2(max(n / (ONE_WAY_NOISE * single_scale), 2.0))))
    coarse = int(math.floor(math.log2(max(n / (PAIR_NOISE * pair_scale), 4.0)) / 2))
    return max(fine, 1), max(min(coarse, fine), 1)


def mergeable_columns(schema: Schema) -> tuple[bool, ...]:
    """For each column: True when a release may merge its one-way bins (:func:`release_bits`):
    an ordered column (numeric, datetime, integer, IPv4) of more than one code bit.

    >>> from sketchsyn.domains import Schema
    >>> s = Schema([{"name": "c", "kind": "categorical", "categories": ["a", "b", "c"]},
    ...             {"name": "m", "kind": "integer", "low": 1, "high": 12},
    ...             {"name": "x", "kind": "numeric", "low": 0, "high": 1}])
    >>> mergeable_columns(s)
    (False, True, True)
    """
    return tuple(c.kind not in ("categorical", "boolean") and c.bits > 1 for c in schema._cols)


def release_bits(
    coarse: tuple[int, ...],
    fine: tuple[int, ...],
    mergeable: tuple[bool, ...],
    n_hat: float,
    single_scale: float,
    pair_scale: float,
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(coarse, fine)`` a release measures: each mergeable column's one-way bins and
    pair-table bins merged, by neighbouring pairs, down to what :func:`table_rule` allows for the
    noisy row count ``n_hat`` (never more bins than the state has). The state's bins were fixed
    from ``expected_n``, a guess made before any row arrived; a guess ten times too large
    leaves about ten times too few rows per one-way bin for its noise, which this undoes. A
    function of a released count and public parameters.

    >>> release_bits((6, 2), (10, 2), (True, False), 20_000, 100.0, 100.0)
    ((4, 2), (5, 2))
    >>> release_bits((6, 2), (10, 2), (True, False), 10**7, 100.0, 100.0)
    ((6, 2), (10, 2))
    """
    rule_fine, rule_coarse = table_rule(n_hat, single_scale, pair_scale)
    out_c, out_f = [], []
    for c, f, merge in zip(coarse, fine, mergeable, strict=True):
        if merge:
            f = min(f, rule_fine)
            c = min(c, f, rule_coarse)
        out_c.append(c)
        out_f.append(f)
    return tuple(out_c), tuple(out_f)


def plan_table(
    schema: Schema,
    memory_bytes: int,
    expected_n: int | None,
    single_scale: float,
    pair_scale: float,
    exact_bits: int | None = None,
) -> tuple[tuple[int, ...], tuple[int, ...], str]:
    """``(coarse, fine, why)``: each column's bits on a table, within ``memory_bytes``.

    * An ordered column (numeric, datetime, integer, IPv4) gets the bits :func:`table_rule`
      allows for ``expected_n`` rows (without ``expected_n``, up to 12 fine bits and as many
      coarse bits as fit), never more than its code has.
    * A categorical or boolean keeps one one-way bin per category (rare ones are merged at the
      release, from their noisy counts) and up to ``EXACT_BITS`` bits of its code in its pair
      tables (neighbouring categories of its list share a pair-table bin beyond that).
    * ``exact_bits``: a categorical, integer or boolean column of at most that many code bits
      keeps its exact values in both tables, whatever the rule says.
    * Then, while the state is over ``memory_bytes``: the column with the most pair-table bits
      (a categorical's counted two less; ordered columns, then the latest, first among equals)
      loses one while the pair tables hold more than the one-way tables, else the widest
      one-way table loses a bit. Every schema fits 256 KiB (one bit each).

    >>> from sketchsyn.domains import Schema
    >>> s = Schema([{"name": "c", "kind": "categorical", "categories": ["a", "b", "c"]},
    ...             {"name": "x", "kind": "numeric", "low": 0, "high": 1}])
    >>> plan_table(s, 1 << 20, 50_000, 50.0, 25.0)[:2]
    ((2, 6), (2, 7))
    """
    coarse, fine = [], []
    if expected_n is None:
        rule_fine, rule_coarse = _ORDERED_FINE, MAX_BITS
        why = f"one-way bins at most {2**_ORDERED_FINE:,} (no expected_n)"
    else:
        rule_fine, rule_coarse = table_rule(expected_n, single_scale, pair_scale)
        why = (
            f"one-way bins hold ≥ {ONE_WAY_NOISE:g} noise scales and pair cells ≥ 1 at a "
            f"uniform spread of n={expected_n:,} (ordered columns)"
        )
    for col in schema._cols:
        width = col.bits
        exact = exact_bits is not None and col.kind != "numeric" and width <= exact_bits
        exact = exact and col.kind in ("categorical", "integer", "boolean")
        if exact:
            c = f = width
        elif col.kind in ("categorical", "boolean"):
            f = min(width, MAX_FINE_BITS)
            c = min(width, EXACT_BITS)
        else:
            f = max(1, min(width, rule_fine, _ORDERED_FINE))
            c = max(1, min(f, rule_coarse))
        coarse.append(c)
        fine.append(f)
    cut = _fit_memory(coarse, fine, memory_bytes, [c.kind == "categorical" for c in schema._cols])
    if cut:
        why += f"; {cut} bits cut to fit {memory_bytes:,} bytes"
    return tuple(coarse), tuple(fine), why


def _fit_memory(
    coarse: list[int], fine: list[int], memory_bytes: int, categorical: list[bool]
) -> int:
    """Lower bits in place until the state fits (see :func:`plan_table`); bits removed. A
    categorical's pair-table bits count two less when choosing which column loses one (its
    neighbouring categories have nothing in common, an ordered column's neighbouring bins do)."""
    cut = 0
    d = len(coarse)
    while 8 * table_cells(tuple(coarse), tuple(fine)) + OVERHEAD > memory_bytes:
        pairs = table_cells(tuple(coarse), (0,) * d) - d
        singles = sum(2**f for f in fine)
        if pairs >= singles and max(coarse) > 1:
            j = max(range(d), key=lambda k: (coarse[k] - 2 * categorical[k], -categorical[k], k))
            coarse[j] -= 1
        elif max(fine) > 1:
            j = max(range(d), key=lambda k: (fine[k], k))
            fine[j] -= 1
            coarse[j] = min(coarse[j], fine[j])
        else:
            break  # one bit each: the smallest state there is
        cut += 1
    return cut
