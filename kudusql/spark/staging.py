"""Staged Spark writes: where the tasks of a write job put their rows until the commit.

Every task of a job writes what it receives under ``<database>/spark-staging/<job id>/``
(named by partition, attempt and a random suffix, so a retried or speculative attempt
never overwrites another), in one of two forms:

* rowsets (an INSERT into a table that is empty when the job is planned): the task
  hands its rows, a chunk at a time, to the tables layer's staged insert
  (``storage/tables/staging.py``: storage's own checks and casts, routing, key-sorted
  DiskRowSets per tablet), so encoding runs in parallel in the tasks and the commit
  only checks keys across tasks and renames directories;
* Arrow IPC files (every other write), applied by the commit with ``Table.write``.

Nothing staged is visible to readers: only the job's commit reads what its successful
tasks listed and removes the directory; an abort removes it too. The driver creates the
job directory when it plans the job and tasks only create entries inside it, never the
directory itself; removal first renames it aside, so a task Spark has not yet stopped
(a cancelled sibling of a failed task, a speculative attempt) fails to stage instead of
re-creating a directory nobody will remove. A directory left behind by a driver that
died is removed by a later commit once it is older than ``STALE_AFTER_S``.

A streaming query stages every micro-batch in one directory of its own,
``stream-<query id>/`` (``stream_dir``), which its tasks create when it is missing;
each file is named by its batch (``b<batch id>-part-...``). The commit of batch N
removes every file of batches up to N (``remove_stream_batches``): what the commit
applied, and what failed or repeated attempts left behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.ipc as ipc

from kudusql.common.errors import DataError
from kudusql.storage.tables.staging import (
    StagedRowErrors,
    StagedRowSet,
    StagingTarget,
    stage_insert,
)

STAGING_DIR = "spark-staging"
SAMPLE_ERRORS = 5
#: Rows a task converts and writes as rowsets at a time.
CHUNK_ROWS = 1_000_000
#: Age (by modification time) after which another job's staging directory is garbage.
STALE_AFTER_S = 24 * 3600.0


@dataclass
class StagedTask:
    """What one task staged: its files and row count (a Spark commit message)."""

    partition: int
    attempt: int
    files: list[str] = field(default_factory=list)
    rows: int = 0
    bytes: int = 0
    #: Staged rowsets (tablet id, staging directory, rowset metadata as a dict).
    rowsets: list[StagedRowSet] = field(default_factory=list)


class RowErrorsFailure(DataError):
    """A write job whose rows failed storage's checks; nothing was applied."""


class JobEnded(DataError):
    """A task tried to stage into a job the driver has already committed or aborted."""


def failure_message(count: int, samples: list[str]) -> str:
    return (
        f"Failed to write {count} rows; sample errors: {'; '.join(samples[:SAMPLE_ERRORS])}. "
        "Nothing was written (set kudu.ignoreRowErrors=true to write the other rows)"
    )


def new_job_dir(database: str) -> str:
    """Create the staging directory of a new job (on the driver) and return its path."""
    path = os.path.join(database, STAGING_DIR, f"job-{uuid.uuid4().hex}")
    for attempt in range(5):
        try:
            os.makedirs(path)
            break
        except FileNotFoundError:  # another job's removal took the empty staging root
            if attempt == 4:  # between our two mkdirs
                raise
    return path


def job_subdir(job_dir: str, *parts: str) -> str:
    """Create (if needed) ``parts`` below ``job_dir``, which must still exist."""
    path = job_dir
    for part in parts:
        path = os.path.join(path, part)
        try:
            os.mkdir(path)
        except FileExistsError:
            pass
        except FileNotFoundError:
            raise _ended(job_dir) from None
    return path


def _ended(job_dir: str) -> JobEnded:
    return JobEnded(
        f"the write job of {job_dir!r} has already ended (committed or aborted); "
        "this task's rows are not staged"
    )


