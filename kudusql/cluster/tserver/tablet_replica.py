"""The host of one replica of one tablet (Kudu's TabletReplica with its RaftConsensus):
it owns the Raft state machine (``kudusql.consensus.RaftReplica``), the replica's durable
consensus state (``ConsensusLog`` and ``ConsensusMetadataFile``) and the storage
``Tablet`` the committed writes apply to, and drives the state machine under the host's
contract (docs/CLUSTER.md, "Replication (Raft) core").

Every input to the state machine (a timer tick, a peer's message, a leader's write) goes
through one lock; after each input the host handles the ``Ready`` in the contract's
order: persist the metadata; truncate the log; append; make the log durable before
anything is sent when the Ready asks (a follower's answer), else after sending (a
leader's own appends) and then call ``log_synced``; send the messages through the
injected transport; apply the committed WRITE entries to the tablet at each entry's
HybridTime; raise the hybrid clock to the Ready's floor.

Durable applied state (docs/CLUSTER.md, "Durable applied state and log GC"). The
storage tablet keeps what it applied: its own WAL (fsync ``none``) is the record of the
applied entries, each stored at its entry's HybridTime, and the tablet syncs it before
any superblock save, so a reopened tablet holds exactly the entries up to some index,
each once. Entry timestamps strictly increase with the index in every replica's log
(a leader assigns each above every entry it holds), so that index is the last entry
whose timestamp is at most the reopened tablet's latest one. Opening a replica opens
its tablet, applies the committed entries after that index that this replica knows
committed (``replica.committed``: a lower bound of the committed index, saved by the
log GC driver and at close) and lets Raft bring the rest.

The log GC driver (``flush_and_gc``, also run every ``log_gc_interval_s`` by a
maintenance thread) flushes the tablet's in-memory stores when they hold more than the
tablet's ``flush_threshold_bytes``, syncs the tablet's WAL (every applied entry is then
durable in the tablet) and deletes the consensus log segments below the minimum of that
applied index and, on a leader, what its peers still need, within
``log_min_segments_to_retain`` .. ``log_max_segments_to_retain`` segments. A peer whose
entries are gone needs a tablet copy (``peers_needing_copy``).

Tablet copy (docs/CLUSTER.md, "Tablet copy and re-replication"): ``copy_snapshot``
is the source's consistent state (the tablet's files opened, then the log after its
base); ``begin_copy`` and ``install_copy`` are the destination's: COPYING first, the
staged files swapped into place and the copied log written before cmeta READY, so a
crash leaves a replica that holds no data, which its next open clears.

Directory (FORMAT.md in this package): ``replica.meta`` (uuid, tablet id, schema),
``cmeta``, ``replica.committed``, ``wal/`` (the consensus log), ``tablet/`` (the storage
tablet), ``tablet.copying/`` (a copy's staged files). A replica written before
``replica.committed`` existed has a complete log and a derived tablet: its first open
rebuilds the tablet from the log as before.

The threads are a timer that calls ``tick`` and the log GC driver. The transport is
called with the lock held: it must queue the message and return, never call back into
this replica.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import random
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO

import pyarrow as pa

from kudusql.common.errors import (
    DataError,
    IntegrityError,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
)
from kudusql.common.hybrid_time import (
    MAX_CLOCK_ERROR_MICROS,
    HybridClock,
    describe,
    from_micros,
)
from kudusql.common.options import TabletOptions
from kudusql.common.row_operations import WriteResult
from kudusql.common.schema import Schema
from kudusql.consensus.messages import (
    ConsensusMessage,
    OpType,
    ReplicateMsg,
    StartTabletCopyRequest,
)
from kudusql.consensus.opid import MINIMUM_OPID, OpId
from kudusql.consensus.raft_config import RaftConfig
from kudusql.consensus.raft_consensus import (
    ConfigChange,
    ConsensusError,
    ConsensusMetadata,
    DataState,
    RaftOptions,
    RaftReplica,
    Ready,
)
from kudusql.storage.consensus import DEFAULT_SEGMENT_SIZE, ConsensusLog, ConsensusMetadataFile
from kudusql.storage.consensus.tablet_copy import (
    COPYING_SUFFIX,
    DELETING_SUFFIX,
    write_copied_log,
)
from kudusql.storage.fs.files import fsync_dir
from kudusql.storage.fs.lock import DirLock
from kudusql.storage.fs.meta_file import load_json, save_json
from kudusql.storage.tablet import metadata as tablet_metadata
from kudusql.storage.tablet.tablet import WAL_DIR as TABLET_WAL_DIR
from kudusql.storage.tablet.tablet import Tablet

__all__ = [
    "CopySource",
    "NotLeaderError",
    "ReplicaOptions",
    "ReplicaSnapshot",
    "SafeTimeTimeoutError",
    "TabletReplica",
    "Transport",
    "WriteLostError",
    "WriteTimeoutError",
    "decode_write",
    "encode_write",
]

log = logging.getLogger(__name__)

# DO NOT CHANGE: on-disk (FORMAT.md).
REPLICA_META_FILE = "replica.meta"
CMETA_FILE = "cmeta"
COMMITTED_FILE = "replica.committed"
LOG_DIR = "wal"
TABLET_DIR = "tablet"
#: A tablet copy's staged files (``tablet.copying``) before they go into place.
STAGING_SUFFIX = ".copying"
_MAGIC = b"KSQLTREP"
_VERSION = 1
_COMMITTED_MAGIC = b"KSQLRCMT"
_COMMITTED_VERSION = 1
#: The version of a WRITE entry's payload (FORMAT.md).
_WRITE_VERSION = 1

#: Hands one message to the network; must not block on, or call into, the receiver.
Transport = Callable[[ConsensusMessage], None]

#: Errors a committed write raises identically on every replica (the same batch on the
#: same state): the entry's outcome, not a failure of the replica.
_DETERMINISTIC = (
    ProgrammingError,
    DataError,
    IntegrityError,
    KeyError,
    pa.ArrowInvalid,
    pa.ArrowTypeError,
)


class NotLeaderError(OperationalError):
    """This replica cannot accept writes now; ``leader_uuid`` is the leader it knows."""

    def __init__(self, message: str, leader_uuid: str | None) -> None:
        super().__init__(message)
        self.leader_uuid = leader_uuid


class WriteLostError(OperationalError):
    """The write's entry was replaced by another leader's: it did not and will not apply."""


class WriteTimeoutError(OperationalError):
    """The write was not committed in time; it may still commit and apply later."""


class SafeTimeTimeoutError(OperationalError):
    """A snapshot read waited too long for the replica's safe time to reach its
    snapshot (a follower cut off from its leader, a leader without its lease): another
    replica, or the same one later, may serve it."""


@dataclass(frozen=True)
class ReplicaOptions:
    """Timers in seconds; ``raft`` carries the consensus flags (milliseconds)."""

    raft: RaftOptions = field(default_factory=RaftOptions)
    #: The timer thread's period (a fraction of the heartbeat interval).
    tick_interval_s: float = 0.05
    #: How long ``write`` waits for its entry to commit and apply.
    write_timeout_s: float = 10.0
    #: How long a snapshot read waits for the replica's safe time to reach it.
    safe_time_timeout_s: float = 5.0
    tablet: TabletOptions = field(default_factory=TabletOptions)
    #: The consensus log's segment size (Kudu's --log_segment_size_mb).
    log_segment_bytes: int = DEFAULT_SEGMENT_SIZE
    #: Segments the log GC always keeps (Kudu's --log_min_segments_to_retain).
    log_min_segments_to_retain: int = 1
    #: Most segments a leader keeps for lagging peers; a peer that needs an older
    #: entry then needs a tablet copy (Kudu's --log_max_segments_to_retain).
    log_max_segments_to_retain: int = 80
    #: How often the log GC driver runs (``flush_and_gc``); 0: only when called.
    log_gc_interval_s: float = 5.0


@dataclass
class ReplicaSnapshot:
    """A tablet copy's source state (``copy_snapshot``): the consensus state, the log
    after ``log_base``, and the tablet's files (path relative to the tablet directory,
    the size to ship, the open file)."""

    current_term: int
    committed_config: RaftConfig
    committed_index: int
    log_base: OpId
    entries: list[ReplicateMsg]
    files: list[tuple[str, int, IO[bytes]]]


@dataclass(frozen=True)
class CopySource:
    """What a tablet copy of this replica ships, consistent at one point: the storage
    tablet's files (superblock, the rowset files it lists, its WAL segments), relative
    to the tablet directory, and the consensus log's entries ``log_first_index`` ..
    ``log_last_opid`` (the ones before are in the tablet: ``applied_index`` is at least
    ``log_first_index - 1``), with cmeta and the committed index."""

    tablet_dir: str
    tablet_files: tuple[str, ...]
    applied_index: int
    log_first_index: int
    log_last_opid: OpId
    committed_index: int


# -- WRITE payloads ---------------------------------------------------------------------------


def encode_write(data: pa.Table, operation: str | None, op_column: str | None) -> str:
    """A WRITE entry's payload: the batch as an Arrow IPC stream, base64, behind a
    version and the operation (FORMAT.md)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, data.schema) as writer:
        writer.write_table(data)
    ipc = base64.b64encode(sink.getvalue().to_pybytes()).decode("ascii")
    op = "" if operation is None else operation
    col = "" if op_column is None else op_column
    if "\n" in op or "\n" in col:
        raise ProgrammingError("a write operation or op column name holds a newline")
    return f"{_WRITE_VERSION}\n{op}\n{col}\n{ipc}"


