"""ContinualPrivHP's memory planner: depth, counters or sketches, and width from public inputs.

:func:`plan` (``ContinualPrivHP.plan``) returns a :class:`ContinualPlan`: the chosen
parameters, the bytes they take, the reasons (:meth:`ContinualPlan.explain`) and warnings.
``ContinualPrivHP.for_memory`` builds the summary of a plan. Everything here is public
arithmetic on public parameters (domain, ε, byte budget, horizon, schedule and the expected
number of live records): the planner never sees data.

Why not one-pass PrivHP's planner. A continual release adds to each cell the noise of the
counter's blocks, ``blocks(e)·Var Lap_Z(h/σ_l)`` at epoch ``e``, and the sketch levels carry
a further factor ``j`` (a row lies in ``j`` buckets). With a budget split over ``r + 1``
levels (Holland, Camtepe, Thapa and Xue, *Private Synthetic Data Generation in Small Memory*,
Lemma 5) a level past the depth where a cell's count falls below its noise only takes budget
from the levels above it. One-pass PrivHP goes deep because its deep sketch levels get a small
share of ε; a continual release pays ``h`` and the blocks on every level, so the deep levels
cost more than they give.

The rule (four constants fitted by ``benchmarks/bench_continual_plan.py --fit`` on generated
Gaussian mixtures in the unit square, never on the streams of ``benchmarks/bench_streams.py``:
three families, *narrow* (6 components of standard deviation 0.001 to 0.004), *tight* (6 of
0.005 to 0.03) and *spread* (3 of 0.08 to 0.2), at n = 4 096, 16 384, 65 536 and 262 144 live
records, ε = 0.5, 1, 4, ``releases=8``; a rule is scored by its worst family's mean W1 over the
best setting's):

1. **Signal depth.** For a tree of depth ``r`` with exact counters on every level, level ``l``
   has ``2^l`` cells holding about ``n/2^l`` records each (``n = expected_n``, the expected
   number of *live* records at a release, net of deletions), and noise of standard deviation
   ``sqrt(B·Var Lap_Z(h/σ_l))``, ``B`` the counter's mean blocks per release over the epochs.
   ``signal(r)`` is the deepest level whose count is at least :data:`SIGNAL_RATIO` (1)
   standard deviation.
2. **Depth.** ``r* = max{r : r ≤ signal(r) + DEPTH_OFFSET}``: the deepest tree with at most
   :data:`DEPTH_OFFSET` (5) levels past its signal depth. Concentrated data have cells far
   above the typical count, so levels past it still resolve their mass: at equal n and ε the
   narrow family's best depth is up to 8 levels deeper than the spread one's. The fitted pair
   leaves the families 1.04× (tight), 1.12× (spread) and 1.09× (narrow) from their best
   depth on average; a ratio of 2 with 1 extra level, a shallow rule, leaves the narrow
   family 1.97× from its best.
3. **Full counters when they fit.** If the tree of depth ``r*`` with a counter on every cell
   (``k = 2^r*``, no sketch level) fits ``memory_bytes``, that is the plan: no hash
   collisions, no sketch factor ``j``. Otherwise the plan keeps ``r*`` with exact counters down
   to the deepest level whose tree takes at most :data:`COUNTER_SHARE` (3/4) of the budget
   (``k = 2^L``, at least 64: ``k`` is also the cells grown per sketch level) and Count-Min
   sketches (``j = 3`` rows, the widest width that fits) below; if that width would be below
   :data:`MIN_WIDTH` (32) the depth is lowered until it is not, or to the deepest full tree
   that fits, whichever is deeper. At 256 KB, over the fit's cases whose target tree does not
   fit, this layout is 1.07× (tight), 1.07× (spread) and 1.01× (narrow) from the best of
   seven layouts on average; the deepest full tree alone is 1.22× and 1.58× from it on the
   tight and narrow families (best on the spread one), and the same share with sketches no
   narrower than 128 (which caps the depth) 1.23× on the narrow family. Stopping one or two
   levels above the target when sketches are needed (a sketch level's noise is ``j`` times a
   counter level's) was tried and not taken: 1.08× and 1.18× on the narrow family
   (``--layouts-only``, ``benchmarks/results/continual_plan_layouts_drop.txt``).

The counter is the k-ary tree (``counter="kary"``, ContinualPrivHP's default) with its default
arity for the schedule.

>>> from sketchsyn import Box
>>> from sketchsyn.synth.continual.plan import plan
>>> p = plan(Box.unit(2), 1.0, 256 * 1024, 2**18, expected_n=16_384, releases=8)
>>> p.depth, p.k, p.sketch_levels, p.width, p.nbytes <= 256 * 1024
(13, 1024, 3, 120, True)
>>> plan(Box.unit(2), 0.5, 256 * 1024, 2**18, expected_n=4096, releases=8).sketch_levels
0
>>> print(p.explain().splitlines()[1])
  counter: k-ary tree of arity 17, h = 1 level(s), 4.5 blocks per release on average over the epochs
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...counters.karytree import balanced_digits
from ...errors import ParameterError, check_domain, check_epsilon, check_int
from ...privacy import accounting
from ...privacy.noise import discrete_laplace_variance
from ..privhp.planner import layout_kwargs
from .noise import _plan as _schedule_plan
from .noise import check_schedule, memory_bytes

__all__ = [
    "COUNTER_SHARE",
    "binary_levels",
    "ContinualPlan",
    "DEPTH_OFFSET",
    "MIN_WIDTH",
    "SIGNAL_RATIO",
    "mean_blocks",
    "plan",
    "signal_depth",
    "target_depth",
]


def binary_levels(horizon: int) -> int:
    """``h = floor(log2 T) + 1``: the p-sum levels of the binary mechanism over ``T`` steps.

    A row lies in at most ``h`` p-sums of its cell (its sensitivity factor).

    >>> binary_levels(1), binary_levels(16), binary_levels(2**24 - 1)
    (1, 5, 24)
    """
    return int(check_int(horizon, "horizon", "binary_levels", minimum=1)).bit_length()


#: Noise standard deviations a typical cell's count must reach to count as signal.
SIGNAL_RATIO = 1.0
#: Levels the tree goes past the signal depth (fitted with SIGNAL_RATIO on generated mixtures).
DEPTH_OFFSET = 5
#: Share of the budget the exact counter levels may take when sketches are needed.
COUNTER_SHARE = 0.75
#: Narrowest sketch the planner accepts before it lowers the depth.
MIN_WIDTH = 32
#: Fewest cells grown per sketch level (and so counter levels ``floor(log2 64) = 6``).
MIN_K = 64
SKETCH_DEPTH = 3
COUNTER = "kary"


def mean_blocks(
    horizon: int, releases: int | None = None, release_every: int | None = None
) -> float:
    """Mean over the epochs of the blocks a k-ary release sums (``B`` of the module rule).

    >>> mean_blocks(2**18, releases=8)
    4.5
    """
    epochs, arity, h = _schedule_plan(horizon, COUNTER, None, releases, release_every)
    es = np.unique(np.linspace(1, epochs, min(epochs, 4096)).astype(np.int64))
    return float(np.abs(balanced_digits(es, int(arity or 3), h)).sum(axis=0).mean())


def _sigmas(epsilon: float, depth: int, L: int, k: int, gammas: list[float]) -> np.ndarray:
    return accounting.privhp_allocation(
        epsilon, k, depth, gammas=gammas[: depth + 2], counter_depth=L
    )


def signal_depth(
    epsilon: float,
    n: int,
    depth: int,
    h: int,
    blocks: float,
    gammas: list[float],
    ratio: float = SIGNAL_RATIO,
) -> int:
    """Deepest level of a full counter tree of ``depth`` whose typical count ``n/2^l`` is at
    least ``SIGNAL_RATIO`` noise standard deviations (``blocks`` blocks of ``Lap_Z(h/σ_l)``).

    ``gammas`` are ``γ_{−1} … γ_depth`` of the domain; ``ratio`` defaults to
    :data:`SIGNAL_RATIO`.
    """
    sig = _sigmas(epsilon, depth, depth, 2**depth, gammas)
    deepest = 0
    for level in range(1, depth + 1):
        sd = math.sqrt(blocks * discrete_laplace_variance(h / float(sig[level])))
        if n / 2.0**level < ratio * sd:
            break
        deepest = level
    return deepest


def target_depth(
    epsilon: float,
    n: int,
    max_depth: int,
    h: int,
    blocks: float,
    gammas: list[float],
    ratio: float = SIGNAL_RATIO,
    offset: int = DEPTH_OFFSET,
) -> tuple[int, int]:
    """``(r*, signal(r*))``: the deepest ``r ≤ max_depth`` with ``r ≤ signal(r) + offset``
    (defaults :data:`SIGNAL_RATIO`, :data:`DEPTH_OFFSET`)."""
    best, best_sig = 1, signal_depth(epsilon, n, 1, h, blocks, gammas, ratio)
    for r in range(2, max_depth + 1):
        s = signal_depth(epsilon, n, r, h, blocks, gammas, ratio)
        if r <= s + offset:
            best, best_sig = r, s
        elif s + offset < r - 2:  # signal(r) only falls with r: nothing deeper fits
            break
    return best, best_sig


@dataclass(frozen=True)
class ContinualPlan:
    """ContinualPrivHP parameters for a byte budget, with the reasons (:func:`plan`).

    ``kwargs()`` are the constructor's keywords; ``explain()`` is a few lines naming every
    chosen value and why; ``warnings`` are sentences for the user.
    """

    d: int
    epsilon: float
    expected_n: int
    memory_bytes: int
    horizon: int
    releases: int | None
    release_every: int | None
    k: int
    width: int
    sketch_depth: int
    depth: int
    counter_levels: int
    arity: int | None
    blocks: float
    nbytes: int
    target_depth: int
    signal_depth: int
    full_depth: int
    rule: str
    warnings: tuple[str, ...] = field(default=())

    @property
    def L_k(self) -> int:  # noqa: N802 (the paper's name)
        """Deepest counter level ``min(floor(log2 k), depth)``."""
        return min(self.k.bit_length() - 1, self.depth)

    @property
    def sketch_levels(self) -> int:
        """Levels below the counters held in sketches."""
        return self.depth - self.L_k

    def kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``ContinualPrivHP(domain, epsilon, **plan.kwargs())``."""
        return layout_kwargs(self) | {
            "horizon": self.horizon,
            "counter": COUNTER,
            "releases": self.releases,
            "release_every": self.release_every,
        }

    def explain(self) -> str:
        """What was chosen and why, one item per line."""
        r, d = self.depth, self.d
        sched = (
            f"releases = {self.releases}"
            if self.releases is not None
            else (
                f"release_every = {self.release_every}"
                if self.release_every is not None
                else "an epoch per step"
            )
        )
        lines = [
            f"ContinualPrivHP plan for d = {d}, ε = {self.epsilon:g}, n ≈ {self.expected_n:,} "
            f"live records, {self.memory_bytes:,} bytes, horizon {self.horizon:,}, {sched}:",
            f"  counter: k-ary tree of arity {self.arity}, h = {self.counter_levels} level(s), "
            f"{self.blocks:g} blocks per release on average over the epochs",
            f"  depth = {r} ({r // d} bits per coordinate): target {self.target_depth} = the "
            f"deepest tree with at most {DEPTH_OFFSET} level(s) past its signal depth "
            f"{self.signal_depth} (count n/2^l ≥ {SIGNAL_RATIO:g} noise s.d.)"
            + ("" if r == self.target_depth else f", lowered to {r} ({self.rule})"),
        ]
        if self.sketch_levels == 0:
            lines.append(
                f"  k = {self.k} = 2^{r}: exact counters on every level 0-{r}, no sketch "
                f"(the full tree fits; width = {self.width} is unused)"
            )
        else:
            lines.append(
                f"  k = {self.k}: exact counters on levels 0-{self.L_k} (at most "
                f"{COUNTER_SHARE:g} of the budget), {self.sketch_levels} Count-Min level(s) of "
                f"width = {self.width}, sketch_depth = {self.sketch_depth} (the widest that "
                f"fits); the full tree fits only to depth {self.full_depth}"
            )
        lines.append(f"  state = {self.nbytes:,} bytes of {self.memory_bytes:,}")
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)


