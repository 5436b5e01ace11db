"""The fast paths (point lookups, parameterized INSERT/UPSERT VALUES) give exactly what
the general path (optimizer + DuckDB) gives, and are taken only for their shapes."""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Iterator
from typing import Any

import pytest

import kudusql
from kudusql.common.errors import ProgrammingError


@pytest.fixture
def conn() -> Iterator[kudusql.Connection]:
    c = kudusql.connect(":memory:", maintenance=False, sync=False)
    c.execute(
        "CREATE TABLE t (a BIGINT, b STRING, v INT, d DECIMAL(8,2), PRIMARY KEY (a, b)) "
        "PARTITION BY HASH (a) PARTITIONS 3"
    )
    c.execute("CREATE TABLE u (k DATE PRIMARY KEY, w STRING)")
    c.cursor().executemany(
        "INSERT INTO t VALUES (?, ?, ?, ?)",
        [(i, f"s{i % 3}", i * 10, decimal.Decimal(i) / 4) for i in range(30)],
    )
    c.execute("INSERT INTO u VALUES (DATE '2024-01-02', 'x')")
    yield c
    c.close()


def rows(c: kudusql.Connection, sql: str, params: Any = None) -> tuple[list[Any], list[str]]:
    cur = c.cursor().execute(sql, params)
    assert cur.description is not None
    return cur.fetchall(), [d[0] for d in cur.description]


def fast(c: kudusql.Connection, sql: str, params: Any = (1, "s1", 1)) -> bool:
    """The point-lookup path answers ``sql`` with ``params``."""
    entry = c.session.statements.get(sql)
    return (
        entry is not None and entry[1] is not None and entry[1].run(c.session, params) is not None
    )


CASES: list[tuple[str, Any]] = [
    ("SELECT * FROM t WHERE a = ? AND b = ?", (4, "s1")),
    ("SELECT * FROM t WHERE b = ? AND a = ?", ("s1", 4)),
    ("SELECT v, a AS key FROM t WHERE a = :a AND b = :b", {"a": 5, "b": "s2"}),
    ("SELECT t.v FROM t WHERE t.a = 7 AND t.b = 's1'", None),
    ("SELECT x.v FROM t x WHERE x.a = ? AND (x.b = ?)", (7, "s1")),
    ("SELECT * FROM t WHERE a = ? AND b = ?", (4, "nope")),
    ("SELECT * FROM t WHERE a = -1 AND b = 's0'", None),
    ("SELECT * FROM u WHERE k = ?", (datetime.date(2024, 1, 2),)),
]


@pytest.mark.parametrize(("sql", "params"), CASES)
def test_fast_path_equals_general_path(conn: kudusql.Connection, sql: str, params: Any) -> None:
    assert fast(conn, sql, params)
    got = rows(conn, sql, params)
    # the same query with a conjunct the fast path does not take
    slow_sql = sql.replace(" WHERE ", " WHERE 1 = 1 AND ")
    assert not fast(conn, slow_sql, params)
    assert got == rows(conn, slow_sql, params)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM t WHERE a = ?",  # not the whole key: a scan
        "SELECT * FROM t WHERE a = ? AND b = ? ORDER BY v",
        "SELECT count(*) FROM t WHERE a = ? AND b = ?",
        "SELECT * FROM t FOR SYSTEM_TIME AS OF 1 WHERE a = ? AND b = ?",
        "SELECT * FROM t WHERE a = ? AND b = ? AND v = ?",
        "SELECT * FROM t WHERE a = ? OR b = ?",
        "SELECT * FROM t JOIN u ON true WHERE a = ? AND b = ?",
    ],
)
def test_other_shapes_take_the_general_path(conn: kudusql.Connection, sql: str) -> None:
    assert not fast(conn, sql)


def test_values_of_another_type_fall_back(conn: kudusql.Connection) -> None:
    sql = "SELECT v FROM t WHERE a = ? AND b = ?"
    assert rows(conn, sql, ("4", "s1"))[0] == rows(conn, sql, (4, "s1"))[0] == [(40,)]


def test_fast_path_sees_writes_and_errors(conn: kudusql.Connection) -> None:
    sql = "SELECT v FROM t WHERE a = ? AND b = ?"
    conn.execute("UPDATE t SET v = 1 WHERE a = 4")
    assert rows(conn, sql, (4, "s1"))[0] == [(1,)]
    conn.execute("DELETE FROM t WHERE a = 4")
    assert rows(conn, sql, (4, "s1"))[0] == []
    with pytest.raises(ProgrammingError, match="nope"):
        conn.execute("SELECT nope FROM t WHERE a = ? AND b = ?", (1, "s1"))
    with pytest.raises(ProgrammingError, match="does not exist"):
        conn.execute("SELECT * FROM missing WHERE a = ?", (1,))


def test_parameterized_insert_reuses_the_template(conn: kudusql.Connection) -> None:
    cur = conn.cursor()
    sql = "INSERT INTO t (a, b, v) VALUES (?, ?, ?)"
    cur.execute(sql, (100, "z", 1))
    assert cur.rowcount == 1
    assert conn.session.statements.get(sql) is not None
    cur.execute(sql, (100, "z", 2))  # duplicate key: a warning, nothing applied
    assert cur.rowcount == 0 and cur.warnings
    conn.execute("UPSERT INTO t (a, b, v) VALUES (?, ?, ?)", (100, "z", 3))
    assert rows(conn, "SELECT v FROM t WHERE a = ? AND b = ?", (100, "z"))[0] == [(3,)]


def test_not_like_is_not_pushed_down_as_like(conn: kudusql.Connection) -> None:
    """Pinned: sqlglot marks NOT LIKE with a negate flag on the Like node; the planner
    pushed it down as LIKE (TPC-H Q16 returned nothing)."""
    got = conn.execute("SELECT count(*) FROM t WHERE b NOT LIKE 's1%'").fetchall()
    assert got == [(20,)]


def test_exists_subquery_reads_only_the_columns_it_uses(conn: kudusql.Connection) -> None:
    """EXISTS (SELECT * ...) needs no column of its SELECT list: the scan reads only the
    columns of its WHERE (before, every column: TPC-H Q4 and Q21)."""
    from kudusql.parser import parse_one
    from kudusql.parser.statements import Query
    from kudusql.planner.plan import plan_query

    sql = "SELECT u.w FROM u WHERE EXISTS (SELECT * FROM t WHERE t.a = 3 AND t.v > 0)"
    stmt = parse_one(sql)
    assert isinstance(stmt, Query)
    plan = plan_query(stmt.ast, conn.session.resolve)
    scan_t = next(s for s in plan.scans if s.table == "t")
    assert sorted(scan_t.columns) == ["a", "v"]
    assert conn.execute(sql).fetchall() == [("x",)]


def test_lookup_after_alter_table_sees_the_new_columns(conn: kudusql.Connection) -> None:
    sql = "SELECT * FROM t WHERE a = ? AND b = ?"
    assert rows(conn, sql, (4, "s1"))[1] == ["a", "b", "v", "d"]
    conn.execute("ALTER TABLE t ADD COLUMNS (w INT)")
    conn.execute("ALTER TABLE t DROP COLUMN v")
    got, names = rows(conn, sql, (4, "s1"))
    assert names == ["a", "b", "d", "w"] and got == [(4, "s1", decimal.Decimal("1.00"), None)]
