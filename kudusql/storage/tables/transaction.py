"""The multi-tablet commit protocol: a write whose parts go to several tablets, of one
table (``Table.write``) or of several (``staging.write_together``), as one transaction
of the database's commit log (``txn_log.py``; each tablet's side is ``txn_part.py``).
``write_transaction`` is its one implementation; the callers route their batches and
hold their tables' write locks, it does the rest:

1. every participant tablet is held (``Tablet.hold``: its write lock, and its
   maintenance lock first when the batch is bulk-sized), in tablet-id order;
2. an atomic write is checked whole against every tablet, and rejected before
   anything is logged if any row would fail;
3. BEGIN is appended and the timestamp taken from the database MVCC; every part is
   prepared (decided, and logged or written as tagged rowsets; nothing applied) and
   made durable;
4. the COMMIT, naming the tablets that hold something of the transaction, is appended
   and made durable: the commit point;
5. every part is applied, and a bulk part's commit reported to the commit log
   (``TxnLog.finalized``).

A failure before the COMMIT aborts every prepared part and the transaction: nothing is
applied anywhere, on error and on crash. A COMMIT whose outcome is unknown poisons the
database (it refuses writes until opened again). A part that fails to apply after the
commit point is raised once every other part is applied; its tablet applies it from its
log when it reloads.

The bulk path is chosen for the whole write, not per tablet (``bulk_rows``): a big load
spread over many tablets still skips the WAL, unless a tablet's share is tiny. Writes of
``PARALLEL_WRITE_ROWS`` rows or more prepare and apply their parts in parallel on the
database's thread pool.

Lock order: table write locks first (in table-id order when a write spans tables), then
tablets in tablet-id order. Tablet ids are unique across the database, so this is one
order over every table's tablets, which every holder of several tablets follows
(``Table.adopt_staged`` too); flushes and compactions hold one tablet at a time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from concurrent.futures import Executor, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from kudusql.common.errors import OperationalError, ProgrammingError
from kudusql.common.options import TabletOptions
from kudusql.common.row_operations import RowError, WriteOp, WriteResult, atomic_rejection
from kudusql.storage.tables.txn_log import CommitOutcomeUnknown
from kudusql.storage.tablet.tablet import Tablet
from kudusql.storage.tablet.txn_part import TxnPart, abort_part, commit_part

if TYPE_CHECKING:
    from kudusql.storage.tables.database import Database

#: Writes smaller than this are prepared and applied tablet after tablet; larger ones in
#: parallel.
PARALLEL_WRITE_ROWS = 50_000
#: In a bulk-sized write, a tablet's part of at least this many rows is bulk loaded.
MIN_BULK_PART_ROWS = 10_000


@dataclass(frozen=True)
class TabletWrite:
    """A participant tablet's part of a write: its rows, one ``op`` for all of them or
    each row's from ``op_column``, and where they sit in the caller's batch."""

    tablet_id: int
    tablet: Tablet
    data: pa.Table
    op: WriteOp | str | int | None = None
    op_column: str | None = None
    #: Indices into the caller's batch; None: the part is the whole batch.
    rows: np.ndarray | None = None

    def batch_errors(self, errors: Sequence[RowError]) -> list[RowError]:
        """Row errors of this part, indexed in the caller's batch."""
        if self.rows is None:
            return list(errors)
        rows = self.rows
        return [RowError(int(rows[e.index]), e.op, e.key, e.status, e.message) for e in errors]


def bulk_rows(options: TabletOptions, total: int) -> int | None:
    """The bulk-load threshold of a part of a write of ``total`` rows (None: the
    tablet's own): a bulk-sized write bulk loads every part but a tiny one."""
    if total >= options.bulk_load_rows:
        return min(options.bulk_load_rows, MIN_BULK_PART_ROWS)
    return None


