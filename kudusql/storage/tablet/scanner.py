"""Scans of one tablet's rowsets at a snapshot: projection, predicates, lazy
materialization, positional delta application, zone-map and key-range pruning, and
the diff scan (rows changed between two snapshots).

Per DiskRowSet the scan narrows the rowid range with the key index, then walks the
rowset's pages (all columns share page boundaries). For each page it computes row
liveness from the resolved deltas, skips the page if its zone maps rule out a
predicate (only for columns no delta touches in that page), reads and patches the
predicate columns first, evaluates them, and only then reads the other projected
columns, for the rows still selected. Hint predicates (``ColumnPredicate.hint``) only
prune: a page they do not rule out goes out whole (less deleted rows).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kudusql.common.predicates import ColumnPredicate, PredicateKind
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.storage.tablet.delta import (
    Deltas,
    Resolved,
    apply_liveness,
    apply_to_column,
    concat_deltas,
    resolve,
    touched_in,
)
from kudusql.storage.tablet.diskrowset import DiskRowSet, read_default_column
from kudusql.storage.tablet.memrowset import MemRowSet

IS_DELETED = "is_deleted"

# Cheaper predicates first (Kudu's order), so lazy materialization stops early.
_PRED_ORDER = {
    PredicateKind.IS_NULL: 0,
    PredicateKind.EQ: 1,
    PredicateKind.IN: 2,
    PredicateKind.RANGE: 3,
    PredicateKind.PREFIX: 4,
    PredicateKind.IS_NOT_NULL: 5,
}


@dataclass
class ScanPlan:
    """A bound scan of one tablet."""

    schema: Schema
    projection: list[ColumnSchema]
    predicates: list[ColumnPredicate]
    snapshot: int
    key_lo: bytes | None = None
    key_hi: bytes | None = None
    batch_rows: int = 65536
    # Diff scan: rows with changes in [diff_start, snapshot), plus is_deleted.
    diff_start: int | None = None
    #: Return each row's encoded key with the batch (for ordered merges and diff scans).
    need_keys: bool = False
    stats: dict[str, int] = field(default_factory=dict)
    _out_schema: tuple[tuple[int, bool], pa.Schema] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def count(self, what: str, n: int = 1) -> None:
        self.stats[what] = self.stats.get(what, 0) + n

    @property
    def out_schema(self) -> pa.Schema:
        """The schema of every batch (built once: a scan makes a batch per page)."""
        key = (len(self.projection), self.diff_start is not None)
        got = self._out_schema
        if got is not None and got[0] == key:
            return got[1]
        s = pa.schema([c.arrow_field() for c in self.projection])
        if self.diff_start is not None:
            s = s.append(pa.field(IS_DELETED, pa.bool_(), nullable=False))
        self._out_schema = (key, s)
        return s

    def sorted_predicates(self) -> list[ColumnPredicate]:
        return sorted(self.predicates, key=lambda p: _PRED_ORDER[p.kind])

    def row_predicates(self) -> list[ColumnPredicate]:
        """The predicates evaluated row by row (hints only prune), cheapest first."""
        return [p for p in self.sorted_predicates() if not p.hint]


def scan_memrowset(
    mrs: MemRowSet, plan: ScanPlan
) -> Iterator[tuple[pa.RecordBatch, pa.Array[Any] | None]]:
    """Batches of live rows of a MemRowSet at the plan's snapshot, with their keys."""
    view = mrs.view()
    n = view.num_slots
    if n == 0:
        return
    t = np.uint64(plan.snapshot)
    alive = view.insert_ts < t
    redo = resolve(view.deltas, plan.snapshot, undo=False)
    apply_liveness(alive, 0, redo)
    keep = alive
    if plan.diff_start is not None:
        alive_end = alive
        alive_start = view.insert_ts < np.uint64(plan.diff_start)
        apply_liveness(alive_start, 0, resolve(view.deltas, plan.diff_start, undo=False))
        changed = _changed_in_window(view.deltas, view.insert_ts, plan.diff_start, plan.snapshot, n)
        keep = changed & (alive_start | alive_end)
    if plan.key_lo is not None or plan.key_hi is not None:
        keep = keep & _key_range_mask(view.keys, plan.key_lo, plan.key_hi)
    if not keep.any():
        return
    idx = np.flatnonzero(keep)
    schema = plan.schema
    cache: dict[int, pa.Array[Any]] = {}

    def column(c: ColumnSchema) -> pa.Array[Any]:
        got = cache.get(c.id)
        if got is None:
            i = schema.index_of(c.name)
            col = view.rows.column(i).combine_chunks()
            col, _ = apply_to_column(col, 0, redo, c.id)
            got = col.take(idx)
            cache[c.id] = got
        return got

    sel = np.ones(len(idx), dtype=bool)
    for p in plan.row_predicates():
        sel &= p.evaluate(column(schema.column(p.column)))
        if not sel.any():
            return
    fidx = np.flatnonzero(sel)
    cols = [column(c).take(fidx) for c in plan.projection]
    if plan.diff_start is not None:
        dead = ~keep_alive_end(alive, np.flatnonzero(keep))
        cols.append(pa.array(dead[sel]))
    keys = view.keys.take(idx).take(fidx) if plan.need_keys else None
    yield _batch(cols, len(fidx), plan), keys


