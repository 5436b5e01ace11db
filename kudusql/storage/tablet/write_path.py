"""Kudu's write path for one tablet: locate each key, decide each row, apply.

``decide`` finds where every key of a batch lives now (the MemRowSet, a frozen
MemRowSet being flushed, or the one DiskRowSet holding it live: min/max key, bloom
filter, key index), then applies Kudu's row semantics in vectorized rounds (see
``write_ops``). ``apply`` turns the decisions into MemRowSet inserts and columnar delta
runs per store. Both run under the tablet's write lock; ``apply`` is also what WAL
replay calls with decisions read back from the log.

A decided batch is a ``LoggedWrite`` (``BatchWrite`` here; the row path's
``RowWrite``; a transaction part's record and its FINALIZE): what the tablet's one
commit protocol (``Tablet._commit``) logs and then applies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from kudusql.common.row_operations import RowError, WriteOp
from kudusql.common.schema import Schema
from kudusql.storage.tablet.delta import ColumnDelta, Deltas, MutationType
from kudusql.storage.tablet.diskrowset import DiskRowSet, default_column
from kudusql.storage.tablet.key_probe import KeyProbe
from kudusql.storage.tablet.log_record import KIND_DRS, KIND_MRS, DecidedBatch
from kudusql.storage.tablet.rowsets import RowSets
from kudusql.storage.tablet.write_ops import (
    DELETING,
    E_IMMUTABLE,
    E_NOT_FOUND,
    E_OK,
    E_PRESENT,
    IGNORING,
    INSERTING,
    UPDATING,
    UPSERTING,
    PreparedBatch,
    error_message,
    occurrence_rounds,
)

# Actions decided per row. DO NOT CHANGE: on-disk (logged in WAL records).
A_NONE, A_INSERT, A_REINSERT, A_UPDATE, A_DELETE, A_IGNORED = range(6)
# Where a live key is.
K_NONE, K_MRS, K_DRS, K_FROZEN = range(4)
# Indexed by action: does it change a stored row (MUTATES), or any row (CHANGES)? A
# table lookup is ~10x cheaper than ``np.isin`` on a batch of actions.
MUTATES = np.zeros(A_IGNORED + 1, dtype=np.bool_)
MUTATES[[A_REINSERT, A_UPDATE, A_DELETE]] = True
CHANGES = MUTATES.copy()
CHANGES[A_INSERT] = True
# Batches up to this many keys find their DiskRowSets through the key-range index, one
# key at a time; larger ones test every rowset's range vectorized.
_SMALL_PROBE = 64


class LoggedWrite(Protocol):
    """A decided write, as the commit protocol (``Tablet._commit``) takes it."""

    @property
    def n(self) -> int:
        """Sequence numbers it takes: ``seq`` to ``seq + n - 1`` (one per batch row)."""
        ...

    def record(self, ts: int, seq: int) -> bytes | None:
        """Its WAL payload at ``ts`` from sequence number ``seq`` (None: nothing to log,
        no row changes anything)."""
        ...

    def apply(self, ts: int, seq: int) -> int | None:
        """Apply it to the memory stores; the bytes they grew by, or None when it
        applies nothing now (a transaction part, applied at its commit)."""
        ...


class BatchValues(Protocol):
    """What ``apply`` reads of a batch: its size, cast columns by schema index, keys."""

    n: int
    columns: dict[int, pa.Array[Any]]
    keys: pa.Array[Any]


@dataclass
class Decisions:
    """Per row of a batch: error code, action and target (store kind, index, row)."""

    err: np.ndarray
    action: np.ndarray
    tkind: np.ndarray
    trs: np.ndarray
    trow: np.ndarray
    drop_imm: np.ndarray
    new_rows: np.ndarray  # batch rows that become new MemRowSet rows, in slot order


def locate(
    rs: RowSets, keys: pa.Array[Any], absent: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Where each key lives now: (kind, rowset index, row, active-MRS slot, exists).
    ``absent``: per key, whether the batch expects it to be new (an INSERT), which
    makes the DiskRowSets' bloom filters worth probing before their key search."""
    m = len(keys)
    kind = np.zeros(m, dtype=np.int8)
    rsi = np.full(m, -1, dtype=np.int64)
    row = np.full(m, -1, dtype=np.int64)
    slot = rs.mrs.lookup(keys) if m else np.zeros(0, dtype=np.int64)
    found = slot >= 0
    if found.any():
        live = np.zeros(m, dtype=bool)
        live[found] = rs.mrs.alive_at_latest(slot[found])
        kind[live] = K_MRS
        row[live] = slot[live]
    for fi, fm in enumerate(rs.frozen):
        todo = np.flatnonzero(kind == K_NONE)
        if not len(todo):
            break
        fs = fm.lookup(keys.take(todo))
        hit = fs >= 0
        if hit.any():
            live = np.zeros(len(todo), dtype=bool)
            live[hit] = fm.alive_at_latest(fs[hit])
            kind[todo[live]] = K_FROZEN
            rsi[todo[live]] = fi
            row[todo[live]] = fs[live]
    if m > _SMALL_PROBE:
        _locate_in_disk_rowsets(rs, KeyProbe(keys), kind, rsi, row, absent)
        return kind, rsi, row, slot, kind != K_NONE
    candidates: range | list[int] = range(len(rs.drs))
    if len(rs.drs) > 1:  # only the rowsets whose range holds a key
        pykeys: list[bytes] = keys.to_pylist()  # type: ignore[assignment]
        candidates = sorted({i for k in pykeys for i in rs.covering(k)})
    for di in candidates:
        drs = rs.drs[di]
        todo = np.flatnonzero(kind == K_NONE)
        if not len(todo):
            break
        sub = keys if len(todo) == m else keys.take(todo)
        rids = drs.find_rowids(sub)
        hit = rids >= 0
        if hit.any():
            live = np.zeros(len(todo), dtype=bool)
            live[hit] = ~drs.dead_at_latest()[rids[hit]]
            kind[todo[live]] = K_DRS
            rsi[todo[live]] = di
            row[todo[live]] = rids[live]
    return kind, rsi, row, slot, kind != K_NONE


