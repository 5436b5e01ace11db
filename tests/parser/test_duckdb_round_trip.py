"""Queries parsed with the kudusql dialect print as SQL DuckDB runs, with the same result
as the original text; time travel is stripped (and noted in a comment) and
``table_changes`` stays a table function call (here a DuckDB table macro stands in)."""

from __future__ import annotations

import duckdb
import pytest

from kudusql.parser import parse_one, to_duckdb_sql
from kudusql.parser.statements import Query

QUERIES = [
    "SELECT a, count(*) AS n FROM t GROUP BY a ORDER BY a",
    "SELECT t.a, u.b FROM t JOIN u ON t.a = u.a WHERE u.b > 1 ORDER BY 1, 2",
    "WITH x AS (SELECT a FROM t WHERE a > 1) SELECT sum(a) FROM x",
    "SELECT a, row_number() OVER (PARTITION BY a % 2 ORDER BY a) AS r FROM t ORDER BY a",
    "SELECT a FROM t UNION SELECT a FROM u ORDER BY a",
    "SELECT a FROM t WHERE a IN (SELECT a FROM u) AND s LIKE 'x%' ORDER BY a",
    "SELECT CAST(a AS STRING), CAST(a AS DECIMAL(10, 2)), CAST(a AS INT8) FROM t ORDER BY 1",
    "SELECT CAST(s AS VARCHAR(3)) AS v, a::DOUBLE / 3 FROM t ORDER BY 1",
    "SELECT DATE '2024-01-31' + INTERVAL 1 DAY, TIMESTAMP '2024-01-01 10:00:00'",
    "SELECT X'0aff' = UNHEX('0AFF')",
    "SELECT a, CASE WHEN a > 1 THEN 'big' ELSE 'small' END FROM t ORDER BY a LIMIT 2 OFFSET 1",
    "VALUES (1, 'a'), (2, 'b')",
    "SELECT count(DISTINCT a), max(s), avg(a) FILTER (WHERE a > 1) FROM t",
]

TIME_TRAVEL = [
    (
        "SELECT * FROM t FOR SYSTEM_TIME AS OF TIMESTAMP '2024-01-01 00:00:00' ORDER BY a",
        "SELECT * FROM t ORDER BY a",
    ),
    (
        "SELECT x.a FROM t FOR SYSTEM_TIME AS OF 7000000 AS x JOIN u TIMESTAMP AS OF 5 "
        "ON x.a = u.a ORDER BY 1",
        "SELECT x.a FROM t AS x JOIN u ON x.a = u.a ORDER BY 1",
    ),
    (
        "SELECT * FROM (SELECT a FROM t FOR SYSTEM_TIME AS OF 5) AS s ORDER BY a",
        "SELECT * FROM (SELECT a FROM t) AS s ORDER BY a",
    ),
]


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    c = duckdb.connect()
    c.execute("CREATE TABLE t (a INTEGER, s VARCHAR)")
    c.execute("INSERT INTO t VALUES (1, 'xa'), (2, 'yb'), (3, 'xc')")
    c.execute("CREATE TABLE u (a INTEGER, b INTEGER)")
    c.execute("INSERT INTO u VALUES (1, 5), (3, 0), (4, 2)")
    c.execute(
        "CREATE MACRO table_changes(name, start_ts, end_ts := NULL) AS TABLE "
        "SELECT a, 'insert' AS change_type, false AS is_deleted FROM t"
    )
    return c


def _query(sql: str) -> Query:
    stmt = parse_one(sql)
    assert isinstance(stmt, Query)
    return stmt


@pytest.mark.parametrize("sql", QUERIES)
def test_generated_sql_runs_in_duckdb(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    generated = to_duckdb_sql(_query(sql).ast)
    assert con.execute(generated).fetchall() == con.execute(sql).fetchall()


@pytest.mark.parametrize(("sql", "plain"), TIME_TRAVEL)
def test_time_travel_is_stripped(con: duckdb.DuckDBPyConnection, sql: str, plain: str) -> None:
    stmt = _query(sql)
    assert stmt.time_travel(), "the AS OF clause sits on the table node"
    generated = to_duckdb_sql(stmt.ast)
    assert "FOR SYSTEM_TIME AS OF" in generated  # kept as a comment for readers
    assert con.execute(generated).fetchall() == con.execute(plain).fetchall()


def test_time_travel_on_the_table_node() -> None:
    stmt = _query("SELECT * FROM db.t FOR SYSTEM_TIME AS OF 42 AS x, u")
    [(table, when)] = stmt.time_travel()
    assert (table.db, table.name, table.alias, when.sql()) == ("db", "t", "x", "42")


def test_table_changes_runs_as_a_table_function(con: duckdb.DuckDBPyConnection) -> None:
    sql = "SELECT a, change_type FROM table_changes('t', 1, 2) WHERE NOT is_deleted ORDER BY a"
    generated = to_duckdb_sql(_query(sql).ast)
    assert con.execute(generated).fetchall() == [(1, "insert"), (2, "insert"), (3, "insert")]


def test_kudusql_sql_round_trips_time_travel() -> None:
    stmt = _query("SELECT * FROM t TIMESTAMP AS OF 5 AS x")
    assert stmt.ast.sql(dialect="kudusql") == "SELECT * FROM t FOR SYSTEM_TIME AS OF 5 AS x"
