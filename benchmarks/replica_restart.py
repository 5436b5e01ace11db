"""Restart time of a replicated tablet: ``python -m benchmarks.replica_restart [ROWS]``.

A single-voter ``TabletReplica`` (real files, real fsyncs) gets ``ROWS`` (default
200,000) rows UPSERTed in 1,000-row entries (below the bulk-load threshold: every row
goes through both logs), then is closed and reopened; the time from ``open`` until the
replica leads and has applied its whole log is measured (best of 3), twice:

* **full replay** (the behaviour before durable applied state): ``replica.committed``
  removed, so the open rebuilds the tablet from the whole consensus log (the path a
  replica written before it existed takes);
* **durable tablet**: after one run of the log GC driver with a flush, the open
  finds the flushed tablet and replays nothing from the consensus log.

Also printed: consensus log bytes (1 MiB segments) before and after the GC.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time

import pyarrow as pa

from kudusql.cluster.tserver.tablet_replica import ReplicaOptions, TabletReplica
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.consensus.raft_config import RaftConfig

SCHEMA = Schema.build(
    [
        ColumnSchema("id", DataType.parse("BIGINT"), nullable=False),
        ColumnSchema("name", DataType.parse("STRING")),
        ColumnSchema("v", DataType.parse("DOUBLE")),
    ],
    ["id"],
)
OPTIONS = ReplicaOptions(tick_interval_s=0.005, log_gc_interval_s=0, log_segment_bytes=1 << 20)
BATCH = 1000


def _open(directory: str) -> tuple[TabletReplica, float]:
    t0 = time.perf_counter()
    r = TabletReplica.open(directory, transport=lambda m: None, options=OPTIONS)
    while not (
        r.is_leader
        and r.committed_index == r.last_opid.index
        and r.applied_index == r.committed_index
    ):
        time.sleep(0.001)
    return r, time.perf_counter() - t0


def _log_bytes(directory: str) -> int:
    wal = os.path.join(directory, "wal")
    return sum(os.path.getsize(os.path.join(wal, n)) for n in os.listdir(wal))


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    root = tempfile.mkdtemp(prefix="replica-restart-")
    try:
        directory = os.path.join(root, "r")
        r = TabletReplica.create(
            directory,
            uuid="solo",
            tablet_id="t",
            schema=SCHEMA,
            config=RaftConfig.of_voters(["solo"]),
            transport=lambda m: None,
            options=OPTIONS,
        )
        while not r.is_leader:
            time.sleep(0.001)
        t0 = time.perf_counter()
        for start in range(0, rows, BATCH):
            ids = list(range(start, min(rows, start + BATCH)))
            data = pa.table(
                {
                    "id": pa.array(ids, pa.int64()),
                    "name": [f"name-{i}" for i in ids],
                    "v": [i * 0.5 for i in ids],
                }
            )
            r.write(data, "upsert")
        print(f"wrote {rows} rows in {time.perf_counter() - t0:.1f} s")
        r.close()
        before_bytes = _log_bytes(directory)

        full = []
        for _ in range(3):
            os.unlink(os.path.join(directory, "replica.committed"))
            r, dt = _open(directory)
            assert r.tablet.count_rows() == rows
            full.append(dt)
            r.close()
        print(f"full replay (before): best {min(full):.2f} s of {[round(x, 2) for x in full]}")

        r, _ = _open(directory)
        r.flush_and_gc(flush=True)
        r.close()
        durable = []
        for _ in range(3):
            r, dt = _open(directory)
            stats = r.bootstrap_stats
            assert r.tablet.count_rows() == rows
            durable.append(dt)
            r.close()
        print(
            f"durable tablet (after): best {min(durable):.2f} s of {[round(x, 2) for x in durable]}"
        )
        print(f"  bootstrap: {stats}")
        mb_before, mb_after = before_bytes / 1e6, _log_bytes(directory) / 1e6
        print(f"consensus log: {mb_before:.1f} MB before GC, {mb_after:.1f} MB after")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
