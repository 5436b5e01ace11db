"""Which DiskRowSet holds each key of a batch: every rowset probed in a few numpy passes.

``write_path.locate`` asks each DiskRowSet whose key range may hold some of a batch's
keys which of them it has. Asked one rowset at a time, a batch pays a round of numpy
calls per rowset, and with random keys every rowset gets a share: the cost of a batch
grew with the number of rowsets (issue 4: a sustained load slowed as they multiplied).
A ``DiskKeyIndex`` belongs to one ``RowSets`` (replaced, never changed, when rowsets
come and go) and answers a batch of fixed-width keys (``KeyProbe.sorted_values``) at
once:

1. each rowset's share of the sorted batch: the rowsets' min and max keys, as one
   sorted-form array per bound, searched in the batch (two numpy calls in all);
2. a (key, rowset) pair for every key in a rowset's range; where some key has more
   than one candidate rowset (the rowsets overlap), the pairs are probed against all
   the rowsets' bloom filters together (``BloomFilterSet``, its bits kept in one
   ``BloomArena`` so that a new index copies only the filters of new rowsets);
3. the pairs that remain, looked up in the rowsets' sorted key files: files of 4- or
   8-byte keys are copied once into the process's ``KeyArena`` (``uint64``, one
   buffer) and all their pairs searched in one pass (``key_array.search_segments``);
   others one search per rowset (``CFileReader.find_sortable``, or the whole file as
   one sorted array). The per-rowset searches were the writer's largest cost with
   dozens of rowsets (memory latency and a round of numpy calls for each).

Variable-width keys, and batches whose pairs would exceed ``_MAX_PAIRS``, are not
answered here (``find`` returns None); the caller goes rowset by rowset.
"""

from __future__ import annotations

import threading

import numpy as np

from kudusql.common.errors import ProgrammingError
from kudusql.storage.cfile import key_array
from kudusql.storage.cfile.arena import Arena
from kudusql.storage.cfile.bloom import BloomArena, BloomFilterSet
from kudusql.storage.cfile.cfile import CFileReader
from kudusql.storage.tablet.delta import range_positions
from kudusql.storage.tablet.diskrowset import DiskRowSet
from kudusql.storage.tablet.key_probe import BLOOM_SEED, KeyProbe

#: Most (key, rowset) pairs one batch may form here (bounds the temporaries: ~64 MiB).
_MAX_PAIRS = 1 << 21
#: Where every index of this process packs its bloom filters: a new ``RowSets`` (after a
#: flush or compaction) shares the packed bits of the rowsets it kept.
BLOOM_ARENA = BloomArena()
#: Key widths whose sorted key files go to the key arena (as ``uint64``).
ARENA_WIDTHS = (4, 8)


def _fetch_given(reader: CFileReader) -> np.ndarray:
    raise ProgrammingError(f"the key arena is given each key file's array ({reader.path})")


class KeyArena(Arena[CFileReader]):
    """Sorted key files of 4- or 8-byte keys (``CFileReader.whole_keys``) as ``uint64``
    in one buffer, each copied in once (see ``arena``), so that one index searches the
    keys of all its rowsets in one pass (``key_array.search_segments``)."""

    def __init__(self, min_items: int = 1 << 20) -> None:
        super().__init__(np.uint64, _fetch_given, min_items)
        self._width: dict[int, int] = {}  # id(reader) -> key width, read while held
        self._width_lock = threading.Lock()  # width entries and placements change together

    def whole_of(self, reader: CFileReader) -> tuple[np.ndarray, int] | None:
        """The reader's keys as the arena holds them, and their width; None if not held."""
        arr = self.array_of(reader)
        return None if arr is None else (arr, self._width[id(reader)])

    def place_keys(
        self, readers: list[CFileReader], fresh: dict[int, tuple[np.ndarray, int]]
    ) -> tuple[np.ndarray, np.ndarray]:
        """``place`` for ``readers``; ``fresh`` has (keys, width) by ``id(reader)`` of
        each reader the arena may not hold yet."""
        with self._width_lock:
            for key, (_, w) in fresh.items():
                self._width[key] = w
            placed = self.place(readers, lambda r: fresh[id(r)][0].astype(np.uint64, copy=False))
            if len(self._width) > len(self._where):  # a move dropped dead key files
                self._width = {k: w for k, w in self._width.items() if k in self._where}
            return placed


#: Where every index of this process packs the sorted keys of its rowsets.
KEY_ARENA = KeyArena()


