"""Statements answered without the optimizer or DuckDB, and the cache of their analysis.

This module owns the fast paths for the two statements an application repeats most:

- **Point lookups**: ``SELECT cols | * FROM t WHERE k1 = v1 AND ... AND kn = vn`` where
  the equalities name every primary key column once (values are literals or
  parameters) and nothing else is in the statement (no joins, grouping, ordering,
  limits or time travel). It becomes one ``Table.lookup`` at the latest snapshot: one
  tablet, one rowset probe.
- **INSERT / UPSERT ... VALUES** with parameters: the parsed template's rows get the
  parameter values and go to one batched write (``Session.insert_rows``), with no
  re-parse of the SQL text.

A statement text is analysed once (``StatementCache``, LRU) and each execution only
binds values. Whatever does not fit a shape, or a value whose Python type does not match
its key column exactly, goes down the general path, which gives the same answer.
"""

from __future__ import annotations

import datetime
import decimal
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from sqlglot import exp

from kudusql.common.types import TypeKind
from kudusql.engine.params import statement_placement_error
from kudusql.parser import statements as st
from kudusql.planner.dml import constant_rows
from kudusql.storage.client.system_tables import SYSTEM_DATABASE

if TYPE_CHECKING:
    from kudusql.engine.session import Result, Session

#: Statement texts whose analysis is kept.
CACHE_SIZE = 256
_ALLOWED_SELECT_ARGS = {"expressions", "from_", "where", "kind"}


@dataclass(frozen=True)
class _Value:
    """A literal value, or a parameter: ``index`` for ``?`` (in order), ``name`` for
    ``:name`` / ``$name``."""

    literal: Any = None
    index: int | None = None
    name: str | None = None


@dataclass(frozen=True)
class PointLookup:
    table: st.TableName
    alias: str | None
    #: Output columns: (column name, output name); None for ``*``.
    columns: tuple[tuple[str, str], ...] | None
    #: Key column name -> its value source.
    key: tuple[tuple[str, _Value], ...]
    #: The output schema per (table id, schema version): built once per version.
    _schemas: dict[tuple[int, int], pa.Schema] = field(
        default_factory=dict, compare=False, repr=False, hash=False
    )

    def run(self, session: Session, params: Any) -> Result | None:
        from kudusql.engine.session import Result

        if (self.table.database or session.database) == SYSTEM_DATABASE:
            return None
        table = session.table(self.table)
        schema = table.meta.schema
        key_names = schema.key_names
        given = dict(self.key)
        if set(given) != set(key_names):
            return None
        values = []
        for c in schema.key_columns:
            v = _bind(given[c.name], params)
            if v is _MISSING or not _fits(v, c.type.kind):
                return None
            values.append(v)
        if self.columns is None:
            cols = [(n, n) for n in schema.names]
        else:
            if any(not schema.has_column(c) for c, _ in self.columns):
                return None  # the general path names the unknown column
            cols = list(self.columns)
        names = list(dict.fromkeys(c for c, _ in cols))
        row = table.lookup(values, names)
        key = (table.id, table.meta.schema_version)
        out = self._schemas.get(key)
        if out is None:
            out = pa.schema([schema.column(c).arrow_field().with_name(alias) for c, alias in cols])
            self._schemas.clear()  # one schema version at a time
            self._schemas[key] = out
        rows = [] if row is None else [tuple(row[c] for c, _ in cols)]
        return Result(rows=rows, row_schema=out)


_MISSING = object()


def _bind(v: _Value, params: Any) -> Any:
    if v.index is None and v.name is None:
        return v.literal
    try:
        if v.name is not None:
            return params[v.name] if isinstance(params, Mapping) else _MISSING
        if isinstance(params, Mapping) or params is None:
            return _MISSING
        return params[v.index]
    except (KeyError, IndexError, TypeError):
        return _MISSING


_INTS = {TypeKind.INT8, TypeKind.INT16, TypeKind.INT32, TypeKind.INT64}


def _fits(v: Any, kind: TypeKind) -> bool:
    """The value has exactly the Python type of the key column (else: general path)."""
    if kind in _INTS:
        return isinstance(v, int) and not isinstance(v, bool)
    if kind in (TypeKind.STRING, TypeKind.VARCHAR):
        return isinstance(v, str)
    if kind is TypeKind.BINARY:
        return isinstance(v, bytes)
    if kind is TypeKind.DECIMAL:
        return isinstance(v, decimal.Decimal)
    if kind is TypeKind.TIMESTAMP:
        return isinstance(v, datetime.datetime)
    if kind is TypeKind.DATE:
        return isinstance(v, datetime.date) and not isinstance(v, datetime.datetime)
    return False


