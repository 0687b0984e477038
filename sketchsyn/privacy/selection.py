"""Private selection: the index of a high score, by report-noisy-max with exponential noise.

:func:`report_noisy_max` adds to every integer score an independent one-sided geometric
variable ``G`` with ``P(G ≥ g) = e^{−g/s}`` (``g = 0, 1, 2, …``), ``s = 2Δ/ε``, and returns the
index of the largest noisy score (ties to the lowest index). This is report-noisy-max with
exponential noise, which McKenna and Sheldon's permute-and-flip mechanism equals (Ding, Zhang,
Wang, Kifer, Kifer and Lin, "The Permute-and-Flip Mechanism is Identical to Report-Noisy-Max
with Exponential Noise"; McKenna and Sheldon, "Permute-and-Flip: A new mechanism for
differentially private selection"): an ε-DP alternative to the exponential mechanism whose
expected score is never lower. Here the scores are integers and the noise a discrete
geometric, drawn exactly (:mod:`sketchsyn.privacy.noise`): no floating-point step decides the
outcome.

**Privacy (ε-DP for scores of sensitivity Δ).** Fix the noise of every index but ``i``. Index
``i`` wins exactly when ``q_i + G_i ≥ T_i``, where ``T_i`` is the larger of ``max_{j<i}(q_j +
G_j) + 1`` and ``max_{j>i}(q_j + G_j)`` (integers). Between neighbouring inputs every score moves
by at most ``Δ``, so ``T_i − q_i`` moves by at most ``2Δ``, and ``P(G_i ≥ t − 2Δ) ≤
e^{2Δ/s}·P(G_i ≥ t)`` for every integer ``t``. With ``s = 2Δ/ε`` the probability of each
outcome changes by a factor at most ``e^ε``; integrating over the other indices' noise keeps the
bound. A score that is a real-valued function of sensitivity ``Δ`` stays of sensitivity ``Δ``
after rounding down to an integer (``floor`` is monotone and commutes with adding integers), so
callers floor their scores first.

>>> report_noisy_max([0, 10_000, 3], epsilon=1.0, sensitivity=1, rng=0)
1
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ..errors import ParameterError, check_epsilon
from .accounting import laplace_scale
from .noise import _geometric
from .rng import RNGLike, as_source

__all__ = ["report_noisy_max", "selection_scale"]

_OWNER = "report_noisy_max"


def selection_scale(epsilon: float, sensitivity: int = 1) -> float:
    """The geometric scale ``s`` with ``2Δ/s ≤ ε`` exactly (as rationals).

    >>> selection_scale(0.5, 1)
    4.0
    """
    return laplace_scale(2 * int(sensitivity), epsilon, _OWNER)


def report_noisy_max(scores: Any, epsilon: float, sensitivity: int = 1, rng: RNGLike = None) -> int:
    """Index of the largest of ``scores`` plus one-sided geometric noise of scale ``2Δ/ε``:
    ε-DP when every score has sensitivity ``Δ`` (module docstring).

    Parameters
    ----------
    scores : 1-D array of integers
        One score per candidate (at least one), of sensitivity ``sensitivity``.
    epsilon : float
        Budget of this one selection.
    sensitivity : int
        ``Δ``: the most any score moves between neighbouring inputs (≥ 1).
    rng : None, int, SeedSequence, Generator or RandomSource
        ``None`` is the OS CSPRNG; a seed is for tests only.

    Examples
    --------
    Scores 2 and 0 at ε = 1 (``s = 2``): the second index wins when its noise beats the
    first's by 2 or more, with probability ``p²/(1 + p)``, ``p = e^{−1/2}``: 0.229.

    >>> wins = [report_noisy_max([0, 2], epsilon=1.0, rng=s) for s in range(2000)]
    >>> 0.73 < wins.count(1) / 2000 < 0.81
    True
    """
    eps = check_epsilon(epsilon, _OWNER)
    q = np.asarray(scores)
    if q.ndim != 1 or q.size == 0 or q.dtype.kind not in "iu":
        raise ParameterError(
            f"The 'scores' parameter of {_OWNER} must be a non-empty 1-D array of integers. "
            f"Got {q.dtype} of shape {q.shape} instead."
        )
    if isinstance(sensitivity, bool) or not isinstance(sensitivity, (int, np.integer)):
        raise ParameterError(
            f"The 'sensitivity' parameter of {_OWNER} must be an int ≥ 1. "
            f"Got {sensitivity!r} instead."
        )
    if sensitivity < 1:
        raise ParameterError(
            f"The 'sensitivity' parameter of {_OWNER} must be an int ≥ 1. "
            f"Got {sensitivity!r} instead."
        )
    scale = Fraction(selection_scale(eps, int(sensitivity)))
    noise = _geometric(1 / scale, q.size, as_source(rng))
    noisy = q.astype(np.int64) + noise
    return int(np.argmax(noisy))  # the first maximum: ties to the lowest index
