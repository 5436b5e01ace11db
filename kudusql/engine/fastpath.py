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
- **UPDATE and DELETE by full primary key**: ``UPDATE t SET c1 = v1, ... WHERE k1 = v1
  AND ... AND kn = vn`` and ``DELETE FROM t WHERE <the same>``, every value a literal
  or a parameter and nothing else in the statement. Under ``TableHandle.exclusive`` (as
  the general path) the key is looked up (at the snapshot), and a live row gets one
  write of one row (``Session._write_rows``, the row path the INSERT fast path takes);
  an absent key writes nothing. On a cluster the statement is first one blind
  UPDATE_IGNORE / DELETE_IGNORE of the row at its tablet server (one call, no read, no
  lock in this process); only a row error sends it to the read-then-write.

A statement text is analysed once (``StatementCache``, LRU) and each execution only
binds values. Whatever does not fit a shape, or a value whose Python type does not match
its column exactly (a key's, or an assigned column's), goes down the general path, which
gives the same answer.
"""

from __future__ import annotations

import datetime
import decimal
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa
from sqlglot import exp

from kudusql.common.errors import Error, OperationalError
from kudusql.common.row_operations import WriteOp
from kudusql.common.schema import Schema
from kudusql.common.types import _INT_BOUNDS, DataType, TypeKind
from kudusql.engine.params import statement_placement_error
from kudusql.engine.result import Result
from kudusql.executor.dml import DmlResult
from kudusql.parser import statements as st
from kudusql.parser.convert import parse
from kudusql.parser.names import TableName, fold, ident, table_name
from kudusql.planner.dml import constant_rows
from kudusql.planner.plan import conjuncts
from kudusql.storage.tables.handles import TableHandle
from kudusql.storage.tables.system_tables import SYSTEM_DATABASE

if TYPE_CHECKING:
    from kudusql.engine.session import Session

B = TypeVar("B")

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
class _Binding:
    """A point lookup bound to one schema version: the value source of each key column
    (in key order), the stored columns to read, and the output (stored name, label)
    pairs with their Arrow schema."""

    key: tuple[_Value, ...]
    read: tuple[str, ...]
    columns: tuple[tuple[str, str], ...]
    schema: pa.Schema


@dataclass(frozen=True)
class PointLookup:
    table: TableName
    alias: str | None
    #: Output columns: (folded column name, folded label or None); None for ``*``.
    columns: tuple[tuple[str, str | None], ...] | None
    #: Folded key column name -> its value source.
    key: tuple[tuple[str, _Value], ...]
    #: The number of ``?`` placeholders.
    positional: int = 0
    #: The binding per (table id, schema version), None when the shape does not fit that
    #: schema: built once per version.
    _bindings: dict[tuple[int, int], _Binding | None] = field(
        default_factory=dict, compare=False, repr=False, hash=False
    )

    def _bind_schema(self, schema: Schema) -> _Binding | None:
        """Names matched to the stored ones ignoring case, as the general path does;
        None sends the statement there (it reports unknown and ambiguous names)."""
        folded: dict[str, str] = {}
        for n in schema.names:
            if folded.setdefault(fold(n), n) != n:
                return None  # names equal ignoring case: the general path refuses it
        given = dict(self.key)
        if set(given) != {fold(k) for k in schema.key_names}:
            return None
        key = tuple(given[fold(k)] for k in schema.key_names)
        # Results label columns by folded names, as the general path (``plan_query``).
        if self.columns is None:
            # ``*`` leaves out a non-unique key's hidden auto_incrementing_id (Impala)
            cols = tuple((c.name, fold(c.name)) for c in schema.columns if not c.auto_incrementing)
        else:
            stored = [folded.get(c) for c, _ in self.columns]
            if any(c is None for c in stored):
                return None  # the general path names the unknown column
            cols = tuple(
                (c, label or name)
                for c, (name, label) in zip(stored, self.columns, strict=True)
                if c is not None
            )
        out = pa.schema([schema.column(c).arrow_field().with_name(label) for c, label in cols])
        return _Binding(key, tuple(dict.fromkeys(c for c, _ in cols)), cols, out)

    def run(self, session: Session, params: Any) -> Result | None:
        if (self.table.database or session.database) == SYSTEM_DATABASE:
            return None
        if len(session.relations) and session.relations.get(self.table) is not None:
            return None  # a registered relation: DuckDB reads it
        table = session.table(self.table)
        bound = _bound(self._bindings, table, self._bind_schema)
        if bound is None:
            return None
        if isinstance(params, Sequence) and len(params) != self.positional:
            return None  # the general path names the counts (``params.bind``)
        values = []
        for c, source in zip(table.meta.schema.key_columns, bound.key, strict=True):
            v = _bind(source, params)
            if v is _MISSING or not _fits(v, c.type):
                return None
            values.append(v)
        row = table.lookup(values, list(bound.read))
        rows = [] if row is None else [tuple(row[c] for c, _ in bound.columns)]
        return Result(rows=rows, row_schema=bound.schema)


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


def _fits(v: Any, dtype: DataType) -> bool:
    """The value has exactly the Python type of the key column and is one of its values
    (else: the general path, which compares it as SQL does: a value out of the column's
    range or precision matches no row)."""
    kind = dtype.kind
    if kind in _INTS:
        lo, hi = _INT_BOUNDS[kind]
        return type(v) is int and lo <= v <= hi
    if kind in (TypeKind.STRING, TypeKind.VARCHAR):
        return isinstance(v, str)
    if kind is TypeKind.BINARY:
        return isinstance(v, bytes)
    if kind is TypeKind.DECIMAL:
        if not isinstance(v, decimal.Decimal) or not v.is_finite():
            return False
        assert dtype.precision is not None and dtype.scale is not None
        exponent = v.as_tuple().exponent
        assert isinstance(exponent, int)  # a finite Decimal's
        if exponent < -dtype.scale:
            return False  # more fractional digits than the column holds
        return abs(v) < decimal.Decimal(10) ** (dtype.precision - dtype.scale)
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
    name = table_name(tref)
    alias_node = tref.args.get("alias")
    alias = ident(alias_node.this) if alias_node is not None and alias_node.this else None
    if alias_node is not None and (alias is None or alias_node.args.get("columns")):
        return None
    # A column is qualified by the alias when there is one (the table's own name is
    # then hidden, as in DuckDB), else by the table name.
    owner = {"", alias or name.name}
    columns = _columns(tree.expressions, owner)
    if columns is False or columns is True:
        return None
    counter = [0]
    key = _key_equalities(where, owner, counter)
    if key is None:
        return None
    cols = None if columns is None else tuple(columns)  # type: ignore[arg-type]
    return PointLookup(name, alias, cols, tuple(key.items()), positional=counter[0])


def _key_equalities(
    where: exp.Where, owner: set[str], counter: list[int]
) -> dict[str, _Value] | None:
    """``WHERE c1 = v1 AND ... AND cn = vn`` (either side of each ``=``) as {column:
    value}, each column a plain one of the statement's table (``owner``) named once and
    each value a literal or a parameter (``counter`` numbers the positional ones);
    None for any other WHERE."""
    key: dict[str, _Value] = {}
    for cond in conjuncts(where.this):
        if not isinstance(cond, exp.EQ):
            return None
        col, val = cond.this, cond.expression
        if not isinstance(col, exp.Column):
            col, val = val, col
        if not _owned(col, owner):
            return None
        source = _value(val, counter)
        column = ident(col.this)
        if source is None or column in key:
            return None
        key[column] = source
    return key


def _owned(col: exp.Expr, owner: set[str]) -> bool:
    """``col`` is a plain column of the statement's table: unqualified, or qualified by
    the table's alias (its name when it has none) and nothing more."""
    if not isinstance(col, exp.Column) or not isinstance(col.this, exp.Identifier):
        return False
    if col.args.get("db") or col.args.get("catalog"):
        return False
    table = col.args.get("table")
    return (ident(table) if table is not None else "") in owner


