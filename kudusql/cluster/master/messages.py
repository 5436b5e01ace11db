"""The master's wire messages (registered with ``kudusql.cluster.messages``).

Every call is a Flight action. Clients create, alter, drop and look up tables and ask
where their tablets live. The tablet servers' heartbeats, which the master serves too,
are in ``kudusql.cluster.heartbeat_messages``. Wire format: FORMAT.md in this package.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from kudusql.cluster.messages import Request, Response, message

__all__ = [
    "AlterTable",
    "CreateTable",
    "DdlResponse",
    "DropTable",
    "GetMasterStatus",
    "GetTable",
    "GetTableLocations",
    "ListTables",
    "ListTablesResponse",
    "ListTabletServers",
    "ListTabletServersResponse",
    "MasterStatus",
    "ReplicaLocationInfo",
    "TableInfo",
    "TableLocationsResponse",
    "TabletLocationInfo",
    "TabletServerInfo",
]


# -- clients -------------------------------------------------------------------------------


@message("master_ddl_response")
@dataclass(frozen=True)
class DdlResponse(Response):
    """A DDL request is durable in the catalog: the table's id, and whether the servers
    have finished it (only ``true`` when the request waited and it finished in time)."""

    table_id: str
    ddl_done: bool


@message("master_create_table")
@dataclass(frozen=True)
class CreateTable(Request):
    """Create a table with one tablet per partition. ``schema`` is ``Schema.to_dict()``
    JSON text; ``partitions`` are the client's opaque partition strings (distinct);
    ``metadata`` is opaque JSON text the master keeps with the table. ``wait_seconds``
    > 0 waits up to that long for the tablets to be RUNNING. ``num_replicas``
    (optional; absent or null: the cluster's default, 3 when at least 3 tablet servers
    are live, else 1): each tablet's replicas, on distinct live tablet servers; a
    replicated tablet is RUNNING once its replicas elect a leader. Not idempotent (a
    retry after a lost answer finds the table existing)."""

    RESPONSE: ClassVar[type[Response]] = DdlResponse
    name: str
    schema: str
    partitions: list[str]
    metadata: str = ""
    wait_seconds: float = 0.0
    num_replicas: int | None = None


@message("master_alter_table")
@dataclass(frozen=True)
class AlterTable(Request):
    """Change a table's schema, name and/or metadata (null: unchanged), add a tablet
    for each of ``add_partitions`` and delete the tablets ``drop_tablets`` (ADD and DROP
    RANGE PARTITION); the schema version goes up by one and every tablet is brought to
    it. ``wait_seconds`` as in CreateTable."""

    RESPONSE: ClassVar[type[Response]] = DdlResponse
    name: str
    schema: str | None = None
    new_name: str | None = None
    metadata: str | None = None
    wait_seconds: float = 0.0
    add_partitions: list[str] = field(default_factory=list)
    drop_tablets: list[str] = field(default_factory=list)


@message("master_drop_table")
@dataclass(frozen=True)
class DropTable(Request):
    """Drop a table: it is gone for clients at once; its tablets are deleted on their
    servers. ``wait_seconds`` > 0 waits until every tablet's delete is confirmed."""

    RESPONSE: ClassVar[type[Response]] = DdlResponse
    name: str
    wait_seconds: float = 0.0


@message("master_table_info")
@dataclass(frozen=True)
class TableInfo(Response):
    """A table as the catalog has it. ``state`` is PREPARING, RUNNING or ALTERING;
    ``ddl_done`` is true when its last create or alter has finished on every tablet."""

    table_id: str
    name: str
    schema: str
    schema_version: int
    metadata: str
    state: str
    ddl_done: bool
    #: The table's replication factor (optional: 1 from masters that predate it).
    num_replicas: int = 1


@message("master_get_table")
@dataclass(frozen=True)
class GetTable(Request):
    """A table by name (``KuduNotFound`` when there is none)."""

    RESPONSE: ClassVar[type[Response]] = TableInfo
    IDEMPOTENT: ClassVar[bool] = True
    name: str


@message("master_list_tables_response")
@dataclass(frozen=True)
class ListTablesResponse(Response):
    """The names of every table not dropped, sorted."""

    names: list[str]


