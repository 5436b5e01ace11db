"""The catalog of a database: its tables, their schemas, partitioning and tablets.

This is the Kudu master's metadata on one machine. One file, ``catalog.meta`` in the
database directory (see ``FORMAT.md``), replaced atomically on every DDL change, is the
single source of truth: a table exists exactly when the catalog lists it. A tablet
directory the catalog does not list is removed at open only when the catalog proves it
garbage: its id is at or past ``next_tablet_id`` (ids advance only when a CREATE or ADD
RANGE PARTITION commits, so it is one that never did), or ``pending_deletion`` lists it
(a DROP that committed records its tablets there in the same save, and the list is
cleared once they are deleted). Any other one is kept (``directory.py``).

Each tablet entry records the partition it serves (hash buckets and range bounds, and
the partition key range) and lives in ``tablets/<tablet id>``. Each table records its
schema with column ids and a schema version; a tablet whose superblock holds an older
version is brought up to date at open (ALTER TABLE commits in the catalog first).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any

from kudusql.common.errors import CorruptionError
from kudusql.common.schema import Schema
from kudusql.storage.fs.meta_file import load_json, save_json
from kudusql.storage.tables.partition import (
    Partition,
    PartitionSchema,
    RangeBounds,
    create_partitions,
)

# DO NOT CHANGE: on-disk.
CATALOG_FILE = "catalog.meta"
MAGIC = b"KSQLCAT1"
VERSION = 1
TABLETS_DIR = "tablets"


@dataclass(frozen=True)
class TabletEntry:
    """One tablet of a table and the partition it serves."""

    id: int
    hash_buckets: tuple[int, ...]
    range_bounds: RangeBounds
    partition_key_start: bytes
    partition_key_end: bytes

    @classmethod
    def of(cls, tablet_id: int, p: Partition) -> TabletEntry:
        return cls(
            tablet_id, p.hash_buckets, p.range_bounds, p.partition_key_start, p.partition_key_end
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "hash_buckets": list(self.hash_buckets),
            "range_bounds": self.range_bounds.to_dict(),
            "partition_key_start": self.partition_key_start.hex(),
            "partition_key_end": self.partition_key_end.hex(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TabletEntry:
        return cls(
            int(d["id"]),
            tuple(int(b) for b in d["hash_buckets"]),
            RangeBounds.from_dict(d["range_bounds"]),
            bytes.fromhex(d["partition_key_start"]),
            bytes.fromhex(d["partition_key_end"]),
        )


@dataclass(frozen=True)
class TableMeta:
    """A table as the catalog records it. ``tablets`` follow partition-key order."""

    id: int
    name: str
    schema: Schema
    partition_schema: PartitionSchema
    tablets: tuple[TabletEntry, ...]
    schema_version: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    created_micros: int = 0
    #: Statistics of the last COMPUTE STATS (``Table.compute_statistics``), or None.
    statistics: dict[str, Any] | None = None
    #: Kudu's table owner and comment ("" when none was given).
    owner: str = ""
    comment: str = ""
    #: When the table was soft-deleted (wall-clock microseconds; 0: it is live) and for
    #: how long it stays recallable after that.
    soft_deleted_micros: int = 0
    reserve_seconds: int = 0

    @property
    def soft_deleted(self) -> bool:
        return self.soft_deleted_micros > 0

    def expired(self, now_micros: int) -> bool:
        """True for a soft-deleted table whose reserve time has passed (it is purged)."""
        return (
            self.soft_deleted
            and now_micros >= self.soft_deleted_micros + self.reserve_seconds * 1_000_000
        )

    def partitions(self) -> list[Partition]:
        """The table's partitions, in the order of ``tablets``."""
        parts = create_partitions(self.partition_schema, self.schema)
        if [p.partition_key_start for p in parts] != [t.partition_key_start for t in self.tablets]:
            raise CorruptionError(
                CATALOG_FILE, 0, f"table {self.name!r}: tablets do not match its partitions"
            )
        return parts

    def with_(self, **changes: Any) -> TableMeta:
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "schema": self.schema.to_dict(),
            "schema_version": self.schema_version,
            "partition_schema": self.partition_schema.to_dict(),
            "tablets": [t.to_dict() for t in self.tablets],
            "properties": dict(self.properties),
            "created_micros": self.created_micros,
            "statistics": self.statistics,
            "owner": self.owner,
            "comment": self.comment,
            "soft_deleted": (
                {"at_micros": self.soft_deleted_micros, "reserve_seconds": self.reserve_seconds}
                if self.soft_deleted
                else None
            ),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TableMeta:
        # owner, comment and soft_deleted are absent in catalogs written before them;
        # there the comment is the table property "comment" (as Impala keeps it).
        soft = d.get("soft_deleted") or {}
        props = {str(k): str(v) for k, v in d.get("properties", {}).items()}
        comment = str(d.get("comment", "")) or props.get("comment", "")
        if "comment" not in d:
            props.pop("comment", None)
        return cls(
            int(d["id"]),
            d["name"],
            Schema.from_dict(d["schema"]),
            PartitionSchema.from_dict(d["partition_schema"]),
            tuple(TabletEntry.from_dict(t) for t in d["tablets"]),
            int(d.get("schema_version", 0)),
            props,
            int(d.get("created_micros", 0)),
            d.get("statistics"),
            str(d.get("owner", "")),
            comment,
            int(soft.get("at_micros", 0)),
            int(soft.get("reserve_seconds", 0)),
        )


