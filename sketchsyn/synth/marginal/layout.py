"""Where every count of a marginal synthesizer lives: each column's bins, the pair and single
tables in one flat array, their Morton order, and which cells name a value.

Each column ``j`` has **coarse** bins (``2**coarse[j]``, the rows and columns of its pair
tables) and **fine** bins (``2**fine[j] ≥ 2**coarse[j]``, its single-column table); both are
the top bits of the column's code, so a fine bin lies inside one coarse bin:

* on a :class:`~sketchsyn.domains.Box`, every column has ``bits`` coarse and ``fine_bits`` fine
  bits: equal cells of its interval;
* on a :class:`~sketchsyn.domains.Schema`, a **discrete** column (categorical, integer,
  boolean) of at most ``exact_bits`` code bits has its exact values as bins (coarse = fine =
  its categories or integers); a **wide categorical** (more code bits) has its first
  ``exact_bits`` code bits as coarse bins (groups of neighbouring categories in the list's
  order) and up to ``fine_bits`` as fine bins; numeric, datetime and IPv4 columns and wide
  integers have ``bits`` and ``fine_bits`` (never more than their code bits): equal ranges of
  their code, as on a box.

A pair table ``(i, j)`` is a grid of ``2**coarse[i] × 2**coarse[j]`` cells in the Morton order
of a 2-column schema of integer columns with those bits (:meth:`Schema.encode
<sketchsyn.domains.Schema.encode>`: its bits interleaved while both columns have some, then the
rest), and its PMM tree's diameters are that schema's :meth:`~sketchsyn.domains.Schema.gamma`;
on a box with equal bits this is the box's own Morton order. A cell whose code range holds no
value of its column (a categorical's codes past its last category) names no value: it gets no
mass in a release.

>>> from sketchsyn.domains import Schema
>>> s = Schema([{"name": "c", "kind": "categorical", "categories": ["a", "b", "c"]},
...             {"name": "x", "kind": "numeric", "low": 0, "high": 1}])
>>> lay = Layout(s, bits=3, fine_bits=5)
>>> lay.coarse, lay.fine, lay.pair_sizes, lay.single_sizes, lay.cells
((2, 3), (2, 5), (32,), (4, 32), 68)
>>> lay.valid_fine(0).tolist()
[True, True, True, False]
"""

from __future__ import annotations

import functools
from itertools import combinations
from typing import Any

import numpy as np

from ...attributes import ReadOnly
from ...domains import Box, Schema

__all__ = [
    "EXACT_BITS",
    "MAX_BITS",
    "MAX_COLUMNS",
    "MAX_EXACT_BITS",
    "MAX_FINE_BITS",
    "OVERHEAD",
    "ColumnBins",
    "Layout",
    "pair_list",
]

MAX_COLUMNS = 64
MAX_BITS = 12  # 4**12 = 16.8 M cells per pair
MAX_FINE_BITS = 24
EXACT_BITS = 8  # a discrete column of at most 256 codes keeps its exact values as bins
MAX_EXACT_BITS = 12
OVERHEAD = 64  # bytes of a state besides its counts
_U64 = np.uint64


def pair_list(d: int) -> list[tuple[int, int]]:
    """The ``d(d − 1)/2`` pairs ``(i, j)``, ``i < j``, in lexicographic order.

    >>> pair_list(3)
    [(0, 1), (0, 2), (1, 2)]
    """
    return list(combinations(range(d), 2))


