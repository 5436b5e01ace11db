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

The tablet is derived state. The consensus log is the only durable record of the
writes; the tablet's own WAL runs with fsync NONE, and opening a replica rebuilds the
tablet from an empty one by replaying the whole log as Raft learns which entries are
committed (nothing here knows the committed index durably yet, and no log is GCed).

Directory (FORMAT.md in this package): ``replica.meta`` (uuid, tablet id, schema),
``cmeta``, ``wal/`` (the consensus log), ``tablet/`` (the storage tablet).

The only thread is a timer that calls ``tick``. The transport is called with the lock
held: it must queue the message and return, never call back into this replica.
"""

from __future__ import annotations

import base64
import logging
import os
import random
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

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
from kudusql.consensus.opid import OpId
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
from kudusql.storage.consensus import ConsensusLog, ConsensusMetadataFile
from kudusql.storage.fs.lock import DirLock
from kudusql.storage.fs.meta_file import load_json, save_json
from kudusql.storage.tablet.tablet import Tablet

__all__ = [
    "NotLeaderError",
    "ReplicaOptions",
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
LOG_DIR = "wal"
TABLET_DIR = "tablet"
_MAGIC = b"KSQLTREP"
_VERSION = 1
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
            self._log = ConsensusLog.open(os.path.join(self.directory, LOG_DIR), create=False)
            entries = self._read_log()
            self.tablet = self._empty_tablet()
            #: The index of the last entry applied to the tablet (0: none).
            self.applied_index = 0
            # Nothing records the committed index durably: Raft learns it again from the
            # leader (or commits it anew), and each entry applies when it comes back in
            # ``Ready.committed``.
            self._raft = RaftReplica(
                self.uuid,
                meta,
                entries,
                0,
                options.raft,
                rng or random.Random(),
                _now_ms(),
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
        self._thread = threading.Thread(
            target=self._run_timer, name=f"replica-{self.tablet_id}-{self.uuid}", daemon=True
        )
        self._thread.start()

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
        """Bootstrap: cmeta and the log as they were durable; the tablet rebuilt from
        empty (the committed entries apply again as Raft learns the committed index);
        the timer started."""
        return cls(directory, transport, options or ReplicaOptions(), clock, rng)

    def _read_log(self) -> list[ReplicateMsg]:
        lg = self._log
        if lg.first_index != 1:
            raise NotSupportedError(
                f"consensus log {lg.directory} starts at entry {lg.first_index}: rebuilding "
                "the tablet needs the whole log (log GC is not supported yet)"
            )
        entries: list[ReplicateMsg] = []
        last = lg.last_opid().index
        while len(entries) < last:
            entries.extend(lg.entries(len(entries) + 1, last, 16 << 20))
        return entries

    def _empty_tablet(self) -> Tablet:
        path = os.path.join(self.directory, TABLET_DIR)
        # Whatever a previous run left is derived from the log: start again from empty.
        shutil.rmtree(path, ignore_errors=True)
        opts = self.options.tablet.with_(wal_fsync="none")
        return Tablet.create(path, self.schema, opts, clock=self.clock)

    def close(self) -> None:
        """Stop the timer and release the files; pending writes fail as unknown."""
        self._shutdown()
        with self._lock:
            self._fail_all_waiters("closed")
            self.tablet.close(flush=False)
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
        if self._thread is not threading.current_thread():
            self._thread.join()

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

    def copy_snapshot(self) -> tuple[int, RaftConfig, int, list[ReplicateMsg]]:
        """The source side of a tablet copy: the current term, committed config,
        committed index and whole log, one consistent snapshot."""
        with self._lock:
            self._check_usable()
            config = self._raft.committed_config
            if self._raft.data_state is not DataState.READY or config is None:
                raise OperationalError(
                    f"tablet {self.tablet_id} replica {self.uuid} has no data to copy"
                )
            return (
                self._raft.current_term,
                config,
                self._raft.committed_index,
                list(self._raft.log),
            )

    def install_copy(
        self,
        request: StartTabletCopyRequest,
        current_term: int,
        committed_config: RaftConfig,
        committed_index: int,
        entries: list[ReplicateMsg],
        *,
        pause_s: float = 0.0,
    ) -> None:
        """The destination side: become COPYING (the core refuses a rogue leader with
        ConsensusError), then take the copied log, committed index and config; the tablet
        is rebuilt from the log. ``pause_s`` (tests only) waits between the two steps."""
        with self._lock:
            self._check_usable()
            self._raft.start_tablet_copy(request, _now_ms())
            self._drain()
        if pause_s:
            time.sleep(pause_s)
        with self._lock:
            self._check_usable()
            meta = ConsensusMetadata(current_term, None, committed_config, DataState.READY)
            try:
                self._raft.tablet_copy_complete(meta, entries, committed_index, _now_ms())
            except BaseException:
                self._raft.tablet_copy_failed(_now_ms())
                self._drain()
                raise
            self._drain()

    def copy_failed(self) -> None:
        """A copy that began here did not finish: the replica stays a tombstone."""
        with self._lock:
            if self._usable():
                self._raft.tablet_copy_failed(_now_ms())
                self._drain()

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
        # 2. Truncate, then append.
        if ready.truncate_after is not None:
            self._log.truncate_after(ready.truncate_after)
            self._lose_waiters_after(ready.truncate_after)
        if ready.appends:
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
        # After a tablet copy: the tablet is what the copied log's committed prefix makes.
        if ready.reset_applied_to is not None:
            self._rebuild_tablet(ready.reset_applied_to)
        # 4. Apply, in index order, each at its entry's HybridTime.
        for entry in ready.committed:
            if entry.id.index > self.applied_index:
                self._apply(entry)

    def _rebuild_tablet(self, applied_to: int) -> None:
        self.tablet.close(flush=False)
        self.tablet = self._empty_tablet()
        self.applied_index = 0
        self._fail_all_waiters("was replaced by a tablet copy")
        for entry in self._raft.log[:applied_to]:
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

    def _run_timer(self) -> None:
        while not self._stop.wait(self.options.tick_interval_s):
            try:
                self.tick()
            except Exception:
                return  # _drain recorded and logged the failure


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
