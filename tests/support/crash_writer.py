"""A writer process for crash tests: applies deterministic random batches to a tablet
and prints ``ACK <batch id> <timestamp>`` after each write returns (fsync policy
``batch``), flushing and delta-flushing now and then, until it is killed.

Usage: python -m tests.support.crash_writer DIR START_BATCH SEED
"""

from __future__ import annotations

import os
import random
import sys
from typing import Any

import pyarrow as pa

from kudusql.common.options import TabletOptions
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.storage.tablet.tablet import Tablet
from tests.support.model import OPS

SCHEMA = Schema.build(
    [
        ColumnSchema("k", DataType.parse("BIGINT"), nullable=False),
        ColumnSchema("v", DataType.parse("BIGINT")),
        ColumnSchema("s", DataType.parse("STRING")),
    ],
    ["k"],
)
OPTIONS = TabletOptions(
    rows_per_page=16,
    wal_fsync="batch",
    history_max_age_s=3600,
    file_grace_s=0.0,
    wal_segment_bytes=64 * 1024,
)
KEYS = 300


def batch(seed: int, batch_id: int) -> tuple[list[str], list[dict[str, Any]], list[str]]:
    """The batch with this id: (ops, rows, non-key columns present). Deterministic."""
    r = random.Random(seed * 1_000_003 + batch_id)
    n = r.randint(1, 60)
    ops = [r.choice(OPS) for _ in range(n)]
    rows = [
        {
            "k": r.randrange(KEYS),
            "v": r.choice([None, r.randrange(1000)]),
            "s": r.choice([None, f"s{batch_id}-{i}"]),
        }
        for i in range(n)
    ]
    present = [c for c in ("v", "s") if r.random() < 0.8]
    return ops, rows, present


def table(ops: list[str], rows: list[dict[str, Any]], present: list[str]) -> pa.Table:
    cols = {"k": pa.array([x["k"] for x in rows], pa.int64())}
    if "v" in present:
        cols["v"] = pa.array([x["v"] for x in rows], pa.int64())
    if "s" in present:
        cols["s"] = pa.array([x["s"] for x in rows], pa.string())
    cols["op"] = pa.array(ops)
    return pa.table(cols)


def main() -> None:
    path, start, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if os.path.exists(os.path.join(path, "tablet.meta")):
        t = Tablet.open(path, OPTIONS)
    else:
        t = Tablet.create(path, SCHEMA, OPTIONS)
    r = random.Random(seed + start)
    print("READY", flush=True)
    b = start
    while True:
        ops, rows, present = batch(seed, b)
        res = t.write(table(ops, rows, present), op_column="op")
        print(f"ACK {b} {res.timestamp}", flush=True)
        b += 1
        x = r.random()
        if x < 0.08:
            t.flush()
        elif x < 0.16:
            t.flush_deltas()


if __name__ == "__main__":
    main()
