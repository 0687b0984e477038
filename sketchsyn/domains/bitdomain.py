"""The integer key space :class:`BitDomain` (IPv4 addresses: ``bits = 32``).

A level-``l`` cell is the ``l``-bit prefix of the key (a ``/l`` network); the metric is
``|x − y| / 2**bits``.

>>> BitDomain.ipv4().encode(["10.0.0.1", "192.168.1.1"], depth=8).tolist()
[10, 192]
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..attributes import ReadOnly
from ..errors import InputError, ParameterError, check_int
from ..privacy.rng import RNGLike, as_source
from .base import Domain, _plain_array, _row_text
from .ipv4 import _parse_ipv4
from .morton import _ALL64, _U64

__all__ = ["BitDomain"]


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

    bits = ReadOnly[int]("Key width in bits.")

    @property
    def d(self) -> int:
        """Dimension: 1."""
        return 1

    @property
    def max_depth(self) -> int:
        """``bits``: a level-``bits`` cell is one key."""
        return self._bits

    lower = ReadOnly[np.ndarray]("``[0.0]`` (read-only).")
    upper = ReadOnly[np.ndarray](
        "``[2**bits − 1]`` as float (read-only; rounded to a float for bits > 53)."
    )

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

    def encode(self, X: Any, depth: int, return_dropped: bool = False, adjusted: Any = None) -> Any:
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

    def kept(self, X: Any) -> np.ndarray:
        """Keys of a valid batch inside ``[0, 2**bits)`` (the ones ``encode`` keeps under
        ``"drop"``).

        >>> BitDomain(8, out_of_bounds="drop").kept([3, 999]).tolist()
        [True, False]
        """
        _, low, high = self._keys(self._from_frame(X))
        if self._out_of_bounds != "drop":
            return np.ones(low.shape[0], dtype=bool)
        return ~(low | high)

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
