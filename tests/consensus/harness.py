"""A hand-driven group of replicas for rule-by-rule tests: messages wait in a list until
the test delivers them (all, or those a predicate picks), and leaders' logs are synced
only when the test says so."""

from __future__ import annotations

import random
from collections.abc import Callable

from kudusql.consensus.messages import (
    ConsensusMessage,
    OpType,
    ReplicateMsg,
    StartTabletCopyRequest,
)
from kudusql.consensus.opid import OpId
from kudusql.consensus.raft_config import RaftConfig
from kudusql.consensus.raft_consensus import (
    ConsensusMetadata,
    DataState,
    RaftOptions,
    RaftReplica,
    Ready,
)

HT0 = 1_000_000 << 12


def entry(term: int, index: int, ts: int | None = None, payload: str = "x") -> ReplicateMsg:
    timestamp = ts if ts is not None else index * 10
    return ReplicateMsg(OpId(term, index), timestamp, OpType.WRITE, payload)


def make_log(*terms: int) -> list[ReplicateMsg]:
    return [entry(term, i + 1) for i, term in enumerate(terms)]


class Group:
    def __init__(
        self,
        uuids: list[str],
        config: RaftConfig | None = None,
        options: RaftOptions | None = None,
        seed: int = 1,
    ) -> None:
        self.config = config or RaftConfig.of_voters(uuids)
        self.options = options or RaftOptions()
        self.now = 0
        self.rng = random.Random(seed)
        self.replicas: dict[str, RaftReplica] = {}
        self.inbox: list[tuple[str, ConsensusMessage]] = []
        self.committed: dict[str, list[ReplicateMsg]] = {u: [] for u in uuids}
        self.last_ready: dict[str, Ready] = {}
        self.copy_requests: list[StartTabletCopyRequest] = []
        for uuid in uuids:
            self.put(uuid, [], 0, term=0)

    def put(
        self,
        uuid: str,
        log: list[ReplicateMsg],
        committed_index: int,
        term: int,
        voted_for: str | None = None,
        config: RaftConfig | None = None,
        data_state: DataState = DataState.READY,
        tombstone_opid: OpId | None = None,
        withhold_votes: bool = False,
    ) -> RaftReplica:
        meta = ConsensusMetadata(term, voted_for, config or self.config, data_state, tombstone_opid)
        replica = RaftReplica(
            uuid, meta, log, committed_index, self.options, random.Random(uuid), self.now
        )
        if not withhold_votes:
            # As if it restarted an election timeout ago: it no longer withholds its vote
            # for a leader it may have heard before it stopped.
            replica._withhold_votes_until = self.now
        self.replicas[uuid] = replica
        self.committed[uuid] = []
        return replica

    def __getitem__(self, uuid: str) -> RaftReplica:
        return self.replicas[uuid]

    def drain(self, uuid: str) -> Ready:
        ready = self.replicas[uuid].take_ready()
        self.last_ready[uuid] = ready
        self.inbox.extend((uuid, m) for m in ready.messages)
        self.committed[uuid].extend(ready.committed)
        return ready

    def ht(self) -> int:
        return HT0 + (self.now << 12)

    def tick(self, uuid: str, advance_ms: int = 0) -> Ready:
        self.now += advance_ms
        self.replicas[uuid].tick(self.now, self.ht())
        return self.drain(uuid)

    def sync(self, uuid: str) -> Ready:
        replica = self.replicas[uuid]
        replica.log_synced(replica.last_opid, self.now)
        return self.drain(uuid)

    def deliver(
        self, pick: Callable[[str, ConsensusMessage], bool] = lambda s, m: True, rounds: int = 50
    ) -> None:
        """Delivers picked messages (and those they cause) until none is left to pick;
        unpicked messages stay in the inbox."""
        for _ in range(rounds):
            chosen: list[tuple[str, ConsensusMessage]] = []
            kept: list[tuple[str, ConsensusMessage]] = []
            for item in self.inbox:
                (chosen if pick(*item) else kept).append(item)
            if not chosen:
                return
            self.inbox = kept
            for _src, msg in chosen:
                dest = msg.dest_uuid
                if isinstance(msg, StartTabletCopyRequest):
                    self.copy_requests.append(msg)
                elif dest in self.replicas:
                    self.replicas[dest].step(msg, self.now, self.ht())
                    self.drain(dest)

    def elect(self, uuid: str) -> None:
        """Times out uuid's failure detector and delivers everything until quiet."""
        self.tick(uuid, advance_ms=60_000)
        self.deliver()
        assert self.replicas[uuid].is_leader, f"{uuid} did not win"
        self.sync(uuid)
        self.deliver()
