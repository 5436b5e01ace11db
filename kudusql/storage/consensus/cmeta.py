"""Owns the consensus metadata file of one tablet replica (Kudu's cmeta).

``ConsensusMetadataFile`` stores a ``ConsensusMetadata`` (current term, vote, committed
config, data state, a tombstone's last-logged OpId) as a small metadata file: a magic,
a version and a CRC-32 before a JSON body, replaced whole (temporary file, fsync,
rename, directory fsync) so a crash leaves the old file or the new one. The layout is in
FORMAT.md beside this file.
"""

from __future__ import annotations

import os
from typing import Any

from kudusql.common.errors import CorruptionError
from kudusql.consensus.opid import OpId
from kudusql.consensus.raft_config import MemberType, RaftConfig, RaftPeer
from kudusql.consensus.raft_consensus import ConsensusMetadata, DataState
from kudusql.storage.fs.meta_file import load_json, save_json

# DO NOT CHANGE: on-disk (FORMAT.md).
CMETA_MAGIC = b"KSQLCMET"
CMETA_VERSION = 1


def encode_config(config: RaftConfig) -> dict[str, Any]:
    return {
        "opid_index": config.opid_index,
        "peers": [
            {"uuid": p.uuid, "member_type": p.member_type.value, "promote": p.promote}
            for p in config.peers
        ],
    }


def decode_config(body: dict[str, Any]) -> RaftConfig:
    peers = tuple(
        RaftPeer(p["uuid"], MemberType(p["member_type"]), bool(p["promote"])) for p in body["peers"]
    )
    return RaftConfig(peers, int(body["opid_index"]))


def encode_metadata(meta: ConsensusMetadata) -> dict[str, Any]:
    opid = meta.tombstone_last_logged_opid
    config = meta.committed_config
    return {
        "current_term": meta.current_term,
        "voted_for": meta.voted_for,
        "committed_config": None if config is None else encode_config(config),
        "data_state": meta.data_state.value,
        "tombstone_last_logged_opid": None if opid is None else [opid.term, opid.index],
    }


def decode_metadata(body: dict[str, Any]) -> ConsensusMetadata:
    """The metadata of a JSON body (KeyError, TypeError or ValueError if malformed)."""
    config = body["committed_config"]
    opid = body["tombstone_last_logged_opid"]
    voted_for = body["voted_for"]
    if voted_for is not None and not isinstance(voted_for, str):
        raise TypeError(f"voted_for {voted_for!r} is not a uuid")
    return ConsensusMetadata(
        int(body["current_term"]),
        voted_for,
        None if config is None else decode_config(config),
        DataState(body["data_state"]),
        None if opid is None else OpId(int(opid[0]), int(opid[1])),
    )


class ConsensusMetadataFile:
    """The cmeta file of one replica at ``path``."""

    def __init__(self, path: str) -> None:
        self.path = path

    def exists(self) -> bool:
        return os.path.exists(self.path)

    def store(self, meta: ConsensusMetadata) -> None:
        """Replace the file with ``meta``, durably (OperationalError on an IO error;
        the old file then stays)."""
        save_json(self.path, CMETA_MAGIC, CMETA_VERSION, encode_metadata(meta))

    def load(self) -> ConsensusMetadata:
        """The stored metadata; OperationalError if the file is missing, CorruptionError
        (naming the file) if it fails a check."""
        body = load_json(self.path, CMETA_MAGIC, CMETA_VERSION, "consensus metadata")
        try:
            return decode_metadata(body)
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise CorruptionError(self.path, 20, f"malformed consensus metadata: {e!r}") from e
