"""Owns the shell's two reaches into a connection beyond PEP 249: interrupting the
running statement and reading its progress.

``Session.interrupt()`` cancels a statement: DuckDB work (joins, aggregates, sorts,
``range()``) stops at once, storage scans at their next batch and DML before its next
write batch; only a single write batch already under way finishes (in the background,
its result discarded by the shell). Progress is DuckDB's percent done of the running
query (``query_progress()`` on the session's runner connection, read without importing
DuckDB) unless the session offers ``progress()``; while the statement reads its tables,
``Session.scan_progress()`` gives rows read out of rows stored. Every function here is best effort
and never raises."""

from __future__ import annotations

import contextlib
from typing import Any


def _session(conn: Any) -> Any:
    return getattr(conn, "_session", None)


def _duck(conn: Any) -> Any:
    runner = getattr(_session(conn), "runner", None)
    return getattr(runner, "con", None)


def enable_progress(conn: Any) -> None:
    """Ask DuckDB to track query progress (without printing its own bar)."""
    con = _duck(conn)
    if con is None:
        return
    with contextlib.suppress(Exception):
        con.execute("SET enable_progress_bar = true")
        con.execute("SET enable_progress_bar_print = false")


def interrupt(conn: Any) -> bool:
    """Interrupt the statement running on ``conn``; True if a hook was found."""
    session = _session(conn)
    hook = getattr(session, "interrupt", None)
    if callable(hook):
        with contextlib.suppress(Exception):
            hook()
            return True
    con = _duck(conn)
    if con is None:
        return False
    with contextlib.suppress(Exception):
        con.interrupt()
        return True
    return False


def progress(conn: Any) -> float | None:
    """Percent done (0-100) of the DuckDB part of the running statement, if known."""
    session = _session(conn)
    hook = getattr(session, "progress", None)
    try:
        if callable(hook):
            value = hook()
        else:
            con = _duck(conn)
            value = None if con is None else con.query_progress()
    except Exception:
        return None
    if not isinstance(value, int | float) or value < 0:
        return None
    return float(min(value, 100.0))


def scan_rows(conn: Any) -> tuple[int, int] | None:
    """(rows read, rows stored) while the running statement scans storage, if known."""
    hook = getattr(_session(conn), "scan_progress", None)
    if not callable(hook):
        return None
    try:
        value = hook()
    except Exception:
        return None
    if not isinstance(value, tuple) or len(value) != 2:
        return None
    return int(value[0]), int(value[1])
