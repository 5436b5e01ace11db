"""The tablet server's RPC face: ``TabletServer``, an ``RpcServer`` of kind "tablet
server" that serves the calls of ``messages.py`` over the tablets of a
``TabletManager``.

The server and its tablets share one HybridClock: the RPC layer moves it past every
request's timestamp before a handler runs, and every write is stamped by it, so a
write that follows a client's read is stamped after it.
"""

from __future__ import annotations

import pyarrow as pa

from kudusql.cluster.errors import MalformedMessage
from kudusql.cluster.messages import decode_arrow, encode_arrow
from kudusql.cluster.rpc_server import RpcServer
from kudusql.cluster.security import TlsFiles
from kudusql.cluster.tserver.messages import (
    AlterTablet,
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
from kudusql.cluster.tserver.superblock import TabletEntry
from kudusql.cluster.tserver.tablet_manager import TabletManager, parse_schema
from kudusql.common.hybrid_time import HybridClock
from kudusql.common.options import TabletOptions
from kudusql.common.types import display_value

__all__ = ["TabletServer"]


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
    ) -> None:
        clock = HybridClock()
        self.tablets = TabletManager(
            directory, clock=clock, options=options, maintenance=maintenance
        )
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

    def on_tablets_changed(self) -> None:
        """Called after a tablet is created, altered or deleted (the heartbeater sets it
        to report the change at once, as Kudu's ``TriggerASAP``)."""

    def close(self) -> None:
        """Close every tablet (WALs synced) and release the directory."""
        self.tablets.close()

    # -- handlers -------------------------------------------------------------------------

    def _create(self, r: CreateTablet) -> TabletChanged:
        entry = self.tablets.create_tablet(
            r.tablet_id,
            table_id=r.table_id,
            table_name=r.table_name,
            partition=r.partition,
            schema=parse_schema(r.schema),
            schema_version=r.schema_version,
        )
        self.on_tablets_changed()
        return _changed(entry)

    def _alter(self, r: AlterTablet) -> TabletChanged:
        entry = self.tablets.alter_tablet(r.tablet_id, parse_schema(r.schema), r.schema_version)
        self.on_tablets_changed()
        return _changed(entry)

    def _delete(self, r: DeleteTablet) -> TabletChanged:
        entry = self.tablets.delete_tablet(r.tablet_id)
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
            updated_tablets=[ReportedTabletInfo(t, v) for t, v in tablets],
            removed_tablet_ids=[],
        )

    def _write(self, r: WriteRequest, batches: pa.RecordBatchReader) -> WriteResponse:
        data = batches.read_all()
        result = self.tablets.write(
            r.tablet_id,
            data,
            r.operation or None,
            op_column=r.op_column,
            atomic=r.atomic,
            check_only=r.check_only,
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
