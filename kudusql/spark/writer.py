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
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from kudusql.spark.publish import JobPlan, abort_job, commit_job
from kudusql.spark.spark_schema import to_storage
from kudusql.spark.staging import StagedTask, stage_batches, stage_rowset_batches
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