def _locate_in_disk_rowsets(
    rs: RowSets,
    probe: KeyProbe,
    kind: np.ndarray,
    rsi: np.ndarray,
    row: np.ndarray,
    absent: np.ndarray | None,
) -> None:
    """``locate``'s DiskRowSet step for a large batch: every rowset at once through the
    packed index (``DiskKeyIndex``), else each rowset asked only about the keys in its
    range not found yet, with the batch sorted and hashed once, so a rowset costs two
    binary searches plus the probes of its own keys."""
    found = rs.disk_keys.find(probe, kind == K_NONE, absent)
    if found is not None:
        at, where, rids, alive = found
        kind[at[alive]] = K_DRS
        rsi[at[alive]] = where[alive]
        row[at[alive]] = rids[alive]
        return
    for di, drs in enumerate(rs.drs):
        if not drs.num_rows:
            continue
        idx = probe.in_range(drs.meta.min_key, drs.meta.max_key)
        if len(idx):
            idx = idx[kind[idx] == K_NONE]
        if not len(idx):
            continue
        rids = drs.probe_rowids(probe, idx)
        hit = rids >= 0
        if hit.any():
            idx, rids = idx[hit], rids[hit]
            live = ~drs.dead_at_latest()[rids]
            kind[idx[live]] = K_DRS
            rsi[idx[live]] = di
            row[idx[live]] = rids[live]


