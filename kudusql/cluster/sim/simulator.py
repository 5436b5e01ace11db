"""The deterministic cluster simulator: one master, N tablet servers, a faulty network.

``Simulation(seed, ...).run()`` drives random DDL from clients, heartbeats, master ticks,
message deliveries (lost, duplicated, delayed, reordered), master crashes (also between
persisting records and sending the requests they imply) and tablet-server crashes, and
checks the safety invariants after every event. Then faults stop and it checks liveness at
quiescence: every DDL has finished, every server hosts exactly what the master assigns it,
and no record of a dropped or replaced tablet is left.

With ``replication`` on, a created table has 1 or 3 replicas per tablet; a replicated
tablet's replicas elect leaders (``TabletServerModel.win_election``: one up replica wins
a new term) at random, and the checks add: a tablet's replicas are on distinct servers,
as many as its table's replication factor; a replicated tablet becomes RUNNING only once
the master has a reported leader for it; locations list every replica, at most one
LEADER; and no replica of a dropped tablet is left after quiescence. A violation raises
``SimulationFailure`` with the seed and a readable trace.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from kudusql.cluster.catalog.records import (
    TABLES_ENTRY,
    TABLETS_ENTRY,
    CatalogRecord,
    TableRecord,
    TableState,
    TabletRecord,
    TabletState,
    decode_record,
)
from kudusql.cluster.catalog.store import InMemoryCatalogStore
from kudusql.cluster.master_protocol import (
    AlterTabletRequest,
    ChangeConfigRequest,
    CreateTabletRequest,
    DeleteTabletRequest,
    HeartbeatResponse,
    TabletReport,
    TabletServerRequest,
)
from kudusql.cluster.master_state import (
    CatalogError,
    DdlResult,
    HeartbeatResult,
    MasterOptions,
    MasterState,
)
from kudusql.cluster.sim.network import NetworkFaults, SimNetwork
from kudusql.cluster.sim.tserver_model import TabletServerModel

MASTER = "master"
RUNNING = TabletState.RUNNING

#: Master timeouts scaled to the simulator's short runs.
SIM_MASTER_OPTIONS = MasterOptions(
    tserver_unresponsive_timeout=4.0, tablet_creation_timeout=6.0, request_retry_interval=1.0
)
HEARTBEAT_INTERVAL = 1.0


_Output = TypeVar("_Output", DdlResult, HeartbeatResult, list[TabletServerRequest])


class SimulationFailure(AssertionError):
    """An invariant that does not hold; the message names the seed and has the trace."""


@dataclass(frozen=True)
class FaultRates:
    """Per-step probabilities of each fault while faults are on."""

    network: NetworkFaults = field(
        default_factory=lambda: NetworkFaults(drop=0.15, duplicate=0.15, max_delay=2.5)
    )
    master_crash: float = 0.02
    crash_before_send: float = 0.05  # a master crash right after persisting, before sending
    tserver_crash: float = 0.02
    tserver_restart: float = 0.15
    ddl: float = 0.15
    election: float = 0.1  # a replicated tablet's replica wins a new term
    #: A leader makes Raft config progress: copies and promotes its learner, or evicts
    #: a member whose server is down (when that leaves a majority up).
    raft_config: float = 0.3


@dataclass(frozen=True)
class _Heartbeat:
    uuid: str
    address: str
    report: TabletReport


@dataclass(frozen=True)
class _HeartbeatAnswer:
    incarnation: int
    response: HeartbeatResponse


@dataclass(frozen=True)
class _AlterAnswer:
    uuid: str
    tablet_id: str
    schema_version: int


@dataclass(frozen=True)
class _DeleteAnswer:
    uuid: str
    tablet_id: str


class Simulation:
    def __init__(
        self,
        seed: int,
        *,
        tservers: int = 3,
        steps: int = 150,
        faults: FaultRates | None = None,
        table_names: int = 3,
        replication: bool = False,
    ) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.steps = steps
        self.faults = faults or FaultRates()
        self.table_names = [f"t{i}" for i in range(table_names)]
        self.now = 0.0
        self.trace: list[str] = []
        self.store = InMemoryCatalogStore()
        self.master = MasterState(
            self.store, random.Random(self.rng.getrandbits(64)), SIM_MASTER_OPTIONS
        )
        self.master_up = True
        self.network = SimNetwork(random.Random(self.rng.getrandbits(64)))
        self.tservers = {
            f"ts{i}": TabletServerModel(f"ts{i}", f"127.0.0.1:{7050 + i}") for i in range(tservers)
        }
        for ts in self.tservers.values():
            ts.start()
        self.next_heartbeat = {u: self.rng.uniform(0, HEARTBEAT_INTERVAL) for u in self.tservers}
        self.partitions_of: dict[str, frozenset[str]] = {}
        #: Each metadata document's last acknowledged body.
        self.documents: dict[str, str] = {}
        self.faulty = True
        self.replication = replication
        #: Replicated tablets the master had RUNNING at the last check.
        self._running_replicated: set[str] = set()
        self._decoded: dict[tuple[tuple[int, str], bytes], CatalogRecord] = {}

    # -- running ----------------------------------------------------------------------------

    def run(self) -> None:
        self.network.faults = self.faults.network
        for _ in range(self.steps):
            self.step()
        self.quiesce()

    def step(self) -> None:
        self.now = round(self.now + self.rng.uniform(0.05, 0.4), 6)
        f = self.faults
        roll = self.rng.random()
        if roll < f.master_crash:
            self.crash_master()
        elif not self.master_up and roll < 0.3:
            self.restart_master()
        roll = self.rng.random()
        if roll < f.tserver_crash:
            ts = self.tservers[self.rng.choice(sorted(self.tservers))]
            if ts.up:
                ts.crash()
                self.log(f"{ts.uuid} crashes")
        elif roll < f.tserver_restart:
            down = [u for u, t in self.tservers.items() if not t.up]
            if down:
                self.start_tserver(self.rng.choice(down))
        if self.replication and self.rng.random() < f.election:
            self.election()
        if self.replication and self.rng.random() < f.raft_config:
            self.raft_progress(evict=True)
        self.heartbeats()
        if self.master_up:
            self.master_input("tick", lambda: self.master.tick(self.now))
        if self.master_up and self.rng.random() < f.ddl:
            self.client_ddl()
        for _ in range(self.rng.randint(0, 6)):
            envelope = self.network.take(self.now)
            if envelope is None:
                break
            self.deliver(envelope.destination, envelope.payload)

    def quiesce(self, rounds: int = 30) -> None:
        """Stop faults, restart everything, run until quiet, then check liveness."""
        self.faulty = False
        self.network.faults = NetworkFaults()
        self.log("-- faults stop --")
        if not self.master_up:
            self.restart_master()
        for uuid, ts in self.tservers.items():
            if not ts.up:
                self.start_tserver(uuid)
        self.drain()
        for _ in range(rounds):
            if self.replication:
                self.elect_where_leaderless()
                self.raft_progress(evict=False)
            self.now = round(self.now + HEARTBEAT_INTERVAL, 6)
            for uuid in self.tservers:
                self.next_heartbeat[uuid] = self.now
            self.heartbeats()
            self.master_input("tick", lambda: self.master.tick(self.now))
            self.drain()
        self.check_liveness()

    def drain(self) -> None:
        while (envelope := self.network.take_any()) is not None:
            self.deliver(envelope.destination, envelope.payload)

    # -- actors -------------------------------------------------------------------------------

    def log(self, line: str) -> None:
        self.trace.append(f"[{self.now:8.3f}] {line}")

    def crash_master(self) -> None:
        if self.master_up:
            self.master_up = False
            self.log("master crashes")

    def restart_master(self) -> None:
        self.master_up = True
        self.master.master_restart()
        self.log(f"master restarts from {sum(1 for _ in self.store.scan())} records")
        self.check_safety()

    def start_tserver(self, uuid: str) -> None:
        ts = self.tservers[uuid]
        ts.start()
        self.next_heartbeat[uuid] = self.now
        self.log(f"{uuid} starts (incarnation {ts.incarnation}, {len(ts.tablets)} tablets)")

    def election(self, tablet_id: str | None = None) -> None:
        """An up replica of a replicated tablet wins an election: a term above every
        replica's; the other up replicas learn it (a down one keeps its stale term)."""
        hosts = {
            t: [ts for ts in self.tservers.values() if t in ts.tablets]
            for ts0 in self.tservers.values()
            for t, h in ts0.tablets.items()
            if h.raft_peers and (tablet_id is None or t == tablet_id)
        }
        if not hosts:
            return
        chosen = tablet_id if tablet_id is not None else self.rng.choice(sorted(hosts))
        # Only a voter of the newest config an up replica has can win (Raft: the others'
        # logs are behind, or they are not members any more).
        newest = max((ts.tablets[chosen].config_index for ts in hosts[chosen] if ts.up), default=0)
        up = [
            ts
            for ts in hosts[chosen]
            if ts.up
            and ts.tablets[chosen].config_index == newest
            and ts.uuid in ts.tablets[chosen].voters
        ]
        if not up:
            return
        winner = self.rng.choice(sorted(up, key=lambda ts: ts.uuid))
        term = 1 + max(ts.tablets[chosen].term or 0 for ts in hosts[chosen])
        for ts in up:
            ts.learn_term(chosen, term, leader=ts is winner)
        self.log(f"{winner.uuid} wins the election of {short(chosen)} in term {term}")

    def leader_replica(self, tablet_id: str) -> TabletServerModel | None:
        """The up server whose replica leads ``tablet_id`` in the highest term."""
        leaders = [
            ts
            for ts in self.tservers.values()
            if ts.up and (h := ts.tablets.get(tablet_id)) is not None and h.role == "LEADER"
        ]
        return max(leaders, key=lambda ts: ts.tablets[tablet_id].term or 0, default=None)

    def raft_progress(self, *, evict: bool) -> None:
        """One config step per replicated tablet's leader: copy its learner (to an up
        server) and promote it; or, with ``evict``, remove a voter on a down server when
        a majority of the rest is up (3-2-3). The new config reaches the up members."""
        tablet_ids = sorted(
            {t for ts in self.tservers.values() for t, h in ts.tablets.items() if h.raft_peers}
        )
        for tablet_id in tablet_ids:
            leader = self.leader_replica(tablet_id)
            if leader is None:
                continue
            h = leader.tablets[tablet_id]
            for uuid in h.voters:
                # A voter without the tablet (its create was lost) answers
                # TABLET_NOT_FOUND: the leader copies the tablet to it.
                peer = self.tservers[uuid]
                if peer.up and tablet_id not in peer.tablets:
                    peer.install_copy(tablet_id, h)
                    self.log(f"{leader.uuid} copies {short(tablet_id)} to voter {uuid}")
            if h.non_voters:
                learner = self.tservers[h.non_voters[0]]
                if not learner.up:
                    continue
                learner.install_copy(tablet_id, h)
                self.log(f"{leader.uuid} copies {short(tablet_id)} to {learner.uuid}")
                new = (h.config_index + 1, (*h.voters, learner.uuid), ())
            elif evict:
                down = [v for v in h.voters if not self.tservers[v].up]
                if not down:
                    continue
                rest = tuple(v for v in h.voters if v != down[0])
                up_rest = sum(1 for v in rest if self.tservers[v].up)
                if len(rest) < 2 or up_rest < len(rest) // 2 + 1:
                    continue
                self.log(f"{leader.uuid} evicts {down[0]} from {short(tablet_id)}")
                new = (h.config_index + 1, rest, ())
            else:
                continue
            old_members = h.members
            for uuid in sorted({*old_members, *new[1]}):
                ts = self.tservers[uuid]
                if ts.up:
                    ts.learn_config(tablet_id, *new)

    def elect_where_leaderless(self) -> None:
        """Quiescence: every replicated tablet some server hosts without a leader gets one."""
        hosted = {t for ts in self.tservers.values() for t, h in ts.tablets.items() if h.raft_peers}
        for tablet_id in sorted(hosted):
            roles = [
                ts.tablets[tablet_id].role
                for ts in self.tservers.values()
                if tablet_id in ts.tablets
            ]
            if "LEADER" not in roles:
                self.election(tablet_id)

    def heartbeats(self) -> None:
        for uuid, ts in self.tservers.items():
            if ts.up and self.now >= self.next_heartbeat[uuid]:
                self.next_heartbeat[uuid] = self.now + HEARTBEAT_INTERVAL
                report = ts.report()
                self.network.send(MASTER, _Heartbeat(uuid, ts.address, report), self.now)

    def client_ddl(self) -> None:
        if self.rng.random() < 0.1:  # a client's metadata document (the SQL databases)
            doc, body = f"doc{self.rng.randint(0, 2)}", f"body{len(self.trace)}"
            self.master_input(
                f"put document {doc}",
                lambda: self._put_document(doc, body),
            )
            return
        name = self.rng.choice(self.table_names)
        table = self.master.table(name)
        try:
            if table is None:
                parts = [f"p{i}" for i in range(self.rng.randint(1, 4))]
                rf = self.rng.choice([1, 3]) if self.replication else 1
                result = self.master_input(
                    f"create {name} {parts} rf={rf}",
                    lambda: self.master.create_table(
                        name,
                        f"schema-of-{name}",
                        parts,
                        self.now,
                        metadata=f"meta-of-{name}",
                        num_replicas=rf,
                    ),
                )
                self.partitions_of[result.table_id] = frozenset(parts)
            elif self.rng.random() < 0.6:
                version = table.schema_version + 1
                # Some alters also add range partitions and drop others (by tablet id).
                live = [
                    t
                    for t in self.master.tablets_of(table.table_id)
                    if t.state in (TabletState.CREATING, TabletState.RUNNING)
                ]
                drop = (
                    [self.rng.choice(live)]
                    if live and len(live) > 1 and self.rng.random() < 0.3
                    else []
                )
                add = (
                    [f"q{version}-{i}" for i in range(self.rng.randint(1, 2))]
                    if self.rng.random() < 0.3
                    else []
                )
                before = self.partitions_of[table.table_id]
                # The partitions the table covers from this input on (checked inside it).
                self.partitions_of[table.table_id] = (before - {t.partition for t in drop}) | set(
                    add
                )
                try:
                    self.master_input(
                        f"alter {name} to v{version} +{add} -{[t.partition for t in drop]}",
                        lambda: self.master.alter_table(
                            name,
                            self.now,
                            schema=f"{name}-v{version}",
                            metadata=f"{name}-m{version}",
                            add_partitions=add,
                            drop_tablets=[t.tablet_id for t in drop],
                        ),
                    )
                except CatalogError:
                    self.partitions_of[table.table_id] = before
                    raise
            else:
                self.master_input(f"drop {name}", lambda: self.master.drop_table(name, self.now))
        except CatalogError as e:
            self.log(f"client: {e}")

    def _put_document(self, name: str, body: str) -> DdlResult:
        self.master.put_metadata_document(name, body)
        self.documents[name] = body
        return DdlResult("", ())

    def master_input(self, what: str, call: Callable[[], _Output]) -> _Output:
        """Run one master input, check safety, send its outputs (unless the master crashes)."""
        result = call()
        requests = tuple(result) if isinstance(result, list) else result.requests
        if requests or what != "tick":
            self.log(f"master {what} -> {len(requests)} requests")
        self.check_safety()
        for request in requests:
            self.check_request_backed(request)
        if self.faulty and requests and self.rng.random() < self.faults.crash_before_send:
            self.log("master crashes after persisting, before sending")
            self.crash_master()
            return result
        for request in requests:
            self.log(f"  send {describe(request)}")
            self.network.send(request.tserver_uuid, request, self.now)
        return result

    def deliver(self, destination: str, payload: object) -> None:
        if destination == MASTER:
            if not self.master_up:
                return
            if isinstance(payload, _Heartbeat):
                p = payload
                result = self.master_input(
                    f"heartbeat {p.uuid} {describe_report(p.report)}",
                    lambda: self.master.heartbeat(p.uuid, p.address, p.report, self.now),
                )
                answer = _HeartbeatAnswer(p.report.incarnation, result.response)
                self.network.send(p.uuid, answer, self.now)
            elif isinstance(payload, _AlterAnswer):
                a = payload
                self.master_input(
                    f"alter answer {a.uuid} {short(a.tablet_id)} v{a.schema_version}",
                    lambda: self.master.alter_tablet_response(
                        a.uuid, a.tablet_id, a.schema_version, self.now
                    ),
                )
            elif isinstance(payload, _DeleteAnswer):
                d = payload
                self.master_input(
                    f"delete answer {d.uuid} {short(d.tablet_id)}",
                    lambda: self.master.delete_tablet_response(d.uuid, d.tablet_id, self.now),
                )
            return
        ts = self.tservers[destination]
        if not ts.up:
            return
        if isinstance(payload, _HeartbeatAnswer):
            ts.heartbeat_response(payload.incarnation, payload.response)
        elif isinstance(payload, CreateTabletRequest):
            ts.create_tablet(payload)
            self.log(f"{ts.uuid} applies {describe(payload)}")
        elif isinstance(payload, AlterTabletRequest):
            version = ts.alter_tablet(payload)
            self.log(f"{ts.uuid} applies {describe(payload)}")
            if version is not None:
                # A replicated tablet's alter commits through its log: every replica
                # applies it (the Raft log itself is not modelled here).
                for other in self.tservers.values():
                    if other is not ts and payload.tablet_id in other.tablets:
                        other.alter_tablet(payload)
            if version is not None:
                self.network.send(
                    MASTER, _AlterAnswer(ts.uuid, payload.tablet_id, version), self.now
                )
        elif isinstance(payload, ChangeConfigRequest):
            # Only the leader of the highest term commits a change (a deposed leader that
            # has not heard of its successor cannot reach a majority); the new config
            # then reaches the up members.
            accepted = self.leader_replica(payload.tablet_id) is ts and ts.change_config(payload)
            self.log(f"{ts.uuid} {'applies' if accepted else 'refuses'} {describe(payload)}")
            if accepted:
                h = ts.tablets[payload.tablet_id]
                for uuid in sorted(h.members):
                    peer = self.tservers[uuid]
                    if peer.up and peer is not ts:
                        peer.learn_config(payload.tablet_id, h.config_index, h.voters, h.non_voters)
        elif isinstance(payload, DeleteTabletRequest):
            hosted = ts.tablets.get(payload.tablet_id)
            cas = payload.cas_config_index
            if hosted is None or cas is None or hosted.config_index <= cas:
                self.check_delete_safe(ts.uuid, payload.tablet_id)
            applied = ts.delete_tablet(payload)
            self.log(f"{ts.uuid} {'applies' if applied else 'refuses'} {describe(payload)}")
            self.network.send(MASTER, _DeleteAnswer(ts.uuid, payload.tablet_id), self.now)
        self.check_safety()

    # -- invariants ---------------------------------------------------------------------------

    def fail(self, message: str) -> None:
        trace = "\n".join(self.trace[-200:])
        raise SimulationFailure(f"seed {self.seed}: {message}\ntrace (last 200 events):\n{trace}")

    def stored(self) -> dict[tuple[int, str], CatalogRecord]:
        try:
            out = {}
            for key, value in self.store.scan():
                record = self._decoded.get((key, value))
                if record is None:  # each distinct stored value is decoded once
                    record = self._decoded[(key, value)] = decode_record(key, value)
                out[key] = record
            return out
        except Exception as e:  # any decoding failure is the invariant's failure
            self.fail(f"the persisted catalog does not decode: {e}")
            raise

    def check_safety(self) -> None:
        stored = self.stored()
        tables = {r.table_id: r for r in stored.values() if isinstance(r, TableRecord)}
        tablets = [r for r in stored.values() if isinstance(r, TabletRecord)]
        if self.master_up:
            memory = {r.key: r for r in self.master.durable_records()}
            if memory != stored:
                self.fail("the master's catalog differs from its persisted records")
        names = [t.name for t in tables.values() if t.state is not TableState.REMOVED]
        if len(names) != len(set(names)):
            self.fail(f"two live tables share a name: {sorted(names)}")
        by_table: dict[str, list[TabletRecord]] = {t: [] for t in tables}
        for tablet in tablets:
            if tablet.table_id not in tables:
                self.fail(f"tablet {short(tablet.tablet_id)} has no table record")
            by_table[tablet.table_id].append(tablet)
            replicas = tablet.replica_uuids
            if len(set(replicas)) != len(replicas):
                self.fail(f"tablet {short(tablet.tablet_id)} has two replicas on one server")
            rf = tables[tablet.table_id].num_replicas
            # Re-replication moves a replicated tablet's replicas between a majority of
            # its factor (after an eviction) and one more (a learner being added).
            if not (rf // 2 + 1 <= len(replicas) <= (rf + 1 if rf > 1 else 1)):
                self.fail(
                    f"tablet {short(tablet.tablet_id)} has {len(replicas)} replicas, its table {rf}"
                )
        self.check_leaders(tablets)
        self.check_configs(tables)
        for table_id, table in tables.items():
            own = by_table[table_id]
            if table.state is TableState.REMOVED:
                if any(t.state in (TabletState.RUNNING, TabletState.CREATING) for t in own):
                    self.fail(f"dropped table {table.name} has a live tablet")
                continue
            current = [t for t in own if t.state not in (TabletState.REPLACED, TabletState.DELETED)]
            partitions = sorted(t.partition for t in current)
            expected = sorted(self.partitions_of.get(table_id, partitions))
            if partitions != expected:
                self.fail(f"table {table.name} covers {partitions}, not {expected}")
            if table.state is TableState.RUNNING:
                for tablet in current:
                    # A replicated tablet runs once its leader reports: some replica has it.
                    hosted = next(
                        (
                            h
                            for u in tablet.replica_uuids
                            if (h := self.tservers[u].tablets.get(tablet.tablet_id)) is not None
                        ),
                        None,
                    )
                    if tablet.state is not TabletState.RUNNING or hosted is None:
                        self.fail(
                            f"table {table.name} is RUNNING but tablet {short(tablet.tablet_id)}"
                            f" is {tablet.state.value} / not hosted on {tablet.tserver_uuid}"
                        )
                        return
                    # A replicated tablet's alter goes to its leader, whose log carries
                    # it to the others (not modelled here): the highest version counts.
                    version = max(
                        h.schema_version
                        for u in tablet.replica_uuids
                        if (h := self.tservers[u].tablets.get(tablet.tablet_id)) is not None
                    )
                    if version < table.schema_version:
                        self.fail(
                            f"table {table.name} is RUNNING at v{table.schema_version} but "
                            f"{short(tablet.tablet_id)} is at v{version}"
                        )
        if self.master_up:
            for doc, body in self.documents.items():
                if self.master.metadata_document(doc) != body:
                    self.fail(f"metadata document {doc} lost its acknowledged body {body!r}")
            for table in self.master.tables():
                if table.state is TableState.REMOVED:
                    continue
                for location in self.master.tablet_locations(table.name):
                    record = stored.get((TABLETS_ENTRY, location.tablet_id))
                    if not isinstance(record, TabletRecord) or record.state is not RUNNING:
                        self.fail(f"location of a tablet that is not RUNNING: {location}")
                        return
                    if tables[record.table_id].state is TableState.REMOVED:
                        self.fail(f"location of a dropped table's tablet: {location}")
                    servers = [r.tserver_uuid for r in location.replicas]
                    roles = [r.role for r in location.replicas]
                    if sorted(servers) != sorted(record.replica_uuids) or roles.count("LEADER") > 1:
                        self.fail(f"location does not list the replicas, one leader: {location}")

    def check_leaders(self, tablets: list[TabletRecord]) -> None:
        """A replicated tablet becomes RUNNING only with a leader the master has from a
        report (one RUNNING before a master restart stays so: leaders are soft state)."""
        if not self.master_up:
            return
        running = {t.tablet_id for t in tablets if t.replicated and t.state is RUNNING}
        for tablet in tablets:
            tablet_id = tablet.tablet_id
            if tablet_id in running and tablet_id not in self._running_replicated:
                leader = self.master.leader_of(tablet_id)
                if leader not in tablet.replica_uuids:
                    self.fail(f"replicated tablet {short(tablet_id)} is RUNNING without a leader")
        self._running_replicated = running

    def check_configs(self, tables: dict[str, TableRecord]) -> None:
        """No replica's config has more than one learner (one pending change per
        tablet) or more voters than its table's factor; no eviction left fewer voters
        than a majority of the factor."""
        for ts in self.tservers.values():
            for tablet_id, h in ts.tablets.items():
                if not h.raft_peers:
                    continue
                table = tables.get(h.table_id)
                rf = len(h.raft_peers) if table is None else table.num_replicas
                if len(h.non_voters) > 1 or len(h.voters) > rf or len(h.voters) < rf // 2 + 1:
                    self.fail(
                        f"{ts.uuid}'s replica of {short(tablet_id)} has config @{h.config_index}"
                        f" voters {h.voters} learners {h.non_voters} (factor {rf})"
                    )

    def check_request_backed(self, request: TabletServerRequest) -> None:
        """Write-ahead: every request the master sends follows from a persisted record."""
        stored = self.stored()
        record = stored.get((TABLETS_ENTRY, request.tablet_id))
        if isinstance(request, CreateTabletRequest):
            if (
                not isinstance(record, TabletRecord)
                or not (
                    record.state is TabletState.CREATING
                    or (record.state is TabletState.RUNNING and record.replicated)
                )
                or request.tserver_uuid not in record.replica_uuids
            ):
                self.fail(f"create sent without a persisted CREATING record: {describe(request)}")
                return
            peers = tuple(u for u, _ in request.raft_peers)
            if peers != (record.replica_uuids if record.replicated else ()):
                self.fail(f"create's raft peers are not the tablet's replicas: {describe(request)}")
        elif isinstance(request, AlterTabletRequest):
            table = (
                stored.get((TABLES_ENTRY, record.table_id))
                if isinstance(record, TabletRecord)
                else None
            )
            if not isinstance(table, TableRecord) or table.schema_version < request.schema_version:
                self.fail(f"alter sent ahead of the persisted schema: {describe(request)}")
        elif isinstance(request, ChangeConfigRequest):
            config = self.master.config_of(request.tablet_id)
            if (
                not isinstance(record, TabletRecord)
                or record.state is not RUNNING
                or request.peer_uuid in record.replica_uuids
                or config is None
                or request.cas_config_opid_index != config.index
                or self.master.pending_add(request.tablet_id)
                != (request.cas_config_opid_index, request.peer_uuid)
            ):
                self.fail(
                    f"an ADD that is not the tablet's one pending change: {describe(request)}"
                )
        else:
            self.check_delete_safe(request.tserver_uuid, request.tablet_id)

    def check_delete_safe(self, uuid: str, tablet_id: str) -> None:
        record = self.stored().get((TABLETS_ENTRY, tablet_id))
        if (
            isinstance(record, TabletRecord)
            and uuid in record.replica_uuids
            and record.state in (TabletState.CREATING, TabletState.RUNNING)
        ):
            self.fail(f"delete of live tablet {short(tablet_id)} on {uuid}")

    def check_liveness(self) -> None:
        stored = self.stored()
        for record in stored.values():
            if isinstance(record, TableRecord) and record.state is not TableState.RUNNING:
                self.fail(f"after quiescence table {record.name} is {record.state.value}")
            if isinstance(record, TabletRecord) and record.state is not TabletState.RUNNING:
                self.fail(
                    f"after quiescence tablet {short(record.tablet_id)} is {record.state.value}"
                )
        versions = {
            r.table_id: r.schema_version for r in stored.values() if isinstance(r, TableRecord)
        }
        versions_rf = {
            r.table_id: r.num_replicas for r in stored.values() if isinstance(r, TableRecord)
        }
        newest: dict[str, int] = {}
        for r in stored.values():
            if isinstance(r, TabletRecord) and r.replicated:
                newest[r.tablet_id] = max(
                    (
                        h.schema_version
                        for u in r.replica_uuids
                        if (h := self.tservers[u].tablets.get(r.tablet_id)) is not None
                    ),
                    default=-1,
                )
        for uuid, ts in self.tservers.items():
            assigned = {
                r.tablet_id: versions[r.table_id]
                for r in stored.values()
                if isinstance(r, TabletRecord) and uuid in r.replica_uuids
            }
            # A replicated tablet's replicas learn an alter from its log (not modelled:
            # the leader's version stands for them all).
            hosted = {t: newest.get(t, h.schema_version) for t, h in ts.tablets.items()}
            for t, h in ts.tablets.items():
                mine = stored.get((TABLETS_ENTRY, t))
                if h.role == "LEADER" and isinstance(mine, TabletRecord):
                    rf = versions_rf[mine.table_id]
                    if rf > 1 and (
                        len(h.voters) != rf
                        or h.non_voters
                        or set(h.voters) != set(mine.replica_uuids)
                    ):
                        self.fail(
                            f"after quiescence {short(t)}'s leader has voters {h.voters},"
                            f" learners {h.non_voters}; the master assigns"
                            f" {mine.replica_uuids} (factor {rf})"
                        )
            if hosted != assigned:
                orphans = sorted(short(t) for t in set(hosted) - set(assigned))
                missing = sorted(short(t) for t in set(assigned) - set(hosted))
                self.fail(
                    f"after quiescence {uuid} hosts {len(hosted)} tablets, the master assigns "
                    f"{len(assigned)} (orphans {orphans}, missing {missing}, or versions differ)"
                )


def short(tablet_id: str) -> str:
    return tablet_id[:6]


def describe(request: TabletServerRequest) -> str:
    if isinstance(request, CreateTabletRequest):
        return (
            f"create {short(request.tablet_id)} ({request.table_name} {request.partition} "
            f"v{request.schema_version}) on {request.tserver_uuid}"
        )
    if isinstance(request, AlterTabletRequest):
        version, where = request.schema_version, request.tserver_uuid
        return f"alter {short(request.tablet_id)} to v{version} on {where}"
    if isinstance(request, ChangeConfigRequest):
        return (
            f"add {request.peer_uuid} to {short(request.tablet_id)} on leader "
            f"{request.tserver_uuid} (cas @{request.cas_config_opid_index})"
        )
    return f"delete {short(request.tablet_id)} on {request.tserver_uuid} ({request.reason})"


def describe_report(report: TabletReport) -> str:
    kind = "incremental" if report.is_incremental else "full"
    tablets = ",".join(
        f"{short(t.tablet_id)}@v{t.schema_version}" + (f"/{t.role}@{t.term}" if t.role else "")
        for t in report.updated_tablets
    )
    removed = ",".join(short(t) for t in report.removed_tablet_ids)
    return f"#{report.incarnation}.{report.sequence_number} {kind} [{tablets}]" + (
        f" removed [{removed}]" if removed else ""
    )


def run_seed(seed: int, **kwargs: object) -> Simulation:
    """Run one simulation; raises ``SimulationFailure`` naming the seed on a violation."""
    sim = Simulation(seed, **kwargs)  # type: ignore[arg-type]
    sim.run()
    return sim
