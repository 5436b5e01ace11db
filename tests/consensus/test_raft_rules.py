"""Kudu's Raft rules one by one, on hand-driven replicas."""

from __future__ import annotations

import random

import pytest

from kudusql.consensus.messages import (
    ConsensusErrorCode,
    OpType,
    StartTabletCopyRequest,
    UpdateConsensusRequest,
    UpdateConsensusResponse,
    VoteRequest,
    VoteResponse,
)
from kudusql.consensus.opid import OpId
from kudusql.consensus.raft_config import MemberType, RaftConfig, RaftPeer
from kudusql.consensus.raft_consensus import (
    ChangeType,
    ConfigChange,
    ConsensusError,
    ConsensusMetadata,
    DataState,
    RaftOptions,
    RaftReplica,
    Role,
)
from tests.consensus.harness import Group, entry, make_log

ABC = ["a", "b", "c"]


def vote(
    replica: RaftReplica,
    term: int,
    last: OpId,
    pre: bool = False,
    candidate: str = "x",
    now: int = 0,
) -> VoteResponse:
    replica.step(VoteRequest(candidate, term, replica.uuid, last, pre), now, 0)
    (resp,) = replica.take_ready().messages
    assert isinstance(resp, VoteResponse)
    return resp


# ------------------------------------------------------------------ vote granting


def test_vote_rules_in_kudus_order() -> None:
    g = Group(["a", "x"])
    a = g.put("a", make_log(1, 2, 2), 1, term=3)
    # Term below ours.
    assert vote(a, 2, OpId(9, 9)).error is ConsensusErrorCode.INVALID_TERM
    # Not up to date: (2, 2) < (2, 3); the term advance is still recorded.
    resp = vote(a, 4, OpId(2, 2))
    assert (resp.vote_granted, resp.error) == (False, ConsensusErrorCode.LAST_OPID_TOO_OLD)
    assert a.current_term == 4 and a.voted_for is None
    # Up to date by (term, index): a higher term beats a longer log.
    assert vote(a, 4, OpId(3, 1), candidate="y").vote_granted
    assert a.voted_for == "y"
    # Already voted in this term; a repeat to the same candidate is granted again.
    resp = vote(a, 4, OpId(3, 9), candidate="z")
    assert (resp.vote_granted, resp.error) == (False, ConsensusErrorCode.ALREADY_VOTED)
    assert vote(a, 4, OpId(3, 1), candidate="y").vote_granted


def test_vote_persists_before_answering() -> None:
    g = Group(["a", "x"])
    a = g["a"]
    a.step(VoteRequest("x", 1, "a", OpId(0, 0), False), 0, 0)
    ready = a.take_ready()
    assert ready.meta is not None
    assert (ready.meta.current_term, ready.meta.voted_for) == (1, "x")


def test_pre_election_records_nothing() -> None:
    g = Group(["a", "x"])
    a = g.put("a", make_log(1), 1, term=1)
    resp = vote(a, 2, OpId(1, 1), pre=True)
    assert resp.vote_granted and resp.is_pre_election
    assert (a.current_term, a.voted_for) == (1, None)
    assert a.take_ready().meta is None


def test_leader_is_alive_withholds_votes() -> None:
    g = Group(ABC)
    g.elect("a")
    b = g["b"]
    # b heard the leader just now: it withholds its vote for a higher term.
    resp = vote(b, b.current_term + 1, OpId(99, 99), now=g.now)
    assert resp.error is ConsensusErrorCode.LEADER_IS_ALIVE
    # The leader itself always withholds.
    assert vote(g["a"], 99, OpId(99, 99), now=g.now).error is ConsensusErrorCode.LEADER_IS_ALIVE
    # After an election timeout without the leader, b votes.
    later = g.now + g.options.election_timeout_ms + 1
    assert vote(b, b.current_term + 1, OpId(99, 99), now=later).vote_granted


