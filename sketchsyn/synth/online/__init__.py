"""Online synthetic data at every step of an endless stream (He, Vershynin and Zhu, *Online
Differentially Private Synthetic Data Generation*).

* ``synthesizer``: :class:`OnlineSynthesizer`: dynamic partition, a bank of inhomogeneous sparse
  counters per level;
* ``budget``: the per-cell budgets that spend a record path's whole ε/2, with the proof;
* ``release``: the release: levels scaled to the whole stream, least squares, adaptive depth.

>>> from sketchsyn.synth.online import OnlineSynthesizer, level_start
>>> OnlineSynthesizer.STATE_PRIVACY
'trusted'
"""

from __future__ import annotations

from .synthesizer import OnlineSynthesizer, depth_at, level_start

__all__ = ["OnlineSynthesizer", "depth_at", "level_start"]
