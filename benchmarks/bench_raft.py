"""Raft replication on a local cluster: what three replicas cost and how fast they heal.

Run: ``python -m benchmarks.bench_raft [--writes N] [--kills K] [--rows N]``. It starts
real processes on loopback ports (``MiniCluster``: one master, four tablet servers, the
default 500 ms Raft heartbeats, so a leader is suspected after 1.5 s; a silent follower
is evicted after ``--failed-follower-s``, default 5 s, where Kudu waits 300 s) and
measures, through the DB-API (``kudusql.connect("kudusql://...")``):

1. **Write latency and throughput, RF 3 vs RF 1**: ``--writes`` single-row INSERT
   statements one at a time (p50, p99), then ``--rows`` rows by ``executemany`` in
   statements of 2,000 (rows/s), on a one-tablet table of each factor. Ratio RF 3 / RF 1.
2. **Failover**: ``--kills`` times, kill -9 the server leading an RF 3 tablet while a
   client writes, and time from the kill to the first INSERT acknowledged after it
   (p50, p99); the killed server restarts on its port and the tablet gets its three
   voters back before the next kill. The issue aims for under 3 s with default timers.
3. **Restoring the replication factor**: kill a follower's server for good; time until
   the tablet has three voters again, none on the dead server (the eviction timeout
   included, and the time after it).
4. **p99 write latency with one busy follower vs none**: single-row INSERTs while one
   follower's server is (a) idle, (b) flushing the tablet every 100 ms (its
   maintenance then merging the rowsets it makes: the compaction the Kudu paper's
   tail-latency argument is about), (c) stopped (SIGSTOP): majority commit waits for
   the fastest follower, so the busy one should barely show.

It prints each figure and ratio; it asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import kudusql
from kudusql.cluster.launcher import Daemon, MiniCluster
from kudusql.cluster.retry import RetryPolicy
from kudusql.cluster.rpc_client import RpcClient
from kudusql.cluster.tserver.messages import FlushTablet
from kudusql.dbapi import Connection

MASTER_FLAGS = ["--tserver-unresponsive-timeout", "3", "--tick-interval", "0.2"]


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, int(len(ordered) * q + 0.5) - 1))]


def p50_p99(samples: list[float]) -> tuple[float, float]:
    return statistics.median(samples), percentile(samples, 0.99)


def create(conn: Connection, name: str, rf: int) -> None:
    conn.execute(f"DROP TABLE IF EXISTS {name}")
    conn.execute(
        f"CREATE TABLE {name} (k BIGINT PRIMARY KEY, v STRING) "
        f"TBLPROPERTIES ('kudu.num_tablet_replicas' = '{rf}')"
    )


def replicas(conn: Connection, name: str) -> list[tuple[str, str]]:
    """(address, role) of each replica of ``name``'s only tablet, as the master sees it."""
    rows = conn.execute(
        "SELECT address, role FROM sys.tablet_replicas WHERE table_name = ?", [name]
    ).fetchall()
    return [(str(a), str(r)) for a, r in rows]


def wait_for(check: object, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.05)


def healthy(conn: Connection, name: str, dead: str | None = None) -> bool:
    found = replicas(conn, name)
    roles = sorted(r for _, r in found)
    return roles == ["FOLLOWER", "FOLLOWER", "LEADER"] and all(a != dead for a, _ in found)


def single_inserts(conn: Connection, name: str, first: int, n: int) -> list[float]:
    cur = conn.cursor()
    out = []
    for k in range(first, first + n):
        t0 = time.perf_counter()
        cur.execute(f"INSERT INTO {name} VALUES (?, ?)", (k, f"v{k}"))
        out.append(time.perf_counter() - t0)
    return out


def bulk_rate(conn: Connection, name: str, first: int, n: int) -> float:
    cur = conn.cursor()
    t0 = time.perf_counter()
    for start in range(first, first + n, 2_000):
        cur.executemany(
            f"INSERT INTO {name} VALUES (?, ?)",
            [(k, f"v{k}") for k in range(start, min(start + 2_000, first + n))],
        )
    return n / (time.perf_counter() - t0)


def daemon_at(cluster: MiniCluster, address: str) -> tuple[int, Daemon]:
    for i, d in enumerate(cluster.tservers):
        if d.address == address:
            return i, d
    raise SystemExit(f"no tablet server at {address}")


def latency_rf3_vs_rf1(conn: Connection, writes: int, rows: int) -> None:
    print("\n1. write latency and throughput, RF 3 vs RF 1 (one tablet)")
    figures = {}
    for rf in (1, 3):
        name = f"w_rf{rf}"
        create(conn, name, rf)
        single_inserts(conn, name, 10_000_000, 50)  # warm-up: plans, connections
        p50, p99 = p50_p99(single_inserts(conn, name, 0, writes))
        rate = bulk_rate(conn, name, 1_000_000, rows)
        figures[rf] = (p50, p99, rate)
        latency = f"insert p50 {p50 * 1e3:.2f} ms, p99 {p99 * 1e3:.2f} ms"
        print(f"   RF {rf}: {latency}; bulk {rate:,.0f} rows/s")
    (a50, a99, ar), (b50, b99, br) = figures[3], figures[1]
    print(f"   RF 3 / RF 1: p50 {a50 / b50:.2f}x, p99 {a99 / b99:.2f}x, bulk rate {ar / br:.2f}x")


