"""The fast paths give exactly what the general path gives: the same random statements
run on two databases, one with the fast paths (the row path for writes of a few rows,
routed row by row; point lookups; cached plans) and one with ``fast_paths=False``, and
every result, error, warning and the stored rows must agree.

Statements come as SQL literals, as ``execute`` parameters and as ``executemany``
batches, with the awkward values users send: strings for numbers and dates, NULLs,
out-of-range and fractional numbers for integer and decimal keys (in point lookups and
in pushed-down ranges and IN lists), decimals for doubles, timestamps for dates and
timestamps outside Impala's range, mixed case, and keys repeated within a batch."""

from __future__ import annotations

import datetime
import decimal
import os
import re
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kudusql
from kudusql.common.errors import Error

D = decimal.Decimal
UTC2 = datetime.timezone(datetime.timedelta(hours=2))

INTS = [0, 1, 2, 3, 5, 7, -1, 127, 128, -129, 2**31, 2**63, 10**20, True]
INT_AWKWARD = ["3", " 5", "3.0", "x", 1.0, 1.7, 2.5, D("2"), D("1.7"), D("2.0"), None]
DATES = [
    datetime.date(2024, 1, 1),
    datetime.date(2024, 8, 2),
    datetime.date(2025, 6, 1),
    "2024-08-02",
    "2024-03-01",
    "2025-06-01",
    "2024-13-01",
    datetime.datetime(2024, 1, 1),
    datetime.datetime(2024, 1, 1, 5),
    1,
    "x",
    None,
]
DOUBLES = [1.2, 0.3, D("0.3"), D("1.2"), 1, 2**53 + 1, 1e300, "1.5", "abc", None, -0.0]
FLOATS = [1.1, 1e300, 16777217, 16777216, 1, D("1.1"), "2.5", None]
DECIMALS = [D("1.20"), D("1.234"), D("12345678901"), 1, 1.005, "3.14", None, -7]
STRINGS = ["a", "A", "MiXeD", "", "é", 1, None, "k1", "K1"]
VARCHARS = ["abcdef", "ab", "éééé", 5, None]
BOOLS = [True, False, 1, 0, "true", "yes", None]
TIMESTAMPS = [
    datetime.datetime(2024, 1, 1, 5, 6, 7, 8),
    datetime.date(2024, 1, 1),
    "2024-01-01 05:00:00",
    "x",
    None,
    datetime.datetime(2024, 1, 1, 5, tzinfo=UTC2),
    # Outside Impala's range (1400-01-01..9999-12-31): a row error when written.
    datetime.datetime(1300, 1, 1),
    "1399-12-31 23:59:59",
    "9999-12-31 23:59:59.999999",
]
# DECIMAL(4,2) keys: out of range, with more fractional digits.
DECIMAL_KEYS = [D("1.50"), D("1.5"), D("-1.5"), D("99.99"), D("100.5"), D("1.555"), 1, 150]
DECIMAL_KEYS += ["1.5", 1.5, None]


@dataclass(frozen=True)
class Shape:
    """A table to write to: its DDL, its columns' value pools, its key columns."""

    ddl: str
    columns: tuple[tuple[str, tuple[Any, ...]], ...]
    key: tuple[str, ...]


SHAPES = [
    Shape(
        "CREATE TABLE t (k INT PRIMARY KEY, v STRING) PARTITION BY HASH (k) PARTITIONS 4",
        (("k", (*INTS, *INT_AWKWARD)), ("v", tuple(STRINGS))),
        ("k",),
    ),
    Shape(
        "CREATE TABLE t (day DATE, id BIGINT, x DOUBLE, PRIMARY KEY (day, id)) "
        "PARTITION BY HASH (id) PARTITIONS 2, RANGE (day) ("
        "PARTITION DATE '2024-01-01' <= VALUES < DATE '2024-07-01', "
        "PARTITION DATE '2024-07-01' <= VALUES < DATE '2025-01-01')",
        (("day", tuple(DATES)), ("id", (0, 1, 2, 3, 1.5, "2", None)), ("x", tuple(DOUBLES))),
        ("day", "id"),
    ),
    Shape(
        "CREATE TABLE t (s STRING PRIMARY KEY, d DECIMAL(10,2), f FLOAT, b BOOL, "
        "ts TIMESTAMP, vc VARCHAR(3), bin BINARY) PARTITION BY HASH (s) PARTITIONS 3",
        (
            ("s", tuple(STRINGS)),
            ("d", tuple(DECIMALS)),
            ("f", tuple(FLOATS)),
            ("b", tuple(BOOLS)),
            ("ts", tuple(TIMESTAMPS)),
            ("vc", tuple(VARCHARS)),
            ("bin", (b"ab", "ab", None)),
        ),
        ("s",),
    ),
    Shape(
        "CREATE TABLE t (k TINYINT PRIMARY KEY, v INT NOT NULL DEFAULT 7) "
        "PARTITION BY RANGE (k) (PARTITION VALUES < 3, PARTITION 5 <= VALUES < 100)",
        (
            ("k", (0, 1, 2, 3, 4, 5, 99, 100, 127, 128, -1, "2", 2.0, 2.5, None)),
            ("v", (1, None, "9")),
        ),
        ("k",),
    ),
    Shape(
        "CREATE TABLE t (k DECIMAL(4,2) PRIMARY KEY, ts TIMESTAMP) "
        "PARTITION BY HASH (k) PARTITIONS 2",
        (("k", tuple(DECIMAL_KEYS)), ("ts", tuple(TIMESTAMPS))),
        ("k",),
    ),
]


