"""The streaming sink: ``writeStream.format("kudusql")`` applies each micro-batch once.

A batch id the query committed before applies nothing (Spark re-runs a batch after a
crash between the sink's commit and its own commit log); the batch's rows and the
record of its id are one transaction, so a process killed at any point leaves both or
neither."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

import kudusql
from kudusql.spark.publish import JobPlan
from kudusql.spark.staging import StagedTask, batch_prefix, stage_batches, stream_dir
from kudusql.spark.streaming import (
    PROGRESS_TABLE,
    StreamMessage,
    commit_stream_batch,
    last_committed_batch,
)
from kudusql.storage.tables.database import Database
from tests.spark.conftest import kudusql_rows
from tests.spark.test_write import kv_db, table
from tests.support.timing import scaled

pytestmark = pytest.mark.spark

QUERY = "0f1e2d3c-query"


def _plan(db: str, op: str = "insert", **kw: object) -> JobPlan:
    with Database(db, read_only=True) as store:
        meta = store.table("kv").meta
    fields: dict[str, object] = {
        "database": db,
        "table": "kv",
        "table_id": meta.id,
        "schema_version": meta.schema_version,
        "columns": ("id", "s", "x"),
        "operation": op,
        "overwrite": False,
        "ignore_null": False,
        "ignore_row_errors": False,
        "job_dir": "",
        **kw,
    }
    return JobPlan(**fields)  # type: ignore[arg-type]


def _stage(db: str, batch: int, ids: list[int]) -> StreamMessage:
    data = pa.record_batch(
        {
            "id": pa.array(ids, pa.int64()),
            "s": pa.array([f"b{batch}" for _ in ids]),
            "x": pa.array([batch] * len(ids), pa.int32()),
        }
    )
    d = stream_dir(db, QUERY)
    task: StagedTask = stage_batches(d, 0, 0, [data], prefix=batch_prefix(batch))
    return StreamMessage(task, QUERY)


def _last(db: str) -> int | None:
    with Database(db, read_only=True) as store:
        return last_committed_batch(store, QUERY, store.table("kv").id)


def test_a_replayed_batch_id_applies_nothing(tmp_path: Path) -> None:
    db = kv_db(tmp_path / "db", n=0)
    plan = _plan(db)
    first = commit_stream_batch(plan, [_stage(db, 0, [1, 2])], 0)
    assert first.rows_applied == 2 and not first.batch_already_committed
    # the same batch again (Spark's re-run after a crash before its commit log): nothing,
    # though an INSERT of those keys would fail
    again = commit_stream_batch(plan, [_stage(db, 0, [1, 2])], 0)
    assert again.batch_already_committed and again.rows_applied == 0
    assert commit_stream_batch(plan, [_stage(db, 1, [3])], 1).rows_applied == 1
    assert commit_stream_batch(plan, [_stage(db, 0, [1])], 0).batch_already_committed
    assert table(db) == [(1, "b0", 0), (2, "b0", 0), (3, "b1", 1)]
    assert _last(db) == 1
    # the progress table is a table like any other
    assert kudusql_rows(db, f"SELECT table_name, batch_id FROM {PROGRESS_TABLE}") == [("kv", 1)]
    # every staged file of the committed batches is gone
    assert os.listdir(stream_dir(db, QUERY)) == []


def test_a_failed_batch_records_nothing(tmp_path: Path) -> None:
    db = kv_db(tmp_path / "db", n=2)  # keys 0, 1
    plan = _plan(db)
    with pytest.raises(Exception, match=r"Failed to write 1 rows.*AlreadyPresent"):
        commit_stream_batch(plan, [_stage(db, 0, [1, 5])], 0)
    assert _last(db) is None and [r[0] for r in table(db)] == [0, 1]
    fixed = commit_stream_batch(_plan(db, ignore_row_errors=True), [_stage(db, 0, [1, 5])], 0)
    assert fixed.rows_applied == 1 and fixed.rows_rejected == 1 and _last(db) == 0


#: Commits batch 0 of the staged files named in argv, killing itself (SIGKILL) at the
#: point argv names: before the COMMIT record of the transaction, or right after it
#: (before any tablet applied its part).
KILLED_COMMIT = """
import json, os, signal, sys
import kudusql
from kudusql.spark.publish import JobPlan
from kudusql.spark.staging import StagedTask
from kudusql.spark.streaming import StreamMessage, commit_stream_batch
from kudusql.storage.tables import txn_log

plan = JobPlan(**json.loads(sys.argv[1]))
task = StagedTask(**json.loads(sys.argv[2]))
where = sys.argv[3]
original = txn_log.TxnLog.commit

def commit(self, txn, ts, participants):
    if where == "before":
        os.kill(os.getpid(), signal.SIGKILL)
    original(self, txn, ts, participants)
    os.kill(os.getpid(), signal.SIGKILL)

