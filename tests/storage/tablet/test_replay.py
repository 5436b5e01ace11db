"""WAL replay (``bootstrap.replay``): exact equivalence of the replayed tablet with the
tablet before the crash, for the paths replay takes (Arrow records applied whole or in
part, compact row-path records, runs of them) and for the probe of replayed inserts
against the replayed MemRowSet (only needed when it holds rows of several stores)."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from kudusql.common.errors import CorruptionError, OperationalError
from kudusql.storage.fs import faults
from kudusql.storage.tablet import log_record
from kudusql.storage.tablet.tablet import Tablet
from tests.support import crash_writer as cw


def _rows(t: Tablet, snapshot: int | None = None) -> list[dict[str, Any]]:
    return t.scan(ordered=True, snapshot=snapshot).read_all().to_pylist()


def _batch(keys: list[int], v: int) -> pa.Table:
    return pa.table(
        {
            "k": pa.array(keys, pa.int64()),
            "v": pa.array([v + k for k in keys], pa.int64()),
            "s": pa.array([f"s{v}-{k}" for k in keys], pa.string()),
        }
    )


def _fail_flush() -> None:
    faults.inject("fsync", path_contains="rowsets")


@pytest.mark.parametrize("rows", [1, 3, 20])
def test_replayed_insert_over_a_key_deleted_in_the_frozen_memrowset(
    tmp_path: Any, rows: int
) -> None:
    """Row path (1, 3 rows) and Arrow path (20 rows): keys inserted and deleted in a
    MemRowSet whose flush failed, then inserted again in its successor, replay as one
    row each (a REINSERT of the replayed slot)."""
    path = str(tmp_path / "t")
    t = Tablet.create(path, cw.SCHEMA, cw.OPTIONS)
    keys = list(range(rows))
    t.insert(_batch(keys, 0))
    t.delete(_batch(keys, 0).select(["k"]))
    _fail_flush()
    try:
        with pytest.raises(OperationalError):
            t.flush()
    finally:
        faults.clear()
    t.insert(_batch(keys, 100))
    t.insert(_batch([k + 1000 for k in keys], 200))
    expect = _rows(t)
    t.abandon()
    t = Tablet.open(path, cw.OPTIONS)
    try:
        assert _rows(t) == expect
        assert t.update(_batch(keys, 300)).errors == []
        t.flush()
        expect = _rows(t)
        assert len(expect) == 2 * rows
    finally:
        t.close()
    t = Tablet.open(path, cw.OPTIONS)
    try:
        assert _rows(t) == expect
    finally:
        t.close()


@pytest.mark.parametrize("seed", range(4))
def test_replay_equals_the_tablet_before_the_crash(tmp_path: Any, seed: int) -> None:
    """Random batches of every size and operation (row path and Arrow records), with
    flushes and delta flushes between them: after a crash, the reopened tablet answers
    every snapshot taken before it exactly as the tablet did."""
    rnd = random.Random(seed)
    path = str(tmp_path / "t")
    t = Tablet.create(path, cw.SCHEMA, cw.OPTIONS.with_(wal_fsync="none"))
    snapshots: list[tuple[int, list[dict[str, Any]]]] = []
    for step in range(60):
        n = rnd.choice([1, 1, 2, 5, 8, 9, 40, 200])
        keys = rnd.sample(range(400), n)
        op = rnd.choice(["insert", "insert", "upsert", "update", "delete", "insert_ignore"])
        data = _batch(keys, step * 1000)
        if op == "delete":
            data = data.select(["k"])
        getattr(t, op)(data)
        r = rnd.random()
        if r < 0.08:
            t.flush()
        elif r < 0.14:
            t.flush_deltas()
        if step % 7 == 0:
            snap = t.mvcc.latest_snapshot()
            snapshots.append((snap, _rows(t, snap)))
    final = _rows(t)
    t.abandon()
    t = Tablet.open(path, cw.OPTIONS)
    try:
        assert _rows(t) == final
        for snap, rows in snapshots:
            assert _rows(t, snap) == rows
    finally:
        t.close()


def test_runs_of_row_path_records_replay_with_their_own_timestamps(tmp_path: Any) -> None:
    """Consecutive one-row records are appended to the MemRowSet as one run: each row
    keeps its record's timestamp and sequence number, so every earlier snapshot answers
    as before the crash; a record of another kind in between ends the run."""
    path = str(tmp_path / "t")
    t = Tablet.create(path, cw.SCHEMA, cw.OPTIONS.with_(wal_fsync="none"))
    snaps = []
    for k in range(30):
        t.insert(_batch([k], 0))
        if k == 10:
            t.update(_batch([3], 50))  # ends a run: the update finds k=3's slot
        if k == 20:
            t.delete(_batch([7], 0).select(["k"]))
        snaps.append((t.mvcc.latest_snapshot(), _rows(t)))
    t.abandon()
    t = Tablet.open(path, cw.OPTIONS)
    try:
        assert t.replay_stats.rows_replayed == 32
        for snap, rows in snaps:
            assert _rows(t, snap) == rows
        assert t.insert(_batch([7], 9)).errors == []  # a REINSERT of the deleted slot
        assert t.insert(_batch([8], 9)).errors[0].status == "AlreadyPresent"
    finally:
        t.close()


def test_a_logged_row_with_an_unknown_action_is_corruption(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record whose checksum holds but whose action code is none the write path
    knows (it would index its action tables out of range) fails the open clearly."""
    path = str(tmp_path / "t")
    t = Tablet.create(path, cw.SCHEMA, cw.OPTIONS)
    t.insert(_batch(list(range(20)), 0))
    real = log_record.DecidedBatch.encode

    def bad_action(self: log_record.DecidedBatch) -> bytes:
        self.action = np.full_like(self.action, 9)
        return real(self)

    monkeypatch.setattr(log_record.DecidedBatch, "encode", bad_action)
    t.update(_batch(list(range(20)), 7))
    monkeypatch.undo()
    t.abandon()
    with pytest.raises(CorruptionError, match="unknown action"):
        Tablet.open(path, cw.OPTIONS)
