"""The database's commit log: which multi-tablet transactions committed.

A table write that spans tablets is one transaction (``Table.write``): every participant
tablet prepares its part (``storage/tablet/txn_part.py``), and the transaction commits
when its COMMIT record here is durable; only then do the participants apply their parts.
A crash before that point leaves parts that replay skips; a crash after it leaves a
COMMIT that replay honours. So a write is all or nothing across its tablets, on error
and on crash (Kudu's transaction status manager and two-phase commit, on one machine).

Records (a WAL directory, ``storage/wal``, payloads in FORMAT.md):

- BEGIN (txn id, lower bound): appended before the transaction takes its timestamp,
  which is then above the bound. A reader in another process that sees a BEGIN with no
  outcome reads below its bound, so the transaction is invisible to it however far it
  has got; one it does not see takes a timestamp above the reader's clock.
- COMMIT (txn id, timestamp, participant tablets): the commit point.
- ABORT (txn id): the transaction applied nothing (after a failed part; and at open,
  for a BEGIN whose process died).

A COMMIT is needed only until every participant holds its own proof: a FINALIZE marker
right after its part in its WAL, made durable, or (after a crash between the COMMIT and
the marker) the part flushed at the tablet's next open. ``checkpoint`` then rewrites the
log with only what is still needed, so it stays small.
"""

from __future__ import annotations

import contextlib
import struct
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from kudusql.common.errors import CorruptionError, OperationalError
from kudusql.common.hybrid_time import HybridClock, from_micros, wall_micros
from kudusql.storage.wal import AppendTicket, FsyncPolicy, Log, LogRecord, read_log

# DO NOT CHANGE: on-disk.
TXN_LOG_DIR = "txnlog"
BEGIN, COMMIT, ABORT, CHECKPOINT = 1, 2, 3, 4
_HEAD = struct.Struct("<BQ")  # kind, txn id
_BEGIN = struct.Struct("<Q")  # timestamp lower bound
_COMMIT = struct.Struct("<QI")  # timestamp, participant count; then u64 tablet ids

#: Segments roll at this size; ``checkpoint`` runs once this much was appended.
SEGMENT_BYTES = 1024 * 1024
CHECKPOINT_BYTES = 4 * SEGMENT_BYTES


class CommitOutcomeUnknown(OperationalError):
    """A COMMIT was written but not made durable: the disk decides at the next open."""


class Participant(Protocol):
    """What the commit log needs of a participant tablet: its log made durable."""

    def sync_log(self) -> None: ...


@dataclass
class TxnState:
    """What a commit log says: the committed transactions (timestamp -> participant
    tablet ids) and those begun with no outcome yet (txn id -> timestamp bound)."""

    committed: dict[int, frozenset[int]] = field(default_factory=dict)
    in_flight: dict[int, int] = field(default_factory=dict)
    next_txn_id: int = 1
    last_seq: int = 0


def _decode(rec: LogRecord, state: TxnState) -> None:
    try:
        kind, txn = _HEAD.unpack_from(rec.payload, 0)
        body = rec.payload[_HEAD.size :]
        if kind == BEGIN:
            (bound,) = _BEGIN.unpack_from(body, 0)
            state.in_flight[txn] = bound
        elif kind == COMMIT:
            ts, count = _COMMIT.unpack_from(body, 0)
            ids = struct.unpack_from(f"<{count}Q", body, _COMMIT.size)
            state.committed[ts] = frozenset(ids)
            state.in_flight.pop(txn, None)
        elif kind == ABORT:
            state.in_flight.pop(txn, None)
        elif kind != CHECKPOINT:
            raise ValueError(f"unknown record kind {kind}")
    except (struct.error, ValueError) as e:
        raise CorruptionError(rec.segment, rec.offset, f"undecodable commit record: {e}") from e
    state.next_txn_id = max(state.next_txn_id, txn + 1)
    state.last_seq = max(state.last_seq, rec.seq)


def read_state(log_dir: str, *, repair: bool = False) -> TxnState:
    """The commit log's state. A reader in another process (``repair=False``) may race
    the writer's checkpoint deleting old segments: it reads again."""
    for attempt in range(50):
        state = TxnState()
        try:
            for rec in read_log(log_dir, repair=repair):
                _decode(rec, state)
        except OperationalError:
            if repair or attempt == 49:
                raise
            time.sleep(0.005 * (attempt + 1))
            continue
        return state
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class ReadPoint:
    """What a read-only view of the database may read: snapshots below ``timestamp``
    (every transaction below it had its outcome when the view opened), and which
    transactions committed."""

    timestamp: int
    committed: frozenset[int]


def read_point(log_dir: str) -> ReadPoint:
    """The read point of a view opening now: below every transaction begun with no
    outcome, and below the clock as it was before the log was read (a transaction that
    begins after the read takes a timestamp above that)."""
    before = from_micros(wall_micros())
    state = read_state(log_dir)
    ts = min([before, *state.in_flight.values()])
    return ReadPoint(ts, frozenset(state.committed))


