"""DB-API hygiene: bad paths and option values give a clear PEP 249 error (never a raw
Python exception) and create nothing; a parameter binds only as a value, never as a
table, column or other name; background maintenance reports its errors through the
``logging`` module, never on the host program's stderr."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import kudusql.dbapi as dbapi
from kudusql.common.errors import Error, OperationalError, ProgrammingError

ROOT = str(Path(__file__).resolve().parents[2])


# -- connect: paths ----------------------------------------------------------------------------
def test_a_path_that_is_a_file(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    for kw in ({}, {"read_only": True}):
        with pytest.raises(OperationalError, match="not a directory") as e:
            dbapi.connect(str(f), **kw)
        assert str(f) in str(e.value)
    assert f.read_text() == "x"


def test_a_path_in_a_missing_parent(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "db"
    with pytest.raises(OperationalError) as e:
        dbapi.connect(str(path))
    assert "does not exist" in str(e.value) and str(tmp_path / "missing") in str(e.value)
    assert not (tmp_path / "missing").exists()
    with pytest.raises(OperationalError, match="no database"):
        dbapi.connect(str(path), read_only=True)


@pytest.mark.parametrize("path", [None, 3, b"db", "", ["db"]])
def test_a_path_of_the_wrong_kind(path: Any) -> None:
    with pytest.raises(ProgrammingError, match="path"):
        dbapi.connect(path)


def test_paths_without_permission(tmp_path: Path) -> None:
    """A directory where the database cannot be made (``/sys`` refuses even root) and,
    unless this runs as root (which passes every permission check), directories the
    user may not read or write."""
    cases: list[tuple[str, dict[str, Any]]] = [(f"/sys/kudusql-{os.getpid()}", {})]
    locked, readonly = tmp_path / "locked", tmp_path / "readonly"
    if os.geteuid() != 0:
        locked.mkdir()
        (locked / "db").mkdir()
        os.chmod(locked, 0o000)  # may not look into it
        readonly.mkdir()
        os.chmod(readonly, 0o555)  # may not create in it
        cases += [
            (str(locked / "db"), {}),
            (str(locked / "db"), {"read_only": True}),
            (str(readonly / "db"), {}),
        ]
    try:
        for path, kw in cases:
            with pytest.raises(OperationalError) as e:
                dbapi.connect(path, **kw)
            msg = str(e.value)
            assert path in msg and ("not permitted" in msg or "denied" in msg), msg
    finally:
        for d in (locked, readonly):
            if d.exists():
                os.chmod(d, 0o755)


# -- connect: options --------------------------------------------------------------------------
BAD_OPTIONS: list[tuple[dict[str, Any], str]] = [
    ({"threads": -1}, "threads"),
    ({"threads": "x"}, "threads"),
    ({"flush_threshold_bytes": "x"}, "flush_threshold_bytes"),
    ({"wal_fsync": "sometimes"}, "wal_fsync"),
    ({"read_only": "yes"}, "read_only"),
    ({"maintenance": "no"}, "maintenance"),
    ({"bogus": 1}, "bogus"),
    ({"rows_per_page": 0}, "rows_per_page"),
    ({"sync": "x"}, "sync"),
    ({"history_max_age_s": "forever"}, "history_max_age_s"),
    ({"abort_on_error": "x"}, "abort_on_error"),
    ({"dml_batch_rows": -1}, "dml_batch_rows"),
]


@pytest.mark.parametrize(("options", "name"), BAD_OPTIONS)
def test_bad_options_name_the_option_and_create_nothing(
    tmp_path: Path, options: dict[str, Any], name: str
) -> None:
    path = tmp_path / "db"
    with pytest.raises(ProgrammingError) as e:
        dbapi.connect(str(path), **options)
    assert name in str(e.value)
    assert not path.exists()


# -- parameters bind only as values ------------------------------------------------------------
@pytest.fixture
def conn() -> Any:
    c = dbapi.connect(":memory:")
    c.execute("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    c.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    yield c
    c.close()


AS_NAMES: list[tuple[str, Any]] = [
    ("SELECT * FROM ?", ["t"]),
    ("SELECT * FROM default.?", ["t"]),
    ("SELECT count(*) FROM ? WHERE k = ?", ["t", 1]),
    ("SELECT * FROM t JOIN ? ON true", ["t"]),
    ("SELECT * FROM t WHERE k IN (SELECT k FROM ?)", ["t"]),
    ("SELECT * FROM t AS ?", ["x"]),
    ("SELECT k AS ? FROM t", ["x"]),
    ("SELECT k AS ? FROM t WHERE k = ?", ["x", 1]),
    ("SELECT t.? FROM t", ["k"]),
    ("WITH ? AS (SELECT 1 AS a) SELECT * FROM t", ["w"]),
    ("SELECT * FROM t ORDER BY ?", [1]),
    ("SELECT v, count(*) FROM t GROUP BY ?", [1]),
    ("SELECT * FROM :tab", {"tab": "t"}),
    ("INSERT INTO ? VALUES (3, 'c')", ["t"]),
    ("INSERT INTO ? VALUES (?, ?)", ["t", 3, "c"]),
    ("INSERT INTO t (?) VALUES (5)", ["k"]),
    ("INSERT INTO t SELECT * FROM ?", ["t"]),
    ("UPDATE ? SET v = 'z' WHERE k = 1", ["t"]),
    ("DELETE FROM ? WHERE k = 2", ["t"]),
    ("DESCRIBE ?", ["t"]),
    ("SHOW CREATE TABLE ?", ["t"]),
    ("CREATE TABLE ? (k INT PRIMARY KEY)", ["u"]),
    ("DROP TABLE ?", ["t"]),
    ("ALTER TABLE ? ADD COLUMNS (w INT)", ["t"]),
    ("COMPUTE STATS ?", ["t"]),
]


@pytest.mark.parametrize(("sql", "params"), AS_NAMES)
def test_a_parameter_never_stands_for_a_name(conn: Any, sql: str, params: Any) -> None:
    with pytest.raises(ProgrammingError, match="parameter") as e:
        conn.execute(sql, params)
    assert "Traceback" not in str(e.value)
    # nothing happened: the table and its rows are as they were
    assert conn.execute("SELECT k, v FROM t ORDER BY k").fetchall() == [(1, "a"), (2, "b")]
    assert [r[0] for r in conn.execute("SHOW TABLES").fetchall()] == ["t"]


def test_a_parameter_never_stands_for_a_name_in_executemany(conn: Any) -> None:
    cur = conn.cursor()
    with pytest.raises(ProgrammingError, match="parameter"):
        cur.executemany("INSERT INTO ? VALUES (?, ?)", [("t", 3, "c"), ("t", 4, "d")])
    with pytest.raises(ProgrammingError, match="parameter"):
        cur.executemany("DELETE FROM ? WHERE k = ?", [("t", 1)])
    assert conn.execute("SELECT count(*) FROM t").fetchall() == [(2,)]


AS_VALUES: list[tuple[str, Any, list[tuple[Any, ...]]]] = [
    ("SELECT v FROM t WHERE k = ?", [1], [("a",)]),
    ("SELECT v FROM t WHERE k = :k", {"k": 2}, [("b",)]),
    ("SELECT v FROM t WHERE k = $1", [2], [("b",)]),
    ("SELECT ?, k FROM t ORDER BY k", ["k"], [("k", 1), ("k", 2)]),
    ("SELECT v AS x FROM t WHERE k IN (?, ?) ORDER BY k", [1, 2], [("a",), ("b",)]),
    ("SELECT k FROM t WHERE k BETWEEN ? AND ? ORDER BY k", [0, 1], [(1,)]),
    ("SELECT k FROM t ORDER BY k LIMIT ?", [1], [(1,)]),
    ("SELECT CAST(? AS INT) + 1", ["3"], [(4,)]),
    ("SELECT v FROM t WHERE v LIKE ? ORDER BY v", ["%"], [("a",), ("b",)]),
    ("SELECT k FROM t ORDER BY k + ?", [0], [(1,), (2,)]),
]


@pytest.mark.parametrize(("sql", "params", "want"), AS_VALUES)
def test_parameters_as_values_still_bind(conn: Any, sql: str, params: Any, want: Any) -> None:
    assert conn.execute(sql, params).fetchall() == want


def test_parameters_as_values_in_dml(conn: Any) -> None:
    conn.execute("INSERT INTO t VALUES (?, ?)", [3, "c"])
    conn.execute("UPDATE t SET v = ? WHERE k = ?", ["z", 1])
    conn.execute("DELETE FROM t WHERE k = ?", [2])
    conn.cursor().executemany("UPSERT INTO t VALUES (?, ?)", [(4, "d"), (5, "e")])
    got = conn.execute("SELECT k, v FROM t ORDER BY k").fetchall()
    assert got == [(1, "z"), (3, "c"), (4, "d"), (5, "e")]


# -- background errors go to logging, not stderr -----------------------------------------------
HOST = """
import logging, sys, time
import pyarrow as pa
{setup}
from kudusql.storage.tables.database import Database
from kudusql.common.options import TabletOptions
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.storage.fs import faults

