"""``sketchsyn.spark``: the user's path to the Spark face of the distributed path.

The code lives in :mod:`sketchsyn.distributed.spark`. Importing ``sketchsyn.spark`` (or
``from sketchsyn import spark``) gives that very module, the same object, so its functions and any
setting a test or user patches are one; the names below are for readers and static tools.
"""

from __future__ import annotations

import sys

from .distributed import spark as _module
from .distributed.spark import *  # noqa: F403 (the names, for readers and static tools)

sys.modules[__name__] = _module
