"""The catalog's durable records (a table, a tablet) and their byte encoding.

A record is keyed as a row of Kudu's system catalog, ``(entry type, entry id)``, and its
value is versioned UTF-8 JSON (``FORMAT.md`` beside this module). Decoding checks every
field, so a store that hands back something else raises ``CatalogCorruptionError``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from typing import Any

FORMAT_VERSION = 1

#: The entry types of the system catalog's key, as Kudu's ``SysRowEntryType``.
TABLES_ENTRY = 1
TABLETS_ENTRY = 2
#: Small named documents the clients keep in the catalog (the SQL database registry).
METADATA_ENTRY = 3

RecordKey = tuple[int, str]


class CatalogCorruptionError(Exception):
    """A stored catalog record that does not decode."""


class TableState(Enum):
    """A table's lifecycle, as Kudu's ``SysTablesEntryPB.State``."""

    PREPARING = "PREPARING"  # created; some tablet is not RUNNING at the table's version
    RUNNING = "RUNNING"  # every tablet RUNNING and reported at the table's schema version
    ALTERING = "ALTERING"  # altered; some tablet has not reported the new version
    REMOVED = "REMOVED"  # dropped; records go once every tablet's delete is confirmed


class TabletState(Enum):
    """A tablet's lifecycle, as Kudu's ``SysTabletsEntryPB.State``."""

    PREPARING = "PREPARING"  # not placed yet (kept for Kudu's vocabulary; unused)
    CREATING = "CREATING"  # placed; its tablet server has not reported it
    RUNNING = "RUNNING"  # reported by the tablet server it is assigned to
    REPLACED = "REPLACED"  # failed to create in time; a new tablet covers its partition
    DELETED = "DELETED"  # its table is dropped; a delete goes to its server until confirmed


@dataclass(frozen=True)
class TableRecord:
    """A table as the catalog keeps it durably."""

    table_id: str
    name: str
    schema: str  # opaque to the master: the tablet servers' schema text
    schema_version: int
    state: TableState
    metadata: str = ""  # opaque to the master: what the client keeps with the table
    #: The replication factor: each tablet has this many replicas on distinct servers.
    num_replicas: int = 1

    @property
    def key(self) -> RecordKey:
        return (TABLES_ENTRY, self.table_id)


@dataclass(frozen=True)
class TabletRecord:
    """A tablet as the catalog keeps it durably, and the tablet servers its replicas are
    assigned to: ``tserver_uuid`` is the first replica's server, ``other_replicas`` the
    rest (empty for an unreplicated tablet); every server appears once."""

    tablet_id: str
    table_id: str
    partition: str  # opaque to the master: the partition this tablet covers
    tserver_uuid: str
    state: TabletState
    other_replicas: tuple[str, ...] = ()
    #: The opid index of the committed Raft config the replicas are (0: the tablet's
    #: first config, the replicas it was created on); a tablet server's report of a
    #: newer one moves the replicas (re-replication).
    config_index: int = 0

    @property
    def key(self) -> RecordKey:
        return (TABLETS_ENTRY, self.tablet_id)

    @property
    def replica_uuids(self) -> tuple[str, ...]:
        """The servers of every replica, the first one first."""
        return (self.tserver_uuid, *self.other_replicas)

    @property
    def replicated(self) -> bool:
        return bool(self.other_replicas)


@dataclass(frozen=True)
class MetadataRecord:
    """A named document clients keep with the catalog (opaque to the master)."""

    name: str
    body: str

    @property
    def key(self) -> RecordKey:
        return (METADATA_ENTRY, self.name)


CatalogRecord = TableRecord | TabletRecord | MetadataRecord


def encode_record(record: CatalogRecord) -> bytes:
    """The stored value of ``record``."""
    body: dict[str, Any]
    if isinstance(record, TableRecord):
        body = {
            "v": FORMAT_VERSION,
            "table_id": record.table_id,
            "name": record.name,
            "schema": record.schema,
            "schema_version": record.schema_version,
            "state": record.state.value,
            "metadata": record.metadata,
        }
        if record.num_replicas != 1:
            body["num_replicas"] = record.num_replicas
    elif isinstance(record, MetadataRecord):
        body = {"v": FORMAT_VERSION, "name": record.name, "body": record.body}
    else:
        body = {
            "v": FORMAT_VERSION,
            "tablet_id": record.tablet_id,
            "table_id": record.table_id,
            "partition": record.partition,
            "tserver_uuid": record.tserver_uuid,
            "state": record.state.value,
        }
        if record.other_replicas:
            body["tserver_uuids"] = list(record.replica_uuids)
        if record.config_index:
            body["config_index"] = record.config_index
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def _field(body: dict[str, Any], name: str, kind: type) -> Any:
    value = body.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise CatalogCorruptionError(f"catalog record field {name!r} is missing or malformed")
    return value


def _other_replicas(body: dict[str, Any], entry_id: str) -> tuple[str, ...]:
    """The replicas after the first of a tablet record (none in a record without
    ``tserver_uuids``, as every record written before replication)."""
    if "tserver_uuids" not in body:
        return ()
    uuids = _field(body, "tserver_uuids", list)
    if (
        len(uuids) < 2
        or not all(isinstance(u, str) for u in uuids)
        or len(set(uuids)) != len(uuids)
        or uuids[0] != body.get("tserver_uuid")
    ):
        raise CatalogCorruptionError(
            f"catalog record {entry_id!r} has malformed replica servers (tserver_uuids)"
        )
    return tuple(uuids[1:])


def decode_record(key: RecordKey, value: bytes) -> CatalogRecord:
    """The record stored under ``key``; raises ``CatalogCorruptionError`` if it does not decode."""
    try:
        body = json.loads(value.decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CatalogCorruptionError(f"catalog record {key[1]!r} is not valid JSON") from e
    if not isinstance(body, dict) or body.get("v") != FORMAT_VERSION:
        raise CatalogCorruptionError(f"catalog record {key[1]!r} has an unknown format version")
    entry_type, entry_id = key
    try:
        if entry_type == TABLES_ENTRY:
            table = TableRecord(
                table_id=_field(body, "table_id", str),
                name=_field(body, "name", str),
                schema=_field(body, "schema", str),
                schema_version=_field(body, "schema_version", int),
                state=TableState(_field(body, "state", str)),
                metadata=_field(body, "metadata", str),
                num_replicas=_field(body, "num_replicas", int) if "num_replicas" in body else 1,
            )
            if table.num_replicas < 1:
                raise CatalogCorruptionError(
                    f"catalog record {entry_id!r} has replication factor {table.num_replicas}"
                )
            record: CatalogRecord = table
            ident = table.table_id
        elif entry_type == TABLETS_ENTRY:
            tablet = TabletRecord(
                tablet_id=_field(body, "tablet_id", str),
                table_id=_field(body, "table_id", str),
                partition=_field(body, "partition", str),
                tserver_uuid=_field(body, "tserver_uuid", str),
                state=TabletState(_field(body, "state", str)),
                other_replicas=_other_replicas(body, entry_id),
                config_index=_field(body, "config_index", int) if "config_index" in body else 0,
            )
            record = tablet
            ident = tablet.tablet_id
        elif entry_type == METADATA_ENTRY:
            doc = MetadataRecord(name=_field(body, "name", str), body=_field(body, "body", str))
            record = doc
            ident = doc.name
        else:
            raise CatalogCorruptionError(
                f"catalog record {entry_id!r} has unknown type {entry_type}"
            )
    except ValueError as e:
        raise CatalogCorruptionError(f"catalog record {entry_id!r} has an unknown state") from e
    if ident != entry_id:
        raise CatalogCorruptionError(f"catalog record {entry_id!r} is stored under another key")
    return record
