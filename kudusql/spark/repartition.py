"""``kudu.repartition``: a DataFrame repartitioned by a table's partitioning before a write.

kudu-spark's ``KuduContext`` writes with ``kudu.repartition`` through a shuffle that
puts each Kudu tablet's rows in one Spark partition (sorted by primary key with
``kudu.repartition.sort``, the default). Here the write's own staging routes rows to
tablets and sorts them by key in every case, so the shuffle buys one thing: each tablet
then receives its rows from exactly one task, so an INSERT into an empty table stages
one key-disjoint run per tablet instead of one per task and tablet (fewer rowsets, and
no cross-task key check at the commit).

A Python data source cannot ask Spark for a distribution, so the shuffle is made where
the DataFrame is at hand: ``KuduContext``'s writes. Each row's tablet is computed in
Arrow batches (``partition_for_batch``, in ``mapInArrow``) and turned into a value that
Spark's hash partitioning (Murmur3 of a long, seed 42, modulo the partition count)
sends to the partition of that index, so partition ``i`` holds tablet ``i``'s rows
exactly.
"""

from __future__ import annotations

import struct
import warnings
from collections.abc import Iterator

import mmh3
import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.types import LongType, StructField, StructType

from kudusql.common.schema import Schema
from kudusql.common.types import cast_array
from kudusql.storage.tables.partition import PartitionSchema, partition_for_batch

#: The column carrying each row's shuffle value (dropped after the shuffle).
_PART = "__kudusql_tablet"
#: Spark's seed for ``hash()`` and hash partitioning.
_SPARK_SEED = 42


def spark_partition(value: int, partitions: int) -> int:
    """The partition Spark's hash partitioning sends a long ``value`` to."""
    h = mmh3.hash(struct.pack("<q", value), _SPARK_SEED, signed=True)
    return h % partitions


def routing_values(partitions: int) -> list[int]:
    """For each partition index, a long that Spark's hash partitioning sends there."""
    out: dict[int, int] = {}
    v = 0
    while len(out) < partitions:
        out.setdefault(spark_partition(v, partitions), v)
        v += 1
    return [out[i] for i in range(partitions)]


def repartition_by_tablet(
    df: DataFrame,
    schema: Schema,
    partition_schema: PartitionSchema,
    tablets: int,
    *,
    sort: bool,
) -> DataFrame:
    """``df`` in ``tablets`` Spark partitions, partition ``i`` holding the rows of the
    table's ``i``-th tablet (rows no partition covers in the first; the write reports
    them), each partition sorted by the key columns when ``sort``."""
    names = {c.lower(): c for c in df.columns}
    keys = [c for c in schema.key_columns if not c.auto_incrementing]
    key_cols = [names[k.name.lower()] for k in keys]
    values = np.array(routing_values(tablets), dtype=np.int64)

    def route(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            valid = np.ones(b.num_rows, dtype=bool)
            cols = []
            for k, name in zip(keys, key_cols, strict=True):
                a = b.column(b.schema.get_field_index(name))
                if pa.types.is_timestamp(a.type) and a.type.tz is not None:
                    a = a.cast(pa.timestamp(a.type.unit))
                a, bad = cast_array(a, k.type)
                if bad is not None:
                    valid &= ~bad
                valid &= np.asarray(a.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
                cols.append(a)
            slots = np.zeros(b.num_rows, dtype=np.int64)
            if valid.any():  # a row whose key does not route stays in partition 0
                routed = pa.Table.from_arrays(cols, names=[k.name for k in keys])
                if not valid.all():
                    routed = routed.filter(pa.array(valid))
                slots[valid] = partition_for_batch(partition_schema, schema, routed)
            slots[slots < 0] = 0
            yield b.append_column(_PART, pa.array(values[slots], pa.int64()))

    out = StructType([*df.schema.fields, StructField(_PART, LongType(), False)])
    with warnings.catch_warnings():
        # mapInArrow checks pandas' version although it uses no pandas; PySpark 4.3 warns
        # about pandas 3 there, which means nothing for Arrow batches
        warnings.filterwarnings("ignore", "PySpark does not yet fully support pandas")
        routed = df.mapInArrow(route, out)
    shuffled = routed.repartition(tablets, _PART).drop(_PART)
    return shuffled.sortWithinPartitions(*key_cols) if sort else shuffled
