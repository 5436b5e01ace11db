"""The tablet server's wire messages (registered with ``kudusql.cluster.messages``).

Control calls are Flight actions: create, alter and delete a tablet (each idempotent,
as the master retries them), the tablet report, a tablet's row count and statistics.
A write is a ``do_put`` whose command is a ``WriteRequest`` and whose batches are the
rows; a scan, a diff scan and a batch of point lookups are ``do_get``s whose ticket is
the request (a lookup's keys travel in the ticket as Arrow IPC). Wire format: FORMAT.md
in this package.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from kudusql.cluster import master_protocol
from kudusql.cluster.heartbeat_messages import ReportedTabletInfo, tablet_report
from kudusql.cluster.messages import GetResponse, Request, Response, message
from kudusql.cluster.tserver.result_tracker import RequestId

__all__ = [
    "KEY_INDEX_COLUMN",
    "AlterTablet",
    "ChangeConfig",
    "ChangeConfigResponse",
    "ConsensusAck",
    "ConsensusRequest",
    "CountRowsRequest",
    "CountRowsResponse",
    "CreateTablet",
    "DeleteTablet",
    "DiffScanRequest",
    "FlushTablet",
    "GetTabletReport",
    "LookupRequest",
    "LookupRows",
    "LookupRowsRequest",
    "RaftPeerAddress",
    "ReportedTabletInfo",
    "RequestId",
    "ScanRequest",
    "TabletChanged",
    "TabletReportResponse",
    "TabletStatsRequest",
    "TabletStatsResponse",
    "WireRowError",
    "WriteRequest",
    "WriteResponse",
]


@message("tserver_tablet_changed")
@dataclass(frozen=True)
class TabletChanged(Response):
    """A create, alter or delete is done: the tablet's state and schema version now
    (``TOMBSTONED`` after a delete; a delete of an unknown tablet answers ``ABSENT``)."""

    tablet_id: str
    state: str
    schema_version: int


@dataclass(frozen=True)
class RaftPeerAddress:
    """One voter of a replicated tablet: its tablet server's uuid and ``HOST:PORT``."""

    uuid: str
    address: str


@message("tserver_create_tablet")
@dataclass(frozen=True)
class CreateTablet(Request):
    """Create a tablet replica. The same id with the same schema is a no-op; the same id
    with another schema, or a tombstoned id, is refused (``KuduAlreadyPresent``).
    ``schema`` is a ``Schema.to_dict()`` as JSON text (``master_protocol``'s form);
    ``partition`` is a ``TabletPartition.to_json()`` (the client's; the master passes
    it through): the server refuses written rows that do not belong to it.

    ``raft_peers`` (optional; absent or null: an unreplicated tablet, as before): the
    voters of a replicated tablet, this server among them (by its uuid). The replica is
    a Raft member of that configuration; its writes go through the leader."""

    RESPONSE: ClassVar[type[Response]] = TabletChanged
    IDEMPOTENT: ClassVar[bool] = True
    tablet_id: str
    table_id: str
    table_name: str
    partition: str
    schema: str
    schema_version: int
    raft_peers: list[RaftPeerAddress] | None = None

    @classmethod
    def of(cls, r: master_protocol.CreateTabletRequest) -> CreateTablet:
        peers = [RaftPeerAddress(u, a) for u, a in r.raft_peers] if r.raft_peers else None
        return cls(
            r.tablet_id, r.table_id, r.table_name, r.partition, r.schema, r.schema_version, peers
        )


@message("tserver_alter_tablet")
@dataclass(frozen=True)
class AlterTablet(Request):
    """Bring a tablet to ``schema_version`` with ``schema``; a no-op when it is there or
    past it."""

    RESPONSE: ClassVar[type[Response]] = TabletChanged
    IDEMPOTENT: ClassVar[bool] = True
    tablet_id: str
    schema: str
    schema_version: int

    @classmethod
    def of(cls, r: master_protocol.AlterTabletRequest) -> AlterTablet:
        return cls(r.tablet_id, r.schema, r.schema_version)


@message("tserver_delete_tablet")
@dataclass(frozen=True)
class DeleteTablet(Request):
    """Delete a tablet replica, leaving a tombstone; deleting an absent or already
    deleted tablet succeeds."""

    RESPONSE: ClassVar[type[Response]] = TabletChanged
    IDEMPOTENT: ClassVar[bool] = True
    tablet_id: str
    reason: str = ""
    #: Optional: refuse (``IllegalState``-like error) when the replicated tablet's
    #: committed config opid index is above this (a replica newer than the one the
    #: master saw evicted).
    cas_config_opid_index_less_or_equal: int | None = None


