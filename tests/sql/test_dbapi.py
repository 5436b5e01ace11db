"""PEP 249 conformance: module globals, connection, cursor, parameters, types, errors."""

from __future__ import annotations

import datetime
import decimal
import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import kudusql
from kudusql import dbapi
from tests.support.targets import Target


@pytest.fixture
def conn(target: Target) -> Iterator[kudusql.Connection]:
    """A connection to an embedded database, and one to a cluster."""
    c = target.connect()
    c.execute(
        "CREATE TABLE t (id BIGINT PRIMARY KEY, s STRING, m DECIMAL(10,2), dt DATE, ts TIMESTAMP,"
        " b BINARY, f BOOLEAN) PARTITION BY HASH (id) PARTITIONS 2"
    )
    yield c
    c.close()


def test_module_globals() -> None:
    assert kudusql.apilevel == "2.0"
    assert kudusql.threadsafety == 2
    assert kudusql.paramstyle == "qmark"
    for name in (
        "Warning",
        "Error",
        "InterfaceError",
        "DatabaseError",
        "DataError",
        "OperationalError",
        "IntegrityError",
        "InternalError",
        "ProgrammingError",
        "NotSupportedError",
    ):
        assert issubclass(getattr(kudusql, name), Exception)
    assert issubclass(kudusql.IntegrityError, kudusql.DatabaseError)
    assert dbapi.Date(2024, 1, 2) == datetime.date(2024, 1, 2)
    assert isinstance(dbapi.TimestampFromTicks(0), datetime.datetime)
    assert dbapi.Binary(b"x") == b"x"
    assert dbapi.NUMBER == "BIGINT" and dbapi.STRING == "STRING" and dbapi.DATETIME == "DATE"
    assert dbapi.NUMBER != "STRING"


def test_memory_directory_removed_on_close() -> None:
    c = kudusql.connect(":memory:")
    path = c.session.db.path
    assert os.path.isdir(path)
    c.close()
    assert not os.path.exists(path)
    c.close()  # twice is fine
    with pytest.raises(kudusql.InterfaceError):
        c.cursor().execute("SELECT 1")


def test_unknown_option() -> None:
    with pytest.raises(kudusql.ProgrammingError, match="unknown option"):
        kudusql.connect(":memory:", nope=1)


def test_bad_option_value() -> None:
    with pytest.raises(kudusql.ProgrammingError, match="at least 2"):
        kudusql.connect(":memory:", compaction_small_rowset_merge_inputs=1)


def test_params_types_and_fetch(conn: kudusql.Connection) -> None:
    cur = conn.cursor()
    rows = [
        (
            1,
            "a'b",
            decimal.Decimal("1.50"),
            datetime.date(2024, 1, 2),
            datetime.datetime(2024, 1, 2, 3, 4, 5),
            b"\x00\xff",
            True,
        ),
        (2, None, None, None, None, None, None),
        (
            3,
            "c",
            decimal.Decimal("3"),
            datetime.date(2024, 3, 1),
            datetime.datetime(2024, 3, 1),
            b"",
            False,
        ),
    ]
    cur.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    assert cur.rowcount == 3 and cur.warnings == []
    cur.execute("SELECT * FROM t WHERE id = ?", (1,))
    assert cur.fetchone() == rows[0]
    assert cur.fetchone() is None
    assert [d[0] for d in cur.description] == ["id", "s", "m", "dt", "ts", "b", "f"]
    assert [d[1] for d in cur.description] == [
        "BIGINT",
        "STRING",
        "DECIMAL",
        "DATE",
        "TIMESTAMP",
        "BINARY",
        "BOOLEAN",
    ]
    assert cur.description[2][4:6] == (10, 2)
    cur.execute(
        "SELECT id FROM t WHERE s = :s OR dt = :d ORDER BY id",
        {"s": "a'b", "d": datetime.date(2024, 3, 1)},
    )
    assert cur.fetchall() == [(1,), (3,)]
    cur.execute("SELECT id FROM t WHERE s = ?", ("x'); DROP TABLE t; --",))
    assert cur.fetchall() == []
    cur.execute("SELECT id FROM t WHERE b = ?", (b"\x00\xff",))
    assert cur.fetchall() == [(1,)]
    with pytest.raises(kudusql.ProgrammingError, match="parameter"):
        cur.execute("SELECT id FROM t WHERE id = ? AND id = ?", (1,))


def test_fetchmany_iteration_arrow(conn: kudusql.Connection) -> None:
    cur = conn.cursor()
    cur.executemany("INSERT INTO t (id) VALUES (?)", [(i,) for i in range(10)])
    cur.execute("SELECT id FROM t ORDER BY id")
    assert cur.rowcount == 10
    cur.arraysize = 3
    assert cur.fetchmany() == [(0,), (1,), (2,)]
    assert cur.fetchmany(2) == [(3,), (4,)]
    assert next(iter(cur)) == (5,)
    t = cur.fetch_arrow_table()
    assert isinstance(t, pa.Table) and t.column("id").to_pylist() == [6, 7, 8, 9]
    assert cur.fetchall() == []
    cur.execute("SELECT id FROM t WHERE id < 2 ORDER BY id")
    assert list(cur) == [(0,), (1,)]


def test_fetchdf_without_pandas(conn: kudusql.Connection) -> None:
    pytest.importorskip("pandas", reason=None) if False else None
    cur = conn.execute("SELECT 1")
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(kudusql.NotSupportedError, match="pandas"):
            cur.fetchdf()


