"""One tablet replica's Raft state machine, after Kudu's RaftConsensus and
PeerMessageQueue: elections with pre-votes and backoff, replication with the divergent
follower's jump to its committed index, majority commit of the leader's own-term entries,
one-at-a-time config changes with learner promotion and follower eviction, tablet copy
with the rogue-leader rule, and tombstones that still vote.

The host drives it: every input (``tick``, ``step`` with a message, ``replicate``,
``change_config``, ``log_synced``, ``start_tablet_copy``, ``tablet_copy_complete``,
``tombstone``) takes the monotonic time in milliseconds and, where a timestamp may be
assigned, a HybridTime reading. Output accumulates in a :class:`Ready` that the host takes
with :meth:`RaftReplica.take_ready` and handles in this order: persist ``meta``; truncate
the log after ``truncate_after``; append ``appends``; if ``sync_before_send`` make the log
durable (else call :meth:`RaftReplica.log_synced` once it is); then send ``messages`` and
apply ``committed``. Nothing inside reads a clock, starts a thread or touches a file.
"""

from __future__ import annotations

import contextlib
import enum
import random
from dataclasses import dataclass, field

from kudusql.consensus.messages import (
    ConsensusErrorCode,
    ConsensusMessage,
    ConsensusStatus,
    OpType,
    ReplicateMsg,
    StartTabletCopyRequest,
    UpdateConsensusRequest,
    UpdateConsensusResponse,
    VoteRequest,
    VoteResponse,
)
from kudusql.consensus.opid import MINIMUM_OPID, OpId
from kudusql.consensus.raft_config import MemberType, RaftConfig, RaftPeer


class Role(enum.Enum):
    LEADER = "LEADER"
    FOLLOWER = "FOLLOWER"
    LEARNER = "LEARNER"
    NON_PARTICIPANT = "NON_PARTICIPANT"


class DataState(enum.Enum):
    """The tablet data's state in the superblock (Kudu's TabletDataState)."""

    READY = "READY"
    COPYING = "COPYING"
    TOMBSTONED = "TOMBSTONED"


class ChangeType(enum.Enum):
    ADD_PEER = "ADD_PEER"
    REMOVE_PEER = "REMOVE_PEER"
    #: Promote a NON_VOTER to VOTER (Kudu's MODIFY_PEER).
    PROMOTE_PEER = "PROMOTE_PEER"


@dataclass(frozen=True, slots=True)
class ConfigChange:
    """One server's change; ``cas_config_opid_index`` must equal the committed config's
    opid_index when given."""

    change_type: ChangeType
    uuid: str
    member_type: MemberType = MemberType.NON_VOTER
    promote: bool = True
    cas_config_opid_index: int | None = None


class ConsensusError(Exception):
    """A client or config-change request the replica refuses; ``code`` names why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


@dataclass(frozen=True, slots=True)
class RaftOptions:
    """Kudu's flags (milliseconds). The ``test_only_`` switches disable one safety rule so
    tests can show the simulator catches the resulting violations; never set them else."""

    heartbeat_interval_ms: int = 500
    #: Kudu's --leader_failure_max_missed_heartbeat_periods.
    missed_heartbeat_periods: float = 3.0
    leader_failure_exp_backoff_max_delta_ms: int = 20_000
    enable_pre_election: bool = True
    enable_tombstoned_voting: bool = True
    #: 3-2-3 eviction: the leader removes a follower unheard for this long (Kudu 300 s).
    evict_failed_followers: bool = True
    follower_unavailable_considered_failed_ms: int = 300_000
    #: The "recently heard" window of the eviction safety check.
    consensus_rpc_timeout_ms: int = 30_000
    max_batch_ops: int = 16
    #: The largest difference between two servers' hybrid clocks (physical part) and
    #: between their timers' rates that reads may rely on. A leader's lease lasts the
    #: election timeout less this; with no room left, no replica serves snapshot reads.
    max_clock_error_ms: int = 500
    test_only_commit_any_term: bool = False
    test_only_skip_up_to_date_check: bool = False
    test_only_skip_rogue_leader_check: bool = False
    test_only_skip_leader_lease: bool = False

    @property
    def election_timeout_ms(self) -> int:
        return int(self.heartbeat_interval_ms * self.missed_heartbeat_periods)

    @property
    def leader_lease_ms(self) -> int:
        """How long after sending a request a majority acknowledged the leader may
        assume no other leader exists: the voters that acknowledged withhold their votes
        for an election timeout from receiving it, less the clocks' error."""
        return self.election_timeout_ms - self.max_clock_error_ms


@dataclass(frozen=True, slots=True)
class ConsensusMetadata:
    """What survives a crash besides the log (Kudu's cmeta plus the superblock's data
    state and tombstone_last_logged_opid)."""

    current_term: int
    voted_for: str | None
    committed_config: RaftConfig | None
    data_state: DataState
    tombstone_last_logged_opid: OpId | None = None

    @classmethod
    def new_replica(cls, config: RaftConfig) -> ConsensusMetadata:
        return cls(0, None, config, DataState.READY)

    @classmethod
    def empty(cls) -> ConsensusMetadata:
        """A server that does not host the tablet: no data, no last-logged OpId."""
        return cls(0, None, None, DataState.TOMBSTONED)


