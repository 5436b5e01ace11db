"""Row write operations (``table.new_insert()``, ``new_update()``, ...): one row's cells,
checked as they are set, waiting to be applied through a ``Session``.

A cell is checked against its column when it is set (unknown column, NULL in a NOT NULL
column, a value of the wrong kind or out of range), so most bad rows fail at once with a
clear error; the exact conversion to the column's Arrow type happens when a session
flushes its buffered operations as Arrow batches.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from kudusql.common.errors import DataError, ProgrammingError
from kudusql.common.row_operations import WriteOp
from kudusql.common.schema import ColumnSchema as CoreColumn
from kudusql.common.schema import Schema as CoreSchema
from kudusql.common.types import DataType, TypeKind

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

_I8 = (-(2**7), 2**7 - 1)
_I16 = (-(2**15), 2**15 - 1)
_I32 = (-(2**31), 2**31 - 1)
_I64 = (-(2**63), 2**63 - 1)
_EPOCH = datetime.datetime(1970, 1, 1)
_EPOCH_DATE = datetime.date(1970, 1, 1)
_DEC_CONTEXT = decimal.Context(prec=80)

#: Estimated bytes of one buffered operation and of one cell (Python objects, not the
#: values' wire size): what the session's mutation buffer space is measured in.
OP_OVERHEAD_BYTES = 120
CELL_OVERHEAD_BYTES = 40


def _bad(col: CoreColumn, v: Any, why: str = "") -> DataError:
    extra = f" ({why})" if why else ""
    return DataError(f"invalid value {v!r} for column {col.name!r} of type {col.type}{extra}")


def check_value(col: CoreColumn, v: Any) -> Any:
    """``v`` checked (and normalized where cheap) for column ``col``; raises DataError."""
    if v is None:
        if not col.nullable:
            raise DataError(f"column {col.name!r} is NOT NULL: it cannot be set to None")
        return None
    t: DataType = col.type
    k = t.kind
    # Identity tests: hashing an Enum member runs Python code, this is the hot path.
    if k is TypeKind.INT64:
        rng = _I64
    elif k is TypeKind.INT32:
        rng = _I32
    elif k is TypeKind.INT16:
        rng = _I16
    elif k is TypeKind.INT8:
        rng = _I8
    else:
        rng = None
    if rng is not None:
        if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
            iv = int(v)
            if not rng[0] <= iv <= rng[1]:
                raise _bad(col, v, f"out of range {rng[0]}..{rng[1]}")
            return iv
        raise _bad(col, v, "expected an int")
    if k is TypeKind.STRING or k is TypeKind.VARCHAR:
        if isinstance(v, str):
            return v
        if isinstance(v, (bytes, bytearray)):
            try:
                return bytes(v).decode("utf-8")
            except UnicodeDecodeError:
                raise _bad(col, v, "bytes that are not UTF-8") from None
        raise _bad(col, v, "expected a str")
    if k is TypeKind.BINARY:
        if isinstance(v, (bytes, bytearray, memoryview)):
            return bytes(v)
        if isinstance(v, str):
            raise _bad(col, v, "encode a str before storing it in a BINARY column")
        raise _bad(col, v, "expected bytes")
    if k is TypeKind.BOOL:
        if isinstance(v, (bool, np.bool_)):
            return bool(v)
        raise _bad(col, v, "expected a bool")
    if k is TypeKind.FLOAT or k is TypeKind.DOUBLE:
        if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(
            v, (bool, np.bool_)
        ):
            return float(v)
        raise _bad(col, v, "expected a float")
    if k is TypeKind.TIMESTAMP:
        return _timestamp(col, v)
    if k is TypeKind.DATE:
        if isinstance(v, datetime.datetime):
            raise _bad(col, v, "expected a datetime.date, not a datetime")
        if isinstance(v, datetime.date):
            return v
        if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
            try:
                return _EPOCH_DATE + datetime.timedelta(days=int(v))
            except OverflowError:
                raise _bad(col, v, "days since the epoch out of range") from None
        raise _bad(col, v, "expected a datetime.date")
    if k is TypeKind.DECIMAL:
        return _decimal(col, v)
    return v  # pragma: no cover - every kind is handled above


def _timestamp(col: CoreColumn, v: Any) -> Any:
    if isinstance(v, datetime.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(datetime.UTC).replace(tzinfo=None)
        return v
    if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
        try:
            return _EPOCH + datetime.timedelta(microseconds=int(v))
        except OverflowError:
            raise _bad(col, v, "microseconds since the epoch out of range") from None
    if isinstance(v, np.datetime64):
        if np.isnat(v):
            return check_value(col, None)
        us = v.astype("datetime64[us]")
        if us != v:
            raise _bad(col, v, "finer than a microsecond")
        return _timestamp(col, int(us.astype(np.int64)))
    raise _bad(col, v, "expected a datetime or microseconds since the epoch")


def _decimal(col: CoreColumn, v: Any) -> decimal.Decimal:
    t = col.type
    assert t.precision is not None and t.scale is not None
    if isinstance(v, decimal.Decimal):
        d = v
    elif isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
        d = decimal.Decimal(int(v))
    elif isinstance(v, (float, str)):
        try:
            d = decimal.Decimal(str(v))
        except decimal.InvalidOperation:
            raise _bad(col, v, "not a number") from None
    else:
        raise _bad(col, v, "expected a decimal.Decimal")
    if not d.is_finite():
        raise _bad(col, v, "not finite")
    if d == 0:
        return d
    if d.adjusted() + 1 > t.precision - t.scale:
        raise _bad(col, v, f"more than {t.precision - t.scale} digits before the point")
    exp = d.as_tuple().exponent
    if isinstance(exp, int) and -exp > t.scale:
        q = d.quantize(decimal.Decimal(1).scaleb(-t.scale), decimal.ROUND_DOWN, _DEC_CONTEXT)
        if q != d:
            raise _bad(col, v, f"more than {t.scale} digits after the point")
        d = q
    return d


def cell_bytes(v: Any) -> int:
    if isinstance(v, (str, bytes)):
        return CELL_OVERHEAD_BYTES + len(v)
    return CELL_OVERHEAD_BYTES


class WriteOperation:
    """One row to write. Set cells by column name or position (``op['key'] = 1``,
    ``op[0] = 1``) or from a record (dict, tuple or list) given at creation; apply it
    with ``Session.apply``. An operation can be applied once."""

    op_type: ClassVar[WriteOp]
    __slots__ = ("_applied", "_bytes", "_cells", "_colset", "_schema", "_table")

    def __init__(self, table: Table, record: Mapping[Any, Any] | Sequence[Any] | None = None):
        self._table = table
        self._schema: CoreSchema = table.core.schema
        self._cells: dict[str, Any] = {}
        self._bytes = OP_OVERHEAD_BYTES
        self._applied = False
        self._colset: frozenset[str] | None = None
        if record is not None:
            self.from_record(record)

    # -- setting cells -------------------------------------------------------------------------
    def _name_of(self, key: str | int) -> str:
        if isinstance(key, str):
            if not self._schema.has_column(key):
                raise ProgrammingError(
                    f"unknown column {key!r} in table {self._table.name!r} "
                    f"(columns: {', '.join(self._schema.names)})"
                )
            return key
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            n = len(self._schema.columns)
            if not 0 <= int(key) < n:
                raise ProgrammingError(
                    f"column index {key} is out of range: table {self._table.name!r} "
                    f"has {n} columns"
                )
            return self._schema.columns[int(key)].name
        raise ProgrammingError(f"a column is named by a str or an int, not {key!r}")

    def _check_mutable(self) -> None:
        if self._applied:
            raise ProgrammingError(f"{self!r} was already applied; create a new operation")

    def __setitem__(self, key: str | int, value: Any) -> None:
        self._check_mutable()
        name = self._name_of(key)
        v = check_value(self._schema.column(name), value)
        cells = self._cells
        if name in cells:
            self._bytes -= cell_bytes(cells[name])
        cells[name] = v
        self._bytes += cell_bytes(v)

    def set_field(self, name: str, value: Any) -> WriteOperation:
        self[name] = value
        return self

    def set_loc(self, index: int, value: Any) -> WriteOperation:
        self[index] = value
        return self

    def set_null(self, key: str | int) -> WriteOperation:
        self[key] = None
        return self

    def unset(self, key: str | int) -> WriteOperation:
        """Forget a cell (an INSERT then takes the column's default)."""
        self._check_mutable()
        name = self._name_of(key)
        if name in self._cells:
            self._bytes -= cell_bytes(self._cells.pop(name))
        return self

    def from_record(self, record: Mapping[Any, Any] | Sequence[Any]) -> WriteOperation:
        """Set cells from a dict (names or positions as keys) or a tuple/list (values
        by column position)."""
        if isinstance(record, Mapping):
            for k, v in record.items():
                self[k] = v
        elif isinstance(record, (tuple, list)):
            n = len(self._schema.columns)
            if len(record) > n:
                raise ProgrammingError(
                    f"a record of {len(record)} values for table {self._table.name!r} of "
                    f"{n} columns"
                )
            for i, v in enumerate(record):
                self[i] = v
        else:
            raise ProgrammingError(
                f"a record is a dict, tuple or list, not {type(record).__name__}"
            )
        return self

    # -- reading ------------------------------------------------------------------------------
    def __getitem__(self, key: str | int) -> Any:
        name = self._name_of(key)
        if name not in self._cells:
            raise ProgrammingError(f"column {name!r} is not set in {self!r}")
        return self._cells[name]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in self._cells

    @property
    def table(self) -> Table:
        return self._table

    @property
    def op(self) -> WriteOp:
        return self.op_type

    @property
    def applied(self) -> bool:
        return self._applied

    def to_dict(self) -> dict[str, Any]:
        """The cells set so far, by column name."""
        return dict(self._cells)

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

    def estimated_bytes(self) -> int:
        return self._bytes

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
