"""Compactions and history GC of a tablet, through the tablet's public interface.

``TabletMaintainer`` rewrites a tablet's rowsets in the background: minor and major
delta compactions, merging compactions (inputs chosen by ``compaction_policy``), UNDO,
deleted-rowset and deleted-row GC, and the deferred deletion of files that nothing reads
any more. The transformations themselves are pure functions in ``compaction.py``; this
module reads their inputs, writes their outputs and has the tablet swap them in: new
files first, then the superblock (atomically), then the served rowsets (under the write
lock, ``MaintainedTablet.rowset_swap``). Obsolete files are deleted only once no scan of
this process holds the rowset objects that read them and the grace period for other
processes has passed.

It sees the tablet only as a ``MaintainedTablet``: the public members this module and
``tablet_mm_ops`` (which scores the ops and runs them) use, and nothing else. tablet.py
imports this module, never the other way round.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import shutil
import time
import weakref
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

from kudusql.common.errors import InternalError, ProgrammingError
from kudusql.common.hybrid_time import HybridClock
from kudusql.common.options import TabletOptions
from kudusql.common.schema import Schema
from kudusql.storage.cfile import BlockCache
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
from kudusql.storage.tablet.delta import Deltas, concat_deltas
from kudusql.storage.tablet.deltamemstore import deltas_of
from kudusql.storage.tablet.diskrowset import DeltaFileMeta, DiskRowSet, RowSetMeta, seed_keys
from kudusql.storage.tablet.maintenance import MaintenanceManager, MaintenanceRecord
from kudusql.storage.tablet.metadata import TabletMeta
from kudusql.storage.tablet.rowset_writer import RowSetWriteOptions, rowset_rows
from kudusql.storage.tablet.rowsets import RowSets

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


class RowSetSwap(Protocol):
    """A tablet's served rowsets while its write lock is held (``rowset_swap``): what
    is served now, and the only way maintenance changes it."""

    @property
    def served(self) -> RowSets:
        """The rowsets served now (nothing changes them while this is held)."""
        ...

    def migrate(self, late: Deltas, new: Sequence[DiskRowSet]) -> None:
        """Move mutations that reached stores being replaced (rowid = position in the
        concatenated ``new`` rowsets) to ``new`` and write them out at once."""
        ...

    def replace(
        self, remove: Sequence[DiskRowSet], add: Sequence[DiskRowSet], *, next_rowset_id: int | None
    ) -> None:
        """Save a superblock listing ``add`` instead of ``remove`` (and the next rowset id,
        when given), then serve them. A rowset that keeps its id takes the place of the
        one it replaces. Raises if the tablet has failed or ``remove`` is not served."""
        ...


class MaintainedTablet(Protocol):
    """What compactions, GC and the maintenance ops use of a ``Tablet``: public members
    only (``Tablet`` is checked against this where it creates its maintainer)."""

    path: str
    schema: Schema
    options: TabletOptions
    meta: TabletMeta
    cache: BlockCache
    clock: HybridClock
    maintenance: MaintenanceManager | None
    maintenance_log: list[MaintenanceRecord]

    @property
    def maintainable(self) -> bool:
        """Open, writable and not failed: the tablet offers and runs maintenance."""
        ...

    @property
    def rowsets(self) -> RowSets: ...
    @property
    def pool(self) -> ThreadPoolExecutor: ...
    def ancient_history_mark(self) -> int: ...
    def check_healthy(self) -> None: ...
    def maintaining(self) -> contextlib.AbstractContextManager[None]: ...
    def rowset_swap(self) -> contextlib.AbstractContextManager[RowSetSwap]: ...
    def open_rowsets(self, metas: Sequence[RowSetMeta]) -> list[DiskRowSet]: ...
    def flush_rowset_dms(self, drs: DiskRowSet) -> None: ...
    def flush(self, *, worker: CompactionWorker | None = None) -> int: ...
    def flush_deltas(
        self, *, worker: CompactionWorker | None = None, rowset_ids: Collection[int] | None = None
    ) -> int: ...
    def wal_anchored(self, min_seq: int | None) -> int: ...


class TabletMaintainer:
    """Compactions and GC of one tablet (which delegates to it)."""

    #: Maintenance records kept per tablet.
    _LOG_KEEP = 1000

    def __init__(self, tablet: MaintainedTablet) -> None:
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

    def minor_delta_compactions(
        self, rowset_ids: Sequence[int], worker: CompactionWorker | None = None
    ) -> int:
        """Minor delta compactions of several rowsets (those still served, with at least
        two REDO files), swapped in under one superblock save; how many ran. (Saved one
        by one, the superblock, which lists every rowset's files, was written up to 16
        times per op: with ~90 rowsets, a quarter of the maintenance thread's time.)"""
        return self._maintain(self._minor_batch, rowset_ids, worker)

    def _minor_batch(self, rowset_ids: Sequence[int], worker: CompactionWorker | None) -> int:
        served = {d.id: d for d in self.t.rowsets.drs}
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
            self.t.flush_rowset_dms(drs)
        job = MergeJob(
            self.t.path,
            self.t.schema,
            [d.meta.copy() for d in inputs],
            self.t.ancient_history_mark(),
            self.t.meta.next_rowset_id,
            RowSetWriteOptions.of(self.t.options),
            want_keys=self.t.cache is not None,
        )
        merged = worker.run(job) if worker is not None else job.run(inputs, self.t.pool)
        metas, first_id = merged.metas, job.first_id
        # Opened and seeded before the lock; unlisted until swapped in below.
        new = self.t.open_rowsets(metas)
        seed_keys(new, merged.keys)
        with self.t.rowset_swap() as swap:
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
                swap.migrate(concat_deltas(late_parts).sorted_by_seq(), new)
            swap.replace(inputs, new, next_rowset_id=first_id + len(metas))
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
        for drs in self.t.rowsets.drs:
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
        with self.t.rowset_swap() as swap:
            dead = [d for d in swap.served.drs if d.live_count() == 0 and d.last_change_ts() < ahm]
            if not dead:
                return 0
            swap.replace(dead, (), next_rowset_id=None)
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
            rowset_ids = [d.id for d in self.t.rowsets.drs if d.deleted_before(ahm)]
        done = 0
        for rid in rowset_ids:
            if any(d.id == rid for d in self.t.rowsets.drs):  # still served
                done += self._compact([rid], worker, "deleted_row_gc")
        return done

    def _maintain(self, op: Callable[..., _T], *args: Any) -> _T:
        """Run a maintenance op under the maintenance lock, then delete the files it
        made obsolete if nothing holds them any more (the op's locals are gone by then)."""
        with self.t.maintaining():
            result = op(*args)
        self.delete_obsolete()
        return result

    def _rowset(self, rowset_id: int) -> DiskRowSet:
        for d in self.t.rowsets.drs:
            if d.id == rowset_id:
                return d
        raise ProgrammingError(f"tablet {self.t.path} has no DiskRowSet {rowset_id}")

    def _finish_rewrites(self, rewrites: Sequence[tuple[DiskRowSet, RowSetMeta]]) -> None:
        """Swap in rewritten rowsets (same ids, new files) under one superblock save and
        retire their old files."""
        if self.t.options.sync:
            for drs, _ in rewrites:
                fsync_dir(drs.dir)
        with self.t.rowset_swap() as swap:
            remove = [drs for drs, _ in rewrites]
            swap.replace(remove, [d.derive(m) for d, m in rewrites], next_rowset_id=None)
        for drs, meta in rewrites:
            gone = drs.meta.file_names() - meta.file_names()
            drs.retire(gone)
            self._retire([drs], [os.path.join(drs.dir, f) for f in sorted(gone)])

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
        return self.policy(self.t.ancient_history_mark()).ids

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
            for d in self.t.rowsets.drs
            if d.num_rows
        ]

    def average_height(self) -> float:
        """Kudu's ``average_diskrowset_height``: how many DiskRowSets cover a key, on
        average over the data-weighted key space (1.0 when none overlap)."""
        return average_height(self._rowset_infos(self.t.ancient_history_mark()))

    def policy(self, ahm: int) -> Selection:
        """The merging compaction the policy chooses now (``compact`` without ids, and
        the maintenance op's score): its last search while it still holds, and nothing
        for a merge of disjoint rowsets that would not make fewer of them."""
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
        drs = [d for d in self.t.rowsets.drs if d.id in wanted]
        rows = sum(d.num_rows for d in drs)
        if not rows:
            return 0
        raw = sum(d.meta.raw_bytes or d.meta.base_bytes for d in drs)
        per_rowset = rowset_rows(raw // rows, RowSetWriteOptions.of(self.t.options)) or rows
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
            count = len(self.t.rowsets.drs)
            while self.compact() >= 2:
                now = len(self.t.rowsets.drs)
                if now >= count:  # no progress: stop rather than rewrite the same layout
                    break
                count = now
            self.gc_deleted_rows()
            for d in list(self.t.rowsets.drs):
                if foldable_redo(d.meta):
                    self.major_delta_compaction(d.id)
        if gc:
            self.gc_undo()
            self.gc_deleted_rowsets()
            self.gc_deleted_rows()
