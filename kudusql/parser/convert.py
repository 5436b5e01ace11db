"""From SQL text to typed statements: script splitting, parsing with the kudusql dialect,
and the conversion of each syntax tree into a ``statements`` dataclass.

This module owns ``parse`` and ``parse_one`` (the parser's entry points) and the semantic
checks that need no catalog: one primary key, types Kudu has, constants of the column
type, only STORED AS KUDU, DML shapes Kudu supports. Every error becomes a
ProgrammingError pointing at the offending place (``errors.format_error``).
Identifiers fold to lower case, quoted or not, as in Impala (``names``). Before
conversion, chains of AND/OR are regrouped into balanced trees (``balance_connectors``)
and a statement's nesting is checked against ``limits.MAX_NESTING``; after it, the
nodes forget their source positions.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokenizer_core import Token, TokenType

from kudusql.common.errors import ProgrammingError
from kudusql.parser import nodes
from kudusql.parser import statements as st
from kudusql.parser.ddl_convert import alter_table, create_table
from kudusql.parser.dialect import DIALECT, KuduParser
from kudusql.parser.errors import format_error, programming_error
from kudusql.parser.limits import NestingError, check_cancelled, check_nesting, headroom
from kudusql.parser.literals import StatementError, constant, offset_of
from kudusql.parser.names import TableName, ident, no_parameter, table_name


def parse(sql: str, *, cancelled: threading.Event | None = None) -> list[st.Statement]:
    """Every statement of the script ``sql`` (split on ``;`` outside strings and
    comments); raises ProgrammingError with line, column and a caret. A statement
    nests at most ``limits.MAX_NESTING`` levels. Setting ``cancelled`` (from another
    thread) stops the parse with OperationalError("statement cancelled")."""
    try:
        tokens = DIALECT.tokenize(sql)
    except TokenError as e:
        raise programming_error(sql, e) from None
    out: list[st.Statement] = []
    for chunk in _split(tokens):
        try:
            depth = check_nesting(chunk)
        except NestingError as e:
            raise ProgrammingError(format_error(sql, e.offset, e.message, "error")) from None
        with headroom(depth):
            out += _parse_chunk(sql, chunk, cancelled)
    return out


def parse_one(sql: str) -> st.Statement:
    """The single statement in ``sql``; ProgrammingError unless there is exactly one."""
    stmts = parse(sql)
    if len(stmts) != 1:
        raise ProgrammingError(f"expected one SQL statement, found {len(stmts)}")
    return stmts[0]


def _parse_chunk(
    sql: str, chunk: list[Token], cancelled: threading.Event | None
) -> list[st.Statement]:
    text = sql[chunk[0].start : chunk[-1].end + 1]
    parser = DIALECT.parser()
    assert isinstance(parser, KuduParser)
    parser.cancelled = cancelled
    try:
        trees = parser.parse(chunk, sql)
    except ParseError as e:
        raise programming_error(sql, e) from None
    connectors = sum(t.token_type in _CONNECTOR_TOKENS for t in chunk)
    out: list[st.Statement] = []
    for tree in trees:
        if tree is None or isinstance(tree, exp.Semicolon):
            continue
        check_cancelled(cancelled)
        if connectors > _BALANCE_FROM:
            balance_connectors(tree)
        try:
            out.append(convert(tree, text))
        except StatementError as e:
            at = offset_of(e.node)
            raise e.error_class(
                format_error(sql, chunk[0].start if at is None else at, e.message, "error")
            ) from None
        except ProgrammingError as e:
            raise ProgrammingError(format_error(sql, chunk[0].start, str(e), "error")) from None
        _forget_positions(tree)
    return out


def _forget_positions(tree: exp.Expr) -> None:
    """Drop the source positions the parser put on the nodes: only conversion errors
    point at the SQL, and every later copy of the tree (planning copies it three times)
    would copy them, a quarter of the copy's time."""
    for node in tree.walk():
        node._meta = None


_CONNECTOR_TOKENS = frozenset({TokenType.AND, TokenType.OR})
#: Chains of fewer ANDs/ORs than this are left as parsed (their depth costs nothing).
_BALANCE_FROM = 16


