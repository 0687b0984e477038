"""Public domains and their binary hierarchical decomposition (SPEC §1).

A level-``l`` cell is named by an ``l``-bit prefix. :class:`Box` cuts coordinate ``(l − 1) mod d``
in half at level ``l`` (round robin; level 1 cuts coordinate 0), so the prefix of a point's cell
is the top ``l`` bits of the Morton (bit-interleaved) code of the quantised point, and the prefix
of a depth-``r`` code at level ``l`` is ``code >> (r − l)``. :class:`BitDomain` is the integer
key space ``{0, …, 2**bits − 1}`` (IPv4 addresses: ``bits = 32``) whose level-``l`` cell is the
``l``-bit prefix of the key (a ``/l`` network).

Quantisation. At depth ``r`` coordinate ``i`` is cut ``b_i`` times (``b_i`` = the number of levels
``≤ r`` that cut it) and a point goes to cell ``q_i = floor((x_i − lo_i)/(hi_i − lo_i) · 2**b_i)``;
the upper bound itself goes into the last cell. Cells are half-open ``[a, b)`` except the last
one of each coordinate, which is closed. :meth:`Box.cell_bounds` returns the exact dyadic corners
mapped to user units by the same affine map, so a point within one floating-point rounding of a
cell boundary may be encoded into the neighbouring cell (on the unit box everything is exact).

Metric. For ``Box``: ℓ∞ after scaling every coordinate to [0, 1] (the "unit box",
:meth:`Box.normalize`); for ``BitDomain``: ``|x − y| / 2**bits``. Diameters of level-``l`` cells
in that metric: ``gamma(l) = 2**−floor(l/d)`` (Box) and ``2**−l`` (BitDomain).

>>> box = Box([0.0, 0.0], [1.0, 1.0])
>>> box.encode([[0.2, 0.7], [0.9, 0.1]], depth=2).tolist()   # level 1: x ≥ .5?, level 2: y ≥ .5?
[1, 2]
>>> lo, hi = box.cell_bounds(2, [1])
>>> lo.tolist(), hi.tolist()
([[0.0, 0.5]], [[0.5, 1.0]])
>>> BitDomain.ipv4().encode(["10.0.0.1", "192.168.1.1"], depth=8).tolist()
[10, 192]
>>> Domain.from_dict(box.to_dict()) == box
True
"""

from __future__ import annotations

import abc
import math
from typing import Any

import numpy as np

from ..errors import InputError, ParameterError, check_choice, check_int
from ..privacy.rng import RNGLike, as_source

__all__ = ["BitDomain", "Box", "Domain", "domain_from_dict"]

_U64 = np.uint64
_ALL64 = _U64(0xFFFFFFFFFFFFFFFF)
_POLICIES = ("raise", "clip", "drop")
_TINY = float(np.finfo(np.float64).tiny)

# Magic-number bit spreading stages (shift, mask, needed when the input has more bits than
# this): 2-way for up to 32 bits, 3-way for up to 21.
_SPREAD2 = (
    (16, 0x0000FFFF0000FFFF, 16),
    (8, 0x00FF00FF00FF00FF, 8),
    (4, 0x0F0F0F0F0F0F0F0F, 4),
    (2, 0x3333333333333333, 2),
    (1, 0x5555555555555555, 1),
)
_SPREAD3 = (
    (32, 0x001F00000000FFFF, 16),
    (16, 0x001F0000FF0000FF, 8),
    (8, 0x100F00F00F00F00F, 4),
    (4, 0x10C30C30C30C30C3, 2),
    (2, 0x1249249249249249, 1),
)
# Inverse (compaction) stages, applied after masking with the first mask.
_COMPACT2 = (
    0x5555555555555555,
    (1, 0x3333333333333333),
    (2, 0x0F0F0F0F0F0F0F0F),
    (4, 0x00FF00FF00FF00FF),
    (8, 0x0000FFFF0000FFFF),
    (16, 0x00000000FFFFFFFF),
)
_COMPACT3 = (
    0x1249249249249249,
    (2, 0x10C30C30C30C30C3),
    (4, 0x100F00F00F00F00F),
    (8, 0x001F0000FF0000FF),
    (16, 0x001F00000000FFFF),
    (32, 0x00000000001FFFFF),
)