class DiskKeyIndex:
    """The key bounds and bloom filters of a fixed set of DiskRowSets, packed."""

    def __init__(self, drs: tuple[DiskRowSet, ...]) -> None:
        self.drs = drs
        self._present = np.array([i for i, d in enumerate(drs) if d.num_rows], dtype=np.int64)
        self._bounds: dict[int, tuple[np.ndarray, np.ndarray] | None] = {}
        self._blooms: BloomFilterSet | None = None
        # Each rowset's key file as one sorted array (``CFileReader.whole_keys``): in
        # the key arena (buffer; per rowset of _present its offset, length and key
        # width, -1 while not placed), or held here while this index is current (the
        # block cache may evict its copy meanwhile) when its width is not one the arena
        # takes.
        n = len(self._present)
        self._keys = (
            np.zeros(0, dtype=np.uint64),
            np.full(n, -1, dtype=np.int64),
            np.zeros(n, dtype=np.int64),
            np.full(n, -1, dtype=np.int64),
        )
        self._not_arena: set[int] = set()
        # Per rowset of _present, its has-deletes flag once fetched (see _lookup).
        self._dead_flags: list[np.ndarray | None] = [None] * n
        self._whole: dict[int, tuple[np.ndarray, int] | None] = {}

    def _bounds_of(self, width: int) -> tuple[np.ndarray, np.ndarray] | None:
        """Min and max keys of the rowsets in sorted form, None unless all are
        ``width`` bytes (then they compare exactly like the batch's keys)."""
        if width in self._bounds:
            return self._bounds[width]
        metas = [self.drs[i].meta for i in self._present.tolist()]
        mins = [m.min_key for m in metas]
        maxs = [m.max_key for m in metas]
        out: tuple[np.ndarray, np.ndarray] | None = None
        if all(len(k) == width for k in (*mins, *maxs)):
            n = len(metas)
            out = (
                key_array.sortable(b"".join(mins), width, n),
                key_array.sortable(b"".join(maxs), width, n),
            )
        self._bounds[width] = out
        return out

    def _bloom_set(self) -> BloomFilterSet | None:
        b = self._blooms
        if b is None:
            filters = [self.drs[i].bloom() for i in self._present.tolist()]
            if any(f.seed != BLOOM_SEED for f in filters):
                return None
            b = self._blooms = BloomFilterSet(filters, BLOOM_ARENA)
        return b

    def find(
        self, probe: KeyProbe, wanted: np.ndarray, absent: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """Every copy of the keys at the batch positions where ``wanted`` is True:
        (batch position, index into ``drs``, rowid, alive now). A key has at most one
        live copy; the others are deleted ghosts. None: not answerable here.
        ``absent``: per batch position, whether the key is expected to be new (an
        INSERT's): its pairs are probed against the bloom filters even when it has a
        single candidate rowset."""
        sv = probe.sorted_values()
        width = probe.width
        if sv is None or not len(self._present):
            return None if sv is None else _nothing()
        svals, order = sv
        bounds = self._bounds_of(width)
        if bounds is None:
            return None
        lo = np.searchsorted(svals, bounds[0], "left")
        hi = np.searchsorted(svals, bounds[1], "right")
        counts = np.maximum(hi - lo, 0)
        total = int(counts.sum())
        if total > _MAX_PAIRS:
            return None
        if not total:
            return _nothing()
        # Pair j: rowset which[j] (into _present) with the sorted batch key at spos[j].
        which = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
        spos = range_positions(lo, counts)
        bpos = order[spos]
        keep = wanted[bpos]
        if not keep.all():
            which, spos, bpos = which[keep], spos[keep], bpos[keep]
        # The bloom filters pay where they are likely to rule a pair out:
        # - a key with several candidate rowsets (they overlap) is in one of them at most;
        # - a key an INSERT brings is usually in none. A probe (one cache line) costs
        #   about half the key search it saves: measured on a random-key tablet of height
        #   1, 142 against 223 ns a new key at 10M keys, 150 against 320 at 100M.
        # A key an UPDATE or DELETE names with one candidate is almost always there: the
        # probe would add ~80 ns to the search. Rowsets of a sequential load overlap only
        # where a merge skipped one, and its new keys lie past every rowset (no pair):
        # probing every pair of a batch for those few was 5-10% of such a writer's time.
        to_probe = np.bincount(spos, minlength=len(svals))[spos] > 1
        if absent is not None:
            to_probe |= absent[bpos]
        probe_at = np.flatnonzero(to_probe)
        if len(probe_at):
            blooms = self._bloom_set()
            if blooms is None:
                return None
            h1, h2, key = probe.pair_hashes(bpos[probe_at])
            maybe = np.ones(len(which), dtype=bool)  # pairs not probed stay
            maybe[probe_at] = blooms.may_contain_hashes(which[probe_at], h1, h2, key)
            which, spos, bpos = which[maybe], spos[maybe], bpos[maybe]
        rowid = np.full(len(which), -1, dtype=np.int64)
        alive = np.zeros(len(which), dtype=bool)
        if len(which):
            self._lookup(which, svals[spos], width, rowid, alive)
        hit = rowid >= 0
        return bpos[hit], self._present[which[hit]], rowid[hit], alive[hit]

    def _lookup(
        self,
        which: np.ndarray,
        values: np.ndarray,
        width: int,
        rowid: np.ndarray,
        alive: np.ndarray,
    ) -> None:
        """Fill ``rowid`` and ``alive`` for the pairs (rowset ``which[j]``, key
        ``values[j]``), grouped by rowset: the rowsets in the key arena all at once, the
        others one search each."""
        cuts = np.flatnonzero(which[1:] != which[:-1]) + 1
        starts = np.concatenate([[0], cuts])
        ends = np.concatenate([cuts, [len(which)]])
        groups = which[starts]
        if width in ARENA_WIDTHS:
            new = self._keys[3][groups] < 0  # not in the arena yet
            if new.any():
                self._admit(groups[new].tolist(), (ends - starts)[new].tolist(), width)
        buf, koff, klen, kwidth = self._keys
        arena = kwidth[which] == width
        if arena.any():
            sel = np.flatnonzero(arena)
            off = koff[which[sel]]
            pos = key_array.search_segments(
                buf, off, klen[which[sel]], values[sel].astype(np.uint64, copy=False)
            )
            rowid[sel] = np.where(pos >= 0, pos - off, -1)
        for g in np.flatnonzero(kwidth[groups] != width).tolist():  # outside the arena
            s, e = int(starts[g]), int(ends[g])
            r = self._search_one(int(self._present[groups[g]]), values[s:e], width)
            if r is not None:  # else keys of another width: all absent
                rowid[s:e] = r
        np.greater_equal(rowid, 0, out=alive)
        # A found key is live unless its rowset has deleted rows (rare: one flag each,
        # fetched the first time the rowset is touched: fetching builds its liveness
        # array, a byte per row, which untouched rowsets need not hold).
        flags = self._dead_flags
        deleted = []
        for g, j in enumerate(groups.tolist()):
            f = flags[j]
            if f is None:
                f = flags[j] = self.drs[int(self._present[j])].has_deletes_flag()
            if f[0]:
                deleted.append(g)
        for g in deleted:
            s, e = int(starts[g]), int(ends[g])
            r = rowid[s:e]
            ok = r >= 0
            alive[s:e][ok] = ~self.drs[int(self._present[groups[g]])].dead_at_latest()[r[ok]]

    def _search_one(self, ri: int, values: np.ndarray, width: int) -> np.ndarray | None:
        """Rowids of ``values`` in rowset ``drs[ri]``, outside the arena; None when its
        keys have another width than ``width``."""
        d = self.drs[ri]
        whole = self._whole.get(ri)
        if whole is None:
            whole = self._whole[ri] = d.key_reader().whole_keys(len(values))
        if whole is None:  # a few keys of a big file: through its page index
            return d.key_reader().find_sortable(values, width)
        if whole[1] != width:
            return None
        return key_array.search(whole[0], values)

    def _admit(self, groups: list[int], counts: list[int], width: int) -> None:
        """Put in the key arena the rowsets (indexes into ``_present``) of ``groups``
        that are not there yet, where the batch's ``counts`` of keys make their whole
        key files worth reading (``CFileReader.whole_keys``) or the arena already holds
        them."""
        buf, koff, klen, kwidth = self._keys
        fresh: dict[int, tuple[np.ndarray, int]] = {}
        for j, n in zip(groups, counts, strict=True):
            if kwidth[j] >= 0 or j in self._not_arena:
                continue
            reader = self.drs[int(self._present[j])].key_reader()
            got = KEY_ARENA.whole_of(reader)
            if got is None:
                whole = reader.whole_keys(n)
                if whole is None:
                    continue  # asked again for a bigger batch
                if whole[1] not in ARENA_WIDTHS:
                    self._not_arena.add(j)
                    continue
                got = whole
            fresh[j] = got
        if not fresh:
            return
        placed = [j for j in range(len(kwidth)) if kwidth[j] >= 0 or j in fresh]
        readers = [self.drs[int(self._present[j])].key_reader() for j in placed]
        data = {id(r): fresh[j] for j, r in zip(placed, readers, strict=True) if j in fresh}
        buf, offsets = KEY_ARENA.place_keys(readers, data)
        koff, klen, kwidth = koff.copy(), klen.copy(), kwidth.copy()
        for j, (arr, w) in fresh.items():
            klen[j], kwidth[j] = len(arr), w
        koff[placed] = offsets
        self._keys = (buf, koff, klen, kwidth)


def _nothing() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    z = np.zeros(0, dtype=np.int64)
    return z, z, z, np.zeros(0, dtype=bool)
