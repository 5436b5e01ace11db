"""Columnar mutation records (deltas) and their resolution against a snapshot.

A ``Deltas`` holds a run of mutations of rows of one rowset, column-wise: per event
the row (rowid, or slot in a MemRowSet), the HybridTime, a tablet-wide sequence
number, and the mutation type; per changed column the positions of the events that
set it and the new values. Events are always kept in apply order (ascending seq, and
so ascending timestamp), which is what lets resolution avoid sorting by timestamp.

Resolution turns the events that matter for a snapshot into "the final value of each
touched cell and the liveness of each touched row", which a scan applies to a page of
base data with one masked replace per column:

* REDO (MemRowSet mutations, DeltaMemStores, REDO DeltaFiles): the events with
  ts < T apply, oldest first, so the last event per row wins.
* UNDO (UNDO DeltaFiles): the events with ts >= T are rolled back, newest first, so
  the oldest such event per row wins.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kudusql.common.arrays import sorted_unique


class MutationType(enum.IntEnum):
    """DO NOT CHANGE: on-disk values (Kudu's RowChangeList types)."""

    UPDATE = 1
    DELETE = 2
    REINSERT = 3


_EMPTY_I64 = np.zeros(0, dtype=np.int64)


@dataclass
class ColumnDelta:
    """The events (by position in their ``Deltas``) that set one column, and the values."""

    pos: np.ndarray
    values: pa.Array[Any]

    def __getstate__(self) -> dict[str, Any]:
        # A pickled Arrow slice carries its whole parent buffer, and the stores of one
        # delta flush are slices of one write batch: the job sent to the compaction
        # worker held the batch once per store (0.14 -> 1.2 s per flush of 180 stores).
        # numpy pickles a view's own elements only.
        return {"pos": self.pos, "values": pa.concat_arrays([self.values])}


@dataclass
class Deltas:
    """Mutation events of one store, in apply order."""

    rowid: np.ndarray = field(default_factory=lambda: _EMPTY_I64)
    ts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint64))
    seq: np.ndarray = field(default_factory=lambda: _EMPTY_I64)
    op: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint8))
    cols: dict[int, ColumnDelta] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.rowid)

    @property
    def min_ts(self) -> int:
        return int(self.ts.min()) if len(self.ts) else 0

    @property
    def max_ts(self) -> int:
        return int(self.ts.max()) if len(self.ts) else 0

    def nbytes(self) -> int:
        n = self.rowid.nbytes + self.ts.nbytes + self.seq.nbytes + self.op.nbytes
        return n + sum(c.pos.nbytes + c.values.nbytes for c in self.cols.values())

    def select(self, mask: np.ndarray) -> Deltas:
        """The events where ``mask`` is True, order kept."""
        if mask.all():
            return self
        new_index = np.cumsum(mask) - 1
        cols = {}
        for cid, cd in self.cols.items():
            keep = mask[cd.pos]
            if keep.any():
                cols[cid] = ColumnDelta(new_index[cd.pos[keep]], cd.values.filter(pa.array(keep)))
        return Deltas(self.rowid[mask], self.ts[mask], self.seq[mask], self.op[mask], cols)

    def slice(self, start: int, stop: int) -> Deltas:
        """Events ``[start, stop)``, sharing the arrays (column positions are sorted)."""
        if start == 0 and stop == len(self):
            return self
        cols = {}
        for cid, cd in self.cols.items():
            lo, hi = (int(x) for x in np.searchsorted(cd.pos, (start, stop)))
            if hi > lo:
                cols[cid] = ColumnDelta(cd.pos[lo:hi] - start, cd.values.slice(lo, hi - lo))
        sl = slice(start, stop)
        return Deltas(self.rowid[sl], self.ts[sl], self.seq[sl], self.op[sl], cols)

    def split(self, cuts: Sequence[int]) -> list[Deltas]:
        """The events cut at the ascending positions ``cuts`` into consecutive runs
        (``slice`` of each), with one search per column for all runs: the write path
        cuts a batch into one run per rowset, and a batch touches every rowset."""
        bounds = [0, *cuts, len(self)]
        col_bounds = {
            cid: (np.searchsorted(cd.pos, bounds).tolist(), cd) for cid, cd in self.cols.items()
        }
        out = []
        for i in range(len(bounds) - 1):
            start, stop = bounds[i], bounds[i + 1]
            cols = {}
            for cid, (cb, cd) in col_bounds.items():
                lo, hi = cb[i], cb[i + 1]
                if hi > lo:
                    cols[cid] = ColumnDelta(cd.pos[lo:hi] - start, cd.values.slice(lo, hi - lo))
            sl = slice(start, stop)
            out.append(Deltas(self.rowid[sl], self.ts[sl], self.seq[sl], self.op[sl], cols))
        return out

    def take(self, idx: np.ndarray) -> Deltas:
        """The events at positions ``idx`` (in that order; no repeats)."""
        cols = {}
        # A few events of many (one store's runs in a settle's gathered batch): each
        # column's value positions are searched, instead of a map over every event.
        few = 8 * len(idx) < len(self)
        for cid, cd in self.cols.items():
            if not len(cd.pos):
                continue
            if few:
                at = np.searchsorted(cd.pos, idx)
                sel = np.minimum(at, len(cd.pos) - 1)
                has = (at < len(cd.pos)) & (cd.pos[sel] == idx)
            else:
                value_at = np.full(len(self), -1, dtype=np.int64)
                value_at[cd.pos] = np.arange(len(cd.pos), dtype=np.int64)
                sel = value_at[idx]
                has = sel >= 0
            if has.any():
                cols[cid] = ColumnDelta(np.flatnonzero(has), cd.values.take(pa.array(sel[has])))
        return Deltas(self.rowid[idx], self.ts[idx], self.seq[idx], self.op[idx], cols)

    def map_rowids(self, mapping: np.ndarray) -> Deltas:
        """Renumber rows: new rowid = mapping[old rowid]."""
        return Deltas(mapping[self.rowid], self.ts, self.seq, self.op, self.cols)

    def sorted_by_seq(self) -> Deltas:
        if len(self.seq) < 2 or bool(np.all(self.seq[1:] > self.seq[:-1])):
            return self
        order = np.argsort(self.seq, kind="stable")
        inv = np.empty_like(order)
        inv[order] = np.arange(len(order))
        cols = {}
        for cid, cd in self.cols.items():
            newpos = inv[cd.pos]
            o = np.argsort(newpos, kind="stable")
            cols[cid] = ColumnDelta(newpos[o], cd.values.take(o))
        return Deltas(self.rowid[order], self.ts[order], self.seq[order], self.op[order], cols)


