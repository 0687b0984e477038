"""``sketchsyn.dask``: the user's path to the Dask face of the distributed path.

The code lives in :mod:`sketchsyn.distributed.dask`. Importing ``sketchsyn.dask`` (or
``from sketchsyn import dask``) gives that very module, the same object, so its functions and any
setting a test or user patches are one; the names below are for readers and static tools.
"""

from __future__ import annotations

import sys

from .distributed import dask as _module
from .distributed.dask import *  # noqa: F403 (the names, for readers and static tools)

sys.modules[__name__] = _module
