"""Session.interrupt (what Ctrl-C in the shell calls): a statement stops between storage
scan batches or before its next DML write, raises OperationalError, and the session
stays usable; an interrupt never leaks into the next statement."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pyarrow as pa
import pytest

import kudusql
from kudusql.common.errors import OperationalError
from kudusql.common.row_operations import WriteOp
from tests.support.timing import scaled

DELETE = WriteOp.DELETE
ROWS = 400_000


@pytest.fixture
def conn() -> Iterator[kudusql.Connection]:
    c = kudusql.connect(":memory:", maintenance=False, sync=False, scan_batch_rows=256)
    c.execute(
        "CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT) PARTITION BY HASH (id) PARTITIONS 2"
    )
    ids = pa.array(range(ROWS), pa.int64())
    c.session.db.table("t").insert(pa.table({"id": ids, "v": ids}))
    yield c
    c.close()


def test_interrupt_stops_a_scan_between_batches(conn: kudusql.Connection) -> None:
    real_scan = conn.session.runner.read_scan
    calls = []

    def read_scan(*a: object, **kw: object) -> pa.Table:
        calls.append(1)
        conn.session.interrupt()  # Ctrl-C arrives as the scan starts
        return real_scan(*a, **kw)  # type: ignore[arg-type]

    conn.session.runner.read_scan = read_scan  # type: ignore[method-assign]
    with pytest.raises(OperationalError, match="cancelled"):
        conn.execute("SELECT sum(v) FROM t")
    assert calls == [1]
    # the next statement runs normally (the interrupt does not leak)
    conn.session.runner.read_scan = real_scan  # type: ignore[method-assign]
    assert conn.execute("SELECT count(*) FROM t").fetchall() == [(ROWS,)]


@pytest.mark.timeout(scaled(60))  # the query runs for hours unless interrupted
def test_interrupt_from_another_thread_reaches_duckdb(conn: kudusql.Connection) -> None:
    done = threading.Event()

    def cancel() -> None:  # as a user pressing Ctrl-C until the prompt comes back
        while not done.wait(0.2):
            conn.session.interrupt()

    th = threading.Thread(target=cancel)
    th.start()
    try:
        with pytest.raises(OperationalError, match=r"^statement cancelled$"):
            conn.execute("SELECT count(*) FROM range(100000000) a, range(100000) b")
    finally:
        done.set()
        th.join()


def test_interrupt_before_a_dml_write_applies_nothing_more(conn: kudusql.Connection) -> None:
    s = conn.session
    s.runner.cancelled.set()  # as if Ctrl-C came during the read phase of a DELETE
    with pytest.raises(OperationalError, match="cancelled"):
        s._write(s.db.table("t"), pa.table({"id": pa.array([1], pa.int64())}), ["id"], DELETE)
    assert conn.execute("SELECT count(*) FROM t").fetchall() == [(ROWS,)]


def test_scan_progress_counts_rows_read_out_of_rows_stored(conn: kudusql.Connection) -> None:
    seen: list[tuple[int, int] | None] = []
    real_scan = conn.session.runner.read_scan

    def read_scan(*a: object, **kw: object) -> pa.Table:
        seen.append(conn.session.scan_progress())
        out = real_scan(*a, **kw)  # type: ignore[arg-type]
        seen.append(conn.session.scan_progress())
        return out

    conn.session.runner.read_scan = read_scan  # type: ignore[method-assign]
    assert conn.execute("SELECT count(*) FROM t WHERE v >= 0").fetchall() == [(ROWS,)]
    assert seen == [(0, ROWS), (ROWS, ROWS)]
    assert conn.session.scan_progress() is None


def test_duckdbs_interrupt_is_the_cancelled_error() -> None:
    """However the cancel reaches DuckDB, the user sees kudusql's message."""
    import duckdb

    from kudusql.executor.duck import to_error

    err = to_error(duckdb.InterruptException("INTERRUPT Error: Interrupted!"))
    assert isinstance(err, OperationalError)
    assert str(err) == "statement cancelled"