def test_tombstone_keeps_last_logged_opid_and_votes() -> None:
    g = Group(["a", "x"])
    a = g.put("a", make_log(1, 2, 2), 3, term=2)
    a.tombstone(0)
    a.take_ready()
    assert a.data_state is DataState.TOMBSTONED and a.log == []
    assert a.tombstone_last_logged_opid == OpId(2, 3)
    assert vote(a, 3, OpId(2, 2)).error is ConsensusErrorCode.LAST_OPID_TOO_OLD
    assert vote(a, 4, OpId(2, 3)).vote_granted
    # A tombstone takes no appends: the leader answers with a tablet copy.
    a.step(UpdateConsensusRequest("x", 4, "a", OpId(0, 0), 0, ()), 0, 0)
    (resp,) = a.take_ready().messages
    assert isinstance(resp, UpdateConsensusResponse) and resp.tablet_not_found


def test_replica_without_last_logged_opid_cannot_vote() -> None:
    empty = RaftReplica("e", ConsensusMetadata.empty(), [], 0, RaftOptions(), random.Random(1), 0)
    assert vote(empty, 5, OpId(9, 9)).error is ConsensusErrorCode.TABLET_NOT_FOUND
    g = Group(["a", "x"], options=RaftOptions(enable_tombstoned_voting=False))
    a = g.put("a", [], 0, term=1, data_state=DataState.TOMBSTONED, tombstone_opid=OpId(1, 1))
    assert not vote(a, 5, OpId(9, 9)).vote_granted


def test_election_backoff_grows_with_failed_elections() -> None:
    g = Group(ABC)
    a = g["a"]
    timeout = g.options.election_timeout_ms
    for failed in range(8):
        a._failed_elections = failed
        upper = min(timeout * 1.5 ** (failed + 1), 20_000)
        for _ in range(20):
            assert timeout <= a._election_backoff() <= upper


# ------------------------------------------------------------------ elections


def test_first_election_and_noop() -> None:
    g = Group(ABC)
    g.elect("a")
    a = g["a"]
    assert a.role is Role.LEADER and a.current_term == 1
    assert [e.op_type for e in a.log] == [OpType.NO_OP]
    assert a.committed_index == 1
    g.tick("a", advance_ms=g.options.heartbeat_interval_ms)
    g.deliver()
    assert g["b"].committed_index == 1 and g["b"].leader_uuid == "a"
    assert g["b"].role is Role.FOLLOWER


def test_single_voter_elects_itself_and_waits_for_its_own_log() -> None:
    g = Group(["a"])
    g.tick("a")  # at once, without a pre-election
    a = g["a"]
    assert a.is_leader and a.committed_index == 0  # its NO_OP is not yet durable
    g.sync("a")
    assert a.committed_index == 1


def test_leader_commits_on_followers_before_its_own_write_is_durable() -> None:
    g = Group(ABC)
    g.elect("a")
    a = g["a"]
    a.replicate("w1", g.now, g.ht())
    g.drain("a")
    g.deliver()
    assert a.durable_index == 1 and a.committed_index == 2
    assert [e.payload for e in g.committed["a"]] == [None, "w1"]


def test_pre_election_does_not_disrupt_a_healthy_leader() -> None:
    g = Group(ABC)
    g.elect("a")
    term = g["a"].current_term
    # c is cut off: its failure detector fires again and again; pre-votes are lost.
    for _ in range(5):
        g.tick("c", advance_ms=30_000)
        g.inbox = [(s, m) for s, m in g.inbox if s != "c"]
    assert g["c"].current_term == term
    # c rejoins while the leader is healthy: its pre-vote is refused, nothing changes.
    g.tick("a", advance_ms=g.options.heartbeat_interval_ms)
    g.deliver(lambda s, m: m.dest_uuid != "c")
    g.tick("c", advance_ms=0)
    g.tick("c", advance_ms=g.options.election_timeout_ms)  # no leader heard by c yet
    g.deliver()
    assert g["a"].is_leader and g["a"].current_term == term
    assert g["c"].current_term == term and g["c"].leader_uuid == "a"


def test_without_pre_election_a_rejoining_replica_deposes_the_leader() -> None:
    g = Group(ABC, options=RaftOptions(enable_pre_election=False))
    g.elect("a")
    term = g["a"].current_term
    for _ in range(3):
        g.tick("c", advance_ms=30_000)
        g.inbox = [(s, m) for s, m in g.inbox if s != "c"]
    assert g["c"].current_term == term + 3
    g.tick("a", advance_ms=g.options.heartbeat_interval_ms)
    g.deliver()
    assert not g["a"].is_leader and g["a"].current_term == term + 3


