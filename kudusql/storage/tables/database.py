"""A database: a directory of tables, each split into tablets (Kudu's master and
tablet servers on one machine, embedded in the process).

Layout: ``catalog.meta`` (``catalog.py``), ``LOCK`` (one writer process), and
``tablets/<id>/`` (one Tablet directory each). Every tablet of the database shares one
HybridClock, one MVCC manager for multi-tablet batches, one block cache, one thread pool
and one maintenance manager.

Opening refuses a directory that is not a database, and creates a new database only in
a missing or empty one (``directory.py``).

DDL is crash-safe by ordering: CREATE writes the new tablets and then commits them by
saving the catalog (which advances ``next_tablet_id`` past them); DROP commits the
catalog, recording the dropped tablets as pending deletion, and then deletes them; ALTER
commits the catalog and then brings the tablets to the new schema. At open, the writer
deletes the tablet directories the catalog proves garbage (an id at or past
``next_tablet_id``, or pending deletion) and alters tablets behind the catalog's schema
version, so an interrupted DDL statement is either fully done or not at all. A tablet
directory the catalog does not explain is never deleted.

A read-only view (``read_only=True``) follows the writer process: ``refresh`` (which
the SQL session runs before each statement, through ``statement``) compares
fingerprints of the files the view read (``fingerprint.py``: the catalog, the commit
log, the superblock and WAL of each open tablet) with the disk, and takes up what
changed: a new catalog (tables created, dropped, altered), a new read point from the
commit log, and a fresh open of each tablet whose files changed. A tablet it replaces
closes once no statement of the process is running on the view.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from kudusql.common.errors import NotSupportedError, OperationalError, ProgrammingError
from kudusql.common.hybrid_time import HybridClock, describe, from_micros, wall_micros
from kudusql.common.options import TabletOptions
from kudusql.common.schema import Schema
from kudusql.storage.cfile import BlockCache
from kudusql.storage.fs.lock import DirLock
from kudusql.storage.fs.meta_file import load_json, save_json
from kudusql.storage.tables import catalog, directory, system_tables
from kudusql.storage.tables.alter import AlterStep, apply_alter
from kudusql.storage.tables.catalog import TableMeta, TabletEntry
from kudusql.storage.tables.fingerprint import (
    Fingerprint,
    catalog_fingerprint,
    tablet_fingerprint,
    txn_log_fingerprint,
)
from kudusql.storage.tables.partition import Partition, PartitionSchema
from kudusql.storage.tables.table import Table
from kudusql.storage.tables.table_rules import (
    NUM_REPLICAS_PROPERTY,
    check_altered,
    new_table_meta,
    num_replicas_property,
)
from kudusql.storage.tables.txn_log import (
    TXN_LOG_DIR,
    ReadPoint,
    TxnLog,
    read_point,
    read_state,
)
from kudusql.storage.tablet.maintenance import MaintenanceManager
from kudusql.storage.tablet.mvcc import MvccManager
from kudusql.storage.tablet.tablet import Tablet

if TYPE_CHECKING:
    from kudusql.storage.tables.handles import ScanTokenHandle
    from kudusql.storage.tables.scan_token import ScanToken

log = logging.getLogger(__name__)


class ConcurrentDdlError(OperationalError):
    """A read-only view met a table the writer dropped or altered after the view read
    the catalog (its tablets gone, or on another schema); a new statement sees the
    writer's catalog."""


