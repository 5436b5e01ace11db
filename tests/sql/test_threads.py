"""Threads (issue 31, item 10): threads sharing one connection, and threads each with its
own connection to the same database (``connect`` twice in one process shares the open
database), move money between accounts in different tablets with read-modify-write
statements while a reader sums the balances. No increment is lost, every read sees the
total, and no error (least of all a raw DuckDB one) reaches a thread."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

import kudusql
from tests.support.timing import WAIT

ACCOUNTS = 24
INITIAL = 500
TOTAL = ACCOUNTS * INITIAL
THREADS = 4
TRANSFERS = 40

TRANSFER = (
    "UPDATE accounts SET balance = balance + CASE WHEN id = ? THEN ? ELSE ? END WHERE id IN (?, ?)"
)
# A read-modify-write through INSERT ... SELECT: takes 1 from a and gives it to b.
SHIFT = (
    "UPSERT INTO accounts SELECT id, balance + CASE WHEN id = ? THEN -1 ELSE 1 END "
    "FROM accounts WHERE id IN (?, ?)"
)


def setup(path: str) -> kudusql.Connection:
    conn = kudusql.connect(path, maintenance=False, sync=False)
    conn.execute(
        "CREATE TABLE accounts (id INT PRIMARY KEY, balance BIGINT NOT NULL) "
        "PARTITION BY HASH (id) PARTITIONS 4"
    )
    conn.cursor().executemany(
        "INSERT INTO accounts VALUES (?, ?)", [(i, INITIAL) for i in range(ACCOUNTS)]
    )
    return conn


def run_threads(
    connection_of: Callable[[int], kudusql.Connection], seed: int, transfers: int = TRANSFERS
) -> list[str]:
    """Every thread's transfers, a reader's sums; returns what went wrong."""
    problems: list[str] = []
    stop = threading.Event()

    def writer(n: int) -> None:
        rng = random.Random(seed * 100 + n)
        conn = connection_of(n)
        try:
            for _ in range(transfers):
                a, b = rng.sample(range(ACCOUNTS), 2)
                cur = conn.cursor()
                if rng.random() < 0.7:
                    amount = rng.randint(1, 9)
                    cur.execute(TRANSFER, (a, -amount, amount, a, b))
                else:
                    cur.execute(SHIFT, (a, a, b))
                if cur.rowcount != 2:
                    problems.append(f"a transfer changed {cur.rowcount} rows")
        except BaseException as e:
            problems.append(f"{type(e).__module__}.{type(e).__name__}: {e}")

    def reader() -> None:
        conn = connection_of(THREADS)
        try:
            while not stop.is_set():
                total, count = (
                    conn.cursor().execute("SELECT sum(balance), count(*) FROM accounts").fetchone()
                )
                if (total, count) != (TOTAL, ACCOUNTS):
                    problems.append(f"a read saw {total} in {count} accounts")
        except BaseException as e:
            problems.append(f"{type(e).__module__}.{type(e).__name__}: {e}")

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(THREADS)]
    read = threading.Thread(target=reader)
    read.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT * 30)
    stop.set()
    read.join(WAIT * 30)
    assert not any(t.is_alive() for t in [*threads, read]), "a thread hung"
    return problems


@pytest.mark.parametrize("shared", [True, False], ids=["one connection", "own connections"])
def test_threads_keep_the_bank_balanced(tmp_path: Path, shared: bool) -> None:
    bank(tmp_path, shared, TRANSFERS)


@pytest.mark.slow
@pytest.mark.parametrize("shared", [True, False], ids=["one connection", "own connections"])
def test_threads_keep_the_bank_balanced_long(tmp_path: Path, shared: bool) -> None:
    bank(tmp_path, shared, TRANSFERS * 25)


def bank(tmp_path: Path, shared: bool, transfers: int) -> None:
    path = str(tmp_path / "bank")
    main = setup(path)
    own: dict[int, kudusql.Connection] = {}

    def connection_of(n: int) -> kudusql.Connection:
        if shared:
            return main
        if n not in own:
            own[n] = kudusql.connect(path)  # shares the database opened by ``main``
        return own[n]

    try:
        problems = run_threads(connection_of, seed=7 if shared else 8, transfers=transfers)
    finally:
        for c in own.values():
            c.close()
    assert not problems, problems[:10]
    rows = main.execute("SELECT sum(balance), count(*) FROM accounts").fetchall()
    assert rows == [(TOTAL, ACCOUNTS)]
    main.close()
    with kudusql.connect(path) as again:
        assert again.execute("SELECT sum(balance) FROM accounts").fetchall() == [(TOTAL,)]


def test_connections_in_one_process_share_the_database(tmp_path: Path) -> None:
    path = str(tmp_path / "db")
    a = kudusql.connect(path, maintenance=False)
    b = kudusql.connect(path)  # no options: whatever the open database has
    a.execute("CREATE TABLE t (k INT PRIMARY KEY)")
    b.execute("INSERT INTO t VALUES (1)")
    assert a.execute("SELECT k FROM t").fetchall() == [(1,)]
    with pytest.raises(kudusql.ProgrammingError, match="other options"):
        kudusql.connect(path, maintenance=True)
    a.close()
    assert b.execute("SELECT count(*) FROM t").fetchall() == [(1,)]  # still open for b
    b.close()
    with kudusql.connect(path) as c:  # the last close closed it: it opens again
        assert c.execute("SELECT count(*) FROM t").fetchall() == [(1,)]
