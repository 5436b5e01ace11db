"""The tablet server's RPC face: ``TabletServer``, an ``RpcServer`` of kind "tablet
server" that serves the calls of ``messages.py`` over the tablets of a
``TabletManager``.

The server and its tablets share one HybridClock: the RPC layer moves it past every
request's timestamp before a handler runs, and every write is stamped by it, so a
write that follows a client's read is stamped after it.

A write with a request id is exactly-once: the server's ``ResultTracker`` (under the
server's lock; time from ``time.monotonic``) lets one attempt apply it and answers
every other attempt with that attempt's response.

A replicated tablet's replicas talk Raft through ``tserver_consensus`` calls: the
server's ``PeerMessenger`` sends its replicas' messages to the peer servers, and the
handler here hands a peer's messages to the named replica (one-way: the answers come
back as the replica's own outgoing messages).
"""

from __future__ import annotations

import dataclasses
import logging
import random
import threading
import time
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from kudusql.cluster.errors import (
    MalformedMessage,
    RequestStale,
    ServiceUnavailable,
    TabletNotFound,
)
from kudusql.cluster.messages import decode_arrow, encode_arrow
from kudusql.cluster.routes import route_for
from kudusql.cluster.rpc_server import RpcServer
from kudusql.cluster.security import TlsFiles
from kudusql.cluster.tserver.consensus_wire import decode_message
from kudusql.cluster.tserver.messages import (
    AlterTablet,
    ChangeConfig,
    ChangeConfigResponse,
    ConsensusAck,
    ConsensusRequest,
    CountRowsRequest,
    CountRowsResponse,
    CreateTablet,
    DeleteTablet,
    DiffScanRequest,
    FlushTablet,
    GetTabletReport,
    LookupRequest,
    LookupRows,
    LookupRowsRequest,
    ReportedTabletInfo,
    ScanRequest,
    TabletChanged,
    TabletReportResponse,
    TabletStatsRequest,
    TabletStatsResponse,
    WireRowError,
    WriteRequest,
    WriteResponse,
)
from kudusql.cluster.tserver.peer_messenger import PeerMessenger
from kudusql.cluster.tserver.result_tracker import (
    DEFAULT_CLIENTS_TTL,
    DEFAULT_RESPONSES_TTL,
    RequestId,
    ResultTracker,
    RpcState,
)
from kudusql.cluster.tserver.superblock import TabletEntry
from kudusql.cluster.tserver.tablet_copy import TabletCopyRequest, copy_stream
from kudusql.cluster.tserver.tablet_manager import TabletManager, parse_schema
from kudusql.cluster.tserver.tablet_replica import ReplicaOptions
from kudusql.common.hybrid_time import HybridClock
from kudusql.common.options import TabletOptions
from kudusql.common.types import display_value
from kudusql.consensus.messages import (
    ConsensusErrorCode,
    ConsensusStatus,
    StartTabletCopyRequest,
    UpdateConsensusRequest,
    UpdateConsensusResponse,
)
from kudusql.consensus.opid import MINIMUM_OPID
from kudusql.consensus.raft_consensus import RaftOptions

__all__ = [
    "DEFAULT_FOLLOWER_FAILED_S",
    "DEFAULT_RAFT_HEARTBEAT_MS",
    "LOSE_WRITE_RESPONSES_ENV",
    "LoseWriteResponses",
    "TabletServer",
    "replica_options",
]

log = logging.getLogger(__name__)

#: Seconds a duplicate of a write in progress waits for its driver before it is told
#: to try again (a write waits only for its WAL fsync, so this is generous).
IN_PROGRESS_WAIT = 30.0

#: Seconds between two passes of the result tracker's expiry.
TRACKER_GC_INTERVAL = 1.0

#: Test-only fault point (read by ``__main__``): ``every=N,sleep=S[,when=W][,seed=K]``.
LOSE_WRITE_RESPONSES_ENV = "KUDUSQL_TEST_LOSE_WRITE_RESPONSES"


#: Replicated tablets' Raft heartbeat interval (Kudu's default).
DEFAULT_RAFT_HEARTBEAT_MS = RaftOptions().heartbeat_interval_ms


