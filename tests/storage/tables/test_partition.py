"""Tests for kudusql.storage.tables.partition: Kudu's golden buckets and partition keys,
range coverage, split rows, adding and dropping ranges, validation, serialization."""

from __future__ import annotations

import datetime
import decimal
import json
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kudusql.common.errors import ProgrammingError
from kudusql.common.keys import encode_key
from kudusql.common.murmur import murmur2_64
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.storage.tables.partition import (
    NO_TABLET_MESSAGE,
    HashDimension,
    PartitionSchema,
    RangeBounds,
    add_range_partition,
    bucket_for,
    create_partitions,
    drop_range_partition,
    encode_range_keys,
    partition_for_batch,
    partitions_for_range,
)
from tests.support.partition_model import slow_partition_index


def make_schema(*cols: tuple[str, str], key: int) -> Schema:
    """Columns (name, type); the first ``key`` of them form the primary key."""
    names = [c[0] for c in cols]
    return Schema.build([ColumnSchema(n, DataType.parse(t)) for n, t in cols], names[:key])


def be32(*buckets: int) -> bytes:
    return b"".join(b.to_bytes(4, "big") for b in buckets)


# ------------------------------------------------------------------------------------------
# §7 case 10: golden bucket vectors (partition-test PartitionKeyEncoding)
# ------------------------------------------------------------------------------------------
GOLDEN_SCHEMA = make_schema(("a", "INT32"), ("b", "STRING"), ("c", "STRING"), key=3)
GOLDEN_PS = PartitionSchema.create(
    GOLDEN_SCHEMA,
    [HashDimension(("a", "b"), 32), HashDimension(("c",), 32, seed=42)],
    ("a", "b", "c"),
)
GOLDEN = [
    ((0, "", ""), (0, 20), "800000000000"),
    ((1, "", ""), (5, 20), "800000010000"),
    ((0, "b", "c"), (26, 29), "8000000062000063"),
    ((1, "b", "c"), (0, 29), "8000000162000063"),
]


def golden_table() -> pa.Table:
    rows = [r for r, _, _ in GOLDEN]
    return pa.table(
        {
            "a": pa.array([r[0] for r in rows], pa.int32()),
            "b": [r[1] for r in rows],
            "c": [r[2] for r in rows],
        }
    )


def test_golden_bucket_vectors() -> None:
    t = golden_table()
    ab, c = (bucket_for(d, GOLDEN_SCHEMA, t) for d in GOLDEN_PS.hash_dimensions)
    assert ab.dtype == np.int64
    assert list(zip(ab.tolist(), c.tolist(), strict=True)) == [b for _, b, _ in GOLDEN]


def test_golden_range_keys_and_partition_keys() -> None:
    t = golden_table()
    keys = encode_range_keys(GOLDEN_PS, GOLDEN_SCHEMA, t).to_pylist()
    assert [k.hex() for k in keys] == [h for _, _, h in GOLDEN]
    parts = create_partitions(GOLDEN_PS, GOLDEN_SCHEMA)
    assert len(parts) == 32 * 32
    idx = partition_for_batch(GOLDEN_PS, GOLDEN_SCHEMA, t)
    for i, (_, buckets, range_hex) in zip(idx.tolist(), GOLDEN, strict=True):
        p = parts[i]
        assert p.hash_buckets == buckets
        # Partition key of the row = 4-byte big-endian buckets, then the range key.
        row_key = be32(*buckets) + bytes.fromhex(range_hex)
        assert p.partition_key_start <= row_key < p.partition_key_end
        assert p.partition_key_start == be32(*buckets)  # one unbounded range