def _columns(
    exprs: Sequence[exp.Expr], owner: set[str]
) -> list[tuple[str, str | None]] | bool | None:
    if len(exprs) == 1 and isinstance(exprs[0], exp.Star):
        return None
    out: list[tuple[str, str | None]] = []
    for e in exprs:
        inner, label = (e.this, e.alias) if isinstance(e, exp.Alias) else (e, None)
        if not _owned(inner, owner):
            return False
        out.append((ident(inner.this), fold(label) if label else None))
    return out


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


@dataclass(frozen=True)
class _WriteBinding:
    """A key write bound to one schema version: the value source and type of each key
    column (in key order) and of each assigned column (in statement order), and the
    stored names of the written columns (the key's, then the assigned ones)."""

    key: tuple[_Value, ...]
    key_types: tuple[DataType, ...]
    assigned: tuple[_Value, ...]
    assigned_types: tuple[DataType, ...]
    columns: tuple[str, ...]


@dataclass(frozen=True)
class KeyWrite:
    """``UPDATE t SET c = v, ... WHERE <full key>`` (``assignments``) or ``DELETE FROM t
    WHERE <full key>`` (``assignments`` None)."""

    table: TableName
    #: Folded key column name -> its value source.
    key: tuple[tuple[str, _Value], ...]
    #: Folded assigned column name -> its value source, in statement order.
    assignments: tuple[tuple[str, _Value], ...] | None
    #: The number of ``?`` placeholders.
    positional: int = 0
    _bindings: dict[tuple[int, int], _WriteBinding | None] = field(
        default_factory=dict, compare=False, repr=False, hash=False
    )

    def _bind_schema(self, schema: Schema) -> _WriteBinding | None:
        """Names matched to the stored ones ignoring case; None for what the general
        path refuses or reports (unknown, ambiguous, key or twice-assigned columns) and
        for a non-unique key (its hidden column makes a declared key match many rows)."""
        if not schema.key_unique:
            return None
        folded: dict[str, str] = {}
        for n in schema.names:
            if folded.setdefault(fold(n), n) != n:
                return None
        given = dict(self.key)
        if set(given) != {fold(k) for k in schema.key_names}:
            return None
        assigned: list[str] = []
        for name, _ in self.assignments or ():
            stored = folded.get(name)
            if stored is None or schema.is_key(stored) or stored in assigned:
                return None
            assigned.append(stored)
        keys = schema.key_columns
        return _WriteBinding(
            key=tuple(given[fold(c.name)] for c in keys),
            key_types=tuple(c.type for c in keys),
            assigned=tuple(v for _, v in self.assignments or ()),
            assigned_types=tuple(schema.column(c).type for c in assigned),
            columns=(*schema.key_names, *assigned),
        )

    def run(self, session: Session, params: Any) -> Result | None:
        if (self.table.database or session.database) == SYSTEM_DATABASE:
            return None
        if session.db.read_only:
            return None  # the general path refuses the write
        if len(session.relations) and session.relations.get(self.table) is not None:
            return None  # the general path refuses a registered name
        if isinstance(params, Sequence) and len(params) != self.positional:
            return None  # the general path names the counts (``params.bind``)
        table = session.table(self.table)
        bound = _bound(self._bindings, table, self._bind_schema)
        if bound is None:
            return None
        row: list[Any] = []
        for source, dtype in zip(bound.key, bound.key_types, strict=True):
            v = _bind(source, params)
            if v is _MISSING or not _fits(v, dtype) or not _encodable(v):
                return None
            row.append(v)
        for source, dtype in zip(bound.assigned, bound.assigned_types, strict=True):
            v = _bind(source, params)
            if v is _MISSING or not _fits_value(v, dtype) or not _encodable(v):
                return None
            row.append(v)
        if self.assignments is None:
            verb, op = "DELETE", WriteOp.DELETE
        else:
            verb, op = "UPDATE", WriteOp.UPDATE
        key = row[: len(bound.key)]
        embedded = session.db.master_address is None
        if not embedded:
            # On a cluster the statement is one blind row operation: the tablet server
            # applies UPDATE_IGNORE / DELETE_IGNORE of the key under its own lock, with no
            # read first and no hold on this process's other writers. A present key is
            # changed (1 row); an absent key is ignored (0 rows), as the general path. A
            # row error applies nothing; the read-then-write below then gives the general
            # path's answer (an absent key: no error; a present one: the error).
            blind = WriteOp.DELETE_IGNORE if op is WriteOp.DELETE else WriteOp.UPDATE_IGNORE
            res = session._write_rows(table, [row], bound.columns, blind, atomic=False)
            if not res.error_count:
                return session._finish(
                    verb, DmlResult(applied=res.applied, timestamp=res.timestamp)
                )
        # As the general path: nothing else writes the table between the read and the
        # write, and an absent key writes nothing (the statement's timestamp: the read's).
        # An embedded table's every write holds the lock ``exclusive`` holds, and its
        # snapshot sees every write made before: there the latest state is the state at
        # the snapshot, and the latest-state probe (one rowset) is the fast read. A
        # cluster table's other clients write on: it is read at the snapshot.
        with table.exclusive() as snap:
            at = None if embedded else snap
            if table.lookup(key, bound.columns[:1], snapshot=at) is None:
                res = DmlResult()
            else:
                res = session._write_rows(table, [row], bound.columns, op)
        return session._finish(verb, res, snap)


