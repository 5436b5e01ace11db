"""Tablet bootstrap: rebuild the in-memory stores from the WAL after an open or a crash.

Every WAL record is a write batch as decided (``log_record``). A row is replayed only if
the store it went to is not durable yet: its MemRowSet id is above the superblock's
``last_durable_mrs_id``, or its DeltaMemStore id is above its DiskRowSet's
``last_durable_dms_id``. Replayed rows keep their timestamps and sequence numbers, so
time travel answers as it did before the crash. Inserts go into the new MemRowSet in
log order; mutations of MemRowSet rows find their slot by key.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from kudusql.common.arrays import sorted_unique
from kudusql.common.errors import CorruptionError
from kudusql.common.schema import Schema
from kudusql.storage.tablet.log_record import (
    KIND_DRS,
    KIND_MRS,
    TXN_FINALIZE,
    TXN_PART,
    CompactBatch,
    DecidedBatch,
    decode_record,
    txn_envelope,
)
from kudusql.storage.tablet.memrowset import MemRowSet
from kudusql.storage.tablet.row_write import RowLayout
from kudusql.storage.tablet.rowsets import RowSets
from kudusql.storage.tablet.write_path import (
    A_DELETE,
    A_INSERT,
    A_REINSERT,
    K_DRS,
    K_MRS,
    Decisions,
    apply,
)
from kudusql.storage.wal import LogRecord

log = logging.getLogger(__name__)


class UnknownRowSetError(CorruptionError):
    """A WAL record names a rowset newer than the superblock. For the writer that is
    corruption; a read-only process can get it when the writer flushed between its
    reading the superblock and the log (it then reads both again)."""


@dataclass
class ReplayStats:
    records: int = 0
    rows_replayed: int = 0
    rows_skipped: int = 0
    bytes: int = 0
    max_ts: int = 0
    next_seq: int = 0


@dataclass
class _Values:
    """Batch values in the shape ``apply`` expects (full batch length)."""

    n: int
    columns: dict[int, pa.Array[Any]]
    keys: pa.Array[Any]


@dataclass
class TxnRecords:
    """What the transaction records of a replayed log held (``committed_records``)."""

    #: Parts applied because the database's commit log says their transaction
    #: committed, with no FINALIZE marker after them here (a crash came between).
    rolled_forward: set[int] = field(default_factory=set)
    #: The highest sequence number and timestamp of any record, skipped ones included.
    next_seq: int = 0
    max_ts: int = 0


def committed_records(
    records: Iterable[LogRecord], committed: Callable[[int], bool], out: TxnRecords
) -> Iterator[LogRecord]:
    """The records replay applies: plain batches, and the parts of multi-tablet
    transactions that committed, unwrapped (``log_record.encode_txn_part``).

    A part is committed when the next record is its FINALIZE marker (the writer holds
    the tablet from the part to its marker, so nothing comes between them), or else when
    ``committed`` (the database's commit log) says so; otherwise its transaction aborted
    and the part is skipped. Markers are not yielded."""
    pending: LogRecord | None = None  # a part waiting to see the next record
    pending_ts = 0
    for rec in records:
        env = txn_envelope(rec.payload)
        if env is not None:
            _, ts, seq_base, n, _ = env
            out.next_seq = max(out.next_seq, seq_base + n)
            out.max_ts = max(out.max_ts, ts)
        if pending is not None:
            if env is not None and env[0] == TXN_FINALIZE and env[1] == pending_ts:
                yield pending
                pending = None
                continue
            yield from _resolve(pending, pending_ts, committed, out)
            pending = None
        if env is None:
            yield rec
        elif env[0] == TXN_PART:
            assert env[4] is not None
            pending = rec._replace(payload=env[4])
            pending_ts = env[1]
    if pending is not None:
        yield from _resolve(pending, pending_ts, committed, out)


def _resolve(
    part: LogRecord, ts: int, committed: Callable[[int], bool], out: TxnRecords
) -> Iterator[LogRecord]:
    if committed(ts):
        out.rolled_forward.add(ts)
        yield part


def replay(
    records: Iterable[LogRecord],
    rs: RowSets,
    schema: Schema,
    last_durable_mrs_id: int,
    next_rowset_id: int,
) -> ReplayStats:
    """Apply the non-durable part of every record to ``rs`` (its MemRowSet is empty).

    A record may name a DiskRowSet the superblock no longer lists: a compaction merged it
    (after writing every mutation it had into its outputs) or history GC dropped it. Such
    rows are durable (or moot) and skipped; an id never handed out is corruption."""
    st = ReplayStats()
    by_id = {d.id: i for i, d in enumerate(rs.drs)}
    index_of_id = {c.id: i for i, c in enumerate(schema.columns)}
    types = {c.id: c.type.arrow_type() for c in schema.columns}
    layouts: dict[tuple[int, ...], RowLayout | None] = {}
    # The MemRowSet ids whose rows the replayed MemRowSet holds. While every replayed
    # MemRowSet row comes from one store, an INSERT logged for that store cannot meet a
    # key the replayed MemRowSet holds (the writer decided it against that very store,
    # where a held key makes a REINSERT or an error), so its key needs no probe.
    mrs_stores: set[int] = set()
    # Consecutive compact records of MemRowSet inserts (the row path's) are collected and
    # appended to the MemRowSet in one call, before anything else reads or changes it.
    run = _InsertRun()
    for rec in records:
        st.records += 1
        st.bytes += len(rec.payload)
        got = decode_record(rec.payload, rec.segment, rec.offset)
        if got.ts > st.max_ts:
            st.max_ts = got.ts
        if got.seq_base + got.n > st.next_seq:
            st.next_seq = got.seq_base + got.n
        if isinstance(got, CompactBatch):
            if _replay_inserts(got, rs, schema, last_durable_mrs_id, layouts, st, mrs_stores, run):
                continue
            run.flush(rs.mrs)
            db = got.to_decided(types)
        else:
            run.flush(rs.mrs)
            db = got
        keep = np.zeros(len(db.row), dtype=bool)
        is_mrs = db.kind == KIND_MRS
        keep[is_mrs] = db.store[is_mrs] > last_durable_mrs_id
        trs = np.full(len(db.row), -1, dtype=np.int64)
        for j in np.flatnonzero(db.kind == KIND_DRS).tolist():
            i = by_id.get(int(db.store[j]))
            if i is None and int(db.store[j]) < next_rowset_id:
                continue  # compacted away or GC'd: keep[j] stays False
            if i is None:
                raise UnknownRowSetError(
                    rec.segment,
                    rec.offset,
                    f"WAL record names DiskRowSet {int(db.store[j])}, which the tablet lacks",
                )
            trs[j] = i
            keep[j] = db.dms[j] > rs.drs[i].meta.last_durable_dms_id
        st.rows_skipped += int((~keep).sum())
        if not keep.any():
            continue
        # The replayed rows of several stores (a store frozen by a failed flush and its
        # successor) land in one: it takes the newest id, so that flushing it makes
        # every one of them durable.
        kept_mrs = keep & is_mrs
        probe = True
        if kept_mrs.any():
            logged = db.store[kept_mrs]
            lo, hi = int(logged.min()), int(logged.max())
            stores = [lo] if lo == hi else sorted_unique(logged).tolist()
            probe = len(stores) > 1 or not mrs_stores <= {lo}
            mrs_stores.update(stores)
            rs.mrs.id = max(rs.mrs.id, hi)
        for j in np.flatnonzero(keep & (db.kind == KIND_DRS)).tolist():
            dms = rs.drs[int(trs[j])].dms
            dms.id = max(dms.id, int(db.dms[j]))
        st.rows_replayed += int(keep.sum())
        _apply_record(rs, schema, index_of_id, db, keep, trs, probe)
    run.flush(rs.mrs)
    return st


class _InsertRun:
    """MemRowSet rows of consecutive compact insert records, not yet appended."""

    __slots__ = ("keys", "nbytes", "rows", "seqs", "stamps")

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []
        self.keys: list[bytes] = []
        self.stamps: list[int] = []
        self.seqs: list[int] = []
        self.nbytes = 0

    def flush(self, mrs: MemRowSet) -> None:
        if self.rows:
            mrs.insert_run(self.rows, self.keys, self.stamps, self.seqs, self.nbytes)
            self.__init__()  # type: ignore[misc]


def _replay_inserts(
    cb: CompactBatch,
    rs: RowSets,
    schema: Schema,
    last_durable_mrs_id: int,
    layouts: dict[tuple[int, ...], RowLayout | None],
    st: ReplayStats,
    mrs_stores: set[int],
    run: _InsertRun,
) -> bool:
    """Replay a compact record of MemRowSet inserts as tuples (the row path's records)
    into ``run``; False when it holds anything else, for the general replay."""
    rows = cb.rows
    for r in rows:
        if r[1] != A_INSERT or r[2] != KIND_MRS:
            return False
    lay = layouts.get(cb.col_ids, _NO_LAYOUT)
    if lay is _NO_LAYOUT:
        by_id = {c.id: c.name for c in schema.columns}
        lay = None
        if all(cid in by_id for cid in cb.col_ids):  # else a dropped column: general path
            lay = RowLayout(schema, [by_id[cid] for cid in cb.col_ids])
        layouts[cb.col_ids] = lay
    if lay is None or not lay.ok:
        return False
    kept = [r for r in rows if r[3] > last_durable_mrs_id]
    if len(kept) != len(rows):
        st.rows_skipped += len(rows) - len(kept)
    if not kept:
        return True
    stores = {r[3] for r in kept}
    # An insert of a key the replayed MemRowSet holds (deleted) is a REINSERT there; it
    # can only hold it if its rows come from another store (see ``replay``).
    if len(stores) > 1 or not mrs_stores <= stores:
        run.flush(rs.mrs)
        if any(rs.mrs.lookup_one(r[7]) >= 0 for r in kept):
            if len(kept) != len(rows):
                st.rows_skipped -= len(rows) - len(kept)  # the general replay counts them
            return False
    if not stores <= mrs_stores:
        mrs_stores |= stores
    top = max(stores)
    if top > rs.mrs.id:
        rs.mrs.id = top
    st.rows_replayed += len(kept)
    ts, seq_base, full, nbytes = cb.ts, cb.seq_base, lay.full, lay.nbytes
    for r in kept:
        run.rows.append(full(r[8]))
        run.keys.append(r[7])
        run.stamps.append(ts)
        run.seqs.append(seq_base + r[0])
        run.nbytes += nbytes(r[8], r[7])
    return True


_NO_LAYOUT: Any = object()


def _apply_record(
    rs: RowSets,
    schema: Schema,
    index_of_id: dict[int, int],
    db: DecidedBatch,
    keep: np.ndarray,
    trs_logged: np.ndarray,
    probe: bool,
) -> None:
    """Apply the kept rows of ``db``; ``probe``: its MemRowSet inserts may meet keys
    the replayed MemRowSet holds (see ``replay``)."""
    n = db.n
    rows = db.row[keep]
    # Position of each batch row among the kept logged rows (-1 if not kept).
    pos = np.full(n, -1, dtype=np.int64)
    pos[rows] = np.arange(len(rows))
    columns = {}
    if len(rows) == n:  # every row of the batch is logged and kept: 0..n-1 in order
        for cid, arr in db.columns.items():
            i = index_of_id.get(cid)
            if i is not None:  # a column dropped since is ignored
                columns[i] = arr
        values = _Values(n, columns, db.keys)
    else:
        take = pa.array(np.where(pos >= 0, pos, 0), mask=pos < 0, type=pa.int64())
        mask = pa.array(keep)
        for cid, arr in db.columns.items():
            i = index_of_id.get(cid)
            if i is not None:
                columns[i] = arr.filter(mask).take(take)
        values = _Values(n, columns, db.keys.filter(mask).take(take))

    action = np.zeros(n, dtype=np.int8)
    tkind = np.zeros(n, dtype=np.int8)
    trs = np.full(n, -1, dtype=np.int64)
    trow = np.full(n, -1, dtype=np.int64)
    drop_imm = np.zeros(n, dtype=bool)
    logged = db.action[keep]
    if len(logged) and not ((logged >= A_INSERT) & (logged <= A_DELETE)).all():
        # A checksummed record cannot hold one unless written wrong; the write path's
        # action tables (write_path.MUTATES) index by it.
        raise CorruptionError("WAL", 0, "a replayed row has an unknown action code")
    action[rows] = logged
    drop_imm[rows] = db.drop_immutable[keep]
    kind = db.kind[keep]
    on_drs = kind == KIND_DRS
    tkind[rows] = np.where(on_drs, K_DRS, K_MRS)
    trs[rows[on_drs]] = trs_logged[keep][on_drs]
    trow[rows[on_drs]] = db.rowid[keep][on_drs]
    # MemRowSet rows: inserts get new slots in order; the others find their slot by key,
    # among this batch's inserts first. An insert of a key the replayed MemRowSet already
    # holds (deleted) becomes a REINSERT of that slot: the rows of a MemRowSet frozen by
    # a failed flush and of its successor are replayed into one MemRowSet, and a key
    # deleted in the first and inserted into the second must stay one row.
    ins = rows[(~on_drs) & (db.action[keep] == A_INSERT)]
    if len(ins) and probe:
        ins_slot = rs.mrs.lookup(values.keys.take(ins))
    else:
        ins_slot = np.full(len(ins), -1, dtype=np.int64)
    again = ins_slot >= 0
    action[ins[again]] = A_REINSERT
    fresh = ins[~again]
    ins_slot[~again] = rs.mrs.num_slots + np.arange(len(fresh), dtype=np.int64)
    trow[ins] = ins_slot
    others = rows[(~on_drs) & (db.action[keep] != A_INSERT)]
    if len(others):
        okeys = values.keys.take(others)
        found = rs.mrs.lookup(okeys)
        if len(ins):
            in_batch = np.asarray(
                pa.compute.index_in(okeys, value_set=values.keys.take(ins))
                .fill_null(-1)
                .to_numpy(zero_copy_only=False),
                dtype=np.int64,
            )
            found = np.where(in_batch >= 0, ins_slot[np.maximum(in_batch, 0)], found)
        if (found < 0).any():
            raise CorruptionError(
                "WAL", 0, "a replayed mutation names a MemRowSet row that was never inserted"
            )
        trow[others] = found
    d = Decisions(np.zeros(n, dtype=np.int8), action, tkind, trs, trow, drop_imm, fresh)
    apply(rs, schema, values, d, db.ts, db.seq_base)
