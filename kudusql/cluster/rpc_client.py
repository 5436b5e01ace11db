"""The client side of a cluster call: one server, typed requests, bounded waits.

``RpcClient(address, secret=..., tls_root=...)`` sends a request (``messages.py``) as a
Flight action (``call``), a do_get ticket (``get``, the answer is an Arrow table;
``stream``, its batches as they arrive) or a do_put command with a table (``put``), and
returns the typed response or raises the kudusql error the server raised.

- **Timestamps.** Each request carries the largest HybridTime observed so far; each
  response's (and error's) timestamp is observed. Clients of one process share one
  ``ObservedTimestamps``, so a read from any server is not older than what was seen.
- **Deadlines.** Every attempt has a timeout (``timeout``, default 10 s); a call never
  waits longer than its retry policy's deadline in all. Nothing blocks without one.
- **Retries.** A call whose server is unavailable or did not answer is retried with
  exponential backoff and jitter (``retry.py``) on a fresh connection, only if it is
  idempotent (its request type says so, or the caller does: an exactly-once write is).
  A non-idempotent call is tried once: a lost answer does not mean it did not run. A
  call that fails with ``ConnectionRefused`` was never sent; after retries, only if no
  earlier attempt failed otherwise (else the error is ``ServiceUnavailable``).
- **Errors** name the server: ``tablet server 127.0.0.1:7051 is unavailable: connection
  refused``. No gRPC text or traceback reaches the user beyond the short reason.
"""

from __future__ import annotations

import functools
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.flight as flight

from kudusql.cluster.addresses import HostPort, parse_host_port
from kudusql.cluster.errors import (
    ConnectionRefused,
    MalformedMessage,
    RpcTimedOut,
    ServiceUnavailable,
    Unauthenticated,
    make_error,
)
from kudusql.cluster.messages import (
    Envelope,
    ErrorResponse,
    GetResponse,
    Ping,
    PingResponse,
    Request,
    Response,
    decode,
    encode,
)
from kudusql.cluster.retry import RetryPolicy
from kudusql.cluster.rpc_server import STREAM_BATCH_ROWS
from kudusql.cluster.security import SECRET_HEADER
from kudusql.cluster.timestamps import LatestObserved
from kudusql.common.errors import Error, OperationalError, ProgrammingError

__all__ = ["ObservedTimestamps", "RpcClient"]

T = TypeVar("T")

#: Seconds an attempt may take unless the caller says otherwise.
DEFAULT_TIMEOUT = 10.0


class ObservedTimestamps:
    """A ``LatestObserved`` shared by the clients of one process (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest = LatestObserved()

    @property
    def value(self) -> int | None:
        with self._lock:
            return self._latest.value

    def observe(self, timestamp: int | None) -> None:
        with self._lock:
            self._latest.observe(timestamp)


class _Retriable(Exception):
    """An attempt failed in a way a retry may fix (the server was not reached, or did
    not answer); ``error`` is what the caller gets if no retry is made."""

    def __init__(self, error: Error) -> None:
        super().__init__(str(error))
        self.error = error


def _reason(exc: flight.FlightError) -> str:
    """A short reason from gRPC's text."""
    text = str(exc)
    lowered = text.lower()
    if "connection refused" in lowered:
        return "connection refused"
    if "handshake" in lowered or "certificate" in lowered:
        return "TLS handshake failed (is the certificate given as tls_root the server's?)"
    if "socket closed" in lowered or "connection reset" in lowered:
        return "the connection was closed (a TLS server called without TLS, or a crash)"
    first = text.split(". Detail:")[0].strip().splitlines()[0] if text.strip() else ""
    return first or type(exc).__name__


