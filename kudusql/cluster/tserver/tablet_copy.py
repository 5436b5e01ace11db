"""Tablet copy over Flight (Kudu's tablet copy, the paper's "remote bootstrap"): the
wire form of one tablet replica's consistent state, served by the source (the leader)
and read by the destination.

The destination asks with a ``TabletCopyRequest`` do_get; the source answers one Arrow
stream whose schema metadata holds the header (the tablet's metadata as its superblock
entry has it, the source's current term and committed config, its committed index) and
whose rows are the source's whole consensus log, one entry per row in
``consensus_wire``'s form (FORMAT.md in this package, "Tablet copy"). The tablet is
derived from the log (no log GC yet), so the log is the whole copy.

Invariants: the header and the entries are one snapshot, taken under the source
replica's lock; the destination checks that the entries are the consecutive indexes
1..``last_index`` the header announces before it uses any of them, so a cut stream is
a failed copy, never a short log.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

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
from kudusql.consensus.raft_config import RaftConfig

__all__ = ["CopiedTablet", "TabletCopyRequest", "copy_stream", "fetch_copy"]

# DO NOT CHANGE: wire names (FORMAT.md).
HEADER_KEY = b"kudusql.tablet_copy"
ENTRY_COLUMN = "entry"
COPY_VERSION = 1
#: Entries per record batch of the stream.
_CHUNK = 512


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
class CopiedTablet:
    """What a tablet copy brings: the tablet's metadata, the source's term, committed
    config and committed index, and its whole log."""

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
    log: tuple[ReplicateMsg, ...]


def copy_stream(copy: CopiedTablet) -> pa.RecordBatchReader:
    """The source's answer: the header in the schema metadata, one entry per row."""
    header: dict[str, Any] = {
        "version": COPY_VERSION,
        "tablet_id": copy.tablet_id,
        "source_uuid": copy.source_uuid,
        "table_id": copy.table_id,
        "table_name": copy.table_name,
        "partition": copy.partition,
        "schema": copy.schema.to_dict(),
        "schema_version": copy.schema_version,
        "raft_peers": [{"uuid": u, "address": a} for u, a in copy.raft_peers],
        "current_term": copy.current_term,
        "committed_config": encode_config(copy.committed_config),
        "committed_index": copy.committed_index,
        "last_index": len(copy.log),
    }
    schema = pa.schema(
        [pa.field(ENTRY_COLUMN, pa.string(), False)],
        metadata={HEADER_KEY: json.dumps(header).encode()},
    )
    rows = [json.dumps(encode_entry(e)) for e in copy.log]
    batches = [
        pa.record_batch([pa.array(rows[i : i + _CHUNK], pa.string())], schema=schema)
        for i in range(0, len(rows), _CHUNK)
    ]
    return pa.RecordBatchReader.from_batches(schema, batches)


def fetch_copy(
    client: RpcClient, tablet_id: str, requester_uuid: str, *, timeout: float
) -> CopiedTablet:
    """Read a tablet copy from the source ``client`` talks to; ``MalformedMessage`` when
    the stream is not a whole, well-formed copy of ``tablet_id``."""
    table = client.get(TabletCopyRequest(tablet_id, requester_uuid), timeout=timeout)
    return parse_copy(table, tablet_id)


def parse_copy(table: pa.Table, tablet_id: str) -> CopiedTablet:
    where = f"tablet copy of {tablet_id}"
    raw = (table.schema.metadata or {}).get(HEADER_KEY)
    if raw is None:
        raise MalformedMessage(f"{where}: the stream has no header")
    try:
        h = json.loads(raw)
        if h["version"] != COPY_VERSION:
            raise MalformedMessage(
                f"{where}: version {h['version']} is not {COPY_VERSION}, the one this build reads"
            )
        entries = [
            decode_entry(json.loads(str(text)), f"{where}: entry {i + 1}")
            for i, text in enumerate(table.column(ENTRY_COLUMN).to_pylist())
        ]
        copy = CopiedTablet(
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
            log=tuple(entries),
        )
        last_index = int(h["last_index"])
    except (KeyError, TypeError, ValueError) as exc:
        raise MalformedMessage(f"{where}: bad header or entry: {exc}") from None
    _check_whole(copy, tablet_id, last_index, where)
    return copy


def _check_whole(copy: CopiedTablet, tablet_id: str, last_index: int, where: str) -> None:
    if copy.tablet_id != tablet_id:
        raise MalformedMessage(f"{where}: the source sent tablet {copy.tablet_id}")
    log: Sequence[ReplicateMsg] = copy.log
    if len(log) != last_index or any(e.id.index != i + 1 for i, e in enumerate(log)):
        raise MalformedMessage(
            f"{where}: the stream holds {len(log)} entries, not the consecutive 1..{last_index}"
            " the header announces"
        )
    if not 0 <= copy.committed_index <= last_index:
        raise MalformedMessage(f"{where}: committed index {copy.committed_index} is not in the log")
