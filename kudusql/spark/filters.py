"""Spark filters pushed into kudusql scans.

Spark trusts a filter the source accepts: it never evaluates it again. So a filter is
accepted only when storage gives exactly Spark's answer: EqualTo, GreaterThan[OrEqual],
LessThan[OrEqual], In, IsNull, IsNotNull and StringStartsWith on a top-level column,
with a literal that converts to the column's type without changing its value. Filters
on FLOAT and DOUBLE columns other than IS [NOT] NULL stay with Spark (Spark orders NaN
above every number and equal to itself; storage comparisons follow IEEE). Everything
else (Not, Or, EqualNullSafe, EndsWith, Contains, nested fields) stays with Spark too.
"""

from __future__ import annotations

import datetime
import decimal
from typing import Any

from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    StringStartsWith,
)

from kudusql.common.errors import ProgrammingError
from kudusql.common.predicates import ColumnPredicate
from kudusql.common.schema import Schema
from kudusql.common.types import TypeKind
from kudusql.spark.spark_schema import find_column

_COMPARISONS = {
    EqualTo: ColumnPredicate.eq,
    GreaterThan: ColumnPredicate.gt,
    GreaterThanOrEqual: ColumnPredicate.ge,
    LessThan: ColumnPredicate.lt,
    LessThanOrEqual: ColumnPredicate.le,
}


def _exact(schema: Schema, column: str, value: Any) -> Any:
    """``value`` converted to the column's type, or raise ValueError when the
    conversion would change it (a fraction for an integer column, an out-of-range
    number, a timestamp finer than microseconds)."""
    t = schema.column(column).type
    if isinstance(value, bool) != (t.kind is TypeKind.BOOL):
        raise ValueError("boolean mismatch")
    try:
        v = t.python_value(value)
    except (ProgrammingError, TypeError, ValueError, OverflowError) as e:
        raise ValueError(str(e)) from None
    if t.kind is TypeKind.VARCHAR and isinstance(value, str):
        return value  # compare the whole literal (a longer one matches nothing)
    if isinstance(value, (int, float, decimal.Decimal)) and not isinstance(value, bool):
        if v != value:
            raise ValueError("inexact")
    elif isinstance(value, datetime.datetime) and value.tzinfo is not None:
        assert isinstance(v, datetime.datetime)
        back = v.replace(tzinfo=datetime.UTC)
        if back != value:
            raise ValueError("inexact")
    elif isinstance(value, (str, bytes, datetime.date)) and v != value:
        raise ValueError("inexact")
    return v


def to_predicate(f: Filter, schema: Schema) -> ColumnPredicate | None:
    """The storage predicate equal to ``f``, or None when Spark must keep it."""
    attr: tuple[str, ...] = tuple(getattr(f, "attribute", ()))
    if len(attr) != 1:
        return None
    column = find_column(schema, attr[0])
    if column is None:
        return None
    kind = schema.column(column).type.kind
    floating = kind in (TypeKind.FLOAT, TypeKind.DOUBLE)
    try:
        if isinstance(f, IsNull):
            return ColumnPredicate.is_null(column)
        if isinstance(f, IsNotNull):
            return ColumnPredicate.is_not_null(column)
        if floating:
            return None
        if isinstance(f, StringStartsWith):
            if kind not in (TypeKind.STRING, TypeKind.VARCHAR) or not isinstance(f.value, str):
                return None
            return ColumnPredicate.prefix(column, f.value)
        if isinstance(f, In):
            values = [_exact(schema, column, v) for v in f.value if v is not None]
            return ColumnPredicate.in_list(column, values)
        make = _COMPARISONS.get(type(f))
        if make is None:
            return None
        value = getattr(f, "value", None)
        if value is None:
            return None
        return make(column, _exact(schema, column, value))
    except ValueError:
        return None
