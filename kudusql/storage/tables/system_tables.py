"""System tables: the state of a database as Arrow tables, for SQL's ``sys`` database.

This module owns what an operator can query about the storage engine: ``sys.tables``
(one row per table), ``sys.tablets`` (memory stores, rowsets, disk and WAL bytes and the
ancient history mark of each tablet), ``sys.rowsets`` (each MemRowSet and DiskRowSet
with its rows, live rows, base bytes and REDO/UNDO deltas) and ``sys.maintenance`` (the
flushes, compactions and GC runs the maintenance manager and explicit calls made, most
recent last). Each is built on demand from the catalog and the open tablets.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from kudusql.common.errors import ProgrammingError
from kudusql.common.hybrid_time import to_micros
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType

if TYPE_CHECKING:
    from kudusql.storage.tables.database import Database

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
            ("table_id", "int"),
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
            ("tablet_id", "int"),
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
            ("tablet_id", "int"),
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
            ("tablet_id", "int"),
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


def system_table(db: Database, name: str) -> pa.Table:
    """The rows of system table ``name`` now."""
    build = _BUILDERS.get(name)
    if build is None:
        system_table_missing(name)
        raise AssertionError  # unreachable
    return pa.Table.from_pylist(build(db), schema=SCHEMAS[name])


def _micros(us: int) -> datetime.datetime:
    return datetime.datetime(1970, 1, 1) + datetime.timedelta(microseconds=us)


def _tables(db: Database) -> list[dict[str, Any]]:
    out = []
    for name in db.table_names():
        m = db.table(name).meta
        out.append(
            {
                "table_name": name,
                "table_id": m.id,
                "num_tablets": len(m.tablets),
                "num_columns": len(m.schema.columns),
                "schema_version": m.schema_version,
                "partitioning": m.partition_schema.describe(),
                "created": _micros(m.created_micros),
            }
        )
    return out


def _each_tablet(db: Database) -> list[tuple[str, int, str, Any]]:
    out = []
    for name in db.table_names():
        t = db.table(name)
        meta, parts = t.meta, t.partitions
        for entry, part, tablet in zip(meta.tablets, parts, t.tablets(), strict=True):
            out.append((name, entry.id, part.describe(meta.partition_schema), tablet))
    return out


def _tablets(db: Database) -> list[dict[str, Any]]:
    out = []
    for name, tid, part, tablet in _each_tablet(db):
        st = tablet.stats()
        out.append(
            {
                "table_name": name,
                "tablet_id": tid,
                "partition": part,
                "memrowset_rows": st["memrowset_rows"],
                "memrowset_bytes": st["memrowset_bytes"],
                "deltamemstore_bytes": st["deltamemstore_bytes"],
                "diskrowsets": st["diskrowsets"],
                "disk_bytes": st["disk_bytes"],
                "wal_bytes": st["wal_bytes"],
                "ancient_history_mark": _micros(to_micros(st["ancient_history_mark"])),
            }
        )
    return out


def _rowsets(db: Database) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for name, tid, _part, tablet in _each_tablet(db):
        out.extend(_rowset_row(name, tid, r) for r in tablet.rowsets_info())
    return out


def _rowset_row(name: str, tid: int, r: dict[str, Any]) -> dict[str, Any]:
    return {
        "table_name": name,
        "tablet_id": tid,
        "kind": r["kind"],
        "rowset_id": r["id"],
        "rows": r["rows"],
        "live_rows": r.get("live_rows", r["rows"]),
        "base_bytes": r.get("base_bytes", r.get("bytes", 0)),
        "redo_files": r.get("redo_files", 0),
        "redo_bytes": r.get("redo_bytes", 0),
        "undo_files": r.get("undo_files", 0),
        "undo_bytes": r.get("undo_bytes", 0),
        "dms_bytes": r.get("dms_bytes", 0),
        "min_key": r.get("min_key"),
        "max_key": r.get("max_key"),
    }


def _maintenance(db: Database) -> list[dict[str, Any]]:
    by_path = {t.path: (name, tid) for name, tid, _p, t in _each_tablet(db)}
    records = list(db.maintenance.history()) if db.maintenance is not None else []
    seen = {id(r) for r in records}
    for _name, _tid, _p, t in _each_tablet(db):  # explicit calls on tablets with no manager
        records += [r for r in t.maintenance_log if id(r) not in seen]
    out = []
    for r in sorted(records, key=lambda r: r.started):
        name, tid = by_path.get(r.tablet, (None, None))
        out.append(
            {
                "op": r.op,
                "table_name": name,
                "tablet_id": tid,
                "started": _micros(int(r.started * 1e6)),
                "duration_s": r.duration_s,
                "bytes_read": r.bytes_read,
                "bytes_written": r.bytes_written,
                "note": r.note,
            }
        )
    return out


_BUILDERS: dict[str, Callable[[Database], list[dict[str, Any]]]] = {
    "tables": _tables,
    "tablets": _tablets,
    "rowsets": _rowsets,
    "maintenance": _maintenance,
    "tablet_servers": lambda db: [],
}
