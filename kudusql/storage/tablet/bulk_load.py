"""Bulk load: a large INSERT batch written straight to new DiskRowSets.

When a batch of only INSERT / INSERT_IGNORE rows is large, routing it through the WAL
and the MemRowSet means writing every row three times (log, memory, flush). Instead the
tablet decides the batch as usual (duplicates and existing keys are still per-row
errors), sorts the new rows by key and writes them as DiskRowSets whose UNDO records
are one DELETE per row at the batch's timestamp, so time travel before the load sees
nothing. The superblock swap is the commit point: a crash before it leaves only
orphaned files, removed on the next open; after it the rows are durable without any
WAL record. This is also how a Spark job's staged inserts are published.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa

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
    m = len(rows)
    undo = Deltas(
        np.arange(m, dtype=np.int64),
        np.full(m, ts, dtype=np.uint64),
        (seq_base + take).astype(np.int64),
        np.full(m, MutationType.DELETE, dtype=np.uint8),
        {},
    ).sorted_by_seq()
    return write_rowsets(tablet_dir, first_id, schema, table, keys, undo, Deltas(), opts, pool)