def decide(rs: RowSets, schema: Schema, pb: PreparedBatch) -> Decisions:
    """Decide every row of a batch against the current state (see the module docstring)."""
    n = pb.n
    ops = pb.ops
    err = pb.err.copy()
    action = np.zeros(n, dtype=np.int8)
    tkind = np.zeros(n, dtype=np.int8)
    trs = np.full(n, -1, dtype=np.int64)
    trow = np.full(n, -1, dtype=np.int64)
    drop_imm = np.zeros(n, dtype=bool)
    nk = schema.num_key_columns
    present_nonkey = [i for i in pb.columns if i >= nk]
    imm_present = any(schema.columns[i].immutable for i in present_nonkey)
    valid = err == E_OK
    occ = occurrence_rounds(pb.keys, valid)
    next_slot = rs.mrs.num_slots
    new_slots: list[np.ndarray] = []  # batch rows that become new MemRowSet rows, in slot order
    overlay: dict[bytes, tuple[int, int, int, int]] = {}  # key -> kind, rs, row, mrs slot
    dup_keys: set[bytes] = set()
    if valid.any() and occ.max() > 0:
        dup_keys = set(pb.keys.take(np.flatnonzero(occ > 0)).to_pylist())  # type: ignore[arg-type]
    max_round = int(occ[valid].max()) if valid.any() else -1
    for r in range(max_round + 1):
        rows = np.flatnonzero(valid & (occ == r))
        if not len(rows):
            continue
        rkeys = pb.keys.take(rows) if len(rows) < n else pb.keys
        if r == 0:
            kind, rsi, row, slot, exists = locate(rs, rkeys, INSERTING[ops[rows]])
        else:
            st = [overlay[k] for k in rkeys.to_pylist()]  # type: ignore[index]
            kind = np.array([s[0] for s in st], dtype=np.int8)
            rsi = np.array([s[1] for s in st], dtype=np.int64)
            row = np.array([s[2] for s in st], dtype=np.int64)
            slot = np.array([s[3] for s in st], dtype=np.int64)
            exists = kind != K_NONE
        o = ops[rows]
        ins, ups, upd, dele, ign = (
            INSERTING[o],
            UPSERTING[o],
            UPDATING[o],
            DELETING[o],
            IGNORING[o],
        )
        act = np.zeros(len(rows), dtype=np.int8)
        e = np.zeros(len(rows), dtype=np.int8)
        e[ins & exists & ~ign] = E_PRESENT
        act[ins & exists & ign] = A_IGNORED
        e[(upd | dele) & ~exists & ~ign] = E_NOT_FOUND
        act[(upd | dele) & ~exists & ign] = A_IGNORED
        to_insert = (ins | ups) & ~exists
        act[to_insert & (slot >= 0)] = A_REINSERT
        act[to_insert & (slot < 0)] = A_INSERT
        to_update = (ups | upd) & exists
        if not present_nonkey:
            act[to_update] = A_NONE  # a PK-only upsert of a present key: a no-op
        else:
            act[to_update] = A_UPDATE
            if imm_present:
                strict = to_update & ((o == WriteOp.UPSERT) | (o == WriteOp.UPDATE))
                e[strict] = E_IMMUTABLE
                act[strict] = A_NONE
                drop_imm[rows[to_update & ~strict]] = True
        act[dele & exists] = A_DELETE
        # targets
        tk = kind.copy()
        tr = row.copy()
        ins_rows = np.flatnonzero(act == A_INSERT)
        new_ids = np.arange(next_slot, next_slot + len(ins_rows), dtype=np.int64)
        next_slot += len(ins_rows)
        new_slots.append(rows[ins_rows])
        tk[ins_rows] = K_MRS
        tr[ins_rows] = new_ids
        reins = act == A_REINSERT
        tk[reins] = K_MRS
        tr[reins] = slot[reins]
        err[rows] = np.where(e != E_OK, e, err[rows])
        action[rows] = act
        tkind[rows] = tk
        trs[rows] = rsi
        trow[rows] = tr
        if dup_keys:
            _update_overlay(overlay, dup_keys, rkeys, act, e, kind, rsi, row, slot, tk, tr)
    rows_new = np.concatenate(new_slots) if new_slots else np.zeros(0, np.int64)
    return Decisions(err, action, tkind, trs, trow, drop_imm, rows_new)


def _update_overlay(
    overlay: dict[bytes, tuple[int, int, int, int]],
    dup_keys: set[bytes],
    rkeys: pa.Array[Any],
    act: np.ndarray,
    e: np.ndarray,
    kind: np.ndarray,
    rsi: np.ndarray,
    row: np.ndarray,
    slot: np.ndarray,
    tk: np.ndarray,
    tr: np.ndarray,
) -> None:
    """Record the state of keys that come back in a later round (rare: a Python loop
    over repeated keys only)."""
    for j, k in enumerate(rkeys.to_pylist()):
        if k not in dup_keys:
            continue
        a = int(act[j])
        if e[j] != E_OK or a in (A_NONE, A_IGNORED, A_UPDATE):
            overlay[k] = (int(kind[j]), int(rsi[j]), int(row[j]), int(slot[j]))
        elif a in (A_INSERT, A_REINSERT):
            overlay[k] = (K_MRS, -1, int(tr[j]), int(tr[j]))
        elif a == A_DELETE:
            s = int(row[j]) if kind[j] == K_MRS else int(slot[j])
            overlay[k] = (K_NONE, -1, -1, s)


