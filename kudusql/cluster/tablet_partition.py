"""One tablet's partition as the cluster carries it, and which rows belong to it.

A ``TabletPartition`` is the table's partition schema (as it was when the tablet was
created) and the tablet's slice of it: its hash buckets, range bounds and partition keys
(the tables layer's ``Partition`` without the encoded range keys, which follow from the
rest). The client writes it as JSON text into ``CreateTablet.partition``; the master
passes that text through untouched, the tablet server keeps it in its superblock and
checks every written row against it, and the master serves it back in tablet locations.

Routing is the tables layer's (``partition_for_batch``), so a row belongs to a tablet
exactly when the embedded table would route it there: its index among the partition
schema's partitions is the tablet's. Partitions added to the table after the tablet was
created never change that: a row of another range routes nowhere (-1) under the older
schema, and rows of this tablet's own range keep their bucket.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from kudusql.cluster.errors import MalformedMessage
from kudusql.common.schema import Schema
from kudusql.common.types import cast_array
from kudusql.storage.tables.partition import (
    Partition,
    PartitionSchema,
    RangeBounds,
    create_partitions,
    partition_for_batch,
)

__all__ = ["TabletPartition", "routing_keys"]


@dataclass(frozen=True)
class TabletPartition:
    """A tablet's slice of its table: ``partition_schema`` and the slice's fields."""

    partition_schema: PartitionSchema
    hash_buckets: tuple[int, ...]
    range_bounds: RangeBounds
    partition_key_start: bytes
    partition_key_end: bytes

    @classmethod
    def of(cls, partition_schema: PartitionSchema, p: Partition) -> TabletPartition:
        return cls(
            partition_schema,
            p.hash_buckets,
            p.range_bounds,
            p.partition_key_start,
            p.partition_key_end,
        )

    def to_json(self) -> str:
        return json.dumps(
            {
                "partition_schema": self.partition_schema.to_dict(),
                "hash_buckets": list(self.hash_buckets),
                "range_bounds": self.range_bounds.to_dict(),
                "partition_key_start": self.partition_key_start.hex(),
                "partition_key_end": self.partition_key_end.hex(),
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> TabletPartition:
        """The partition a ``to_json`` wrote; ``MalformedMessage`` if ``text`` is not one."""
        try:
            d: Any = json.loads(text)
            if not isinstance(d, dict):
                raise TypeError("not a JSON object")
            return cls(
                PartitionSchema.from_dict(d["partition_schema"]),
                tuple(int(b) for b in d["hash_buckets"]),
                RangeBounds.from_dict(d["range_bounds"]),
                bytes.fromhex(d["partition_key_start"]),
                bytes.fromhex(d["partition_key_end"]),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise MalformedMessage(f"a tablet partition is not a valid partition: {exc}") from None

    def index_in(self, schema: Schema) -> int:
        """This slice's index among ``create_partitions`` of its partition schema."""
        for i, p in enumerate(create_partitions(self.partition_schema, schema)):
            if p.partition_key_start == self.partition_key_start:
                return i
        raise MalformedMessage("a tablet partition is not one of its partition schema's partitions")

    def describe(self) -> str:
        p = Partition(
            self.hash_buckets,
            self.range_bounds,
            b"",
            b"",
            self.partition_key_start,
            self.partition_key_end,
        )
        return p.describe(self.partition_schema)

    def foreign_rows(self, schema: Schema, data: pa.Table) -> np.ndarray:
        """The mask of the rows of ``data`` that belong to another tablet (or to none).
        Rows whose key cannot be routed (missing, NULL or unconvertible) are not foreign:
        the tablet's own validation reports them."""
        n = data.num_rows
        out = np.zeros(n, dtype=bool)
        ps = self.partition_schema
        if n == 0 or (not ps.hash_dimensions and not ps.range_columns):
            return out
        keys, valid = routing_keys(schema, data)
        if keys is None or not valid.any():
            return out
        if not valid.all():
            keys = keys.filter(pa.array(valid))
        slots = partition_for_batch(ps, schema, keys)
        out[valid] = slots != self.index_in(schema)
        return out


def routing_keys(schema: Schema, data: pa.Table) -> tuple[pa.Table | None, np.ndarray]:
    """The key columns that route ``data`` (a non-unique key's auto-incrementing id routes
    nothing), cast as the tablets will store them, and the mask of the rows whose key
    routes (present, non-NULL, convertible). None when a key column is missing."""
    n = data.num_rows
    valid = np.ones(n, dtype=bool)
    cols: list[pa.Array[Any]] = []
    routing = [c for c in schema.key_columns if not c.auto_incrementing]
    for c in routing:
        if c.name not in data.column_names:
            return None, np.zeros(n, dtype=bool)
        arr, bad = cast_array(data.column(c.name), c.type)
        if bad is not None:
            valid &= ~bad
        if arr.null_count:
            valid &= np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        cols.append(arr)
    return pa.Table.from_arrays(cols, names=[c.name for c in routing]), valid
