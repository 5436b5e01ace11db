"""Replicated tablets on real tablet server processes: three servers host replicas of one
tablet (created on each directly, as the master does not place replicas yet) and talk
Raft to each other over Flight. Writes go through the leader (a follower refuses them
naming it); every replica applies the same rows; a SIGKILLed leader is replaced and the
restarted server catches up."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from kudusql.cluster.errors import NotTheLeader
from kudusql.cluster.retry import RetryPolicy
from kudusql.cluster.rpc_client import RpcClient
from kudusql.cluster.security import write_secret_file
from kudusql.cluster.tablet_partition import TabletPartition
from kudusql.cluster.tserver.messages import (
    CreateTablet,
    DeleteTablet,
    RaftPeerAddress,
    ScanRequest,
    TabletChanged,
    WriteRequest,
    WriteResponse,
)
from kudusql.cluster.tserver.peer_messenger import PeerMessenger
from kudusql.cluster.tserver.superblock import RUNNING, Superblock, TabletEntry
from kudusql.common.errors import KuduAlreadyPresent, ProgrammingError
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.consensus.messages import VoteRequest
from kudusql.consensus.opid import OpId
from kudusql.storage.tables.partition import Partition, PartitionSchema, RangeBounds
from tests.cluster.tserver_process import TServerProcess
from tests.support.timing import scaled

SECRET = "replicated-tserver-secret"
FAST = RetryPolicy(max_attempts=3, initial_backoff=0.02, max_backoff=0.1, deadline=2.0)
RAFT = ["--raft-heartbeat-ms", "100"]
TABLET = "rt-1"
WHOLE = TabletPartition.of(
    PartitionSchema(), Partition((), RangeBounds(), b"", b"", b"", b"")
).to_json()
SCHEMA = Schema.build(
    [
        ColumnSchema("id", DataType.parse("BIGINT"), nullable=False),
        ColumnSchema("name", DataType.parse("STRING")),
    ],
    ["id"],
)


def client(address: str) -> RpcClient:
    return RpcClient(address, secret=SECRET, server_kind="tablet server", retry=FAST, timeout=5)


def create(peers: list[RaftPeerAddress] | None) -> CreateTablet:
    schema = json.dumps(SCHEMA.to_dict())
    return CreateTablet(TABLET, "table-1", "people", WHOLE, schema, 1, raft_peers=peers)


def rows(ids: range) -> pa.Table:
    return pa.table(
        {"id": pa.array(list(ids), pa.int64()), "name": [f"n{i}" for i in ids]},
    )


class Cluster:
    """Three tablet server processes, each with a replica of ``TABLET``."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.servers = [
            TServerProcess(workdir / f"ts{i}", workdir / "secret", args=RAFT) for i in range(3)
        ]
        self.uuids = []
        for s in self.servers:
            with client(s.address) as c:
                self.uuids.append(c.ping().server_uuid)
        self.alive = [True, True, True]
        #: The HybridTime of the last acknowledged write.
        self.last_timestamp = 0
        pairs = zip(self.uuids, self.servers, strict=True)
        self.peers = [RaftPeerAddress(u, s.address) for u, s in pairs]

    def kill(self, i: int) -> None:
        self.servers[i].kill()
        self.alive[i] = False

    def restart(self, i: int) -> None:
        old = self.servers[i]
        # The same port: the peers dial the address they were given.
        self.servers[i] = TServerProcess(
            old.directory, old.secret_file, args=[*RAFT, "--bind", old.address]
        )
        self.alive[i] = True

    def write(self, ids: range, timeout: float = 20.0) -> int:
        """Upsert ``ids`` through whoever leads (found by trying: a follower's refusal
        names the leader); the leader's index."""
        deadline = time.monotonic() + scaled(timeout)
        while True:
            for i, s in enumerate(self.servers):
                if not self.alive[i]:
                    continue
                with client(s.address) as c:
                    try:
                        answer = c.put(WriteRequest(TABLET, "upsert"), rows(ids))
                    except NotTheLeader:
                        continue
                assert isinstance(answer, WriteResponse)
                assert (answer.applied, answer.row_errors) == (len(ids), [])
                self.last_timestamp = answer.timestamp
                return i
            if time.monotonic() > deadline:
                raise AssertionError(f"no leader took a write in {timeout} s")
            time.sleep(0.05)

    def scan(self, i: int, snapshot: int | None = None) -> list[int]:
        with client(self.servers[i].address) as c:
            table = c.get(ScanRequest(TABLET, ordered=True, snapshot_timestamp=snapshot))
        return [int(v) for v in table.column("id").to_pylist()]

    def converge(self, expected: list[int], timeout: float = 20.0) -> None:
        """Every live replica's tablet holds exactly ``expected``."""
        deadline = time.monotonic() + scaled(timeout)
        while True:
            # A snapshot just after the last acknowledged write: every replica serves
            # it once its safe time gets there (a read of the latest is the leader's).
            got = [self.scan(i, self.last_timestamp + 1) for i in range(3) if self.alive[i]]
            if all(g == expected for g in got):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"replicas did not converge on {expected}: {got}")
            time.sleep(0.05)

    def stop(self) -> None:
        for i, s in enumerate(self.servers):
            if self.alive[i]:
                assert s.stop() == 0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    write_secret_file(tmp_path / "secret", SECRET)
    c = Cluster(tmp_path)
    try:
        yield c
    finally:
        c.stop()
    for i in range(3):
        assert "Traceback" not in (tmp_path / f"ts{i}" / "tserver.log").read_text()


