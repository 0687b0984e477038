"""PrivHP's sizing rules: the default layout, the state size, and parameters for a budget.

:class:`Sizing` is a mixin of :class:`~sketchsyn.synth.privhp.PrivHP`: its static and class
methods answer without building a summary (``PrivHP.memory_bytes``, ``PrivHP.plan`` and
``PrivHP.for_memory``, the automatic ``counter_depth`` and ``release_k``).

>>> from sketchsyn import PrivHP
>>> PrivHP.auto_counter_depth(k=8, width=64, sketch_depth=3, depth=12)
7
"""

from __future__ import annotations

import warnings
from typing import Any

from ...errors import ParameterError, UtilityWarning, check_epsilon, check_int
from ...privacy.rng import RNGLike
from ...units import sizing
from . import planner
from .planner import Plan

__all__ = ["Sizing"]

# Fixed per-object overhead counted in nbytes: the σ array and small scalars.
HEADER_BYTES = planner.HEADER_BYTES


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
    def plan(cls, domain: Any, epsilon: float, memory_bytes: int, expected_n: int) -> Plan:
        """The parameters :meth:`for_memory` would choose, and why (a :class:`Plan`).

        Depth, width, counter depth and ``release_k`` from ``domain.d``, ``epsilon``,
        ``expected_n`` and ``memory_bytes`` (the rule is in :mod:`sketchsyn.synth.privhp.planner`).
        ``plan.explain()`` names every value and the reason; ``plan.useful_bytes`` is the size
        past which more memory would not help; ``plan.warnings`` are sentences for the user.

        >>> from sketchsyn import Box, PrivHP
        >>> p = PrivHP.plan(Box.unit(2), 1.0, 40_000, expected_n=2**18)
        >>> p.depth, p.width, p.nbytes <= 40_000, p.warnings
        (18, 148, True, ())
        """
        return planner.plan(domain, epsilon, memory_bytes, expected_n)

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
        unit: str | None = None,
        max_rows: int | None = None,
        expected_units: int | None = None,
    ) -> Any:
        """A PrivHP whose ``nbytes`` is at most ``memory_bytes``, built from :meth:`plan`.

        The parameters come from ``PrivHP.plan(domain, epsilon, memory_bytes, expected_n)``,
        which uses all of ``d``, ``ε``, ``n`` and the bytes (the rule and its measurements are
        in :mod:`sketchsyn.synth.privhp.planner` and docs/parameters.md); call :meth:`plan` to see
        them and why (``plan.explain()``). A budget above ``plan.useful_bytes`` is not spent.

        With a privacy unit (``unit``, ``max_rows`` and the public ``expected_units``) the
        contribution bounder takes at most half of ``memory_bytes`` (sized for
        ``expected_units``, units pre-sampled when they do not fit; without it, all of that
        half and no sampling: :func:`sketchsyn.units.sizing.plan`) and the tree is planned in
        the rest, for the noise of ``2·max_rows`` rows (``epsilon / (2·max_rows)``).

        Raises :class:`ParameterError` naming the argument when one is invalid or when no
        summary of depth ``≥ 1`` fits. Warns (:class:`~sketchsyn.errors.UtilityWarning`) when
        the plan says the release will be close to uniform (ε·n too small: ``plan.warnings``).

        >>> from sketchsyn import Box, PrivHP
        >>> php = PrivHP.for_memory(Box.unit(2), 1.0, 40_000, expected_n=2**18, rng=0)
        >>> php.nbytes <= 40_000, php.depth, php.width, php.counter_depth
        (True, 18, 148, 8)
        >>> php = PrivHP.for_memory(Box.unit(2), 1.0, 400_000, expected_n=2**20, unit="device",
        ...                         max_rows=8, expected_units=20_000, rng=0)
        >>> php.nbytes <= 400_000, php.bounder.capacity >= 20_000, php.sensitivity
        (True, True, 16)
        >>> php.privacy_unit
        "user-level: all rows of one unit, at most 8 kept (unit 'device')"
        """
        planned = epsilon
        tree_bytes = memory_bytes
        bounder_bytes = None
        if unit is not None:
            if max_rows is None:
                raise ParameterError(
                    "PrivHP.for_memory with unit=... needs 'max_rows' (the public cap L)."
                )
            L = check_int(max_rows, "max_rows", "PrivHP", minimum=1, maximum=sizing.MAX_ROWS)
            memory = check_int(memory_bytes, "memory_bytes", "PrivHP", minimum=1)
            bounder_bytes = memory // 2
            buckets, _ = sizing.plan(L, expected_units, bounder_bytes, owner="PrivHP")
            tree_bytes = memory - sizing.table_bytes(buckets, sizing.SLOTS, L)
            factor = 2 * L * (2 if neighbours == "replace" else 1)
            planned = check_epsilon(epsilon, "PrivHP") / factor
        p = cls.plan(domain, planned, tree_bytes, expected_n)
        for text in p.warnings:
            if "close to uniform" in text:
                warnings.warn(f"PrivHP.for_memory: {text}", UtilityWarning, stacklevel=2)
        more: dict[str, Any] = {}
        if unit is not None:
            more = {
                "unit": unit,
                "max_rows": max_rows,
                "expected_units": expected_units,
                "bounder_bytes": bounder_bytes,
            }
        return cls(
            domain,
            epsilon,
            sketch=sketch,
            seed=seed,
            rng=rng,
            neighbours=neighbours,
            **p.kwargs(),
            **more,
        )
