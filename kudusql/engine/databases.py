"""SQL databases (namespaces): which exist, their comments.

This module owns the registry of databases made by CREATE DATABASE: the file
``sql_databases.meta`` in the database directory (checksummed JSON, replaced
atomically; see ``FORMAT.md`` beside this module). The database ``default`` always
exists, and so does any database that holds a table (a storage table ``db.t``, see
``planner.names``). Tables are not listed here: they live in the storage catalog.
"""

from __future__ import annotations

import os
from typing import Any

from kudusql.common.errors import CorruptionError, OperationalError, ProgrammingError
from kudusql.parser.names import fold
from kudusql.planner.names import DEFAULT_DATABASE, split_storage_name
from kudusql.storage.tables.handles import DatabaseHandle
from kudusql.storage.tables.system_tables import SYSTEM_DATABASE

# DO NOT CHANGE: on-disk.
FILE_NAME = "sql_databases.meta"
MAGIC = b"KSQLDBS1"
VERSION = 1


class DatabaseRegistry:
    def __init__(self, db: DatabaseHandle) -> None:
        self.db = db
        self.path = os.path.join(db.path, FILE_NAME)

    def _load(self) -> dict[str, dict[str, Any]]:
        body = self.db.load_meta_file(FILE_NAME, MAGIC, VERSION, "SQL database registry")
        if body is None:
            return {}
        if not isinstance(body, dict) or not isinstance(body.get("databases"), dict):
            raise CorruptionError(self.path, 0, "unreadable SQL database registry")
        return dict(body["databases"])

    def _save(self, dbs: dict[str, dict[str, Any]]) -> None:
        if self.db.read_only:
            raise OperationalError("the database is open read-only")
        self.db.save_meta_file(FILE_NAME, MAGIC, VERSION, {"databases": dbs})

    def names(self) -> list[str]:
        out = {DEFAULT_DATABASE, *self._load()}
        out.update(split_storage_name(t)[0] for t in self.db.table_names())
        return sorted(out)

    def find(self, name: str) -> str | None:
        """The stored name of database ``name``, compared ignoring case as every SQL name
        is (an exact match first), or None."""
        names = self.names()
        if name in names:
            return name
        return next((n for n in names if fold(n) == fold(name)), None)

    def exists(self, name: str) -> bool:
        return self.find(name) is not None

    def comment(self, name: str) -> str:
        return str(self._load().get(name, {}).get("comment", ""))

    def tables(self, name: str) -> list[str]:
        """Storage names of the tables of database ``name`` (its stored name)."""
        return [t for t in self.db.table_names() if split_storage_name(t)[0] == name]

    def create(self, name: str, *, if_not_exists: bool, comment: str) -> None:
        if "." in name:
            raise ProgrammingError(f"database name {name!r} may not contain '.'")
        if name == SYSTEM_DATABASE:
            raise ProgrammingError(f"the database name {name!r} is reserved for system tables")
        if self.exists(name):
            if if_not_exists:
                return
            raise ProgrammingError(f"database {name!r} already exists")
        dbs = self._load()
        dbs[name] = {"comment": comment}
        self._save(dbs)

    def drop(self, name: str, *, if_exists: bool, cascade: bool) -> None:
        if name == DEFAULT_DATABASE:
            raise ProgrammingError("the default database cannot be dropped")
        stored = self.find(name)
        if stored is None:
            if if_exists:
                return
            raise ProgrammingError(f"database {name!r} does not exist")
        name = stored
        tables = self.tables(name)
        if tables and not cascade:
            raise ProgrammingError(
                f"database {name!r} is not empty ({len(tables)} table(s)): drop them or use "
                "DROP DATABASE ... CASCADE"
            )
        for t in tables:
            self.db.drop_table(t, if_exists=True)
        dbs = self._load()
        if dbs.pop(name, None) is not None:
            self._save(dbs)
