"""Compactions of DiskRowSets, as pure transformations of columns and deltas.

Three operations share one idea, *rebasing*: apply a row's REDO history to its base
values, so the base holds the newest version again, and turn each applied REDO event
into the UNDO event that rolls it back (an UPDATE into an UPDATE carrying the old
values of the columns it set, a DELETE into a REINSERT carrying the whole row, a
REINSERT into a DELETE). A row whose last event is a DELETE keeps that DELETE as a REDO
event (a *ghost*: its base holds the values it had before the delete).

* **Minor delta compaction** concatenates a rowset's REDO DeltaFiles into one (events
  keep their order; nothing is resolved).
* **Major delta compaction** rebases the columns the REDO files update, in place: rowids
  are kept, the other columns' files are untouched, UNDO records older than the ancient
  history mark (AHM) are dropped.
* **Merging compaction** rebases every column of several rowsets, merges their rows by
  key and assigns new rowids. A key present more than once (deleted ghosts, and at most
  one live copy) becomes one row: the newest copy's values as base, the older copies'
  lives folded into its UNDO history (each older copy's final DELETE becomes an UNDO
  REINSERT of its values), so time travel answers as before. A key whose newest copy was
  deleted before the AHM is dropped with all its history.

The I/O around these (reading inputs, writing files, swapping them in under the tablet's
locks) is the tablet's; see ``Tablet.compact`` and ``Tablet.major_delta_compaction``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kudusql.storage.cfile import key_array
from kudusql.storage.cfile.encodings import var_parts
from kudusql.storage.tablet.delta import (
    ColumnDelta,
    Deltas,
    MutationType,
    apply_to_column,
    concat_deltas,
    last_per_row,
    last_setter_before,
    resolve,
)

_NEVER = (1 << 64) - 1
_U64_MAX = np.iinfo(np.uint64).max


def split_final_deletes(redo: Deltas) -> tuple[Deltas, Deltas]:
    """(history, final DELETEs): a row whose last liveness event is a DELETE is a ghost;
    that event stays a REDO event, everything else is history to fold into the base."""
    if not len(redo):
        return redo, Deltas()
    liveness = redo.op != MutationType.UPDATE
    if not liveness.any():
        return redo, Deltas()
    lidx = np.flatnonzero(liveness)
    last_idx = lidx[last_per_row(redo.rowid[lidx])[1]]
    final = np.zeros(len(redo), dtype=bool)
    final[last_idx[redo.op[last_idx] == MutationType.DELETE]] = True
    if not final.any():
        return redo, Deltas()
    return redo.select(~final), redo.select(final)


def undo_of_history(
    base_values: dict[int, pa.Array[Any]], base_seq: np.ndarray, hist: Deltas
) -> Deltas:
    """The UNDO events that roll the version after ``hist`` back to every earlier one.

    ``base_values`` are each row's values before ``hist`` (by column id; row i at
    position i), set at sequence ``base_seq[i]``; ``hist`` is in apply order. An UPDATE
    becomes an UNDO UPDATE carrying the previous values of the columns it set; a DELETE
    an UNDO REINSERT carrying the previous value of every column in ``base_values``; a
    REINSERT an UNDO DELETE. The result keeps ``hist``'s order.
    """
    if not len(hist):
        return Deltas()
    undo_op = np.where(
        hist.op == MutationType.UPDATE,
        np.uint8(MutationType.UPDATE),
        np.where(
            hist.op == MutationType.DELETE,
            np.uint8(MutationType.REINSERT),
            np.uint8(MutationType.DELETE),
        ),
    ).astype(np.uint8)
    m = len(hist)
    is_delete = hist.op == MutationType.DELETE
    groups = _row_groups(hist, base_seq)
    cols: dict[int, ColumnDelta] = {}
    for cid, base_col in base_values.items():
        cd = hist.cols.get(cid)
        # Queries: UPDATEs that set the column (old value) and every DELETE (whole row).
        query = is_delete.copy()
        if cd is not None:
            query[cd.pos[hist.op[cd.pos] == MutationType.UPDATE]] = True
        q_pos = np.flatnonzero(query)
        if not len(q_pos):
            continue
        if cd is None:  # only the base ever set it
            cols[cid] = ColumnDelta(q_pos, base_col.take(hist.rowid[q_pos]))
            continue
        # Setters of this column: the base (value i = row i), then the events that set it.
        s_vals = pa.concat_arrays([base_col, cd.values.cast(base_col.type)])
        if groups is None:
            rows = np.arange(len(base_seq), dtype=np.int64)
            idx = last_setter_before(
                np.concatenate([rows, hist.rowid[cd.pos]]),
                np.concatenate([base_seq, hist.seq[cd.pos]]),
                hist.rowid[q_pos],
                hist.seq[q_pos],
            )
        else:
            order, inverse, row_start = groups
            marks = np.full(m, -1, dtype=np.int64)
            setters = inverse[cd.pos]
            marks[setters] = setters
            filled = np.maximum.accumulate(marks)
            qs = inverse[q_pos]
            prev = np.where(qs > 0, filled[np.maximum(qs - 1, 0)], -1)
            prev = np.where(prev >= row_start[qs], prev, -1)  # a setter of the same row
            event = order[np.maximum(prev, 0)]
            idx = np.where(
                prev >= 0, len(base_seq) + np.searchsorted(cd.pos, event), hist.rowid[q_pos]
            )
        cols[cid] = ColumnDelta(q_pos, s_vals.take(idx))
    return Deltas(hist.rowid, hist.ts, hist.seq, undo_op, cols)


def _row_groups(
    hist: Deltas, base_seq: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``hist``'s events grouped by row, apply order kept within a row: (order, the
    position of each event in that order, the position where each event's row starts).
    The last setter of a row before an event is then the last setter before it in this
    order, if it is in the same row, else the base: one stable sort for every column,
    not a sort of base and events per column (a merge's rebase spent a fifth of its time
    there). None unless the events of a row follow its base in strictly ascending seq;
    ``last_setter_before`` then decides."""
    order = np.argsort(hist.rowid, kind="stable")
    r, q = hist.rowid[order], hist.seq[order]
    m = len(order)
    new_row = np.ones(m, dtype=bool)
    np.not_equal(r[1:], r[:-1], out=new_row[1:])
    if (~new_row[1:] & (q[1:] <= q[:-1])).any():
        return None
    if (q[new_row] <= base_seq[r[new_row]]).any():
        return None
    pos = np.arange(m, dtype=np.int64)
    row_start = np.maximum.accumulate(np.where(new_row, pos, 0))
    inverse = np.empty(m, dtype=np.int64)
    inverse[order] = pos
    return order, inverse, row_start


