"""Tablet copy without processes: the wire form of a copy (round trip, a cut or foreign
stream refused), and the destination side on a real ``TabletReplica`` directory: a
tombstoned replica takes a copy and rebuilds its tablet from the copied log; a leader
of a term older than the tombstone's last-logged OpId is refused (the rogue-leader
rule); a copy interrupted by a crash reopens as a tombstone, and the next copy works."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

from kudusql.cluster.errors import MalformedMessage
from kudusql.cluster.tserver.tablet_copy import (
    HEADER_KEY,
    CopiedTablet,
    copy_stream,
    parse_copy,
)
from kudusql.cluster.tserver.tablet_replica import ReplicaOptions, TabletReplica
from kudusql.common.errors import OperationalError
from kudusql.consensus.messages import ConsensusMessage, StartTabletCopyRequest
from kudusql.consensus.opid import OpId
from kudusql.consensus.raft_config import RaftConfig
from kudusql.consensus.raft_consensus import ConsensusError, RaftOptions
from tests.cluster.test_tablet_replica import SCHEMA, rows_of, wait_for

OPTIONS = ReplicaOptions(raft=RaftOptions(heartbeat_interval_ms=50), tick_interval_s=0.01)


def drop(message: ConsensusMessage) -> None:
    """A transport to nowhere (the tests drive copies by hand)."""


def source(tmp_path: Path) -> TabletReplica:
    """A one-voter replica (it elects itself) holding three writes."""
    replica = TabletReplica.create(
        str(tmp_path / "src"),
        uuid="ts-a",
        tablet_id="t1",
        schema=SCHEMA,
        config=RaftConfig.of_voters(["ts-a"]),
        transport=drop,
        options=OPTIONS,
    )
    wait_for(lambda: replica.is_leader or None, "the source to lead")
    for i in range(3):
        data = pa.table({"id": pa.array([i], pa.int64()), "name": [f"n{i}"]})
        while True:
            try:
                replica.write(data, "insert", timeout_s=2.0)
                break
            except OperationalError:
                time.sleep(0.01)
    return replica


def copy_of(replica: TabletReplica) -> CopiedTablet:
    term, config, committed, entries = replica.copy_snapshot()
    return CopiedTablet(
        "t1",
        replica.uuid,
        "table-1",
        "t",
        "{}",
        SCHEMA,
        0,
        (("ts-a", "127.0.0.1:1"),),
        term,
        config,
        committed,
        tuple(entries),
    )


def test_a_copy_round_trips_and_a_cut_stream_is_refused(tmp_path: Path) -> None:
    src = source(tmp_path)
    try:
        copy = copy_of(src)
    finally:
        src.close()
    table = copy_stream(copy).read_all()
    assert parse_copy(table, "t1") == copy
    cut = table.slice(0, table.num_rows - 1)
    with pytest.raises(MalformedMessage, match="not the consecutive"):
        parse_copy(cut, "t1")
    with pytest.raises(MalformedMessage, match="sent tablet t1"):
        parse_copy(table, "t2")
    headless = table.replace_schema_metadata({})
    with pytest.raises(MalformedMessage, match="no header"):
        parse_copy(headless, "t1")
    newer = table.replace_schema_metadata(
        {HEADER_KEY: table.schema.metadata[HEADER_KEY].replace(b'"version": 1', b'"version": 9')}
    )
    with pytest.raises(MalformedMessage, match="version 9"):
        parse_copy(newer, "t1")


def tombstone(tmp_path: Path, last: OpId | None) -> TabletReplica:
    return TabletReplica.create_tombstoned(
        str(tmp_path / "dst"),
        uuid="ts-b",
        tablet_id="t1",
        schema=SCHEMA,
        last_logged_opid=last,
        transport=drop,
        options=OPTIONS,
    )


def install(dst: TabletReplica, copy: CopiedTablet, term: int, pause_s: float = 0.0) -> None:
    dst.install_copy(
        StartTabletCopyRequest("ts-a", term, "ts-b"),
        copy.current_term,
        copy.committed_config,
        copy.committed_index,
        list(copy.log),
        pause_s=pause_s,
    )


def test_a_tombstone_takes_a_copy_and_rebuilds_the_tablet(tmp_path: Path) -> None:
    src = source(tmp_path)
    try:
        copy = copy_of(src)
        expected = rows_of(src)
    finally:
        src.close()
    dst = tombstone(tmp_path, None)
    try:
        assert not dst.data_ready
        install(dst, copy, copy.current_term)
        assert dst.data_ready and dst.applied_index == copy.committed_index
        assert rows_of(dst) == expected
        assert dst.committed_config == copy.committed_config
    finally:
        dst.close()
    # The copy is durable: reopening finds the log (the tablet applies as Raft learns
    # the committed index again).
    again = TabletReplica.open(str(tmp_path / "dst"), transport=drop, options=OPTIONS)
    try:
        assert again.data_ready and again.last_opid == copy.log[-1].id
    finally:
        again.close()


def test_a_copy_from_a_rogue_leader_is_refused(tmp_path: Path) -> None:
    src = source(tmp_path)
    try:
        copy = copy_of(src)
    finally:
        src.close()
    dst = tombstone(tmp_path, OpId(copy.current_term + 1, 50))
    try:
        with pytest.raises(ConsensusError, match="INVALID_TERM"):
            install(dst, copy, copy.current_term)
        assert not dst.data_ready
    finally:
        dst.close()


def test_an_interrupted_copy_reopens_as_a_tombstone_and_the_next_one_works(
    tmp_path: Path,
) -> None:
    src = source(tmp_path)
    try:
        copy = copy_of(src)
        expected = rows_of(src)
    finally:
        src.close()
    dst = tombstone(tmp_path, None)
    failed: list[BaseException] = []

    def run() -> None:
        try:
            install(dst, copy, copy.current_term, pause_s=0.5)
        except BaseException as e:
            failed.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(0.2)  # COPYING is durable; the copied log is not installed yet
    dst.abandon()  # a crash
    thread.join()
    assert failed and isinstance(failed[0], OperationalError)
    reopened = TabletReplica.open(str(tmp_path / "dst"), transport=drop, options=OPTIONS)
    try:
        assert not reopened.data_ready and rows_of(reopened) == []
        install(reopened, copy, copy.current_term)
        assert reopened.data_ready and rows_of(reopened) == expected
    finally:
        reopened.close()
