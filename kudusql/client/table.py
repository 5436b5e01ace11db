"""``Table``: a handle on one table of a client.

A ``Table`` follows its table by id, so it stays valid across renames and ALTERs (its
``schema`` is always the current one) and raises ProgrammingError once the table is
dropped. The Arrow write methods (``write_arrow``, ``insert_arrow``, ...) hand whole
batches to storage with no per-row Python objects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import pyarrow as pa

from kudusql.client.predicate import Column
from kudusql.client.scanner import Scanner, ScanTokenBuilder
from kudusql.client.schema import Schema
from kudusql.client.session import arrow_table
from kudusql.client.write import (
    Delete,
    DeleteIgnore,
    Insert,
    InsertIgnore,
    Update,
    UpdateIgnore,
    Upsert,
    UpsertIgnore,
)
from kudusql.common.errors import ProgrammingError
from kudusql.common.row_operations import WriteOp, WriteResult
from kudusql.storage.tables.handles import TableHandle

if TYPE_CHECKING:
    from kudusql.client.client import Client

__all__ = ["ArrowData", "Table"]

ArrowData: TypeAlias = "pa.Table | pa.RecordBatch | pa.RecordBatchReader | Mapping[str, Any]"
Record: TypeAlias = "Mapping[Any, Any] | Sequence[Any] | None"


class Table:
    """A table of a ``Client`` (``client.table(name)``)."""

    def __init__(self, client: Client, core: TableHandle) -> None:
        self._client = client
        self._handle = core
        self._id = core.id

    @property
    def _core(self) -> TableHandle:
        """The table as it is now, found by id (so renames and ALTERs by any client are
        followed; ProgrammingError once it is dropped)."""
        handle = self._client.database.table_by_id(self._id, self._handle.name)
        self._handle = handle
        return handle

    # -- description ---------------------------------------------------------------------------
    @property
    def client(self) -> Client:
        return self._client

    @property
    def core(self) -> TableHandle:
        """The storage table: an embedded ``Table`` or a cluster's ``RemoteTable``."""
        return self._core

    @property
    def name(self) -> str:
        return self._core.name

    @property
    def id(self) -> int | str:
        """The table's id (an int in an embedded database, the master's id string on a
        cluster)."""
        return self._id

    @property
    def schema(self) -> Schema:
        return Schema(self._core.schema)

    @property
    def owner(self) -> str:
        """The table's owner (Kudu's; "" if none was recorded)."""
        return self._core.meta.owner

    @property
    def comment(self) -> str:
        """The table's comment ("" if none)."""
        return self._core.meta.comment

    @property
    def num_columns(self) -> int:
        return len(self._core.schema.columns)

    @property
    def num_replicas(self) -> int:
        """Replicas of each tablet: 1 embedded; on a cluster, as its tablets have them."""
        return int(getattr(self._core, "num_replicas", 1))

    @property
    def num_tablets(self) -> int:
        return self._core.num_tablets

    @property
    def partitioning(self) -> str:
        """The partition schema, described (``HASH (k) PARTITIONS 4, RANGE (k)``)."""
        return self._core.partition_schema.describe()

    def range_partitions(self) -> list[str]:
        """The range partitions, described (``0 <= VALUES < 10``)."""
        return [b.describe() for b in self._core.partition_schema.range_bounds]

    def __getitem__(self, key: str | int) -> Column:
        return Column(self, self.schema[key])

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Table)
            and other._client.database is self._client.database
            and other.id == self.id
        )

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        return f"Table({self.name!r}, {self.num_tablets} tablets)"

    # -- row operations --------------------------------------------------------------------------
    def new_insert(self, record: Record = None) -> Insert:
        """An INSERT of one row (cells from ``record``: dict, tuple or list)."""
        return Insert(self, record)

    def new_insert_ignore(self, record: Record = None) -> InsertIgnore:
        return InsertIgnore(self, record)

    def new_upsert(self, record: Record = None) -> Upsert:
        return Upsert(self, record)

    def new_upsert_ignore(self, record: Record = None) -> UpsertIgnore:
        return UpsertIgnore(self, record)

    def new_update(self, record: Record = None) -> Update:
        return Update(self, record)

    def new_update_ignore(self, record: Record = None) -> UpdateIgnore:
        return UpdateIgnore(self, record)

    def new_delete(self, record: Record = None) -> Delete:
        return Delete(self, record)

    def new_delete_ignore(self, record: Record = None) -> DeleteIgnore:
        return DeleteIgnore(self, record)

    # -- Arrow writes ------------------------------------------------------------------------------
    def _write(
        self,
        data: pa.Table,
        op: WriteOp | str | int | None,
        *,
        op_column: str | None = None,
        atomic: bool = False,
    ) -> WriteResult:
        result = self._core.write(data, op, op_column=op_column, atomic=atomic)
        self._client._observe(result.timestamp)
        return result

    def write_arrow(
        self,
        data: ArrowData,
        op: WriteOp | str | int | None = WriteOp.INSERT,
        *,
        op_column: str | None = None,
        atomic: bool = False,
    ) -> WriteResult:
        """Write an Arrow table, record batch, stream or dict of columns in one batch
        (a stream: one batch per record batch): ``op`` for every row (a ``WriteOp``, its
        name such as 'upsert', or its code), or per row from the column ``op_column``.
        Returns the ``WriteResult``; row errors name the row's index in ``data``.
        ``atomic=True`` applies all rows or none (raising IntegrityError or DataError)."""
        if op_column is not None:
            op = None
        elif op is None:
            raise ProgrammingError("write_arrow() needs an operation or an op_column")
        tbl = arrow_table(data)
        if isinstance(tbl, pa.Table):
            return self._write(tbl, op, op_column=op_column, atomic=atomic)
        total = WriteResult(0, 0, 0, [])
        offset = 0
        for batch in tbl:
            res = self._write(
                pa.Table.from_batches([batch]), op, op_column=op_column, atomic=atomic
            )
            total.timestamp = res.timestamp
            total.applied += res.applied
            total.ignored += res.ignored
            total.errors.extend(
                type(e)(e.index + offset, e.op, e.key, e.status, e.message) for e in res.errors
            )
            offset += batch.num_rows
        return total

    def insert_arrow(self, data: ArrowData, **kw: Any) -> WriteResult:
        return self.write_arrow(data, WriteOp.INSERT, **kw)

    def insert_ignore_arrow(self, data: ArrowData, **kw: Any) -> WriteResult:
        return self.write_arrow(data, WriteOp.INSERT_IGNORE, **kw)

    def upsert_arrow(self, data: ArrowData, **kw: Any) -> WriteResult:
        return self.write_arrow(data, WriteOp.UPSERT, **kw)

    def upsert_ignore_arrow(self, data: ArrowData, **kw: Any) -> WriteResult:
        return self.write_arrow(data, WriteOp.UPSERT_IGNORE, **kw)

    def update_arrow(self, data: ArrowData, **kw: Any) -> WriteResult:
        return self.write_arrow(data, WriteOp.UPDATE, **kw)

    def update_ignore_arrow(self, data: ArrowData, **kw: Any) -> WriteResult:
        return self.write_arrow(data, WriteOp.UPDATE_IGNORE, **kw)

    def delete_arrow(self, data: ArrowData, **kw: Any) -> WriteResult:
        return self.write_arrow(data, WriteOp.DELETE, **kw)

    def delete_ignore_arrow(self, data: ArrowData, **kw: Any) -> WriteResult:
        return self.write_arrow(data, WriteOp.DELETE_IGNORE, **kw)

    # -- reads ------------------------------------------------------------------------------------
    def scanner(self) -> Scanner:
        """A new scanner of this table (``add_predicate``, ``open``, ``read_all_tuples``,
        ``to_arrow``, ...)."""
        return Scanner(self)

    def scan_token_builder(self) -> ScanTokenBuilder:
        """Plan a scan as serializable tokens (one or more per tablet)."""
        return ScanTokenBuilder(self)

    def count_rows(self) -> int:
        """The number of live rows (a scan of the first key column)."""
        return self._core.count_rows()
