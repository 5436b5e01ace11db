"""Compactions and history GC (Kudu's compaction-test, tablet_history_gc-test and
mt-tablet-test cases): results never change under any compaction, history inside the
ancient history mark (AHM) stays readable, older history is refused and reclaimed."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import random
import threading
import time
from typing import Any

import hypothesis.strategies as st
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings

from kudusql.common.errors import ProgrammingError
from kudusql.common.hybrid_time import HybridClock, wall_micros
from kudusql.common.options import TabletOptions
from kudusql.storage.tablet import compaction, metadata
from kudusql.storage.tablet.deltamemstore import DeltaMemStore
from kudusql.storage.tablet.diskrowset import DiskRowSet
from kudusql.storage.tablet.tablet import Tablet
from tests.support.tablets import pause_at, rows, schema
from tests.support.timing import WAIT, scaled

KV = schema(("key", "BIGINT"), ("val", "INT"), ("s", "STRING"), key=["key"])
OPTS = TabletOptions(rows_per_page=4, sync=False, history_max_age_s=3600, file_grace_s=0)
HOUR_US = 3600 * 1_000_000


class Clock:
    """A wall clock the test moves forward."""

    def __init__(self) -> None:
        self.offset = 0
        self.hybrid = HybridClock(lambda: wall_micros() + self.offset)

    def advance(self, micros: int) -> None:
        self.offset += micros


def kv(keys: list[int], vals: list[int] | None = None, s: list[str] | None = None) -> pa.Table:
    cols: dict[str, Any] = {"key": pa.array(keys, pa.int64())}
    if vals is not None:
        cols["val"] = pa.array(vals, pa.int32())
    if s is not None:
        cols["s"] = pa.array(s, pa.string())
    return pa.table(cols)


def make(tmp_path: Any, clock: Clock | None = None, **opts: Any) -> Tablet:
    c = (clock or Clock()).hybrid
    return Tablet.create(str(tmp_path / "t"), KV, OPTS.with_(**opts), clock=c)


def drs_ids(t: Tablet) -> list[int]:
    return [r["id"] for r in t.rowsets_info() if r["kind"] == "diskrowset"]


def on_disk(t: Tablet) -> dict[int, set[str]]:
    base = os.path.join(t.path, "rowsets")
    return {int(d): set(os.listdir(os.path.join(base, d))) for d in os.listdir(base)}


def listed(t: Tablet) -> dict[int, set[str]]:
    return {m.id: m.file_names() for m in t.meta.rowsets}


def by_key(t: Tablet, **kw: Any) -> dict[int, Any]:
    return {r["key"]: (r["val"], r["s"]) for r in rows(t, **kw)}


# -- case 6 across flushes and every kind of compaction ----------------------------------------
@pytest.mark.parametrize("how", ["merge", "major", "minor_then_merge", "maintenance"])
def test_case6_history_survives_compactions(tmp_path: Any, how: str) -> None:
    """ins(row,1)@t1, set 2@t2, del@t3, ins(row,3)@t4, each copy in its own rowset."""
    t = make(tmp_path)
    t.insert(kv([1, 5], [1, 50], ["a", "e"]))
    t.flush()
    t1 = t.latest_timestamp()
    t.update(kv([1], [2]))
    t.flush_deltas()
    t2 = t.latest_timestamp()
    t.delete(kv([1]))
    t.flush_deltas()
    t3 = t.latest_timestamp()
    t.insert(kv([1, 3], [3, 30], ["c", "x"]))
    t.flush()
    t4 = t.latest_timestamp()
    t.update(kv([3], [31]))
    snaps = [t1, t2, t3, t4, t.latest_timestamp()]
    before = [by_key(t, snapshot=s) for s in snaps]
    assert [b.get(1) for b in before] == [(1, "a"), (2, "a"), None, (3, "c"), (3, "c")]
    if how == "merge":
        assert t.compact(drs_ids(t)) == 2
    elif how == "major":
        for i in drs_ids(t):
            t.major_delta_compaction(i)
    elif how == "minor_then_merge":
        assert t.minor_delta_compaction(drs_ids(t)[0])
        t.compact(drs_ids(t))
    else:
        t.run_maintenance()
    after = [by_key(t, snapshot=s) for s in snaps]
    assert after == before
    if how in ("merge", "minor_then_merge", "maintenance"):
        assert len(drs_ids(t)) == 1  # the ghost and the live copy of key 1 are one row
        info = next(r for r in t.rowsets_info() if r["kind"] == "diskrowset")
        assert info["rows"] == 3
    assert t.lookup((1,), ["val"]) == {"val": 3}
    t.close()
    t = Tablet.open(t.path, OPTS, clock=t.clock)
    assert [by_key(t, snapshot=s) for s in snaps] == before
    assert on_disk(t) == listed(t)
    diff = t.diff_scan(t2, t4).read_all().to_pylist()
    assert {r["key"]: (r["val"], r["is_deleted"]) for r in diff} == {1: (3, False), 3: (30, False)}
    t.close()


def test_major_delta_compaction_rewrites_only_updated_columns(tmp_path: Any) -> None:
    t = make(tmp_path)
    t.insert(kv(list(range(20)), list(range(20)), [f"s{i}" for i in range(20)]))
    t.flush()
    for r in range(3):
        t.update(kv([2, 7, 11], [100 + r] * 3))
        t.flush_deltas()
    t.delete(kv([4]))
    t.flush_deltas()
    (rid,) = drs_ids(t)
    before = t.rowsets_info()[1]
    assert before["redo_files"] == 4
    mid = t.latest_timestamp()
    assert t.major_delta_compaction(rid)
    meta = t.meta.rowsets[0]
    val_id, s_id = KV.column("val").id, KV.column("s").id
    assert meta.column_file(val_id) == f"c{val_id}.g0.cfile"
    assert meta.column_file(s_id) == f"c{s_id}.cfile"  # untouched
    info = t.rowsets_info()[1]
    assert info["redo_files"] == 1 and info["redo_events"] == 1  # the ghost's DELETE
    assert info["rows"] == 20 and info["live_rows"] == 19
    got = by_key(t)
    assert got[2] == (102, "s2") and 4 not in got
    assert by_key(t, snapshot=mid) == got
    assert on_disk(t) == listed(t)
    t.close()


def test_superblock_text_is_the_metadata_with_delta_entries_encoded_once(tmp_path: Any) -> None:
    """A save encodes each delta file's entry once and splices the cached texts
    (``TabletMeta.json_text``): what it writes must be exactly the metadata."""
    t = make(tmp_path)
    t.insert(kv(list(range(20)), list(range(20)), [f"s{i}" for i in range(20)]))
    t.flush()
    t.insert(kv(list(range(20, 30)), list(range(10)), ["x"] * 10))
    t.flush()
    for r in range(3):
        t.update(kv([2, 7, 25], [100 + r] * 3))
        t.flush_deltas()
    first = drs_ids(t)[0]
    assert t.major_delta_compaction(first)  # gen, column_files, new UNDO and REDO lists
    t.update(kv([3, 26], [7, 7]))
    t.flush_deltas()
    t.close()
    t = Tablet.open(str(tmp_path / "t"), OPTS)
    meta = t.meta
    assert [len(m.redo_files) for m in meta.rowsets] == [1, 4]
    assert meta.rowsets[0].column_files and meta.rowsets[0].undo_files
    assert json.loads(meta.json_text()) == meta.to_json()
    assert metadata.load(t.path).to_json() == meta.to_json()
    # The cache is only sound because a delta file's entry never changes.
    with pytest.raises(dataclasses.FrozenInstanceError):
        meta.rowsets[1].redo_files[0].name = "other"  # type: ignore[misc]
    t.close()


# Each RowSetMeta field changed in place, as the tablet changes them (lists and dicts
# mutated, not replaced, where the tablet does so).
_FIELD_CHANGES: dict[str, Any] = {
    "id": lambda m: setattr(m, "id", m.id + 100),
    "num_rows": lambda m: setattr(m, "num_rows", m.num_rows - 1),
    "min_key": lambda m: setattr(m, "min_key", b"\x00" + m.min_key),
    "max_key": lambda m: setattr(m, "max_key", m.max_key + b"\xff"),
    "column_ids": lambda m: m.column_ids.append(99),
    "base_bytes": lambda m: setattr(m, "base_bytes", m.base_bytes + 1),
    "undo_files": lambda m: m.undo_files.pop(),
    "redo_files": lambda m: m.redo_files.append(m.undo_files[0]),
    "last_durable_dms_id": lambda m: setattr(m, "last_durable_dms_id", 41),
    "column_files": lambda m: m.column_files.__setitem__(1, "c1.g7.cfile"),
    "gen": lambda m: setattr(m, "gen", m.gen + 1),
    "raw_bytes": lambda m: setattr(m, "raw_bytes", m.raw_bytes + 1),
}


def test_every_rowset_field_is_in_its_cached_superblock_entry(tmp_path: Any) -> None:
    """``RowSetMeta.json_text`` reuses its last text while the fields it encoded are
    equal: a change to any field, in place, must show in the next save. The table of
    changes covers every field, so a field added later without joining the cache's
    signature fails here."""
    t = make(tmp_path)
    t.insert(kv(list(range(10)), list(range(10))))
    t.flush()
    t.update(kv([1, 2], [5, 5]))
    t.flush_deltas()
    (rid,) = drs_ids(t)
    assert t.major_delta_compaction(rid)  # an UNDO file to move about
    t.close()
    names = {f.name for f in dataclasses.fields(metadata.RowSetMeta) if f.init}
    assert names == set(_FIELD_CHANGES)
    for name, change in _FIELD_CHANGES.items():
        m = metadata.load(str(tmp_path / "t")).rowsets[0]
        before = m.json_text()
        assert m.json_text() is before  # reused while nothing changed
        change(m)
        after = m.json_text()
        assert after != before, name
        assert json.loads(after) == m.to_dict(), name


def test_minor_delta_compaction_merges_redo_files(tmp_path: Any) -> None:
    t = make(tmp_path)
    t.insert(kv(list(range(8)), list(range(8))))
    t.flush()
    stamps = []
    for r in range(4):
        t.update(kv([r], [10 * r]))
        t.flush_deltas()
        stamps.append(t.latest_timestamp())
    states = [by_key(t, snapshot=s) for s in stamps]
    (rid,) = drs_ids(t)
    assert t.minor_delta_compaction(rid)
    assert t.rowsets_info()[1]["redo_files"] == 1
    assert not t.minor_delta_compaction(rid)  # one file: nothing to do
    assert [by_key(t, snapshot=s) for s in stamps] == states
    t.close()


# -- the ancient history mark and GC -------------------------------------------------------------
def test_snapshot_before_ahm_fails_and_undo_gc_reclaims_it(tmp_path: Any) -> None:
    clock = Clock()
    t = make(tmp_path, clock)
    t.insert(kv(list(range(50)), list(range(50))))
    t.flush()
    old = t.latest_timestamp()
    t.update(kv(list(range(0, 50, 2)), [7] * 25))
    t.flush_deltas()
    t.major_delta_compaction(drs_ids(t)[0])  # REDOs become UNDOs
    undo_bytes = t.rowsets_info()[1]["undo_bytes"]
    assert undo_bytes > 0
    assert by_key(t, snapshot=old)[0] == (0, None)
    assert t.gc_undo() == 0  # nothing is ancient yet
    clock.advance(2 * HOUR_US)
    with pytest.raises(ProgrammingError, match="ancient history mark"):
        t.scan(snapshot=old)
    with pytest.raises(ProgrammingError, match="ancient history mark"):
        t.diff_scan(old, t.latest_timestamp())
    latest = by_key(t)
    assert t.gc_undo() == undo_bytes
    assert t.rowsets_info()[1]["undo_files"] == 0
    assert by_key(t) == latest
    assert on_disk(t) == listed(t)
    t.close()


def test_compactions_do_not_read_undo_files_wholly_older_than_the_ahm(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A merge or major delta compaction drops UNDO events older than the ancient
    history mark, so it does not read the UNDO files all of whose events are."""
    clock = Clock()
    t = make(tmp_path, clock)
    t.insert(kv(list(range(50)), list(range(50))))
    t.flush()
    t.update(kv(list(range(0, 50, 2)), [7] * 25))
    t.flush_deltas()
    t.major_delta_compaction(drs_ids(t)[0])  # REDOs become UNDOs
    (drs,) = t._rowsets.drs
    newest = max(f.stats.max_ts for f in drs.meta.undo_files)
    assert len(drs.undo_file_deltas(newest)) == len(drs.undo_file_deltas()) > 0
    assert len(drs.undo_file_deltas(newest + 1)) == 0
    clock.advance(2 * HOUR_US)
    t.insert(kv(list(range(50, 60)), list(range(10))))
    t.flush()
    asked: list[int] = []
    real = DiskRowSet.undo_file_deltas

    def spy(self: DiskRowSet, since: int = 0) -> Any:
        asked.append(since)
        return real(self, since)

    monkeypatch.setattr(DiskRowSet, "undo_file_deltas", spy)
    before = by_key(t)
    t.compact(drs_ids(t))
    ahm = t.ancient_history_mark()
    assert asked and all(newest < since <= ahm for since in asked)
    assert by_key(t) == before
    t.close()


