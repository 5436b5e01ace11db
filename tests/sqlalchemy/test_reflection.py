"""Reflection: tables, columns with their types, nullability and defaults, the key in key
order, partitioning and comments, databases as schemas; and a Core -> reflect -> create
round trip that recreates the same table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import exc, inspect

from kudusql.sqlalchemy import BINARY, STRING, TINYINT

ALL_TYPES = r"""
CREATE TABLE every (
    k2 STRING,
    k1 INT,
    b BOOLEAN NOT NULL DEFAULT true,
    i8 TINYINT DEFAULT -3,
    i16 SMALLINT,
    i32 INT COMMENT 'an int',
    i64 BIGINT DEFAULT 9000000000,
    f FLOAT,
    d DOUBLE DEFAULT 2.5,
    dec DECIMAL(12,3) DEFAULT 1.5,
    s STRING DEFAULT 'it\'s a \\ back',
    empty STRING DEFAULT '',
    vc VARCHAR(20) NOT NULL,
    bin BINARY DEFAULT X'00ff',
    dt DATE DEFAULT '2024-02-29',
    ts TIMESTAMP DEFAULT '2024-01-31 12:00:00.5',
    PRIMARY KEY (k2, k1)
)
PARTITION BY HASH (k1) PARTITIONS 2
COMMENT 'all of them'
"""


def _columns(engine: sa.Engine, table: str, schema: str | None = None) -> dict[str, Any]:
    return {c["name"]: c for c in inspect(engine).get_columns(table, schema=schema)}


def test_every_kudu_type_maps_back(engine: sa.Engine, sql: Any) -> None:
    sql(ALL_TYPES)
    cols = _columns(engine, "every")
    assert list(cols) == [
        "k2", "k1", "b", "i8", "i16", "i32", "i64", "f", "d", "dec", "s", "empty", "vc",
        "bin", "dt", "ts",
    ]  # fmt: skip
    t = {n: c["type"] for n, c in cols.items()}
    assert isinstance(t["k2"], STRING) and t["k2"].length is None
    assert type(t["k1"]) is sa.INTEGER
    assert type(t["b"]) is sa.BOOLEAN
    assert isinstance(t["i8"], TINYINT) and isinstance(t["i8"], sa.SmallInteger)
    assert type(t["i16"]) is sa.SMALLINT
    assert type(t["i64"]) is sa.BIGINT
    assert type(t["f"]) is sa.REAL and isinstance(t["f"], sa.Float)
    assert type(t["d"]) is sa.DOUBLE
    assert type(t["dec"]) is sa.DECIMAL and (t["dec"].precision, t["dec"].scale) == (12, 3)
    assert type(t["vc"]) is sa.VARCHAR and t["vc"].length == 20
    assert isinstance(t["bin"], BINARY) and isinstance(t["bin"], sa.LargeBinary)
    assert type(t["dt"]) is sa.DATE
    assert type(t["ts"]) is sa.TIMESTAMP
    nullable = {n for n, c in cols.items() if c["nullable"]}
    assert nullable == set(cols) - {"k2", "k1", "b", "vc"}
    assert cols["i32"]["comment"] == "an int" and cols["i16"]["comment"] is None
    assert not any(c["autoincrement"] for c in cols.values())


def test_defaults_are_kudusql_literals(engine: sa.Engine, sql: Any) -> None:
    """Each reflected default is SQL that gives the same value back (an empty string is
    a default, unlike no default)."""
    sql(ALL_TYPES)
    cols = _columns(engine, "every")
    defaults = {n: c["default"] for n, c in cols.items() if c["default"] is not None}
    assert set(defaults) == {"b", "i8", "i64", "d", "dec", "s", "empty", "bin", "dt", "ts"}
    exprs = ", ".join(f"{d} AS {n}" for n, d in defaults.items())
    got = dict(zip(defaults, sql(f"SELECT {exprs}")[0], strict=True))
    sql("INSERT INTO every (k2, k1, vc) VALUES ('k', 1, 'v')")
    names = ", ".join(defaults)
    stored = dict(zip(defaults, sql(f"SELECT {names} FROM every")[0], strict=True))
    assert got == stored
    assert stored["s"] == "it's a \\ back" and stored["empty"] == ""


def test_key_in_key_order_and_nothing_else(engine: sa.Engine, sql: Any) -> None:
    sql(ALL_TYPES)
    i = inspect(engine)
    assert i.get_pk_constraint("every") == {"constrained_columns": ["k2", "k1"], "name": None}
    assert i.get_indexes("every") == []
    assert i.get_foreign_keys("every") == []
    assert i.get_unique_constraints("every") == []
    assert i.get_check_constraints("every") == []
    assert i.get_view_names() == []
    assert i.get_table_comment("every") == {"text": "all of them"}
    assert i.get_table_options("every") == {"kudusql_partition_by": "HASH (k1) PARTITIONS 2"}


def test_non_unique_key_ends_with_the_hidden_counter(engine: sa.Engine, sql: Any) -> None:
    sql("CREATE TABLE nu (a INT NON UNIQUE PRIMARY KEY, v STRING)")
    cols = inspect(engine).get_columns("nu")
    assert [c["name"] for c in cols] == ["a", "auto_incrementing_id", "v"]
    assert cols[1]["autoincrement"] is True and cols[1]["nullable"] is False
    assert type(cols[1]["type"]) is sa.BIGINT
    pk = inspect(engine).get_pk_constraint("nu")["constrained_columns"]
    assert pk == ["a", "auto_incrementing_id"]


def test_tables_schemas_and_missing_ones(engine: sa.Engine, sql: Any) -> None:
    sql("CREATE TABLE t1 (id INT PRIMARY KEY)")
    sql("CREATE DATABASE other")
    sql("CREATE TABLE other.t2 (id BIGINT PRIMARY KEY, v STRING)")
    i = inspect(engine)
    assert i.default_schema_name == "default"
    assert set(i.get_schema_names()) == {"default", "other"}
    assert i.get_table_names() == ["t1"]
    assert i.get_table_names(schema="default") == ["t1"]
    assert i.get_table_names(schema="other") == ["t2"]
    assert i.has_table("t1") and i.has_table("T1") and not i.has_table("t2")
    assert i.has_table("t2", schema="other") and not i.has_table("t1", schema="other")
    assert not i.has_table("t1", schema="nowhere")
    assert [c["name"] for c in i.get_columns("t2", schema="other")] == ["id", "v"]
    with pytest.raises(exc.NoSuchTableError):
        i.get_columns("nope")
    with pytest.raises(exc.NoSuchTableError):
        i.get_pk_constraint("t2")
    with pytest.raises(exc.NoSuchTableError):
        i.get_columns("t1", schema="nowhere")


def test_names_that_need_quotes(engine: sa.Engine, sql: Any) -> None:
    sql("CREATE TABLE `select` (`from` INT PRIMARY KEY, `a b` STRING)")
    i = inspect(engine)
    assert i.get_table_names() == ["select"]
    assert [c["name"] for c in i.get_columns("select")] == ["from", "a b"]
    t = sa.Table("select", sa.MetaData(), autoload_with=engine)
    with engine.begin() as c:
        c.execute(t.insert(), [{"from": 1, "a b": "x"}])
        assert c.execute(sa.select(t.c["a b"]).where(t.c["from"] == 1)).scalar_one() == "x"


RANGED = """
CREATE TABLE ranged (
    id BIGINT,
    ts TIMESTAMP,
    v STRING ENCODING DICT_ENCODING COMPRESSION LZ4,
    PRIMARY KEY (id, ts)
)
PARTITION BY HASH (id) PARTITIONS 3, RANGE (ts) (
    PARTITION '2024-01-01' <= VALUES < '2025-01-01',
    PARTITION '2025-01-01' <= VALUES < '2026-01-01'
)
COMMENT 'ranges'
TBLPROPERTIES ('owner.team' = 'data')
"""


def _show_create(engine: sa.Engine, name: str) -> str:
    with engine.connect() as c:
        return str(c.exec_driver_sql(f"SHOW CREATE TABLE {name}").scalar_one())


def test_reflected_table_recreates_the_same_table(
    engine: sa.Engine, sql: Any, tmp_path: Path
) -> None:
    """MetaData.reflect, then create_all in another database: SHOW CREATE TABLE is the
    same (columns, key, defaults, storage attributes, partitioning, comments, properties)."""
    sql(ALL_TYPES)
    sql(RANGED)
    md = sa.MetaData()
    md.reflect(engine)
    assert set(md.tables) == {"every", "ranged"}
    ranged = md.tables["ranged"]
    assert ranged.dialect_options["kudusql"]["tblproperties"] == {"owner.team": "data"}
    assert ranged.c.v.dialect_options["kudusql"]["encoding"] == "DICT_ENCODING"
    other = sa.create_engine(f"kudusql:///{tmp_path / 'other'}")
    try:
        md.create_all(other)
        for name in ("every", "ranged"):
            assert _show_create(other, name) == _show_create(engine, name)
    finally:
        other.dispose()


def test_core_reflect_round_trip(engine: sa.Engine) -> None:
    """Create through Core, reflect through MetaData.reflect, compare."""
    md = sa.MetaData()
    sa.Table(
        "orders",
        md,
        sa.Column("region", sa.String(8), primary_key=True),
        sa.Column("id", sa.BigInteger, primary_key=True),
        sa.Column("qty", sa.Integer, nullable=False, server_default="1"),
        sa.Column("price", sa.Numeric(10, 2)),
        sa.Column("ratio", sa.Float),
        sa.Column("small", sa.Float(precision=10)),
        sa.Column("note", sa.Text, comment="free text"),
        sa.Column("flag", sa.Boolean, server_default=sa.text("false")),
        sa.Column("day", sa.Date),
        sa.Column("at", sa.DateTime),
        sa.Column("raw", sa.LargeBinary),
        sa.Column("tiny", TINYINT),
        kudusql_partition_by="HASH (id) PARTITIONS 4",
        comment="orders",
    )
    md.create_all(engine)
    back = sa.MetaData()
    back.reflect(engine)
    t, r = md.tables["orders"], back.tables["orders"]
    dialect = engine.dialect
    assert [c.name for c in r.columns] == [c.name for c in t.columns]
    for a, b in zip(t.columns, r.columns, strict=True):
        assert a.type.compile(dialect) == b.type.compile(dialect), a.name
        assert a.nullable == b.nullable, a.name
        assert a.comment == b.comment, a.name
    assert [c.name for c in r.primary_key.columns] == ["region", "id"]
    assert r.c.qty.server_default is not None and r.c.flag.server_default is not None
    assert r.comment == "orders"
    assert r.dialect_options["kudusql"]["partition_by"] == "HASH (id) PARTITIONS 4"
