"""A writer process for crash tests: applies deterministic random batches to a tablet
and prints ``ACK <batch id> <timestamp>`` after each write returns (fsync policy
``batch``), running maintenance now and then, until it is killed.

Usage::

    python -m tests.support.crash_writer DIR START_BATCH SEED
        [--workload basic|compact] [--background] [--pause-at N]

``basic`` (the default) flushes and delta-flushes now and then. ``compact`` writes a
workload that leaves overlapping rowsets (keys spread over the whole key range between
flushes, updates and deletes of existing keys, re-inserts of deleted keys: ghosts and
duplicate keys for merging compactions to fold) and runs, at random, flushes, delta
flushes, minor and major delta compactions of random rowsets, merging compactions of
random subsets of rowsets and of the policy's choice, history GC and whole maintenance
passes. Each maintenance operation is announced with ``BEGIN <op> <args>`` and
``END <op> <seconds> <result>`` lines so that the test can aim its SIGKILL inside one.

``--background`` runs the maintenance in a second thread while the main thread keeps
writing (mutations then reach stores while they are being flushed or compacted, and
the maintenance thread reads the rowsets while the main thread writes).
``--pause-at N`` makes the process stop at the N-th durability point (an fsync of a new
file, a directory fsync or the superblock rename: the points ``kudusql.storage.fs.faults``
sees) met inside a compaction or GC operation, after printing ``PAUSED <op> <point>
<file>``: the test then kills it exactly there.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from kudusql.common.options import TabletOptions
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.storage.fs import faults
from kudusql.storage.tablet.compaction_worker import CompactionWorker
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

# The compaction workload: small rowsets (flush and compaction outputs roll at 8 KiB, so
# a merge writes several rowsets) and history that never becomes ancient, so that every
# acknowledged snapshot stays readable and GC finds nothing to drop.
COMPACT_OPTIONS = OPTIONS.with_(rowset_target_bytes=8 * 1024, history_max_age_s=10 * 24 * 3600)
COMPACT_KEYS = 1000
# Operation weights: about twice as many inserts/upserts as deletes, so that about two
# thirds of the keys are live; deletes and updates hit existing keys (those that miss
# are row errors or ignored), inserts hit deleted keys (re-inserts).
COMPACT_OP_WEIGHTS = {
    "INSERT": 20,
    "INSERT_IGNORE": 10,
    "UPSERT": 15,
    "UPSERT_IGNORE": 5,
    "UPDATE": 10,
    "UPDATE_IGNORE": 15,
    "DELETE": 5,
    "DELETE_IGNORE": 20,
}

#: Maintenance operations the compaction test aims its kills at.
COMPACTION_OPS = frozenset(
    {
        "minor",
        "major",
        "merge",
        "merge_policy",
        "gc_undo",
        "gc_deleted",
        "run_maintenance",
    }
)
#: Durability points (``faults.check`` calls) where ``--pause-at`` may stop the process.
PAUSE_POINTS = frozenset({"fsync", "fsync_dir", "rename"})

Batch = tuple[list[str], list[dict[str, Any]], list[str]]


def batch(seed: int, batch_id: int) -> Batch:
    """The batch with this id: (ops, rows, non-key columns present). Deterministic."""
    r = random.Random(seed * 1_000_003 + batch_id)
    if r.random() < 0.4:  # a few rows with one operation: the tablet's row path
        n = r.randint(1, 8)
        ops = [r.choice(OPS)] * n
    else:
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


def compact_batch(seed: int, batch_id: int) -> Batch:
    """A batch of the compaction workload (keys uniform over the key range). Deterministic."""
    r = random.Random(seed * 1_000_033 + batch_id)
    n = r.randint(1, 40)
    ops = r.choices(list(COMPACT_OP_WEIGHTS), weights=list(COMPACT_OP_WEIGHTS.values()), k=n)
    rows = [
        {
            "k": r.randrange(COMPACT_KEYS),
            "v": None if r.random() < 0.2 else r.randrange(1000),
            "s": None if r.random() < 0.2 else f"s{batch_id}-{i}",
        }
        for i in range(n)
    ]
    present = [c for c in ("v", "s") if r.random() < 0.85]
    return ops, rows, present


WORKLOADS: dict[str, tuple[Callable[[int, int], Batch], TabletOptions]] = {
    "basic": (batch, OPTIONS),
    "compact": (compact_batch, COMPACT_OPTIONS),
}


def table(ops: list[str], rows: list[dict[str, Any]], present: list[str]) -> pa.Table:
    cols: dict[str, pa.Array[Any]] = {"k": pa.array([x["k"] for x in rows], pa.int64())}
    if "v" in present:
        cols["v"] = pa.array([x["v"] for x in rows], pa.int64())
    if "s" in present:
        cols["s"] = pa.array([x["s"] for x in rows], pa.string())
    cols["op"] = pa.array(ops)
    return pa.table(cols)


def write(
    t: Tablet, ops: list[str], rows: list[dict[str, Any]], present: list[str], batch_id: int
) -> Any:
    """Write a batch: one operation for all rows as Arrow (``write``) or as Python values
    (``write_rows``), alternately; per-row operations through ``op_column``."""
    if len(set(ops)) > 1:
        return t.write(table(ops, rows, present), op_column="op")
    if batch_id % 2:
        return t.write(table(ops, rows, present).drop_columns(["op"]), ops[0])
    names = ["k", *present]
    return t.write_rows(names, [[x[c] for c in names] for x in rows], ops[0])


_out_lock = threading.Lock()


def emit(line: str) -> None:
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


class Maintenance:
    """Random maintenance operations of the compaction workload, each announced.

    In background mode they all run alongside writes, reading the rowsets lock-free
    (which is how ``test_lazy_deleted_rows_bitmap_races_with_a_delete`` was found).
    """

    # (operation, weight)
    WEIGHTS = (
        ("flush", 22),
        ("flush_deltas", 20),
        ("minor", 14),
        ("major", 14),
        ("merge", 16),
        ("merge_policy", 6),
        ("gc_undo", 2),
        ("gc_deleted", 2),
        ("run_maintenance", 4),
    )

    def __init__(self, t: Tablet, r: random.Random, pause_at: int) -> None:
        self.t = t
        self.r = r
        self.current: str | None = None  # the compaction or GC operation running
        self._pause_at = pause_at
        self._points = 0
        self._lock = threading.Lock()
        # A third of the delta compactions and merges write their files in a worker
        # process, which dies with this one (SIGKILLed by the test).
        self.worker = CompactionWorker()
        if pause_at > 0:
            self._install_pause()

    def _install_pause(self) -> None:
        original = faults.check
        wal = os.sep + "wal" + os.sep
        root = self.t.path

        def check(point: str, path: str) -> None:
            original(point, path)
            op = self.current
            if op is None or point not in PAUSE_POINTS or wal in path:
                return
            with self._lock:
                self._points += 1
                hit = self._points == self._pause_at
            if hit:
                emit(f"PAUSED {op} {point} {os.path.relpath(path, root)}")
                time.sleep(3600)  # until the test's SIGKILL

        faults.check = check  # type: ignore[assignment]

    def _rowsets(self) -> list[dict[str, Any]]:
        return self.t.rowsets_info()

    def step(self) -> None:
        t, r = self.t, self.r
        op = r.choices([o for o, _ in self.WEIGHTS], weights=[w for _, w in self.WEIGHTS])[0]
        info = [x for x in self._rowsets() if x["kind"] == "diskrowset"]
        ids = [x["id"] for x in info]
        run: Callable[[], object]
        arg = ""
        if op == "flush":
            run = t.flush
        elif op == "flush_deltas":
            run = t.flush_deltas
        elif op in ("minor", "major"):
            if not ids:
                return
            need = 2 if op == "minor" else 1
            likely = [x["id"] for x in info if x["redo_files"] >= need]
            rid = r.choice(likely) if likely and r.random() < 0.85 else r.choice(ids)
            worker = self.worker if r.random() < 1 / 3 else None
            arg = f"{rid}{' worker' if worker else ''}"
            if op == "minor":
                run = lambda: t.minor_delta_compaction(rid, worker=worker)  # noqa: E731
            else:
                run = lambda: t.major_delta_compaction(rid, worker=worker)  # noqa: E731
        elif op == "merge":
            if not ids:
                return
            chosen = r.sample(ids, r.randint(1, min(len(ids), 6)))
            worker = self.worker if r.random() < 1 / 3 else None
            arg = ",".join(map(str, chosen)) + (" worker" if worker else "")
            run = lambda: t.compact(chosen, worker=worker)  # noqa: E731
        elif op == "merge_policy":
            run = t.compact
        elif op == "gc_undo":
            run = t.gc_undo
        elif op == "gc_deleted":
            run = t.gc_deleted_rowsets
        else:
            run = t.run_maintenance
        emit(f"BEGIN {op} {arg}".rstrip())
        if op in COMPACTION_OPS:
            self.current = op
        t0 = time.perf_counter()
        try:
            result = run()
        finally:
            self.current = None
        emit(f"END {op} {time.perf_counter() - t0:.6f} {result}")


def _background(m: Maintenance, r: random.Random) -> None:
    try:
        while True:
            time.sleep(r.uniform(0.0, 0.01))
            m.step()
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(3)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("path")
    p.add_argument("start", type=int)
    p.add_argument("seed", type=int)
    p.add_argument("--workload", choices=sorted(WORKLOADS), default="basic")
    p.add_argument("--background", action="store_true")
    p.add_argument("--pause-at", type=int, default=0)
    a = p.parse_args()
    path, start, seed = a.path, a.start, a.seed
    make_batch, options = WORKLOADS[a.workload]
    if os.path.exists(os.path.join(path, "tablet.meta")):
        t = Tablet.open(path, options)
    else:
        t = Tablet.create(path, SCHEMA, options)
    r = random.Random(seed + start)
    m = None
    if a.workload == "compact":
        m = Maintenance(t, random.Random(seed * 31 + start), a.pause_at)
    emit("READY")
    if m is not None and a.background:
        threading.Thread(target=_background, args=(m, random.Random(start)), daemon=True).start()
    b = start
    while True:
        ops, rows, present = make_batch(seed, b)
        res = write(t, ops, rows, present, b)
        emit(f"ACK {b} {res.timestamp}")
        b += 1
        x = r.random()
        if m is not None:
            if not a.background and x < 0.3:
                m.step()
        elif x < 0.08:
            t.flush()
        elif x < 0.16:
            t.flush_deltas()


if __name__ == "__main__":
    main()
