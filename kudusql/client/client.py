"""``connect()`` and ``Client``: the entry point, Kudu's ``kudu.connect`` /
``kudu.Client`` for an embedded database (a directory instead of master addresses).

A client opens (or wraps) one ``Database``; DDL goes through it (``create_table``,
``delete_table``, ``new_table_alterer``), writes through sessions and tables, reads
through scanners. ``latest_observed_timestamp()`` is the highest HybridTime of any
write or scan this client has seen; a snapshot scan at it sees all of them.
"""

from __future__ import annotations

import threading
from typing import Any

from kudusql.client.alter import TableAlterer
from kudusql.client.partitioning import Partitioning
from kudusql.client.scanner import Scanner, deserialize_into_scanner
from kudusql.client.schema import Schema
from kudusql.client.session import FLUSH_MANUAL, Session
from kudusql.client.table import Table
from kudusql.client.timestamps import HybridTime
from kudusql.common.errors import NotSupportedError, ProgrammingError
from kudusql.common.schema import Schema as CoreSchema
from kudusql.storage.tables.database import Database
from kudusql.storage.tables.table import Table as CoreTable

__all__ = ["Client", "connect"]


class Client:
    """A connection to one database. ``Client(path, **database_options)`` opens (or
    creates) it and closes it in ``close()``; ``Client(database)`` wraps an open
    ``Database`` and leaves closing it to its owner."""

    def __init__(self, database: Database | str, **kw: Any) -> None:
        if isinstance(database, Database):
            if kw:
                raise ProgrammingError("database options apply only when opening by path")
            self._db = database
            self._own = False
        else:
            self._db = Database(str(database), **kw)
            self._own = True
        self._observed = 0
        self._lock = threading.Lock()

    # -- lifecycle ----------------------------------------------------------------------------
    @property
    def database(self) -> Database:
        """The storage database (``kudusql.storage.tables.database.Database``)."""
        return self._db

    @property
    def path(self) -> str:
        return self._db.path

    def close(self) -> None:
        """Close the database if this client opened it."""
        if self._own:
            self._db.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self._db.path!r})"

    # -- time ----------------------------------------------------------------------------------
    def _observe(self, ts: int) -> None:
        with self._lock:
            if ts > self._observed:
                self._observed = ts

    def latest_observed_timestamp(self) -> HybridTime:
        """The highest HybridTime this client has observed (its writes' timestamps and its
        scans' snapshots); 0 before any. ``scanner.set_snapshot()`` of it reads all of
        them."""
        return HybridTime(self._observed)

    # -- tables --------------------------------------------------------------------------------
    def create_table(
        self,
        table_name: str,
        schema: Schema | CoreSchema,
        partitioning: Partitioning | None = None,
        n_replicas: int | None = None,
        *,
        properties: dict[str, str] | None = None,
        if_not_exists: bool = False,
    ) -> Table:
        """Create a table (``schema`` from ``kudu.schema_builder()``); without
        ``partitioning`` it has one tablet. Returns the new table."""
        if n_replicas not in (None, 0, 1):
            raise NotSupportedError(
                f"n_replicas={n_replicas}: an embedded database keeps one copy of each tablet"
            )
        core_schema = schema.core if isinstance(schema, Schema) else schema
        if not isinstance(core_schema, CoreSchema):
            raise ProgrammingError(
                f"create_table() takes a Schema (kudu.schema_builder().build()), not "
                f"{type(schema).__name__}"
            )
        if partitioning is not None and not isinstance(partitioning, Partitioning):
            raise ProgrammingError(
                f"partitioning is a Partitioning, not {type(partitioning).__name__}"
            )
        ps = partitioning.to_partition_schema(core_schema) if partitioning is not None else None
        core = self._db.create_table(
            table_name, core_schema, ps, properties=properties, if_not_exists=if_not_exists
        )
        return Table(self, core)

    def delete_table(self, table_name: str) -> None:
        """Drop a table (ProgrammingError if it does not exist)."""
        self._db.drop_table(table_name)

    def table_exists(self, table_name: str) -> bool:
        self._db._check_open()
        return self._db.has_table(table_name)

    def table(self, table_name: str) -> Table:
        """The table called ``table_name`` (ProgrammingError if there is none)."""
        return Table(self, self._db.table(table_name))

    def _table_by_id(self, table_id: int, name: str = "") -> Table:
        try:
            self._db._runtime(table_id)
        except ProgrammingError:
            if not name:
                raise
            raise ProgrammingError(f"table {name!r} was dropped") from None
        return Table(self, CoreTable(self._db, table_id))

    def list_tables(self, match_substring: str | None = None) -> list[str]:
        """The table names (those containing ``match_substring``), sorted."""
        names = self._db.table_names()
        if match_substring is not None:
            names = [n for n in names if match_substring in n]
        return names

    def new_table_alterer(self, table: Table | str) -> TableAlterer:
        """An alterer for ``table`` (a Table or its name)."""
        if isinstance(table, str):
            table = self.table(table)
        if table.client is not self:
            raise ProgrammingError(f"{table!r} belongs to another client")
        return TableAlterer(table)

    # -- sessions and scans ------------------------------------------------------------------
    def new_session(
        self, flush_mode: str | int = FLUSH_MANUAL, timeout_ms: int = 5000, **kwargs: Any
    ) -> Session:
        """A write session: ``flush_mode`` 'manual' (default), 'sync' or 'background';
        keyword options ``mutation_buffer_sz`` (bytes), ``mutation_buffer_watermark``
        (0..1), ``mutation_buffer_flush_interval`` (ms), ``error_buffer_size``."""
        known = {
            "mutation_buffer_sz",
            "mutation_buffer_watermark",
            "mutation_buffer_flush_interval",
            "error_buffer_size",
        }
        unknown = set(kwargs) - known
        if unknown:
            raise ProgrammingError(
                f"unknown session option(s) {', '.join(sorted(unknown))}; known: "
                f"{', '.join(sorted(known))}"
            )
        self._db._check_open()
        return Session(self, flush_mode, timeout_ms, **kwargs)

    def deserialize_token_into_scanner(self, serialized_token: bytes | str) -> Scanner:
        """A scanner of a serialized scan token (planned by any client of this database)."""
        return deserialize_into_scanner(self, serialized_token)


def connect(path: str, **kw: Any) -> Client:
    """Open (creating if needed) the database at ``path``: ``Database`` keyword options
    such as ``options=TabletOptions(...)``, ``read_only=True``, ``create=False``."""
    return Client(path, **kw)
