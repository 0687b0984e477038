"""The release of :class:`~sketchsyn.synth.marginal.MarginalSynthesizer`:
:class:`MarginalDistribution`.

It holds only private values: the noisy counts of every pair of columns (a grid of the two
columns' coarse bins: on a Box the consistent leaves of one PMM tree per pair, on a Schema a
flat noisy histogram) and of every single column (its fine bins, likewise), with the public
parameters (:mod:`~sketchsyn.synth.marginal.noise`). The bins
of each column are fixed by the domain and the bits (:mod:`~sketchsyn.synth.marginal.layout`):
on a :class:`~sketchsyn.domains.Box` ``2**bits`` and ``2**fine_bits`` equal cells, on a
:class:`~sketchsyn.domains.Schema` a discrete column's exact values when it has at most
``exact_bits`` code bits. Everything else is computed from them when first needed, and is
post-processing (:mod:`~sketchsyn.synth.marginal.fit`): shared columns made to agree, a
maximum spanning tree on the noisy mutual information (Chow and Liu), and sampling along it:
the root column's coarse bin from its consensus marginal, each other column's from the
conditional row of its edge given its parent's bin. On a Schema the rows' coarse bins are then
refined toward every released pair table, not only the tree's
(:mod:`~sketchsyn.synth.marginal.refine`, ``refine=`` rounds; a Box's rows are the tree's unless
asked). Last, a fine bin inside each coarse one from the column's single-column counts, and a
value uniform over the fine bin (on a schema, over the values its codes name: never a category
outside the schema, an integer outside its range or a non-integer in an integer column).

Range counts (:meth:`MarginalDistribution.count`) are exact for the tree model (belief
propagation over the coarse bins, fine bins weighted by their share inside the query): the rows
of ``sample(m, refine=0)``.

>>> import numpy as np
>>> from sketchsyn import Box
>>> from sketchsyn.synth.marginal import MarginalSynthesizer
>>> X = np.random.default_rng(0).random((2000, 3))
>>> syn = MarginalSynthesizer(Box.unit(3), epsilon=1.0, bits=3, fine_bits=5, rng=1)
>>> syn.update_many(X)
>>> dist = syn.release()
>>> MarginalDistribution.from_bytes(dist.to_bytes()) == dist
True
>>> dist.sample(4, rng=2).shape
(4, 3)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...attributes import ReadOnly
from ...domains import Box, Schema
from ...domains.where import Condition, parse_where
from ...errors import ParameterError, SerializationError, check_epsilon, check_int
from ...io.serial import Arrays, MetaReader
from ...io.summary import Summary
from ...privacy.rng import RNGLike, as_source
from .checks import TABLE_PARAMS, check_counts, check_params, check_split
from .fit import draw_rows, fit_model, maximum_spanning_tree
from .layout import (
    EXACT_BITS,
    MAX_BITS,
    MAX_COLUMNS,
    MAX_EXACT_BITS,
    MAX_FINE_BITS,
    ColumnBins,
    Layout,
    pair_grid,
    pair_list,
)
from .refine import ROUNDS, refine_grouped
from .refine import refine as refine_rows
from .selected import SelectedTables

__all__ = [
    "MAX_BITS",
    "MAX_COLUMNS",
    "MAX_FINE_BITS",
    "MarginalDistribution",
    "maximum_spanning_tree",
    "morton_grid",
    "pair_list",
    "spread_bits",
]

_KIND = "MarginalDistribution"
_SAMPLE_CHUNK = 1 << 16
_REFINE_CHUNK = 1 << 20  # rows refined together (a block matches the tables on its own)
_MAX_ROUNDS = 1000
_FIELDS = {"domain", "epsilon", "pair_epsilon", "single_epsilon", "bits", "fine_bits", "params"}
_SELECTED_FIELDS = {"domain", "epsilon", "plan", "column_bits", "params"}
# The synthesizer's parameters a table release states (only the first two are fixed by it).
_SELECTED_PARAMS = ("epsilon", *TABLE_PARAMS, "unit", "max_rows")
_U64 = np.uint64


def spread_bits(q: np.ndarray) -> np.ndarray:
    """Bit ``k`` of each value (below ``2**32``) moved to bit ``2k`` (uint64).

    >>> spread_bits(np.array([0b111], dtype=np.uint64)).tolist() == [0b10101]
    True
    """
    x = np.asarray(q, dtype=np.uint64) & np.uint64(0xFFFFFFFF)
    for shift, mask in (
        (16, 0x0000FFFF0000FFFF),
        (8, 0x00FF00FF00FF00FF),
        (4, 0x0F0F0F0F0F0F0F0F),
        (2, 0x3333333333333333),
        (1, 0x5555555555555555),
    ):
        x = (x | (x << np.uint64(shift))) & np.uint64(mask)
    return x


def morton_grid(bits: int) -> np.ndarray:
    """``grid[a, c]``: the level-``2·bits`` Morton code of the cell with column bins ``a, c``
    in a 2-D :class:`~sketchsyn.domains.Box` (level 1 halves the first column).

    >>> morton_grid(1).tolist()
    [[0, 1], [2, 3]]
    """
    return pair_grid(bits, bits).copy()


def _count_tables(value: Any, name: str) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype.kind not in "iu":
        raise ParameterError(
            f"The {name!r} parameter of {_KIND} must be integer counts. Got {arr.dtype} instead."
        )
    return arr


class MarginalDistribution(Summary, ColumnBins):
    """The release of a :class:`~sketchsyn.synth.marginal.MarginalSynthesizer`: noisy 2-way
    and 1-way marginals and the tree model sampled from them.

    Saved state: **private** (``STATE_PRIVACY = "private"``): the noisy counts of every pair
    and single column and the public parameters; no exact value.

    Parameters
    ----------
    domain : Box or Schema
        Public bounds (a Box) or description (a Schema) of the 2 to 64 columns.
    epsilon : float
        Total budget of the release (pure ε-DP, add/remove one row); it must be what the split
        spends: ``P·pair_epsilon + d·single_epsilon`` (exact rationals, within 1e-9 of ε).
    pair_counts : ndarray of int64
        Consistent counts of each pair's grid in Morton order (pairs as :func:`pair_list`): on a
        Box ``(P, 4**bits)``; on a Schema one flat array, the tables one after another.
    single_counts : ndarray of int64
        Consistent counts of each column's fine grid: on a Box ``(d, 2**fine_bits)``; on a
        Schema one flat array.
    pair_epsilon, single_epsilon : float
        Budget of each pair tree and of each single-column tree.
    params : dict, optional
        The synthesizer's public parameters (``epsilon``, ``bits``, ``fine_bits``,
        ``singles_share``, ``consistency``, and on a Schema ``exact_bits``), each checked.
    bits, fine_bits, exact_bits : int, optional
        The bins (:mod:`~sketchsyn.synth.marginal.layout`); on a Box read from the shapes, on
        a Schema ``bits`` and ``fine_bits`` are needed (``exact_bits`` defaults to 8).
    """

    STATE_PRIVACY = "private"
    FORMAT_VERSION = 3  # 3: its row count; 2: a table release that chose its pairs
    READS = (1, 2, 3)
    STATE_DECLARED = True  # first written with container 3: every blob says its state

    def __init__(
        self,
        domain: Box | Schema,
        epsilon: float,
        pair_counts: Any,
        single_counts: Any,
        pair_epsilon: float,
        single_epsilon: float,
        params: dict[str, Any] | None = None,
        *,
        bits: int | None = None,
        fine_bits: int | None = None,
        exact_bits: int | None = None,
    ) -> None:
        owner = _KIND
        if not isinstance(domain, (Box, Schema)) or not 2 <= domain.d <= MAX_COLUMNS:
            raise ParameterError(
                f"The 'domain' parameter of {owner} must be a Box or a Schema of 2 to "
                f"{MAX_COLUMNS} columns. Got {domain!r} instead."
            )
        d = domain.d
        pairs = _count_tables(pair_counts, "pair_counts")
        singles = _count_tables(single_counts, "single_counts")
        if isinstance(domain, Box):
            if exact_bits is not None:
                raise ParameterError(f"The 'exact_bits' parameter of {owner} is for a Schema.")
            got = self._box_bits(pairs, singles, d)
            for name, want, value in (("bits", bits, got[0]), ("fine_bits", fine_bits, got[1])):
                if want is not None and want != value:
                    raise ParameterError(
                        f"The {name!r} parameter of {owner} is {want!r} but the counts have "
                        f"{value} bits."
                    )
            bits, fine_bits = got
        else:
            if bits is None or fine_bits is None:
                raise ParameterError(f"{owner} on a Schema needs 'bits' and 'fine_bits'.")
            bits = check_int(bits, "bits", owner, minimum=1, maximum=MAX_BITS)
            fine_bits = check_int(
                fine_bits, "fine_bits", owner, minimum=bits, maximum=MAX_FINE_BITS
            )
            exact_bits = check_int(
                EXACT_BITS if exact_bits is None else exact_bits,
                "exact_bits",
                owner,
                minimum=1,
                maximum=MAX_EXACT_BITS,
            )
        layout = Layout(domain, bits, fine_bits, EXACT_BITS if exact_bits is None else exact_bits)
        if isinstance(domain, Schema):
            for name, arr, size in (
                ("pair_counts", pairs, layout.pair_cells),
                ("single_counts", singles, layout.cells - layout.pair_cells),
            ):
                if arr.shape != (size,):
                    raise ParameterError(
                        f"The {name!r} parameter of {owner} must be {size} counts in one flat "
                        f"array for this schema and bits. Got shape {arr.shape} instead."
                    )
        self._pairs = np.ascontiguousarray(pairs, dtype=np.int64)
        self._singles = np.ascontiguousarray(singles, dtype=np.int64)
        self._layout = layout
        self._pair_tables = layout.pair_tables(self._pairs.reshape(-1))
        self._single_tables = layout.single_tables(self._singles.reshape(-1))
        check_counts(
            self._pair_tables + self._single_tables,
            [f"pair table {p}" for p in layout.pairs] + [f"column {j}'s table" for j in range(d)],
            lambda text: ParameterError(f"The counts of {owner}: {text}."),
        )
        self._epsilon = check_epsilon(epsilon, owner)
        self._pair_epsilon = check_epsilon(pair_epsilon, owner, "pair_epsilon")
        self._single_epsilon = check_epsilon(single_epsilon, owner, "single_epsilon")
        self._domain = domain
        self._bits, self._fine_bits, self._exact_bits = bits, fine_bits, exact_bits
        expected = {
            "epsilon": self._epsilon,
            "bits": bits,
            "fine_bits": fine_bits,
            "singles_share": None,
            "consistency": None,
        }
        if exact_bits is not None:
            expected["exact_bits"] = exact_bits

        def fail(text: str) -> ParameterError:
            return ParameterError(f"{owner}: {text}.")

        self._params = check_params(params, expected, fail)
        check_split(
            self._epsilon,
            self._pair_epsilon,
            self._single_epsilon,
            pairs=len(layout.pairs),
            columns=d,
            fail=fail,
            share=self._params.get("singles_share"),
        )
        self._model: dict[str, Any] | None = None
        self._selected: SelectedTables | None = None

    @classmethod
    def from_selected(
        cls, schema: Schema, epsilon: float, selected: SelectedTables, params: dict | None = None
    ) -> MarginalDistribution:
        """The release of a table whose pairs were chosen privately: ``selected`` holds its
        noisy one-way tables, measured pairs and plan
        (:class:`~sketchsyn.synth.marginal.selected.SelectedTables`)."""
        obj = cls.__new__(cls)
        obj._domain = schema
        obj._epsilon = check_epsilon(epsilon, _KIND)
        obj._layout = selected.layout
        obj._selected = selected
        plan = selected.plan
        obj._pair_epsilon, obj._single_epsilon = plan.pair_epsilon, plan.singles_epsilon
        obj._bits, obj._fine_bits = max(selected.layout.coarse), max(selected.layout.fine)
        obj._exact_bits = None
        bits = [[c, f] for c, f in zip(selected.layout.coarse, selected.layout.fine, strict=True)]
        expected: dict[str, Any] = dict.fromkeys(_SELECTED_PARAMS)
        expected |= {"epsilon": obj._epsilon}

        def fail(text: str) -> ParameterError:
            return ParameterError(f"{_KIND}: {text}.")

        obj._params = check_params(params, expected, fail)
        state_bits = obj._params.get("column_bits")  # the synthesizer's: as many bins or more
        if state_bits is not None and (
            len(state_bits) != len(bits)
            or any(c > sc or f > sf for (c, f), (sc, sf) in zip(bits, state_bits, strict=True))
        ):
            raise fail(
                f"'params' field 'column_bits' must give every column at least the bins the "
                f"release measured ({bits}), got {state_bits!r}"
            )
        obj._pairs = obj._singles = np.zeros(0, dtype=np.int64)
        obj._pair_tables, obj._single_tables = [], []
        obj._model = None
        return obj

    @staticmethod
    def _box_bits(pairs: np.ndarray, singles: np.ndarray, d: int) -> tuple[int, int]:
        """``(bits, fine_bits)`` of a Box release's ``(P, 4**bits)`` and ``(d, 2**fine)``."""
        owner = _KIND
        n_pairs = d * (d - 1) // 2
        if pairs.ndim != 2 or pairs.shape[0] != n_pairs:
            raise ParameterError(
                f"The 'pair_counts' parameter of {owner} must be integer counts of shape "
                f"({n_pairs}, 4**bits). Got shape {pairs.shape} instead."
            )
        bits = int(round(math.log(max(pairs.shape[1], 1), 4)))
        if not 1 <= bits <= MAX_BITS or pairs.shape[1] != 4**bits:
            raise ParameterError(
                f"The 'pair_counts' parameter of {owner} must have 4**bits columns, 1 <= bits "
                f"<= {MAX_BITS}. Got {pairs.shape[1]} instead."
            )
        fine = int(round(math.log2(max(singles.shape[-1], 1)))) if singles.ndim == 2 else -1
        if (
            singles.ndim != 2
            or singles.shape[0] != d
            or not bits <= fine <= MAX_FINE_BITS
            or singles.shape[1] != 2**fine
        ):
            raise ParameterError(
                f"The 'single_counts' parameter of {owner} must be integer counts of shape "
                f"({d}, 2**fine_bits) with {bits} <= fine_bits <= {MAX_FINE_BITS}. Got shape "
                f"{singles.shape} instead."
            )
        return bits, fine

    # ------------------------------------------------------------------ properties
    domain = ReadOnly[Any]("The public box or schema of the table.")
    epsilon = ReadOnly[float]("Total privacy budget ε of the release.")

    @property
    def mechanism(self) -> str:
        return "MarginalSynthesizer"

    @property
    def params(self) -> dict[str, Any]:
        return dict(self._params)

    @property
    def total(self) -> float:
        """The consensus noisy row count (weighted mean of the trees' consistent totals)."""
        return float(self._fitted()["total"])

    @property
    def tree(self) -> list[tuple[int, int]]:
        """The ``(parent, child)`` column pairs the model samples along."""
        return list(self._fitted()["edges"])

    @property
    def mutual_information(self) -> np.ndarray:
        """Mutual information (nats) of each fitted pair table, in :func:`pair_list` order
        (NaN for a pair a table release did not measure)."""
        mi = self._fitted()["mi"]
        if isinstance(mi, dict):
            return np.array([mi.get(p, np.nan) for p in self._layout.pairs])
        return mi.copy()

    @property
    def measured(self) -> list[tuple[int, int]]:
        """The column pairs whose tables the release measured, in the order it measured them
        (every pair, unless a table release chose them)."""
        if self._selected is None:
            return list(self._layout.pairs)
        return [m[0] for m in self._selected.measured]

    @property
    def noisy_row_count(self) -> int | None:
        """The noisy row count a table release drew first (its bins and plan were fitted to
        it), ``None`` when it drew none."""
        return None if self._selected is None else self._selected.count

    @property
    def epsilon_parts(self) -> dict[str, float]:
        """Budget spent on the row count, the one-way tables, the private selections and the
        pair tables."""
        if self._selected is not None:
            return self._selected.plan.parts()
        P, d = len(self._layout.pairs), self._domain.d
        return {
            "count": 0.0,
            "singles": d * self._single_epsilon,
            "select": 0.0,
            "pairs": P * self._pair_epsilon,
        }

    @property
    def nbytes(self) -> int:
        if self._selected is not None:
            return self._selected.nbytes + 128
        return int(self._pairs.nbytes + self._singles.nbytes) + 128

    # ------------------------------------------------------------------ post-processing
    def _fitted(self) -> dict[str, Any]:
        if self._model is None and self._selected is not None:
            self._model = self._selected.fit()
        if self._model is None:
            self._model = fit_model(
                self._layout,
                self._pair_tables,
                self._single_tables,
                self._pair_epsilon,
                self._single_epsilon,
            )
        return self._model

    # ------------------------------------------------------------------ queries
    def sample(
        self,
        m: int,
        rng: RNGLike = None,
        *,
        as_frame: bool | str | None = None,
        refine: int | None = None,
    ) -> Any:
        """Draw ``m`` synthetic rows along the tree of pairs, then refine them toward every
        released pair table (post-processing: no budget).

        Parameters
        ----------
        m : int
            Number of rows (``≥ 0``).
        rng : None, int, SeedSequence, Generator or RandomSource
            ``None`` is the OS CSPRNG; a seed here does not weaken the release's privacy.
        as_frame : bool or str, optional
            On a Box: ``True`` for a pandas DataFrame named by the domain's columns, else an
            array. On a Schema: a table of the schema's names and types, pandas by default
            (or ``True``/``"pandas"``), ``"polars"``, ``"pyarrow"``; ``False`` for the float64
            units ``(m, d)`` of :meth:`~sketchsyn.domains.Schema.to_frame`.
        refine : int, optional
            Rounds of :func:`~sketchsyn.synth.marginal.refine.refine` over every pair table
            (default 5 on a Schema, 0 on a Box): the rows' pairs off the tree move toward the
            released tables, in blocks of ``2**20`` rows. ``0``: the tree's rows as drawn (what
            :meth:`count` describes).

        Returns
        -------
        ndarray (m, d) of float64 in user units, or a table.
        """
        owner = f"{_KIND}.sample"
        m = check_int(m, "m", owner, minimum=0)
        table = isinstance(self._domain, Schema)
        rounds = (ROUNDS if table else 0) if refine is None else refine
        rounds = check_int(rounds, "refine", owner, minimum=0, maximum=_MAX_ROUNDS)
        src = as_source(rng)
        model = self._fitted()
        d = self._domain.d
        out = np.empty((m, d))
        chunk = _REFINE_CHUNK if rounds else _SAMPLE_CHUNK
        for start in range(0, m, chunk):
            part = out[start : start + chunk]
            bins = self._draw_bins(part.shape[0], model, src)
            if rounds and self._selected is not None:
                measured = [(p, *model["groups"][p], t) for p, t in model["fitted"].items()]
                valid = [self._layout.valid_coarse(j) for j in range(d)]
                refine_grouped(bins, measured, model["marg"], valid, rounds, src)
            elif rounds:
                pairs = self._layout.pairs
                refine_rows(bins, model["tables"], pairs, rounds, src, marginals=model["marg"])
            self._values_into(part, bins, model, src)
        if table:
            if as_frame is False:
                return out
            library = "pandas" if as_frame is None or as_frame is True else as_frame
            return self._domain.to_frame(out, library)
        if as_frame:
            import pandas as pd

            names = self._domain.columns or [f"x{i}" for i in range(d)]
            return pd.DataFrame(out, columns=list(names))
        return out

    def _draw_bins(self, m: int, model: dict[str, Any], src: Any) -> np.ndarray:
        """Coarse bins ``(d, m)`` of ``m`` rows drawn along the tree: the root from its
        consensus marginal, each child from its edge's row given its parent's bin."""
        bins = np.zeros((self._domain.d, m), dtype=np.int64)
        root = np.zeros(m, dtype=np.int64)
        bins[0] = draw_rows(model["marg"][0][None, :], root, src.random(m))
        for (parent, child), cond in zip(model["edges"], model["conds"], strict=True):
            bins[child] = draw_rows(cond, bins[parent], src.random(m))
        return bins

    def _values_into(
        self, out: np.ndarray, bins: np.ndarray, model: dict[str, Any], src: Any
    ) -> None:
        """Each row's values: a fine bin inside its coarse bin (the column's single table),
        then a value uniform over the fine bin (on a Schema, over the codes naming values)."""
        m, d = out.shape
        lay = self._layout
        for i in range(d):
            b, fb = lay.coarse[i], lay.fine[i]
            sub = draw_rows(model["fine"][i], bins[i], src.random(m))
            cell = (bins[i] << (fb - b)) + sub
            if isinstance(self._domain, Box):
                lo, span = self._domain.lower, self._domain.upper - self._domain.lower
                u = np.ldexp(cell.astype(np.float64) + src.random(m), -fb)
                out[:, i] = np.minimum(lo[i] + u * span[i], self._domain.upper[i])
            else:
                col = self._domain._cols[i]
                shift = _U64(col.bits - fb)
                first = cell.astype(_U64)
                out[:, i] = col.sample(first << shift, (first + _U64(1)) << shift, src.random(m))

    def count(self, lower: Any = None, upper: Any = None, *, where: Any = None) -> float:
        """Noisy number of rows in the box ``[lower, upper]`` or, on a Schema, satisfying the
        per-column conditions ``where`` (text such as ``'carrier == "AA" and dep_delay > 60'``
        or a dict, :mod:`sketchsyn.domains.where`; text as the first argument is ``where``),
        under the tree model.

        Exact for the model: each column's coarse bins are weighted by the share of their fine
        mass inside the query (values uniform inside a fine bin), then combined along the tree.
        On a Schema, ``lower`` and ``upper`` are units (a category's index, µs since 1970 …).
        """
        if where is None and isinstance(lower, (str, dict)) and upper is None:
            where, lower = lower, None
        d = self._domain.d
        lo = hi = None
        if where is not None:
            if not isinstance(self._domain, Schema) or lower is not None or upper is not None:
                raise ParameterError(
                    f"The 'where' parameter of {_KIND}.count needs a Schema domain and no "
                    f"'lower'/'upper'. Got a {type(self._domain).__name__} instead."
                    if not isinstance(self._domain, Schema)
                    else f"{_KIND}.count takes either 'where' or 'lower' and 'upper'."
                )
            conditions = parse_where(where, self._domain)
        else:
            lo = np.asarray(lower, dtype=np.float64).reshape(-1)
            hi = np.asarray(upper, dtype=np.float64).reshape(-1)
            if lower is None or upper is None or lo.shape != (d,) or hi.shape != (d,):
                raise ParameterError(
                    f"The 'lower' and 'upper' parameters of {_KIND}.count must have {d} values"
                    f"{' (or give where=)' if isinstance(self._domain, Schema) else ''}. Got "
                    f"{lo.size if lower is not None else None} and "
                    f"{hi.size if upper is not None else None} instead."
                )
            conditions = {
                j: Condition([(float(lo[j]), float(hi[j]), False, False)]) for j in range(d)
            }
        model = self._fitted()
        weights = [self._column_weight(j, conditions.get(j), model, lo, hi) for j in range(d)]
        belief = [w.copy() for w in weights]
        steps = list(zip(model["edges"], model["conds"], strict=True))
        for (parent, child), cond in reversed(steps):
            belief[parent] *= cond @ belief[child]
        return float(model["total"] * (model["marg"][0] * belief[0]).sum())

    def _column_weight(
        self, j: int, cond: Condition | None, model: dict[str, Any], lo: Any, hi: Any
    ) -> np.ndarray:
        """Share of each coarse bin of column ``j`` inside the query: its fine bins' mass
        times their share inside the column's condition."""
        lay = self._layout
        b, fb = lay.coarse[j], lay.fine[j]
        if isinstance(self._domain, Box):
            span = self._domain.upper - self._domain.lower
            u0 = (lo[j] - self._domain.lower[j]) / span[j]
            u1 = (hi[j] - self._domain.lower[j]) / span[j]
            edges = np.arange(2**fb + 1) / 2.0**fb
            inside = np.minimum(u1, edges[1:]) - np.maximum(u0, edges[:-1])
            share = np.clip(inside * 2.0**fb, 0.0, 1.0)
        elif cond is None:
            return np.ones(2**b)
        else:
            first, last = lay.fine_ranges(j)
            share = self._domain._cols[j].fraction(first, last, cond)
        return (model["fine"][j] * share.reshape(2**b, -1)).sum(axis=1)

    # ------------------------------------------------------------------ bytes
    def _freeze(self) -> None:
        """A release is read-only already."""

    def _state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        if self._selected is not None:
            meta = {"domain": self._domain.to_dict(), "epsilon": self._epsilon}
            meta |= self._selected.meta() | {"params": self._params}
            return meta, self._selected.arrays()
        meta = {
            "domain": self._domain.to_dict(),
            "epsilon": self._epsilon,
            "pair_epsilon": self._pair_epsilon,
            "single_epsilon": self._single_epsilon,
            "bits": self._bits,
            "fine_bits": self._fine_bits,
            "params": self._params,
        }
        if self._exact_bits is not None:
            meta["exact_bits"] = self._exact_bits
        return meta, {"pairs": self._pairs, "singles": self._singles}

    @classmethod
    def _from_state(
        cls, fields: MetaReader, arrays: Arrays, version: int, blob: bytes, rng: Any
    ) -> MarginalDistribution:
        """Every header field and array is checked (names, types, ranges, shapes from the
        domain and the bits) before anything is built; counts must lie in ``[0, 2**52]`` and
        sum to at most ``2**52`` per table, ``epsilon`` must be what the split spends and
        ``params`` holds only known, well-typed fields that agree with the header."""
        domain = fields.domain()
        schema = isinstance(domain, Schema)
        if not isinstance(domain, (Box, Schema)) or not 2 <= domain.d <= MAX_COLUMNS:
            raise SerializationError(
                f"{_KIND} blob header field 'domain' must be a Box or a Schema of 2 to "
                f"{MAX_COLUMNS} columns"
            )
        d = domain.d
        if schema and fields.has("plan"):
            unknown = fields.names() - _SELECTED_FIELDS
            if unknown:
                raise SerializationError(
                    f"{_KIND} blob header has unknown fields {sorted(unknown)}"
                )
            epsilon = fields.epsilon("epsilon")
            selected = SelectedTables.read(fields, arrays, domain, epsilon)
            try:
                return cls.from_selected(domain, epsilon, selected, fields.dict("params"))
            except ParameterError as exc:
                raise SerializationError(f"{_KIND} blob: {exc}") from exc
        unknown = fields.names() - _FIELDS - ({"exact_bits"} if schema else set())
        if unknown:
            raise SerializationError(f"{_KIND} blob header has unknown fields {sorted(unknown)}")
        extra = set(arrays) - {"pairs", "singles"}
        if extra:
            raise SerializationError(f"{_KIND} blob has unexpected arrays {sorted(extra)}")
        epsilon = fields.epsilon("epsilon")
        pair_eps = fields.epsilon("pair_epsilon")
        single_eps = fields.epsilon("single_epsilon")
        bits = fields.int("bits", minimum=1, maximum=MAX_BITS)
        fine = fields.int("fine_bits", minimum=bits, maximum=MAX_FINE_BITS)
        params = fields.dict("params")
        if schema:
            exact = fields.int("exact_bits", minimum=1, maximum=MAX_EXACT_BITS)
            cells = Layout(domain, bits, fine, exact)
            pairs = fields.array(arrays, "pairs", np.int64, (cells.pair_cells,))
            singles = fields.array(arrays, "singles", np.int64, (cells.cells - cells.pair_cells,))
            sizes: dict[str, Any] = {"bits": bits, "fine_bits": fine, "exact_bits": exact}
        else:
            pairs = fields.array(arrays, "pairs", np.int64, (d * (d - 1) // 2, 4**bits))
            singles = fields.array(arrays, "singles", np.int64, (d, 2**fine))
            sizes = {}
        lay = Layout(domain, bits, fine, sizes.get("exact_bits", EXACT_BITS))
        for name, tables, labels in (
            ("pairs", lay.pair_tables(pairs.reshape(-1)), [f"pair table {p}" for p in lay.pairs]),
            ("singles", lay.single_tables(singles.reshape(-1)), [f"column {j}" for j in range(d)]),
        ):
            check_counts(
                tables,
                labels,
                lambda text, a=name: SerializationError(f"{_KIND} blob array {a!r}: {text}"),
            )
        try:
            return cls(domain, epsilon, pairs, singles, pair_eps, single_eps, params, **sizes)
        except ParameterError as exc:
            raise SerializationError(f"{_KIND} blob: {exc}") from exc

    def __repr__(self) -> str:
        return (
            f"MarginalDistribution(epsilon={self._epsilon!r}, d={self._domain.d}, "
            f"bits={self._bits}, fine_bits={self._fine_bits})"
        )
