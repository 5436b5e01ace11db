"""The wire form of the consensus messages tablet servers exchange (UpdateConsensus,
RequestVote, StartTabletCopy and their answers, with the log entries, OpIds and Raft
configs inside): each message is a JSON object with a ``kind`` key (FORMAT.md in this
package, "Consensus messages").

Encoding is total over ``kudusql.consensus.messages.ConsensusMessage``; decoding is
strict: a missing or unknown key, a value of the wrong type (a bool is not an int), an
unknown kind, op type, member type or error code raises ``MalformedMessage`` naming the
path of what is wrong. ``decode_message(encode_message(m)) == m`` for every message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from kudusql.cluster.errors import MalformedMessage
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
from kudusql.consensus.opid import OpId
from kudusql.consensus.raft_config import MemberType, RaftConfig, RaftPeer

__all__ = [
    "decode_config",
    "decode_entry",
    "decode_message",
    "encode_config",
    "encode_entry",
    "encode_message",
]

E = TypeVar("E")

# DO NOT CHANGE: wire names (FORMAT.md).
_UPDATE = "update_consensus"
_UPDATE_RESPONSE = "update_consensus_response"
_VOTE = "request_vote"
_VOTE_RESPONSE = "request_vote_response"
_TABLET_COPY = "start_tablet_copy"

# -- encoding ---------------------------------------------------------------------------------


def _opid(o: OpId) -> list[int]:
    return [o.term, o.index]


def _config(c: RaftConfig) -> dict[str, Any]:
    return {
        "opid_index": c.opid_index,
        "peers": [
            {"uuid": p.uuid, "member_type": p.member_type.value, "promote": p.promote}
            for p in c.peers
        ],
    }


def _entry(e: ReplicateMsg) -> dict[str, Any]:
    return {
        "id": _opid(e.id),
        "timestamp": e.timestamp,
        "op_type": e.op_type.value,
        "payload": e.payload,
        "config": None if e.config is None else _config(e.config),
    }


def _code(c: ConsensusErrorCode | None) -> str | None:
    return None if c is None else c.value


def encode_message(m: ConsensusMessage) -> dict[str, Any]:
    """A consensus message as a JSON-able dict."""
    if isinstance(m, UpdateConsensusRequest):
        return {
            "kind": _UPDATE,
            "caller_uuid": m.caller_uuid,
            "caller_term": m.caller_term,
            "dest_uuid": m.dest_uuid,
            "preceding_id": _opid(m.preceding_id),
            "committed_index": m.committed_index,
            "ops": [_entry(e) for e in m.ops],
            "safe_timestamp": m.safe_timestamp,
            "sent_ms": m.sent_ms,
        }
    if isinstance(m, UpdateConsensusResponse):
        s = m.status
        return {
            "kind": _UPDATE_RESPONSE,
            "responder_uuid": m.responder_uuid,
            "responder_term": m.responder_term,
            "dest_uuid": m.dest_uuid,
            "status": {
                "last_received": _opid(s.last_received),
                "last_received_current_leader": (
                    None
                    if s.last_received_current_leader is None
                    else _opid(s.last_received_current_leader)
                ),
                "last_committed_idx": s.last_committed_idx,
                "error": _code(s.error),
            },
            "tablet_not_found": m.tablet_not_found,
            "echo_sent_ms": m.echo_sent_ms,
        }
    if isinstance(m, VoteRequest):
        return {
            "kind": _VOTE,
            "candidate_uuid": m.candidate_uuid,
            "candidate_term": m.candidate_term,
            "dest_uuid": m.dest_uuid,
            "last_received": _opid(m.last_received),
            "is_pre_election": m.is_pre_election,
            "ignore_live_leader": m.ignore_live_leader,
        }
    if isinstance(m, VoteResponse):
        return {
            "kind": _VOTE_RESPONSE,
            "responder_uuid": m.responder_uuid,
            "responder_term": m.responder_term,
            "dest_uuid": m.dest_uuid,
            "candidate_term": m.candidate_term,
            "is_pre_election": m.is_pre_election,
            "vote_granted": m.vote_granted,
            "error": _code(m.error),
        }
    if isinstance(m, StartTabletCopyRequest):
        return {
            "kind": _TABLET_COPY,
            "caller_uuid": m.caller_uuid,
            "caller_term": m.caller_term,
            "dest_uuid": m.dest_uuid,
        }
    raise TypeError(f"{type(m).__name__} is not a consensus message")


# -- strict decoding --------------------------------------------------------------------------


class _Obj:
    """A JSON object being decoded: typed getters that name the path of a bad value;
    ``done`` refuses keys nobody read."""

    def __init__(self, raw: Any, where: str) -> None:
        if type(raw) is not dict:
            raise MalformedMessage(f"{where}: expected an object, got {raw!r}")
        self.raw: dict[str, Any] = raw
        self.where = where
        self.seen: set[str] = set()

    def _get(self, key: str) -> Any:
        if key not in self.raw:
            raise MalformedMessage(f"{self.where}: missing field {key}")
        self.seen.add(key)
        return self.raw[key]

    def get_int(self, key: str) -> int:
        v = self._get(key)
        if type(v) is not int or v < 0:
            raise MalformedMessage(f"{self.where}.{key}: expected a non-negative int, got {v!r}")
        return v

    def get_str(self, key: str) -> str:
        v = self._get(key)
        if type(v) is not str:
            raise MalformedMessage(f"{self.where}.{key}: expected a string, got {v!r}")
        return v

    def get_bool(self, key: str) -> bool:
        v = self._get(key)
        if type(v) is not bool:
            raise MalformedMessage(f"{self.where}.{key}: expected a bool, got {v!r}")
        return v

    def opt(self, key: str, read: Callable[[Any, str], E]) -> E | None:
        v = self._get(key)
        return None if v is None else read(v, f"{self.where}.{key}")

    def req(self, key: str, read: Callable[[Any, str], E]) -> E:
        return read(self._get(key), f"{self.where}.{key}")

    def get_list(self, key: str, read: Callable[[Any, str], E]) -> list[E]:
        v = self._get(key)
        if type(v) is not list:
            raise MalformedMessage(f"{self.where}.{key}: expected a list, got {v!r}")
        return [read(x, f"{self.where}.{key}[{i}]") for i, x in enumerate(v)]

    def done(self) -> None:
        extra = sorted(set(self.raw) - self.seen)
        if extra:
            raise MalformedMessage(f"{self.where}: unknown field(s) {', '.join(extra)}")


def _read_opid(raw: Any, where: str) -> OpId:
    if type(raw) is not list or len(raw) != 2 or any(type(x) is not int or x < 0 for x in raw):
        raise MalformedMessage(f"{where}: an OpId is [term, index], got {raw!r}")
    return OpId(raw[0], raw[1])


def _enum(cls: type[Any], raw: Any, where: str) -> Any:
    try:
        if type(raw) is not str:
            raise ValueError
        return cls(raw)
    except ValueError:
        raise MalformedMessage(f"{where}: not a {cls.__name__}: {raw!r}") from None


def _read_peer(raw: Any, where: str) -> RaftPeer:
    o = _Obj(raw, where)
    peer = RaftPeer(
        o.get_str("uuid"),
        o.req("member_type", lambda v, w: _enum(MemberType, v, w)),
        o.get_bool("promote"),
    )
    o.done()
    return peer


def _read_config(raw: Any, where: str) -> RaftConfig:
    o = _Obj(raw, where)
    config = RaftConfig(tuple(o.get_list("peers", _read_peer)), o.get_int("opid_index"))
    o.done()
    return config


def _read_entry(raw: Any, where: str) -> ReplicateMsg:
    o = _Obj(raw, where)
    entry = ReplicateMsg(
        o.req("id", _read_opid),
        o.get_int("timestamp"),
        o.req("op_type", lambda v, w: _enum(OpType, v, w)),
        o.opt("payload", _read_str),
        o.opt("config", _read_config),
    )
    o.done()
    return entry


def _read_str(raw: Any, where: str) -> str:
    if type(raw) is not str:
        raise MalformedMessage(f"{where}: expected a string, got {raw!r}")
    return raw


def _read_code(raw: Any, where: str) -> ConsensusErrorCode:
    code: ConsensusErrorCode = _enum(ConsensusErrorCode, raw, where)
    return code


def _read_status(raw: Any, where: str) -> ConsensusStatus:
    o = _Obj(raw, where)
    status = ConsensusStatus(
        o.req("last_received", _read_opid),
        o.opt("last_received_current_leader", _read_opid),
        o.get_int("last_committed_idx"),
        o.opt("error", _read_code),
    )
    o.done()
    return status


def decode_message(raw: Any, where: str = "consensus message") -> ConsensusMessage:
    """The consensus message an ``encode_message`` dict holds; ``MalformedMessage``
    naming the path of anything wrong."""
    o = _Obj(raw, where)
    kind = o.get_str("kind")
    m: ConsensusMessage
    if kind == _UPDATE:
        m = UpdateConsensusRequest(
            o.get_str("caller_uuid"),
            o.get_int("caller_term"),
            o.get_str("dest_uuid"),
            o.req("preceding_id", _read_opid),
            o.get_int("committed_index"),
            tuple(o.get_list("ops", _read_entry)),
            o.get_int("safe_timestamp"),
            o.get_int("sent_ms"),
        )
    elif kind == _UPDATE_RESPONSE:
        m = UpdateConsensusResponse(
            o.get_str("responder_uuid"),
            o.get_int("responder_term"),
            o.get_str("dest_uuid"),
            o.req("status", _read_status),
            o.get_bool("tablet_not_found"),
            o.get_int("echo_sent_ms"),
        )
    elif kind == _VOTE:
        m = VoteRequest(
            o.get_str("candidate_uuid"),
            o.get_int("candidate_term"),
            o.get_str("dest_uuid"),
            o.req("last_received", _read_opid),
            o.get_bool("is_pre_election"),
            o.get_bool("ignore_live_leader"),
        )
    elif kind == _VOTE_RESPONSE:
        m = VoteResponse(
            o.get_str("responder_uuid"),
            o.get_int("responder_term"),
            o.get_str("dest_uuid"),
            o.get_int("candidate_term"),
            o.get_bool("is_pre_election"),
            o.get_bool("vote_granted"),
            o.opt("error", _read_code),
        )
    elif kind == _TABLET_COPY:
        m = StartTabletCopyRequest(
            o.get_str("caller_uuid"), o.get_int("caller_term"), o.get_str("dest_uuid")
        )
    else:
        raise MalformedMessage(f"{where}: unknown consensus message kind {kind!r}")
    o.done()
    return m


def encode_entry(e: ReplicateMsg) -> dict[str, Any]:
    """A log entry in the form UpdateConsensus carries it (a tablet copy ships these)."""
    return _entry(e)


def decode_entry(raw: Any, where: str = "log entry") -> ReplicateMsg:
    return _read_entry(raw, where)


def encode_config(c: RaftConfig) -> dict[str, Any]:
    return _config(c)


def decode_config(raw: Any, where: str = "raft config") -> RaftConfig:
    return _read_config(raw, where)
