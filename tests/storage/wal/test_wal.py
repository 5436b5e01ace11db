"""Tests for the write-ahead log (kudusql.storage.wal): framing, rolls, recovery, GC, fsync."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kudusql.common.errors import CorruptionError, OperationalError, ProgrammingError
from kudusql.storage.fs import faults
from kudusql.storage.wal import FsyncPolicy, Log, LogRecord, read_log
from kudusql.storage.wal.format import (
    FOOTER_SIZE,
    RECORD_HEADER_SIZE,
    SEGMENT_HEADER_SIZE,
    Footer,
    encode_footer,
    encode_record_header,
    encode_segment_header,
    encode_segment_header_v1,
    segment_name,
)

WAL_LOGGER = "kudusql.storage.wal.reader"


def payload(i: int, n: int = 100) -> bytes:
    """Payload number ``i``: ``n`` incompressible bytes that start with ``i``."""
    return (i.to_bytes(8, "little") + os.urandom(n))[:n]


def write_log(d: Path, items: list[tuple[int, int, bytes]], **kw: object) -> Log:
    log = Log(str(d), **kw)  # type: ignore[arg-type]
    for seq, ts, p in items:
        log.append(seq, ts, p)
    log.close()
    return log


def as_tuples(records: list[LogRecord]) -> list[tuple[int, int, bytes]]:
    return [(r.seq, r.ts, r.payload) for r in records]


def seg_files(d: Path) -> list[Path]:
    return sorted(d.glob("wal-*.log"))


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x40
    path.write_bytes(bytes(data))


# --- policy -----------------------------------------------------------------------------


def test_fsync_policy_parse() -> None:
    assert FsyncPolicy.parse("batch") is FsyncPolicy.BATCH
    assert FsyncPolicy.parse(" ALWAYS ") is FsyncPolicy.ALWAYS
    assert FsyncPolicy.parse(FsyncPolicy.NONE) is FsyncPolicy.NONE
    with pytest.raises(ProgrammingError):
        FsyncPolicy.parse("sometimes")
    with pytest.raises(ProgrammingError):
        FsyncPolicy.parse(3)  # type: ignore[arg-type]


# --- round trips ------------------------------------------------------------------------


def test_round_trip_across_segment_rolls(tmp_path: Path) -> None:
    items = [(i * 3 + 1, 1000 + i, payload(i, 50 + (i * 37) % 300)) for i in range(200)]
    items.append((10_000, 5000, b"x" * 20_000))  # compressible, larger than a segment
    items.append((10_001, 4000, os.urandom(9000)))  # incompressible, larger than a segment
    items.append((10_002, 6000, b""))
    log = write_log(tmp_path, items, segment_size=2048)
    recs = list(read_log(str(tmp_path)))
    assert as_tuples(recs) == items
    segs = log.segments()
    assert len(segs) > 10
    assert [s.path for s in segs] == [str(p) for p in seg_files(tmp_path)]
    assert all(s.closed for s in segs)
    assert log.size_bytes == sum(p.stat().st_size for p in seg_files(tmp_path))
    # the 20 000-byte run of "x" went to disk compressed
    assert log.size_bytes < sum(len(p) for *_, p in items)
    # every record's location is right and segment extents match their records
    for r in recs:
        with open(r.segment, "rb") as f:
            f.seek(r.offset)
            assert f.read(4) == b"KREC"
    for s in segs:
        mine = [r for r in recs if r.segment == s.path]
        if mine:
            assert (s.first_seq, s.last_seq) == (mine[0].seq, mine[-1].seq)
            assert s.min_ts == min(r.ts for r in mine)
            assert s.max_ts == max(r.ts for r in mine)
        else:
            assert s.first_seq is None and s.last_seq is None
        if s.size <= 2048:
            continue
        assert len(mine) == 1  # only a lone oversized record may exceed segment_size


def test_reopen_continues_in_new_segment(tmp_path: Path) -> None:
    d = str(tmp_path)
    first = [(i, i, payload(i)) for i in range(1, 20)]
    log1 = write_log(tmp_path, first)
    assert list(read_log(d)) and len(seg_files(tmp_path)) == 1
    log2 = Log(d)
    assert log2.last_seq == 19
    assert log2.segments()[0].closed and not log2.segments()[-1].closed
    assert (log2.segments()[0].first_seq, log2.segments()[0].last_seq) == (1, 19)
    with pytest.raises(ProgrammingError):
        log2.append(19, 0, b"seq must increase")
    second = [(i, i, payload(i)) for i in range(20, 40)]
    for item in second:
        log2.append(*item)
    log2.close()
    log2.close()  # idempotent
    assert log1.segments()[0].path != log2.segments()[-1].path
    assert len(seg_files(tmp_path)) == 2
    assert as_tuples(list(read_log(d))) == first + second
    with pytest.raises(ProgrammingError):
        log2.append(100, 0, b"closed")


def test_crash_images_recover(tmp_path: Path) -> None:
    """A copy of the directory taken while a log is open is what a process crash leaves."""
    live = tmp_path / "live"
    crash = tmp_path / "crash"
    log = Log(str(live), segment_size=1024)
    items = [(i, i, payload(i, 90)) for i in range(1, 30)]
    for item in items:
        log.append(*item)
    shutil.copytree(live, crash)
    log.close()
    # the last segment has no footer; recovery reads it, a new Log starts after it
    assert as_tuples(list(read_log(str(crash)))) == items
    log2 = Log(str(crash), segment_size=1024)
    assert all(s.closed for s in log2.segments()[:-1])
    log2.append(100, 100, b"after crash")
    log2.close()
    assert as_tuples(list(read_log(str(crash)))) == [*items, (100, 100, b"after crash")]


def test_missing_dir_yields_nothing(tmp_path: Path) -> None:
    assert list(read_log(str(tmp_path / "nope"))) == []
    assert list(read_log(str(tmp_path))) == []


def test_append_rejects_bad_arguments(tmp_path: Path) -> None:
    log = Log(str(tmp_path))
    with pytest.raises(ProgrammingError):
        log.append(-1, 0, b"")
    with pytest.raises(ProgrammingError):
        log.append(1, 2**64, b"")
    log.append(5, 0, b"")
    with pytest.raises(ProgrammingError):
        log.append(5, 0, b"")
    log.close()
    with pytest.raises(ProgrammingError):
        Log(str(tmp_path), segment_size=10)


@settings(
    max_examples=25,
    deadline=None,
    # too_slow as in every profile (tests/conftest.py): a busy machine generates slowly
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    sizes=st.lists(st.integers(0, 6000), min_size=0, max_size=30),
    segment_size=st.integers(200, 20_000),
    reopen_every=st.integers(1, 40),
)
def test_round_trip_property(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[int], segment_size: int, reopen_every: int
) -> None:
    d = str(tmp_path_factory.mktemp("wal"))
    items = [
        (i * 2, 7 * i, (bytes([i % 251]) * (s // 2)) + os.urandom(s - s // 2))
        for i, s in enumerate(sizes)
    ]
    log = Log(d, segment_size=segment_size)
    for n, item in enumerate(items):
        if n and n % reopen_every == 0:
            log.close()
            assert as_tuples(list(read_log(d))) == items[:n]
            log = Log(d, segment_size=segment_size)
        log.append(*item)
    log.close()
    assert as_tuples(list(read_log(d))) == items


# --- torn tails -------------------------------------------------------------------------


def test_torn_tail_at_every_offset(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    src = tmp_path / "src"
    items = [(i, 10 * i, payload(i, 60)) for i in range(1, 40)]
    write_log(src, items, segment_size=1024)
    recs = list(read_log(str(src)))
    last = Path(recs[-1].segment)
    assert last == seg_files(src)[-1] and len(seg_files(src)) > 1
    original = last.read_bytes()
    rec_off = recs[-1].offset
    rec_end = rec_off + RECORD_HEADER_SIZE + 60
    assert rec_end + FOOTER_SIZE == len(original)
    d = tmp_path / "d"
    for cut in range(rec_off, len(original)):
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(src, d)
        torn = d / last.name
        torn.write_bytes(original[:cut])
        # read-only openers ignore the torn tail silently and change nothing
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger=WAL_LOGGER):
            got = as_tuples(list(read_log(str(d), repair=False)))
        assert not caplog.records
        assert torn.stat().st_size == cut
        expect = items if cut >= rec_end else items[:-1]
        assert got == expect, cut
        # recovery cuts it with a warning naming the file and the offset
        with caplog.at_level(logging.WARNING, logger=WAL_LOGGER):
            assert as_tuples(list(read_log(str(d)))) == expect
        good_end = rec_end if cut >= rec_end else rec_off
        if cut in (rec_off, rec_end):
            assert not caplog.records  # a clean cut between records is not torn
        else:
            (warning,) = caplog.records
            msg = warning.getMessage()
            assert str(torn) in msg and f"offset {good_end}" in msg
        assert torn.stat().st_size == good_end
        # a reopened log appends after it cleanly
        log = Log(str(d), segment_size=1024)
        log.append(1000, 1, b"next")
        log.close()
        assert as_tuples(list(read_log(str(d)))) == [*expect, (1000, 1, b"next")]


def test_torn_segment_header_of_a_version_1_log_is_removed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A version 1 writer made a segment in place, so a crash could leave its header
    torn; after a version 1 segment such a last segment is a torn tail. (Version 2
    writers name a segment once its header is durable: see test_wal_damage.py.)"""
    (tmp_path / segment_name(1)).write_bytes(_handmade_segment(1, [1, 2, 3, 4], v1=True))
    items = [(i, i, f"seq {i}".encode()) for i in range(1, 5)]
    for content in (b"", encode_segment_header_v1(2)[:10], b"\0" * 300):
        new = tmp_path / segment_name(2)
        new.write_bytes(content)
        assert as_tuples(list(read_log(str(tmp_path), repair=False))) == items
        assert new.exists()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger=WAL_LOGGER):
            assert as_tuples(list(read_log(str(tmp_path)))) == items
        assert not new.exists()
        assert str(new) in caplog.records[0].getMessage()


