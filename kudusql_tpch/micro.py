"""``micro``: the micro-queries of Table 2 of the Kudu paper (there against Phoenix on
HBase; here against DuckDB over Parquet and DuckDB native tables): TPC-H Q1 (a scan of
lineitem with aggregation), ``COUNT(*)`` of lineitem (the cheapest full scan), a
``COUNT(*)`` with an equality on a non-key column (``l_quantity = 48``: a full
predicate scan) and on the key's first column (``l_orderkey = 2000``: a key-range
lookup, which the primary-key index and hash partition pruning should make near
instant)."""

from __future__ import annotations

MICRO_QUERIES: dict[str, str] = {
    "Q1": "",  # TPC-H Q1, filled from the query files
    "COUNT(*)": "SELECT COUNT(*) FROM lineitem",
    "l_quantity = 48": "SELECT COUNT(*) FROM lineitem WHERE l_quantity = 48",
    "l_orderkey = 2000": "SELECT COUNT(*) FROM lineitem WHERE l_orderkey = 2000",
}


def micro_queries(q1: str) -> dict[str, str]:
    return {name: (sql or q1) for name, sql in MICRO_QUERIES.items()}
