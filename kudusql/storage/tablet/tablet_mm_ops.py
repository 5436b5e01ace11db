"""The maintenance ops of one tablet, in Kudu's shape (``tablet_mm_ops.h``).

Each kind of op is a class with Kudu's three steps:

* ``update_stats(poll)``: its scorer. What running it now would gain (memory, WAL,
  disk, a performance score; ``maintenance.py`` ranks them) and what it would run on
  (``OpStats.target``: the rowsets it chose), or None when it has nothing to do;
* ``prepare(stats)``: just before it runs, whether it still may (the tablet is still
  open, writable and healthy); False drops it for this turn;
* ``perform(stats, worker)``: the run, through the tablet's public methods
  (``MaintainedTablet``) and its ``TabletMaintainer``, on the target ``update_stats``
  chose.

``TabletOps`` holds one op of each kind for a tablet and turns a poll into the
``MaintenanceOp`` candidates the ``MaintenanceManager`` chooses from, in a fixed order
(the manager breaks ties by it). Every scorer of one poll reads the same capture of the
served rowsets and the same clock reading (``Poll``). The ops hold no state between
polls: a candidate carries its stats, so what runs is what was scored.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from kudusql.common.hybrid_time import to_micros
from kudusql.common.options import TabletOptions
from kudusql.storage.tablet.compaction_worker import CompactionWorker
from kudusql.storage.tablet.diskrowset import DiskRowSet
from kudusql.storage.tablet.maintenance import MaintenanceOp, flush_score
from kudusql.storage.tablet.rowsets import RowSets
from kudusql.storage.tablet.tablet_maintenance import (
    MaintainedTablet,
    TabletMaintainer,
    delta_bytes,
    foldable_redo,
)


@dataclass(frozen=True)
class Poll:
    """What every scorer of one poll reads: one capture of the served rowsets, the
    tablet's options, the time now, the ancient history mark, and the process the
    compactions it offers would run in."""

    rowsets: RowSets
    options: TabletOptions
    now_us: int
    ahm: int
    worker: CompactionWorker | None

    @classmethod
    def of(cls, t: MaintainedTablet) -> Poll:
        mm = t.maintenance
        return cls(
            t.rowsets,
            t.options,
            to_micros(t.clock.peek()),
            t.ancient_history_mark(),
            mm.compaction_worker() if mm is not None else None,
        )

    def age_s(self, ts: int | None) -> float:
        """Seconds since ``ts`` (0 for None: an empty store)."""
        return 0.0 if ts is None else max(0.0, (self.now_us - to_micros(ts)) / 1e6)


@dataclass(frozen=True)
class OpStats:
    """Kudu's ``MaintenanceOpStats`` of one op at one poll, and the rowsets the op would
    run on (``target``; None: the op chooses when it runs, or runs on all of them)."""

    ram_anchored: int = 0
    logs_retained: int = 0
    data_retained: int = 0
    perf_improvement: float = 0.0
    target: tuple[int, ...] | None = None


class TabletOp(ABC):
    """Kudu's ``TabletOpBase``: one kind of maintenance op of one tablet."""

    #: The op's name in the manager's choice and the maintenance records.
    name: ClassVar[str]

    def __init__(self, tablet: MaintainedTablet, maintainer: TabletMaintainer) -> None:
        self.tablet = tablet
        self.maintainer = maintainer

    @abstractmethod
    def update_stats(self, poll: Poll) -> OpStats | None:
        """What running the op now would gain, and on what; None: nothing to do."""

    def prepare(self, stats: OpStats) -> bool:
        """Whether the op may still run: the tablet is open, writable and healthy (a
        tablet closed or failed since the poll offers nothing, as at the poll)."""
        return self.tablet.maintainable

    @abstractmethod
    def perform(self, stats: OpStats, worker: CompactionWorker | None) -> object:
        """Run the op on ``stats.target`` (in ``worker``'s process where it writes
        files, when given)."""

    def run(self, stats: OpStats, worker: CompactionWorker | None) -> object:
        """``prepare``, then ``perform`` if it may run (None if not)."""
        return self.perform(stats, worker) if self.prepare(stats) else None

    def candidate(self, poll: Poll) -> MaintenanceOp | None:
        """The op as the manager sees it at this poll, or None."""
        st = self.update_stats(poll)
        if st is None:
            return None
        worker = poll.worker
        return MaintenanceOp(
            self.name,
            self.tablet.path,
            lambda: self.run(st, worker),
            st.ram_anchored,
            st.logs_retained,
            st.data_retained,
            st.perf_improvement,
        )


