"""Privacy budgets and their split: pure ε-DP, ρ-zCDP, per-level allocations.

>>> b = PureDPBudget(1.0)
>>> b.spend(0.25, "level 0"); b.spend(0.75, "rest")
>>> b.remaining
0.0
>>> b.spend(0.01)
Traceback (most recent call last):
...
sketchsyn.errors.BudgetExceededError: cannot spend epsilon=0.01 (''): only 0 of 1 left
>>> round(zcdp_to_approx_dp(0.5, 1e-6), 4)
5.7565
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np

from ..errors import BudgetExceededError, ParameterError, check_choice, check_epsilon, check_int
from .memo import cached

__all__ = [
    "MAX_LAPLACE_SCALE",
    "PureDPBudget",
    "ZCDPBudget",
    "pmm_depth",
    "pmm_scales",
    "privhp_allocation",
    "privhp_depth",
    "fit_to_budget",
    "laplace_scale",
    "share_of",
    "pure_to_zcdp",
    "zcdp_to_approx_dp",
]


MAX_LAPLACE_SCALE = 2**30  # the largest scale noise.discrete_laplace accepts


@cached  # exact arithmetic, once per parameter set
def laplace_scale(sensitivity: float, epsilon: float, owner: str, name: str = "epsilon") -> float:
    """The smallest float ``s`` with ``sensitivity / s ≤ epsilon`` exactly (as rationals).

    Noise parameters are used as the exact rationals of their floats, so ``1/ε`` computed in
    floating point can be a few ulps below the true ``1/ε`` and realise ``ε`` plus a few ulps;
    rounding the scale up makes the realised budget ``sensitivity / s`` at most ``epsilon``.
    A budget so small that the scale exceeds ``MAX_LAPLACE_SCALE`` is refused, naming the
    caller's argument.

    >>> s = laplace_scale(1, 0.1, "Demo")
    >>> Fraction(1) / Fraction(s) <= Fraction(0.1)
    True
    >>> laplace_scale(1, 1e-12, "Demo")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sketchsyn.errors.ParameterError: The 'epsilon' parameter of Demo is too small...
    """
    sens, eps = Fraction(sensitivity), Fraction(epsilon)
    scale = float(sens / eps)
    while Fraction(scale) * eps < sens:
        scale = math.nextafter(scale, math.inf)
    if not scale <= MAX_LAPLACE_SCALE:
        raise ParameterError(
            f"The {name!r} parameter of {owner} is too small: it needs integer Laplace noise "
            f"of scale {scale:.4g}, above the largest supported {MAX_LAPLACE_SCALE} (2**30). "
            f"Got {epsilon!r} instead."
        )
    return scale


@cached
def share_of(epsilon: float, factor: int) -> float:
    """The largest float ``e`` with ``factor · e ≤ epsilon`` exactly (as rationals): the budget
    of a structure whose neighbours move ``factor`` times what one row moves (a privacy unit of
    at most ``L`` rows: ``factor = 2L``), so that ``factor`` such events cost at most
    ``epsilon``.

    >>> share_of(1.0, 2), Fraction(share_of(1.0, 3)) * 3 <= 1
    (0.5, True)
    """
    e = float(Fraction(epsilon) / factor)
    while Fraction(e) * factor > Fraction(epsilon):
        e = math.nextafter(e, 0.0)
    return e


def fit_to_budget(parts: Sequence[float], epsilon: float, spent: float = 0.0) -> np.ndarray:
    """``parts`` lowered by a few ulps where needed so that their exact sum, plus ``spent``
    (a part fixed already, left as it is), is ``≤ epsilon``.

    A split computed in floating point (``ε·w_l/S``) can sum to a few ulps above ``ε``; the
    largest parts are nudged down one ulp at a time until the rational sum fits.

    >>> parts = fit_to_budget([0.1] * 10, 1.0)
    >>> sum(Fraction(p) for p in parts) <= 1
    True
    >>> parts = fit_to_budget([0.49, 0.49], 1.0, spent=0.02)
    >>> sum(Fraction(p) for p in parts) + Fraction(0.02) <= 1
    True
    """
    out = [float(p) for p in parts]
    eps = Fraction(epsilon)
    total = Fraction(spent) + sum(Fraction(p) for p in out)
    order = sorted(range(len(out)), key=lambda i: -out[i])
    i = 0
    while total > eps:
        j = order[i % len(order)]
        lower = math.nextafter(out[j], 0.0)
        total -= Fraction(out[j]) - Fraction(lower)
        out[j] = lower
        i += 1
    return np.asarray(out, dtype=np.float64)


class _Budget:
    """Sequential composition with exact (Fraction) arithmetic, refusing to overspend."""

    _unit = "epsilon"

    def __init__(self, total: float) -> None:
        self._total = Fraction(check_epsilon(total, type(self).__name__, self._unit))
        self._spent = Fraction(0)
        self._ledger: list[tuple[str, float]] = []

    def spend(self, amount: float, label: str = "") -> None:
        """Spend ``amount`` (composition adds budgets); refuse if more than what is left."""
        amt = Fraction(check_epsilon(amount, f"{type(self).__name__}.spend", self._unit))
        if self._spent + amt > self._total:
            raise BudgetExceededError(
                f"cannot spend {self._unit}={float(amt):g} ({label!r}): only "
                f"{float(self._total - self._spent):g} of {float(self._total):g} left"
            )
        self._spent += amt
        self._ledger.append((label, float(amt)))

    @property
    def total(self) -> float:
        return float(self._total)

    @property
    def spent(self) -> float:
        return float(self._spent)

    @property
    def remaining(self) -> float:
        return float(self._total - self._spent)

    @property
    def ledger(self) -> list[tuple[str, float]]:
        """``(label, amount)`` of every spend, in order."""
        return list(self._ledger)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._unit}={self.total:g}, spent={self.spent:g})"


class PureDPBudget(_Budget):
    """A pure ε-DP budget: spends add up (sequential composition)."""

    _unit = "epsilon"


class ZCDPBudget(_Budget):
    """A ρ-zCDP budget: spends add up; convert to (ε, δ)-DP with :meth:`to_approx_dp`.

    >>> ZCDPBudget(0.005).to_approx_dp(1e-5) > 0.005
    True
    """

    _unit = "rho"

    def to_approx_dp(self, delta: float) -> float:
        """ε such that the total ρ-zCDP implies (ε, δ)-DP."""
        return zcdp_to_approx_dp(self.total, delta)


def zcdp_to_approx_dp(rho: float, delta: float) -> float:
    """ρ-zCDP implies (ρ + 2·sqrt(ρ·ln(1/δ)), δ)-DP for every δ in (0, 1)."""
    rho = check_epsilon(rho, "zcdp_to_approx_dp", "rho")
    if not (isinstance(delta, (int, float)) and 0.0 < float(delta) < 1.0):
        raise ParameterError(
            f"The 'delta' parameter of zcdp_to_approx_dp must be in (0, 1). Got {delta!r} instead."
        )
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / float(delta)))


def pure_to_zcdp(epsilon: float) -> float:
    """ε-DP implies (ε²/2)-zCDP."""
    return check_epsilon(epsilon, "pure_to_zcdp") ** 2 / 2.0


def _gammas(depth: int, d: int | None, gammas: Sequence[float] | Callable | None, owner: str):
    """γ_l for l = −1…depth as an array of length depth + 2 (γ_{−1} = γ_0)."""
    if gammas is None:
        if d is None:
            raise ParameterError(f"{owner} needs either 'd' (unit cube) or 'gammas'. Got neither.")
        d = check_int(d, "d", owner, minimum=1)
        levels = np.arange(-1, depth + 1)
        return 2.0 ** (-np.floor(np.maximum(levels, 0) / d))
    if callable(gammas):
        g = np.array([float(gammas(level)) for level in range(-1, depth + 1)])
    else:
        g = np.asarray(gammas, dtype=np.float64)
    if g.shape != (depth + 2,) or not np.all(np.isfinite(g)) or np.any(g <= 0):
        raise ParameterError(
            f"The 'gammas' parameter of {owner} must give depth + 2 = {depth + 2} finite positive "
            f"diameters (levels −1…depth). Got {g!r} instead."
        )
    return g


def privhp_allocation(
    epsilon: float,
    k: int,
    depth: int,
    d: int | None = None,
    gammas: Sequence[float] | Callable | None = None,
    allocation: str = "optimal",
    counter_depth: int | None = None,
) -> np.ndarray:
    """Per-level budgets σ_0…σ_r of PrivHP (Holland et al., Lemma 5, eq. 23).

    Lemma 5 minimises the error bound ``Σ_l c_l/σ_l`` subject to ``Σ σ_l = ε``, whose solution
    is σ_l ∝ sqrt(c_l). A level of exact counters (l ≤ L_c) adds noise to all its 2^l cells:
    ``c_l = Γ_{l−1}`` with Γ_l = 2^l·γ_l and Γ_{−1} = Γ_0. A sketch level (l > L_c) is queried
    only at the children of the ``k`` cells grown at the level above: ``c_l = k·γ_{l−1}``.
    ``L_c`` is ``counter_depth`` (default the paper's ``L_k = floor(log2 k)``; PrivHP may put
    it deeper, see ``PrivHP.auto_counter_depth``), and ``k`` is the number of cells grown per
    sketch level (PrivHP passes its ``release_k``). Eq. 23 was derived for one sketch row; with
    ``j`` rows each cell's noise is ``j/σ_l`` and the same factor ``j`` multiplies every sketch
    level's ``c_l``, which would move budget towards the sketch levels; we keep the paper's
    weights (measured in docs/utility.md). Normalised so that Σ σ_l = ε (the last entry
    absorbs float rounding). ``"uniform"`` gives ε/(r+1) per level. Give ``d`` for the unit
    cube (γ_l = 2^−floor(l/d), ℓ∞) or ``gammas`` (γ_{−1}…γ_r, or a callable of l).

    >>> s = privhp_allocation(1.0, k=4, depth=6, d=2)
    >>> len(s), round(float(s.sum()), 12)
    (7, 1.0)
    """
    owner = "privhp_allocation"
    epsilon = check_epsilon(epsilon, owner)
    k = check_int(k, "k", owner, minimum=1)
    depth = check_int(depth, "depth", owner, minimum=0, maximum=64)
    check_choice(allocation, "allocation", owner, ("optimal", "uniform"))
    if allocation == "uniform":
        weights = np.ones(depth + 1)
    else:
        g = _gammas(depth, d, gammas, owner)  # g[l + 1] = γ_l
        L_c = k.bit_length() - 1
        if counter_depth is not None:
            L_c = check_int(counter_depth, "counter_depth", owner, minimum=0, maximum=depth)
        levels = np.arange(depth + 1)
        gamma_prev = g[levels]  # γ_{l−1}
        Gamma_prev = np.where(levels >= 1, 2.0 ** np.maximum(levels - 1, 0), 1.0) * gamma_prev
        weights = np.where(levels <= L_c, np.sqrt(Gamma_prev), np.sqrt(k * gamma_prev))
    sigmas = epsilon * weights / weights.sum()
    sigmas[-1] = epsilon - sigmas[:-1].sum()
    return fit_to_budget(sigmas, epsilon)


def pmm_scales(
    epsilon: float,
    depth: int,
    d: int | None = None,
    gammas: Sequence[float] | Callable | None = None,
) -> np.ndarray:
    """PMM noise scales s_0…s_r (He's dissertation, Theorem 3.10): s_l = S/(ε·sqrt(Δ_{l−1})).

    Δ_l = Γ_l = 2^l·γ_l (Δ_{−1} = Δ_0) and S = Σ_l sqrt(Δ_{l−1}), so that Σ 1/s_l = ε. Each
    scale is rounded up (:func:`laplace_scale`) so that the exact rational sum is ``≤ ε``.

    >>> s = pmm_scales(1.0, depth=4, d=1)
    >>> round(float((1 / s).sum()), 12)
    1.0
    """
    owner = "pmm_scales"
    epsilon = check_epsilon(epsilon, owner)
    depth = check_int(depth, "depth", owner, minimum=0, maximum=64)
    g = _gammas(depth, d, gammas, owner)
    levels = np.arange(depth + 1)
    delta_prev = np.where(levels >= 1, 2.0 ** np.maximum(levels - 1, 0), 1.0) * g[levels]
    root = np.sqrt(delta_prev)
    parts = fit_to_budget(epsilon * root / root.sum(), epsilon)
    return np.array([laplace_scale(1, part, "PMM") for part in parts])


def pmm_depth(epsilon: float, n: int, d: int) -> int:
    """PMM depth: ceil(log2(εn)) − 1 for d = 1, ceil(log2(εn)) for d ≥ 2; at least 1."""
    epsilon = check_epsilon(epsilon, "pmm_depth")
    n = check_int(n, "n", "pmm_depth", minimum=1)
    d = check_int(d, "d", "pmm_depth", minimum=1)
    r = math.ceil(math.log2(max(epsilon * n, 2.0)))
    return max(r - 1 if d == 1 else r, 1)


def privhp_depth(epsilon: float, n: int, d: int, k: int) -> int:
    """PrivHP depth: as :func:`pmm_depth`, clamped to at least L_k + 1."""
    k = check_int(k, "k", "privhp_depth", minimum=1)
    return max(pmm_depth(epsilon, n, d), k.bit_length())
