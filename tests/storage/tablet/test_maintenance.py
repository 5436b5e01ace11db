"""The maintenance manager: scoring, the choice of op, the background thread on real
tablets, write back-pressure under a memory limit, and the record of what ran."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest

from kudusql.common.errors import OperationalError
from kudusql.storage.tablet import maintenance
from kudusql.storage.tablet.maintenance import (
    MaintenanceManager,
    MaintenanceOp,
    choose,
    flush_score,
)
from kudusql.storage.tablet.tablet import Tablet
from tests.storage.tablet.test_compaction import (
    HOUR_US,
    OPTS,
    Clock,
    by_key,
    drs_ids,
    kv,
    listed,
    make,
    on_disk,
)
from tests.support.tablets import pause_at
from tests.support.timing import WAIT, scaled

MB = 2**20


def op(name: str, **kw: Any) -> MaintenanceOp:
    return MaintenanceOp(name, "t", lambda: None, **kw)


def wait_for(cond: Callable[[], bool], timeout: float = scaled(20)) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


def test_flush_score_follows_kudu() -> None:
    assert flush_score(0, 10_000, 64 * MB, 120) == 0
    assert flush_score(10 * MB, 60, 64 * MB, 120) == 0  # small and young: wait
    assert flush_score(64 * MB, 0, 64 * MB, 120) == 1.0  # at the threshold: urgent
    assert flush_score(100 * MB, 0, 64 * MB, 120) == pytest.approx(36.0)
    assert flush_score(16 * MB, 1800, 64 * MB, 120) == pytest.approx(0.5)  # age / 1 h
    assert flush_score(48 * MB, 300, 64 * MB, 120) == pytest.approx(0.75)  # size / threshold
    assert flush_score(1 * MB, 7200, 64 * MB, 120) == 1.0


def test_choice_order() -> None:
    flush = op("flush_mrs", ram_anchored=100, logs_retained=10, perf_improvement=0.1)
    deltas = op("flush_deltas", ram_anchored=300, perf_improvement=0.05)
    merge = op("merge_compaction", perf_improvement=0.6)
    gc = op("undo_delta_gc", data_retained=1000)
    ops = [flush, deltas, merge, gc]
    kw: dict[str, Any] = {"log_target_replay_bytes": 1 << 30}
    assert choose(ops, memory_pressure=True, prefer_gc=False, **kw) is deltas
    assert choose(ops, memory_pressure=False, prefer_gc=False, **kw) is merge
    assert choose(ops, memory_pressure=False, prefer_gc=True, **kw) is gc
    assert choose([flush, gc], memory_pressure=False, prefer_gc=False, **kw) is flush
    assert choose([gc], memory_pressure=False, prefer_gc=False, **kw) is gc
    big_log = op("flush_mrs", logs_retained=2 << 30)
    assert choose([*ops, big_log], memory_pressure=False, prefer_gc=False, **kw) is big_log
    assert choose([op("x")], memory_pressure=False, prefer_gc=False, **kw) is None
    # Delta compactions get their own turn: merges outscore them while rowsets overlap.
    major = op("major_delta_compaction", perf_improvement=0.2)
    minor = op("minor_delta_compaction", perf_improvement=0.01)
    both = [*ops, major, minor]
    mi, ma = "minor_delta_compaction", "major_delta_compaction"
    assert choose(both, memory_pressure=False, prefer_gc=False, **kw) is merge
    assert choose(both, memory_pressure=False, prefer_gc=False, prefer_delta=ma, **kw) is major
    # ... and alternate between the kinds: by score the majors would take every turn
    assert choose(both, memory_pressure=False, prefer_gc=False, prefer_delta=mi, **kw) is minor
    assert choose(both, memory_pressure=False, prefer_gc=True, prefer_delta=mi, **kw) is gc
    assert choose(ops, memory_pressure=False, prefer_gc=False, prefer_delta=mi, **kw) is merge
    for kind in (mi, ma):  # the other kind when only one is offered
        assert (
            choose([merge, minor], memory_pressure=False, prefer_gc=False, prefer_delta=kind, **kw)
            is minor
        )
        assert (
            choose([merge, major], memory_pressure=False, prefer_gc=False, prefer_delta=kind, **kw)
            is major
        )


def test_the_manager_gives_minor_and_major_delta_compactions_turns_in_turn(
    tmp_path: Any,
) -> None:
    """Offered both kinds (and a merge outscoring them) at every poll, the manager runs
    each kind of delta compaction on some turns; by score alone it ran only majors."""
    ran: list[str] = []

    class Source:
        path = str(tmp_path)

        def maintenance_ops(self) -> list[MaintenanceOp]:
            return [
                MaintenanceOp(n, self.path, lambda n=n: ran.append(n), perf_improvement=p)
                for n, p in (
                    ("merge_compaction", 0.9),
                    ("major_delta_compaction", 0.5),
                    ("minor_delta_compaction", 0.004),
                )
            ]

        def memory_bytes(self) -> int:
            return 0

    mm = MaintenanceManager(enabled=False, worker_process=False)
    mm.register(Source())
    for _ in range(12):
        mm.run_once()
    assert ran.count("minor_delta_compaction") == 2
    assert ran.count("major_delta_compaction") == 2
    assert ran.count("merge_compaction") == 8


def rows_batch(start: int, n: int) -> pa.Table:
    return kv(list(range(start, start + n)), list(range(n)), ["x" * 50] * n)


def test_background_flush_and_record(tmp_path: Any) -> None:
    mm = MaintenanceManager(poll_interval_s=0.02)
    try:
        t = make(tmp_path, flush_threshold_bytes=20_000)
        t.attach(mm)
        t.insert(rows_batch(0, 50))
        time.sleep(0.2)
        assert drs_ids(t) == []  # small and young: not worth a flush yet
        t.insert(rows_batch(1000, 400))  # past the threshold
        wait_for(lambda: t.memory_bytes() == 0)
        assert len(drs_ids(t)) >= 1
        (rec,) = [r for r in mm.history() if r.op == "flush_mrs"]
        assert rec.tablet == t.path and rec.duration_s > 0 and rec.bytes_written > 0
        assert rec in t.maintenance_log
        assert t.count_rows() == 450
        t.close()
        assert mm.sources() == []
    finally:
        mm.stop()


def test_background_compaction_and_gc(tmp_path: Any) -> None:
    clock = Clock()
    t = make(tmp_path, clock, rowset_target_bytes=1 << 20)
    for k in range(4):  # four overlapping rowsets, and deltas
        t.insert(kv(list(range(k, 400, 4)), list(range(100))))
        t.flush()
    t.update(kv(list(range(0, 400, 7)), [7] * 58))
    t.flush_deltas()
    t.delete(kv(list(range(1, 400, 8))))
    t.flush_deltas()
    expect = {r["key"]: r["val"] for r in t.scan(["key", "val"]).read_all().to_pylist()}
    mm = MaintenanceManager(poll_interval_s=0.02)
    try:
        t.attach(mm)
        wait_for(lambda: len(drs_ids(t)) == 1)
        wait_for(lambda: not any(o.perf_improvement > 0 for o in t.maintenance_ops()))
        assert {"merge_compaction"} <= {r.op for r in mm.history()}
        clock.advance(2 * HOUR_US)  # all history is ancient now: GC reclaims it
        wait_for(lambda: "undo_delta_gc" in {r.op for r in mm.history()})
        wait_for(lambda: all(r["undo_bytes"] == 0 for r in t.rowsets_info()[1:]))
    finally:
        mm.stop()
    got = {r["key"]: r["val"] for r in t.scan(["key", "val"]).read_all().to_pylist()}
    assert got == expect
    t.close()


def test_memory_limit_back_pressure_without_the_thread(tmp_path: Any) -> None:
    """With the manager off, a writer over the memory limit flushes before writing."""
    mm = MaintenanceManager(memory_limit_bytes=60_000, enabled=False)
    t = make(tmp_path)
    t.attach(mm)
    peak = 0
    for b in range(30):
        t.insert(rows_batch(b * 100, 100))
        peak = max(peak, mm.memory_bytes())
    batch_bytes = 100 * 100  # well above one batch's in-memory size
    assert peak <= 60_000 + 2 * batch_bytes
    assert len(drs_ids(t)) >= 3
    assert t.count_rows() == 3000
    assert {r.op for r in mm.history()} == {"flush_mrs"}
    t.close()


def test_memory_limit_back_pressure_with_the_thread(tmp_path: Any) -> None:
    mm = MaintenanceManager(memory_limit_bytes=60_000, poll_interval_s=5.0)
    try:
        t = make(tmp_path)
        t.attach(mm)
        for b in range(30):
            t.insert(rows_batch(b * 100, 100))
            assert mm.memory_bytes() <= 60_000 + 2 * 100 * 100
        # The thread polls every 5 s, so these flushes ran because writers woke it.
        assert len([r for r in mm.history() if r.op == "flush_mrs"]) >= 3
        assert t.count_rows() == 3000
        t.close()
    finally:
        mm.stop()


def test_throttle_sums_memory_again_only_once_writes_may_have_spent_half_the_headroom(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Summing memory looks at every rowset; a sum under the limit grants half the
    headroom as credit, each write charges what it added to the memory stores (exactly
    what the next sum sees), and the sum is skipped while credit remains and for at
    most ``CREDIT_S``."""
    sums: list[int] = []
    real = MaintenanceManager.memory_bytes

    def counted(self: MaintenanceManager) -> int:
        sums.append(1)
        return real(self)

    monkeypatch.setattr(MaintenanceManager, "memory_bytes", counted)
    monkeypatch.setattr(maintenance, "CREDIT_S", 3600.0)
    mm = MaintenanceManager(memory_limit_bytes=64 << 20, enabled=False)
    t = make(tmp_path)
    t.attach(mm)
    for b in range(40):
        t.insert(rows_batch(b * 100, 100))
    assert len(sums) == 1  # 40 writes spend far less than 32 MiB
    # what writes charge is what memory grew by: inserts into the MemRowSet, then
    # updates of flushed rows (DeltaMemStores, through the pending runs)
    t.flush()
    for table in (rows_batch(4000, 100), kv(list(range(0, 4000, 7)), [5] * 572)):
        before, spent = real(mm), mm._spent
        t.upsert(table)
        assert mm._spent - spent == real(mm) - before > 0
    # with credit for one write, every write sums again
    one = real(mm)
    t.insert(rows_batch(5000, 100))
    grown = real(mm) - one
    mm.memory_limit_bytes = real(mm) + 2 * grown
    mm.throttle()
    sums.clear()
    for b in range(51, 59):
        t.insert(rows_batch(b * 100, 100))
    assert len(sums) >= 8
    # and the credit lasts at most CREDIT_S
    monkeypatch.setattr(maintenance, "CREDIT_S", 0.0)
    mm.memory_limit_bytes = 64 << 20
    sums.clear()
    for b in range(60, 64):
        t.insert(rows_batch(b * 100, 100))
    assert len(sums) == 4
    assert t.count_rows() == 5400
    t.close()


