"""Spark writes to kudusql tables: every operation, row errors, ignore variants,
overwrite, ignoreNull, all-or-nothing jobs, and clear errors."""

from __future__ import annotations

import datetime
import decimal
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

import kudusql
from tests.spark.conftest import all_types_rows, kudusql_rows, make_db

KV = "id bigint, s string, x int"


def kv_db(path: Path, n: int = 10) -> str:
    db = str(path)
    conn = kudusql.connect(db)
    try:
        cur = conn.cursor()
        cur.execute(
            "CREATE TABLE kv (id BIGINT PRIMARY KEY, s STRING, x INT NOT NULL DEFAULT 0) "
            "PARTITION BY HASH (id) PARTITIONS 2"
        )
        if n:
            cur.executemany(
                "INSERT INTO kv VALUES (?, ?, ?)", [(i, f"s{i}", i * 10) for i in range(n)]
            )
    finally:
        conn.close()
    return db


def write(df: DataFrame, db: str, op: str | None = None, mode: str = "append", **opts: str) -> None:
    w = df.write.format("kudusql").option("kudu.master", db).option("kudu.table", "kv")
    if op:
        w = w.option("kudu.operation", op)
    for k, v in opts.items():
        w = w.option(k, v)
    w.mode(mode).save()


def table(db: str) -> list[tuple[Any, ...]]:
    return kudusql_rows(db, "SELECT id, s, x FROM kv ORDER BY id")


def staging_left(db: str) -> list[str]:
    root = os.path.join(db, "spark-staging")
    return os.listdir(root) if os.path.isdir(root) else []


def frame(spark: SparkSession, rows: list[tuple[Any, ...]], ddl: str | None = None) -> DataFrame:
    return spark.createDataFrame(rows, StructType.fromDDL(ddl or KV))


def test_insert_then_read_back(spark: SparkSession, tmp_path: Path) -> None:
    db = kv_db(tmp_path / "db", n=0)
    write(frame(spark, [(i, f"n{i}", i) for i in range(100)]).repartition(4), db, "insert")
    assert table(db) == [(i, f"n{i}", i) for i in range(100)]
    assert staging_left(db) == []


def test_upsert_is_the_default(spark: SparkSession, tmp_path: Path) -> None:
    db = kv_db(tmp_path / "db")
    write(frame(spark, [(1, "one", 1), (50, "fifty", 50)]), db)
    got = dict((r[0], r[1:]) for r in table(db))
    assert got[1] == ("one", 1) and got[50] == ("fifty", 50) and got[2] == ("s2", 20)


def test_insert_with_duplicates_fails_and_writes_nothing(
    spark: SparkSession, tmp_path: Path
) -> None:
    db = kv_db(tmp_path / "db")
    before = table(db)
    rows = [(i, "new", 0) for i in range(5, 15)]  # 5..9 exist
    with pytest.raises(Exception, match=r"Failed to write 5 rows; sample errors: .*AlreadyPresent"):
        write(frame(spark, rows).repartition(3), db, "insert")
    assert table(db) == before
    assert staging_left(db) == []


def test_ignore_row_errors_writes_the_good_rows(spark: SparkSession, tmp_path: Path) -> None:
    db = kv_db(tmp_path / "db")
    rows = [(i, "new", 0) for i in range(5, 15)]
    write(frame(spark, rows), db, "insert", **{"kudu.ignoreRowErrors": "true"})
    got = table(db)
    assert len(got) == 15
    assert got[5] == (5, "s5", 50) and got[12] == (12, "new", 0)


