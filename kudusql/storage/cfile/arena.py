"""Arrays of many owners packed side by side in one numpy buffer, each copied in once.

A tablet's set of DiskRowSets changes several times a second under load (every flush,
delta flush and compaction), and the write path wants per-rowset arrays (bloom filter
bitmaps, sorted key arrays) packed in one buffer so that a batch can probe pairs of
(key, rowset) for all rowsets in a few numpy passes. Packing them anew for each set
copied everything each time (tens of MiB of bloom bits with dozens of rowsets: a fifth
of the writer's time in the sustained benchmark). An ``Arena`` copies only the arrays
it does not hold yet, appending them after the items in use.

Items a caller may read are never written again: appends go past ``_used``, and when
the buffer is full the arena moves to a new one (twice as large, or, when dead items
fill half of it, just large enough for the live ones), copying the live items from the
old buffer and leaving the old buffer to the callers that captured it. Owners are held
weakly: an item whose owner is gone leaves the index at the next ``place``, and its
space at the next move; a ``place`` also moves when dead items outweigh the live ones
in a buffer above the smallest size. So after a ``place`` the buffer holds at most
about eight times what the live owners need (or the smallest buffer), however many
owners came and went: a long-running writer's flushes and compactions replace rowsets
for ever, and each replaced rowset's array must not outlive it for long.
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

import numpy as np

T = TypeVar("T")


class Arena(Generic[T]):
    """One array per owner (fetched by ``fetch(owner)`` the first time the owner is
    placed), all of dtype ``dtype``, in one buffer."""

    def __init__(
        self, dtype: Any, fetch: Callable[[T], np.ndarray], min_items: int = 1 << 16
    ) -> None:
        self._dtype = np.dtype(dtype)
        self._fetch = fetch
        self.min_items = min_items  # the smallest buffer
        self._lock = threading.Lock()
        self._buf = np.zeros(0, dtype=self._dtype)
        self._used = 0
        # id(owner) -> (weak reference, offset, length); the reference tells a live
        # owner from a dead one whose id was reused.
        self._where: dict[int, tuple[weakref.ref[T], int, int]] = {}
        # Items of the entries in ``_where`` (dead owners' too, until ``place`` drops
        # them); and the (id, reference) of owners that died, which the references'
        # callbacks append (from any thread, at any allocation: an append only).
        self._held = 0
        self._died: deque[tuple[int, weakref.ref[T]]] = deque()

    @property
    def nbytes(self) -> int:
        """Size of the current buffer in bytes."""
        return int(self._buf.nbytes)

    def capacity_items(self) -> int:
        """Items the current buffer has room for."""
        return len(self._buf)

    def live_items(self) -> int:
        """Owners held whose owner is alive."""
        return sum(1 for ref, _, _ in list(self._where.values()) if ref() is not None)

    def live_item_count(self) -> int:
        """Items (array elements) of the live owners held."""
        return sum(n for ref, _, n in list(self._where.values()) if ref() is not None)

    def holds(self, owner: T) -> bool:
        got = self._where.get(id(owner))
        return got is not None and got[0]() is owner

    def array_of(self, owner: T) -> np.ndarray | None:
        """The owner's array (a view of the current buffer), None if not held."""
        with self._lock:
            if not self.holds(owner):
                return None
            _, off, n = self._where[id(owner)]
            return self._buf[off : off + n]

    def place(
        self, owners: Sequence[T], fetch: Callable[[T], np.ndarray] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(buffer, offset of each owner's array in it), copying in the arrays of the
        owners not held yet (through ``fetch``, else the arena's own)."""
        get = fetch or self._fetch
        with self._lock:
            self._drop_dead()
            new: dict[int, tuple[T, np.ndarray]] = {}
            for o in owners:
                if id(o) not in new and not self.holds(o):
                    new[id(o)] = (o, np.asarray(get(o)))
            for key in new:  # a dead owner's entry under a reused id
                old = self._where.pop(key, None)
                if old is not None:
                    self._held -= old[2]
            need = sum(len(a) for _, a in new.values())
            dead = self._used - self._held
            if self._used + need > len(self._buf) or (
                dead > self._held and len(self._buf) > self.min_items
            ):
                self._move(need)
            buf, at = self._buf, self._used
            for key, (o, a) in new.items():
                buf[at : at + len(a)] = a
                ref = weakref.ref(o, _on_death(self._died, key))
                self._where[key] = (ref, at, len(a))
                self._held += len(a)
                at += len(a)
            self._used = at
            offsets = np.array([self._where[id(o)][1] for o in owners], dtype=np.int64)
            return buf, offsets

    def _drop_dead(self) -> None:
        """Forget the entries of owners that died (their space stays until a move)."""
        died = self._died
        while died:
            key, ref = died.popleft()
            got = self._where.get(key)
            if got is not None and got[0] is ref:
                del self._where[key]
                self._held -= got[2]

    def _move(self, need: int) -> None:
        """To a new buffer with room for ``need`` more items, keeping the live ones."""
        kept = [(k, v) for k, v in self._where.items() if v[0]() is not None]
        live = sum(n for _, (_, _, n) in kept)
        size = max(2 * len(self._buf), 2 * (live + need), self.min_items)
        if live < self._used // 2:  # mostly dead: size for what lives
            size = max(2 * (live + need), self.min_items)
        buf = np.zeros(size, dtype=self._dtype)
        old = self._buf
        where: dict[int, tuple[weakref.ref[T], int, int]] = {}
        at = 0
        for k, (ref, off, n) in kept:
            buf[at : at + n] = old[off : off + n]
            where[k] = (ref, at, n)
            at += n
        self._buf, self._used, self._where, self._held = buf, at, where, at


def _on_death(
    died: deque[tuple[int, weakref.ref[T]]], key: int
) -> Callable[[weakref.ref[T]], None]:
    """The callback of an owner's reference: note its entry for the next ``place``
    (it holds the queue, not the arena: an arena is never kept alive by its owners)."""

    def note(ref: weakref.ref[T]) -> None:
        died.append((key, ref))

    return note
