"""What TPC-H is: the eight tables with their primary keys, their sizes, the 22 queries
and the row counts of their answers at SF 1."""

from __future__ import annotations

import os
import re
from pathlib import Path

#: The TPC-H tables and their primary keys (the first column is the hash column), in
#: load order: the big tables first, so a progress bar's rate settles early.
TPCH_KEYS: dict[str, tuple[str, ...]] = {
    "lineitem": ("l_orderkey", "l_linenumber"),
    "orders": ("o_orderkey",),
    "customer": ("c_custkey",),
    "part": ("p_partkey",),
    "partsupp": ("ps_partkey", "ps_suppkey"),
    "supplier": ("s_suppkey",),
    "nation": ("n_nationkey",),
    "region": ("r_regionkey",),
}
#: Rows per table at SF 1 (nation and region are fixed at every scale factor).
SF1_ROWS = {
    "lineitem": 6_001_215,
    "orders": 1_500_000,
    "customer": 150_000,
    "part": 200_000,
    "partsupp": 800_000,
    "supplier": 10_000,
    "nation": 25,
    "region": 5,
}
#: Tables whose size does not grow with the scale factor.
FIXED_TABLES = ("nation", "region")
#: Row counts of the 22 answers at SF 1 (kudusql_tpch/README.md).
SF1_ANSWER_ROWS = [4, 100, 10, 5, 5, 1, 4, 2, 175, 20, 1048, 2, 42, 1, 1, 18314, 1, 57]
SF1_ANSWER_ROWS += [1, 186, 100, 7]
QUERY_NUMBERS = tuple(range(1, 23))


def sf_label(sf: float) -> str:
    """``1`` for 1.0, ``0.1`` for 0.1: the directory suffix and the generator's argument."""
    return f"{sf:g}"


def expected_rows(table: str, sf: float) -> int:
    """Approximate rows of ``table`` at ``sf`` (exact at SF 1 and for nation, region)."""
    if table in FIXED_TABLES:
        return SF1_ROWS[table]
    return max(1, round(SF1_ROWS[table] * sf))


def query_name(q: int) -> str:
    return f"q{q:02d}"


def queries_dir() -> Path:
    """The directory of ``q01.sql`` .. ``q22.sql``: ``$KUDUSQL_TPCH_QUERIES``, else the
    ``queries`` directory of this package."""
    env = os.environ.get("KUDUSQL_TPCH_QUERIES")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent / "queries"


def load_queries(directory: Path | None = None) -> dict[int, str]:
    """Query number -> SQL text (trailing ``;`` and blank space removed)."""
    d = directory or queries_dir()
    out = {}
    for i in QUERY_NUMBERS:
        text = (d / f"q{i:02d}.sql").read_text().strip()
        out[i] = text.rstrip(";").rstrip()
    return out


def has_order_by(sql: str) -> bool:
    """Whether the query's outermost statement sorts (TPC-H: a top-level ORDER BY)."""
    return re.search(r"\border\s+by\b", sql, re.IGNORECASE) is not None


def parse_query_list(text: str) -> list[int]:
    """``"1,3,5-7"`` -> ``[1, 3, 5, 6, 7]``; every number must be a TPC-H query."""
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip().lower().removeprefix("q")
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            a = int(lo)
            b = int(hi.strip().lower().removeprefix("q")) if sep else a
        except ValueError:
            raise ValueError(f"bad query list {text!r}: expected e.g. 1,3,5-7") from None
        if not (1 <= a <= b <= 22):
            raise ValueError(f"bad query range {part!r}: queries are 1..22")
        out.update(range(a, b + 1))
    if not out:
        raise ValueError(f"bad query list {text!r}: no query named")
    return sorted(out)
