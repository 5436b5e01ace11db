"""The Raft core with a garbage-collected log prefix (``log_base``, ``log_gc``): a
leader that forgot entries a follower needs sends it StartTabletCopy instead and lists
it in ``peers_needing_copy``; a follower keeps up from entries past its base; a replica
restarted with a base elects, replicates and commits as before."""

from __future__ import annotations

import random

import pytest

from kudusql.consensus.messages import (
    UpdateConsensusRequest,
    UpdateConsensusResponse,
)
from kudusql.consensus.opid import OpId
from kudusql.consensus.raft_consensus import (
    ConsensusError,
    ConsensusMetadata,
    DataState,
    RaftOptions,
    RaftReplica,
)
from tests.consensus.harness import Group


def _grow(g: Group, leader: str, n: int, to: set[str]) -> None:
    for _ in range(n):
        g[leader].replicate("w", g.now, g.ht())
        g.drain(leader)
        g.sync(leader)
        g.deliver(lambda s, m: m.dest_uuid in to or s != leader)


def test_a_follower_behind_the_leaders_gc_point_needs_a_copy() -> None:
    g = Group(["a", "b", "c"])
    g.elect("a")
    _grow(g, "a", 5, {"b", "c"})
    # c stops hearing; the log goes on and the leader forgets what c lacks.
    _grow(g, "a", 10, {"b"})
    a = g["a"]
    assert a.committed_index == a.last_index == 16
    with pytest.raises(AssertionError):
        a.log_gc(a.last_index + 1)  # never beyond the committed index
    a.log_gc(12)
    assert a.first_index == 13 and a.log[0].id.index == 13 and a.last_index == 16
    assert a.peers_needing_copy() == ["c"]
    g.inbox.clear()
    g.tick("a", advance_ms=RaftOptions().heartbeat_interval_ms)
    to_c = [m for _, m in g.inbox if m.dest_uuid == "c"]
    # First a probe after the base (a peer copied since would match it)...
    assert [type(m) for m in to_c] == [UpdateConsensusRequest]
    assert to_c[0].preceding_id.index == 12 and not to_c[0].ops
    # ... then, on c's mismatch, the copy request at once.
    g.deliver(lambda s, m: m.dest_uuid == "c" or s == "c")
    assert [m.dest_uuid for m in g.copy_requests] == ["c"]
    g.inbox.clear()
    # b keeps up from the retained entries.
    _grow(g, "a", 2, {"b"})
    assert g["b"].last_index == a.last_index == 18 and a.committed_index == 18


def test_a_replica_restarted_with_a_base_elects_and_replicates() -> None:
    g = Group(["a", "b", "c"])
    g.elect("a")
    _grow(g, "a", 6, {"b", "c"})
    log = list(g["a"].log)
    # Every replica restarts with its first 4 entries GCed (in their tablets).
    base = log[3].id
    for uuid in ("a", "b", "c"):
        meta = ConsensusMetadata(g[uuid].current_term, None, g.config, g[uuid].data_state)
        g.replicas[uuid] = RaftReplica(
            uuid, meta, log[4:], 7, RaftOptions(), random.Random(uuid), g.now, log_base=base
        )
        assert g[uuid].first_index == 5 and g[uuid].last_opid == log[-1].id
    g.elect("b")
    _grow(g, "b", 3, {"a", "c"})
    assert all(g[u].last_index == g["b"].last_index for u in "abc")
    assert g["b"].committed_index == g["b"].last_index
    # A follower's answer to entries below its base: it skips what it holds.
    assert g["a"]._term_at(base.index) == base.term
    assert g["a"]._term_at(base.index - 1) == -1
    assert g["a"]._opid_at(base.index) == OpId(base.term, base.index)


def test_entries_below_a_followers_base_are_skipped_as_held() -> None:
    g = Group(["a", "b", "c"])
    g.elect("a")
    _grow(g, "a", 6, {"b", "c"})
    log = list(g["a"].log)
    meta = ConsensusMetadata(g["b"].current_term, None, g.config, g["b"].data_state)
    # b restarts holding nothing past entry 5 (its tablet holds 1 .. 5).
    b = RaftReplica("b", meta, [], 5, RaftOptions(), random.Random(1), g.now, log_base=log[4].id)
    g.replicas["b"] = b
    req = UpdateConsensusRequest("a", g["a"].current_term, "b", log[1].id, 7, tuple(log[2:7]))
    b.step(req, g.now, g.ht())
    ready = b.take_ready()
    assert [e.id for e in ready.appends] == [e.id for e in log[5:7]]
    assert b.last_opid == log[6].id and b.committed_index == 7
    (resp,) = ready.messages
    assert isinstance(resp, UpdateConsensusResponse) and resp.status.error is None


def test_a_copy_of_a_gced_log_catches_up_from_its_base() -> None:
    g = Group(["a", "b", "c"])
    g.put("c", [], 0, term=0, config=None, data_state=DataState.TOMBSTONED)
    g.elect("a")
    _grow(g, "a", 8, {"b"})
    a = g["a"]
    a.log_gc(6)
    base = OpId(a.log[0].id.term, 6) if a.log[0].id.index == 7 else None
    assert base is not None and a.first_index == 7
    g.tick("a", advance_ms=RaftOptions().heartbeat_interval_ms)
    g.deliver(lambda s, m: m.dest_uuid == "c" or s == "c")
    copies = [m for m in g.copy_requests if m.dest_uuid == "c"]
    assert copies
    g.inbox.clear()
    c = g["c"]
    c.start_tablet_copy(copies[0], g.now)
    g.drain("c")
    with pytest.raises(ConsensusError, match="consecutive"):
        c.tablet_copy_complete(a.metadata(), list(a.log[1:]), a.committed_index, g.now, base)
    c.tablet_copy_complete(a.metadata(), list(a.log), a.committed_index, g.now, base)
    ready = g.drain("c")
    assert ready.copied_log_base == base and ready.reset_applied_to == a.committed_index
    assert c.data_state is DataState.READY and c.first_index == 7
    assert c.last_opid == a.last_opid and c.committed_index == a.committed_index
    assert ready.appends == list(a.log) and ready.truncate_after == 0
    # The leader's next heartbeat probes c, which matches: the copy is not asked again,
    # and c takes the next entries from its copied log.
    g.copy_requests.clear()
    g.tick("a", advance_ms=RaftOptions().heartbeat_interval_ms)
    g.deliver()
    assert a.peers_needing_copy() == [] and g.copy_requests == []
    _grow(g, "a", 3, {"b", "c"})
    g.tick("a", advance_ms=RaftOptions().heartbeat_interval_ms)
    g.deliver()
    assert c.last_index == a.last_index == 12 and c.committed_index == a.committed_index
    assert a.peers_needing_copy() == []
