"""Owns the shell's two reaches into a connection beyond PEP 249: interrupting the
running statement and reading its progress.

The engine has no public hooks for these yet, so this module looks for
``Session.interrupt()`` / ``Session.progress()`` first and otherwise uses the DuckDB
connection of the session's runner (``interrupt()``, ``query_progress()``) without
importing DuckDB. What can be interrupted: the DuckDB part of a statement (joins,
aggregates, sorts, ``range()``) stops at once; reading storage scans into Arrow and
writing DML batches cannot be stopped midway, so the shell returns to the prompt and
discards the result while that part finishes in the background (the next statement
waits for it). Every function here is best effort and never raises.
"""

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
