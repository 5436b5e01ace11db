"""Snapshot reads on replicated tablets wait for the replica's safe time: three
``TabletReplica``s in one process (the in-memory network of test_tablet_replica) show
that a follower serves a snapshot once its leader's safe time covers it, that a leader
does not answer a snapshot below its own uncommitted write (the read would not repeat),
and that a follower or a leader cut off from the majority refuses rather than answer."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from kudusql.cluster.tserver.tablet_replica import (
    NotLeaderError,
    ReplicaOptions,
    SafeTimeTimeoutError,
    TabletReplica,
    WriteTimeoutError,
)
from kudusql.common.errors import OperationalError
from kudusql.consensus.raft_consensus import RaftOptions
from tests.cluster.test_tablet_replica import Group, wait_for
from tests.support.timing import scaled

#: 100 ms heartbeats, 300 ms election timeout, a 100 ms clock error: 200 ms leases.
OPTIONS = ReplicaOptions(
    raft=RaftOptions(
        heartbeat_interval_ms=100, evict_failed_followers=False, max_clock_error_ms=100
    ),
    tick_interval_s=0.02,
    write_timeout_s=5.0,
    safe_time_timeout_s=scaled(10),
)


@pytest.fixture
def group(tmp_path: Path) -> Iterator[Group]:
    g = Group(tmp_path, seed=3, options=OPTIONS)
    try:
        yield g
    finally:
        with contextlib.suppress(OperationalError):
            g.close()


def ids_at(replica: TabletReplica, snapshot: int) -> list[int]:
    replica.wait_for_safe_time(snapshot)
    rows = replica.tablet.scan(["id"], snapshot=snapshot, ordered=True).read_all()
    return [int(v) for v in rows.column("id").to_pylist()]


def one_row(i: int) -> pa.Table:
    return pa.table({"id": pa.array([i], pa.int64()), "name": [f"n{i}"]})


def test_every_replica_serves_a_snapshot_at_an_acknowledged_write(group: Group) -> None:
    group.write(range(3))
    leader = group.leader()
    result = leader.write(one_row(7), "insert")
    # A snapshot at T sees the writes before T.
    for replica in group.up:
        assert ids_at(replica, result.timestamp + 1) == [0, 1, 2, 7]
        assert ids_at(replica, result.timestamp) == [0, 1, 2]
    # Safe time never goes back.
    safe = [r.safe_time() for r in group.up]
    assert all(s >= result.timestamp for s in safe)
    assert [r.safe_time() for r in group.up] >= safe


def test_a_leader_does_not_answer_below_its_uncommitted_write(group: Group) -> None:
    group.write(range(3))
    group.converged()
    leader = group.leader()
    followers = [r.uuid for r in group.up if r is not leader]
    group.net.cut.update(followers)
    with pytest.raises(WriteTimeoutError):
        leader.write(one_row(9), "insert", timeout_s=0.5)
    pending = leader.clock.now()
    # Its entry is appended below ``pending``, not committed: a read at ``pending`` now
    # would miss a write that may still commit at an earlier timestamp.
    with pytest.raises(SafeTimeTimeoutError, match="cannot serve a read at snapshot"):
        leader.wait_for_safe_time(pending, timeout_s=0.5)
    group.net.cut.clear()
    # Healed: the write commits (this leader's or lost to a new one's), and every
    # replica answers the same rows at ``pending``.
    answers = {tuple(ids_at(r, pending)) for r in group.up}
    assert len(answers) == 1


def test_a_cut_off_follower_refuses_a_newer_snapshot(group: Group) -> None:
    group.write(range(2))
    group.converged()
    leader = group.leader()
    follower = next(r for r in group.up if r is not leader)
    group.net.cut.add(follower.uuid)
    result = group.write_one(5)
    with pytest.raises(SafeTimeTimeoutError, match=f"replica {follower.uuid} \\(follower\\)"):
        follower.wait_for_safe_time(result + 1, timeout_s=0.5)
    group.net.cut.clear()
    assert ids_at(follower, result + 1) == [0, 1, 5]


def test_a_leader_cut_off_from_the_majority_loses_its_lease(group: Group) -> None:
    group.write(range(2))
    leader = group.leader()
    assert ids_at(leader, leader.clock.now()) == [0, 1]
    group.net.cut.add(leader.uuid)
    # Once its lease ends it serves no newer snapshot: a new leader may be writing.
    wait_for(
        lambda: _refuses(leader),
        "the cut-off leader to refuse a snapshot read",
    )
    group.net.cut.clear()


def _refuses(leader: TabletReplica) -> bool | None:
    try:
        leader.wait_for_safe_time(leader.clock.now(), timeout_s=0.05)
    except SafeTimeTimeoutError:
        return True
    return None


def test_without_room_for_a_lease_no_snapshot_is_served(tmp_path: Path) -> None:
    options = dataclasses.replace(
        OPTIONS, raft=dataclasses.replace(OPTIONS.raft, max_clock_error_ms=300)
    )
    g = Group(tmp_path, seed=4, options=options)
    try:
        g.write(range(1))
        leader = g.leader()
        with pytest.raises(SafeTimeTimeoutError):
            leader.wait_for_safe_time(leader.clock.now(), timeout_s=0.3)
    finally:
        with contextlib.suppress(OperationalError):
            g.close()


def test_a_read_of_the_latest_needs_the_leader_and_its_lease(group: Group) -> None:
    group.write(range(2))
    leader = group.leader()
    leader.wait_for_lease()
    follower = next(r for r in group.up if r is not leader)
    with pytest.raises(NotLeaderError, match="a read of the latest goes to the leader"):
        follower.wait_for_lease()
    # Cut off, the leader's lease ends and it stops serving its latest state (another
    # leader may be acknowledging writes it lacks).
    group.net.cut.add(leader.uuid)
    wait_for(lambda: _no_lease(leader), "the cut-off leader to refuse a read of the latest")
    group.net.cut.clear()


def _no_lease(replica: TabletReplica) -> bool | None:
    try:
        replica.wait_for_lease(timeout_s=0.05)
    except (SafeTimeTimeoutError, NotLeaderError):
        return True
    return None
