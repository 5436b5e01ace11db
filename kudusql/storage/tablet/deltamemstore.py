"""DeltaMemStore: the in-memory REDO mutations (UPDATE, DELETE) of one DiskRowSet.

Kudu keys it by (rowid, timestamp) in a B-tree; here events are appended column-wise
in apply order, which is already (timestamp, sequence) order, so no tree is needed to
resolve them. A delta flush writes its contents to a REDO DeltaFile.

A write batch of random keys touches every DiskRowSet of the tablet, so the write path
builds one ``Deltas`` for the whole batch, grouped by rowset, and hands each store only
its run ``[start, stop)`` of it (``append_run``): the store keeps the reference and cuts
the run out when it is first read (``deltas``), so appending costs the same for any
number of events and columns. Until then the batch's arrays are shared by the stores
it touched, and each is charged its share of their size.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from kudusql.storage.tablet.delta import Deltas, concat_deltas, range_positions


class DeltaMemStore:
    """Mutations of one DiskRowSet's rows since its last delta flush."""

    def __init__(self, dms_id: int) -> None:
        self.id = dms_id
        self._lock = threading.Lock()
        #: Appended runs in order: whole ``Deltas``, or (batch, start, stop) not cut yet.
        self._parts: list[Deltas | tuple[Deltas, int, int]] = []
        self._cached: Deltas | None = None
        self._version = 0  # bumped by every append; a merge is kept only if unchanged
        self.count = 0
        self.bytes = 0
        self.min_ts: int | None = None
        self.min_seq: int | None = None

    def __len__(self) -> int:
        return self.count

    def is_empty(self) -> bool:
        return self.count == 0

    def append(self, deltas: Deltas, nbytes: int | None = None) -> None:
        """Add events (called under the tablet's write lock). ``nbytes``, when given,
        is charged instead of ``deltas.nbytes()`` (the write path apportions one
        batch's size over the stores it touches)."""
        if len(deltas):
            self._add(deltas, deltas, 0, len(deltas), deltas.nbytes() if nbytes is None else nbytes)

    def append_run(self, batch: Deltas, start: int, stop: int, nbytes: int) -> None:
        """Add the events ``[start, stop)`` of ``batch`` without cutting them out yet;
        ``nbytes`` is this run's share of the batch's size."""
        if stop > start:
            self._add((batch, start, stop), batch, start, stop, nbytes)

    def _add(
        self, part: Deltas | tuple[Deltas, int, int], of: Deltas, start: int, stop: int, nbytes: int
    ) -> None:
        with self._lock:
            self._parts.append(part)
            self._cached = None
            self._version += 1
            self.count += stop - start
            self.bytes += nbytes
            if self.min_ts is None:
                self.min_ts = int(of.ts[start])
                self.min_seq = int(of.seq[start])

    def deltas(self) -> Deltas:
        """Everything appended so far, in apply order."""
        c = self._cached
        if c is not None:
            return c
        with self._lock:
            parts = list(self._parts)
            version = self._version
        # One store alone: cutting its runs one by one beats ``deltas_of``, which would
        # concatenate every batch they come from to keep a small share of each.
        merged = concat_deltas(
            [p if isinstance(p, Deltas) else p[0].slice(p[1], p[2]) for p in parts]
        )
        self._keep(merged, version)
        return merged

    def _keep(self, merged: Deltas, version: int) -> None:
        """Replace the parts read at ``version`` by their merged form, unless a writer
        appended meanwhile (lengths alone are not enough: another reader may have
        merged the parts, and a writer appended, to the same length)."""
        with self._lock:
            if self._version == version:
                self._parts = [merged] if len(merged) else []
                self._cached = merged


def append_runs(
    stores: Sequence[DeltaMemStore],
    batch: Deltas,
    starts: Sequence[int],
    stops: Sequence[int],
    nbytes: Sequence[int],
) -> None:
    """``stores[i].append_run(batch, starts[i], stops[i], nbytes[i])`` for every i in
    one call: a batch of random keys hands a run to every rowset's store, and three
    nested calls per store were most of what a rowset cost the batch."""
    ts, seq = batch.ts, batch.seq
    for st, start, stop, n in zip(stores, starts, stops, nbytes, strict=True):
        if stop <= start:
            continue
        with st._lock:
            st._parts.append((batch, start, stop))
            st._cached = None
            st._version += 1
            st.count += stop - start
            st.bytes += n
            if st.min_ts is None:
                st.min_ts = int(ts[start])
                st.min_seq = int(seq[start])


def deltas_of(stores: Sequence[DeltaMemStore]) -> list[Deltas]:
    """``[s.deltas() for s in stores]``, with the runs of all of them cut in one
    vectorized pass: a delta flush reads every store, and their runs number batches x
    rowsets touched, too many to cut one by one (each cut is a few numpy calls per
    column). Costs a Python append per run and numpy work per event of the batches."""
    snaps: list[tuple[list[Deltas | tuple[Deltas, int, int]], int]] = []
    for st in stores:
        with st._lock:
            snaps.append((list(st._parts), st._version))
    index: dict[int, int] = {}  # id(batch) -> position in batches
    batches: list[Deltas] = []
    run_batch: list[int] = []
    run_start: list[int] = []
    run_stop: list[int] = []
    for parts, _ in snaps:
        for p in parts:
            b, start, stop = (p, 0, len(p)) if isinstance(p, Deltas) else p
            bi = index.get(id(b))
            if bi is None:
                bi = index[id(b)] = len(batches)
                batches.append(b)
            run_batch.append(bi)
            run_start.append(start)
            run_stop.append(stop)
    if not batches:
        return [Deltas() for _ in stores]
    rb = np.asarray(run_batch, dtype=np.int64)
    starts = np.asarray(run_start, dtype=np.int64)
    lengths = np.asarray(run_stop, dtype=np.int64) - starts
    sizes = np.array([len(b) for b in batches], dtype=np.int64)
    ends = np.cumsum(lengths)
    if 4 * int(ends[-1]) >= int(sizes.sum()):
        # most of the batches' events are wanted: one concatenation and one gather
        first = np.cumsum(sizes) - sizes
        cut = concat_deltas(batches).take(range_positions(first[rb] + starts, lengths))
    else:
        # a few stores of many: concatenating every batch they share with other
        # stores costs more than a gather per batch (then one to put runs in order)
        by_batch = np.argsort(rb, kind="stable")
        edges = np.searchsorted(rb[by_batch], np.arange(len(batches) + 1))
        pieces = []
        for i, b in enumerate(batches):
            sel = by_batch[edges[i] : edges[i + 1]]
            pieces.append(b.take(range_positions(starts[sel], lengths[sel])))
        taken = concat_deltas(pieces)
        at = np.empty(len(rb), dtype=np.int64)
        at[by_batch] = np.cumsum(lengths[by_batch]) - lengths[by_batch]
        cut = taken.take(range_positions(at, lengths))
    run_ends = np.concatenate([[0], ends])
    store_runs = np.cumsum([0] + [len(parts) for parts, _ in snaps])
    bounds = run_ends[store_runs].tolist()
    out = cut.split(bounds[1:-1])
    for st, (_, version), merged in zip(stores, snaps, out, strict=True):
        st._keep(merged, version)
    return out
