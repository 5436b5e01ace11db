"""Hand-written scenarios of the master's catalog state machine: DDL, tablet reports,
write-ahead recovery, lost and duplicated requests, creation timeouts, orphans."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from kudusql.cluster.catalog.records import (
    CatalogCorruptionError,
    TableRecord,
    TableState,
    TabletRecord,
    TabletState,
    decode_record,
    encode_record,
)
from kudusql.cluster.catalog.store import InMemoryCatalogStore
from kudusql.cluster.master_protocol import (
    AlterTabletRequest,
    ChangeConfigRequest,
    CreateTabletRequest,
    DeleteTabletRequest,
    ReportedTablet,
    TabletReport,
    TabletServerRequest,
)
from kudusql.cluster.master_state import CatalogError, MasterOptions, MasterState
from kudusql.cluster.sim.tserver_model import TabletServerModel

OPTIONS = MasterOptions(
    tserver_unresponsive_timeout=5.0,
    tablet_creation_timeout=10.0,
    request_retry_interval=1.0,
    default_num_replicas=1,  # these tests place unreplicated tablets unless they ask
)


class Cluster:
    """A master and tablet-server models wired by hand: the test decides what arrives."""

    def __init__(self, tservers: int = 3, seed: int = 1) -> None:
        self.store = InMemoryCatalogStore()
        self.master = MasterState(self.store, random.Random(seed), OPTIONS)
        self.ts = {f"ts{i}": TabletServerModel(f"ts{i}", f"h:{i}") for i in range(tservers)}
        for ts in self.ts.values():
            ts.start()
        self.now = 0.0

    def heartbeat(self, uuid: str) -> list[TabletServerRequest]:
        ts = self.ts[uuid]
        report = ts.report()
        result = self.master.heartbeat(uuid, ts.address, report, self.now)
        ts.heartbeat_response(report.incarnation, result.response)
        return list(result.requests)

    def heartbeat_all(self) -> list[TabletServerRequest]:
        return [r for u in self.ts if self.ts[u].up for r in self.heartbeat(u)]

    def deliver(self, requests: list[TabletServerRequest], answer: bool = True) -> None:
        """Apply requests on their servers; answers go back to the master unless lost."""
        for request in requests:
            ts = self.ts[request.tserver_uuid]
            if not ts.up:
                continue
            if isinstance(request, CreateTabletRequest):
                ts.create_tablet(request)
            elif isinstance(request, AlterTabletRequest):
                version = ts.alter_tablet(request)
                if answer and version is not None:
                    self.master.alter_tablet_response(ts.uuid, request.tablet_id, version, self.now)
            else:
                ts.delete_tablet(request)
                if answer:
                    self.master.delete_tablet_response(ts.uuid, request.tablet_id, self.now)

    def settle(self, rounds: int = 5) -> None:
        for _ in range(rounds):
            self.now += 1.0
            self.deliver(self.heartbeat_all())
            self.deliver(self.master.tick(self.now))

    def stored(self) -> list[TableRecord | TabletRecord]:
        return [decode_record(k, v) for k, v in self.store.scan()]


def started(tservers: int = 3) -> Cluster:
    cluster = Cluster(tservers)
    cluster.heartbeat_all()
    return cluster


def test_create_table_places_tablets_and_runs_when_reported() -> None:
    c = started()
    result = c.master.create_table("t", "s0", ["p0", "p1", "p2", "p3", "p4", "p5"], c.now)
    creates = [r for r in result.requests if isinstance(r, CreateTabletRequest)]
    assert len(creates) == 6
    assert {r.partition for r in creates} == {f"p{i}" for i in range(6)}
    # Power of two choices with recent picks spreads a batch over every server.
    assert {r.tserver_uuid for r in creates} == set(c.ts)
    table = c.master.table("t")
    assert table is not None and table.state is TableState.PREPARING
    assert all(t.state is TabletState.CREATING for t in c.master.tablets_of(table.table_id))
    assert c.master.tablet_locations("t") == []
    c.deliver(list(result.requests))
    c.heartbeat_all()
    assert c.master.is_ddl_done("t")
    locations = c.master.tablet_locations("t")
    assert sorted(loc.partition for loc in locations) == [f"p{i}" for i in range(6)]
    assert all(loc.address == c.ts[loc.tserver_uuid].address for loc in locations)


def test_ddl_errors_are_clear() -> None:
    c = Cluster()
    with pytest.raises(CatalogError, match="no live tablet servers"):
        c.master.create_table("t", "s", ["p"], c.now)
    c.heartbeat_all()
    c.master.create_table("t", "s", ["p"], c.now)
    with pytest.raises(CatalogError, match="table 't' already exists"):
        c.master.create_table("t", "s", ["p"], c.now)
    with pytest.raises(CatalogError, match="distinct partitions"):
        c.master.create_table("u", "s", ["p", "p"], c.now)
    # No partition at all (RANGE (k) ()): a table with no tablet, complete at once.
    c.master.create_table("empty", "s", [], c.now)
    assert c.master.is_ddl_done("empty")
    assert c.master.tablet_locations("empty") == []
    with pytest.raises(CatalogError, match="table 'u' does not exist"):
        c.master.drop_table("u", c.now)
    c.now = 100.0  # every server is silent past the unresponsive timeout
    assert c.master.live_tservers(c.now) == []
    with pytest.raises(CatalogError, match="no live tablet servers"):
        c.master.create_table("v", "s", ["p"], c.now)


def test_master_crash_between_persisting_creating_and_sending() -> None:
    c = started()
    lost = c.master.create_table("t", "s0", ["p0", "p1"], c.now)  # never sent: the master dies
    ids = {r.tablet_id for r in lost.requests}
    c.master = MasterState(c.store, random.Random(99), OPTIONS)  # rebuilt from the records only
    assert {t.tablet_id for t in c.master.tablets()} == ids
    assert c.master.table("t").state is TableState.PREPARING  # type: ignore[union-attr]
    c.heartbeat_all()  # servers register again with full reports
    resent = c.master.tick(c.now)
    assert {r.tablet_id for r in resent if isinstance(r, CreateTabletRequest)} == ids
    c.deliver(resent)
    c.heartbeat_all()
    assert c.master.is_ddl_done("t")


def test_duplicate_create_makes_one_replica_and_a_late_one_cannot_resurrect() -> None:
    c = started(1)
    result = c.master.create_table("t", "s0", ["p0"], c.now)
    c.deliver(list(result.requests) * 2)
    assert len(c.ts["ts0"].tablets) == 1
    c.heartbeat_all()
    assert c.master.is_ddl_done("t")
    drop = c.master.drop_table("t", c.now)
    c.deliver(list(drop.requests))
    c.deliver(list(result.requests))  # a create delayed past the delete: the tombstone refuses it
    assert c.ts["ts0"].tablets == {}
    assert c.stored() == []


def test_lost_delete_acks_are_retried_until_confirmed() -> None:
    c = started()
    created = c.master.create_table("t", "s0", ["p0", "p1", "p2"], c.now)
    c.deliver(list(created.requests))
    c.heartbeat_all()
    drop = c.master.drop_table("t", c.now)
    assert c.master.table("t") is None
    assert all(isinstance(r, DeleteTabletRequest) for r in drop.requests)
    c.deliver(list(drop.requests), answer=False)  # deleted on the servers, every ack lost
    assert all(t.state is TabletState.DELETED for t in c.stored() if isinstance(t, TabletRecord))
    c.now += OPTIONS.request_retry_interval
    again = c.master.tick(c.now)
    assert {r.tablet_id for r in again} == {r.tablet_id for r in drop.requests}
    c.deliver(again, answer=False)  # deleting what is gone is a no-op; acks lost again
    assert c.stored() != []
    c.heartbeat_all()  # the incremental reports list the removed tablets
    assert c.stored() == []
    assert all(ts.tablets == {} for ts in c.ts.values())


def test_full_report_confirms_deletes() -> None:
    c = started(1)
    created = c.master.create_table("t", "s0", ["p0"], c.now)
    c.deliver(list(created.requests))
    c.heartbeat_all()
    drop = c.master.drop_table("t", c.now)
    c.deliver(list(drop.requests), answer=False)
    c.ts["ts0"].crash()
    c.ts["ts0"].start()  # dirty marks are gone with the process; its first report is full
    c.heartbeat_all()
    assert c.stored() == []


def test_full_report_after_tserver_restart_with_an_orphan() -> None:
    c = started()
    created = c.master.create_table("t", "s0", ["p0"], c.now)
    c.deliver(list(created.requests))
    c.heartbeat_all()
    ts = c.ts["ts2"]
    ts.crash()
    ts.create_tablet(CreateTabletRequest("ts2", "f" * 32, "x", "gone", "p", "s", 0))  # on its disk
    ts.start()
    requests = c.heartbeat("ts2")
    assert requests == [DeleteTabletRequest("ts2", "f" * 32, "orphan: not in the catalog")]
    c.deliver(requests)
    assert "f" * 32 not in ts.tablets
    assert c.master.is_ddl_done("t")


def test_incremental_report_from_an_unknown_server_asks_for_a_full_one() -> None:
    c = started(1)
    c.master.master_restart()
    report = TabletReport(incarnation=1, sequence_number=5, is_incremental=True)
    result = c.master.heartbeat("ts0", "h:0", report, c.now)
    assert result.response.needs_full_report
    assert c.master.live_tservers(c.now) == []
    c.ts["ts0"].heartbeat_response(1, result.response)
    c.heartbeat("ts0")  # now a full report
    assert c.master.live_tservers(c.now) == ["ts0"]


def test_a_report_older_than_one_processed_is_ignored() -> None:
    c = started(1)
    created = c.master.create_table("t", "s0", ["p0"], c.now)
    c.deliver(list(created.requests))
    tablet_id = created.requests[0].tablet_id
    newer = TabletReport(1, 10, True, (ReportedTablet(tablet_id, 0),))
    assert not c.master.heartbeat("ts0", "h:0", newer, c.now).response.needs_full_report
    assert c.master.is_ddl_done("t")
    c.master.drop_table("t", c.now)  # the delete is not delivered yet
    older_full = TabletReport(1, 9, False, ())  # built before the tablet existed
    c.master.heartbeat("ts0", "h:0", older_full, c.now)
    assert [r.state for r in c.master.tablets()] == [TabletState.DELETED]  # not confirmed


def test_alter_waits_for_every_tablet_to_report_the_new_version() -> None:
    c = started()
    created = c.master.create_table("t", "s0", ["p0", "p1", "p2"], c.now)
    c.deliver(list(created.requests))
    c.heartbeat_all()
    altered = c.master.alter_table("t", c.now, schema="s1", new_name="u")
    assert c.master.table("t") is None
    table = c.master.table("u")
    assert table is not None and table.state is TableState.ALTERING
    assert table.schema_version == 1
    alters = [r for r in altered.requests if isinstance(r, AlterTabletRequest)]
    assert len(alters) == 3 and {r.schema_version for r in alters} == {1}
    c.deliver(alters[:2])
    assert not c.master.is_ddl_done("u")
    c.deliver(alters[2:], answer=False)  # applied, answer lost: the report tells the master
    assert not c.master.is_ddl_done("u")
    c.heartbeat_all()
    assert c.master.is_ddl_done("u")
    assert {ts.schema_version for s in c.ts.values() for ts in s.tablets.values()} == {1}


def test_alter_dropping_every_tablet_is_done_at_once() -> None:
    c = started()
    created = c.master.create_table("t", "s0", ["p0", "p1"], c.now)
    c.deliver(list(created.requests))
    c.heartbeat_all()
    tablets = [t.tablet_id for t in c.master.tablet_locations("t")]
    c.master.alter_table("t", c.now, drop_tablets=tablets)
    assert c.master.is_ddl_done("t")  # no tablet is left to report the new version
    assert c.master.tablet_locations("t") == []


def test_alter_after_master_restart_rolls_forward() -> None:
    c = started()
    created = c.master.create_table("t", "s0", ["p0", "p1"], c.now)
    c.deliver(list(created.requests))
    c.heartbeat_all()
    c.master.alter_table("t", c.now, schema="s1")  # the alters are never sent
    c.master.master_restart()
    c.settle()
    assert c.master.is_ddl_done("t")
    assert {h.schema_version for s in c.ts.values() for h in s.tablets.values()} == {1}


def test_a_tablet_that_fails_to_create_in_time_is_replaced() -> None:
    c = started(2)
    created = c.master.create_table("t", "s0", ["p0", "p1", "p2", "p3"], c.now)
    victim = next(r for r in created.requests if r.tserver_uuid == "ts0")
    c.ts["ts0"].crash()
    c.deliver(list(created.requests))
    for _ in range(int(OPTIONS.tablet_creation_timeout) + 2):
        c.now += 1.0
        c.deliver(c.heartbeat_all())
        c.deliver(c.master.tick(c.now))
    assert c.master.is_ddl_done("t")
    tablets = c.master.tablets_of(c.master.table("t").table_id)  # type: ignore[union-attr]
    replaced = [t for t in tablets if t.state is TabletState.REPLACED]
    assert victim.tablet_id in {t.tablet_id for t in replaced}
    running = [t for t in tablets if t.state is TabletState.RUNNING]
    assert sorted(t.partition for t in running) == ["p0", "p1", "p2", "p3"]
    assert all(t.tserver_uuid == "ts1" for t in running)
    # The old server comes back and creates the stale replica: it is deleted and forgotten.
    c.ts["ts0"].start()
    c.deliver([victim])
    c.settle()
    assert c.ts["ts0"].tablets == {}
    assert all(t.state is TabletState.RUNNING for t in c.master.tablets())


def test_restart_rebuilds_exactly_the_persisted_catalog() -> None:
    c = started()
    for name in ("a", "b", "c"):
        c.deliver(list(c.master.create_table(name, "s", ["p0", "p1"], c.now).requests))
    c.heartbeat_all()
    c.master.drop_table("b", c.now)
    c.master.alter_table("c", c.now, schema="s2")
    before = {r.key: r for r in c.master.durable_records()}
    c.master.master_restart()
    assert {r.key: r for r in c.master.durable_records()} == before
    assert {r.key: r for r in c.stored()} == before


def test_records_round_trip_and_corruption_is_reported() -> None:
    table = TableRecord("a" * 32, "t", "schema", 3, TableState.ALTERING)
    tablet = TabletRecord("b" * 32, "a" * 32, "p0", "ts0", TabletState.RUNNING)
    for record in (table, tablet):
        assert decode_record(record.key, encode_record(record)) == record
    with pytest.raises(CatalogCorruptionError, match="not valid JSON"):
        decode_record(table.key, b"\xff")
    with pytest.raises(CatalogCorruptionError, match="unknown state"):
        decode_record(table.key, encode_record(table).replace(b"ALTERING", b"MELTING"))
    with pytest.raises(CatalogCorruptionError, match="another key"):
        decode_record((1, "c" * 32), encode_record(table))
    with pytest.raises(CatalogCorruptionError, match="schema_version"):
        decode_record(table.key, encode_record(table).replace(b":3", b':"3"'))


# -- replicated tables (num_replicas > 1) ----------------------------------------------------


def test_replica_records_are_backward_compatible() -> None:
    # Records written before replication (no num_replicas, no tserver_uuids) still decode.
    old_table = (
        b'{"metadata":"","name":"t","schema":"s","schema_version":0,"state":"RUNNING",'
        b'"table_id":"' + b"a" * 32 + b'","v":1}'
    )
    old_tablet = (
        b'{"partition":"p0","state":"RUNNING","table_id":"'
        + b"a" * 32
        + b'","tablet_id":"'
        + b"b" * 32
        + b'","tserver_uuid":"ts0","v":1}'
    )
    table = decode_record((1, "a" * 32), old_table)
    tablet = decode_record((2, "b" * 32), old_tablet)
    assert isinstance(table, TableRecord) and table.num_replicas == 1
    assert isinstance(tablet, TabletRecord) and tablet.replica_uuids == ("ts0",)
    # An unreplicated record encodes exactly as before.
    assert encode_record(table) == old_table and encode_record(tablet) == old_tablet
    replicated = TabletRecord("b" * 32, "a" * 32, "p0", "ts1", TabletState.RUNNING, ("ts2", "ts0"))
    encoded = encode_record(replicated)
    assert b'"tserver_uuids":["ts1","ts2","ts0"]' in encoded
    assert decode_record(replicated.key, encoded) == replicated
    rf3 = replace(table, num_replicas=3)
    assert decode_record(rf3.key, encode_record(rf3)) == rf3
    with pytest.raises(CatalogCorruptionError, match="malformed replica servers"):
        decode_record(replicated.key, encoded.replace(b'["ts1","ts2","ts0"]', b'["ts1","ts1"]'))


def elect(c: Cluster, tablet_id: str, uuid: str, term: int) -> None:
    """``uuid``'s replica wins ``term``; the other replicas follow it."""
    for ts in c.ts.values():
        ts.learn_term(tablet_id, term, leader=ts.uuid == uuid)


