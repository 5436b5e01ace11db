"""Owns reading and recovering a WAL directory: ``read_log`` and torn-tail repair.

Each segment is read with one big read and parsed in memory (``format.parse_segment``).
Damage is classified here: soft damage in the *last* segment with nothing valid after
it is a torn tail (cut away when ``repair`` is true, ignored otherwise); any other
damage raises CorruptionError naming the file and the byte offset. A segment's records
are only yielded once the whole segment has passed its checks, so a damaged segment
never yields part of its contents before failing.
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
    parse_segment,
    parse_segment_name,
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


@dataclass(slots=True)
class LoadedSegment:
    parsed: ParsedSegment
    data: bytes
    size: int  # size after any repair
    removed: bool  # the file was a torn, header-less last segment and has been deleted


def load_segment(
    path: str, number: int, *, last: bool, repair: bool, prev_seq: int | None
) -> LoadedSegment:
    """Read and check one segment, cutting a torn tail if ``last`` and ``repair``."""
    data = read_segment_file(path)
    parsed = parse_segment(data, number, prev_seq)
    if parsed.damage is None:
        return LoadedSegment(parsed, data, len(data), False)
    offset, what, hard = parsed.damage
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
    other damage raises CorruptionError. A missing ``wal_dir`` yields nothing.
    """
    segments = list_segments(wal_dir)
    prev_seq: int | None = None
    for i, (number, path) in enumerate(segments):
        seg = load_segment(
            path, number, last=i == len(segments) - 1, repair=repair, prev_seq=prev_seq
        )
        data = seg.data
        mv = memoryview(data)
        for offset, seq, ts, flags, raw_len, ps, pe in seg.parsed.entries:
            if flags & FLAG_LZ4:
                payload = _decompress(mv[ps:pe], raw_len, path, offset)
            else:
                payload = data[ps:pe]
            yield LogRecord(seq, ts, payload, path, offset)
            prev_seq = seq
