"""UPDATE and DELETE by full primary key take the fast path (``fastpath.KeyWrite``) only
for their shape, and give exactly what the general path (DuckDB's read, then a write)
gives: random statement sequences run on a database with the fast paths and on one
without, comparing rowcounts, errors, warnings and the stored rows after each.

The values are the awkward ones: strings for numbers and dates, NULLs (also into NOT
NULL columns), out-of-range numbers, key columns assigned, mixed-case and qualified
names, absent, present and deleted keys, literals, ``?`` and ``:name`` parameters, and
``abort_on_error`` on and off."""

from __future__ import annotations

import datetime
import decimal
import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kudusql
from kudusql.engine.fastpath import KeyWrite
from tests.sql.test_fast_path_differential import SHAPES, Shape, Statement, _sql_literal, run_both

D = decimal.Decimal

MIXED = Shape(
    "CREATE TABLE t (Id BIGINT, Name STRING, Qty INT NOT NULL, Day DATE, Price DOUBLE, "
    "PRIMARY KEY (Id, Name)) PARTITION BY HASH (Id) PARTITIONS 2",
    (
        ("Id", (1, 2, 3, -4, 2**63, "2", 2.0, None)),
        ("Name", ("a", "B", "", "é", 7, None)),
        ("Qty", (0, 5, -(2**31), 2**31, "9", "x", 1.5, None)),
        ("Day", (datetime.date(2024, 2, 29), "2024-01-01", "2024-02-30", 3, None)),
        ("Price", (1.5, -0.0, 1e300, D("0.1"), 3, "2.5", True, None)),
    ),
    ("Id", "Name"),
)
KEY_SHAPES = [*SHAPES, MIXED]


def _case(name: str, draw: st.DrawFn) -> str:
    """``name`` as the statement spells it: any case, sometimes qualified by ``t``."""
    spelled = draw(st.sampled_from([name, name.lower(), name.upper()]))
    return ("t." if draw(st.booleans()) else "") + spelled


@st.composite
def key_writes(draw: st.DrawFn, shape: Shape) -> Statement:
    pools = dict(shape.columns)
    names = [c for c, _ in shape.columns]
    kind = draw(st.sampled_from(["insert", "update", "update", "update", "delete", "abort"]))
    if kind == "abort":
        return Statement(f"SET abort_on_error = {draw(st.sampled_from(['true', 'false']))}")
    if kind == "insert":
        row = [draw(st.sampled_from(pools[c])) for c in names]
        return Statement(f"UPSERT INTO t VALUES ({', '.join('?' for _ in names)})", row)
    named = draw(st.booleans())
    params: Any = {} if named else []
    parts: list[str] = []

    def value(v: Any) -> str:
        lit = _sql_literal(v)
        if lit is not None and draw(st.integers(0, 3)) == 0:
            return lit
        if named:
            params[f"p{len(params)}"] = v
            return f":p{len(params) - 1}"
        params.append(v)
        return "?"

    if kind == "update":
        others = [c for c in names if c not in shape.key]
        cols = draw(st.lists(st.sampled_from(others), min_size=1, max_size=3, unique=True))
        if draw(st.integers(0, 9)) == 0:
            cols.append(draw(st.sampled_from([*shape.key, cols[0]])))  # a key, or twice
        sets = [
            f"{_case(c, draw).removeprefix('t.')} = {value(draw(st.sampled_from(pools[c])))}"
            for c in cols
        ]
        parts.append(f"UPDATE t SET {', '.join(sets)}")
    else:
        parts.append("DELETE FROM t")
    conds = [f"{_case(c, draw)} = {value(draw(st.sampled_from(pools[c])))}" for c in shape.key]
    parts.append("WHERE " + " AND ".join(draw(st.permutations(conds))))
    return Statement(" ".join(parts), params if params else None)


@settings(max_examples=int(os.environ.get("KUDUSQL_DIFF_EXAMPLES", "25")), deadline=None)
@given(data=st.data())
def test_key_writes_agree_with_the_general_path(data: st.DataObject) -> None:
    shape = data.draw(st.sampled_from(KEY_SHAPES), label="shape")
    stmts = data.draw(st.lists(key_writes(shape), min_size=2, max_size=10), label="statements")
    run_both(shape, stmts)


