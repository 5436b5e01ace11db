"""Query plans: each table reference of a query bound to a storage scan.

This module owns ``plan_query``. It walks a query tree, resolves every table reference
to a storage table (CTE names are left to DuckDB), renames each reference to a unique
name the executor registers its scan under (keeping the original name as the alias, so
``t.col`` still resolves), and records what the scan needs:

- the columns the query reads from it, found after sqlglot's ``qualify`` pass (which
  expands ``*`` and qualifies every column) and matched to the stored names ignoring
  case (every identifier of the planned tree is folded, ``parser.names``), and
- the conjunctive predicates it can push (``pushdown.to_predicates``), found by a walk
  over sqlglot's scopes: the conjuncts of a scope's WHERE that touch one table that no
  outer join makes nullable, the conjuncts of inner-join ON clauses, and the conjuncts
  of a LEFT JOIN's ON that touch only the joined table.

A table with a non-unique primary key has a hidden ``auto_incrementing_id`` column:
``*`` leaves it out, naming it selects it (Impala). A scan reads it only when the
query names it; then every ``*`` over that table gets ``EXCLUDE`` for it.

A name registered on the session (``Relation``: a Python-side Arrow table, see
``Connection.register``) is not a storage table: its references are renamed to the name
DuckDB holds it under and DuckDB reads it itself (``RelationScan``), before any storage
table of the same name is looked up; only an unqualified name can mean one.

Time travel (``exp.Version``) and ``table_changes(...)`` stay as unevaluated
expressions; the executor turns them into snapshots. When ``qualify`` cannot analyse a
query, every scan reads all columns with no predicates: pushdown only prunes, DuckDB
evaluates the query as written, so a plan never changes a result.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import traverse_scope

from kudusql.common.errors import ProgrammingError
from kudusql.common.predicates import ColumnPredicate
from kudusql.common.schema import Schema
from kudusql.common.types import TypeKind
from kudusql.parser import nodes
from kudusql.parser.limits import check_cancelled
from kudusql.parser.names import TableName, check_case_distinct, fold, table_name
from kudusql.planner.pushdown import to_predicates

T = TypeVar("T")

SCAN_PREFIX = "__kudusql_scan_"
CHANGES_PREFIX = "__kudusql_changes_"
RELATION_PREFIX = "__kudusql_registered_"

#: Resolves a SQL table name to (storage table name, schema); ProgrammingError if unknown.
Resolver = Callable[[TableName], tuple[str, Schema]]


@dataclass(frozen=True)
class Relation:
    """A relation registered on a session: DuckDB holds it as ``ref``; ``name`` is the
    name it was registered under; ``columns`` are its (folded) column names with their
    DuckDB types."""

    ref: str
    name: str
    columns: tuple[tuple[str, str], ...]


#: The relation an unqualified table name denotes on the session, or None.
Relations = Callable[[TableName], Relation | None]


@dataclass
class TableScan:
    """One table reference: read ``columns`` (stored names) of ``table`` with
    ``predicates`` (all implied by the query) at the statement snapshot, or at ``as_of``
    if given. The query knows the columns by their folded names."""

    ref: str
    table: str
    schema: Schema
    columns: list[str]
    predicates: list[ColumnPredicate] = field(default_factory=list)
    as_of: exp.Expr | None = None
    alias: str = ""


@dataclass
class RelationScan:
    """A reference to a registered relation: DuckDB reads ``relation.ref`` itself."""

    relation: Relation
    alias: str


@dataclass
class ChangesScan:
    """``table_changes('t', start[, end])``: a diff scan of ``table``."""

    ref: str
    table: str
    schema: Schema
    start: exp.Expr
    end: exp.Expr | None


@dataclass
class QueryPlan:
    """The query with table references renamed to scan names, and the scans."""

    tree: exp.Expr
    scans: list[TableScan]
    changes: list[ChangesScan]
    relations: list[RelationScan] = field(default_factory=list)
    analysed: bool = True
    #: Per output column, whether it may be NULL: the column's own NOT NULL (or key)
    #: rule for a plain column of a scanned table, True for one an outer join may
    #: leave NULL, None where unknown (computed expressions, subqueries, set
    #: operations); None when the query was not analysed.
    null_ok: tuple[bool | None, ...] | None = None

    def display_name(self, ref: str) -> str:
        for s in self.scans:
            if s.ref == ref:
                return s.alias or s.table
        for c in self.changes:
            if c.ref == ref:
                return f"table_changes({c.table!r})"
        for r in self.relations:
            if r.relation.ref == ref:
                return r.alias or r.relation.name
        return ref


_DUCK_TYPES = {
    TypeKind.BOOL: "BOOLEAN",
    TypeKind.INT8: "TINYINT",
    TypeKind.INT16: "SMALLINT",
    TypeKind.INT32: "INTEGER",
    TypeKind.INT64: "BIGINT",
    TypeKind.FLOAT: "FLOAT",
    TypeKind.DOUBLE: "DOUBLE",
    TypeKind.STRING: "VARCHAR",
    TypeKind.VARCHAR: "VARCHAR",
    TypeKind.BINARY: "BLOB",
    TypeKind.DATE: "DATE",
    TypeKind.TIMESTAMP: "TIMESTAMP",
}


def duckdb_type(schema: Schema, name: str) -> str:
    t = schema.column(name).type
    if t.kind is TypeKind.DECIMAL:
        return f"DECIMAL({t.precision}, {t.scale})"
    return _DUCK_TYPES[t.kind]


def _cte_names(tree: exp.Expr) -> set[str]:
    return {str(c.alias_or_name).lower() for c in tree.find_all(exp.CTE)}


def _ident(name: str) -> exp.Identifier:
    return exp.Identifier(this=name, quoted=True)


def _sql_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _checked(items: Iterable[T], cancelled: threading.Event | None) -> Iterator[T]:
    """``items``, checking ``cancelled`` every 1024 of them (``Session.interrupt``)."""
    for i, item in enumerate(items):
        if not i & 1023:
            check_cancelled(cancelled)
        yield item


def plan_query(
    tree: exp.Expr,
    resolve: Resolver,
    *,
    relations: Relations | None = None,
    cancelled: threading.Event | None = None,
    current_database: str | None = None,
) -> QueryPlan:
    """Bind every table reference of ``tree`` (a copy is planned; see the module
    docstring): to a registered relation (``relations``) first, else to a storage table
    (``resolve``). ``current_database()`` becomes ``current_database`` (the session's
    database, as Impala answers; DuckDB would name its own catalog). Setting
    ``cancelled`` stops the planning with OperationalError ("statement cancelled");
    every step is linear in the size of the tree."""
    check_cancelled(cancelled)
    tree = tree.copy()
    if current_database is not None:
        for node in list(tree.find_all(exp.CurrentDatabase)):
            node.replace(exp.Literal.string(current_database))
    for ident_node in _checked(tree.find_all(exp.Identifier), cancelled):
        # SQL names are case-insensitive; DuckDB folds only ASCII letters, so every name
        # reaches it folded already, as do the columns of the scans (``TableScan``).
        ident_node.set("this", fold(ident_node.this))
    ctes = _cte_names(tree)
    _drop_database_qualifiers(tree, ctes, resolve)
    scans: list[TableScan] = []
    changes: list[ChangesScan] = []
    rels: list[RelationScan] = []
    for t in list(_checked(tree.find_all(exp.Table), cancelled)):
        if isinstance(t.this, nodes.TableChanges):
            changes.append(_bind_changes(t, len(changes), resolve))
            continue
        if not isinstance(t.this, exp.Identifier) or not t.name:
            continue  # a table function DuckDB provides (range, read_parquet, ...)
        if not t.args.get("db") and t.name.lower() in ctes:
            continue
        name = table_name(t)
        rel = relations(name) if relations is not None else None
        if rel is not None:
            rels.append(_bind_relation(t, rel))
            continue
        storage, schema = resolve(name)
        check_case_distinct(schema, storage)
        ref = f"{SCAN_PREFIX}{len(scans)}"
        alias = t.alias
        version = t.args.get("version")
        if not alias:
            t.set("alias", exp.TableAlias(this=t.this.copy()))
        alias_name = t.alias
        t.set("this", _ident(ref))
        t.set("db", None)
        t.set("catalog", None)
        t.set("version", None)
        scans.append(
            TableScan(
                ref,
                storage,
                schema,
                list(schema.names),
                as_of=version.expression if version is not None else None,
                alias=alias_name,
            )
        )
    plan = QueryPlan(tree, scans, changes, rels)
    if scans:
        plan.analysed = _analyse(plan, cancelled)
        _hide_auto_incrementing(plan)
    return plan


def _drop_database_qualifiers(tree: exp.Expr, ctes: set[str], resolve: Resolver) -> None:
    """``db.t.col`` names the column of the table reference ``db.t`` (Impala's rule; what
    SQLAlchemy writes for a table with a schema). A reference without an alias is known
    by its table name, so such a column becomes ``t.col`` when a reference without an
    alias names the same table; any other three-part column is left for DuckDB to refuse."""
    qualified = [c for c in tree.find_all(exp.Column) if c.args.get("db") and c.table]
    if not qualified:
        return
    unaliased: set[str] = set()
    for t in tree.find_all(exp.Table):
        if not isinstance(t.this, exp.Identifier) or not t.name or t.alias:
            continue
        if not t.args.get("db") and t.name.lower() in ctes:
            continue
        with contextlib.suppress(ProgrammingError):
            unaliased.add(resolve(table_name(t))[0])
    for col in qualified:
        if col.args.get("catalog"):
            continue
        name = TableName(fold(col.table), fold(col.args["db"].name))
        try:
            storage = resolve(name)[0]
        except ProgrammingError:
            continue
        if storage in unaliased:
            col.set("db", None)


def _hide_auto_incrementing(plan: QueryPlan) -> None:
    """Keep a non-unique key's hidden column out of ``*`` (see the module docstring)."""
    hidden = {
        s.ref: c.name
        for s in plan.scans
        for c in s.schema.columns
        if c.auto_incrementing and c.name in s.columns
    }
    if not hidden:
        return
    named = {c.name for c in plan.tree.find_all(exp.Column)}
    for s in plan.scans:
        name = hidden.get(s.ref)
        if name is not None and fold(name) not in named and plan.analysed:
            s.columns.remove(name)  # only ``*`` asked for it
            del hidden[s.ref]
    if not hidden:
        return
    alias_of = {s.ref: s.alias or s.ref for s in plan.scans}
    for sel in list(plan.tree.find_all(exp.Select)):
        sources = [sel.args.get("from_"), *(sel.args.get("joins") or [])]
        here = {}  # alias -> hidden column, for this SELECT's own scan sources
        for src in sources:
            t = src.this if src is not None else None
            if isinstance(t, exp.Table) and t.name in hidden:
                here[t.alias_or_name or alias_of[t.name]] = hidden[t.name]
        if not here:
            continue
        for e in sel.expressions:
            if isinstance(e, exp.Star):
                cols = [exp.column(c, table=a, quoted=True) for a, c in here.items()]
                e.set("except_", [*(e.args.get("except_") or []), *cols])
            elif isinstance(e, exp.Column) and isinstance(e.this, exp.Star):
                col = here.get(e.table)
                if col is not None:
                    star = e.this
                    excl = exp.column(col, quoted=True)
                    star.set("except_", [*(star.args.get("except_") or []), excl])


