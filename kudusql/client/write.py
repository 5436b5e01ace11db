"""Row write operations (``table.new_insert()``, ``new_update()``, ...): one row's cells
(a ``PartialRow``, checked as they are set) and the operation, waiting to be applied
through a ``Session``, which flushes buffered operations as Arrow batches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from kudusql.client.row import PartialRow, check_value
from kudusql.common.errors import ProgrammingError
from kudusql.common.row_operations import WriteOp

if TYPE_CHECKING:
    from kudusql.client.table import Table

__all__ = [
    "Delete",
    "DeleteIgnore",
    "Insert",
    "InsertIgnore",
    "Update",
    "UpdateIgnore",
    "Upsert",
    "UpsertIgnore",
    "WriteOperation",
    "check_value",
]


class WriteOperation(PartialRow):
    """One row to write. Set cells by column name or position (``op['key'] = 1``,
    ``op[0] = 1``) or from a record (dict, tuple or list) given at creation; apply it
    with ``Session.apply``. An operation can be applied once."""

    op_type: ClassVar[WriteOp]
    __slots__ = ("_applied", "_colset", "_table")

    def __init__(self, table: Table, record: Mapping[Any, Any] | Sequence[Any] | None = None):
        self._table = table
        self._applied = False
        self._colset: frozenset[str] | None = None
        super().__init__(table.core.schema, record)

    def _what(self) -> str:
        return f"table {self._table.name!r}"

    def _check_mutable(self) -> None:
        if self._applied:
            raise ProgrammingError(f"{self!r} was already applied; create a new operation")

    @property
    def table(self) -> Table:
        return self._table

    @property
    def op(self) -> WriteOp:
        return self.op_type

    @property
    def applied(self) -> bool:
        return self._applied

    @property
    def key(self) -> tuple[Any, ...] | None:
        """The primary key values, or None while a key column is unset."""
        names = self._schema.key_names
        if any(k not in self._cells for k in names):
            return None
        return tuple(self._cells[k] for k in names)

    def missing_key_columns(self) -> list[str]:
        """Key columns not set; an INSERT leaves a non-unique key's hidden
        ``auto_incrementing_id`` to the tablet (Kudu assigns it)."""
        inserting = self.op_type in (WriteOp.INSERT, WriteOp.INSERT_IGNORE)
        return [
            c.name
            for c in self._schema.key_columns
            if c.name not in self._cells and not (inserting and c.auto_incrementing)
        ]

    def _freeze(self) -> frozenset[str]:
        """Mark applied; the set of columns it sets (operations with the same set and
        table go into one Arrow batch)."""
        self._applied = True
        self._colset = frozenset(self._cells)
        return self._colset

    def __repr__(self) -> str:
        cells = ", ".join(f"{k}={v!r}" for k, v in self._cells.items())
        return f"{type(self).__name__}({self._table.name!r}: {cells})"


class Insert(WriteOperation):
    """INSERT: fails with AlreadyPresent if the key exists."""

    __slots__ = ()
    op_type = WriteOp.INSERT


class InsertIgnore(WriteOperation):
    """INSERT that does nothing if the key exists."""

    __slots__ = ()
    op_type = WriteOp.INSERT_IGNORE


class Upsert(WriteOperation):
    """INSERT, or UPDATE of the columns set if the key exists."""

    __slots__ = ()
    op_type = WriteOp.UPSERT


class UpsertIgnore(WriteOperation):
    """UPSERT that ignores errors such as an update of an immutable column."""

    __slots__ = ()
    op_type = WriteOp.UPSERT_IGNORE


class Update(WriteOperation):
    """UPDATE of the columns set: fails with NotFound if the key does not exist."""

    __slots__ = ()
    op_type = WriteOp.UPDATE


class UpdateIgnore(WriteOperation):
    """UPDATE that does nothing if the key does not exist."""

    __slots__ = ()
    op_type = WriteOp.UPDATE_IGNORE


class Delete(WriteOperation):
    """DELETE by primary key: fails with NotFound if the key does not exist."""

    __slots__ = ()
    op_type = WriteOp.DELETE


class DeleteIgnore(WriteOperation):
    """DELETE that does nothing if the key does not exist."""

    __slots__ = ()
    op_type = WriteOp.DELETE_IGNORE
