"""Tablet copy over Flight (Kudu's tablet copy, the paper's "remote bootstrap"): the
wire form of one tablet replica's consistent state, served by the source (the leader)
and read by the destination.

The destination asks with a ``TabletCopyRequest`` do_get; the source answers one Arrow
stream (FORMAT.md in this package, "Tablet copy", version 2). Its schema metadata holds
the header: the tablet's metadata as its superblock entry has it, the source's current
term, committed config and committed index, the consensus log's base (the OpId before
the first copied entry) and last index, and every storage tablet file the copy ships
with its size. The rows are the files' bytes in chunks (at most ``CHUNK_BYTES`` each,
one chunk per record batch, in the header's order), each file closed by a row with its
CRC32, then the log entries after the base, in ``consensus_wire``'s form.

Invariants: the header, the files and the entries are one snapshot of the source (its
``TabletReplica.copy_snapshot``); the source streams from files it opened within that
snapshot, so its later flushes, compactions and log GC change nothing of the copy. The
destination (``receive_copy``) writes each file into a staging directory, in bounded
memory, and checks its size and CRC32 before it counts; it uses nothing unless every
listed file arrived whole and the entries are the consecutive ``base + 1 ..
last_index``, so a cut or corrupted stream is a failed copy naming what was wrong,
never a short tablet or log.
"""

from __future__ import annotations

import json
import os
import weakref
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any, ClassVar

import pyarrow as pa

from kudusql.cluster.errors import MalformedMessage
from kudusql.cluster.messages import GetResponse, Request, Response, message
from kudusql.cluster.rpc_client import RpcClient
from kudusql.cluster.tserver.consensus_wire import (
    decode_config,
    decode_entry,
    encode_config,
    encode_entry,
)
from kudusql.common.schema import Schema
from kudusql.consensus.messages import ReplicateMsg
from kudusql.consensus.opid import OpId
from kudusql.consensus.raft_config import RaftConfig
from kudusql.storage.fs.files import fsync_dir

__all__ = [
    "CopyHeader",
    "CopySnapshot",
    "TabletCopyRequest",
    "copy_stream",
    "open_copy",
    "parse_header",
    "receive_copy",
]

# DO NOT CHANGE: wire names (FORMAT.md).
HEADER_KEY = b"kudusql.tablet_copy"
COPY_VERSION = 2
KIND, PATH, DATA, CRC32, ENTRY = "kind", "path", "data", "crc32", "entry"
CHUNK, FILE_END, LOG_ENTRY = "chunk", "file", "entry"
#: Largest chunk of a file in one row (and one record batch).
CHUNK_BYTES = 1 << 20
#: Entries per record batch of the stream.
_ENTRIES_PER_BATCH = 512

_FIELDS: list[pa.Field[Any]] = [
    pa.field(KIND, pa.string(), False),
    pa.field(PATH, pa.string()),
    pa.field(DATA, pa.binary()),
    pa.field(CRC32, pa.int64()),
    pa.field(ENTRY, pa.string()),
]
STREAM_SCHEMA = pa.schema(_FIELDS)


@message("tserver_tablet_copy")
@dataclass(frozen=True)
class TabletCopyRequest(Request):
    """Begin a tablet copy: the source's consistent state of ``tablet_id`` as one stream
    (read-only on the source, so idempotent)."""

    RESPONSE: ClassVar[type[Response]] = GetResponse
    IDEMPOTENT: ClassVar[bool] = True
    tablet_id: str
    requester_uuid: str


@dataclass(frozen=True)
class CopyHeader:
    """What a tablet copy brings besides the bytes: the tablet's metadata, the source's
    term, committed config and committed index, the copied log's base and last index,
    and the storage tablet's files (path relative to the tablet directory, size)."""

    tablet_id: str
    source_uuid: str
    table_id: str
    table_name: str
    partition: str
    schema: Schema
    schema_version: int
    #: (uuid, address) of the peers the source knows, itself among them.
    raft_peers: tuple[tuple[str, str], ...]
    current_term: int
    committed_config: RaftConfig
    committed_index: int
    log_base: OpId
    last_index: int
    files: tuple[tuple[str, int], ...]


@dataclass
class CopySnapshot:
    """The source side: the header, the open files (in the header's order, each read up
    to its listed size) and the log entries after the base. ``close`` closes the files."""

    header: CopyHeader
    entries: tuple[ReplicateMsg, ...]
    files: list[IO[bytes]] = field(default_factory=list)

    def close(self) -> None:
        for f in self.files:
            f.close()


