"""A tablet server as the simulator models it: durable tablets, idempotent requests, reports.

Its tablets and tombstones survive a crash (they are on its disk); its report bookkeeping
does not, and each start is a new incarnation that begins with a full report. A deleted
tablet leaves a tombstone, so a late create of it is refused, as in Kudu.

A replica of a replicated tablet (its create carries ``raft_peers``) has a Raft role and
term, reported with it. Elections are not modelled message by message: a replica created
is a FOLLOWER in term 0 until the simulator makes one replica win an election
(``win_election``), which also makes it LEADER on its own server and tells the other up
replicas the new term.

Each replica of a replicated tablet also has its committed Raft config (opid index,
voters, non-voters), reported with it. Config changes are modelled at the leader: it
accepts the master's ADD only under compare-and-set (``change_config``), and the
simulator copies a learner (``install_copy``, also over a tombstone), promotes it and
evicts members on down servers by giving the leader's up members a new config
(``learn_config``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kudusql.cluster.master_protocol import (
    AlterTabletRequest,
    ChangeConfigRequest,
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
    config_index: int = 0
    voters: tuple[str, ...] = ()
    non_voters: tuple[str, ...] = ()

    @property
    def members(self) -> tuple[str, ...]:
        return (*self.voters, *self.non_voters)

    def reported(self, tablet_id: str) -> ReportedTablet:
        if not self.raft_peers:
            return ReportedTablet(tablet_id, self.schema_version, self.role, self.term)
        return ReportedTablet(
            tablet_id,
            self.schema_version,
            self.role,
            self.term,
            self.config_index,
            self.voters,
            self.non_voters,
        )


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
            0,
            peers,
        )
        self._mark_dirty(request.tablet_id)

    def change_config(self, request: ChangeConfigRequest) -> bool:
        """The leader here adds the peer as a learner, if its committed config is still
        at the request's opid index (compare-and-set) and no change is pending."""
        tablet = self.tablets.get(request.tablet_id)
        if (
            tablet is None
            or tablet.role != "LEADER"
            or tablet.config_index != request.cas_config_opid_index
            or tablet.non_voters
            or request.peer_uuid in tablet.members
        ):
            return False
        self.learn_config(
            request.tablet_id,
            tablet.config_index + 1,
            tablet.voters,
            (request.peer_uuid,),
        )
        return True

    def learn_config(
        self,
        tablet_id: str,
        index: int,
        voters: tuple[str, ...],
        non_voters: tuple[str, ...],
    ) -> None:
        """The replica here learns a newer committed config (an older one changes
        nothing); a replica no longer a member becomes a NON_PARTICIPANT."""
        tablet = self.tablets.get(tablet_id)
        if tablet is None or index <= tablet.config_index:
            return
        tablet.config_index, tablet.voters, tablet.non_voters = index, voters, non_voters
        if self.uuid in non_voters:
            tablet.role = "LEARNER"
        elif self.uuid not in voters:
            tablet.role = "NON_PARTICIPANT"
        elif tablet.role in ("LEARNER", "NON_PARTICIPANT"):
            tablet.role = "FOLLOWER"
        self._mark_dirty(tablet_id)

    def install_copy(self, tablet_id: str, source: HostedTablet) -> None:
        """A tablet copy from ``source`` (the leader) replaces whatever is here,
        a tombstone included."""
        self.tombstones.discard(tablet_id)
        role = "LEARNER" if self.uuid in source.non_voters else "FOLLOWER"
        self.tablets[tablet_id] = HostedTablet(
            source.table_id,
            source.partition,
            source.schema_version,
            source.raft_peers,
            role,
            source.term,
            source.config_index,
            source.voters,
            source.non_voters,
        )
        self._mark_dirty(tablet_id)

    def learn_term(self, tablet_id: str, term: int, leader: bool) -> None:
        """The replica of ``tablet_id`` here sees ``term``: LEADER if it won it, else
        FOLLOWER (an older term changes nothing)."""
        tablet = self.tablets.get(tablet_id)
        if tablet is None or tablet.term is None or term < tablet.term:
            return
        role = "LEADER" if leader else "FOLLOWER"
        if self.uuid in tablet.non_voters:
            role = "LEARNER"
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

    def delete_tablet(self, request: DeleteTabletRequest) -> bool:
        """Whether the request applies (a replica newer than its compare-and-set is
        kept)."""
        tablet = self.tablets.get(request.tablet_id)
        cas = request.cas_config_index
        if tablet is not None and cas is not None and tablet.config_index > cas:
            return False
        if self.tablets.pop(request.tablet_id, None) is not None:
            self.tombstones.add(request.tablet_id)
            self._mark_dirty(request.tablet_id)
        return True

    def report(self) -> TabletReport:
        """The next tablet report: full after a start or when asked, else the dirty tablets."""
        seq = self.next_sequence_number
        self.next_sequence_number += 1
        if self.needs_full_report:
            if self.full_report_sequence_number is None:
                self.full_report_sequence_number = seq
            updated = tuple(h.reported(t) for t, h in sorted(self.tablets.items()))
            return TabletReport(self.incarnation, seq, False, updated)
        changed = sorted(self.dirty)
        updated = tuple(h.reported(t) for t in changed if (h := self.tablets.get(t)) is not None)
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
