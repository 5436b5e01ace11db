"""The master's catalog replicated across three masters, in process (real Flight servers
on loopback, real files): one leader serves, followers refuse naming it, a catalog write
is on every master once committed, a new leader takes over with every acknowledged
write when the old one stops, a restarted master catches up, and with two of three
masters down a catalog write fails with a clear error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from kudusql.cluster.addresses import parse_master_addresses
from kudusql.cluster.client.master_client import MasterClient
from kudusql.cluster.errors import NotTheLeader
from kudusql.cluster.launcher import free_loopback_ports
from kudusql.cluster.master.messages import (
    GetMasterStatus,
    ListTables,
    MasterStatus,
)
from kudusql.cluster.master.server import MasterServer
from kudusql.cluster.retry import RetryPolicy
from kudusql.cluster.rpc_client import RpcClient
from kudusql.cluster.tserver.server import replica_options
from kudusql.common.errors import OperationalError, ProgrammingError
from tests.cluster.mini_cluster import eventually
from tests.support.timing import scaled

T = TypeVar("T")

#: A short Raft heartbeat so elections take a fraction of a second.
_RAFT = replica_options(50)


class _Masters:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.addresses = [f"127.0.0.1:{p}" for p in free_loopback_ports(3)]
        self.servers: dict[str, MasterServer] = {}
        for a in self.addresses:
            self.start(a)

    def start(self, address: str) -> MasterServer:
        server = MasterServer(
            str(self.root / address.replace(":", "_")),
            address,
            masters=self.addresses,
            replica_options=_RAFT,
            catalog_write_timeout=1.0,
        )
        self.servers[address] = server
        return server

    def stop(self, address: str) -> None:
        server = self.servers.pop(address)
        server.shutdown()
        server.close()

    def leader(self) -> str:
        def one() -> str | None:
            leaders = [a for a, s in self.servers.items() if s.is_leader]
            return leaders[0] if len(leaders) == 1 else None

        return eventually(one, "one leader master")

    def client(self) -> MasterClient:
        once = RetryPolicy(max_attempts=1, deadline=5.0)
        return MasterClient(
            [RpcClient(a, server_kind="master", timeout=5.0, retry=once) for a in self.addresses],
            failover_timeout=scaled(10),
        )

    def close(self) -> None:
        for a in list(self.servers):
            self.stop(a)


@pytest.fixture
def masters(tmp_path: Path) -> Iterator[_Masters]:
    m = _Masters(tmp_path)
    try:
        yield m
    finally:
        m.close()


def test_one_leader_serves_and_followers_name_it(masters: _Masters) -> None:
    leader = masters.leader()
    follower = next(a for a in masters.addresses if a != leader)
    with RpcClient(follower, server_kind="master", retry=RetryPolicy(max_attempts=1)) as rpc:
        with pytest.raises(NotTheLeader, match="is not the leader master") as info:
            rpc.call(ListTables())
        status = rpc.call(GetMasterStatus())
    assert info.value.leader_address == leader
    assert isinstance(status, MasterStatus)
    assert status.role == "FOLLOWER" and status.leader == leader
    assert sorted(status.masters) == sorted(masters.addresses)


def test_catalog_writes_survive_a_leader_change_and_a_restart(masters: _Masters) -> None:
    client = masters.client()
    try:
        for i in range(3):
            client.put_document(f"doc{i}", f"body{i}")
        old = masters.leader()
        masters.stop(old)
        # The client finds the new leader by itself; every acknowledged write is there.
        assert [client.document(f"doc{i}") for i in range(3)] == ["body0", "body1", "body2"]
        new = masters.leader()
        assert new != old
        client.put_document("doc3", "body3")
        # The stopped master restarts, catches up, and has the write it missed.
        restarted = masters.start(old)
        eventually(
            lambda: (
                restarted._replica is not None
                and any(k[1] == "doc3" for k, _ in restarted._replica.scan())
            ),
            "the restarted master to apply the write it missed",
        )
        assert client.document("doc3") == "body3"
    finally:
        client.close()


def test_no_majority_fails_catalog_writes_clearly(masters: _Masters) -> None:
    client = masters.client()
    client.failover_timeout = scaled(2)
    try:
        client.put_document("a", "1")
        leader = masters.leader()
        for a in [a for a in masters.addresses if a != leader]:
            masters.stop(a)
        with pytest.raises(OperationalError, match="majority of the masters"):
            client.put_document("b", "2")
    finally:
        client.close()


def test_bind_must_be_one_of_the_masters(tmp_path: Path) -> None:
    ports = free_loopback_ports(4)
    addresses = [f"127.0.0.1:{p}" for p in ports[:3]]
    with pytest.raises(ProgrammingError, match="not one of the masters"):
        MasterServer(str(tmp_path / "m"), f"127.0.0.1:{ports[3]}", masters=addresses)


def test_masters_list_parses() -> None:
    assert parse_master_addresses(" a:1, b:2 ,c:3") == ["a:1", "b:2", "c:3"]
    with pytest.raises(ProgrammingError, match="listed twice"):
        parse_master_addresses("a:1,a:1")


def test_a_single_masters_catalog_stays_single(tmp_path: Path) -> None:
    """A single master's directory opens as before, and refuses to join replicated
    masters (no migration)."""
    directory = str(tmp_path / "m")
    server = MasterServer(directory)
    server.close()
    server = MasterServer(directory)  # the existing single-master catalog opens
    assert server.is_leader and server.role == "LEADER" and not server.replicated
    server.close()
    addresses = [f"127.0.0.1:{p}" for p in free_loopback_ports(3)]
    with pytest.raises(ProgrammingError, match="single master's catalog"):
        MasterServer(directory, addresses[0], masters=addresses)
