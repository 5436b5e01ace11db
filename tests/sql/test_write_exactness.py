"""Values are stored exactly as SQL means them, on the row path and the batch path alike:
keys routed after the conversion the tablets apply, decimal literals as the nearest
double, and no silent loss of precision (issue 31, items 1, 3 and 7)."""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Iterator
from typing import Any

import pytest

import kudusql

D = decimal.Decimal


@pytest.fixture(params=[True, False], ids=["fast", "general"])
def conn(request: pytest.FixtureRequest) -> Iterator[kudusql.Connection]:
    c = kudusql.connect(":memory:", maintenance=False, sync=False, fast_paths=request.param)
    yield c
    c.close()


def q(c: kudusql.Connection, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    return c.cursor().execute(sql, params).fetchall()


def test_a_string_key_goes_to_the_tablet_of_its_number(conn: kudusql.Connection) -> None:
    conn.execute("CREATE TABLE i (k INT PRIMARY KEY, v STRING) PARTITION BY HASH (k) PARTITIONS 4")
    for k in range(1, 7):
        conn.execute(f"INSERT INTO i VALUES ({k}, 'x')")
    cur = conn.cursor().execute("INSERT INTO i VALUES ('3', 'dup')")
    assert cur.rowcount == 0
    assert "AlreadyPresent" in cur.warnings[1]
    cur.executemany("UPSERT INTO i VALUES (?, ?)", [("4", "up"), ("5", "up")])
    assert q(conn, "SELECT count(*), count(DISTINCT k) FROM i") == [(6, 6)]
    assert q(conn, "SELECT v FROM i WHERE k = 4") == [("up",)]


def test_a_string_date_key_is_routed_and_range_checked(conn: kudusql.Connection) -> None:
    conn.execute(
        "CREATE TABLE r (day DATE PRIMARY KEY, v INT) PARTITION BY RANGE (day) ("
        "PARTITION DATE '2024-01-01' <= VALUES < DATE '2024-07-01', "
        "PARTITION DATE '2024-07-01' <= VALUES < DATE '2025-01-01')"
    )
    cur = conn.cursor().execute("INSERT INTO r VALUES ('2025-06-01', 1)")
    assert cur.rowcount == 0
    assert "No tablet covering the requested range partition" in cur.warnings[1]
    cur.executemany("INSERT INTO r VALUES (?, ?)", [(f"2024-08-0{i}", i) for i in range(1, 5)])
    assert cur.rowcount == 4
    assert q(conn, "SELECT v FROM r WHERE day = DATE '2024-08-02'") == [(2,)]
    assert q(conn, "SELECT v FROM r WHERE day = ?", (datetime.date(2024, 8, 3),)) == [(3,)]
    conn.execute("DELETE FROM r WHERE day = DATE '2024-08-04'")
    assert q(conn, "SELECT count(*) FROM r") == [(3,)]
    # Each tablet holds only its own range: the second tablet has all four rows' keys.
    tablets = conn.session.db.table("r").tablets()
    assert [t.count_rows() for t in tablets] == [0, 3]


def test_decimal_literals_into_double_are_the_nearest_double(conn: kudusql.Connection) -> None:
    conn.execute("CREATE TABLE f (id BIGINT PRIMARY KEY, x DOUBLE, y FLOAT)")
    conn.execute("INSERT INTO f VALUES (1, 1.2, 1.2), (2, 0.3, 0.3)")
    conn.execute("INSERT INTO f VALUES (3, 0.1, 0.1)")
    conn.cursor().executemany("INSERT INTO f VALUES (?, ?, ?)", [(4, D("0.3"), D("0.3"))])
    conn.execute("INSERT INTO f SELECT 5, 1.2 + 0, 0.3")  # DuckDB's DECIMAL result
    got = q(conn, "SELECT id, x, y FROM f ORDER BY id")
    f32 = pytest.approx  # FLOAT holds the float nearest the double
    assert [(i, x) for i, x, _ in got] == [(1, 1.2), (2, 0.3), (3, 0.1), (4, 0.3), (5, 1.2)]
    assert [y for _, _, y in got] == [f32(1.2), f32(0.3), f32(0.1), f32(0.3), f32(0.3)]


@pytest.mark.parametrize(
    ("sql", "params"),
    [
        ("INSERT INTO b (id) VALUES (1.7)", None),
        ("INSERT INTO b (id) VALUES (?)", (1.7,)),
        ("INSERT INTO b (id) VALUES (?)", (D("1.7"),)),
        ("INSERT INTO b (id, n) VALUES (1, 2.5)", None),
        ("INSERT INTO b (id, d) VALUES (1, TIMESTAMP '2024-01-01 05:00:00')", None),
        ("INSERT INTO b (id, f) VALUES (1, 1e300)", None),
        ("INSERT INTO b (id, f) VALUES (?, ?)", (1, 16777217)),
    ],
)
def test_a_value_that_would_lose_precision_is_a_row_error(
    conn: kudusql.Connection, sql: str, params: Any
) -> None:
    conn.execute("CREATE TABLE b (id BIGINT PRIMARY KEY, n INT, d DATE, f FLOAT)")
    cur = conn.cursor().execute(sql, params)
    assert cur.rowcount == 0
    assert "invalid value" in cur.warnings[1], cur.warnings
    assert q(conn, "SELECT count(*) FROM b") == [(0,)]


def test_exact_values_of_other_types_convert(conn: kudusql.Connection) -> None:
    conn.execute("CREATE TABLE e (id BIGINT PRIMARY KEY, d DATE, m DECIMAL(18,2), f FLOAT)")
    cur = conn.cursor()
    cur.execute("INSERT INTO e VALUES (2.0, TIMESTAMP '2024-01-02 00:00:00', 7, 16777216)")
    cur.executemany(
        "INSERT INTO e VALUES (?, ?, ?, ?)",
        [(3.0, datetime.datetime(2024, 1, 3), 2**40, 1.5), ("4", "2024-01-04", "1.25", "2.5")],
    )
    assert q(conn, "SELECT * FROM e ORDER BY id") == [
        (2, datetime.date(2024, 1, 2), D("7.00"), 16777216.0),
        (3, datetime.date(2024, 1, 3), D("1099511627776.00"), 1.5),
        (4, datetime.date(2024, 1, 4), D("1.25"), 2.5),
    ]


def test_a_value_means_the_same_whatever_its_batch(conn: kudusql.Connection) -> None:
    """A column of mixed Python types converts each value as it would alone."""
    conn.execute("CREATE TABLE m (id BIGINT PRIMARY KEY, n BIGINT)")
    rows = [(1, 2**60 + 1), (2, 2.0), (3, "7"), (4, True), (5, 2.5), (6, "x"), (7, None)]
    cur = conn.cursor()
    cur.executemany("INSERT INTO m VALUES (?, ?)", rows)
    together = q(conn, "SELECT * FROM m ORDER BY id")
    errors_together = cur.warnings
    conn.execute("DELETE FROM m")
    alone = []
    for r in rows:
        cur.execute("INSERT INTO m VALUES (?, ?)", r)
        alone += [w.replace("row 0", f"row {r[0] - 1}") for w in cur.warnings[1:]]
    assert together == q(conn, "SELECT * FROM m ORDER BY id")
    assert together == [(1, 2**60 + 1), (2, 2), (3, 7), (4, 1), (7, None)]
    # The same rows fail for the same reason (a failing value of a mixed column is
    # named by its text: '2.5').
    assert [w.split(" invalid value")[0] for w in errors_together[1:]] == [
        w.split(" invalid value")[0] for w in alone
    ]
    assert len(alone) == 2
