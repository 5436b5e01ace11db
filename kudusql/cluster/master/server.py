"""The master process's RPC face and driver: ``MasterServer``, an ``RpcServer`` of kind
"master" around the catalog state machine (``master_state.MasterState``).

Threads:

- the **driver** owns ``MasterState``: it is the only thread that touches it. Every RPC
  handler hands its input to the driver as a task on a queue and waits for the result,
  and the driver calls ``tick(now)`` every ``tick_interval`` seconds. ``now`` is
  ``time.monotonic()`` (soft state such as liveness is rebuilt after a restart, so a
  monotonic clock of this process is enough);
- the **senders**, a small pool, carry the requests the state machine returns to the
  tablet servers (create, alter, delete), each with a bounded timeout and one attempt
  (the state machine re-sends what is still needed), and hand the answers back to the
  driver as tasks (``alter_tablet_response``, ``delete_tablet_response``; a create is
  confirmed by the server's next tablet report). A request already in flight to a server
  is not sent again, so a server that is down ties up at most one sender per request.

Invariants: the catalog is durable before a DDL call returns (``MasterState`` writes
ahead to the ``SysCatalogTable``); no handler blocks the driver on the network.
"""

from __future__ import annotations

import logging
import queue
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from kudusql.cluster.catalog.records import TableRecord, TableState, TabletState
from kudusql.cluster.errors import ServiceUnavailable
from kudusql.cluster.heartbeat_messages import HeartbeatResponse, TSHeartbeat
from kudusql.cluster.master.catalog_table import SysCatalogTable
from kudusql.cluster.master.messages import (
    AlterTable,
    CreateTable,
    DdlResponse,
    DropTable,
    GetMetadataDocument,
    GetTable,
    GetTableLocations,
    ListTables,
    ListTablesResponse,
    ListTabletServers,
    ListTabletServersResponse,
    MetadataDocument,
    PutMetadataDocument,
    ReplicaLocationInfo,
    TableInfo,
    TableLocationsResponse,
    TabletLocationInfo,
    TabletServerInfo,
)
from kudusql.cluster.master_protocol import (
    AlterTabletRequest,
    ChangeConfigRequest,
    CreateTabletRequest,
    DeleteTabletRequest,
    TabletServerRequest,
)
from kudusql.cluster.master_state import (
    CatalogError,
    MasterOptions,
    MasterState,
    NoLiveTabletServers,
    ReplicationNotSupported,
    TableAlreadyExists,
    TableNotFound,
)
from kudusql.cluster.retry import RetryPolicy
from kudusql.cluster.rpc_client import RpcClient
from kudusql.cluster.rpc_server import RpcServer
from kudusql.cluster.security import TlsFiles
from kudusql.cluster.tserver.messages import (
    AlterTablet,
    ChangeConfig,
    CreateTablet,
    DeleteTablet,
    TabletChanged,
)
from kudusql.common.errors import (
    Error,
    KuduAlreadyPresent,
    KuduNotFound,
    KuduNotSupported,
    OperationalError,
    ProgrammingError,
)

