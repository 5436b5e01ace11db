"""The tablets one tablet server hosts (Kudu's ``TSTabletManager``).

``TabletManager`` owns the server's directory: the superblock (``superblock.py``), one
storage-engine tablet per RUNNING replica under ``tablets/<tablet_id>/``, one block
cache and one maintenance manager for all of them, and the HybridClock every write is
stamped with (the RPC layer moves the same clock past what clients have seen).

Invariants:

- the superblock is written before the change it records takes effect on disk: a
  create lists the tablet once its directory exists; a delete tombstones it before its
  data goes; an alter records the new schema before the tablet switches to it. At open,
  directories not listed as RUNNING are removed and a tablet behind its recorded schema
  is altered to it, so each change finishes or never happened;
- create, alter and delete are idempotent (the master retries them), and a tombstoned
  id is never hosted again;
- create, alter and delete run one at a time (``_lock``); reads and writes take the
  lock only to find their tablet;
- a replicated tablet (its entry has ``raft_peers``) is a ``TabletReplica`` in its
  directory: writes go through its leader's ``write`` (a follower refuses them with
  ``NotTheLeader``); reads serve its local storage tablet, which holds the entries this
  replica has applied; its consensus messages leave through the ``PeerMessenger``;
- a replica that holds no data (a tombstone, or a tablet copy in progress) serves no
  read and is not reported; a tablet copy (``tablet_copy.py``) of a tablet this server
  does not host first lists it RUNNING as such an empty replica, then fills it, so an
  interrupted copy leaves a tombstone that a later copy replaces, never half a replica.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from kudusql.cluster.errors import (
    MalformedMessage,
    NotTheLeader,
    RequestStale,
    ServiceUnavailable,
    TabletNotFound,
)
from kudusql.cluster.tablet_partition import TabletPartition
from kudusql.cluster.tserver.messages import KEY_INDEX_COLUMN
from kudusql.cluster.tserver.peer_messenger import PeerMessenger
from kudusql.cluster.tserver.result_tracker import RequestId
from kudusql.cluster.tserver.superblock import RUNNING, TOMBSTONED, Superblock, TabletEntry
from kudusql.cluster.tserver.tablet_copy import (
    CopyHeader,
    CopySnapshot,
    open_copy,
    receive_copy,
)
from kudusql.cluster.tserver.tablet_replica import (
    NotLeaderError,
    ReplicaOptions,
    TabletReplica,
    WriteLostError,
    WriteTimeoutError,
)
from kudusql.common.errors import (
    DataError,
    IntegrityError,
    KuduAlreadyPresent,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
)
from kudusql.common.hybrid_time import HybridClock
from kudusql.common.options import TabletOptions
from kudusql.common.predicates import ColumnPredicate
from kudusql.common.row_operations import RowError, WriteOp, WriteResult, operations
from kudusql.common.schema import Schema
from kudusql.consensus.messages import ConsensusMessage, StartTabletCopyRequest
from kudusql.consensus.opid import OpId
from kudusql.consensus.raft_config import MemberType, RaftConfig
from kudusql.consensus.raft_consensus import ChangeType, ConfigChange, ConsensusError
from kudusql.storage.cfile.block_cache import BlockCache
from kudusql.storage.fs.lock import DirLock
from kudusql.storage.tablet.maintenance import MaintenanceManager
from kudusql.storage.tablet.tablet import Tablet

__all__ = [
    "COPY_PAUSE_ENV",
    "NOT_IN_PARTITION_MESSAGE",
    "TABLETS_DIR",
    "TabletManager",
    "parse_schema",
]

log = logging.getLogger(__name__)

TABLETS_DIR = "tablets"

#: A replica's committed config as reported: (opid index, voters, non-voters).
ReportedConfig = tuple[int, tuple[str, ...], tuple[str, ...]]

#: Test-only fault point: seconds a tablet copy waits once its destination is COPYING
#: (durably) and before it receives the copy's files, so a test can kill it midway.
COPY_PAUSE_ENV = "KUDUSQL_TEST_TABLET_COPY_PAUSE"
#: Seconds a tablet copy's fetch may take.
COPY_TIMEOUT = 120.0

#: The per-row error of a written row that belongs to another tablet (Kudu's
#: ``Tablet::CheckRowInTablet``: NotFound).
NOT_IN_PARTITION_MESSAGE = "Row not in tablet partition"


def parse_schema(text: str) -> Schema:
    """A schema sent as ``Schema.to_dict()`` JSON text; a clear error if it is not one."""
    try:
        return Schema.from_dict(json.loads(text))
    except (ValueError, KeyError, TypeError) as exc:
        raise MalformedMessage(f"a tablet schema is not a valid schema: {exc}") from None


class TabletManager:
    """Opens a tablet server's directory and hosts its tablets until ``close``."""

    def __init__(
        self,
        directory: str,
        *,
        clock: HybridClock,
        options: TabletOptions | None = None,
        maintenance: bool = True,
        messenger: PeerMessenger | None = None,
        replica_options: ReplicaOptions | None = None,
    ) -> None:
        """``messenger`` sends the replicated tablets' consensus messages (None: this
        server hosts unreplicated tablets only); ``replica_options`` their timers."""
        self.directory = os.path.abspath(directory)
        os.makedirs(os.path.join(self.directory, TABLETS_DIR), exist_ok=True)
        self._dir_lock = DirLock(self.directory)
        self._dir_lock.acquire()
        self.clock = clock
        # Acknowledged means durable: a write returns once its WAL record is fsynced
        # (group commit), whatever the caller's defaults.
        self.options = (options or TabletOptions()).with_(wal_fsync="batch")
        self.cache = BlockCache(self.options.block_cache_bytes)
        self.maintenance = MaintenanceManager() if maintenance else None
        self._lock = threading.RLock()
        self._tablets: dict[str, Tablet] = {}
        self._partitions: dict[str, TabletPartition] = {}
        #: The replicated tablets; each one's storage tablet is in ``_tablets`` too.
        self._replicas: dict[str, TabletReplica] = {}
        self.messenger = messenger
        self.replica_options = replica_options or ReplicaOptions()
        self._report_seq = 0
        self._closed = False
        #: Called after a replica appears, changes config or goes (the heartbeater's
        #: trigger); set by the server.
        self.on_changed: Callable[[], None] | None = None
        #: Tablets a copy is running for (one at a time per tablet), under its own lock:
        #: a replica asks for a copy with its lock held, while ``_lock`` may be held by
        #: a thread waiting for that replica (a delete), so ``_lock`` is not taken there.
        self._copying: set[str] = set()
        self._copy_lock = threading.Lock()
        self._copy_pause = float(os.environ.get(COPY_PAUSE_ENV, "0") or 0)
        try:
            previous = Superblock.load(self.directory)
            self.superblock = Superblock(
                server_uuid=previous.server_uuid if previous else uuid.uuid4().hex,
                incarnation=previous.incarnation + 1 if previous else 1,
                tablets=previous.tablets if previous else (),
            )
            self.superblock.save(self.directory)
            self._remove_unlisted()
            for entry in self.superblock.tablets:
                if entry.state == RUNNING:
                    self._partitions[entry.tablet_id] = TabletPartition.from_json(entry.partition)
                    self._tablets[entry.tablet_id] = self._open(entry)
        except BaseException:
            self.close()
            raise

    # -- open and close -------------------------------------------------------------------

    @property
    def server_uuid(self) -> str:
        return self.superblock.server_uuid

    @property
    def incarnation(self) -> int:
        return self.superblock.incarnation

    def _tablet_path(self, tablet_id: str) -> str:
        return os.path.join(self.directory, TABLETS_DIR, tablet_id)

    def _remove_unlisted(self) -> None:
        running = {e.tablet_id for e in self.superblock.tablets if e.state == RUNNING}
        root = os.path.join(self.directory, TABLETS_DIR)
        for name in sorted(os.listdir(root)):
            if name not in running:
                log.info("removing tablet directory %s: not a hosted tablet", name)
                shutil.rmtree(os.path.join(root, name), ignore_errors=True)

    def _open(self, entry: TabletEntry) -> Tablet:
        if entry.raft_peers is not None:
            replica = TabletReplica.open(
                self._tablet_path(entry.tablet_id),
                transport=self._transport(entry),
                options=self._replica_options(),
                clock=self.clock,
            )
            self._hook(entry.tablet_id, replica)
            self._replicas[entry.tablet_id] = replica
            return replica.tablet
        tablet = Tablet.open(
            self._tablet_path(entry.tablet_id), self.options, clock=self.clock, cache=self.cache
        )
        try:
            if tablet.schema != entry.schema:  # an alter recorded here, not yet applied
                tablet.alter_schema(entry.schema)
        except BaseException:
            tablet.close(flush=False)
            raise
        self._attach(tablet)
        return tablet

    def _hook(self, tablet_id: str, replica: TabletReplica) -> None:
        def on_copy_request(request: StartTabletCopyRequest) -> None:
            self.copy_requested(tablet_id, request, None)

        replica.on_copy_request = on_copy_request

    def _replica_options(self) -> ReplicaOptions:
        return dataclasses.replace(self.replica_options, tablet=self.options)

    def _transport(self, entry: TabletEntry) -> Callable[[ConsensusMessage], None]:
        """The replica's transport: its messages queued in the messenger, which learns
        where its peers listen."""
        messenger = self.messenger
        if messenger is None:
            raise NotSupportedError(
                f"tablet {entry.tablet_id} is replicated, and this tablet server was"
                " started without a peer messenger"
            )
        for uuid_, address in entry.raft_peers or ():
            if uuid_ != self.server_uuid:
                messenger.set_address(uuid_, address)
        tablet_id = entry.tablet_id

        def transport(message: ConsensusMessage) -> None:
            messenger.send(tablet_id, message)

        return transport

    def _attach(self, tablet: Tablet) -> None:
        if self.maintenance is not None:
            tablet.attach(self.maintenance)

    def close(self) -> None:
        """Close every tablet (their WALs synced) and release the directory."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            tablets, self._tablets = list(self._tablets.items()), {}
            replicas, self._replicas = dict(self._replicas), {}
        try:
            for tablet_id, t in tablets:
                try:
                    if tablet_id in replicas:
                        replicas[tablet_id].close()
                    else:
                        t.close()
                except Exception:
                    log.exception("closing tablet %s failed", t.path)
        finally:
            if self.maintenance is not None:
                self.maintenance.stop()
            self._dir_lock.release()

    def _save(self, superblock: Superblock) -> None:
        superblock.save(self.directory)
        self.superblock = superblock

    # -- create, alter, delete ----------------------------------------------------------

    def create_tablet(
        self,
        tablet_id: str,
        *,
        table_id: str,
        table_name: str,
        partition: str,
        schema: Schema,
        schema_version: int,
        raft_peers: tuple[tuple[str, str], ...] | None = None,
    ) -> TabletEntry:
        """Host a new tablet; the same request again is a no-op. ``raft_peers``: the
        (uuid, address) of a replicated tablet's voters, this server among them."""
        _check_tablet_id(tablet_id)
        if raft_peers is not None:
            self._check_peers(tablet_id, raft_peers)
        tablet_partition = TabletPartition.from_json(partition)
        tablet_partition.index_in(schema)  # a slice of its partition schema
        with self._lock:
            self._check_open()
            entry = self.superblock.entry(tablet_id)
            if entry is not None and entry.state == TOMBSTONED:
                raise KuduAlreadyPresent(
                    f"tablet {tablet_id} was deleted on this tablet server; a deleted tablet"
                    " is never created again"
                )
            if entry is not None:
                if entry.schema != schema or entry.table_id != table_id:
                    raise KuduAlreadyPresent(
                        f"tablet {tablet_id} already exists on this tablet server with"
                        " another table or schema"
                    )
                if entry.raft_peers != raft_peers:
                    raise KuduAlreadyPresent(
                        f"tablet {tablet_id} already exists on this tablet server with"
                        " other raft peers (or unreplicated)"
                    )
                return entry
            path = self._tablet_path(tablet_id)
            shutil.rmtree(path, ignore_errors=True)  # a create that crashed before listing
            entry = TabletEntry(
                tablet_id,
                table_id,
                table_name,
                partition,
                schema,
                schema_version,
                RUNNING,
                raft_peers,
            )
            replica: TabletReplica | None = None
            if raft_peers is not None:
                replica = TabletReplica.create(
                    path,
                    uuid=self.server_uuid,
                    tablet_id=tablet_id,
                    schema=schema,
                    config=RaftConfig.of_voters([u for u, _ in raft_peers]),
                    transport=self._transport(entry),
                    options=self._replica_options(),
                    clock=self.clock,
                )
                tablet = replica.tablet
                self._hook(tablet_id, replica)
            else:
                tablet = Tablet.create(
                    path, schema, self.options, clock=self.clock, cache=self.cache
                )
            try:
                self._save(self.superblock.with_entry(entry))
            except BaseException:
                if replica is not None:
                    replica.close()
                else:
                    tablet.close(flush=False)
                shutil.rmtree(path, ignore_errors=True)
                raise
            if replica is not None:
                self._replicas[tablet_id] = replica
            else:
                self._attach(tablet)
            self._tablets[tablet_id] = tablet
            self._partitions[tablet_id] = tablet_partition
            log.info(
                "created tablet %s of table %s (%s)%s",
                tablet_id,
                table_name,
                tablet_partition.describe(),
                "" if raft_peers is None else f", replicated on {[u for u, _ in raft_peers]}",
            )
            return entry

    def _check_peers(self, tablet_id: str, raft_peers: tuple[tuple[str, str], ...]) -> None:
        uuids = [u for u, _ in raft_peers]
        if len(set(uuids)) != len(uuids) or not all(uuids):
            raise ProgrammingError(
                f"tablet {tablet_id}: its raft peers need distinct, non-empty uuids: {uuids}"
            )
        if self.server_uuid not in uuids:
            raise ProgrammingError(
                f"tablet {tablet_id}: this tablet server ({self.server_uuid}) is not among"
                f" its raft peers {uuids}"
            )

    def alter_tablet(self, tablet_id: str, schema: Schema, schema_version: int) -> TabletEntry:
        """Bring a tablet to ``schema_version``; a no-op when it is there or past it."""
        with self._lock:
            self._check_open()
            entry = self._running_entry(tablet_id)
            if schema_version <= entry.schema_version:
                return entry
            tablet = self._tablets[tablet_id]
            replica = self._replicas.get(tablet_id)
            altered = TabletEntry(
                entry.tablet_id,
                entry.table_id,
                entry.table_name,
                entry.partition,
                schema,
                schema_version,
                RUNNING,
            )
            _check_alterable(entry.schema, schema)
            if replica is None:
                self._save(self.superblock.with_entry(altered))
                tablet.alter_schema(schema)
                log.info("altered tablet %s to schema version %d", tablet_id, schema_version)
                return altered
        # A replicated tablet's alter goes through its log: committed, then applied at
        # its index by every replica (this one, the leader, before it answers). Not
        # under the lock: the replicas' answers reach this server through ``replica``.
        self._alter_replicated(tablet_id, replica, schema, schema_version)
        with self._lock:
            self._check_open()
            entry = self._running_entry(tablet_id)
            if schema_version <= entry.schema_version:
                return entry
            altered = dataclasses.replace(altered, raft_peers=entry.raft_peers)
            self._save(self.superblock.with_entry(altered))
        log.info("altered tablet %s to schema version %d through Raft", tablet_id, schema_version)
        return altered

    def _alter_replicated(
        self, tablet_id: str, replica: TabletReplica, schema: Schema, schema_version: int
    ) -> None:
        try:
            replica.alter_schema(schema, schema_version)
        except NotLeaderError as exc:
            raise self._not_the_leader(exc) from None
        except (WriteLostError, WriteTimeoutError) as exc:
            raise ServiceUnavailable(f"altering tablet {tablet_id}: {exc}") from None

    def delete_tablet(
        self, tablet_id: str, *, cas_config_index: int | None = None
    ) -> TabletEntry | None:
        """Delete a tablet, leaving a tombstone; None when it was never here. With
        ``cas_config_index``, a replicated tablet whose committed config's opid index is
        above it is kept (``KuduAlreadyPresent``): it is newer than the replica the
        master meant."""
        with self._lock:
            self._check_open()
            entry = self.superblock.entry(tablet_id)
            if entry is None or entry.state == TOMBSTONED:
                return entry
            tombstone = entry.with_state(TOMBSTONED)
            replica = self._replicas.get(tablet_id)
            config = None if replica is None else replica.committed_config
            if (
                cas_config_index is not None
                and config is not None
                and config.opid_index > cas_config_index
            ):
                raise KuduAlreadyPresent(
                    f"tablet {tablet_id}: not deleted, its replica's config (opid index"
                    f" {config.opid_index}) is newer than {cas_config_index}"
                )
            if replica is not None:
                last = replica.last_logged_opid
                if last is not None:
                    tombstone = dataclasses.replace(
                        tombstone, last_logged_opid=(last.term, last.index)
                    )
            self._save(self.superblock.with_entry(tombstone))
            tablet = self._tablets.pop(tablet_id)
            self._partitions.pop(tablet_id, None)
            replica = self._replicas.pop(tablet_id, None)
            if replica is not None:
                replica.close()
            else:
                tablet.close(flush=False)
            shutil.rmtree(self._tablet_path(tablet_id), ignore_errors=True)
            log.info("deleted tablet %s (tombstoned)", tablet_id)
            return tombstone

    # -- reads and writes -----------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise OperationalError("the tablet server is shutting down")

    def _running_entry(self, tablet_id: str) -> TabletEntry:
        entry = self.superblock.entry(tablet_id)
        if entry is None or entry.state != RUNNING:
            raise TabletNotFound(f"tablet {tablet_id} is not hosted by this tablet server")
        return entry

    def tablet(self, tablet_id: str) -> Tablet:
        """A hosted tablet; ``TabletNotFound`` when it is not (never was, or deleted)."""
        with self._lock:
            self._check_open()
            tablet = self._tablets.get(tablet_id)
            replica = self._replicas.get(tablet_id)
            if replica is not None:
                if not replica.data_ready:
                    raise TabletNotFound(
                        f"tablet {tablet_id} has no data on this tablet server (a tombstone"
                        " or a tablet copy in progress)"
                    )
                tablet = replica.tablet
            if tablet is None:
                raise TabletNotFound(f"tablet {tablet_id} is not hosted by this tablet server")
            return tablet

    def replica(self, tablet_id: str) -> TabletReplica:
        """The replica of a hosted replicated tablet; ``TabletNotFound`` when there is
        none (not hosted, deleted, or unreplicated)."""
        with self._lock:
            self._check_open()
            replica = self._replicas.get(tablet_id)
            if replica is None:
                raise TabletNotFound(
                    f"tablet {tablet_id} has no replica on this tablet server"
                    " (not hosted, deleted, or not replicated)"
                )
            return replica

    def replica_schema_versions(self) -> dict[str, int]:
        """Each replicated tablet's schema version as its replica applied it (a
        follower's may be ahead of this server's superblock)."""
        with self._lock:
            replicas = dict(self._replicas)
        return {t: r.schema_version for t, r in replicas.items() if r.schema_version is not None}

    def replica_roles(self) -> dict[str, tuple[str, int, ReportedConfig | None]]:
        """Each replicated tablet's replica role, term and committed config (opid index,
        voters, non-voters) now, for the tablet report, of the replicas that hold data."""
        with self._lock:
            replicas = dict(self._replicas)
        out: dict[str, tuple[str, int, ReportedConfig | None]] = {}
        for t, r in replicas.items():
            config = r.committed_config
            if not r.data_ready:
                continue
            reported = None
            if config is not None:
                non_voters = tuple(u for u in config.uuids if not config.is_voter(u))
                reported = (config.opid_index, config.voters, non_voters)
            out[t] = (r.role, r.term, reported)
        return out

    # -- tablet copy and config changes -------------------------------------------------

    def copy_source(self, tablet_id: str) -> CopySnapshot:
        """The source side of a tablet copy: this replica's consistent state, its files
        open (the caller streams and closes them)."""
        with self._lock:
            entry = self._running_entry(tablet_id)
        replica = self.replica(tablet_id)
        snap = replica.copy_snapshot()
        config = snap.committed_config
        peers = dict(entry.raft_peers or ())
        if self.messenger is not None:
            for u in config.uuids:
                address = self.messenger.address_of(u)
                if address is not None and u not in peers:
                    peers[u] = address
        header = CopyHeader(
            tablet_id=tablet_id,
            source_uuid=self.server_uuid,
            table_id=entry.table_id,
            table_name=entry.table_name,
            partition=entry.partition,
            schema=entry.schema,
            schema_version=entry.schema_version,
            raft_peers=tuple(peers.items()),
            current_term=snap.current_term,
            committed_config=config,
            committed_index=snap.committed_index,
            log_base=snap.log_base,
            last_index=snap.log_base.index + len(snap.entries),
            files=tuple((path, size) for path, size, _ in snap.files),
        )
        return CopySnapshot(header, tuple(snap.entries), [f for _, _, f in snap.files])

    def copy_requested(
        self, tablet_id: str, request: StartTabletCopyRequest, source_address: str | None
    ) -> None:
        """A leader asks this server to copy the tablet from it: the copy runs on its
        own thread (this is called with a replica's lock held, or from an RPC handler);
        a request while a copy of the tablet runs is dropped (the leader asks again)."""
        if source_address is None and self.messenger is not None:
            source_address = self.messenger.address_of(request.caller_uuid)
        if source_address is None:
            log.warning(
                "tablet %s: a tablet copy from %s, whose address is unknown, is dropped",
                tablet_id,
                request.caller_uuid,
            )
            return
        with self._copy_lock:
            if self._closed or tablet_id in self._copying:
                return
            self._copying.add(tablet_id)
        thread = threading.Thread(
            target=self._run_copy,
            args=(tablet_id, request, source_address),
            name=f"tablet-copy-{tablet_id}",
            daemon=True,
        )
        thread.start()

    def _run_copy(
        self, tablet_id: str, request: StartTabletCopyRequest, source_address: str
    ) -> None:
        started = time.monotonic()
        replica: TabletReplica | None = None
        began = False
        try:
            assert self.messenger is not None
            with self.messenger.client_for(source_address, timeout=COPY_TIMEOUT) as client:
                header, batches = open_copy(
                    client, tablet_id, self.server_uuid, timeout=COPY_TIMEOUT
                )
                replica = self._copy_target(header, request)
                replica.begin_copy(request)
                began = True
                if self._copy_pause:
                    time.sleep(self._copy_pause)
                entries = receive_copy(header, batches, replica.copy_staging_dir)
            replica.install_copy(
                header.current_term,
                header.committed_config,
                header.committed_index,
                header.log_base,
                entries,
            )
            log.info(
                "tablet %s: copied %d files (%d bytes) and %d log entries after %s "
                "(committed index %d) from %s in %.2f s",
                tablet_id,
                len(header.files),
                sum(size for _, size in header.files),
                len(entries),
                header.log_base,
                header.committed_index,
                request.caller_uuid,
                time.monotonic() - started,
            )
        except ConsensusError as exc:
            log.warning(
                "tablet %s: tablet copy from %s refused: %s", tablet_id, request.caller_uuid, exc
            )
        except Exception as exc:
            log.warning(
                "tablet %s: tablet copy from %s failed: %s", tablet_id, request.caller_uuid, exc
            )
            if began and replica is not None:
                try:
                    replica.copy_failed()
                except Exception:
                    log.exception("tablet %s: tombstoning a failed copy failed", tablet_id)
        finally:
            with self._copy_lock:
                self._copying.discard(tablet_id)
        if self.on_changed is not None:
            self.on_changed()

    def _copy_target(self, copy: CopyHeader, request: StartTabletCopyRequest) -> TabletReplica:
        """The replica a copy fills: the hosted one, or a new empty one (listed RUNNING
        before it exists, created as a tombstone) for a tablet this server does not host
        or deleted (a deleted one keeps its last-logged OpId for the rogue-leader rule)."""
        tablet_id = copy.tablet_id
        with self._lock:
            self._check_open()
            existing = self._replicas.get(tablet_id)
            if existing is not None:
                return existing
            entry = self.superblock.entry(tablet_id)
            if entry is not None and entry.state == RUNNING:
                raise TabletNotFound(f"tablet {tablet_id} is hosted unreplicated here")
            last = None
            if entry is not None and entry.last_logged_opid is not None:
                last = OpId(*entry.last_logged_opid)
            new = TabletEntry(
                tablet_id,
                copy.table_id,
                copy.table_name,
                copy.partition,
                copy.schema,
                copy.schema_version,
                RUNNING,
                copy.raft_peers,
                entry.last_logged_opid if entry is not None else None,
            )
            partition = TabletPartition.from_json(copy.partition)
            path = self._tablet_path(tablet_id)
            shutil.rmtree(path, ignore_errors=True)
            self._save(self.superblock.with_entry(new))
            replica = TabletReplica.create_tombstoned(
                path,
                uuid=self.server_uuid,
                tablet_id=tablet_id,
                schema=copy.schema,
                last_logged_opid=last,
                transport=self._transport(new),
                options=self._replica_options(),
                clock=self.clock,
            )
            self._hook(tablet_id, replica)
            self._replicas[tablet_id] = replica
            self._tablets[tablet_id] = replica.tablet
            self._partitions[tablet_id] = partition
            log.info(
                "tablet %s: hosting an empty replica for a copy from %s",
                tablet_id,
                request.caller_uuid,
            )
            return replica

    def add_peer(
        self, tablet_id: str, peer_uuid: str, peer_address: str, cas_config_opid_index: int
    ) -> int:
        """As the tablet's leader, add ``peer_uuid`` (at ``peer_address``) as a
        NON_VOTER to be promoted once caught up, if the committed config's opid index is
        still ``cas_config_opid_index``; returns the index of the config entry."""
        with self._lock:
            self._check_open()
            entry = self._running_entry(tablet_id)
            replica = self._replicas.get(tablet_id)
            if replica is None:
                raise TabletNotFound(f"tablet {tablet_id} is not replicated on this server")
            peers = dict(entry.raft_peers or ())
            if peers.get(peer_uuid) != peer_address:
                peers[peer_uuid] = peer_address
                self._save(
                    self.superblock.with_entry(
                        dataclasses.replace(entry, raft_peers=tuple(peers.items()))
                    )
                )
        if self.messenger is not None:
            self.messenger.set_address(peer_uuid, peer_address)
        change = ConfigChange(
            ChangeType.ADD_PEER,
            peer_uuid,
            MemberType.NON_VOTER,
            promote=True,
            cas_config_opid_index=cas_config_opid_index,
        )
        try:
            opid = replica.change_config(change)
        except ConsensusError as exc:
            if exc.code in ("NOT_LEADER", "LEADER_NOT_READY") or not replica.is_leader:
                leader = replica.leader_uuid
                address = None
                if leader is not None and self.messenger is not None:
                    address = self.messenger.address_of(leader)
                raise NotTheLeader.naming(
                    f"tablet {tablet_id}: cannot change its config here: {exc}", leader, address
                ) from None
            raise OperationalError(f"tablet {tablet_id}: config change refused: {exc}") from None
        log.info("tablet %s: adding %s as a learner (config entry %s)", tablet_id, peer_uuid, opid)
        return opid.index

    def is_replicated(self, tablet_id: str) -> bool:
        with self._lock:
            return tablet_id in self._replicas

    def _replicate(
        self,
        tablet_id: str,
        data: pa.Table,
        operation: str | None,
        op_column: str | None,
        *,
        atomic: bool,
        request_id: RequestId | None,
    ) -> WriteResult:
        """A write of a replicated tablet, through its replica (the leader's). What a
        client should do next is in the error: ``NotTheLeader`` (try the leader it
        names, else ask the master), ``ServiceUnavailable`` (try again with the same
        request id: the outcome is unknown, or the write surely did not apply)."""
        with self._lock:
            replica = self._replicas.get(tablet_id)
        if replica is None:
            raise TabletNotFound(f"tablet {tablet_id} is not hosted by this tablet server")
        try:
            return replica.write(
                data, operation, op_column=op_column, atomic=atomic, request_id=request_id
            )
        except NotLeaderError as exc:
            raise self._not_the_leader(exc) from None
        except WriteLostError as exc:
            leader = replica.leader_uuid
            if leader == replica.uuid:
                leader = None
            address = None
            if leader is not None and self.messenger is not None:
                address = self.messenger.address_of(leader)
            raise NotTheLeader.naming(str(exc), leader, address) from None
        except WriteTimeoutError as exc:
            raise ServiceUnavailable(f"{exc}; send it again with the same request id") from None
        except RequestStale:
            raise
        except OperationalError as exc:  # the replica closed or failed under the write
            raise ServiceUnavailable(str(exc)) from None

    def write(
        self,
        tablet_id: str,
        data: pa.Table,
        operation: str | None,
        *,
        op_column: str | None = None,
        atomic: bool = False,
        check_only: bool = False,
        request_id: RequestId | None = None,
    ) -> WriteResult:
        """Apply a batch (one ``operation``, or each row's from ``op_column``); returns
        once it is durable in the tablet's WAL. Rows that belong to another tablet's
        partition are refused one by one (NotFound, as Kudu's ``CheckRowInTablet``); the
        others apply. ``atomic``: a batch with any row error applies nothing and answers
        its errors (timestamp 0). ``check_only``: the errors a write would report now.
        ``request_id``: a replicated tablet's write, exactly once through its log
        (``TabletReplica.write``); an unreplicated tablet's server tracks it itself."""
        tablet = self.tablet(tablet_id)
        partition = self._partitions[tablet_id]
        replicated = self.is_replicated(tablet_id)
        try:
            ops = operations(data, operation, op_column)
            foreign = partition.foreign_rows(tablet.schema, data)
            keep = np.flatnonzero(~foreign)
            part = data if not foreign.any() else data.take(keep)

            def own_errors() -> list[RowError]:
                return tablet.check_write(part, operation, op_column=op_column)

            if check_only or (atomic and foreign.any()):
                result = WriteResult(0, 0, 0, own_errors())
            elif replicated:
                result = self._replicate(
                    tablet_id,
                    part,
                    operation,
                    op_column,
                    atomic=atomic,
                    request_id=request_id,
                )
            elif atomic:
                try:
                    result = tablet.write(part, operation, op_column=op_column, atomic=True)
                except (IntegrityError, DataError):
                    # Rejected whole: answer each row's error (as the check finds them).
                    result = WriteResult(0, 0, 0, own_errors())
            else:
                result = tablet.write(part, operation, op_column=op_column)
        except (pa.ArrowInvalid, pa.ArrowTypeError, KeyError) as exc:
            raise ProgrammingError(
                f"a write batch does not fit tablet {tablet_id}: {exc}"
            ) from None
        if not foreign.any():
            return result
        key_names = [k for k in tablet.schema.key_names if k in data.column_names]
        errors = [
            RowError(int(keep[e.index]), e.op, e.key, e.status, e.message) for e in result.errors
        ]
        errors += [
            RowError(
                i,
                WriteOp(int(ops[i])),
                tuple(data.column(k)[i].as_py() for k in key_names) or None,
                "NotFound",
                NOT_IN_PARTITION_MESSAGE,
            )
            for i in np.flatnonzero(foreign).tolist()
        ]
        errors.sort(key=lambda e: e.index)
        return WriteResult(result.timestamp, result.applied, result.ignored, errors)

    def scan(
        self,
        tablet_id: str,
        columns: list[str] | None,
        predicates: list[dict[str, Any]],
        snapshot: int | None,
        ordered: bool,
        limit: int | None = None,
        *,
        key_range: tuple[bytes | None, bytes | None] = (None, None),
    ) -> pa.RecordBatchReader:
        """Rows at ``snapshot``: the tablet first waits until every write before it is
        applied (its safe time); a snapshot more than the clock error bound ahead of the
        clock is refused, a nearer one moves the clock past it. At most ``limit`` rows,
        with encoded primary keys in ``key_range`` ``[lo, hi)``."""
        tablet = self.tablet(tablet_id)
        self._await_safe_time(tablet_id, snapshot)
        # A hint (advisory) predicate is evaluated here as an exact one: the caller
        # filters again and accepts either, and a row that fails it is cheaper to drop
        # here than to send.
        preds = [p.exact() for p in _predicates(predicates)]
        reader = tablet.scan(
            columns, preds, snapshot=snapshot, ordered=ordered, key_range=key_range
        )
        if limit is None:
            return reader
        if limit < 0:
            raise ProgrammingError(f"a scan limit must not be negative, got {limit}")
        return pa.RecordBatchReader.from_batches(reader.schema, _limited(reader, limit))

    def lookup(
        self,
        tablet_id: str,
        keys: pa.Table,
        columns: list[str] | None,
        snapshot: int | None,
    ) -> pa.Table:
        """The live rows with the primary keys ``keys`` (one per row, key columns by
        name) at ``snapshot``, with a last column ``key_index``, in key order of
        ``keys``. At the latest snapshot each key is one probe; at an explicit one, one
        scan (after the wait for safe time) with each key column's values as an IN
        list, its rows then matched to the keys."""
        tablet = self.tablet(tablet_id)
        self._await_safe_time(tablet_id, snapshot)
        schema = tablet.schema
        names = list(schema.names if columns is None else columns)
        try:
            key_cols = [keys.column(c.name).to_pylist() for c in schema.key_columns]
        except KeyError as exc:
            raise ProgrammingError(f"a lookup's keys lack a key column: {exc}") from None
        wanted = list(zip(*key_cols, strict=True))
        found: list[dict[str, object]] = []
        indexes: list[int] = []
        if snapshot is None:
            for i, key in enumerate(wanted):
                row = tablet.lookup(key, names, None)
                if row is not None:
                    found.append(row)
                    indexes.append(i)
        elif wanted:
            key_names = schema.key_names
            preds = [
                ColumnPredicate.in_list(c, list(dict.fromkeys(v for v in values if v is not None)))
                for c, values in zip(key_names, key_cols, strict=True)
            ]
            read = list(dict.fromkeys([*names, *key_names]))
            rows = tablet.scan(read, preds, snapshot=snapshot).read_all().to_pylist()
            by_key = {tuple(r[k] for k in key_names): r for r in rows}
            for i, key in enumerate(wanted):
                hit = by_key.get(key)
                if hit is not None:
                    found.append({c: hit[c] for c in names})
                    indexes.append(i)
        out = pa.Table.from_pylist(found, schema=schema.arrow_schema(names))
        return out.append_column(
            pa.field(KEY_INDEX_COLUMN, pa.int64(), False), pa.array(indexes, pa.int64())
        )

    def diff_scan(
        self,
        tablet_id: str,
        start: int,
        end: int,
        columns: list[str] | None,
        predicates: list[dict[str, Any]],
    ) -> pa.RecordBatchReader:
        """Rows changed in ``[start, end)`` with ``is_deleted`` (``Tablet.diff_scan``,
        after the wait for safe time at ``end``)."""
        tablet = self.tablet(tablet_id)
        self._await_safe_time(tablet_id, end)
        return tablet.diff_scan(start, end, columns, _predicates(predicates))

    def count_rows(self, tablet_id: str, snapshot: int | None) -> int:
        """Rows live at ``snapshot`` (after the wait for safe time)."""
        tablet = self.tablet(tablet_id)
        self._await_safe_time(tablet_id, snapshot)
        return tablet.count_rows(snapshot)

    def _not_the_leader(self, exc: NotLeaderError) -> NotTheLeader:
        leader = exc.leader_uuid
        address = None
        if leader is not None and self.messenger is not None:
            address = self.messenger.address_of(leader)
        return NotTheLeader.naming(str(exc), leader, address)

    def _await_safe_time(self, tablet_id: str, snapshot: int | None) -> None:
        """A replicated tablet's read at ``snapshot`` first waits for the replica's safe
        time (the storage tablet only knows the writes this replica applied so far); a
        read of the latest (None) is served by the leader while it holds its lease, and
        refused elsewhere with ``NotTheLeader`` (a follower's latest may miss writes
        already acknowledged)."""
        with self._lock:
            replica = self._replicas.get(tablet_id)
        if replica is None:
            return
        if snapshot is not None:
            replica.wait_for_safe_time(snapshot)
            return
        try:
            replica.wait_for_lease()
        except NotLeaderError as exc:
            raise self._not_the_leader(exc) from None

    def flush(self, tablet_id: str) -> None:
        """Flush the tablet's MemRowSet and DeltaMemStores now; a replicated tablet's
        consensus log is then GCed as its log GC driver would (``flush_and_gc``)."""
        tablet = self.tablet(tablet_id)
        with self._lock:
            replica = self._replicas.get(tablet_id)
        if replica is not None:
            replica.flush_and_gc(flush=True)
            return
        tablet.flush()
        tablet.flush_deltas()

    def statistics(self, tablet_id: str) -> dict[str, int]:
        """The tablet's sizes now, from memory (``Tablet.stats``)."""
        tablet = self.tablet(tablet_id)
        st = tablet.stats()
        return {
            "memrowset_rows": int(st["memrowset_rows"]),
            "diskrowsets": int(st["diskrowsets"]),
            "disk_rows": int(sum(r["rows"] for r in st["rowsets"][1:])),
            "disk_bytes": int(st["disk_bytes"]),
            "memory_bytes": int(tablet.memory_bytes()),
            "wal_bytes": int(st["wal_bytes"]),
        }

    def report(
        self,
    ) -> tuple[int, int, list[tuple[str, int, str | None, int | None, ReportedConfig | None]]]:
        """A full tablet report: (incarnation, sequence number, [(tablet id, schema
        version, Raft role, term, committed config)] of every RUNNING tablet that holds
        data; role, term and config are None for an unreplicated tablet)."""
        roles = self.replica_roles()
        versions = self.replica_schema_versions()
        with self._lock:
            self._report_seq += 1
            tablets = [
                (
                    e.tablet_id,
                    max(e.schema_version, versions.get(e.tablet_id, 0)),
                    *roles.get(e.tablet_id, (None, None, None)),
                )
                for e in self.superblock.tablets
                if e.state == RUNNING and (not e.replicated or e.tablet_id in roles)
            ]
            return self.incarnation, self._report_seq, tablets


