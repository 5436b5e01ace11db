"""DiskRowSet: an immutable, key-sorted set of rows on disk plus its deltas.

Layout of one rowset directory (see ``FORMAT.md``)::

    key.cfile        sorted memcomparable primary keys (value index = first key per page)
    c<col_id>.cfile  one CFile per column; every CFile of the rowset shares page boundaries
    bloom            bloom filter over the encoded keys
    undo<n>.delta    UNDO DeltaFiles (history before the base data)
    redo<n>.delta    REDO DeltaFiles (flushed DeltaMemStores)

A row's rowid is its ordinal in key order and is never stored. Base data holds each
row's newest version as of the flush or compaction that wrote it; a row deleted since
keeps its base values and a REDO DELETE (a "ghost") until history GC.

In memory a DiskRowSet also owns its DeltaMemStore (new REDO mutations) and a bitmap
of the rows deleted as of now, which the write path uses to tell live keys from ghosts.
"""

from __future__ import annotations

import bisect
import functools
import json
import os
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kudusql.common.schema import ColumnSchema
from kudusql.storage.cfile import BlockCache, CFileReader
from kudusql.storage.cfile.bloom import BloomFilter
from kudusql.storage.fs.meta_file import encode_with_lists
from kudusql.storage.tablet.delta import (
    Deltas,
    MutationType,
    Resolved,
    apply_to_column,
    concat_deltas,
    last_per_row,
    resolve,
)
from kudusql.storage.tablet.deltafile import DeltaFileReader, DeltaStats, stats_from_dict
from kudusql.storage.tablet.deltamemstore import DeltaMemStore, PendingRuns, append_runs
from kudusql.storage.tablet.key_probe import BLOOM_SEED, KeyProbe


