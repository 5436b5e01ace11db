"""Staged inserts: rows written as DiskRowSets outside the tablets by many workers, then
adopted by the empty tablets of a table at one timestamp.

This is the door into storage for a loader whose work is spread over processes (Spark's
write tasks). The planner fixes a ``StagingTarget`` (``staging_target``) and asks
``can_stage`` whether the table takes a staged insert now. Each worker hands its rows to
``stage_insert``, which applies storage's own checks and casts (``write_ops.prepare``:
types, NOT NULL, key sizes), routes the rows to tablets and writes each tablet's share
as key-sorted DiskRowSets (``bulk_load.stage_rowsets``) in a directory the caller
names. The commit hands every worker's ``StagedRowSet``\\s to ``adopt``, which checks
that no key was staged twice in a tablet and has the tablets adopt them
(``Table.adopt_staged``): one timestamp, so a reader sees all of the rows or none.

Rows that fail a check are a ``StagedRowErrors`` with their count and a few samples,
raised before anything is written or adopted; the caller words the failure. Where the
staging directories live and when they are removed belongs to the caller.

A commit that must record what it published in the same breath (a Spark streaming
sink's batch id beside the batch's rows) hands both batches to ``write_together``: one
transaction of the commit log over the tablets of several tables, so a crash leaves
both or neither.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from kudusql.common.arrays import sorted_unique
from kudusql.common.errors import DataError, ProgrammingError
from kudusql.common.keys import decode_key
from kudusql.common.row_operations import RowError, WriteOp, WriteResult, operations
from kudusql.common.schema import Schema
from kudusql.storage.tables.partition import NO_TABLET_MESSAGE, PartitionSchema, partition_for_batch
from kudusql.storage.tables.table import Table
from kudusql.storage.tables.transaction import TabletWrite, write_transaction
from kudusql.storage.tablet.bulk_load import repeated_rows, stage_rowsets, staged_duplicates
from kudusql.storage.tablet.diskrowset import DiskRowSet, RowSetMeta, default_column
from kudusql.storage.tablet.rowset_writer import RowSetWriteOptions
from kudusql.storage.tablet.write_ops import prepare
from kudusql.storage.tablet.write_path import row_errors

#: Row errors a ``StagedRowErrors`` carries as samples.
SAMPLE_ERRORS = 5


@dataclass(frozen=True)
class StagingTarget:
    """What a staging worker needs of a table, fixed when the load is planned: its
    schema, partitioning, tablet ids in partition order, and how to write rowsets."""

    schema: Schema
    partition_schema: PartitionSchema
    tablet_ids: tuple[int, ...]
    options: RowSetWriteOptions


class StagedRowSet(NamedTuple):
    """One staged DiskRowSet: the tablet that adopts it, the directory it was staged in
    and its metadata (``RowSetMeta.to_dict``, so that it travels as plain values)."""

    tablet_id: int
    directory: str
    meta: dict[str, object]


class StagedRowErrors(DataError):
    """Rows of a staged insert that storage rejects; nothing of the batch was staged or
    adopted."""

    def __init__(self, count: int, samples: list[str]) -> None:
        super().__init__(f"{count} staged rows rejected; sample errors: {'; '.join(samples)}")
        self.count = count
        self.samples = samples


def staging_target(table: Table) -> StagingTarget:
    """The table's ``StagingTarget``, with the database's rowset options."""
    meta, o = table.meta, table.db.options
    return StagingTarget(
        meta.schema,
        meta.partition_schema,
        tuple(e.id for e in meta.tablets),
        RowSetWriteOptions(o.rowset_target_bytes, o.rows_per_page, o.sync, o.bloom_fp_rate),
    )


def can_stage(table: Table) -> bool:
    """Whether the table takes a staged insert now: its primary key is unique (else its
    tablets assign the auto-incrementing ids) and every tablet is empty."""
    return table.schema.key_unique and all(t.is_empty() for t in table.tablets())


def stage_insert(
    target: StagingTarget, data: pa.Table, directory: Callable[[int], str]
) -> list[StagedRowSet]:
    """Stage ``data`` as rows to INSERT: each tablet's share becomes key-sorted
    DiskRowSets in ``directory(tablet id)``, which the callback creates. Raises
    ``StagedRowErrors`` (row indices are positions in ``data``) before writing anything
    if a row fails storage's checks, routes to no tablet, or repeats a key."""
    schema = target.schema
    n = data.num_rows
    pb = prepare(schema, data, np.full(n, WriteOp.INSERT, dtype=np.uint8))
    if pb.err.any():
        errs = row_errors(schema, pb, pb.err)
        raise StagedRowErrors(len(errs), [str(e) for e in errs[:SAMPLE_ERRORS]])
    nk = schema.num_key_columns
    keys = pa.Table.from_arrays([pb.columns[i] for i in range(nk)], names=schema.key_names)
    slots = np.asarray(partition_for_batch(target.partition_schema, schema, keys), dtype=np.int64)
    if (slots < 0).any():
        bad = np.flatnonzero(slots < 0)
        raise StagedRowErrors(
            len(bad), [f"row {int(i)}: {NO_TABLET_MESSAGE}" for i in bad[:SAMPLE_ERRORS]]
        )
    dups = repeated_rows(pb.keys)  # a key routes to one tablet: check the batch at once
    if len(dups):
        types = [c.type for c in schema.key_columns]
        samples = [
            str(
                RowError(
                    int(r),
                    WriteOp.INSERT,
                    decode_key(pb.keys[int(r)].as_py(), types),
                    "AlreadyPresent",
                    "key already present",
                )
            )
            for r in dups[:SAMPLE_ERRORS]
        ]
        raise StagedRowErrors(len(dups), samples)
    cols = [pb.columns.get(i) or default_column(c, n) for i, c in enumerate(schema.columns)]
    staged: list[StagedRowSet] = []
    for slot in sorted_unique(slots).tolist():
        take = pa.array(np.flatnonzero(slots == slot), pa.int64())
        tablet = target.tablet_ids[slot]
        d = directory(tablet)
        metas, _ = stage_rowsets(
            d, schema, [c.take(take) for c in cols], pb.keys.take(take), target.options
        )
        staged += [StagedRowSet(tablet, d, m.to_dict()) for m in metas]
    return staged


