"""The databases this process has open, shared by every user of the same directory.

A database directory has one writer process (``storage/fs/lock.py``), and within it a
``Database`` object serves any number of users: DB-API connections (each its own
session, DuckDB connection and cursors, as DuckDB's instance cache gives) and Kudu-style
clients (as kudu-python clients of one cluster share it) of one path share one open
database, so each thread can have its own connection and a client beside them. The
database closes when its last user releases it. Users must ask for the same database
options (a different configuration of an open database is refused, not silently
ignored); read-only opens are kept apart from writable ones.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kudusql.common.errors import ProgrammingError
from kudusql.common.options import TabletOptions
from kudusql.storage.tables import directory
from kudusql.storage.tables.database import Database

_lock = threading.Lock()


@dataclass
class _Open:
    db: Database
    #: The options the first connection gave (what later ones must match, if any).
    given: dict[str, Any]
    users: int = 0


_open: dict[tuple[str, bool], _Open] = {}


def open_database(
    path: str, tablet_options: TabletOptions | dict[str, Any], db_options: dict[str, Any]
) -> tuple[Database, Callable[[], None]]:
    """The open database at ``path`` (opened now if nothing in this process has it) and
    the function that releases this use of it. ``tablet_options`` are the
    ``TabletOptions`` the caller gave (the fields, or the whole value), ``db_options``
    the ``Database`` keywords; nothing given accepts the open database as it is."""
    read_only = bool(db_options.get("read_only", False))
    key = (os.path.realpath(directory.database_path(path)), read_only)
    if isinstance(tablet_options, TabletOptions):
        options = tablet_options
        given: dict[str, Any] = {"options": options, **db_options}
    else:
        options = TabletOptions().with_(**tablet_options)
        given = {"options": options, **db_options} if tablet_options or db_options else {}
    with _lock:
        entry = _open.get(key)
        if entry is not None and entry.db.closed:
            del _open[key]
            entry = None
        if entry is None:
            db = Database(path, options, **db_options)
            entry = _Open(db, given)
            _open[key] = entry
        elif given and given != entry.given:
            raise ProgrammingError(
                f"database {key[0]} is already open in this process with other options; "
                "open it with the same options (or none), or close its other users"
            )
        entry.users += 1
    released = threading.Event()

    def release() -> None:
        if released.is_set():
            return
        released.set()
        with _lock:
            assert entry is not None
            entry.users -= 1
            last = entry.users == 0
            if last and _open.get(key) is entry:
                del _open[key]
        if last:
            entry.db.close()

    return entry.db, release
