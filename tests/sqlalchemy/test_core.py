"""Core: Kudu DDL from Table objects, and statements as SQLAlchemy compiles them for
kudusql (parameters, LIMIT/OFFSET, booleans, string literals with backslashes, joins,
aggregates, UPDATE/DELETE, text())."""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import exc
from sqlalchemy.schema import CreateTable

from kudusql.sqlalchemy import TINYINT


def _ddl(table: sa.Table, engine: sa.Engine) -> str:
    return " ".join(str(CreateTable(table).compile(engine)).split())


# -- DDL ------------------------------------------------------------------------------------


def test_create_table_is_kudu_ddl(engine: sa.Engine) -> None:
    md = sa.MetaData()
    t = sa.Table(
        "t",
        md,
        sa.Column("v", sa.String(10), server_default="a'b\\c", comment="note"),
        sa.Column("id", sa.BigInteger, primary_key=True),
        sa.Column("n", sa.Integer, nullable=False, server_default="0"),
        sa.Column("on", sa.Boolean, server_default="1"),
        sa.Column("s", sa.String, kudusql_encoding="DICT_ENCODING", kudusql_compression="LZ4"),
        sa.Column("f4", sa.Float(precision=20), kudusql_block_size=4096),
        kudusql_partition_by="HASH (id) PARTITIONS 4",
        kudusql_tblproperties={"k": "v"},
        comment="a table",
    )
    assert _ddl(t, engine) == (
        "CREATE TABLE t ( id BIGINT NOT NULL, "
        "v VARCHAR(10) DEFAULT 'a\\'b\\\\c' COMMENT 'note', "
        "n INT NOT NULL DEFAULT 0, `on` BOOLEAN DEFAULT true, "
        "s STRING ENCODING DICT_ENCODING COMPRESSION LZ4, f4 FLOAT BLOCK_SIZE 4096, "
        "PRIMARY KEY (id) ) PARTITION BY HASH (id) PARTITIONS 4 COMMENT 'a table' "
        "TBLPROPERTIES ('k' = 'v')"
    )
    md.create_all(engine)
    with engine.connect() as c:
        c.execute(t.insert().values(id=1))
        row = c.execute(sa.select(t.c.v, t.c.n, t.c.on)).one()
    assert tuple(row) == ("a'b\\c", 0, True)


def test_key_columns_lead_the_table_in_key_order(engine: sa.Engine) -> None:
    md = sa.MetaData()
    t = sa.Table(
        "k",
        md,
        sa.Column("v", sa.String),
        sa.Column("a", sa.Integer),
        sa.Column("b", sa.String),
        sa.PrimaryKeyConstraint("b", "a"),
    )
    md.create_all(engine)
    cols = [c["name"] for c in sa.inspect(engine).get_columns("k")]
    assert cols == ["b", "a", "v"]
    assert sa.inspect(engine).get_pk_constraint("k")["constrained_columns"] == ["b", "a"]
    with engine.begin() as c:
        c.execute(t.insert(), [{"a": 1, "b": "x", "v": "one"}])
        assert c.execute(sa.select(t)).all() == [("one", 1, "x")]


def test_a_table_without_key_names_the_remedy(engine: sa.Engine) -> None:
    md = sa.MetaData()
    sa.Table("nokey", md, sa.Column("a", sa.Integer), sa.Column("b", sa.String))
    with pytest.raises(exc.CompileError) as e:
        md.create_all(engine)
    assert "Kudu tables need a primary key, and table 'nokey' has none" in str(e.value)
    assert "primary_key=True" in str(e.value) and "set_index" in str(e.value)
    assert not sa.inspect(engine).has_table("nokey")


def test_indexes_and_constraints(engine: sa.Engine) -> None:
    """An index is nothing to create (Kudu's one index is the key); uniqueness beyond the
    key and CHECK are refused; foreign keys are left out."""
    md = sa.MetaData()
    sa.Table("p", md, sa.Column("id", sa.Integer, primary_key=True))
    c = sa.Table(
        "c",
        md,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("pid", sa.Integer, sa.ForeignKey("p.id"), index=True),
        sa.UniqueConstraint("id"),
    )
    sa.Index("ix_c_both", c.c.id, c.c.pid)
    sa.Index("ix_c_id", c.c.id, unique=True)
    md.create_all(engine)
    assert set(sa.inspect(engine).get_table_names()) == {"p", "c"}
    assert "FOREIGN KEY" not in _ddl(c, engine)
    md.drop_all(engine)
    assert sa.inspect(engine).get_table_names() == []

    bad = sa.MetaData()
    u = sa.Table("u", bad, sa.Column("id", sa.Integer, primary_key=True), sa.Column("e", sa.String))
    sa.Index("ix_u_e", u.c.e, unique=True)
    with pytest.raises(exc.CompileError, match=r"uniqueness of the primary key only.*u\(e\)"):
        bad.create_all(engine)
    bad = sa.MetaData()
    sa.Table(
        "u2",
        bad,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("e", sa.String, unique=True),
    )
    with pytest.raises(exc.CompileError, match="unique constraint"):
        bad.create_all(engine)
    bad = sa.MetaData()
    sa.Table("u3", bad, sa.Column("id", sa.Integer, primary_key=True), sa.CheckConstraint("id > 0"))
    with pytest.raises(exc.CompileError, match="no CHECK constraints"):
        bad.create_all(engine)


