"""Public domains and their binary hierarchical decomposition (SPEC §1).

A level-``l`` cell is named by an ``l``-bit prefix. ``Box`` cuts coordinate ``(l − 1) mod d`` in
half at level ``l`` (round robin; level 1 cuts coordinate 0), so a prefix is the top ``l`` bits
of the Morton (bit-interleaved) code of the quantised point. ``BitDomain(bits)`` is the integer
key space ``{0, …, 2**bits − 1}`` (IPv4 addresses: ``bits = 32``) whose level-``l`` cell is the
``l``-bit prefix (a ``/l`` network).

Metric: for ``Box``, ℓ∞ after scaling every coordinate to [0, 1] (the "unit box"); for
``BitDomain``, ``|x − y| / 2**bits``. Diameters of level-``l`` cells in that metric:
``gamma(l) = 2**−floor(l/d)`` (Box) and ``2**−l`` (BitDomain).

>>> box = Box([0.0, 0.0], [1.0, 1.0])
>>> box.encode([[0.2, 0.7], [0.9, 0.1]], depth=2).tolist()   # level 1: x < .5?, level 2: y < .5?
[1, 2]
>>> lo, hi = box.cell_bounds(2, [1])
>>> lo.tolist(), hi.tolist()
([[0.0, 0.5]], [[0.5, 1.0]])
>>> BitDomain.ipv4().encode(["10.0.0.1"], depth=8).tolist()
[10]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import InputError, ParameterError, check_choice, check_int
from .rng import RNGLike, as_source

__all__ = ["BitDomain", "Box", "domain_from_dict"]

_U64 = np.uint64
_POLICIES = ("raise", "clip", "drop")


def _bits_per_axis(depth: int, d: int) -> list[int]:
    """Number of levels ≤ depth that cut each coordinate."""
    return [(depth - i + d - 1) // d if depth > i else 0 for i in range(d)]


def _spread2(x: np.ndarray) -> np.ndarray:
    """Spread the low 32 bits of x so bit i moves to bit 2i."""
    x = x & _U64(0xFFFFFFFF)
    x = (x | (x << _U64(16))) & _U64(0x0000FFFF0000FFFF)
    x = (x | (x << _U64(8))) & _U64(0x00FF00FF00FF00FF)
    x = (x | (x << _U64(4))) & _U64(0x0F0F0F0F0F0F0F0F)
    x = (x | (x << _U64(2))) & _U64(0x3333333333333333)
    return (x | (x << _U64(1))) & _U64(0x5555555555555555)


_SPREAD2_TABLE: np.ndarray | None = None


def _spread2_table() -> np.ndarray:
    """``_spread2`` of every 16-bit value (a 512 KiB uint64 table, built once per process)."""
    global _SPREAD2_TABLE
    if _SPREAD2_TABLE is None:
        _SPREAD2_TABLE = _spread2(np.arange(2**16, dtype=_U64))
    return _SPREAD2_TABLE


def _spread3(x: np.ndarray) -> np.ndarray:
    """Spread the low 21 bits of x so bit i moves to bit 3i."""
    x = x & _U64(0x1FFFFF)
    x = (x | (x << _U64(32))) & _U64(0x1F00000000FFFF)
    x = (x | (x << _U64(16))) & _U64(0x1F0000FF0000FF)
    x = (x | (x << _U64(8))) & _U64(0x100F00F00F00F00F)
    x = (x | (x << _U64(4))) & _U64(0x10C30C30C30C30C3)
    return (x | (x << _U64(2))) & _U64(0x1249249249249249)


def _interleave(q: list[np.ndarray], depth: int) -> np.ndarray:
    """Morton code (``depth`` bits) from per-axis quantised coordinates ``q[i]`` (uint64).

    Level l (1-based) takes the next most significant unused bit of axis (l − 1) mod d and puts it
    at bit position depth − l of the code.
    """
    d = len(q)
    b = _bits_per_axis(depth, d)
    if d == 1:
        return q[0]
    if d == 2 and depth % 2 == 0 and depth <= 32:
        # Up to 16 bits per axis: one table look-up spreads them (bit i → bit 2i).
        table = _spread2_table()
        return (table[q[0]] << _U64(1)) | table[q[1]]
    if d in (2, 3) and depth % d == 0 and depth <= 63:
        spread = _spread2 if d == 2 else _spread3
        code = np.zeros_like(q[0])
        for i in range(d):
            code |= spread(q[i]) << _U64(d - 1 - i)
        return code
    code = np.zeros_like(q[0])
    used = [0] * d
    for level in range(1, depth + 1):
        i = (level - 1) % d
        used[i] += 1
        bit = (q[i] >> _U64(b[i] - used[i])) & _U64(1)
        code |= bit << _U64(depth - level)
    return code


def _deinterleave(codes: np.ndarray, level: int, d: int) -> list[np.ndarray]:
    """Per-axis cell indices (uint64) of level-``level`` prefixes."""
    b = _bits_per_axis(level, d)
    out = [np.zeros_like(codes) for _ in range(d)]
    for lv in range(1, level + 1):
        i = (lv - 1) % d
        bit = (codes >> _U64(level - lv)) & _U64(1)
        out[i] = (out[i] << _U64(1)) | bit
    del b
    return out


def _levels_prefixes(levels: Any, prefixes: Any, max_depth: int) -> tuple[np.ndarray, np.ndarray]:
    px = np.asarray(prefixes, dtype=_U64).reshape(-1)
    lv = np.broadcast_to(np.asarray(levels, dtype=np.int64), px.shape).copy()
    if lv.size and (lv.min() < 0 or lv.max() > max_depth):
        raise ParameterError(
            f"cell levels must lie in [0, {max_depth}]. Got {lv.min()}..{lv.max()}"
        )
    return lv, px


class Box:
    """The box ``[lower, upper]`` of ℝ^d with public bounds, metric ℓ∞ on the unit box.

    Parameters
    ----------
    lower, upper : array-like of d floats (or scalars for d = 1)
        Public, finite bounds with ``lower < upper`` per coordinate.
    out_of_bounds : {"raise", "clip", "drop"}
        Policy for points outside the box: refuse the batch (default), clamp them to the box, or
        drop them (``encode(..., return_dropped=True)`` reports how many).

    Examples
    --------
    >>> Box.unit(3).d, Box.unit(3).gamma(3), Box.unit(3).gamma(2)
    (3, 0.5, 1.0)
    """

    max_depth = 64

    def __init__(self, lower: Any, upper: Any, out_of_bounds: str = "raise") -> None:
        lo = np.atleast_1d(np.asarray(lower, dtype=np.float64)).copy()
        hi = np.atleast_1d(np.asarray(upper, dtype=np.float64)).copy()
        if lo.ndim != 1 or lo.shape != hi.shape or lo.size < 1:
            raise ParameterError(
                f"The 'lower' and 'upper' parameters of Box must be 1-D of the same length >= 1. "
                f"Got shapes {lo.shape} and {hi.shape} instead."
            )
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
            raise ParameterError(
                f"The 'lower' and 'upper' parameters of Box must be finite. Got {lo.tolist()} and "
                f"{hi.tolist()} instead."
            )
        if np.any(lo >= hi):
            i = int(np.flatnonzero(lo >= hi)[0])
            raise ParameterError(
                f"The 'lower' parameter of Box must be < 'upper' in every coordinate. Got "
                f"lower[{i}]={lo[i]} >= upper[{i}]={hi[i]} instead."
            )
        lo.setflags(write=False)
        hi.setflags(write=False)
        self._lower, self._upper = lo, hi
        self._out_of_bounds = check_choice(out_of_bounds, "out_of_bounds", "Box", _POLICIES)

    @classmethod
    def unit(cls, d: int, out_of_bounds: str = "raise") -> Box:
        """The unit box ``[0, 1]^d``."""
        d = check_int(d, "d", "Box.unit", minimum=1)
        return cls(np.zeros(d), np.ones(d), out_of_bounds)

    @property
    def d(self) -> int:
        """Dimension."""
        return int(self._lower.size)

    @property
    def lower(self) -> np.ndarray:
        return self._lower

    @property
    def upper(self) -> np.ndarray:
        return self._upper

    @property
    def out_of_bounds(self) -> str:
        return self._out_of_bounds

    # ---------------------------------------------------------------- validation and encoding
    def _points(self, X: Any) -> np.ndarray:
        """Validate a batch; return a float64 (n, d) array (never the caller's array)."""
        try:
            arr = np.asarray(X, dtype=np.float64)  # read only: never written to
        except (TypeError, ValueError):
            arr = None
        if arr is None:
            raw = np.asarray(X, dtype=object)
            rows = raw.reshape(raw.shape[0], -1) if raw.ndim >= 1 and raw.shape[0] else raw
            for i, row in enumerate(rows):
                try:
                    np.asarray(row, dtype=np.float64)
                except (TypeError, ValueError):
                    raise InputError(
                        f"X must hold numbers: row {i} = {row!r} is not numeric"
                    ) from None
            raise InputError("X must be a numeric array of shape (n, d)")
        if arr.ndim == 1 and self.d == 1:
            arr = arr.reshape(-1, 1)
        if arr.ndim != 2 or arr.shape[1] != self.d:
            raise InputError(
                f"X must have shape (n, {self.d}) for this {self.d}-dimensional Box; got shape "
                f"{arr.shape}"
            )
        return arr

    def encode(self, X: Any, depth: int, return_dropped: bool = False) -> Any:
        """Morton codes (uint64) of the points' level-``depth`` cells.

        Returns the codes, or ``(codes, n_dropped)`` with ``return_dropped=True``. The whole batch
        is checked first; nothing is returned for a batch with a bad row.
        """
        depth = check_int(depth, "depth", "Box.encode", minimum=0, maximum=self.max_depth)
        arr = self._points(X)
        n_dropped = 0
        # Fast path: one scaled copy; NaN fails both comparisons, so `inside` also screens it.
        unit = (arr - self._lower) / (self._upper - self._lower)
        if unit.size == 0 or (unit.min() >= 0.0 and unit.max() <= 1.0):  # False for NaN
            codes = self._quantise_encode(unit, depth)
            return (codes, 0) if return_dropped else codes
        finite = np.isfinite(arr).all(axis=1)
        if not finite.all():
            i = int(np.flatnonzero(~finite)[0])
            raise InputError(f"X has a NaN or infinite value: row {i} = {arr[i].tolist()}")
        outside = ((arr < self._lower) | (arr > self._upper)).any(axis=1)
        if outside.any():
            if self._out_of_bounds == "raise":
                i = int(np.flatnonzero(outside)[0])
                raise InputError(
                    f"X row {i} = {arr[i].tolist()} is outside the Box bounds "
                    f"{self._lower.tolist()}..{self._upper.tolist()} (out_of_bounds='raise')"
                )
            if self._out_of_bounds == "clip":
                arr = np.clip(arr, self._lower, self._upper)
            else:
                n_dropped = int(outside.sum())
                arr = arr[~outside]
        unit = (arr - self._lower) / (self._upper - self._lower)
        codes = self._quantise_encode(unit, depth)
        return (codes, n_dropped) if return_dropped else codes

    def _quantise_encode(self, unit: np.ndarray, depth: int) -> np.ndarray:
        """Morton codes from points already scaled to the unit box."""
        bits = _bits_per_axis(depth, self.d)
        q = []
        for i in range(self.d):
            cells = float(2 ** bits[i])
            qi = np.minimum(unit[:, i] * cells, cells - 1).astype(_U64)  # upper bound: last cell
            q.append(qi)
        if depth == 0:
            return np.zeros(unit.shape[0], dtype=_U64)
        return _interleave(q, depth)

    # ---------------------------------------------------------------- geometry
    def cell_bounds(self, levels: Any, prefixes: Any) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper corners, ``(n, d)`` each in user units, of the given cells."""
        lv, px = _levels_prefixes(levels, prefixes, self.max_depth)
        lo_u = np.zeros((px.size, self.d))
        side_u = np.ones((px.size, self.d))
        for level in np.unique(lv):
            sel = lv == level
            idx = _deinterleave(px[sel], int(level), self.d)
            bits = _bits_per_axis(int(level), self.d)
            for i in range(self.d):
                side = 2.0 ** -bits[i]
                lo_u[sel, i] = idx[i].astype(np.float64) * side
                side_u[sel, i] = side
        span = self._upper - self._lower
        lower = self._lower + lo_u * span
        upper = np.minimum(self._lower + (lo_u + side_u) * span, self._upper)
        return lower, upper

    def decode(self, codes: Any, depth: int) -> np.ndarray:
        """Centres ``(n, d)`` of the level-``depth`` cells named by ``codes``."""
        lower, upper = self.cell_bounds(depth, codes)
        return (lower + upper) / 2.0

    def sample_cells(self, levels: Any, prefixes: Any, rng: RNGLike = None) -> np.ndarray:
        """One uniform point inside each given cell, ``(n, d)`` in user units."""
        lower, upper = self.cell_bounds(levels, prefixes)
        u = as_source(rng).random(lower.shape)
        return np.minimum(lower + u * (upper - lower), upper)

    def volume_fraction(self, levels: Any, prefixes: Any, lower: Any, upper: Any) -> np.ndarray:
        """Fraction of each cell's volume inside the query box ``[lower, upper]`` (user units)."""
        qlo = np.broadcast_to(np.asarray(lower, dtype=np.float64), (self.d,))
        qhi = np.broadcast_to(np.asarray(upper, dtype=np.float64), (self.d,))
        clo, chi = self.cell_bounds(levels, prefixes)
        overlap = np.clip(np.minimum(chi, qhi) - np.maximum(clo, qlo), 0.0, None)
        return np.prod(overlap / (chi - clo), axis=1)

    def gamma(self, level: int) -> float:
        """Diameter of a level-``level`` cell, ℓ∞ on the unit box: ``2**−floor(l/d)``."""
        return 2.0 ** -(max(int(level), 0) // self.d)

    def Gamma(self, level: int) -> float:  # noqa: N802 (the paper's name)
        """Sum of the level's cell diameters, ``2**l · gamma(l)``; ``Gamma(−1) = Gamma(0)``."""
        level = max(int(level), 0)
        return 2.0**level * self.gamma(level)

    def normalize(self, X: Any) -> np.ndarray:
        """Points in user units → the unit box (float ``(n, d)``), for metrics."""
        arr = np.asarray(X, dtype=np.float64).reshape(-1, self.d)
        return (arr - self._lower) / (self._upper - self._lower)

    # ---------------------------------------------------------------- identity
    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "Box",
            "lower": self._lower.tolist(),
            "upper": self._upper.tolist(),
            "out_of_bounds": self._out_of_bounds,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Box:
        return cls(data["lower"], data["upper"], data.get("out_of_bounds", "raise"))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Box) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash((tuple(self._lower), tuple(self._upper), self._out_of_bounds))

    def __repr__(self) -> str:
        return f"Box(lower={self._lower.tolist()}, upper={self._upper.tolist()})"


class BitDomain:
    """The integer key space ``{0, …, 2**bits − 1}``; level ``l`` is the ``l``-bit prefix.

    Keys are non-negative integers (or, for ``bits = 32``, IPv4 strings like ``"10.0.0.1"``).
    The metric is ``|x − y| / 2**bits``. ``sample_cells`` returns int64 keys of shape ``(n,)``.

    Examples
    --------
    >>> dom = BitDomain(8)
    >>> dom.encode([0, 255, 128], depth=1).tolist()
    [0, 1, 1]
    >>> dom.cell_bounds(1, [1])[0].tolist(), dom.cell_bounds(1, [1])[1].tolist()
    ([[128.0]], [[255.0]])
    """

    d = 1

    def __init__(self, bits: int, out_of_bounds: str = "raise") -> None:
        self._bits = check_int(bits, "bits", "BitDomain", minimum=1, maximum=64)
        self._out_of_bounds = check_choice(out_of_bounds, "out_of_bounds", "BitDomain", _POLICIES)

    @classmethod
    def ipv4(cls, out_of_bounds: str = "raise") -> BitDomain:
        """The IPv4 address space (``bits = 32``)."""
        return cls(32, out_of_bounds)

    @property
    def bits(self) -> int:
        return self._bits

    @property
    def max_depth(self) -> int:
        return self._bits

    @property
    def out_of_bounds(self) -> str:
        return self._out_of_bounds

    @property
    def lower(self) -> np.ndarray:
        return np.array([0.0])

    @property
    def upper(self) -> np.ndarray:
        return np.array([float(2**self._bits - 1)])

    def _keys(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """(keys uint64, inside-mask) after validation; strings parsed as IPv4."""
        arr = np.asarray(X)
        if arr.ndim == 2 and arr.shape[1] == 1:
            arr = arr[:, 0]
        if arr.ndim != 1:
            raise InputError(f"X must be a 1-D array of integer keys; got shape {arr.shape}")
        if arr.dtype.kind in "US" or arr.dtype == object:
            keys = np.empty(arr.size, dtype=_U64)
            inside = np.ones(arr.size, dtype=bool)
            for i, v in enumerate(arr.tolist()):
                keys[i], inside[i] = self._parse_one(v, i)
            return keys, inside
        if arr.dtype.kind == "f":
            bad = ~(np.isfinite(arr) & (arr == np.floor(arr)))
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise InputError(f"X must hold integer keys: row {i} = {arr[i]!r}")
            neg = arr < 0
            big = arr >= 2.0**self._bits
            keys = np.where(neg | big, 0, arr).astype(_U64)
            return keys, ~(neg | big)
        if arr.dtype.kind == "i":
            neg = arr < 0
            keys = np.where(neg, 0, arr).astype(_U64)
            inside = ~neg
            if self._bits < 64:
                inside &= keys < _U64(2**self._bits)
            return keys, inside
        if arr.dtype.kind in "ub":
            keys = arr.astype(_U64)
            inside = keys < _U64(2**self._bits) if self._bits < 64 else np.ones(arr.size, bool)
            return keys, inside
        raise InputError(f"X must hold integer keys; got dtype {arr.dtype}")

    def _parse_one(self, v: Any, i: int) -> tuple[int, bool]:
        if isinstance(v, (bytes, str)):
            text = v.decode() if isinstance(v, bytes) else v
            parts = text.strip().split(".")
            if self._bits != 32 or len(parts) != 4 or not all(p.isdigit() for p in parts):
                raise InputError(f"X row {i} = {v!r} is not an IPv4 address (needs bits=32)")
            octets = [int(p) for p in parts]
            if any(o > 255 for o in octets):
                raise InputError(f"X row {i} = {v!r} is not an IPv4 address")
            return (octets[0] << 24) | (octets[1] << 16) | (octets[2] << 8) | octets[3], True
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            else:
                raise InputError(f"X must hold integer keys: row {i} = {v!r}")
        v = int(v)
        if 0 <= v < 2**self._bits:
            return v, True
        return 0, False

    def encode(self, X: Any, depth: int, return_dropped: bool = False) -> Any:
        """Level-``depth`` prefixes (uint64) of the keys (``key >> (bits − depth)``)."""
        depth = check_int(depth, "depth", "BitDomain.encode", minimum=0, maximum=self._bits)
        keys, inside = self._keys(X)
        n_dropped = 0
        if not inside.all():
            if self._out_of_bounds == "raise":
                i = int(np.flatnonzero(~inside)[0])
                raise InputError(
                    f"X row {i} = {np.asarray(X).reshape(-1)[i]!r} is outside [0, 2**{self._bits})"
                    " (out_of_bounds='raise')"
                )
            if self._out_of_bounds == "clip":
                raw = np.asarray(X).reshape(-1)
                low = np.zeros(raw.size, dtype=bool)
                if raw.dtype.kind in "if":
                    low = raw < 0
                keys = np.where(~inside & ~low, _U64(2**self._bits - 1), keys)
            else:
                n_dropped = int((~inside).sum())
                keys = keys[inside]
        codes = keys >> _U64(self._bits - depth) if depth < 64 else keys
        if depth == 0:
            codes = np.zeros(keys.size, dtype=_U64)
        return (codes, n_dropped) if return_dropped else codes

    def cell_bounds(self, levels: Any, prefixes: Any) -> tuple[np.ndarray, np.ndarray]:
        """First and last key, ``(n, 1)`` float each, of the given cells."""
        lv, px = _levels_prefixes(levels, prefixes, self._bits)
        shift = (self._bits - lv).astype(_U64)
        first = px << shift
        last = first + ((_U64(1) << shift) - _U64(1))
        return first.astype(np.float64)[:, None], last.astype(np.float64)[:, None]

    def decode(self, codes: Any, depth: int) -> np.ndarray:
        lower, upper = self.cell_bounds(depth, codes)
        return (lower + upper) / 2.0

    def sample_cells(self, levels: Any, prefixes: Any, rng: RNGLike = None) -> np.ndarray:
        """One uniform key inside each given cell: int64 array ``(n,)`` (uint64 if bits = 64)."""
        lv, px = _levels_prefixes(levels, prefixes, self._bits)
        shift = (self._bits - lv).astype(_U64)
        src = as_source(rng)
        width = _U64(1) << shift
        offset = src.uint64(px.size) & (width - _U64(1))  # exactly uniform: width is 2**shift
        keys = (px << shift) + offset
        return keys if self._bits == 64 else keys.astype(np.int64)

    def volume_fraction(self, levels: Any, prefixes: Any, lower: Any, upper: Any) -> np.ndarray:
        """Fraction of each cell's keys in ``[lower, upper]`` (inclusive integer range)."""
        lo_c, hi_c = self.cell_bounds(levels, prefixes)
        lo_c, hi_c = lo_c[:, 0], hi_c[:, 0]
        qlo = float(np.asarray(lower, dtype=np.float64).reshape(-1)[0])
        qhi = float(np.asarray(upper, dtype=np.float64).reshape(-1)[0])
        overlap = np.clip(
            np.minimum(hi_c, np.floor(qhi)) - np.maximum(lo_c, np.ceil(qlo)) + 1, 0.0, None
        )
        return overlap / (hi_c - lo_c + 1)

    def gamma(self, level: int) -> float:
        """Diameter of a level-``level`` cell in the metric ``|x − y|/2**bits``: ``2**−l``."""
        return 2.0 ** -max(int(level), 0)

    def Gamma(self, level: int) -> float:  # noqa: N802
        """``2**l · gamma(l) = 1``."""
        return 1.0

    def normalize(self, X: Any) -> np.ndarray:
        keys, _ = self._keys(X)
        return (keys.astype(np.float64) / 2.0**self._bits)[:, None]

    def to_dict(self) -> dict[str, Any]:
        return {"type": "BitDomain", "bits": self._bits, "out_of_bounds": self._out_of_bounds}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BitDomain:
        return cls(data["bits"], data.get("out_of_bounds", "raise"))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BitDomain) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(("BitDomain", self._bits, self._out_of_bounds))

    def __repr__(self) -> str:
        return f"BitDomain(bits={self._bits})"


def domain_from_dict(data: dict[str, Any]) -> Box | BitDomain:
    """Rebuild a domain from its ``to_dict()`` (only Box and BitDomain; nothing is imported)."""
    kinds = {"Box": Box, "BitDomain": BitDomain}
    kind = data.get("type") if isinstance(data, dict) else None
    if kind not in kinds:
        raise ParameterError(f"unknown domain type {kind!r}; expected Box or BitDomain")
    return kinds[kind].from_dict(data)
