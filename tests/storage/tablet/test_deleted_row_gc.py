"""The space of deleted rows comes back (issue 31, P1).

A row deleted before the ancient history mark (AHM) is invisible to every snapshot
still allowed, so nothing needs it: a merging compaction drops it
(``test_compaction.test_merge_purges_rows_deleted_before_the_ahm``), and a rowset that
no merge touches (one big rowset per tablet, the usual shape after a bulk load and a
compaction) is rewritten alone without its deleted rows: by ``COMPACT`` and ``GC``, and
by the maintenance manager once most of its rows are such ghosts, scored by the bytes
the rewrite frees. The checks: the size after delete + GC is close to that of a tablet
holding only the live rows, written fresh; the rows and the history after the mark
(scans at every snapshot since, diff scans between them) are unchanged by the rewrite,
and by a reopen after it.
"""

from __future__ import annotations

import itertools
import os
import random
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from kudusql.common.options import TabletOptions
from kudusql.storage.tablet.maintenance import MaintenanceManager
from kudusql.storage.tablet.tablet import Tablet
from tests.storage.tablet.test_compaction import HOUR_US, KV, Clock, by_key, drs_ids

OPTS = TabletOptions(
    rows_per_page=512,
    sync=False,
    history_max_age_s=3600,
    file_grace_s=0,
    flush_threshold_bytes=1 << 40,
)
N = 20_000


def rows_of(keys: np.ndarray) -> pa.Table:
    k = pa.array(keys, pa.int64())
    return pa.table(
        {
            "key": k,
            "val": pa.array((keys * 7) % 1000, pa.int32()),
            "s": pa.array([f"row-{x:08d}-" + "x" * 40 for x in keys.tolist()], pa.string()),
        }
    )


def keys_only(keys: np.ndarray | list[int]) -> pa.Table:
    return pa.table({"key": pa.array(keys, pa.int64())})


def data_bytes(t: Tablet) -> int:
    """Bytes of the tablet's rowset files on disk (replaced files deleted first)."""
    t.maintainer.delete_obsolete()
    base = os.path.join(t.path, "rowsets")
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(base) for f in files)


def fresh_bytes(path: str, keys: np.ndarray) -> int:
    """The data bytes of a tablet holding only ``keys``, written fresh and flushed."""
    t = Tablet.create(path, KV, OPTS)
    try:
        t.insert(rows_of(keys))
        t.flush()
        return data_bytes(t)
    finally:
        t.close()


def loaded(tmp_path: Any, clock: Clock, **opts: Any) -> tuple[Tablet, np.ndarray]:
    """A tablet of one rowset of N rows, 90% of them then deleted (flushed to a REDO
    file); returns it and the live keys."""
    t = Tablet.create(str(tmp_path / "t"), KV, OPTS.with_(**opts), clock=clock.hybrid)
    keys = np.arange(N, dtype=np.int64)
    t.insert(rows_of(keys))
    t.flush()
    t.delete(keys_only(keys[keys % 10 != 0]))
    t.flush_deltas()
    return t, keys[keys % 10 == 0]


def run_manager(t: Tablet, *, worker_process: bool) -> dict[str, int]:
    """Run the maintenance manager's ops one by one until it offers none worth it."""
    mm = MaintenanceManager(enabled=False, worker_process=worker_process)
    t.attach(mm)
    ran: dict[str, int] = {}
    try:
        for _ in range(50):
            op = mm.run_once()
            if op is None:
                return ran
            ran[op.name] = ran.get(op.name, 0) + 1
        raise AssertionError(f"maintenance never settled: {ran}")
    finally:
        mm.stop()


@pytest.mark.parametrize("how", ["compact", "gc", "compact_before_the_mark_then_gc", "manager"])
def test_space_of_deleted_rows_comes_back(tmp_path: Any, how: str) -> None:
    clock = Clock()
    t, live = loaded(tmp_path, clock)
    full = data_bytes(t)
    if how == "compact_before_the_mark_then_gc":
        t.run_maintenance(flush=False, compact=True, gc=False)  # the deletes stay: ghosts
        assert t.rowsets_info()[1]["rows"] == N
    clock.advance(2 * HOUR_US)
    expect = by_key(t)
    assert sorted(expect) == live.tolist()
    if how == "compact":
        t.run_maintenance(flush=False, compact=True, gc=False)
    elif how == "manager":
        ran = run_manager(t, worker_process=True)
        assert ran.get("deleted_row_gc") == 1, ran
    else:
        t.run_maintenance(flush=False, compact=False, gc=True)
    assert by_key(t) == expect
    (info,) = [r for r in t.rowsets_info() if r["kind"] == "diskrowset"]
    assert info["rows"] == info["live_rows"] == len(live)
    size = data_bytes(t)
    fresh = fresh_bytes(str(tmp_path / "fresh"), live)
    assert size < full / 4
    assert size <= 1.25 * fresh, (size, fresh, full)
    path = t.path
    t.close()
    t = Tablet.open(path, OPTS, clock=clock.hybrid)
    assert by_key(t) == expect
    t.close()


