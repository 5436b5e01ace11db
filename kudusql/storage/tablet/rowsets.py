"""The set of rowsets a tablet serves reads and writes from, replaced as a whole, and
its key indexes: which DiskRowSets may hold a given key (``covering``), and every
rowset's bounds and bloom filter packed for batches (``disk_keys``)."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from functools import cached_property

from kudusql.storage.tablet.disk_key_index import DiskKeyIndex
from kudusql.storage.tablet.diskrowset import DiskRowSet
from kudusql.storage.tablet.memrowset import MemRowSet


@dataclass(frozen=True)
class RowSets:
    """The rowsets a reader captured: replaced as a whole, never changed in place."""

    mrs: MemRowSet
    frozen: tuple[MemRowSet, ...]
    drs: tuple[DiskRowSet, ...]

    @cached_property
    def _key_index(self) -> tuple[list[bytes], list[int], list[bytes]]:
        """DiskRowSets sorted by min key, and the running maximum of their max keys."""
        order = sorted(
            (i for i, d in enumerate(self.drs) if d.num_rows),
            key=lambda i: self.drs[i].meta.min_key,
        )
        mins = [self.drs[i].meta.min_key for i in order]
        running: list[bytes] = []
        for i in order:
            m = self.drs[i].meta.max_key
            running.append(m if not running or m > running[-1] else running[-1])
        return mins, order, running

    @cached_property
    def disk_keys(self) -> DiskKeyIndex:
        """The DiskRowSets' key bounds and bloom filters, packed for probing a batch."""
        return DiskKeyIndex(self.drs)

    def covering(self, key: bytes) -> list[int]:
        """Indices (into ``drs``) of the DiskRowSets whose key range holds ``key``, found
        through the sorted ranges (Kudu's interval tree): one or two probes for
        disjoint rowsets instead of a test per rowset."""
        mins, order, running = self._key_index
        out = []
        p = bisect.bisect_right(mins, key) - 1
        while p >= 0 and running[p] >= key:
            i = order[p]
            if self.drs[i].meta.max_key >= key:
                out.append(i)
            p -= 1
        return out
