"""Tablet copy and re-replication on real processes: a master and four tablet servers, a
table of replication factor 3 (through the master RPC). A follower's server is killed
for good (SIGKILL); its leader evicts it after the short failed-follower timeout, the
master asks the leader to add the fourth server, the leader copies the tablet to it
over Flight and promotes it: the factor is 3 again, every row is on the new replica,
and ksck goes from under-replicated to healthy. The dead server, restarted, has its
stale replica deleted (tombstoned). A copy interrupted by killing its destination
leaves no replica there, and the next copy works."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import kudusql
from kudusql.cluster.ksck import ksck
from kudusql.cluster.launcher import MiniCluster
from kudusql.cluster.master.messages import CreateTable, DdlResponse, TabletLocationInfo
from kudusql.cluster.rpc_client import RpcClient
from kudusql.cluster.tserver.messages import (
    FlushTablet,
    ScanRequest,
    WriteRequest,
    WriteResponse,
)
from kudusql.cluster.tserver.tablet_manager import COPY_PAUSE_ENV, TABLETS_DIR
from kudusql.cluster.tserver.tablet_replica import CMETA_FILE
from kudusql.consensus.raft_consensus import DataState
from kudusql.storage.consensus import ConsensusMetadataFile
from tests.cluster.mini_cluster import (
    MASTER_FLAGS,
    TSERVER_FLAGS,
    eventually,
    hosted_tablets,
    id_name_rows,
    locations,
    mini_cluster_at,
    partitions_text,
    schema_text,
    tserver_client,
)
from tests.support.timing import scaled

#: Seconds a leader waits for a silent follower before it evicts it (Kudu: 300).
FAILED_FOLLOWER_S = 2


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[MiniCluster]:
    with mini_cluster_at(
        tmp_path / "cluster",
        4,
        tserver_flags=[
            "--raft-heartbeat-ms",
            "100",
            "--follower-unavailable-considered-failed-sec",
            str(FAILED_FOLLOWER_S),
        ],
    ) as mini:
        yield mini


def create_rf3(master: RpcClient) -> TabletLocationInfo:
    created = master.call(
        CreateTable("t", schema_text(), partitions_text(1), num_replicas=3, wait_seconds=20)
    )
    assert isinstance(created, DdlResponse) and created.ddl_done
    (tablet,) = locations(master, "t").tablets
    return tablet


#: The HybridTime of the last acknowledged write (a snapshot just after it sees it).
LAST_WRITE = [0]


def write(cluster: MiniCluster, tablet: TabletLocationInfo, ids: range) -> None:
    with tserver_client(cluster, tablet.address) as ts:
        answer = ts.put(WriteRequest(tablet.tablet_id, "insert"), id_name_rows(ids))
    assert isinstance(answer, WriteResponse) and answer.applied == len(ids)
    LAST_WRITE[0] = max(LAST_WRITE[0], answer.timestamp)


def restored(master: RpcClient, dead: str) -> TabletLocationInfo | None:
    """The tablet once it has three voters again, none on ``dead``."""
    (tablet,) = locations(master, "t").tablets
    roles = sorted(r.role for r in tablet.replicas)
    addresses = {r.address for r in tablet.replicas}
    if roles == ["FOLLOWER", "FOLLOWER", "LEADER"] and dead not in addresses:
        return tablet
    return None


def scanned_ids(cluster: MiniCluster, address: str, tablet_id: str) -> list[int] | None:
    """The ids a replica holds at a snapshot just after the last acknowledged write (a
    follower serves it once its safe time gets there; a read of the latest is the
    leader's only)."""
    try:
        with tserver_client(cluster, address) as ts:
            table = ts.get(ScanRequest(tablet_id, ["id"], snapshot_timestamp=LAST_WRITE[0] + 1))
    except Exception:
        return None
    return sorted(table.column("id").to_pylist())


def check_sql_views(cluster: MiniCluster, spare: str) -> None:
    """sys.tablet_replicas lists the replicated table's replicas with roles and health;
    SHOW PARTITIONS of a cluster table adds each tablet's replicas."""
    with kudusql.connect(cluster.url, timeout=5) as conn:
        rows = conn.execute(
            "SELECT address, role, health FROM sys.tablet_replicas WHERE table_name = 't'"
        ).fetchall()
        assert sorted(r[1] for r in rows) == ["FOLLOWER", "FOLLOWER", "LEADER"]
        assert {r[2] for r in rows} == {"RUNNING"} and spare in {r[0] for r in rows}
        conn.execute(
            "CREATE TABLE s (id BIGINT PRIMARY KEY) PARTITION BY HASH (id) PARTITIONS 2"
            " TBLPROPERTIES ('kudu.num_tablet_replicas' = '1')"
        )
        shown = conn.execute("SHOW PARTITIONS s").fetchall()
        assert len(shown) == 2
        for _start, _stop, leader, count, replicas in shown:
            assert count == 1 and replicas == f"{leader} LEADER RUNNING"


def index_of(cluster: MiniCluster, address: str) -> int:
    return next(i for i, d in enumerate(cluster.tservers) if d.address == address)


def test_dead_server_is_re_replicated(cluster: MiniCluster) -> None:
    with cluster.master_client(timeout=scaled(10)) as master:
        tablet = create_rf3(master)
        write(cluster, tablet, range(0, 200))
        report = ksck(cluster.master_address, secret_file=str(cluster.secret_file))
        assert report.healthy, report.text

        follower = tablet.replicas[1].address
        spare = next(
            d.address
            for d in cluster.tservers
            if d.address not in {r.address for r in tablet.replicas}
        )
        dead_index = index_of(cluster, follower)
        cluster.kill(cluster.tservers[dead_index])
        killed_at = time.monotonic()

        def under_replicated() -> bool:
            r = ksck(cluster.master_address, secret_file=str(cluster.secret_file))
            return not r.healthy and "UNDER-REPLICATED" in r.text

        eventually(under_replicated, "ksck to report the tablet under-replicated")
        new = eventually(lambda: restored(master, follower), "the replication factor restored")
        elapsed = time.monotonic() - killed_at
        print(f"\nreplication factor restored {elapsed:.2f} s after the kill")
        assert spare in {r.address for r in new.replicas}

        # The copied replica has every row (it applied the copied log, then caught up).
        write(cluster, new, range(200, 250))
        eventually(
            lambda: scanned_ids(cluster, spare, tablet.tablet_id) == list(range(250)),
            "every row on the new replica",
        )
        eventually(
            lambda: ksck(cluster.master_address, secret_file=str(cluster.secret_file)).healthy,
            "ksck healthy",
        )
        check_sql_views(cluster, spare)

        # The dead server comes back: its stale replica is deleted (tombstoned).
        back = cluster.restart_tserver(dead_index)
        eventually(
            lambda: tablet.tablet_id not in hosted_tablets(cluster)[back.address],
            "the evicted replica deleted",
        )
        assert restored(master, back.address) is not None


@pytest.mark.slow
def test_interrupted_copy_leaves_no_replica(
    cluster: MiniCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    with cluster.master_client(timeout=scaled(10)) as master:
        tablet = create_rf3(master)
        write(cluster, tablet, range(0, 100))
        members = {r.address for r in tablet.replicas}
        spare_index = next(i for i, d in enumerate(cluster.tservers) if d.address not in members)
        # The spare's copies stall once their destination is COPYING (durably).
        monkeypatch.setenv(COPY_PAUSE_ENV, "60")
        spare = cluster.restart_tserver(spare_index, same_port=True)
        monkeypatch.delenv(COPY_PAUSE_ENV)
        cluster.wait_for_tservers(4)
        cluster.kill(cluster.tservers[index_of(cluster, tablet.replicas[1].address)])
        log_path = Path(spare.directory) / "tserver.log"
        eventually(
            lambda: "hosting an empty replica" in log_path.read_text(errors="replace"),
            "a tablet copy to start on the spare",
        )
        cmeta = Path(spare.directory) / TABLETS_DIR / tablet.tablet_id / CMETA_FILE
        eventually(
            lambda: (
                cmeta.exists()
                and ConsensusMetadataFile(str(cmeta)).load().data_state is DataState.COPYING
            ),
            "the copy's destination COPYING",
        )
        cluster.kill(spare)
        # What the crash left is no replica: a COPYING (then tombstoned) one, no data.
        assert ConsensusMetadataFile(str(cmeta)).load().data_state is not DataState.READY
        back = cluster.restart_tserver(spare_index, same_port=True)
        new = eventually(
            lambda: restored(master, tablet.replicas[1].address), "the factor restored"
        )
        assert back.address in {r.address for r in new.replicas}
        eventually(
            lambda: scanned_ids(cluster, back.address, tablet.tablet_id) == list(range(100)),
            "every row on the re-copied replica",
        )


@pytest.fixture
def gc_cluster(tmp_path: Path) -> Iterator[MiniCluster]:
    """As ``cluster``, with 4 KiB consensus log segments and no timed log GC (a
    tserver_flush_tablet call flushes and GCs)."""
    mini = MiniCluster(
        tmp_path / "cluster",
        master_flags=MASTER_FLAGS,
        tserver_flags=[
            *TSERVER_FLAGS,
            "--raft-heartbeat-ms",
            "100",
            "--follower-unavailable-considered-failed-sec",
            str(FAILED_FOLLOWER_S),
            "--log-segment-size-mb",
            str(4 / 1024),
            "--log-gc-interval-sec",
            "0",
        ],
        start_timeout=scaled(30),
    )
    try:
        mini.start(4)
        yield mini
    finally:
        mini.stop()


def test_a_dead_server_is_re_replicated_from_a_gced_log(gc_cluster: MiniCluster) -> None:
    """The re-replication above after the replicas flushed and GCed their consensus
    logs: the new replica is copied from the leader's data files and log tail."""
    cluster = gc_cluster
    with cluster.master_client(timeout=scaled(10)) as master:
        tablet = create_rf3(master)
        for start in range(0, 200, 5):  # 40 entries: many 4 KiB segments
            write(cluster, tablet, range(start, start + 5))
        for r in tablet.replicas:
            with tserver_client(cluster, r.address) as ts:
                ts.call(FlushTablet(tablet.tablet_id))
        follower = tablet.replicas[1].address
        spare_index = next(
            i
            for i, d in enumerate(cluster.tservers)
            if d.address not in {r.address for r in tablet.replicas}
        )
        spare = cluster.tservers[spare_index]
        cluster.kill(cluster.tservers[index_of(cluster, follower)])
        new = eventually(lambda: restored(master, follower), "the replication factor restored")
        assert spare.address in {r.address for r in new.replicas}
        log_text = (Path(spare.directory) / "tserver.log").read_text(errors="replace")
        copied = re.search(
            r"copied (\d+) files \(\d+ bytes\) and \d+ log entries after "
            r"\d+\.(\d+) ",
            log_text,
        )
        assert copied is not None, "no tablet copy in the spare's log"
        assert int(copied.group(1)) > 0 and int(copied.group(2)) > 0  # the log was GCed
        write(cluster, new, range(200, 250))
        eventually(
            lambda: scanned_ids(cluster, spare.address, tablet.tablet_id) == list(range(250)),
            "every row on the new replica",
        )
