"""A tablet's part of a multi-tablet transaction: prepare, commit, abort.

A table write that spans tablets is all or nothing through the database's commit log
(``storage/tables/txn_log.py``, Kudu's two-phase commit of a multi-tablet transaction
on one machine). Each participant tablet:

1. **prepares** its part: decides every row against its current state and logs the
   decided batch wrapped as a transaction part (``log_record.encode_txn_part``); a part
   big enough to bulk load is written as rowsets that the superblock lists tagged with
   the transaction (``TabletMeta.txn_rowsets``). Nothing is applied to memory, and the
   part's MVCC op stays in flight;
2. once the commit log holds the transaction's COMMIT, **commits**: logs a FINALIZE
   marker right after the part and applies the decided batch to memory (or serves the
   rowsets, untagged at the tablet's next superblock save), then makes it visible;
3. or **aborts**: nothing was applied, so nothing is undone; replay skips the logged
   part (no marker, no COMMIT) and the next load drops the tagged rowsets.

The caller holds the tablet's write lock, and for a bulk part its maintenance lock
first, from ``prepare`` until ``commit`` or ``abort`` (``Tablet.hold``): no flush,
compaction or other write changes the stores the decisions name in between, and no
record comes between a part and its marker (replay relies on that adjacency).

The logged part and its FINALIZE go through the tablet's one commit protocol
(``Tablet._commit``), as every logged write does: the part is logged with nothing
applied, the FINALIZE logged with the part's batch applied.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from kudusql.common.errors import OperationalError
from kudusql.common.row_operations import WriteOp, WriteResult, atomic_rejection, operations
from kudusql.storage.tablet.bulk_load import write_bulk_rowsets
from kudusql.storage.tablet.diskrowset import DiskRowSet, RowSetMeta
from kudusql.storage.tablet.log_record import encode_txn_finalize, encode_txn_part
from kudusql.storage.tablet.rowsets import RowSets
from kudusql.storage.tablet.write_ops import PreparedBatch, prepare
from kudusql.storage.tablet.write_path import (
    MUTATES,
    BatchWrite,
    Decisions,
    decide,
    row_errors,
    write_counts,
)
from kudusql.storage.wal import AppendTicket

if TYPE_CHECKING:
    from kudusql.storage.tablet.tablet import Tablet


@dataclass
class TxnPart:
    """A prepared part: what it decided and where it stands."""

    tablet: Tablet
    ts: int
    result: WriteResult
    #: The part's decided batch (applied at the commit).
    batch: BatchWrite
    seq_base: int
    #: The log append of the part (None: nothing logged, or a bulk part).
    ticket: AppendTicket | None
    logged: bool
    #: The rowsets of a bulk part, listed in the superblock under the transaction's tag.
    rowsets: list[RowSetMeta] | None = None

    @property
    def holds(self) -> bool:
        """Whether the tablet holds anything of the transaction (a logged part, or
        rowsets): only such a participant has to prove the commit later."""
        return self.logged or bool(self.rowsets)

    def wait_durable(self) -> None:
        """Block until the logged part is durable under the fsync policy."""
        if self.ticket is not None:
            try:
                self.ticket.wait_durable()
            except OperationalError as e:
                self.tablet._failed = f"write-ahead log failed: {e}"
                raise


def prepare_part(
    t: Tablet,
    data: pa.Table,
    op: WriteOp | str | int | None,
    op_column: str | None,
    atomic: bool,
    ts: int,
    bulk_rows: int | None,
) -> TxnPart:
    """Decide and log (or write, for a bulk part) the tablet's part of the transaction
    at ``ts``; apply nothing. The caller holds the tablet (``Tablet.hold``)."""
    threshold = t.options.bulk_load_rows if bulk_rows is None else bulk_rows
    ops = operations(data, op, op_column)
    if op_column is not None:
        data = data.drop_columns([op_column])
    pb = prepare(t.schema, data, ops, t._pool)
    t.assign_auto_ids(pb)
    rs = t._rowsets
    d = decide(rs, t.schema, pb)
    errors = row_errors(t.schema, pb, d.err)
    if atomic and errors:
        raise atomic_rejection(errors)
    result = WriteResult(ts, *write_counts(d), errors)
    bulk = pb.n >= threshold and bool(
        np.all((ops == WriteOp.INSERT) | (ops == WriteOp.INSERT_IGNORE))
    )
    batch = BatchWrite(rs, t.schema, pb, d)
    t.mvcc.start_op(ts)
    seq_base = t._next_seq
    if bulk and not MUTATES[d.action].any():
        try:
            metas = _write_tagged_rowsets(t, pb, d, ts, seq_base)
        except BaseException:
            t.mvcc.abort_op(ts)
            raise
        return TxnPart(t, ts, result, batch, seq_base, None, False, metas)
    ticket = t._commit(_PartRecord(batch), ts)
    return TxnPart(t, ts, result, batch, seq_base, ticket, ticket is not None)


@dataclass
class _PartRecord:
    """A logged part, as the tablet's commit protocol takes it (``Tablet._commit``): its
    decided batch wrapped as a transaction part, applied only at the commit."""

    batch: BatchWrite

    @property
    def n(self) -> int:
        return self.batch.n

    def record(self, ts: int, seq: int) -> bytes | None:
        payload = self.batch.record(ts, seq)
        return None if payload is None else encode_txn_part(payload)

    def apply(self, ts: int, seq: int) -> None:
        return None


@dataclass
class _Finalize:
    """The commit of a logged part: the FINALIZE marker, logged right after the part
    (the caller held the tablet since), and the part's batch applied."""

    part: TxnPart
    n: int = 1

    def record(self, ts: int, seq: int) -> bytes:
        return encode_txn_finalize(ts, seq)

    def apply(self, ts: int, seq: int) -> int:
        return self.part.batch.apply(ts, self.part.seq_base)


