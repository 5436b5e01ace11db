"""Clients and replicated tablets on real processes: a master and three tablet servers
(100 ms Raft heartbeats). SQL through ``kudusql://`` on a table with 3 replicas per
tablet; the leader of a tablet SIGKILLed while a client writes (the client finds the new
leader by itself, every acknowledged row is there, none applied twice); a write whose
answer was lost (``KUDUSQL_TEST_LOSE_WRITE_RESPONSES``) retried after its leader died is
answered by the new leader with the first answer and applied once; ALTER TABLE and
atomic batches through Raft; the replication factor's checks; the Kudu-style client."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import kudusql
import kudusql.client as kudu
from kudusql.cluster.client.tserver_client import TabletServerPool
from kudusql.cluster.errors import NotTheLeader, RpcTimedOut, ServiceUnavailable
from kudusql.cluster.launcher import MiniCluster
from kudusql.cluster.master.messages import GetTableLocations, TableLocationsResponse
from kudusql.cluster.retry import RetryPolicy
from kudusql.cluster.tserver.server import LOSE_WRITE_RESPONSES_ENV
from kudusql.common.errors import Error, IntegrityError
from tests.cluster.mini_cluster import MASTER_FLAGS, TSERVER_FLAGS, eventually
from tests.support.timing import scaled

RAFT_FLAGS = [*TSERVER_FLAGS, "--raft-heartbeat-ms", "100"]


def _cluster(root: Path) -> MiniCluster:
    return MiniCluster(
        root, master_flags=MASTER_FLAGS, tserver_flags=RAFT_FLAGS, start_timeout=scaled(30)
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniCluster]:
    root = tmp_path_factory.mktemp("replicated")
    c = _cluster(root)
    try:
        c.start(3)
        yield c
    finally:
        c.stop()
    for log in [root / "master" / "master.log", *root.glob("ts-*/tserver.log")]:
        assert "Traceback" not in log.read_text(), f"{log} has a traceback"


def _url(c: MiniCluster) -> str:
    return f"kudusql://{c.master_address}"


def _locations(c: MiniCluster, table: str) -> TableLocationsResponse:
    with c.master_client() as client:
        response = client.call(GetTableLocations(table))
    assert isinstance(response, TableLocationsResponse)
    return response


def _leader_index(c: MiniCluster, table: str) -> int:
    """The index in ``c.tservers`` of the table's (only) tablet's leader, per the master."""
    tablet = _locations(c, table).tablets[0]
    leaders = [r.address for r in tablet.replicas if r.role == "LEADER"]
    assert leaders, tablet
    return [d.address for d in c.tservers].index(leaders[0])


def test_sql_on_a_table_with_three_replicas(cluster: MiniCluster) -> None:
    with kudusql.connect(_url(cluster), secret=cluster.secret) as conn:
        conn.execute(
            "CREATE TABLE r3 (id BIGINT PRIMARY KEY, v STRING) PARTITION BY HASH (id)"
            " PARTITIONS 2 STORED AS KUDU TBLPROPERTIES ('kudu.num_tablet_replicas' = '3')"
        )
        for tablet in _locations(cluster, "r3").tablets:
            roles = sorted(r.role for r in tablet.replicas)
            assert roles == ["FOLLOWER", "FOLLOWER", "LEADER"], tablet
            assert len({r.address for r in tablet.replicas}) == 3
        conn.execute("INSERT INTO r3 VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd')")
        conn.execute("UPDATE r3 SET v = 'B' WHERE id = 2")
        conn.execute("DELETE FROM r3 WHERE id = 3")
        assert conn.execute("SELECT * FROM r3 ORDER BY id").fetchall() == [
            (1, "a"),
            (2, "B"),
            (4, "d"),
        ]
        # A duplicate key is a row error, reported by the leader.
        dup = conn.session.db.table("r3").write(pa.table({"id": [1], "v": ["x"]}), "insert")
        assert [e.status for e in dup.errors] == ["AlreadyPresent"], dup.errors
        shown = conn.execute("SHOW CREATE TABLE r3").fetchall()[0][0]
        assert "'kudu.num_tablet_replicas' = '3'" in shown or "kudu.num_tablet_replicas" in shown
        # ALTER goes through Raft: every replica applies it at its index.
        conn.execute("ALTER TABLE r3 ADD COLUMNS (n INT)")
        conn.execute("INSERT INTO r3 VALUES (5, 'e', 7)")
        assert conn.execute("SELECT id, n FROM r3 WHERE id >= 4 ORDER BY id").fetchall() == [
            (4, None),
            (5, 7),
        ]
        # The cluster default with three live tablet servers is 3.
        conn.execute("CREATE TABLE rdef (id BIGINT PRIMARY KEY) STORED AS KUDU")
        assert len(_locations(cluster, "rdef").tablets[0].replicas) == 3
        for bad, why in (("2", "odd"), ("0", "at least 1"), ("x", "not an integer")):
            with pytest.raises(Error, match=why):
                conn.execute(
                    f"CREATE TABLE rbad (id BIGINT PRIMARY KEY) STORED AS KUDU"
                    f" TBLPROPERTIES ('kudu.num_tablet_replicas' = '{bad}')"
                )
        with pytest.raises(Error, match=r"needs 5 replicas per tablet .* only 3 are live"):
            conn.execute(
                "CREATE TABLE rbad (id BIGINT PRIMARY KEY) STORED AS KUDU"
                " TBLPROPERTIES ('kudu.num_tablet_replicas' = '5')"
            )


def test_atomic_batches_through_raft(cluster: MiniCluster) -> None:
    with kudusql.connect(_url(cluster), secret=cluster.secret) as conn:
        conn.execute("CREATE TABLE ra (id BIGINT PRIMARY KEY, v STRING) STORED AS KUDU")
        table = conn.session.db.table("ra")
        table.write(pa.table({"id": [1, 2], "v": ["a", "b"]}), "insert", atomic=True)
        with pytest.raises(IntegrityError, match="atomic write batch rejected"):
            table.write(pa.table({"id": [3, 1], "v": ["c", "dup"]}), "insert", atomic=True)
        assert conn.execute("SELECT id FROM ra ORDER BY id").fetchall() == [(1,), (2,)]


def test_writes_continue_across_a_leader_kill(cluster: MiniCluster) -> None:
    """INSERTs of distinct keys from a client while the tablet's leader is SIGKILLed:
    each is acknowledged once (an INSERT applied twice would report its own row as a
    duplicate key), and every acknowledged row is there afterwards."""
    with kudusql.connect(_url(cluster), secret=cluster.secret) as conn:
        conn.execute("CREATE TABLE rk (id BIGINT PRIMARY KEY, v STRING) STORED AS KUDU")
        table = conn.session.db.table("rk")
        victim = _leader_index(cluster, "rk")
        acked: list[int] = []
        failures: list[BaseException] = []
        killed = threading.Event()
        after_kill = 15

        def writer() -> None:
            key = 0
            try:
                while len(acked) < 400:
                    result = table.write(pa.table({"id": [key], "v": [f"r{key}"]}), "insert")
                    assert not result.errors, result.errors
                    acked.append(key)
                    key += 1
                    if killed.is_set() and sum(k >= kill_at for k in acked) >= after_kill:
                        return
            except BaseException as exc:  # reported by the test thread
                failures.append(exc)

        kill_at = 10**9
        thread = threading.Thread(target=writer)
        thread.start()
        eventually(lambda: len(acked) >= 10 or failures, "the first writes")
        kill_at = len(acked) + 1
        cluster.kill(cluster.tservers[victim])
        killed.set()
        thread.join(scaled(60))
        assert not thread.is_alive()
        assert not failures, failures
        assert sum(k >= kill_at for k in acked) >= after_kill
        got = {r[0] for r in conn.execute("SELECT id FROM rk").fetchall()}
        assert set(acked) <= got
        # The master learns the new leader from its next report.
        eventually(
            lambda: any(
                r.role == "LEADER" and r.address != cluster.tservers[victim].address
                for r in _locations(cluster, "rk").tablets[0].replicas
            ),
            "the master to report the new leader",
        )
    cluster.restart_tserver(victim, same_port=True)
    cluster.wait_for_tservers(3)


def test_kudu_style_client_creates_replicated_tables(cluster: MiniCluster) -> None:
    host, port = cluster.master_address.rsplit(":", 1)
    client = kudu.connect(host, int(port), secret_file=str(cluster.secret_file))
    try:
        builder = kudu.schema_builder()
        builder.add_column("key").type(kudu.int64).nullable(False).primary_key()
        builder.add_column("name").type(kudu.string)
        schema = builder.build()
        parts = kudu.Partitioning().add_hash_partitions(["key"], 2)
        table = client.create_table("kr", schema, parts, n_replicas=3)
        assert table.num_replicas == 3
        one = client.create_table("kr1", schema, parts, n_replicas=1)
        assert one.num_replicas == 1
        session = client.new_session()
        for k in range(5):
            session.apply(table.new_insert({"key": k, "name": f"n{k}"}))
        session.flush()
        assert sorted(table.scanner().open().read_all_tuples()) == [(k, f"n{k}") for k in range(5)]
        with pytest.raises(Exception, match="odd"):
            client.create_table("kr2", schema, parts, n_replicas=2)
    finally:
        client.close()


# -- exactly-once across a leader change, with lost answers ----------------------------------


@pytest.fixture
def lossy_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MiniCluster]:
    """Every tablet server sleeps 1 s after applying each write before it answers."""
    monkeypatch.setenv(LOSE_WRITE_RESPONSES_ENV, "every=1,sleep=1.0")
    c = _cluster(tmp_path / "lossy")
    try:
        c.start(3)
        yield c
    finally:
        c.stop()


def test_a_retry_after_a_leader_change_applies_once(lossy_cluster: MiniCluster) -> None:
    c = lossy_cluster
    with kudusql.connect(_url(c), secret=c.secret) as conn:
        conn.execute("CREATE TABLE rx (id BIGINT PRIMARY KEY, v STRING) STORED AS KUDU")
        tablet = _locations(c, "rx").tablets[0]
    leader = _leader_index(c, "rx")
    data = pa.table({"id": [7], "v": ["seven"]})
    impatient = TabletServerPool(
        secret=c.secret, timeout=0.3, retry=RetryPolicy(max_attempts=1, deadline=0.3)
    )
    # The same session's next attempts, with a longer call timeout: the same client id
    # and sequence number are what the servers see.
    patient = TabletServerPool(
        secret=c.secret, timeout=scaled(10), client_id=impatient.requests.client_id
    )
    try:
        seq_no = impatient.requests.new_seq_no()
        assert patient.requests.new_seq_no() == seq_no
        # Attempt 1 reaches the leader, which commits and applies it, but its answer is
        # lost (the client gives up after 0.3 s, the server answers after 1 s).
        with pytest.raises((RpcTimedOut, ServiceUnavailable)):
            impatient.write_attempt(
                c.tservers[leader].address,
                tablet.tablet_id,
                "insert",
                data,
                seq_no=seq_no,
                attempt_no=1,
            )
        c.kill(c.tservers[leader])
        others = [d.address for i, d in enumerate(c.tservers) if i != leader]

        def retry() -> object:
            for attempt, address in enumerate(others * 40, start=2):
                try:
                    return patient.write_attempt(
                        address,
                        tablet.tablet_id,
                        "insert",
                        data,
                        seq_no=seq_no,
                        attempt_no=attempt,
                    )
                except (NotTheLeader, ServiceUnavailable):
                    threading.Event().wait(0.1)
            return None

        response = eventually(retry, "a new leader answering the retry", timeout=30)
        # The first attempt's answer: applied once, no duplicate key of its own row.
        assert response.applied == 1 and not response.row_errors  # type: ignore[attr-defined]
        with kudusql.connect(_url(c), secret=c.secret) as conn:
            assert conn.execute("SELECT * FROM rx").fetchall() == [(7, "seven")]
    finally:
        impatient.close()
        patient.close()