@pytest.mark.parametrize("kind", ["table", "chunked", "record_batch", "mapping"])
def test_batch_forms_agree(kind: str) -> None:
    t = golden_table()
    batch: Any
    if kind == "chunked":
        batch = pa.concat_tables([t.slice(0, 1), t.slice(1, 2), t.slice(3)])
    elif kind == "record_batch":
        batch = t.to_batches()[0]
    elif kind == "mapping":
        batch = {n: t.column(n) for n in t.column_names}
    else:
        batch = t
    got = partition_for_batch(GOLDEN_PS, GOLDEN_SCHEMA, batch)
    assert got.tolist() == partition_for_batch(GOLDEN_PS, GOLDEN_SCHEMA, t).tolist()


def test_missing_partition_column_is_a_clear_error() -> None:
    with pytest.raises(ProgrammingError, match="no column 'c'"):
        partition_for_batch(GOLDEN_PS, GOLDEN_SCHEMA, pa.table({"a": [1], "b": ["x"]}))


def test_empty_batch() -> None:
    t = golden_table().slice(0, 0)
    assert partition_for_batch(GOLDEN_PS, GOLDEN_SCHEMA, t).tolist() == []


# Every key type, hashed as one batch, equals the scalar hash of each row's key encoding.
_TYPED_VALUES: dict[str, Any] = {
    "INT8": st.integers(-128, 127),
    "INT16": st.integers(-(2**15), 2**15 - 1),
    "INT32": st.integers(-(2**31), 2**31 - 1),
    "INT64": st.integers(-(2**63), 2**63 - 1),
    "DATE": st.dates(),
    "TIMESTAMP": st.datetimes(
        min_value=datetime.datetime(1, 1, 1), max_value=datetime.datetime(9999, 12, 31)
    ),
    "DECIMAL(10,2)": st.decimals(-(10**8) + 1, 10**8 - 1, places=2),
    "STRING": st.text(alphabet="ab\0\u00e9", max_size=6),
    "BINARY": st.binary(max_size=6),
}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(sorted(_TYPED_VALUES)), min_size=1, max_size=3),
    st.integers(2, 64),
    st.sampled_from([0, 1, 42, 2**32 - 1]),
    st.data(),
)
def test_bucket_for_equals_scalar_hash(
    types: list[str], buckets: int, seed: int, data: st.DataObject
) -> None:
    names = [f"k{i}" for i in range(len(types))]
    schema = make_schema(*zip(names, types, strict=True), key=len(types))
    n = data.draw(st.integers(0, 30))
    rows = [[data.draw(_TYPED_VALUES[t]) for t in types] for _ in range(n)]
    table = pa.table(
        {
            name: pa.array([r[i] for r in rows], schema.column(name).type.arrow_type())
            for i, name in enumerate(names)
        }
    )
    dim = HashDimension(tuple(names), buckets, seed)
    got = bucket_for(dim, schema, table).tolist()
    key_types = [schema.column(c).type for c in names]
    expected = [murmur2_64(encode_key(r, key_types), seed) % buckets for r in rows]
    assert got == expected


# ------------------------------------------------------------------------------------------
# Partition key layout (partition-test TestCreatePartitions)
# ------------------------------------------------------------------------------------------
def test_create_partitions_key_layout() -> None:
    schema = make_schema(("a", "STRING"), ("b", "STRING"), ("c", "STRING"), key=3)
    ps = PartitionSchema.create(
        schema,
        [HashDimension("a", 2), HashDimension("b", 2)],
        ("a", "b", "c"),
        split_rows=[("a2", "b2"), ("a1", "b1", "c1")],  # given out of order
    )
    parts = create_partitions(ps, schema)
    assert len(parts) == 12
    s1 = b"a1\0\0b1\0\0c1"
    s2 = b"a2\0\0b2\0\0"  # the unset last column "" contributes no bytes
    expected = []
    for b0 in (0, 1):
        for b1 in (0, 1):
            h = be32(b0, b1)
            expected += [
                ((b0, b1), b"", s1, h, h + s1),
                ((b0, b1), s1, s2, h + s1, h + s2),
                ((b0, b1), s2, b"", h + s2, be32(b0, b1 + 1)),
            ]
    got = [
        (
            p.hash_buckets,
            p.range_key_start,
            p.range_key_end,
            p.partition_key_start,
            p.partition_key_end,
        )
        for p in parts
    ]
    assert got == expected
    starts = [p.partition_key_start for p in parts]
    assert starts == sorted(starts)
    assert parts[1].describe(ps) == (
        "HASH (a) PARTITION 0, HASH (b) PARTITION 0, "
        'RANGE (a, b, c) PARTITION ("a1", "b1", "c1") <= VALUES < ("a2", "b2")'
    )
    assert ps.describe() == "HASH (a) PARTITIONS 2, HASH (b) PARTITIONS 2, RANGE (a, b, c)"


