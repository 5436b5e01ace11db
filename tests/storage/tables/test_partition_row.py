"""``partition_for_row`` (the scalar point-lookup path) agrees with the vectorized
``partition_for_batch`` on every row."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from kudusql.storage.tables.partition import (
    HashDimension,
    PartitionSchema,
    RangeBounds,
    partition_for_batch,
    partition_for_row,
)
from tests.support.tablets import schema

SCHEMA = schema(("a", "INT32"), ("s", "STRING"), ("b", "INT64"), key=["a", "s", "b"])
SHAPES = [
    PartitionSchema.create(SCHEMA, [HashDimension(("a",), 3)]),
    PartitionSchema.create(SCHEMA, [HashDimension(("s", "b"), 5, seed=7)]),
    PartitionSchema.create(
        SCHEMA, [], ["a"], [RangeBounds((-100,), (0,)), RangeBounds((10,), (200,))]
    ),
    PartitionSchema.create(
        SCHEMA,
        [HashDimension(("b",), 2), HashDimension(("a",), 3)],
        ["s", "a"],
        [RangeBounds(("a", 0), ("m", 5)), RangeBounds(("q", -1), None)],
    ),
]

rows_st = st.lists(
    st.tuples(
        st.integers(-300, 300),
        st.text(alphabet="abmqz\x00é", max_size=4),
        st.integers(-(2**63), 2**63 - 1),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(rows=rows_st, shape=st.sampled_from(range(len(SHAPES))))
def test_row_routing_matches_batch_routing(rows: list[tuple[int, str, int]], shape: int) -> None:
    ps = SHAPES[shape]
    batch = pa.table(
        {
            "a": pa.array([r[0] for r in rows], pa.int32()),
            "s": [r[1] for r in rows],
            "b": pa.array([r[2] for r in rows], pa.int64()),
        }
    )
    expected = partition_for_batch(ps, SCHEMA, batch).tolist()
    got = [partition_for_row(ps, SCHEMA, {"a": a, "s": s, "b": b}) for a, s, b in rows]
    assert got == expected