def _bind_relation(t: exp.Table, rel: Relation) -> RelationScan:
    """The reference ``t`` renamed to the DuckDB name of ``rel`` (keeping its name as the
    alias, so ``df.col`` still resolves)."""
    if t.args.get("version") is not None:
        raise ProgrammingError(
            f"{rel.name!r} is an object registered on this connection: it has no history "
            "to read AS OF (only Kudu tables do)"
        )
    if not t.alias:
        t.set("alias", exp.TableAlias(this=t.this.copy()))
    t.set("this", _ident(rel.ref))
    return RelationScan(rel, t.alias)


def _bind_changes(t: exp.Table, i: int, resolve: Resolver) -> ChangesScan:
    call = t.this
    arg = call.this
    if not isinstance(arg, exp.Literal) or not arg.is_string:
        raise ProgrammingError(
            "table_changes needs the table name as a string: table_changes('t', from, to)"
        )
    parts = arg.name.split(".")
    if len(parts) > 2 or not all(parts):
        raise ProgrammingError(f"table_changes: bad table name {arg.name!r}")
    name = TableName(fold(parts[-1]), fold(parts[0]) if len(parts) == 2 else None)
    storage, schema = resolve(name)
    check_case_distinct(schema, storage)
    ref = f"{CHANGES_PREFIX}{i}"
    if not t.alias:
        t.set("alias", exp.TableAlias(this=exp.Identifier(this="table_changes")))
    t.set("this", _ident(ref))
    return ChangesScan(ref, storage, schema, call.args["start"], call.args.get("end"))