def test_insert_ignore_update_and_delete_variants(spark: SparkSession, tmp_path: Path) -> None:
    db = kv_db(tmp_path / "db")
    write(frame(spark, [(1, "dup", 1), (20, "twenty", 2)]), db, "insert_ignore")
    assert table(db)[1] == (1, "s1", 10) and table(db)[-1] == (20, "twenty", 2)

    with pytest.raises(Exception, match=r"Failed to write 1 rows.*NotFound"):
        write(frame(spark, [(2, "upd", 3), (99, "missing", 0)]), db, "update")
    assert table(db)[2] == (2, "s2", 20)
    write(frame(spark, [(2, "upd", 3), (99, "missing", 0)]), db, "update_ignore")
    assert table(db)[2] == (2, "upd", 3)
    assert 99 not in [r[0] for r in table(db)]

    with pytest.raises(Exception, match=r"Failed to write 1 rows.*NotFound"):
        write(frame(spark, [(3, None, 0), (98, None, 0)]), db, "delete")
    write(frame(spark, [(3,), (98,)], "id bigint"), db, "delete_ignore")
    assert 3 not in [r[0] for r in table(db)]
    write(frame(spark, [(4,)], "id bigint"), db, "delete")
    assert [r[0] for r in table(db)] == [0, 1, 2, 5, 6, 7, 8, 9, 20]


def test_ignore_null_keeps_stored_values(spark: SparkSession, tmp_path: Path) -> None:
    db = kv_db(tmp_path / "db")
    rows = [(1, None, 111), (2, "two", 222), (77, None, 7)]
    write(frame(spark, rows), db, "upsert", **{"kudu.ignoreNull": "true"})
    got = dict((r[0], r[1:]) for r in table(db))
    assert got[1] == ("s1", 111)  # NULL s left the stored value
    assert got[2] == ("two", 222)
    assert got[77] == (None, 7)  # a new row keeps its NULL
    write(frame(spark, [(1, None, 5)]), db, "upsert")
    assert dict((r[0], r[1:]) for r in table(db))[1] == (None, 5)  # without it, NULL is NULL


def test_overwrite_truncates_then_inserts_atomically(spark: SparkSession, tmp_path: Path) -> None:
    db = kv_db(tmp_path / "db")
    conn = kudusql.connect(db)
    try:
        before = conn.session.db.latest_timestamp()
    finally:
        conn.close()
    write(frame(spark, [(5, "a", 1), (100, "b", 2)]), db, mode="overwrite")
    assert table(db) == [(5, "a", 1), (100, "b", 2)]
    # the rows before the overwrite are still there in history
    from kudusql.common.hybrid_time import to_micros

    old = (
        spark.read.format("kudusql")
        .option("kudu.master", db)
        .option("kudu.table", "kv")
        .option("kudu.snapshotTimestampMicros", str(to_micros(before)))
        .load()
    )
    assert old.count() == 10


