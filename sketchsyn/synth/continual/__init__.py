"""Synthetic data released at every step (or every epoch of an announced schedule) of a stream
with a public horizon, in fixed memory: continual PrivHP and StreamingPrivTree.

* ``summary``: :class:`ContinualPrivHP`: a continual counter per counter and sketch cell of
  PrivHP's layout;
* ``noise``: its lazy noise tables (binary, k-ary, Honaker), the announced schedule, the memory
  formula;
* ``hybrid``: its hybrid counter (Chan, Shi and Song);
* ``plan``: its memory planner (``ContinualPrivHP.plan``, ``for_memory``);
* ``state``: its saved state: fields and arrays checked before building, merge checks;
* ``release``: its release (post-processing, PrivHP's pruning code);
* ``streaming_privtree``: :class:`StreamingPrivTree`: PHDStream's adaptive partition on an
  announced schedule.

>>> from sketchsyn.synth.continual import ContinualPrivHP, StreamingPrivTree
>>> ContinualPrivHP.STATE_PRIVACY, StreamingPrivTree.STATE_PRIVACY
('trusted', 'trusted')
"""

from __future__ import annotations

from .noise import best_arity
from .plan import binary_levels
from .streaming_privtree import StreamingPrivTree
from .summary import ContinualPrivHP

__all__ = ["ContinualPrivHP", "StreamingPrivTree", "best_arity", "binary_levels"]
