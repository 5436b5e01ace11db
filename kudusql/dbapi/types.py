"""PEP 249 type objects and constructors, and the type codes in ``Cursor.description``.

This module owns how a result column's Arrow type is described to a DB-API user: the
``type_code`` is the column's SQL type name (``BIGINT``, ``STRING``, ``DECIMAL``,
``TIMESTAMP``, ...), which compares equal to the type objects ``STRING``, ``BINARY``,
``NUMBER``, ``DATETIME`` and ``ROWID`` as PEP 249 asks.
"""

from __future__ import annotations

import datetime
import time
from typing import Any

import pyarrow as pa

Date = datetime.date
Time = datetime.time
Timestamp = datetime.datetime
Binary = bytes


def DateFromTicks(ticks: float) -> datetime.date:
    return Date(*time.localtime(ticks)[:3])


def TimeFromTicks(ticks: float) -> datetime.time:
    return Time(*time.localtime(ticks)[3:6])


def TimestampFromTicks(ticks: float) -> datetime.datetime:
    return Timestamp(*time.localtime(ticks)[:6])


class DBAPITypeObject:
    """Equal to each type code (SQL type name) in its set."""

    def __init__(self, *values: str) -> None:
        self.values = frozenset(values)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DBAPITypeObject):
            return self.values == other.values
        return isinstance(other, str) and other.upper() in self.values

    def __hash__(self) -> int:
        return hash(self.values)

    def __repr__(self) -> str:
        return f"DBAPITypeObject({', '.join(sorted(self.values))})"


STRING = DBAPITypeObject("STRING", "VARCHAR")
BINARY = DBAPITypeObject("BINARY")
NUMBER = DBAPITypeObject(
    "TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL", "BOOLEAN", "HUGEINT"
)
DATETIME = DBAPITypeObject("DATE", "TIME", "TIMESTAMP", "INTERVAL")
ROWID = DBAPITypeObject()


def type_code(t: pa.DataType) -> str:
    """The SQL type name of an Arrow type."""
    simple: list[tuple[Any, str]] = [
        (pa.types.is_boolean, "BOOLEAN"),
        (pa.types.is_int8, "TINYINT"),
        (pa.types.is_int16, "SMALLINT"),
        (pa.types.is_int32, "INT"),
        (pa.types.is_int64, "BIGINT"),
        (pa.types.is_unsigned_integer, "BIGINT"),
        (pa.types.is_float16, "FLOAT"),
        (pa.types.is_float32, "FLOAT"),
        (pa.types.is_float64, "DOUBLE"),
        (pa.types.is_decimal, "DECIMAL"),
        (pa.types.is_string, "STRING"),
        (pa.types.is_large_string, "STRING"),
        (pa.types.is_string_view, "STRING"),
        (pa.types.is_binary, "BINARY"),
        (pa.types.is_large_binary, "BINARY"),
        (pa.types.is_binary_view, "BINARY"),
        (pa.types.is_fixed_size_binary, "BINARY"),
        (pa.types.is_date, "DATE"),
        (pa.types.is_time, "TIME"),
        (pa.types.is_timestamp, "TIMESTAMP"),
        (pa.types.is_interval, "INTERVAL"),
        (pa.types.is_duration, "INTERVAL"),
    ]
    for test, name in simple:
        if test(t):
            return name
    return str(t).upper()


def describe(
    schema: pa.Schema, null_ok: tuple[bool | None, ...] | None = None
) -> list[tuple[Any, ...]]:
    """PEP 249 ``description``: (name, type_code, display_size, internal_size, precision,
    scale, null_ok) per column. ``null_ok`` is False for a NOT NULL (or key) column of a
    table, True for a nullable one, None where unknown (a computed expression); without
    ``null_ok`` the Arrow fields' flags say it."""
    out = []
    for i, f in enumerate(schema):
        precision = getattr(f.type, "precision", None) if pa.types.is_decimal(f.type) else None
        scale = getattr(f.type, "scale", None) if pa.types.is_decimal(f.type) else None
        ok = f.nullable if null_ok is None else null_ok[i]
        out.append((f.name, type_code(f.type), None, None, precision, scale, ok))
    return out
