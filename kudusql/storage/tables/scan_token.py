"""Scan tokens: a table scan cut into serializable pieces, each runnable elsewhere.

A token names the database, the table (by id, with its schema version), one tablet, a
range of encoded primary keys ``[key_lo, key_hi)`` inside it, the projection, the
predicates and the snapshot fixed when the tokens were planned, so every piece reads the
same state wherever and whenever it runs (within the history the database keeps).
Planning prunes tablets with the predicates and cuts a tablet larger than the split size
at DiskRowSet key bounds. A token serializes to JSON bytes; ``execute`` opens the
database read-only when no open one is passed (another process, a Spark task), and
refuses to run against a table that was dropped or altered since planning.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from kudusql.common.errors import ProgrammingError
from kudusql.common.predicates import ColumnPredicate
from kudusql.storage.tables.pruning import prune_partitions
from kudusql.storage.tablet.tablet import Tablet

if TYPE_CHECKING:
    from kudusql.storage.tables.database import Database
    from kudusql.storage.tables.table import Table

FORMAT_VERSION = 1


@dataclass(frozen=True)
class ScanToken:
    db_path: str
    table_id: int
    table_name: str
    schema_version: int
    tablet_id: int
    partition: str
    columns: tuple[str, ...]
    predicates: tuple[ColumnPredicate, ...]
    snapshot: int
    key_lo: bytes | None
    key_hi: bytes | None
    #: Estimated bytes on disk and in memory the piece reads (for scheduling).
    size_bytes: int

    def serialize(self) -> bytes:
        return json.dumps(
            {
                "v": FORMAT_VERSION,
                "db": self.db_path,
                "table_id": self.table_id,
                "table": self.table_name,
                "schema_version": self.schema_version,
                "tablet_id": self.tablet_id,
                "partition": self.partition,
                "columns": list(self.columns),
                "predicates": [p.to_dict() for p in self.predicates],
                "snapshot": self.snapshot,
                "key_lo": None if self.key_lo is None else self.key_lo.hex(),
                "key_hi": None if self.key_hi is None else self.key_hi.hex(),
                "size_bytes": self.size_bytes,
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def deserialize(cls, data: bytes | str) -> ScanToken:
        try:
            d = json.loads(data)
            if not isinstance(d, dict):
                raise ProgrammingError("not a scan token: expected a JSON object")
            if d.get("kind") is not None:
                raise ProgrammingError(
                    f"this scan token was planned on a {d['kind']}, not an embedded database"
                )
            if d.get("v") != FORMAT_VERSION:
                raise ProgrammingError(f"unsupported scan token version {d.get('v')!r}")
            return cls(
                d["db"],
                int(d["table_id"]),
                d["table"],
                int(d["schema_version"]),
                int(d["tablet_id"]),
                d["partition"],
                tuple(d["columns"]),
                tuple(ColumnPredicate.from_dict(p) for p in d["predicates"]),
                int(d["snapshot"]),
                None if d["key_lo"] is None else bytes.fromhex(d["key_lo"]),
                None if d["key_hi"] is None else bytes.fromhex(d["key_hi"]),
                int(d["size_bytes"]),
            )
        except (ValueError, KeyError, TypeError) as e:
            raise ProgrammingError(f"not a scan token: {e}") from e

    def execute(self, db: Database | None = None, *, ordered: bool = False) -> pa.RecordBatchReader:
        """The rows of this piece (in primary-key order with ``ordered``). Without ``db``
        the database is opened read-only for the duration of the scan (and closed when
        the reader is exhausted)."""
        from kudusql.storage.tables.database import Database

        own = db is None
        if db is None:
            db = Database(self.db_path, read_only=True)
        try:
            reader = self._scan(db, ordered)
        except BaseException:
            if own:
                db.close()
            raise
        if not own:
            return reader

        def closing() -> Iterator[pa.RecordBatch]:
            try:
                yield from reader
            finally:
                db.close()

        return pa.RecordBatchReader.from_batches(reader.schema, closing())

    def _scan(self, db: Database, ordered: bool) -> pa.RecordBatchReader:
        try:
            rt = db._runtime(self.table_id)
        except ProgrammingError:
            raise ProgrammingError(
                f"table {self.table_name!r} was dropped after the scan was planned"
            ) from None
        if rt.meta.schema_version != self.schema_version:
            raise ProgrammingError(
                f"table {self.table_name!r} was altered after the scan was planned "
                f"(schema version {self.schema_version} -> {rt.meta.schema_version}); "
                "plan the scan again"
            )
        slots = [i for i, t in enumerate(rt.meta.tablets) if t.id == self.tablet_id]
        if not slots:
            raise ProgrammingError(
                f"tablet {self.tablet_id} of {self.table_name!r} ({self.partition}) was "
                "dropped after the scan was planned"
            )
        tablet = rt.tablet(slots[0])
        db.snapshot(self.snapshot)
        return tablet.scan(
            list(self.columns),
            list(self.predicates),
            snapshot=self.snapshot,
            ordered=ordered,
            key_range=(self.key_lo, self.key_hi),
        )


def plan_scan_tokens(
    table: Table,
    columns: Sequence[str] | None,
    predicates: Sequence[ColumnPredicate],
    snapshot: int | None,
    split_size_bytes: int | None,
    *,
    key_range: tuple[bytes | None, bytes | None] = (None, None),
) -> list[ScanToken]:
    """One token per tablet the predicates keep, more where a tablet exceeds
    ``split_size_bytes``; all at one snapshot (the latest unless given). Each token's
    key range is cut to ``key_range`` (encoded keys ``[lo, hi)``); a piece left empty
    by it is dropped."""
    if split_size_bytes is not None and split_size_bytes <= 0:
        raise ProgrammingError("the split size must be positive")
    rt = table._rt()
    meta = rt.meta
    schema = meta.schema
    names = tuple(schema.names if columns is None else columns)
    for c in names:
        schema.index_of(c)
    preds = tuple(p.bind(schema) for p in predicates)
    snap = table.db.snapshot(snapshot)
    tokens = []
    for slot in prune_partitions(meta.partition_schema, schema, rt.partitions, preds):
        entry = meta.tablets[slot]
        desc = rt.partitions[slot].describe(meta.partition_schema)
        for lo, hi, size in split_tablet(rt.tablet(slot), split_size_bytes):
            lo, hi = _intersect((lo, hi), key_range)
            if lo is not None and hi is not None and lo >= hi:
                continue
            tokens.append(
                ScanToken(
                    table.db.path,
                    meta.id,
                    meta.name,
                    meta.schema_version,
                    entry.id,
                    desc,
                    names,
                    preds,
                    snap,
                    lo,
                    hi,
                    size,
                )
            )
    return tokens


def _intersect(
    a: tuple[bytes | None, bytes | None], b: tuple[bytes | None, bytes | None]
) -> tuple[bytes | None, bytes | None]:
    """The intersection of two encoded key ranges ``[lo, hi)`` (None: unbounded)."""
    los = [x for x in (a[0], b[0]) if x is not None]
    his = [x for x in (a[1], b[1]) if x is not None]
    return (max(los) if los else None, min(his) if his else None)


def split_tablet(
    tablet: Tablet, split_size_bytes: int | None
) -> list[tuple[bytes | None, bytes | None, int]]:
    """Key ranges ``[lo, hi)`` covering the tablet, each about ``split_size_bytes``: the
    DiskRowSets by lower key bound are accumulated and a range is cut at the lower bound
    of the rowset that takes it past the size (rowsets overlap, so sizes are estimates)."""
    info = tablet.rowsets_info()
    mem = sum(int(r["bytes"]) for r in info if r["kind"] == "memrowset")
    disk: list[tuple[bytes, int]] = sorted(
        (bytes.fromhex(r["min_key"]), int(r["base_bytes"]) + _delta_bytes(r))
        for r in info
        if r["kind"] == "diskrowset" and r["rows"]
    )
    total = mem + sum(s for _, s in disk)
    if split_size_bytes is None or total <= split_size_bytes or len(disk) < 2:
        return [(None, None, total)]
    cuts: list[tuple[bytes, int]] = []
    acc = mem
    for min_key, size in disk:
        if acc >= split_size_bytes and (not cuts or min_key > cuts[-1][0]):
            cuts.append((min_key, acc))
            acc = 0
        acc += size
    bounds: list[bytes | None] = [None, *(k for k, _ in cuts), None]
    sizes = [s for _, s in cuts] + [acc]
    return [(bounds[i], bounds[i + 1], sizes[i]) for i in range(len(sizes))]


def _delta_bytes(r: dict[str, Any]) -> int:
    return int(r.get("redo_bytes", 0)) + int(r.get("undo_bytes", 0))
