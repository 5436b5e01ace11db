"""A slow, row-at-a-time model of partition routing, to check the vectorized one."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from kudusql.common.keys import encode_key
from kudusql.common.murmur import murmur2_64
from kudusql.common.schema import Schema
from kudusql.storage.tables.partition import Partition, PartitionSchema


def row_buckets(
    ps: PartitionSchema, schema: Schema, row: dict[str, Any], partition: Partition | None = None
) -> tuple[int, ...]:
    """Each hash dimension's bucket of one row, hashing its scalar key encoding (in the
    hash schema of ``partition``'s range when given, else the table-wide one)."""
    out = []
    dims = ps.hash_dimensions if partition is None else ps.hash_schema_for(partition.range_bounds)
    for dim in dims:
        types = [schema.column(c).type for c in dim.columns]
        key = encode_key([row[c] for c in dim.columns], types)
        out.append(murmur2_64(key, dim.seed) % dim.num_buckets)
    return tuple(out)


def row_range_key(ps: PartitionSchema, schema: Schema, row: dict[str, Any]) -> bytes:
    if not ps.range_columns:
        return b""
    types = [schema.column(c).type for c in ps.range_columns]
    return encode_key([row[c] for c in ps.range_columns], types)


def slow_partition_index(
    ps: PartitionSchema, schema: Schema, partitions: list[Partition], table: pa.Table
) -> list[int]:
    """Each row's partition: the one whose range keys enclose its key and whose buckets are
    the row's in that range's hash schema."""
    out = []
    for row in table.to_pylist():
        key = row_range_key(ps, schema, row)
        found = -1
        for i, p in enumerate(partitions):
            if key < p.range_key_start or p.hash_buckets != row_buckets(ps, schema, row, p):
                continue
            if p.range_key_end == b"" or key < p.range_key_end:
                found = i
                break
        out.append(found)
    return out
