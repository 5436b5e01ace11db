"""The ``sys`` database's tables as types: their names, columns and row shapes.

Both kinds of database build their ``sys`` tables to these schemas: the embedded one
from its catalog and open tablets (``system_tables.py``), a cluster's client from its
master and tablet servers.
"""

from __future__ import annotations

import datetime
from typing import Any

import pyarrow as pa

from kudusql.common.errors import ProgrammingError
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.storage.tables.catalog import TableMeta

#: The SQL database whose tables these are (reserved: no user database may use it).
SYSTEM_DATABASE = "sys"


_TYPES: dict[str, pa.DataType] = {
    "str": pa.string(),
    "int": pa.int64(),
    "float": pa.float64(),
    "ts": pa.timestamp("us"),  # UTC, without a zone (Kudu's UNIXTIME_MICROS)
}


def _schema(fields: list[tuple[str, str]]) -> pa.Schema:
    return pa.schema([pa.field(n, _TYPES[t]) for n, t in fields])


SCHEMAS: dict[str, pa.Schema] = {
    "tables": _schema(
        [
            ("table_name", "str"),
            ("table_id", "str"),
            ("num_tablets", "int"),
            ("num_columns", "int"),
            ("schema_version", "int"),
            ("partitioning", "str"),
            ("created", "ts"),
        ]
    ),
    "tablets": _schema(
        [
            ("table_name", "str"),
            ("tablet_id", "str"),
            ("partition", "str"),
            ("memrowset_rows", "int"),
            ("memrowset_bytes", "int"),
            ("deltamemstore_bytes", "int"),
            ("diskrowsets", "int"),
            ("disk_bytes", "int"),
            ("wal_bytes", "int"),
            ("ancient_history_mark", "ts"),
        ]
    ),
    "rowsets": _schema(
        [
            ("table_name", "str"),
            ("tablet_id", "str"),
            ("kind", "str"),
            ("rowset_id", "int"),
            ("rows", "int"),
            ("live_rows", "int"),
            ("base_bytes", "int"),
            ("redo_files", "int"),
            ("redo_bytes", "int"),
            ("undo_files", "int"),
            ("undo_bytes", "int"),
            ("dms_bytes", "int"),
            ("min_key", "str"),
            ("max_key", "str"),
        ]
    ),
    # A cluster's tablet replicas: each tablet's replicas, their Raft roles and their
    # servers' health as the master knows them (an embedded database has none).
    "tablet_replicas": _schema(
        [
            ("table_name", "str"),
            ("tablet_id", "str"),
            ("start_key", "str"),
            ("tserver_uuid", "str"),
            ("address", "str"),
            ("role", "str"),
            ("health", "str"),
        ]
    ),
    # A cluster's tablet servers as the master knows them (an embedded database has none).
    "tablet_servers": _schema(
        [
            ("uuid", "str"),
            ("address", "str"),
            ("state", "str"),
            ("last_heartbeat", "ts"),
            ("seconds_since_heartbeat", "float"),
            ("tablets", "int"),
        ]
    ),
    "maintenance": _schema(
        [
            ("op", "str"),
            ("table_name", "str"),
            ("tablet_id", "str"),
            ("started", "ts"),
            ("duration_s", "float"),
            ("bytes_read", "int"),
            ("bytes_written", "int"),
            ("note", "str"),
        ]
    ),
}


def names() -> list[str]:
    return sorted(SCHEMAS)


def schema_of(name: str) -> Schema:
    """The system table's columns as a table schema (its first column stands as key)."""
    if name not in SCHEMAS:
        system_table_missing(name)
    cols = [
        ColumnSchema(f.name, DataType.from_arrow(f.type), nullable=i > 0)
        for i, f in enumerate(SCHEMAS[name])
    ]
    return Schema(tuple(cols), 1)


def system_table_missing(name: str) -> None:
    raise ProgrammingError(
        f"no system table {SYSTEM_DATABASE}.{name}; there are "
        f"{', '.join(f'{SYSTEM_DATABASE}.{n}' for n in names())}"
    )


def micros_to_datetime(us: int) -> datetime.datetime:
    """Microseconds since the epoch as the naive UTC datetime of a TIMESTAMP column."""
    return datetime.datetime(1970, 1, 1) + datetime.timedelta(microseconds=us)


def table_row(name: str, m: TableMeta, table_id: str | None = None) -> dict[str, Any]:
    """A table's row of ``sys.tables``; ``table_id``: the id where it is not ``m.id``
    (a cluster's master names tables by 32 hex digits, as Kudu's)."""
    return {
        "table_name": name,
        "table_id": str(m.id) if table_id is None else table_id,
        "num_tablets": len(m.tablets),
        "num_columns": len(m.schema.columns),
        "schema_version": m.schema_version,
        "partitioning": m.partition_schema.describe(),
        "created": micros_to_datetime(m.created_micros),
    }
