"""What the master and the tablet servers say to each other, as plain values.

Tablet reports and heartbeats go from a tablet server to the master; create, alter and
delete requests go from the master to a tablet server, which applies each idempotently
and answers. These are the state machine's inputs and outputs; the RPC layer carries
them (and may lose, duplicate or reorder them).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReportedTablet:
    """One replica in a tablet report: its tablet and the schema version it holds; for a
    replica of a replicated tablet, its Raft ``role`` (``LEADER``, ``FOLLOWER``,
    ``LEARNER``) and current ``term`` (None for an unreplicated tablet)."""

    tablet_id: str
    schema_version: int
    role: str | None = None
    term: int | None = None
    #: The replica's committed Raft config: its opid index (None: not reported) and its
    #: voters and non-voters (learners being copied and promoted).
    config_index: int | None = None
    voters: tuple[str, ...] = ()
    non_voters: tuple[str, ...] = ()


@dataclass(frozen=True)
class TabletReport:
    """Kudu's ``TabletReportPB``.

    ``incarnation`` numbers the tablet server's process starts (Kudu's instance seqno) and
    ``sequence_number`` its reports within one start, so the master can drop a report that
    arrives after a newer one. A full report (``is_incremental`` false) lists every replica
    the server hosts; an incremental one only the replicas that changed since the last
    acknowledged report, and ``removed_tablet_ids`` those it no longer hosts.
    """

    incarnation: int
    sequence_number: int
    is_incremental: bool
    updated_tablets: tuple[ReportedTablet, ...] = ()
    removed_tablet_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class HeartbeatResponse:
    """The master's answer: ``needs_full_report`` when it does not know this server's
    current incarnation; ``acked_sequence_number`` is the report it has processed."""

    needs_full_report: bool
    acked_sequence_number: int | None


@dataclass(frozen=True)
class CreateTabletRequest:
    """Create a tablet (a no-op on a server that has it, or had it and deleted it)."""

    tserver_uuid: str
    tablet_id: str
    table_id: str
    table_name: str
    partition: str
    schema: str
    schema_version: int
    #: The voters of a replicated tablet as (tserver uuid, address), this server among
    #: them; empty for an unreplicated tablet.
    raft_peers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class AlterTabletRequest:
    """Bring a tablet to ``schema_version`` (a no-op when it is there or past it)."""

    tserver_uuid: str
    tablet_id: str
    schema: str
    schema_version: int


@dataclass(frozen=True)
class DeleteTabletRequest:
    """Delete (tombstone) a tablet's replica; deleting an absent tablet succeeds."""

    tserver_uuid: str
    tablet_id: str
    reason: str
    #: For an evicted replica: delete it only if its committed config's opid index is
    #: at most this (the one it reported), so a delayed delete never destroys a newer
    #: replica copied there since (Kudu's cas_config_opid_index_less_or_equal).
    cas_config_index: int | None = None


@dataclass(frozen=True)
class ChangeConfigRequest:
    """Ask the tablet's leader (on ``tserver_uuid``) to add a replica on ``peer_uuid``
    (at ``peer_address``) as a learner, if its committed config's opid index is still
    ``cas_config_opid_index`` (Kudu's re-replication: sent until a report shows it)."""

    tserver_uuid: str
    tablet_id: str
    peer_uuid: str
    peer_address: str
    cas_config_opid_index: int


TabletServerRequest = (
    CreateTabletRequest | AlterTabletRequest | DeleteTabletRequest | ChangeConfigRequest
)
