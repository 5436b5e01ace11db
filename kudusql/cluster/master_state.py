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
* A tablet id names one replica on one server for its whole life: a tablet that fails to
  create within ``tablet_creation_timeout`` is REPLACED by a new tablet (new id) covering
  the same partition, and the old id is deleted wherever it shows up.
* The registry of tablet servers is soft state: after a restart the master knows no
  server until it sends a full tablet report.
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
    CreateTabletRequest,
    DeleteTabletRequest,
    HeartbeatResponse,
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


class CatalogError(Exception):
    """A DDL request the catalog refuses; the message is for the user."""


class TableNotFound(CatalogError):
    """The request names a table the catalog does not have (or has dropped)."""


class TableAlreadyExists(CatalogError):
    """The request would give a second live table the same name."""


class NoLiveTabletServers(CatalogError):
    """A create found no live tablet server to place tablets on (retry later)."""


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
    """A RUNNING tablet and the server that hosts it, as the master serves it to clients."""

    tablet_id: str
    partition: str
    tserver_uuid: str
    address: str


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
        self._create_deadline: dict[str, float] = {}
        self._last_sent: dict[tuple[str, str], float] = {}
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
        """Every RUNNING tablet of the table and its server (none of a dropped table)."""
        table = self._require_table(name)
        out = []
        for tablet in self.tablets_of(table.table_id):
            if tablet.state is TabletState.RUNNING:
                desc = self._tservers.get(tablet.tserver_uuid)
                address = desc.address if desc is not None else ""
                out.append(
                    TabletLocation(tablet.tablet_id, tablet.partition, tablet.tserver_uuid, address)
                )
        return out

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
        self, name: str, schema: str, partitions: Sequence[str], now: float, metadata: str = ""
    ) -> DdlResult:
        """Create a table with one tablet per partition, placed on live servers;
        ``metadata`` is kept with the table for the client, unread."""
        if not name:
            raise CatalogError("a table needs a name")
        if self.table(name) is not None:
            raise TableAlreadyExists(f"table {name!r} already exists")
        if len(set(partitions)) != len(partitions):
            raise CatalogError("a table needs distinct partitions")
        live = self.live_tservers(now) if partitions else []
        if partitions and not live:
            raise NoLiveTabletServers("no live tablet servers to place the table's tablets on")
        # A table without partitions (a range-partitioned one with no range yet) has no
        # tablet whose report would complete its creation: it is complete now.
        state = TableState.PREPARING if partitions else TableState.RUNNING
        table = TableRecord(self._new_id(), name, schema, 0, state, metadata)
        batch = _Batch()
        batch.put(table)
        hosted = self._hosted()
        for partition in partitions:
            uuid = pick_tserver(live, hosted, self._recent, self._rng, now)
            assert uuid is not None
            hosted[uuid] = hosted.get(uuid, 0) + 1
            batch.put(
                TabletRecord(self._new_id(), table.table_id, partition, uuid, TabletState.CREATING)
            )
        self._commit(batch)
        return DdlResult(table.table_id, tuple(self._table_requests(table.table_id, now)))

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
            uuid = pick_tserver(live, hosted, self._recent, self._rng, now)
            assert uuid is not None
            hosted[uuid] = hosted.get(uuid, 0) + 1
            batch.put(
                TabletRecord(self._new_id(), table.table_id, partition, uuid, TabletState.CREATING)
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
            or tablet.tserver_uuid != tserver_uuid
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
                others = [u for u in live if u != tablet.tserver_uuid]
                uuid = pick_tserver(others or live, hosted, self._recent, self._rng, now)
                if uuid is None:
                    continue  # nowhere to go: keep asking the assigned server
                hosted[uuid] = hosted.get(uuid, 0) + 1
                batch.put(replace(tablet, state=TabletState.REPLACED))
                batch.put(replace(tablet, tablet_id=self._new_id(), tserver_uuid=uuid))
            self._commit(batch)
        for table_id in list(self._tables):
            requests.extend(self._table_requests(table_id, now, only_due=True))
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
                hosted[tablet.tserver_uuid] = hosted.get(tablet.tserver_uuid, 0) + 1
        return hosted

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
        for kind in ("create", "alter", "delete"):
            self._last_sent.pop((kind, tablet_id), None)

    def _due(self, kind: str, tablet_id: str, now: float, only_due: bool) -> bool:
        """Whether to send request ``kind`` for the tablet now; records the send."""
        last = self._last_sent.get((kind, tablet_id))
        if only_due and last is not None and now - last < self.options.request_retry_interval:
            return False
        self._last_sent[(kind, tablet_id)] = now
        return True

    def _table_requests(
        self, table_id: str, now: float, only_due: bool = False
    ) -> Iterable[TabletServerRequest]:
        """The requests the table's records still need (all of them, or those due again)."""
        table = self._tables[table_id]
        for tablet in self.tablets_of(table_id):
            if tablet.state in _BEING_DELETED:
                if self._due("delete", tablet.tablet_id, now, only_due):
                    reason = "table dropped" if tablet.state is TabletState.DELETED else "replaced"
                    yield DeleteTabletRequest(tablet.tserver_uuid, tablet.tablet_id, reason)
            elif tablet.state is TabletState.CREATING:
                self._create_deadline.setdefault(
                    tablet.tablet_id, now + self.options.tablet_creation_timeout
                )
                if self._due("create", tablet.tablet_id, now, only_due):
                    yield CreateTabletRequest(
                        tablet.tserver_uuid,
                        tablet.tablet_id,
                        table.table_id,
                        table.name,
                        tablet.partition,
                        table.schema,
                        table.schema_version,
                    )
            elif (
                tablet.state is TabletState.RUNNING
                and table.state is not TableState.RUNNING
                and self._reported_version.get(tablet.tablet_id, -1) < table.schema_version
                and self._due("alter", tablet.tablet_id, now, only_due)
            ):
                yield AlterTabletRequest(
                    tablet.tserver_uuid, tablet.tablet_id, table.schema, table.schema_version
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
        """The server no longer hosts the tablet: a tablet being deleted there is gone for good."""
        tablet = self._view(tablet_id, batch)
        if (
            tablet is None
            or tablet.tserver_uuid != tserver_uuid
            or tablet.state not in _BEING_DELETED
        ):
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
        reported = {t.tablet_id: t.schema_version for t in report.updated_tablets}
        if not report.is_incremental:
            for known in list(self._tablets.values()):
                if known.tserver_uuid == tserver_uuid and known.tablet_id not in reported:
                    self._confirm_deleted(tserver_uuid, known.tablet_id, batch)
        for tablet_id in report.removed_tablet_ids:
            self._confirm_deleted(tserver_uuid, tablet_id, batch)
        touched: set[str] = set()
        for tablet_id, version in reported.items():
            tablet = self._tablets.get(tablet_id)
            if tablet is None:
                requests.append(
                    DeleteTabletRequest(tserver_uuid, tablet_id, "orphan: not in the catalog")
                )
            elif tablet.tserver_uuid != tserver_uuid:
                requests.append(
                    DeleteTabletRequest(tserver_uuid, tablet_id, "not assigned to this server")
                )
            elif tablet.state in _BEING_DELETED:
                reason = "table dropped" if tablet.state is TabletState.DELETED else "replaced"
                self._last_sent[("delete", tablet_id)] = now
                requests.append(DeleteTabletRequest(tserver_uuid, tablet_id, reason))
            else:
                self._note_version(tablet_id, version)
                if tablet.state is TabletState.CREATING:
                    batch.put(replace(tablet, state=TabletState.RUNNING))
                touched.add(tablet.table_id)
        for table_id in touched:
            self._maybe_finish_table(table_id, batch)
        self._commit(batch)
        for table_id in touched:
            if table_id in self._tables:
                requests.extend(self._table_requests(table_id, now, only_due=True))
        return requests
