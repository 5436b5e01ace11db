"""Tablet copy without processes: the wire form (version 2: the storage tablet's files
in chunks with sizes and CRC32s, then the consensus log after its base), and both sides
on real ``TabletReplica`` directories. A source that flushed and GCed its log copies a
tombstone that then holds exactly its rows; in a group of three, a new replica copied
from a GCed leader catches up and takes writes; a copy cut midway, or killed by a crash
midway, leaves a tombstone and the next copy works; a corrupted chunk fails the copy
naming the file; a version 1 stream and a rogue leader's copy are refused."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import tests.cluster.test_tablet_replica as trep
from kudusql.cluster.errors import MalformedMessage
from kudusql.cluster.tserver.tablet_copy import (
    CHUNK,
    DATA,
    HEADER_KEY,
    KIND,
    CopyHeader,
    CopySnapshot,
    copy_stream,
    parse_header,
    receive_copy,
)
from kudusql.cluster.tserver.tablet_replica import TabletReplica
from kudusql.consensus.messages import ConsensusMessage, StartTabletCopyRequest
from kudusql.consensus.opid import OpId
from kudusql.consensus.raft_consensus import ConsensusError
from tests.cluster.replica_gc_writer import SCHEMA, model, settled
from tests.cluster.test_replica_log_gc import GROUP_OPTIONS, SOLO_OPTIONS, _open, _write, solo
from tests.cluster.test_tablet_replica import UUIDS, Group, rows_of, wait_for
from tests.support.timing import scaled

__all__ = ["solo"]  # a fixture used here

#: Small chunks, so every file of these small tablets travels in several.
CHUNK_BYTES = 512

Tamper = Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]


def drop(message: ConsensusMessage) -> None:
    """A transport to nowhere (the tests drive copies by hand)."""


def snapshot_of(replica: TabletReplica) -> CopySnapshot:
    """What the tablet server's copy service serves for ``replica``."""
    snap = replica.copy_snapshot()
    header = CopyHeader(
        "t1",
        replica.uuid,
        "table-1",
        "t",
        "{}",
        replica.schema,
        0,
        ((replica.uuid, "127.0.0.1:1"),),
        snap.current_term,
        snap.committed_config,
        snap.committed_index,
        snap.log_base,
        snap.log_base.index + len(snap.entries),
        tuple((p, size) for p, size, _ in snap.files),
    )
    return CopySnapshot(header, tuple(snap.entries), [f for _, _, f in snap.files])


def copy(src: TabletReplica, dst: TabletReplica, tamper: Tamper | None = None) -> CopyHeader:
    """One whole tablet copy from ``src`` to ``dst`` as the tablet server runs it: the
    stream, the destination COPYING, the files staged and checked, the copy installed
    (a failure tombstones the destination and is raised)."""
    reader = copy_stream(snapshot_of(src), chunk_bytes=CHUNK_BYTES)
    header = parse_header(reader.schema, "t1")
    try:
        dst.begin_copy(StartTabletCopyRequest(src.uuid, header.current_term, dst.uuid))
    except ConsensusError:
        reader.close()
        raise
    try:
        batches: Iterable[pa.RecordBatch] = reader if tamper is None else tamper(reader)
        entries = receive_copy(header, batches, dst.copy_staging_dir)
        dst.install_copy(
            header.current_term,
            header.committed_config,
            header.committed_index,
            header.log_base,
            entries,
        )
    except Exception:
        dst.copy_failed()
        raise
    return header


def tombstone(directory: Path, uuid: str, last: OpId | None = None, **kw: object) -> TabletReplica:
    shutil.rmtree(directory, ignore_errors=True)
    return TabletReplica.create_tombstoned(
        str(directory),
        uuid=uuid,
        tablet_id="t1",
        schema=SCHEMA,
        last_logged_opid=last,
        transport=kw.pop("transport", drop),  # type: ignore[arg-type]
        options=kw.pop("options", SOLO_OPTIONS),  # type: ignore[arg-type]
    )


def gced_source(solo: str) -> TabletReplica:
    """The solo replica after 40 batches, flushed, its log GCed, 5 more batches in its
    tablet's WAL only."""
    replica = _open(solo)
    _write(replica, range(1, 41))
    replica.flush_and_gc(flush=True)
    _write(replica, range(41, 46))
    assert replica.log_first_index > 1
    return replica