def apply(
    rs: RowSets,
    schema: Schema,
    batch: BatchValues,
    d: Decisions,
    ts: int,
    seq_base: int,
) -> int:
    """Apply decided rows to the in-memory stores (under the tablet's write lock);
    returns the bytes they grew by (charged to back-pressure: ``throttle``)."""
    pb = batch
    action, tkind, trs, trow, drop_imm = d.action, d.tkind, d.trs, d.trow, d.drop_imm
    batch_rows = d.new_rows
    mrs_before = rs.mrs.bytes
    if len(batch_rows):
        everything = len(batch_rows) == pb.n and bool(np.all(batch_rows == np.arange(pb.n)))
        idx = batch_rows
        cols = []
        for i, c in enumerate(schema.columns):
            arr = pb.columns.get(i)
            if arr is None:
                cols.append(default_column(c, len(batch_rows)))
            else:
                cols.append(arr if everything else arr.take(idx))
        new_rows = pa.RecordBatch.from_arrays(cols, schema=schema.arrow_schema())
        keys = pb.keys if everything else pb.keys.take(idx)
        rs.mrs.insert(new_rows, keys, ts, seq_base + batch_rows)
    mut = MUTATES[action]
    if not mut.any():
        return rs.mrs.bytes - mrs_before
    # One Deltas for every mutated row, grouped by target store (a stable sort keeps
    # each store's events in apply order); each store gets its run of it: a batch of
    # random keys touches every rowset, so per-store work must stay small (a
    # DiskRowSet's DeltaMemStore keeps the run uncut until read).
    rows = np.flatnonzero(mut)
    key = tkind[rows].astype(np.int64) * (1 << 40) + (trs[rows] + 1)
    order = np.argsort(key, kind="stable")
    rows, key = rows[order], key[order]
    every = _build_deltas(schema, pb, rows, action, trow, drop_imm, ts, seq_base)
    cuts = np.flatnonzero(np.diff(key)) + 1
    starts = np.concatenate([[0], cuts])
    stops = np.concatenate([cuts, [len(rows)]])
    gkey = key[starts]
    gkind, gri = gkey >> 40, (gkey & ((1 << 40) - 1)) - 1
    nbytes = ((stops - starts) * (every.nbytes() / len(every))).astype(np.int64)
    on_drs = gkind == K_DRS
    grown = int(nbytes[on_drs].sum())
    if on_drs.any():
        d_ri, d_start, d_stop, d_bytes = (a[on_drs] for a in (gri, starts, stops, nbytes))
        if bool((action[rows] != A_UPDATE).any()):  # rows may die or come back
            for ri, start, stop, n in zip(
                *(a.tolist() for a in (d_ri, d_start, d_stop, d_bytes)), strict=True
            ):
                rs.drs[ri].apply_mutations(every.slice(start, stop), True, n)
        else:
            drs = rs.drs
            DiskRowSet.append_update_runs(
                [drs[i] for i in d_ri.tolist()], every, d_start, d_stop, d_bytes
            )
    for k, ri, start, stop in zip(
        *(a[~on_drs].tolist() for a in (gkind, gri, starts, stops)), strict=True
    ):
        if k == K_MRS:
            rs.mrs.mutate(every.slice(start, stop))
        else:
            fm = rs.frozen[ri]
            before = fm.bytes
            fm.mutate(every.slice(start, stop))
            grown += fm.bytes - before
    return grown + rs.mrs.bytes - mrs_before


