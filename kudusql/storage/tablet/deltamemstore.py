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

Even one run per store is a Python round per store per batch: with ~200 rowsets, 8% of
a sustained writer's time (issue 4). So the write path hands a batch of UPDATEs to the
tablet's ``PendingRuns`` instead, once; the first reader of any of the tablet's stores
(a scan, a delta flush, the maintenance manager's scoring, a write that must keep its
order) ``settle``s them: every pending batch is concatenated, the runs gathered in
store order in one ``take``, and each store given its run of that gathered batch. The
per-store Python round is then paid once per settle (the maintenance manager polls
every 100 ms: tens of batches), not once per batch. Every read of a store settles
first, so a reader never misses a batch the write path applied before it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from kudusql.storage.tablet.delta import Deltas, concat_deltas, range_positions


class DeltaMemStore:
    """Mutations of one DiskRowSet's rows since its last delta flush."""

    def __init__(self, dms_id: int, pending: PendingRuns | None = None) -> None:
        self.id = dms_id
        #: The tablet's runs not handed over yet (None: every append comes directly).
        self.pending = pending
        self._lock = threading.Lock()
        #: Appended runs in order: whole ``Deltas``, or (batch, start, stop) not cut yet.
        self._parts: list[Deltas | tuple[Deltas, int, int]] = []
        self._cached: Deltas | None = None
        self._version = 0  # bumped by every append; a merge is kept only if unchanged
        self._count = 0
        self._bytes = 0
        self._min_ts: int | None = None
        self._min_seq: int | None = None

    def _settle(self) -> None:
        """Take in the tablet's pending runs (see the module docstring)."""
        p = self.pending
        if p is not None and p._entries:
            p.settle()

    @property
    def count(self) -> int:
        self._settle()
        return self._count

    @property
    def bytes(self) -> int:
        self._settle()
        return self._bytes

    @property
    def settled_bytes(self) -> int:
        """``bytes`` without settling: memory accounting, asked before every write,
        adds ``PendingRuns.bytes`` itself."""
        return self._bytes

    @property
    def min_ts(self) -> int | None:
        self._settle()
        return self._min_ts

    @property
    def min_seq(self) -> int | None:
        self._settle()
        return self._min_seq

    def __len__(self) -> int:
        return self.count

    def is_empty(self) -> bool:
        return self.count == 0

    def append(self, deltas: Deltas, nbytes: int | None = None) -> None:
        """Add events (called under the tablet's write lock), after any pending runs.
        ``nbytes``, when given, is charged instead of ``deltas.nbytes()`` (the write
        path apportions one batch's size over the stores it touches)."""
        if len(deltas):
            self._settle()
            self._add(deltas, deltas, 0, len(deltas), deltas.nbytes() if nbytes is None else nbytes)

    def append_run(self, batch: Deltas, start: int, stop: int, nbytes: int) -> None:
        """Add the events ``[start, stop)`` of ``batch`` without cutting them out yet;
        ``nbytes`` is this run's share of the batch's size."""
        if stop > start:
            self._settle()
            self._add((batch, start, stop), batch, start, stop, nbytes)

    def _add(
        self, part: Deltas | tuple[Deltas, int, int], of: Deltas, start: int, stop: int, nbytes: int
    ) -> None:
        with self._lock:
            self._parts.append(part)
            self._cached = None
            self._version += 1
            self._count += stop - start
            self._bytes += nbytes
            if self._min_ts is None:
                self._min_ts = int(of.ts[start])
                self._min_seq = int(of.seq[start])

    def deltas(self) -> Deltas:
        """Everything appended so far, in apply order."""
        self._settle()
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
    *,
    settle: bool = True,
) -> None:
    """``stores[i].append_run(batch, starts[i], stops[i], nbytes[i])`` for every i in
    one call: a batch of random keys hands a run to every rowset's store, and three
    nested calls per store were most of what a rowset cost the batch. ``settle=False``:
    the caller is ``PendingRuns`` settling (the stores' pending runs go first)."""
    if settle:
        for st in {id(s.pending): s for s in stores if s.pending is not None}.values():
            st._settle()
    ts, seq = batch.ts, batch.seq
    for st, start, stop, n in zip(stores, starts, stops, nbytes, strict=True):
        if stop <= start:
            continue
        with st._lock:
            st._parts.append((batch, start, stop))
            st._cached = None
            st._version += 1
            st._count += stop - start
            st._bytes += n
            if st._min_ts is None:
                st._min_ts = int(ts[start])
                st._min_seq = int(seq[start])


