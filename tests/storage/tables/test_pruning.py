"""Tests for kudusql.storage.tables.pruning: Kudu's partition-pruner cases (§7 case 11 and
partition_pruner-test), and a property: pruning never loses a matching row."""

from __future__ import annotations

import datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kudusql.common.errors import ProgrammingError
from kudusql.common.predicates import ColumnPredicate as P
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.storage.tables.partition import (
    HashDimension,
    PartitionSchema,
    create_partitions,
    drop_range_partition,
    partition_for_batch,
)
from kudusql.storage.tables.pruning import plan_pruning, prune_partitions
from tests.support.partition_model import slow_partition_index

I8_MIN, I8_MAX = -128, 127


def make_schema(*cols: tuple[str, str], key: int) -> Schema:
    names = [c[0] for c in cols]
    return Schema.build([ColumnSchema(n, DataType.parse(t)) for n, t in cols], names[:key])


def remaining(ps: PartitionSchema, schema: Schema, preds: list[P]) -> int:
    parts = create_partitions(ps, schema)
    return len(prune_partitions(ps, schema, parts, [p.bind(schema) for p in preds]))


# ------------------------------------------------------------------------------------------
# §7 case 11: PK(a INT8, b STRING, c INT8) RANGE(c, b) SPLIT (0, "m"), (10, "r")
# ------------------------------------------------------------------------------------------
ABC = make_schema(("a", "INT8"), ("b", "STRING"), ("c", "INT8"), key=3)
CASE11 = PartitionSchema.create(ABC, range_columns=("c", "b"), split_rows=[(0, "m"), (10, "r")])

CASE11_TABLE = [
    ("none", [], 3),
    ("c<-10", [P.lt("c", -10)], 1),
    ("c<10", [P.lt("c", 10)], 2),
    ("c<MIN", [P.lt("c", I8_MIN)], 0),
    ("c>=MAX", [P.ge("c", I8_MAX)], 1),
    ("c>=5", [P.ge("c", 5)], 2),
    ("b only", [P.ge("b", "z")], 3),
    ("c=10 and b<'r'", [P.eq("c", 10), P.lt("b", "r")], 1),
    ("c=0 and b<'m'", [P.eq("c", 0), P.lt("b", "m")], 1),
    ("c=0 and b<'m\\0'", [P.eq("c", 0), P.lt("b", "m\0")], 2),
    ("c IS NOT NULL", [P.is_not_null("c")], 3),
]


@pytest.mark.parametrize(
    ("preds", "tablets"), [(p, n) for _, p, n in CASE11_TABLE], ids=[i for i, _, _ in CASE11_TABLE]
)
def test_case11(preds: list[P], tablets: int) -> None:
    assert remaining(CASE11, ABC, preds) == tablets


# The rest of partition_pruner-test TestRangePruning on the same table.
RANGE_PRUNING = [
    ([P.eq("c", -10)], 1),
    ([P.lt("c", 100)], 3),
    ([P.lt("c", I8_MAX)], 3),
    ([P.ge("a", -10)], 3),
    ([P.ge("c", 0)], 3),
    ([P.ge("c", 10)], 2),
    ([P.ge("c", 100)], 1),
    ([P.ge("c", I8_MIN)], 3),
    ([P.eq("c", I8_MIN)], 1),
    ([P.eq("c", I8_MAX)], 1),
    ([P.ge("c", -10), P.lt("c", 0)], 1),
    ([P.ge("c", 5), P.lt("c", 100)], 2),
    ([P.eq("b", "")], 3),
    ([P.lt("b", "a")], 3),
    ([P.ge("b", "m"), P.lt("b", "z")], 3),
    ([P.ge("c", 10), P.ge("b", "r")], 1),
    ([P.ge("c", 10), P.lt("b", "r")], 2),
    ([P.lt("c", 0), P.lt("b", "m")], 1),
    ([P.lt("c", 0), P.lt("b", "z")], 1),
    ([P.eq("c", 0), P.eq("b", "m\0")], 1),
    # Inclusive and exclusive ends become the same bounds as Kudu's [lower, upper).
    ([P.le("c", 9)], 2),
    ([P.gt("c", 4)], 2),
    ([P.gt("c", I8_MAX)], 0),
    ([P.le("c", I8_MAX)], 3),
    ([P.between("c", 0, 0), P.le("b", "m")], 2),
    ([P.in_list("c", [-50, -20])], 1),
    ([P.in_list("c", [-50, 50])], 3),
    ([P.in_list("c", [-50, 50]), P.lt("c", 0)], 1),
    ([P.in_list("c", [])], 0),
    ([P.is_null("c")], 0),
    ([P.prefix("b", "m")], 3),
    ([P.eq("c", 0), P.prefix("b", "a")], 1),
    ([P.eq("c", 0), P.prefix("b", "m")], 1),
    ([P.eq("c", 0), P.prefix("b", "l")], 1),
    ([P.eq("c", 0), P.ge("b", "l")], 2),
]


