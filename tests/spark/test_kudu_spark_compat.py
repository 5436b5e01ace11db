"""A kudu-spark job runs unchanged apart from ``kudu.master``: kudu-spark's source names,
operation names, Impala's table names and every option of kudu-spark's DefaultSource;
an unknown option warns; the Python workers' interpreter is checked."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import kudusql
from kudusql.common.errors import ProgrammingError
from kudusql.spark.context import KuduContext
from kudusql.spark.options import OPERATIONS, parse_options
from kudusql.spark.publish import open_writer
from kudusql.spark.repartition import routing_values, spark_partition
from kudusql.storage.tables.database import Database
from kudusql.storage.tables.partition import partition_for_batch
from tests.spark.conftest import kudusql_rows
from tests.spark.test_write import frame, kv_db, table
from tests.support.timing import scaled

pytestmark = pytest.mark.spark

#: Every option of kudu-spark's DefaultSource (DefaultSource.scala), with a valid value.
KUDU_SPARK_OPTIONS = {
    "kudu.operation": "upsert",
    "kudu.faultTolerantScan": "true",
    "kudu.scanLocality": "leader_only",
    "kudu.ignoreNull": "false",
    "kudu.ignoreDuplicateRowErrors": "false",
    "kudu.repartition": "true",
    "kudu.repartition.sort": "false",
    "kudu.scanRequestTimeoutMs": "30000",
    "kudu.socketReadTimeoutMs": "10000",
    "kudu.batchSize": "1048576",
    "kudu.keepAlivePeriodMs": "15000",
    "kudu.splitSizeBytes": "1048576",
    "kudu.handleSchemaDrift": "false",
    "kudu.useDriverMetadata": "true",
    "kudu.saslProtocolName": "kudu",
    "kudu.requireAuthentication": "true",
    "kudu.encryptionPolicy": "required",
}


def test_operation_names_and_table_names_parse() -> None:
    base = {"kudu.master": "/db", "kudu.table": "t"}
    for op in OPERATIONS:
        for spelling in (op, op.replace("_", "-"), op.upper().replace("_", "-")):
            assert parse_options({**base, "kudu.operation": spelling}).operation == op
    with pytest.raises(ProgrammingError, match="expected one of insert, insert-ignore"):
        parse_options({**base, "kudu.operation": "merge"})
    # kudu-spark's older spelling of insert-ignore
    opts = parse_options({**base, "kudu.operation": "insert", "kudu.ignoreDuplicateRowErrors": "1"})
    assert opts.operation == "insert_ignore"
    for name, want in [
        ("impala::sales.orders", "sales.orders"),
        ("IMPALA::default.t", "t"),
        ("impala::t", "t"),
        ("default.t", "t"),
    ]:
        assert parse_options({**base, "kudu.table": name}).table == want


def test_every_kudu_spark_option_is_accepted_and_unknown_ones_warn(
    caplog: pytest.LogCaptureFixture,
) -> None:
    base = {"kudu.master": "/db", "kudu.table": "t"}
    opts = parse_options({**base, **KUDU_SPARK_OPTIONS, "kudu.snapshotTimestampMs": "5"})
    assert opts.repartition and not opts.repartition_sort and opts.snapshot_micros == 5000
    assert parse_options(base).lock_timeout_s == 30.0
    assert parse_options({**base, "kudu.operation.timeout.ms": "1500"}).lock_timeout_s == 1.5
    with pytest.raises(ProgrammingError, match=r"kudu.encryptionPolicy: expected optional"):
        parse_options({**base, "kudu.encryptionPolicy": "always"})
    with pytest.raises(ProgrammingError, match=r"kudu.keepAlivePeriodMs: expected an integer"):
        parse_options({**base, "kudu.keepAlivePeriodMs": "soon"})
    with caplog.at_level(logging.WARNING, logger="kudusql.spark"):
        parse_options({**base, "kudu.someFutureOption": "x"})
    assert "ignoring unknown option(s) kudu.somefutureoption" in caplog.text


def test_a_kudu_spark_job_runs_with_kudu_names(spark: SparkSession, tmp_path: Path) -> None:
    """format("kudu") and format("org.apache.kudu.spark.kudu") without any registration
    call (Spark finds pyspark_kudusql_kudu*), Impala's table name, hyphenated operations
    and every kudu-spark option on a read and a write."""
    db = str(tmp_path / "db")
    conn = kudusql.connect(db)
    try:
        cur = conn.cursor()
        cur.execute("CREATE DATABASE sales")
        cur.execute(
            "CREATE TABLE sales.kv (id BIGINT PRIMARY KEY, s STRING, x INT NOT NULL DEFAULT 0) "
            "PARTITION BY HASH (id) PARTITIONS 2"
        )
        cur.execute("INSERT INTO sales.kv VALUES (1, 'a', 1), (2, 'b', 2)")
    finally:
        conn.close()
    rows = frame(spark, [(2, "B", 20), (3, "c", 30)])
    for fmt in ("kudu", "org.apache.kudu.spark.kudu"):
        (
            rows.write.format(fmt)
            .option("kudu.master", db)
            .option("kudu.table", "impala::sales.kv")
            .options(**KUDU_SPARK_OPTIONS)
            .mode("append")
            .save()
        )
        df = (
            spark.read.format(fmt)
            .option("kudu.master", db)
            .option("kudu.table", "impala::sales.kv")
            .options(**KUDU_SPARK_OPTIONS)
            .load()
        )
        assert sorted(tuple(r) for r in df.collect()) == [(1, "a", 1), (2, "B", 20), (3, "c", 30)]
    w = rows.write.format("kudu").option("kudu.master", db).option("kudu.table", "sales.kv")
    w.option("kudu.operation", "insert-ignore").mode("append").save()  # both exist: ignored
    w.option("kudu.operation", "delete-ignore").mode("append").save()
    w.option("kudu.operation", "update-ignore").mode("append").save()  # both gone: ignored
    got = kudusql_rows(db, "SELECT id, s, x FROM sales.kv ORDER BY id")
    assert got == [(1, "a", 1)]
    # an unknown option is ignored (with a warning in the worker's log), as kudu-spark does
    w.option("kudu.operation", "upsert").option("kudu.notAnOption", "1").mode("append").save()
    assert len(kudusql_rows(db, "SELECT id FROM sales.kv")) == 3


def test_ignore_duplicate_row_errors_is_insert_ignore(spark: SparkSession, tmp_path: Path) -> None:
    db = kv_db(tmp_path / "db", n=3)
    w = frame(spark, [(1, "dup", 0), (7, "new", 70)]).write.format("kudu")
    w = w.option("kudu.master", db).option("kudu.table", "kv").option("kudu.operation", "insert")
    with pytest.raises(Exception, match=r"Failed to write 1 rows.*AlreadyPresent"):
        w.mode("append").save()
    w.option("kudu.ignoreDuplicateRowErrors", "true").mode("append").save()
    assert table(db) == [(0, "s0", 0), (1, "s1", 10), (2, "s2", 20), (7, "new", 70)]


def test_handle_schema_drift_adds_nullable_columns(spark: SparkSession, tmp_path: Path) -> None:
    db = kv_db(tmp_path / "db", n=2)
    drifted = frame(
        spark,
        [(1, "a", 1, 1.5, "p"), (5, "e", 5, None, "q")],
        "id bigint, s string, x int, score double, Tag string",
    )
    w = drifted.write.format("kudu").option("kudu.master", db).option("kudu.table", "kv")
    with pytest.raises(Exception, match="column 'score' of the DataFrame is not in table"):
        w.mode("append").save()
    w.option("kudu.handleSchemaDrift", "true").mode("append").save()
    with Database(db, read_only=True) as store:
        cols = {c.name: c for c in store.table("kv").schema.columns}
    assert str(cols["score"].type) == "DOUBLE" and cols["score"].nullable
    assert str(cols["Tag"].type) == "STRING" and cols["Tag"].nullable
    got = kudusql_rows(db, "SELECT id, s, score, tag FROM kv ORDER BY id")
    assert got == [(0, "s0", None, None), (1, "a", 1.5, "p"), (5, "e", None, "q")]
    w.option("kudu.handleSchemaDrift", "true").mode("append").save()  # nothing new to add


def test_routing_values_land_in_their_partition(spark: SparkSession) -> None:
    for n in (1, 2, 3, 8, 17):
        values = routing_values(n)
        assert [spark_partition(v, n) for v in values] == list(range(n))
        df = spark.createDataFrame([(v,) for v in values], "v long").repartition(n, "v")
        got = df.select("v", F.spark_partition_id().alias("p")).collect()
        assert sorted((r.p, r.v) for r in got) == list(enumerate(values))


def test_repartition_puts_each_tablet_in_one_partition(spark: SparkSession, tmp_path: Path) -> None:
    db = kv_db(tmp_path / "db", n=0)
    kc = KuduContext(db, spark)
    with Database(db, read_only=True) as store:
        meta = store.table("kv").meta
    df = frame(spark, [(i, f"n{i}", i) for i in range(200)]).repartition(5)
    shuffled = kc._repartition(df, "kv", sort=True)
    parts = shuffled.rdd.glom().map(lambda rows: [r.id for r in rows]).collect()
    assert len(parts) == len(meta.tablets)
    for slot, ids in enumerate(parts):
        assert ids == sorted(ids)  # kudu.repartition.sort
        keys = pa.table({"id": pa.array(ids, pa.int64())})
        assert set(partition_for_batch(meta.partition_schema, meta.schema, keys)) <= {slot}
    summary = kc.insert_rows(df, "kv", repartition=True, repartition_sort=False)
    assert summary.rows_applied == 200 and len(table(db)) == 200


def test_a_commit_waits_for_the_writer_lock(tmp_path: Path) -> None:
    db = kv_db(tmp_path / "db", n=0)
    holder = kudusql.connect(db)
    with pytest.raises(Exception, match=rf"locked by process {os.getpid()}"):
        open_writer(db, 0)
    threading.Timer(0.2, holder.close).start()
    with open_writer(db, scaled(120)) as store:  # returns once the holder has closed
        assert store.has_table("kv")


#: A job written as for kudu-spark: a plain SparkSession, then kudusql's KuduContext;
#: then the session helper's session, which runs the workers on this interpreter.
WRONG_PYTHON_JOB = """
import sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[1]").getOrCreate()
from kudusql.common.errors import ProgrammingError
from kudusql.spark.context import KuduContext
try:
    KuduContext(sys.argv[1], spark)
    print("NO ERROR")