def test_the_default_replication_factor_is_three_with_three_live_servers() -> None:
    for servers, expected in ((1, 1), (2, 1), (3, 3), (4, 3)):
        c = Cluster(servers)
        c.master = MasterState(c.store, random.Random(1), MasterOptions())
        c.heartbeat_all()
        c.master.create_table("t", "s", ["p0"], c.now)
        table = c.master.table("t")
        assert table is not None and table.num_replicas == expected, servers
    c = Cluster(3)
    c.master = MasterState(c.store, random.Random(1), MasterOptions(default_num_replicas=1))
    c.heartbeat_all()
    c.master.create_table("t", "s", ["p0"], c.now)
    table = c.master.table("t")
    assert table is not None and table.num_replicas == 1


def test_replicated_create_places_distinct_servers_and_sends_raft_peers() -> None:
    c = started(tservers=4)
    result = c.master.create_table("t", "s", ["p0", "p1", "p2"], c.now, num_replicas=3)
    table = c.master.table("t")
    assert table is not None and table.num_replicas == 3
    for tablet in c.master.tablets_of(table.table_id):
        assert len(set(tablet.replica_uuids)) == 3
        creates = [r for r in result.requests if r.tablet_id == tablet.tablet_id]
        assert sorted(r.tserver_uuid for r in creates) == sorted(tablet.replica_uuids)
        peers = tuple((u, c.ts[u].address) for u in tablet.replica_uuids)
        assert all(isinstance(r, CreateTabletRequest) and r.raft_peers == peers for r in creates)
    # Twelve replicas spread over four servers (power of two choices per replica).
    assert {u for t in c.master.tablets() for u in t.replica_uuids} == set(c.ts)
    # num_replicas = 1 sends exactly what it sent before: no raft peers.
    single = c.master.create_table("u", "s", ["p0"], c.now)
    assert [r.raft_peers for r in single.requests if isinstance(r, CreateTabletRequest)] == [()]
    with pytest.raises(CatalogError, match=r"needs 5 replicas per tablet .* only 4 are live"):
        c.master.create_table("v", "s", ["p0"], c.now, num_replicas=5)
    with pytest.raises(CatalogError, match="at least 1 replica"):
        c.master.create_table("v", "s", ["p0"], c.now, num_replicas=0)


