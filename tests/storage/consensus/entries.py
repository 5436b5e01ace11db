"""Entries for consensus log tests: a payload is a function of its OpId, so a log's
content can be checked against any (term, index) it holds."""

from __future__ import annotations

from kudusql.consensus.messages import OpType, ReplicateMsg
from kudusql.consensus.opid import OpId
from kudusql.consensus.raft_config import MemberType, RaftConfig, RaftPeer


def payload(term: int, index: int, size: int = 40) -> str:
    base = f"{term}.{index}:"
    return (base * (size // len(base) + 1))[:size]


def entry(term: int, index: int, size: int = 40) -> ReplicateMsg:
    """A WRITE, or every 7th index a CHANGE_CONFIG, or every 11th a NO_OP."""
    if index % 11 == 0:
        return ReplicateMsg(OpId(term, index), 1000 + index, OpType.NO_OP)
    if index % 7 == 0:
        config = RaftConfig(
            (
                RaftPeer("ts-a", MemberType.VOTER),
                RaftPeer(f"ts-{index}", MemberType.NON_VOTER, True),
            ),
            index,
        )
        return ReplicateMsg(OpId(term, index), 1000 + index, OpType.CHANGE_CONFIG, config=config)
    return ReplicateMsg(OpId(term, index), 1000 + index, OpType.WRITE, payload(term, index, size))


def run(term: int, first: int, count: int, size: int = 40) -> list[ReplicateMsg]:
    return [entry(term, i, size) for i in range(first, first + count)]


def matches(msg: ReplicateMsg) -> bool:
    """Whether ``msg`` is the entry the tests write at its OpId (any payload size)."""
    want = entry(msg.id.term, msg.id.index, len(msg.payload or ""))
    return msg == want
