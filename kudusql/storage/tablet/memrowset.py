"""MemRowSet: the in-memory store of newly inserted rows and their mutation chains.

Kudu keeps a concurrent B-tree; here inserts are appended as Arrow record batches
(one per write batch), each row addressed by a *slot* (its ordinal of insertion), with
the insert timestamp and sequence number beside it. Mutations of those rows (UPDATE,
DELETE and REINSERT over a deleted row) are appended as columnar ``Deltas`` keyed by
slot, in apply order, exactly like a DeltaMemStore keyed by rowid.

A write batch of fixed-width keys is answered from sorted runs of the Arrow chunks' keys
(``_KeyRuns``: one ``searchsorted`` per run, the runs merged as a binary counter merges
its digits). Other batches go to a dict from encoded key to slot when they are small,
and to a vectorized hash join (``pyarrow.compute.index_in``) over every key when they
are large. The dict also answers point lookups and the keys of the row-path tail; it is
filled lazily, so a bulk load never pays for it. The MemRowSet sorts by key only when
it is flushed or scanned in key order.

Rows of the row path (``insert_rows``: batches of a few rows, as Python tuples) are
kept as tuples in a *pending* tail, always the last slots, with their keys in the dict
at once. The tail becomes one Arrow record batch (``_materialize``) when a reader needs
the columnar form (``view``: scans, flushes, large probes), before an Arrow insert, or
when it reaches ``PENDING_ROWS``; point lookups read a pending row straight from its
tuple.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kudusql.common.schema import ColumnSchema, Schema
from kudusql.storage.cfile import key_array
from kudusql.storage.cfile.encodings import var_parts
from kudusql.storage.tablet.delta import Deltas, MutationType, concat_deltas, last_per_row


@dataclass
class MemRowSetView:
    """A consistent, immutable picture of a MemRowSet up to some moment."""

    rows: pa.Table
    keys: pa.Array[Any]
    insert_ts: np.ndarray
    insert_seq: np.ndarray
    deltas: Deltas

    @property
    def num_slots(self) -> int:
        return len(self.insert_ts)


class MemRowSet:
    """Rows inserted since the last flush, with their mutation chains."""

    # Large probes use a hash join instead of the dict when batch * ratio > size.
    _DICT_PROBE_RATIO = 32
    #: The pending tail of row-path tuples becomes Arrow at this many rows.
    PENDING_ROWS = 1024

    def __init__(self, mrs_id: int, schema: Schema) -> None:
        self.id = mrs_id
        self.schema = schema
        self._lock = threading.Lock()
        self._rows: list[pa.RecordBatch] = []
        self._keys: list[pa.Array[Any]] = []
        self._insert_ts: list[np.ndarray] = []
        self._insert_seq: list[np.ndarray] = []
        self._mutations: list[Deltas] = []
        self._alive = np.zeros(1024, dtype=bool)
        self._num_slots = 0
        self._index: dict[bytes, int] = {}
        self._runs: _KeyRuns | None = None  # batch lookups of fixed-width keys
        self._no_runs = False  # keys of different widths were seen: no runs
        self._indexed_chunks = 0
        self._indexed_slots = 0
        self._view: MemRowSetView | None = None
        self._version = 0  # bumped by every append; a view is cached only if unchanged
        self.min_ts: int | None = None
        self.max_seq = -1
        self.min_seq: int | None = None
        self.bytes = 0
        # The row path's pending tail (slots num_slots - len(_p_rows) ...); the lists are
        # replaced, never cleared, so a reader's reference stays valid.
        self._p_rows: list[tuple[Any, ...]] = []
        self._p_keys: list[bytes] = []
        self._p_ts: list[int] = []
        self._p_seq: list[int] = []
        self._arrow_schema = schema.arrow_schema()
        self._types = [c.type.arrow_type() for c in schema.columns]

    # -- state ------------------------------------------------------------------------------
    @property
    def num_slots(self) -> int:
        return self._num_slots

    def __len__(self) -> int:
        return self._num_slots

    def is_empty(self) -> bool:
        return self._num_slots == 0

    def alive_at_latest(self, slots: np.ndarray) -> np.ndarray:
        return np.asarray(self._alive[slots], dtype=bool)

    def is_alive(self, slot: int) -> bool:
        return bool(self._alive[slot])

    def live_count(self) -> int:
        return int(self._alive[: self._num_slots].sum())

    # -- writes (called under the tablet's write lock) --------------------------------------
    def insert(
        self, rows: pa.RecordBatch, keys: pa.Array[Any], ts: int, seqs: np.ndarray
    ) -> np.ndarray:
        """Append new rows (full schema); returns their slots."""
        n = rows.num_rows
        first = self._num_slots
        need = first + n
        self._grow(need)
        self._alive[first:need] = True
        with self._lock:
            self._materialize()  # Arrow chunks stay in slot order
            self._rows.append(rows)
            self._keys.append(keys)
            self._insert_ts.append(np.full(n, ts, dtype=np.uint64))
            self._insert_seq.append(np.asarray(seqs, dtype=np.int64))
            self._num_slots = need
            self._view = None
            self._version += 1
        if self.min_ts is None:
            self.min_ts = ts
        if n and self.min_seq is None:
            self.min_seq = int(seqs[0])
        self.max_seq = max(self.max_seq, int(seqs[-1]) if n else -1)
        self.bytes += rows.nbytes + keys.nbytes + 16 * n
        return np.arange(first, need, dtype=np.int64)

    def _grow(self, need: int) -> None:
        if need > len(self._alive):
            grown = np.zeros(max(need, 2 * len(self._alive)), dtype=bool)
            grown[: self._num_slots] = self._alive[: self._num_slots]
            self._alive = grown

    def insert_rows(
        self,
        rows: list[tuple[Any, ...]],
        keys: list[bytes],
        ts: int,
        seq: list[int],
        nbytes: int,
    ) -> None:
        """Append new rows given as full-schema tuples of Python values (the row path)."""
        self.insert_run(rows, keys, [ts] * len(rows), seq, nbytes)

    def insert_run(
        self,
        rows: list[tuple[Any, ...]],
        keys: list[bytes],
        stamps: list[int],
        seqs: list[int],
        nbytes: int,
    ) -> None:
        """Append new rows (full-schema tuples) with a timestamp each: the row path's
        ``insert_rows``, and WAL replay of many row-path records at once (each keeps its
        own timestamp and sequence number)."""
        n = len(rows)
        if not n:
            return
        first = self._num_slots
        need = first + n
        if need > len(self._alive):
            self._grow(need)
        self._alive[first:need] = True
        if self._indexed_chunks != len(self._keys):
            self._index_pending()  # pending keys go in the dict after every chunk's
        with self._lock:
            self._index.update(zip(keys, range(first, need), strict=True))
            self._p_rows += rows
            self._p_keys += keys
            self._p_ts += stamps
            self._p_seq += seqs
            self._num_slots = need
            self._view = None
            self._version += 1
            if len(self._p_rows) >= self.PENDING_ROWS:
                self._materialize()
        if self.min_ts is None:
            self.min_ts = stamps[0]
        if self.min_seq is None:
            self.min_seq = seqs[0]
        top = max(seqs)
        if top > self.max_seq:
            self.max_seq = top
        self.bytes += nbytes

    def insert_row(self, row: tuple[Any, ...], key: bytes, ts: int, seq: int, nbytes: int) -> None:
        """``insert_rows`` of one row."""
        slot = self._num_slots
        if slot >= len(self._alive):
            self._grow(slot + 1)
        self._alive[slot] = True
        if self._indexed_chunks != len(self._keys):
            self._index_pending()  # pending keys go in the dict after every chunk's
        with self._lock:
            self._index[key] = slot
            self._p_rows.append(row)
            self._p_keys.append(key)
            self._p_ts.append(ts)
            self._p_seq.append(seq)
            self._num_slots = slot + 1
            self._view = None
            self._version += 1
            if len(self._p_rows) >= self.PENDING_ROWS:
                self._materialize()
        if self.min_ts is None:
            self.min_ts = ts
        if self.min_seq is None:
            self.min_seq = seq
        if seq > self.max_seq:
            self.max_seq = seq
        self.bytes += nbytes

    def _materialize(self) -> None:
        """Turn the pending tuples into one Arrow chunk (under ``_lock``). The content
        does not change, so the version stays."""
        pend = self._p_rows
        if not pend:
            return
        cols = list(zip(*pend, strict=True))
        arrays = [_column(cols[i], t) for i, t in enumerate(self._types)]
        batch = pa.RecordBatch.from_arrays(arrays, schema=self._arrow_schema)
        # Every chunk before the tail was indexed when the tail started (insert_rows).
        indexed = self._indexed_chunks == len(self._keys)
        self._rows.append(batch)
        self._keys.append(pa.array(self._p_keys, type=pa.binary()))
        self._insert_ts.append(np.array(self._p_ts, dtype=np.uint64))
        self._insert_seq.append(np.array(self._p_seq, dtype=np.int64))
        if indexed:
            self._indexed_chunks += 1
            self._indexed_slots += len(pend)
        self._p_rows, self._p_keys, self._p_ts, self._p_seq = [], [], [], []

    def mutate(self, deltas: Deltas) -> None:
        """Append mutation events (rowid = slot) and update liveness at latest."""
        if not len(deltas):
            return
        live_ev = deltas.op != MutationType.UPDATE
        if live_ev.any():
            # Events are in apply order; numpy does not promise which of repeated indices
            # an assignment keeps, so assign the last event of each slot only.
            uniq, idx = last_per_row(deltas.rowid[live_ev])
            self._alive[uniq] = deltas.op[live_ev][idx] == MutationType.REINSERT
        with self._lock:
            self._mutations.append(deltas)
            self._view = None
            self._version += 1
        if self.min_ts is None:
            self.min_ts = int(deltas.ts[0])
        if self.min_seq is None:
            self.min_seq = int(deltas.seq[0])
        self.max_seq = max(self.max_seq, int(deltas.seq[-1]))
        self.bytes += deltas.nbytes()

    # -- probes -------------------------------------------------------------------------------
    def lookup(self, keys: pa.Array[Any]) -> np.ndarray:
        """Slot of each key (alive or not), -1 if the MemRowSet never held it."""
        n = len(keys)
        if self._num_slots == 0 or n == 0:
            return np.full(n, -1, dtype=np.int64)
        width = key_array.fixed_width(keys)
        runs, pending = self._key_runs()
        if runs is not None and width > 0:
            if width == runs.width:
                _, data = var_parts(keys)
                out = runs.find(key_array.sortable(data, width, n))
            else:  # every key of the Arrow chunks has the runs' width
                out = np.full(n, -1, dtype=np.int64)
            if pending:  # the row path's tail: its keys are in the dict
                get = self._index.get
                miss = np.flatnonzero(out < 0)
                tail: list[bytes] = keys.take(miss).to_pylist()  # type: ignore[assignment]
                out[miss] = np.fromiter((get(k, -1) for k in tail), np.int64, len(miss))
            return out
        if n * self._DICT_PROBE_RATIO > self._num_slots:
            all_keys = self.view().keys
            idx = pc.index_in(keys, value_set=all_keys)
            return _fill_idx(idx)
        self._index_pending()
        get = self._index.get
        pylist: list[bytes] = keys.to_pylist()  # type: ignore[assignment]
        return np.fromiter((get(k, -1) for k in pylist), dtype=np.int64, count=n)

    def _key_runs(self) -> tuple[_KeyRuns | None, bool]:
        """The sorted runs over every key of the Arrow chunks (None when the keys are
        not all of one width), brought up to date; and whether a row-path tail exists."""
        with self._lock:
            pending = bool(self._p_keys)
            runs = self._runs
            if self._no_runs:
                return None, pending
            covered = runs.slots if runs is not None else 0
            in_chunks = self._num_slots - len(self._p_keys)
            if covered == in_chunks:
                return runs, pending
            # The keys not covered yet are in the last chunks: walk back to them (a
            # MemRowSet of 64 MiB holds a thousand batches' chunks; a walk from the
            # first would be a Python step per chunk for every batch written).
            parts, end = [], in_chunks
            for k in reversed(self._keys):
                if end <= covered:
                    break
                start = end - len(k)
                parts.append(k.slice(max(0, covered - start)))
                end = start
            parts.reverse()
            new = parts[0] if len(parts) == 1 else pa.concat_arrays(parts)
            width = key_array.fixed_width(new)
            if width <= 0 or (runs is not None and width != runs.width):
                self._runs, self._no_runs = None, True
                return None, pending
            _, data = var_parts(new)
            values = key_array.sortable(data, width, len(new))
            slots = np.arange(covered, in_chunks, dtype=np.int64)
            self._runs = _KeyRuns.of(runs, width, values, slots)
            return self._runs, pending

    def lookup_one(self, key: bytes) -> int:
        if self._num_slots == 0:
            return -1
        self._index_pending()
        return self._index.get(key, -1)

    def _index_pending(self) -> None:
        # Under the lock throughout: a probe in another thread (a lock-free point lookup,
        # or the writer) must never see chunks claimed as indexed before they are.
        if self._indexed_chunks == len(self._keys):
            return
        with self._lock:
            chunks = self._keys[self._indexed_chunks :]
            start = self._indexed_slots
            for k in chunks:
                ks: list[bytes] = k.to_pylist()  # type: ignore[assignment]
                self._index.update(zip(ks, range(start, start + len(k)), strict=True))
                start += len(k)
            self._indexed_chunks = len(self._keys)
            self._indexed_slots = start

    def row_at(self, slot: int, columns: Sequence[ColumnSchema]) -> dict[str, object]:
        """One row's newest values (the point-lookup fast path)."""
        with self._lock:
            rows, muts = list(self._rows), list(self._mutations)
            pend = self._p_rows
            tail = self._num_slots - len(pend)
        if slot >= tail:
            t = pend[slot - tail]
            out = {c.name: t[self.schema.index_of(c.name)] for c in columns}
        else:
            start = 0
            for b in rows:
                if slot < start + b.num_rows:
                    break
                start += b.num_rows
            out = {
                c.name: b.column(self.schema.index_of(c.name))[slot - start].as_py()
                for c in columns
            }
        for d in muts:
            hits = np.flatnonzero(d.rowid == slot)
            for ev in hits.tolist():
                for c in columns:
                    cd = d.cols.get(c.id)
                    if cd is not None:
                        j = int(np.searchsorted(cd.pos, ev))
                        if j < len(cd.pos) and cd.pos[j] == ev:
                            out[c.name] = cd.values[j].as_py()
        return out

    # -- reads --------------------------------------------------------------------------------
    def view(self) -> MemRowSetView:
        """A consistent picture of everything applied so far (cached until the next write)."""
        v = self._view
        if v is not None:
            return v
        with self._lock:
            self._materialize()
            rows, keys = list(self._rows), list(self._keys)
            its, iseq, muts = list(self._insert_ts), list(self._insert_seq), list(self._mutations)
            version = self._version
        if rows:
            table = pa.Table.from_batches(rows).combine_chunks()
            keyarr = pa.concat_arrays(keys)
        else:
            table = self.schema.arrow_schema().empty_table()
            keyarr = pa.array([], type=pa.binary())
        v = MemRowSetView(
            table,
            keyarr,
            np.concatenate(its) if its else np.zeros(0, dtype=np.uint64),
            np.concatenate(iseq) if iseq else np.zeros(0, dtype=np.int64),
            concat_deltas(muts),
        )
        # Only cache if nothing was appended meanwhile (lengths alone are not enough:
        # another reader may have compacted the lists to the same lengths).
        with self._lock:
            if self._version == version:
                self._rows = [b for t in [table] for b in t.to_batches()] if rows else []
                self._keys = [keyarr] if keys else []
                self._insert_ts = [v.insert_ts] if its else []
                self._insert_seq = [v.insert_seq] if iseq else []
                self._mutations = [v.deltas] if muts else []
                self._indexed_chunks = 1 if self._indexed_chunks == len(keys) and keys else 0
                if self._indexed_chunks == 0:
                    self._index.clear()
                    self._indexed_slots = 0
                self._view = v
        return v