def test_log_open_repairs_torn_tail_itself(tmp_path: Path) -> None:
    items = [(i, i, payload(i)) for i in range(1, 5)]
    live = Log(str(tmp_path / "live"))
    for item in items:
        live.append(*item)
    shutil.copytree(tmp_path / "live", tmp_path / "crash")
    live.close()
    seg = seg_files(tmp_path / "crash")[-1]
    with open(seg, "ab") as f:
        f.write(b"KREC\x01\x02")  # a half-written record header
    log = Log(str(tmp_path / "crash"))  # without running read_log first
    log.append(10, 10, b"z")
    log.close()
    assert as_tuples(list(read_log(str(tmp_path / "crash")))) == [*items, (10, 10, b"z")]


# --- corruption -------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["payload", "header"])
@pytest.mark.parametrize("segment", ["non-last", "last"])
def test_flipped_byte_in_record_is_corruption(tmp_path: Path, where: str, segment: str) -> None:
    items = [(i, i, payload(i, 100)) for i in range(1, 40)]
    write_log(tmp_path, items, segment_size=1024)
    recs = list(read_log(str(tmp_path)))
    last_seg = recs[-1].segment
    pool = [r for r in recs if (r.segment == last_seg) == (segment == "last")]
    victim = pool[0]  # never the final record: valid data follows it
    assert victim is not recs[-1]
    delta = RECORD_HEADER_SIZE + 50 if where == "payload" else 20
    flip(Path(victim.segment), victim.offset + delta)
    for repair in (True, False):
        with pytest.raises(CorruptionError) as ei:
            list(read_log(str(tmp_path), repair=repair))
        assert ei.value.path == victim.segment
        assert ei.value.offset == victim.offset
        assert victim.segment in str(ei.value) and str(victim.offset) in str(ei.value)


