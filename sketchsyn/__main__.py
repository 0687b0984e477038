"""``python -m sketchsyn …`` and the installed ``sketchsyn`` command: :func:`command`."""

import os
import sys


def command() -> int:
    """Run the ``sketchsyn`` command line in this process (its own process: the console
    script and ``python -m sketchsyn``) and return its exit status.

    Before numpy is imported it sets ``OPENBLAS_NUM_THREADS=1`` unless the environment already
    sets it: no subcommand does large linear algebra, and OpenBLAS' thread pool, started at
    numpy's import, cost about 0.07 CPU-s of a 0.3 CPU-s small ``fit`` for nothing.
    (:func:`sketchsyn.cli.main` called from Python leaves the environment alone.)
    """
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from .cli import main

    return main()


if __name__ == "__main__":
    sys.exit(command())
