"""The TPC-H benchmark runner of kudusql (``python -m kudusql_tpch``, ``kudusql-tpch``).

Modules by concern: ``spec`` (tables, keys, queries), ``generate`` (tpchgen-cli),
``load`` (Kudu-style tables through Spark or Arrow; DuckDB's copies), ``check``
(answer comparison), ``run`` (timed suites), ``micro`` (the Kudu paper's Table 2),
``mutation`` (UPDATE/DELETE, deltas, compaction), ``results`` (the JSON document),
``report`` (markdown and PNG), ``progress`` (progress bars) and ``cli``.
"""

from __future__ import annotations
