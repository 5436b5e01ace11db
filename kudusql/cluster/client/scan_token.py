"""Scan tokens of a cluster: one tablet's piece of a planned scan, runnable elsewhere.

A ``RemoteScanToken`` names the cluster (its master's address), the table (the master's
table id, its name and schema version), one tablet (the master's tablet id), the
address of the tablet server that hosted it when the scan was planned, the projection,
the predicates, an encoded primary key range and the snapshot HybridTime fixed at
planning, so every piece reads the same state wherever it runs. It serializes to the
JSON of ``kudusql/cluster/FORMAT.md`` ("Scan tokens"). Reading one asks the named tablet
server first and, when the tablet is no longer there, the tablet's current server as the
master locates it; a token whose table was dropped, recreated or altered since
planning is refused (plan again).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from kudusql.common.errors import ProgrammingError
from kudusql.common.predicates import ColumnPredicate

__all__ = ["FORMAT_VERSION", "KIND", "RemoteScanToken"]

FORMAT_VERSION = 1
#: The ``kind`` of a cluster token (an embedded database's tokens have none).
KIND = "cluster"


@dataclass(frozen=True)
class RemoteScanToken:
    master: str
    table_id: str
    table_name: str
    schema_version: int
    tablet_id: str
    partition: str
    #: The tablet server that hosted the tablet at planning ("HOST:PORT").
    address: str
    columns: tuple[str, ...]
    predicates: tuple[ColumnPredicate, ...]
    snapshot: int
    key_lo: bytes | None = None
    key_hi: bytes | None = None

    def serialize(self) -> bytes:
        return json.dumps(
            {
                "v": FORMAT_VERSION,
                "kind": KIND,
                "master": self.master,
                "table_id": self.table_id,
                "table": self.table_name,
                "schema_version": self.schema_version,
                "tablet_id": self.tablet_id,
                "partition": self.partition,
                "tserver": self.address,
                "columns": list(self.columns),
                "predicates": [p.to_dict() for p in self.predicates],
                "snapshot": self.snapshot,
                "key_lo": None if self.key_lo is None else self.key_lo.hex(),
                "key_hi": None if self.key_hi is None else self.key_hi.hex(),
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def deserialize(cls, data: bytes | str) -> RemoteScanToken:
        try:
            d = json.loads(data)
            if not isinstance(d, dict):
                raise ProgrammingError("not a scan token: expected a JSON object")
            if d.get("kind") != KIND:
                raise ProgrammingError(
                    "this scan token was planned on an embedded database, not a cluster"
                    if "db" in d
                    else "not a cluster scan token"
                )
            if d.get("v") != FORMAT_VERSION:
                raise ProgrammingError(f"unsupported scan token version {d.get('v')!r}")
            return cls(
                str(d["master"]),
                str(d["table_id"]),
                str(d["table"]),
                int(d["schema_version"]),
                str(d["tablet_id"]),
                str(d["partition"]),
                str(d["tserver"]),
                tuple(str(c) for c in d["columns"]),
                tuple(ColumnPredicate.from_dict(p) for p in d["predicates"]),
                int(d["snapshot"]),
                None if d["key_lo"] is None else bytes.fromhex(d["key_lo"]),
                None if d["key_hi"] is None else bytes.fromhex(d["key_hi"]),
            )
        except (ValueError, KeyError, TypeError) as e:
            raise ProgrammingError(f"not a scan token: {e}") from e
