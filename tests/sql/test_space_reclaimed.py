"""COMPACT and GC through SQL give back the space of rows deleted before the ancient
history mark (issue 31, P1): a hash-partitioned table, 90% of its rows deleted, takes
about the space of a table holding only the rows left."""

from __future__ import annotations

import time

import pytest

import kudusql

ROWS = 20_000
HISTORY_S = 0.5


def data_bytes(c: kudusql.Connection, table: str) -> int:
    got = c.execute(
        "SELECT sum(disk_bytes) FROM sys.tablets WHERE table_name = ?", (table,)
    ).fetchall()
    return int(got[0][0])


@pytest.mark.parametrize("statement", ["COMPACT TABLE t", "ALTER TABLE t EXECUTE GC"])
def test_deleted_rows_space_comes_back(tmp_path: object, statement: str) -> None:
    c = kudusql.connect(
        str(tmp_path) + "/db",
        maintenance=False,
        sync=False,
        file_grace_s=0,
        history_max_age_s=HISTORY_S,
    )
    try:
        for name in ("t", "fresh"):
            c.execute(
                f"CREATE TABLE {name} (k BIGINT PRIMARY KEY, v STRING) "
                "PARTITION BY HASH (k) PARTITIONS 2"
            )
        c.execute(f"INSERT INTO t SELECT i, repeat('x', 60) || i FROM range({ROWS}) r(i)")
        c.execute("ALTER TABLE t EXECUTE FLUSH")
        full = data_bytes(c, "t")
        c.execute("DELETE FROM t WHERE k % 10 <> 0")
        c.execute("ALTER TABLE t EXECUTE FLUSH")
        before = c.execute("SELECT count(*), sum(k), min(v), max(v) FROM t").fetchall()
        assert before[0][0] == ROWS // 10
        time.sleep(2 * HISTORY_S)  # the deletes pass the ancient history mark
        c.execute(statement)
        assert c.execute("SELECT count(*), sum(k), min(v), max(v) FROM t").fetchall() == before
        c.execute("INSERT INTO fresh SELECT * FROM t")
        c.execute("ALTER TABLE fresh EXECUTE FLUSH")
        size, fresh = data_bytes(c, "t"), data_bytes(c, "fresh")
        assert size < full / 4, (size, full)
        assert size <= 1.25 * fresh, (size, fresh)
        rows = c.execute(
            "SELECT sum(rows), sum(live_rows) FROM sys.rowsets WHERE table_name = 't'"
        ).fetchall()
        assert rows == [(ROWS // 10, ROWS // 10)]
    finally:
        c.close()