def test_no_hash_unbounded_range_has_empty_partition_keys() -> None:
    schema = make_schema(("k", "INT64"), key=1)
    ps = PartitionSchema.create(schema)
    [p] = create_partitions(ps, schema)
    assert (p.partition_key_start, p.partition_key_end) == (b"", b"")
    assert p.describe(ps) == "UNPARTITIONED"
    t = pa.table({"k": pa.array([1, -5, 2**40], pa.int64())})
    assert partition_for_batch(ps, schema, t).tolist() == [0, 0, 0]


def test_hash_only_partition_index_is_bucket() -> None:
    schema = make_schema(("k", "INT64"), ("v", "STRING"), key=1)
    ps = PartitionSchema.create(schema, [HashDimension("k", 8, 3)])
    assert ps.num_hash_combinations == 8
    t = pa.table({"k": pa.array(range(100), pa.int64()), "v": ["x"] * 100})
    idx = partition_for_batch(ps, schema, t)
    assert idx.tolist() == bucket_for(ps.hash_dimensions[0], schema, t).tolist()
    assert set(idx.tolist()) == set(range(8))


# ------------------------------------------------------------------------------------------
# Range coverage (§7 case 12) and routing
# ------------------------------------------------------------------------------------------
YEAR_SCHEMA = make_schema(("year", "INT32"), ("id", "INT64"), ("v", "STRING"), key=2)


def year_table(*years: int) -> pa.Table:
    return pa.table(
        {
            "year": pa.array(years, pa.int32()),
            "id": pa.array(range(len(years)), pa.int64()),
            "v": ["x"] * len(years),
        }
    )


def test_case12_row_outside_every_range() -> None:
    ps = PartitionSchema.create(
        YEAR_SCHEMA, range_columns=("year",), range_bounds=[RangeBounds((2011,), (2016,))]
    )
    got = partition_for_batch(ps, YEAR_SCHEMA, year_table(2020, 2011, 2015, 2016, 2010))
    assert got.tolist() == [-1, 0, 0, -1, -1]
    assert NO_TABLET_MESSAGE == "No tablet covering the requested range partition"


def test_routing_with_hash_and_gaps() -> None:
    ps = PartitionSchema.create(
        YEAR_SCHEMA,
        [HashDimension("id", 3)],
        ("year",),
        [RangeBounds(2000, 2010), RangeBounds(2020, None), RangeBounds(None, 1990)],
    )
    parts = create_partitions(ps, YEAR_SCHEMA)
    assert len(parts) == 9
    years = (1989, 1990, 1999, 2000, 2009, 2010, 2019, 2020, 2**31 - 1, -(2**31))
    t = year_table(*years)
    idx = partition_for_batch(ps, YEAR_SCHEMA, t)
    assert idx.tolist() == slow_partition_index(ps, YEAR_SCHEMA, parts, t)
    ranges = [None if i < 0 else parts[i].range_bounds for i in idx.tolist()]
    assert ranges == [
        RangeBounds(None, 1990),
        None,
        None,
        RangeBounds(2000, 2010),
        RangeBounds(2000, 2010),
        None,
        None,
        RangeBounds(2020, None),
        RangeBounds(2020, None),
        RangeBounds(None, 1990),
    ]


