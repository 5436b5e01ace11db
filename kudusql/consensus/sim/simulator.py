"""Runs one tablet's Raft replicas under a seed: a simulated clock, a faulty network,
crashes that keep only what was persisted, restarts, client writes, config changes made
by a master-like actor, tablet copies and tombstones. Raft's safety properties are checked
after every step; at the end the faults stop and liveness is checked.

Every decision comes from one ``random.Random(seed)`` and no set is iterated, so a seed
replays exactly; a violation raises :class:`SimulationFailure` with the seed and the
trace of the last steps.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from dataclasses import dataclass, field
from typing import Any, NoReturn

from kudusql.common.hybrid_time import LOGICAL_BITS
from kudusql.consensus.messages import (
    ConsensusMessage,
    ReplicateMsg,
    StartTabletCopyRequest,
    UpdateConsensusRequest,
    UpdateConsensusResponse,
    VoteRequest,
    VoteResponse,
)
from kudusql.consensus.opid import OpId
from kudusql.consensus.raft_config import MemberType, RaftConfig
from kudusql.consensus.raft_consensus import (
    ChangeType,
    ConfigChange,
    ConsensusError,
    ConsensusMetadata,
    DataState,
    RaftOptions,
    RaftReplica,
)
from kudusql.consensus.sim.network import SimNetwork


class SimulationFailure(AssertionError):
    """A safety or liveness violation, with the seed that reproduces it and a trace."""

    def __init__(self, seed: int, step: int, message: str, trace: list[str]) -> None:
        lines = "\n".join(trace)
        super().__init__(f"seed {seed}, step {step}: {message}\nlast steps:\n{lines}")
        self.seed = seed
        self.step = step
        self.violation = message


#: Twice the largest clock skew (below), plus one: the error the leader lease allows for.
_CLOCK_ERROR_MS = 2 * 300 + 1


@dataclass(slots=True)
class SimOptions:
    """The shape of one run. Defaults are the small per-seed run of the default suite."""

    servers: int = 5
    initial_voters: int = 3
    fault_steps: int = 250
    #: Simulated milliseconds the healed cluster gets to elect and catch up.
    quiesce_budget_ms: int = 60_000
    tick_ms: int = 100
    client_write_every_ms: int = 150
    chaos_every_ms: int = 400
    crash_before_send: float = 0.01
    #: A leader's own appends become durable 1 ms to this long after they are written.
    max_sync_delay_ms: int = 30
    clock_skew_ms: int = 300
    raft: RaftOptions = field(
        default_factory=lambda: RaftOptions(
            follower_unavailable_considered_failed_ms=4_000,
            max_clock_error_ms=_CLOCK_ERROR_MS,
        )
    )


def varied_options(seed: int, max_fault_steps: int = 1500) -> SimOptions:
    """A run's shape drawn from its seed: voters, batch size, timeouts, pre-election and
    eviction on or off, fault rates, disk speed. Many shapes find what one shape misses
    (a follower committing past the entries it matched was found only this way)."""
    rng = random.Random(f"shape-{seed}")
    raft = RaftOptions(
        heartbeat_interval_ms=rng.choice([100, 500]),
        enable_pre_election=rng.random() < 0.7,
        evict_failed_followers=rng.random() < 0.8,
        follower_unavailable_considered_failed_ms=rng.choice([2_000, 4_000, 300_000]),
        max_batch_ops=rng.choice([1, 2, 16]),
        max_clock_error_ms=_CLOCK_ERROR_MS,
    )
    return SimOptions(
        initial_voters=rng.choice([1, 2, 3, 3, 5]),
        fault_steps=rng.choice([max_fault_steps // 15, max_fault_steps // 4, max_fault_steps]),
        chaos_every_ms=rng.choice([100, 400, 1_000]),
        crash_before_send=rng.choice([0.0, 0.01, 0.05]),
        max_sync_delay_ms=rng.choice([5, 30, 400]),
        raft=raft,
    )


@dataclass(slots=True)
class _Disk:
    """What a server keeps across a crash."""

    meta: ConsensusMetadata
    log: list[ReplicateMsg] = field(default_factory=list)
    durable: int = 0
    #: How far the tablet has applied committed entries (lost past the durable log).
    applied: int = 0


@dataclass(slots=True)
class _Server:
    uuid: str
    disk: _Disk
    skew_ms: int
    replica: RaftReplica | None = None
    incarnation: int = 0
    clock_floor: int = 0
    #: A paused process (SIGSTOP) handles nothing before this time, then all it missed.
    paused_until: int = 0


@dataclass(slots=True)
class SimStats:
    steps: int = 0
    messages: int = 0
    elections: int = 0
    crashes: int = 0
    config_changes: int = 0
    tablet_copies: int = 0
    writes_acknowledged: int = 0
    committed: int = 0
    #: Safe-time claims above zero checked (a replica's ``safe_time`` at a tick).
    safe_time_claims: int = 0
    sim_ms: int = 0


class Simulation:
    """One seeded run; ``run()`` returns its statistics or raises SimulationFailure."""

    def __init__(self, seed: int, options: SimOptions | None = None) -> None:
        self.seed = seed
        self.options = options or SimOptions()
        self.rng = random.Random(seed)
        self.network = SimNetwork(self.rng)
        self.now = 0
        self.stats = SimStats()
        self._queue: list[tuple[int, int, str, Any]] = []
        self._seq = 0
        self._trace: deque[tuple[int, int, str, Any]] = deque(maxlen=200)
        self._quiescing = False
        uuids = [f"ts{i}" for i in range(self.options.servers)]
        config = RaftConfig.of_voters(uuids[: self.options.initial_voters])
        self.servers: dict[str, _Server] = {}
        for uuid in uuids:
            meta = (
                ConsensusMetadata.new_replica(config)
                if config.is_member(uuid)
                else ConsensusMetadata.empty()
            )
            skew = self.rng.randint(-self.options.clock_skew_ms, self.options.clock_skew_ms)
            self.servers[uuid] = _Server(uuid, _Disk(meta), skew)
        # Global knowledge the invariants check against.
        self.committed: dict[int, ReplicateMsg] = {}
        #: The lowest term of a replica seen applying each committed index: the entry was
        #: committed in this term or an earlier one.
        self.commit_term: dict[int, int] = {}
        self.acknowledged: dict[int, ReplicateMsg] = {}
        self._entries: dict[tuple[int, int], tuple[int, str, str | None, int]] = {}
        self._leaders: dict[int, str] = {}
        self._pending_writes: dict[tuple[str, OpId], str] = {}
        #: The highest safe time claimed with each committed index: every entry that
        #: ever commits with a timestamp at or below the claim is at or below the index.
        self._claims: dict[int, int] = {}
        self._max_committed = 0
        self._write_seq = 0
        for uuid in uuids:
            self._start(uuid)
        self._schedule(self.options.client_write_every_ms, "client", None)
        self._schedule(self.options.chaos_every_ms, "chaos", None)

    # ----------------------------------------------------------------- driving

    def run(self) -> SimStats:
        for _ in range(self.options.fault_steps):
            self._step()
        self._quiesce()
        self.stats.sim_ms = self.now
        self.stats.committed = len(self.committed)
        return self.stats

    def _step(self) -> None:
        when, _, kind, data = heapq.heappop(self._queue)
        self.now = when
        target = _target(kind, data)
        if target is not None and self.servers[target].paused_until > when:
            self._schedule(self.servers[target].paused_until - when, kind, data)
            return
        self.stats.steps += 1
        if kind in ("deliver", "sync", "copy"):
            self._trace.append((self.stats.steps, when, kind, data))
        try:
            getattr(self, "_on_" + kind)(data)
        except SimulationFailure:
            raise
        except AssertionError as e:
            self._fail(f"assertion in a replica: {e}")

    def _schedule(self, delay: int, kind: str, data: Any) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (self.now + delay, self._seq, kind, data))

    def _fail(self, message: str) -> NoReturn:
        trace = [f"  #{n} t={t}ms {kind} {_describe(data)}" for n, t, kind, data in self._trace]
        raise SimulationFailure(self.seed, self.stats.steps, message, trace)

    def _hybrid_now(self, server: _Server) -> int:
        physical = ((self.now + server.skew_ms + 1_000_000) * 1000) << LOGICAL_BITS
        return max(physical, server.clock_floor + 1)

    # ----------------------------------------------------------------- servers

    def _start(self, uuid: str) -> None:
        server = self.servers[uuid]
        disk = server.disk
        if disk.meta.data_state is DataState.COPYING:
            # A copy interrupted by a crash leaves a tombstone.
            disk.meta = ConsensusMetadata(
                disk.meta.current_term,
                disk.meta.voted_for,
                disk.meta.committed_config,
                DataState.TOMBSTONED,
                disk.meta.tombstone_last_logged_opid,
            )
        server.incarnation += 1
        server.paused_until = 0
        server.replica = RaftReplica(
            uuid,
            disk.meta,
            list(disk.log),
            disk.applied,
            self.options.raft,
            random.Random(self.rng.getrandbits(64)),
            self.now,
        )
        offset = self.rng.randrange(self.options.tick_ms)
        self._schedule(offset, "tick", (uuid, server.incarnation))

    def _crash(self, uuid: str) -> None:
        server = self.servers[uuid]
        server.replica = None
        server.clock_floor = 0
        disk = server.disk
        del disk.log[disk.durable :]
        disk.applied = min(disk.applied, disk.durable)
        self.stats.crashes += 1
        self._check_acknowledged_durable()
        for key in [k for k in self._pending_writes if k[0] == uuid]:
            del self._pending_writes[key]

    def _alive(self) -> list[_Server]:
        """The servers that run and are not paused."""
        return [
            s for s in self.servers.values() if s.replica is not None and s.paused_until <= self.now
        ]

    def _handle_ready(self, server: _Server) -> None:
        replica = server.replica
        assert replica is not None
        ready = replica.take_ready()
        disk = server.disk
        if ready.meta is not None:
            disk.meta = ready.meta
        # The simulated copies ship whole logs (the simulated disk has no GC).
        assert ready.copied_log_base is None or ready.copied_log_base.index == 0
        if ready.truncate_after is not None:
            if replica.data_state is DataState.READY and ready.reset_applied_to is None:
                self._check_truncation(server.uuid, disk.log, ready.truncate_after)
            del disk.log[ready.truncate_after :]
            disk.durable = min(disk.durable, ready.truncate_after)
            disk.applied = min(disk.applied, ready.truncate_after)
        for entry in ready.appends:
            self._check_log_matching(server.uuid, disk.log, entry)
            disk.log.append(entry)
        if ready.sync_before_send:
            disk.durable = len(disk.log)
        elif ready.appends:
            last = ready.appends[-1].id
            self._schedule(
                self.rng.randint(1, self.options.max_sync_delay_ms),
                "sync",
                (server.uuid, server.incarnation, last),
            )
        if ready.clock_update is not None:
            server.clock_floor = max(server.clock_floor, ready.clock_update)
        if ready.reset_applied_to is not None:
            disk.applied = ready.reset_applied_to
            for entry in disk.log[: ready.reset_applied_to]:
                self._check_apply(server.uuid, entry, replica.current_term)
        if replica.is_leader:
            self._check_leader(server.uuid, replica)
        if (
            ready.messages
            and not self._quiescing
            and self.rng.random() < self.options.crash_before_send
        ):
            self._trace.append((self.stats.steps, self.now, "crash-before-send", server.uuid))
            self._crash(server.uuid)
            return
        for msg in ready.messages:
            self._send(server.uuid, msg)
        for entry in ready.committed:
            self._check_apply(server.uuid, entry, replica.current_term)
            disk.applied = max(disk.applied, entry.id.index)
            payload = self._pending_writes.pop((server.uuid, entry.id), None)
            if payload is not None and payload == entry.payload:
                self.acknowledged[entry.id.index] = entry
                self.stats.writes_acknowledged += 1

    def _send(self, src: str, msg: ConsensusMessage) -> None:
        self.stats.messages += 1
        for delay in self.network.delays(src, msg.dest_uuid):
            self._schedule(delay, "deliver", (src, msg))

    # ----------------------------------------------------------------- events

    def _on_tick(self, data: tuple[str, int]) -> None:
        uuid, incarnation = data
        server = self.servers[uuid]
        if server.replica is None or server.incarnation != incarnation:
            return
        server.replica.tick(self.now, self._hybrid_now(server))
        if server.replica.has_output:
            self._trace.append((self.stats.steps, self.now, "tick", uuid))
        self._handle_ready(server)
        if server.replica is not None:
            self._check_safe_time(server)
        self._schedule(self.options.tick_ms, "tick", data)

    def _on_deliver(self, data: tuple[str, ConsensusMessage]) -> None:
        src, msg = data
        server = self.servers[msg.dest_uuid]
        replica = server.replica
        if replica is None or not self.network.connected(src, msg.dest_uuid):
            return
        if isinstance(msg, StartTabletCopyRequest):
            try:
                replica.start_tablet_copy(msg, self.now)
            except ConsensusError:
                return
            self._handle_ready(server)
            self._schedule(
                self.rng.randint(20, 300), "copy", (msg.dest_uuid, server.incarnation, src)
            )
            return
        replica.step(msg, self.now, self._hybrid_now(server))
        self._handle_ready(server)

    def _on_sync(self, data: tuple[str, int, OpId]) -> None:
        uuid, incarnation, opid = data
        server = self.servers[uuid]
        if server.replica is None or server.incarnation != incarnation:
            return
        log = server.disk.log
        if opid.index <= len(log) and log[opid.index - 1].id == opid:
            server.disk.durable = max(server.disk.durable, opid.index)
        server.replica.log_synced(opid, self.now)
        self._handle_ready(server)

    def _on_copy(self, data: tuple[str, int, str]) -> None:
        uuid, incarnation, source_uuid = data
        server = self.servers[uuid]
        replica = server.replica
        if replica is None or server.incarnation != incarnation:
            return
        source = self.servers[source_uuid].replica
        if (
            source is None
            or self.servers[source_uuid].paused_until > self.now
            or source.data_state is not DataState.READY
            or not self.network.connected(uuid, source_uuid)
        ):
            replica.tablet_copy_failed(self.now)
        else:
            # The copy is the source's data (its committed state) and its whole WAL.
            replica.tablet_copy_complete(
                source.metadata(), list(source.log), source.committed_index, self.now
            )
            self.stats.tablet_copies += 1
        self._handle_ready(server)

    def _on_client(self, _: None) -> None:
        if not self._quiescing:
            self._schedule(self.options.client_write_every_ms, "client", None)
        leaders = [s for s in self._alive() if s.replica is not None and s.replica.is_leader]
        if not leaders:
            return
        server = self.rng.choice(leaders)
        assert server.replica is not None
        self._write_seq += 1
        payload = f"w{self._write_seq}"
        try:
            opid = server.replica.replicate(payload, self.now, self._hybrid_now(server))
        except ConsensusError:
            return
        self._pending_writes[(server.uuid, opid)] = payload
        self._trace.append(
            (self.stats.steps, self.now, "write", f"{payload} to {server.uuid} as {opid}")
        )
        self._handle_ready(server)

    def _on_chaos(self, _: None) -> None:
        if self._quiescing:
            self._master_actions(allow_removal=False)
            self._schedule(self.options.chaos_every_ms, "chaos", None)
            return
        self._schedule(self.rng.randint(1, 2 * self.options.chaos_every_ms), "chaos", None)
        rng = self.rng
        roll = rng.random()
        uuids = list(self.servers)
        if roll < 0.15:
            alive = [s.uuid for s in self._alive()]
            if len(alive) > 1:
                victim = rng.choice(alive)
                self._trace.append((self.stats.steps, self.now, "crash", victim))
                self._crash(victim)
        elif roll < 0.35:
            dead = [u for u in uuids if self.servers[u].replica is None]
            if dead:
                uuid = rng.choice(dead)
                self._trace.append((self.stats.steps, self.now, "restart", uuid))
                self._start(uuid)
        elif roll < 0.45:
            shuffled = uuids[:]
            rng.shuffle(shuffled)
            cut = rng.randint(1, len(shuffled) - 1)
            groups = [sorted(shuffled[:cut]), sorted(shuffled[cut:])]
            self._trace.append((self.stats.steps, self.now, "partition", groups))
            self.network.partition(groups)
        elif roll < 0.6:
            self._trace.append((self.stats.steps, self.now, "heal", None))
            self.network.heal()
        elif roll < 0.65:
            alive = [s.uuid for s in self._alive()]
            if alive:
                uuid = rng.choice(alive)
                until = self.now + rng.randint(300, 4_000)
                self._trace.append((self.stats.steps, self.now, "pause", f"{uuid} until {until}"))
                self.servers[uuid].paused_until = until
        elif roll < 0.72:
            faults = self.network.faults
            faults.drop = rng.choice([0.0, 0.0, 0.05, 0.2])
            faults.duplicate = rng.choice([0.0, 0.02, 0.1])
            faults.max_delay_ms = rng.choice([5, 20, 100, 400])
        else:
            self._master_actions(allow_removal=True)

    def _master_actions(self, allow_removal: bool) -> None:
        """What Kudu's master does for a tablet: tombstone evicted replicas, add a
        replica (a NON_VOTER to promote) when voters are below three; plus config churn."""
        leaders = [s for s in self._alive() if s.replica is not None and s.replica.is_leader]
        if not leaders:
            return
        leader_server = max(leaders, key=lambda s: s.replica.current_term if s.replica else 0)
        leader = leader_server.replica
        assert leader is not None
        committed = leader.committed_config
        assert committed is not None
        for server in self._alive():
            replica = server.replica
            assert replica is not None
            config = replica.committed_config
            if (
                not committed.is_member(server.uuid)
                and replica.data_state is DataState.READY
                and config is not None
                and config.opid_index < committed.opid_index
            ):
                self._trace.append((self.stats.steps, self.now, "tombstone", server.uuid))
                replica.tombstone(self.now)
                self._handle_ready(server)
        change: ConfigChange | None = None
        spares = [u for u in self.servers if not committed.is_member(u)]
        if len(committed.voters) < 3 and spares:
            change = ConfigChange(
                ChangeType.ADD_PEER,
                self.rng.choice(spares),
                MemberType.NON_VOTER,
                promote=True,
                cas_config_opid_index=committed.opid_index,
            )
        elif allow_removal and self.rng.random() < 0.5:
            others = [u for u in committed.uuids if u != leader_server.uuid]
            if others and len(committed.voters) >= 3:
                change = ConfigChange(
                    ChangeType.REMOVE_PEER,
                    self.rng.choice(others),
                    cas_config_opid_index=committed.opid_index,
                )
        elif allow_removal and spares:
            change = ConfigChange(
                ChangeType.ADD_PEER,
                self.rng.choice(spares),
                MemberType.NON_VOTER,
                promote=self.rng.random() < 0.7,
                cas_config_opid_index=committed.opid_index,
            )
        if change is None:
            return
        try:
            leader.change_config(change, self.now, self._hybrid_now(leader_server))
        except ConsensusError:
            return
        self.stats.config_changes += 1
        what = f"{change.change_type.value} {change.uuid} cas {change.cas_config_opid_index}"
        self._trace.append((self.stats.steps, self.now, "config-change", what))
        self._handle_ready(leader_server)

    # ----------------------------------------------------------------- quiescence

    def _quiesce(self) -> None:
        """Faults stop, every server restarts, the network heals: a leader must emerge and
        every voter of its config must catch up to its commit index."""
        self._quiescing = True
        self._trace.append((self.stats.steps, self.now, "quiesce", "faults stop, all restart"))
        self.network.heal()
        faults = self.network.faults
        faults.drop = 0.0
        faults.duplicate = 0.0
        faults.max_delay_ms = 10
        for uuid, server in self.servers.items():
            server.paused_until = 0
            if server.replica is None:
                self._start(uuid)
        deadline = self.now + self.options.quiesce_budget_ms
        while self.now < deadline:
            for _ in range(20):
                self._step()
            leader = self._converged()
            if leader is not None:
                self._check_acknowledged_on_voters(leader)
                return
        self._fail("liveness: no leader with every voter caught up after the faults stopped")

    def _converged(self) -> RaftReplica | None:
        """The leader of the highest term, once every voter of its config caught up."""
        replicas = [s.replica for s in self.servers.values() if s.replica is not None]
        top_term = max(r.current_term for r in replicas if r.data_state is DataState.READY)
        leaders = [r for r in replicas if r.is_leader and r.current_term == top_term]
        if len(leaders) != 1:
            return None
        leader = leaders[0]
        if leader.has_pending_config or leader.committed_index != leader.last_index:
            return None
        config = leader.active_config
        assert config is not None
        for uuid in config.voters:
            replica = self.servers[uuid].replica
            if (
                replica is None
                or replica.data_state is not DataState.READY
                or replica.committed_index != leader.committed_index
                or replica.last_opid != leader.last_opid
            ):
                return None
        return leader

    def _check_acknowledged_on_voters(self, leader: RaftReplica) -> None:
        # A deposed leader may still believe it leads until it hears the new term.
        config = leader.active_config
        assert config is not None
        for uuid in config.voters:
            replica = self.servers[uuid].replica
            assert replica is not None
            for index, entry in self.acknowledged.items():
                if index > replica.committed_index or replica.log[index - 1] != entry:
                    self._fail(f"acknowledged write {entry} lost on voter {uuid}")

    # ----------------------------------------------------------------- invariants

    def _check_log_matching(self, uuid: str, log: list[ReplicateMsg], entry: ReplicateMsg) -> None:
        """(index, term) names one entry, always with the same predecessor term."""
        index = entry.id.index
        if index != len(log) + 1:
            self._fail(f"{uuid} appended {entry} after index {len(log)}")
        prev_term = log[-1].id.term if log else 0
        value = (entry.timestamp, entry.op_type.value, entry.payload, prev_term)
        key = (index, entry.id.term)
        seen = self._entries.setdefault(key, value)
        if seen != value:
            self._fail(f"log matching: {uuid} has {entry} after term {prev_term}; seen {seen}")

    def _check_truncation(self, uuid: str, log: list[ReplicateMsg], after: int) -> None:
        """A committed entry is never truncated from any log that holds it."""
        for entry in log[after:]:
            if self.committed.get(entry.id.index) == entry:
                self._fail(f"{uuid} truncates committed entry {entry}")

    def _check_acknowledged_durable(self) -> None:
        """Every acknowledged write survives on some server's durable log."""
        disks = [s.disk for s in self.servers.values()]
        for index, entry in self.acknowledged.items():
            if not any(index <= d.durable and d.log[index - 1] == entry for d in disks):
                self._fail(f"acknowledged write {entry} is on no durable log")

    def _check_apply(self, uuid: str, entry: ReplicateMsg, term: int) -> None:
        """State-machine safety, and timestamps that increase with the committed index."""
        index = entry.id.index
        known = self.committed.get(index)
        if known is None or term < self.commit_term[index]:
            self.commit_term[index] = term
        if known is None:
            self.committed[index] = entry
            self._max_committed = max(self._max_committed, index)
            self._check_claims(entry)
            before = self.committed.get(index - 1)
            after = self.committed.get(index + 1)
            if before is not None and before.timestamp >= entry.timestamp:
                self._fail(f"committed timestamps: {before} ts {before.timestamp} >= {entry}")
            if after is not None and after.timestamp <= entry.timestamp:
                self._fail(f"committed timestamps: {entry} ts {entry.timestamp} >= {after}")
        elif known != entry:
            self._fail(f"state-machine safety: {uuid} applies {entry}, another applied {known}")

    def _check_safe_time(self, server: _Server) -> None:
        """A replica's safe time covers every entry that will ever commit at or below it:
        the ones it has applied, and no other (a snapshot read there is repeatable)."""
        replica = server.replica
        assert replica is not None
        claim = replica.safe_time(self.now, self._hybrid_now(server))
        if claim <= 0:
            return
        if replica.data_state is not DataState.READY:
            return
        self.stats.safe_time_claims += 1
        applied = replica.committed_index
        if claim > self._claims.get(applied, 0):
            self._claims[applied] = claim
        for index in range(applied + 1, self._max_committed + 1):
            entry = self.committed.get(index)
            if entry is not None and entry.timestamp <= claim:
                self._fail(
                    f"safe time: {server.uuid} claims {claim} with {applied} applied, but "
                    f"{entry} committed with ts {entry.timestamp}"
                )

    def _check_claims(self, entry: ReplicateMsg) -> None:
        for applied, claim in self._claims.items():
            if entry.id.index > applied and entry.timestamp <= claim:
                self._fail(
                    f"safe time: a replica claimed {claim} with {applied} applied, and "
                    f"{entry} committed later with ts {entry.timestamp}"
                )

    def _check_leader(self, uuid: str, replica: RaftReplica) -> None:
        """One leader per term; a new leader holds every entry committed in an earlier term
        (a leader of a stale term, elected by late votes, may lack later commits)."""
        term = replica.current_term
        holder = self._leaders.get(term)
        if holder == uuid:
            return
        if holder is not None:
            self._fail(f"two leaders in term {term}: {holder} and {uuid}")
        self._leaders[term] = uuid
        self.stats.elections += 1
        log = replica.log
        for index, entry in self.committed.items():
            if self.commit_term[index] >= term:
                continue
            if index > len(log) or log[index - 1] != entry:
                self._fail(f"leader completeness: leader {uuid} of term {term} lacks {entry}")


