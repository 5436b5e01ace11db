"""SQL database namespaces mapped onto storage table names.

This module owns the naming rule: a table ``t`` of the database ``db`` is the storage
table ``"db.t"``; a table of the default database ``default`` is the storage table
``"t"`` (no prefix), so tables made through the Python client API appear in SQL as
``default`` tables and SQL tables of the default database keep their plain names.
``default.t`` and ``t`` (with ``default`` current) name the same table.
"""

from __future__ import annotations

from kudusql.common.errors import ProgrammingError
from kudusql.parser.statements import TableName

DEFAULT_DATABASE = "default"


def storage_name(name: TableName, current_database: str) -> str:
    """The storage table name of ``[db.]t`` in a session whose database is
    ``current_database``."""
    db = name.database or current_database
    if "." in name.name:
        raise ProgrammingError(f"table name {name.name!r} may not contain '.'")
    return name.name if db == DEFAULT_DATABASE else f"{db}.{name.name}"


def split_storage_name(name: str) -> tuple[str, str]:
    """``(database, table)`` of a storage table name (the inverse of ``storage_name``)."""
    db, dot, table = name.partition(".")
    return (db, table) if dot else (DEFAULT_DATABASE, name)


def sql_name(name: str) -> str:
    """How SQL writes a storage table: ``t`` for the default database, else ``db.t``."""
    db, table = split_storage_name(name)
    return table if db == DEFAULT_DATABASE else f"{db}.{table}"
