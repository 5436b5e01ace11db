"""SQL names are case-insensitive, quoted or not, and fold to lower case (Impala's rule,
``kudusql/parser/names.py``): every statement kind agrees, tables made outside SQL with
capitals in their names are reachable, SHOW CREATE TABLE round-trips awkward names, and
the point-lookup fast path answers exactly as the general path."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

import kudusql
from kudusql.common.errors import ProgrammingError
from kudusql.common.row_operations import WriteOp
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType, TypeKind
from kudusql.parser import DIALECT
from kudusql.storage.tables.partition import HashDimension, PartitionSchema


@pytest.fixture
def conn() -> Iterator[kudusql.Connection]:
    c = kudusql.connect(":memory:", maintenance=False, sync=False)
    yield c
    c.close()


def result(c: kudusql.Connection, sql: str, params: Any = None) -> tuple[list[Any], list[str]]:
    cur = c.cursor().execute(sql, params)
    assert cur.description is not None
    return cur.fetchall(), [d[0] for d in cur.description]


def fast(c: kudusql.Connection, sql: str, params: Any = None) -> bool:
    """The point-lookup fast path answers ``sql``."""
    entry = c.session.statements.get(sql)
    return (
        entry is not None and entry[1] is not None and entry[1].run(c.session, params) is not None
    )


def _client_table(c: kudusql.Connection) -> None:
    """A table as the client API or Spark makes it: names with capitals, stored as given."""
    schema = Schema.build(
        [
            ColumnSchema("UserId", DataType(TypeKind.INT64), nullable=False),
            ColumnSchema("Région", DataType(TypeKind.STRING)),
            ColumnSchema("score", DataType(TypeKind.INT32)),
        ],
        ["UserId"],
    )
    ps = PartitionSchema.create(schema, [HashDimension(("UserId",), 2, 0)])
    c.session.db.create_table("Events", schema, ps)


def test_a_table_made_outside_sql_answers_to_any_spelling(conn: kudusql.Connection) -> None:
    _client_table(conn)
    cur = conn.cursor()
    cur.execute("INSERT INTO events VALUES (1, 'nord', 10), (2, 'sud', 20)")
    cur.execute("INSERT INTO EVENTS (`USERID`, `RÉGION`) VALUES (3, ?)", ("est",))
    cur.executemany("UPSERT INTO Events (userid, score) VALUES (?, ?)", [(4, 40), (5, 50)])
    rows, names = result(conn, "SELECT * FROM `events` WHERE `région` IS NOT NULL ORDER BY 1")
    # Results label columns by their folded names, as Impala shows such a table.
    assert names == ["userid", "région", "score"]
    assert rows == [(1, "nord", 10), (2, "sud", 20), (3, "est", None)]
    assert result(conn, "SELECT sum(SCORE) FROM events WHERE USERID IN (1, 2, 5)")[0] == [(80,)]
    # The pushed predicates name the stored columns (they prune tablets).
    plan = "\n".join(r[0] for r in result(conn, "EXPLAIN SELECT * FROM events WHERE userid = 3")[0])
    assert "UserId = 3" in plan and "tablets: 1 of 2" in plan
    since = cur.execute("SELECT 1").timestamp
    cur.execute("UPDATE events SET `Score` = userid * 100 WHERE `RÉGION` = ?", ("sud",))
    assert cur.rowcount == 1
    changes = result(conn, f"SELECT * FROM table_changes('EVENTS', {since}) WHERE RÉGION = 'sud'")
    assert changes == (
        [(2, "sud", 200, "update", False)],
        ["userid", "région", "score", "change_type", "is_deleted"],
    )
    cur.execute("DELETE FROM events WHERE userid = 1")
    assert cur.rowcount == 1
    assert result(conn, "SELECT userid, score FROM events ORDER BY userid")[0] == [
        (2, 200),
        (3, None),
        (4, 40),
        (5, 50),
    ]
    # DESCRIBE shows the stored names; the storage table keeps them.
    assert [r[0] for r in result(conn, "DESCRIBE events")[0]] == ["UserId", "Région", "score"]
    assert conn.session.db.table("Events").schema.names == ["UserId", "Région", "score"]
    cur.execute("ALTER TABLE events CHANGE `RÉGION` region STRING")
    assert [r[0] for r in result(conn, "DESCRIBE events")[0]] == ["UserId", "region", "score"]
    with pytest.raises(ProgrammingError, match="already exists"):
        cur.execute("ALTER TABLE events ADD COLUMNS (USERID INT)")
    with pytest.raises(ProgrammingError, match="already exists"):
        cur.execute("CREATE TABLE EVENTS (k INT PRIMARY KEY)")


def test_the_fast_path_matches_the_general_path_in_every_spelling(
    conn: kudusql.Connection,
) -> None:
    _client_table(conn)
    conn.execute("CREATE TABLE q (`K` INT PRIMARY KEY, `Val` STRING)")
    conn.execute("INSERT INTO events VALUES (7, 'ouest', 70)")
    conn.execute("INSERT INTO q VALUES (1, 'one')")
    cases: list[tuple[str, Any]] = [
        ("SELECT * FROM events WHERE userid = 7", None),
        ("SELECT * FROM `EVENTS` WHERE `USERID` = ?", (7,)),
        ("SELECT Score, `région` AS `Where` FROM Events WHERE UserId = 7", None),
        ("SELECT e.SCORE FROM events E WHERE e.USERID = :k", {"k": 7}),
        ("SELECT events.score FROM EVENTS WHERE EVENTS.userid = 7", None),
        ("SELECT `VAL`, val AS `V` FROM `Q` WHERE k = 1", None),
    ]
    for sql, params in cases:
        assert fast(conn, sql, params), sql
        got = result(conn, sql, params)
        general = sql.replace(" WHERE ", " WHERE 1 = 1 AND ")
        assert not fast(conn, general, params)
        assert got == result(conn, general, params), sql
    assert result(conn, "SELECT `VAL`, val AS `V` FROM `Q` WHERE k = 1") == (
        [("one", "one")],
        ["val", "v"],
    )
    # A table its alias hides is not a name for its columns, on either path.
    for sql in ("SELECT events.score FROM events e WHERE e.userid = 7",):
        assert not fast(conn, sql)
        with pytest.raises(ProgrammingError):
            conn.execute(sql)


def test_columns_equal_ignoring_case_are_refused(conn: kudusql.Connection) -> None:
    """Kudu allows columns "A" and "a"; SQL cannot tell them apart, so it says so
    instead of reading one for the other."""
    schema = Schema.build(
        [
            ColumnSchema("k", DataType(TypeKind.INT32), nullable=False),
            ColumnSchema("A", DataType(TypeKind.INT32)),
            ColumnSchema("a", DataType(TypeKind.INT32)),
        ],
        ["k"],
    )
    conn.session.db.create_table("twins", schema, PartitionSchema.create(schema))
    conn.session.db.table("twins").write(
        pa.table({"k": pa.array([1], pa.int32()), "A": [10], "a": [20]}), WriteOp.INSERT
    )
    for sql in (
        "SELECT * FROM twins",
        "SELECT a FROM twins",
        "SELECT * FROM twins WHERE k = 1",
        "UPDATE twins SET a = 1",
    ):
        with pytest.raises(ProgrammingError, match="differ only in case"):
            conn.execute(sql)
    # Writing by the exact stored names still works (no query reads the table).
    conn.execute("INSERT INTO twins (k, `a`) VALUES (2, 5)")
    assert conn.session.db.table("twins").scan(["a"]).read_all().column("a").to_pylist() == [
        20,
        5,
    ]


def test_the_plan_cache_keeps_answering_the_same(conn: kudusql.Connection) -> None:
    conn.execute("CREATE TABLE `T` (`Id` INT PRIMARY KEY, `Name` STRING)")
    conn.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    sql = "SELECT `NAME` FROM `t` WHERE `ID` >= 1 ORDER BY ID"
    first = result(conn, sql)
    assert sql in {k for k, _ in conn.session.plans._items}
    assert result(conn, sql) == first == ([("a",), ("b",)], ["name"])
    conn.execute("ALTER TABLE T CHANGE `NAME` `Label` STRING")
    with pytest.raises(ProgrammingError, match="name"):
        conn.execute(sql)


# -- SHOW CREATE TABLE round trip -----------------------------------------------------------

_KEYWORDS = sorted(
    {k.lower() for k in DIALECT.tokenizer_class.KEYWORDS if re.fullmatch(r"[A-Za-z_]\w*", k)}
    | {w.lower() for w in DIALECT.generator_class.RESERVED_KEYWORDS}
)

AWKWARD = [
    ("mixed", "`MixedCase`", ["`Id`", "`camelCase`"]),
    ("reserved", "`select`", ["`from`", "`order`", "`group`", "`table`", "`date`"]),
    ("spaces", "`my table`", ["`the key`", "` lead`", "`trail `", "`tab\there`"]),
    ("quotes", "`it``s`", ['`say "hi"`', "`'single'`", "`back``tick`"]),
    ("internal", "__kudusql_scan_0", ["__kudusql_rows", "__kudusql_scan_1", "__kudusql_values"]),
    ("unicode", "`Überstunden`", ["`Ärger`", "`日本`", "`1st`", "`a-b`"]),
]


def _definition(c: kudusql.Connection, table: str) -> tuple[Any, ...]:
    """What a table is: schema (names, types, key, attributes), partitioning, and how
    DESCRIBE and SHOW CREATE TABLE show it."""
    t = c.session.table(_parse_name(table))
    cols = [
        (col.name, col.type, col.nullable, col.default, col.comment) for col in t.schema.columns
    ]
    ps = t.partition_schema
    return (
        t.name,
        cols,
        t.schema.key_names,
        [(d.columns, d.num_buckets, d.seed) for d in ps.hash_dimensions],
        ps.range_columns,
        [str(b) for b in ps.range_bounds],
        result(c, f"DESCRIBE {table}")[0],
        result(c, f"SHOW CREATE TABLE {table}")[0],
    )


def _parse_name(sql_name: str) -> Any:
    from kudusql.parser import parse_one
    from kudusql.parser.statements import ShowCreateTable

    s = parse_one(f"SHOW CREATE TABLE {sql_name}")
    assert isinstance(s, ShowCreateTable)
    return s.table


@pytest.mark.parametrize(("label", "table", "columns"), AWKWARD, ids=[a[0] for a in AWKWARD])
def test_show_create_table_recreates_the_table(
    conn: kudusql.Connection, label: str, table: str, columns: list[str]
) -> None:
    key, *rest = columns
    defs = [f"{key} BIGINT PRIMARY KEY"]
    defs += [f"{c} STRING DEFAULT 'x' COMMENT 'col {i}'" for i, c in enumerate(rest)]
    conn.execute(
        f"CREATE TABLE {table} ({', '.join(defs)}) PARTITION BY HASH ({key}) PARTITIONS 2, "
        f"RANGE ({key}) (PARTITION VALUES < 0, PARTITION 0 <= VALUES) COMMENT 'awkward'"
    )
    conn.execute(f"INSERT INTO {table} ({key}) VALUES (1), (-1)")
    before = _definition(conn, table)
    ddl = before[-1][0][0]
    conn.execute(f"DROP TABLE {table}")
    conn.execute(ddl)
    assert _definition(conn, table) == before
    conn.execute(f"INSERT INTO {table} ({key}) VALUES (5)")
    assert result(conn, f"SELECT count(*), count({rest[0]}) FROM {table}")[0] == [(1, 1)]


@pytest.mark.parametrize("part", range(2))
def test_every_keyword_round_trips_as_a_name(conn: kudusql.Connection, part: int) -> None:
    """A column named after any keyword of the dialect is quoted where it must be (the
    keywords in two tables: a table has at most 300 columns)."""
    names = [w for w in _KEYWORDS[part::2] if w != "k"]
    cols = ", ".join(f"`{w}` INT" for w in names)
    conn.execute(f"CREATE TABLE kw (k INT PRIMARY KEY, {cols}) PARTITION BY HASH (k) PARTITIONS 2")
    ddl = result(conn, "SHOW CREATE TABLE kw")[0][0][0]
    before = conn.session.table(_parse_name("kw")).schema
    conn.execute("DROP TABLE kw")
    conn.execute(ddl)
    after = conn.session.table(_parse_name("kw")).schema
    assert [(c.name, c.type) for c in after.columns] == [(c.name, c.type) for c in before.columns]
    # and each name, as SHOW CREATE TABLE prints it, reads the column back in a query
    printed = [line.strip().removesuffix(",") for line in ddl.splitlines()[2:]]
    attrs = " INT NULL ENCODING AUTO_ENCODING COMPRESSION DEFAULT_COMPRESSION"
    printed = [line.removesuffix(attrs) for line in printed if line.endswith(attrs)]
    assert len(printed) == len(names)
    conn.execute("INSERT INTO kw (k) VALUES (1)")
    assert result(conn, f"SELECT {', '.join(printed)} FROM kw")[1] == names


def test_a_database_name_round_trips(conn: kudusql.Connection) -> None:
    conn.execute("CREATE DATABASE `My Db`")
    conn.execute("CREATE TABLE `MY DB`.`T 1` (k INT PRIMARY KEY)")
    ddl = result(conn, "SHOW CREATE TABLE `my db`.`t 1`")[0][0][0]
    assert ddl.startswith("CREATE TABLE `my db`.`t 1` (")
    conn.execute("DROP TABLE `My Db`.`T 1`")
    conn.execute(ddl)
    conn.execute("USE `MY DB`")
    assert result(conn, "SHOW TABLES")[0] == [("t 1",)]