def _bytes(k: int, width: int, depth: int, horizon: int, releases: Any, every: Any) -> int:
    return memory_bytes(k, width, SKETCH_DEPTH, depth, horizon, COUNTER, None, releases, every)


def _full_bytes(depth: int, horizon: int, releases: Any, every: Any) -> int:
    return _bytes(2**depth, 1, depth, horizon, releases, every)


def _widest(k: int, depth: int, budget: int, horizon: int, releases: Any, every: Any) -> int:
    """Largest width with ``_bytes ≤ budget`` (0 if none)."""
    if _bytes(k, 1, depth, horizon, releases, every) > budget:
        return 0
    lo, hi = 1, 2
    while _bytes(k, hi, depth, horizon, releases, every) <= budget:
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        ok = _bytes(k, mid, depth, horizon, releases, every) <= budget
        lo, hi = (mid, hi) if ok else (lo, mid)
    return lo


def layout(
    r_star: int,
    full: int,
    budget: int,
    horizon: int,
    releases: int | None,
    release_every: int | None,
    share: float | None = COUNTER_SHARE,
    min_width: int = MIN_WIDTH,
) -> tuple[int, int, int, str]:
    """``(depth, k, width, rule)`` for a target depth ``r_star`` when the full tree fits to
    depth ``full``: rule 3 of the module (``share`` :data:`COUNTER_SHARE`, ``min_width``
    :data:`MIN_WIDTH`; ``share=None`` never uses sketches: the full tree of depth
    ``min(r_star, full)``)."""
    if r_star <= full or share is None:
        r = min(r_star, full)
        return r, 2**r, 1, "target depth" if r == r_star else "the deepest full tree that fits"
    T, rel, every = horizon, releases, release_every
    for r in range(r_star, full, -1):
        fits = [lv for lv in range(MIN_K.bit_length() - 1, r)
                if _full_bytes(lv, T, rel, every) <= share * budget]  # fmt: skip
        if not fits:
            continue
        w = _widest(2 ** max(fits), r, budget, T, rel, every)
        if w >= min_width:
            return r, 2 ** max(fits), w, f"the deepest with width ≥ {min_width}"
    rule = f"the full tree of depth {full}: no sketch of width ≥ {min_width} fits deeper"
    return full, 2**full, 1, rule