def _fits_value(v: Any, dtype: DataType) -> bool:
    """A value to assign has exactly the Python type of its column (``_fits``), or is
    NULL; else the general path, which converts it as SQL does."""
    if v is None:
        return True
    kind = dtype.kind
    if kind is TypeKind.BOOL:
        return type(v) is bool
    if kind is TypeKind.DOUBLE:
        return type(v) is float
    return _fits(v, dtype)


def _encodable(v: Any) -> bool:
    """Not a ``str`` that UTF-8 cannot hold (a lone surrogate): the general path reports
    that one."""
    if not isinstance(v, str) or v.isascii():
        return True
    try:
        v.encode()
    except UnicodeEncodeError:
        return False
    return True


def analyse_key_write(s: st.Statement) -> KeyWrite | None:
    """The UPDATE- or DELETE-by-key shape of a statement, or None."""
    if isinstance(s, st.Update):
        allowed = {"this", "expressions", "where"}
    elif isinstance(s, st.Delete):
        allowed = {"this", "where"}
    else:
        return None
    tree = s.ast
    if any(v for k, v in tree.args.items() if k not in allowed):
        return None  # FROM, joins, ORDER BY, LIMIT, WITH, RETURNING...
    tref, where = tree.this, tree.args.get("where")
    if not isinstance(tref, exp.Table) or not isinstance(where, exp.Where):
        return None
    if any(v for k, v in tref.args.items() if k not in ("this", "db", "alias")):
        return None
    if not isinstance(tref.this, exp.Identifier):
        return None
    alias_node = tref.args.get("alias")
    if alias_node is not None and (not alias_node.this or alias_node.args.get("columns")):
        return None
    counter = [0]
    assignments: dict[str, _Value] | None = None
    if isinstance(s, st.Update):
        assignments = {}
        for a in tree.expressions:
            if not isinstance(a, exp.EQ) or not _owned(a.this, {""}):
                return None
            name = ident(a.this.this)
            source = _set_value(a.expression, counter)
            if source is None or name in assignments:
                return None
            assignments[name] = source
        if not assignments:
            return None
    key = _key_equalities(where, {"", fold(s.alias)}, counter)
    if key is None:
        return None
    sets = None if assignments is None else tuple(assignments.items())
    return KeyWrite(s.table, tuple(key.items()), sets, positional=counter[0])