def test_replicated_tablet_runs_once_a_leader_is_reported() -> None:
    c = started()
    c.deliver(list(c.master.create_table("t", "s", ["p0"], c.now, num_replicas=3).requests))
    c.heartbeat_all()  # every replica reports itself a FOLLOWER in term 0
    (tablet,) = c.master.tablets()
    assert tablet.state is TabletState.CREATING and not c.master.is_ddl_done("t")
    assert c.master.tablet_locations("t") == []
    elect(c, tablet.tablet_id, "ts1", 1)
    c.heartbeat_all()
    assert c.master.is_ddl_done("t") and c.master.leader_of(tablet.tablet_id) == "ts1"
    (loc,) = c.master.tablet_locations("t")
    assert (loc.replicas[0].tserver_uuid, loc.replicas[0].role) == ("ts1", "LEADER")
    assert [r.role for r in loc.replicas[1:]] == ["FOLLOWER", "FOLLOWER"]
    assert (loc.tserver_uuid, loc.address) == ("ts1", c.ts["ts1"].address)
    # The highest term wins: a stale leader's report of term 1 does not undo term 2.
    elect(c, tablet.tablet_id, "ts2", 2)
    c.heartbeat("ts2")
    c.ts["ts1"].tablets[tablet.tablet_id].role = "LEADER"
    c.ts["ts1"].tablets[tablet.tablet_id].term = 1
    c.ts["ts1"]._mark_dirty(tablet.tablet_id)
    c.heartbeat("ts1")
    assert c.master.leader_of(tablet.tablet_id) == "ts2"
    # An unreplicated tablet's one replica is its leader in locations.
    c.deliver(list(c.master.create_table("u", "s", ["p0"], c.now).requests))
    c.heartbeat_all()
    (single,) = c.master.tablet_locations("u")
    assert [r.role for r in single.replicas] == ["LEADER"]


