"""SQL through the DB-API against a cluster, and against an embedded database.

Run: ``python -m benchmarks.bench_cluster_sql [--rows N] [--lookups N] [--tservers 3]``.
It starts a local cluster (a master and ``--tservers`` tablet servers as processes on
loopback ports, ``kudusql.cluster.launcher.MiniCluster``) and opens a fresh embedded
database, creates the same table on both (``k BIGINT`` key, HASH into 6 tablets, five
value columns), then measures on each:

- ``executemany`` INSERT of ``--rows`` rows (default 200,000) in statements of 10,000
  parameter rows: rows per second (issue 35's goal on the cluster: at least 50,000);
- point lookups ``SELECT * FROM t WHERE k = ?`` one at a time (``--lookups``, default
  5,000, random existing keys): p50 and p99 per statement (goal on the cluster: p50 at
  most 300 µs);
- ``UPDATE t SET a = ? WHERE k = ?`` one at a time (a fifth as many): p50 and p99.

Both sides acknowledge durable writes (the embedded database with ``wal_fsync="batch"``,
as a tablet server). It prints each figure for both modes and the ratio; it asserts
nothing.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import kudusql
from kudusql.cluster.launcher import MiniCluster
from kudusql.dbapi import Connection

DDL = (
    "CREATE TABLE t (k BIGINT PRIMARY KEY, a BIGINT, b DOUBLE, s STRING, d DATE, i INT) "
    "PARTITION BY HASH (k) PARTITIONS 6"
)
INSERT = "INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)"
STATEMENT_ROWS = 10_000


def rows(start: int, n: int) -> list[tuple[object, ...]]:
    import datetime

    day = datetime.date(2020, 1, 1)
    return [
        (k, k * 7, k / 3, f"row-{k:016d}", day + datetime.timedelta(days=k % 1000), k % 1000)
        for k in range(start, start + n)
    ]


def percentiles(samples: list[float]) -> tuple[float, float]:
    samples = sorted(samples)
    return statistics.median(samples), samples[int(len(samples) * 0.99) - 1]


def measure(conn: Connection, n_rows: int, lookups: int, seed: int) -> dict[str, float]:
    cur = conn.cursor()
    cur.execute(DDL)
    start = time.perf_counter()
    for first in range(0, n_rows, STATEMENT_ROWS):
        cur.executemany(INSERT, rows(first, min(STATEMENT_ROWS, n_rows - first)))
    insert_s = time.perf_counter() - start
    rng = random.Random(seed)

    def timed(sql: str, params: Callable[[], tuple[object, ...]], n: int) -> list[float]:
        out = []
        for _ in range(n):
            p = params()
            t0 = time.perf_counter()
            cur.execute(sql, p)
            if cur.description is not None:
                cur.fetchall()
            out.append(time.perf_counter() - t0)
        return out

    get = "SELECT * FROM t WHERE k = ?"
    timed(get, lambda: (rng.randrange(n_rows),), 200)  # warm-up: plans and connections
    lookup_p50, lookup_p99 = percentiles(timed(get, lambda: (rng.randrange(n_rows),), lookups))
    upd = "UPDATE t SET a = ? WHERE k = ?"
    update_p50, update_p99 = percentiles(
        timed(upd, lambda: (rng.randrange(10**9), rng.randrange(n_rows)), max(1, lookups // 5))
    )
    return {
        "insert_rows_per_s": n_rows / insert_s,
        "lookup_p50_us": lookup_p50 * 1e6,
        "lookup_p99_us": lookup_p99 * 1e6,
        "update_p50_us": update_p50 * 1e6,
        "update_p99_us": update_p99 * 1e6,
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_cluster_sql")
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--lookups", type=int, default=5_000)
    p.add_argument("--tservers", type=int, default=3)
    p.add_argument("--seed", type=int, default=35)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        with kudusql.connect(str(work / "embedded"), wal_fsync="batch") as conn:
            embedded = measure(conn, args.rows, args.lookups, args.seed)
        cluster = MiniCluster(work / "cluster")
        cluster.start(args.tservers)
        try:
            url = f"kudusql://{cluster.master_address}?secret_file={cluster.secret_file}"
            with kudusql.connect(url) as conn:
                remote = measure(conn, args.rows, args.lookups, args.seed)
        finally:
            cluster.stop()
    print(
        f"{args.rows:,} rows, {args.lookups:,} lookups, {args.tservers} tablet servers, 6 tablets"
    )
    print(f"{'':<28} {'embedded':>10} {'cluster':>10} {'cluster/embedded':>17}  goal")
    goals = {"insert_rows_per_s": ">= 50,000", "lookup_p50_us": "<= 300"}
    for key, label in (
        ("insert_rows_per_s", "executemany INSERT (rows/s)"),
        ("lookup_p50_us", "point lookup p50 (µs)"),
        ("lookup_p99_us", "point lookup p99 (µs)"),
        ("update_p50_us", "UPDATE by key p50 (µs)"),
        ("update_p99_us", "UPDATE by key p99 (µs)"),
    ):
        e, c = embedded[key], remote[key]
        print(f"{label:<28} {e:>10,.0f} {c:>10,.0f} {c / e:>16.2f}x  {goals.get(key, '')}")


if __name__ == "__main__":
    main()