@message("master_list_tables")
@dataclass(frozen=True)
class ListTables(Request):
    """Every table's name."""

    RESPONSE: ClassVar[type[Response]] = ListTablesResponse
    IDEMPOTENT: ClassVar[bool] = True


@dataclass(frozen=True)
class ReplicaLocationInfo:
    """One replica of a tablet: its server, address and Raft role (``LEADER`` or
    ``FOLLOWER``; an unreplicated tablet's one replica is its ``LEADER``)."""

    tserver_uuid: str
    address: str
    role: str


@dataclass(frozen=True)
class TabletLocationInfo:
    """A tablet, the partition string it was created with, and the server hosting it
    (a replicated tablet's leader's, or its first replica's while no leader is known).
    ``replicas`` (optional) lists every replica, the leader first."""

    tablet_id: str
    partition: str
    tserver_uuid: str
    address: str
    replicas: list[ReplicaLocationInfo] = field(default_factory=list)


@message("master_table_locations")
@dataclass(frozen=True)
class TableLocationsResponse(Response):
    """Where every tablet of a table lives (the table's id and schema version with it,
    so a client can tell its cached schema is stale)."""

    table_id: str
    schema_version: int
    tablets: list[TabletLocationInfo]


@message("master_get_table_locations")
@dataclass(frozen=True)
class GetTableLocations(Request):
    """The tablets of a RUNNING table; a table still being created or altered is refused
    with ``ServiceUnavailable`` (retry), an unknown one with ``KuduNotFound``."""

    RESPONSE: ClassVar[type[Response]] = TableLocationsResponse
    IDEMPOTENT: ClassVar[bool] = True
    name: str


@dataclass(frozen=True)
class TabletServerInfo:
    """A registered tablet server: ``live`` while it heartbeats within the master's
    unresponsive timeout; ``tablet_count`` counts the catalog's CREATING and RUNNING
    tablets assigned to it."""

    uuid: str
    address: str
    live: bool
    seconds_since_heartbeat: float
    tablet_count: int


@message("master_list_tablet_servers_response")
@dataclass(frozen=True)
class ListTabletServersResponse(Response):
    """Every tablet server the master has heard from since it started, by uuid."""

    servers: list[TabletServerInfo]


@message("master_list_tablet_servers")
@dataclass(frozen=True)
class ListTabletServers(Request):
    """The tablet servers and their health."""

    RESPONSE: ClassVar[type[Response]] = ListTabletServersResponse
    IDEMPOTENT: ClassVar[bool] = True


@message("master_metadata_document")
@dataclass(frozen=True)
class MetadataDocument(Response):
    """A clients' document kept in the catalog (``body`` null: there is none)."""

    name: str
    body: str | None


@message("master_get_metadata_document")
@dataclass(frozen=True)
class GetMetadataDocument(Request):
    """The document ``name`` (the SQL layers' database registry, for one)."""

    RESPONSE: ClassVar[type[Response]] = MetadataDocument
    IDEMPOTENT: ClassVar[bool] = True
    name: str


@message("master_put_metadata_document")
@dataclass(frozen=True)
class PutMetadataDocument(Request):
    """Keep ``body`` as the document ``name`` (replacing it), durably, before answering.
    Idempotent: the same put twice leaves the same document."""

    RESPONSE: ClassVar[type[Response]] = MetadataDocument
    IDEMPOTENT: ClassVar[bool] = True
    name: str
    body: str


# -- masters ------------------------------------------------------------------------------


@message("master_status")
@dataclass(frozen=True)
class MasterStatus(Response):
    """One master's view of the masters (Kudu's ListMasters entry): its address, its role
    (``LEADER``; ``LEADER (loading)`` while it loads the catalog; ``FOLLOWER``), its
    catalog replica's term, the leader master it knows (null: none), and every master
    (empty: a single master)."""

    address: str
    role: str
    term: int
    leader: str | None
    masters: list[str]


@message("master_get_status")
@dataclass(frozen=True)
class GetMasterStatus(Request):
    """This master's role; every master answers (a follower too)."""

    RESPONSE: ClassVar[type[Response]] = MasterStatus
    IDEMPOTENT: ClassVar[bool] = True
