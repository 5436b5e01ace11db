"""The client's half of exactly-once writes: ``RequestTracker`` (Kudu's
``rpc/request_tracker``).

One tracker per client session (``TabletServerPool``) names every write RPC: a client
id (random, unique per session) and a sequence number, one more per write. Every
attempt of one write repeats both. ``first_incomplete()`` is the lowest sequence number
still unfinished (the next one when none is): a tablet server drops the results of
this client's requests below it, as the client has their answers. A sequence number is
finished once its write has an answer or has been given up on.

Thread-safe: the session's writers share one tracker.
"""

from __future__ import annotations

import threading
import uuid

__all__ = ["RequestTracker"]


class RequestTracker:
    """Sequence numbers of one client's write RPCs, and which are unfinished."""

    def __init__(self, client_id: str | None = None) -> None:
        self.client_id = client_id or uuid.uuid4().hex
        self._lock = threading.Lock()
        self._next = 1
        self._incomplete: set[int] = set()

    def new_seq_no(self) -> int:
        """A new sequence number, unfinished until ``completed``."""
        with self._lock:
            seq_no = self._next
            self._next += 1
            self._incomplete.add(seq_no)
            return seq_no

    def first_incomplete(self) -> int:
        """The lowest unfinished sequence number (the next to be given when none is)."""
        with self._lock:
            return min(self._incomplete, default=self._next)

    def completed(self, seq_no: int) -> None:
        """The write ``seq_no`` has its answer, or its client gave up on it."""
        with self._lock:
            self._incomplete.discard(seq_no)

    def incomplete(self) -> int:
        """How many writes are unfinished."""
        with self._lock:
            return len(self._incomplete)
