"""Crash tests with real processes: a writer subprocess applies random batches with the
``batch`` fsync policy and acknowledges each; the test SIGKILLs it at random moments
(including during flushes and delta flushes), reopens the tablet and checks that every
acknowledged batch is there, no batch is partly there, and time travel to the
acknowledged timestamps answers as before the crash.

The compaction variant runs a writer that also runs minor and major delta compactions,
merging compactions and history GC (inline or in a background thread), and aims most
kills inside them: at an exact durability point (the writer stops there and says so), or
a random short delay after the writer announces the operation. After each reopen it also
checks that the rowset directories and files on disk are exactly those the superblock
lists, and that scans (ordered, by key range, point lookups, diff scans) agree with the
model.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pytest

from kudusql.common.errors import OperationalError
from kudusql.common.options import TabletOptions
from kudusql.common.predicates import ColumnPredicate
from kudusql.storage.fs import faults
from kudusql.storage.tablet import metadata
from kudusql.storage.tablet.diskrowset import rowset_dir
from kudusql.storage.tablet.tablet import Tablet
from tests.support import crash_writer as cw
from tests.support.model import ModelColumn, TabletModel
from tests.support.timing import WAIT, scaled

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def _state(t: Tablet, snapshot: int | None = None) -> dict[tuple[Any, ...], dict[str, Any]]:
    out = {}
    for r in t.scan(snapshot=snapshot).read_all().to_pylist():
        out[(r["k"],)] = {"v": r["v"], "s": r["s"]}
    return out


def _copy(m: TabletModel) -> TabletModel:
    c = TabletModel(m.key_names, m.columns)
    c.rows = {k: dict(v) for k, v in m.rows.items()}
    c.history = list(m.history)
    return c


@dataclass
class CrashRun:
    """What the test knows about the tablet across writer processes."""

    path: str
    seed: int
    workload: str = "basic"
    model: TabletModel = field(
        default_factory=lambda: TabletModel(["k"], [ModelColumn("v"), ModelColumn("s")])
    )
    #: Timestamp of every batch known to be applied (acknowledged, or found durable).
    ts_of: dict[int, int] = field(default_factory=dict)
    next_batch: int = 0

    @property
    def options(self) -> TabletOptions:
        return cw.WORKLOADS[self.workload][1]

    def apply(self, model: TabletModel, batch_id: int, ts: int) -> TabletModel:
        ops, rows, present = cw.WORKLOADS[self.workload][0](self.seed, batch_id)
        model.apply(ts, ops, rows, present)
        return model

    def spawn(self, *extra: str) -> subprocess.Popen[str]:
        args = [sys.executable, "-m", "tests.support.crash_writer", self.path]
        args += [str(self.next_batch), str(self.seed), "--workload", self.workload, *extra]
        proc = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=dict(os.environ, PYTHONPATH=ROOT),
        )
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line.strip() != "READY":
            proc.kill()
            _, err = proc.communicate(timeout=scaled(30))
            raise AssertionError(f"the writer did not start: {line!r}\n{err}")
        return proc

    def finish(self, proc: subprocess.Popen[str], lines: list[str]) -> list[str]:
        """Kill the writer (if still running), collect its output, record its ACKs."""
        proc.send_signal(signal.SIGKILL)
        # Read through the pipes' buffered readers, not communicate(): readline() may have
        # read ahead lines that communicate() (which reads the descriptors) would miss.
        assert proc.stdout is not None and proc.stderr is not None
        with proc.stdout, proc.stderr:
            out, err = proc.stdout.read(), proc.stderr.read()
        proc.wait(timeout=scaled(30))
        assert "Traceback" not in err, err
        assert proc.returncode == -signal.SIGKILL, (proc.returncode, err)
        lines = lines + out.splitlines()
        for ln in lines:
            if ln.startswith("ACK"):
                _, b, ts = ln.split()
                assert int(b) == self.next_batch
                self.apply(self.model, self.next_batch, int(ts))
                self.ts_of[self.next_batch] = int(ts)
                self.next_batch += 1
        return lines

    def check_reopened(self, t: Tablet, rng: random.Random) -> None:
        """The tablet holds every acknowledged batch and no partial one; time travel to
        known timestamps answers as before."""
        got = _state(t)
        last = max(self.ts_of.values(), default=0)
        durable = t.meta.max_ts  # the newest timestamp in the WAL or the superblock
        if got != self.model.rows or durable > last:
            # The batch in flight when the process died may have become durable
            # without being acknowledged: then all of it must be there.
            assert durable > last, "the state changed, but no newer write is durable"
            maybe = self.apply(_copy(self.model), self.next_batch, durable)
            assert got == maybe.rows, "state is neither before nor after the in-flight batch"
            self.model = maybe
            self.ts_of[self.next_batch] = durable
            self.next_batch += 1
        for b in rng.sample(sorted(self.ts_of), min(5, len(self.ts_of))):
            snap = self.ts_of[b] + 1
            assert _state(t, snap) == self.model.state_at(snap), b


def run_crashes(tmp_path: Any, kills: int, seed: int) -> None:
    run = CrashRun(str(tmp_path / "tablet"), seed)
    rng = random.Random(seed)
    for _ in range(kills):
        proc = run.spawn()
        time.sleep(rng.uniform(0.02, 0.4))
        run.finish(proc, [])
        t = Tablet.open(run.path, run.options)
        try:
            run.check_reopened(t, rng)
        finally:
            t.close()


def test_sigkill_writer_8_times(tmp_path: Any) -> None:
    run_crashes(tmp_path, kills=8, seed=7)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(8))
def test_sigkill_writer_many_times(tmp_path: Any, seed: int) -> None:
    run_crashes(tmp_path, kills=60, seed=100 + seed)


# -- kills during compactions ---------------------------------------------------------------


def disk_vs_superblock(path: str) -> tuple[list[str], list[str]]:
    """(files or directories on disk the superblock does not list, listed ones missing)."""
    meta = metadata.load(path)
    listed = {rowset_dir(path, m.id): m.file_names() for m in meta.rowsets}
    base = os.path.join(path, "rowsets")
    extra, missing = [], []
    on_disk = {os.path.join(base, n) for n in os.listdir(base)}
    extra += sorted(os.path.relpath(d, path) for d in on_disk - set(listed))
    for d, names in listed.items():
        if not os.path.isdir(d):
            missing.append(os.path.relpath(d, path))
            continue
        files = set(os.listdir(d))
        extra += sorted(os.path.relpath(os.path.join(d, n), path) for n in files - names)
        missing += sorted(os.path.relpath(os.path.join(d, n), path) for n in names - files)
    return extra, missing


def check_scans(run: CrashRun, t: Tablet, rng: random.Random) -> None:
    """Scans other than the full one agree with the model."""
    rows = run.model.rows
    ordered = t.scan(ordered=True).read_all().to_pylist()
    assert [r["k"] for r in ordered] == sorted(k for (k,) in rows)
    assert {(r["k"],): {"v": r["v"], "s": r["s"]} for r in ordered} == rows
    assert t.count_rows() == len(rows)
    lo = rng.randrange(cw.COMPACT_KEYS)
    hi = lo + rng.randrange(1, cw.COMPACT_KEYS // 4)
    preds = [ColumnPredicate.ge("k", lo), ColumnPredicate.lt("k", hi)]
    got = t.scan(["k", "v"], preds, ordered=True).read_all().to_pylist()
    assert got == [{"k": k, "v": rows[(k,)]["v"]} for (k,) in sorted(rows) if lo <= k < hi]
    for k in rng.sample(range(cw.COMPACT_KEYS), 10):
        exp = rows.get((k,))
        assert t.lookup((k,)) == (None if exp is None else {"k": k, **exp}), k
    if len(run.ts_of) >= 2:
        a, b = sorted(rng.sample(sorted(run.ts_of.values()), 2))
        start, end = a + 1, b + 1
        diff: dict[tuple[Any, ...], tuple[Any, bool]] = {}
        for r in t.diff_scan(start, end).read_all().to_pylist():
            assert (r["k"],) not in diff, f"duplicate key {r['k']} in diff scan"
            live = None if r["is_deleted"] else {"v": r["v"], "s": r["s"]}
            diff[(r["k"],)] = (live, r["is_deleted"])
        assert diff == run.model.diff(start, end)


#: Kill delays before a duration has been measured (seconds).
_DEFAULT_DURATION = {"minor": 0.005, "major": 0.01, "merge": 0.05, "run_maintenance": 0.15}


@dataclass
class KillStats:
    kills: int = 0
    #: The operation each kill landed in ("-": between operations), by strategy.
    landed: Counter[str] = field(default_factory=Counter)
    #: Durability point of each paused kill.
    points: Counter[str] = field(default_factory=Counter)
    #: Kills that left files or directories the superblock does not list.
    left_orphans: int = 0
    durations: dict[str, list[float]] = field(default_factory=dict)
    #: Seconds from starting a writer to its death.
    lifetimes: list[float] = field(default_factory=list)

    def inside(self) -> int:
        """Kills that landed inside a compaction or GC operation."""
        return sum(n for k, n in self.landed.items() if k.split(":")[1] in cw.COMPACTION_OPS)

    def delay(self, op: str, rng: random.Random) -> float:
        seen = self.durations.get(op)
        est = statistics.median(seen) * 1.5 if seen else _DEFAULT_DURATION.get(op, 0.02)
        return rng.uniform(0.0, max(est, 0.002))


def _what(rel: str) -> str:
    """What a path relative to the tablet is: the superblock, a directory, a file kind."""
    if rel.startswith(metadata.META_FILE):
        return "superblock"
    parts = rel.split(os.sep)
    if rel == ".":
        return "tablet-dir"
    if len(parts) <= 2:
        return "rowsets-dir" if len(parts) == 1 else "rowset-dir"
    return parts[-1].split(".")[0].rstrip("0123456789") or parts[-1]


def _landed(lines: list[str], stats: KillStats) -> str:
    """The operation the writer was in when it died ("-" if none)."""
    current = "-"
    for ln in lines:
        parts = ln.split() or [""]
        if parts[0] == "BEGIN":
            current = parts[1]
        elif parts[0] == "END":
            current = "-"
            stats.durations.setdefault(parts[1], []).append(float(parts[2]))
        elif parts[0] == "PAUSED":
            stats.points[f"{parts[2]} {_what(parts[3])}"] += 1
            return parts[1]
    return current


def _kill_once(run: CrashRun, rng: random.Random, stats: KillStats) -> str:
    """Run a writer and kill it; returns how (for failure messages)."""
    background = rng.random() < 0.35
    x = rng.random()
    strategy = "pause" if x < 0.45 else "timed" if x < 0.85 else "random"
    extra = ["--background"] if background else []
    if strategy == "pause":
        extra += ["--pause-at", str(rng.randint(1, 40))]
    target = rng.randint(1, 3)  # timed: kill in the target-th compaction or GC operation
    delay = rng.uniform(0.02, 0.5)  # random: kill after this long
    t_spawn = time.monotonic()
    proc = run.spawn(*extra)
    hung = threading.Event()  # the writer printed nothing for seconds: a deadlock?

    def stop_hung_writer() -> None:
        hung.set()
        proc.kill()

    safety = threading.Timer(scaled(20), stop_hung_writer)
    safety.start()
    lines: list[str] = []
    begins = 0
    t0 = time.monotonic()
    try:
        assert proc.stdout is not None
        while True:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line.rstrip("\n"))
            if time.monotonic() - t0 > (delay if strategy == "random" else scaled(8)):
                break
            if strategy == "pause" and line.startswith("PAUSED"):
                break
            if strategy == "timed" and line.startswith("BEGIN"):
                op = line.split()[1]
                if op in cw.COMPACTION_OPS:
                    begins += 1
                    if begins == target:
                        time.sleep(stats.delay(op, rng))
                        break
        lines = run.finish(proc, lines)
    finally:
        safety.cancel()
    assert not hung.is_set(), "the writer stopped making progress:\n" + "\n".join(lines[-20:])
    stats.kills += 1
    stats.lifetimes.append(time.monotonic() - t_spawn)
    mode = "bg" if background else "inline"
    stats.landed[f"{strategy}/{mode}:{_landed(lines, stats)}"] += 1
    shown = [ln for ln in lines if not ln.startswith("ACK")][-10:]
    acks = [ln.split()[1] for ln in lines if ln.startswith("ACK")]
    span = f"ACK {acks[0]}..{acks[-1]}" if acks else "no ACK"
    return f"writer {' '.join(extra)} killed ({strategy}); {span}; last: {shown}"


def run_compaction_crashes(tmp_path: Any, kills: int, seed: int) -> KillStats:
    run = CrashRun(str(tmp_path / "tablet"), seed, workload="compact")
    rng = random.Random(seed)
    stats = KillStats()
    kept = tmp_path / "before-reopen"  # what the last kill left, for a post-mortem
    for i in range(kills):
        how = _kill_once(run, rng, stats)
        shutil.rmtree(kept, ignore_errors=True)
        shutil.copytree(run.path, kept)
        try:
            extra, missing = disk_vs_superblock(run.path)
            assert not missing, f"the superblock lists files that are not there: {missing}"
            stats.left_orphans += bool(extra)
            t = Tablet.open(run.path, run.options)
            try:
                extra, missing = disk_vs_superblock(run.path)
                assert not extra and not missing, f"after reopen: {extra} left, {missing} gone"
                run.check_reopened(t, rng)
                check_scans(run, t, rng)
                if rng.random() < 0.2:  # compact what recovery rebuilt, then look again
                    t.compact([r["id"] for r in t.rowsets_info() if r["kind"] == "diskrowset"])
                    run.check_reopened(t, rng)
            finally:
                t.close()
        except AssertionError as e:
            raise AssertionError(f"kill {i + 1}: {how}; tablet as left: {kept}\n{e}") from e
    return stats


def _report(stats: KillStats) -> str:
    landed = ", ".join(f"{k} {n}" for k, n in sorted(stats.landed.items()))
    points = ", ".join(f"{k} {n}" for k, n in sorted(stats.points.items()))
    return (
        f"{stats.kills} kills, {stats.inside()} inside a compaction or GC, "
        f"{stats.left_orphans} left orphans, writers lived {min(stats.lifetimes):.2f}-"
        f"{max(stats.lifetimes):.2f} s; landed: {landed}; paused at: {points}"
    )


def test_sigkill_writer_during_compactions(tmp_path: Any) -> None:
    stats = run_compaction_crashes(tmp_path, kills=10, seed=11)
    print(_report(stats))
    assert stats.inside() >= stats.kills // 3, _report(stats)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_sigkill_writer_during_compactions_many_times(tmp_path: Any, seed: int) -> None:
    stats = run_compaction_crashes(tmp_path, kills=60, seed=200 + seed)
    print(_report(stats))
    assert stats.inside() >= stats.kills // 3, _report(stats)


# -- regressions for engine bugs the compaction crash test found ------------------------------
# Replay of stores left frozen by a failed flush: a MemRowSet (or DeltaMemStore) left frozen
# by a failed or interrupted flush (a SIGKILL during a background flush while writes went
# on) has a successor that received writes. Replay puts the WAL records of both into one
# store; it used to take the older id (last durable id + 1), so once it was flushed, the
# superblock marked only that id durable and the records naming the newer id were replayed
# again at the following open: deleted rows came back, updates were undone. Fixed in
# 4640e0c (the replayed store takes the newest id it absorbed).


def _rows(t: Tablet) -> list[dict[str, Any]]:
    return t.scan(ordered=True).read_all().to_pylist()


def fail_once(op: Any, path_contains: str) -> None:
    """Run a flush ``op`` with an fsync of a file whose path holds ``path_contains``
    failing: it raises, and leaves its frozen store for the next attempt."""
    faults.inject("fsync", path_contains=path_contains)
    try:
        with pytest.raises(OperationalError):
            op()
    finally:
        faults.clear()


def test_replay_merges_memrowsets_of_a_failed_flush(tmp_path: Any) -> None:
    path = str(tmp_path / "tablet")
    opts = cw.OPTIONS.with_(file_grace_s=3600.0)  # keep WAL segments (the default is 60 s)
    t = Tablet.create(path, cw.SCHEMA, opts)
    t.insert(pa.table({"k": [1], "v": [10]}))  # MemRowSet 0
    fail_once(t.flush, "rowsets")  # MemRowSet 0 stays frozen
    t.insert(pa.table({"k": [2], "v": [20]}))  # MemRowSet 1
    t.close()
    t = Tablet.open(path, opts)  # both MemRowSets are replayed into one
    t.delete(pa.table({"k": [2]}))
    t.flush()
    assert _rows(t) == [{"k": 1, "v": 10, "s": None}]
    t.close()
    t = Tablet.open(path, opts)  # must not replay the insert of k=2 (MemRowSet 1) again
    try:
        assert _rows(t) == [{"k": 1, "v": 10, "s": None}]
    finally:
        t.close()


def test_replay_merges_deltamemstores_of_a_failed_delta_flush(tmp_path: Any) -> None:
    path = str(tmp_path / "tablet")
    opts = cw.OPTIONS.with_(file_grace_s=3600.0)
    t = Tablet.create(path, cw.SCHEMA, opts)
    t.insert(pa.table({"k": [1, 2], "v": [10, 20]}))
    t.flush()
    t.update(pa.table({"k": [1], "v": [11]}))  # DeltaMemStore 0 of the rowset
    fail_once(t.flush_deltas, "redo")  # DeltaMemStore 0 stays frozen
    t.update(pa.table({"k": [2], "v": [21]}))  # DeltaMemStore 1
    t.close()
    t = Tablet.open(path, opts)  # both DeltaMemStores are replayed into one
    t.update(pa.table({"k": [2], "v": [22]}))
    t.flush_deltas()
    assert _rows(t) == [{"k": 1, "v": 11, "s": None}, {"k": 2, "v": 22, "s": None}]
    t.close()
    t = Tablet.open(path, opts)  # must not replay the update to 21 (DeltaMemStore 1)
    try:
        assert _rows(t) == [{"k": 1, "v": 11, "s": None}, {"k": 2, "v": 22, "s": None}]
    finally:
        t.close()


def test_replay_of_a_key_reinserted_while_its_memrowset_was_frozen(tmp_path: Any) -> None:
    """Found by the compaction crash test (a SIGKILL during a background MemRowSet flush
    while a key deleted in it was re-inserted; a failed flush leaves the same state):
    replay rebuilt the frozen MemRowSet and its successor as one, where the key got two
    slots, the live one unreachable for writes (an UPDATE said NotFound, an INSERT made a
    second live copy) and a flush wrote the key twice. Fixed in 4c48fd9."""
    path = str(tmp_path / "tablet")
    t = Tablet.create(path, cw.SCHEMA, cw.OPTIONS)
    t.insert(pa.table({"k": [1], "v": [10]}))
    t.delete(pa.table({"k": [1]}))  # MemRowSet 0: k=1 inserted, then deleted
    fail_once(t.flush, "rowsets")  # MemRowSet 0 stays frozen
    t.insert(pa.table({"k": [1], "v": [11]}))  # a new row of MemRowSet 1
    t.close()
    t = Tablet.open(path, cw.OPTIONS)
    try:
        assert _rows(t) == [{"k": 1, "v": 11, "s": None}]
        res = t.update(pa.table({"k": [1], "v": [12]}))
        assert res.errors == []
        assert _rows(t) == [{"k": 1, "v": 12, "s": None}]
    finally:
        t.close()


def test_lazy_deleted_rows_bitmap_races_with_a_delete(tmp_path: Any) -> None:
    """Pinned: a DiskRowSet built its deleted-rows bitmap lazily without a lock; built by
    a reader while a write deleted a row, the delete's mark was lost (INSERT then said
    AlreadyPresent for an invisible key). Found by the compaction crash test, whose
    background maintenance thread called ``rowsets_info()`` while the main thread wrote.
    The interleaving is forced by holding the reader inside ``redo_parts``; the delete
    now waits for the reader's build instead of racing it."""
    path = str(tmp_path / "tablet")
    t = Tablet.create(path, cw.SCHEMA, cw.OPTIONS)
    t.insert(pa.table({"k": list(range(10)), "v": list(range(10))}))
    t.flush()
    t.close()
    t = Tablet.open(path, cw.OPTIONS)  # the DiskRowSet has not built its bitmap yet
    try:
        rowset = t._rowsets.drs[0]
        original = rowset.redo_parts
        has_parts, resume = threading.Event(), threading.Event()

        def lookup() -> None:
            t.lookup((5,))

        reader = threading.Thread(target=lookup)

        def redo_parts() -> list[Any]:
            parts = original()
            if threading.current_thread() is reader:  # build from the parts read now...
                has_parts.set()
                resume.wait(WAIT)  # ... after the delete below was applied
            return parts

        setattr(rowset, "redo_parts", redo_parts)  # noqa: B010
        reader.start()
        assert has_parts.wait(WAIT)
        deleter = threading.Thread(target=lambda: t.delete(pa.table({"k": [3]})))
        deleter.start()
        time.sleep(0.2)  # the delete is applied now, or waits for the reader's build
        resume.set()
        reader.join(WAIT)
        deleter.join(WAIT)
        assert not deleter.is_alive()
        res = t.insert(pa.table({"k": [3], "v": [33]}))
        assert res.errors == []  # fails: AlreadyPresent (the row is still "live")
        assert t.lookup((3,)) == {"k": 3, "v": 33, "s": None}
    finally:
        t.close()
