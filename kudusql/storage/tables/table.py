"""A table of a database: writes routed to its tablets at one timestamp, and scans
across its tablets at one snapshot (Kudu's client-side ``KuduTable`` / ``KuduSession`` /
``KuduScanner`` on one machine).

Writes: a batch is split by partition (vectorized routing, ``partition_for_batch``),
every part is written to its tablet with the *same* HybridTime, taken from the database
MVCC, and the batch becomes visible to scans when the last part is applied: a scan's
snapshot is never past an unfinished batch. Rows no range partition covers fail with
Kudu's "No tablet covering the requested range partition"; rows whose key cannot be
routed (missing, NULL or unconvertible key values) go to the first tablet, whose
validation reports them with the usual per-row error. Errors carry the row's index in
the caller's batch. In atomic mode every tablet is locked and checked before any is
written, so the batch applies everywhere or nowhere.

Writes to one table are serialized (the table's write lock), so each tablet applies
batches in timestamp order. A batch that spans tablets is one transaction through the
database's commit log (``transaction.write_transaction``): all of it or none, on error
and on crash, for every reader.

Scans: partition pruning picks the tablets, the tablets are scanned in parallel at one
snapshot by the scan's own producer threads (not the database's thread pool, which
serves writes), and batches stream back through a bounded queue as they come (ordered
scans concatenate disjoint range tablets, or sort across hash tablets).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kudusql.common.errors import (
    DataError,
    Error,
    IntegrityError,
    ProgrammingError,
)
from kudusql.common.parallel import parallel_batches
from kudusql.common.predicates import ColumnPredicate, PredicateKind
from kudusql.common.row_operations import (
    RowError,
    WriteOp,
    WriteResult,
    WriteShortcuts,
    operations,
)
from kudusql.common.row_values import rows_to_arrow
from kudusql.common.schema import Schema
from kudusql.common.types import cast_array
from kudusql.storage.tables.catalog import TableMeta
from kudusql.storage.tables.partition import (
    NO_TABLET_MESSAGE,
    Partition,
    PartitionSchema,
    partition_for_batch,
    partition_for_row,
)
from kudusql.storage.tables.pruning import prune_partitions
from kudusql.storage.tables.statistics import column_statistics
from kudusql.storage.tables.transaction import (
    TabletWrite,
    bulk_rows,
    part_errors,
    write_transaction,
)
from kudusql.storage.tablet.diskrowset import RowSetMeta
from kudusql.storage.tablet.row_write import (
    SMALL_WRITE_ROWS,
    RowBatch,
    RowLayout,
)
from kudusql.storage.tablet.tablet import Tablet

if TYPE_CHECKING:
    from kudusql.storage.tables.database import Database, TableRuntime
    from kudusql.storage.tables.scan_token import ScanToken

#: Batches up to this many rows are routed row by row with Python values.
SMALL_BATCH_ROWS = SMALL_WRITE_ROWS
#: ``write_rows`` writes up to this many rows as Python values (the row path); a caller
#: with more rows gains nothing from handing them over as Python values.
ROW_PATH_ROWS = SMALL_WRITE_ROWS


@dataclass
class _Part:
    slot: int  # index into the table's tablets
    rows: np.ndarray | None  # indices into the caller's batch; None = every row
    data: pa.Table


class Table(WriteShortcuts):
    """A handle on one table; stays valid across renames and ALTERs (it follows the
    table's id), and raises once the table is dropped."""

    def __init__(self, db: Database, table_id: int) -> None:
        self.db = db
        self.id = table_id

    def _rt(self) -> TableRuntime:
        return self.db._runtime(self.id)

    # -- description ----------------------------------------------------------------------
    @property
    def meta(self) -> TableMeta:
        return self._rt().meta

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def schema(self) -> Schema:
        return self.meta.schema

    @property
    def partition_schema(self) -> PartitionSchema:
        return self.meta.partition_schema

    @property
    def partitions(self) -> list[Partition]:
        return list(self._rt().partitions)

    @property
    def num_tablets(self) -> int:
        return len(self.meta.tablets)

    def tablets(self) -> list[Tablet]:
        """The open tablets, in partition order (for maintenance and introspection)."""
        return list(self._rt().tablets())

    def __repr__(self) -> str:
        return f"Table({self.name!r}, {self.num_tablets} tablets)"

    # -- writes ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def exclusive(self) -> Iterator[int]:
        """Hold off every other writer of this table and yield a snapshot that sees every
        write made before: a read-modify-write (SQL UPDATE and DELETE) reads there and
        writes inside, so no other write lands between its read and its write. Writes
        from the holding thread run as usual."""
        rt = self._rt()
        with rt.write_lock:
            yield self.db.snapshot(self.db.clock.now())

    @contextlib.contextmanager
    def _routed(
        self, data: pa.Table, ops: np.ndarray
    ) -> Iterator[tuple[TableRuntime, list[_Part], list[RowError]]]:
        """Hold the table's write lock with the batch routed to its tablets' parts (and
        the rows no partition covers as errors), every tablet a part goes to healthy.

        A tablet found failed (a write's WAL append failed) is reloaded with the table's
        lock released, then routing starts again: the reload waits for a flush or
        compaction running on that tablet (``Tablet.reload_if_failed``), and under the
        table's lock every writer of the table would wait with it. (A caller inside
        ``exclusive()`` still holds the table's lock through the reload.) A tablet closed
        meanwhile (the table dropped or altered) is left to the next routing to decide."""
        while True:
            rt = self._rt()
            with rt.write_lock:
                rt = self._rt()  # an ALTER may have finished while we waited
                parts, errors = self._split_routed(rt, data, ops)
                tablets = rt.tablets()
                failed = [tablets[p.slot] for p in parts if tablets[p.slot].failed]
                if not failed:
                    yield rt, parts, errors
                    return
            for tablet in failed:
                try:
                    tablet.reload_if_failed()
                except ProgrammingError:
                    if not tablet.closed:
                        raise

    def write(
        self,
        data: pa.Table | pa.RecordBatch,
        op: WriteOp | str | int | None = None,
        *,
        op_column: str | None = None,
        atomic: bool = False,
    ) -> WriteResult:
        """Apply a batch (one ``op`` for all rows, or per row from ``op_column``) at one
        timestamp across every tablet it touches; see the module docstring."""
        self.db._check_writable()
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        ops = operations(data, op, op_column)
        with self._routed(data, ops) as (rt, parts, errors):
            if atomic and errors:
                raise DataError(
                    f"atomic write batch rejected: {len(errors)} row error(s); first: {errors[0]}"
                )
            writes = _tablet_writes(rt, parts, op, op_column)
            if len(writes) > 1:
                ts, results = write_transaction(self.db, writes, atomic=atomic)
            else:
                ts = self.db.mvcc.start_op()
                try:
                    results = [self._write_part(w, atomic, ts) for w in writes]
                finally:
                    self.db.mvcc.finish_op(ts)
        applied = ignored = 0
        for w, res in zip(writes, results, strict=True):
            applied += res.applied
            ignored += res.ignored
            errors += w.batch_errors(res.errors)
        errors.sort(key=lambda e: e.index)
        return WriteResult(ts, applied, ignored, errors)

    def write_rows(
        self,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        op: WriteOp | str | int,
        *,
        atomic: bool = False,
    ) -> WriteResult:
        """``write`` for rows of Python values (``columns`` names them, in order), with
        the same results and errors.

        The path is chosen here, once, from the batch's shape: a few rows
        (``SMALL_WRITE_ROWS``) whose values the row path takes as they are, all bound for
        one tablet, are routed by their Python key values and handed to it converted (a
        ``RowBatch``: the tablet's row path). Any other batch becomes an Arrow batch for
        ``write``: a transaction across tablets, and a failed tablet's reload, are the
        batch path's."""
        self.db._check_writable()
        wop = WriteOp.parse(op)
        names = tuple(columns)
        n = len(rows)
        rt = self._rt()
        if 0 < n <= SMALL_WRITE_ROWS and self.db.options.fast_paths:
            with rt.write_lock:
                rt = self._rt()  # an ALTER may have finished while we waited
                routed = _route_rows(rt, names, rows, wop)
                if routed is not None:
                    conv, parts, errors = routed
                    if atomic and errors:
                        raise DataError(
                            f"atomic write batch rejected: {len(errors)} row error(s); "
                            f"first: {errors[0]}"
                        )
                    if len(parts) <= 1:
                        part = next(iter(parts.items()), None)
                        tablet = None if part is None else rt.tablet(part[0])
                        if tablet is None or not tablet.failed:
                            return self._write_routed_rows(
                                rt, tablet, part, conv, errors, names, wop, atomic
                            )
        return self.write(rows_to_arrow(rt.meta.schema, names, rows), wop, atomic=atomic)

    def rows_to_arrow(self, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> pa.Table:
        """Rows of Python values as the Arrow batch ``write`` takes, each value meaning
        what it means alone (``common/row_values.py``)."""
        return rows_to_arrow(self.schema, columns, rows)

    def _write_routed_rows(
        self,
        rt: TableRuntime,
        tablet: Tablet | None,
        part: tuple[int, list[int]] | None,
        conv: list[tuple[Any, ...]],
        errors: list[RowError],
        names: tuple[str, ...],
        op: WriteOp,
        atomic: bool,
    ) -> WriteResult:
        """The row path of ``write_rows`` (the table's write lock held): the converted
        rows ``conv`` whose batch positions ``part`` names go to ``tablet`` (none when
        no range partition covers any row: ``errors`` say so), at one timestamp of the
        database's MVCC."""
        ts = self.db.mvcc.start_op()
        try:
            res = None
            if tablet is not None and part is not None:
                idx = part[1]
                rows = conv if len(idx) == len(conv) else [conv[i] for i in idx]
                same = _same_schema(tablet.schema, rt.meta.schema)
                res = tablet.write(RowBatch(names, rows, same), op, atomic=atomic, timestamp=ts)
        finally:
            self.db.mvcc.finish_op(ts)
        if res is None:
            return WriteResult(ts, 0, 0, errors)
        if res.errors:
            errors.extend(
                RowError(idx[e.index], e.op, e.key, e.status, e.message) for e in res.errors
            )
            errors.sort(key=lambda e: e.index)
        return WriteResult(ts, res.applied, res.ignored, errors)

    def _split_routed(
        self, rt: TableRuntime, data: pa.Table, ops: np.ndarray
    ) -> tuple[list[_Part], list[RowError]]:
        """The batch cut into one part per tablet, and the errors of the rows no range
        partition covers."""
        slots, unrouted = self._route(rt, data)
        errors = [
            RowError(
                int(i),
                WriteOp(int(ops[i])),
                _key_of(data, rt.meta.schema, int(i)),
                "NotFound",
                NO_TABLET_MESSAGE,
            )
            for i in np.flatnonzero(unrouted).tolist()
        ]
        return _split(data, slots), errors

    def _route(self, rt: TableRuntime, data: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        """Each row's tablet slot, and the mask of rows no range partition covers.

        Keys are routed as the tablets will store them: converted first by the cast the
        tablets' validation applies (``cast_array``), so ``'3'`` for an INT key goes
        where ``3`` goes. A row whose key is missing, NULL or does not convert goes to
        the first tablet, whose validation rejects it with the standard row error."""
        n = data.num_rows
        schema = rt.meta.schema
        slots = np.zeros(n, dtype=np.int64)
        unrouted = np.zeros(n, dtype=bool)
        if len(rt.partitions) == 1 and not rt.meta.partition_schema.range_columns:
            return slots, unrouted
        if not rt.partitions:  # every range partition was dropped
            unrouted[:] = True
            slots[:] = -1
            return slots, unrouted
        valid = np.ones(n, dtype=bool)
        cols: list[pa.Array[Any]] = []
        # (a non-unique key's auto-incrementing id partitions nothing: tablets assign it)
        routing = [c for c in schema.key_columns if not c.auto_incrementing]
        for c in routing:
            if c.name not in data.column_names:
                return slots, unrouted  # every row fails validation in the first tablet
            arr, bad = cast_array(data.column(c.name), c.type)
            if bad is not None:
                valid &= ~bad
            if arr.null_count:
                valid &= np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
            cols.append(arr)
        if n <= SMALL_BATCH_ROWS and self.db.options.fast_paths:
            routed = self._route_rows(rt, cols, valid)
        else:
            keys = pa.Table.from_arrays(cols, names=[c.name for c in routing])
            if not valid.all():
                keys = keys.filter(pa.array(valid))
            routed = np.zeros(n, dtype=np.int64)
            routed[valid] = partition_for_batch(rt.meta.partition_schema, schema, keys)
        unrouted[valid] = routed[valid] < 0
        slots = np.where(valid, routed, 0)  # unroutable keys: the first tablet rejects them
        slots[unrouted] = -1
        return slots, unrouted

    def _route_rows(
        self, rt: TableRuntime, cols: list[pa.Array[Any]], valid: np.ndarray
    ) -> np.ndarray:
        """``partition_for_batch`` for a few rows of converted keys: their Python values
        and the scalar router, no Arrow kernels (each costs more than routing one row).
        Rows not ``valid`` get slot 0."""
        schema = rt.meta.schema
        names = [c.name for c in schema.key_columns if not c.auto_incrementing]
        values = [c.to_pylist() for c in cols]
        slots = []
        for ok, row in zip(valid.tolist(), zip(*values, strict=True), strict=True):
            slot = 0
            if ok:
                slot = partition_for_row(
                    rt.meta.partition_schema, schema, dict(zip(names, row, strict=True))
                )
            slots.append(slot)
        return np.array(slots, dtype=np.int64)

    def _write_part(self, w: TabletWrite, atomic: bool, ts: int) -> WriteResult:
        """A batch bound for one tablet, written there at ``ts``: the tablet commits it
        alone, no commit-log transaction needed."""
        return w.tablet.write(
            w.data,
            w.op,
            op_column=w.op_column,
            atomic=atomic,
            timestamp=ts,
            bulk_rows=bulk_rows(self.db.options, w.data.num_rows),
        )

    def check_write(
        self,
        data: pa.Table | pa.RecordBatch,
        op: WriteOp | str | int | None = None,
        *,
        op_column: str | None = None,
    ) -> list[RowError]:
        """Every per-row error ``write`` would report for this batch now (rows no range
        partition covers, then each tablet's checks), applying nothing. Inside
        ``exclusive()`` the answer holds for a ``write`` made there."""
        self.db._check_open()
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        ops = operations(data, op, op_column)
        with self._routed(data, ops) as (rt, parts, errors):
            errors += part_errors(_tablet_writes(rt, parts, op, op_column), self.db.pool)
        errors.sort(key=lambda e: e.index)
        return errors

    def adopt_staged(self, staged: Mapping[int, Sequence[tuple[str, RowSetMeta]]]) -> WriteResult:
        """Publish staged DiskRowSets (tablet id -> (staging dir, rowset metadata)) as
        rows inserted at one timestamp across the tablets; see ``Tablet.adopt_rowsets``.
        Every target tablet must be empty; the staged rowsets of a tablet must not share
        keys (``bulk_load.staged_duplicates``)."""
        self.db._check_writable()
        rt = self._rt()
        if rt.meta.schema.auto_incrementing_index is not None:
            raise ProgrammingError(
                f"table {self.name!r} has a non-unique primary key: staged rowsets cannot "
                "be adopted (its tablets assign the auto-incrementing ids on insert)"
            )
        with rt.write_lock:
            rt = self._rt()
            slot_of = {e.id: i for i, e in enumerate(rt.meta.tablets)}
            gone = [t for t in staged if t not in slot_of]
            if gone:
                raise ProgrammingError(
                    f"table {self.name!r}: tablet(s) {gone} were dropped after the rows were staged"
                )
            tablets = rt.tablets()
            slots = [slot_of[t] for t in sorted(staged)]  # tablet-id order (``transaction.py``)
            with contextlib.ExitStack() as stack:
                for slot in slots:
                    stack.enter_context(tablets[slot].exclusive())
                busy = [rt.meta.tablets[s].id for s in slots if not tablets[s].is_empty()]
                if busy:
                    raise IntegrityError(
                        f"table {self.name!r} received rows in tablet(s) {busy} after the "
                        "staged insert was planned for an empty table"
                    )
                ts = self.db.mvcc.start_op()
                try:
                    applied = sum(
                        tablets[slot_of[t]].adopt_rowsets(parts, ts) for t, parts in staged.items()
                    )
                finally:
                    self.db.mvcc.finish_op(ts)
        return WriteResult(ts, applied, 0, [])

    # -- reads ----------------------------------------------------------------------------
    def scan(
        self,
        columns: Sequence[str] | None = None,
        predicates: Sequence[ColumnPredicate] = (),
        *,
        snapshot: int | None = None,
        ordered: bool = False,
        key_range: tuple[bytes | None, bytes | None] = (None, None),
    ) -> pa.RecordBatchReader:
        """Rows live at ``snapshot`` (default: the latest) matching every predicate, read
        from the tablets the predicates do not prune, in parallel. ``ordered=True``
        returns them in primary-key order. ``key_range`` limits every tablet's scan to
        encoded primary keys in ``[lo, hi)`` (None: unbounded; a client's key bounds)."""
        rt = self._rt()
        schema = rt.meta.schema
        names = list(schema.names if columns is None else columns)
        for c in names:
            schema.index_of(c)  # unknown column: ProgrammingError
        preds = [p.bind(schema) for p in predicates]
        out_schema = schema.arrow_schema(names)
        bounded = key_range != (None, None)
        key = _full_key(schema, preds) if snapshot is None and names and not bounded else None
        if key is not None:
            return self._scan_one_key(key, names, preds, out_schema)
        snap = self.db.snapshot(snapshot)
        keep = prune_partitions(rt.meta.partition_schema, schema, rt.partitions, preds)
        tablets = [rt.tablet(i) for i in keep]
        if not ordered:
            jobs = [_scan_job(t, names, preds, snap, key_range) for t in tablets]
            return pa.RecordBatchReader.from_batches(
                out_schema, parallel_batches(jobs, self.db.options.threads)
            )
        if not rt.meta.partition_schema.hash_dimensions:
            # Range partitions are disjoint and in key order: concatenate.
            def ranges() -> Iterator[pa.RecordBatch]:
                for t in tablets:
                    yield from t.scan(
                        names, preds, snapshot=snap, ordered=True, key_range=key_range
                    )

            return pa.RecordBatchReader.from_batches(out_schema, ranges())
        keys = schema.key_names
        extra = [k for k in keys if k not in names]
        jobs = [_scan_job(t, names + extra, preds, snap, key_range) for t in tablets]
        batches = list(parallel_batches(jobs, self.db.options.threads))
        table = pa.Table.from_batches(batches, schema=schema.arrow_schema(names + extra))
        if table.num_rows:
            table = table.take(pc.sort_indices(table, [(k, "ascending") for k in keys]))
        table = table.select(names)
        return pa.RecordBatchReader.from_batches(
            out_schema, table.to_batches(max_chunksize=self.db.options.scan_batch_rows)
        )

    def _scan_one_key(
        self,
        key: tuple[Any, ...],
        names: list[str],
        preds: list[ColumnPredicate],
        out_schema: pa.Schema,
    ) -> pa.RecordBatchReader:
        """A latest-snapshot scan whose predicates fix the whole primary key: the point
        lookup path (one tablet, one rowset probe), then the other predicates."""
        wanted = list(dict.fromkeys([*names, *(p.column for p in preds)]))
        row = self.lookup(key, wanted)
        batches = []
        if row is not None:
            schema = self.schema
            one = pa.table(
                {c: pa.array([row[c]], schema.column(c).type.arrow_type()) for c in wanted}
            )
            if all(bool(p.evaluate(one.column(p.column))[0]) for p in preds):
                batches = one.select(names).cast(out_schema).to_batches()
        return pa.RecordBatchReader.from_batches(out_schema, iter(batches))

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
        rt = self._rt()
        schema = rt.meta.schema
        preds = [p.bind(schema) for p in predicates]
        self.db.snapshot(end)
        keep = prune_partitions(rt.meta.partition_schema, schema, rt.partitions, preds)
        readers = [rt.tablet(i).diff_scan(start, end, columns, preds) for i in keep]
        names = list(schema.names if columns is None else columns)
        out = schema.arrow_schema(names).append(pa.field("is_deleted", pa.bool_(), False))

        def all_batches() -> Iterator[pa.RecordBatch]:
            for r in readers:
                yield from r

        return pa.RecordBatchReader.from_batches(out, all_batches())

    def lookup(
        self,
        key: Sequence[object],
        columns: Sequence[str] | None = None,
        snapshot: int | None = None,
    ) -> dict[str, object] | None:
        """The live row with primary key ``key``, or None (one tablet, found by routing)."""
        rt = self._rt()
        schema = rt.meta.schema
        if len(key) != schema.num_key_columns:
            raise ProgrammingError(
                f"a key of {rt.meta.name!r} has {schema.num_key_columns} value(s), got {len(key)}"
            )
        if len(rt.partitions) == 1:
            slot = 0
        elif not rt.partitions:
            return None
        else:
            try:
                slot = partition_for_row(
                    rt.meta.partition_schema,
                    schema,
                    {c.name: v for c, v in zip(schema.key_columns, key, strict=True)},
                )
            except Error as e:
                raise ProgrammingError(f"bad primary key {tuple(key)!r}: {e}") from e
            if slot < 0:
                return None
        snap = None if snapshot is None else self.db.snapshot(snapshot)
        return rt.tablet(slot).lookup(key, columns, snap)

    def replica_addresses(self) -> list[str]:
        """``local`` for every tablet: this process serves them all."""
        return ["local"] * self.num_tablets

    def estimated_rows(self) -> int:
        """Rows stored in the table's tablets now (MemRowSets and DiskRowSets, deleted
        rows included): an upper bound for progress reports, read from memory only."""
        return sum(t.stored_rows() for t in self._rt().tablets())

    def count_rows(self, snapshot: int | None = None) -> int:
        first = self.schema.key_names[0]
        return sum(b.num_rows for b in self.scan([first], snapshot=snapshot))

    def scan_tokens(
        self,
        columns: Sequence[str] | None = None,
        predicates: Sequence[ColumnPredicate] = (),
        *,
        snapshot: int | None = None,
        split_size_bytes: int | None = None,
        key_range: tuple[bytes | None, bytes | None] = (None, None),
    ) -> list[ScanToken]:
        """Serializable pieces of a scan at one fixed snapshot (see ``scan_token``),
        limited to encoded primary keys in ``key_range`` ``[lo, hi)``."""
        from kudusql.storage.tables.scan_token import plan_scan_tokens

        return plan_scan_tokens(
            self, columns, predicates, snapshot, split_size_bytes, key_range=key_range
        )

    # -- maintenance and statistics ---------------------------------------------------------
    def flush(self) -> None:
        """Flush every tablet's MemRowSet and DeltaMemStores."""

        def one(t: Tablet) -> None:
            t.flush()
            t.flush_deltas()

        list(self.db.pool.map(one, self._rt().tablets()))

    def run_maintenance(self, **kw: Any) -> None:
        """Flush, compact and GC every tablet now."""
        for t in self._rt().tablets():
            t.run_maintenance(**kw)

    def statistics(self) -> dict[str, Any]:
        """Sizes per tablet (cheap, from metadata) and the column statistics of the last
        ``compute_statistics`` (None if never computed)."""
        rt = self._rt()
        tablets = []
        for entry, part, t in zip(rt.meta.tablets, rt.partitions, rt.tablets(), strict=True):
            st = t.stats()
            tablets.append(
                {
                    "tablet_id": entry.id,
                    "partition": part.describe(rt.meta.partition_schema),
                    "memrowset_rows": st["memrowset_rows"],
                    "diskrowsets": st["diskrowsets"],
                    "disk_rows": sum(r["rows"] for r in st["rowsets"][1:]),
                    "disk_bytes": st["disk_bytes"],
                    "memory_bytes": t.memory_bytes(),
                    "wal_bytes": st["wal_bytes"],
                }
            )
        return {
            "table": rt.meta.name,
            "num_tablets": len(tablets),
            "disk_bytes": sum(t["disk_bytes"] for t in tablets),
            "memory_bytes": sum(t["memory_bytes"] for t in tablets),
            "tablets": tablets,
            "computed": rt.meta.statistics,
        }

    def compute_statistics(self) -> dict[str, Any]:
        """Scan the table once and record per-table and per-tablet row counts and
        per-column min, max and null counts in the catalog (COMPUTE STATS)."""
        rt = self._rt()
        schema = rt.meta.schema
        snap = self.db.snapshot(None)
        stats = column_statistics(
            schema,
            [
                (entry.id, t.scan(schema.names, snapshot=snap))
                for entry, t in zip(rt.meta.tablets, rt.tablets(), strict=True)
            ],
            snap,
        )
        self.db._set_statistics(self.id, stats)
        return stats


def _tablet_writes(
    rt: TableRuntime,
    parts: list[_Part],
    op: WriteOp | str | int | None,
    op_column: str | None,
) -> list[TabletWrite]:
    """The routed parts as the tablets' writes of a transaction (``transaction.py``)."""
    tablets = rt.tablets()
    return [
        TabletWrite(rt.meta.tablets[p.slot].id, tablets[p.slot], p.data, op, op_column, p.rows)
        for p in parts
    ]


#: A few Python rows converted by the row layout and routed by their key values: the
#: converted rows, the batch positions bound for each tablet slot, and the errors of
#: the rows no range partition covers.
_RoutedRows = tuple[list[tuple[Any, ...]], dict[int, list[int]], list[RowError]]


def _route_rows(
    rt: TableRuntime, names: tuple[str, ...], rows: Sequence[Sequence[Any]], op: WriteOp
) -> _RoutedRows | None:
    """Convert and route a few Python rows for the row path; None when the batch path
    takes them (a column the layout cannot take, a value to cast or reject, a key the
    scalar router refuses)."""
    schema = rt.meta.schema
    lay = _layout(schema, names)
    if not lay.ok:
        return None
    conv = []
    for r in rows:
        v = lay.convert(r)
        if v is None:
            return None
        conv.append(v)
    parts: dict[int, list[int]] = {}
    errors: list[RowError] = []
    single = len(rt.partitions) == 1 and not rt.meta.partition_schema.range_columns
    key_names = schema.key_names
    for i, v in enumerate(conv):
        if single:
            slot = 0
        elif not rt.partitions:
            slot = -1
        else:
            kv = lay.key_values(v)
            try:
                slot = partition_for_row(
                    rt.meta.partition_schema, schema, dict(zip(key_names, kv, strict=True))
                )
            except Error:
                return None
        if slot < 0:
            errors.append(RowError(i, op, lay.key_values(rows[i]), "NotFound", NO_TABLET_MESSAGE))
            continue
        parts.setdefault(slot, []).append(i)
    return conv, parts, errors


_LAYOUTS: dict[tuple[int, tuple[str, ...]], RowLayout] = {}


def _layout(schema: Schema, names: tuple[str, ...]) -> RowLayout:
    """The row layout of ``names`` under ``schema`` (cached per schema object)."""
    key = (id(schema), names)
    lay = _LAYOUTS.get(key)
    if lay is None or lay.schema is not schema:
        if len(_LAYOUTS) >= 256:
            _LAYOUTS.clear()
        lay = _LAYOUTS[key] = RowLayout(schema, names)
    return lay


_SAME: dict[tuple[int, int], tuple[Schema, Schema, bool]] = {}


def _same_schema(a: Schema, b: Schema) -> bool:
    """``a == b``, remembered per pair of schema objects (a tablet's schema and its
    table's are equal but distinct objects; comparing them costs microseconds)."""
    if a is b:
        return True
    key = (id(a), id(b))
    hit = _SAME.get(key)
    if hit is None or hit[0] is not a or hit[1] is not b:
        if len(_SAME) >= 256:
            _SAME.clear()
        hit = _SAME[key] = (a, b, a == b)
    return hit[2]


def _split(data: pa.Table, slots: np.ndarray) -> list[_Part]:
    """The batch cut by tablet slot (one take per tablet); slot -1 rows are left out."""
    n = data.num_rows
    if n == 0:
        return []
    first = int(slots[0])
    if first >= 0 and bool((slots == first).all()):
        return [_Part(first, None, data)]
    data = _takeable(data)
    order = np.argsort(slots, kind="stable")
    order = order[slots[order] >= 0]
    if not len(order):
        return []
    sorted_slots = slots[order]
    cuts = np.flatnonzero(np.diff(sorted_slots)) + 1
    return [_Part(int(slots[rows[0]]), rows, data.take(rows)) for rows in np.split(order, cuts)]


def _full_key(schema: Schema, preds: Sequence[ColumnPredicate]) -> tuple[Any, ...] | None:
    """The primary key the (bound) predicates fix with equalities, if they fix all of it."""
    eq = {p.column: p.value for p in preds if p.kind is PredicateKind.EQ}
    if any(c.name not in eq for c in schema.key_columns):
        return None
    return tuple(eq[c.name] for c in schema.key_columns)


def _takeable(data: pa.Table) -> pa.Table:
    """View-layout string and binary columns as plain ones (Arrow has no take kernel for
    them); the tablet casts every column to its type anyway."""
    fields = list(data.schema)
    views = [
        i
        for i, f in enumerate(fields)
        if pa.types.is_string_view(f.type) or pa.types.is_binary_view(f.type)
    ]
    for i in views:
        f = fields[i]
        plain = pa.string() if pa.types.is_string_view(f.type) else pa.binary()
        data = data.set_column(i, f.with_type(plain), data.column(i).cast(plain))
    return data


def _key_of(data: pa.Table, schema: Schema, i: int) -> tuple[Any, ...] | None:
    names = [k for k in schema.key_names if k in data.column_names]
    return tuple(data.column(k)[i].as_py() for k in names) or None


def _scan_job(
    t: Tablet,
    names: list[str],
    preds: list[ColumnPredicate],
    snap: int,
    key_range: tuple[bytes | None, bytes | None] = (None, None),
) -> Callable[[], Iterator[pa.RecordBatch]]:
    def run() -> Iterator[pa.RecordBatch]:
        return iter(t.scan(names, preds, snapshot=snap, key_range=key_range))

    return run
