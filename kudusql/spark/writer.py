"""Spark writes to a kudusql table: tasks stage, the commit publishes.

``DefaultSource.writer`` runs on the driver: it checks the DataFrame fits the table
(names, type families, key columns) and fixes a ``JobPlan`` (table id and schema
version, operation, a fresh staging directory). Each task's ``write`` receives Spark's
Arrow batches, makes their timestamps zone-less and stages them (``staging``: as
DiskRowSets for an INSERT into an empty table, else as Arrow files); its commit
message says what it staged. ``commit`` applies everything at one timestamp
(``publish``), so a Spark write is all-or-nothing; ``abort`` removes what the tasks
staged. Kudu's Spark integration applies rows as tasks run, so a failed job leaves a
part of it behind; this one does not.

On a cluster (``ClusterWriter``) there is nothing to stage into: each task writes its
batches through the tablet servers as kudu-spark's tasks do (``cluster.write_task``),
so its rows are visible at once and a failed job leaves what its tasks wrote. A task
whose rows met row errors fails with the embedded job's message (the other rows of
the task are written, as in kudu-spark), unless ``kudu.ignoreRowErrors``; the commit
sums what the tasks did into the job's summary.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from kudusql.spark.cluster import TaskWrite, write_task
from kudusql.spark.publish import JobPlan, JobSummary, abort_job, commit_job, finish_job
from kudusql.spark.spark_schema import to_storage
from kudusql.spark.staging import (
    RowErrorsFailure,
    StagedTask,
    stage_batches,
    stage_rowset_batches,
)
from kudusql.storage.tables.staging import StagingTarget

log = logging.getLogger("kudusql.spark")


class StagedMessage(WriterCommitMessage):
    def __init__(self, task: StagedTask) -> None:
        self.task = task


class KudusqlWriter(DataSourceArrowWriter):
    def __init__(self, plan: JobPlan, target: StagingTarget) -> None:
        self.plan = plan
        self.target = target

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:  # type: ignore[override]
        ctx = TaskContext.get()
        partition = ctx.partitionId() if ctx is not None else 0
        attempt = ctx.attemptNumber() if ctx is not None else 0
        columns = list(self.plan.columns)
        batches = (to_storage(b, self.target.schema, columns) for b in iterator)
        if self.plan.stage_rowsets:
            task = stage_rowset_batches(self.plan.job_dir, partition, attempt, batches, self.target)
        else:
            task = stage_batches(self.plan.job_dir, partition, attempt, batches)
        return StagedMessage(task)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        tasks = [m.task if isinstance(m, StagedMessage) else None for m in messages]
        summary = commit_job(self.plan, tasks)
        log.info(
            "kudusql: %s into %s: %d rows applied, %d ignored, %d rejected in %.2f s",
            summary.operation,
            summary.table,
            summary.rows_applied,
            summary.rows_ignored,
            summary.rows_rejected,
            summary.seconds,
        )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        abort_job(self.plan)


class WrittenMessage(WriterCommitMessage):
    def __init__(self, task: TaskWrite) -> None:
        self.task = task


def cluster_task(plan: JobPlan, iterator: Iterator[pa.RecordBatch]) -> TaskWrite:
    """One task of a cluster write: its batches written through the tablet servers; its
    row errors fail it (after its other rows are written) unless the job ignores them."""
    assert plan.cluster is not None
    ctx = TaskContext.get()
    done = TaskWrite(
        ctx.partitionId() if ctx is not None else 0,
        ctx.attemptNumber() if ctx is not None else 0,
    )
    columns = list(plan.columns)
    batches = (to_storage(b, None, columns) for b in iterator)
    write_task(
        plan.cluster,
        plan.table_id_text,
        plan.table,
        plan.schema_version,
        plan.operation,
        batches,
        done,
        ignore_null=plan.ignore_null,
    )
    if done.rejected and not plan.ignore_row_errors:
        raise RowErrorsFailure(cluster_failure(done.rejected, done.sample_errors))
    return done


def cluster_failure(count: int, samples: list[str]) -> str:
    return (
        f"Failed to write {count} rows; sample errors: {'; '.join(samples)}. The task's "
        "other rows were written: a cluster applies rows as tasks write them, as Kudu "
        "does (set kudu.ignoreRowErrors=true to count the bad rows instead of failing)"
    )


def cluster_summary(plan: JobPlan, tasks: list[TaskWrite]) -> JobSummary:
    """The job's summary: the sum of what its successful tasks wrote."""
    s = JobSummary(plan.table, plan.operation, tasks=len(tasks))
    for t in tasks:
        s.rows_staged += t.rows
        s.rows_applied += t.applied
        s.rows_ignored += t.ignored
        s.rows_rejected += t.rejected
        s.sample_errors += t.sample_errors[: max(0, 5 - len(s.sample_errors))]
        if t.timestamp_micros is not None:
            s.timestamp_micros = max(s.timestamp_micros or 0, t.timestamp_micros)
    return s


class ClusterWriter(DataSourceArrowWriter):
    """A write job on a cluster (see the module docstring)."""

    def __init__(self, plan: JobPlan) -> None:
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:  # type: ignore[override]
        return WrittenMessage(cluster_task(self.plan, iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        tasks = [m.task for m in messages if isinstance(m, WrittenMessage)]
        summary = finish_job(self.plan, cluster_summary(self.plan, tasks))
        log.info(
            "kudusql: %s into %s on %s: %d rows applied, %d ignored, %d rejected",
            summary.operation,
            summary.table,
            self.plan.database,
            summary.rows_applied,
            summary.rows_ignored,
            summary.rows_rejected,
        )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        written = sum(m.task.applied for m in messages if isinstance(m, WrittenMessage))
        log.warning(
            "kudusql: the %s job into %s on %s failed; its successful tasks had written "
            "%d rows, which stay (a cluster write is not all-or-nothing)",
            self.plan.operation,
            self.plan.table,
            self.plan.database,
            written,
        )
