"""System tables: the state of a database as Arrow tables, for SQL's ``sys`` database.

This module owns what an operator can query about the storage engine: ``sys.tables``
(one row per table), ``sys.tablets`` (memory stores, rowsets, disk and WAL bytes and the
ancient history mark of each tablet), ``sys.rowsets`` (each MemRowSet and DiskRowSet
with its rows, live rows, base bytes and REDO/UNDO deltas) and ``sys.maintenance`` (the
flushes, compactions and GC runs the maintenance manager and explicit calls made, most
recent last). Each is built on demand from the catalog and the open tablets.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from kudusql.common.hybrid_time import to_micros
from kudusql.storage.tables.system_schemas import (
    SCHEMAS,
    SYSTEM_DATABASE,
    micros_to_datetime,
    names,
    schema_of,
    system_table_missing,
    table_row,
)

if TYPE_CHECKING:
    from kudusql.storage.tables.database import Database


def system_table(db: Database, name: str) -> pa.Table:
    """The rows of system table ``name`` now."""
    build = _BUILDERS.get(name)
    if build is None:
        system_table_missing(name)
        raise AssertionError  # unreachable
    return pa.Table.from_pylist(build(db), schema=SCHEMAS[name])


def _tables(db: Database) -> list[dict[str, Any]]:
    return [table_row(name, db.table(name).meta) for name in db.table_names()]


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
                "tablet_id": str(tid),
                "partition": part,
                "memrowset_rows": st["memrowset_rows"],
                "memrowset_bytes": st["memrowset_bytes"],
                "deltamemstore_bytes": st["deltamemstore_bytes"],
                "diskrowsets": st["diskrowsets"],
                "disk_bytes": st["disk_bytes"],
                "wal_bytes": st["wal_bytes"],
                "ancient_history_mark": micros_to_datetime(to_micros(st["ancient_history_mark"])),
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
        "tablet_id": str(tid),
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
                "tablet_id": None if tid is None else str(tid),
                "started": micros_to_datetime(int(r.started * 1e6)),
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
    "tablet_replicas": lambda db: [],
}


__all__ = [
    "SCHEMAS",
    "SYSTEM_DATABASE",
    "micros_to_datetime",
    "names",
    "schema_of",
    "system_table",
    "system_table_missing",
    "table_row",
]
