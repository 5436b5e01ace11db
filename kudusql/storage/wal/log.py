"""Owns the writable WAL: appending records, rolling segments, fsync policy, group commit, GC.

A ``Log`` always writes into a segment it created itself (a new one each time it is
opened), so an old segment is never appended to. Each append hands its record to the
OS with one system call (``os.write``; ``os.writev`` for large records) before it
returns, so a record survives a killed process under every policy; durability against
power loss depends on ``FsyncPolicy``. With BATCH, fsyncs are shared: the first thread
to call ``AppendTicket.wait_durable`` becomes the leader, releases the lock, fsyncs once
for every record written so far, and wakes everyone it covered. Any IO error poisons
the log (every later call raises OperationalError) until it is reopened, because the
state of the tail is then unknown; recovery (``read_log``) sorts it out on the next
open.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import os
import struct
import threading
from dataclasses import dataclass
from types import TracebackType

import lz4.block

from kudusql.common.errors import CorruptionError, OperationalError, ProgrammingError
from kudusql.storage.fs import faults
from kudusql.storage.fs.files import fsync_dir
from kudusql.storage.wal.format import (
    FLAG_LZ4,
    FOOTER_SIZE,
    MAX_PAYLOAD,
    RECORD_HEADER_SIZE,
    SEGMENT_HEADER_SIZE,
    Footer,
    SegmentHeader,
    decode_footer,
    decode_segment_header,
    encode_footer,
    encode_record_header,
    encode_segment_header,
    parse_segment_name,
    segment_name,
)
from kudusql.storage.wal.reader import Preceding, check_link, list_segments, load_segment

# Payloads at least this big are LZ4-compressed when that saves at least 1/16 of them.
COMPRESS_THRESHOLD = 4096
DEFAULT_SEGMENT_SIZE = 8 * 1024 * 1024
#: Suffix of a segment being made (renamed to the segment's name once its header is durable).
_TMP = ".tmp"
_MIN_SEGMENT_SIZE = SEGMENT_HEADER_SIZE + RECORD_HEADER_SIZE + FOOTER_SIZE


class FsyncPolicy(enum.Enum):
    """When appended records are forced to stable storage."""

    NONE = "none"  # OS buffer cache only (Kudu's default)
    BATCH = "batch"  # fsync before acknowledging, shared by all waiters (group commit)
    ALWAYS = "always"  # fsync every append individually

    @classmethod
    def parse(cls, v: FsyncPolicy | str) -> FsyncPolicy:
        if isinstance(v, FsyncPolicy):
            return v
        if isinstance(v, str):
            with contextlib.suppress(ValueError):
                return cls(v.strip().lower())
        choices = ", ".join(p.value for p in cls)
        raise ProgrammingError(f"bad WAL fsync policy {v!r}: expected one of {choices}")


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """A snapshot of one segment's extent; ``closed`` segments will never change."""

    path: str
    first_seq: int | None
    last_seq: int | None
    min_ts: int | None
    max_ts: int | None
    size: int
    closed: bool


class _Segment:
    __slots__ = (
        "closed",
        "count",
        "first_seq",
        "last_seq",
        "max_ts",
        "min_ts",
        "number",
        "path",
        "size",
    )

    def __init__(self, number: int, path: str, size: int) -> None:
        self.number = number
        self.path = path
        self.size = size
        self.count = 0
        self.first_seq: int | None = None
        self.last_seq: int | None = None
        self.min_ts: int | None = None
        self.max_ts: int | None = None
        self.closed = False

    def note(self, seq: int, ts: int) -> None:
        if self.count == 0:
            self.first_seq = seq
            self.min_ts = self.max_ts = ts
        else:
            if ts < self.min_ts:  # type: ignore[operator]
                self.min_ts = ts
            if ts > self.max_ts:  # type: ignore[operator]
                self.max_ts = ts
        self.last_seq = seq
        self.count += 1

    def footer(self) -> Footer:
        if self.count == 0:
            return Footer(0, 0, 0, 0, 0)
        assert self.first_seq is not None and self.last_seq is not None
        assert self.min_ts is not None and self.max_ts is not None
        return Footer(self.count, self.first_seq, self.last_seq, self.min_ts, self.max_ts)

    def info(self) -> SegmentInfo:
        return SegmentInfo(
            self.path,
            self.first_seq,
            self.last_seq,
            self.min_ts,
            self.max_ts,
            self.size,
            self.closed,
        )