@pytest.mark.parametrize("segment", [0, -1])
@pytest.mark.parametrize("offset", [0, 9, SEGMENT_HEADER_SIZE - 1])
def test_flipped_byte_in_segment_header_is_corruption(
    tmp_path: Path, segment: int, offset: int
) -> None:
    items = [(i, i, payload(i, 100)) for i in range(1, 40)]
    write_log(tmp_path, items, segment_size=1024)
    victim = seg_files(tmp_path)[segment]
    flip(victim, offset)
    with pytest.raises(CorruptionError) as ei:
        list(read_log(str(tmp_path)))
    assert ei.value.path == str(victim) and ei.value.offset == 0
    with pytest.raises(CorruptionError):
        Log(str(tmp_path))


def test_damaged_tail_of_non_last_segment_is_corruption(tmp_path: Path) -> None:
    items = [(i, i, payload(i, 100)) for i in range(1, 40)]
    write_log(tmp_path, items, segment_size=1024)
    first = seg_files(tmp_path)[0]
    first.write_bytes(first.read_bytes()[: -FOOTER_SIZE - 3])
    with pytest.raises(CorruptionError) as ei:
        list(read_log(str(tmp_path)))
    assert ei.value.path == str(first)


def _handmade_segment(
    number: int,
    seqs: list[int],
    footer: Footer | None = None,
    *,
    prev_seq: int | None = None,
    v1: bool = False,
) -> bytes:
    out = encode_segment_header_v1(number) if v1 else encode_segment_header(number, prev_seq)
    for s in seqs:
        body = f"seq {s}".encode()
        out += encode_record_header(body, len(body), 0, s, s) + body
    if footer is not None:
        out += encode_footer(footer)
    return out


