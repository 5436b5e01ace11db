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

With several masters (``masters``, Kudu's ``--master_addresses``) the catalog is the
Raft-replicated ``ReplicatedSysCatalog`` and only the leader master serves: the driver
holds a ``MasterState`` only while the catalog replica is a ready leader (it leads and
has applied every entry of its log, its own term's first one included), loading it from
the applied catalog when it becomes one (``MasterState.master_restart``: soft state is
rebuilt from the tablet servers' reports) and dropping it at once when it is not (it
lost the leadership, or a catalog write's outcome is unknown). Without a
``MasterState`` every master call is refused with ``NotTheLeader`` naming the leader
master it knows. The masters exchange consensus messages as ``tserver_consensus``
one-way calls (``PeerMessenger``). One master keeps the unreplicated
``SysCatalogTable``.

Invariants: the catalog is durable before a DDL call returns (``MasterState`` writes
ahead to the ``SysCatalogTable``; replicated, to a majority of the masters' logs); no
handler blocks the driver on the network.
"""

from __future__ import annotations

import logging
import os
import queue
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from kudusql.cluster.addresses import parse_host_port
from kudusql.cluster.catalog.records import TableRecord, TableState, TabletState
from kudusql.cluster.catalog.store import CatalogStore
from kudusql.cluster.errors import MalformedMessage, NotTheLeader, ServiceUnavailable
from kudusql.cluster.heartbeat_messages import HeartbeatResponse, TSHeartbeat
from kudusql.cluster.master.catalog_replica import (
    SYS_CATALOG_TABLET_ID,
    CatalogNotLeader,
    CatalogWriteUncertain,
    ReplicatedSysCatalog,
)
from kudusql.cluster.master.catalog_table import CATALOG_DIR, SysCatalogTable
from kudusql.cluster.master.messages import (
    AlterTable,
    CreateTable,
    DdlResponse,
    DropTable,
    GetMasterStatus,
    GetMetadataDocument,
    GetTable,
    GetTableLocations,
    ListTables,
    ListTablesResponse,
    ListTabletServers,
    ListTabletServersResponse,
    MasterStatus,
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
from kudusql.cluster.tserver.consensus_wire import decode_message
from kudusql.cluster.tserver.messages import (
    AlterTablet,
    ChangeConfig,
    ConsensusAck,
    ConsensusRequest,
    CreateTablet,
    DeleteTablet,
    TabletChanged,
)
from kudusql.cluster.tserver.peer_messenger import PeerMessenger
from kudusql.cluster.tserver.tablet_replica import ReplicaOptions
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
#: How often the driver of a replicated master looks at its catalog replica's role.
_LEADERSHIP_POLL = 0.05

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
        masters: list[str] | None = None,
        replica_options: ReplicaOptions | None = None,
        catalog_write_timeout: float = 5.0,
    ) -> None:
        self._secret = secret
        self._tls_root = str(tls.certificate) if tls is not None else None
        self._options = options
        self._rng = random.Random()
        self.masters = [str(parse_host_port(m)) for m in masters or []]
        self.replicated = len(self.masters) > 1
        self._messenger: PeerMessenger | None = None
        self._replica: ReplicatedSysCatalog | None = None
        self._state: MasterState | None = None
        self._state_term = 0
        self.catalog: CatalogStore
        if self.replicated:
            me = str(parse_host_port(bind))
            if me not in self.masters:
                raise ProgrammingError(
                    f"this master listens on {me}, which is not one of the masters "
                    f"{','.join(self.masters)} (give --bind as it appears in --masters)"
                )
            if os.path.exists(os.path.join(directory, CATALOG_DIR)):
                raise ProgrammingError(
                    f"{directory} holds a single master's catalog; it cannot join "
                    "replicated masters (moving to several masters is not supported)"
                )
            self._messenger = PeerMessenger(secret=secret, tls_root=self._tls_root)
            for m in self.masters:
                self._messenger.set_address(m, m)
            messenger = self._messenger
            try:
                self._replica = ReplicatedSysCatalog(
                    directory,
                    me=me,
                    masters=self.masters,
                    transport=lambda msg: messenger.send(SYS_CATALOG_TABLET_ID, msg),
                    options=replica_options,
                    write_timeout_s=catalog_write_timeout,
                )
            except BaseException:
                messenger.close()
                raise
            self.catalog = self._replica
        else:
            self.catalog = SysCatalogTable(directory)
        try:
            if not self.replicated:
                self._state = MasterState(self.catalog, self._rng, options)
            super().__init__(bind, kind="master", secret=secret, tls=tls)
        except BaseException:
            self._close_catalog()
            raise
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
        self.register_action(ConsensusRequest, self._consensus)
        self.register_action(GetMasterStatus, self._master_status)

    def _close_catalog(self) -> None:
        if self._replica is not None:
            self._replica.close()
        else:
            assert isinstance(self.catalog, SysCatalogTable)
            self.catalog.close()
        if self._messenger is not None:
            self._messenger.close()

    @property
    def is_leader(self) -> bool:
        """Whether this master serves now (a single master always does)."""
        return self._state is not None

    @property
    def role(self) -> str:
        """``LEADER`` or the catalog replica's Raft role (a single master: ``LEADER``)."""
        if self._replica is None:
            return "LEADER"
        return self._replica.role

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
            self._close_catalog()

    # -- the driver -----------------------------------------------------------------------

    def _drive(self) -> None:
        next_tick = time.monotonic()
        while True:
            wait = max(0.0, next_tick - time.monotonic())
            if self.replicated:
                wait = min(wait, _LEADERSHIP_POLL)
            try:
                task = self._inbox.get(timeout=wait)
            except queue.Empty:
                task = ()  # type: ignore[assignment]
            if task is None:
                self._fail_pending()
                return
            self._follow_leadership()
            if task:
                fn, future = task
                try:
                    if self._state is None:
                        raise self._not_leader()
                    result = fn(self._state, time.monotonic())
                except BaseException as exc:
                    exc = self._catalog_failure(exc)
                    if future is not None:
                        future.set_exception(exc)
                    elif not isinstance(exc, NotTheLeader | OperationalError):
                        log.exception("master task failed")
                else:
                    if future is not None:
                        future.set_result(result)
            now = time.monotonic()
            if now >= next_tick:
                if self._state is not None:
                    try:
                        self._send(self._state, self._state.tick(now))
                    except Exception as exc:
                        if not isinstance(self._catalog_failure(exc), OperationalError):
                            log.exception("master tick failed")
                next_tick = now + self._tick_interval

    def _follow_leadership(self) -> None:
        """Load the catalog when the replica became a ready leader; drop it when the
        replica is not the leader of the term it was loaded in (driver thread)."""
        replica = self._replica
        if replica is None:
            return
        if self._state is not None and (
            not replica.replica.is_leader or replica.term != self._state_term
        ):
            self._state = None
            log.info("master %s lost the leadership (term %d)", replica.me, replica.term)
        if self._state is None and replica.ready_leader():
            term = replica.term
            self._state = MasterState(replica, self._rng, self._options)
            self._state_term = term
            log.info("master %s is the leader master (term %d): catalog loaded", replica.me, term)

    def _catalog_failure(self, exc: BaseException) -> BaseException:
        """A catalog write that failed leaves the in-memory catalog unsure: stop serving
        until the replica is a ready leader again. The error the caller sees."""
        if isinstance(exc, CatalogNotLeader):
            self._state = None
            return self._not_leader()
        if isinstance(exc, CatalogWriteUncertain):
            self._state = None
            log.warning("catalog write failed: %s", exc)
            return OperationalError(str(exc))
        return exc

    def _not_leader(self) -> NotTheLeader:
        replica = self._replica
        assert replica is not None
        leader = replica.leader
        if leader == replica.me:
            why = (
                f"master {replica.me} was just elected leader master and is loading the "
                "catalog; try again"
            )
        else:
            known = leader or "not known yet (an election may be under way)"
            why = f"master {replica.me} is not the leader master; the leader is {known}"
        return NotTheLeader.naming(why, leader, leader)

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
            try:
                result = self._run(done)
            except NotTheLeader:
                # The DDL is committed; this master no longer serves. The answer says
                # "not done" and the client polls the leader master.
                return False
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

    def _consensus(self, r: ConsensusRequest) -> ConsensusAck:
        replica = self._replica
        if replica is None or r.tablet_id != SYS_CATALOG_TABLET_ID:
            raise MalformedMessage(
                f"master {self.address} hosts no replica of tablet {r.tablet_id!r}"
            )
        messages = [
            decode_message(m, f"tserver_consensus.messages[{i}]") for i, m in enumerate(r.messages)
        ]
        for m in messages:
            if m.dest_uuid != replica.me:
                raise MalformedMessage(
                    f"a consensus message for master {m.dest_uuid} reached {replica.me}"
                )
        for m in messages:
            replica.receive(m)
        return ConsensusAck(r.tablet_id, len(messages))

    def _master_status(self, r: GetMasterStatus) -> MasterStatus:
        replica = self._replica
        if replica is None:
            return MasterStatus(str(self.address), "LEADER", 0, str(self.address), [])
        return MasterStatus(
            replica.me,
            "LEADER"
            if self._state is not None
            else ("LEADER (loading)" if replica.replica.is_leader else replica.role),
            replica.term,
            replica.leader,
            list(self.masters),
        )

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
