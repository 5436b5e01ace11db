"""RemoteTable over real tablet server processes, against the embedded Table.

Three tablet servers host the four tablets of a HASH x RANGE table, created on them
directly with CreateTablet (the master comes later); ``Locations`` is the test's
location source and serves their real addresses. The differential test writes the
same seeded random batches to an embedded Table with the same schema and partitioning
and compares every answer exactly.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from kudusql.cluster.client.meta_cache import MetaCache
from kudusql.cluster.client.remote_table import RemoteTable
from kudusql.cluster.client.tserver_client import TabletServerPool
from kudusql.cluster.errors import MalformedMessage, TabletNotFound
from kudusql.cluster.master_state import TabletLocation
from kudusql.cluster.retry import RetryPolicy
from kudusql.cluster.security import write_secret_file
from kudusql.cluster.tablet_partition import TabletPartition
from kudusql.cluster.tserver.messages import (
    CreateTablet,
    LookupRequest,
    WriteRequest,
    WriteResponse,
)
from kudusql.common.errors import Error
from kudusql.common.predicates import ColumnPredicate
from kudusql.common.row_operations import WriteOp, WriteResult
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.storage.tables.database import Database
from kudusql.storage.tables.partition import (
    HashDimension,
    PartitionSchema,
    RangeBounds,
    create_partitions,
    partition_for_batch,
)
from kudusql.storage.tables.table import Table
from tests.cluster.tserver_process import TServerProcess

SECRET = "remote-table-test-secret"
FAST = RetryPolicy(max_attempts=2, initial_backoff=0.02, max_backoff=0.05, deadline=2.0)

SCHEMA = Schema.build(
    [
        ColumnSchema("a", DataType.parse("BIGINT"), nullable=False),
        ColumnSchema("b", DataType.parse("INT"), nullable=False),
        ColumnSchema("v", DataType.parse("INT")),
        ColumnSchema("s", DataType.parse("STRING")),
    ],
    ["a", "b"],
)
PARTITIONS = PartitionSchema.create(
    SCHEMA,
    [HashDimension(("b",), 2)],
    ["a"],
    [RangeBounds((0,), (100,)), RangeBounds((100,), (200,))],
)


class Locations:
    """The test's location source: tablet locations it is told, and how often it was
    asked."""

    def __init__(self) -> None:
        self.tablets: dict[str, list[TabletLocation]] = {}
        self.asked = 0

    def locations(self, table_name: str) -> list[TabletLocation]:
        self.asked += 1
        return list(self.tablets[table_name])

    def move(self, tablet_id: str, address: str, new_id: str | None = None) -> None:
        for name, tablets in self.tablets.items():
            self.tablets[name] = [
                TabletLocation(new_id or t.tablet_id, t.partition, t.tserver_uuid, address)
                if t.tablet_id == tablet_id
                else t
                for t in tablets
            ]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("remote")
    write_secret_file(path / "secret", SECRET)
    return path


@pytest.fixture(scope="module")
def tservers(workdir: Path) -> Iterator[list[TServerProcess]]:
    procs: list[TServerProcess] = []
    try:
        procs.extend(TServerProcess(workdir / f"ts{i}", workdir / "secret") for i in range(3))
        yield procs
    finally:
        for p in procs:
            p.stop()
    for i in range(3):
        assert "Traceback" not in (workdir / f"ts{i}" / "tserver.log").read_text()


def pool() -> TabletServerPool:
    return TabletServerPool(secret=SECRET, retry=FAST, timeout=60)


def create_table(
    name: str, servers: list[TServerProcess], source: Locations, session: TabletServerPool
) -> RemoteTable:
    """The table's tablets, created round-robin on ``servers``."""
    locations = []
    for i, p in enumerate(create_partitions(PARTITIONS, SCHEMA)):
        server = servers[i % len(servers)]
        tablet_id = f"{name}-{i}"
        text = TabletPartition.of(PARTITIONS, p).to_json()
        session.create_tablet(
            server.address,
            CreateTablet(tablet_id, name, name, text, json.dumps(SCHEMA.to_dict()), 1),
        )
        locations.append(TabletLocation(tablet_id, text, f"uuid-{i}", server.address))
    source.tablets[name] = locations
    return RemoteTable(name, SCHEMA, PARTITIONS, MetaCache(source), session)


