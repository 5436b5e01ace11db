"""Read-only processes never see half of a multi-tablet statement (issue 31, item 11).

A writer moves money between accounts in different tablets with one UPDATE statement
per transfer (one write batch, one transaction across tablets); reader processes open
the database read-only over and over (as a new process would) and sum the balances.
Every sum must be the total, every count the number of accounts; at the end, the
table holds exactly what the writer's books say, also after a reopen."""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import kudusql
from tests.support.timing import scaled

ACCOUNTS = 40
INITIAL = 1000
TOTAL = ACCOUNTS * INITIAL

READER = textwrap.dedent(
    """
    import sys, time
    import kudusql
    path, seconds = sys.argv[1], float(sys.argv[2])
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        c = kudusql.connect(path, read_only=True)
        try:
            row = c.cursor().execute("SELECT sum(balance), count(*) FROM accounts").fetchone()
        finally:
            c.close()
        print(row[0], row[1], flush=True)
    """
)


def run_bank(path: str, seconds: float, readers: int, seed: int) -> None:
    conn = kudusql.connect(path, sync=False, wal_fsync="none")
    cur = conn.cursor()
    cur.execute(
        "CREATE TABLE accounts (id INT PRIMARY KEY, balance BIGINT NOT NULL) "
        "PARTITION BY HASH (id) PARTITIONS 4"
    )
    cur.executemany("INSERT INTO accounts VALUES (?, ?)", [(i, INITIAL) for i in range(ACCOUNTS)])
    books = {i: INITIAL for i in range(ACCOUNTS)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", READER, path, str(seconds)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(readers)
    ]
    stop = threading.Event()
    transfers = [0]

    def write() -> None:
        rng = random.Random(seed)
        while not stop.is_set():
            a, b = rng.sample(range(ACCOUNTS), 2)
            amount = rng.randint(1, 50)
            cur.execute(
                "UPDATE accounts SET balance = balance + CASE WHEN id = ? THEN ? ELSE ? END "
                "WHERE id IN (?, ?)",
                (a, -amount, amount, a, b),
            )
            assert cur.rowcount == 2
            books[a] -= amount
            books[b] += amount
            transfers[0] += 1

    writer = threading.Thread(target=write)
    writer.start()
    outputs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=scaled(seconds + 120))
            assert p.returncode == 0, err
            outputs.append(out)
    finally:
        stop.set()
        writer.join()
        for p in procs:
            if p.poll() is None:
                p.kill()
    reads = [line.split() for out in outputs for line in out.splitlines()]
    assert all(len(out.splitlines()) > 0 for out in outputs)  # every reader read
    assert transfers[0] > 0
    wrong = [r for r in reads if r != [str(TOTAL), str(ACCOUNTS)]]
    assert not wrong, f"{len(wrong)} of {len(reads)} reads saw half a transfer: {wrong[:5]}"
    got = dict(cur.execute("SELECT id, balance FROM accounts").fetchall())
    assert got == books
    conn.close()
    with kudusql.connect(path, read_only=True) as again:
        assert dict(again.cursor().execute("SELECT id, balance FROM accounts").fetchall()) == books


def test_readers_see_whole_transfers(tmp_path: Path) -> None:
    run_bank(str(tmp_path / "bank"), seconds=4, readers=2, seed=1)


@pytest.mark.slow
def test_readers_see_whole_transfers_for_a_minute(tmp_path: Path) -> None:
    run_bank(str(tmp_path / "bank"), seconds=60, readers=3, seed=2)
