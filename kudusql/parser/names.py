"""Names in statements: identifiers, ``[database.]table`` references (``TableName``), and
how a SQL name meets a stored one.

This module owns kudusql's one identifier rule, Impala's: names are case-insensitive,
quoted or not. ``ident`` folds every identifier a statement writes to lower case, so a
table or column that SQL creates has a lower-case name, as Impala creates Kudu tables.
Kudu itself stores names case-sensitively, so a table made outside SQL (the client API,
Spark) may have capitals: ``find_column`` matches a folded name to the stored name
equal to it ignoring case (an exact match first). Quotes only let a name hold what a
bare word cannot (spaces, reserved words, ...); ``quote`` prints a name so that it
parses back to itself, quoted exactly when it must be.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.tokenizer_core import TokenType

from kudusql.common.errors import ProgrammingError
from kudusql.common.schema import Schema
from kudusql.parser.dialect import DIALECT
from kudusql.parser.literals import PARAMETER_AS_NAME, ParameterPlacementError, StatementError


@dataclass(frozen=True)
class TableName:
    """``[database.]name``; ``database`` None means the session's current database."""

    name: str
    database: str | None = None

    def __str__(self) -> str:
        return f"{self.database}.{self.name}" if self.database else self.name


def fold(name: str) -> str:
    """The case-insensitive form of a name (what SQL compares)."""
    return name.lower()


def ident(node: exp.Expr) -> str:
    """The name an identifier (or a column or table reference) denotes, folded."""
    no_parameter(node)
    if isinstance(node, exp.Column | exp.Table) and isinstance(node.this, exp.Identifier):
        node = node.this
    if isinstance(node, exp.Identifier | exp.Var | exp.Literal):
        return fold(node.name)
    raise StatementError(f"expected a name, not {node.sql('kudusql')}", node)


def table_name(node: exp.Expr) -> TableName:
    """``[database.]table`` of a table reference; three-part names are refused."""
    no_parameter(node)
    if not isinstance(node, exp.Table) or not node.name:
        raise StatementError(f"expected a table name, not {node.sql('kudusql')}", node)
    if node.args.get("catalog"):
        raise StatementError(
            f"table names have at most two parts (database.table): {node.sql('kudusql')}", node
        )
    db = node.args.get("db")
    return TableName(ident(node.this), ident(db) if db else None)


def find_column(schema: Schema, name: str) -> str | None:
    """The stored name of column ``name`` (compared ignoring case), or None. An exact
    match wins; otherwise the one column equal ignoring case, and several are an
    error."""
    if schema.has_column(name):
        return name
    wanted = fold(name)
    found = [c for c in schema.names if fold(c) == wanted]
    if len(found) > 1:
        raise ProgrammingError(
            f"column name {name!r} matches several columns ({', '.join(found)}); SQL names "
            "are case-insensitive"
        )
    return found[0] if found else None


def column_of(schema: Schema, name: str, table: str) -> str:
    """``find_column``, with an error naming the table when there is no such column."""
    stored = find_column(schema, name)
    if stored is None:
        raise ProgrammingError(f"table {table!r} has no column {name!r}")
    return stored


def check_case_distinct(schema: Schema, table: str) -> None:
    """Refuse a table (made outside SQL) with two columns whose names differ only in
    case: SQL, case-insensitive, cannot tell them apart."""
    seen: dict[str, str] = {}
    for c in schema.names:
        other = seen.setdefault(fold(c), c)
        if other != c:
            raise ProgrammingError(
                f"table {table!r} has columns {other!r} and {c!r}, whose names differ only "
                "in case; SQL names are case-insensitive, so SQL cannot use this table "
                "(rename one of them through the client API)"
            )


_BARE = re.compile(r"[a-z_][a-z0-9_]*")


def quote(name: str) -> str:
    """``name`` as kudusql SQL writes it: bare when it is a lower-case word that reads as
    a name (not a keyword), else in backticks (inner ````` doubled), as Impala quotes
    names (``"..."`` is a string)."""
    if _BARE.fullmatch(name) and _reads_as_name(name):
        return name
    return "`" + name.replace("`", "``") + "`"


def _reads_as_name(word: str) -> bool:
    if word in _RESERVED:
        return False
    tokens = DIALECT.tokenize(word)
    return len(tokens) == 1 and tokens[0].token_type == TokenType.VAR


_RESERVED = frozenset(w.lower() for w in DIALECT.generator_class.RESERVED_KEYWORDS)


def no_parameter(node: exp.Expr) -> None:
    """A name is never a parameter: ``?`` there would let a bound value pick a table."""
    parts: list[object] = [node]
    if isinstance(node, exp.Table | exp.Column):
        parts = [node.this, *(node.args.get(k) for k in ("db", "catalog", "table"))]
    for part in parts:
        if isinstance(part, exp.Placeholder):
            raise StatementError(PARAMETER_AS_NAME, part, error_class=ParameterPlacementError)