txn_log.TxnLog.commit = commit
commit_stream_batch(plan, [StreamMessage(task, sys.argv[4])], 0)
"""


@pytest.mark.parametrize("where", ["before", "after"])
def test_rows_and_batch_id_survive_a_kill_together(tmp_path: Path, where: str) -> None:
    db = kv_db(tmp_path / "db", n=0)
    plan = _plan(db)
    msg = _stage(db, 0, list(range(10)))
    task = msg.task
    args = [
        json.dumps(dataclasses.asdict(plan)),
        json.dumps({"partition": 0, "attempt": 0, "files": task.files, "rows": task.rows}),
        where,
        QUERY,
    ]
    done = subprocess.run(
        [sys.executable, "-c", KILLED_COMMIT, *args],
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    if where == "before":
        assert table(db) == [] and _last(db) is None
    else:  # the COMMIT is durable: the next open applies both
        assert len(table(db)) == 10 and _last(db) == 0
    # Spark runs batch 0 again: applied exactly once either way
    replay = commit_stream_batch(plan, [_stage(db, 0, list(range(10)))], 0)
    assert replay.batch_already_committed == (where == "after")
    assert len(table(db)) == 10 and _last(db) == 0


def _json_files(folder: Path, batches: list[list[int]]) -> None:
    folder.mkdir(exist_ok=True)
    for i, ids in enumerate(batches):
        rows = "".join(json.dumps({"id": k, "s": f"f{i}", "x": i}) + "\n" for k in ids)
        (folder / f"part-{i:03d}.json").write_text(rows)


def _run(spark: SparkSession, fmt: str, source: Path, checkpoint: Path, db: str) -> None:
    stream = (
        spark.readStream.schema("id bigint, s string, x int")
        .option("maxFilesPerTrigger", 1)
        .json(str(source))
    )
    query = (
        stream.writeStream.format(fmt)
        .option("kudu.master", db)
        .option("kudu.table", "kv")
        .option("kudu.operation", "insert")  # a batch applied twice would fail
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert query.exception() is None


@pytest.mark.parametrize("fmt", ["kudusql", "kudu"])
def test_a_streaming_query_restarted_after_a_lost_commit_log(
    spark: SparkSession, tmp_path: Path, fmt: str
) -> None:
    db = kv_db(tmp_path / "db", n=0)
    source, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    _json_files(source, [[1, 2], [3], [4, 5, 6]])
    _run(spark, fmt, source, checkpoint, db)
    assert [r[0] for r in table(db)] == [1, 2, 3, 4, 5, 6]
    assert _last_of_any_query(db) == 2
    # Spark's own record of batches 1 and 2 lost (a crash after our commits): the restart
    # runs them again with the same ids and rows, and the sink applies nothing
    for n in ("1", "2"):
        os.remove(checkpoint / "commits" / n)
        (checkpoint / "commits" / f".{n}.crc").unlink(missing_ok=True)
    _run(spark, fmt, source, checkpoint, db)
    assert [r[0] for r in table(db)] == [1, 2, 3, 4, 5, 6]
    # new data continues the stream
    _json_files(source, [[1, 2], [3], [4, 5, 6], [7]])
    _run(spark, fmt, source, checkpoint, db)
    assert [r[0] for r in table(db)] == [1, 2, 3, 4, 5, 6, 7]
    assert _last_of_any_query(db) == 3
    staging = Path(db) / "spark-staging"
    assert not staging.exists() or all(not any(d.iterdir()) for d in staging.iterdir())
    shutil.rmtree(checkpoint)


def _last_of_any_query(db: str) -> int:
    ((batch,),) = kudusql_rows(db, f"SELECT batch_id FROM {PROGRESS_TABLE}")
    return int(batch)


def test_complete_mode_replaces_the_tables_rows(spark: SparkSession, tmp_path: Path) -> None:
    db = str(tmp_path / "db")
    conn = kudusql.connect(db)
    try:
        conn.cursor().execute("CREATE TABLE counts (k STRING PRIMARY KEY, n BIGINT)")
        conn.cursor().execute("INSERT INTO counts VALUES ('stale', 1)")
    finally:
        conn.close()
    source = tmp_path / "in"
    source.mkdir()
    for i, keys in enumerate([["a", "b"], ["a"]]):
        (source / f"p{i}.json").write_text("".join(json.dumps({"k": k}) + "\n" for k in keys))
    counts = (
        spark.readStream.schema("k string")
        .option("maxFilesPerTrigger", 1)
        .json(str(source))
        .groupBy("k")
        .count()
        .withColumnRenamed("count", "n")
    )
    query = (
        counts.writeStream.format("kudusql")
        .outputMode("complete")
        .option("kudu.master", db)
        .option("kudu.table", "counts")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert kudusql_rows(db, "SELECT k, n FROM counts ORDER BY k") == [("a", 2), ("b", 1)]
