"""Owns reading and recovering a WAL directory: ``read_log`` and torn-tail repair.

Each segment is read with one big read and parsed in memory (``format.parse_segment``).
Damage is classified here: soft damage in the *last* segment with nothing valid after
it is a torn tail (cut away when ``repair`` is true, ignored otherwise); any other
damage raises CorruptionError naming the file and the byte offset. A segment's records
are only yielded once the whole segment has passed its checks, so a damaged segment
never yields part of its contents before failing.

Each segment header (format version 2) records the seq of the last record the log held
when the segment was made; ``check_link`` holds it against the segments before it, so a
segment deleted from the middle of the log, or records cut off the end of a non-last
segment, are corruption (the first segment's link is not checked: log GC deletes
segments at the head). Version 2 writers name a segment only once its header is
durable, so a damaged header is corruption too, unless the segment before it was
written by a version 1 writer (which could leave a torn header in its last segment).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import lz4.block

from kudusql.common.errors import CorruptionError, OperationalError
from kudusql.storage.fs import faults
from kudusql.storage.fs.files import fsync_dir
from kudusql.storage.wal.format import (
    FLAG_LZ4,
    ParsedSegment,
    SegmentHeader,
    parse_segment,
    parse_segment_name,
    segment_name,
    valid_structure_after,
)

log = logging.getLogger(__name__)


class LogRecord(NamedTuple):
    """One record as replayed from the log (a named tuple: replay makes one per record,
    and a frozen dataclass costs several times more to build)."""

    seq: int
    ts: int
    payload: bytes
    segment: str
    offset: int


def list_segments(wal_dir: str) -> list[tuple[int, str]]:
    """(number, path) of every segment file in ``wal_dir``, oldest first; [] if it is missing."""
    try:
        names = os.listdir(wal_dir)
    except FileNotFoundError:
        return []
    except OSError as e:
        raise OperationalError(f"could not list WAL directory {wal_dir}: {e.strerror or e}") from e
    found = []
    for name in names:
        number = parse_segment_name(name)
        if number is not None:
            found.append((number, os.path.join(wal_dir, name)))
    found.sort()
    return found


def read_segment_file(path: str) -> bytes:
    """The whole file, read in one go."""
    try:
        with open(path, "rb", buffering=0) as f:
            return f.read()
    except OSError as e:
        raise OperationalError(f"could not read WAL segment {path}: {e.strerror or e}") from e


def _cut_tail(path: str, offset: int) -> None:
    try:
        fd = os.open(path, os.O_RDWR)
        try:
            faults.check("write", path)
            os.ftruncate(fd, offset)
            faults.check("fsync", path)
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as e:
        raise OperationalError(
            f"could not truncate torn tail of WAL segment {path}: {e.strerror or e}"
        ) from e


def _remove_segment(path: str) -> None:
    try:
        os.unlink(path)
        fsync_dir(os.path.dirname(os.path.abspath(path)))
    except OSError as e:
        raise OperationalError(
            f"could not remove torn WAL segment {path}: {e.strerror or e}"
        ) from e


@dataclass(frozen=True, slots=True)
class Preceding:
    """What the segments before the one being read hold: the last of them (number,
    path, size, header version) and the seq of the last record the log held up to its
    end (None: no record), if ``known`` (the headers of version 1 segments do not say
    where the log started)."""

    number: int
    path: str
    size: int
    version: int
    last_seq: int | None
    known: bool


def check_link(header: SegmentHeader, path: str, number: int, prev: Preceding | None) -> None:
    """Raise CorruptionError unless the log before segment ``number`` (``prev``) ends
    where its header says it did. A version 1 header records nothing to check; the
    first segment present is not checked (GC deletes segments at the head)."""
    if not header.linked or prev is None or not prev.known:
        return
    name = os.path.basename(path)
    if header.prev_seq == prev.last_seq:
        return
    if header.prev_seq is None:
        raise CorruptionError(
            path,
            0,
            f"the segment header says no record precedes it, but earlier segments "
            f"hold records up to seq {prev.last_seq}",
        )
    if prev.last_seq is not None and header.prev_seq < prev.last_seq:
        raise CorruptionError(
            path,
            0,
            f"the segment header says the log before it ends at seq "
            f"{header.prev_seq}, but earlier segments hold seq {prev.last_seq}",
        )
    ends = "holds no record" if prev.last_seq is None else f"ends at seq {prev.last_seq}"
    if prev.number + 1 < number:
        first, last = segment_name(prev.number + 1), segment_name(number - 1)
        missing = first if prev.number + 2 == number else f"{first} to {last}"
        raise CorruptionError(
            os.path.join(os.path.dirname(path), first),
            0,
            f"segment missing: {name} says the log reached seq {header.prev_seq} before "
            f"it, but the log up to {os.path.basename(prev.path)} {ends}; {missing} "
            f"is missing (or {os.path.basename(prev.path)} was cut short)",
        )
    raise CorruptionError(
        prev.path,
        prev.size,
        f"records missing at the end of the segment: the log up to it {ends}, but the "
        f"next segment {name} says it reached seq {header.prev_seq}",
    )


@dataclass(slots=True)
class LoadedSegment:
    parsed: ParsedSegment
    data: bytes
    size: int  # size after any repair
    removed: bool  # the file was a torn, header-less last segment and has been deleted

    def preceding(self, number: int, path: str, prev: Preceding | None) -> Preceding | None:
        """``prev`` extended by this segment (unchanged if it was removed)."""
        header = self.parsed.header
        if self.removed or header is None:  # a torn last segment
            return prev
        entries = self.parsed.entries
        last_seq: int | None
        if entries:
            last_seq, known = entries[-1][1], True
        elif prev is not None and prev.known:
            last_seq, known = prev.last_seq, True
        else:  # the first segment present: where the log starts, if its header says
            last_seq, known = header.prev_seq, header.linked
        return Preceding(number, path, self.size, header.version, last_seq, known)


def load_segment(
    path: str, number: int, *, last: bool, repair: bool, prev: Preceding | None
) -> LoadedSegment:
    """Read and check one segment, cutting a torn tail if ``last`` and ``repair``."""
    data = read_segment_file(path)
    parsed = parse_segment(data, number, prev.last_seq if prev is not None else None)
    if parsed.header is not None:
        check_link(parsed.header, path, number, prev)
    if parsed.damage is None:
        return LoadedSegment(parsed, data, len(data), False)
    offset, what, hard = parsed.damage
    if parsed.header is None and not (prev is not None and prev.version == 1):
        hard = True  # a version 2 writer never leaves a named segment without its header
    if hard or not last:
        raise CorruptionError(path, offset, what)
    following = valid_structure_after(data, offset + 1)
    if following is not None:
        raise CorruptionError(path, offset, f"{what}; valid data follows at offset {following}")
    # A torn tail: the last write before a crash did not complete.
    if not repair:
        return LoadedSegment(parsed, data, len(data), False)
    dropped = len(data) - parsed.end
    if parsed.end == 0:
        log.warning(
            "removing torn WAL segment %s: %s at offset %d (%d bytes dropped)",
            path,
            what,
            offset,
            dropped,
        )
        _remove_segment(path)
        return LoadedSegment(parsed, data, 0, True)
    log.warning(
        "truncating torn tail of WAL segment %s at offset %d: %s (%d bytes dropped)",
        path,
        parsed.end,
        what,
        dropped,
    )
    _cut_tail(path, parsed.end)
    return LoadedSegment(parsed, data, parsed.end, False)


def _decompress(view: memoryview, raw_len: int, path: str, offset: int) -> bytes:
    try:
        payload: bytes = lz4.block.decompress(view, uncompressed_size=raw_len)
    except (lz4.block.LZ4BlockError, ValueError) as e:
        raise CorruptionError(path, offset, f"LZ4 payload does not decompress: {e}") from e
    if len(payload) != raw_len:
        raise CorruptionError(path, offset, "LZ4 payload has the wrong decompressed length")
    return payload


def read_log(wal_dir: str, *, repair: bool = True) -> Iterator[LogRecord]:
    """Yield every record of every segment of ``wal_dir`` in order.

    A torn tail of the last segment is cut (``repair=True``, with a warning naming the
    file and offset) or silently ignored (``repair=False``, for read-only openers). Any
    other damage, and a break in the chain of segment headers, raises CorruptionError
    naming the segment. A missing ``wal_dir`` yields nothing.
    """
    segments = list_segments(wal_dir)
    prev: Preceding | None = None
    for i, (number, path) in enumerate(segments):
        seg = load_segment(path, number, last=i == len(segments) - 1, repair=repair, prev=prev)
        prev = seg.preceding(number, path, prev)
        data = seg.data
        mv = memoryview(data)
        for offset, seq, ts, flags, raw_len, ps, pe in seg.parsed.entries:
            if flags & FLAG_LZ4:
                payload = _decompress(mv[ps:pe], raw_len, path, offset)
            else:
                payload = data[ps:pe]
            yield LogRecord(seq, ts, payload, path, offset)
