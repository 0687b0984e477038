"""Privacy units: protect people, not rows.

A stream's rows belong to units (a user, a device, a client address). The
:class:`ContributionBounder` keeps at most ``L`` rows of each unit in one pass and fixed
memory, so that a summary behind it, its noise sized for ``2L`` rows, is ε-DP with one unit
(all its rows) as the neighbouring relation. :mod:`~sketchsyn.units.ids` turns unit ids
(integers, text) into keys without a Python loop per row; :mod:`~sketchsyn.units.sizing` sizes
the table for a public number of units; :mod:`~sketchsyn.units.level` is the part of a summary
that takes a unit (``unit=``, ``max_rows=``).
"""

from .bounder import ContributionBounder
from .ids import unit_keys

__all__ = ["ContributionBounder", "unit_keys"]