def drop_ancient(undo: Deltas, ahm: int) -> Deltas:
    """UNDO events a snapshot at or after ``ahm`` can never roll back are dropped."""
    if not len(undo) or ahm <= 0:
        return undo
    keep = undo.ts >= np.uint64(ahm)
    return undo if keep.all() else undo.select(keep)


def only_columns(d: Deltas, col_ids: Sequence[int]) -> Deltas:
    """``d`` without the values of columns outside ``col_ids`` (dropped columns)."""
    extra = set(d.cols) - set(col_ids)
    if not extra:
        return d
    return Deltas(d.rowid, d.ts, d.seq, d.op, {k: v for k, v in d.cols.items() if k in col_ids})


@dataclass
class Rebased:
    """Rows with their REDO history folded in (see the module docstring)."""

    columns: dict[int, pa.Array[Any]]  # newest values; ghosts: before their final delete
    undo: Deltas  # apply order, rowid = input row
    final_deletes: Deltas  # the ghosts' final DELETE events, apply order


def rebase(base_values: dict[int, pa.Array[Any]], undo: Deltas, redo: Deltas, ahm: int) -> Rebased:
    """Fold ``redo`` (apply order) into ``base_values``; old ``undo`` events are kept
    (those older than ``ahm`` dropped) ahead of the new ones."""
    n = len(next(iter(base_values.values()))) if base_values else 0
    hist, final = split_final_deletes(redo)
    latest = resolve(hist, _NEVER, undo=False)
    cols = {cid: apply_to_column(v, 0, latest, cid)[0] for cid, v in base_values.items()}
    new_undo = undo_of_history(base_values, np.full(n, -1, dtype=np.int64), hist)
    # ancient events dropped before the sort, which then has fewer to order
    merged = drop_ancient(concat_deltas([undo, new_undo]), ahm).sorted_by_seq()
    return Rebased(cols, merged, final)


# -- merging compaction --------------------------------------------------------------------------
@dataclass
class MergeInput:
    """One input rowset: its rows (every schema column, by column id), encoded keys, and
    every UNDO and REDO event it holds, by rowid."""

    keys: pa.Array[Any]
    columns: dict[int, pa.Array[Any]]
    undo: Deltas
    redo: Deltas


@dataclass
class MergeOutput:
    rows: dict[int, pa.Array[Any]]  # by column id, sorted by key
    keys: pa.Array[Any]
    undo: Deltas  # rowid = output position
    redo: Deltas
    #: Per input, old rowid -> output position of its key (-1: dropped).
    rowid_maps: list[np.ndarray]
    rows_dropped: int


def _key_order(
    keys: pa.Array[Any], del_ts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, Callable[[np.ndarray], pa.Array[Any]]]:
    """The copies in (key, delete time) order, per position of that order whether the
    next copy has the same key, and how to take the keys at given positions. Keys of
    one width sort as numbers (``key_array``: numpy's stable sort of integers is a radix
    sort, several times faster than sorting binary strings); ties, which only deleted
    ghosts make, then sort again by time. Keys of 4 or 8 bytes are also taken as numbers
    (Arrow's ``take`` of binary values copied them one by one, 2-4% of a merge)."""
    total = len(keys)
    same_next = np.zeros(total, dtype=bool)
    width = key_array.fixed_width(keys)
    if width > 0:
        values = key_array.sortable(var_parts(keys)[1], width, total)
        order = np.argsort(values, kind="stable")
        sv = values[order]
        same_next[:-1] = sv[:-1] == sv[1:]
        if same_next.any():
            order = np.lexsort((del_ts, values))
        take: Callable[[np.ndarray], pa.Array[Any]] = keys.take
        if width in key_array.WORD_WIDTHS:
            take = partial(_words_at, values, width)
        return order.astype(np.int64, copy=False), same_next, take
    order = np.asarray(
        pc.sort_indices(
            pa.table({"k": keys, "n": pa.array(del_ts)}),
            sort_keys=[("k", "ascending"), ("n", "ascending")],
        ).to_numpy(),
        dtype=np.int64,
    )
    if total > 1:
        sk = keys.take(order)
        same_next[:-1] = np.asarray(
            pc.equal(sk.slice(0, total - 1), sk.slice(1)).to_numpy(zero_copy_only=False),
            dtype=bool,
        )
    return order, same_next, keys.take


