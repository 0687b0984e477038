"""The private content of a table release that chose what it measured: :class:`SelectedTables`.

It holds what the release read about the data and nothing else: every column's noisy one-way
table (fine bins), the pairs it measured (in order), each with the groups of its two columns'
coarse bins and its noisy grouped table, the pairs picked as the spanning tree, and the public
plan of budgets (:class:`~sketchsyn.synth.marginal.budget.ReleasePlan`). Groups are a function
of released counts, stored so that a release reads the same whatever later versions of the
grouping rule do. :meth:`SelectedTables.fit` builds the sampling model from them
(:mod:`~sketchsyn.synth.marginal.estimate`: post-processing).

Bytes: arrays ``singles`` (int64, every column's fine bins one after another), ``pairs``
(int64 ``(M, 2)``), ``groups`` (int64, for each measured pair the groups of its first column's
coarse bins then its second's), ``tables`` (int64, the noisy grouped tables one after another,
row-major), ``tree`` (int64 ``(T, 2)``, ``T`` = ``d − 1`` or 0) and, when the plan measured
the row count, ``count`` (int64 ``(1,)``); the header's ``plan`` and ``column_bits`` (the bins
measured: the state's, or fewer where the noisy count merged them).
:meth:`SelectedTables.read` checks every field and array before building.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ...errors import EPSILON_RANGE, SerializationError
from ...io.serial import Arrays, MetaReader
from .budget import ReleasePlan
from .estimate import fit_release
from .layout import MAX_BITS, MAX_FINE_BITS, Layout
from .select import Measurements

__all__ = ["MAX_NOISY", "SelectedTables"]

MAX_NOISY = 2**53  # a noisy count's magnitude in a blob (exact in float64)
_PLAN_FIELDS = ("singles_epsilon", "select_epsilon", "pair_epsilon", "rounds", "sensitivity")
_KIND = "MarginalDistribution"


class SelectedTables:
    """Noisy one-way tables, the measured pairs with their groups and noisy tables, and the
    plan (module docstring)."""

    def __init__(self, layout: Layout, plan: ReleasePlan, measurements: Measurements) -> None:
        self.layout = layout
        self.plan = plan
        self.singles = [np.asarray(s, dtype=np.int64) for s in measurements.singles]
        self.measured = [
            (
                (int(i), int(j)),
                np.asarray(gi, np.int64),
                np.asarray(gj, np.int64),
                np.asarray(t, np.int64),
            )
            for (i, j), gi, gj, t in measurements.measured
        ]
        self.tree = [(int(i), int(j)) for i, j in measurements.tree]
        self.count = None if measurements.count is None else int(measurements.count)

    @property
    def nbytes(self) -> int:
        """Bytes of the noisy counts and groups."""
        arrays = self.singles + [a for m in self.measured for a in m[1:]]
        return int(sum(a.nbytes for a in arrays)) + 16 * (len(self.measured) + len(self.tree))

    def fit(self) -> dict[str, Any]:
        """The sampling model (:func:`~sketchsyn.synth.marginal.estimate.fit_release`)."""
        return fit_release(
            self.layout, self.singles, self.measured, self.plan.single_scale, self.plan.pair_scale
        )

    def same_as(self, other: SelectedTables) -> bool:
        a, b = self.arrays(), other.arrays()
        return (
            self.plan == other.plan
            and self.layout.coarse == other.layout.coarse
            and self.layout.fine == other.layout.fine
            and a.keys() == b.keys()
            and all(np.array_equal(a[k], b[k]) for k in a)
        )

    # ------------------------------------------------------------------ bytes
    def meta(self) -> dict[str, Any]:
        plan = {name: getattr(self.plan, name) for name in _PLAN_FIELDS}
        if self.plan.count_epsilon:
            plan["count_epsilon"] = self.plan.count_epsilon
        bits = [[c, f] for c, f in zip(self.layout.coarse, self.layout.fine, strict=True)]
        return {"plan": plan, "column_bits": bits}

    def arrays(self) -> dict[str, np.ndarray]:
        empty = np.zeros(0, dtype=np.int64)
        count = {} if self.count is None else {"count": np.array([self.count], dtype=np.int64)}
        return count | {
            "singles": np.concatenate(self.singles),
            "pairs": np.array([m[0] for m in self.measured], dtype=np.int64).reshape(-1, 2),
            "groups": np.concatenate([np.concatenate(m[1:3]) for m in self.measured] or [empty]),
            "tables": np.concatenate([m[3].ravel() for m in self.measured] or [empty]),
            "tree": np.array(self.tree, dtype=np.int64).reshape(-1, 2),
        }

    @classmethod
    def read(
        cls, fields: MetaReader, arrays: Arrays, schema: Any, epsilon: float
    ) -> SelectedTables:
        """Rebuild from a blob: every header field and array checked (types, ranges, shapes,
        the budget's exact sum, groups that cover their labels, measured pairs that connect
        every column) before anything is built; any refusal is a ``SerializationError``."""

        def fail(text: str) -> SerializationError:
            return SerializationError(f"{_KIND} blob: {text}")

        d = schema.d
        layout = Layout(schema, columns=_column_bits(fields, schema, fail))
        plan = _plan(fields, d, epsilon, fail)
        size = (sum(layout.single_sizes),)
        singles_flat = fields.bounded(arrays, "singles", np.int64, size, -MAX_NOISY, MAX_NOISY)
        o = layout.single_offsets
        singles = [singles_flat[o[j] : o[j + 1]] for j in range(d)]
        pairs = fields.array(arrays, "pairs", np.int64, (plan.measured, 2))
        measured_pairs = _pairs(pairs, d, fail)
        sizes = [2 ** layout.coarse[i] + 2 ** layout.coarse[j] for i, j in measured_pairs]
        groups = fields.array(arrays, "groups", np.int64, (sum(sizes),))
        maps, start = [], 0
        for (i, j), size in zip(measured_pairs, sizes, strict=True):
            gi = groups[start : start + 2 ** layout.coarse[i]]
            gj = groups[start + gi.size : start + size]
            maps.append(
                (
                    _labels(gi, f"array 'groups' (pair {(i, j)})", fail),
                    _labels(gj, f"array 'groups' (pair {(i, j)})", fail),
                )
            )
            start += size
        cells = [(int(gi.max()) + 1) * (int(gj.max()) + 1) for gi, gj in maps]
        tables = fields.bounded(arrays, "tables", np.int64, (sum(cells),), -MAX_NOISY, MAX_NOISY)
        tree = fields.array(arrays, "tree", np.int64, (0 if plan.selections == 0 else d - 1, 2))
        tree_pairs = [(int(a), int(b)) for a, b in tree]
        if not set(tree_pairs) <= set(measured_pairs):
            raise fail("array 'tree' names a pair that was not measured")
        count = None
        if plan.count_epsilon:
            count = int(fields.bounded(arrays, "count", np.int64, (1,), -MAX_NOISY, MAX_NOISY)[0])
        for name in arrays:
            if name not in ("singles", "pairs", "groups", "tables", "tree") + (
                ("count",) if plan.count_epsilon else ()
            ):
                raise fail(f"unexpected array {name!r}")
        measured, start = [], 0
        for pair, (gi, gj), size in zip(measured_pairs, maps, cells, strict=True):
            shape = (int(gi.max()) + 1, int(gj.max()) + 1)
            measured.append((pair, gi, gj, tables[start : start + size].reshape(shape)))
            start += size
        return cls(layout, plan, Measurements(singles, measured, tree_pairs, count=count))


def _column_bits(fields: MetaReader, schema: Any, fail: Any) -> tuple[tuple[int, ...], ...]:
    raw = fields.as_dict().get("column_bits")
    if not isinstance(raw, list) or len(raw) != schema.d:
        raise fail(f"header field 'column_bits' must list {schema.d} [coarse, fine] pairs")
    coarse, fine = [], []
    for j, (item, col) in enumerate(zip(raw, schema._cols, strict=True)):
        ok = isinstance(item, list) and len(item) == 2
        ok = ok and all(isinstance(v, int) and not isinstance(v, bool) for v in item)
        top = min(col.bits, MAX_FINE_BITS)
        if not ok or not 1 <= item[0] <= min(item[1], MAX_BITS) or not item[1] <= top:
            raise fail(
                f"header field 'column_bits' entry {j} must be [coarse, fine] ints with "
                f"1 <= coarse <= fine <= {top} and coarse <= {MAX_BITS}"
            )
        coarse.append(item[0])
        fine.append(item[1])
    from .checks import check_size

    check_size(
        sum(
            2 ** (coarse[i] + coarse[j])
            for i in range(len(coarse))
            for j in range(i + 1, len(coarse))
        )
        + sum(2**f for f in fine)
    )
    return tuple(coarse), tuple(fine)


def _plan(fields: MetaReader, d: int, epsilon: float, fail: Any) -> ReleasePlan:
    raw = MetaReader(fields.dict("plan"), _KIND)
    extra = raw.names() - set(_PLAN_FIELDS) - {"count_epsilon"}
    if extra:
        raise fail(f"header field 'plan' has unknown fields {sorted(extra)}")
    pairs = d * (d - 1) // 2
    rounds = raw.int("rounds", minimum=0, maximum=pairs - (d - 1))
    sensitivity = raw.int("sensitivity", minimum=1, maximum=2**30)
    select = raw.float("select_epsilon", minimum=0.0, maximum=EPSILON_RANGE[1])
    plan = ReleasePlan(
        epsilon,
        d,
        raw.epsilon("singles_epsilon"),
        select,
        raw.epsilon("pair_epsilon"),
        rounds,
        sensitivity,
        raw.epsilon("count_epsilon") if raw.has("count_epsilon") else 0.0,
    )
    if plan.selections and not select >= EPSILON_RANGE[0]:
        raise fail("header field 'plan' needs a positive 'select_epsilon' for its selections")
    if plan.total_fraction() > 1 or plan.total_fraction() < Fraction(1) - Fraction(1, 10**9):
        raise fail(f"header field 'plan' spends {float(plan.total_fraction()):.12g}·ε, not ε")
    return plan


def _pairs(pairs: np.ndarray, d: int, fail: Any) -> list[tuple[int, int]]:
    out = [(int(i), int(j)) for i, j in pairs]
    if any(not 0 <= i < j < d for i, j in out) or len(set(out)) != len(out):
        raise fail(f"array 'pairs' must hold distinct (i, j), 0 <= i < j < {d}")
    part = list(range(d))

    def root(x: int) -> int:
        while part[x] != x:
            x = part[x]
        return x

    for i, j in out:
        part[root(i)] = root(j)
    if len({root(x) for x in range(d)}) != 1:
        raise fail("array 'pairs' must connect every column")
    return out


def _labels(g: np.ndarray, name: str, fail: Any) -> np.ndarray:
    """Group labels ``0 … K − 1``, each used."""
    if g.size == 0 or g.min() < 0 or g.max() >= g.size:
        raise fail(f"{name} must be labels in [0, {g.size})")
    if np.unique(g).size != int(g.max()) + 1:
        raise fail(f"{name} must use every label from 0 to its largest")
    return g
