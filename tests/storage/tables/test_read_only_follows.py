"""A read-only connection follows a writer in another process, as SQLite and DuckDB
readers do: each statement sees what the writer has committed (new rows, new, dropped
and altered tables), never half of a multi-tablet write, and a writer killed in the
middle of one leaves it consistent. The writer is a real second process
(``tests/support/sql_writer.py``); the reader is this one."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import kudusql
from kudusql.storage.tables import catalog
from kudusql.storage.tables.database import Database
from tests.support.sql_writer import Writer

KEYS = 40


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "db")


@pytest.fixture
def writer(path: str) -> Iterator[Writer]:
    w = Writer(path)
    w.sql("CREATE TABLE t (id BIGINT PRIMARY KEY, v STRING) PARTITION BY HASH (id) PARTITIONS 4")
    yield w
    w.close()


def values(n: int, v: str) -> str:
    return ", ".join(f"({i}, '{v}')" for i in range(n))


def rows(conn: kudusql.Connection, sql: str) -> list[tuple[Any, ...]]:
    return conn.execute(sql).fetchall()


def test_new_rows_are_seen_after_the_writer_commits(writer: Writer, path: str) -> None:
    writer.sql(f"INSERT INTO t VALUES {values(10, 'a')}")
    reader = kudusql.connect(path, read_only=True)
    try:
        assert rows(reader, "SELECT count(*) FROM t") == [(10,)]
        writer.sql(f"UPSERT INTO t VALUES {values(KEYS, 'b')}")  # every tablet
        assert rows(reader, "SELECT v, count(*) FROM t GROUP BY v") == [("b", KEYS)]
        writer.sql("INSERT INTO t VALUES (100, 'c')")  # one tablet
        assert rows(reader, "SELECT v FROM t WHERE id = 100") == [("c",)]  # point lookup
        writer.sql("DELETE FROM t WHERE id < 5")
        assert rows(reader, "SELECT count(*) FROM t") == [(KEYS - 5 + 1,)]
        assert reader.refresh() is False  # nothing new since the last statement
    finally:
        reader.close()


def test_new_dropped_and_altered_tables(writer: Writer, path: str) -> None:
    writer.sql(f"INSERT INTO t VALUES {values(KEYS, 'a')}")
    reader = kudusql.connect(path, read_only=True)
    try:
        assert rows(reader, "SELECT count(*) FROM t") == [(KEYS,)]  # every tablet open
        writer.sql(
            "CREATE TABLE u (id BIGINT PRIMARY KEY, n INT) PARTITION BY HASH (id) PARTITIONS 2"
        )
        writer.sql("INSERT INTO u VALUES (1, 1), (2, 2)")
        assert rows(reader, "SELECT sum(n) FROM u") == [(3,)]
        writer.sql("ALTER TABLE t ADD COLUMNS (w INT)")
        writer.sql("UPDATE t SET w = 7 WHERE id = 1")
        assert rows(reader, "SELECT id, v, w FROM t WHERE id IN (1, 2) ORDER BY id") == [
            (1, "a", 7),
            (2, "a", None),
        ]
        writer.sql("ALTER TABLE t CHANGE v label STRING")
        assert rows(reader, "SELECT label FROM t WHERE id = 1") == [("a",)]
        with pytest.raises(kudusql.ProgrammingError, match="v"):
            reader.execute("SELECT v FROM t")
        writer.sql("DROP TABLE u")
        with pytest.raises(kudusql.ProgrammingError, match="table 'u' does not exist"):
            reader.execute("SELECT * FROM u")
        writer.sql(
            "CREATE TABLE u (id BIGINT PRIMARY KEY, s STRING) PARTITION BY HASH (id) PARTITIONS 3"
        )
        writer.sql("INSERT INTO u VALUES (5, 'again')")
        assert rows(reader, "SELECT * FROM u") == [(5, "again")]  # same name, new table
    finally:
        reader.close()


def test_an_alter_reaches_the_tablets_the_writer_had_not_opened(writer: Writer, path: str) -> None:
    """A new writer process alters a table without touching its tablets otherwise: every
    tablet takes the new schema at the ALTER (a reader used to find them on the old one
    and fail on a renamed column)."""
    writer.sql(f"INSERT INTO t VALUES {values(KEYS, 'a')}")
    writer.close()
    second = Writer(path)
    try:
        second.sql("ALTER TABLE t ADD COLUMNS (w INT)")
        second.sql("ALTER TABLE t CHANGE v label STRING")
        with kudusql.connect(path, read_only=True) as reader:
            assert rows(reader, "SELECT label, count(*), count(w) FROM t GROUP BY 1") == [
                ("a", KEYS, 0)
            ]
    finally:
        second.close()


def _wal_of_slot(path: str, slot: int) -> str:
    with Database(path, read_only=True) as db:
        tablet_id = db.table("t").meta.tablets[slot].id
    return os.path.join(catalog.tablet_path(db.path, tablet_id), "wal")


@pytest.mark.parametrize("committed", [False, True])
def test_a_writer_killed_in_a_transaction_leaves_the_reader_consistent(
    writer: Writer, path: str, committed: bool
) -> None:
    """Killed while preparing its part of the third tablet (no COMMIT: nothing of the
    write), or right after the COMMIT, before that tablet's FINALIZE marker (all of
    it: that tablet's part applies on the commit log's word)."""
    writer.sql(f"INSERT INTO t VALUES {values(KEYS, 'old')}")
    reader = kudusql.connect(path, read_only=True)
    try:
        assert rows(reader, "SELECT v, count(*) FROM t GROUP BY v") == [("old", KEYS)]
        assert (
            writer.send(
                {"kill_at": {"path_contains": _wal_of_slot(path, 2), "skip": 1 if committed else 0}}
            )
            == "armed"
        )
        writer.killed_by(f"UPSERT INTO t VALUES {values(KEYS, 'new')}")
        expect = "new" if committed else "old"
        for _ in range(3):
            assert rows(reader, "SELECT v, count(*) FROM t GROUP BY v") == [(expect, KEYS)]
        # a new writer process aborts what the dead one began; the reader moves on
        second = Writer(path)
        try:
            second.sql(f"UPSERT INTO t VALUES {values(KEYS, 'later')}")
            assert rows(reader, "SELECT v, count(*) FROM t GROUP BY v") == [("later", KEYS)]
        finally:
            second.close()
    finally:
        reader.close()
