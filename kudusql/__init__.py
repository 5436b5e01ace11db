"""kudusql: Kudu's tablet storage design in Python, with a SQL engine on sqlglot and DuckDB.

Layers, bottom up: ``common`` (types, keys, time, predicates, errors), ``storage`` (fs,
cfile, wal, tablet, client), then the SQL layers (parser, planner, executor, engine)
and the user-facing ones (dbapi, shell, spark). See docs/ARCHITECTURE.md.

``kudusql.connect(path, **options)`` opens a database for SQL through PEP 249
(``kudusql.dbapi``; ``":memory:"`` is a temporary directory removed on close). The
DB-API module globals and exceptions are available here too; they load on first use,
so ``import kudusql.client`` stays free of DuckDB.

Logging: every module logs to its own logger under ``kudusql``; nothing is printed
unless the host program configures ``logging`` (background errors included).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# A library's records go where the host program's logging configuration sends them, and
# nowhere if it configured none: without a handler here, Python's last-resort handler
# would print background maintenance warnings and tracebacks on the host's stderr.
# Every module logs to its own logger below "kudusql" (``logging.getLogger(__name__)``).
logging.getLogger("kudusql").addHandler(logging.NullHandler())

if TYPE_CHECKING:
    from kudusql.dbapi import Connection

_DBAPI_NAMES = {
    "apilevel",
    "threadsafety",
    "paramstyle",
    "Connection",
    "Cursor",
    "Error",
    "Warning",
    "InterfaceError",
    "DatabaseError",
    "DataError",
    "OperationalError",
    "IntegrityError",
    "InternalError",
    "ProgrammingError",
    "NotSupportedError",
    "Date",
    "Time",
    "Timestamp",
    "Binary",
    "DateFromTicks",
    "TimeFromTicks",
    "TimestampFromTicks",
    "STRING",
    "BINARY",
    "NUMBER",
    "DATETIME",
    "ROWID",
}


def connect(path: str, **options: Any) -> Connection:
    """Open the database directory ``path`` for SQL (see ``kudusql.dbapi.connect``)."""
    from kudusql.dbapi import connect as _connect

    return _connect(path, **options)


def __getattr__(name: str) -> Any:
    if name in _DBAPI_NAMES:
        import kudusql.dbapi

        return getattr(kudusql.dbapi, name)
    raise AttributeError(f"module 'kudusql' has no attribute {name!r}")
