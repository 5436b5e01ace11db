"""Tablet: one horizontal partition of a table, Kudu's unit of storage.

A tablet owns a MemRowSet for new rows, a list of DiskRowSets (each with its
DeltaMemStore and Delta files), an MVCC manager, its superblock and its write-ahead
log. It applies write batches with Kudu's row semantics (one timestamp per batch,
per-row errors, an optional atomic mode), logs each decided batch before applying it,
flushes the MemRowSet and DeltaMemStores while writes go on, and serves scans at any
snapshot still inside the history it keeps.

Concurrency: one writer process (the directory lock) and one writer thread at a time
(the write lock); flushes hold the lock only to freeze a store and to swap the result
in; readers never lock, they capture the current set of rowsets and filter everything
by timestamp. A read-only tablet (another process) loads the durable files and replays
the log without changing anything on disk.

Failures: a failed WAL append leaves nothing applied; a failed fsync of the log after a
batch was applied in memory marks the tablet failed, and the next write first rebuilds
it from disk (superblock + WAL), as a restart would. A failed flush leaves the frozen
MemRowSet in place, to be flushed by the next attempt.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kudusql.common.errors import (
    Error,
    IntegrityError,
    InternalError,
    OperationalError,
    ProgrammingError,
)
from kudusql.common.hybrid_time import HybridClock, describe, from_micros, to_micros
from kudusql.common.keys import encode_key
from kudusql.common.options import TabletOptions
from kudusql.common.predicates import ColumnPredicate
from kudusql.common.row_operations import (
    RowError,
    WriteOp,
    WriteResult,
    WriteShortcuts,
    atomic_rejection,
    operations,
)
from kudusql.common.row_values import rows_to_arrow
from kudusql.common.schema import Schema
from kudusql.storage.cfile import BlockCache
from kudusql.storage.fs.files import fsync_dir
from kudusql.storage.fs.lock import DirLock
from kudusql.storage.tablet import metadata
from kudusql.storage.tablet.bootstrap import (
    ReplayStats,
    TxnRecords,
    UnknownRowSetError,
    committed_records,
    replay,
)
from kudusql.storage.tablet.bulk_load import undo_for_inserts, write_bulk_rowsets
from kudusql.storage.tablet.compaction_worker import CompactionWorker, DeltaFilesJob, FlushJob
from kudusql.storage.tablet.delta import Deltas
from kudusql.storage.tablet.deltafile import write_delta_file
from kudusql.storage.tablet.deltamemstore import PendingRuns, deltas_of
from kudusql.storage.tablet.diskrowset import (
    DeltaFileMeta,
    DiskRowSet,
    RowSetMeta,
    rowset_dir,
    seed_keys,
)
from kudusql.storage.tablet.key_bounds import key_bounds
from kudusql.storage.tablet.maintenance import (
    MaintenanceManager,
    MaintenanceOp,
    MaintenanceRecord,
)
from kudusql.storage.tablet.memrowset import MemRowSet
from kudusql.storage.tablet.metadata import TabletMeta
from kudusql.storage.tablet.mvcc import MvccManager
from kudusql.storage.tablet.row_write import (
    RowBatch,
    RowPath,
    RowWrite,
    decide_rows,
)
from kudusql.storage.tablet.rowset_writer import RowSetWriteOptions
from kudusql.storage.tablet.rowsets import RowSets
from kudusql.storage.tablet.scanner import ScanPlan, scan_diskrowset, scan_memrowset
from kudusql.storage.tablet.tablet_maintenance import TabletMaintainer, delta_bytes
from kudusql.storage.tablet.tablet_mm_ops import TabletOps
from kudusql.storage.tablet.txn_part import TxnPart, prepare_part
from kudusql.storage.tablet.write_ops import PreparedBatch, assign_auto_ids, prepare
from kudusql.storage.tablet.write_path import (
    MUTATES,
    BatchWrite,
    Decisions,
    LoggedWrite,
    decide,
    row_errors,
    write_counts,
)
from kudusql.storage.wal import AppendTicket, FsyncPolicy, Log, read_log

log = logging.getLogger(__name__)

WAL_DIR = "wal"


def _never_committed(ts: int) -> bool:
    return False


def _ignore(ts: int) -> None:
    return None


class Tablet(WriteShortcuts):
    """One tablet directory: create with ``Tablet.create``, reopen with ``Tablet.open``."""

    def __init__(
        self,
        path: str,
        options: TabletOptions,
        *,
        read_only: bool = False,
        clock: HybridClock | None = None,
        cache: BlockCache | None = None,
        txn_committed: Callable[[int], bool] | None = None,
    ) -> None:
        self.path = path
        self.options = options
        self.read_only = read_only
        #: Whether the multi-tablet transaction of a timestamp committed (the database's
        #: commit log); a tablet outside a database has none, so none of its parts did.
        self.txn_committed: Callable[[int], bool] = txn_committed or _never_committed
        #: Transactions whose parts the last load applied on the commit log's word alone
        #: (no FINALIZE marker here): flushed at once, so the commit log may forget them.
        self.rolled_forward: set[int] = set()
        #: Committed transactions whose bulk-loaded rowsets are untagged in memory, not
        #: yet in a saved superblock (``txn_part.commit_part``; the next save does it).
        self._untagged: set[int] = set()
        #: Told the timestamp of a committed transaction once this tablet holds its own
        #: durable proof of it (the database then lets its commit log forget it).
        self.on_txn_proved: Callable[[int], None] = _ignore
        self.clock = clock or HybridClock()
        self.mvcc = MvccManager(self.clock)
        self.cache = cache if cache is not None else BlockCache(options.block_cache_bytes)
        self._write_lock = threading.RLock()
        # Reentrant: a table-level atomic write holds it (``exclusive``) around its writes.
        self._maint_lock = threading.RLock()
        self._held = _Healthy(self, False)
        self._held_maint = _Healthy(self, True)
        self._pool = ThreadPoolExecutor(max(1, options.threads), thread_name_prefix="tablet")
        self._closed = False
        self._failed: str | None = None
        self._lock: DirLock | None = None
        self._log: Log | None = None
        self._durable_history: list[tuple[float, int]] = []
        #: The largest ``auto_incrementing_id`` handed out (a non-unique primary key).
        self._auto_counter = 0
        self.maintainer = TabletMaintainer(self)
        self.mm_ops = TabletOps(self, self.maintainer)
        self.maintenance_log: list[MaintenanceRecord] = []
        self.maintenance: MaintenanceManager | None = None
        if not read_only:
            self._lock = DirLock(path)
            self._lock.acquire()
        try:
            self.replay_stats = self._load_retrying()
        except BaseException:
            self._release()
            raise

    #: Times a read-only open reads the superblock and log again when the writer
    #: flushed in between (``UnknownRowSetError``).
    _READ_ONLY_LOAD_ATTEMPTS = 20

    def _load_retrying(self) -> ReplayStats:
        attempts = self._READ_ONLY_LOAD_ATTEMPTS if self.read_only else 1
        for attempt in range(attempts):
            try:
                return self._load()
            except UnknownRowSetError:
                if attempt == attempts - 1:
                    raise
                time.sleep(0.01 * (attempt + 1))
        raise AssertionError("unreachable")

    def _load(self) -> ReplayStats:
        """(Re)build every in-memory structure from the superblock and the WAL."""
        meta = metadata.load(self.path)
        self.meta = meta
        resolved = self._resolve_txn_rowsets()
        self.schema = meta.schema
        self._key_types = [c.type for c in self.schema.key_columns]
        self._row_path = RowPath(self.schema, self.options.fast_paths)
        self.clock.observe(meta.max_ts)
        self._next_seq = meta.next_seq
        self._next_mrs_id = meta.last_durable_mrs_id + 1
        if not self.read_only:
            self._remove_orphans()
        # Runs of write batches not yet handed to the DeltaMemStores (deltamemstore.py);
        # a reload starts with new stores, so with no runs pending.
        self._pending = PendingRuns()
        drs = tuple(DiskRowSet(self.path, m, self.cache, self._pending) for m in meta.rowsets)
        self._rowsets = RowSets(self._new_mrs(), (), drs)
        wal_dir = os.path.join(self.path, WAL_DIR)
        t0 = time.perf_counter()
        txr = TxnRecords()
        st = replay(
            committed_records(
                read_log(wal_dir, repair=not self.read_only), self.txn_committed, txr
            ),
            self._rowsets,
            self.schema,
            meta.last_durable_mrs_id,
            meta.next_rowset_id,
        )
        st.max_ts = max(st.max_ts, txr.max_ts)
        st.next_seq = max(st.next_seq, txr.next_seq)
        if st.records:
            log.info(
                "tablet %s: replayed %d WAL records (%d rows, %d skipped as durable) in %.2f s",
                self.path,
                st.records,
                st.rows_replayed,
                st.rows_skipped,
                time.perf_counter() - t0,
            )
        self._next_mrs_id = self._rowsets.mrs.id + 1  # replay may have raised its id
        self._auto_counter = self._restored_auto_counter()
        self.clock.observe(st.max_ts)
        self.meta.max_ts = max(meta.max_ts, st.max_ts)
        self._next_seq = max(self._next_seq, st.next_seq)
        if not self.read_only:
            self._log = Log(
                wal_dir,
                fsync=FsyncPolicy.parse(self.options.wal_fsync),
                segment_size=self.options.wal_segment_bytes,
            )
            self._seed_log_gc()
        self._failed = None
        if not self.read_only:
            if resolved:
                self._save_meta()
            self.rolled_forward = txr.rolled_forward
            if txr.rolled_forward:
                # Their parts are in memory only on the commit log's word: made durable
                # here, the commit log can forget them (txn_log.py).
                self._flush()
                self.flush_deltas()
        return st

    def _restored_auto_counter(self) -> int:
        """The largest ``auto_incrementing_id`` handed out before this load: the
        superblock's counter (at least every id in its rowsets) or an id replayed from
        the log into the MemRowSet. An id a crash lost from both was never acknowledged
        nor visible, so handing it out again is safe."""
        counter = self.meta.auto_incrementing_counter
        auto = self.schema.auto_incrementing_index
        if auto is None:
            return counter
        replayed = self._rowsets.mrs.view().rows.column(auto)
        top = pc.max(replayed).as_py() if len(replayed) else None
        return max(counter, int(top or 0))

    def _resolve_txn_rowsets(self) -> bool:
        """Keep the rowsets of committed transactions' bulk-loaded parts (untagged) and
        drop the others from ``self.meta`` (their directories are then orphans); True
        when the superblock changed."""
        meta = self.meta
        if not meta.txn_rowsets:
            return False
        dropped = {rid for rid, ts in meta.txn_rowsets.items() if not self.txn_committed(ts)}
        if dropped:
            log.info("tablet %s: dropping rowsets %s of aborted transactions", self.path, dropped)
            meta.rowsets = [m for m in meta.rowsets if m.id not in dropped]
        meta.txn_rowsets = {}
        return True

    # -- lifecycle ----------------------------------------------------------------------------
    @classmethod
    def create(
        cls, path: str, schema: Schema, options: TabletOptions | None = None, **kw: Any
    ) -> Tablet:
        options = options or TabletOptions()
        if os.path.exists(os.path.join(path, metadata.META_FILE)):
            raise ProgrammingError(f"a tablet already exists at {path}")
        os.makedirs(os.path.join(path, "rowsets"), exist_ok=True)
        metadata.save(path, TabletMeta(schema), sync=options.sync)
        return cls(path, options, **kw)

    @classmethod
    def open(
        cls,
        path: str,
        options: TabletOptions | None = None,
        *,
        read_only: bool = False,
        **kw: Any,
    ) -> Tablet:
        """Open an existing tablet; ``read_only`` opens a frozen view another process may
        share with the writer."""
        return cls(path, options or TabletOptions(), read_only=read_only, **kw)

    def close(self, *, flush: bool | None = None) -> None:
        """Sync the log and release the tablet. ``flush=True`` flushes memory first;
        None (the default) flushes it only when the next open would replay more than
        ``wal_replay_max_segments`` WAL segments; False never (a tablet about to be
        deleted)."""
        if self._closed:
            return
        try:
            if not self.read_only and self._failed is None:
                if flush:
                    self.flush()
                    self.flush_deltas()
                elif flush is None and self._replay_too_long():
                    self._flush_before_close()
                self._gc_log_quietly()
        finally:
            if self.maintenance is not None:
                self.maintenance.unregister(self)
            with self._maint_lock:  # let a running flush or compaction finish first
                self._closed = True
            self._pool.shutdown(wait=True)
            self.maintainer.delete_obsolete()
            self._drop_cached_pages()
            self._release()

    def _drop_cached_pages(self) -> None:
        """Drop the pages this closing tablet cached in a block cache others share: a
        writer's tablet closes when its table is dropped, or when the database closes;
        a read-only view's, to open again at a newer state (then only the pages of files
        the writer has deleted since go: the others serve the reopened view)."""
        rowsets = os.path.join(self.path, "rowsets")
        if not self.read_only:
            self.cache.invalidate_paths([rowsets])
            return
        under = rowsets + os.sep
        gone = [p for p in self.cache.cached_paths() if p.startswith(under)]
        self.cache.invalidate_paths([p for p in gone if not os.path.exists(p)])

    def abandon(self) -> None:
        """Drop the tablet as a crash would: no flush, no log sync, lock released.

        For tests; what survives is what a SIGKILL leaves (the files as written so far).
        """
        self._closed = True
        if self.maintenance is not None:
            self.maintenance.unregister(self)
        self._pool.shutdown(wait=True)
        lg, self._log = self._log, None
        if lg is not None:
            lg.abandon()
        if self._lock is not None:
            self._lock.release()

    def _release(self) -> None:
        lg, self._log = self._log, None
        try:
            if lg is not None:
                lg.close()
        finally:
            if self._lock is not None:
                self._lock.release()

    def __enter__(self) -> Tablet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _new_mrs(self) -> MemRowSet:
        m = MemRowSet(self._next_mrs_id, self.schema)
        self._next_mrs_id += 1
        return m

    def _remove_orphans(self) -> None:
        """Delete rowset directories the superblock does not list (an interrupted flush)."""
        d = os.path.join(self.path, "rowsets")
        known = {rowset_dir(self.path, m.id) for m in self.meta.rowsets}
        if not os.path.isdir(d):
            os.makedirs(d, exist_ok=True)
            return
        for name in os.listdir(d):
            full = os.path.join(d, name)
            if full not in known:
                # Replaced by a compaction or GC (kept for file_grace_s) is routine; any
                # other unlisted directory is what an interrupted flush left.
                retired = name.isdigit() and int(name) < self.meta.next_rowset_id
                log.log(
                    logging.INFO if retired else logging.WARNING,
                    "removing %s rowset directory %s",
                    "retired" if retired else "orphaned",
                    full,
                )
                shutil.rmtree(full, ignore_errors=True)
                self.cache.invalidate_paths([full])
        for m in self.meta.rowsets:  # files an interrupted or superseded compaction left
            rdir = rowset_dir(self.path, m.id)
            listed = m.file_names()
            for name in os.listdir(rdir) if os.path.isdir(rdir) else ():
                if name not in listed:
                    log.info("removing obsolete file %s", os.path.join(rdir, name))
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(os.path.join(rdir, name))
                    self.cache.invalidate_paths([os.path.join(rdir, name)])

    # -- time -----------------------------------------------------------------------------------
    def latest_timestamp(self) -> int:
        """A snapshot timestamp that sees every write applied so far."""
        return self.mvcc.latest_snapshot()

    @property
    def history_max_age_s(self) -> float:
        """History kept for time travel: the tablet's own setting, else the option's
        (negative: keep everything)."""
        age = self.meta.history_max_age_s
        return self.options.history_max_age_s if age is None else age

    def set_history_max_age(self, seconds: float | None) -> None:
        """Override ``history_max_age_s`` for this tablet (None: back to the option),
        durably. Shortening it lets the next GC drop the history beyond the new mark."""
        self._check_writable()
        with self._write_lock:
            previous, self.meta.history_max_age_s = self.meta.history_max_age_s, seconds
            try:
                self._save_meta()
            except BaseException:
                self.meta.history_max_age_s = previous
                raise

    def ancient_history_mark(self) -> int:
        """Snapshots before this timestamp are refused; history older may be GC'd."""
        age = self.history_max_age_s
        if age < 0:
            return 0
        return from_micros(max(0, to_micros(self.clock.peek()) - int(age * 1_000_000)))

    def _check_snapshot(self, ts: int) -> None:
        ahm = self.ancient_history_mark()
        if ts < ahm:
            raise ProgrammingError(
                f"snapshot {describe(ts)} is earlier than the ancient history mark "
                f"{describe(ahm)}: history older than {self.history_max_age_s:g} s "
                "is not kept (raise history_max_age_s to keep more)"
            )
        self.mvcc.wait_for_snapshot(ts)

    # -- writes ---------------------------------------------------------------------------------
    def write(
        self,
        data: pa.Table | pa.RecordBatch | RowBatch,
        op: WriteOp | str | int | None = None,
        *,
        op_column: str | None = None,
        atomic: bool = False,
        timestamp: int | None = None,
        bulk_rows: int | None = None,
    ) -> WriteResult:
        """Apply a batch: one operation for every row (``op``) or per row (``op_column``).

        ``data`` is an Arrow batch or a ``RowBatch`` of Python rows. Good rows commit
        together at one timestamp; bad rows are returned as per-row errors. With
        ``atomic=True`` the batch applies entirely or raises. The batch is in the WAL
        (and, with the ``batch`` or ``always`` fsync policy, on disk) before this returns
        and before any reader can see it. An INSERT batch of at least ``bulk_rows`` rows
        (default: the ``bulk_load_rows`` option) is written straight to DiskRowSets
        instead. A batch of a few rows takes the row path (``row_write``), with the same
        results.
        """
        self._admit_write()
        threshold = self.options.bulk_load_rows if bulk_rows is None else bulk_rows
        rw = self._row_path.choose(data, op, op_column, threshold)
        if rw is not None:
            while True:  # ``_healthy``, written out: a call costs a one-row write
                with self._write_lock:
                    if self._failed is None and not self._closed:
                        result, ticket = self._write_row_batch(rw, atomic, timestamp)
                        break
                self.reload_if_failed()
                self._check_open()
            return self._finish_write(result, ticket)
        if isinstance(data, RowBatch):
            data = rows_to_arrow(self.schema, data.names, data.rows)
        elif isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        ops = operations(data, op, op_column)
        if op_column is not None:
            data = data.drop_columns([op_column])
        pb = prepare(self.schema, data, ops, self._pool)
        bulk = pb.n >= threshold and bool(
            np.all((ops == WriteOp.INSERT) | (ops == WriteOp.INSERT_IGNORE))
        )
        # A bulk write makes rowsets: it serializes with flushes (same lock order as flush).
        with self._healthy(maint=bulk):
            result, ticket = self._write_locked(pb, atomic, timestamp, bulk)
        return self._finish_write(result, ticket)

    def _finish_write(self, result: WriteResult, ticket: AppendTicket | None) -> WriteResult:
        """Wait for the log (fsync policy) and make the batch visible."""
        ts = result.timestamp
        try:
            if ticket is not None:
                ticket.wait_durable()
            if self._failed is not None:
                raise OperationalError(self._failed)
        except OperationalError as e:
            self._failed = f"write-ahead log failed: {e}"
            self.mvcc.abort_op(ts)
            raise OperationalError(
                f"{e}; the write may not be durable. The tablet reloads itself from disk "
                "before the next write."
            ) from e
        self.mvcc.finish_op(ts)
        return result

    def write_rows(
        self,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        op: WriteOp | str | int,
        *,
        atomic: bool = False,
        timestamp: int | None = None,
    ) -> WriteResult:
        """``write`` of rows of Python values (``columns`` names them, in order)."""
        return self.write(RowBatch(tuple(columns), rows), op, atomic=atomic, timestamp=timestamp)

    def _admit_write(self) -> None:
        """What every write checks first: writable and open; then back-pressure."""
        if self.read_only or self._closed:
            self._check_writable()
        m = self.maintenance
        if m is not None:
            m.throttle()

    def _write_row_batch(
        self, rw: RowWrite, atomic: bool, timestamp: int | None
    ) -> tuple[WriteResult, AppendTicket | None]:
        """Decide and commit a batch the row path took (the write lock held).

        The one fallback of the row path is here: a row that only the batch path
        decides (an UPSERT of a present key, a REINSERT over a deleted MemRowSet row:
        ``decide_rows`` answers False), or a schema changed since the rows were
        converted, sends the batch as given to the batch path, under the same lock,
        before anything is logged or applied. Only the tablet's state says so, which
        the choice of the path (``RowPath.choose``) cannot see."""
        if rw.layout.schema is not self.schema or not decide_rows(self._rowsets, rw):
            data = rw.arrow(self.schema)
            pb = prepare(self.schema, data, operations(data, rw.op, None), self._pool)
            return self._write_locked(pb, atomic, timestamp)
        if atomic and rw.errors:
            raise atomic_rejection(rw.errors)
        ts = self.mvcc.start_op(timestamp)
        ticket = self._commit(rw, ts)
        return WriteResult(ts, len(rw.inserts), rw.ignored, rw.errors), ticket

    def _commit(self, w: LoggedWrite, ts: int) -> AppendTicket | None:
        """The commit protocol of every logged write (the write lock held, the MVCC op
        of ``ts`` started): log ``w`` from the next sequence number, apply it to the
        memory stores, charge back-pressure what they grew by, and advance the sequence
        number and the tablet's latest timestamp. The caller makes the write visible
        once its log append is durable (``_finish_write``), or a transaction part at its
        commit.

        A failed log append applies nothing; a failed apply may leave part of the batch
        in memory. Either aborts the MVCC op and marks the tablet failed: it reloads
        from disk before the next write (``_healthy``)."""
        seq = self._next_seq
        ticket = None
        try:
            payload = w.record(ts, seq)
            if payload is not None:
                assert self._log is not None
                ticket = self._log.append(seq, ts, payload)
        except BaseException:
            self.mvcc.abort_op(ts)
            self._failed = "write-ahead log append failed"
            raise
        try:
            grown = w.apply(ts, seq)
        except BaseException:
            self._failed = "applying a logged batch failed"
            self.mvcc.abort_op(ts)
            raise
        self._next_seq = seq + w.n
        if grown is not None:
            m = self.maintenance
            if m is not None:  # back-pressure (``throttle``)
                m.charge(grown)
            if ts > self.meta.max_ts:
                self.meta.max_ts = ts
        return ticket

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold off every flush, compaction and other writer of this tablet (the locks a
        write takes, in their order). Writes from the holding thread still run: a
        table-level atomic write checks all its tablets, then writes them, inside."""
        with self._maint_lock, self._write_lock:
            yield

    def check_write(
        self,
        data: pa.Table | pa.RecordBatch,
        op: WriteOp | str | int | None = None,
        *,
        op_column: str | None = None,
    ) -> list[RowError]:
        """The per-row errors ``write`` would report for this batch now, applying nothing."""
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        ops = operations(data, op, op_column)
        if op_column is not None:
            data = data.drop_columns([op_column])
        pb = prepare(self.schema, data, ops, self._pool)
        with self._healthy():
            if self.schema.auto_incrementing_index is not None:
                assign_auto_ids(self.schema, pb, self._auto_counter)  # ids not taken
            d = decide(self._rowsets, self.schema, pb)
        return row_errors(self.schema, pb, d.err)

    def alter_schema(self, schema: Schema) -> None:
        """Switch to ``schema`` (same key columns; columns matched by id), durably.

        The MemRowSet and every DeltaMemStore are flushed first, so every WAL record is
        durable under the old schema and none needs replaying under the new one; the new
        MemRowSet has the new columns. Rowsets written before keep their files: a column
        they lack reads its ``read_default``, a dropped column is no longer read, and
        the next compaction rewrites them without it."""
        self._check_writable()
        old = self.schema
        if [(c.id, c.type) for c in schema.key_columns] != [
            (c.id, c.type) for c in old.key_columns
        ]:
            raise ProgrammingError("altering a table cannot change its primary key columns")
        for c in schema.columns:
            prev = old.column_by_id(c.id)
            if prev is not None and prev.type != c.type:
                raise ProgrammingError(
                    f"cannot change the type of column {c.name!r} from {prev.type} to {c.type}"
                )
        for _ in range(100):
            self.flush()
            self.flush_deltas()
            with self._maint_lock, self._write_lock:
                rs = self._rowsets
                if not (
                    rs.frozen
                    or not rs.mrs.is_empty()
                    or any(d.frozen_dms is not None or not d.dms.is_empty() for d in rs.drs)
                ):
                    self.meta.schema = schema
                    try:
                        self._save_meta()
                    except BaseException:
                        self.meta.schema = old
                        raise
                    self.schema = schema
                    self._key_types = [c.type for c in schema.key_columns]
                    self._row_path = RowPath(schema, self.options.fast_paths)
                    self._rowsets = RowSets(self._new_mrs(), (), rs.drs)
                    return
        raise OperationalError(f"tablet {self.path}: writes kept the memory stores busy")

    def assign_auto_ids(self, pb: PreparedBatch) -> None:
        """Hand out the batch's ``auto_incrementing_id`` values (a non-unique primary
        key; ``write_ops.assign_auto_ids``). Under the write lock."""
        if self.schema.auto_incrementing_index is not None:
            self._auto_counter = assign_auto_ids(self.schema, pb, self._auto_counter)

    def _write_locked(
        self, pb: PreparedBatch, atomic: bool, timestamp: int | None, bulk: bool = False
    ) -> tuple[WriteResult, AppendTicket | None]:
        self.assign_auto_ids(pb)
        rs = self._rowsets
        d = decide(rs, self.schema, pb)
        errors = row_errors(self.schema, pb, d.err)
        if atomic and errors:
            raise atomic_rejection(errors)
        ts = self.mvcc.start_op(timestamp)
        seq_base = self._next_seq
        if bulk and not MUTATES[d.action].any():
            # The superblock that publishes the rowsets also records the new sequence
            # number and timestamp, so nothing after a restart reuses them.
            self._next_seq += pb.n
            try:
                self._bulk_load(pb, d, ts, seq_base)
            except BaseException:
                self._next_seq -= pb.n
                self.mvcc.abort_op(ts)
                raise
            self.meta.max_ts = max(self.meta.max_ts, ts)
            return WriteResult(ts, *write_counts(d), errors), None
        ticket = self._commit(BatchWrite(rs, self.schema, pb, d), ts)
        return WriteResult(ts, *write_counts(d), errors), ticket

    def _bulk_load(self, pb: PreparedBatch, d: Decisions, ts: int, seq_base: int) -> None:
        """Write the batch's new rows as DiskRowSets and publish them (see bulk_load)."""
        if not len(d.new_rows):
            self._save_meta()  # still record the sequence numbers the batch consumed
            return
        first_id = self.meta.next_rowset_id
        metas = write_bulk_rowsets(
            self.path,
            first_id,
            self.schema,
            pb,
            d.new_rows,
            ts,
            seq_base,
            self._write_opts(),
            self._pool,
        )
        meta = self.meta
        meta.rowsets.extend(metas)
        meta.next_rowset_id = first_id + len(metas)
        meta.max_ts = max(meta.max_ts, ts)
        try:
            self._save_meta()
        except BaseException:
            del meta.rowsets[len(meta.rowsets) - len(metas) :]
            meta.next_rowset_id = first_id
            raise
        rs = self._rowsets
        new = tuple(DiskRowSet(self.path, m, self.cache, self._pending) for m in metas)
        self._rowsets = RowSets(rs.mrs, rs.frozen, (*rs.drs, *new))

    def is_empty(self) -> bool:
        """No rows at all: no DiskRowSet (not even of deleted rows) and empty memory."""
        rs = self._rowsets
        return not rs.drs and not rs.frozen and rs.mrs.is_empty()

    def adopt_rowsets(self, staged: Sequence[tuple[str, RowSetMeta]], timestamp: int) -> int:
        """Publish DiskRowSets written elsewhere (``bulk_load.stage_rowsets``: key-sorted,
        no UNDO records) as rows inserted at ``timestamp``; returns the rows adopted.

        Only an empty tablet adopts (its keys cannot collide with the staged ones; the
        caller checks the staged rowsets against each other). Each rowset gets the UNDO
        records of its inserts and its directory is renamed into the tablet under a new
        id; one superblock swap publishes them all. A crash before the swap leaves
        orphaned directories, removed on the next open."""
        self._check_writable()
        if self.schema.auto_incrementing_index is not None:
            raise ProgrammingError(
                f"tablet {self.path}: staged rowsets cannot be adopted by a table with a "
                "non-unique primary key (its tablets assign the auto-incrementing ids)"
            )
        with self._healthy(maint=True):
            if not self.is_empty():
                raise IntegrityError(
                    f"tablet {self.path} received rows after the staged rowsets were "
                    "planned for it empty"
                )
            total = sum(m.num_rows for _, m in staged)
            ts = self.mvcc.start_op(timestamp)
            seq_base = self._next_seq
            first_id = self.meta.next_rowset_id
            types = {c.id: c.type for c in self.schema.columns}
            sync = self.options.sync
            moved: list[tuple[str, str]] = []
            metas: list[RowSetMeta] = []
            try:
                os.makedirs(os.path.join(self.path, "rowsets"), exist_ok=True)
                offset = 0
                for i, (src_dir, staged_meta) in enumerate(staged):
                    src = rowset_dir(src_dir, staged_meta.id)
                    meta = staged_meta.copy()
                    meta.id = first_id + i
                    undo = undo_for_inserts(meta.num_rows, ts, seq_base + offset)
                    st = write_delta_file(
                        os.path.join(src, "undo0.delta"), "undo", undo, types, sync=sync
                    )
                    meta.undo_files = [DeltaFileMeta("undo0.delta", st)]
                    dst = rowset_dir(self.path, meta.id)
                    os.rename(src, dst)
                    moved.append((dst, src))
                    metas.append(meta)
                    offset += meta.num_rows
                if sync:
                    fsync_dir(os.path.join(self.path, "rowsets"))
                self._next_seq += total
                self.meta.rowsets.extend(metas)
                self.meta.next_rowset_id = first_id + len(metas)
                self.meta.max_ts = max(self.meta.max_ts, ts)
                self._save_meta()
            except BaseException:
                self._next_seq = seq_base
                if metas and self.meta.rowsets[-len(metas) :] == metas:
                    del self.meta.rowsets[-len(metas) :]
                self.meta.next_rowset_id = first_id
                for dst, src in reversed(moved):
                    with contextlib.suppress(OSError):
                        os.rename(dst, src)
                self.mvcc.abort_op(ts)
                raise
            rs = self._rowsets
            new = tuple(DiskRowSet(self.path, m, self.cache, self._pending) for m in metas)
            self._rowsets = RowSets(rs.mrs, rs.frozen, (*rs.drs, *new))
        self.mvcc.finish_op(ts)
        return total

    @contextlib.contextmanager
    def hold(self, *, maint: bool = False) -> Iterator[None]:
        """Hold the tablet for a multi-tablet transaction's part (``txn_part.py``): what a
        write checks first, then the write lock (the maintenance lock first with
        ``maint``, as a bulk write takes it) on an open, healthy tablet, from the part's
        prepare to its commit or abort."""
        self._admit_write()
        with self._healthy(maint=maint):
            yield

    def prepare_part(
        self,
        data: pa.Table,
        op: WriteOp | str | int | None,
        *,
        op_column: str | None = None,
        atomic: bool = False,
        timestamp: int,
        bulk_rows: int | None = None,
    ) -> TxnPart:
        """Decide and log this tablet's part of a multi-tablet transaction at
        ``timestamp``, applying nothing (``txn_part.prepare_part``; inside ``hold``)."""
        return prepare_part(self, data, op, op_column, atomic, timestamp, bulk_rows)

    def sync_log(self) -> None:
        """Make every record appended so far durable (an fsync of the current segment)."""
        lg = self._log
        if lg is not None:
            lg.sync()

    def _healthy(self, *, maint: bool = False) -> _Healthy:
        """Hold the write lock (and the maintenance lock first when ``maint``) on an open
        tablet that has not failed, reloading it from disk first if it had.

        The reload holds the maintenance lock too: it waits for a flush or compaction
        still running, which refuses to publish onto a failed tablet (``check_healthy``)
        and leaves its outputs unlisted, so the reloaded rowsets are the superblock's and
        the log's. The maintenance lock is taken before the write lock, never while
        holding it alone (a caller holding only the write lock must not come here), so
        a tablet that fails again between the reload and the write lock goes round."""
        return self._held_maint if maint else self._held

    @property
    def closed(self) -> bool:
        """Whether ``close`` (or ``abandon``) has run: the tablet serves nothing more."""
        return self._closed

    @property
    def failed(self) -> bool:
        """Whether a write failed here and the tablet waits to reload from disk (at the
        next write, or ``reload_if_failed``)."""
        return self._failed is not None

    def reload_if_failed(self) -> None:
        """Reload a failed tablet from disk now (the reload the next write would do),
        waiting for a flush or compaction still running here. A table calls this with
        its own write lock released (unless the caller holds it through
        ``Table.exclusive``), so that its writers to other tablets do not wait behind
        this tablet's maintenance. ProgrammingError if the tablet is closed."""
        if self._failed is not None:
            with self._healthy():
                pass

    def check_healthy(self) -> None:
        """Raise if the tablet has failed: its memory may hold part of a batch, or a
        batch whose log record is not known to be durable. Flushes and compactions call
        this before they publish, so that nothing of it becomes durable; the reload at
        the next write rebuilds the memory from the superblock and the log."""
        if self._failed is not None:
            raise OperationalError(
                f"tablet {self.path} has failed ({self._failed}); it reloads from disk at "
                "the next write, and maintenance publishes nothing until then"
            )

    def _recover(self) -> None:
        """Rebuild the tablet from disk after a failure (as a restart would); the caller
        holds the maintenance and write locks (``_healthy``)."""
        log.warning("tablet %s: reloading from disk after: %s", self.path, self._failed)
        if self._log is not None:
            with contextlib.suppress(OperationalError):
                self._log.close()
            self._log = None
        self.mvcc = MvccManager(self.clock)
        self.replay_stats = self._load()

    # -- flushes --------------------------------------------------------------------------------
    def flush(self, *, worker: CompactionWorker | None = None) -> int:
        """Flush the MemRowSet to DiskRowSets; returns the number of rowsets written.

        A MemRowSet left frozen by a failed flush is flushed first. The rowsets are
        sorted and written in ``worker``'s process when given (compaction_worker.py).
        """
        try:
            return self._flush(worker)
        finally:
            self.maintainer.delete_obsolete()

    def _flush(self, worker: CompactionWorker | None = None) -> int:
        self._check_writable()
        t0 = time.perf_counter()
        with self._maint_lock:
            with self._write_lock:
                rs = self._rowsets
                if rs.frozen:
                    frozen = rs.frozen[0]
                elif rs.mrs.is_empty():
                    return 0
                else:
                    frozen = rs.mrs
                    self._rowsets = RowSets(self._new_mrs(), (*rs.frozen, frozen), rs.drs)
                view = frozen.view()
                cutoff_seq = frozen.max_seq
            first_id = self.meta.next_rowset_id
            job = FlushJob(
                self.path,
                self.schema,
                view,
                first_id,
                self._write_opts(),
                want_keys=self.cache is not None,
            )
            fr = worker.run(job) if worker is not None else job.run(self._pool)
            metas = fr.metas
            # Opened and seeded before the lock; unlisted until published below.
            new = [DiskRowSet(self.path, m, self.cache, self._pending) for m in metas]
            seed_keys(new, fr.keys)
            with self._write_lock:
                self.check_healthy()  # the outputs stay unlisted: the reload removes them
                # Mutations that reached the frozen MemRowSet during the flush move to the
                # new rowsets, and are written out at once: their WAL records name the
                # frozen MemRowSet, which is durable from the moment the superblock says so.
                late = frozen.view().deltas
                if len(late):
                    late = late.select(late.seq > cutoff_seq)
                if len(late):
                    self._migrate(late.map_rowids(fr.slot_to_rowid), new)
                meta = self.meta
                saved = (meta.next_rowset_id, meta.last_durable_mrs_id, len(meta.rowsets))
                meta.rowsets.extend(metas)
                meta.next_rowset_id = first_id + len(metas)
                meta.last_durable_mrs_id = frozen.id
                try:
                    self._save_meta()
                except BaseException:
                    meta.next_rowset_id, meta.last_durable_mrs_id = saved[0], saved[1]
                    del meta.rowsets[saved[2] :]
                    raise
                rs = self._rowsets
                self._rowsets = RowSets(
                    rs.mrs, tuple(f for f in rs.frozen if f is not frozen), (*rs.drs, *new)
                )
            self._gc_log()
            written = sum(m.base_bytes + delta_bytes(m) for m in metas)
            self.maintainer.record("flush_mrs", t0, 0, written, f"{len(metas)} rowsets")
            return len(metas)

    def _migrate(self, late: Deltas, new: Sequence[DiskRowSet]) -> None:
        """Move mutations that reached a store being replaced (rowid = position in the
        concatenated ``new`` rowsets) to the new rowsets and write them out at once: their
        WAL records name the old store, which stops being replayed once the superblock
        no longer lists it."""
        rowids = late.rowid
        starts = np.cumsum([0] + [d.num_rows for d in new])
        which = np.searchsorted(starts, rowids, side="right") - 1
        for i, d in enumerate(new):
            m = which == i
            if m.any():
                part = late.select(m)
                d.apply_mutations(
                    Deltas(rowids[m] - starts[i], part.ts, part.seq, part.op, part.cols)
                )
                self._flush_dms(d, d.freeze_dms(), save=False)

    def flush_deltas(
        self,
        *,
        worker: CompactionWorker | None = None,
        rowset_ids: Collection[int] | None = None,
    ) -> int:
        """Flush the non-empty DeltaMemStores of the rowsets ``rowset_ids`` (all
        rowsets when None) to REDO DeltaFiles, encoded in ``worker``'s process when
        given; returns how many. A store a failed attempt left frozen is always
        flushed."""
        try:
            return self._flush_deltas(worker, rowset_ids)
        finally:
            self.maintainer.delete_obsolete()

    def _flush_deltas(
        self, worker: CompactionWorker | None, rowset_ids: Collection[int] | None
    ) -> int:
        self._check_writable()
        t0 = time.perf_counter()
        wanted = None if rowset_ids is None else set(rowset_ids)
        with self._maint_lock:
            todo = []
            for drs in self._rowsets.drs:
                with self._write_lock:
                    frozen = drs.frozen_dms  # left by a failed attempt
                    if frozen is None:
                        if drs.dms.is_empty() or (wanted is not None and drs.id not in wanted):
                            continue
                        frozen = drs.freeze_dms()
                todo.append((drs, frozen))
            if todo:  # one job, one superblock for every new file
                self._write_dms_files(todo, worker, save=True)
            self._gc_log()
            if todo:
                self.maintainer.record("flush_deltas", t0, 0, 0, f"{len(todo)} DeltaMemStores")
        return len(todo)

    def _flush_dms(self, drs: DiskRowSet, frozen: Any, *, save: bool = True) -> None:
        self._write_dms_files([(drs, frozen)], None, save=save)

    def _write_dms_files(
        self, todo: list[tuple[DiskRowSet, Any]], worker: CompactionWorker | None, *, save: bool
    ) -> None:
        """Write frozen DeltaMemStores as REDO files (in ``worker``'s process when given)
        and install them; ``save``: then save the superblock, and if that fails,
        uninstall them all (the frozen stores stay for the next attempt). Without
        ``save`` the caller saves a superblock that lists the rowsets."""
        named = [(d, f, f"redo{f.id}.delta") for d, f in todo]
        contents = deltas_of([f for _, f, _ in named])
        files = [os.path.join(d.dir, name) for d, _, name in named]
        job = DeltaFilesJob(
            list(zip(files, contents, strict=True)),
            self.schema,
            self.options.sync,
        )
        stats = worker.run(job) if worker is not None else job.run()
        installed: list[tuple[DiskRowSet, str, int, Any]] = []
        with self._write_lock:
            self.check_healthy()  # the files stay unlisted: the reload removes them
            try:
                for (drs, frozen, name), st in zip(named, stats, strict=True):
                    previous = drs.meta.last_durable_dms_id
                    drs.install_redo_file(DeltaFileMeta(name, st), frozen.id)
                    installed.append((drs, name, previous, frozen))
                if save:
                    self._save_meta()
            except BaseException:
                for drs, name, previous, frozen in installed:
                    drs.uninstall_redo_file(name, previous, frozen)
                raise

    def _check_writable(self) -> None:
        if self.read_only:
            raise OperationalError(f"tablet {self.path} is open read-only")
        self._check_open()

    def _check_open(self) -> None:
        if self._closed:
            raise ProgrammingError(f"tablet {self.path} is closed")

    def durable_seq(self) -> int:
        """Every logged event with a sequence number <= this is in a durable file."""
        # Read before the stores (no lock is held): a write that lands while they are
        # read has a sequence number >= this, so it is never counted durable.
        next_seq = self._next_seq
        rs = self._rowsets
        firsts = [m.min_seq for m in (rs.mrs, *rs.frozen) if m.min_seq is not None]
        firsts.extend(
            dms.min_seq
            for d in rs.drs
            for dms in (d.frozen_dms, d.dms)
            if dms is not None and dms.min_seq is not None
        )
        return min(firsts, default=next_seq) - 1

    def _seed_log_gc(self) -> None:
        """Start the log GC's history (a writer's open) from the superblock on disk: its
        marks (what was durable when each earlier save happened) and what it makes
        durable, dated when it was saved (its mtime). Segments that earlier sessions
        left below those points go once they have been garbage for ``file_grace_s``,
        whoever wrote them."""
        try:
            saved = os.stat(os.path.join(self.path, metadata.META_FILE)).st_mtime
        except OSError:
            saved = time.time()
        wall, mono = time.time(), time.monotonic()
        marks = [*self.meta.wal_gc_marks, (saved, self.durable_seq())]
        self._durable_history = sorted((mono - max(0.0, wall - t), seq) for t, seq in marks)
        self._gc_log_quietly()

    def _replay_too_long(self) -> bool:
        """Whether the next open would replay more WAL segments than
        ``wal_replay_max_segments`` (what the in-memory stores anchor)."""
        lg, limit = self._log, self.options.wal_replay_max_segments
        if lg is None or limit <= 0:
            return False
        return lg.segments_from(self.durable_seq() + 1) > limit

    def _flush_before_close(self) -> None:
        """Flush the in-memory stores (``_replay_too_long``); a failure leaves their rows
        in the WAL, where the next open finds them, and does not fail the close."""
        try:
            self.flush()
            self.flush_deltas()
        except Error as e:
            log.warning(
                "tablet %s: flush before close failed (rows stay in the WAL): %s", self.path, e
            )

    def _gc_log_quietly(self) -> None:
        """``_gc_log`` at open or close: a segment that cannot be deleted now is deleted
        by a later GC, so a failure is logged and does not fail the open or close."""
        try:
            self._gc_log()
        except OperationalError as e:
            log.warning("tablet %s: WAL GC failed: %s", self.path, e)

    def _gc_log(self) -> None:
        """Delete WAL segments whose records have all been durable for the grace period
        (a read-only process may still be replaying them)."""
        lg = self._log
        if lg is None:
            return
        now = time.monotonic()
        self._durable_history.append((now, self.durable_seq()))
        grace = self.options.file_grace_s
        ripe = [s for t, s in self._durable_history if now - t >= grace]
        if not ripe:
            return
        # each entry: "records up to s were durable at t" (durability is for good)
        self._durable_history = [(t, s) for t, s in self._durable_history if now - t < grace]
        self._durable_history.insert(0, (now - grace, max(ripe)))
        lg.gc(max(ripe))

    def wal_size(self) -> int:
        lg = self._log  # read once: a close may clear it meanwhile
        return lg.size_bytes if lg is not None else 0

    def wal_anchored(self, min_seq: int | None) -> int:
        """WAL bytes a store whose first event is ``min_seq`` keeps from deletion (0 for
        an empty store): its flush may let them go (``Log.bytes_from``)."""
        lg = self._log
        if lg is None or min_seq is None:
            return 0
        return lg.bytes_from(min_seq)

    def _write_opts(self) -> RowSetWriteOptions:
        return RowSetWriteOptions.of(self.options)

    #: Most ``wal_gc_marks`` younger than ``file_grace_s`` a superblock keeps.
    _GC_MARKS = 16

    def _save_meta(self) -> None:
        # Every record appended so far is durable before a superblock that may make
        # some of their rows durable: whatever a crash keeps of the log then covers
        # every record the files hold, so a reopen applies a prefix of the records (a
        # log run with fsync ``none`` included; the replicated tablet relies on it).
        lg = self._log
        if lg is not None and lg.unsynced:
            lg.sync()
        self.meta.next_seq = self._next_seq
        self.meta.auto_incrementing_counter = self._auto_counter
        self.meta.wal_gc_marks = self._gc_marks()
        untagged, self._untagged = self._untagged, set()
        try:
            metadata.save(self.path, self.meta, sync=self.options.sync)
        except BaseException:
            self._untagged |= untagged
            raise
        for ts in untagged:  # the superblock no longer needs the commit log's word
            self.on_txn_proved(ts)

    def _gc_marks(self) -> list[tuple[float, int]]:
        """The superblock's log GC marks with one for now: every record up to
        ``durable_seq()`` is durable before this save (so at least after it). Kept: the
        highest mark older than ``file_grace_s`` and a few younger ones (dropping one
        only makes GC later)."""
        now = time.time()
        marks = [*self.meta.wal_gc_marks, (now, self.durable_seq())]
        grace = self.options.file_grace_s
        ripe = [m for m in marks if now - m[0] >= grace]
        young = [m for m in marks if now - m[0] < grace]
        if len(young) > self._GC_MARKS:
            young = young[: self._GC_MARKS - 1] + young[-1:]
        return ([max(ripe, key=lambda m: m[1])] if ripe else []) + young

    # -- compactions, GC and maintenance (tablet_maintenance.py) -------------------------------
    def minor_delta_compaction(
        self, rowset_id: int, *, worker: CompactionWorker | None = None
    ) -> bool:
        """Merge the REDO DeltaFiles of one DiskRowSet into one; False if it has < 2."""
        return self.maintainer.minor_delta_compaction(rowset_id, worker=worker)

    def major_delta_compaction(
        self, rowset_id: int, *, worker: CompactionWorker | None = None
    ) -> bool:
        """Fold one DiskRowSet's REDO files into new base files of the updated columns."""
        return self.maintainer.major_delta_compaction(rowset_id, worker=worker)

    def compact(
        self, rowset_ids: Sequence[int] | None = None, *, worker: CompactionWorker | None = None
    ) -> int:
        """Merging compaction of DiskRowSets (the policy picks them without ids), in
        ``worker``'s process when given; returns how many rowsets it merged."""
        return self.maintainer.compact(rowset_ids, worker=worker)

    def gc_undo(self) -> int:
        """Delete UNDO files older than the ancient history mark; returns bytes freed."""
        return self.maintainer.gc_undo()

    def gc_deleted_rowsets(self) -> int:
        """Drop DiskRowSets with no live row, last changed before the mark."""
        return self.maintainer.gc_deleted_rowsets()

    def run_maintenance(self, *, flush: bool = True, compact: bool = True, gc: bool = True) -> None:
        """Flush, compact and GC now (see ``TabletMaintainer.run_maintenance``)."""
        self.maintainer.run_maintenance(flush=flush, compact=compact, gc=gc)

    def maintenance_ops(self) -> list[MaintenanceOp]:
        """The maintenance ops worth running now, with their scores (tablet_mm_ops.py)."""
        return self.mm_ops.candidates()

    def attach(self, manager: MaintenanceManager) -> None:
        """Let ``manager`` schedule this tablet's maintenance and throttle its writes."""
        self.maintenance = manager
        manager.register(self)

    def memory_bytes(self) -> int:
        """Memory held by the MemRowSets and DeltaMemStores."""
        rs = self._rowsets
        n = rs.mrs.bytes + sum(f.bytes for f in rs.frozen) + self._pending.bytes
        for d in rs.drs:  # settled bytes: this must not settle (see ``throttle``)
            # the live store first: a freeze in between counts one store twice, not none
            live = d.dms
            frozen = d.frozen_dms  # read once: a delta flush may clear it meanwhile
            n += live.settled_bytes + (frozen.settled_bytes if frozen is not None else 0)
        return n

    # -- what compactions and GC use (``MaintainedTablet`` in tablet_maintenance.py) -------------
    @property
    def maintainable(self) -> bool:
        """Open, writable and not failed: the tablet offers and runs maintenance."""
        return not (self.read_only or self._closed or self._failed is not None)

    @contextlib.contextmanager
    def maintaining(self) -> Iterator[None]:
        """Hold the maintenance lock of an open, writable tablet: flushes, compactions
        and GC run one at a time, never beside a bulk write or a reload."""
        self._check_writable()
        with self._maint_lock:
            yield

    @property
    def rowsets(self) -> RowSets:
        """The rowsets served now: a capture, replaced as a whole by every swap."""
        return self._rowsets

    @contextlib.contextmanager
    def rowset_swap(self) -> Iterator[_RowSetSwap]:
        """Hold the write lock and change the served DiskRowSets through the yielded
        handle (``RowSetSwap`` in tablet_maintenance.py): writes wait meanwhile."""
        with self._write_lock:
            yield _RowSetSwap(self)

    def open_rowsets(self, metas: Sequence[RowSetMeta]) -> list[DiskRowSet]:
        """Open DiskRowSets written for this tablet (not served until swapped in)."""
        return [DiskRowSet(self.path, m, self.cache, self._pending) for m in metas]

    def flush_rowset_dms(self, drs: DiskRowSet) -> None:
        """Write ``drs``'s DeltaMemStore (or one a failed attempt left frozen) out as a
        REDO file now and save the superblock; nothing if it is empty. Mutations after
        the freeze go to its new store."""
        with self._write_lock:
            frozen = drs.frozen_dms or (None if drs.dms.is_empty() else drs.freeze_dms())
        if frozen is not None:
            self._flush_dms(drs, frozen)

    @property
    def pool(self) -> ThreadPoolExecutor:
        """The tablet's threads: scans decode rowsets and in-thread merges write on them."""
        return self._pool

    def _replace_rowsets(
        self, remove: Sequence[DiskRowSet], add: Sequence[DiskRowSet], *, next_rowset_id: int | None
    ) -> None:
        """``RowSetSwap.replace``; the caller holds the write lock."""
        self.check_healthy()
        rs = self._rowsets
        gone = {id(d) for d in remove}
        if not gone <= {id(d) for d in rs.drs}:
            # Only a reload from disk under this op could do that (``_healthy`` waits for
            # the maintenance lock); publishing would list the inputs twice.
            ids = [d.id for d in remove]
            raise InternalError(f"tablet {self.path}: rowsets {ids} changed under this operation")
        same_id = {d.id: d for d in add}
        drs: list[DiskRowSet] = []
        for d in rs.drs:
            if id(d) not in gone:
                drs.append(d)
            elif d.id in same_id:
                drs.append(same_id.pop(d.id))
        drs.extend(same_id.values())
        meta = self.meta
        saved = (list(meta.rowsets), meta.next_rowset_id)
        meta.rowsets = [d.meta for d in drs]
        if next_rowset_id is not None:
            meta.next_rowset_id = next_rowset_id
        try:
            self._save_meta()
        except BaseException:
            meta.rowsets, meta.next_rowset_id = saved
            raise
        self._rowsets = RowSets(rs.mrs, rs.frozen, tuple(drs))

    # -- introspection --------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """Memory stores, rowsets and history of the tablet (see ``rowsets_info``)."""
        rs = self._rowsets
        ahm = self.ancient_history_mark()
        return {
            "path": self.path,
            "memrowset_rows": rs.mrs.num_slots + sum(f.num_slots for f in rs.frozen),
            "memrowset_bytes": rs.mrs.bytes + sum(f.bytes for f in rs.frozen),
            "deltamemstore_bytes": sum(d.dms.bytes for d in rs.drs),
            "deltamemstore_events": sum(len(d.dms) for d in rs.drs),
            "diskrowsets": len(rs.drs),
            "average_rowset_height": self.maintainer.average_height(),
            "disk_bytes": sum(d.meta.base_bytes + delta_bytes(d.meta) for d in rs.drs),
            "wal_bytes": self.wal_size(),
            "ancient_history_mark": ahm,
            "ancient_history_mark_micros": to_micros(ahm),
            "rowsets": self.rowsets_info(),
        }

    # -- reads ----------------------------------------------------------------------------------
    def scan(
        self,
        columns: Sequence[str] | None = None,
        predicates: Sequence[ColumnPredicate] = (),
        *,
        snapshot: int | None = None,
        ordered: bool = False,
        key_range: tuple[bytes | None, bytes | None] = (None, None),
    ) -> pa.RecordBatchReader:
        """Rows live at ``snapshot`` (default: now) matching every predicate.

        ``ordered=True`` returns them in primary-key order. ``key_range`` limits the scan
        to encoded primary keys in ``[lo, hi)`` (None: unbounded), as a scan token does.
        """
        if columns is not None and not len(columns) and ordered:  # rows without columns
            first = [self.schema.key_columns[0].name]
            r = self.scan(
                first, predicates, snapshot=snapshot, ordered=ordered, key_range=key_range
            )
            return pa.RecordBatchReader.from_batches(pa.schema([]), (b.select([]) for b in r))
        plan = self._plan(columns, predicates, snapshot, None, ordered, key_range)
        return self._reader(plan, ordered)

    def diff_scan(
        self,
        start: int,
        end: int,
        columns: Sequence[str] | None = None,
        predicates: Sequence[ColumnPredicate] = (),
    ) -> pa.RecordBatchReader:
        """Rows changed in [start, end): their values as of ``end`` and ``is_deleted``.

        Rows inserted and deleted inside the window are left out (Kudu's semantics).
        """
        if end < start:
            raise ProgrammingError("diff scan end is before its start")
        plan = self._plan(columns, predicates, end, start, True)
        self._check_snapshot(start)
        return self._reader(plan, True, dedupe=True)

    def _plan(
        self,
        columns: Sequence[str] | None,
        predicates: Sequence[ColumnPredicate],
        snapshot: int | None,
        diff_start: int | None,
        ordered: bool,
        key_range: tuple[bytes | None, bytes | None] = (None, None),
    ) -> ScanPlan:
        schema = self.schema
        projection = (
            list(schema.columns) if columns is None else [schema.column(c) for c in columns]
        )
        preds = [p.bind(schema) for p in predicates]
        if snapshot is None:
            snapshot = self.mvcc.latest_snapshot()
        else:
            self._check_snapshot(snapshot)
        lo, hi = key_bounds(schema, preds)
        if key_range[0] is not None and (lo is None or key_range[0] > lo):
            lo = key_range[0]
        if key_range[1] is not None and (hi is None or key_range[1] < hi):
            hi = key_range[1]
        return ScanPlan(
            schema,
            projection,
            preds,
            snapshot,
            lo,
            hi,
            self.options.scan_batch_rows,
            diff_start=diff_start,
            need_keys=ordered,
        )

    def _reader(self, plan: ScanPlan, ordered: bool, dedupe: bool = False) -> pa.RecordBatchReader:
        if any(p.is_none() for p in plan.predicates) or (
            plan.key_lo is not None and plan.key_hi is not None and plan.key_lo >= plan.key_hi
        ):
            return pa.RecordBatchReader.from_batches(plan.out_schema, iter(()))
        rs = self._rowsets
        if not ordered:
            return pa.RecordBatchReader.from_batches(plan.out_schema, self._iter(rs, plan))
        batches: list[pa.RecordBatch] = []
        keys: list[pa.Array[Any]] = []
        for b, k in self._iter_with_keys(rs, plan):
            if b.num_rows:
                assert k is not None
                batches.append(b)
                keys.append(k)
        if not batches:
            return pa.RecordBatchReader.from_batches(plan.out_schema, iter(()))
        table = pa.Table.from_batches(batches, schema=plan.out_schema)
        allkeys = pa.concat_arrays(keys)
        order = pc.sort_indices(allkeys)
        table = table.take(order)
        if dedupe:
            table = _dedupe_diff(table, allkeys.take(order))
        return pa.RecordBatchReader.from_batches(
            plan.out_schema, table.to_batches(max_chunksize=plan.batch_rows)
        )

    def _iter_with_keys(
        self, rs: RowSets, plan: ScanPlan
    ) -> Iterator[tuple[pa.RecordBatch, pa.Array[Any] | None]]:
        yield from scan_memrowset(rs.mrs, plan)
        for f in rs.frozen:
            yield from scan_memrowset(f, plan)
        for d in rs.drs:
            yield from scan_diskrowset(d, plan)

    def _iter(self, rs: RowSets, plan: ScanPlan) -> Iterator[pa.RecordBatch]:
        """Unordered scan: MemRowSets first, then DiskRowSets decoded in parallel on the
        tablet's thread pool (decompression and numpy release the GIL), at most
        ``threads`` rowsets ahead of the consumer, results in rowset order."""
        for m in (rs.mrs, *rs.frozen):
            for b, _ in scan_memrowset(m, plan):
                if b.num_rows:
                    yield b

        def scan_one(d: DiskRowSet) -> list[pa.RecordBatch]:
            return [b for b, _ in scan_diskrowset(d, plan) if b.num_rows]

        drs = list(rs.drs)
        if len(drs) <= 1 or self.options.threads <= 1 or self._closed:
            for d in drs:
                yield from scan_one(d)
            return
        ahead = self.options.threads
        pending = [self._pool.submit(scan_one, d) for d in drs[:ahead]]
        nxt = ahead
        while pending:
            batches = pending.pop(0).result()
            if nxt < len(drs):
                pending.append(self._pool.submit(scan_one, drs[nxt]))
                nxt += 1
            yield from batches

    def scan_stats(
        self,
        columns: Sequence[str] | None = None,
        predicates: Sequence[ColumnPredicate] = (),
        snapshot: int | None = None,
    ) -> tuple[pa.Table, dict[str, int]]:
        """Run a scan and return its rows with pruning statistics (for EXPLAIN and tests)."""
        plan = self._plan(columns, predicates, snapshot, None, False)
        table = self._reader(plan, False).read_all()
        return table, dict(plan.stats)

    def lookup(
        self,
        key: Sequence[object],
        columns: Sequence[str] | None = None,
        snapshot: int | None = None,
    ) -> dict[str, object] | None:
        """The live row with primary key ``key`` (a tuple of key values), or None.

        At the latest snapshot this is a fast path that touches one row of one rowset
        (dict probe in the MemRowSet; min/max key, bloom filter and key index in the
        DiskRowSets); at an explicit snapshot it is a scan with key equality predicates.
        """
        if snapshot is not None:
            preds = [
                ColumnPredicate.eq(c.name, v)
                for c, v in zip(self.schema.key_columns, key, strict=True)
            ]
            t = self.scan(columns, preds, snapshot=snapshot).read_all()
            return t.slice(0, 1).to_pylist()[0] if t.num_rows else None
        schema = self.schema
        proj = schema.columns if columns is None else [schema.column(c) for c in columns]
        try:
            enc = encode_key(key, self._key_types)
        except Error as e:
            raise ProgrammingError(f"bad primary key {tuple(key)!r}: {e}") from e
        rs = self._rowsets
        for m in (rs.mrs, *rs.frozen) if rs.frozen else (rs.mrs,):
            slot = m.lookup_one(enc)
            if slot >= 0 and m.is_alive(slot):
                return m.row_at(slot, proj)
        for i in rs.covering(enc):
            d = rs.drs[i]
            rid = d.find_rowid_one(enc)
            if rid >= 0 and not d.dead_at_latest()[rid]:
                return d.row_at(rid, proj)
        return None

    def stored_rows(self) -> int:
        """Rows in the memory stores and DiskRowSets, deleted ones included (cheap)."""
        rs = self._rowsets
        return (
            rs.mrs.num_slots + sum(f.num_slots for f in rs.frozen) + sum(d.num_rows for d in rs.drs)
        )

    def count_rows(self, snapshot: int | None = None) -> int:
        first = self.schema.key_columns[0].name
        return sum(b.num_rows for b in self.scan([first], snapshot=snapshot))

    def rowsets_info(self) -> list[dict[str, Any]]:
        rs = self._rowsets
        out: list[dict[str, Any]] = [
            {"kind": "memrowset", "id": rs.mrs.id, "rows": rs.mrs.num_slots, "bytes": rs.mrs.bytes}
        ]
        out.extend(
            {
                "kind": "diskrowset",
                "id": d.id,
                "rows": d.num_rows,
                "live_rows": d.live_count(),
                "min_key": d.meta.min_key.hex(),
                "max_key": d.meta.max_key.hex(),
                "base_bytes": d.meta.base_bytes,
                "raw_bytes": d.meta.raw_bytes or d.meta.base_bytes,
                **d.delta_stats(),
            }
            for d in rs.drs
        )
        return out


