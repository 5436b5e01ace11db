"""What reflection learns of a table, read from its SHOW CREATE TABLE.

This module owns ``TableDefinition.parse``: the text SHOW CREATE TABLE prints (which
recreates the table, ``engine/introspect.py``) parsed back with kudusql's own parser into
the columns (type, nullability, default as kudusql SQL, comment, storage attributes), the
key in key order, the partitioning clause as written, the table comment and the table
properties. One statement gives all of it, exactly: a default is a typed value, not
DESCRIBE's unquoted text (where an empty string and no default look alike).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kudusql.common.types import DataType, TypeKind
from kudusql.engine.params import literal_sql
from kudusql.parser import parse_one
from kudusql.parser.statements import CreateTable

#: The hidden key column of a table with a non-unique primary key (Kudu 1.17).
AUTO_INCREMENTING_ID = "auto_incrementing_id"

_DEFAULT_STORAGE = {"AUTO_ENCODING", "DEFAULT_COMPRESSION"}


@dataclass(frozen=True)
class ColumnDefinition:
    name: str
    type: DataType
    nullable: bool
    #: The default as a kudusql SQL literal, or None.
    default: str | None
    comment: str | None
    #: Kudu's storage attributes that differ from the defaults (``encoding``, ...).
    storage: dict[str, Any] = field(default_factory=dict)
    autoincrement: bool = False


@dataclass(frozen=True)
class TableDefinition:
    columns: list[ColumnDefinition]
    key: list[str]
    #: The partitioning clause after ``PARTITION BY``, as SHOW CREATE TABLE writes it.
    partition_by: str | None
    comment: str | None
    properties: dict[str, str]

    @classmethod
    def parse(cls, create_sql: str) -> TableDefinition:
        stmt = parse_one(create_sql)
        if not isinstance(stmt, CreateTable):
            raise TypeError(f"not a CREATE TABLE statement: {create_sql[:40]!r}")
        key = list(stmt.primary_key)
        columns = []
        for c in stmt.columns:
            storage: dict[str, Any] = {}
            if c.encoding and c.encoding not in _DEFAULT_STORAGE:
                storage["encoding"] = c.encoding
            if c.compression and c.compression not in _DEFAULT_STORAGE:
                storage["compression"] = c.compression
            if c.block_size:
                storage["block_size"] = c.block_size
            columns.append(
                ColumnDefinition(
                    name=c.name,
                    type=c.type,
                    nullable=c.nullable is not False and c.name not in key,
                    default=None if c.default is None else literal_sql(c.default),
                    comment=c.comment or None,
                    storage=storage,
                )
            )
        if not stmt.key_unique:
            # Kudu appends the hidden counter to a non-unique key; it makes rows unique.
            hidden = ColumnDefinition(
                AUTO_INCREMENTING_ID,
                DataType(TypeKind.INT64),
                nullable=False,
                default=None,
                comment=None,
                autoincrement=True,
            )
            columns.insert(len(key), hidden)
            key.append(AUTO_INCREMENTING_ID)
        return cls(
            columns=columns,
            key=key,
            partition_by=_partition_clause(create_sql),
            comment=stmt.comment or None,
            properties=dict(stmt.properties),
        )


def _partition_clause(create_sql: str) -> str | None:
    """The text after ``PARTITION BY`` up to the next clause. SHOW CREATE TABLE writes
    string literals with escapes (no raw line breaks), so its clauses are whole lines:
    the column list ends at a line ``)``, and each clause after it starts a line."""
    lines = create_sql.split("\n")
    try:
        start = lines.index(")") + 1
    except ValueError:
        return None
    out: list[str] = []
    for line in lines[start:]:
        if out and (line.startswith("COMMENT ") or line.startswith("STORED AS ")):
            break
        if line.startswith("TBLPROPERTIES"):
            break
        if out or line.startswith("PARTITION BY "):
            out.append(line)
    if not out:
        return None
    return "\n".join(out)[len("PARTITION BY ") :]