@message("tserver_tablet_report")
@dataclass(frozen=True)
class TabletReportResponse(Response):
    """A tablet report (``master_protocol.TabletReport`` on the wire) and the server's
    uuid."""

    server_uuid: str
    incarnation: int
    sequence_number: int
    is_incremental: bool
    updated_tablets: list[ReportedTabletInfo]
    removed_tablet_ids: list[str]

    def report(self) -> master_protocol.TabletReport:
        return tablet_report(self)


@message("tserver_get_tablet_report")
@dataclass(frozen=True)
class GetTabletReport(Request):
    """The server's full tablet report: every RUNNING replica at its schema version
    (tombstones are not listed). Each call takes the next sequence number."""

    RESPONSE: ClassVar[type[Response]] = TabletReportResponse
    IDEMPOTENT: ClassVar[bool] = True


@dataclass(frozen=True)
class WireRowError:
    """A row a write could not apply: its index in the batch, its operation, its key
    (displayed), Kudu's status name and why."""

    index: int
    op: str
    key: str | None
    status: str
    message: str


@message("tserver_write_response")
@dataclass(frozen=True)
class WriteResponse(Response):
    """A write is durable in the tablet's WAL: its HybridTime, the rows applied and
    ignored, and the rows that failed."""

    timestamp: int
    applied: int
    ignored: int
    row_errors: list[WireRowError]


@message("tserver_write")
@dataclass(frozen=True)
class WriteRequest(Request):
    """Apply the put's batches to a tablet with one operation (``insert``, ``upsert``,
    ``update``, ``delete`` or an ``_ignore`` form), or each row's from the column
    ``op_column`` (``operation`` is then empty). ``atomic``: any row error applies
    nothing and the errors come back. ``check_only``: apply nothing, answer the errors
    a write would report now.

    Not idempotent by itself: a lost answer does not mean the write did not happen.
    With a ``request_id`` (Kudu's ``RequestIdPB``) it is exactly-once: the server's
    ``ResultTracker`` answers a retry of the same id with the first attempt's response
    and applies nothing again, so the client retries it like an idempotent call."""

    RESPONSE: ClassVar[type[Response]] = WriteResponse
    tablet_id: str
    operation: str
    op_column: str | None = None
    atomic: bool = False
    check_only: bool = False
    request_id: RequestId | None = None


@message("tserver_scan")
@dataclass(frozen=True)
class ScanRequest(Request):
    """Rows of a tablet live at ``snapshot_timestamp`` (null: every write applied so
    far), with the ``columns`` (null: all) and matching every predicate
    (``ColumnPredicate.to_dict()`` objects); ``ordered`` returns them in key order;
    ``limit`` stops after that many rows; ``key_lo``/``key_hi`` (hex of encoded primary
    keys, null: unbounded) keep the keys in ``[key_lo, key_hi)`` (a scan token's key
    range). The rows stream in batches of at most the tablet's scan batch size: a
    tablet is never materialized whole (ordered scans aside, which sort)."""

    RESPONSE: ClassVar[type[Response]] = GetResponse
    IDEMPOTENT: ClassVar[bool] = True
    tablet_id: str
    columns: list[str] | None = None
    predicates: list[dict[str, Any]] | None = None
    snapshot_timestamp: int | None = None
    ordered: bool = False
    limit: int | None = None
    key_lo: str | None = None
    key_hi: str | None = None


#: The column a lookup's answer adds: each found row's position among the request's keys.
KEY_INDEX_COLUMN = "key_index"


@message("tserver_lookup")
@dataclass(frozen=True)
class LookupRequest(Request):
    """Point lookups in a tablet: the live rows at ``snapshot_timestamp`` (null: every
    write applied so far) whose primary keys are among ``keys``, with the ``columns``
    (null: all) and a last int64 column ``key_index`` (the key's row in ``keys``), in
    the order of the keys; a key with no live row has no answer row. ``keys`` is the
    base64 of an Arrow IPC stream of the key columns, one row per key."""

    RESPONSE: ClassVar[type[Response]] = GetResponse
    IDEMPOTENT: ClassVar[bool] = True
    tablet_id: str
    keys: str
    columns: list[str] | None = None
    snapshot_timestamp: int | None = None


@message("tserver_lookup_rows")
@dataclass(frozen=True)
class LookupRows(Response):
    """A ``LookupRowsRequest``'s answer: the rows as ``tserver_lookup`` streams them
    (with ``key_index``), as the base64 of one Arrow IPC stream."""

    rows: str


@message("tserver_lookup_few")
@dataclass(frozen=True)
class LookupRowsRequest(Request):
    """``tserver_lookup`` as one action: for a few keys (a point lookup), one round trip
    instead of a stream's; the same fields and answer rows."""

    RESPONSE: ClassVar[type[Response]] = LookupRows
    IDEMPOTENT: ClassVar[bool] = True
    tablet_id: str
    keys: str
    columns: list[str] | None = None
    snapshot_timestamp: int | None = None