def _predicates(predicates: list[dict[str, Any]]) -> list[ColumnPredicate]:
    try:
        return [ColumnPredicate.from_dict(p) for p in predicates]
    except (KeyError, ValueError, TypeError) as exc:
        raise MalformedMessage(f"a scan predicate is not valid: {exc}") from None


def _limited(reader: pa.RecordBatchReader, limit: int) -> Iterator[pa.RecordBatch]:
    """The reader's first ``limit`` rows; the rest of the scan is never produced."""
    left = limit
    for batch in reader:
        if left <= 0:
            break
        if batch.num_rows > left:
            batch = batch.slice(0, left)
        left -= batch.num_rows
        yield batch


def _check_tablet_id(tablet_id: str) -> None:
    if not tablet_id or not all(c.isalnum() or c in "-_" for c in tablet_id):
        raise ProgrammingError(f"bad tablet id {tablet_id!r}: letters, digits, '-' and '_' only")


def _check_alterable(old: Schema, new: Schema) -> None:
    """Refuse, before anything is recorded, what ``Tablet.alter_schema`` would refuse (a
    recorded alter the tablet refuses would keep the tablet from opening)."""
    if [(c.id, c.type) for c in new.key_columns] != [(c.id, c.type) for c in old.key_columns]:
        raise ProgrammingError("altering a tablet cannot change its primary key columns")
    for c in new.columns:
        prev = old.column_by_id(c.id)
        if prev is not None and prev.type != c.type:
            raise ProgrammingError(
                f"cannot change the type of column {c.name!r} from {prev.type} to {c.type}"
            )
