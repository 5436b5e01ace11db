"""The master's catalog and DDL protocol as a pure state machine.

It owns the catalog (tables, tablets and where each tablet lives), the registry of tablet
servers (from their heartbeats), placement of new tablets, and the DDL protocol: create,
alter and drop a table by asking tablet servers to create, alter and delete tablets until
their reports show it done. It has no clock, thread, socket or file: every input carries
``now``, randomness comes from the ``random.Random`` it is given, and its durable records
go through a ``CatalogStore``.

Invariants:

* Write-ahead: every input first writes the records it changes to the store as one atomic
  batch, then changes the in-memory catalog, then returns the requests to send. So every
  request it returns is backed by a stored record, and a master rebuilt from the store
  (``master_restart``) finishes what the old one started: it re-sends what its records
  still need on ``tick`` (roll forward).
* Requests are idempotent on the tablet server, so the driver may lose, duplicate or
  reorder them; the master re-sends what is still needed every ``request_retry_interval``.
* A table is RUNNING only when every tablet of it is RUNNING and reported (by the server
  it is assigned to) at the table's schema version.
* A tablet id names the same replicas on the same servers for its whole life: a tablet
  that fails to create within ``tablet_creation_timeout`` is REPLACED by a new tablet (new
  id) covering the same partition, and the old id is deleted wherever it shows up.
* A table's ``num_replicas`` replicas of each tablet are on distinct tablet servers. A
  tablet of a replicated table (``num_replicas`` > 1) becomes RUNNING only when a replica
  reports itself LEADER (Kudu: an elected leader); the master remembers, per tablet, the
  leader of the highest term reported (soft state). A deleted tablet's record goes only
  once every replica's server confirms the delete.
* The registry of tablet servers is soft state: after a restart the master knows no
  server until it sends a full tablet report.
* Re-replication (Kudu's, the paper's §3.4.2): a replicated tablet's replicas follow the
  newest committed Raft config any replica reports (its opid index only grows, kept in
  the record). While that config has fewer voters than the table's replication factor
  and no learner, the master asks the leader to ADD one live server that is not a member
  (``ChangeConfigRequest``, compare-and-set on the config's opid index), the same server
  until the config moves, re-sent every ``request_retry_interval``: at most one change
  per tablet is pending. The master never removes a member (the leader evicts failed
  ones); it deletes a reported replica only when its server is not a member and that
  replica's own committed config is older than the master's (an evicted replica), never
  one that may be a new member whose config the master has not seen yet.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from kudusql.cluster.catalog.records import (
    METADATA_ENTRY,
    TABLES_ENTRY,
    TABLETS_ENTRY,
    CatalogCorruptionError,
    CatalogRecord,
    MetadataRecord,
    RecordKey,
    TableRecord,
    TableState,
    TabletRecord,
    TabletState,
    decode_record,
    encode_record,
)
from kudusql.cluster.catalog.store import CatalogStore, RecordWrite
from kudusql.cluster.master_protocol import (
    AlterTabletRequest,
    ChangeConfigRequest,
    CreateTabletRequest,
    DeleteTabletRequest,
    HeartbeatResponse,
    ReportedTablet,
    TabletReport,
    TabletServerRequest,
)
from kudusql.cluster.placement import RECENT_PICKS_HALF_LIFE, RecentPicks, pick_tserver

#: Tablet states whose replica the master is still asking a server to delete.
_BEING_DELETED = (TabletState.DELETED, TabletState.REPLACED)


@dataclass(frozen=True)
class MasterOptions:
    """The master's timeouts, in seconds (Kudu's defaults)."""

    #: A server silent this long is unavailable for placement (Kudu: 60 s).
    tserver_unresponsive_timeout: float = 60.0
    #: A tablet not reported RUNNING this long after the first create request is replaced
    #: (Kudu: 30 s).
    tablet_creation_timeout: float = 30.0
    #: How often a request still needed is sent again.
    request_retry_interval: float = 1.0
    recent_picks_half_life: float = RECENT_PICKS_HALF_LIFE
    #: The replication factor of a table created without one (None: 3 when at least 3
    #: tablet servers are live, else 1).
    default_num_replicas: int | None = None


#: Kudu's ``--default_num_replicas``.
DEFAULT_NUM_REPLICAS = 3


class CatalogError(Exception):
    """A DDL request the catalog refuses; the message is for the user."""


class TableNotFound(CatalogError):
    """The request names a table the catalog does not have (or has dropped)."""


class TableAlreadyExists(CatalogError):
    """The request would give a second live table the same name."""


class NoLiveTabletServers(CatalogError):
    """A create found too few live tablet servers to place tablets on (retry later)."""


class ReplicationNotSupported(CatalogError):
    """The request needs what replicated tables do not support yet (altering one)."""


#: A replica's role in tablet locations (Kudu's ``RaftPeerPB.Role`` names).
LEADER = "LEADER"
FOLLOWER = "FOLLOWER"
LEARNER = "LEARNER"


@dataclass(frozen=True)
class ReportedConfig:
    """A replicated tablet's committed Raft config as a replica reported it."""

    index: int
    voters: tuple[str, ...]
    non_voters: tuple[str, ...]

    @property
    def members(self) -> tuple[str, ...]:
        return (*self.voters, *self.non_voters)