def analyse_point_lookup(s: st.Statement) -> PointLookup | None:
    """The point-lookup shape of a statement, or None."""
    if not isinstance(s, st.Query) or not isinstance(s.ast, exp.Select):
        return None
    tree = s.ast
    if any(v for k, v in tree.args.items() if k not in _ALLOWED_SELECT_ARGS):
        return None
    frm = tree.args.get("from_")
    where = tree.args.get("where")
    if frm is None or where is None or not isinstance(frm.this, exp.Table):
        return None
    tref = frm.this
    if any(v for k, v in tref.args.items() if k not in ("this", "db", "alias")):
        return None  # time travel, catalogs, hints, samples
    if not isinstance(tref.this, exp.Identifier):
        return None
    alias = tref.alias or None
    owner = {"", tref.name, *([alias] if alias else [])}
    columns = _columns(tree.expressions, owner)
    if columns is False or columns is True:
        return None
    key: dict[str, _Value] = {}
    counter = [0]
    for cond in _conjuncts(where.this):
        if not isinstance(cond, exp.EQ):
            return None
        col, val = cond.this, cond.expression
        if not isinstance(col, exp.Column):
            col, val = val, col
        if not isinstance(col, exp.Column) or col.table not in owner:
            return None
        source = _value(val, counter)
        if source is None or col.name in key:
            return None
        key[col.name] = source
    db = tref.args.get("db")
    name = st.TableName(tref.name, db.name if db is not None else None)
    cols = None if columns is None else tuple(columns)  # type: ignore[arg-type]
    return PointLookup(name, alias, cols, tuple(key.items()))


def _columns(exprs: Sequence[exp.Expr], owner: set[str]) -> list[tuple[str, str]] | bool | None:
    if len(exprs) == 1 and isinstance(exprs[0], exp.Star):
        return None
    out = []
    for e in exprs:
        inner, alias = (e.this, e.alias) if isinstance(e, exp.Alias) else (e, None)
        if not isinstance(inner, exp.Column) or inner.table not in owner:
            return False
        if isinstance(inner.this, exp.Star):
            return False
        out.append((inner.name, alias or inner.name))
    return out


def _conjuncts(e: exp.Expr) -> list[exp.Expr]:
    if isinstance(e, exp.And):
        return [*_conjuncts(e.this), *_conjuncts(e.expression)]
    if isinstance(e, exp.Paren):
        return _conjuncts(e.this)
    return [e]


def _value(e: exp.Expr, counter: list[int]) -> _Value | None:
    if isinstance(e, exp.Placeholder):
        name = e.this if isinstance(e.this, str) else None
        if name and not name.isdigit():
            return _Value(name=name)
        if name:
            return None  # $1-style: leave to the general binder
        counter[0] += 1
        return _Value(index=counter[0] - 1)
    if isinstance(e, exp.Literal):
        if e.is_string:
            return _Value(literal=e.this)
        try:
            return _Value(literal=int(e.this))
        except ValueError:
            return None
    if isinstance(e, exp.Neg) and isinstance(e.this, exp.Literal) and not e.this.is_string:
        try:
            return _Value(literal=-int(e.this.this))
        except ValueError:
            return None
    return None


class StatementCache:
    """Parsed statement templates (texts with their placeholders) and their fast-path
    analysis, most recently used kept."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self._items: OrderedDict[str, tuple[st.Statement, PointLookup | None] | None] = (
            OrderedDict()
        )
        self._values: dict[int, tuple[st.Statement, list[list[Any]] | None]] = {}

    def get(self, sql: str) -> tuple[st.Statement, PointLookup | None] | None:
        """The single statement of ``sql`` with its lookup shape, or None when ``sql``
        is not one INSERT/UPSERT VALUES or point-lookup statement (also cached)."""
        if sql in self._items:
            self._items.move_to_end(sql)
            return self._items[sql]
        entry = self._analyse(sql)
        self._items[sql] = entry
        if len(self._items) > self.size:
            self._items.popitem(last=False)
        return entry

    def values_rows(self, s: st.Insert | st.Upsert) -> list[list[Any]] | None:
        """``constant_rows`` of a cached INSERT/UPSERT VALUES statement, computed once
        per statement (the cells are immutable values and ``Param`` markers)."""
        got = self._values.get(id(s))
        if got is not None and got[0] is s:
            return got[1]
        src = s.source
        rows = constant_rows(src) if isinstance(src, exp.Values) else None
        if len(self._values) >= self.size:
            self._values.clear()
        self._values[id(s)] = (s, rows)
        return rows

    @staticmethod
    def _analyse(sql: str) -> tuple[st.Statement, PointLookup | None] | None:
        from kudusql.common.errors import Error

        try:
            stmts = st.parse(sql)
        except Error:
            return None  # the general path reports it (after binding)
        if len(stmts) != 1 or statement_placement_error(stmts, sql) is not None:
            return None  # the general path raises it (``params.bind``)
        s = stmts[0]
        if isinstance(s, st.Insert | st.Upsert) and isinstance(s.source, exp.Values):
            return s, None
        lookup = analyse_point_lookup(s)
        return None if lookup is None else (s, lookup)