@pytest.mark.parametrize(
    ("type_", "sql"),
    [
        (sa.Integer(), "INT"),
        (sa.BigInteger(), "BIGINT"),
        (sa.SmallInteger(), "SMALLINT"),
        (TINYINT(), "TINYINT"),
        (sa.Boolean(), "BOOLEAN"),
        (sa.Float(), "DOUBLE"),
        (sa.Float(precision=53), "DOUBLE"),
        (sa.Float(precision=24), "FLOAT"),
        (sa.REAL(), "FLOAT"),
        (sa.FLOAT(), "FLOAT"),
        (sa.Double(), "DOUBLE"),
        (sa.DOUBLE_PRECISION(), "DOUBLE"),
        (sa.Numeric(10, 2), "DECIMAL(10,2)"),
        (sa.Numeric(5), "DECIMAL(5,0)"),
        (sa.String(), "STRING"),
        (sa.String(30), "VARCHAR(30)"),
        (sa.Unicode(30), "VARCHAR(30)"),
        (sa.Text(), "STRING"),
        (sa.UnicodeText(), "STRING"),
        (sa.Enum("a", "bb", name="e"), "VARCHAR(2)"),
        (sa.LargeBinary(), "BINARY"),
        (sa.Date(), "DATE"),
        (sa.DateTime(), "TIMESTAMP"),
        (sa.DateTime(timezone=True), "TIMESTAMP"),
        (sa.Uuid(), "STRING"),
    ],
)
def test_types_compile_to_kudu_types(engine: sa.Engine, type_: Any, sql: str) -> None:
    assert type_.compile(engine.dialect) == sql


@pytest.mark.parametrize(
    ("type_", "message"),
    [
        (sa.Numeric(), "needs a precision"),
        (sa.Time(), "no TIME column type"),
        (sa.CHAR(3), "no CHAR column type"),
        (sa.JSON(), "JSON"),
    ],
)
def test_types_kudu_lacks_are_refused(engine: sa.Engine, type_: Any, message: str) -> None:
    with pytest.raises(exc.CompileError, match=message):
        type_.compile(engine.dialect)


# -- statements -----------------------------------------------------------------------------


@pytest.fixture
def tables(engine: sa.Engine) -> tuple[sa.Table, sa.Table]:
    md = sa.MetaData()
    users = sa.Table(
        "users",
        md,
        sa.Column("id", sa.BigInteger, primary_key=True),
        sa.Column("name", sa.String, nullable=False),
        sa.Column("active", sa.Boolean),
        sa.Column("balance", sa.Numeric(10, 2)),
        sa.Column("born", sa.Date),
        sa.Column("seen", sa.DateTime),
        sa.Column("avatar", sa.LargeBinary),
        kudusql_partition_by="HASH (id) PARTITIONS 3",
    )
    orders = sa.Table(
        "orders",
        md,
        sa.Column("id", sa.BigInteger, primary_key=True),
        sa.Column("user_id", sa.BigInteger, nullable=False),
        sa.Column("amount", sa.Float),
    )
    md.create_all(engine)
    with engine.begin() as c:
        c.execute(
            users.insert(),
            [
                {"id": 1, "name": "ann", "active": True, "balance": decimal.Decimal("1.50")},
                {"id": 2, "name": "bob\\", "active": False, "balance": None},
                {"id": 3, "name": "it's", "active": None, "balance": None},
            ],
        )
        c.execute(users.insert().values(id=4, name="dee", avatar=b"\x00\xff"))
        c.execute(users.update().where(users.c.id == 2).values(born=datetime.date(2000, 2, 29)))
        seen = datetime.datetime(2024, 1, 2, 3, 4, 5, 6)
        c.execute(users.update().where(users.c.id == 3).values(seen=seen))
        c.execute(
            orders.insert(),
            [
                {"id": 10, "user_id": 1, "amount": 5.0},
                {"id": 11, "user_id": 1, "amount": 7.5},
                {"id": 12, "user_id": 2, "amount": 1.0},
            ],
        )
    return users, orders