def held(replica: TabletReplica) -> dict[int, str]:
    rows = {r["id"]: r["name"] for r in rows_of(replica)}
    rows.pop(-1, None)  # the progress row
    return rows


# -- the wire form ---------------------------------------------------------------------------


def test_the_stream_checks_its_header_and_its_end(solo: str, tmp_path: Path) -> None:
    src = gced_source(solo)
    try:
        table = copy_stream(snapshot_of(src), chunk_bytes=CHUNK_BYTES).read_all()
    finally:
        src.close()
    header = parse_header(table.schema, "t1")
    assert header.log_base.index == header.last_index - len(
        [k for k in table.column(KIND).to_pylist() if k == "entry"]
    )
    assert header.log_base.index > 0 and header.files
    assert header.files[0][0] == "tablet.meta"
    with pytest.raises(MalformedMessage, match="sent tablet t1"):
        parse_header(table.schema, "t2")
    with pytest.raises(MalformedMessage, match="no header"):
        parse_header(table.schema.with_metadata({}), "t1")
    raw = json.loads(table.schema.metadata[HEADER_KEY])
    for version, match in ((1, "version 1 .*older build.*upgrade"), (9, "version 9")):
        meta = {HEADER_KEY: json.dumps({**raw, "version": version}).encode()}
        with pytest.raises(MalformedMessage, match=match):
            parse_header(table.schema.with_metadata(meta), "t1")
    # A stream cut in its log, or in its files, is no copy.
    cut = table.slice(0, table.num_rows - 1).to_batches()
    with pytest.raises(MalformedMessage, match="not the consecutive"):
        receive_copy(header, cut, str(tmp_path / "a"))
    in_files = table.slice(0, 3).to_batches()
    with pytest.raises(MalformedMessage, match="ended before file"):
        receive_copy(header, in_files, str(tmp_path / "b"))


# -- a copy of a GCed source ----------------------------------------------------------------


def test_a_tombstone_copies_a_gced_source_and_holds_exactly_its_rows(
    solo: str, tmp_path: Path
) -> None:
    src = gced_source(solo)
    dst = tombstone(tmp_path / "dst", "ts-b")
    try:
        assert not dst.data_ready
        header = copy(src, dst)
        assert header.log_base.index > 0  # the GCed prefix came as tablet files
        assert dst.data_ready and dst.log_first_index == header.log_base.index + 1
        assert dst.applied_index == header.committed_index
        assert held(dst) == model(45) == held(src)
        assert dst.committed_config == src.committed_config
        assert not Path(dst.copy_staging_dir).exists()
    finally:
        src.close()
        dst.close()
    # The copy is durable: reopened, the replica holds the same rows without a leader.
    again = TabletReplica.open(str(tmp_path / "dst"), transport=drop, options=SOLO_OPTIONS)
    try:
        assert again.data_ready and held(again) == model(45)
        assert again.bootstrap_stats["entries_replayed"] == 0
    finally:
        again.close()


