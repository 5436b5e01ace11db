"""DML statements bound to their target table: the queries DuckDB runs to produce rows.

This module owns how INSERT, UPSERT, UPDATE and DELETE become a query plus a storage
write. INSERT and UPSERT write the rows of their source (``VALUES`` or a query), columns
matched by position to the column list (or to every column of the table). UPDATE runs
``SELECT <key columns of the target>, <new values> FROM <target | its FROM clause>
WHERE ...`` and writes the rows as updates by key; DELETE runs ``SELECT DISTINCT <key
columns> ...`` and deletes those keys. A FROM clause always names the target (the
parser binds the target to one of its references), so the target is never joined in a
second time. Constant ``VALUES`` lists skip DuckDB altogether (``constant_rows``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from kudusql.common.errors import Error, ProgrammingError
from kudusql.common.schema import Schema
from kudusql.parser.literals import constant
from kudusql.parser.names import column_of
from kudusql.parser.statements import Delete, Update


@dataclass(frozen=True)
class Param:
    """A parameter in a constant VALUES row: its position (qmark) or name."""

    key: int | str


def target_columns(
    schema: Schema, columns: Sequence[str] | None, table: str, verb: str = "INSERT"
) -> list[str]:
    """The stored names of the columns an INSERT or UPSERT (``verb``) writes: the list
    given (matched ignoring case; each at most once, every declared key column among
    them, as Impala checks) or all columns but a non-unique key's hidden
    ``auto_incrementing_id``, whose values the tablets assign (naming it is an error, as
    in Impala)."""
    if columns is None:
        return [c.name for c in schema.columns if not c.auto_incrementing]
    out: list[str] = []
    for c in columns:
        stored = column_of(schema, c, table)
        if stored in out:
            raise ProgrammingError(
                f"column {c!r} is given twice (Duplicate column '{c}' in column permutation)"
            )
        if schema.column(stored).auto_incrementing:
            raise ProgrammingError(
                f"Auto-Incrementing column {stored!r} should not be specified for INSERT "
                f"operation (the tablets of {table!r} assign its values)"
            )
        out.append(stored)
    missing = [k for k in schema.declared_key_names if k not in out]
    if missing:
        raise ProgrammingError(
            f"All primary key columns must be specified for {verb}ing into Kudu tables. "
            f"Missing columns are: {', '.join(missing)}"
        )
    return out


def constant_rows(values: exp.Values) -> list[list[Any]] | None:
    """The cells of a VALUES list of constants and parameters (``Param``), or None when
    some cell needs evaluating."""
    rows: list[list[Any]] = []
    qmark = 0
    for tup in values.expressions:
        cells = tup.expressions if isinstance(tup, exp.Tuple) else [tup]
        row: list[Any] = []
        for cell in cells:
            if isinstance(cell, exp.Placeholder):
                name = cell.this if isinstance(cell.this, str) else ""
                if name and name != "?" and not name.isdigit():
                    row.append(Param(name))
                else:
                    row.append(Param(qmark))
                    qmark += 1
                continue
            if not isinstance(
                cell, exp.Literal | exp.Null | exp.Boolean | exp.Neg | exp.HexString | exp.Cast
            ):
                return None
            try:
                row.append(constant(cell, "value"))
            except Error:
                return None
        rows.append(row)
    return rows


def _key_selects(schema: Schema, alias: str) -> list[exp.Expr]:
    return [
        exp.alias_(exp.column(k, table=alias, quoted=True), k, quoted=True)
        for k in schema.key_names
    ]


def _from_target(ast: exp.Update | exp.Delete) -> tuple[exp.Expr, list[exp.Expr]]:
    """(FROM source, joins) for the SELECT behind UPDATE or DELETE: the statement's FROM
    clause, which names the target (the parser checked it), or else the target alone."""
    if isinstance(ast, exp.Update):
        from_ = ast.args.get("from_")
        source = (from_.this if from_ is not None else ast.this).copy()
    else:
        source = ast.this.copy()  # DELETE's FROM clause, or its target
    joins = list(source.args.get("joins") or [])
    source.set("joins", None)
    return source, joins


def assigned_columns(stmt: Update, schema: Schema, table: str) -> list[str]:
    """The stored names of the columns an UPDATE assigns, in order (checked: existing,
    not a key column, assigned once)."""
    names: list[str] = []
    for col, _ in stmt.assignments:
        stored = column_of(schema, col, table)
        if schema.is_key(stored):
            raise ProgrammingError(
                f"cannot update primary key column {stored!r} of {table!r}: delete the row "
                "and insert it with the new key"
            )
        if stored in names:
            raise ProgrammingError(f"column {stored!r} is assigned twice")
        names.append(stored)
    return names


def update_query(stmt: Update, schema: Schema, table: str) -> exp.Select:
    """``SELECT keys, new values FROM ... WHERE ...`` for an UPDATE; its columns are the
    key columns, then ``assigned_columns``."""
    names = assigned_columns(stmt, schema, table)
    source, joins = _from_target(stmt.ast)
    values = [
        exp.alias_(expr.copy(), col, quoted=True)
        for col, (_, expr) in zip(names, stmt.assignments, strict=True)
    ]
    sel = exp.Select(expressions=[*_key_selects(schema, stmt.alias), *values])
    sel.set("from_", exp.From(this=source))
    if joins:
        sel.set("joins", joins)
    where = stmt.ast.args.get("where")
    if where is not None:
        sel.set("where", where.copy())
    return sel


def delete_query(stmt: Delete, schema: Schema) -> exp.Select:
    """``SELECT DISTINCT keys FROM ... WHERE ...`` for a DELETE."""
    source, joins = _from_target(stmt.ast)
    sel = exp.Select(expressions=_key_selects(schema, stmt.alias), distinct=exp.Distinct())
    sel.set("from_", exp.From(this=source))
    if joins:
        sel.set("joins", joins)
    where = stmt.ast.args.get("where")
    if where is not None:
        sel.set("where", where.copy())
    return sel


def values_query(values: exp.Values, columns: Sequence[str]) -> exp.Select:
    """``SELECT * FROM (VALUES ...) AS v(columns)`` for a VALUES list DuckDB evaluates."""
    v = values.copy()
    v.set(
        "alias",
        exp.TableAlias(
            this=exp.to_identifier("__kudusql_values"),
            columns=[exp.to_identifier(c, quoted=True) for c in columns],
        ),
    )
    sel = exp.Select(expressions=[exp.Star()])
    sel.set("from_", exp.From(this=v))
    return sel