ROUTE_SCHEMA = make_schema(
    ("i16", "INT16"), ("s", "STRING"), ("i64", "INT64"), ("dec", "DECIMAL(20,2)"), key=4
)
ROUTE_VALUES: dict[str, Any] = {
    "i16": st.integers(-(2**15), 2**15 - 1),
    "s": st.text(alphabet="ab\0", max_size=4),
    "i64": st.integers(-(2**63), 2**63 - 1) | st.integers(-3, 3),
    "dec": st.decimals(-(10**17) + 1, 10**17 - 1, places=2),
}


@pytest.mark.parametrize(
    "range_columns",
    [("i16",), ("i64", "i16"), ("dec",), ("s",), ("i16", "s"), ("s", "i64", "dec")],
)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_routing_matches_model_with_many_ranges(
    range_columns: tuple[str, ...], data: st.DataObject
) -> None:
    """Few and many (sorted-search) range partitions, fixed and variable width keys."""
    col_values = [ROUTE_VALUES[c] for c in range_columns]
    splits = data.draw(
        st.lists(st.tuples(*col_values), max_size=40, unique_by=lambda r: r), label="splits"
    )
    try:
        ps = PartitionSchema.create(
            ROUTE_SCHEMA, [HashDimension(("s", "i16"), 3)], range_columns, split_rows=splits
        )
    except ProgrammingError:  # a split row at the minimum key
        return
    if len(ps.range_bounds) > 2:
        ps = drop_range_partition(ps, ROUTE_SCHEMA, ps.range_bounds[1])
    rows = data.draw(st.lists(st.tuples(*ROUTE_VALUES.values()), max_size=30), label="rows")
    names = list(ROUTE_VALUES)
    table = pa.table(
        {
            n: pa.array([r[i] for r in rows], ROUTE_SCHEMA.column(n).type.arrow_type())
            for i, n in enumerate(names)
        }
    )
    parts = create_partitions(ps, ROUTE_SCHEMA)
    got = partition_for_batch(ps, ROUTE_SCHEMA, table).tolist()
    assert got == slow_partition_index(ps, ROUTE_SCHEMA, parts, table)


def test_no_range_partitions_left_routes_nothing() -> None:
    ps = PartitionSchema.create(
        YEAR_SCHEMA, range_columns=("year",), range_bounds=[RangeBounds(2011, 2016)]
    )
    ps = drop_range_partition(ps, YEAR_SCHEMA, RangeBounds(2011, 2016))
    assert create_partitions(ps, YEAR_SCHEMA) == []
    assert partition_for_batch(ps, YEAR_SCHEMA, year_table(2012)).tolist() == [-1]


# ------------------------------------------------------------------------------------------
# Split rows
# ------------------------------------------------------------------------------------------
def test_split_rows_alone_cover_everything() -> None:
    ps = PartitionSchema.create(YEAR_SCHEMA, range_columns=("year",), split_rows=[(2020,), (2010,)])
    assert ps.range_bounds == (
        RangeBounds(None, 2010),
        RangeBounds(2010, 2020),
        RangeBounds(2020, None),
    )
    t = year_table(-(2**31), 2009, 2010, 2019, 2020, 2**31 - 1)
    assert partition_for_batch(ps, YEAR_SCHEMA, t).tolist() == [0, 0, 1, 1, 2, 2]


def test_split_rows_inside_bounds() -> None:
    ps = PartitionSchema.create(
        YEAR_SCHEMA,
        range_columns=("year",),
        range_bounds=[RangeBounds(0, 100), RangeBounds(200, 300)],
        split_rows=[(50,), (250,), (10,)],
    )
    assert ps.range_bounds == (
        RangeBounds(0, 10),
        RangeBounds(10, 50),
        RangeBounds(50, 100),
        RangeBounds(200, 250),
        RangeBounds(250, 300),
    )