def part_errors(parts: Sequence[TabletWrite], pool: Executor | None) -> list[RowError]:
    """Every row error the parts' tablets would report now, indexed in the caller's
    batches, applying nothing (the parts checked in parallel on ``pool`` when given and
    the write is big)."""

    def one(p: TabletWrite) -> list[RowError]:
        return p.batch_errors(p.tablet.check_write(p.data, p.op, op_column=p.op_column))

    total = sum(p.data.num_rows for p in parts)
    if pool is not None and len(parts) > 1 and total >= PARALLEL_WRITE_ROWS:
        return [e for errs in pool.map(one, parts) for e in errs]
    return [e for p in parts for e in one(p)]


def write_transaction(
    db: Database, parts: Sequence[TabletWrite], *, atomic: bool = False
) -> tuple[int, list[WriteResult]]:
    """Apply the parts (one per tablet) as one transaction of ``db``'s commit log; see
    the module docstring. The caller holds the write lock of every table a part belongs
    to. Returns the transaction's timestamp and each part's result, in order, with row
    errors indexed in the part's ``data``. ``atomic``: any row error rejects the whole
    write (``atomic_rejection``, indices in the caller's batch), applying nothing."""
    ids = [p.tablet_id for p in parts]
    if len(set(ids)) != len(ids):
        raise ProgrammingError("a transaction takes one part per tablet")
    txns = db.txn_log()
    total = sum(p.data.num_rows for p in parts)
    bulk = bulk_rows(db.options, total)
    parallel = len(parts) > 1 and total >= PARALLEL_WRITE_ROWS
    with contextlib.ExitStack() as stack:
        for p in sorted(parts, key=lambda p: p.tablet_id):
            stack.enter_context(p.tablet.hold(maint=bulk is not None))
        if atomic:
            errors = part_errors(parts, db.pool)
            if errors:
                errors.sort(key=lambda e: e.index)
                raise atomic_rejection(errors)
        txn = txns.begin()
        ts = db.mvcc.start_op()
        prepared: list[TxnPart] = []

        def prepare(p: TabletWrite) -> TxnPart:
            return p.tablet.prepare_part(
                p.data, p.op, op_column=p.op_column, atomic=atomic, timestamp=ts, bulk_rows=bulk
            )

        try:
            if parallel:
                futures = [db.pool.submit(prepare, p) for p in parts]
                wait(futures)  # every part finishes before any outcome is decided
                prepared = [f.result() for f in futures if f.exception() is None]
                for f in futures:
                    f.result()  # the first failure, if any
            else:
                for p in parts:
                    prepared.append(prepare(p))
            for x in prepared:
                x.wait_durable()
            # Participants are the tablets that hold something of the transaction.
            txns.commit(
                txn, ts, [p.tablet_id for p, x in zip(parts, prepared, strict=True) if x.holds]
            )
        except BaseException as e:
            for x in prepared:
                abort_part(x)
            if isinstance(e, CommitOutcomeUnknown):
                db.poison(str(e))
            else:
                txns.abort(txn)
            db.mvcc.abort_op(ts)
            raise

        def apply(p: TabletWrite, x: TxnPart) -> OperationalError | None:
            """Every part is applied, whatever happens to another: the COMMIT is durable,
            so the transaction is visible whole or (a failed tablet reloads) after replay."""
            try:
                commit_part(x)
            except OperationalError as e:
                return e
            # A logged part's FINALIZE is in its log now; a bulk part proves its commit
            # at its tablet's next superblock save.
            if x.logged:
                try:
                    txns.finalized(ts, p.tablet_id, x.tablet)
                except Exception as e:  # the commit log's checkpoint failed (I/O)
                    return OperationalError(
                        f"the write committed, but the commit log could not record it ({e})"
                    )
            return None

        # The timestamp is finished however the apply phase ends: an operation left in
        # flight would hold every later snapshot below it.
        try:
            if parallel:
                outcomes = list(db.pool.map(apply, parts, prepared))
            else:
                outcomes = [apply(p, x) for p, x in zip(parts, prepared, strict=True)]
        finally:
            db.mvcc.finish_op(ts)
        failures = [e for e in outcomes if e is not None]
    if failures:
        raise failures[0]
    return ts, [x.result for x in prepared]
