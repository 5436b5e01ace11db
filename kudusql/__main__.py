"""``kudusql [PATH]``: open (or create) the embedded default database and show it working.

Until the SQL shell lands (issue 7) this runs a short, real session on the storage
engine: it creates a demo tablet on first use, writes a batch with Kudu's per-row
semantics, flushes, and answers a latest scan, a time-travel scan and a diff scan.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import pyarrow as pa

from kudusql import __version__
from kudusql.common.errors import Error
from kudusql.common.options import TabletOptions
from kudusql.common.predicates import ColumnPredicate
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.storage.tablet.tablet import Tablet

DEFAULT_PATH = "kudusql-data"


def _demo_schema() -> Schema:
    return Schema.build(
        [
            ColumnSchema("id", DataType.parse("BIGINT"), nullable=False),
            ColumnSchema("name", DataType.parse("STRING")),
            ColumnSchema("qty", DataType.parse("INT")),
            ColumnSchema("price", DataType.parse("DECIMAL(12,2)")),
        ],
        ["id"],
    )


def run(path: str, out: object = sys.stdout) -> None:
    def say(*a: object) -> None:
        print(*a, file=out)  # type: ignore[call-overload]

    tdir = os.path.join(path, "demo")
    say(f"kudusql {__version__} — database at {os.path.abspath(path)}")
    if os.path.exists(os.path.join(tdir, "tablet.meta")):
        t = Tablet.open(tdir, TabletOptions())
    else:
        os.makedirs(path, exist_ok=True)
        t = Tablet.create(tdir, _demo_schema(), TabletOptions())
        n = 100_000
        ids = np.arange(n, dtype=np.int64)
        t0 = time.perf_counter()
        t.insert(
            pa.table(
                {
                    "id": ids,
                    "name": pa.array([f"item-{i % 1000}" for i in range(n)]),
                    "qty": pa.array((ids % 50).astype(np.int32)),
                    "price": pa.array(ids % 10_000, pa.int32()).cast(pa.decimal128(12, 2)),
                }
            )
        )
        t.flush()
        say(f"created table 'demo' with {n} rows in {time.perf_counter() - t0:.2f} s")
    try:
        before = t.latest_timestamp()
        res = t.write(
            pa.table(
                {"id": pa.array([1, 1, 10**9], pa.int64()), "qty": pa.array([7, 8, 9], pa.int32())}
            ),
            "UPDATE",
        )
        say(f"UPDATE batch: {res.applied} applied, {len(res.errors)} row error(s)")
        for e in res.errors:
            say(f"  {e}")
        t0 = time.perf_counter()
        rows = t.count_rows()
        say(f"rows now: {rows} (counted in {1000 * (time.perf_counter() - t0):.1f} ms)")
        row = t.lookup((1,))
        old = t.scan(["id", "qty"], [ColumnPredicate.eq("id", 1)], snapshot=before).read_all()
        say(f"row 1 now: {row}; before the update: {old.to_pylist()}")
        diff = t.diff_scan(before, t.latest_timestamp(), ["id", "qty"]).read_all()
        say(f"changed since then: {diff.to_pylist()}")
        for info in t.rowsets_info():
            say(f"  {info['kind']} {info['id']}: {info['rows']} rows")
    finally:
        t.close()
    say("The SQL shell arrives with issue 7; the storage API is kudusql.storage.tablet.Tablet.")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kudusql", description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", default=DEFAULT_PATH, help="database directory")
    args = ap.parse_args(argv)
    try:
        run(args.path)
    except Error as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"error: cannot use {args.path}: {e.strerror or e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