@pytest.mark.parametrize(
    ("bounds", "splits", "message"),
    [
        ([RangeBounds(0, 100)], [(150,)], "outside every range partition"),
        ([RangeBounds(0, 100), RangeBounds(200, 300)], [(150,)], "outside every range"),
        ([RangeBounds(0, 100)], [(-5,)], "outside every range partition"),
        ([RangeBounds(0, 100)], [(0,)], "equals a bound"),
        ([RangeBounds(0, 100)], [(100,)], "equals a bound"),
        (None, [(5,), (5,)], "duplicate split row"),
        (None, [(5, 6, 7)], "3 values for 1 range columns"),
        (None, [("x",)], "not a valid INT32"),
        (None, [(None,)], "cannot be NULL"),
    ],
)
def test_split_row_errors(
    bounds: list[RangeBounds] | None, splits: list[tuple[Any, ...]], message: str
) -> None:
    with pytest.raises(ProgrammingError, match=message):
        PartitionSchema.create(
            YEAR_SCHEMA, range_columns=("year",), range_bounds=bounds, split_rows=splits
        )


@pytest.mark.parametrize(
    ("cols", "split"), [((("s", "STRING"),), ("",)), ((("i", "INT8"), ("s", "STRING")), (-128,))]
)
def test_split_row_must_be_above_the_minimum(
    cols: tuple[tuple[str, str], ...], split: tuple[Any, ...]
) -> None:
    schema = make_schema(*cols, key=len(cols))
    names = tuple(c[0] for c in cols)
    with pytest.raises(ProgrammingError, match="smallest key"):
        PartitionSchema.create(schema, range_columns=names, split_rows=[split])


def test_split_rows_with_partial_prefix() -> None:
    schema = make_schema(("a", "INT8"), ("b", "INT8"), key=2)
    ps = PartitionSchema.create(schema, range_columns=("a", "b"), split_rows=[(5,)])
    t = pa.table({"a": pa.array([4, 5, 5], pa.int8()), "b": pa.array([127, -128, 0], pa.int8())})
    assert partition_for_batch(ps, schema, t).tolist() == [0, 1, 1]


# ------------------------------------------------------------------------------------------
# Adding and dropping range partitions
# ------------------------------------------------------------------------------------------
def test_add_and_drop_range_partitions() -> None:
    ps = PartitionSchema.create(
        YEAR_SCHEMA, [HashDimension("id", 2)], ("year",), [RangeBounds(2011, 2016)]
    )
    t = year_table(2012, 2018)
    assert (partition_for_batch(ps, YEAR_SCHEMA, t) >= 0).tolist() == [True, False]

    ps2 = add_range_partition(ps, YEAR_SCHEMA, RangeBounds(2016, 2021))
    assert ps.range_bounds == (RangeBounds(2011, 2016),)  # the original is unchanged
    assert len(create_partitions(ps2, YEAR_SCHEMA)) == 4
    new = partitions_for_range(ps2, YEAR_SCHEMA, RangeBounds(2016, 2021))
    assert [p.hash_buckets for p in new] == [(0,), (1,)]
    idx = partition_for_batch(ps2, YEAR_SCHEMA, t)
    parts = create_partitions(ps2, YEAR_SCHEMA)
    assert [parts[i].range_bounds for i in idx.tolist()] == [
        RangeBounds(2011, 2016),
        RangeBounds(2016, 2021),
    ]

    # An earlier range is added before the existing ones.
    ps3 = add_range_partition(ps2, YEAR_SCHEMA, RangeBounds(None, 2000))
    assert ps3.range_bounds[0] == RangeBounds(None, 2000)

    # Dropping compares keys: [2011, 2015] inclusive is [2011, 2016).
    ps4 = drop_range_partition(ps3, YEAR_SCHEMA, RangeBounds(2011, 2015, upper_inclusive=True))
    assert ps4.range_bounds == (RangeBounds(None, 2000), RangeBounds(2016, 2021))
    assert partition_for_batch(ps4, YEAR_SCHEMA, t).tolist()[0] == -1
    ps4.validate(YEAR_SCHEMA)


