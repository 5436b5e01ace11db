"""A tablet server as the simulator models it: durable tablets, idempotent requests, reports.

Its tablets and tombstones survive a crash (they are on its disk); its report bookkeeping
does not, and each start is a new incarnation that begins with a full report. A deleted
tablet leaves a tombstone, so a late create of it is refused, as in Kudu.

A replica of a replicated tablet (its create carries ``raft_peers``) has a Raft role and
term, reported with it. Elections are not modelled message by message: a replica created
is a FOLLOWER in term 0 until the simulator makes one replica win an election
(``win_election``), which also makes it LEADER on its own server and tells the other up
replicas the new term.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kudusql.cluster.master_protocol import (
    AlterTabletRequest,
    CreateTabletRequest,
    DeleteTabletRequest,
    HeartbeatResponse,
    ReportedTablet,
    TabletReport,
)


@dataclass
class HostedTablet:
    """A replica on the server's disk."""

    table_id: str
    partition: str
    schema_version: int
    raft_peers: tuple[str, ...] = ()
    role: str | None = None
    term: int | None = None


@dataclass
class TabletServerModel:
    uuid: str
    address: str
    tablets: dict[str, HostedTablet] = field(default_factory=dict)
    tombstones: set[str] = field(default_factory=set)
    incarnation: int = 0
    up: bool = True
    # Soft state of one incarnation:
    next_sequence_number: int = 0
    needs_full_report: bool = True
    full_report_sequence_number: int | None = None  # the full report awaiting its ack
    dirty: dict[str, int] = field(default_factory=dict)  # tablet id -> report that carries it

    def crash(self) -> None:
        self.up = False

    def start(self) -> None:
        self.up = True
        self.incarnation += 1
        self.next_sequence_number = 0
        self.needs_full_report = True
        self.full_report_sequence_number = None
        self.dirty = {}

    def _mark_dirty(self, tablet_id: str) -> None:
        self.dirty[tablet_id] = self.next_sequence_number

    def create_tablet(self, request: CreateTabletRequest) -> None:
        if request.tablet_id in self.tablets or request.tablet_id in self.tombstones:
            return
        peers = tuple(u for u, _ in request.raft_peers)
        self.tablets[request.tablet_id] = HostedTablet(
            request.table_id,
            request.partition,
            request.schema_version,
            peers,
            "FOLLOWER" if peers else None,
            0 if peers else None,
        )
        self._mark_dirty(request.tablet_id)

    def learn_term(self, tablet_id: str, term: int, leader: bool) -> None:
        """The replica of ``tablet_id`` here sees ``term``: LEADER if it won it, else
        FOLLOWER (an older term changes nothing)."""
        tablet = self.tablets.get(tablet_id)
        if tablet is None or tablet.term is None or term < tablet.term:
            return
        role = "LEADER" if leader else "FOLLOWER"
        if (tablet.term, tablet.role) != (term, role):
            tablet.term, tablet.role = term, role
            self._mark_dirty(tablet_id)

    def alter_tablet(self, request: AlterTabletRequest) -> int | None:
        """The version the tablet is at after the request, or None if it is not here."""
        tablet = self.tablets.get(request.tablet_id)
        if tablet is None:
            return None
        if tablet.schema_version < request.schema_version:
            tablet.schema_version = request.schema_version
            self._mark_dirty(request.tablet_id)
        return tablet.schema_version

    def delete_tablet(self, request: DeleteTabletRequest) -> None:
        if self.tablets.pop(request.tablet_id, None) is not None:
            self.tombstones.add(request.tablet_id)
            self._mark_dirty(request.tablet_id)

    def report(self) -> TabletReport:
        """The next tablet report: full after a start or when asked, else the dirty tablets."""
        seq = self.next_sequence_number
        self.next_sequence_number += 1
        if self.needs_full_report:
            if self.full_report_sequence_number is None:
                self.full_report_sequence_number = seq
            updated = tuple(
                ReportedTablet(t, h.schema_version, h.role, h.term)
                for t, h in sorted(self.tablets.items())
            )
            return TabletReport(self.incarnation, seq, False, updated)
        changed = sorted(self.dirty)
        updated = tuple(
            ReportedTablet(t, h.schema_version, h.role, h.term)
            for t in changed
            if (h := self.tablets.get(t)) is not None
        )
        removed = tuple(t for t in changed if t not in self.tablets)
        return TabletReport(self.incarnation, seq, True, updated, removed)

    def heartbeat_response(self, incarnation: int, response: HeartbeatResponse) -> None:
        if incarnation != self.incarnation:
            return
        if response.needs_full_report:
            self.needs_full_report = True
            self.full_report_sequence_number = None
            return
        acked = response.acked_sequence_number
        if acked is None:
            return
        full = self.full_report_sequence_number
        if self.needs_full_report and full is not None and acked >= full:
            self.needs_full_report = False
            self.full_report_sequence_number = None
        self.dirty = {t: s for t, s in self.dirty.items() if s > acked}
