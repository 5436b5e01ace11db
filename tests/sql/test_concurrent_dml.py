"""UPDATE is a read-modify-write: concurrent `SET v = v + 1` statements from several
connections to one database lose no increment (each holds off the table's other
writers between its read and its write)."""

from __future__ import annotations

import threading
from pathlib import Path

import kudusql
from kudusql.dbapi.connection import Connection
from kudusql.engine.session import Session


def test_concurrent_increments_are_not_lost(tmp_path: Path) -> None:
    main = kudusql.connect(str(tmp_path / "db"), maintenance=False, sync=False)
    main.execute(
        "CREATE TABLE c (id BIGINT PRIMARY KEY, v BIGINT) PARTITION BY HASH (id) PARTITIONS 2"
    )
    main.execute("INSERT INTO c VALUES (1, 0), (2, 0)")
    db = main.session.db
    threads, per = 3, 25
    errors: list[BaseException] = []

    def worker() -> None:
        conn = Connection(Session(db, owns_db=False))
        try:
            for _ in range(per):
                conn.execute("UPDATE c SET v = v + 1 WHERE id IN (1, 2)")
        except BaseException as e:
            errors.append(e)

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    got = main.execute("SELECT id, v FROM c ORDER BY id").fetchall()
    assert got == [(1, threads * per), (2, threads * per)]
    main.close()