class TxnLog:
    """The writer's commit log (one per database directory, under its lock)."""

    def __init__(
        self,
        log_dir: str,
        clock: HybridClock,
        fsync: FsyncPolicy | str = FsyncPolicy.NONE,
        *,
        segment_bytes: int = SEGMENT_BYTES,
    ) -> None:
        self.dir = log_dir
        self.clock = clock
        self._policy = FsyncPolicy.parse(fsync)
        self._lock = threading.Lock()
        state = read_state(log_dir, repair=True)
        self._log = Log(log_dir, fsync=self._policy, segment_size=segment_bytes)
        self._seq = state.last_seq
        self._next_txn = state.next_txn_id
        #: Committed transactions whose participants have not all proved it themselves:
        #: timestamp -> participant tablet ids still to do so.
        self._open: dict[int, set[int]] = {ts: set(p) for ts, p in state.committed.items()}
        self._participants: dict[int, frozenset[int]] = dict(state.committed)
        self._in_flight: dict[int, int] = {}
        #: Tablets whose FINALIZE markers may not be durable yet (BATCH fsync policy).
        self._unsynced: dict[int, Participant] = {}
        self._since_checkpoint = 0
        for txn in state.in_flight:  # begun by a process that died before its outcome
            self._append(ABORT, txn, b"")

    # -- the protocol -------------------------------------------------------------------------
    def begin(self) -> int:
        """Start a transaction; its timestamp must be taken after this returns."""
        with self._lock:
            txn = self._next_txn
            self._next_txn += 1
            bound = self.clock.now()
            self._append(BEGIN, txn, _BEGIN.pack(bound))
            self._in_flight[txn] = bound
            return txn

    def commit(self, txn: int, ts: int, participants: Iterable[int]) -> None:
        """The commit point: COMMIT appended and durable (under the fsync policy).
        OperationalError if it may not be: the outcome is then unknown until the log
        is read again."""
        ids = sorted(set(participants))
        body = _COMMIT.pack(ts, len(ids)) + struct.pack(f"<{len(ids)}Q", *ids)
        with self._lock:
            ticket = self._append(COMMIT, txn, body)
            self._in_flight.pop(txn, None)
        try:
            ticket.wait_durable()
        except OperationalError as e:
            raise CommitOutcomeUnknown(
                f"the commit record of a write could not be made durable ({e}): whether "
                "the write is committed is known only when the database is opened again"
            ) from e
        with self._lock:
            self._open[ts] = set(ids)
            self._participants[ts] = frozenset(ids)

    def abort(self, txn: int) -> None:
        """Record that the transaction applied nothing (best effort: a BEGIN with no
        outcome is aborted at the next open anyway)."""
        with self._lock:
            self._in_flight.pop(txn, None)
            with contextlib.suppress(OperationalError, OSError):
                self._append(ABORT, txn, b"")

    def is_committed(self, ts: int) -> bool:
        """Whether the transaction at ``ts`` committed and some participant may still
        need this log's word for it."""
        return ts in self._participants

    def finalized(self, ts: int, tablet_id: int, tablet: Participant) -> None:
        """A participant logged its FINALIZE marker for ``ts``."""
        with self._lock:
            left = self._open.get(ts)
            if left is not None:
                left.discard(tablet_id)
                if self._policy is FsyncPolicy.BATCH:
                    self._unsynced[tablet_id] = tablet
            self._maybe_checkpoint()

    def tablet_opened(self, tablet_id: int) -> None:
        """A participant opened by the writer holds its own proof of every transaction
        it took part in (markers in its log, made durable by the open, or parts it
        flushed at the open)."""
        with self._lock:
            for left in self._open.values():
                left.discard(tablet_id)

    def forget_tablets(self, tablet_ids: Iterable[int]) -> None:
        """Tablets dropped with their table need no proof."""
        ids = set(tablet_ids)
        with self._lock:
            for left in self._open.values():
                left -= ids

    def pending_tablets(self) -> set[int]:
        """Participants of committed transactions that have not proved them yet."""
        with self._lock:
            return {t for left in self._open.values() for t in left}

    # -- keeping it small ---------------------------------------------------------------------
    def _maybe_checkpoint(self) -> None:
        if self._since_checkpoint >= CHECKPOINT_BYTES:
            self._checkpoint()

    def checkpoint(self) -> None:
        with self._lock:
            self._checkpoint()

    def _checkpoint(self) -> None:
        """Rewrite the log as the records still needed (lock held): BEGINs with no outcome
        and COMMITs a participant still needs; then delete every older segment."""
        for t in list(self._unsynced.values()):
            t.sync_log()
        self._unsynced.clear()
        done = [ts for ts, left in self._open.items() if not left]
        for ts in done:
            del self._open[ts]
            del self._participants[ts]
        self._log.roll()
        keep_from = self._seq
        for txn, bound in self._in_flight.items():
            self._append(BEGIN, txn, _BEGIN.pack(bound))
        for ts, ids in self._participants.items():
            body = _COMMIT.pack(ts, len(ids)) + struct.pack(f"<{len(ids)}Q", *sorted(ids))
            self._append(COMMIT, 0, body)
        # A record after the copies: every segment before the roll is then wholly older.
        self._append(CHECKPOINT, 0, b"")
        self._log.sync()
        self._log.gc(keep_from)
        self._since_checkpoint = 0

    def _append(self, kind: int, txn: int, body: bytes) -> AppendTicket:
        self._seq += 1
        payload = _HEAD.pack(kind, txn) + body
        self._since_checkpoint += len(payload)
        return self._log.append(self._seq, self.clock.peek(), payload)

    # -- lifecycle ----------------------------------------------------------------------------
    def close(self) -> None:
        """Checkpoint (the participants' logs are synced by their close) and close."""
        with self._lock:
            try:
                self._unsynced.clear()
                self._checkpoint()
            finally:
                self._log.close()

    def abandon(self) -> None:
        self._log.abandon()