#: Kudu's --follower_unavailable_considered_failed_sec.
DEFAULT_FOLLOWER_FAILED_S = RaftOptions().follower_unavailable_considered_failed_ms / 1000


def replica_options(
    heartbeat_ms: int,
    follower_failed_s: float = DEFAULT_FOLLOWER_FAILED_S,
    max_clock_error_ms: int | None = None,
) -> ReplicaOptions:
    """Replicated tablets' timers for a Raft heartbeat interval: the replica's timer
    ticks four times per heartbeat (at most every 50 ms); a leader evicts a follower it
    has not heard from for ``follower_failed_s`` seconds. ``max_clock_error_ms``
    (default a third of the election timeout: 500 ms at Kudu's defaults) is what leader
    leases leave for clock error; it must be below the election timeout."""
    if heartbeat_ms < 10:
        raise ValueError(f"a Raft heartbeat interval of {heartbeat_ms} ms is too short")
    if follower_failed_s <= 0:
        raise ValueError(f"a failed-follower timeout of {follower_failed_s} s is not positive")
    raft = RaftOptions(
        heartbeat_interval_ms=heartbeat_ms,
        follower_unavailable_considered_failed_ms=int(follower_failed_s * 1000),
    )
    error = raft.election_timeout_ms // 3 if max_clock_error_ms is None else max_clock_error_ms
    if not 0 <= error < raft.election_timeout_ms:
        raise ValueError(
            f"a clock error allowance of {error} ms leaves no leader lease: it must be below"
            f" the election timeout ({raft.election_timeout_ms} ms)"
        )
    return ReplicaOptions(
        raft=dataclasses.replace(raft, max_clock_error_ms=error),
        tick_interval_s=min(0.05, heartbeat_ms / 4000),
    )


@dataclass(frozen=True)
class LoseWriteResponses:
    """Test-only fault: after applying a tracked write, sleep ``sleep`` seconds before
    answering (past the client's per-attempt timeout, so its answer is lost and the
    client retries). It hits one write in ``every`` (the N-th, 2N-th, ... when ``seed``
    is None, else each with probability 1/N from a ``random.Random(seed)``). ``when``:
    ``after_complete`` sleeps once the response is recorded (a retry gets it at once),
    ``before_complete`` before (a retry finds the write in progress and waits)."""

    every: int
    sleep: float
    when: str = "after_complete"
    seed: int | None = None

    @classmethod
    def parse(cls, text: str) -> LoseWriteResponses:
        try:
            fields = dict(part.split("=", 1) for part in text.split(",") if part)
            fault = cls(
                int(fields.pop("every")),
                float(fields.pop("sleep")),
                fields.pop("when", "after_complete"),
                int(fields["seed"]) if "seed" in fields else None,
            )
            fields.pop("seed", None)
        except (KeyError, ValueError):
            raise ValueError(f"{LOSE_WRITE_RESPONSES_ENV}: cannot parse {text!r}") from None
        if fields or fault.every < 1 or fault.when not in ("after_complete", "before_complete"):
            raise ValueError(f"{LOSE_WRITE_RESPONSES_ENV}: cannot parse {text!r}")
        return fault


def _changed(entry: TabletEntry) -> TabletChanged:
    return TabletChanged(entry.tablet_id, entry.state, entry.schema_version)