@dataclass(frozen=True)
class DeltaFileMeta:
    name: str
    stats: DeltaStats

    @functools.cached_property
    def json_text(self) -> str:
        """``to_dict`` as JSON, encoded once: the superblock lists every delta file of
        the tablet and is saved after every flush and compaction (see ``RowSetMeta``)."""
        return json.dumps(self.to_dict(), separators=(",", ":"))

    def to_dict(self) -> dict[str, Any]:
        s = self.stats
        return {
            "name": self.name,
            "kind": s.kind,
            "num_events": s.num_events,
            "min_ts": s.min_ts,
            "max_ts": s.max_ts,
            "delete_count": s.delete_count,
            "reinsert_count": s.reinsert_count,
            "update_counts": {str(k): v for k, v in s.update_counts.items()},
            "size": s.size,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DeltaFileMeta:
        return cls(d["name"], stats_from_dict(d, d["size"]))


@dataclass
class RowSetMeta:
    """What the tablet superblock records about one DiskRowSet."""

    id: int
    num_rows: int
    min_key: bytes
    max_key: bytes
    column_ids: list[int]
    base_bytes: int
    undo_files: list[DeltaFileMeta] = field(default_factory=list)
    redo_files: list[DeltaFileMeta] = field(default_factory=list)
    last_durable_dms_id: int = -1
    #: Column files rewritten by a major delta compaction (others are ``c<id>.cfile``).
    column_files: dict[int, str] = field(default_factory=dict)
    #: Compactions of this rowset so far; names the files the next one writes.
    gen: int = 0
    #: Uncompressed (Arrow) size of the rows when written: what rowsets roll at and what
    #: a merging compaction holds in memory (0: unknown, rowsets of older versions).
    raw_bytes: int = 0
    #: ``json_text``'s last answer and the fields it encoded (not a field of the record).
    _json_kept: tuple[tuple[Any, ...], str] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    @property
    def size_for_policy(self) -> int:
        """Bytes the compaction policy weighs: raw base bytes plus delta bytes."""
        deltas = sum(f.stats.size for f in (*self.undo_files, *self.redo_files))
        return (self.raw_bytes or self.base_bytes) + deltas

    def column_file(self, col_id: int) -> str:
        return self.column_files.get(col_id) or f"c{col_id}.cfile"

    def file_names(self) -> set[str]:
        """Every file of the rowset directory this metadata references."""
        names = {"key.cfile", "bloom"}
        names.update(self.column_file(c) for c in self.column_ids)
        names.update(f.name for f in self.undo_files)
        names.update(f.name for f in self.redo_files)
        return names

    def copy(self) -> RowSetMeta:
        return RowSetMeta.from_dict(self.to_dict())

    def json_text(self) -> str:
        """``to_dict`` as JSON, with each delta file's entry encoded once (they are most
        of a superblock, which is rewritten whole after every flush and compaction).

        The text is kept with what it was made from and reused while that is equal:
        most saves change a few rowsets of hundreds (2.9 ms a save at 419 rowsets, most
        of it re-encoding rowsets that had not changed). The fields are mutable, so the
        check compares them all, by value; delta file entries are frozen, and equal
        entries encode alike."""
        sig = self._signature()
        kept = self._json_kept
        if kept is not None and kept[0] == sig:
            return kept[1]
        text = encode_with_lists(
            self._own_dict(),
            {
                "undo_files": [f.json_text for f in self.undo_files],
                "redo_files": [f.json_text for f in self.redo_files],
            },
        )
        self._json_kept = (sig, text)
        return text

    def _signature(self) -> tuple[Any, ...]:
        """Every field ``json_text`` encodes, as a value that compares equal exactly
        when they are all equal (lists and dicts copied into tuples)."""
        return (
            self.id,
            self.num_rows,
            self.min_key,
            self.max_key,
            tuple(self.column_ids),
            self.base_bytes,
            tuple(self.undo_files),
            tuple(self.redo_files),
            self.last_durable_dms_id,
            tuple(self.column_files.items()),
            self.gen,
            self.raw_bytes,
        )

    def to_dict(self) -> dict[str, Any]:
        d = self._own_dict()
        d["undo_files"] = [f.to_dict() for f in self.undo_files]
        d["redo_files"] = [f.to_dict() for f in self.redo_files]
        return d

    def _own_dict(self) -> dict[str, Any]:
        """Every field but the delta file lists."""
        return {
            "id": self.id,
            "num_rows": self.num_rows,
            "min_key": self.min_key.hex(),
            "max_key": self.max_key.hex(),
            "column_ids": self.column_ids,
            "base_bytes": self.base_bytes,
            "last_durable_dms_id": self.last_durable_dms_id,
            "column_files": {str(k): v for k, v in self.column_files.items()},
            "gen": self.gen,
            "raw_bytes": self.raw_bytes,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RowSetMeta:
        return cls(
            d["id"],
            d["num_rows"],
            bytes.fromhex(d["min_key"]),
            bytes.fromhex(d["max_key"]),
            list(d["column_ids"]),
            d["base_bytes"],
            [DeltaFileMeta.from_dict(x) for x in d["undo_files"]],
            [DeltaFileMeta.from_dict(x) for x in d["redo_files"]],
            d.get("last_durable_dms_id", -1),
            {int(k): v for k, v in d.get("column_files", {}).items()},
            d.get("gen", 0),
            d.get("raw_bytes", 0),
        )


_LATEST = (1 << 64) - 1  # a snapshot after every applied operation


def rowset_dir(tablet_dir: str, rs_id: int) -> str:
    return os.path.join(tablet_dir, "rowsets", f"{rs_id:08d}")


class DiskRowSet:
    """An open DiskRowSet: lazily opened CFiles, its delta stores and liveness."""

    # Probes larger than this fraction of the rowset use a hash join on the key column.
    _HASH_JOIN_FRACTION = 0.05
    # Probes of at most this many keys go one key at a time (bloom, then the key index).
    _FEW_KEYS = 8

    def __init__(
        self,
        tablet_dir: str,
        meta: RowSetMeta,
        cache: BlockCache | None,
        pending: PendingRuns | None = None,
    ) -> None:
        """``pending``: the tablet's ``PendingRuns``, through which the write path
        hands batches to this rowset's DeltaMemStores (None: a read-only copy, such as
        a compaction worker's)."""
        self.meta = meta
        self.id = meta.id
        self.tablet_dir = tablet_dir
        self.dir = rowset_dir(tablet_dir, meta.id)
        self.cache = cache
        self._lock = threading.Lock()
        self._readers: dict[int, CFileReader] = {}
        self._page_starts: list[int] | None = None  # first rowid of each page (row_at)
        self._key_reader: CFileReader | None = None
        self._bloom: BloomFilter | None = None
        self._undo = [DeltaFileReaderLazy(self.dir, f) for f in meta.undo_files]
        self._redo = [DeltaFileReaderLazy(self.dir, f) for f in meta.redo_files]
        self.dms = DeltaMemStore(meta.last_durable_dms_id + 1, pending)
        self.frozen_dms: DeltaMemStore | None = None
        self._dead: np.ndarray | None = None
        # One flag, shared like ``_dead`` (by ``derive``): has any row been deleted?
        self._dead_any: np.ndarray | None = None
        self._resolved_latest: tuple[tuple[int, ...], Resolved, int] | None = None
        # Names of this object's files that were replaced or deleted (``retire``; None:
        # all of them): their readers read past the block cache.
        self._retired: frozenset[str] | None = frozenset()

    @property
    def num_rows(self) -> int:
        return self.meta.num_rows

    # -- files ------------------------------------------------------------------------------
    def _cache_for(self, name: str) -> BlockCache | None:
        retired = self._retired
        return None if retired is None or name in retired else self.cache

    def key_reader(self) -> CFileReader:
        r = self._key_reader
        if r is None:
            path = os.path.join(self.dir, "key.cfile")
            r = CFileReader(path, pa.binary(), self._cache_for("key.cfile"))
            self._key_reader = r
        return r

    def retire(self, names: Iterable[str] | None = None) -> None:
        """This object's files ``names`` (None: all) were replaced or deleted: their
        pages are never wanted again, so their readers, now and later, bypass the block
        cache (a scan that captured this object still reads them; the tablet drops the
        pages already cached). Readers of other files may be shared with ``derive``'s
        successor and keep caching."""
        with self._lock:
            if names is None:
                self._retired = None
            elif self._retired is not None:
                self._retired = self._retired | frozenset(names)
            readers = [("key.cfile", self._key_reader)]
            readers += [(self.meta.column_file(c), r) for c, r in self._readers.items()]
            for name, r in readers:
                if r is not None and self._cache_for(name) is None:
                    r.cache = None

    def column_reader(self, col: ColumnSchema) -> CFileReader | None:
        """The CFile of a column, or None when the rowset predates the column."""
        r = self._readers.get(col.id)
        if r is None:
            if col.id not in self.meta.column_ids:
                return None
            with self._lock:
                r = self._readers.get(col.id)
                if r is None:
                    name = self.meta.column_file(col.id)
                    path = os.path.join(self.dir, name)
                    r = CFileReader(path, col.type.arrow_type(), self._cache_for(name))
                    self._readers[col.id] = r
        return r

    def bloom(self) -> BloomFilter:
        b = self._bloom
        if b is None:
            path = os.path.join(self.dir, "bloom")
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                from kudusql.common.errors import OperationalError

                raise OperationalError(f"missing bloom file {path}") from None
            b = BloomFilter.from_bytes(data, path)
            self._bloom = b
        return b

    @property
    def page_offsets(self) -> np.ndarray:
        return self.key_reader().page_offsets

    def read_column_page(self, col: ColumnSchema, page: int) -> pa.Array[Any] | None:
        """Base values of a whole page (pages share boundaries across the rowset's
        columns), None when the rowset predates the column."""
        r = self.column_reader(col)
        return None if r is None else r.read_page(page)

    def read_column_range(self, col: ColumnSchema, start: int, stop: int) -> pa.Array[Any]:
        """Base values of rows [start, stop); a column the rowset lacks reads its default."""
        r = self.column_reader(col)
        if r is None:
            return read_default_column(col, max(0, stop - start))
        ca = r.read_range(start, stop)
        return ca.chunks[0] if ca.num_chunks == 1 else ca.combine_chunks()

    # -- keys -------------------------------------------------------------------------------
    def may_contain_range(self, lo: bytes | None, hi: bytes | None) -> bool:
        """Could the rowset hold keys in [lo, hi)?"""
        if lo is not None and self.meta.max_key < lo:
            return False
        return not (hi is not None and self.meta.min_key >= hi)

    def find_rowids(self, keys: pa.Array[Any]) -> np.ndarray:
        """Rowid of each encoded key in the base data (alive or ghost), -1 if absent."""
        n = len(keys)
        out = np.full(n, -1, dtype=np.int64)
        if n == 0 or self.meta.num_rows == 0:
            return out
        inr = pc.and_(
            pc.greater_equal(keys, pa.scalar(self.meta.min_key, pa.binary())),
            pc.less_equal(keys, pa.scalar(self.meta.max_key, pa.binary())),
        )
        cand = np.flatnonzero(np.asarray(inr.to_numpy(zero_copy_only=False), dtype=bool))
        if len(cand):
            out[cand] = self._find(keys, cand, None)
        return out

    def probe_rowids(self, probe: KeyProbe, idx: np.ndarray) -> np.ndarray:
        """``find_rowids`` for the keys at positions ``idx`` of a prepared batch (all in
        this rowset's key range, see ``KeyProbe.in_range``); aligned with ``idx``."""
        if not len(idx) or self.meta.num_rows == 0:
            return np.full(len(idx), -1, dtype=np.int64)
        return self._find(probe.keys, idx, probe)

    def _find(self, keys: pa.Array[Any], cand: np.ndarray, probe: KeyProbe | None) -> np.ndarray:
        """Rowids of ``keys[cand]`` (keys inside the rowset's range), -1 if absent."""
        out = np.full(len(cand), -1, dtype=np.int64)
        if len(cand) <= self._FEW_KEYS:  # a handful: scalar probes beat numpy's overhead
            for j, i in enumerate(cand.tolist()):
                out[j] = self.find_rowid_one(keys[i].as_py())
            return out
        if len(cand) <= self._HASH_JOIN_FRACTION * self.meta.num_rows:
            bloom = self.bloom()
            if probe is not None and bloom.seed == BLOOM_SEED:
                h1, h2 = probe.hashes()
                maybe = bloom.may_contain_hashes(h1[cand], h2[cand], BLOOM_SEED)
            else:
                maybe = bloom.may_contain(keys.take(cand))
            where = np.flatnonzero(maybe)
            if len(where):
                out[where] = self.key_reader().find_keys(keys.take(cand[where]))
        else:
            all_keys = self.key_reader().read_all()
            idx = pc.index_in(keys.take(cand), value_set=all_keys)
            out[:] = np.asarray(idx.fill_null(-1).to_numpy(zero_copy_only=False), np.int64)
        return out

    def find_rowid_one(self, key: bytes) -> int:
        m = self.meta
        if key < m.min_key or key > m.max_key:
            return -1
        b = self._bloom or self.bloom()
        if not b.may_contain_one(key):
            return -1
        return self.key_reader().find_one(key)

    def row_at(self, rowid: int, columns: Sequence[ColumnSchema]) -> dict[str, object]:
        """One row's newest values (the point-lookup fast path; pages come from the cache)."""
        starts = self._page_starts
        if starts is None:
            starts = self._page_starts = [int(x) for x in self.page_offsets]
        page = bisect.bisect_right(starts, rowid) - 1
        i = rowid - starts[page]
        redo = self.latest_redo() if self._has_redo() else None
        out: dict[str, object] = {}
        readers = self._readers
        for c in columns:
            entry = redo.cols.get(c.id) if redo is not None else None
            if entry is not None:
                rows, vals = entry
                j = int(np.searchsorted(rows, rowid))
                if j < len(rows) and rows[j] == rowid:
                    out[c.name] = vals[j].as_py()
                    continue
            r = readers.get(c.id) or self.column_reader(c)
            out[c.name] = r.read_page(page)[i].as_py() if r is not None else c.read_default
        return out

    def _has_redo(self) -> bool:
        """Whether any REDO event exists (cheap: no capture, no resolution). Read in
        ``_capture_redo``'s order, which a concurrent delta flush cannot slip past."""
        return not self.dms.is_empty() or self.frozen_dms is not None or bool(self._redo)

    def rowid_range(self, lo: bytes | None, hi: bytes | None) -> tuple[int, int]:
        """Rows whose key is in [lo, hi)."""
        kr = self.key_reader()
        start = 0 if lo is None else kr.lower_bound(lo)
        stop = self.meta.num_rows if hi is None else kr.lower_bound(hi)
        return start, max(start, stop)

    # -- deltas -----------------------------------------------------------------------------
    def _capture_redo(
        self,
    ) -> tuple[list[DeltaFileReaderLazy], Deltas | None, DeltaMemStore, Deltas]:
        """The REDO stores as of now, read lock-free in the order that never misses an
        event while a delta flush moves the DeltaMemStore to a file (live DMS, then the
        frozen one, then the files): at worst a flushed store is seen twice, which
        resolution (last event per row wins, ordered by sequence) does not mind."""
        dms = self.dms
        live = dms.deltas()
        frozen = self.frozen_dms
        frozen_d = frozen.deltas() if frozen is not None else None
        return list(self._redo), frozen_d, dms, live

    def redo_parts(self) -> list[Deltas]:
        """REDO events in apply order: DeltaFiles, then the frozen and live DMS."""
        files, frozen, _, live = self._capture_redo()
        parts = [f.deltas() for f in files]
        if frozen is not None:
            parts.append(frozen)
        parts.append(live)
        return parts

    def all_delta_parts(self) -> list[Deltas]:
        """Every UNDO and REDO event (for diff scans)."""
        return [f.deltas() for f in self._undo] + self.redo_parts()

    def undo_parts(self, snapshot: int) -> list[Deltas]:
        """UNDO events that may matter at ``snapshot`` (files entirely older are skipped)."""
        return [f.deltas() for f in self._undo if f.meta.stats.max_ts >= snapshot]

    def resolve(self, snapshot: int) -> tuple[Resolved, Resolved]:
        """(UNDO, REDO) resolutions at ``snapshot``."""
        undo = resolve(concat_deltas(self.undo_parts(snapshot)), snapshot, undo=True)
        files, frozen, _, live = self._capture_redo()
        if undo.is_empty():
            latest = self._latest()
            if latest is None:
                return undo, Resolved()
            redo, max_ts = latest
            # The latest resolution serves any snapshot after its newest event (an
            # event of an operation still in flight is never below a snapshot).
            if max_ts < snapshot:
                return undo, redo
        parts = [f.deltas() for f in files if f.meta.stats.min_ts < snapshot]
        if frozen is not None:
            parts.append(frozen)
        parts.append(live)
        return undo, resolve(concat_deltas(parts), snapshot, undo=False)

    def latest_redo(self) -> Resolved | None:
        """The REDO resolution of every event applied so far (cached), None without
        deltas. Only for readers at the latest state (point lookups, the write path)."""
        latest = self._latest()
        return None if latest is None else latest[0]

    def _latest(self) -> tuple[Resolved, int] | None:
        files, frozen, dms, live = self._capture_redo()
        if not files and frozen is None and not len(live):
            return None
        # The key describes exactly the captured events.
        key = (len(files), -1 if frozen is None else len(frozen), dms.id, len(live))
        c = self._resolved_latest
        if c is not None and c[0] == key:
            return c[1], c[2]
        parts = [f.deltas() for f in files]
        if frozen is not None:
            parts.append(frozen)
        parts.append(live)
        events = concat_deltas(parts)
        redo = resolve(events, _LATEST, undo=False)
        self._resolved_latest = (key, redo, events.max_ts)
        return redo, events.max_ts

    def latest_version(self, redo: Resolved) -> str | None:
        """A cache tag for pages patched with ``redo`` when it is the cached latest
        resolution (the same deltas give the same patched page), else None."""
        c = self._resolved_latest
        if c is None or c[1] is not redo:
            return None
        return f"@{self.id}.{self.meta.gen}:{c[0][0]}:{c[0][1]}:{c[0][2]}:{c[0][3]}"

    def patched_page(
        self, col: ColumnSchema, page: int, redo: Resolved, version: str
    ) -> pa.Array[Any] | None:
        """A whole page of ``col`` with the latest deltas applied, cached in the block
        cache under the deltas' version, so repeated scans skip the patching."""
        r = self.column_reader(col)
        cache = None if r is None else r.cache
        if r is None or cache is None:
            return None
        key = (r.uid, page, version)
        got = cache.get(key)
        if got is None:
            a = int(r.page_offsets[page])
            got, _ = apply_to_column(r.read_page(page), a, redo, col.id)
            cache.put(key, got)
        return got

    def dead_at_latest(self) -> np.ndarray:
        """Bool per rowid: deleted as of now (ghost)."""
        d = self._dead
        if d is not None:
            return d
        # Built under the rowset's lock, as apply_mutations marks it: a reader building it
        # lock-free could install a copy missing a delete applied meanwhile.
        with self._lock:
            if self._dead is None:
                d = np.zeros(self.meta.num_rows, dtype=bool)
                for part in self.redo_parts():
                    _mark_dead(d, part)
                self._dead_any = np.array([d.any()])
                self._dead = d
            return self._dead

    def has_deletes_flag(self) -> np.ndarray:
        """The one-element array behind ``has_deletes``, for a caller that asks about
        many rowsets per batch: it stays the rowset's flag (and its derived copies')."""
        self.dead_at_latest()
        assert self._dead_any is not None
        return self._dead_any

    @property
    def has_deletes(self) -> bool:
        """False only if no row is deleted as of now (then ``dead_at_latest`` is all
        False and a key found is live); True once any row was."""
        self.dead_at_latest()
        assert self._dead_any is not None
        return bool(self._dead_any[0])

    def apply_mutations(
        self, deltas: Deltas, liveness: bool = True, nbytes: int | None = None
    ) -> None:
        """New REDO events from the write path (under the tablet's write lock).
        ``liveness=False``: the caller knows they are all UPDATEs (no row dies or comes
        back); ``nbytes``: their size when the caller has it (see ``DeltaMemStore``)."""
        dead = self.dead_at_latest()
        with self._lock:
            self.dms.append(deltas, nbytes)
            if liveness and _mark_dead(dead, deltas):
                assert self._dead_any is not None
                self._dead_any[0] = True

    @staticmethod
    def append_update_runs(
        rowsets: Sequence[DiskRowSet],
        batch: Deltas,
        starts: np.ndarray,
        stops: np.ndarray,
        nbytes: np.ndarray,
    ) -> None:
        """``apply_mutations`` of the events ``[starts[i], stops[i])`` of a whole write
        batch's ``Deltas`` to ``rowsets[i]``, for runs of UPDATEs only (no row dies or
        comes back, so liveness is not touched): handed to the tablet's ``PendingRuns``
        in one call (see deltamemstore.py), or to the stores directly without one."""
        stores = [d.dms for d in rowsets]
        pending = stores[0].pending if stores else None
        if pending is not None:
            pending.add(stores, batch, starts, stops, nbytes)
        else:
            append_runs(stores, batch, starts.tolist(), stops.tolist(), nbytes.tolist())

    def live_count(self) -> int:
        """Rows not deleted as of now (the maintenance manager asks every rowset at
        every poll: a rowset without deletes answers without counting)."""
        if not self.has_deletes:
            return self.meta.num_rows
        return int(self.meta.num_rows - np.count_nonzero(self.dead_at_latest()))

    def deleted_before(self, ts: int) -> int:
        """Rows deleted before ``ts`` and not brought back since: the ghosts a merging
        compaction drops when ``ts`` is the ancient history mark."""
        if not self.has_deletes:
            return 0
        events = concat_deltas(self.redo_parts())
        liveness = events.op != _UPDATE
        if not liveness.any():
            return 0
        op, ets = events.op[liveness], events.ts[liveness]
        _, last = last_per_row(events.rowid[liveness])
        gone = (op[last] == _DELETE) & (ets[last] < np.uint64(max(ts, 0)))
        return int(np.count_nonzero(gone))

    def derive(self, meta: RowSetMeta) -> DiskRowSet:
        """The same rowset after a compaction or GC rewrote some of its files: a new
        object (scans that captured this one keep reading its files) that shares the
        in-memory stores, so writes made through either are seen by both."""
        new = DiskRowSet(self.tablet_dir, meta, self.cache, self.dms.pending)
        new.dms, new.frozen_dms = self.dms, self.frozen_dms
        new._dead_any, new._dead = self._dead_any, self._dead
        new._key_reader, new._bloom = self._key_reader, self._bloom
        for cid, r in self._readers.items():
            if meta.column_file(cid) == self.meta.column_file(cid):
                new._readers[cid] = r
        keep = {f.name for f in meta.undo_files} | {f.name for f in meta.redo_files}
        reuse = {f.meta.name: f for f in (*self._undo, *self._redo) if f.meta.name in keep}
        new._undo = [reuse.get(f.name) or DeltaFileReaderLazy(new.dir, f) for f in meta.undo_files]
        new._redo = [reuse.get(f.name) or DeltaFileReaderLazy(new.dir, f) for f in meta.redo_files]
        return new

    def redo_file_deltas(self) -> Deltas:
        """The events of the REDO DeltaFiles (not the DeltaMemStores), in apply order."""
        return concat_deltas([f.deltas() for f in self._redo])

    def undo_file_deltas(self, since: int = 0) -> Deltas:
        """The events of the UNDO DeltaFiles, skipping files whose events are all older
        than ``since`` (a compaction passes the ancient history mark: it would drop
        them, and reading them was a good part of a merge's work)."""
        return concat_deltas([f.deltas() for f in self._undo if f.meta.stats.max_ts >= since])

    def last_change_ts(self) -> int:
        """Timestamp of the newest REDO event (0 if none): when the rowset last changed."""
        ts = max([f.meta.stats.max_ts for f in self._redo], default=0)
        for dms in (self.frozen_dms, self.dms):
            if dms is not None and len(dms):
                ts = max(ts, dms.deltas().max_ts)
        return ts

    # -- delta flush --------------------------------------------------------------------------
    def freeze_dms(self) -> DeltaMemStore:
        frozen = self.dms
        self.frozen_dms = frozen
        self.dms = DeltaMemStore(frozen.id + 1, frozen.pending)
        self._resolved_latest = None
        return frozen

    def install_redo_file(self, meta: DeltaFileMeta, dms_id: int) -> None:
        self.meta.redo_files.append(meta)
        self.meta.last_durable_dms_id = dms_id
        self._redo.append(DeltaFileReaderLazy(self.dir, meta))
        self.frozen_dms = None
        self._resolved_latest = None

    def uninstall_redo_file(self, name: str, last_durable: int, frozen: DeltaMemStore) -> None:
        """Undo ``install_redo_file`` when the superblock could not be saved."""
        self.meta.redo_files = [f for f in self.meta.redo_files if f.name != name]
        self.meta.last_durable_dms_id = last_durable
        self._redo = [f for f in self._redo if f.meta.name != name]
        self.frozen_dms = frozen
        self._resolved_latest = None

    def delta_stats(self) -> dict[str, int]:
        return {
            "undo_files": len(self._undo),
            "redo_files": len(self._redo),
            "dms_events": len(self.dms),
            "dms_bytes": self.dms.bytes,
            "undo_events": sum(f.meta.stats.num_events for f in self._undo),
            "redo_events": sum(f.meta.stats.num_events for f in self._redo),
            "undo_bytes": sum(f.meta.stats.size for f in self._undo),
            "redo_bytes": sum(f.meta.stats.size for f in self._redo),
        }


_UPDATE = np.uint8(MutationType.UPDATE)
_DELETE = np.uint8(MutationType.DELETE)


def _mark_dead(dead: np.ndarray, d: Deltas) -> bool:
    """Apply the liveness changes of ``d`` to ``dead``; True if a row was deleted."""
    ev = d.op != _UPDATE
    if not ev.any():
        return False
    uniq, idx = last_per_row(d.rowid[ev])
    deleted = d.op[ev][idx] == _DELETE
    dead[uniq] = deleted
    return bool(deleted.any())


class DeltaFileReaderLazy:
    """A DeltaFile opened on first use (scans at the latest snapshot never open UNDOs)."""

    def __init__(self, rs_dir: str, meta: DeltaFileMeta) -> None:
        self.meta = meta
        self.path = os.path.join(rs_dir, meta.name)
        self._reader: DeltaFileReader | None = None

    def deltas(self) -> Deltas:
        r = self._reader
        if r is None:
            r = DeltaFileReader(self.path)
            self._reader = r
        return r.deltas()


def default_column(col: ColumnSchema, n: int) -> pa.Array[Any]:
    """``n`` copies of a column's write default (NULL when it has none)."""
    return _repeat(col, col.default, n)


def read_default_column(col: ColumnSchema, n: int) -> pa.Array[Any]:
    """``n`` copies of what a rowset written before ``col`` was added reads for it."""
    return _repeat(col, col.read_default, n)


def _repeat(col: ColumnSchema, value: Any, n: int) -> pa.Array[Any]:
    t = col.type.arrow_type()
    if value is None:
        return pa.nulls(n, t)  # type: ignore[call-overload,no-any-return]
    return pa.repeat(pa.scalar(value, t), n)  # type: ignore[call-overload,no-any-return]


def seed_keys(rowsets: Sequence[DiskRowSet], keys: Sequence[tuple[np.ndarray, int] | None]) -> None:
    """Give each new rowset's key reader its sorted key array as the job that wrote the
    rowset had it (``compaction_worker.sorted_keys``; None: keys of mixed widths)."""
    for d, k in zip(rowsets, keys, strict=True):
        if k is not None and d.num_rows:
            d.key_reader().seed_whole_keys(*k)
