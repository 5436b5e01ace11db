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
import json
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

from kudusql.cluster.errors import RequestStale, SafeTimeTimeout
from kudusql.cluster.tserver.result_tracker import RequestId, ResultTracker, RpcState
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
    to_micros,
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
    "WriteOptions",
    "WriteTimeoutError",
    "decode_alter",
    "decode_write",
    "decode_write_entry",
    "encode_alter",
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
#: The version of a WRITE entry's payload this build writes (FORMAT.md); version 1
#: (no atomic flag, no request id) is still read and written for a plain write.
_WRITE_VERSION = 2
_WRITE_VERSION_1 = 1
#: The ``kind`` of a version 2 payload that alters the tablet's schema (absent: a write).
ALTER_SCHEMA = "alter_schema"

#: Seconds of entry time between two expiries of the replica's result tracker.
_RESULTS_GC_INTERVAL_S = 1.0

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


class SafeTimeTimeoutError(SafeTimeTimeout):
    """A snapshot read waited too long for the replica's safe time to reach its
    snapshot (a follower cut off from its leader, a leader without its lease): another
    replica, or the same one later, may serve it. It travels as ``SafeTimeTimeout``."""


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


@dataclass(frozen=True)
class WriteOptions:
    """What a WRITE entry carries besides its rows (payload version 2): ``atomic`` (the
    batch applies whole or not at all, on every replica alike) and the client's
    ``request_id`` (every replica records the write's result under it when it applies
    the entry, so a retry is answered, never applied again)."""

    atomic: bool = False
    request_id: RequestId | None = None


def encode_write(
    data: pa.Table,
    operation: str | None,
    op_column: str | None,
    options: WriteOptions | None = None,
) -> str:
    """A WRITE entry's payload: the batch as an Arrow IPC stream, base64, behind a
    version and the operation (FORMAT.md). Version 1 without ``options`` (nor atomic
    nor a request id), else version 2 with a JSON header."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, data.schema) as writer:
        writer.write_table(data)
    ipc = base64.b64encode(sink.getvalue().to_pybytes()).decode("ascii")
    op = "" if operation is None else operation
    col = "" if op_column is None else op_column
    if "\n" in op or "\n" in col:
        raise ProgrammingError("a write operation or op column name holds a newline")
    if options is None or (not options.atomic and options.request_id is None):
        return f"{_WRITE_VERSION_1}\n{op}\n{col}\n{ipc}"
    rid = options.request_id
    header = {
        "operation": op,
        "op_column": col,
        "atomic": options.atomic,
        "request_id": None
        if rid is None
        else {
            "client_id": rid.client_id,
            "seq_no": rid.seq_no,
            "first_incomplete_seq_no": rid.first_incomplete_seq_no,
        },
    }
    return f"{_WRITE_VERSION}\n{json.dumps(header, sort_keys=True)}\n{ipc}"


def encode_alter(schema: Schema, schema_version: int) -> str:
    """An ALTER_SCHEMA entry's payload: a version 2 WRITE payload whose header has
    ``kind`` ``alter_schema``, the new schema and its version, and no rows (FORMAT.md)."""
    header = {"kind": ALTER_SCHEMA, "schema": schema.to_dict(), "schema_version": schema_version}
    return f"{_WRITE_VERSION}\n{json.dumps(header, sort_keys=True)}\n"


def decode_alter(payload: str) -> tuple[Schema, int] | None:
    """The schema and version of an ALTER_SCHEMA payload; None for a write's."""
    version, _, rest = payload.partition("\n")
    if version != str(_WRITE_VERSION):
        return None
    head = rest.partition("\n")[0]
    try:
        header = json.loads(head)
        if header.get("kind") != ALTER_SCHEMA:
            return None
        return Schema.from_dict(header["schema"]), int(header["schema_version"])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise NotSupportedError(f"a version 2 entry's header is not valid: {exc}") from None


def request_key(payload: str) -> tuple[str, int] | None:
    """The (client id, sequence number) of a WRITE payload's request id, from its header
    alone (no rows decoded); None without one."""
    version, _, rest = payload.partition("\n")
    if version != str(_WRITE_VERSION):
        return None
    try:
        rid = json.loads(rest.partition("\n")[0]).get("request_id")
        return None if rid is None else (str(rid["client_id"]), int(rid["seq_no"]))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise NotSupportedError(f"a version 2 entry's header is not valid: {exc}") from None


