"""PrivHP's sizing rules: the default layout, the state size, and parameters for a budget.

:class:`Sizing` is a mixin of :class:`~sketchsyn.synth.privhp.PrivHP`: its static and class
methods answer without building a summary (``PrivHP.memory_bytes``, ``PrivHP.for_memory``, the
automatic ``counter_depth`` and ``release_k``).

>>> from sketchsyn import PrivHP
>>> PrivHP.auto_counter_depth(k=8, width=64, sketch_depth=3, depth=12)
7
"""

from __future__ import annotations

from typing import Any

from ..errors import ParameterError, check_epsilon, check_int
from ..privacy import accounting
from ..privacy.rng import RNGLike

__all__ = ["Sizing"]

# Fixed per-object overhead counted in nbytes: the σ array and small scalars.
HEADER_BYTES = 64
# for_memory: most sketch levels below the counters (fitted in docs/utility.md).
_SKETCH_LEVELS = 2


class Sizing:
    """The layout rules of PrivHP, usable before a summary exists."""

    @staticmethod
    def auto_counter_depth(k: int, width: int, sketch_depth: int, depth: int) -> int:
        """The default ``counter_depth``: ``L_c = min(max(L_k, floor(log2(w·j))), r)``.

        A level of ``2^l ≤ w·j`` cells takes no more memory as exact counters than as a
        ``w × j`` sketch, and its counters have no collisions and noise ``1/σ_l`` instead of
        ``j/σ_l``; so every such level keeps counters.

        >>> from sketchsyn import PrivHP
        >>> PrivHP.auto_counter_depth(k=64, width=256, sketch_depth=3, depth=18)
        9
        """
        L_k = int(k).bit_length() - 1
        return int(min(max(L_k, (int(width) * int(sketch_depth)).bit_length() - 1), depth))

    @staticmethod
    def auto_release_k(k: int, width: int) -> int:
        """The default ``release_k``: ``max(k, w // 4)``.

        Growing more cells than ``k`` pays on skewed data once the sketches are wide enough to
        tell the children of many cells apart (n = 2^20, w = 1024, mf0.9: 1.51× → 1.02× PMM's
        W1 with 256 cells instead of 64); on spread-out data every extra cell adds a noisy split
        where an even one was right (uniform at w = 256: 0.78× → 1.14× PMM with 256 cells), so
        the rule stays at ``k`` for narrow sketches. Figures in docs/utility.md.

        >>> from sketchsyn import PrivHP
        >>> PrivHP.auto_release_k(64, 1024), PrivHP.auto_release_k(64, 256)
        (256, 64)
        """
        return int(max(int(k), int(width) // 4))

    @staticmethod
    def memory_bytes(
        k: int, width: int, sketch_depth: int, depth: int, counter_depth: int | None = None
    ) -> int:
        """The ``nbytes`` a PrivHP with these parameters has, without building it.

        ``counter_depth=None`` is the automatic rule (:meth:`auto_counter_depth`).

        >>> from sketchsyn import PrivHP
        >>> PrivHP.memory_bytes(k=64, width=1024, sketch_depth=3, depth=24, counter_depth=6)
        443648
        >>> PrivHP.memory_bytes(k=64, width=1024, sketch_depth=3, depth=24)
        352512
        """
        if counter_depth is None:
            counter_depth = Sizing.auto_counter_depth(k, width, sketch_depth, depth)
        L_c = min(int(counter_depth), depth)
        cells = width * sketch_depth * (depth - L_c) + 2 ** (L_c + 1) - 1
        return 8 * cells + 8 * (depth + 1) + HEADER_BYTES

    @classmethod
    def _memory_rule(
        cls, domain: Any, eps: float, budget: int, n: int, sketch_levels: int
    ) -> tuple[int, int, int, int]:
        """``(k, width, sketch_depth, depth)`` of :meth:`for_memory`'s rule."""
        k, j = 64, 3
        r_n = max(min(int(accounting.privhp_depth(eps, n, domain.d, k)), int(domain.max_depth)), 1)

        def widest(depth: int) -> int:
            # From w = ceil(2^r / j) on every level is a counter level (the full tree).
            w_full = -(-(2**depth) // j)
            lo, hi = 1, 2
            while hi <= w_full and cls.memory_bytes(k, hi, j, depth) <= budget:
                lo, hi = hi, 2 * hi
            while hi - lo > 1:  # largest w with memory_bytes(k, w, j, depth) <= budget
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if cls.memory_bytes(k, mid, j, depth) <= budget else (lo, mid)
            return min(lo, w_full)

        for depth in range(r_n, 0, -1):
            if cls.memory_bytes(k, 1, j, depth) > budget:
                continue
            w = widest(depth)
            if depth - cls.auto_counter_depth(k, w, j, depth) <= sketch_levels or depth == 1:
                return k, w, j, depth
        raise ParameterError(
            f"The 'memory_bytes' parameter of PrivHP.for_memory must allow a depth-1 summary "
            f"({cls.memory_bytes(k, 1, j, 1)} bytes). Got {budget!r} instead."
        )

    @classmethod
    def for_memory(
        cls,
        domain: Any,
        epsilon: float,
        memory_bytes: int,
        expected_n: int,
        *,
        sketch: str = "count-min",
        seed: int = 0,
        rng: RNGLike = None,
        neighbours: str = "add-remove",
    ) -> Any:
        """A PrivHP whose ``nbytes`` is at most ``memory_bytes``, its parameters chosen for it.

        The rule (fitted to ``benchmarks/utility.py``, d = 2, ε = 1, n = 2^18 and 2^20, budgets
        of 2% of PMM's bytes; figures in docs/utility.md):

        - ``k = 64``, ``sketch_depth j = 3``; the counters go down to the automatic
          ``L_c = max(L_k, floor(log2(w·j)))``, so ``k`` only bounds ``L_c`` from below;
        - for a depth ``r``, ``width w`` is the largest integer with
          ``memory_bytes(k, w, j, r) ≤ memory_bytes`` (the memory grows with ``w``), at most
          ``ceil(2^r / j)``, where every level is a counter level (the full tree);
        - ``depth r`` is the largest depth, at most the constructor's ``ceil(log2(ε·n))``
          (minus one for d = 1) and ``domain.max_depth``, that leaves at most **two** sketch
          levels below the counters (``r − L_c ≤ 2``). A shallower tree gives each level more
          budget and the counters more width; measured at n = 2^18 with 42 KB: 0, 1, 2, 3 and
          5 sketch levels gave 1.33×, 1.33×, 0.93×, 0.99×, 1.07× PMM's W1 on mf0.9;
        - ``release_k = max(k, w // 4)`` (:meth:`auto_release_k`).

        Raises :class:`ParameterError` when no depth ``≥ 1`` fits.

        >>> from sketchsyn import Box, PrivHP
        >>> php = PrivHP.for_memory(Box.unit(2), 1.0, 40_000, expected_n=2**18, rng=0)
        >>> php.nbytes <= 40_000, php.depth, php.width, php.counter_depth
        (True, 12, 488, 10)
        """
        eps = check_epsilon(epsilon, "PrivHP.for_memory")
        budget = check_int(memory_bytes, "memory_bytes", "PrivHP.for_memory", minimum=1)
        n = check_int(expected_n, "expected_n", "PrivHP.for_memory", minimum=1)
        k, width, j, depth = cls._memory_rule(domain, eps, budget, n, _SKETCH_LEVELS)
        return cls(
            domain,
            eps,
            k=k,
            width=width,
            sketch_depth=j,
            depth=depth,
            expected_n=n,
            sketch=sketch,
            seed=seed,
            rng=rng,
            neighbours=neighbours,
        )