def _sql_literal(v: Any) -> str | None:
    """``v`` as a SQL literal, or None when SQL has none for it."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if v == v and abs(v) != float("inf") else None
    if isinstance(v, D):
        return format(v, "f")
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    if isinstance(v, bytes):
        return "X'" + v.hex() + "'"
    if isinstance(v, datetime.datetime):
        return None if v.tzinfo else f"TIMESTAMP '{v.isoformat(sep=' ')}'"
    if isinstance(v, datetime.date):
        return f"DATE '{v.isoformat()}'"
    return None


_CONVERSION = re.compile(r"Could not convert string '[^']*'")
# A value that does not convert is named as the batch carried it: a parameter bound as
# SQL text is an int where the unbound one was a Decimal ("5" and "5.00"), and a value
# of a column of mixed types is named by its text. The row, column and type must agree.
_INVALID = re.compile(r"(invalid value) .* (for column '[^']*' of type )")


@dataclass(frozen=True)
class Statement:
    sql: str
    params: Any = None
    many: bool = False


@st.composite
def statements(draw: st.DrawFn, shape: Shape) -> Statement:
    names = [c for c, _ in shape.columns]
    pools = dict(shape.columns)
    kind = draw(
        st.sampled_from(["insert", "upsert", "ignore", "update", "delete", "lookup", "range"])
    )
    mode = draw(st.sampled_from(["literal", "params", "many"]))
    if kind in ("insert", "upsert", "ignore"):
        cols = names
        if draw(st.booleans()):  # a column list: the key and some other columns
            cols = [*shape.key, *(c for c in names if c not in shape.key and draw(st.booleans()))]
        nrows = draw(st.sampled_from([1, 1, 2, 3, 8, 9, 12]))
        rows = [tuple(draw(st.sampled_from(pools[c])) for c in cols) for _ in range(nrows)]
        if nrows > 1 and draw(st.booleans()):  # a key repeated within the batch
            rows[-1] = rows[0]
        verb = {"insert": "INSERT INTO", "upsert": "UPSERT INTO", "ignore": "INSERT IGNORE INTO"}
        lits = [[_sql_literal(v) for v in r] for r in rows]
        if mode == "literal" and draw(st.booleans()) and all(x for r in lits for x in r):
            # Through DuckDB: the storage write gets an Arrow batch (the row path takes
            # it as Python values when it is small).
            selects = " UNION ALL ".join("SELECT " + ", ".join(r) for r in lits)  # type: ignore[arg-type]
            return Statement(f"{verb[kind]} t ({', '.join(cols)}) {selects}")
        head = f"{verb[kind]} t ({', '.join(cols)}) VALUES "
        one = "(" + ", ".join("?" for _ in cols) + ")"
        if mode == "many":
            return Statement(head + one, rows, many=True)
        if mode == "params":
            return Statement(head + ", ".join(one for _ in rows), [v for r in rows for v in r])
        if any(x is None for r in lits for x in r):
            return Statement(head + ", ".join(one for _ in rows), [v for r in rows for v in r])
        return Statement(head + ", ".join("(" + ", ".join(r) + ")" for r in lits))  # type: ignore[arg-type]
    key = [draw(st.sampled_from(pools[c])) for c in shape.key]
    where = " AND ".join(f"{c} = ?" for c in shape.key)
    if kind == "update":
        col = draw(st.sampled_from([c for c in names if c not in shape.key]))
        sql, params = (
            f"UPDATE t SET {col} = ? WHERE {where}",
            [
                draw(st.sampled_from(pools[col])),
                *key,
            ],
        )
    elif kind == "delete":
        sql, params = f"DELETE FROM t WHERE {where}", key
    elif kind == "range":
        # A pushed-down range or IN list with constants out of the key's range.
        col = shape.key[0]
        op = draw(st.sampled_from(["<", "<=", ">", ">=", "IN"]))
        # The whole key orders the rows totally: rows tied on the first key column come
        # in no one order, on either path.
        order = ", ".join(shape.key)
        if op == "IN":
            sql, params = (
                f"SELECT * FROM t WHERE {col} IN (?, ?) ORDER BY {order}",
                [
                    key[0],
                    key[-1],
                ],
            )
        else:
            sql, params = f"SELECT * FROM t WHERE {col} {op} ? ORDER BY {order}", [key[0]]
    else:
        sql, params = f"SELECT * FROM t WHERE {where}", key
    lits = [_sql_literal(v) for v in params]
    if mode == "literal" and all(x is not None for x in lits):
        for x in lits:
            sql = sql.replace("?", x, 1)  # type: ignore[arg-type]
        return Statement(sql)
    return Statement(sql, params)


def _outcome(conn: kudusql.Connection, s: Statement) -> tuple[Any, ...]:
    cur = conn.cursor()
    try:
        if s.many:
            cur.executemany(s.sql, s.params)
        else:
            cur.execute(s.sql, s.params)
    except Error as e:
        # DuckDB names the first value of a column that fails an implicit cast, which
        # depends on the order the tablets' rows arrive in, not on the path.
        return ("error", type(e).__name__, _CONVERSION.sub("Could not convert string", str(e)))
    rows = repr(cur.fetchall()) if cur.description is not None else None
    return ("ok", cur.rowcount, tuple(_INVALID.sub(r"\1 \2", w) for w in cur.warnings), rows)


def _stored(conn: kudusql.Connection, key: tuple[str, ...]) -> str:
    cur = conn.cursor().execute(f"SELECT * FROM t ORDER BY {', '.join(key)}")
    return repr(cur.fetchall())


def run_both(shape: Shape, stmts: list[Statement]) -> None:
    """Run ``stmts`` on a database with the fast paths and on one without; every
    outcome and the stored rows after each statement must agree."""
    kw: dict[str, Any] = {"maintenance": False, "sync": False}
    with (
        kudusql.connect(":memory:", **kw) as fast,
        kudusql.connect(":memory:", fast_paths=False, **kw) as general,
    ):
        fast.execute(shape.ddl)
        general.execute(shape.ddl)
        for s in stmts:
            a, b = _outcome(fast, s), _outcome(general, s)
            assert a == b, f"{s}: fast path {a} != general path {b}"
            assert _stored(fast, shape.key) == _stored(general, shape.key), s


@settings(max_examples=int(os.environ.get("KUDUSQL_DIFF_EXAMPLES", "40")))
@given(data=st.data())
def test_fast_paths_agree_with_the_general_path(data: st.DataObject) -> None:
    shape = data.draw(st.sampled_from(SHAPES), label="shape")
    stmts = data.draw(st.lists(statements(shape), min_size=1, max_size=12), label="statements")
    run_both(shape, stmts)


CASES = [
    # Item 1 of issue 31: a string key routed as the number it converts to.
    (
        SHAPES[0],
        [
            Statement("INSERT INTO t VALUES (3, 'a')"),
            Statement("INSERT INTO t VALUES ('3', 'dup')"),
        ],
    ),
    (SHAPES[1], [Statement("INSERT INTO t VALUES ('2025-06-01', 1, 1.0)")]),
    (
        SHAPES[1],
        [
            Statement(
                "INSERT INTO t VALUES (?, ?, ?)",
                [("2024-08-02", 1, 1.0), ("2024-03-01", 2, 2.0)],
                many=True,
            )
        ],
    ),
    # Items 3 and 7: a decimal literal into DOUBLE is the nearest double; 1.7 is no BIGINT.
    (
        SHAPES[1],
        [
            Statement(
                "INSERT INTO t VALUES (DATE '2024-08-02', 1, 1.2), (DATE '2024-08-02', 2, 0.3)"
            )
        ],
    ),
    (SHAPES[1], [Statement("INSERT INTO t (day, id) VALUES (DATE '2024-08-02', 1.7)")]),
    # Issue 32: a key out of its column's range or precision matches no row; a timestamp
    # outside Impala's range is a row error on the row path and the batch path alike.
    (
        SHAPES[4],
        [
            Statement("INSERT INTO t VALUES (1.5, '2024-01-01')"),
            Statement("SELECT * FROM t WHERE k = ?", [D("100.5")]),
            Statement("SELECT * FROM t WHERE k = ?", [D("1.555")]),
            Statement("SELECT * FROM t WHERE k = ?", [D("1.5")]),
            Statement("SELECT * FROM t WHERE k < 1000 AND k > -1000"),
            Statement("SELECT * FROM t WHERE k IN (100.5, 1.5)"),
            Statement("INSERT INTO t VALUES (?, ?)", [D("2.5"), datetime.datetime(1300, 1, 1)]),
            Statement("INSERT INTO t VALUES (3.5, '1300-01-01'), (4.5, '2024-01-01')"),
        ],
    ),
    (
        SHAPES[3],
        [
            Statement("INSERT INTO t VALUES (1, 1), (99, 2)"),
            Statement("SELECT * FROM t WHERE k = 300"),
            Statement("SELECT * FROM t WHERE k = ?", [300]),
            Statement("SELECT * FROM t WHERE k < 300 ORDER BY 1"),
            Statement("SELECT * FROM t WHERE k > -300 AND k IN (1, 300, 99999999999) ORDER BY 1"),
        ],
    ),
]


@pytest.mark.parametrize(("shape", "stmts"), CASES)
def test_known_cases_agree(shape: Shape, stmts: list[Statement]) -> None:
    run_both(shape, stmts)
