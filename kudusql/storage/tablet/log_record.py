"""The WAL payload of a write batch: the batch *as decided*, not as sent.

The tablet logs each batch after deciding every row (Kudu's REPLICATE and COMMIT in
one record): the rows that changed something, their action (insert, reinsert, update,
delete), the store each one went to (MemRowSet id, or DiskRowSet id with its
DeltaMemStore id and the rowid) and the new cell values. Replay can then skip exactly
the rows whose store is already durable and apply the rest without deciding again,
so a crash during or after a flush neither loses nor duplicates anything.

Encoding: a 24-byte header (u64 timestamp, u64 first sequence number, u32 rows in the
original batch, u32 schema length, little-endian), the Arrow IPC schema message, then
one Arrow IPC record-batch message (uncompressed: the WAL compresses large payloads)
with the columns
``row`` (int32, index in the caller's batch), ``action`` (int8), ``kind`` (int8: 1 MemRowSet,
2 DiskRowSet), ``store`` (int64: MemRowSet id or DiskRowSet id), ``dms`` (int64:
DeltaMemStore id, -1 for MemRowSet rows), ``rowid`` (int64, -1 for MemRowSet rows),
``drop_immutable`` (bool), ``key`` (binary, the encoded primary key) and one column
``c<id>`` per column the batch carried.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from kudusql.common.errors import CorruptionError

# DO NOT CHANGE: on-disk (stored in WAL records).
KIND_MRS = 1
KIND_DRS = 2
# Record header: ts (u64), seq_base (u64), n (u32), schema length (u32).
_HEAD = struct.Struct("<QQII")


@dataclass
class DecidedBatch:
    ts: int
    seq_base: int
    n: int
    row: np.ndarray
    action: np.ndarray
    kind: np.ndarray
    store: np.ndarray
    dms: np.ndarray
    rowid: np.ndarray
    drop_immutable: np.ndarray
    keys: pa.Array[Any]
    columns: dict[int, pa.Array[Any]]  # column id -> values of the logged rows

    def encode(self) -> bytes:
        arrays: list[pa.Array[Any]] = [
            pa.array(self.row, pa.int32()),
            pa.array(self.action, pa.int8()),
            pa.array(self.kind, pa.int8()),
            pa.array(self.store, pa.int64()),
            pa.array(self.dms, pa.int64()),
            pa.array(self.rowid, pa.int64()),
            pa.array(self.drop_immutable, pa.bool_()),
            self.keys,
        ]
        layout = []
        for cid, arr in sorted(self.columns.items()):
            arrays.append(arr)
            layout.append((cid, arr.type))
        schema, schema_bytes = _layout_schema(tuple(layout))
        batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
        head = _HEAD.pack(self.ts, self.seq_base, self.n, len(schema_bytes))
        return head + schema_bytes + batch.serialize().to_pybytes()

    @classmethod
    def decode(cls, payload: bytes, path: str, offset: int) -> DecidedBatch:
        try:
            ts, seq_base, n, slen = _HEAD.unpack_from(payload, 0)
            buf = pa.py_buffer(payload)
            schema = pa.ipc.read_schema(buf.slice(_HEAD.size, slen))
            batch = pa.ipc.read_record_batch(buf.slice(_HEAD.size + slen), schema)
            cols = {
                int(name[1:]): batch.column(name)
                for name in batch.schema.names
                if name.startswith("c") and name[1:].isdigit()
            }

            def np_col(name: str, dtype: Any) -> np.ndarray:
                return np.asarray(batch.column(name).to_numpy(zero_copy_only=False), dtype=dtype)

            return cls(
                ts,
                seq_base,
                n,
                np_col("row", np.int64),
                np_col("action", np.int8),
                np_col("kind", np.int8),
                np_col("store", np.int64),
                np_col("dms", np.int64),
                np_col("rowid", np.int64),
                np_col("drop_immutable", bool),
                batch.column("key"),
                cols,
            )
        except (pa.ArrowException, KeyError, ValueError, struct.error) as e:
            raise CorruptionError(path, offset, f"undecodable WAL record: {e}") from e


_FIXED_FIELDS = (
    pa.field("row", pa.int32()),
    pa.field("action", pa.int8()),
    pa.field("kind", pa.int8()),
    pa.field("store", pa.int64()),
    pa.field("dms", pa.int64()),
    pa.field("rowid", pa.int64()),
    pa.field("drop_immutable", pa.bool_()),
    pa.field("key", pa.binary()),
)


@functools.lru_cache(maxsize=256)
def _layout_schema(layout: tuple[tuple[int, pa.DataType], ...]) -> tuple[pa.Schema, bytes]:
    """The Arrow schema of a record with these value columns, and its serialized form
    (a table has few distinct layouts, so both are cached)."""
    fields: list[pa.Field[Any]] = [*_FIXED_FIELDS, *(pa.field(f"c{cid}", t) for cid, t in layout)]
    schema = pa.schema(fields)
    return schema, bytes(schema.serialize().to_pybytes())
