"""Impala's output shapes for Kudu tables beyond what the golden files can say: result
types of SHOW TABLE STATS, the empty cases of SHOW [RANGE] PARTITIONS, range bounds of
every kind through SHOW CREATE TABLE and back, Kudu's text of awkward values, and the
golden runner's own type letters."""

from __future__ import annotations

import datetime
from typing import Any

import pyarrow as pa
import pytest

import kudusql
from kudusql.common.types import DataType, TypeKind
from kudusql.storage.tables.range_format import format_range, kudu_value
from tests.sql.slt import check_types, query_options


@pytest.fixture
def conn() -> Any:
    with kudusql.connect(":memory:", maintenance=False, sync=False) as c:
        yield c


def _arrow(c: Any, sql: str) -> pa.Table:
    cur = c.cursor()
    cur.execute(sql)
    return cur.fetch_arrow_table()


def test_show_table_stats_numbers_are_integers(conn: Any) -> None:
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY) PARTITION BY HASH (id) PARTITIONS 2")
    conn.execute("INSERT INTO t VALUES (1), (2), (3)")
    conn.execute("COMPUTE STATS t")
    t = _arrow(conn, "SHOW TABLE STATS t")
    # Tablet ids are text (a cluster's are 32 hex digits, as Kudu's).
    assert t.schema.field("partition").type == t.schema.field("tablet_id").type == pa.string()
    for name in ("rows", "memrowset_rows", "diskrowsets", "disk_bytes"):
        assert t.schema.field(name).type == pa.int64()
    assert sum(t.column("rows").to_pylist()) == 3


def test_describe_types_its_columns(conn: Any) -> None:
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v STRING BLOCK_SIZE 64)")
    t = _arrow(conn, "DESCRIBE t")
    types = {f.name: f.type for f in t.schema}
    assert types["primary_key"] == types["key_unique"] == types["nullable"] == pa.bool_()
    assert types["block_size"] == pa.int32()
    assert t.column("block_size").to_pylist() == [0, 64]


def test_no_range_left_and_no_tablet_left(conn: Any) -> None:
    conn.execute(
        "CREATE TABLE t (id INT PRIMARY KEY) PARTITION BY RANGE (id) (PARTITION VALUES < 5)"
    )
    conn.execute("ALTER TABLE t DROP RANGE PARTITION VALUES < 5")
    assert conn.execute("SHOW RANGE PARTITIONS t").fetchall() == [("",)]
    assert conn.execute("SHOW PARTITIONS t").fetchall() == [("N/A", "N/A", "N/A", -1)]


DATED = [
    "PARTITION VALUES < ('b', DATE '2020-01-01', TIMESTAMP '2020-01-01 00:00:00.25')",
    "PARTITION ('b', DATE '2020-01-01', TIMESTAMP '2020-01-01 00:00:00.25') <= VALUES "
    "< ('c', DATE '1999-12-31')",
    "PARTITION VALUE = ('it''s', DATE '2021-06-01', TIMESTAMP '2021-06-01 12:00:00')",
    # ('y') <= includes ('y', <the smallest date>, ...), a day no DATE literal writes
    "PARTITION ('x', DATE '2020-01-01', TIMESTAMP '2020-01-01 00:00:00') < VALUES <= ('y')",
    "PARTITION VALUES >= ('z')",
]
NUMBERED = [
    "PARTITION VALUES < ('b', -5)",
    "PARTITION ('b', -5) <= VALUES < ('c')",
    "PARTITION VALUE = ('it''s', 7)",
    "PARTITION ('x', 1) < VALUES <= ('y', 10)",
    "PARTITION 'z' < VALUES",
]


@pytest.mark.parametrize(
    ("columns", "bounds"),
    [("s STRING, d DATE, ts TIMESTAMP", DATED), ("s STRING, n INT, m BIGINT", NUMBERED)],
    ids=["declared", "canonical"],
)
def test_show_create_table_recreates_every_kind_of_range(
    conn: Any, columns: str, bounds: list[str]
) -> None:
    names = ", ".join(c.split()[0] for c in columns.split(", "))
    conn.execute(
        f"CREATE TABLE t ({columns}, PRIMARY KEY ({names})) "
        f"PARTITION BY HASH (s) PARTITIONS 2, RANGE ({names}) ({', '.join(bounds)})"
    )
    ranges = conn.execute("SHOW RANGE PARTITIONS t").fetchall()
    partitions = conn.execute("SHOW PARTITIONS t").fetchall()
    ddl = conn.execute("SHOW CREATE TABLE t").fetchall()[0][0]
    conn.execute("DROP TABLE t")
    conn.execute(ddl)
    assert conn.execute("SHOW RANGE PARTITIONS t").fetchall() == ranges
    assert conn.execute("SHOW PARTITIONS t").fetchall() == partitions
    assert conn.execute("SHOW CREATE TABLE t").fetchall()[0][0] == ddl
    if bounds is NUMBERED:
        assert "PARTITION ('b', -5) <= VALUES < 'c'," in ddl  # trailing minimums left out
        assert ranges[2] == ('VALUE = ("it\\\'s", 7, -9223372036854775808)',)
    else:
        assert ranges[2] == ('VALUE = ("it\\\'s", 2021-06-01, 2021-06-01T12:00:00.000000Z)',)


def test_kudu_value_text() -> None:
    binary = DataType(TypeKind.BINARY)
    assert kudu_value(binary, b"ab\x01\n") == '"ab\\x01\\n"'
    assert kudu_value(binary, b"\x01\xff\x02") == "[1, -1, 2]"  # mostly not ASCII
    date = DataType(TypeKind.DATE)
    assert kudu_value(date, 0) == "1970-01-01"
    assert kudu_value(date, -(2**31)) == str(-(2**31))  # beyond the calendar: the day number
    ts = DataType(TypeKind.TIMESTAMP)
    assert kudu_value(ts, -1) == "1969-12-31T23:59:59.999999Z"
    assert kudu_value(DataType(TypeKind.STRING), "a\tb'\"\x01") == '"a\\tb\\\'\\"\\u0001"'


def test_format_range_forms() -> None:
    int32 = [DataType(TypeKind.INT32)]
    key = (0x80000005).to_bytes(4, "big")
    nxt = (0x80000006).to_bytes(4, "big")
    far = (0x80000009).to_bytes(4, "big")
    assert format_range(b"", b"", int32) == "UNBOUNDED"
    assert format_range(key, nxt, int32) == "VALUE = 5"
    assert format_range(key, far, int32) == "5 <= VALUES < 9"
    assert format_range(key, b"", int32) == "VALUES >= 5"
    assert format_range(b"", key, int32) == "VALUES < 5"


def test_golden_type_letters() -> None:
    assert query_options("TIB rowsort") == ("TIB", True, None)
    assert query_options("rowsort") == (None, True, None)
    assert query_options("T label RANGE (a,b)") == ("T", False, ["RANGE (a,b)"])
    check_types("x", "ITBRD", [(1, "a", True, 1.5, datetime.date(2020, 1, 1)), (None,) * 5])
    with pytest.raises(AssertionError, match="column 1 is bool"):
        check_types("x", "I", [(True,)])
    with pytest.raises(AssertionError, match="column 2 is str"):
        check_types("x", "TI", [("a", "1")])
    with pytest.raises(AssertionError, match="2 columns, types say 1"):
        check_types("x", "T", [("a", "b")])
