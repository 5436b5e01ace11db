"""BlockCache: a thread-safe LRU of decoded CFile pages, bounded by Arrow bytes.

This module owns page caching for every CFileReader sharing one cache. Keys are
``(file uid, page index)``; the charge of an entry is the ``nbytes`` of its decoded
Arrow array (for a zero-copy page that is the memory-mapped bytes it references).
A value larger than the whole capacity is not cached.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import pyarrow as pa

from kudusql.common.errors import ProgrammingError

CacheKey = tuple[str, int]


class BlockCache:
    """LRU cache of decoded pages, bounded by the total ``nbytes`` of the cached arrays."""

    def __init__(self, capacity_bytes: int) -> None:
        if capacity_bytes < 0:
            raise ProgrammingError(f"block cache capacity must be >= 0, got {capacity_bytes}")
        self.capacity_bytes = capacity_bytes
        self.size_bytes = 0
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        self._entries: OrderedDict[CacheKey, tuple[pa.Array[Any], int]] = OrderedDict()
        self._by_file: dict[str, set[int]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: CacheKey) -> pa.Array[Any] | None:
        """The cached page for ``key`` (marking it most recently used), or None.

        Lock-free on purpose (point lookups call it once per column): each OrderedDict
        operation is atomic under the GIL, and a page evicted between the two calls is
        simply a hit that no longer refreshes its position.
        """
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
            return None
        try:  # noqa: SIM105 - contextlib.suppress costs more than the lookup itself
            self._entries.move_to_end(key)
        except KeyError:
            pass
        self.hits += 1
        return entry[0]

    def put(self, key: CacheKey, value: pa.Array[Any]) -> None:
        """Cache ``value`` under ``key``, evicting least recently used pages to fit."""
        charge = value.nbytes
        with self._lock:
            self._remove(key)
            if charge > self.capacity_bytes:
                return
            self._entries[key] = (value, charge)
            self._by_file.setdefault(key[0], set()).add(key[1])
            self.size_bytes += charge
            while self.size_bytes > self.capacity_bytes:
                old_key = next(iter(self._entries))
                self._remove(old_key)

    def invalidate_file(self, uid: str) -> None:
        """Drop every cached page of the file with this uid."""
        with self._lock:
            for page in list(self._by_file.get(uid, ())):
                self._remove((uid, page))

    def clear(self) -> None:
        """Drop everything (statistics are kept)."""
        with self._lock:
            self._entries.clear()
            self._by_file.clear()
            self.size_bytes = 0

    def _remove(self, key: CacheKey) -> None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return
        self.size_bytes -= entry[1]
        pages = self._by_file.get(key[0])
        if pages is not None:
            pages.discard(key[1])
            if not pages:
                del self._by_file[key[0]]
