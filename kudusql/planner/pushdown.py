"""Turning SQL conditions into storage ``ColumnPredicate``s.

This module owns which conditions are pushed into a scan and how their constants are
typed. A conjunct is pushed when it compares one column of the scanned table with a
constant: ``=``, ``<``, ``<=``, ``>``, ``>=``, ``BETWEEN``, ``IN (constants)``,
``IS [NOT] NULL`` and ``LIKE 'prefix%'``. The constant must convert *exactly* to the
column's type (``int_col > 1.5`` is not pushed; neither is a string for an integer
column), FLOAT and DOUBLE columns push only ``IS [NOT] NULL`` (DuckDB orders NaN above
every number, storage does not), and anything else is left alone. DuckDB evaluates the
whole WHERE clause anyway, so a pushed predicate only has to be *implied* by the query:
it prunes, it never decides.
"""

from __future__ import annotations

import datetime
import decimal
from typing import Any

from sqlglot import exp

from kudusql.common.errors import Error
from kudusql.common.predicates import ColumnPredicate
from kudusql.common.schema import ColumnSchema
from kudusql.common.types import TypeKind
from kudusql.parser.literals import constant
from kudusql.parser.names import fold

_INTEGERS = {TypeKind.INT8, TypeKind.INT16, TypeKind.INT32, TypeKind.INT64}
_FLOATS = {TypeKind.FLOAT, TypeKind.DOUBLE}

_FLIP: dict[type[exp.Expr], type[exp.Expr]] = {
    exp.EQ: exp.EQ,
    exp.LT: exp.GT,
    exp.LTE: exp.GTE,
    exp.GT: exp.LT,
    exp.GTE: exp.LTE,
}

_NO_VALUE = object()


def typed_value(node: exp.Expr, col: ColumnSchema) -> Any:
    """The constant ``node`` as an exact value of ``col``'s type, or ``_NO_VALUE``."""
    try:
        v = constant(node, "predicate")
    except Error:
        return _NO_VALUE
    if v is None:
        return _NO_VALUE
    kind = col.type.kind
    ok = False
    if kind in _INTEGERS:
        ok = isinstance(v, int) and not isinstance(v, bool)
    elif kind is TypeKind.DECIMAL:
        ok = isinstance(v, int | decimal.Decimal) and not isinstance(v, bool)
    elif kind in (TypeKind.STRING, TypeKind.VARCHAR):
        ok = isinstance(v, str)
    elif kind is TypeKind.BINARY:
        ok = isinstance(v, bytes)
    elif kind is TypeKind.BOOL:
        ok = isinstance(v, bool)
    elif kind is TypeKind.DATE:
        ok = isinstance(v, str) or (
            isinstance(v, datetime.date) and not isinstance(v, datetime.datetime)
        )
    elif kind is TypeKind.TIMESTAMP:
        ok = isinstance(v, str | datetime.datetime)
    if not ok:
        return _NO_VALUE
    if kind in (TypeKind.STRING, TypeKind.VARCHAR, TypeKind.BINARY):
        return v
    try:
        out = col.type.python_value(v)
    except Error:
        return _NO_VALUE
    if kind is TypeKind.DECIMAL and decimal.Decimal(str(out)) != decimal.Decimal(v):
        return _NO_VALUE
    if isinstance(v, str) and kind is TypeKind.TIMESTAMP and "+" in v:
        return _NO_VALUE  # a time zone offset: DuckDB converts, Arrow might not
    return out


def _column_of(node: exp.Expr, alias: str, columns: dict[str, ColumnSchema]) -> ColumnSchema | None:
    """The column of table ``alias`` that ``node`` names (``columns`` is keyed by folded
    names: SQL names are case-insensitive), or None."""
    if (
        isinstance(node, exp.Column)
        and node.table == alias
        and isinstance(node.this, exp.Identifier)
    ):
        return columns.get(fold(node.name))
    return None


def to_predicates(
    cond: exp.Expr, alias: str, columns: dict[str, ColumnSchema]
) -> list[ColumnPredicate]:
    """The storage predicates one conjunct ``cond`` implies for the table ``alias``
    (columns qualified by the sqlglot ``qualify`` pass; ``columns`` by folded name), or
    [] when it is not pushable. Predicates name columns by their stored names."""
    if cond.args.get("negate"):
        return []  # NOT LIKE and other negated forms sqlglot marks with a flag
    if isinstance(cond, exp.Paren):
        return to_predicates(cond.this, alias, columns)
    if isinstance(cond, exp.Not):
        inner = cond.this
        if isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null):
            col = _column_of(inner.this, alias, columns)
            if col is not None:
                return [ColumnPredicate.is_not_null(col.name)]
        return []
    if isinstance(cond, exp.Is):
        col = _column_of(cond.this, alias, columns)
        if col is not None and isinstance(cond.expression, exp.Null):
            return [ColumnPredicate.is_null(col.name)]
        return []
    if type(cond) in _FLIP:
        assert isinstance(cond, exp.Binary)
        op: type[exp.Expr] = type(cond)
        left, right = cond.this, cond.expression
        col = _column_of(left, alias, columns)
        if col is None:
            col, right, op = _column_of(right, alias, columns), left, _FLIP[op]
        if col is None or col.type.kind in _FLOATS:
            return []
        v = typed_value(right, col)
        if v is _NO_VALUE:
            return []
        makers: dict[Any, Any] = {
            exp.EQ: ColumnPredicate.eq,
            exp.LT: ColumnPredicate.lt,
            exp.LTE: ColumnPredicate.le,
            exp.GT: ColumnPredicate.gt,
            exp.GTE: ColumnPredicate.ge,
        }
        make = makers[op]
        return [make(col.name, v)]
    if isinstance(cond, exp.Between):
        lo = exp.GTE(this=cond.this.copy(), expression=cond.args["low"].copy())
        hi = exp.LTE(this=cond.this.copy(), expression=cond.args["high"].copy())
        return to_predicates(lo, alias, columns) + to_predicates(hi, alias, columns)
    if isinstance(cond, exp.In):
        col = _column_of(cond.this, alias, columns)
        if col is None or cond.args.get("query") or cond.args.get("unnest"):
            return []
        if col.type.kind in _FLOATS or not cond.expressions:
            return []
        values = []
        for e in cond.expressions:
            if isinstance(e, exp.Null):
                continue  # x IN (.., NULL) is never true through the NULL
            v = typed_value(e, col)
            if v is _NO_VALUE:
                return []
            values.append(v)
        return [ColumnPredicate.in_list(col.name, values)]
    if isinstance(cond, exp.Like):
        col = _column_of(cond.this, alias, columns)
        pattern = cond.expression
        if col is None or not isinstance(pattern, exp.Literal) or not pattern.is_string:
            return []
        if col.type.kind not in (TypeKind.STRING, TypeKind.VARCHAR):
            return []
        text = pattern.name
        body = text[:-1]
        if text.endswith("%") and body and not any(c in body for c in "%_\\"):
            return [ColumnPredicate.prefix(col.name, body)]
    return []
