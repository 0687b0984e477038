"""PrivHP, the one-pass private synthesizer in small memory (Holland, Camtepe, Thapa and Xue,
*Private Synthetic Data Generation in Small Memory*).

* ``summary``: the :class:`PrivHP` summary: exact counters on the top levels, a private sketch per
  deeper level, insertions and deletions;
* ``bank``: every level sketch's table in one array, counted in one pass;
* ``sizing``: the default layout and state size; parameters for a byte budget;
* ``planner``: the memory planner behind :meth:`PrivHP.plan` and :meth:`PrivHP.for_memory`;
* ``release``: the release: consistent counter levels, the tree grown through the sketches, pruning
  below the noise.

>>> from sketchsyn.synth.privhp import PrivHP
>>> PrivHP.__module__
'sketchsyn.synth.privhp.summary'
"""

from __future__ import annotations

from .planner import Plan
from .sizing import Sizing
from .summary import PrivHP

__all__ = ["Plan", "PrivHP", "Sizing"]
