"""Run kudusql's benchmarks: ``python -m benchmarks [name ...] [--sf 1] [--rows N]``.

Each benchmark prints a table (ours, rival, ratio ours/rival, goal, PASS/MISS) and
writes its results to ``benchmarks/results/<name>.json``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import traceback

from benchmarks.common import Config

BENCHMARKS = {
    "bulk_insert": "benchmarks.bench_bulk_insert",
    "scan": "benchmarks.bench_scan",
    "point_lookup": "benchmarks.bench_point_lookup",
    "scan_deltas": "benchmarks.bench_scan_deltas",
    "wal": "benchmarks.bench_wal",
    "compaction": "benchmarks.bench_compaction",
    "space": "benchmarks.bench_space",
    "sustained": "benchmarks.bench_sustained",
    "tables": "benchmarks.bench_tables",
    "sql": "benchmarks.bench_sql",
    "spark": "benchmarks.bench_spark",
}


def parse_args(argv: list[str] | None) -> tuple[list[str], Config]:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="kudusql benchmarks, each against a rival on the same data.",
    )
    p.add_argument(
        "names",
        nargs="*",
        metavar="name",
        help=f"benchmarks to run (default all): {', '.join(BENCHMARKS)}",
    )
    p.add_argument("--sf", type=float, default=1.0, help="TPC-H scale factor (default 1)")
    p.add_argument(
        "--rows",
        type=int,
        default=None,
        help="row count: first N lineitem rows (bulk_insert, scan), table size "
        "(point_lookup, default 1M), N synthetic rows instead of lineitem (scan_deltas), "
        "timed single-row inserts (wal, default 10,000), rows loaded (space, default 1M)",
    )
    p.add_argument(
        "--reps",
        type=int,
        default=None,
        help="timed repetitions (default: 3 for bulk_insert, 5 for the scans)",
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="also cProfile one run of each (saved in the JSON too)",
    )
    p.add_argument("--tmpdir", default=None, help="where temporary tablets go")
    a = p.parse_args(argv)
    names = a.names or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        p.error(f"unknown benchmark(s) {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}")
    if a.reps is not None and a.reps < 1:
        p.error("--reps must be >= 1")
    cfg = Config(sf=a.sf, rows=a.rows, reps=a.reps, profile=a.profile, tmpdir=a.tmpdir)
    return names, cfg


def main(argv: list[str] | None = None) -> int:
    names, cfg = parse_args(argv)
    failed = []
    for name in names:
        mod = importlib.import_module(BENCHMARKS[name])
        print(f"running {name} ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        try:
            res = mod.run(cfg)
        except Exception:
            traceback.print_exc()
            failed.append(name)
            continue
        res.info["benchmark_wall_s"] = round(time.perf_counter() - t0, 1)
        path = res.save(cfg)
        print(res.format())
        for label, text in res.profiles.items():
            print(f"   profile of {label} (top entries by cumulative time):")
            print("\n".join("     " + line for line in text.splitlines()))
        print(f"   results: {path}\n", flush=True)
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
