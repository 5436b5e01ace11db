"""Damage and failing disks.

A flipped byte anywhere but a torn tail is a CorruptionError naming the segment and the
offset (never skipped); a torn tail of the last segment is cut off. The cmeta file names
itself too. An append that fails on a full disk (a real tiny tmpfs, and injected ENOSPC
at each write) leaves the log usable without any of its entries, or clearly failed;
after reopening, the log holds exactly the appends that succeeded.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from kudusql.common.errors import CorruptionError, OperationalError
from kudusql.consensus.opid import OpId
from kudusql.consensus.raft_config import RaftConfig
from kudusql.consensus.raft_consensus import ConsensusMetadata, DataState
from kudusql.storage.consensus import ConsensusLog, ConsensusMetadataFile
from kudusql.storage.consensus.format import RECORD_HEADER_SIZE, SEGMENT_HEADER_SIZE
from kudusql.storage.fs import faults
from tests.storage.consensus.entries import run
from tests.support.tmpfs import small_tmpfs

ALL = 1 << 40
SEG = 800


@pytest.fixture(autouse=True)
def _no_faults() -> None:
    faults.clear()


def _make(d: str, count: int = 40) -> list[str]:
    with ConsensusLog.open(d, segment_size=SEG) as log:
        log.append(run(1, 1, count))
        log.sync()
        return [s.path for s in log.segments()]


def _flip(path: str, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x40]))


@pytest.mark.parametrize("where", ["header", "record_header", "body"])
@pytest.mark.parametrize("which", ["first", "middle", "last"])
def test_flipped_byte_is_corruption_naming_the_file(tmp_path: Path, where: str, which: str) -> None:
    d = str(tmp_path / "log")
    paths = _make(d)
    path = {"first": paths[0], "middle": paths[len(paths) // 2], "last": paths[-1]}[which]
    # The first record of the segment: valid records follow it in every segment here.
    offset = {
        "header": 13,
        "record_header": SEGMENT_HEADER_SIZE + 5,
        "body": SEGMENT_HEADER_SIZE + RECORD_HEADER_SIZE + 3,
    }[where]
    _flip(path, offset)
    with pytest.raises(CorruptionError) as e:
        ConsensusLog.open(d, segment_size=SEG)
    assert e.value.path == path and path in str(e.value)
    assert e.value.offset == (0 if where == "header" else SEGMENT_HEADER_SIZE)


def test_damaged_last_record_of_last_segment_is_a_torn_tail(tmp_path: Path) -> None:
    d = str(tmp_path / "log")
    paths = _make(d)
    with ConsensusLog.open(d, segment_size=SEG) as log:
        last = log.last_opid()
        seg = log.segments()[-1]
    size = os.path.getsize(paths[-1])
    _flip(paths[-1], size - 2)  # the last record's body
    with ConsensusLog.open(d, segment_size=SEG) as log:
        assert log.torn_tail is not None and log.torn_tail[0] == paths[-1]
        assert log.last_opid() == OpId(1, last.index - 1)
        assert seg.prev.index <= last.index - 1
        log.append(run(2, last.index, 1))  # the log goes on after the cut


@pytest.mark.parametrize("cut", [1, RECORD_HEADER_SIZE - 1, RECORD_HEADER_SIZE + 2])
def test_short_tail_is_cut(tmp_path: Path, cut: int) -> None:
    d = str(tmp_path / "log")
    paths = _make(d)
    with ConsensusLog.open(d, segment_size=SEG) as log:
        want = log.entries(1, ALL, ALL)
        log.append(run(1, len(want) + 1, 1))
        log.sync()
        end = log.segments()[-1].size
    with open(paths[-1], "r+b") as f:
        f.truncate(end - RECORD_HEADER_SIZE - 40 + cut - 1)
    with ConsensusLog.open(d, segment_size=SEG) as log:
        assert log.entries(1, ALL, ALL) == want


def test_missing_middle_segment_is_corruption(tmp_path: Path) -> None:
    d = str(tmp_path / "log")
    paths = _make(d)
    os.unlink(paths[2])
    with pytest.raises(CorruptionError, match="starts after") as e:
        ConsensusLog.open(d, segment_size=SEG)
    assert e.value.path == paths[3]


def test_truncated_earlier_segment_is_corruption(tmp_path: Path) -> None:
    d = str(tmp_path / "log")
    paths = _make(d)
    with open(paths[1], "r+b") as f:
        f.truncate(os.path.getsize(paths[1]) - 3)
    with pytest.raises(CorruptionError) as e:
        ConsensusLog.open(d, segment_size=SEG)
    assert e.value.path == paths[1]


def test_damage_read_back_from_disk_names_the_file(tmp_path: Path) -> None:
    d = str(tmp_path / "log")
    paths = _make(d)
    with ConsensusLog.open(d, segment_size=SEG, cache_bytes=100) as log:
        _flip(paths[0], SEGMENT_HEADER_SIZE + RECORD_HEADER_SIZE + 3)
        with pytest.raises(CorruptionError) as e:
            log.entries(1, 3, ALL)
        assert e.value.path == paths[0] and e.value.offset == SEGMENT_HEADER_SIZE


def test_cmeta_round_trip_and_corruption(tmp_path: Path) -> None:
    f = ConsensusMetadataFile(str(tmp_path / "cmeta"))
    assert not f.exists()
    with pytest.raises(OperationalError, match="missing"):
        f.load()
    metas = [
        ConsensusMetadata(7, "ts1", RaftConfig.of_voters(["ts1", "ts2"], 12), DataState.READY),
        ConsensusMetadata.empty(),
        ConsensusMetadata(9, None, None, DataState.TOMBSTONED, OpId(8, 41)),
        ConsensusMetadata(3, "x", RaftConfig.of_voters(["x"]), DataState.COPYING, OpId(2, 2)),
    ]
    for meta in metas:
        f.store(meta)
        assert f.load() == meta
    _flip(f.path, 30)
    with pytest.raises(CorruptionError) as e:
        f.load()
    assert e.value.path == f.path


def test_cmeta_store_failure_keeps_the_old_file(tmp_path: Path) -> None:
    f = ConsensusMetadataFile(str(tmp_path / "cmeta"))
    old = ConsensusMetadata(4, "a", RaftConfig.of_voters(["a"]), DataState.READY)
    f.store(old)
    for point in ["write", "fsync", "rename"]:
        faults.inject(point)
        with pytest.raises(OperationalError):
            f.store(ConsensusMetadata(5, None, RaftConfig.of_voters(["a"]), DataState.READY))
        faults.clear()
        assert f.load() == old


@pytest.mark.parametrize("skip", range(6))
def test_injected_enospc_undoes_the_append(tmp_path: Path, skip: int) -> None:
    d = str(tmp_path / "log")
    with ConsensusLog.open(d, segment_size=SEG) as log:
        log.append(run(1, 1, 10))
        faults.inject("write", path_contains="clog-", skip=skip, err=errno.ENOSPC)
        with pytest.raises(OperationalError, match="No space"):
            log.append(run(1, 11, 40))  # rolls several times
        faults.clear()
        assert log.last_opid() == OpId(1, 10)
        log.append(run(2, 11, 3))
        log.sync()
    with ConsensusLog.open(d, segment_size=SEG) as log:
        assert log.entries(1, ALL, ALL) == run(1, 1, 10) + run(2, 11, 3)


def test_failed_fsync_poisons_until_reopened(tmp_path: Path) -> None:
    d = str(tmp_path / "log")
    with ConsensusLog.open(d, segment_size=SEG) as log:
        log.append(run(1, 1, 5))
        faults.inject("fsync", path_contains="clog-", err=errno.EIO)
        with pytest.raises(OperationalError, match="cannot sync"):
            log.sync()
        faults.clear()
        with pytest.raises(OperationalError, match="failed earlier"):
            log.append(run(1, 6, 1))
    with ConsensusLog.open(d, segment_size=SEG) as log:
        assert log.last_opid().index <= 5


def test_full_disk_on_a_tiny_tmpfs(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "mnt", "256k") as mnt:
        d = str(mnt / "log")
        ok: list = []
        failed = 0
        with ConsensusLog.open(d, segment_size=64 * 1024) as log:
            index, term = 1, 1
            while failed < 3:
                batch = run(term, index, 20, size=900)
                try:
                    log.append(batch)
                    log.sync()
                except OperationalError as e:
                    assert "No space" in str(e) or "failed earlier" in str(e)
                    failed += 1
                    if "failed earlier" in str(e):
                        break
                    assert log.last_opid().index == index - 1  # nothing of the batch
                    continue
                ok += batch
                index += 20
        assert ok, "nothing fit"
        with ConsensusLog.open(d, segment_size=64 * 1024) as log:
            assert log.entries(1, ALL, ALL) == ok
            log.gc(ALL)  # frees space: appends work again
            log.append(run(9, len(ok) + 1, 3))
            log.sync()