@pytest.mark.slow
@settings(max_examples=600, deadline=None)
@given(data=st.data())
def test_many_key_writes_agree_with_the_general_path(data: st.DataObject) -> None:
    shape = data.draw(st.sampled_from(KEY_SHAPES), label="shape")
    stmts = data.draw(st.lists(key_writes(shape), min_size=2, max_size=30), label="statements")
    run_both(shape, stmts)


CASES = [
    (
        MIXED,
        [
            Statement("INSERT INTO t VALUES (1, 'a', 5, DATE '2024-01-01', 1.5)"),
            Statement("UPDATE t SET qty = NULL WHERE id = 1 AND name = 'a'"),
            Statement(
                "UPDATE t SET QTY = ?, price = ? WHERE ID = ? AND t.NAME = ?", [7, None, 1, "a"]
            ),
            Statement("UPDATE t SET qty = ? WHERE id = ? AND name = ?", [2**31, 1, "a"]),
            Statement("UPDATE t SET day = ? WHERE id = ? AND name = ?", ["2024-02-30", 1, "a"]),
            Statement("UPDATE t SET name = 'b' WHERE id = 1 AND name = 'a'"),
            Statement("UPDATE t SET qty = 1, Qty = 2 WHERE id = 1 AND name = 'a'"),
            Statement("UPDATE t SET nope = 1 WHERE id = 1 AND name = 'a'"),
            Statement("SET abort_on_error = true"),
            Statement("UPDATE t SET qty = NULL WHERE id = 1 AND name = 'a'"),
            Statement("UPDATE t SET qty = ? WHERE id = ? AND name = ?", [3, 1, "a"]),
            Statement("DELETE FROM t WHERE id = :i AND name = :n", {"i": 1, "n": "a"}),
            Statement("UPDATE t SET qty = ? WHERE id = ? AND name = ?", [3, 1, "a"]),
            Statement("DELETE FROM t WHERE id = :i AND name = :n", {"i": 1, "n": "a"}),
            Statement("UPDATE t SET qty = ? WHERE id = ? AND name = ?", [3, 1]),
            Statement("DELETE FROM missing WHERE id = 1 AND name = 'a'"),
        ],
    ),
    (
        SHAPES[4],  # DECIMAL(4,2) key, TIMESTAMP outside Impala's range
        [
            Statement("INSERT INTO t VALUES (1.5, '2024-01-01')"),
            Statement(
                "UPDATE t SET ts = ? WHERE k = ?", [datetime.datetime(1300, 1, 1), D("1.50")]
            ),
            Statement("UPDATE t SET ts = ? WHERE k = ?", [datetime.datetime(2020, 1, 1), D("1.5")]),
            Statement("UPDATE t SET ts = NULL WHERE k = ?", [D("1.555")]),
            Statement("DELETE FROM t WHERE k = ?", [D("100.5")]),
        ],
    ),
]


STRINGS = Shape(
    "CREATE TABLE t (k STRING PRIMARY KEY, v STRING, d DOUBLE, i BIGINT) "
    "PARTITION BY HASH (k) PARTITIONS 2",
    (),
    ("k",),
)
CASES.append(
    (
        STRINGS,
        [
            Statement("INSERT INTO t VALUES ('a', 'x', 1.0, 1), ('a\x00b', 'y', 2.0, 2)"),
            # NUL characters, quotes, a lone surrogate (UTF-8 cannot hold it), NaN, the
            # infinities, the smallest double, -0.0, BIGINT's bounds, a bool for BIGINT
            *(
                Statement("UPDATE t SET v = ? WHERE k = ?", [v, k])
                for v in ("nul\x00in", "\ud800", "'q\"", "é" * 300, "")
                for k in ("a", "a\x00b")
            ),
            Statement("UPDATE t SET v = 'z' WHERE k = ?", ["nul\x00in"]),
            *(
                Statement("UPDATE t SET d = ? WHERE k = 'a'", [d])
                for d in (float("nan"), float("inf"), -float("inf"), 5e-324, -0.0)
            ),
            *(
                Statement("UPDATE t SET i = ? WHERE k = 'a'", [i])
                for i in (2**63 - 1, -(2**63), True)
            ),
            Statement("DELETE FROM t WHERE k = ?", ["a\x00b"]),
        ],
    )
)


@pytest.mark.parametrize(("shape", "stmts"), CASES)
def test_known_key_writes_agree(shape: Shape, stmts: list[Statement]) -> None:
    run_both(shape, stmts)