class TabletServer(RpcServer):
    """A tablet server over ``directory``, listening on ``bind``; ``close`` after
    ``shutdown`` closes its tablets."""

    def __init__(
        self,
        directory: str,
        bind: str = "127.0.0.1:0",
        *,
        secret: str | None = None,
        tls: TlsFiles | None = None,
        options: TabletOptions | None = None,
        maintenance: bool = True,
        remember_clients_ttl: float = DEFAULT_CLIENTS_TTL,
        remember_responses_ttl: float = DEFAULT_RESPONSES_TTL,
        lose_write_responses: LoseWriteResponses | None = None,
        replica_options: ReplicaOptions | None = None,
    ) -> None:
        """``replica_options``: the timers of replicated tablets (Raft heartbeats)."""
        #: Exactly-once writes; every use is under ``_results_changed``'s lock.
        self._results: ResultTracker[WriteResponse] = ResultTracker(
            clients_ttl=remember_clients_ttl, responses_ttl=remember_responses_ttl
        )
        self._results_changed = threading.Condition()
        self._results_gc_at = 0.0
        self._fault = lose_write_responses
        self._fault_rng = random.Random(lose_write_responses.seed) if lose_write_responses else None
        self._fault_count = 0
        clock = HybridClock()
        self.messenger = PeerMessenger(
            secret=secret,
            tls_root=None if tls is None else str(tls.certificate),
            route=route_for(directory),
        )
        try:
            self.tablets = TabletManager(
                directory,
                clock=clock,
                options=options,
                maintenance=maintenance,
                messenger=self.messenger,
                replica_options=replica_options,
            )
        except BaseException:
            self.messenger.close()
            raise
        try:
            super().__init__(
                bind,
                kind="tablet server",
                secret=secret,
                tls=tls,
                clock=clock,
                server_uuid=self.tablets.server_uuid,
            )
        except BaseException:
            self.tablets.close()
            self.messenger.close()
            raise
        self.register_action(CreateTablet, self._create)
        self.register_action(AlterTablet, self._alter)
        self.register_action(DeleteTablet, self._delete)
        self.register_action(GetTabletReport, self._report)
        self.register_put(WriteRequest, self._write)
        self.register_get(ScanRequest, self._scan)
        self.register_get(LookupRequest, self._lookup)
        self.register_action(LookupRowsRequest, self._lookup_rows)
        self.register_get(DiffScanRequest, self._diff_scan)
        self.register_action(CountRowsRequest, self._count)
        self.register_action(TabletStatsRequest, self._stats)
        self.register_action(FlushTablet, self._flush)
        self.register_action(ConsensusRequest, self._consensus)
        self.register_action(ChangeConfig, self._change_config)
        self.register_get(TabletCopyRequest, self._tablet_copy)
        self.messenger.identify(self.uuid, str(self.address))
        self.tablets.on_changed = self._changed

    def _changed(self) -> None:
        self.on_tablets_changed()

    def on_tablets_changed(self) -> None:
        """Called after a tablet is created, altered or deleted (the heartbeater sets it
        to report the change at once, as Kudu's ``TriggerASAP``)."""

    def close(self) -> None:
        """Close every tablet (WALs synced) and release the directory."""
        self.tablets.close()
        self.messenger.close()

    # -- handlers -------------------------------------------------------------------------

    def _create(self, r: CreateTablet) -> TabletChanged:
        entry = self.tablets.create_tablet(
            r.tablet_id,
            table_id=r.table_id,
            table_name=r.table_name,
            partition=r.partition,
            schema=parse_schema(r.schema),
            schema_version=r.schema_version,
            raft_peers=(
                None if r.raft_peers is None else tuple((p.uuid, p.address) for p in r.raft_peers)
            ),
        )
        self.on_tablets_changed()
        return _changed(entry)

    def _consensus(self, r: ConsensusRequest) -> ConsensusAck:
        # Decoded whole before any is delivered: a malformed call delivers nothing.
        messages = [
            decode_message(m, f"tserver_consensus.messages[{i}]") for i, m in enumerate(r.messages)
        ]
        for m in messages:
            if m.dest_uuid != self.uuid:
                raise MalformedMessage(
                    f"a consensus message for tablet server {m.dest_uuid} reached {self.uuid}"
                )
        if r.sender_uuid and r.sender_address:
            self.messenger.set_address(r.sender_uuid, r.sender_address)
        try:
            replica = self.tablets.replica(r.tablet_id)
        except TabletNotFound:
            self._not_hosted(r, messages)
            return ConsensusAck(r.tablet_id, len(messages))
        for m in messages:
            replica.receive(m)
        return ConsensusAck(r.tablet_id, len(messages))

    def _not_hosted(self, r: ConsensusRequest, messages: list[Any]) -> None:
        """A peer's messages for a tablet this server has no replica of: a leader's
        update is answered TABLET_NOT_FOUND (the leader then asks for a tablet copy),
        its StartTabletCopy starts one; anything else is dropped."""
        for m in messages:
            if isinstance(m, StartTabletCopyRequest):
                self.tablets.copy_requested(r.tablet_id, m, r.sender_address)
            elif isinstance(m, UpdateConsensusRequest):
                status = ConsensusStatus(MINIMUM_OPID, None, 0, ConsensusErrorCode.TABLET_NOT_FOUND)
                self.messenger.send(
                    r.tablet_id,
                    UpdateConsensusResponse(
                        self.uuid, 0, m.caller_uuid, status, tablet_not_found=True
                    ),
                )

    def _change_config(self, r: ChangeConfig) -> ChangeConfigResponse:
        if r.change_type != "ADD_PEER":
            raise MalformedMessage(
                f"tserver_change_config: change type {r.change_type!r} is not ADD_PEER"
            )
        index = self.tablets.add_peer(
            r.tablet_id, r.peer_uuid, r.peer_address, r.cas_config_opid_index
        )
        return ChangeConfigResponse(r.tablet_id, index)

    def _tablet_copy(self, r: TabletCopyRequest) -> pa.RecordBatchReader:
        snapshot = self.tablets.copy_source(r.tablet_id)
        h = snapshot.header
        log.info(
            "tablet %s: serving a tablet copy (%d files, %d bytes, %d log entries after %s) to %s",
            r.tablet_id,
            len(h.files),
            sum(size for _, size in h.files),
            len(snapshot.entries),
            h.log_base,
            r.requester_uuid,
        )
        return copy_stream(snapshot)

    def _alter(self, r: AlterTablet) -> TabletChanged:
        entry = self.tablets.alter_tablet(r.tablet_id, parse_schema(r.schema), r.schema_version)
        self.on_tablets_changed()
        return _changed(entry)

    def _delete(self, r: DeleteTablet) -> TabletChanged:
        entry = self.tablets.delete_tablet(
            r.tablet_id, cas_config_index=r.cas_config_opid_index_less_or_equal
        )
        self.on_tablets_changed()
        if entry is None:
            return TabletChanged(r.tablet_id, "ABSENT", 0)
        return _changed(entry)

    def _report(self, r: GetTabletReport) -> TabletReportResponse:
        incarnation, seq, tablets = self.tablets.report()
        return TabletReportResponse(
            server_uuid=self.uuid,
            incarnation=incarnation,
            sequence_number=seq,
            is_incremental=False,
            updated_tablets=[ReportedTabletInfo.of(*t) for t in tablets],
            removed_tablet_ids=[],
        )

    def _write(self, r: WriteRequest, batches: pa.RecordBatchReader) -> WriteResponse:
        data = batches.read_all()
        rid = r.request_id
        if rid is None or r.check_only:
            return self._apply(r, data)
        if self.tablets.is_replicated(r.tablet_id):
            # Exactly-once through the tablet's log: every replica records the result
            # as it applies the entry (``TabletReplica.write``), so a retry that reaches
            # another leader is answered too.
            response = self._apply(r, data)
            if self._lose_this_response() and self._fault is not None:
                time.sleep(self._fault.sleep)
            return response
        stored = self._drive_or_wait(r.tablet_id, rid)
        if stored is not None:
            return stored
        try:
            response = self._apply(r, data)
        except BaseException:
            with self._results_changed:
                self._results.fail(rid)
                self._results_changed.notify_all()
            raise
        lose = self._lose_this_response()
        if lose and self._fault is not None and self._fault.when == "before_complete":
            time.sleep(self._fault.sleep)
        with self._results_changed:
            self._results.complete(rid, response, time.monotonic())
            self._results_changed.notify_all()
        if lose and self._fault is not None and self._fault.when == "after_complete":
            time.sleep(self._fault.sleep)
        return response

    def _drive_or_wait(self, tablet_id: str, rid: RequestId) -> WriteResponse | None:
        """None when this attempt is the driver of ``rid`` (it applies the write); else
        the stored response of the attempt that applied it, once there is one."""
        deadline = time.monotonic() + IN_PROGRESS_WAIT
        with self._results_changed:
            while True:
                now = time.monotonic()
                if now - self._results_gc_at >= TRACKER_GC_INTERVAL:
                    self._results.gc(now)
                    self._results_gc_at = now
                try:
                    tracked = self._results.track(rid, now)
                except ValueError as exc:
                    raise MalformedMessage(str(exc)) from None
                if tracked.state is RpcState.NEW:
                    return None
                if tracked.state is RpcState.COMPLETED:
                    assert tracked.response is not None
                    log.info("write %s to tablet %s: a retry, answered", rid.describe(), tablet_id)
                    return tracked.response
                if tracked.state is RpcState.STALE:
                    raise RequestStale(
                        f"write {rid.describe()} to tablet {tablet_id} is stale: this tablet"
                        " server no longer remembers its result (it may or may not have been"
                        " applied; it is not applied again)"
                    )
                if now >= deadline:
                    raise ServiceUnavailable(
                        f"write {rid.describe()} to tablet {tablet_id} is still in progress"
                        f" after {IN_PROGRESS_WAIT:.0f} s; try again"
                    )
                self._results_changed.wait(deadline - now)

    def _lose_this_response(self) -> bool:
        fault = self._fault
        if fault is None:
            return False
        with self._results_changed:
            self._fault_count += 1
            if fault.seed is None:
                return self._fault_count % fault.every == 0
            assert self._fault_rng is not None
            return self._fault_rng.randrange(fault.every) == 0

    def _apply(self, r: WriteRequest, data: pa.Table) -> WriteResponse:
        result = self.tablets.write(
            r.tablet_id,
            data,
            r.operation or None,
            op_column=r.op_column,
            atomic=r.atomic,
            check_only=r.check_only,
            request_id=r.request_id,
        )
        errors = [
            WireRowError(
                index=e.index,
                op=e.op.name.lower(),
                key=None if e.key is None else ", ".join(display_value(v) for v in e.key),
                status=e.status,
                message=e.message,
            )
            for e in result.errors
        ]
        return WriteResponse(result.timestamp, result.applied, result.ignored, errors)

    def _scan(self, r: ScanRequest) -> pa.RecordBatchReader:
        try:
            key_range = (
                None if r.key_lo is None else bytes.fromhex(r.key_lo),
                None if r.key_hi is None else bytes.fromhex(r.key_hi),
            )
        except ValueError:
            raise MalformedMessage("a scan's key bounds are not hex") from None
        return self.tablets.scan(
            r.tablet_id,
            r.columns,
            r.predicates or [],
            r.snapshot_timestamp,
            r.ordered,
            r.limit,
            key_range=key_range,
        )

    def _lookup(self, r: LookupRequest | LookupRowsRequest) -> pa.Table:
        keys = decode_arrow(r.keys, "a lookup's keys")
        return self.tablets.lookup(r.tablet_id, keys, r.columns, r.snapshot_timestamp)

    def _lookup_rows(self, r: LookupRowsRequest) -> LookupRows:
        return LookupRows(encode_arrow(self._lookup(r)))

    def _diff_scan(self, r: DiffScanRequest) -> pa.RecordBatchReader:
        return self.tablets.diff_scan(
            r.tablet_id, r.start_timestamp, r.end_timestamp, r.columns, r.predicates or []
        )

    def _count(self, r: CountRowsRequest) -> CountRowsResponse:
        return CountRowsResponse(
            r.tablet_id, self.tablets.count_rows(r.tablet_id, r.snapshot_timestamp)
        )

    def _flush(self, r: FlushTablet) -> TabletStatsResponse:
        self.tablets.flush(r.tablet_id)
        return TabletStatsResponse(r.tablet_id, **self.tablets.statistics(r.tablet_id))

    def _stats(self, r: TabletStatsRequest) -> TabletStatsResponse:
        return TabletStatsResponse(r.tablet_id, **self.tablets.statistics(r.tablet_id))
