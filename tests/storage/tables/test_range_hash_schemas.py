"""Per-range hash schemas (Kudu 1.17): Kudu's rules, partition keys and their order,
routing against a per-row model, pruning that never loses a row, the catalog (old
catalogs without the field still open), ALTER ADD/DROP RANGE PARTITION with a hash
schema, and scan tokens."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kudusql.common.errors import ProgrammingError
from kudusql.common.options import TabletOptions
from kudusql.common.predicates import ColumnPredicate as P
from kudusql.storage.tables.alter import AddRangePartition, DropRangePartition
from kudusql.storage.tables.database import Database
from kudusql.storage.tables.partition import (
    HashDimension,
    PartitionSchema,
    RangeBounds,
    add_range_partition,
    create_partitions,
    drop_range_partition,
    partition_for_batch,
    partition_for_row,
)
from kudusql.storage.tables.pruning import prune_partitions
from kudusql.storage.tables.scan_token import ScanToken
from tests.storage.tables.test_pruning import PROP, draw_predicate, value_pools
from tests.support.partition_model import slow_partition_index
from tests.support.tablets import schema

AB = schema(("a", "INT32"), ("b", "INT32"), ("v", "STRING"), key=["a", "b"])
OPTS = TabletOptions(sync=False, history_max_age_s=3600)
FIXTURE = Path(__file__).parent / "fixtures" / "catalog_v1"


def dims(*spec: tuple[str, int] | tuple[str, int, int]) -> tuple[HashDimension, ...]:
    return tuple(HashDimension((s[0],), s[1], s[2] if len(s) > 2 else 0) for s in spec)


def be(*values: int) -> bytes:
    return b"".join(v.to_bytes(4, "big") for v in values)


# ------------------------------------------------------------------------------------------
# Kudu's rules
# ------------------------------------------------------------------------------------------
def test_partition_keys_follow_kudus_order() -> None:
    # partition.cc's UpdatePartitionBoundaries example: [-inf, 0) x 3 x 3 buckets and
    # [0, +inf) x 2 x 2 buckets, sorted by partition key.
    ps = PartitionSchema.create(
        AB,
        dims(("a", 3), ("b", 3)),
        ["a"],
        [RangeBounds(None, (0,)), RangeBounds((0,), None, hash_schema=dims(("a", 2), ("b", 2)))],
    )
    parts = create_partitions(ps, AB)
    zero = bytes.fromhex("80000000")
    got = [(p.hash_buckets, p.range_key_start) for p in parts]
    assert got == [
        ((0, 0), b""),
        ((0, 0), zero),
        ((0, 1), b""),
        ((0, 1), zero),
        ((0, 2), b""),
        ((1, 0), b""),
        ((1, 0), zero),
        ((1, 1), b""),
        ((1, 1), zero),
        ((1, 2), b""),
        ((2, 0), b""),
        ((2, 1), b""),
        ((2, 2), b""),
    ]
    keys = [p.partition_key_start for p in parts]
    assert keys == sorted(keys)
    # An unbounded range ends where the next bucket of its last dimension begins.
    assert parts[1].partition_key_end == be(0, 1)
    assert parts[0].partition_key_end == be(0, 0) + zero
    # Partition key ranges of different tablets never overlap.
    for p, q in itertools.pairwise(parts):
        assert p.partition_key_end <= q.partition_key_start or not p.partition_key_end


def test_varying_number_of_dimensions_is_refused() -> None:
    with pytest.raises(ProgrammingError, match="varying number of hash dimensions"):
        PartitionSchema.create(
            AB, dims(("a", 3)), ["b"], [RangeBounds((0,), (10,), hash_schema=())]
        )
    with pytest.raises(ProgrammingError, match="varying number of hash dimensions"):
        PartitionSchema.create(
            AB, (), ["b"], [RangeBounds((0,), (10,), hash_schema=dims(("a", 2)))]
        )
    ps = PartitionSchema.create(AB, dims(("a", 3)), ["b"], [RangeBounds((0,), (10,))])
    with pytest.raises(ProgrammingError, match="varying number of hash dimensions"):
        add_range_partition(ps, AB, RangeBounds((10,), (20,), hash_schema=dims(("a", 2), ("b", 2))))


@pytest.mark.parametrize(
    ("own", "message"),
    [
        (dims(("v", 2)), "not a primary key column"),
        (dims(("zz", 2)), "unknown column"),
        (dims(("a", 1)), "at least 2 buckets"),
        ((HashDimension(("a", "b"), 2), HashDimension(("a",), 2)), "used twice"),
    ],
)
def test_a_ranges_own_schema_follows_the_table_wide_rules(
    own: tuple[HashDimension, ...], message: str
) -> None:
    width = len(own)
    table_wide = dims(("a", 3), ("b", 3))[:width]
    with pytest.raises(ProgrammingError, match=message):
        PartitionSchema.create(AB, table_wide, ["b"], [RangeBounds((0,), (10,), hash_schema=own)])


def test_columns_buckets_and_seed_may_differ() -> None:
    own = (HashDimension(("a", "b"), 5, 7),)
    ps = PartitionSchema.create(
        AB, dims(("a", 3)), ["b"], [RangeBounds((0,), (10,), hash_schema=own), RangeBounds((10,))]
    )
    assert [
        len([p for p in create_partitions(ps, AB) if p.range_key_start == k])
        for k in (
            bytes.fromhex("80000000"),
            bytes.fromhex("8000000a"),
        )
    ] == [5, 3]
    assert ps.hash_schema_for(ps.range_bounds[0]) == own
    assert ps.hash_schema_for(ps.range_bounds[1]) == dims(("a", 3))


def test_a_schema_equal_to_the_table_wide_one_is_not_stored() -> None:
    ps = PartitionSchema.create(
        AB, dims(("a", 3)), ["b"], [RangeBounds((0,), (10,), hash_schema=dims(("a", 3)))]
    )
    assert ps.range_bounds[0].hash_schema is None
    assert not ps.has_range_hash_schemas


def test_split_rows_and_own_hash_schemas_do_not_mix() -> None:
    with pytest.raises(ProgrammingError, match="split rows"):
        PartitionSchema.create(
            AB,
            dims(("a", 3)),
            ["b"],
            [RangeBounds((0,), (10,), hash_schema=dims(("a", 2)))],
            split_rows=[(5,)],
        )


def test_drop_ignores_a_given_hash_schema_and_add_checks_overlap() -> None:
    ps = PartitionSchema.create(
        AB,
        dims(("a", 3)),
        ["b"],
        [RangeBounds((0,), (10,), hash_schema=dims(("a", 2))), RangeBounds((10,), (20,))],
    )
    with pytest.raises(ProgrammingError, match="overlap"):
        add_range_partition(ps, AB, RangeBounds((5,), (15,), hash_schema=dims(("b", 4))))
    dropped = drop_range_partition(ps, AB, RangeBounds((0,), (10,)))
    assert not dropped.has_range_hash_schemas
    assert len(create_partitions(dropped, AB)) == 3
    again = add_range_partition(dropped, AB, RangeBounds((0,), (10,), hash_schema=dims(("b", 4))))
    assert len(create_partitions(again, AB)) == 7


def test_persisted_form_round_trips() -> None:
    ps = PartitionSchema.create(
        AB,
        dims(("a", 3)),
        ["b"],
        [RangeBounds((0,), (10,), hash_schema=dims(("a", 2, 9))), RangeBounds((10,), (20,))],
    )
    d = ps.to_dict()
    assert d["range"]["bounds"][0]["hash"] == [{"columns": ["a"], "num_buckets": 2, "seed": 9}]
    assert "hash" not in d["range"]["bounds"][1]
    assert PartitionSchema.from_dict(d) == ps


# ------------------------------------------------------------------------------------------
# Property: routing agrees with a per-row model; pruning never loses a matching row
# ------------------------------------------------------------------------------------------
KEYS = ("a", "b", "c")


def draw_schema_with_own_hashes(draw: st.DrawFn, pools: dict[str, Any]) -> PartitionSchema:
    """A partition schema of PROP whose ranges (from split rows) are dropped and added
    back, some with a hash schema of their own of the table's number of dimensions."""
    ndims = draw(st.integers(0, 2))

    def hash_schema() -> tuple[HashDimension, ...]:
        order = draw(st.permutations(KEYS))
        cut = draw(st.integers(1, 3 - ndims + 1)) if ndims == 2 else draw(st.integers(1, 3))
        groups = [order[:cut], order[cut:]] if ndims == 2 else [order[:cut]]
        return tuple(
            HashDimension(
                tuple(g), draw(st.integers(2, 5)), draw(st.sampled_from([0, 42, 2**32 - 1]))
            )
            for g in groups[:ndims]
            if g
        )

    table_wide = hash_schema()
    assume(len(table_wide) == ndims)
    range_cols = tuple(draw(st.lists(st.sampled_from(KEYS), unique=True, min_size=1, max_size=3)))
    splits = []
    for _ in range(draw(st.integers(0, 4))):
        k = draw(st.integers(1, len(range_cols)))
        splits.append(tuple(draw(pools[c]) for c in range_cols[:k]))
    try:
        ps = PartitionSchema.create(PROP, table_wide, range_cols, split_rows=splits)
    except ProgrammingError:
        assume(False)
        raise
    for b in list(ps.range_bounds):
        if not draw(st.booleans()):
            continue
        ps = drop_range_partition(ps, PROP, b)
        if draw(st.integers(0, 4)):  # else leave a gap
            own = hash_schema()
            if len(own) == ndims:
                ps = add_range_partition(
                    ps,
                    PROP,
                    RangeBounds(b.lower, b.upper, b.lower_inclusive, b.upper_inclusive, own),
                )
    return ps


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_routing_and_pruning_with_range_hash_schemas(data: st.DataObject) -> None:
    pools = value_pools(data.draw)
    ps = draw_schema_with_own_hashes(data.draw, pools)
    n = data.draw(st.integers(0, 24), label="rows")
    table = pa.table(
        {
            "a": pa.array([data.draw(pools["a"]) for _ in range(n)], pa.int8()),
            "b": pa.array([data.draw(pools["b"]) for _ in range(n)], pa.string()),
            "c": pa.array([data.draw(pools["c"]) for _ in range(n)], pa.int16()),
            "v": pa.array([data.draw(st.none() | pools["v"]) for _ in range(n)], pa.int32()),
        }
    )
    parts = create_partitions(ps, PROP)
    starts = [p.partition_key_start for p in parts]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)
    idx = partition_for_batch(ps, PROP, table)
    assert idx.tolist() == slow_partition_index(ps, PROP, parts, table)
    for i, row in enumerate(table.to_pylist()):
        assert partition_for_row(ps, PROP, row) == idx[i]

    preds = [draw_predicate(data.draw, pools) for _ in range(data.draw(st.integers(0, 4)))]
    bound = [p.bind(PROP) for p in preds]
    kept = set(prune_partitions(ps, PROP, parts, bound))
    match = np.ones(n, dtype=bool)
    for p in bound:
        match &= p.evaluate(table.column(p.column))
    for i in np.flatnonzero(match & (idx >= 0)).tolist():
        assert int(idx[i]) in kept, (table.slice(i, 1).to_pylist(), [str(p) for p in preds])


