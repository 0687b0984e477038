"""The released generator: a probability distribution over the leaves of a private tree.

A :class:`PrivateDistribution` holds the leaves of a released partition tree (cells of possibly
different levels, each with a non-negative consistent count) and the public domain. Everything
it does is post-processing of private counts, so sampling, counting and serialising cost no
privacy. Points are placed uniformly inside the chosen cells; the uniform floats used for that
are not privacy noise.

>>> import numpy as np
>>> from sketchsyn.domains import Box
>>> dist = PrivateDistribution(
...     Box.unit(2), levels=[1, 2, 2], prefixes=[0, 2, 3], counts=[6.0, 3.0, 1.0],
...     epsilon=1.0, mechanism="hand-made")
>>> dist
PrivateDistribution(mechanism='hand-made', epsilon=1.0, leaves=3, total=10.0)
>>> dist.sample(5, rng=0).shape
(5, 2)
>>> dist.count([0.0, 0.0], [0.5, 1.0])  # the whole level-1 cell 0
6.0
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import numpy as np

from ..attributes import ReadOnly
from ..errors import (
    ParameterError,
    SerializationError,
    check_epsilon,
    check_int,
)
from ..io.serial import Arrays, MetaReader
from ..io.summary import Summary
from ..privacy.rng import RNGLike, as_source

__all__ = ["Leaves", "PrivateDistribution"]

_KIND = "PrivateDistribution"
_U64 = np.uint64
_ALL_ONES = np.iinfo(np.uint64).max
_DOMAIN_CLASSES = ("Box", "BitDomain", "Schema")


class Leaves(NamedTuple):
    """The leaves of a released distribution, in Morton (space-filling curve) order.

    ``lower``/``upper`` are the cell bounds in user units (``(n, d)``), ``level``/``prefix``
    name the cells, ``count`` is the consistent private count and ``mass = count / total``
    (when ``total == 0``: the uniform distribution's mass ``2**-level``).

    Examples
    --------
    >>> from sketchsyn.domains import Box
    >>> lv = PrivateDistribution(Box.unit(2), [0], [0], [2.0], epsilon=1.0,
    ...                          mechanism="hand-made").leaves()
    >>> lv.lower.tolist(), lv.upper.tolist(), lv.mass.tolist()
    ([[0.0, 0.0]], [[1.0, 1.0]], [1.0])
    """

    lower: np.ndarray
    upper: np.ndarray
    level: np.ndarray
    prefix: np.ndarray
    count: np.ndarray
    mass: np.ndarray


def _spans(levels: np.ndarray, prefixes: np.ndarray, resolution: int) -> tuple[np.ndarray, ...]:
    """First and last descendant of each cell at level ``resolution`` (uint64, inclusive)."""
    shift = (resolution - levels).astype(np.int64)
    small = np.minimum(shift, 63).astype(_U64)
    start = np.where(shift >= 64, _U64(0), prefixes << small)
    mask = np.where(shift >= 64, _U64(_ALL_ONES), (_U64(1) << small) - _U64(1))
    return start, start | mask


_SAMPLE_CHUNK = 1 << 18  # points drawn per chunk by sample()


class PrivateDistribution(Summary):
    """A differentially private distribution over the leaves of a released tree.

    The mass of a leaf is its count divided by the total; inside a leaf the distribution is
    uniform. Leaves must be disjoint cells of the domain's hierarchy; they need not cover it
    (an uncovered region has mass 0, exactly like a zero-count leaf).

    Saved state: **private** (a release: leaves, noisy consistent counts, public
    parameters), or **trusted** for a distribution built with ``epsilon=None`` from exact
    counts; ``state_privacy`` and the blob header say which.

    Parameters
    ----------
    domain : Box or BitDomain
        The public domain the cells refer to.
    levels : array_like of int
        Level of each leaf, ``0 ≤ level ≤ domain.max_depth``.
    prefixes : array_like of int
        The leaf cells' prefixes (``< 2**level``).
    counts : array_like of float
        Consistent private counts, finite and ``≥ 0``.
    epsilon : float or None
        The privacy budget the release satisfies (``None``: not private, e.g. exact counts).
    mechanism : str
        The mechanism that produced it, e.g. ``"PrivHP"``.
    params : dict, optional
        Public parameters of the release (JSON-able).

    Examples
    --------
    >>> from sketchsyn.domains import Box
    >>> dist = PrivateDistribution(Box.unit(2), [1, 1], [0, 1], [3.0, 1.0],
    ...                            epsilon=0.5, mechanism="hand-made", params={"k": 2})
    >>> dist.total, dist.n_leaves, dist.params
    (4.0, 2, {'k': 2})
    >>> dist.cell_mass(1, [0, 1]).tolist()
    [0.75, 0.25]
    >>> dist.cell_mass(2, [0, 1, 2, 3]).tolist()
    [0.375, 0.375, 0.125, 0.125]
    """

    __slots__ = (
        "_count",
        "_cum",
        "_domain",
        "_epsilon",
        "_last",
        "_level",
        "_mechanism",
        "_params",
        "_prefix",
        "_start",
        "_tables",
        "_total",
    )

    def __init__(
        self,
        domain: Any,
        levels: Any,
        prefixes: Any,
        counts: Any,
        *,
        epsilon: float | None,
        mechanism: str,
        params: dict | None = None,
    ) -> None:
        owner = "PrivateDistribution"
        for attr in ("max_depth", "sample_cells", "cell_bounds", "volume_fraction", "to_dict"):
            if not hasattr(domain, attr):
                raise ParameterError(
                    f"The 'domain' parameter of {owner} must be a sketchsyn domain (Box or "
                    f"BitDomain). Got {domain!r} instead."
                )
        max_depth = int(domain.max_depth)
        lv = np.asarray(levels)
        px = np.asarray(prefixes)
        ct = np.asarray(counts)
        if lv.ndim != 1 or px.shape != lv.shape or ct.shape != lv.shape or lv.size == 0:
            raise ParameterError(
                f"The 'levels', 'prefixes' and 'counts' parameters of {owner} must be non-empty "
                f"1-D arrays of equal length. Got shapes {lv.shape}, {px.shape}, {ct.shape} "
                "instead."
            )
        if lv.dtype.kind not in "iu" or lv.min() < 0 or lv.max() > max_depth:
            raise ParameterError(
                f"The 'levels' parameter of {owner} must hold ints in [0, {max_depth}]. "
                f"Got values in [{lv.min()}, {lv.max()}] of dtype {lv.dtype} instead."
            )
        if px.dtype.kind not in "iu" or (px.dtype.kind == "i" and px.min() < 0):
            raise ParameterError(
                f"The 'prefixes' parameter of {owner} must hold non-negative ints. "
                f"Got dtype {px.dtype} with minimum {px.min()} instead."
            )
        lv = lv.astype(np.int64)
        px = px.astype(_U64)
        too_big = (lv < 64) & (px >= (_U64(1) << np.minimum(lv, 63).astype(_U64)))
        if too_big.any():
            i = int(np.flatnonzero(too_big)[0])
            raise ParameterError(
                f"The 'prefixes' parameter of {owner} must hold prefixes < 2**level. "
                f"Got prefix {int(px[i])} at level {int(lv[i])} (leaf {i}) instead."
            )
        if ct.dtype.kind not in "iuf" or not np.all(np.isfinite(ct)) or np.any(ct < 0):
            raise ParameterError(
                f"The 'counts' parameter of {owner} must hold finite real counts >= 0. "
                f"Got {ct[:5]!r}... instead."
            )
        if epsilon is not None:
            epsilon = check_epsilon(epsilon, owner)
        if not isinstance(mechanism, str) or not mechanism:
            raise ParameterError(
                f"The 'mechanism' parameter of {owner} must be a non-empty str. "
                f"Got {mechanism!r} instead."
            )
        params = {} if params is None else params
        try:
            params = json.loads(json.dumps(params, allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise ParameterError(
                f"The 'params' parameter of {owner} must be a JSON-able dict. "
                f"Got {params!r} instead."
            ) from exc
        if not isinstance(params, dict):
            raise ParameterError(
                f"The 'params' parameter of {owner} must be a JSON-able dict. "
                f"Got {params!r} instead."
            )
        start, last = _spans(lv, px, max_depth)
        order = np.argsort(start, kind="stable")
        start, last = start[order], last[order]
        if start.size > 1 and np.any(start[1:] <= last[:-1]):
            i = int(np.flatnonzero(start[1:] <= last[:-1])[0])
            a, b = order[i], order[i + 1]
            raise ParameterError(
                f"The leaves of {owner} must be disjoint cells. Got leaf {a} (level "
                f"{int(lv[a])}, prefix {int(px[a])}) overlapping leaf {b} (level {int(lv[b])}, "
                f"prefix {int(px[b])}) instead."
            )
        self._domain = domain
        self._level = lv[order]
        self._prefix = px[order]
        self._count = ct.astype(np.float64)[order]
        valid = getattr(domain, "valid", None)
        if valid is not None:  # a table's cell naming no value of a column: no mass (public)
            self._count[~valid(self._level, self._prefix)] = 0.0
        self._start, self._last = start, last
        self._cum = np.cumsum(self._count)
        self._total = float(self._cum[-1])
        self._epsilon = epsilon
        self._mechanism = mechanism
        self._params = params
        self._tables: tuple[Any, ...] | None = None  # per-leaf boxes, built by the first sample
        for arr in (self._level, self._prefix, self._count, self._start, self._last, self._cum):
            arr.setflags(write=False)

    # ------------------------------------------------------------------------------ properties
    domain = ReadOnly[Any]("The public domain.")
    total = ReadOnly[float](
        "Sum of the leaf counts (the released estimate of the number of items)."
    )
    epsilon = ReadOnly[float | None](
        "The privacy budget of the release (``None`` for a non-private distribution)."
    )
    mechanism = ReadOnly[str]("Name of the mechanism that produced the release.")

    @property
    def params(self) -> dict:
        """Public parameters of the release (a copy)."""
        return json.loads(json.dumps(self._params))

    @property
    def n_leaves(self) -> int:
        """Number of leaves."""
        return int(self._count.size)

    @property
    def nbytes(self) -> int:
        """Bytes held by the leaf arrays (levels, prefixes, counts and search indexes).

        The first :meth:`sample` also builds a table of the leaves' cells (``3·d`` floats a
        leaf for a ``Box``, two words for a ``BitDomain``), kept for later draws and not
        counted here.
        """
        return int(
            sum(
                a.nbytes
                for a in (
                    self._level,
                    self._prefix,
                    self._count,
                    self._start,
                    self._last,
                    self._cum,
                )
            )
        )

    def _masses(self) -> np.ndarray:
        if self._total > 0:
            return self._count / self._total
        # Nothing was released about where the items are: the uniform distribution's masses.
        return np.ldexp(1.0, -self._level)

    # -------------------------------------------------------------------------------- queries
    def sample(self, m: int, rng: RNGLike = None, *, as_frame: bool | str | None = None) -> Any:
        """Draw ``m`` synthetic points: a leaf with probability count/total, then a uniform point.

        Parameters
        ----------
        m : int
            Number of points (``≥ 0``).
        rng : None, int, SeedSequence, Generator or RandomSource
            ``None`` is the OS CSPRNG. The draw is post-processing, so a seed here does not
            weaken the privacy of the release.
        as_frame : bool or str, optional
            ``True`` (or ``"pandas"``): a pandas DataFrame whose columns are the domain's
            :attr:`~sketchsyn.domains.Domain.columns`, or ``x0, x1, …`` (``key`` for a
            ``BitDomain``) when the domain has none. ``"polars"`` or ``"pyarrow"``: a table of
            that library (a :class:`~sketchsyn.domains.Schema` only). ``False``: an array. The
            default is an array for a ``Box`` or ``BitDomain`` and a pandas DataFrame for a
            ``Schema``.

        Returns
        -------
        ndarray or DataFrame
            ``(m, d)`` points in user units (``(m,)`` int64 for a ``BitDomain``); for a
            ``Schema`` a table with the schema's names and types (categories, int64, float64,
            ``datetime64[us]``, IPv4 addresses as text, bool), or with ``as_frame=False`` the
            ``(m, d)`` float64 units of :meth:`~sketchsyn.domains.Schema.to_frame`.

        Notes
        -----
        When ``total == 0`` the release carries no information on where the items are, so the
        points are drawn uniformly from the whole domain (the maximum-entropy choice).

        Examples
        --------
        >>> from sketchsyn.domains import Box
        >>> dist = PrivateDistribution(Box.unit(2), [1, 1], [0, 1], [1.0, 0.0],
        ...                            epsilon=1.0, mechanism="hand-made")
        >>> pts = dist.sample(1000, rng=1)
        >>> bool((pts[:, 0] < 0.5).all())
        True
        >>> dist.sample(3, rng=1, as_frame=True).columns.tolist()
        ['x0', 'x1']
        """
        m = check_int(m, "m", "PrivateDistribution.sample", minimum=0)
        src = as_source(rng)
        tables = self._sampling_tables()
        kind = tables[0]
        if kind in ("box", "ranges"):
            out = np.empty((m, tables[2].shape[1]))
        elif kind == "keys":
            out = np.empty(m, dtype=_U64 if self._domain.bits == 64 else np.int64)
        else:
            proto = self._domain.sample_cells(tables[2][:0], tables[3][:0], rng=src)
            out = np.empty((m, *proto.shape[1:]), dtype=proto.dtype)
        # Chunk by chunk into one output array: the working memory stays one chunk whatever m is.
        view = out.view(_U64) if kind == "keys" else out
        for start in range(0, m, _SAMPLE_CHUNK):
            self._sample_into(view[start : start + _SAMPLE_CHUNK], tables, src)
        if kind == "ranges":
            library = "pandas" if as_frame is None or as_frame is True else as_frame
            return out if library is False else self._domain.to_frame(out, library)
        return _as_frame(out, self._domain) if as_frame not in (None, False) else out

    def _sampling_tables(self) -> tuple[Any, ...]:
        """Each leaf's cell, computed once per distribution and kept (the cells are public).

        ``(kind, last_positive, *arrays)``: ``kind`` ``"box"`` with ``lower, width, upper``
        (``(n, d)`` float64 each) for a :class:`Box`, ``"keys"`` with ``first,
        size_minus_one`` (uint64) for a :class:`BitDomain`, ``"ranges"`` with each column's
        code range ``lo, hi`` (uint64 ``(n, d)``) for a :class:`Schema`, ``"cells"`` with ``level,
        prefix`` for another domain (its ``sample_cells`` is then called on the drawn leaves);
        ``last_positive`` is the last leaf with a positive count. When ``total == 0`` the one
        "leaf" is the whole domain (level 0).
        """
        if self._tables is not None:
            return self._tables
        from ..domains import BitDomain, Box, Schema

        if self._total > 0:
            lv, px = self._level, self._prefix
            last_positive = int(np.flatnonzero(self._count > 0)[-1])
        else:
            lv, px, last_positive = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=_U64), 0
        arrays: tuple[np.ndarray, ...]
        if isinstance(self._domain, Box):
            lower, upper = self._domain.cell_bounds(lv, px)
            kind, arrays = "box", (lower, upper - lower, upper)
        elif isinstance(self._domain, BitDomain):
            kind, arrays = "keys", self._domain._spans(lv, px)
        elif isinstance(self._domain, Schema):
            kind, arrays = "ranges", self._domain.cell_ranges(lv, px)
        else:
            kind, arrays = "cells", (lv, px)
        for arr in arrays:
            arr.setflags(write=False)
        self._tables = (kind, last_positive, *arrays)
        return self._tables

    def _sample_into(self, out: np.ndarray, tables: tuple[Any, ...], src: Any) -> None:
        """Fill ``out`` with points: a leaf by count, then a uniform point in its cell.

        The draws and the arithmetic are those of ``domain.sample_cells`` on the drawn leaves
        (the same random stream gives the same points), with the cells looked up, not rebuilt.
        """
        m = out.shape[0]
        kind, last_positive = tables[0], tables[1]
        if self._total <= 0:
            idx = np.zeros(m, dtype=np.intp)
        else:
            u = src.random(m)
            u *= self._total
            idx = np.searchsorted(self._cum, u, side="right")
            # Float rounding can put u at the very top: use the last leaf with positive count.
            np.minimum(idx, last_positive, out=idx)
        if kind == "box":
            lower, width, upper = tables[2:]
            np.multiply(src.random(out.shape), np.take(width, idx, axis=0), out=out)
            out += np.take(lower, idx, axis=0)
            np.minimum(out, np.take(upper, idx, axis=0), out=out)
        elif kind == "keys":
            first, minus_one = tables[2:]
            np.bitwise_and(src.uint64(m), np.take(minus_one, idx), out=out)
            out += np.take(first, idx)
        elif kind == "ranges":
            lo, hi = tables[2:]
            out[...] = self._domain.sample_ranges(
                np.take(lo, idx, axis=0), np.take(hi, idx, axis=0), src
            )
        else:
            out[...] = self._domain.sample_cells(tables[2][idx], tables[3][idx], rng=src)

    def leaves(self) -> Leaves:
        """The leaves in Morton order with their cell bounds, counts and masses.

        Examples
        --------
        >>> from sketchsyn.domains import Box
        >>> dist = PrivateDistribution(Box.unit(2), [1, 1], [1, 0], [1.0, 3.0],
        ...                            epsilon=1.0, mechanism="hand-made")
        >>> lv = dist.leaves()
        >>> lv.prefix.tolist(), lv.mass.tolist(), lv.upper.tolist()
        ([0, 1], [0.75, 0.25], [[0.5, 1.0], [1.0, 1.0]])
        """
        lower, upper = self._domain.cell_bounds(self._level, self._prefix)
        return Leaves(
            lower,
            upper,
            self._level.copy(),
            self._prefix.copy(),
            self._count.copy(),
            self._masses(),
        )

    def count(self, lower: Any = None, upper: Any = None, *, where: Any = None) -> float:
        """Estimated number of items in the box ``[lower, upper]`` (user units), or, on a
        table, satisfying the per-column conditions ``where``.

        Each leaf contributes its count times the fraction of its cell inside the box or the
        conditions (uniform within a leaf). On a :class:`~sketchsyn.domains.Schema`,
        ``where`` is text such as ``'carrier == "AA" and dep_delay > 60'`` or a dict
        (:mod:`sketchsyn.domains.where`); text as the first argument is taken as ``where``.

        Examples
        --------
        >>> from sketchsyn.domains import Box
        >>> dist = PrivateDistribution(Box.unit(2), [1, 1], [0, 1], [3.0, 1.0],
        ...                            epsilon=1.0, mechanism="hand-made")
        >>> dist.count([0.0, 0.0], [1.0, 1.0]), dist.count([0.25, 0.0], [0.75, 1.0])
        (4.0, 2.0)
        """
        if where is None and isinstance(lower, (str, dict)) and upper is None:
            where, lower = lower, None
        if where is not None:
            fraction = getattr(self._domain, "where_fraction", None)
            if fraction is None or lower is not None or upper is not None:
                raise ParameterError(
                    "The 'where' parameter of PrivateDistribution.count needs a Schema domain "
                    "and no 'lower'/'upper'. Got a "
                    f"{type(self._domain).__name__} instead."
                    if fraction is None
                    else "PrivateDistribution.count takes either 'where' or 'lower' and 'upper'."
                )
            frac = fraction(self._level, self._prefix, where)
        else:
            if lower is None or upper is None:
                raise ParameterError(
                    "PrivateDistribution.count needs 'lower' and 'upper' (or, on a table, 'where')."
                )
            frac = self._domain.volume_fraction(self._level, self._prefix, lower, upper)
        return float(np.dot(self._count, np.asarray(frac, dtype=np.float64)))

    def cell_mass(self, level: int, prefixes: Any) -> np.ndarray:
        """Mass the distribution gives each level-``level`` cell named in ``prefixes``.

        Leaves at ``level`` or deeper contribute all their mass to the cell containing them; a
        shallower leaf spreads its mass evenly over its ``2**(level − leaf_level)`` descendants
        at ``level``. With the leaves covering the domain, the masses of all cells of a level
        sum to 1.

        Examples
        --------
        >>> from sketchsyn.domains import Box
        >>> dist = PrivateDistribution(Box.unit(2), [1, 2, 2], [0, 2, 3], [2.0, 1.0, 1.0],
        ...                            epsilon=1.0, mechanism="hand-made")
        >>> dist.cell_mass(0, [0]).tolist(), dist.cell_mass(1, [0, 1]).tolist()
        ([1.0], [0.5, 0.5])
        >>> dist.cell_mass(2, [0, 1, 2, 3]).tolist()
        [0.25, 0.25, 0.25, 0.25]
        """
        max_depth = int(self._domain.max_depth)
        level = check_int(level, "level", "PrivateDistribution.cell_mass", 0, max_depth)
        q = np.asarray(prefixes)
        if q.dtype.kind not in "iu" or (q.size and q.dtype.kind == "i" and q.min() < 0):
            raise ParameterError(
                "The 'prefixes' parameter of PrivateDistribution.cell_mass must hold "
                f"non-negative ints. Got {prefixes!r} instead."
            )
        q = q.astype(_U64)
        if level < 64 and q.size and q.max() >= _U64(1) << _U64(level):
            raise ParameterError(
                "The 'prefixes' parameter of PrivateDistribution.cell_mass must hold prefixes "
                f"< 2**{level}. Got {int(q.max())} instead."
            )
        mass = self._masses()
        q_start, q_last = _spans(np.full(q.shape, level, dtype=np.int64), q, max_depth)
        # Leaves at `level` or deeper: sum those whose first descendant lies inside the cell.
        deep = np.where(self._level >= level, mass, 0.0)
        cum = np.concatenate([[0.0], np.cumsum(deep)])
        lo = np.searchsorted(self._start, q_start, side="left")
        hi = np.searchsorted(self._start, q_last, side="right")
        out = cum[hi] - cum[lo]
        # A shallower leaf containing the cell: the last leaf starting at or before it.
        j = np.searchsorted(self._start, q_start, side="right") - 1
        jj = np.maximum(j, 0)
        inside = (j >= 0) & (self._level[jj] < level) & (self._last[jj] >= q_last)
        share = np.ldexp(mass[jj], (self._level[jj] - level).astype(np.int64))
        out = out + np.where(inside, share, 0.0)
        return np.maximum(out, 0.0)  # cumsum differences can be -1e-17

    # -------------------------------------------------------------------------- bytes
    @property
    def state_privacy(self) -> str:
        """``"private"`` for a release (``epsilon`` given); ``"trusted"`` for a distribution
        of exact counts (``epsilon=None``).

        The bytes (``to_bytes``: versioned, checksummed; the domain goes in the header via
        ``to_dict``) hold the public parameters and the leaves.

        Examples
        --------
        >>> from sketchsyn.domains import Box
        >>> dist = PrivateDistribution(Box.unit(2), [1, 1], [0, 1], [3.0, 1.0],
        ...                            epsilon=1.0, mechanism="hand-made")
        >>> PrivateDistribution.from_bytes(dist.to_bytes()) == dist, dist.state_privacy
        (True, 'private')
        >>> try:
        ...     PrivateDistribution.from_bytes(b"not a blob")
        ... except SerializationError as exc:
        ...     print(type(exc).__name__)
        SerializationError
        """
        return "trusted" if self._epsilon is None else "private"

    def _freeze(self) -> None:
        """A distribution is read-only already."""

    def _state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        meta = {
            "domain_class": type(self._domain).__name__,
            "domain": self._domain.to_dict(),
            "epsilon": self._epsilon,
            "mechanism": self._mechanism,
            "params": self._params,
        }
        return meta, {"levels": self._level, "prefixes": self._prefix, "counts": self._count}

    @classmethod
    def _from_state(
        cls, fields: MetaReader, arrays: Arrays, version: int, blob: bytes, rng: Any
    ) -> PrivateDistribution:

        name = fields.str("domain_class", _DOMAIN_CLASSES)
        fields.value("epsilon")  # always written (null for exact counts): never defaulted
        epsilon = fields.epsilon("epsilon", optional=True)
        mechanism = fields.str("mechanism")
        params = fields.dict("params")
        levels = arrays.get("levels")
        if levels is None or levels.ndim != 1:
            raise SerializationError(f"{_KIND} blob array 'levels' is missing or not 1-D")
        n = levels.shape[0]
        levels = fields.array(arrays, "levels", np.int64, (n,))
        prefixes = fields.array(arrays, "prefixes", np.uint64, (n,))
        counts = fields.array(arrays, "counts", np.float64, (n,))
        with np.errstate(over="ignore"):
            total = counts.sum()
        if not np.isfinite(total):
            raise SerializationError(f"{_KIND} blob array 'counts' sums to infinity")
        domain = fields.domain(kind=name)
        fields.done(arrays)  # no header field or array the class does not write
        return cls(
            domain, levels, prefixes, counts, epsilon=epsilon, mechanism=mechanism, params=params
        )

    def __repr__(self) -> str:
        return (
            f"PrivateDistribution(mechanism={self._mechanism!r}, epsilon={self._epsilon!r}, "
            f"leaves={self.n_leaves}, total={round(self._total, 6)!r})"
        )


def _as_frame(points: np.ndarray, domain: Any) -> Any:
    """``points`` as a pandas DataFrame named by ``domain.columns`` (pandas imported lazily)."""
    import pandas as pd

    names = getattr(domain, "columns", None)
    if points.ndim == 1:
        return pd.DataFrame({names[0] if names else "key": points})
    if names is None:
        names = [f"x{i}" for i in range(points.shape[1])]
    return pd.DataFrame(points, columns=list(names))