def _bits_per_axis(depth: int, d: int) -> list[int]:
    """Number of levels ``1 … depth`` that cut each coordinate (level l cuts (l − 1) mod d)."""
    return [max((depth - i + d - 1) // d, 0) for i in range(d)]


def _spread(x: np.ndarray, nbits: int, d: int, tmp: np.ndarray) -> np.ndarray:
    """Spread the low ``nbits`` bits of ``x`` in place so bit j moves to bit d·j (d = 2 or 3).

    ``tmp`` is a scratch array of the same shape and dtype (uint64).
    """
    stages = _SPREAD2 if d == 2 else _SPREAD3
    for shift, mask, needed_above in stages:
        if nbits > needed_above:
            np.left_shift(x, _U64(shift), out=tmp)
            np.bitwise_or(x, tmp, out=x)
            np.bitwise_and(x, _U64(mask), out=x)
    return x


def _compact(x: np.ndarray, d: int) -> np.ndarray:
    """Gather bits 0, d, 2d, … of ``x`` (a fresh array is returned) into bits 0, 1, 2, …."""
    stages = _COMPACT2 if d == 2 else _COMPACT3
    out = np.bitwise_and(x, _U64(stages[0]))
    tmp = np.empty_like(out)
    for shift, mask in stages[1:]:
        np.right_shift(out, _U64(shift), out=tmp)
        np.bitwise_or(out, tmp, out=out)
        np.bitwise_and(out, _U64(mask), out=out)
    return out


def _axis_indices64(aligned: np.ndarray, d: int) -> list[np.ndarray]:
    """Per-axis indices, at depth 64, of left-aligned Morton codes (``prefix << (64 − level)``)."""
    if d == 1:
        return [aligned]
    bits = _bits_per_axis(64, d)
    if d in (2, 3):
        out = []
        for i in range(d):
            low = 63 - i - d * (bits[i] - 1)  # position of axis i's last (depth-64) bit
            idx = _compact(aligned >> _U64(low) if low else aligned, d)
            if d == 3 and bits[i] == 22:  # the 3-way masks hold 21 bits; add the 22nd (bit 63)
                idx |= (aligned >> _U64(63)) << _U64(21)
            out.append(idx)
        return out
    out = []
    tmp = np.empty_like(aligned)
    for i in range(d):
        idx = np.zeros_like(aligned)
        for j in range(bits[i]):
            np.right_shift(aligned, _U64(63 - i - d * j), out=tmp)
            np.bitwise_and(tmp, _U64(1), out=tmp)
            np.left_shift(tmp, _U64(bits[i] - 1 - j), out=tmp)
            np.bitwise_or(idx, tmp, out=idx)
        out.append(idx)
    return out


def _row_text(value: Any) -> str:
    """A short printable form of a row for error messages."""
    if isinstance(value, (np.ndarray, np.generic)):
        value = value.tolist()
    text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."


class Domain(abc.ABC):
    """Common interface of :class:`Box` and :class:`BitDomain` (see ``docs/architecture.md``).

    A domain has a dimension ``d``, a ``max_depth`` (≤ 64), an out-of-bounds policy, and maps
    points to uint64 Morton codes (``encode``) and cells back to geometry (``cell_bounds``,
    ``decode``, ``sample_cells``, ``volume_fraction``). ``Domain.from_dict`` rebuilds either kind.

    Examples
    --------
    >>> Domain.from_dict({"type": "BitDomain", "bits": 16, "out_of_bounds": "raise"})
    BitDomain(bits=16)
    """

    _owner = "Domain"

    # ------------------------------------------------------------------ interface (subclasses)
    @property
    @abc.abstractmethod
    def d(self) -> int:
        """Dimension of the domain."""

    @property
    @abc.abstractmethod
    def max_depth(self) -> int:
        """Deepest level a code can name (64 for a Box, ``bits`` for a BitDomain)."""

    @property
    def out_of_bounds(self) -> str:
        """Policy for points outside the domain: ``"raise"``, ``"clip"`` or ``"drop"``."""
        return self._out_of_bounds  # type: ignore[attr-defined]

    @abc.abstractmethod
    def encode(self, X: Any, depth: int, return_dropped: bool = False) -> Any:
        """Morton codes of a batch; see :meth:`Box.encode` and :meth:`BitDomain.encode`."""

    @abc.abstractmethod
    def cell_bounds(self, levels: Any, prefixes: Any) -> tuple[np.ndarray, np.ndarray]:
        """Corners of the given cells in user units; see the subclasses."""

    @abc.abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """JSON-able description with a ``"type"`` key; see the subclasses."""

    @property
    def columns(self) -> tuple[str, ...] | None:
        """Names of the coordinates (``None`` when not given); kept by ``to_dict``.

        With names, ``encode`` takes a pandas DataFrame's columns by name (in this order, other
        columns ignored); without them a DataFrame must have exactly ``d`` columns, taken in order.

        Examples
        --------
        >>> Box([0, 0], [1, 1], columns=["lon", "lat"]).columns
        ('lon', 'lat')
        """
        return getattr(self, "_columns", None)

    def _set_columns(self, columns: Any) -> None:
        if columns is None:
            self._columns: tuple[str, ...] | None = None
            return
        names = [columns] if isinstance(columns, str) else list(columns)
        if (
            len(names) != self.d
            or not all(isinstance(c, str) and c for c in names)
            or len(set(names)) != len(names)
        ):
            raise ParameterError(
                f"The 'columns' parameter of {self._owner} must be {self.d} distinct non-empty "
                f"strings (one per coordinate). Got {_row_text(columns)} instead."
            )
        self._columns = tuple(names)

    def _from_frame(self, X: Any) -> Any:
        """A pandas DataFrame (duck-typed) as a numpy array of this domain's columns by name."""
        if not (hasattr(X, "columns") and hasattr(X, "to_numpy") and getattr(X, "ndim", 0) == 2):
            return X
        names = self.columns
        if names is None:
            return X.to_numpy()
        have = set(X.columns)
        missing = [c for c in names if c not in have]
        if missing:
            raise InputError(
                f"X (a DataFrame) has no column {missing[0]!r}; this domain's columns are "
                f"{list(names)} and the DataFrame's are {list(X.columns)}"
            )
        return X[list(names)].to_numpy()

    # ------------------------------------------------------------------ shared behaviour
    def encode_one(self, x: Any, depth: int) -> int | None:
        """Morton code (a Python int) of one point ``x`` (shape ``(d,)``, or a scalar if d = 1).

        Out-of-bounds points follow the domain's policy; under ``"drop"`` the result is None.

        Examples
        --------
        >>> Box.unit(2).encode_one([0.9, 0.1], depth=2)
        2
        >>> BitDomain(8, out_of_bounds="drop").encode_one(300, depth=8) is None
        True
        """
        arr = x if isinstance(x, np.ndarray) else np.asarray(x, dtype=object)
        if arr.dtype == object and arr.ndim == 0:
            arr = np.asarray([x], dtype=object)
        elif arr.ndim == 0:
            arr = arr.reshape(1)
        if arr.ndim != 1 or arr.shape[0] != self.d:
            raise InputError(
                f"x must be one point with {self.d} coordinate(s); got {_row_text(x)} (use "
                "encode for a batch)"
            )
        if arr.dtype == object:
            arr = np.asarray(arr.tolist())
        codes = self.encode(arr.reshape(1, self.d), depth)
        return int(codes[0]) if codes.size else None

    def decode(self, codes: Any, depth: int) -> np.ndarray:
        """Centres ``(n, d)`` (float, user units) of the level-``depth`` cells named by ``codes``.

        Examples
        --------
        >>> Box([0, 0], [4, 2]).decode([3], depth=2).tolist()
        [[3.0, 1.5]]
        >>> BitDomain(8).decode([1], depth=1).tolist()
        [[191.5]]
        """
        depth = check_int(depth, "depth", f"{self._owner}.decode", 0, self.max_depth)
        lower, upper = self.cell_bounds(depth, codes)
        return (lower + upper) / 2.0

    def Gamma(self, level: int) -> float:  # noqa: N802 (the paper's name)
        """Sum of the diameters of the level's cells, ``2**l · gamma(l)``; ``Gamma(−1) = Gamma(0)``.

        Examples
        --------
        >>> Box.unit(2).Gamma(4), Box.unit(2).Gamma(-1), BitDomain(8).Gamma(5)
        (4.0, 1.0, 1.0)
        """
        level = max(self._check_level(level, "Gamma"), 0)
        return math.ldexp(self.gamma(level), level)

    @abc.abstractmethod
    def gamma(self, level: int) -> float:
        """Diameter of a level-``level`` cell in the normalised metric; see the subclasses."""

    def _check_level(self, level: Any, method: str) -> int:
        return check_int(level, "level", f"{self._owner}.{method}", -1, self.max_depth)

    def _check_depth(self, depth: Any, method: str) -> int:
        return check_int(depth, "depth", f"{self._owner}.{method}", 1, self.max_depth)

    def _check_policy(self, out_of_bounds: Any) -> str:
        return check_choice(out_of_bounds, "out_of_bounds", self._owner, _POLICIES)

    def _cells(self, levels: Any, prefixes: Any, method: str) -> tuple[np.ndarray, np.ndarray]:
        """Validate (levels, prefixes): int64 and uint64 1-D arrays of one common length."""
        owner = f"{self._owner}.{method}"
        lv = np.asarray(levels)
        if lv.dtype.kind == "f" and np.all(np.isfinite(lv)) and np.all(lv == np.round(lv)):
            lv = lv.astype(np.int64)
        if lv.dtype.kind not in "iu":
            raise ParameterError(
                f"The 'levels' parameter of {owner} must hold ints. Got {_row_text(levels)} "
                "instead."
            )
        px = np.asarray(prefixes)
        if px.dtype.kind == "i":
            if px.size and px.min() < 0:
                raise ParameterError(
                    f"The 'prefixes' parameter of {owner} must hold ints >= 0. Got "
                    f"{_row_text(px.reshape(-1)[int(np.argmin(px.reshape(-1)))])} instead."
                )
        elif px.dtype.kind == "O" or (px.dtype.kind == "f" and np.all(px == np.floor(px))):
            try:
                px = np.array(px.tolist(), dtype=_U64)
            except (OverflowError, TypeError, ValueError):
                raise ParameterError(
                    f"The 'prefixes' parameter of {owner} must hold ints in [0, 2**64). Got "
                    f"{_row_text(prefixes)} instead."
                ) from None
        elif px.dtype.kind != "u":
            raise ParameterError(
                f"The 'prefixes' parameter of {owner} must hold ints. Got {_row_text(prefixes)} "
                "instead."
            )
        try:
            lv, px = np.broadcast_arrays(lv.astype(np.int64), px.astype(_U64))
        except ValueError:
            raise ParameterError(
                f"The 'levels' and 'prefixes' parameters of {owner} must have broadcastable "
                f"shapes. Got {np.shape(levels)} and {np.shape(prefixes)} instead."
            ) from None
        lv, px = lv.reshape(-1), px.reshape(-1)
        if lv.size and (lv.min() < 0 or lv.max() > self.max_depth):
            i = int(np.flatnonzero((lv < 0) | (lv > self.max_depth))[0])
            raise ParameterError(
                f"The 'levels' parameter of {owner} must hold ints in [0, {self.max_depth}]. "
                f"Got {int(lv[i])} (cell {i}) instead."
            )
        too_big = ((px >> np.minimum(lv, 63).astype(_U64)) != 0) & (lv < 64)
        if too_big.any():
            i = int(np.flatnonzero(too_big)[0])
            raise ParameterError(
                f"The 'prefixes' parameter of {owner} must hold prefixes < 2**level. Got "
                f"prefix {int(px[i])} at level {int(lv[i])} (cell {i}) instead."
            )
        return lv, px

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Domain:
        """Rebuild a domain from :meth:`to_dict` output (``Domain.from_dict`` reads either kind).

        Examples
        --------
        >>> Domain.from_dict(Box([0, -1], [2, 1]).to_dict())
        Box(lower=[0.0, -1.0], upper=[2.0, 1.0])
        """
        kinds: dict[str, type[Domain]] = {"Box": Box, "BitDomain": BitDomain}
        kind = data.get("type") if isinstance(data, dict) else None
        if kind not in kinds or (cls is not Domain and kinds[kind] is not cls):
            expected = "Box or BitDomain" if cls is Domain else cls.__name__
            raise ParameterError(
                f"The 'data' parameter of {cls.__name__}.from_dict must be a dict with "
                f"'type' {expected}. Got {_row_text(data)} instead."
            )
        return kinds[kind]._from_fields(data)

    @classmethod
    @abc.abstractmethod
    def _from_fields(cls, data: dict[str, Any]) -> Domain:
        """Build the subclass from its validated ``to_dict`` fields."""

    @classmethod
    def _fields(
        cls, data: dict[str, Any], required: tuple[str, ...], optional: tuple[str, ...] = ()
    ) -> list[Any]:
        extra = set(data) - set(required) - set(optional) - {"type"}
        missing = [k for k in required if k not in data]
        if extra or missing:
            raise ParameterError(
                f"The 'data' parameter of {cls.__name__}.from_dict must have exactly the keys "
                f"{['type', *required]} (optional: {list(optional)}). Got {sorted(data)} instead."
            )
        return [data[k] for k in required] + [data.get(k) for k in optional]

    def _columns_dict(self) -> dict[str, Any]:
        return {} if self.columns is None else {"columns": list(self.columns)}

    def _policy_suffix(self) -> str:
        policy = self._out_of_bounds  # type: ignore[attr-defined]
        names = "" if self.columns is None else f", columns={list(self.columns)}"
        return ("" if policy == "raise" else f", out_of_bounds={policy!r}") + names

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.to_dict() == other.to_dict()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(repr(sorted(self.to_dict().items())))


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

    @property
    def lower(self) -> np.ndarray:
        """Lower corner, a read-only float64 array of shape ``(d,)``."""
        return self._lower

    @property
    def upper(self) -> np.ndarray:
        """Upper corner, a read-only float64 array of shape ``(d,)``."""
        return self._upper

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

    def encode(self, X: Any, depth: int, return_dropped: bool = False) -> Any:
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


# ------------------------------------------------------------------------------- IPv4 parsing
def _plain_array(X: Any, what: str) -> Any:
    """Unwrap array subclasses whose semantics would bypass the checks.

    A masked array with masked entries is refused (its mask would hide NaN or out-of-bounds
    values from the checks); ``np.matrix`` and other subclasses become plain arrays.
    """
    if isinstance(X, np.ma.MaskedArray):
        mask = np.ma.getmaskarray(X)
        if mask.any():
            row = int(np.flatnonzero(mask.reshape(mask.shape[0], -1).any(axis=1))[0])
            raise InputError(
                f"{what} is a masked array with masked values (first in row {row}); fill or "
                "drop them before adding the batch"
            )
        return np.asarray(X.data)
    if isinstance(X, np.ndarray) and type(X) is not np.ndarray:
        return np.asarray(X)
    return X


def _parse_ipv4(arr: np.ndarray, what: str = "X") -> np.ndarray:
    """Dotted-quad strings (a 1-D str/bytes array) → uint64 keys, column by column.

    Accepts exactly what :class:`ipaddress.IPv4Address` accepts: four decimal octets 0…255 of
    1–3 ASCII digits without leading zeros, separated by dots. Raises InputError naming the
    first row that is not such an address.
    """
    n = arr.shape[0]
    if n == 0:
        return np.zeros(0, dtype=_U64)
    unit = np.uint32 if arr.dtype.kind == "U" else np.uint8  # UCS-4 code points or bytes
    width = arr.dtype.itemsize // np.dtype(unit).itemsize
    if width == 0:
        raise InputError(f"{what} row 0 = {_row_text(arr[0])} is not an IPv4 address")
    M = np.ascontiguousarray(arr).view(unit).reshape(n, width)[:, :15]
    length = np.char.str_len(arr)  # characters before the trailing NUL padding
    bad = length > 15  # "255.255.255.255" is the longest address
    # One row per character position (plus a final NUL), so each step reads contiguous memory.
    chars = np.zeros((M.shape[1] + 1, n), dtype=np.uint8)
    chars[:-1] = np.minimum(M.T, 255)  # any non-ASCII character stays invalid
    digit = chars.astype(np.int16) - 48
    is_digit = (digit >= 0) & (digit <= 9)
    is_dot = chars == 46
    key = np.zeros(n, dtype=np.int64)
    acc = np.zeros(n, dtype=np.int16)
    ndig = np.zeros(n, dtype=np.int16)
    fields = np.zeros(n, dtype=np.int16)
    for c in range(chars.shape[0]):
        inside = length > c
        dig = is_digit[c]
        bad |= inside & ~(dig | is_dot[c])  # only digits and dots (a NUL inside is bad)
        bad |= dig & (ndig == 1) & (acc == 0)  # a leading zero
        np.copyto(acc, np.minimum(acc, 999) * 10 + digit[c], where=dig)
        ndig += dig
        cl = (is_dot[c] & inside) | (length == c)  # a dot or the end closes an octet
        bad |= cl & ((ndig == 0) | (ndig > 3) | (acc > 255))
        np.copyto(key, key * 256 + np.minimum(acc, 255), where=cl)
        fields += cl
        acc[cl] = 0
        ndig[cl] = 0
    bad |= fields != 4
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"{what} row {i} = {_row_text(arr[i])} is not an IPv4 address")
    return key.astype(_U64)


class BitDomain(Domain):
    """The integer key space ``{0, …, 2**bits − 1}``; level ``l`` is the ``l``-bit prefix.

    Keys are non-negative integers (any integer dtype, integral floats, Python ints) or, for
    ``bits = 32``, IPv4 dotted strings such as ``"10.0.0.1"`` (see :meth:`ipv4`). A batch holds
    either keys or strings, not both. The metric is ``|x − y| / 2**bits``, so a level-``l``
    cell has diameter ``2**−l`` (strictly ``(2**(bits−l) − 1)/2**bits`` between its first and last
    key; the library uses ``2**−l``, the diameter of the continuous interval the cell covers).

    Parameters
    ----------
    bits : int
        Key width, ``1 ≤ bits ≤ 64``; also ``max_depth``.
    out_of_bounds : {"raise", "clip", "drop"}
        Policy for keys outside ``[0, 2**bits)``: refuse the batch, clamp (negative keys to 0,
        large ones to ``2**bits − 1``) or drop them.
    columns : sequence of one str, optional
        Name of the key column (see :attr:`columns`); it survives ``to_dict``/``to_bytes``.

    Examples
    --------
    >>> dom = BitDomain(8)
    >>> dom.encode([0, 255, 128], depth=1).tolist()
    [0, 1, 1]
    >>> lo, hi = dom.cell_bounds(1, [1])
    >>> lo.tolist(), hi.tolist()
    ([[128.0]], [[255.0]])
    """

    _owner = "BitDomain"

    def __init__(self, bits: int, out_of_bounds: str = "raise", *, columns: Any = None) -> None:
        self._bits = check_int(bits, "bits", "BitDomain", minimum=1, maximum=64)
        self._out_of_bounds = self._check_policy(out_of_bounds)
        self._set_columns(columns)
        self._lower = np.zeros(1)
        self._upper = np.array([float((1 << self._bits) - 1)])
        self._lower.setflags(write=False)
        self._upper.setflags(write=False)

    @classmethod
    def ipv4(cls, out_of_bounds: str = "raise", *, columns: Any = None) -> BitDomain:
        """The IPv4 address space (``bits = 32``), which also reads dotted strings.

        Examples
        --------
        >>> dom = BitDomain.ipv4()
        >>> dom.encode(["10.1.2.3"], depth=32).tolist() == [(10 << 24) + (1 << 16) + (2 << 8) + 3]
        True
        """
        return cls(32, out_of_bounds, columns=columns)

    @property
    def bits(self) -> int:
        """Key width in bits."""
        return self._bits

    @property
    def d(self) -> int:
        """Dimension: 1."""
        return 1

    @property
    def max_depth(self) -> int:
        """``bits``: a level-``bits`` cell is one key."""
        return self._bits

    @property
    def lower(self) -> np.ndarray:
        """``[0.0]`` (read-only)."""
        return self._lower

    @property
    def upper(self) -> np.ndarray:
        """``[2**bits − 1]`` as float (read-only; rounded to a float for bits > 53)."""
        return self._upper

    # ---------------------------------------------------------------- validation and encoding
    def _keys(self, X: Any, what: str = "X") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Validate a batch: (keys uint64 with out-of-range keys set to 0, too-low, too-high)."""
        X = _plain_array(X, what)
        try:
            arr = X if isinstance(X, np.ndarray) else np.asarray(X)
        except (ValueError, OverflowError):
            arr = np.asarray(list(X), dtype=object)
        if arr.dtype.kind in "US" and not isinstance(X, np.ndarray):
            # numpy drops trailing NULs from strings: look for them in the caller's items.
            for i, item in enumerate(np.ravel(np.asarray(X, dtype=object))):
                if ("\x00" if isinstance(item, str) else b"\x00") in item:
                    raise InputError(f"{what} row {i} = {_row_text(item)} is not an IPv4 address")
        if not isinstance(X, np.ndarray) and arr.dtype.kind == "f" and (abs(arr) >= 2**53).any():
            arr = np.asarray(X, dtype=object)  # numpy turned big Python ints into floats: be exact
        if arr.ndim == 2 and arr.shape[1] == 1:
            arr = arr[:, 0]
        if arr.ndim != 1:
            hint = " (use encode_one for a single key)" if arr.ndim == 0 else ""
            raise InputError(f"{what} must be a 1-D array of keys; got shape {arr.shape}{hint}")
        n = arr.shape[0]
        top = 1 << self._bits
        low = np.zeros(n, dtype=bool)
        high = np.zeros(n, dtype=bool)
        kind = arr.dtype.kind
        if kind in "US":
            if self._bits != 32:
                raise self._no_strings(what, 0, arr[0])
            return _parse_ipv4(arr, what), low, high
        if kind == "O":
            return self._keys_objects(arr, what)
        if kind == "i":
            low = arr < 0
            keys = arr.astype(_U64)
            if self._bits < 63:
                high = arr >= top
        elif kind == "u":
            keys = arr.astype(_U64)
            if self._bits < 64:
                high = keys >= _U64(top)
        elif kind == "f":
            bad = ~(np.isfinite(arr) & (arr == np.floor(arr)))
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise InputError(f"{what} must hold integer keys: row {i} = {_row_text(arr[i])}")
            low = arr < 0
            high = arr >= float(top)
            keys = np.where(low | high, 0.0, arr).astype(_U64)
        else:
            raise InputError(
                f"{what} must hold integer keys; got dtype {arr.dtype} (row 0 = "
                f"{_row_text(arr[0]) if n else 'none'})"
            )
        out = low | high
        if out.any():
            keys = np.where(out, _U64(0), keys)
        return keys, low, high

    def _no_strings(self, what: str, row: int, value: Any) -> InputError:
        return InputError(
            f"{what} row {row} = {_row_text(value)}: strings are read as IPv4 addresses, which "
            f"need bits=32 (this BitDomain has bits={self._bits})"
        )

    def _keys_objects(self, arr: np.ndarray, what: str) -> tuple[np.ndarray, ...]:
        """Object arrays, one item at a time: Python ints, integral floats or IPv4 strings."""
        n = arr.shape[0]
        keys = np.zeros(n, dtype=_U64)
        low = np.zeros(n, dtype=bool)
        high = np.zeros(n, dtype=bool)
        top = 1 << self._bits
        for i, v in enumerate(arr.tolist()):
            if isinstance(v, (str, bytes)):
                if self._bits != 32:
                    raise self._no_strings(what, i, v)
                try:
                    keys[i] = _parse_ipv4(np.array([v]), what)[0]
                except InputError:
                    raise InputError(f"{what} row {i} = {v!r} is not an IPv4 address") from None
                continue
            if isinstance(v, float) and math.isfinite(v) and v.is_integer():
                v = int(v)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise InputError(f"{what} must hold integer keys: row {i} = {_row_text(v)}")
            v = int(v)
            low[i], high[i] = v < 0, v >= top
            keys[i] = v if 0 <= v < top else 0
        return keys, low, high

    def encode(self, X: Any, depth: int, return_dropped: bool = False) -> Any:
        """Level-``depth`` prefixes (uint64) of the keys: ``key >> (bits − depth)``.

        Parameters
        ----------
        X : array-like, shape (n,) or (n, 1)
            Integer keys, or IPv4 strings when ``bits = 32``. Never modified.
        depth : int
            ``1 ≤ depth ≤ bits``.
        return_dropped : bool
            Also return how many keys the ``"drop"`` policy removed.

        Raises
        ------
        InputError
            For a non-integer key, a malformed address, or a key outside ``[0, 2**bits)`` under
            ``"raise"``; the message names the first such row.

        Examples
        --------
        >>> BitDomain(8, out_of_bounds="clip").encode([-5, 3, 999], depth=8).tolist()
        [0, 3, 255]
        >>> BitDomain.ipv4().encode(["192.168.0.1"], depth=16).tolist() == [(192 << 8) + 168]
        True
        """
        depth = self._check_depth(depth, "encode")
        X = self._from_frame(X)
        keys, low, high = self._keys(X)
        n_dropped = 0
        outside = low | high
        if outside.any():
            if self._out_of_bounds == "raise":
                i = int(np.flatnonzero(outside)[0])
                value = np.asarray(X, dtype=object).reshape(-1)[i]
                raise InputError(
                    f"X row {i} = {_row_text(value)} is outside [0, 2**{self._bits}) "
                    "(out_of_bounds='raise')"
                )
            if self._out_of_bounds == "clip":
                keys = np.where(high, _U64((1 << self._bits) - 1), keys)
            else:
                n_dropped = int(outside.sum())
                keys = keys[~outside]
        codes = keys >> _U64(self._bits - depth)
        return (codes, n_dropped) if return_dropped else codes

    # ---------------------------------------------------------------- geometry
    def _spans(self, lv: np.ndarray, px: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """First key and (cell size − 1) of each cell, uint64."""
        shift = (self._bits - lv).astype(_U64)
        first = px << np.minimum(shift, _U64(63))  # shift 64 only for level 0, prefix 0
        minus_one = np.where(shift >= 64, _ALL64, (_U64(1) << np.minimum(shift, 63)) - _U64(1))
        return first, minus_one

    def cell_bounds(self, levels: Any, prefixes: Any) -> tuple[np.ndarray, np.ndarray]:
        """First and last key, ``(n, 1)`` float64 each, of the given cells (inclusive).

        Examples
        --------
        >>> lo, hi = BitDomain(8).cell_bounds([2, 8], [3, 7])
        >>> lo.tolist(), hi.tolist()
        ([[192.0], [7.0]], [[255.0], [7.0]])
        """
        lv, px = self._cells(levels, prefixes, "cell_bounds")
        first, minus_one = self._spans(lv, px)
        last = first + minus_one
        return first.astype(np.float64)[:, None], last.astype(np.float64)[:, None]

    def sample_cells(self, levels: Any, prefixes: Any, rng: RNGLike = None) -> np.ndarray:
        """One uniform key inside each given cell: int64 ``(n,)`` (uint64 when ``bits = 64``).

        A cell holds ``2**s`` keys, so the low ``s`` bits of a uniform 64-bit word give an
        exactly uniform offset.

        Examples
        --------
        >>> keys = BitDomain(8).sample_cells(4, [3, 15], rng=0)
        >>> keys.dtype.name, bool(48 <= keys[0] < 64), bool(240 <= keys[1] < 256)
        ('int64', True, True)
        """
        lv, px = self._cells(levels, prefixes, "sample_cells")
        first, minus_one = self._spans(lv, px)
        keys = first + (as_source(rng).uint64(px.size) & minus_one)
        return keys if self._bits == 64 else keys.astype(np.int64)

    def volume_fraction(self, levels: Any, prefixes: Any, lower: Any, upper: Any) -> np.ndarray:
        """Fraction of each cell's keys in the integer range ``[ceil(lower), floor(upper)]``.

        Examples
        --------
        >>> BitDomain(8).volume_fraction([1, 1], [0, 1], 64, 159).tolist()
        [0.5, 0.25]
        """
        qlo, qhi = self._query(lower, upper)
        lv, px = self._cells(levels, prefixes, "volume_fraction")
        first, minus_one = self._spans(lv, px)
        size = minus_one.astype(np.float64) + 1.0
        if qlo is None or qhi is None or qlo > qhi:
            return np.zeros(px.size)
        last = first + minus_one
        a = np.maximum(first, _U64(qlo))
        b = np.minimum(last, _U64(qhi))
        ok = a <= b
        count = np.where(ok, (b - np.where(ok, a, b)).astype(np.float64) + 1.0, 0.0)
        return count / size

    def _query(self, lower: Any, upper: Any) -> tuple[int | None, int | None]:
        """Query bounds as ints clipped to the key range (None: the range is empty)."""
        out: list[int | None] = []
        top = (1 << self._bits) - 1
        for name, value, rnd in (("lower", lower, math.ceil), ("upper", upper, math.floor)):
            arr = np.asarray(value)
            if arr.size != 1 or arr.dtype.kind not in "iuf":
                raise ParameterError(
                    f"The {name!r} parameter of BitDomain.volume_fraction must be one number. "
                    f"Got {_row_text(value)} instead."
                )
            v = arr.reshape(-1)[0]
            if arr.dtype.kind == "f":
                if math.isnan(v):
                    raise ParameterError(
                        f"The {name!r} parameter of BitDomain.volume_fraction must not be NaN."
                    )
                if math.isinf(v):
                    out.append((0 if v < 0 else top) if name == "lower" else (top if v > 0 else -1))
                    continue
                v = rnd(float(v))
            out.append(int(v))
        lo, hi = out
        assert lo is not None and hi is not None
        if hi < 0 or lo > top:
            return None, None
        return max(lo, 0), min(hi, top)

    def gamma(self, level: int) -> float:
        """Diameter of a level-``l`` cell in the metric ``|x − y|/2**bits``: ``2**−l``.

        Examples
        --------
        >>> BitDomain(32).gamma(8), BitDomain(32).gamma(-1)
        (0.00390625, 1.0)
        """
        level = max(self._check_level(level, "gamma"), 0)
        return math.ldexp(1.0, -level)

    def normalize(self, X: Any) -> np.ndarray:
        """Keys → ``key / 2**bits`` as float64 ``(n, 1)``, the unit interval of the metric.

        Any finite real values are accepted (cell centres from :meth:`decode` are not
        integers), as are IPv4 strings when ``bits = 32``; values are not checked against the
        key range.

        Examples
        --------
        >>> BitDomain(8).normalize([0, 128, 191.5]).ravel().tolist()
        [0.0, 0.5, 0.748046875]
        """
        X = self._from_frame(X)
        arr = X if isinstance(X, np.ndarray) else np.asarray(X)
        if arr.ndim == 2 and arr.shape[1] == 1:
            arr = arr[:, 0]
        if arr.dtype.kind == "O":
            try:
                arr = np.array(arr.tolist(), dtype=np.float64)
            except (TypeError, ValueError, OverflowError):
                pass  # strings (IPv4) or junk: the key parser names the row
        if arr.dtype.kind in "USO":
            keys, _, _ = self._keys(arr)
            return (keys.astype(np.float64) / 2.0**self._bits)[:, None]
        if arr.ndim != 1 or arr.dtype.kind not in "iuf":
            raise InputError(
                f"X must be a 1-D array of keys; got shape {arr.shape} and dtype {arr.dtype}"
            )
        vals = arr.astype(np.float64)
        finite = np.isfinite(vals)
        if not finite.all():
            i = int(np.flatnonzero(~finite)[0])
            raise InputError(f"X has a NaN or infinite value: row {i} = {_row_text(arr[i])}")
        return (vals / 2.0**self._bits)[:, None]

    # ---------------------------------------------------------------- identity
    def to_dict(self) -> dict[str, Any]:
        """JSON-able description: ``{"type": "BitDomain", "bits", "out_of_bounds"}``.

        A ``"columns"`` list is added when the domain has a column name.

        Examples
        --------
        >>> BitDomain(12).to_dict()
        {'type': 'BitDomain', 'bits': 12, 'out_of_bounds': 'raise'}
        """
        return {
            "type": "BitDomain",
            "bits": self._bits,
            "out_of_bounds": self._out_of_bounds,
        } | self._columns_dict()

    @classmethod
    def _from_fields(cls, data: dict[str, Any]) -> BitDomain:
        bits, policy, columns = cls._fields(data, ("bits", "out_of_bounds"), ("columns",))
        return cls(bits, policy, columns=columns)

    def __repr__(self) -> str:
        policy = self._policy_suffix()
        return f"BitDomain(bits={self._bits}{policy})"


def domain_from_dict(data: dict[str, Any]) -> Domain:
    """Rebuild a :class:`Box` or :class:`BitDomain` from its ``to_dict()`` (nothing is imported).

    Same as :meth:`Domain.from_dict`.

    Examples
    --------
    >>> domain_from_dict({"type": "Box", "lower": [0], "upper": [1], "out_of_bounds": "clip"})
    Box(lower=[0.0], upper=[1.0], out_of_bounds='clip')
    """
    return Domain.from_dict(data)