def _batch(cols: list[pa.Array[Any]], n: int, plan: ScanPlan) -> pa.RecordBatch:
    """The output batch of ``n`` rows; with no column at all (COUNT(*)), rows only."""
    if cols:
        return pa.RecordBatch.from_arrays(cols, schema=plan.out_schema)
    return pa.RecordBatch.from_arrays([pa.nulls(n)], names=["_"]).select([])


def _liveness_in(resolved: Resolved, start: int, stop: int) -> bool:
    """Does an applicable insert, delete or reinsert touch rows [start, stop)?"""
    rows = resolved.live_rowids
    if not len(rows):
        return False
    i0, i1 = np.searchsorted(rows, [start, stop])
    return bool(i1 > i0)


def _count_only(plan: ScanPlan) -> bool:
    """Whether the scan returns row counts only: no column, key or row predicate."""
    return (
        not plan.projection
        and plan.diff_start is None
        and not plan.need_keys
        and not plan.row_predicates()
    )


def keep_alive_end(alive_end: np.ndarray, rows: np.ndarray) -> np.ndarray:
    return np.asarray(alive_end[rows], dtype=bool)


def _key_range_mask(keys: pa.Array[Any], lo: bytes | None, hi: bytes | None) -> np.ndarray:
    m = None
    if lo is not None:
        m = pc.greater_equal(keys, pa.scalar(lo, pa.binary()))
    if hi is not None:
        m2 = pc.less(keys, pa.scalar(hi, pa.binary()))
        m = m2 if m is None else pc.and_(m, m2)
    assert m is not None
    return np.asarray(m.to_numpy(zero_copy_only=False), dtype=bool)


def _changed_in_window(
    d: Deltas, insert_ts: np.ndarray | None, start: int, end: int, n: int
) -> np.ndarray:
    """Bool per row: some event (or the insert) has start <= ts < end."""
    out = np.zeros(n, dtype=bool)
    lo, hi = np.uint64(start), np.uint64(end)
    if insert_ts is not None:
        out |= (insert_ts >= lo) & (insert_ts < hi)
    if len(d):
        w = (d.ts >= lo) & (d.ts < hi)
        out[d.rowid[w]] = True
    return out