def test_equality_on_a_ranges_own_hash_column_prunes_its_buckets() -> None:
    ps = PartitionSchema.create(
        AB,
        dims(("a", 4)),
        ["b"],
        [RangeBounds((0,), (10,), hash_schema=dims(("a", 3))), RangeBounds((10,), (20,))],
    )
    parts = create_partitions(ps, AB)
    kept = prune_partitions(ps, AB, parts, [P.eq("a", 5).bind(AB)])
    assert len(kept) == 2  # one bucket of each range
    kept = prune_partitions(ps, AB, parts, [P.eq("a", 5).bind(AB), P.ge("b", 10).bind(AB)])
    assert len(kept) == 1


# ------------------------------------------------------------------------------------------
# Tables: create, write, reopen, ALTER, scan tokens; old catalogs
# ------------------------------------------------------------------------------------------
def rows(ids: list[int]) -> pa.Table:
    return pa.table(
        {
            "a": pa.array(ids, pa.int32()),
            "b": pa.array([i % 30 for i in ids], pa.int32()),
            "v": [f"v{i}" for i in ids],
        }
    )


def test_table_with_range_hash_schemas(tmp_path: Path) -> None:
    ps = PartitionSchema.create(
        AB,
        dims(("a", 2)),
        ["b"],
        [RangeBounds(None, (10,), hash_schema=dims(("a", 3, 5))), RangeBounds((10,), (20,))],
    )
    path = str(tmp_path / "db")
    db = Database(path, OPTS, maintenance=False)
    t = db.create_table("t", AB, ps)
    assert t.num_tablets == 5
    res = t.insert(rows(list(range(100))))
    assert res.applied == 70 and len(res.errors) == 30  # b in [20, 30): no range
    t = db.alter_table(
        "t", [AddRangePartition(RangeBounds((20,), (30,), hash_schema=dims(("a", 4))))]
    )
    assert t.num_tablets == 9
    assert t.insert(rows(list(range(100)))).applied == 30
    db.close()

    db = Database(path, OPTS, maintenance=False)
    t = db.table("t")
    assert t.partition_schema == PartitionSchema.from_dict(t.partition_schema.to_dict())
    assert sorted(t.to_arrow(["a"]).column("a").to_pylist()) == list(range(100))
    # Every tablet holds exactly the rows that route to it.
    for slot, tablet in enumerate(t.tablets()):
        got = tablet.scan(["a", "b", "v"]).read_all()
        assert set(partition_for_batch(t.partition_schema, AB, got).tolist()) <= {slot}
    # Pruning and scan tokens read exactly what a full scan reads.
    pred = [P.eq("a", 42)]
    assert t.to_arrow(["a"], pred).column("a").to_pylist() == [42]
    tokens = t.scan_tokens(["a", "v"], pred)
    assert len(tokens) == 3  # one bucket of each range's own hash schema
    got = [ScanToken.deserialize(x.serialize()).execute(db).read_all() for x in tokens]
    assert pa.concat_tables(got).column("a").to_pylist() == [42]
    t = db.alter_table("t", [DropRangePartition(RangeBounds(None, (10,)))])
    assert t.num_tablets == 6
    assert not [b for b in t.partition_schema.range_bounds if b.upper == (10,)]
    assert sorted(t.to_arrow(["a"]).column("a").to_pylist()) == sorted(
        i for i in range(100) if i % 30 >= 10
    )
    db.close()


