"""Owns running statements off the main thread so that Ctrl-C can cancel them.

``Runner.submit(sql)`` runs one statement on a fresh cursor in a worker thread and
returns a ``Job``; the caller waits on it (showing progress) and may ``cancel()`` it.
A cancelled job interrupts the engine (see ``engine_hooks``) and is abandoned: its
result is discarded. The session is not thread-safe, so one lock serializes the
worker and the shell's own metadata queries (completion); a statement submitted while
an abandoned one still runs waits for it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from kudusql.dbapi import Connection
from kudusql.shell import engine_hooks


@dataclass
class Outcome:
    """What a statement did: its rows or row count, warnings, time, or its error."""

    sql: str
    table: pa.Table | None = None
    rowcount: int = -1
    warnings: list[str] = field(default_factory=list)
    elapsed: float = 0.0
    error: BaseException | None = None
    cancelled: bool = False


class Job:
    """One statement (or ``work`` callable) running in a worker thread."""

    def __init__(self, runner: Runner, sql: str, work: Callable[[Job], None] | None) -> None:
        self.runner = runner
        self.sql = sql
        self.work = work
        #: Rows done and total, for work that counts them (``\\load``).
        self.rows: tuple[int, int] | None = None
        self.label = "running"
        #: What ``work`` returns besides the outcome (e.g. a load report).
        self.result: Any = None
        self.outcome = Outcome(sql)
        self.done = threading.Event()
        self.started = time.perf_counter()
        self.cancelled = False
        self.thread = threading.Thread(target=self._run, name="kudusql-statement", daemon=True)

    def _run(self) -> None:
        out = self.outcome
        with self.runner.lock:
            t0 = time.perf_counter()
            try:
                if self.work is not None:
                    self.work(self)
                    return
                cur = self.runner.conn.cursor()
                cur.execute(self.sql)
                out.rowcount = cur.rowcount
                out.warnings = list(cur.warnings)
                if cur.description is not None:
                    out.table = cur.fetch_arrow_table()
                cur.close()
            except BaseException as e:  # reported to the user, never raised in the thread
                out.error = e
            finally:
                out.elapsed = time.perf_counter() - t0
                self.done.set()

    def wait(self, timeout: float | None = None) -> bool:
        return self.done.wait(timeout)

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def progress(self) -> float | None:
        return engine_hooks.progress(self.runner.conn)

    def scan_rows(self) -> tuple[int, int] | None:
        return engine_hooks.scan_rows(self.runner.conn)

    def cancel(self, grace: float = 1.0) -> bool:
        """Interrupt the statement and abandon it; True if it stopped within ``grace``
        seconds (otherwise it finishes in the background and its result is dropped)."""
        self.cancelled = True
        self.outcome.cancelled = True
        engine_hooks.interrupt(self.runner.conn)
        return self.done.wait(grace)


class Runner:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.lock = threading.Lock()
        self.current: Job | None = None
        engine_hooks.enable_progress(conn)

    def busy(self) -> bool:
        """True while an abandoned statement still holds the session."""
        return self.current is not None and not self.current.done.is_set()

    def submit(self, sql: str, work: Callable[[Job], None] | None = None) -> Job:
        """Start ``sql`` (or ``work(job)``, which fills ``job.outcome``) in a worker."""
        job = Job(self, sql, work)
        self.current = job
        job.thread.start()
        return job

    def run(self, sql: str) -> Outcome:
        """Run ``sql`` and wait (no cancellation): for scripts and meta commands."""
        job = self.submit(sql)
        job.wait()
        return job.outcome

    def try_query(self, sql: str) -> list[tuple[Any, ...]] | None:
        """Rows of a small metadata query run in the calling thread, or None if the
        session is busy or the query fails (used by completion; never blocks)."""
        if not self.lock.acquire(blocking=False):
            return None
        try:
            cur = self.conn.cursor()
            cur.execute(sql)
            rows = cur.fetchall() if cur.description is not None else []
            cur.close()
            return rows
        except Exception:
            return None
        finally:
            self.lock.release()
