"""A full scan through the cluster against the same scan of the embedded table.

Run: ``python -m benchmarks.bench_cluster_scan [--rows N] [--tablets 3] [--runs 3]``.
It loads the first N rows of TPC-H ``lineitem`` (default 1,000,000; SF 0.1 data when
N fits in it, else SF 1), writes them to an embedded ``Table`` and, through a
``RemoteTable``, to three tablet server processes on loopback ports (one tablet each,
HASH on ``l_orderkey``: the same partitioning on both sides), then times a full scan
of every column (``read_all``) on each side, the first run (cold) and the best of
``--runs``, and prints both and the ratio cluster/embedded (issue 35's goal at SF 1:
at most 1.5x). Both sides are flushed before they are scanned (DiskRowSets, as data at
rest is). It asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from benchmarks.data import LINEITEM_KEY, describe, kudu_schema, lineitem_rows
from kudusql.cluster.client.meta_cache import MetaCache
from kudusql.cluster.client.remote_table import RemoteTable
from kudusql.cluster.client.tserver_client import TabletServerPool
from kudusql.cluster.master_state import TabletLocation
from kudusql.cluster.security import write_secret_file
from kudusql.cluster.tablet_partition import TabletPartition
from kudusql.cluster.tserver.messages import CreateTablet
from kudusql.storage.tables.database import Database
from kudusql.storage.tables.partition import HashDimension, PartitionSchema, create_partitions
from tests.cluster.tserver_process import TServerProcess

SECRET = "bench-cluster-secret"
WRITE_BATCH = 100_000


class Locations:
    def __init__(self, tablets: list[TabletLocation]) -> None:
        self.tablets = tablets

    def locations(self, table_name: str) -> list[TabletLocation]:
        return self.tablets


def timed_runs(runs: int, scan: Callable[[], pa.Table]) -> tuple[list[float], int]:
    """Each run's seconds (the first one cold: nothing decoded in the block cache yet)."""
    times = []
    rows = 0
    for _ in range(runs):
        start = time.perf_counter()
        rows = scan().num_rows
        times.append(time.perf_counter() - start)
    return times, rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_cluster_scan")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--tablets", type=int, default=3, help="tablet servers (one tablet each)")
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args(argv)
    data = lineitem_rows(0.1 if args.rows <= 600_000 else 1, args.rows)
    schema = kudu_schema(data.schema, LINEITEM_KEY)
    data = data.select(schema.names)
    partitioning = PartitionSchema.create(schema, [HashDimension(("l_orderkey",), args.tablets)])
    print(f"lineitem: {describe(data)}; HASH (l_orderkey) into {args.tablets} tablets")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        write_secret_file(work / "secret", SECRET)
        with Database(str(work / "embedded")) as db:
            db.create_table("lineitem", schema, partitioning)
            local = db.table("lineitem")
            start = time.perf_counter()
            for batch in data.to_batches(max_chunksize=WRITE_BATCH):
                local.insert(batch)
            embedded_write = time.perf_counter() - start
            local.flush()
            embedded, rows = timed_runs(args.runs, lambda: local.scan().read_all())
            assert rows == data.num_rows
        servers = [TServerProcess(work / f"ts{i}", work / "secret") for i in range(args.tablets)]
        try:
            with TabletServerPool(secret=SECRET, timeout=300) as session:
                tablets = []
                for i, part in enumerate(create_partitions(partitioning, schema)):
                    text = TabletPartition.of(partitioning, part).to_json()
                    request = CreateTablet(
                        f"lineitem-{i}",
                        "lineitem",
                        "lineitem",
                        text,
                        json.dumps(schema.to_dict()),
                        1,
                    )
                    session.create_tablet(servers[i].address, request)
                    tablets.append(TabletLocation(f"lineitem-{i}", text, "", servers[i].address))
                remote = RemoteTable(
                    "lineitem", schema, partitioning, MetaCache(Locations(tablets)), session
                )
                start = time.perf_counter()
                for batch in data.to_batches(max_chunksize=WRITE_BATCH):
                    assert not remote.insert(batch).errors
                cluster_write = time.perf_counter() - start
                remote.flush()
                cluster, rows = timed_runs(args.runs, lambda: remote.scan().read_all())
                assert rows == data.num_rows
        finally:
            for s in servers:
                s.stop()
    print(f"{'':<26} {'embedded':>10} {'cluster':>10} {'ratio':>7}")
    print(
        f"{'write (s)':<26} {embedded_write:>10.2f} {cluster_write:>10.2f}"
        f" {cluster_write / embedded_write:>6.2f}x"
    )
    for label, e, c in (
        ("full scan, first (s)", embedded[0], cluster[0]),
        (f"full scan, best of {args.runs} (s)", min(embedded), min(cluster)),
    ):
        print(f"{label:<26} {e:>10.3f} {c:>10.3f} {c / e:>6.2f}x")
    e, c = min(embedded), min(cluster)
    print(f"{'full scan (M rows/s)':<26} {rows / e / 1e6:>10.2f} {rows / c / 1e6:>10.2f}")


if __name__ == "__main__":
    main()