def test_seq_going_backwards_is_corruption(tmp_path: Path) -> None:
    (tmp_path / segment_name(1)).write_bytes(_handmade_segment(1, [1, 5, 9]))
    (tmp_path / segment_name(2)).write_bytes(_handmade_segment(2, [10, 12], prev_seq=9))
    assert [r.seq for r in read_log(str(tmp_path))] == [1, 5, 9, 10, 12]
    (tmp_path / segment_name(2)).write_bytes(_handmade_segment(2, [9, 12], prev_seq=9))
    with pytest.raises(CorruptionError, match="backwards") as ei:
        list(read_log(str(tmp_path)))
    assert ei.value.path == str(tmp_path / segment_name(2))
    assert ei.value.offset == SEGMENT_HEADER_SIZE
    (tmp_path / segment_name(2)).write_bytes(_handmade_segment(2, [10, 10], prev_seq=9))
    with pytest.raises(CorruptionError, match="backwards"):
        list(read_log(str(tmp_path)))


def test_footer_checks(tmp_path: Path) -> None:
    good = _handmade_segment(1, [1, 2], Footer(2, 1, 2, 1, 2))
    (tmp_path / segment_name(1)).write_bytes(good)
    assert [r.seq for r in read_log(str(tmp_path))] == [1, 2]
    (tmp_path / segment_name(1)).write_bytes(_handmade_segment(1, [1, 2], Footer(3, 1, 2, 1, 2)))
    with pytest.raises(CorruptionError, match="footer"):
        list(read_log(str(tmp_path)))
    (tmp_path / segment_name(1)).write_bytes(good + b"junk")
    with pytest.raises(CorruptionError, match="after segment footer"):
        list(read_log(str(tmp_path)))
    # a segment whose header names another segment (a renamed file)
    (tmp_path / segment_name(1)).write_bytes(_handmade_segment(7, [1]))
    with pytest.raises(CorruptionError, match="segment 7"):
        list(read_log(str(tmp_path)))


# --- GC ---------------------------------------------------------------------------------