@pytest.mark.parametrize(
    "bounds",
    [
        RangeBounds(2015, 2017),
        RangeBounds(2000, 2012),
        RangeBounds(None, None),
        RangeBounds(2012, 2013),
        RangeBounds(2011, 2016),
        RangeBounds(2000, None),
    ],
)
def test_add_overlapping_range_fails(bounds: RangeBounds) -> None:
    ps = PartitionSchema.create(
        YEAR_SCHEMA, range_columns=("year",), range_bounds=[RangeBounds(2011, 2016)]
    )
    with pytest.raises(ProgrammingError, match="overlap"):
        add_range_partition(ps, YEAR_SCHEMA, bounds)


def test_adjacent_range_is_not_an_overlap() -> None:
    ps = PartitionSchema.create(
        YEAR_SCHEMA, range_columns=("year",), range_bounds=[RangeBounds(2011, 2016)]
    )
    ps = add_range_partition(ps, YEAR_SCHEMA, RangeBounds(2016, 2017))
    ps = add_range_partition(ps, YEAR_SCHEMA, RangeBounds(None, 2011))
    assert len(ps.range_bounds) == 3


@pytest.mark.parametrize(
    "bounds", [RangeBounds(2011, 2017), RangeBounds(2012, 2016), RangeBounds(None, None)]
)
def test_drop_absent_range_fails(bounds: RangeBounds) -> None:
    ps = PartitionSchema.create(
        YEAR_SCHEMA, range_columns=("year",), range_bounds=[RangeBounds(2011, 2016)]
    )
    with pytest.raises(ProgrammingError, match=r"no range partition .* to drop"):
        drop_range_partition(ps, YEAR_SCHEMA, bounds)


def test_add_or_drop_without_range_columns_fails() -> None:
    ps = PartitionSchema.create(YEAR_SCHEMA, [HashDimension("id", 2)])
    with pytest.raises(ProgrammingError, match="no range columns"):
        add_range_partition(ps, YEAR_SCHEMA, RangeBounds(1, 2))
    with pytest.raises(ProgrammingError, match="no range columns"):
        drop_range_partition(ps, YEAR_SCHEMA, RangeBounds())


# ------------------------------------------------------------------------------------------
# Inclusive and exclusive bounds (partition-test TestIncrementRangePartitionBounds)
# ------------------------------------------------------------------------------------------
I8_SCHEMA = make_schema(("c1", "INT8"), ("c2", "INT8"), ("c3", "INT8"), key=3)
I8_TYPES = [c.type for c in I8_SCHEMA.key_columns]


def i8_key(*vals: int | None) -> bytes:
    """The range key of (c1, c2, c3) with unset (None) columns at the minimum."""
    return encode_key([-128 if v is None else v for v in vals], I8_TYPES)


# (bound, incremented bound); None is an unset column.
INCREMENTS = [
    ((1, 2, 3), (1, 2, 4)),
    ((1, 2, None), (1, 2, -127)),
    ((1, None, 3), (1, None, 4)),
    ((None, 2, 3), (None, 2, 4)),
    ((1, None, None), (1, None, -127)),
    ((None, None, 3), (None, None, 4)),
    ((None, 2, None), (None, 2, -127)),
    ((1, 2, 127), (1, 3, None)),
    ((1, 127, 3), (1, 127, 4)),
    ((1, 127, 127), (2, None, None)),
]


