"""The work of a merging compaction, run in a worker process so it keeps off the GIL.

A merging compaction spends seconds of CPU reading its inputs, merging them by key
(``compaction.merge_rowsets``) and writing the outputs (``rowset_writer``). Run in a
thread, much of that holds the GIL the writer needs: on the sustained load's tablet
(2 cores, quiet machine) merges running back to back in a thread cut a writer from
~170k to 126-138k rows/s; the same merges in another process left it at ~173k (and
finished sooner). See docs/DECISIONS.md.

This module owns that middle part as a job. ``MergeJob`` names the input rowsets (their
metadata as the superblock has it once their DeltaMemStores are flushed), the ancient
history mark and the first output rowset id; ``run_merge`` reads, merges and writes,
and returns the output metadata and where each input rowid went (``MergeResult``). The
tablet does everything around it (choosing inputs, flushing them, migrating mutations
that arrive meanwhile, publishing): a job reads immutable files and writes new rowset
directories that nothing names until the tablet publishes them, so a job that fails or
dies leaves nothing visible.

``MergeWorker`` runs jobs in one long-lived child (``python -m`` this module), each job
and its result pickled over the child's stdin and stdout. The child dies with its
parent (Linux ``PR_SET_PDEATHSIG``, and a parent-pid check before each job): a SIGKILLed
writer must not leave a merge writing rowset directories into a tablet that a new
writer may reopen. A child that dies mid-job fails that job (``OperationalError``); the
next job starts a new child.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import IO, Any

import numpy as np
import pyarrow as pa

from kudusql.common.errors import OperationalError
from kudusql.common.schema import Schema
from kudusql.storage.tablet.compaction import MergeInput, merge_rowsets, only_columns
from kudusql.storage.tablet.diskrowset import DiskRowSet, RowSetMeta
from kudusql.storage.tablet.rowset_writer import RowSetWriteOptions, write_rowsets

_LEN = struct.Struct("<Q")


@dataclass
class MergeJob:
    """Merge the rowsets ``inputs`` of the tablet at ``tablet_dir`` into new rowsets
    numbered from ``first_id``."""

    tablet_dir: str
    schema: Schema
    inputs: list[RowSetMeta]
    ahm: int
    first_id: int
    options: RowSetWriteOptions


@dataclass
class MergeResult:
    metas: list[RowSetMeta]  # the output rowsets, written and synced, not yet published
    rowid_maps: list[np.ndarray]  # per input: old rowid -> output position (-1: dropped)
    rows_dropped: int


def merge_input(drs: DiskRowSet, schema: Schema) -> MergeInput:
    """Everything a merge needs of one rowset: every column, keys, UNDO and REDO events."""
    n = drs.num_rows
    ids = [c.id for c in schema.columns]
    return MergeInput(
        drs.key_reader().read_all().combine_chunks(),
        {c.id: drs.read_column_range(c, 0, n) for c in schema.columns},
        only_columns(drs.undo_file_deltas(), ids),
        only_columns(drs.redo_file_deltas(), ids),
    )


def run_merge(
    job: MergeJob,
    rowsets: Sequence[DiskRowSet] | None = None,
    pool: ThreadPoolExecutor | None = None,
) -> MergeResult:
    """Do ``job``; ``rowsets`` are the inputs already open (the in-thread path, which
    shares the tablet's block cache), else they are opened from ``job.inputs``."""
    schema = job.schema
    inputs = (
        list(rowsets)
        if rowsets is not None
        else [DiskRowSet(job.tablet_dir, m, None) for m in job.inputs]
    )
    merged = merge_rowsets(
        [merge_input(d, schema) for d in inputs], [c.id for c in schema.key_columns], job.ahm
    )
    arrow_schema = pa.schema([c.arrow_field() for c in schema.columns])
    rows = pa.Table.from_arrays([merged.rows[c.id] for c in schema.columns], schema=arrow_schema)
    metas = write_rowsets(
        job.tablet_dir,
        job.first_id,
        schema,
        rows,
        merged.keys,
        merged.undo,
        merged.redo,
        job.options,
        pool,
    )
    return MergeResult(metas, merged.rowid_maps, merged.rows_dropped)


# -- the pipe protocol: an 8-byte little-endian length, then a pickle --------------------------
def _send(f: IO[bytes], obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    f.write(_LEN.pack(len(data)))
    f.write(data)
    f.flush()


def _receive(f: IO[bytes]) -> Any:
    """The next object, or None at the end of the stream (the other side is gone)."""
    head = f.read(_LEN.size)
    if len(head) < _LEN.size:
        return None
    (n,) = _LEN.unpack(head)
    data = f.read(n)
    if len(data) < n:
        return None
    return pickle.loads(data)


def _transportable(e: BaseException) -> BaseException:
    """``e`` if it survives pickling, else an OperationalError saying what it was."""
    try:
        pickle.loads(pickle.dumps(e))
        return e
    except Exception:
        return OperationalError(f"merge worker: {type(e).__name__}: {e}")


class MergeWorker:
    """One child process that runs ``MergeJob``s, one at a time (see the module doc)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None

    def run(self, job: MergeJob) -> MergeResult:
        with self._lock:
            proc = self._start()
            assert proc.stdin is not None and proc.stdout is not None
            try:
                _send(proc.stdin, job)
                reply = _receive(proc.stdout)
            except OSError as e:
                reply = None
                cause: BaseException | None = e
            else:
                cause = None
            if reply is None:
                self._reap()
                raise OperationalError(
                    f"the merge worker process died during a compaction of {job.tablet_dir}"
                ) from cause
        kind, value = reply
        if kind == "err":
            raise value
        assert isinstance(value, MergeResult)
        return value

    @property
    def pid(self) -> int | None:
        """The child's process id while it runs."""
        p = self._proc
        return p.pid if p is not None and p.poll() is None else None

    def close(self) -> None:
        """Stop the child (it exits at the end of its input) and wait for it."""
        with self._lock:
            self._reap()

    def _start(self) -> subprocess.Popen[bytes]:
        p = self._proc
        if p is not None and p.poll() is None:
            return p
        self._reap()  # a child that died between jobs: replaced without failing one
        package = os.path.abspath(sys.modules["kudusql"].__file__ or "")
        root = os.path.dirname(os.path.dirname(package))  # where kudusql imports from
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(x for x in (root, env.get("PYTHONPATH", "")) if x)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", __name__, str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            close_fds=True,
        )
        return self._proc

    def _reap(self) -> None:
        p, self._proc = self._proc, None
        if p is None:
            return
        with contextlib.suppress(OSError):  # a dead child's pipe may refuse the flush
            if p.stdin is not None:
                p.stdin.close()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        if p.stdout is not None:
            p.stdout.close()


# -- the child ------------------------------------------------------------------------------------
_PR_SET_PDEATHSIG = 1


def _die_with(parent: int) -> None:
    """Ask the kernel to SIGKILL this process when its parent exits (Linux), and leave
    at once if the parent is already gone."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(0)


def _serve(parent: int) -> None:
    _die_with(parent)
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stray prints go to stderr, never into the reply stream
    inp = sys.stdin.buffer
    while True:
        job = _receive(inp)
        if job is None or os.getppid() != parent:
            return
        try:
            reply: tuple[str, Any] = ("ok", run_merge(job))
        except BaseException as e:
            reply = ("err", _transportable(e))
        _send(out, reply)


if __name__ == "__main__":
    # Serve through the package's module, not __main__: results must pickle as
    # kudusql.storage.tablet.merge_worker.MergeResult for the parent to load them.
    from kudusql.storage.tablet import merge_worker

    merge_worker._serve(int(sys.argv[1]))