class FlushMRSOp(TabletOp):
    """Flush the MemRowSet (and one left frozen) to DiskRowSets, by Kudu's flush
    score of their size and age. Its WAL is what the stores anchor: the segments from
    their first event on. Counted as the whole WAL (which the file grace period also
    keeps), both flush ops stayed above ``log_target_replay_bytes`` after flushing:
    with the default 60 s grace a fast writer passed 1 GiB of WAL, and the manager then
    flushed the MemRowSet at every poll, a rowset of a few thousand rows each time
    (throughput fell to a third)."""

    name = "flush_mrs"

    def update_stats(self, poll: Poll) -> OpStats | None:
        rs, o = poll.rowsets, poll.options
        if not rs.frozen and rs.mrs.is_empty():
            return None
        mem = rs.mrs.bytes + sum(f.bytes for f in rs.frozen)
        mems = (rs.mrs, *rs.frozen)
        oldest = min((m.min_ts for m in mems if m.min_ts), default=None)
        score = flush_score(mem, poll.age_s(oldest), o.flush_threshold_bytes, o.flush_threshold_s)
        first = min((m.min_seq for m in mems if m.min_seq is not None), default=None)
        return OpStats(mem, self.tablet.wal_anchored(first), 0, score)

    def perform(self, stats: OpStats, worker: CompactionWorker | None) -> int:
        return self.tablet.flush(worker=worker)


class FlushDeltasOp(TabletOp):
    """Flush DeltaMemStores to REDO files. Each store is scored on its own, as Kudu
    scores the best one to flush: a store is due at the flush size or age. Scored as one
    pool (every store flushed once their sum reached the size), random updates made
    every store of the tablet a REDO file each time the pool filled, so files (and the
    minor compactions that fold them) grew with the rowset count. The op flushes in one
    job every store past half of either threshold, so that stores filled alike are
    flushed together (a job per store as each came due was an op a second, each reading
    the write batches its stores share); when none is due (the op was chosen to free
    memory or log), all of them."""

    name = "flush_deltas"

    def update_stats(self, poll: Poll) -> OpStats | None:
        o = poll.options
        size, score, ripe = 0, 0.0, []
        first_seqs: dict[int, int] = {}  # rowset id -> its live store's first event
        half_bytes, half_s = o.flush_threshold_bytes / 2, o.flush_threshold_s / 2
        for d in poll.rowsets.drs:
            x = d.dms
            if x.is_empty():
                continue
            size += x.bytes
            if x.min_seq is not None:
                first_seqs[d.id] = x.min_seq
            age = poll.age_s(x.min_ts)
            score = max(
                score, flush_score(x.bytes, age, o.flush_threshold_bytes, o.flush_threshold_s)
            )
            if x.bytes >= half_bytes or age >= half_s:
                ripe.append(d.id)
        if not size:
            return None
        only = tuple(ripe) if score > 0 else None
        # The WAL this op frees is what the stores it flushes anchor: a store left out
        # (not ripe) keeps its segments, and counting them would choose the op for the
        # log again at every poll until that store ripened.
        flushed = first_seqs.values() if only is None else (first_seqs.get(i) for i in only)
        first = min((f for f in flushed if f is not None), default=None)
        return OpStats(size, self.tablet.wal_anchored(first), 0, score, only)

    def perform(self, stats: OpStats, worker: CompactionWorker | None) -> int:
        return self.tablet.flush_deltas(worker=worker, rowset_ids=stats.target)


class MinorDeltaCompactionOp(TabletOp):
    """Merge the REDO files of the rowsets with the most of them (up to
    ``MAX_ROWSETS``), scored by the worst one's count against
    ``minor_compaction_max_files``: random updates add a file to every rowset per delta
    flush, so one rowset per turn would fall behind as the rowset count grows."""

    name = "minor_delta_compaction"
    #: Rowsets one op covers at most.
    MAX_ROWSETS = 16

    def update_stats(self, poll: Poll) -> OpStats | None:
        o = poll.options
        least = max(2, o.minor_compaction_min_files)
        due = [d for d in poll.rowsets.drs if len(d.meta.redo_files) >= least]
        if not due:
            return None
        due.sort(key=lambda d: len(d.meta.redo_files), reverse=True)
        score = min(1.0, len(due[0].meta.redo_files) / o.minor_compaction_max_files)
        ids = tuple(d.id for d in due[: self.MAX_ROWSETS])
        return OpStats(perf_improvement=score, target=ids)

    def perform(self, stats: OpStats, worker: CompactionWorker | None) -> int:
        assert stats.target is not None
        return self.maintainer.minor_delta_compactions(stats.target, worker)