def decode_write(payload: str) -> tuple[pa.Table, str | None, str | None]:
    """The batch, operation and op column of a WRITE payload (either version)."""
    data, operation, op_column, _ = decode_write_entry(payload)
    return data, operation, op_column


def decode_write_entry(
    payload: str,
) -> tuple[pa.Table, str | None, str | None, WriteOptions]:
    """The batch, operation, op column and options of a WRITE payload (version 1 has
    no options: not atomic, no request id)."""
    version, _, rest = payload.partition("\n")
    options = WriteOptions()
    if version == str(_WRITE_VERSION_1):
        parts = rest.split("\n", 2)
        if len(parts) != 3:
            raise NotSupportedError("a version 1 WRITE entry's payload lacks a field")
        op, col, ipc = parts
    elif version == str(_WRITE_VERSION):
        head, _, ipc = rest.partition("\n")
        try:
            header = json.loads(head)
            op, col = str(header["operation"]), str(header["op_column"])
            rid = header["request_id"]
            options = WriteOptions(
                bool(header["atomic"]),
                None
                if rid is None
                else RequestId(
                    str(rid["client_id"]), int(rid["seq_no"]), int(rid["first_incomplete_seq_no"])
                ),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise NotSupportedError(
                f"a version 2 WRITE entry's header is not valid: {exc}"
            ) from None
    else:
        raise NotSupportedError(
            f"a WRITE entry's payload is of version {version[:8]!r}; this build reads"
            f" versions {_WRITE_VERSION_1} and {_WRITE_VERSION}"
        )
    with pa.ipc.open_stream(pa.py_buffer(base64.b64decode(ipc))) as reader:
        table = reader.read_all()
    return table, op or None, col or None, options


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
        #: Exactly-once writes: each applied WRITE entry's result under its request id.
        #: Filled only as entries apply, in log order, with the entry's HybridTime as
        #: the clock, so it is the same on every replica at the same applied index (and
        #: rebuilt by the replay at open).
        self.results: ResultTracker[WriteResult] = ResultTracker()
        self._results_gc_at = 0.0
        #: (client id, seq no) -> the OpId of this leader's appended, not yet applied
        #: entry of that request: a retry waits for it instead of appending another.
        self._pending: dict[tuple[str, int], OpId] = {}
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
            #: The schema version of the last ALTER_SCHEMA entry applied (None: the
            #: tablet is at the schema it was created with).
            self.schema_version: int | None = None
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
            #: Requests whose entries the reopened tablet already holds: they are not
            #: replayed, so their results are not known here; a retry of one is refused
            #: and never applied again.
            self._applied_before_open: set[tuple[str, int]] = set()
            self._note_held_entries(entries)
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

    def _note_held_entries(self, entries: list[ReplicateMsg]) -> None:
        """What the entries the tablet already holds (up to ``applied_index``) leave
        besides rows: their request ids (a retry of one is refused, never applied
        again) and the schema version of the last alter among them."""
        for entry in entries:
            if entry.id.index > self.applied_index:
                break
            if entry.op_type is OpType.WRITE and entry.payload is not None:
                key = request_key(entry.payload)
                if key is not None:
                    self._applied_before_open.add(key)
                altered = decode_alter(entry.payload)
                if altered is not None and altered[0] == self.tablet.schema:
                    self.schema_version = altered[1]

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
                # The copied tablet's history replaces this replica's own.
                self.results = ResultTracker()
                self._results_gc_at = 0.0
                self._pending.clear()
                self._applied_before_open.clear()
                self.schema_version = None
                self._note_held_entries(entries)
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
        atomic: bool = False,
        request_id: RequestId | None = None,
        timeout_s: float | None = None,
    ) -> WriteResult:
        """Replicate a batch through this replica, which must be the leader; returns the
        tablet's result once the entry is committed and applied here. Raises
        NotLeaderError (naming the leader), WriteLostError (a new leader replaced the
        entry: it never applies) or WriteTimeoutError (outcome unknown).

        ``atomic``: the batch applies whole or not at all (a rejected batch answers its
        row errors with timestamp 0). ``request_id``: a write this replica has already
        applied under that id (committed by any leader) is answered with its first
        result and not applied again; one still in flight here is waited for; one whose
        result is forgotten is ``RequestStale``."""
        payload = encode_write(data, operation, op_column, WriteOptions(atomic, request_id))
        key = None if request_id is None else (request_id.client_id, request_id.seq_no)
        with self._lock:
            self._check_usable()
            waiter: _Waiter | None = None
            if request_id is not None and key is not None:
                known = self.results.peek(request_id)
                if known.state is RpcState.COMPLETED:
                    assert known.response is not None
                    log.info(
                        "tablet %s: write %s is a retry of an applied write, answered",
                        self.tablet_id,
                        request_id.describe(),
                    )
                    return known.response
                if key in self._applied_before_open:
                    raise self._applied_unknown(request_id)
                if known.state is RpcState.STALE:
                    raise RequestStale(
                        f"write {request_id.describe()} to tablet {self.tablet_id} is stale:"
                        " its result is no longer remembered (it may or may not have been"
                        " applied; it is not applied again)"
                    )
                pending = self._pending.get(key)
                if pending is not None:
                    waiter = self._waiters.get(pending.index)
                    if waiter is None or waiter.opid != pending:
                        waiter = self._waiters[pending.index] = _Waiter(pending)
            if waiter is None:
                waiter = self._submit(payload, key)
        return self._wait(waiter, timeout_s)

    def alter_schema(
        self, schema: Schema, schema_version: int, *, timeout_s: float | None = None
    ) -> None:
        """Replicate an ALTER_SCHEMA entry through this replica, which must be the
        leader; returns once it is committed and applied here (every replica applies it
        at its index: writes before it see the old schema, writes after the new).
        Raises as ``write`` does."""
        with self._lock:
            self._check_usable()
            if self.schema_version is not None and schema_version <= self.schema_version:
                return
            waiter = self._submit(encode_alter(schema, schema_version), None)
        self._wait(waiter, timeout_s)

    def _submit(self, payload: str, key: tuple[str, int] | None) -> _Waiter:
        """Append an entry as the leader and register its waiter (the lock held)."""
        opid = self._replicate(payload)
        waiter = _Waiter(opid)
        self._waiters[opid.index] = waiter
        if key is not None:
            self._pending[key] = opid
        self._drain()
        return waiter

    def _replicate(self, payload: str) -> OpId:
        try:
            return self._raft.replicate(payload, _now_ms(), self.clock.now())
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

    def _wait(self, waiter: _Waiter, timeout_s: float | None) -> WriteResult:
        opid = waiter.opid
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
        past it first, so a leader serves a snapshot its clients saw elsewhere at once;
        a farther one returns at once, for the tablet to refuse."""
        if snapshot > self.clock.peek() + from_micros(MAX_CLOCK_ERROR_MICROS):
            return  # in the future: the tablet refuses it, naming it
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

    def wait_for_lease(self, timeout_s: float | None = None) -> None:
        """Returns once this replica may serve a read of its latest state: it is the
        leader, its own term's first entry is committed, and it holds its lease (a read
        of the latest on anything else could miss a write another leader acknowledged).
        Raises NotLeaderError (naming the leader it knows) on a replica that is not the
        leader, SafeTimeTimeoutError when a leader's lease does not come back in time."""
        timeout = self.options.safe_time_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                self._check_usable()
                if self._raft.holds_lease(_now_ms()):
                    return
                if not self._raft.is_leader:
                    leader = self._raft.leader_uuid
                    known = "unknown" if leader is None or leader == self.uuid else leader
                    raise NotLeaderError(
                        f"tablet {self.tablet_id}: replica {self.uuid} is not the leader"
                        f" (leader is {known}); a read of the latest goes to the leader",
                        None if known == "unknown" else known,
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SafeTimeTimeoutError(
                        f"tablet {self.tablet_id}: replica {self.uuid} leads but holds no"
                        f" lease after {timeout:g}s (it has not heard from a majority), so"
                        " it cannot serve a read of the latest"
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
            result, error = self._apply_write(entry)
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

    def _apply_write(self, entry: ReplicateMsg) -> tuple[WriteResult | None, Exception | None]:
        """Apply a committed WRITE entry at its HybridTime, exactly once per request id:
        an entry whose request is already COMPLETED here (or forgotten: STALE) applies
        nothing and answers the stored result (or RequestStale). The same entries in the
        same order give every replica the same tablet and the same results."""
        assert entry.payload is not None
        altered = decode_alter(entry.payload)
        if altered is not None:
            return self._apply_alter(entry, *altered)
        data, operation, op_column, options = decode_write_entry(entry.payload)
        rid = options.request_id
        now = to_micros(entry.timestamp) / 1e6
        if rid is not None:
            self._pending.pop((rid.client_id, rid.seq_no), None)
            if (rid.client_id, rid.seq_no) in self._applied_before_open:
                return None, self._applied_unknown(rid)
            if now - self._results_gc_at >= _RESULTS_GC_INTERVAL_S:
                self.results.gc(now)
                self._results_gc_at = now
            tracked = self.results.track(rid, now)
            if tracked.state is RpcState.COMPLETED:
                return tracked.response, None
            if tracked.state is not RpcState.NEW:
                return None, RequestStale(
                    f"write {rid.describe()} to tablet {self.tablet_id} is stale or"
                    " duplicated in the log: not applied again"
                )
        result: WriteResult | None = None
        error: Exception | None = None
        try:
            if options.atomic:
                try:
                    result = self.tablet.write(
                        data,
                        operation,
                        op_column=op_column,
                        timestamp=entry.timestamp,
                        atomic=True,
                    )
                except (IntegrityError, DataError):
                    # Rejected whole: each row's error, as the check finds them (the
                    # same on every replica: the same state).
                    result = WriteResult(
                        0, 0, 0, self.tablet.check_write(data, operation, op_column=op_column)
                    )
            else:
                result = self.tablet.write(
                    data, operation, op_column=op_column, timestamp=entry.timestamp
                )
        except _DETERMINISTIC as e:
            error = e
        if rid is not None:
            if result is not None:
                self.results.complete(rid, result, now)
            else:
                self.results.fail(rid)
        return result, error

    def _applied_unknown(self, rid: RequestId) -> RequestStale:
        return RequestStale(
            f"write {rid.describe()} to tablet {self.tablet_id} was applied before replica"
            f" {self.uuid} last opened; its result is no longer known here (it is not"
            " applied again)"
        )

    def _apply_alter(
        self, entry: ReplicateMsg, schema: Schema, schema_version: int
    ) -> tuple[WriteResult | None, Exception | None]:
        """Apply a committed ALTER_SCHEMA entry (a version at or below the applied one
        is a no-op: the master may ask twice)."""
        if self.schema_version is not None and schema_version <= self.schema_version:
            return WriteResult(entry.timestamp, 0, 0, []), None
        if self.tablet.schema == schema:
            # The reopened tablet already holds it (an alter leaves no timestamp).
            self.schema_version = schema_version
            return WriteResult(entry.timestamp, 0, 0, []), None
        try:
            self.tablet.alter_schema(schema)
        except _DETERMINISTIC as e:
            return None, e
        self.schema_version = schema_version
        log.info(
            "tablet %s replica %s: schema version %d applied at %s",
            self.tablet_id,
            self.uuid,
            schema_version,
            entry.id,
        )
        return WriteResult(entry.timestamp, 0, 0, []), None

    def _lost(self, waiter: _Waiter, why: str) -> WriteLostError:
        return WriteLostError(
            f"tablet {self.tablet_id}: write {waiter.opid} was lost to a leader change "
            f"({why}); it was not applied"
        )

    def _lose_waiters_after(self, index: int) -> None:
        for key in [k for k, opid in self._pending.items() if opid.index > index]:
            del self._pending[key]
        for i in [i for i in self._waiters if i > index]:
            waiter = self._waiters.pop(i)
            waiter.finish(None, self._lost(waiter, f"the log was truncated after {index}"))

    def _fail_all_waiters(self, why: str) -> None:
        self._pending.clear()
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