def test_lost_election_adopts_the_higher_term_seen() -> None:
    g = Group(ABC)
    g.put("b", make_log(1, 1), 2, term=5)
    g.put("c", make_log(1, 1), 2, term=5)
    a = g.put("a", make_log(1), 1, term=1)
    g.tick("a", advance_ms=60_000)
    g.deliver()
    assert not a.is_leader and a.current_term == 5


# ------------------------------------------------------------------ replication


def test_divergent_follower_jumps_to_its_committed_index() -> None:
    options = RaftOptions(max_batch_ops=100)
    g = Group(ABC, options=options)
    # c took many entries from a deposed leader of term 2; it committed up to 3.
    g.put("a", make_log(1, 1, 1, 3, 3), 3, term=3)
    g.put("b", make_log(1, 1, 1, 3, 3), 3, term=3)
    g.put("c", make_log(1, 1, 1, *[2] * 20), 3, term=2)
    g.tick("a", advance_ms=60_000)
    g.deliver(lambda s, m: not isinstance(m, UpdateConsensusRequest) or m.dest_uuid != "c")
    assert g["a"].is_leader
    sent_to_c = [m for s, m in g.inbox if m.dest_uuid == "c"]
    assert sent_to_c and all(isinstance(m, UpdateConsensusRequest) for m in sent_to_c)
    g.inbox = []
    # The first exchange mismatches; the next one starts right after c's committed index.
    g.tick("a", advance_ms=g.options.heartbeat_interval_ms)
    requests: list[UpdateConsensusRequest] = []

    def to_c(src: str, msg: object) -> bool:
        if isinstance(msg, UpdateConsensusRequest) and msg.dest_uuid == "c":
            requests.append(msg)
        return True

    g.deliver(to_c)
    # c's entry at 5 is of term 2, not 3: it drops it and everything after.
    assert requests[0].preceding_id == OpId(3, 5)
    assert g["c"].last_index >= 4
    assert requests[1].preceding_id == OpId(1, 3)
    assert len(requests) == 2
    assert [e.id for e in g["c"].log] == [e.id for e in g["a"].log]


def test_figure_8_only_entries_of_the_leaders_term_commit_by_counting() -> None:
    five = ["s1", "s2", "s3", "s4", "s5"]
    g = Group(five, options=RaftOptions(max_batch_ops=1))
    g.put("s1", make_log(1, 2), 1, term=3)
    g.put("s2", make_log(1, 2), 1, term=3)
    g.put("s3", make_log(1), 1, term=3)
    g.put("s4", make_log(1), 1, term=3)
    g.put("s5", make_log(1, 3), 1, term=3)
    # s1 wins term 4 (s5's log is newer, it refuses) and appends its NO_OP at index 3.
    g.tick("s1", advance_ms=60_000)
    g.deliver(lambda s, m: isinstance(m, (VoteRequest, VoteResponse)))
    s1 = g["s1"]
    assert s1.is_leader and s1.current_term == 4 and s1.last_opid == OpId(4, 3)
    g.sync("s1")
    # One batch of one op to s3: index 2 (term 2) reaches s1, s2, s3, a majority.
    g.inbox = [(s, m) for s, m in g.inbox if m.dest_uuid in ("s2", "s3")]
    g.deliver(rounds=4)
    assert g["s3"].last_opid == OpId(2, 2)
    assert s1.committed_index == 1  # a majority holds (2, 2) but it is not of term 4
    # Why: s5 can still win term 5 with s3 and s4 (its (3, 2) beats (2, 2)) and
    # overwrite index 2.
    s4 = g["s4"]
    late = g.now + 60_000
    assert vote(g["s3"], 5, OpId(3, 2), candidate="s5", now=late).vote_granted
    assert vote(s4, 5, OpId(3, 2), candidate="s5", now=late).vote_granted


def test_figure_8_without_the_rule_commits_an_overwritable_entry() -> None:
    five = ["s1", "s2", "s3", "s4", "s5"]
    options = RaftOptions(max_batch_ops=1, test_only_commit_any_term=True)
    g = Group(five, options=options)
    for uuid, log in [("s1", (1, 2)), ("s2", (1, 2)), ("s3", (1,)), ("s4", (1,)), ("s5", (1, 3))]:
        g.put(uuid, make_log(*log), 1, term=3)
    g.tick("s1", advance_ms=60_000)
    g.deliver(lambda s, m: isinstance(m, (VoteRequest, VoteResponse)))
    g.sync("s1")
    g.inbox = [(s, m) for s, m in g.inbox if m.dest_uuid in ("s2", "s3")]
    g.deliver(rounds=4)
    assert g["s1"].committed_index == 2


