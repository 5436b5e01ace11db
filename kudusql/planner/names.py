"""SQL database namespaces mapped onto storage table names.

This module owns the naming rule: a table ``t`` of the database ``db`` is the storage
table ``"db.t"``; a table of the default database ``default`` is the storage table
``"t"`` (no prefix), so tables made through the Python client API appear in SQL as
``default`` tables and SQL tables of the default database keep their plain names.
``default.t`` and ``t`` (with ``default`` current) name the same table.

SQL names are case-insensitive (``parser.names``): ``find_table`` matches the storage
name a statement means to the stored one equal to it ignoring case, so a table made
outside SQL with capitals in its name is found under any spelling.
"""

from __future__ import annotations

from collections.abc import Iterable

from kudusql.common.errors import ProgrammingError
from kudusql.parser.names import TableName, fold

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


def find_table(stored: Iterable[str], name: str) -> str | None:
    """The stored table ``name`` (a storage name) denotes ignoring case: the one equal to
    it ignoring case, or None; several (made outside SQL) are an error."""
    wanted = fold(name)
    found = [t for t in stored if fold(t) == wanted]
    if len(found) > 1:
        raise ProgrammingError(
            f"table name {sql_name(name)!r} matches several tables "
            f"({', '.join(sql_name(t) for t in found)}); SQL names are case-insensitive"
        )
    return found[0] if found else None