def adopt(table: Table, staged: Iterable[StagedRowSet]) -> WriteResult:
    """Have the table's tablets adopt the staged rowsets, as rows inserted at one
    timestamp. Raises ``StagedRowErrors``, adopting nothing, if rowsets staged apart
    (by different workers) share a key."""
    by_tablet: dict[int, list[tuple[str, RowSetMeta]]] = {}
    for tablet, d, meta in staged:
        by_tablet.setdefault(tablet, []).append((d, RowSetMeta.from_dict(meta)))
    dups = 0
    samples: list[str] = []
    for parts in by_tablet.values():
        ranges = sorted((m.min_key, m.max_key) for _, m in parts)
        if all(a[1] < b[0] for a, b in itertools.pairwise(ranges)):
            continue  # disjoint key ranges: no key can repeat
        keys = [DiskRowSet(d, m, None).key_reader().read_range(0, m.num_rows) for d, m in parts]
        repeated = staged_duplicates([k.combine_chunks() for k in keys])
        dups += len(repeated)
        samples += [
            f"INSERT key={k!r}: AlreadyPresent: key staged by two tasks"
            for k in repeated.to_pylist()[: SAMPLE_ERRORS - len(samples)]
        ]
    if dups:
        raise StagedRowErrors(dups, samples)
    return table.adopt_staged(by_tablet)


class TableWrite(NamedTuple):
    """One table's batch of a ``write_together``: one operation for every row, or each
    row's from ``op_column`` (as ``Table.write`` takes them)."""

    table: Table
    data: pa.Table
    op: WriteOp | None = None
    op_column: str | None = None


def write_together(writes: Sequence[TableWrite]) -> list[WriteResult]:
    """Apply each table's batch at one timestamp as one transaction of the database's
    commit log (``transaction.write_transaction``, the protocol of ``Table.write`` for a
    batch that spans tablets): a failure or crash before the COMMIT leaves nothing of any
    batch; after it, replay applies all of them. Row errors are reported per table, as
    ``Table.write`` reports them (bad rows are skipped); returns one ``WriteResult`` per
    write, in order. Each table appears once.

    The tables' write locks are taken in table-id order (so two such writes over the
    same tables cannot deadlock) and held until every part is applied; the tablets are
    then held in tablet-id order, as every multi-tablet write holds them."""
    if not writes:
        return []
    db = writes[0].table.db
    if any(w.table.db is not db for w in writes):
        raise ProgrammingError("write_together: every table must belong to one database")
    if len({w.table.id for w in writes}) != len(writes):
        raise ProgrammingError("write_together: a table appears in more than one write")
    db._check_writable()
    errors: dict[int, list[RowError]] = {}
    parts: list[TabletWrite] = []
    owner: list[int] = []  # the write each part belongs to
    with contextlib.ExitStack() as stack:
        for i in sorted(range(len(writes)), key=lambda i: writes[i].table.id):
            w = writes[i]
            ops = operations(w.data, w.op, w.op_column)
            rt, routed, errors[i] = stack.enter_context(w.table._routed(w.data, ops))
            tablets = rt.tablets()
            for p in routed:
                tablet_id = rt.meta.tablets[p.slot].id
                parts.append(
                    TabletWrite(tablet_id, tablets[p.slot], p.data, w.op, w.op_column, p.rows)
                )
                owner.append(i)
        ts, part_results = write_transaction(db, parts)
    results = [WriteResult(ts, 0, 0, errors[i]) for i in range(len(writes))]
    for i, part, res in zip(owner, parts, part_results, strict=True):
        r = results[i]
        r.applied += res.applied
        r.ignored += res.ignored
        r.errors += part.batch_errors(res.errors)
    for r in results:
        r.errors.sort(key=lambda e: e.index)
    return results
