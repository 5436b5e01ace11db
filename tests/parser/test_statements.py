"""The typed statements turn into storage values: Schema, PartitionSchema, ALTER steps."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pytest

from kudusql.common.errors import NotSupportedError, ProgrammingError
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.parser import parse, parse_one
from kudusql.parser.statements import AlterTable, CreateTable, Explain, Query
from kudusql.storage.tables.alter import (
    AddColumn,
    AddRangePartition,
    AlterColumn,
    RenameColumn,
    RenameTable,
)
from kudusql.storage.tables.partition import HashDimension, RangeBounds, create_partitions


def _create(sql: str) -> CreateTable:
    stmt = parse_one(sql)
    assert isinstance(stmt, CreateTable)
    return stmt


def test_create_table_builds_schema_and_partitions() -> None:
    stmt = _create(
        "CREATE TABLE t (id BIGINT, ts TIMESTAMP, v STRING, PRIMARY KEY (id, ts)) "
        "PARTITION BY HASH (id) PARTITIONS 3, RANGE (ts) (PARTITION VALUES < '2024-01-01', "
        "PARTITION '2024-01-01' <= VALUES < '2025-01-01')"
    )
    schema = stmt.schema()
    assert schema.key_names == ["id", "ts"]
    assert schema.names == ["id", "ts", "v"]
    ps = stmt.partition_schema(schema)
    assert ps.hash_dimensions == (HashDimension(("id",), 3),)
    assert ps.range_columns == ("ts",)
    assert ps.range_bounds[1].lower == (datetime.datetime(2024, 1, 1),)
    assert len(create_partitions(ps, schema)) == 6
    assert stmt.warnings == ()


def test_hash_partitions_without_columns_use_the_whole_key() -> None:
    stmt = _create(
        "CREATE TABLE t (a INT, b STRING, PRIMARY KEY (a, b)) PARTITION BY HASH PARTITIONS 4"
    )
    assert stmt.partition_schema().hash_dimensions == (HashDimension(("a", "b"), 4),)


def test_split_rows_cut_the_range() -> None:
    stmt = _create(
        "CREATE TABLE t (a INT PRIMARY KEY) DISTRIBUTE BY RANGE (a) SPLIT ROWS ((10), (20))"
    )
    bounds = stmt.partition_schema().range_bounds
    assert [(b.lower, b.upper) for b in bounds] == [(None, (10,)), ((10,), (20,)), ((20,), None)]


def test_ctas_partitioning_is_typed_by_the_query_schema() -> None:
    stmt = _create(
        "CREATE TABLE t PRIMARY KEY (k) PARTITION BY RANGE (k) (PARTITION VALUES < 10.5) "
        "AS SELECT 1.0 AS k"
    )
    assert stmt.as_select is not None and stmt.columns == ()
    schema = Schema.build([ColumnSchema("k", DataType.parse("DECIMAL(5,2)"))], ["k"])
    assert stmt.partition_schema(schema).range_bounds[0].upper == (Decimal("10.50"),)


def test_one_tablet_warning() -> None:
    stmt = _create("CREATE TABLE t (a INT PRIMARY KEY)")
    assert len(stmt.warnings) == 1 and "single tablet" in stmt.warnings[0]
    assert stmt.partition_schema().hash_dimensions == ()


def test_alter_table_storage_steps_type_bounds_and_resolve_change() -> None:
    schema = Schema.build(
        [ColumnSchema("d", DataType.parse("DATE")), ColumnSchema("c", DataType.parse("INT32"))],
        ["d"],
    )
    stmt = parse_one(
        "ALTER TABLE t ADD RANGE PARTITION '2024-01-01' <= VALUES < '2024-02-01', "
        "CHANGE c c2 INT DEFAULT 3, RENAME TO db.t2, ADD COLUMNS (e STRING DEFAULT 'x')"
    )
    assert isinstance(stmt, AlterTable)
    steps = stmt.storage_steps(schema, rename=lambda n: f"{n.database}/{n.name}")
    assert steps == [
        AddRangePartition(RangeBounds((datetime.date(2024, 1, 1),), (datetime.date(2024, 2, 1),))),
        RenameColumn("c", "c2"),
        AlterColumn("c2", {"default": 3}),
        RenameTable("db/t2"),
        AddColumn(ColumnSchema("e", DataType.parse("STRING"), default="x")),
    ]


def test_change_column_type_is_not_supported() -> None:
    schema = Schema.build([ColumnSchema("k", DataType.parse("INT64"))], ["k"])
    stmt = parse_one("ALTER TABLE t CHANGE k k STRING")
    assert isinstance(stmt, AlterTable)
    with pytest.raises(NotSupportedError, match="cannot change the type"):
        stmt.storage_steps(schema)


def test_script_keeps_statement_text_and_explain_wraps() -> None:
    stmts = parse("SELECT 1 ;\n  EXPLAIN SELECT * FROM t -- done\n")
    assert [s.text for s in stmts] == ["SELECT 1", "EXPLAIN SELECT * FROM t"]
    assert isinstance(stmts[1], Explain) and isinstance(stmts[1].statement, Query)


def test_errors_are_programming_errors_without_traceback_text() -> None:
    with pytest.raises(ProgrammingError) as info:
        parse("SELECT 1;\nSELECT * FROM t WHERE a = = 1")
    message = str(info.value)
    assert message.startswith("syntax error at line 2, column 27")
    assert "Traceback" not in message and "sqlglot" not in message
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_parse_one_needs_exactly_one() -> None:
    with pytest.raises(ProgrammingError, match="found 2"):
        parse_one("SELECT 1; SELECT 2")
    with pytest.raises(ProgrammingError, match="found 0"):
        parse_one("-- nothing")


def test_missing_operand_is_said_in_sql_terms() -> None:
    """Pinned: sqlglot's "Required keyword: 'this' missing for <class ...EQ>" leaked."""
    with pytest.raises(ProgrammingError) as e:
        parse("SELECT * FROM t WHERE = 1")
    assert "the left operand of = is missing" in str(e.value)
    assert "sqlglot" not in str(e.value)
