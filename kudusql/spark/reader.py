"""Spark reads of a kudusql table: partitions from scan tokens, Arrow batches in Spark's
exact schema.

Planning (``partitions``) runs once, in a Python worker on the driver: it opens the
database read-only, fixes one snapshot (the ``kudu.snapshotTimestampMicros`` option,
else the latest), and plans the table's scan tokens (a tablet larger than
``kudu.splitSizeBytes`` is cut at rowset bounds). The reader takes no filters: Spark
4.3 would reuse a plan made for one query's filters in later queries (docs/SPARK.md),
so every plan is the whole table and Spark applies every filter. The tokens are
packed into balanced Spark partitions (``pack_tokens``), as Spark packs files: a Python
read task costs Spark ~65 ms before it reads a byte, so a table of many small tablets
read one tablet per task spent more time starting tasks than scanning. The partitions
come in whole waves of the task slots: three partitions on two slots left one slot idle
for a third of TPC-H Q1. Each partition
carries its serialized tokens, so every task reads the same snapshot no matter when it
runs. A task runs its tokens on a read-only open of the database and yields their
batches cast to the Arrow schema Spark derived from the read schema.

Spark reuses its Python worker processes, so each keeps its read-only open (and the
decoded pages in its block cache) from task to task and query to query, as long as the
files a fresh open would read are unchanged (``storage.tables.fingerprint``, taken
before each open); a changed tablet is reopened, a changed catalog reopens the whole
database.

On a cluster (``kudu.master`` naming a master) the driver plans the cluster's scan
tokens through the master (one per tablet, all at one snapshot: the option's, else
now, after every write the driver has seen acknowledged), packed round-robin into one
group per task slot; each task streams its tokens' tablets from the tablet servers
the tokens name (``cluster.read_token``), never touching a database directory.
"""

from __future__ import annotations

import heapq
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from kudusql.cluster.client.target import ClusterTarget
from kudusql.common.hybrid_time import from_micros
from kudusql.common.options import TabletOptions
from kudusql.spark import cluster
from kudusql.spark.options import SourceOptions
from kudusql.spark.spark_schema import arrow_schema_for
from kudusql.storage.tables.database import Database
from kudusql.storage.tables.fingerprint import (
    Fingerprint,
    catalog_fingerprint,
    tablet_fingerprint,
)
from kudusql.storage.tables.scan_token import ScanToken

#: Decoded pages a Spark worker process keeps (each worker has its own cache). Spark
#: hands a query's tasks to whichever worker is free, so each worker sees most tablets:
#: at 256 MiB the decoded columns of TPC-H Q1 at SF 1 (~0.5 GiB) cycled through the LRU
#: and every query decoded them again (Q1 1.52x Spark over Parquet; 1.32x at 1 GiB).
WORKER_CACHE_BYTES = 1 << 30
#: The fewest rows ``kudu.batchSize`` cuts a batch into: Spark and the Python worker pay
#: per batch (a setting of 1 byte meant one-row batches, which crashed Python workers).
MIN_SPLIT_ROWS = 1024


@dataclass
class _KeptOpen:
    db: Database
    catalog: Fingerprint
    tablets: dict[int, Fingerprint] = field(default_factory=dict)


_KEPT: dict[str, _KeptOpen] = {}


def kept_open(db_path: str, tablet_id: int) -> Database:
    """This process's read-only open of ``db_path``, made current for ``tablet_id``."""
    cat = catalog_fingerprint(db_path)
    kept = _KEPT.get(db_path)
    if kept is None or kept.catalog != cat:
        if kept is not None:
            kept.db.close()
            del _KEPT[db_path]
        opts = TabletOptions(block_cache_bytes=WORKER_CACHE_BYTES)
        kept = _KeptOpen(Database(db_path, opts, read_only=True, maintenance=False), cat)
        _KEPT[db_path] = kept
    fp = tablet_fingerprint(db_path, tablet_id)  # before the (re)open the scan makes
    if kept.tablets.get(tablet_id) != fp:
        kept.db.forget_tablet(tablet_id)
        kept.tablets[tablet_id] = fp
    return kept.db


class TokenPartition(InputPartition):
    """The serialized scan tokens one read task runs (none: the table has no tablets)."""

    def __init__(self, tokens: list[bytes], description: str) -> None:
        super().__init__(tokens)
        self.description = description

    def __repr__(self) -> str:
        return f"TokenPartition({self.description})"