def range_positions(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions ``starts[i] .. starts[i] + lengths[i] - 1`` of every range, in
    order, in one vectorized pass (for cutting runs out of batches or pairing keys)."""
    ends = np.cumsum(lengths)
    total = int(ends[-1]) if len(ends) else 0
    out: np.ndarray = np.arange(total, dtype=np.int64) + np.repeat(
        starts - (ends - lengths), lengths
    )
    return out


def concat_deltas(parts: Sequence[Deltas]) -> Deltas:
    """Concatenate runs of events; the caller passes them in apply order."""
    parts = [p for p in parts if len(p)]
    if not parts:
        return Deltas()
    if len(parts) == 1:
        return parts[0]
    offsets = np.cumsum([0] + [len(p) for p in parts])
    col_ids = sorted({cid for p in parts for cid in p.cols})
    cols: dict[int, ColumnDelta] = {}
    for cid in col_ids:
        pos = [p.cols[cid].pos + offsets[i] for i, p in enumerate(parts) if cid in p.cols]
        vals = [p.cols[cid].values for p in parts if cid in p.cols]
        cols[cid] = ColumnDelta(np.concatenate(pos), pa.concat_arrays(vals))
    return Deltas(
        np.concatenate([p.rowid for p in parts]),
        np.concatenate([p.ts for p in parts]),
        np.concatenate([p.seq for p in parts]),
        np.concatenate([p.op for p in parts]),
        cols,
    )


@dataclass
class Resolved:
    """The effect of a set of deltas at one snapshot.

    ``live_rowids`` (sorted) with ``live`` says, for the rows whose liveness changed,
    whether they are alive; ``cols`` maps a column id to (sorted rowids, values).
    ``touched`` lists (sorted, unique) every row that any applicable event touched.
    """

    live_rowids: np.ndarray = field(default_factory=lambda: _EMPTY_I64)
    live: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    cols: dict[int, tuple[np.ndarray, pa.Array[Any]]] = field(default_factory=dict)
    touched: np.ndarray = field(default_factory=lambda: _EMPTY_I64)

    def is_empty(self) -> bool:
        return len(self.touched) == 0


def resolve(deltas: Deltas, snapshot: int, *, undo: bool) -> Resolved:
    """Resolve REDO events (ts < snapshot apply, last wins) or UNDO events (ts >= snapshot
    are rolled back, oldest wins)."""
    if not len(deltas):
        return Resolved()
    t = np.uint64(snapshot)
    applies = deltas.ts >= t if undo else deltas.ts < t
    if not applies.any():
        return Resolved()
    d = deltas.select(applies)
    pick = first_per_row if undo else last_per_row
    liveness = d.op != MutationType.UPDATE
    if liveness.any():
        lidx = np.flatnonzero(liveness)
        rows, sel = pick(d.rowid[lidx])
        live_rowids, live = rows, d.op[lidx[sel]] == MutationType.REINSERT
    else:
        live_rowids, live = _EMPTY_I64, np.zeros(0, dtype=bool)
    cols = {}
    for cid, cd in d.cols.items():
        rows, sel = pick(d.rowid[cd.pos])
        cols[cid] = (rows, cd.values.take(pa.array(sel)))
    return Resolved(live_rowids, live, cols, unique_rowids(d.rowid))


# Rowids are dense (a rowset's rows, a MemRowSet's slots): while the span of the rowids
# is at most this many times their count, one pass over an array as long as the span
# (a scatter) replaces a sort. A merge's rebase resolving 2M events of a 1M-row rowset:
# np.unique with return_index 0.29 s, the scatter 0.013 s. The scratch array then takes
# at most 32 bytes per event (8 per span slot), about what the sort's temporaries take.
_SCATTER_SPAN_PER_EVENT = 4


def _span(rowid: np.ndarray) -> int:
    """The span to scatter ``rowid`` over (max + 1), or 0 when a sort is cheaper."""
    if not len(rowid):
        return 0
    lo, hi = int(rowid.min()), int(rowid.max())
    span = hi + 1
    return span if lo >= 0 and span <= _SCATTER_SPAN_PER_EVENT * len(rowid) + 1024 else 0


def unique_rowids(rowid: np.ndarray) -> np.ndarray:
    """``np.unique(rowid)``, by a scatter when the rowids are dense, else by a sort."""
    span = _span(rowid)
    if not span:
        return sorted_unique(rowid)
    seen = np.zeros(span, dtype=bool)
    seen[rowid] = True
    return np.flatnonzero(seen).astype(rowid.dtype, copy=False)


def last_per_row(rowid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique rowids and, for each, the index of its last occurrence."""
    span = _span(rowid)
    if not span:
        rev = rowid[::-1]
        rows, idx = np.unique(rev, return_index=True)
        return rows, (len(rowid) - 1 - idx).astype(np.int64)
    last = np.full(span, -1, dtype=np.int64)
    np.maximum.at(last, rowid, np.arange(len(rowid), dtype=np.int64))
    rows = np.flatnonzero(last >= 0)
    return rows.astype(rowid.dtype, copy=False), last[rows]


def first_per_row(rowid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique rowids and, for each, the index of its first occurrence."""
    span = _span(rowid)
    if not span:
        rows, idx = np.unique(rowid, return_index=True)
        return rows, idx.astype(np.int64)
    n = len(rowid)
    first = np.full(span, n, dtype=np.int64)
    np.minimum.at(first, rowid, np.arange(n, dtype=np.int64))
    rows = np.flatnonzero(first < n)
    return rows.astype(rowid.dtype, copy=False), first[rows]


def apply_to_column(
    col: pa.Array[Any], start: int, resolved: Resolved, col_id: int
) -> tuple[pa.Array[Any], bool]:
    """Patch base values of rows [start, start+len(col)) with the resolved cells.

    Returns the column and whether anything changed.
    """
    entry = resolved.cols.get(col_id)
    if entry is None:
        return col, False
    rows, values = entry
    n = len(col)
    i0, i1 = np.searchsorted(rows, [start, start + n])
    if i1 <= i0:
        return col, False
    repl = values.slice(int(i0), int(i1 - i0))
    if repl.type != col.type:
        repl = repl.cast(col.type)
    positions = rows[i0:i1] - start
    fast = _replace_fixed_width(col, positions, repl)
    if fast is not None:
        return fast, True
    mask = np.zeros(n, dtype=bool)
    mask[positions] = True
    return pc.replace_with_mask(col, pa.array(mask), repl), True


def _replace_fixed_width(
    col: pa.Array[Any], positions: np.ndarray, repl: pa.Array[Any]
) -> pa.Array[Any] | None:
    """Scatter ``repl`` into a copy of a fixed-width column with numpy (no NULLs on either
    side); None when the fast path does not apply. ``replace_with_mask`` is ~10x slower
    on wide types such as decimal128."""
    t = col.type
    if col.null_count or repl.null_count or pa.types.is_boolean(t):
        return None
    try:
        width = t.bit_width // 8
    except ValueError:
        return None
    if width not in (1, 2, 4, 8, 16):
        return None
    n = len(col)
    cb, rb = col.buffers()[1], repl.buffers()[1]
    if cb is None or rb is None:
        return None
    cbytes: np.ndarray = np.frombuffer(memoryview(cb), dtype=np.uint8)
    rbytes: np.ndarray = np.frombuffer(memoryview(rb), dtype=np.uint8)
    base = cbytes[col.offset * width : (col.offset + n) * width]
    new = rbytes[repl.offset * width : (repl.offset + len(repl)) * width]
    out = base.copy().reshape(n, width)
    out[positions] = new.reshape(-1, width)
    return pa.Array.from_buffers(t, n, [None, pa.py_buffer(out.data)])


def apply_liveness(alive: np.ndarray, start: int, resolved: Resolved) -> None:
    """Set ``alive`` (rows [start, start+len)) from the resolved liveness events, in place."""
    rows = resolved.live_rowids
    if not len(rows):
        return
    i0, i1 = np.searchsorted(rows, [start, start + len(alive)])
    if i1 > i0:
        alive[rows[i0:i1] - start] = resolved.live[i0:i1]


def touched_in(resolved: Resolved, start: int, stop: int, col_id: int | None = None) -> bool:
    """Does any applicable event touch rows [start, stop) (in column ``col_id`` if given)?"""
    rows = resolved.touched if col_id is None else resolved.cols.get(col_id, (_EMPTY_I64,))[0]
    if not len(rows):
        return False
    i0, i1 = np.searchsorted(rows, [start, stop])
    return bool(i1 > i0)


def last_setter_before(
    setter_row: np.ndarray, setter_seq: np.ndarray, query_row: np.ndarray, query_seq: np.ndarray
) -> np.ndarray:
    """For each query (row, seq), the index of the setter of the same row with the greatest
    seq below the query's, or -1. Vectorized with one sort and a running maximum."""
    ns, nq = len(setter_row), len(query_row)
    if nq == 0:
        return _EMPTY_I64
    rows = np.concatenate([setter_row, query_row])
    seqs = np.concatenate([setter_seq, query_seq])
    # On equal (row, seq) a query sorts before the setter: "before" is strict.
    tiebreak = np.concatenate([np.ones(ns, dtype=np.int8), np.zeros(nq, dtype=np.int8)])
    order = np.lexsort((tiebreak, seqs, rows))
    is_setter = order < ns
    marks = np.where(is_setter, np.arange(len(order)), -1)
    filled = np.maximum.accumulate(marks)
    result = np.full(nq, -1, dtype=np.int64)
    qpos = np.flatnonzero(~is_setter)
    f = filled[qpos]
    ok = f >= 0
    setter_idx = np.where(ok, order[np.maximum(f, 0)], -1)
    same_row = ok & (rows[np.maximum(setter_idx, 0)] == rows[order[qpos]])
    result[order[qpos] - ns] = np.where(same_row, setter_idx, -1)
    return result
