"""Owns the PEP 249 (DB-API 2.0) interface: ``connect``, ``Connection``, ``Cursor``, the
module globals, type objects and constructors, and the exception tree (re-exported
from ``kudusql.common.errors``). See ``connection.py`` for autocommit semantics.

Usage::

    import kudusql
    with kudusql.connect(":memory:") as conn:
        cur = conn.cursor()
        cur.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v STRING) "
                    "PARTITION BY HASH (id) PARTITIONS 2")
        cur.executemany("INSERT INTO t VALUES (?, ?)", [(1, "a"), (2, "b")])
        cur.execute("SELECT v FROM t WHERE id = ?", (2,))
        cur.fetchall()  # [('b',)]
"""

from kudusql.common.errors import (
    DatabaseError,
    DataError,
    Error,
    IntegrityError,
    InterfaceError,
    InternalError,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
    Warning,
)
from kudusql.dbapi.connection import Connection, Cursor, connect
from kudusql.dbapi.types import (
    BINARY,
    DATETIME,
    NUMBER,
    ROWID,
    STRING,
    Binary,
    Date,
    DateFromTicks,
    Time,
    TimeFromTicks,
    Timestamp,
    TimestampFromTicks,
)

apilevel = "2.0"
#: Threads may share the module and connections (a connection runs one statement at a time).
threadsafety = 2
paramstyle = "qmark"

__all__ = [
    "BINARY",
    "DATETIME",
    "NUMBER",
    "ROWID",
    "STRING",
    "Binary",
    "Connection",
    "Cursor",
    "DataError",
    "DatabaseError",
    "Date",
    "DateFromTicks",
    "Error",
    "IntegrityError",
    "InterfaceError",
    "InternalError",
    "NotSupportedError",
    "OperationalError",
    "ProgrammingError",
    "Time",
    "TimeFromTicks",
    "Timestamp",
    "TimestampFromTicks",
    "Warning",
    "apilevel",
    "connect",
    "paramstyle",
    "threadsafety",
]