class PendingRuns:
    """One tablet's write batches handed to its DeltaMemStores and not taken in yet
    (see the module docstring). ``add`` is called under the tablet's write lock, so
    batches arrive in apply order; ``settle`` hands them over in that order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: Per batch: its stores, the batch, and per store its run and share of bytes.
        self._entries: list[tuple[list[DeltaMemStore], Deltas, np.ndarray, np.ndarray, np.ndarray]]
        self._entries = []
        #: The pending runs' share of memory (memory accounting adds it without settling).
        self.bytes = 0

    def add(
        self,
        stores: list[DeltaMemStore],
        batch: Deltas,
        starts: np.ndarray,
        stops: np.ndarray,
        nbytes: np.ndarray,
    ) -> None:
        """``append_runs(stores, batch, starts, stops, nbytes)``, deferred. Every
        store must have this ``PendingRuns`` (its reads settle this one)."""
        assert all(s.pending is self for s in stores), "a store of another tablet load"
        with self._lock:
            self._entries.append((stores, batch, starts, stops, nbytes))
            self.bytes += int(nbytes.sum())
            if len(self._entries) >= MAX_PENDING_BATCHES:
                self._settle_locked()

    def settle(self) -> None:
        """Hand every pending run to its store. Holds the lock until done, so that a
        reader that finds runs pending waits for them."""
        with self._lock:
            self._settle_locked()

    def _settle_locked(self) -> None:
        entries = self._entries
        if len(entries) > 1:
            try:
                plan = _gather(entries)
            except MemoryError:  # the batches one by one below need no large temporaries
                plan = None
            if plan is not None:
                append_runs(*plan, settle=False)
                self._entries = []
                self.bytes = 0
                return
        done = 0
        try:  # a batch handed over leaves the list at once: a retry never repeats it
            for stores, batch, starts, stops, nbytes in entries:
                append_runs(
                    stores, batch, starts.tolist(), stops.tolist(), nbytes.tolist(), settle=False
                )
                done += 1
                self.bytes -= int(nbytes.sum())
        finally:
            del entries[:done]


#: A ``PendingRuns`` holding this many batches settles on the next ``add``, so a
#: tablet nobody reads does not gather an unbounded backlog in one go.
MAX_PENDING_BATCHES = 64


def _gather(
    entries: list[tuple[list[DeltaMemStore], Deltas, np.ndarray, np.ndarray, np.ndarray]],
) -> tuple[list[DeltaMemStore], Deltas, list[int], list[int], list[int]] | None:
    """Many batches' runs as one run per store, touching no store: every batch
    concatenated, the runs ordered by store (stable: each store's runs stay in apply
    order) and gathered in one ``take``. Returns ``append_runs``'s arguments (the
    stores, the gathered events, each store's start, stop and bytes in them), None if
    there are no events. Each store keeps its run of the gathered events uncut: cutting
    them was a ``Deltas`` per store per settle, and a delta flush then concatenated
    those one by one (hundreds of stores, ten settles a second); from runs it gathers
    once per settle instead."""
    stores = [s for e in entries for s in e[0]]
    sizes = np.array([len(e[1]) for e in entries], dtype=np.int64)
    per_entry = np.array([len(e[0]) for e in entries], dtype=np.int64)
    base = np.repeat(np.cumsum(sizes) - sizes, per_entry)
    starts = np.concatenate([e[2] for e in entries]).astype(np.int64, copy=False)
    lengths = np.concatenate([e[3] for e in entries]).astype(np.int64, copy=False) - starts
    nbytes = np.concatenate([e[4] for e in entries]).astype(np.int64, copy=False)
    nonempty = np.flatnonzero(lengths > 0)
    if not len(nonempty):
        return None
    ident = np.fromiter((id(s) for s in stores), dtype=np.int64, count=len(stores))[nonempty]
    _, first, inv = np.unique(ident, return_index=True, return_inverse=True)
    order = np.argsort(inv, kind="stable")
    runs = nonempty[order]
    cut = concat_deltas([e[1] for e in entries]).take(
        range_positions(base[runs] + starts[runs], lengths[runs])
    )
    events = np.bincount(inv, weights=lengths[nonempty]).astype(np.int64)
    shares = np.bincount(inv, weights=nbytes[nonempty]).astype(np.int64)
    stops = np.cumsum(events)
    return (
        [stores[at] for at in nonempty[first].tolist()],
        cut,
        (stops - events).tolist(),
        stops.tolist(),
        shares.tolist(),
    )


def deltas_of(stores: Sequence[DeltaMemStore]) -> list[Deltas]:
    """``[s.deltas() for s in stores]``, with the runs of all of them cut in one
    vectorized pass: a delta flush reads every store, and their runs number batches x
    rowsets touched, too many to cut one by one (each cut is a few numpy calls per
    column). Costs a Python append per run and numpy work per event of the batches."""
    if len(stores) == 1:  # its runs cut one by one: less than gathering from batches
        return [stores[0].deltas()]
    for st in stores:
        st._settle()
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