@dataclass
class CatalogState:
    """Every table by name, the id counters (ids are never reused), and the tablets of
    committed drops whose directories may still exist (``pending_deletion``)."""

    tables: dict[str, TableMeta] = field(default_factory=dict)
    next_table_id: int = 1
    next_tablet_id: int = 1
    pending_deletion: list[int] = field(default_factory=list)

    def copy(self) -> CatalogState:
        return CatalogState(
            dict(self.tables),
            self.next_table_id,
            self.next_tablet_id,
            list(self.pending_deletion),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "tables": [t.to_dict() for t in sorted(self.tables.values(), key=lambda t: t.id)],
            "next_table_id": self.next_table_id,
            "next_tablet_id": self.next_tablet_id,
            "pending_deletion": sorted(self.pending_deletion),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CatalogState:
        tables = [TableMeta.from_dict(t) for t in d["tables"]]
        return cls(
            {t.name: t for t in tables},
            int(d["next_table_id"]),
            int(d["next_tablet_id"]),
            # absent in catalogs written before it existed
            [int(i) for i in d.get("pending_deletion", [])],
        )


def catalog_path(db_dir: str) -> str:
    return os.path.join(db_dir, CATALOG_FILE)


def tablet_path(db_dir: str, tablet_id: int) -> str:
    return os.path.join(db_dir, TABLETS_DIR, tablet_dir_name(tablet_id))


def tablet_dir_name(tablet_id: int) -> str:
    return f"{tablet_id:08d}"


def parse_tablet_dir_name(name: str) -> int | None:
    """The tablet id a directory name under ``tablets/`` stands for, or None if it is not
    one (exactly ``tablet_dir_name`` of some id)."""
    if not name.isascii() or not name.isdigit():
        return None
    tablet_id = int(name)
    return tablet_id if tablet_dir_name(tablet_id) == name else None


def exists(db_dir: str) -> bool:
    return os.path.exists(catalog_path(db_dir))


def save(db_dir: str, state: CatalogState, *, sync: bool = True) -> None:
    save_json(catalog_path(db_dir), MAGIC, VERSION, state.to_dict(), sync=sync)


def load(db_dir: str) -> CatalogState:
    path = catalog_path(db_dir)
    body = load_json(path, MAGIC, VERSION, "catalog")
    try:
        return CatalogState.from_dict(body)
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptionError(path, 0, f"unreadable catalog: {e}") from e