class MajorDeltaCompactionOp(TabletOp):
    """Fold the REDO files of the rowset with the most to fold (by bytes against its
    base) into its base, once that ratio reaches ``major_compaction_min_ratio``."""

    name = "major_delta_compaction"

    def update_stats(self, poll: Poll) -> OpStats | None:
        ratios = [
            (sum(f.stats.size for f in foldable) / max(1, d.meta.base_bytes), d.id)
            for d in poll.rowsets.drs
            if (foldable := foldable_redo(d.meta))
        ]
        if not ratios:
            return None
        ratio, rid = max(ratios)
        if ratio < poll.options.major_compaction_min_ratio:
            return None
        return OpStats(perf_improvement=min(1.0, ratio), target=(rid,))

    def perform(self, stats: OpStats, worker: CompactionWorker | None) -> bool:
        assert stats.target is not None
        (rid,) = stats.target
        return self.maintainer.major_delta_compaction(rid, worker=worker)


class MergeCompactionOp(TabletOp):
    """Kudu's ``CompactRowSetsOp``: merge the rowsets the budgeted policy chooses,
    scored by the policy's quality (``TabletMaintainer.policy``)."""

    name = "merge_compaction"

    def update_stats(self, poll: Poll) -> OpStats | None:
        sel = self.maintainer.policy(poll.ahm)
        if len(sel.ids) < 2:
            return None
        return OpStats(perf_improvement=sel.quality, target=tuple(sel.ids))

    def perform(self, stats: OpStats, worker: CompactionWorker | None) -> int:
        return self.maintainer.compact(stats.target, worker=worker)


class UndoDeltaGCOp(TabletOp):
    """Kudu's ``UndoDeltaBlockGCOp``: delete the UNDO files older than the ancient
    history mark, scored by their bytes."""

    name = "undo_delta_gc"

    def update_stats(self, poll: Poll) -> OpStats | None:
        ahm = poll.ahm
        freed = sum(
            f.stats.size
            for d in poll.rowsets.drs
            for f in d.meta.undo_files
            if f.stats.max_ts < ahm
        )
        return OpStats(data_retained=freed) if freed else None

    def perform(self, stats: OpStats, worker: CompactionWorker | None) -> int:
        return self.maintainer.gc_undo()


class DeletedRowSetGCOp(TabletOp):
    """Kudu's ``DeletedRowsetGCOp``: drop the rowsets with no live row last changed
    before the ancient history mark, scored by their bytes (and one per rowset, so that
    an empty one counts)."""

    name = "deleted_rowset_gc"

    def update_stats(self, poll: Poll) -> OpStats | None:
        ahm = poll.ahm
        dead = sum(
            d.meta.base_bytes + delta_bytes(d.meta) + 1
            for d in poll.rowsets.drs
            if d.live_count() == 0 and d.last_change_ts() < ahm
        )
        return OpStats(data_retained=dead) if dead else None

    def perform(self, stats: OpStats, worker: CompactionWorker | None) -> int:
        return self.maintainer.gc_deleted_rowsets()


class DeletedRowGCOp(TabletOp):
    """Rewrite the rowset whose rewrite without its rows deleted before the ancient
    history mark frees the most, among those where they are at least
    ``deleted_row_gc_min_fraction`` of its rows (``deleted_rows_bytes``)."""

    name = "deleted_row_gc"

    def update_stats(self, poll: Poll) -> OpStats | None:
        ahm, fraction = poll.ahm, poll.options.deleted_row_gc_min_fraction
        frees = [
            (freed, d.id)
            for d in poll.rowsets.drs
            if (freed := deleted_rows_bytes(d, ahm, fraction))
        ]
        if not frees:
            return None
        freed, rid = max(frees)
        return OpStats(data_retained=freed, target=(rid,))

    def perform(self, stats: OpStats, worker: CompactionWorker | None) -> int:
        return self.maintainer.gc_deleted_rows(stats.target, worker=worker)


def deleted_rows_bytes(d: DiskRowSet, ahm: int, min_fraction: float) -> int:
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


#: Every kind of op, in the order a tablet offers them (the manager's ties go to the
#: first).
OP_KINDS: Sequence[type[TabletOp]] = (
    FlushMRSOp,
    FlushDeltasOp,
    MinorDeltaCompactionOp,
    MajorDeltaCompactionOp,
    MergeCompactionOp,
    UndoDeltaGCOp,
    DeletedRowSetGCOp,
    DeletedRowGCOp,
)


class TabletOps:
    """The maintenance ops of one tablet: one of each kind."""

    def __init__(self, tablet: MaintainedTablet, maintainer: TabletMaintainer) -> None:
        self.tablet = tablet
        self.ops = tuple(kind(tablet, maintainer) for kind in OP_KINDS)

    def candidates(self) -> list[MaintenanceOp]:
        """The ops worth running now, each with what it would gain (none for a tablet
        that is read-only, closed or failed)."""
        if not self.tablet.maintainable:
            return []
        poll = Poll.of(self.tablet)
        return [c for op in self.ops if (c := op.candidate(poll)) is not None]