schema = Schema.build([ColumnSchema("k", DataType.parse("BIGINT"))], ["k"])
opts = TabletOptions(sync=False, flush_threshold_bytes=1, flush_threshold_s=0)
db = Database(sys.argv[1], opts)
t = db.create_table("t", schema)
faults.inject("rename", path_contains="tablet.meta", times=10**9)  # every superblock save
t.insert(pa.table({{"k": pa.array(range(100), pa.int64())}}))
deadline = time.monotonic() + 60
while not db.maintenance.errors and time.monotonic() < deadline:
    time.sleep(0.05)
assert db.maintenance.errors, "no background error happened"
faults.clear()
db.close()
print("DONE")
"""


def test_background_errors_never_reach_stderr(tmp_path: Path) -> None:
    """A host program that configured no logging: a failing background flush prints
    nothing on its stderr (no traceback, no message)."""
    r = subprocess.run(
        [sys.executable, "-c", HOST.format(setup=""), str(tmp_path / "db")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ROOT},
        timeout=300,
    )
    assert r.stdout.strip() == "DONE", r.stderr
    assert r.stderr == ""


def test_background_errors_go_to_the_modules_logger(tmp_path: Path) -> None:
    setup = (
        "logging.basicConfig(stream=sys.stdout, level=logging.WARNING,"
        " format='LOG %(name)s %(levelname)s %(message)s')"
    )
    r = subprocess.run(
        [sys.executable, "-c", HOST.format(setup=setup), str(tmp_path / "db")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ROOT},
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    logged = [line for line in r.stdout.splitlines() if line.startswith("LOG ")]
    assert any(
        line.startswith("LOG kudusql.storage.tablet.maintenance ERROR") for line in logged
    ), r.stdout
    assert "Traceback" in r.stdout  # the traceback went to the host's handler


def test_compaction_worker_stderr_goes_to_logging(caplog: pytest.LogCaptureFixture) -> None:
    """What the worker process writes on its stderr reaches the parent's logging."""
    import logging

    from kudusql.storage.tablet.compaction_worker import CompactionWorker
    from tests.support.noisy_job import NoisyJob

    w = CompactionWorker()
    try:
        with caplog.at_level(logging.WARNING, logger="kudusql.storage.tablet.compaction_worker"):
            assert w.run(NoisyJob("a line on stderr")) == "ran"
            w.close()
        assert any("a line on stderr" in r.getMessage() for r in caplog.records)
    finally:
        w.close()


def test_errors_are_kudusql_errors(tmp_path: Path) -> None:
    """Everything above raises the PEP 249 tree (a catch-all ``except Error`` works)."""
    for args, kw in (((str(tmp_path / "a" / "b"),), {}), ((None,), {}), (("x",), {"threads": -1})):
        with pytest.raises(Error):
            dbapi.connect(*args, **kw)