def test_insert_counts_rows(engine: sa.Engine, tables: Any) -> None:
    users, _ = tables
    with engine.begin() as c:
        assert (
            c.execute(users.insert(), [{"id": 5, "name": "e"}, {"id": 6, "name": "f"}]).rowcount
            == 2
        )
        assert c.execute(users.insert().values(id=7, name="g")).rowcount == 1
        multi = users.insert().values([{"id": 8, "name": "h"}, {"id": 9, "name": "i"}])
        assert c.execute(multi).rowcount == 2


def test_a_failing_row_fails_its_statement(engine: sa.Engine, tables: Any) -> None:
    """abort_on_error: the statement applies entirely or raises."""
    users, _ = tables
    with engine.begin() as c:
        with pytest.raises(exc.IntegrityError, match="key already present"):
            c.execute(users.insert(), [{"id": 50, "name": "new"}, {"id": 1, "name": "dup"}])
        assert c.execute(sa.select(sa.func.count()).where(users.c.id == 50)).scalar_one() == 0
        with pytest.raises(exc.DBAPIError, match="All primary key columns"):
            c.execute(users.insert().values(name="no key"))


def test_select_where_order_limit_offset(engine: sa.Engine, tables: Any) -> None:
    users, _ = tables
    with engine.connect() as c:
        q = sa.select(users.c.id).order_by(users.c.id)
        assert c.execute(q.limit(2)).scalars().all() == [1, 2]
        assert c.execute(q.limit(2).offset(1)).scalars().all() == [2, 3]
        assert c.execute(q.offset(3)).scalars().all() == [4]
        assert c.execute(q.where(users.c.active)).scalars().all() == [1]
        assert c.execute(q.where(sa.not_(users.c.active))).scalars().all() == [2]
        assert c.execute(q.where(users.c.active.is_(None))).scalars().all() == [3, 4]
        assert c.execute(q.where(users.c.active == sa.true())).scalars().all() == [1]
        assert c.execute(q.where(users.c.id.in_([2, 4]))).scalars().all() == [2, 4]
        assert c.execute(q.where(users.c.id.in_([]))).scalars().all() == []
        assert c.execute(q.where(users.c.id.between(2, 3))).scalars().all() == [2, 3]
        assert c.execute(q.where(users.c.name.startswith("b"))).scalars().all() == [2]
        assert c.execute(q.where(users.c.name.contains("\\", autoescape=True))).scalars().all() == [
            2
        ]
        assert c.execute(q.where(users.c.name.like("it%"))).scalars().all() == [3]
        row = c.execute(sa.select(users).where(users.c.id == 3)).one()
        assert row.seen == datetime.datetime(2024, 1, 2, 3, 4, 5, 6) and row.name == "it's"
        assert c.execute(sa.select(users.c.born).where(users.c.id == 2)).scalar() == datetime.date(
            2000, 2, 29
        )
        assert c.execute(sa.select(users.c.avatar).where(users.c.id == 4)).scalar() == b"\x00\xff"
        bal = c.execute(sa.select(users.c.balance).where(users.c.id == 1)).scalar()
        assert bal == decimal.Decimal("1.50")


def test_literal_strings_escape_backslashes(engine: sa.Engine) -> None:
    """With literal_binds a string is written as Impala reads it (backslash escapes)."""
    value = "a'b\\c\\'d\\n%"
    q = sa.select(sa.literal(value, sa.String).label("v"))
    text = str(q.compile(engine, compile_kwargs={"literal_binds": True}))
    assert "'a\\'b\\\\c\\\\\\'d\\\\n%'" in text
    with engine.connect() as c:
        assert c.exec_driver_sql(text).scalar_one() == value
        assert c.execute(q).scalar_one() == value
        b = sa.select(sa.literal(b"\x00\xff", sa.LargeBinary).label("b"))
        text = str(b.compile(engine, compile_kwargs={"literal_binds": True}))
        assert "X'00ff'" in text
        assert c.exec_driver_sql(text).scalar_one() == b"\x00\xff"