@dataclass(slots=True)
class Ready:
    """The output of one or more inputs, in the order the host must handle it."""

    meta: ConsensusMetadata | None = None
    truncate_after: int | None = None
    appends: list[ReplicateMsg] = field(default_factory=list)
    sync_before_send: bool = False
    messages: list[ConsensusMessage] = field(default_factory=list)
    committed: list[ReplicateMsg] = field(default_factory=list)
    #: After a tablet copy: the tablet's applied state is the log up to this index.
    reset_applied_to: int | None = None
    #: After a tablet copy: the log is exactly ``appends``, which follow this OpId
    #: (MINIMUM_OPID for a whole log; ``truncate_after`` is 0).
    copied_log_base: OpId | None = None
    #: The host's hybrid clock must move to at least this timestamp.
    clock_update: int | None = None


@dataclass(slots=True)
class _Election:
    pre: bool
    term: int
    granted: set[str]
    denied: set[str]
    highest_term: int = 0


@dataclass(slots=True)
class _PeerState:
    """The leader's view of one peer (Kudu's TrackedPeer)."""

    next_index: int
    match_index: int = 0
    last_heard_ms: int = 0
    last_exchange_ok: bool = False
    successful_exchanges: int = 0
    needs_copy: bool = False
    #: The latest ``sent_ms`` of this term's requests the peer accepted (its vote is
    #: withheld for an election timeout from then).
    lease_from_ms: int = -(1 << 62)


_NEVER = -(1 << 62)
_FOREVER = 1 << 62


