"""BlockCache: a thread-safe LRU of decoded CFile pages, bounded by what it keeps alive.

This module owns page caching for every CFileReader sharing one cache. Keys are
``(file uid, page)`` for a file's pages (the page number ``key_array.WHOLE_FILE_ENTRY``
for its whole sorted key array) and ``(file uid, page, version)`` for a page with a
version of its rowset's deltas applied; a cache keeps one version per page, the
latest put (versions only move forward: an older one is never asked for again).

A file uid is ``file_uid(path, stat)``: the path, then ``@`` and the file's identity
(device, inode, mtime, size), so a file replaced at the same path never hits the
pages of its predecessor, and ``uid_path`` recovers the path from any uid.

The charge of an entry is what it keeps alive: every buffer its array references,
whole (a slice keeps its buffers), plus ``ENTRY_OVERHEAD_BYTES`` for the Python and
Arrow objects around them (measured: ~1.2 KB per entry; with pages of a few dozen
values that was 20 times the data, so a capacity that counted bytes of data only was
no bound on memory). A value charged more than the whole capacity is not cached.
Buffers of a zero-copy page are slices of the file's memory map; they are charged
their page's bytes (the map is file-backed memory the kernel may reclaim).

Pages of a file that is replaced or deleted are never read again: the tablet drops
them (``invalidate_paths``) when it retires the file and again when it deletes it, so
the cache holds pages of live files only.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from kudusql.common.errors import ProgrammingError

CacheKey = tuple[str, int] | tuple[str, int, str]


def file_uid(path: str, st: os.stat_result) -> str:
    """The cache identity of the file at ``path`` whose stat is ``st``."""
    return f"{os.path.abspath(path)}@{st.st_dev}:{st.st_ino}:{st.st_mtime_ns}:{st.st_size}"


def uid_path(uid: str) -> str:
    """The path part of a ``file_uid`` (the identity after the last ``@`` has none)."""
    return uid.rpartition("@")[0]


class BlockCache:
    """LRU cache of decoded pages, bounded by the total charge of its entries."""

    #: Charged per entry beyond its buffers: the Python array object, Arrow's array and
    #: buffer objects, the key and the LRU's bookkeeping (see the module docstring).
    ENTRY_OVERHEAD_BYTES = 1280

    def __init__(self, capacity_bytes: int) -> None:
        if capacity_bytes < 0:
            raise ProgrammingError(f"block cache capacity must be >= 0, got {capacity_bytes}")
        self.capacity_bytes = capacity_bytes
        self.size_bytes = 0
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        self._entries: OrderedDict[CacheKey, tuple[pa.Array[Any], int]] = OrderedDict()
        # Every key of each file uid; and the cached version of each versioned page.
        self._by_file: dict[str, set[CacheKey]] = {}
        self._version: dict[tuple[str, int], CacheKey] = {}

    def __len__(self) -> int:
        return len(self._entries)

    @classmethod
    def charge(cls, value: pa.Array[Any]) -> int:
        """What caching ``value`` costs against the capacity."""
        return value.get_total_buffer_size() + cls.ENTRY_OVERHEAD_BYTES

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
        """Cache ``value`` under ``key``, evicting least recently used pages to fit (and
        the other version of a versioned page)."""
        charge = self.charge(value)
        with self._lock:
            self._remove(key)
            if len(key) == 3:
                older = self._version.get(key[:2])  # type: ignore[index]
                if older is not None:
                    self._remove(older)
            if charge > self.capacity_bytes:
                return
            self._entries[key] = (value, charge)
            self._by_file.setdefault(key[0], set()).add(key)
            if len(key) == 3:
                self._version[key[:2]] = key  # type: ignore[index]
            self.size_bytes += charge
            while self.size_bytes > self.capacity_bytes:
                self._remove(next(iter(self._entries)))

    def invalidate_file(self, uid: str) -> None:
        """Drop every cached page of the file with this uid."""
        with self._lock:
            for key in list(self._by_file.get(uid, ())):
                self._remove(key)

    def invalidate_paths(self, paths: Iterable[str]) -> int:
        """Drop every cached page of the files at ``paths`` and of the files under the
        directories among them (whatever their uid); returns how many files had some."""
        exact = {os.path.abspath(p) for p in paths}
        if not exact:
            return 0
        dirs = tuple(p + os.sep for p in exact)
        with self._lock:
            gone = [u for u in self._by_file if (p := uid_path(u)) in exact or p.startswith(dirs)]
            for uid in gone:
                for key in list(self._by_file.get(uid, ())):
                    self._remove(key)
        return len(gone)

    def cached_paths(self) -> set[str]:
        """The paths of the files with a cached page."""
        with self._lock:
            return {uid_path(u) for u in self._by_file}

    def clear(self) -> None:
        """Drop everything (statistics are kept)."""
        with self._lock:
            self._entries.clear()
            self._by_file.clear()
            self._version.clear()
            self.size_bytes = 0

    def _remove(self, key: CacheKey) -> None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return
        self.size_bytes -= entry[1]
        keys = self._by_file.get(key[0])
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_file[key[0]]
        if len(key) == 3 and self._version.get(key[:2]) == key:  # type: ignore[index]
            del self._version[key[:2]]  # type: ignore[index]