def show(v: object) -> str:
    return " and ".join(map(str, v)) or "none" if isinstance(v, list) else str(v)


@pytest.mark.parametrize(("preds", "tablets"), RANGE_PRUNING, ids=show)
def test_range_pruning(preds: list[P], tablets: int) -> None:
    assert remaining(CASE11, ABC, preds) == tablets


# ------------------------------------------------------------------------------------------
# Hash pruning (partition_pruner-test TestHashPruning, TestInListHashPruning,
# TestMultiColumnInListHashPruning)
# ------------------------------------------------------------------------------------------
I8X3 = make_schema(("a", "INT8"), ("b", "INT8"), ("c", "INT8"), key=3)


@pytest.mark.parametrize(
    ("preds", "tablets"),
    [
        ([], 4),
        ([P.eq("a", 0)], 2),
        ([P.ge("a", 0)], 4),
        ([P.ge("a", 0), P.lt("a", 1)], 2),
        ([P.ge("a", 0), P.lt("a", 2)], 4),
        ([P.eq("b", 1)], 4),
        ([P.eq("b", 1), P.eq("c", 2)], 2),
        ([P.eq("a", 0), P.eq("b", 1), P.eq("c", 2)], 1),
    ],
)
def test_hash_pruning(preds: list[P], tablets: int) -> None:
    ps = PartitionSchema.create(I8X3, [HashDimension("a", 2), HashDimension(("b", "c"), 2)])
    assert remaining(ps, I8X3, preds) == tablets


@pytest.mark.parametrize(
    ("preds", "tablets"),
    [
        ([P.in_list("a", [0, 1])], 18),
        ([P.in_list("a", [0, 1, 8])], 27),
        ([P.in_list("b", [0, 1])], 18),
        ([P.in_list("c", [0, 1])], 18),
        ([P.in_list("b", [0, 1]), P.in_list("c", [0, 1])], 12),
        ([P.in_list("a", [0, 1]), P.in_list("b", [0, 1]), P.in_list("c", [0, 1])], 8),
    ],
)
def test_in_list_hash_pruning(preds: list[P], tablets: int) -> None:
    ps = PartitionSchema.create(
        I8X3, [HashDimension("a", 3), HashDimension("b", 3), HashDimension("c", 3)]
    )
    assert remaining(ps, I8X3, preds) == tablets


@pytest.mark.parametrize(
    ("preds", "tablets"),
    [
        ([P.in_list("a", [0, 1])], 6),
        ([P.in_list("a", [0, 1, 8])], 9),
        ([P.in_list("b", [0, 1])], 9),
        ([P.in_list("c", [0, 1])], 9),
        ([P.in_list("b", [0, 1]), P.in_list("c", [0, 1])], 9),
        ([P.eq("b", 0), P.in_list("c", [0, 1])], 3),
        ([P.eq("b", 1), P.in_list("c", [0, 1])], 6),
        ([P.in_list("a", [0, 1]), P.in_list("b", [0, 1]), P.in_list("c", [0, 1])], 6),
    ],
)
def test_multi_column_in_list_hash_pruning(preds: list[P], tablets: int) -> None:
    ps = PartitionSchema.create(I8X3, [HashDimension("a", 3), HashDimension(("b", "c"), 3)])
    assert remaining(ps, I8X3, preds) == tablets


# partition_pruner-test TestPruning: hash and range together, on a TIMESTAMP range column.
TS = make_schema(
    ("host", "STRING"), ("metric", "STRING"), ("time", "TIMESTAMP"), ("value", "DOUBLE"), key=3
)


def micros(n: int) -> datetime.datetime:
    return datetime.datetime(1970, 1, 1) + datetime.timedelta(microseconds=n)


@pytest.mark.parametrize(
    ("time_preds", "tablets"),
    [
        ([P.ge("time", micros(9))], 2),
        ([P.ge("time", micros(10)), P.lt("time", micros(20))], 1),
        ([P.lt("time", micros(10))], 1),
        ([P.ge("time", micros(10))], 1),
        ([P.eq("time", micros(10))], 1),
    ],
)
def test_hash_and_range_pruning(time_preds: list[P], tablets: int) -> None:
    ps = PartitionSchema.create(
        TS, [HashDimension(("host", "metric"), 2)], ("time",), split_rows=[(micros(10),)]
    )
    assert len(create_partitions(ps, TS)) == 4
    preds = [P.eq("host", "a"), P.eq("metric", "a"), *time_preds]
    assert remaining(ps, TS, preds) == tablets