def test_follower_truncates_on_conflict_and_advances_its_clock() -> None:
    g = Group(["a", "x"])
    a = g.put("a", make_log(1, 1, 2, 2), 2, term=2)
    ops = (entry(3, 3, ts=9_999), entry(3, 4, ts=10_000))
    a.step(UpdateConsensusRequest("x", 3, "a", OpId(1, 2), 4, ops), 0, 0)
    ready = a.take_ready()
    assert ready.truncate_after == 2 and [e.id for e in ready.appends] == [OpId(3, 3), OpId(3, 4)]
    assert ready.sync_before_send
    assert ready.clock_update == 10_000 and a.ht_floor == 10_000
    assert a.committed_index == 4
    (resp,) = ready.messages
    assert isinstance(resp, UpdateConsensusResponse)
    assert resp.status.last_received == OpId(3, 4) and resp.status.error is None


def test_follower_rejects_a_stale_leader_and_a_missing_preceding_entry() -> None:
    g = Group(["a", "x"])
    a = g.put("a", make_log(1, 2), 2, term=2)
    a.step(UpdateConsensusRequest("x", 1, "a", OpId(1, 1), 1, ()), 0, 0)
    (resp,) = a.take_ready().messages
    assert isinstance(resp, UpdateConsensusResponse)
    assert resp.status.error is ConsensusErrorCode.INVALID_TERM and resp.responder_term == 2
    a.step(UpdateConsensusRequest("x", 2, "a", OpId(2, 5), 1, ()), 0, 0)
    (resp,) = a.take_ready().messages
    assert isinstance(resp, UpdateConsensusResponse)
    assert resp.status.error is ConsensusErrorCode.PRECEDING_ENTRY_DIDNT_MATCH
    assert resp.status.last_committed_idx == 2


def test_new_leader_timestamps_are_above_its_log() -> None:
    g = Group(ABC)
    future = g.ht() + (10**9 << 12)
    for uuid in ABC:
        g.put(uuid, [entry(1, 1, ts=future)], 1, term=1)
    g.elect("a")
    a = g["a"]
    noop = a.log[-1]
    assert noop.op_type is OpType.NO_OP and noop.timestamp == future + 1
    a.replicate("w", g.now, g.ht())
    assert a.log[-1].timestamp == future + 2


def test_writes_are_refused_off_the_leader() -> None:
    g = Group(ABC)
    with pytest.raises(ConsensusError, match="NOT_LEADER"):
        g["a"].replicate("w", 0, g.ht())


# ------------------------------------------------------------------ learners and config


def test_learner_never_counts_toward_the_majority() -> None:
    config = RaftConfig(
        (
            RaftPeer("a", MemberType.VOTER),
            RaftPeer("b", MemberType.VOTER),
            RaftPeer("l", MemberType.NON_VOTER),
        )
    )
    g = Group(["a", "b", "l"], config=config)
    g.elect("a")
    a = g["a"]
    assert g["l"].role is Role.LEARNER
    a.replicate("w", g.now, g.ht())
    g.drain("a")
    g.sync("a")
    g.deliver(lambda s, m: "b" not in (s, m.dest_uuid))
    assert g["l"].last_index == 2
    assert a.committed_index == 1  # a and the learner have it; b (a voter) does not
    g.deliver()
    assert a.committed_index == 2
    # A learner never starts an election.
    g.tick("l", advance_ms=60_000)
    assert not any(isinstance(m, VoteRequest) for _, m in g.inbox)


