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
import json
import logging
import os
import random
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa

from kudusql.cluster.errors import RequestStale
from kudusql.cluster.tserver.result_tracker import RequestId, ResultTracker, RpcState
from kudusql.common.errors import (
    DataError,
    IntegrityError,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
)
from kudusql.common.hybrid_time import HybridClock, to_micros
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
    ConsensusError,
    ConsensusMetadata,
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
LOG_DIR = "wal"
TABLET_DIR = "tablet"
_MAGIC = b"KSQLTREP"
_VERSION = 1
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


@dataclass(frozen=True)
class ReplicaOptions:
    """Timers in seconds; ``raft`` carries the consensus flags (milliseconds)."""

    raft: RaftOptions = field(default_factory=RaftOptions)
    #: The timer thread's period (a fraction of the heartbeat interval).
    tick_interval_s: float = 0.05
    #: How long ``write`` waits for its entry to commit and apply.
    write_timeout_s: float = 10.0
    tablet: TabletOptions = field(default_factory=TabletOptions)


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
                log.warning(
                    "tablet %s replica %s: tablet copy from %s is not supported yet",
                    self.tablet_id,
                    self.uuid,
                    message.caller_uuid,
                )
                return
            self._raft.step(message, _now_ms(), self.clock.now())
            self._drain()

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
        # 4. Apply, in index order, each at its entry's HybridTime.
        for entry in ready.committed:
            self._apply(entry)
        if ready.clock_update is not None:
            self.clock.observe(ready.clock_update)
        if ready.reset_applied_to is not None:
            raise NotSupportedError("tablet copy is not supported by this host yet")

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
            result, error = self._apply_write(entry)
        self.applied_index = index
        waiter = self._waiters.pop(index, None)
        if waiter is None:
            return
        if waiter.opid != entry.id:
            waiter.finish(None, self._lost(waiter, f"entry {entry.id} committed there"))
        else:
            waiter.finish(result, error)

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

    def _apply_alter(
        self, entry: ReplicateMsg, schema: Schema, schema_version: int
    ) -> tuple[WriteResult | None, Exception | None]:
        """Apply a committed ALTER_SCHEMA entry (a version at or below the applied one
        is a no-op: the master may ask twice)."""
        if self.schema_version is not None and schema_version <= self.schema_version:
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
