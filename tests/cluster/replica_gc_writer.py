"""A single-voter ``TabletReplica`` writer for the log GC crash tests, killed by the
test at a random moment or at a durability point.

Usage: ``python -m tests.cluster.replica_gc_writer DIR [KILL_POINT SKIP]``

It creates the replica at DIR (or opens it: bootstrap), waits until it leads and has
applied what it committed, reads the progress row (``PROGRESS_KEY``: the number of the
last batch applied) and writes batches from the next one on, each a function of its
number (``batch``), printing ``ACK <n>`` once batch n is acknowledged. Meanwhile the log
GC driver runs every few milliseconds with tiny segments and a tiny flush threshold, and
a thread runs the tablet's compactions: flushes, delta flushes, compactions and segment
deletions all happen under the writes. With KILL_POINT (a ``faults`` point) it SIGKILLs
itself at the SKIP+1-th such call.
"""

from __future__ import annotations

import random
import sys
import threading
import time
from typing import Any

import pyarrow as pa

from kudusql.cluster.tserver.tablet_replica import ReplicaOptions, TabletReplica
from kudusql.common.options import TabletOptions
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.consensus.raft_config import RaftConfig
from kudusql.consensus.raft_consensus import RaftOptions
from kudusql.storage.fs import faults

SCHEMA = Schema.build(
    [
        ColumnSchema("id", DataType.parse("BIGINT"), nullable=False),
        ColumnSchema("name", DataType.parse("STRING")),
    ],
    ["id"],
)
UUID = "solo"
PROGRESS_KEY = -1
KEYS = 60
OPTIONS = ReplicaOptions(
    raft=RaftOptions(heartbeat_interval_ms=50, evict_failed_followers=False),
    tick_interval_s=0.01,
    write_timeout_s=10.0,
    tablet=TabletOptions(flush_threshold_bytes=2 * 1024),
    log_segment_bytes=8 * 1024,
    log_gc_interval_s=0.02,
)


def batch(n: int) -> tuple[str, list[int]]:
    """Batch n (from 1): one operation on a few keys of a small key space, so inserts,
    updates and deletes meet rows in flushed rowsets, in DeltaMemStores and in the
    MemRowSet."""
    rng = random.Random(n)
    op = rng.choice(["upsert", "insert", "update", "delete", "upsert"])
    return op, sorted(rng.sample(range(KEYS), rng.randint(1, 6)))


def model(upto: int) -> dict[int, str]:
    """The rows after batches 1 .. ``upto``, each applied once (row errors change
    nothing: an insert of a present key, an update or delete of an absent one)."""
    rows: dict[int, str] = {}
    for n in range(1, upto + 1):
        op, keys = batch(n)
        for k in keys:
            present = k in rows
            if op == "upsert" or (op, present) in (("insert", False), ("update", True)):
                rows[k] = f"v{n}"
            elif op == "delete":
                rows.pop(k, None)
    return rows


def write_batch(replica: TabletReplica, n: int) -> None:
    """Batch n in one entry, with the progress row (``PROGRESS_KEY``) upserted to n:
    an entry applies whole, so the progress row names the last batch applied."""
    op, keys = batch(n)
    data = pa.table(
        {
            "id": pa.array([*keys, PROGRESS_KEY], pa.int64()),
            "name": [f"v{n}"] * len(keys) + [str(n)],
            "op": [op] * len(keys) + ["upsert"],
        }
    )
    replica.write(data, op_column="op")


def open_replica(directory: str, **kw: Any) -> TabletReplica:
    try:
        return TabletReplica.open(directory, transport=lambda m: None, options=OPTIONS, **kw)
    except Exception:
        import os

        if os.path.exists(os.path.join(directory, "replica.meta")):
            raise
    return TabletReplica.create(
        directory,
        uuid=UUID,
        tablet_id="t1",
        schema=SCHEMA,
        config=RaftConfig.of_voters([UUID]),
        transport=lambda m: None,
        options=OPTIONS,
        **kw,
    )


def settled(replica: TabletReplica, timeout_s: float = 20.0) -> tuple[int, dict[int, str]]:
    """Waits until the replica leads, committed its whole log (its own NO_OP last) and
    applied it; the last batch applied (the progress row) and the other rows."""
    deadline = time.monotonic() + timeout_s
    while not (
        replica.is_leader
        and replica.committed_index == replica.last_opid.index > 0
        and replica.applied_index == replica.committed_index
    ):
        if time.monotonic() > deadline:
            raise TimeoutError("the replica did not lead and apply in time")
        time.sleep(0.005)
    snapshot = replica.tablet.latest_timestamp()
    rows = replica.tablet.scan(ordered=True, snapshot=snapshot).read_all().to_pylist()
    held = [r["id"] for r in rows]
    assert len(held) == len(set(held)), f"a key is held twice: {held}"
    got = {r["id"]: r["name"] for r in rows}
    last = int(got.pop(PROGRESS_KEY, "0"))
    return last, got


def main() -> None:
    directory = sys.argv[1]
    if len(sys.argv) > 2:
        faults.inject(sys.argv[2], skip=int(sys.argv[3]), kill=True)
    replica = open_replica(directory)
    last, _ = settled(replica)
    print(f"START {last}", flush=True)

    def compactions() -> None:
        while True:
            time.sleep(0.03)
            try:
                replica.tablet.run_maintenance(flush=False, compact=True, gc=True)
            except Exception:
                return

    threading.Thread(target=compactions, daemon=True).start()
    n = last + 1
    while True:
        write_batch(replica, n)
        print(f"ACK {n}", flush=True)
        n += 1


if __name__ == "__main__":
    main()
