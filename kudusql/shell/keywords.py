"""Owns the shell's word lists: SQL keywords of the kudusql dialect (DuckDB's query
language plus the Impala/Kudu statements of docs/SQL.md), the type names, and the
functions offered before the engine's own function list is known."""

from __future__ import annotations

KEYWORDS: tuple[str, ...] = (
    # statements
    "SELECT", "INSERT", "UPSERT", "UPDATE", "DELETE", "CREATE", "DROP", "ALTER", "SHOW",
    "DESCRIBE", "DESC", "EXPLAIN", "USE", "SET", "COMPUTE", "FLUSH", "COMPACT", "WITH",
    "VALUES",
    # clauses
    "FROM", "WHERE", "GROUP", "BY", "HAVING", "ORDER", "LIMIT", "OFFSET", "QUALIFY",
    "WINDOW", "OVER", "PARTITION", "ROWS", "RANGE", "BETWEEN", "UNBOUNDED", "PRECEDING",
    "FOLLOWING", "CURRENT", "ROW", "JOIN", "INNER", "LEFT", "RIGHT", "FULL", "OUTER",
    "CROSS", "NATURAL", "ON", "USING", "AS", "DISTINCT", "ALL", "UNION", "INTERSECT",
    "EXCEPT", "INTO", "IGNORE", "ASC", "NULLS", "FIRST", "LAST",
    # expressions
    "AND", "OR", "NOT", "IN", "IS", "NULL", "LIKE", "ILIKE", "EXISTS", "CASE", "WHEN",
    "THEN", "ELSE", "END", "CAST", "TRUE", "FALSE", "INTERVAL", "ANY", "SOME",
    # DDL and Kudu
    "TABLE", "TABLES", "DATABASE", "DATABASES", "SCHEMA", "IF", "PRIMARY", "KEY",
    "DEFAULT", "COMMENT", "ENCODING", "COMPRESSION", "BLOCK_SIZE", "HASH", "PARTITIONS",
    "DISTRIBUTE", "BUCKETS", "SPLIT", "VALUE", "STORED", "KUDU", "TBLPROPERTIES", "ADD",
    "COLUMN", "COLUMNS", "CHANGE", "RENAME", "TO", "EXECUTE", "MAINTENANCE", "GC",
    "CASCADE", "RESTRICT", "PURGE", "FORMATTED", "EXTENDED", "STATS", "SETTINGS",
    "FOR", "SYSTEM_TIME", "OF", "TIMESTAMP", "SEED", "UNSET",
)  # fmt: skip

TYPES: tuple[str, ...] = (
    "BOOLEAN", "TINYINT", "SMALLINT", "INT", "INTEGER", "BIGINT", "INT8", "INT16",
    "INT32", "INT64", "FLOAT", "REAL", "DOUBLE", "DECIMAL", "STRING", "TEXT", "VARCHAR",
    "BINARY", "BLOB", "DATE", "TIMESTAMP",
)  # fmt: skip

FUNCTIONS: tuple[str, ...] = (
    "count", "sum", "avg", "min", "max", "abs", "round", "floor", "ceil", "coalesce",
    "nullif", "length", "lower", "upper", "substr", "substring", "trim", "concat",
    "replace", "strftime", "date_trunc", "date_part", "extract", "now", "current_date",
    "row_number", "rank", "dense_rank", "lag", "lead", "first_value", "last_value",
    "string_agg", "list", "range", "generate_series", "table_changes",
)  # fmt: skip
