"""How SQLAlchemy constructs are written in kudusql SQL (Impala's dialect on Kudu tables).

This module owns the four compilers of the dialect:

- ``KuduSQLIdentifierPreparer``: names in backticks (Impala's quoting; ``"x"`` is a
  string), quoted exactly where kudusql's own SQL writer quotes them (not a lower-case
  word, or a keyword).
- ``KuduSQLCompiler``: statements. String literals escape backslashes (kudusql reads
  ``\\`` in a string as an escape, as Impala does); ``OFFSET`` may stand without
  ``LIMIT``; ``FOR UPDATE`` is left out (every statement reads one snapshot and there are
  no locks to take); ``UPDATE ... FROM`` names the target in its FROM list (Impala's
  form); a DELETE with criteria on another table is refused with the remedy.
- ``KuduSQLDDLCompiler``: CREATE TABLE for Kudu. A Kudu table needs a primary key,
  its columns leading the table in key order: the key is the table's primary key or,
  for a table without one whose leading columns carry ``index=True`` (how
  ``DataFrame.to_sql`` marks the frame's index), those columns. The key columns are
  written first. Partitioning and the other table options come from the ``kudusql_*``
  dialect keywords (``dialect.py``). Kudu has one index, the primary key: an index or
  unique constraint over key columns is that index (nothing to create), any other
  unique constraint or index is refused, foreign keys are left out (the ORM still joins
  by them).
- ``KuduSQLTypeCompiler``: SQLAlchemy types to Kudu's column types (``Float`` is a
  DOUBLE unless its precision fits a FLOAT, ``String(n)`` a VARCHAR(n), ``String()`` a
  STRING, ``LargeBinary`` a BINARY); a type Kudu has no column for (TIME, CHAR, a
  DECIMAL without precision) is a CompileError naming the one to use.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from sqlalchemy import exc
from sqlalchemy import types as sqltypes
from sqlalchemy.sql import compiler
from sqlalchemy.sql.schema import (
    CheckConstraint,
    Column,
    ForeignKeyConstraint,
    Index,
    PrimaryKeyConstraint,
    Table,
    UniqueConstraint,
)

from kudusql.parser.names import quote

# -- names ----------------------------------------------------------------------------------


class KuduSQLIdentifierPreparer(compiler.IdentifierPreparer):
    """Backtick quoting (a doubled backtick is one), where ``kudusql.parser.names.quote``
    quotes. kudusql folds every name to lower case, quoted or not: a name with capitals
    is quoted and still names the lower-case table or column."""

    def __init__(
        self,
        dialect: Any,
        initial_quote: str = "`",
        final_quote: str | None = None,
        escape_quote: str = "`",
        quote_case_sensitive_collations: bool = True,
        omit_schema: bool = False,
    ) -> None:
        super().__init__(
            dialect,
            initial_quote,
            final_quote,
            escape_quote,
            quote_case_sensitive_collations,
            omit_schema,
        )

    def _requires_quotes(self, value: str) -> bool:
        return quote(value) != value

    def _requires_quotes_illegal_chars(self, value: str) -> bool:
        return quote(value) != value


# -- statements -----------------------------------------------------------------------------


class KuduSQLCompiler(compiler.SQLCompiler):
    def limit_clause(self, select: Any, **kw: Any) -> str:
        text = ""
        if select._limit_clause is not None:
            text += "\n LIMIT " + self.process(select._limit_clause, **kw)
        if select._offset_clause is not None:
            text += "\n OFFSET " + self.process(select._offset_clause, **kw)
        return text

    def for_update_clause(self, select: Any, **kw: Any) -> str:
        return ""

    def render_literal_value(self, value: Any, type_: sqltypes.TypeEngine[Any]) -> str:
        if isinstance(value, str) and isinstance(type_, sqltypes.String | sqltypes.Enum):
            # Impala's string literal: a backslash starts an escape.
            return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
        if isinstance(value, bytes | bytearray | memoryview):
            return "X'" + bytes(value).hex() + "'"
        return str(super().render_literal_value(value, type_))

    def update_from_clause(
        self,
        update_stmt: Any,
        from_table: Any,
        extra_froms: Any,
        from_hints: Any,
        **kw: Any,
    ) -> str:
        # Impala's UPDATE ... FROM: the target is one of the FROM list's tables.
        kw["asfrom"] = True
        tables = [from_table, *extra_froms]
        return "FROM " + ", ".join(
            t._compiler_dispatch(self, fromhints=from_hints, **kw) for t in tables
        )

    def delete_extra_from_clause(
        self,
        delete_stmt: Any,
        from_table: Any,
        extra_froms: Any,
        from_hints: Any,
        **kw: Any,
    ) -> str:
        raise exc.CompileError(
            "kudusql's DELETE names one table: filter it by the other with "
            "table.c.key.in_(select(...)) instead of a multiple-table WHERE"
        )


# -- DDL ------------------------------------------------------------------------------------

_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_BOOLEANS = {"true": "true", "false": "false", "1": "true", "0": "false"}


def key_columns(table: Table) -> list[Column[Any]]:
    """The Kudu key of ``table``, in key order: its primary key, or else the leading
    columns marked ``index=True`` when no later column is (``DataFrame.to_sql`` marks
    the frame's index columns so, and writes them first). Empty when neither."""
    if len(table.primary_key.columns):
        return list(table.primary_key.columns)
    cols = list(table.columns)
    lead = 0
    while lead < len(cols) and cols[lead].index:
        lead += 1
    if lead and not any(c.index for c in cols[lead:]):
        return cols[:lead]
    return []


class KuduSQLDDLCompiler(compiler.DDLCompiler):
    def visit_create_table(self, create: Any, **kw: Any) -> str:
        table = create.element
        key = key_columns(table)
        if not key:
            raise exc.CompileError(
                f"Kudu tables need a primary key, and table {table.description!r} has none: "
                "mark its key columns with primary_key=True (or add a PrimaryKeyConstraint); "
                "with pandas, make the key the frame's index and keep index=True: "
                "df.set_index(['id']).to_sql(name, engine)"
            )
        # Kudu's key columns lead the table, in key order.
        rest = [c for c in create.columns if c.element not in key]
        lead = sorted(
            (c for c in create.columns if c.element in key),
            key=lambda c: key.index(c.element),
        )
        create = copy.copy(create)
        create.columns = lead + rest
        return str(super().visit_create_table(create, **kw))  # type: ignore[no-untyped-call]

    def create_table_constraints(
        self, table: Table, _include_foreign_key_constraints: Any = None, **kw: Any
    ) -> str:
        text = super().create_table_constraints(  # type: ignore[no-untyped-call]
            table, _include_foreign_key_constraints, **kw
        )
        if len(table.primary_key.columns):
            return str(text)
        key = ", ".join(self.preparer.format_column(c) for c in key_columns(table))
        return f"PRIMARY KEY ({key})" + (", \n\t" + text if text else "")

    def get_column_specification(self, column: Column[Any], **kw: Any) -> str:
        if column.computed is not None:
            raise exc.CompileError("Kudu has no computed columns")
        if column.identity is not None:
            raise exc.CompileError(
                "Kudu has no identity columns: give the key's values in each INSERT"
            )
        type_sql = self.dialect.type_compiler_instance.process(column.type, type_expression=column)
        parts = [self.preparer.format_column(column), type_sql]
        if not column.nullable:
            parts.append("NOT NULL")
        default = self.get_column_default_string(column)
        if default is not None:
            parts.append(f"DEFAULT {default}")
        opts = column.dialect_options["kudusql"]
        if opts["encoding"] is not None:
            parts.append(f"ENCODING {opts['encoding']}")
        if opts["compression"] is not None:
            parts.append(f"COMPRESSION {opts['compression']}")
        if opts["block_size"] is not None:
            parts.append(f"BLOCK_SIZE {int(opts['block_size'])}")
        if column.comment is not None:
            parts.append(f"COMMENT {self._string(column.comment)}")
        return " ".join(parts)

    def get_column_default_string(self, column: Column[Any]) -> str | None:
        # SQLAlchemy writes a plain string server_default as a string literal; Kudu (as
        # Impala) refuses a string default for a number or boolean column, so there the
        # string is written as the number or boolean it spells (server_default="0").
        default = column.server_default
        arg = getattr(default, "arg", None)
        if isinstance(arg, str):
            text = arg.strip()
            if isinstance(column.type, sqltypes.Boolean) and text.lower() in _BOOLEANS:
                return _BOOLEANS[text.lower()]
            if isinstance(column.type, sqltypes.Numeric | sqltypes.Integer) and _NUMBER.fullmatch(
                text
            ):
                return text
        out = super().get_column_default_string(column)
        return None if out is None else str(out)

    def _string(self, value: str) -> str:
        return self.sql_compiler.render_literal_value(value, sqltypes.String())

    def post_create_table(self, table: Table) -> str:
        opts = table.dialect_options["kudusql"]
        out = []
        partition_by = opts["partition_by"]
        if partition_by:
            clause = str(partition_by).strip()
            head = clause[:15].upper()
            if not (head.startswith("PARTITION BY") or head.startswith("DISTRIBUTE BY")):
                clause = "PARTITION BY " + clause
            out.append(clause)
        if table.comment is not None:
            out.append(f"COMMENT {self._string(table.comment)}")
        props = opts["tblproperties"]
        if props:
            kv = ", ".join(
                f"{self._string(str(k))} = {self._string(str(v))}" for k, v in props.items()
            )
            out.append(f"TBLPROPERTIES ({kv})")
        return "".join("\n" + o for o in out)

    def visit_primary_key_constraint(self, constraint: PrimaryKeyConstraint, **kw: Any) -> str:
        # Key order as declared; Kudu's key constraint has no name.
        cols = ", ".join(self.preparer.format_column(c) for c in constraint.columns)
        return f"PRIMARY KEY ({cols})"

    def visit_foreign_key_constraint(self, constraint: ForeignKeyConstraint, **kw: Any) -> Any:
        return None

    def visit_unique_constraint(self, constraint: UniqueConstraint, **kw: Any) -> Any:
        table = constraint.table
        assert isinstance(table, Table)
        self._key_only(table, list(constraint.columns), "unique constraint")
        return None

    def visit_check_constraint(self, constraint: CheckConstraint, **kw: Any) -> str:
        raise exc.CompileError(
            f"Kudu has no CHECK constraints ({constraint.sqltext}): check values before writing"
        )

    def visit_create_index(
        self,
        create: Any,
        include_schema: Any = False,
        include_table_schema: Any = True,
        **kw: Any,
    ) -> str:
        index: Index = create.element
        table = index.table
        assert table is not None
        if index.unique:
            self._key_only(table, list(index.expressions), "unique index")
        # Kudu keeps one index, its primary key: nothing to create (an index over key
        # columns is that index; any other is a hint Kudu has no structure for).
        return ""

    def visit_drop_index(self, drop: Any, **kw: Any) -> str:
        return ""

    def _key_only(self, table: Table, columns: list[Any], what: str) -> None:
        key = key_columns(table)
        if not columns or not all(any(c is k for k in key) for c in columns):
            names = ", ".join(getattr(c, "name", str(c)) for c in columns)
            raise exc.CompileError(
                f"Kudu enforces uniqueness of the primary key only: a {what} on "
                f"{table.description}({names}) cannot be kept; make those columns the key "
                "or drop the constraint"
            )


# -- types ----------------------------------------------------------------------------------


class KuduSQLTypeCompiler(compiler.GenericTypeCompiler):
    def visit_TINYINT(self, type_: Any, **kw: Any) -> str:
        return "TINYINT"

    def visit_STRING(self, type_: Any, **kw: Any) -> str:
        return "STRING"

    def visit_BINARY(self, type_: Any, **kw: Any) -> str:
        return "BINARY"

    def visit_INTEGER(self, type_: Any, **kw: Any) -> str:
        return "INT"

    def visit_float(self, type_: Any, **kw: Any) -> str:
        # A Python float is a double: Float() (and pandas' float64, Float(53)) is DOUBLE.
        p = getattr(type_, "precision", None)
        return "FLOAT" if p is not None and p <= 24 else "DOUBLE"

    def visit_FLOAT(self, type_: Any, **kw: Any) -> str:
        p = getattr(type_, "precision", None)
        return "DOUBLE" if p is not None and p > 24 else "FLOAT"

    def visit_REAL(self, type_: Any, **kw: Any) -> str:
        return "FLOAT"

    def visit_double(self, type_: Any, **kw: Any) -> str:
        return "DOUBLE"

    visit_DOUBLE = visit_double
    visit_DOUBLE_PRECISION = visit_double

    def visit_numeric(self, type_: Any, **kw: Any) -> str:
        if type_.precision is None:
            raise exc.CompileError(
                "a Kudu DECIMAL needs a precision (1..38): use Numeric(precision, scale)"
            )
        return f"DECIMAL({type_.precision},{type_.scale or 0})"

    visit_NUMERIC = visit_numeric
    visit_DECIMAL = visit_numeric

    def visit_string(self, type_: Any, **kw: Any) -> str:
        return f"VARCHAR({type_.length})" if type_.length else "STRING"

    visit_VARCHAR = visit_string
    visit_NVARCHAR = visit_string
    visit_unicode = visit_string

    def visit_text(self, type_: Any, **kw: Any) -> str:
        return "STRING"

    visit_TEXT = visit_text
    visit_CLOB = visit_text
    visit_unicode_text = visit_text

    def visit_CHAR(self, type_: Any, **kw: Any) -> str:
        raise exc.CompileError("Kudu has no CHAR column type: use String(n) (a VARCHAR(n))")

    visit_NCHAR = visit_CHAR

    def visit_large_binary(self, type_: Any, **kw: Any) -> str:
        return "BINARY"

    visit_BLOB = visit_large_binary
    visit_VARBINARY = visit_large_binary

    def visit_datetime(self, type_: Any, **kw: Any) -> str:
        return "TIMESTAMP"

    visit_DATETIME = visit_datetime
    visit_TIMESTAMP = visit_datetime

    def visit_TIME(self, type_: Any, **kw: Any) -> str:
        raise exc.CompileError("Kudu has no TIME column type: use DateTime (TIMESTAMP) or Interval")

    visit_time = visit_TIME

    def visit_uuid(self, type_: Any, **kw: Any) -> str:
        return "STRING"


__all__ = [
    "KuduSQLCompiler",
    "KuduSQLDDLCompiler",
    "KuduSQLIdentifierPreparer",
    "KuduSQLTypeCompiler",
    "key_columns",
]