def test_the_manager_offers_the_rewrite_by_the_bytes_it_frees(tmp_path: Any) -> None:
    """Two rowsets, 30% and 80% of their rows deleted: nothing is offered before the
    mark; after it, the rewrite of the rowset mostly deleted, scored by about the bytes
    its deleted rows hold; running it rewrites that rowset only."""
    clock = Clock()
    t = Tablet.create(str(tmp_path / "t"), KV, OPTS, clock=clock.hybrid)
    a = np.arange(0, N // 2, dtype=np.int64)
    b = np.arange(N, N + N // 2, dtype=np.int64)
    for keys in (a, b):
        t.insert(rows_of(keys))
        t.flush()
    t.delete(keys_only(a[a % 10 < 3]))
    t.delete(keys_only(b[b % 10 < 8]))
    t.flush_deltas()

    def offered() -> list[Any]:
        return [o for o in t.maintenance_ops() if o.name == "deleted_row_gc"]

    assert offered() == []  # inside the history: the deleted rows are still visible
    clock.advance(2 * HOUR_US)
    (op,) = offered()
    ids = drs_ids(t)
    b_rowset = t.rowsets_info()[2]
    b_bytes = b_rowset["base_bytes"] + b_rowset["redo_bytes"]
    assert 0.6 * b_bytes <= op.data_retained <= b_bytes, (op.data_retained, b_bytes)
    assert op.perf_improvement == 0 and op.ram_anchored == 0
    expect = by_key(t)
    op.run()
    after = drs_ids(t)
    assert after[0] == ids[0] and ids[1] not in after and len(after) == 2
    assert by_key(t) == expect
    assert offered() == []
    # An explicit GC rewrites every rowset with rows deleted before the mark.
    t.run_maintenance(flush=False, compact=False, gc=True)
    assert all(r["rows"] == r["live_rows"] for r in t.rowsets_info()[1:])
    assert by_key(t) == expect
    t.close()


def diff_rows(t: Tablet, start: int, end: int) -> list[dict[str, Any]]:
    got = t.diff_scan(start, end).read_all().to_pylist()
    return sorted(got, key=lambda r: (r["key"], r["is_deleted"]))


@pytest.mark.parametrize("seed", range(4))
def test_rewrite_keeps_rows_and_history_after_the_mark(tmp_path: Any, seed: int) -> None:
    """Random inserts, updates, deletes and re-inserts over two hours of test time,
    with flushes, delta flushes and compactions between them: a model (a dict per
    snapshot) says what every snapshot holds. After the mark passes the first hour,
    rewriting every rowset without its rows deleted before the mark changes no answer
    at any snapshot since the mark, nor any diff scan between them."""
    rng = random.Random(seed)
    clock = Clock()
    t = Tablet.create(str(tmp_path / "t"), KV, OPTS.with_(rows_per_page=16), clock=clock.hybrid)
    model: dict[int, tuple[int, str]] = {}
    snaps: list[tuple[int, dict[int, tuple[int, str]]]] = []
    for step in range(24):
        live = sorted(model)
        gone = [k for k in range(400) if k not in model]
        new = rng.sample(gone, min(len(gone), rng.randint(5, 60)))
        if new:
            vals = [rng.randint(0, 999) for _ in new]
            strs = [f"v{step}-{k}" for k in new]
            t.insert(
                pa.table(
                    {
                        "key": pa.array(new, pa.int64()),
                        "val": pa.array(vals, pa.int32()),
                        "s": pa.array(strs, pa.string()),
                    }
                )
            )
            model.update({k: (v, s) for k, v, s in zip(new, vals, strs, strict=True)})
        upd = rng.sample(live, min(len(live), rng.randint(0, 30)))
        if upd:
            vals = [rng.randint(0, 999) for _ in upd]
            t.update(
                pa.table({"key": pa.array(upd, pa.int64()), "val": pa.array(vals, pa.int32())})
            )
            model.update({k: (v, model[k][1]) for k, v in zip(upd, vals, strict=True)})
        dead = rng.sample(sorted(model), min(len(model), rng.randint(0, 50)))
        if dead:
            t.delete(keys_only(dead))
            for k in dead:
                del model[k]
        what = rng.random()
        if what < 0.3:
            t.flush()
        elif what < 0.5:
            t.flush_deltas()
        elif what < 0.6 and drs_ids(t):
            t.major_delta_compaction(rng.choice(drs_ids(t)))
        elif what < 0.7 and len(drs_ids(t)) >= 2:
            t.compact(rng.sample(drs_ids(t), 2))
        snaps.append((t.latest_timestamp(), dict(model)))
        clock.advance(5 * 60 * 1_000_000)  # five minutes
    t.flush()
    t.flush_deltas()
    clock.advance(HOUR_US // 2)  # the mark passes the first hour and a half of history
    ahm = t.ancient_history_mark()
    valid = [(ts, m) for ts, m in snaps if ts >= ahm]
    assert 4 <= len(valid) < len(snaps)

    def answers(t: Tablet) -> tuple[list[dict[int, Any]], list[list[dict[str, Any]]]]:
        scans = [by_key(t, snapshot=ts) for ts, _ in valid]
        diffs = [diff_rows(t, a, b) for (a, _), (b, _) in itertools.pairwise(valid)]
        return scans, diffs

    before = answers(t)
    assert before[0] == [m for _, m in valid]  # the model agrees with the tablet
    assert sum(d.deleted_before(ahm) for d in t._rowsets.drs) > 0
    t.run_maintenance(flush=False, compact=False, gc=True)
    assert sum(d.deleted_before(ahm) for d in t._rowsets.drs) == 0
    assert answers(t) == before
    path = t.path
    t.close()
    t = Tablet.open(path, OPTS, clock=clock.hybrid)
    assert answers(t) == before
    t.close()


def test_ghosts_inside_the_history_do_not_loop_major_compactions(tmp_path: Any) -> None:
    """A rowset mostly deleted inside the history keeps its ghosts (their deletes are
    visible history): a major delta compaction, which would write the same REDO file
    of deletes again, is not offered, so the manager settles (it ran one at every
    poll before: the REDO bytes stayed above the major compaction ratio)."""
    clock = Clock()
    t, _ = loaded(tmp_path, clock)
    expect = by_key(t)
    ran = run_manager(t, worker_process=False)
    assert "major_delta_compaction" not in ran, ran
    assert t.rowsets_info()[1]["rows"] == N
    assert by_key(t) == expect
    t.close()
