"""The commit of a Spark write job: apply every staged row at one timestamp, or none.

Runs in the Python worker Spark starts for ``commit``. It opens the database as its
writer (``open_writer``: waiting up to ``kudu.operation.timeout.ms`` while another
writer process holds it, then a clear OperationalError naming that process), checks the
table is the one the job planned against (not dropped, not altered), reads the files
the successful tasks staged, and under ``Table.exclusive`` (no other writer of the
table in between):

* ``overwrite``: DELETE of every row live now plus INSERT of the job's rows, one batch;
* ``kudu.ignoreNull`` with upsert/update: a NULL takes the stored value of that row
  (a vectorized join with the rows live now), so the write leaves it unchanged;
* checks the whole batch (``Table.check_write``): with row errors and without
  ``kudu.ignoreRowErrors`` the job fails with "Failed to write N rows; sample errors:"
  and nothing is applied; otherwise the batch is written, bad rows skipped and counted.

Everything is one ``Table.write``: one timestamp, so a reader sees all of the job or
none of it. The staging directory is removed whatever happens.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kudusql.cluster.client.target import ClusterTarget
from kudusql.common.errors import OperationalError, ProgrammingError
from kudusql.common.hybrid_time import to_micros
from kudusql.common.row_operations import WriteOp, WriteResult
from kudusql.spark.staging import (
    RowErrorsFailure,
    StagedTask,
    failure_message,
    read_staged,
    remove_job,
    remove_stale_jobs,
)
from kudusql.storage.tables.database import Database
from kudusql.storage.tables.staging import StagedRowErrors, adopt
from kudusql.storage.tables.table import Table

SAMPLE_ERRORS = 5
_OP_COLUMN = "__kudusql_op"
#: Operations for which kudu.ignoreNull keeps the stored value of a NULL.
_KEEPS_STORED = (WriteOp.UPSERT, WriteOp.UPSERT_IGNORE, WriteOp.UPDATE, WriteOp.UPDATE_IGNORE)


@dataclass(frozen=True)
class JobPlan:
    """What the driver fixed when the job was planned, carried to the commit."""

    database: str
    table: str
    table_id: int
    schema_version: int
    columns: tuple[str, ...]
    operation: str
    overwrite: bool
    ignore_null: bool
    ignore_row_errors: bool
    job_dir: str
    report_file: str | None = None
    #: Tasks stage DiskRowSets (an INSERT into a table empty when the job was planned).
    stage_rowsets: bool = False
    #: Seconds the commit waits for the database's writer lock.
    lock_timeout_s: float = 30.0
    #: The cluster the table is on (None: ``database`` is a directory); ``table_id`` is
    #: then 0 and ``table_id_text`` the master's id of the table.
    cluster: ClusterTarget | None = None
    table_id_text: str = ""


@dataclass
class JobSummary:
    table: str
    operation: str
    tasks: int = 0
    rows_staged: int = 0
    rows_applied: int = 0
    rows_ignored: int = 0
    rows_rejected: int = 0
    rows_deleted_by_overwrite: int = 0
    sample_errors: list[str] = field(default_factory=list)
    #: Wall-clock microseconds just after the commit: a snapshot read at this time
    #: sees the job's rows (kudu-spark's propagated timestamp).
    timestamp_micros: int | None = None
    seconds: float = 0.0
    #: A streaming sink's micro-batch: its id, and whether its query had committed it
    #: before (then it applied nothing).
    batch_id: int | None = None
    batch_already_committed: bool = False


def commit_job(plan: JobPlan, tasks: Sequence[StagedTask | None]) -> JobSummary:
    """Apply the staged work of the successful ``tasks``; see the module docstring."""
    t0 = time.perf_counter()
    done = [t for t in tasks if t is not None]
    summary = JobSummary(plan.table, plan.operation, tasks=len(done))
    summary.rows_staged = sum(t.rows for t in done)
    try:
        with open_writer(plan.database, plan.lock_timeout_s) as db:
            remove_stale_jobs(plan.database, keep=plan.job_dir)
            table = planned_table(db, plan)
            if plan.stage_rowsets:
                _adopt(table, done, summary)
                return _finish(plan, summary, t0)
            files = [f for t in done for f in t.files]
            batches = list(read_staged(files))
            if batches:
                data = pa.Table.from_batches(batches)
            else:
                schema = table.schema
                data = pa.schema(
                    [schema.column(c).type.arrow_field(c) for c in plan.columns]
                ).empty_table()
            _apply(table, plan, data, summary)
    finally:
        remove_job(plan.job_dir)
    return _finish(plan, summary, t0)


#: What ``DirLock`` says when another process holds the database's writer lock.
_LOCKED = "is locked by"


def open_writer(database: str, timeout_s: float) -> Database:
    """The database opened as its writer, waiting up to ``timeout_s`` seconds (polling,
    with backoff) while another process holds its writer lock; then the lock's
    OperationalError, which names the holder."""
    deadline = time.monotonic() + timeout_s
    delay = 0.02
    while True:
        try:
            return Database(database, maintenance=False)
        except OperationalError as e:
            left = deadline - time.monotonic()
            if _LOCKED not in str(e) or left <= 0:
                raise
            time.sleep(min(delay, left))
            delay = min(2 * delay, 0.5)


def _finish(plan: JobPlan, summary: JobSummary, t0: float) -> JobSummary:
    summary.seconds = time.perf_counter() - t0
    return finish_job(plan, summary)


def finish_job(plan: JobPlan, summary: JobSummary) -> JobSummary:
    """Write the job's report file, if it asked for one."""
    if plan.report_file:
        _write_report(plan.report_file, summary)
    return summary