class _RowSetSwap:
    """A tablet's served rowsets while ``Tablet.rowset_swap`` holds its write lock."""

    def __init__(self, tablet: Tablet) -> None:
        self._tablet = tablet
        self.migrate = tablet._migrate
        self.replace = tablet._replace_rowsets

    @property
    def served(self) -> RowSets:
        return self._tablet._rowsets


class _Healthy:
    """``Tablet._healthy``'s context manager: the locks on a healthy tablet. It keeps no
    state of one use, so each tablet has one per lock set, reentered by nested holds
    (the locks are reentrant). A class, not a generator: every write takes it, and a
    generator with an ``ExitStack`` cost a one-row write 2.5 us."""

    __slots__ = ("_maint", "_t")

    def __init__(self, t: Tablet, maint: bool) -> None:
        self._t = t
        self._maint = maint

    def __enter__(self) -> None:
        t = self._t
        while True:
            if t._failed is not None:
                with t._maint_lock, t._write_lock:
                    t._check_open()  # closed while this waited
                    if t._failed is not None:
                        t._recover()
            if self._maint:
                t._maint_lock.acquire()
            t._write_lock.acquire()
            if t._failed is None:
                if t._closed:
                    self.__exit__()
                    t._check_open()
                return
            self.__exit__()

    def __exit__(self, *exc: object) -> None:
        self._t._write_lock.release()
        if self._maint:
            self._t._maint_lock.release()