def _target(kind: str, data: Any) -> str | None:
    """The server an event happens on (None for the simulation's own events)."""
    if kind == "deliver":
        return str(data[1].dest_uuid)
    if kind in ("tick", "sync", "copy"):
        return str(data[0])
    return None


def _describe(data: Any) -> str:
    if isinstance(data, tuple) and len(data) == 2 and not isinstance(data[1], int):
        src, msg = data
        return f"{src}->{_describe_msg(msg)}"
    return str(data)


def _describe_msg(msg: Any) -> str:
    if isinstance(msg, UpdateConsensusRequest):
        ops = ",".join(str(op) for op in msg.ops)
        return (
            f"{msg.dest_uuid} Update(t{msg.caller_term} prev {msg.preceding_id} "
            f"ci {msg.committed_index} [{ops}])"
        )
    if isinstance(msg, UpdateConsensusResponse):
        s = msg.status
        return (
            f"{msg.dest_uuid} UpdateResp(t{msg.responder_term} last {s.last_received} "
            f"lrcl {s.last_received_current_leader} ci {s.last_committed_idx} "
            f"{s.error.value if s.error else 'OK'})"
        )
    if isinstance(msg, VoteRequest):
        kind = "PreVote" if msg.is_pre_election else "Vote"
        return f"{msg.dest_uuid} {kind}(t{msg.candidate_term} last {msg.last_received})"
    if isinstance(msg, VoteResponse):
        kind = "PreVoteResp" if msg.is_pre_election else "VoteResp"
        verdict = "yes" if msg.vote_granted else f"no {msg.error.value if msg.error else ''}"
        return f"{msg.dest_uuid} {kind}(t{msg.candidate_term} resp t{msg.responder_term} {verdict})"
    if isinstance(msg, StartTabletCopyRequest):
        return f"{msg.dest_uuid} StartTabletCopy(t{msg.caller_term})"
    return str(msg)


def run_varied_seeds(seeds: range, max_fault_steps: int = 1500) -> SimStats:
    """Runs each seed in the shape ``varied_options`` draws for it."""
    total = SimStats()
    for seed in seeds:
        _add(total, Simulation(seed, varied_options(seed, max_fault_steps)).run())
    return total


def _add(total: SimStats, stats: SimStats) -> None:
    for name in SimStats.__slots__:
        setattr(total, name, getattr(total, name) + getattr(stats, name))


def run_seeds(seeds: range, options: SimOptions | None = None) -> SimStats:
    """Runs each seed; returns the summed statistics (the first failure raises)."""
    total = SimStats()
    for seed in seeds:
        _add(total, Simulation(seed, options).run())
    return total


__all__ = [
    "SimOptions",
    "SimStats",
    "Simulation",
    "SimulationFailure",
    "run_seeds",
    "run_varied_seeds",
    "varied_options",
]
