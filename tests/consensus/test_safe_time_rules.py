"""Safe time and the leader lease, rule by rule, on hand-driven replicas: what a leader
and a follower offer for snapshot reads, where it stops, and the vote withholding the
lease relies on (the simulator checks every claim against what commits later)."""

from __future__ import annotations

import dataclasses

from kudusql.consensus.messages import (
    ConsensusErrorCode,
    UpdateConsensusRequest,
    UpdateConsensusResponse,
    VoteRequest,
    VoteResponse,
)
from kudusql.consensus.opid import OpId
from kudusql.consensus.raft_consensus import RaftOptions
from tests.consensus.harness import Group, make_log

# 500 ms heartbeats, 1.5 s election timeout, 500 ms clock error: 1 s leases.
OPTIONS = RaftOptions(evict_failed_followers=False)


def elected(uuids: tuple[str, ...] = ("a", "b", "c"), **flags: int) -> Group:
    g = Group(list(uuids), options=dataclasses.replace(OPTIONS, **flags))
    g.elect("a")
    return g


def test_the_lease_is_the_election_timeout_less_the_clock_error() -> None:
    assert OPTIONS.election_timeout_ms == 1500
    assert OPTIONS.leader_lease_ms == 1000


def test_a_leader_offers_its_clock_while_it_holds_its_lease() -> None:
    g = elected()
    a = g["a"]
    assert a.committed_index == 1
    now = g.ht()
    assert a.safe_time(g.now, now) == now
    # Entries appended afterwards take later timestamps, even at the same clock reading.
    opid = a.replicate("w", g.now, now)
    assert a.log[opid.index - 1].timestamp > now
    # Unheard by the followers past its lease, it offers nothing newer.
    g.deliver(lambda s, m: False)
    g.now += OPTIONS.leader_lease_ms + 1
    held = a.safe_time(g.now, g.ht())
    assert held < a.log[opid.index - 1].timestamp
    assert a.safe_time(g.now + 5_000, g.ht() + (5_000 << 12)) == held


def test_safe_time_stops_below_the_first_uncommitted_entry() -> None:
    g = elected()
    a = g["a"]
    opid = a.replicate("w", g.now, g.ht())
    ts = a.log[opid.index - 1].timestamp
    assert a.safe_time(g.now, g.ht() + 10) == ts - 1
    g.sync("a")
    g.deliver()
    assert a.committed_index == opid.index
    assert a.safe_time(g.now, g.ht() + 20) == g.ht() + 20


def test_a_follower_offers_what_its_leader_sent() -> None:
    g = elected(max_batch_ops=1)
    a, b = g["a"], g["b"]
    # A request that leaves entries out carries a safe time just below the first of them.
    first = a.replicate("w1", g.now, g.ht())
    a.replicate("w2", g.now, g.ht())
    g.drain("a")
    requests = [m for _, m in g.inbox if isinstance(m, UpdateConsensusRequest)]
    to_b = [m for m in requests if m.dest_uuid == "b"]
    assert to_b and to_b[-1].ops[-1].id == first
    assert to_b[-1].safe_timestamp == a.log[first.index].timestamp - 1
    g.sync("a")
    g.deliver()
    g.tick("a", advance_ms=OPTIONS.heartbeat_interval_ms)
    g.deliver()
    assert b.committed_index == a.committed_index == 3
    # The last heartbeat reached the end of a's log: it carried a's clock.
    assert b.safe_time(g.now, 0) >= a.log[-1].timestamp


def test_the_lease_counts_from_when_the_acknowledged_request_was_sent() -> None:
    g = elected()
    a = g["a"]
    sent_at = g.now
    g.tick("a", advance_ms=OPTIONS.heartbeat_interval_ms)
    sent_at = g.now
    # The answers arrive late: the lease still counts from the sending.
    g.now += 900
    g.deliver()
    assert a.safe_time(g.now, g.ht()) == g.ht()
    g.now = sent_at + OPTIONS.leader_lease_ms
    assert a.safe_time(g.now, g.ht()) < g.ht()


def test_an_answer_to_an_older_term_does_not_renew_the_lease() -> None:
    g = elected()
    a = g["a"]
    g.now += OPTIONS.leader_lease_ms + 1
    status = g.last_ready["b"].messages[0]
    assert isinstance(status, UpdateConsensusResponse)
    stale = dataclasses.replace(
        status,
        echo_sent_ms=g.now,
        status=dataclasses.replace(status.status, error=ConsensusErrorCode.INVALID_TERM),
    )
    a.step(stale, g.now, g.ht())
    a.step(dataclasses.replace(stale, responder_uuid="c"), g.now, g.ht())
    assert a.safe_time(g.now, g.ht()) < g.ht()


def test_without_room_for_a_lease_a_leader_offers_nothing() -> None:
    g = elected(max_clock_error_ms=1500)
    assert g["a"].safe_time(g.now, g.ht()) == 0


def test_a_single_voter_always_holds_its_lease() -> None:
    g = Group(["a"], options=OPTIONS)
    g.tick("a")
    g.sync("a")
    a = g["a"]
    assert a.is_leader
    g.now += 60_000
    assert a.safe_time(g.now, g.ht()) == g.ht()


def vote(g: Group, uuid: str, term: int) -> VoteResponse:
    last = g[uuid].last_opid
    g[uuid].step(VoteRequest("x", term, uuid, OpId(last.term + 9, 99), False), g.now, g.ht())
    (resp,) = g[uuid].take_ready().messages
    assert isinstance(resp, VoteResponse)
    return resp


def test_a_restarted_voter_withholds_its_vote_for_an_election_timeout() -> None:
    g = Group(["a", "x"], options=OPTIONS)
    g.put("a", make_log(1, 2), 2, term=2, withhold_votes=True)
    assert vote(g, "a", 3).error is ConsensusErrorCode.LEADER_IS_ALIVE
    g.now += OPTIONS.election_timeout_ms
    assert vote(g, "a", 3).vote_granted


def test_a_deposed_leader_withholds_its_vote_while_its_lease_may_run() -> None:
    g = elected()
    a = g["a"]
    status = g.last_ready["b"].messages[0]
    assert isinstance(status, UpdateConsensusResponse)
    a.step(dataclasses.replace(status, responder_term=a.current_term + 1), g.now, g.ht())
    assert not a.is_leader
    assert vote(g, "a", a.current_term + 1).error is ConsensusErrorCode.LEADER_IS_ALIVE
    g.now += OPTIONS.election_timeout_ms
    assert vote(g, "a", a.current_term + 1).vote_granted