# partition_pruner-test TestKudu2173: range on a key prefix, predicates past it.
@pytest.mark.parametrize(
    "preds",
    [
        [P.lt("a", 11)],
        [P.lt("a", 11), P.lt("b", 11)],
        [P.lt("a", I8_MAX)],
        [P.lt("a", I8_MAX), P.lt("b", 11)],
    ],
)
def test_kudu_2173(preds: list[P]) -> None:
    schema = make_schema(("a", "INT8"), ("b", "INT8"), key=2)
    ps = PartitionSchema.create(schema, range_columns=("a",), split_rows=[(10,)])
    assert remaining(ps, schema, preds) == 2


# ------------------------------------------------------------------------------------------
# Details
# ------------------------------------------------------------------------------------------
def test_string_upper_end_without_trailing_zero_stays_exclusive() -> None:
    # b < "rz" cannot be decremented, so the upper range key is "rz" itself; a split at
    # "ra" (between "r\0" and "rz") must not be pruned.
    schema = make_schema(("b", "STRING"), ("k", "INT8"), key=2)
    ps = PartitionSchema.create(schema, range_columns=("b",), split_rows=[("ra",), ("rz",)])
    assert remaining(ps, schema, [P.lt("b", "rz")]) == 2
    assert remaining(ps, schema, [P.le("b", "r")]) == 1
    assert remaining(ps, schema, [P.lt("b", "ra\0")]) == 2
    assert remaining(ps, schema, [P.lt("b", "ra")]) == 1


def test_plan_reports_buckets_and_range_keys() -> None:
    ps = PartitionSchema.create(I8X3, [HashDimension("a", 3)], ("b", "c"))
    plan = plan_pruning(ps, I8X3, [P.in_list("a", [0, 1, 8]).bind(I8X3), P.eq("b", 5)])
    assert not plan.empty
    assert plan.buckets == (frozenset({0, 1, 2}),)
    assert (plan.range_lower, plan.range_upper) == (bytes([0x85, 0x00]), bytes([0x86, 0x00]))
    none = plan_pruning(ps, I8X3, [P.gt("a", 5), P.lt("a", 3)])
    assert none.empty


def test_range_collapsed_to_one_value_prunes_hash() -> None:
    ps = PartitionSchema.create(I8X3, [HashDimension("a", 3)])
    assert remaining(ps, I8X3, [P.ge("a", 5), P.lt("a", 6)]) == 1
    assert remaining(ps, I8X3, [P.ge("a", I8_MAX)]) == 1
    # Like Kudu, an upper end alone is never turned into an equality.
    assert remaining(ps, I8X3, [P.le("a", I8_MIN)]) == 3


def test_none_predicate_on_any_column_prunes_everything() -> None:
    schema = make_schema(("k", "INT32"), ("v", "INT32"), key=1)
    ps = PartitionSchema.create(schema, [HashDimension("k", 4)])
    assert remaining(ps, schema, [P.in_list("v", [])]) == 0
    assert remaining(ps, schema, [P.gt("v", 5), P.lt("v", 5)]) == 0
    assert remaining(ps, schema, [P.is_null("v")]) == 4  # v is nullable
    assert remaining(ps, schema, [P.is_null("k")]) == 0  # key columns never are
    assert remaining(ps, schema, [P.is_null("v"), P.gt("v", 0)]) == 0
    assert remaining(ps, schema, [P.is_null("v"), P.is_not_null("v")]) == 0


def test_literal_that_does_not_fit_is_not_used() -> None:
    parts = create_partitions(CASE11, ABC)
    # Unbound predicates with out-of-range literals: no pruning, and no error.
    got = prune_partitions(CASE11, ABC, parts, [P.eq("c", 1000), P.lt("c", 1000)])
    assert got == [0, 1, 2]


def test_unknown_column_is_an_error() -> None:
    with pytest.raises(ProgrammingError, match="unknown column"):
        prune_partitions(CASE11, ABC, create_partitions(CASE11, ABC), [P.eq("zz", 1)])


