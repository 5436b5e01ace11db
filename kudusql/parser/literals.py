"""Constant expressions to Python values, and SQL types to kudusql types.

This module owns the evaluation of the constants a statement carries (DEFAULT values,
range partition bounds, split rows, SET values): ``constant`` turns a literal tree into
a natural Python value (int, Decimal, float, str, bool, None, bytes for ``X'..'``,
``datetime.date`` for ``DATE '..'``, ``datetime.datetime`` for ``TIMESTAMP '..'``, a
tuple for ``(a, b)``), and ``coerce`` converts one to a column type with Impala's
strictness (no number for a string column, no string for a number column). It also maps
a parsed SQL type (``exp.DataType``) to ``kudusql.common.types.DataType``.

Errors are ``StatementError``s naming the offending node, so the caller can point at it.
"""

from __future__ import annotations

import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from sqlglot import exp

from kudusql.common.errors import ProgrammingError
from kudusql.common.types import DataType, TypeKind
from kudusql.parser import nodes


class StatementError(ProgrammingError):
    """A semantic error in a parsed statement, at ``node`` (for the caret); reported as
    ``error_class``."""

    def __init__(
        self,
        message: str,
        node: exp.Expr | None = None,
        *,
        error_class: type[ProgrammingError] = ProgrammingError,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.node = node
        self.error_class = error_class


class ParameterPlacementError(ProgrammingError):
    """A parameter placeholder (``?``, ``:name``, ``$1``) where the statement needs a
    name or a column position: a parameter binds only as a value."""


#: The message of ``ParameterPlacementError`` for a parameter in the place of a name.
PARAMETER_AS_NAME = (
    "a parameter can stand only for a value, not for a table, column, alias or other name"
)


def offset_of(node: exp.Expr | None) -> int | None:
    """The character offset where ``node`` (or its first positioned child) starts."""
    if node is None:
        return None
    for n in node.walk():
        start = n.meta.get("start") if n._meta else None
        if isinstance(start, int):
            return start
    return None


_TYPES: dict[exp.DType, TypeKind] = {
    exp.DType.BOOLEAN: TypeKind.BOOL,
    exp.DType.TINYINT: TypeKind.INT8,
    exp.DType.SMALLINT: TypeKind.INT16,
    exp.DType.INT: TypeKind.INT32,
    exp.DType.BIGINT: TypeKind.INT64,
    exp.DType.FLOAT: TypeKind.FLOAT,
    exp.DType.DOUBLE: TypeKind.DOUBLE,
    exp.DType.DECIMAL: TypeKind.DECIMAL,
    exp.DType.TEXT: TypeKind.STRING,
    exp.DType.VARCHAR: TypeKind.VARCHAR,
    exp.DType.VARBINARY: TypeKind.BINARY,
    exp.DType.BINARY: TypeKind.BINARY,
    exp.DType.BLOB: TypeKind.BINARY,
    exp.DType.DATE: TypeKind.DATE,
    exp.DType.TIMESTAMP: TypeKind.TIMESTAMP,
    exp.DType.TIMESTAMPNTZ: TypeKind.TIMESTAMP,
    exp.DType.DATETIME: TypeKind.TIMESTAMP,
}
SUPPORTED_TYPES = (
    "BOOLEAN, TINYINT (INT8), SMALLINT (INT16), INT (INT32), BIGINT (INT64), FLOAT, "
    "DOUBLE, DECIMAL(p,s), STRING, VARCHAR(n), BINARY, DATE, TIMESTAMP"
)


#: Impala's precision and scale of a bare DECIMAL (also in ``to_duckdb_sql``).
IMPALA_DECIMAL = (9, 0)


def data_type(node: exp.DataType) -> DataType:
    """The kudusql type of a parsed SQL type: the one mapping of SQL type names for every
    statement (column types, CAST in constants), with Impala's defaults."""
    kind = _TYPES.get(node.this)
    if kind is None:
        raise StatementError(
            f"type {node.sql('kudusql')} is not supported; the types are {SUPPORTED_TYPES}", node
        )
    params = [int(p.name) for p in node.expressions if p.name.isdigit()]
    if len(params) != len(node.expressions):
        raise StatementError(f"bad parameters for type {node.sql('kudusql')}", node)
    try:
        if kind is TypeKind.DECIMAL:
            if len(params) > 2:
                raise StatementError("DECIMAL takes at most (precision, scale)", node)
            # Impala's defaults: DECIMAL is DECIMAL(9,0), DECIMAL(p) is DECIMAL(p,0).
            precision, scale = (params + [IMPALA_DECIMAL[0], 0][len(params) :])[:2]
            return DataType.parse(f"DECIMAL({precision},{scale})")
        if kind is TypeKind.VARCHAR:
            if len(params) != 1:
                raise StatementError("VARCHAR needs a length, as in VARCHAR(20)", node)
            return DataType(kind, length=params[0])
        if params:
            raise StatementError(f"type {kind.value} takes no parameters", node)
        return DataType(kind)
    except StatementError:
        raise
    except ProgrammingError as e:
        raise StatementError(str(e), node) from None


def _number(text: str) -> int | Decimal | float:
    if text.isdigit():
        return int(text)
    if "e" in text.lower():
        return float(text)
    try:
        return Decimal(text)
    except InvalidOperation:
        return float(text)


def constant(node: exp.Expr, what: str) -> Any:
    """The natural Python value of a constant expression (see the module docstring)."""
    if isinstance(node, exp.Paren):
        return constant(node.this, what)
    if isinstance(node, exp.Tuple):
        return tuple(constant(e, what) for e in node.expressions)
    if isinstance(node, exp.Literal):
        return node.name if node.is_string else _number(node.name)
    if isinstance(node, exp.Neg):
        v = constant(node.this, what)
        if isinstance(v, bool) or not isinstance(v, int | float | Decimal):
            raise StatementError(f"{what}: cannot negate {node.this.sql('kudusql')}", node)
        return -v
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.HexString):
        try:
            return bytes.fromhex(node.name)
        except ValueError:
            raise StatementError(f"{what}: bad hexadecimal literal X'{node.name}'", node) from None
    if isinstance(node, exp.Cast) and isinstance(node.to, exp.DataType):
        value = constant(node.this, what)
        dtype = data_type(node.to)
        if dtype.kind is TypeKind.TIMESTAMP and not isinstance(node, nodes.TimestampLiteral):
            return impala_timestamp_cast(value, dtype, what, node)
        return coerce(value, dtype, what, node)
    raise StatementError(
        f"{what} must be a constant (a literal such as 10, 'x', DATE '2024-01-31', "
        f"X'0a' or NULL), not {node.sql('kudusql')}",
        node,
    )