def _analyse(plan: QueryPlan, cancelled: threading.Event | None) -> bool:
    """Fill each scan's columns and predicates; False (and full scans) on failure."""
    by_ref = {s.ref: s for s in plan.scans}
    # sqlglot reads each column name of the mapping as SQL: quoted, any name is itself.
    mapping: dict[str, Any] = {
        s.ref: {_sql_ident(c): duckdb_type(s.schema, c) for c in s.schema.names} for s in plan.scans
    }
    for c in plan.changes:
        cols = {_sql_ident(n): duckdb_type(c.schema, n) for n in c.schema.names}
        cols.update(change_type="VARCHAR", is_deleted="BOOLEAN")
        mapping[c.ref] = cols
    for r in plan.relations:
        mapping[r.relation.ref] = {_sql_ident(n): t for n, t in r.relation.columns}
    check_cancelled(cancelled)
    tree = plan.tree.copy()
    for ex in _checked(tree.find_all(exp.Exists), cancelled):
        # EXISTS (SELECT * ...) reads no column of its SELECT list: only what its WHERE
        # and joins use (TPC-H Q4 and Q21 read all 16 lineitem columns otherwise).
        if isinstance(ex.this, exp.Select):
            ex.this.set("expressions", [exp.Literal.number(1)])
    try:
        q = qualify(
            tree,
            schema=mapping,
            dialect="duckdb",
            quote_identifiers=False,
            identify=False,
            validate_qualify_columns=False,
        )
        scopes = traverse_scope(q)
    except (SqlglotError, RecursionError, KeyError, ValueError):
        return False
    check_cancelled(cancelled)
    for star in _checked(q.find_all(exp.Star), cancelled):
        if not isinstance(star.parent, exp.Count):
            return False  # an unexpanded *: keep every column
    used: dict[str, set[str]] = {ref: set() for ref in by_ref}
    preds: dict[str, list[ColumnPredicate]] = {ref: [] for ref in by_ref}
    aliases: dict[str, set[str]] = {ref: set() for ref in by_ref}
    for t in _checked(q.find_all(exp.Table), cancelled):
        if t.name in by_ref:
            aliases[t.name].add(t.alias_or_name)
    # qualify folds every name (DuckDB's names are case-insensitive); stored names may
    # have capitals (tables made outside SQL), so columns are matched by folded name.
    folded = {ref: {fold(c): c for c in s.schema.names} for ref, s in by_ref.items()}
    for col in _checked(q.find_all(exp.Column), cancelled):
        for ref, names in aliases.items():
            stored = folded[ref].get(fold(col.name))
            if col.table in names and stored is not None:
                used[ref].add(stored)
    for scope in scopes:
        _scope_predicates(scope, by_ref, preds, cancelled)
    for ref, scan in by_ref.items():
        wanted = [c for c in scan.schema.names if c in used[ref]]
        scan.columns = wanted  # none (COUNT(*)): the scan returns row counts only
        scan.predicates = preds[ref]
    plan.null_ok = _output_null_ok(q, by_ref, folded)
    return True


