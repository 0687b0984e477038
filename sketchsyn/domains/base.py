"""The abstract :class:`Domain` (encode records to cell codes, cell geometry, ``to_dict``) and
the checks shared by its subclasses; :func:`domain_from_dict` rebuilds either kind.

>>> from sketchsyn.domains import BitDomain, Box
>>> domain_from_dict(BitDomain(8).to_dict())
BitDomain(bits=8)
>>> isinstance(Box.unit(2), Domain)
True
"""

from __future__ import annotations

import abc
import math
import sys
from typing import Any, ClassVar

import numpy as np

from ..errors import InputError, ParameterError, check_choice, check_int
from .morton import _U64

__all__ = ["Domain", "domain_from_dict"]

_POLICIES = ("raise", "clip", "drop")


def _row_text(value: Any) -> str:
    """A short printable form of a row for error messages."""
    if isinstance(value, (np.ndarray, np.generic)):
        value = value.tolist()
    text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."


def _plain_array(X: Any, what: str) -> Any:
    """Unwrap array subclasses whose semantics would bypass the checks.

    A masked array with masked entries is refused (its mask would hide NaN or out-of-bounds
    values from the checks); ``np.matrix`` and other subclasses become plain arrays.
    """
    ma = sys.modules.get("numpy.ma")  # (no masked array exists before numpy.ma is imported,
    if ma is not None and isinstance(X, ma.MaskedArray):  # and its import costs 25 ms)
        mask = ma.getmaskarray(X)
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


class Domain(abc.ABC):
    """Common interface of :class:`Box` and :class:`BitDomain`.

    A domain has a dimension ``d``, a ``max_depth`` (≤ 64), an out-of-bounds policy, and maps
    points to uint64 Morton codes (``encode``) and cells back to geometry (``cell_bounds``,
    ``decode``, ``sample_cells``, ``volume_fraction``). ``Domain.from_dict`` rebuilds either kind.

    Examples
    --------
    >>> Domain.from_dict({"type": "BitDomain", "bits": 16, "out_of_bounds": "raise"})
    BitDomain(bits=16)
    """

    _owner = "Domain"
    # Every concrete kind by its ``to_dict()['type']``, filled as each subclass is defined (so
    # this module imports none of them; ``sketchsyn.domains`` imports them all).
    _KINDS: ClassVar[dict[str, type[Domain]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        Domain._KINDS[cls.__name__] = cls

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
    def encode(self, X: Any, depth: int, return_dropped: bool = False, adjusted: Any = None) -> Any:
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
        >>> from sketchsyn.domains import BitDomain, Box
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

    @abc.abstractmethod
    def kept(self, X: Any) -> np.ndarray:
        """Which rows of a valid batch ``encode`` keeps: all but those the ``"drop"`` policy
        removes (a bool mask, one a row). A summary that must line rows up with something
        else (a privacy unit's ids) asks for it when ``encode`` reports dropped rows."""

    # ------------------------------------------------------------------ shared behaviour
    def encode_one(self, x: Any, depth: int) -> int | None:
        """Morton code (a Python int) of one point ``x`` (shape ``(d,)``, or a scalar if d = 1).

        Out-of-bounds points follow the domain's policy; under ``"drop"`` the result is None.

        Examples
        --------
        >>> from sketchsyn.domains import BitDomain, Box
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
        >>> from sketchsyn.domains import BitDomain, Box
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
        >>> from sketchsyn.domains import BitDomain, Box
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
        """Rebuild a domain from :meth:`to_dict` output (``Domain.from_dict`` reads any kind).

        Examples
        --------
        >>> from sketchsyn.domains import Box
        >>> Domain.from_dict(Box([0, -1], [2, 1]).to_dict())
        Box(lower=[0.0, -1.0], upper=[2.0, 1.0])
        """
        kinds = Domain._KINDS
        kind = data.get("type") if isinstance(data, dict) else None
        if kind is None and isinstance(data, dict) and isinstance(data.get("columns"), list):
            kind = "Schema"  # a schema's dict form is its contract: {"columns": [...]}
        if kind not in kinds or (cls is not Domain and kinds[kind] is not cls):
            expected = " or ".join(sorted(kinds)) if cls is Domain else cls.__name__
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


def domain_from_dict(data: dict[str, Any]) -> Domain:
    """Rebuild a :class:`Box` or :class:`BitDomain` from its ``to_dict()`` (nothing is imported).

    Same as :meth:`Domain.from_dict`.

    Examples
    --------
    >>> domain_from_dict({"type": "Box", "lower": [0], "upper": [1], "out_of_bounds": "clip"})
    Box(lower=[0.0], upper=[1.0], out_of_bounds='clip')
    """
    return Domain.from_dict(data)
