"""Low-dimensional synthetic data (He's dissertation, chapter 4): private PCA, then PMM or PSMM in
the projected box.

* ``synthesizer``: :class:`LowDimSynthesizer`: exact sums until the subspace is fixed, then the
  projected points;
* ``private_pca``: private centred covariance and mean on a public integer grid;
* ``release``: :class:`LowDimDistribution`, the release.

>>> from sketchsyn.synth.lowdim import LowDimDistribution, LowDimSynthesizer
>>> LowDimSynthesizer.STATE_PRIVACY, LowDimDistribution.STATE_PRIVACY
('trusted', 'private')
"""

from __future__ import annotations

from .release import LowDimDistribution
from .synthesizer import LowDimSynthesizer

__all__ = ["LowDimDistribution", "LowDimSynthesizer"]
