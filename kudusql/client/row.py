"""Rows of cells, Kudu's ``KuduPartialRow``: the cells of a write operation, a scan key
bound (``scanner.new_bound()``) or a range bound (``schema.new_row()``), each checked
against its column when it is set; and ``KuduValue``, a value tagged with a Kudu type.

A cell is checked when it is set (unknown column, NULL in a NOT NULL column, a value of
the wrong kind or out of range), so a bad row fails at once with a clear error; the exact
conversion to the column's Arrow type happens when the row is written in a batch.
Errors have kudu-python's classes: an unknown name is a ``KeyError``, a position out of
range an ``IndexError``, a value of the wrong kind a ``TypeError``
(``kudusql.common.errors``), each also the PEP 249 class kudusql raises for it.

TIMESTAMP cells take a datetime (naive means UTC; an aware one is converted to UTC), an
``int`` of microseconds since the epoch, a ``numpy.datetime64``, an ISO 8601 string
(``'2016-09-14T23:11:32.432019'``) or a ``(string, strptime format)`` pair, as
kudu-python's ``to_unixtime_micros`` does.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kudusql.common.errors import (
    KuduIndexError,
    KuduInvalidArgument,
    KuduInvalidValue,
    KuduKeyError,
    KuduTypeError,
)
from kudusql.common.schema import ColumnSchema as CoreColumn
from kudusql.common.schema import Schema as CoreSchema
from kudusql.common.types import DataType, TypeKind

__all__ = ["KuduValue", "PartialRow", "check_value", "parse_timestamp"]

_I8 = (-(2**7), 2**7 - 1)
_I16 = (-(2**15), 2**15 - 1)
_I32 = (-(2**31), 2**31 - 1)
_I64 = (-(2**63), 2**63 - 1)
_EPOCH = datetime.datetime(1970, 1, 1)
_EPOCH_DATE = datetime.date(1970, 1, 1)
_DEC_CONTEXT = decimal.Context(prec=80)
#: kudu-python's default format of a timestamp given as a string.
ISO_FORMAT = "%Y-%m-%dT%H:%M:%S.%f"

#: Estimated bytes of one buffered operation and of one cell (Python objects, not the
#: values' wire size): what the session's mutation buffer space is measured in.
OP_OVERHEAD_BYTES = 120
CELL_OVERHEAD_BYTES = 40


class KuduValue:
    """A value of a Kudu type (``KuduValue(kudu.int32, 5)``, ``kudu.int32.new_value(5)``),
    accepted wherever a cell value is: cells, defaults, predicates and bounds. The value
    is checked against the type when it is made."""

    __slots__ = ("type", "value")

    def __init__(self, type_: Any, value: Any) -> None:
        # type_ is a ``schema.KuduType`` (not imported: the schema module imports this one)
        if not isinstance(getattr(type_, "kind", None), TypeKind):
            raise KuduTypeError(f"KuduValue takes a Kudu type (kudu.int32, ...), not {type_!r}")
        if type_.kind is TypeKind.DECIMAL:
            dt = DataType(TypeKind.DECIMAL, precision=38, scale=_scale_of(value))
        elif type_.kind is TypeKind.VARCHAR:
            dt = DataType(TypeKind.VARCHAR, length=65535)
        else:
            dt = DataType(type_.kind)
        col = CoreColumn(name="value", type=dt, nullable=True)
        if type_.kind in (TypeKind.BINARY,) and isinstance(value, str):
            value = value.encode("utf-8")  # as kudu-python's KuduValue does
        self.type = type_
        self.value = check_value(col, value)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, KuduValue):
            return self.type == other.type and bool(self.value == other.value)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.type, self.value))

    def __repr__(self) -> str:
        return f"KuduValue({self.type.name}, {self.value!r})"


def _scale_of(value: Any) -> int:
    if isinstance(value, decimal.Decimal) and value.is_finite():
        exp = value.as_tuple().exponent
        return max(0, -exp) if isinstance(exp, int) else 0
    return 0


def _bad(
    col: CoreColumn, v: Any, why: str = "", cls: type[KuduInvalidValue] = KuduTypeError
) -> KuduInvalidValue:
    extra = f" ({why})" if why else ""
    return cls(f"invalid value {v!r} for column {col.name!r} of type {col.type}{extra}")


def check_value(col: CoreColumn, v: Any) -> Any:
    """``v`` checked (and normalized where cheap) for column ``col``: KuduTypeError for
    a value of the wrong kind, KuduInvalidValue for one out of range or a NULL in a NOT
    NULL column (both are DataErrors)."""
    if type(v) is KuduValue:
        v = v.value
    if v is None:
        if not col.nullable:
            raise KuduInvalidValue(
                f"column not nullable: {col.name} (column {col.name!r} is NOT NULL: it cannot be "
                "set to None)"
            )
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
                raise _bad(col, v, f"out of range {rng[0]}..{rng[1]}", KuduInvalidValue)
            return iv
        raise _bad(col, v, "an integer is required")
    if k is TypeKind.STRING or k is TypeKind.VARCHAR:
        if isinstance(v, str):
            return v
        if isinstance(v, (bytes, bytearray)):
            try:
                return bytes(v).decode("utf-8")
            except UnicodeDecodeError:
                raise _bad(col, v, "bytes that are not UTF-8", KuduInvalidValue) from None
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
                raise _bad(col, v, "days since the epoch out of range", KuduInvalidValue) from None
        raise _bad(col, v, "expected a datetime.date")
    if k is TypeKind.DECIMAL:
        return _decimal(col, v)
    return v  # pragma: no cover - every kind is handled above


def parse_timestamp(value: str, fmt: str | None = None) -> datetime.datetime:
    """A timestamp string as a naive UTC datetime: parsed with ``fmt`` (``strptime``),
    or without one as ISO 8601 (kudu-python's ``%Y-%m-%dT%H:%M:%S.%f``, or any form
    ``datetime.fromisoformat`` reads; an offset in the string is converted to UTC).
    Raises ValueError when the string does not match."""
    if fmt is not None:
        d = datetime.datetime.strptime(value, fmt)
    else:
        try:
            d = datetime.datetime.strptime(value, ISO_FORMAT)
        except ValueError:
            d = datetime.datetime.fromisoformat(value)
    if d.tzinfo is not None:
        d = d.astimezone(datetime.UTC).replace(tzinfo=None)
    return d


def _timestamp(col: CoreColumn, v: Any) -> Any:
    if isinstance(v, datetime.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(datetime.UTC).replace(tzinfo=None)
        return v
    if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
        try:
            return _EPOCH + datetime.timedelta(microseconds=int(v))
        except OverflowError:
            raise _bad(
                col, v, "microseconds since the epoch out of range", KuduInvalidValue
            ) from None
    if isinstance(v, np.datetime64):
        if np.isnat(v):
            return check_value(col, None)
        us = v.astype("datetime64[us]")
        if us != v:
            raise _bad(col, v, "finer than a microsecond", KuduInvalidValue)
        return _timestamp(col, int(us.astype(np.int64)))
    if isinstance(v, str) or (
        isinstance(v, tuple) and len(v) == 2 and all(isinstance(x, str) for x in v)
    ):
        text, fmt = (v, None) if isinstance(v, str) else v
        try:
            return parse_timestamp(text, fmt)
        except ValueError as e:
            raise _bad(col, v, f"not a timestamp: {e}", KuduInvalidValue) from None
    raise _bad(
        col,
        v,
        "expected a datetime, microseconds since the epoch, an ISO 8601 string or a "
        "(string, format) pair",
    )


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
        raise _bad(col, v, "not finite", KuduInvalidValue)
    if d == 0:
        return d
    if d.adjusted() + 1 > t.precision - t.scale:
        raise _bad(
            col, v, f"more than {t.precision - t.scale} digits before the point", KuduInvalidValue
        )
    exp = d.as_tuple().exponent
    if isinstance(exp, int) and -exp > t.scale:
        q = d.quantize(decimal.Decimal(1).scaleb(-t.scale), decimal.ROUND_DOWN, _DEC_CONTEXT)
        if q != d:
            raise _bad(col, v, f"more than {t.scale} digits after the point", KuduInvalidValue)
        d = q
    return d


def cell_bytes(v: Any) -> int:
    if isinstance(v, (str, bytes)):
        return CELL_OVERHEAD_BYTES + len(v)
    return CELL_OVERHEAD_BYTES


class PartialRow:
    """Cells of some columns of a schema (Kudu's ``KuduPartialRow``). Set cells by column
    name or position (``row['key'] = 1``, ``row[0] = 1``) or from a record (dict, tuple
    or list); ``schema.new_row()`` and ``scanner.new_bound()`` make one."""

    __slots__ = ("_bytes", "_cells", "_schema")

    def __init__(
        self, schema: CoreSchema, record: Mapping[Any, Any] | Sequence[Any] | None = None
    ) -> None:
        if not isinstance(schema, CoreSchema):
            core = getattr(schema, "core", None)
            if not isinstance(core, CoreSchema):
                raise KuduTypeError(f"a PartialRow needs a Schema, not {type(schema).__name__}")
            schema = core
        self._schema: CoreSchema = schema
        self._cells: dict[str, Any] = {}
        self._bytes = OP_OVERHEAD_BYTES
        if record is not None:
            self.from_record(record)

    def _what(self) -> str:
        return "the row"

    # -- setting cells -------------------------------------------------------------------------
    def _name_of(self, key: str | int) -> str:
        if isinstance(key, str):
            if not self._schema.has_column(key):
                raise KuduKeyError(
                    f"unknown column {key!r} in {self._what()} "
                    f"(columns: {', '.join(self._schema.names)})"
                )
            return key
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            n = len(self._schema.columns)
            if not 0 <= int(key) < n:
                raise KuduIndexError(
                    f"Column index {key} is out of bounds: {self._what()} has {n} columns"
                )
            return self._schema.columns[int(key)].name
        raise KuduTypeError(f"a column is named by a str or an int, not {key!r}")

    def _check_mutable(self) -> None:
        """Raises if the row may no longer change."""

    def __setitem__(self, key: str | int, value: Any) -> None:
        self._check_mutable()
        name = self._name_of(key)
        v = check_value(self._schema.column(name), value)
        cells = self._cells
        if name in cells:
            self._bytes -= cell_bytes(cells[name])
        cells[name] = v
        self._bytes += cell_bytes(v)

    def set_field(self, name: str, value: Any) -> PartialRow:
        self[name] = value
        return self

    def set_loc(self, index: int, value: Any) -> PartialRow:
        self[index] = value
        return self

    def set_null(self, key: str | int) -> PartialRow:
        self[key] = None
        return self

    def unset(self, key: str | int) -> PartialRow:
        """Forget a cell (an INSERT then takes the column's default)."""
        self._check_mutable()
        name = self._name_of(key)
        if name in self._cells:
            self._bytes -= cell_bytes(self._cells.pop(name))
        return self

    def from_record(self, record: Mapping[Any, Any] | Sequence[Any]) -> PartialRow:
        """Set cells from a dict (names or positions as keys) or a tuple/list (values
        by column position)."""
        if isinstance(record, PartialRow):
            record = record.to_dict()
        if isinstance(record, Mapping):
            for k, v in record.items():
                self[k] = v
        elif isinstance(record, (tuple, list)):
            n = len(self._schema.columns)
            if len(record) > n:
                raise KuduIndexError(
                    f"a record of {len(record)} values for {self._what()} of {n} columns"
                )
            for i, v in enumerate(record):
                self[i] = v
        else:
            raise KuduTypeError(f"a record is a dict, tuple or list, not {type(record).__name__}")
        return self

    # -- reading ------------------------------------------------------------------------------
    def __getitem__(self, key: str | int) -> Any:
        name = self._name_of(key)
        if name not in self._cells:
            raise KuduKeyError(f"column {name!r} is not set in {self!r}")
        return self._cells[name]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in self._cells

    def is_set(self, key: str | int) -> bool:
        return self._name_of(key) in self._cells

    def to_dict(self) -> dict[str, Any]:
        """The cells set so far, by column name."""
        return dict(self._cells)

    def key_prefix(self, what: str) -> tuple[Any, ...]:
        """The values of the leading key columns set (the rest unset), for a key bound;
        ProgrammingError if a cell is set outside that prefix."""
        names = self._schema.key_names
        vals = []
        for n in names:
            if n not in self._cells:
                break
            vals.append(self._cells[n])
        extra = sorted(set(self._cells) - set(names[: len(vals)]))
        if extra:
            raise KuduInvalidArgument(
                f"{what} sets {', '.join(map(repr, extra))}: a key bound sets leading "
                f"primary key columns only (key: {', '.join(names)})"
            )
        return tuple(vals)

    def estimated_bytes(self) -> int:
        return self._bytes

    def __repr__(self) -> str:
        cells = ", ".join(f"{k}={v!r}" for k, v in self._cells.items())
        return f"PartialRow({cells})"
