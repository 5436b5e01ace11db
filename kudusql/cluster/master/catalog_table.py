"""The master's durable catalog: a ``CatalogStore`` on one storage-engine tablet.

As the Kudu paper's master, the catalog is a single-tablet system table whose rows are
``(entry_type INT8, entry_id STRING) -> metadata STRING`` (the record's JSON text,
``catalog/FORMAT.md``). It is a storage-engine ``Tablet`` (``kudusql.storage.tablet``)
in ``<master dir>/sys_catalog``: WAL, MemRowSet, flushes and compactions as any tablet,
by a maintenance manager of its own.

Invariants:

- a batch is one tablet write with a per-row operation (UPSERT for a put,
  DELETE_IGNORE for a delete) applied with ``atomic=True``: one WAL record at one
  timestamp, fsynced before ``write`` returns (``wal_fsync="batch"``), so after a crash
  the whole batch is there or none of it;
- the write-through cache holds exactly the tablet's rows: it is loaded from a full scan
  at open and changed only after a write to the tablet returned.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence

import pyarrow as pa

from kudusql.cluster.catalog.records import RecordKey
from kudusql.cluster.catalog.store import RecordWrite
from kudusql.common.errors import OperationalError
from kudusql.common.options import TabletOptions
from kudusql.common.row_operations import WriteOp
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.storage.tablet.maintenance import MaintenanceManager
from kudusql.storage.tablet.tablet import Tablet

__all__ = ["CATALOG_DIR", "OP_COLUMN", "SysCatalogTable", "catalog_batch", "catalog_schema"]

#: The system catalog tablet's directory inside the master's directory.
CATALOG_DIR = "sys_catalog"

OP_COLUMN = "op"


def catalog_schema() -> Schema:
    """``(entry_type INT8, entry_id STRING)`` primary key, ``metadata STRING``."""
    return Schema.build(
        [
            ColumnSchema("entry_type", DataType.parse("INT8"), nullable=False),
            ColumnSchema("entry_id", DataType.parse("STRING"), nullable=False),
            ColumnSchema("metadata", DataType.parse("STRING")),
        ],
        ["entry_type", "entry_id"],
    )


def catalog_batch(changes: dict[RecordKey, bytes | None]) -> pa.Table:
    """Catalog changes (a record's bytes, None: removed) as the catalog tablet's rows in
    key order, each with its operation in ``OP_COLUMN``: UPSERT or DELETE_IGNORE."""
    keys = sorted(changes)
    return pa.table(
        {
            "entry_type": pa.array([k[0] for k in keys], pa.int8()),
            "entry_id": pa.array([k[1] for k in keys], pa.string()),
            "metadata": pa.array(
                [None if changes[k] is None else bytes(changes[k] or b"").decode() for k in keys],
                pa.string(),
            ),
            OP_COLUMN: pa.array(
                [
                    int(WriteOp.DELETE_IGNORE if changes[k] is None else WriteOp.UPSERT)
                    for k in keys
                ],
                pa.int8(),
            ),
        }
    )


class SysCatalogTable:
    """The catalog tablet under ``directory`` (created on first open); ``close`` it."""

    def __init__(self, directory: str, options: TabletOptions | None = None) -> None:
        path = os.path.join(os.path.abspath(directory), CATALOG_DIR)
        opts = (options or TabletOptions()).with_(wal_fsync="batch")
        if os.path.exists(path):
            self._tablet = Tablet.open(path, opts)
        else:
            self._tablet = Tablet.create(path, catalog_schema(), opts)
        self._lock = threading.Lock()
        self._maintenance = MaintenanceManager()
        try:
            self._tablet.attach(self._maintenance)
            self._rows: dict[RecordKey, bytes] = {}
            table = self._tablet.scan(ordered=True).read_all()
            for entry_type, entry_id, value in zip(
                table.column("entry_type").to_pylist(),
                table.column("entry_id").to_pylist(),
                table.column("metadata").to_pylist(),
                strict=True,
            ):
                if entry_type is None or entry_id is None or value is None:
                    continue  # key columns are NOT NULL and a put stores a value
                self._rows[(int(entry_type), str(entry_id))] = str(value).encode()
        except BaseException:
            self._tablet.close(flush=False)
            self._maintenance.stop()
            raise

    def close(self) -> None:
        """Sync and release the tablet."""
        try:
            self._tablet.close()
        finally:
            self._maintenance.stop()

    def write(self, batch: Sequence[RecordWrite]) -> None:
        """Apply ``batch`` atomically and durably (one WAL record), then to the cache."""
        if not batch:
            return
        changes = dict(batch)  # a key written twice in a batch: the last write wins
        keys = sorted(changes)
        data = catalog_batch(changes)
        with self._lock:
            result = self._tablet.write(data, op_column=OP_COLUMN, atomic=True)
            if result.errors:  # atomic: nothing was applied
                raise OperationalError(
                    f"the master's catalog refused a write: {result.errors[0].message}"
                )
            for key in keys:
                value = changes[key]
                if value is None:
                    self._rows.pop(key, None)
                else:
                    self._rows[key] = bytes(value)

    def scan(self) -> Iterator[tuple[RecordKey, bytes]]:
        """Every record, in key order (from the cache, equal to the tablet)."""
        with self._lock:
            rows = sorted(self._rows.items())
        yield from rows
