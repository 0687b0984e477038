"""PrivHP's memory planner: depth, width and layout from d, ε, n and a byte budget, and why.

:func:`plan` (``PrivHP.plan``) returns a :class:`Plan`, a frozen record of the chosen
parameters, the bytes they take, the bytes beyond which more memory would not help
(``useful_bytes``), warnings, and :meth:`Plan.explain`, a few lines saying what was chosen and
why. ``PrivHP.for_memory`` builds the summary of a plan. Everything here is public arithmetic on
public parameters: the planner never sees data.

The rule (its three constants fitted by ``benchmarks/bench_planner.py --fit`` on generated data,
never on data being released; figures in docs/parameters.md):

1. **Depth for resolution.** A PrivHP of depth ``r`` over ``d`` coordinates resolves
   ``floor(r/d)`` bits per coordinate. Unlike a full tree (PMM), whose noise grows with the
   ``2^r`` cells of its deepest level, PrivHP queries a bounded number of cells per sketch
   level and gives deep levels, whose cells are small, a small share of ε (Lemma 5 of Holland,
   Camtepe, Thapa and Xue, "Private Synthetic Data Generation in Small Memory"): a deeper tree
   costs memory but little accuracy. So the target depth (:func:`target_depth`) is
   ``r* = min(d·BITS_PER_COORDINATE, ceil(log2(ε·n)) + LEVELS_PER_EXTRA_DIMENSION·(d − 1))``
   (9 bits and 5 levels): PMM's noise-versus-resolution depth plus levels that grow with
   ``d``, up to 9 bits per coordinate. It grows with ``d``, ``ε`` and ``n``.
2. **Width from the bytes, cells grown from the width.** ``k = 64`` and ``sketch_depth = 3``;
   the width is the largest that fits ``memory_bytes`` at the depth, and the counters go down
   to the automatic ``counter_depth``. When that width would be below :data:`MIN_WIDTH` the
   depth is lowered until it is not (a narrow sketch mixes up the children of the cells it
   grows); below the smallest such summary the planner keeps at most two sketch levels under
   the counters (the rule before this planner, fitted for small 2-D budgets). From
   ``d = RELEASE_MIN_D`` (3) columns up the release grows
   ``release_k = max(k, floor(RELEASE_FACTOR·width))`` cells per sketch level
   (:func:`planned_release_k`, factor 1): on columns spread over their range a deep tree needs
   many cells per level (against PrivHP's default ``max(k, w // 4)``, W1 × 0.87–0.89 at
   d = 6 and 8 on the mixed family below), and growing as many cells as the sketch is wide
   stays within ±5% on concentrated ones. In two columns the sweeps show no difference
   beyond their noise (±3%) and the README's example (generated rides, two hot spots) is
   14% worse by the tree bound with the wider release, so there the plan keeps PrivHP's
   default, the smaller release (a quarter of the leaves to store and sample from).

   The three constants were fitted together on two generated families, swept over
   d = 2, 3, 4, 6, 8, ε = 0.1, 1, 10 and depths 12 ... 63 with release factors 1/4, 1 and 4:
   *tight* (concentrated columns, which want deep trees) and *mixed* (every other column
   spread over its range, which wants shallow ones). A rule is scored by its worse family's
   mean W1 over the best setting's; the shallowest rule within 2% of the least score is taken.
   The families pull apart as ``d`` grows (at d = 8 the tight one is best at depth 60 to 63,
   the mixed one at 15 to 24), so there the rule is a compromise that leaves each family 1.11
   to 1.33× from its own best, and no rule of depth alone does much better on them (the depth
   whose worse family is least leaves it 1.22 to 1.28×).
3. **Useful bytes.** Once a sketch's collision excess ``n/w`` is below a quarter of its noise
   scale ``j·(r+1)/ε`` more width does not help: ``useful_bytes`` is the size at that width
   (or the full tree at the depth, if smaller). A larger budget is stated, and not spent.
4. **Release.** ``release()`` prunes below the noise by default (``prune = 0.2``,
   :mod:`sketchsyn.synth.privhp.release`): after each consistent split a child below a threshold
   (in noise standard deviations, from a false-discovery test on the released values) gives its
   count to its sibling. It reads only the noisy state, so it is post-processing and costs no
   budget. On the flights sets it lowers W1 most where the noise is largest (ε = 0.1, and from 3
   columns up; docs/parameters.md), but it does not move the best depth: on the mixed family at
   d = 8 the best is the same with and without it. What a deep plan loses on spread columns is
   in the levels it shares with a shallow one (narrower sketches, a thinner budget per level),
   which no post-processing recovers, so the depth rule is not refitted.
5. **Warnings.** When ``ε·n`` is too small for the noise to leave any signal below the first
   ``d`` levels (one halving per coordinate) the release will be close to uniform, and the
   plan says so.

>>> from sketchsyn import Box, PrivHP
>>> p = PrivHP.plan(Box.unit(3), 1.0, 256 * 1024, expected_n=327_346)
>>> p.depth, p.width, p.nbytes <= 256 * 1024
(27, 601, True)
>>> print(p.explain().splitlines()[0])
PrivHP plan for d = 3, ε = 1, n ≈ 327,346, 262,144 bytes:
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ...errors import ParameterError, check_domain, check_epsilon, check_int
from ...privacy import accounting
from .release import PRUNE

__all__ = [
    "BITS_PER_COORDINATE",
    "LEVELS_PER_EXTRA_DIMENSION",
    "MIN_WIDTH",
    "Plan",
    "RELEASE_FACTOR",
    "RELEASE_MIN_D",
    "layout_kwargs",
    "plan",
    "target_depth",
]

#: Most bits per coordinate the target depth asks for (``r* ≤ d·BITS_PER_COORDINATE``).
BITS_PER_COORDINATE = 9
#: Levels added to ``ceil(log2(ε·n))`` for each coordinate beyond the first.
LEVELS_PER_EXTRA_DIMENSION = 5
#: Narrowest sketch the planner accepts before it lowers the depth.
MIN_WIDTH = 128
#: Cells grown per sketch level at release, per unit of sketch width
#: (``release_k = max(k, floor(RELEASE_FACTOR·width))``).
RELEASE_FACTOR = 1.0
#: Fewest columns at which the plan grows ``RELEASE_FACTOR·width`` cells (below: ``w // 4``).
RELEASE_MIN_D = 3
K = 64
SKETCH_DEPTH = 3
SMALL_BUDGET_SKETCH_LEVELS = 2
HEADER_BYTES = 64  # as in sizing.HEADER_BYTES (the σ array and small scalars)


def memory_bytes(k: int, width: int, sketch_depth: int, depth: int, counter_depth: int) -> int:
    """The ``nbytes`` of a PrivHP with these parameters (``Sizing.memory_bytes``)."""
    L_c = min(int(counter_depth), depth)
    cells = width * sketch_depth * (depth - L_c) + 2 ** (L_c + 1) - 1
    return 8 * cells + 8 * (depth + 1) + HEADER_BYTES


def auto_counter_depth(k: int, width: int, sketch_depth: int, depth: int) -> int:
    """``min(max(L_k, floor(log2(w·j))), r)`` (``Sizing.auto_counter_depth``)."""
    L_k = int(k).bit_length() - 1
    return int(min(max(L_k, (int(width) * int(sketch_depth)).bit_length() - 1), depth))


def _bytes(width: int, depth: int) -> int:
    return memory_bytes(
        K, width, SKETCH_DEPTH, depth, auto_counter_depth(K, width, SKETCH_DEPTH, depth)
    )


def _widest(depth: int, budget: int) -> int:
    """The largest width with ``_bytes(width, depth) ≤ budget`` (at most the full tree's)."""
    w_full = -(-(2**depth) // SKETCH_DEPTH)  # from here on every level is a counter level
    lo, hi = 1, 2
    while hi <= w_full and _bytes(hi, depth) <= budget:
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if _bytes(mid, depth) <= budget else (lo, mid)
    return min(lo, w_full)


def target_depth(d: int, epsilon: float, n: int, max_depth: int) -> int:
    """The depth the error model asks for before memory, within ``[1, max_depth]``.

    ``min(d·BITS_PER_COORDINATE, ceil(log2(ε·n)) + LEVELS_PER_EXTRA_DIMENSION·(d − 1))`` for
    ``d ≥ 2``; ``ceil(log2(ε·n)) − 1`` for ``d = 1`` (PMM's depth, not refitted).

    >>> target_depth(3, 1.0, 327_346, 64), target_depth(3, 0.01, 327_346, 64)
    (27, 22)
    """
    base = math.ceil(math.log2(max(epsilon * n, 2.0)))
    if d == 1:
        r = base - 1
    else:
        r = min(d * BITS_PER_COORDINATE, base + LEVELS_PER_EXTRA_DIMENSION * (d - 1))
    return int(max(1, min(r, max_depth)))


def planned_release_k(width: int, d: int = RELEASE_MIN_D) -> int:
    """The cells the release grows per sketch level: ``max(k, floor(RELEASE_FACTOR·width))``
    from ``d = RELEASE_MIN_D`` columns up, PrivHP's default ``max(k, width // 4)`` below.

    >>> planned_release_k(1364, d=3), planned_release_k(1364, d=2)
    (1364, 341)
    """
    if int(d) < RELEASE_MIN_D:
        return int(max(K, int(width) // 4))
    return int(max(K, math.floor(RELEASE_FACTOR * int(width))))


def useful_width(epsilon: float, n: int, depth: int) -> int:
    """The width past which Count-Min collisions ``n/w`` fall below a quarter of the noise.

    The plan never caps the width below :data:`MIN_WIDTH` on this account.
    """
    return max(1, math.ceil(4.0 * epsilon * n / (SKETCH_DEPTH * (depth + 1))))


def layout_kwargs(plan: Any) -> dict[str, Any]:
    """A plan's sketch layout as constructor keywords (``k``, ``width``, ``sketch_depth``,
    ``depth``): what a PrivHP plan and a ContinualPrivHP plan both choose."""
    return {
        "k": plan.k,
        "width": plan.width,
        "sketch_depth": plan.sketch_depth,
        "depth": plan.depth,
    }


@dataclass(frozen=True)
class Plan:
    """PrivHP parameters for a byte budget, with the reasons (:func:`plan`, ``PrivHP.plan``).

    ``kwargs()`` are the constructor's keywords; ``explain()`` is a few lines of text naming
    every chosen value and why; ``warnings`` are sentences for the user (a budget above
    ``useful_bytes``, an ``ε·n`` too small for a useful release).
    """

    d: int
    epsilon: float
    expected_n: int
    memory_bytes: int
    k: int
    width: int
    sketch_depth: int
    depth: int
    counter_depth: int
    release_k: int
    nbytes: int
    useful_bytes: int
    target_depth: int
    signal_depth: int
    rule: str
    warnings: tuple[str, ...] = field(default=())

    def kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``PrivHP(domain, epsilon, **plan.kwargs())``."""
        return layout_kwargs(self) | {
            "counter_depth": self.counter_depth,
            "release_k": self.release_k,
            "expected_n": self.expected_n,
        }

    def explain(self) -> str:
        """What was chosen and why, one item per line."""
        d, r = self.d, self.depth
        bits = r // d
        lines = [
            f"PrivHP plan for d = {d}, ε = {self.epsilon:g}, n ≈ {self.expected_n:,}, "
            f"{self.memory_bytes:,} bytes:",
            f"  depth = {r}: {bits} bits per coordinate (cells 2^-{bits} of each side); "
            f"target {self.target_depth} = {_target_text(self)}"
            + ("" if r == self.target_depth else f", lowered to {r} ({self.rule})"),
            f"  width = {self.width}, sketch_depth = {self.sketch_depth}: the widest sketches "
            f"that fit; counter_depth = {self.counter_depth} (exact counters on levels 0-"
            f"{self.counter_depth}), {r - self.counter_depth} sketch levels",
            f"  k = {self.k}, release_k = {self.release_k} cells grown per sketch level "
            + (
                f"(max(k, floor({RELEASE_FACTOR:g}·width)))"
                if d >= RELEASE_MIN_D
                else f"(max(k, width // 4): d < {RELEASE_MIN_D})"
            ),
            f"  release: prune = {PRUNE:g} (PrivHP.release's default): children below the noise "
            "give their count to their sibling (post-processing)",
            f"  state = {self.nbytes:,} bytes; useful up to about {self.useful_bytes:,} bytes",
            f"  signal: noise below the count of a typical grown cell down to level "
            f"{self.signal_depth} of {r}",
        ]
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)


def _target_text(p: Plan) -> str:
    base = math.ceil(math.log2(max(p.epsilon * p.expected_n, 2.0)))
    if p.d == 1:
        return f"ceil(log2(ε·n)) − 1 = {base} − 1 (d = 1)"
    return (
        f"min({p.d}·{BITS_PER_COORDINATE} bits, ceil(log2(ε·n)) + "
        f"{LEVELS_PER_EXTRA_DIMENSION}·(d − 1) = {base} + "
        f"{LEVELS_PER_EXTRA_DIMENSION * (p.d - 1)})"
    )


def _signal_depth(
    epsilon: float, n: int, depth: int, counter_depth: int, release_k: int, gammas: Any
) -> int:
    """Deepest level whose noise is below the count of a typical cell of the release.

    A level-``l`` counter cell holds about ``n/2^l`` records on spread data and a grown sketch
    cell about ``n/(2·release_k)``; the noise scale is ``1/σ_l`` (``3/σ_l`` on sketch levels)
    with the budget split of the summary (:func:`~sketchsyn.privacy.accounting.privhp_allocation`).
    """
    sig = accounting.privhp_allocation(
        epsilon, release_k, depth, gammas=gammas, counter_depth=counter_depth
    )
    deepest = 0
    for level in range(1, depth + 1):
        if level <= counter_depth:
            count, scale = n / 2.0**level, 1.0 / sig[level]
        else:
            count, scale = n / (2.0 * release_k), SKETCH_DEPTH / sig[level]
        if count < 2.0 * scale:
            break
        deepest = level
    return deepest


def plan(domain: Any, epsilon: float, memory_bytes: int, expected_n: int) -> Plan:
    """The :class:`Plan` for ``domain``, ``epsilon``, a budget and an expected stream length.

    Raises :class:`~sketchsyn.errors.ParameterError` naming the argument when one is invalid
    or when no summary of depth ≥ 1 fits ``memory_bytes``.
    """
    owner = "PrivHP.plan"
    check_domain(domain, owner)
    eps = check_epsilon(epsilon, owner)
    budget = check_int(memory_bytes, "memory_bytes", owner, minimum=1)
    n = check_int(expected_n, "expected_n", owner, minimum=1)
    d, max_depth = int(domain.d), int(domain.max_depth)
    r_star = target_depth(d, eps, n, max_depth)
    smallest = _bytes(1, 1)
    if budget < smallest:
        raise ParameterError(
            f"The 'memory_bytes' parameter of {owner} must allow a depth-1 summary "
            f"({smallest} bytes). Got {budget!r} instead."
        )
    depth = width = 0
    rule = "target depth"
    for r in range(r_star, 0, -1):
        w = _widest(r, budget)
        full = auto_counter_depth(K, w, SKETCH_DEPTH, r) == r
        if _bytes(w, r) <= budget and (w >= MIN_WIDTH or full):
            depth, width = r, w
            if r < r_star:
                rule = f"the deepest with width ≥ {MIN_WIDTH}"
            break
    if depth == 0:  # a small budget: at most two sketch levels below the counters
        rule = "small budget: at most two sketch levels below the counters"
        for r in range(r_star, 0, -1):
            if _bytes(1, r) > budget:
                continue
            w = _widest(r, budget)
            L_c = auto_counter_depth(K, w, SKETCH_DEPTH, r)
            if r - L_c <= SMALL_BUDGET_SKETCH_LEVELS or r == 1:
                depth, width = r, w
                break
    # The useful width at this depth, and the bytes it takes (at most the full tree's).
    w_full = -(-(2**depth) // SKETCH_DEPTH)
    w_use = min(max(useful_width(eps, n, depth), MIN_WIDTH), w_full)
    useful = _bytes(w_use, depth)
    warnings: list[str] = []
    if budget > useful and width > w_use:
        width = w_use
        warnings.append(
            f"memory_bytes = {budget:,} is more than helps: beyond about {useful:,} bytes the "
            f"sketches' collisions are below a quarter of their noise at ε = {eps:g}, "
            f"n ≈ {n:,}; the plan uses {useful:,} bytes"
        )
    counter_depth = auto_counter_depth(K, width, SKETCH_DEPTH, depth)
    release_k = planned_release_k(width, d)
    gammas = [float(domain.gamma(level)) for level in range(-1, depth + 1)]
    signal = _signal_depth(eps, n, depth, counter_depth, release_k, gammas)
    if signal < min(d, depth):
        warnings.append(
            f"ε·n ≈ {eps * n:,.0f} is too small: the noise exceeds a typical cell's count from "
            f"level {signal + 1} on, before every coordinate is halved once (d = {d}); the "
            "release will be close to uniform. More records or a larger ε would help."
        )
    return Plan(
        d=d,
        epsilon=eps,
        expected_n=n,
        memory_bytes=budget,
        k=K,
        width=width,
        sketch_depth=SKETCH_DEPTH,
        depth=depth,
        counter_depth=counter_depth,
        release_k=release_k,
        nbytes=_bytes(width, depth),
        useful_bytes=useful,
        target_depth=r_star,
        signal_depth=signal,
        rule=rule,
        warnings=tuple(warnings),
    )