def test_ddl_has_no_result(conn: kudusql.Connection) -> None:
    cur = conn.cursor()
    cur.execute("CREATE TABLE x (id INT PRIMARY KEY) PARTITION BY HASH (id) PARTITIONS 2")
    assert cur.description is None and cur.rowcount == -1
    with pytest.raises(kudusql.ProgrammingError, match="no result set"):
        cur.fetchone()


def test_commit_rollback_are_autocommit_noops(conn: kudusql.Connection) -> None:
    cur = conn.cursor()
    cur.execute("INSERT INTO t (id) VALUES (1)")
    conn.rollback()
    conn.commit()
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (1,)


def test_errors_are_kudusql_errors(conn: kudusql.Connection) -> None:
    cur = conn.cursor()
    with pytest.raises(kudusql.ProgrammingError, match="line 1, column"):
        cur.execute("SELEC 1")
    with pytest.raises(kudusql.ProgrammingError, match="does not exist"):
        cur.execute("SELECT * FROM nope")
    with pytest.raises(kudusql.DataError):
        cur.execute("SELECT CAST('x' AS INT)")
    cur.execute("SET abort_on_error = true")
    cur.execute("INSERT INTO t (id) VALUES (1)")
    with pytest.raises(kudusql.IntegrityError, match="already present"):
        cur.executemany("INSERT INTO t (id) VALUES (?)", [(2,), (1,)])
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (1,)


def test_executemany_is_one_write(conn: kudusql.Connection, target: Target) -> None:
    cur = conn.cursor()
    cur.executemany("INSERT INTO t (id, s) VALUES (?, ?)", [(i, str(i)) for i in range(1000)])
    ts = cur.timestamp
    assert cur.rowcount == 1000
    # one write batch: every row has the same timestamp, so a snapshot just after it
    # sees all of them and one at it sees none. A cluster applies the batch atomically
    # per tablet, each at its own timestamp: the cursor's is the latest.
    at_ts = conn.execute(f"SELECT count(*) FROM t FOR SYSTEM_TIME AS OF {ts}").fetchone()
    assert at_ts is not None and (at_ts[0] < 1000 if target.cluster else at_ts[0] == 0)
    assert conn.execute(f"SELECT count(*) FROM t FOR SYSTEM_TIME AS OF {ts + 1}").fetchone() == (
        1000,
    )


def test_time_travel_and_table_changes(conn: kudusql.Connection) -> None:
    cur = conn.cursor()
    cur.execute("INSERT INTO t (id, s) VALUES (1, 'a'), (2, 'b')")
    t1 = cur.timestamp + 1
    wall = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    cur.execute("UPDATE t SET s = 'B' WHERE id = 2")
    cur.execute("INSERT INTO t (id, s) VALUES (3, 'c')")
    cur.execute("DELETE FROM t WHERE id = 1")
    t2 = cur.timestamp + 1
    assert conn.execute(f"SELECT id, s FROM t TIMESTAMP AS OF {t1} ORDER BY id").fetchall() == [
        (1, "a"),
        (2, "b"),
    ]
    cur.execute("SELECT id, s FROM t FOR SYSTEM_TIME AS OF ? ORDER BY id", (wall,))
    assert cur.fetchall() == [(1, "a"), (2, "b")]
    cur.execute(
        f"SELECT id, a.s, b.s FROM t FOR SYSTEM_TIME AS OF {t1} a "
        "FULL JOIN t b USING (id) ORDER BY 1"
    )
    assert cur.fetchall() == [(1, "a", None), (2, "b", "B"), (3, None, "c")]
    cur.execute(
        f"SELECT id, s, change_type, is_deleted FROM table_changes('t', {t1}, {t2}) ORDER BY id"
    )
    assert cur.fetchall() == [
        (1, "a", "delete", True),
        (2, "B", "update", False),
        (3, "c", "insert", False),
    ]
    with pytest.raises(kudusql.ProgrammingError, match="future"):
        conn.execute("SELECT * FROM t FOR SYSTEM_TIME AS OF TIMESTAMP '2999-01-01'")


def test_explain_shows_pushdown_and_pruning(conn: kudusql.Connection) -> None:
    conn.execute(
        "CREATE TABLE r (id BIGINT PRIMARY KEY, v STRING) PARTITION BY RANGE (id) "
        "(PARTITION VALUES < 10, PARTITION 10 <= VALUES < 20, PARTITION 20 <= VALUES)"
    )
    plan = [
        r[0]
        for r in conn.execute(
            "EXPLAIN SELECT v FROM r WHERE id >= 12 AND id < 15 AND v LIKE 'x%'"
        ).fetchall()
    ]
    assert "  tablets: 1 of 3 (2 pruned)" in plan
    assert any("pushed predicates: id >= 12 AND id < 15 AND v LIKE 'x'%" in p for p in plan)
    assert "DUCKDB PLAN" in plan


def test_rowcount_outlives_close(tmp_path: Path) -> None:
    """A closed cursor still reports its last statement's rowcount, as sqlite3's does
    (SQLAlchemy reads an INSERT's rowcount after closing its cursor)."""
    with kudusql.connect(str(tmp_path / "db")) as conn:
        cur = conn.cursor()
        cur.execute(
            "CREATE TABLE t (id INT PRIMARY KEY, v STRING) PARTITION BY HASH (id) PARTITIONS 2"
        )
        cur.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
        cur.close()
        assert cur.rowcount == 3
        fresh = conn.cursor()
        assert fresh.rowcount == -1
