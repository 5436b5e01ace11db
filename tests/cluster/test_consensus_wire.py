"""The consensus messages' wire form: every message round-trips through JSON, and
malformed ones are refused with ``MalformedMessage`` naming what is wrong."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kudusql.cluster.errors import MalformedMessage, NotTheLeader, make_error
from kudusql.cluster.tserver.consensus_wire import decode_message, encode_message
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

naturals = st.integers(min_value=0, max_value=(1 << 64) - 1)
uuids = st.text(min_size=1, max_size=12)
opids = st.builds(OpId, naturals, naturals)
codes = st.none() | st.sampled_from(list(ConsensusErrorCode))
configs = st.builds(
    RaftConfig,
    st.lists(
        st.builds(RaftPeer, uuids, st.sampled_from(list(MemberType)), st.booleans()), max_size=4
    ).map(tuple),
    naturals,
)
entries = st.builds(
    ReplicateMsg,
    opids,
    naturals,
    st.sampled_from(list(OpType)),
    st.none() | st.text(max_size=40),
    st.none() | configs,
)
messages: st.SearchStrategy[ConsensusMessage] = st.one_of(
    st.builds(
        UpdateConsensusRequest,
        uuids,
        naturals,
        uuids,
        opids,
        naturals,
        st.lists(entries, max_size=3).map(tuple),
    ),
    st.builds(
        UpdateConsensusResponse,
        uuids,
        naturals,
        uuids,
        st.builds(ConsensusStatus, opids, st.none() | opids, naturals, codes),
        st.booleans(),
    ),
    st.builds(VoteRequest, uuids, naturals, uuids, opids, st.booleans(), st.booleans()),
    st.builds(VoteResponse, uuids, naturals, uuids, naturals, st.booleans(), st.booleans(), codes),
    st.builds(StartTabletCopyRequest, uuids, naturals, uuids),
)


@settings(max_examples=300, deadline=None)
@given(messages)
def test_every_message_round_trips_through_json(m: ConsensusMessage) -> None:
    wire = json.loads(json.dumps(encode_message(m), allow_nan=False))
    assert decode_message(wire) == m


def _vote() -> dict[str, Any]:
    return encode_message(VoteRequest("a", 3, "b", OpId(2, 7), True))


def _update() -> dict[str, Any]:
    entry = ReplicateMsg(OpId(1, 1), 5, OpType.CHANGE_CONFIG, config=RaftConfig.of_voters(["a"]))
    return encode_message(UpdateConsensusRequest("a", 1, "b", OpId(0, 0), 0, (entry,)))


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda d: d.pop("candidate_term"), "missing field candidate_term"),
        (lambda d: d.update(extra=1), "unknown field"),
        (lambda d: d.update(kind="gossip"), "unknown consensus message kind"),
        (lambda d: d.update(candidate_term=True), "candidate_term: expected a non-negative int"),
        (lambda d: d.update(candidate_term=-1), "candidate_term: expected a non-negative int"),
        (lambda d: d.update(last_received=[1]), r"last_received: an OpId is \[term, index\]"),
        (lambda d: d.update(is_pre_election=1), "is_pre_election: expected a bool"),
        (lambda d: d.update(dest_uuid=None), "dest_uuid: expected a string"),
    ],
)
def test_a_malformed_vote_is_refused(change: Any, match: str) -> None:
    wire = _vote()
    change(wire)
    with pytest.raises(MalformedMessage, match=match):
        decode_message(wire)


def test_a_malformed_entry_is_refused_with_its_path() -> None:
    wire = _update()
    wire["ops"][0]["op_type"] = "DROP"
    with pytest.raises(MalformedMessage, match=r"ops\[0\]\.op_type: not a OpType"):
        decode_message(wire)
    wire = _update()
    wire["ops"][0]["config"]["peers"][0]["member_type"] = "OBSERVER"
    with pytest.raises(MalformedMessage, match=r"peers\[0\]\.member_type"):
        decode_message(wire)
    with pytest.raises(MalformedMessage, match="expected an object"):
        decode_message([1, 2])


def test_not_the_leader_names_the_leader_across_the_wire() -> None:
    error = NotTheLeader.naming("tablet t: replica a is not the leader", "b", "127.0.0.1:7")
    again = make_error("NotTheLeader", str(error))
    assert isinstance(again, NotTheLeader)
    assert (again.leader_uuid, again.leader_address) == ("b", "127.0.0.1:7")
    unknown = make_error("NotTheLeader", str(NotTheLeader.naming("no leader", None, None)))
    assert isinstance(unknown, NotTheLeader)
    assert (unknown.leader_uuid, unknown.leader_address) == (None, None)
