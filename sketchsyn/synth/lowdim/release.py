"""The release of :class:`~sketchsyn.synth.lowdim.LowDimSynthesizer` (private PCA, then PMM
or PSMM on the private subspace): :class:`LowDimDistribution`.

It holds only private values: the inner release of PMM or PSMM over the d'-dimensional box of
projected coordinates, the private principal directions, the private mean and the noisy
spectrum. Sampling is post-processing.

>>> import numpy as np
>>> from sketchsyn import Box
>>> from sketchsyn.synth.lowdim import LowDimSynthesizer
>>> t = np.random.default_rng(0).random((5000, 1))
>>> X = np.hstack([t, 1 - t, 0.5 * t])
>>> dist = LowDimSynthesizer(Box.unit(3), epsilon=1.0, target_dim=1, rng=1).fit(X)
>>> LowDimDistribution.from_bytes(dist.to_bytes()) == dist
True
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...attributes import ReadOnly
from ...domains import Box
from ...errors import SerializationError, check_int
from ...io.serial import Arrays, MetaReader
from ...io.summary import Summary
from ...privacy.rng import RNGLike, as_source
from ..distribution import PrivateDistribution

__all__ = ["MAX_N", "LowDimDistribution", "read_parts"]

_DIST_KIND = "LowDimDistribution"
MAX_N = 2**31  # S2 entries are below n·QUANT² < 2**63
_PARTS = ("covariance", "mean", "synthesis")


def read_parts(fields: MetaReader, epsilon: float, kind: str) -> dict[str, float]:
    """The header field ``epsilon_parts``: three positive finite budgets summing to ``epsilon``."""
    parts = fields.dict("epsilon_parts")
    ok = set(parts) == set(_PARTS) and all(
        not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) and v > 0
        for v in parts.values()
    )
    if not ok or not math.isclose(math.fsum(parts.values()), epsilon, rel_tol=1e-9):
        raise SerializationError(
            f"{kind} blob header field 'epsilon_parts' must be three positive budgets "
            f"{_PARTS} summing to epsilon={epsilon!r}, got {str(parts)[:80]}"
        )
    return {k: float(parts[k]) for k in _PARTS}


class LowDimDistribution(Summary):
    """The release of :class:`~sketchsyn.synth.lowdim.LowDimSynthesizer`: a private
    distribution on a d'-dimensional subspace.

    Saved state: **private** (``STATE_PRIVACY = "private"``): the release itself, noisy values
    and public parameters only.

    Attributes
    ----------
    inner : PrivateDistribution
        PMM's or PSMM's release over the d'-dimensional box of projected coordinates.
    components : ndarray (d, d')
        Orthonormal private principal directions, in unit-box coordinates
        (coordinate i scaled to ``(x_i − lower_i)/(upper_i − lower_i)``).
    mean : ndarray (d,)
        The private mean, in user units.
    spectrum : ndarray (d,)
        Noisy eigenvalues of ``M̂`` (unit-box units), decreasing.
    target_dim : int
        d', fixed by the caller or chosen privately (§4.5).
    """

    STATE_PRIVACY = "private"
    FORMAT_VERSION = 2
    READS = (1, 2)  # version 1 also held the exact record count, which a release must not

    def __init__(
        self,
        domain: Box,
        inner: PrivateDistribution,
        components: np.ndarray,
        mean_unit: np.ndarray,
        spectrum: np.ndarray,
        *,
        epsilon: float,
        epsilon_parts: dict[str, float],
        method: str,
        one_pass: bool,
    ) -> None:
        self._domain = domain
        self._inner = inner
        self._components = np.asarray(components, dtype=np.float64)
        self._mean_unit = np.asarray(mean_unit, dtype=np.float64)
        self._spectrum = np.asarray(spectrum, dtype=np.float64)
        self._epsilon = float(epsilon)
        self._parts = dict(epsilon_parts)
        self._method = method
        self._one_pass = bool(one_pass)

    domain = ReadOnly[Box]("The public box of the data, in user units.")
    inner = ReadOnly[PrivateDistribution]("The release in the projected space (PMM's or PSMM's).")

    @property
    def components(self) -> np.ndarray:
        return self._components.copy()

    @property
    def mean(self) -> np.ndarray:
        """Private mean in user units."""
        return self._domain.lower + self._mean_unit * (self._domain.upper - self._domain.lower)

    @property
    def spectrum(self) -> np.ndarray:
        return self._spectrum.copy()

    @property
    def target_dim(self) -> int:
        return int(self._components.shape[1])

    epsilon = ReadOnly[float]("Total privacy budget ε of the release.")

    @property
    def epsilon_parts(self) -> dict[str, float]:
        return dict(self._parts)

    @property
    def mechanism(self) -> str:
        return f"LowDim+{self._method.upper()}"

    @property
    def total(self) -> float:
        """Noisy (consistent) count of the synthesis stage's records."""
        return float(self._inner.total)

    @property
    def nbytes(self) -> int:
        return int(
            self._inner.nbytes
            + self._components.nbytes
            + self._mean_unit.nbytes
            + self._spectrum.nbytes
            + 64
        )

    def sample(self, m: int, rng: RNGLike = None) -> np.ndarray:
        """``m`` synthetic points in user units: ``clip(X̄_priv + V̂ a)`` with ``a ~ inner``.

        Post-processing of the release: a seed here does not weaken privacy.
        """
        m = check_int(m, "m", "LowDimDistribution.sample", minimum=0)
        a = self._inner.sample(m, rng=as_source(rng))
        unit = np.clip(self._mean_unit + a @ self._components.T, 0.0, 1.0)
        return self._domain.lower + unit * (self._domain.upper - self._domain.lower)

    def _state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The release: its parameters, the inner release's bytes and the private subspace."""
        meta = {
            "domain": self._domain.to_dict(),
            "epsilon": self._epsilon,
            "epsilon_parts": self._parts,
            "method": self._method,
            "one_pass": self._one_pass,
        }
        arrays = {
            "inner": np.frombuffer(self._inner.to_bytes(), dtype=np.uint8),
            "components": self._components,
            "mean_unit": self._mean_unit,
            "spectrum": self._spectrum,
        }
        return meta, arrays

    @classmethod
    def _from_state(
        cls, fields: MetaReader, arrays: Arrays, version: int, blob: bytes, rng: Any
    ) -> LowDimDistribution:
        """Check the header and every array against the domain's dimension, then load."""
        domain = fields.domain()
        if not isinstance(domain, Box):
            raise SerializationError(f"{_DIST_KIND} blob header field 'domain' is not a Box")
        d = int(domain.d)
        epsilon = fields.epsilon("epsilon")
        parts = read_parts(fields, epsilon, _DIST_KIND)
        method = fields.str("method", ("pmm", "psmm"))
        if version == 1:  # version 1 stored the exact record count; it is checked, not kept
            fields.int("n", minimum=0, maximum=MAX_N)
        one_pass = fields.bool("one_pass")
        if set(arrays) != {"inner", "components", "mean_unit", "spectrum"}:
            raise SerializationError(f"{_DIST_KIND} blob holds unexpected arrays {sorted(arrays)}")
        comp = arrays["components"]
        if comp.ndim != 2 or not 1 <= comp.shape[1] <= d:
            raise SerializationError(
                f"{_DIST_KIND} blob array 'components' must be (d={d}, d') with 1 <= d' <= d, "
                f"got shape {list(comp.shape)}"
            )
        components = fields.array(arrays, "components", np.float64, (d, comp.shape[1]))
        mean_unit = fields.array(arrays, "mean_unit", np.float64, (d,))
        spectrum = fields.array(arrays, "spectrum", np.float64, (d,))
        inner = fields.nested(arrays, "inner", PrivateDistribution)
        if int(inner.domain.d) != components.shape[1]:
            raise SerializationError(
                f"{_DIST_KIND} blob array 'inner' holds a release of dimension {inner.domain.d}, "
                "expected "
                f"d' = {components.shape[1]}"
            )
        fields.done(arrays)  # no header field or array the class does not write
        return cls(
            domain,
            inner,
            components,
            mean_unit,
            spectrum,
            epsilon=epsilon,
            epsilon_parts=parts,
            method=method,
            one_pass=one_pass,
        )

    def __repr__(self) -> str:
        return (
            f"LowDimDistribution(d={self._domain.d}, target_dim={self.target_dim}, "
            f"method={self._method!r}, epsilon={self._epsilon!r}, total={self.total:.0f})"
        )