def scan_diskrowset(
    drs: DiskRowSet, plan: ScanPlan
) -> Iterator[tuple[pa.RecordBatch, pa.Array[Any] | None]]:
    """Batches of live rows of a DiskRowSet at the plan's snapshot, page by page."""
    if drs.num_rows == 0 or not drs.may_contain_range(plan.key_lo, plan.key_hi):
        plan.count("rowsets_pruned")
        return
    start, stop = drs.rowid_range(plan.key_lo, plan.key_hi)
    if stop <= start:
        plan.count("rowsets_pruned")
        return
    plan.count("rowsets_scanned")
    undo, redo = drs.resolve(plan.snapshot)
    # Pages patched with the latest deltas are cached under the deltas' version.
    version = drs.latest_version(redo) if undo.is_empty() else None
    diff = None
    if plan.diff_start is not None:
        u0, r0 = drs.resolve(plan.diff_start)
        every = concat_deltas(drs.all_delta_parts())
        diff = (
            u0,
            r0,
            _changed_in_window(every, None, plan.diff_start, plan.snapshot, drs.num_rows),
        )
    preds = plan.sorted_predicates()
    row_preds = plan.row_predicates()
    schema = plan.schema
    if (
        _count_only(plan)
        and not preds
        and not _liveness_in(undo, start, stop)
        and not _liveness_in(redo, start, stop)
    ):
        # Every row of the range exists and is live at the snapshot: the count is the
        # range's size, no page is read (COUNT(*) from metadata).
        plan.count("rowsets_counted")
        yield _batch([], stop - start, plan), None
        return
    offsets = drs.page_offsets
    first_page = int(np.searchsorted(offsets, start, side="right") - 1)
    # No insert, delete or reinsert applies in the range: every row is live, so pages
    # need no liveness mask (the common case of a scan of settled data).
    all_live = (
        diff is None and not _liveness_in(undo, start, stop) and not _liveness_in(redo, start, stop)
    )
    for p in range(first_page, len(offsets) - 1):
        a, b = max(start, int(offsets[p])), min(stop, int(offsets[p + 1]))
        if a >= stop:
            break
        if b <= a:
            continue
        keep: np.ndarray | None = None
        if not all_live:
            alive = np.ones(b - a, dtype=bool)
            apply_liveness(alive, a, undo)
            apply_liveness(alive, a, redo)
            keep = alive
            if diff is not None:
                u0, r0, changed = diff
                alive_start = np.ones(b - a, dtype=bool)
                apply_liveness(alive_start, a, u0)
                apply_liveness(alive_start, a, r0)
                keep = changed[a:b] & (alive_start | alive)
            if not keep.any():
                plan.count("pages_skipped_deleted")
                continue
        if _zone_pruned(drs, p, a, b, preds, schema, undo, redo):
            plan.count("pages_pruned")
            continue
        plan.count("pages_scanned")
        cache: dict[int, pa.Array[Any]] = {}

        whole_page = a == int(offsets[p]) and b == int(offsets[p + 1])

        def column(
            c: ColumnSchema,
            a: int = a,
            b: int = b,
            p: int = p,
            whole_page: bool = whole_page,
            cache: dict[int, pa.Array[Any]] = cache,
        ) -> pa.Array[Any]:
            got = cache.get(c.id)
            if got is None:
                if version is not None and whole_page and touched_in(redo, a, b, c.id):
                    got = drs.patched_page(c, p, redo, version)
                if got is None:
                    base = drs.read_column_page(c, p) if whole_page else None
                    if base is None:
                        base = drs.read_column_range(c, a, b)
                    got, _ = apply_to_column(base, a, undo, c.id)
                    got, _ = apply_to_column(got, a, redo, c.id)
                cache[c.id] = got
            return got

        mask = None
        n = b - a
        if keep is not None or row_preds:
            sel = np.ones(n, dtype=bool) if keep is None else keep.copy()
            for pr in row_preds:
                sel &= pr.evaluate(column(schema.column(pr.column)))
                if not sel.any():
                    break
            if not sel.any():
                continue
            if not sel.all():
                mask = pa.array(sel)
                n = int(sel.sum())
        cols = []
        for c in plan.projection:
            col = column(c)
            cols.append(col if mask is None else col.filter(mask))
        if diff is not None:
            cols.append(pa.array(~alive[sel]))
        keys = None
        if plan.need_keys:
            kr = drs.key_reader().read_range(a, b).combine_chunks()
            keys = kr if mask is None else kr.filter(mask)
        yield _batch(cols, n, plan), keys


def _zone_pruned(
    drs: DiskRowSet,
    page: int,
    a: int,
    b: int,
    preds: Sequence[ColumnPredicate],
    schema: Schema,
    undo: Resolved,
    redo: Resolved,
) -> bool:
    for pr in preds:
        c = schema.column(pr.column)
        if touched_in(undo, a, b, c.id) or touched_in(redo, a, b, c.id):
            continue
        r = drs.column_reader(c)
        if r is None:
            dflt = read_default_column(c, 1)
            if not pr.evaluate(dflt)[0]:
                return True
            continue
        lo = r.page_mins[page].as_py()
        hi = r.page_maxs[page].as_py()
        n = int(r.page_offsets[page + 1] - r.page_offsets[page])
        if not pr.may_match_zone(lo, hi, int(r.null_counts[page]), int(r.nan_counts[page]), n):
            return True
    return False
