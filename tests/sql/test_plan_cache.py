"""The plan cache: a repeated query text reuses its plan, and only while every table it
read still resolves to the same table with an equal schema; results never differ from a
fresh plan (snapshots and AS OF are per execution)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import kudusql
from kudusql.common.errors import ProgrammingError
from kudusql.engine import session as session_module


@pytest.fixture
def conn() -> Iterator[kudusql.Connection]:
    c = kudusql.connect(":memory:", maintenance=False, sync=False)
    c.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v INT)")
    c.execute("INSERT INTO t VALUES (1, 10), (2, 20), (3, 30)")
    yield c
    c.close()


def q(c: kudusql.Connection, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    return c.cursor().execute(sql, params).fetchall()


def count_plans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = session_module.plan_query

    def counting(*a: Any, **kw: Any) -> Any:
        calls.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(session_module, "plan_query", counting)
    return calls


def test_a_repeated_text_is_planned_once_and_sees_new_rows(
    conn: kudusql.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = count_plans(monkeypatch)
    sql = "SELECT sum(v) FROM t WHERE id >= 2"
    assert q(conn, sql) == [(50,)]
    assert q(conn, sql) == [(50,)]
    assert len(calls) == 1
    conn.execute("INSERT INTO t VALUES (4, 40)")
    conn.execute("DELETE FROM t WHERE id = 2")
    planned = len(calls)
    assert q(conn, sql) == [(70,)]  # a new snapshot per execution
    assert len(calls) == planned
    assert q(conn, "SELECT sum(v) FROM t WHERE id >= ?", [3]) == [(70,)]
    assert q(conn, "SELECT sum(v) FROM t WHERE id >= ?", [4]) == [(40,)]  # other text


def test_schema_changes_replan(conn: kudusql.Connection) -> None:
    sql = "SELECT * FROM t ORDER BY id"
    assert q(conn, sql) == [(1, 10), (2, 20), (3, 30)]
    conn.execute("ALTER TABLE t ADD COLUMNS (w STRING DEFAULT 'x')")
    assert q(conn, sql) == [(1, 10, "x"), (2, 20, "x"), (3, 30, "x")]
    conn.execute("ALTER TABLE t DROP COLUMN v")
    assert q(conn, sql) == [(1, "x"), (2, "x"), (3, "x")]


def test_dropped_renamed_and_recreated_tables(conn: kudusql.Connection) -> None:
    sql = "SELECT count(*) FROM t"
    assert q(conn, sql) == [(3,)]
    conn.execute("ALTER TABLE t RENAME TO u")
    with pytest.raises(ProgrammingError, match="does not exist"):
        q(conn, sql)
    conn.execute("CREATE TABLE t (id BIGINT PRIMARY KEY)")
    assert q(conn, sql) == [(0,)]
    conn.execute("DROP TABLE t")
    with pytest.raises(ProgrammingError, match="does not exist"):
        q(conn, sql)
    assert q(conn, "SELECT count(*) FROM u") == [(3,)]


def test_the_current_database_is_part_of_the_key(conn: kudusql.Connection) -> None:
    sql = "SELECT max(id) FROM t"
    assert q(conn, sql) == [(3,)]
    conn.execute("CREATE DATABASE other")
    conn.execute("USE other")
    conn.execute("CREATE TABLE t (id BIGINT PRIMARY KEY)")
    conn.execute("INSERT INTO t VALUES (7)")
    assert q(conn, sql) == [(7,)]
    conn.execute("USE default")
    assert q(conn, sql) == [(3,)]


def test_as_of_is_evaluated_per_execution(conn: kudusql.Connection) -> None:
    ts = conn.session.db.snapshot()
    conn.execute("INSERT INTO t VALUES (4, 40)")
    sql = f"SELECT count(*) FROM t FOR SYSTEM_TIME AS OF {ts}"
    assert q(conn, sql) == [(3,)]
    assert q(conn, sql) == [(3,)]
    assert q(conn, "SELECT count(*) FROM t") == [(4,)]


def test_count_star_reads_no_column(conn: kudusql.Connection) -> None:
    conn.execute("ALTER TABLE t EXECUTE FLUSH")
    ts = conn.session.db.snapshot()
    conn.execute("DELETE FROM t WHERE id = 2")
    assert q(conn, "SELECT count(*) FROM t") == [(2,)]
    assert q(conn, f"SELECT count(*) FROM t FOR SYSTEM_TIME AS OF {ts}") == [(3,)]
    assert q(conn, "SELECT count(*) FROM t WHERE v > 10") == [(1,)]
    assert q(conn, "SELECT count(*), count(a.id) FROM t a, t b") == [(4, 4)]
    plan = [r[0] for r in q(conn, "EXPLAIN SELECT count(*) FROM t")]
    assert "  columns: none (rows counted)" in plan
