"""Tables of 3 to 64 columns from every 1- and 2-way marginal, in one pass and fixed memory.

* ``synthesizer``: :class:`MarginalSynthesizer`: exact counts of every pair and single column, one
  PMM tree each at release;
* ``model``: :class:`MarginalDistribution`: marginals made to agree, a maximum spanning tree on the
  noisy mutual information, sampling along it.

>>> from sketchsyn.synth.marginal import MarginalDistribution, MarginalSynthesizer
>>> MarginalSynthesizer.STATE_PRIVACY, MarginalDistribution.STATE_PRIVACY
('trusted', 'private')
"""

from __future__ import annotations

from .model import MarginalDistribution
from .synthesizer import DEFAULT_MEMORY, MarginalSynthesizer, plan

__all__ = ["DEFAULT_MEMORY", "MarginalDistribution", "MarginalSynthesizer", "plan"]
