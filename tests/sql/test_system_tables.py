"""The ``sys`` database: tables, tablets, rowsets and maintenance history through SQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import kudusql
from kudusql.common.errors import ProgrammingError


@pytest.fixture
def conn() -> Iterator[kudusql.Connection]:
    # Two small flushes merge at once (by default a merge of small disjoint rowsets waits
    # for eight of them or a full rowset's bytes).
    c = kudusql.connect(
        ":memory:", maintenance=False, sync=False, compaction_small_rowset_merge_inputs=2
    )
    c.execute(
        "CREATE TABLE t (id BIGINT PRIMARY KEY, v STRING) PARTITION BY HASH (id) PARTITIONS 2"
    )
    c.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd')")
    yield c
    c.close()


def test_tables_and_tablets(conn: kudusql.Connection) -> None:
    assert conn.execute(
        "SELECT table_name, num_tablets, num_columns FROM sys.tables"
    ).fetchall() == [("t", 2, 2)]
    rows = conn.execute(
        "SELECT sum(memrowset_rows), count(*), sum(diskrowsets) FROM sys.tablets "
        "WHERE table_name = 't'"
    ).fetchall()
    assert rows == [(4, 2, 0)]


def test_rowsets_and_maintenance_after_flush_and_compaction(conn: kudusql.Connection) -> None:
    conn.execute("ALTER TABLE t EXECUTE FLUSH")
    conn.execute("INSERT INTO t VALUES (5, 'e'), (6, 'f')")
    conn.execute("ALTER TABLE t EXECUTE FLUSH")
    disk = conn.execute(
        "SELECT sum(rows), count(*) FROM sys.rowsets WHERE kind = 'diskrowset'"
    ).fetchall()
    assert disk[0][0] == 6 and disk[0][1] >= 2
    conn.execute("ALTER TABLE t EXECUTE COMPACT")
    ops = {
        r[0]
        for r in conn.execute("SELECT op FROM sys.maintenance WHERE table_name = 't'").fetchall()
    }
    assert "flush_mrs" in ops and "merge_compaction" in ops, ops
    # joins with user tables work like any table
    n = conn.execute(
        "SELECT count(*) FROM t JOIN sys.tables s ON s.table_name = 't' WHERE t.id > 2"
    ).fetchall()
    assert n == [(4,)]


def test_unknown_system_table_and_reserved_name(conn: kudusql.Connection) -> None:
    with pytest.raises(ProgrammingError, match=r"no system table sys\.nope"):
        conn.execute("SELECT * FROM sys.nope")
    with pytest.raises(ProgrammingError, match="reserved"):
        conn.execute("CREATE DATABASE sys")