def test_a_job_failing_halfway_leaves_nothing(spark: SparkSession, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    db = kv_db(tmp_path / "db", n=0)

    @F.udf("int", useArrow=False)
    def explode_late(i: int) -> int:
        if i == 777:
            raise ValueError("boom at row 777")
        return i

    df = frame(spark, [(i, "r", i) for i in range(1000)]).repartition(4)
    df = df.withColumn("x", explode_late(F.col("x")))
    with pytest.raises(Exception, match="boom at row 777"):
        write(df, db, "insert")
    assert table(db) == []
    assert staging_left(db) == []


@pytest.mark.parametrize("rowsets", [True, False])
def test_a_task_straggling_past_the_abort_stages_nothing(tmp_path: Path, rowsets: bool) -> None:
    """Spark cancels the siblings of a failed task without waiting for them: a task still
    staging after the driver's abort must fail, not re-create the job directory (CI once
    found ``job-...`` left behind by test_a_job_failing_halfway_leaves_nothing)."""
    from kudusql.spark.publish import JobPlan, abort_job
    from kudusql.spark.staging import JobEnded, new_job_dir, stage_batches, stage_rowset_batches
    from kudusql.storage.tables.staging import staging_target

    db = kv_db(tmp_path / "db", n=0)
    job_dir = new_job_dir(db)
    assert staging_left(db) == [os.path.basename(job_dir)]  # the driver made it
    plan = JobPlan(db, "kv", 0, 0, ("id", "s", "x"), "insert", False, False, False, job_dir)
    batch = pa.record_batch(
        [pa.array([1, 2], pa.int64()), pa.array(["a", "b"]), pa.array([1, 2], pa.int32())],
        names=["id", "s", "x"],
    )
    abort_job(plan)
    assert staging_left(db) == []
    with pytest.raises(JobEnded, match="already ended"):
        if rowsets:
            conn = kudusql.connect(db)
            try:
                target = staging_target(conn.session.db.table("kv"))
            finally:
                conn.close()
            stage_rowset_batches(job_dir, 0, 0, [batch], target)
        else:
            stage_batches(job_dir, 0, 0, [batch])
    assert staging_left(db) == []


def test_every_type_round_trips(spark: SparkSession, tmp_path: Path) -> None:
    src = make_db(tmp_path / "src", rows=200)
    dst = make_db(tmp_path / "dst", rows=0)
    df = spark.read.format("kudusql").option("kudu.master", src).option("kudu.table", "t").load()
    df.write.format("kudusql").option("kudu.master", dst).option("kudu.table", "t").option(
        "kudu.operation", "insert"
    ).mode("append").save()
    assert kudusql_rows(dst, "SELECT * FROM t ORDER BY id") == kudusql_rows(
        src, "SELECT * FROM t ORDER BY id"
    )
    first = kudusql_rows(dst, "SELECT dec, dt, ts, bin FROM t WHERE id = 2")[0]
    assert first == (
        decimal.Decimal("2.02"),
        datetime.date(2020, 1, 3),
        datetime.datetime(2024, 2, 29, 12, 0, 2, 2),
        bytes([2, 0, 255]),
    )
    assert all_types_rows(1).num_columns == 14


def test_values_out_of_a_narrower_column_are_row_errors(
    spark: SparkSession, tmp_path: Path
) -> None:
    db = kv_db(tmp_path / "db", n=0)
    rows = [(1, "ok", 5), (2, "big", 2**40)]
    df = frame(spark, rows, "id bigint, s string, x bigint")
    with pytest.raises(Exception, match=r"Failed to write 1 rows"):
        write(df, db, "insert")
    assert table(db) == []


def test_write_errors_are_clear(spark: SparkSession, tmp_path: Path) -> None:
    db = kv_db(tmp_path / "db")
    with pytest.raises(Exception, match=r"schema mismatch for column 's': table 'kv' has STRING"):
        write(frame(spark, [(1, 2, 3)], "id bigint, s int, x int"), db)
    with pytest.raises(Exception, match=r"column 'nope' of the DataFrame is not in table 'kv'"):
        write(frame(spark, [(1, 2)], "id bigint, nope int"), db)
    with pytest.raises(Exception, match=r"lacks primary key column\(s\) id"):
        write(frame(spark, [("a",)], "s string"), db)
    with pytest.raises(Exception, match=r"unknown operation 'merge'"):
        write(frame(spark, [(1, "a", 1)]), db, "merge")
    with pytest.raises(Exception, match=r"table 'nope' does not exist"):
        frame(spark, [(1, "a", 1)]).write.format("kudusql").option("kudu.master", db).option(
            "kudu.table", "nope"
        ).mode("append").save()
    assert staging_left(db) == []


def test_a_database_locked_by_another_writer(spark: SparkSession, tmp_path: Path) -> None:
    db = kv_db(tmp_path / "db")
    holder = kudusql.connect(db)  # this process is the writer now
    try:
        with pytest.raises(Exception, match=rf"locked.*{os.getpid()}"):
            # no wait for the lock (the default is Kudu's operation timeout, 30 s)
            write(frame(spark, [(1, "x", 1)]), db, **{"kudu.operation.timeout.ms": "0"})
    finally:
        holder.close()
    assert table(db)[1] == (1, "s1", 10)
    assert staging_left(db) == []


def _tablet_state(db: str) -> tuple[int, int]:
    """(DiskRowSets, MemRowSet rows) over the tablets of kv."""
    from kudusql.storage.tables.database import Database

    with Database(db, read_only=True) as store:
        info = [r for t in store.table("kv").tablets() for r in t.rowsets_info()]
    return (
        sum(r["kind"] == "diskrowset" for r in info),
        sum(r["rows"] for r in info if r["kind"] == "memrowset"),
    )


def test_insert_into_an_empty_table_adopts_rowsets_written_by_tasks(
    spark: SparkSession, tmp_path: Path
) -> None:
    db = kv_db(tmp_path / "db", n=0)
    conn = kudusql.connect(db)
    try:
        before = conn.session.db.latest_timestamp()
    finally:
        conn.close()
    write(frame(spark, [(i, f"r{i}", i) for i in range(2000)]).repartition(3), db, "insert")
    drs, mem = _tablet_state(db)
    assert drs >= 2 and mem == 0  # DiskRowSets from the tasks, nothing through the WAL
    assert table(db) == [(i, f"r{i}", i) for i in range(2000)]
    assert kudusql_rows(db, f"SELECT COUNT(*) FROM kv FOR SYSTEM_TIME AS OF {before}") == [(0,)]
    conn = kudusql.connect(db)  # the adopted rows take updates like any other
    try:
        conn.cursor().execute("UPDATE kv SET s = 'u' WHERE id % 100 = 0")
    finally:
        conn.close()
    assert kudusql_rows(db, "SELECT COUNT(*) FROM kv WHERE s = 'u'") == [(20,)]
    assert staging_left(db) == []


@pytest.mark.parametrize("where", ["one task", "two tasks"])
def test_duplicate_keys_in_a_staged_insert_fail_the_job(
    spark: SparkSession, tmp_path: Path, where: str
) -> None:
    db = kv_db(tmp_path / "db", n=0)
    rows = [(i, "a", i) for i in range(100)] + [(7, "again", 0), (42, "again", 0)]
    df = frame(spark, rows)
    df = df.coalesce(1) if where == "one task" else df.repartition(2, "s")
    with pytest.raises(Exception, match=r"Failed to write 2 rows; sample errors: .*AlreadyPresent"):
        write(df, db, "insert")
    assert table(db) == []
    assert staging_left(db) == []


def test_a_null_key_in_a_staged_insert_fails_the_job(spark: SparkSession, tmp_path: Path) -> None:
    db = kv_db(tmp_path / "db", n=0)
    with pytest.raises(Exception, match=r"Failed to write 1 rows; sample errors: .*id"):
        write(frame(spark, [(1, "a", 1), (None, "b", 2)]), db, "insert")
    assert table(db) == []


def test_insert_into_a_table_with_a_non_unique_key(spark: SparkSession, tmp_path: Path) -> None:
    db = str(tmp_path / "db")
    conn = kudusql.connect(db)
    try:
        conn.cursor().execute(
            "CREATE TABLE kv (id BIGINT NON UNIQUE PRIMARY KEY, s STRING, x INT) "
            "PARTITION BY HASH (id) PARTITIONS 2"
        )
    finally:
        conn.close()
    rows = [(i % 3, f"n{i}", i) for i in range(12)]
    # The tablets assign auto_incrementing_id: an empty table too (no staged rowsets).
    write(frame(spark, rows).repartition(3), db, "insert")
    write(frame(spark, rows[:2]), db, "insert")
    assert sorted(table(db)) == sorted(rows + rows[:2])
    ids = kudusql_rows(db, "SELECT id, auto_incrementing_id FROM kv")
    assert len(set(ids)) == 14
    with pytest.raises(Exception, match="auto_incrementing_id"):
        write(frame(spark, rows[:1]), db)  # the default UPSERT needs the hidden column
    with pytest.raises(Exception, match="non-unique primary key"):
        write(frame(spark, rows[:1]), db, "insert", mode="overwrite")