class AppendTicket:
    """Returned by ``Log.append``; ``wait_durable`` blocks until the record is fsynced."""

    __slots__ = ("_log", "_n")

    def __init__(self, log: Log | None, n: int) -> None:
        self._log = log
        self._n = n

    def wait_durable(self) -> None:
        """BATCH: wait for (or lead) a group fsync covering this record. Else: no-op."""
        if self._log is not None:
            self._log._wait_durable(self._n)


_DONE = AppendTicket(None, 0)


def _os_error(e: OSError) -> str:
    return str(e.strerror or e)


# Records up to this size are written as one joined buffer with ``os.write`` (copying a
# small payload costs less than ``writev``'s iovec setup); larger ones with ``writev``.
_JOIN_LIMIT = 64 * 1024


def _write_all(fd: int, header: bytes, payload: bytes, total: int) -> None:
    if total <= _JOIN_LIMIT:
        record = header + payload
        n = os.write(fd, record)
    else:
        record = b""
        n = os.writev(fd, (header, payload))
    if n != total:  # short write (rare on regular files): finish it
        rest = memoryview(record or header + payload)[n:]
        while rest:
            rest = rest[os.write(fd, rest) :]


class Log:
    """The write-ahead log of one tablet: a directory of segment files.

    Run recovery (``read_log``) before opening a Log: opening starts a new segment
    after the existing ones and only learns their extents (from their footers).
    """

    def __init__(
        self,
        wal_dir: str,
        *,
        fsync: FsyncPolicy | str = FsyncPolicy.NONE,
        segment_size: int = DEFAULT_SEGMENT_SIZE,
    ) -> None:
        self._policy = FsyncPolicy.parse(fsync)
        if segment_size < _MIN_SEGMENT_SIZE:
            raise ProgrammingError(f"WAL segment_size must be >= {_MIN_SEGMENT_SIZE} bytes")
        self._dir = wal_dir
        self._segment_size = segment_size
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._fsync_count = 0
        self._written = 0  # records appended by this Log (ticket numbers)
        self._durable = 0  # records known to be fsynced
        self._syncing = False  # a group-commit leader is in fsync (lock released)
        self._failed: OperationalError | None = None
        self._closed = False
        self._fd = -1
        try:
            os.makedirs(wal_dir, exist_ok=True)
        except OSError as e:
            raise OperationalError(
                f"could not create WAL directory {wal_dir}: {_os_error(e)}"
            ) from e
        self._last_seq: int | None = None  # the seq of the last record the log holds or held
        self._old = self._load_existing()
        self._cur = self._create_segment(self._old[-1].number + 1 if self._old else 1)

    # --- opening ----------------------------------------------------------------------

    def _quick_load(self, number: int, path: str) -> tuple[_Segment, SegmentHeader] | None:
        """A cleanly closed segment's extent from its header and footer, else None."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                size = os.fstat(fd).st_size
                header_bytes = os.pread(fd, SEGMENT_HEADER_SIZE, 0)
                header = decode_segment_header(header_bytes, number)
                if isinstance(header, str) or size < header.size + FOOTER_SIZE:
                    return None
                tail = os.pread(fd, FOOTER_SIZE, size - FOOTER_SIZE)
            finally:
                os.close(fd)
        except OSError as e:
            raise OperationalError(f"could not read WAL segment {path}: {_os_error(e)}") from e
        footer = decode_footer(tail, 0)
        if footer is None:
            return None
        seg = _Segment(number, path, size)
        seg.closed = True
        if footer.count:
            seg.count = footer.count
            seg.first_seq, seg.last_seq = footer.first_seq, footer.last_seq
            seg.min_ts, seg.max_ts = footer.min_ts, footer.max_ts
        return seg, header

    def _load_existing(self) -> list[_Segment]:
        """Every segment's extent, and the checks of ``read_log`` that need no more than
        headers and footers (a cleanly closed segment's records are not read: run
        ``read_log`` first to check them); the last one, if its writer died, repaired."""
        self._remove_temporary_files()
        found = list_segments(self._dir)
        segs: list[_Segment] = []
        prev: Preceding | None = None
        for i, (number, path) in enumerate(found):
            quick = self._quick_load(number, path)
            if quick is not None:
                seg, header = quick
                check_link(header, path, number, prev)
                prev_seq = prev.last_seq if prev is not None else None
                if seg.first_seq is not None and prev_seq is not None and seg.first_seq <= prev_seq:
                    raise CorruptionError(
                        path,
                        header.size,
                        f"seq went backwards ({seg.first_seq} after {prev_seq})",
                    )
                last: int | None
                if seg.last_seq is not None:
                    last, known = seg.last_seq, True
                elif prev is not None and prev.known:
                    last, known = prev.last_seq, True
                else:
                    last, known = header.prev_seq, header.linked
                prev = Preceding(number, path, seg.size, header.version, last, known)
            else:
                # Not closed cleanly (the process died while it was current): check it
                # fully, cut a torn tail if it is the last one, and make it durable
                # before a newer segment exists (a non-last segment must never be torn).
                loaded = load_segment(
                    path, number, last=i == len(found) - 1, repair=True, prev=prev
                )
                prev = loaded.preceding(number, path, prev)
                if loaded.removed:
                    continue
                seg = _Segment(number, path, loaded.size)
                for _off, seq, ts, *_ in loaded.parsed.entries:
                    seg.note(seq, ts)
                seg.closed = True  # never written again, footer or not
                self._fsync_path(path)
            segs.append(seg)
        # where the log ends, even when GC left only empty segments (their headers say)
        self._last_seq = prev.last_seq if prev is not None else None
        return segs

    def _remove_temporary_files(self) -> None:
        """Delete segments a crash left half made (``<segment name>.tmp``: never read)."""
        try:
            names = os.listdir(self._dir)
        except OSError as e:
            raise OperationalError(
                f"could not list WAL directory {self._dir}: {_os_error(e)}"
            ) from e
        for name in names:
            if name.endswith(_TMP) and parse_segment_name(name[: -len(_TMP)]) is not None:
                try:
                    os.unlink(os.path.join(self._dir, name))
                except OSError as e:
                    raise OperationalError(
                        f"could not remove {os.path.join(self._dir, name)}: {_os_error(e)}"
                    ) from e

    def _fsync_path(self, path: str) -> None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                faults.check("fsync", path)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            raise OperationalError(f"could not fsync WAL segment {path}: {_os_error(e)}") from e
        self._fsync_count += 1

    def _create_segment(self, number: int) -> _Segment:
        """Make segment ``number``: its header is written and fsynced under a temporary
        name, then the file is renamed (and the directory fsynced), so a named segment
        always has its whole header. The header links it to the log before it."""
        path = os.path.join(self._dir, segment_name(number))
        tmp = path + _TMP
        header = encode_segment_header(number, self._last_seq)
        fd = -1
        try:
            if os.path.lexists(path):
                raise FileExistsError(errno.EEXIST, "segment exists", path)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
            faults.check("write", path)
            os.write(fd, header)
            faults.check("fsync", path)
            os.fsync(fd)
            faults.check("rename", path)
            os.rename(tmp, path)
            fsync_dir(self._dir)
        except OSError as e:
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            err = OperationalError(f"could not create WAL segment {path}: {_os_error(e)}")
            self._failed = err
            raise err from e
        self._fsync_count += 1
        self._fd = fd
        return _Segment(number, path, len(header))

    # --- failure handling -------------------------------------------------------------

    def _fail(self, path: str, action: str, e: OSError) -> OperationalError:
        """Poison the log after an IO error and wake every durability waiter."""
        err = OperationalError(
            f"could not {action} WAL segment {path}: {_os_error(e)}; "
            "the log is unusable until it is reopened"
        )
        self._failed = err
        self._cond.notify_all()
        return err

    def _check_usable(self) -> None:
        if self._failed is not None:
            raise OperationalError(f"WAL {self._dir} failed earlier: {self._failed}")
        if self._closed:
            raise ProgrammingError(f"WAL {self._dir} is closed")

    # --- writing ----------------------------------------------------------------------

    def append(self, seq: int, ts: int, payload: bytes) -> AppendTicket:
        """Write one record; see FsyncPolicy for when it is durable."""
        raw_len = len(payload)
        stored = payload
        flags = 0
        if raw_len >= COMPRESS_THRESHOLD:
            if raw_len > MAX_PAYLOAD:
                raise ProgrammingError(f"WAL payload of {raw_len} bytes is too large")
            packed = lz4.block.compress(payload, store_size=False)
            if len(packed) <= raw_len - (raw_len >> 4):
                stored = packed
                flags = FLAG_LZ4
        try:
            header = encode_record_header(stored, raw_len, flags, seq, ts)
        except struct.error as e:
            raise ProgrammingError(f"WAL seq {seq} or ts {ts} is not a uint64") from e
        total = RECORD_HEADER_SIZE + len(stored)
        with self._lock:
            if self._failed is not None or self._closed:
                self._check_usable()
            last = self._last_seq
            if last is not None and seq <= last:
                raise ProgrammingError(f"WAL seq must increase: {seq} after {last}")
            cur = self._cur
            if cur.count and cur.size + total + FOOTER_SIZE > self._segment_size:
                self._roll()
                cur = self._cur
            try:
                faults.check("write", cur.path)
                _write_all(self._fd, header, stored, total)
            except OSError as e:
                with contextlib.suppress(OSError):  # best effort: drop a partial record
                    os.ftruncate(self._fd, cur.size)
                raise self._fail(cur.path, "append to", e) from e
            cur.size += total
            cur.note(seq, ts)
            self._last_seq = seq
            self._written += 1
            policy = self._policy
            if policy is FsyncPolicy.NONE:
                return _DONE
            if policy is FsyncPolicy.BATCH:
                return AppendTicket(self, self._written)
            self._sync_current(cur.path, "fsync")
            return _DONE

    def _sync_current(self, path: str, action: str) -> None:
        """fsync the current segment; every record appended so far is then durable.
        Lock held."""
        try:
            faults.check("fsync", path)
            os.fsync(self._fd)
        except OSError as e:
            raise self._fail(path, action, e) from e
        self._fsync_count += 1
        self._durable = self._written

    def _wait_not_syncing(self) -> None:
        while self._syncing:
            self._cond.wait()

    def roll(self) -> None:
        """Close the current segment and start the next one now (a later ``gc`` can
        then delete every segment written so far)."""
        with self._lock:
            self._check_usable()
            if self._cur.count:
                self._roll()

    def _roll(self) -> None:
        """Close the current segment (footer + fsync) and start the next one. Lock held."""
        self._wait_not_syncing()
        self._check_usable()
        cur = self._cur
        try:
            faults.check("write", cur.path)
            os.write(self._fd, encode_footer(cur.footer()))
        except OSError as e:
            raise self._fail(cur.path, "close", e) from e
        self._sync_current(cur.path, "close")
        self._cond.notify_all()
        cur.size += FOOTER_SIZE
        cur.closed = True
        fd, self._fd = self._fd, -1
        with contextlib.suppress(OSError):
            os.close(fd)
        self._old.append(cur)
        self._cur = self._create_segment(cur.number + 1)

    def _wait_durable(self, n: int) -> None:
        with self._lock:
            while self._durable < n:
                if self._failed is not None:
                    raise OperationalError(f"WAL record not durable: {self._failed}")
                if self._syncing:
                    self._cond.wait()
                    continue
                # Become the leader: one fsync for every record written so far.
                self._syncing = True
                target = self._written
                fd, path = self._fd, self._cur.path
                error: OSError | None = None
                self._lock.release()
                try:
                    faults.check("fsync", path)
                    os.fsync(fd)
                except OSError as e:
                    error = e
                finally:
                    self._lock.acquire()
                    self._syncing = False
                self._fsync_count += 1
                if error is not None:
                    raise self._fail(path, "fsync", error) from error
                self._durable = max(self._durable, target)
                self._cond.notify_all()

    @property
    def unsynced(self) -> bool:
        """Whether a record appended by this Log may not be durable yet."""
        return self._written > self._durable

    def sync(self) -> None:
        """fsync the current segment now (everything appended so far becomes durable)."""
        with self._lock:
            self._check_usable()
            self._wait_not_syncing()
            self._check_usable()
            try:
                faults.check("fsync", self._cur.path)
                os.fsync(self._fd)
            except OSError as e:
                raise self._fail(self._cur.path, "fsync", e) from e
            self._fsync_count += 1
            self._durable = self._written
            self._cond.notify_all()

    def abandon(self) -> None:
        """Close the file as a crash would: no footer, no fsync (for crash tests)."""
        with self._lock:
            self._closed = True
            fd, self._fd = self._fd, -1
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._cond.notify_all()

    def close(self) -> None:
        """Write the footer, fsync and close the current segment. Idempotent.

        A log that failed earlier is just closed (no footer): recovery checks it.
        """
        with self._lock:
            if self._closed:
                return
            self._wait_not_syncing()
            self._closed = True
            fd, self._fd = self._fd, -1
            if fd < 0:
                return
            cur = self._cur
            try:
                if self._failed is None:
                    faults.check("write", cur.path)
                    os.write(fd, encode_footer(cur.footer()))
                    faults.check("fsync", cur.path)
                    os.fsync(fd)
                    self._fsync_count += 1
                    self._durable = self._written
                    cur.size += FOOTER_SIZE
                    cur.closed = True
            except OSError as e:
                raise self._fail(cur.path, "close", e) from e
            finally:
                with contextlib.suppress(OSError):
                    os.close(fd)
                self._cond.notify_all()

    def __enter__(self) -> Log:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- inspection and GC ------------------------------------------------------------

    def segments(self) -> list[SegmentInfo]:
        """Every segment (closed ones, then the current one), oldest first."""
        with self._lock:
            return [s.info() for s in self._old] + [self._cur.info()]

    def gc(self, durable_seq: int) -> int:
        """Delete closed segments whose records are entirely durable; returns how many.

        A record's ``seq`` is the first sequence number of a write batch, so the record
        is taken to cover every seq up to (not including) the next record's seq. A closed
        segment is deleted when the seq just before the first record that follows it is
        <= ``durable_seq`` (so no batch is dropped while only part of it is durable);
        empty segments are always deleted. The last non-empty closed segment is
        therefore kept until a later record exists. The current segment is never
        deleted.
        """
        with self._lock:
            keep: list[_Segment] = []
            deleted = 0
            old = self._old
            next_first = self._next_firsts()
            for i, s in enumerate(old):
                nxt = next_first[i]
                if s.count and (nxt is None or nxt - 1 > durable_seq):
                    keep.append(s)
                    continue
                try:
                    os.unlink(s.path)
                except FileNotFoundError:
                    pass
                except OSError as e:
                    self._old = keep + old[i:]
                    raise OperationalError(
                        f"could not delete WAL segment {s.path}: {_os_error(e)}"
                    ) from e
                deleted += 1
            self._old = keep
            if deleted:
                try:
                    fsync_dir(self._dir)
                except OSError as e:
                    raise OperationalError(
                        f"could not fsync WAL directory {self._dir}: {_os_error(e)}"
                    ) from e
            return deleted

    @property
    def size_bytes(self) -> int:
        """Total bytes of all segments."""
        with self._lock:
            return sum(s.size for s in self._old) + self._cur.size

    def _next_firsts(self) -> list[int | None]:
        """Per closed segment, the first seq recorded after it (None if none yet). A
        record's seq is its batch's first, and it covers every seq up to the next
        record's: a segment covers up to this less one. Lock held."""
        old = self._old
        next_first: list[int | None] = [None] * len(old)
        following = self._cur.first_seq
        for i in range(len(old) - 1, -1, -1):
            next_first[i] = following
            if old[i].first_seq is not None:
                following = old[i].first_seq
        return next_first

    def bytes_from(self, seq: int) -> int:
        """Bytes of the segments a replay from ``seq`` reads: the current one and every
        closed one with a record covering ``seq`` or later (what a store whose first
        event is ``seq`` anchors, as Kudu's replay size of a log anchor; ``gc`` keeps
        exactly these while ``seq`` is not durable)."""
        with self._lock:
            return self._cur.size + sum(s.size for s in self._closed_from(seq))

    def segments_from(self, seq: int) -> int:
        """How many segments ``bytes_from(seq)`` counts (the current one included)."""
        with self._lock:
            return 1 + len(self._closed_from(seq))

    def _closed_from(self, seq: int) -> list[_Segment]:
        """The closed segments with a record covering ``seq`` or later. Lock held."""
        return [
            s
            for s, nxt in zip(self._old, self._next_firsts(), strict=True)
            if s.count and (nxt is None or nxt - 1 >= seq)
        ]

    @property
    def fsync_count(self) -> int:
        """fsyncs of segment files issued by this Log (appends, group commits, rolls, ...)."""
        return self._fsync_count

    @property
    def last_seq(self) -> int | None:
        """The highest seq in the log (appended or found at open), None if it is empty."""
        return self._last_seq

    @property
    def wal_dir(self) -> str:
        return self._dir

    @property
    def policy(self) -> FsyncPolicy:
        return self._policy
