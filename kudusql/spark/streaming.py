"""The streaming sink: ``df.writeStream.format("kudusql")``, each micro-batch applied
exactly once.

Spark runs a streaming query as numbered micro-batches and, after a crash or a restart
from the checkpoint, runs again every batch whose end it has not recorded in its own
commit log, with the same batch id and the same rows. A sink sees the batch id in its
``commit(messages, batchId)`` and must apply a batch id it already applied no second
time (kudu-spark's ``KuduSink`` does not: it relies on upserts repeating harmlessly).

Tasks stage their rows as Arrow files in the query's staging directory
(``staging.stream_dir``; the query is named by Spark's query id, which the checkpoint
keeps across restarts). The commit opens the database as its writer and, under the
table's write lock, reads the query's last committed batch id for the table from the
sink progress table ``kudusql_spark.sink_progress`` (created on first use; a plain
table the SQL layer reads like any other). A batch id at or below it applies nothing.
Otherwise the batch's rows, prepared as a batch job's are (``publish.prepare_batch``:
row errors, ignoreNull, overwrite for complete mode), and the upsert of the query's
progress row are written as one transaction of the commit log
(``storage.tables.staging.write_together``): one timestamp, both or neither, also when
the process is killed between any two steps. The commit then removes the batch's
staged files, and the files older batches left behind.

On a cluster (``ClusterStreamWriter``) there is no such transaction: tasks write their
rows through the tablet servers as batch jobs do, and a micro-batch Spark runs again is
written again. So the sink takes only the operations for which that is harmless
(upsert and the ignore variants, update: ``IDEMPOTENT_OPERATIONS``) and refuses the
others and the complete output mode when the query starts.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from kudusql.common.errors import ProgrammingError
from kudusql.common.hybrid_time import wall_micros
from kudusql.common.row_operations import WriteOp
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType, TypeKind
from kudusql.spark.publish import (
    JobPlan,
    JobSummary,
    open_writer,
    planned_table,
    prepare_batch,
    record_result,
)
from kudusql.spark.spark_schema import to_storage
from kudusql.spark.staging import (
    StagedTask,
    batch_prefix,
    read_staged,
    remove_stream_batches,
    stage_batches,
    stream_dir,
    stream_dir_path,
)
from kudusql.spark.writer import WrittenMessage, cluster_summary, cluster_task
from kudusql.storage.tables.database import Database
from kudusql.storage.tables.staging import StagingTarget, TableWrite, write_together
from kudusql.storage.tables.table import Table

log = logging.getLogger("kudusql.spark")

#: The table holding each streaming query's last committed batch id per target table.
PROGRESS_TABLE = "kudusql_spark.sink_progress"
PROGRESS_SCHEMA = Schema(
    (
        ColumnSchema("query_id", DataType(TypeKind.STRING), nullable=False),
        ColumnSchema("table_id", DataType(TypeKind.INT64), nullable=False),
        ColumnSchema("table_name", DataType(TypeKind.STRING), nullable=False),
        ColumnSchema("batch_id", DataType(TypeKind.INT64), nullable=False),
        ColumnSchema("committed", DataType(TypeKind.TIMESTAMP), nullable=False),
    ),
    2,
)
#: Spark's task-local properties naming the streaming query (kept in its checkpoint
#: across restarts) and the micro-batch a task belongs to.
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


class StreamMessage(WriterCommitMessage):
    def __init__(self, task: StagedTask, query_id: str) -> None:
        self.task = task
        self.query_id = query_id


def query_id(ctx: TaskContext | None, checkpoint: str | None) -> str:
    """The streaming query a task writes for: Spark's query id, else the checkpoint."""
    qid = ctx.getLocalProperty(QUERY_ID_PROPERTY) if ctx is not None else None
    if qid:
        return qid
    if checkpoint:
        return f"checkpoint:{checkpoint}"
    raise ProgrammingError(
        "the kudusql streaming sink cannot tell which streaming query this is: "
        "give the query a checkpointLocation option"
    )


class KudusqlStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, plan: JobPlan, target: StagingTarget, checkpoint: str | None) -> None:
        self.plan = plan
        self.target = target
        self.checkpoint = checkpoint

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:  # type: ignore[override]
        ctx = TaskContext.get()
        qid = query_id(ctx, self.checkpoint)
        batch = ctx.getLocalProperty(BATCH_ID_PROPERTY) if ctx is not None else None
        prefix = batch_prefix(int(batch)) if batch and batch.isdigit() else ""
        partition = ctx.partitionId() if ctx is not None else 0
        attempt = ctx.attemptNumber() if ctx is not None else 0
        columns = list(self.plan.columns)
        batches = (to_storage(b, self.target.schema, columns) for b in iterator)
        directory = stream_dir(self.plan.database, qid)
        task = stage_batches(directory, partition, attempt, batches, prefix=prefix)
        return StreamMessage(task, qid)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        summary = commit_stream_batch(self.plan, _messages(messages), batchId)
        if summary.batch_already_committed:
            log.info(
                "kudusql: batch %d into %s was committed before; applied nothing",
                batchId,
                summary.table,
            )
            return
        log.info(
            "kudusql: batch %d: %s into %s: %d rows applied, %d ignored, %d rejected",
            batchId,
            summary.operation,
            summary.table,
            summary.rows_applied,
            summary.rows_ignored,
            summary.rows_rejected,
        )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _remove_files(_messages(messages))


def _messages(messages: Sequence[WriterCommitMessage | None]) -> list[StreamMessage]:
    return [m for m in messages if isinstance(m, StreamMessage)]


def _remove_files(messages: Sequence[StreamMessage]) -> None:
    for m in messages:
        for path in m.task.files:
            with contextlib.suppress(OSError):
                os.remove(path)