except ProgrammingError as e:
    print("ERROR", e)
spark.stop()
from pyspark_kudusql import spark_session
spark = spark_session("local[1]")
df = spark.read.format("kudu").option("kudu.master", sys.argv[1]).option("kudu.table", "kv")
print("rows", df.load().count())
spark.stop()
"""


@pytest.mark.slow  # a subprocess driver (~25 s); make test-spark and make test-slow run it
def test_workers_on_another_python_are_caught_and_the_helper_avoids_them(tmp_path: Path) -> None:
    """A driver run as ``.venv/bin/python job.py`` with a clean environment (no
    activated venv, no PYSPARK_PYTHON): Spark's workers would run ``python3`` from the
    PATH, which cannot import kudusql."""
    db = kv_db(tmp_path / "db", n=4)
    bare = tmp_path / "bin"
    bare.mkdir()
    # the PATH's python3: an interpreter without kudusql (Python isolated from site dirs)
    (bare / "python3").write_text(f'#!/bin/sh\nexec {sys.base_prefix}/bin/python3 -I -S "$@"\n')
    (bare / "python3").chmod(0o755)
    env = {
        "PATH": f"{bare}:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/tmp"),
        # kudusql as if installed in the driver's environment (the stand-in python3
        # runs isolated: it ignores PYTHONPATH)
        "PYTHONPATH": str(Path(kudusql.__file__).parents[1]),
        **{k: v for k, v in os.environ.items() if k in ("JAVA_HOME", "TMPDIR")},
    }
    out = subprocess.run(
        [sys.executable, "-c", WRONG_PYTHON_JOB, db],
        capture_output=True,
        text=True,
        timeout=scaled(300),
        env=env,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "ERROR Spark's Python workers run " in out.stdout, out.stdout
    assert f"set PYSPARK_PYTHON={sys.executable}" in out.stdout
    assert "rows 4" in out.stdout