def test_config_change_refusals() -> None:
    g = Group([*ABC, "d", "e"], config=RaftConfig.of_voters(ABC))
    g.tick("a", advance_ms=60_000)
    g.deliver(lambda s, m: isinstance(m, (VoteRequest, VoteResponse)))
    a = g["a"]
    assert a.is_leader
    add_d = ConfigChange(ChangeType.ADD_PEER, "d")
    with pytest.raises(ConsensusError, match="own term"):
        a.change_config(add_d, g.now, g.ht())
    g.sync("a")
    g.deliver()
    with pytest.raises(ConsensusError, match="CAS_FAILED"):
        a.change_config(
            ConfigChange(ChangeType.ADD_PEER, "d", cas_config_opid_index=7), g.now, g.ht()
        )
    with pytest.raises(ConsensusError, match="already a member"):
        a.change_config(ConfigChange(ChangeType.ADD_PEER, "b"), g.now, g.ht())
    with pytest.raises(ConsensusError, match="cannot remove itself"):
        a.change_config(ConfigChange(ChangeType.REMOVE_PEER, "a"), g.now, g.ht())
    with pytest.raises(ConsensusError, match="not a NON_VOTER"):
        a.change_config(ConfigChange(ChangeType.PROMOTE_PEER, "b"), g.now, g.ht())
    opid = a.change_config(
        ConfigChange(ChangeType.ADD_PEER, "d", cas_config_opid_index=0), g.now, g.ht()
    )
    # Effective on append, before it commits.
    assert a.active_config is not None and a.active_config.opid_index == opid.index
    assert a.active_config.is_member("d") and a.has_pending_config
    with pytest.raises(ConsensusError, match="CONFIG_CHANGE_PENDING"):
        a.change_config(ConfigChange(ChangeType.ADD_PEER, "e"), g.now, g.ht())


def test_follower_uses_a_config_on_append_and_reverts_on_truncation() -> None:
    g = Group(["a", "x"])
    a = g.put("a", make_log(1), 1, term=1)
    new = RaftConfig.of_voters(["a"], opid_index=2)
    change = entry(1, 2)
    change = type(change)(OpId(1, 2), 20, OpType.CHANGE_CONFIG, None, new)
    a.step(UpdateConsensusRequest("x", 1, "a", OpId(1, 1), 1, (change,)), 0, 0)
    a.take_ready()
    assert a.active_config == new and a.has_pending_config
    a.step(UpdateConsensusRequest("y", 2, "a", OpId(1, 1), 1, (entry(2, 2),)), 0, 0)
    a.take_ready()
    assert a.active_config == g.config and not a.has_pending_config


def test_new_replica_is_copied_promoted_and_counted() -> None:
    uuids = [*ABC, "d"]
    g = Group(uuids, config=RaftConfig.of_voters(ABC))
    g.put("d", [], 0, term=0, config=None, data_state=DataState.TOMBSTONED)
    g.elect("a")
    a = g["a"]
    a.change_config(ConfigChange(ChangeType.ADD_PEER, "d", promote=True), g.now, g.ht())
    g.drain("a")
    g.sync("a")
    g.deliver()
    # d answered TABLET_NOT_FOUND: the next heartbeat asks it to copy the tablet.
    g.tick("a", advance_ms=g.options.heartbeat_interval_ms)
    copies = [m for _, m in g.inbox if isinstance(m, StartTabletCopyRequest)]
    assert [m.dest_uuid for m in copies] == ["d"]
    g.inbox = [(s, m) for s, m in g.inbox if not isinstance(m, StartTabletCopyRequest)]
    d = g["d"]
    d.start_tablet_copy(copies[0], g.now)
    d.tablet_copy_complete(a.metadata(), list(a.log), a.committed_index, g.now)
    ready = g.drain("d")
    assert ready.reset_applied_to == a.committed_index and d.data_state is DataState.READY
    for _ in range(3):
        g.tick("a", advance_ms=g.options.heartbeat_interval_ms)
        g.deliver()
        g.sync("a")
        g.deliver()
    assert a.active_config is not None and a.active_config.is_voter("d")
    assert not a.has_pending_config and d.last_opid == a.last_opid


