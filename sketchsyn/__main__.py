"""``python -m sketchsyn …``: the same command as ``sketchsyn …``."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
