"""PSMM, the Private Signed Measure Mechanism (He's dissertation §3.1, Algorithms 1–2).

The ``m = 2**depth`` cells of one level each get ``Lap_Z(1/ε)`` (a signed measure ν on the cell
centres), then the probability measure closest to ν in the bounded-Lipschitz distance is found
by linear programming.

Our reading of Algorithm 2. The LP printed in the dissertation keeps only the outgoing terms
``Σ_j (u_ij − u'_ij)`` in row i, so a unit of excess mass can be discharged at cost d_ij without
arriving anywhere (for ν = (1, 1) on two points at distance 1, its value is 0 while the true
d_BL is 1). We solve the exact dual of ``sup {Σ f_i (ν_i − τ_i) : |f_i| ≤ 1, f_i − f_j ≤ d_ij}``:

    minimise   Σ_{i≠j} d_ij g_ij + Σ_i (p_i + q_i)
    subject to Σ_j g_ij − Σ_j g_ji + p_i − q_i + τ_i = ν_i   (every i)
               Σ_i τ_i = 1,   g, p, q, τ ≥ 0

(a transport plan g plus unit-cost creation p and destruction q of mass), whose τ is the
d_BL-closest probability measure. ν is normalised by the noisy total ``max(Σ(n_i + λ_i), 1)``
rather than the true n, which is not public under add/remove neighbours.

Privacy: pure ε-DP, add/remove one item (one cell changes by one). Offline: the noise is drawn at
``release()``; the counts before it are not private.

>>> import numpy as np
>>> from sketchsyn import Box
>>> m = PSMM(Box.unit(2), epsilon=1.0, depth=4, rng=0)
>>> m.update_many(np.random.default_rng(1).random((2000, 2)))
>>> d = m.release()
>>> round(float(d.leaves().mass.sum()), 6)
1.0
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...attributes import ReadOnly
from ...errors import ParameterError, check_epsilon, check_int
from ...privacy.accounting import laplace_scale
from ...privacy.noise import discrete_laplace
from ...privacy.rng import RNGLike
from ..distribution import PrivateDistribution
from .histogram import LevelCounts

__all__ = ["MAX_CELLS", "PSMM", "closest_probability_measure"]

#: Largest partition the LP accepts: it has about m² variables.
MAX_CELLS = 256


def closest_probability_measure(nu: np.ndarray, dist: np.ndarray) -> np.ndarray:
    """The probability vector τ minimising ``d_BL(ν, τ)`` for metric ``dist`` (m × m), by LP.

    The negative mass at the middle point is covered from its nearest neighbour:

    >>> y = np.array([0.0, 0.1, 1.0])
    >>> tau = closest_probability_measure(np.array([0.7, -0.2, 0.5]), np.abs(y[:, None] - y))
    >>> np.round(tau, 6).tolist()
    [0.5, 0.0, 0.5]
    """
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix, hstack, identity, vstack

    m = nu.size
    ii, jj = np.nonzero(~np.eye(m, dtype=bool))
    n_g = ii.size
    cost = np.concatenate([np.minimum(dist[ii, jj], 2.0), np.ones(2 * m), np.zeros(m)])
    out_flow = coo_matrix((np.ones(n_g), (ii, np.arange(n_g))), shape=(m, n_g))
    in_flow = coo_matrix((np.ones(n_g), (jj, np.arange(n_g))), shape=(m, n_g))
    eye = identity(m, format="coo")
    rows = hstack([out_flow - in_flow, eye, -eye, eye])
    total = coo_matrix(np.concatenate([np.zeros(n_g + 2 * m), np.ones(m)])[None, :])
    A = vstack([rows, total]).tocsr()
    b = np.concatenate([nu, [1.0]])
    res = linprog(cost, A_eq=A, b_eq=b, bounds=(0, None), method="highs")
    if res.status != 0:  # pragma: no cover - the LP is always feasible and bounded
        raise RuntimeError(f"PSMM linear programme failed: {res.message}")
    tau = np.clip(res.x[-m:], 0.0, None)
    return tau / tau.sum()


class PSMM(LevelCounts):
    """Private Signed Measure Mechanism on the ``2**depth`` cells of one level.

    Saved state: **trusted**: exact counts until ``release()`` (see :class:`LevelCounts`).

    Parameters
    ----------
    domain : Box or BitDomain
    epsilon : float
        Pure ε-DP, add/remove one item.
    depth : int
        Level of the flat partition; ``2**depth ≤ MAX_CELLS`` (the LP has about m² variables).
    rng : None, int, SeedSequence, Generator or RandomSource, optional
        Noise randomness (``None``: OS CSPRNG; a seed is for tests only, not private).
    """

    def __init__(self, domain: Any, epsilon: float, depth: int, rng: RNGLike = None) -> None:
        self._epsilon = check_epsilon(epsilon, "PSMM")
        self._scale = laplace_scale(1, self._epsilon, "PSMM")
        depth = check_int(depth, "depth", "PSMM", minimum=1)
        if depth > MAX_CELLS.bit_length() - 1:
            raise ParameterError(
                f"The 'depth' parameter of PSMM gives 2**{depth} cells; the linear "
                f"programme is limited to MAX_CELLS = {MAX_CELLS} cells (about m² variables). "
                "Use PMM or PrivHP for finer partitions."
            )
        super().__init__(domain, depth, rng, "PSMM")

    _PARAMS = ("epsilon",)
    epsilon = ReadOnly[float]("Privacy budget ε of the release.")

    def _release_now(self) -> tuple[PrivateDistribution, dict[str, np.ndarray]]:
        """Add the noise once, solve the LP, return the private distribution."""
        m = self._counts.size
        noisy = self._counts + discrete_laplace(self._scale, m, rng=self._source)
        total = max(float(noisy.sum()), 1.0)
        cells = np.arange(m, dtype=np.uint64)
        centres = self._domain.normalize(self._domain.decode(cells, self._level))
        dist = np.abs(centres[:, None, :] - centres[None, :, :]).max(axis=-1)
        tau = closest_probability_measure(noisy / total, dist)
        return self._distribution(np.full(m, self._level), cells, tau * total, "PSMM"), {}
