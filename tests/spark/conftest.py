"""One local[2] Spark session for the Spark suite (marked ``spark``; skipped without
pyspark or Java), and a database with a table of every column type."""

from __future__ import annotations

import datetime
import decimal
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")
if shutil.which("java") is None:
    pytest.skip("Spark needs Java", allow_module_level=True)

from pyspark.sql import SparkSession

import kudusql
from tests.support.timing import scaled


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A plain session with the source's settings but no ``register`` call: every test
    relies on Spark finding ``pyspark_kudusql`` by itself."""
    from kudusql.spark.session import BUILD_SETTINGS, SETTINGS

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master("local[2]").appName("kudusql-tests")
    # Spark's own timeouts, as the suite's (tests/support/timing.py): a busy machine can
    # take longer than Spark's defaults (15 s, 120 s) to start a Python worker
    waits = {
        "spark.python.authenticate.socketTimeout": f"{scaled(15):.0f}s",
        "spark.network.timeout": f"{scaled(120):.0f}s",
    }
    confs = {**SETTINGS, **BUILD_SETTINGS, "spark.sql.shuffle.partitions": "2", **waits}
    for k, v in confs.items():
        builder = builder.config(k, v)
    s = builder.getOrCreate()
    yield s
    s.stop()


ALL_TYPES_DDL = (
    "CREATE TABLE {name} (id BIGINT PRIMARY KEY, b BOOLEAN, i8 TINYINT, i16 SMALLINT, "
    "i32 INT, f FLOAT, d DOUBLE, dec DECIMAL(12,2), s STRING, v VARCHAR(8), bin BINARY, "
    "dt DATE, ts TIMESTAMP, n BIGINT NOT NULL DEFAULT 7) "
    "PARTITION BY HASH (id) PARTITIONS 3"
)


def all_types_rows(n: int, start: int = 0) -> pa.Table:
    """``n`` rows with every type, NULLs in every nullable column now and then."""
    ids = list(range(start, start + n))

    def maybe(i: int, v: Any) -> Any:
        return None if i % 7 == 3 else v

    base_ts = datetime.datetime(2024, 2, 29, 12, 0, 0)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "b": pa.array([maybe(i, i % 2 == 0) for i in ids], pa.bool_()),
            "i8": pa.array([maybe(i, (i % 200) - 100) for i in ids], pa.int8()),
            "i16": pa.array([maybe(i, i * 3 - 500) for i in ids], pa.int16()),
            "i32": pa.array([maybe(i, i * 1000) for i in ids], pa.int32()),
            "f": pa.array([maybe(i, i / 4) for i in ids], pa.float32()),
            "d": pa.array([maybe(i, i * 1.5) for i in ids], pa.float64()),
            "dec": pa.array(
                [maybe(i, decimal.Decimal(i * 101) / 100) for i in ids], pa.decimal128(12, 2)
            ),
            "s": pa.array([maybe(i, f"name-{i:05d}") for i in ids], pa.string()),
            "v": pa.array([maybe(i, f"v{i % 50}") for i in ids], pa.string()),
            "bin": pa.array([maybe(i, bytes([i % 256, 0, 255])) for i in ids], pa.binary()),
            "dt": pa.array(
                [maybe(i, datetime.date(2020, 1, 1) + datetime.timedelta(days=i)) for i in ids],
                pa.date32(),
            ),
            "ts": pa.array(
                [maybe(i, base_ts + datetime.timedelta(seconds=i, microseconds=i)) for i in ids],
                pa.timestamp("us"),
            ),
            "n": pa.array(ids, pa.int64()),
        }
    )


def make_db(path: Path, rows: int = 0, name: str = "t") -> str:
    """A database at ``path`` with the all-types table ``name`` holding ``rows`` rows."""
    conn = kudusql.connect(str(path))
    try:
        cur = conn.cursor()
        cur.execute(ALL_TYPES_DDL.format(name=name))
        if rows:
            conn.session.db.table(name).insert(all_types_rows(rows))
    finally:
        conn.close()
    return str(path)


def kudusql_rows(db: str, sql: str) -> list[tuple[Any, ...]]:
    conn = kudusql.connect(db)
    try:
        cur = conn.cursor()
        cur.execute(sql)
        return list(cur.fetchall())
    finally:
        conn.close()