def plan(
    domain: Any,
    epsilon: float,
    memory_bytes: int,
    horizon: int,
    *,
    expected_n: int | None = None,
    releases: int | None = None,
    release_every: int | None = None,
) -> ContinualPlan:
    """The :class:`ContinualPlan` for ``domain``, ``epsilon``, a budget and a schedule.

    Parameters
    ----------
    domain : Box or BitDomain
        Public domain.
    epsilon : float
        Total ε of all releases.
    memory_bytes : int
        Byte budget of the summary (``nbytes`` of the result is at most this).
    horizon : int
        Public number of steps (events) the stream may last.
    expected_n : int, optional
        Public guess of the number of **live** records at a release (insertions minus
        deletions), not of events; default ``horizon`` (an insert-only stream).
    releases, release_every : int, optional
        The schedule, as in ``ContinualPrivHP`` (at most one).

    Raises :class:`~sketchsyn.errors.ParameterError` naming the argument when one is invalid
    or when no summary fits ``memory_bytes``.
    """
    owner = "ContinualPrivHP.plan"
    check_domain(domain, owner)
    eps = check_epsilon(epsilon, owner)
    budget = check_int(memory_bytes, "memory_bytes", owner, minimum=1)
    T = check_int(horizon, "horizon", owner, minimum=1, maximum=2**62)
    n = T if expected_n is None else check_int(expected_n, "expected_n", owner, minimum=1)
    check_schedule(COUNTER, None, releases, release_every, T)
    if release_every is not None:
        check_int(release_every, "release_every", owner, minimum=1)
    epochs, arity, h = _schedule_plan(T, COUNTER, None, releases, release_every)
    blocks = mean_blocks(T, releases, release_every)
    d, max_depth = int(domain.d), int(domain.max_depth)
    gammas = [float(domain.gamma(level)) for level in range(-1, max_depth + 1)]
    r_star, sig = target_depth(eps, n, max_depth, h, blocks, gammas)
    smallest = _full_bytes(1, T, releases, release_every)
    if budget < smallest:
        raise ParameterError(
            f"The 'memory_bytes' parameter of {owner} must allow a depth-1 summary "
            f"({smallest:,} bytes with this schedule). Got {budget!r} instead."
        )
    full = max(r for r in range(1, max_depth + 1) if _full_bytes(r, T, releases, release_every)
               <= budget or r == 1)  # fmt: skip
    depth, k, width, rule = layout(r_star, full, budget, T, releases, release_every)
    warnings: list[str] = []
    if sig < min(d, depth):
        warnings.append(
            f"ε·n ≈ {eps * n:,.0f} is too small: the noise exceeds a typical cell's count from "
            f"level {sig + 1} on, before every coordinate is halved once (d = {d}); the "
            "releases will be close to uniform. More records or a larger ε would help."
        )
    return ContinualPlan(
        d=d,
        epsilon=eps,
        expected_n=n,
        memory_bytes=budget,
        horizon=T,
        releases=releases,
        release_every=release_every,
        k=k,
        width=width,
        sketch_depth=SKETCH_DEPTH,
        depth=depth,
        counter_levels=h,
        arity=arity,
        blocks=blocks,
        nbytes=_bytes(k, width, depth, T, releases, release_every),
        target_depth=r_star,
        signal_depth=sig,
        full_depth=full,
        rule=rule,
        warnings=tuple(warnings),
    )
