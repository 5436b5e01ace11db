"""A process that runs one DDL statement and is SIGKILLed at an exact point inside it.

Usage: ``python -m tests.support.ddl_kill DIR OP POINT PATH_CONTAINS SKIP``

Opens the database at DIR (made by ``make``), arms ``faults.inject(POINT, kill=True)``
on paths containing PATH_CONTAINS after SKIP matching calls, and runs OP: ``create``
(table ``v``), ``add_range`` (``[2000, 3000)`` on ``t``), ``drop`` (table ``u``) or
``drop_range`` (``[0, 1000)`` of ``t``). Exits 0 if the fault never fired.
"""

from __future__ import annotations

import sys

import pyarrow as pa

from kudusql.common.options import TabletOptions
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.storage.fs import faults
from kudusql.storage.tables.alter import AddRangePartition, DropRangePartition
from kudusql.storage.tables.database import Database
from kudusql.storage.tables.partition import HashDimension, PartitionSchema, RangeBounds

SCHEMA = Schema.build(
    [ColumnSchema("k", DataType.parse("BIGINT")), ColumnSchema("v", DataType.parse("BIGINT"))],
    ["k"],
)
OPTIONS = TabletOptions(rows_per_page=16, history_max_age_s=3600)


def make(path: str) -> None:
    """Tables ``t`` (hash 2 x ranges [0, 1000) and [1000, 2000): 4 tablets) and ``u``
    (hash 3), each holding keys 0..1999 with v = k, ``t`` partly flushed."""
    with Database(path, OPTIONS, maintenance=False) as db:
        ranges = [RangeBounds((0,), (1000,)), RangeBounds((1000,), (2000,))]
        t = db.create_table(
            "t", SCHEMA, PartitionSchema.create(SCHEMA, [HashDimension(("k",), 2)], ["k"], ranges)
        )
        u = db.create_table("u", SCHEMA, PartitionSchema.create(SCHEMA, [HashDimension(("k",), 3)]))
        keys = pa.array(range(2000), pa.int64())
        for x in (t, u):
            x.insert(pa.table({"k": keys, "v": keys}))
        t.flush()


def main() -> None:
    path, op, point, contains, skip = sys.argv[1:6]
    db = Database(path, OPTIONS, maintenance=False)
    faults.inject(point, path_contains=contains, skip=int(skip), kill=True)
    if op == "create":
        db.create_table("v", SCHEMA, PartitionSchema.create(SCHEMA, [HashDimension(("k",), 2)]))
    elif op == "add_range":
        db.alter_table("t", [AddRangePartition(RangeBounds((2000,), (3000,)))])
    elif op == "drop":
        db.drop_table("u")
    elif op == "drop_range":
        db.alter_table("t", [DropRangePartition(RangeBounds((0,), (1000,)))])
    else:
        raise SystemExit(f"unknown op {op}")
    db.close()


if __name__ == "__main__":
    main()