def _adopt(table: Table, tasks: list[StagedTask], summary: JobSummary) -> None:
    """Have the tablets adopt the staged rowsets, once their keys are checked across
    tasks (``storage/tables/staging.py``)."""
    try:
        result = adopt(table, [r for t in tasks for r in t.rowsets])
    except StagedRowErrors as e:
        raise RowErrorsFailure(failure_message(e.count, e.samples)) from None
    summary.rows_applied = result.applied
    summary.timestamp_micros = to_micros(result.timestamp) + 1


def abort_job(plan: JobPlan) -> None:
    remove_job(plan.job_dir)


def planned_table(db: Database, plan: JobPlan) -> Table:
    if not db.has_table(plan.table):
        raise ProgrammingError(
            f"table {plan.table!r} was dropped while the write job ran; nothing was written"
        )
    table = db.table(plan.table)
    meta = table.meta
    if meta.id != plan.table_id or meta.schema_version != plan.schema_version:
        raise ProgrammingError(
            f"table {plan.table!r} was altered or re-created while the write job ran; "
            "nothing was written (run the job again)"
        )
    return table


def prepare_batch(
    table: Table, plan: JobPlan, data: pa.Table, summary: JobSummary, snapshot: int
) -> tuple[pa.Table, WriteOp | None, str | None]:
    """The job's rows as the one write that applies them (inside ``table.exclusive()``,
    whose snapshot is ``snapshot``): with overwrite, the DELETE of every live row and the
    INSERT of the job's rows (per-row operations in ``op_column``); with ignoreNull,
    NULLs taken from the stored rows. Raises the job's row-error failure if the batch
    has row errors and the job does not ignore them. Returns (data, op, op_column)."""
    op = WriteOp.parse(plan.operation)
    op_column = None
    if plan.overwrite:
        data, summary.rows_deleted_by_overwrite = _with_truncate(table, data, snapshot)
        op_column = _OP_COLUMN
    elif plan.ignore_null and op in _KEEPS_STORED:
        data = _fill_nulls(table, data, snapshot)
    wop = None if op_column else op
    if data.num_rows:
        errors = table.check_write(data, wop, op_column=op_column)
        if errors and not plan.ignore_row_errors:
            raise RowErrorsFailure(failure_message(len(errors), [str(e) for e in errors]))
    return data, wop, op_column


def record_result(summary: JobSummary, result: WriteResult) -> None:
    summary.rows_applied = result.applied
    summary.rows_ignored = result.ignored
    summary.rows_rejected = len(result.errors)
    summary.sample_errors = [str(e) for e in result.errors[:SAMPLE_ERRORS]]
    summary.timestamp_micros = to_micros(result.timestamp) + 1


def _apply(table: Table, plan: JobPlan, data: pa.Table, summary: JobSummary) -> None:
    with table.exclusive() as snapshot:
        data, op, op_column = prepare_batch(table, plan, data, summary, snapshot)
        if not data.num_rows:
            return
        result = table.write(data, op, op_column=op_column)
    record_result(summary, result)


def _with_truncate(table: Table, data: pa.Table, snapshot: int) -> tuple[pa.Table, int]:
    """One batch: DELETE every row live at ``snapshot``, then INSERT ``data``."""
    keys = table.schema.key_names
    live = table.to_arrow(keys, snapshot=snapshot)
    n_del = live.num_rows
    ops = np.concatenate(
        [
            np.full(n_del, int(WriteOp.DELETE), dtype=np.int8),
            np.full(data.num_rows, int(WriteOp.INSERT), dtype=np.int8),
        ]
    )
    schema = data.schema
    deletes = pa.table(
        {
            f.name: (
                live.column(f.name).cast(f.type) if f.name in keys else pa.nulls(n_del, type=f.type)
            )
            for f in schema
        },
        schema=schema,
    )
    both = pa.concat_tables([deletes, data])
    return both.append_column(_OP_COLUMN, pa.array(ops)), n_del


def _fill_nulls(table: Table, data: pa.Table, snapshot: int) -> pa.Table:
    """``data`` with each NULL of a non-key column replaced by the stored value of that
    row (rows without a stored value keep their NULL)."""
    keys = table.schema.key_names
    others = [c for c in data.column_names if c not in keys]
    if not others or not any(data.column(c).null_count for c in others):
        return data
    current = table.to_arrow(list(keys) + others, snapshot=snapshot)
    left = data.append_column("__row", pa.array(np.arange(data.num_rows, dtype=np.int64)))
    right = current.rename_columns([*keys, *(f"__cur_{c}" for c in others)])
    cast_keys = {k: left.schema.field(k).type for k in keys}
    right = right.select(list(right.column_names))
    for k, t in cast_keys.items():
        i = right.column_names.index(k)
        right = right.set_column(i, k, right.column(k).cast(t))
    joined = left.join(right, keys=list(keys), join_type="left outer").sort_by("__row")
    cols: dict[str, Any] = {}
    for c in data.column_names:
        if c in others:
            mine = joined.column(c)
            cols[c] = pc.coalesce(mine, joined.column(f"__cur_{c}").cast(mine.type))
        else:
            cols[c] = joined.column(c)
    return pa.table(cols, schema=data.schema)


def _write_report(path: str, summary: JobSummary) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(asdict(summary), f, indent=2)
    os.replace(tmp, path)
