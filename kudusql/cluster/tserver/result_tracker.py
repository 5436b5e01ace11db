"""Exactly-once writes on the tablet server: the ``ResultTracker`` (Kudu's
``rpc/result_tracker``).

A client names each write with a ``RequestId``: its client id, a sequence number that
every retry of the write repeats, the lowest sequence number it has not finished yet
(``first_incomplete_seq_no``) and the attempt's number. The tracker maps
``(client_id, seq_no)`` to a completion record, IN_PROGRESS while one handler (the
first attempt to arrive, the *driver*) applies the write and COMPLETED with the stored
response once it is done:

- ``track`` of a new request answers NEW: the caller applies it, then ``complete``s it
  with its response (or ``fail``s it: the record is dropped, the write applied nothing,
  and a retry runs it again, as Kudu's ``FailAndRespond``);
- ``track`` of a duplicate answers COMPLETED with the stored response (the caller
  answers it without applying anything) or IN_PROGRESS (the caller waits for the
  driver, then tracks again);
- ``track`` of a request below the client's GC watermark answers STALE: its response is
  forgotten, so the tracker cannot tell whether it applied.

Records are forgotten three ways. Each request moves its client's watermark up to its
``first_incomplete_seq_no`` and drops the completed records below it (the client has
its answers). ``gc(now)`` drops every record of a client not heard from for
``clients_ttl`` seconds, and completed records untouched for ``responses_ttl`` seconds.
Dropping a record moves the watermark past it, so a late duplicate is STALE, never
applied twice. A record IN_PROGRESS is never dropped, nor the client that owns one.

Pure and single-threaded: no clock, thread, lock or I/O. Time is the ``now`` argument
(seconds, any monotonic origin); the tablet server serializes calls under its lock.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = [
    "DEFAULT_CLIENTS_TTL",
    "DEFAULT_RESPONSES_TTL",
    "RequestId",
    "ResultTracker",
    "RpcState",
    "Tracked",
]

R = TypeVar("R")

#: Seconds a client not heard from is remembered (Kudu's ``remember_clients_ttl_ms``).
DEFAULT_CLIENTS_TTL = 3600.0

#: Seconds a completed response untouched is remembered (Kudu's
#: ``remember_responses_ttl_ms``).
DEFAULT_RESPONSES_TTL = 600.0


@dataclass(frozen=True)
class RequestId:
    """Kudu's ``rpc.RequestIdPB``: who sent a write and which one it is.

    ``seq_no`` is the same on every attempt of one write; ``first_incomplete_seq_no``
    is at most ``seq_no`` (the write itself is not finished); ``attempt_no`` counts the
    attempts from 1."""

    client_id: str
    seq_no: int
    first_incomplete_seq_no: int
    attempt_no: int = 1

    def describe(self) -> str:
        return f"{self.client_id}:{self.seq_no}"


class RpcState(enum.Enum):
    """What ``track`` found (Kudu's ``ResultTracker::RpcState``)."""

    NEW = "new"
    IN_PROGRESS = "in progress"
    COMPLETED = "completed"
    STALE = "stale"


@dataclass(frozen=True)
class Tracked(Generic[R]):
    """``track``'s answer: the state, and the stored response when COMPLETED."""

    state: RpcState
    response: R | None = None


@dataclass
class _Record(Generic[R]):
    state: RpcState
    driver_attempt: int
    last_updated: float
    response: R | None = None


@dataclass
class _Client(Generic[R]):
    #: Requests below this sequence number are STALE (their records are gone).
    stale_before_seq_no: int
    last_heard_from: float
    #: seq_no -> record. A COMPLETED record is at or above ``stale_before_seq_no``; an
    #: IN_PROGRESS one may be below it (its client gave up waiting for it).
    records: dict[int, _Record[R]] = field(default_factory=dict)


class ResultTracker(Generic[R]):
    """The completion records of every client of one tablet server; see the module
    docstring. ``R`` is the stored response type."""

    def __init__(
        self,
        *,
        clients_ttl: float = DEFAULT_CLIENTS_TTL,
        responses_ttl: float = DEFAULT_RESPONSES_TTL,
    ) -> None:
        if clients_ttl <= 0 or responses_ttl <= 0:
            raise ValueError("the result tracker's TTLs are positive")
        self.clients_ttl = clients_ttl
        self.responses_ttl = responses_ttl
        self._clients: dict[str, _Client[R]] = {}

    # -- the request path -----------------------------------------------------------------

    def track(self, rid: RequestId, now: float) -> Tracked[R]:
        """Note an attempt of ``rid``; NEW makes the caller its driver."""
        if rid.first_incomplete_seq_no > rid.seq_no:
            raise ValueError(
                f"request {rid.describe()}: first_incomplete_seq_no"
                f" {rid.first_incomplete_seq_no} is past its own sequence number"
            )
        client = self._clients.get(rid.client_id)
        if client is None:
            client = _Client(rid.first_incomplete_seq_no, now)
            self._clients[rid.client_id] = client
        client.last_heard_from = now
        if rid.seq_no < client.stale_before_seq_no:
            return Tracked(RpcState.STALE)
        # The client has every answer below its first incomplete request.
        self._drop_completed_below(client, rid.first_incomplete_seq_no)
        client.stale_before_seq_no = max(client.stale_before_seq_no, rid.first_incomplete_seq_no)
        record = client.records.get(rid.seq_no)
        if record is None:
            client.records[rid.seq_no] = _Record(RpcState.IN_PROGRESS, rid.attempt_no, now)
            return Tracked(RpcState.NEW)
        record.last_updated = now
        if record.state is RpcState.COMPLETED:
            return Tracked(RpcState.COMPLETED, record.response)
        return Tracked(RpcState.IN_PROGRESS)

    def peek(self, rid: RequestId) -> Tracked[R]:
        """What ``track`` would find for ``rid``, changing nothing (NEW: nothing known
        of it). A replicated tablet's leader asks this before it appends a write."""
        client = self._clients.get(rid.client_id)
        if client is None:
            return Tracked(RpcState.NEW)
        if rid.seq_no < client.stale_before_seq_no:
            return Tracked(RpcState.STALE)
        record = client.records.get(rid.seq_no)
        if record is None:
            return Tracked(RpcState.NEW)
        if record.state is RpcState.COMPLETED:
            return Tracked(RpcState.COMPLETED, record.response)
        return Tracked(RpcState.IN_PROGRESS)

    def complete(self, rid: RequestId, response: R, now: float) -> None:
        """The driver of ``rid`` applied it: store ``response`` for every duplicate."""
        record = self._in_progress(rid)
        record.state = RpcState.COMPLETED
        record.response = response
        record.last_updated = now

    def fail(self, rid: RequestId) -> None:
        """The driver of ``rid`` failed without applying it: forget the attempt, so that
        a retry runs it again."""
        self._in_progress(rid)
        del self._clients[rid.client_id].records[rid.seq_no]

    def _in_progress(self, rid: RequestId) -> _Record[R]:
        client = self._clients.get(rid.client_id)
        record = None if client is None else client.records.get(rid.seq_no)
        if record is None or record.state is not RpcState.IN_PROGRESS:
            raise ValueError(f"request {rid.describe()} is not in progress")
        return record

    # -- forgetting -----------------------------------------------------------------------

    def gc(self, now: float) -> None:
        """Forget idle clients (``clients_ttl``) and old responses (``responses_ttl``)."""
        for client_id in list(self._clients):
            client = self._clients[client_id]
            idle = now - client.last_heard_from >= self.clients_ttl
            if idle and all(r.state is not RpcState.IN_PROGRESS for r in client.records.values()):
                del self._clients[client_id]
                continue
            self._drop_ordered(client, lambda r: now - r.last_updated >= self.responses_ttl)

    def _drop_completed_below(self, client: _Client[R], seq_no: int) -> None:
        for s in sorted(client.records):
            if s >= seq_no:
                return
            if client.records[s].state is not RpcState.IN_PROGRESS:
                self._forget(client, s)

    def _drop_ordered(self, client: _Client[R], old: Callable[[_Record[R]], bool]) -> None:
        """Drop completed records from the lowest sequence number up while ``old``
        holds; stop at the first that stays (Kudu's order: the watermark only moves
        over a prefix)."""
        for s in sorted(client.records):
            record = client.records[s]
            if record.state is RpcState.IN_PROGRESS or not old(record):
                return
            self._forget(client, s)

    @staticmethod
    def _forget(client: _Client[R], seq_no: int) -> None:
        del client.records[seq_no]
        client.stale_before_seq_no = max(client.stale_before_seq_no, seq_no + 1)

    # -- introspection (tests, statistics) ------------------------------------------------

    def clients(self) -> list[str]:
        return sorted(self._clients)

    def records(self, client_id: str) -> dict[int, RpcState]:
        """``seq_no -> state`` of one client's records."""
        client = self._clients.get(client_id)
        return {} if client is None else {s: r.state for s, r in sorted(client.records.items())}

    def stale_before(self, client_id: str) -> int | None:
        client = self._clients.get(client_id)
        return None if client is None else client.stale_before_seq_no
