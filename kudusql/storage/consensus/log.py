"""Owns the durable Raft log of one tablet replica: ``ReplicateMsg``s in segment files.

A ``ConsensusLog`` is a directory of segments (Kudu's log segments): each starts with a
header naming the OpId just before its first entry, then checksummed records of
contiguous entries. Opening replays every segment, cuts a torn tail left by a crash off
the last one and refuses any other damage with a CorruptionError naming the file and
offset. Appends go to the last segment, which rolls once it reaches the size limit;
``truncate_after`` drops later entries from the files themselves (newest segment first,
so the files always hold a prefix of the log); ``gc`` deletes whole segments below the
caller's retention index. The recent tail is kept in memory for the leader to send; older
entries (and, after a restart, every entry until new ones come) are read back from disk.
The byte layout is in FORMAT.md.

Invariants: the segments' entries are one contiguous run of indexes with terms that never
decrease, each segment's header names the last OpId of the one before; every segment but
the last is durable in full (a roll fsyncs it before the next one is named). Any IO error
the log cannot undo poisons it: every later call raises OperationalError until reopened.
A log is used by one thread at a time (the host serializes its calls).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType

from kudusql.common.errors import CorruptionError, OperationalError, ProgrammingError
from kudusql.consensus.messages import ReplicateMsg
from kudusql.consensus.opid import MINIMUM_OPID, OpId
from kudusql.storage.consensus.format import (
    RECORD_HEADER_SIZE,
    SEGMENT_HEADER_SIZE,
    check_record_header,
    decode_body,
    encode_entry,
    encode_segment_header,
    parse_segment,
    parse_segment_name,
    segment_name,
)
from kudusql.storage.fs import faults
from kudusql.storage.fs.checksum import verify
from kudusql.storage.fs.files import fsync_dir

#: Kudu's --log_segment_size_mb default.
DEFAULT_SEGMENT_SIZE = 8 * 1024 * 1024
#: How many bytes of the newest entries stay decoded in memory for the leader to send.
DEFAULT_CACHE_BYTES = 16 * 1024 * 1024
_TMP = ".tmp"


class EntriesNotInLog(OperationalError):
    """The requested entries were garbage-collected (the leader copies the tablet instead)."""


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """One segment: the OpId before its first entry, its last OpId (``prev`` when
    empty), its size and how much of it is known durable."""

    number: int
    path: str
    prev: OpId
    last: OpId
    size: int
    synced_size: int


class _Segment:
    __slots__ = ("fd", "number", "path", "prev", "size", "synced_size")

    def __init__(self, number: int, path: str, prev: OpId, size: int) -> None:
        self.number = number
        self.path = path
        self.prev = prev
        self.size = size
        self.synced_size = size
        self.fd: int | None = None  # the write descriptor, of the last segment only


def _err(e: OSError) -> str:
    return str(e.strerror or e)


class ConsensusLog:
    """The Raft log of one replica. Use ``ConsensusLog.open``; one writer per directory."""

    def __init__(self, directory: str, segment_size: int, cache_bytes: int) -> None:
        self.directory = directory
        self._segment_size = segment_size
        self._cache_limit = cache_bytes
        self._segments: list[_Segment] = []
        #: Per entry from ``_first``: (term, segment number, record offset, record size).
        self._index: list[tuple[int, int, int, int]] = []
        self._first = 1
        self._last = MINIMUM_OPID
        #: Decoded entries ``_cache_lo`` .. last, ``_cache_bytes`` record bytes in all.
        self._cache: dict[int, ReplicateMsg] = {}
        self._cache_lo = 1
        self._cache_bytes = 0
        self._readers: dict[int, int] = {}
        self._dirty = False
        self._synced_index = 0
        self._failed: str | None = None
        #: What open cut off the last segment: (path, offset, what), None if nothing.
        self.torn_tail: tuple[str, int, str] | None = None

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: str,
        *,
        create: bool = True,
        create_after: OpId = MINIMUM_OPID,
        segment_size: int = DEFAULT_SEGMENT_SIZE,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> ConsensusLog:
        """Replay ``directory``; a missing or empty one becomes a new log whose first
        entry follows ``create_after`` when ``create``, else OperationalError."""
        if segment_size < SEGMENT_HEADER_SIZE + RECORD_HEADER_SIZE:
            raise ProgrammingError(f"consensus log segment_size too small: {segment_size}")
        log = cls(directory, segment_size, cache_bytes)
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            if not create:
                raise OperationalError(f"missing consensus log {directory}") from None
            names = []
        except OSError as e:
            raise OperationalError(f"cannot list consensus log {directory}: {_err(e)}") from e
        numbers = sorted(n for n in map(parse_segment_name, names) if n is not None)
        try:
            for name in names:
                if name.endswith(_TMP):  # a segment being made when a crash came
                    os.unlink(os.path.join(directory, name))
            if not numbers:
                if not create:
                    raise OperationalError(f"consensus log {directory} has no segment")
                os.makedirs(directory, exist_ok=True)
                log._last = create_after
                log._first = log._cache_lo = create_after.index + 1
                log._new_segment(1, create_after)
                fsync_dir(os.path.dirname(os.path.abspath(directory)))
            else:
                for i, number in enumerate(numbers):
                    log._replay(number, last=i == len(numbers) - 1)
                log._open_for_append()
                seg = log._segments[-1]
                assert seg.fd is not None
                faults.check("fsync", seg.path)
                os.fsync(seg.fd)  # what a killed writer left in the page cache
        except BaseException:
            log.close()
            raise
        log._synced_index = log._last.index
        return log

    def _replay(self, number: int, *, last: bool) -> None:
        path = os.path.join(self.directory, segment_name(number))
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise OperationalError(f"cannot read consensus log segment {path}: {_err(e)}") from e
        parsed = parse_segment(data, number)
        if parsed.prev is None:
            assert parsed.damage is not None
            raise CorruptionError(path, parsed.damage[0], parsed.damage[1])
        if self._segments:
            before = self._segments[-1]
            if number != before.number + 1 or parsed.prev != self._last:
                raise CorruptionError(
                    path,
                    0,
                    f"segment {number} starts after {parsed.prev} but the log before it "
                    f"(segment {before.number}) ends at {self._last}",
                )
        else:
            self._first = self._cache_lo = parsed.prev.index + 1
            self._last = parsed.prev
        if parsed.damage is not None:
            offset, what, hard = parsed.damage
            if hard or not last:
                raise CorruptionError(path, offset, what)
            self._cut(path, parsed.end)
            self.torn_tail = (path, offset, what)
        self._index += [(term, number, offset, size) for term, _, offset, size in parsed.records]
        if parsed.records:
            term, index, _, _ = parsed.records[-1]
            self._last = OpId(term, index)
        self._cache_lo = self._last.index + 1  # the cache holds what is appended from now
        self._segments.append(_Segment(number, path, parsed.prev, parsed.end))

    def _cut(self, path: str, size: int) -> None:
        """Cut a torn tail off the last segment, durably."""
        try:
            faults.check("write", path)
            with open(path, "r+b") as f:
                f.truncate(size)
                faults.check("fsync", path)
                os.fsync(f.fileno())
        except OSError as e:
            raise OperationalError(f"cannot cut the torn tail of {path}: {_err(e)}") from e

    def _open_for_append(self) -> None:
        seg = self._segments[-1]
        seg.fd = os.open(seg.path, os.O_WRONLY | os.O_APPEND)

    # -- state -----------------------------------------------------------------------------

    def last_opid(self) -> OpId:
        """The OpId of the last entry (the OpId before the first one if none is held)."""
        return self._last

    @property
    def first_index(self) -> int:
        """The index of the first entry the log still holds (older ones were GCed)."""
        return self._first

    @property
    def synced_index(self) -> int:
        """Every entry up to this index is durable."""
        return self._synced_index

    def term_at(self, index: int) -> int | None:
        """The term of the entry at ``index``; None when the log does not know it (GCed
        or not yet written). Index 0 has term 0."""
        if self._first <= index <= self._last.index:
            return self._index[index - self._first][0]
        if index == self._first - 1:
            return self._segments[0].prev.term
        return 0 if index == 0 else None

    def segments(self) -> list[SegmentInfo]:
        out = []
        for i, s in enumerate(self._segments):
            last = self._segments[i + 1].prev if i + 1 < len(self._segments) else self._last
            out.append(SegmentInfo(s.number, s.path, s.prev, last, s.size, s.synced_size))
        return out

    def _check(self) -> None:
        if self._failed is not None:
            raise OperationalError(
                f"consensus log {self.directory} failed earlier ({self._failed}); reopen it"
            )
        if not self._segments:
            raise ProgrammingError(f"consensus log {self.directory} is closed")

    def _remember(self, msg: ReplicateMsg, size: int) -> None:
        self._cache[msg.id.index] = msg
        self._cache_bytes += size
        while self._cache_bytes > self._cache_limit and self._cache_lo < msg.id.index:
            self._forget(self._cache_lo)
            self._cache_lo += 1

    def _forget(self, index: int) -> None:
        if self._cache.pop(index, None) is not None:
            self._cache_bytes -= self._index[index - self._first][3]

    # -- writing ---------------------------------------------------------------------------

    def append(self, entries: Sequence[ReplicateMsg]) -> None:
        """Append entries that follow the last one in index order (not yet durable:
        ``sync``). On an IO error nothing of them stays in the log (or it is poisoned)."""
        self._check()
        last = self._last
        for msg in entries:
            if msg.id.index != last.index + 1 or msg.id.term < last.term:
                raise ProgrammingError(
                    f"consensus log {self.directory}: entry {msg.id} does not follow {last}"
                )
            last = msg.id
        if not entries:
            return
        before = self._last
        try:
            self._append(entries)
        except OperationalError:
            self._undo(before)
            raise
        except OSError as e:
            self._undo(before)
            raise OperationalError(
                f"cannot append to consensus log {self.directory}: {_err(e)}"
            ) from e

    def _append(self, entries: Sequence[ReplicateMsg]) -> None:
        pending = bytearray()
        seg = self._segments[-1]
        for msg in entries:
            rec = encode_entry(msg)
            start = seg.size + len(pending)
            if start > SEGMENT_HEADER_SIZE and start + len(rec) > self._segment_size:
                self._write(seg, pending)
                pending = bytearray()
                self._roll()
                seg = self._segments[-1]
                start = seg.size
            self._index.append((msg.id.term, seg.number, start, len(rec)))
            self._last = msg.id
            self._remember(msg, len(rec))
            pending += rec
        self._write(seg, pending)

    def _write(self, seg: _Segment, data: bytearray) -> None:
        if not data:
            return
        assert seg.fd is not None
        faults.check("write", seg.path)
        self._dirty = True
        view = memoryview(data)
        while view:
            view = view[os.write(seg.fd, view) :]
        seg.size += len(data)

    def _roll(self) -> None:
        """Make the last segment durable and start the next one after it."""
        old = self._segments[-1]
        self._fsync(old)
        self._new_segment(old.number + 1, self._last)
        assert old.fd is not None
        os.close(old.fd)
        old.fd = None

    def _new_segment(self, number: int, prev: OpId) -> None:
        """Create segment ``number`` (its header durable before its name exists)."""
        path = os.path.join(self.directory, segment_name(number))
        tmp = path + _TMP
        try:
            with open(tmp, "wb") as f:
                faults.check("write", tmp)
                f.write(encode_segment_header(number, prev))
                f.flush()
                faults.check("fsync", tmp)
                os.fsync(f.fileno())
            faults.check("rename", path)
            os.replace(tmp, path)
        except OSError as e:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise OperationalError(f"cannot create consensus log segment {path}: {_err(e)}") from e
        self._segments.append(_Segment(number, path, prev, SEGMENT_HEADER_SIZE))
        self._open_for_append()
        fsync_dir(self.directory)

    def _fsync(self, seg: _Segment) -> None:
        if seg.fd is None or seg.synced_size == seg.size:
            return
        try:
            faults.check("fsync", seg.path)
            os.fsync(seg.fd)
        except OSError as e:
            # The page cache's state is unknown after a failed fsync: never retry it.
            self._failed = f"fsync of {seg.path}: {_err(e)}"
            raise OperationalError(f"cannot sync {seg.path}: {_err(e)}") from e
        seg.synced_size = seg.size

    def sync(self) -> None:
        """Make every appended entry durable (nothing to do when none was appended)."""
        self._check()
        if self._dirty:
            self._fsync(self._segments[-1])
            self._dirty = False
        self._synced_index = self._last.index

    def truncate_after(self, index: int) -> None:
        """Drop every entry after ``index``, durably (before the next append)."""
        self._check()
        if index >= self._last.index:
            return
        if index < self._first - 1:
            raise ProgrammingError(
                f"consensus log {self.directory}: cannot truncate after {index}, entries "
                f"before {self._first} were garbage-collected"
            )
        try:
            self._truncate(index)
        except OSError as e:
            self._failed = f"truncation after {index}: {_err(e)}"
            raise OperationalError(
                f"cannot truncate consensus log {self.directory}: {_err(e)}"
            ) from e
        except OperationalError as e:
            self._failed = f"truncation after {index}: {e}"
            raise

    def _undo(self, before: OpId) -> None:
        """Take a failed append back out of the files (or poison the log)."""
        try:
            self._truncate(before.index)
        except (OSError, OperationalError) as e:
            self._failed = f"append failed and could not be undone: {e}"

    def _truncate(self, index: int) -> None:
        dropped = False
        while len(self._segments) > 1 and self._segments[-1].prev.index >= index:
            seg = self._segments.pop()
            self._close_segment(seg)
            faults.check("delete", seg.path)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(seg.path)
            dropped = True
        seg = self._segments[-1]
        if index >= self._first:
            _, number, offset, size = self._index[index - self._first]
            end = offset + size if number == seg.number else SEGMENT_HEADER_SIZE
        else:
            end = SEGMENT_HEADER_SIZE
        if seg.fd is None:
            self._open_for_append()
        assert seg.fd is not None
        faults.check("write", seg.path)
        os.ftruncate(seg.fd, end)
        seg.size = end
        seg.synced_size = -1
        self._fsync(seg)
        if dropped:
            fsync_dir(self.directory)
        for i in range(max(index + 1, self._cache_lo), self._last.index + 1):
            self._forget(i)
        del self._index[index + 1 - self._first :]
        self._cache_lo = min(self._cache_lo, index + 1)
        self._last = OpId(self.term_at(index) or 0, index)
        self._dirty = False
        self._synced_index = index

    def gc(self, up_to_index: int) -> int:
        """Delete the segments whose entries all lie below ``up_to_index`` (the index up
        to which the tablet's data is durable elsewhere); never the last segment.
        Returns how many were deleted."""
        self._check()
        deleted = 0
        try:
            while len(self._segments) > 1 and self._segments[1].prev.index < up_to_index:
                seg = self._segments[0]
                faults.check("delete", seg.path)
                os.unlink(seg.path)
                self._close_segment(seg)
                self._segments.pop(0)
                new_first = self._segments[0].prev.index + 1
                for i in range(self._first, new_first):
                    self._forget(i)
                del self._index[: new_first - self._first]
                self._first = new_first
                self._cache_lo = max(self._cache_lo, new_first)
                deleted += 1
        except OSError as e:
            raise OperationalError(f"cannot delete a consensus log segment: {_err(e)}") from e
        finally:
            if deleted:
                fsync_dir(self.directory)
        return deleted

    # -- reading ---------------------------------------------------------------------------

    def entries(self, from_index: int, to_index: int, max_bytes: int) -> list[ReplicateMsg]:
        """Entries ``from_index`` .. ``to_index`` (capped at the last one) up to about
        ``max_bytes`` of records, at least one; EntriesNotInLog if GCed."""
        self._check()
        if from_index < self._first:
            raise EntriesNotInLog(
                f"consensus log {self.directory}: entry {from_index} was garbage-collected "
                f"(the log starts at {self._first})"
            )
        out: list[ReplicateMsg] = []
        total = 0
        for i in range(from_index, min(to_index, self._last.index) + 1):
            _, number, offset, size = self._index[i - self._first]
            if out and total + size > max_bytes:
                break
            msg = self._cache.get(i)
            out.append(msg if msg is not None else self._read(number, offset, size))
            total += size
        return out

    def _read(self, number: int, offset: int, size: int) -> ReplicateMsg:
        path = os.path.join(self.directory, segment_name(number))
        try:
            fd = self._readers.get(number)
            if fd is None:
                fd = self._readers[number] = os.open(path, os.O_RDONLY)
            data = os.pread(fd, size, offset)
        except OSError as e:
            raise OperationalError(f"cannot read {path}: {_err(e)}") from e
        hdr = check_record_header(data, 0)
        if isinstance(hdr, str):
            raise CorruptionError(path, offset, hdr)
        length, crc = hdr
        body = data[RECORD_HEADER_SIZE:]
        if len(body) != length:
            raise CorruptionError(path, offset, "record shorter than when it was written")
        verify(body, crc, path, offset, "record")
        try:
            return decode_body(body)
        except ValueError as e:
            raise CorruptionError(path, offset, f"undecodable entry: {e}") from e

    # -- closing ---------------------------------------------------------------------------

    def _close_segment(self, seg: _Segment) -> None:
        fd, seg.fd = seg.fd, None
        if fd is not None:
            os.close(fd)
        rfd = self._readers.pop(seg.number, None)
        if rfd is not None:
            os.close(rfd)

    def close(self) -> None:
        """Close the files (appended entries not ``sync``ed may be lost to a crash)."""
        for seg in self._segments:
            self._close_segment(seg)
        self._segments = []

    def __enter__(self) -> ConsensusLog:
        return self

    def __exit__(
        self, t: type[BaseException] | None, v: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