class TableRuntime:
    """A table's catalog entry, its partitions and its (lazily opened) tablets."""

    def __init__(self, db: Database, meta: TableMeta) -> None:
        self.db = db
        self.meta = meta
        self.partitions: list[Partition] = meta.partitions()
        self.write_lock = threading.RLock()
        self._tablets: dict[int, Tablet] = {}
        #: A read-only view's fingerprint of each open tablet, taken before its open,
        #: and the refresh (``Database.epoch``) each was last checked against the disk at.
        self.fingerprints: dict[int, Fingerprint] = {}
        self.checked: dict[int, int] = {}
        self._open_lock = threading.Lock()

    def tablet(self, slot: int) -> Tablet:
        meta = self.meta
        entry = meta.tablets[slot]
        t = self._tablets.get(entry.id)
        if t is not None and (not self.db.read_only or self.checked.get(entry.id) == self.db.epoch):
            return t
        with self._open_lock:
            t = self._tablets.get(entry.id)
            if not self.db.read_only:
                if t is None:
                    t = self.db._open_tablet(entry.id, meta.schema)
                    self._tablets[entry.id] = t
                return t
            # A read-only view checks a tablet once per refresh, at its first use after
            # it: its files are then looked at after the refresh read the clock.
            epoch = self.db.epoch
            if (
                t is not None
                and self.checked.get(entry.id) != epoch
                and tablet_fingerprint(self.db.path, entry.id) != self.fingerprints.get(entry.id)
            ):
                self.db._retire(self, entry.id)
                t = None
            if t is None:
                t = self._open_read_only(entry.id, meta)
                self._tablets[entry.id] = t
            self.checked[entry.id] = epoch
        return t

    def _open_read_only(self, tablet_id: int, meta: TableMeta) -> Tablet:
        """Open a tablet of a read-only view on the catalog's schema. The writer brings
        every tablet to a new schema right after it saves the catalog (``alter_table``);
        a tablet still on the old one is waited for."""
        deadline = time.monotonic() + self.db.READ_POINT_WAIT_S
        while True:
            fp = tablet_fingerprint(self.db.path, tablet_id)
            try:
                t = self.db._open_tablet(tablet_id, meta.schema)
            except (OperationalError, OSError):
                self.db._check_catalog_unchanged(meta.name)  # its files went with a DROP
                raise
            if t.schema == meta.schema:
                self.fingerprints[tablet_id] = fp
                return t
            t.close()
            self.db._check_catalog_unchanged(meta.name)  # else the writer is ahead of the view
            if time.monotonic() > deadline:
                raise OperationalError(
                    f"tablet {tablet_id} of table {meta.name!r} is still on an older schema "
                    "than the catalog: the writer process has not finished an ALTER TABLE "
                    "(it completes it when it opens the database again)"
                )
            time.sleep(0.01)

    def tablets(self) -> list[Tablet]:
        return [self.tablet(i) for i in range(len(self.meta.tablets))]

    def opened(self) -> dict[int, Tablet]:
        return dict(self._tablets)

    def forget(self, tablet_id: int) -> Tablet | None:
        return self._tablets.pop(tablet_id, None)


