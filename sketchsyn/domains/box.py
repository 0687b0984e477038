"""The continuous domain :class:`Box`: public bounds, Morton codes of quantised points, cells.

At depth ``r`` coordinate ``i`` is cut ``b_i`` times (``b_i`` = the number of levels ``≤ r``
that cut it) and a point goes to cell ``q_i = floor((x_i − lo_i)/(hi_i − lo_i) · 2**b_i)``; the
upper bound itself goes into the last cell. Cells are half-open ``[a, b)`` except the last one
of each coordinate, which is closed. :meth:`Box.cell_bounds` returns the exact dyadic corners
mapped to user units by the same affine map, so a point within one floating-point rounding of a
cell boundary may be encoded into the neighbouring cell (on the unit box everything is exact).

>>> box = Box([0.0, 0.0], [1.0, 1.0])
>>> box.encode([[0.2, 0.7], [0.9, 0.1]], depth=2).tolist()   # level 1: x ≥ .5?, level 2: y ≥ .5?
[1, 2]
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..attributes import ReadOnly
from ..errors import InputError, ParameterError, check_int
from ..privacy.rng import RNGLike, as_source
from .base import Domain, _plain_array, _row_text
from .morton import _TABLE_BITS, _U64, _axis_indices64, _bits_per_axis, _spread, _spread_table

__all__ = ["Box"]

_TINY = float(np.finfo(np.float64).tiny)


class Box(Domain):
    """The box ``[lower, upper]`` of ℝ^d with public bounds, metric ℓ∞ on the unit box.

    Level ``l`` halves coordinate ``(l − 1) mod d``; distances are ℓ∞ after scaling each
    coordinate to [0, 1] (:meth:`normalize`), so a level-``l`` cell has diameter
    ``2**−floor(l/d)``.

    Parameters
    ----------
    lower, upper : array-like of d floats (scalars allowed for d = 1)
        Public, finite bounds with ``lower < upper`` in every coordinate. Bounds must not be
        derived from the data without spending privacy budget.
    out_of_bounds : {"raise", "clip", "drop"}
        Policy for points outside the box: refuse the batch (default), clamp them onto the box,
        or drop them (``encode(..., return_dropped=True)`` reports how many).
    columns : sequence of d str, optional
        Names of the coordinates (see :attr:`columns`); they survive ``to_dict``/``to_bytes``.

    Examples
    --------
    >>> box = Box([-1.0, 0.0], [1.0, 10.0])
    >>> box.d, box.max_depth, box.gamma(3), box.Gamma(3)
    (2, 64, 0.5, 4.0)
    >>> box.encode([[0.5, 2.0], [1.0, 10.0]], depth=4).tolist()   # x: 11, y: 00 → 1010
    [10, 15]
    """

    _owner = "Box"

    def __init__(
        self, lower: Any, upper: Any, out_of_bounds: str = "raise", *, columns: Any = None
    ) -> None:
        try:
            lo = np.atleast_1d(np.array(lower, dtype=np.float64))
            hi = np.atleast_1d(np.array(upper, dtype=np.float64))
        except (TypeError, ValueError, OverflowError):
            raise ParameterError(
                "The 'lower' and 'upper' parameters of Box must be arrays of finite numbers. "
                f"Got {_row_text(lower)} and {_row_text(upper)} instead."
            ) from None
        if lo.ndim != 1 or lo.shape != hi.shape or lo.size < 1:
            raise ParameterError(
                "The 'lower' and 'upper' parameters of Box must be 1-D of the same length >= 1. "
                f"Got shapes {lo.shape} and {hi.shape} instead."
            )
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
            raise ParameterError(
                "The 'lower' and 'upper' parameters of Box must be finite. Got "
                f"{lo.tolist()} and {hi.tolist()} instead."
            )
        if np.any(lo >= hi):
            i = int(np.flatnonzero(lo >= hi)[0])
            raise ParameterError(
                "The 'lower' parameter of Box must be < 'upper' in every coordinate. Got "
                f"lower[{i}]={lo[i].item()!r} >= upper[{i}]={hi[i].item()!r} instead."
            )
        with np.errstate(over="ignore"):
            span = hi - lo
        if not np.all(np.isfinite(span)):
            raise ParameterError(
                "The 'upper' − 'lower' widths of Box must be finite floats. Got "
                f"{span.tolist()} instead."
            )
        for arr in (lo, hi, span):
            arr.setflags(write=False)
        self._lower, self._upper, self._span = lo, hi, span
        self._out_of_bounds = self._check_policy(out_of_bounds)
        self._set_columns(columns)

    @classmethod
    def unit(cls, d: int, out_of_bounds: str = "raise") -> Box:
        """The unit box ``[0, 1]^d``.

        Examples
        --------
        >>> Box.unit(3)
        Box(lower=[0.0, 0.0, 0.0], upper=[1.0, 1.0, 1.0])
        """
        d = check_int(d, "d", "Box.unit", minimum=1)
        return cls(np.zeros(d), np.ones(d), out_of_bounds)

    @property
    def d(self) -> int:
        """Dimension."""
        return int(self._lower.size)

    @property
    def max_depth(self) -> int:
        """64: a code is one uint64."""
        return 64

    lower = ReadOnly[np.ndarray]("Lower corner, a read-only float64 array of shape ``(d,)``.")
    upper = ReadOnly[np.ndarray]("Upper corner, a read-only float64 array of shape ``(d,)``.")

    # ---------------------------------------------------------------- validation and encoding
    def _points(self, X: Any, what: str = "X") -> np.ndarray:
        """Validate a batch and return it as float64 ``(n, d)`` (possibly a read-only view).

        Raises InputError naming the first offending row for non-numeric rows, rows of the wrong
        length and (``finite=True``) NaN or infinite values. The caller's array is never written.
        """
        arr: np.ndarray | None
        X = _plain_array(self._from_frame(X), what)
        if isinstance(X, np.ndarray) and X.dtype.kind in "fiu":
            arr = X.astype(np.float64, copy=False)
        elif isinstance(X, np.ndarray) and X.dtype.kind in "cbMm":
            arr = None
        else:
            try:
                raw = np.asarray(X)
                arr = None if raw.dtype.kind in "cbMm" else np.asarray(X, dtype=np.float64)
                # Python lists mixing bools and numbers become floats: refuse the bools.
                if arr is not None and any(
                    isinstance(v, (bool, np.bool_)) for v in np.asarray(X, dtype=object).flat
                ):
                    arr = None
            except (TypeError, ValueError, OverflowError):
                arr = None
        if arr is None:
            self._raise_bad_row(X, what)
        assert arr is not None
        if arr.ndim == 1 and (self.d == 1 or arr.size == 0):
            arr = arr.reshape(-1, self.d)
        if arr.ndim != 2 or arr.shape[1] != self.d:
            if arr.ndim == 2 and arr.shape[0]:
                raise InputError(
                    f"{what} must have shape (n, {self.d}) for this {self.d}-dimensional Box: "
                    f"row 0 = {_row_text(arr[0])} has {arr.shape[1]} values (shape {arr.shape})"
                )
            hint = " (use encode_one for a single point)" if arr.ndim <= 1 else ""
            raise InputError(
                f"{what} must have shape (n, {self.d}) for this {self.d}-dimensional Box; got "
                f"shape {arr.shape}{hint}"
            )
        return arr

    def _raise_bad_row(self, X: Any, what: str) -> None:
        """Find and report the first row that is not ``d`` finite-or-not numbers."""
        try:
            # A DataFrame iterates over its column names: read its rows instead.
            rows = list(X.to_numpy(dtype=object)) if hasattr(X, "iloc") else list(X)
        except TypeError:
            raise InputError(
                f"{what} must be array-like of shape (n, {self.d}); got {_row_text(X)}"
            ) from None
        for i, row in enumerate(rows):
            try:
                kinds = np.asarray(row).dtype.kind
                if kinds in "cbMm" or any(
                    isinstance(v, (bool, np.bool_)) for v in np.ravel(np.asarray(row, dtype=object))
                ):
                    raise TypeError("not a real number")
                vals = np.asarray(row, dtype=np.float64)
            except (TypeError, ValueError, OverflowError):
                raise InputError(
                    f"{what} must hold numbers: row {i} = {_row_text(row)} is not numeric"
                ) from None
            if vals.size != self.d or vals.ndim > 1:
                raise InputError(
                    f"{what} must have shape (n, {self.d}): row {i} = {_row_text(row)} has "
                    f"{vals.size} values"
                )
        raise InputError(f"{what} must be a numeric array of shape (n, {self.d})")

    def encode(self, X: Any, depth: int, return_dropped: bool = False, adjusted: Any = None) -> Any:
        """Morton codes (uint64) of the points' level-``depth`` cells.

        Parameters
        ----------
        X : array-like, shape (n, d) (or (n,) when d = 1)
            Points in user units: anything numpy converts to float64 (numeric text included).
            Never modified. For a single point of shape ``(d,)`` use :meth:`encode_one`.
        depth : int
            ``1 ≤ depth ≤ 64``: the number of bits of each code.
        return_dropped : bool
            Also return how many rows the ``"drop"`` policy removed.
        adjusted : dict, optional
            Taken for the common interface (a :class:`~sketchsyn.domains.Schema` counts its
            columns' policies there); nothing is counted for this domain.

        Returns
        -------
        codes : uint64 ndarray, shape (n,) (n minus the dropped rows under ``"drop"``)
            ``code >> (depth − l)`` is the level-``l`` prefix.
        n_dropped : int
            Only with ``return_dropped=True``.

        Raises
        ------
        InputError
            For a row that is not numeric, has the wrong length or holds NaN/inf (under every
            policy; reported first), or lies outside the box under ``"raise"``. The message
            names the first such row and its values; nothing is returned for such a batch.

        Examples
        --------
        >>> box = Box([0, 0], [1, 1], out_of_bounds="drop")
        >>> X = [[0.1, 0.1], [2.0, 0.5], [1.0, 1.0]]
        >>> codes, dropped = box.encode(X, 4, return_dropped=True)
        >>> codes.tolist(), dropped
        ([0, 15], 1)
        """
        depth = self._check_depth(depth, "encode")
        arr = self._points(X)
        offsets, n_dropped = self._offsets(arr)
        codes = self._codes(offsets, depth)
        return (codes, n_dropped) if return_dropped else codes

    def kept(self, X: Any) -> np.ndarray:
        """Rows of a valid batch inside the bounds (the ones ``encode`` keeps under ``"drop"``).

        >>> Box.unit(1, out_of_bounds="drop").kept([[0.5], [2.0]]).tolist()
        [True, False]
        """
        arr = self._points(X)
        if self._out_of_bounds != "drop":
            return np.ones(arr.shape[0], dtype=bool)
        return ((arr >= self._lower) & (arr <= self._upper)).all(axis=1)

    def _offsets(self, arr: np.ndarray) -> tuple[np.ndarray, int]:
        """A fresh ``(d, n)`` float64 array of ``x_i − lower_i`` after the bounds policy."""
        lo, hi, span = self._lower, self._upper, self._span
        n, d = arr.shape
        work = np.empty((d, n))
        inside = True
        for i in range(d):
            t = work[i]
            np.subtract(arr[:, i], lo[i], out=t)
            if not n or not inside:
                continue
            mn, mx = t.min(), t.max()
            # x < lo  ⇔  x − lo < 0 exactly; NaN fails both tests. x − lo may round down onto
            # the span for an x just above hi, so the boundary case looks at x itself.
            if not (mn >= 0.0 and mx <= span[i]) or (mx == span[i] and arr[:, i].max() > hi[i]):
                inside = False
        if inside:
            return work, 0
        finite = np.isfinite(arr).all(axis=1)
        if not finite.all():
            i = int(np.flatnonzero(~finite)[0])
            raise InputError(f"X has a NaN or infinite value: row {i} = {_row_text(arr[i])}")
        outside = np.zeros(n, dtype=bool)
        for i in range(d):
            outside |= (arr[:, i] < lo[i]) | (arr[:, i] > hi[i])
        if self._out_of_bounds == "raise":
            i = int(np.flatnonzero(outside)[0])
            raise InputError(
                f"X row {i} = {_row_text(arr[i])} is outside the Box bounds lower="
                f"{lo.tolist()}, upper={hi.tolist()} (out_of_bounds='raise')"
            )
        if self._out_of_bounds == "clip":
            for i in range(d):
                np.subtract(np.clip(arr[:, i], lo[i], hi[i]), lo[i], out=work[i])
            return work, 0
        keep = ~outside
        return np.ascontiguousarray(work[:, keep]), int(outside.sum())

    def _codes(self, work: np.ndarray, depth: int) -> np.ndarray:
        """Quantise the ``(d, n)`` offsets (overwritten, reused as scratch) and interleave them.

        Few fresh arrays: fresh memory costs page faults that would dominate the arithmetic.
        """
        d, n = work.shape
        bits = _bits_per_axis(depth, d)
        for i in range(d):
            b = bits[i]
            if b == 0:
                continue
            t = work[i]
            step = math.ldexp(float(self._span[i]), -b)
            if step >= _TINY:  # t / (span·2**−b) == (t / span)·2**b exactly (scaling by 2**b)
                np.divide(t, step, out=t)
            else:
                np.divide(t, self._span[i], out=t)
                np.multiply(t, math.ldexp(1.0, b), out=t)
        if d == 1:
            return self._cells_1d(work[0], bits[0])
        # b ≤ 32 here: 2**b − 1 is a float, so clamping puts the upper bound in the last cell.
        # Axis 0 goes to the output array, axis i ≥ 1 into the (already converted) row i − 1.
        codes = np.empty(n, dtype=_U64)
        q: list[np.ndarray | None] = []
        for i in range(d):
            if bits[i] == 0:
                q.append(None)
                continue
            t = work[i]
            np.minimum(t, math.ldexp(1.0, bits[i]) - 1.0, out=t)
            dest = codes if i == 0 else work[i - 1].view(_U64)
            np.copyto(dest.view(np.int64), t, casting="unsafe")
            q.append(dest)
        scratch = work[d - 1].view(_U64)
        if d in (2, 3) and bits[0] <= _TABLE_BITS:
            # One table lookup spreads and shifts an axis. Axis 0's indices (in ``codes``) go to
            # the free scratch row, axis 1's into ``codes``, axis 2's into the scratch again.
            for i, qi in enumerate(q):
                if qi is None:
                    continue
                shift = depth - i - 1 - d * (bits[i] - 1)  # position of the axis' last bit
                table = _spread_table(bits[i], d, shift)
                np.take(table, qi.view(np.int64), out=codes if i == 1 else scratch)
                if i:
                    np.bitwise_or(codes, scratch, out=codes)
            if q[1] is None:  # axis 0 alone (depth 1)
                np.copyto(codes, scratch)
            return codes
        if (d == 2 and bits[0] <= 32) or (d == 3 and bits[0] <= 21):
            for i, qi in enumerate(q):
                if qi is None:
                    continue
                _spread(qi, bits[i], d, scratch)
                shift = depth - i - 1 - d * (bits[i] - 1)  # position of the axis' last bit
                if shift:
                    np.left_shift(qi, _U64(shift), out=qi)
                if i:
                    np.bitwise_or(codes, qi, out=codes)
            return codes
        q[0] = codes.copy()
        codes[:] = 0
        for i, qi in enumerate(q):
            if qi is None:
                continue
            for j in range(bits[i]):  # bit j (from the top) of axis i is cut at level i + 1 + d·j
                np.right_shift(qi, _U64(bits[i] - 1 - j), out=scratch)
                np.bitwise_and(scratch, _U64(1), out=scratch)
                np.left_shift(scratch, _U64(depth - (i + 1 + d * j)), out=scratch)
                np.bitwise_or(codes, scratch, out=codes)
        return codes

    @staticmethod
    def _cells_1d(t: np.ndarray, b: int) -> np.ndarray:
        """Cell indices of one scaled coordinate ``t = (x − lo)/span · 2**b`` (1 ≤ b ≤ 64)."""
        cells = math.ldexp(1.0, b)
        if b <= 53:  # 2**b − 1 is a float
            np.minimum(t, cells - 1.0, out=t)
            return t.astype(np.int64).view(_U64)
        top = t >= cells
        t[top] = 0.0
        q = t.astype(_U64)
        q[top] = _U64((1 << b) - 1)
        return q

    # ---------------------------------------------------------------- geometry
    def _unit_bounds(self, lv: np.ndarray, px: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Lower corners and side lengths ``(n, d)`` of the cells on the unit box (exact)."""
        n, d = px.size, self.d
        shift = np.minimum(64 - lv, 63).astype(_U64)  # level 0 has prefix 0, so 63 is fine
        aligned = px << shift
        idx = _axis_indices64(aligned, d)
        bits64 = _bits_per_axis(64, d)
        lo_u = np.empty((n, d))
        side = np.empty((n, d))
        for i in range(d):
            lo_u[:, i] = np.ldexp(idx[i].astype(np.float64), -bits64[i])
            b_i = np.maximum((lv - i + d - 1) // d, 0)
            side[:, i] = np.ldexp(1.0, -b_i)
        return lo_u, side

    def cell_bounds(self, levels: Any, prefixes: Any) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper corners, ``(n, d)`` float64 each in user units, of the given cells.

        Parameters
        ----------
        levels : int or array of ints
            Level of each cell (``0 … 64``); cells of different levels may be mixed.
        prefixes : int or array of ints
            The cells' prefixes (``< 2**level``), broadcast against ``levels``.

        Notes
        -----
        The bounds are float64: a coordinate cut more than 52 times (only possible for d = 1
        beyond depth 52) has cells narrower than the float spacing, and their bounds round.

        Examples
        --------
        >>> lo, hi = Box([0, 10], [8, 20]).cell_bounds([1, 3], [1, 5])
        >>> lo.tolist(), hi.tolist()
        ([[4.0, 10.0], [6.0, 10.0]], [[8.0, 20.0], [8.0, 15.0]])
        """
        lv, px = self._cells(levels, prefixes, "cell_bounds")
        lo_u, side = self._unit_bounds(lv, px)
        hi_u = lo_u + side
        lower = np.empty_like(lo_u)
        upper = np.empty_like(lo_u)
        for i in range(self.d):
            lo_i, hi_i, span_i = self._lower[i], self._upper[i], self._span[i]
            lower[:, i] = lo_i + lo_u[:, i] * span_i
            up = lo_i + hi_u[:, i] * span_i
            upper[:, i] = np.where(hi_u[:, i] >= 1.0, hi_i, np.minimum(up, hi_i))
        return lower, upper

    def sample_cells(self, levels: Any, prefixes: Any, rng: RNGLike = None) -> np.ndarray:
        """One uniform point inside each given cell: float64 ``(n, d)`` in user units.

        ``rng`` follows the package convention (None: OS CSPRNG; an int seed is for tests and
        is not private). The result is ``(n, d)`` also when d = 1.

        Examples
        --------
        >>> pts = Box.unit(2).sample_cells([2, 2], [0, 3], rng=0)
        >>> pts.shape, bool((pts[0] < 0.5).all()), bool((pts[1] >= 0.5).all())
        ((2, 2), True, True)
        """
        lower, upper = self.cell_bounds(levels, prefixes)
        u = as_source(rng).random(lower.shape)
        pts = lower + u * (upper - lower)
        return np.minimum(pts, upper, out=pts)

    def volume_fraction(self, levels: Any, prefixes: Any, lower: Any, upper: Any) -> np.ndarray:
        """Fraction of each cell's volume inside the query box ``[lower, upper]`` (user units).

        ``lower``/``upper`` are scalars or length-d arrays (±inf allowed, NaN not); an empty
        query (``lower > upper`` somewhere) gives zeros.

        Examples
        --------
        >>> Box.unit(2).volume_fraction([1, 1], [0, 1], [0.25, 0.0], [0.75, 1.0]).tolist()
        [0.5, 0.5]
        """
        qlo, qhi = self._query(lower, upper)
        clo, chi = self.cell_bounds(levels, prefixes)
        frac = np.ones(clo.shape[0])
        for i in range(self.d):
            overlap = np.minimum(chi[:, i], qhi[i]) - np.maximum(clo[:, i], qlo[i])
            width = chi[:, i] - clo[:, i]
            # A cell narrower than a float's spacing at its position has zero width in float64:
            # it counts as a point, inside or outside the query.
            inside = (clo[:, i] >= qlo[i]) & (clo[:, i] <= qhi[i])
            safe = np.where(width > 0, width, 1.0)
            frac *= np.where(width > 0, np.clip(overlap, 0.0, None) / safe, inside)
        return frac

    def _query(self, lower: Any, upper: Any) -> tuple[np.ndarray, np.ndarray]:
        out = []
        for name, value in (("lower", lower), ("upper", upper)):
            try:
                arr = np.broadcast_to(np.asarray(value, dtype=np.float64), (self.d,))
            except (TypeError, ValueError, OverflowError):
                arr = None
            if arr is None or np.isnan(arr).any():
                raise ParameterError(
                    f"The {name!r} parameter of Box.volume_fraction must be a number or "
                    f"{self.d} numbers (no NaN). Got {_row_text(value)} instead."
                )
            out.append(arr)
        return out[0], out[1]

    def gamma(self, level: int) -> float:
        """Diameter of a level-``l`` cell, ℓ∞ on the unit box: ``2**−floor(l/d)``; γ(−1) = γ(0).

        Examples
        --------
        >>> [Box.unit(2).gamma(l) for l in (-1, 0, 1, 2, 3, 4)]
        [1.0, 1.0, 1.0, 0.5, 0.5, 0.25]
        """
        level = max(self._check_level(level, "gamma"), 0)
        return math.ldexp(1.0, -(level // self.d))

    def normalize(self, X: Any) -> np.ndarray:
        """Points in user units → the unit box: float64 ``(n, d)``, ``(x − lower)/(upper − lower)``.

        Rows are validated like :meth:`encode` (shape, numbers, no NaN/inf) but not checked
        against the bounds: a point outside the box maps outside [0, 1]^d.

        Examples
        --------
        >>> Box([0, 10], [2, 20]).normalize([[1.0, 15.0]]).tolist()
        [[0.5, 0.5]]
        """
        arr = self._points(X)
        finite = np.isfinite(arr).all(axis=1)
        if not finite.all():
            i = int(np.flatnonzero(~finite)[0])
            raise InputError(f"X has a NaN or infinite value: row {i} = {_row_text(arr[i])}")
        out = np.empty(arr.shape)
        for i in range(self.d):
            np.subtract(arr[:, i], self._lower[i], out=out[:, i])
            np.divide(out[:, i], self._span[i], out=out[:, i])
        return out

    # ---------------------------------------------------------------- identity
    def to_dict(self) -> dict[str, Any]:
        """JSON-able description: ``{"type": "Box", "lower", "upper", "out_of_bounds"}``.

        A ``"columns"`` list is added when the box has column names.

        Examples
        --------
        >>> Box(0, 1).to_dict()
        {'type': 'Box', 'lower': [0.0], 'upper': [1.0], 'out_of_bounds': 'raise'}
        """
        return {
            "type": "Box",
            "lower": self._lower.tolist(),
            "upper": self._upper.tolist(),
            "out_of_bounds": self._out_of_bounds,
        } | self._columns_dict()

    @classmethod
    def _from_fields(cls, data: dict[str, Any]) -> Box:
        lower, upper, policy, columns = cls._fields(
            data, ("lower", "upper", "out_of_bounds"), ("columns",)
        )
        return cls(lower, upper, policy, columns=columns)

    def __repr__(self) -> str:
        policy = self._policy_suffix()
        return f"Box(lower={self._lower.tolist()}, upper={self._upper.tolist()}{policy})"