def impala_timestamp_cast(value: Any, dtype: DataType, what: str, node: exp.Expr) -> Any:
    """``CAST(value AS TIMESTAMP)`` as Impala's (and ``to_duckdb_sql``'s): NULL for a
    string that does not read as a timestamp and for a timestamp before 1400 (a
    ``TIMESTAMP '...'`` literal keeps its value)."""
    try:
        stamp = coerce(value, dtype, what, node)
    except StatementError:
        if isinstance(value, str):
            return None
        raise
    if isinstance(stamp, datetime.datetime) and stamp.year < 1400:
        return None
    return stamp


_INTEGER_LIKE = (int, Decimal)


def _compatible(value: Any, kind: TypeKind) -> bool:
    if isinstance(value, bool):
        return kind is TypeKind.BOOL
    if kind in (TypeKind.STRING, TypeKind.VARCHAR):
        return isinstance(value, str)
    if kind is TypeKind.BINARY:
        return isinstance(value, bytes | str)
    if kind is TypeKind.BOOL:
        return False
    if kind is TypeKind.DATE:
        return isinstance(value, str) or (
            isinstance(value, datetime.date) and not isinstance(value, datetime.datetime)
        )
    if kind is TypeKind.TIMESTAMP:
        return isinstance(value, str | datetime.date)
    if kind in (TypeKind.FLOAT, TypeKind.DOUBLE, TypeKind.DECIMAL):
        return isinstance(value, int | float | Decimal)
    return isinstance(value, _INTEGER_LIKE)  # the integer kinds


def coerce(value: Any, dtype: DataType, what: str, node: exp.Expr | None = None) -> Any:
    """``value`` as a Python value of ``dtype``; NULL stays None."""
    if value is None:
        return None
    if not _compatible(value, dtype.kind):
        raise StatementError(f"{what}: {value!r} is not of type {dtype}", node)
    if dtype.kind is TypeKind.DECIMAL and isinstance(value, int | float):
        value = Decimal(str(value))
    is_date = isinstance(value, datetime.date) and not isinstance(value, datetime.datetime)
    if dtype.kind is TypeKind.TIMESTAMP and is_date:
        value = datetime.datetime.combine(value, datetime.time())
    try:
        return dtype.python_value(value)
    except ProgrammingError:
        raise StatementError(f"{what}: {value!r} does not fit type {dtype}", node) from None
