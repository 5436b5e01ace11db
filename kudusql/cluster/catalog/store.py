"""The interface the master writes its durable records through, and an in-memory store.

A write is one atomic batch: every put and delete in it lands, or none does. The master
writes a batch before it changes its in-memory catalog or asks any tablet server for
anything (write-ahead), so whatever a restarted master rebuilds from ``scan()`` is a
state the old master had committed to.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from kudusql.cluster.catalog.records import RecordKey

#: One change of a batch: the value to store under the key, or ``None`` to delete it.
RecordWrite = tuple[RecordKey, bytes | None]


class CatalogStore(Protocol):
    """Durable storage of the catalog's records (the system catalog tablet in a real master)."""

    def write(self, batch: Sequence[RecordWrite]) -> None:
        """Apply every change of ``batch`` atomically and durably, or raise and apply none."""

    def scan(self) -> Iterator[tuple[RecordKey, bytes]]:
        """Every stored record, in key order."""


class InMemoryCatalogStore:
    """A ``CatalogStore`` in a dict: what survives a simulated master restart."""

    def __init__(self) -> None:
        self._rows: dict[RecordKey, bytes] = {}
        self.writes = 0  # batches written, for tests

    def write(self, batch: Sequence[RecordWrite]) -> None:
        rows = dict(self._rows)
        for key, value in batch:
            if value is None:
                rows.pop(key, None)
            else:
                rows[key] = bytes(value)
        self._rows = rows
        self.writes += 1

    def scan(self) -> Iterator[tuple[RecordKey, bytes]]:
        yield from sorted(self._rows.items())