def balance_connectors(tree: exp.Expr) -> None:
    """Regroup every chain of ANDs (and of ORs) into a balanced tree, in place.

    The parser builds ``a AND b AND c ...`` as a left-deep tree: n predicates are a tree
    n deep, and every walk up or down it (sqlglot's scopes look up each column's
    ancestors) costs n per node, n squared in all, and recursion that deep overflows
    Python's stack. AND and OR are associative (in SQL's three-valued logic too) and SQL
    fixes no evaluation order, so regrouping keeps the meaning; the operands keep their
    order and the SQL printed is the same (``a AND b AND c AND d``), now log2(n) deep."""
    for node in list(tree.walk()):
        if not isinstance(node, exp.And | exp.Or) or type(node.parent) is type(node):
            continue  # not a connector, or inside a chain whose top is handled
        kind = type(node)
        operands: list[exp.Expr] = []
        stack: list[exp.Expr] = [node]
        while stack:
            n = stack.pop()
            if type(n) is kind and not n.comments:
                stack += [n.expression, n.this]
            else:
                operands.append(n)
        if len(operands) <= 2:
            continue
        while len(operands) > 1:
            paired: list[exp.Expr] = [
                kind(this=operands[i], expression=operands[i + 1])
                for i in range(0, len(operands) - 1, 2)
            ]
            if len(operands) % 2:
                paired.append(operands[-1])
            operands = paired
        node.replace(operands[0])


def _split(tokens: Sequence[Token]) -> list[list[Token]]:
    chunks: list[list[Token]] = [[]]
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            chunks.append([])
        else:
            chunks[-1].append(token)
    return [c for c in chunks if c]


def convert(tree: exp.Expr, text: str = "") -> st.Statement:
    """The typed statement of one parsed tree."""
    handler = _CONVERTERS.get(type(tree))
    if handler is not None:
        return handler(tree, text)
    if isinstance(tree, exp.Values):  # a bare VALUES list is SELECT * FROM (VALUES ...)
        tree = exp.Select(expressions=[exp.Star()], from_=exp.From(this=tree))
    if isinstance(tree, exp.Query):
        return st.Query(ast=tree, text=text)
    raise StatementError(f"not a statement: {tree.sql('kudusql')}", tree)


# -- small statements --------------------------------------------------------------------------
def _opt_string(node: exp.Expr | None) -> str | None:
    return None if node is None else node.name


def _create_database(t: exp.Expr, text: str) -> st.Statement:
    return st.CreateDatabase(
        ident(t.this),
        bool(t.args.get("exists")),
        _opt_string(t.args.get("comment")) or "",
        text=text,
    )


def _drop_database(t: exp.Expr, text: str) -> st.Statement:
    exists, cascade = bool(t.args.get("exists")), bool(t.args.get("cascade"))
    return st.DropDatabase(ident(t.this), exists, cascade, text=text)


def _set_option(t: exp.Expr, text: str) -> st.Statement:
    value_node = t.args["expression"]
    value = value_node.name if isinstance(value_node, exp.Var) else constant(value_node, "SET")
    return st.SetOption(ident(t.this), value, text=text)


def _show_settings(t: exp.Expr, text: str) -> st.Statement:
    return st.ShowSettings(ident(t.this) if t.args.get("this") else None, text=text)


def _show_tables(t: exp.Expr, text: str) -> st.Statement:
    db = ident(t.this) if t.args.get("this") else None
    return st.ShowTables(db, _opt_string(t.args.get("like")), text=text)


def _describe(t: exp.Expr, text: str) -> st.Statement:
    return st.Describe(table_name(t.this), t.args.get("style") is not None, text=text)


def _show_partitions(t: exp.Expr, text: str) -> st.Statement:
    return st.ShowPartitions(table_name(t.this), bool(t.args.get("range")), text=text)


def _show_stats(t: exp.Expr, text: str) -> st.Statement:
    if t.args.get("columns"):
        return st.ShowColumnStats(table_name(t.this), text=text)
    return st.ShowTableStats(table_name(t.this), text=text)


def _explain(t: exp.Expr, text: str) -> st.Statement:
    return st.Explain(convert(t.this, ""), text=text)


