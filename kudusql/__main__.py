"""``python -m kudusql`` and the ``kudusql`` console script: the SQL shell
(``kudusql.shell.cli``)."""

from __future__ import annotations

import sys

from kudusql.shell import main

if __name__ == "__main__":
    sys.exit(main())