def _encode_header(h: CopyHeader) -> bytes:
    body: dict[str, Any] = {
        "version": COPY_VERSION,
        "tablet_id": h.tablet_id,
        "source_uuid": h.source_uuid,
        "table_id": h.table_id,
        "table_name": h.table_name,
        "partition": h.partition,
        "schema": h.schema.to_dict(),
        "schema_version": h.schema_version,
        "raft_peers": [{"uuid": u, "address": a} for u, a in h.raft_peers],
        "current_term": h.current_term,
        "committed_config": encode_config(h.committed_config),
        "committed_index": h.committed_index,
        "log_base": {"term": h.log_base.term, "index": h.log_base.index},
        "last_index": h.last_index,
        "files": [{"path": p, "size": s} for p, s in h.files],
    }
    return json.dumps(body).encode()


def copy_stream(snapshot: CopySnapshot, chunk_bytes: int = CHUNK_BYTES) -> pa.RecordBatchReader:
    """The source's answer, produced as it is read (one chunk in memory at a time); the
    snapshot's files are closed at its end, or when the reader is dropped."""
    schema = STREAM_SCHEMA.with_metadata({HEADER_KEY: _encode_header(snapshot.header)})

    def batch(kind: str, path: str | None, data: bytes | None, crc: int | None) -> pa.RecordBatch:
        return pa.record_batch(
            [
                pa.array([kind], pa.string()),
                pa.array([path], pa.string()),
                pa.array([data], pa.binary()),
                pa.array([crc], pa.int64()),
                pa.array([None], pa.string()),
            ],
            schema=schema,
        )

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            for (path, size), f in zip(snapshot.header.files, snapshot.files, strict=True):
                crc, left = 0, size
                while left > 0:
                    data = f.read(min(chunk_bytes, left))
                    if not data:
                        break  # the receiver reports the short file
                    crc = zlib.crc32(data, crc)
                    left -= len(data)
                    yield batch(CHUNK, path, data, None)
                yield batch(FILE_END, path, None, crc)
            rows = [json.dumps(encode_entry(e)) for e in snapshot.entries]
            for i in range(0, len(rows), _ENTRIES_PER_BATCH):
                part = rows[i : i + _ENTRIES_PER_BATCH]
                n = len(part)
                yield pa.record_batch(
                    [
                        pa.array([LOG_ENTRY] * n, pa.string()),
                        pa.nulls(n, pa.string()),
                        pa.nulls(n, pa.binary()),
                        pa.nulls(n, pa.int64()),
                        pa.array(part, pa.string()),
                    ],
                    schema=schema,
                )
        finally:
            snapshot.close()

    gen = batches()
    # A stream dropped before its first batch never runs the generator's ``finally``.
    weakref.finalize(gen, snapshot.close)
    return pa.RecordBatchReader.from_batches(schema, gen)


def open_copy(
    client: RpcClient, tablet_id: str, requester_uuid: str, *, timeout: float
) -> tuple[CopyHeader, pa.RecordBatchReader]:
    """Open a tablet copy from the source ``client`` talks to: its header and the
    stream's batches as they arrive (``timeout`` bounds the whole stream)."""
    reader = client.stream(TabletCopyRequest(tablet_id, requester_uuid), timeout=timeout)
    return parse_header(reader.schema, tablet_id), reader