def test_joins_and_aggregates(engine: sa.Engine, tables: Any) -> None:
    users, orders = tables
    with engine.connect() as c:
        q = (
            sa.select(users.c.name, sa.func.count().label("n"), sa.func.sum(orders.c.amount))
            .join(orders, orders.c.user_id == users.c.id)
            .group_by(users.c.name)
            .having(sa.func.count() > 0)
            .order_by(sa.desc("n"))
        )
        assert c.execute(q).all() == [("ann", 2, 12.5), ("bob\\", 1, 1.0)]
        outer = (
            sa.select(users.c.id, orders.c.id)
            .outerjoin(orders, orders.c.user_id == users.c.id)
            .where(orders.c.id.is_(None))
            .order_by(users.c.id)
        )
        assert c.execute(outer).all() == [(3, None), (4, None)]
        sub = sa.select(orders.c.user_id).where(orders.c.amount > 6).scalar_subquery()
        assert c.execute(sa.select(users.c.id).where(users.c.id == sub)).scalars().all() == [1]
        assert c.execute(sa.select(sa.func.max(users.c.id), sa.func.min(users.c.name))).one() == (
            4,
            "ann",
        )
        # "/" divides exactly, also two integers.
        assert c.execute(sa.select(sa.literal(7) / sa.literal(2))).scalar() == 3.5
        assert c.execute(sa.select(sa.literal(7) // sa.literal(2))).scalar() == 3


def test_update_and_delete(engine: sa.Engine, tables: Any) -> None:
    users, orders = tables
    with engine.begin() as c:
        r = c.execute(users.update().where(users.c.id == 1).values(name="anne"))
        assert r.rowcount == 1
        r = c.execute(users.update().where(users.c.id == 99).values(name="x"))
        assert r.rowcount == 0
        r = c.execute(
            users.update().where(users.c.id == sa.bindparam("k")).values(name=sa.bindparam("n")),
            [{"k": 2, "n": "b2"}, {"k": 3, "n": "c3"}, {"k": 99, "n": "none"}],
        )
        assert r.rowcount == 2
        # UPDATE ... FROM in Impala's form (the target in the FROM list).
        r = c.execute(
            users.update()
            .where(users.c.id == orders.c.user_id)
            .where(orders.c.amount > 6)
            .values(active=False)
        )
        assert r.rowcount == 1
        assert c.execute(users.delete().where(users.c.id > 2)).rowcount == 2
        rows = c.execute(sa.select(users.c.id, users.c.name, users.c.active).order_by("id")).all()
        assert rows == [(1, "anne", False), (2, "b2", False)]


def test_multi_table_delete_is_refused(engine: sa.Engine, tables: Any) -> None:
    users, orders = tables
    with (
        engine.begin() as c,
        pytest.raises(exc.CompileError, match=r"names one table.*in_\(select"),
    ):
        c.execute(users.delete().where(users.c.id == orders.c.user_id))
    with engine.begin() as c:
        sub = sa.select(orders.c.user_id)
        assert c.execute(users.delete().where(users.c.id.in_(sub))).rowcount == 2


def test_text_with_bound_parameters(engine: sa.Engine, tables: Any) -> None:
    with engine.begin() as c:
        rows = c.execute(
            sa.text("SELECT id, name FROM users WHERE id >= :lo AND name <> :n ORDER BY id"),
            {"lo": 2, "n": "it's"},
        ).all()
        assert rows == [(2, "bob\\"), (4, "dee")]
        c.execute(sa.text("INSERT INTO orders VALUES (:i, :u, :a)"), [{"i": 20, "u": 4, "a": 0.5}])
        assert (
            c.execute(sa.text("SELECT amount FROM orders WHERE id = :i"), {"i": 20}).scalar() == 0.5
        )


def test_tables_of_another_database(engine: sa.Engine) -> None:
    with engine.begin() as c:
        c.exec_driver_sql("CREATE DATABASE sales")
    md = sa.MetaData()
    t = sa.Table(
        "t",
        md,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("v", sa.String),
        schema="sales",
    )
    d = sa.Table("u", md, sa.Column("id", sa.Integer, primary_key=True), schema="default")
    md.create_all(engine)
    assert sa.inspect(engine).get_table_names(schema="sales") == ["t"]
    with engine.begin() as c:
        c.execute(t.insert(), [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}])
        c.execute(d.insert(), [{"id": 2}])
        assert c.execute(sa.select(t.c.v).where(t.c.id == 2)).scalar_one() == "b"
        j = sa.select(t.c.v).join(d, d.c.id == t.c.id)
        assert c.execute(j).scalars().all() == ["b"]
        assert c.execute(t.update().where(t.c.id == 1).values(v="z")).rowcount == 1
        assert c.execute(t.delete().where(t.c.v == "z")).rowcount == 1
    reflected = sa.Table("t", sa.MetaData(), schema="sales", autoload_with=engine)
    assert [c.name for c in reflected.primary_key.columns] == ["id"]
    md.drop_all(engine)
    assert sa.inspect(engine).get_table_names(schema="sales") == []