def test_replicated_tablet_survives_its_leaders_crash(cluster: Cluster) -> None:
    # A replicated create names this server among distinct peers.
    with client(cluster.servers[0].address) as c:
        others = [RaftPeerAddress("someone-else", "127.0.0.1:1"), *cluster.peers[1:]]
        with pytest.raises(ProgrammingError, match="is not among its raft peers"):
            c.call(create(others))
        with pytest.raises(ProgrammingError, match="distinct"):
            c.call(create([cluster.peers[0], cluster.peers[0]]))
    for s in cluster.servers:
        with client(s.address) as c:
            assert c.call(create(cluster.peers)) == TabletChanged(TABLET, "RUNNING", 1)
            assert c.call(create(cluster.peers)) == TabletChanged(TABLET, "RUNNING", 1)
            with pytest.raises(KuduAlreadyPresent, match="other raft peers"):
                c.call(create(None))
    acked: list[int] = []
    leader = cluster.write(range(0, 5))
    acked += range(0, 5)
    for start in range(5, 20, 5):
        cluster.write(range(start, start + 5))
        acked += range(start, start + 5)
    cluster.converge(acked)

    # A duplicate INSERT is a row error, the same outcome on every replica.
    with client(cluster.servers[leader].address) as c:
        answer = c.put(WriteRequest(TABLET, "insert"), rows(range(3, 4)))
    assert isinstance(answer, WriteResponse)
    assert [(e.index, e.status) for e in answer.row_errors] == [(0, "AlreadyPresent")]

    # A follower refuses a write and names the leader; an atomic write is not supported.
    follower = (leader + 1) % 3
    with client(cluster.servers[follower].address) as c:
        with pytest.raises(NotTheLeader) as refused:
            c.put(WriteRequest(TABLET, "upsert"), rows(range(90, 91)))
        assert refused.value.leader_uuid == cluster.uuids[leader]
        assert refused.value.leader_address == cluster.servers[leader].address
    # An atomic write goes through the log too (a flag in its entry).
    with client(cluster.servers[leader].address) as c:
        atomic = c.put(WriteRequest(TABLET, "upsert", atomic=True), rows(range(90, 91)))
    assert isinstance(atomic, WriteResponse) and atomic.applied == 1
    acked.append(90)

    # The leader crashes: another one is elected and takes writes.
    cluster.kill(leader)
    new_leader = cluster.write(range(100, 110))
    assert new_leader != leader
    acked += range(100, 110)
    # A snapshot read just after the acknowledged write waits for each replica's safe
    # time: the follower answers it complete without being waited for.
    snapshot = cluster.last_timestamp + 1
    for i in range(3):
        if cluster.alive[i]:
            assert cluster.scan(i, snapshot) == acked
    cluster.converge(acked)

    # The crashed server comes back on its directory and catches up.
    cluster.restart(leader)
    cluster.write(range(110, 120))
    acked += range(110, 120)
    cluster.converge(acked)

    # Deleting the tablet closes and removes each replica.
    for i, s in enumerate(cluster.servers):
        with client(s.address) as c:
            assert c.call(DeleteTablet(TABLET)) == TabletChanged(TABLET, "TOMBSTONED", 1)
        assert not (cluster.workdir / f"ts{i}" / "tablets" / TABLET).exists()


def test_the_superblock_records_replication_only_for_a_replicated_tablet(tmp_path: Path) -> None:
    plain = TabletEntry("t1", "table-1", "people", WHOLE, SCHEMA, 1, RUNNING)
    replicated = dataclasses.replace(plain, tablet_id="t2", raft_peers=(("a", "h:1"), ("b", "h:2")))
    assert "raft_peers" not in plain.to_dict()  # an unreplicated entry is written as before
    Superblock("uuid-1", 1, (plain, replicated)).save(str(tmp_path))
    loaded = Superblock.load(str(tmp_path))
    assert loaded is not None and loaded.tablets == (plain, replicated)
    assert [e.replicated for e in loaded.tablets] == [False, True]


def test_the_messenger_drops_what_it_cannot_deliver_without_blocking() -> None:
    messenger = PeerMessenger(secret=SECRET, timeout=0.2, max_queued=8)
    try:
        # Nothing listens at port 1; "nobody" has no known address.
        messenger.set_address("down", "127.0.0.1:1")
        for term in range(100):
            messenger.send(TABLET, VoteRequest("me", term, "down", OpId(0, 0), True))
            messenger.send(TABLET, VoteRequest("me", term, "nobody", OpId(0, 0), True))
        assert messenger.address_of("down") == "127.0.0.1:1"
        assert messenger.address_of("nobody") is None
    finally:
        messenger.close()