def _maintain(t: exp.Expr, text: str) -> st.Statement:
    return st.MaintainTable(table_name(t.this), t.text("kind").upper(), text=text)  # type: ignore[arg-type]


# -- DML ------------------------------------------------------------------------------------------
def _insert_parts(t: exp.Insert) -> tuple[TableName, tuple[str, ...] | None, exp.Expr]:
    for arg in (
        "overwrite",
        "conflict",
        "returning",
        "by_name",
        "where",
        "partition",
        "alternative",
    ):
        if t.args.get(arg):
            raise StatementError(f"INSERT with {arg.upper().replace('_', ' ')} is not supported", t)
    target = t.this
    columns = None
    if isinstance(target, exp.Schema):
        columns = tuple(ident(c) for c in target.expressions)
        target = target.this
    if not isinstance(target, exp.Table):
        raise StatementError("INSERT needs a table to insert into", t)
    source = t.args.get("expression")
    if t.args.get("default") or source is None:
        raise StatementError("INSERT needs VALUES (...) or a query", t)
    return table_name(target), columns, source


def _insert(t: exp.Expr, text: str) -> st.Statement:
    assert isinstance(t, exp.Insert)
    table, columns, source = _insert_parts(t)
    return st.Insert(table, columns, source, bool(t.args.get("ignore")), ast=t, text=text)


def _upsert(t: exp.Expr, text: str) -> st.Statement:
    table, columns, source = _insert_parts(t.this)
    return st.Upsert(table, columns, source, ast=t, text=text)


def _references(source: exp.Expr) -> list[exp.Expr]:
    """The table references at the top of a FROM clause: the first one and the joined
    ones (subqueries and table functions included, so that an alias names them)."""
    refs = [source]
    refs += [j.this for j in source.args.get("joins") or () if isinstance(j, exp.Join)]
    return refs


def _reference_name(ref: exp.Expr) -> str | None:
    """The name a FROM reference is known by: its alias, else a table's own name."""
    alias = ref.args.get("alias")
    if isinstance(alias, exp.TableAlias) and alias.this is not None:
        return ident(alias.this)
    if isinstance(ref, exp.Table) and isinstance(ref.this, exp.Identifier):
        return ident(ref.this)
    return None


def _bind_target(target: exp.Expr, source: exp.Expr | None, verb: str) -> tuple[TableName, str]:
    """The real table of an UPDATE or DELETE target and the name the query uses for it.

    Without a FROM clause the target is the only table (an alias it carries is its
    name). With one, the target must be the alias of exactly one table of the FROM
    clause, or the name of one table there that has no alias (Impala's rule): the
    statement changes the rows of that reference only, never the whole table through
    an implicit join."""
    no_parameter(target)
    if not isinstance(target, exp.Table) or not isinstance(target.this, exp.Identifier):
        raise StatementError("expected a table as the target", target)
    name = table_name(target)
    if source is None:
        return name, _reference_name(target) or name.name
    shown = str(name)
    if target.alias:
        raise StatementError(
            f"{verb} ... FROM names its target as its FROM clause does: the alias belongs "
            "in the FROM clause",
            target,
        )
    matches: list[exp.Expr] = []
    for ref in _references(source):
        if ref.alias:
            if name.database is None and _reference_name(ref) == name.name:
                matches.append(ref)
        elif isinstance(ref, exp.Table) and isinstance(ref.this, exp.Identifier):
            here = table_name(ref)
            if here == name or (name.database is None and here.name == name.name):
                matches.append(ref)
    if len(matches) > 1:
        raise StatementError(
            f"{verb} ... FROM: {shown!r} names more than one table of its FROM clause; give "
            "them aliases and name the target by its alias",
            target,
        )
    if not matches or not isinstance(matches[0], exp.Table) or matches[0].name == "":
        example = (
            "UPDATE x SET ... FROM t AS x JOIN ..."
            if verb == "UPDATE"
            else "DELETE x FROM t AS x JOIN ..."
        )
        raise StatementError(
            f"{verb} ... FROM: {shown!r} is not a table name or alias of its FROM clause; "
            f"name the table to change as the FROM clause names it ({example})",
            target,
        )
    ref = matches[0]
    assert isinstance(ref, exp.Table)
    return table_name(ref), _reference_name(ref) or name.name


