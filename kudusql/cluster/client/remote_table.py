"""``RemoteTable``: the embedded ``Table``'s read and write surface over tablet servers
(Kudu's ``KuduTable`` / ``KuduSession`` / ``KuduScanner`` on a cluster).

It routes and prunes exactly as the embedded table does: the same partition schema,
``partition_for_batch`` for writes and ``prune_partitions`` for scans, so the same data
gives the same answers. A partition is mapped to its tablet through the ``MetaCache``
by partition key start.

Writes: a batch is split by tablet, each part goes to its tablet server in parallel, and
the per-row errors of every part come back with their row indexes in the caller's batch,
merged with the errors of rows no range partition covers, as the embedded table reports
them. Each tablet applies its part atomically at its own HybridTime (Kudu's per-tablet
atomicity); a batch that spans tablets is not one transaction.

Reads: a statement reads every tablet at one snapshot: the caller's, or else the
session's latest observed HybridTime (a server is asked for its clock when the session
has seen none), so a read sees every write the session saw acknowledged. Each server
waits for its safe time before answering.

Stale locations: a call that finds its tablet gone (``TabletNotFound``) or its server
unreachable (``ServiceUnavailable``; for writes only ``TabletNotFound`` or
``ConnectionRefused``, as a write that may have reached a server is sent again only
under its request id, by the pool) drops the table's cached locations and is tried
once more on fresh ones. Writes are exactly-once (``TabletServerPool.write``).

Replicated tablets: writes go to the leader and follow ``NotTheLeader``, the next
replica and fresh locations, every attempt under one request id, until the retry
policy's deadline (``_write_tablet``); reads go to the leader as last located, and to
the leader on fresh locations when it is gone (``_read_replicated``).
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kudusql.cluster.client.meta_cache import LocatedTablet, MetaCache, TableLocations
from kudusql.cluster.client.scan_token import RemoteScanToken
from kudusql.cluster.client.tserver_client import KEY_INDEX_COLUMN, TabletServerPool
from kudusql.cluster.errors import (
    ConnectionRefused,
    NotTheLeader,
    RpcTimedOut,
    SafeTimeTimeout,
    ServiceUnavailable,
    TabletNotFound,
)
from kudusql.cluster.tablet_partition import routing_keys
from kudusql.cluster.tserver.messages import WriteResponse
from kudusql.common.errors import DataError, Error, ProgrammingError
from kudusql.common.parallel import parallel_batches
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
from kudusql.storage.tables.catalog import TableMeta, TabletEntry
from kudusql.storage.tables.partition import (
    NO_TABLET_MESSAGE,
    Partition,
    PartitionSchema,
    create_partitions,
    partition_for_batch,
    partition_for_row,
)
from kudusql.storage.tables.pruning import prune_partitions
from kudusql.storage.tables.statistics import column_statistics

__all__ = ["RemoteTable"]

T = TypeVar("T")

#: Seconds a table's stored-row estimate (for progress reports) is reused.
ESTIMATE_TTL_S = 5.0

#: Batches a scan hands back at most (rows).
SCAN_BATCH_ROWS = 64 * 1024


class RemoteTable(WriteShortcuts):
    """Table ``name`` with ``schema`` and ``partition_schema`` (as the master has them),
    its tablets found through ``meta_cache`` and called through ``servers``."""

    def __init__(
        self,
        name: str,
        schema: Schema,
        partition_schema: PartitionSchema,
        meta_cache: MetaCache,
        servers: TabletServerPool,
        *,
        threads: int = 8,
        meta: TableMeta | None = None,
        now: Callable[[], int] | None = None,
        write_lock: threading.RLock | None = None,
        table_id: str = "",
        master: str = "",
    ) -> None:
        #: The master's id of the table (kept across renames).
        self.id = table_id
        self.master = master
        self.name = name
        self.schema = schema
        self.partition_schema = partition_schema
        self.partitions: list[Partition] = create_partitions(partition_schema, schema)
        self.meta_cache = meta_cache
        self.servers = servers
        self.threads = threads
        #: The table's catalog entry as the SQL layers know it (its tablet ids are the
        #: partitions' positions; the servers' tablet ids are in the locations).
        self.meta = meta or TableMeta(
            0,
            name,
            schema,
            partition_schema,
            tuple(TabletEntry.of(i, p) for i, p in enumerate(self.partitions)),
        )
        self._now = now
        self._write_lock = write_lock or threading.RLock()
        self._estimate: tuple[float, int] | None = None
        self._rng = random.Random()
        #: Keeps COMPUTE STATS' result with the table (set by the database).
        self.on_statistics: Callable[[dict[str, Any]], None] | None = None

    @property
    def num_tablets(self) -> int:
        return len(self.partitions)

    def __repr__(self) -> str:
        return f"RemoteTable({self.name!r}, {len(self.partitions)} tablets)"

    # -- locations ------------------------------------------------------------------------

    def _located(self, slot: int, locations: TableLocations) -> LocatedTablet:
        p = self.partitions[slot]
        tablet = locations.by_start.get(p.partition_key_start)
        if tablet is None:
            raise ServiceUnavailable(
                f"table {self.name!r}: no tablet server serves partition"
                f" {p.describe(self.partition_schema)} yet"
            )
        return tablet

    def _on_tablet(self, slot: int, call: Callable[[LocatedTablet], T], *, reads: bool = True) -> T:
        """``call`` on the tablet of partition ``slot``; once more on fresh locations when
        the cached ones are stale. A write goes to fresh locations only when it surely
        did not apply: its tablet was not there, or nothing listened at the address on
        any attempt; a write whose server went away mid-call was retried under its
        request id by the pool, then raises, and the next call looks the tablet up
        again."""
        locations = self.meta_cache.table(self.name)
        if reads and self._located(slot, locations).replicated:
            return self._read_replicated(slot, call, locations)
        stale: tuple[type[Error], ...] = (
            (TabletNotFound, ServiceUnavailable) if reads else (TabletNotFound, ConnectionRefused)
        )
        try:
            return call(self._located(slot, locations))
        except stale:
            self.meta_cache.invalidate(self.name, locations)
        except ServiceUnavailable:
            self.meta_cache.invalidate(self.name, locations)
            raise
        return call(self._located(slot, self.meta_cache.table(self.name)))

    def _read_replicated(
        self, slot: int, call: Callable[[LocatedTablet], T], locations: TableLocations
    ) -> T:
        """A read of a replicated tablet at its leader as last known; a leader that is
        gone (its server down, or the tablet moved) sends the read to the leader on fresh
        locations, with backoff, until the retry policy's deadline (an election and the
        master learning of it take a few heartbeats)."""
        policy = self.servers.retry
        start = time.monotonic()
        attempts = 0
        while True:
            attempts += 1
            try:
                return call(self._located(slot, locations))
            except (TabletNotFound, ServiceUnavailable, RpcTimedOut, SafeTimeTimeout, NotTheLeader):
                self.meta_cache.invalidate(self.name, locations)
                wait = policy.backoff(min(attempts, 8), self._rng)
                if time.monotonic() - start + wait >= policy.deadline:
                    raise
            time.sleep(wait)
            locations = self.meta_cache.table(self.name)

    def _write_tablet(
        self,
        slot: int,
        op_name: str,
        part: pa.Table,
        op_column: str | None,
        atomic: bool,
    ) -> WriteResponse:
        """One tablet's part of a write. An unreplicated tablet's goes through
        ``_on_tablet`` (retried at its server by the pool). A replicated tablet's goes
        to its leader, under one request id for every attempt: a ``NotTheLeader`` that
        names the leader sends it there at once; one that does not, a lost tablet or a
        server that is down or did not answer sends it to the next replica, and once
        every replica was tried, to the leader on fresh locations after a backoff;
        until the retry policy's deadline. Every replica applies the request id's write
        at most once, whichever leader commits it."""
        locations = self.meta_cache.table(self.name)
        tablet = self._located(slot, locations)
        if not tablet.replicated:
            return self._on_tablet(
                slot,
                lambda t: self.servers.write(
                    t.address, t.tablet_id, op_name, part, op_column=op_column, atomic=atomic
                ),
                reads=False,
            )
        servers = self.servers
        policy = servers.retry
        seq_no = servers.requests.new_seq_no()
        start = time.monotonic()
        attempt = 0
        tried: set[str] = set()
        address = tablet.address
        # Whether some attempt may have reached a server and applied (its outcome is
        # unknown); else the write surely did not apply.
        maybe_applied = False
        try:
            while True:
                attempt += 1
                tried.add(address)
                try:
                    return servers.write_attempt(
                        address,
                        tablet.tablet_id,
                        op_name,
                        part,
                        seq_no=seq_no,
                        attempt_no=attempt,
                        op_column=op_column,
                        atomic=atomic,
                    )
                except NotTheLeader as exc:
                    error: Error = exc
                    named = exc.leader_address
                    # A leader named by a replica not yet tried this round (two stale
                    # replicas naming each other fall through to the backoff below).
                    if named is not None and named not in tried:
                        self.meta_cache.set_leader(self.name, tablet.tablet_id, named)
                        address = named
                        continue
                except (TabletNotFound, ConnectionRefused) as exc:
                    error = exc
                except (ServiceUnavailable, RpcTimedOut) as exc:
                    error = exc
                    maybe_applied = True
                untried = [a for a in tablet.replicas if a not in tried]
                if untried:
                    address = untried[0]
                    continue
                self.meta_cache.invalidate(self.name, locations)
                wait = policy.backoff(min(attempt, 8), self._rng)
                if time.monotonic() - start + wait >= policy.deadline:
                    outcome = (
                        "it may or may not have been applied"
                        if maybe_applied
                        else "it was not applied"
                    )
                    raise ServiceUnavailable(
                        f"write {servers.requests.client_id}:{seq_no} to tablet"
                        f" {tablet.tablet_id} of {self.name!r} found no leader within"
                        f" {policy.deadline:g} s ({attempt} attempts; last: {error});"
                        f" {outcome}"
                    ) from None
                time.sleep(wait)
                locations = self.meta_cache.table(self.name)
                tablet = self._located(slot, locations)
                address = tablet.address
                tried = set()
        finally:
            servers.requests.completed(seq_no)

    def _on_tablets(self, slots: Sequence[int], call: Callable[[int], T]) -> list[T]:
        """``call(slot)`` for every slot, in parallel; results in slot order; the first
        error (in slot order) is raised once every call has finished."""
        if len(slots) <= 1 or self.threads <= 1:
            return [call(s) for s in slots]
        with ThreadPoolExecutor(min(self.threads, len(slots))) as pool:
            futures = [pool.submit(call, s) for s in slots]
            for f in futures:
                f.exception()
            return [f.result() for f in futures]

    def snapshot(self, snapshot: int | None = None) -> int:
        """``snapshot``, or the session's latest observed HybridTime (asking a tablet
        server for its clock when the session has seen none)."""
        if snapshot is not None:
            return snapshot
        seen = self.servers.observed.value
        if seen is not None:
            return seen
        locations = self.meta_cache.table(self.name)
        for tablet in locations.by_start.values():
            return self.servers.now(tablet.address)
        raise ServiceUnavailable(f"table {self.name!r} has no tablet to ask for the time")

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[int]:
        """Hold off this process's other writers of the table (through the same
        ``RemoteDatabase``) and yield a snapshot that sees every write acknowledged
        before: SQL's read-modify-write statements read there and write inside. Writers
        of other processes are not held off (Kudu has no table locks)."""
        with self._write_lock:
            yield self._now() if self._now is not None else self.snapshot(None)

    def write_rows(
        self,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        op: WriteOp | str | int,
        *,
        atomic: bool = False,
    ) -> WriteResult:
        """``write`` of rows of Python values (``columns`` names them), converted as the
        embedded table converts them."""
        return self.write(self.rows_to_arrow(columns, rows), op, atomic=atomic)

    def rows_to_arrow(self, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> pa.Table:
        return rows_to_arrow(self.schema, columns, rows)

    @property
    def num_replicas(self) -> int:
        """Replicas of each tablet, as the master locates them (its first tablet's)."""
        for tablet in self.meta_cache.table(self.name).by_start.values():
            return max(1, len(tablet.replicas))
        return 1

    def replica_addresses(self) -> list[str]:
        """The address of the tablet server hosting each tablet (``-`` for a partition
        with no running tablet)."""
        by_start = self.meta_cache.table(self.name).by_start
        return [
            t.address if (t := by_start.get(p.partition_key_start)) is not None else "-"
            for p in self.partitions
        ]

    def estimated_rows(self) -> int:
        """Rows stored in the tablets (deleted ones included), as the servers last
        reported them; asked again at most every ``ESTIMATE_TTL_S`` seconds (it only
        sizes progress reports)."""
        now = time.monotonic()
        if self._estimate is None or now - self._estimate[0] > ESTIMATE_TTL_S:
            rows = sum(t["memrowset_rows"] + t["disk_rows"] for t in self.tablet_statistics())
            self._estimate = (now, rows)
        return self._estimate[1]

    def run_maintenance(self, **kw: Any) -> None:
        """Tablet servers run their own maintenance; a flush is what a client can ask."""
        if kw.get("flush", True):
            self.flush()

    # -- writes ---------------------------------------------------------------------------

    def write(
        self,
        data: pa.Table | pa.RecordBatch,
        op: WriteOp | str | int | None = None,
        *,
        op_column: str | None = None,
        atomic: bool = False,
    ) -> WriteResult:
        """Apply a batch (one ``op`` for every row, or each row's from ``op_column``),
        each tablet's part at that tablet's HybridTime; see the module docstring.

        ``atomic``: any row error rejects the batch (``atomic_rejection``, as the
        embedded table raises it). Every tablet first checks its part (nothing
        applied if any finds an error), then applies it atomically. Across tablets
        this is not one transaction: a write of another client landing between the
        check and a part's write can reject that part after others applied, and the
        error then says so."""
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        ops = operations(data, op, op_column)
        slots, unrouted = self._route(data)
        errors = [
            RowError(
                int(i),
                WriteOp(int(ops[i])),
                _key_of(data, self.schema, int(i)),
                "NotFound",
                NO_TABLET_MESSAGE,
            )
            for i in np.flatnonzero(unrouted).tolist()
        ]
        if atomic and errors:
            raise DataError(
                f"atomic write batch rejected: {len(errors)} row error(s); first: {errors[0]}"
            )
        parts = _split(data, slots)
        op_name = "" if op_column is not None else WriteOp.parse(op).name.lower()  # type: ignore[arg-type]

        def send(index: int, *, check_only: bool = False) -> WriteResult:
            slot, rows, part = parts[index]
            if check_only:
                response = self._on_tablet(
                    slot,
                    lambda t: self.servers.write(
                        t.address,
                        t.tablet_id,
                        op_name,
                        part,
                        op_column=op_column,
                        atomic=atomic,
                        check_only=True,
                    ),
                )
            else:
                response = self._write_tablet(slot, op_name, part, op_column, atomic)
            return WriteResult(
                response.timestamp,
                response.applied,
                response.ignored,
                [
                    RowError(
                        i := (e.index if rows is None else int(rows[e.index])),
                        WriteOp.parse(e.op),
                        _key_of(data, self.schema, i),
                        e.status,
                        e.message,
                    )
                    for e in response.row_errors
                ],
            )

        if atomic and len(parts) > 1:
            checked = self._on_tablets(range(len(parts)), lambda i: send(i, check_only=True))
            found = sorted((e for r in checked for e in r.errors), key=lambda e: e.index)
            if found:
                raise atomic_rejection(found)
        results = self._on_tablets(range(len(parts)), send)
        applied = ignored = timestamp = 0
        for r in results:
            applied += r.applied
            ignored += r.ignored
            timestamp = max(timestamp, r.timestamp)
            errors += r.errors
        errors.sort(key=lambda e: e.index)
        if atomic and errors:
            rejected = atomic_rejection(errors)
            if applied:
                rejected = type(rejected)(
                    f"{rejected}; the batch's rows on other tablets were applied (a cluster "
                    "applies a batch atomically per tablet, and another write landed between "
                    "the check and the write)"
                )
            raise rejected
        if not results:
            timestamp = self.servers.observed.value or 0
        return WriteResult(timestamp, applied, ignored, errors)

    def _route(self, data: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        """Each row's partition slot and the mask of rows no range partition covers, as
        the embedded table routes them: a row whose key is missing, NULL or does not
        convert goes to the first tablet, whose validation rejects it."""
        n = data.num_rows
        slots = np.zeros(n, dtype=np.int64)
        unrouted = np.zeros(n, dtype=bool)
        if len(self.partitions) == 1 and not self.partition_schema.range_columns:
            return slots, unrouted
        if not self.partitions:
            unrouted[:] = True
            slots[:] = -1
            return slots, unrouted
        keys, valid = routing_keys(self.schema, data)
        if keys is None:
            return slots, unrouted
        if not valid.all():
            keys = keys.filter(pa.array(valid))
        routed = np.zeros(n, dtype=np.int64)
        routed[valid] = partition_for_batch(self.partition_schema, self.schema, keys)
        unrouted[valid] = routed[valid] < 0
        slots = np.where(valid, routed, 0)
        slots[unrouted] = -1
        return slots, unrouted

    # -- reads ----------------------------------------------------------------------------

    def _prune(
        self, predicates: Sequence[ColumnPredicate]
    ) -> tuple[list[ColumnPredicate], list[int]]:
        preds = [p.bind(self.schema) for p in predicates]
        keep = prune_partitions(self.partition_schema, self.schema, self.partitions, preds)
        return preds, keep

    def scan(
        self,
        columns: Sequence[str] | None = None,
        predicates: Sequence[ColumnPredicate] = (),
        *,
        snapshot: int | None = None,
        ordered: bool = False,
        limit: int | None = None,
        key_range: tuple[bytes | None, bytes | None] = (None, None),
    ) -> pa.RecordBatchReader:
        """Rows live at one snapshot (see ``snapshot``) matching every predicate, from
        the tablets the predicates do not prune, read in parallel. ``ordered=True``
        returns them in primary-key order; ``limit`` returns at most that many rows
        (each tablet stops there too); ``key_range`` keeps the encoded primary keys in
        ``[lo, hi)``."""
        schema = self.schema
        names = list(schema.names if columns is None else columns)
        for c in names:
            schema.index_of(c)  # unknown column: ProgrammingError
        preds, keep = self._prune(predicates)
        out_schema = schema.arrow_schema(names)
        if limit is not None and limit < 0:
            raise ProgrammingError(f"a scan limit must not be negative, got {limit}")
        snap = self.snapshot(snapshot)
        hashed = bool(self.partition_schema.hash_dimensions)
        extra = [k for k in schema.key_names if k not in names] if ordered and hashed else []
        # A scan of no columns (``count(*)``) travels as batches of no columns that
        # carry only their row counts; an ordered one needs the key to sort by.
        wanted = names + extra or ([schema.key_names[0]] if ordered else [])
        wanted_schema = schema.arrow_schema(wanted)

        def open_tablet(slot: int) -> Callable[[], Iterator[pa.RecordBatch]]:
            def run() -> Iterator[pa.RecordBatch]:
                reader = self._on_tablet(
                    slot,
                    lambda t: self.servers.scan(
                        t.address,
                        t.tablet_id,
                        wanted,
                        preds,
                        snap,
                        ordered=ordered,
                        limit=None if ordered and hashed else limit,
                        key_range=key_range,
                    ),
                )
                if not wanted:  # a cast to no columns loses the row count
                    return iter(reader)
                return (b.cast(wanted_schema) for b in reader)

            return run

        jobs = [open_tablet(slot) for slot in keep]
        if not ordered or not hashed:
            # Unordered: as they come; ordered by range only: range partitions are
            # disjoint and in key order, so the tablets' sorted streams concatenate.
            batches = (
                parallel_batches(jobs, self.threads, name="remote-scan")
                if not ordered
                else (b for job in jobs for b in job())
            )
            if wanted != names:
                batches = (b.select(names) for b in batches)
        else:  # every tablet's rows, sorted by key (as the embedded table does)
            table = pa.Table.from_batches(
                list(parallel_batches(jobs, self.threads, name="remote-scan")), wanted_schema
            )
            if table.num_rows:
                order = pc.sort_indices(table, [(k, "ascending") for k in schema.key_names])
                table = table.take(order)
            batches = iter(table.select(names).to_batches(max_chunksize=SCAN_BATCH_ROWS))
        if limit is not None:
            batches = _first_rows(batches, limit)
        return pa.RecordBatchReader.from_batches(out_schema, batches)

    def scan_tokens(
        self,
        columns: Sequence[str] | None = None,
        predicates: Sequence[ColumnPredicate] = (),
        *,
        snapshot: int | None = None,
        split_size_bytes: int | None = None,
        key_range: tuple[bytes | None, bytes | None] = (None, None),
    ) -> list[RemoteScanToken]:
        """One token per tablet the predicates keep, each naming the tablet server that
        hosts it now, all at one snapshot (see ``snapshot``). A tablet is never cut in
        several (``split_size_bytes`` is checked only): its server alone knows its
        rowsets' key bounds."""
        if split_size_bytes is not None and split_size_bytes <= 0:
            raise ProgrammingError("the split size must be positive")
        schema = self.schema
        names = tuple(schema.names if columns is None else columns)
        for c in names:
            schema.index_of(c)
        preds, keep = self._prune(predicates)
        snap = self.snapshot(snapshot)
        lo, hi = key_range
        if lo is not None and hi is not None and lo >= hi:
            return []
        locations = self.meta_cache.table(self.name)
        tokens = []
        for slot in keep:
            tablet = self._located(slot, locations)
            tokens.append(
                RemoteScanToken(
                    self.master,
                    self.id,
                    self.name,
                    self.meta.schema_version,
                    tablet.tablet_id,
                    self.partitions[slot].describe(self.partition_schema),
                    tablet.address,
                    names,
                    tuple(preds),
                    snap,
                    lo,
                    hi,
                )
            )
        return tokens

    def scan_token_reader(
        self, token: RemoteScanToken, *, ordered: bool = False
    ) -> pa.RecordBatchReader:
        """The rows of ``token`` (a tablet of this table): from the tablet server it
        names, else from the tablet's server as the master locates it now."""
        if token.schema_version != self.meta.schema_version:
            raise ProgrammingError(
                f"table {self.name!r} was altered after the scan was planned (schema "
                f"version {token.schema_version} -> {self.meta.schema_version}); plan the "
                "scan again"
            )
        out = self.schema.arrow_schema(list(token.columns))

        def read(address: str) -> pa.RecordBatchReader:
            return self.servers.scan(
                address,
                token.tablet_id,
                list(token.columns),
                list(token.predicates),
                token.snapshot,
                ordered=ordered,
                key_range=(token.key_lo, token.key_hi),
            )

        try:
            reader = read(token.address)
        except (TabletNotFound, ServiceUnavailable):
            self.meta_cache.invalidate(self.name)
            now = next(
                (
                    t
                    for t in self.meta_cache.table(self.name).by_start.values()
                    if t.tablet_id == token.tablet_id
                ),
                None,
            )
            if now is None:
                raise ProgrammingError(
                    f"tablet {token.tablet_id} of {self.name!r} ({token.partition}) was "
                    "dropped after the scan was planned"
                ) from None
            reader = read(now.address)
        return pa.RecordBatchReader.from_batches(out, (b.cast(out) for b in reader))

    def to_arrow(
        self,
        columns: Sequence[str] | None = None,
        predicates: Sequence[ColumnPredicate] = (),
        **kw: Any,
    ) -> pa.Table:
        return self.scan(columns, predicates, **kw).read_all()

    def diff_scan(
        self,
        start: int,
        end: int,
        columns: Sequence[str] | None = None,
        predicates: Sequence[ColumnPredicate] = (),
    ) -> pa.RecordBatchReader:
        """Rows changed in ``[start, end)`` across every tablet, with ``is_deleted``."""
        schema = self.schema
        if end < start:
            raise ProgrammingError("diff scan end is before its start")
        preds, keep = self._prune(predicates)
        names = list(schema.names if columns is None else columns)
        out = schema.arrow_schema(names).append(pa.field("is_deleted", pa.bool_(), False))

        def one(slot: int) -> pa.RecordBatchReader:
            return self._on_tablet(
                slot,
                lambda t: self.servers.diff_scan(
                    t.address, t.tablet_id, start, end, columns, preds
                ),
            )

        readers = self._on_tablets(keep, one)  # every stream opened before the first batch

        def batches() -> Iterator[pa.RecordBatch]:
            for r in readers:
                for b in r:
                    yield b.cast(out)

        return pa.RecordBatchReader.from_batches(out, batches())

    def lookup(
        self,
        key: Sequence[object],
        columns: Sequence[str] | None = None,
        snapshot: int | None = None,
    ) -> dict[str, object] | None:
        """The live row with primary key ``key``, or None (one tablet, found by routing).
        Without ``snapshot``, the tablet's latest (one tablet: one consistent read)."""
        return self.lookup_many([key], columns, snapshot)[0]

    def lookup_many(
        self,
        keys: Sequence[Sequence[object]],
        columns: Sequence[str] | None = None,
        snapshot: int | None = None,
    ) -> list[dict[str, object] | None]:
        """``lookup`` of each key, in order: one request per tablet, in parallel, every
        tablet read at one snapshot (see ``snapshot``) when the keys span tablets."""
        schema = self.schema
        slots: dict[int, list[int]] = {}
        for i, key in enumerate(keys):
            slot = self._key_slot(key)
            if slot >= 0:
                slots.setdefault(slot, []).append(i)
        out: list[dict[str, object] | None] = [None] * len(keys)
        if not slots:
            return out
        snap = snapshot if snapshot is not None or len(slots) == 1 else self.snapshot()
        order = sorted(slots)

        def one(slot: int) -> pa.Table:
            members = slots[slot]
            try:
                batch = pa.table(
                    {
                        c.name: pa.array([keys[i][j] for i in members], c.type.arrow_type())
                        for j, c in enumerate(schema.key_columns)
                    }
                )
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as e:
                raise ProgrammingError(f"bad primary key: {e}") from e
            return self._on_tablet(
                slot,
                lambda t: self.servers.lookup(t.address, t.tablet_id, batch, columns, snap),
            )

        for slot, found in zip(order, self._on_tablets(order, one), strict=True):
            index: list[int] = found.column(KEY_INDEX_COLUMN).to_numpy().tolist()
            rows = found.drop_columns([KEY_INDEX_COLUMN]).to_pylist()
            for pos, row in zip(index, rows, strict=True):
                out[slots[slot][pos]] = row
        return out

    def _key_slot(self, key: Sequence[object]) -> int:
        """The partition slot of a primary key (-1: no range partition covers it)."""
        schema = self.schema
        if len(key) != schema.num_key_columns:
            raise ProgrammingError(
                f"a key of {self.name!r} has {schema.num_key_columns} value(s), got {len(key)}"
            )
        if len(self.partitions) == 1:
            return 0
        if not self.partitions:
            return -1
        try:
            return partition_for_row(
                self.partition_schema,
                schema,
                {c.name: v for c, v in zip(schema.key_columns, key, strict=True)},
            )
        except Error as e:
            raise ProgrammingError(f"bad primary key {tuple(key)!r}: {e}") from e

    def count_rows(self, snapshot: int | None = None) -> int:
        """Rows live at one snapshot, counted by each tablet server (no rows shipped)."""
        snap = self.snapshot(snapshot)

        def one(slot: int) -> int:
            return self._on_tablet(
                slot, lambda t: self.servers.count_rows(t.address, t.tablet_id, snap)
            )

        return sum(self._on_tablets(range(len(self.partitions)), one))

    def flush(self) -> None:
        """Flush every tablet's MemRowSet and DeltaMemStores on its tablet server."""
        self._statistics(flush=True)

    def tablet_statistics(self) -> list[dict[str, Any]]:
        """Each tablet's sizes now, from its tablet server's memory (no scan)."""
        return self._statistics(flush=False)

    def statistics(self) -> dict[str, Any]:
        """The embedded table's ``statistics`` shape: sizes per tablet and the column
        statistics of the last ``compute_statistics`` (kept with the table's metadata
        at the master)."""
        tablets = self.tablet_statistics()
        return {
            "table": self.name,
            "num_tablets": len(tablets),
            "disk_bytes": sum(t["disk_bytes"] for t in tablets),
            "memory_bytes": sum(t["memory_bytes"] for t in tablets),
            "tablets": tablets,
            "computed": self.meta.statistics,
        }

    def compute_statistics(self) -> dict[str, Any]:
        """COMPUTE STATS: one scan at one snapshot for row counts per tablet and each
        column's min, max and null count (``storage/tables/statistics.py``), kept with
        the table's metadata by ``on_statistics`` (the database's master call)."""
        snap = self._now() if self._now is not None else self.snapshot(None)
        names = list(self.schema.names)

        def tablet_rows(slot: int) -> pa.RecordBatchReader:
            return self._on_tablet(
                slot, lambda t: self.servers.scan(t.address, t.tablet_id, names, [], snap)
            )

        located = self.meta_cache.table(self.name)
        stats = column_statistics(
            self.schema,
            [
                (self._located(slot, located).tablet_id, tablet_rows(slot))
                for slot in range(len(self.partitions))
            ],
            snap,
        )
        if self.on_statistics is not None:
            self.on_statistics(stats)
            self.meta = self.meta.with_(statistics=stats)
        return stats

    def _statistics(self, *, flush: bool) -> list[dict[str, Any]]:
        def one(slot: int) -> dict[str, Any]:
            def call(t: LocatedTablet) -> dict[str, Any]:
                ask = self.servers.flush if flush else self.servers.statistics
                st = ask(t.address, t.tablet_id)
                return {
                    "tablet_id": t.tablet_id,
                    "address": t.address,
                    "partition": self.partitions[slot].describe(self.partition_schema),
                    "memrowset_rows": st.memrowset_rows,
                    "diskrowsets": st.diskrowsets,
                    "disk_rows": st.disk_rows,
                    "disk_bytes": st.disk_bytes,
                    "memory_bytes": st.memory_bytes,
                    "wal_bytes": st.wal_bytes,
                }

            return self._on_tablet(slot, call)

        return self._on_tablets(range(len(self.partitions)), one)


def _first_rows(batches: Iterator[pa.RecordBatch], limit: int) -> Iterator[pa.RecordBatch]:
    left = limit
    for b in batches:
        if left <= 0:
            return
        if b.num_rows > left:
            b = b.slice(0, left)
        left -= b.num_rows
        yield b


def _key_of(data: pa.Table, schema: Schema, i: int) -> tuple[Any, ...] | None:
    names = [k for k in schema.key_names if k in data.column_names]
    return tuple(data.column(k)[i].as_py() for k in names) or None


def _split(data: pa.Table, slots: np.ndarray) -> list[tuple[int, np.ndarray | None, pa.Table]]:
    """The batch cut by slot: (slot, the rows' indexes in ``data`` or None for every row,
    the part); slot -1 rows are left out."""
    n = data.num_rows
    if n == 0:
        return []
    first = int(slots[0])
    if first >= 0 and bool((slots == first).all()):
        return [(first, None, data)]
    data = _takeable(data)
    order = np.argsort(slots, kind="stable")
    order = order[slots[order] >= 0]
    if not len(order):
        return []
    cuts = np.flatnonzero(np.diff(slots[order])) + 1
    return [(int(slots[rows[0]]), rows, data.take(rows)) for rows in np.split(order, cuts)]


def _takeable(data: pa.Table) -> pa.Table:
    """View-layout string and binary columns as plain ones (no take kernel for them)."""
    for i, f in enumerate(list(data.schema)):
        if pa.types.is_string_view(f.type) or pa.types.is_binary_view(f.type):
            plain = pa.string() if pa.types.is_string_view(f.type) else pa.binary()
            data = data.set_column(i, f.with_type(plain), data.column(i).cast(plain))
    return data
