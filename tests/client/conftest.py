"""Fixtures for the client API tests: a real database in a temporary directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import kudusql.client as kudu


@pytest.fixture
def client(tmp_path: Path) -> Iterator[kudu.Client]:
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