# ------------------------------------------------------------------------------------------
# Property: pruning never loses a matching row; routing agrees with a per-row model
# ------------------------------------------------------------------------------------------
PROP = make_schema(("a", "INT8"), ("b", "STRING"), ("c", "INT16"), ("v", "INT32"), key=3)
KEYS = ("a", "b", "c")
DOMAINS = {
    "a": st.one_of(
        st.sampled_from([I8_MIN, I8_MIN + 1, -1, 0, 1, 126, I8_MAX]), st.integers(I8_MIN, I8_MAX)
    ),
    "b": st.one_of(
        st.sampled_from(["", "\0", "\0\0", "a", "a\0", "ab", "m", "m\0", "r"]),
        st.text(alphabet="am\0", max_size=3),
    ),
    "c": st.one_of(
        st.sampled_from([-(2**15), -(2**15) + 1, -1, 0, 1, 2**15 - 2, 2**15 - 1]),
        st.integers(-(2**15), 2**15 - 1),
    ),
    "v": st.integers(-3, 3),
}
KINDS = ["eq", "eq", "in", "in", "lt", "le", "gt", "ge", "between", "not_null", "null", "prefix"]


def value_pools(draw: st.DrawFn) -> dict[str, st.SearchStrategy[Any]]:
    """A few values per column that rows, split rows and predicates share, so that
    predicates and partition bounds often fall exactly on row values."""
    pools: dict[str, st.SearchStrategy[Any]] = {}
    for col, dom in DOMAINS.items():
        few = draw(st.lists(dom, min_size=1, max_size=4, unique=True))
        pools[col] = st.one_of(st.sampled_from(few), st.sampled_from(few), dom)
    return pools


def draw_partition_schema(draw: st.DrawFn, pools: dict[str, Any]) -> PartitionSchema:
    order = draw(st.permutations(KEYS))
    groups = draw(st.lists(st.integers(0, 2), min_size=3, max_size=3))
    dims = []
    for g in (1, 2):
        cols = tuple(c for c, gg in zip(order, groups, strict=True) if gg == g)
        if cols:
            seed = draw(st.sampled_from([0, 42, 2**32 - 1]))
            dims.append(HashDimension(cols, draw(st.integers(2, 5)), seed))
    range_cols = tuple(draw(st.lists(st.sampled_from(KEYS), unique=True, max_size=3)))
    splits: list[tuple[Any, ...]] = []
    if range_cols:
        for _ in range(draw(st.integers(0, 4))):
            k = draw(st.integers(1, len(range_cols)))
            splits.append(tuple(draw(pools[c]) for c in range_cols[:k]))
    try:
        ps = PartitionSchema.create(PROP, dims, range_cols, split_rows=splits)
    except ProgrammingError:
        assume(False)  # duplicate split rows, or one at the minimum key
        raise
    if len(ps.range_bounds) > 1 and draw(st.booleans()):  # leave a gap
        gone = ps.range_bounds[draw(st.integers(0, len(ps.range_bounds) - 1))]
        ps = drop_range_partition(ps, PROP, gone)
    return ps


def draw_predicate(draw: st.DrawFn, pools: dict[str, Any]) -> P:
    col = draw(st.sampled_from(["a", "b", "c", "a", "b", "c", "v"]))
    val = pools[col]
    kind = draw(st.sampled_from(KINDS))
    if kind == "in":
        return P.in_list(col, draw(st.lists(val, max_size=3)))
    if kind == "between":
        return P.between(col, draw(val), draw(val))
    if kind == "not_null":
        return P.is_not_null(col)
    if kind == "null":
        return P.is_null(col)
    if kind == "prefix":
        return P.prefix("b", draw(pools["b"]))
    return getattr(P, kind)(col, draw(val))  # type: ignore[no-any-return]


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_pruning_never_loses_rows(data: st.DataObject) -> None:
    pools = value_pools(data.draw)
    ps = draw_partition_schema(data.draw, pools)
    n = data.draw(st.integers(0, 24), label="rows")
    table = pa.table(
        {
            "a": pa.array([data.draw(pools["a"]) for _ in range(n)], pa.int8()),
            "b": pa.array([data.draw(pools["b"]) for _ in range(n)], pa.string()),
            "c": pa.array([data.draw(pools["c"]) for _ in range(n)], pa.int16()),
            "v": pa.array([data.draw(st.none() | pools["v"]) for _ in range(n)], pa.int32()),
        }
    )
    preds = [draw_predicate(data.draw, pools) for _ in range(data.draw(st.integers(0, 4)))]

    parts = create_partitions(ps, PROP)
    idx = partition_for_batch(ps, PROP, table)
    assert idx.tolist() == slow_partition_index(ps, PROP, parts, table)

    bound = [p.bind(PROP) for p in preds]
    kept = set(prune_partitions(ps, PROP, parts, bound))
    match = np.ones(n, dtype=bool)
    for p in bound:
        match &= p.evaluate(table.column(p.column))
    for i in np.flatnonzero(match & (idx >= 0)).tolist():
        assert int(idx[i]) in kept, (table.slice(i, 1).to_pylist(), [str(p) for p in preds])