@pytest.fixture
def conn() -> Iterator[kudusql.Connection]:
    c = kudusql.connect(":memory:", maintenance=False, sync=False)
    c.execute(
        "CREATE TABLE t (a BIGINT, b STRING, v INT, w STRING NOT NULL, PRIMARY KEY (a, b)) "
        "PARTITION BY HASH (a) PARTITIONS 3"
    )
    c.execute("INSERT INTO t VALUES (1, 'x', 10, 'w'), (2, 'y', 20, 'w')")
    yield c
    c.close()


def _taken(c: kudusql.Connection, sql: str, params: Any) -> bool:
    entry = c.session.statements.get(sql)
    return (
        entry is not None
        and isinstance(entry[1], KeyWrite)
        and entry[1].run(c.session, params) is not None
    )


@pytest.mark.parametrize(
    ("sql", "params"),
    [
        ("UPDATE t SET v = ? WHERE a = ? AND b = ?", (5, 1, "x")),
        (
            "UPDATE t SET v = :v, w = :w WHERE b = :b AND a = :a",
            {"v": 5, "w": "z", "b": "x", "a": 1},
        ),
        ("UPDATE T SET V = NULL, W = 'q' WHERE t.A = 1 AND T.b = 'x'", None),
        ("UPDATE t AS x SET v = -3 WHERE x.a = 1 AND b = 'nope'", None),
        ("DELETE FROM t WHERE a = ? AND b = ?", (2, "y")),
        ("DELETE FROM t WHERE a = ? AND b = ?", (9, "absent")),
    ],
)
def test_shapes_that_take_the_path(conn: kudusql.Connection, sql: str, params: Any) -> None:
    assert _taken(conn, sql, params)


@pytest.mark.parametrize(
    ("sql", "params"),
    [
        ("UPDATE t SET v = ? WHERE a = ?", (5, 1)),  # not the whole key
        ("UPDATE t SET v = ? WHERE a = ? AND b = ? AND v = 1", (5, 1, "x")),
        ("UPDATE t SET v = v + 1 WHERE a = ? AND b = ?", (1, "x")),
        ("UPDATE t SET v = ? WHERE a = ? AND b = ?", ("5", 1, "x")),  # a string for INT
        ("UPDATE t SET v = ? WHERE a = ? AND b = ?", (2**31, 1, "x")),  # out of range
        ("UPDATE t SET v = ? WHERE a = ? AND b = ?", (5.0, 1, "x")),
        ("UPDATE t SET v = ? WHERE a = ? AND b = ?", (5, "1", "x")),
        ("UPDATE t SET a = ? WHERE a = ? AND b = ?", (5, 1, "x")),  # a key column
        ("UPDATE t SET v = 1, V = 2 WHERE a = 1 AND b = 'x'", None),
        ("UPDATE t SET v = ? WHERE a = ? AND b = ?", (5, 1)),  # too few values
        ("UPDATE t SET v = 1 FROM t WHERE a = 1 AND b = 'x'", None),
        ("UPDATE t SET t.v = 1 WHERE a = 1 AND b = 'x'", None),
        ("DELETE FROM t WHERE a = ? OR b = ?", (1, "x")),
        ("DELETE FROM t WHERE a = ? AND b = ?", (None, "x")),
        ("DELETE t FROM t WHERE a = 1 AND b = 'x'", None),
    ],
)
def test_other_shapes_fall_back(conn: kudusql.Connection, sql: str, params: Any) -> None:
    assert not _taken(conn, sql, params)


def test_timestamps_name_the_write_or_the_read(conn: kudusql.Connection) -> None:
    """Result.timestamp is the write's (a snapshot just after it sees the new value, one
    at it does not); with no row to write, the snapshot read (on both paths)."""
    table = conn.session.db.table("t")
    for where in ("a = 1 AND b = 'x'", "1 = 1 AND a = 1 AND b = 'x'"):  # fast, general
        for v in (1, 2):
            res = conn.session.execute(f"UPDATE t SET v = {v} WHERE {where}")
            assert res.rowcount == 1 and res.timestamp is not None
            assert table.lookup([1, "x"], ["v"], snapshot=res.timestamp + 1) == {"v": v}
            assert table.lookup([1, "x"], ["v"], snapshot=res.timestamp) != {"v": v}
        before = conn.session.db.snapshot()
        res = conn.session.execute(f"DELETE FROM t WHERE {where.replace('1', '7')}")
        assert res.rowcount == 0 and res.timestamp is not None and res.timestamp >= before