def test_catalog_written_before_range_hash_schemas_opens(tmp_path: Path) -> None:
    path = tmp_path / "db"
    shutil.copytree(FIXTURE, path)
    db = Database(str(path), OPTS, maintenance=False)
    t = db.table("t")
    assert not t.partition_schema.has_range_hash_schemas
    assert t.num_tablets == 4
    got = t.to_arrow(ordered=True).to_pydict()
    assert got == {"id": list(range(0, 200, 7)), "name": [f"n{i}" for i in range(0, 200, 7)]}
    own = (HashDimension(("id",), 3),)
    t = db.alter_table("t", [AddRangePartition(RangeBounds((200,), (300,), hash_schema=own))])
    assert t.num_tablets == 7
    ids = pa.array([201, 250, 299], pa.int64())
    assert t.insert(pa.table({"id": ids, "name": ["x", "y", "z"]})).applied == 3
    db.close()
    db = Database(str(path), OPTS, maintenance=False)
    assert db.table("t").count_rows() == 32
    db.close()


def test_renaming_a_column_renames_it_in_every_hash_schema(tmp_path: Path) -> None:
    from kudusql.storage.tables.alter import RenameColumn

    ps = PartitionSchema.create(
        AB, dims(("a", 2)), ["b"], [RangeBounds(None, (10,), hash_schema=dims(("a", 3)))]
    )
    db = Database(str(tmp_path / "db"), OPTS, maintenance=False)
    db.create_table("t", AB, ps)
    t = db.alter_table("t", [RenameColumn("a", "x")])
    assert t.partition_schema.range_bounds[0].hash_schema == dims(("x", 3))
    data = rows(list(range(10))).rename_columns(["x", "b", "v"])
    assert t.insert(data).applied == 10
    assert sorted(t.to_arrow(["x"], [P.eq("x", 3)]).column("x").to_pylist()) == [3]
    db.close()
