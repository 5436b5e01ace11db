"""HybridTime: Kudu's timestamps, physical microseconds in the high 52 bits and a
12-bit logical counter below them, and the clock that hands them out.

A snapshot at T sees exactly the operations whose timestamp is < T.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

# DO NOT CHANGE: on-disk (timestamps are stored in deltas, rowset metadata and the WAL).
LOGICAL_BITS = 12
LOGICAL_MASK = (1 << LOGICAL_BITS) - 1
HT_INITIAL = 1


def from_micros(micros: int, logical: int = 0) -> int:
    """The HybridTime of a physical time in microseconds since the epoch."""
    return (micros << LOGICAL_BITS) | logical


def to_micros(ht: int) -> int:
    """The physical part of a HybridTime, in microseconds since the epoch."""
    return ht >> LOGICAL_BITS


def describe(ht: int) -> str:
    """A readable form, e.g. ``P:1700000000000000 L:3``."""
    return f"P:{ht >> LOGICAL_BITS} L:{ht & LOGICAL_MASK}"


def wall_micros() -> int:
    return time.time_ns() // 1000


#: How far ahead of the local clock a snapshot may be (Kudu's --max_clock_sync_error_usec).
MAX_CLOCK_ERROR_MICROS = 10_000_000


class HybridClock:
    """Hands out strictly increasing HybridTimes: max(last + 1, wall-clock micros << 12).

    ``physical`` is the wall clock in microseconds since the epoch (tests pass one they
    move forward, to age history past the ancient history mark).
    """

    def __init__(self, physical: Callable[[], int] = wall_micros) -> None:
        self._lock = threading.Lock()
        self._last = HT_INITIAL
        self._physical = physical

    def now(self) -> int:
        """A new timestamp, greater than every one handed out or observed before."""
        wall = self._physical() << LOGICAL_BITS  # from_micros, inlined: once per write
        with self._lock:
            ht = self._last + 1
            if ht < wall:
                ht = wall
            self._last = ht
            return ht

    def peek(self) -> int:
        """The current time without consuming a timestamp (for snapshots)."""
        wall = from_micros(self._physical())
        with self._lock:
            return max(self._last, wall)

    def observe(self, ht: int) -> None:
        """Move the clock past a timestamp seen on disk, so new ones are greater."""
        with self._lock:
            self._last = max(self._last, ht)
