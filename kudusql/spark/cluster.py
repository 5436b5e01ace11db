"""Spark jobs against a cluster: what tasks keep open, how a task reads and writes.

When ``kudu.master`` names a master (``options.names_cluster``), the driver plans as it
does for a directory, through a ``RemoteDatabase`` (``open_database``): a read's scan
tokens are the cluster's (one per tablet, all at one snapshot, each naming the tablet
server hosting its tablet); a write's plan names the table by the master's id and
schema version. Tasks never open a database directory:

* a read task streams each token's tablet straight from the tablet server the token
  names (``read_token``), through this process's ``TabletServerPool`` for the cluster
  (kept from task to task: Spark reuses its Python workers); only when that server no
  longer hosts the tablet, or cannot be reached, does it ask the master where the
  tablet is now (a ``RemoteDatabase``, ``scan_token_reader``);
* a write task writes each Arrow batch Spark hands it with ``RemoteTable.write``,
  which routes the rows to tablets and applies each tablet's part atomically at that
  tablet's HybridTime (``write_task``; ``kudu.ignoreNull`` writes each row without its
  NULL columns, which an upsert or update then leaves as stored). Its rows are
  visible as soon as it writes them: a cluster has no staging, so a cluster write job
  is not all-or-nothing (nor is kudu-spark's).

Credentials: the driver resolves the cluster's secret (``kudusql.secretFile``, the URL's
``secret_file``, the driver's ``KUDUSQL_SECRET_FILE``) and the plan carries it to the
tasks, as kudu-spark ships its authentication credentials to the executors; a driver
that resolved none leaves each task to its own environment's ``KUDUSQL_SECRET_FILE``.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pyarrow as pa

from kudusql.cluster.client.database import RemoteDatabase
from kudusql.cluster.client.scan_token import RemoteScanToken
from kudusql.cluster.client.target import SECRET_FILE_ENV, TLS_CA_ENV, ClusterTarget
from kudusql.cluster.client.tserver_client import TabletServerPool
from kudusql.cluster.errors import ServiceUnavailable, TabletNotFound
from kudusql.cluster.rpc_client import DEFAULT_TIMEOUT
from kudusql.cluster.security import read_secret_file
from kudusql.common.errors import ProgrammingError
from kudusql.common.hybrid_time import to_micros
from kudusql.common.row_operations import WriteOp

#: Row errors a write task keeps as samples for its message.
SAMPLE_ERRORS = 5


def task_target(target: ClusterTarget) -> ClusterTarget:
    """``target`` as a task uses it: without a secret from the driver, the task's own
    environment's (``KUDUSQL_SECRET_FILE``, ``KUDUSQL_TLS_CA``)."""
    if target.secret is None and os.environ.get(SECRET_FILE_ENV):
        target = replace(target, secret=read_secret_file(os.environ[SECRET_FILE_ENV]))
    if target.tls_root is None and os.environ.get(TLS_CA_ENV):
        with open(os.environ[TLS_CA_ENV], "rb") as f:
            target = replace(target, tls_root=f.read())
    return target


def connect(target: ClusterTarget) -> RemoteDatabase:
    """A new connection to the cluster (checked reachable)."""
    db = RemoteDatabase(
        target.address,
        secret=target.secret,
        tls_root=target.tls_root,
        timeout=target.timeout or DEFAULT_TIMEOUT,
    )
    try:
        db.master.table_names()
    except BaseException:
        db.close()
        raise
    return db


@contextlib.contextmanager
def open_database(target: ClusterTarget) -> Iterator[RemoteDatabase]:
    """The cluster, for the driver's planning or DDL, closed after the block."""
    db = connect(target)
    try:
        yield db
    finally:
        db.close()


# -- what a worker process keeps -------------------------------------------------------------

_lock = threading.Lock()
_POOLS: dict[ClusterTarget, TabletServerPool] = {}
_DATABASES: dict[ClusterTarget, RemoteDatabase] = {}


def kept_pool(target: ClusterTarget) -> TabletServerPool:
    """This process's calls to the cluster's tablet servers (one connection per server,
    reused by later tasks)."""
    with _lock:
        pool = _POOLS.get(target)
        if pool is None:
            pool = _POOLS[target] = TabletServerPool(
                secret=target.secret,
                tls_root=target.tls_root,
                timeout=target.timeout or DEFAULT_TIMEOUT,
            )
        return pool


def kept_database(target: ClusterTarget) -> RemoteDatabase:
    """This process's connection to the cluster (its master and tablet servers)."""
    with _lock:
        db = _DATABASES.get(target)
    if db is not None and not db.closed:
        return db
    db = connect(target)
    with _lock:
        _DATABASES[target] = db
    return db


# -- reads ----------------------------------------------------------------------------------