def test_replicated_table_alter_goes_to_the_leader_and_drop_deletes_every_replica() -> None:
    c = started()
    c.deliver(list(c.master.create_table("t", "s", ["p0"], c.now, num_replicas=3).requests))
    (tablet,) = c.master.tablets()
    elect(c, tablet.tablet_id, "ts0", 1)
    c.heartbeat_all()
    assert c.master.is_ddl_done("t")
    alters = list(c.master.alter_table("t", c.now, schema="s2").requests)
    # Only the leader is asked: it replicates the alter through the tablet's log.
    assert [(type(r), r.tserver_uuid) for r in alters] == [(AlterTabletRequest, "ts0")]
    assert not c.master.is_ddl_done("t")
    c.deliver(alters)
    assert c.master.is_ddl_done("t")
    deletes = c.master.drop_table("t", c.now).requests
    assert sorted(r.tserver_uuid for r in deletes) == ["ts0", "ts1", "ts2"]
    assert all(isinstance(r, DeleteTabletRequest) for r in deletes)
    c.deliver([r for r in deletes if r.tserver_uuid != "ts2"])  # ts2's delete is lost
    assert [t.tablet_id for t in c.master.tablets()] == [tablet.tablet_id]  # not yet gone
    c.settle()  # the master re-sends the delete to ts2 only
    assert c.master.tablets() == [] and c.master.tables() == []
    assert all(tablet.tablet_id not in ts.tablets for ts in c.ts.values())


