"""The tablet server against real server processes on ephemeral loopback ports."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from kudusql.cluster.errors import MalformedMessage, TabletNotFound, Unauthenticated
from kudusql.cluster.messages import Ping
from kudusql.cluster.retry import RetryPolicy
from kudusql.cluster.rpc_client import RpcClient
from kudusql.cluster.security import write_secret_file
from kudusql.cluster.tablet_partition import TabletPartition
from kudusql.cluster.tserver.messages import (
    AlterTablet,
    CreateTablet,
    DeleteTablet,
    GetTabletReport,
    ScanRequest,
    TabletChanged,
    TabletReportResponse,
    WriteRequest,
    WriteResponse,
)
from kudusql.common.errors import KuduAlreadyPresent, ProgrammingError
from kudusql.common.hybrid_time import from_micros, to_micros, wall_micros
from kudusql.common.predicates import ColumnPredicate
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.storage.tables.partition import Partition, PartitionSchema, RangeBounds
from tests.cluster.tserver_process import TServerProcess

SECRET = "tserver-test-secret"
FAST = RetryPolicy(max_attempts=3, initial_backoff=0.02, max_backoff=0.1, deadline=2.0)


def schema(extra: bool = False) -> Schema:
    cols = [
        ColumnSchema("id", DataType.parse("BIGINT"), nullable=False),
        ColumnSchema("name", DataType.parse("STRING")),
    ]
    if extra:
        cols.append(ColumnSchema("score", DataType.parse("DOUBLE")))
    return Schema.build(cols, ["id"])


def schema_text(extra: bool = False) -> str:
    return json.dumps(schema(extra).to_dict())


#: The one partition of an unpartitioned table.
WHOLE = TabletPartition.of(
    PartitionSchema(), Partition((), RangeBounds(), b"", b"", b"", b"")
).to_json()


def create(tablet_id: str, extra: bool = False, version: int = 1) -> CreateTablet:
    return CreateTablet(tablet_id, "table-1", "people", WHOLE, schema_text(extra), version)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tserver")
    write_secret_file(path / "secret", SECRET)
    return path


@pytest.fixture(scope="module")
def tserver(workdir: Path) -> Iterator[TServerProcess]:
    process = TServerProcess(workdir / "ts1", workdir / "secret")
    try:
        yield process
    finally:
        assert process.stop() == 0
    # Every refused call above was a clear error, not a bug with a traceback.
    assert "Traceback" not in (workdir / "ts1" / "tserver.log").read_text()


def client(address: str, **kwargs: object) -> RpcClient:
    options: dict[str, object] = {"secret": SECRET, "server_kind": "tablet server"}
    options.update(kwargs)
    return RpcClient(address, **options)  # type: ignore[arg-type]


def write(c: RpcClient, tablet_id: str, rows: list[dict[str, object]], op: str) -> WriteResponse:
    table = pa.Table.from_pylist(
        rows, schema=pa.schema([("id", pa.int64()), ("name", pa.string())])
    )
    response = c.put(WriteRequest(tablet_id, op), table)
    assert isinstance(response, WriteResponse)
    return response


def scan(c: RpcClient, request: ScanRequest) -> list[dict[str, object]]:
    return c.get(request).to_pylist()  # type: ignore[no-any-return]


def test_create_write_scan_at_snapshot(tserver: TServerProcess) -> None:
    with client(tserver.address) as c:
        created = c.call(create("t-write"))
        assert created == TabletChanged("t-write", "RUNNING", 1)
        first = write(c, "t-write", [{"id": i, "name": f"n{i}"} for i in range(100)], "insert")
        assert (first.applied, first.row_errors) == (100, [])
        assert c.observed.value is not None and c.observed.value >= first.timestamp
        # Duplicate keys come back as per-row errors; the good rows apply.
        second = write(
            c, "t-write", [{"id": 5, "name": "dup"}, {"id": 200, "name": "new"}], "insert"
        )
        assert second.applied == 1 and second.timestamp > first.timestamp
        [error] = second.row_errors
        assert (error.index, error.op, error.key) == (0, "insert", "5")
        assert error.status == "AlreadyPresent"
        upsert = write(c, "t-write", [{"id": 5, "name": "five"}], "upsert")
        assert upsert.applied == 1
        # A snapshot sees the writes stamped before it: just after the first write,
        # exactly its rows; at it, none.
        assert scan(c, ScanRequest("t-write", snapshot_timestamp=first.timestamp)) == []
        after_first = ScanRequest("t-write", snapshot_timestamp=first.timestamp + 1, ordered=True)
        at_first = scan(c, after_first)
        assert at_first == [{"id": i, "name": f"n{i}"} for i in range(100)]
        # Now: projection and a predicate.
        latest = scan(
            c,
            ScanRequest(
                "t-write",
                columns=["name"],
                predicates=[ColumnPredicate.eq("id", 5).to_dict()],
            ),
        )
        assert latest == [{"name": "five"}]
        assert len(scan(c, ScanRequest("t-write"))) == 101


def test_create_alter_delete_are_idempotent(tserver: TServerProcess) -> None:
    with client(tserver.address) as c:
        assert c.call(create("t-ddl")) == c.call(create("t-ddl"))
        with pytest.raises(KuduAlreadyPresent, match="another table or schema"):
            c.call(create("t-ddl", extra=True))
        write(c, "t-ddl", [{"id": 1, "name": "a"}], "insert")
        altered = c.call(AlterTablet("t-ddl", schema_text(extra=True), 2))
        assert altered == TabletChanged("t-ddl", "RUNNING", 2)
        assert c.call(AlterTablet("t-ddl", schema_text(extra=True), 2)) == altered
        assert c.call(AlterTablet("t-ddl", schema_text(), 1)) == altered  # older: no-op
        assert scan(c, ScanRequest("t-ddl")) == [{"id": 1, "name": "a", "score": None}]
        report = c.call(GetTabletReport())
        assert isinstance(report, TabletReportResponse)
        assert ("t-ddl", 2) in {
            (t.tablet_id, t.schema_version) for t in report.report().updated_tablets
        }
        deleted = c.call(DeleteTablet("t-ddl", "dropped"))
        assert deleted == TabletChanged("t-ddl", "TOMBSTONED", 2)
        assert c.call(DeleteTablet("t-ddl", "dropped")) == deleted
        assert c.call(DeleteTablet("never-here")) == TabletChanged("never-here", "ABSENT", 0)
        with pytest.raises(KuduAlreadyPresent, match="was deleted"):
            c.call(create("t-ddl"))
        with pytest.raises(TabletNotFound, match="t-ddl is not hosted"):
            scan(c, ScanRequest("t-ddl"))
        later = c.call(GetTabletReport())
        assert isinstance(later, TabletReportResponse)
        assert later.sequence_number > report.sequence_number
        assert "t-ddl" not in {t.tablet_id for t in later.updated_tablets}


def test_unknown_tablet_is_tablet_not_found(tserver: TServerProcess) -> None:
    with client(tserver.address) as c:
        with pytest.raises(TabletNotFound, match="tablet nope is not hosted by this tablet server"):
            write(c, "nope", [{"id": 1, "name": "a"}], "insert")
        with pytest.raises(TabletNotFound):
            scan(c, ScanRequest("nope"))
        with pytest.raises(TabletNotFound):
            c.call(AlterTablet("nope", schema_text(), 2))


def test_bad_requests_get_clear_errors(tserver: TServerProcess) -> None:
    with client(tserver.address) as c:
        c.call(create("t-bad"))
        with pytest.raises(ProgrammingError, match="unknown write operation 'merge'"):
            write(c, "t-bad", [{"id": 1, "name": "a"}], "merge")
        with pytest.raises(MalformedMessage, match="not a valid schema"):
            c.call(CreateTablet("t-bad2", "table-1", "people", "", "{}", 1))
        with pytest.raises(ProgrammingError, match="bad tablet id"):
            c.call(create("../escape"))
        with pytest.raises(ProgrammingError, match="primary key"):
            other_key = Schema.build([ColumnSchema("k", DataType.parse("STRING"))], ["k"])
            c.call(AlterTablet("t-bad", json.dumps(other_key.to_dict()), 5))


def test_snapshot_ahead_of_the_clock(tserver: TServerProcess) -> None:
    with client(tserver.address) as c:
        c.call(create("t-future"))
        now = wall_micros()
        # Within the clock error bound: answered, and the clock moves past it, so a
        # later write is stamped after the snapshot it could otherwise have changed.
        ahead = from_micros(now + 2_000_000)
        assert scan(c, ScanRequest("t-future", snapshot_timestamp=ahead)) == []
        w = write(c, "t-future", [{"id": 1, "name": "a"}], "insert")
        assert w.timestamp > ahead
        assert scan(c, ScanRequest("t-future", snapshot_timestamp=ahead)) == []
        # Far ahead: refused with a clear error.
        far = from_micros(now + 60_000_000)
        with pytest.raises(ProgrammingError, match="is in the future"):
            scan(c, ScanRequest("t-future", snapshot_timestamp=far))
        assert to_micros(w.timestamp) < now + 60_000_000


def test_call_without_the_secret_is_refused(tserver: TServerProcess) -> None:
    with client(tserver.address, secret=None, retry=FAST) as c:
        with pytest.raises(Unauthenticated, match="unauthenticated"):
            c.call(create("t-unauth"))
        with pytest.raises(Unauthenticated):
            c.call(Ping())
    # The refused create touched nothing.
    with client(tserver.address) as c, pytest.raises(TabletNotFound):
        scan(c, ScanRequest("t-unauth"))


def test_acknowledged_writes_survive_sigkill(workdir: Path) -> None:
    process = TServerProcess(workdir / "ts-crash", workdir / "secret")
    try:
        with client(process.address) as c:
            c.call(create("t-crash"))
            acked = 0
            for b in range(20):
                rows = [{"id": b * 50 + i, "name": f"r{b}"} for i in range(50)]
                acked += write(c, "t-crash", rows, "insert").applied
            first = c.call(GetTabletReport())
        process.kill()
        process = process.restart()
        with client(process.address) as c:
            rows = scan(c, ScanRequest("t-crash", ordered=True))
            assert [r["id"] for r in rows] == list(range(acked))
            report = c.call(GetTabletReport())
            assert isinstance(report, TabletReportResponse)
            assert isinstance(first, TabletReportResponse)
            assert report.incarnation == first.incarnation + 1
            assert report.server_uuid == first.server_uuid
            assert [t.tablet_id for t in report.updated_tablets] == ["t-crash"]
            write(c, "t-crash", [{"id": 10_000, "name": "after"}], "insert")
        assert process.stop() == 0  # SIGTERM: a clean stop
        assert "tablet server stopped" in (workdir / "ts-crash" / "tserver.log").read_text()
    finally:
        process.stop()
