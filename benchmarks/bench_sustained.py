"""Sustained mixed load with the maintenance manager on: does the tablet stay healthy?

Two loads, each for ``--rows`` seconds (default 600: ten minutes), one writer thread
against one tablet attached to a ``MaintenanceManager`` (poll 100 ms, memory limit
256 MiB). Each round writes a batch of 2,000 INSERTs of new keys and a batch of 2,000
UPDATEs of random existing keys. The new keys are

* ``sequential``: increasing (time series, Kudu's intended case): flushed rowsets do
  not overlap, so maintenance is flushes, delta flushes and delta compactions;
* ``random``: spread over the whole key space (the worst case for Kudu's design):
  every flush overlaps every rowset, so merging compactions run back to back, each
  rewriting up to the compaction budget.

Flushes are scaled down so that maintenance has work all the time (at 4 MiB or 10 s,
against 64 MiB / 120 s by default) and history is kept 30 s (so history GC runs too).
Rowset size (32 MiB) and compaction budget (256 MiB) are the defaults: a batch of
random keys touches every rowset, so shrinking rowsets would multiply the write path's
per-rowset work and measure that instead of the maintenance (an earlier version used
4 MiB rowsets; see docs/DECISIONS.md).

Every tenth of the run it samples rows written per second, the writer thread's CPU time
per row, DiskRowSets, REDO and UNDO DeltaFiles, memory held and disk bytes. Reported:
throughput of the last tenth against the first (a flat line is 1.0x; the rival column
is the first tenth), the same for the writer's CPU per row (on this shared 2-core
machine rows/s also moves with what else runs; CPU per row shows what a row costs the
writer itself), the largest
rowset and delta-file counts seen, and what the maintenance thread ran. At the end the
row count is checked against the keys inserted. ``tests/storage/test_sustained.py``
(slow marker) runs the same load and asserts only what is not a time: counts stay
bounded and no row is lost.
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from benchmarks.common import Config, Goal, Result, fresh_dir, log, workdir
from kudusql.common.options import TabletOptions
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.storage.tablet.maintenance import MaintenanceManager
from kudusql.storage.tablet.tablet import Tablet

NAME = "sustained"
DEFAULT_SECONDS = 600
BATCH = 2_000
SAMPLES = 10
OPTIONS = TabletOptions(
    flush_threshold_bytes=4 << 20,
    flush_threshold_s=10,
    history_max_age_s=30,
    file_grace_s=0,
    sync=False,
)
SCHEMA = Schema.build(
    [
        ColumnSchema("k", DataType.parse("INT64"), nullable=False),
        ColumnSchema("a", DataType.parse("INT64")),
        ColumnSchema("b", DataType.parse("DOUBLE")),
        ColumnSchema("s", DataType.parse("STRING")),
    ],
    ["k"],
)


@dataclass
class Sample:
    at_s: float
    rows_per_s: float
    rowsets: int
    redo_files: int
    undo_files: int
    redo_files_per_rowset: int  # the most REDO files of any one rowset
    memory_bytes: int
    disk_bytes: int
    raw_bytes: int  # the DiskRowSets' uncompressed size: what rowsets roll on
    # the writer thread's CPU time per row written in this tenth (the harness's own
    # batch making included): unlike rows/s, not lowered by other load on the machine
    writer_cpu_us_per_row: float = 0.0


@dataclass
class SustainedRun:
    samples: list[Sample] = field(default_factory=list)
    ops: dict[str, int] = field(default_factory=dict)
    op_seconds: dict[str, float] = field(default_factory=dict)  # maintenance time per op
    rows_expected: int = 0
    rows_found: int = 0
    errors: list[str] = field(default_factory=list)


def _counts(t: Tablet) -> tuple[int, int, int, int, int]:
    """DiskRowSets, their REDO and UNDO files, the most REDO files of one rowset, and
    their raw bytes."""
    info = [r for r in t.rowsets_info() if r["kind"] == "diskrowset"]
    redo = [r["redo_files"] for r in info]
    undo = sum(r["undo_files"] for r in info)
    raw = sum(r["raw_bytes"] for r in info)
    return len(info), sum(redo), undo, max(redo, default=0), raw


KEY_PATTERNS = ("sequential", "random")


def sustained(path: str, seconds: float, seed: int = 42, keys: str = "random") -> SustainedRun:
    """Run the load for ``seconds`` on a new tablet at ``path``; ``keys`` is one of
    ``KEY_PATTERNS`` (see the module docstring)."""
    if keys not in KEY_PATTERNS:
        raise ValueError(f"keys must be one of {KEY_PATTERNS}, not {keys!r}")
    rng = np.random.default_rng(seed)
    # history: every op of the run, not the manager's default last 1,000
    mm = MaintenanceManager(memory_limit_bytes=256 << 20, poll_interval_s=0.1, history=1 << 20)
    t = Tablet.create(path, SCHEMA, OPTIONS)
    t.attach(mm)
    out = SustainedRun()
    inserted = np.zeros(1 << 16, dtype=np.int64)  # random keys inserted so far: [:nkeys]
    nkeys = 0
    start = time.monotonic()
    next_sample, written_since, last = seconds / SAMPLES, 0, start
    cpu_last = time.thread_time()
    try:
        while True:
            now = time.monotonic() - start
            if now >= next_sample or now >= seconds:
                rowsets, redo, undo, redo_one, raw = _counts(t)
                st = t.stats()
                rate = written_since / max(1e-9, time.monotonic() - last)
                cpu_now = time.thread_time()
                cpu_per_row = (cpu_now - cpu_last) * 1e6 / max(1, written_since)
                out.samples.append(
                    Sample(
                        now,
                        rate,
                        rowsets,
                        redo,
                        undo,
                        redo_one,
                        t.memory_bytes(),
                        st["disk_bytes"],
                        raw,
                        cpu_per_row,
                    )
                )
                written_since, last, cpu_last = 0, time.monotonic(), time.thread_time()
                next_sample += seconds / SAMPLES
                if now >= seconds:
                    break
            if keys == "random":
                new = np.unique(rng.integers(0, 1 << 62, BATCH, dtype=np.int64))
            else:
                new = np.arange(nkeys, nkeys + BATCH, dtype=np.int64)
            res = t.insert(
                pa.table(
                    {
                        "k": new,
                        "a": rng.integers(0, 1000, len(new)),
                        "b": rng.random(len(new)),
                        "s": pa.array([f"v{x % 9973}" for x in new.tolist()]),
                    }
                )
            )
            if keys == "random":
                if nkeys + len(new) > len(inserted):  # doubling: the harness stays O(batch)
                    inserted = np.concatenate([inserted, np.zeros_like(inserted)])
                inserted[nkeys : nkeys + len(new)] = new
            nkeys += len(new)
            out.errors.extend(str(e) for e in res.errors[:3])
            # Sequential keys are 0 .. nkeys-1: drawn directly, with no array of every
            # key inserted (gathering from it, and doubling it, grew with the data and
            # was counted against the tablet: ~0.4 ms a round after 300 s).
            picks = rng.integers(0, nkeys, BATCH)
            upd = np.unique(inserted[picks] if keys == "random" else picks)
            t.update(pa.table({"k": upd, "a": rng.integers(0, 1000, len(upd))}))
            written_since += len(new) + len(upd)
    finally:
        mm.stop()
    out.ops = dict(collections.Counter(r.op for r in mm.history()))
    for rec in mm.history():
        out.op_seconds[rec.op] = round(out.op_seconds.get(rec.op, 0.0) + rec.duration_s, 1)
    # sequential keys are distinct by construction (a sort of hundreds of millions of
    # keys took minutes and gigabytes)
    out.rows_expected = nkeys if keys == "sequential" else len(np.unique(inserted[:nkeys]))
    out.rows_found = t.count_rows()
    t.close()
    return out


def run(cfg: Config) -> Result:
    seconds = float(cfg.rows or DEFAULT_SECONDS)
    res = Result(
        NAME,
        f"{seconds:g} s of mixed inserts and updates per key pattern, maintenance on",
        "the same run's first tenth (a flat line is 1.0x)",
    )
    for keys in KEY_PATTERNS:
        with workdir(cfg, NAME) as wd:
            path = str(fresh_dir(wd, f"tablet-{keys}"))
            log(f"sustained load, {keys} keys, for {seconds:g} s")
            r = sustained(path, seconds, cfg.seed, keys)
        _report(res, keys, r)
    return res


def _report(res: Result, keys: str, r: SustainedRun) -> None:
    first, lastp = r.samples[0], r.samples[-1]
    k = f"{keys} keys: "
    res.add(k + "throughput, last tenth", lastp.rows_per_s, first.rows_per_s, unit="rows/s")
    res.add(k + "throughput ratio last/first", lastp.rows_per_s / first.rows_per_s, 1.0, unit="x")
    res.add(
        k + "writer CPU per row, last tenth",
        lastp.writer_cpu_us_per_row,
        first.writer_cpu_us_per_row,
        unit="us",
    )
    res.add(k + "DiskRowSets, max seen", max(s.rowsets for s in r.samples), None, unit="")
    res.add(k + "REDO files, max seen", max(s.redo_files for s in r.samples), None, unit="")
    res.add(k + "UNDO files, max seen", max(s.undo_files for s in r.samples), None, unit="")
    res.add(
        k + "REDO files of one rowset, max seen",
        max(s.redo_files_per_rowset for s in r.samples),
        None,
        unit="",
    )
    res.add(k + "rows lost", r.rows_expected - r.rows_found, None, unit="", goal=Goal(max_value=1))
    res.info[f"{keys}_samples"] = [s.__dict__ for s in r.samples]
    res.info[f"{keys}_maintenance_ops"] = r.ops
    res.notes.append(
        f"{keys} keys, samples (s, rows/s, writer CPU us/row, rowsets, redo, undo, most "
        "redo of a rowset, MiB mem, MiB disk, MiB raw): "
        + "; ".join(
            f"{s.at_s:.0f} {s.rows_per_s:.0f} {s.writer_cpu_us_per_row:.2f} {s.rowsets} "
            f"{s.redo_files} {s.undo_files} {s.redo_files_per_rowset} "
            f"{s.memory_bytes / 2**20:.1f} {s.disk_bytes / 2**20:.1f} "
            f"{s.raw_bytes / 2**20:.1f}"
            for s in r.samples
        )
    )
    res.notes.append(f"{keys} keys, maintenance ops run: {r.ops}, seconds: {r.op_seconds}")


def summary(r: SustainedRun) -> dict[str, Any]:
    """The figures the slow test checks."""
    return {
        "max_rowsets": max(s.rowsets for s in r.samples),
        "max_redo": max(s.redo_files for s in r.samples),
        "max_undo": max(s.undo_files for s in r.samples),
        "max_redo_per_rowset": max(s.redo_files_per_rowset for s in r.samples),
        "disk_bytes": r.samples[-1].disk_bytes,
        # Rowsets beyond twice what the data needs at the target size (rowsets roll on
        # raw bytes, so compressed disk bytes would undercount the need).
        "excess_rowsets": max(
            s.rowsets - 2 * s.raw_bytes / OPTIONS.rowset_target_bytes for s in r.samples
        ),
    }