def decode_write(payload: str) -> tuple[pa.Table, str | None, str | None]:
    """The batch, operation and op column of a WRITE payload."""
    parts = payload.split("\n", 3)
    if len(parts) != 4 or parts[0] != str(_WRITE_VERSION):
        raise NotSupportedError(
            f"a WRITE entry's payload is not of version {_WRITE_VERSION}, the one this build reads"
        )
    _, op, col, ipc = parts
    with pa.ipc.open_stream(pa.py_buffer(base64.b64decode(ipc))) as reader:
        table = reader.read_all()
    return table, op or None, col or None


# -- the host ---------------------------------------------------------------------------------


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclass
class _Waiter:
    """A leader's write waiting for its entry to commit and apply."""

    opid: OpId
    done: threading.Event = field(default_factory=threading.Event)
    result: WriteResult | None = None
    error: Exception | None = None

    def finish(self, result: WriteResult | None, error: Exception | None) -> None:
        self.result, self.error = result, error
        self.done.set()


class TabletReplica:
    """One replica of one tablet. ``create`` a new one or ``open`` an existing one."""

    def __init__(
        self,
        directory: str,
        transport: Transport,
        options: ReplicaOptions,
        clock: HybridClock | None,
        rng: random.Random | None,
    ) -> None:
        self.directory = os.path.abspath(directory)
        self.options = options
        self.clock = clock or HybridClock()
        self._transport = transport
        self._lock = threading.Lock()
        #: Notified whenever the replica handled input (safe time may have moved).
        self._progress = threading.Condition(self._lock)
        self._waiters: dict[int, _Waiter] = {}
        self._closed = False
        self._failed: str | None = None
        self._stop = threading.Event()
        #: The host's handler of a leader's StartTabletCopy (called with the lock held:
        #: it must start the copy elsewhere and return); None refuses copies.
        self.on_copy_request: Callable[[StartTabletCopyRequest], None] | None = None
        self._dir_lock = DirLock(self.directory)
        self._dir_lock.acquire()
        try:
            body = load_json(
                os.path.join(self.directory, REPLICA_META_FILE),
                _MAGIC,
                _VERSION,
                "tablet replica metadata",
            )
            self.uuid: str = body["uuid"]
            self.tablet_id: str = body["tablet_id"]
            self.schema = Schema.from_dict(body["schema"])
            self._cmeta = ConsensusMetadataFile(os.path.join(self.directory, CMETA_FILE))
            meta = self._cmeta.load()
            if meta.data_state is not DataState.READY:
                # A tombstone, or a copy a crash interrupted: whatever data it left is
                # no replica's; it starts from an empty log and tablet.
                _clear_data(self.directory)
            self._log = ConsensusLog.open(
                os.path.join(self.directory, LOG_DIR),
                create=False,
                segment_size=options.log_segment_bytes,
            )
            base, entries = self._read_log()
            committed = self._load_committed()
            self.tablet = self._open_tablet(base, committed is None)
            #: The index of the last entry applied to the tablet (0: none).
            self.applied_index = self._tablet_applied_index(base, entries)
            # Entries this replica knows committed apply now; Raft brings the others.
            known = max(self.applied_index, min(committed or 0, self._log.last_opid().index))
            #: What the last open replayed: the index the reopened tablet held, the
            #: consensus log entries applied again up to the saved committed index,
            #: and the rows the tablet replayed from its own WAL (its unflushed stores).
            self.bootstrap_stats = {
                "applied_index": self.applied_index,
                "entries_replayed": known - self.applied_index,
                "tablet_wal_rows": self.tablet.replay_stats.rows_replayed,
            }
            for entry in entries:
                if self.applied_index < entry.id.index <= known:
                    self._apply(entry)
            self._raft = RaftReplica(
                self.uuid,
                meta,
                entries,
                known,
                options.raft,
                rng or random.Random(),
                _now_ms(),
                log_base=base,
            )
            if self._raft.data_state is DataState.COPYING:
                # A copy interrupted by a crash: its data is no replica, only a tombstone.
                log.info(
                    "tablet %s replica %s: tombstoned an interrupted tablet copy",
                    self.tablet_id,
                    self.uuid,
                )
                self._raft.tablet_copy_failed(_now_ms())
                with self._lock:
                    self._drain()
        except BaseException:
            tablet = getattr(self, "tablet", None)
            if tablet is not None:
                tablet.close(flush=False)
            self._release_files()
            raise
        #: Copies in progress (``copy_source``): the log GC keeps every entry meanwhile.
        self._copy_anchors = 0
        self._gc_lock = threading.Lock()  # one log GC driver run at a time
        self._thread = threading.Thread(
            target=self._run_timer, name=f"replica-{self.tablet_id}-{self.uuid}", daemon=True
        )
        self._thread.start()
        self._gc_thread: threading.Thread | None = None
        if options.log_gc_interval_s > 0:
            self._gc_thread = threading.Thread(
                target=self._run_gc, name=f"replica-gc-{self.tablet_id}-{self.uuid}", daemon=True
            )
            self._gc_thread.start()

    # -- lifecycle -------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        directory: str,
        *,
        uuid: str,
        tablet_id: str,
        schema: Schema,
        config: RaftConfig,
        transport: Transport,
        options: ReplicaOptions | None = None,
        clock: HybridClock | None = None,
        rng: random.Random | None = None,
    ) -> TabletReplica:
        """A new replica of a new tablet: an empty log and ``config`` in cmeta. The
        metadata file is written last, so an interrupted create is no replica."""
        path = os.path.join(directory, REPLICA_META_FILE)
        if os.path.exists(path):
            raise ProgrammingError(f"a tablet replica already exists at {directory}")
        if not config.is_member(uuid):
            raise ProgrammingError(f"replica {uuid} is not a member of {config}")
        os.makedirs(directory, exist_ok=True)
        ConsensusLog.open(os.path.join(directory, LOG_DIR), create=True).close()
        ConsensusMetadataFile(os.path.join(directory, CMETA_FILE)).store(
            ConsensusMetadata.new_replica(config)
        )
        shutil.rmtree(os.path.join(directory, TABLET_DIR), ignore_errors=True)
        _save_committed(directory, 0, 0)
        body = {"uuid": uuid, "tablet_id": tablet_id, "schema": schema.to_dict()}
        save_json(path, _MAGIC, _VERSION, body)
        return cls.open(directory, transport=transport, options=options, clock=clock, rng=rng)

    @classmethod
    def create_tombstoned(
        cls,
        directory: str,
        *,
        uuid: str,
        tablet_id: str,
        schema: Schema,
        last_logged_opid: OpId | None,
        transport: Transport,
        options: ReplicaOptions | None = None,
        clock: HybridClock | None = None,
    ) -> TabletReplica:
        """A replica with no data (a tombstone keeping ``last_logged_opid``), ready to
        receive a tablet copy. As ``create``, the metadata file is written last."""
        path = os.path.join(directory, REPLICA_META_FILE)
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory)
        ConsensusLog.open(os.path.join(directory, LOG_DIR), create=True).close()
        ConsensusMetadataFile(os.path.join(directory, CMETA_FILE)).store(
            ConsensusMetadata(0, None, None, DataState.TOMBSTONED, last_logged_opid)
        )
        body = {"uuid": uuid, "tablet_id": tablet_id, "schema": schema.to_dict()}
        save_json(path, _MAGIC, _VERSION, body)
        return cls.open(directory, transport=transport, options=options, clock=clock)

    @classmethod
    def open(
        cls,
        directory: str,
        *,
        transport: Transport,
        options: ReplicaOptions | None = None,
        clock: HybridClock | None = None,
        rng: random.Random | None = None,
    ) -> TabletReplica:
        """Bootstrap: cmeta and the log as they were durable; the tablet as it was
        durable, then the entries after its applied index up to the committed index
        this replica saved; the threads started."""
        return cls(directory, transport, options or ReplicaOptions(), clock, rng)

    def _read_log(self) -> tuple[OpId, list[ReplicateMsg]]:
        """The OpId before the first entry the log holds, and the entries."""
        lg = self._log
        first = lg.first_index
        base = MINIMUM_OPID if first == 1 else OpId(lg.term_at(first - 1) or 0, first - 1)
        entries: list[ReplicateMsg] = []
        last = lg.last_opid().index
        while first + len(entries) <= last:
            entries.extend(lg.entries(first + len(entries), last, 16 << 20))
        return base, entries

    def _load_committed(self) -> int | None:
        """The committed index saved last (None: a replica from before it was saved)."""
        path = os.path.join(self.directory, COMMITTED_FILE)
        if not os.path.exists(path):
            return None
        body = load_json(path, _COMMITTED_MAGIC, _COMMITTED_VERSION, "replica committed index")
        self.clock.observe(int(body["ht_floor"]))
        return int(body["committed_index"])

    def _open_tablet(self, base: OpId, legacy: bool) -> Tablet:
        path = os.path.join(self.directory, TABLET_DIR)
        opts = self.options.tablet.with_(wal_fsync="none")
        if legacy:
            # Written before the tablet was durable state: derived from the whole log.
            if base.index != 0:
                raise NotSupportedError(
                    f"tablet replica {self.directory} has no {COMMITTED_FILE} but its "
                    f"consensus log starts after entry {base.index}"
                )
            shutil.rmtree(path, ignore_errors=True)
            tablet = Tablet.create(path, self.schema, opts, clock=self.clock)
            _save_committed(self.directory, 0, 0)
            return tablet
        if not os.path.exists(os.path.join(path, tablet_metadata.META_FILE)):
            if base.index != 0:
                raise OperationalError(
                    f"tablet replica {self.directory}: the storage tablet is missing and "
                    f"the consensus log starts after entry {base.index}; the replica "
                    "needs a tablet copy"
                )
            return Tablet.create(path, self.schema, opts, clock=self.clock)
        return Tablet.open(path, opts, clock=self.clock)

    def _tablet_applied_index(self, base: OpId, entries: list[ReplicateMsg]) -> int:
        """The last entry the reopened tablet holds: the last whose timestamp is at most
        the tablet's latest one (timestamps strictly increase with the index; an entry
        that changed nothing leaves no trace, and applying it again changes nothing)."""
        latest = self.tablet.meta.max_ts
        applied = base.index
        for entry in entries:
            if entry.timestamp > latest:
                break
            applied = entry.id.index
        return applied

    def close(self) -> None:
        """Stop the threads, save the committed index and release the files (the
        tablet flushes first when its next open would replay too much of its WAL);
        pending writes fail as unknown."""
        self._shutdown()
        with self._lock:
            self._fail_all_waiters("closed")
            try:
                if self._failed is None:
                    self.tablet.sync_log()
                    self._save_progress()
            finally:
                self.tablet.close(flush=None if self._failed is None else False)
                self._release_files()

    def abandon(self) -> None:
        """Stop as a crash would (for tests): nothing synced or flushed on the way out;
        what survives is what was durable."""
        self._shutdown()
        with self._lock:
            self._fail_all_waiters("crashed")
            self.tablet.abandon()
            self._release_files()

    def _shutdown(self) -> None:
        with self._lock:
            self._closed = True
        self._stop.set()
        for thread in (self._thread, self._gc_thread):
            if thread is not None and thread is not threading.current_thread():
                thread.join()

    def _release_files(self) -> None:
        lg = getattr(self, "_log", None)
        if lg is not None:
            lg.close()
        self._dir_lock.release()

    def __enter__(self) -> TabletReplica:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- inspection ------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self._raft.is_leader

    @property
    def leader_uuid(self) -> str | None:
        return self._raft.leader_uuid

    @property
    def term(self) -> int:
        return self._raft.current_term

    @property
    def role(self) -> str:
        """The replica's Raft role now: ``LEADER``, ``FOLLOWER``, ``LEARNER`` or
        ``NON_PARTICIPANT`` (what the tablet server reports to the master)."""
        return self._raft.role.value

    @property
    def committed_index(self) -> int:
        return self._raft.committed_index

    @property
    def last_opid(self) -> OpId:
        return self._raft.last_opid

    @property
    def data_ready(self) -> bool:
        """Whether the replica holds the tablet's data (not a tombstone, not copying)."""
        return self._raft.data_state is DataState.READY

    @property
    def last_logged_opid(self) -> OpId | None:
        """The last OpId this replica logged (a tombstone's is the one it kept)."""
        with self._lock:
            if self._raft.data_state is DataState.READY:
                return self._raft.last_opid
            return self._raft.tombstone_last_logged_opid

    @property
    def committed_config(self) -> RaftConfig | None:
        return self._raft.committed_config

    @property
    def failed(self) -> str | None:
        """Why the replica stopped (a log or tablet failure), None while healthy."""
        return self._failed

    # -- inputs ----------------------------------------------------------------------------

    def tick(self) -> None:
        """The timer: heartbeats, the failure detector, elections."""
        with self._lock:
            if self._usable():
                self._raft.tick(_now_ms(), self.clock.now())
                self._drain()

    def receive(self, message: ConsensusMessage) -> None:
        """A message from a peer. A closed replica drops it, as a crashed one would."""
        with self._lock:
            if not self._usable():
                return
            if isinstance(message, StartTabletCopyRequest):
                if self.on_copy_request is None:
                    log.warning(
                        "tablet %s replica %s: no host handles a tablet copy from %s",
                        self.tablet_id,
                        self.uuid,
                        message.caller_uuid,
                    )
                else:
                    self.on_copy_request(message)
                return
            self._raft.step(message, _now_ms(), self.clock.now())
            self._drain()

    # -- tablet copy and config changes ----------------------------------------------------

    def copy_snapshot(self) -> ReplicaSnapshot:
        """The source side of a tablet copy: under ``copy_source``, open every listed
        tablet file and fix its size, then take the term, committed config, committed
        index and the log after its base (the files hold no entry the log lacks: the
        log is read after them). The caller closes the snapshot's files."""
        with self.copy_source() as src:
            files: list[tuple[str, int, IO[bytes]]] = []
            try:
                for rel in src.tablet_files:
                    fh: IO[bytes] = open(os.path.join(src.tablet_dir, rel), "rb")  # noqa: SIM115
                    files.append((rel, os.fstat(fh.fileno()).st_size, fh))
                with self._lock:
                    self._check_usable()
                    config = self._raft.committed_config
                    if self._raft.data_state is not DataState.READY or config is None:
                        raise OperationalError(
                            f"tablet {self.tablet_id} replica {self.uuid} has no data to copy"
                        )
                    return ReplicaSnapshot(
                        self._raft.current_term,
                        config,
                        self._raft.committed_index,
                        self._raft.log_base,
                        list(self._raft.log),
                        files,
                    )
            except BaseException:
                for _, _, f in files:
                    f.close()
                raise

    @property
    def copy_staging_dir(self) -> str:
        """Where a tablet copy writes the tablet's files before they go into place."""
        return os.path.join(self.directory, TABLET_DIR + STAGING_SUFFIX)

    def begin_copy(self, request: StartTabletCopyRequest) -> None:
        """The destination's first step: the core checks the leader (a rogue leader's
        copy is refused with ConsensusError) and the replica becomes COPYING, durably,
        before any byte of the copy is written; the staging directory is emptied."""
        with self._lock:
            self._check_usable()
            self._raft.start_tablet_copy(request, _now_ms())
            self._drain()
        _remove_tree(self.copy_staging_dir)

    def install_copy(
        self,
        current_term: int,
        committed_config: RaftConfig,
        committed_index: int,
        log_base: OpId,
        entries: list[ReplicateMsg],
    ) -> None:
        """The destination's last step, once ``receive_copy`` staged the tablet's files
        in ``copy_staging_dir``: write the copied log, move the staged tablet into
        place, open it (its applied index from its latest timestamp), save the
        committed index, then let the core take the copy (cmeta READY: the point where
        the copy counts) and apply the committed entries after what the tablet holds.
        A failure before READY leaves a tombstone (and the replica's data empty)."""
        with self._lock:
            self._check_usable()
            if self._raft.data_state is not DataState.COPYING:
                raise OperationalError(
                    f"tablet {self.tablet_id} replica {self.uuid}: no tablet copy is in progress"
                )
            try:
                self._replace_log(entries, log_base)
                self.tablet.close(flush=False)
                self._fail_all_waiters("was replaced by a tablet copy")
                path = os.path.join(self.directory, TABLET_DIR)
                _swap_in(self.copy_staging_dir, path)
                opts = self.options.tablet.with_(wal_fsync="none")
                self.tablet = Tablet.open(path, opts, clock=self.clock)
                self.applied_index = self._tablet_applied_index(log_base, entries)
                floor = max([self.tablet.meta.max_ts, *(e.timestamp for e in entries)])
                self.clock.observe(floor)
                _save_committed(self.directory, committed_index, floor)
                meta = ConsensusMetadata(current_term, None, committed_config, DataState.READY)
                self._raft.tablet_copy_complete(meta, entries, committed_index, _now_ms(), log_base)
            except BaseException:
                self._raft.tablet_copy_failed(_now_ms())
                self._drain()
                self._reset_data()
                raise
            self._drain()

    def _replace_log(self, entries: list[ReplicateMsg], preceding: OpId) -> None:
        """Make the consensus log exactly ``entries`` after ``preceding``, durably and
        atomically (``write_copied_log``), and reopen it (the lock held)."""
        self._log.close()
        path = os.path.join(self.directory, LOG_DIR)
        segment = self.options.log_segment_bytes
        write_copied_log(path, entries, preceding=preceding, segment_size=segment)
        self._log = ConsensusLog.open(path, create=False, segment_size=segment)

    def _reset_data(self) -> None:
        """An empty log and tablet in place of whatever a failed copy left (the lock
        held; the replica is a tombstone)."""
        with contextlib.suppress(Exception):
            self._log.close()
        with contextlib.suppress(Exception):
            self.tablet.close(flush=False)
        _clear_data(self.directory)
        self._log = ConsensusLog.open(
            os.path.join(self.directory, LOG_DIR),
            create=False,
            segment_size=self.options.log_segment_bytes,
        )
        opts = self.options.tablet.with_(wal_fsync="none")
        self.tablet = Tablet.create(
            os.path.join(self.directory, TABLET_DIR), self.schema, opts, clock=self.clock
        )
        self.applied_index = 0

    def copy_failed(self) -> None:
        """A copy that began here did not finish: the replica stays a tombstone (its
        staged files are removed)."""
        with self._lock:
            if self._usable():
                self._raft.tablet_copy_failed(_now_ms())
                self._drain()
        _remove_tree(self.copy_staging_dir)

    def change_config(self, change: ConfigChange) -> OpId:
        """Propose one server's config change as the leader (ConsensusError when the
        core refuses it: not the leader, a change pending, the compare-and-set failed)."""
        with self._lock:
            self._check_usable()
            opid = self._raft.change_config(change, _now_ms(), self.clock.now())
            self._drain()
            return opid

    def write(
        self,
        data: pa.Table,
        operation: str | None = None,
        *,
        op_column: str | None = None,
        timeout_s: float | None = None,
    ) -> WriteResult:
        """Replicate a batch through this replica, which must be the leader; returns the
        tablet's result once the entry is committed and applied here. Raises
        NotLeaderError (naming the leader), WriteLostError (a new leader replaced the
        entry: it never applies) or WriteTimeoutError (outcome unknown)."""
        payload = encode_write(data, operation, op_column)
        with self._lock:
            self._check_usable()
            try:
                opid = self._raft.replicate(payload, _now_ms(), self.clock.now())
            except ConsensusError as e:
                leader = self._raft.leader_uuid
                known = "unknown" if leader is None or leader == self.uuid else leader
                what = (
                    "is the leader but not ready yet (its first entry is not committed)"
                    if e.code == "LEADER_NOT_READY"
                    else "is not the leader"
                )
                raise NotLeaderError(
                    f"tablet {self.tablet_id}: replica {self.uuid} {what} (leader is {known})",
                    None if known == "unknown" else known,
                ) from None
            waiter = _Waiter(opid)
            self._waiters[opid.index] = waiter
            self._drain()
        timeout = self.options.write_timeout_s if timeout_s is None else timeout_s
        if not waiter.done.wait(timeout):
            with self._lock:
                if self._waiters.get(opid.index) is waiter:
                    del self._waiters[opid.index]
            if not waiter.done.is_set():
                raise WriteTimeoutError(
                    f"tablet {self.tablet_id}: write {opid} not committed within {timeout}s; "
                    "its outcome is unknown (it may still apply)"
                )
        if waiter.error is not None:
            raise waiter.error
        assert waiter.result is not None
        return waiter.result

    def safe_time(self) -> int:
        """The highest timestamp a snapshot read may use here now (0: none yet):
        everything that will ever commit at or below it is applied here."""
        with self._lock:
            if not self._usable():
                return 0
            return self._raft.safe_time(_now_ms(), self.clock.now())

    def wait_for_safe_time(self, snapshot: int, timeout_s: float | None = None) -> None:
        """Returns once a snapshot read at ``snapshot`` is repeatable and complete here
        (Kudu's wait for safe time); raises SafeTimeTimeoutError after ``timeout_s``.
        A snapshot within the clock error bound of this server's clock moves the clock
        past it first (a farther one is left for the tablet to refuse), so a leader
        serves a snapshot its clients saw elsewhere at once."""
        if snapshot <= self.clock.peek() + from_micros(MAX_CLOCK_ERROR_MICROS):
            self.clock.observe(snapshot)
        timeout = self.options.safe_time_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                self._check_usable()
                safe = self._raft.safe_time(_now_ms(), self.clock.now())
                # A snapshot at T sees the writes before T.
                if snapshot - 1 <= safe:
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    role = self._raft.role.value.lower()
                    raise SafeTimeTimeoutError(
                        f"tablet {self.tablet_id}: replica {self.uuid} ({role}) cannot serve "
                        f"a read at snapshot {describe(snapshot)} yet: its safe time is "
                        f"{describe(safe) if safe else 'not known'} after {timeout:g}s "
                        "(a follower without a live leader, or a leader without a majority)"
                    )
                self._progress.wait(min(left, self.options.tick_interval_s))

    # -- the contract ----------------------------------------------------------------------

    def _usable(self) -> bool:
        return not self._closed and self._failed is None

    def _check_usable(self) -> None:
        if self._closed:
            raise OperationalError(f"tablet {self.tablet_id} replica {self.uuid} is closed")
        if self._failed is not None:
            raise OperationalError(
                f"tablet {self.tablet_id} replica {self.uuid} failed: {self._failed}"
            )

    def _drain(self) -> None:
        """Handles the Ready of the inputs so far, and of the ``log_synced`` calls it
        makes, until there is none (the lock held)."""
        try:
            while True:
                ready = self._raft.take_ready()
                if not _has_work(ready):
                    self._progress.notify_all()
                    return
                self._handle(ready)
        except BaseException as e:
            # A log, cmeta or tablet failure: the replica's state on disk is behind its
            # state in memory, so it stops taking inputs (reopening recovers).
            self._failed = f"{type(e).__name__}: {e}"
            self._fail_all_waiters(f"failed ({self._failed})")
            log.exception("tablet %s replica %s failed", self.tablet_id, self.uuid)
            raise

    def _handle(self, ready: Ready) -> None:
        # 1. Term, vote, committed config, data state.
        if ready.meta is not None:
            self._cmeta.store(ready.meta)
        # 2. Truncate, then append. A tablet copy's log is in place already
        # (install_copy wrote it, durably, before the core took the copy).
        copied = ready.copied_log_base is not None
        if ready.truncate_after is not None and not copied:
            if ready.truncate_after < self._log.first_index - 1:
                # The data goes (a copy begins, or a tombstone): the log was GCed, so
                # an empty log replaces it whole.
                self._replace_log([], MINIMUM_OPID)
            else:
                self._log.truncate_after(ready.truncate_after)
            self._lose_waiters_after(ready.truncate_after)
        if ready.appends and not copied:
            self._log.append(ready.appends)
        # 3. A follower's answer counts its log: durable before it leaves.
        if ready.sync_before_send:
            self._log.sync()
        # 4. Send.
        for message in ready.messages:
            self._transport(message)
        # 3 (later). A leader's own appends: durable after its messages left, then
        # counted (the output of log_synced is the next Ready of this loop). After a
        # sync before sending, log_synced is a no-op the core ignores.
        if ready.appends:
            if not ready.sync_before_send:
                self._log.sync()
            self._raft.log_synced(ready.appends[-1].id, _now_ms())
        if ready.clock_update is not None:
            self.clock.observe(ready.clock_update)
        # After a tablet copy: the copied tablet (install_copy opened it) holds the
        # entries up to ``applied_index``; the committed ones after it apply now.
        if ready.reset_applied_to is not None:
            for entry in self._raft.log:
                if self.applied_index < entry.id.index <= ready.reset_applied_to:
                    self._apply(entry)
        # 4. Apply, in index order, each at its entry's HybridTime.
        for entry in ready.committed:
            if entry.id.index > self.applied_index:
                self._apply(entry)

    def _apply(self, entry: ReplicateMsg) -> None:
        index = entry.id.index
        if index != self.applied_index + 1:
            raise AssertionError(
                f"tablet {self.tablet_id} replica {self.uuid}: entry {entry.id} committed "
                f"after applied index {self.applied_index}"
            )
        result: WriteResult | None = None
        error: Exception | None = None
        if entry.op_type is OpType.WRITE:
            self._check_not_applied(entry)
            assert entry.payload is not None
            data, operation, op_column = decode_write(entry.payload)
            try:
                result = self.tablet.write(
                    data, operation, op_column=op_column, timestamp=entry.timestamp
                )
            except _DETERMINISTIC as e:
                error = e
        self.applied_index = index
        waiter = self._waiters.pop(index, None)
        if waiter is None:
            return
        if waiter.opid != entry.id:
            waiter.finish(None, self._lost(waiter, f"entry {entry.id} committed there"))
        else:
            waiter.finish(result, error)

    def _check_not_applied(self, entry: ReplicateMsg) -> None:
        """An entry's timestamp is above every one the tablet holds (timestamps increase
        with the index): one at or below would apply a second time."""
        if entry.timestamp <= self.tablet.meta.max_ts:
            raise AssertionError(
                f"tablet {self.tablet_id} replica {self.uuid}: entry {entry.id} at "
                f"{entry.timestamp} is not above the tablet's latest timestamp "
                f"{self.tablet.meta.max_ts}: it would apply twice"
            )

    def _lost(self, waiter: _Waiter, why: str) -> WriteLostError:
        return WriteLostError(
            f"tablet {self.tablet_id}: write {waiter.opid} was lost to a leader change "
            f"({why}); it was not applied"
        )

    def _lose_waiters_after(self, index: int) -> None:
        for i in [i for i in self._waiters if i > index]:
            waiter = self._waiters.pop(i)
            waiter.finish(None, self._lost(waiter, f"the log was truncated after {index}"))

    def _fail_all_waiters(self, why: str) -> None:
        waiters, self._waiters = self._waiters, {}
        for waiter in waiters.values():
            waiter.finish(
                None,
                OperationalError(
                    f"tablet {self.tablet_id} replica {self.uuid} {why} before write "
                    f"{waiter.opid} committed; its outcome is unknown"
                ),
            )

    # -- durable applied state and log GC --------------------------------------------------

    def _save_progress(self) -> None:
        """Save the committed index as far as this replica's log holds it durably (the
        lock held)."""
        committed = min(self._raft.committed_index, self._log.synced_index)
        _save_committed(self.directory, committed, self._raft.ht_floor)

    def flush_and_gc(self, *, flush: bool | None = None) -> int:
        """One run of the log GC driver: flush the tablet's in-memory stores (``flush``
        True: always; None: when they hold more than the tablet's
        ``flush_threshold_bytes``), make every applied entry durable in the tablet,
        save the committed index, and delete the consensus log segments nothing needs
        (module docstring). Returns how many segments were deleted."""
        with self._gc_lock:
            if not self._usable() or not self.data_ready:
                return 0
            tablet = self.tablet
            if flush or (
                flush is None and tablet.memory_bytes() >= tablet.options.flush_threshold_bytes
            ):
                # The tablet's own locks serialize its flushes with the applies.
                tablet.flush()
                tablet.flush_deltas()
            with self._lock:
                if not self._usable() or tablet is not self.tablet or not self.data_ready:
                    return 0
                # Every applied entry is in the tablet's WAL: durable with it, the
                # tablet holds them after any crash.
                tablet.sync_log()
                self._save_progress()
                up_to = self._gc_bound(self.applied_index)
                if up_to is None:
                    return 0
                deleted = self._log.gc(up_to)
                if deleted:
                    self._raft.log_gc(self._log.first_index - 1)
                return deleted

    def _gc_bound(self, durable_applied: int) -> int | None:
        """The index below which whole segments go (None: none goes). Segments below
        the durable applied index may go; a leader keeps those its peers still need,
        but at most ``log_max_segments_to_retain``; at least
        ``log_min_segments_to_retain`` always stay, and none while a copy runs."""
        if self._copy_anchors:
            return None
        segs = self._log.segments()
        opts = self.options

        def leading(below: int) -> int:
            n = 0
            for seg in segs[:-1]:
                if seg.last.index >= below:
                    break
                n += 1
            return n

        k = leading(durable_applied + 1)
        needs = self._raft.peer_match_indexes()
        if needs:
            for_peers = leading(min(needs.values()) + 1)
            k = min(k, max(for_peers, len(segs) - opts.log_max_segments_to_retain))
        k = min(k, len(segs) - max(1, opts.log_min_segments_to_retain))
        if k <= 0:
            return None
        return segs[k - 1].last.index + 1

    def peers_needing_copy(self) -> list[str]:
        """The peers this leader cannot catch up from its log any more: they need a
        tablet copy (empty on a follower)."""
        with self._lock:
            return self._raft.peers_needing_copy()

    @property
    def log_first_index(self) -> int:
        """The first entry the consensus log still holds (1 until the log GC ran)."""
        return self._log.first_index

    @contextlib.contextmanager
    def copy_source(self) -> Iterator[CopySource]:
        """Hold a consistent source for a tablet copy (what a copy ships: CopySource).

        While held, the log GC deletes no consensus log segment and the tablet runs no
        flush or compaction, so the listed files stay as they are; writes go on (a
        bulk-loaded write waits for the end of the copy; the holding thread itself must
        not flush: the maintenance lock is reentrant). The tablet files are any
        state a crash could leave: a destination opens them as a reopened replica
        does (its applied index from the tablet's latest timestamp), then takes the
        consensus log entries from ``log_first_index`` on, every one the tablet does
        not hold among them."""
        with self._lock:
            self._check_usable()
            self._copy_anchors += 1
            first = self._log.first_index
        try:
            # Never wait for the replica's lock while holding the tablet's maintenance
            # lock: an apply of a bulk-loaded write holds the first and waits for the second.
            with self.tablet.maintaining():
                tablet_dir = os.path.join(self.directory, TABLET_DIR)
                files = tuple(_tablet_files(tablet_dir))
                source = CopySource(
                    tablet_dir,
                    files,
                    self.applied_index,
                    first,
                    self._log.last_opid(),
                    self._raft.committed_index,
                )
                yield source
        finally:
            with self._lock:
                self._copy_anchors -= 1

    def _run_gc(self) -> None:
        while not self._stop.wait(self.options.log_gc_interval_s):
            try:
                self.flush_and_gc()
            except Exception:
                log.exception("tablet %s replica %s: log GC failed", self.tablet_id, self.uuid)

    def _run_timer(self) -> None:
        while not self._stop.wait(self.options.tick_interval_s):
            try:
                self.tick()
            except Exception:
                return  # _drain recorded and logged the failure


