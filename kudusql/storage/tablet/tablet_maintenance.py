"""Compactions, history GC and the maintenance manager's view of a tablet.

``TabletMaintenance`` is the part of ``Tablet`` that rewrites rowsets in the background:
minor and major delta compactions, merging compactions (inputs chosen by
``compaction_policy``), UNDO, deleted-rowset and deleted-row GC, the list of
maintenance ops with their scores that a ``MaintenanceManager`` chooses from, and the
deferred deletion of files that nothing reads any more. The transformations themselves
are pure functions in ``compaction.py``; this module reads their inputs, writes their
outputs and swaps them in: new files first, then the superblock (atomically), then the
served rowsets (under the write lock). Obsolete files are deleted only once no scan of
this process holds the rowset objects that read them and the grace period for other
processes has passed.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import shutil
import time
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from kudusql.common.errors import InternalError, ProgrammingError
from kudusql.common.hybrid_time import to_micros
from kudusql.storage.fs.files import fsync_dir
from kudusql.storage.tablet.compaction_policy import (
    PolicyMemo,
    PolicyOptions,
    RowSetInfo,
    Selection,
    average_height,
)
from kudusql.storage.tablet.compaction_worker import (
    CompactionWorker,
    DeltaCompactionJob,
    DeltaCompactionResult,
    MergeJob,
)
from kudusql.storage.tablet.delta import concat_deltas
from kudusql.storage.tablet.deltamemstore import deltas_of
from kudusql.storage.tablet.diskrowset import DeltaFileMeta, DiskRowSet, RowSetMeta, seed_keys
from kudusql.storage.tablet.maintenance import (
    MaintenanceManager,
    MaintenanceOp,
    MaintenanceRecord,
    flush_score,
)
from kudusql.storage.tablet.rowset_writer import rowset_rows
from kudusql.storage.tablet.rowsets import RowSets

if TYPE_CHECKING:
    from kudusql.storage.tablet.tablet import Tablet

log = logging.getLogger(__name__)
_T = TypeVar("_T")


def delta_bytes(m: RowSetMeta) -> int:
    return sum(f.stats.size for f in (*m.undo_files, *m.redo_files))


def foldable_redo(m: RowSetMeta) -> list[DeltaFileMeta]:
    """The REDO files a major delta compaction would fold into the base: those with an
    event other than a DELETE. A file of DELETEs only (what a major delta compaction
    leaves: the ghosts' final deletes) would be written again as it is, so counting it
    offered the same compaction at every poll while the deleted rows were in the
    history (and for ever before ``deleted_row_gc``)."""
    return [f for f in m.redo_files if f.stats.num_events > f.stats.delete_count]


class TabletMaintainer:
    """Compactions, GC and maintenance ops of one ``Tablet`` (which delegates to it)."""

    #: Maintenance records kept per tablet.
    _LOG_KEEP = 1000
    #: Rowsets one minor delta compaction op covers at most.
    _MINOR_PER_OP = 16

    def __init__(self, tablet: Tablet) -> None:
        self.t = tablet
        self._obsolete: list[tuple[float, list[weakref.ref[DiskRowSet]], Sequence[str]]] = []
        # The last policy run, reused while it still holds (see ``PolicyMemo``).
        self._policy_memo = PolicyMemo()

    # -- compactions and history GC (the transformations are in compaction.py) ---------------
    def minor_delta_compaction(
        self, rowset_id: int, *, worker: CompactionWorker | None = None
    ) -> bool:
        """Merge the REDO DeltaFiles of one DiskRowSet into one; False if it has < 2.
        The files are written in ``worker``'s process when given."""
        return self._maintain(self._delta_compaction, rowset_id, False, worker)

    def _minor_delta_compactions(
        self, rowset_ids: Sequence[int], worker: CompactionWorker | None = None
    ) -> int:
        """Minor delta compactions of several rowsets (those still served, with at least
        two REDO files), swapped in under one superblock save; how many ran. (Saved one
        by one, the superblock, which lists every rowset's files, was written up to 16
        times per op: with ~90 rowsets, a quarter of the maintenance thread's time.)"""
        return self._maintain(self._minor_batch, rowset_ids, worker)

    def _minor_batch(self, rowset_ids: Sequence[int], worker: CompactionWorker | None) -> int:
        served = {d.id: d for d in self.t._rowsets.drs}
        done: list[tuple[DiskRowSet, RowSetMeta]] = []
        try:
            for rid in rowset_ids:
                drs = served.get(rid)
                if drs is None or len(drs.meta.redo_files) < 2:
                    continue
                t0 = time.perf_counter()
                res = self._run_delta_job(drs, False, worker)
                done.append((drs, res.meta))
                self.record("minor_delta_compaction", t0, res.bytes_read, res.bytes_written)
        finally:  # what was written is swapped in, even if a later rowset failed
            if done:
                self._finish_rewrites(done)
        return len(done)

    def major_delta_compaction(
        self, rowset_id: int, *, worker: CompactionWorker | None = None
    ) -> bool:
        """Fold one DiskRowSet's REDO DeltaFiles into new base files of the columns they
        update, keeping rowids; history becomes UNDO records (those older than the ancient
        history mark are dropped). False if the rowset has no REDO files. The files are
        written in ``worker``'s process when given."""
        return self._maintain(self._delta_compaction, rowset_id, True, worker)

    def _delta_compaction(
        self, rowset_id: int, major: bool, worker: CompactionWorker | None
    ) -> bool:
        drs = self._rowset(rowset_id)
        if len(drs.meta.redo_files) < (1 if major else 2):
            return False
        t0 = time.perf_counter()
        res = self._run_delta_job(drs, major, worker)
        self._finish_rewrites([(drs, res.meta)])
        name = "major_delta_compaction" if major else "minor_delta_compaction"
        self.record(name, t0, res.bytes_read, res.bytes_written)
        return True

    def _run_delta_job(
        self, drs: DiskRowSet, major: bool, worker: CompactionWorker | None
    ) -> DeltaCompactionResult:
        """Write one rowset's delta compaction (in ``worker``'s process when given)."""
        job = DeltaCompactionJob(
            self.t.path,
            self.t.schema,
            drs.meta.copy(),
            self.t.ancient_history_mark(),
            self.t.options.sync,
            major,
        )
        return worker.run(job) if worker is not None else job.run(drs)

    def compact(
        self, rowset_ids: Sequence[int] | None = None, *, worker: CompactionWorker | None = None
    ) -> int:
        """Merging compaction: merge DiskRowSets by key into new ones (rolling at the
        target size), dropping rows deleted before the ancient history mark and folding
        deleted copies of a key into one row. Without ``rowset_ids`` the budgeted
        height-minimizing policy picks the inputs. Returns how many rowsets it merged.
        The reading, merging and writing run in ``worker``'s process when given (see
        compaction_worker.py), else in this thread.

        Writes go on meanwhile: mutations of the inputs that arrive during the merge move
        to the outputs when they are swapped in (under the write lock).
        """
        return self._maintain(self._compact, rowset_ids, worker)

    def _compact(
        self,
        rowset_ids: Sequence[int] | None,
        worker: CompactionWorker | None,
        op_name: str = "merge_compaction",
    ) -> int:
        if rowset_ids is None:
            inputs = [self._rowset(i) for i in self._policy_selection()]
        else:
            inputs = [self._rowset(i) for i in dict.fromkeys(rowset_ids)]
        if not inputs or (rowset_ids is None and len(inputs) < 2):
            return 0
        t0 = time.perf_counter()
        for drs in inputs:  # the inputs become files only; later mutations are late
            with self.t._write_lock:
                frozen = drs.frozen_dms or (None if drs.dms.is_empty() else drs.freeze_dms())
            if frozen is not None:
                self.t._flush_dms(drs, frozen)
        job = MergeJob(
            self.t.path,
            self.t.schema,
            [d.meta.copy() for d in inputs],
            self.t.ancient_history_mark(),
            self.t.meta.next_rowset_id,
            self.t._write_opts(),
            want_keys=self.t.cache is not None,
        )
        merged = worker.run(job) if worker is not None else job.run(inputs, self.t._pool)
        metas, first_id = merged.metas, job.first_id
        # Opened and seeded before the lock; unlisted until swapped in below.
        new = [DiskRowSet(self.t.path, m, self.t.cache, self.t._pending) for m in metas]
        seed_keys(new, merged.keys)
        with self.t._write_lock:
            self.t.check_healthy()  # before moving late mutations; the outputs stay unlisted
            late_parts = []
            # The writes made during the merge, cut from their batches in one pass (this
            # holds the write lock; see ``deltas_of``).
            stores = [[p for p in (d.frozen_dms, d.dms) if p is not None] for d in inputs]
            flat = iter(deltas_of([p for ps in stores for p in ps]))
            for ps, drs, rowid_map in zip(stores, inputs, merged.rowid_maps, strict=True):
                late = concat_deltas([next(flat) for _ in ps])
                if len(late):
                    target = rowid_map[late.rowid]
                    if (target < 0).any():
                        raise InternalError(
                            f"rowset {drs.id}: a mutation during the compaction names "
                            "a row the compaction dropped"
                        )
                    late_parts.append(late.map_rowids(rowid_map))
            if late_parts:
                self.t._migrate(concat_deltas(late_parts).sorted_by_seq(), new)
            self._publish(remove=inputs, add=new, next_rowset_id=first_id + len(metas))
        self._retire(inputs, [d.dir for d in inputs])
        read = sum(d.meta.base_bytes + delta_bytes(d.meta) for d in inputs)
        written = sum(m.base_bytes + delta_bytes(m) for m in metas)
        self.record(
            op_name,
            t0,
            read,
            written,
            f"{len(inputs)} -> {len(metas)} rowsets, {merged.rows_dropped} rows purged",
        )
        return len(inputs)

    def gc_undo(self) -> int:
        """Delete UNDO DeltaFiles entirely older than the ancient history mark; returns
        the bytes they held."""
        return self._maintain(self._gc_undo)

    def _gc_undo(self) -> int:
        t0 = time.perf_counter()
        ahm = self.t.ancient_history_mark()
        freed = 0
        rewrites: list[tuple[DiskRowSet, RowSetMeta]] = []
        for drs in self.t._rowsets.drs:
            old = [f for f in drs.meta.undo_files if f.stats.max_ts < ahm]
            if not old:
                continue
            meta = drs.meta.copy()
            meta.undo_files = [f for f in meta.undo_files if f.stats.max_ts >= ahm]
            rewrites.append((drs, meta))
            freed += sum(f.stats.size for f in old)
        if rewrites:  # one superblock save for every rowset
            self._finish_rewrites(rewrites)
        if freed:
            self.record("undo_delta_gc", t0, 0, 0, f"{freed} bytes freed")
        return freed

    def gc_deleted_rowsets(self) -> int:
        """Drop DiskRowSets with no live row whose last change is older than the ancient
        history mark (no snapshot still allowed can see any of their rows)."""
        return self._maintain(self._gc_deleted_rowsets)

    def _gc_deleted_rowsets(self) -> int:
        t0 = time.perf_counter()
        ahm = self.t.ancient_history_mark()
        with self.t._write_lock:
            dead = [
                d for d in self.t._rowsets.drs if d.live_count() == 0 and d.last_change_ts() < ahm
            ]
            if not dead:
                return 0
            self._publish(remove=dead, add=())
        self._retire(dead, [d.dir for d in dead])
        freed = sum(d.meta.base_bytes + delta_bytes(d.meta) for d in dead)
        self.record("deleted_rowset_gc", t0, 0, 0, f"{len(dead)} rowsets, {freed} bytes")
        return len(dead)

    def gc_deleted_rows(
        self,
        rowset_ids: Sequence[int] | None = None,
        *,
        worker: CompactionWorker | None = None,
    ) -> int:
        """Rewrite DiskRowSets without their rows deleted before the ancient history
        mark: a merging compaction of each alone (``rowset_ids``, default every rowset
        with such a row). Rows and history after the mark stay as they were,
        and the other rows' UNDO events older than the mark go too. Returns how many
        rowsets were rewritten. No merge may touch a rowset that no other overlaps, and
        a major delta compaction keeps rowids, so deleted rows (ghosts) otherwise stay
        for ever."""
        return self._maintain(self._gc_deleted_rows, rowset_ids, worker)

    def _gc_deleted_rows(
        self, rowset_ids: Sequence[int] | None, worker: CompactionWorker | None
    ) -> int:
        ahm = self.t.ancient_history_mark()
        if rowset_ids is None:
            rowset_ids = [d.id for d in self.t._rowsets.drs if d.deleted_before(ahm)]
        done = 0
        for rid in rowset_ids:
            if any(d.id == rid for d in self.t._rowsets.drs):  # still served
                done += self._compact([rid], worker, "deleted_row_gc")
        return done

    def _maintain(self, op: Callable[..., _T], *args: Any) -> _T:
        """Run a maintenance op under the maintenance lock, then delete the files it
        made obsolete if nothing holds them any more (the op's locals are gone by then)."""
        self.t._check_writable()
        with self.t._maint_lock:
            result = op(*args)
        self.delete_obsolete()
        return result

    def _rowset(self, rowset_id: int) -> DiskRowSet:
        for d in self.t._rowsets.drs:
            if d.id == rowset_id:
                return d
        raise ProgrammingError(f"tablet {self.t.path} has no DiskRowSet {rowset_id}")

    def _finish_rewrites(self, rewrites: Sequence[tuple[DiskRowSet, RowSetMeta]]) -> None:
        """Swap in rewritten rowsets (same ids, new files) under one superblock save and
        retire their old files."""
        if self.t.options.sync:
            for drs, _ in rewrites:
                fsync_dir(drs.dir)
        with self.t._write_lock:
            self._publish(
                remove=[drs for drs, _ in rewrites],
                add=[drs.derive(meta) for drs, meta in rewrites],
            )
        for drs, meta in rewrites:
            gone = drs.meta.file_names() - meta.file_names()
            drs.retire(gone)
            self._retire([drs], [os.path.join(drs.dir, f) for f in sorted(gone)])

    def _publish(
        self,
        remove: Sequence[DiskRowSet],
        add: Sequence[DiskRowSet],
        next_rowset_id: int | None = None,
    ) -> None:
        """Replace rowsets in the superblock and the served set (under the write lock).
        A rowset that keeps its id takes the place of the one it replaces."""
        self.t.check_healthy()
        rs = self.t._rowsets
        gone = {id(d) for d in remove}
        if not gone <= {id(d) for d in rs.drs}:
            # Only a reload from disk under this op could do that (``Tablet._healthy``
            # waits for the maintenance lock); publishing would list the inputs twice.
            ids = [d.id for d in remove]
            raise InternalError(f"tablet {self.t.path}: rowsets {ids} changed under this operation")
        same_id = {d.id: d for d in add}
        drs: list[DiskRowSet] = []
        for d in rs.drs:
            if id(d) not in gone:
                drs.append(d)
            elif d.id in same_id:
                drs.append(same_id.pop(d.id))
        drs.extend(same_id.values())
        meta = self.t.meta
        saved = (list(meta.rowsets), meta.next_rowset_id)
        meta.rowsets = [d.meta for d in drs]
        if next_rowset_id is not None:
            meta.next_rowset_id = next_rowset_id
        try:
            self.t._save_meta()
        except BaseException:
            meta.rowsets, meta.next_rowset_id = saved
            raise
        self.t._rowsets = RowSets(rs.mrs, rs.frozen, tuple(drs))

    def _retire(self, objs: Sequence[DiskRowSet], paths: Sequence[str]) -> None:
        """Delete files no rowset lists any more once no scan of this process holds the
        rowset objects that read them and the grace period for other processes is over.
        Their cached pages go now (only scans that captured ``objs`` still read them,
        past the cache: ``DiskRowSet.retire``), and again at the deletion, in case such
        a scan cached one meanwhile."""
        for o in objs:
            if o.dir in paths:  # the whole rowset (else ``_finish_rewrites`` named files)
                o.retire()
        if paths:
            self.t.cache.invalidate_paths(paths)
            refs = [weakref.ref(o) for o in objs]
            self._obsolete.append((time.monotonic() + self.t.options.file_grace_s, refs, paths))

    def delete_obsolete(self) -> None:
        now = time.monotonic()
        keep = []
        deleted: list[str] = []
        for deadline, refs, paths in self._obsolete:
            if now < deadline or any(r() is not None for r in refs):
                keep.append((deadline, refs, paths))
                continue
            for p in paths:
                if os.path.isdir(p):
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(p)
            deleted.extend(paths)
        self._obsolete = keep
        if deleted:
            self.t.cache.invalidate_paths(deleted)

    def _policy_selection(self) -> tuple[int, ...]:
        return self._policy(self.t.ancient_history_mark()).ids

    def _rowset_infos(self, ahm: int) -> list[RowSetInfo]:
        """What the compaction policy knows of each non-empty DiskRowSet."""
        return [
            RowSetInfo(
                d.id,
                d.meta.size_for_policy,
                d.meta.min_key,
                d.meta.max_key,
                sum(f.stats.size for f in d.meta.undo_files),
                sum(f.stats.size for f in d.meta.undo_files if f.stats.max_ts < ahm),
            )
            for d in self.t._rowsets.drs
            if d.num_rows
        ]

    def average_height(self) -> float:
        """Kudu's ``average_diskrowset_height``: how many DiskRowSets cover a key, on
        average over the data-weighted key space (1.0 when none overlap)."""
        return average_height(self._rowset_infos(self.t.ancient_history_mark()))

    def _policy(self, ahm: int) -> Selection:
        infos = self._rowset_infos(ahm)
        o = self.t.options
        opts = PolicyOptions(
            budget_mb=o.compaction_budget_mb,
            target_rowset_bytes=o.rowset_target_bytes,
            small_rowset_merge_inputs=o.compaction_small_rowset_merge_inputs,
        )
        sel = self._policy_memo.select(infos, opts)
        chosen = sorted((i for i in infos if i.id in sel.ids), key=lambda i: i.min_key)
        disjoint = all(a.max_key < b.min_key for a, b in itertools.pairwise(chosen))
        outputs = self._merge_outputs(sel.ids)
        if disjoint and outputs >= len(chosen):
            # Merging rowsets that do not overlap only pays when it makes fewer of them:
            # the output rolls at the target size, so this merge would rewrite the same
            # layout again and again.
            return Selection((), 0.0)
        return sel

    def _merge_outputs(self, ids: Sequence[int]) -> int:
        """How many rowsets merging ``ids`` writes, by the writer's own rolling rule
        (whole pages of about the target size, from the inputs' raw bytes per row)."""
        wanted = set(ids)
        drs = [d for d in self.t._rowsets.drs if d.id in wanted]
        rows = sum(d.num_rows for d in drs)
        if not rows:
            return 0
        raw = sum(d.meta.raw_bytes or d.meta.base_bytes for d in drs)
        per_rowset = rowset_rows(raw // rows, self.t._write_opts()) or rows
        return -(-rows // per_rowset)

    def record(self, op: str, t0: float, read: int, written: int, note: str = "") -> None:
        rec = MaintenanceRecord(
            op, self.t.path, time.time(), time.perf_counter() - t0, read, written, note
        )
        self.t.maintenance_log.append(rec)
        del self.t.maintenance_log[: -self._LOG_KEEP]
        if self.t.maintenance is not None:
            self.t.maintenance.record(rec)
        log.info("tablet %s: %s", self.t.path, rec.describe())

    # -- the maintenance manager's view (see maintenance.py) ---------------------------------
    def attach(self, manager: MaintenanceManager) -> None:
        """Let ``manager`` schedule this tablet's maintenance and throttle its writes."""
        self.t.maintenance = manager
        manager.register(self.t)

    def memory_bytes(self) -> int:
        """Memory held by the MemRowSets and DeltaMemStores."""
        rs = self.t._rowsets
        n = rs.mrs.bytes + sum(f.bytes for f in rs.frozen) + self.t._pending.bytes
        for d in rs.drs:  # settled bytes: this must not settle (see ``throttle``)
            # the live store first: a freeze in between counts one store twice, not none
            live = d.dms
            frozen = d.frozen_dms  # read once: a delta flush may clear it meanwhile
            n += live.settled_bytes + (frozen.settled_bytes if frozen is not None else 0)
        return n

    def maintenance_ops(self) -> list[MaintenanceOp]:
        """The operations worth running now, each with what it would gain."""
        if self.t.read_only or self.t._closed or self.t._failed is not None:
            return []
        o, rs, path = self.t.options, self.t._rowsets, self.t.path
        now = to_micros(self.t.clock.peek())

        def age_s(ts: int | None) -> float:
            return 0.0 if ts is None else max(0.0, (now - to_micros(ts)) / 1e6)

        ops: list[MaintenanceOp] = []
        mm = self.t.maintenance
        worker = mm.compaction_worker() if mm is not None else None
        # Each flush op's WAL is what its stores anchor: the segments from their first
        # event on. Counted as the whole WAL (which the file grace period also keeps),
        # both flush ops stayed above ``log_target_replay_bytes`` after flushing: with
        # the default 60 s grace a fast writer passed 1 GiB of WAL, and the manager then
        # flushed the MemRowSet at every poll, a rowset of a few thousand rows each time
        # (throughput fell to a third).
        mem = rs.mrs.bytes + sum(f.bytes for f in rs.frozen)
        if rs.frozen or not rs.mrs.is_empty():
            mems = (rs.mrs, *rs.frozen)
            oldest = min((m.min_ts for m in mems if m.min_ts), default=None)
            score = flush_score(mem, age_s(oldest), o.flush_threshold_bytes, o.flush_threshold_s)
            first = min((m.min_seq for m in mems if m.min_seq is not None), default=None)
            wal = self.t.wal_anchored(first)
            ops.append(
                MaintenanceOp(
                    "flush_mrs", path, lambda: self.t.flush(worker=worker), mem, wal, 0, score
                )
            )
        # Each DeltaMemStore is scored on its own, as Kudu scores the best one to
        # flush: a store is due at the flush size or age. Scored as one pool (every
        # store flushed once their sum reached the size), random updates made every
        # store of the tablet a REDO file each time the pool filled, so files (and the
        # minor compactions that fold them) grew with the rowset count. The op flushes
        # in one job every store past half of either threshold, so that stores filled
        # alike are flushed together (a job per store as each came due was an op a
        # second, each reading the write batches its stores share); when none is due
        # (the op was chosen to free memory or log), all of them.
        size, score, ripe = 0, 0.0, []
        first_seqs: dict[int, int] = {}  # rowset id -> its live store's first event
        half_bytes, half_s = o.flush_threshold_bytes / 2, o.flush_threshold_s / 2
        for d in rs.drs:
            x = d.dms
            if x.is_empty():
                continue
            size += x.bytes
            if x.min_seq is not None:
                first_seqs[d.id] = x.min_seq
            age = age_s(x.min_ts)
            score = max(
                score, flush_score(x.bytes, age, o.flush_threshold_bytes, o.flush_threshold_s)
            )
            if x.bytes >= half_bytes or age >= half_s:
                ripe.append(d.id)
        if size:
            only = ripe if score > 0 else None
            # The WAL this op frees is what the stores it flushes anchor: a store left
            # out (not ripe) keeps its segments, and counting them would choose the op
            # for the log again at every poll until that store ripened.
            flushed = first_seqs.values() if only is None else (first_seqs.get(i) for i in only)
            first = min((f for f in flushed if f is not None), default=None)
            ops.append(
                MaintenanceOp(
                    "flush_deltas",
                    path,
                    lambda: self.t.flush_deltas(worker=worker, rowset_ids=only),
                    size,
                    self.t.wal_anchored(first),
                    0,
                    score,
                )
            )
        ahm = self.t.ancient_history_mark()
        # One op merges the REDO files of the rowsets with the most of them (up to
        # _MINOR_PER_OP): random updates add a file to every rowset per delta flush, so
        # one rowset per turn would fall behind as the rowset count grows.
        due = [d for d in rs.drs if len(d.meta.redo_files) >= max(2, o.minor_compaction_min_files)]
        if due:
            due.sort(key=lambda d: len(d.meta.redo_files), reverse=True)
            score = min(1.0, len(due[0].meta.redo_files) / o.minor_compaction_max_files)
            minor_ids = [d.id for d in due[: self._MINOR_PER_OP]]
            ops.append(
                MaintenanceOp(
                    "minor_delta_compaction",
                    path,
                    lambda: self._minor_delta_compactions(minor_ids, worker),
                    perf_improvement=score,
                )
            )
        ratios = [
            (sum(f.stats.size for f in foldable) / max(1, d.meta.base_bytes), d.id)
            for d in rs.drs
            if (foldable := foldable_redo(d.meta))
        ]
        if ratios:
            ratio, rid = max(ratios)
            if ratio >= o.major_compaction_min_ratio:
                ops.append(
                    MaintenanceOp(
                        "major_delta_compaction",
                        path,
                        lambda: self.major_delta_compaction(rid, worker=worker),
                        perf_improvement=min(1.0, ratio),
                    )
                )
        sel = self._policy(ahm)
        if len(sel.ids) >= 2:
            ids = sel.ids
            ops.append(
                MaintenanceOp(
                    "merge_compaction",
                    path,
                    lambda: self.compact(ids, worker=worker),
                    perf_improvement=sel.quality,
                )
            )
        undo_gc = sum(
            f.stats.size for d in rs.drs for f in d.meta.undo_files if f.stats.max_ts < ahm
        )
        if undo_gc:
            ops.append(MaintenanceOp("undo_delta_gc", path, self.gc_undo, data_retained=undo_gc))
        dead = sum(
            d.meta.base_bytes + delta_bytes(d.meta) + 1
            for d in rs.drs
            if d.live_count() == 0 and d.last_change_ts() < ahm
        )
        if dead:
            ops.append(
                MaintenanceOp(
                    "deleted_rowset_gc", path, self.gc_deleted_rowsets, data_retained=dead
                )
            )
        # The rowset whose rewrite without its rows deleted before the mark frees the
        # most, among those where they are at least the threshold fraction of its rows.
        frees = [
            (freed, d.id)
            for d in rs.drs
            if (freed := self._deleted_rows_bytes(d, ahm, o.deleted_row_gc_min_fraction))
        ]
        if frees:
            freed, rid = max(frees)
            ops.append(
                MaintenanceOp(
                    "deleted_row_gc",
                    path,
                    lambda: self.gc_deleted_rows([rid], worker=worker),
                    data_retained=freed,
                )
            )
        return ops

    @staticmethod
    def _deleted_rows_bytes(d: DiskRowSet, ahm: int, min_fraction: float) -> int:
        """About the bytes rewriting ``d`` without its rows deleted before ``ahm`` frees
        (their share of its files), 0 unless they are at least ``min_fraction`` of its
        rows, and for a rowset that ``deleted_rowset_gc`` drops whole.

        Asked of every rowset at every poll, it reads the REDO files' statistics only:
        the deletes of the files wholly older than the mark, less their reinserts (a
        DiskRowSet's rows are never inserted again after a delete, but for the rare
        REINSERT of a frozen MemRowSet row that moved to it). The rewrite itself drops
        exactly the rows deleted before the mark."""
        n = d.num_rows
        if not n:
            return 0
        old = [f.stats for f in d.meta.redo_files if f.stats.max_ts < ahm]
        deleted = sum(s.delete_count - s.reinsert_count for s in old)
        if deleted < min_fraction * n or (d.live_count() == 0 and d.last_change_ts() < ahm):
            return 0
        return int(min(deleted, n) / n * (d.meta.base_bytes + delta_bytes(d.meta)))

    def run_maintenance(self, *, flush: bool = True, compact: bool = True, gc: bool = True) -> None:
        """Run maintenance now: flush memory; merge rowsets while the policy finds
        overlap, rewrite rowsets without their rows deleted before the ancient history
        mark and fold every other rowset's REDO files into its base; then history GC
        (ancient UNDO files, rowsets with no live row, and again the rewrites: GC
        alone must give the space of deleted rows back)."""
        if flush:
            self.t.flush()
            self.t.flush_deltas()
        if compact:
            count = len(self.t._rowsets.drs)
            while self.compact() >= 2:
                now = len(self.t._rowsets.drs)
                if now >= count:  # no progress: stop rather than rewrite the same layout
                    break
                count = now
            self.gc_deleted_rows()
            for d in list(self.t._rowsets.drs):
                if foldable_redo(d.meta):
                    self.major_delta_compaction(d.id)
        if gc:
            self.gc_undo()
            self.gc_deleted_rowsets()
            self.gc_deleted_rows()