def test_partitions_added_to_a_replicated_table_get_its_replicas() -> None:
    c = started()
    c.deliver(list(c.master.create_table("t", "s", ["p0"], c.now, num_replicas=3).requests))
    (tablet,) = c.master.tablets()
    elect(c, tablet.tablet_id, "ts0", 1)
    c.heartbeat_all()
    added = c.master.alter_table("t", c.now, add_partitions=["p1"]).requests
    new = [r for r in added if isinstance(r, CreateTabletRequest)]
    assert len({r.tserver_uuid for r in new}) == 3 and all(len(r.raft_peers) == 3 for r in new)
    c.deliver(list(added))
    (fresh,) = [t for t in c.master.tablets() if t.tablet_id == new[0].tablet_id]
    elect(c, fresh.tablet_id, fresh.replica_uuids[0], 1)
    c.settle()
    assert c.master.is_ddl_done("t")


def test_a_lost_create_is_resent_to_the_replica_that_never_reported() -> None:
    c = started()
    creates = list(c.master.create_table("t", "s", ["p0"], c.now, num_replicas=3).requests)
    (tablet,) = c.master.tablets()
    missing = creates[-1].tserver_uuid
    c.deliver(creates[:-1])
    leader = creates[0].tserver_uuid
    elect(c, tablet.tablet_id, leader, 1)
    c.heartbeat_all()
    assert c.master.is_ddl_done("t")  # the leader reported: RUNNING without the third
    c.settle()
    assert tablet.tablet_id in c.ts[missing].tablets


