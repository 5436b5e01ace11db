"""Connection.register: SQL reads Python-side Arrow tables and DataFrames by name, before
any table of that name, and never writes them."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import kudusql
from kudusql.common.errors import ProgrammingError
from kudusql.dbapi.connection import Connection, Cursor


@pytest.fixture
def conn() -> Iterator[Connection]:
    with kudusql.connect(":memory:", maintenance=False) as c:
        c.execute(
            "CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE, s STRING) "
            "PARTITION BY HASH (id) PARTITIONS 2"
        )
        c.execute("INSERT INTO t VALUES (1, 1.0, 'one'), (2, 2.0, 'two'), (3, 3.0, 'three')")
        yield c


def rows(c: Connection, sql: str) -> list[tuple[object, ...]]:
    return c.execute(sql).fetchall()


def test_a_registered_arrow_table_is_read_by_any_spelling_of_its_name(conn: Connection) -> None:
    data = pa.table({"Id": [2, 3, 4], "Label": ["b", "c", "d"]})
    assert conn.register("MyData", data) is conn
    assert rows(conn, "SELECT id, label FROM mydata ORDER BY id") == [(2, "b"), (3, "c"), (4, "d")]
    assert rows(conn, "SELECT `LABEL` FROM `MYDATA` WHERE `ID` = 4") == [("d",)]
    cur = conn.execute("SELECT * FROM MyData LIMIT 1")
    assert [d[0] for d in cur.description] == ["id", "label"]  # folded, as a table's
    # Joined with a Kudu table, both ways round, and in a subquery.
    assert rows(conn, "SELECT t.s, m.label FROM t JOIN MyData m ON t.id = m.id ORDER BY t.id") == [
        ("two", "b"),
        ("three", "c"),
    ]
    assert rows(conn, "SELECT count(*) FROM t WHERE id IN (SELECT id FROM mydata)") == [(2,)]
    # A CTE of the same name comes first, as in any query.
    assert rows(conn, "WITH mydata AS (SELECT 7 AS id) SELECT id FROM mydata") == [(7,)]


def test_insert_ctas_update_and_delete_read_a_registered_frame(conn: Connection) -> None:
    frame = pd.DataFrame({"id": [10, 11], "v": [10.5, 11.5], "s": ["ten", "eleven"]})
    conn.register("df", frame)
    c = conn.execute("INSERT INTO t SELECT * FROM df")
    assert c.rowcount == 2 and c.warnings == []
    assert rows(conn, "SELECT s FROM t WHERE id >= 10 ORDER BY id") == [("ten",), ("eleven",)]
    conn.execute(
        "CREATE TABLE copy PRIMARY KEY (id) PARTITION BY HASH (id) PARTITIONS 2 "
        "AS SELECT id, s FROM df"
    )
    assert rows(conn, "SELECT id, s FROM copy ORDER BY id") == [(10, "ten"), (11, "eleven")]
    conn.register("fix", pa.table({"id": [1, 2], "s": ["uno", "dos"]}))
    conn.execute("UPDATE t SET s = fix.s FROM t JOIN fix ON t.id = fix.id")
    assert rows(conn, "SELECT s FROM t WHERE id < 3 ORDER BY id") == [("uno",), ("dos",)]
    conn.execute("DELETE FROM t WHERE id IN (SELECT id FROM df)")
    assert rows(conn, "SELECT count(*) FROM t") == [(3,)]


def test_pandas_nan_stays_nan_and_missing_values_are_null(conn: Connection) -> None:
    frame = pd.DataFrame(
        {
            "id": [1, 2, 3],
            "f": [1.5, np.nan, None],  # a float64 column: pandas stores None as NaN too
            "s": ["a", None, "c"],
            "ts": pd.to_datetime(["2024-01-01", None, "2024-01-03"]),
        },
        index=[7, 8, 9],  # the index is not a column (as in DuckDB)
    )
    conn.register("df", frame)
    got = rows(conn, "SELECT id, f IS NULL, isnan(f), s IS NULL, ts IS NULL FROM df ORDER BY id")
    assert got == [
        (1, False, False, False, False),
        (2, False, True, True, True),
        (3, False, True, False, False),
    ]
    assert [d[0] for d in conn.execute("SELECT * FROM df").description] == ["id", "f", "s", "ts"]
    # NaN reaches a DOUBLE column as NaN, as a bound np.float64('nan') does.
    conn.execute("INSERT INTO t SELECT id + 100, f, s FROM df")
    assert [math.isnan(v) for (v,) in rows(conn, "SELECT v FROM t WHERE id > 101 ORDER BY id")] == [
        True,
        True,
    ]
    # A nullable dtype is how a frame says NULL: convert_dtypes() turns NaN into <NA>.
    conn.register("df", frame.convert_dtypes())
    assert rows(conn, "SELECT id FROM df WHERE f IS NULL ORDER BY id") == [(2,), (3,)]


def test_polars_frames_readers_and_capsule_objects(conn: Connection) -> None:
    conn.register("p", pl.DataFrame({"id": [1, 2, None], "x": [0.5, float("nan"), None]}))
    assert rows(conn, "SELECT id, x IS NULL, isnan(x) FROM p ORDER BY id NULLS LAST") == [
        (1, False, False),
        (2, False, True),
        (None, True, None),
    ]
    conn.register("lazy", pl.LazyFrame({"n": [1, 2, 3]}).filter(pl.col("n") > 1))
    assert rows(conn, "SELECT sum(n) FROM lazy") == [(5,)]

    produced = []

    def batches() -> Iterator[pa.RecordBatch]:
        for i in range(3):
            produced.append(i)
            yield pa.record_batch({"k": [i * 10, i * 10 + 1]})

    reader = pa.RecordBatchReader.from_batches(pa.schema({"k": pa.int64()}), batches())
    conn.register("stream", reader)
    assert produced == [0, 1, 2]  # read once, at register
    for _ in range(2):  # and read by every query after
        assert rows(conn, "SELECT count(*), max(k) FROM stream") == [(6, 21)]
    # A kudusql result is an Arrow stream too.
    conn.register("res", conn.execute("SELECT id, s FROM t WHERE id > 1"))
    assert rows(conn, "SELECT s FROM res ORDER BY id") == [("two",), ("three",)]
    conn.register("one_batch", pa.record_batch({"a": [1]}))
    assert rows(conn, "SELECT a FROM one_batch") == [(1,)]


def test_a_registered_name_wins_over_a_table_and_says_so(conn: Connection) -> None:
    lookup = "SELECT s FROM t WHERE id = 1"  # a point lookup, cached as one
    assert rows(conn, lookup) == [("one",)]
    assert rows(conn, "SELECT count(*) FROM t") == [(3,)]  # a cached plan
    conn.register("T", pa.table({"id": [1], "s": ["registered"]}))
    c = conn.execute(lookup)
    assert c.fetchall() == [("registered",)]
    assert c.warnings == [
        "'T' names both an object registered on this connection and a table; the "
        "registered object was read (write default.T for the table)"
    ]
    assert rows(conn, "SELECT count(*) FROM t") == [(1,)]
    c = conn.execute("SELECT s FROM default.t WHERE id = 1")  # qualified: the table
    assert c.fetchall() == [("one",)] and c.warnings == []
    conn.execute("INSERT INTO default.t VALUES (4, 4.0, 'four')")
    assert rows(conn, "SELECT count(*) FROM default.t") == [(4,)]
    conn.unregister("t")
    c = conn.execute(lookup)
    assert c.fetchall() == [("one",)] and c.warnings == []
    conn.unregister("never_registered")  # nothing to do, as in DuckDB


def test_describe_explain_and_show_tables(conn: Connection) -> None:
    conn.register("Df", pd.DataFrame({"ID": [1], "Name": ["x"], "w": [0.5]}))
    assert rows(conn, "DESCRIBE df") == [
        ("id", "bigint", "", False, None, True, "", "", "", 0),
        ("name", "varchar", "", False, None, True, "", "", "", 0),
        ("w", "double", "", False, None, True, "", "", "", 0),
    ]
    assert rows(conn, "SHOW TABLES") == [("t",)]  # the database's tables only
    plan = [r[0] for r in rows(conn, "EXPLAIN SELECT * FROM t JOIN df ON t.id = df.id")]
    assert "REGISTERED Df AS df (an object registered on this connection)" in plan
    assert any(line.startswith("SCAN t AS t") for line in plan)


def test_error_messages(conn: Connection) -> None:
    conn.register("df", pa.table({"id": [1]}))
    read_only = (
        "'df' is an object registered on this connection, not a table: queries can read "
        "it, but it cannot be written, altered, dropped or replaced by a table (unregister "
        "it first, or write default.df for a table of that name)"
    )
    for sql in (
        "INSERT INTO df VALUES (2)",
        "INSERT INTO df SELECT 2",
        "UPSERT INTO DF VALUES (2)",
        "UPDATE df SET id = 3",
        "DELETE FROM df",
        "DROP TABLE df",
        "DROP TABLE IF EXISTS df",
        "ALTER TABLE df ADD COLUMNS (x INT)",
        "CREATE TABLE df (k INT PRIMARY KEY) PARTITION BY HASH (k) PARTITIONS 2",
        "ALTER TABLE t RENAME TO df",
        "SHOW PARTITIONS df",
    ):
        with pytest.raises(ProgrammingError) as e:
            conn.execute(sql)
        assert str(e.value) == read_only, sql
    with pytest.raises(ProgrammingError) as e:
        conn.execute("SELECT * FROM df FOR SYSTEM_TIME AS OF 1")
    assert "'df' is an object registered on this connection: it has no history" in str(e.value)
    with pytest.raises(ProgrammingError) as e:
        conn.execute("SELECT nope FROM df")
    assert "__kudusql" not in str(e.value) and '"nope" not found' in str(e.value)

    def refused(name: object, obj: object) -> str:
        with pytest.raises(ProgrammingError) as e:
            conn.register(name, obj)  # type: ignore[arg-type]
        return str(e.value)

    assert refused("x", [1, 2]) == (
        "cannot register a list: register takes a pyarrow Table, RecordBatch or "
        "RecordBatchReader, a pandas or polars DataFrame, or an object with "
        "__arrow_c_stream__"
    )
    assert refused("db.x", pa.table({"a": [1]})) == (
        "a registered name may not contain '.' ('db.x'): it is not in a database"
    )
    assert refused("", pa.table({"a": [1]})) == (
        "register needs a name (a non-empty string), not ''"
    )
    assert refused("x", pa.table({"a": [1], "A": [2]})) == (
        "cannot register 'x': its columns 'a' and 'A' have the same name ignoring case "
        "(SQL names are case-insensitive)"
    )
    assert refused("__kudusql_scan_0", pa.table({"a": [1]})) == (
        "'__kudusql_scan_0': names starting with __kudusql_ are reserved"
    )
    c = conn.cursor()
    c.close()
    conn.close()
    with pytest.raises(kudusql.InterfaceError):
        conn.register("y", pa.table({"a": [1]}))
    assert isinstance(c, Cursor)
