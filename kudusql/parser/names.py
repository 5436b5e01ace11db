"""Names in statements: identifiers and ``[database.]table`` references.

This module owns the folding rule: unquoted identifiers fold to lower case (as in
Impala), quoted identifiers keep their case exactly.
"""

from __future__ import annotations

from sqlglot import exp

from kudusql.parser.literals import PARAMETER_AS_NAME, ParameterPlacementError, StatementError
from kudusql.parser.statements import TableName


def ident(node: exp.Expr) -> str:
    """The name an identifier (or a column or table reference) denotes."""
    _no_parameter(node)
    if isinstance(node, exp.Column | exp.Table) and isinstance(node.this, exp.Identifier):
        node = node.this
    if isinstance(node, exp.Identifier):
        return node.name if node.quoted else node.name.lower()
    if isinstance(node, exp.Var | exp.Literal):
        return node.name.lower()
    raise StatementError(f"expected a name, not {node.sql('kudusql')}", node)


def table_name(node: exp.Expr) -> TableName:
    """``[database.]table`` of a table reference; three-part names are refused."""
    _no_parameter(node)
    if not isinstance(node, exp.Table) or not node.name:
        raise StatementError(f"expected a table name, not {node.sql('kudusql')}", node)
    if node.args.get("catalog"):
        raise StatementError(
            f"table names have at most two parts (database.table): {node.sql('kudusql')}", node
        )
    db = node.args.get("db")
    return TableName(ident(node.this), ident(db) if db else None)


def _no_parameter(node: exp.Expr) -> None:
    """A name is never a parameter: ``?`` there would let a bound value pick a table."""
    parts: list[object] = [node]
    if isinstance(node, exp.Table | exp.Column):
        parts = [node.this, *(node.args.get(k) for k in ("db", "catalog", "table"))]
    for part in parts:
        if isinstance(part, exp.Placeholder):
            raise StatementError(PARAMETER_AS_NAME, part, error_class=ParameterPlacementError)