def _save_committed(directory: str, committed_index: int, ht_floor: int) -> None:
    body = {"committed_index": committed_index, "ht_floor": ht_floor}
    save_json(os.path.join(directory, COMMITTED_FILE), _COMMITTED_MAGIC, _COMMITTED_VERSION, body)


def _remove_tree(path: str) -> None:
    if os.path.lexists(path):
        shutil.rmtree(path)


def _clear_data(directory: str) -> None:
    """Leave ``directory`` (a replica that holds no data) with an empty consensus log,
    no tablet and ``replica.committed`` at 0."""
    for name in (
        LOG_DIR,
        LOG_DIR + COPYING_SUFFIX,
        LOG_DIR + DELETING_SUFFIX,
        TABLET_DIR,
        TABLET_DIR + STAGING_SUFFIX,
        TABLET_DIR + DELETING_SUFFIX,
    ):
        _remove_tree(os.path.join(directory, name))
    ConsensusLog.open(os.path.join(directory, LOG_DIR), create=True).close()
    _save_committed(directory, 0, 0)
    fsync_dir(directory)


def _swap_in(staged: str, path: str) -> None:
    """Move the staged tablet to ``path``: the old one aside and removed, the staged
    one renamed into place, the parent fsynced."""
    parent = os.path.dirname(path)
    old = path + DELETING_SUFFIX
    _remove_tree(old)
    if os.path.lexists(path):
        os.rename(path, old)
    os.rename(staged, path)
    fsync_dir(parent)
    _remove_tree(old)


def _tablet_files(tablet_dir: str) -> list[str]:
    """The files of a tablet a copy ships: its superblock, every file of the rowsets it
    lists, and its WAL segments; relative to ``tablet_dir``."""
    meta = tablet_metadata.load(tablet_dir)
    files = [tablet_metadata.META_FILE]
    for rs in meta.rowsets:
        rdir = os.path.join("rowsets", f"{rs.id:08d}")
        files.extend(os.path.join(rdir, name) for name in sorted(rs.file_names()))
    wal = os.path.join(tablet_dir, TABLET_WAL_DIR)
    if os.path.isdir(wal):
        files.extend(os.path.join(TABLET_WAL_DIR, n) for n in sorted(os.listdir(wal)))
    return files


def _has_work(ready: Ready) -> bool:
    return bool(
        ready.meta is not None
        or ready.truncate_after is not None
        or ready.appends
        or ready.messages
        or ready.committed
        or ready.clock_update is not None
        or ready.reset_applied_to is not None
    )