def parse_header(schema: pa.Schema, tablet_id: str) -> CopyHeader:
    """The header of a copy stream of ``tablet_id``; ``MalformedMessage`` when it is
    missing, of another version or another tablet, or malformed."""
    where = f"tablet copy of {tablet_id}"
    raw = (schema.metadata or {}).get(HEADER_KEY)
    if raw is None:
        raise MalformedMessage(f"{where}: the stream has no header")
    try:
        h = json.loads(raw)
        version = h["version"]
        if version == 1:
            raise MalformedMessage(
                f"{where}: the source sent version 1 (the whole consensus log, no data "
                f"files), from an older build; this build reads version {COPY_VERSION} "
                "only: upgrade the source tablet server"
            )
        if version != COPY_VERSION:
            raise MalformedMessage(
                f"{where}: version {version} is not {COPY_VERSION}, the one this build reads"
            )
        header = CopyHeader(
            tablet_id=str(h["tablet_id"]),
            source_uuid=str(h["source_uuid"]),
            table_id=str(h["table_id"]),
            table_name=str(h["table_name"]),
            partition=str(h["partition"]),
            schema=Schema.from_dict(h["schema"]),
            schema_version=int(h["schema_version"]),
            raft_peers=tuple((str(p["uuid"]), str(p["address"])) for p in h["raft_peers"]),
            current_term=int(h["current_term"]),
            committed_config=decode_config(h["committed_config"], f"{where}: committed config"),
            committed_index=int(h["committed_index"]),
            log_base=OpId(int(h["log_base"]["term"]), int(h["log_base"]["index"])),
            last_index=int(h["last_index"]),
            files=tuple((str(f["path"]), int(f["size"])) for f in h["files"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise MalformedMessage(f"{where}: bad header: {exc}") from None
    if header.tablet_id != tablet_id:
        raise MalformedMessage(f"{where}: the source sent tablet {header.tablet_id}")
    base = header.log_base.index
    if not 0 <= base <= header.last_index or not base <= header.committed_index:
        raise MalformedMessage(
            f"{where}: the log base {base} is not within the committed index "
            f"{header.committed_index} and the last index {header.last_index}"
        )
    if header.committed_index > header.last_index:
        raise MalformedMessage(
            f"{where}: committed index {header.committed_index} is not in the log"
        )
    for path, _ in header.files:
        parts = path.split("/")
        if path.startswith("/") or ".." in parts or "" in parts:
            raise MalformedMessage(f"{where}: file path {path!r} is not within the tablet")
    return header


def receive_copy(
    header: CopyHeader, batches: Iterable[pa.RecordBatch], staging_dir: str
) -> list[ReplicateMsg]:
    """Write the stream's files under ``staging_dir`` (created empty; each file checked
    against its size and CRC32, fsynced, the directories too) and return the entries;
    ``MalformedMessage`` naming the file or entry at fault."""
    where = f"tablet copy of {header.tablet_id}"
    os.makedirs(staging_dir)
    expected = list(header.files)
    done = 0
    current: IO[bytes] | None = None
    written = crc = 0
    entries: list[ReplicateMsg] = []
    made_dirs: set[str] = {staging_dir}

    def begin(path: str) -> IO[bytes]:
        full = os.path.join(staging_dir, path)
        parent = os.path.dirname(full)
        if parent not in made_dirs:
            os.makedirs(parent, exist_ok=True)
            made_dirs.add(parent)
        return open(full, "xb")

    try:
        for rb in batches:
            kinds = rb.column(KIND).to_pylist()
            for i, kind in enumerate(kinds):
                if kind == LOG_ENTRY:
                    if done != len(expected):
                        raise MalformedMessage(f"{where}: log entries before the last file")
                    text = rb.column(ENTRY)[i].as_py()
                    n = header.log_base.index + len(entries) + 1
                    entries.append(decode_entry(json.loads(str(text)), f"{where}: entry {n}"))
                    continue
                path = rb.column(PATH)[i].as_py()
                if done >= len(expected) or path != expected[done][0]:
                    raise MalformedMessage(
                        f"{where}: file {path!r} arrived out of the header's order"
                    )
                if kind == CHUNK:
                    if current is None:
                        current, written, crc = begin(path), 0, 0
                    data = rb.column(DATA)[i].as_py() or b""
                    written += len(data)
                    if written > expected[done][1]:
                        raise MalformedMessage(
                            f"{where}: file {path} is longer than its {expected[done][1]} bytes"
                        )
                    crc = zlib.crc32(data, crc)
                    current.write(data)
                elif kind == FILE_END:
                    if current is None:
                        current, written, crc = begin(path), 0, 0
                    size = expected[done][1]
                    sent_crc = rb.column(CRC32)[i].as_py()
                    if written != size:
                        raise MalformedMessage(
                            f"{where}: file {path} arrived with {written} bytes, not {size}"
                        )
                    if sent_crc != crc:
                        raise MalformedMessage(
                            f"{where}: file {path} failed its checksum (CRC32 {crc:08x} "
                            f"received, {int(sent_crc or 0):08x} sent): corrupted in transit"
                        )
                    current.flush()
                    os.fsync(current.fileno())
                    current.close()
                    current = None
                    done += 1
                else:
                    raise MalformedMessage(f"{where}: unknown row kind {kind!r}")
    except (TypeError, ValueError) as exc:
        raise MalformedMessage(f"{where}: bad row: {exc}") from None
    finally:
        if current is not None:
            current.close()
    if done != len(expected):
        missing = expected[done][0]
        raise MalformedMessage(
            f"{where}: the stream ended before file {missing} ({done} of "
            f"{len(expected)} files arrived)"
        )
    last = header.log_base.index + len(entries)
    if last != header.last_index or any(
        e.id.index != header.log_base.index + 1 + i for i, e in enumerate(entries)
    ):
        raise MalformedMessage(
            f"{where}: the stream holds {len(entries)} entries, not the consecutive "
            f"{header.log_base.index + 1}..{header.last_index} the header announces"
        )
    for d in sorted(made_dirs, key=len, reverse=True):
        fsync_dir(d)
    return entries
