"""Three ``TabletReplica``s of one tablet in one process, on real files with real fsyncs,
joined by an in-memory network that queues messages (one delivery thread) and can cut a
replica off: elections, replication, refusals, a crashed leader, a partitioned one."""

from __future__ import annotations

import contextlib
import queue
import random
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from kudusql.cluster.tserver.tablet_replica import (
    NotLeaderError,
    ReplicaOptions,
    TabletReplica,
    Transport,
    WriteLostError,
    WriteTimeoutError,
    decode_write,
    encode_write,
)
from kudusql.common.errors import OperationalError
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.consensus.messages import ConsensusMessage
from kudusql.consensus.raft_config import RaftConfig
from kudusql.consensus.raft_consensus import RaftOptions
from tests.cluster.replica_process import ProcessNetwork, ReplicaProcess

UUIDS = ("ts-a", "ts-b", "ts-c")
SCHEMA = Schema.build(
    [
        ColumnSchema("id", DataType.parse("BIGINT"), nullable=False),
        ColumnSchema("name", DataType.parse("STRING")),
    ],
    ["id"],
)
OPTIONS = ReplicaOptions(
    raft=RaftOptions(heartbeat_interval_ms=50, evict_failed_followers=False),
    tick_interval_s=0.01,
    write_timeout_s=5.0,
)
WAIT_S = 10.0


class Network:
    """Queues every message; one thread delivers them in order, dropping those from or
    to a cut-off replica, or to one that is down."""

    def __init__(self) -> None:
        self.replicas: dict[str, TabletReplica] = {}
        self.cut: set[str] = set()
        self.errors: list[BaseException] = []
        self._queue: queue.Queue[tuple[str, ConsensusMessage] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._deliver, daemon=True)
        self._thread.start()

    def transport(self, sender: str) -> Transport:
        return lambda message: self._queue.put((sender, message))

    def _deliver(self) -> None:
        while (item := self._queue.get()) is not None:
            sender, message = item
            dest = message.dest_uuid
            replica = self.replicas.get(dest)
            if replica is None or sender in self.cut or dest in self.cut:
                continue
            try:
                replica.receive(message)
            except BaseException as e:  # a replica failure: the test fails at the end
                self.errors.append(e)

    def stop(self) -> None:
        self._queue.put(None)
        self._thread.join()


