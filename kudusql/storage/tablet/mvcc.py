"""MVCC: which operations a snapshot sees.

Each write batch takes one HybridTime when it starts and becomes visible when it
finishes applying. A snapshot at T sees exactly the operations with timestamp < T.
``latest_snapshot`` returns a T that includes every applied operation and no
in-flight one, so a reader never sees half a batch.
"""

from __future__ import annotations

import threading

from kudusql.common.errors import ProgrammingError
from kudusql.common.hybrid_time import MAX_CLOCK_ERROR_MICROS, HybridClock, describe, from_micros


class MvccManager:
    """Tracks in-flight and applied operations of a tablet (or a whole database)."""

    def __init__(self, clock: HybridClock) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._in_flight: set[int] = set()
        self.last_applied = 0
        self._waiters = 0  # threads in wait_for_snapshot: only they need a notify

    def start_op(self, ts: int | None = None) -> int:
        """Register an operation; returns its timestamp (a new one unless given)."""
        with self._lock:
            if ts is None:
                ts = self.clock.now()
            else:
                self.clock.observe(ts)
            self._in_flight.add(ts)
            return ts

    def finish_op(self, ts: int) -> None:
        """Make the operation visible."""
        with self._lock:
            self._in_flight.discard(ts)
            if ts > self.last_applied:
                self.last_applied = ts
            if self._waiters:
                self._cond.notify_all()

    def abort_op(self, ts: int) -> None:
        """Forget an operation that applied nothing."""
        with self._lock:
            self._in_flight.discard(ts)
            if self._waiters:
                self._cond.notify_all()

    def latest_snapshot(self) -> int:
        """A snapshot that sees every applied operation and no in-flight one."""
        with self._cond:
            now = self.clock.now()
            if self._in_flight:
                return min(min(self._in_flight), now)
            return now

    def wait_for_snapshot(self, ts: int) -> None:
        """Block until every operation with a timestamp < ``ts`` has applied.

        A snapshot in the future (beyond the clock's error bound) is refused.
        """
        limit = self.clock.peek() + from_micros(MAX_CLOCK_ERROR_MICROS)
        if ts > limit:
            raise ProgrammingError(f"snapshot timestamp {describe(ts)} is in the future")
        self.clock.observe(ts)
        with self._cond:
            self._waiters += 1
            try:
                while any(t < ts for t in self._in_flight):
                    self._cond.wait(1.0)
            finally:
                self._waiters -= 1