def _set_value(e: exp.Expr, counter: list[int]) -> _Value | None:
    """An assigned value: what ``_value`` takes, NULL, TRUE or FALSE."""
    if isinstance(e, exp.Null):
        return _Value(literal=None)
    if isinstance(e, exp.Boolean):
        return _Value(literal=bool(e.this))
    return _value(e, counter)


def _bound(
    bindings: dict[tuple[int, int], B | None],
    table: TableHandle,
    bind: Callable[[Schema], B | None],
) -> B | None:
    """A statement's binding to the table's current schema version (``bind`` makes it
    once; one version is kept at a time)."""
    version = (table.meta.id, table.meta.schema_version)
    if version not in bindings:
        bindings.clear()
        bindings[version] = bind(table.meta.schema)
    return bindings[version]


class StatementCache:
    """Parsed statement templates (texts with their placeholders) and their fast-path
    analysis, most recently used kept."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self._items: OrderedDict[str, tuple[st.Statement, PointLookup | KeyWrite | None] | None] = (
            OrderedDict()
        )
        self._values: dict[int, tuple[st.Statement, list[list[Any]] | None]] = {}
        self._last: tuple[str, list[st.Statement]] | None = None

    def get(
        self, sql: str, cancelled: threading.Event | None = None
    ) -> tuple[st.Statement, PointLookup | KeyWrite | None] | None:
        """The single statement of ``sql`` with its lookup shape, or None when ``sql``
        is not one INSERT/UPSERT VALUES or point-lookup statement (also cached).
        ``cancelled`` stops the parse (OperationalError)."""
        if sql in self._items:
            self._items.move_to_end(sql)
            return self._items[sql]
        entry = self._analyse(sql, cancelled)
        self._items[sql] = entry
        if len(self._items) > self.size:
            self._items.popitem(last=False)
        return entry

    def analysed(self, sql: str) -> bool:
        """Whether ``sql``'s analysis is cached (``get`` then parses nothing)."""
        return sql in self._items

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

    def parsed(self, sql: str) -> list[st.Statement] | None:
        """The statements of ``sql`` if the last text ``get`` analysed was ``sql`` and
        is not a fast-path statement (handed over once: a large statement is then
        parsed once, not twice)."""
        last, self._last = self._last, None
        return last[1] if last is not None and last[0] == sql else None

    def _analyse(
        self, sql: str, cancelled: threading.Event | None
    ) -> tuple[st.Statement, PointLookup | KeyWrite | None] | None:
        try:
            stmts = parse(sql, cancelled=cancelled)
        except OperationalError:
            raise  # cancelled
        except Error:
            return None  # the general path reports it (after binding)
        self._last = (sql, stmts)
        if len(stmts) != 1 or statement_placement_error(stmts, sql) is not None:
            return None  # the general path raises a misplaced parameter (``params.bind``)
        s = stmts[0]
        if isinstance(s, st.Insert | st.Upsert) and isinstance(s.source, exp.Values):
            return s, None
        fast: PointLookup | KeyWrite | None = analyse_point_lookup(s) or analyse_key_write(s)
        return None if fast is None else (s, fast)