class RaftReplica:
    """One replica of one tablet. See the module docstring for the host's contract."""

    def __init__(
        self,
        uuid: str,
        meta: ConsensusMetadata,
        log: list[ReplicateMsg],
        committed_index: int,
        options: RaftOptions,
        rng: random.Random,
        now_ms: int,
        log_base: OpId = MINIMUM_OPID,
    ) -> None:
        self.uuid = uuid
        self.options = options
        self._rng = rng
        self._now = now_ms
        self.current_term = meta.current_term
        self.voted_for = meta.voted_for
        self.data_state = meta.data_state
        self.tombstone_last_logged_opid = meta.tombstone_last_logged_opid
        self._base_config = meta.committed_config
        ready = meta.data_state is DataState.READY
        #: The OpId just before the first entry held: the host garbage-collected the
        #: entries up to it (their effects are durable in the tablet; all committed).
        self._base = log_base if ready else MINIMUM_OPID
        self._log: list[ReplicateMsg] = list(log) if ready else []
        self.committed_index = max(self._base.index, min(committed_index, self.last_index))
        # Every log entry given at start is durable.
        self.durable_index = self.last_index
        self.ht_floor = max((e.timestamp for e in self._log), default=0)
        self._configs: list[RaftConfig] = []
        self._rebuild_configs()
        self.leader_uuid: str | None = None
        self._is_leader = False
        self._withhold_votes_until = _NEVER
        self._failed_elections = 0
        self._election: _Election | None = None
        self._peers: dict[str, _PeerState] = {}
        self._first_index_of_term = 0
        self._next_heartbeat = 0
        self._last_received_current_leader: OpId | None = None
        self._ready = Ready()
        self._hybrid_now = 0
        #: The highest safe time a leader sent this replica (see ``safe_time``).
        self._received_safe_time = 0
        #: The highest safe time this replica has answered (it never goes back).
        self._safe_time = 0
        # At term 0 the first election comes quickly: a random part of one heartbeat.
        if self.current_term == 0:
            self._election_deadline = now_ms + rng.randrange(options.heartbeat_interval_ms)
        else:
            self._election_deadline = now_ms + options.election_timeout_ms
            # A restarted voter may have acknowledged a leader just before it stopped,
            # and that leader's lease counts on its vote being withheld.
            self._withhold_votes_until = now_ms + options.election_timeout_ms

    # ----------------------------------------------------------------- inspection

    @property
    def role(self) -> Role:
        if self.data_state is not DataState.READY:
            return Role.NON_PARTICIPANT
        if self._is_leader:
            return Role.LEADER
        config = self.active_config
        if config is None or not config.is_member(self.uuid):
            return Role.NON_PARTICIPANT
        return Role.FOLLOWER if config.is_voter(self.uuid) else Role.LEARNER

    @property
    def is_leader(self) -> bool:
        return self._is_leader

    @property
    def log(self) -> list[ReplicateMsg]:
        """The entries the replica holds (entry i is at position i - ``first_index``;
        those before were garbage-collected); do not modify."""
        return self._log

    @property
    def log_base(self) -> OpId:
        """The OpId just before the first entry held (MINIMUM_OPID: none was GCed)."""
        return self._base

    @property
    def first_index(self) -> int:
        """The index of the first entry held (1 unless the log was garbage-collected)."""
        return self._base.index + 1

    @property
    def last_index(self) -> int:
        return self._base.index + len(self._log)

    @property
    def last_opid(self) -> OpId:
        return self._log[-1].id if self._log else self._base

    def peer_match_indexes(self) -> dict[str, int]:
        """A leader's view of how far each peer's log matches its own (empty when not
        the leader): the host keeps the log entries they still need, within bounds."""
        if not self._is_leader:
            return {}
        return {uuid: peer.match_index for uuid, peer in self._peers.items()}

    def peers_needing_copy(self) -> list[str]:
        """The peers a leader can no longer catch up from its log (the entries they need
        were garbage-collected) or that lack the tablet: they need a tablet copy."""
        if not self._is_leader:
            return []
        return sorted(
            uuid
            for uuid, peer in self._peers.items()
            if peer.needs_copy or peer.next_index <= self._base.index
        )

    @property
    def active_config(self) -> RaftConfig | None:
        """The config roles use: the pending one if any, else the committed one."""
        return self._configs[-1] if self._configs else None

    @property
    def committed_config(self) -> RaftConfig | None:
        """The last config at or below the committed index; the first one kept is
        committed by construction (it came from cmeta or a tablet copy)."""
        if not self._configs:
            return None
        found = self._configs[0]
        for config in self._configs[1:]:
            if config.opid_index <= self.committed_index:
                found = config
        return found

    @property
    def has_pending_config(self) -> bool:
        return self.active_config is not self.committed_config

    def metadata(self) -> ConsensusMetadata:
        return ConsensusMetadata(
            self.current_term,
            self.voted_for,
            self.committed_config,
            self.data_state,
            self.tombstone_last_logged_opid,
        )

    @property
    def has_output(self) -> bool:
        """Whether the Ready holds anything yet."""
        r = self._ready
        return bool(r.meta is not None or r.truncate_after is not None or r.appends or r.messages)

    def take_ready(self) -> Ready:
        ready, self._ready = self._ready, Ready()
        return ready

    def safe_time(self, now_ms: int, hybrid_now: int) -> int:
        """The highest timestamp T such that this replica's committed (and, once the host
        handled the Ready, applied) entries hold every entry with a timestamp at or below
        T that will ever commit: a snapshot read at T here is repeatable and complete.
        It never goes back. A leader offers its clock while it holds a lease and its own
        term's first entry is committed; a follower offers what its leader sent; either
        stops below its first uncommitted entry."""
        self._now = now_ms
        self._hybrid_now = max(self._hybrid_now, hybrid_now)
        if self.data_state is not DataState.READY:
            return self._safe_time
        bound = self._received_safe_time
        if self._is_leader and self._leader_reads_allowed():
            bound = max(bound, hybrid_now)
            # Entries appended from now on take later timestamps.
            self.ht_floor = max(self.ht_floor, hybrid_now)
        if self.committed_index < self.last_index:
            bound = min(bound, self._log[self.committed_index].timestamp - 1)
        self._safe_time = max(self._safe_time, bound)
        return self._safe_time

    def holds_lease(self, now_ms: int) -> bool:
        """Whether this replica is a leader that may serve reads of its latest state:
        its own term's first entry is committed and it holds its lease, so no other
        leader can have acknowledged a write it lacks."""
        self._now = now_ms
        return self._leader_reads_allowed()

    def _leader_reads_allowed(self) -> bool:
        return (
            self._is_leader
            and self._first_index_of_term > 0
            and self.committed_index >= self._first_index_of_term
            and (self.options.test_only_skip_leader_lease or self._now < self._lease_expiry_ms())
        )

    def _lease_expiry_ms(self) -> int:
        """When the leader's lease ends: a majority of the voters of every config in
        force (the committed one, and a pending one) accepted a request of this term
        sent ``leader_lease_ms`` before then."""
        expiry = _FOREVER
        configs = {id(c): c for c in (self.committed_config, self.active_config) if c}
        for config in configs.values():
            starts = sorted(
                (
                    self._now
                    if uuid == self.uuid
                    else (self._peers[uuid].lease_from_ms if uuid in self._peers else _NEVER)
                    for uuid in config.voters
                ),
                reverse=True,
            )
            expiry = min(expiry, starts[config.majority_size - 1])
        return expiry + self.options.leader_lease_ms

    # ----------------------------------------------------------------- inputs

    def tick(self, now_ms: int, hybrid_now: int) -> None:
        """Timers: the leader's heartbeats, eviction and promotion; a voter's failure
        detector, which starts a (pre-)election when the leader is silent."""
        self._now = now_ms
        self._hybrid_now = max(self._hybrid_now, hybrid_now)
        if self.data_state is not DataState.READY:
            return
        if self._is_leader:
            if now_ms >= self._next_heartbeat:
                self._next_heartbeat = now_ms + self.options.heartbeat_interval_ms
                for uuid in list(self._peers):
                    self._send_to_peer(uuid, heartbeat=True)
                self._evict_failed_followers()
            return
        config = self.active_config
        if config is None or not config.is_voter(self.uuid):
            return
        if config.voters == (self.uuid,):
            # The only voter elects itself at once, without a pre-election.
            self._start_election(False, hybrid_now)
            return
        if now_ms >= self._election_deadline:
            if self._election is not None:
                # Its vote requests or answers were lost: the election failed.
                self._failed_elections += 1
                self._election = None
            self._start_election(self.options.enable_pre_election, hybrid_now)

    def step(self, msg: ConsensusMessage, now_ms: int, hybrid_now: int) -> None:
        """Handles one message addressed to this replica."""
        self._now = now_ms
        self._hybrid_now = max(self._hybrid_now, hybrid_now)
        if isinstance(msg, UpdateConsensusRequest):
            self._handle_update(msg)
        elif isinstance(msg, UpdateConsensusResponse):
            self._handle_update_response(msg)
        elif isinstance(msg, VoteRequest):
            self._handle_vote_request(msg)
        elif isinstance(msg, VoteResponse):
            self._handle_vote_response(msg, hybrid_now)
        else:
            raise TypeError(f"{type(msg).__name__} is for the host (start_tablet_copy)")

    def replicate(self, payload: str, now_ms: int, hybrid_now: int) -> OpId:
        """A client write: the leader appends it and returns its OpId; the write is
        acknowledged once that OpId appears in ``Ready.committed``."""
        self._now = now_ms
        self._hybrid_now = max(self._hybrid_now, hybrid_now)
        self._check_leader_ready()
        return self._append_as_leader(OpType.WRITE, hybrid_now, payload=payload)

    def change_config(self, change: ConfigChange, now_ms: int, hybrid_now: int) -> OpId:
        """One server's config change, refused under Kudu's rules; effective on append."""
        self._now = now_ms
        self._check_leader_ready()
        if self.has_pending_config:
            raise ConsensusError("CONFIG_CHANGE_PENDING", "another config change is pending")
        if self.committed_index < self._first_index_of_term:
            raise ConsensusError(
                "LEADER_NOT_READY", "leader has not yet committed an operation in its own term"
            )
        committed = self.committed_config
        assert committed is not None
        if (
            change.cas_config_opid_index is not None
            and change.cas_config_opid_index != committed.opid_index
        ):
            raise ConsensusError(
                "CAS_FAILED",
                f"config opid_index is {committed.opid_index}, not {change.cas_config_opid_index}",
            )
        index = self.last_index + 1
        peer = committed.get(change.uuid)
        if change.change_type is ChangeType.ADD_PEER:
            if peer is not None:
                raise ConsensusError("INVALID_CONFIG", f"{change.uuid} is already a member")
            new = committed.with_peer(
                RaftPeer(change.uuid, change.member_type, change.promote), index
            )
        elif change.change_type is ChangeType.REMOVE_PEER:
            if peer is None:
                raise ConsensusError("INVALID_CONFIG", f"{change.uuid} is not a member")
            if change.uuid == self.uuid:
                raise ConsensusError("INVALID_CONFIG", "the leader cannot remove itself")
            new = committed.without_peer(change.uuid, index)
        else:
            if peer is None or peer.is_voter:
                raise ConsensusError("INVALID_CONFIG", f"{change.uuid} is not a NON_VOTER")
            new = committed.with_promoted(change.uuid, index)
        return self._append_as_leader(OpType.CHANGE_CONFIG, hybrid_now, config=new)

    def log_synced(self, opid: OpId, now_ms: int) -> None:
        """The host made the log durable up to ``opid``; the leader counts itself to it."""
        self._now = now_ms
        if (
            self.durable_index < opid.index <= self.last_index
            and self._term_at(opid.index) == opid.term
        ):
            self.durable_index = opid.index
            if self._is_leader:
                self._advance_commit()

    def start_tablet_copy(self, req: StartTabletCopyRequest, now_ms: int) -> None:
        """Accepts a copy from the leader (the replica becomes COPYING, its data gone, its
        last-logged OpId kept), or raises ConsensusError; the host then fetches the
        leader's state and calls tablet_copy_complete or tablet_copy_failed."""
        self._now = now_ms
        if self.data_state is DataState.COPYING:
            raise ConsensusError("ALREADY_COPYING", "a tablet copy is already in progress")
        last = self._last_logged_opid()
        if (
            last is not None
            and req.caller_term < last.term
            and not self.options.test_only_skip_rogue_leader_check
        ):
            raise ConsensusError(
                "INVALID_TERM",
                f"leader {req.caller_uuid} has term {req.caller_term}, below the term of "
                f"this replica's last-logged OpId {last}",
            )
        self._step_down()
        self.tombstone_last_logged_opid = last
        self.data_state = DataState.COPYING
        self._clear_log()
        self._persist()

    def tablet_copy_complete(
        self,
        source_meta: ConsensusMetadata,
        source_log: list[ReplicateMsg],
        source_committed_index: int,
        now_ms: int,
        log_base: OpId = MINIMUM_OPID,
    ) -> None:
        """The copy arrived: the source's log after ``log_base`` (the OpId before its
        first entry: the entries up to it are in the copied tablet, all committed;
        MINIMUM_OPID for a whole log), its committed index and committed config. The
        Ready's ``reset_applied_to`` is the committed index: the host's tablet holds
        the copied state, and the committed entries after what it holds apply."""
        self._now = now_ms
        if self.data_state is not DataState.COPYING:
            raise ConsensusError("NOT_COPYING", "no tablet copy is in progress")
        if any(e.id.index != log_base.index + 1 + i for i, e in enumerate(source_log)):
            raise ConsensusError(
                "BAD_COPY", f"the copied log does not hold consecutive entries after {log_base}"
            )
        if source_committed_index < log_base.index:
            raise ConsensusError(
                "BAD_COPY",
                f"the copied committed index {source_committed_index} is below the copied "
                f"log's base {log_base}",
            )
        if source_meta.current_term > self.current_term:
            self.current_term = source_meta.current_term
            self.voted_for = None
        self.data_state = DataState.READY
        self.tombstone_last_logged_opid = None
        self._base_config = source_meta.committed_config
        self._base = log_base
        self._log = list(source_log)
        self.committed_index = min(source_committed_index, self.last_index)
        self.durable_index = self.last_index
        self._rebuild_configs()
        for entry in self._log:
            self.ht_floor = max(self.ht_floor, entry.timestamp)
        self._ready.truncate_after = 0
        self._ready.appends = list(self._log)
        self._ready.sync_before_send = True
        self._ready.reset_applied_to = self.committed_index
        self._ready.copied_log_base = log_base
        self._ready.clock_update = self.ht_floor
        self._election_deadline = now_ms + self.options.election_timeout_ms
        self._persist()

    def tablet_copy_failed(self, now_ms: int) -> None:
        """A failed copy leaves a tombstone that keeps the last-logged OpId it had."""
        self._now = now_ms
        if self.data_state is DataState.COPYING:
            self.data_state = DataState.TOMBSTONED
            self._persist()

    def tombstone(self, now_ms: int) -> None:
        """Deletes the data and the log, keeping cmeta and the last-logged OpId."""
        self._now = now_ms
        if self.data_state is DataState.TOMBSTONED:
            return
        last = self._last_logged_opid()
        self._step_down()
        self.tombstone_last_logged_opid = last
        self.data_state = DataState.TOMBSTONED
        self._clear_log()
        self._persist()

    def log_gc(self, index: int) -> None:
        """The host deleted the log's entries up to ``index`` (all committed and
        applied, their effects durable in the tablet): forget them. A peer that still
        needs one then needs a tablet copy (``peers_needing_copy``)."""
        if index <= self._base.index:
            return
        if index > min(self.committed_index, self.durable_index):
            raise AssertionError(
                f"{self.uuid} asked to forget entries up to {index}, beyond its committed "
                f"index {self.committed_index} or durable index {self.durable_index}"
            )
        base = self._opid_at(index)
        del self._log[: index - self._base.index]
        self._base = base

    # ----------------------------------------------------------------- elections

    def _election_backoff(self) -> int:
        timeout = self.options.election_timeout_ms
        upper = min(
            timeout * 1.5 ** (self._failed_elections + 1),
            self.options.leader_failure_exp_backoff_max_delta_ms,
        )
        return self._rng.randint(timeout, max(timeout, int(upper)))

    def _start_election(self, pre: bool, hybrid_now: int) -> None:
        config = self.active_config
        assert config is not None
        if pre:
            term = self.current_term + 1
        else:
            self.current_term += 1
            self.voted_for = self.uuid
            self.leader_uuid = None
            self._last_received_current_leader = None
            self._persist()
            term = self.current_term
        self._election = _Election(pre, term, {self.uuid}, set())
        self._election_deadline = self._now + self._election_backoff()
        last = self.last_opid
        for uuid in config.voters:
            if uuid != self.uuid:
                self._ready.messages.append(VoteRequest(self.uuid, term, uuid, last, pre))
        self._decide_election(hybrid_now)

    def _decide_election(self, hybrid_now: int) -> None:
        election = self._election
        config = self.active_config
        assert election is not None and config is not None
        voters = config.voters
        granted = sum(1 for v in voters if v in election.granted)
        denied = sum(1 for v in voters if v in election.denied)
        if granted >= config.majority_size:
            self._election = None
            if election.pre:
                self._start_election(False, hybrid_now)
            elif election.term == self.current_term:
                self._become_leader(hybrid_now)
        elif denied > len(voters) - config.majority_size:
            self._election = None
            self._failed_elections += 1
            # A lost election adopts the highest term a voter reported, so two replicas
            # never block each other's pre-elections forever.
            if election.highest_term > self.current_term:
                self._advance_term(election.highest_term)
            self._election_deadline = self._now + self._election_backoff()

    def _handle_vote_response(self, resp: VoteResponse, hybrid_now: int) -> None:
        election = self._election
        if (
            election is None
            or resp.candidate_term != election.term
            or resp.is_pre_election != election.pre
        ):
            return  # an answer to an election that is over
        if resp.vote_granted:
            election.granted.add(resp.responder_uuid)
        else:
            election.denied.add(resp.responder_uuid)
            election.highest_term = max(election.highest_term, resp.responder_term)
        self._decide_election(hybrid_now)

    def _handle_vote_request(self, req: VoteRequest) -> None:
        def answer(granted: bool, error: ConsensusErrorCode | None = None) -> None:
            self._ready.messages.append(
                VoteResponse(
                    self.uuid,
                    self.current_term,
                    req.candidate_uuid,
                    req.candidate_term,
                    req.is_pre_election,
                    granted,
                    error,
                )
            )

        last = self._last_logged_opid()
        if last is None or (
            self.data_state is not DataState.READY and not self.options.enable_tombstoned_voting
        ):
            answer(False, ConsensusErrorCode.TABLET_NOT_FOUND)
            return
        # 1. A leader heard within the election timeout (or being the leader) withholds.
        if not req.ignore_live_leader and (
            self._is_leader or self._now < self._withhold_votes_until
        ):
            answer(False, ConsensusErrorCode.LEADER_IS_ALIVE)
            return
        # 2. Term.
        if req.candidate_term < self.current_term:
            answer(False, ConsensusErrorCode.INVALID_TERM)
            return
        # 3. Already voted in this term (a repeat to the same candidate is granted again).
        if req.candidate_term == self.current_term and self.voted_for is not None:
            granted = self.voted_for == req.candidate_uuid
            answer(granted, None if granted else ConsensusErrorCode.ALREADY_VOTED)
            return
        # 4. Up to date by (term, index); the term advance is recorded either way.
        up_to_date = req.last_received >= last or self.options.test_only_skip_up_to_date_check
        if not req.is_pre_election and req.candidate_term > self.current_term:
            self._advance_term(req.candidate_term)
        if not up_to_date:
            answer(False, ConsensusErrorCode.LAST_OPID_TOO_OLD)
            return
        if not req.is_pre_election:
            self.voted_for = req.candidate_uuid
            self._persist()
            self._election_deadline = self._now + self._election_backoff()
        answer(True)

    def _become_leader(self, hybrid_now: int) -> None:
        config = self.active_config
        assert config is not None
        self._is_leader = True
        self.leader_uuid = self.uuid
        self._failed_elections = 0
        self._withhold_votes_until = _FOREVER
        self._peers = {}
        for uuid in config.uuids:
            if uuid != self.uuid:
                self._peers[uuid] = _PeerState(self.last_index + 1, last_heard_ms=self._now)
        # The NO_OP opens the term; writes are refused until it is queued.
        self._append_as_leader(OpType.NO_OP, hybrid_now)
        self._first_index_of_term = self.last_index
        self._next_heartbeat = self._now + self.options.heartbeat_interval_ms

    def _step_down(self) -> None:
        if self._is_leader:
            self._is_leader = False
            self._peers = {}
            # Its lease may still run (it counted itself): no vote from it before the
            # lease has surely ended.
            self._withhold_votes_until = self._now + self.options.election_timeout_ms
            self._election_deadline = self._now + self.options.election_timeout_ms
        if self.leader_uuid == self.uuid:
            self.leader_uuid = None
        self._election = None

    def _advance_term(self, term: int) -> None:
        assert term > self.current_term
        self._step_down()
        self.current_term = term
        self.voted_for = None
        self.leader_uuid = None
        self._last_received_current_leader = None
        self._persist()

    # ----------------------------------------------------------------- leader side

    def _check_leader_ready(self) -> None:
        if self.data_state is not DataState.READY or not self._is_leader:
            raise ConsensusError("NOT_LEADER", f"replica {self.uuid} is not the leader")
        if self._first_index_of_term == 0:
            raise ConsensusError("LEADER_NOT_READY", "leader is not yet ready")

    def _next_timestamp(self, hybrid_now: int) -> int:
        ts = max(hybrid_now, self.ht_floor + 1)
        self.ht_floor = ts
        self._ready.clock_update = ts
        return ts

    def _append_as_leader(
        self,
        op_type: OpType,
        hybrid_now: int,
        payload: str | None = None,
        config: RaftConfig | None = None,
    ) -> OpId:
        opid = OpId(self.current_term, self.last_index + 1)
        entry = ReplicateMsg(opid, self._next_timestamp(hybrid_now), op_type, payload, config)
        self._append(entry)
        if config is not None:
            for uuid in config.uuids:
                if uuid != self.uuid and uuid not in self._peers:
                    self._peers[uuid] = _PeerState(opid.index, last_heard_ms=self._now)
            for uuid in list(self._peers):
                if not config.is_member(uuid):
                    del self._peers[uuid]
        for uuid in list(self._peers):
            self._send_to_peer(uuid, heartbeat=False)
        self._advance_commit()
        return opid

    def _send_to_peer(self, uuid: str, heartbeat: bool) -> None:
        peer = self._peers[uuid]
        if peer.needs_copy:
            if heartbeat:
                # Once per TABLET_NOT_FOUND: the next exchange is an update again.
                peer.needs_copy = False
                self._ready.messages.append(
                    StartTabletCopyRequest(self.uuid, self.current_term, uuid)
                )
            return
        next_index = min(max(peer.next_index, 1), self.last_index + 1)
        if next_index <= self._base.index:
            # The entries it needs were garbage-collected: only a tablet copy helps,
            # unless it has taken one since. A heartbeat probes it (an empty update
            # after the base: a copied peer matches it and resumes from its log); its
            # answer that it cannot match asks for the copy at once (``_ask_for_copy``).
            if heartbeat:
                self._ready.messages.append(
                    UpdateConsensusRequest(
                        self.uuid,
                        self.current_term,
                        uuid,
                        self._base,
                        self.committed_index,
                        (),
                        0,
                        max(self._now, 0),
                    )
                )
            return
        preceding = self._opid_at(next_index - 1)
        start = next_index - 1 - self._base.index
        ops = tuple(self._log[start : start + self.options.max_batch_ops])
        if not ops and not heartbeat:
            return
        self._ready.messages.append(
            UpdateConsensusRequest(
                self.uuid,
                self.current_term,
                uuid,
                preceding,
                self.committed_index,
                ops,
                self._safe_time_to_send(next_index - 1 + len(ops)),
                max(self._now, 0),
            )
        )

    def _safe_time_to_send(self, last_sent: int) -> int:
        """The safe time a request ending at ``last_sent`` carries: the leader's clock
        when the request reaches the end of its log, else just below the first entry it
        leaves out (timestamps rise along the log); 0 without a lease."""
        if not self._leader_reads_allowed():
            return 0
        if last_sent < self.last_index:
            return self._log[last_sent - self._base.index].timestamp - 1
        self.ht_floor = max(self.ht_floor, self._hybrid_now)
        return self._hybrid_now

    def _handle_update_response(self, resp: UpdateConsensusResponse) -> None:
        if not resp.tablet_not_found and resp.responder_term > self.current_term:
            self._advance_term(resp.responder_term)
            return
        if not self._is_leader:
            return
        peer = self._peers.get(resp.responder_uuid)
        if peer is None:
            return
        if resp.tablet_not_found:
            peer.needs_copy = True
            peer.last_exchange_ok = False
            return
        if resp.responder_term < self.current_term:
            return  # an answer to a request of an earlier term
        peer.needs_copy = False
        peer.last_heard_ms = self._now
        status = resp.status
        if status.error is not ConsensusErrorCode.INVALID_TERM:
            # It accepted a request of this term sent at echo_sent_ms.
            peer.lease_from_ms = max(peer.lease_from_ms, resp.echo_sent_ms)
        last = status.last_received
        if last.index <= self.last_index and self._term_at(last.index) == last.term:
            # Its whole log is a prefix of ours (log matching), durable on the follower.
            peer.next_index = last.index + 1
            peer.match_index = max(peer.match_index, last.index)
        elif status.last_received_current_leader is not None:
            lrcl = status.last_received_current_leader
            peer.next_index = lrcl.index + 1
            peer.match_index = max(peer.match_index, lrcl.index)
        else:
            # Divergent and nothing from this leader yet: resume right after its
            # committed index, which matches our log, instead of stepping back one by one.
            peer.next_index = status.last_committed_idx + 1
        peer.next_index = min(max(peer.next_index, 1), self.last_index + 1)
        peer.last_exchange_ok = status.error is None
        if status.error is None:
            peer.successful_exchanges += 1
        if peer.next_index <= self._base.index:
            self._ask_for_copy(resp.responder_uuid)
        elif status.error is ConsensusErrorCode.PRECEDING_ENTRY_DIDNT_MATCH:
            self._send_to_peer(resp.responder_uuid, heartbeat=True)
        elif peer.next_index <= self.last_index:
            self._send_to_peer(resp.responder_uuid, heartbeat=False)
        self._advance_commit()
        if self._is_leader:
            self._promote_if_needed(resp.responder_uuid)

    def _ask_for_copy(self, uuid: str) -> None:
        """A peer just answered a probe: it lacks entries this leader no longer holds.
        Ask it for a tablet copy now, one round trip after it said so (not at a later
        heartbeat, which could reach it after a copy it finished since)."""
        self._ready.messages.append(StartTabletCopyRequest(self.uuid, self.current_term, uuid))

    def _majority_replicated_index(self) -> int:
        config = self.active_config
        assert config is not None
        indexes = sorted(
            (
                self.durable_index
                if uuid == self.uuid
                else (self._peers[uuid].match_index if uuid in self._peers else 0)
                for uuid in config.voters
            ),
            reverse=True,
        )
        return indexes[config.majority_size - 1]

    def _advance_commit(self) -> None:
        majority = self._majority_replicated_index()
        if majority <= self.committed_index:
            return
        # Only an entry of the leader's own term commits by counting replicas; earlier
        # entries commit with it (Raft's Figure 8).
        if self._term_at(majority) != self.current_term and not (
            self.options.test_only_commit_any_term
        ):
            return
        self._commit_to(majority)

    def _promote_if_needed(self, uuid: str) -> None:
        config = self.active_config
        peer = self._peers.get(uuid)
        member = config.get(uuid) if config is not None else None
        if member is None or peer is None or member.is_voter or not member.promote:
            return
        if peer.successful_exchanges < 2 or peer.match_index < self.committed_index:
            return
        self._propose_own_change(ChangeType.PROMOTE_PEER, uuid)

    def _propose_own_change(self, kind: ChangeType, uuid: str) -> None:
        """A change the leader decides itself (promotion, eviction), compare-and-set on
        the committed config; refused quietly when another change is in flight."""
        committed = self.committed_config
        assert committed is not None
        with contextlib.suppress(ConsensusError):
            self.change_config(
                ConfigChange(kind, uuid, cas_config_opid_index=committed.opid_index),
                self._now,
                self.ht_floor,
            )

    def _evict_failed_followers(self) -> None:
        """3-2-3 eviction: remove a member unheard for the configured time, unless that
        could leave the config without a majority of viable voters."""
        if not self.options.evict_failed_followers:
            return
        config = self.active_config
        assert config is not None
        limit = self.options.follower_unavailable_considered_failed_ms
        for uuid, peer in self._peers.items():
            if self._now - peer.last_heard_ms <= limit or not self._safe_to_evict(uuid):
                continue
            self._propose_own_change(ChangeType.REMOVE_PEER, uuid)
            return

    def _safe_to_evict(self, uuid: str) -> bool:
        config = self.active_config
        assert config is not None
        if not config.is_voter(uuid):
            return True
        remaining = [v for v in config.voters if v != uuid]
        if len(remaining) < 2:
            return False
        majority_index = self._majority_replicated_index()
        viable = 0
        for voter in remaining:
            if voter == self.uuid:
                viable += 1
                continue
            peer = self._peers.get(voter)
            if (
                peer is not None
                and peer.last_exchange_ok
                and peer.match_index >= majority_index
                and self._now - peer.last_heard_ms <= self.options.consensus_rpc_timeout_ms
            ):
                viable += 1
        return viable >= len(remaining) // 2 + 1

    # ----------------------------------------------------------------- follower side

    def _respond(
        self, req: UpdateConsensusRequest, error: ConsensusErrorCode | None = None
    ) -> None:
        # The status reports the whole log (a deposed leader's tail may not be synced
        # yet): it must be durable before the answer leaves, as the leader may count it.
        if self.durable_index < self.last_index or self._ready.truncate_after is not None:
            self._ready.sync_before_send = True
            self.durable_index = self.last_index
        status = ConsensusStatus(
            self.last_opid, self._last_received_current_leader, self.committed_index, error
        )
        self._ready.messages.append(
            UpdateConsensusResponse(
                self.uuid, self.current_term, req.caller_uuid, status, echo_sent_ms=req.sent_ms
            )
        )

    def _handle_update(self, req: UpdateConsensusRequest) -> None:
        if self.data_state is not DataState.READY:
            status = ConsensusStatus(MINIMUM_OPID, None, 0, ConsensusErrorCode.TABLET_NOT_FOUND)
            self._ready.messages.append(
                UpdateConsensusResponse(
                    self.uuid, self.current_term, req.caller_uuid, status, tablet_not_found=True
                )
            )
            return
        if req.caller_term < self.current_term:
            self._respond(req, ConsensusErrorCode.INVALID_TERM)
            return
        if req.caller_term > self.current_term:
            self._advance_term(req.caller_term)
        if self._is_leader:
            raise AssertionError(
                f"two leaders in term {self.current_term}: {self.uuid} and {req.caller_uuid}"
            )
        if self.leader_uuid != req.caller_uuid:
            self.leader_uuid = req.caller_uuid
            self._last_received_current_leader = None
        self._election = None
        self._failed_elections = 0
        self._election_deadline = self._now + self.options.election_timeout_ms
        self._withhold_votes_until = self._now + self.options.election_timeout_ms
        preceding = req.preceding_id
        ops = req.ops
        if preceding.index < self._base.index:
            # Our garbage-collected entries are committed, so the leader's log holds
            # them as ours: it matches through our base; what the request carries
            # up to there is known.
            matched = self._base.index
            ops = tuple(op for op in ops if op.id.index > matched)
        elif preceding.index > self.last_index or self._term_at(preceding.index) != preceding.term:
            if preceding.index <= self.last_index:
                # Our entry at the preceding index is from another term: drop it and after.
                self._truncate_after(preceding.index - 1)
            self._respond(req, ConsensusErrorCode.PRECEDING_ENTRY_DIDNT_MATCH)
            return
        else:
            matched = preceding.index
        for op in ops:
            if op.id.index != matched + 1:
                break
            if op.id.index <= self.last_index:
                if self._term_at(op.id.index) == op.id.term:
                    matched += 1
                    continue
                self._truncate_after(op.id.index - 1)
            self._append(op)
            self.ht_floor = max(self.ht_floor, op.timestamp)
            self._ready.clock_update = self.ht_floor
            matched += 1
        if self._ready.appends:
            self._ready.sync_before_send = True
            self.durable_index = self.last_index
        self._last_received_current_leader = self._opid_at(matched)
        if matched == preceding.index + len(req.ops):
            self._received_safe_time = max(self._received_safe_time, req.safe_timestamp)
        new_commit = min(req.committed_index, matched)
        if new_commit > self.committed_index:
            self._commit_to(new_commit)
        self._respond(req)

    # ----------------------------------------------------------------- the log

    def _term_at(self, index: int) -> int:
        """The term of the entry at ``index``; -1 (matches no term) for a
        garbage-collected one."""
        base = self._base
        if index > base.index:
            return self._log[index - base.index - 1].id.term
        if index == base.index:
            return base.term
        return 0 if index == 0 else -1

    def _opid_at(self, index: int) -> OpId:
        base = self._base
        if index > base.index:
            return self._log[index - base.index - 1].id
        if index == base.index:
            return base
        if index == 0:
            return MINIMUM_OPID
        raise AssertionError(f"{self.uuid}: entry {index} was garbage-collected")

    def _last_logged_opid(self) -> OpId | None:
        if self.data_state is DataState.READY:
            return self.last_opid
        return self.tombstone_last_logged_opid

    def _append(self, entry: ReplicateMsg) -> None:
        self._log.append(entry)
        self._ready.appends.append(entry)
        if entry.config is not None:
            self._configs.append(entry.config)

    def _truncate_after(self, index: int) -> None:
        if index < self.committed_index:
            raise AssertionError(
                f"{self.uuid} asked to truncate after {index}, below its committed index "
                f"{self.committed_index}"
            )
        del self._log[index - self._base.index :]
        self._ready.appends = [e for e in self._ready.appends if e.id.index <= index]
        if self._ready.truncate_after is None or index < self._ready.truncate_after:
            self._ready.truncate_after = index
        self.durable_index = min(self.durable_index, index)
        while len(self._configs) > 1 and self._configs[-1].opid_index > index:
            self._configs.pop()

    def _clear_log(self) -> None:
        self._base = MINIMUM_OPID
        self._log = []
        self.committed_index = 0
        self.durable_index = 0
        self._configs = []
        self._base_config = None
        self._ready.appends = []
        self._ready.truncate_after = 0

    def _rebuild_configs(self) -> None:
        base = self._base_config
        self._configs = [] if base is None else [base]
        for entry in self._log:
            if entry.config is not None and (base is None or entry.id.index > base.opid_index):
                self._configs.append(entry.config)

    def _commit_to(self, index: int) -> None:
        before = self.committed_config
        for i in range(self.committed_index + 1, index + 1):
            self._ready.committed.append(self._log[i - 1 - self._base.index])
        self.committed_index = index
        after = self.committed_config
        if after is not before:
            # The committed config is kept in cmeta; older ones are of no more use.
            while len(self._configs) > 1 and self._configs[1].opid_index <= index:
                self._configs.pop(0)
            self._base_config = self._configs[0]
            self._persist()

    def _persist(self) -> None:
        self._ready.meta = self.metadata()


def initial_replica(
    uuid: str, config: RaftConfig, options: RaftOptions, rng: random.Random, now_ms: int
) -> RaftReplica:
    """A replica of a newly created tablet, with an empty log."""
    return RaftReplica(uuid, ConsensusMetadata.new_replica(config), [], 0, options, rng, now_ms)


__all__ = [
    "ChangeType",
    "ConfigChange",
    "ConsensusError",
    "ConsensusMetadata",
    "DataState",
    "RaftOptions",
    "RaftReplica",
    "Ready",
    "Role",
    "initial_replica",
]