class RpcClient:
    """Calls to one server. Thread-safe; reuse one per server.

    ``server_kind`` names the server in errors ("master", "tablet server"). ``tls_root``
    is the PEM certificate (bytes, or a path) to trust; without it the connection is
    plain TCP. ``rng``, ``sleep`` and ``monotonic`` are the retry loop's randomness and
    time (tests pass their own).
    """

    def __init__(
        self,
        address: str | HostPort,
        *,
        secret: str | None = None,
        tls_root: bytes | str | os.PathLike[str] | None = None,
        server_kind: str = "server",
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        observed: ObservedTimestamps | None = None,
        rng: random.Random | None = None,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.address = address if isinstance(address, HostPort) else parse_host_port(address)
        self.server_kind = server_kind
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self.observed = observed or ObservedTimestamps()
        self._rng = rng or random.Random()
        self._sleep = sleep
        self._monotonic = monotonic
        if isinstance(tls_root, str | os.PathLike):
            tls_root = Path(tls_root).read_bytes()
        self._tls_root = tls_root
        scheme = "grpc+tls" if tls_root is not None else "grpc+tcp"
        self._location = f"{scheme}://{self.address.host}:{self.address.port}"
        self._headers = [(SECRET_HEADER.encode(), secret.encode())] if secret else []
        self._lock = threading.Lock()
        self._client: flight.FlightClient | None = None

    def __repr__(self) -> str:
        return f"RpcClient({self.server_kind} {self.address})"

    def __enter__(self) -> RpcClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    # -- calls ----------------------------------------------------------------------------

    def ping(self, *, timeout: float | None = None) -> PingResponse:
        response = self.call(Ping(), timeout=timeout)
        assert isinstance(response, PingResponse)
        return response

    def call(
        self, request: Request, *, idempotent: bool | None = None, timeout: float | None = None
    ) -> Response:
        """Send ``request`` as a Flight action; its typed response."""

        def attempt(client: flight.FlightClient, options: flight.FlightCallOptions) -> Response:
            action = flight.Action(request.TYPE, encode(request, self.observed.value))
            results = list(client.do_action(action, options))
            if len(results) != 1:
                raise MalformedMessage(f"{request.TYPE}: expected one result, got {len(results)}")
            return self._response(request, results[0].body.to_pybytes(), request.RESPONSE)

        return self._run(request, attempt, idempotent, timeout)

    def get(
        self, request: Request, *, idempotent: bool | None = None, timeout: float | None = None
    ) -> pa.Table:
        """Send ``request`` as a do_get ticket; the whole stream as a table."""

        def attempt(client: flight.FlightClient, options: flight.FlightCallOptions) -> pa.Table:
            ticket = flight.Ticket(encode(request, self.observed.value))
            reader = client.do_get(ticket, options)
            batches = []
            started = False
            while True:
                try:
                    chunk = reader.read_chunk()
                except StopIteration:
                    break
                if chunk.app_metadata is not None:
                    self._response(request, chunk.app_metadata.to_pybytes(), GetResponse)
                    started = True
                if chunk.data is not None and chunk.data.num_rows:
                    batches.append(chunk.data)
            if not started:
                raise MalformedMessage(f"{request.TYPE}: the stream carried no response")
            return pa.Table.from_batches(batches, schema=reader.schema)

        return self._run(request, attempt, idempotent, timeout)

    def stream(
        self, request: Request, *, idempotent: bool | None = None, timeout: float | None = None
    ) -> pa.RecordBatchReader:
        """Send ``request`` as a do_get ticket; its batches as they arrive (one in memory
        at a time). Opening the stream, up to the server's response, is retried as
        ``get`` is; a failure after that raises without a retry, as batches were handed
        out. ``timeout`` bounds the whole stream (it is gRPC's deadline)."""
        budget = self.timeout if timeout is None else timeout

        def attempt(
            client: flight.FlightClient, options: flight.FlightCallOptions
        ) -> tuple[flight.FlightStreamReader, pa.RecordBatch | None]:
            ticket = flight.Ticket(encode(request, self.observed.value))
            reader = client.do_get(ticket, options)
            try:
                first = reader.read_chunk()
            except StopIteration:
                raise MalformedMessage(f"{request.TYPE}: the stream carried no response") from None
            if first.app_metadata is None:
                raise MalformedMessage(f"{request.TYPE}: the stream carried no response")
            self._response(request, first.app_metadata.to_pybytes(), GetResponse)
            return reader, first.data

        reader, first = self._run(request, attempt, idempotent, timeout, whole_stream=True)

        def read() -> flight.FlightStreamChunk:
            return reader.read_chunk()

        def batches() -> Iterator[pa.RecordBatch]:
            if first is not None and first.num_rows:
                yield first
            while True:
                try:
                    chunk = self._translate(request, budget, read)
                except StopIteration:
                    return
                except _Retriable as failure:
                    raise failure.error from None
                if chunk.data is not None and chunk.data.num_rows:
                    yield chunk.data

        return pa.RecordBatchReader.from_batches(reader.schema, batches())

    def put(
        self,
        request: Request,
        data: pa.Table,
        *,
        idempotent: bool | None = None,
        timeout: float | None = None,
        for_attempt: Callable[[int], Request] | None = None,
    ) -> Response:
        """Send ``request`` as a do_put command with ``data``; the typed response.
        ``for_attempt(n)``, when given, is the request sent on attempt ``n`` (1, 2, ...):
        a retry of an exactly-once write repeats its request id with the attempt's
        number."""
        attempts = 0

        def attempt(client: flight.FlightClient, options: flight.FlightCallOptions) -> Response:
            nonlocal attempts
            attempts += 1
            sent = request if for_attempt is None else for_attempt(attempts)
            descriptor = flight.FlightDescriptor.for_command(encode(sent, self.observed.value))
            writer, metadata = client.do_put(descriptor, data.schema, options)
            try:
                writer.write_table(data, max_chunksize=STREAM_BATCH_ROWS)
                writer.done_writing()
                answer = metadata.read()  # type: ignore[attr-defined]
            finally:
                writer.close()
            if answer is None:
                raise MalformedMessage(f"{request.TYPE}: the server sent no response")
            return self._response(request, answer.to_pybytes(), request.RESPONSE)

        return self._run(request, attempt, idempotent, timeout)

    # -- the retry loop -------------------------------------------------------------------

    def _connection(self) -> flight.FlightClient:
        with self._lock:
            if self._client is None:
                options: dict[str, Any] = {}
                if self._tls_root is not None:
                    options["tls_root_certs"] = self._tls_root
                self._client = flight.FlightClient(self._location, **options)
            return self._client

    def _reconnect(self, failed: flight.FlightClient) -> None:
        """Drop a connection that failed (gRPC's own reconnect backoff would delay the
        retry by up to a second after a server restarts). It is not closed here: other
        threads may be in calls on it (a closed client fails them with "FlightClient is
        closed" before they send anything); it closes when the last of them lets go."""
        with self._lock:
            if self._client is failed:
                self._client = None

    def _run(
        self,
        request: Request,
        attempt: Callable[[flight.FlightClient, flight.FlightCallOptions], T],
        idempotent: bool | None,
        timeout: float | None,
        *,
        whole_stream: bool = False,
    ) -> T:
        """One call with its retries; ``whole_stream``: ``timeout`` bounds a whole stream,
        which may outlast the retry policy's deadline (its retries do not)."""
        may_retry = type(request).IDEMPOTENT if idempotent is None else idempotent
        per_attempt = self.timeout if timeout is None else timeout
        start = self._monotonic()
        attempts = 0
        # Whether an attempt may have reached the server (any failure but a refused
        # connection): then a refused last attempt does not mean the call never ran.
        maybe_sent = False
        while True:
            attempts += 1
            elapsed = self._monotonic() - start
            budget = (
                min(per_attempt, self.retry.deadline - elapsed)
                if may_retry and not whole_stream
                else per_attempt
            )
            options = flight.FlightCallOptions(
                timeout=max(budget, 0.001),
                headers=self._headers,  # type: ignore[arg-type]  # bytes at run time
            )
            client = self._connection()
            try:
                return self._translate(request, budget, functools.partial(attempt, client, options))
            except _Retriable as failure:
                self._reconnect(client)
                refused = isinstance(failure.error, ConnectionRefused)
                wait = (
                    self.retry.next_wait(attempts, self._monotonic() - start, self._rng)
                    if may_retry
                    else None
                )
                if wait is None:
                    error = failure.error
                    if attempts > 1:
                        spent = self._monotonic() - start
                        kind = type(error)
                        if refused and maybe_sent:
                            kind = ServiceUnavailable  # not "never sent": see maybe_sent
                        error = kind(f"{error} (tried {attempts} times in {spent:.1f} s)")
                    raise error from None
                maybe_sent = maybe_sent or not refused
                self._sleep(wait)

    def _translate(self, request: Request, budget: float, run: Callable[[], T]) -> T:
        """Run one attempt; Flight's errors become kudusql's (``_Retriable`` wraps the
        ones a retry may fix)."""
        who = f"{self.server_kind} {self.address}"
        try:
            return run()
        except flight.FlightUnauthenticatedError:
            raise Unauthenticated(
                f"{who} refused the call: unauthenticated (no cluster secret, or a wrong one)"
            ) from None
        except flight.FlightUnavailableError as exc:
            reason = _reason(exc)
            kind = ConnectionRefused if reason == "connection refused" else ServiceUnavailable
            raise _Retriable(kind(f"{who} is unavailable: {reason}")) from None
        except flight.FlightTimedOutError:
            raise _Retriable(
                RpcTimedOut(f"{who} did not answer {request.TYPE} within {budget:.3g} s")
            ) from None
        except pa.ArrowInvalid as exc:
            if "closed" not in str(exc):
                raise
            # Only ``close()`` closes a client: a call made on it afterwards.
            raise ProgrammingError(f"the client of {who} is closed") from None
        except flight.FlightError as exc:
            error = self._error_response(exc)
            if error is not None:
                raise error from None
            raise OperationalError(f"{who}: {request.TYPE} failed: {_reason(exc)}") from None

    def _error_response(self, exc: flight.FlightError) -> Error | None:
        """The kudusql error an error response in a Flight error carries, if any."""
        if not exc.extra_info:
            return None
        try:
            envelope = decode(exc.extra_info)
        except MalformedMessage:
            return None
        if not isinstance(envelope.message, ErrorResponse):
            return None
        self.observed.observe(envelope.timestamp)
        return make_error(envelope.message.code, envelope.message.message)

    def _response(self, request: Request, data: bytes, expected: type[Response]) -> Response:
        envelope: Envelope = decode(data)
        self.observed.observe(envelope.timestamp)
        if isinstance(envelope.message, ErrorResponse):
            raise make_error(envelope.message.code, envelope.message.message)
        if not isinstance(envelope.message, expected):
            raise MalformedMessage(
                f"{request.TYPE}: expected a {expected.TYPE!r} response, got"
                f" {type(envelope.message).TYPE!r}"
            )
        return envelope.message
