"""ConsensusLog basics: round trips of every entry kind, rolling, truncation across
segments, GC, reads from memory and disk, term_at, argument checks, a cheap sync, and
the tablet copy's atomic log."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from kudusql.common.errors import OperationalError, ProgrammingError
from kudusql.consensus.messages import OpType, ReplicateMsg
from kudusql.consensus.opid import MINIMUM_OPID, OpId
from kudusql.storage.consensus import ConsensusLog, EntriesNotInLog, write_copied_log
from kudusql.storage.consensus.format import RECORD_HEADER_SIZE, decode_body, encode_entry
from kudusql.storage.fs import faults
from tests.storage.consensus.entries import entry, run

ALL = 1 << 40


@pytest.fixture(autouse=True)
def _no_faults() -> None:
    faults.clear()


def test_encoding_round_trips_every_kind() -> None:
    for msg in [*run(3, 1, 30), ReplicateMsg(OpId(1, 2), 3, OpType.WRITE, "é" * 9)]:
        assert decode_body(encode_entry(msg)[RECORD_HEADER_SIZE:]) == msg


def test_new_log_is_empty_and_round_trips(tmp_path: Path) -> None:
    d = str(tmp_path / "log")
    with ConsensusLog.open(d) as log:
        assert log.last_opid() == MINIMUM_OPID
        assert log.entries(1, 10, ALL) == []
        log.append(run(1, 1, 20) + run(2, 21, 5))
        log.sync()
        assert log.last_opid() == OpId(2, 25)
    with ConsensusLog.open(d) as log:
        assert log.entries(1, ALL, ALL) == run(1, 1, 20) + run(2, 21, 5)
        assert log.term_at(0) == 0 and log.term_at(20) == 1 and log.term_at(21) == 2
        assert log.term_at(26) is None and log.torn_tail is None


def test_missing_log_is_not_created_unless_asked(tmp_path: Path) -> None:
    with pytest.raises(OperationalError, match="missing consensus log"):
        ConsensusLog.open(str(tmp_path / "nope"), create=False)


def test_append_refuses_gaps_and_lower_terms(tmp_path: Path) -> None:
    with ConsensusLog.open(str(tmp_path / "log")) as log:
        log.append(run(2, 1, 3))
        with pytest.raises(ProgrammingError, match="does not follow"):
            log.append(run(2, 5, 1))
        with pytest.raises(ProgrammingError, match="does not follow"):
            log.append(run(1, 4, 1))
        with pytest.raises(ProgrammingError, match="does not follow"):
            log.append([entry(2, 4), entry(2, 6)])
        assert log.last_opid() == OpId(2, 3)


def test_rolls_truncates_across_segments_and_gcs(tmp_path: Path) -> None:
    d = str(tmp_path / "log")
    with ConsensusLog.open(d, segment_size=600) as log:
        log.append(run(1, 1, 60))
        segs = log.segments()
        assert len(segs) > 5
        assert all(s.size <= 600 for s in segs)
        assert all(a.last == b.prev for a, b in itertools.pairwise(segs))
        log.truncate_after(9)
        assert log.last_opid() == OpId(1, 9) and log.synced_index == 9
        assert len(log.segments()) < len(segs)
        log.append(run(4, 10, 30))
        assert log.gc(25) > 0
        first = log.first_index
        assert 1 < first <= 25 and log.term_at(first - 1) is not None
        with pytest.raises(EntriesNotInLog):
            log.entries(first - 1, ALL, ALL)
        with pytest.raises(ProgrammingError, match="garbage-collected"):
            log.truncate_after(first - 2)
        log.sync()
    with ConsensusLog.open(d, segment_size=600) as log:
        assert log.first_index == first
        assert log.entries(first, ALL, ALL) == (run(1, 1, 9) + run(4, 10, 30))[first - 1 :]


def test_gc_keeps_the_last_segment_and_the_last_opid(tmp_path: Path) -> None:
    d = str(tmp_path / "log")
    with ConsensusLog.open(d, segment_size=300) as log:
        log.append(run(3, 1, 10))
        log.sync()
        log.gc(ALL)
        (seg,) = log.segments()
        assert log.first_index == seg.prev.index + 1 and log.last_opid() == OpId(3, 10)
    write_copied_log(d, [], OpId(3, 9))  # a copy of a source that kept no entry
    with ConsensusLog.open(d, segment_size=300) as log:
        assert log.last_opid() == OpId(3, 9) and log.first_index == 10
        assert log.term_at(9) == 3 and log.term_at(8) is None
        assert log.entries(10, ALL, ALL) == []
        log.append(run(5, 10, 2))
        assert log.last_opid() == OpId(5, 11)


def test_entries_respect_max_bytes_and_come_from_disk_past_the_cache(tmp_path: Path) -> None:
    d = str(tmp_path / "log")
    with ConsensusLog.open(d, segment_size=2000, cache_bytes=500) as log:
        want = run(2, 1, 80)
        log.append(want)
        assert log.entries(1, ALL, ALL) == want  # old ones read back from the segments
        assert len(log.entries(1, ALL, 1)) == 1  # at least one
        batch = log.entries(5, 70, 400)
        assert batch == want[4 : 4 + len(batch)] and 1 < len(batch) < 66
        assert log.entries(70, 75, ALL) == want[69:75]


def test_sync_is_free_when_nothing_changed(tmp_path: Path) -> None:
    with ConsensusLog.open(str(tmp_path / "log")) as log:
        log.append(run(1, 1, 3))
        faults.inject("fsync", path_contains="never-matches")
        log.sync()
        assert faults.hits.get("fsync") == 1
        for _ in range(5):
            log.sync()
        assert faults.hits.get("fsync") == 1


def test_copied_log_is_written_whole(tmp_path: Path) -> None:
    d = str(tmp_path / "log")
    with ConsensusLog.open(d) as log:
        log.append(run(1, 1, 5))
    write_copied_log(d, run(3, 41, 30), OpId(2, 40), segment_size=500)
    with ConsensusLog.open(d, create=False) as log:
        assert log.first_index == 41 and log.term_at(40) == 2
        assert log.entries(41, ALL, ALL) == run(3, 41, 30)


@pytest.mark.parametrize("point", ["write", "fsync", "rename"])
def test_interrupted_copy_leaves_the_old_log_or_none(tmp_path: Path, point: str) -> None:
    d = str(tmp_path / "log")
    with ConsensusLog.open(d) as log:
        log.append(run(1, 1, 5))
        log.sync()
    faults.inject(point, path_contains="copying", skip=1)
    with pytest.raises(OperationalError):
        write_copied_log(d, run(3, 41, 30), OpId(2, 40), segment_size=500)
    faults.clear()
    try:
        log = ConsensusLog.open(d, create=False)
    except OperationalError:
        return  # no log: the replica stays a tombstone
    with log:
        assert log.entries(1, ALL, ALL) == run(1, 1, 5)
