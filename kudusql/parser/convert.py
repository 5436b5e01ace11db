"""From SQL text to typed statements: script splitting, parsing with the kudusql dialect,
and the conversion of each syntax tree into a ``statements`` dataclass.

This module owns ``parse_script`` (what ``statements.parse`` runs) and the semantic
checks that need no catalog: one primary key, types Kudu has, constants of the column
type, only STORED AS KUDU, DML shapes Kudu supports. Every error becomes a
ProgrammingError pointing at the offending place (``errors.format_error``).
Unquoted identifiers fold to lower case, as in Impala; quoted ones keep their case.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokenizer_core import Token, TokenType

from kudusql.common.errors import ProgrammingError
from kudusql.parser import nodes
from kudusql.parser import statements as st
from kudusql.parser.ddl_convert import alter_table, create_table
from kudusql.parser.dialect import DIALECT
from kudusql.parser.errors import format_error, programming_error
from kudusql.parser.literals import StatementError, constant, offset_of
from kudusql.parser.names import ident, table_name


def parse_script(sql: str) -> list[st.Statement]:
    """Every statement in ``sql`` (see ``statements.parse``)."""
    try:
        tokens = DIALECT.tokenize(sql)
    except TokenError as e:
        raise programming_error(sql, e) from None
    out: list[st.Statement] = []
    for chunk in _split(tokens):
        text = sql[chunk[0].start : chunk[-1].end + 1]
        try:
            trees = DIALECT.parser().parse(chunk, sql)
        except ParseError as e:
            raise programming_error(sql, e) from None
        for tree in trees:
            if tree is None or isinstance(tree, exp.Semicolon):
                continue
            try:
                out.append(convert(tree, text))
            except StatementError as e:
                at = offset_of(e.node)
                raise e.error_class(
                    format_error(sql, chunk[0].start if at is None else at, e.message, "error")
                ) from None
            except ProgrammingError as e:
                raise ProgrammingError(format_error(sql, chunk[0].start, str(e), "error")) from None
    return out


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
def _insert_parts(t: exp.Insert) -> tuple[st.TableName, tuple[str, ...] | None, exp.Expr]:
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


def _resolve_target(target: exp.Expr, from_tables: list[exp.Table]) -> tuple[st.TableName, str]:
    """The real table and the reference name of a DML target that may be an alias."""
    if not isinstance(target, exp.Table):
        raise StatementError("expected a table as the target", target)
    name = table_name(target)
    if target.alias:
        return name, target.alias_or_name
    if name.database is None:
        for t in from_tables:
            if t.alias and t.alias == target.name:
                return table_name(t), t.alias
    return name, target.name


def _tables_of(node: exp.Expr | None) -> list[exp.Table]:
    if node is None:
        return []
    return [t for t in node.find_all(exp.Table) if t.find_ancestor(exp.Subquery) is None]


def _update(t: exp.Expr, text: str) -> st.Statement:
    assert isinstance(t, exp.Update)
    for arg in ("returning", "order", "limit"):
        if t.args.get(arg):
            raise StatementError(f"UPDATE with {arg.upper()} is not supported", t)
    target = t.this
    if isinstance(target, exp.Table) and target.args.get("joins"):
        raise StatementError("UPDATE t1 JOIN ... is not supported; use UPDATE t1 SET ... FROM", t)
    table, alias = _resolve_target(target, _tables_of(t.args.get("from_")))
    assignments = []
    for eq in t.expressions:
        if not isinstance(eq, exp.EQ) or not isinstance(eq.this, exp.Column):
            raise StatementError("expected column = value in SET", eq)
        col = eq.this
        if col.table and col.table != alias:
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
        return st.Delete(table_name(source), source.alias_or_name, t, text=text)
    table, alias = _resolve_target(targets[0], _tables_of(source))
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
