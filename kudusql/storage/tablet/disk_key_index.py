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
2. a (key, rowset) pair for every key in a rowset's range, the pairs probed against
   all the rowsets' bloom filters together (``BloomFilterSet``, its bits kept in one
   ``BloomArena`` so that a new index copies only the filters of new rowsets);
3. the pairs that pass, looked up in each rowset's key file, one search per rowset
   (``CFileReader.find_sortable``: the whole file as one sorted array).

Variable-width keys, and batches whose pairs would exceed ``_MAX_PAIRS``, are not
answered here (``find`` returns None); the caller goes rowset by rowset.
"""

from __future__ import annotations

import numpy as np

from kudusql.storage.cfile import key_array
from kudusql.storage.cfile.bloom import BloomArena, BloomFilterSet
from kudusql.storage.tablet.diskrowset import DiskRowSet
from kudusql.storage.tablet.key_probe import BLOOM_SEED, KeyProbe

#: Most (key, rowset) pairs one batch may form here (bounds the temporaries: ~64 MiB).
_MAX_PAIRS = 1 << 21
#: Where every index of this process packs its bloom filters: a new ``RowSets`` (after a
#: flush or compaction) shares the packed bits of the rowsets it kept.
BLOOM_ARENA = BloomArena()


class DiskKeyIndex:
    """The key bounds and bloom filters of a fixed set of DiskRowSets, packed."""

    def __init__(self, drs: tuple[DiskRowSet, ...]) -> None:
        self.drs = drs
        self._present = np.array([i for i, d in enumerate(drs) if d.num_rows], dtype=np.int64)
        self._bounds: dict[int, tuple[np.ndarray, np.ndarray] | None] = {}
        self._blooms: BloomFilterSet | None = None
        # Each rowset's key file as one sorted array (``CFileReader.whole_keys``), held
        # while this index is current: the block cache may evict its copy meanwhile.
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
        self, probe: KeyProbe, wanted: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """Every copy of the keys at the batch positions where ``wanted`` is True:
        (batch position, index into ``drs``, rowid, alive now). A key has at most one
        live copy; the others are deleted ghosts. None: not answerable here."""
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
        first = np.cumsum(counts) - counts
        spos = np.arange(total, dtype=np.int64) + np.repeat(lo - first, counts)
        bpos = order[spos]
        keep = wanted[bpos]
        if not keep.all():
            which, spos, bpos = which[keep], spos[keep], bpos[keep]
        blooms = self._bloom_set()
        if blooms is None:
            return None
        h1, h2 = probe.hashes()
        maybe = blooms.may_contain_hashes(which, h1[bpos], h2[bpos])
        which, spos, bpos = which[maybe], spos[maybe], bpos[maybe]
        rowid = np.full(len(which), -1, dtype=np.int64)
        alive = np.zeros(len(which), dtype=bool)
        if len(which):
            cuts = (np.flatnonzero(which[1:] != which[:-1]) + 1).tolist()
            values = svals[spos]
            present = self._present[which[[0, *cuts]]].tolist()
            for ri, s, e in zip(present, [0, *cuts], [*cuts, len(which)], strict=True):
                d = self.drs[ri]
                whole = self._whole.get(ri)
                if whole is None:
                    whole = self._whole[ri] = d.key_reader().whole_keys(e - s)
                if whole is None:  # a few keys of a big file: through its page index
                    r = d.key_reader().find_sortable(values[s:e], width)
                elif whole[1] != width:  # keys of another width are all absent
                    continue
                else:
                    r = key_array.search(whole[0], values[s:e])
                rowid[s:e] = r
                if d.has_deletes:
                    ok = r >= 0
                    alive[s:e][ok] = ~d.dead_at_latest()[r[ok]]
                else:
                    alive[s:e] = r >= 0
        hit = rowid >= 0
        return bpos[hit], self._present[which[hit]], rowid[hit], alive[hit]


def _nothing() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    z = np.zeros(0, dtype=np.int64)
    return z, z, z, np.zeros(0, dtype=bool)