def failover(cluster: MiniCluster, conn: Connection, kills: int) -> None:
    print(f"\n2. failover: kill -9 of the leader's server, {kills} times (default timers)")
    create(conn, "fo", 3)
    cur = conn.cursor()
    key = 0
    times = []
    for round_no in range(kills):
        wait_for(lambda: healthy(conn, "fo"), "three healthy replicas")
        leader = next(a for a, r in replicas(conn, "fo") if r == "LEADER")
        index, daemon = daemon_at(cluster, leader)
        cur.execute("INSERT INTO fo VALUES (?, ?)", (key, "before"))
        key += 1
        killed = time.monotonic()
        cluster.kill(daemon)
        while True:
            try:
                cur.execute("INSERT INTO fo VALUES (?, ?)", (key, "after"))
                key += 1
                break
            except kudusql.Error:
                key += 1  # its outcome is unknown: never reuse the key
        times.append(time.monotonic() - killed)
        print(f"   kill {round_no + 1}: first write acknowledged after {times[-1]:.2f} s")
        cluster.restart_tserver(index, same_port=True)
    p50, p99 = p50_p99(times)
    print(f"   failover p50 {p50:.2f} s, p99 {p99:.2f} s, max {max(times):.2f} s (aim < 3 s)")


def rereplication(cluster: MiniCluster, conn: Connection, failed_s: float) -> None:
    print("\n3. restoring the replication factor after a server dies for good")
    create(conn, "rr", 3)
    conn.cursor().executemany("INSERT INTO rr VALUES (?, ?)", [(k, "x") for k in range(5_000)])
    wait_for(lambda: healthy(conn, "rr"), "three healthy replicas")
    follower = next(a for a, r in replicas(conn, "rr") if r == "FOLLOWER")
    _, daemon = daemon_at(cluster, follower)
    killed = time.monotonic()
    cluster.kill(daemon)
    wait_for(lambda: healthy(conn, "rr", dead=follower), "the factor restored", timeout=300)
    took = time.monotonic() - killed
    count = conn.execute("SELECT count(*) FROM rr").fetchone()
    print(
        f"   restored {took:.2f} s after the kill (failed-follower timeout {failed_s:g} s:"
        f" {took - failed_s:.2f} s after it); rows {count[0] if count else '?'}"
    )


@contextlib.contextmanager
def flushing(cluster: MiniCluster, address: str, tablet_id: str) -> Iterator[None]:
    stop = threading.Event()

    def run() -> None:
        with RpcClient(
            address,
            secret=cluster.secret,
            server_kind="tablet server",
            timeout=30,
            retry=RetryPolicy(max_attempts=1, deadline=30),
        ) as client:
            while not stop.wait(0.1):
                with contextlib.suppress(kudusql.Error):
                    client.call(FlushTablet(tablet_id))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def busy_follower(cluster: MiniCluster, conn: Connection, writes: int) -> None:
    print("\n4. p99 write latency with one busy follower vs none")
    create(conn, "bf", 3)
    wait_for(lambda: healthy(conn, "bf"), "three healthy replicas")
    follower = next(a for a, r in replicas(conn, "bf") if r == "FOLLOWER")
    _, daemon = daemon_at(cluster, follower)
    tablet_id = str(
        conn.execute(
            "SELECT tablet_id FROM sys.tablet_replicas WHERE table_name = 'bf' LIMIT 1"
        ).fetchone()[0]  # type: ignore[index]
    )
    key = 0
    results = {}
    for label in ("idle", "flushing", "stopped"):
        single_inserts(conn, "bf", 50_000_000 + key, 50)
        if label == "flushing":
            ctx: contextlib.AbstractContextManager[None] = flushing(cluster, follower, tablet_id)
        elif label == "stopped":
            ctx = _stopped(daemon)
        else:
            ctx = contextlib.nullcontext()
        with ctx:
            samples = single_inserts(conn, "bf", key, writes)
        key += writes
        results[label] = p50_p99(samples)
        p50, p99 = results[label]
        print(f"   follower {label}: p50 {p50 * 1e3:.2f} ms, p99 {p99 * 1e3:.2f} ms")
    base = results["idle"][1]
    print(
        f"   p99 vs idle: flushing {results['flushing'][1] / base:.2f}x,"
        f" stopped {results['stopped'][1] / base:.2f}x"
    )


@contextlib.contextmanager
def _stopped(daemon: Daemon) -> Iterator[None]:
    os.kill(daemon.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(daemon.pid, signal.SIGCONT)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_raft", description=__doc__)
    p.add_argument("--writes", type=int, default=1_000)
    p.add_argument("--rows", type=int, default=40_000)
    p.add_argument("--kills", type=int, default=20)
    p.add_argument("--failed-follower-s", type=float, default=5.0)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-raft-") as tmp:
        cluster = MiniCluster(
            Path(tmp),
            master_flags=MASTER_FLAGS,
            tserver_flags=[
                "--heartbeat-interval",
                "0.2",
                "--follower-unavailable-considered-failed-sec",
                str(args.failed_follower_s),
            ],
            start_timeout=60,
        )
        cluster.start(4)
        try:
            with kudusql.connect(cluster.url, timeout=10) as conn:
                latency_rf3_vs_rf1(conn, args.writes, args.rows)
                busy_follower(cluster, conn, args.writes)
                failover(cluster, conn, args.kills)
                rereplication(cluster, conn, args.failed_follower_s)
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