def stage_batches(
    job_dir: str,
    partition: int,
    attempt: int,
    batches: Iterable[pa.RecordBatch],
    *,
    prefix: str = "",
) -> StagedTask:
    """Write ``batches`` to one new IPC file of the job (its name starts with
    ``prefix``); an empty task stages nothing."""
    task = StagedTask(partition, attempt)
    name = f"{prefix}part-{partition:05d}-{attempt}-{uuid.uuid4().hex[:8]}.arrow"
    path = os.path.join(job_dir, name)
    writer: ipc.RecordBatchStreamWriter | None = None
    try:
        for b in batches:
            if not b.num_rows:
                continue
            if writer is None:
                if not os.path.isdir(job_dir):
                    raise _ended(job_dir)
                writer = ipc.new_stream(path, b.schema)
            writer.write_batch(b)
            task.rows += b.num_rows
    except BaseException:
        if writer is not None:
            writer.close()
        with contextlib.suppress(OSError):
            os.remove(path)
        raise
    if writer is not None:
        writer.close()
        task.files.append(path)
        task.bytes = os.path.getsize(path)
    return task


def stage_rowset_batches(
    job_dir: str,
    partition: int,
    attempt: int,
    batches: Iterable[pa.RecordBatch],
    target: StagingTarget,
) -> StagedTask:
    """Stage INSERT rows as DiskRowSets per tablet (see the module docstring); a row
    storage would reject fails the task with the job's row-error message."""
    task = StagedTask(partition, attempt)
    pending: list[pa.RecordBatch] = []
    rows = 0
    chunk = 0

    def directory(tablet: int) -> str:
        name = f"p{partition:05d}-{attempt}-{chunk}-{uuid.uuid4().hex[:8]}"
        return job_subdir(job_dir, f"t{tablet}", name)

    def flush() -> None:
        nonlocal chunk
        data = pa.Table.from_batches(pending)
        try:
            task.rowsets += stage_insert(target, data, directory)
        except StagedRowErrors as e:
            raise RowErrorsFailure(failure_message(e.count, e.samples)) from None
        task.rows += data.num_rows
        chunk += 1

    for b in batches:
        if not b.num_rows:
            continue
        pending.append(b)
        rows += b.num_rows
        if rows >= CHUNK_ROWS:
            flush()
            pending, rows = [], 0
    if pending:
        flush()
    return task


def stream_dir_path(database: str, query_id: str) -> str:
    """Where streaming query ``query_id`` stages its batches."""
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in query_id)
    return os.path.join(database, STAGING_DIR, f"stream-{safe}")


def stream_dir(database: str, query_id: str) -> str:
    """The staging directory of streaming query ``query_id``, created if missing (a task
    creates it: a streaming query has no driver-side plan per batch)."""
    path = stream_dir_path(database, query_id)
    for attempt in range(5):
        try:
            os.makedirs(path, exist_ok=True)
            break
        except FileNotFoundError:  # a job's removal took the empty staging root meanwhile
            if attempt == 4:
                raise
    return path


def batch_prefix(batch_id: int) -> str:
    """The name prefix of the files a streaming query stages for ``batch_id``."""
    return f"b{batch_id}-"


def remove_stream_batches(directory: str, up_to: int) -> None:
    """Remove every file of ``directory`` (a query's ``stream_dir``) staged for a batch
    id up to ``up_to``."""
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir(directory):
            head = name.partition("-")[0]
            if head[:1] == "b" and head[1:].isdigit() and int(head[1:]) <= up_to:
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(directory, name))


def read_staged(files: Iterable[str]) -> Iterator[pa.RecordBatch]:
    for path in files:
        with pa.memory_map(path) as source:
            yield from ipc.open_stream(source)


def remove_job(job_dir: str) -> None:
    """Remove a job's staging directory: renamed aside first, so no straggling task can
    stage into it (or re-create it) while it is being deleted."""
    gone = os.path.join(os.path.dirname(job_dir), "gone-" + os.path.basename(job_dir))
    with contextlib.suppress(FileNotFoundError):
        os.rename(job_dir, gone)
    shutil.rmtree(gone, ignore_errors=True)
    with contextlib.suppress(OSError):
        os.rmdir(os.path.dirname(job_dir))  # the staging root, once empty


def remove_stale_jobs(database: str, keep: str | None = None) -> list[str]:
    """Remove staging directories of jobs that died long ago; returns their paths."""
    root = os.path.join(database, STAGING_DIR)
    removed = []
    now = time.time()
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir(root):
            path = os.path.join(root, name)
            if path == keep:
                continue
            with contextlib.suppress(OSError):
                if now - os.path.getmtime(path) > STALE_AFTER_S:
                    shutil.rmtree(path, ignore_errors=True)
                    removed.append(path)
    return removed
