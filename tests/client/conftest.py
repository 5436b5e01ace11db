"""Fixtures for the client API tests: a real database in a temporary directory or, for
the tests marked ``ON_BOTH``, also the session's cluster.

``ON_BOTH`` runs a test once on an embedded database and once on the cluster of this
test process (``sql_cluster_url``, tests/conftest.py: a master and three tablet servers,
emptied of tables first), connected as kudu-python connects: ``connect(host, port)``
with the cluster's secret file. The ``client`` fixture (and ``table`` on it) gives
either; the test need not know which (``client.is_cluster`` says)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import kudusql.client as kudu
from tests.support.targets import empty

#: Run a test on an embedded database and on a cluster.
ON_BOTH = pytest.mark.parametrize("client_kind", ["embedded", "cluster"], indirect=True)


@pytest.fixture
def client_kind(request: pytest.FixtureRequest) -> str:
    """``embedded`` unless the test is marked ``ON_BOTH``."""
    return str(getattr(request, "param", "embedded"))


@pytest.fixture
def client(
    tmp_path: Path, client_kind: str, request: pytest.FixtureRequest
) -> Iterator[kudu.Client]:
    if client_kind == "cluster":
        url: str = request.getfixturevalue("sql_cluster_url")
        empty(url)
        address, _, query = url.removeprefix("kudusql://").partition("?")
        host, port = address.rsplit(":", 1)
        secret_file = query.removeprefix("secret_file=")
        c = kudu.connect(host, int(port), secret_file=secret_file)
    else:
        c = kudu.connect(str(tmp_path / "db"), maintenance=False)
    try:
        yield c
    finally:
        c.close()


def simple_schema() -> kudu.Schema:
    """key INT64 primary key, name STRING, value DOUBLE."""
    b = kudu.schema_builder()
    b.add_column("key").type(kudu.int64).nullable(False).primary_key()
    b.add_column("name", kudu.string)
    b.add_column("value", kudu.double)
    return b.build()


@pytest.fixture
def table(client: kudu.Client) -> kudu.Table:
    """A table hash-partitioned on key into 2 buckets, range-partitioned [0, 1000)."""
    parts = (
        kudu.Partitioning()
        .add_hash_partitions(["key"], 2)
        .set_range_partition_columns(["key"])
        .add_range_partition(0, 1000)
    )
    return client.create_table("t", simple_schema(), parts)