def _words_at(words: np.ndarray, width: int, idx: np.ndarray) -> pa.Array[Any]:
    return key_array.as_binary(words[idx], width)


def merge_rowsets(inputs: Sequence[MergeInput], key_ids: Sequence[int], ahm: int) -> MergeOutput:
    """Merge rowsets by key (see the module docstring). ``key_ids`` are the key columns,
    whose values never change and are not rebased."""
    rebased: list[Rebased] = []
    for m in inputs:
        nonkey = {cid: a for cid, a in m.columns.items() if cid not in key_ids}
        rb = rebase(nonkey, m.undo, m.redo, ahm)
        rb.columns.update({cid: m.columns[cid] for cid in key_ids})
        rebased.append(rb)
    sizes = [len(m.keys) for m in inputs]
    offsets = np.cumsum([0, *sizes])
    total = int(offsets[-1])
    keys = (
        pa.concat_arrays([m.keys.cast(pa.binary()) for m in inputs])
        if inputs
        else pa.array([], pa.binary())
    )
    # Newness of each copy: live copies sort last; ghosts by the time of their delete.
    dead = np.zeros(total, dtype=bool)
    del_ts = np.full(total, _U64_MAX, dtype=np.uint64)
    del_seq = np.full(total, -1, dtype=np.int64)
    for i, rb in enumerate(rebased):
        f = rb.final_deletes
        if len(f):
            g = f.rowid + offsets[i]
            dead[g] = True
            del_ts[g] = f.ts
            del_seq[g] = f.seq
    order, same_next, take_keys = _key_order(keys, del_ts)
    newest_sorted = ~same_next
    group = np.concatenate([[0], np.cumsum(newest_sorted[:-1])]) if total else np.zeros(0, int)
    newest = order[newest_sorted]  # global index of each group's newest copy, key order
    drop_group = dead[newest] & (del_ts[newest] < np.uint64(max(ahm, 0)))
    out_of_group = np.cumsum(~drop_group) - 1
    out_of_group[drop_group] = -1
    target = np.empty(total, dtype=np.int64)
    target[order] = out_of_group[group]
    kept_newest = newest[~drop_group]

    # Base rows: the newest copies of the kept keys.
    col_ids = list(rebased[0].columns) if rebased else []
    rows = {
        cid: pa.concat_arrays([rb.columns[cid] for rb in rebased]).take(kept_newest)
        for cid in col_ids
    }

    def mapped(d: Deltas, i: int) -> Deltas:
        if not len(d):
            return d
        t = target[d.rowid + offsets[i]]
        d = d.select(t >= 0)
        return Deltas(target[d.rowid + offsets[i]], d.ts, d.seq, d.op, d.cols)

    undo_parts = [mapped(rb.undo, i) for i, rb in enumerate(rebased)]
    # Older copies of kept keys: their final DELETE becomes an UNDO REINSERT of their values.
    is_newest = np.zeros(total, dtype=bool)
    is_newest[newest] = True
    older = np.flatnonzero(~is_newest & (target >= 0) & dead)
    older = older[del_ts[older] >= np.uint64(max(ahm, 0))]
    if len(older):
        all_cols = {
            cid: pa.concat_arrays([rb.columns[cid] for rb in rebased]).take(older)
            for cid in col_ids
            if cid not in key_ids
        }
        pos = np.arange(len(older), dtype=np.int64)
        undo_parts.append(
            Deltas(
                target[older],
                del_ts[older],
                del_seq[older],
                np.full(len(older), MutationType.REINSERT, dtype=np.uint8),
                {cid: ColumnDelta(pos, v) for cid, v in all_cols.items()},
            )
        )
    redo_parts = []
    for i, rb in enumerate(rebased):
        f = rb.final_deletes
        if len(f):
            f = f.select(is_newest[f.rowid + offsets[i]])
            redo_parts.append(mapped(f, i))
    undo = drop_ancient(concat_deltas(undo_parts), ahm).sorted_by_seq()
    redo = concat_deltas(redo_parts).sorted_by_seq()
    maps = [target[offsets[i] : offsets[i + 1]].copy() for i in range(len(inputs))]
    return MergeOutput(
        rows,
        take_keys(kept_newest),
        undo,
        redo,
        maps,
        int(np.count_nonzero(drop_group)),
    )
