"""The tablet server's superblock: the durable list of the tablets it hosts.

One small file, ``<dir>/tserver.meta`` (format: FORMAT.md), written whole and atomically
with the storage engine's metadata-file helper (temp file, fsync, rename, fsync the
directory), so a crash leaves the old list or the new one. It holds the server's uuid,
its incarnation (one more at every process start) and one entry per tablet: RUNNING
(hosted; its data in ``<dir>/tablets/<tablet_id>/``) or TOMBSTONED (deleted; the id is
never hosted again, so a late create of a deleted tablet cannot bring it back).

The superblock is the authority: a tablet directory it does not list as RUNNING is
removed at start (a create that crashed before listing it, or a delete that crashed
before removing its data).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

from kudusql.common.errors import CorruptionError
from kudusql.common.schema import Schema
from kudusql.storage.fs.meta_file import load_json, save_json

__all__ = ["RUNNING", "SUPERBLOCK_FILE", "TOMBSTONED", "Superblock", "TabletEntry"]

# DO NOT CHANGE: on-disk.
SUPERBLOCK_FILE = "tserver.meta"
_MAGIC = b"KSQLTSRV"
_VERSION = 1

RUNNING = "RUNNING"
TOMBSTONED = "TOMBSTONED"
_STATES = (RUNNING, TOMBSTONED)


@dataclass(frozen=True)
class TabletEntry:
    """One tablet replica this server hosts (RUNNING) or deleted (TOMBSTONED).

    ``schema`` and ``schema_version`` are the ones the master last asked for: the
    tablet's own superblock catches up with them at open when a crash came between.

    ``raft_peers`` (None: an unreplicated tablet) are the (uuid, address) of the voters
    of a replicated tablet: its directory is then a ``TabletReplica``'s, reopened as
    one, and the addresses are where its consensus messages go. The key is written
    only for a replicated tablet, so an unreplicated entry reads as before."""

    tablet_id: str
    table_id: str
    table_name: str
    partition: str
    schema: Schema
    schema_version: int
    state: str
    raft_peers: tuple[tuple[str, str], ...] | None = None
    #: A replicated tablet's tombstone: the last OpId (term, index) its replica logged,
    #: so a later tablet copy from a leader of an older term is refused (the rogue-leader
    #: rule). Written only when set.
    last_logged_opid: tuple[int, int] | None = None

    @property
    def replicated(self) -> bool:
        return self.raft_peers is not None

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["schema"] = self.schema.to_dict()
        if self.raft_peers is None:
            del d["raft_peers"]
        else:
            d["raft_peers"] = [{"uuid": u, "address": a} for u, a in self.raft_peers]
        if self.last_logged_opid is None:
            del d["last_logged_opid"]
        else:
            d["last_logged_opid"] = list(self.last_logged_opid)
        return d

    def with_state(self, state: str, schema: Schema | None = None, version: int = 0) -> TabletEntry:
        """This entry in ``state`` (with ``schema`` at ``version`` when given)."""
        if schema is None:
            return dataclasses.replace(self, state=state)
        return dataclasses.replace(self, state=state, schema=schema, schema_version=version)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TabletEntry:
        entry = cls(
            tablet_id=str(d["tablet_id"]),
            table_id=str(d["table_id"]),
            table_name=str(d["table_name"]),
            partition=str(d["partition"]),
            schema=Schema.from_dict(d["schema"]),
            schema_version=int(d["schema_version"]),
            state=str(d["state"]),
            raft_peers=(
                None
                if d.get("raft_peers") is None
                else tuple((str(p["uuid"]), str(p["address"])) for p in d["raft_peers"])
            ),
            last_logged_opid=(
                None
                if d.get("last_logged_opid") is None
                else (int(d["last_logged_opid"][0]), int(d["last_logged_opid"][1]))
            ),
        )
        if entry.state not in _STATES:
            raise ValueError(f"unknown tablet state {entry.state!r}")
        return entry


@dataclass(frozen=True)
class Superblock:
    """The whole file: immutable; a change is a new value, saved whole."""

    server_uuid: str
    incarnation: int
    tablets: tuple[TabletEntry, ...] = ()

    def entry(self, tablet_id: str) -> TabletEntry | None:
        for e in self.tablets:
            if e.tablet_id == tablet_id:
                return e
        return None

    def with_entry(self, entry: TabletEntry) -> Superblock:
        """This superblock with ``entry`` added, or replacing the one of its id."""
        rest = tuple(e for e in self.tablets if e.tablet_id != entry.tablet_id)
        return dataclasses.replace(self, tablets=(*rest, entry))

    @staticmethod
    def path(directory: str) -> str:
        return os.path.join(directory, SUPERBLOCK_FILE)

    def save(self, directory: str) -> None:
        body = {
            "server_uuid": self.server_uuid,
            "incarnation": self.incarnation,
            "tablets": [e.to_dict() for e in self.tablets],
        }
        save_json(self.path(directory), _MAGIC, _VERSION, body)

    @classmethod
    def load(cls, directory: str) -> Superblock | None:
        """The saved superblock, or None when the directory has none (a new server)."""
        path = cls.path(directory)
        if not os.path.exists(path):
            return None
        body = load_json(path, _MAGIC, _VERSION, "tablet server superblock")
        try:
            return cls(
                server_uuid=str(body["server_uuid"]),
                incarnation=int(body["incarnation"]),
                tablets=tuple(TabletEntry.from_dict(t) for t in body["tablets"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptionError(path, 0, f"bad tablet server superblock: {exc}") from None
