"""Typed calls to tablet servers for one client session (``TabletServerPool``).

The pool keeps one ``RpcClient`` per tablet server address and one
``ObservedTimestamps`` for the whole session: every request carries the largest
HybridTime the session has seen from any server, and every answer moves it up, so a
read that follows a write (on any server) is stamped after it (Kudu's
client-propagated consistency).

Writes are exactly-once: the pool's ``RequestTracker`` gives each write a request id
(the session's client id and a new sequence number), and a write whose attempt failed
in a way a retry may fix (timed out, unavailable, connection reset or refused) is sent
again with the same id, with backoff, within the retry policy's deadline; the tablet
server applies it once and answers every attempt with the first one's response.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from kudusql.cluster.addresses import HostPort
from kudusql.cluster.client.request_tracker import RequestTracker
from kudusql.cluster.errors import ConnectionRefused, RpcTimedOut, ServiceUnavailable
from kudusql.cluster.messages import Response, decode_arrow, encode_arrow
from kudusql.cluster.retry import RetryPolicy
from kudusql.cluster.rpc_client import DEFAULT_TIMEOUT, ObservedTimestamps, RpcClient
from kudusql.cluster.tserver.messages import (
    KEY_INDEX_COLUMN,
    CountRowsRequest,
    CountRowsResponse,
    CreateTablet,
    DeleteTablet,
    DiffScanRequest,
    FlushTablet,
    LookupRequest,
    LookupRows,
    LookupRowsRequest,
    RequestId,
    ScanRequest,
    TabletChanged,
    TabletStatsRequest,
    TabletStatsResponse,
    WriteRequest,
    WriteResponse,
)
from kudusql.common.predicates import ColumnPredicate

__all__ = ["DEFAULT_SCAN_TIMEOUT", "KEY_INDEX_COLUMN", "TabletServerPool"]

#: Lookups of at most this many keys are one action; more keys stream their rows.
ACTION_LOOKUP_KEYS = 16

#: Seconds one tablet's scan or diff scan may stream in all (gRPC's deadline bounds the
#: whole stream; scans are not paged yet).
DEFAULT_SCAN_TIMEOUT = 600.0


def _expect(response: Response, kind: type[Any]) -> Any:
    assert isinstance(response, kind), response
    return response


class TabletServerPool:
    """Calls to any tablet server of one cluster, for one client session. Thread-safe.

    ``client_id`` names the session's writes to the servers (random by default)."""

    def __init__(
        self,
        *,
        secret: str | None = None,
        tls_root: bytes | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        observed: ObservedTimestamps | None = None,
        scan_timeout: float = DEFAULT_SCAN_TIMEOUT,
        client_id: str | None = None,
    ) -> None:
        self.observed = observed or ObservedTimestamps()
        self.requests = RequestTracker(client_id)
        self.scan_timeout = scan_timeout
        self._secret = secret
        self._tls_root = tls_root
        self._timeout = timeout
        self._retry = retry
        self._lock = threading.Lock()
        self._clients: dict[str, RpcClient] = {}

    def client(self, address: str | HostPort) -> RpcClient:
        """The session's client of the tablet server at ``address``."""
        key = str(address)
        with self._lock:
            c = self._clients.get(key)
            if c is None:
                c = self._clients[key] = RpcClient(
                    key,
                    secret=self._secret,
                    tls_root=self._tls_root,
                    server_kind="tablet server",
                    timeout=self._timeout,
                    retry=self._retry,
                    observed=self.observed,
                )
            return c

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            c.close()

    def __enter__(self) -> TabletServerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def now(self, address: str) -> int:
        """The session's latest observed HybridTime, after asking ``address`` for its
        clock (a ping: every answer carries the server's time)."""
        self.client(address).ping()
        value = self.observed.value
        assert value is not None
        return value

    # -- tablets ----------------------------------------------------------------------------

    def create_tablet(self, address: str, request: CreateTablet) -> TabletChanged:
        return _expect(self.client(address).call(request), TabletChanged)  # type: ignore[no-any-return]

    def delete_tablet(self, address: str, tablet_id: str) -> TabletChanged:
        return _expect(self.client(address).call(DeleteTablet(tablet_id)), TabletChanged)  # type: ignore[no-any-return]

    # -- data -------------------------------------------------------------------------------

    def write(
        self,
        address: str,
        tablet_id: str,
        op: str,
        data: pa.Table,
        *,
        op_column: str | None = None,
        atomic: bool = False,
        check_only: bool = False,
    ) -> WriteResponse:
        """Apply ``data`` to the tablet with one operation, or each row's from
        ``op_column``; see ``WriteRequest`` for ``atomic`` and ``check_only``. Retried
        under one request id until it has an answer (applied once) or the retry
        policy gives up: then the error says the write may or may not have applied
        (``ConnectionRefused`` only if no attempt can have reached the server)."""
        request = WriteRequest(tablet_id, op, op_column, atomic, check_only)
        if check_only:
            response = self.client(address).put(request, data, idempotent=True)
            return _expect(response, WriteResponse)  # type: ignore[no-any-return]
        tracker = self.requests
        seq_no = tracker.new_seq_no()

        def for_attempt(attempt_no: int) -> WriteRequest:
            rid = RequestId(tracker.client_id, seq_no, tracker.first_incomplete(), attempt_no)
            return dataclasses.replace(request, request_id=rid)

        try:
            response = self.client(address).put(
                request, data, idempotent=True, for_attempt=for_attempt
            )
        except ConnectionRefused:
            raise
        except (RpcTimedOut, ServiceUnavailable) as exc:
            raise type(exc)(
                f"{exc}; write {tracker.client_id}:{seq_no} to tablet {tablet_id} may or may"
                " not have been applied"
            ) from None
        finally:
            tracker.completed(seq_no)
        return _expect(response, WriteResponse)  # type: ignore[no-any-return]

    def write_attempt(
        self,
        address: str,
        tablet_id: str,
        op: str,
        data: pa.Table,
        *,
        seq_no: int,
        attempt_no: int,
        op_column: str | None = None,
        atomic: bool = False,
    ) -> WriteResponse:
        """One attempt, at ``address`` only, of the write numbered ``seq_no`` (from
        ``requests.new_seq_no()``; the caller marks it ``completed`` when it is done with
        it): a replicated tablet's write, whose retries may go to other replicas (a new
        leader), each with the same request id. Raises what the attempt met."""
        tracker = self.requests
        rid = RequestId(tracker.client_id, seq_no, tracker.first_incomplete(), attempt_no)
        request = WriteRequest(tablet_id, op, op_column, atomic, False, request_id=rid)
        response = self.client(address).put(request, data, idempotent=False)
        return _expect(response, WriteResponse)  # type: ignore[no-any-return]

    @property
    def retry(self) -> RetryPolicy:
        """The session's retry policy (backoff and deadline)."""
        return self._retry or RetryPolicy()

    def scan(
        self,
        address: str,
        tablet_id: str,
        columns: Sequence[str] | None,
        predicates: Sequence[ColumnPredicate],
        snapshot: int | None,
        *,
        ordered: bool = False,
        limit: int | None = None,
        key_range: tuple[bytes | None, bytes | None] = (None, None),
    ) -> pa.RecordBatchReader:
        """The tablet's rows at ``snapshot`` (with encoded primary keys in ``key_range``
        ``[lo, hi)``), streamed in batches as the server reads them; the stream is
        opened (and retried if need be) before this returns."""
        lo, hi = key_range
        request = ScanRequest(
            tablet_id,
            None if columns is None else list(columns),
            [p.to_dict() for p in predicates] or None,
            snapshot,
            ordered,
            limit,
            None if lo is None else lo.hex(),
            None if hi is None else hi.hex(),
        )
        return self.client(address).stream(request, timeout=self.scan_timeout)

    def lookup(
        self,
        address: str,
        tablet_id: str,
        keys: pa.Table,
        columns: Sequence[str] | None,
        snapshot: int | None,
    ) -> pa.Table:
        """The live rows with these primary keys, and each one's ``key_index``. A few
        keys (``ACTION_LOOKUP_KEYS``) go as one action (one round trip); more as a
        stream."""
        encoded = encode_arrow(keys)
        cols = None if columns is None else list(columns)
        if keys.num_rows <= ACTION_LOOKUP_KEYS:
            response = self.client(address).call(
                LookupRowsRequest(tablet_id, encoded, cols, snapshot)
            )
            rows: str = _expect(response, LookupRows).rows
            return decode_arrow(rows, "a lookup's rows")
        return self.client(address).get(LookupRequest(tablet_id, encoded, cols, snapshot))

    def diff_scan(
        self,
        address: str,
        tablet_id: str,
        start: int,
        end: int,
        columns: Sequence[str] | None,
        predicates: Sequence[ColumnPredicate],
    ) -> pa.RecordBatchReader:
        """The tablet's rows changed in ``[start, end)``, with ``is_deleted``, streamed."""
        request = DiffScanRequest(
            tablet_id,
            start,
            end,
            None if columns is None else list(columns),
            [p.to_dict() for p in predicates] or None,
        )
        return self.client(address).stream(request, timeout=self.scan_timeout)

    def count_rows(self, address: str, tablet_id: str, snapshot: int | None) -> int:
        response = self.client(address).call(CountRowsRequest(tablet_id, snapshot))
        return int(_expect(response, CountRowsResponse).rows)

    def flush(self, address: str, tablet_id: str) -> TabletStatsResponse:
        response = self.client(address).call(FlushTablet(tablet_id))
        return _expect(response, TabletStatsResponse)  # type: ignore[no-any-return]

    def statistics(self, address: str, tablet_id: str) -> TabletStatsResponse:
        response = self.client(address).call(TabletStatsRequest(tablet_id))
        return _expect(response, TabletStatsResponse)  # type: ignore[no-any-return]