__all__ = ["DEFAULT_TICK_INTERVAL", "MasterServer"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: How often the driver calls ``MasterState.tick``.
DEFAULT_TICK_INTERVAL = 0.5
#: The bound on one request to a tablet server (one attempt; ticks re-send).
DEFAULT_SEND_TIMEOUT = 5.0
#: How often a DDL call that waits looks at its table again.
_WAIT_POLL = 0.05
#: How long a handler waits for the driver before it calls the master stuck.
_DRIVER_TIMEOUT = 60.0

_Task = tuple[Callable[[MasterState, float], Any], "Future[Any] | None"]


def _user_error(exc: CatalogError) -> Error:
    if isinstance(exc, TableNotFound):
        return KuduNotFound(str(exc))
    if isinstance(exc, TableAlreadyExists):
        return KuduAlreadyPresent(str(exc))
    if isinstance(exc, NoLiveTabletServers):
        return ServiceUnavailable(str(exc))
    if isinstance(exc, ReplicationNotSupported):
        return KuduNotSupported(str(exc))
    return ProgrammingError(str(exc))


class MasterServer(RpcServer):
    """A master over ``directory`` listening on ``bind``. Its driver runs from
    construction; ``shutdown`` then ``close`` stop it."""

    def __init__(
        self,
        directory: str,
        bind: str = "127.0.0.1:0",
        *,
        secret: str | None = None,
        tls: TlsFiles | None = None,
        options: MasterOptions | None = None,
        tick_interval: float = DEFAULT_TICK_INTERVAL,
        send_timeout: float = DEFAULT_SEND_TIMEOUT,
    ) -> None:
        self.catalog = SysCatalogTable(directory)
        try:
            self._state = MasterState(self.catalog, random.Random(), options)
            super().__init__(bind, kind="master", secret=secret, tls=tls)
        except BaseException:
            self.catalog.close()
            raise
        self._secret = secret
        self._tls_root = str(tls.certificate) if tls is not None else None
        self._tick_interval = tick_interval
        self._send_timeout = send_timeout
        self._inbox: queue.Queue[_Task | None] = queue.Queue()
        self._stopped = threading.Event()
        self._senders = ThreadPoolExecutor(8, thread_name_prefix="master-send")
        self._clients: dict[str, RpcClient] = {}
        self._in_flight: set[tuple[str, str, str]] = set()
        self._send_lock = threading.Lock()
        self._driver = threading.Thread(target=self._drive, name="master-driver", daemon=True)
        self._driver.start()
        self.register_action(CreateTable, self._create_table)
        self.register_action(AlterTable, self._alter_table)
        self.register_action(DropTable, self._drop_table)
        self.register_action(GetTable, self._get_table)
        self.register_action(ListTables, self._list_tables)
        self.register_action(GetTableLocations, self._get_table_locations)
        self.register_action(ListTabletServers, self._list_tablet_servers)
        self.register_action(TSHeartbeat, self._heartbeat)
        self.register_action(GetMetadataDocument, self._get_document)
        self.register_action(PutMetadataDocument, self._put_document)

    def close(self) -> None:
        """Stop the driver and the senders, and close the catalog."""
        if not self._stopped.is_set():
            self._stopped.set()
            self._inbox.put(None)
            self._driver.join()
            self._senders.shutdown(wait=False, cancel_futures=True)
            with self._send_lock:
                clients, self._clients = list(self._clients.values()), {}
            for client in clients:
                client.close()
            self.catalog.close()

    # -- the driver -----------------------------------------------------------------------

    def _drive(self) -> None:
        next_tick = time.monotonic()
        while True:
            try:
                task = self._inbox.get(timeout=max(0.0, next_tick - time.monotonic()))
            except queue.Empty:
                task = ()  # type: ignore[assignment]
            if task is None:
                self._fail_pending()
                return
            if task:
                fn, future = task
                try:
                    result = fn(self._state, time.monotonic())
                except BaseException as exc:
                    if future is not None:
                        future.set_exception(exc)
                    else:
                        log.exception("master task failed")
                else:
                    if future is not None:
                        future.set_result(result)
            now = time.monotonic()
            if now >= next_tick:
                try:
                    self._send(self._state, self._state.tick(now))
                except Exception:
                    log.exception("master tick failed")
                next_tick = now + self._tick_interval

    def _fail_pending(self) -> None:
        """Answer every task still queued: the master is stopping."""
        while True:
            try:
                task = self._inbox.get_nowait()
            except queue.Empty:
                return
            if task and task[1] is not None:
                task[1].set_exception(OperationalError(f"master {self.address} is shutting down"))

    def _run(self, fn: Callable[[MasterState, float], T]) -> T:
        """Run ``fn(state, now)`` on the driver and return its result (or raise)."""
        if self._stopped.is_set():
            raise OperationalError(f"master {self.address} is shutting down")
        future: Future[T] = Future()
        self._inbox.put((fn, future))
        try:
            return future.result(timeout=_DRIVER_TIMEOUT)
        except TimeoutError:
            raise OperationalError(
                f"master {self.address} did not process the call within {_DRIVER_TIMEOUT:g} s"
            ) from None
        except CatalogError as exc:
            raise _user_error(exc) from None

    # -- sending to tablet servers --------------------------------------------------------

    def _send(self, state: MasterState, requests: Any) -> None:
        """Hand ``requests`` to the senders (driver thread: reads the server registry)."""
        if not requests:
            return
        addresses = {d.uuid: d.address for d in state.tservers()}
        for request in requests:
            address = addresses.get(request.tserver_uuid)
            if not address:
                continue  # not registered since this master started; a tick re-sends
            key = (type(request).__name__, request.tablet_id, request.tserver_uuid)
            with self._send_lock:
                if key in self._in_flight or self._stopped.is_set():
                    continue
                self._in_flight.add(key)
            try:
                self._senders.submit(self._send_one, request, address, key)
            except RuntimeError:  # the pool is shut down
                return

    def _client(self, address: str) -> RpcClient:
        with self._send_lock:
            client = self._clients.get(address)
            if client is None:
                client = RpcClient(
                    address,
                    secret=self._secret,
                    tls_root=self._tls_root,
                    server_kind="tablet server",
                    timeout=self._send_timeout,
                    retry=RetryPolicy(max_attempts=1, deadline=self._send_timeout),
                )
                self._clients[address] = client
            return client

    def _send_one(self, request: TabletServerRequest, address: str, key: Any) -> None:
        try:
            client = self._client(address)
            if isinstance(request, CreateTabletRequest):
                client.call(CreateTablet.of(request))
                return  # confirmed by the server's next tablet report
            if isinstance(request, AlterTabletRequest):
                answer = client.call(AlterTablet.of(request))
                assert isinstance(answer, TabletChanged)
                uuid, tablet_id, version = (
                    request.tserver_uuid,
                    request.tablet_id,
                    answer.schema_version,
                )
                self._post(lambda st, now: st.alter_tablet_response(uuid, tablet_id, version, now))
            elif isinstance(request, DeleteTabletRequest):
                client.call(
                    DeleteTablet(request.tablet_id, request.reason, request.cas_config_index)
                )
                uuid, tablet_id = request.tserver_uuid, request.tablet_id
                self._post(lambda st, now: st.delete_tablet_response(uuid, tablet_id, now))
            elif isinstance(request, ChangeConfigRequest):
                client.call(
                    ChangeConfig(
                        request.tablet_id,
                        "ADD_PEER",
                        request.peer_uuid,
                        request.peer_address,
                        request.cas_config_opid_index,
                    )
                )
                # Confirmed by the leader's next tablet report (its config moves).
        except Error as exc:
            log.info(
                "%s for tablet %s on %s failed: %s",
                type(request).__name__,
                request.tablet_id,
                address,
                exc,
            )
        except Exception:
            log.exception("sending %s to %s failed", type(request).__name__, address)
        finally:
            with self._send_lock:
                self._in_flight.discard(key)

    def _post(self, fn: Callable[[MasterState, float], Any]) -> None:
        """Feed an answer back to the driver; the requests it yields are sent."""

        def task(state: MasterState, now: float) -> None:
            self._send(state, fn(state, now))

        if not self._stopped.is_set():
            self._inbox.put((task, None))

    # -- handlers -------------------------------------------------------------------------

    def _ddl(self, fn: Callable[[MasterState, float], Any]) -> str:
        def task(state: MasterState, now: float) -> str:
            result = fn(state, now)
            self._send(state, result.requests)
            return str(result.table_id)

        return self._run(task)

    def _wait(self, table_id: str, seconds: float, *, dropped: bool) -> bool:
        """Wait up to ``seconds`` for the table's DDL to finish; whether it did."""

        def done(state: MasterState, now: float) -> bool | None:
            table = next((t for t in state.tables() if t.table_id == table_id), None)
            if dropped:
                return table is None
            if table is None or table.state is TableState.REMOVED:
                return None  # dropped meanwhile: nothing to wait for
            return table.state is TableState.RUNNING

        deadline = time.monotonic() + seconds
        while True:
            result = self._run(done)
            if result is not False:
                return bool(result)
            if time.monotonic() >= deadline:
                return False
            time.sleep(_WAIT_POLL)

    def _create_table(self, r: CreateTable) -> DdlResponse:
        table_id = self._ddl(
            lambda st, now: st.create_table(
                r.name, r.schema, r.partitions, now, r.metadata, r.num_replicas
            )
        )
        log.info("created table %s (%s), %d tablets", r.name, table_id, len(r.partitions))
        done = r.wait_seconds > 0 and self._wait(table_id, r.wait_seconds, dropped=False)
        return DdlResponse(table_id, done)

    def _alter_table(self, r: AlterTable) -> DdlResponse:
        table_id = self._ddl(
            lambda st, now: st.alter_table(
                r.name,
                now,
                schema=r.schema,
                new_name=r.new_name,
                metadata=r.metadata,
                add_partitions=r.add_partitions,
                drop_tablets=r.drop_tablets,
            )
        )
        log.info("altered table %s (%s)", r.name, table_id)
        done = r.wait_seconds > 0 and self._wait(table_id, r.wait_seconds, dropped=False)
        return DdlResponse(table_id, done)

    def _drop_table(self, r: DropTable) -> DdlResponse:
        table_id = self._ddl(lambda st, now: st.drop_table(r.name, now))
        log.info("dropped table %s (%s)", r.name, table_id)
        done = r.wait_seconds > 0 and self._wait(table_id, r.wait_seconds, dropped=True)
        return DdlResponse(table_id, done)

    def _get_table(self, r: GetTable) -> TableInfo:
        def task(state: MasterState, now: float) -> TableInfo:
            table = _require(state, r.name)
            return TableInfo(
                table.table_id,
                table.name,
                table.schema,
                table.schema_version,
                table.metadata,
                table.state.value,
                table.state is TableState.RUNNING,
                table.num_replicas,
            )

        return self._run(task)

    def _get_document(self, r: GetMetadataDocument) -> MetadataDocument:
        return self._run(
            lambda state, now: MetadataDocument(r.name, state.metadata_document(r.name))
        )

    def _put_document(self, r: PutMetadataDocument) -> MetadataDocument:
        def task(state: MasterState, now: float) -> MetadataDocument:
            state.put_metadata_document(r.name, r.body)
            return MetadataDocument(r.name, r.body)

        return self._run(task)

    def _list_tables(self, r: ListTables) -> ListTablesResponse:
        def task(state: MasterState, now: float) -> ListTablesResponse:
            names = [t.name for t in state.tables() if t.state is not TableState.REMOVED]
            return ListTablesResponse(sorted(names))

        return self._run(task)

    def _get_table_locations(self, r: GetTableLocations) -> TableLocationsResponse:
        def task(state: MasterState, now: float) -> TableLocationsResponse:
            table = _require(state, r.name)
            if table.state is not TableState.RUNNING:
                raise ServiceUnavailable(
                    f"table {r.name!r} is {table.state.value.lower()}: its tablets are not"
                    " all running yet; try again"
                )
            tablets = []
            for loc in state.tablet_locations(r.name):
                if not loc.address:
                    raise ServiceUnavailable(
                        f"the tablet server hosting tablet {loc.tablet_id} of table {r.name!r}"
                        " has not reported to the master since it started; try again"
                    )
                replicas = [
                    ReplicaLocationInfo(rep.tserver_uuid, rep.address, rep.role)
                    for rep in loc.replicas
                ]
                tablets.append(
                    TabletLocationInfo(
                        loc.tablet_id, loc.partition, loc.tserver_uuid, loc.address, replicas
                    )
                )
            return TableLocationsResponse(table.table_id, table.schema_version, tablets)

        return self._run(task)

    def _list_tablet_servers(self, r: ListTabletServers) -> ListTabletServersResponse:
        def task(state: MasterState, now: float) -> ListTabletServersResponse:
            counts: dict[str, int] = {}
            for tablet in state.tablets():
                if tablet.state in (TabletState.CREATING, TabletState.RUNNING):
                    for uuid in tablet.replica_uuids:
                        counts[uuid] = counts.get(uuid, 0) + 1
            servers = [
                TabletServerInfo(
                    d.uuid,
                    d.address,
                    state.is_live(d.uuid, now),
                    round(now - d.last_heartbeat, 3),
                    counts.get(d.uuid, 0),
                )
                for d in sorted(state.tservers(), key=lambda d: d.uuid)
            ]
            return ListTabletServersResponse(servers)

        return self._run(task)

    def _heartbeat(self, r: TSHeartbeat) -> HeartbeatResponse:
        def task(state: MasterState, now: float) -> HeartbeatResponse:
            result = state.heartbeat(r.uuid, r.address, r.report(), now)
            self._send(state, result.requests)
            return HeartbeatResponse(
                result.response.needs_full_report, result.response.acked_sequence_number
            )

        return self._run(task)


def _require(state: MasterState, name: str) -> TableRecord:
    table = state.table(name)
    if table is None:
        raise KuduNotFound(f"table {name!r} does not exist")
    return table
