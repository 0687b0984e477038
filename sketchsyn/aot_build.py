"""The process that compiles kernel sets ahead of time (:mod:`sketchsyn.aot`).

``python -m sketchsyn.aot_build MODULE PATH`` imports ``MODULE`` (which registers its kernels
with :mod:`sketchsyn.accel`) and writes its compiled module to ``PATH``
(:func:`sketchsyn.aot.build`); :func:`sketchsyn.aot.load` starts it, so that the process that
loads the kernels never imports numba. ``python -m sketchsyn.aot_build`` alone builds every set
that can be compiled ahead of time into the cache, as the first large job would (for a
container image or a shared install, at install time), and prints where they are.

>>> main(["sketchsyn.privacy.kernels"])
Traceback (most recent call last):
...
SystemExit: usage: python -m sketchsyn.aot_build [MODULE PATH]
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from . import accel, aot

#: The modules whose kernel sets can be compiled ahead of time.
MODULES = ("sketchsyn.synth.privhp.kernels", "sketchsyn.privacy.kernels")


def main(argv: Sequence[str]) -> None:
    """Build the kernels of ``argv[0]`` into ``argv[1]``, or, without arguments, every set of
    :data:`MODULES` into the cache (where missing)."""
    if len(argv) == 2:
        aot.build(accel.set_of(importlib.import_module(argv[0])), argv[1])
        return
    if argv:
        raise SystemExit("usage: python -m sketchsyn.aot_build [MODULE PATH]")
    for name in MODULES:
        module = importlib.import_module(name)
        forms = aot.load(module)
        print(f"{name}: {len(forms)} kernels in {aot._paths(module)[0]}")


if __name__ == "__main__":
    main(sys.argv[1:])
