"""What the SQL layers need of a database and its tables: the storage boundary as types.

The engine, the executor and the DB-API hold a ``DatabaseHandle`` and the
``TableHandle``s it opens, never the embedded ``Database``/``Table`` classes. The
embedded classes (``database.py``, ``table.py``) satisfy these protocols, and so does
the cluster's remote client (``kudusql.cluster.client``), which serves the same calls
from a master and tablet servers. A member added here is a promise both keep; the
type checker holds each implementation to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import pyarrow as pa

from kudusql.common.options import TabletOptions
from kudusql.common.predicates import ColumnPredicate
from kudusql.common.row_operations import WriteOp, WriteResult
from kudusql.common.schema import Schema
from kudusql.storage.tables.alter import AlterStep
from kudusql.storage.tables.catalog import TableMeta
from kudusql.storage.tables.partition import Partition, PartitionSchema


class TableHandle(Protocol):
    """One table: its metadata, its writes and its reads (at a snapshot HybridTime)."""

    @property
    def meta(self) -> TableMeta: ...
    @property
    def name(self) -> str: ...
    @property
    def schema(self) -> Schema: ...
    @property
    def partition_schema(self) -> PartitionSchema: ...
    @property
    def partitions(self) -> list[Partition]: ...
    @property
    def num_tablets(self) -> int: ...

    def exclusive(self) -> AbstractContextManager[int]:
        """Hold off the table's other writers of this process; yields the snapshot to
        read before writing."""
        ...

    def write(
        self,
        data: pa.Table | pa.RecordBatch,
        op: WriteOp | str | int | None = None,
        *,
        op_column: str | None = None,
        atomic: bool = False,
    ) -> WriteResult: ...

    def insert(self, data: pa.Table | pa.RecordBatch, **kw: Any) -> WriteResult: ...

    def write_rows(
        self,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        op: WriteOp | str | int,
        *,
        atomic: bool = False,
    ) -> WriteResult: ...

    def rows_to_arrow(self, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> pa.Table: ...

    def scan(
        self,
        columns: Sequence[str] | None = None,
        predicates: Sequence[ColumnPredicate] = (),
        *,
        snapshot: int | None = None,
        ordered: bool = False,
    ) -> pa.RecordBatchReader: ...

    def to_arrow(
        self,
        columns: Sequence[str] | None = None,
        predicates: Sequence[ColumnPredicate] = (),
        **kw: Any,
    ) -> pa.Table: ...

    def diff_scan(
        self,
        start: int,
        end: int,
        columns: Sequence[str] | None = None,
        predicates: Sequence[ColumnPredicate] = (),
    ) -> pa.RecordBatchReader: ...

    def lookup(
        self,
        key: Sequence[object],
        columns: Sequence[str] | None = None,
        snapshot: int | None = None,
    ) -> dict[str, object] | None: ...

    def replica_addresses(self) -> list[str]:
        """Where each tablet (in ``partitions`` order) is served: a tablet server's
        address, or ``local`` for an embedded table."""
        ...

    def estimated_rows(self) -> int: ...
    def count_rows(self, snapshot: int | None = None) -> int: ...
    def flush(self) -> None: ...
    def run_maintenance(self, **kw: Any) -> None: ...
    def statistics(self) -> dict[str, Any]: ...
    def compute_statistics(self) -> dict[str, Any]: ...


class DatabaseHandle(Protocol):
    """A database: its catalog (tables by name), DDL, snapshots and small metadata files."""

    path: str
    options: TabletOptions
    read_only: bool
    #: The cluster's master ("host:port"), or None for an embedded database.
    master_address: str | None

    def close(self) -> None: ...
    def statement(self) -> AbstractContextManager[None]: ...
    def refresh(self, *, tablets: bool = True) -> bool: ...
    def snapshot(self, ts: int | None = None) -> int: ...
    def table_names(self) -> list[str]: ...
    def has_table(self, name: str, *, soft_deleted: bool = False) -> bool: ...
    def table_meta(self, name: str, *, soft_deleted: bool = False) -> TableMeta | None: ...
    def table(self, name: str, *, soft_deleted: bool = False) -> TableHandle: ...

    def create_table(
        self,
        name: str,
        schema: Schema,
        partition_schema: PartitionSchema | None = None,
        *,
        properties: dict[str, str] | None = None,
        if_not_exists: bool = False,
        owner: str = "",
        comment: str = "",
    ) -> TableHandle: ...

    def drop_table(
        self, name: str, *, if_exists: bool = False, soft_deleted: bool = False
    ) -> None: ...
    def alter_table(self, name: str, steps: Sequence[AlterStep]) -> TableHandle: ...
    def system_table(self, name: str) -> pa.Table:
        """The rows of the ``sys`` table ``name`` (ProgrammingError for an unknown one)."""
        ...

    def load_meta_file(self, name: str, magic: bytes, version: int, what: str) -> Any: ...
    def save_meta_file(self, name: str, magic: bytes, version: int, body: Any) -> None: ...