def _cut_after_a_chunk(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for rb in batches:
        yield rb
        if rb.column(KIND)[0].as_py() == CHUNK:
            raise ConnectionResetError("the source went away")


def _corrupt_a_chunk(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    done = False
    for rb in batches:
        if not done and rb.column(KIND)[0].as_py() == CHUNK and rb.column(DATA)[0].as_py():
            data = bytearray(rb.column(DATA)[0].as_py())
            data[len(data) // 2] ^= 0xFF
            i = rb.schema.get_field_index(DATA)
            rb = rb.set_column(i, rb.schema.field(i), pa.array([bytes(data)], pa.binary()))
            done = True
        yield rb


def test_a_cut_copy_leaves_a_tombstone_and_the_next_copy_works(solo: str, tmp_path: Path) -> None:
    src = gced_source(solo)
    dst = tombstone(tmp_path / "dst", "ts-b")
    try:
        with pytest.raises(ConnectionResetError):
            copy(src, dst, _cut_after_a_chunk)
        assert not dst.data_ready and not Path(dst.copy_staging_dir).exists()
        assert rows_of(dst) == []
        copy(src, dst)
        assert held(dst) == model(45)
    finally:
        src.close()
        dst.close()


def test_a_corrupted_chunk_fails_the_copy_naming_the_file(solo: str, tmp_path: Path) -> None:
    src = gced_source(solo)
    dst = tombstone(tmp_path / "dst", "ts-b")
    try:
        with pytest.raises(MalformedMessage, match=r"file tablet\.meta failed its checksum"):
            copy(src, dst, _corrupt_a_chunk)
        assert not dst.data_ready and rows_of(dst) == []
    finally:
        src.close()
        dst.close()


def test_a_copy_killed_midway_reopens_as_a_tombstone_and_the_next_works(
    solo: str, tmp_path: Path
) -> None:
    src = gced_source(solo)
    dst = tombstone(tmp_path / "dst", "ts-b")
    staged = threading.Event()

    def crash_midway(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for n, rb in enumerate(batches):
            if n == 6:
                staged.set()
                dst.abandon()  # a crash: COPYING is durable, some files are staged
                raise ConnectionResetError("killed")
            yield rb

    try:
        with pytest.raises(ConnectionResetError):
            copy(src, dst, crash_midway)
        assert staged.is_set()
        reopened = TabletReplica.open(str(tmp_path / "dst"), transport=drop, options=SOLO_OPTIONS)
        try:
            assert not reopened.data_ready and rows_of(reopened) == []
            assert not Path(reopened.copy_staging_dir).exists()
            copy(src, reopened)
            assert held(reopened) == model(45)
        finally:
            reopened.close()
    finally:
        src.close()


def test_a_copy_from_a_rogue_leader_is_refused(solo: str, tmp_path: Path) -> None:
    src = _open(solo)
    settled(src, scaled(20))
    dst = tombstone(tmp_path / "dst", "ts-b", OpId(src.term + 1, 50))
    try:
        with pytest.raises(ConsensusError, match="INVALID_TERM"):
            copy(src, dst)
        assert not dst.data_ready
    finally:
        src.close()
        dst.close()


# -- a new replica of a group, copied from a GCed leader -------------------------------------


@pytest.fixture
def group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Group]:
    monkeypatch.setattr(trep, "OPTIONS", GROUP_OPTIONS)
    g = Group(tmp_path, seed=5)
    try:
        yield g
    finally:
        g.close()


def test_a_new_replica_copied_from_a_gced_leader_catches_up_and_takes_writes(
    group: Group,
) -> None:
    group.write(range(0, 10))
    group.converged()
    leader = group.leader()
    new = next(u for u in UUIDS if u != leader.uuid)
    others = tuple(u for u in UUIDS if u != new)
    group.crash(new)
    for i in range(30):
        group.write(range(100 + 10 * i, 110 + 10 * i), among=list(others))
    group.converged(others)
    for u in others:
        group.net.replicas[u].flush_and_gc(flush=True)
    assert leader.log_first_index > 1 and leader.peers_needing_copy() == [new]
    # The server is replaced: an empty replica (a tombstone) with the same uuid.
    replica = tombstone(
        group.root / new, new, transport=group.net.transport(new), options=GROUP_OPTIONS
    )
    copies: list[CopyHeader] = []
    failures: list[BaseException] = []
    running = threading.Lock()

    def run(request: StartTabletCopyRequest) -> None:
        try:
            copies.append(copy(group.net.replicas[request.caller_uuid], replica))
        except BaseException as e:
            failures.append(e)
        finally:
            running.release()

    def on_copy_request(request: StartTabletCopyRequest) -> None:
        if running.acquire(blocking=False):
            threading.Thread(target=run, args=(request,), daemon=True).start()

    replica.on_copy_request = on_copy_request
    group.net.replicas[new] = replica
    wait_for(lambda: replica.data_ready or None, "the copy")
    rows = group.converged()
    group.check_acked(rows)
    assert copies and copies[0].log_base.index > 0 and copies[0].files
    assert replica.log_first_index > 1
    # It takes part in the writes that follow (a majority with either other replica).
    group.write(range(1000, 1010))
    rows = group.converged()
    group.check_acked(rows)
    assert {r["id"] for r in rows_of(replica)} == set(group.acked)
    wait_for(lambda: leader.peers_needing_copy() == [] or None, "no copy needed any more")
    assert failures == []
