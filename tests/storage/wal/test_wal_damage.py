"""Damage to a WAL that is not a torn tail is a CorruptionError naming the segment.

Only the tail of the last segment may be cut (a write a crash interrupted, with nothing
valid after it). A segment deleted from the middle of the log, a non-last segment
truncated or zeroed (even at a record boundary), any damaged segment header, and bytes
that are not a record in the middle of the last segment are corruption, for the writer's
recovery (``read_log(repair=True)``, ``Log()``) and for a read-only reader
(``read_log(repair=False)``) alike. Segments that log GC deleted at the head of the log
are not damage, and neither are empty segments GC deleted anywhere.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from kudusql.common.errors import CorruptionError
from kudusql.storage.wal import Log, read_log
from kudusql.storage.wal.format import (
    FOOTER_SIZE,
    RECORD_HEADER_SIZE,
    encode_record_header,
    encode_segment_header_v1,
    segment_name,
)
from kudusql.storage.wal.reader import list_segments

WAL_LOGGER = "kudusql.storage.wal.reader"
PAYLOAD = 100


def payload(i: int) -> bytes:
    return (i.to_bytes(8, "little") + os.urandom(PAYLOAD))[:PAYLOAD]


ITEMS = [(i, 10 * i, payload(i)) for i in range(1, 43)]


def build(d: Path) -> list[Path]:
    """A closed log of ITEMS over several segments, written in two sessions (so the
    second session's first segment follows a segment it did not write)."""
    for part in (ITEMS[:20], ITEMS[20:]):
        log = Log(str(d), segment_size=1024)
        for item in part:
            log.append(*item)
        log.close()
    segs = sorted(d.glob("wal-*.log"))
    assert len(segs) >= 5 and len(record_ends(segs[-1])) >= 3
    return segs


def records(d: Path, *, repair: bool) -> list[tuple[int, int, bytes]]:
    return [(r.seq, r.ts, r.payload) for r in read_log(str(d), repair=repair)]


def truncate(p: Path, size: int) -> None:
    p.write_bytes(p.read_bytes()[:size])


def zero(p: Path) -> None:
    p.write_bytes(bytes(p.stat().st_size))


def record_ends(p: Path) -> list[int]:
    """Offsets just past each record of segment ``p`` (its footer, if any, excluded)."""
    d = p.parent
    return [
        r.offset + RECORD_HEADER_SIZE + PAYLOAD for r in read_log(str(d)) if r.segment == str(p)
    ]


def middle(segs: list[Path]) -> Path:
    return segs[len(segs) // 2]


DAMAGE: dict[str, Callable[[list[Path]], Path]] = {}


def damage(name: str) -> Callable[[Callable[[list[Path]], Path]], Callable[[list[Path]], Path]]:
    def register(fn: Callable[[list[Path]], Path]) -> Callable[[list[Path]], Path]:
        DAMAGE[name] = fn
        return fn

    return register


@damage("middle segment deleted")
def _(segs: list[Path]) -> Path:
    m = middle(segs)
    m.unlink()
    return m  # the error names the missing file


@damage("middle segment truncated at a record boundary")
def _(segs: list[Path]) -> Path:
    m = middle(segs)
    truncate(m, record_ends(m)[-2])
    return m


@damage("middle segment's footer cut off with its last record")
def _(segs: list[Path]) -> Path:
    m = middle(segs)
    truncate(m, m.stat().st_size - FOOTER_SIZE - RECORD_HEADER_SIZE - PAYLOAD)
    return m


@damage("middle segment truncated to its header")
def _(segs: list[Path]) -> Path:
    m = middle(segs)
    truncate(m, record_ends(m)[0] - RECORD_HEADER_SIZE - PAYLOAD)
    return m


@damage("middle segment truncated inside a record")
def _(segs: list[Path]) -> Path:
    m = middle(segs)
    truncate(m, record_ends(m)[-1] - 7)
    return m


@damage("middle segment truncated to nothing")
def _(segs: list[Path]) -> Path:
    m = middle(segs)
    truncate(m, 0)
    return m


@damage("middle segment zeroed")
def _(segs: list[Path]) -> Path:
    m = middle(segs)
    zero(m)
    return m


@damage("first segment zeroed")
def _(segs: list[Path]) -> Path:
    zero(segs[0])
    return segs[0]


@damage("last segment zeroed")
def _(segs: list[Path]) -> Path:
    zero(segs[-1])
    return segs[-1]


@damage("last segment truncated to nothing")
def _(segs: list[Path]) -> Path:
    truncate(segs[-1], 0)
    return segs[-1]


@damage("last segment's header cut")
def _(segs: list[Path]) -> Path:
    truncate(segs[-1], 10)
    return segs[-1]


@damage("last segment's header byte flipped")
def _(segs: list[Path]) -> Path:
    data = bytearray(segs[-1].read_bytes())
    data[14] ^= 0x01
    segs[-1].write_bytes(bytes(data))
    return segs[-1]


@damage("garbage in the middle of the last segment, valid records after it")
def _(segs: list[Path]) -> Path:
    last = segs[-1]
    data = bytearray(last.read_bytes())
    start = record_ends(last)[0]
    data[start : start + 30] = b"\x00" * 30
    last.write_bytes(bytes(data))
    return last


@damage("a record from elsewhere spliced into the last segment")
def _(segs: list[Path]) -> Path:
    last = segs[-1]
    data = last.read_bytes()
    start = record_ends(last)[0]
    body = b"foreign"
    spliced = encode_record_header(body, len(body), 0, 10**6, 1) + body
    last.write_bytes(data[:start] + spliced + data[start:])
    return last


#: Damage only reading the records finds: ``Log()`` reads a cleanly closed segment's
#: header and footer only (the tablet runs ``read_log`` first, which reads them all).
INSIDE_A_CLOSED_SEGMENT = {
    "garbage in the middle of the last segment, valid records after it",
    "a record from elsewhere spliced into the last segment",
}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_damage_is_corruption_naming_the_segment(tmp_path: Path, kind: str) -> None:
    d = tmp_path / "wal"
    segs = build(d)
    assert records(d, repair=False) == ITEMS
    victim = DAMAGE[kind](segs)
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    for repair in (False, True):
        with pytest.raises(CorruptionError) as e:
            records(d, repair=repair)
        assert e.value.path == str(victim), (repair, str(e.value))
        assert victim.name in str(e.value)
    if kind not in INSIDE_A_CLOSED_SEGMENT:
        with pytest.raises(CorruptionError) as e:
            Log(str(d), segment_size=1024)
        assert e.value.path == str(victim), str(e.value)
    after = {p.name: p.read_bytes() for p in d.iterdir()}
    assert after == before  # nothing repaired, nothing added


# -- what is not damage ----------------------------------------------------------------
def test_segments_gc_deleted_at_the_head_are_fine(tmp_path: Path) -> None:
    d = tmp_path / "wal"
    segs = build(d)
    recs = list(read_log(str(d)))
    for n in range(1, len(segs)):
        for p in segs[:n]:
            p.unlink(missing_ok=True)
        kept = {str(p) for p in segs[n:]}
        want = [(r.seq, r.ts, r.payload) for r in recs if r.segment in kept]
        assert records(d, repair=False) == want
        assert records(d, repair=True) == want
    log = Log(str(d), segment_size=1024)
    log.append(1000, 1, b"after")
    log.close()
    assert records(d, repair=False)[-1] == (1000, 1, b"after")


def test_empty_segments_deleted_anywhere_are_fine(tmp_path: Path) -> None:
    """Sessions that wrote nothing leave empty segments; GC may delete any of them."""
    d = tmp_path / "wal"
    Log(str(d)).close()
    for part in (ITEMS[:10], [], [], ITEMS[10:20], [], ITEMS[20:]):
        log = Log(str(d), segment_size=1024)
        for item in part:
            log.append(*item)
        log.close()
    empty = [p for p in sorted(d.glob("wal-*.log")) if not record_ends(p)]
    assert len(empty) >= 4
    for p in empty[:-1]:
        p.unlink()
    assert records(d, repair=False) == ITEMS
    Log(str(d)).close()
    assert records(d, repair=True) == ITEMS


def test_a_torn_tail_of_the_last_segment_is_still_cut(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A crash mid-append: the reader reads up to the tear, the writer cuts it."""
    d = tmp_path / "wal"
    log = Log(str(d), segment_size=1024)
    for item in ITEMS:
        log.append(*item)
    log.abandon()  # no footer
    last = sorted(d.glob("wal-*.log"))[-1]
    good = last.stat().st_size
    with open(last, "ab") as f:
        f.write(encode_record_header(b"x" * 50, 50, 0, 999, 1) + b"x" * 20)
    assert records(d, repair=False) == ITEMS
    assert last.stat().st_size > good
    with caplog.at_level(logging.WARNING, logger=WAL_LOGGER):
        assert records(d, repair=True) == ITEMS
    assert last.stat().st_size == good
    assert any(str(last) in r.getMessage() for r in caplog.records)


def test_a_crash_while_creating_a_segment_leaves_no_named_segment(tmp_path: Path) -> None:
    """A new segment gets its name only once its header is durable: a kill while it is
    made leaves a temporary file, which readers skip and the next writer removes."""
    d = tmp_path / "wal"
    build(d)
    number = list_segments(str(d))[-1][0] + 1
    tmp = d / (segment_name(number) + ".tmp")
    tmp.write_bytes(b"KSQLW")
    assert records(d, repair=False) == ITEMS
    log = Log(str(d), segment_size=1024)
    assert not tmp.exists()
    log.close()
    assert records(d, repair=True) == ITEMS


def _v1_segment(number: int, seqs: list[int]) -> bytes:
    out = encode_segment_header_v1(number)
    for s in seqs:
        body = f"seq {s}".encode()
        out += encode_record_header(body, len(body), 0, s, s) + body
    return out


def test_a_version_1_log_reads_and_the_first_version_2_segment_links_to_it(
    tmp_path: Path,
) -> None:
    """Version 1 segments (no link) still read; a version 2 segment written after them
    records where they end, so losing the last of them is found."""
    d = tmp_path / "wal"
    d.mkdir()
    (d / segment_name(1)).write_bytes(_v1_segment(1, [1, 2, 3]))
    (d / segment_name(2)).write_bytes(_v1_segment(2, [4, 5]))
    assert [r.seq for r in read_log(str(d), repair=False)] == [1, 2, 3, 4, 5]
    log = Log(str(d))
    log.append(6, 6, b"seq 6")
    log.close()
    assert [r.seq for r in read_log(str(d))] == [1, 2, 3, 4, 5, 6]
    (d / segment_name(2)).unlink()
    for repair in (False, True):
        with pytest.raises(CorruptionError) as e:
            list(read_log(str(d), repair=repair))
        assert e.value.path == str(d / segment_name(2))
