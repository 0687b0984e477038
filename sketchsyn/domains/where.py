"""Per-column conditions of a range count on a table: ``carrier == "AA" and dep_delay > 60``.

A condition is either text, read with Python's own parser (never evaluated), or a dict:

* text: comparisons of a column with values (``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``,
  chained as in ``60 < dep_delay <= 120``; ``in`` / ``not in`` a list), joined by ``and``;
* a dict ``{column: value}``: a value means ``==``, a list or set ``in``, a 2-tuple
  ``(low, high)`` ``low <= column <= high`` (``None`` for no bound).

Only ``and`` joins conditions: a release weighs each cell by the product of its columns' shares,
which holds for a conjunction of one condition per column (``or`` across columns is not such a
product; several values of one column are ``in [...]``).

>>> from sketchsyn.domains import Schema
>>> s = Schema([{"name": "carrier", "kind": "categorical", "categories": ["9E", "AA", "UA"]},
...             {"name": "dep_delay", "kind": "numeric", "low": -120, "high": 1440}])
>>> conditions = parse_where('carrier in ["AA", "UA"] and 60 < dep_delay', s)
>>> conditions[0]
Condition([(1.0, 1.0, False, False), (2.0, 2.0, False, False)])
>>> conditions[1]
Condition([(60.0, inf, True, False)])
>>> parse_where({"dep_delay": (None, 0)}, s)
{1: Condition([(-inf, 0.0, False, False)])}
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ParameterError

__all__ = ["Condition", "parse_where"]

_OPS = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.In: "in",
    ast.NotIn: "not in",
}
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


class Condition:
    """A set of a column's units: a union of intervals ``(low, high, low_open, high_open)``.

    ``fraction`` of a cell's values inside it is what a range count weighs a leaf by.

    >>> c = Condition.compare(">", 60.0)
    >>> c & Condition.compare("<=", 120.0)
    Condition([(60.0, 120.0, True, False)])
    """

    __slots__ = ("intervals",)

    def __init__(self, intervals: Sequence[tuple[float, float, bool, bool]]) -> None:
        self.intervals = [tuple(iv) for iv in intervals if iv[0] <= iv[1]]

    @classmethod
    def everything(cls) -> Condition:
        return cls([(-math.inf, math.inf, False, False)])

    @classmethod
    def compare(cls, op: str, value: float) -> Condition:
        inf = math.inf
        table = {
            "==": [(value, value, False, False)],
            "!=": [(-inf, value, False, True), (value, inf, True, False)],
            "<": [(-inf, value, False, True)],
            "<=": [(-inf, value, False, False)],
            ">": [(value, inf, True, False)],
            ">=": [(value, inf, False, False)],
        }
        return cls(table[op])

    @classmethod
    def one_of(cls, values: Sequence[float]) -> Condition:
        return cls([(v, v, False, False) for v in sorted(set(values))])

    def __and__(self, other: Condition) -> Condition:
        out = []
        for a_lo, a_hi, a_lo_open, a_hi_open in self.intervals:
            for b_lo, b_hi, b_lo_open, b_hi_open in other.intervals:
                lo = max(a_lo, b_lo)
                lo_open = (a_lo == lo and a_lo_open) or (b_lo == lo and b_lo_open)
                hi = min(a_hi, b_hi)
                hi_open = (a_hi == hi and a_hi_open) or (b_hi == hi and b_hi_open)
                if lo < hi or (lo == hi and not lo_open and not hi_open):
                    out.append((lo, hi, lo_open, hi_open))
        return Condition(out)

    def __invert__(self) -> Condition:
        out, start, start_open = [], -math.inf, False
        for lo, hi, lo_open, hi_open in sorted(self.intervals):
            out.append((start, lo, start_open, not lo_open))
            start, start_open = hi, not hi_open
        out.append((start, math.inf, start_open, False))
        return Condition([iv for iv in out if iv[0] < iv[1] or (not iv[2] and not iv[3])])

    def __repr__(self) -> str:
        return f"Condition({self.intervals!r})"


def _fail(where: Any, why: str) -> ParameterError:
    return ParameterError(f"The 'where' condition {where!r} {why}")


def _literal(node: ast.AST, where: Any) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise _fail(where, f"compares with {ast.unparse(node)!r}, which is not a value") from None


def parse_where(where: Any, schema: Any) -> dict[int, Condition]:
    """``{column index: Condition}`` of a text or dict condition (module docstring)."""
    names = {n: j for j, n in enumerate(schema.names)}
    out: dict[int, Condition] = {}

    def add(column: str, op: str, value: Any) -> None:
        if column not in names:
            raise _fail(where, f"names no column {column!r} (columns: {list(schema.names)})")
        j = names[column]
        col = schema.column(column)
        if op in ("in", "not in"):
            if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
                raise _fail(where, f"needs a list after {op!r}; got {value!r}")
            cond = Condition.one_of([col.value_units(v) for v in value])
            cond = ~cond if op == "not in" else cond
        else:
            cond = Condition.compare(op, col.value_units(value))
        out[j] = out[j] & cond if j in out else cond

    if isinstance(where, Mapping):
        for column, spec in where.items():
            if isinstance(spec, tuple):
                if len(spec) != 2:
                    raise _fail(
                        where, f"gives column {column!r} a tuple of {len(spec)}: use (low, high)"
                    )
                if spec[0] is not None:
                    add(column, ">=", spec[0])
                if spec[1] is not None:
                    add(column, "<=", spec[1])
            elif isinstance(spec, (list, set, frozenset)):
                add(column, "in", list(spec))
            else:
                add(column, "==", spec)
        return out
    if not isinstance(where, str):
        raise _fail(where, "must be text such as 'carrier == \"AA\" and dep_delay > 60' or a dict")
    try:
        tree = ast.parse(where.strip(), mode="eval").body
    except SyntaxError as exc:
        raise _fail(where, f"is not a condition: {exc.msg}") from None
    parts = tree.values if isinstance(tree, ast.BoolOp) and isinstance(tree.op, ast.And) else [tree]
    for part in parts:
        if isinstance(part, ast.BoolOp):
            raise _fail(
                where, "uses 'or': join conditions with 'and'; use 'in [...]' for several values"
            )
        if not isinstance(part, ast.Compare):
            raise _fail(where, f"has {ast.unparse(part)!r}, which is not a comparison")
        left = part.left
        for op_node, right in zip(part.ops, part.comparators, strict=True):
            op = _OPS.get(type(op_node))
            if op is None:
                raise _fail(where, f"uses {type(op_node).__name__}, not a supported comparison")
            if isinstance(left, ast.Name) and not isinstance(right, ast.Name):
                add(left.id, op, _literal(right, where))
            elif isinstance(right, ast.Name) and not isinstance(left, ast.Name) and op in _FLIP:
                add(right.id, _FLIP[op], _literal(left, where))
            else:
                raise _fail(
                    where,
                    f"compares {ast.unparse(left)!r} with {ast.unparse(right)!r}: compare one "
                    "column with values",
                )
            left = right
    for j, cond in out.items():
        if not cond.intervals:
            out[j] = Condition([])
        elif any(math.isnan(v) for iv in cond.intervals for v in iv[:2]):
            raise _fail(where, f"compares column {schema.names[j]!r} with NaN")
    return out