def _output_null_ok(
    q: exp.Expr, by_ref: dict[str, TableScan], folded: dict[str, dict[str, str]]
) -> tuple[bool | None, ...] | None:
    """``QueryPlan.null_ok`` of the qualified query ``q``."""
    if not isinstance(q, exp.Select):
        return None
    out: list[bool | None] = [None] * len(q.expressions)
    group = q.args.get("group")
    if group is not None and (
        any(group.args.get(k) for k in ("rollup", "cube", "grouping_sets"))
        or group.find(exp.Rollup, exp.Cube, exp.GroupingSets) is not None
    ):
        return tuple(out)  # super-aggregate rows hold NULL in grouped columns
    from_ = q.args.get("from_")
    joins = q.args.get("joins") or []
    refs = [from_.this if from_ is not None else None, *(j.this for j in joins)]
    sources: dict[str, str] = {}  # alias -> scan ref
    for t in refs:
        if isinstance(t, exp.Table) and t.name in by_ref:
            sources[t.alias_or_name] = t.name
    # The aliases an outer join may fill with NULL: the joined side of a LEFT join,
    # everything before a RIGHT join, both sides of a FULL one.
    padded: set[str] = set()
    for i, j in enumerate(joins, start=1):
        before = {r.alias_or_name for r in refs[:i] if r is not None}
        if j.side in ("RIGHT", "FULL"):
            padded |= before
        if j.side in ("LEFT", "FULL"):
            padded.add(j.this.alias_or_name)
    for i, e in enumerate(q.expressions):
        inner = e.this if isinstance(e, exp.Alias) else e
        if not isinstance(inner, exp.Column) or inner.table not in sources:
            continue
        ref = sources[inner.table]
        stored = folded[ref].get(fold(inner.name))
        if stored is None:
            continue
        out[i] = True if inner.table in padded else by_ref[ref].schema.column(stored).nullable
    return tuple(out)


