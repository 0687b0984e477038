"""Tables of 2 to 64 columns from every 1- and 2-way marginal, in one pass and fixed memory.

* ``synthesizer``: :class:`MarginalSynthesizer`: exact counts of every pair and single column,
  noised once at the release, on a Box or a table Schema;
* ``model``: :class:`MarginalDistribution`: the release, its bytes, sampling and range counts;
* ``fit``: marginals made to agree, a maximum spanning tree on the noisy mutual information,
  the conditionals sampled along it;
* ``refine``: the sampled rows moved toward every released pair table;
* ``layout``: each column's bins and where every table lives in the state;
* ``noise``: how each table is noised, and the released counts;
* ``planner``: :func:`plan`, the bins within a memory bound;
* ``checks``: counts, parameters and the budget split a caller or a blob may give.

>>> from sketchsyn.synth.marginal import MarginalDistribution, MarginalSynthesizer
>>> MarginalSynthesizer.STATE_PRIVACY, MarginalDistribution.STATE_PRIVACY
('trusted', 'private')
"""

from __future__ import annotations

from .model import MarginalDistribution
from .synthesizer import DEFAULT_MEMORY, MarginalSynthesizer, plan

__all__ = ["DEFAULT_MEMORY", "MarginalDistribution", "MarginalSynthesizer", "plan"]
