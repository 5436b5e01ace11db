"""``python -m tpch``: see ``tpch.cli``."""

from __future__ import annotations

import sys

from tpch.cli import main

if __name__ == "__main__":
    sys.exit(main())
