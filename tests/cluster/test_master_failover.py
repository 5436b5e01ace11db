"""Replicated masters on real processes: three masters and three tablet servers. The
leader master is killed with SIGKILL; a new one is elected and a client that only knows
the masters' list carries on (DDL, writes, reads) with every acknowledged DDL in the
catalog; the killed master restarts and catches up (with the third master down, a DDL
then needs its vote and its log); with two of three masters down, DDL fails with a
clear error while the tablet servers still serve data. ``cluster status`` lists the
masters with their roles. Failover time (kill to the first successful DDL) is printed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import kudusql.client as kudu
import kudusql.dbapi
from kudusql.cluster.commands import main as cluster_main
from kudusql.cluster.launcher import MiniCluster
from kudusql.common.errors import OperationalError
from tests.cluster.mini_cluster import MASTER_FLAGS, TSERVER_FLAGS, eventually
from tests.support.timing import scaled


def _cluster(root: Path, raft_heartbeat_ms: int | None) -> MiniCluster:
    extra = [] if raft_heartbeat_ms is None else ["--raft-heartbeat-ms", str(raft_heartbeat_ms)]
    return MiniCluster(
        root,
        master_flags=[*MASTER_FLAGS, "--catalog-write-timeout", "2", *extra],
        tserver_flags=TSERVER_FLAGS,
        start_timeout=scaled(30),
        masters=3,
    )


@pytest.fixture
def masters3(tmp_path: Path) -> Iterator[MiniCluster]:
    cluster = _cluster(tmp_path / "c", 100)
    try:
        cluster.start(3)
        yield cluster
    finally:
        cluster.stop()
    for log in tmp_path.glob("c/*/*.log"):
        assert "Traceback" not in log.read_text(), f"{log} has a traceback"


def _ddl_after_kill(cur: kudusql.dbapi.Cursor, cluster: MiniCluster, table: str) -> float:
    """Kill the leader master; the seconds until a CREATE TABLE succeeds."""
    leader = eventually(cluster.leader_master, "a leader master")
    started = time.monotonic()
    cluster.kill(leader)
    cur.execute(
        f"CREATE TABLE {table} (k INT PRIMARY KEY, v STRING) PARTITION BY HASH (k) PARTITIONS 2"
    )
    return time.monotonic() - started


def test_leader_master_killed_clients_carry_on(
    masters3: MiniCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = masters3
    assert cluster_main(["cluster", "status", str(cluster.root)]) == 0
    roles = [
        line.split()[2]
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("master ")
    ]
    assert sorted(roles) == ["FOLLOWER", "FOLLOWER", "LEADER"]

    conn = kudusql.dbapi.connect(cluster.url)
    cur = conn.cursor()
    cur.execute("CREATE TABLE a (k INT PRIMARY KEY, v STRING) PARTITION BY HASH (k) PARTITIONS 2")
    cur.execute("INSERT INTO a VALUES (1, 'x'), (2, 'y')")
    old_leader = eventually(cluster.leader_master, "a leader master")
    index = cluster.masters.index(old_leader)

    seconds = _ddl_after_kill(cur, cluster, "b")
    print(f"master failover (kill -9 to the first successful DDL): {seconds:.2f} s")
    cur.execute("INSERT INTO b VALUES (3, 'z')")
    cur.execute("INSERT INTO a VALUES (4, 'w')")
    cur.execute("SELECT k FROM a ORDER BY k")
    assert cur.fetchall() == [(1,), (2,), (4,)]
    cur.execute("SHOW TABLES")
    assert sorted(r[0] for r in cur.fetchall()) == ["a", "b"]
    assert eventually(cluster.leader_master, "a new leader master") != old_leader
    # The Kudu-style client takes the masters as kudu-python does.
    hosts = [m.address.rsplit(":", 1) for m in cluster.masters]
    with kudu.connect(
        [h for h, _ in hosts], [int(p) for _, p in hosts], secret_file=str(cluster.secret_file)
    ) as kc:
        assert kc.is_multimaster and sorted(kc.list_tables()) == ["a", "b"]

    # The killed master restarts and catches up: with the third master down, a DDL
    # commits only with its acknowledgement.
    cluster.restart_master(index=index, wait=False)
    leader = eventually(cluster.leader_master, "a leader master")
    third = next(m for m in cluster.masters if m not in (leader, cluster.masters[index]))
    cluster.kill(third)
    cur.execute("CREATE TABLE c (k INT PRIMARY KEY) PARTITION BY HASH (k) PARTITIONS 2")
    cur.execute("DROP TABLE b")
    cur.execute("SHOW TABLES")
    assert sorted(r[0] for r in cur.fetchall()) == ["a", "c"]

    # Two of three masters down: DDL fails clearly; the tablet servers still serve.
    db = conn.session.db
    db.table_ttl = 1e9  # type: ignore[attr-defined]  # keep the cached locations
    db.master.failover_timeout = scaled(2)  # type: ignore[attr-defined]
    cluster.kill(eventually(cluster.leader_master, "a leader master"))
    with pytest.raises(OperationalError, match="majority of the masters"):
        cur.execute("CREATE TABLE d (k INT PRIMARY KEY) PARTITION BY HASH (k) PARTITIONS 2")
    cur.execute("INSERT INTO a VALUES (5, 'v')")
    cur.execute("SELECT count(*) FROM a")
    assert cur.fetchall() == [(4,)]
    conn.close()


@pytest.mark.slow
def test_master_failover_time_with_default_timeouts(tmp_path: Path) -> None:
    """Kill the leader master five times (restarting it each time), Raft defaults
    (500 ms heartbeats, 1.5 s election timeout); prints each failover time."""
    cluster = _cluster(tmp_path / "c", None)
    try:
        cluster.start(3)
        conn = kudusql.dbapi.connect(cluster.url)
        cur = conn.cursor()
        times = []
        for i in range(5):
            leader = eventually(cluster.leader_master, "a leader master")
            index = cluster.masters.index(leader)
            times.append(_ddl_after_kill(cur, cluster, f"t{i}"))
            cluster.restart_master(index=index, wait=False)
        cur.execute("SHOW TABLES")
        assert sorted(r[0] for r in cur.fetchall()) == [f"t{i}" for i in range(5)]
        times.sort()
        print(f"master failover times (s): {[round(t, 2) for t in times]}")
        conn.close()
    finally:
        cluster.stop()
