"""``python -m kudusql_tpch``: see ``kudusql_tpch.cli``."""

from __future__ import annotations

import sys

from kudusql_tpch.cli import main

if __name__ == "__main__":
    sys.exit(main())
