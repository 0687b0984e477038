"""The offline mechanisms of He's dissertation (*Differentially Private Synthetic Data*): PMM and
PSMM over exact counts of one Morton level, noised once at ``release()``.

* ``histogram``: :class:`LevelCounts`: exact counts of one Morton level (also the grid baselines'
  and the marginal synthesizer's state);
* ``pmm``: :class:`PMM`: the full-tree Private Measure Mechanism;
* ``psmm``: :class:`PSMM`: the Private Signed Measure Mechanism (a d_BL linear programme).

>>> from sketchsyn.synth.offline import PMM, PSMM
>>> PMM.STATE_PRIVACY, PSMM.STATE_PRIVACY
('trusted', 'trusted')
"""

from __future__ import annotations

from .histogram import LevelCounts
from .pmm import PMM
from .psmm import MAX_CELLS, PSMM, closest_probability_measure

__all__ = ["MAX_CELLS", "PMM", "PSMM", "LevelCounts", "closest_probability_measure"]