class Group:
    def __init__(self, root: Path, seed: int, options: ReplicaOptions | None = None) -> None:
        self.root = root
        self.net = Network()
        self.seed = seed
        # The module's OPTIONS at call time (a test may replace it).
        self.options = options = options or OPTIONS
        config = RaftConfig.of_voters(list(UUIDS))
        for i, uuid in enumerate(UUIDS):
            self.net.replicas[uuid] = TabletReplica.create(
                str(root / uuid),
                uuid=uuid,
                tablet_id="t1",
                schema=SCHEMA,
                config=config,
                transport=self.net.transport(uuid),
                options=options,
                rng=random.Random(seed * 10 + i),
            )
        #: Every write acknowledged to the client: id -> name.
        self.acked: dict[int, str] = {}

    @property
    def up(self) -> list[TabletReplica]:
        return list(self.net.replicas.values())

    def reopen(self, uuid: str) -> TabletReplica:
        replica = TabletReplica.open(
            str(self.root / uuid),
            transport=self.net.transport(uuid),
            options=self.options,
            rng=random.Random(self.seed * 100),
        )
        self.net.replicas[uuid] = replica
        return replica

    def crash(self, uuid: str) -> None:
        self.net.replicas.pop(uuid).abandon()

    def leader(self, among: list[str] | None = None) -> TabletReplica:
        """The leader of the highest term among ``among`` that takes writes."""
        return wait_for(lambda: self._leader(among), "a leader")

    def _leader(self, among: list[str] | None) -> TabletReplica | None:
        leaders = [r for r in self.up if r.is_leader and (among is None or r.uuid in among)]
        return max(leaders, key=lambda r: r.term) if leaders else None

    def write(self, ids: range, among: list[str] | None = None) -> None:
        """UPSERTs ``ids`` through whoever leads, retrying refusals and lost writes
        (an UPSERT applies the same twice); records them acknowledged on success."""
        self._upsert(list(ids), among)

    def write_one(self, i: int) -> int:
        """UPSERTs row ``i`` through whoever leads; its commit timestamp."""
        return self._upsert([i], None)

    def _upsert(self, ids: list[int], among: list[str] | None) -> int:
        names = [f"n{i}" for i in ids]
        data = pa.table({"id": pa.array(ids, pa.int64()), "name": names})
        deadline = time.monotonic() + WAIT_S
        while True:
            leader = self.leader(among)
            try:
                result = leader.write(data, "upsert", timeout_s=2.0)
            except (NotLeaderError, WriteLostError, WriteTimeoutError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
                continue
            assert result.errors == []
            self.acked.update(zip(ids, names, strict=True))
            return result.timestamp

    def converged(self, uuids: tuple[str, ...] = UUIDS) -> list[dict[str, Any]]:
        """Waits until the replicas ``uuids`` applied the same entries; their rows."""
        replicas = [self.net.replicas[u] for u in uuids]

        def same() -> list[dict[str, Any]] | None:
            leader = self._leader(None)
            if leader is None:
                return None
            target = leader.committed_index
            if any(r.applied_index != target for r in replicas):
                return None
            rows = [rows_of(r) for r in replicas]
            return rows[0] if all(x == rows[0] for x in rows) else None

        return wait_for(same, f"replicas {uuids} to converge")

    def check_acked(self, rows: list[dict[str, Any]]) -> None:
        held = {r["id"]: r["name"] for r in rows}
        assert {i: held.get(i) for i in self.acked} == self.acked

    def close(self) -> None:
        for r in self.up:
            r.close()
        self.net.stop()
        assert self.net.errors == []


def rows_of(replica: TabletReplica) -> list[dict[str, Any]]:
    return replica.tablet.scan(ordered=True).read_all().to_pylist()


def wait_for(probe: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + WAIT_S
    while True:
        got = probe()
        if got is not None:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


@pytest.fixture
def group(tmp_path: Path) -> Iterator[Group]:
    g = Group(tmp_path, seed=1)
    try:
        yield g
    finally:
        with contextlib.suppress(OperationalError):
            g.close()


def test_payload_round_trips() -> None:
    data = pa.table({"id": pa.array([1, 2], pa.int64()), "op": ["insert", "delete"]})
    assert decode_write(encode_write(data, None, "op")) == (data, None, "op")
    assert decode_write(encode_write(data, "upsert", None))[1:] == ("upsert", None)


def test_three_replicas_elect_a_leader_and_apply_the_same_writes(group: Group) -> None:
    leader = group.leader()
    assert sum(r.is_leader for r in group.up) == 1
    for start in range(0, 50, 10):
        group.write(range(start, start + 10))
    rows = group.converged()
    assert len(rows) == 50
    group.check_acked(rows)
    # Every replica applied at the leader's timestamps: the same history, not just rows.
    assert all(r.committed_index == leader.committed_index for r in group.up)


def test_a_follower_refuses_writes_and_names_the_leader(group: Group) -> None:
    group.write(range(3))
    leader = group.leader()
    group.converged()
    follower = next(r for r in group.up if not r.is_leader)
    data = pa.table({"id": pa.array([9], pa.int64()), "name": ["x"]})
    with pytest.raises(NotLeaderError, match=f"not the leader \\(leader is {leader.uuid}\\)"):
        follower.write(data, "insert")


def test_row_errors_are_the_entrys_outcome_on_every_replica(group: Group) -> None:
    group.write(range(3))
    leader = group.leader()
    data = pa.table({"id": pa.array([2, 7], pa.int64()), "name": ["dup", "new"]})
    result = leader.write(data, "insert")
    assert [e.index for e in result.errors] == [0]
    rows = group.converged()
    assert {r["id"]: r["name"] for r in rows} == {0: "n0", 1: "n1", 2: "n2", 7: "new"}


def test_a_crashed_leader_is_replaced_and_catches_up_after_reopening(group: Group) -> None:
    group.write(range(0, 20))
    old = group.leader()
    group.crash(old.uuid)
    others = [u for u in UUIDS if u != old.uuid]
    new = group.leader(others)
    assert new.uuid != old.uuid and new.term > old.term
    group.write(range(20, 40), among=others)
    group.check_acked(group.converged(tuple(others)))
    reopened = group.reopen(old.uuid)
    # The tablet is durable state: it reopens holding the write it applied.
    assert reopened.bootstrap_stats["applied_index"] >= 2
    group.write(range(40, 45))
    rows = group.converged()
    assert len(rows) == 45
    group.check_acked(rows)


def test_a_write_to_a_partitioned_leader_is_lost_not_acknowledged(group: Group) -> None:
    group.write(range(0, 5))
    old = group.leader()
    group.converged()
    group.net.cut.add(old.uuid)
    outcome: list[BaseException | object] = []
    stale = pa.table({"id": pa.array([1000], pa.int64()), "name": ["stale"]})

    def write_stale() -> None:
        try:
            outcome.append(old.write(stale, "insert", timeout_s=WAIT_S))
        except BaseException as e:
            outcome.append(e)

    writer = threading.Thread(target=write_stale)
    writer.start()
    others = [u for u in UUIDS if u != old.uuid]
    group.write(range(5, 15), among=others)
    group.net.cut.clear()
    writer.join()
    assert len(outcome) == 1 and isinstance(outcome[0], WriteLostError), outcome
    assert "lost to a leader change" in str(outcome[0])
    rows = group.converged()
    assert 1000 not in {r["id"] for r in rows}
    group.check_acked(rows)


def test_reopening_every_replica_rebuilds_the_same_tablets(group: Group) -> None:
    group.write(range(0, 10))
    group.converged()
    for uuid in UUIDS:
        group.crash(uuid)
    for uuid in UUIDS:
        group.reopen(uuid)
    group.write(range(10, 12))
    rows = group.converged()
    assert len(rows) == 12
    group.check_acked(rows)


def test_a_sigkilled_leader_loses_no_acknowledged_write(tmp_path: Path) -> None:
    """Each replica in its own process; a client writes continuously through whoever
    leads while the leader is SIGKILLed and later restarted."""
    config = RaftConfig.of_voters(list(UUIDS))
    for uuid in UUIDS:
        TabletReplica.create(
            str(tmp_path / uuid),
            uuid=uuid,
            tablet_id="t1",
            schema=SCHEMA,
            config=config,
            transport=lambda m: None,
            options=OPTIONS,
        ).close()
    net = ProcessNetwork()
    for uuid in UUIDS:
        net.children[uuid] = ReplicaProcess(uuid, tmp_path / uuid, net)
    acked: set[int] = set()
    stop = threading.Event()

    def statuses(rows: bool = False) -> dict[str, dict[str, Any]]:
        out = {}
        for uuid, child in list(net.children.items()):
            with contextlib.suppress(TimeoutError, ConnectionError):
                out[uuid] = child.call("status", rows, timeout_s=2.0)
        return out

    def leader() -> str | None:
        leaders = [(s["term"], u) for u, s in statuses().items() if s["is_leader"]]
        return max(leaders)[1] if leaders else None

    def client() -> None:
        next_id = 0
        while not stop.is_set():
            uuid = leader()
            child = net.children.get(uuid) if uuid is not None else None
            if child is None:
                time.sleep(0.02)
                continue
            ids = list(range(next_id, next_id + 5))
            next_id += 5
            with contextlib.suppress(TimeoutError, ConnectionError):
                if child.call("write", ids, timeout_s=5.0) is None:
                    acked.update(ids)

    writer = threading.Thread(target=client)
    try:
        first = wait_for(leader, "a leader")
        writer.start()
        wait_for(lambda: len(acked) >= 10 or None, "writes through the first leader")
        net.children.pop(first).kill()
        acked_before = len(acked)
        wait_for(lambda: leader() not in (None, first) or None, "a new leader")
        wait_for(lambda: len(acked) >= acked_before + 10 or None, "writes after the kill")
        net.children[first] = ReplicaProcess(first, tmp_path / first, net)
        wait_for(lambda: len(acked) >= acked_before + 20 or None, "writes after the restart")
        stop.set()
        writer.join()

        def converged() -> list[tuple[int, str]] | None:
            s = statuses(rows=True)
            top = max((x["committed"] for x in s.values()), default=-1)
            if len(s) != 3 or any(x["applied"] != top for x in s.values()):
                return None
            rows = [x["rows"] for x in s.values()]
            return rows[0] if all(r == rows[0] for r in rows) else None

        rows = wait_for(converged, "the three replicas to converge")
        held = {i for i, _ in rows}
        assert acked <= held, sorted(acked - held)
    finally:
        stop.set()
        if writer.is_alive():
            writer.join()
        for child in net.children.values():
            child.stop()
    for uuid in UUIDS:  # a replica that failed would have printed its traceback
        assert "Traceback" not in (tmp_path / f"{uuid}.stderr").read_text()
