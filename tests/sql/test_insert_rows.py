"""Single-row (and few-row) INSERT/UPSERT VALUES statements take the row path
(``Table.write_rows``): the same row counts, warnings, errors and table contents as the
Arrow batch path, on hash- and range-partitioned tables."""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Iterator
from typing import Any

import pytest

import kudusql
from kudusql.common.errors import Error
from kudusql.engine import session as session_mod
from kudusql.storage.tables import table as table_mod

DDL = [
    "CREATE TABLE h (id BIGINT PRIMARY KEY, n INT NOT NULL, s STRING, m DECIMAL(8,2), "
    "d DATE, ts TIMESTAMP, f FLOAT, v VARCHAR(3) DEFAULT 'dv') "
    "PARTITION BY HASH (id) PARTITIONS 3",
    "CREATE TABLE r (k INT PRIMARY KEY, s STRING) PARTITION BY RANGE (k) "
    "(PARTITION VALUES < 10, PARTITION 20 <= VALUES < 30)",
]

D = datetime.date(2024, 5, 6)
T = datetime.datetime(2024, 5, 6, 7, 8, 9, 123456)
M = decimal.Decimal("1.25")
H = "INSERT INTO h (id, n, s, m, d, ts, f) VALUES (?, ?, ?, ?, ?, ?, ?)"

STATEMENTS: list[tuple[str, Any]] = [
    (H, (1, 10, "a", M, D, T, 1.1)),
    (H, (2, 20, None, None, None, None, None)),
    (H, (1, 11, "dup", M, D, T, 1.0)),  # AlreadyPresent
    ("INSERT IGNORE INTO h (id, n) VALUES (?, ?)", (1, 12)),
    ("INSERT IGNORE INTO h (id, n) VALUES (?, ?)", (3, 13)),
    (H, (4, None, "null n", M, D, T, 1.0)),  # NULL in a NOT NULL column
    (H, (None, 1, "null key", M, D, T, 1.0)),
    (H, (5, 2**40, "n too big", M, D, T, 1.0)),
    (H, (6, "abc", "n not a number", M, D, T, 1.0)),
    (H, (7, 7, "scale", decimal.Decimal("1.234"), D, T, 1.0)),
    (H, (8, 8, "int for decimal", 3, "2024-01-02", T, 2)),
    ("INSERT INTO h (id, n, v) VALUES (?, ?, ?)", (9, 9, "truncated")),
    ("INSERT INTO h (id, n) VALUES (10, 1), (11, 2), (10, 3)", None),
    ("INSERT INTO h (id, n) VALUES (12, 1), (1, 2), (13, 3)", None),
    ("UPSERT INTO h (id, n, s) VALUES (?, ?, ?)", (1, 100, "upserted")),
    ("UPSERT INTO h (id, n, s) VALUES (?, ?, ?)", (14, 140, "new")),
    ("INSERT INTO h (id, n, s) VALUES (15, 15, 'literal')", None),
    ("INSERT INTO r VALUES (?, ?)", (1, "in range")),
    ("INSERT INTO r VALUES (?, ?)", (15, "no range")),
    ("INSERT INTO r VALUES (1, 'dup'), (25, 'ok'), (12, 'gap')", None),
]


def connect() -> kudusql.Connection:
    c = kudusql.connect(":memory:", maintenance=False, sync=False)
    for ddl in DDL:
        c.execute(ddl)
    return c


def run(c: kudusql.Connection, abort: bool) -> list[Any]:
    out: list[Any] = []
    if abort:
        c.execute("SET abort_on_error = true")
    cur = c.cursor()
    for sql, params in STATEMENTS:
        try:
            cur.execute(sql, params)
            out.append(("ok", cur.rowcount, cur.warnings))
        except Error as e:
            out.append((type(e).__name__, str(e)))
    out.extend(sorted(c.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in ("h", "r"))
    return out


@pytest.fixture
def both(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Any]]:
    yield (
        (lambda abort: run_with(monkeypatch, abort, row_path=True)),
        (lambda abort: run_with(monkeypatch, abort, row_path=False)),
    )


def run_with(monkeypatch: pytest.MonkeyPatch, abort: bool, *, row_path: bool) -> list[Any]:
    calls: list[int] = []
    real = table_mod.Table.write_rows

    def spy(self: Any, *a: Any, **kw: Any) -> Any:
        calls.append(1)
        return real(self, *a, **kw)

    with monkeypatch.context() as m:
        m.setattr(table_mod.Table, "write_rows", spy)
        if not row_path:
            m.setattr(session_mod, "ROW_PATH_ROWS", 0)
        c = connect()
        try:
            out = run(c, abort)
        finally:
            c.close()
    assert bool(calls) == row_path
    return out


@pytest.mark.parametrize("abort", [False, True])
def test_row_path_equals_batch_path(both: tuple[Any, Any], abort: bool) -> None:
    rows, batch = both
    assert rows(abort) == batch(abort)


def test_row_path_results_and_warnings() -> None:
    c = connect()
    cur = c.cursor()
    cur.execute(H, (1, 10, "a", M, D, T, 1.1))
    assert cur.rowcount == 1
    cur.execute(H, (1, 10, "a", M, D, T, 1.1))
    assert cur.rowcount == 0
    assert any("key already present" in w for w in cur.warnings)
    assert cur.execute("SELECT * FROM h WHERE id = ?", (1,)).fetchall() == [
        (1, 10, "a", M, D, T, pytest.approx(1.1, rel=1e-6), "dv")
    ]
    cur.execute("INSERT INTO r VALUES (?, ?)", (15, "no range"))
    assert cur.rowcount == 0
    assert any("No tablet covering" in w for w in cur.warnings)
    c.execute("SET abort_on_error = true")
    with pytest.raises(kudusql.IntegrityError):
        cur.execute(H, (1, 10, "a", M, D, T, 1.1))
    with pytest.raises(kudusql.DataError):
        cur.execute("INSERT INTO r VALUES (?, ?)", (15, "no range"))
    c.close()


def test_row_path_survives_reopen(tmp_path: Any) -> None:
    path = str(tmp_path / "db")
    c = kudusql.connect(path, maintenance=False)
    c.execute(DDL[0])
    cur = c.cursor()
    for i in range(50):
        cur.execute(H, (i, i, f"s{i}", M, D, T, 0.5))
    c.close()
    c = kudusql.connect(path, maintenance=False)
    assert c.execute("SELECT count(*), sum(n) FROM h").fetchall() == [(50, sum(range(50)))]
    c.close()