def test_a_write_landing_while_durable_seq_reads_the_stores_is_not_durable(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``durable_seq`` runs without the write lock (WAL GC after a delta flush): a
    write that lands while it reads the stores must not count as durable, or its WAL
    segment could be deleted while the write is only in memory."""
    t = make(tmp_path)
    t.insert(kv(list(range(10)), list(range(10))))
    t.flush()  # everything durable; one DiskRowSet with an empty DeltaMemStore
    seq = t._next_seq
    real = DeltaMemStore.min_seq
    landed: list[int] = []

    def write_meanwhile(self: DeltaMemStore) -> int | None:
        if not landed:
            landed.append(1)
            t.insert(kv([100], [1]))  # takes sequence number ``seq``, in memory only
        return real.fget(self)  # type: ignore[attr-defined,no-any-return]

    monkeypatch.setattr(DeltaMemStore, "min_seq", property(write_meanwhile))
    assert t.durable_seq() < seq
    monkeypatch.undo()
    assert landed and t.durable_seq() == seq - 1
    t.close()


def test_deleted_rowset_gc_and_no_ghost_revival(tmp_path: Any) -> None:
    clock = Clock()
    t = make(tmp_path, clock)
    t.insert(kv(list(range(10)), list(range(10))))
    t.flush()
    t.insert(kv(list(range(100, 110)), list(range(10))))
    t.flush()
    t.delete(kv(list(range(10))))
    assert t.gc_deleted_rowsets() == 0  # deleted, but inside the history
    clock.advance(2 * HOUR_US)
    assert t.gc_deleted_rowsets() == 1
    assert len(drs_ids(t)) == 1
    assert sorted(by_key(t)) == list(range(100, 110))
    t.insert(kv([3], [33]))  # the key is free again; its old life does not come back
    assert by_key(t)[3] == (33, None)
    assert t.lookup((4,)) is None
    t.close()
    t = Tablet.open(t.path, OPTS, clock=clock.hybrid)
    assert sorted(by_key(t)) == [3, *range(100, 110)]
    assert on_disk(t) == listed(t)
    t.close()


def test_merge_purges_rows_deleted_before_the_ahm(tmp_path: Any) -> None:
    clock = Clock()
    t = make(tmp_path, clock)
    t.insert(kv(list(range(0, 40, 2)), list(range(20))))
    t.flush()
    t.insert(kv(list(range(1, 40, 2)), list(range(20))))
    t.flush()
    t.delete(kv(list(range(0, 40, 4))))
    t.flush_deltas()
    recent = t.latest_timestamp()
    clock.advance(2 * HOUR_US)
    t.delete(kv([1, 3]))  # deleted inside the history: kept as ghosts
    t.insert(kv([0], [-1]))  # a deleted key re-inserted (live copy in the MemRowSet)
    t.flush()
    expect = by_key(t)
    ids = drs_ids(t)
    assert t.compact(ids) == 3
    (info,) = [r for r in t.rowsets_info() if r["kind"] == "diskrowset"]
    assert info["rows"] == 40 - 10 + 1  # 10 purged, key 0 folded into one row
    assert info["live_rows"] == len(expect)
    assert by_key(t) == expect
    with pytest.raises(ProgrammingError):
        t.scan(snapshot=recent)
    t.close()


def test_running_scan_keeps_its_files(tmp_path: Any) -> None:
    t = make(tmp_path, scan_batch_rows=4)
    for base in (0, 1000, 2000):
        t.insert(kv([base + i for i in range(0, 40, 2)], list(range(20))))
        t.flush()
        t.insert(kv([base + i for i in range(1, 40, 2)], list(range(20))))
        t.flush()
    expect = rows(t)
    reader = t.scan(ordered=False)
    first = reader.read_next_batch()
    old_dirs = set(on_disk(t))
    assert t.compact(drs_ids(t)) == 6
    t.run_maintenance()
    assert old_dirs <= set(on_disk(t))  # the scan still holds the inputs
    got = pa.Table.from_batches([first, *reader]).to_pylist()
    assert sorted(got, key=lambda r: r["key"]) == expect
    del reader, first
    t.flush()  # any maintenance op retires what nothing holds any more
    assert on_disk(t) == listed(t)
    t.close()


def test_policy_leaves_disjoint_rowsets_alone(tmp_path: Any) -> None:
    # Rowsets at the target size: the small-rowset term (which merges tiny neighbours)
    # plays no part.
    t = make(tmp_path, rowset_target_bytes=64)
    for b in range(4):
        t.insert(kv(list(range(b * 10, b * 10 + 10)), list(range(10))))
        t.flush()
    assert t.compact() == 0
    assert not [o for o in t.maintenance_ops() if o.name == "merge_compaction"]
    for b in range(4):  # now every rowset overlaps every other
        t.insert(kv([b * 10 + 5 + 1000 * k for k in range(1, 3)], [0, 0]))
        t.insert(kv([-1 - b], [0]))
        t.flush()
    assert any(o.name == "merge_compaction" for o in t.maintenance_ops())
    expect = rows(t)
    assert t.compact() >= 2
    assert rows(t) == expect
    t.close()


def test_stats_report_the_average_rowset_height(tmp_path: Any) -> None:
    """Kudu's average_diskrowset_height: 1 for rowsets side by side, the number of
    rowsets when each covers the whole key range, back to 1 after they are merged."""
    t = make(tmp_path)
    assert t.stats()["average_rowset_height"] == 0.0  # no data on disk
    for b in range(3):
        t.insert(kv(list(range(b * 10, b * 10 + 10)), list(range(10))))
        t.flush()
    assert t.stats()["average_rowset_height"] == pytest.approx(1.0)
    for b in range(3):  # each new rowset spans every key written so far
        t.insert(kv([-1 - b, 15 + b, 1000 + b], [0, 0, 0]))
        t.flush()
    assert t.stats()["average_rowset_height"] > 2.0
    assert t.compact() >= 2
    assert t.stats()["average_rowset_height"] == pytest.approx(1.0)
    t.close()


def test_small_disjoint_flushes_wait_for_enough_of_them(tmp_path: Any) -> None:
    """Sequential small flushes: the small-rowset term alone would merge each one into its
    growing neighbour; the policy waits until there are eight of them (the target size,
    32 MiB, is far away here), then merges them in one go."""
    t = make(tmp_path)
    for b in range(8):
        if b:
            assert t.compact() == 0, b
        t.insert(kv(list(range(b * 10, b * 10 + 10)), list(range(10))))
        t.flush()
    expect = rows(t)
    assert t.compact() == 8
    assert len(drs_ids(t)) == 1
    assert rows(t) == expect
    t.close()
    # The count is a tablet option.
    t = Tablet.create(str(tmp_path / "two"), KV, OPTS.with_(compaction_small_rowset_merge_inputs=2))
    for b in range(2):
        t.insert(kv(list(range(b * 10, b * 10 + 10)), list(range(10))))
        t.flush()
    assert t.compact() == 2
    t.close()
    with pytest.raises(ProgrammingError, match="at least 2"):
        OPTS.with_(compaction_small_rowset_merge_inputs=1)


def test_mutations_during_a_merge_move_to_the_outputs(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kudusql.storage.tablet import compaction_worker as tablet_mod

    t = make(tmp_path)
    t.insert(kv(list(range(0, 20, 2)), list(range(10))))
    t.flush()
    t.insert(kv(list(range(1, 20, 2)), list(range(10))))
    t.flush()
    entered, release = pause_at(monkeypatch, tablet_mod, "write_rowsets")
    th = threading.Thread(target=t.compact, args=(drs_ids(t),))
    th.start()
    assert entered.wait(WAIT)
    t.update(kv([2, 3], [200, 300]))
    t.delete(kv([4]))
    t.insert(kv([4], [44]))  # re-insert of a key deleted during the merge
    mid = t.latest_timestamp()
    release.set()
    th.join(WAIT)
    assert len(drs_ids(t)) == 1
    got = by_key(t)
    assert got[2] == (200, None) and got[3] == (300, None) and got[4] == (44, None)
    assert by_key(t, snapshot=mid) == got
    t.abandon()  # the moved mutations are durable, though their WAL records name the inputs
    t = Tablet.open(t.path, OPTS)
    assert by_key(t) == got
    t.close()


def fail_a_write(t: Tablet, key: int) -> None:
    """Insert ``key`` with the WAL's next write failing (no space): the tablet is left
    failed, to reload itself from disk at the next write."""
    from kudusql.common.errors import OperationalError
    from kudusql.storage.fs import faults

    faults.inject("write", path_contains="wal", err=28)
    try:
        with pytest.raises(OperationalError):
            t.insert(kv([key], [1]))
    finally:
        faults.clear()


@pytest.mark.parametrize("op", ["merge", "flush", "flush_deltas"])
def test_maintenance_running_when_a_write_fails_publishes_nothing(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, op: str
) -> None:
    """A write that fails in the WAL leaves the tablet failed: its memory may hold what
    the log does not. A flush or compaction running meanwhile must not publish (that
    would make that memory durable, and a merge's inputs would be listed beside its
    outputs after the reload); the next write waits for it, then reloads from disk."""
    from kudusql.storage.tablet import compaction_worker

    t = make(tmp_path)
    t.insert(kv(list(range(0, 20, 2)), list(range(10))))
    t.flush()
    t.insert(kv(list(range(1, 20, 2)), list(range(10))))
    t.flush()
    if op == "flush":
        t.insert(kv([50, 51], [5, 5]))
    elif op == "flush_deltas":
        t.update(kv([0, 1], [7, 7]))
    ids, expected = drs_ids(t), by_key(t)
    paused = "write_delta_file" if op == "flush_deltas" else "write_rowsets"
    entered, release = pause_at(monkeypatch, compaction_worker, paused)
    failures: list[BaseException] = []

    def run() -> None:
        try:
            if op == "merge":
                t.compact(ids)
            elif op == "flush":
                t.flush()
            else:
                t.flush_deltas()
        except BaseException as e:
            failures.append(e)

    maintenance = threading.Thread(target=run)
    maintenance.start()
    assert entered.wait(WAIT)
    fail_a_write(t, 100)
    writer = threading.Thread(target=t.insert, args=(kv([101], [2]),))
    writer.start()
    writer.join(0.5)
    assert writer.is_alive()  # the reload waits for the maintenance op
    release.set()
    maintenance.join(WAIT)
    writer.join(WAIT)
    assert not maintenance.is_alive() and not writer.is_alive()
    assert len(failures) == 1 and "has failed" in str(failures[0])
    expected[101] = (2, None)
    assert drs_ids(t) == ids and by_key(t) == expected
    assert t.scan().read_all().num_rows == len(expected)  # no key listed twice
    t.close()
    t = Tablet.open(t.path, OPTS)
    assert by_key(t) == expected and on_disk(t) == listed(t)
    t.close()


def test_a_tablet_closed_while_a_write_waited_to_reload_it_stays_closed(tmp_path: Any) -> None:
    """A write waiting for the maintenance lock to reload a failed tablet must not
    reload it once it has been closed meanwhile (the directory is no longer its own)."""

    t = make(tmp_path)
    t.insert(kv([1], [1]))
    fail_a_write(t, 2)
    errors: list[BaseException] = []

    def write() -> None:
        try:
            t.insert(kv([3], [3]))
        except BaseException as e:
            errors.append(e)

    with t._maint_lock:  # as a running merge would
        writer = threading.Thread(target=write)
        writer.start()
        writer.join(0.3)
        assert writer.is_alive()
        t.close()  # reentrant: this thread holds the maintenance lock
    writer.join(WAIT)
    assert len(errors) == 1 and isinstance(errors[0], ProgrammingError), errors
    t = Tablet.open(t.path, OPTS)
    assert by_key(t) == {1: (1, None)}
    t.close()


# -- concurrency: the bank-transfer invariant ----------------------------------------------------
def test_bank_transfers_under_concurrent_compactions(tmp_path: Any) -> None:
    """Two writers move money between accounts (and move accounts to new keys: a delete
    and an insert in one batch) while a maintenance thread flushes, compacts and GCs and
    readers scan at the latest and at earlier snapshots: every scan sums to the total."""
    accounts, total = 64, 64 * 100
    t = make(tmp_path, rows_per_page=8, scan_batch_rows=16)
    t.insert(kv(list(range(accounts)), [100] * accounts))
    t.flush()
    stop = threading.Event()
    errors: list[BaseException] = []
    stamps: list[int] = []

    def guard(fn: Any) -> Any:
        def run() -> None:
            try:
                fn()
            except BaseException as e:  # surfaced by the main thread
                errors.append(e)
                stop.set()

        return run

    def writer(half: int) -> None:
        rng = random.Random(half)
        live = list(range(half, accounts, 2))
        fresh = iter(range(10_000 + half, 10**9, 2))
        while not stop.is_set():
            a, b = rng.sample(live, 2)
            ra, rb = t.lookup((a,), ["val"]), t.lookup((b,), ["val"])
            assert ra is not None and rb is not None
            if rng.random() < 0.2:  # move account a to a new key
                new = next(fresh)
                batch = pa.table(
                    {
                        "key": pa.array([a, new], pa.int64()),
                        "val": pa.array([None, ra["val"]], pa.int32()),
                        "op": ["DELETE", "INSERT"],
                    }
                )
                t.write(batch, op_column="op", atomic=True)
                live[live.index(a)] = new
            else:
                amt = rng.randint(0, 10)
                t.update(kv([a, b], [ra["val"] - amt, rb["val"] + amt]), atomic=True)
            stamps.append(t.latest_timestamp())

    def maintainer() -> None:
        rng = random.Random(7)
        while not stop.is_set():
            ids = drs_ids(t)
            op = rng.choice(["flush", "deltas", "merge", "major", "minor", "policy", "gc"])
            if op == "flush":
                t.flush()
            elif op == "deltas":
                t.flush_deltas()
            elif op == "merge" and ids:
                t.compact(rng.sample(ids, min(len(ids), rng.randint(1, 4))))
            elif op in ("major", "minor") and ids:
                i = rng.choice(ids)
                try:
                    if op == "major":
                        t.major_delta_compaction(i)
                    else:
                        t.minor_delta_compaction(i)
                except ProgrammingError:
                    pass  # merged away since we listed it
            elif op == "policy":
                t.compact()
            else:
                t.gc_undo()
                t.gc_deleted_rowsets()

    checks = [0]

    def reader() -> None:
        rng = random.Random(3)
        while not stop.is_set():
            snap = rng.choice(stamps) if stamps and rng.random() < 0.5 else None
            got = t.scan(["val"], snapshot=snap).read_all()
            assert got.num_rows == accounts, got.num_rows
            s = pa.compute.sum(got.column("val")).as_py()
            assert s == total, (snap, s)
            checks[0] += 1

    threads = [
        threading.Thread(target=guard(lambda h=h: writer(h)))
        for h in (0, 1)  # type: ignore[misc]
    ]
    threads += [threading.Thread(target=guard(maintainer)), threading.Thread(target=guard(reader))]
    for th in threads:
        th.start()

    def enough() -> bool:
        ops = {r.op for r in list(t.maintenance_log)}
        return checks[0] > 5 and len(stamps) > 20 and {"flush_mrs", "merge_compaction"} <= ops

    # 6 s of racing, or longer on a slow machine until enough happened (a hang bound after)
    start = time.monotonic()
    while not stop.is_set():
        elapsed = time.monotonic() - start
        if (elapsed >= 6 and enough()) or elapsed >= scaled(60):
            break
        time.sleep(0.05)
    stop.set()
    for th in threads:
        th.join(scaled(30))
    if errors:
        raise errors[0]
    assert checks[0] > 5 and len(stamps) > 20
    log = {r.op for r in t.maintenance_log}
    assert {"flush_mrs", "merge_compaction"} <= log
    for snap in rng_sample(stamps, 20):
        assert pa.compute.sum(t.scan(["val"], snapshot=snap).read_all().column("val")).as_py() == (
            total
        )
    t.abandon()
    t = Tablet.open(t.path, OPTS)
    assert pa.compute.sum(t.scan(["val"]).read_all().column("val")).as_py() == total
    assert on_disk(t) == listed(t)
    t.close()


def rng_sample(xs: list[int], k: int) -> list[int]:
    return random.Random(1).sample(xs, min(k, len(xs)))


def test_dms_merge_race_loses_no_event(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pinned: a reader merging a DeltaMemStore's parts must not install its merge if a
    writer appended meanwhile, even when another reader's merge brought the part count
    back to what the first reader saw (the old length check lost the new event)."""
    import numpy as np

    from kudusql.storage.tablet import deltamemstore as dms_mod
    from kudusql.storage.tablet.delta import Deltas, MutationType

    def ev(row: int, seq: int) -> Deltas:
        return Deltas(
            np.array([row]), np.array([seq], np.uint64), np.array([seq]),
            np.array([MutationType.DELETE], np.uint8), {},
        )  # fmt: skip

    store = dms_mod.DeltaMemStore(0)
    store.append(ev(0, 1))
    store.append(ev(1, 2))
    store.deltas()  # merged: one part
    store.append(ev(2, 3))  # two parts
    paused, go = threading.Event(), threading.Event()
    orig = dms_mod.concat_deltas
    slow_thread: list[int] = []

    def concat(parts: Any) -> Any:
        if threading.get_ident() in slow_thread:
            paused.set()
            assert go.wait(WAIT)
        return orig(parts)

    monkeypatch.setattr(dms_mod, "concat_deltas", concat)
    out: list[Deltas] = []

    def slow_reader() -> None:
        slow_thread.append(threading.get_ident())
        out.append(store.deltas())

    th = threading.Thread(target=slow_reader)
    th.start()
    assert paused.wait(WAIT)  # the slow reader holds a 2-part snapshot
    store.append(ev(3, 4))  # 3 parts
    store.append(ev(4, 5))
    store.deltas()  # another reader merges: 1 part
    store.append(ev(5, 6))  # 2 parts again, as the slow reader saw
    go.set()
    th.join(WAIT)
    assert sorted(store.deltas().rowid.tolist()) == [0, 1, 2, 3, 4, 5]


def test_history_max_age_is_overridable_per_tablet(tmp_path: Any) -> None:
    clock = Clock()
    t = make(tmp_path, clock)
    t.insert(kv([1], [1]))
    old = t.latest_timestamp()
    clock.advance(10 * 60 * 1_000_000)
    assert by_key(t, snapshot=old) == {1: (1, None)}  # 10 minutes < the option's hour
    t.set_history_max_age(300)
    with pytest.raises(ProgrammingError, match="300 s"):
        t.scan(snapshot=old)
    t.close()
    t = Tablet.open(t.path, OPTS, clock=clock.hybrid)
    assert t.history_max_age_s == 300  # durable
    t.set_history_max_age(None)
    assert by_key(t, snapshot=old) == {1: (1, None)}
    t.set_history_max_age(-1)  # keep everything
    clock.advance(100 * HOUR_US)
    assert t.ancient_history_mark() == 0 and by_key(t, snapshot=old) == {1: (1, None)}
    t.close()


def test_adjacent_full_rowsets_are_not_merged_again(tmp_path: Any) -> None:
    """Pinned: rowsets roll at the target size in *uncompressed* bytes; the policy used to
    weigh them by compressed size, saw them all as small and merged adjacent rowsets into
    the same layout forever (run_maintenance never returned)."""
    t = make(tmp_path, rowset_target_bytes=64_000, rows_per_page=256)
    n = 2000
    t.insert(kv(list(range(n)), list(range(n)), ["x" * 200] * n))  # compresses well
    t.flush()
    ids = drs_ids(t)
    assert len(ids) >= 4
    meta = t.meta.rowsets[0]
    assert meta.base_bytes < meta.raw_bytes / 4
    assert t.compact() == 0
    t.run_maintenance()  # returns
    assert drs_ids(t) == ids
    t.close()


@pytest.mark.parametrize(
    ("op", "point", "where"),
    [
        ("merge", "write", "rowsets/00000002"),  # an output column file
        ("merge", "write", "redo"),  # flushing the inputs' DeltaMemStores
        ("merge", "rename", "tablet.meta"),  # the superblock swap
        ("major", "write", ".g0."),  # a rewritten column or the new UNDO file
        ("major", "rename", "tablet.meta"),
        ("minor", "write", "redo.g0"),
        ("gc", "rename", "tablet.meta"),
    ],
)
def test_disk_errors_during_compaction_change_nothing(
    tmp_path: Any, op: str, point: str, where: str
) -> None:
    from kudusql.common.errors import OperationalError
    from kudusql.storage.fs import faults

    clock = Clock()
    t = make(tmp_path, clock)
    t.insert(kv(list(range(0, 40, 2)), list(range(20))))
    t.flush()
    t.insert(kv(list(range(1, 40, 2)), list(range(20))))
    t.flush()
    for r in range(2):
        t.update(kv([0, 1, 2, 3], [100 + r] * 4))
        t.flush_deltas()
    t.delete(kv([5]))
    snap = t.latest_timestamp()
    if op == "gc":
        t.compact(drs_ids(t))
        clock.advance(2 * HOUR_US)
    before, ids = by_key(t), drs_ids(t)
    before_snap = None if op == "gc" else by_key(t, snapshot=snap)

    def run() -> None:
        if op == "merge":
            t.compact(ids)
        elif op == "major":
            t.major_delta_compaction(ids[0])
        elif op == "minor":
            t.minor_delta_compaction(ids[0])
        else:
            assert t.gc_undo() > 0

    faults.inject(point, path_contains=where, err=28)
    try:
        with pytest.raises(OperationalError):
            run()
    finally:
        faults.clear()
    assert drs_ids(t) == ids and by_key(t) == before
    t.insert(kv([99], [99]))  # writes go on
    before[99] = (99, None)
    run()  # the cause is gone: it works
    assert by_key(t) == before
    if before_snap is not None:
        assert by_key(t, snapshot=snap) == before_snap
    t.close()
    t = Tablet.open(t.path, OPTS, clock=clock.hybrid)
    assert by_key(t) == before and on_disk(t) == listed(t)
    t.close()


def test_a_failed_rowset_write_returns_once_every_column_writer_stopped(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pinned (a flaky disk-error test): the columns are written in a pool, and an error
    in one came back while another was still writing into the directory that the retry
    removes and makes anew."""
    from concurrent.futures import ThreadPoolExecutor

    from kudusql.storage.tablet import rowset_writer
    from kudusql.storage.tablet.delta import Deltas

    finished: list[str] = []
    real = rowset_writer.CFileWriter

    class Writer(real):  # type: ignore[misc, valid-type]
        def finish(self, *a: Any, **kw: Any) -> int:
            if self.path.endswith("c1.cfile"):
                raise OSError(28, "No space left on device")
            if self.path.endswith("c2.cfile"):
                time.sleep(0.3)
            finished.append(os.path.basename(self.path))
            return int(super().finish(*a, **kw))

    monkeypatch.setattr(rowset_writer, "CFileWriter", Writer)
    data = pa.table(
        {
            "key": pa.array([1, 2, 3], pa.int64()),
            "val": pa.array([1, 2, 3], pa.int32()),
            "s": pa.array(["a", "b", "c"]),
        }
    )
    keys = pa.array([b"\x01", b"\x02", b"\x03"], pa.binary())
    opts = rowset_writer.RowSetWriteOptions()
    with ThreadPoolExecutor(4) as pool:  # (leaving it waits for every thread)
        with pytest.raises(OSError):
            rowset_writer.write_rowsets(
                str(tmp_path), 0, KV, data, keys, Deltas(), Deltas(), opts, pool
            )
        assert "c2.cfile" in finished  # the slow writer had stopped before the error came back


def test_policy_never_repeats_a_merge_that_keeps_the_rowset_count(tmp_path: Any) -> None:
    """Pinned: the writer rolls rowsets at whole pages, so outputs come out below the
    target size; the policy's estimate of a merge's outputs must use the same rule, or
    it keeps rewriting disjoint rowsets into as many new ones."""
    t = make(tmp_path, rows_per_page=64, rowset_target_bytes=3_000, bulk_load_rows=50)
    for i in range(6):  # bulk loads: disjoint rowsets, many below a page-rounded target
        t.insert(kv(list(range(i * 1000, i * 1000 + 100)), [1] * 100, ["x" * 5] * 100))
    merges = 0
    for _ in range(6):
        sel = t.maintainer.policy(t.ancient_history_mark())
        if not sel.ids:
            break
        before = len(drs_ids(t))
        t.compact(list(sel.ids))
        merges += 1
        assert len(drs_ids(t)) < before, "a merge that does not reduce the rowset count"
    assert merges >= 1
    assert t.count_rows() == 600
    t.close()


@settings(max_examples=60, deadline=None)
@given(
    width=st.sampled_from([1, 3, 4, 8]),
    data=st.data(),
)
def test_merge_key_order_is_key_then_delete_time(width: int, data: Any) -> None:
    """``_key_order`` (numbers for keys of one width, Arrow's sort otherwise) orders the
    copies by key, then by delete time, ties kept in input order, and flags each copy
    followed by one of the same key."""
    alphabet = st.sampled_from([b"\x00", b"\x01", b"\x7f", b"\x80", b"\xff"])
    key_st = st.lists(alphabet, min_size=width, max_size=width).map(b"".join)
    if data.draw(st.booleans()):  # mixed widths: the Arrow path
        key_st = st.one_of(key_st, st.binary(max_size=3))
    keys = data.draw(st.lists(key_st, min_size=1, max_size=60))
    ts = data.draw(
        st.lists(st.sampled_from([5, 9, 2**64 - 1]), min_size=len(keys), max_size=len(keys))
    )
    del_ts = np.array(ts, dtype=np.uint64)
    order, same_next, take = compaction._key_order(pa.array(keys, pa.binary()), del_ts)
    want = sorted(range(len(keys)), key=lambda i: (keys[i], ts[i]))
    assert order.tolist() == want
    sk = [keys[i] for i in want]
    assert same_next.tolist() == [a == b for a, b in itertools.pairwise(sk)] + [False]
    # the merge's output keys: taken as machine words (4 or 8 bytes) or by Arrow
    idx = np.array(data.draw(st.lists(st.sampled_from(range(len(keys))), max_size=20)))
    got = take(idx.astype(np.int64))
    assert got.type == pa.binary()
    assert got.to_pylist() == [keys[i] for i in idx.tolist()]
