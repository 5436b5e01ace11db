"""Staged Spark writes: where the tasks of a write job put their rows until the commit.

Every task of a job writes the rows it receives to its own Arrow IPC file under
``<database>/spark-staging/<job id>/`` (named by partition, attempt and a random
suffix, so a retried or speculative attempt never overwrites another). Nothing there
is visible to readers: only the job's commit reads the files its successful tasks
listed, applies them and removes the directory; an abort removes it too. A directory
left behind by a driver that died is removed by the next commit once it is older than
``STALE_AFTER_S``.
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

STAGING_DIR = "spark-staging"
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


def new_job_dir(database: str) -> str:
    return os.path.join(database, STAGING_DIR, f"job-{uuid.uuid4().hex}")


def stage_batches(
    job_dir: str, partition: int, attempt: int, batches: Iterable[pa.RecordBatch]
) -> StagedTask:
    """Write ``batches`` to one new IPC file of the job; an empty task stages nothing."""
    os.makedirs(job_dir, exist_ok=True)
    task = StagedTask(partition, attempt)
    path = os.path.join(job_dir, f"part-{partition:05d}-{attempt}-{uuid.uuid4().hex[:8]}.arrow")
    writer: ipc.RecordBatchStreamWriter | None = None
    try:
        for b in batches:
            if not b.num_rows:
                continue
            if writer is None:
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


def read_staged(files: Iterable[str]) -> Iterator[pa.RecordBatch]:
    for path in files:
        with pa.memory_map(path) as source:
            yield from ipc.open_stream(source)


def remove_job(job_dir: str) -> None:
    shutil.rmtree(job_dir, ignore_errors=True)
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