def pack_tokens(
    tokens: Sequence[ScanToken], min_partitions: int, max_bytes: int
) -> list[list[ScanToken]]:
    """``tokens`` in balanced groups, one per Spark partition.

    ``min_partitions`` is the number of tasks expected to run at once (default: the
    CPU count). There are that many groups, or, when the tokens' total size over
    ``max_bytes`` asks for more, the next multiple of it: whole waves of tasks, so that
    no slot idles while one task of a last, partial wave runs alone. Never more groups
    than tokens. The largest token goes first, each into the lightest group so far.
    Within a group the tokens keep tablet and key order.
    """
    if not tokens:
        return []
    total = sum(t.size_bytes for t in tokens)
    slots = max(min_partitions, 1)
    need = max(math.ceil(total / max_bytes), 1)
    n = min(len(tokens), slots * math.ceil(need / slots))
    groups: list[list[ScanToken]] = [[] for _ in range(n)]
    lightest = [(0, 0, i) for i in range(n)]  # (bytes, tokens, group): empty ones first
    for t in sorted(tokens, key=lambda t: -t.size_bytes):
        size, count, i = heapq.heappop(lightest)
        groups[i].append(t)
        heapq.heappush(lightest, (size + t.size_bytes, count + 1, i))
    for g in groups:
        g.sort(key=lambda t: (t.tablet_id, t.key_lo or b""))
    return groups


class KudusqlReader(DataSourceReader):
    def __init__(self, opts: SourceOptions, columns: list[str], schema: StructType) -> None:
        self.opts = opts
        self.columns = columns
        self.arrow_schema = arrow_schema_for(schema)
        #: The snapshot the partitions were planned at (a HybridTime), once planned.
        self.snapshot: int | None = None

    def partitions(self) -> Sequence[InputPartition]:
        o = self.opts
        if o.cluster is not None:
            return self._cluster_partitions(o.cluster)
        snapshot = None if o.snapshot_micros is None else from_micros(o.snapshot_micros)
        with Database(o.database, read_only=True) as db:
            tokens = db.table(o.table).scan_tokens(
                self.columns,
                snapshot=snapshot,
                split_size_bytes=o.split_size_bytes,
            )
            self.snapshot = tokens[0].snapshot if tokens else db.snapshot(snapshot)
        if not tokens:
            return [TokenPartition([], "the table has no tablets")]
        max_bytes = o.max_partition_bytes
        if o.split_size_bytes is not None:  # pieces the user asked for stay apart
            max_bytes = min(max_bytes, o.split_size_bytes)
        groups = pack_tokens(tokens, o.min_partitions or os.cpu_count() or 1, max_bytes)
        return [
            TokenPartition(
                [t.serialize() for t in g],
                f"{g[0].table_name} " + ", ".join(f"tablet {t.tablet_id} {t.partition}" for t in g),
            )
            for g in groups
        ]

    def _cluster_partitions(self, target: ClusterTarget) -> Sequence[InputPartition]:
        """A cluster's scan tokens (one per tablet, at one snapshot) in groups, one
        group per task slot (a tablet server alone knows its tablets' sizes)."""
        o = self.opts
        snapshot = None if o.snapshot_micros is None else from_micros(o.snapshot_micros)
        with cluster.open_database(target) as db:
            table = db.table(o.table)
            snap = db.snapshot(snapshot)
            tokens = table.scan_tokens(self.columns, snapshot=snap)
        self.snapshot = snap
        if not tokens:
            return [TokenPartition([], "the table has no tablets")]
        slots = max(1, min(len(tokens), o.min_partitions or os.cpu_count() or 1))
        groups = [tokens[i::slots] for i in range(slots)]
        return [
            TokenPartition(
                [t.serialize() for t in g],
                f"{g[0].table_name} "
                + ", ".join(f"tablet {t.tablet_id} {t.partition} on {t.address}" for t in g),
            )
            for g in groups
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        target = self.arrow_schema
        if self.opts.cluster is not None:
            for data in partition.value:
                batches = cluster.read_token(
                    self.opts.cluster, data, ordered=self.opts.fault_tolerant
                )
                for batch in batches:
                    if batch.num_rows:
                        yield from split_batch(spark_batch(batch, target), self.opts.batch_bytes)
            return
        for data in partition.value:
            token = ScanToken.deserialize(data)
            db = kept_open(token.db_path, token.tablet_id)
            for batch in token.execute(db, ordered=self.opts.fault_tolerant):
                if batch.num_rows:
                    yield from split_batch(spark_batch(batch, target), self.opts.batch_bytes)


def spark_batch(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """``batch`` (storage types, in the read's column order) as ``target``: Spark's
    names, types (UTC timestamps) and nullability."""
    arrays: list[Any] = []
    for col, f in zip(batch.columns, target, strict=True):
        arrays.append(col if col.type == f.type else col.cast(f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=target)


def split_batch(batch: pa.RecordBatch, max_bytes: int) -> Iterator[pa.RecordBatch]:
    """``batch`` cut into slices of at most about ``max_bytes`` (kudu.batchSize), each of
    at least ``MIN_SPLIT_ROWS`` rows (but the last)."""
    size = batch.nbytes
    if size <= max_bytes or batch.num_rows <= MIN_SPLIT_ROWS:
        yield batch
        return
    pieces = math.ceil(size / max_bytes)
    step = max(MIN_SPLIT_ROWS, math.ceil(batch.num_rows / pieces))
    for start in range(0, batch.num_rows, step):
        yield batch.slice(start, step)