def column_bits(
    domain: Any, bits: int, fine_bits: int, exact_bits: int = EXACT_BITS
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(coarse, fine)``: the bits of each column's coarse and fine bins (module docstring).

    >>> s = Schema([{"name": "m", "kind": "integer", "low": 1, "high": 12},
    ...             {"name": "k", "kind": "integer", "low": 0, "high": 99999}])
    >>> column_bits(s, 4, 10)
    ((4, 4), (4, 10))
    """
    if isinstance(domain, Box):
        return (bits,) * domain.d, (fine_bits,) * domain.d
    coarse, fine = [], []
    for col in domain._cols:
        width = col.bits
        if col.kind in ("categorical", "integer", "boolean") and width <= exact_bits:
            c = f = width
        elif col.kind == "categorical":  # its single table keeps every category
            c, f = exact_bits, min(width, MAX_FINE_BITS)
        else:
            c = min(width, bits)
            f = max(c, min(width, fine_bits))
        coarse.append(c)
        fine.append(f)
    return tuple(coarse), tuple(fine)


def table_cells(coarse: tuple[int, ...], fine: tuple[int, ...]) -> int:
    """Counts of the state: every pair table and every single table.

    >>> table_cells((2, 3, 3), (2, 5, 5))  # pairs 32 + 32 + 64, singles 4 + 32 + 32
    196
    """
    pairs = sum(2 ** (coarse[i] + coarse[j]) for i, j in pair_list(len(coarse)))
    return pairs + sum(2**f for f in fine)


@functools.lru_cache(maxsize=256)
def _pair_schema(bits_i: int, bits_j: int) -> Schema:
    """Two integer columns of ``bits_i`` and ``bits_j`` bits: a pair table's cells."""
    return Schema(
        [
            {"name": "a", "kind": "integer", "low": 0, "high": 2**bits_i - 1},
            {"name": "b", "kind": "integer", "low": 0, "high": 2**bits_j - 1},
        ]
    )


@functools.lru_cache(maxsize=256)
def pair_spread(bits_i: int, bits_j: int) -> tuple[np.ndarray, np.ndarray]:
    """``(to_i, to_j)``: the cell code of a pair table is ``to_i[a] | to_j[c]`` for coarse bins
    ``a`` of column ``i`` and ``c`` of column ``j`` (read-only uint64 lookups).

    >>> to_i, to_j = pair_spread(2, 1)  # levels cut a, c, then a's last bit
    >>> (to_i[:, None] | to_j[None, :]).tolist()  # row a, column c
    [[0, 2], [1, 3], [4, 6], [5, 7]]
    """
    schema = _pair_schema(bits_i, bits_j)
    depth = bits_i + bits_j
    to_i = schema.encode({"a": np.arange(2**bits_i), "b": np.zeros(2**bits_i, np.int64)}, depth)
    to_j = schema.encode({"a": np.zeros(2**bits_j, np.int64), "b": np.arange(2**bits_j)}, depth)
    for arr in (to_i, to_j):
        arr.setflags(write=False)
    return to_i, to_j


@functools.lru_cache(maxsize=256)
def pair_grid(bits_i: int, bits_j: int) -> np.ndarray:
    """``grid[a, c]``: the position in a pair table of the cell with coarse bins ``a, c``."""
    to_i, to_j = pair_spread(bits_i, bits_j)
    grid = (to_i[:, None] | to_j[None, :]).astype(np.int64)
    grid.setflags(write=False)
    return grid


@functools.lru_cache(maxsize=256)
def pair_gammas(bits_i: int, bits_j: int) -> tuple[float, ...]:
    """The diameters of levels −1 … ``bits_i + bits_j`` of a pair table's PMM tree."""
    schema = _pair_schema(bits_i, bits_j)
    return tuple(schema.gamma(lv) for lv in range(-1, bits_i + bits_j + 1))


def single_gammas(bits: int) -> tuple[float, ...]:
    """The diameters of levels −1 … ``bits`` of a single-column table's PMM tree."""
    return tuple(Box.unit(1).gamma(lv) for lv in range(-1, bits + 1))


class Layout:
    """The tables of a marginal synthesizer on ``domain`` (a Box or a Schema): sizes, offsets
    in the flat state, Morton grids and the cells that name a value. The bins come from
    ``bits``, ``fine_bits`` and ``exact_bits`` (:func:`column_bits`), or are given per column as
    ``columns=(coarse, fine)``."""

    def __init__(
        self,
        domain: Any,
        bits: int = 1,
        fine_bits: int = 1,
        exact_bits: int = EXACT_BITS,
        *,
        columns: tuple[tuple[int, ...], tuple[int, ...]] | None = None,
    ):
        self.domain = domain
        self.d = domain.d
        if columns is None:
            self.coarse, self.fine = column_bits(domain, bits, fine_bits, exact_bits)
        else:
            self.coarse, self.fine = tuple(map(int, columns[0])), tuple(map(int, columns[1]))
        self.schema = domain if isinstance(domain, Schema) else None
        self.pairs = pair_list(self.d)
        self.pair_sizes = tuple(2 ** (self.coarse[i] + self.coarse[j]) for i, j in self.pairs)
        self.single_sizes = tuple(2**f for f in self.fine)
        self.pair_offsets = np.concatenate([[0], np.cumsum(self.pair_sizes, dtype=np.int64)])
        self.single_offsets = np.concatenate([[0], np.cumsum(self.single_sizes, dtype=np.int64)])
        self.pair_cells = int(self.pair_offsets[-1])
        self.cells = self.pair_cells + int(self.single_offsets[-1])

    @property
    def nbytes(self) -> int:
        """Bytes of a state of this layout: ``8 · cells + 64``."""
        return 8 * self.cells + OVERHEAD

    def categorical(self, j: int) -> bool:
        """True when column ``j`` is a schema's categorical (its bins have no order)."""
        return self.schema is not None and self.schema._cols[j].kind == "categorical"

    # ------------------------------------------------------------------ views of a flat array
    def pair_tables(self, flat: np.ndarray) -> list[np.ndarray]:
        """The ``P`` pair tables (views) of a flat array of every pair cell."""
        o = self.pair_offsets
        return [flat[o[k] : o[k + 1]] for k in range(len(self.pairs))]

    def single_tables(self, flat: np.ndarray) -> list[np.ndarray]:
        """The ``d`` single tables (views) of a flat array of every single cell."""
        o = self.single_offsets
        return [flat[o[j] : o[j + 1]] for j in range(self.d)]

    # ------------------------------------------------------------------ cells naming a value
    def fine_ranges(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """Code range ``[lo, hi)`` (uint64) of each fine bin of column ``j`` of a schema."""
        col = self.schema._cols[j]
        shift = _U64(col.bits - self.fine[j])
        t = np.arange(2 ** self.fine[j], dtype=_U64)
        return t << shift, (t + _U64(1)) << shift

    def valid_fine(self, j: int) -> np.ndarray:
        """True for the fine bins of column ``j`` holding a value (all of them on a box)."""
        if self.schema is None:
            return np.ones(self.single_sizes[j], dtype=bool)
        lo, hi = self.fine_ranges(j)
        return self.schema._cols[j].valid_count(lo, hi) > 0

    def valid_coarse(self, j: int) -> np.ndarray:
        """True for the coarse bins of column ``j`` holding a value."""
        return self.valid_fine(j).reshape(2 ** self.coarse[j], -1).any(axis=1)

    def any_invalid(self) -> bool:
        """True when some cell names no value (a schema column with unused codes)."""
        return self.schema is not None and not all(self.valid_fine(j).all() for j in range(self.d))

    def valid_pair(self, k: int) -> np.ndarray:
        """True for the cells of pair table ``k`` (Morton order) holding a value."""
        i, j = self.pairs[k]
        ok = np.zeros(self.pair_sizes[k], dtype=bool)
        cells = pair_grid(self.coarse[i], self.coarse[j])
        ok[cells] = self.valid_coarse(i)[:, None] & self.valid_coarse(j)[None, :]
        return ok

    def valid_tables(self) -> list[np.ndarray]:
        """The valid-cell mask of every table, pairs first (as in the state)."""
        return [self.valid_pair(k) for k in range(len(self.pairs))] + [
            self.valid_fine(j) for j in range(self.d)
        ]


class ColumnBins:
    """The bin parameters a marginal synthesizer and its release both state (each kept as
    ``self._<name>``, the columns' bins in ``self._layout``)."""

    _layout: Layout

    bits = ReadOnly[int]("Bits of a continuous column's coarse bins (its pair grids).")
    fine_bits = ReadOnly[int]("Bits of a continuous column's fine bins (its single grid).")
    exact_bits = ReadOnly[Any](
        "On a Schema: the most code bits of a discrete column kept exact (``None`` on a Box)."
    )

    @property
    def column_bits(self) -> list[tuple[int, int]]:
        """``(coarse, fine)`` bits of each column's bins."""
        return list(zip(self._layout.coarse, self._layout.fine, strict=True))
