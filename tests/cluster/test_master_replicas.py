"""The master places replicated tablets on real processes: a master and three tablet
servers; CREATE with ``num_replicas`` = 3 (through the master RPC: SQL and the Kudu-style
client still create unreplicated tables) puts each tablet on all three servers, the
replicas elect a leader and report it, locations list it first, writes go through it
(a follower refuses them), and DROP deletes every replica."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kudusql.cluster.errors import NotTheLeader
from kudusql.cluster.launcher import MiniCluster
from kudusql.cluster.master.messages import AlterTable, CreateTable, DdlResponse, DropTable
from kudusql.cluster.tserver.messages import WriteRequest, WriteResponse
from tests.cluster.mini_cluster import (
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


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[MiniCluster]:
    with mini_cluster_at(
        tmp_path / "cluster", 3, tserver_flags=["--raft-heartbeat-ms", "100"]
    ) as mini:
        yield mini


def test_replicated_table_on_three_servers(cluster: MiniCluster) -> None:
    with cluster.master_client(timeout=scaled(10)) as master:
        created = master.call(
            CreateTable("t", schema_text(), partitions_text(2), num_replicas=3, wait_seconds=20)
        )
        assert isinstance(created, DdlResponse) and created.ddl_done
        located = locations(master, "t")
        assert len(located.tablets) == 2
        addresses = {d.address for d in cluster.running() if d.kind == "tserver"}
        for tablet in located.tablets:
            assert len(tablet.replicas) == 3
            assert {r.address for r in tablet.replicas} == addresses
            assert [r.role for r in tablet.replicas] == ["LEADER", "FOLLOWER", "FOLLOWER"]
            assert tablet.address == tablet.replicas[0].address  # the leader's
        hosted = hosted_tablets(cluster)
        for tablet in located.tablets:
            assert all(tablet.tablet_id in h for h in hosted.values())

        # A write to the leader's server succeeds; a follower refuses it.
        tablet = located.tablets[0]
        data = id_name_rows(range(0, 1))
        for replica in tablet.replicas[1:]:
            with tserver_client(cluster, replica.address) as ts, pytest.raises(NotTheLeader):
                ts.put(WriteRequest(tablet.tablet_id, "upsert"), data)
        with tserver_client(cluster, tablet.address) as ts:
            answer = ts.put(WriteRequest(tablet.tablet_id, "upsert"), data)
        assert isinstance(answer, WriteResponse)
        assert (answer.applied, answer.row_errors) == (1, [])  # id 0 hashes to bucket 0

        # The alter goes to each tablet's leader, through Raft, and completes.
        altered = master.call(AlterTable("t", new_name="u", wait_seconds=20))
        assert isinstance(altered, DdlResponse) and altered.ddl_done

        dropped = master.call(DropTable("u", wait_seconds=20))
        assert isinstance(dropped, DdlResponse) and dropped.ddl_done
        ids = {t.tablet_id for t in located.tablets}
        eventually(
            lambda: all(not ids & set(h) for h in hosted_tablets(cluster).values()),
            "every replica deleted",
        )


def test_too_few_servers_is_refused(cluster: MiniCluster) -> None:
    with (
        cluster.master_client(timeout=scaled(10)) as master,
        pytest.raises(Exception, match="needs 4 replicas per tablet"),
    ):
        master.call(CreateTable("t", schema_text(), partitions_text(1), num_replicas=4))