def _dedupe_diff(table: pa.Table, keys: pa.Array[Any]) -> pa.Table:
    """A key can appear twice in a diff scan (a deleted ghost and its reinsertion):
    keep the live copy."""
    n = len(keys)
    if n < 2 or pc.count_distinct(keys).as_py() == n:
        return table
    same_next = np.zeros(n, dtype=bool)
    same_next[:-1] = np.asarray(
        pc.equal(keys.slice(0, n - 1), keys.slice(1)).to_numpy(zero_copy_only=False), dtype=bool
    )
    deleted = np.asarray(table.column("is_deleted").to_numpy(), dtype=bool)
    keep = np.ones(n, dtype=bool)
    # Within a run of equal keys keep one row: the live one if any, else the first.
    run_start = np.r_[True, ~same_next[:-1]]
    run_id = np.cumsum(run_start) - 1
    nruns = int(run_id[-1]) + 1
    has_live = np.zeros(nruns, dtype=bool)
    np.logical_or.at(has_live, run_id, ~deleted)
    keep &= np.where(has_live[run_id], ~deleted, run_start)
    # If several live copies existed (cannot happen), keep the first of them.
    for_keep = np.flatnonzero(keep)
    _, first_idx = np.unique(run_id[for_keep], return_index=True)
    final = np.zeros(n, dtype=bool)
    final[for_keep[first_idx]] = True
    return table.filter(pa.array(final))
