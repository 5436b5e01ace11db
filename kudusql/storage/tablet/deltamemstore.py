"""DeltaMemStore: the in-memory REDO mutations (UPDATE, DELETE) of one DiskRowSet.

Kudu keys it by (rowid, timestamp) in a B-tree; here events are appended column-wise
in apply order, which is already (timestamp, sequence) order, so no tree is needed to
resolve them. A delta flush writes its contents to a REDO DeltaFile.
"""

from __future__ import annotations

import threading

from kudusql.storage.tablet.delta import Deltas, concat_deltas


class DeltaMemStore:
    """Mutations of one DiskRowSet's rows since its last delta flush."""

    def __init__(self, dms_id: int) -> None:
        self.id = dms_id
        self._lock = threading.Lock()
        self._parts: list[Deltas] = []
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
        if not len(deltas):
            return
        with self._lock:
            self._parts.append(deltas)
            self._cached = None
            self._version += 1
            self.count += len(deltas)
            self.bytes += deltas.nbytes() if nbytes is None else nbytes
            if self.min_ts is None:
                self.min_ts = int(deltas.ts[0])
                self.min_seq = int(deltas.seq[0])

    def deltas(self) -> Deltas:
        """Everything appended so far, in apply order."""
        c = self._cached
        if c is not None:
            return c
        with self._lock:
            parts = list(self._parts)
            version = self._version
        merged = concat_deltas(parts)
        with self._lock:
            # Lengths alone are not enough: another reader may have merged the parts
            # (and a writer appended) to the same length meanwhile.
            if self._version == version:
                self._parts = [merged] if len(merged) else []
                self._cached = merged
        return merged
