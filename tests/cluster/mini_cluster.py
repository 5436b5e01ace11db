"""A ``MiniCluster`` (``kudusql.cluster.launcher``) for the tests: a master and three
tablet servers as real processes on ephemeral loopback ports, with short timeouts so a
dead server is noticed in about two seconds."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import pyarrow as pa

from kudusql.cluster.launcher import MiniCluster
from kudusql.cluster.master.messages import GetTableLocations, TableLocationsResponse
from kudusql.cluster.retry import RetryPolicy
from kudusql.cluster.rpc_client import RpcClient
from kudusql.cluster.tablet_partition import TabletPartition
from kudusql.cluster.tserver.messages import GetTabletReport, TabletReportResponse
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.storage.tables.partition import HashDimension, PartitionSchema, create_partitions
from tests.support.timing import scaled

T = TypeVar("T")

#: Seconds without a heartbeat before the test master calls a tablet server not live.
UNRESPONSIVE_TIMEOUT = 2.0

MASTER_FLAGS = [
    "--tserver-unresponsive-timeout",
    str(UNRESPONSIVE_TIMEOUT),
    "--tick-interval",
    "0.2",
]
TSERVER_FLAGS = ["--heartbeat-interval", "0.2"]


@contextmanager
def mini_cluster_at(
    root: Path,
    tservers: int = 3,
    *,
    tls: bool = False,
    replicas: int | None = None,
    tserver_flags: Sequence[str] = (),
) -> Iterator[MiniCluster]:
    """A started cluster under ``root`` (serving TLS with ``tls``), stopped (SIGTERM,
    then SIGKILL) however the block ends. ``replicas``: the master's default replication
    factor (None: the product's, 3 with three live tablet servers); ``tserver_flags``:
    added to every tablet server's."""
    extra = [] if replicas is None else ["--default-num-replicas", str(replicas)]
    cluster = MiniCluster(
        root,
        master_flags=[*MASTER_FLAGS, *extra],
        tserver_flags=[*TSERVER_FLAGS, *tserver_flags],
        start_timeout=scaled(30),
        tls=tls,
    )
    try:
        cluster.start(tservers)
        yield cluster
    finally:
        cluster.stop()


def eventually(check: Callable[[], T | None], what: str, timeout: float = 20) -> T:
    """Poll ``check`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + scaled(timeout)
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def id_name_rows(ids: range) -> pa.Table:
    """Rows of ``schema()``: each id with the name ``n<id>``."""
    return pa.table({"id": pa.array(list(ids), pa.int64()), "name": [f"n{i}" for i in ids]})


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


def partitions_text(buckets: int) -> list[str]:
    """The tablet partitions (``TabletPartition`` JSON, as a client sends them) of
    ``schema()`` hashed on ``id`` into ``buckets``."""
    ps = PartitionSchema(hash_dimensions=(HashDimension(("id",), buckets),))
    return [TabletPartition.of(ps, p).to_json() for p in create_partitions(ps, schema())]


def tserver_client(cluster: MiniCluster, address: str) -> RpcClient:
    return RpcClient(
        address,
        secret=cluster.secret,
        server_kind="tablet server",
        timeout=5,
        retry=RetryPolicy(max_attempts=3, deadline=5),
    )


def hosted_tablets(cluster: MiniCluster) -> dict[str, dict[str, int]]:
    """Every running tablet server's RUNNING tablets (id -> schema version), by address."""
    out = {}
    for daemon in cluster.running():
        if daemon.kind != "tserver":
            continue
        with tserver_client(cluster, daemon.address) as client:
            report = client.call(GetTabletReport())
        assert isinstance(report, TabletReportResponse)
        out[daemon.address] = {t.tablet_id: t.schema_version for t in report.updated_tablets}
    return out


def locations(master: RpcClient, name: str) -> TableLocationsResponse:
    response = master.call(GetTableLocations(name))
    assert isinstance(response, TableLocationsResponse)
    return response
