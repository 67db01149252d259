"""``python -m lovia.web [flags]``: the same as ``lovia web [flags]``."""

from __future__ import annotations

import sys

from .command import main

if __name__ == "__main__":
    sys.exit(main())
