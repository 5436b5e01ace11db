"""The WAL payload of a write batch: the batch *as decided*, not as sent.

The tablet logs each batch after deciding every row (Kudu's REPLICATE and COMMIT in
one record): the rows that changed something, their action (insert, reinsert, update,
delete), the store each one went to (MemRowSet id, or DiskRowSet id with its
DeltaMemStore id and the rowid) and the new cell values. Replay can then skip exactly
the rows whose store is already durable and apply the rest without deciding again,
so a crash during or after a flush neither loses nor duplicates anything.

Encoding: one Arrow IPC stream (LZ4-compressed buffers) of a table with the columns
``row`` (int32, index in the caller's batch), ``action`` (int8), ``kind`` (int8: 1 MemRowSet,
2 DiskRowSet), ``store`` (int64: MemRowSet id or DiskRowSet id), ``dms`` (int64:
DeltaMemStore id, -1 for MemRowSet rows), ``rowid`` (int64, -1 for MemRowSet rows),
``drop_immutable`` (bool), ``key`` (binary, the encoded primary key) and one column
``c<id>`` per column the batch carried; schema metadata holds ``ts``, ``seq_base`` and
``n`` (rows in the original batch).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from kudusql.common.errors import CorruptionError

# DO NOT CHANGE: on-disk (stored in WAL records).
KIND_MRS = 1
KIND_DRS = 2
_IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression="lz4")


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
        names = ["row", "action", "kind", "store", "dms", "rowid", "drop_immutable", "key"]
        for cid, arr in sorted(self.columns.items()):
            arrays.append(arr)
            names.append(f"c{cid}")
        meta = {
            b"ts": str(self.ts).encode(),
            b"seq_base": str(self.seq_base).encode(),
            b"n": str(self.n).encode(),
        }
        table = pa.Table.from_arrays(arrays, names=names).replace_schema_metadata(meta)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema, options=_IPC_OPTIONS) as w:
            w.write_table(table)
        return sink.getvalue().to_pybytes()

    @classmethod
    def decode(cls, payload: bytes, path: str, offset: int) -> DecidedBatch:
        try:
            table = pa.ipc.open_stream(payload).read_all()
            meta = table.schema.metadata or {}
            cols = {
                int(name[1:]): table.column(name).combine_chunks()
                for name in table.column_names
                if name.startswith("c") and name[1:].isdigit()
            }

            def np_col(name: str, dtype: Any) -> np.ndarray:
                return np.asarray(table.column(name).to_numpy(), dtype=dtype)

            return cls(
                int(meta[b"ts"]),
                int(meta[b"seq_base"]),
                int(meta[b"n"]),
                np_col("row", np.int64),
                np_col("action", np.int8),
                np_col("kind", np.int8),
                np_col("store", np.int64),
                np_col("dms", np.int64),
                np_col("rowid", np.int64),
                np_col("drop_immutable", bool),
                table.column("key").combine_chunks(),
                cols,
            )
        except (pa.ArrowException, KeyError, ValueError) as e:
            raise CorruptionError(path, offset, f"undecodable WAL record: {e}") from e