@message("tserver_diff_scan")
@dataclass(frozen=True)
class DiffScanRequest(Request):
    """Rows of a tablet changed in ``[start_timestamp, end_timestamp)``: their values at
    the end with the ``columns`` (null: all) and a last boolean column ``is_deleted``;
    rows inserted and deleted inside the window are left out (Kudu's diff scan)."""

    RESPONSE: ClassVar[type[Response]] = GetResponse
    IDEMPOTENT: ClassVar[bool] = True
    tablet_id: str
    start_timestamp: int
    end_timestamp: int
    columns: list[str] | None = None
    predicates: list[dict[str, Any]] | None = None


@message("tserver_count_rows_response")
@dataclass(frozen=True)
class CountRowsResponse(Response):
    """A tablet's live row count at the request's snapshot."""

    tablet_id: str
    rows: int


@message("tserver_count_rows")
@dataclass(frozen=True)
class CountRowsRequest(Request):
    """The number of rows of a tablet live at ``snapshot_timestamp`` (null: every write
    applied so far)."""

    RESPONSE: ClassVar[type[Response]] = CountRowsResponse
    IDEMPOTENT: ClassVar[bool] = True
    tablet_id: str
    snapshot_timestamp: int | None = None


@message("tserver_tablet_stats_response")
@dataclass(frozen=True)
class TabletStatsResponse(Response):
    """A tablet's sizes now, read from memory (no scan): rows in its MemRowSets and
    DiskRowSets (deleted ones included), its DiskRowSets, bytes on disk, in memory and
    in its WAL."""

    tablet_id: str
    memrowset_rows: int
    diskrowsets: int
    disk_rows: int
    disk_bytes: int
    memory_bytes: int
    wal_bytes: int


@message("tserver_flush_tablet")
@dataclass(frozen=True)
class FlushTablet(Request):
    """Flush a tablet's MemRowSet and DeltaMemStores to disk now (what its maintenance
    would do later); answers its statistics after."""

    RESPONSE: ClassVar[type[Response]] = TabletStatsResponse
    IDEMPOTENT: ClassVar[bool] = True
    tablet_id: str


@message("tserver_tablet_stats")
@dataclass(frozen=True)
class TabletStatsRequest(Request):
    """A tablet's on-disk and in-memory statistics."""

    RESPONSE: ClassVar[type[Response]] = TabletStatsResponse
    IDEMPOTENT: ClassVar[bool] = True
    tablet_id: str


@message("tserver_consensus_ack")
@dataclass(frozen=True)
class ConsensusAck(Response):
    """The consensus messages were handed to the replica (their answers, if any, come
    back later as the peer's own ``tserver_consensus`` calls)."""

    tablet_id: str
    delivered: int


@message("tserver_consensus")
@dataclass(frozen=True)
class ConsensusRequest(Request):
    """One-way delivery of Raft messages from a peer tablet server to this server's
    replica of ``tablet_id``: UpdateConsensus, RequestVote, StartTabletCopy and their
    responses, each in ``consensus_wire``'s form (FORMAT.md), in the order the sender
    queued them. Not retried: Raft resends what is lost."""

    RESPONSE: ClassVar[type[Response]] = ConsensusAck
    tablet_id: str
    messages: list[dict[str, Any]]
    #: The sending tablet server's uuid and ``HOST:PORT`` (optional): a server that does
    #: not host the tablet answers it there (TABLET_NOT_FOUND, then a tablet copy).
    sender_uuid: str | None = None
    sender_address: str | None = None


@message("tserver_change_config_response")
@dataclass(frozen=True)
class ChangeConfigResponse(Response):
    """The leader appended the config change at log index ``config_index`` (it takes
    effect there and is committed later; the tablet report shows it)."""

    tablet_id: str
    config_index: int


@message("tserver_change_config")
@dataclass(frozen=True)
class ChangeConfig(Request):
    """Ask a replicated tablet's leader to add ``peer_uuid`` (listening at
    ``peer_address``) as a learner that is copied and promoted to voter once caught up
    (``change_type`` ``ADD_PEER``, the only one), if the committed config's opid index is
    still ``cas_config_opid_index`` (compare-and-set: a repeat after it applied fails,
    so the call is idempotent). A follower refuses it with NotTheLeader."""

    RESPONSE: ClassVar[type[Response]] = ChangeConfigResponse
    IDEMPOTENT: ClassVar[bool] = True
    tablet_id: str
    change_type: str
    peer_uuid: str
    peer_address: str
    cas_config_opid_index: int
