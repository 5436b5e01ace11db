"""Exactly-once writes, atomic batches and schema changes through a replicated tablet's
log: three ``TabletReplica``s in one process (``test_tablet_replica.Group``). A retry of
an applied write is answered with its first result by the leader, by a new leader after
the old one crashed, and by a replica that rebuilt its results from its log at open; an
atomic batch with a row error applies nothing on any replica; an ALTER_SCHEMA entry
changes every replica's schema at its index. Also the WRITE payload versions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from kudusql.cluster.errors import RequestStale
from kudusql.cluster.tserver.result_tracker import RequestId, ResultTracker, RpcState
from kudusql.cluster.tserver.tablet_replica import (
    WriteOptions,
    decode_alter,
    decode_write,
    decode_write_entry,
    encode_alter,
    encode_write,
    request_key,
)
from kudusql.common.errors import NotSupportedError
from kudusql.common.schema import ColumnSchema
from kudusql.common.types import DataType
from tests.cluster.test_tablet_replica import SCHEMA, UUIDS, Group, rows_of, wait_for

ROW = pa.table({"id": pa.array([1], pa.int64()), "name": ["one"]})


@pytest.fixture
def group(tmp_path: Path) -> Iterator[Group]:
    g = Group(tmp_path, seed=3)
    try:
        yield g
    finally:
        g.close()


def test_payload_versions_round_trip() -> None:
    plain = encode_write(ROW, "insert", None)
    assert plain.startswith("1\n")  # a plain write stays version 1
    data, op, col, options = decode_write_entry(plain)
    assert data.equals(ROW) and (op, col, options) == ("insert", None, WriteOptions())
    rid = RequestId("client", 5, 3)
    v2 = encode_write(ROW, None, "op", WriteOptions(atomic=True, request_id=rid))
    assert v2.startswith("2\n")
    data, op, col, options = decode_write_entry(v2)
    assert data.equals(ROW) and (op, col) == (None, "op")
    assert options == WriteOptions(True, rid)
    assert decode_write(v2)[0].equals(ROW)
    assert decode_alter(v2) is None and decode_alter(plain) is None
    assert decode_alter(encode_alter(SCHEMA, 4)) == (SCHEMA, 4)
    with pytest.raises(NotSupportedError, match="version '9'"):
        decode_write_entry("9\nwhatever")


def test_peek_changes_nothing() -> None:
    tracker: ResultTracker[str] = ResultTracker()
    rid = RequestId("c", 2, 2)
    assert tracker.peek(rid).state is RpcState.NEW
    assert tracker.clients() == []
    tracker.track(rid, 0.0)
    assert tracker.peek(rid).state is RpcState.IN_PROGRESS
    tracker.complete(rid, "done", 0.0)
    assert tracker.peek(rid).response == "done"
    tracker.track(RequestId("c", 3, 3), 0.0)
    assert tracker.peek(rid).state is RpcState.STALE


def test_a_retry_is_answered_by_any_leader_and_after_a_restart(group: Group) -> None:
    rid = RequestId("client", 1, 1)
    leader = group.leader()
    first = leader.write(ROW, "insert", request_id=rid)
    assert first.applied == 1 and not first.errors
    assert leader.write(ROW, "insert", request_id=rid) == first  # answered, not applied
    group.converged()
    for replica in group.up:
        known = replica.results.peek(rid)
        assert known.state is RpcState.COMPLETED and known.response == first
    group.crash(leader.uuid)
    others = [u for u in UUIDS if u != leader.uuid]
    new = group.leader(others)
    assert new.uuid != leader.uuid
    assert new.write(ROW, "insert", request_id=rid) == first
    reopened = group.reopen(leader.uuid)
    rows = group.converged()
    assert rows == [{"id": 1, "name": "one"}]
    # The reopened replica either replayed the entry (its result known again) or its
    # flushed tablet already held it: then a retry there is refused, never applied.
    wait_for(lambda: reopened.applied_index >= new.applied_index or None, "the catch-up")
    if reopened.results.peek(rid).state is RpcState.COMPLETED:
        assert reopened.results.peek(rid).response == first
    else:
        assert ("client", 1) in reopened._applied_before_open
        entry = next(
            e
            for e in reopened._raft.log
            if e.payload is not None and request_key(e.payload) == ("client", 1)
        )
        result, error = reopened._apply_write(entry)
        assert result is None and isinstance(error, RequestStale)
        assert "was applied before replica" in str(error)
    # A new request of the same key is a new write: a duplicate key.
    again = group.leader().write(ROW, "insert", request_id=RequestId("client", 2, 2))
    assert [e.status for e in again.errors] == ["AlreadyPresent"]


def test_atomic_batches_and_alters_go_through_the_log(group: Group) -> None:
    leader = group.leader()
    leader.write(ROW, "insert")
    batch = pa.table({"id": pa.array([2, 1], pa.int64()), "name": ["two", "dup"]})
    rejected = leader.write(batch, "insert", atomic=True)
    assert rejected.applied == 0 and rejected.timestamp == 0
    assert [e.status for e in rejected.errors] == ["AlreadyPresent"]
    assert group.converged() == [{"id": 1, "name": "one"}]
    wider = SCHEMA.add_column(ColumnSchema("n", DataType.parse("INT")))
    leader.alter_schema(wider, 1)
    leader.write(pa.table({"id": pa.array([3], pa.int64()), "name": ["c"], "n": [7]}), "insert")
    rows = group.converged()
    assert rows[-1] == {"id": 3, "name": "c", "n": 7}
    for replica in group.up:
        assert replica.schema_version == 1 and "n" in replica.tablet.schema.names
    follower = next(r for r in group.up if r.uuid != leader.uuid)
    group.crash(follower.uuid)
    reopened = group.reopen(follower.uuid)
    group.converged()
    assert reopened.schema_version == 1 and rows_of(reopened) == rows
