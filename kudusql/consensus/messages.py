"""The consensus messages replicas exchange, after Kudu's consensus.proto: log entries
(ReplicateMsg), UpdateConsensus, RequestVote and StartTabletCopy, with their responses.

They are plain immutable values; this core defines no wire encoding of them (the host
that sends them over RPC owns that).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kudusql.consensus.opid import OpId
from kudusql.consensus.raft_config import RaftConfig


class OpType(enum.Enum):
    NO_OP = "NO_OP"
    WRITE = "WRITE"
    CHANGE_CONFIG = "CHANGE_CONFIG"


@dataclass(frozen=True, slots=True)
class ReplicateMsg:
    """One log entry: its OpId, the HybridTime the leader assigned, and its operation.

    A WRITE carries an opaque ``payload`` (the tablet's write request); a CHANGE_CONFIG
    carries the ``config`` it installs, whose ``opid_index`` is this entry's index.
    """

    id: OpId
    timestamp: int
    op_type: OpType
    payload: str | None = None
    config: RaftConfig | None = None

    def __str__(self) -> str:
        what = self.payload if self.op_type is OpType.WRITE else self.op_type.value
        if self.config is not None:
            what = f"CONFIG{self.config}"
        return f"{self.id}:{what}"


class ConsensusErrorCode(enum.Enum):
    """Why a replica refused an UpdateConsensus or a vote (Kudu's ConsensusErrorPB codes)."""

    INVALID_TERM = "INVALID_TERM"
    LAST_OPID_TOO_OLD = "LAST_OPID_TOO_OLD"
    ALREADY_VOTED = "ALREADY_VOTED"
    PRECEDING_ENTRY_DIDNT_MATCH = "PRECEDING_ENTRY_DIDNT_MATCH"
    LEADER_IS_ALIVE = "LEADER_IS_ALIVE"
    #: The replica has no data and no known last-logged OpId (an empty or copying one).
    TABLET_NOT_FOUND = "TABLET_NOT_FOUND"


@dataclass(frozen=True, slots=True)
class UpdateConsensusRequest:
    """The leader's append (and heartbeat): ops that follow ``preceding_id``."""

    caller_uuid: str
    caller_term: int
    dest_uuid: str
    preceding_id: OpId
    committed_index: int
    ops: tuple[ReplicateMsg, ...]
    #: The leader's safe time for this request's receiver: every entry with a
    #: timestamp at or below it is at or before the request's last op (0: none).
    safe_timestamp: int = 0
    #: The leader's monotonic milliseconds when it sent this request; the answer
    #: echoes it, and the leader's lease counts from it.
    sent_ms: int = 0


@dataclass(frozen=True, slots=True)
class ConsensusStatus:
    """Where a follower's log stands: its last OpId, the last OpId known to match the
    current leader's log (None until it has matched one), and its committed index."""

    last_received: OpId
    last_received_current_leader: OpId | None
    last_committed_idx: int
    error: ConsensusErrorCode | None = None


@dataclass(frozen=True, slots=True)
class UpdateConsensusResponse:
    responder_uuid: str
    responder_term: int
    dest_uuid: str
    status: ConsensusStatus
    #: TABLET_NOT_FOUND: the replica has no data; the leader answers with a tablet copy.
    tablet_not_found: bool = False
    #: The answered request's ``sent_ms``.
    echo_sent_ms: int = 0


@dataclass(frozen=True, slots=True)
class VoteRequest:
    """RequestVote; a pre-election asks for ``candidate_term`` without anyone adopting it."""

    candidate_uuid: str
    candidate_term: int
    dest_uuid: str
    last_received: OpId
    is_pre_election: bool
    ignore_live_leader: bool = False


@dataclass(frozen=True, slots=True)
class VoteResponse:
    responder_uuid: str
    responder_term: int
    dest_uuid: str
    candidate_term: int
    is_pre_election: bool
    vote_granted: bool
    error: ConsensusErrorCode | None = None


@dataclass(frozen=True, slots=True)
class StartTabletCopyRequest:
    """The leader asks a replica that lacks the tablet to copy it from the leader."""

    caller_uuid: str
    caller_term: int
    dest_uuid: str


ConsensusMessage = (
    UpdateConsensusRequest
    | UpdateConsensusResponse
    | VoteRequest
    | VoteResponse
    | StartTabletCopyRequest
)