_NUMPY_TYPES = {
    pa.int8(): np.int8,
    pa.int16(): np.int16,
    pa.int32(): np.int32,
    pa.int64(): np.int64,
    pa.float32(): np.float32,
    pa.float64(): np.float64,
}


def _column(values: Sequence[Any], t: pa.DataType) -> pa.Array[Any]:
    """An Arrow column of Python values of type ``t`` (numbers without NULLs through
    numpy: pyarrow converts Python ints one by one several times slower)."""
    np_type = _NUMPY_TYPES.get(t)
    if np_type is not None and None not in values:
        return pa.array(np.array(values, dtype=np_type), type=t)
    return pa.array(values, type=t)


@dataclass(frozen=True)
class _KeyRuns:
    """Every key of a MemRowSet's Arrow chunks (all of one width, in ``key_array``'s
    sortable form) as sorted runs with their slots: a batch of keys is one
    ``searchsorted`` per run. Runs are merged as a binary counter merges its digits
    (a new run absorbs the newest runs not larger than twice its size), so there are
    a few, and a key is re-sorted a few times over the MemRowSet's life. Replaced,
    never changed, so a lookup may use the one it read while a writer adds keys.

    This is the write path's probe of the MemRowSet: a per-key dict costs a Python
    step per key of every batch, and a hash join over all keys rebuilds its table
    each batch."""

    width: int
    runs: tuple[tuple[np.ndarray, np.ndarray], ...]  # (sorted values, their slots)
    slots: int  # keys covered: slots 0 .. slots-1

    @staticmethod
    def of(prev: _KeyRuns | None, width: int, values: np.ndarray, slots: np.ndarray) -> _KeyRuns:
        """``prev`` (or nothing) with the keys ``values`` at ``slots`` added."""
        runs = list(prev.runs) if prev is not None else []
        order = np.argsort(values, kind="stable")
        vals, sl = values[order], slots[order]
        while runs and len(runs[-1][0]) <= 2 * len(vals):
            pv, ps = runs.pop()
            vals = np.concatenate([pv, vals])
            sl = np.concatenate([ps, sl])
            order = np.argsort(vals, kind="stable")
            vals, sl = vals[order], sl[order]
        runs.append((vals, sl))
        return _KeyRuns(width, tuple(runs), int(slots[-1]) + 1 if len(slots) else 0)

    def find(self, values: np.ndarray) -> np.ndarray:
        """Slot of each value, -1 where absent (a key is at most in one run)."""
        out = np.full(len(values), -1, dtype=np.int64)
        for vals, sl in self.runs:
            pos = np.searchsorted(vals, values)
            np.minimum(pos, len(vals) - 1, out=pos)
            hit = vals[pos] == values
            out[hit] = sl[pos[hit]]
        return out


def _fill_idx(idx: pa.Array[Any]) -> np.ndarray:
    return np.asarray(idx.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
