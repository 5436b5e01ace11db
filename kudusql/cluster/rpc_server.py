"""The Flight server every cluster daemon is built on (master and tablet server).

``RpcServer`` is a ``pyarrow.flight.FlightServerBase`` that

- checks the cluster secret on every call, in middleware that runs before any handler
  (a call without it, or with a wrong one, fails as unauthenticated and touches nothing);
- dispatches by message type: a Flight action's body, a ``do_get`` ticket and a
  ``do_put`` descriptor command are each one request envelope (``messages.py``), routed
  to the handler registered for its type;
- moves its HybridClock past the timestamp a request carries, and stamps every response
  (and every error) with its clock;
- streams Arrow: a ``do_get`` handler returns a table or a record batch reader, sent in
  batches of at most ``STREAM_BATCH_ROWS`` rows, the response envelope riding as the
  first batch's app metadata; a ``do_put`` handler reads the client's batches and
  returns a response, written back as metadata;
- turns a kudusql error raised by a handler into an error response the client raises
  again as the same class, and any other exception (a bug) into an ``InternalError``
  naming the server, logged here with its traceback and never sent.

It binds 127.0.0.1 by default, and refuses an address other machines can reach unless it
has both the secret and TLS (``security.check_bind``).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.flight as flight

from kudusql.cluster.addresses import HostPort, parse_host_port
from kudusql.cluster.errors import MalformedMessage
from kudusql.cluster.messages import (
    Envelope,
    ErrorResponse,
    GetResponse,
    Message,
    Ping,
    PingResponse,
    Request,
    Response,
    decode,
    encode,
    message_types,
)
from kudusql.cluster.security import SECRET_HEADER, TlsFiles, check_bind, secret_matches
from kudusql.common.errors import Error, InternalError, OperationalError
from kudusql.common.hybrid_time import HybridClock, from_micros, wall_micros

__all__ = ["MAX_CLOCK_AHEAD_MICROS", "STREAM_BATCH_ROWS", "RpcServer"]

log = logging.getLogger(__name__)

#: Rows per batch of a do_get stream (64 Ki-row batches stream about twice as fast over
#: loopback as one large batch).
STREAM_BATCH_ROWS = 65536

#: Small batches (a filtered scan's) are combined up to this many bytes before they are
#: sent: every Flight message costs a fixed round of framing and GIL hand-offs.
STREAM_BATCH_BYTES = 8 << 20

#: A request timestamp further than this ahead of the server's wall clock is refused
#: (Kudu's ``--max_clock_sync_error_usec``): one bad clock must not drag every server's
#: clock into the future.
MAX_CLOCK_AHEAD_MICROS = 10_000_000

R = TypeVar("R", bound=Request)
ActionHandler = Callable[[Any], Response]
GetHandler = Callable[[Any], "pa.Table | pa.RecordBatchReader"]
PutHandler = Callable[[Any, pa.RecordBatchReader], Response]


class _SecretCheck(flight.ServerMiddleware):  # type: ignore[misc]
    """Marks a call that passed the secret check (nothing to do per call)."""


class _SecretCheckFactory(flight.ServerMiddlewareFactory):  # type: ignore[misc]
    """Rejects every call whose secret header is missing or wrong, before dispatch."""

    def __init__(self, secret: str) -> None:
        super().__init__()
        self._secret = secret

    def start_call(self, info: Any, headers: dict[str, list[Any]]) -> _SecretCheck:
        presented = headers.get(SECRET_HEADER) or [None]
        if len(presented) != 1 or not secret_matches(self._secret, presented[0]):
            log.warning("refused a call without the right cluster secret (%s)", info.method)
            raise flight.FlightUnauthenticatedError(
                "unauthenticated: the call does not carry this cluster's secret"
            )
        return _SecretCheck()


class RpcServer(flight.FlightServerBase):  # type: ignore[misc]
    """A cluster daemon's Flight server; subclasses register their handlers.

    ``bind`` is ``HOST:PORT`` (port 0 picks a free one: read ``address`` after
    construction). ``kind`` names the daemon in messages ("master", "tablet server").
    """

    def __init__(
        self,
        bind: str = "127.0.0.1:0",
        *,
        kind: str = "server",
        secret: str | None = None,
        tls: TlsFiles | None = None,
        clock: HybridClock | None = None,
        server_uuid: str | None = None,
    ) -> None:
        requested = parse_host_port(bind)
        check_bind(requested, secret=secret, tls=tls)
        scheme = "grpc+tls" if tls is not None else "grpc+tcp"
        options: dict[str, Any] = {}
        if tls is not None:
            cert, key = tls.read()
            options["tls_certificates"] = [flight.CertKeyPair(cert.decode(), key.decode())]
        if secret is not None:
            options["middleware"] = {"secret": _SecretCheckFactory(secret)}
        try:
            super().__init__(f"{scheme}://{requested.host}:{requested.port}", **options)
        except (OSError, flight.FlightError, pa.ArrowException) as exc:
            raise OperationalError(f"{kind} cannot listen on {requested}: {exc}") from None
        self.kind = kind
        self.uuid = server_uuid or uuid.uuid4().hex
        self.address = HostPort(requested.host, self.port)
        self.clock = clock or HybridClock()
        self._actions: dict[str, tuple[type[Request], ActionHandler]] = {}
        self._gets: dict[str, tuple[type[Request], GetHandler]] = {}
        self._puts: dict[str, tuple[type[Request], PutHandler]] = {}
        self._clock_lock = threading.Lock()
        self.register_action(Ping, self._ping)

    # -- registration -------------------------------------------------------------------

    def register_action(self, request: type[R], handler: Callable[[R], Response]) -> None:
        """Serve ``request`` as a Flight action: ``handler(request) -> response``."""
        self._actions[request.TYPE] = (request, handler)

    def register_get(
        self, request: type[R], handler: Callable[[R], pa.Table | pa.RecordBatchReader]
    ) -> None:
        """Serve ``request`` as a do_get ticket: ``handler(request)`` returns the data."""
        self._gets[request.TYPE] = (request, handler)

    def register_put(
        self, request: type[R], handler: Callable[[R, pa.RecordBatchReader], Response]
    ) -> None:
        """Serve ``request`` as a do_put command: ``handler(request, batches)`` reads
        the client's batches and returns the response."""
        self._puts[request.TYPE] = (request, handler)

    def _ping(self, request: Ping) -> PingResponse:
        return PingResponse(server_kind=self.kind, server_uuid=self.uuid)

    # -- the envelope, the clock and errors -----------------------------------------------

    def _receive(self, data: bytes, table: dict[str, tuple[type[Request], Any]]) -> Any:
        """The request of an envelope, with its handler; moves the clock past its
        timestamp."""
        envelope: Envelope = decode(data)
        entry = table.get(type(envelope.message).TYPE)
        if entry is None or not isinstance(envelope.message, entry[0]):
            raise MalformedMessage(
                f"{self.kind} {self.address} does not serve {type(envelope.message).TYPE!r}"
                " with this call"
            )
        if envelope.timestamp is not None:
            self._observe(envelope.timestamp)
        return envelope.message, entry[1]

    def _observe(self, timestamp: int) -> None:
        limit = from_micros(wall_micros() + MAX_CLOCK_AHEAD_MICROS)
        if timestamp > limit:
            raise OperationalError(
                f"{self.kind} {self.address} refused a timestamp more than"
                f" {MAX_CLOCK_AHEAD_MICROS // 1_000_000} s ahead of its clock"
            )
        self.clock.observe(timestamp)

    def _reply(self, response: Message) -> bytes:
        return encode(response, self.clock.now())

    def _failure(self, exc: BaseException, call: str) -> flight.FlightServerError:
        """The Flight error that carries a failed call's error response."""
        if not isinstance(exc, Error):
            log.error("%s %s: %s failed", self.kind, self.address, call, exc_info=exc)
            exc = InternalError(
                f"internal error in {self.kind} {self.address} ({call}); the server's log has"
                " the details"
            )
        response = ErrorResponse.of(exc)
        return flight.FlightServerError(  # type: ignore[call-arg]
            response.message, extra_info=self._reply(response)
        )

    # -- Flight ---------------------------------------------------------------------------

    def list_actions(self, context: Any) -> list[tuple[str, str]]:  # type: ignore[override]
        types = message_types()
        return [(name, (types[name].__doc__ or "").split("\n")[0]) for name in self._actions]

    def do_action(self, context: Any, action: flight.Action) -> Iterator[bytes]:
        try:
            request, handler = self._receive(action.body.to_pybytes(), self._actions)
            if action.type != request.TYPE:
                raise MalformedMessage(f"action {action.type!r} carries a {request.TYPE!r} message")
            response = handler(request)
            body = self._reply(response)
        except Exception as exc:
            raise self._failure(exc, f"action {action.type}") from None
        return iter([body])

    def do_get(self, context: Any, ticket: flight.Ticket) -> flight.FlightDataStream:
        try:
            request, handler = self._receive(ticket.ticket, self._gets)
            data = handler(request)
            reader = (
                pa.RecordBatchReader.from_batches(
                    data.schema, data.to_batches(max_chunksize=STREAM_BATCH_ROWS)
                )
                if isinstance(data, pa.Table)
                else data
            )
            first = self._reply(GetResponse())
        except Exception as exc:
            raise self._failure(exc, f"get {self._type_of(ticket.ticket)}") from None
        return flight.GeneratorStream(
            reader.schema,
            self._stream(reader, first, request),  # type: ignore[arg-type]
        )

    def _stream(
        self, reader: pa.RecordBatchReader, first: bytes, request: Request
    ) -> Iterator[tuple[pa.RecordBatch, pa.Buffer | None]]:
        metadata: pa.Buffer | None = pa.py_buffer(first)
        try:
            for batch in _coalesced(reader):
                for piece in (
                    batch.slice(offset, STREAM_BATCH_ROWS)
                    for offset in range(0, max(batch.num_rows, 1), STREAM_BATCH_ROWS)
                ):
                    yield piece, metadata
                    metadata = None
        except Exception as exc:
            raise self._failure(exc, f"get {request.TYPE}") from None
        if metadata is not None:  # no batch at all: one empty batch carries the response
            yield pa.RecordBatch.from_pylist([], schema=reader.schema), metadata

    def do_put(
        self,
        context: Any,
        descriptor: flight.FlightDescriptor,
        reader: flight.MetadataRecordBatchReader,
        writer: flight.FlightMetadataWriter,
    ) -> None:
        try:
            request, handler = self._receive(descriptor.command or b"", self._puts)
            response = handler(request, reader.to_reader())
            answer = pa.py_buffer(self._reply(response))
        except Exception as exc:
            raise self._failure(exc, f"put {self._type_of(descriptor.command)}") from None
        try:
            writer.write(answer)
        except OSError as exc:
            # The caller is gone (it timed out or was cancelled) after the handler ran:
            # its answer is lost, which a caller's retry of an exactly-once write expects.
            log.warning(
                "%s %s: the answer to put %s was not delivered (%s): the caller is gone",
                self.kind,
                self.address,
                request.TYPE,
                exc,
            )
        except Exception as exc:
            raise self._failure(exc, f"put {self._type_of(descriptor.command)}") from None

    @staticmethod
    def _type_of(data: bytes | None) -> str:
        try:
            return type(decode(data or b"").message).TYPE
        except MalformedMessage:
            return "(malformed)"


def _coalesced(reader: pa.RecordBatchReader) -> Iterator[pa.RecordBatch]:
    """The reader's rows in batches of at least ``STREAM_BATCH_ROWS`` rows or
    ``STREAM_BATCH_BYTES`` bytes where its own are smaller (a filtered scan yields a few
    rows per scanned batch), in order; empty batches are dropped. Batches whose columns
    cannot be concatenated (dictionaries that differ, in older pyarrow) go as they are."""
    pending: list[pa.RecordBatch] = []
    rows = nbytes = 0

    def combined() -> Iterator[pa.RecordBatch]:
        if len(pending) == 1:
            yield pending[0]
            return
        try:
            yield from pa.Table.from_batches(pending, reader.schema).combine_chunks().to_batches()
        except pa.ArrowNotImplementedError:
            yield from pending

    for batch in reader:
        if batch.num_rows == 0:
            continue
        pending.append(batch)
        rows += batch.num_rows
        nbytes += batch.nbytes
        if rows >= STREAM_BATCH_ROWS or nbytes >= STREAM_BATCH_BYTES:
            yield from combined()
            pending, rows, nbytes = [], 0, 0
    if pending:
        yield from combined()