def read_token(
    target: ClusterTarget, data: bytes, *, ordered: bool = False
) -> Iterator[pa.RecordBatch]:
    """The rows of one serialized cluster scan token, as the tablet server sends them."""
    target = task_target(target)
    token = RemoteScanToken.deserialize(data)
    try:
        reader = kept_pool(target).scan(
            token.address,
            token.tablet_id,
            list(token.columns),
            list(token.predicates),
            token.snapshot,
            ordered=ordered,
            key_range=(token.key_lo, token.key_hi),
        )
    except (TabletNotFound, ServiceUnavailable):
        # The tablet moved, or its server is away: where is it now (the master knows)?
        db = kept_database(target)
        db.refresh()
        reader = db.scan_token_reader(token, ordered=ordered)
    yield from reader


# -- writes ---------------------------------------------------------------------------------


@dataclass
class TaskWrite:
    """What one write task applied (its Spark commit message)."""

    partition: int
    attempt: int
    rows: int = 0
    applied: int = 0
    ignored: int = 0
    rejected: int = 0
    sample_errors: list[str] = field(default_factory=list)
    #: The highest HybridTime a tablet applied this task's rows at (0: none).
    timestamp: int = 0

    @property
    def timestamp_micros(self) -> int | None:
        return to_micros(self.timestamp) + 1 if self.timestamp else None


#: Operations for which ``kudu.ignoreNull`` leaves a NULL's column as stored.
KEEPS_STORED = (WriteOp.UPSERT, WriteOp.UPSERT_IGNORE, WriteOp.UPDATE, WriteOp.UPDATE_IGNORE)


def ignore_null_parts(data: pa.Table, keys: Sequence[str]) -> list[pa.Table]:
    """``data`` as writes that leave each row's NULL columns as stored (kudu-spark's
    ``ignoreNull``: a NULL is an unset column): an upsert or update of a subset of the
    columns keeps the others, so the rows are grouped by which columns are NULL and each
    group written without those. Rows keep their order across groups when a key repeats
    in the batch (then the groups are runs of consecutive rows)."""
    others = [c for c in data.column_names if c not in keys]
    nulls = [c for c in others if data.column(c).null_count]
    if not nulls or not data.num_rows:
        return [data]
    pattern = np.stack(
        [np.asarray(data.column(c).is_null().to_numpy(zero_copy_only=False)) for c in nulls],
        axis=1,
    )
    distinct_keys = data.group_by(list(keys)).aggregate([]).num_rows
    if distinct_keys == data.num_rows:
        kinds, which = np.unique(pattern, axis=0, return_inverse=True)
        groups = [(kinds[i], np.flatnonzero(which == i)) for i in range(len(kinds))]
    else:  # a key written twice: runs of one pattern, in the batch's order
        change = np.flatnonzero((pattern[1:] != pattern[:-1]).any(axis=1)) + 1
        bounds = [0, *change.tolist(), data.num_rows]
        groups = [(pattern[a], np.arange(a, b)) for a, b in itertools.pairwise(bounds)]
    parts = []
    for kind, rows in groups:
        skip = {c for c, null in zip(nulls, kind, strict=True) if null}
        part = data.take(rows).select([c for c in data.column_names if c not in skip])
        parts.append(part)
    return parts


def write_task(
    target: ClusterTarget,
    table_id: str,
    table: str,
    schema_version: int,
    operation: str,
    batches: Iterable[pa.RecordBatch],
    result: TaskWrite,
    *,
    ignore_null: bool = False,
) -> TaskWrite:
    """Write every batch to table ``table_id`` (refused when it was dropped or altered
    since the job was planned), counting into ``result``; with ``ignore_null``, an
    upsert or update leaves each NULL's column as stored (``ignore_null_parts``)."""
    db = kept_database(task_target(target))
    # The master's record now, not one an earlier task of this worker cached: the
    # table may have been dropped and created again under the same name since.
    db.refresh()
    remote = db.table_by_id(table_id, table)
    if remote.meta.schema_version != schema_version:
        raise ProgrammingError(
            f"table {table!r} was altered while the write job ran (schema version "
            f"{schema_version} -> {remote.meta.schema_version}); run the job again"
        )
    op = WriteOp.parse(operation)
    keys = remote.schema.key_names
    for batch in batches:
        if not batch.num_rows:
            continue
        result.rows += batch.num_rows
        data = pa.Table.from_batches([batch])
        parts = ignore_null_parts(data, keys) if ignore_null and op in KEEPS_STORED else [data]
        for part in parts:
            r = remote.write(part, op)
            result.applied += r.applied
            result.ignored += r.ignored
            result.rejected += len(r.errors)
            room = SAMPLE_ERRORS - len(result.sample_errors)
            if room > 0:
                result.sample_errors += [str(e) for e in r.errors[:room]]
            if r.applied or r.ignored:
                result.timestamp = max(result.timestamp, r.timestamp)
    return result