def _build_deltas(
    schema: Schema,
    pb: BatchValues,
    rows: np.ndarray,
    action: np.ndarray,
    trow: np.ndarray,
    drop_imm: np.ndarray,
    ts: int,
    seq_base: int,
) -> Deltas:
    a = action[rows]
    op = np.where(
        a == A_UPDATE,
        np.uint8(MutationType.UPDATE),
        np.where(a == A_DELETE, np.uint8(MutationType.DELETE), np.uint8(MutationType.REINSERT)),
    ).astype(np.uint8)
    cols: dict[int, ColumnDelta] = {}
    for i in range(schema.num_key_columns, len(schema.columns)):
        c = schema.columns[i]
        arr = pb.columns.get(i)
        if arr is not None:
            sets = (op == MutationType.REINSERT) | (
                (op == MutationType.UPDATE) & ~(drop_imm[rows] & c.immutable)
            )
            if sets.any():
                cols[c.id] = ColumnDelta(np.flatnonzero(sets), arr.take(rows[sets]))
        else:
            sets = op == MutationType.REINSERT
            if sets.any():
                cols[c.id] = ColumnDelta(np.flatnonzero(sets), default_column(c, int(sets.sum())))
    return Deltas(
        trow[rows].astype(np.int64),
        np.full(len(rows), ts, dtype=np.uint64),
        (seq_base + rows).astype(np.int64),
        op,
        cols,
    )


def row_errors(schema: Schema, pb: PreparedBatch, err: np.ndarray) -> list[RowError]:
    bad = np.flatnonzero(err != E_OK)
    if not len(bad):
        return []
    out = []
    key_names = [c.name for c in schema.key_columns if c.name in pb.source.column_names]
    for i in bad.tolist():
        status, msg = error_message(int(err[i]), pb.detail.get(i))
        key = tuple(pb.source.column(k)[i].as_py() for k in key_names) or None
        out.append(RowError(i, WriteOp(int(pb.ops[i])), key, status, msg))
    return out


def to_log_record(
    rs: RowSets, schema: Schema, pb: PreparedBatch, d: Decisions, ts: int, seq_base: int
) -> DecidedBatch | None:
    """The WAL record of a decided batch (None when no row changes anything)."""
    rows = np.flatnonzero(CHANGES[d.action])
    if not len(rows):
        return None
    tk, tr, trs = d.tkind[rows], d.trow[rows], d.trs[rows]
    kind = np.where(tk == K_DRS, KIND_DRS, KIND_MRS).astype(np.int8)
    store = np.full(len(rows), rs.mrs.id, dtype=np.int64)
    dms = np.full(len(rows), -1, dtype=np.int64)
    rowid = np.full(len(rows), -1, dtype=np.int64)
    for fi, fm in enumerate(rs.frozen):
        store[(tk == K_FROZEN) & (trs == fi)] = fm.id
    on_drs = np.flatnonzero(tk == K_DRS)
    if len(on_drs):
        ids = np.array([x.id for x in rs.drs], dtype=np.int64)
        dms_ids = np.array([x.dms.id for x in rs.drs], dtype=np.int64)
        store[on_drs] = ids[trs[on_drs]]
        dms[on_drs] = dms_ids[trs[on_drs]]
        rowid[on_drs] = tr[on_drs]
    everything = len(rows) == pb.n  # rows is sorted and unique, so it is 0..n-1
    cols = {
        schema.columns[i].id: arr if everything else arr.take(rows) for i, arr in pb.columns.items()
    }
    keys = pb.keys if everything else pb.keys.take(rows)
    return DecidedBatch(
        ts,
        seq_base,
        pb.n,
        rows,
        d.action[rows],
        kind,
        store,
        dms,
        rowid,
        d.drop_imm[rows],
        keys,
        cols,
    )


def write_counts(d: Decisions) -> tuple[int, int]:
    """(applied, ignored): the rows a batch's decisions change, and those an *_IGNORE
    operation skips."""
    ignored = int(np.count_nonzero(d.action == A_IGNORED))
    return int(np.count_nonzero((d.err == E_OK) & (d.action != A_IGNORED))), ignored


@dataclass
class BatchWrite:
    """A batch decided by ``decide`` against ``rs``, as a ``LoggedWrite``: logged as
    decided (``to_log_record``), applied by ``apply``."""

    rs: RowSets
    schema: Schema
    pb: PreparedBatch
    d: Decisions

    @property
    def n(self) -> int:
        return self.pb.n

    def record(self, ts: int, seq: int) -> bytes | None:
        rec = to_log_record(self.rs, self.schema, self.pb, self.d, ts, seq)
        return None if rec is None else rec.encode()

    def apply(self, ts: int, seq: int) -> int:
        return apply(self.rs, self.schema, self.pb, self.d, ts, seq)