def test_gc_deletes_only_durable_closed_segments(tmp_path: Path) -> None:
    d = str(tmp_path)
    log = Log(d, segment_size=1024)
    for i in range(1, 60):
        log.append(i, i, payload(i, 100))
    segs = log.segments()
    closed = [s for s in segs if s.closed]
    assert len(closed) >= 4 and not segs[-1].closed
    cut = closed[2].last_seq
    assert cut is not None
    assert log.gc(cut - 1) == 2  # segment 2 still holds seq == cut
    assert log.gc(cut - 1) == 0
    assert [s.path for s in log.segments()] == [s.path for s in segs[2:]]
    assert log.gc(cut) == 1
    assert log.gc(10**9) == len(closed) - 3  # every closed one; never the current one
    remaining = log.segments()
    assert len(remaining) == 1 and remaining[0].path == segs[-1].path
    assert log.size_bytes == Path(remaining[0].path).stat().st_size
    log.append(100, 100, b"still works")
    log.close()
    seqs = [r.seq for r in read_log(d)]
    assert seqs[-1] == 100
    assert seqs[0] > closed[-1].last_seq  # type: ignore[operator]
    # after reopening, the old current segment is closed, but collectable only once a
    # later record shows where its last batch ends; empty segments always are
    log2 = Log(d)
    assert log2.gc(100) == 0
    log2.append(101, 101, b"later")
    assert log2.gc(99) == 0
    assert log2.gc(100) == 1
    log2.close()
    Log(d).close()  # an empty segment
    log3 = Log(d)
    assert log3.gc(10**9) == 1  # the empty one; seq 101's segment has nothing after it
    log3.close()
    assert [r.seq for r in read_log(d)] == [101]


def test_gc_keeps_a_partly_durable_batch(tmp_path: Path) -> None:
    """A record's seq is its batch's first seq; rows seq+1.. may not be durable yet."""
    log = Log(str(tmp_path), segment_size=256)
    log.append(1, 1, payload(1, 150))  # a batch of rows 1..10
    log.append(11, 2, payload(2, 150))  # rows 11..20, rolls to a new segment
    log.append(21, 3, payload(3, 150))  # rows 21..
    assert [s.first_seq for s in log.segments()] == [1, 11, 21]
    assert log.gc(1) == 0
    assert log.gc(9) == 0
    assert log.gc(10) == 1
    assert log.gc(19) == 0
    assert log.gc(20) == 1
    assert [s.first_seq for s in log.segments()] == [21]
    log.close()


# --- fsync policies and group commit ----------------------------------------------------


def test_always_fsyncs_every_append(tmp_path: Path) -> None:
    log = Log(str(tmp_path), fsync="always")
    base = log.fsync_count
    for i in range(10):
        log.append(i, i, b"p")
    assert log.fsync_count - base == 10
    log.close()


def test_none_does_not_fsync_appends(tmp_path: Path) -> None:
    log = Log(str(tmp_path))
    base = log.fsync_count
    for i in range(50):
        log.append(i, i, b"p").wait_durable()
    assert log.fsync_count == base
    log.sync()
    assert log.fsync_count == base + 1
    log.close()


@pytest.mark.parametrize("segment_size", [8 * 1024 * 1024, 8 * 1024])
def test_group_commit(tmp_path: Path, segment_size: int) -> None:
    d = str(tmp_path)
    log = Log(d, fsync=FsyncPolicy.BATCH, segment_size=segment_size)
    base = log.fsync_count
    seq_lock = threading.Lock()
    next_seq = iter(range(1, 10**6))
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        try:
            for _ in range(200):
                with seq_lock:  # seqs are handed out in append order, as the tablet does
                    s = next(next_seq)
                    ticket = log.append(s, s, payload(s, 100))
                ticket.wait_durable()
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    assert log._durable == log._written == 800
    assert log.fsync_count - base < 800
    log.close()
    assert [r.seq for r in read_log(d)] == list(range(1, 801))


# --- IO failures ------------------------------------------------------------------------


def _enospc(*_args: object) -> int:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_failed_write_poisons_log_until_reopened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = str(tmp_path)
    log = Log(d)
    items = [(i, i, payload(i)) for i in range(1, 10)]
    for item in items:
        log.append(*item)
    current = log.segments()[-1].path
    monkeypatch.setattr(os, "writev", _enospc)
    monkeypatch.setattr(os, "write", _enospc)
    with pytest.raises(OperationalError) as ei:
        log.append(10, 10, b"lost")
    assert current in str(ei.value)
    monkeypatch.undo()
    with pytest.raises(OperationalError):
        log.append(11, 11, b"still refused")
    with pytest.raises(OperationalError):
        log.sync()
    log.close()
    assert as_tuples(list(read_log(d))) == items
    log2 = Log(d)
    log2.append(10, 10, b"works")
    log2.close()
    assert as_tuples(list(read_log(d))) == [*items, (10, 10, b"works")]


