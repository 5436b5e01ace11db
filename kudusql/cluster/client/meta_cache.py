"""The client's cache of tablet locations (Kudu's ``MetaCache``).

For each table name the cache holds the locations a ``LocationSource`` gave (the master
client will be one): every RUNNING tablet with its partition and the address of the
tablet server that hosts it (a replicated tablet's leader first, then its other
replicas), indexed by partition key start. Locations are fetched on
first use and kept until a caller finds them stale (a server answered
``TabletNotFound`` or could not be reached) and ``invalidate``s the table; the next use
fetches them again.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from kudusql.cluster.tablet_partition import TabletPartition

__all__ = ["LocatedTablet", "LocationSource", "MetaCache", "TableLocations", "TabletLocationLike"]


class TabletLocationLike(Protocol):
    """A tablet location as a source gives it (``master_state.TabletLocation`` is one):
    the tablet's id, its partition (the JSON text of a ``TabletPartition``) and the
    ``HOST:PORT`` of the tablet server that hosts it."""

    @property
    def tablet_id(self) -> str: ...

    @property
    def partition(self) -> str: ...

    @property
    def address(self) -> str: ...


class LocationSource(Protocol):
    """Where the client learns tablet locations (the master client will be one)."""

    def locations(self, table_name: str) -> Sequence[TabletLocationLike]:
        """Every RUNNING tablet of ``table_name``; raises the ``kudusql`` error for an
        unknown table."""
        ...


@dataclass(frozen=True)
class LocatedTablet:
    """A tablet, its partition and the address of the tablet server that hosts it (a
    replicated tablet's leader, as last known); ``replicas``: every replica's address,
    the leader first (just ``address`` for an unreplicated tablet)."""

    tablet_id: str
    partition: TabletPartition
    address: str
    replicas: tuple[str, ...] = ()

    @property
    def replicated(self) -> bool:
        return len(self.replicas) > 1

    def with_leader(self, address: str) -> LocatedTablet:
        """The same tablet with ``address`` as its leader, first among its replicas."""
        rest = tuple(a for a in self.replicas if a != address)
        return LocatedTablet(self.tablet_id, self.partition, address, (address, *rest))


@dataclass(frozen=True)
class TableLocations:
    """One fetch of a table's locations: ``by_start`` maps a partition key start to its
    tablet (a partition with no RUNNING tablet is absent)."""

    by_start: dict[bytes, LocatedTablet]
    generation: int


class MetaCache:
    """Table name -> its tablets' locations, from ``source``. Thread-safe."""

    def __init__(self, source: LocationSource) -> None:
        self.source = source
        self._lock = threading.Lock()
        self._tables: dict[str, TableLocations] = {}
        self._generation = 0

    def table(self, table_name: str) -> TableLocations:
        """The cached locations of the table, fetched when there are none."""
        with self._lock:
            cached = self._tables.get(table_name)
        if cached is not None:
            return cached
        fetched = self.source.locations(table_name)
        with self._lock:
            self._generation += 1
            located = TableLocations(
                {
                    t.partition.partition_key_start: t
                    for t in (
                        LocatedTablet(
                            loc.tablet_id,
                            TabletPartition.from_json(loc.partition),
                            loc.address,
                            _replica_addresses(loc),
                        )
                        for loc in fetched
                    )
                },
                self._generation,
            )
            self._tables[table_name] = located
            return located

    def set_leader(self, table_name: str, tablet_id: str, address: str) -> None:
        """Note that ``address`` leads the tablet now (a replica's ``NotTheLeader`` named
        it), in the cached locations, so the next write goes there first."""
        with self._lock:
            cached = self._tables.get(table_name)
            if cached is None:
                return
            for start, t in cached.by_start.items():
                if t.tablet_id == tablet_id and t.address != address:
                    cached.by_start[start] = t.with_leader(address)

    def invalidate(self, table_name: str, stale: TableLocations | None = None) -> None:
        """Drop the table's locations (only if they are still ``stale``, when given: a
        refresh another thread already made is kept)."""
        with self._lock:
            cached = self._tables.get(table_name)
            if cached is not None and (stale is None or cached is stale):
                del self._tables[table_name]


def _replica_addresses(loc: TabletLocationLike) -> tuple[str, ...]:
    """The replicas' addresses, leader (``loc.address``) first; a source that lists no
    replicas (an unreplicated tablet, a test source) gives just ``loc.address``."""
    listed = [str(r.address) for r in getattr(loc, "replicas", ()) or ()]
    return (loc.address, *(a for a in listed if a != loc.address))