@pytest.mark.parametrize(("bound", "incremented"), INCREMENTS)
def test_inclusive_upper_and_exclusive_lower_bounds(
    bound: tuple[int | None, ...], incremented: tuple[int | None, ...]
) -> None:
    vals = tuple(-128 if v is None else v for v in bound)
    upper = PartitionSchema.create(
        I8_SCHEMA,
        range_columns=("c1", "c2", "c3"),
        range_bounds=[RangeBounds(None, vals, upper_inclusive=True)],
    )
    assert create_partitions(upper, I8_SCHEMA)[0].range_key_end == i8_key(*incremented)
    lower = PartitionSchema.create(
        I8_SCHEMA,
        range_columns=("c1", "c2", "c3"),
        range_bounds=[RangeBounds(vals, None, lower_inclusive=False)],
    )
    assert create_partitions(lower, I8_SCHEMA)[0].range_key_start == i8_key(*incremented)


def test_inclusive_upper_at_the_maximum_is_unbounded() -> None:
    ps = PartitionSchema.create(
        I8_SCHEMA,
        range_columns=("c1", "c2", "c3"),
        range_bounds=[RangeBounds((0,), (127, 127, 127), upper_inclusive=True)],
    )
    assert create_partitions(ps, I8_SCHEMA)[0].range_key_end == b""


def test_exclusive_lower_at_the_maximum_fails() -> None:
    with pytest.raises(ProgrammingError, match="exclusive lower bound cannot be the largest"):
        PartitionSchema.create(
            I8_SCHEMA,
            range_columns=("c1", "c2", "c3"),
            range_bounds=[RangeBounds((127, 127, 127), None, lower_inclusive=False)],
        )


def test_inclusive_string_bounds() -> None:
    schema = make_schema(("c1", "STRING"), ("c2", "STRING"), key=2)
    ps = PartitionSchema.create(
        schema,
        range_columns=("c1", "c2"),
        range_bounds=[RangeBounds(("a",), ("a", "b"), upper_inclusive=True)],
    )
    [p] = create_partitions(ps, schema)
    assert p.range_key_start == b"a\0\0"
    assert p.range_key_end == b"a\0\0b\0"  # ("a", "b\0")
    assert p.range_bounds.describe() == '"a" <= VALUES <= ("a", "b")'
    single = PartitionSchema.create(
        schema, range_columns=("c1",), range_bounds=[RangeBounds("a", "a", True, True)]
    )
    [q] = create_partitions(single, schema)
    assert (q.range_key_start, q.range_key_end) == (b"a", b"a\0")
    assert q.range_bounds.describe() == 'VALUE = "a"'


# ------------------------------------------------------------------------------------------
# Validation
# ------------------------------------------------------------------------------------------
V_SCHEMA = make_schema(("a", "INT32"), ("b", "STRING"), ("v", "INT64"), ("f", "DOUBLE"), key=2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"hash_dimensions": [HashDimension("v", 4)]}, "'v' is not a primary key column"),
        ({"hash_dimensions": [HashDimension("zz", 4)]}, "unknown column 'zz'"),
        ({"hash_dimensions": [HashDimension("a", 1)]}, "at least 2 buckets"),
        ({"hash_dimensions": [HashDimension("a", 0)]}, "at least 2 buckets"),
        ({"hash_dimensions": [HashDimension((), 4)]}, "at least one column"),
        ({"hash_dimensions": [HashDimension(("a", "a"), 4)]}, "'a' is used twice"),
        (
            {"hash_dimensions": [HashDimension("a", 4), HashDimension(("b", "a"), 2)]},
            "'a' is used twice",
        ),
        ({"hash_dimensions": [HashDimension("a", 4, seed=-1)]}, "unsigned 32-bit"),
        ({"hash_dimensions": [HashDimension("a", 4, seed=2**32)]}, "unsigned 32-bit"),
        ({"range_columns": ("f",)}, "'f' is not a primary key column"),
        ({"range_columns": ("a", "a")}, "listed twice"),
        ({"range_bounds": [RangeBounds(1, 2)]}, "need range partition columns"),
        ({"split_rows": [(1,)]}, "need range partition columns"),
        (
            {"range_columns": ("a",), "range_bounds": [RangeBounds(0, 10), RangeBounds(5, 20)]},
            "overlap",
        ),
        (
            {"range_columns": ("a",), "range_bounds": [RangeBounds(None, 10), RangeBounds()]},
            "overlap",
        ),
        ({"range_columns": ("a",), "range_bounds": [RangeBounds(10, 10)]}, "less than the upper"),
        ({"range_columns": ("a",), "range_bounds": [RangeBounds(10, 5)]}, "less than the upper"),
        (
            {"range_columns": ("a",), "range_bounds": [RangeBounds(None, -(2**31))]},
            "smallest key",
        ),
        ({"range_columns": ("b",), "range_bounds": [RangeBounds(None, "")]}, "smallest key"),
        ({"range_columns": ("a",), "range_bounds": [RangeBounds("x", None)]}, "not a valid INT32"),
        ({"range_columns": ("a",), "range_bounds": [RangeBounds((1, 2), None)]}, "2 values"),
        ({"range_columns": ("a",), "range_bounds": [RangeBounds(2**40, None)]}, "not a valid"),
    ],
)
def test_invalid_partition_schemas(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ProgrammingError, match=message):
        PartitionSchema.create(V_SCHEMA, **kwargs)


