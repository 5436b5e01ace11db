"""A writer process for database crash tests: DDL and multi-tablet writes, until killed.

Usage: ``python -m tests.support.db_crash_writer DIR SEED``

Each step prints ``BEGIN <json op>`` before it starts and ``ACK <json result>`` once it
returned (WAL fsync policy ``batch``: an acknowledged write is durable). Ops: create a
table (hash, range or hash+range partitioned), drop it, add a column, add or drop a range
partition, upsert or delete a batch spread over every tablet, flush. A write's result
lists the keys it applied (keys outside every range fail per row).
"""

from __future__ import annotations

import json
import random
import sys
from typing import Any

import pyarrow as pa

from kudusql.common.options import TabletOptions
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.storage.tables.alter import AddColumn, AddRangePartition, DropRangePartition
from kudusql.storage.tables.database import Database
from kudusql.storage.tables.partition import HashDimension, PartitionSchema, RangeBounds

SCHEMA = Schema.build(
    [ColumnSchema("k", DataType.parse("BIGINT")), ColumnSchema("v", DataType.parse("BIGINT"))],
    ["k"],
)
OPTIONS = TabletOptions(rows_per_page=16, wal_fsync="batch", history_max_age_s=3600)
KEYS = 3000  # ranges cover [0, 2000) at creation; [2000, 3000) may be added
RANGES = [(0, 1000), (1000, 2000), (2000, 3000)]
SHAPES = ("hash", "range", "hash_range")


def partitioning(shape: str) -> PartitionSchema:
    dims = [HashDimension(("k",), 3)] if shape != "range" else []
    if shape == "hash":
        return PartitionSchema.create(SCHEMA, dims)
    bounds = [RangeBounds((lo,), (hi,)) for lo, hi in RANGES[:2]]
    return PartitionSchema.create(SCHEMA, dims, ["k"], bounds)


def choose(db: Database, rng: random.Random, step: int) -> dict[str, Any]:
    names = db.table_names()
    if len(names) < 2 or rng.random() < 0.04:
        free = [f"t{i}" for i in range(6) if f"t{i}" not in names]
        if free:
            return {"op": "create", "table": rng.choice(free), "shape": rng.choice(SHAPES)}
    name = rng.choice(names)
    t = db.table(name)
    r = rng.random()
    if r < 0.03 and len(names) > 1:
        return {"op": "drop", "table": name}
    if r < 0.07:
        return {"op": "add_column", "table": name, "column": f"c{step}"}
    if r < 0.12 and t.partition_schema.range_columns:
        lo, hi = rng.choice(RANGES)
        have = any(b.lower == (lo,) for b in t.partition_schema.range_bounds)
        return {"op": "drop_range" if have else "add_range", "table": name, "lo": lo, "hi": hi}
    if r < 0.18:
        return {"op": "flush", "table": name}
    keys = sorted(rng.sample(range(KEYS), rng.randint(1, 60)))
    if r < 0.3:
        return {"op": "delete", "table": name, "keys": keys}
    return {"op": "upsert", "table": name, "keys": keys, "v": step}


def run(db: Database, op: dict[str, Any]) -> dict[str, Any]:
    kind, name = op["op"], op["table"]
    if kind == "create":
        db.create_table(name, SCHEMA, partitioning(op["shape"]))
        return {}
    if kind == "drop":
        db.drop_table(name)
        return {}
    if kind == "add_column":
        db.alter_table(name, [AddColumn(ColumnSchema(op["column"], DataType.parse("INT32")))])
        return {}
    bounds = RangeBounds((op.get("lo"),), (op.get("hi"),))
    if kind == "add_range":
        db.alter_table(name, [AddRangePartition(bounds)])
        return {}
    if kind == "drop_range":
        db.alter_table(name, [DropRangePartition(bounds)])
        return {}
    t = db.table(name)
    if kind == "flush":
        t.flush()
        return {}
    keys = pa.array(op["keys"], pa.int64())
    if kind == "upsert":
        res = t.upsert(pa.table({"k": keys, "v": pa.array([op["v"]] * len(keys), pa.int64())}))
    else:
        res = t.delete(pa.table({"k": keys}))
    failed = {e.index for e in res.errors}
    return {"applied": [k for i, k in enumerate(op["keys"]) if i not in failed]}


def main() -> None:
    path, seed = sys.argv[1], int(sys.argv[2])
    rng = random.Random(seed)
    db = Database(path, OPTIONS, maintenance=False)
    step = 0
    while True:
        step += 1
        op = choose(db, rng, seed * 100_000 + step)
        print("BEGIN", json.dumps(op), flush=True)
        print("ACK", json.dumps(run(db, op)), flush=True)


if __name__ == "__main__":
    main()
