"""The master's catalog replicated across the masters (Kudu's SysCatalogTable as a
replicated tablet): a ``CatalogStore`` whose writes are Raft entries of one tablet, the
sys catalog, hosted by a ``TabletReplica`` over the catalog schema on every master.

A batch ``MasterState`` hands to ``write`` becomes one WRITE entry (UPSERT for a put,
DELETE_IGNORE for a delete) through the local replica, which must be the leader; it
returns once a majority of the masters has the entry in its log and it is applied to
the local catalog tablet. Every master applies every committed entry to its own
replica's tablet, so a master that becomes leader reads the whole catalog from it.

Invariants:

- the Raft peers are the masters' addresses as given in ``--masters`` (the peer uuid is
  the address): every master builds the same fixed configuration of voters from the same
  list, and no configuration change ever happens (no eviction either);
- ``write`` raises ``CatalogNotLeader`` when this master cannot replicate (not leader,
  or leader not ready), and ``CatalogWriteUncertain`` when the outcome is unknown or
  lost (no majority in time, a leader change): the caller then stops serving from its
  in-memory catalog and reloads it once its replica is a ready leader again;
- ``ready_leader`` holds when the replica leads and every entry of its log is applied
  here (its own term's first entry included), so a catalog read then has every
  committed write.

Directory: ``<master dir>/sys_catalog_raft`` is a ``TabletReplica`` directory
(``tserver/FORMAT.md``, "Tablet replica").
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator, Sequence

from kudusql.cluster.catalog.records import RecordKey
from kudusql.cluster.catalog.store import RecordWrite
from kudusql.cluster.master.catalog_table import OP_COLUMN, catalog_batch, catalog_schema
from kudusql.cluster.tserver.tablet_replica import (
    NotLeaderError,
    ReplicaOptions,
    TabletReplica,
    Transport,
)
from kudusql.common.errors import OperationalError, ProgrammingError
from kudusql.consensus.messages import ConsensusMessage
from kudusql.consensus.raft_config import RaftConfig
from kudusql.storage.consensus import ConsensusMetadataFile

__all__ = [
    "CATALOG_RAFT_DIR",
    "SYS_CATALOG_TABLET_ID",
    "CatalogNotLeader",
    "CatalogWriteUncertain",
    "ReplicatedSysCatalog",
]

#: The replicated catalog's directory inside the master's directory.
CATALOG_RAFT_DIR = "sys_catalog_raft"
#: The catalog tablet's id in consensus messages between masters.
SYS_CATALOG_TABLET_ID = "sys_catalog"


class CatalogNotLeader(OperationalError):
    """This master's catalog replica cannot replicate a write now; nothing was written."""

    def __init__(self, message: str, leader: str | None) -> None:
        super().__init__(message)
        self.leader = leader


class CatalogWriteUncertain(OperationalError):
    """A catalog write's outcome is unknown or it was lost to a leader change."""


class ReplicatedSysCatalog:
    """This master's replica of the sys catalog under ``directory`` (created on first
    open with the voters ``masters``; ``me`` is this master's entry); ``close`` it."""

    def __init__(
        self,
        directory: str,
        *,
        me: str,
        masters: Sequence[str],
        transport: Transport,
        options: ReplicaOptions | None = None,
        write_timeout_s: float = 5.0,
    ) -> None:
        if me not in masters:
            raise ProgrammingError(
                f"this master's address {me} is not in the masters list {','.join(masters)}"
            )
        self.me = me
        self.masters = tuple(masters)
        self.write_timeout_s = write_timeout_s
        path = os.path.join(os.path.abspath(directory), CATALOG_RAFT_DIR)
        opts = options or ReplicaOptions()
        if os.path.exists(os.path.join(path, "replica.meta")):
            config = ConsensusMetadataFile(os.path.join(path, "cmeta")).load().committed_config
            voters = set(config.voters) if config is not None else set()
            if voters != set(self.masters):
                raise ProgrammingError(
                    f"this master's catalog was created for the masters "
                    f"{','.join(sorted(voters))}, not {','.join(sorted(self.masters))}; "
                    "changing the masters is not supported"
                )
            self.replica = TabletReplica.open(
                path, transport=transport, options=opts, rng=random.Random()
            )
        else:
            self.replica = TabletReplica.create(
                path,
                uuid=me,
                tablet_id=SYS_CATALOG_TABLET_ID,
                schema=catalog_schema(),
                config=RaftConfig.of_voters(list(self.masters)),
                transport=transport,
                options=opts,
                rng=random.Random(),
            )

    def close(self) -> None:
        self.replica.close()

    def receive(self, message: ConsensusMessage) -> None:
        """A consensus message from another master."""
        self.replica.receive(message)

    @property
    def leader(self) -> str | None:
        """The leader master's address as this replica knows it (None: unknown)."""
        return self.replica.leader_uuid

    @property
    def role(self) -> str:
        return self.replica.role

    @property
    def term(self) -> int:
        return self.replica.term

    def ready_leader(self) -> bool:
        """Leader, with every entry of its log (its own term's first one included)
        committed and applied here."""
        r = self.replica
        return r.is_leader and r.applied_index >= r.last_opid.index

    def write(self, batch: Sequence[RecordWrite]) -> None:
        """Replicate ``batch`` as one entry; returns once a majority has it and it is
        applied here."""
        if not batch:
            return
        data = catalog_batch(dict(batch))  # a key written twice: the last write wins
        try:
            result = self.replica.write(data, op_column=OP_COLUMN, timeout_s=self.write_timeout_s)
        except NotLeaderError as exc:
            raise CatalogNotLeader(str(exc), exc.leader_uuid) from None
        except OperationalError as exc:
            raise CatalogWriteUncertain(
                f"the catalog change was not committed by a majority of the masters "
                f"({len(self.masters) // 2 + 1} of {len(self.masters)}) within "
                f"{self.write_timeout_s:g} s; a majority of the masters must be up "
                f"(it may still take effect): {exc}"
            ) from None
        if result.errors:
            raise OperationalError(
                f"the master's catalog refused a write: {result.errors[0].message}"
            )

    def scan(self) -> Iterator[tuple[RecordKey, bytes]]:
        """Every record applied here, in key order."""
        table = self.replica.tablet.scan(ordered=True).read_all()
        for entry_type, entry_id, value in zip(
            table.column("entry_type").to_pylist(),
            table.column("entry_id").to_pylist(),
            table.column("metadata").to_pylist(),
            strict=True,
        ):
            if entry_type is None or entry_id is None or value is None:
                continue
            yield (int(entry_type), str(entry_id)), str(value).encode()