def test_rogue_leader_copy_is_refused() -> None:
    g = Group(["a", "x"])
    a = g.put("a", make_log(1, 5), 2, term=5)
    with pytest.raises(ConsensusError, match="below the term"):
        a.start_tablet_copy(StartTabletCopyRequest("x", 4, "a"), 0)
    assert a.data_state is DataState.READY
    # A tombstone keeps the rule with its last-logged OpId.
    a.tombstone(0)
    with pytest.raises(ConsensusError, match="below the term"):
        a.start_tablet_copy(StartTabletCopyRequest("x", 4, "a"), 0)
    a.start_tablet_copy(StartTabletCopyRequest("x", 5, "a"), 0)
    assert a.metadata().data_state is DataState.COPYING
    # A failed copy leaves a tombstone that still knows its last-logged OpId.
    a.tablet_copy_failed(0)
    assert a.metadata().data_state is DataState.TOMBSTONED
    assert a.tombstone_last_logged_opid == OpId(5, 2)


def test_leader_evicts_a_failed_follower_only_when_safe() -> None:
    options = RaftOptions(follower_unavailable_considered_failed_ms=5_000)
    g = Group(ABC, options=options)
    g.elect("a")
    a = g["a"]
    # c is silent for longer than the limit; b keeps answering.
    for _ in range(12):
        g.tick("a", advance_ms=options.heartbeat_interval_ms)
        g.deliver(lambda s, m: "c" not in (s, m.dest_uuid))
        g.sync("a")
        g.deliver(lambda s, m: "c" not in (s, m.dest_uuid))
    assert a.active_config is not None and a.active_config.voters == ("a", "b")
    # Down to two voters, evicting b (now silent too) would leave one: never.
    for _ in range(30):
        g.tick("a", advance_ms=options.heartbeat_interval_ms)
        g.inbox = []
    assert a.active_config.voters == ("a", "b")


def test_eviction_never_leaves_less_than_a_viable_majority() -> None:
    five = ["a", "b", "c", "d", "e"]
    options = RaftOptions(
        follower_unavailable_considered_failed_ms=5_000, consensus_rpc_timeout_ms=2_000
    )
    g = Group(five, options=options)
    g.elect("a")
    a = g["a"]
    # Only b stays reachable: removing any one of c, d, e leaves 4 voters of which only
    # a and b are viable, not a majority of 4.
    for _ in range(20):
        g.tick("a", advance_ms=options.heartbeat_interval_ms)
        g.deliver(lambda s, m: s in ("a", "b") and m.dest_uuid in ("a", "b"))
        g.inbox = []
    assert a.active_config is not None and len(a.active_config.voters) == 5


def test_a_deposed_leader_syncs_its_tail_before_answering_the_new_leader() -> None:
    g = Group(ABC)
    g.elect("a")
    a = g["a"]
    a.replicate("w", g.now, g.ht())
    g.drain("a")
    g.inbox = []
    assert a.durable_index < a.last_index
    # A new leader's heartbeat reaches a before its own write is durable: the answer
    # reports a's whole log, so that log must be durable before the answer leaves.
    a.step(UpdateConsensusRequest("b", 5, "a", a.last_opid, 0, ()), g.now, g.ht())
    ready = g.drain("a")
    assert ready.sync_before_send and a.durable_index == a.last_index
    (resp,) = ready.messages
    assert isinstance(resp, UpdateConsensusResponse) and resp.status.last_received == a.last_opid


def test_restart_below_the_committed_configs_index_has_no_pending_config() -> None:
    """The tablet's applied index can trail cmeta's committed config after a crash: the
    config from cmeta is still the committed one, not a pending one."""
    g = Group(["a", "x"])
    config = RaftConfig.of_voters(["a", "x"], opid_index=3)
    change = entry(1, 3)
    log = [*make_log(1, 1), type(change)(OpId(1, 3), 30, OpType.CHANGE_CONFIG, None, config)]
    a = g.put("a", log, 1, term=1, config=config)
    assert a.committed_config == config and a.active_config == config
    assert not a.has_pending_config


def test_follower_commits_only_what_matches_the_leader() -> None:
    """A heartbeat whose preceding entry matches says nothing of the follower's older
    entries after it: they may be a deposed leader's, so the commit stops at the match."""
    g = Group(["a", "x"])
    a = g.put("a", make_log(1, 1, 2, 2, 2), 2, term=3)
    a.step(UpdateConsensusRequest("x", 3, "a", OpId(1, 2), 5, ()), 0, 0)
    ready = a.take_ready()
    assert a.committed_index == 2 and ready.committed == []
    (resp,) = ready.messages
    assert isinstance(resp, UpdateConsensusResponse)
    assert resp.status.last_received_current_leader == OpId(1, 2)
