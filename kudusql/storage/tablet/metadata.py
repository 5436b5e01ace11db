"""The tablet superblock: the durable list of a tablet's DiskRowSets and counters.

Stored as ``tablet.meta``: a magic and version header, a JSON body and a CRC-32 of the
body; replaced atomically (write a temp file, fsync, rename, fsync the directory)
after every flush, so a reader finds either the old or the new set of rowsets.
See ``FORMAT.md``.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass, field
from typing import Any

from kudusql.common.errors import CorruptionError, OperationalError
from kudusql.common.schema import Schema
from kudusql.storage.fs.checksum import crc32, verify
from kudusql.storage.fs.files import write_file_atomic
from kudusql.storage.tablet.diskrowset import RowSetMeta

# DO NOT CHANGE: on-disk.
META_FILE = "tablet.meta"
MAGIC = b"KSQLTBM1"
VERSION = 1
_HEADER = struct.Struct("<8sIII")  # magic, version, body length, body crc32


@dataclass
class TabletMeta:
    schema: Schema
    rowsets: list[RowSetMeta] = field(default_factory=list)
    next_rowset_id: int = 0
    last_durable_mrs_id: int = -1
    next_seq: int = 0
    max_ts: int = 0
    history_max_age_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": self.schema.to_dict(),
            "rowsets": [r.to_dict() for r in self.rowsets],
            "next_rowset_id": self.next_rowset_id,
            "last_durable_mrs_id": self.last_durable_mrs_id,
            "next_seq": self.next_seq,
            "max_ts": self.max_ts,
            "history_max_age_s": self.history_max_age_s,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TabletMeta:
        return cls(
            Schema.from_dict(d["schema"]),
            [RowSetMeta.from_dict(r) for r in d["rowsets"]],
            d["next_rowset_id"],
            d["last_durable_mrs_id"],
            d["next_seq"],
            d["max_ts"],
            d.get("history_max_age_s"),
        )


def save(tablet_dir: str, meta: TabletMeta, *, sync: bool = True) -> None:
    body = json.dumps(meta.to_json(), separators=(",", ":")).encode()
    data = _HEADER.pack(MAGIC, VERSION, len(body), crc32(body)) + body
    write_file_atomic(os.path.join(tablet_dir, META_FILE), data, sync=sync)


def load(tablet_dir: str) -> TabletMeta:
    path = os.path.join(tablet_dir, META_FILE)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise OperationalError(f"no tablet at {tablet_dir} (missing {META_FILE})") from None
    if len(data) < _HEADER.size:
        raise CorruptionError(path, 0, "tablet metadata too short")
    magic, version, length, crc = _HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise CorruptionError(path, 0, "bad tablet metadata magic")
    if version != VERSION:
        raise CorruptionError(path, 8, f"unsupported tablet metadata version {version}")
    body = data[_HEADER.size :]
    if len(body) != length:
        raise CorruptionError(path, _HEADER.size, "tablet metadata length mismatch (truncated?)")
    verify(body, crc, path, _HEADER.size, "tablet metadata")
    try:
        return TabletMeta.from_json(json.loads(body))
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptionError(path, _HEADER.size, f"unreadable tablet metadata: {e}") from e