@dataclass(frozen=True)
class ReplicaLocation:
    """One replica of a tablet in tablet locations: its server, address and role."""

    tserver_uuid: str
    address: str
    role: str


@dataclass
class TabletServerDescriptor:
    """What the master knows of a registered tablet server (soft state)."""

    uuid: str
    address: str
    incarnation: int
    last_sequence_number: int
    last_heartbeat: float


@dataclass(frozen=True)
class TabletLocation:
    """A RUNNING tablet and the server that hosts it, as the master serves it to clients.

    ``tserver_uuid`` and ``address`` name the leader's server (the only replica's for an
    unreplicated tablet; the first replica's while no leader is known); ``replicas``
    lists every replica, the leader first."""

    tablet_id: str
    partition: str
    tserver_uuid: str
    address: str
    replicas: tuple[ReplicaLocation, ...] = ()


@dataclass(frozen=True)
class DdlResult:
    """A DDL input's result: the table's id and the requests to send."""

    table_id: str
    requests: tuple[TabletServerRequest, ...]


@dataclass(frozen=True)
class HeartbeatResult:
    """A heartbeat's result: the answer to the server and the requests to send."""

    response: HeartbeatResponse
    requests: tuple[TabletServerRequest, ...]


@dataclass
class _Batch:
    """Records to write together: a put per changed record, ``None`` for a deleted one."""

    changes: dict[RecordKey, CatalogRecord | None] = field(default_factory=dict)

    def put(self, record: CatalogRecord) -> None:
        self.changes[record.key] = record

    def delete(self, key: RecordKey) -> None:
        self.changes[key] = None


