"""Tablet: one horizontal partition of a table, Kudu's unit of storage.

A tablet owns a MemRowSet for new rows, a list of DiskRowSets (each with its
DeltaMemStore and Delta files), an MVCC manager and its superblock. It applies write
batches with Kudu's row semantics (one timestamp per batch, per-row errors, an
optional atomic mode), flushes the MemRowSet and DeltaMemStores while writes go on,
and serves scans at any snapshot still inside the history it keeps.

Concurrency: one writer at a time (the write lock); flushes hold the lock only to
freeze a store and to swap the result in; readers never lock, they capture the
current set of rowsets and filter everything by timestamp.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kudusql.common.errors import DataError, Error, IntegrityError, ProgrammingError
from kudusql.common.hybrid_time import HybridClock, describe, from_micros, to_micros
from kudusql.common.keys import encode_key
from kudusql.common.options import TabletOptions
from kudusql.common.predicates import ColumnPredicate
from kudusql.common.schema import Schema
from kudusql.storage.cfile import BlockCache
from kudusql.storage.tablet import metadata
from kudusql.storage.tablet.delta import ColumnDelta, Deltas, MutationType
from kudusql.storage.tablet.deltafile import write_delta_file
from kudusql.storage.tablet.diskrowset import DeltaFileMeta, DiskRowSet, default_column, rowset_dir
from kudusql.storage.tablet.flush import prepare_flush
from kudusql.storage.tablet.key_bounds import key_bounds
from kudusql.storage.tablet.memrowset import MemRowSet
from kudusql.storage.tablet.metadata import TabletMeta
from kudusql.storage.tablet.mvcc import MvccManager
from kudusql.storage.tablet.rowset_writer import RowSetWriteOptions, write_rowsets
from kudusql.storage.tablet.scanner import ScanPlan, scan_diskrowset, scan_memrowset
from kudusql.storage.tablet.write_ops import (
    DELETING,
    E_IMMUTABLE,
    E_NOT_FOUND,
    E_OK,
    E_PRESENT,
    IGNORING,
    INSERTING,
    UPDATING,
    UPSERTING,
    PreparedBatch,
    RowError,
    WriteOp,
    WriteResult,
    error_message,
    occurrence_rounds,
    prepare,
)

log = logging.getLogger(__name__)

# Actions decided per row.
A_NONE, A_INSERT, A_REINSERT, A_UPDATE, A_DELETE, A_IGNORED = range(6)
# Where a live key is.
K_NONE, K_MRS, K_DRS, K_FROZEN = range(4)


@dataclass(frozen=True)
class RowSets:
    """The rowsets a reader captured: replaced as a whole, never changed in place."""

    mrs: MemRowSet
    frozen: tuple[MemRowSet, ...]
    drs: tuple[DiskRowSet, ...]


class Tablet:
    """One tablet directory: create with ``Tablet.create``, reopen with ``Tablet.open``."""

    def __init__(
        self,
        path: str,
        meta: TabletMeta,
        options: TabletOptions,
        *,
        clock: HybridClock | None = None,
        cache: BlockCache | None = None,
    ) -> None:
        self.path = path
        self.options = options
        self.meta = meta
        self.schema = meta.schema
        self.clock = clock or HybridClock()
        self.clock.observe(meta.max_ts)
        self.mvcc = MvccManager(self.clock)
        self.cache = cache if cache is not None else BlockCache(options.block_cache_bytes)
        self._write_lock = threading.RLock()
        self._maint_lock = threading.Lock()
        self._next_seq = meta.next_seq
        self._next_mrs_id = meta.last_durable_mrs_id + 1
        drs = tuple(DiskRowSet(path, m, self.cache) for m in meta.rowsets)
        self._rowsets = RowSets(self._new_mrs(), (), drs)
        self._pool = ThreadPoolExecutor(max(1, options.threads), thread_name_prefix="tablet")
        self._closed = False
        self._key_types = [c.type for c in self.schema.key_columns]
        self._remove_orphans()

    # -- lifecycle ----------------------------------------------------------------------------
    @classmethod
    def create(
        cls, path: str, schema: Schema, options: TabletOptions | None = None, **kw: Any
    ) -> Tablet:
        options = options or TabletOptions()
        if os.path.exists(os.path.join(path, metadata.META_FILE)):
            raise ProgrammingError(f"a tablet already exists at {path}")
        os.makedirs(os.path.join(path, "rowsets"), exist_ok=True)
        meta = TabletMeta(schema)
        metadata.save(path, meta, sync=options.sync)
        return cls(path, meta, options, **kw)

    @classmethod
    def open(cls, path: str, options: TabletOptions | None = None, **kw: Any) -> Tablet:
        return cls(path, metadata.load(path), options or TabletOptions(), **kw)

    def close(self, *, flush: bool = True) -> None:
        """Flush what is in memory (there is no WAL yet to replay it) and release."""
        if self._closed:
            return
        if flush:
            self.flush()
            self.flush_deltas()
        self._closed = True
        self._pool.shutdown(wait=True)

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
                log.warning("removing orphaned rowset directory %s", full)
                shutil.rmtree(full, ignore_errors=True)

    # -- time -----------------------------------------------------------------------------------
    def latest_timestamp(self) -> int:
        """A snapshot timestamp that sees every write applied so far."""
        return self.mvcc.latest_snapshot()

    def ancient_history_mark(self) -> int:
        age = self.meta.history_max_age_s
        if age is None:
            age = self.options.history_max_age_s
        if age < 0:
            return 0
        return from_micros(max(0, to_micros(self.clock.peek()) - int(age * 1_000_000)))

    def _check_snapshot(self, ts: int) -> None:
        ahm = self.ancient_history_mark()
        if ts < ahm:
            raise ProgrammingError(
                f"snapshot {describe(ts)} is earlier than the ancient history mark "
                f"{describe(ahm)}: history older than {self.options.history_max_age_s:g} s "
                "is not kept (raise history_max_age_s to keep more)"
            )
        self.mvcc.wait_for_snapshot(ts)

    # -- writes ---------------------------------------------------------------------------------
    def write(
        self,
        data: pa.Table | pa.RecordBatch,
        op: WriteOp | str | int | None = None,
        *,
        op_column: str | None = None,
        atomic: bool = False,
        timestamp: int | None = None,
    ) -> WriteResult:
        """Apply a batch: one operation for every row (``op``) or per row (``op_column``).

        Good rows commit together at one timestamp; bad rows are returned as per-row
        errors. With ``atomic=True`` the batch applies entirely or raises.
        """
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        n = data.num_rows
        if op_column is not None:
            opcol = data.column(op_column)
            data = data.drop_columns([op_column])
            if pa.types.is_integer(opcol.type):
                ops = np.asarray(opcol.to_numpy(), dtype=np.int64)
                bad = [int(v) for v in np.unique(ops) if int(v) not in WriteOp._value2member_map_]
                if bad:
                    raise ProgrammingError(f"unknown write operation code(s) {bad}")
                ops = ops.astype(np.uint8)
            else:
                names = opcol.to_pylist()
                uniq = {v: WriteOp.parse(v) for v in set(names) if v is not None}
                if len(uniq) != len(set(names)):
                    raise ProgrammingError(f"{op_column} holds a NULL operation")
                ops = np.fromiter((uniq[v] for v in names), dtype=np.uint8, count=n)
        elif op is not None:
            ops = np.full(n, WriteOp.parse(op), dtype=np.uint8)
        else:
            raise ProgrammingError("write() needs an operation or an op_column")
        pb = prepare(self.schema, data, ops)
        with self._write_lock:
            return self._write_locked(pb, atomic, timestamp)

    def insert(self, data: pa.Table | pa.RecordBatch, **kw: Any) -> WriteResult:
        return self.write(data, WriteOp.INSERT, **kw)

    def upsert(self, data: pa.Table | pa.RecordBatch, **kw: Any) -> WriteResult:
        return self.write(data, WriteOp.UPSERT, **kw)

    def update(self, data: pa.Table | pa.RecordBatch, **kw: Any) -> WriteResult:
        return self.write(data, WriteOp.UPDATE, **kw)

    def delete(self, data: pa.Table | pa.RecordBatch, **kw: Any) -> WriteResult:
        return self.write(data, WriteOp.DELETE, **kw)

    def _locate(
        self, rs: RowSets, keys: pa.Array[Any]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Where each key lives now: (kind, rowset index, row, active-MRS slot, exists)."""
        m = len(keys)
        kind = np.zeros(m, dtype=np.int8)
        rsi = np.full(m, -1, dtype=np.int64)
        row = np.full(m, -1, dtype=np.int64)
        slot = rs.mrs.lookup(keys) if m else np.zeros(0, dtype=np.int64)
        found = slot >= 0
        if found.any():
            live = np.zeros(m, dtype=bool)
            live[found] = rs.mrs.alive_at_latest(slot[found])
            kind[live] = K_MRS
            row[live] = slot[live]
        for fi, fm in enumerate(rs.frozen):
            todo = np.flatnonzero(kind == K_NONE)
            if not len(todo):
                break
            fs = fm.lookup(keys.take(todo))
            hit = fs >= 0
            if hit.any():
                live = np.zeros(len(todo), dtype=bool)
                live[hit] = fm.alive_at_latest(fs[hit])
                kind[todo[live]] = K_FROZEN
                rsi[todo[live]] = fi
                row[todo[live]] = fs[live]
        for di, drs in enumerate(rs.drs):
            todo = np.flatnonzero(kind == K_NONE)
            if not len(todo):
                break
            sub = keys if len(todo) == m else keys.take(todo)
            rids = drs.find_rowids(sub)
            hit = rids >= 0
            if hit.any():
                live = np.zeros(len(todo), dtype=bool)
                live[hit] = ~drs.dead_at_latest()[rids[hit]]
                kind[todo[live]] = K_DRS
                rsi[todo[live]] = di
                row[todo[live]] = rids[live]
        return kind, rsi, row, slot, kind != K_NONE

    def _write_locked(self, pb: PreparedBatch, atomic: bool, timestamp: int | None) -> WriteResult:
        rs = self._rowsets
        n = pb.n
        ops = pb.ops
        err = pb.err.copy()
        action = np.zeros(n, dtype=np.int8)
        tkind = np.zeros(n, dtype=np.int8)
        trs = np.full(n, -1, dtype=np.int64)
        trow = np.full(n, -1, dtype=np.int64)
        drop_imm = np.zeros(n, dtype=bool)
        nk = self.schema.num_key_columns
        present_nonkey = [i for i in pb.columns if i >= nk]
        imm_present = any(self.schema.columns[i].immutable for i in present_nonkey)
        valid = err == E_OK
        occ = occurrence_rounds(pb.keys, valid)
        next_slot = rs.mrs.num_slots
        new_slots: list[np.ndarray] = []  # batch rows that become new MemRowSet rows, in slot order
        overlay: dict[bytes, tuple[int, int, int, int]] = {}  # key -> kind, rs, row, mrs slot
        dup_keys: set[bytes] = set()
        if valid.any() and occ.max() > 0:
            dup_keys = set(pb.keys.take(np.flatnonzero(occ > 0)).to_pylist())  # type: ignore[arg-type]
        max_round = int(occ[valid].max()) if valid.any() else -1
        for r in range(max_round + 1):
            rows = np.flatnonzero(valid & (occ == r))
            if not len(rows):
                continue
            rkeys = pb.keys.take(rows) if len(rows) < n else pb.keys
            if r == 0:
                kind, rsi, row, slot, exists = self._locate(rs, rkeys)
            else:
                st = [overlay[k] for k in rkeys.to_pylist()]  # type: ignore[index]
                kind = np.array([s[0] for s in st], dtype=np.int8)
                rsi = np.array([s[1] for s in st], dtype=np.int64)
                row = np.array([s[2] for s in st], dtype=np.int64)
                slot = np.array([s[3] for s in st], dtype=np.int64)
                exists = kind != K_NONE
            o = ops[rows]
            ins, ups, upd, dele, ign = (
                INSERTING[o],
                UPSERTING[o],
                UPDATING[o],
                DELETING[o],
                IGNORING[o],
            )
            act = np.zeros(len(rows), dtype=np.int8)
            e = np.zeros(len(rows), dtype=np.int8)
            e[ins & exists & ~ign] = E_PRESENT
            act[ins & exists & ign] = A_IGNORED
            e[(upd | dele) & ~exists & ~ign] = E_NOT_FOUND
            act[(upd | dele) & ~exists & ign] = A_IGNORED
            to_insert = (ins | ups) & ~exists
            act[to_insert & (slot >= 0)] = A_REINSERT
            act[to_insert & (slot < 0)] = A_INSERT
            to_update = (ups | upd) & exists
            if not present_nonkey:
                act[to_update] = A_NONE  # a PK-only upsert of a present key: a no-op
            else:
                act[to_update] = A_UPDATE
                if imm_present:
                    strict = to_update & ((o == WriteOp.UPSERT) | (o == WriteOp.UPDATE))
                    e[strict] = E_IMMUTABLE
                    act[strict] = A_NONE
                    drop_imm[rows[to_update & ~strict]] = True
            act[dele & exists] = A_DELETE
            # targets
            tk = kind.copy()
            tr = row.copy()
            ins_rows = np.flatnonzero(act == A_INSERT)
            new_ids = np.arange(next_slot, next_slot + len(ins_rows), dtype=np.int64)
            next_slot += len(ins_rows)
            new_slots.append(rows[ins_rows])
            tk[ins_rows] = K_MRS
            tr[ins_rows] = new_ids
            reins = act == A_REINSERT
            tk[reins] = K_MRS
            tr[reins] = slot[reins]
            err[rows] = np.where(e != E_OK, e, err[rows])
            action[rows] = act
            tkind[rows] = tk
            trs[rows] = rsi
            trow[rows] = tr
            if dup_keys:
                self._update_overlay(overlay, dup_keys, rkeys, act, e, kind, rsi, row, slot, tk, tr)
        if atomic and (err != E_OK).any():
            errors = self._row_errors(pb, err)
            raise (
                IntegrityError(
                    f"atomic write batch rejected: {len(errors)} row error(s); first: {errors[0]}"
                )
                if any(x.status in ("AlreadyPresent", "NotFound") for x in errors)
                else DataError(
                    f"atomic write batch rejected: {len(errors)} row error(s); first: {errors[0]}"
                )
            )
        ts = self.mvcc.start_op(timestamp)
        try:
            seq_base = self._next_seq
            self._next_seq += n
            self._apply(rs, pb, ts, seq_base, action, tkind, trs, trow, drop_imm, new_slots)
        finally:
            self.mvcc.finish_op(ts)
        self.meta.max_ts = max(self.meta.max_ts, ts)
        errors = self._row_errors(pb, err)
        ignored = int(np.count_nonzero(action == A_IGNORED))
        applied = int(np.count_nonzero((err == E_OK) & (action != A_IGNORED)))
        return WriteResult(ts, applied, ignored, errors)

    @staticmethod
    def _update_overlay(
        overlay: dict[bytes, tuple[int, int, int, int]],
        dup_keys: set[bytes],
        rkeys: pa.Array[Any],
        act: np.ndarray,
        e: np.ndarray,
        kind: np.ndarray,
        rsi: np.ndarray,
        row: np.ndarray,
        slot: np.ndarray,
        tk: np.ndarray,
        tr: np.ndarray,
    ) -> None:
        """Record the state of keys that come back in a later round (rare: a Python loop
        over repeated keys only)."""
        for j, k in enumerate(rkeys.to_pylist()):
            if k not in dup_keys:
                continue
            a = int(act[j])
            if e[j] != E_OK or a in (A_NONE, A_IGNORED, A_UPDATE):
                overlay[k] = (int(kind[j]), int(rsi[j]), int(row[j]), int(slot[j]))
            elif a in (A_INSERT, A_REINSERT):
                overlay[k] = (K_MRS, -1, int(tr[j]), int(tr[j]))
            elif a == A_DELETE:
                s = int(row[j]) if kind[j] == K_MRS else int(slot[j])
                overlay[k] = (K_NONE, -1, -1, s)

    def _apply(
        self,
        rs: RowSets,
        pb: PreparedBatch,
        ts: int,
        seq_base: int,
        action: np.ndarray,
        tkind: np.ndarray,
        trs: np.ndarray,
        trow: np.ndarray,
        drop_imm: np.ndarray,
        new_slots: list[np.ndarray],
    ) -> None:
        schema = self.schema
        batch_rows = np.concatenate(new_slots) if new_slots else np.zeros(0, np.int64)
        if len(batch_rows):
            everything = len(batch_rows) == pb.n and bool(np.all(batch_rows == np.arange(pb.n)))
            idx = batch_rows
            cols = []
            for i, c in enumerate(schema.columns):
                arr = pb.columns.get(i)
                if arr is None:
                    cols.append(default_column(c, len(batch_rows)))
                else:
                    cols.append(arr if everything else arr.take(idx))
            batch = pa.RecordBatch.from_arrays(cols, schema=schema.arrow_schema())
            keys = pb.keys if everything else pb.keys.take(idx)
            rs.mrs.insert(batch, keys, ts, seq_base + batch_rows)
        mut = np.isin(action, (A_REINSERT, A_UPDATE, A_DELETE))
        if not mut.any():
            return
        rows = np.flatnonzero(mut)
        groups: dict[tuple[int, int], np.ndarray] = {}
        key = tkind[rows].astype(np.int64) * (1 << 40) + (trs[rows] + 1)
        for g in np.unique(key):
            groups[(int(g >> 40), int(g & ((1 << 40) - 1)) - 1)] = rows[key == g]
        for (k, ri), grows in groups.items():
            d = self._build_deltas(pb, grows, action, trow, drop_imm, ts, seq_base)
            if k == K_MRS:
                rs.mrs.mutate(d)
            elif k == K_FROZEN:
                rs.frozen[ri].mutate(d)
            else:
                rs.drs[ri].apply_mutations(d)

    def _build_deltas(
        self,
        pb: PreparedBatch,
        rows: np.ndarray,
        action: np.ndarray,
        trow: np.ndarray,
        drop_imm: np.ndarray,
        ts: int,
        seq_base: int,
    ) -> Deltas:
        a = action[rows]
        op = np.where(
            a == A_UPDATE,
            np.uint8(MutationType.UPDATE),
            np.where(a == A_DELETE, np.uint8(MutationType.DELETE), np.uint8(MutationType.REINSERT)),
        ).astype(np.uint8)
        cols: dict[int, ColumnDelta] = {}
        for i in range(self.schema.num_key_columns, len(self.schema.columns)):
            c = self.schema.columns[i]
            arr = pb.columns.get(i)
            if arr is not None:
                sets = (op == MutationType.REINSERT) | (
                    (op == MutationType.UPDATE) & ~(drop_imm[rows] & c.immutable)
                )
                if sets.any():
                    cols[c.id] = ColumnDelta(np.flatnonzero(sets), arr.take(rows[sets]))
            else:
                sets = op == MutationType.REINSERT
                if sets.any():
                    cols[c.id] = ColumnDelta(
                        np.flatnonzero(sets), default_column(c, int(sets.sum()))
                    )
        return Deltas(
            trow[rows].astype(np.int64),
            np.full(len(rows), ts, dtype=np.uint64),
            (seq_base + rows).astype(np.int64),
            op,
            cols,
        )

    def _row_errors(self, pb: PreparedBatch, err: np.ndarray) -> list[RowError]:
        bad = np.flatnonzero(err != E_OK)
        if not len(bad):
            return []
        out = []
        key_names = [c.name for c in self.schema.key_columns if c.name in pb.source.column_names]
        for i in bad.tolist():
            status, msg = error_message(int(err[i]), pb.detail.get(i))
            key = tuple(pb.source.column(k)[i].as_py() for k in key_names) or None
            out.append(RowError(i, WriteOp(int(pb.ops[i])), key, status, msg))
        return out

    # -- flushes --------------------------------------------------------------------------------
    def flush(self) -> int:
        """Flush the MemRowSet to DiskRowSets; returns the number of rowsets written."""
        with self._maint_lock:
            with self._write_lock:
                rs = self._rowsets
                if rs.mrs.is_empty():
                    return 0
                frozen = rs.mrs
                self._rowsets = RowSets(self._new_mrs(), (*rs.frozen, frozen), rs.drs)
                view = frozen.view()
                cutoff_seq = frozen.max_seq
            fi = prepare_flush(view, self.schema)
            first_id = self.meta.next_rowset_id
            metas = write_rowsets(
                self.path,
                first_id,
                self.schema,
                fi.rows,
                fi.keys,
                fi.undo,
                fi.redo,
                self._write_opts(),
                self._pool,
            )
            with self._write_lock:
                new = [DiskRowSet(self.path, m, self.cache) for m in metas]
                # Mutations that reached the frozen MemRowSet during the flush move to the
                # new rowsets' DeltaMemStores.
                late = frozen.view().deltas
                if len(late):
                    late = late.select(late.seq > cutoff_seq)
                if len(late):
                    self._migrate(late, fi.slot_to_rowid, new)
                rs = self._rowsets
                self.meta.rowsets.extend(m for m in metas)
                self.meta.next_rowset_id = first_id + len(metas)
                self.meta.last_durable_mrs_id = frozen.id
                self.meta.next_seq = self._next_seq
                self._rowsets = RowSets(
                    rs.mrs, tuple(f for f in rs.frozen if f is not frozen), (*rs.drs, *new)
                )
                self._save_meta()
            return len(metas)

    def _migrate(self, late: Deltas, slot_to_rowid: np.ndarray, new: list[DiskRowSet]) -> None:
        rowids = slot_to_rowid[late.rowid]
        starts = np.cumsum([0] + [d.num_rows for d in new])
        which = np.searchsorted(starts, rowids, side="right") - 1
        for i, d in enumerate(new):
            m = which == i
            if m.any():
                part = late.select(m)
                d.apply_mutations(
                    Deltas(rowids[m] - starts[i], part.ts, part.seq, part.op, part.cols)
                )

    def flush_deltas(self) -> int:
        """Flush every non-empty DeltaMemStore to a REDO DeltaFile; returns how many."""
        done = 0
        with self._maint_lock:
            for drs in self._rowsets.drs:
                with self._write_lock:
                    if drs.dms.is_empty():
                        continue
                    frozen = drs.freeze_dms()
                name = f"redo{frozen.id}.delta"
                types = {c.id: c.type for c in self.schema.columns}
                st = write_delta_file(
                    os.path.join(drs.dir, name),
                    "redo",
                    frozen.deltas(),
                    types,
                    sync=self.options.sync,
                )
                with self._write_lock:
                    drs.install_redo_file(DeltaFileMeta(name, st), frozen.id)
                    self._save_meta()
                done += 1
        return done

    def _write_opts(self) -> RowSetWriteOptions:
        o = self.options
        return RowSetWriteOptions(o.rowset_target_bytes, o.rows_per_page, o.sync, o.bloom_fp_rate)

    def _save_meta(self) -> None:
        self.meta.next_seq = self._next_seq
        metadata.save(self.path, self.meta, sync=self.options.sync)

    # -- reads ----------------------------------------------------------------------------------
    def scan(
        self,
        columns: Sequence[str] | None = None,
        predicates: Sequence[ColumnPredicate] = (),
        *,
        snapshot: int | None = None,
        ordered: bool = False,
    ) -> pa.RecordBatchReader:
        """Rows live at ``snapshot`` (default: now) matching every predicate.

        ``ordered=True`` returns them in primary-key order.
        """
        plan = self._plan(columns, predicates, snapshot, None, ordered)
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
        for b, _ in self._iter_with_keys(rs, plan):
            if b.num_rows:
                yield b

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
        for m in (rs.mrs, *rs.frozen):
            slot = m.lookup_one(enc)
            if slot >= 0 and m.alive_at_latest(np.array([slot]))[0]:
                return m.row_at(slot, proj)
        for d in rs.drs:
            rid = d.find_rowid_one(enc)
            if rid >= 0 and not d.dead_at_latest()[rid]:
                return d.row_at(rid, proj)
        return None

    # -- introspection --------------------------------------------------------------------------
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
                **d.delta_stats(),
            }
            for d in rs.drs
        )
        return out

    def memrowset_bytes(self) -> int:
        return self._rowsets.mrs.bytes

    def wait_idle(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while self._maint_lock.locked() and time.monotonic() < deadline:
            time.sleep(0.01)


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
    first_kept = np.zeros(nruns, dtype=bool)
    for_keep = np.flatnonzero(keep)
    _, first_idx = np.unique(run_id[for_keep], return_index=True)
    final = np.zeros(n, dtype=bool)
    final[for_keep[first_idx]] = True
    del first_kept
    return table.filter(pa.array(final))
