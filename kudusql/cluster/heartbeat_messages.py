"""The heartbeat's wire messages, from a tablet server to the master (registered with
``kudusql.cluster.messages``; wire format: ``master/FORMAT.md``).

They live beside both daemons' packages because both speak them: the tablet server's
heartbeater sends them, the master serves them (and the master calls the tablet
server's own messages, ``tserver/messages.py``).
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import ClassVar

from kudusql.cluster import master_protocol
from kudusql.cluster.messages import Request, Response, message

__all__ = ["HeartbeatResponse", "ReportedTabletInfo", "TSHeartbeat", "tablet_report"]


@dataclass(frozen=True)
class ReportedTabletInfo:
    """One replica in a tablet report: its id and schema version; a replica of a
    replicated tablet adds its Raft ``role`` and ``term`` (optional: absent or null for
    an unreplicated tablet and from servers that predate them)."""

    tablet_id: str
    schema_version: int
    role: str | None = None
    term: int | None = None
    #: The replica's committed Raft config (optional): its opid index, voters and
    #: non-voters (learners), by tablet server uuid.
    config_index: int | None = None
    voters: list[str] | None = None
    non_voters: list[str] | None = None

    @classmethod
    def of(
        cls,
        tablet_id: str,
        schema_version: int,
        role: str | None,
        term: int | None,
        config: tuple[int, tuple[str, ...], tuple[str, ...]] | None,
    ) -> ReportedTabletInfo:
        if config is None:
            return cls(tablet_id, schema_version, role, term)
        index, voters, non_voters = config
        return cls(tablet_id, schema_version, role, term, index, list(voters), list(non_voters))


@message("master_heartbeat_response")
@dataclass(frozen=True)
class HeartbeatResponse(Response):
    """``needs_full_report``: send every tablet next time; ``acked_sequence_number``:
    the report the master has processed (clear the dirty marks it covered)."""

    needs_full_report: bool
    acked_sequence_number: int | None


@message("master_ts_heartbeat")
@dataclass(frozen=True)
class TSHeartbeat(Request):
    """A tablet server is alive at ``address``, with its tablet report
    (``master_protocol.TabletReport``). Idempotent: a repeated report is ignored."""

    RESPONSE: ClassVar[type[Response]] = HeartbeatResponse
    IDEMPOTENT: ClassVar[bool] = True
    uuid: str
    address: str
    incarnation: int
    sequence_number: int
    is_incremental: bool
    updated_tablets: list[ReportedTabletInfo]
    removed_tablet_ids: list[str]

    def report(self) -> master_protocol.TabletReport:
        return tablet_report(self)


class _WireReport(typing.Protocol):
    @property
    def incarnation(self) -> int: ...
    @property
    def sequence_number(self) -> int: ...
    @property
    def is_incremental(self) -> bool: ...
    @property
    def updated_tablets(self) -> list[ReportedTabletInfo]: ...
    @property
    def removed_tablet_ids(self) -> list[str]: ...


def tablet_report(wire: _WireReport) -> master_protocol.TabletReport:
    """The ``master_protocol.TabletReport`` a message's report fields carry."""
    return master_protocol.TabletReport(
        incarnation=wire.incarnation,
        sequence_number=wire.sequence_number,
        is_incremental=wire.is_incremental,
        updated_tablets=tuple(
            master_protocol.ReportedTablet(
                t.tablet_id,
                t.schema_version,
                t.role,
                t.term,
                t.config_index,
                tuple(t.voters or ()),
                tuple(t.non_voters or ()),
            )
            for t in wire.updated_tablets
        ),
        removed_tablet_ids=tuple(wire.removed_tablet_ids),
    )
