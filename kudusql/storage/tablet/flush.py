"""Flush of a frozen MemRowSet: newest versions become base data, history becomes UNDO.

For every row the MemRowSet held, the flush computes (all vectorized):

* the base values: the newest version; a row whose last event is a DELETE keeps the
  values it had before that delete and gets a REDO DELETE (a ghost), as in Kudu;
* UNDO records that turn the base back into every earlier version: the insert becomes
  an UNDO DELETE, an UPDATE becomes an UNDO UPDATE carrying the old values of the
  columns it set, a DELETE an UNDO REINSERT carrying the whole row as it was, and a
  REINSERT an UNDO DELETE;
* rows whose whole life happened inside one operation are dropped: no snapshot can
  see them.

The output is sorted by key; ``slot_to_rowid`` maps MemRowSet slots to new rowids so
that mutations arriving during the flush can be moved to the new rowset.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from kudusql.common.keys import sort_order
from kudusql.common.schema import Schema
from kudusql.storage.tablet.compaction import split_final_deletes, undo_of_history
from kudusql.storage.tablet.delta import (
    Deltas,
    MutationType,
    apply_to_column,
    concat_deltas,
    resolve,
)
from kudusql.storage.tablet.memrowset import MemRowSetView

_NEVER = (1 << 64) - 1


@dataclass
class FlushInput:
    rows: pa.Table  # sorted by key
    keys: pa.Array[Any]
    undo: Deltas  # rowid = position in rows
    redo: Deltas
    slot_to_rowid: np.ndarray  # -1 for dropped slots


def prepare_flush(view: MemRowSetView, schema: Schema) -> FlushInput:
    n = view.num_slots
    d = view.deltas
    nonkey = [c for c in schema.columns[schema.num_key_columns :]]

    # 1. Final DELETEs become REDO DELETEs; history is the rest.
    hist, redo_del = split_final_deletes(d)

    # 2. Rows whose every event happened at their insert timestamp and which end deleted.
    keep = np.ones(n, dtype=bool)
    if len(redo_del):
        max_ts = view.insert_ts.copy()
        np.maximum.at(max_ts, d.rowid, d.ts)
        dead = np.zeros(n, dtype=bool)
        dead[redo_del.rowid] = True
        keep &= ~(dead & (max_ts == view.insert_ts))

    # 3. Base values: the newest version (for ghosts: the version before the final delete).
    final = resolve(hist, _NEVER, undo=False)
    columns: list[pa.Array[Any] | pa.ChunkedArray[Any]] = list(view.rows.columns)
    for i, c in enumerate(schema.columns):
        if i >= schema.num_key_columns and c.id in final.cols:
            columns[i], _ = apply_to_column(_single(columns[i]), 0, final, c.id)
    base = pa.Table.from_arrays(columns, schema=view.rows.schema)

    # 4. UNDO records.
    base_values = {c.id: _single(view.rows.column(schema.index_of(c.name))) for c in nonkey}
    inserts = Deltas(
        np.arange(n, dtype=np.int64),
        view.insert_ts,
        view.insert_seq,
        np.full(n, MutationType.DELETE, dtype=np.uint8),
        {},
    )
    events = undo_of_history(base_values, view.insert_seq, hist)
    undo = concat_deltas([inserts, events]).sorted_by_seq()

    # 5. Sort kept slots by key and renumber.
    kept = np.flatnonzero(keep)
    keys_kept = view.keys.take(kept) if len(kept) < n else view.keys
    order = sort_order(keys_kept)
    sorted_slots = kept[order]
    slot_to_rowid = np.full(n, -1, dtype=np.int64)
    slot_to_rowid[sorted_slots] = np.arange(len(sorted_slots), dtype=np.int64)
    identity = len(kept) == n and bool(np.all(order == np.arange(n)))
    rows = base if identity else base.take(sorted_slots)
    keys = view.keys if identity else view.keys.take(sorted_slots)

    def remap(x: Deltas) -> Deltas:
        if not len(x):
            return x
        x = x.select(keep[x.rowid])
        return x.map_rowids(slot_to_rowid)

    return FlushInput(rows, keys, remap(undo), remap(redo_del), slot_to_rowid)


def _single(col: pa.Array[Any] | pa.ChunkedArray[Any]) -> pa.Array[Any]:
    if isinstance(col, pa.ChunkedArray):
        return col.chunks[0] if col.num_chunks == 1 else col.combine_chunks()
    return col
