"""``python -m sketchsyn.cli …``: the same command as ``sketchsyn …``."""

import sys

from . import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