def test_closed_fd_is_operational_error(tmp_path: Path) -> None:
    d = str(tmp_path)
    log = Log(d)
    log.append(1, 1, b"a")
    # swap a read-only descriptor in under the log (closing it could let the number be reused)
    ro = os.open(os.devnull, os.O_RDONLY)
    os.dup2(ro, log._fd)
    os.close(ro)
    with pytest.raises(OperationalError, match="wal-"):
        log.append(2, 2, b"b")
    log.close()
    assert as_tuples(list(read_log(d))) == [(1, 1, b"a")]
    with Log(d) as log2:
        log2.append(2, 2, b"b")
    assert [r.seq for r in read_log(d)] == [1, 2]


def test_failed_group_fsync_fails_every_waiter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = str(tmp_path)
    log = Log(d, fsync=FsyncPolicy.BATCH)
    tickets = [log.append(i, i, payload(i)) for i in range(1, 6)]
    monkeypatch.setattr(os, "fsync", _enospc)
    for t in tickets:
        with pytest.raises(OperationalError, match="No space"):
            t.wait_durable()
    monkeypatch.undo()
    with pytest.raises(OperationalError):
        log.append(6, 6, b"x")
    log.close()
    # what reached the page cache is replayed; whether it is durable was unknown
    assert [r.seq for r in read_log(d)] == [1, 2, 3, 4, 5]
    log2 = Log(d, fsync="batch")
    log2.append(6, 6, b"x").wait_durable()
    log2.close()
    assert [r.seq for r in read_log(d)] == [1, 2, 3, 4, 5, 6]


def test_failed_always_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = Log(str(tmp_path), fsync=FsyncPolicy.ALWAYS)
    monkeypatch.setattr(os, "fsync", _enospc)
    with pytest.raises(OperationalError, match="fsync"):
        log.append(1, 1, b"x")
    monkeypatch.undo()
    with pytest.raises(OperationalError):
        log.append(2, 2, b"x")
    log.close()


@pytest.mark.parametrize("point", ["write", "fsync"])
def test_injected_faults(tmp_path: Path, point: str) -> None:
    d = str(tmp_path)
    log = Log(d, fsync=FsyncPolicy.ALWAYS, segment_size=1024)
    log.append(1, 1, b"a")
    faults.inject(point, path_contains="wal-", skip=3)
    try:
        with pytest.raises(OperationalError, match="injected") as ei:
            for i in range(2, 100):
                log.append(i, i, payload(i, 100))
        assert "wal-" in str(ei.value)
    finally:
        faults.clear()
    log.close()
    seqs = [r.seq for r in read_log(d)]
    assert seqs == list(range(1, len(seqs) + 1))
    with Log(d) as log2:
        log2.append(1000, 0, b"ok")
    assert [r.seq for r in read_log(d)] == [*seqs, 1000]


def test_bytes_from_counts_what_gc_keeps(tmp_path: Path) -> None:
    """``bytes_from(seq)`` (the WAL a store whose first event is ``seq`` anchors) counts
    exactly the segments ``gc`` keeps while ``seq`` is not durable: a record's seq is
    its batch's first, so the segment holding batch 10 (seqs 10-14) counts for a store
    that starts at 12, though its last recorded seq is 10."""
    log = Log(str(tmp_path), segment_size=200)
    for seq in (1, 5, 10, 15, 20):  # one record per segment: each append rolls
        log.append(seq, seq, b"x" * 100)
    sizes = [s.size for s in log.segments()]
    assert len(sizes) == 5 and [s.first_seq for s in log.segments()] == [1, 5, 10, 15, 20]
    for seq, first_kept in ((1, 0), (4, 0), (5, 1), (12, 2), (14, 2), (15, 3), (21, 4)):
        assert log.bytes_from(seq) == sum(sizes[first_kept:]), seq
    log.gc(11)  # 12 is the first seq not durable: the segment of batch 10 stays
    assert [s.first_seq for s in log.segments()] == [10, 15, 20]
    assert log.bytes_from(12) == log.size_bytes
    log.close()