class Database:
    """Open (creating if needed) the database at ``path``; ``read_only=True`` opens a view
    another process may hold while one writer process works."""

    def __init__(
        self,
        path: str,
        options: TabletOptions | None = None,
        *,
        read_only: bool = False,
        create: bool = True,
        clock: HybridClock | None = None,
        maintenance: bool = True,
        maintenance_manager: MaintenanceManager | None = None,
    ) -> None:
        self.path = directory.database_path(path)
        self.options = options or TabletOptions()
        self.read_only = read_only
        self.master_address: str | None = None  # embedded: no master
        self._lock: DirLock | None = None
        directory.check_openable(self.path, read_only=read_only, create=create)
        if not read_only:
            directory.make_directory(self.path)
            self._lock = DirLock(self.path)
            self._lock.acquire()
        try:
            if not catalog.exists(self.path):
                # the directory may have changed before the lock was ours
                directory.check_openable(self.path, read_only=read_only, create=create)
                directory.create(self.path, sync=self.options.sync)
            self._catalog_fp = catalog_fingerprint(self.path)
            self._state = catalog.load(self.path)
            if not read_only:
                self._remove_garbage()
        except BaseException:
            if self._lock is not None:
                self._lock.release()
            raise
        self.clock = clock or HybridClock()
        self._txns: TxnLog | None = None
        self._read_point: ReadPoint | None = None
        self._poisoned: str | None = None
        #: A read-only view's commit log as last read: its fingerprint (taken before the
        #: read), the committed transactions (timestamp -> participant tablets) and the
        #: timestamp bounds of the transactions begun with no outcome.
        self._txn_fp: Fingerprint = ()
        self._committed: dict[int, frozenset[int]] = {}
        self._in_flight: list[int] = []
        #: Tablets a refresh replaced, closed once no statement runs (``statement``).
        self._retired: list[Tablet] = []
        self._statements = 0
        self._refresh_lock = threading.Lock()
        #: Counts a read-only view's refreshes (``TableRuntime.tablet`` checks by it).
        self.epoch = 0
        txn_dir = os.path.join(self.path, TXN_LOG_DIR)
        try:
            if read_only:
                before = from_micros(wall_micros())
                self._read_txn_log()
                self._read_point = self._next_read_point(before)
            else:
                self._txns = TxnLog(txn_dir, self.clock, self.options.wal_fsync)
        except BaseException:
            if self._lock is not None:
                self._lock.release()
            raise
        self.mvcc = MvccManager(self.clock)
        self.cache = BlockCache(self.options.block_cache_bytes)
        self.pool = ThreadPoolExecutor(max(2, self.options.threads), thread_name_prefix="db")
        self.maintenance = maintenance_manager
        self._own_maintenance = False
        if self.maintenance is None and maintenance and not read_only:
            self.maintenance = MaintenanceManager()
            self._own_maintenance = True
        self._ddl_lock = threading.RLock()
        self._runtimes: dict[int, TableRuntime] = {}
        self._closed = False
        if self._txns is not None and self._txns.pending_tablets():
            self._roll_forward()
        if not read_only:
            self.purge_expired_tables()

    def _roll_forward(self) -> None:
        """Open the participants of committed transactions that have not proved them
        yet (a crash came between a COMMIT and their markers): each applies its part
        and flushes it at its open, and the commit log can then forget them."""
        assert self._txns is not None
        pending = self._txns.pending_tablets()
        for meta in list(self._state.tables.values()):
            for slot, entry in enumerate(meta.tablets):
                if entry.id in pending:
                    self._runtime(meta.id).tablet(slot)
        listed = {e.id for m in self._state.tables.values() for e in m.tablets}
        self._txns.forget_tablets(pending - listed)  # dropped since
        self._txns.checkpoint()

    # -- lifecycle ----------------------------------------------------------------------------
    def close(self) -> None:
        """Stop maintenance, close every tablet (their WALs are synced) and unlock."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._own_maintenance and self.maintenance is not None:
                self.maintenance.stop()
            for rt in self._runtimes.values():
                for t in rt.opened().values():
                    t.close()
            for t in self._retired:
                t.close()
            self._retired = []
            if self._txns is not None:
                self._txns.close()
        finally:
            self.pool.shutdown(wait=True)
            if self._lock is not None:
                self._lock.release()

    def abandon(self) -> None:
        """Drop everything as a crash would (tests)."""
        self._closed = True
        if self._own_maintenance and self.maintenance is not None:
            self.maintenance.stop()
        for rt in self._runtimes.values():
            for t in rt.opened().values():
                t.abandon()
        if self._txns is not None:
            self._txns.abandon()
        self.pool.shutdown(wait=True)
        if self._lock is not None:
            self._lock.release()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise ProgrammingError(f"database {self.path} is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self.read_only:
            raise OperationalError(f"database {self.path} is open read-only")
        if self._poisoned is not None:
            raise OperationalError(
                f"database {self.path} takes no more writes: {self._poisoned}; open it again"
            )

    def poison(self, reason: str) -> None:
        """Refuse every write from now on (PostgreSQL's answer to a failed commit fsync:
        what the disk holds is known only to a new open)."""
        log.error("database %s: refusing writes: %s", self.path, reason)
        self._poisoned = reason

    def txn_log(self) -> TxnLog:
        """The commit log of multi-tablet writes (writers only)."""
        self._check_writable()
        assert self._txns is not None
        return self._txns

    def _txn_committed(self, ts: int) -> bool:
        if self._txns is not None:
            return self._txns.is_committed(ts)
        return ts in self._committed

    def _remove_garbage(self) -> None:
        """Delete the tablet directories the catalog proves garbage (``directory.py``):
        an interrupted CREATE or ADD RANGE, a DROP not yet carried out. Keep, with a
        warning, every other one no table lists."""
        directory.make_directory(os.path.join(self.path, catalog.TABLETS_DIR))
        found = directory.survey(self.path, self._state)
        for name in found.unexplained:
            log.warning(
                "keeping %s: no table of the catalog lists it and the catalog does not show "
                "it is garbage (delete it by hand if it is not needed)",
                os.path.join(self.path, catalog.TABLETS_DIR, name),
            )
        for tablet_id in found.uncommitted:
            log.info("removing tablet %d of a CREATE/ALTER that never committed", tablet_id)
            directory.delete_tablet(self.path, tablet_id)
        if self._state.pending_deletion:
            self._delete_dropped(self._state.pending_deletion)

    def _delete_dropped(self, tablet_ids: Iterable[int]) -> None:
        """Delete the tablets of a committed drop (listed in ``pending_deletion``), then
        clear them from the list. The drop has committed whatever happens here: what
        fails to go stays listed, for the next open."""
        gone = {i for i in tablet_ids if directory.delete_tablet(self.path, i)}
        if not gone:
            return
        state = self._state.copy()
        state.pending_deletion = [i for i in state.pending_deletion if i not in gone]
        try:
            catalog.save(self.path, state, sync=self.options.sync)
        except OperationalError as e:
            log.warning("could not clear deleted tablets from the catalog: %s", e)
            return
        self._state = state

    def _open_tablet(self, tablet_id: int, schema: Schema) -> Tablet:
        self._check_open()
        t = Tablet.open(
            catalog.tablet_path(self.path, tablet_id),
            self.options,
            read_only=self.read_only,
            clock=self.clock,
            cache=self.cache,
            txn_committed=self._txn_committed,
        )
        txns = self._txns
        if txns is not None:
            txns.tablet_opened(tablet_id)
            t.on_txn_proved = lambda ts: txns.finalized(ts, tablet_id, t)
        if not self.read_only and t.schema != schema:
            t.alter_schema(schema)  # an ALTER committed in the catalog, not yet here
        if self.maintenance is not None:
            t.attach(self.maintenance)
        return t

    def forget_tablet(self, tablet_id: int) -> None:
        """Close tablet ``tablet_id`` if open here; the next use opens it again from disk
        (a read-only process keeping an open, see ``fingerprint``)."""
        for rt in list(self._runtimes.values()):
            t = rt.forget(tablet_id)
            if t is not None:
                t.close()

    # -- a read-only view following the writer --------------------------------------------------
    @contextlib.contextmanager
    def statement(self) -> Iterator[None]:
        """Around one statement: a read-only view first takes up what the writer
        published (``refresh``); tablets replaced meanwhile close once no statement of
        this process runs here. Nothing for a writer."""
        if not self.read_only:
            yield
            return
        self.refresh(tablets=False)
        with self._refresh_lock:
            self._statements += 1
        try:
            yield
        finally:
            with self._refresh_lock:
                self._statements -= 1
            self._close_retired()

    def refresh(self, *, tablets: bool = True) -> bool:
        """Take up what the writer process published since this read-only view last
        looked; whether any file it had read changed. Files are compared by
        fingerprint (``stat`` calls); what changed is read again:

        - the catalog: tables created, dropped, renamed or altered; the open tablets
          of a dropped table, a dropped partition or another schema are replaced;
        - the commit log: the read point moves up to the clock as read before any
          file was looked at, below every transaction still without an outcome (a
          writer killed in the middle of one holds the view below it until a writer
          opens the database again), and the participants of transactions committed
          since are opened again (their parts may have been skipped at their open);
        - every open tablet whose superblock or WAL changed is opened again: now, or
          with ``tablets=False`` (what each statement does: a point lookup should not
          pay for a look at every tablet) at its first use after this refresh.

        Every tablet kept or opened later holds everything below the new read point:
        its files were looked at after the clock was read. Nothing for a writer."""
        if not self.read_only:
            return False
        self._check_open()
        with self._ddl_lock:
            before = from_micros(wall_micros())
            changed = False
            cat = catalog_fingerprint(self.path)
            if cat != self._catalog_fp:
                self._reload_catalog(cat)
                changed = True
            reopen: set[int] = set()
            if txn_log_fingerprint(self.path) != self._txn_fp:
                changed = True
                old = self._committed
                self._read_txn_log()
                for ts, ids in self._committed.items():
                    if ts not in old:
                        reopen |= ids
            for rt in list(self._runtimes.values()):
                for tablet_id in rt.opened():
                    if tablet_id in reopen or (
                        tablets
                        and rt.fingerprints.get(tablet_id)
                        != tablet_fingerprint(self.path, tablet_id)
                    ):
                        self._retire(rt, tablet_id)
                        changed = True
            self._read_point = self._next_read_point(before)
            self.epoch += 1
        self._close_retired()
        return changed

    def _read_txn_log(self) -> None:
        self._txn_fp = txn_log_fingerprint(self.path)  # before the read
        state = read_state(os.path.join(self.path, TXN_LOG_DIR))
        self._committed = dict(state.committed)
        self._in_flight = list(state.in_flight.values())

    def _next_read_point(self, before: int) -> ReadPoint:
        """Below the clock as read before the files were looked at, and below every
        transaction begun with no outcome in the commit log as last read."""
        return ReadPoint(min([before, *self._in_flight]), frozenset(self._committed))

    def _reload_catalog(self, fp: Fingerprint) -> None:
        state = catalog.load(self.path)
        by_id = {m.id: m for m in state.tables.values()}
        for table_id, rt in list(self._runtimes.items()):
            meta = by_id.get(table_id)
            if meta is None:
                del self._runtimes[table_id]
                for tablet_id in rt.opened():
                    self._retire(rt, tablet_id)
                continue
            listed = {e.id for e in meta.tablets}
            for tablet_id, t in rt.opened().items():
                if tablet_id not in listed or t.schema != meta.schema:
                    self._retire(rt, tablet_id)
            rt.meta = meta
            rt.partitions = meta.partitions()
        self._state = state
        self._catalog_fp = fp

    def _check_catalog_unchanged(self, table: str) -> None:
        """ConcurrentDdlError if the writer saved a new catalog since this view read it."""
        if self.read_only and catalog_fingerprint(self.path) != self._catalog_fp:
            raise ConcurrentDdlError(
                f"table {table!r} was dropped or altered by the writer process while this "
                "statement read it; run the statement again"
            )

    def _retire(self, rt: TableRuntime, tablet_id: int) -> None:
        t = rt.forget(tablet_id)
        rt.fingerprints.pop(tablet_id, None)
        if t is not None:
            with self._refresh_lock:
                self._retired.append(t)

    def _close_retired(self) -> None:
        with self._refresh_lock:
            if self._statements:
                return
            done, self._retired = self._retired, []
        for t in done:
            t.close()

    # -- time ----------------------------------------------------------------------------------
    def snapshot(self, ts: int | None = None) -> int:
        """``ts`` once every batch before it has applied; or the latest snapshot that sees
        every finished batch and no unfinished one.

        A read-only view reads as of its open (``read_point``): its tablets open lazily,
        later, and a snapshot past that point could see a multi-tablet write in one
        tablet and not in another. Asked for a later snapshot, it moves its read point
        there and reopens its tablets."""
        rp = self._read_point
        if ts is None:
            latest = self.mvcc.latest_snapshot()
            return latest if rp is None else min(latest, rp.timestamp)
        self.mvcc.wait_for_snapshot(ts)  # refuses a snapshot in the future
        if rp is not None and ts > rp.timestamp:
            self._advance_read_point(ts)
        return ts

    #: How long a read-only view waits for the writer's transactions below a snapshot it
    #: is asked for to finish.
    READ_POINT_WAIT_S = 30.0

    def _advance_read_point(self, ts: int) -> None:
        """Move a read-only view to a read point at or after ``ts`` (once every
        transaction below it has its outcome), reopening its tablets there."""
        deadline = time.monotonic() + self.READ_POINT_WAIT_S
        txn_dir = os.path.join(self.path, TXN_LOG_DIR)
        while read_point(txn_dir).timestamp < ts:
            if time.monotonic() > deadline:
                raise OperationalError(
                    f"snapshot {describe(ts)}: a write of the writer process below it "
                    f"has not finished after {self.READ_POINT_WAIT_S:g} s"
                )
            time.sleep(0.01)
        with self._ddl_lock:
            # Read points only grow (a transaction begun after a read is above its
            # clock), so this one is at or after the one waited for.
            before = from_micros(wall_micros())
            self._read_txn_log()
            rp = self._next_read_point(before)
            for rt in list(self._runtimes.values()):
                for tablet_id in list(rt.opened()):
                    self._retire(rt, tablet_id)
            self._read_point = rp
        self._close_retired()

    def latest_timestamp(self) -> int:
        return self.snapshot()

    # -- tables --------------------------------------------------------------------------------
    # A soft-deleted table (Kudu's soft delete) keeps its catalog entry, its name and its
    # tablets until its reserve time passes: it is left out of ``table_names``,
    # ``has_table`` and ``table`` (so SQL does not see it) unless ``soft_deleted=True``
    # asks for it, and is gone for good once expired (``purge_expired_tables``).
    def _visible(self, meta: TableMeta | None, soft_deleted: bool) -> bool:
        if meta is None:
            return False
        if not meta.soft_deleted:
            return True
        return soft_deleted and not meta.expired(wall_micros())

    def table_names(self) -> list[str]:
        """The live tables' names, sorted (soft-deleted ones are not listed)."""
        self._check_open()
        return sorted(n for n, m in self._state.tables.items() if not m.soft_deleted)

    def soft_deleted_table_names(self) -> list[str]:
        """The soft-deleted tables still within their reserve time, sorted."""
        self._check_open()
        now = wall_micros()
        return sorted(
            n for n, m in self._state.tables.items() if m.soft_deleted and not m.expired(now)
        )

    def has_table(self, name: str, *, soft_deleted: bool = False) -> bool:
        return self._visible(self._state.tables.get(name), soft_deleted)

    def table_meta(self, name: str, *, soft_deleted: bool = False) -> TableMeta | None:
        """The catalog entry of table ``name`` (None if there is none)."""
        meta = self._state.tables.get(name)
        return meta if self._visible(meta, soft_deleted) else None

    def table(self, name: str, *, soft_deleted: bool = False) -> Table:
        self._check_open()
        meta = self._state.tables.get(name)
        if not self._visible(meta, soft_deleted):
            raise ProgrammingError(f"table {name!r} does not exist")
        assert meta is not None
        return Table(self, meta.id)

    def table_by_id(self, table_id: int | str, name: str | None = None) -> Table:
        """The table with this id, whatever its name now (``name`` is not needed)."""
        if not isinstance(table_id, int):
            raise ProgrammingError(f"table id {table_id!r} is not a table of {self.path}")
        self._runtime(table_id)
        return Table(self, table_id)

    def observed_timestamp(self) -> int | None:
        """None: an embedded database answers no one; each client tracks its own."""
        return None

    def scan_token(self, data: bytes | str) -> ScanToken:
        """A scan token planned on an embedded database, read back."""
        from kudusql.storage.tables.scan_token import ScanToken

        return ScanToken.deserialize(data)

    def scan_token_reader(
        self, token: ScanTokenHandle, *, ordered: bool = False
    ) -> pa.RecordBatchReader:
        """The rows of one token planned on this database."""
        own = self.scan_token(token.serialize())
        return own.execute(self, ordered=ordered)

    def _runtime(self, table_id: int) -> TableRuntime:
        self._check_open()
        rt = self._runtimes.get(table_id)
        if rt is not None:
            return rt
        with self._ddl_lock:
            rt = self._runtimes.get(table_id)
            if rt is None:
                meta = next((m for m in self._state.tables.values() if m.id == table_id), None)
                if meta is None:
                    raise ProgrammingError(f"table id {table_id} was dropped")
                rt = TableRuntime(self, meta)
                self._runtimes[table_id] = rt
        return rt

    def create_table(
        self,
        name: str,
        schema: Schema,
        partition_schema: PartitionSchema | None = None,
        *,
        properties: dict[str, str] | None = None,
        if_not_exists: bool = False,
        owner: str = "",
        comment: str = "",
    ) -> Table:
        """Create a table and its tablets (one per partition); nothing is visible, and
        nothing stays on disk, unless every tablet was created and the catalog saved."""
        self._check_writable()
        if not name:
            raise ProgrammingError("a table needs a name")
        replicas = num_replicas_property(properties)
        if replicas not in (None, 1):
            raise NotSupportedError(
                f"table property {NUM_REPLICAS_PROPERTY!r} = {replicas}: an embedded database"
                " keeps one copy of each tablet (replicas need a cluster: kudusql://HOST:PORT)"
            )
        ps = partition_schema or PartitionSchema()
        with self._ddl_lock:
            self.purge_expired_tables()
            existing = self._state.tables.get(name)
            if existing is not None:
                if existing.soft_deleted:
                    raise ProgrammingError(
                        f"table {name!r} already exists: it is soft-deleted (id "
                        f"{existing.id}); recall it or drop it first"
                    )
                if if_not_exists:
                    return self.table(name)
                raise ProgrammingError(f"table {name!r} already exists")
            state = self._state.copy()
            meta = new_table_meta(
                state.next_table_id,
                name,
                schema,
                ps,
                state.next_tablet_id,
                properties=properties,
                owner=owner,
                comment=comment,
                created_micros=wall_micros(),
            )
            entries = list(meta.tablets)
            state.next_tablet_id += len(entries)
            state.next_table_id += 1
            state.tables[name] = meta
            self._create_tablets(entries, schema)
            try:
                catalog.save(self.path, state, sync=self.options.sync)
            except BaseException:
                self._delete_tablets(entries)
                raise
            self._state = state
            return Table(self, meta.id)

    def _create_tablets(self, entries: Iterable[TabletEntry], schema: Schema) -> None:
        made: list[TabletEntry] = []
        try:
            for e in entries:
                Tablet.create(
                    catalog.tablet_path(self.path, e.id),
                    schema,
                    self.options,
                    clock=self.clock,
                    cache=self.cache,
                ).close()
                made.append(e)
        except BaseException:
            self._delete_tablets([*made, *[e for e in entries if e not in made]])
            raise

    def _delete_tablets(self, entries: Iterable[TabletEntry]) -> None:
        """Delete tablets of a CREATE or ADD RANGE that did not commit."""
        for e in entries:
            directory.delete_tablet(self.path, e.id)

    def drop_table(self, name: str, *, if_exists: bool = False, soft_deleted: bool = False) -> None:
        """Drop a table: the catalog forgets it at once, then its tablets are deleted.
        ``soft_deleted=True`` also drops a soft-deleted table of that name."""
        self._check_writable()
        with self._ddl_lock:
            meta = self._state.tables.get(name)
            if meta is not None and meta.soft_deleted and not soft_deleted:
                meta = None
            if meta is None:
                if if_exists:
                    return
                raise ProgrammingError(f"table {name!r} does not exist")
            rt = self._runtimes.get(meta.id)
            lock = rt.write_lock if rt is not None else threading.RLock()
            with lock:
                dropped = [e.id for e in meta.tablets]
                state = self._state.copy()
                del state.tables[name]
                state.pending_deletion.extend(dropped)
                catalog.save(self.path, state, sync=self.options.sync)
                self._state = state
                self._runtimes.pop(meta.id, None)
                if rt is not None:
                    for t in rt.opened().values():
                        t.close(flush=False)
                self._delete_dropped(dropped)
                if self._txns is not None:
                    self._txns.forget_tablets(e.id for e in meta.tablets)

    def alter_table(self, name: str, steps: Sequence[AlterStep]) -> Table:
        """Apply ALTER TABLE steps atomically (``alter.py``): new range partitions get new
        tablets before the catalog commits; dropped ones are deleted after it commits;
        schema changes reach every tablet after it commits (and at the next open, if
        interrupted). Writes to the table wait while it runs."""
        self._check_writable()
        with self._ddl_lock:
            meta = self._state.tables.get(name)
            if meta is None or meta.expired(wall_micros()):
                raise ProgrammingError(f"table {name!r} does not exist")
            if meta.soft_deleted:
                raise ProgrammingError(
                    f"soft_deleted table {name} should not be altered (recall it first)"
                )
            rt = self._runtime(meta.id)
            with rt.write_lock:
                res = apply_alter(meta, steps, self._state.next_tablet_id)
                new = res.meta
                check_altered(name, res)
                if new.name != name and new.name in self._state.tables:
                    raise ProgrammingError(f"table {new.name!r} already exists")
                self._create_tablets(res.added, new.schema)
                state = self._state.copy()
                del state.tables[name]
                state.tables[new.name] = new
                state.next_tablet_id = res.next_tablet_id
                state.pending_deletion.extend(e.id for e in res.dropped)
                try:
                    catalog.save(self.path, state, sync=self.options.sync)
                except BaseException:
                    self._delete_tablets(res.added)
                    raise
                self._state = state
                for e in res.dropped:
                    t = rt.forget(e.id)
                    if t is not None:
                        t.close(flush=False)
                if res.dropped:
                    self._delete_dropped(e.id for e in res.dropped)
                rt.meta = new
                rt.partitions = new.partitions()
                if res.schema_changed:
                    # Every tablet, opened or not, takes the new schema now (as Kudu
                    # alters every replica): a read-only view opening a tablet then
                    # finds the catalog's schema, and waits only while this runs.
                    for t in rt.tablets():
                        if t.schema != new.schema:
                            t.alter_schema(new.schema)
        return Table(self, new.id)

    def _replace_meta(self, old: TableMeta, new: TableMeta) -> None:
        """Save the catalog with ``old``'s entry replaced by ``new`` (same tablets)."""
        state = self._state.copy()
        del state.tables[old.name]
        state.tables[new.name] = new
        catalog.save(self.path, state, sync=self.options.sync)
        self._state = state
        rt = self._runtimes.get(new.id)
        if rt is not None:
            rt.meta = new

    def soft_drop_table(self, name: str, reserve_seconds: int) -> None:
        """Soft-delete a live table (Kudu's ``SoftDeleteTable``): it is hidden, keeps its
        name and data, and stays recallable (``recall_table``) for ``reserve_seconds``;
        then it is purged. ``reserve_seconds <= 0`` drops it at once."""
        self._check_writable()
        if isinstance(reserve_seconds, bool) or not isinstance(reserve_seconds, int):
            raise ProgrammingError(
                f"reserve_seconds is a number of seconds, not {reserve_seconds!r}"
            )
        with self._ddl_lock:
            self.purge_expired_tables()
            meta = self._state.tables.get(name)
            if meta is None:
                raise ProgrammingError(f"table {name!r} does not exist")
            if meta.soft_deleted:
                raise ProgrammingError(
                    f"soft_deleted table {name} should not be soft deleted again"
                )
            if reserve_seconds <= 0:
                self.drop_table(name)
                return
            self._replace_meta(
                meta,
                meta.with_(soft_deleted_micros=wall_micros(), reserve_seconds=reserve_seconds),
            )

    def recall_table(self, table_id: int, new_name: str | None = None) -> Table:
        """Bring back a soft-deleted table within its reserve time (Kudu's
        ``RecallTable``), under ``new_name`` if given."""
        self._check_writable()
        with self._ddl_lock:
            self.purge_expired_tables()
            meta = next((m for m in self._state.tables.values() if m.id == table_id), None)
            if meta is None:
                raise ProgrammingError(
                    f"table id {table_id} does not exist (dropped, or purged when its "
                    "reserve time passed): can't recall"
                )
            if not meta.soft_deleted:
                raise ProgrammingError(
                    f"table {meta.name!r} (id {table_id}) is not soft-deleted: can't recall"
                )
            name = new_name or meta.name
            if name != meta.name and name in self._state.tables:
                raise ProgrammingError(f"table {name!r} already exists")
            self._replace_meta(
                meta, meta.with_(name=name, soft_deleted_micros=0, reserve_seconds=0)
            )
            return Table(self, meta.id)

    def purge_expired_tables(self) -> list[str]:
        """Drop the soft-deleted tables whose reserve time has passed; their names.
        A writer runs it at open and before soft deletes, recalls and creations; a
        read-only view only hides them."""
        if self.read_only or self._closed:
            return []
        now = wall_micros()
        with self._ddl_lock:
            gone = [n for n, m in self._state.tables.items() if m.expired(now)]
            for n in gone:
                self.drop_table(n, soft_deleted=True, if_exists=True)
        return gone

    def _set_statistics(self, table_id: int, stats: dict[str, Any]) -> None:
        if self.read_only:
            return
        with self._ddl_lock:
            rt = self._runtime(table_id)
            state = self._state.copy()
            new = rt.meta.with_(statistics=stats)
            state.tables[new.name] = new
            catalog.save(self.path, state, sync=self.options.sync)
            self._state = state
            rt.meta = new

    # -- metadata files of the layers above ---------------------------------------------------
    def system_table(self, name: str) -> pa.Table:
        """The rows of the ``sys`` table ``name`` (``system_tables.py``)."""
        return system_tables.system_table(self, name)

    def load_meta_file(self, name: str, magic: bytes, version: int, what: str) -> Any:
        """The body of the metadata file ``name`` in the database directory (checksummed
        JSON, ``storage/fs/meta_file.py``), or None if there is none. The layers above
        keep their own small records there (the SQL database registry); CorruptionError,
        naming the file, if a check fails."""
        path = os.path.join(self.path, name)
        if not os.path.exists(path):
            return None
        return load_json(path, magic, version, what)

    def save_meta_file(self, name: str, magic: bytes, version: int, body: Any) -> None:
        """Replace the metadata file ``name`` in the database directory atomically with
        ``body`` (JSON values), durably under the database's ``sync`` option."""
        if self.read_only:
            raise OperationalError(f"database {self.path} is open read-only")
        save_json(os.path.join(self.path, name), magic, version, body, sync=self.options.sync)

    # -- maintenance ---------------------------------------------------------------------------
    def run_maintenance(self, **kw: Any) -> None:
        """Flush, compact and GC every open tablet now."""
        for rt in list(self._runtimes.values()):
            for t in rt.opened().values():
                t.run_maintenance(**kw)


def connect(path: str, **kw: Any) -> Database:
    """Open (or create) the database at ``path`` (``Database`` keyword arguments)."""
    return Database(path, **kw)