def random_batch(rng: random.Random, n: int) -> pa.Table:
    """Keys in and out of the ranges (some NULL), duplicates, NULL values."""
    keys = [(rng.randrange(-20, 220), rng.randrange(0, 4)) for _ in range(n // 2 + 1)]
    rows = [rng.choice(keys) for _ in range(n)]
    return pa.table(
        {
            "a": pa.array([None if rng.random() < 0.03 else a for a, _ in rows], pa.int64()),
            "b": pa.array([b for _, b in rows], pa.int32()),
            "v": pa.array(
                [None if rng.random() < 0.2 else rng.randrange(100) for _ in rows], pa.int32()
            ),
            "s": pa.array([rng.choice([None, "x", "yy", "zzz"]) for _ in rows], pa.string()),
        }
    )


def result_of(r: WriteResult) -> tuple[Any, ...]:
    return (
        r.applied,
        r.ignored,
        [(e.index, e.op, e.key, e.status, e.message) for e in r.errors],
    )


def atomic_outcome(table: Table | RemoteTable, batch: pa.Table, op: WriteOp) -> tuple[Any, ...]:
    """An atomic write's result, or the error it raised (class and message)."""
    try:
        return ("ok", *result_of(table.write(batch, op, atomic=True)))
    except Error as e:
        return (type(e).__name__, str(e))


def rows(table: pa.Table) -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=lambda r: json.dumps(r, sort_keys=True, default=str))


@pytest.mark.parametrize(
    "seed", [35, 36, *(pytest.param(s, marks=pytest.mark.slow) for s in range(100, 110))]
)
def test_differential_against_the_embedded_table(
    tservers: list[TServerProcess], tmp_path: Path, seed: int
) -> None:
    source = Locations()
    with pool() as session, Database(str(tmp_path / "db")) as db:
        remote = create_table(f"diff{seed}", tservers, source, session)
        db.create_table("diff", SCHEMA, PARTITIONS)
        local: Table = db.table("diff")
        rng = random.Random(seed)
        ops = list(WriteOp)
        marks: list[tuple[int, int]] = []  # (embedded, remote) timestamps between batches
        statuses: set[tuple[str, str]] = set()
        atomic_kinds: set[str] = set()  # "ok", or the error class an atomic batch raised
        for step in range(28):
            batch = random_batch(rng, rng.choice([1, 5, 40, 200]))
            op = ops[step % len(ops)] if step < len(ops) else rng.choice(ops)
            if step % 3 == 0:
                batch = batch.slice(0, max(1, batch.num_rows // 2))
            # After the diff-scan windows below: atomic batches and per-row operations.
            if step >= 16 and step % 2 == 0:
                # All or nothing: the same error (class and message) or the same result.
                outcome = atomic_outcome(local, batch, op)
                assert atomic_outcome(remote, batch, op) == outcome, step
                atomic_kinds.add(outcome[0])
            elif step >= 16:
                # Each row's operation from a column.
                per_row = batch.append_column(
                    "op", pa.array([rng.choice(ops).name.lower() for _ in range(batch.num_rows)])
                )
                expected = local.write(per_row, op_column="op")
                got = remote.write(per_row, op_column="op")
                assert result_of(got) == result_of(expected), (step, "op_column")
            expected = local.write(batch, op)
            got = remote.write(batch, op)
            assert result_of(got) == result_of(expected), (step, op)
            statuses |= {(e.status, e.message) for e in got.errors}
            marks.append((expected.timestamp + 1, remote.snapshot() + 1))

        if seed in (35, 36):
            # The batches met every kind of row error: no range partition, a NULL key,
            # duplicate and missing keys.
            messages = " | ".join(sorted(m for _, m in statuses))
            assert {s for s, _ in statuses} >= {"NotFound", "AlreadyPresent", "InvalidArgument"}
            assert "No tablet covering" in messages, messages
            assert atomic_kinds >= {"ok", "IntegrityError"} or len(atomic_kinds) >= 2, atomic_kinds

        # Every read gives the same answer (no columns: the row count, as count(*)).
        assert rows(remote.to_arrow()) == rows(local.to_arrow())
        assert remote.to_arrow([]).num_rows == local.to_arrow([]).num_rows > 0
        assert remote.count_rows() == local.count_rows()
        assert remote.to_arrow(ordered=True).equals(local.to_arrow(ordered=True))
        for preds in (
            [ColumnPredicate.ge("a", 10), ColumnPredicate.lt("a", 120)],
            [ColumnPredicate.eq("b", 1)],
            [ColumnPredicate.eq("a", 150), ColumnPredicate.eq("b", 2)],
            [ColumnPredicate.is_null("v")],
            [ColumnPredicate.in_list("a", [1, 50, 199, 300])],
        ):
            assert rows(remote.to_arrow(["s", "a", "v"], preds)) == rows(
                local.to_arrow(["s", "a", "v"], preds)
            ), preds
            # A tablet server evaluates hint predicates exactly: only matching rows
            # cross the network (the SQL executor sends its WHERE as hints).
            hints = [p.advisory() for p in preds]
            assert rows(remote.to_arrow(["s", "a", "v"], hints)) == rows(
                local.to_arrow(["s", "a", "v"], preds)
            ), preds
            # No columns (count(*) with a WHERE): batches that carry only row counts.
            assert remote.to_arrow([], preds).num_rows == local.to_arrow([], preds).num_rows
        assert remote.to_arrow([], ordered=True).num_rows == local.count_rows()
        grid = [(a, b) for a in range(-2, 205, 3) for b in range(4)]
        for key in grid:
            assert remote.lookup(key) == local.lookup(key), key
            assert remote.lookup(key, ["v"]) == local.lookup(key, ["v"])
        assert remote.lookup_many(grid, ["s", "a"]) == [local.lookup(k, ["s", "a"]) for k in grid]
        (e_start, r_start), (e_mid, r_mid) = marks[8], marks[16]
        changed = rows(local.diff_scan(e_start, e_mid).read_all())
        if seed in (35, 36):  # the window saw rows change and rows deleted
            assert {r["is_deleted"] for r in changed} == {False, True}
        assert rows(remote.diff_scan(r_start, r_mid).read_all()) == changed
        end_r, end_e = remote.snapshot(), db.snapshot()
        assert rows(remote.diff_scan(r_mid, end_r, ["a", "v"]).read_all()) == rows(
            local.diff_scan(e_mid, end_e, ["a", "v"]).read_all()
        )
        # A snapshot before the later batches reads the table as it was then.
        assert rows(remote.to_arrow(snapshot=r_mid)) == rows(local.to_arrow(snapshot=e_mid))
        then = [local.lookup(k, snapshot=e_mid) for k in grid]
        assert remote.lookup_many(grid, snapshot=r_mid) == then
        assert [remote.lookup(k, snapshot=r_mid) for k in grid[:40]] == then[:40]
        assert remote.count_rows(snapshot=r_start) == local.count_rows(snapshot=e_start)
        limited = remote.to_arrow(limit=7)
        assert limited.num_rows == min(7, local.count_rows())
        assert remote.to_arrow(ordered=True, limit=5).equals(
            local.to_arrow(ordered=True).slice(0, 5)
        )
        stats = remote.tablet_statistics()
        assert len(stats) == 4 and sum(s["memrowset_rows"] for s in stats) >= local.count_rows()


def test_read_your_writes_across_servers(tservers: list[TServerProcess]) -> None:
    source = Locations()
    with pool() as writer_session, pool() as reader_session:
        table = create_table("ryw", tservers, source, writer_session)
        for i in range(20):
            row = pa.table(
                {"a": pa.array([i * 10], pa.int64()), "b": pa.array([i % 4], pa.int32())}
            )
            table.insert(row)
            # Every tablet is read at the session's latest timestamp: the write just
            # acknowledged by one server is seen, whichever server answers last.
            assert table.count_rows() == i + 1
        # A session that has seen nothing asks a server for its clock.
        with pool() as fresh_session:
            fresh = RemoteTable("ryw", SCHEMA, PARTITIONS, MetaCache(source), fresh_session)
            assert fresh_session.observed.value is None
            assert fresh.snapshot() == fresh_session.observed.value
        # Another session sees the writes once it has observed the writer's time.
        reader_session.observed.observe(writer_session.observed.value)
        reader = RemoteTable("ryw", SCHEMA, PARTITIONS, MetaCache(source), reader_session)
        assert reader.count_rows() == 20


def test_the_server_refuses_rows_of_another_partition(tservers: list[TServerProcess]) -> None:
    source = Locations()
    with pool() as session:
        create_table("misrouted", tservers, source, session)
        first = source.tablets["misrouted"][0]  # b's bucket 0, a in [0, 100)
        part = TabletPartition.from_json(first.partition)
        batch = pa.table(
            {"a": pa.array([1, 2, 150, 3], pa.int64()), "b": pa.array([0, 1, 0, 2], pa.int32())}
        )
        slots = partition_for_batch(PARTITIONS, SCHEMA, batch)
        mine = [int(s) == part.index_in(SCHEMA) for s in slots]
        response = session.client(first.address).put(WriteRequest(first.tablet_id, "insert"), batch)
        assert isinstance(response, WriteResponse)
        refused = [e.index for e in response.row_errors]
        assert refused == [i for i, ok in enumerate(mine) if not ok]
        assert {e.status for e in response.row_errors} == {"NotFound"}
        assert all("Row not in tablet partition" in e.message for e in response.row_errors)
        assert response.applied == sum(mine)


def test_locations_refresh_after_a_restart_on_another_port(
    tservers: list[TServerProcess],
) -> None:
    source = Locations()
    with pool() as session:
        table = create_table("moving", tservers, source, session)
        data = pa.table(
            {"a": pa.array(range(0, 200, 7), pa.int64()), "b": pa.array([1] * 29, pa.int32())}
        )
        assert not table.insert(data).errors
        asked = source.asked
        old = tservers[1]
        old.stop()
        moved = old.restart()  # another ephemeral port
        tservers[1] = moved
        for t in source.tablets["moving"]:
            if t.address == old.address:
                source.move(t.tablet_id, moved.address)
        # The cached address refuses; the cache refreshes once and the reads go on.
        assert table.count_rows() == 29
        assert source.asked == asked + 1
        assert table.lookup((140, 1)) == {"a": 140, "b": 1, "v": None, "s": None}
        # The restarted server read each tablet's partition back from its superblock.
        more = pa.table({"a": pa.array([1, 101], pa.int64()), "b": pa.array([2, 2], pa.int32())})
        assert not table.insert(more).errors
        assert table.count_rows() == 31


def test_a_deleted_tablet_refreshes_the_locations(tservers: list[TServerProcess]) -> None:
    source = Locations()
    with pool() as session:
        table = create_table("dropped", tservers, source, session)
        one = source.tablets["dropped"][0]
        session.delete_tablet(one.address, one.tablet_id)
        # The partition now lives in a new tablet on another server (as the master's
        # re-placement would do).
        target = next(p for p in tservers if p.address != one.address)
        session.create_tablet(
            target.address,
            CreateTablet(
                "dropped-new", "dropped", "dropped", one.partition, json.dumps(SCHEMA.to_dict()), 1
            ),
        )
        source.move(one.tablet_id, target.address, new_id="dropped-new")
        row = pa.table({"a": pa.array([5], pa.int64()), "b": pa.array([0], pa.int32())})
        assert not table.insert(row).errors  # TabletNotFound, refreshed, written there
        assert table.lookup((5, 0)) is not None
        with pytest.raises(TabletNotFound):
            session.count_rows(one.address, one.tablet_id, None)


def test_the_tablet_server_data_calls(tservers: list[TServerProcess]) -> None:
    source = Locations()
    with pool() as session:
        table = create_table("calls", tservers, source, session)
        data = pa.table(
            {
                "a": pa.array(range(100, 200), pa.int64()),
                "b": pa.array([3] * 100, pa.int32()),
                "v": pa.array(range(100), pa.int32()),
            }
        )
        assert not table.insert(data).errors
        t = next(
            loc
            for loc in source.tablets["calls"]
            if TabletPartition.from_json(loc.partition).index_in(SCHEMA)
            == int(partition_for_batch(PARTITIONS, SCHEMA, data.slice(0, 1))[0])
        )
        # A batch of lookups: found rows in the order of the keys, with their index.
        keys = pa.table(
            {"a": pa.array([150, 7, 101], pa.int64()), "b": pa.array([3, 3, 3], pa.int32())}
        )
        found = session.lookup(t.address, t.tablet_id, keys, ["v"], None)
        assert found.to_pylist() == [{"v": 50, "key_index": 0}, {"v": 1, "key_index": 2}]
        snap = table.snapshot()
        assert session.lookup(t.address, t.tablet_id, keys, ["v"], snap).equals(found)
        bad = LookupRequest(t.tablet_id, "not base64!")
        with pytest.raises(MalformedMessage, match="Arrow IPC"):
            session.client(t.address).get(bad)
        # A limited scan stops there; the servers flush and report their sizes.
        limited = session.scan(t.address, t.tablet_id, ["a"], [], snap, limit=30).read_all()
        assert limited.num_rows == 30
        assert table.to_arrow(limit=0).num_rows == 0
        before = {s["tablet_id"]: s for s in table.tablet_statistics()}
        table.flush()
        after = {s["tablet_id"]: s for s in table.tablet_statistics()}
        assert after[t.tablet_id]["disk_rows"] == before[t.tablet_id]["memrowset_rows"] == 100
        assert after[t.tablet_id]["memrowset_rows"] == 0
        assert table.count_rows() == 100
        # A partition that is not a TabletPartition is refused at create.
        with pytest.raises(MalformedMessage, match="partition"):
            session.create_tablet(
                t.address,
                CreateTablet(
                    "calls-bad", "calls", "calls", "[, )", json.dumps(SCHEMA.to_dict()), 1
                ),
            )
        with pytest.raises(TabletNotFound):
            session.scan(t.address, "no-such-tablet", None, [], None).read_all()