def test_a_dead_replica_is_evicted_re_replicated_and_deleted_when_it_returns() -> None:
    # Kudu's re-replication: the leader evicts a dead follower (3-2-3); the master asks it
    # to add a live server (compare-and-set on the config), stubbornly, one at a time;
    # the learner is copied and promoted; the evicted replica is deleted on return.
    c = started(tservers=4)
    c.deliver(list(c.master.create_table("t", "s", ["p0"], c.now, num_replicas=3).requests))
    (tablet,) = c.master.tablets()
    tid = tablet.tablet_id
    leader, follower = tablet.replica_uuids[0], tablet.replica_uuids[1]
    spare = next(u for u in c.ts if u not in tablet.replica_uuids)
    elect(c, tid, leader, 1)
    c.heartbeat_all()
    assert c.master.is_ddl_done("t")
    assert c.master.tick(c.now) == []  # three voters: nothing to do
    c.ts[follower].crash()
    c.now += OPTIONS.tserver_unresponsive_timeout  # the master stops counting it live
    voters = tuple(u for u in tablet.replica_uuids if u != follower)
    for u in voters:
        c.ts[u].learn_config(tid, 1, voters, ())
    requests = c.heartbeat_all()
    (add,) = [r for r in requests if isinstance(r, ChangeConfigRequest)]
    assert (add.tserver_uuid, add.peer_uuid, add.cas_config_opid_index) == (leader, spare, 1)
    assert c.master.tablets()[0].replica_uuids == voters  # the record follows the config
    assert c.master.tick(c.now) == []  # not due again yet
    c.now += OPTIONS.request_retry_interval
    assert c.master.tick(c.now) == [add]  # stubborn: the same server, the same index
    assert c.ts[leader].change_config(add)
    assert not c.ts[leader].change_config(add)  # idempotent: the compare-and-set fails
    c.heartbeat(leader)
    (loc,) = c.master.tablet_locations("t")
    assert {(r.tserver_uuid, r.role) for r in loc.replicas} == {
        (leader, "LEADER"),
        (voters[1], "FOLLOWER"),
        (spare, "LEARNER"),
    }
    c.now += OPTIONS.request_retry_interval
    assert c.master.tick(c.now) == []  # a learner is on its way: no second change
    c.ts[spare].install_copy(tid, c.ts[leader].tablets[tid])
    for u in (*voters, spare):
        c.ts[u].learn_config(tid, 3, (*voters, spare), ())
    c.heartbeat_all()
    assert set(c.master.tablets()[0].replica_uuids) == {*voters, spare}
    assert c.master.tablets()[0].config_index == 3
    c.now += OPTIONS.request_retry_interval
    assert c.master.tick(c.now) == []
    # The dead server returns with its stale replica (config 0): deleted, compare-and-set.
    c.ts[follower].start()
    (delete,) = c.heartbeat(follower)
    assert isinstance(delete, DeleteTabletRequest)
    assert (delete.tserver_uuid, delete.cas_config_index) == (follower, 0)
    c.deliver([delete])
    assert tid not in c.ts[follower].tablets
    # A delayed delete never removes a newer replica copied there since.
    c.ts[follower].install_copy(tid, c.ts[leader].tablets[tid])
    assert not c.ts[follower].delete_tablet(delete)