class MasterState:
    """The catalog manager: inputs in, durable records out through the store, requests out."""

    def __init__(
        self, store: CatalogStore, rng: random.Random, options: MasterOptions | None = None
    ) -> None:
        self._store = store
        self._rng = rng
        self.options = options or MasterOptions()
        self.master_restart()

    # -- recovery -------------------------------------------------------------------------

    def master_restart(self) -> None:
        """Forget everything but the store, and rebuild the catalog from its records."""
        self._tables: dict[str, TableRecord] = {}
        self._tablets: dict[str, TabletRecord] = {}
        self._metadata: dict[str, MetadataRecord] = {}
        for key, value in self._store.scan():
            record = decode_record(key, value)
            if isinstance(record, TableRecord):
                self._tables[record.table_id] = record
            elif isinstance(record, MetadataRecord):
                self._metadata[record.name] = record
            else:
                self._tablets[record.tablet_id] = record
        self._tablets_of: dict[str, list[str]] = {t: [] for t in self._tables}
        for tablet in self._tablets.values():
            if tablet.table_id not in self._tablets_of:
                raise CatalogCorruptionError(
                    f"catalog tablet {tablet.tablet_id!r} belongs to no table"
                )
            self._tablets_of[tablet.table_id].append(tablet.tablet_id)
        # Soft state: rebuilt from heartbeats and reports.
        self._tservers: dict[str, TabletServerDescriptor] = {}
        self._reported_version: dict[str, int] = {}
        #: Tablet id -> the servers whose reports show they host it.
        self._reported_on: dict[str, set[str]] = {}
        #: Tablet id -> (highest term reported, its leader's server or None).
        self._leader: dict[str, tuple[int, str | None]] = {}
        #: Tablet id (being deleted) -> the servers that confirmed its replica is gone.
        self._deleted_on: dict[str, set[str]] = {}
        self._create_deadline: dict[str, float] = {}
        self._last_sent: dict[tuple[str, str, str], float] = {}
        #: Tablet id -> the newest committed Raft config reported for it.
        self._config: dict[str, ReportedConfig] = {}
        #: Tablet id -> (config opid index, server) of the ADD the master asks for.
        self._pending_add: dict[str, tuple[int, str]] = {}
        #: (tablet id, server) -> the config opid index of a replica reported on a
        #: server that is not a member, until it is deleted or becomes a member.
        self._outside: dict[tuple[str, str], int] = {}
        #: (tablet id, server) -> the config opid index that server's replica reported.
        self._replica_config: dict[tuple[str, str], int] = {}
        self._recent = RecentPicks(self.options.recent_picks_half_life)

    # -- queries --------------------------------------------------------------------------

    def durable_records(self) -> list[CatalogRecord]:
        """The in-memory catalog's records (equal to the store's after every input)."""
        return [*self._tables.values(), *self._tablets.values(), *self._metadata.values()]

    def metadata_document(self, name: str) -> str | None:
        """The body of the clients' document ``name``, or None."""
        doc = self._metadata.get(name)
        return None if doc is None else doc.body

    def put_metadata_document(self, name: str, body: str) -> None:
        """Keep (replace) the clients' document ``name`` durably."""
        if not name:
            raise CatalogError("a metadata document needs a name")
        batch = _Batch()
        batch.put(MetadataRecord(name, body))
        self._commit(batch)

    def tables(self) -> list[TableRecord]:
        return list(self._tables.values())

    def tablets(self) -> list[TabletRecord]:
        return list(self._tablets.values())

    def tablets_of(self, table_id: str) -> list[TabletRecord]:
        return [self._tablets[t] for t in self._tablets_of.get(table_id, ())]

    def reported_schema_version(self, tablet_id: str) -> int | None:
        return self._reported_version.get(tablet_id)

    def config_of(self, tablet_id: str) -> ReportedConfig | None:
        """The newest committed Raft config reported for the tablet, or None."""
        return self._config.get(tablet_id)

    def pending_add(self, tablet_id: str) -> tuple[int, str] | None:
        """The (config opid index, server) of the replica the master asks the tablet's
        leader to add, or None."""
        return self._pending_add.get(tablet_id)

    def leader_of(self, tablet_id: str) -> str | None:
        """The server of the tablet's leader as reported in the highest term, or None."""
        known = self._leader.get(tablet_id)
        return None if known is None else known[1]

    def table(self, name: str) -> TableRecord | None:
        """The table called ``name``, unless it is dropped."""
        for table in self._tables.values():
            if table.name == name and table.state is not TableState.REMOVED:
                return table
        return None

    def is_ddl_done(self, name: str) -> bool:
        """True when the table's last create or alter has finished (Kudu's IsCreateTableDone)."""
        table = self._require_table(name)
        return table.state is TableState.RUNNING

    def tablet_locations(self, name: str) -> list[TabletLocation]:
        """Every RUNNING tablet of the table and its replicas (none of a dropped table)."""
        table = self._require_table(name)
        out = []
        for tablet in self.tablets_of(table.table_id):
            if tablet.state is TabletState.RUNNING:
                leader = self.leader_of(tablet.tablet_id) if tablet.replicated else None
                if not tablet.replicated:
                    leader = tablet.tserver_uuid
                ordered = sorted(tablet.replica_uuids, key=lambda u: u != leader)
                config = self._config.get(tablet.tablet_id)
                learners = () if config is None else config.non_voters
                replicas = tuple(
                    ReplicaLocation(
                        u,
                        self._address(u),
                        LEADER if u == leader else LEARNER if u in learners else FOLLOWER,
                    )
                    for u in ordered
                )
                first = replicas[0]
                out.append(
                    TabletLocation(
                        tablet.tablet_id,
                        tablet.partition,
                        first.tserver_uuid,
                        first.address,
                        replicas,
                    )
                )
        return out

    def _address(self, uuid: str) -> str:
        desc = self._tservers.get(uuid)
        return desc.address if desc is not None else ""

    def tservers(self) -> list[TabletServerDescriptor]:
        return list(self._tservers.values())

    def is_live(self, uuid: str, now: float) -> bool:
        """A registered server heard from within ``tserver_unresponsive_timeout``."""
        desc = self._tservers.get(uuid)
        return (
            desc is not None
            and now - desc.last_heartbeat < self.options.tserver_unresponsive_timeout
        )

    def live_tservers(self, now: float) -> list[str]:
        return [u for u in self._tservers if self.is_live(u, now)]

    # -- DDL --------------------------------------------------------------------------------

    def create_table(
        self,
        name: str,
        schema: str,
        partitions: Sequence[str],
        now: float,
        metadata: str = "",
        num_replicas: int | None = None,
    ) -> DdlResult:
        """Create a table with one tablet per partition, each with ``num_replicas``
        replicas placed on distinct live servers; ``metadata`` is kept with the table for
        the client, unread. ``num_replicas`` None: the cluster's default
        (``default_num_replicas``)."""
        if not name:
            raise CatalogError("a table needs a name")
        if num_replicas is None:
            num_replicas = self.default_num_replicas(now)
        if num_replicas < 1:
            raise CatalogError(f"a table needs at least 1 replica, not {num_replicas}")
        if self.table(name) is not None:
            raise TableAlreadyExists(f"table {name!r} already exists")
        if len(set(partitions)) != len(partitions):
            raise CatalogError("a table needs distinct partitions")
        live = self.live_tservers(now) if partitions else []
        if partitions and not live:
            raise NoLiveTabletServers("no live tablet servers to place the table's tablets on")
        if partitions and len(live) < num_replicas:
            raise CatalogError(
                f"table {name!r} needs {num_replicas} replicas per tablet on distinct tablet"
                f" servers, and only {len(live)} are live"
            )
        # A table without partitions (a range-partitioned one with no range yet) has no
        # tablet whose report would complete its creation: it is complete now.
        state = TableState.PREPARING if partitions else TableState.RUNNING
        table = TableRecord(self._new_id(), name, schema, 0, state, metadata, num_replicas)
        batch = _Batch()
        batch.put(table)
        hosted = self._hosted()
        for partition in partitions:
            uuids = self._place(live, num_replicas, hosted, now)
            assert uuids is not None
            batch.put(
                TabletRecord(
                    self._new_id(),
                    table.table_id,
                    partition,
                    uuids[0],
                    TabletState.CREATING,
                    uuids[1:],
                )
            )
        self._commit(batch)
        return DdlResult(table.table_id, tuple(self._table_requests(table.table_id, now)))

    def default_num_replicas(self, now: float) -> int:
        """The replication factor of a table created without one: the option when set,
        else 3 when at least 3 tablet servers are live, else 1 (Kudu's
        ``--default_num_replicas`` is 3)."""
        if self.options.default_num_replicas is not None:
            return self.options.default_num_replicas
        return DEFAULT_NUM_REPLICAS if len(self.live_tservers(now)) >= DEFAULT_NUM_REPLICAS else 1

    def alter_table(
        self,
        name: str,
        now: float,
        *,
        schema: str | None = None,
        new_name: str | None = None,
        metadata: str | None = None,
        add_partitions: Sequence[str] = (),
        drop_tablets: Sequence[str] = (),
    ) -> DdlResult:
        """Change a table's schema, name and/or metadata, add tablets for new partitions
        (placed as a create places them) and delete the tablets of dropped ones; its
        tablets are brought to the new version."""
        table = self._require_table(name)
        if new_name is not None and new_name != name and self.table(new_name) is not None:
            raise TableAlreadyExists(f"table {new_name!r} already exists")
        if len(set(add_partitions)) != len(add_partitions):
            raise CatalogError("the partitions to add are not distinct")
        own = {t.tablet_id: t for t in self.tablets_of(table.table_id)}
        for tablet_id in drop_tablets:
            tablet = own.get(tablet_id)
            if tablet is None or tablet.state in _BEING_DELETED:
                raise CatalogError(f"table {name!r} has no tablet {tablet_id!r} to drop")
        live = self.live_tservers(now) if add_partitions else []
        if add_partitions and not live:
            raise CatalogError("no live tablet servers to place the table's tablets on")
        if add_partitions and len(live) < table.num_replicas:
            raise CatalogError(
                f"table {name!r} needs {table.num_replicas} replica(s) per tablet on distinct"
                f" tablet servers, and only {len(live)} are live"
            )
        state = TableState.PREPARING if table.state is TableState.PREPARING else TableState.ALTERING
        kept = [
            t
            for t in own.values()
            if t.state not in _BEING_DELETED and t.tablet_id not in drop_tablets
        ]
        if not kept and not add_partitions:
            # No tablet is left to bring to the new version (every range partition
            # dropped): the alter is complete now; no tablet report would complete it.
            state = TableState.RUNNING
        altered = replace(
            table,
            name=new_name if new_name is not None else table.name,
            schema=schema if schema is not None else table.schema,
            metadata=metadata if metadata is not None else table.metadata,
            schema_version=table.schema_version + 1,
            state=state,
        )
        batch = _Batch()
        batch.put(altered)
        for tablet_id in drop_tablets:
            batch.put(replace(own[tablet_id], state=TabletState.DELETED))
        hosted = self._hosted()
        for partition in add_partitions:
            uuids = self._place(live, table.num_replicas, hosted, now)
            assert uuids is not None
            batch.put(
                TabletRecord(
                    self._new_id(),
                    table.table_id,
                    partition,
                    uuids[0],
                    TabletState.CREATING,
                    uuids[1:],
                )
            )
        self._commit(batch)
        return DdlResult(table.table_id, tuple(self._table_requests(table.table_id, now)))

    def drop_table(self, name: str, now: float) -> DdlResult:
        """Drop a table: REMOVED at once, its tablets deleted on their servers until confirmed."""
        table = self._require_table(name)
        batch = _Batch()
        batch.put(replace(table, state=TableState.REMOVED))
        for tablet in self.tablets_of(table.table_id):
            if tablet.state not in _BEING_DELETED:
                batch.put(replace(tablet, state=TabletState.DELETED))
        self._commit(batch)
        return DdlResult(table.table_id, tuple(self._table_requests(table.table_id, now)))

    # -- tablet servers ---------------------------------------------------------------------

    def heartbeat(
        self, tserver_uuid: str, address: str, report: TabletReport, now: float
    ) -> HeartbeatResult:
        """A tablet server's heartbeat with its tablet report."""
        desc = self._tservers.get(tserver_uuid)
        if report.is_incremental and (desc is None or desc.incarnation != report.incarnation):
            # An unknown server (or a restarted one) must first tell everything it hosts.
            return HeartbeatResult(HeartbeatResponse(True, None), ())
        if desc is not None and (
            report.incarnation < desc.incarnation
            or (
                report.incarnation == desc.incarnation
                and report.sequence_number <= desc.last_sequence_number
            )
        ):
            # A report older than one already processed: it says nothing new.
            return HeartbeatResult(HeartbeatResponse(False, report.sequence_number), ())
        if desc is None:
            desc = TabletServerDescriptor(tserver_uuid, address, 0, -1, now)
            self._tservers[tserver_uuid] = desc
        desc.address = address
        desc.incarnation = report.incarnation
        desc.last_sequence_number = report.sequence_number
        desc.last_heartbeat = now
        requests = self._process_report(tserver_uuid, report, now)
        return HeartbeatResult(HeartbeatResponse(False, report.sequence_number), tuple(requests))

    def alter_tablet_response(
        self, tserver_uuid: str, tablet_id: str, schema_version: int, now: float
    ) -> list[TabletServerRequest]:
        """A server's answer to an alter: it holds ``tablet_id`` at ``schema_version``."""
        tablet = self._tablets.get(tablet_id)
        if (
            tablet is None
            or tserver_uuid not in tablet.replica_uuids
            or tablet.state is not TabletState.RUNNING
        ):
            return []
        self._note_version(tablet_id, schema_version)
        batch = _Batch()
        self._maybe_finish_table(tablet.table_id, batch)
        self._commit(batch)
        return []

    def delete_tablet_response(
        self, tserver_uuid: str, tablet_id: str, now: float
    ) -> list[TabletServerRequest]:
        """A server's answer to a delete: it no longer hosts ``tablet_id`` (deleted or absent)."""
        batch = _Batch()
        self._outside.pop((tablet_id, tserver_uuid), None)
        self._confirm_deleted(tserver_uuid, tablet_id, batch)
        self._commit(batch)
        return []

    def tick(self, now: float) -> list[TabletServerRequest]:
        """Time passes: replace tablets that failed to create, re-send what is still needed."""
        batch = _Batch()
        requests: list[TabletServerRequest] = []
        expired = []
        for tablet in list(self._tablets.values()):
            if tablet.state is TabletState.CREATING:
                deadline = self._create_deadline.setdefault(
                    tablet.tablet_id, now + self.options.tablet_creation_timeout
                )
                if now >= deadline:
                    expired.append(tablet)
        if expired:
            live = self.live_tservers(now)
            hosted = self._hosted()
            for tablet in expired:
                n = len(tablet.replica_uuids)
                others = [u for u in live if u not in tablet.replica_uuids]
                uuids = self._place(others if len(others) >= n else live, n, hosted, now)
                if uuids is None:
                    continue  # nowhere to go: keep asking the assigned servers
                batch.put(replace(tablet, state=TabletState.REPLACED))
                batch.put(
                    replace(
                        tablet,
                        tablet_id=self._new_id(),
                        tserver_uuid=uuids[0],
                        other_replicas=uuids[1:],
                    )
                )
            self._commit(batch)
        for table_id in list(self._tables):
            requests.extend(self._table_requests(table_id, now, only_due=True))
        requests.extend(self._rereplication_requests(now))
        requests.extend(self._evicted_deletes(now))
        return requests

    def _evicted_deletes(self, now: float) -> list[TabletServerRequest]:
        """A delete, due every ``request_retry_interval``, of each replica on a live
        non-member whose committed config is older than the tablet's (compare-and-set
        on that config, so it never deletes a newer replica copied there since)."""
        requests: list[TabletServerRequest] = []
        for (tablet_id, uuid), index in list(self._outside.items()):
            tablet = self._tablets.get(tablet_id)
            if tablet is None or uuid in tablet.replica_uuids or tablet.state in _BEING_DELETED:
                del self._outside[(tablet_id, uuid)]
                continue
            if (
                index < self._known_config_index(tablet)
                and self.is_live(uuid, now)
                and self._due("delete", tablet_id, uuid, now, only_due=True)
            ):
                requests.append(
                    DeleteTabletRequest(
                        uuid, tablet_id, "evicted: not in the tablet's Raft config", index
                    )
                )
        return requests

    def _rereplication_requests(self, now: float) -> list[TabletServerRequest]:
        """An ADD for each RUNNING replicated tablet whose committed config has fewer
        voters than its table's replication factor and no learner (see the module's
        invariants), due every ``request_retry_interval``."""
        requests: list[TabletServerRequest] = []
        live: list[str] | None = None
        hosted: dict[str, int] | None = None
        for tablet in self._tablets.values():
            tablet_id = tablet.tablet_id
            config = self._config.get(tablet_id)
            table = self._tables.get(tablet.table_id)
            if (
                tablet.state is not TabletState.RUNNING
                or not tablet.replicated
                or config is None
                or table is None
            ):
                continue
            if len(config.voters) >= table.num_replicas or config.non_voters:
                self._pending_add.pop(tablet_id, None)
                continue
            if set(config.members) != set(tablet.replica_uuids):
                continue  # the record has not followed this config yet
            leader = self.leader_of(tablet_id)
            if leader is None or leader not in config.voters or not self.is_live(leader, now):
                continue
            pending = self._pending_add.get(tablet_id)
            if (
                pending is None
                or pending[0] != config.index
                or pending[1] in config.members
                or not self.is_live(pending[1], now)
            ):
                if live is None:
                    live, hosted = self.live_tservers(now), self._hosted()
                assert hosted is not None
                chosen = self._place(
                    [u for u in live if u not in config.members], 1, dict(hosted), now
                )
                if chosen is None:
                    self._pending_add.pop(tablet_id, None)
                    continue  # no live server to add: the tablet stays under-replicated
                pending = (config.index, chosen[0])
                self._pending_add[tablet_id] = pending
                self._last_sent.pop(("change_config", tablet_id, pending[1]), None)
            target = pending[1]
            if self._due("change_config", tablet_id, target, now, only_due=True):
                requests.append(
                    ChangeConfigRequest(
                        leader, tablet_id, target, self._address(target), config.index
                    )
                )
        return requests

    # -- internals ----------------------------------------------------------------------------

    def _require_table(self, name: str) -> TableRecord:
        table = self.table(name)
        if table is None:
            raise TableNotFound(f"table {name!r} does not exist")
        return table

    def _new_id(self) -> str:
        return f"{self._rng.getrandbits(128):032x}"

    def _hosted(self) -> dict[str, int]:
        hosted: dict[str, int] = {}
        for tablet in self._tablets.values():
            if tablet.state in (TabletState.CREATING, TabletState.RUNNING):
                for uuid in tablet.replica_uuids:
                    hosted[uuid] = hosted.get(uuid, 0) + 1
        return hosted

    def _place(
        self, live: Sequence[str], n: int, hosted: dict[str, int], now: float
    ) -> tuple[str, ...] | None:
        """``n`` distinct servers among ``live`` for a tablet's replicas (power of two
        choices per replica, counted in ``hosted``), or None when too few are live."""
        if len(live) < n:
            return None
        chosen: list[str] = []
        for _ in range(n):
            uuid = pick_tserver(
                [u for u in live if u not in chosen], hosted, self._recent, self._rng, now
            )
            assert uuid is not None
            hosted[uuid] = hosted.get(uuid, 0) + 1
            chosen.append(uuid)
        return tuple(chosen)

    def _commit(self, batch: _Batch) -> None:
        """Write ``batch`` to the store, then apply it to the in-memory catalog."""
        if not batch.changes:
            return
        writes: list[RecordWrite] = [
            (key, None if record is None else encode_record(record))
            for key, record in batch.changes.items()
        ]
        self._store.write(writes)
        for key, record in batch.changes.items():
            if key[0] == TABLES_ENTRY:
                if record is None:
                    del self._tables[key[1]]
                    del self._tablets_of[key[1]]
                else:
                    assert isinstance(record, TableRecord)
                    self._tables[key[1]] = record
                    self._tablets_of.setdefault(key[1], [])
        for key, record in batch.changes.items():
            if key[0] == METADATA_ENTRY:
                if record is None:
                    self._metadata.pop(key[1], None)
                else:
                    assert isinstance(record, MetadataRecord)
                    self._metadata[key[1]] = record
        for key, record in batch.changes.items():
            if key[0] == TABLETS_ENTRY:
                old = self._tablets.get(key[1])
                if record is None:
                    if old is not None:
                        del self._tablets[key[1]]
                        siblings = self._tablets_of.get(old.table_id)
                        if siblings is not None:
                            siblings.remove(key[1])
                    self._forget_soft_state(key[1])
                else:
                    assert isinstance(record, TabletRecord)
                    self._tablets[key[1]] = record
                    if old is None:
                        self._tablets_of[record.table_id].append(key[1])
                    if record.state is not TabletState.CREATING:
                        self._create_deadline.pop(key[1], None)

    def _forget_soft_state(self, tablet_id: str) -> None:
        self._reported_version.pop(tablet_id, None)
        self._create_deadline.pop(tablet_id, None)
        self._reported_on.pop(tablet_id, None)
        self._leader.pop(tablet_id, None)
        self._deleted_on.pop(tablet_id, None)
        self._config.pop(tablet_id, None)
        self._pending_add.pop(tablet_id, None)
        for pair in [k for k in self._outside if k[0] == tablet_id]:
            del self._outside[pair]
        for pair in [k for k in self._replica_config if k[0] == tablet_id]:
            del self._replica_config[pair]
        for key in [k for k in self._last_sent if k[1] == tablet_id]:
            del self._last_sent[key]

    def _due(self, kind: str, tablet_id: str, uuid: str, now: float, only_due: bool) -> bool:
        """Whether to send request ``kind`` for the tablet's replica on server ``uuid``
        now; records the send."""
        last = self._last_sent.get((kind, tablet_id, uuid))
        if only_due and last is not None and now - last < self.options.request_retry_interval:
            return False
        self._last_sent[(kind, tablet_id, uuid)] = now
        return True

    def _table_requests(
        self, table_id: str, now: float, only_due: bool = False
    ) -> Iterable[TabletServerRequest]:
        """The requests the table's records still need (all of them, or those due again)."""
        table = self._tables[table_id]
        for tablet in self.tablets_of(table_id):
            tablet_id = tablet.tablet_id
            if tablet.state in _BEING_DELETED:
                reason = "table dropped" if tablet.state is TabletState.DELETED else "replaced"
                confirmed = self._deleted_on.get(tablet_id, set())
                for uuid in tablet.replica_uuids:
                    if uuid not in confirmed and self._due(
                        "delete", tablet_id, uuid, now, only_due
                    ):
                        yield DeleteTabletRequest(uuid, tablet_id, reason)
            elif tablet.state is TabletState.CREATING or (
                tablet.state is TabletState.RUNNING
                and tablet.replicated
                and tablet.config_index == 0
                and self._known_config_index(tablet) == 0
            ):
                # A replicated tablet runs once its leader reports; a replica of its first
                # config whose create was lost is asked again until its server reports it
                # (a replica added later arrives by tablet copy, never by a create).
                if tablet.state is TabletState.CREATING:
                    self._create_deadline.setdefault(
                        tablet_id, now + self.options.tablet_creation_timeout
                    )
                peers: tuple[tuple[str, str], ...] = ()
                if tablet.replicated:
                    peers = tuple((u, self._address(u)) for u in tablet.replica_uuids)
                    if not all(address for _, address in peers):
                        continue  # a peer's address is unknown until it reports: later
                reported = self._reported_on.get(tablet_id, set())
                for uuid in tablet.replica_uuids:
                    if uuid not in reported and self._due("create", tablet_id, uuid, now, only_due):
                        yield CreateTabletRequest(
                            uuid,
                            tablet_id,
                            table.table_id,
                            table.name,
                            tablet.partition,
                            table.schema,
                            table.schema_version,
                            peers,
                        )
            if (
                tablet.state is TabletState.RUNNING
                and table.state is not TableState.RUNNING
                and self._reported_version.get(tablet_id, -1) < table.schema_version
                and (target := self._alter_target(tablet)) is not None
                and self._due("alter", tablet_id, target, now, only_due)
            ):
                yield AlterTabletRequest(target, tablet_id, table.schema, table.schema_version)

    def _alter_target(self, tablet: TabletRecord) -> str | None:
        """Where a tablet's alter goes: its server, or a replicated tablet's leader (it
        replicates the alter through the tablet's log and answers once it is committed;
        None while no leader is known)."""
        if not tablet.replicated:
            return tablet.tserver_uuid
        return self.leader_of(tablet.tablet_id)

    def _note_role(self, tablet_id: str, uuid: str, role: str | None, term: int | None) -> None:
        """A replica reported its Raft role in ``term``: a higher term replaces what is
        known (its leader: this replica if it leads, else unknown); a LEADER report in the
        known term names that term's leader."""
        if role is None or term is None:
            return
        known_term, _ = self._leader.get(tablet_id, (-1, None))
        if term > known_term:
            self._leader[tablet_id] = (term, uuid if role == LEADER else None)
        elif term == known_term and role == LEADER:
            self._leader[tablet_id] = (term, uuid)

    def _known_config_index(self, tablet: TabletRecord) -> int:
        config = self._config.get(tablet.tablet_id)
        return max(tablet.config_index, -1 if config is None else config.index)

    def _note_config(self, tablet: TabletRecord, info: ReportedTablet, batch: _Batch) -> None:
        """A replica reported its committed config: a newer one than known becomes the
        tablet's, and its members the record's replicas (kept in their order)."""
        if info.config_index is None or not info.voters:
            return
        known = self._config.get(tablet.tablet_id)
        if known is None or info.config_index > known.index:
            known = ReportedConfig(info.config_index, info.voters, info.non_voters)
            self._config[tablet.tablet_id] = known
        config = known
        if tablet.state is not TabletState.RUNNING or config.index <= tablet.config_index:
            return
        members = config.members
        if len(members) < 2:
            return  # the record keeps a replicated tablet's shape
        ordered = [u for u in tablet.replica_uuids if u in members]
        ordered += [u for u in members if u not in ordered]
        for gone in tablet.replica_uuids:
            reported = self._replica_config.get((tablet.tablet_id, gone))
            if gone not in members and reported is not None:
                self._outside[(tablet.tablet_id, gone)] = reported
        batch.put(
            replace(
                tablet,
                tserver_uuid=ordered[0],
                other_replicas=tuple(ordered[1:]),
                config_index=config.index,
            )
        )

    def _note_version(self, tablet_id: str, version: int) -> None:
        self._reported_version[tablet_id] = max(version, self._reported_version.get(tablet_id, -1))

    def _view(self, tablet_id: str, batch: _Batch) -> TabletRecord | None:
        key = (TABLETS_ENTRY, tablet_id)
        if key in batch.changes:
            record = batch.changes[key]
            assert record is None or isinstance(record, TabletRecord)
            return record
        return self._tablets.get(tablet_id)

    def _maybe_finish_table(self, table_id: str, batch: _Batch) -> None:
        """Mark the table RUNNING in ``batch`` if its create or alter is now complete."""
        table = self._tables.get(table_id)
        if table is None or table.state not in (TableState.PREPARING, TableState.ALTERING):
            return
        for tablet_id in self._tablets_of[table_id]:
            tablet = self._view(tablet_id, batch)
            if tablet is None or tablet.state in _BEING_DELETED:
                continue  # replaced, or its partition dropped: not part of the table
            if tablet.state is not TabletState.RUNNING:
                return
            if self._reported_version.get(tablet_id, -1) < table.schema_version:
                return
        batch.put(replace(table, state=TableState.RUNNING))

    def _confirm_deleted(self, tserver_uuid: str, tablet_id: str, batch: _Batch) -> None:
        """The server no longer hosts the tablet: a tablet being deleted is gone for good
        once every replica's server has said so."""
        self._outside.pop((tablet_id, tserver_uuid), None)
        self._replica_config.pop((tablet_id, tserver_uuid), None)
        tablet = self._view(tablet_id, batch)
        if tablet is None or tserver_uuid not in tablet.replica_uuids:
            return
        self._reported_on.get(tablet_id, set()).discard(tserver_uuid)
        if tablet.state not in _BEING_DELETED:
            return
        confirmed = self._deleted_on.setdefault(tablet_id, set())
        confirmed.add(tserver_uuid)
        if not confirmed.issuperset(tablet.replica_uuids):
            return
        batch.delete(tablet.key)
        table = self._tables[tablet.table_id]
        if table.state is TableState.REMOVED and all(
            self._view(t, batch) is None for t in self._tablets_of[table.table_id]
        ):
            batch.delete(table.key)

    def _process_report(
        self, tserver_uuid: str, report: TabletReport, now: float
    ) -> list[TabletServerRequest]:
        """Reconcile the catalog with what the server says it hosts (Kudu's report handling)."""
        batch = _Batch()
        requests: list[TabletServerRequest] = []
        reported = {t.tablet_id: t for t in report.updated_tablets}
        if not report.is_incremental:
            for known in list(self._tablets.values()):
                if tserver_uuid in known.replica_uuids and known.tablet_id not in reported:
                    self._confirm_deleted(tserver_uuid, known.tablet_id, batch)
        for tablet_id in report.removed_tablet_ids:
            self._confirm_deleted(tserver_uuid, tablet_id, batch)
        touched: set[str] = set()
        for tablet_id, info in reported.items():
            tablet = self._tablets.get(tablet_id)
            if tablet is not None and tablet.replicated:
                if info.config_index is not None:
                    self._replica_config[(tablet_id, tserver_uuid)] = info.config_index
                self._note_config(tablet, info, batch)
                tablet = self._view(tablet_id, batch)
            if tablet is None:
                requests.append(
                    DeleteTabletRequest(tserver_uuid, tablet_id, "orphan: not in the catalog")
                )
            elif (
                tablet.replicated
                and tserver_uuid not in tablet.replica_uuids
                and tablet.state not in _BEING_DELETED
            ):
                # Not a member: deleted once its committed config is older than the
                # tablet's (evicted); one as new may be a member the master has not seen.
                if info.config_index is not None:
                    self._outside[(tablet_id, tserver_uuid)] = info.config_index
            elif tserver_uuid not in tablet.replica_uuids:
                requests.append(
                    DeleteTabletRequest(tserver_uuid, tablet_id, "not assigned to this server")
                )
            elif tablet.state in _BEING_DELETED:
                reason = "table dropped" if tablet.state is TabletState.DELETED else "replaced"
                self._last_sent[("delete", tablet_id, tserver_uuid)] = now
                self._deleted_on.get(tablet_id, set()).discard(tserver_uuid)
                requests.append(DeleteTabletRequest(tserver_uuid, tablet_id, reason))
            else:
                self._note_version(tablet_id, info.schema_version)
                self._reported_on.setdefault(tablet_id, set()).add(tserver_uuid)
                if tablet.replicated:
                    self._note_role(tablet_id, tserver_uuid, info.role, info.term)
                if tablet.state is TabletState.CREATING and (
                    not tablet.replicated or self.leader_of(tablet_id) is not None
                ):
                    batch.put(replace(tablet, state=TabletState.RUNNING))
                    if tablet.replicated:
                        # A config that moved while it was creating: the record follows.
                        running = self._view(tablet_id, batch)
                        assert running is not None
                        self._note_config(running, info, batch)
                touched.add(tablet.table_id)
        for table_id in touched:
            self._maybe_finish_table(table_id, batch)
        self._commit(batch)
        for table_id in touched:
            if table_id in self._tables:
                requests.extend(self._table_requests(table_id, now, only_due=True))
        requests.extend(self._rereplication_requests(now))
        requests.extend(self._evicted_deletes(now))
        return requests
