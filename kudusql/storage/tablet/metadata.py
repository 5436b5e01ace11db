"""The tablet superblock: the durable list of a tablet's DiskRowSets and counters.

Stored as ``tablet.meta``: a magic and version header, a JSON body and a CRC-32 of the
body; replaced atomically (write a temp file, fsync, rename, fsync the directory)
after every flush, so a reader finds either the old or the new set of rowsets.
See ``FORMAT.md``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from kudusql.common.errors import CorruptionError, OperationalError
from kudusql.common.schema import Schema
from kudusql.storage.fs.meta_file import encode_with_lists, load_json, save_encoded
from kudusql.storage.tablet.diskrowset import RowSetMeta

# DO NOT CHANGE: on-disk.
META_FILE = "tablet.meta"
MAGIC = b"KSQLTBM1"
VERSION = 1


@dataclass
class TabletMeta:
    schema: Schema
    rowsets: list[RowSetMeta] = field(default_factory=list)
    next_rowset_id: int = 0
    last_durable_mrs_id: int = -1
    next_seq: int = 0
    max_ts: int = 0
    history_max_age_s: float | None = None
    #: Rowsets a bulk-loaded part of a multi-tablet transaction wrote, by rowset id, with
    #: the transaction's timestamp: listed before the transaction commits, kept at the
    #: next load only if it committed (then untagged), else dropped.
    txn_rowsets: dict[int, int] = field(default_factory=dict)
    #: (wall-clock seconds, seq): at that time every WAL record up to seq was durable
    #: (log GC across sessions: ``Tablet._seed_log_gc``); oldest first, a few entries.
    wal_gc_marks: list[tuple[float, int]] = field(default_factory=list)
    #: The largest ``auto_incrementing_id`` handed out when this superblock was saved
    #: (a non-unique primary key): at least every id in the listed rowsets.
    auto_incrementing_counter: int = 0

    def to_json(self) -> dict[str, Any]:
        return {**self._own_json(), "rowsets": [r.to_dict() for r in self.rowsets]}

    def _own_json(self) -> dict[str, Any]:
        """Every field but the rowsets."""
        return {
            "schema": self.schema.to_dict(),
            "next_rowset_id": self.next_rowset_id,
            "last_durable_mrs_id": self.last_durable_mrs_id,
            "next_seq": self.next_seq,
            "max_ts": self.max_ts,
            "history_max_age_s": self.history_max_age_s,
            "txn_rowsets": {str(k): v for k, v in self.txn_rowsets.items()},
            "wal_gc_marks": [[t, seq] for t, seq in self.wal_gc_marks],
            **(
                {"auto_incrementing_counter": self.auto_incrementing_counter}
                if self.auto_incrementing_counter
                else {}
            ),
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
            {int(k): int(v) for k, v in d.get("txn_rowsets", {}).items()},
            # absent in superblocks written before it existed
            [(float(t), int(seq)) for t, seq in d.get("wal_gc_marks", [])],
            # absent when no id was ever handed out, and before non-unique keys existed
            int(d.get("auto_incrementing_counter", 0)),
        )

    def json_text(self) -> str:
        """``to_json`` encoded, with the rowsets' delta file entries encoded once each
        (``RowSetMeta.json_text``): a save after every flush and compaction re-encoded
        them all, ~5 ms at 170 rowsets and 1,100 REDO files."""
        return encode_with_lists(
            self._own_json(), {"rowsets": [r.json_text() for r in self.rowsets]}
        )


def save(tablet_dir: str, meta: TabletMeta, *, sync: bool = True) -> None:
    path = os.path.join(tablet_dir, META_FILE)
    save_encoded(path, MAGIC, VERSION, meta.json_text().encode(), sync=sync)


def load(tablet_dir: str) -> TabletMeta:
    path = os.path.join(tablet_dir, META_FILE)
    if not os.path.exists(path):
        raise OperationalError(f"no tablet at {tablet_dir} (missing {META_FILE})")
    body = load_json(path, MAGIC, VERSION, "tablet metadata")
    try:
        return TabletMeta.from_json(body)
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptionError(path, 0, f"unreadable tablet metadata: {e}") from e