def progress_table(db: Database) -> Table:
    """The sink progress table, created if the database has none yet."""
    if not db.has_table(PROGRESS_TABLE):
        db.create_table(PROGRESS_TABLE, PROGRESS_SCHEMA, if_not_exists=True)
    return db.table(PROGRESS_TABLE)


def last_committed_batch(
    db: Database, query: str, table_id: int, snapshot: int | None = None
) -> int | None:
    """The last batch id query ``query`` committed into table ``table_id``, or None."""
    if not db.has_table(PROGRESS_TABLE):
        return None
    rows = db.table(PROGRESS_TABLE).to_arrow(
        ["query_id", "table_id", "batch_id"], snapshot=snapshot
    )
    mine = rows.filter(
        pc.and_(
            pc.equal(rows["query_id"], pa.scalar(query)),
            pc.equal(rows["table_id"], pa.scalar(table_id, pa.int64())),
        )
    )
    return int(mine["batch_id"][0].as_py()) if mine.num_rows else None


def commit_stream_batch(
    plan: JobPlan, messages: Sequence[StreamMessage], batch_id: int
) -> JobSummary:
    """Apply micro-batch ``batch_id`` of the query the messages name, unless that query
    committed it (or a later batch) into the table before; see the module docstring."""
    t0 = time.perf_counter()
    summary = JobSummary(plan.table, plan.operation, tasks=len(messages))
    summary.batch_id = batch_id
    summary.rows_staged = sum(m.task.rows for m in messages)
    queries = {m.query_id for m in messages}
    if len(queries) > 1:
        raise ProgrammingError(f"one micro-batch was written by several queries: {queries}")
    if not queries:  # no task reported: nothing was staged, nothing to record
        return summary
    (query,) = queries
    try:
        with open_writer(plan.database, plan.lock_timeout_s) as db:
            table = planned_table(db, plan)
            progress = progress_table(db)
            with table.exclusive() as snapshot:
                last = last_committed_batch(db, query, table.id, snapshot)
                if last is not None and batch_id <= last:
                    summary.batch_already_committed = True
                    return summary
                data = _staged_rows(table, plan, messages)
                data, op, op_column = prepare_batch(table, plan, data, summary, snapshot)
                record = pa.table(
                    {
                        "query_id": [query],
                        "table_id": pa.array([table.id], pa.int64()),
                        "table_name": [table.name],
                        "batch_id": pa.array([batch_id], pa.int64()),
                        "committed": pa.array([wall_micros()], pa.timestamp("us")),
                    }
                )
                writes = [TableWrite(progress, record, WriteOp.UPSERT)]
                if data.num_rows:
                    writes.insert(0, TableWrite(table, data, op, op_column))
                results = write_together(writes)
            if data.num_rows:
                record_result(summary, results[0])
    finally:
        _remove_files(messages)
        remove_stream_batches(stream_dir_path(plan.database, query), batch_id)
    summary.seconds = time.perf_counter() - t0
    return summary


def _staged_rows(table: Table, plan: JobPlan, messages: Sequence[StreamMessage]) -> pa.Table:
    batches = list(read_staged([f for m in messages for f in m.task.files]))
    if batches:
        return pa.Table.from_batches(batches)
    schema = table.schema
    return pa.schema([schema.column(c).type.arrow_field(c) for c in plan.columns]).empty_table()


#: The operations a cluster's streaming sink takes: writing a micro-batch's rows again
#: (Spark's replay after a failure) leaves the table as writing them once did.
IDEMPOTENT_OPERATIONS = (
    "upsert",
    "upsert_ignore",
    "insert_ignore",
    "update",
    "update_ignore",
    "delete_ignore",
)


def check_cluster_stream(plan: JobPlan) -> None:
    """Refuse a streaming write to a cluster that a replayed micro-batch would break:
    a cluster has no transaction to record the batch id with the rows, so a batch Spark
    runs again is written again, and only an idempotent operation makes that harmless."""
    if plan.overwrite:
        raise ProgrammingError(
            "the complete output mode replaces the table's rows, which a cluster cannot do "
            "atomically: use the append or update output mode on a cluster"
        )
    if plan.operation not in IDEMPOTENT_OPERATIONS:
        allowed = ", ".join(o.replace("_", "-") for o in IDEMPOTENT_OPERATIONS)
        raise ProgrammingError(
            f"kudu.operation={plan.operation.replace('_', '-')} is not supported by the "
            "streaming sink on a cluster: Spark writes a micro-batch again after a failure "
            "and a cluster cannot tell (it records no batch ids), so only operations that "
            f"can repeat harmlessly are taken: {allowed}"
        )


class ClusterStreamWriter(DataSourceStreamArrowWriter):
    """The streaming sink on a cluster: each task writes its rows through the tablet
    servers (as a batch job's do); a replayed batch is written again, harmlessly for
    the idempotent operations ``check_cluster_stream`` lets through."""

    def __init__(self, plan: JobPlan) -> None:
        check_cluster_stream(plan)
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:  # type: ignore[override]
        return WrittenMessage(cluster_task(self.plan, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        tasks = [m.task for m in messages if isinstance(m, WrittenMessage)]
        summary = cluster_summary(self.plan, tasks)
        log.info(
            "kudusql: batch %d: %s into %s on %s: %d rows applied, %d ignored, %d rejected",
            batchId,
            summary.operation,
            summary.table,
            self.plan.database,
            summary.rows_applied,
            summary.rows_ignored,
            summary.rows_rejected,
        )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning(
            "kudusql: batch %d into %s on %s failed; rows its tasks wrote stay, and Spark "
            "writes the batch again when the query restarts",
            batchId,
            self.plan.table,
            self.plan.database,
        )
