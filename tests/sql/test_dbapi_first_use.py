"""What a new DB-API user meets first: parameter counts, a closed connection, and what
``Cursor.description`` says about NULLs."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

import kudusql


@pytest.fixture
def conn() -> Iterator[kudusql.Connection]:
    c = kudusql.connect(":memory:", maintenance=False, sync=False)
    c.execute(
        "CREATE TABLE t (id BIGINT PRIMARY KEY, v STRING NOT NULL, w INT) "
        "PARTITION BY HASH (id) PARTITIONS 2"
    )
    c.execute(
        "CREATE TABLE u (id BIGINT PRIMARY KEY, z INT NOT NULL) PARTITION BY HASH (id) PARTITIONS 2"
    )
    c.execute("INSERT INTO t VALUES (1, 'a', NULL), (2, 'b', 2)")
    c.execute("INSERT INTO u VALUES (1, 10)")
    yield c
    c.close()


@pytest.mark.parametrize(
    ("sql", "params", "counts"),
    [
        ("SELECT 1", (1,), "0 parameter(s) but 1"),
        ("SELECT ?", (1, 2), "1 parameter(s) but 2"),
        ("SELECT * FROM t WHERE id = ?", (1, 2), "1 parameter(s) but 2"),  # point lookup
        ("SELECT * FROM t WHERE id = 1", (1,), "0 parameter(s) but 1"),
        ("INSERT INTO t VALUES (3, 'c', 3)", (1,), "0 parameter(s) but 1"),
        ("INSERT INTO t VALUES (?, ?, ?)", (3, "c", 3, 4), "3 parameter(s) but 4"),
        ("SELECT ? + ?", (1,), "needs parameter 2 but 1"),
    ],
)
def test_a_parameter_count_that_does_not_match_is_an_error(
    conn: kudusql.Connection, sql: str, params: tuple[Any, ...], counts: str
) -> None:
    cur = conn.cursor()
    with pytest.raises(kudusql.ProgrammingError, match=re.escape(counts)):
        cur.execute(sql, params)
    with pytest.raises(kudusql.ProgrammingError, match=re.escape(counts.split(" but")[0])):
        cur.executemany(sql, [params])
    assert conn.execute("SELECT count(*) FROM t").fetchall() == [(2,)]  # nothing written


def test_matching_parameters_still_bind(conn: kudusql.Connection) -> None:
    assert conn.execute("SELECT 1", ()).fetchall() == [(1,)]
    assert conn.execute("SELECT v FROM t WHERE id = ?", (2,)).fetchall() == [("b",)]
    assert conn.execute("SELECT $1, $1", (3,)).fetchall() == [(3, 3)]
    # A mapping may hold more names than the statement uses (as sqlite3 and psycopg).
    assert conn.execute("SELECT :a", {"a": 1, "b": 2}).fetchall() == [(1,)]


def test_a_closed_connection_makes_no_cursor(conn: kudusql.Connection) -> None:
    conn.close()
    with pytest.raises(kudusql.InterfaceError, match="closed"):
        conn.cursor()
    with pytest.raises(kudusql.InterfaceError, match="closed"):
        conn.execute("SELECT 1")


def _null_ok(conn: kudusql.Connection, sql: str) -> list[bool | None]:
    cur = conn.execute(sql)
    assert cur.description is not None
    return [d[6] for d in cur.description]


@pytest.mark.parametrize(
    ("sql", "null_ok"),
    [
        ("SELECT * FROM t", [False, False, True]),
        ("SELECT id, v, w FROM t WHERE id = 1", [False, False, True]),  # point lookup
        ("SELECT w, id + 1 AS n, 'x' AS k, count(*) OVER () FROM t", [True, None, None, None]),
        ("SELECT x.v AS name FROM t AS x", [False]),
        ("SELECT t.v, u.z FROM t JOIN u ON t.id = u.id", [False, False]),
        ("SELECT t.v, u.z FROM t LEFT JOIN u ON t.id = u.id", [False, True]),
        ("SELECT t.v, u.z FROM t RIGHT JOIN u ON t.id = u.id", [True, False]),
        ("SELECT v, count(*) FROM t GROUP BY v", [False, None]),
        ("SELECT v FROM t GROUP BY ROLLUP (v)", [None]),
        ("SELECT id FROM t UNION ALL SELECT id FROM u", [None]),
        ("SELECT id FROM (SELECT id FROM t) s", [None]),
        ("SELECT 1", [None]),
    ],
)
def test_description_null_ok(conn: kudusql.Connection, sql: str, null_ok: list[Any]) -> None:
    assert _null_ok(conn, sql) == null_ok
