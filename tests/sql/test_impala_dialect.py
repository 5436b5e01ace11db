"""Impala's dialect through the DB-API: result types and labels of Impala's functions,
timestamps outside Impala's range from parameters, errors located in the user's SQL.
(The golden files ``impala_lexical``, ``impala_functions`` and ``errors`` hold the rest.)"""

from __future__ import annotations

import datetime
from collections.abc import Iterator

import pytest

import kudusql
from kudusql.common.errors import ProgrammingError


@pytest.fixture
def conn() -> Iterator[kudusql.Connection]:
    c = kudusql.connect(":memory:", maintenance=False, sync=False)
    c.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, s STRING, ts TIMESTAMP) "
        "PARTITION BY HASH (id) PARTITIONS 2"
    )
    c.execute("INSERT INTO t VALUES (1, 'abcdef', '2014-02-14 16:21:01')")
    yield c
    c.close()


def test_result_types_are_impalas(conn: kudusql.Connection) -> None:
    cur = conn.execute(
        "SELECT unix_timestamp(ts), max_tinyint(), min_smallint(), max_int(), factorial(3), "
        "from_unixtime(0), now(), days_add(CAST(ts AS DATE), 1), CAST(1 AS DECIMAL) FROM t"
    )
    assert cur.description is not None
    types = [d[1] for d in cur.description]
    assert types == [
        "BIGINT",
        "TINYINT",
        "SMALLINT",
        "INT",
        "BIGINT",
        "STRING",
        "TIMESTAMP",
        "DATE",
        "DECIMAL",
    ]
    assert cur.description[-1][4:6] == (9, 0)  # precision, scale


def test_columns_keep_the_labels_of_what_the_user_wrote(conn: kudusql.Connection) -> None:
    """A column whose expression kudusql rewrites for DuckDB is labelled as DuckDB labels
    the expression as written (the rewritten SQL is not the user's)."""
    cur = conn.execute(
        "SELECT from_unixtime(0, 'yyyy'), CAST(s AS VARCHAR(2)), CAST('x' AS TIMESTAMP), "
        "s LIKE 'a\\_%', unix_timestamp('2014', 'yyyy') AS u, id + 1 FROM t"
    )
    assert cur.description is not None
    assert [d[0] for d in cur.description] == [
        "from_unixtime(0, 'yyyy')",
        "CAST(s AS VARCHAR(2))",
        "CAST('x' AS TIMESTAMP)",
        "(s ~~ 'a\\_%')",
        "u",
        "(id + 1)",
    ]
    assert cur.fetchall() == [("1970", "ab", None, False, 1388534400, 2)]


def test_a_timestamp_parameter_out_of_range_is_a_row_error(conn: kudusql.Connection) -> None:
    """A ``datetime`` parameter binds as a TIMESTAMP literal, which keeps its value: out
    of Impala's range it fails its row (a CAST there would be NULL, losing the value)."""
    cur = conn.cursor()
    cur.execute("INSERT INTO t (id, ts) VALUES (?, ?)", (2, datetime.datetime(1300, 1, 1)))
    assert cur.rowcount == 0
    assert "outside 1400-01-01..9999-12-31" in cur.warnings[1]
    cur.executemany("INSERT INTO t (id, ts) VALUES (?, ?)", [(3, datetime.datetime(1300, 1, 1))])
    assert cur.rowcount == 0
    cur.execute("INSERT INTO t (id, ts) VALUES (?, CAST(? AS TIMESTAMP))", (4, "1300-01-01"))
    assert cur.rowcount == 1  # the CAST is NULL, as in Impala
    assert conn.execute("SELECT id, ts FROM t WHERE id > 1").fetchall() == [(4, None)]


def test_impala_functions_are_defined_when_first_called(conn: kudusql.Connection) -> None:
    runner = conn.session.runner
    conn.execute("SELECT id FROM t").fetchall()
    assert runner.functions == set()
    conn.execute("SELECT days_add(ts, 1), max_int() FROM t").fetchall()
    assert runner.functions == {"days_add", "max_int"}


def test_an_error_points_into_its_statement_of_a_script(conn: kudusql.Connection) -> None:
    with pytest.raises(ProgrammingError) as e:
        conn.execute("SELECT 1;\nSELECT s,\n  nope FROM t")
    assert str(e.value).startswith('error at line 3, column 3: Referenced column "nope" not found')
    assert str(e.value).endswith("\n    nope FROM t\n    ^")


def test_an_error_about_a_bound_value_has_no_caret(conn: kudusql.Connection) -> None:
    """A parameter's value is not in the statement's text: nothing to point at."""
    with pytest.raises(kudusql.DataError) as e:
        conn.execute("SELECT CAST(? AS INT)", ("abc",))
    assert str(e.value) == "Could not convert string 'abc' to INT"
