"""Continual synthetic panels from longitudinal data (Bun, Gaboardi, Neunhoeffer and Zhang,
*Continual Release of Differentially Private Synthetic Data from Longitudinal Data
Collections*): ρ-zCDP, released every period.

* ``fixed_window``: :class:`FixedWindowSynthesizer`: queries over a fixed window of periods;
* ``cumulative``: :class:`CumulativeSynthesizer`: cumulative queries over the counters of
  ``sketchsyn.counters``;
* ``assign``: exact-count uniform assignment of values to people in groups, O(n).

>>> from sketchsyn.synth.longitudinal import CumulativeSynthesizer, FixedWindowSynthesizer
>>> FixedWindowSynthesizer.STATE_PRIVACY, CumulativeSynthesizer.STATE_PRIVACY
('trusted', 'trusted')
"""

from __future__ import annotations

from .assign import assign_within_groups, choose_in_groups
from .cumulative import CumulativeSynthesizer, available_counters, counter_budgets, monotonize
from .fixed_window import FixedWindowSynthesizer, as_column

__all__ = [
    "CumulativeSynthesizer",
    "FixedWindowSynthesizer",
    "as_column",
    "assign_within_groups",
    "available_counters",
    "choose_in_groups",
    "counter_budgets",
    "monotonize",
]