def test_writes_fail_clearly_when_flushes_cannot_keep_up(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    mm = MaintenanceManager(memory_limit_bytes=10_000, poll_interval_s=0.01, write_wait_s=0.3)
    try:
        t = make(tmp_path)
        t.attach(mm)
        monkeypatch.setattr(Tablet, "maintenance_ops", lambda self: [])  # nothing can flush
        t.insert(rows_batch(0, 200))
        with pytest.raises(OperationalError, match="memory limit"):
            t.insert(rows_batch(1000, 10))
        t.close()
    finally:
        mm.stop()


def test_switched_off_runs_nothing_and_run_once_still_works(tmp_path: Any) -> None:
    mm = MaintenanceManager(poll_interval_s=0.01)
    mm.stop()
    t = make(tmp_path, flush_threshold_bytes=1000)
    t.attach(mm)
    t.insert(rows_batch(0, 200))
    time.sleep(0.2)
    assert drs_ids(t) == [] and mm.history() == []
    ran = mm.run_once()
    assert ran is not None and ran.name == "flush_mrs"
    assert len(drs_ids(t)) == 1
    t.close()


def test_failed_op_is_recorded_and_the_thread_goes_on(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = make(tmp_path, flush_threshold_bytes=1000)
    calls = {"n": 0}
    orig = Tablet.flush

    def flaky(self: Tablet, **kw: Any) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            raise OperationalError("disk full (injected)")
        return orig(self, **kw)

    monkeypatch.setattr(Tablet, "flush", flaky)
    mm = MaintenanceManager(poll_interval_s=0.01)
    try:
        t.attach(mm)
        t.insert(rows_batch(0, 200))
        wait_for(lambda: len(drs_ids(t)) == 1)
        assert any("disk full" in e for e in mm.errors)
    finally:
        mm.stop()
    t.close()


def test_reopened_tablet_keeps_working_with_a_manager(tmp_path: Any) -> None:
    mm = MaintenanceManager(poll_interval_s=0.01)
    try:
        t = make(tmp_path, flush_threshold_bytes=1000)
        t.attach(mm)
        t.insert(rows_batch(0, 200))
        wait_for(lambda: len(drs_ids(t)) >= 1)
        t.close()
        t = Tablet.open(t.path, OPTS.with_(flush_threshold_bytes=1000))
        t.attach(mm)
        t.insert(rows_batch(5000, 200))
        wait_for(lambda: t.memory_bytes() == 0)
        assert t.count_rows() == 400
        t.close()
    finally:
        mm.stop()


def test_close_waits_for_a_running_compaction(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from kudusql.storage.tablet import compaction_worker

    t = make(tmp_path)
    for k in range(2):
        t.insert(kv(list(range(k, 40, 2)), list(range(20))))
        t.flush()
    entered, release = pause_at(monkeypatch, compaction_worker, "write_rowsets")
    th = threading.Thread(target=t.compact, args=(drs_ids(t),))
    th.start()
    assert entered.wait(WAIT)
    closer = threading.Thread(target=t.close)
    closer.start()
    time.sleep(0.1)
    assert closer.is_alive()  # waiting for the compaction, lock still held
    release.set()
    th.join(WAIT)
    closer.join(WAIT)
    assert not closer.is_alive()
    t = Tablet.open(t.path, OPTS)
    assert len(drs_ids(t)) == 1 and t.count_rows() == 40
    t.close()


def test_memory_bytes_reads_a_frozen_dms_once(tmp_path: Any) -> None:
    """Pins a race: the maintenance manager sums memory while a delta flush clears a
    rowset's frozen DeltaMemStore; reading ``frozen_dms`` twice (test, then use) could
    see it set, then None, and raised AttributeError in the writer's ``throttle``."""
    from kudusql.storage.tablet.diskrowset import DiskRowSet

    t = make(tmp_path)
    try:
        t.insert(kv([1, 2, 3]))
        t.flush()
        t.update(kv([2], [20]))
        drs = t._rowsets.drs[0]
        frozen = drs.freeze_dms()
        reads = iter([frozen, None, None, None])

        class FlushedMeanwhile(DiskRowSet):
            @property
            def frozen_dms(self) -> Any:  # type: ignore[override]
                return next(reads)

        drs.__class__ = FlushedMeanwhile
        assert t.memory_bytes() >= frozen.bytes
    finally:
        drs.__class__ = DiskRowSet
        t.close()


def test_minor_delta_compaction_is_offered_from_min_files(tmp_path: Any) -> None:
    """The manager offers a minor delta compaction once a rowset has
    ``minor_compaction_min_files`` REDO files (each delta flush adds one), not for
    every pair; the explicit API merges any two."""
    t = make(tmp_path, minor_compaction_min_files=4)
    try:
        t.insert(kv([1, 2, 3]))
        t.flush()

        def offered() -> bool:
            return any(o.name == "minor_delta_compaction" for o in t.maintenance_ops())

        for i in range(4):
            t.update(kv([2], [100 + i]))
            t.flush_deltas()
            files = len(t._rowsets.drs[0].meta.redo_files)
            assert files == i + 1
            assert offered() == (files >= 4), files
        rid = drs_ids(t)[0]
        assert t.minor_delta_compaction(rid)
        assert len(t._rowsets.drs[0].meta.redo_files) == 1
        assert not offered()
        assert by_key(t)[2][0] == 103
    finally:
        t.close()


@contextlib.contextmanager
def count_superblock_saves(t: Tablet) -> Iterator[list[int]]:
    """Counts the tablet's superblock saves inside the block (they still happen)."""
    saves = [0]
    real = t._save_meta

    def save() -> None:
        saves[0] += 1
        real()

    t._save_meta = save  # type: ignore[method-assign]
    try:
        yield saves
    finally:
        del t._save_meta


def test_undo_gc_of_many_rowsets_saves_the_superblock_once(tmp_path: Any) -> None:
    clock = Clock()
    t = make(tmp_path, clock)
    try:
        for base in (0, 100, 200):
            t.insert(kv([base + 1, base + 2], [1, 1]))
            t.flush()
            t.update(kv([base + 1], [2]))
            t.flush_deltas()
            t.major_delta_compaction(drs_ids(t)[-1])  # an UNDO file in each rowset
        assert all(r["undo_files"] for r in t.rowsets_info() if r["kind"] == "diskrowset")
        clock.advance(2 * HOUR_US)
        with count_superblock_saves(t) as saves:
            assert t.gc_undo() > 0
        assert saves == [1]
        assert not any(r["undo_files"] for r in t.rowsets_info() if r["kind"] == "diskrowset")
        assert by_key(t)[101] == (2, None)
    finally:
        t.close()


def test_delta_flush_takes_the_due_delta_memstores_only(tmp_path: Any) -> None:
    """Each DeltaMemStore is scored on its own (Kudu's best-DMS score): the op is urgent
    when one store reaches the flush size, and it flushes the stores past half of a
    threshold, not every store of the tablet (random updates gave each rowset a REDO
    file per flush); the others wait for their own size or age. Chosen with none due
    (to free memory), it flushes them all."""
    clock = Clock()
    t = make(tmp_path, clock, flush_threshold_bytes=16 << 10, flush_threshold_s=60)
    sec = 1_000_000
    try:
        bases = [1000 * i for i in range(5)]
        for base in bases:  # five disjoint rowsets
            t.insert(kv(list(range(base, base + 400))))
            t.flush()
        ids = drs_ids(t)
        dms = {d.id: d.dms for d in t._rowsets.drs}

        def flush_op() -> MaintenanceOp:
            (o,) = [o for o in t.maintenance_ops() if o.name == "flush_deltas"]
            return o

        def redo_files() -> list[int]:
            files = {r["id"]: r["redo_files"] for r in t.rowsets_info() if r["id"] in ids}
            return [files[i] for i in ids]

        # small stores whose sum is past the size: nothing is due
        for base in bases:
            t.update(kv(list(range(base, base + 100)), [7] * 100))
        assert all(x.bytes < 8 << 10 for x in dms.values())
        assert sum(x.bytes for x in dms.values()) >= 16 << 10
        assert flush_op().perf_improvement == 0
        # one store past the size: urgent, and only that store is flushed
        t.update(kv(list(range(0, 400)), [8] * 400))
        assert dms[ids[0]].bytes >= 16 << 10
        o = flush_op()
        assert o.perf_improvement >= 1
        assert o.ram_anchored == sum(x.bytes for x in dms.values())
        o.run()
        assert redo_files() == [1, 0, 0, 0, 0]
        assert flush_op().perf_improvement == 0  # the others are small and young
        # past the age threshold the rest are due
        clock.advance(61 * sec)
        o = flush_op()
        assert 0 < o.perf_improvement < 1
        o.run()
        assert redo_files() == [1, 1, 1, 1, 1]
        # one store due by age takes along those past half of it, not the young ones
        t.update(kv([1001], [9]))
        clock.advance(31 * sec)
        t.update(kv([2001], [9]))
        clock.advance(35 * sec)
        t.update(kv([3001], [9]))
        flush_op().run()
        assert redo_files() == [1, 2, 2, 1, 1]
        # chosen with nothing due (memory pressure): every store
        t.update(kv([1], [9]))
        o = flush_op()
        assert o.perf_improvement == 0
        o.run()
        assert redo_files() == [2, 2, 2, 2, 1]
        assert all(d.dms.is_empty() for d in t._rowsets.drs)
        got = by_key(t)
        vals = [got[k][0] for k in (0, 1, 399, 1001, 1099, 1200, 2001, 3001, 4099)]
        assert vals == [8, 9, 8, 9, 7, None, 9, 9, 7]
    finally:
        t.close()


def test_one_minor_delta_compaction_op_covers_every_due_rowset(tmp_path: Any) -> None:
    """Random updates add a REDO file to every rowset per delta flush; one op merges the
    files of every rowset that is due (up to 16), not just the worst one."""
    t = make(tmp_path, minor_compaction_min_files=3)
    try:
        for base in (0, 100, 200):  # three disjoint rowsets
            t.insert(kv([base + 1, base + 2]))
            t.flush()
        ids = drs_ids(t)
        assert len(ids) == 3
        for i in range(3):
            t.update(kv([1, 101], [i, i]))  # rowsets 0 and 1 only
            t.flush_deltas()
        files = {r["id"]: r["redo_files"] for r in t.rowsets_info() if r["kind"] == "diskrowset"}
        assert files == {ids[0]: 3, ids[1]: 3, ids[2]: 0}
        (minor,) = [o for o in t.maintenance_ops() if o.name == "minor_delta_compaction"]
        with count_superblock_saves(t) as saves:
            minor.run()
        assert saves == [1]  # both rowsets swapped in under one superblock save
        files = {r["id"]: r["redo_files"] for r in t.rowsets_info() if r["kind"] == "diskrowset"}
        assert files == {ids[0]: 1, ids[1]: 1, ids[2]: 0}
        assert [r.op for r in t.maintenance_log[-2:]] == ["minor_delta_compaction"] * 2
        t.close()
        t = Tablet.open(t.path)  # what the one save listed is what reopens
        assert by_key(t)[101][0] == 2
        assert on_disk(t) == listed(t)
        got = by_key(t)
        assert (got[1][0], got[101][0], got[201][0]) == (2, 2, None)
    finally:
        t.close()


def test_merge_offer_follows_the_rowsets_between_polls(tmp_path: Any) -> None:
    """The policy's last answer is reused only while its inputs are unchanged."""
    t = make(tmp_path)
    try:

        def merge_offered() -> bool:
            return any(o.name == "merge_compaction" for o in t.maintenance_ops())

        t.insert(kv([1, 2, 101, 102]))
        t.flush()
        assert not merge_offered()  # one rowset: nothing to merge
        assert not merge_offered()  # asked again, same rowsets
        t.insert(kv([3, 103]))  # a second rowset over the same range
        t.flush()
        assert merge_offered()
        assert merge_offered()
        assert t.compact() == 2
        assert not merge_offered()
    finally:
        t.close()


def test_wal_kept_for_the_grace_period_does_not_make_flushes_run_again(tmp_path: Any) -> None:
    """A flush op is chosen for the log by the WAL its stores anchor (Kudu's replay
    size from the op's log anchor), not by the whole WAL: segments that only the file
    grace period keeps are no store's to free. Counting the whole WAL, both flush ops
    stayed above the target after flushing, and every poll flushed the MemRowSet again
    (a sustained writer with the default 60 s grace got a rowset of a few thousand rows
    per poll)."""
    target = 64 * 1024
    mm = MaintenanceManager(enabled=False, log_target_replay_bytes=target)
    t = make(tmp_path, file_grace_s=3600, wal_segment_bytes=16 * 1024)
    t.attach(mm)
    for b in range(80):
        t.insert(rows_batch(b * 100, 100))
    t.flush()
    t.update(kv(list(range(0, 8000, 3)), [1] * 2667))
    t.flush_deltas()
    assert t.wal_size() > 2 * target  # kept: the grace period has not passed
    t.insert(rows_batch(10_000, 20))  # a small, young MemRowSet: not due
    t.update(kv([5, 6], [2, 2]))
    ops = {o.name: o for o in t.maintenance_ops()}
    assert 0 < ops["flush_mrs"].logs_retained < target
    assert 0 < ops["flush_deltas"].logs_retained < target
    rowsets = drs_ids(t)
    for _ in range(6):
        ran = mm.run_once()
        assert ran is None or ran.name not in ("flush_mrs", "flush_deltas"), ran.name
    assert drs_ids(t) == rowsets
    # A store that does anchor more than the target is flushed for it, once.
    for b in range(80):
        t.insert(rows_batch(20_000 + b * 100, 100))
    ran = mm.run_once()
    assert ran is not None and ran.name == "flush_mrs"
    assert t.stats()["memrowset_rows"] == 0
    assert {o.name for o in t.maintenance_ops()}.isdisjoint({"flush_mrs"})
    assert t.count_rows() == 8000 + 20 + 8000
    t.close()


def test_a_delta_flush_offers_the_wal_of_the_stores_it_flushes(tmp_path: Any) -> None:
    """When only the due DeltaMemStores are flushed, the op's WAL retention is what
    those stores anchor: an older store that is not due keeps its segments, and
    counting them would choose the op for the log at every poll until it came due."""
    t = make(tmp_path, flush_threshold_bytes=40_000, flush_threshold_s=3600, wal_segment_bytes=4096)
    t.insert(kv(list(range(2000)), list(range(2000))))
    t.flush()
    t.insert(kv(list(range(5000, 7000)), list(range(2000))))
    t.flush()
    a, b = t._rowsets.drs
    t.update(kv([1], [1]))  # rowset a: a small, young store, the oldest event
    for _ in range(6):  # rowset b: past the flush size, so due
        t.update(kv(list(range(5000, 7000, 2)), [2] * 1000))
    assert a.dms.min_seq is not None and b.dms.min_seq is not None
    assert t.wal_anchored(a.dms.min_seq) > t.wal_anchored(b.dms.min_seq)
    (op,) = [o for o in t.maintenance_ops() if o.name == "flush_deltas"]
    assert op.perf_improvement > 0 and op.logs_retained == t.wal_anchored(b.dms.min_seq)
    op.run()
    assert b.dms.is_empty() and not a.dms.is_empty()  # only the due store was flushed
    t.close()
