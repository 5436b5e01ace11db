"""The master process with real tablet servers (``mini_cluster``: four processes on
loopback ports): registration by heartbeats, CREATE/ALTER/DROP carried out on the
servers, master and tablet-server crashes, and the cluster secret."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kudusql.cluster.errors import ServiceUnavailable, Unauthenticated
from kudusql.cluster.launcher import MiniCluster
from kudusql.cluster.master.messages import (
    AlterTable,
    CreateTable,
    DdlResponse,
    DropTable,
    GetTable,
    ListTables,
    ListTablesResponse,
    TableInfo,
)
from kudusql.cluster.retry import RetryPolicy
from kudusql.cluster.rpc_client import RpcClient
from kudusql.common.errors import KuduAlreadyPresent, KuduNotFound
from tests.cluster.mini_cluster import (
    UNRESPONSIVE_TIMEOUT,
    eventually,
    hosted_tablets,
    locations,
    partitions_text,
    schema_text,
)
from tests.support.timing import scaled

PARTITIONS = partitions_text(6)


@pytest.fixture
def master(mini_cluster: MiniCluster) -> Iterator[RpcClient]:
    with mini_cluster.master_client(timeout=scaled(10)) as client:
        yield client


def table(master: RpcClient, name: str) -> TableInfo:
    info = master.call(GetTable(name))
    assert isinstance(info, TableInfo)
    return info


def create(master: RpcClient, name: str, wait: float = 0.0) -> DdlResponse:
    response = master.call(
        CreateTable(
            name,
            schema_text(),
            PARTITIONS,
            '{"comment": "c"}',
            wait_seconds=wait,
            num_replicas=1,  # these tests count single replicas
        )
    )
    assert isinstance(response, DdlResponse)
    return response


def all_hosted(cluster: MiniCluster) -> set[str]:
    return {t for tablets in hosted_tablets(cluster).values() for t in tablets}


def catalog_tablets(master: RpcClient) -> set[str]:
    names = master.call(ListTables())
    assert isinstance(names, ListTablesResponse)
    out = set()
    for name in names.names:
        out |= {t.tablet_id for t in locations(master, name).tablets}
    return out


def no_orphans(cluster: MiniCluster, master: RpcClient) -> bool:
    """Every tablet the servers host is a tablet of a table in the catalog, and back."""
    try:
        return all_hosted(cluster) == catalog_tablets(master)
    except ServiceUnavailable:  # a table not RUNNING yet
        return False


def test_tablet_servers_register(mini_cluster: MiniCluster) -> None:
    servers = mini_cluster.tablet_servers()
    assert sorted(s.address for s in servers) == sorted(d.address for d in mini_cluster.tservers)
    assert all(s.live and s.seconds_since_heartbeat < UNRESPONSIVE_TIMEOUT for s in servers)


def test_create_spreads_tablets_and_serves_locations(
    mini_cluster: MiniCluster, master: RpcClient
) -> None:
    response = create(master, "people", wait=scaled(20))
    assert response.ddl_done
    info = table(master, "people")
    assert (info.state, info.ddl_done, info.schema_version) == ("RUNNING", True, 0)
    assert info.metadata == '{"comment": "c"}' and info.schema == schema_text()
    locs = locations(master, "people")
    assert sorted(t.partition for t in locs.tablets) == sorted(PARTITIONS)
    assert len({t.tserver_uuid for t in locs.tablets}) >= 2  # spread over the servers
    hosted = hosted_tablets(mini_cluster)
    for t in locs.tablets:
        assert hosted[t.address][t.tablet_id] == 0
    assert sum(s.tablet_count for s in mini_cluster.tablet_servers()) == len(PARTITIONS)
    with pytest.raises(KuduAlreadyPresent, match="already exists"):
        create(master, "people")
    with pytest.raises(KuduNotFound, match="'nobody' does not exist"):
        table(master, "nobody")
    master.call(DropTable("people", wait_seconds=scaled(20)))


def test_alter_brings_tablets_to_the_new_version(
    mini_cluster: MiniCluster, master: RpcClient
) -> None:
    create(master, "altered", wait=scaled(20))
    response = master.call(
        AlterTable("altered", schema=schema_text(extra=True), wait_seconds=scaled(20))
    )
    assert isinstance(response, DdlResponse) and response.ddl_done
    info = table(master, "altered")
    assert (info.schema_version, info.state, info.schema) == (1, "RUNNING", schema_text(True))
    hosted = hosted_tablets(mini_cluster)
    for t in locations(master, "altered").tablets:
        assert hosted[t.address][t.tablet_id] == 1
    master.call(AlterTable("altered", new_name="renamed", wait_seconds=scaled(20)))
    assert table(master, "renamed").schema_version == 2
    master.call(DropTable("renamed", wait_seconds=scaled(20)))


def test_drop_deletes_the_tablets_on_the_servers(
    mini_cluster: MiniCluster, master: RpcClient
) -> None:
    create(master, "dropped", wait=scaled(20))
    tablets = {t.tablet_id for t in locations(master, "dropped").tablets}
    response = master.call(DropTable("dropped", wait_seconds=scaled(20)))
    assert isinstance(response, DdlResponse) and response.ddl_done
    assert not tablets & all_hosted(mini_cluster)
    with pytest.raises(KuduNotFound):
        table(master, "dropped")
    names = master.call(ListTables())
    assert isinstance(names, ListTablesResponse) and "dropped" not in names.names


@pytest.mark.parametrize("ddl", ["create", "drop"])
def test_ddl_completes_after_the_master_is_killed(
    mini_cluster: MiniCluster, master: RpcClient, ddl: str
) -> None:
    name = f"crash_{ddl}"
    if ddl == "drop":
        create(master, name, wait=scaled(20))
        master.call(DropTable(name))
    else:
        create(master, name)
    assert mini_cluster.master is not None
    mini_cluster.kill(mini_cluster.master)  # right after the DDL call returned
    mini_cluster.restart_master()
    with mini_cluster.master_client(timeout=scaled(10)) as restarted:
        if ddl == "create":
            eventually(lambda: table(restarted, name).ddl_done, "the create to finish")
        else:
            with pytest.raises(KuduNotFound):
                table(restarted, name)
        eventually(lambda: no_orphans(mini_cluster, restarted), "no orphan tablets")
        if ddl == "create":
            restarted.call(DropTable(name, wait_seconds=scaled(20)))


def test_a_dead_tablet_server_is_noticed_and_comes_back_with_its_tablets(
    mini_cluster: MiniCluster, master: RpcClient
) -> None:
    create(master, "survivor", wait=scaled(20))
    victim = mini_cluster.tservers[0]
    uuid = next(s.uuid for s in mini_cluster.tablet_servers() if s.address == victim.address)
    before = {s.uuid: s.tablet_count for s in mini_cluster.tablet_servers()}
    mini_cluster.kill(victim)
    eventually(
        lambda: not next(s for s in mini_cluster.tablet_servers() if s.uuid == uuid).live,
        "the killed tablet server to be not live",
    )
    restarted = mini_cluster.restart_tserver(0)
    server = eventually(
        lambda: next((s for s in mini_cluster.tablet_servers() if s.uuid == uuid and s.live), None),
        "the restarted tablet server to be live",
    )
    assert server.address == restarted.address and server.tablet_count == before[uuid]
    mine = {t.tablet_id for t in locations(master, "survivor").tablets if t.tserver_uuid == uuid}
    eventually(
        lambda: mine <= set(hosted_tablets(mini_cluster)[restarted.address]),
        "its tablets to be hosted again",
    )
    assert all(
        t.address == restarted.address
        for t in locations(master, "survivor").tablets
        if t.tserver_uuid == uuid
    )
    master.call(DropTable("survivor", wait_seconds=scaled(20)))


def test_a_call_without_the_secret_is_refused(mini_cluster: MiniCluster) -> None:
    fast = RetryPolicy(max_attempts=2, initial_backoff=0.02, max_backoff=0.05, deadline=2)
    for secret in (None, "wrong"):
        with (
            RpcClient(
                mini_cluster.master_address, secret=secret, server_kind="master", retry=fast
            ) as stranger,
            pytest.raises(Unauthenticated, match="unauthenticated"),
        ):
            stranger.call(CreateTable("intruder", schema_text(), ["p"]))
    with mini_cluster.master_client() as client:
        names = client.call(ListTables())
        assert isinstance(names, ListTablesResponse) and "intruder" not in names.names