def _update(t: exp.Expr, text: str) -> st.Statement:
    assert isinstance(t, exp.Update)
    for arg in ("returning", "order", "limit"):
        if t.args.get(arg):
            raise StatementError(f"UPDATE with {arg.upper()} is not supported", t)
    target = t.this
    if isinstance(target, exp.Table) and target.args.get("joins"):
        raise StatementError("UPDATE t1 JOIN ... is not supported; use UPDATE t1 SET ... FROM", t)
    from_ = t.args.get("from_")
    table, alias = _bind_target(target, from_.this if from_ is not None else None, "UPDATE")
    assignments = []
    for eq in t.expressions:
        if not isinstance(eq, exp.EQ) or not isinstance(eq.this, exp.Column):
            raise StatementError("expected column = value in SET", eq)
        col = eq.this
        if col.args.get("db") or (col.table and ident(col.args["table"]) != alias):
            raise StatementError(f"SET can only assign columns of {alias!r}", col)
        assignments.append((ident(col.this), eq.expression))
    if not assignments:
        raise StatementError("UPDATE needs SET column = value", t)
    return st.Update(table, alias, tuple(assignments), t, text=text)


def _delete(t: exp.Expr, text: str) -> st.Statement:
    assert isinstance(t, exp.Delete)
    for arg in ("returning", "order", "limit", "using", "cluster"):
        if t.args.get(arg):
            raise StatementError(f"DELETE with {arg.upper()} is not supported", t)
    targets = t.args.get("tables") or []
    source = t.args.get("this") or None
    if len(targets) > 1:
        raise StatementError("DELETE removes rows of one table at a time", targets[1])
    if source is None and targets:
        source = targets[0]
        t.set("this", source.copy())
        t.set("tables", None)
        targets = []
    if source is None:
        raise StatementError("DELETE needs a table", t)
    if not targets:
        if not isinstance(source, exp.Table) or source.args.get("joins"):
            raise StatementError(
                "DELETE with a join names its target: DELETE t1 FROM t1 JOIN ...", t
            )
        table, alias = _bind_target(source, None, "DELETE")
        return st.Delete(table, alias, t, text=text)
    table, alias = _bind_target(targets[0], source, "DELETE")
    return st.Delete(table, alias, t, text=text)


def _simple(cls: type[Any], *, with_table: bool = True) -> Callable[[exp.Expr, str], st.Statement]:
    def make(t: exp.Expr, text: str) -> st.Statement:
        return cls(table_name(t.this), text=text) if with_table else cls(text=text)  # type: ignore[no-any-return]

    return make


_CONVERTERS: dict[type[exp.Expr], Callable[[exp.Expr, str], st.Statement]] = {
    nodes.CreateDatabase: _create_database,
    nodes.DropDatabase: _drop_database,
    nodes.UseDatabase: lambda t, text: st.UseDatabase(ident(t.this), text=text),
    nodes.SetOption: _set_option,
    nodes.ShowSettings: _show_settings,
    nodes.ShowDatabases: lambda t, text: st.ShowDatabases(
        _opt_string(t.args.get("like")), text=text
    ),
    nodes.ShowTables: _show_tables,
    nodes.ShowCreateTable: _simple(st.ShowCreateTable),
    nodes.DescribeTable: _describe,
    nodes.ShowPartitions: _show_partitions,
    nodes.ShowTabletServers: lambda t, text: st.ShowTabletServers(text=text),
    nodes.ShowHashSchema: _simple(st.ShowHashSchema),
    nodes.ShowTableStats: _show_stats,
    nodes.ComputeStats: _simple(st.ComputeStats),
    nodes.ExplainStatement: _explain,
    nodes.MaintainTable: _maintain,
    nodes.KuduCreateTable: lambda t, text: create_table(t, text),
    nodes.KuduDropTable: lambda t, text: st.DropTable(
        table_name(t.this), bool(t.args.get("exists")), bool(t.args.get("purge")), text=text
    ),
    nodes.KuduAlterTable: lambda t, text: alter_table(t, text),
    nodes.Upsert: _upsert,
    exp.Insert: _insert,
    exp.Update: _update,
    exp.Delete: _delete,
}
