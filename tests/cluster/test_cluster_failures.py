"""A cluster under failures, through the SQL connection a user holds (real processes).

- A tablet server killed (SIGKILL) while a client writes: statements touching its
  tablets fail with an error naming it (no hang), the others go on; after it restarts
  (on another port) every acknowledged statement's rows are there.
- The master killed: a client with cached tables and locations keeps reading and
  writing; DDL fails clearly until the master is back.
- A connection without the cluster secret is refused before anything is touched.
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest

import kudusql
from kudusql.cluster.client.tserver_client import TabletServerPool
from kudusql.cluster.launcher import MiniCluster
from kudusql.common.errors import Error, OperationalError
from tests.cluster.mini_cluster import eventually, mini_cluster_at
from tests.support.targets import cluster_url

#: Rows per INSERT statement, spread over every tablet.
ROWS = 24


def insert_sql(batch: int) -> str:
    values = ", ".join(f"({batch * 1000 + i}, 'b{batch}')" for i in range(ROWS))
    return f"INSERT INTO w VALUES {values}"


def test_a_killed_tablet_server_loses_no_acknowledged_statement(
    mini_cluster: MiniCluster,
) -> None:
    """A writer thread runs INSERT statements while a tablet server is SIGKILLed under
    it and restarted on another port."""
    url = cluster_url(mini_cluster)
    with kudusql.connect(url, timeout=5) as setup:
        setup.execute("DROP TABLE IF EXISTS w")
        setup.execute(
            "CREATE TABLE w (id BIGINT PRIMARY KEY, v STRING) PARTITION BY HASH (id) PARTITIONS 6"
            # One replica per tablet: statements fail while its server is down (a table
            # with three replicas keeps going: test_replicated_writes.py).
            " TBLPROPERTIES ('kudu.num_tablet_replicas' = '1')"
        )
    acknowledged: list[int] = []
    errors: list[str] = []
    stop = threading.Event()

    def writer() -> None:
        with kudusql.connect(url, timeout=5) as conn:
            cur = conn.cursor()
            batch = 0
            while not stop.is_set():
                try:
                    cur.execute(insert_sql(batch))
                except Error as e:
                    errors.append(str(e))
                    time.sleep(0.05)
                else:
                    assert cur.rowcount == ROWS
                    acknowledged.append(batch)
                batch += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        eventually(lambda: len(acknowledged) >= 5, "the writer's first statements")
        victim = mini_cluster.tservers[1]
        mini_cluster.kill(victim)  # SIGKILL, whatever the writer is doing
        eventually(lambda: len(errors) >= 3, "statements failing while the server is down")
        mini_cluster.restart_tserver(1)  # on a new port: the client must look it up
        done = len(acknowledged)
        eventually(lambda: len(acknowledged) >= done + 5, "writes after the restart")
    finally:
        stop.set()
        thread.join()
    # Each failure names the dead server (or, while it re-registers after its restart,
    # says its tablets have no server yet); no hang, no traceback.
    assert all(
        ("tablet server" in e and victim.address in e) or "no tablet server serves" in e
        for e in errors
    ), errors
    assert any(victim.address in e for e in errors), errors
    assert "Traceback" not in "".join(errors)
    with kudusql.connect(url) as conn:
        ids = {r[0] for r in conn.execute("SELECT id FROM w").fetchall()}
    for batch in acknowledged:
        assert {batch * 1000 + i for i in range(ROWS)} <= ids, batch


def test_a_client_keeps_reading_and_writing_while_the_master_is_down(
    mini_cluster: MiniCluster,
) -> None:
    url = cluster_url(mini_cluster)
    with kudusql.connect(url, timeout=3) as conn:
        cur = conn.cursor()
        cur.execute("DROP TABLE IF EXISTS m")
        cur.execute(
            "CREATE TABLE m (id BIGINT PRIMARY KEY, v STRING) PARTITION BY HASH (id) PARTITIONS 3"
        )
        cur.execute("INSERT INTO m VALUES (1, 'a'), (2, 'b'), (3, 'c')")
        assert mini_cluster.master is not None
        mini_cluster.kill(mini_cluster.master)
        try:
            cur.execute("INSERT INTO m VALUES (4, 'd'), (5, 'e')")
            assert cur.rowcount == 2
            cur.execute("UPDATE m SET v = 'z' WHERE id = 1")
            cur.execute("SELECT id, v FROM m ORDER BY id")
            assert cur.fetchall() == [(1, "z"), (2, "b"), (3, "c"), (4, "d"), (5, "e")]
            with pytest.raises(OperationalError, match=r"master .* is unavailable"):
                cur.execute("CREATE TABLE n (id INT PRIMARY KEY)")
        finally:
            mini_cluster.restart_master()
        cur.execute("SELECT count(*) FROM m")
        assert cur.fetchone() == (5,)
        cur.execute("DROP TABLE m")


def test_a_connection_without_the_secret_is_refused(mini_cluster: MiniCluster) -> None:
    bare = f"kudusql://{mini_cluster.master_address}"
    with pytest.raises(OperationalError, match="unauthenticated") as e:
        kudusql.connect(bare)
    assert "Traceback" not in str(e.value)
    with pytest.raises(OperationalError, match="unauthenticated"):
        kudusql.connect(bare, secret="not-the-secret")
    # A tablet server refuses a data call without it as well.
    with kudusql.connect(cluster_url(mini_cluster)) as conn:
        conn.execute("DROP TABLE IF EXISTS s")
        conn.execute("CREATE TABLE s (id INT PRIMARY KEY)")
        conn.execute("INSERT INTO s VALUES (1)")
        address = conn.session.db.table("s").replica_addresses()[0]
    with TabletServerPool() as pool, pytest.raises(OperationalError, match="unauthenticated"):
        pool.now(address)
    assert re.match(r"\d+\.\d+\.\d+\.\d+:\d+", address)


def test_a_tls_cluster_serves_sql_to_a_client_that_trusts_its_certificate(
    tmp_path: Path,
) -> None:
    """`kudusql cluster start --tls`: every daemon serves TLS (the master's calls to
    tablet servers and their heartbeats too); a client needs the certificate and the
    secret."""
    with mini_cluster_at(tmp_path / "tls", tservers=2, tls=True) as cluster:
        assert cluster.tls_ca is not None and cluster.tls_ca.exists()
        with kudusql.connect(cluster.url) as conn:
            conn.execute(
                "CREATE TABLE t (id INT PRIMARY KEY, v STRING) PARTITION BY HASH (id) PARTITIONS 2"
            )
            conn.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
            assert conn.execute("SELECT count(*) FROM t").fetchone() == (2,)
        plain = f"kudusql://{cluster.master_address}?secret_file={cluster.secret_file}"
        with pytest.raises(OperationalError, match="unavailable") as e:
            kudusql.connect(plain, timeout=2)
        assert "Traceback" not in str(e.value)
