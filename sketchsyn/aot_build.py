"""The process that compiles a kernel set ahead of time: ``python -m sketchsyn.aot_build
MODULE PATH`` imports ``MODULE`` (which registers its kernels with :mod:`sketchsyn.accel`) and
writes its compiled module to ``PATH`` (:func:`sketchsyn.aot.build`). :func:`sketchsyn.aot.load`
starts it, so that the process that loads the kernels never imports numba.

>>> main(["sketchsyn.privacy.kernels"])
Traceback (most recent call last):
...
SystemExit: usage: python -m sketchsyn.aot_build MODULE PATH
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from . import accel, aot


def main(argv: Sequence[str]) -> None:
    """Build the kernels of ``argv[0]`` into ``argv[1]``."""
    if len(argv) != 2:
        raise SystemExit("usage: python -m sketchsyn.aot_build MODULE PATH")
    aot.build(accel.set_of(importlib.import_module(argv[0])), argv[1])


if __name__ == "__main__":
    main(sys.argv[1:])