def test_validate_catches_a_stored_schema_that_no_longer_fits() -> None:
    ps = PartitionSchema.create(V_SCHEMA, [HashDimension("b", 4)], ("a",))
    other = make_schema(("a", "INT32"), ("b", "STRING"), key=1)  # b is no longer a key
    with pytest.raises(ProgrammingError, match="'b' is not a primary key column"):
        ps.validate(other)
    with pytest.raises(ProgrammingError, match="exactly one unbounded range"):
        PartitionSchema((), (), (RangeBounds(1, 2),)).validate(V_SCHEMA)
    with pytest.raises(ProgrammingError, match="overlap"):
        PartitionSchema((), ("a",), (RangeBounds(1, 5), RangeBounds(3, 9))).validate(V_SCHEMA)


# ------------------------------------------------------------------------------------------
# Serialization
# ------------------------------------------------------------------------------------------
def test_serialization_round_trip() -> None:
    schema = make_schema(
        ("d", "DATE"),
        ("ts", "TIMESTAMP"),
        ("dec", "DECIMAL(10,2)"),
        ("bin", "BINARY"),
        ("s", "STRING"),
        ("v", "DOUBLE"),
        key=5,
    )
    ps = PartitionSchema.create(
        schema,
        [HashDimension(("s", "bin"), 3, seed=7), HashDimension("dec", 2)],
        ("d", "ts"),
        [
            RangeBounds((datetime.date(2020, 1, 1),), (datetime.date(2021, 1, 1),)),
            RangeBounds(
                (datetime.date(2021, 1, 1), datetime.datetime(2021, 1, 1, 12, 0, 0, 5)),
                (datetime.date(2022, 1, 1),),
                lower_inclusive=False,
            ),
        ],
    )
    d = ps.to_dict()
    back = PartitionSchema.from_dict(json.loads(json.dumps(d)))
    assert back == ps
    back.validate(schema)
    assert create_partitions(back, schema) == create_partitions(ps, schema)

    binary_ranges = PartitionSchema.create(
        schema,
        range_columns=("bin", "dec"),
        range_bounds=[RangeBounds((b"\x00\xff", decimal.Decimal("1.50")), None)],
    )
    again = PartitionSchema.from_dict(json.loads(json.dumps(binary_ranges.to_dict())))
    assert again == binary_ranges
    assert create_partitions(again, schema) == create_partitions(binary_ranges, schema)


def test_serialization_of_the_default() -> None:
    ps = PartitionSchema()
    assert PartitionSchema.from_dict(json.loads(json.dumps(ps.to_dict()))) == ps
