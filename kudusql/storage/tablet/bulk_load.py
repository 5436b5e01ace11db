"""Bulk load: a large INSERT batch written straight to new DiskRowSets.

When a batch of only INSERT / INSERT_IGNORE rows is large, routing it through the WAL
and the MemRowSet means writing every row three times (log, memory, flush). Instead the
tablet decides the batch as usual (duplicates and existing keys are still per-row
errors), sorts the new rows by key and writes them as DiskRowSets whose UNDO records
are one DELETE per row at the batch's timestamp, so time travel before the load sees
nothing. The superblock swap is the commit point: a crash before it leaves only
orphaned files, removed on the next open; after it the rows are durable without any
WAL record. A Spark job's inserts take a variant of this path: its tasks write the
DiskRowSets (``stage_rowsets``) and the tablet adopts them at the commit timestamp.
"""

from __future__ import annotations

import contextlib
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kudusql.common.keys import sort_order
from kudusql.common.schema import Schema
from kudusql.storage.tablet.delta import Deltas, MutationType
from kudusql.storage.tablet.diskrowset import RowSetMeta, default_column
from kudusql.storage.tablet.rowset_writer import RowSetWriteOptions, write_rowsets
from kudusql.storage.tablet.write_ops import PreparedBatch


def write_bulk_rowsets(
    tablet_dir: str,
    first_id: int,
    schema: Schema,
    pb: PreparedBatch,
    rows: np.ndarray,
    ts: int,
    seq_base: int,
    opts: RowSetWriteOptions,
    pool: ThreadPoolExecutor | None,
) -> list[RowSetMeta]:
    """Write the batch rows ``rows`` (all new keys) as DiskRowSets from id ``first_id``."""
    everything = len(rows) == pb.n and bool(np.all(rows == np.arange(pb.n)))
    keys = pb.keys if everything else pb.keys.take(rows)
    order = sort_order(keys)
    identity = bool(np.all(order == np.arange(len(order))))
    take = rows if identity else rows[order]
    cols = []
    for i, c in enumerate(schema.columns):
        arr = pb.columns.get(i)
        if arr is None:
            cols.append(default_column(c, len(rows)))
        elif everything and identity:
            cols.append(arr)
        else:
            cols.append(arr.take(take))
    table = pa.Table.from_arrays(cols, schema=schema.arrow_schema())
    if not identity:
        keys = keys.take(order)
    undo = undo_for_inserts(len(rows), ts, 0)
    undo.seq = (seq_base + take).astype(np.int64)
    undo = undo.sorted_by_seq()
    return write_rowsets(tablet_dir, first_id, schema, table, keys, undo, Deltas(), opts, pool)


# -- staged rowsets (Spark writes) ---------------------------------------------------------------
# A Spark task writes the rows it was given for one tablet as DiskRowSets in a staging
# directory of its own, without UNDO records (the commit timestamp is not known yet);
# the job's commit checks them and has the tablet adopt them (``Tablet.adopt_rowsets``):
# UNDO records at the commit timestamp are written beside them and the directories are
# renamed into the tablet under new rowset ids, published by one superblock swap.


def stage_rowsets(
    staging_dir: str,
    schema: Schema,
    columns: list[pa.Array[Any] | pa.ChunkedArray[Any]],
    keys: pa.Array[Any],
    opts: RowSetWriteOptions,
) -> tuple[list[RowSetMeta], np.ndarray]:
    """Write the rows (``columns`` in schema order, already cast; ``keys`` encoded) as
    key-sorted DiskRowSets under ``staging_dir`` with ids from 0. Returns their metadata
    and the positions (in the given order) of rows whose key repeats an earlier row's;
    with any, nothing is written."""
    order = sort_order(keys)
    skeys = keys.take(order)
    dups = _repeated(skeys)
    if len(dups):
        return [], np.sort(order[dups])
    table = pa.Table.from_arrays([c.take(order) for c in columns], schema=schema.arrow_schema())
    with contextlib.suppress(FileExistsError):
        os.mkdir(staging_dir)  # its parent must exist (a Spark job ended removes it)
    return write_rowsets(staging_dir, 0, schema, table, skeys, Deltas(), Deltas(), opts), dups


def repeated_rows(keys: pa.Array[Any]) -> np.ndarray:
    """Positions (ascending) of the rows whose key repeats an earlier row's key."""
    order = sort_order(keys)
    return np.sort(order[_repeated(keys.take(order))])


def staged_duplicates(keys: list[pa.Array[Any]]) -> pa.Array[Any]:
    """Encoded keys present more than once across the staged rowsets of one tablet."""
    if len(keys) < 2:
        return pa.array([], pa.binary())
    allk = pa.concat_arrays(keys)
    skeys = allk.take(sort_order(allk))
    return skeys.take(pa.array(_repeated(skeys)))


def _repeated(sorted_keys: pa.Array[Any]) -> np.ndarray:
    """Positions in ``sorted_keys`` equal to the key before them."""
    n = len(sorted_keys)
    if n < 2:
        return np.zeros(0, dtype=np.int64)
    same = pc.equal(sorted_keys.slice(1), sorted_keys.slice(0, n - 1))
    return np.flatnonzero(same.to_numpy(zero_copy_only=False)) + 1


def undo_for_inserts(n: int, ts: int, seq_base: int) -> Deltas:
    """The UNDO records of ``n`` inserted rows at ``ts``: one DELETE each."""
    return Deltas(
        np.arange(n, dtype=np.int64),
        np.full(n, ts, dtype=np.uint64),
        seq_base + np.arange(n, dtype=np.int64),
        np.full(n, MutationType.DELETE, dtype=np.uint8),
        {},
    )