def _write_tagged_rowsets(
    t: Tablet, pb: PreparedBatch, d: Decisions, ts: int, seq_base: int
) -> list[RowSetMeta]:
    """The bulk part's new rows as DiskRowSets, listed in the superblock under the
    transaction's tag (durable before the COMMIT, kept only if it commits)."""
    meta = t.meta
    first_id = meta.next_rowset_id
    metas: list[RowSetMeta] = []
    if len(d.new_rows):
        metas = write_bulk_rowsets(
            t.path, first_id, t.schema, pb, d.new_rows, ts, seq_base, t._write_opts(), t._pool
        )
    t._next_seq += pb.n
    meta.rowsets.extend(metas)
    meta.next_rowset_id = first_id + len(metas)
    for m in metas:
        meta.txn_rowsets[m.id] = ts
    try:
        t._save_meta()
    except BaseException:
        _unlist(t, metas)
        meta.next_rowset_id = first_id
        t._next_seq -= pb.n
        raise
    return metas


def _unlist(t: Tablet, metas: list[RowSetMeta]) -> None:
    ids = {m.id for m in metas}
    t.meta.rowsets = [m for m in t.meta.rowsets if m.id not in ids]
    for i in ids:
        t.meta.txn_rowsets.pop(i, None)


def commit_part(part: TxnPart) -> None:
    """Apply the prepared part (the COMMIT is durable) and make it visible.

    A failure here leaves the transaction committed on disk: the tablet is marked
    failed, so it reloads from disk (where replay applies the part) before its next
    write, and OperationalError says so."""
    t = part.tablet
    ts = part.ts
    try:
        if part.rowsets is not None:
            # Untagged in memory; the superblock keeps the tag (the commit log's COMMIT
            # vouches for it meanwhile) until the tablet's next save drops it: a save
            # per part would cost a bulk load of small parts a quarter of its time.
            for m in part.rowsets:
                t.meta.txn_rowsets.pop(m.id, None)
            t.meta.max_ts = max(t.meta.max_ts, ts)
            t._untagged.add(ts)
            rs = t._rowsets
            new = tuple(DiskRowSet(t.path, m, t.cache, t._pending) for m in part.rowsets)
            t._rowsets = RowSets(rs.mrs, rs.frozen, (*rs.drs, *new))
        elif part.logged:
            t._commit(_Finalize(part), ts)
    except BaseException as e:
        t._failed = f"committing transaction part at {ts} failed: {e}"
        t.mvcc.abort_op(ts)
        raise OperationalError(
            f"the write committed, but tablet {t.path} failed to apply it ({e}); it "
            "reloads from disk before its next write"
        ) from e
    t.mvcc.finish_op(ts)


def abort_part(part: TxnPart) -> None:
    """Forget the prepared part: nothing was applied. A logged part stays in the log,
    which replay skips; tagged rowsets leave the superblock (now if it can be saved,
    else at the next load, which drops them)."""
    t = part.tablet
    try:
        if part.rowsets:
            _unlist(t, part.rowsets)
            # If this save fails, the next load drops them: their transaction has no COMMIT.
            with contextlib.suppress(OSError, OperationalError):
                t._save_meta()
    finally:
        t.mvcc.abort_op(part.ts)