def conjuncts(e: exp.Expr) -> list[exp.Expr]:
    """The operands of a chain of ANDs (parentheses looked through), in order; a loop,
    not a recursion, since a chain of n ANDs is a tree n deep."""
    out: list[exp.Expr] = []
    stack = [e]
    while stack:
        node = stack.pop()
        if isinstance(node, exp.Paren):
            stack.append(node.this)
        elif isinstance(node, exp.And):
            stack += [node.expression, node.this]
        else:
            out.append(node)
    return out


def _scope_predicates(
    scope: object,
    by_ref: dict[str, TableScan],
    out: dict[str, list[ColumnPredicate]],
    cancelled: threading.Event | None,
) -> None:
    sel = getattr(scope, "expression", None)
    if not isinstance(sel, exp.Select):
        return
    sources: dict[str, str] = {}  # alias -> scan ref, for the scan tables of this scope
    for alias, src in getattr(scope, "selected_sources", {}).items():
        node = src[0] if isinstance(src, tuple) else src
        if isinstance(node, exp.Table) and node.name in by_ref:
            sources[alias] = node.name
    if not sources:
        return
    joins = sel.args.get("joins") or []
    outer = any(j.side in ("RIGHT", "FULL") for j in joins)
    plain = [j for j in joins if not j.side and j.kind in ("", "INNER", "CROSS")]
    preserved: set[str] = set()
    if not outer:
        from_ = sel.args.get("from_")
        if from_ is not None and isinstance(from_.this, exp.Table):
            preserved.add(from_.this.alias_or_name)
        preserved.update(j.this.alias_or_name for j in plain if isinstance(j.this, exp.Table))
    candidates: list[tuple[exp.Expr, set[str]]] = []
    where = sel.args.get("where")
    if where is not None:
        candidates += [(c, preserved) for c in conjuncts(where.this)]
    for j in joins:
        on = j.args.get("on")
        if on is None:
            continue
        if j in plain and not outer:
            candidates += [(c, preserved) for c in conjuncts(on)]
        elif j.side == "LEFT" and not j.kind and isinstance(j.this, exp.Table):
            candidates += [(c, {j.this.alias_or_name}) for c in conjuncts(on)]
    for cond, allowed in _checked(candidates, cancelled):
        if cond.find(exp.Select, exp.Subquery) is not None:
            continue
        tables = {c.table for c in cond.find_all(exp.Column)}
        if len(tables) != 1:
            continue
        (alias,) = tables
        if alias not in allowed or alias not in sources:
            continue
        scan = by_ref[sources[alias]]
        cols = {fold(c.name): c for c in scan.schema.columns}
        out[scan.ref].extend(to_predicates(cond, alias, cols))
