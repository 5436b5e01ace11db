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


class ScanTokenHandle(Protocol):
    """One serializable piece of a planned scan (``TableHandle.scan_tokens``): a tablet,
    its key range, the projection, the predicates and the snapshot. Each database kind
    has its own token format; ``DatabaseHandle.scan_token`` reads it back."""

    @property
    def table_id(self) -> int | str: ...
    @property
    def table_name(self) -> str: ...
    @property
    def tablet_id(self) -> int | str: ...
    @property
    def partition(self) -> str: ...
    @property
    def columns(self) -> tuple[str, ...]: ...
    @property
    def snapshot(self) -> int: ...
    def serialize(self) -> bytes: ...


class TableHandle(Protocol):
    """One table: its metadata, its writes and its reads (at a snapshot HybridTime)."""

    @property
    def id(self) -> int | str:
        """The table's id: stays with the table across renames; a table dropped and
        created again under its name has another."""
        ...

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
        key_range: tuple[bytes | None, bytes | None] = (None, None),
    ) -> pa.RecordBatchReader:
        """``key_range``: only encoded primary keys in ``[lo, hi)`` (None: unbounded)."""
        ...

    def scan_tokens(
        self,
        columns: Sequence[str] | None = None,
        predicates: Sequence[ColumnPredicate] = (),
        *,
        snapshot: int | None = None,
        split_size_bytes: int | None = None,
        key_range: tuple[bytes | None, bytes | None] = (None, None),
    ) -> Sequence[ScanTokenHandle]:
        """The scan cut into tokens (at least one per tablet the predicates keep), all
        at one snapshot."""
        ...

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
    @property
    def closed(self) -> bool: ...
    def statement(self) -> AbstractContextManager[None]: ...
    def refresh(self, *, tablets: bool = True) -> bool: ...
    def snapshot(self, ts: int | None = None) -> int: ...
    def table_names(self) -> list[str]: ...
    def has_table(self, name: str, *, soft_deleted: bool = False) -> bool: ...
    def table_meta(self, name: str, *, soft_deleted: bool = False) -> TableMeta | None: ...
    def table(self, name: str, *, soft_deleted: bool = False) -> TableHandle: ...
    def table_by_id(self, table_id: int | str, name: str | None = None) -> TableHandle:
        """The table with this id, whatever its name now (``name``: where it likely is);
        ProgrammingError once it is dropped."""
        ...

    def observed_timestamp(self) -> int | None:
        """The highest HybridTime a server answered this database handle with (None for
        an embedded database: there is no server, each client tracks its own)."""
        ...

    def scan_token(self, data: bytes | str) -> ScanTokenHandle:
        """A serialized scan token of this kind of database, read back (ProgrammingError
        for another kind's token or one that is not a token)."""
        ...

    def scan_token_reader(
        self, token: ScanTokenHandle, *, ordered: bool = False
    ) -> pa.RecordBatchReader:
        """The rows of one token (refused when its table was dropped or altered since)."""
        ...

    def soft_deleted_table_names(self) -> list[str]: ...
    def soft_drop_table(self, name: str, reserve_seconds: int) -> None:
        """Hide a table for ``reserve_seconds`` (0: drop it at once); a database without
        soft delete raises NotSupportedError for a reserve time."""
        ...

    def recall_table(self, table_id: int, new_name: str | None = None) -> TableHandle: ...
    def purge_expired_tables(self) -> list[str]: ...

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
